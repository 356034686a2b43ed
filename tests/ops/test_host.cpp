// Host callbacks (ms/ops/host.hpp): eager calls, and every bad input.
#include <doctest/doctest.h>

#include <ms/ms.hpp>

using namespace ms;

TEST_SUITE("ops") {
  TEST_CASE("host_call runs eagerly; grad_hook is the identity without a trace") {
    const Tensor x = arange(0, 4);
    int calls = 0;
    auto twice = [&](std::vector<Tensor> v) {
      ++calls;
      return std::vector<Tensor>{Tensor(v[0] * 2.f)};
    };
    CHECK(allclose(ops::host_call(twice, {x}, "twice")[0], x * 2.f));
    CHECK(calls == 1);
    auto never = [](std::vector<Tensor>) -> std::vector<Tensor> {
      throw std::logic_error("not called without a gradient");
    };
    CHECK(ops::grad_hook(never, {x}, "id")[0].is_same(x));
    auto never_vjp = [](std::vector<Tensor>, Tensor, Tensor) -> std::vector<Tensor> {
      throw std::logic_error("not called without a gradient");
    };
    const Tensor out = x * 2.f;
    CHECK(ops::custom_grad(never_vjp, {x}, out, "c").is_same(out));
  }

  TEST_CASE("custom_grad: the callback gives the inputs' gradients, none flows to out") {
    const Tensor x = arange(0, 4).to(float32), w = full({4}, 3.0, float32);
    int calls = 0;
    auto vjp = [&](std::vector<Tensor> in, Tensor out, Tensor dout) {
      ++calls;
      CHECK(in.size() == 1);
      CHECK(out.shape() == Shape({4}));
      return std::vector<Tensor>{Tensor(dout * 10.f)};
    };
    // out = x * w: autodiff would give w (3) to x and x to w.
    auto f = [&](const Tensor& a, const Tensor& b) {
      return sum(ops::custom_grad(vjp, {a}, Tensor(a * b), "c") * 2.f);
    };
    const auto g = grad(f, {.position = {0, 1}})(x, w);
    CHECK(calls == 1);
    CHECK(allclose(g[0], full({4}, 20.0, float32), 0, 0));
    CHECK(allclose(g[1], zeros({4}), 0, 0));  // b is used only by out's ops
    const auto jg = jit(grad(f, {.position = {0, 1}}))(x, w);
    CHECK(allclose(jg[0], g[0], 0, 0));
    CHECK(allclose(jg[1], g[1], 0, 0));
  }

  TEST_CASE("host_call and grad_hook: bad input") {
    const Tensor x = arange(0, 4);
    CHECK_THROWS_WITH_AS(ops::host_call({}, {x}, "f"),
                         doctest::Contains("host_call 'f': empty function"), ValueError);
    auto id = [](std::vector<Tensor> v) { return v; };
    CHECK_THROWS_WITH_AS(ops::host_call(id, {}, "f"),
                         doctest::Contains("needs at least one tensor"), ValueError);
    CHECK_THROWS_WITH_AS(ops::host_call(id, {Tensor()}, "f"), doctest::Contains("undefined input"),
                         ValueError);
    auto none = [](std::vector<Tensor>) { return std::vector<Tensor>{}; };
    CHECK_THROWS_WITH_AS(ops::host_call(none, {x}, "f"),
                         doctest::Contains("host_callback 'f': returned 0 tensors for 1 inputs"),
                         ValueError);
    auto reshaped = [](std::vector<Tensor> v) { return std::vector<Tensor>{v[0].reshape({2, 2})}; };
    CHECK_THROWS_WITH_AS(ops::host_call(reshaped, {x}, "f"),
                         doctest::Contains("must keep its input's type"), ValueError);
    auto cast = [](std::vector<Tensor> v) { return std::vector<Tensor>{v[0].to(float64)}; };
    CHECK_THROWS_AS(ops::host_call(cast, {x}, "f"), ValueError);
    CHECK_THROWS_WITH_AS(ops::grad_hook({}, {x}, "g"),
                         doctest::Contains("grad_hook 'g': empty function"), ValueError);
    CHECK_THROWS_WITH_AS(ops::grad_hook(id, {}, "g"),
                         doctest::Contains("needs at least one tensor"), ValueError);
    auto vjp = [](std::vector<Tensor> in, Tensor, Tensor) { return in; };
    CHECK_THROWS_WITH_AS(ops::custom_grad({}, {x}, x, "c"),
                         doctest::Contains("custom_grad 'c': empty function"), ValueError);
    CHECK_THROWS_WITH_AS(ops::custom_grad(vjp, {}, x, "c"),
                         doctest::Contains("custom_grad 'c': needs at least one input"),
                         ValueError);
    CHECK_THROWS_WITH_AS(ops::custom_grad(vjp, {x}, Tensor(), "c"),
                         doctest::Contains("custom_grad 'c': undefined output"), ValueError);
    // Under ms::jit the same checks run when the graph runs.
    auto f = jit([&](const Tensor& a) { return ops::host_call(reshaped, {a}, "late")[0]; });
    CHECK_THROWS_WITH_AS(f(x), doctest::Contains("host_callback 'late'"), ValueError);
  }
}
