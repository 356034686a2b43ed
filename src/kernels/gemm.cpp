// GEMM on Eigen maps of row-major buffers: Eigen's own product kernels (a
// transposed operand or one with a row stride is just another map), or, for
// float and double with the "openblas" backend, cblas_?gemm with transpose
// flags and leading dimensions, or, for float with the "libxsmm" backend,
// libxsmm's JIT kernels (src/kernels/gemm_libxsmm.cpp). libms is compiled
// with EIGEN_DONT_PARALLELIZE (meson.build) and OpenBLAS runs every call on
// one thread: gemm() splits large products over the threads itself, by blocks
// of C's columns (integers: by rows; libxsmm: by tiles), so that the thread
// count never changes a sum's order. (OpenBLAS's threaded driver cuts the
// inner dimension differently from its serial one.)
#include "ms/kernels/gemm.hpp"

// Eigen's AVX-512 transposes start from _mm512_undefined_ps(), which g++ 12
// at -O1 (the sanitizer build) reports as "used uninitialized": a known false
// positive of these intrinsics, not of our code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <vector>
#include "ms/core/detail/eigen.hpp"

#include <omp.h>

#include "bf16_convert.hpp"
#include "gemm_libxsmm.hpp"
#include "ms/core/warning.hpp"
#include "ms/kernels/parallel.hpp"
#include "predux.hpp"

#if MS_HAVE_BLAS
extern "C" {
// CBLAS (OpenBLAS exports it); the enums are ints: row-major 101, no
// transpose 111, transpose 112.
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
void cblas_dgemm(int order, int trans_a, int trans_b, int m, int n, int k, double alpha,
                 const double* a, int lda, const double* b, int ldb, double beta, double* c,
                 int ldc);
void cblas_sgemv(int order, int trans, int m, int n, float alpha, const float* a, int lda,
                 const float* x, int incx, float beta, float* y, int incy);
void cblas_dgemv(int order, int trans, int m, int n, double alpha, const double* a, int lda,
                 const double* x, int incx, double beta, double* y, int incy);
char* openblas_get_corename(void) __attribute__((weak));
void openblas_set_num_threads(int);
}
#endif

