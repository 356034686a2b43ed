// ms/kernels/gemm.hpp — general matrix products (GEMM) on raw row-major buffers.
//
// Stage: kernels. The one entry every matrix product in ms goes through:
// matmul, conv2d (im2col + GEMM) and, later, the JIT executor. float and double
// run on Eigen products routed to OpenBLAS (libms is built with EIGEN_USE_BLAS);
// int32 and int64 run on Eigen's own product. The Eigen instantiations live in
// src/kernels/gemm.cpp, so including this header costs nothing.
//
//   // C[2x4] = A[2x3] * B[3x4], all row-major and dense
//   ms::kernels::gemm<float>(false, false, 2, 4, 3, 1.f, a, 3, b, 4, 0.f, c, 4);
#pragma once

#include <cstdint>
#include <span>

namespace ms::kernels {

/// C = alpha * op(A) * op(B) + beta * C on row-major matrices, as BLAS's xGEMM:
/// op(A) is m x k, op(B) is k x n, C is m x n; op(X) is X, or X^T when `trans_x`
/// (then A is stored k x m). `lda`, `ldb`, `ldc` are the row strides in
/// elements (>= the stored column count). `beta == 0` overwrites C without
/// reading it (NaNs in C do not propagate). Any m, n, k >= 0 (zero sizes are
/// no-ops, k == 0 scales C by beta).
///
/// Requires: buffers valid for the given sizes; never throws, so it may be
/// called from inside a parallel region (where OpenBLAS then runs on one
/// thread). Called outside one, BLAS uses the threads of `ms::set_num_threads`.
/// Instantiated for float, double, std::int32_t and std::int64_t.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
          std::int64_t ldc) noexcept;

/// One operand of a batched product: a base pointer, one element offset per
/// batch entry, and the layout of each matrix (row stride `ld`, transposed or not).
template <class T>
struct GemmOperand {
  const T* data = nullptr;
  std::span<const std::int64_t> offsets;  ///< per batch entry, in elements
  bool trans = false;
  std::int64_t ld = 0;
};

/// `batch` products C_i = op(A_i) * op(B_i), each m x n x k, with C_i at
/// `c + c_offsets[i]` (row stride `ldc`) and A_i, B_i at their operands' offsets.
/// Small products are spread over the batch with `parallel_for` (one BLAS call
/// per entry, single-threaded inside the region); large ones run one after the
/// other with a multi-threaded BLAS. Results do not depend on the thread count
/// for integers, and for floats agree up to OpenBLAS's own threading (which
/// splits m and n, never k, so in practice bitwise).
template <class T>
void gemm_batched(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                  const GemmOperand<T>& a, const GemmOperand<T>& b, T* c,
                  std::span<const std::int64_t> c_offsets, std::int64_t ldc) noexcept;

extern template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float,
                                 const float*, std::int64_t, const float*, std::int64_t, float,
                                 float*, std::int64_t) noexcept;
extern template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double,
                                  const double*, std::int64_t, const double*, std::int64_t, double,
                                  double*, std::int64_t) noexcept;
extern template void gemm<std::int32_t>(bool, bool, std::int64_t, std::int64_t, std::int64_t,
                                        std::int32_t, const std::int32_t*, std::int64_t,
                                        const std::int32_t*, std::int64_t, std::int32_t,
                                        std::int32_t*, std::int64_t) noexcept;
extern template void gemm<std::int64_t>(bool, bool, std::int64_t, std::int64_t, std::int64_t,
                                        std::int64_t, const std::int64_t*, std::int64_t,
                                        const std::int64_t*, std::int64_t, std::int64_t,
                                        std::int64_t*, std::int64_t) noexcept;
extern template void gemm_batched<float>(std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                         const GemmOperand<float>&, const GemmOperand<float>&,
                                         float*, std::span<const std::int64_t>,
                                         std::int64_t) noexcept;
extern template void gemm_batched<double>(std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                          const GemmOperand<double>&, const GemmOperand<double>&,
                                          double*, std::span<const std::int64_t>,
                                          std::int64_t) noexcept;
extern template void gemm_batched<std::int32_t>(std::int64_t, std::int64_t, std::int64_t,
                                                std::int64_t, const GemmOperand<std::int32_t>&,
                                                const GemmOperand<std::int32_t>&, std::int32_t*,
                                                std::span<const std::int64_t>,
                                                std::int64_t) noexcept;
extern template void gemm_batched<std::int64_t>(std::int64_t, std::int64_t, std::int64_t,
                                                std::int64_t, const GemmOperand<std::int64_t>&,
                                                const GemmOperand<std::int64_t>&, std::int64_t*,
                                                std::span<const std::int64_t>,
                                                std::int64_t) noexcept;

}  // namespace ms::kernels
