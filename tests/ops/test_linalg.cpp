// matmul and the GEMM kernel against naive double-precision loops written here.
#include <doctest/doctest.h>
#include <algorithm>

#include "random.hpp"
#include "thread_guard.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <ms/core/storage.hpp>
#include <ms/kernels/gemm.hpp>
#include <ms/kernels/parallel.hpp>
#include <ms/ops/linalg.hpp>

using namespace ms;
using ms::test::random_tensor;

namespace {

using Values = std::vector<double>;

struct Ref {
  Values v;
  Shape shape;
};

/// NumPy matmul, the slow way: promote 1-D operands, broadcast the batch dims,
/// sum over k in double.
Ref matmul_ref(const Tensor& a, const Tensor& b) {
  const Values av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<std::int64_t> as = a.shape().to_vector(), bs = b.shape().to_vector();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const std::int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const std::vector<std::int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const std::size_t r = std::max(ab.size(), bb.size());
  std::vector<std::int64_t> ob(r), pa(r, 1), pb(r, 1);  // padded batch dims
  for (std::size_t i = 0; i < r; ++i) {
    if (i >= r - ab.size()) pa[i] = ab[i - (r - ab.size())];
    if (i >= r - bb.size()) pb[i] = bb[i - (r - bb.size())];
    ob[i] = pa[i] == 1 ? pb[i] : pa[i];  // 0 broadcasts against 1 to 0
  }
  std::int64_t batch = 1;
  for (auto d : ob) batch *= d;
  Ref out;
  out.v.assign(static_cast<std::size_t>(batch * m * n), 0.0);
  for (std::int64_t t = 0; t < batch; ++t) {
    std::int64_t rem = t, ia = 0, ib = 0, sa = 1, sb = 1;
    for (std::size_t d = r; d-- > 0;) {
      const std::int64_t idx = rem % ob[d];
      rem /= ob[d];
      ia += (pa[d] == 1 ? 0 : idx) * sa;
      ib += (pb[d] == 1 ? 0 : idx) * sb;
      sa *= pa[d];
      sb *= pb[d];
    }
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t p = 0; p < k; ++p)
          s += av[static_cast<std::size_t>((ia * m + i) * k + p)] *
               bv[static_cast<std::size_t>((ib * k + p) * n + j)];
        out.v[static_cast<std::size_t>((t * m + i) * n + j)] = s;
      }
  }
  out.shape = Shape(ob);
  if (!a1) out.shape.push_back(m);
  if (!b1) out.shape.push_back(n);
  return out;
}

/// Stores of an integer reference wrap like the dtype (int8 / uint8 matmul wraps).
double wrap_to(DType dt, double v) {
  const auto i = static_cast<std::int64_t>(v);
  switch (dt) {
    case DType::Int8: return static_cast<std::int8_t>(i);
    case DType::UInt8: return static_cast<std::uint8_t>(i);
    case DType::Int16: return static_cast<std::int16_t>(i);
    case DType::Int32: return static_cast<std::int32_t>(i);
    default: return static_cast<double>(i);
  }
}

void check_matmul(const Tensor& a, const Tensor& b) {
  CAPTURE(a.shape());
  CAPTURE(b.shape());
  const DType dt = a.dtype();
  const Tensor y = matmul(a, b);
  const Ref ref = matmul_ref(a, b);
  REQUIRE(y.shape() == ref.shape);
  CHECK(y.dtype() == dt);
  const Values got = y.to_vector<double>();
  if (!dtype_is_float(dt)) {
    Values want = ref.v;
    for (auto& e : want) e = wrap_to(dt, e);
    CHECK(got == want);
    return;
  }
  const double tol = dt == float64 ? 1e-12 : dt == float32 ? 1e-5 : dt == float16 ? 1e-2 : 4e-2;
  const Tensor want = from_vector(ref.v, ref.shape);
  CHECK(allclose(y, want, tol, tol));
}

