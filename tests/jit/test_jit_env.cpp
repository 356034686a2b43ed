// MS_JIT=0 in the environment (read once, at first use) runs every jitted
// function eagerly. A binary of its own: the variable is set before anything
// in it asks, so the result does not depend on the order tests run in.
#include <doctest/doctest.h>

#include <cstdlib>

#include <ms/ms.hpp>

namespace {
// Before main: no jitted function has been called yet in this process.
const int kSetEnv = setenv("MS_JIT", "0", 1);
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("MS_JIT=0 runs jitted functions eagerly; set_jit_enabled overrides it") {
    REQUIRE(kSetEnv == 0);
    const ms::Tensor x = ms::arange(-3, 3).reshape({2, 3}).to(ms::float32);
    auto f = ms::jit([](const ms::Tensor& v) -> ms::Tensor {
      return ms::sum(v).item<float>() < 100.f ? ms::relu(v) : v;  // eager only: reads a value
    });
    CHECK(ms::allclose(f(x), ms::relu(x), 0, 0));
    CHECK(f.compile_count() == 0);
    CHECK_FALSE(ms::jit_enabled());
    ms::set_jit_enabled(true);
    auto g = ms::jit([](const ms::Tensor& v) { return ms::relu(v) * 2.f; });
    CHECK(ms::allclose(g(x), ms::relu(x) * 2.f, 0, 0));
    CHECK(g.compile_count() == 1);
  }
}
