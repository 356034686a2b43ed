// ms/dyn/spec.hpp — how a user asks for dynamic shapes: the auto-dynamic policy
// and explicit specs that travel with a function.
//
// Stage: dyn (above ir, below the jit front end that consumes it). The
// auto-dynamic-shape manager and the symbolic graphs behind these options are
// private (ms/dyn/detail/).
//
//   auto f = ms::jit(ms::enable_dynamic(fn, ms::TensorSpec({-1, 784}, ms::float32),
//                                           ms::TensorSpec({-1}, ms::int64)));
//   auto g = ms::jit(fn, {.dynamic = 1, .dynamic_policy = ms::DynamicPolicy::ChangedDims});
#pragma once

#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ms/core/symbolic.hpp"

namespace ms {

/// How auto-dynamic shapes generalize a new signature:
/// `{.dynamic = 1, .dynamic_policy = ms::DynamicPolicy::ChangedDims}`.
enum class DynamicPolicy : std::uint8_t {
  /// MindSpore's manager (the default): 2 static graphs, then one generalized
  /// graph where a changed tensor has every dim -1, or any rank.
  AllDims,
  /// From the 2nd signature on, only the dims that changed become symbols;
  /// equal changes share a symbol.
  ChangedDims,
};
/// A dynamic policy from text ("all_dims", "changed_dims"; case-insensitive),
/// as a config file or a command line gives it. ValueError naming the accepted
/// values otherwise.
DynamicPolicy parse_dynamic_policy(std::string_view text);
/// "all_dims" or "changed_dims".
std::string_view to_string(DynamicPolicy policy);
/// Prints to_string(policy).
std::ostream& operator<<(std::ostream& os, DynamicPolicy policy);

/// A function whose arguments follow explicit specs (MindSpore's
/// `enable_dynamic`): `ms::jit(ms::enable_dynamic(fn, ms::TensorSpec({-1, 784}, ms::float32)))`.
/// It takes precedence over `Cell::set_inputs` (using both is a ValueError)
/// and over `JitConfig::input_signature`.
template <class F>
struct EnableDynamic {
  /// The wrapped function.
  F fn;
  /// One spec per tensor argument of `fn`, in order.
  std::vector<TensorSpec> specs;
  /// Calls the wrapped function with `a` (the specs only matter under ms::jit).
  template <class... A>
  decltype(auto) operator()(A&&... a) {
    return fn(std::forward<A>(a)...);
  }
};

namespace dyn {
/// A callable with dynamic-shape specs of its own (a cell after set_inputs).
template <class T>
concept HasInputs = requires(const T& t) {
  { t.get_inputs() } -> std::convertible_to<const std::vector<TensorSpec>&>;
};
/// A cell held by reference (cells are not copyable): `ms::jit(net)`.
template <class C>
struct CellRef {
  /// The cell (not owned: it must outlive the jitted function).
  C* cell;
  /// Calls the cell with `a`.
  template <class... A>
  decltype(auto) operator()(A&&... a) {
    return (*cell)(std::forward<A>(a)...);
  }
  /// The cell's specs (set by CellBase::set_inputs).
  const std::vector<TensorSpec>& get_inputs() const { return cell->get_inputs(); }
  /// The cell's jit config (set by CellBase::set_jit_config; null when none).
  auto get_jit_config() const requires requires(const C& c) { c.get_jit_config(); }
  { return cell->get_jit_config(); }
};
/// True for the result of ms::enable_dynamic.
template <class T>
struct IsEnableDynamic : std::false_type {};
template <class T>
struct IsEnableDynamic<EnableDynamic<T>> : std::true_type {};
}  // namespace dyn

/// `fn` with one spec per argument, as a list: `ms::enable_dynamic(fn, {spec0, spec1})`.
/// A cell passed as an lvalue is held by reference.
template <class F>
auto enable_dynamic(F&& fn, std::vector<TensorSpec> specs) {
  using D = std::remove_cvref_t<F>;
  if constexpr (dyn::HasInputs<D> && std::is_lvalue_reference_v<F>)
    return EnableDynamic<dyn::CellRef<std::remove_reference_t<F>>>{{&fn}, std::move(specs)};
  else
    return EnableDynamic<D>{std::forward<F>(fn), std::move(specs)};
}

/// `fn` with one spec per argument, one after the other:
/// `ms::enable_dynamic(fn, spec0, spec1)`.
template <class F, class... S>
requires(sizeof...(S) >= 1 && (std::same_as<std::remove_cvref_t<S>, TensorSpec> &&
                               ...)) auto enable_dynamic(F&& fn, S&&... specs) {
  return enable_dynamic(std::forward<F>(fn), std::vector<TensorSpec>{std::forward<S>(specs)...});
}

}  // namespace ms
