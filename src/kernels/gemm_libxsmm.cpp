// GEMM on libxsmm's JIT micro-kernels, float32 and bfloat16: ms packs the
// operands into cache-friendly panels and cuts the product into blocks fixed
// by its shape; libxsmm's generated kernel (AVX-512 or AVX2, chosen by libxsmm
// for the CPU it runs on) multiplies each block.
//
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so libxsmm
// (column-major) sees C's columns as its M and C's rows as its N; its "A"
// operand is a panel of op(B), its "B" operand a group of rows of op(A).
//
// Packing (once per slab of C, see kPackBudget; a slab's packed operand is
// kept while only the other operand's slab changes; shared by the threads, but
// a B of one panel, which each thread packs for itself: PrivatePanel):
//   - op(B) into panels of panel_width() columns: panel j is k rows of its
//     width, row-major (libxsmm's A; the last panel may be narrower, its rows
//     then closer: Plan::packed_ld). A stored [n, k] B is transposed while
//     packed (libxsmm's transpose);
//   - op(A), times alpha, into chunks of the inner dimension: chunk q holds
//     every row of op(A) restricted to the chunk, m x chunk row-major
//     (libxsmm's B, ldb = chunk). A stored [k, m] A is transposed while packed.
//     With alpha 1, A is read where it is instead (read_a_in_place); stored
//     [k, m], through kernels that read libxsmm's B transposed; stored [m, k]
//     with rows a multiple of 4 KiB apart, through a copy with padded rows
//     where C has a narrow last panel (pad_a_rows).
//   The kernels sum the same products in the same order whatever the stored
//   layouts, so the result is bitwise the same whichever operand is stored
//   transposed.
//
// Blocking (fixed by the shape only, never by the thread count):
//   - C is cut into tasks of at most kTaskRows rows x task_cols() columns; one
//     thread computes a whole task in one fixed order, so the thread count
//     never changes a sum's order;
//   - within a task, group after group of kGroupChunks chunks of k (a chunk
//     at most kChunk deep: a panel's chunk, panel_width() x kChunk floats,
//     stays in L1 while the kernel walks the task's rows; a float32 C of one
//     vector's width takes each group as one chunk), panel after panel: the
//     kernel sums the group's chunks in one chain, the first group's straight
//     into C, a later group's from zero into a block that is then added to C.
//     Each element of C is a sum of group sums, each a chain of multiply-adds
//     in order;
//   - a product larger than kPackBudget per operand is cut into slabs, and a
//     deep one (more than one group) runs group by group over bands of tasks;
//     neither changes any element's order of sums.
//
// bfloat16 products take a similar path (no group-sum block: each element of
// C sums all of k in one chain, the rounding bound below is float32's) with
// op(B)'s panels in libxsmm's VNNI layout (pairs of consecutive inner indices side by side: the
// operand of the CPU's BF16 dot-product instruction), chunks of even depth (an odd k is padded with
// a zero), float32 accumulation in C; alpha != 1 and a bfloat16 C (rounded as it is stored) go
// through a float32 block per task. On CPUs with AMX, bfloat16 products run on its tiles instead
// (see "bfloat16 on AMX" below).
//
// libxsmm's core library starts no threads (Debian builds it without OpenMP;
// libxsmmext is not linked): packing and tasks run on ms's pool (parallel_for).
#include "gemm_libxsmm.hpp"
#include "bf16_convert.hpp"
#include "scratch.hpp"
#include "transpose.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "ms/core/detail/eigen.hpp"
#include "ms/core/half.hpp"
#include "ms/kernels/parallel.hpp"
#include "ms_libxsmm_config.h"  // MS_HAVE_LIBXSMM, from meson.build

#if MS_HAVE_LIBXSMM
#include <libxsmm.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ms::kernels::detail {

#if MS_HAVE_LIBXSMM
namespace {

// libxsmm's kernel: panel_width() columns of C (its M) by the rows of a task
// (its N) by one chunk of k (at most kChunk: a 64 x 128 float panel chunk is
// 32 KiB, in L1). The width is the CPU's:
//   - 48 (three AVX-512 vectors, libxsmm keeps 3 x 9 accumulators) where it
//     was first measured (bm_gemm, CPU time, 1 thread; the CPU was not
//     recorded): 0.78 of the FMA peak at 512^3 where 64-wide panels reached
//     0.72;
//   - 64 (four vectors, 4 x 6 accumulators) on AMD Zen 5 (family 26): bm_gemm's
//     BM_Sgemm_libxsmm rows, one process per width, alternating, two rounds, 1
//     thread: 1024^3 0.82-0.84 -> 0.86-0.89 of the peak, 512^3 0.87-0.91 ->
//     0.87-0.93, 64 x 512 x 784 B^T 0.81-0.82 -> 0.86-0.87, none lower
//     beyond the rounds' spread; BM_Bgemm's bfloat16 rows alike. (A C 1024
//     wide has no 16-wide last panel then, whose kernel and padded copy of A
//     cost 1024^3 4 % against 1040 or 1056 columns.)
// The width changes no sum (it cuts C's columns, never k): results are the
// same bits on every CPU's width (test "gemm: C cut into columns anywhere
// gives the same bits").
std::int64_t choose_panel_width() noexcept {
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) != 0 && b == 0x68747541u) {  // "AuthenticAMD"
    __get_cpuid(1, &a, &b, &c, &d);
    const unsigned family = ((a >> 8) & 0xfu) + ((a >> 8 & 0xfu) == 0xfu ? (a >> 20) & 0xffu : 0u);
    if (family >= 0x1a) return 64;
  }
#endif
  return 48;
}

std::int64_t panel_width() noexcept {
  static const std::int64_t w = choose_panel_width();
  return w;
}
constexpr std::int64_t kChunk = 128;
// A task, the unit of work of one thread: its rows of packed A (per chunk) and
// its block of C stay in L2 while the kernel runs over its panels.
std::int64_t task_cols() noexcept { return 2 * panel_width(); }
constexpr std::int64_t kTaskRows = 128;
// Chunks of k summed in one chain (8 x 128 deep) before a group's sum is
// added to C. Four chunks against adding every chunk's sum to C through a
// block of 32 rows (with the slab and band changes below; alternating
// processes, best of four, Intel Xeon VM, 1 thread): 1024^3 185 -> 191
// GFLOP/s, the MLP's and char_lm's training shapes 0-5 % faster, their deep
// weight gradients (k = 4096) 8-45 %, none slower beyond 1 % (fewer passes
// over C, kernel calls a task high). Eight against four (Zen 5 VM, an ad-hoc
// program on libms alternating them in one process, medians of 30, 1 thread,
// GFLOP/s): 1024^3 230.9 -> 233.3 (A^T B 202.3 -> 199.1), the weight
// gradients 768 x 192 x 4096 224.8 -> 226.8, 576 x 192 x 4096 226.1 -> 228.0,
// 192 x 768 x 4096 213.9 -> 214.4: the same within the spread, but it lets a
// product one vector wide take a whole group as one chunk (below) while every
// product's groups keep the same bounds.
constexpr std::int64_t kGroupChunks = 8;
// A float32 product whose C is at most one vector wide (16 columns: the
// forward x W^T of a batch of 16, computed swapped as W x^T with W's rows read
// in place) runs each group as one chunk: a panel's step of k is one cache
// line (not three or four, Plan::packed_ld), so a group's depth of it stays
// in L1, and each row of A is read in runs of up to 1024 floats instead of
// 128, which the hardware prefetcher follows better when A streams from L3.
// The groups are the same as in any other product of that depth, so the sums
// are too (test "gemm: the same bits whichever operand is stored transposed",
// 16 x 512 x 784). Zen 5 VM, an ad-hoc program on libms alternating chunks of
// 128 and whole groups block by block in one process, medians of 40, GFLOP/s
// (1 thread unless said): 16 x 512 x 784 B^T 191.6 -> 207.8 (2 threads 283.6
// -> 320.1), 16 x 512 x 1000 207.1 -> 210.7, 16 x 256 x 512 183.5 -> 191.0,
// 16 x 512 x 2048 130.9 -> 133.6.
constexpr std::int64_t kNarrowCols = 16;
// Tasks per band of a deep product (1 MiB of C): see run_sgemm. The weight
// gradient of a 192 -> 576 dense layer at 4096 tokens (192 x 576 x 4096, A
// transposed): 144 -> 158 GFLOP/s on 1 thread.
std::int64_t band_tasks() noexcept { return (1 << 20) / (kTaskRows * task_cols() * 4); }
// Below this many multiply-adds per thread the tasks of a product are grouped
// (a thread's share should be 5 us or so: a job on the pool costs a few, and
// the other thread reads the operands into a cold cache). Zen 5 VM, an ad-hoc
// loop, 1 thread / 2 threads at 2^17: 64 x 256 x 10 1.8 / 4.5 us, 10 x 256 x
// 64 (A^T) 1.8 / 4.4, 64 x 256 x 64 (x W^T) 11.2 / 15.3; 64 x 512 x 64
// (x W^T) 22.4 / 17.9 and 128 x 256 x 64 19.7 / 14.1, still shared at 2^20.
constexpr double kFlopsPerThread = 1 << 20;
// Packing units (rows of A, panels of B) per thread: at least this many
// elements copied.
constexpr double kCopiesPerThread = 1 << 14;

