// ms::set_jit_enabled(false): every jitted function runs eagerly, with the
// results, hooks and gradients of a plain call.
#include <doctest/doctest.h>

#include <ms/ms.hpp>

#include "random.hpp"

using namespace ms;

namespace {
using test::random_tensor;

// Turns ms::jit off for a scope and back on after it (also when a check throws).
struct JitOff {
  JitOff() { set_jit_enabled(false); }
  ~JitOff() { set_jit_enabled(true); }
  JitOff(const JitOff&) = delete;
  JitOff& operator=(const JitOff&) = delete;
};

struct Counted : Cell<Counted> {
  nn::Dense fc{3, 2};
  Counted() { register_cells("fc", fc); }
  Tensor construct(const Tensor& x) { return fc(x); }
};
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("set_jit_enabled(false) runs jitted functions eagerly with the same results") {
    CHECK(jit_enabled());
    const Tensor w = random_tensor(float32, {3, 3}, {-1, 1}, 1);
    // Reads a value: only an eager call can (a traced tensor has none).
    auto fn = [&](const Tensor& x) -> Tensor {
      const float s = sum(x).item<float>();
      return s > 0 ? matmul(x, w) : relu(x);
    };
    auto f = jit(fn);
    const Tensor x = random_tensor(float32, {2, 3}, {-1, 1}, 2);
    CHECK_THROWS(f(x));  // traced: item() of a symbolic tensor
    {
      const JitOff off;
      CHECK_FALSE(jit_enabled());
      CHECK(allclose(f(x), fn(x), 0, 0));
      const Tensor ax = ms::abs(x);
      CHECK(allclose(f(ax), fn(ax), 0, 0));
      CHECK(f.compile_count() == 0);
      // Gradients of a jitted function, eagerly.
      auto sq = jit([](const Tensor& v) { return sum(v * v); });
      auto loss = [&](const Tensor& v) { return sq(v); };
      CHECK(allclose(grad(loss)(x), x * 2.f, 1e-6, 1e-6));
      CHECK(sq.compile_count() == 0);
    }
    CHECK(jit_enabled());
    auto g = jit([](const Tensor& v) { return relu(v) + 1.f; });
    CHECK(allclose(g(x), relu(x) + 1.f, 0, 0));
    CHECK(g.compile_count() == 1);
  }

  TEST_CASE("with ms::jit off, forward hooks run once per call on the concrete arguments") {
    Counted net;
    int pre_calls = 0;
    Tensor seen;
    ScopedHook h = net.register_forward_pre_hook(
        [&](Counted&, const Args& a, const Kwargs&) {
          ++pre_calls;
          seen = a[0];
          return std::optional<std::pair<Args, Kwargs>>{std::pair{a, Kwargs{}}};
        },
        with_kwargs);
    const Tensor x = random_tensor(float32, {4, 3}, {-1, 1}, 3);
    auto f = jit(net);
    {
      const JitOff off;
      CHECK(allclose(f(x), net.fc(x), 0, 0));
      CHECK(allclose(f(x), net.fc(x), 0, 0));
      CHECK(pre_calls == 2);           // once per call: nothing is traced
      CHECK(allclose(seen, x, 0, 0));  // the concrete argument
      CHECK(f.compile_count() == 0);
    }
    f(x);
    CHECK(f.compile_count() == 1);  // on again: compiled
  }
}
