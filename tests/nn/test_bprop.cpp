// A cell's own backward (`bprop`), used instead of autodiff through construct:
// eagerly and under ms::jit, with parameters, with backward hooks, bad bprops.
#include <doctest/doctest.h>

#include <ms/cell.hpp>

namespace {

// A straight-through estimator: round forward, the identity backward
// (autodiff through round would give zeros).
struct Ste : ms::Cell<Ste> {
  int bprop_calls = 0;
  ms::Tensor construct(const ms::Tensor& x) { return ms::round(x); }
  std::vector<ms::Tensor> bprop(const ms::Tensor&, const ms::Tensor&, const ms::Tensor& dout) {
    ++bprop_calls;
    return {dout};
  }
};

// The same forward without a bprop.
struct Round : ms::Cell<Round> {
  ms::Tensor construct(const ms::Tensor& x) { return ms::round(x); }
};

// Two inputs; bprop scales dout for x and gives y no gradient (a std::tuple).
struct Scale : ms::Cell<Scale> {
  ms::Tensor construct(const ms::Tensor& x, const ms::Tensor& y) { return x * y; }
  std::tuple<ms::Tensor, ms::Tensor> bprop(const ms::Tensor&, const ms::Tensor&, const ms::Tensor&,
                                           const ms::Tensor& dout) {
    return {ms::Tensor(dout * 3.0f), ms::Tensor()};
  }
};

// bprop uses the input and the output: d/dx = dout * (out + x), differentiable again.
struct Square : ms::Cell<Square> {
  ms::Tensor construct(const ms::Tensor& x) { return x * x; }
  std::vector<ms::Tensor> bprop(const ms::Tensor& x, const ms::Tensor& out,
                                const ms::Tensor& dout) {
    return {ms::Tensor(dout * (out + x))};
  }
};

// A parameter used inside construct: MindSpore gives it a zero gradient.
struct WithParam : ms::Cell<WithParam> {
  ms::Parameter w{ms::full({3}, 2.0, ms::float32), "w"};
  WithParam() { register_parameter("w", w); }
  ms::Tensor construct(const ms::Tensor& x) { return x * w; }
  std::vector<ms::Tensor> bprop(const ms::Tensor&, const ms::Tensor&, const ms::Tensor& dout) {
    return {ms::Tensor(dout * 5.0f)};
  }
};

// WithParam without its bprop.
struct Plain : ms::Cell<Plain> {
  ms::Parameter w{ms::full({3}, 2.0, ms::float32), "w"};
  Plain() { register_parameter("w", w); }
  ms::Tensor construct(const ms::Tensor& x) { return x * w; }
};

struct WrongCount : ms::Cell<WrongCount> {
  ms::Tensor construct(const ms::Tensor& x) { return x * 2.0f; }
  std::vector<ms::Tensor> bprop(const ms::Tensor&, const ms::Tensor&, const ms::Tensor& dout) {
    return {dout, dout};
  }
};

struct WrongShape : ms::Cell<WrongShape> {
  ms::Tensor construct(const ms::Tensor& x, const ms::Tensor& y) { return x * y; }
  std::vector<ms::Tensor> bprop(const ms::Tensor&, const ms::Tensor&, const ms::Tensor&,
                                const ms::Tensor& dout) {
    return {dout, ms::ones({5})};
  }
};

struct WrongDtype : ms::Cell<WrongDtype> {
  ms::Tensor construct(const ms::Tensor& x) { return x * 2.0f; }
  std::vector<ms::Tensor> bprop(const ms::Tensor&, const ms::Tensor&, const ms::Tensor& dout) {
    return {dout.to(ms::float64)};
  }
};

ms::Tensor input6() { return ms::Tensor(ms::arange(0, 6).to(ms::float32) * 0.7f - 1.9f); }

ms::Tensor weights6() { return ms::Tensor(ms::arange(0, 6).to(ms::float32) + 1.0f); }

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("bprop replaces autodiff: a straight-through estimator, eagerly and under jit") {
    static_assert(Ste::has_bprop() && !Round::has_bprop());
    Ste ste;
    Round plain;
    const ms::Tensor x = input6(), c = weights6();
    // No trace: construct only, bprop is not called.
    CHECK(ms::allclose(ste(x), ms::round(x), 0, 0));
    CHECK(ste.bprop_calls == 0);
    auto loss = [&](const ms::Tensor& a) { return ms::sum(ste(a) * c); };
    const ms::Tensor g = ms::grad(loss)(x);
    CHECK(ste.bprop_calls == 1);
    CHECK(ms::allclose(g, c, 0, 0));  // dout flows straight through
    // Without bprop, autodiff through round gives zeros.
    auto plain_loss = [&](const ms::Tensor& a) { return ms::sum(plain(a) * c); };
    CHECK(ms::allclose(ms::grad(plain_loss)(x), ms::zeros({6}), 0, 0));
    // Under jit(value_and_grad): bprop is traced once into the compiled graph.
    auto step = ms::jit(ms::value_and_grad(loss));
    auto [v, jg] = step(x);
    CHECK(ms::allclose(v, ms::sum(ms::round(x) * c), 1e-6, 1e-6));
    CHECK(ms::allclose(jg, c, 0, 0));
    const int traced = ste.bprop_calls;
    auto [v2, jg2] = step(ms::Tensor(x * 2.0f));
    CHECK(ste.bprop_calls == traced);  // cached graph: no retrace
    CHECK(ms::allclose(jg2, c, 0, 0));
    CHECK(ms::allclose(v2, ms::sum(ms::round(x * 2.0f) * c), 1e-6, 1e-6));
    // A forward-only graph gives construct's value.
    auto fwd = ms::jit([&](const ms::Tensor& a) { return ste(a); });
    CHECK(ms::allclose(fwd(x), ms::round(x), 0, 0));
  }

