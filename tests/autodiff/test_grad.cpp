// ms::grad / ms::value_and_grad: values, composition with ms::jit and with
// themselves, stop_gradient, weights, errors; and a finite-difference check of
// every differentiable op of the table.
#include <doctest/doctest.h>

#include "random.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <ms/autodiff/gradcheck.hpp>
#include <ms/ms.hpp>
#include <random>
#include <set>

using namespace ms;
using ms::test::random_tensor;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
struct GradCase {
  std::string op;  // the op-table entry the case covers
  std::string what;
  Fn fn;
  std::vector<Tensor> inputs;
  std::vector<int> skip = {};
  double eps = 1e-6, atol = 1e-5;
};

/// Operand `i` of elementwise op Op, from its domain (ops::ew_domain).
template <class Op>
Tensor ew_operand(int i, const Shape& s, unsigned seed) {
  const ops::Domain d = ops::ew_domain<Op>(i);
  return random_tensor(float64, s, {.lo = d.lo, .hi = d.hi, .avoid_zero = d.avoid_zero}, seed);
}

template <class Op>
void add_ew_cases(std::vector<GradCase>& c) {
  if constexpr (ops::EwDifferentiable<Op> && Op::arity == 1) {
    c.push_back({std::string(Op::name),
                 "[3,4]",
                 [](const auto& x) { return Tensor(EwFunction<Op>{}(x[0])); },
                 {ew_operand<Op>(0, {3, 4}, 1)}});
  } else if constexpr (ops::EwDifferentiable<Op> && Op::arity == 2) {
    const Fn f = [](const auto& x) { return Tensor(EwFunction<Op>{}(x[0], x[1])); };
    c.push_back({std::string(Op::name),
                 "[3,4] with [4] (broadcast)",
                 f,
                 {ew_operand<Op>(0, {3, 4}, 2), ew_operand<Op>(1, {4}, 3)}});
    c.push_back({std::string(Op::name),
                 "[2,1,3] with [4,1]",
                 f,
                 {ew_operand<Op>(0, {2, 1, 3}, 4), ew_operand<Op>(1, {4, 1}, 5)}});
  }
}

template <class... Ops>
void add_all_ew_cases(std::vector<GradCase>& c, ops::OpList<Ops...>) {
  (add_ew_cases<Ops>(c), ...);
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> c;
  // Every differentiable elementwise op, unary and binary (where and clamp below),
  // on operands from its domain.
  add_all_ew_cases(c, ops::ElementwiseOps{});
  c.push_back({"mul",
               "with weak scalars",
               [](const auto& x) { return Tensor(x[0] * 3.f - 1.f); },
               {random_tensor(float64, {5}, {-2, 2}, 6)}});
  c.push_back(
      {"where",
       "where(x > 0, x, y)",
       [](const auto& x) { return Tensor(where(x[0] > 0.f, x[0] * x[1], x[1])); },
       {random_tensor(float64, {3, 4}, {-2, 2}, 7), random_tensor(float64, {4}, {-2, 2}, 8)}});
  c.push_back(
      {"clamp",
       "clamp(x, lo, hi)",
       [](const auto& x) { return Tensor(clamp(x[0], x[1], x[2])); },
       {random_tensor(float64, {3, 4}, {-2, 2}, 9), random_tensor(float64, {4}, {-1.5, -0.5}, 10),
        random_tensor(float64, {3, 1}, {0.5, 1.5}, 11)}});
  const Tensor r34 = random_tensor(float64, {3, 4}, {-2, 2}, 12);
  // Host callbacks and grad hooks: their entries' samples; replacing gradients
  // is tested in tests/nn.
  c.push_back({"custom_grad",
               "product with its own vjp",
               [](const auto& x) {
                 auto vjp = [](std::vector<Tensor> in, Tensor, Tensor dout) {
                   return std::vector<Tensor>{Tensor(dout * in[1]), Tensor(dout * in[0])};
                 };
                 return ops::custom_grad(vjp, {x[0], x[1]}, Tensor(x[0] * x[1]), "test");
               },
               {r34, random_tensor(float64, {3, 4}, {-2, 2}, 58)}});
  // max_pool2d_grad(x, gy) at ties (the first maximum), NaN (the last one), a
  // window of -inf next to padding (its first tap inside the input), a window
  // whose maximum 0 comes after padding taps (padding is never chosen),
  // overlapping windows: only gy (x is not differentiable there). Its other
  // cases: the entry's samples.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const Tensor ties = tensor({{-1.0, 0.0, 2.0, 2.0, nan},
                              {0.0, -3.0, 1.0, 2.0, nan},
                              {0.5, 0.5, 3.0, 3.0, 1.0},
                              {-inf, -inf, 3.0, 0.0, -1.0},
                              {-inf, -inf, -2.0, 0.0, -1.0}})
                          .reshape({1, 5, 5});
  const MaxPool2dOptions three{.kernel = {3}, .stride = {1}, .padding = {1}};
  c.push_back({"max_pool2d_grad",
               "ties, NaN, -inf, 3x3 stride 1 pad 1",
               [=](const auto& v) { return max_pool2d_grad(v[0], v[1], three); },
               {ties, random_tensor(float64, max_pool2d(ties, three).shape(), {-2, 2}, 78)},
               {0}});
  return c;
}
}  // namespace