const std::vector<std::pair<Shape, Shape>> kShapes = {
    {{3}, {3}},                   // dot
    {{2, 3}, {3, 4}},             // matrix
    {{3}, {3, 4}},                // 1-D lhs promoted
    {{2, 3}, {3}},                // 1-D rhs promoted
    {{5}, {2, 5, 4}},             // 1-D lhs against a batch
    {{2, 3, 5}, {5}},             // batch against a 1-D rhs
    {{2, 1, 3, 4}, {3, 4, 2}},    // broadcast batch dims
    {{4, 3}, {2, 3, 5}},          // 2-D lhs broadcast over the rhs batch
    {{1, 3}, {3, 1}},             // 1 x 1
    {{7, 65}, {65, 33}},          // past Eigen's lazy-product threshold: BLAS
    {{3, 40, 30}, {30, 20}},      // batch folded into one GEMM
    {{6, 64, 64}, {6, 64, 64}},   // small matrices over a parallel batch
    {{130, 129}, {129, 131}},     // one larger GEMM (threaded BLAS)
    {{2, 0}, {0, 3}},             // k = 0: zeros
    {{0, 2, 3}, {3, 4}},          // empty batch
    {{2, 3}, {3, 0}},             // n = 0
    {{0}, {0}},                   // empty dot: 0
    {{3, 1, 2, 2}, {1, 4, 2, 2}}  // two-sided batch broadcast
};

Tensor absolute(const Tensor& t) {
  Values v = t.to_vector<double>();
  for (auto& e : v) e = std::abs(e);
  return from_vector(v, t.shape());
}

