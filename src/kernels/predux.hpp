// src/kernels/predux.hpp — private to src/kernels: the lane sums of several
// SIMD packets, four at once where the CPU allows, and the multiply-add of
// their scalar tails, for the dot products of src/kernels/gemm.cpp (a few
// rows times B^T), the decoding scores of src/kernels/attention.cpp and the
// row statistics of src/kernels/norm.cpp.
#pragma once

#include <cmath>
#include <type_traits>

#include "ms/core/detail/eigen.hpp"

namespace ms::kernels::detail {

// a * b + c, rounded once where the CPU has FMA, else twice: the same bits
// however the compiler treats the loop around it. `c += a * b` may be fused
// or not: for the Intel Xeon of model 207 (-march=native) GCC 12 multiplied
// the tails of a group of four rows as one vector and added the products in
// order, unfused, where a row alone was fused (test_gemm "gemm of one row: a
// row of B^T gives the same bits in a group as alone").
template <class T>
inline T madd(T a, T b, T c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

#if defined(EIGEN_VECTORIZE_AVX512DQ)
// The sums of the 16 lanes of a0, a1, a2 and a3, each added in the order of
// Eigen's predux (the upper half onto the lower twice, then (l0 + l2) +
// (l1 + l3)), four at a time in registers (predux stored each accumulator
// and read its halves back: 15 % of a batch-1 product's time at k = 192).
// Test: "gemm of one row: a row of B^T gives the same bits in a group as alone".
inline __m128 predux4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const auto fold = [](__m512 v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  };
  const __m128 b0 = fold(a0), b1 = fold(a1), b2 = fold(a2), b3 = fold(a3);
  // Lanes l0 + l2 and l1 + l3 of rows 0, 1 (s01) and 2, 3 (s23), interleaved.
  const __m128 s01 = _mm_add_ps(_mm_unpacklo_ps(b0, b1), _mm_unpackhi_ps(b0, b1));
  const __m128 s23 = _mm_add_ps(_mm_unpacklo_ps(b2, b3), _mm_unpackhi_ps(b2, b3));
  return _mm_add_ps(_mm_movelh_ps(s01, s23), _mm_movehl_ps(s23, s01));
}
#endif

// out[r] = Eigen's predux(acc[r]) for the N packets of scalar T at acc:
// four at once with predux4 where it applies, the same sums.
template <class T, int N>
inline void predux_each(const typename Eigen::internal::packet_traits<T>::type* acc, T* out) {
#if defined(EIGEN_VECTORIZE_AVX512DQ)
  if constexpr (std::is_same_v<T, float> && N == 4 &&
                Eigen::internal::packet_traits<T>::size == 16) {
    _mm_storeu_ps(out, predux4(acc[0], acc[1], acc[2], acc[3]));
    return;
  }
#endif
  for (int r = 0; r < N; ++r) out[r] = Eigen::internal::predux(acc[r]);
}

}  // namespace ms::kernels::detail
