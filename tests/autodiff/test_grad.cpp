// ms::grad / ms::value_and_grad: values, composition with ms::jit and with
// themselves, stop_gradient, weights, errors; and a finite-difference check of
// every differentiable op of the table.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <ms/autodiff/gradcheck.hpp>
#include <ms/ms.hpp>
#include <random>
#include <set>

using namespace ms;

namespace {
Tensor rnd(const Shape& s, unsigned seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(shape_numel(s)));
  for (double& x : v) x = std::uniform_real_distribution<double>(lo, hi)(rng);
  return from_vector(v, s);
}
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
  Tensor t = rnd(s, seed, d.lo, d.hi);
  if (d.avoid_zero) t = where(ms::abs(t) < 0.25, where(t < 0.0, -0.25, 0.25), t);
  return t;
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
               {rnd({5}, 6)}});
  c.push_back({"where",
               "where(x > 0, x, y)",
               [](const auto& x) { return Tensor(where(x[0] > 0.f, x[0] * x[1], x[1])); },
               {rnd({3, 4}, 7), rnd({4}, 8)}});
  c.push_back({"clamp",
               "clamp(x, lo, hi)",
               [](const auto& x) { return Tensor(clamp(x[0], x[1], x[2])); },
               {rnd({3, 4}, 9), rnd({4}, 10, -1.5, -0.5), rnd({3, 1}, 11, 0.5, 1.5)}});
  const Tensor r34 = rnd({3, 4}, 12);
  // Views (the other layout ops: their entries' samples).
  c.push_back({"slice", "", [](const auto& x) { return x[0].slice(1, 1, 3); }, {r34}});
  c.push_back({"slice",
               "step 2 from 1 (the tail cropped)",
               [](const auto& x) { return x[0].slice(1, 1, 4, 2); },
               {r34}});
  c.push_back({"slice",
               "step 3, negative start, axis 0",
               [](const auto& x) { return x[0].slice(0, -3, 3, 3); },
               {rnd({5, 2}, 29)}});
  c.push_back({"slice",
               "step 2 of a 3-D middle axis",
               [](const auto& x) { return x[0].slice(1, 0, 5, 2); },
               {rnd({2, 5, 3}, 30)}});
  c.push_back({"select", "", [](const auto& x) { return x[0].select(0, 1); }, {r34}});
  // Host callbacks (ms/ops/host.hpp): the identity for gradients; a grad hook
  // that returns what it gets (replacing gradients is tested in tests/nn).
  c.push_back({"host_callback",
               "identity",
               [](const auto& x) {
                 auto id = [](std::vector<Tensor> v) { return v; };
                 return Tensor(ops::host_call(id, {x[0]}, "test")[0] * 2.0);
               },
               {r34}});
  c.push_back({"grad_hook",
               "identity",
               [](const auto& x) {
                 auto id = [](std::vector<Tensor> g) { return g; };
                 return Tensor(ops::grad_hook(id, {x[0]}, "test")[0] * 2.0);
               },
               {r34}});
  // A custom gradient (a Cell's bprop) that is the true one: x0 * x1.
  c.push_back({"custom_grad",
               "product with its own vjp",
               [](const auto& x) {
                 auto vjp = [](std::vector<Tensor> in, Tensor, Tensor dout) {
                   return std::vector<Tensor>{Tensor(dout * in[1]), Tensor(dout * in[0])};
                 };
                 return ops::custom_grad(vjp, {x[0], x[1]}, Tensor(x[0] * x[1]), "test");
               },
               {r34, rnd({3, 4}, 58)}});
  // conv2d (input, weight, bias) and pooling.
  c.push_back({"conv2d",
               "stride 2, padding 1, groups 2, bias",
               [](const auto& x) {
                 return conv2d(x[0], x[1], x[2], {.stride = {2}, .padding = {1}, .groups = 2});
               },
               {rnd({2, 4, 5, 5}, 40), rnd({6, 2, 3, 3}, 41), rnd({6}, 42)}});
  c.push_back({"conv2d",
               "dilation 2, padding (2, 1), stride (1, 2), no bias",
               [](const auto& x) {
                 return conv2d(x[0], x[1], std::nullopt,
                               {.stride = {1, 2}, .padding = {2, 1}, .dilation = {2}});
               },
               {rnd({1, 3, 6, 7}, 43), rnd({2, 3, 2, 3}, 44)}});
  c.push_back({"conv2d",
               "1x1 (the direct GEMM path)",
               [](const auto& x) { return conv2d(x[0], x[1], x[2]); },
               {rnd({2, 3, 3, 4}, 45), rnd({5, 3, 1, 1}, 46), rnd({5}, 47)}});
  // Max pooling: distinct values (no ties), at least 0.01 apart, so that a
  // step of 1e-6 never changes which element is the maximum.
  const auto distinct = [](const Shape& s, unsigned seed) {
    std::vector<double> v(static_cast<std::size_t>(shape_numel(s)));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.01 * static_cast<double>(i) - 1.0;
    std::shuffle(v.begin(), v.end(), std::mt19937(seed));
    return from_vector(v, s);
  };
  c.push_back({"max_pool2d",
               "2x2",
               [](const auto& x) {
                 return max_pool2d(x[0], {2, 2});
               },
               {distinct({2, 3, 4, 6}, 48)}});
  c.push_back({"max_pool2d",
               "3x3 stride 2 pad 1 dilation 1, ceil mode (overlapping windows)",
               [](const auto& x) { return max_pool2d(x[0], {3}, {2}, {1}, {1}, true); },
               {distinct({1, 2, 6, 7}, 49)}});
  c.push_back({"max_pool2d",
               "2x3 dilation 2, 3-D input",
               [](const auto& x) {
                 return max_pool2d(x[0], {2, 3}, {1}, {0}, {2});
               },
               {distinct({2, 6, 7}, 50)}});
  c.push_back({"avg_pool2d",
               "2x2",
               [](const auto& x) {
                 return avg_pool2d(x[0], {2, 2});
               },
               {rnd({2, 3, 4, 6}, 51)}});
  c.push_back({"avg_pool2d",
               "3x3 stride 2 pad 1, ceil mode, padding not counted",
               [](const auto& x) { return avg_pool2d(x[0], {3}, {2}, {1}, true, false); },
               {rnd({1, 2, 6, 7}, 52)}});
  c.push_back({"avg_pool2d",
               "3x2 stride 1 pad 1, padding counted, 3-D input",
               [](const auto& x) {
                 return avg_pool2d(x[0], {3, 2}, {1}, {1}, false, true);
               },
               {rnd({2, 5, 4}, 53)}});
  c.push_back({"softmax_cross_entropy",
               "int64 labels",
               [](const auto& x) { return softmax_cross_entropy(x[0], x[1]); },
               {rnd({4, 5}, 58), tensor({0, 4, 2, 4}, int64)}});
  // The backward ops, differentiable again (grad of grad): each is linear in
  // its gradient input (conv2d's bilinear), so central differences are exact up
  // to rounding. A last input row no window reaches (9 rows, kernel 3, stride
  // 3, padding 1: windows end at row 7) checks the transposes' edges.
  const Conv2dOptions strided{.stride = {3, 2}, .padding = {1}, .groups = 2};
  const Conv2dOptions dilated{.stride = {1, 2}, .padding = {2, 1}, .dilation = {2}};
  c.push_back({"conv2d_grad_input",
               "stride (3, 2), padding 1, groups 2, a row no window reaches",
               [=](const auto& x) {
                 return conv2d_grad_input(x[0], x[1], {2, 4, 9, 6}, strided);
               },
               {rnd({2, 6, 3, 3}, 70), rnd({6, 2, 3, 3}, 71)}});
  c.push_back({"conv2d_grad_input",
               "dilation 2, padding (2, 1), stride (1, 2)",
               [=](const auto& x) {
                 return conv2d_grad_input(x[0], x[1], {1, 3, 6, 7}, dilated);
               },
               {rnd({1, 2, 8, 3}, 72), rnd({2, 3, 2, 3}, 73)}});
  c.push_back({"conv2d_grad_weight",
               "stride (3, 2), padding 1, groups 2, a row no window reaches",
               [=](const auto& x) {
                 return conv2d_grad_weight(x[0], x[1], {6, 2, 3, 3}, strided);
               },
               {rnd({2, 4, 9, 6}, 74), rnd({2, 6, 3, 3}, 75)}});
  c.push_back({"conv2d_grad_weight",
               "dilation 2, padding (2, 1), stride (1, 2)",
               [=](const auto& x) {
                 return conv2d_grad_weight(x[0], x[1], {2, 3, 2, 3}, dilated);
               },
               {rnd({1, 3, 6, 7}, 76), rnd({1, 2, 8, 3}, 77)}});
  // max_pool2d_grad(x, gy): linear in gy; in x a step function, 0 almost
  // everywhere (distinct x: a step of 1e-6 never moves a window's maximum).
  const auto pool_grad_case = [&](std::string what, std::vector<std::int64_t> k,
                                  std::vector<std::int64_t> s, std::vector<std::int64_t> p,
                                  std::vector<std::int64_t> d, bool ceil, Tensor x,
                                  std::vector<int> skip = {}) {
    const Tensor gy = rnd(max_pool2d(x, k, s, p, d, ceil).shape(), 78);
    c.push_back({"max_pool2d_grad",
                 what,
                 [=](const auto& v) { return max_pool2d_grad(v[0], v[1], k, s, p, d, ceil); },
                 {x, gy},
                 skip});
  };
  pool_grad_case("2x2", {2, 2}, {}, {0, 0}, {1, 1}, false, distinct({2, 3, 4, 6}, 79));
  pool_grad_case("3x3 stride 2 pad 1, ceil mode (overlapping windows)", {3}, {2}, {1}, {1}, true,
                 distinct({1, 2, 6, 7}, 80));
  pool_grad_case("2x3 dilation 2, 3-D input", {2, 3}, {1}, {0}, {2}, false,
                 distinct({2, 6, 7}, 81));
  // Ties (the first maximum), NaN (the last one), a window of -inf next to
  // padding (its first tap inside the input), a window whose maximum 0 comes
  // after padding taps (padding is never chosen), overlapping windows: only gy
  // (x is not differentiable there).
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  pool_grad_case("ties, NaN, -inf, 3x3 stride 1 pad 1", {3}, {1}, {1}, {1}, false,
                 tensor({{-1.0, 0.0, 2.0, 2.0, nan},
                         {0.0, -3.0, 1.0, 2.0, nan},
                         {0.5, 0.5, 3.0, 3.0, 1.0},
                         {-inf, -inf, 3.0, 0.0, -1.0},
                         {-inf, -inf, -2.0, 0.0, -1.0}})
                     .reshape({1, 5, 5}),
                 {0});
  // The jit's activation fusion sets "relu" (x = relu(y)): a window whose
  // chosen input is not > 0 passes nothing, in the gradient's gradient too.
  c.push_back({"max_pool2d_grad",
               "with the fused relu attribute, 3x3 stride 2 pad 1",
               [](const auto& v) {
                 return ops::call1(ops::op("max_pool2d_grad"), {v[0], v[1]},
                                   {{"kernel_size", std::vector<std::int64_t>{3}},
                                    {"stride", std::vector<std::int64_t>{2}},
                                    {"padding", std::vector<std::int64_t>{1}},
                                    {"relu", true}});
               },
               {distinct({1, 2, 6, 7}, 89), rnd({1, 2, 3, 4}, 90)}});
  c.push_back({"avg_pool2d_grad",
               "2x2",
               [](const auto& x) {
                 return avg_pool2d_grad(x[0], {2, 3, 4, 6}, {2, 2});
               },
               {rnd({2, 3, 2, 3}, 82)}});
  c.push_back({"avg_pool2d_grad",
               "3x3 stride 2 pad 1, ceil mode, padding not counted",
               [](const auto& x) {
                 return avg_pool2d_grad(x[0], {1, 2, 6, 7}, {3}, {2}, {1}, true, false);
               },
               {rnd({1, 2, 4, 4}, 83)}});
  c.push_back({"avg_pool2d_grad",
               "3x2 stride 1 pad 1, padding counted, 3-D input",
               [](const auto& x) {
                 return avg_pool2d_grad(x[0], {2, 5, 4}, {3, 2}, {1}, {1}, false, true);
               },
               {rnd({2, 5, 5}, 84)}});
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
                    "' is differentiable but has no gradient rule (src/ops/grad.cpp)");
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
    const Tensor w = rnd({4, 3}, 30), b = rnd({3}, 31);
    auto loss = [&](const auto& x) -> Tensor {
      return mean(log_softmax(Tensor(matmul(x, w) + b), -1) * -1.0);
    };
    auto vg = value_and_grad(loss, {.position = 0, .weights = {w, b}});
    auto step = jit(vg, {.verify = true});
    const Tensor x = rnd({5, 4}, 32);
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
    const Tensor w1 = rnd({4, 2, 3, 3}, 60), b1 = rnd({4}, 61), w2 = rnd({3, 4, 2, 2}, 62);
    auto f = [&](const auto& x) -> Tensor {
      const Tensor h = max_pool2d(relu(conv2d(x, w1, b1, {.padding = {1}})), {2, 2});
      const Tensor a = avg_pool2d(conv2d(h, w2, std::nullopt, {.stride = {1}}), {2}, {1});
      return sum(a * a);  // not linear: the pooling gradient is not a constant
    };
    const auto df = grad(f, {.position = 0, .weights = {w1, b1, w2}});
    auto jdf = jit(df, {.verify = true});
    for (unsigned seed : {63u, 64u}) {
      CAPTURE(seed);
      const Tensor x = rnd({3, 2, 8, 8}, seed);
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
