// kernels/gemm.hpp: the product of one row by a matrix (m == 1, a batch of
// one), which ms computes with its own kernels: B stored [k, n] (blocks of
// columns, then single packets, then fewer than a packet) or [n, k] (dot
// products by groups of rows, then single rows), x strided or not, B's rows
// padded, alpha and beta. Small integer values make every sum exact, so each
// element is compared for equality with a double loop; random values check
// that 1 and 2 threads give the same bits.
#include <doctest/doctest.h>

#include "thread_guard.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

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
}
