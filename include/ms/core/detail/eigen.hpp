// ms/core/detail/eigen.hpp — Eigen inside libms: its Core module and the
// Eigen scalar types ms's element types compute as.
//
// Stage: core (private). Public headers include no Eigen header; libms's
// sources include this one and map ms::float16_t / ms::bfloat16_t (the
// storage types users see, ms/core/half.hpp) onto Eigen::half /
// Eigen::bfloat16, which have the same layout and rounding, where Eigen
// computes:
//
//   using E = ms::detail::eigen_t<T>;                 // T, or Eigen::half for float16_t
//   Eigen::Map<const Eigen::Array<E, -1, 1>> a(ms::detail::eigen_ptr(p), n);
#pragma once

#if !defined(MS_BUILDING_LIBRARY)
#error \
    "ms/core/detail/eigen.hpp is private to libms: include <ms/core/dtype.hpp> (or <ms/cell.hpp>)"
#endif

// GCC 12 reports false "used uninitialized" warnings inside its own AVX-512
// intrinsic headers (_mm512_undefined_*) when Eigen's packet code is inlined
// (GCC PR 105593). Diagnostics follow source locations, so silencing them
// around Eigen's first inclusion covers those headers and nothing of ours.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop
#else
#include <Eigen/Core>
#endif

#include "ms/core/dtype.hpp"

namespace ms::detail {

template <class T>
struct eigen_scalar {
  using type = T;
};
template <>
struct eigen_scalar<float16_t> {
  using type = Eigen::half;
};
template <>
struct eigen_scalar<bfloat16_t> {
  using type = Eigen::bfloat16;
};
template <class T>
struct eigen_scalar<const T> {
  using type = const typename eigen_scalar<T>::type;
};
/// The scalar type Eigen computes on for the element type T.
template <class T>
using eigen_t = typename eigen_scalar<T>::type;

static_assert(sizeof(Eigen::half) == sizeof(float16_t) &&
              sizeof(Eigen::bfloat16) == sizeof(bfloat16_t));

/// Elements of T seen as Eigen's scalars (the same bits).
template <class T>
eigen_t<T>* eigen_ptr(T* p) noexcept {
  return reinterpret_cast<eigen_t<T>*>(p);
}

/// An Eigen scalar as the element type T (the same bits).
template <class T>
T from_eigen(const eigen_t<T>& v) noexcept {
  if constexpr (std::is_same_v<T, eigen_t<T>>)
    return v;
  else
    return std::bit_cast<T>(v);
}
/// An element as Eigen's scalar (the same bits).
template <class T>
eigen_t<T> to_eigen(const T& v) noexcept {
  if constexpr (std::is_same_v<T, eigen_t<T>>)
    return v;
  else
    return std::bit_cast<eigen_t<T>>(v);
}

}  // namespace ms::detail
