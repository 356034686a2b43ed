// ms/ops/entry.hpp — op entries: one typed struct holds everything about an op.
//
// Stage: ops. An entry has the op's name, kind and arity; a typed `Attrs`
// struct whose member initializers are the defaults (written only there) and
// whose `fields(visit)` calls `visit(name, &Attrs::member)` for each member, so that attributes
// serialize as (name, value) pairs for dumps and export; shape and dtype inference; evaluation (a
// call into kernels/: `run` writes outputs its caller allocated with the inferred types, or
// `eval` returns them when they are not always fresh dense tensors: a view, an input, a
// layout that follows an input's); its vector-Jacobian product beside the evaluation, written with
// ops so that gradients are graphs and differentiable again; its properties; and its samples for
// the table-driven tests. The registry row (OpDef), tracing, printing, autodiff and the tests are
// derived from it; the public function beside it is one `invoke` line that states the signature
// users call. Entries are listed once per family in src/ops/
// (`register_entries<...>`).
//
//   struct Cumsum {
//     static constexpr std::string_view name = "cumsum";
//     static constexpr OpKind kind = OpKind::Reduction;
//     static constexpr Arity arity{1, 1};
//     static constexpr Props props{};
//     struct Attrs {
//       std::int64_t axis = 0;
//       static void fields(auto&& visit) { visit("axis", &Attrs::axis); }
//     };
//     static std::vector<TensorType> infer(const Attrs&, std::span<const TensorType>);
//     static void run(const Attrs&, std::span<const Tensor> in, std::span<const Tensor> out);
//     static std::vector<Tensor> vjp(const Attrs&, const GradContext&);
//     static Samples samples();
//   };
//   inline Tensor cumsum(const Tensor& x, const ops::Cumsum::Attrs& a = {}) {  // in ms::
//     return ops::invoke1<ops::Cumsum>({x}, a);                               // {.axis = 1}
//   }
//
// docs/adding_an_op.md walks through adding one.
#pragma once

#include <concepts>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ms/ops/op.hpp"

namespace ms::ops {

/// How many inputs an op takes (`max` -1: any number from `min`).
struct Arity {
  /// The fewest inputs.
  int min = 1;
  /// The most inputs (-1: no limit).
  int max = 1;
};

/// What passes and tests may assume of an op.
struct Props {
  /// Whether gradients flow through the op (false: its inputs get no gradient from it).
  bool differentiable = true;
  /// For a non-differentiable op whose gradient is not zero: why ms cannot
  /// differentiate through it (a gradient reaching it is then a ValueError).
  std::string_view no_grad_reason = {};
  /// The output views the input's memory (a strided view, no copy) on every
  /// eager call: slice, select, transpose, ... Writes through one reach the other.
  bool view = false;
  /// The output may share memory with an input without being a view on every
  /// call (reshape of a contiguous input, cast to the same dtype, split's parts,
  /// a host callback that returns its argument): the jit's executor then never
  /// writes into that input in place. Implied by `view`.
  bool may_alias = false;
  /// Draws from a Generator when it runs: never folded, merged or dropped.
  bool random = false;
  /// Facts for the jit's simplification (an entry whose attributes decide
  /// whether it is the identity adds `static bool is_identity(const Attrs&)`).
  Algebra algebra = {};
};

/// An entry's attributes with no members.
struct NoAttrs {
  /// No fields: calls nothing.
  static void fields(auto&& /*visit*/) {}
};

/// What the registry derives a row from.
template <class E>
concept OpEntry = requires {
  { E::name } -> std::convertible_to<std::string_view>;
  { E::kind } -> std::convertible_to<OpKind>;
  { E::arity } -> std::convertible_to<Arity>;
  { E::props } -> std::convertible_to<Props>;
  E::Attrs::fields([](std::string_view, auto) {});
};

namespace detail {
template <class T>
struct optional_of {
  using type = void;
};
template <class T>
struct optional_of<std::optional<T>> {
  using type = T;
};
}  // namespace detail

/// The serialized form of typed attributes: every field, in declaration order
/// (a `std::optional` field only when it holds a value).
template <class A>
Attrs attrs_to(const A& a) {
  Attrs out;
  A::fields([&](std::string_view name, auto member) {
    const auto& v = a.*member;
    using T = std::remove_cvref_t<decltype(v)>;
    if constexpr (std::is_void_v<typename detail::optional_of<T>::type>)
      out.set(std::string(name), AttrValue(v));
    else if (v.has_value())
      out.set(std::string(name), AttrValue(*v));
  });
  return out;
}

/// Typed attributes from their serialized form: a field that is absent keeps
/// its default; one of another type is a ValueError naming `op`.
template <class A>
A attrs_from(const Attrs& s, std::string_view op) {
  A a{};
  A::fields([&](std::string_view name, auto member) {
    if (!s.has(name)) return;
    auto& v = a.*member;
    using T = std::remove_cvref_t<decltype(v)>;
    using U = typename detail::optional_of<T>::type;
    if constexpr (std::is_void_v<U>)
      v = s.get<T>(name, op);
    else
      v = s.get<U>(name, op);
  });
  return a;
}

/// The registry row of entry E (listed in its family in src/ops/).
template <class E>
const OpDef& def_of() {
  static const OpDef& d = op(E::name);
  return d;
}

/// Runs entry E on `inputs` (or records it while tracing) through its row.
template <class E>
std::vector<Tensor> invoke(std::initializer_list<Tensor> inputs, const typename E::Attrs& a) {
  return call_typed(def_of<E>(), std::span<const Tensor>(inputs.begin(), inputs.size()), &a);
}
/// `invoke` for a list of inputs (concat, stack).
template <class E>
std::vector<Tensor> invoke(std::span<const Tensor> inputs, const typename E::Attrs& a) {
  return call_typed(def_of<E>(), inputs, &a);
}
/// `invoke` for an op with one output.
template <class E>
Tensor invoke1(std::initializer_list<Tensor> inputs, const typename E::Attrs& a) {
  auto out = invoke<E>(inputs, a);
  MS_ASSERT(out.size() == 1);
  return std::move(out[0]);
}

}  // namespace ms::ops