// The cut of one product, fixed by its shape.
struct Plan {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t chunk = 0, chunks = 0;  // k = (chunks - 1) * chunk + the last chunk's depth
  std::int64_t group = kGroupChunks;   // chunks summed in one chain
  std::int64_t panels = 0;
  std::int64_t row_tasks = 0, col_tasks = 0;
  // even: chunks of even depth (bfloat16 pairs); otherwise float32, whose
  // products of at most kNarrowCols columns take a group per chunk
  Plan(std::int64_t m_, std::int64_t n_, std::int64_t k_, bool even) : m(m_), n(n_), k(k_) {
    const std::int64_t count = (k + kChunk - 1) / kChunk;
    chunk = (k + count - 1) / count;
    if (even) chunk += chunk & 1;
    if (!even && n <= kNarrowCols) {
      chunk = std::min(k, chunk * kGroupChunks);
      group = 1;
    }
    chunks = (k + chunk - 1) / chunk;
    panels = (n + panel_width() - 1) / panel_width();
    row_tasks = (m + kTaskRows - 1) / kTaskRows;
    col_tasks = (n + task_cols() - 1) / task_cols();
  }
  std::int64_t depth(std::int64_t q) const { return std::min(chunk, k - q * chunk); }
  std::int64_t width(std::int64_t j0) const { return std::min(panel_width(), n - j0); }
  // The row stride of op(B)'s packed panel at column j0 (float32): a last,
  // narrower panel's width rounded up to 16 floats, so that its rows lie in
  // consecutive cache lines (a one-vector panel's rows a full panel apart
  // would use a quarter of L1's sets, with up to 1024 of them in a chunk).
  // The batch-16 forward 16 x 512 x 784 B^T on 1 thread, four alternating
  // processes of an ad-hoc loop: 220-223 GFLOP/s with the full stride,
  // 221-226 with this one.
  std::int64_t packed_ld(std::int64_t j0) const {
    const std::int64_t w = width(j0);
    return w == panel_width() ? w : (w + 15) / 16 * 16;
  }
  // Groups of tasks per parallel_for chunk so each thread gets enough work.
  std::int64_t task_grain() const {
    const double per = static_cast<double>(std::min(m, kTaskRows)) *
                       static_cast<double>(std::min(n, task_cols())) * static_cast<double>(k);
    return static_cast<std::int64_t>(std::max(1.0, kFlopsPerThread / per));
  }
};

// The thread's packing buffers (scratch.hpp).
Scratch& pack_scratch() {
  thread_local Scratch s;
  return s;
}

Scratch& block_scratch() {
  thread_local Scratch s;
  return s;
}

Scratch& pack_b_scratch() {
  thread_local Scratch s;
  return s;
}

// Packed copies of A and B hold about this many elements each, and at least
// one task's (kTaskRows or task_cols() by k): a larger product is cut into slabs
// of C (fixed by the shape), each packed and computed in turn.
constexpr std::int64_t kPackBudget = 1 << 20;

// Rows of C per slab when A is packed, columns per slab when B is.
std::int64_t slab_rows(std::int64_t k) {
  return std::max<std::int64_t>(1, kPackBudget / k / kTaskRows) * kTaskRows;
}
std::int64_t slab_cols(std::int64_t k) {
  return std::max<std::int64_t>(1, kPackBudget / k / task_cols()) * task_cols();
}

// Calls fn(i0, rows, j0, cols) for each slab of C, column slabs outer.
template <class F>
void for_each_slab(std::int64_t m, std::int64_t n, std::int64_t k, F&& fn) {
  const std::int64_t rows = slab_rows(k), cols = slab_cols(k);
  for (std::int64_t j0 = 0; j0 < n; j0 += cols)
    for (std::int64_t i0 = 0; i0 < m; i0 += rows)
      fn(i0, std::min(rows, m - i0), j0, std::min(cols, n - j0));
}

// Runs `fn(first, last)` on [0, units) over the threads, `per_unit` elements
// copied per unit; on one thread when the whole product is too small to share.
template <class F>
void parallel_units(const Plan& pl, std::int64_t units, double per_unit, F&& fn) {
  const double flops =
      static_cast<double>(pl.m) * static_cast<double>(pl.n) * static_cast<double>(pl.k);
  const auto grain = flops < 2 * kFlopsPerThread
                         ? units
                         : static_cast<std::int64_t>(std::max(1.0, kCopiesPerThread / per_unit));
  parallel_for(units, grain, fn);
}

// A matrix with a single stored row has no meaningful leading dimension:
// give it its column count (libxsmm checks leading dimensions).
void normalize_lds(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                   std::int64_t& lda, std::int64_t& ldb, std::int64_t& ldc) {
  if ((ta ? k : m) == 1) lda = ta ? m : k;
  if ((tb ? n : k) == 1) ldb = tb ? k : n;
  if (m == 1) ldc = n;
}

// Scales rows x cols of C by beta (not 0, not 1).
void scale_block(float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols, float beta) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    for (std::int64_t j = 0; j < cols; ++j) row[j] *= beta;
  }
}

// ---------------------------------------------------------------- float32

using Kernel = libxsmm_smmfunction;

struct Problem {
  bool ta, tb;
  float alpha;
  const float* a;
  std::int64_t lda;
  const float* b;
  std::int64_t ldb;
  float beta;
  float* c;
  std::int64_t ldc;
  // B read where it is (libxsmm's A with lda = ldb) instead of packed.
  bool b_in_place = false;
  // A read where it is (libxsmm's B with ldb = lda) instead of packed.
  bool a_in_place = false;
  // After each tile's product (beta 0); its bias is offset to the slab's columns.
  SgemmEpilogue epilogue = {};
  // A (read in place) copied first, slab by slab of rows, to rows of padded_ld(k).
  bool a_padded = false;
};

// Operands are read where they are whenever their layout allows: a B stored
// [k, n] by a product of few rows, which would not repay copying B (MLP
// 784 -> 512 input gradient at batch 64: 0.58 -> 0.77 of peak, CPU time),
// and a stored [m, k] A (alpha is folded into packed rows, so only when alpha
// is 1). Whatever the row stride: on the Intel Xeon VM (48 KiB, 12-way L1),
// reading in place also at strides of an even number of cache lines (packed
// before) left no float32 row of bm_gemm's BM_Sgemm_libxsmm slower beyond
// run-to-run noise (3 %) and made several faster (1 thread: 256^3 156 -> 168
// GFLOP/s, 1024^3 131 -> 139; 2 threads: 256^3 214 -> 255, 512^3 243 -> 266),
// and char_lm's training step 6 % faster on 1 and 2 threads (its activations
// have rows of 192 and 768 floats). The kernel sums the same products in the
// same order either way: the bits do not change.
bool read_b_in_place(bool tb, std::int64_t m) { return !tb && m <= 2 * kTaskRows; }

// A stored [k, m] (a weight gradient dY^T X) is read in place too, by kernels
// generated with LIBXSMM_GEMM_FLAG_TRANS_B: each step of k broadcasts a run of
// one stored row. Packing it means transposing it, which is memory-latency
// bound (TSC cycles, Zen 4 VM: 6-19 % of char_lm's weight gradients' time);
// in place against packed, alternating call by call (an ad-hoc program on
// libms, Zen 4 VM, 1 thread, medians of 15 pairs, A^T B): 768 x 192 x 4096
// 1.21x, 576 x 192 x 4096 1.14x, 192 x 192 x 4096 1.23x, 1024^3 1.05x,
// 512 x 784 x 64 1.01x; the same bits.
bool read_a_in_place(const Problem& pr) { return pr.alpha == 1.f; }

// A stored [m, k] read in place whose rows are a multiple of 4 KiB apart is
// copied (slab by slab of rows) to rows of padded_ld(k) first when C has a
// panel of one vector or less (n modulo panel_width() in 1..16): libxsmm's kernel for
// such a panel keeps many rows of C in registers (more than 8 here) and
// broadcasts from as many rows of A at each step of k, and rows 4 KiB apart
// all fall in one set of the L1 cache (8 ways here). A full panel (9 rows at
// once) loses little, and two vectors not enough to repay the copy. 1 thread,
// A's rows 4 KiB apart, copied / read in place (an ad-hoc program on libms,
// one process per variant, alternating, medians; Zen 4 VM): 1024 x 16 x 1024
// 80 / 26 GFLOP/s, 1024 x 200 x 1024 99-102 / 85-86, 1024^3 104-105 /
// 100-102, 64 x 1024 x 1024 109 / 104; with panels of two vectors it lost
// (2048 x 2048 x 1024 104 / 105-106, 512 x 512 x 2048 102-104 / 105-107), and
// with whole panels too (1024 x 48 x 1024 97-99 / 112-113). The copy changes
// no sum: the same bits.
bool pad_a_rows(const Problem& pr, std::int64_t m, std::int64_t n) {
  const std::int64_t edge = n % panel_width();
  return pr.a_in_place && !pr.ta && pr.lda % 1024 == 0 && m > 8 && edge > 0 && edge <= 16;
}

// The row stride of A's padded copy: k rounded up to 16 floats (64 bytes),
// 16 more when that is a multiple of 1024.
std::int64_t padded_ld(std::int64_t k) {
  const std::int64_t ld = (k + 15) / 16 * 16;
  return ld % 1024 == 0 ? ld + 16 : ld;
}

