// ms::Generator (Philox4x32-10, seed + offset) and the random tensor functions:
// known answers, reproducibility, independence from the thread count, moments
// on large samples (tolerance: 5 standard errors), bounds and errors.
#include <doctest/doctest.h>

#include "thread_guard.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <ms/jit/jit.hpp>
#include <ms/kernels/parallel.hpp>
#include <ms/ops/random.hpp>
#include <numbers>
#include <vector>

namespace {

struct Moments {
  double mean = 0, var = 0, kurtosis = 0, min = 0, max = 0;
};

Moments moments(const ms::Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  const double n = static_cast<double>(v.size());
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= n;
  double m2 = 0, m4 = 0;
  for (double x : v) {
    const double d = (x - m.mean) * (x - m.mean);
    m2 += d;
    m4 += d * d;
  }
  m.var = m2 / n;
  m.kurtosis = (m4 / n) / (m.var * m.var);
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  return m;
}

double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

/// Mean and variance of N(mu, s^2) truncated to [a, b] (textbook formulas).
std::pair<double, double> truncated_moments(double mu, double s, double a, double b) {
  const double al = (a - mu) / s, be = (b - mu) / s, z = Phi(be) - Phi(al);
  const double d = (phi(al) - phi(be)) / z;
  const double var = s * s * (1 + (al * phi(al) - be * phi(be)) / z - d * d);
  return {mu + s * d, var};
}

/// With a sample of n, |mean - mu| within 5 standard errors, and the variance
/// within 5 standard errors of the variance estimate (mu4 - sigma^4 <= 2 sigma^4
/// for the light-tailed laws tested here).
void check_mean_var(const Moments& m, double mu, double var, double n) {
  CHECK(std::abs(m.mean - mu) <= 5 * std::sqrt(var / n));
  CHECK(std::abs(m.var - var) <= 5 * std::sqrt(2.0 / n) * var);
}

std::array<std::uint32_t, 4> block(std::uint64_t seed, std::uint64_t index) {
  return ms::philox4x32_10(
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0, 0},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

using ms::test::check_thread_invariant;

}  // namespace

TEST_SUITE("core") {
  using namespace ms;

  TEST_CASE("Philox4x32-10 reproduces the Random123 known-answer vectors") {
    using W = std::array<std::uint32_t, 4>;
    CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) == W{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
    CHECK(
        philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        W{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
    CHECK(
        philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        W{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
    static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[3] == 0x9b00dbd8);  // usable at compile time
  }

  TEST_CASE("Generator: seed, offset, manual_seed, seed(), copies") {
    Generator g;
    CHECK(g.initial_seed() == 0);
    CHECK(g.offset() == 0);
    CHECK(&g.manual_seed(42) == &g);
    CHECK(g.initial_seed() == 42);
    const Generator::Draw d = g.step(5);
    CHECK(d.seed == 42);
    CHECK(d.offset == 0);
    CHECK(g.offset() == 5);
    g.manual_seed(7);
    CHECK(g.offset() == 0);  // manual_seed resets the offset
    const std::uint64_t s1 = g.seed(), s2 = g.seed();
    CHECK(g.initial_seed() == s2);
    CHECK(s1 != s2);  // fresh random seeds (equal with probability 2^-63)
    CHECK(s1 <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
    g.manual_seed(3);
    (void)uniform({10}, 0, 1, g);
    Generator copy = g;  // copies seed and offset: same numbers from here on
    CHECK(copy.offset() == g.offset());
    CHECK(uniform({6}, 0, 1, copy).to_vector<float>() == uniform({6}, 0, 1, g).to_vector<float>());
    Generator assigned(99);
    assigned = copy;
    CHECK(assigned.initial_seed() == 3);
    CHECK(assigned.offset() == copy.offset());
  }

  TEST_CASE("the offset advances by the Philox blocks consumed") {
    Generator g(1);
    const auto consumed = [&](auto&& draw) {
      const std::uint64_t before = g.offset();
      draw();
      return g.offset() - before;
    };
    CHECK(consumed([&] { uniform({10}, 0, 1, g); }) == 3);           // 4 float32 per block
    CHECK(consumed([&] { uniform({10}, 0, 1, g, float64); }) == 5);  // 2 float64 per block
    CHECK(consumed([&] { normal({9}, 0, 1, g); }) == 3);
    CHECK(consumed([&] { normal({9}, 0, 1, g, float64); }) == 5);
    CHECK(consumed([&] { truncated_normal({8}, 0, 1, -1, 1, g); }) == 2);
    CHECK(consumed([&] { bernoulli({5}, 0.5, g); }) == 2);
    CHECK(consumed([&] { randint(0, 9, {5}, g); }) == 3);  // 64 bits per integer
    CHECK(consumed([&] { randperm(7, g); }) == 4);
    CHECK(consumed([&] { dropout(ones({9}), 0.5, true, g); }) == 3);
    CHECK(consumed([&] { dropout(ones({9}), 0.5, false, g); }) == 0);  // eval: no draw
    CHECK(consumed([&] { uniform({0, 3}, 0, 1, g); }) == 0);
  }

  TEST_CASE("element i comes from Philox block offset + i / 4 (float32 uniform, bernoulli)") {
    Generator g(0x123456789abcdefULL);
    (void)g.step(11);
    const std::vector<float> u = uniform({13}, -1.0, 3.0, g).to_vector<float>();
    for (std::size_t i = 0; i < u.size(); ++i) {
      const auto w = block(0x123456789abcdefULL, 11 + i / 4);
      const double want = -1.0 + static_cast<double>(w[i % 4] >> 8) / 16777216.0 * 4.0;
      CHECK(u[i] == static_cast<float>(want));
    }
    g.manual_seed(5);
    const std::vector<std::uint8_t> b = bernoulli({9}, 0.4, g, bool_).to_vector<std::uint8_t>();
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto w = block(5, i / 4);
      CHECK(b[i] == (w[i % 4] / 4294967296.0 < 0.4 ? 1 : 0));
    }
  }

  TEST_CASE("same seed, same numbers; consecutive draws continue the stream") {
    manual_seed(2024);
    const std::vector<float> a = normal({1000}).to_vector<float>();
    manual_seed(2024);
    CHECK(normal({1000}).to_vector<float>() == a);
    CHECK(initial_seed() == 2024);
    manual_seed(2025);
    CHECK(normal({1000}).to_vector<float>() != a);
    // Two draws of 8 equal one draw of 16 (whole blocks): counter-based streams.
    Generator g(9);
    const std::vector<float> whole = uniform({16}, 0, 1, g).to_vector<float>();
    g.manual_seed(9);
    std::vector<float> parts = uniform({8}, 0, 1, g).to_vector<float>();
    const std::vector<float> second = uniform({8}, 0, 1, g).to_vector<float>();
    parts.insert(parts.end(), second.begin(), second.end());
    CHECK(parts == whole);
  }

  TEST_CASE("results do not depend on the thread count") {
    const Shape s{100003};  // not a multiple of 4, above the parallel grain
    const Tensor x = arange(0, 100003).reshape({100003});
    const auto draw_all = [&] {
      Generator g(77);
      std::vector<Tensor> r;
      r.push_back(uniform(s, -1, 1, g));
      r.push_back(uniform(s, -1, 1, g, float64));
      r.push_back(normal(s, 0, 1, g));
      r.push_back(normal(s, 0, 1, g, float64));
      r.push_back(truncated_normal(s, 0, 1, -0.5, 2, g));
      r.push_back(truncated_normal(s, 0, 1, -0.5, 2, g, float64));
      r.push_back(bernoulli(s, 0.3, g));
      r.push_back(bernoulli(full(s, 0.6), g));
      r.push_back(randint(-5, 1000, s, g));
      r.push_back(randperm(1000, g));
      r.push_back(dropout(x, 0.25, true, g));
      return r;
    };
    check_thread_invariant(draw_all);
  }

  TEST_CASE("get_state / set_state round trip") {
    Generator g(31);
    (void)normal({5}, 0, 1, g);
    const Tensor state = g.get_state();
    CHECK(state.dtype() == int64);
    CHECK(state.shape() == Shape{2});
    CHECK(state.to_vector<std::int64_t>() == std::vector<std::int64_t>{31, 2});
    const std::vector<float> a = normal({50}, 0, 1, g).to_vector<float>();
    (void)uniform({123}, 0, 1, g);
    g.set_state(state);
    CHECK(normal({50}, 0, 1, g).to_vector<float>() == a);
    Generator other;
    other.set_state(state);
    CHECK(other.initial_seed() == 31);
    CHECK(other.offset() == 2);
    // a seed above INT64_MAX survives the int64 state
    Generator big(~std::uint64_t{0});
    Generator restored;
    restored.set_state(big.get_state());
    CHECK(restored.initial_seed() == ~std::uint64_t{0});
    // the default generator
    manual_seed(8);
    const Tensor s = get_rng_state();
    const std::vector<float> d = uniform({20}).to_vector<float>();
    set_rng_state(s);
    CHECK(uniform({20}).to_vector<float>() == d);
    CHECK(&default_generator() == &manual_seed(8));

    CHECK_THROWS_WITH_AS(g.set_state(zeros({2})), doctest::Contains("got dtype Float32"),
                         TypeError);
    CHECK_THROWS_WITH_AS(g.set_state(zeros({3}, int64)),
                         doctest::Contains("must have shape [2] ({seed, offset}), got [3]"),
                         ShapeError);
    CHECK_THROWS_AS(g.set_state(Tensor()), ValueError);
  }

  TEST_CASE("uniform: bounds and moments") {
    Generator g(11);
    const double n = 1e6;
    const Tensor u = uniform({1000, 1000}, -2.0, 3.0, g);
    CHECK(u.dtype() == float32);
    CHECK(u.shape() == Shape{1000, 1000});
    const Moments m = moments(u);
    CHECK(m.min >= -2.0);
    CHECK(m.max < 3.0);
    check_mean_var(m, 0.5, 25.0 / 12.0, n);
    const Tensor u64 = uniform({200000}, 10.0, 10.5, g, float64);
    CHECK(u64.dtype() == float64);
    const Moments m64 = moments(u64);
    CHECK(m64.min >= 10.0);
    CHECK(m64.max < 10.5);
    check_mean_var(m64, 10.25, 0.25 / 12.0, 2e5);
    // a range narrower than float32 spacing at high: never reaches high
    const Moments narrow = moments(uniform({10000}, 1.0, std::nextafter(1.0f, 2.0f), g));
    CHECK(narrow.max < static_cast<double>(std::nextafter(1.0f, 2.0f)));
    CHECK(narrow.min >= 1.0);
    for (DType dt : {float16, bfloat16}) {
      const Tensor h = uniform({1000}, 0, 1, g, dt);
      CHECK(h.dtype() == dt);
      const Moments mh = moments(h);
      CHECK(mh.min >= 0.0);
      CHECK(mh.max <= 1.0);
    }
    CHECK(uniform({}, 0, 1, g).rank() == 0);
  }

  TEST_CASE("normal: moments (mean, variance, kurtosis)") {
    Generator g(12);
    const Moments m = moments(normal({1000000}, 1.5, 2.0, g));
    check_mean_var(m, 1.5, 4.0, 1e6);
    CHECK(std::abs(m.kurtosis - 3.0) <= 5 * std::sqrt(24.0 / 1e6));
    const Moments m64 = moments(normal({400000}, -3.0, 0.5, g, float64));
    check_mean_var(m64, -3.0, 0.25, 4e5);
    CHECK(std::abs(m64.kurtosis - 3.0) <= 5 * std::sqrt(24.0 / 4e5));
    // std = 0 gives the mean
    CHECK(normal({4}, 2.0, 0.0, g).to_vector<float>() == std::vector<float>(4, 2.0f));
    CHECK(normal({8}, 0, 1, g, bfloat16).dtype() == bfloat16);
  }

  TEST_CASE("truncated_normal: bounds and moments, also far in the tails") {
    Generator g(13);
    struct Case {
      double mu, s, a, b;
      DType dt;
    };
    for (const Case c :
         {Case{0, 1, -1, 2, float32}, Case{0.5, 2, -1, 0.5, float64}, Case{0, 1, 3, 4, float64},
          Case{0, 1, -10, -8, float64}, Case{1, 0.1, -2, 2, float32}}) {
      CAPTURE(c.a);
      CAPTURE(c.b);
      const double n = 400000;
      const Tensor t = truncated_normal({400000}, c.mu, c.s, c.a, c.b, g, c.dt);
      CHECK(t.dtype() == c.dt);
      const Moments m = moments(t);
      CHECK(m.min >= c.a);
      CHECK(m.max <= c.b);
      const auto [mean, var] = truncated_moments(c.mu, c.s, c.a, c.b);
      check_mean_var(m, mean, var, n);
    }
    // std = 0: the mean clamped into [a, b]
    CHECK(truncated_normal({3}, 5.0, 0.0, -1.0, 1.0, g).to_vector<float>() ==
          std::vector<float>(3, 1.0f));
  }

  TEST_CASE("bernoulli: mean, extremes, dtypes, probability tensors") {
    Generator g(14);
    const Moments m = moments(bernoulli({1000000}, 0.3, g));
    CHECK(std::abs(m.mean - 0.3) <= 5 * std::sqrt(0.3 * 0.7 / 1e6));
    CHECK(moments(bernoulli({1000}, 0.0, g)).max == 0.0);
    CHECK(moments(bernoulli({1000}, 1.0, g)).min == 1.0);
    CHECK(bernoulli({4}, 0.5, g, bool_).dtype() == bool_);
    CHECK(bernoulli({4}, 0.5, g, int32).dtype() == int32);
    const Tensor b16 = bernoulli({1000}, 0.5, g, float16);
    const Moments m16 = moments(b16);
    CHECK(m16.min == 0.0);
    CHECK(m16.max == 1.0);

    std::vector<double> p(300000);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? 1.0 : 0.25;
    const Tensor probs = from_vector(p, {100000, 3});
    const Tensor out = bernoulli(probs, g);
    CHECK(out.dtype() == float64);
    CHECK(out.shape() == probs.shape());
    const std::vector<double> v = out.to_vector<double>();
    double ones_at_quarter = 0;
    bool extremes_ok = true;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i % 3 == 0) extremes_ok = extremes_ok && v[i] == 0.0;
      if (i % 3 == 1) extremes_ok = extremes_ok && v[i] == 1.0;
      if (i % 3 == 2) ones_at_quarter += v[i];
    }
    CHECK(extremes_ok);
    CHECK(std::abs(ones_at_quarter / 1e5 - 0.25) <= 5 * std::sqrt(0.25 * 0.75 / 1e5));
    // a transposed (non-contiguous) probability tensor keeps its logical order
    const Tensor pt = probs.slice(0, 0, 4).transpose(0, 1);
    const std::vector<double> vt = bernoulli(pt, g).to_vector<double>();
    CHECK(std::vector<double>(vt.begin(), vt.begin() + 4) == std::vector<double>(4, 0.0));
    CHECK(std::vector<double>(vt.begin() + 4, vt.begin() + 8) == std::vector<double>(4, 1.0));
  }

  TEST_CASE("randint: range, frequencies, dtypes, the full int64 range") {
    Generator g(15);
    const Tensor r = randint(-3, 7, {200000}, g);
    CHECK(r.dtype() == int64);
    std::map<std::int64_t, double> count;
    for (std::int64_t v : r.to_vector<std::int64_t>()) count[v] += 1;
    CHECK(count.size() == 10);
    CHECK(count.begin()->first == -3);
    CHECK(count.rbegin()->first == 6);
    for (const auto& [v, c] : count) {
      CAPTURE(v);
      CHECK(std::abs(c - 20000) <= 5 * std::sqrt(200000 * 0.1 * 0.9));
    }
    const Tensor r8 = randint(-128, 128, {1000}, g, int8);
    CHECK(r8.dtype() == int8);
    const Tensor ru = randint(0, 256, {1000}, g, uint8);
    CHECK(moments(ru).max <= 255);
    constexpr auto lo = std::numeric_limits<std::int64_t>::min();
    constexpr auto hi = std::numeric_limits<std::int64_t>::max();
    const std::vector<std::int64_t> wide = randint(lo, hi, {1000}, g).to_vector<std::int64_t>();
    CHECK(std::any_of(wide.begin(), wide.end(), [](std::int64_t v) { return v < 0; }));
    CHECK(std::any_of(wide.begin(), wide.end(), [](std::int64_t v) { return v > 0; }));
    CHECK(randint(4, 5, {3}, g).to_vector<std::int64_t>() == std::vector<std::int64_t>(3, 4));
  }

  TEST_CASE("randperm: a permutation, uniform over permutations") {
    Generator g(16);
    std::vector<std::int64_t> p = randperm(1000, g).to_vector<std::int64_t>();
    std::vector<std::int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::int64_t> iota(1000);
    for (std::int64_t i = 0; i < 1000; ++i) iota[static_cast<std::size_t>(i)] = i;
    CHECK(sorted == iota);
    CHECK(p != iota);
    CHECK(randperm(0, g).shape() == Shape{0});
    CHECK(randperm(1, g).to_vector<std::int64_t>() == std::vector<std::int64_t>{0});
    const Tensor pf = randperm(10, g, float32);
    CHECK(pf.dtype() == float32);
    CHECK(moments(pf).max == 9.0);
    std::map<std::vector<std::int64_t>, double> count;
    for (int k = 0; k < 6000; ++k) count[randperm(3, g).to_vector<std::int64_t>()] += 1;
    CHECK(count.size() == 6);
    for (const auto& [perm, c] : count)
      CHECK(std::abs(c - 1000) <= 5 * std::sqrt(6000 * (1 / 6.0) * (5 / 6.0)));
  }

  TEST_CASE("dropout: zero fraction, scaling, eval mode, non-contiguous and half inputs") {
    Generator g(17);
    const double p = 0.3;
    const Tensor y = dropout(ones({1000000}), p, true, g);
    const std::vector<float> v = y.to_vector<float>();
    const float kept = static_cast<float>(1.0 / (1.0 - p));
    double zeros_seen = 0;
    bool values_ok = true;
    for (float x : v) {
      zeros_seen += x == 0.0f;
      values_ok = values_ok && (x == 0.0f || x == kept);
    }
    CHECK(values_ok);
    CHECK(std::abs(zeros_seen / 1e6 - p) <= 5 * std::sqrt(p * (1 - p) / 1e6));
    CHECK(std::abs(moments(y).mean - 1.0) <= 5 * std::sqrt(p / (1 - p) / 1e6));  // E[y] = x

    const Tensor x = arange(1, 13, 1, float64).reshape({3, 4}).transpose(0, 1);  // non-contiguous
    const Tensor d = dropout(x, 0.5, true, g);
    CHECK(d.shape() == Shape{4, 3});
    const std::vector<double> xv = x.to_vector<double>(), dv = d.to_vector<double>();
    for (std::size_t i = 0; i < xv.size(); ++i) CHECK((dv[i] == 0.0 || dv[i] == 2.0 * xv[i]));

    const Tensor x16 = ones({64}, float16);
    CHECK(dropout(x16, 0.5, true, g).dtype() == float16);
    CHECK(dropout(x, 0.5, false, g).is_same(x));  // eval: the input itself
    CHECK(dropout(x, 0.0, true, g).is_same(x));
    CHECK(moments(dropout(x, 1.0, true, g)).max == 0.0);
    CHECK(dropout(zeros({0, 3}), 0.5, true, g).shape() == Shape{0, 3});
  }

  TEST_CASE("bad inputs raise errors naming the function, the argument, expected vs given") {
    Generator g(1);
    CHECK_THROWS_WITH_AS(
        uniform({2}, 1.0, 1.0, g),
        doctest::Contains("uniform: expected low < high, got low = 1 and high = 1"), ValueError);
    CHECK_THROWS_WITH_AS(uniform({2}, std::nan(""), 1.0, g),
                         doctest::Contains("uniform: 'low' must be finite"), ValueError);
    CHECK_THROWS_WITH_AS(uniform({2}, -1e308, 1e308, g), doctest::Contains("overflows"),
                         ValueError);
    CHECK_THROWS_WITH_AS(uniform({2}, 0, 1, g, int32),
                         doctest::Contains("uniform: dtype must be a floating type"), TypeError);
    CHECK_THROWS_WITH_AS(uniform({2, -1}, 0, 1, g),
                         doctest::Contains("uniform: shape [2, -1] has a negative size -1"),
                         ValueError);
    CHECK_THROWS_WITH_AS(uniform({std::int64_t{1} << 40, std::int64_t{1} << 40}, 0, 1, g),
                         doctest::Contains("more than 2^63-1 elements"), ValueError);
    CHECK_THROWS_WITH_AS(normal({2}, 0.0, -1.0, g),
                         doctest::Contains("normal: expected std >= 0, got std = -1"), ValueError);
    CHECK_THROWS_WITH_AS(normal({2}, 0.0, 1.0, g, complex64),
                         doctest::Contains("normal: dtype must be a floating type"), TypeError);
    CHECK_THROWS_WITH_AS(
        truncated_normal({2}, 0, 1, 2, 1, g),
        doctest::Contains("truncated_normal: expected bounds a < b, got a = 2 and b = 1"),
        ValueError);
    CHECK_THROWS_WITH_AS(truncated_normal({2}, 0, -0.5, -1, 1, g),
                         doctest::Contains("truncated_normal: expected std >= 0, got std = -0.5"),
                         ValueError);
    CHECK_THROWS_WITH_AS(bernoulli({2}, 1.5, g),
                         doctest::Contains("bernoulli: expected p in [0, 1], got p = 1.5"),
                         ValueError);
    CHECK_THROWS_AS(bernoulli({2}, -0.1, g), ValueError);
    CHECK_THROWS_AS(bernoulli({2}, std::nan(""), g), ValueError);
    CHECK_THROWS_WITH_AS(
        bernoulli({2}, 0.5, g, complex64),
        doctest::Contains("bernoulli: dtype must be Bool, an integer or a floating"), TypeError);
    CHECK_THROWS_WITH_AS(
        bernoulli(tensor({0.5, 0.2, 1.5}), g),
        doctest::Contains("bernoulli: probs must lie in [0, 1], got 1.5 at flat index 2"),
        ValueError);
    CHECK_THROWS_WITH_AS(
        bernoulli(tensor({1, 0}), g),
        doctest::Contains("bernoulli: probs must be a floating tensor, got dtype Int64"),
        TypeError);
    CHECK_THROWS_WITH_AS(
        randint(5, 5, {2}, g),
        doctest::Contains("randint: expected low < high, got low = 5 and high = 5"), ValueError);
    CHECK_THROWS_WITH_AS(randint(0, 5, {2}, g, float32),
                         doctest::Contains("randint: dtype must be an integer type, got Float32"),
                         TypeError);
    CHECK_THROWS_WITH_AS(
        randint(0, 300, {2}, g, int8),
        doctest::Contains("randint: [low, high) = [0, 300) does not fit dtype Int8"), ValueError);
    CHECK_THROWS_AS(randint(-1, 3, {2}, g, uint8), ValueError);
    CHECK_THROWS_WITH_AS(randint(0, 5, {-2}, g), doctest::Contains("randint: shape [-2]"),
                         ValueError);
    CHECK_THROWS_WITH_AS(randperm(-1, g),
                         doctest::Contains("randperm: expected n >= 0, got n = -1"), ValueError);
    CHECK_THROWS_AS(randperm(std::numeric_limits<std::int64_t>::min(), g), ValueError);
    CHECK_THROWS_WITH_AS(randperm(4096, g, float16),
                         doctest::Contains("randperm: n = 4096 is too large for dtype Float16"),
                         ValueError);
    CHECK_THROWS_AS(randperm(200, g, int8), ValueError);
    CHECK_THROWS_WITH_AS(
        randperm(3, g, bool_),
        doctest::Contains("randperm: dtype must be an integer or floating type, got Bool"),
        TypeError);
    CHECK_THROWS_WITH_AS(dropout(ones({2}), 1.5, true, g),
                         doctest::Contains("dropout: expected p in [0, 1], got p = 1.5"),
                         ValueError);
    CHECK_THROWS_WITH_AS(dropout(ones({2}, int32), 0.5, true, g),
                         doctest::Contains("dropout: x must be a floating tensor, got dtype Int32"),
                         TypeError);
    CHECK_THROWS_AS(dropout(Tensor(), 0.5, true, g), ValueError);
    // a failed call draws nothing
    CHECK(g.offset() == 0);
  }

  TEST_CASE("random functions under ms::jit check their arguments when traced and draw nothing") {
    Generator g(1);
    auto f = jit([&](const auto& x) { return dropout(x, 1.5, true, g); });
    CHECK_THROWS_WITH_AS(
        f(ones({4})), doctest::Contains("dropout: expected p in [0, 1], got p = 1.5"), ValueError);
    auto h = jit([&](const auto& x) { return x * uniform({4}, 1, 0, g); });
    CHECK_THROWS_WITH_AS(h(ones({4})), doctest::Contains("uniform: expected low < high"),
                         ValueError);
    auto r = jit([&](const auto& x) { return x + randint(0, 300, {4}, g, int8).to(float32); });
    CHECK_THROWS_WITH_AS(
        r(ones({4})), doctest::Contains("randint: [low, high) = [0, 300) does not fit dtype Int8"),
        ValueError);
    CHECK(g.offset() == 0);
    CHECK(uniform({4}, 0, 1, g).numel() == 4);  // and work eagerly after the trace
  }
}
