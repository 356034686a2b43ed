// Second-order gradients through the backward ops of conv2d, pooling and
// indexing (conv2d_grad_input, conv2d_grad_weight, max_pool2d_grad,
// avg_pool2d_grad, gather_grad, index_select_grad): grad(grad(f)) against
// central differences of the first-order gradient (float64), and a gradient
// penalty training step (loss + ||d loss / d x||^2, WGAN-GP style) eager, under
// ms::jit, and against central differences.
#include <doctest/doctest.h>

#include "random.hpp"

#include <ms/autodiff/gradcheck.hpp>
#include <ms/ms.hpp>
#include <random>
#include "pool_calls.hpp"

using namespace ms;
using ms::test::random_tensor;

namespace {

struct ConvCase {
  std::string what;
  Conv2dOptions opts;
  Shape x, w;
};
const ConvCase kConvs[] = {
    {"stride 1, padding 1", {.padding = {1}}, {2, 2, 6, 6}, {4, 2, 3, 3}},
    // 9 rows, kernel 3, stride 3, padding 1: windows end at row 7, the last
    // input row is in none (its gradient is 0)
    {"stride (3, 2), padding 1, groups 2, a row no window reaches",
     {.stride = {3, 2}, .padding = {1}, .groups = 2},
     {1, 4, 9, 8},
     {4, 2, 3, 3}},
    {"dilation 2, padding (2, 1), stride (1, 2)",
     {.stride = {1, 2}, .padding = {2, 1}, .dilation = {2}},
     {1, 2, 6, 7},
     {3, 2, 3, 2}},
};

struct PoolCase {
  std::string what;
  std::vector<std::int64_t> kernel, stride, padding;
  bool ceil_mode;
};
const PoolCase kPools[] = {
    {"2x2 (windows apart)", {2}, {2}, {0}, false},
    {"3x3 stride 2 pad 1, ceil mode (overlapping windows)", {3}, {2}, {1}, true},
};

// conv -> relu -> max_pool -> sum of squares (squares: the sum alone is
// piecewise linear, its second derivative zero).
Tensor max_model(const Tensor& x, const Tensor& w, const Tensor& b, const ConvCase& cc,
                 const PoolCase& pc) {
  const Tensor h = relu(conv2d(x, w, b, cc.opts));
  return sum(square(ms::test::max_pool(h, pc.kernel, pc.stride, pc.padding, {1}, pc.ceil_mode)));
}

// conv -> tanh -> avg_pool -> index_select (channels, repeated) -> gather
// (positions, repeated) -> sum of squares. The indices are made before any
// trace: a 2-D ms::tensor({{...}}) inside one throws (it writes in place).
struct Indices {
  Tensor channels = tensor({3, 0, 0, 2}, int64);
  Tensor positions = tensor({{0, 5, 5, 35, 17}, {2, 2, 29, 0, 14}}, int64);
};
Tensor avg_model(const Tensor& x, const Tensor& w, const Indices& ix) {
  const Tensor h =
      ms::tanh(conv2d(x, w, std::nullopt, {.stride = {2}, .padding = {1}, .groups = 2}));
  const Tensor p = ms::test::avg_pool(h, {3}, {2}, {1}, true, false);  // [N, 4, 3, 3]
  const Tensor s = index_select(p, 1, ix.channels);
  const Tensor f = flatten(s, 1);  // [N, 36]
  const Tensor g = gather(f, 1, ix.positions);
  return sum(square(g));
}

void check(const testing::GradcheckResult& r) { CHECK_MESSAGE(r.ok, r.message); }
}  // namespace