namespace ms::kernels {
namespace {

// A warning from a noexcept caller: a throwing warning handler must not end
// the program here.
void warn_quietly(const std::string& message) noexcept {
  try {
    warn(message);
  } catch (...) {
  }
}

GemmBackend choose_backend() {
#if defined(EIGEN_VECTORIZE_AVX512)
  const char* simd = "AVX-512";
  const bool eigen_first = true;
#elif defined(EIGEN_VECTORIZE_AVX2)
  const char* simd = "AVX2";
  const bool eigen_first = false;
#else
  const char* simd = "SSE or scalar";
  const bool eigen_first = false;
#endif
  const std::string eigen = std::string("Eigen's product kernels (") + simd + ")";
  std::string xsmm_why;
  const bool xsmm = detail::libxsmm_usable(xsmm_why);
  const std::string xsmm_desc = "libxsmm's JIT kernels for float (target " + xsmm_why +
                                ", panels of " + std::to_string(detail::libxsmm_panel_width()) +
                                " columns), " + eigen + " for double and integers";
  const char* env = std::getenv("MS_GEMM");
  const std::string_view choice = env != nullptr ? env : "";
  if (choice == "libxsmm") {
    if (xsmm) return {"libxsmm", xsmm_desc + ", MS_GEMM=libxsmm"};
    warn_quietly("MS_GEMM=libxsmm, but " + xsmm_why + "; using the default");
  } else if (choice == "eigen") {
    return {"eigen", eigen + ", MS_GEMM=eigen"};
  } else if (choice == "openblas") {
#if !MS_HAVE_BLAS
    warn_quietly("MS_GEMM=openblas, but libms was built without OpenBLAS; using the default");
#endif
  } else if (env != nullptr) {
    warn_quietly(std::string("MS_GEMM='") + env +
                 "' is neither 'libxsmm', 'eigen' nor 'openblas'; using the default");
  }
#if MS_HAVE_BLAS
  std::string blas = "OpenBLAS";
  if (openblas_get_corename != nullptr)
    blas += std::string(" (core ") + openblas_get_corename() + ")";
  if (choice == "openblas") return {"openblas", blas + ", MS_GEMM=openblas"};
#endif
  // libxsmm by default wherever its JIT runs (AVX2 and later). Where it
  // targets AVX-512 its kernels beat Eigen's on the square and training
  // shapes of bm_gemm (BM_Sgemm_libxsmm against BM_Sgemm_eigen, 1.07-1.76x on
  // one thread, bench/gemm_table.sh). On AMD Zen 3 (AVX2, target 'hsw'),
  // against OpenBLAS (core Zen), bm_train's steps/s in alternating processes
  // (MS_GEMM): the GPT, batch 32, 2 threads 1.06-1.08 -> 1.34-1.49 (1 thread
  // alike); the CNN, batch 64, 28-31 -> 32-36 on 1 thread and 46-55 -> 57-64
  // on 2; the MLP, batch 64, 1 thread 242-290 -> 273-319 in one set of rounds
  // and 341-366 -> 254-333 in another, 2 threads alike; the MLP at batch 256
  // alone lost, 95-106 -> 70-94 on 1 thread.
  if (xsmm) return {"libxsmm", xsmm_desc + " (default: libxsmm's JIT runs on this CPU)"};
#if MS_HAVE_BLAS
  if (eigen_first)
    return {"eigen", eigen + ": faster than OpenBLAS here (default with AVX-512); " + xsmm_why};
  return {"openblas", blas + " (default without AVX-512); " + xsmm_why};
#else
  (void)eigen_first;
  return {"eigen", eigen + " (no BLAS found at build time); " + xsmm_why};
#endif
}

// Which kernels a float or double product runs on.
enum class Route { eigen, openblas, libxsmm };

Route route_of(std::string_view name) noexcept {
  if (name == "openblas") return Route::openblas;
  if (name == "libxsmm") return Route::libxsmm;
  return Route::eigen;
}

Route default_route() noexcept {
  static const Route r = route_of(gemm_backend().name);
  return r;
}

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using MutMap = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// BLAS takes int sizes and leading dimensions.
constexpr std::int64_t kBlasMax = INT_MAX;

template <class T, class L, class R>
void product(MutMap<T>& c, const L& a, const R& b, T alpha, T beta) {
  if (beta == T(0)) {
    if (alpha == T(1))
      c.noalias() = a * b;
    else
      c.noalias() = alpha * a * b;  // Eigen passes alpha on to BLAS
  } else {
    if (beta != T(1)) c *= beta;
    if (alpha == T(1))
      c.noalias() += a * b;
    else
      c.noalias() += alpha * a * b;
  }
}

#if MS_HAVE_BLAS
// Every OpenBLAS call runs on one thread: its threaded driver blocks the
// inner dimension differently from the serial one, so its sums would change
// with the thread count. Its pthread build keeps the count
// openblas_set_num_threads(1) set (once, by the first call); its OpenMP build
// takes the calling thread's omp_get_max_threads() (which set_num_threads
// sets for ms's regions) unless called inside a parallel region: for the
// span of a call, one.
class OneBlasThread {
 public:
  OneBlasThread() noexcept : saved_(threads_now()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneBlasThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  // The calling thread's OpenMP count (1 inside a parallel region), after
  // OpenBLAS's own count was set to 1 once (its OpenMP build sets OpenMP's
  // count there too: put back).
  static int threads_now() noexcept {
    static const bool once = [] {
      const int omp_threads = omp_get_max_threads();
      openblas_set_num_threads(1);
      omp_set_num_threads(omp_threads);
      return true;
    }();
    (void)once;
    return omp_in_parallel() ? 1 : omp_get_max_threads();
  }

  int saved_;
};

// One product on OpenBLAS, sizes and leading dimensions in an int. The
// matrix-vector products gemm() leaves to gemm_small (a column of C, a row of
// fewer columns than a packet, or a row whose x is strided while B is stored
// [n, k]) go to gemv.
template <class T>
void blas_product(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                  const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                  std::int64_t ldc) {
  const auto i = [](std::int64_t v) { return static_cast<int>(v); };
  if (m == 1 || n == 1) {
    if (beta == T(0))  // gemv scales y by beta: never read what is there
      for (std::int64_t r = 0; r < m; ++r) std::fill(c + r * ldc, c + r * ldc + n, T(0));
    auto gemv = [&](bool trans, std::int64_t rows, std::int64_t cols, const T* mat, std::int64_t ld,
                    const T* x, std::int64_t incx, T* y, std::int64_t incy) {
      if constexpr (std::is_same_v<T, float>)
        cblas_sgemv(101, trans ? 112 : 111, i(rows), i(cols), alpha, mat, i(ld), x, i(incx), beta,
                    y, i(incy));
      else
        cblas_dgemv(101, trans ? 112 : 111, i(rows), i(cols), alpha, mat, i(ld), x, i(incx), beta,
                    y, i(incy));
    };
    if (m == 1)  // c^T = op(B)^T a^T: B is [k, n] (or [n, k] when tb)
      gemv(!tb, tb ? n : k, tb ? k : n, b, ldb, a, ta ? lda : 1, c, 1);
    else  // c = op(A) b: A is [m, k] (or [k, m] when ta)
      gemv(ta, ta ? k : m, ta ? m : k, a, lda, b, tb ? 1 : ldb, c, ldc);
    return;
  }
  const int ta_ = ta ? 112 : 111, tb_ = tb ? 112 : 111;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(101, ta_, tb_, i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c, i(ldc));
  else
    cblas_dgemm(101, ta_, tb_, i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c, i(ldc));
}
#endif

// One product whose sizes and leading dimensions all fit in an int.
template <class T>
void gemm_small(Route route, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                std::int64_t ldc) {
#if MS_HAVE_BLAS
  if constexpr (std::is_floating_point_v<T>) {
    if (route == Route::openblas) {
      const OneBlasThread one_thread;
      return blas_product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  }
#else
  (void)route;
#endif
  MutMap<T> cm(c, m, n, Eigen::OuterStride<>(ldc));
  const ConstMap<T> am(a, ta ? k : m, ta ? m : k, Eigen::OuterStride<>(lda));
  const ConstMap<T> bm(b, tb ? n : k, tb ? k : n, Eigen::OuterStride<>(ldb));
  if (!ta && !tb)
    product(cm, am, bm, alpha, beta);
  else if (ta && !tb)
    product(cm, am.transpose(), bm, alpha, beta);
  else if (!ta && tb)
    product(cm, am, bm.transpose(), alpha, beta);
  else
    product(cm, am.transpose(), bm.transpose(), alpha, beta);
}

// Splits a product until every size and leading dimension fits BLAS's int
// (only absurdly large problems get here; each split is exact).
template <class T>
void gemm_split(Route route, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                std::int64_t ldc) {
  // A matrix with a single stored row has no meaningful leading dimension.
  const std::int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const std::int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (a_rows <= 1) lda = std::max<std::int64_t>(a_cols, 1);
  if (b_rows <= 1) ldb = std::max<std::int64_t>(b_cols, 1);
  if (m <= 1) ldc = std::max<std::int64_t>(n, 1);

  // Row blocks of C (and of op(A)).
  const bool a_rows_by_m = !ta && lda > kBlasMax;
  if (m > kBlasMax || ldc > kBlasMax || a_rows_by_m) {
    const std::int64_t step = (ldc > kBlasMax || a_rows_by_m) ? 1 : kBlasMax;
    for (std::int64_t i = 0; i < m; i += step) {
      const std::int64_t mb = std::min(step, m - i);
      gemm_split(route, ta, tb, mb, n, k, alpha, ta ? a + i : a + i * lda, lda, b, ldb, beta,
                 c + i * ldc, ldc);
    }
    return;
  }
  // Column blocks of C (and of op(B)).
  const bool b_rows_by_n = tb && ldb > kBlasMax;
  if (n > kBlasMax || b_rows_by_n) {
    const std::int64_t step = b_rows_by_n ? 1 : kBlasMax;
    for (std::int64_t j = 0; j < n; j += step) {
      const std::int64_t nb = std::min(step, n - j);
      gemm_split(route, ta, tb, m, nb, k, alpha, a, lda, tb ? b + j * ldb : b + j, ldb, beta, c + j,
                 ldc);
    }
    return;
  }
  // Blocks of the inner dimension, accumulated into C.
  const bool k_rows = (ta && lda > kBlasMax) || (!tb && ldb > kBlasMax);
  if (k > kBlasMax || k_rows) {
    const std::int64_t step = k_rows ? 1 : kBlasMax;
    for (std::int64_t p = 0; p < k; p += step) {
      const std::int64_t kb = std::min(step, k - p);
      gemm_split(route, ta, tb, m, n, kb, alpha, ta ? a + p * lda : a + p, lda,
                 tb ? b + p : b + p * ldb, ldb, p == 0 ? beta : T(1), c, ldc);
    }
    return;
  }
  gemm_small(route, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---------------------------------------------------------------- row vector x matrix

// y = alpha * x op(B) + beta * y for one row x (a batch of one): the product
// reads every element of B once, so its speed is how fast B streams in. Own
// kernels instead of BLAS's gemv, so that the threads can share it by parts of
// y (each thread reads its own part of B) while every y[j] is summed in the
// same order for any thread count and any split.
template <class T>
using Packet = typename Eigen::internal::packet_traits<T>::type;
template <class T>
constexpr int kPacketSize = Eigen::internal::unpacket_traits<Packet<T>>::size;
// Columns of y per block of the "axpy" form: as many packets of accumulators
// as the registers hold beside x[i] and a row's packet (32 with AVX-512, 16
// otherwise). A block of 256 floats reads 1 KiB of each row of B in one
// stretch: the MLP's [784, 512] product at batch 1 runs in 16.1 us on one
// thread with 16 packets, 18.7 us with 8 (an ad-hoc timing loop).
#if defined(EIGEN_VECTORIZE_AVX512)
constexpr int kVecMatPackets = 16;
#else
constexpr int kVecMatPackets = 8;
#endif
// Without AVX-512 a block of 8 packets reads 256 bytes of each row of B and
// then jumps to the next row; the prefetchers do not keep ahead of that (the
// loads of each new cache line stalled), and the MLP's batch-1 pass took 1.49x
// the time of reading its weights in order (BM_Mlp_Ms against
// BM_Mlp_ReadWeights, median of five alternated processes on the AMD Zen 3
// VM). There a part of y up to kVecMatRowBytes wide is summed in whole rows of
// B instead (vecmat_rows: B read in the order it is stored, the sums in L1):
// 1.29x. With AVX-512 (1 KiB of each row per block) that is not measured, and
// the blocks stay.
#if defined(EIGEN_VECTORIZE_AVX512)
constexpr std::size_t kVecMatRowBytes = 0;
#else
constexpr std::size_t kVecMatRowBytes = 4096;
#endif
// Rows of B per pass of vecmat_rows over its sums.
constexpr int kVecMatRowsPerPass = 4;
// Below this many multiply-adds per thread a product runs on one thread (about
// a microsecond of work; handing a part to a pool worker costs a few tenths).
// MLP 784-512-256-10 at batch 1 with 2 threads: both large products shared,
// each core streams half of the 2.1 MB of weights.
constexpr double kVecMatFlopsPerThread = 1 << 15;

// The grain of parallel_for over items of `per_item` multiply-adds each.
std::int64_t vecmat_grain(double per_item) {
  return static_cast<std::int64_t>(std::max(1.0, kVecMatFlopsPerThread / per_item));
}

// The order in which a row product visits B: first to last, or last to first.
// A model calls the same batch-1 products every pass, so each B is streamed
// again and again in the same order; when the weights a pass reads are a
// little more than one core's L2 (the MLP 784-512-256-10's 2.1 MB against
// 2 MB here), a same-order scan finds little of B still cached (a
// least-recently-used cache keeps none of a cyclic scan longer than itself),
// while a scan in the opposite order starts with the lines the last one
// touched. So each call on the same B (the same address, as seen by this
// thread) runs the other way from the one before. Summing 2.14 MB again and
// again took 32.4 us per pass in one direction, 25.2 us alternating (an
// ad-hoc loop on the Intel Xeon VM); BM_Mlp_ReadWeights, the batch-1 floor,
// alternates the same way. Only the order of whole rows or column blocks
// changes, never the order of any sum: results are bitwise the same.
bool scan_backward(const void* b) noexcept {
  constexpr std::size_t kSlots = 16;  // B pointers remembered per thread
  thread_local std::array<const void*, kSlots> seen{};
  thread_local std::array<bool, kSlots> backward{};
  // Fibonacci hashing: weights are page- or huge-page-aligned, so low bits say little.
  const auto slot = static_cast<std::size_t>(
      (reinterpret_cast<std::uintptr_t>(b) * std::uintptr_t{0x9E3779B97F4A7C15}) >> 60);
  if (seen[slot] != b) {
    seen[slot] = b;
    backward[slot] = false;
  } else {
    backward[slot] = !backward[slot];
  }
  return backward[slot];
}

template <class T>
T finish(T acc, T alpha, T beta, const T* y) {
  return beta == T(0) ? alpha * acc : alpha * acc + beta * *y;
}

// B is [k, n] (row stride ldb): y[c0, c0 + NP packets) accumulates x[i] * B[i, :]
// row after row (one fused multiply-add per element and row).
template <class T, int NP>
void vecmat_columns(std::int64_t k, T alpha, const T* x, std::int64_t incx, const T* b,
                    std::int64_t ldb, T beta, T* y) {
  using P = Packet<T>;
  constexpr int PS = kPacketSize<T>;
  P acc[NP];
  for (int p = 0; p < NP; ++p) acc[p] = Eigen::internal::pset1<P>(T(0));
  for (std::int64_t i = 0; i < k; ++i) {
    const P xi = Eigen::internal::pset1<P>(x[i * incx]);
    const T* row = b + i * ldb;
    for (int p = 0; p < NP; ++p)
      acc[p] = Eigen::internal::pmadd(xi, Eigen::internal::ploadu<P>(row + p * PS), acc[p]);
  }
  alignas(64) T sums[NP * PS];
  for (int p = 0; p < NP; ++p) Eigen::internal::pstoreu(sums + p * PS, acc[p]);
  for (int j = 0; j < NP * PS; ++j) y[j] = finish(sums[j], alpha, beta, y + j);
}

// y[0, w) as vecmat_columns sums it (each column row after row, one fused
// multiply-add per element and row), w a whole number of packets of at most
// kVecMatRowBytes: B's rows [0, k) are read whole, kVecMatRowsPerPass of them
// per pass over the sums, which stay in L1.
template <class T>
void vecmat_rows(std::int64_t w, std::int64_t k, T alpha, const T* x, std::int64_t incx, const T* b,
                 std::int64_t ldb, T beta, T* y) {
  using P = Packet<T>;
  constexpr std::int64_t PS = kPacketSize<T>;
  constexpr int R = kVecMatRowsPerPass;
  alignas(64) T sums[kVecMatRowBytes / sizeof(T)];
  std::fill(sums, sums + w, T(0));
  // Rows [i, i + NR) onto the sums.
  const auto pass = [&]<int NR>(std::int64_t i) {
    P xr[NR];
    for (int r = 0; r < NR; ++r) xr[r] = Eigen::internal::pset1<P>(x[(i + r) * incx]);
    const T* row = b + i * ldb;
    for (std::int64_t j = 0; j < w; j += PS) {
      P acc = Eigen::internal::pload<P>(sums + j);
      for (int r = 0; r < NR; ++r)
        acc = Eigen::internal::pmadd(xr[r], Eigen::internal::ploadu<P>(row + r * ldb + j), acc);
      Eigen::internal::pstore(sums + j, acc);
    }
  };
  std::int64_t i = 0;
  for (; i + R <= k; i += R) pass.template operator()<R>(i);
  for (; i < k; ++i) pass.template operator()<1>(i);
  for (std::int64_t j = 0; j < w; ++j) y[j] = finish(sums[j], alpha, beta, y + j);
}

// Columns [c0, c1) of y, fewer than kVecMatPackets packets: eight, four, two,
// one at a time (each packet's sum is a chain of k multiply-adds: several in
// flight keep the FMA units busy).
template <class T>
void vecmat_narrow(std::int64_t c0, std::int64_t c1, std::int64_t k, T alpha, const T* x,
                   std::int64_t incx, const T* b, std::int64_t ldb, T beta, T* y) {
  constexpr std::int64_t PS = kPacketSize<T>;
  std::int64_t j = c0;
  if constexpr (kVecMatPackets > 8)
    for (; j + 8 * PS <= c1; j += 8 * PS)
      vecmat_columns<T, 8>(k, alpha, x, incx, b + j, ldb, beta, y + j);
  for (; j + 4 * PS <= c1; j += 4 * PS)
    vecmat_columns<T, 4>(k, alpha, x, incx, b + j, ldb, beta, y + j);
  for (; j + 2 * PS <= c1; j += 2 * PS)
    vecmat_columns<T, 2>(k, alpha, x, incx, b + j, ldb, beta, y + j);
  for (; j + PS <= c1; j += PS) vecmat_columns<T, 1>(k, alpha, x, incx, b + j, ldb, beta, y + j);
}

// Columns [c0, c1) of y, a whole number of packets: blocks of kVecMatPackets
// packets, then the narrower rest; `back` visits the same blocks last to first
// (scan_backward). Every column is summed row after row whichever block it
// falls in.
template <class T>
void vecmat_packets(bool back, std::int64_t c0, std::int64_t c1, std::int64_t k, T alpha,
                    const T* x, std::int64_t incx, const T* b, std::int64_t ldb, T beta, T* y) {
  // (In whole rows `back` has nothing to reorder: one pass over B's rows.)
  if constexpr (kVecMatRowBytes > 0)
    if (static_cast<std::size_t>(c1 - c0) * sizeof(T) <= kVecMatRowBytes)
      return vecmat_rows(c1 - c0, k, alpha, x, incx, b + c0, ldb, beta, y + c0);
  constexpr std::int64_t W = kVecMatPackets * kPacketSize<T>;
  const std::int64_t blocks = (c1 - c0) / W, rest = c0 + blocks * W;
  if (back) vecmat_narrow(rest, c1, k, alpha, x, incx, b, ldb, beta, y);
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::int64_t j = back ? rest - (i + 1) * W : c0 + i * W;
    vecmat_columns<T, kVecMatPackets>(k, alpha, x, incx, b + j, ldb, beta, y + j);
  }
  if (!back) vecmat_narrow(rest, c1, k, alpha, x, incx, b, ldb, beta, y);
}

template <class T>
void vecmat_axpy_cols(bool back, std::int64_t n, std::int64_t k, T alpha, const T* x,
                      std::int64_t incx, const T* b, std::int64_t ldb, T beta, T* y) {
  constexpr std::int64_t PS = kPacketSize<T>;
  const std::int64_t packets = n / PS;
  const std::int64_t grain = vecmat_grain(static_cast<double>(k) * static_cast<double>(PS));
  parallel_for(packets, grain, [&](std::int64_t p0, std::int64_t p1) {
    vecmat_packets(back, p0 * PS, p1 * PS, k, alpha, x, incx, b, ldb, beta, y);
  });
  // Fewer than a packet of columns left: row after row, each column its own sum.
  const std::int64_t j = packets * PS;
  const std::int64_t rest = n - j;
  if (rest == 0) return;
  T acc[PS] = {};
  for (std::int64_t i = 0; i < k; ++i) {
    const T xi = x[i * incx];
    const T* row = b + i * ldb + j;
    for (std::int64_t c = 0; c < rest; ++c) acc[c] = detail::madd(xi, row[c], acc[c]);
  }
  for (std::int64_t c = 0; c < rest; ++c) y[j + c] = finish(acc[c], alpha, beta, y + j + c);
}

// From this many multiply-adds on, a [k, n] product of at most
// kVecMatHalvesMaxCols columns is summed in two halves of B's rows (each half
// in order, then the two added), for any thread count: two threads then each
// stream one contiguous half of B instead of every other stretch of each row.
constexpr double kVecMatHalvesFlops = 1 << 17;
constexpr std::int64_t kVecMatHalvesMaxCols = 1024;

template <class T>
void vecmat_axpy(bool back, std::int64_t n, std::int64_t k, T alpha, const T* x, std::int64_t incx,
                 const T* b, std::int64_t ldb, T beta, T* y) {
  if (k < 2 || n > kVecMatHalvesMaxCols ||
      static_cast<double>(k) * static_cast<double>(n) < kVecMatHalvesFlops)
    return vecmat_axpy_cols(back, n, k, alpha, x, incx, b, ldb, beta, y);
  alignas(64) T half[2][kVecMatHalvesMaxCols];
  const std::int64_t k0 = k / 2;
  parallel_for(2, 1, [&](std::int64_t h0, std::int64_t h1) {
    for (std::int64_t i = h0; i < h1; ++i) {
      const std::int64_t h = back ? h1 - 1 - (i - h0) : i;
      const std::int64_t r0 = h == 0 ? 0 : k0, r1 = h == 0 ? k0 : k;
      vecmat_axpy_cols(back, n, r1 - r0, T(1), x + r0 * incx, incx, b + r0 * ldb, ldb, T(0),
                       half[h]);
    }
  });
  for (std::int64_t j = 0; j < n; ++j) y[j] = finish(half[0][j] + half[1][j], alpha, beta, y + j);
}

// The row products below sum each row's packets onto kDotAccs accumulators
// in turn (packet p onto accumulator p % kDotAccs). One row of x of fewer
// than kDotChunk packets (with AVX-512, fewer than 256 floats: a batch-1
// product of char_lm's 192-wide model) is held in registers and B (stored
// [n, k]) read in the order it is stored, one row after another; otherwise
// (longer rows, or several rows of A) the packets of a group's rows are read
// interleaved, each packet of x loaded once for them. Interleaved (x loaded
// for each packet) B is read as four streams at once: 82 GB/s out of L3 on
// char_lm's 17 products at batch 1, where one row after another with x in
// registers reached 97 GB/s, as fast as a plain sum over the same weights
// (ad-hoc loops on the Zen 4 VM; 1 thread).
#if defined(EIGEN_VECTORIZE_AVX512)
constexpr int kDotChunk = 16;  // x's packets in registers: fewer than this many (of 32)
constexpr int kDotAccs = 2;
#else
constexpr int kDotChunk = 8;  // (of 16 registers)
constexpr int kDotAccs = 1;
#endif
// Rows of B per group: reduced together (predux4).
constexpr int kDotGroup = 4;

// (Plain arrays in structs: std::array of a vector type drops its attributes.)
template <class T>
struct DotChunk {
  Packet<T> p[kDotChunk];
};
template <class T>
struct DotAccs {
  Packet<T> a[kDotAccs];
};
template <class T, int NR>
struct DotRows {
  Packet<T> row[NR];
};

template <class T, int XP>
inline void load_chunk(const T* x, DotChunk<T>& xr) {
  for (int p = 0; p < XP; ++p) xr.p[p] = Eigen::internal::ploadu<Packet<T>>(x + p * kPacketSize<T>);
}

// acc += XP packets of `row` times xr.
template <class T, int XP>
inline void dot_row(const DotChunk<T>& xr, const T* row, DotAccs<T>& acc) {
  for (int p = 0; p < XP; ++p)
    acc.a[p % kDotAccs] = Eigen::internal::pmadd(
        Eigen::internal::ploadu<Packet<T>>(row + p * kPacketSize<T>), xr.p[p], acc.a[p % kDotAccs]);
}

// A row's accumulators added in order.
template <class T>
inline Packet<T> dot_sum(const DotAccs<T>& acc) {
  Packet<T> sum = acc.a[0];
  for (int q = 1; q < kDotAccs; ++q) sum = Eigen::internal::padd(sum, acc.a[q]);
  return sum;
}

// y[0, NR) from the packet sums of NR rows of B: the lanes of each in
// Eigen's predux order, then the products of the tail [kp, k) one by one;
// alpha and beta last.
template <class T, int NR>
inline void dot_finish(const DotRows<T, NR>& sums, std::int64_t kp, std::int64_t k, T alpha,
                       const T* x, const T* b, std::int64_t ldb, T beta, T* y) {
  T lanes[NR];
  detail::predux_each<T, NR>(sums.row, lanes);
  for (int r = 0; r < NR; ++r) {
    T sum = lanes[r];
    for (std::int64_t t = kp; t < k; ++t) sum = detail::madd(b[r * ldb + t], x[t], sum);
    y[r] = finish(sum, alpha, beta, y + r);
  }
}

// The i-th group visited of [g0, g1): first to last, or with `back` last to first.
inline std::int64_t group_at(bool back, std::int64_t g0, std::int64_t g1, std::int64_t i) {
  return back ? g1 - 1 - (i - g0) : i;
}

// Groups [g0, g1) of NR rows of B (group g: rows g NR to g NR + NR - 1)
// times x, one row of A of fewer than kDotChunk packets (XR of them, a template
// argument so that they stay in registers, loaded once for all groups), into
// y; `back` visits the groups last to first. The loop over a group's rows is
// not unrolled: unrolled, g++ keeps an offset for every row and packet
// (r ldb + p PS, 48 of them for four rows at k = 192) and spills them.
template <class T, int NR, int XR>
void dot_groups_held(bool back, std::int64_t g0, std::int64_t g1, std::int64_t k, T alpha,
                     const T* x, const T* b, std::int64_t ldb, T beta, T* y) {
  DotChunk<T> xr;
  load_chunk<T, XR>(x, xr);
  for (std::int64_t i = g0; i < g1; ++i) {
    const std::int64_t g = group_at(back, g0, g1, i);
    const T* bg = b + g * NR * ldb;
    DotRows<T, NR> sums;
#pragma GCC unroll 1
    for (int r = 0; r < NR; ++r) {
      DotAccs<T> acc{};
      dot_row<T, XR>(xr, bg + r * ldb, acc);
      sums.row[r] = dot_sum(acc);
    }
    dot_finish<T, NR>(sums, XR * kPacketSize<T>, k, alpha, x, bg, ldb, beta, y + g * NR);
  }
}

// dot_groups_held for xr = the packets of k (0 to kDotChunk - 1).
template <class T, int NR, int XR = 0>
void dot_groups_held_of(int xr, bool back, std::int64_t g0, std::int64_t g1, std::int64_t k,
                        T alpha, const T* x, const T* b, std::int64_t ldb, T beta, T* y) {
  if constexpr (XR + 1 < kDotChunk)
    if (xr != XR)
      return dot_groups_held_of<T, NR, XR + 1>(xr, back, g0, g1, k, alpha, x, b, ldb, beta, y);
  dot_groups_held<T, NR, XR>(back, g0, g1, k, alpha, x, b, ldb, beta, y);
}

// As dot_groups_held for any k and the m rows of A: each packet of a row of
// A loaded once for the NR rows of B of a group, their packets interleaved
// (the group is read from memory for the first row of A, then from L1).
// Each sum in the same order as dot_groups_held's.
template <class T, int NR>
void dot_groups_streamed(bool back, std::int64_t g0, std::int64_t g1, std::int64_t m,
                         std::int64_t k, T alpha, const T* a, std::int64_t lda, const T* b,
                         std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  constexpr std::int64_t PS = kPacketSize<T>;
  const std::int64_t kp = k / PS * PS;
  for (std::int64_t i = g0; i < g1; ++i) {
    const std::int64_t g = group_at(back, g0, g1, i);
    const T* bg = b + g * NR * ldb;
    for (std::int64_t r = 0; r < m; ++r) {
      const T* x = a + r * lda;
      DotAccs<T> acc[NR] = {};
      // Packet p onto accumulator q = p % kDotAccs (q a constant in each product).
      const auto step = [&](std::int64_t p, int q) {
        const Packet<T> xv = Eigen::internal::ploadu<Packet<T>>(x + p);
        for (int j = 0; j < NR; ++j)
          acc[j].a[q] = Eigen::internal::pmadd(Eigen::internal::ploadu<Packet<T>>(bg + j * ldb + p),
                                               xv, acc[j].a[q]);
      };
      std::int64_t p = 0;
      for (; p + kDotAccs * PS <= kp; p += kDotAccs * PS)
        for (int q = 0; q < kDotAccs; ++q) step(p + q * PS, q);
      for (int q = 0; q + 1 < kDotAccs; ++q)  // fewer than kDotAccs packets left
        if (p + q * PS < kp) step(p + q * PS, q);
      DotRows<T, NR> sums;
      for (int j = 0; j < NR; ++j) sums.row[j] = dot_sum(acc[j]);
      dot_finish<T, NR>(sums, kp, k, alpha, x, bg, ldb, beta, c + r * ldc + g * NR);
    }
  }
}

// Groups [g0, g1) of NR rows of B times the m rows of A.
template <class T, int NR>
void dot_groups(bool back, std::int64_t g0, std::int64_t g1, std::int64_t m, std::int64_t k,
                T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                std::int64_t ldc) {
  if (m == 1 && k < kDotChunk * kPacketSize<T>)
    return dot_groups_held_of<T, NR>(static_cast<int>(k / kPacketSize<T>), back, g0, g1, k, alpha,
                                     a, b, ldb, beta, c);
  dot_groups_streamed<T, NR>(back, g0, g1, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The m rows of A (stored [m, k], rows lda apart; lda unread when m is 1)
// times B^T (B stored [n, k]):
// C[r, j] is the dot product of A's row r with B's row j, summed as above
// whatever the other rows, so a row of A gives the same bits in a product of
// up to kDotRows rows as alone, and each row of B the same bits in a group as
// alone. Each group of rows of B is read from memory once for all rows of A
// (then from L1): batched generation's increments (m = the prompts) read the
// weights once per step, not packed.
template <class T>
void vecmat_dot(bool back, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  const std::int64_t groups = n / kDotGroup;
  const std::int64_t grain = vecmat_grain(static_cast<double>(k) * static_cast<double>(kDotGroup) *
                                          static_cast<double>(m));
  parallel_for(groups, grain, [&](std::int64_t g0, std::int64_t g1) {
    dot_groups<T, kDotGroup>(back, g0, g1, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
  });
  const std::int64_t j = groups * kDotGroup;
  dot_groups<T, 1>(false, 0, n - j, m, k, alpha, a, lda, b + j * ldb, ldb, beta, c + j, ldc);
}

// Products of at most this many rows with B stored transposed run on
// vecmat_dot (A's rows contiguous): libxsmm would pack (transpose) all of B
// for them on every call.
constexpr std::int64_t kDotRows = 8;

// Whether gemm_impl computes the product on the row kernels above.
template <class T>
bool on_row_kernels(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    std::int64_t lda) {
  if constexpr (!std::is_floating_point_v<T>) return false;
  if (m == 1) {
    const std::int64_t incx = trans_a ? lda : 1;
    return trans_b ? incx == 1 || k == 1 : n >= kPacketSize<T>;
  }
  return trans_b && !trans_a && m <= kDotRows;
}

// Float products above kSplitFlops multiply-adds are cut into at most
// kMaxColumnBlocks blocks of at least kMinColumnBlock columns of C (each
// block packs A again, so blocks stay wide).
constexpr double kSplitFlops = 1 << 20;
constexpr std::int64_t kMaxColumnBlocks = 8;
constexpr std::int64_t kMinColumnBlock = 128;
// Below this many multiply-adds a product is not worth a thread.
constexpr double kFlopsPerThread = 1 << 16;
// The smallest float products libxsmm takes (see gemm_impl).
constexpr double kLibxsmmMinOutputs = 1024;
constexpr double kLibxsmmMinFlops = 1 << 16;
// Products up to this size run one per thread over a batch (gemm() splits
// few of them itself, and a batch splits more evenly above it).
constexpr double kBatchParallelFlops = 128.0 * 128.0 * 128.0;

// Whether gemm_impl gives a float product of these sizes to libxsmm on
// `route` (unless the row kernels take it): gemm_bias and gemm_scale_add put
// their epilogues into the same products.
bool libxsmm_sizes(Route route, std::int64_t m, std::int64_t n, std::int64_t k) {
  const double outputs = static_cast<double>(m) * static_cast<double>(n);
  return route == Route::libxsmm && outputs >= kLibxsmmMinOutputs &&
         outputs * static_cast<double>(k) >= kLibxsmmMinFlops;
}

template <class T>
void gemm_impl(Route route, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
               std::int64_t k, T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
               T beta, T* c, std::int64_t ldc) noexcept {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == T(0)) {  // C = beta * C, no product
    for (std::int64_t i = 0; i < m; ++i) {
      T* row = c + i * ldc;
      if (beta == T(0))
        std::fill(row, row + n, T(0));
      else if (beta != T(1))
        for (std::int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
    return;
  }
  if constexpr (std::is_floating_point_v<T>) {
    // A row vector times a matrix (batch 1): x is op(A), stored [1, k] or [k, 1];
    // a few rows times B^T. Fewer columns than a packet ([1, k] x [k, 1], a
    // 10-class head) stay with gemm_small: one column's sum would be a single
    // chain of k multiply-adds.
    if (on_row_kernels<T>(trans_a, trans_b, m, n, k, lda)) {
      if (!trans_b)
        return vecmat_axpy(scan_backward(b), n, k, alpha, a, trans_a ? lda : 1, b, ldb, beta, c);
      return vecmat_dot(scan_backward(b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    // libxsmm declines only sizes beyond its int (then Eigen takes the product).
    // Products with a small C (m n < kLibxsmmMinOutputs) or little work stay
    // with Eigen: packing costs libxsmm its lead there (1 thread, CPU time:
    // 16x16x245 A^T 1.88 vs 1.82 us, 64x10x256 B^T 6.44 vs 6.11 us, 8x16x16
    // 0.30 vs 0.15 us; 441x16x16 3.1 vs 4.5 us, 64^3 4.1 vs 4.6 us).
    if (libxsmm_sizes(route, m, n, k) &&
        detail::libxsmm_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
      return;
  }
  if constexpr (std::is_floating_point_v<T>) {
    // Eigen's kernels run on one thread: a large product is cut into column
    // blocks of C by its shape alone (never by the thread count) and the
    // blocks are spread over the threads. One thread computes the same blocks
    // one after the other, so results are bitwise the same for any thread
    // count. (Eigen's row blocking inside a product depends on its column
    // count, so any thread-dependent cut would change roundings.)
    const double flops = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    if (flops > kSplitFlops && n >= 2 * kMinColumnBlock) {
      std::int64_t blocks = std::min<std::int64_t>(kMaxColumnBlocks, n / kMinColumnBlock);
      blocks -= blocks % 2;  // an even count splits evenly over two threads
      // Block i is columns [edge(i), edge(i + 1)), edges on multiples of 16.
      const auto edge = [&](std::int64_t i) { return i == blocks ? n : n * i / blocks / 16 * 16; };
      parallel_for(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t i = b0; i < b1; ++i) {
          const std::int64_t c0 = edge(i), c1 = edge(i + 1);
          gemm_split(route, trans_a, trans_b, m, c1 - c0, k, alpha, a, lda,
                     trans_b ? b + c0 * ldb : b + c0, ldb, beta, c + c0, ldc);
        }
      });
      return;
    }
  }
  if constexpr (std::is_integral_v<T>) {
    // Eigen's integer GEMM is single-threaded here: split C's rows. Integer
    // sums are exact, so the split cannot change the result.
    const double flops = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const auto grain = static_cast<std::int64_t>(
        std::max(1.0, kFlopsPerThread * 4 / (static_cast<double>(n) * static_cast<double>(k))));
    if (flops > kFlopsPerThread * 4 && m > grain) {
      parallel_for(m, grain, [&](std::int64_t r0, std::int64_t r1) {
        gemm_split(route, trans_a, trans_b, r1 - r0, n, k, alpha, trans_a ? a + r0 : a + r0 * lda,
                   lda, b, ldb, beta, c + r0 * ldc, ldc);
      });
      return;
    }
  }
  gemm_split(route, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

const GemmBackend& gemm_backend() noexcept {
  static const GemmBackend b = choose_backend();
  return b;
}

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
          std::int64_t ldc) noexcept {
  gemm_impl(default_route(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_bias(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
               const float* bias, float* c, std::int64_t ldc, bool relu) noexcept {
  if (m <= 0 || n <= 0) return;
  // The products gemm_impl gives libxsmm take the bias (and relu) inside (those on the
  // row kernels there stay on them here too).
  if (!on_row_kernels<float>(trans_a, trans_b, m, n, k, lda) &&
      libxsmm_sizes(default_route(), m, n, k) &&
      detail::libxsmm_sgemm(trans_a, trans_b, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc,
                            {.bias = bias, .relu = relu}))
    return;
  gemm_impl(default_route(), trans_a, trans_b, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc);
  const double flops = static_cast<double>(m) * static_cast<double>(n);
  parallel_for(m,
               std::max<std::int64_t>(
                   1, static_cast<std::int64_t>(kFlopsPerThread /
                                                std::max(1.0, flops / static_cast<double>(m)))),
               [&](std::int64_t r0, std::int64_t r1) {
                 detail::add_bias(c + r0 * ldc, ldc, r1 - r0, n, bias, relu);
               });
}

bool gemm_scale_add(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float scale,
                    float* c, std::int64_t ldc, float* d, std::int64_t ldd,
                    float sub_scale) noexcept {
  return m > 0 && n > 0 && !on_row_kernels<float>(trans_a, trans_b, m, n, k, lda) &&
         libxsmm_sizes(default_route(), m, n, k) &&
         detail::libxsmm_sgemm(
             trans_a, trans_b, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc,
             {.scale_add = true, .scale = scale, .d = d, .ldd = ldd, .sub_scale = sub_scale});
}

namespace {
template <class P>
void scale_add_rows(std::int64_t rows, std::int64_t cols, float scale, const P* p, std::int64_t ldp,
                    float* c, std::int64_t ldc, float* d, std::int64_t ldd, float sub_scale,
                    bfloat16_t* d16 = nullptr) noexcept {
  if (rows <= 0 || cols <= 0) return;
  const auto grain =
      static_cast<std::int64_t>(std::max(1.0, kFlopsPerThread / static_cast<double>(cols)));
  // Row by row, so that each pass reads the row the one before wrote from L1
  // (a chunk's passes over all its rows went through L2: amp O2's update of
  // the MLP's weights took 16 % of its step).
  parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      detail::scale_add(c + r * ldc, ldc, 1, cols, scale, p + r * ldp, ldp);
      if (d == nullptr) continue;
      detail::sub_scaled(d + r * ldd, ldd, 1, cols, sub_scale, c + r * ldc, ldc);
      if (d16 != nullptr) detail::float_to_bfloat16_n(d + r * ldd, d16 + r * ldd, cols);
    }
  });
}
}  // namespace

void scale_add(std::int64_t rows, std::int64_t cols, float scale, const float* p, std::int64_t ldp,
               float* c, std::int64_t ldc, float* d, std::int64_t ldd, float sub_scale) noexcept {
  scale_add_rows(rows, cols, scale, p, ldp, c, ldc, d, ldd, sub_scale);
}

void scale_add(std::int64_t rows, std::int64_t cols, float scale, const bfloat16_t* p,
               std::int64_t ldp, float* c, std::int64_t ldc, float* d, std::int64_t ldd,
               float sub_scale, bfloat16_t* d16) noexcept {
  scale_add_rows(rows, cols, scale, p, ldp, c, ldc, d, ldd, sub_scale, d16);
}

bool gemm_on(std::string_view backend, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
             std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
             std::int64_t ldb, float beta, float* c, std::int64_t ldc) noexcept {
  std::string why;
  if (backend == "libxsmm" && !detail::libxsmm_usable(why)) return false;
#if !MS_HAVE_BLAS
  if (backend == "openblas") return false;
#endif
  if (backend != "libxsmm" && backend != "openblas" && backend != "eigen") return false;
  gemm_impl(route_of(backend), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return true;
}

bool gemm_bf16_on_amx() noexcept {
  return default_route() == Route::libxsmm && detail::libxsmm_bf16_amx();
}

void gemm_bf16(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               float alpha, const bfloat16_t* a, std::int64_t lda, const bfloat16_t* b,
               std::int64_t ldb, float beta, float* c, std::int64_t ldc) noexcept {
  if (m <= 0 || n <= 0) return;
  if (k > 0 && alpha != 0.f && default_route() == Route::libxsmm && detail::libxsmm_bf16_native() &&
      detail::libxsmm_bgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    return;
  // op(A) [m, k] and op(B) [k, n] in float32, then the float product.
  std::vector<float> fa(static_cast<std::size_t>(m * std::max<std::int64_t>(k, 0))),
      fb(static_cast<std::size_t>(std::max<std::int64_t>(k, 0) * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p)
      fa[static_cast<std::size_t>(i * k + p)] =
          static_cast<float>(trans_a ? a[p * lda + i] : a[i * lda + p]);
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < n; ++j)
      fb[static_cast<std::size_t>(p * n + j)] =
          static_cast<float>(trans_b ? b[j * ldb + p] : b[p * ldb + j]);
  gemm<float>(false, false, m, n, k, alpha, fa.data(), std::max<std::int64_t>(k, 1), fb.data(), n,
              beta, c, ldc);
}

void gemm_bf16_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                       float alpha, const bfloat16_t* a, std::int64_t lda, const bfloat16_t* b,
                       std::int64_t ldb, bfloat16_t* c, std::int64_t ldc) noexcept {
  if (m <= 0 || n <= 0) return;
  if (k > 0 && alpha != 0.f && default_route() == Route::libxsmm && detail::libxsmm_bf16_native() &&
      detail::libxsmm_bgemm_rounded(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc))
    return;
  std::vector<float> fc(static_cast<std::size_t>(m * n));
  gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.f, fc.data(), n);
  for (std::int64_t i = 0; i < m; ++i)
    detail::float_to_bfloat16_n(fc.data() + i * n, c + i * ldc, n);
}

template <class T>
void gemm_batched(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                  const GemmOperand<T>& a, const GemmOperand<T>& b, T* c,
                  std::span<const std::int64_t> c_offsets, std::int64_t ldc) noexcept {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  const auto one = [&](std::int64_t i) {
    const auto u = static_cast<std::size_t>(i);
    gemm<T>(a.trans, b.trans, m, n, k, T(1), a.data + a.offsets[u], a.ld, b.data + b.offsets[u],
            b.ld, T(0), c + c_offsets[u], ldc);
  };
  const double flops = static_cast<double>(m) * static_cast<double>(n) *
                       static_cast<double>(std::max<std::int64_t>(k, 1));
  if (batch > 1 && flops <= kBatchParallelFlops) {
    const auto grain = static_cast<std::int64_t>(std::max(1.0, kFlopsPerThread / flops));
    parallel_for(batch, grain, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) one(i);
    });
  } else {
    for (std::int64_t i = 0; i < batch; ++i) one(i);
  }
}

#define MS_GEMM_INSTANTIATE(T)                                                               \
  template void gemm<T>(bool, bool, std::int64_t, std::int64_t, std::int64_t, T, const T*,   \
                        std::int64_t, const T*, std::int64_t, T, T*, std::int64_t) noexcept; \
  template void gemm_batched<T>(std::int64_t, std::int64_t, std::int64_t, std::int64_t,      \
                                const GemmOperand<T>&, const GemmOperand<T>&, T*,            \
                                std::span<const std::int64_t>, std::int64_t) noexcept;
MS_GEMM_INSTANTIATE(float)
MS_GEMM_INSTANTIATE(double)
MS_GEMM_INSTANTIATE(std::int32_t)
MS_GEMM_INSTANTIATE(std::int64_t)
#undef MS_GEMM_INSTANTIATE

}  // namespace ms::kernels
