// Initializers (MindSpore's common/initializer.py): fan rules and gains, every
// initializer's shape, dtype and statistics (moments within 5 standard errors,
// orthogonality, structure), ms::initializer over objects, names, numbers and
// tensors, and every declared error.
#include <doctest/doctest.h>

#include "thread_guard.hpp"
#include "transposed.hpp"

#include <algorithm>
#include <cmath>
#include <ms/kernels/parallel.hpp>
#include <ms/nn/initializer.hpp>
#include <ms/ops/random.hpp>
#include <numbers>
#include <utility>
#include <vector>

using namespace ms;

namespace {

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
};

Moments moments(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  const double n = static_cast<double>(v.size());
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= n;
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= n;
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  return m;
}

/// Zero mean and variance `var` within 5 standard errors (light-tailed laws).
void check_zero_mean_var(const Tensor& t, double var) {
  const Moments m = moments(t);
  const double n = static_cast<double>(t.numel());
  CHECK(std::abs(m.mean) <= 5 * std::sqrt(var / n));
  CHECK(std::abs(m.var - var) <= 5 * std::sqrt(2.0 / n) * var);
}

/// max |A - B| for two row-major matrices held as vectors.
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

/// M M^T of a rows x cols row-major matrix (rows orthonormal <=> identity).
std::vector<double> gram_rows(const std::vector<double>& m, std::int64_t rows, std::int64_t cols) {
  std::vector<double> g(static_cast<std::size_t>(rows * rows));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < rows; ++j) {
      double s = 0;
      for (std::int64_t k = 0; k < cols; ++k)
        s += m[static_cast<std::size_t>(i * cols + k)] * m[static_cast<std::size_t>(j * cols + k)];
      g[static_cast<std::size_t>(i * rows + j)] = s;
    }
  return g;
}