TEST_SUITE("autodiff") {
  TEST_CASE("gradcheck: every differentiable op of the table") {
    std::set<std::string> covered;
    for (const GradCase& gc : grad_cases()) {
      INFO(gc.op, " ", gc.what);
      const auto r =
          testing::gradcheck(gc.fn, gc.inputs, {.eps = gc.eps, .atol = gc.atol, .skip = gc.skip});
      CHECK_MESSAGE(r.ok, r.message);
      covered.insert(gc.op);
    }
    // Every differentiable op has a rule and a case; non-differentiable ones
    // are marked so in the table.
    for (const ops::OpDef* d : ops::registry()) {
      if (!d->differentiable) continue;
      CHECK_MESSAGE(static_cast<bool>(d->grad), "op '", d->name,
                    "' is differentiable but has no gradient rule (its entry's vjp)");
      if (d->samples != nullptr) continue;  // its entry's samples: tests/ops/test_entries.cpp
      CHECK_MESSAGE(covered.count(std::string(d->name)) == 1, "op '", d->name,
                    "' has no gradcheck case");
    }
  }

  TEST_CASE("grad and value_and_grad, eager") {
    auto f = [](const auto& x) -> Tensor { return sum(x * x * 3.0); };
    const Tensor x = tensor({1.0, -2.0, 0.5});
    CHECK(allclose(grad(f)(x), tensor({6.0, -12.0, 3.0})));
    auto [v, g] = value_and_grad(f)(x);
    CHECK(v.item<double>() == doctest::Approx(15.75));
    CHECK(allclose(g, tensor({6.0, -12.0, 3.0})));
  }

  TEST_CASE("positions, weights, and their order") {
    const Tensor w = tensor({2.0, 3.0}), b = tensor({0.5});
    auto loss = [&](const auto& x, const auto& y) -> Tensor { return sum(x * w * y + b); };
    const Tensor x = tensor({1.0, 1.0}), y = tensor({4.0, 5.0});
    const std::vector<Tensor> g = grad(loss, {.position = {1, 0}, .weights = {w, b}})(x, y);
    REQUIRE(g.size() == 4);
    CHECK(allclose(g[0], tensor({2.0, 3.0})));   // d/dy = x * w
    CHECK(allclose(g[1], tensor({8.0, 15.0})));  // d/dx = w * y
    CHECK(allclose(g[2], tensor({4.0, 5.0})));   // d/dw = x * y
    CHECK(allclose(g[3], tensor({2.0})));        // d/db: b broadcast over 2 elements
    const std::vector<Tensor> only_w = grad(loss, {.position = std::nullopt, .weights = {w}})(x, y);
    REQUIRE(only_w.size() == 1);
    CHECK(allclose(only_w[0], tensor({4.0, 5.0})));
  }

  TEST_CASE("an untouched weight gets zeros; stop_gradient blocks") {
    const Tensor w = tensor({1.0, 2.0}), unused = tensor({7.0});
    auto f = [&](const auto& x) -> Tensor { return sum(x * stop_gradient(x) + w); };
    const std::vector<Tensor> g =
        grad(f, {.position = 0, .weights = {w, unused}})(tensor({3.0, 4.0}));
    CHECK(allclose(g[0], tensor({3.0, 4.0})));  // only the unstopped factor
    CHECK(allclose(g[1], tensor({1.0, 1.0})));
    CHECK(allclose(g[2], tensor({0.0})));
  }

  TEST_CASE("has_aux: the first output is differentiated, the rest returned") {
    auto f = [](const auto& x) { return std::make_tuple(sum(x * x), Tensor(x + 1.0)); };
    auto [v, g] = value_and_grad(f, {.position = 0, .has_aux = true})(tensor({1.0, 2.0}));
    CHECK(std::get<0>(v).item<double>() == 5.0);
    CHECK(allclose(std::get<1>(v), tensor({2.0, 3.0})));
    CHECK(allclose(g[0], tensor({2.0, 4.0})));
  }

  TEST_CASE("under ms::jit: compiled once, cached, same numbers as eager") {
    const Tensor w = random_tensor(float64, {4, 3}, {-2, 2}, 30),
                 b = random_tensor(float64, {3}, {-2, 2}, 31);
    auto loss = [&](const auto& x) -> Tensor {
      return mean(log_softmax(Tensor(matmul(x, w) + b), -1) * -1.0);
    };
    auto vg = value_and_grad(loss, {.position = 0, .weights = {w, b}});
    auto step = jit(vg, {.verify = true});
    const Tensor x = random_tensor(float64, {5, 4}, {-2, 2}, 32);
    const auto eager = vg(x);
    const auto j1 = step(x);
    const auto j2 = step(x);
    CHECK(step.compile_count() == 1);
    CHECK(allclose(j1.value, eager.value, 1e-12, 1e-12));
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(allclose(j1.grads[i], eager.grads[i], 1e-12, 1e-12));
      CHECK(allclose(j2.grads[i], eager.grads[i], 1e-12, 1e-12));
    }
  }

  TEST_CASE("conv -> relu -> pool -> sum: jit(grad) matches eager grad") {
    const Tensor w1 = random_tensor(float64, {4, 2, 3, 3}, {-2, 2}, 60),
                 b1 = random_tensor(float64, {4}, {-2, 2}, 61),
                 w2 = random_tensor(float64, {3, 4, 2, 2}, {-2, 2}, 62);
    auto f = [&](const auto& x) -> Tensor {
      const Tensor h = max_pool2d(relu(conv2d(x, w1, b1, {.padding = {1}})), {.kernel = {2, 2}});
      const Tensor a =
          avg_pool2d(conv2d(h, w2, std::nullopt, {.stride = {1}}), {.kernel = {2}, .stride = {1}});
      return sum(a * a);  // not linear: the pooling gradient is not a constant
    };
    const auto df = grad(f, {.position = 0, .weights = {w1, b1, w2}});
    auto jdf = jit(df, {.verify = true});
    for (unsigned seed : {63u, 64u}) {
      CAPTURE(seed);
      const Tensor x = random_tensor(float64, {3, 2, 8, 8}, {-2, 2}, seed);
      const std::vector<Tensor> eager = df(x);
      const std::vector<Tensor> jitted = jdf(x);
      REQUIRE(eager.size() == 4);
      REQUIRE(jitted.size() == 4);
      for (std::size_t i = 0; i < 4; ++i) {
        CHECK(eager[i].shape() == jitted[i].shape());
        CHECK(allclose(jitted[i], eager[i], 1e-12, 1e-12));
      }
      CHECK(eager[1].shape() == w1.shape());
    }
    CHECK(jdf.compile_count() == 1);
    // The backward graph holds the backward ops (max_pool2d_grad in its
    // compiled form: from the taps the fused conv2d + relu + pool noted).
    for (const char* node :
         {"Conv2DGradInput(", "Conv2DGradWeight(", "MaxPool2x2GradIndex(", "AvgPool2DGrad("})
      CHECK_MESSAGE(jdf.dump().find(node) != std::string::npos, node, "\n", jdf.dump());
  }

  TEST_CASE("grad of grad (elementwise and matmul)") {
    auto f = [](const auto& x) -> Tensor { return sum(x * x * x); };  // f' = 3x^2, f'' = 6x
    auto df = [&](const auto& x) -> Tensor { return sum(grad(f)(x)); };
    CHECK(allclose(grad(df)(tensor({1.0, -2.0})), tensor({6.0, -12.0})));
    const Tensor a = tensor({{1.0, 2.0}, {3.0, 4.0}});
    auto g = [&](const auto& x) -> Tensor { return sum(matmul(x, a) * x); };  // x(A + A^T)
    auto dg = [&](const auto& x) -> Tensor { return sum(grad(g)(x)); };
    // d/dx sum(x (A + A^T)) = row sums of (A + A^T): [1+1+2+3, 3+2+4+4] = [7, 13]
    CHECK(allclose(grad(dg)(tensor({{0.5, -1.0}})), tensor({{7.0, 13.0}})));
  }

  TEST_CASE("bad input") {
    auto vec_out = [](const auto& x) -> Tensor { return x * 2.0; };
    CHECK_THROWS_WITH_AS(grad(vec_out)(tensor({1.0, 2.0})), doctest::Contains("only a scalar"),
                         ValueError);
    auto f = [](const auto& x) -> Tensor { return sum(x); };
    CHECK_THROWS_WITH_AS(grad(f, {.position = 3})(tensor({1.0})),
                         doctest::Contains("grad_position 3"), IndexError);
    CHECK_THROWS_WITH_AS(grad(f)(tensor({1, 2})), doctest::Contains("floating"), TypeError);
    auto g2 = [](const auto& x, int k) -> Tensor { return sum(x * static_cast<double>(k)); };
    CHECK_THROWS_WITH_AS(grad(g2, {.position = 1})(tensor({1.0}), 3),
                         doctest::Contains("not a tensor"), TypeError);
  }
}
