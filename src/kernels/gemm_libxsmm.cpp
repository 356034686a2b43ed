// float32 GEMM on libxsmm's JIT micro-kernels: ms packs the operands into
// L1/L2-sized blocks and libxsmm's generated kernel (AVX-512 or AVX2, chosen
// by libxsmm for the CPU it runs on) multiplies them.
//
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so libxsmm
// (column-major) sees C's columns as its M, C's rows as its N: its "A" operand
// is a packed panel of op(B), its "B" operand a packed block of op(A).
//
// Blocking, fixed by the shape only:
//   - C is cut into tiles of kTileRows rows x kTileCols columns; a tile is the
//     unit of work handed to a thread, and one thread computes the whole tile
//     in one fixed order, so the thread count never changes a sum's order;
//   - the inner dimension k is cut into chunks of at most kChunk (equal sizes,
//     the last one zero-padded); per tile, op(A)'s rows are packed once per
//     group of kChunksPerPack chunks (alpha folded in) and op(B) once per
//     kPanel-wide panel and group: a packed chunk is 32 KiB at most (L1), a
//     group 128 KiB (L2);
//   - each chunk's product is summed by the kernel into a kPanel x kTileRows
//     block (in L1) from zero and then added to C, chunk after chunk: C's
//     element is a sum of chunk sums, whose rounding error grows with
//     kChunk + k / kChunk rather than with k (libxsmm's batch-reduce kernels
//     would keep one chain of k terms, so plain kernels are used).
//
// libxsmm's core library starts no threads (Debian builds it without OpenMP;
// libxsmmext is not linked): the tiles run on ms's pool (parallel_for).
#include "gemm_libxsmm.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>

#include "ms/kernels/parallel.hpp"
#include "ms_libxsmm_config.h"  // MS_HAVE_LIBXSMM, from meson.build

#if MS_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

