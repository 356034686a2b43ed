// ms::hook_grad: gradient hooks on intermediate values, under ms::grad eagerly
// and inside compiled graphs.
#include <doctest/doctest.h>

#include <ms/autodiff/grad.hpp>
#include <ms/autodiff/tensor_hooks.hpp>
#include <ms/ops/elementwise.hpp>
#include <ms/ops/random.hpp>
#include <ms/ops/reduce.hpp>
#include <vector>

namespace {

ms::Tensor sample(std::uint64_t seed) {
  ms::Generator g(seed);
  return ms::normal({3, 4}, 0.0, 1.0, g);
}

}  // namespace

TEST_SUITE("autodiff") {
  TEST_CASE("hook_grad sees an intermediate's gradient and its replacement flows on") {
    const ms::Tensor x = sample(1);
    const ms::Tensor w = sample(2);
    std::vector<ms::Tensor> seen;
    auto plain = [&](const ms::Tensor& a) {
      ms::Tensor h = ms::tanh(a * w);
      return ms::sum(h * h);
    };
    auto hooked = [&](const ms::Tensor& a) {
      ms::Tensor h = ms::hook_grad(ms::tanh(a * w), [&](const ms::Tensor& g) {
        CHECK_FALSE(g.is_symbolic());  // the hook sees concrete values
        seen.push_back(g);
        return ms::Tensor(g * 0.5f);
      });
      return ms::sum(h * h);
    };
    const ms::Tensor g0 = ms::grad(plain)(x);
    const ms::Tensor g1 = ms::grad(hooked)(x);
    REQUIRE(seen.size() == 1);
    const ms::Tensor h = ms::tanh(x * w);
    CHECK(ms::allclose(seen[0], h * 2.0f, 1e-6, 1e-6));  // d sum(h^2) / dh
    CHECK(ms::allclose(g1, g0 * 0.5f, 1e-6, 1e-6));      // halved before tanh's rule
    // the forward value is untouched, and outside ms::grad the hook is inert
    CHECK(ms::allclose(hooked(x), plain(x), 0, 0));
    CHECK(seen.size() == 1);
  }

  TEST_CASE("hook_grad runs in a compiled graph on every call, with that call's gradient") {
    const ms::Tensor w = sample(3);
    int calls = 0;
    ms::Tensor last;
    auto loss = [&](const ms::Tensor& a) {
      ms::Tensor h = ms::hook_grad(
          a * w,
          [&](const ms::Tensor& g) {
            ++calls;
            last = g;
          },
          "a*w");
      return ms::sum(ms::square(h));
    };
    auto step = ms::jit(ms::grad(loss));
    for (std::uint64_t s = 10; s < 13; ++s) {
      const ms::Tensor x = sample(s);
      const ms::Tensor dx = step(x);
      CHECK(ms::allclose(dx, ms::grad(loss)(x), 1e-6, 1e-6));  // == eager
      CHECK(ms::allclose(last, x * w * 2.0f, 1e-5, 1e-6));     // this call's gradient
    }
    CHECK(step.compile_count() == 1);
    CHECK(calls == 6);  // 3 compiled calls + 3 eager grads
  }

  TEST_CASE("hook_grad: several uses of the hooked value reach the hook once, summed") {
    const ms::Tensor x = sample(4);
    ms::Tensor seen;
    auto loss = [&](const ms::Tensor& a) {
      ms::Tensor h = ms::hook_grad(a * 3.0f, [&](const ms::Tensor& g) { seen = g; });
      return ms::sum(h) + ms::sum(h * 2.0f);
    };
    const ms::Tensor dx = ms::grad(loss)(x);
    CHECK(ms::allclose(seen, ms::full(x.shape(), 3.0f), 0, 0));
    CHECK(ms::allclose(dx, ms::full(x.shape(), 9.0f), 0, 0));
  }

  TEST_CASE("hook_grad: a replacement of the wrong shape or dtype is an error naming the hook") {
    const ms::Tensor x = sample(5);
    auto bad_shape = [&](const ms::Tensor& a) {
      return ms::sum(ms::hook_grad(
          a * 2.0f, [](const ms::Tensor&) { return ms::zeros({2}); }, "mid"));
    };
    CHECK_THROWS_WITH_AS(ms::grad(bad_shape)(x), doctest::Contains("hook_grad: the hook 'mid'"),
                         ms::ShapeError);
    auto bad_dtype = [&](const ms::Tensor& a) {
      return ms::sum(ms::hook_grad(
          a * 2.0f, [](const ms::Tensor& g) { return g.to(ms::float64); }, "mid"));
    };
    CHECK_THROWS_WITH_AS(ms::grad(bad_dtype)(x), doctest::Contains("Float64"), ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::hook_grad(
                             ms::Tensor(), [](const ms::Tensor&) {}, "u"),
                         doctest::Contains("undefined"), ms::ValueError);
  }
}
