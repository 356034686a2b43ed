// grad / value_and_grad options: one options struct (position, weights,
// has_aux, warn_unused) in every combination, a sensitivity for non-scalar outputs
// (MindSpore's sens_param), warnings for weights without a gradient, and a
// clear error instead of a silent zero when a second derivative would go
// through a backward op that has no gradient rule.
#include <doctest/doctest.h>

#include <ms/ms.hpp>
#include <string>
#include <tuple>
#include <type_traits>
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
  // loss(x, y) = sum(x * w * y + b): d/dx = w * y, d/dy = x * w, d/dw = x * y, d/db = 2.
  struct Fixture {
    Tensor w = tensor({2.0, 3.0}), b = tensor({0.5});
    Tensor x = tensor({1.0, 1.0}), y = tensor({4.0, 5.0});
    Tensor dx = tensor({8.0, 15.0}), dy = tensor({2.0, 3.0}), dw = tensor({4.0, 5.0}),
           db = tensor({2.0});
    auto loss() const {
      return [w = w, b = b](const Tensor& a, const Tensor& c) { return sum(a * w * c + b); };
    }
  };

  TEST_CASE("no options: argument 0, a Tensor (MindSpore's defaults)") {
    const Fixture t;
    const Tensor g = grad(t.loss())(t.x, t.y);
    CHECK(allclose(g, t.dx, 0, 0));
    auto [v, gv] = value_and_grad(t.loss())(t.x, t.y);
    static_assert(std::is_same_v<decltype(gv), Tensor>);
    CHECK(v.item<double>() == doctest::Approx(24.0));
    CHECK(allclose(gv, t.dx, 0, 0));
  }

  TEST_CASE("position: one index, a list in its order, or none; weights follow") {
    const Fixture t;
    const auto loss = t.loss();
    const std::vector<Tensor> one = grad(loss, {.position = 1})(t.x, t.y);
    REQUIRE(one.size() == 1);
    CHECK(allclose(one[0], t.dy, 0, 0));
    const std::vector<Tensor> both = grad(loss, {.position = {1, 0}})(t.x, t.y);
    REQUIRE(both.size() == 2);
    CHECK(allclose(both[0], t.dy, 0, 0));
    CHECK(allclose(both[1], t.dx, 0, 0));
    // Options left out keep their defaults: position 0 plus the weights.
    const std::vector<Tensor> x_and_w = grad(loss, {.weights = {t.w, t.b}})(t.x, t.y);
    REQUIRE(x_and_w.size() == 3);
    CHECK(allclose(x_and_w[0], t.dx, 0, 0));
    CHECK(allclose(x_and_w[1], t.dw, 0, 0));
    CHECK(allclose(x_and_w[2], t.db, 0, 0));
    const std::vector<Tensor> only_w =
        grad(loss, {.position = std::nullopt, .weights = {t.b, t.w}})(t.x, t.y);
    REQUIRE(only_w.size() == 2);
    CHECK(allclose(only_w[0], t.db, 0, 0));
    CHECK(allclose(only_w[1], t.dw, 0, 0));
    // A std::vector of positions (built at run time), and a cell's parameters as weights.
    const std::vector<int> pos{0, 1};
    CHECK(grad(loss, {.position = pos})(t.x, t.y).size() == 2);
    Parameter p(tensor({1.0, 1.0}), "scale");
    auto scaled = [&](const Tensor& a) { return sum(a * p); };
    const std::vector<Tensor> gp =
        grad(scaled, {.position = std::nullopt, .weights = ParameterList{p}})(t.x);
    CHECK(allclose(gp[0], t.x, 0, 0));
  }

  TEST_CASE("value_and_grad with every field, eagerly and under ms::jit") {
    const Fixture t;
    const Tensor w = t.w;
    auto f = [&](const Tensor& a, const Tensor& c) {
      return std::make_tuple(sum(a * w * c), Tensor(a + c));
    };
    auto vg = value_and_grad(f, {.position = {0, 1}, .weights = {w}, .has_aux = true});
    auto check = [&](const auto& r) {
      CHECK(Tensor(std::get<0>(r.value)).item<double>() == doctest::Approx(23.0));
      CHECK(allclose(std::get<1>(r.value), t.x + t.y, 0, 0));  // aux: returned as is
      REQUIRE(r.grads.size() == 3);
      CHECK(allclose(r.grads[0], t.dx, 0, 0));
      CHECK(allclose(r.grads[1], t.dy, 0, 0));
      CHECK(allclose(r.grads[2], t.dw, 0, 0));
    };
    check(vg(t.x, t.y));
    auto step = jit(vg);
    check(step(t.x, t.y));
    check(step(t.x, t.y));
    CHECK(step.compile_count() == 1);
  }

  TEST_CASE("has_aux: grad returns {grads, aux}, the aux outputs get no gradient") {
    const Fixture t;
    // The aux output depends on x; it must not add to x's gradient.
    auto f = [](const Tensor& a) { return std::make_tuple(sum(a * a), Tensor(a * 10.0)); };
    auto [g, aux] = grad(f, {.has_aux = true})(t.y);
    REQUIRE(g.size() == 1);
    CHECK(allclose(g[0], t.y * 2.0, 0, 0));
    REQUIRE(aux.size() == 1);
    CHECK(allclose(aux[0], t.y * 10.0, 0, 0));
    auto [jg, jaux] = jit(grad(f, {.has_aux = true}))(t.y);
    CHECK(allclose(jg[0], g[0], 0, 0));
    CHECK(allclose(jaux[0], aux[0], 0, 0));
    // Several outputs without has_aux: a clear error naming the option.
    CHECK_THROWS_WITH_AS(grad(f, {.position = 0})(t.y), doctest::Contains("pass {.has_aux = true}"),
                         ValueError);
  }

  TEST_CASE("bad positions are errors naming grad_position and the argument") {
    const Fixture t;
    CHECK_THROWS_WITH_AS(grad(t.loss(), {.position = {0, 2}})(t.x, t.y),
                         doctest::Contains("grad_position 2 is out of range for a function of 2"),
                         IndexError);
    CHECK_THROWS_WITH_AS(grad(t.loss(), {.position = -1})(t.x, t.y),
                         doctest::Contains("grad_position -1"), IndexError);
  }
  TEST_CASE("sens_param: the gradient of a non-scalar output for a given sensitivity") {
    const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, float64);
    const Tensor s = tensor({{1.0, 0.5}, {-1.0, 2.0}}, float64);
    auto f = [](const Tensor& a) { return a * a * 3.0; };  // dy/dx = 6x
    const std::vector<Tensor> g = grad(f, {.position = 0}, sens_param)(x, s);
    REQUIRE(g.size() == 1);
    CHECK(allclose(g[0], x * 6.0 * s, 0, 0));
    // value_and_grad, and under ms::jit (the sensitivity is a graph input).
    auto vg = jit(value_and_grad(f, {.position = 0}, sens_param));
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
    const std::vector<Tensor> gw =
        grad(h, {.position = std::nullopt, .weights = {w}}, sens_param)(x, s);
    CHECK(allclose(gw[0], matmul(transpose(x, 0, 1), s), 1e-12, 0));
  }

  TEST_CASE("sens_param: bad sensitivities and a missing one are clear errors") {
    const Tensor x = ones({2, 3});
    auto f = [](const Tensor& a) { return a * 2.f; };
    CHECK_THROWS_WITH_AS(grad(f)(x), doctest::Contains("pass ms::sens_param"), ValueError);
    CHECK_THROWS_WITH_AS(grad(f, {.position = 0}, sens_param)(x, ones({3, 2})),
                         doctest::Contains("the sensitivity has shape [3, 2] but the function's "
                                           "output has shape [2, 3]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(grad(f, {.position = 0}, sens_param)(x, ones({2, 3}, int32)),
                         doctest::Contains("the sensitivity has dtype Int32"), TypeError);
  }

  TEST_CASE("warn_unused: weights the function never touches are named in a warning") {
    const Tensor w = ones({3});
    Parameter unused(zeros({4}), "head.bias");
    std::vector<std::string> seen;
    auto prev = set_warning_handler([&](const std::string& s) { seen.push_back(s); });
    auto f = [&](const Tensor& a) { return sum(a * w); };
    const std::vector<Tensor> g =
        grad(f, {.position = std::nullopt, .weights = {w, unused}, .warn_unused = true})(ones({3}));
    set_warning_handler(prev);
    CHECK(allclose(g[0], ones({3}), 0, 0));
    CHECK(allclose(g[1], zeros({4}), 0, 0));
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].find("weight 1 'head.bias' gets no gradient") != std::string::npos);
    // Not asked: no warning.
    seen.clear();
    prev = set_warning_handler([&](const std::string& s) { seen.push_back(s); });
    grad(f, {.position = std::nullopt, .weights = {w, unused}})(ones({3}));
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
