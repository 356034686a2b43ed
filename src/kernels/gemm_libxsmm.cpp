// float32 GEMM on libxsmm's JIT micro-kernels: ms cuts the product into
// cache-sized blocks and libxsmm's generated kernel (AVX-512 or AVX2, chosen
// by libxsmm for the CPU it runs on) multiplies each block.
//
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so libxsmm
// (column-major) sees C's columns as its M and C's rows as its N; its "A"
// operand is a panel of op(B), its "B" operand a block of op(A). Both are
// packed into contiguous buffers first (read in place, a row stride of 4 KiB
// maps every row of a block to the same L1 sets: 1024^3 ran at 2/3 of the
// packed speed), with copies along the stored rows; a transposed A keeps its
// layout and runs on libxsmm's transposed-B kernels, a transposed B (stored
// [n, k]) is transposed while packed.
//
// Blocking, fixed by the shape only (never by the thread count):
//   - C is cut into tasks of at most kTaskRows rows x kTaskCols columns; one
//     thread computes a whole task in one fixed order, so the thread count
//     never changes a sum's order;
//   - the inner dimension is cut into chunks of equal size (at most kChunk,
//     the last one may be shorter), packed kChunksPerPack at a time: op(B)'s
//     panels once per task (reused by kTaskRows rows), op(A)'s rows once per
//     kTileRows rows (reused by kTaskCols columns). A kernel call multiplies
//     kPanel columns by kTileRows rows over one chunk: 32 KiB of each operand;
//   - each chunk's product is summed by the kernel from zero into a block of
//     kPanel x kTileRows floats (in L1), then alpha times that block is added
//     to C, chunk after chunk: C's element is a sum of chunk sums, whose
//     rounding error grows with kChunk + k / kChunk rather than with k
//     (libxsmm's batch-reduce kernels keep one chain of k terms, so plain
//     kernels are used). The first chunk goes straight into C when beta is 0
//     and alpha 1.
//
// libxsmm's core library starts no threads (Debian builds it without OpenMP;
// libxsmmext is not linked): the tasks run on ms's pool (parallel_for).
#include "gemm_libxsmm.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
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

// libxsmm's kernel size: kPanel columns of C (libxsmm's M: four AVX-512
// vectors) by kTileRows rows (its N) by a chunk of k.
constexpr std::int64_t kPanel = 64;
constexpr std::int64_t kTileRows = 64;
constexpr std::int64_t kChunk = 128;
// A task: the unit of work of one thread. Columns: two panels (an even split
// of the MLP's 512-wide layers over two threads); rows: as many as share one
// packed panel of a transposed B.
constexpr std::int64_t kTaskCols = 2 * kPanel;
constexpr std::int64_t kTaskRows = 4 * kTileRows;
// Chunks packed at a time: 128 KiB of B and 256 KiB of A per task (L2).
constexpr std::int64_t kChunksPerPack = 2;
// Below this many multiply-adds per task the tasks of a product are grouped
// (a thread's share should be a few microseconds at least).
constexpr double kFlopsPerThread = 1 << 17;

using Kernel = libxsmm_smmfunction;

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
  std::int64_t chunk, chunks;  // k = (chunks - 1) * chunk + the last chunk's size
  std::int64_t chunk_size(std::int64_t q) const { return std::min(chunk, k - q * chunk); }
};

// The JIT kernels one product needs, generated before C is touched: full and
// edge panel widths x full and edge tile heights x full and last chunk x
// (into C | into the block). All overwrite their output (beta 0).
struct Kernels {
  Kernel k[2][2][2][2] = {};
  Kernel get(std::int64_t cols, std::int64_t rows, std::int64_t depth, bool into_c,
             const Problem& pr) const {
    return k[cols == kPanel ? 0 : 1][rows == kTileRows ? 0 : 1][depth == pr.chunk ? 0 : 1]
            [into_c ? 1 : 0];
  }
};

