// Parameter::register_hook: gradient hooks on parameters, eagerly and under
// ms::jit, their order, replacement, removal and errors.
#include <doctest/doctest.h>

#include <ms/cell.hpp>

#include "nn/nn_test_util.hpp"

namespace {

using ms_test::input;

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("Parameter::register_hook: sees the gradient, replaces it, in registration order") {
    ms::nn::Dense fc(4, 3);
    const ms::Tensor x = input();
    auto loss = [&](const ms::Tensor& a) { return ms::sum(ms::square(fc(a))); };
    const ms::ParameterList params = fc.trainable_params();
    const auto plain = ms::grad(loss, {.position = std::nullopt, .weights = params})(x);
    std::vector<ms::Tensor> seen;
    auto h1 = fc.weight.register_hook([&](const ms::Tensor& g) { seen.push_back(g); });
    auto h2 = fc.weight.register_hook([](const ms::Tensor& g) { return ms::Tensor(g * 2.0f); });
    auto h3 = fc.weight.register_hook(
        [](const ms::Tensor& g) -> std::optional<ms::Tensor> { return ms::Tensor(g + 1.0f); });
    CHECK(fc.weight.hook_count() == 3);
    const auto hooked = ms::grad(loss, {.position = std::nullopt, .weights = params})(x);
    REQUIRE(seen.size() == 1);
    CHECK(ms::allclose(seen[0], plain[0], 0, 0));  // the first sees autodiff's
    CHECK(ms::allclose(hooked[0], plain[0] * 2.0f + 1.0f, 1e-6, 1e-6));  // x2, then +1
    CHECK(ms::allclose(hooked[1], plain[1], 0, 0));                      // the bias has no hook
    h2.remove();
    h2.remove();  // idempotent
    CHECK(fc.weight.hook_count() == 2);
    CHECK(ms::allclose(ms::grad(loss, {.position = std::nullopt, .weights = params})(x)[0],
                       plain[0] + 1.0f, 1e-6, 1e-6));
    h1.remove();
    h3.remove();
    CHECK(ms::allclose(ms::grad(loss, {.position = std::nullopt, .weights = params})(x)[0],
                       plain[0], 0, 0));
    CHECK(seen.size() == 2);
  }

  TEST_CASE("Parameter::register_hook: runs in compiled graphs on every call; changes recompile") {
    ms::nn::Dense fc(4, 3);
    const ms::Tensor x = input();
    const ms::ParameterList params = fc.trainable_params();
    auto loss = [&](const ms::Tensor& a) { return ms::sum(ms::square(fc(a))); };
    const auto plain = ms::grad(loss, {.position = std::nullopt, .weights = params})(x);
    auto step = ms::jit([&](const ms::Tensor& a) {
      return ms::value_and_grad(loss, {.position = std::nullopt, .weights = params})(a);
    });
    (void)step(x);
    CHECK(step.compile_count() == 1);
    int calls = 0;
    ms::HookHandle h = fc.bias.register_hook([&](const ms::Tensor& g) {
      ++calls;
      return ms::Tensor(ms::zeros_like(g));  // concrete: the hook runs on the host
    });
    const auto r1 = step(x);
    CHECK(step.compile_count() == 2);  // the hook version is in the key
    const auto r2 = step(x);
    CHECK(step.compile_count() == 2);
    CHECK(calls == 2);  // once per call, not once per compile
    CHECK(ms::allclose(r1.grads[1], ms::zeros({3}), 0, 0));
    CHECK(ms::allclose(r2.grads[0], plain[0], 1e-6, 1e-6));
    CHECK(step.dump().find("HostCallback") != std::string::npos);
    h.remove();
    CHECK(ms::allclose(step(x).grads[1], plain[1], 1e-6, 1e-6));
    CHECK(step.compile_count() == 3);
    CHECK(calls == 2);
  }

  TEST_CASE("Parameter::register_hook: copies share hooks; handles outlive the parameter") {
    ms::HookHandle h;
    int calls = 0;
    {
      ms::Parameter p(ms::ones({3}), "p");
      ms::Parameter copy = p;
      h = copy.register_hook([&](const ms::Tensor&) { ++calls; });
      CHECK(p.hook_count() == 1);
      auto f = [&](const ms::Tensor& a) { return ms::sum(a * p); };
      (void)ms::grad(f, {.position = std::nullopt, .weights = ms::ParameterList{p}})(ms::ones({3}));
      CHECK(calls == 1);
      // A weight the function does not use gets zeros and calls no hook.
      ms::Parameter unused(ms::ones({2}), "unused");
      unused.register_hook([&](const ms::Tensor&) { ++calls; });
      (void)ms::grad(
          f, {.position = std::nullopt, .weights = ms::ParameterList{p, unused}})(ms::ones({3}));
      CHECK(calls == 2);
    }
    h.remove();  // the parameter is gone: no effect, no crash
    h.remove();
  }