namespace ms::kernels::detail {

#if MS_HAVE_LIBXSMM
namespace {

// C tile handed to one thread (rows x columns), and libxsmm's kernel size:
// kPanel columns of C (libxsmm's M: four AVX-512 vectors) by kTileRows rows.
constexpr std::int64_t kTileRows = 64;
constexpr std::int64_t kPanel = 64;
constexpr std::int64_t kTileCols = 2 * kPanel;
// Inner-dimension chunk of one kernel call, and chunks packed at a time.
constexpr std::int64_t kChunk = 128;
constexpr std::int64_t kChunksPerPack = 4;
// Below this many multiply-adds per tile the tiles of a product are grouped
// (a thread's share should be a few microseconds at least).
constexpr double kFlopsPerThread = 1 << 17;

using Kernel = libxsmm_smmfunction;

// The JIT kernels one product needs, generated before C is touched: full and
// edge panel widths x full and edge tile heights x (into C | into the block).
// All overwrite their output (beta 0).
struct Kernels {
  Kernel k[2][2][2] = {};
  // M = columns of the panel, N = rows of the tile.
  Kernel get(std::int64_t cols, std::int64_t rows, bool into_c) const {
    return k[cols == kPanel ? 0 : 1][rows == kTileRows ? 0 : 1][into_c ? 1 : 0];
  }
};

bool make_kernels(Kernels& ks, std::int64_t n, std::int64_t m, std::int64_t chunk,
                  std::int64_t ldc) {
  const std::int64_t col_sizes[2] = {std::min(n, kPanel), n % kPanel};
  const std::int64_t row_sizes[2] = {std::min(m, kTileRows), m % kTileRows};
  const libxsmm_blasint lda = kPanel, ldb = static_cast<libxsmm_blasint>(chunk);
  const float alpha = 1.f, beta = 0.f;
  const int flags = LIBXSMM_GEMM_FLAG_BETA_0, prefetch = LIBXSMM_PREFETCH_NONE;
  for (int ci = 0; ci < 2; ++ci)
    for (int ri = 0; ri < 2; ++ri)
      for (int into_c = 0; into_c < 2; ++into_c) {
        const std::int64_t cols = col_sizes[ci], rows = row_sizes[ri];
        if (cols == 0 || rows == 0 || (ci == 1 && cols == col_sizes[0]) ||
            (ri == 1 && rows == row_sizes[0]))
          continue;
        const auto ldc_ = static_cast<libxsmm_blasint>(into_c ? ldc : kPanel);
        Kernel f = libxsmm_smmdispatch(static_cast<libxsmm_blasint>(cols),
                                       static_cast<libxsmm_blasint>(rows),
                                       static_cast<libxsmm_blasint>(chunk), &lda, &ldb, &ldc_,
                                       &alpha, &beta, &flags, &prefetch);
        if (f == nullptr) return false;
        // A size that is both the full and the edge one (n < kPanel) is stored
        // under the index get() computes for it.
        ks.k[cols == kPanel ? 0 : 1][rows == kTileRows ? 0 : 1][into_c] = f;
      }
  return true;
}

// Buffers of one thread, grown on demand: packed A and B (a group of chunks)
// and the block a chunk's product is summed into.
struct Buffers {
  std::unique_ptr<float[]> a, b, sum;
  std::int64_t size = 0;
  void reserve(std::int64_t floats) {
    if (floats <= size) return;
    a.reset(new float[static_cast<std::size_t>(floats)]);
    b.reset(new float[static_cast<std::size_t>(floats)]);
    if (!sum) sum.reset(new float[static_cast<std::size_t>(kPanel * kTileRows)]);
    size = floats;
  }
};

Buffers& thread_buffers() {
  thread_local Buffers buffers;
  return buffers;
}

struct Problem {
  bool ta, tb;
  std::int64_t m, n, k;
  float alpha;
  const float* a;
  std::int64_t lda;
  const float* b;
  std::int64_t ldb;
  float beta;
  float* c;
  std::int64_t ldc;
  std::int64_t chunk, chunks;  // k = chunks * chunk, the last one zero-padded
};

// Rows [i0, i0 + rows) of alpha * op(A), inner indices [p0, p0 + count * chunk):
// chunk q is rows x chunk, row-major (libxsmm's B operand, ldb = chunk), at
// q * kTileRows * chunk. Indices from k on are zeros.
void pack_a(const Problem& pr, std::int64_t i0, std::int64_t rows, std::int64_t p0,
            std::int64_t count, float* out) {
  for (std::int64_t q = 0; q < count; ++q) {
    float* blk = out + q * kTileRows * pr.chunk;
    const std::int64_t pb = p0 + q * pr.chunk;
    const std::int64_t valid = std::clamp<std::int64_t>(pr.k - pb, 0, pr.chunk);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* dst = blk + r * pr.chunk;
      if (!pr.ta) {
        const float* src = pr.a + (i0 + r) * pr.lda + pb;
        if (pr.alpha == 1.f)
          std::copy(src, src + valid, dst);
        else
          for (std::int64_t p = 0; p < valid; ++p) dst[p] = pr.alpha * src[p];
      } else {
        const float* src = pr.a + pb * pr.lda + (i0 + r);
        for (std::int64_t p = 0; p < valid; ++p) dst[p] = pr.alpha * src[p * pr.lda];
      }
      std::fill(dst + valid, dst + pr.chunk, 0.f);
    }
  }
}

// Columns [j0, j0 + cols) of op(B), inner indices [p0, p0 + count * chunk):
// chunk q is chunk x kPanel, row-major (libxsmm's A operand, lda = kPanel), at
// q * kPanel * chunk. Indices from k on are zeros (0 * 0 adds nothing).
void pack_b(const Problem& pr, std::int64_t j0, std::int64_t cols, std::int64_t p0,
            std::int64_t count, float* out) {
  for (std::int64_t q = 0; q < count; ++q) {
    float* blk = out + q * kPanel * pr.chunk;
    const std::int64_t pb = p0 + q * pr.chunk;
    const std::int64_t valid = std::clamp<std::int64_t>(pr.k - pb, 0, pr.chunk);
    if (!pr.tb) {
      for (std::int64_t p = 0; p < valid; ++p) {
        const float* src = pr.b + (pb + p) * pr.ldb + j0;
        std::copy(src, src + cols, blk + p * kPanel);
      }
    } else {
      // B is stored [n, k]: read its rows (contiguous in p), write columns.
      for (std::int64_t j = 0; j < cols; ++j) {
        const float* src = pr.b + (j0 + j) * pr.ldb + pb;
        for (std::int64_t p = 0; p < valid; ++p) blk[p * kPanel + j] = src[p];
      }
    }
    for (std::int64_t p = valid; p < pr.chunk; ++p)
      std::fill(blk + p * kPanel, blk + p * kPanel + cols, 0.f);
  }
}

// One tile of C: rows [i0, i0 + rows), columns [j0, j0 + cols).
void run_tile(const Problem& pr, const Kernels& ks, std::int64_t i0, std::int64_t rows,
              std::int64_t j0, std::int64_t cols) {
  Buffers& buf = thread_buffers();
  buf.reserve(kTileRows * kChunksPerPack * pr.chunk);
  if (pr.beta != 0.f && pr.beta != 1.f)
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = pr.c + (i0 + r) * pr.ldc + j0;
      for (std::int64_t j = 0; j < cols; ++j) row[j] *= pr.beta;
    }
  for (std::int64_t q0 = 0; q0 < pr.chunks; q0 += kChunksPerPack) {
    const std::int64_t count = std::min(kChunksPerPack, pr.chunks - q0);
    pack_a(pr, i0, rows, q0 * pr.chunk, count, buf.a.get());
    for (std::int64_t jp = j0; jp < j0 + cols; jp += kPanel) {
      const std::int64_t w = std::min(kPanel, j0 + cols - jp);
      pack_b(pr, jp, w, q0 * pr.chunk, count, buf.b.get());
      float* c = pr.c + i0 * pr.ldc + jp;
      for (std::int64_t q = 0; q < count; ++q) {
        const float* pa = buf.a.get() + q * kTileRows * pr.chunk;
        const float* pb = buf.b.get() + q * kPanel * pr.chunk;
        if (q0 + q == 0 && pr.beta == 0.f) {  // the first chunk sum is C
          ks.get(w, rows, true)(pb, pa, c);
          continue;
        }
        float* sum = buf.sum.get();
        ks.get(w, rows, false)(pb, pa, sum);
        for (std::int64_t r = 0; r < rows; ++r) {
          float* crow = c + r * pr.ldc;
          const float* srow = sum + r * kPanel;
          for (std::int64_t j = 0; j < w; ++j) crow[j] += srow[j];
        }
      }
    }
  }
}

}  // namespace