bool make_kernels(Kernels& ks, const Problem& pr) {
  const std::int64_t cols[2] = {std::min(pr.n, kPanel), pr.n % kPanel};
  const std::int64_t rows[2] = {std::min(pr.m, kTileRows), pr.m % kTileRows};
  const std::int64_t depths[2] = {pr.chunk, pr.chunk_size(pr.chunks - 1)};
  // libxsmm's A: a packed panel, chunk x kPanel row-major (ld kPanel); its
  // B: packed rows of A, kTileRows x chunk row-major (ld chunk), or, A
  // transposed, chunk x kTileRows row-major (ld kTileRows, transposed-B kernel).
  const libxsmm_blasint lda = kPanel;
  const auto ldb = static_cast<libxsmm_blasint>(pr.ta ? kTileRows : pr.chunk);
  const float alpha = 1.f, beta = 0.f;
  const int flags = LIBXSMM_GEMM_FLAG_BETA_0 | (pr.ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
  const int prefetch = LIBXSMM_PREFETCH_NONE;
  for (int ci = 0; ci < 2; ++ci)
    for (int ri = 0; ri < 2; ++ri)
      for (int di = 0; di < 2; ++di)
        for (int into_c = 0; into_c < 2; ++into_c) {
          const std::int64_t mm = cols[ci], nn = rows[ri], kk = depths[di];
          if (mm == 0 || nn == 0 || (ci == 1 && mm == cols[0]) || (ri == 1 && nn == rows[0]) ||
              (di == 1 && kk == depths[0]))
            continue;
          const auto ldc = static_cast<libxsmm_blasint>(into_c ? pr.ldc : kPanel);
          Kernel f = libxsmm_smmdispatch(
              static_cast<libxsmm_blasint>(mm), static_cast<libxsmm_blasint>(nn),
              static_cast<libxsmm_blasint>(kk), &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
          if (f == nullptr) return false;
          // A size that is both the full and the edge one (n < kPanel) is
          // stored under the index get() computes for it.
          ks.k[mm == kPanel ? 0 : 1][nn == kTileRows ? 0 : 1][kk == pr.chunk ? 0 : 1][into_c] = f;
        }
  return true;
}

// Buffers of one thread: packed panels of B, packed rows of A and the block a
// chunk's product is summed into. Allocated at a thread's first product.
struct Buffers {
  std::unique_ptr<float[]> b, a, sum;
  Buffers()
      : b(new float[static_cast<std::size_t>(kTaskCols * kChunksPerPack * kChunk)]),
        a(new float[static_cast<std::size_t>(kTaskRows * kChunksPerPack * kChunk)]),
        sum(new float[static_cast<std::size_t>(kPanel * kTileRows)]) {}
};

Buffers& thread_buffers() {
  thread_local Buffers buffers;
  return buffers;
}

// Columns [j0, j0 + cols) of op(B) for the chunks [q0, q0 + count): panel jp's
// chunk q is chunk_size(q) x kPanel, row-major (libxsmm's A, lda = kPanel), at
// ((jp - j0) / kPanel * kChunksPerPack + q - q0) * kPanel * kChunk.
void pack_b(const Problem& pr, std::int64_t j0, std::int64_t cols, std::int64_t q0,
            std::int64_t count, float* out) {
  for (std::int64_t jp = j0; jp < j0 + cols; jp += kPanel) {
    const std::int64_t w = std::min(kPanel, j0 + cols - jp);
    for (std::int64_t q = q0; q < q0 + count; ++q) {
      float* blk = out + ((jp - j0) / kPanel * kChunksPerPack + q - q0) * kPanel * kChunk;
      const std::int64_t p0 = q * pr.chunk, depth = pr.chunk_size(q);
      if (!pr.tb) {  // rows of B: straight copies
        for (std::int64_t p = 0; p < depth; ++p) {
          const float* src = pr.b + (p0 + p) * pr.ldb + jp;
          float* dst = blk + p * kPanel;
          for (std::int64_t j = 0; j < w; ++j) dst[j] = src[j];
        }
        continue;
      }
      // B stored [n, k]: libxsmm's transpose (its JIT'ed kernels where it has them).
      libxsmm_otrans(blk, pr.b + jp * pr.ldb + p0, sizeof(float),
                     static_cast<libxsmm_blasint>(depth), static_cast<libxsmm_blasint>(w),
                     static_cast<libxsmm_blasint>(pr.ldb), static_cast<libxsmm_blasint>(kPanel));
    }
  }
}

// Rows [i0, i0 + rows) of op(A) for the chunks [q0, q0 + count): chunk q at
// (q - q0) * kTileRows * kChunk is rows x chunk_size(q) row-major (ld chunk),
// or, A stored [k, m], chunk_size(q) x rows row-major (ld kTileRows).
void pack_a(const Problem& pr, std::int64_t i0, std::int64_t rows, std::int64_t q0,
            std::int64_t count, float* out) {
  for (std::int64_t q = q0; q < q0 + count; ++q) {
    float* blk = out + (q - q0) * kTileRows * kChunk;
    const std::int64_t p0 = q * pr.chunk, depth = pr.chunk_size(q);
    if (!pr.ta) {
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* src = pr.a + (i0 + r) * pr.lda + p0;
        float* dst = blk + r * pr.chunk;
        for (std::int64_t p = 0; p < depth; ++p) dst[p] = src[p];
      }
    } else {
      for (std::int64_t p = 0; p < depth; ++p) {
        const float* src = pr.a + (p0 + p) * pr.lda + i0;
        float* dst = blk + p * kTileRows;
        for (std::int64_t r = 0; r < rows; ++r) dst[r] = src[r];
      }
    }
  }
}

// One task of C: rows [i0, i0 + rows), columns [j0, j0 + cols).
void run_task(const Problem& pr, const Kernels& ks, std::int64_t i0, std::int64_t rows,
              std::int64_t j0, std::int64_t cols) {
  Buffers& buf = thread_buffers();
  if (pr.beta != 0.f && pr.beta != 1.f)
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = pr.c + (i0 + r) * pr.ldc + j0;
      for (std::int64_t j = 0; j < cols; ++j) row[j] *= pr.beta;
    }
  // Each panel chunk of B (libxsmm's A, read again for every register block
  // of rows) stays in L1 while the kernel runs over all the task's row tiles.
  for (std::int64_t q0 = 0; q0 < pr.chunks; q0 += kChunksPerPack) {
    const std::int64_t count = std::min(kChunksPerPack, pr.chunks - q0);
    pack_b(pr, j0, cols, q0, count, buf.b.get());
    for (std::int64_t it = i0; it < i0 + rows; it += kTileRows)
      pack_a(pr, it, std::min(kTileRows, i0 + rows - it), q0, count,
             buf.a.get() + (it - i0) / kTileRows * kChunksPerPack * kTileRows * kChunk);
    for (std::int64_t jp = j0; jp < j0 + cols; jp += kPanel) {
      const std::int64_t w = std::min(kPanel, j0 + cols - jp);
      for (std::int64_t q = q0; q < q0 + count; ++q) {
        const std::int64_t depth = pr.chunk_size(q);
        const float* ka =
            buf.b.get() + ((jp - j0) / kPanel * kChunksPerPack + q - q0) * kPanel * kChunk;
        for (std::int64_t it = i0; it < i0 + rows; it += kTileRows) {
          const std::int64_t h = std::min(kTileRows, i0 + rows - it);
          const float* kb =
              buf.a.get() + ((it - i0) / kTileRows * kChunksPerPack + q - q0) * kTileRows * kChunk;
          float* c = pr.c + it * pr.ldc + jp;
          if (q == 0 && pr.beta == 0.f && pr.alpha == 1.f) {  // the first chunk sum is C
            ks.get(w, h, depth, true, pr)(ka, kb, c);
            continue;
          }
          float* sum = buf.sum.get();
          ks.get(w, h, depth, false, pr)(ka, kb, sum);
          const bool first = q == 0 && pr.beta == 0.f;  // C is not read then
          for (std::int64_t r = 0; r < h; ++r) {
            float* crow = c + r * pr.ldc;
            const float* srow = sum + r * kPanel;
            if (first)
              for (std::int64_t j = 0; j < w; ++j) crow[j] = pr.alpha * srow[j];
            else if (pr.alpha == 1.f)
              for (std::int64_t j = 0; j < w; ++j) crow[j] += srow[j];
            else
              for (std::int64_t j = 0; j < w; ++j) crow[j] += pr.alpha * srow[j];
          }
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
  // A matrix with a single stored row has no meaningful leading dimension.
  if ((trans_a ? k : m) == 1) lda = trans_a ? m : k;
  if ((trans_b ? n : k) == 1) ldb = trans_b ? k : n;
  if (m == 1) ldc = n;
  for (const std::int64_t v : {m, n, k, lda, ldb, ldc})
    if (v > INT_MAX) return false;
  const std::int64_t chunks = (k + kChunk - 1) / kChunk;
  const std::int64_t chunk = (k + chunks - 1) / chunks;
  const Problem pr{trans_a, trans_b, m,   n,     k,
                   alpha,   a,       lda, b,     ldb,
                   beta,    c,       ldc, chunk, (k + chunk - 1) / chunk};
  Kernels ks;
  if (!make_kernels(ks, pr)) return false;

  const std::int64_t row_tasks = (m + kTaskRows - 1) / kTaskRows;
  const std::int64_t col_tasks = (n + kTaskCols - 1) / kTaskCols;
  const double task_flops = static_cast<double>(std::min(m, kTaskRows)) *
                            static_cast<double>(std::min(n, kTaskCols)) * static_cast<double>(k);
  const auto grain = static_cast<std::int64_t>(std::max(1.0, kFlopsPerThread / task_flops));
  parallel_for(row_tasks * col_tasks, grain, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t i0 = t / col_tasks * kTaskRows, j0 = t % col_tasks * kTaskCols;
      run_task(pr, ks, i0, std::min(kTaskRows, m - i0), j0, std::min(kTaskCols, n - j0));
    }
  });
  return true;
}

// ---------------------------------------------------------------- bfloat16

namespace {

// A bfloat16 product: the same tasks as the float one; per chunk, op(B)'s
// panels are packed in libxsmm's VNNI layout (pairs of consecutive inner
// indices side by side: the operand of the CPU's BF16 dot-product
// instruction) and op(A)'s rows as they are; libxsmm's bf16 kernel sums the
// pairs' products in float32 into the block, which is added to C as above.
// Chunks have an even size; an odd last chunk is padded with a zero pair half.
struct BProblem {
  bool ta, tb;
  std::int64_t m, n, k;
  float alpha;
  const void* a;
  std::int64_t lda;
  const void* b;
  std::int64_t ldb;
  float beta;
  float* c;
  std::int64_t ldc;
  std::int64_t chunk, chunks;
  std::int64_t chunk_size(std::int64_t q) const { return std::min(chunk, k - q * chunk); }
  static std::uint16_t load(const void* base, std::int64_t at) {
    std::uint16_t v;
    std::memcpy(&v, static_cast<const char*>(base) + at * 2, 2);
    return v;
  }
  std::uint16_t op_a(std::int64_t i, std::int64_t p) const {
    return load(a, ta ? p * lda + i : i * lda + p);
  }
  std::uint16_t op_b(std::int64_t p, std::int64_t j) const {
    return load(b, tb ? j * ldb + p : p * ldb + j);
  }
};

std::int64_t round_even(std::int64_t v) { return v + (v & 1); }

using BKernel = libxsmm_bsmmfunction;

struct BKernels {
  BKernel k[2][2][2] = {};
  BKernel get(std::int64_t cols, std::int64_t rows, std::int64_t depth, const BProblem& pr) const {
    return k[cols == kPanel ? 0 : 1][rows == kTileRows ? 0 : 1][depth == pr.chunk ? 0 : 1];
  }
};

bool make_bkernels(BKernels& ks, const BProblem& pr) {
  const std::int64_t cols[2] = {std::min(pr.n, kPanel), pr.n % kPanel};
  const std::int64_t rows[2] = {std::min(pr.m, kTileRows), pr.m % kTileRows};
  const std::int64_t depths[2] = {pr.chunk, pr.chunk_size(pr.chunks - 1)};
  const libxsmm_blasint lda = kPanel, ldb = static_cast<libxsmm_blasint>(pr.chunk), ldc = kPanel;
  const float alpha = 1.f, beta = 0.f;
  const int flags = LIBXSMM_GEMM_FLAG_BETA_0 | LIBXSMM_GEMM_FLAG_VNNI_A;
  const int prefetch = LIBXSMM_PREFETCH_NONE;
  for (int ci = 0; ci < 2; ++ci)
    for (int ri = 0; ri < 2; ++ri)
      for (int di = 0; di < 2; ++di) {
        const std::int64_t mm = cols[ci], nn = rows[ri], kk = depths[di];
        if (mm == 0 || nn == 0 || (ci == 1 && mm == cols[0]) || (ri == 1 && nn == rows[0]) ||
            (di == 1 && kk == depths[0]))
          continue;
        BKernel f =
            libxsmm_bsmmdispatch(static_cast<libxsmm_blasint>(mm), static_cast<libxsmm_blasint>(nn),
                                 static_cast<libxsmm_blasint>(round_even(kk)), &lda, &ldb, &ldc,
                                 &alpha, &beta, &flags, &prefetch);
        if (f == nullptr) return false;
        ks.k[mm == kPanel ? 0 : 1][nn == kTileRows ? 0 : 1][kk == pr.chunk ? 0 : 1] = f;
      }
  return true;
}

struct BBuffers {
  std::unique_ptr<libxsmm_bfloat16[]> b, a;
  std::unique_ptr<float[]> sum;
  BBuffers()
      : b(new libxsmm_bfloat16[static_cast<std::size_t>(kTaskCols * kChunk)]),
        a(new libxsmm_bfloat16[static_cast<std::size_t>(kTaskRows * kChunk)]),
        sum(new float[static_cast<std::size_t>(kPanel * kTileRows)]) {}
};

BBuffers& thread_bbuffers() {
  thread_local BBuffers buffers;
  return buffers;
}

void run_btask(const BProblem& pr, const BKernels& ks, std::int64_t i0, std::int64_t rows,
               std::int64_t j0, std::int64_t cols) {
  BBuffers& buf = thread_bbuffers();
  if (pr.beta != 0.f && pr.beta != 1.f)
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = pr.c + (i0 + r) * pr.ldc + j0;
      for (std::int64_t j = 0; j < cols; ++j) row[j] *= pr.beta;
    }
  for (std::int64_t q = 0; q < pr.chunks; ++q) {
    const std::int64_t p0 = q * pr.chunk, depth = pr.chunk_size(q), even = round_even(depth);
    // Panel jp of op(B): [even / 2][kPanel][2] at (jp - j0) / kPanel * kPanel * kChunk.
    for (std::int64_t jp = j0; jp < j0 + cols; jp += kPanel) {
      const std::int64_t w = std::min(kPanel, j0 + cols - jp);
      libxsmm_bfloat16* blk = buf.b.get() + (jp - j0) / kPanel * kPanel * kChunk;
      for (std::int64_t p = 0; p < even; ++p)
        for (std::int64_t j = 0; j < w; ++j)
          blk[(p / 2) * kPanel * 2 + j * 2 + (p & 1)] = p < depth ? pr.op_b(p0 + p, jp + j) : 0;
    }
    // Rows of op(A): rows x even row-major (ld chunk).
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t p = 0; p < even; ++p)
        buf.a[static_cast<std::size_t>(r * pr.chunk + p)] =
            p < depth ? pr.op_a(i0 + r, p0 + p) : std::uint16_t{0};
    for (std::int64_t jp = j0; jp < j0 + cols; jp += kPanel) {
      const std::int64_t w = std::min(kPanel, j0 + cols - jp);
      const libxsmm_bfloat16* ka = buf.b.get() + (jp - j0) / kPanel * kPanel * kChunk;
      for (std::int64_t it = i0; it < i0 + rows; it += kTileRows) {
        const std::int64_t h = std::min(kTileRows, i0 + rows - it);
        float* sum = buf.sum.get();
        ks.get(w, h, depth, pr)(ka, buf.a.get() + (it - i0) * pr.chunk, sum);
        const bool first = q == 0 && pr.beta == 0.f;
        for (std::int64_t r = 0; r < h; ++r) {
          float* crow = pr.c + (it + r) * pr.ldc + jp;
          const float* srow = sum + r * kPanel;
          if (first)
            for (std::int64_t j = 0; j < w; ++j) crow[j] = pr.alpha * srow[j];
          else
            for (std::int64_t j = 0; j < w; ++j) crow[j] += pr.alpha * srow[j];
        }
      }
    }
  }
}

}  // namespace

