// Reductions and the softmax family against naive double-precision loops written here.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <ms/kernels/parallel.hpp>
#include <ms/ops/op.hpp>
#include <ms/ops/reduce.hpp>

#include "ops_test_util.hpp"
#include "random.hpp"
#include "thread_guard.hpp"

using namespace ms;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using ms_test::kI64Max;
using ms_test::kI64Min;
using ms_test::kInf;

using Values = std::vector<double>;
using Axes = std::vector<std::int64_t>;
using ms::test::bitwise_equal;
using ms::test::check_thread_invariant;
using ms::test::random_tensor;

/// Test values: uniform in [-2, 2] for floats, integers in [-5, 5].
constexpr test::Range kValues{-2, 2, -5, 5};

/// Factors from {-1, 1, 1, 2} (floats: {-1, 1, 0.5, 2}): products of 120 of them stay far
/// from overflow in int64 and exact in float.
template <class T>
Tensor prod_factors(const Shape& shape, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(0, 3);
  const double f[] = {-1.0, 1.0, std::is_floating_point_v<T> ? 0.5 : 1.0, 2.0};
  std::vector<T> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& e : v) e = static_cast<T>(f[d(gen)]);
  return from_vector(v, shape);
}

Axes normalized(Axes axes, std::int64_t rank) {
  if (axes.empty())
    for (std::int64_t i = 0; i < rank; ++i) axes.push_back(i);
  for (auto& a : axes)
    if (a < 0) a += rank;
  std::sort(axes.begin(), axes.end());
  return axes;
}

/// The elements of row-major `x` grouped by output position (row-major over the kept
/// axes); each group in row-major order of the reduced axes.
std::vector<Values> groups(const Values& x, const Shape& shape, const Axes& axes) {
  const std::int64_t rank = shape.rank();
  std::vector<bool> red(static_cast<std::size_t>(rank), false);
  for (auto a : axes) red[static_cast<std::size_t>(a)] = true;
  std::int64_t nout = 1;
  for (std::int64_t d = 0; d < rank; ++d)
    if (!red[static_cast<std::size_t>(d)]) nout *= shape[static_cast<std::size_t>(d)];
  std::vector<Values> g(static_cast<std::size_t>(nout));
  std::vector<std::int64_t> idx(static_cast<std::size_t>(rank), 0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::int64_t o = 0;
    for (std::int64_t d = 0; d < rank; ++d)
      if (!red[static_cast<std::size_t>(d)])
        o = o * shape[static_cast<std::size_t>(d)] + idx[static_cast<std::size_t>(d)];
    g[static_cast<std::size_t>(o)].push_back(x[i]);
    for (std::int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[static_cast<std::size_t>(d)] < shape[static_cast<std::size_t>(d)]) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
  }
  return g;
}

Shape out_shape(const Shape& shape, const Axes& axes, bool keepdims) {
  Shape s;
  for (std::int64_t d = 0; d < shape.rank(); ++d) {
    const bool r = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!r)
      s.push_back(shape[static_cast<std::size_t>(d)]);
    else if (keepdims)
      s.push_back(1);
  }
  return s;
}

using RefFn = std::function<double(const Values&)>;

/// The groups of `x` for `axes`, made once for several references over the same axes.
struct Grouped {
  Shape shape;
  Axes axes;
  std::vector<Values> groups;
};

Grouped grouped(const Tensor& x, const Axes& axes_in) {
  const Axes axes = normalized(axes_in, x.rank());
  return {x.shape(), axes, groups(x.to_vector<double>(), x.shape(), axes)};
}

Tensor reference(const Grouped& g, bool keepdims, const RefFn& f) {
  Values out;
  for (const Values& v : g.groups) out.push_back(f(v));
  return from_vector(out, out_shape(g.shape, g.axes, keepdims));
}

Tensor reference(const Tensor& x, const Axes& axes, bool keepdims, const RefFn& f) {
  return reference(grouped(x, axes), keepdims, f);
}

double ref_sum(const Values& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}
double ref_prod(const Values& v) {
  double s = 1;
  for (double e : v) s *= e;
  return s;
}
double ref_mean(const Values& v) { return v.empty() ? kNaN : ref_sum(v) / double(v.size()); }
double ref_max(const Values& v) {
  double m = -kInf;
  for (double e : v) m = (std::isnan(e) || std::isnan(m)) ? kNaN : std::max(m, e);
  return m;
}
double ref_min(const Values& v) {
  double m = kInf;
  for (double e : v) m = (std::isnan(e) || std::isnan(m)) ? kNaN : std::min(m, e);
  return m;
}
RefFn ref_var(std::int64_t ddof, bool sq) {
  return [ddof, sq](const Values& v) {
    const double mu = ref_mean(v);
    double s = 0;
    for (double e : v) s += (e - mu) * (e - mu);
    const double n = double(v.size()) - double(ddof);
    const double r = n > 0 ? s / n : (s > 0 ? kInf : kNaN);
    return sq ? std::sqrt(r) : r;
  };
}
double ref_lse(const Values& v) {
  double s = 0;
  for (double e : v) s += std::exp(e);
  return std::log(s);
}
RefFn ref_arg(bool is_max) {
  return [is_max](const Values& v) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < v.size(); ++i) {
      if (std::isnan(v[best])) break;
      if (std::isnan(v[i]) || (is_max ? v[i] > v[best] : v[i] < v[best])) best = i;
    }
    return double(best);
  };
}