TEST_SUITE("autodiff") {
  TEST_CASE("grad(grad(f)) of conv -> relu -> max_pool -> sum: finite differences") {
    for (const ConvCase& cc : kConvs)
      for (const PoolCase& pc : kPools) {
        CAPTURE(cc.what);
        CAPTURE(pc.what);
        const Tensor x = random_tensor(float64, cc.x, {}, 1),
                     w = random_tensor(float64, cc.w, {}, 2),
                     b = random_tensor(float64, {cc.w[0]}, {-0.2, 0.2}, 3);
        // The first-order gradient w.r.t. the input, then w.r.t. the weight; its
        // finite differences w.r.t. x, w and b are grad(grad(f)) (a random
        // weighting of it, Hessian-vector products).
        for (int wrt : {0, 1}) {
          CAPTURE(wrt);
          check(testing::gradcheck(
              [&](const std::vector<Tensor>& v) {
                auto f = [&](const Tensor& a, const Tensor& k) {
                  return max_model(a, k, v[2], cc, pc);
                };
                return grad(f, {.position = wrt})(v[0], v[1])[0];
              },
              {x, w, b}));
        }
      }
  }

  TEST_CASE("grad(grad(f)) of conv -> tanh -> avg_pool -> index_select -> gather") {
    const Tensor x = random_tensor(float64, {2, 4, 8, 8}, {}, 4),
                 w = random_tensor(float64, {4, 2, 3, 3}, {}, 5);
    const Indices ix;
    for (int wrt : {0, 1}) {
      CAPTURE(wrt);
      check(testing::gradcheck(
          [&](const std::vector<Tensor>& v) {
            return grad([&](const Tensor& a, const Tensor& k) { return avg_model(a, k, ix); },
                        {.position = wrt})(v[0], v[1])[0];
          },
          {x, w}));
    }
  }

  TEST_CASE("the norm of a gradient, differentiated: one backward op at a time") {
    // Each backward op alone between a first-order gradient and its norm.
    const Tensor x = random_tensor(float64, {1, 2, 5, 5}, {}, 6),
                 w = random_tensor(float64, {2, 2, 2, 2}, {}, 7);
    const Conv2dOptions o{.padding = {1}, .dilation = {2}};
    auto norm_of_grad = [](auto f) {
      return [f](const std::vector<Tensor>& v) {
        const std::vector<Tensor> g = grad(f, {.position = {0, 1}})(v[0], v[1]);
        return Tensor(sum(square(g[0])) + sum(square(g[1])));
      };
    };
    // conv2d's gradient holds conv2d_grad_input and conv2d_grad_weight.
    check(testing::gradcheck(norm_of_grad([&](const Tensor& a, const Tensor& k) {
                               return sum(square(conv2d(a, k, std::nullopt, o)));
                             }),
                             {x, w}));
    // The pooling and indexing gradients, with the weight as a scale.
    check(testing::gradcheck(norm_of_grad([](const Tensor& a, const Tensor& k) {
                               return sum(
                                   square(ms::test::max_pool(Tensor(a * sum(k)), {3}, {1}, {1})));
                             }),
                             {x, w}));
    check(testing::gradcheck(
        norm_of_grad([](const Tensor& a, const Tensor& k) {
          return sum(square(ms::test::avg_pool(Tensor(a * sum(k)), {2}, {1}, {1}, false, false)));
        }),
        {x, w}));
    check(testing::gradcheck(
        norm_of_grad([](const Tensor& a, const Tensor& k) {
          return sum(square(Tensor(index_select(a, -1, tensor({4, 4, 0}, int64)) * sum(k))));
        }),
        {x, w}));
  }

  TEST_CASE("a gradient-penalty training step: eager, jit and finite differences agree") {
    const ConvCase& cc = kConvs[1];
    const PoolCase& pc = kPools[1];
    Tensor w = random_tensor(float64, cc.w, {}, 8),
           b = random_tensor(float64, {cc.w[0]}, {-0.2, 0.2}, 9);
    const Tensor x = random_tensor(float64, cc.x, {}, 10);
    const Tensor target = random_tensor(float64,
                                        ms::test::max_pool(conv2d(x, w, b, cc.opts), pc.kernel,
                                                           pc.stride, pc.padding, {1}, pc.ceil_mode)
                                            .shape(),
                                        {0, 1}, 11);
    // loss + 0.1 ||d loss / d x||^2, differentiated w.r.t. the conv weight and bias.
    auto total_of = [&](const Tensor& a, const Tensor& k, const Tensor& c) {
      auto loss = [&](const Tensor& xx) {
        const Tensor h = relu(conv2d(xx, k, c, cc.opts));
        const Tensor y = ms::test::max_pool(h, pc.kernel, pc.stride, pc.padding, {1}, pc.ceil_mode);
        return mean(square(Tensor(y - target)));
      };
      return Tensor(loss(a) + sum(square(grad(loss)(a))) * 0.1);
    };
    auto total = [&](const auto& a) -> Tensor { return total_of(a, w, b); };
    auto step = grad(total, {.position = std::nullopt, .weights = {w, b}});
    auto jstep = jit(step, {.verify = true});
    for (int it = 0; it < 3; ++it) {
      CAPTURE(it);
      const std::vector<Tensor> eager = step(x);
      const std::vector<Tensor> jitted = jstep(x);
      REQUIRE(eager.size() == 2);
      REQUIRE(jitted.size() == 2);
      for (std::size_t i = 0; i < 2; ++i) CHECK(allclose(jitted[i], eager[i], 1e-10, 1e-12));
      // The eager gradient against central differences of the penalized loss.
      const testing::GradcheckResult r = testing::gradcheck(
          [&](const std::vector<Tensor>& v) { return total_of(x, v[0], v[1]); }, {w, b});
      CHECK_MESSAGE(r.ok, r.message);
      // SGD on the parameters in place (the jitted step reads them by identity).
      w.copy_(Tensor(w - eager[0] * 0.5));
      b.copy_(Tensor(b - eager[1] * 0.5));
    }
    CHECK(jstep.compile_count() == 1);
    // The second-order graph differentiates the backward ops (max_pool2d_grad
    // in the jit's fused form with relu's gradient: MaxPool2DGradRelu).
    const std::string dump = jstep.dump();
    for (const char* node : {"Conv2DGradInput(", "Conv2DGradWeight(", "MaxPool2DGrad"})
      CHECK_MESSAGE(dump.find(node) != std::string::npos, node, "\n", dump);
  }

  TEST_CASE("a gradient-penalty step through avg_pool, index_select and gather: eager and jit") {
    Tensor w = random_tensor(float64, {4, 2, 3, 3}, {}, 12);
    const Indices ix;
    const Tensor x = random_tensor(float64, {2, 4, 8, 8}, {}, 13);
    auto total_of = [&](const Tensor& a, const Tensor& k) {
      auto loss = [&](const Tensor& xx) { return avg_model(xx, k, ix); };
      return Tensor(loss(a) + sum(square(grad(loss)(a))) * 0.1);
    };
    auto total = [&](const auto& a) -> Tensor { return total_of(a, w); };
    auto step = grad(total, {.position = std::nullopt, .weights = {w}});
    auto jstep = jit(step, {.verify = true});
    for (int it = 0; it < 2; ++it) {
      CAPTURE(it);
      const Tensor eager = step(x).at(0), jitted = jstep(x).at(0);
      CHECK(allclose(jitted, eager, 1e-10, 1e-12));
      const testing::GradcheckResult r =
          testing::gradcheck([&](const std::vector<Tensor>& v) { return total_of(x, v[0]); }, {w});
      CHECK_MESSAGE(r.ok, r.message);
      w.copy_(Tensor(w - eager * 0.5));
    }
    CHECK(jstep.compile_count() == 1);
  }

  TEST_CASE("second order in float32 runs and is close to float64") {
    const ConvCase& cc = kConvs[0];
    const PoolCase& pc = kPools[0];
    const Tensor x = random_tensor(float64, cc.x, {}, 14), w = random_tensor(float64, cc.w, {}, 15),
                 b = random_tensor(float64, {cc.w[0]}, {}, 16);
    auto penalty = [&](const Tensor& a, const Tensor& k, const Tensor& c) {
      auto f = [&](const Tensor& xx) { return max_model(xx, k, c, cc, pc); };
      return sum(square(grad(f)(a)));
    };
    const Tensor g64 = grad(penalty, {.position = 1})(x, w, b)[0];
    const Tensor g32 =
        grad(penalty, {.position = 1})(x.to(float32), w.to(float32), b.to(float32))[0];
    CHECK(g32.dtype() == float32);
    CHECK(allclose(g32.to(float64), g64, 1e-3, 1e-3));
  }
  TEST_CASE("a gradient-penalty step under auto-dynamic shapes: batch sizes share one graph") {
    const ConvCase& cc = kConvs[0];
    const PoolCase& pc = kPools[1];
    const Tensor w = random_tensor(float64, cc.w, {}, 17),
                 b = random_tensor(float64, {cc.w[0]}, {-0.2, 0.2}, 18);
    auto total = [&](const auto& a) -> Tensor {
      auto loss = [&](const Tensor& xx) { return max_model(xx, w, b, cc, pc); };
      return Tensor(loss(a) + sum(square(grad(loss)(a))) * 0.1);
    };
    auto step = grad(total, {.position = std::nullopt, .weights = {w, b}});
    JitConfig dyn;
    dyn.dynamic = 1;
    std::string log;
    dyn.on_recompile = [&](const std::string& l) { log += l + "\n"; };
    auto jstep = jit(step, dyn);
    for (std::int64_t n : {2, 3, 4, 5, 1, 4}) {
      CAPTURE(n);
      const Tensor x = random_tensor(float64, {n, 2, 6, 6}, {}, 19 + static_cast<unsigned>(n));
      const std::vector<Tensor> eager = step(x), jitted = jstep(x);
      for (std::size_t i = 0; i < 2; ++i) CHECK(allclose(jitted[i], eager[i], 1e-10, 1e-12));
    }
    INFO(log);
    CHECK(jstep.compile_count() == 3);  // 2 static graphs, then one generalized graph
    CHECK(log.find("traced a graph of their own") == std::string::npos);
  }
}