bool libxsmm_bgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
                   float beta, float* c, std::int64_t ldc) noexcept {
  std::string why;
  if (m <= 0 || n <= 0 || k <= 0 || !libxsmm_usable(why)) return false;
  if (m == 1) ldc = n;
  if (m > INT_MAX || n > INT_MAX || ldc > INT_MAX) return false;
  const std::int64_t chunks = (k + kChunk - 1) / kChunk;
  const std::int64_t chunk = round_even((k + chunks - 1) / chunks);
  const BProblem pr{trans_a, trans_b, m,   n,     k,
                    alpha,   a,       lda, b,     ldb,
                    beta,    c,       ldc, chunk, (k + chunk - 1) / chunk};
  BKernels ks;
  if (!make_bkernels(ks, pr)) return false;
  const std::int64_t row_tasks = (m + kTaskRows - 1) / kTaskRows;
  const std::int64_t col_tasks = (n + kTaskCols - 1) / kTaskCols;
  const double task_flops = static_cast<double>(std::min(m, kTaskRows)) *
                            static_cast<double>(std::min(n, kTaskCols)) * static_cast<double>(k);
  const auto grain = static_cast<std::int64_t>(std::max(1.0, kFlopsPerThread / task_flops));
  parallel_for(row_tasks * col_tasks, grain, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t i0 = t / col_tasks * kTaskRows, j0 = t % col_tasks * kTaskCols;
      run_btask(pr, ks, i0, std::min(kTaskRows, m - i0), j0, std::min(kTaskCols, n - j0));
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

bool libxsmm_bgemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const void*,
                   std::int64_t, const void*, std::int64_t, float, float*, std::int64_t) noexcept {
  return false;
}

#endif

}  // namespace ms::kernels::detail