  TEST_CASE("bprop that scales, with an input it gives no gradient (a std::tuple)") {
    Scale net;
    const ms::Tensor x = input6(), y = weights6();
    auto loss = [&](const ms::Tensor& a, const ms::Tensor& b) { return ms::sum(net(a, b)); };
    const auto g = ms::grad(loss, {.position = {0, 1}})(x, y);
    REQUIRE(g.size() == 2);
    CHECK(ms::allclose(g[0], ms::full({6}, 3.0, ms::float32), 0, 0));
    CHECK(ms::allclose(g[1], ms::zeros({6}), 0, 0));  // undefined: no gradient
    const auto jg = ms::jit(ms::grad(loss, {.position = {0, 1}}))(x, y);
    CHECK(ms::allclose(jg[0], g[0], 0, 0));
    CHECK(ms::allclose(jg[1], g[1], 0, 0));
    CHECK(ms::allclose(net(x, y), x * y, 0, 0));
  }

  TEST_CASE("bprop's ops are traced: it sees x and out, and is differentiable again") {
    Square net;
    const ms::Tensor x = input6();
    // d/dx sum(net(x)) = out + x = x^2 + x (not autodiff's 2x).
    auto loss = [&](const ms::Tensor& a) { return ms::sum(net(a)); };
    CHECK(ms::allclose(ms::grad(loss)(x), x * x + x, 1e-6, 1e-6));
    CHECK(ms::allclose(ms::jit(ms::grad(loss))(x), x * x + x, 1e-6, 1e-6));
    // The gradient of that gradient, sum(dout * (out + x)): `out` is the
    // cell's output, so its gradient is bprop's again (x^2 + x), plus 1 for x.
    auto gsum = [&](const ms::Tensor& a) { return ms::sum(ms::grad(loss)(a)); };
    CHECK(ms::allclose(ms::grad(gsum)(x), x * x + x + 1.0f, 1e-5, 1e-5));
  }

