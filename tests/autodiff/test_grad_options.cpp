// grad / value_and_grad options: a sensitivity for non-scalar outputs
// (MindSpore's sens_param), warnings for weights without a gradient, and a
// clear error instead of a silent zero when a second derivative would go
// through a backward op that has no gradient rule.
#include <doctest/doctest.h>

#include <ms/ms.hpp>
#include <string>
#include <vector>
#include "pool_calls.hpp"

using namespace ms;

namespace {
template <class O>
concept HasRelu = requires(O o) {
  o.relu;
};
}  // namespace

TEST_SUITE("autodiff.options") {
  TEST_CASE("sens_param: the gradient of a non-scalar output for a given sensitivity") {
    const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, float64);
    const Tensor s = tensor({{1.0, 0.5}, {-1.0, 2.0}}, float64);
    auto f = [](const Tensor& a) { return a * a * 3.0; };  // dy/dx = 6x
    const std::vector<Tensor> g = grad(f, 0, {}, sens_param)(x, s);
    REQUIRE(g.size() == 1);
    CHECK(allclose(g[0], x * 6.0 * s, 0, 0));
    // value_and_grad, and under ms::jit (the sensitivity is a graph input).
    auto vg = jit(value_and_grad(f, 0, {}, sens_param));
    auto [v, gs] = vg(x, s);
    CHECK(allclose(v, f(x), 0, 0));
    CHECK(allclose(gs[0], x * 6.0 * s, 0, 0));
    const Tensor s2 = s * 2.0;
    auto [v2, gs2] = vg(x, s2);
    CHECK(allclose(gs2[0], x * 12.0 * s, 0, 0));
    CHECK(vg.compile_count() == 1);
    // A weight with a sensitivity: y = x @ w, dL/dw = x^T @ s.
    const Tensor w = tensor({{1.0, -1.0}, {0.5, 2.0}}, float64);
    auto h = [&](const Tensor& a) { return matmul(a, w); };
    const std::vector<Tensor> gw = grad(h, std::nullopt, {w}, sens_param)(x, s);
    CHECK(allclose(gw[0], matmul(transpose(x, 0, 1), s), 1e-12, 0));
  }

  TEST_CASE("sens_param: bad sensitivities and a missing one are clear errors") {
    const Tensor x = ones({2, 3});
    auto f = [](const Tensor& a) { return a * 2.f; };
    CHECK_THROWS_WITH_AS(grad(f)(x), doctest::Contains("pass ms::sens_param"), ValueError);
    CHECK_THROWS_WITH_AS(grad(f, 0, {}, sens_param)(x, ones({3, 2})),
                         doctest::Contains("the sensitivity has shape [3, 2] but the function's "
                                           "output has shape [2, 3]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(grad(f, 0, {}, sens_param)(x, ones({2, 3}, int32)),
                         doctest::Contains("the sensitivity has dtype Int32"), TypeError);
  }

  TEST_CASE("warn_unused: weights the function never touches are named in a warning") {
    const Tensor w = ones({3});
    Parameter unused(zeros({4}), "head.bias");
    std::vector<std::string> seen;
    auto prev = set_warning_handler([&](const std::string& s) { seen.push_back(s); });
    auto f = [&](const Tensor& a) { return sum(a * w); };
    const std::vector<Tensor> g =
        grad(f, std::nullopt, {w, unused}, GradOptions{.warn_unused = true})(ones({3}));
    set_warning_handler(prev);
    CHECK(allclose(g[0], ones({3}), 0, 0));
    CHECK(allclose(g[1], zeros({4}), 0, 0));
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].find("weight 1 'head.bias' gets no gradient") != std::string::npos);
    // Not asked: no warning.
    seen.clear();
    prev = set_warning_handler([&](const std::string& s) { seen.push_back(s); });
    grad(f, std::nullopt, {w, unused})(ones({3}));
    set_warning_handler(prev);
    CHECK(seen.empty());
  }

  TEST_CASE("second order through conv2d and pooling works (values: test_grad_second_order)") {
    const Tensor x = ones({1, 1, 4, 4}, float64);
    const Tensor k = ones({1, 1, 3, 3}, float64);
    auto f = [&](const Tensor& w) { return sum(square(conv2d(x, w))); };
    CHECK(grad(f)(k).shape() == k.shape());
    // The second order goes through conv2d_grad_weight and max_pool2d_grad.
    auto df = [&](const Tensor& w) { return sum(grad(f)(w)); };
    CHECK(grad(df)(k).shape() == k.shape());
    auto p = [&](const Tensor& a) { return sum(square(ms::test::max_pool(a, {2, 2}))); };
    auto dp = [&](const Tensor& a) { return sum(grad(p)(a)); };
    CHECK(grad(dp)(x).shape() == x.shape());
    // Ops whose zero gradient is right still give zeros (floor, comparisons).
    auto q = [](const Tensor& a) { return sum(ms::floor(a) + a); };
    CHECK(allclose(grad(q)(x), ones({1, 1, 4, 4}, float64), 0, 0));
  }

  TEST_CASE("the jit's fused forms are not ops a user or autodiff can reach") {
    // relu, max_pool2x2 and their gradient forms are the jit's fused ops
    // (ms/jit/detail/fused_ops.hpp), made after differentiation: conv2d's
    // options hold none of them, and the op table does not list them.
    static_assert(!HasRelu<Conv2dOptions>);
    for (const char* name : {"conv2d_fused", "max_pool2d_grad_relu", "max_pool2x2_grad_index"})
      CHECK_THROWS_AS(ops::op(name), ValueError);
  }
}