// Where the rows of op(A) of chunk q start: in place, row i0 (column i0 of a
// stored [k, m] A, whose rows are lda apart); packed, rows chunk apart.
const float* a_rows(const Plan& pl, const Problem& pr, const float* pa, std::int64_t q,
                    std::int64_t i0) {
  if (!pr.a_in_place) return pa + q * pl.m * pl.chunk + i0 * pl.chunk;
  return pr.ta ? pr.a + q * pl.chunk * pr.lda + i0 : pr.a + i0 * pr.lda + q * pl.chunk;
}

// The JIT kernels of one product, generated before C is touched: full and
// edge panel width x full and edge task height x full and last chunk depth x
// (into a group's sum block | into C) x (overwrite | accumulate). With
// `a_transposed` they read op(A) as a stored [k, m] A (libxsmm's B transposed).
struct Kernels {
  Kernel k[2][2][2][2][2] = {};
  Kernel get(const Plan& pl, std::int64_t cols, std::int64_t rows, std::int64_t depth, bool into_c,
             bool accumulate) const {
    return k[cols == std::min(pl.n, panel_width()) ? 0 : 1]
            [rows == std::min(pl.m, kTaskRows) ? 0 : 1][depth == pl.chunk ? 0 : 1][into_c ? 1 : 0]
            [accumulate ? 1 : 0];
  }
};

// ld_b: op(B)'s row stride for the full panels' kernels and the last panel's.
bool make_kernels(Kernels& ks, const Plan& pl, const std::int64_t (&ld_b)[2], std::int64_t ld_a,
                  bool a_transposed, std::int64_t ld_c, float beta_c, bool scale_add) {
  // Only the kernels run_task calls: into the block only past the first
  // group (every group with scale_add); into C overwriting only when beta is
  // 0, accumulating when beta is not 0 or the first group has more than one
  // chunk (never with scale_add).
  const bool deep = pl.chunks > pl.group;
  const bool need[2][2] = {
      {deep || scale_add, deep || (scale_add && pl.chunks > 1)},
      {!scale_add && beta_c == 0.f, !scale_add && (beta_c != 0.f || pl.chunks > 1)}};
  const std::int64_t cols[2] = {std::min(pl.n, panel_width()), pl.n % panel_width()};
  const std::int64_t rows[2] = {std::min(pl.m, kTaskRows), pl.m % kTaskRows};
  const std::int64_t depths[2] = {pl.chunk, pl.depth(pl.chunks - 1)};
  const auto ldb = static_cast<libxsmm_blasint>(ld_a);
  const float alpha = 1.f;
  const int prefetch = LIBXSMM_PREFETCH_NONE;
  for (int ic = 0; ic < 2; ++ic) {
    const auto ldc = static_cast<libxsmm_blasint>(ic ? ld_c : panel_width());
    for (int acc = 0; acc < 2; ++acc)
      for (int ci = 0; ci < 2; ++ci)
        for (int ri = 0; ri < 2; ++ri)
          for (int di = 0; di < 2; ++di) {
            if (!need[ic][acc] || cols[ci] == 0 || rows[ri] == 0 ||
                (ci == 1 && cols[1] == cols[0]) || (ri == 1 && rows[1] == rows[0]) ||
                (di == 1 && depths[1] == depths[0]))
              continue;
            const float beta = acc ? 1.f : 0.f;
            const auto lda = static_cast<libxsmm_blasint>(ld_b[ci]);
            const int flags = (acc ? LIBXSMM_GEMM_FLAG_NONE : LIBXSMM_GEMM_FLAG_BETA_0) |
                              (a_transposed ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE);
            Kernel f = libxsmm_smmdispatch(static_cast<libxsmm_blasint>(cols[ci]),
                                           static_cast<libxsmm_blasint>(rows[ri]),
                                           static_cast<libxsmm_blasint>(depths[di]), &lda, &ldb,
                                           &ldc, &alpha, &beta, &flags, &prefetch);
            if (f == nullptr) return false;
            ks.k[ci][ri][di][ic][acc] = f;
          }
  }
  return true;
}

// Rows [r0, r1) of op(A), times alpha, into the chunks of `pa`.
void pack_a(const Plan& pl, const Problem& pr, std::int64_t r0, std::int64_t r1, float* pa) {
  for (std::int64_t q = 0; q < pl.chunks; ++q) {
    const std::int64_t p0 = q * pl.chunk, depth = pl.depth(q);
    float* dst = pa + q * pl.m * pl.chunk + r0 * pl.chunk;
    if (pr.ta)  // A stored [k, m]: rows p0.. of A, columns r0..r1, transposed
      transpose32(pr.a + p0 * pr.lda + r0, pr.lda, depth, r1 - r0, dst, pl.chunk);
    else
      for (std::int64_t i = r0; i < r1; ++i)
        std::memcpy(dst + (i - r0) * pl.chunk, pr.a + i * pr.lda + p0,
                    static_cast<std::size_t>(depth) * sizeof(float));
    if (pr.alpha != 1.f)
      for (std::int64_t i = r0; i < r1; ++i)
        for (std::int64_t p = 0; p < depth; ++p) dst[(i - r0) * pl.chunk + p] *= pr.alpha;
  }
}

// Panel `panel` of a B stored [n, k] into `pb`, transposed: k rows of
// width(j0) floats, row stride packed_ld(j0).
void pack_b_transposed(const Plan& pl, const Problem& pr, std::int64_t panel, float* pb) {
  const std::int64_t j0 = panel * panel_width();
  transpose32(pr.b + j0 * pr.ldb, pr.ldb, pl.width(j0), pl.k, pb + panel * pl.k * panel_width(),
              pl.packed_ld(j0));
}

// Rows [p0, p1) of a B stored [k, n] into every panel of `pb`: each row of B
// is read once, in order. Packing panel by panel instead reads a strip of
// panel_width() floats from every row, one row stride apart, which the hardware
// prefetcher follows poorly: 512^3 on one thread spent 8 % of its time there
// (TSC cycles in the packing loop, Zen 4 VM), at about 4 GB/s.
void pack_b_rows(const Plan& pl, const Problem& pr, std::int64_t p0, std::int64_t p1, float* pb) {
  const std::int64_t full = pl.n / panel_width(), edge = pl.n - full * panel_width();
  for (std::int64_t p = p0; p < p1; ++p) {
    const float* src = pr.b + p * pr.ldb;
    float* dst = pb + p * panel_width();
    for (std::int64_t j = 0; j < full; ++j)
      std::memcpy(dst + j * pl.k * panel_width(), src + j * panel_width(),
                  panel_width() * sizeof(float));
    if (edge != 0)
      std::memcpy(pb + full * pl.k * panel_width() + p * pl.packed_ld(full * panel_width()),
                  src + full * panel_width(), static_cast<std::size_t>(edge) * sizeof(float));
  }
}

// Columns [j0, j0 + cols) of C's rows [i0, i0 + rows), chunks [first_chunk,
// end_chunk) of k (whole groups; see Plan::group). Per panel, the kernel sums
// a group's chunks in one chain of multiply-adds: the first group's straight
// into C (onto beta C), each later group's from zero into a block that is then
// added to C. An element of C is a sum of group sums, whose rounding error
// grows with the group's depth plus the number of groups rather than with k
// (test "gemm: a deep product is a sum of group sums"). The bias is added
// after the last group, while the block of C is still in cache.
// (The block holds a product of one group only: libxsmm_sgemm declines
// scale_add for deeper ones.)
void run_task(const Plan& pl, const Problem& pr, const Kernels& ks, const float* pa,
              const float* pb, std::int64_t i0, std::int64_t rows, std::int64_t j0,
              std::int64_t cols, std::int64_t first_chunk, std::int64_t end_chunk) {
  if (first_chunk == 0 && pr.beta != 0.f && pr.beta != 1.f)
    scale_block(pr.c + i0 * pr.ldc + j0, pr.ldc, rows, cols, pr.beta);
  float* sum = static_cast<float*>(
      block_scratch().get(static_cast<std::size_t>(kTaskRows * panel_width()) * sizeof(float)));
  for (std::int64_t g0 = first_chunk; g0 < end_chunk; g0 += pl.group) {
    const std::int64_t g1 = std::min(pl.chunks, g0 + pl.group);
    // C * scale + product: the product goes to the block, then onto C.
    const bool into_c = g0 == 0 && !pr.epilogue.scale_add;
    const float* bias = g1 == pl.chunks ? pr.epilogue.bias : nullptr;
    for (std::int64_t jp = j0; jp < j0 + cols; jp += panel_width()) {
      const std::int64_t w = pl.width(jp);
      float* out = into_c ? pr.c + i0 * pr.ldc + jp : sum;
      for (std::int64_t q = g0; q < g1; ++q) {
        const float* kb = a_rows(pl, pr, pa, q, i0);
        const float* ka = pr.b_in_place ? pr.b + q * pl.chunk * pr.ldb + jp
                                        : pb + (jp / panel_width()) * pl.k * panel_width() +
                                              q * pl.chunk * pl.packed_ld(jp);
        ks.get(pl, w, rows, pl.depth(q), into_c, q > g0 || (into_c && pr.beta != 0.f))(ka, kb, out);
      }
      if (pr.epilogue.scale_add) {
        float* c_tile = pr.c + i0 * pr.ldc + jp;
        scale_add(c_tile, pr.ldc, rows, w, pr.epilogue.scale, sum, panel_width());
        if (pr.epilogue.d != nullptr)
          sub_scaled(pr.epilogue.d + i0 * pr.epilogue.ldd + jp, pr.epilogue.ldd, rows, w,
                     pr.epilogue.sub_scale, c_tile, pr.ldc);
      } else if (!into_c)
        for (std::int64_t i = 0; i < rows; ++i) {
          float* crow = pr.c + (i0 + i) * pr.ldc + jp;
          const float* srow = sum + i * panel_width();
          for (std::int64_t j = 0; j < w; ++j) crow[j] += srow[j];
        }
      if (bias != nullptr)
        add_bias(pr.c + i0 * pr.ldc + jp, pr.ldc, rows, w, bias + jp, pr.epilogue.relu);
    }
  }
}