std::vector<double> scaled_eye(std::int64_t n, double s) {
  std::vector<double> e(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) e[static_cast<std::size_t>(i * n + i)] = s;
  return e;
}

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("fan rules and gains (MindSpore's _calculate_fan_in_and_fan_out / _calculate_gain)") {
    using init::calculate_correct_fan;
    using init::calculate_fan_in_and_fan_out;
    using init::calculate_gain;
    CHECK(calculate_fan_in_and_fan_out({10, 20}) == std::pair<std::int64_t, std::int64_t>{20, 10});
    CHECK(calculate_fan_in_and_fan_out({64, 3, 3, 3}) ==
          std::pair<std::int64_t, std::int64_t>{27, 576});
    CHECK(calculate_fan_in_and_fan_out({8, 4, 5}) == std::pair<std::int64_t, std::int64_t>{20, 40});
    CHECK(calculate_correct_fan({64, 3, 3, 3}, "fan_in") == 27);
    CHECK(calculate_correct_fan({64, 3, 3, 3}, "FAN_OUT") == 576);  // lower-cased, as MindSpore
    CHECK(calculate_gain("linear") == 1.0);
    CHECK(calculate_gain("conv_transpose2d") == 1.0);
    CHECK(calculate_gain("sigmoid") == 1.0);
    CHECK(calculate_gain("tanh") == doctest::Approx(5.0 / 3.0));
    CHECK(calculate_gain("relu") == doctest::Approx(std::sqrt(2.0)));
    CHECK(calculate_gain("leaky_relu") == doctest::Approx(std::sqrt(2.0 / (1 + 0.01 * 0.01))));
    CHECK(calculate_gain("leaky_relu", 0.2) == doctest::Approx(std::sqrt(2.0 / 1.04)));
    CHECK(calculate_gain("leaky_relu", 0.0) == doctest::Approx(std::sqrt(2.0)));

    CHECK_THROWS_WITH_AS(calculate_fan_in_and_fan_out({5}),
                         doctest::Contains("fewer than 2 dimensions, got shape [5] (rank 1)"),
                         ShapeError);
    CHECK_THROWS_AS(calculate_fan_in_and_fan_out({}), ShapeError);
    CHECK_THROWS_AS(calculate_fan_in_and_fan_out({3, -1}), ValueError);
    CHECK_THROWS_WITH_AS(calculate_correct_fan({2, 2}, "fan_avg"),
                         doctest::Contains("'mode' must be 'fan_in' or 'fan_out', got 'fan_avg'"),
                         ValueError);
    CHECK_THROWS_WITH_AS(calculate_gain("gelu"),
                         doctest::Contains("calculate_gain: 'nonlinearity' must be one of"),
                         ValueError);
    CHECK_THROWS_WITH_AS(calculate_gain("gelu"), doctest::Contains("got 'gelu'"), ValueError);
    CHECK_THROWS_AS(calculate_gain("leaky_relu", std::nan("")), ValueError);
  }

  TEST_CASE("Zero, One, Constant") {
    const Tensor z = init::Zero()({2, 3});
    CHECK(z.shape() == Shape{2, 3});
    CHECK(z.dtype() == float32);
    CHECK(z.to_vector<float>() == std::vector<float>(6, 0.f));
    CHECK(init::One()({4}, int32).to_vector<std::int32_t>() == std::vector<std::int32_t>(4, 1));
    CHECK(init::Constant(2.5)({2}, float64).to_vector<double>() == std::vector<double>{2.5, 2.5});
    const std::int64_t big = (std::int64_t{1} << 60) + 1;  // exact in int64, not in double
    CHECK(init::Constant(big)({2}, int64).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{big, big});
    CHECK(init::Constant(7)({}).rank() == 0);
    CHECK(init::Zero()({0, 3}).numel() == 0);
  }

  TEST_CASE("Normal, Uniform, TruncatedNormal: moments and bounds") {
    Generator g(1);
    const Tensor n = init::Normal(0.5, 1.0)({1000, 1000}, float32, g);
    CHECK(n.dtype() == float32);
    const Moments mn = moments(n);
    CHECK(std::abs(mn.mean - 1.0) <= 5 * std::sqrt(0.25 / 1e6));
    CHECK(std::abs(mn.var - 0.25) <= 5 * std::sqrt(2.0 / 1e6) * 0.25);
    check_zero_mean_var(init::Normal()({500, 400}, float64, g), 1e-4);  // default sigma 0.01

    const Tensor u = init::Uniform(0.3)({1000, 1000}, float32, g);
    const Moments mu = moments(u);
    CHECK(mu.min >= -0.3);
    CHECK(mu.max < 0.3);
    check_zero_mean_var(u, 0.09 / 3);
    CHECK(moments(init::Uniform()({1000}, float32, g)).max < 0.07);  // default scale
    CHECK(moments(init::Uniform(0.0)({10}, float32, g)).max == 0.0);

    // sigma 1 truncated to [-1, 1]: variance 1 - 2 phi(1) / (2 Phi(1) - 1)
    const double phi1 = std::exp(-0.5) / std::sqrt(2 * std::numbers::pi);
    const double z = std::erf(1 / std::numbers::sqrt2);
    const Tensor t = init::TruncatedNormal(1.0, 0.0, -1.0, 1.0)({1000, 1000}, float32, g);
    const Moments mt = moments(t);
    CHECK(mt.min >= -1.0);
    CHECK(mt.max <= 1.0);
    check_zero_mean_var(t, 1 - 2 * phi1 / z);
    const Moments md =
        moments(init::TruncatedNormal()({100000}, float32, g));  // sigma 0.01 in [-2, 2]
    CHECK(std::abs(md.var - 1e-4) <= 5 * std::sqrt(2.0 / 1e5) * 1e-4);
  }

  TEST_CASE("HeUniform / HeNormal: variance = gain^2 / fan") {
    Generator g(2);
    // default: negative_slope 0, fan_in, leaky_relu -> gain sqrt(2): U(+-sqrt(6 / fan_in))
    const Tensor w = init::HeUniform()({1000, 1000}, float32, g);
    const double bound = std::sqrt(6.0 / 1000);
    CHECK(init::HeUniform().bound({1000, 1000}) == doctest::Approx(bound));
    const Moments m = moments(w);
    CHECK(m.min >= -bound);
    CHECK(m.max < bound);
    check_zero_mean_var(w, 2.0 / 1000);
    // Dense's default HeUniform(sqrt(5)): bound 1 / sqrt(fan_in)
    CHECK(init::HeUniform(std::sqrt(5.0)).bound({30, 40}) == doctest::Approx(1 / std::sqrt(40.0)));
    // conv weights, fan_out: fan = 64 * 9
    const Tensor c = init::HeUniform(0.0, "fan_out", "relu")({64, 128, 3, 3}, float32, g);
    check_zero_mean_var(c, 2.0 / 576);
    const Tensor hn = init::HeNormal()({400, 2500}, float32, g);
    CHECK(init::HeNormal().stddev({400, 2500}) == doctest::Approx(std::sqrt(2.0 / 2500)));
    check_zero_mean_var(hn, 2.0 / 2500);
    const Tensor ht = init::HeNormal(0.2, "fan_in", "leaky_relu")({200, 50, 5, 5}, float64, g);
    CHECK(ht.dtype() == float64);
    check_zero_mean_var(ht, 2.0 / 1.04 / 1250);
    check_zero_mean_var(init::HeNormal(0, "fan_in", "tanh")({1000, 500}, float32, g),
                        25.0 / 9 / 500);
  }

  TEST_CASE("XavierUniform / XavierNormal: variance = gain^2 * 2 / (fan_in + fan_out)") {
    Generator g(3);
    const Tensor xu = init::XavierUniform()({512, 256, 3, 3}, float32, g);
    const double fan_sum = 256 * 9 + 512 * 9;
    const Moments m = moments(xu);
    CHECK(m.max < std::sqrt(6.0 / fan_sum));
    CHECK(m.min >= -std::sqrt(6.0 / fan_sum));
    check_zero_mean_var(xu, 2.0 / fan_sum);
    check_zero_mean_var(init::XavierUniform(2.0)({800, 1200}, float32, g), 4 * 2.0 / 2000);
    check_zero_mean_var(init::XavierNormal()({800, 1200}, float32, g), 2.0 / 2000);
    check_zero_mean_var(init::XavierNormal(0.5)({100, 40, 4, 4}, float64, g),
                        0.25 * 2.0 / (40 * 16 + 100 * 16));
    CHECK(moments(init::XavierNormal(0.0)({3, 3}, float32, g)).max == 0.0);
  }

  TEST_CASE("VarianceScaling: every mode and distribution has variance scale / n") {
    Generator g(4);
    const Shape s{300, 200, 2, 2};  // fan_in 800, fan_out 1200
    for (const char* mode : {"fan_in", "fan_out", "fan_avg"}) {
      const double n = std::string(mode) == "fan_in"    ? 800
                       : std::string(mode) == "fan_out" ? 1200
                                                        : 1000;
      for (const char* dist : {"truncated_normal", "untruncated_normal", "uniform"}) {
        CAPTURE(mode);
        CAPTURE(dist);
        const Tensor t = init::VarianceScaling(2.0, mode, dist)(s, float32, g);
        CHECK(t.shape() == s);
        check_zero_mean_var(t, 2.0 / n);
        const Moments m = moments(t);
        const double sd = std::sqrt(2.0 / n);
        if (std::string(dist) == "truncated_normal") {
          CHECK(m.max <= 2 * sd / 0.87962566103423978 + 1e-7);
          CHECK(m.min >= -2 * sd / 0.87962566103423978 - 1e-7);
        }
        if (std::string(dist) == "uniform") CHECK(m.max < std::sqrt(3.0) * sd);
      }
    }
    // n is at least 1 (a [1, 0, ...]-like fan never divides by zero)
    CHECK(init::VarianceScaling()({1, 1}).numel() == 1);
  }

  TEST_CASE("Orthogonal: Q^T Q = I for tall, Q Q^T = I for wide, gain, rank > 2") {
    Generator g(5);
    {
      const Tensor q = init::Orthogonal()({50, 20}, float64, g);  // tall: orthonormal columns
      const std::vector<double> v = ms::test::transposed(q.to_vector<double>(), 50, 20);
      CHECK(max_abs_diff(gram_rows(v, 20, 50), scaled_eye(20, 1.0)) < 1e-12);
    }
    {
      const Tensor q = init::Orthogonal()({20, 50}, float64, g);  // wide: orthonormal rows
      CHECK(max_abs_diff(gram_rows(q.to_vector<double>(), 20, 50), scaled_eye(20, 1.0)) < 1e-12);
    }
    {
      const Tensor q = init::Orthogonal(2.0)({30, 30}, float32, g);
      CHECK(q.dtype() == float32);
      const std::vector<double> v = q.to_vector<double>();
      CHECK(max_abs_diff(gram_rows(v, 30, 30), scaled_eye(30, 4.0)) < 1e-5);
      CHECK(max_abs_diff(gram_rows(ms::test::transposed(v, 30, 30), 30, 30), scaled_eye(30, 4.0)) <
            1e-5);
    }
    {
      const Tensor q = init::Orthogonal()({8, 2, 3, 3}, float64, g);  // rows of 18
      CHECK(q.shape() == Shape{8, 2, 3, 3});
      CHECK(max_abs_diff(gram_rows(q.to_vector<double>(), 8, 18), scaled_eye(8, 1.0)) < 1e-12);
    }
    {
      Generator a(6), b(6);
      const Tensor qa = init::Orthogonal()({10, 10}, float64, a);
      CHECK(allclose(qa, init::Orthogonal()({10, 10}, float64, b), 0, 0));
      CHECK_FALSE(allclose(qa, init::Orthogonal()({10, 10}, float64, b)));
    }
    // Haar-distributed entries of a large orthogonal matrix have variance 1 / n
    check_zero_mean_var(init::Orthogonal()({200, 200}, float64, g), 1.0 / 200);
  }

  TEST_CASE("Identity and Dirac structure") {
    CHECK(init::Identity()({2, 3}).to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0});
    CHECK(init::Identity()({3, 2}, int64).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{1, 0, 0, 1, 0, 0});

    // [6, 4, 3, 3] with 2 groups: out channel g * 3 + d passes in channel d at the centre
    const Tensor d = init::Dirac(2)({6, 4, 3, 3});
    const std::vector<float> v = d.to_vector<float>();
    std::vector<float> want(v.size(), 0.f);
    for (int gidx = 0; gidx < 2; ++gidx)
      for (int k = 0; k < 3; ++k)
        want[static_cast<std::size_t>(((gidx * 3 + k) * 4 + k) * 9 + 4)] = 1.f;
    CHECK(v == want);
    // rank 3: [out, in, w]; more input than output channels
    const std::vector<float> d3 = init::Dirac()({2, 3, 4}).to_vector<float>();
    std::vector<float> want3(24, 0.f);
    want3[0 * 12 + 0 * 4 + 2] = 1.f;
    want3[1 * 12 + 1 * 4 + 2] = 1.f;
    CHECK(d3 == want3);
    // rank 5: the sum is the number of passed channels
    const Moments m5 = moments(init::Dirac(1)({4, 2, 3, 3, 3}));
    CHECK(m5.mean * 4 * 2 * 27 == doctest::Approx(2.0));
  }

  TEST_CASE("Sparse: ceil(sparsity * rows) zeros in every column, the rest N(0, sigma^2)") {
    Generator g(7);
    const Tensor s = init::Sparse(0.3, 1.0)({100, 400}, float32, g);
    const std::vector<float> v = s.to_vector<float>();
    bool every_column = true;
    double sum2 = 0, nonzero = 0;
    for (int c = 0; c < 400; ++c) {
      int zeros_in_column = 0;
      for (int r = 0; r < 100; ++r) {
        const float x = v[static_cast<std::size_t>(r * 400 + c)];
        zeros_in_column += x == 0.f;
        if (x != 0.f) sum2 += double(x) * x, nonzero += 1;
      }
      every_column = every_column && zeros_in_column == 30;
    }
    CHECK(every_column);
    CHECK(std::abs(sum2 / nonzero - 1.0) <= 5 * std::sqrt(2.0 / nonzero));
    // zero rows are chosen at random: row 0 is not always zero
    double row0_zero = 0;
    for (int c = 0; c < 400; ++c) row0_zero += v[static_cast<std::size_t>(c)] == 0.f;
    CHECK(std::abs(row0_zero / 400 - 0.3) <= 5 * std::sqrt(0.3 * 0.7 / 400));
    CHECK(moments(init::Sparse(1.0)({5, 3}, float32, g)).max == 0.0);
    CHECK(moments(init::Sparse(0.0, 0.5)({5, 3}, float32, g)).min != 0.0);
  }

  TEST_CASE("ms::initializer: objects, names, numbers, tensors") {
    Generator a(10), b(10);
    const Tensor he = initializer(init::HeUniform(), {20, 30}, float32, a);
    CHECK(allclose(he, initializer("he_uniform", {20, 30}, float32, b), 0, 0));
    CHECK(allclose(initializer("HeUniform", {20, 30}, float32, a),
                   initializer(std::string("heuniform"), {20, 30}, float32, b), 0, 0));
    CHECK(initializer("zeros", {2, 2}).to_vector<float>() == std::vector<float>(4, 0.f));
    CHECK(initializer("ONES", {3}, int32).to_vector<std::int32_t>() ==
          std::vector<std::int32_t>(3, 1));
    CHECK(initializer(0, {2}).to_vector<float>() == std::vector<float>{0, 0});
    CHECK(initializer(2.5, {2}, float64).to_vector<double>() == std::vector<double>{2.5, 2.5});
    CHECK(initializer(true, {1}, bool_).item<bool>());
    // every alias of MindSpore's table builds with its defaults
    for (const char* name : {"zero", "zeros", "one", "ones", "xavier_normal", "xaviernormal",
                             "xavier_uniform", "xavieruniform", "he_uniform", "heuniform",
                             "he_normal", "henormal", "identity", "orthogonal", "variancescaling",
                             "uniform", "normal", "truncatednormal", "TruncatedNormal"}) {
      CAPTURE(name);
      const Tensor t = initializer(name, {4, 4}, float64, a);
      CHECK(t.shape() == Shape{4, 4});
      CHECK(t.dtype() == float64);
    }
    CHECK(initializer("dirac", {2, 2, 3}).shape() == Shape{2, 2, 3});
    for (DType dt : {float16, bfloat16, float64, int32}) {
      CAPTURE(dt);
      CHECK(initializer("normal", {3, 3}, dt, a).dtype() == dt);
    }

    const Tensor t = ones({2, 3});
    CHECK(initializer(t, {2, 3}).is_same(t));  // the tensor itself
    CHECK(initializer(t).is_same(t));
    CHECK(initializer(t, {2, 3}, float64).dtype() == float64);
    CHECK_THROWS_WITH_AS(
        initializer(t, {3, 2}),
        doctest::Contains(
            "the shape of the 'init' tensor [2, 3] differs from the argument 'shape' [3, 2]"),
        ShapeError);
    CHECK_THROWS_WITH_AS(initializer("normal", {2, 0}),
                         doctest::Contains("every dim must be a positive integer, got [2, 0]"),
                         ValueError);
    CHECK_THROWS_AS(initializer(1.0, {-3}), ValueError);
    CHECK_THROWS_WITH_AS(initializer("gaussian", {2}),
                         doctest::Contains("the class corresponding to 'gaussian' was not found"),
                         ValueError);
    CHECK_THROWS_WITH_AS(initializer("Sparse", {2, 2}),
                         doctest::Contains("'sparse' needs the argument 'sparsity'"), TypeError);
    CHECK_THROWS_AS(initializer(Tensor(), {2}), ValueError);

    // InitSpec holds any form, for option structs
    const InitSpec specs[] = {init::Orthogonal(2.0), "he_normal", 0.5, ones({2})};
    CHECK(specs[0].to_string() == "Orthogonal");
    CHECK(specs[1].to_string() == "'he_normal'");
    CHECK(specs[2].to_string().find("Constant(0.5") == 0);
    CHECK(specs[3].is_tensor());
    CHECK(specs[1].resolve()->name() == "HeNormal");
    CHECK(specs[2].resolve()->name() == "Constant");
    CHECK_THROWS_AS(specs[3].resolve(), ValueError);
    CHECK_THROWS_AS(specs[0].tensor(), ValueError);
    // Copies and moves: a moved-from spec keeps its value.
    InitSpec s1 = specs[1];
    InitSpec s2 = std::move(s1);
    CHECK(s2.to_string() == "'he_normal'");
    CHECK(s1.to_string() == "'he_normal'");  // NOLINT(bugprone-use-after-move)
    s1 = specs[3];
    s2 = std::move(s1);
    CHECK(s1.is_tensor());  // NOLINT(bugprone-use-after-move)
    CHECK(s2.is_tensor());
  }

  TEST_CASE(
      "initializers draw from the given generator; same seed, same tensor; any thread count") {
    Generator a(42), b(42);
    const Tensor x = init::XavierNormal()({64, 32}, float32, a);
    CHECK(a.offset() > 0);
    CHECK(allclose(x, init::XavierNormal()({64, 32}, float32, b), 0, 0));
    manual_seed(42);
    const Tensor d1 = initializer("normal", {8, 8});
    manual_seed(42);
    CHECK(allclose(d1, initializer("normal", {8, 8}), 0, 0));

    test::check_thread_invariant([] {
      Generator c(3);
      return std::vector<Tensor>{init::HeUniform()({300, 301}, float32, c),
                                 init::Sparse(0.5)({64, 40}, float32, c)};
    });
  }

  TEST_CASE("bad arguments and shapes raise the right errors") {
    CHECK_THROWS_WITH_AS(init::Normal(-1.0),
                         doctest::Contains("Normal: expected sigma >= 0, got sigma = -1"),
                         ValueError);
    CHECK_THROWS_AS(init::Normal(0.1, std::nan("")), ValueError);
    CHECK_THROWS_WITH_AS(init::Uniform(-0.5),
                         doctest::Contains("Uniform: expected scale >= 0, got scale = -0.5"),
                         ValueError);
    CHECK_THROWS_WITH_AS(
        init::TruncatedNormal(0.1, 0.0, 2.0, 1.0),
        doctest::Contains("TruncatedNormal: expected bounds a < b, got a = 2 and b = 1"),
        ValueError);
    CHECK_THROWS_AS(init::TruncatedNormal(-0.1), ValueError);
    CHECK_THROWS_WITH_AS(
        init::HeUniform(0.0, "fan_avg"),
        doctest::Contains("HeUniform: 'mode' must be 'fan_in' or 'fan_out', got 'fan_avg'"),
        ValueError);
    CHECK_THROWS_WITH_AS(init::HeNormal(0.0, "fan_in", "swish"),
                         doctest::Contains("HeNormal: 'nonlinearity' must be one of"), ValueError);
    CHECK_THROWS_AS(init::HeUniform(std::nan(""), "fan_in", "leaky_relu"), ValueError);
    CHECK_THROWS_WITH_AS(init::XavierUniform(-1.0),
                         doctest::Contains("XavierUniform: expected gain >= 0, got gain = -1"),
                         ValueError);
    CHECK_THROWS_AS(init::XavierNormal(-1.0), ValueError);
    CHECK_THROWS_WITH_AS(
        init::VarianceScaling(0.0),
        doctest::Contains("VarianceScaling: the argument 'scale' must be greater than 0, got 0"),
        ValueError);
    CHECK_THROWS_WITH_AS(
        init::VarianceScaling(1.0, "fan_sum"),
        doctest::Contains("'mode' must be 'fan_in', 'fan_out' or 'fan_avg', got 'fan_sum'"),
        ValueError);
    CHECK_THROWS_WITH_AS(init::VarianceScaling(1.0, "fan_in", "normal"),
                         doctest::Contains("'distribution' must be 'uniform', 'truncated_normal' "
                                           "or 'untruncated_normal', got 'normal'"),
                         ValueError);
    CHECK_THROWS_AS(init::Orthogonal(std::nan("")), ValueError);
    CHECK_THROWS_WITH_AS(init::Dirac(0),
                         doctest::Contains("Dirac: expected groups >= 1, got groups = 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(
        init::Sparse(1.5),
        doctest::Contains("Sparse: expected sparsity in [0, 1], got sparsity = 1.5"), ValueError);
    CHECK_THROWS_AS(init::Sparse(0.5, -1.0), ValueError);

    // shapes
    CHECK_THROWS_WITH_AS(init::HeUniform()({5}),
                         doctest::Contains("HeUniform: 'fan_in' and 'fan_out' can not be computed"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(init::HeUniform()({4, 0}),
                         doctest::Contains("HeUniform: fan_in of shape [4, 0] is 0"), ValueError);
    CHECK_THROWS_WITH_AS(init::XavierUniform()({0, 0}),
                         doctest::Contains("XavierUniform: fan_in + fan_out of shape [0, 0] is 0"),
                         ValueError);
    CHECK_THROWS_AS(init::XavierNormal()({7}), ShapeError);
    CHECK_THROWS_AS(init::VarianceScaling()({7}), ShapeError);
    CHECK_THROWS_WITH_AS(
        init::Orthogonal()({5}),
        doctest::Contains(
            "Orthogonal: the initialized tensor must have rank >= 2, got shape [5] (rank 1)"),
        ShapeError);
    CHECK_THROWS_WITH_AS(
        init::Identity()({2, 2, 2}),
        doctest::Contains(
            "Identity: the initialized tensor must have rank 2, got shape [2, 2, 2] (rank 3)"),
        ShapeError);
    CHECK_THROWS_WITH_AS(
        init::Dirac()({2, 2}),
        doctest::Contains(
            "Dirac: only tensors of rank 3, 4 or 5 can be initialized, got shape [2, 2] (rank 2)"),
        ShapeError);
    CHECK_THROWS_AS(init::Dirac()({2, 2, 2, 2, 2, 2}), ShapeError);
    CHECK_THROWS_WITH_AS(
        init::Dirac(4)({6, 4, 3, 3}),
        doctest::Contains(
            "Dirac: the first dim 6 of shape [6, 4, 3, 3] must be divisible by groups = 4"),
        ValueError);
    CHECK_THROWS_WITH_AS(
        init::Sparse(0.1)({3, 3, 3}),
        doctest::Contains("Sparse: the initialized tensor must have rank 2, got shape [3, 3, 3]"),
        ShapeError);
    CHECK_THROWS_WITH_AS(init::Normal()({-1, 2}),
                         doctest::Contains("Normal: shape [-1, 2] has a negative size"),
                         ValueError);
    CHECK_THROWS_AS(init::Zero()({std::int64_t{1} << 40, std::int64_t{1} << 40}), ValueError);
  }
}