  TEST_CASE("Parameter::register_hook: a replacement of another shape or dtype is an error") {
    ms::Parameter p(ms::ones({2, 3}), "fc.weight");
    auto f = [&](const ms::Tensor& a) { return ms::sum(a * p); };
    const ms::Tensor x = ms::ones({2, 3});
    {
      ms::ScopedHook s = p.register_hook([](const ms::Tensor&) { return ms::zeros({3}); });
      CHECK_THROWS_WITH_AS(
          ms::grad(f, {.position = std::nullopt, .weights = ms::ParameterList{p}})(x),
          doctest::Contains(
              "register_hook: the hook of 'fc.weight' returned a gradient of shape [3]; expected "
              "[2, 3]"),
          ms::ShapeError);
    }
    {
      ms::ScopedHook s =
          p.register_hook([](const ms::Tensor& g) { return ms::Tensor(g.to(ms::float64)); });
      auto jf = ms::jit(ms::grad(f, {.position = std::nullopt, .weights = ms::ParameterList{p}}));
      CHECK_THROWS_WITH_AS(jf(x), doctest::Contains("returned a gradient of dtype Float64"),
                           ms::TypeError);
    }
    CHECK(p.hook_count() == 0);  // scoped hooks removed themselves
    CHECK(ms::allclose(
        ms::grad(f, {.position = std::nullopt, .weights = ms::ParameterList{p}})(x)[0], x, 0, 0));
  }

  TEST_CASE("ms::register_hook: a plain tensor's gradient under ms::grad; removal") {
    const ms::Tensor w = input();
    ms::Tensor x = input() * 2.0f;  // a tensor of its own (the whole storage)
    auto loss = [&](const ms::Tensor& a) { return ms::sum(ms::square(a * w)); };
    const ms::Tensor plain = ms::grad(loss)(x);
    int calls = 0;
    ms::HookHandle h = ms::register_hook(x, [&](const ms::Tensor& g) {
      ++calls;
      return ms::Tensor(g * 3.0f);
    });
    CHECK(ms::allclose(ms::grad(loss)(x), plain * 3.0f, 1e-6, 1e-6));
    const ms::Tensor copy = x;  // copies share the storage, so the hook
    CHECK(ms::allclose(ms::grad(loss)(copy), plain * 3.0f, 1e-6, 1e-6));
    CHECK(calls == 2);
    const ms::Tensor other = input() * 2.0f;  // equal values, another storage: no hook
    CHECK(ms::allclose(ms::grad(loss)(other), plain, 0, 0));
    CHECK(calls == 2);
    h.remove();
    CHECK(ms::allclose(ms::grad(loss)(x), plain, 0, 0));
    CHECK(calls == 2);
  }

  TEST_CASE("ms::register_hook: views, traced tensors and undefined tensors are refused") {
    const ms::Tensor x = input();
    CHECK_THROWS_WITH_AS(ms::register_hook(x.select(0, 1), [](const ms::Tensor&) {}),
                         doctest::Contains("whole storage"), ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::register_hook(ms::Tensor(), [](const ms::Tensor&) {}),
                         doctest::Contains("undefined"), ms::ValueError);
    auto traced = ms::jit([](const ms::Tensor& a) {
      (void)ms::register_hook(a, [](const ms::Tensor&) {});
      return a * 1.0f;
    });
    CHECK_THROWS_WITH_AS(traced(x), doctest::Contains("ms::hook_grad"), ms::ValueError);
    ms::HookHandle h;
    {
      ms::Tensor t = input() * 1.0f;
      h = ms::register_hook(t, [](const ms::Tensor&) {});
    }
    h.remove();  // safe after the tensor is gone
  }

  TEST_CASE("ms::register_hook: a reshape viewing the whole storage has hooks of its own") {
    const ms::Tensor x = input() * 2.0f;
    const ms::Tensor flat = x.reshape(ms::Shape{x.numel()});  // the same storage, another shape
    REQUIRE(flat.storage() == x.storage());
    auto loss = [](const ms::Tensor& a) { return ms::sum(ms::square(a)); };
    int on_x = 0, on_flat = 0;
    ms::HookHandle hx = ms::register_hook(x, [&](const ms::Tensor&) { ++on_x; });
    ms::HookHandle hf = ms::register_hook(flat, [&](const ms::Tensor& g) {
      ++on_flat;
      return ms::Tensor(g * 0.0f);
    });
    // x's gradient runs x's hook only, the reshape's runs the reshape's only.
    CHECK(ms::allclose(ms::grad(loss)(x), x * 2.0f, 1e-6, 1e-6));
    CHECK(on_x == 1);
    CHECK(on_flat == 0);
    CHECK(ms::allclose(ms::grad(loss)(flat), flat * 0.0f, 0, 0));
    CHECK(on_x == 1);
    CHECK(on_flat == 1);
    hf.remove();
    hx.remove();
  }
}