// A B of a single panel (a product of few columns: the swapped batch-64
// forward C^T = W x^T packs x^T), which every task reads, packed by each
// thread into its own buffer as its first chunk of tasks starts, when the
// tasks run on more than one thread. Packed once for all, the other threads
// waited for it and then read it from the packing thread's cache: on the
// 2-vCPU Zen 5 VM, in the host's slow phases, a core reads lines the other
// core has just written at 36-40 GB/s against 121-130 for its own (an ad-hoc
// loop). There, 2 threads, alternating processes of an ad-hoc loop: x W^T
// 64 x 256 x 512 58-60 -> 43-46 us, 64 x 512 x 784 149-150 -> 125-126,
// 16 x 512 x 784 39-41 -> 34-36; the MLP's training step 1,490-1,520 ->
// 1,570-1,600 steps/s, its amp O2 step (bfloat16 x W^T) 1,994-2,080 ->
// 2,062-2,156. A thread packs into its pack_b_scratch(); one whose buffer
// cannot be allocated reads the shared `pb`, packed once. Every copy holds
// the same values: the results do not change (tests "gemm on libxsmm: a B of
// one panel packed by each thread, exactly, on 1 and 2 threads" and
// "gemm_bf16: x W^T with x one panel, packed by each thread, exactly, on 1
// and 2 threads").
//
// Off (`on` false), every thread reads `pb`, packed with the rest of B before
// the tasks. `pack(to)` packs the panel into `to`; `bytes` is its size.
std::atomic<std::uint64_t> g_panel_calls{0};
thread_local std::uint64_t t_panel_call = 0;  // the call whose panel pack_b_scratch() holds

template <class T, class Pack>
class PrivatePanel {
 public:
  PrivatePanel(bool on, std::size_t bytes, T* pb, Pack pack)
      : on_(on),
        bytes_(bytes),
        pb_(pb),
        pack_(pack),
        call_(on ? g_panel_calls.fetch_add(1, std::memory_order_relaxed) + 1 : 0) {}

  // When on, `pb` packed if no chunk packed it yet (the float32 path's
  // calling thread packs into `pb` itself: its pack_b_scratch()); a later
  // slab of rows reads it.
  void pack_shared() {
    if (on_) std::call_once(shared_, [this] { pack_(pb_); });
  }

  // This thread's packed panel.
  const T* get() {
    if (!on_) return pb_;
    auto* own = static_cast<T*>(pack_b_scratch().get(bytes_));
    if (own == nullptr || own == pb_) {
      pack_shared();
      return pb_;
    }
    if (t_panel_call != call_) {
      pack_(own);
      t_panel_call = call_;
    }
    return own;
  }

 private:
  bool on_;
  std::size_t bytes_;
  T* pb_;
  Pack pack_;
  std::uint64_t call_;
  std::once_flag shared_;
};

// Whether each thread packs its own copy of B (PrivatePanel): B is packed,
// it is one panel and the tasks run on more than one thread.
bool private_panel(const Plan& pl, bool pack_b) {
  return pack_b && pl.panels == 1 &&
         detail::threads_for(pl.row_tasks * pl.col_tasks, pl.task_grain()) > 1;
}

