// The casts of mixed precision (ms/nn/amp.hpp) on a cell call's arguments that
// hold tensors inside containers: std::vector, std::array, std::tuple,
// std::pair, std::optional, std::variant and std::map values (ms::Kwargs is a
// map of variants), nested to any depth.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ms/core/tensor.hpp"

namespace ms::detail {

/// t cast to `dtype` when it is a defined floating tensor of another dtype,
/// else t (defined in src/nn/amp.cpp).
Tensor amp_cast(const Tensor& t, DType dtype);

/// Whether a value of type X holds ms::Tensor values in the containers
/// amp_cast_nested walks (X itself being Tensor counts).
template <class X>
struct HoldsTensor : std::bool_constant<std::is_same_v<X, Tensor>> {};
template <class X, class A>
struct HoldsTensor<std::vector<X, A>> : HoldsTensor<X> {};
template <class X, std::size_t N>
struct HoldsTensor<std::array<X, N>> : HoldsTensor<X> {};
template <class... X>
struct HoldsTensor<std::tuple<X...>> : std::bool_constant<(HoldsTensor<X>::value || ...)> {};
template <class A, class B>
struct HoldsTensor<std::pair<A, B>>
    : std::bool_constant<HoldsTensor<A>::value || HoldsTensor<B>::value> {};
template <class X>
struct HoldsTensor<std::optional<X>> : HoldsTensor<X> {};
template <class... X>
struct HoldsTensor<std::variant<X...>> : std::bool_constant<(HoldsTensor<X>::value || ...)> {};
template <class K, class V, class C, class A>
struct HoldsTensor<std::map<K, V, C, A>> : HoldsTensor<V> {};

/// Whether X (cv and references removed) holds tensors (HoldsTensor).
template <class X>
inline constexpr bool holds_tensor_v = HoldsTensor<std::remove_cvref_t<X>>::value;

template <class X>
X amp_cast_nested(const X& x, DType dtype);

template <class X>
struct AmpCastNested {
  static X run(const X& x, DType) { return x; }  // nothing of a tensor inside
};
template <>
struct AmpCastNested<Tensor> {
  static Tensor run(const Tensor& x, DType dtype) { return amp_cast(x, dtype); }
};
template <class X, class A>
struct AmpCastNested<std::vector<X, A>> {
  static std::vector<X, A> run(const std::vector<X, A>& x, DType dtype) {
    std::vector<X, A> out;
    out.reserve(x.size());
    for (const auto& e : x) out.push_back(amp_cast_nested(X(e), dtype));
    return out;
  }
};
template <class X, std::size_t N>
struct AmpCastNested<std::array<X, N>> {
  static std::array<X, N> run(const std::array<X, N>& x, DType dtype) {
    std::array<X, N> out = x;
    for (auto& e : out) e = amp_cast_nested(e, dtype);
    return out;
  }
};
template <class... X>
struct AmpCastNested<std::tuple<X...>> {
  static std::tuple<X...> run(const std::tuple<X...>& x, DType dtype) {
    return std::apply(
        [&](const auto&... e) { return std::tuple<X...>(amp_cast_nested(e, dtype)...); }, x);
  }
};
template <class A, class B>
struct AmpCastNested<std::pair<A, B>> {
  static std::pair<A, B> run(const std::pair<A, B>& x, DType dtype) {
    return {amp_cast_nested(x.first, dtype), amp_cast_nested(x.second, dtype)};
  }
};
template <class X>
struct AmpCastNested<std::optional<X>> {
  static std::optional<X> run(const std::optional<X>& x, DType dtype) {
    if (!x.has_value()) return std::nullopt;
    return amp_cast_nested(*x, dtype);
  }
};
template <class... X>
struct AmpCastNested<std::variant<X...>> {
  static std::variant<X...> run(const std::variant<X...>& x, DType dtype) {
    return std::visit(
        [&](const auto& v) {
          using V = std::remove_cvref_t<decltype(v)>;
          return std::variant<X...>(std::in_place_type<V>, amp_cast_nested(v, dtype));
        },
        x);
  }
};
template <class K, class V, class C, class A>
struct AmpCastNested<std::map<K, V, C, A>> {
  static std::map<K, V, C, A> run(const std::map<K, V, C, A>& x, DType dtype) {
    std::map<K, V, C, A> out;
    for (const auto& [k, v] : x) out.emplace(k, amp_cast_nested(v, dtype));
    return out;
  }
};

/// A copy of x with every ms::Tensor inside it (the containers of
/// HoldsTensor, nested) cast by amp_cast to `dtype`; tensors of derived types
/// (as Parameter) and every other value are copied as they are.
///
///   std::vector<ms::Tensor> v = ms::detail::amp_cast_nested(args, ms::bfloat16);
template <class X>
X amp_cast_nested(const X& x, DType dtype) {
  return AmpCastNested<X>::run(x, dtype);
}

}  // namespace ms::detail
