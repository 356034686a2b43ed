// ms/kernels/gemm.hpp — general matrix products (GEMM) on raw row-major buffers.
//
// Stage: kernels. The one entry every matrix product in ms goes through:
// matmul, conv2d's im2col path and the JIT executor. float and double run on
// one of three backends, chosen once per process (see `gemm_backend()`):
// libxsmm's JIT micro-kernels (float and bfloat16; double on Eigen; the
// default on AVX2 and AVX-512 CPUs), Eigen's own product kernels (AVX-512 when built
// with -march=native on such a CPU) or OpenBLAS called directly (cblas). int32 and int64 always run
// on Eigen's product. The instantiations live in src/kernels/gemm.cpp, so including this header
// costs nothing.
//
//   // C[2x4] = A[2x3] * B[3x4], all row-major and dense
//   ms::kernels::gemm<float>(false, false, 2, 4, 3, 1.f, a, 3, b, 4, 0.f, c, 4);
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ms/core/half.hpp"

namespace ms::kernels {

/// C = alpha * op(A) * op(B) + beta * C on row-major matrices, as BLAS's xGEMM:
/// op(A) is m x k, op(B) is k x n, C is m x n; op(X) is X, or X^T when `trans_x`
/// (then A is stored k x m). `lda`, `ldb`, `ldc` are the row strides in
/// elements (>= the stored column count). `beta == 0` overwrites C without
/// reading it (NaNs in C do not propagate). Any m, n, k >= 0 (zero sizes are
/// no-ops, k == 0 scales C by beta).
///
/// One row (m == 1, a batch of one), and up to 8 rows times B^T (B stored
/// n x k, A stored m x k), run on ms's own kernels with every backend (faster
/// than OpenBLAS's gemv here, and than packing B for so few rows; shared by
/// the threads by parts of the row from ~32k multiply-adds per thread on; each
/// element is summed in the same order however the row is cut and however
/// many of those rows there are, so the result is bitwise the same for any
/// thread count, and each of the rows is as it would be alone).
///
/// Requires: buffers valid for the given sizes; never throws, so it may be
/// called from inside a parallel region (where it runs on one thread). Called
/// outside one, it uses the threads of `ms::set_num_threads`.
/// Instantiated for float, double, std::int32_t and std::int64_t.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
          std::int64_t ldc) noexcept;

/// C = op(A) * op(B) + bias (float32; `bias` holds n values, one per column
/// of C), bitwise as `gemm` (alpha 1, beta 0) followed by adding the bias to
/// each row, and with `relu` then relu (v < 0 ? 0 : v, as ms::relu): where
/// gemm would run libxsmm's kernels, each tile of C gets its bias (and relu)
/// while still in cache (no second pass over C). Same requirements as gemm.
void gemm_bias(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
               const float* bias, float* c, std::int64_t ldc, bool relu = false) noexcept;

/// C = C * scale + op(A) * op(B) (float32), bitwise as `gemm` (alpha 1, beta
/// 0) into a temporary P followed by `scale_add` of P: where gemm would run
/// libxsmm's kernels and k is summed in one group of chunks (k up to 1024),
/// each tile of C is multiplied and gets its product added while in cache, so
/// neither P nor a second pass over C exists. With `d` (m x n, rows ldd
/// apart), then D = D - C * sub_scale with C's new values, tile by tile too:
/// a compiled Momentum step's `v = v * momentum + dW; w = w - lr * v` in the
/// pass that makes dW. Returns false, with C and D untouched, for every other
/// product: the caller computes P and calls `scale_add`. Same requirements as
/// gemm.
bool gemm_scale_add(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float scale,
                    float* c, std::int64_t ldc, float* d = nullptr, std::int64_t ldd = 0,
                    float sub_scale = 0.f) noexcept;

/// C = C * scale + P on rows x cols (float32; rows ldp and ldc apart): each
/// element multiplied, then P's added, two roundings as the elementwise ops
/// mul and add make; with `d`, then D = D - C * sub_scale (multiplied, then
/// subtracted). Rows are shared by the threads.
void scale_add(std::int64_t rows, std::int64_t cols, float scale, const float* p, std::int64_t ldp,
               float* c, std::int64_t ldc, float* d = nullptr, std::int64_t ldd = 0,
               float sub_scale = 0.f) noexcept;
/// The same with P in bfloat16 (each element widened to float32 exactly, as a
/// cast does): C = C * scale + float(P), then D = D - C * sub_scale; with
/// `d16` (rows x cols, rows ldd apart), D's new values rounded to bfloat16
/// (as a cast rounds them) in the same pass.
void scale_add(std::int64_t rows, std::int64_t cols, float scale, const bfloat16_t* p,
               std::int64_t ldp, float* c, std::int64_t ldc, float* d = nullptr,
               std::int64_t ldd = 0, float sub_scale = 0.f, bfloat16_t* d16 = nullptr) noexcept;