// Packs the operands `pack_a_now` / `pack_b_now` ask for (an operand not
// packed now is still current from the previous slab, or read in place),
// then runs the tasks.
void run_sgemm(const Plan& pl, const Problem& pr, const Kernels& ks, float* pa, float* pb,
               bool pack_a_now, bool pack_b_now) {
  // Packing: rows of A in groups of kTaskRows, then B: a panel per unit when
  // B is stored [n, k] (transposed panel by panel), else as many strips of
  // its rows (each copied into every panel). A B of one panel, which every
  // task reads, is packed by each thread instead (private_b below).
  const bool private_b = private_panel(pl, pack_b_now);
  const std::int64_t a_units = pack_a_now ? pl.row_tasks : 0;
  const std::int64_t strip = (pl.k + pl.panels - 1) / pl.panels;
  const std::int64_t b_units = !pack_b_now || private_b ? 0
                               : pr.tb                  ? pl.panels
                                                        : (pl.k + strip - 1) / strip;
  parallel_units(pl, a_units + b_units, static_cast<double>(panel_width() * pl.k),
                 [&](std::int64_t u0, std::int64_t u1) {
                   for (std::int64_t u = u0; u < u1; ++u) {
                     const std::int64_t b = u - a_units;
                     if (u < a_units)
                       pack_a(pl, pr, u * kTaskRows, std::min(pl.m, (u + 1) * kTaskRows), pa);
                     else if (pr.tb)
                       pack_b_transposed(pl, pr, b, pb);
                     else
                       pack_b_rows(pl, pr, b * strip, std::min(pl.k, (b + 1) * strip), pb);
                   }
                 });
  // A thread's tasks of a deep product (more than one group) run group by
  // group over bands of band_tasks() tasks, so that a group's packed rows of A
  // are read from L2 by every task of the band that shares them; each element
  // of C still sums its groups in the same order.
  const std::int64_t band = pl.chunks > pl.group ? band_tasks() : 0;
  PrivatePanel panel(private_b, static_cast<std::size_t>(pl.k * panel_width()) * sizeof(float), pb,
                     [&](float* to) {
                       if (pr.tb)
                         pack_b_transposed(pl, pr, 0, to);
                       else
                         pack_b_rows(pl, pr, 0, pl.k, to);
                     });
  parallel_for(pl.row_tasks * pl.col_tasks, pl.task_grain(), [&](std::int64_t t0, std::int64_t t1) {
    const float* b = panel.get();
    const auto task = [&](std::int64_t t, std::int64_t c0, std::int64_t c1) {
      const std::int64_t i0 = t / pl.col_tasks * kTaskRows, j0 = t % pl.col_tasks * task_cols();
      run_task(pl, pr, ks, pa, b, i0, std::min(kTaskRows, pl.m - i0), j0,
               std::min(task_cols(), pl.n - j0), c0, c1);
    };
    if (band == 0) {
      for (std::int64_t t = t0; t < t1; ++t) task(t, 0, pl.chunks);
      return;
    }
    for (std::int64_t b0 = t0; b0 < t1; b0 += band)
      for (std::int64_t g0 = 0; g0 < pl.chunks; g0 += pl.group)
        for (std::int64_t t = b0; t < std::min(t1, b0 + band); ++t)
          task(t, g0, std::min(pl.chunks, g0 + pl.group));
  });
  panel.pack_shared();
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

std::int64_t libxsmm_panel_width() noexcept { return panel_width(); }

BlockKernel libxsmm_block_kernel(bool trans_a, bool accumulate, std::int64_t m, std::int64_t n,
                                 std::int64_t k, std::int64_t lda, std::int64_t ldb,
                                 std::int64_t ldc) noexcept {
  std::string why;
  if (!libxsmm_usable(why)) return {};
  for (const std::int64_t v : {m, n, k, lda, ldb, ldc})
    if (v <= 0 || v > INT_MAX) return {};
  // Column-major, C^T [n, m] = B^T [n, k] op(A)^T [k, m]: libxsmm's A is our
  // B, its B our A (transposed in its terms unless ours is).
  const auto M = static_cast<libxsmm_blasint>(n), N = static_cast<libxsmm_blasint>(m),
             K = static_cast<libxsmm_blasint>(k);
  const auto xlda = static_cast<libxsmm_blasint>(ldb), xldb = static_cast<libxsmm_blasint>(lda),
             xldc = static_cast<libxsmm_blasint>(ldc);
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  const int flags = (trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE) |
                    (accumulate ? LIBXSMM_GEMM_FLAG_NONE : LIBXSMM_GEMM_FLAG_BETA_0);
  const int prefetch = LIBXSMM_PREFETCH_NONE;
  return {libxsmm_smmdispatch(M, N, K, &xlda, &xldb, &xldc, &alpha, &beta, &flags, &prefetch)};
}

namespace {
bool amx_usable() noexcept;
}  // namespace

bool libxsmm_bf16_native() noexcept {
  std::string why;
  return libxsmm_usable(why) &&
         (libxsmm_get_target_archid() >= LIBXSMM_X86_AVX512_CPX || amx_usable());
}

bool libxsmm_bf16_amx() noexcept {
  std::string why;
  return libxsmm_usable(why) && amx_usable();
}

namespace {

// One slab of C (see sgemm_slabs): false when a kernel or a packing buffer is
// missing (then nothing was written). `dry`: only generate the kernels and the
// buffers.
bool sgemm_slab(const Problem& whole_pr, std::int64_t m, std::int64_t n, std::int64_t k, bool dry,
                bool pack_a_now, bool pack_b_now) {
  const Plan pl(m, n, k, false);
  Problem pr = whole_pr;
  if (pr.a_padded) {  // this slab's rows of A, copied (pad_a_rows)
    const std::int64_t ld = padded_ld(k);
    auto* copy =
        static_cast<float*>(pack_scratch().get(static_cast<std::size_t>(m * ld) * sizeof(float)));
    if (copy == nullptr) return false;
    if (!dry && pack_a_now)
      parallel_for(m, std::max<std::int64_t>(1, static_cast<std::int64_t>(kCopiesPerThread) / k),
                   [&](std::int64_t r0, std::int64_t r1) {
                     for (std::int64_t r = r0; r < r1; ++r)
                       std::memcpy(copy + r * ld, whole_pr.a + r * whole_pr.lda,
                                   static_cast<std::size_t>(k) * sizeof(float));
                   });
    pr.a = copy;
    pr.lda = ld;
  }
  Kernels ks;
  const std::int64_t edge_j0 = pl.n - pl.n % panel_width();
  const std::int64_t ld_b[2] = {pr.b_in_place ? pr.ldb : pl.packed_ld(0),
                                pr.b_in_place || edge_j0 >= pl.n ? pr.ldb : pl.packed_ld(edge_j0)};
  if (!make_kernels(ks, pl, ld_b, pr.a_in_place ? pr.lda : pl.chunk, pr.a_in_place && pr.ta, pr.ldc,
                    pr.beta, pr.epilogue.scale_add))
    return false;
  const auto a_size = pr.a_in_place ? 0 : static_cast<std::size_t>(pl.chunks * pl.chunk * m);
  const auto b_size = pr.b_in_place ? 0 : static_cast<std::size_t>(pl.panels * panel_width() * k);
  auto* pa = static_cast<float*>(pack_scratch().get(a_size * sizeof(float)));
  auto* pb = static_cast<float*>(pack_b_scratch().get(b_size * sizeof(float)));
  if (pa == nullptr || pb == nullptr) return false;
  if (!dry)
    run_sgemm(pl, pr, ks, pa, pb, pack_a_now && !pr.a_in_place, pack_b_now && !pr.b_in_place);
  return true;
}

// The slabs of a float32 product (see kPackBudget): only a packed operand is
// cut (one read in place is never copied). A slab's packed rows of A stay
// current while the slabs of columns under them change, and a slab's packed
// panels of B while the slabs of rows change: the loops run in the order that
// packs fewer elements in all (the weight gradient of a 192 -> 576 dense
// layer at 4096 tokens packs its transposed A once instead of once per slab of
// columns). Calls fn(i0, rows, j0, cols, pack_a_now, pack_b_now).
template <class F>
void sgemm_slabs(const Problem& pr, std::int64_t m, std::int64_t n, std::int64_t k, F&& fn) {
  const bool a_copied = !pr.a_in_place || pr.a_padded;
  const std::int64_t rows = a_copied ? slab_rows(k) : m;
  const std::int64_t cols = pr.b_in_place ? n : slab_cols(k);
  const double a_packed = a_copied ? static_cast<double>(m) * static_cast<double>(k) : 0.0;
  const double b_packed = pr.b_in_place ? 0.0 : static_cast<double>(n) * static_cast<double>(k);
  const auto row_slabs = static_cast<double>((m + rows - 1) / rows);
  const auto col_slabs = static_cast<double>((n + cols - 1) / cols);
  const bool rows_outer = a_packed + row_slabs * b_packed <= b_packed + col_slabs * a_packed;
  std::int64_t packed_i0 = -1, packed_j0 = -1;
  const auto slab = [&](std::int64_t i0, std::int64_t j0) {
    fn(i0, std::min(rows, m - i0), j0, std::min(cols, n - j0), i0 != packed_i0, j0 != packed_j0);
    packed_i0 = i0;
    packed_j0 = j0;
  };
  if (rows_outer)
    for (std::int64_t i0 = 0; i0 < m; i0 += rows)
      for (std::int64_t j0 = 0; j0 < n; j0 += cols) slab(i0, j0);
  else
    for (std::int64_t j0 = 0; j0 < n; j0 += cols)
      for (std::int64_t i0 = 0; i0 < m; i0 += rows) slab(i0, j0);
}

bool sgemm_checked(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                   float beta, float* c, std::int64_t ldc, bool may_swap,
                   const SgemmEpilogue& epilogue = {});

Scratch& swap_scratch() {
  thread_local Scratch s;
  return s;
}

Scratch& swap_rows_scratch() {
  thread_local Scratch s;
  return s;
}

// The product may be computed as C^T = op(B)^T op(A)^T instead, C going
// through a scratch block (m n moves each way; one when beta is 0). A B stored
// [n, k] must be transposed to be packed (n k moves); swapped, B is read as it
// is stored and op(A) is transposed (m k moves, none when A is stored
// [k, m]). That pays for few rows and many columns (MLP 784 -> 512 forward at
// batch 64, x W^T). A weight gradient A^T B (A stored [k, m], B [k, n]) is not
// swapped: A is read in place either way, and swapped (B read in place, A
// read in place or packed, C through the scratch) it ran 0.96x (768 x 192 x
// 4096) and 0.98x (576 x 192 x 4096) against unswapped (an ad-hoc program
// alternating both, Zen 4 VM, 1 thread, medians of 15 pairs).
// The rule swaps when B's moves exceed 3/4 of A's and C's (C's counted 4
// times). Against twice them (Zen 5 VM, an ad-hoc program on libms
// alternating both in one process, medians of 30, x W^T, GFLOP/s): 64 x 256
// x 512 (the MLP's second forward) 201-207 -> 235-241 (2 threads 200 -> 225),
// 64 x 512 x 256 182-209 -> 220-221, 64 x 128 x 1024 179 -> 209, 96 x 384 x
// 384 216 -> 233; 128 x 512 x 512 and 200 x 1024 x 512 the same (237 / 236,
// 227 / 227); at half of them 256 x 512 x 784 swapped lost (236 -> 231).
// Each element of C is the same sum in the same order either way (the two
// factors of each multiply-add swap places), so the result keeps its bits.
bool swap_pays(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha) {
  if (alpha != 1.f || !tb) return false;
  const auto dm = static_cast<double>(m), dn = static_cast<double>(n), dk = static_cast<double>(k);
  return dn * dk > 0.75 * ((ta ? 0 : dm) * dk + 4 * dm * dn);
}

bool sgemm_swapped(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                   std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                   std::int64_t ldc) {
  auto* d =
      static_cast<float*>(swap_scratch().get(static_cast<std::size_t>(m * n) * sizeof(float)));
  if (d == nullptr) return false;
  if (beta != 0.f) transpose32(c, ldc, m, n, d, m);  // d = C^T, [n, m]
  if (!sgemm_checked(!tb, !ta, n, m, k, 1.f, b, ldb, a, lda, beta, d, m, false)) return false;
  transpose32(d, m, n, m, c, ldc);
  return true;
}

bool sgemm_checked(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                   float beta, float* c, std::int64_t ldc, bool may_swap,
                   const SgemmEpilogue& epilogue) {
  // (Swapped, C goes through a scratch block: a scale_add would read C there.)
  if (may_swap && !epilogue.scale_add && swap_pays(trans_a, trans_b, m, n, k, alpha)) {
    if (!sgemm_swapped(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc)) return false;
    if (epilogue.bias != nullptr) add_bias(c, ldc, m, n, epilogue.bias, epilogue.relu);
    return true;
  }
  Problem whole{trans_a, trans_b, alpha, a, lda, b, ldb, beta, c, ldc, false, false, epilogue};
  whole.a_in_place = read_a_in_place(whole);
  whole.a_padded = pad_a_rows(whole, m, n);
  whole.b_in_place = read_b_in_place(trans_b, m);
  // A dry pass generates every slab's kernels first, so that a failure
  // leaves C untouched (Eigen then computes the product).
  bool ok = true;
  for (const bool dry : {true, false})
    sgemm_slabs(whole, m, n, k,
                [&](std::int64_t i0, std::int64_t rows, std::int64_t j0, std::int64_t cols,
                    bool pack_a_now, bool pack_b_now) {
                  Problem pr = whole;
                  pr.a = trans_a ? a + i0 : a + i0 * lda;
                  pr.b = trans_b ? b + j0 * ldb : b + j0;
                  pr.c = c + i0 * ldc + j0;
                  if (epilogue.bias != nullptr) pr.epilogue.bias = epilogue.bias + j0;
                  if (epilogue.d != nullptr) pr.epilogue.d = epilogue.d + i0 * epilogue.ldd + j0;
                  ok = ok && sgemm_slab(pr, rows, cols, k, dry, pack_a_now, pack_b_now);
                });
  return ok;
}

}  // namespace

bool libxsmm_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                   float beta, float* c, std::int64_t ldc, const SgemmEpilogue& epilogue) noexcept {
  const bool has_epilogue = epilogue.bias != nullptr || epilogue.scale_add;
  if (m <= 0 || n <= 0 || k <= 0 || (has_epilogue && beta != 0.f)) return false;
  if (epilogue.scale_add) {
    const Plan pl(m, n, k, false);
    if (pl.chunks > pl.group) return false;
  }
  normalize_lds(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  for (const std::int64_t v : {m, n, k, lda, ldb, ldc})
    if (v > INT_MAX) return false;
  return sgemm_checked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, true,
                       epilogue);
}

// ---------------------------------------------------------------- bfloat16