  TEST_CASE("parameters used inside construct get a zero gradient (as MindSpore)") {
    WithParam net;
    const ms::Tensor x = ms::ones({3});
    auto loss = [&](const ms::Tensor& a) { return ms::sum(net(a)); };
    for (bool jitted : {false, true}) {
      CAPTURE(jitted);
      auto gf = ms::grad(loss, {.position = 0, .weights = net.trainable_params()});
      const auto g = jitted ? ms::jit(gf)(x) : gf(x);
      REQUIRE(g.size() == 2);
      CHECK(ms::allclose(g[0], ms::full({3}, 5.0, ms::float32), 0, 0));
      CHECK(ms::allclose(g[1], ms::zeros({3}), 0, 0));
    }
  }

  TEST_CASE("bprop with backward hooks: pre-hooks change dout, hooks see bprop's gradients") {
    Ste ste;
    const ms::Tensor x = input6(), c = weights6();
    std::vector<std::string> order;
    ms::Tensor seen_gin, seen_gout;
    auto h1 = ste.register_backward_pre_hook([&](Ste&, const ms::Args& g) {
      order.push_back("pre");
      return ms::Args{ms::Tensor(g[0] * 2.0f)};
    });
    auto h2 = ste.register_backward_hook([&](Ste& s, const ms::Args& gin, const ms::Args& gout) {
      order.push_back("hook");
      CHECK(s.bprop_calls > 0);  // bprop was traced before the hook ran
      seen_gin = gin[0];
      seen_gout = gout[0];
      return ms::Args{ms::Tensor(gin[0] + 1.0f)};
    });
    auto loss = [&](const ms::Tensor& a) { return ms::sum(ste(a) * c); };
    for (bool jitted : {false, true}) {
      CAPTURE(jitted);
      order.clear();
      const ms::Tensor g = jitted ? ms::jit(ms::grad(loss))(x) : ms::grad(loss)(x);
      CHECK(order == std::vector<std::string>{"pre", "hook"});
      CHECK(ms::allclose(seen_gout, c * 2.0f, 0, 0));  // dout after the pre-hook
      CHECK(ms::allclose(seen_gin, c * 2.0f, 0, 0));   // bprop's gradient (dout)
      CHECK(ms::allclose(g, c * 2.0f + 1.0f, 0, 0));   // the hook's replacement
    }
    h1.remove();
    h2.remove();
    CHECK(ms::allclose(ms::grad(loss)(x), c, 0, 0));
  }

  TEST_CASE("a bad bprop is an error naming the cell, bprop and the input") {
    const ms::Tensor x = input6();
    WrongCount wc;
    auto l1 = [&](const ms::Tensor& a) { return ms::sum(wc(a)); };
    CHECK_THROWS_WITH_AS(ms::grad(l1)(x),
                         doctest::Contains("WrongCount.bprop: returned 2 gradients, expected 1"),
                         ms::ValueError);
    CHECK_THROWS_AS(ms::jit(ms::grad(l1))(x), ms::ValueError);
    WrongShape ws;
    auto l2 = [&](const ms::Tensor& a) { return ms::sum(ws(a, a)); };
    CHECK_THROWS_WITH_AS(
        ms::grad(l2)(x),
        doctest::Contains("WrongShape.bprop: the gradient of input 1 has shape [5], expected [6]"),
        ms::ShapeError);
    WrongDtype wd;
    auto l3 = [&](const ms::Tensor& a) { return ms::sum(wd(a)); };
    CHECK_THROWS_WITH_AS(ms::grad(l3)(x),
                         doctest::Contains("WrongDtype.bprop: the gradient of input 0 has dtype "
                                           "Float64, expected Float32"),
                         ms::TypeError);
    // The forward alone never calls bprop, so it raises nothing.
    CHECK(ms::allclose(wc(x), x * 2.0f, 0, 0));
  }

  TEST_CASE("a cell without bprop: autodiff through construct, unchanged") {
    Plain net;
    static_assert(!Plain::has_bprop());
    const ms::Tensor x = ms::full({3}, 4.0, ms::float32);
    auto loss = [&](const ms::Tensor& a) { return ms::sum(net(a)); };
    const auto g = ms::grad(loss, {.position = 0, .weights = net.trainable_params()})(x);
    CHECK(ms::allclose(g[0], ms::full({3}, 2.0, ms::float32), 0, 0));
    CHECK(ms::allclose(g[1], x, 0, 0));
  }
}