/// The backend of float and double GEMM in this process, for reports and
/// benchmarks: `name` is "libxsmm", "eigen" or "openblas"; `detail` says which
/// kernels (libxsmm's target, Eigen's SIMD level, or OpenBLAS's core name) and
/// why they were chosen.
///
/// "libxsmm" when libms was built with libxsmm (meson option `libxsmm`,
/// Debian's libxsmm-dev) and libxsmm's JIT targets this CPU (AVX2 and later;
/// decided at run time, so a portable build uses it too): float products
/// then run on its kernels (packed operands, blocks of C fixed by the shape),
/// double ones on Eigen's; there it beats Eigen on the square and training
/// shapes of bench/bm_gemm.cpp on one thread, and OpenBLAS in the GPT's and
/// the CNN's training steps on AMD Zen 3 (AVX2). Otherwise "eigen" when libms
/// was compiled with AVX-512 (Eigen's AVX-512 kernels beat OpenBLAS 0.3.21
/// pinned to its "Haswell" kernels by the environment's OPENBLAS_CORETYPE),
/// else "openblas" when it was found at build time, else "eigen".
/// `MS_GEMM=libxsmm`, `MS_GEMM=eigen` or `MS_GEMM=openblas` in the
/// environment overrides the default (read once, at the first product; an
/// unavailable choice warns and keeps the default). With "libxsmm" and
/// "eigen", a large product outside a parallel region is shared by the threads
/// by blocks of C fixed by the shape, so each element is summed in the same
/// order for any thread count. libxsmm starts no threads of its own.
struct GemmBackend {
  /// The backend: "libxsmm", "openblas" or "eigen".
  const char* name;
  /// What it runs on, for logs (e.g. the libxsmm target or OpenBLAS core).
  std::string detail;
};
/// The backend `gemm` uses in this process (chosen once, at the first call):
/// `std::printf("%s\n", ms::kernels::gemm_backend().name);`
const GemmBackend& gemm_backend() noexcept;

/// `gemm<float>` on the named backend ("libxsmm", "eigen" or "openblas")
/// whatever `gemm_backend()` chose, for tests and benchmarks that compare the
/// backends in one process. Returns false, computing nothing, when that
/// backend is not available in this build or on this CPU.
///
///   std::vector<float> c1(4), c2(4);
///   ms::kernels::gemm_on("eigen", false, false, 2, 2, 3, 1.f, a, 3, b, 2, 0.f, c1.data(), 2);
///   ms::kernels::gemm_on("libxsmm", false, false, 2, 2, 3, 1.f, a, 3, b, 2, 0.f, c2.data(), 2);
bool gemm_on(std::string_view backend, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
             std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
             std::int64_t ldb, float beta, float* c, std::int64_t ldc) noexcept;

/// C = alpha * op(A) * op(B) + beta * C with A and B in bfloat16 and C in
/// float32, with the conventions of `gemm` (row-major, `lda`, `ldb`, `ldc` row
/// strides, beta == 0 never reads C). With the "libxsmm" backend on a CPU with
/// AMX (and Linux granting its tile state), ms's own tile loop sums bfloat16
/// products over all of k in float32 (TDPBF16PS); on a CPU with the BF16
/// dot-product instructions (AVX512_BF16; libxsmm's "cpx" target and later),
/// libxsmm's bf16 kernels sum pairs of bfloat16 products in float32 from
/// packed bfloat16 operands (no float32 copy of A and B); otherwise op(A)
/// and op(B) are converted to float32 and multiplied by `gemm<float>`. Either
/// way the result is bitwise the same for any thread count. `ms::matmul` on
/// bfloat16 tensors runs here and rounds C to bfloat16 once.
///
///   ms::kernels::gemm_bf16(false, false, m, n, k, 1.f, a, k, b, n, 0.f, c, n);
void gemm_bf16(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               float alpha, const bfloat16_t* a, std::int64_t lda, const bfloat16_t* b,
               std::int64_t ldb, float beta, float* c, std::int64_t ldc) noexcept;

/// True when gemm_bf16 runs on the CPU's AMX tiles (the "libxsmm" backend, a
/// CPU with AMX, Linux granting its tile state): there bfloat16 products are
/// several times faster than float32 ones (bench/gemm_table.sh), and
/// bfloat16 convolutions route their passes through them (`conv2d_bf16_algorithm`).
bool gemm_bf16_on_amx() noexcept;

/// C = alpha * op(A) * op(B) with C in bfloat16: gemm_bf16's float32 sums,
/// each rounded to bfloat16 once, bitwise the same as gemm_bf16 (beta 0) into
/// a float32 C converted afterwards. On libxsmm's bfloat16 kernels (and on
/// AMX) each block of sums is rounded as it is stored (no float32 C);
/// elsewhere through a float32 buffer.
///
///   ms::kernels::gemm_bf16_rounded(false, true, m, n, k, 1.f, a, k, b, k, c, n);
void gemm_bf16_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                       float alpha, const bfloat16_t* a, std::int64_t lda, const bfloat16_t* b,
                       std::int64_t ldb, bfloat16_t* c, std::int64_t ldc) noexcept;

/// One operand of a batched product: a base pointer, one element offset per
/// batch entry, and the layout of each matrix (row stride `ld`, transposed or not).
template <class T>
struct GemmOperand {
  /// The base pointer.
  const T* data = nullptr;
  std::span<const std::int64_t> offsets;  ///< per batch entry, in elements
  /// Each matrix is stored transposed.
  bool trans = false;
  /// The row stride of each matrix, in elements.
  std::int64_t ld = 0;
};

/// `batch` products C_i = op(A_i) * op(B_i), each m x n x k, with C_i at
/// `c + c_offsets[i]` (row stride `ldc`) and A_i, B_i at their operands' offsets.
/// Small products are spread over the batch with `parallel_for` (one gemm call
/// per entry, single-threaded inside the region); large ones run one after the
/// other, each over all threads. Results do not depend on the thread count
/// (with the "openblas" backend, floats only up to OpenBLAS's own threading,
/// which splits m and n, never k: in practice bitwise).
template <class T>
void gemm_batched(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                  const GemmOperand<T>& a, const GemmOperand<T>& b, T* c,
                  std::span<const std::int64_t> c_offsets, std::int64_t ldc) noexcept;

/// \cond EXPLICIT_INSTANTIATIONS (compiled once in libms)
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
/// \endcond

}  // namespace ms::kernels