namespace {

using BKernel = libxsmm_bsmmfunction;

struct BProblem {
  bool ta, tb;
  float alpha;
  const std::uint16_t* a;
  std::int64_t lda;
  const std::uint16_t* b;
  std::int64_t ldb;
  float beta;
  float* c;
  std::int64_t ldc;
  std::uint16_t* c16;  // when not null (beta 0): C in bfloat16 instead of c
  // A stored [m, k] read where it is (libxsmm's B, ldb = lda) instead of
  // packed: see bgemm_slab.
  bool a_in_place = false;
};

std::int64_t round_even(std::int64_t v) { return v + (v & 1); }

// The kernels sum straight into C (alpha 1, float32 C); otherwise into the
// task's float32 block, which store_sums then writes to C.
bool sums_into_c(const BProblem& pr) { return pr.alpha == 1.f && pr.c16 == nullptr; }

// `cols` elements of row `row` of C from column `col`, from a row of float32
// sums (overwritten): alpha * sum + beta * C, or with c16 alpha * sum rounded
// to bfloat16 once (as a float32 C converted afterwards).
void store_sums(const BProblem& pr, float* sums, std::int64_t row, std::int64_t col,
                std::int64_t cols) {
  if (pr.c16 != nullptr) {
    if (pr.alpha != 1.f)
      for (std::int64_t j = 0; j < cols; ++j) sums[j] *= pr.alpha;
    float_to_bfloat16_n(sums, reinterpret_cast<bfloat16_t*>(pr.c16 + row * pr.ldc + col), cols);
    return;
  }
  float* crow = pr.c + row * pr.ldc + col;
  for (std::int64_t j = 0; j < cols; ++j)
    crow[j] = pr.beta == 0.f ? pr.alpha * sums[j] : pr.alpha * sums[j] + pr.beta * crow[j];
}

// As Kernels, for bfloat16 (VNNI panels, depths rounded up to even); `ldc` is
// C's when the sums go straight to C (alpha 1, float32 C), else the task
// block's.
struct BKernels {
  BKernel k[2][2][2][2] = {};
  BKernel get(const Plan& pl, std::int64_t cols, std::int64_t rows, std::int64_t depth,
              bool overwrite) const {
    return k[cols == std::min(pl.n, panel_width()) ? 0 : 1]
            [rows == std::min(pl.m, kTaskRows) ? 0 : 1][depth == pl.chunk ? 0 : 1]
            [overwrite ? 1 : 0];
  }
};

bool make_bkernels(BKernels& ks, const Plan& pl, std::int64_t ld_a, std::int64_t ldc,
                   bool need_overwrite) {
  const std::int64_t cols[2] = {std::min(pl.n, panel_width()), pl.n % panel_width()};
  const std::int64_t rows[2] = {std::min(pl.m, kTaskRows), pl.m % kTaskRows};
  const std::int64_t depths[2] = {pl.chunk, pl.depth(pl.chunks - 1)};
  const libxsmm_blasint lda = panel_width(), ldb = static_cast<libxsmm_blasint>(ld_a),
                        ldcx = static_cast<libxsmm_blasint>(ldc);
  const float alpha = 1.f;
  const int prefetch = LIBXSMM_PREFETCH_NONE;
  for (int ci = 0; ci < 2; ++ci)
    for (int ri = 0; ri < 2; ++ri)
      for (int di = 0; di < 2; ++di)
        for (int ow = 0; ow < 2; ++ow) {
          if (cols[ci] == 0 || rows[ri] == 0 || (ci == 1 && cols[1] == cols[0]) ||
              (ri == 1 && rows[1] == rows[0]) || (di == 1 && depths[1] == depths[0]) ||
              (ow == 1 && !need_overwrite))
            continue;
          const float beta = ow ? 0.f : 1.f;
          const int flags = LIBXSMM_GEMM_FLAG_VNNI_A | (ow ? LIBXSMM_GEMM_FLAG_BETA_0 : 0);
          BKernel f = libxsmm_bsmmdispatch(static_cast<libxsmm_blasint>(cols[ci]),
                                           static_cast<libxsmm_blasint>(rows[ri]),
                                           static_cast<libxsmm_blasint>(round_even(depths[di])),
                                           &lda, &ldb, &ldcx, &alpha, &beta, &flags, &prefetch);
          if (f == nullptr) return false;
          ks.k[ci][ri][di][ow] = f;
        }
  return true;
}

// Rows [r0, r1) of op(A) into the chunks of `pa` (m x chunk each), an odd
// last chunk padded with a zero column.
void pack_a_bf16(const Plan& pl, const BProblem& pr, std::int64_t r0, std::int64_t r1,
                 std::uint16_t* pa) {
  for (std::int64_t q = 0; q < pl.chunks; ++q) {
    const std::int64_t p0 = q * pl.chunk, depth = pl.depth(q);
    std::uint16_t* dst = pa + q * pl.m * pl.chunk + r0 * pl.chunk;
    if (pr.ta)
      libxsmm_otrans(dst, pr.a + p0 * pr.lda + r0, sizeof(std::uint16_t),
                     static_cast<libxsmm_blasint>(r1 - r0), static_cast<libxsmm_blasint>(depth),
                     static_cast<libxsmm_blasint>(pr.lda), static_cast<libxsmm_blasint>(pl.chunk));
    else
      for (std::int64_t i = r0; i < r1; ++i)
        std::memcpy(dst + (i - r0) * pl.chunk, pr.a + i * pr.lda + p0,
                    static_cast<std::size_t>(depth) * sizeof(std::uint16_t));
    if (depth & 1)
      for (std::int64_t i = r0; i < r1; ++i) dst[(i - r0) * pl.chunk + depth] = 0;
  }
}

// Panel `panel` of op(B) in VNNI pairs: the pair (p, p + 1) of column j is
// one 32-bit word at (p / 2) * panel_width() + j, the element of row p in its low
// half; an odd k is padded with a zero. A stored [n, k] B already holds each
// pair side by side in its rows, so its panel is a 32-bit transpose.
void pack_b_bf16(const Plan& pl, const BProblem& pr, std::int64_t panel, std::uint16_t* pb) {
  const std::int64_t j0 = panel * panel_width(), w = pl.width(j0), pairs = pl.k / 2;
  auto* dst = reinterpret_cast<std::uint32_t*>(pb + panel * round_even(pl.k) * panel_width());
  const auto at = [&](std::int64_t p, std::int64_t j) -> std::uint32_t {
    return pr.tb ? pr.b[(j0 + j) * pr.ldb + p] : pr.b[p * pr.ldb + j0 + j];
  };
  if (pr.tb && pr.ldb % 2 == 0) {
    transpose32(reinterpret_cast<const float*>(pr.b + j0 * pr.ldb), pr.ldb / 2, w, pairs,
                reinterpret_cast<float*>(dst), panel_width());
  } else if (!pr.tb) {
    for (std::int64_t q = 0; q < pairs; ++q) {
      const std::uint16_t* lo = pr.b + 2 * q * pr.ldb + j0;
      const std::uint16_t* hi = lo + pr.ldb;
      std::uint32_t* out = dst + q * panel_width();
      for (std::int64_t j = 0; j < w; ++j)
        out[j] = std::uint32_t{lo[j]} | (std::uint32_t{hi[j]} << 16);
    }
  } else {
    for (std::int64_t q = 0; q < pairs; ++q)
      for (std::int64_t j = 0; j < w; ++j)
        dst[q * panel_width() + j] = at(2 * q, j) | (at(2 * q + 1, j) << 16);
  }
  if (pl.k % 2 != 0)
    for (std::int64_t j = 0; j < w; ++j) dst[pairs * panel_width() + j] = at(pl.k - 1, j);
}

void run_btask(const Plan& pl, const BProblem& pr, const BKernels& ks, const std::uint16_t* pa,
               const std::uint16_t* pb, std::int64_t i0, std::int64_t rows, std::int64_t j0,
               std::int64_t cols) {
  const bool direct = sums_into_c(pr);
  float* out = pr.c + i0 * pr.ldc + j0;
  std::int64_t ldo = pr.ldc;
  if (!direct) {
    out = static_cast<float*>(
        block_scratch().get(static_cast<std::size_t>(kTaskRows * task_cols()) * sizeof(float)));
    ldo = task_cols();
  } else if (pr.beta != 0.f && pr.beta != 1.f) {
    scale_block(out, pr.ldc, rows, cols, pr.beta);
  }
  const std::int64_t kp = round_even(pl.k);
  for (std::int64_t q = 0; q < pl.chunks; ++q) {
    const std::uint16_t* kb = pr.a_in_place ? pr.a + i0 * pr.lda + q * pl.chunk
                                            : pa + q * pl.m * pl.chunk + i0 * pl.chunk;
    const bool overwrite = q == 0 && (!direct || pr.beta == 0.f);
    for (std::int64_t jp = j0; jp < j0 + cols; jp += panel_width()) {
      const std::uint16_t* ka =
          pb + (jp / panel_width()) * kp * panel_width() + q * pl.chunk * panel_width();
      ks.get(pl, pl.width(jp), rows, pl.depth(q), overwrite)(
          reinterpret_cast<const libxsmm_bfloat16*>(ka),
          reinterpret_cast<const libxsmm_bfloat16*>(kb), out + (jp - j0));
    }
  }
  if (direct) return;
  for (std::int64_t r = 0; r < rows; ++r) store_sums(pr, out + r * ldo, i0 + r, j0, cols);
}

}  // namespace