using ms::test::ThreadGuard;

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE_TEMPLATE("matmul matches a naive loop", T, float, double, std::int32_t, std::int64_t,
                     float16_t, bfloat16_t, std::int8_t, std::uint8_t, std::int16_t) {
    const DType dt = dtype_of<T>;
    std::uint32_t seed = 1;
    for (const auto& [as, bs] : kShapes) {
      const Tensor a = random_tensor(dt, as, {}, seed++);
      check_matmul(a, random_tensor(dt, bs, {}, seed++));
    }
  }

  TEST_CASE_TEMPLATE("matmul of non-contiguous inputs", T, float, double, std::int32_t,
                     std::int64_t, float16_t, bfloat16_t) {
    const DType dt = dtype_of<T>;
    const auto r = [&](const Shape& s, std::uint32_t seed) {
      return random_tensor(dt, s, {}, seed);
    };
    // transposed on either side (passed to BLAS as transpose flags)
    check_matmul(r({4, 3}, 1).transpose(0, 1), r({5, 4}, 2).transpose(0, 1));
    check_matmul(r({40, 30}, 3).transpose(0, 1), r({40, 50}, 4));
    check_matmul(r({30, 40}, 5), r({50, 40}, 6).transpose(0, 1));
    // rows of a wider matrix (leading dimension > cols)
    check_matmul(r({6, 10}, 7).slice(1, 2, 9), r({7, 3}, 8));
    check_matmul(r({30, 50}, 9).slice(1, 5, 45), r({60, 70}, 10).slice(0, 10, 50).slice(1, 3, 33));
    // every other column: no BLAS layout, copied
    check_matmul(r({6, 10}, 11).slice(1, 0, 10, 2), r({5, 4}, 12));
    // a strided vector
    check_matmul(r({10}, 13).slice(0, 0, 10, 2), r({5, 3}, 14));
    check_matmul(r({4, 5}, 15), r({15}, 16).slice(0, 1, 15, 3));
    // broadcast views: stride-0 batch dims (not materialized) and matrix dims (copied)
    check_matmul(r({2, 4}, 17), r({1, 4, 5}, 18).expand({3, 4, 5}));
    check_matmul(r({1, 4}, 19).expand({3, 4}), r({4, 2}, 20));
    check_matmul(r({4}, 21).reshape({4, 1}).expand({4, 6}), r({6, 2}, 22));
    // permuted batch and transposed batched matrices
    check_matmul(r({4, 2, 3}, 23).permute({1, 0, 2}), r({3, 5}, 24));
    check_matmul(r({3, 5, 4}, 25).transpose(1, 2), r({3, 5, 6}, 26));
    check_matmul(r({3, 70, 40}, 27).transpose(1, 2), r({3, 70, 20}, 28));
    check_matmul(r({2, 3, 4, 5}, 29).slice(1, 0, 3, 2), r({5, 2}, 30));
  }

  TEST_CASE("matmul: results do not depend on the thread count (bitwise; with OpenBLAS up to it)") {
    ThreadGuard guard;
    const std::vector<std::pair<Shape, Shape>> cases = {{{300, 200}, {200, 250}},
                                                        {{16, 48, 40}, {16, 40, 56}},
                                                        {{3, 200, 150}, {150, 120}},
                                                        {{4, 256, 256}, {4, 256, 256}},
                                                        {{200, 300}, {300}}};
    for (DType dt : {float32, float64, int32, int64}) {
      std::uint32_t seed = 100;
      for (const auto& [as, bs] : cases) {
        const Tensor a = random_tensor(dt, as, {}, seed++), b = random_tensor(dt, bs, {}, seed++);
        set_num_threads(1);
        const Values one = matmul(a, b).to_vector<double>();
        set_num_threads(2);
        const Values two = matmul(a, b).to_vector<double>();
        CAPTURE(dt);
        CAPTURE(as);
        // Integer sums are exact; ms's own float split (blocks of C's columns,
        // or libxsmm's tasks) keeps every sum's order, so the "eigen" and
        // "libxsmm" backends are bitwise too.
        if (!dtype_is_float(dt) || std::string(kernels::gemm_backend().name) != "openblas") {
          CHECK(one == two);
          continue;
        }
        // OpenBLAS's threaded GEMM computes the elements at the edges of its
        // per-thread blocks with other kernels, so floats may differ by an ulp
        // or two of the sum of |products| (measured: <= 2.5e-7 of it in float32).
        const Ref scale = matmul_ref(absolute(a), absolute(b));
        const double rel = dt == float32 ? 1e-6 : 1e-14;
        std::size_t bad = 0;
        for (std::size_t i = 0; i < one.size(); ++i)
          bad += std::abs(one[i] - two[i]) > rel * scale.v[i];
        CHECK(bad == 0);
      }
    }
  }

  TEST_CASE(
      "matmul on bfloat16: float32 sums of the bfloat16 values, rounded once; its gradients") {
    ThreadGuard guard;
    // Products of two bfloat16 values are exact in float32; a k-term float32
    // sum is off by at most g = 1.01 k 2^-24 sum |a b|, and rounding it to
    // bfloat16 (8-bit significand) by at most 2^-8 of the sum.
    const auto check_close = [](const Tensor& got, const Tensor& a, const Tensor& b) {
      REQUIRE(got.dtype() == bfloat16);
      const Ref ref = matmul_ref(a, b), mag = matmul_ref(absolute(a), absolute(b));
      REQUIRE(got.shape() == ref.shape);
      const Values y = got.to_vector<double>();
      const double k = static_cast<double>(a.dim(-1));
      std::size_t far = 0;
      for (std::size_t i = 0; i < y.size(); ++i) {
        const double g = 1.01 * k * std::ldexp(1.0, -24) * mag.v[i];
        far += !(std::abs(y[i] - ref.v[i]) <= std::ldexp(1.0, -8) * (std::abs(ref.v[i]) + g) + g);
      }
      CHECK(far == 0);
    };
    std::uint32_t seed = 300;
    const auto r = [&](const Shape& s) { return random_tensor(bfloat16, s, {}, seed++); };
    for (int nt : {1, 2}) {
      set_num_threads(nt);
      // Dense's forward (x W^T, W a transposed view), odd sizes, a batch
      const std::vector<std::pair<Tensor, Tensor>> cases = {
          {r({64, 784}), r({512, 784}).transpose(0, 1)},
          {r({33, 127}), r({127, 17})},
          {r({127, 33}).transpose(0, 1), r({17, 127}).transpose(0, 1)},
          {r({3, 7, 33}), r({33, 255})},
          {r({2, 5, 17}), r({2, 17, 9})}};
      for (const auto& [a, b] : cases) {
        CAPTURE(nt);
        CAPTURE(a.shape());
        CAPTURE(b.shape());
        const Tensor y = matmul(a, b);
        check_close(y, a, b);
        // the vjp of matmul on bfloat16: dA = G B^T, dB = A^T G
        const Tensor g = r(y.shape());
        const Tensor outs[1] = {y}, grads[1] = {g}, ins[2] = {a, b};
        const ops::Attrs attrs;
        const std::vector<Tensor> d = ops::Matmul::vjp({}, {ins, outs, grads, attrs});
        REQUIRE(d.size() == 2);
        check_close(d[0], g, b.transpose(-1, -2));
        if (a.rank() == b.rank()) check_close(d[1], a.transpose(-1, -2), g);  // no batch sum
      }
    }
    // The bfloat16 kernels themselves: the same bits as gemm_bf16's float32
    // result rounded once.
    const Tensor a = r({64, 784}), w = r({512, 784});
    const Tensor y = matmul(a, w.transpose(0, 1));
    Tensor c = empty({64, 512}, float32);
    kernels::gemm_bf16(false, true, 64, 512, 784, 1.f, a.data<bfloat16_t>(), 784,
                       w.data<bfloat16_t>(), 784, 0.f, c.data<float>(), 512);
    CHECK(y.to_vector<double>() == c.to(bfloat16).to_vector<double>());
  }

  TEST_CASE("gemm_backend: says which kernels run and follows MS_GEMM") {
    const kernels::GemmBackend& b = kernels::gemm_backend();
    const std::string name = b.name;
    CHECK((name == "eigen" || name == "openblas" || name == "libxsmm"));
    CHECK(!b.detail.empty());
    // The process's choice is made once; MS_GEMM (when the test runner set it) wins.
    if (const char* env = std::getenv("MS_GEMM");
        env != nullptr && (std::string(env) == "eigen" || std::string(env) == "openblas"))
      CHECK(name == env);
    else if (name == "eigen")
      CHECK(b.detail.find("Eigen") != std::string::npos);
    else if (name == "libxsmm")
      CHECK(b.detail.find("libxsmm") != std::string::npos);
    else
      CHECK(b.detail.find("OpenBLAS") != std::string::npos);
  }

  TEST_CASE("matmul propagates NaN and Inf") {
    const double inf = std::numeric_limits<double>::infinity();
    for (std::int64_t size : {4, 40}) {  // Eigen's lazy product and BLAS
      Values av(static_cast<std::size_t>(size * size), 0.5), bv(av.size(), 0.25);
      av[static_cast<std::size_t>(1 * size + 2)] = std::nan("");
      av[static_cast<std::size_t>(3 * size + 0)] = inf;
      for (DType dt : {float32, float64}) {
        const Tensor y =
            matmul(from_vector(av, {size, size}).to(dt), from_vector(bv, {size, size}).to(dt));
        const Values v = y.to_vector<double>();
        for (std::int64_t j = 0; j < size; ++j) {
          CHECK(std::isnan(v[static_cast<std::size_t>(1 * size + j)]));
          CHECK(v[static_cast<std::size_t>(3 * size + j)] == inf);
          CHECK(v[static_cast<std::size_t>(0 * size + j)] == doctest::Approx(0.125 * size));
        }
      }
    }
  }

  TEST_CASE("matmul of rank-0 results and 1-D shapes") {
    const Tensor d = matmul(tensor({1.f, 2.f, 3.f}), tensor({4.f, 5.f, 6.f}));
    CHECK(d.rank() == 0);
    CHECK(d.item<float>() == 32.f);
    CHECK(matmul(ones({3}), ones({2, 3, 4})).shape() == Shape{2, 4});
    CHECK(matmul(ones({2, 3, 4}), ones({4})).shape() == Shape{2, 3});
    CHECK(matmul(ones({0}), ones({0})).item<float>() == 0.f);
    CHECK(matmul(ones({5, 0}), ones({0, 2})).to_vector<float>() == std::vector<float>(10, 0.f));
  }

  TEST_CASE("matmul errors") {
    CHECK_THROWS_WITH_AS(
        matmul(zeros({64, 784}), zeros({512, 10})),
        doctest::Contains("matmul: lhs [64, 784] and rhs [512, 10]: inner dims 784 and 512 differ"),
        ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({3}), zeros({4})),
                         doctest::Contains("inner dims 3 and 4 differ"), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 3}), zeros({4})),
                         doctest::Contains("inner dims 3 and 4 differ"), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(tensor(1.f), zeros({3})),
                         doctest::Contains("matmul: lhs is a rank-0 tensor"), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({3}), tensor(1.f)),
                         doctest::Contains("matmul: rhs is a rank-0 tensor"), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 3, 4}), zeros({5, 4, 6})),
                         doctest::Contains("batch dims [2] and [5] do not broadcast"), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 2, 3, 4}), zeros({3, 1, 4, 6})),
                         doctest::Contains("(2 vs 3 at batch axis -2, neither is 1)"), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 2}), zeros({2, 2}, float64)),
                         doctest::Contains("lhs dtype Float32 and rhs dtype Float64 differ"),
                         TypeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 2}, bool_), zeros({2, 2}, bool_)),
                         doctest::Contains("matmul: dtype Bool is not supported"), TypeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 2}, complex64), zeros({2, 2}, complex64)),
                         doctest::Contains("dtype Complex64 is not supported"), TypeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 2}, int4), zeros({2, 2}, int4)),
                         doctest::Contains("dtype Int4 is not supported"), TypeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 2}, uint16), zeros({2, 2}, uint16)),
                         doctest::Contains("dtype UInt16 is not supported"), TypeError);
    CHECK_THROWS_AS(matmul(Tensor(), zeros({2})), ValueError);
  }

  TEST_CASE("matmul: huge sizes fail before allocating") {
    const std::int64_t two31 = std::int64_t{1} << 31, two40 = std::int64_t{1} << 40;
    // [2^40, 1] x [1, 2^40]: the output's element count overflows int64
    CHECK_THROWS_WITH_AS(matmul(zeros({1, 1}).expand({two40, 1}), zeros({1, 1}).expand({1, two40})),
                         doctest::Contains("matmul"), ValueError);
    CHECK_THROWS_AS(matmul(zeros({1, 1}).expand({two31 + 1, 1}), zeros({1, 1}).expand({1, two40})),
                    ValueError);
    // near 2^31 the sizes are valid but over the allocation cap: MemoryError, not a crash
    set_max_alloc_bytes(std::int64_t{1} << 20);
    const auto before = memory_stats().live_bytes;
    CHECK_THROWS_AS(matmul(zeros({1, 1}).expand({two31 + 1, 1}), zeros({1, 4})), MemoryError);
    CHECK_THROWS_AS(matmul(zeros({1}).expand({two31 + 3}), zeros({1}).expand({two31 + 3})),
                    MemoryError);
    CHECK(memory_stats().live_bytes == before);
    set_max_alloc_bytes(0);
  }

  TEST_CASE_TEMPLATE("kernels::gemm with transposes, alpha, beta and leading dims", T, float,
                     double, std::int32_t, std::int64_t) {
    std::mt19937 gen(7);
    std::uniform_int_distribution<int> val(-3, 3);
    for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
             {3, 4, 5}, {1, 7, 9}, {40, 30, 50}, {65, 1, 33}, {5, 6, 0}}) {
      for (int flags = 0; flags < 4; ++flags) {
        const bool ta = flags & 1, tb = flags & 2;
        const std::int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        const std::int64_t lda = ac + 2, ldb = bc + 1, ldc = n + 3;
        std::vector<T> a(static_cast<std::size_t>(std::max<std::int64_t>(ar * lda, 1))),
            b(static_cast<std::size_t>(std::max<std::int64_t>(br * ldb, 1))),
            c(static_cast<std::size_t>(m * ldc));
        for (auto& e : a) e = static_cast<T>(val(gen));
        for (auto& e : b) e = static_cast<T>(val(gen));
        for (auto& e : c) e = static_cast<T>(val(gen));
        for (const T beta : {T(0), T(1), T(2)}) {
          std::vector<T> got = c;
          kernels::gemm<T>(ta, tb, m, n, k, T(2), a.data(), lda, b.data(), ldb, beta, got.data(),
                           ldc);
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < ldc; ++j) {
              const auto u = static_cast<std::size_t>(i * ldc + j);
              if (j >= n) {
                CHECK(got[u] == c[u]);  // padding untouched
                continue;
              }
              double s = 0;
              for (std::int64_t p = 0; p < k; ++p)
                s += static_cast<double>(
                         a[static_cast<std::size_t>(ta ? p * lda + i : i * lda + p)]) *
                     static_cast<double>(
                         b[static_cast<std::size_t>(tb ? j * ldb + p : p * ldb + j)]);
              CAPTURE(flags);
              CHECK(static_cast<double>(got[u]) == 2 * s + static_cast<double>(beta) * c[u]);
            }
        }
      }
    }
    if constexpr (std::is_floating_point_v<T>) {  // beta = 0 never reads C
      const T nan = std::numeric_limits<T>::quiet_NaN();
      std::vector<T> a(6, T(1)), b(6, T(1)), c(4, nan);
      kernels::gemm<T>(false, false, 2, 2, 3, T(1), a.data(), 3, b.data(), 2, T(0), c.data(), 2);
      CHECK(c == std::vector<T>(4, T(3)));
      // The matrix-vector products (gemv) too: a row and a column of C.
      std::vector<T> row(3, nan), col(3, nan);
      kernels::gemm<T>(false, false, 1, 3, 2, T(1), a.data(), 2, b.data(), 3, T(0), row.data(), 3);
      kernels::gemm<T>(false, false, 3, 1, 2, T(1), a.data(), 2, b.data(), 1, T(0), col.data(), 1);
      CHECK(row == std::vector<T>(3, T(2)));
      CHECK(col == std::vector<T>(3, T(2)));
    }
  }
}
