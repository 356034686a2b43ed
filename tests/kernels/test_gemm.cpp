// kernels/gemm.hpp: the product of one row by a matrix (m == 1, a batch of
// one), which ms computes with its own kernels: B stored [k, n] (blocks of
// columns, then single packets, then fewer than a packet) or [n, k] (dot
// products by groups of rows, then single rows), x strided or not, B's rows
// padded, alpha and beta. Small integer values make every sum exact, so each
// element is compared for equality with a double loop; random values check
// that 1 and 2 threads give the same bits.
//
// Then whole products on every backend this build and CPU offer (`gemm_on`):
// odd sizes (1, 7, ..., 1000) in each of m, n, k, both transposes, padded row
// strides, alpha, and beta 0 (C never read), 1 (accumulate, as gradients do)
// and 0.5, exactly against a double loop on small integers; libxsmm's tiles
// give the same bits on 1 and 2 threads; libxsmm and Eigen agree on random
// values within the rounding of a k-term sum; libxsmm starts no threads.
// bfloat16 products (gemm_bf16; gemm_bf16_rounded bitwise the same, rounded)
// against float64 sums of the bfloat16 values
// within float32 rounding, and of the unrounded values within what an 8-bit
// mantissa allows; 1 and 2 threads bitwise.
#include <doctest/doctest.h>

#include "thread_guard.hpp"
#include "transposed.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <ms/core/dtype.hpp>
#include <ms/kernels/gemm.hpp>
#include <ms/kernels/parallel.hpp>

namespace {

using ms::test::ThreadGuard;

// One row x (stored [1, k], or [k, 1] with row stride lda when ta) times B
// (stored [k, n], or [n, k] when tb, row stride ldb), alpha 2: y (beta 0, 1
// or 2 times its old values) against a double loop, exactly.
template <class T>
void check_row_product(std::int64_t n, std::int64_t k, bool ta, bool tb, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> val(-3, 3);
  const std::int64_t lda = ta ? 3 : k, ldb = (tb ? k : n) + 3;
  std::vector<T> a(static_cast<std::size_t>(ta ? k * lda : k)),
      b(static_cast<std::size_t>((tb ? n : k) * ldb)), y0(static_cast<std::size_t>(n));
  for (auto* v : {&a, &b, &y0})
    for (T& e : *v) e = static_cast<T>(val(gen));
  for (const T beta : {T(0), T(1), T(2)}) {
    std::vector<T> y = y0;
    if (beta == T(0)) y.assign(y.size(), std::numeric_limits<T>::quiet_NaN());  // never read
    ms::kernels::gemm<T>(ta, tb, 1, n, k, T(2), a.data(), lda, b.data(), ldb, beta, y.data(), n);
    std::int64_t wrong = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t i = 0; i < k; ++i)
        s += static_cast<double>(a[static_cast<std::size_t>(ta ? i * lda : i)]) *
             static_cast<double>(b[static_cast<std::size_t>(tb ? j * ldb + i : i * ldb + j)]);
      const double want =
          2 * s +
          (beta == T(0) ? 0.0 : static_cast<double>(beta * y0[static_cast<std::size_t>(j)]));
      wrong += static_cast<double>(y[static_cast<std::size_t>(j)]) != want;
    }
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(ta);
    CAPTURE(tb);
    CAPTURE(beta);
    CHECK(wrong == 0);
  }
}

// A stored matrix: op(X) is rows x cols; stored transposed when `trans`, each
// stored row padded by 3 elements (ld > stored columns).
struct StoredMatrix {
  std::int64_t rows, cols;
  bool trans;
  std::int64_t ld() const { return (trans ? rows : cols) + 3; }
  std::int64_t stored_rows() const { return trans ? cols : rows; }
  std::size_t size() const { return static_cast<std::size_t>(stored_rows() * ld()); }
  std::size_t at(std::int64_t i, std::int64_t j) const {
    return static_cast<std::size_t>(trans ? j * ld() + i : i * ld() + j);
  }
};

struct Product {
  std::int64_t m, n, k;
  bool ta, tb;
  StoredMatrix a() const { return {m, k, ta}; }
  StoredMatrix b() const { return {k, n, tb}; }
  std::int64_t ldc() const { return n + 5; }
  std::size_t c_size() const { return static_cast<std::size_t>(m * ldc()); }
};

// Small integers: every float sum and product below is exact.
std::vector<float> small_ints(std::size_t size, std::mt19937& gen) {
  std::uniform_int_distribution<int> val(-3, 3);
  std::vector<float> v(size);
  for (float& e : v) e = static_cast<float>(val(gen));
  return v;
}

std::vector<float> uniform(std::size_t size, std::mt19937& gen) {
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  std::vector<float> v(size);
  for (float& e : v) e = val(gen);
  return v;
}

// op(A) op(B) in double, m x n dense.
template <class T>
std::vector<double> reference(const Product& p, const std::vector<T>& a, const std::vector<T>& b) {
  // Element (i, q) of A at a[i * ai + q * aq]: plain pointer arithmetic, as
  // the sanitizer build runs this loop unoptimized (-O0).
  const StoredMatrix oa = p.a(), ob = p.b();
  const std::int64_t ai = p.ta ? 1 : oa.ld(), aq = p.ta ? oa.ld() : 1;
  const std::int64_t bq = p.tb ? 1 : ob.ld(), bj = p.tb ? ob.ld() : 1;
  std::vector<double> r(static_cast<std::size_t>(p.m * p.n));
  double* out = r.data();
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      const T* x = a.data() + i * ai;
      const T* y = b.data() + j * bj;
      double s = 0;
      for (std::int64_t q = 0; q < p.k; ++q, x += aq, y += bq)
        s += static_cast<double>(*x) * static_cast<double>(*y);
      out[i * p.n + j] = s;
    }
  return r;
}

// Elements of c (alpha op(A) op(B) + beta c0, rows ldc() apart) that differ
// from the exact value, op(A) op(B) being `ab` (m x n dense).
std::int64_t inexact(const Product& p, float alpha, const std::vector<double>& ab, float beta,
                     const std::vector<float>& c0, const std::vector<float>& c) {
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      const auto at = static_cast<std::size_t>(i * p.ldc() + j);
      const double want = alpha * ab[static_cast<std::size_t>(i * p.n + j)] +
                          (beta == 0.f ? 0.0 : double(beta) * double(c0[at]));
      wrong += static_cast<double>(c[at]) != want;
    }
  return wrong;
}

std::vector<std::string> available_backends() {
  std::vector<std::string> out;
  const float one = 1.f;
  float c = 0.f;
  for (const char* name : {"libxsmm", "eigen", "openblas"})
    if (ms::kernels::gemm_on(name, false, false, 1, 1, 1, 1.f, &one, 1, &one, 1, 0.f, &c, 1))
      out.emplace_back(name);
  return out;
}

bool has_libxsmm() {
  const auto names = available_backends();
  return std::find(names.begin(), names.end(), "libxsmm") != names.end();
}