namespace {

// An A stored [m, k] (the weight W of x W^T, swapped by bgemm_run) is read
// in place when k and its row stride are even: every chunk's depth is then
// even, as the VNNI pairs of B need, without the zero packing pads an odd one
// with. (With an odd stride libxsmm's kernel summed wrong products: test
// "gemm_bf16: bfloat16 inputs, float32 sums, against float64 references",
// whose operands have odd strides, failed.)
bool bgemm_slab(const BProblem& whole_pr, std::int64_t m, std::int64_t n, std::int64_t k,
                bool dry) {
  const Plan pl(m, n, k, true);
  BProblem pr = whole_pr;
  pr.a_in_place = !pr.ta && k % 2 == 0 && pr.lda % 2 == 0;
  const bool direct = sums_into_c(pr);
  BKernels ks;
  if (!make_bkernels(ks, pl, pr.a_in_place ? pr.lda : pl.chunk, direct ? pr.ldc : task_cols(),
                     !direct || pr.beta == 0.f))
    return false;
  const auto a_size = pr.a_in_place ? 0 : static_cast<std::size_t>(pl.chunks * pl.chunk * m);
  const auto b_size = static_cast<std::size_t>(pl.panels * panel_width() * round_even(k));
  auto* buf =
      static_cast<std::uint16_t*>(pack_scratch().get((a_size + b_size) * sizeof(std::uint16_t)));
  if (buf == nullptr) return false;
  if (dry) return true;
  std::uint16_t* pa = buf;
  std::uint16_t* pb = buf + a_size;
  const bool private_b = private_panel(pl, true);
  const std::int64_t a_units = pr.a_in_place ? 0 : pl.row_tasks;
  parallel_units(pl, a_units + (private_b ? 0 : pl.panels), static_cast<double>(panel_width() * k),
                 [&](std::int64_t u0, std::int64_t u1) {
                   for (std::int64_t u = u0; u < u1; ++u) {
                     if (u < a_units)
                       pack_a_bf16(pl, pr, u * kTaskRows, std::min(m, (u + 1) * kTaskRows), pa);
                     else
                       pack_b_bf16(pl, pr, u - a_units, pb);
                   }
                 });
  PrivatePanel panel(private_b, b_size * sizeof(std::uint16_t), pb,
                     [&](std::uint16_t* to) { pack_b_bf16(pl, pr, 0, to); });
  parallel_for(pl.row_tasks * pl.col_tasks, pl.task_grain(), [&](std::int64_t t0, std::int64_t t1) {
    const std::uint16_t* b = panel.get();
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t i0 = t / pl.col_tasks * kTaskRows, j0 = t % pl.col_tasks * task_cols();
      run_btask(pl, pr, ks, pa, b, i0, std::min(kTaskRows, m - i0), j0,
                std::min(task_cols(), n - j0));
    }
  });
  return true;
}

}  // namespace

// ---------------------------------------------------------------- bfloat16 on AMX

// Where the CPU has AMX (AMX-TILE and AMX-BF16, and Linux grants the tile
// state), bfloat16 products run on its tile dot-product instruction
// (TDPBF16PS: 16 x 16 float32 sums of 32 bfloat16 products per instruction)
// instead of libxsmm 1.17's AVX512_BF16 kernels, which ran at 0.6x its
// float32 kernels here (libxsmm 1.17 generates no AMX code). Operands are
// packed padded with zeros: op(A) as rows of kpad = k rounded up to 32, m
// rounded up to 32; op(B) as 32-column panels of VNNI pairs (kpad / 2 rows of
// 32 words). Each 32 x 32 block of C is 2 x 2 tiles summed over the whole k
// in order, then alpha * sum + beta * C is written for its valid part.
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
constexpr std::int64_t kAmxBlock = 32;

bool amx_usable() noexcept {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    if ((d & (1u << 22)) == 0 || (d & (1u << 24)) == 0) return false;  // AMX-BF16, AMX-TILE
    // ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA: the kernel must grant the tile state.
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return ok;
}

struct TileConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

struct AmxPlan {
  std::int64_t m, n, k, kpad, m_pad, panels;
  AmxPlan(std::int64_t m_, std::int64_t n_, std::int64_t k_)
      : m(m_),
        n(n_),
        k(k_),
        kpad((k_ + kAmxBlock - 1) / kAmxBlock * kAmxBlock),
        m_pad((m_ + kAmxBlock - 1) / kAmxBlock * kAmxBlock),
        panels((n_ + kAmxBlock - 1) / kAmxBlock) {}
};

// Rows [r0, r1) of op(A) (rows >= m zero) into pa: m_pad x kpad, zero beyond k.
// A transposed A is read along its rows (op(A)'s columns), contiguously.
void amx_pack_a(const AmxPlan& pl, const BProblem& pr, std::int64_t r0, std::int64_t r1,
                std::uint16_t* pa) {
  const std::int64_t e1 = std::max(r0, std::min(r1, pl.m));
  std::fill(pa + e1 * pl.kpad, pa + r1 * pl.kpad, std::uint16_t{0});  // rows past m
  for (std::int64_t i = r0; i < e1; ++i)
    std::fill(pa + i * pl.kpad + pl.k, pa + (i + 1) * pl.kpad, std::uint16_t{0});
  if (!pr.ta) {
    for (std::int64_t i = r0; i < e1; ++i)
      std::memcpy(pa + i * pl.kpad, pr.a + i * pr.lda, static_cast<std::size_t>(pl.k) * 2);
    return;
  }
  for (std::int64_t p = 0; p < pl.k; ++p) {
    const std::uint16_t* src = pr.a + p * pr.lda;
    for (std::int64_t i = r0; i < e1; ++i) pa[i * pl.kpad + p] = src[i];
  }
}

// Panel `panel` (columns 32 panel ..) of op(B) in VNNI pairs, zero beyond n and k:
// word q * 32 + j holds op(B) (2q, j) in its low and (2q + 1, j) in its high half.
// Stored B (not transposed) interleaves two rows of 32 contiguous values; a
// transposed B's pair (2q, 2q + 1) of column j is one 32-bit word of its row
// j (little-endian: the first value in the low half). Both loops are plain
// loads and stores the compiler vectorizes.
void amx_pack_b(const AmxPlan& pl, const BProblem& pr, std::int64_t panel, std::uint32_t* pb) {
  const std::int64_t j0 = panel * kAmxBlock, w = std::min(kAmxBlock, pl.n - j0);
  const std::int64_t pairs = pl.k / 2, rows = pl.kpad / 2;  // whole pairs; packed rows
  std::uint32_t* dst = pb + panel * rows * kAmxBlock;
  // Zeros: the packed rows past k, and the columns past n of the others.
  const std::int64_t filled = (pl.k + 1) / 2;
  std::fill(dst + filled * kAmxBlock, dst + rows * kAmxBlock, 0u);
  for (std::int64_t q = 0; q < filled && w < kAmxBlock; ++q)
    std::fill(dst + q * kAmxBlock + w, dst + (q + 1) * kAmxBlock, 0u);
  if (pr.tb) {
#if defined(__AVX512F__)
    if (w == kAmxBlock && pr.ldb < (std::int64_t{1} << 25)) {
      // Word q of the 32 rows as two gathers of 16 (offsets in bytes), stored contiguously.
      const __m512i idx = _mm512_mullo_epi32(
          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
          _mm512_set1_epi32(static_cast<int>(2 * pr.ldb)));
      const std::uint16_t* lo = pr.b + j0 * pr.ldb;
      const std::uint16_t* hi = lo + 16 * pr.ldb;
      for (std::int64_t q = 0; q < pairs; ++q) {
        _mm512_storeu_si512(dst + q * kAmxBlock, _mm512_i32gather_epi32(idx, lo + 2 * q, 1));
        _mm512_storeu_si512(dst + q * kAmxBlock + 16, _mm512_i32gather_epi32(idx, hi + 2 * q, 1));
      }
      if (pl.k % 2 != 0)
        for (std::int64_t j = 0; j < w; ++j)
          dst[pairs * kAmxBlock + j] = pr.b[(j0 + j) * pr.ldb + pl.k - 1];
      return;
    }
#endif
    for (std::int64_t j = 0; j < w; ++j) {
      const std::uint16_t* src = pr.b + (j0 + j) * pr.ldb;
      for (std::int64_t q = 0; q < pairs; ++q) {
        std::uint32_t v;
        std::memcpy(&v, src + 2 * q, sizeof v);
        dst[q * kAmxBlock + j] = v;
      }
      if (pl.k % 2 != 0) dst[pairs * kAmxBlock + j] = src[pl.k - 1];
    }
    return;
  }
  for (std::int64_t q = 0; q < pairs; ++q) {
    const std::uint16_t* r0 = pr.b + 2 * q * pr.ldb + j0;
    const std::uint16_t* r1 = r0 + pr.ldb;
    std::uint32_t* out = dst + q * kAmxBlock;
    for (std::int64_t j = 0; j < w; ++j)
      out[j] = static_cast<std::uint32_t>(r0[j]) | (static_cast<std::uint32_t>(r1[j]) << 16);
  }
  if (pl.k % 2 != 0) {
    const std::uint16_t* r0 = pr.b + (pl.k - 1) * pr.ldb + j0;
    for (std::int64_t j = 0; j < w; ++j) dst[pairs * kAmxBlock + j] = r0[j];
  }
}

