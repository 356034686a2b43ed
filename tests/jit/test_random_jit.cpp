// Random functions under ms::jit and ms::grad: a jitted function draws exactly
// the numbers the eager one draws, each call advances the generator, in any
// execution order; draws are never folded, merged or dropped.
#include <doctest/doctest.h>

#include <ms/ms.hpp>

#include "jit/jit_test_util.hpp"
#include "random.hpp"

using namespace ms;

namespace {
using ms_test::kTest;
using test::random_tensor;

/// Same dtype, shape and values, bit for bit (as doubles).
bool same(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (std::size_t i = 0; i < va.size(); ++i)
    if (!(va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i])))) return false;
  return true;
}

// Every random function once, in a fixed order, from generator `g`.
auto all_random(Generator& g) {
  return [&g](const Tensor& x) {
    return std::tuple{dropout(x, 0.3, true, g),
                      uniform({3, 5}, -1.0, 2.0, g),
                      normal({7}, 1.0, 2.0, g, float64),
                      truncated_normal({6}, 0.0, 1.0, -1.0, 1.0, g),
                      bernoulli({9}, 0.25, g, int32),
                      bernoulli(sigmoid(x), g),
                      randint(-5, 5, {4}, g),
                      randperm(6, g),
                      dropout(x * 2.f, 0.5, true, g)};
  };
}
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE(
      "random functions: a jitted function draws the eager function's numbers, call after call") {
    const Tensor x = random_tensor(float32, {4, 6}, {-2, 2}, 1);
    Generator g(11);
    auto fn = all_random(g);
    const auto e1 = fn(x);
    const auto e2 = fn(x);
    const std::uint64_t eager_offset = g.offset();
    g.manual_seed(11);
    auto f = jit(fn, kTest);
    const auto j1 = f(x);
    const auto j2 = f(x);
    CHECK(f.compile_count() == 1);
    CHECK(g.offset() == eager_offset);  // each call advanced it by the eager amount
    auto check_all = [](const auto& e, const auto& j) {
      std::apply(
          [&](const auto&... ev) {
            std::apply([&](const auto&... jv) { CHECK((same(ev, jv) && ...)); }, j);
          },
          e);
    };
    check_all(e1, j1);
    check_all(e2, j2);
    CHECK_FALSE(same(std::get<1>(j1), std::get<1>(j2)));  // a new draw on every call
    CHECK(f.dump().find("Random(") != std::string::npos);
    CHECK(f.dump().find("dropout(p=0.3)") != std::string::npos);
  }

  TEST_CASE("random functions: draws keep the call order under dfs and bfs execution orders") {
    const Tensor a = random_tensor(float32, {64}, {-2, 2}, 1),
                 b = random_tensor(float32, {64}, {-2, 2}, 2);
    Generator g(5);
    // Independent branches, the later draw returned first: a depth-first
    // order from the outputs would reach the second draw first.
    auto fn = [&](const Tensor& p, const Tensor& q) {
      const Tensor y1 = dropout(p, 0.5, true, g);
      const Tensor y2 = uniform({64}, 0.0, 1.0, g) + q;
      return std::tuple{y2, y1};
    };
    const auto [e2, e1] = fn(a, b);
    for (const ExecOrder order : {ExecOrder::Dfs, ExecOrder::Bfs}) {
      CAPTURE(order);
      g.manual_seed(5);
      auto f = jit(fn, JitConfig{.exec_order = order, .verify = true});
      const auto [j2, j1] = f(a, b);
      CHECK(same(j1, e1));
      CHECK(same(j2, e2));
    }
  }

  TEST_CASE(
      "random functions: an unused draw still advances the generator; equal calls are not merged") {
    const Tensor x = random_tensor(float32, {32}, {-2, 2}, 3);
    Generator g(2);
    auto fn = [&](const Tensor& v) {
      (void)uniform({100}, 0.0, 1.0, g);  // unused, but eager draws it
      const Tensor c = ones({32});        // a constant input: must not be folded
      auto r = std::tuple{v + uniform({32}, 0.0, 1.0, g), v + uniform({32}, 0.0, 1.0, g),
                          dropout(c, 0.5, true, g)};
      (void)normal({50}, 0.0, 1.0, g);  // the last draw, unused
      return r;
    };
    const auto e = fn(x);
    const std::uint64_t off = g.offset();
    g.manual_seed(2);
    auto f = jit(fn, kTest);
    const auto j = f(x);
    CHECK(g.offset() == off);
    CHECK(same(std::get<0>(j), std::get<0>(e)));
    CHECK(same(std::get<1>(j), std::get<1>(e)));
    CHECK(same(std::get<2>(j), std::get<2>(e)));
    CHECK_FALSE(same(std::get<0>(j), std::get<1>(j)));
    const auto j2 = f(x);
    CHECK_FALSE(same(std::get<2>(j), std::get<2>(j2)));
    // The only draw, of a constant: drawn again at every call, never folded.
    auto h = jit([&](const Tensor& v) { return v + dropout(ones({32}), 0.5, true, g); }, kTest);
    CHECK_FALSE(same(h(x), h(x)));
  }

  TEST_CASE("random functions: the default generator and half-precision dropout under jit") {
    const Tensor x = random_tensor(float16, {5, 7}, {-2, 2}, 4);
    auto fn = [](const Tensor& v) { return std::tuple{dropout(v, 0.4), normal({3})}; };
    manual_seed(123);
    const auto e = fn(x);
    manual_seed(123);
    auto f = jit(fn, kTest);
    const auto j = f(x);
    CHECK(std::get<0>(j).dtype() == float16);
    CHECK(same(std::get<0>(j), std::get<0>(e)));
    CHECK(same(std::get<1>(j), std::get<1>(e)));
  }

  TEST_CASE("random functions: dropout's gradient uses the mask drawn in the forward pass") {
    const Tensor x = random_tensor(float32, {8, 16}, {-2, 2}, 5),
                 w = random_tensor(float32, {16}, {-2, 2}, 6);
    Generator g(9);
    auto loss = [&](const Tensor& v) { return sum(dropout(v * w, 0.5, true, g) * v); };
    // d/dv sum(mask * s * v * w * v) = 2 * mask * s * v * w
    const Tensor want_mask = [&] {
      Generator h(9);
      return dropout(ones({8, 16}), 0.5, true, h);  // scale where kept, 0 where dropped
    }();
    const Tensor want_grad = want_mask * x * w * 2.f;
    // Eager grad (trace, differentiate, run) and jitted value_and_grad agree with it.
    const Tensor eager = ms::grad(loss)(x);
    CHECK(allclose(eager, want_grad, 1e-6, 1e-6));
    CHECK(g.offset() == 32);  // 128 elements, 4 per block
    g.manual_seed(9);
    auto step = jit([&](const Tensor& v) { return value_and_grad(loss)(v); }, kTest);
    const auto [value, dx] = step(x);
    CHECK(allclose(dx, want_grad, 1e-6, 1e-6));
    CHECK(allclose(value, sum(want_mask * x * w * x), 1e-5, 1e-5));
    const auto [value2, dx2] = step(x);  // the next call draws a new mask
    CHECK_FALSE(allclose(dx2, dx, 0, 0));
    (void)value2;
  }

  TEST_CASE("random functions: a dynamic-shape graph draws the eager numbers at every size") {
    Generator g(3);
    auto fn = [&](const Tensor& v) -> Tensor {  // a Tensor, not an expression over a local
      const Tensor d = dropout(v, 0.25, true, g);
      return d + sum(normal({2}, 0, 1, g));
    };
    std::vector<Tensor> xs, want;
    for (std::int64_t n : {4, 6, 9, 13})
      xs.push_back(random_tensor(float32, {n, 3}, {-2, 2}, static_cast<unsigned>(n)));
    for (const Tensor& x : xs) want.push_back(fn(x));
    g.manual_seed(3);
    auto f = jit(fn, JitConfig{.dynamic = 1, .verify = true});
    for (std::size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(i);
      CHECK(same(f(xs[i]), want[i]));
    }
    CHECK(f.compile_count() == 3);  // two static graphs, then one generalized
    CHECK(f.phase().find("generalized graph #1 with s0=13") != std::string::npos);
    // One graph for every size: its draws take their shapes when it runs.
    CHECK(f.dump().find("not generalizable") == std::string::npos);
  }

  TEST_CASE(
      "random functions: a generator created inside the function draws constants, as eagerly") {
    auto fn = [](const Tensor& v) {
      Generator local(21);  // a fresh generator on every call: the same numbers every call
      return std::tuple{dropout(v, 0.5, true, local), uniform({4}, 0.0, 1.0, local)};
    };
    const Tensor x = random_tensor(float32, {6, 2}, {-2, 2}, 7);
    const auto e = fn(x);
    auto f = jit(fn, kTest);
    const auto j1 = f(x), j2 = f(x);
    CHECK(same(std::get<0>(j1), std::get<0>(e)));
    CHECK(same(std::get<1>(j1), std::get<1>(e)));
    CHECK(same(std::get<0>(j2), std::get<0>(e)));
    CHECK(same(std::get<1>(j2), std::get<1>(e)));
    CHECK(f.dump().find("Random(") == std::string::npos);  // constants, no draw node
    // Its draws for a tensor known only at run time: a clear error at trace time.
    auto p = jit([](const Tensor& v) {
      Generator local(1);
      return bernoulli(sigmoid(v), local);
    });
    CHECK_THROWS_WITH_AS(
        p(x), doctest::Contains("bernoulli: a Generator created inside the traced function"),
        ValueError);
    // Under auto-dynamic shapes its masks are constants made from the sizes:
    // the generalized graph is specialized per size, and still right.
    auto d = jit(
        [](const Tensor& v) {
          Generator local(1);
          return dropout(v, 0.5, true, local);
        },
        JitConfig{.dynamic = 1});
    for (std::int64_t n : {2, 3, 4, 5}) {
      const Tensor v = random_tensor(float32, {n, 2}, {-2, 2}, 1);
      Generator local(1);
      CHECK(same(d(v), dropout(v, 0.5, true, local)));
    }
  }
}
