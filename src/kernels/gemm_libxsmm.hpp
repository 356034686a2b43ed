// src/kernels/gemm_libxsmm.hpp — private to src/kernels: float32 GEMM on
// libxsmm's JIT micro-kernels (src/kernels/gemm_libxsmm.cpp),
// called by gemm() in src/kernels/gemm.cpp when the "libxsmm" backend runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace ms::kernels::detail {

/// True when libxsmm was linked in and its JIT targets this CPU with AVX2 or
/// better (a test kernel is generated); `why` then names libxsmm's target
/// ("cpx", "hsw", ...), else says why not. Initializes libxsmm on first call.
bool libxsmm_usable(std::string& why) noexcept;

/// The columns of C per libxsmm kernel call (48 or 64: the CPU's, see
/// gemm_libxsmm.cpp), for gemm_backend()'s description.
std::int64_t libxsmm_panel_width() noexcept;

/// True when libxsmm is usable and the CPU has BF16 dot-product instructions:
/// AMX (then bfloat16 products run on ms's AMX tile loop) or AVX512_BF16
/// (libxsmm's "cpx" target and later: libxsmm's bf16 kernels).
bool libxsmm_bf16_native() noexcept;

/// True when libxsmm is usable and bfloat16 products run on ms's AMX tile
/// loop (the CPU has AMX and Linux grants its tile state).
bool libxsmm_bf16_amx() noexcept;

/// A libxsmm kernel for one small float32 product inside a caller's own
/// blocking (the fused attention kernels): C = op(A) B, or C += op(A) B with
/// `accumulate`, on row-major blocks, op(A) [m, k] being A or, with `trans_a`,
/// the transpose of A stored [k, m]. No packing, no threads: the blocks should
/// sit in L1. Its rounding depends on the sizes and flags only, not on the
/// blocks' addresses.
struct BlockKernel {
  void (*f)(const float*, const float*, float*, ...) = nullptr;
  explicit operator bool() const { return f != nullptr; }
  // libxsmm is column-major: it computes the transposed product, C^T = B^T op(A)^T.
  void operator()(const float* a, const float* b, float* c) const { f(b, a, c); }
};

/// The kernel of that product; empty when libxsmm is not linked in or not
/// usable, or generates no kernel for these sizes (then the caller computes
/// the product itself).
BlockKernel libxsmm_block_kernel(bool trans_a, bool accumulate, std::int64_t m, std::int64_t n,
                                 std::int64_t k, std::int64_t lda, std::int64_t ldb,
                                 std::int64_t ldc) noexcept;

/// rows x cols of C += bias (one value per column), then with `relu` each
/// value v of C becomes v < 0 ? 0 : v (ms::relu's rule: NaN and -0 kept).
inline void add_bias(float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols,
                     const float* bias, bool relu) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    if (relu) {
      for (std::int64_t j = 0; j < cols; ++j) {
        const float v = row[j] + bias[j];
        row[j] = v < 0.f ? 0.f : v;
      }
    } else {
      for (std::int64_t j = 0; j < cols; ++j) row[j] += bias[j];
    }
  }
}

/// rows x cols of C = C * scale + P (P's rows ldp apart; float32, or
/// bfloat16 widened exactly): a row multiplied, then P's row added, in two
/// passes, so each element rounds twice, as the elementwise ops mul and add
/// (after a cast of P to float32) round it.
template <class P>
inline void scale_add(float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols, float scale,
                      const P* p, std::int64_t ldp) {
  for (std::int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    const P* prow = p + i * ldp;
    for (std::int64_t j = 0; j < cols; ++j) row[j] *= scale;
    for (std::int64_t j = 0; j < cols; ++j) row[j] += static_cast<float>(prow[j]);
  }
}

/// rows x cols of D = D - C * scale (rows ldd and ldc apart): C's elements
/// multiplied, then subtracted, two roundings as the ops mul and sub make.
inline void sub_scaled(float* d, std::int64_t ldd, std::int64_t rows, std::int64_t cols,
                       float scale, const float* c, std::int64_t ldc) {
  constexpr std::int64_t kPiece = 64;
  float t[kPiece];
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j0 = 0; j0 < cols; j0 += kPiece) {
      const std::int64_t w = std::min(kPiece, cols - j0);
      const float* crow = c + i * ldc + j0;
      float* drow = d + i * ldd + j0;
      for (std::int64_t j = 0; j < w; ++j) t[j] = crow[j] * scale;
      for (std::int64_t j = 0; j < w; ++j) drow[j] -= t[j];
    }
}

/// What libxsmm_sgemm does to each tile of C right after the tile's product,
/// while it is in cache (beta must be 0 with either, else it returns false).
/// Each element is rounded as separate elementwise ops after the product would
/// round it.
struct SgemmEpilogue {
  /// When not null, n floats: C = op(A) op(B) + bias[j] in column j.
  const float* bias = nullptr;
  /// With bias: then relu of that (add_bias).
  bool relu = false;
  /// When set: C = C * scale + op(A) op(B) (C multiplied, then the product
  /// added). Only for products whose k is summed in one group of chunks (see
  /// kGroupChunks), else libxsmm_sgemm returns false.
  bool scale_add = false;
  float scale = 0.f;
  /// With scale_add, when not null: then D = D - C * sub_scale with C's new
  /// values (D [m, n], rows ldd apart; sub_scaled).
  float* d = nullptr;
  std::int64_t ldd = 0;
  float sub_scale = 0.f;
};

/// C = alpha * op(A) * op(B) + beta * C on row-major float32 matrices, with the
/// contract of `ms::kernels::gemm` (beta == 0 never reads C). Returns false,
/// with C untouched, when libxsmm is absent, a size or leading dimension does
/// not fit libxsmm's int, or a kernel cannot be generated. Tiles of C are fixed
/// by the shape and each is computed by one thread in one order, so the result
/// is bitwise the same for any thread count. `epilogue`: see SgemmEpilogue.
bool libxsmm_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                   float beta, float* c, std::int64_t ldc,
                   const SgemmEpilogue& epilogue = {}) noexcept;

/// C = alpha * op(A) * op(B) + beta * C with A and B in bfloat16 (raw bits,
/// row-major) and C in float32, on libxsmm's bf16 kernels (pairs of products
/// summed in float32: the CPU's BF16 dot-product instructions where it has
/// them). Returns false, with C untouched, as `libxsmm_sgemm` does.
bool libxsmm_bgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
                   float beta, float* c, std::int64_t ldc) noexcept;

/// The same with beta 0 and C in bfloat16 (raw bits): each alpha * sum
/// rounded to bfloat16 once as it is stored, bitwise what libxsmm_bgemm and
/// a conversion of its C give, while each block of sums is in cache (no
/// float32 C). False where libxsmm_bgemm would be.
bool libxsmm_bgemm_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                           std::int64_t k, float alpha, const void* a, std::int64_t lda,
                           const void* b, std::int64_t ldb, void* c, std::int64_t ldc) noexcept;

}  // namespace ms::kernels::detail