std::vector<float> run_on(const std::string& backend, const Product& p, float alpha,
                          const std::vector<float>& a, const std::vector<float>& b, float beta,
                          std::vector<float> c) {
  REQUIRE(ms::kernels::gemm_on(backend, p.ta, p.tb, p.m, p.n, p.k, alpha, a.data(), p.a().ld(),
                               b.data(), p.b().ld(), beta, c.data(), p.ldc()));
  return c;
}

int process_threads() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE_TEMPLATE("gemm of one row: every column and row form against a double loop", T, float,
                     double) {
    ThreadGuard guard;
    std::uint32_t seed = 1;
    for (int nt : {1, 2})
      for (std::int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 255, 256, 257, 529})
        for (std::int64_t k : {1, 2, 37, 784})
          for (int flags = 0; flags < 4; ++flags) {
            ms::set_num_threads(nt);
            check_row_product<T>(n, k, flags & 1, flags & 2, seed++);
          }
  }

  TEST_CASE_TEMPLATE("gemm of one row: the same bits for 1 and 2 threads", T, float, double) {
    // Sizes over the threshold where the product is shared by two threads.
    ThreadGuard guard;
    std::mt19937 gen(3);
    std::uniform_real_distribution<double> val(-1, 1);
    for (const auto& [n, k] :
         {std::pair<std::int64_t, std::int64_t>{2048, 2048}, {1000, 1100}, {4099, 300}}) {
      for (const bool tb : {false, true}) {
        std::vector<T> x(static_cast<std::size_t>(k)), b(static_cast<std::size_t>(n * k));
        for (T& e : x) e = static_cast<T>(val(gen));
        for (T& e : b) e = static_cast<T>(val(gen));
        std::vector<T> y[2];
        for (int nt : {1, 2}) {
          ms::set_num_threads(nt);
          y[nt - 1].assign(static_cast<std::size_t>(n), T(0));
          ms::kernels::gemm<T>(false, tb, 1, n, k, T(1), x.data(), k, b.data(), tb ? k : n, T(0),
                               y[nt - 1].data(), n);
        }
        CAPTURE(n);
        CAPTURE(tb);
        CHECK(y[0] == y[1]);
        // And close to the double sum (a wrong split would not be).
        double worst = 0;
        for (std::int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (std::int64_t i = 0; i < k; ++i)
            s += static_cast<double>(x[static_cast<std::size_t>(i)]) *
                 static_cast<double>(b[static_cast<std::size_t>(tb ? j * k + i : i * n + j)]);
          worst =
              std::max(worst, std::abs(s - static_cast<double>(y[0][static_cast<std::size_t>(j)])));
        }
        CHECK(worst < (sizeof(T) == 4 ? 1e-3 : 1e-11));
      }
    }
  }

  TEST_CASE_TEMPLATE("gemm of one row: the same bits on every call of the same product", T, float,
                     double) {
    // Successive calls on the same B visit its rows or column blocks in
    // alternating order; no sum may change with it.
    ThreadGuard guard;
    std::mt19937 gen(5);
    std::uniform_real_distribution<double> val(-1, 1);
    for (const auto& [n, k] :
         {std::pair<std::int64_t, std::int64_t>{512, 784}, {1000, 300}, {4099, 300}, {37, 129}})
      for (const bool tb : {false, true})
        for (int nt : {1, 2}) {
          ms::set_num_threads(nt);
          std::vector<T> x(static_cast<std::size_t>(k)), b(static_cast<std::size_t>(n * k));
          for (T& e : x) e = static_cast<T>(val(gen));
          for (T& e : b) e = static_cast<T>(val(gen));
          std::vector<std::vector<T>> ys;
          for (int call = 0; call < 3; ++call) {
            ys.emplace_back(static_cast<std::size_t>(n), T(0));
            ms::kernels::gemm<T>(false, tb, 1, n, k, T(1), x.data(), k, b.data(), tb ? k : n, T(0),
                                 ys.back().data(), n);
          }
          CAPTURE(n);
          CAPTURE(tb);
          CAPTURE(nt);
          CHECK(ys[0] == ys[1]);
          CHECK(ys[1] == ys[2]);
          double worst = 0;  // and right: against the double sum
          for (std::int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::int64_t i = 0; i < k; ++i)
              s += static_cast<double>(x[static_cast<std::size_t>(i)]) *
                   static_cast<double>(b[static_cast<std::size_t>(tb ? j * k + i : i * n + j)]);
            worst = std::max(worst,
                             std::abs(s - static_cast<double>(ys[1][static_cast<std::size_t>(j)])));
          }
          CHECK(worst < (sizeof(T) == 4 ? 1e-3 : 1e-11));
        }
  }

  TEST_CASE_TEMPLATE(
      "gemm of one row: a column of B gives the same bits in a narrow product as in "
      "a wide one",
      T, float, double) {
    // Each column of x B is summed row after row, whether its part of y is
    // summed in whole rows of B (up to 4 KiB wide without AVX-512) or in
    // blocks of columns (wider parts, and AVX-512): the first 8 and 512
    // columns alone give the bits they have in the 2048-wide product.
    ThreadGuard guard;
    std::mt19937 gen(11);
    std::normal_distribution<double> val(0, 1);
    constexpr std::int64_t kWide = 2048;
    for (int nt : {1, 2})
      for (std::int64_t k : {1, 3, 4, 5, 37, 255}) {
        ms::set_num_threads(nt);
        std::vector<T> x(static_cast<std::size_t>(k)), b(static_cast<std::size_t>(k * kWide));
        for (T& e : x) e = static_cast<T>(val(gen));
        for (T& e : b) e = static_cast<T>(val(gen));
        std::vector<T> wide(static_cast<std::size_t>(kWide));
        ms::kernels::gemm<T>(false, false, 1, kWide, k, T(1), x.data(), k, b.data(), kWide, T(0),
                             wide.data(), kWide);
        for (std::int64_t n : {8, 512}) {
          std::vector<T> narrow(static_cast<std::size_t>(n));
          ms::kernels::gemm<T>(false, false, 1, n, k, T(1), x.data(), k, b.data(), kWide, T(0),
                               narrow.data(), n);
          CAPTURE(nt);
          CAPTURE(k);
          CAPTURE(n);
          CHECK(std::memcmp(narrow.data(), wide.data(), narrow.size() * sizeof(T)) == 0);
        }
      }
  }

  TEST_CASE_TEMPLATE("gemm of one row: a row of B^T gives the same bits in a group as alone", T,
                     float, double) {
    // With B stored transposed, rows of B are summed four at a time (their
    // lane sums reduced together) and the last n % 4 one by one: a row copied
    // into the last place must give the bits it gives in its group.
    ThreadGuard guard;
    ms::set_num_threads(1);
    std::mt19937 gen(7);
    std::normal_distribution<double> val(0, 1);
    for (std::int64_t k : {16, 17, 192, 200, 280, 768, 784}) {
      std::vector<T> x(static_cast<std::size_t>(k)), b(static_cast<std::size_t>(5 * k));
      for (T& e : x) e = static_cast<T>(1000 * val(gen));
      for (T& e : b) e = static_cast<T>(val(gen));
      for (std::int64_t r = 0; r < 4; ++r) {
        std::copy_n(b.begin() + r * k, k, b.begin() + 4 * k);
        std::vector<T> y(5);
        ms::kernels::gemm<T>(false, true, 1, 5, k, T(1), x.data(), k, b.data(), k, T(0), y.data(),
                             5);
        CAPTURE(k);
        CAPTURE(r);
        CHECK(std::memcmp(&y[static_cast<std::size_t>(r)], &y[4], sizeof(T)) == 0);
      }
    }
  }

  TEST_CASE_TEMPLATE("gemm of a few rows times B^T: each row the bits it has alone", T, float,
                     double) {
    // Up to 8 rows of A (contiguous) against B stored [n, k] run on the
    // batch-1 kernels, row after row over each group of B's rows: a batch of
    // prompts gives each prompt the logits it gets alone, on 1 and 2 threads;
    // and each sum is the float64 one within the rounding of k terms.
    ThreadGuard guard;
    std::mt19937 gen(11);
    std::normal_distribution<double> val(0, 1);
    for (int nt : {1, 2})
      for (const auto& [m, n, k] :
           {std::tuple<std::int64_t, std::int64_t, std::int64_t>{2, 576, 192},
            {3, 7, 33},
            {5, 1000, 300},
            {4, 9, 280},
            {2, 9, 48},   // an odd number of packets: held for one row, streamed for two
            {2, 9, 240},  // (float: 3 and 15 packets; double: 6 and 30)
            {2, 9, 40},   // (double: 5 packets)
            {3, 5, 5},    // fewer than a packet
            {1, 37, 784},
            {8, 193, 768}}) {
        ms::set_num_threads(nt);
        const std::int64_t lda = k + 3, ldc = n + 5;  // strided rows of A and C
        std::vector<T> a(static_cast<std::size_t>(m * lda)), b(static_cast<std::size_t>(n * k));
        for (T& e : a) e = static_cast<T>(val(gen));
        for (T& e : b) e = static_cast<T>(val(gen));
        std::vector<T> c(static_cast<std::size_t>(m * ldc), T(7)), row(static_cast<std::size_t>(n));
        ms::kernels::gemm<T>(false, true, m, n, k, T(1), a.data(), lda, b.data(), k, T(0), c.data(),
                             ldc);
        for (std::int64_t r = 0; r < m; ++r) {
          ms::kernels::gemm<T>(false, true, 1, n, k, T(1), a.data() + r * lda, k, b.data(), k, T(0),
                               row.data(), n);
          CAPTURE(nt);
          CAPTURE(m);
          CAPTURE(r);
          CHECK(std::memcmp(c.data() + r * ldc, row.data(),
                            static_cast<std::size_t>(n) * sizeof(T)) == 0);
          CHECK(c[static_cast<std::size_t>(r * ldc + n)] == T(7));  // the padding is not written
          std::int64_t off = 0;
          for (std::int64_t j = 0; j < n; ++j) {
            double want = 0, size = 0;
            for (std::int64_t t = 0; t < k; ++t) {
              const double p = static_cast<double>(a[static_cast<std::size_t>(r * lda + t)]) *
                               static_cast<double>(b[static_cast<std::size_t>(j * k + t)]);
              want += p;
              size += std::abs(p);
            }
            const double eps = std::numeric_limits<T>::epsilon();  // 2 u: ours and the reference's
            off += std::abs(static_cast<double>(row[static_cast<std::size_t>(j)]) - want) >
                   static_cast<double>(k) * eps * size;
          }
          CHECK(off == 0);
        }
      }
  }

  TEST_CASE("gemm on every backend: odd sizes, transposes, strides, alpha and beta, exactly") {
    ThreadGuard guard;
    const auto backends = available_backends();
    REQUIRE(!backends.empty());
    MESSAGE("backends: " << backends.size() << " (" << std::string(ms::kernels::gemm_backend().name)
                         << " is this process's default)");
    // Each of 1, 7, 17, 33, 127, 255, 1000 in each of m, n and k; and 9 rows
    // (up to 8 rows times B^T run on ms's row kernels with every backend).
    const std::array<std::array<std::int64_t, 3>, 12> shapes{{{1, 1, 1},
                                                              {9, 17, 33},
                                                              {9, 1000, 127},
                                                              {7, 17, 33},
                                                              {17, 33, 7},
                                                              {33, 7, 17},
                                                              {127, 255, 1000},
                                                              {1000, 33, 7},
                                                              {7, 1000, 127},
                                                              {255, 127, 1},
                                                              {1, 255, 127},
                                                              {33, 1, 255}}};
    std::mt19937 gen(11);
    for (const auto& [m, n, k] : shapes)
      for (int flags = 0; flags < 4; ++flags) {
        const Product p{m, n, k, (flags & 1) != 0, (flags & 2) != 0};
        const std::vector<float> a = small_ints(p.a().size(), gen),
                                 b = small_ints(p.b().size(), gen),
                                 c0 = small_ints(p.c_size(), gen);
        const std::vector<double> ab = reference(p, a, b);
        // alpha 1: libxsmm reads A where it is stored (either layout); 2: packed
        for (const std::array<float, 2> scales : std::array<std::array<float, 2>, 6>{
                 {{1.f, 0.f}, {1.f, 1.f}, {1.f, 0.5f}, {2.f, 0.f}, {2.f, 1.f}, {2.f, 0.5f}}}) {
          const float alpha = scales[0], beta = scales[1];
          // beta 0 never reads C: NaNs there must not reach the result.
          std::vector<float> c_in = c0;
          if (beta == 0.f) c_in.assign(c_in.size(), std::numeric_limits<float>::quiet_NaN());
          for (const std::string& backend : backends)
            for (int nt : {1, 2}) {
              ms::set_num_threads(nt);
              const std::vector<float> c = run_on(backend, p, alpha, a, b, beta, c_in);
              std::int64_t wrong = 0, padding_changed = 0;
              for (std::int64_t i = 0; i < m; ++i) {
                for (std::int64_t j = 0; j < n; ++j) {
                  const auto at = static_cast<std::size_t>(i * p.ldc() + j);
                  const double want = alpha * ab[static_cast<std::size_t>(i * n + j)] +
                                      (beta == 0.f ? 0.0 : double(beta) * double(c0[at]));
                  wrong += static_cast<double>(c[at]) != want;
                }
                for (std::int64_t j = n; j < p.ldc(); ++j) {
                  const auto at = static_cast<std::size_t>(i * p.ldc() + j);
                  padding_changed +=
                      !(c[at] == c_in[at] || (std::isnan(c[at]) && std::isnan(c_in[at])));
                }
              }
              CAPTURE(backend);
              CAPTURE(nt);
              CAPTURE(m);
              CAPTURE(n);
              CAPTURE(k);
              CAPTURE(p.ta);
              CAPTURE(p.tb);
              CAPTURE(alpha);
              CAPTURE(beta);
              CHECK(wrong == 0);
              CHECK(padding_changed == 0);
            }
        }
      }
  }

  TEST_CASE("gemm on every backend: the same bits on 1 and 2 threads") {
    // Random floats, so that a different order of the sums shows: the shapes
    // of gemm_bias and gemm_bf16 (a few rows and a long k, both operands
    // transposed, B stored transposed), a wide product cut into column blocks.
    ThreadGuard guard;
    std::mt19937 gen(31);
    for (const Product& p :
         {Product{16, 1000, 784, false, false}, Product{16, 1000, 784, false, true},
          Product{127, 255, 1000, true, true}, Product{64, 512, 784, false, true},
          Product{300, 770, 200, true, false}, Product{1, 513, 700, false, false},
          Product{700, 1, 513, false, true}})
      for (const float beta : {0.f, 1.f}) {
        const std::vector<float> a = uniform(p.a().size(), gen), b = uniform(p.b().size(), gen),
                                 c0 = uniform(p.c_size(), gen);
        for (const std::string& backend : available_backends()) {
          ms::set_num_threads(1);
          const std::vector<float> one = run_on(backend, p, 1.f, a, b, beta, c0);
          ms::set_num_threads(2);
          const std::vector<float> two = run_on(backend, p, 1.f, a, b, beta, c0);
          CAPTURE(backend);
          CAPTURE(p.m);
          CAPTURE(p.n);
          CAPTURE(p.k);
          CAPTURE(p.ta);
          CAPTURE(p.tb);
          CAPTURE(beta);
          CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
        }
      }
  }

  TEST_CASE("gemm on libxsmm: products cut into slabs, exactly, on 1 and 2 threads") {
    // k = 4096: each packed operand is cut into slabs of 256 rows of A or 192
    // columns of B. 300 x 300 (both transposed: 2 x 2 slabs, each packed
    // operand reused while the other's slab changes; with alpha 1 computed as
    // (B^T A)^T, C through its transpose when beta is not 0) and 600 x 100 (A
    // transposed, B packed: with alpha 2 the rows-outer order; with alpha 1 A
    // read in place). Small integers: every sum is exact.
    if (!has_libxsmm()) return;
    ThreadGuard guard;
    std::mt19937 gen(21);
    for (const Product& p :
         {Product{300, 300, 4096, true, true}, Product{600, 100, 4096, true, false}}) {
      const std::vector<float> a = small_ints(p.a().size(), gen), b = small_ints(p.b().size(), gen),
                               c0 = small_ints(p.c_size(), gen);
      const std::vector<double> ab = reference(p, a, b);
      for (const float alpha : {2.f, 1.f})
        for (const float beta : {0.f, 1.f, 0.5f})
          for (int nt : {1, 2}) {
            ms::set_num_threads(nt);
            const std::vector<float> c = run_on("libxsmm", p, alpha, a, b, beta, c0);
            const std::int64_t wrong = inexact(p, alpha, ab, beta, c0, c);
            CAPTURE(p.m);
            CAPTURE(p.tb);
            CAPTURE(alpha);
            CAPTURE(beta);
            CAPTURE(nt);
            CHECK(wrong == 0);
          }
    }
  }

  TEST_CASE(
      "gemm on libxsmm: a B of one panel packed by each thread, exactly, on 1 and 2 threads") {
    // Products whose packed B is one panel read by every task (each thread
    // packs its own copy): the batch-64 and batch-16 forwards x W^T (computed
    // as W x^T), a narrow B^T of 300 rows, and 1100 x 40 x 1024 with alpha 2,
    // whose A is packed in two slabs of rows: the second slab reads the
    // calling thread's copy of B. Small integers: every sum is exact. Before
    // each checked product, the same shape with another B on 2 threads, then
    // on 1, leaves other values in every thread's packed copy, so a copy not
    // packed again shows.
    if (!has_libxsmm()) return;
    ThreadGuard guard;
    std::mt19937 gen(41);
    for (const Product& p :
         {Product{64, 256, 512, false, true}, Product{16, 512, 784, false, true},
          Product{300, 40, 100, false, true}, Product{1100, 40, 1024, false, true}}) {
      const std::vector<float> a = small_ints(p.a().size(), gen), b = small_ints(p.b().size(), gen),
                               c0 = small_ints(p.c_size(), gen),
                               other_b = small_ints(p.b().size(), gen);
      const std::vector<double> ab = reference(p, a, b);
      for (const float alpha : {1.f, 2.f})
        for (const float beta : {0.f, 1.f})
          for (int nt : {1, 2}) {
            for (int scrub_nt : {2, 1}) {
              ms::set_num_threads(scrub_nt);
              run_on("libxsmm", p, alpha, a, other_b, beta, c0);
            }
            ms::set_num_threads(nt);
            const std::vector<float> c = run_on("libxsmm", p, alpha, a, b, beta, c0);
            const std::int64_t wrong = inexact(p, alpha, ab, beta, c0, c);
            CAPTURE(p.m);
            CAPTURE(p.n);
            CAPTURE(alpha);
            CAPTURE(beta);
            CAPTURE(nt);
            CHECK(wrong == 0);
          }
    }
  }

  TEST_CASE("gemm on libxsmm: the same bits for 1 and 2 threads on training shapes") {
    if (!has_libxsmm()) return;  // a build without libxsmm or a CPU below AVX2
    ThreadGuard guard;
    std::mt19937 gen(5);
    // MLP 784-512 at batch 64 (forward, input gradient, weight gradient), a
    // square one, a large odd one and an accumulating gradient.
    // Batches of 2 to 256 rows through fc1's forward, too.
    const std::array<Product, 11> shapes{{{64, 512, 784, false, true},
                                          {64, 784, 512, false, false},
                                          {512, 784, 64, true, false},
                                          {256, 256, 512, false, false},
                                          {1000, 255, 127, true, true},
                                          {255, 1000, 33, false, true},
                                          {2, 512, 784, false, true},
                                          {17, 512, 784, false, true},
                                          {200, 512, 784, false, true},
                                          {256, 512, 256, true, false},
                                          {130, 1030, 300, false, false}}};
    for (const Product& p : shapes)
      for (const float beta : {0.f, 1.f}) {
        const std::vector<float> a = uniform(p.a().size(), gen), b = uniform(p.b().size(), gen),
                                 c0 = uniform(p.c_size(), gen);
        ms::set_num_threads(1);
        const std::vector<float> one = run_on("libxsmm", p, 1.f, a, b, beta, c0);
        ms::set_num_threads(2);
        const std::vector<float> two = run_on("libxsmm", p, 1.f, a, b, beta, c0);
        CAPTURE(p.m);
        CAPTURE(p.n);
        CAPTURE(p.k);
        CAPTURE(beta);
        CHECK(one == two);
      }
  }

  TEST_CASE("gemm_bias: bitwise gemm then the bias added to each row (and relu), 1 and 2 threads") {
    ThreadGuard guard;
    std::mt19937 gen(9);
    // libxsmm's sizes (several chunks and groups of k, edge panels and tasks,
    // slabs, B stored transposed and not, the swapped form of few rows),
    // Eigen's, one row.
    struct Shape3 {
      std::int64_t m, n, k;
    };
    // 600 x 400 x 4096: B cut into slabs of 192 columns, each with its part of the bias.
    for (const Shape3 p : {Shape3{4096, 192, 192}, Shape3{300, 770, 200}, Shape3{16, 1000, 784},
                           Shape3{5, 6, 4}, Shape3{1, 40, 48}, Shape3{600, 400, 4096}})
      for (const bool tb : {false, true}) {
        CAPTURE(p.m);
        CAPTURE(p.n);
        CAPTURE(tb);
        const std::vector<float> a = uniform(static_cast<std::size_t>(p.m * p.k), gen);
        const std::vector<float> b = uniform(static_cast<std::size_t>(p.k * p.n), gen);
        const std::vector<float> bias = uniform(static_cast<std::size_t>(p.n), gen);
        const std::int64_t ldb = tb ? p.k : p.n;
        std::vector<float> want(static_cast<std::size_t>(p.m * p.n));
        ms::kernels::gemm<float>(false, tb, p.m, p.n, p.k, 1.f, a.data(), p.k, b.data(), ldb, 0.f,
                                 want.data(), p.n);
        for (std::int64_t i = 0; i < p.m; ++i)
          for (std::int64_t j = 0; j < p.n; ++j)
            want[static_cast<std::size_t>(i * p.n + j)] += bias[static_cast<std::size_t>(j)];
        // With relu: ms::relu's rule (v < 0 ? 0 : v) on each sum.
        std::vector<float> want_relu = want;
        for (float& v : want_relu) v = v < 0.f ? 0.f : v;
        CHECK(std::count(want_relu.begin(), want_relu.end(), 0.f) > 0);
        for (const int threads : {1, 2}) {
          ms::set_num_threads(threads);
          for (const bool relu : {false, true}) {
            CAPTURE(relu);
            std::vector<float> got(want.size(), std::nanf(""));
            ms::kernels::gemm_bias(false, tb, p.m, p.n, p.k, a.data(), p.k, b.data(), ldb,
                                   bias.data(), got.data(), p.n, relu);
            const std::vector<float>& w = relu ? want_relu : want;
            CHECK(std::memcmp(got.data(), w.data(), got.size() * sizeof(float)) == 0);
          }
        }
      }
  }

  TEST_CASE("gemm_scale_add: bitwise gemm then scale_add, in place, on 1 and 2 threads") {
    ThreadGuard guard;
    std::mt19937 gen(12);
    struct Shape3 {
      std::int64_t m, n, k;
    };
    // libxsmm's sizes with k in one group (edge panels and tasks, several
    // chunks, slabs of B), A stored transposed (a weight gradient) or not, B
    // stored transposed or not; a k of two groups and Eigen's sizes, which it
    // declines; one row (the row kernels). Each with and without D.
    for (const Shape3 p :
         {Shape3{512, 784, 64}, Shape3{300, 770, 200}, Shape3{100, 90, 512}, Shape3{70, 2000, 96},
          Shape3{64, 64, 1000}, Shape3{64, 64, 1100}, Shape3{5, 6, 4}, Shape3{1, 40, 48}})
      for (const bool ta : {false, true})
        for (const bool tb : {false, true})
          for (const bool with_d : {false, true}) {
            CAPTURE(p.m);
            CAPTURE(p.n);
            CAPTURE(p.k);
            CAPTURE(ta);
            CAPTURE(tb);
            CAPTURE(with_d);
            const std::vector<float> a = uniform(static_cast<std::size_t>(p.m * p.k), gen);
            const std::vector<float> b = uniform(static_cast<std::size_t>(p.k * p.n), gen);
            const std::vector<float> c0 = uniform(static_cast<std::size_t>(p.m * p.n), gen);
            const std::vector<float> d0 = uniform(c0.size(), gen);
            const std::int64_t lda = ta ? p.m : p.k, ldb = tb ? p.k : p.n;
            const float scale = 0.9f, t = 0.05f;
            std::vector<float> prod(c0.size());
            ms::kernels::gemm<float>(ta, tb, p.m, p.n, p.k, 1.f, a.data(), lda, b.data(), ldb, 0.f,
                                     prod.data(), p.n);
            // Each op rounded on its own (volatile: no multiply-add contraction).
            std::vector<float> want_c = c0, want_d = d0;
            for (std::size_t i = 0; i < want_c.size(); ++i) {
              const volatile float scaled = want_c[i] * scale;
              want_c[i] = scaled + prod[i];
              const volatile float step = want_c[i] * t;
              want_d[i] -= step;
            }
            bool fused[2] = {};
            for (const int threads : {1, 2}) {
              ms::set_num_threads(threads);
              std::vector<float> c = c0, d = d0;
              float* dp = with_d ? d.data() : nullptr;
              fused[threads - 1] =
                  ms::kernels::gemm_scale_add(ta, tb, p.m, p.n, p.k, a.data(), lda, b.data(), ldb,
                                              scale, c.data(), p.n, dp, p.n, t);
              if (!fused[threads - 1]) {
                CHECK(c == c0);  // declined: C and D untouched
                CHECK(d == d0);
                ms::kernels::scale_add(p.m, p.n, scale, prod.data(), p.n, c.data(), p.n, dp, p.n,
                                       t);
              }
              CHECK(std::memcmp(c.data(), want_c.data(), c.size() * sizeof(float)) == 0);
              if (with_d)
                CHECK(std::memcmp(d.data(), want_d.data(), d.size() * sizeof(float)) == 0);
              else
                CHECK(d == d0);
            }
            CHECK(fused[0] == fused[1]);
            const bool libxsmm_size = p.m * p.n >= 1024 && p.m > 1;
            if (has_libxsmm() && std::string_view(ms::kernels::gemm_backend().name) == "libxsmm")
              CHECK(fused[0] == (libxsmm_size && p.k <= 1024));
            else
              CHECK(!fused[0]);
          }
  }

  TEST_CASE("gemm on libxsmm: a product that packs nothing gives the same bits on a fresh thread") {
    if (!has_libxsmm()) return;
    ThreadGuard guard;
    ms::set_num_threads(1);
    std::mt19937 gen(11);
    // Both operands read in place (alpha 1, neither transposed): no packing
    // buffer. The first product of a new thread must not take another path
    // than the same product on a thread that packed before.
    const Product p{64, 500, 784, false, false};
    const std::vector<float> a = uniform(p.a().size(), gen), b = uniform(p.b().size(), gen),
                             c0(p.c_size(), 0.f);
    std::vector<float> fresh;
    std::thread([&] { fresh = run_on("libxsmm", p, 1.f, a, b, 0.f, c0); }).join();
    const Product packs{64, 500, 784, true, false};  // A transposed: packed
    (void)run_on("libxsmm", packs, 1.f, uniform(packs.a().size(), gen), b, 0.f, c0);
    const std::vector<float> warm = run_on("libxsmm", p, 1.f, a, b, 0.f, c0);
    CHECK(fresh == warm);
  }

  TEST_CASE("gemm: libxsmm and Eigen agree within the rounding of a k-term sum") {
    if (!has_libxsmm()) return;
    ThreadGuard guard;
    ms::set_num_threads(2);
    std::mt19937 gen(9);
    for (const Product& p :
         {Product{127, 255, 1000, false, false}, Product{64, 512, 784, false, true},
          Product{512, 784, 64, true, false}, Product{33, 1000, 17, true, true}}) {
      const std::vector<float> a = uniform(p.a().size(), gen), b = uniform(p.b().size(), gen),
                               c0(p.c_size(), 0.f);
      const std::vector<float> x = run_on("libxsmm", p, 1.f, a, b, 0.f, c0),
                               e = run_on("eigen", p, 1.f, a, b, 0.f, c0);
      // Each differs from the exact sum by at most k * eps * sum |a_i b_i|.
      std::vector<float> abs_a(a.size()), abs_b(b.size());
      std::transform(a.begin(), a.end(), abs_a.begin(), [](float v) { return std::abs(v); });
      std::transform(b.begin(), b.end(), abs_b.begin(), [](float v) { return std::abs(v); });
      const std::vector<double> bound = reference(p, abs_a, abs_b);
      const double eps = std::numeric_limits<float>::epsilon();
      std::int64_t far = 0, differ = 0;
      for (std::int64_t i = 0; i < p.m; ++i)
        for (std::int64_t j = 0; j < p.n; ++j) {
          const auto at = static_cast<std::size_t>(i * p.ldc() + j);
          const double d = std::abs(double(x[at]) - double(e[at]));
          far += d > 2 * double(p.k) * eps * bound[static_cast<std::size_t>(i * p.n + j)];
          differ += d != 0;
        }
      CAPTURE(p.m);
      CAPTURE(p.n);
      CAPTURE(p.k);
      CHECK(far == 0);
      MESSAGE("elements where libxsmm and Eigen round differently: " << differ);
    }
  }

  TEST_CASE("gemm: a deep product is a sum of group sums") {
    // Positive terms: one chain of 65,536 float32 multiply-adds drifts by
    // about 1.5e-5 relative here; libxsmm sums chains of at most 1024 and
    // adds up the group sums. Eigen, which also cuts k into blocks, is held to
    // the same bound.
    ThreadGuard guard;
    ms::set_num_threads(2);
    std::mt19937 gen(12);
    std::uniform_real_distribution<float> val(0.5f, 1.f);
    // m n >= 1024: libxsmm takes them
    for (const Product& p : {Product{32, 40, 1 << 16, false, false},
                             {32, 40, 1 << 16, true, false},
                             {64, 16, 1 << 16, false, false},
                             {64, 16, 1 << 16, true, false}}) {
      std::vector<float> a(p.a().size()), b(p.b().size());
      for (auto* v : {&a, &b})
        for (float& e : *v) e = val(gen);
      const std::vector<double> exact = reference(p, a, b);
      for (const char* backend : {"libxsmm", "eigen"}) {
        if (std::string(backend) == "libxsmm" && !has_libxsmm()) continue;
        const std::vector<float> x =
            run_on(backend, p, 1.f, a, b, 0.f, std::vector<float>(p.c_size()));
        double worst = 0;
        for (std::int64_t i = 0; i < p.m; ++i)
          for (std::int64_t j = 0; j < p.n; ++j) {
            const double r = exact[static_cast<std::size_t>(i * p.n + j)];
            worst = std::max(
                worst, std::abs(double(x[static_cast<std::size_t>(i * p.ldc() + j)]) - r) / r);
          }
        CAPTURE(std::string(backend));
        CAPTURE(p.ta);
        CAPTURE(p.n);
        CHECK(worst < 2e-6);
      }
    }
  }

  TEST_CASE("gemm on libxsmm starts no threads of its own") {
    if (!has_libxsmm()) return;
    ThreadGuard guard;
    ms::set_num_threads(1);
    std::mt19937 gen(2);
    const int before = process_threads();
    // A shape no other test uses: libxsmm generates new kernels for it.
    const Product p{91, 149, 301, false, false};
    const std::vector<float> a = uniform(p.a().size(), gen), b = uniform(p.b().size(), gen);
    run_on("libxsmm", p, 1.f, a, b, 0.f, std::vector<float>(p.c_size()));
    CHECK(process_threads() == before);
  }

  TEST_CASE(
      "gemm_backend: libxsmm by default on AVX2 CPUs and later, MS_GEMM overrides, gemm_on "
      "knows the names") {
    const std::string name = ms::kernels::gemm_backend().name;
    const std::string env = std::getenv("MS_GEMM") != nullptr ? std::getenv("MS_GEMM") : "";
    if (env == "eigen") CHECK(name == "eigen");
    if (has_libxsmm()) {
      if (env == "libxsmm") CHECK(name == "libxsmm");
      // libxsmm reads the CPU's features at run time, as this check does.
      if (env.empty())
        CHECK((name == "libxsmm") ==
              (__builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0));
      if (name == "libxsmm")
        CHECK(std::string(ms::kernels::gemm_backend().detail).find("libxsmm") != std::string::npos);
    } else {
      CHECK(name != std::string("libxsmm"));
    }
    const float one = 1.f;
    float c = 0.f;
    CHECK_FALSE(
        ms::kernels::gemm_on("mkl", false, false, 1, 1, 1, 1.f, &one, 1, &one, 1, 0.f, &c, 1));
    CHECK(ms::kernels::gemm_on("eigen", false, false, 1, 1, 1, 1.f, &one, 1, &one, 1, 0.f, &c, 1));
    CHECK(c == 1.f);
  }

  TEST_CASE("gemm: the same bits whichever operand is stored transposed") {
    // A product reached through a transposed view (trans flag) and through a
    // copy (no flag) must agree: eager and jitted calls may differ there.
    ThreadGuard guard;
    std::mt19937 gen(8);
    for (const auto& [m, n, k] :
         {std::array<std::int64_t, 3>{64, 512, 784}, std::array<std::int64_t, 3>{127, 255, 1000},
          std::array<std::int64_t, 3>{300, 200, 129},
          // rows of A and B a whole, even number of cache lines apart (read in place)
          std::array<std::int64_t, 3>{96, 256, 512},
          // many rows, few columns, deep (groups of k): A^T B reads A in place
          std::array<std::int64_t, 3>{520, 96, 1100},
          // rows of A 4 KiB apart and a last panel of C one vector wide: A
          // copied to padded rows first, in one slab of rows and in two
          std::array<std::int64_t, 3>{40, 100, 1024}, std::array<std::int64_t, 3>{1100, 16, 1024},
          // few rows: B^T swapped (C^T one vector wide, a group per chunk),
          // B not (chunks of a group)
          std::array<std::int64_t, 3>{16, 512, 784}}) {
      const std::vector<float> a = uniform(static_cast<std::size_t>(m * k), gen),
                               b = uniform(static_cast<std::size_t>(k * n), gen);
      const std::vector<float> at = ms::test::transposed(a, m, k),
                               bt = ms::test::transposed(b, k, n);
      for (const std::string& backend : available_backends())
        for (int nt : {1, 2}) {
          ms::set_num_threads(nt);
          std::vector<float> c[4];
          for (int flags = 0; flags < 4; ++flags) {
            const bool ta = (flags & 1) != 0, tb = (flags & 2) != 0;
            c[flags].assign(static_cast<std::size_t>(m * n), 0.f);
            REQUIRE(ms::kernels::gemm_on(backend, ta, tb, m, n, k, 1.f, ta ? at.data() : a.data(),
                                         ta ? m : k, tb ? bt.data() : b.data(), tb ? k : n, 0.f,
                                         c[flags].data(), n));
          }
          // and the process's default, as matmul calls it
          std::vector<float> d(static_cast<std::size_t>(m * n));
          ms::kernels::gemm<float>(false, true, m, n, k, 1.f, a.data(), k, bt.data(), k, 0.f,
                                   d.data(), n);
          CAPTURE(backend);
          CAPTURE(nt);
          CAPTURE(m);
          CHECK(c[0] == c[1]);
          CHECK(c[0] == c[2]);
          CHECK(c[0] == c[3]);
          std::vector<float> d0(d.size());
          ms::kernels::gemm<float>(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f,
                                   d0.data(), n);
          CHECK(d == d0);
        }
    }
  }

  TEST_CASE("gemm: C cut into columns anywhere gives the same bits") {
    // libxsmm's panel width is the CPU's (48 or 64 columns) and a product
    // one vector wide runs a group of k as one chunk: neither may change a
    // sum. Each column block computed as a product of its own (its own panels,
    // narrow or not) must give the whole product's bits; k spans two groups.
    if (!has_libxsmm()) return;  // (Eigen's and OpenBLAS's blocking follow n)
    ThreadGuard guard;
    std::mt19937 gen(21);
    const std::int64_t m = 200, n = 400, k = 1300;
    const std::vector<float> a = uniform(static_cast<std::size_t>(m * k), gen),
                             b = uniform(static_cast<std::size_t>(k * n), gen);
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        // a stored [m, k] or [k, m], b [k, n] or [n, k] (the same values read
        // as the other layout: the bits compared are of one operand pair)
        const std::int64_t lda = ta ? m : k, ldb = tb ? k : n;
        std::vector<float> whole(static_cast<std::size_t>(m * n)), cut(whole.size());
        REQUIRE(ms::kernels::gemm_on("libxsmm", ta, tb, m, n, k, 1.f, a.data(), lda, b.data(), ldb,
                                     0.f, whole.data(), n));
        std::int64_t j0 = 0;
        for (const std::int64_t w : {16, 17, 48, 64, 100, 155}) {
          REQUIRE(ms::kernels::gemm_on("libxsmm", ta, tb, m, w, k, 1.f, a.data(), lda,
                                       tb ? b.data() + j0 * ldb : b.data() + j0, ldb, 0.f,
                                       cut.data() + j0, n));
          j0 += w;
        }
        REQUIRE(j0 == n);
        CAPTURE(ta);
        CAPTURE(tb);
        CHECK(std::memcmp(whole.data(), cut.data(), whole.size() * sizeof(float)) == 0);
      }
  }

  TEST_CASE("gemm_bf16: bfloat16 inputs, float32 sums, against float64 references") {
    ThreadGuard guard;
    std::mt19937 gen(21);
    std::uniform_real_distribution<double> val(-1, 1);
    const double eps32 = std::numeric_limits<float>::epsilon();
    // bfloat16 has an 8-bit significand: rounding to nearest is off by at most
    // u = 2^-8 of the value, so a product of two rounded inputs by at most
    // 2u + u^2 < 2.01 u of the exact product.
    const double u_bf16 = std::ldexp(1.0, -8);
    for (const Product& p :
         {Product{1, 1, 1, false, false}, Product{7, 17, 33, false, true},
          Product{33, 7, 17, true, false}, Product{127, 255, 1000, true, true},
          Product{64, 512, 784, false, true}, Product{255, 33, 127, false, false},
          Product{300, 130, 255, true, false}, Product{1000, 7, 33, false, false}}) {
      // The inputs and their references, shared by the five (alpha, beta).
      const StoredMatrix oa = p.a(), ob = p.b();
      std::vector<double> xa(oa.size()), xb(ob.size());
      for (double& e : xa) e = val(gen);
      for (double& e : xb) e = val(gen);
      std::vector<ms::bfloat16_t> a(xa.size()), b(xb.size());
      std::vector<float> ra(xa.size()), rb(xb.size()), aa(xa.size()), ab(xb.size());
      for (std::size_t i = 0; i < xa.size(); ++i) {
        a[i] = ms::bfloat16_t(static_cast<float>(xa[i]));
        ra[i] = static_cast<float>(a[i]);
        aa[i] = std::abs(ra[i]);
      }
      for (std::size_t i = 0; i < xb.size(); ++i) {
        b[i] = ms::bfloat16_t(static_cast<float>(xb[i]));
        rb[i] = static_cast<float>(b[i]);
        ab[i] = std::abs(rb[i]);
      }
      const std::vector<double> rounded = reference(p, ra, rb), bound = reference(p, aa, ab),
                                exact = reference(p, xa, xb);
      for (const auto& [alpha, beta] :
           {std::pair{2.f, 0.f}, std::pair{2.f, 1.f}, std::pair{1.f, 0.f}, std::pair{1.f, 1.f},
            std::pair{1.f, 0.5f}}) {
        std::vector<float> c0 = uniform(p.c_size(), gen);
        if (beta == 0.f) c0.assign(c0.size(), std::numeric_limits<float>::quiet_NaN());
        std::vector<float> c[2];
        for (int nt : {1, 2}) {
          ms::set_num_threads(nt);
          c[nt - 1] = c0;
          ms::kernels::gemm_bf16(p.ta, p.tb, p.m, p.n, p.k, alpha, a.data(), oa.ld(), b.data(),
                                 ob.ld(), beta, c[nt - 1].data(), p.ldc());
        }
        std::int64_t far_rounded = 0, far_exact = 0;
        for (std::int64_t i = 0; i < p.m; ++i)
          for (std::int64_t j = 0; j < p.n; ++j) {
            const auto at = static_cast<std::size_t>(i * p.ldc() + j);
            const auto e = static_cast<std::size_t>(i * p.n + j);
            const double old = beta == 0.f ? 0.0 : double(beta) * double(c0[at]);
            const double got = double(c[0][at]);
            // float32 sums of exact bfloat16 products (k + 2 roundings of
            // float32: the sum, alpha *, + beta * old), alpha a power of 2
            const double tol32 =
                (double(p.k) + 2) * eps32 * (double(alpha) * bound[e] + std::abs(old));
            far_rounded += !(std::abs(got - (double(alpha) * rounded[e] + old)) <= tol32);
            // against the unrounded inputs: 2.01 u of each |product| more
            far_exact += !(std::abs(got - (double(alpha) * exact[e] + old)) <=
                           2.01 * u_bf16 * double(alpha) * bound[e] + tol32);
          }
        CAPTURE(p.m);
        CAPTURE(p.n);
        CAPTURE(p.k);
        CAPTURE(p.ta);
        CAPTURE(p.tb);
        CAPTURE(alpha);
        CAPTURE(beta);
        CHECK(far_rounded == 0);
        CHECK(far_exact == 0);
        // bitwise (the NaNs of C's padding compare unequal as floats)
        CHECK(std::memcmp(c[0].data(), c[1].data(), c[0].size() * sizeof(float)) == 0);
      }
    }
  }

  TEST_CASE("gemm_bf16: x W^T with even strides gives the bits of x times W transposed") {
    // Unpadded rows (even strides): libxsmm computes few rows times a B
    // stored [n, k] as C^T = W x^T with W read in place, and A stored [m, k]
    // in place; the same sums as packing both, which a B stored [k, n] (its
    // transpose) and an A stored [k, m] (ta) get. Against float64 too.
    ThreadGuard guard;
    std::mt19937 gen(29);
    std::uniform_real_distribution<float> val(-1, 1);
    for (const auto& [m, n, k] :
         {std::array<std::int64_t, 3>{64, 512, 784}, std::array<std::int64_t, 3>{16, 300, 130},
          std::array<std::int64_t, 3>{200, 96, 64}})
      for (const float alpha : {1.f, 2.f}) {
        std::vector<ms::bfloat16_t> x(static_cast<std::size_t>(m * k)),
            w(static_cast<std::size_t>(n * k));
        for (auto& e : x) e = ms::bfloat16_t(val(gen));
        for (auto& e : w) e = ms::bfloat16_t(val(gen));
        const std::vector<ms::bfloat16_t> xt = ms::test::transposed(x, m, k),
                                          wt = ms::test::transposed(w, n, k);
        CAPTURE(m);
        CAPTURE(alpha);
        for (int nt : {1, 2}) {
          ms::set_num_threads(nt);
          std::vector<float> c(static_cast<std::size_t>(m * n)), ct(c.size());
          ms::kernels::gemm_bf16(false, true, m, n, k, alpha, x.data(), k, w.data(), k, 0.f,
                                 c.data(), n);
          ms::kernels::gemm_bf16(true, false, m, n, k, alpha, xt.data(), m, wt.data(), n, 0.f,
                                 ct.data(), n);
          CHECK(std::memcmp(c.data(), ct.data(), c.size() * sizeof(float)) == 0);
          std::vector<ms::bfloat16_t> r(c.size()), rt(c.size());
          ms::kernels::gemm_bf16_rounded(false, true, m, n, k, alpha, x.data(), k, w.data(), k,
                                         r.data(), n);
          ms::kernels::gemm_bf16_rounded(true, false, m, n, k, alpha, xt.data(), m, wt.data(), n,
                                         rt.data(), n);
          CHECK(std::memcmp(r.data(), rt.data(), r.size() * sizeof(ms::bfloat16_t)) == 0);
          std::int64_t far = 0;
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              double s = 0, bound = 0;
              for (std::int64_t p = 0; p < k; ++p) {
                const double e = double(float(x[static_cast<std::size_t>(i * k + p)])) *
                                 double(float(w[static_cast<std::size_t>(j * k + p)]));
                s += e;
                bound += std::abs(e);
              }
              const double tol = (double(k) + 2) * std::ldexp(1.0, -24) * double(alpha) * bound;
              far += !(std::abs(double(c[static_cast<std::size_t>(i * n + j)]) - alpha * s) <= tol);
            }
          CHECK(far == 0);
        }
      }
  }

  TEST_CASE(
      "gemm_bf16: x W^T with x one panel, packed by each thread, exactly, on 1 and 2 threads") {
    // Dense rows, beta 0: computed as W x^T with x^T packed as one panel of
    // VNNI pairs, which each thread packs for itself on 2 threads. Small
    // integers: every product and sum is exact. Before each checked product,
    // the same shape with another x on 2 threads, then on 1, leaves other
    // values in every thread's packed copy.
    ThreadGuard guard;
    std::mt19937 gen(43);
    std::uniform_int_distribution<int> val(-3, 3);
    const auto ints = [&](std::int64_t size) {
      std::vector<ms::bfloat16_t> v(static_cast<std::size_t>(size));
      for (auto& e : v) e = ms::bfloat16_t(static_cast<float>(val(gen)));
      return v;
    };
    for (const auto& [m, n, k] :
         {std::array<std::int64_t, 3>{64, 256, 512}, std::array<std::int64_t, 3>{16, 512, 784}}) {
      const std::vector<ms::bfloat16_t> x = ints(m * k), other_x = ints(m * k), w = ints(n * k);
      for (int nt : {1, 2}) {
        std::vector<float> c(static_cast<std::size_t>(m * n));
        for (int scrub_nt : {2, 1}) {
          ms::set_num_threads(scrub_nt);
          ms::kernels::gemm_bf16(false, true, m, n, k, 1.f, other_x.data(), k, w.data(), k, 0.f,
                                 c.data(), n);
        }
        ms::set_num_threads(nt);
        ms::kernels::gemm_bf16(false, true, m, n, k, 1.f, x.data(), k, w.data(), k, 0.f, c.data(),
                               n);
        std::int64_t wrong = 0;
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::int64_t q = 0; q < k; ++q)
              s += double(float(x[static_cast<std::size_t>(i * k + q)])) *
                   double(float(w[static_cast<std::size_t>(j * k + q)]));
            wrong += double(c[static_cast<std::size_t>(i * n + j)]) != s;
          }
        CAPTURE(m);
        CAPTURE(nt);
        CHECK(wrong == 0);
      }
    }
  }

  TEST_CASE("gemm_bf16_rounded: bitwise gemm_bf16 (beta 0) rounded to bfloat16; 1 and 2 threads") {
    ThreadGuard guard;
    std::mt19937 gen(23);
    std::uniform_real_distribution<float> val(-1, 1);
    for (const Product& p :
         {Product{1, 1, 1, false, false}, Product{7, 17, 33, false, true},
          Product{33, 7, 17, true, false}, Product{64, 512, 784, false, true},
          Product{512, 784, 64, true, false}, Product{64, 784, 512, false, false},
          Product{255, 33, 127, true, true},
          Product{300, 1100, 1000, false, false}})  // two slabs of columns (kPackBudget)
      for (const float alpha : {1.f, -0.5f}) {
        const StoredMatrix oa = p.a(), ob = p.b();
        std::vector<ms::bfloat16_t> a(oa.size()), b(ob.size());
        for (auto& e : a) e = ms::bfloat16_t(val(gen));
        for (auto& e : b) e = ms::bfloat16_t(val(gen));
        std::vector<float> c32(p.c_size(), std::numeric_limits<float>::quiet_NaN());
        ms::kernels::gemm_bf16(p.ta, p.tb, p.m, p.n, p.k, alpha, a.data(), oa.ld(), b.data(),
                               ob.ld(), 0.f, c32.data(), p.ldc());
        const ms::bfloat16_t pad(7.f);  // the padding of C (ldc > n) stays as it is
        std::vector<ms::bfloat16_t> want(p.c_size(), pad);
        for (std::int64_t i = 0; i < p.m; ++i)
          for (std::int64_t j = 0; j < p.n; ++j) {
            const auto at = static_cast<std::size_t>(i * p.ldc() + j);
            want[at] = ms::bfloat16_t(c32[at]);
          }
        CAPTURE(p.m);
        CAPTURE(p.n);
        CAPTURE(p.k);
        CAPTURE(p.ta);
        CAPTURE(p.tb);
        for (int nt : {1, 2}) {
          ms::set_num_threads(nt);
          std::vector<ms::bfloat16_t> c(p.c_size(), pad);
          ms::kernels::gemm_bf16_rounded(p.ta, p.tb, p.m, p.n, p.k, alpha, a.data(), oa.ld(),
                                         b.data(), ob.ld(), c.data(), p.ldc());
          CHECK(std::memcmp(c.data(), want.data(), c.size() * sizeof(ms::bfloat16_t)) == 0);
        }
      }
  }
}