bool libxsmm_usable(std::string& why) noexcept {
  struct Verdict {
    bool usable;
    std::string why;
  };
  static const Verdict verdict = []() -> Verdict {
    libxsmm_init();
    const int arch = libxsmm_get_target_archid();
    const std::string name = libxsmm_get_target_arch();
    if (arch < LIBXSMM_X86_AVX2) return {false, "libxsmm's target '" + name + "' is below AVX2"};
    const libxsmm_blasint ld = 16;
    const float one = 1.f;
    const int flags = LIBXSMM_GEMM_FLAG_NONE, prefetch = LIBXSMM_PREFETCH_NONE;
    if (libxsmm_smmdispatch(16, 16, 16, &ld, &ld, &ld, &one, &one, &flags, &prefetch) == nullptr)
      return {false, "libxsmm generated no kernel for its target '" + name + "'"};
    return {true, name};
  }();
  why = verdict.why;
  return verdict.usable;
}

bool libxsmm_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                   float beta, float* c, std::int64_t ldc) noexcept {
  if (m <= 0 || n <= 0 || k <= 0) return false;
  if (m > INT_MAX || n > INT_MAX || (m > 1 && ldc > INT_MAX)) return false;
  const std::int64_t chunks = (k + kChunk - 1) / kChunk;
  Problem pr{trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 0, chunks};
  pr.chunk = (k + chunks - 1) / chunks;
  if (m == 1) pr.ldc = std::max<std::int64_t>(n, 1);
  Kernels ks;
  if (!make_kernels(ks, n, m, pr.chunk, pr.ldc)) return false;

  const std::int64_t row_tiles = (m + kTileRows - 1) / kTileRows;
  const std::int64_t col_tiles = (n + kTileCols - 1) / kTileCols;
  const double tile_flops = static_cast<double>(std::min(m, kTileRows)) *
                            static_cast<double>(std::min(n, kTileCols)) * static_cast<double>(k);
  const auto grain = static_cast<std::int64_t>(std::max(1.0, kFlopsPerThread / tile_flops));
  parallel_for(row_tiles * col_tiles, grain, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t i0 = t / col_tiles * kTileRows, j0 = t % col_tiles * kTileCols;
      run_tile(pr, ks, i0, std::min(kTileRows, m - i0), j0, std::min(kTileCols, n - j0));
    }
  });
  return true;
}

#else  // libxsmm not linked in

bool libxsmm_usable(std::string& why) noexcept {
  why = "libms was built without libxsmm";
  return false;
}

bool libxsmm_sgemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                   std::int64_t, const float*, std::int64_t, float, float*, std::int64_t) noexcept {
  return false;
}

#endif

}  // namespace ms::kernels::detail