/// Same shape, dtype, and values within tolerance (NaNs equal).
void check_values(const Tensor& got, const Tensor& want, DType dtype, double rtol, double atol) {
  CHECK(got.dtype() == dtype);
  REQUIRE(got.shape() == want.shape());
  CHECK(allclose(got, want, rtol, atol, /*equal_nan=*/true));
}

struct Case {
  Shape shape;
  Axes axes;
};

const std::vector<Case> kCases = {
    {{7}, {}},
    {{7}, {0}},
    {{3, 5}, {}},
    {{3, 5}, {0}},
    {{3, 5}, {1}},
    {{3, 5}, {-1}},
    {{3, 5}, {0, 1}},
    {{4, 3, 5}, {1}},
    {{4, 3, 5}, {0, 2}},
    {{4, 3, 5}, {2, 0}},
    {{4, 3, 5}, {-2, -1}},
    {{2, 3, 4, 5}, {0, 2}},
    {{2, 3, 4, 5}, {1, 3}},
    {{2, 1, 4, 5}, {1}},
    {{2, 1, 4, 5}, {0, 1}},
    {{1, 300, 3}, {1}},
    {{600, 40}, {0}},
    {{40, 600}, {1}},
    {{5, 1000, 7}, {1}},
    {{3, 70000}, {1}},
    {{70000, 3}, {0}},
    {{100001}, {}},
};

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("logsumexp and softmax of float64 -inf entries: -inf and exact zeros") {
    const double inf = std::numeric_limits<double>::infinity();
    for (std::int64_t n : {3, 16, 1000}) {  // the scalar tail and the vector body
      CAPTURE(n);
      const Tensor all = full({n}, -inf, float64);
      CHECK(logsumexp(all).item<double>() == -inf);
      std::vector<double> v(static_cast<std::size_t>(n), -inf);
      v[0] = 0;  // one kept entry
      const std::vector<double> w =
          softmax(from_vector(v, Shape{1, n}), 1).contiguous().to_vector<double>();
      CHECK(w[0] == 1.0);
      for (std::int64_t i = 1; i < n; ++i) CHECK(w[static_cast<std::size_t>(i)] == 0.0);
    }
  }

  TEST_CASE_TEMPLATE("sum, prod, max, min, all, any match a naive loop", T, float, double,
                     std::int32_t, std::int64_t) {
    const DType dt = dtype_of<T>;
    const bool is_float = std::is_floating_point_v<T>;
    const DType sum_dt = is_float ? dt : int64;
    const double rtol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
    std::uint32_t seed = 1;
    for (const Case& c : kCases) {
      for (bool keep : {false, true}) {
        CAPTURE(c.shape);
        CAPTURE(Shape(c.axes));
        CAPTURE(keep);
        const Tensor x = random_tensor(dtype_of<T>, c.shape, kValues, seed++);
        const Grouped g = grouped(x, c.axes);
        check_values(sum(x, c.axes, keep), reference(g, keep, ref_sum), sum_dt, rtol, 1e-6);
        check_values(max(x, c.axes, keep), reference(g, keep, ref_max), dt, 0, 0);
        check_values(min(x, c.axes, keep), reference(g, keep, ref_min), dt, 0, 0);
        // all/any: a third of the elements zero
        Values v = x.to_vector<double>();
        for (std::size_t i = 0; i < v.size(); i += 3) v[i] = 0;
        const Tensor z = from_vector(v, c.shape).to(dt);
        const Grouped gz = grouped(z, c.axes);
        check_values(all(z, c.axes, keep),
                     reference(gz, keep,
                               [](const Values& g) {
                                 return double(std::all_of(g.begin(), g.end(),
                                                           [](double e) { return e != 0; }));
                               }),
                     bool_, 0, 0);
        check_values(any(z, c.axes, keep),
                     reference(gz, keep,
                               [](const Values& g) {
                                 return double(std::any_of(g.begin(), g.end(),
                                                           [](double e) { return e != 0; }));
                               }),
                     bool_, 0, 0);
        if (shape_numel(c.shape) <= 120) {  // about 120 / 4 doublings at most
          const Tensor f = prod_factors<T>(c.shape, seed++);
          check_values(prod(f, c.axes, keep), reference(f, c.axes, keep, ref_prod), sum_dt,
                       is_float ? 1e-5 : 0, 0);
        }
      }
    }
  }

  TEST_CASE_TEMPLATE("mean, var, std, logsumexp match a naive loop", T, float, double) {
    const DType dt = dtype_of<T>;
    const double rtol = std::is_same_v<T, float> ? 2e-5 : 1e-11;
    std::uint32_t seed = 100;
    for (const Case& c : kCases) {
      for (bool keep : {false, true}) {
        CAPTURE(c.shape);
        CAPTURE(Shape(c.axes));
        const Tensor x = random_tensor(dtype_of<T>, c.shape, kValues, seed++);
        const Grouped g = grouped(x, c.axes);
        check_values(mean(x, c.axes, keep), reference(g, keep, ref_mean), dt, rtol, 1e-6);
        for (std::int64_t ddof : {0, 1}) {
          check_values(var(x, c.axes, ddof, keep), reference(g, keep, ref_var(ddof, false)), dt,
                       rtol, 1e-6);
          check_values(ms::std(x, c.axes, ddof, keep), reference(g, keep, ref_var(ddof, true)), dt,
                       rtol, 1e-6);
        }
        check_values(logsumexp(x, c.axes, keep), reference(g, keep, ref_lse), dt, rtol, 1e-6);
      }
    }
  }

  TEST_CASE_TEMPLATE("argmax and argmin match a naive loop", T, float, double, std::int32_t,
                     std::int64_t) {
    std::uint32_t seed = 200;
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{4, 3, 5}, Shape{2, 3, 4, 5},
                               Shape{5, 1000, 7}, Shape{3, 70000}, Shape{70000, 3}}) {
      // integers in [-5, 5] have many ties: the first index must win
      const Tensor x = random_tensor(dtype_of<T>, shape, kValues, seed++);
      for (std::int64_t axis = -shape.rank(); axis < shape.rank(); ++axis) {
        const Grouped g = grouped(x, {axis});
        for (bool keep : {false, true}) {
          CAPTURE(shape);
          CAPTURE(axis);
          check_values(argmax(x, axis, keep), reference(g, keep, ref_arg(true)), int64, 0, 0);
          check_values(argmin(x, axis, keep), reference(g, keep, ref_arg(false)), int64, 0, 0);
        }
      }
      const Tensor am = argmax(x), an = argmin(x);
      CHECK(am.rank() == 0);
      CHECK(am.item<std::int64_t>() == std::int64_t(ref_arg(true)(x.to_vector<double>())));
      CHECK(an.item<std::int64_t>() == std::int64_t(ref_arg(false)(x.to_vector<double>())));
      // flattened over a transposed view: the index is into the view's row-major order
      if (shape.rank() >= 2) {
        const Tensor t = x.transpose(0, shape.rank() - 1);
        CHECK(argmax(t).item<std::int64_t>() == std::int64_t(ref_arg(true)(t.to_vector<double>())));
        CHECK(argmin(t).item<std::int64_t>() ==
              std::int64_t(ref_arg(false)(t.to_vector<double>())));
      }
    }
  }

  TEST_CASE("non-contiguous inputs: transposed, sliced, expanded, permuted") {
    const Tensor base = random_tensor(float32, {6, 8, 10}, kValues, 7);
    const std::vector<Tensor> views = {
        base.transpose(0, 2),                               // [10, 8, 6]
        base.permute({1, 2, 0}),                            // [8, 10, 6]
        base.slice(2, 1, 10, 3),                            // [6, 8, 3] step 3
        base.slice(0, 2, 5).slice(1, 0, 8, 2),              // [3, 4, 10]
        base.select(1, 3).unsqueeze(1).expand({6, 5, 10}),  // stride-0 axis
    };
    for (const Tensor& v : views) {
      CHECK_FALSE(v.is_contiguous());
      for (const Axes& axes :
           {Axes{}, Axes{0}, Axes{1}, Axes{2}, Axes{0, 2}, Axes{0, 1}, Axes{1, 2}}) {
        for (bool keep : {false, true}) {
          CAPTURE(v.shape());
          CAPTURE(v.strides());
          CAPTURE(Shape(axes));
          check_values(sum(v, axes, keep), reference(v, axes, keep, ref_sum), float32, 1e-5, 1e-5);
          check_values(max(v, axes, keep), reference(v, axes, keep, ref_max), float32, 0, 0);
          check_values(mean(v, axes, keep), reference(v, axes, keep, ref_mean), float32, 1e-5,
                       1e-6);
          check_values(var(v, axes, 1, keep), reference(v, axes, keep, ref_var(1, false)), float32,
                       1e-5, 1e-6);
          check_values(logsumexp(v, axes, keep), reference(v, axes, keep, ref_lse), float32, 1e-5,
                       1e-6);
        }
      }
      for (std::int64_t axis = 0; axis < 3; ++axis) {
        check_values(argmax(v, axis), reference(v, {axis}, false, ref_arg(true)), int64, 0, 0);
        check_values(argmin(v, axis), reference(v, {axis}, false, ref_arg(false)), int64, 0, 0);
      }
    }
  }

  TEST_CASE("reductions over the last dim of heads split out of [B, T, H, D] read them in place") {
    // Kept dims whose memory order is not their logical order (T outside H)
    // do not merge into one; the reduction walks them where they are, and
    // each output reads its run as the dense copy's does: the same bits.
    // Kept groups (B, T, H do not merge: their output strides do not follow
    // their memory order): three, three, four, five (more than are walked in
    // place: copied first), three (a slice), and a size whose outputs are
    // split among threads (SpreadWalk starting past output 0).
    const Tensor bthd = random_tensor(float32, {3, 5, 4, 40}, kValues, 61);
    const Tensor packed = random_tensor(float32, {2, 5, 3, 4, 8}, kValues, 62);
    const Tensor d64 = random_tensor(float64, {2, 3, 4, 5, 6, 9}, kValues, 63);
    const Tensor big = random_tensor(float32, {4, 128, 6, 32}, kValues, 64);
    const std::vector<Tensor> views = {
        bthd.permute({0, 2, 1, 3}),
        packed.select(2, 1).permute({0, 2, 1, 3}),  // rows 96 apart
        d64.permute({4, 2, 0, 1, 3, 5}),
        d64.permute({4, 3, 2, 1, 0, 5}),
        bthd.permute({0, 2, 1, 3}).slice(1, 1, 4, 2),
        big.permute({0, 2, 1, 3}),
    };
    for (const Tensor& v : views) {
      CAPTURE(v.shape());
      CAPTURE(v.strides());
      const Tensor c = v.contiguous();
      for (bool keep : {false, true}) {
        CHECK(bitwise_equal(sum(v, {-1}, keep), sum(c, {-1}, keep)));
        CHECK(bitwise_equal(mean(v, {-1}, keep), mean(c, {-1}, keep)));
        CHECK(bitwise_equal(max(v, {-1}, keep), max(c, {-1}, keep)));
        CHECK(bitwise_equal(prod(v, {-1}, keep), prod(c, {-1}, keep)));
        CHECK(bitwise_equal(var(v, {-1}, 1, keep), var(c, {-1}, 1, keep)));
        CHECK(bitwise_equal(logsumexp(v, {-1}, keep), logsumexp(c, {-1}, keep)));
      }
      CHECK(bitwise_equal(argmax(v, -1), argmax(c, -1)));
      check_values(sum(v, {-1}), reference(v, {-1}, false, ref_sum), v.dtype(), 1e-6, 1e-6);
      check_thread_invariant([&] { return sum(v, {-1}); });
      check_thread_invariant([&] { return var(v, {-1}); });
    }
  }

  TEST_CASE("dtype rules follow PyTorch") {
    const Tensor i32 = tensor({1, 2, 3}, int32);
    CHECK(sum(i32).dtype() == int64);
    CHECK(sum(i32).item<std::int64_t>() == 6);
    CHECK(prod(i32).dtype() == int64);
    CHECK(prod(i32).item<std::int64_t>() == 6);
    CHECK(max(i32).dtype() == int32);
    CHECK(min(tensor({4, 2, 9}, uint8)).dtype() == uint8);
    CHECK(min(tensor({4, 2, 9}, uint8)).item<int>() == 2);
    CHECK(argmax(i32).dtype() == int64);
    CHECK(all(i32).dtype() == bool_);
    CHECK(any(tensor({0.f, 0.f})).item<bool>() == false);
    const Tensor b = tensor({true, false, true, true});
    CHECK(sum(b).dtype() == int64);
    CHECK(sum(b).item<std::int64_t>() == 3);
    CHECK(prod(b).item<std::int64_t>() == 0);
    CHECK(max(b).item<bool>() == true);
    CHECK(all(b).item<bool>() == false);
    CHECK(any(b).item<bool>() == true);
    // uint64 max/min compare as unsigned
    const Tensor u = from_vector(std::vector<std::uint64_t>{1, std::uint64_t(1) << 63, 5});
    CHECK(max(u).item<std::uint64_t>() == (std::uint64_t(1) << 63));
    CHECK(argmin(u).item<std::int64_t>() == 0);
    // int64 sums wrap like two's complement (no UB): INT64_MAX + 1 = INT64_MIN
    const Tensor w = from_vector(std::vector<std::int64_t>{kI64Max, 1});
    CHECK(sum(w).item<std::int64_t>() == kI64Min);
    // logsumexp promotes integers to float32
    const Tensor l = logsumexp(tensor({0, 0}, int32));
    CHECK(l.dtype() == float32);
    CHECK(l.item<double>() == doctest::Approx(std::log(2.0)));
    // all/any accept complex: nonzero is true
    const Tensor cz = tensor({0.0, 1.0}).to(complex64);
    CHECK(any(cz).item<bool>() == true);
    CHECK(all(cz).item<bool>() == false);
  }

  TEST_CASE_TEMPLATE("float16 and bfloat16 compute in float32 and round on store", T, float16_t,
                     bfloat16_t) {
    const DType dt = dtype_of<T>;
    const Tensor xf = random_tensor(float32, {4, 33}, kValues, 11);
    const Tensor x = xf.to(dt);
    const Tensor xr = x.to(float32);  // the values the op really sees
    const double tol = dt == float16 ? 2e-3 : 1e-2;
    check_values(sum(x, {1}), reference(xr, {1}, false, ref_sum), dt, tol, tol);
    check_values(mean(x, {0}, true), reference(xr, {0}, true, ref_mean), dt, tol, tol);
    check_values(max(x, {1}), reference(xr, {1}, false, ref_max), dt, 0, 0);
    check_values(var(x, {1}, 1), reference(xr, {1}, false, ref_var(1, false)), dt, tol, tol);
    check_values(logsumexp(x, {1}), reference(xr, {1}, false, ref_lse), dt, tol, tol);
    check_values(argmax(x, 1), reference(xr, {1}, false, ref_arg(true)), int64, 0, 0);
    const Tensor s = softmax(x, 1);
    CHECK(s.dtype() == dt);
    CHECK(allclose(s.to(float32), softmax(xr, 1), tol, tol));
    // the sum of 4096 halves of 1 is exact with a float32 accumulator (a half one stops at 2048)
    CHECK(sum(ones({4096}, dt)).item<float>() == 4096.f);
  }

  TEST_CASE("float32 sums are accurate (float64 accumulation)") {
    const std::int64_t n = 1 << 22;
    const Tensor x = full({n}, 0.1f, float32);
    const double want = double(0.1f) * double(n);
    // a naive float32 loop is off by ~1e-2 relative here
    CHECK(std::abs(sum(x).item<double>() - want) / want < 1e-7);
    CHECK(std::abs(mean(x).item<double>() - double(0.1f)) < 1e-8);
    // as columns too
    const Tensor c = full({n / 4, 4}, 0.1f, float32);
    const Tensor cs = sum(c, {0});
    for (float v : cs.to_vector<float>()) CHECK(std::abs(v - want / 4) / (want / 4) < 1e-7);
    // var of values with a large offset: two passes keep it exact-ish
    const Tensor off = from_vector(std::vector<float>{10000.f, 10001.f, 10002.f, 10003.f});
    CHECK(var(off).item<double>() == doctest::Approx(1.25).epsilon(1e-6));
  }

  TEST_CASE("float32 sums and means of short rows are the float64 sum rounded once") {
    // Rows shorter, as long as and longer than a vector of 16, with and
    // without a partial last vector: a dropped or doubled element shows in
    // the low bits.
    for (const std::int64_t n : {1, 7, 15, 16, 17, 32, 33, 100, 300}) {
      CAPTURE(n);
      const Tensor x = random_tensor(float32, {37, n}, kValues, 31);
      const std::vector<float> v = x.to_vector<float>();
      const std::vector<float> s = sum(x, {-1}).to_vector<float>();
      const std::vector<float> m = mean(x, {-1}).to_vector<float>();
      for (std::int64_t r = 0; r < 37; ++r) {
        double want = 0;
        for (std::int64_t j = 0; j < n; ++j) want += double(v[std::size_t(r * n + j)]);
        CHECK(s[std::size_t(r)] == float(want));
        CHECK(m[std::size_t(r)] == float(want / double(n)));
      }
    }
  }

  TEST_CASE("results do not depend on the thread count") {
    const Tensor big_row = random_tensor(float32, {3, 200000}, kValues, 21);
    const Tensor big_col = random_tensor(float32, {200000, 3}, kValues, 22);
    const Tensor mid = random_tensor(float64, {64, 3000, 5}, kValues, 23);
    const Tensor wide = random_tensor(float32, {2000, 300}, kValues, 24);
    for (const Tensor& x : {big_row, big_col, mid, wide}) {
      for (const Axes& axes : {Axes{}, Axes{0}, Axes{1}, Axes{-1}}) {
        CAPTURE(x.shape());
        CAPTURE(Shape(axes));
        check_thread_invariant([&] { return sum(x, axes); });
        check_thread_invariant([&] { return mean(x, axes); });
        check_thread_invariant([&] { return var(x, axes, 1); });
        check_thread_invariant([&] { return logsumexp(x, axes); });
        check_thread_invariant([&] { return max(x, axes); });
        check_thread_invariant([&] { return prod(x, axes); });
      }
      check_thread_invariant([&] { return argmax(x, 0); });
      check_thread_invariant([&] { return argmin(x, -1); });
      check_thread_invariant([&] { return argmax(x); });
      check_thread_invariant([&] { return softmax(x, 0); });
      check_thread_invariant([&] { return log_softmax(x, -1); });
      check_thread_invariant([&] { return sum(x.transpose(0, 1), {1}); });
    }
    const Tensor ints = random_tensor(int32, {500, 700}, kValues, 25);
    check_thread_invariant([&] { return sum(ints, {0}); });
    check_thread_invariant([&] { return sum(ints); });
  }

  TEST_CASE_TEMPLATE("[R][K][R] layouts: statistics over (0, 2) as for NCHW", T, float, double) {
    const DType dt = dtype_of<T>;
    const double rtol = std::is_same_v<T, float> ? 1e-5 : 1e-11;
    std::uint32_t seed = 400;
    // many outputs with short runs; few outputs with runs longer than a chunk
    for (const Shape& shape : {Shape{40, 70, 1000}, Shape{3, 2, 40000}, Shape{5, 33, 7}}) {
      CAPTURE(shape);
      const Tensor x = random_tensor(dtype_of<T>, shape, kValues, seed++);
      const Axes axes{0, 2};
      const Grouped g = grouped(x, axes);
      check_values(sum(x, axes), reference(g, false, ref_sum), dt, rtol, 1e-6);
      check_values(max(x, axes, true), reference(g, true, ref_max), dt, 0, 0);
      check_values(var(x, axes, 1), reference(g, false, ref_var(1, false)), dt, rtol, 1e-6);
      check_values(logsumexp(x, axes), reference(g, false, ref_lse), dt, rtol, 1e-6);
      check_thread_invariant([&] { return sum(x, axes); });
      check_thread_invariant([&] { return var(x, axes); });
      check_thread_invariant([&] { return logsumexp(x, axes); });
    }
  }

  TEST_CASE("argmax and argmin: first occurrence, NaN wins, across chunk boundaries") {
    Values v(100000, 1.0);
    v[40000] = 5.0;
    v[70000] = 5.0;
    v[99999] = 5.0;
    const Tensor x = from_vector(v).to(float32);
    CHECK(argmax(x).item<std::int64_t>() == 40000);
    CHECK(argmax(x, 0).item<std::int64_t>() == 40000);
    CHECK(argmin(x).item<std::int64_t>() == 0);
    v[80000] = kNaN;
    v[90000] = kNaN;
    const Tensor xn = from_vector(v).to(float32);
    CHECK(argmax(xn).item<std::int64_t>() == 80000);
    CHECK(argmin(xn).item<std::int64_t>() == 80000);
    CHECK(std::isnan(max(xn).item<float>()));
    CHECK(std::isnan(min(xn).item<float>()));
    // the same as columns
    const Tensor col = xn.reshape({100000, 1}).expand({100000, 3}).contiguous();
    CHECK(argmax(col, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>(3, 80000));
    CHECK(argmin(xn.reshape({-1, 1}), 0).item<std::int64_t>() == 80000);
    // small
    const Tensor s = tensor({1.f, NAN, 3.f, NAN});
    CHECK(argmax(s).item<std::int64_t>() == 1);
    CHECK(argmin(s).item<std::int64_t>() == 1);
    CHECK(argmax(tensor({-INFINITY, -INFINITY})).item<std::int64_t>() == 0);
    CHECK(argmin(tensor({3, 1, 1, 3})).item<std::int64_t>() == 1);
  }

  TEST_CASE("NaN and Inf propagation") {
    const Tensor x = tensor({{1.f, NAN, 3.f}, {1.f, 2.f, INFINITY}, {-INFINITY, -INFINITY, 0.f}});
    const auto mx = max(x, {1}).to_vector<float>();
    CHECK(std::isnan(mx[0]));
    CHECK(mx[1] == INFINITY);
    CHECK(mx[2] == 0.f);
    const auto mn = min(x, {1}).to_vector<float>();
    CHECK(std::isnan(mn[0]));
    CHECK(mn[2] == -INFINITY);
    const auto s = sum(x, {1}).to_vector<float>();
    CHECK(std::isnan(s[0]));
    CHECK(s[1] == INFINITY);
    CHECK(s[2] == -INFINITY);
    CHECK(std::isnan(sum(tensor({INFINITY, -INFINITY})).item<float>()));
    const auto l = logsumexp(x, {1}).to_vector<float>();
    CHECK(std::isnan(l[0]));
    CHECK(l[1] == INFINITY);
    CHECK(l[2] == doctest::Approx(0.0));
    CHECK(logsumexp(tensor({-INFINITY, -INFINITY})).item<float>() == -INFINITY);
    // logsumexp is stable for large values: no overflow to inf
    CHECK(logsumexp(tensor({1000.f, 1000.f})).item<double>() ==
          doctest::Approx(1000 + std::log(2.0)));
    CHECK(std::isnan(var(tensor({1.f, INFINITY})).item<float>()));
    CHECK(std::isnan(mean(tensor({1.0, NAN})).item<double>()));
    CHECK(any(tensor({0.f, NAN})).item<bool>() == true);  // NaN is nonzero
    // softmax: -inf entries get probability 0; a row of all -inf, or with NaN, is NaN
    const Tensor p = softmax(tensor({{0.f, -INFINITY}, {-INFINITY, -INFINITY}, {NAN, 1.f}}));
    const auto pv = p.to_vector<float>();
    CHECK(pv[0] == 1.f);
    CHECK(pv[1] == 0.f);
    CHECK(std::isnan(pv[2]));
    CHECK(std::isnan(pv[3]));
    CHECK(std::isnan(pv[4]));
    CHECK(std::isnan(pv[5]));
    const auto lp = log_softmax(tensor({0.0, -INFINITY})).to_vector<double>();
    CHECK(lp[0] == 0.0);
    CHECK(lp[1] == -INFINITY);
    // stable for large logits
    const auto big = softmax(tensor({1000.f, 1000.f})).to_vector<float>();
    CHECK(big[0] == doctest::Approx(0.5));
  }

  TEST_CASE("empty tensors") {
    const Tensor e = zeros({0, 3});
    CHECK(sum(e, {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
    CHECK(sum(e).item<float>() == 0.f);
    CHECK(prod(e, {0}).to_vector<float>() == std::vector<float>{1, 1, 1});
    CHECK(sum(zeros({0}, int32)).item<std::int64_t>() == 0);
    CHECK(prod(zeros({0}, int32)).item<std::int64_t>() == 1);
    CHECK(all(e).item<bool>() == true);
    CHECK(any(e).item<bool>() == false);
    for (float m : mean(e, {0}).to_vector<float>()) CHECK(std::isnan(m));
    CHECK(std::isnan(var(e).item<float>()));
    CHECK(std::isnan(ms::std(e, {0}, 0).to_vector<float>()[1]));
    CHECK(logsumexp(e, {0}).to_vector<float>() == std::vector<float>(3, -INFINITY));
    // reducing a non-empty axis of an empty tensor gives an empty result
    CHECK(sum(e, {1}).shape() == Shape{0});
    CHECK(max(e, {1}).shape() == Shape{0});
    CHECK(max(e, {1}, true).shape() == Shape{0, 1});
    CHECK(argmax(e, 1).shape() == Shape{0});
    CHECK(argmin(e, 1, true).shape() == Shape{0, 1});
    CHECK(sum(e, {0}, true).shape() == Shape{1, 3});
    CHECK(softmax(e, 0).shape() == Shape{0, 3});
    CHECK(log_softmax(e, 1).shape() == Shape{0, 3});
    // max/min/argmax/argmin of nothing have no identity: ValueError naming the op, as PyTorch
    CHECK_THROWS_WITH_AS(max(e, {0}), doctest::Contains("max: cannot reduce over axis 0 of size 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(min(e), doctest::Contains("min: cannot reduce over axis 0 of size 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(argmax(e, 0), doctest::Contains("argmax: cannot reduce over axis 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(argmin(e), doctest::Contains("argmin: cannot reduce over axis 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(max(zeros({2, 0}), {-1}), doctest::Contains("input shape [2, 0]"),
                         ValueError);
  }

  TEST_CASE("rank-0 tensors") {
    const Tensor s = tensor(3.5);
    CHECK(sum(s).item<double>() == 3.5);
    CHECK(sum(s).rank() == 0);
    CHECK(sum(s, {0}).item<double>() == 3.5);
    CHECK(sum(s, {-1}, true).rank() == 0);
    CHECK(mean(s).item<double>() == 3.5);
    CHECK(max(s).item<double>() == 3.5);
    CHECK(prod(s).item<double>() == 3.5);
    CHECK(var(s).item<double>() == 0.0);
    CHECK(std::isnan(var(s, {}, 1).item<double>()));
    CHECK(logsumexp(s).item<double>() == doctest::Approx(3.5));
    CHECK(argmax(s).item<std::int64_t>() == 0);
    CHECK(argmin(s, 0).item<std::int64_t>() == 0);
    CHECK(argmax(s, -1, true).rank() == 0);
    CHECK(softmax(s).item<double>() == 1.0);
    CHECK(log_softmax(s).item<double>() == 0.0);
    CHECK(all(tensor(0)).item<bool>() == false);
    CHECK_THROWS_AS(sum(s, {1}), IndexError);
    CHECK_THROWS_AS(softmax(s, 1), IndexError);
  }

  TEST_CASE("var and std: ddof") {
    const Tensor x = tensor({1.0, 2.0, 4.0});
    CHECK(var(x).item<double>() == doctest::Approx(14.0 / 9.0));
    CHECK(var(x, {}, 1).item<double>() == doctest::Approx(7.0 / 3.0));
    CHECK(ms::std(x, {0}, 1).item<double>() == doctest::Approx(std::sqrt(7.0 / 3.0)));
    CHECK(var(x, {}, 3).item<double>() == INFINITY);  // N - ddof = 0, as PyTorch
    CHECK(var(x, {}, 5).item<double>() == INFINITY);
    CHECK(std::isnan(var(tensor({2.0, 2.0}), {}, 2).item<double>()));  // 0 / 0
    CHECK_THROWS_WITH_AS(var(x, {}, -1), doctest::Contains("var: ddof (correction) must be >= 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(ms::std(x, {}, kI64Min), doctest::Contains("got -9223372036854775808"),
                         ValueError);
    CHECK(var(x, {}, kI64Max).item<double>() == INFINITY);
  }

  TEST_CASE_TEMPLATE("softmax and log_softmax match a naive loop along every axis", T, float,
                     double) {
    const DType dt = dtype_of<T>;
    const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
    std::uint32_t seed = 300;
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{4, 3, 5}, Shape{2, 300, 3},
                               Shape{2, 3, 4, 5}, Shape{3, 1000}, Shape{1000, 3}, Shape{2, 1, 3}}) {
      const Tensor x0 = random_tensor(dtype_of<T>, shape, kValues, seed++);
      // scale up so that exp would overflow without the max shift
      Values big = x0.to_vector<double>();
      for (double& e : big) e *= 60;
      const Tensor x = from_vector(big, shape).to(dt);
      for (std::int64_t axis = -shape.rank(); axis < shape.rank(); ++axis) {
        CAPTURE(shape);
        CAPTURE(axis);
        // reference: softmax along axis = exp(x - lse(x, axis))
        const std::int64_t a = axis < 0 ? axis + shape.rank() : axis;
        const Values xv = x.to_vector<double>();
        Values sm(xv.size()), lsm(xv.size());
        std::int64_t inner = 1;
        for (std::int64_t d = a + 1; d < shape.rank(); ++d) inner *= shape[std::size_t(d)];
        const std::int64_t n = shape[std::size_t(a)];
        for (std::size_t i = 0; i < xv.size(); ++i) {
          const std::int64_t o = std::int64_t(i) / (n * inner), r = std::int64_t(i) % inner;
          double m = -kInf;
          for (std::int64_t k = 0; k < n; ++k)
            m = std::max(m, xv[std::size_t((o * n + k) * inner + r)]);
          double s = 0;
          for (std::int64_t k = 0; k < n; ++k)
            s += std::exp(xv[std::size_t((o * n + k) * inner + r)] - m);
          lsm[i] = xv[i] - m - std::log(s);
          sm[i] = std::exp(lsm[i]);
        }
        check_values(softmax(x, axis), from_vector(sm, shape), dt, tol, tol);
        check_values(log_softmax(x, axis), from_vector(lsm, shape), dt, tol, tol * 60);
        // identity: rows sum to one
        check_values(sum(softmax(x, axis), {axis}),
                     full(out_shape(shape, {a}, false), 1.0, float64), dt, tol * 10, tol * 10);
      }
      // non-contiguous input
      if (shape.rank() >= 2) {
        const Tensor t = x.transpose(0, 1);
        check_values(softmax(t, 0), softmax(t.contiguous(), 0), dt, 0, 0);
        check_values(log_softmax(t, -1), log_softmax(t.contiguous(), -1), dt, 0, 0);
      }
    }
  }

  TEST_CASE("bad inputs raise the right ms::Error") {
    const Tensor x = zeros({2, 3});
    // axes out of range (negative, huge, INT64_MIN), duplicated
    for (std::int64_t bad : {std::int64_t(2), std::int64_t(-3), kI64Max, kI64Min}) {
      CAPTURE(bad);
      CHECK_THROWS_WITH_AS(sum(x, {bad}), doctest::Contains("sum: axis"), IndexError);
      CHECK_THROWS_WITH_AS(mean(x, {0, bad}), doctest::Contains("out of range"), IndexError);
      CHECK_THROWS_AS(max(x, {bad}), IndexError);
      CHECK_THROWS_AS(var(x, {bad}), IndexError);
      CHECK_THROWS_AS(logsumexp(x, {bad}), IndexError);
      CHECK_THROWS_AS(all(x, {bad}), IndexError);
      CHECK_THROWS_WITH_AS(argmax(x, bad), doctest::Contains("argmax: axis"), IndexError);
      CHECK_THROWS_AS(argmin(x, bad), IndexError);
      CHECK_THROWS_WITH_AS(softmax(x, bad), doctest::Contains("softmax: axis"), IndexError);
      CHECK_THROWS_AS(log_softmax(x, bad), IndexError);
    }
    CHECK_THROWS_WITH_AS(sum(x, {1, -1}), doctest::Contains("appears more than once"), ValueError);
    CHECK_THROWS_AS(prod(x, {0, 0}), ValueError);
    // dtypes
    const Tensor i = zeros({2, 3}, int32);
    CHECK_THROWS_WITH_AS(
        mean(i),
        doctest::Contains(
            "mean: input dtype Int32 is not a floating dtype; cast to a floating dtype first"),
        TypeError);
    CHECK_THROWS_WITH_AS(var(i), doctest::Contains("var: input dtype Int32"), TypeError);
    CHECK_THROWS_WITH_AS(ms::std(zeros({2}, bool_)), doctest::Contains("std: input dtype Bool"),
                         TypeError);
    CHECK_THROWS_WITH_AS(softmax(i), doctest::Contains("softmax: input dtype Int32"), TypeError);
    CHECK_THROWS_AS(log_softmax(zeros({2}, int64)), TypeError);
    const Tensor c = zeros({2}, complex64);
    CHECK_THROWS_WITH_AS(sum(c), doctest::Contains("sum: complex dtype Complex64"), TypeError);
    CHECK_THROWS_AS(max(c), TypeError);
    CHECK_THROWS_AS(argmax(c), TypeError);
    CHECK_THROWS_AS(mean(zeros({2}, complex128)), TypeError);
    CHECK_THROWS_AS(logsumexp(c), TypeError);
    CHECK_THROWS_AS(softmax(c), TypeError);
    const Tensor q = zeros({4}, int4);
    CHECK_THROWS_WITH_AS(sum(q), doctest::Contains("sum: dtype Int4 is packed"), TypeError);
    CHECK_THROWS_AS(all(q), TypeError);
    CHECK_THROWS_AS(argmin(q), TypeError);
    CHECK_THROWS_AS(softmax(q), TypeError);
    // undefined tensor and wrong arity through the table
    CHECK_THROWS_AS(sum(Tensor()), ValueError);
    CHECK_THROWS_WITH_AS(ops::call(ops::op("sum"), std::vector<Tensor>{x, x}),
                         doctest::Contains("sum: takes 1 inputs, got 2"), ValueError);
    CHECK_THROWS_WITH_AS(
        ops::call(ops::op("sum"), std::vector<Tensor>{x}, ops::Attrs{{"axes", std::int64_t(1)}}),
        doctest::Contains("attribute 'axes' has the wrong type"), ValueError);
  }

  TEST_CASE("op table entries and shape inference") {
    struct Entry {
      const char* name;
      ops::OpKind kind;
      bool differentiable;
    };
    for (const Entry& e :
         {Entry{"sum", ops::OpKind::Reduction, true}, Entry{"mean", ops::OpKind::Reduction, true},
          Entry{"prod", ops::OpKind::Reduction, true}, Entry{"max", ops::OpKind::Reduction, true},
          Entry{"min", ops::OpKind::Reduction, true},
          Entry{"argmax", ops::OpKind::Reduction, false},
          Entry{"argmin", ops::OpKind::Reduction, false},
          Entry{"var", ops::OpKind::Reduction, true}, Entry{"std", ops::OpKind::Reduction, true},
          Entry{"logsumexp", ops::OpKind::Reduction, true},
          Entry{"all", ops::OpKind::Reduction, false}, Entry{"any", ops::OpKind::Reduction, false},
          Entry{"softmax", ops::OpKind::Composite, true},
          Entry{"log_softmax", ops::OpKind::Composite, true}}) {
      CAPTURE(e.name);
      const ops::OpDef& d = ops::op(e.name);
      CHECK(d.kind == e.kind);
      CHECK(d.differentiable == e.differentiable);
      CHECK(d.min_inputs == 1);
      CHECK(d.max_inputs == 1);
    }
    // infer works on types alone, with unknown dims
    const std::vector<ops::TensorType> in = {{float16, Shape{kAnyDim, 3, 4}}};
    auto t = ops::op("sum").infer(in, ops::Attrs{{"axes", Axes{-1}}, {"keepdims", true}});
    CHECK(t[0].dtype == float16);
    CHECK(t[0].shape == Shape{kAnyDim, 3, 1});
    t = ops::op("argmax").infer(in, ops::Attrs{{"axis", std::int64_t(0)}});
    CHECK(t[0].dtype == int64);
    CHECK(t[0].shape == Shape{3, 4});
    t = ops::op("sum").infer(std::vector<ops::TensorType>{{int8, Shape{2}}}, ops::Attrs{});
    CHECK(t[0].dtype == int64);
    CHECK(t[0].shape == Shape{});
    t = ops::op("softmax").infer(in, ops::Attrs{{"axis", std::int64_t(1)}});
    CHECK(t[0] == in[0]);
    CHECK_THROWS_AS(ops::op("mean").infer(std::vector<ops::TensorType>{{int8, Shape{2}}}, {}),
                    TypeError);
  }
}