__attribute__((target("amx-tile,amx-bf16"))) void amx_block(const AmxPlan& pl,
                                                            const std::uint16_t* pa,
                                                            const std::uint32_t* pb, float* out) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const std::int64_t lda = pl.kpad * 2, ldb = kAmxBlock * 4;
  for (std::int64_t p = 0; p < pl.kpad; p += kAmxBlock) {
    _tile_loadd(4, pa + p, lda);
    _tile_loadd(5, pa + 16 * pl.kpad + p, lda);
    _tile_loadd(6, pb + (p / 2) * kAmxBlock, ldb);
    _tile_loadd(7, pb + (p / 2) * kAmxBlock + 16, ldb);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, kAmxBlock * 4);
  _tile_stored(1, out + 16, kAmxBlock * 4);
  _tile_stored(2, out + 16 * kAmxBlock, kAmxBlock * 4);
  _tile_stored(3, out + 16 * kAmxBlock + 16, kAmxBlock * 4);
}

__attribute__((target("amx-tile,amx-bf16"))) void amx_task(const AmxPlan& pl, const BProblem& pr,
                                                           const std::uint16_t* pa,
                                                           const std::uint32_t* pb, std::int64_t i0,
                                                           std::int64_t i1, std::int64_t j0,
                                                           std::int64_t j1) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
  alignas(64) float sum[kAmxBlock * kAmxBlock];
  for (std::int64_t r = i0; r < i1; r += kAmxBlock)
    for (std::int64_t c = j0; c < j1; c += kAmxBlock) {
      amx_block(pl, pa + r * pl.kpad, pb + (c / kAmxBlock) * (pl.kpad / 2) * kAmxBlock, sum);
      const std::int64_t rows = std::min(kAmxBlock, pl.m - r), cols = std::min(kAmxBlock, pl.n - c);
      for (std::int64_t i = 0; i < rows; ++i) store_sums(pr, sum + i * kAmxBlock, r + i, c, cols);
    }
  _tile_release();
}

bool amx_bgemm(const BProblem& pr, std::int64_t m, std::int64_t n, std::int64_t k) {
  const AmxPlan pl(m, n, k);
  const auto a_size = static_cast<std::size_t>(pl.m_pad * pl.kpad);                     // bfloat16
  const auto b_size = static_cast<std::size_t>(pl.panels * (pl.kpad / 2) * kAmxBlock);  // words
  auto* buf = static_cast<std::uint16_t*>(pack_scratch().get(a_size * 2 + b_size * 4));
  if (buf == nullptr) return false;
  std::uint16_t* pa = buf;
  auto* pb = reinterpret_cast<std::uint32_t*>(buf + a_size);
  const std::int64_t a_units = pl.m_pad / kAmxBlock;
  const Plan tasks(m, n, k, true);
  parallel_units(tasks, a_units + pl.panels, static_cast<double>(kAmxBlock * pl.kpad),
                 [&](std::int64_t u0, std::int64_t u1) {
                   for (std::int64_t u = u0; u < u1; ++u) {
                     if (u < a_units)
                       amx_pack_a(pl, pr, u * kAmxBlock, (u + 1) * kAmxBlock, pa);
                     else
                       amx_pack_b(pl, pr, u - a_units, pb);
                   }
                 });
  parallel_for(tasks.row_tasks * tasks.col_tasks, tasks.task_grain(),
               [&](std::int64_t t0, std::int64_t t1) {
                 for (std::int64_t t = t0; t < t1; ++t) {
                   const std::int64_t i0 = t / tasks.col_tasks * kTaskRows,
                                      j0 = t % tasks.col_tasks * task_cols();
                   amx_task(pl, pr, pa, pb, i0, std::min(m, i0 + kTaskRows), j0,
                            std::min(n, j0 + task_cols()));
                 }
               });
  return true;
}
#else
bool amx_usable() noexcept { return false; }
bool amx_bgemm(const BProblem&, std::int64_t, std::int64_t, std::int64_t) { return false; }
#endif

}  // namespace

namespace {

bool bgemm_run(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
               float beta, float* c, std::uint16_t* c16, std::int64_t ldc,
               bool may_swap = true) noexcept;

// C = alpha d^T for d [n, m] (rows m apart): into c, or with c16 through
// `rows` (m x n floats) rounded once into c16.
void store_transposed(const float* d, std::int64_t m, std::int64_t n, float alpha, float* c,
                      std::uint16_t* c16, float* rows, std::int64_t ldc) {
  float* t = c16 != nullptr ? rows : c;
  const std::int64_t ldt = c16 != nullptr ? n : ldc;
  transpose32(d, m, n, m, t, ldt);
  for (std::int64_t i = 0; i < m; ++i) {
    float* row = t + i * ldt;
    if (alpha != 1.f)
      for (std::int64_t j = 0; j < n; ++j) row[j] *= alpha;
    if (c16 != nullptr) float_to_bfloat16_n(row, reinterpret_cast<bfloat16_t*>(c16 + i * ldc), n);
  }
}

// x W^T of few rows (a B stored [n, k], k and x's row stride even, beta 0;
// the rule of swap_pays) is computed as C^T = W x^T into a float32 block (the
// factors of each product swap places, every sum is the same): W is then read
// in place (bgemm_slab, when its row stride is even too) instead of
// transposed into VNNI pairs, and only x is. Both blocks are taken before C is
// written: a failure leaves C untouched.
bool bgemm_swapped(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const void* a,
                   std::int64_t lda, const void* b, std::int64_t ldb, float* c, std::uint16_t* c16,
                   std::int64_t ldc) {
  const auto bytes = static_cast<std::size_t>(m * n) * sizeof(float);
  auto* d = static_cast<float*>(swap_scratch().get(bytes));
  auto* rows = c16 != nullptr ? static_cast<float*>(swap_rows_scratch().get(bytes)) : nullptr;
  if (d == nullptr || (c16 != nullptr && rows == nullptr) ||
      !bgemm_run(false, true, n, m, k, 1.f, b, ldb, a, lda, 0.f, d, nullptr, m, false))
    return false;
  store_transposed(d, m, n, alpha, c, c16, rows, ldc);
  return true;
}

// libxsmm_bgemm, or with c16 (c null, beta 0) C rounded to bfloat16.
bool bgemm_run(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
               float beta, float* c, std::uint16_t* c16, std::int64_t ldc, bool may_swap) noexcept {
  std::string why;
  if (m <= 0 || n <= 0 || k <= 0 || !libxsmm_usable(why)) return false;
  if (c16 != nullptr && beta != 0.f) return false;
  normalize_lds(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  for (const std::int64_t v : {m, n, k, lda, ldb, ldc})
    if (v > INT_MAX - 1) return false;
  if (may_swap && !amx_usable() && beta == 0.f && !trans_a && trans_b && k % 2 == 0 &&
      lda % 2 == 0 && swap_pays(false, true, m, n, k, 1.f))
    return bgemm_swapped(m, n, k, alpha, a, lda, b, ldb, c, c16, ldc);
  const auto* a16 = static_cast<const std::uint16_t*>(a);
  const auto* b16 = static_cast<const std::uint16_t*>(b);
  bool ok = true;
  for (const bool dry : {true, false})
    for_each_slab(m, n, k,
                  [&](std::int64_t i0, std::int64_t rows, std::int64_t j0, std::int64_t cols) {
                    const BProblem pr{trans_a,
                                      trans_b,
                                      alpha,
                                      trans_a ? a16 + i0 : a16 + i0 * lda,
                                      lda,
                                      trans_b ? b16 + j0 * ldb : b16 + j0,
                                      ldb,
                                      beta,
                                      c16 != nullptr ? nullptr : c + i0 * ldc + j0,
                                      ldc,
                                      c16 != nullptr ? c16 + i0 * ldc + j0 : nullptr};
                    if (amx_usable())
                      ok = ok && (dry || amx_bgemm(pr, rows, cols, k));
                    else
                      ok = ok && bgemm_slab(pr, rows, cols, k, dry);
                  });
  return ok;
}

}  // namespace

bool libxsmm_bgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
                   float beta, float* c, std::int64_t ldc) noexcept {
  return bgemm_run(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, nullptr, ldc);
}

bool libxsmm_bgemm_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                           std::int64_t k, float alpha, const void* a, std::int64_t lda,
                           const void* b, std::int64_t ldb, void* c, std::int64_t ldc) noexcept {
  return bgemm_run(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.f, nullptr,
                   static_cast<std::uint16_t*>(c), ldc);
}

#else  // libxsmm not linked in

bool libxsmm_usable(std::string& why) noexcept {
  why = "libms was built without libxsmm";
  return false;
}

std::int64_t libxsmm_panel_width() noexcept { return 0; }

bool libxsmm_bf16_native() noexcept { return false; }

bool libxsmm_bf16_amx() noexcept { return false; }

BlockKernel libxsmm_block_kernel(bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                 std::int64_t, std::int64_t) noexcept {
  return {};
}

bool libxsmm_bgemm_rounded(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const void*,
                           std::int64_t, const void*, std::int64_t, void*, std::int64_t) noexcept {
  return false;
}

bool libxsmm_sgemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                   std::int64_t, const float*, std::int64_t, float, float*, std::int64_t,
                   const SgemmEpilogue&) noexcept {
  return false;
}

bool libxsmm_bgemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const void*,
                   std::int64_t, const void*, std::int64_t, float, float*, std::int64_t) noexcept {
  return false;
}

#endif

}  // namespace ms::kernels::detail
