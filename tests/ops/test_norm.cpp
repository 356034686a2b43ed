// layer_norm (ms/ops/norm.hpp) against the composition written here (mean,
// variance, normalize, scale, shift) in float64: rows of odd lengths across
// the kernels' packets and blocks of rows, normalized over one or more axes,
// float32, float64, bfloat16 and float16; the gradients against the
// composition's; a row independent of its neighbours; 1 and 2 threads
// bitwise; eager == ms::jit bitwise; and nn::LayerNorm running on the op.
// (Values by hand, gradient checks and bad inputs: the op table's samples,
// tests/ops/test_op_table.cpp.)
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <ms/ms.hpp>

#include "random.hpp"
#include "thread_guard.hpp"

using namespace ms;
using ms::test::random_tensor;

namespace {

// The composition, in x's dtype: over x's axes from `axis` (negative) on.
Tensor reference(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::int64_t axis,
                 double eps) {
  std::vector<std::int64_t> axes;
  for (std::int64_t i = x.rank() + axis; i < x.rank(); ++i) axes.push_back(i);
  const Tensor c = x - mean(x, axes, true);
  return c * rsqrt(mean(c * c, axes, true) + eps) * gamma + beta;
}

struct NormCase {
  Shape x;
  std::int64_t axis;
};

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("layer_norm: against the composition, odd sizes, one or more axes, four dtypes") {
    const std::vector<NormCase> cases{{{1, 1}, -1},    {{3, 7}, -1},       {{2, 5, 17}, -1},
                                      {{33, 127}, -1}, {{70, 255}, -1},    {{4, 1000}, -1},
                                      {{2, 3, 5}, -2}, {{2, 4, 6, 16}, -3}};
    for (const DType dt : {float32, float64, bfloat16, float16})
      for (const NormCase& c : cases) {
        CAPTURE(dt);
        CAPTURE(c.x);
        CAPTURE(c.axis);
        const Shape ps(std::vector<std::int64_t>(c.x.end() + c.axis, c.x.end()));
        const Tensor x = random_tensor(dt, c.x, {-3, 3}, 1) + 0.5;
        const Tensor g = random_tensor(dt, ps, {0.5, 1.5}, 2),
                     b = random_tensor(dt, ps, {-1, 1}, 3);
        const Tensor got = layer_norm(x, g, b, {.axis = c.axis, .eps = 1e-5});
        REQUIRE(got.dtype() == dt);
        REQUIRE(got.shape() == c.x);
        const Tensor want = reference(x.to(float64), g.to(float64), b.to(float64), c.axis, 1e-5);
        // bfloat16 keeps 8 bits, float16 11: one rounding of a value within a few units.
        const double tol = dt == float64   ? 1e-12
                           : dt == float32 ? 2e-5
                           : dt == float16 ? 4e-3
                                           : 3e-2;
        CHECK(allclose(got.to(float64), want, tol, tol));
      }
  }

  TEST_CASE("layer_norm: gradients equal the composition's (float64), across blocks of rows") {
    for (const NormCase& c :
         {NormCase{{3, 7}, -1}, NormCase{{100, 33}, -1}, NormCase{{5, 4, 9}, -2}}) {
      CAPTURE(c.x);
      const Shape ps(std::vector<std::int64_t>(c.x.end() + c.axis, c.x.end()));
      const Tensor x = random_tensor(float64, c.x, {-2, 2}, 4);
      const Tensor g = random_tensor(float64, ps, {0.5, 1.5}, 5);
      const Tensor b = random_tensor(float64, ps, {-1, 1}, 6);
      const Tensor w = random_tensor(float64, c.x, {-1, 1}, 7);
      const GradOptions all{.position = {0, 1, 2}};
      const auto got =
          grad([&](const Tensor& a, const Tensor& gg,
                   const Tensor& bb) { return sum(layer_norm(a, gg, bb, {.axis = c.axis}) * w); },
               all)(x, g, b);
      const auto want =
          grad([&](const Tensor& a, const Tensor& gg,
                   const Tensor& bb) { return sum(reference(a, gg, bb, c.axis, 1e-5) * w); },
               all)(x, g, b);
      for (std::size_t i = 0; i < 3; ++i) CHECK(allclose(got[i], want[i], 1e-10, 1e-10));
    }
  }

  TEST_CASE("layer_norm: 1 and 2 threads, eager and ms::jit give bitwise the same") {
    const Tensor x = random_tensor(float32, {300, 192}, {-2, 2}, 8);
    const Tensor g = random_tensor(float32, {192}, {0.5, 1.5}, 9);
    const Tensor b = random_tensor(float32, {192}, {-1, 1}, 10);
    const Tensor w = random_tensor(float32, {300, 192}, {-1, 1}, 11);
    const auto loss = [&](const Tensor& a, const Tensor& gg, const Tensor& bb) {
      return sum(layer_norm(a, gg, bb) * w);
    };
    const GradOptions all{.position = {0, 1, 2}};
    ms::test::check_thread_invariant([&] { return layer_norm(x, g, b); });
    ms::test::check_thread_invariant([&] { return grad(loss, all)(x, g, b); });
    auto f = jit([&](const Tensor& a, const Tensor& gg, const Tensor& bb) {
      return grad(loss, all)(a, gg, bb);
    });
    const auto want = grad(loss, all)(x, g, b);
    const auto got = f(x, g, b);
    for (std::size_t i = 0; i < 3; ++i) CHECK(ms::test::bitwise_equal(got[i], want[i]));
  }

  TEST_CASE("layer_norm: a row's output and input gradient do not depend on the rows beside it") {
    // The forward computes rows 4 at a time: 11 rows are two groups and 3 single rows. The
    // gradient's check guards the backward, which computes one row at a time today.
    for (const DType dt : {float32, float64, bfloat16}) {
      CAPTURE(dt);
      const Tensor x = random_tensor(dt, {11, 37}, {-2, 2}, 13);
      const Tensor g = random_tensor(dt, {37}, {0.5, 1.5}, 14);
      const Tensor b = random_tensor(dt, {37}, {-1, 1}, 15);
      const Tensor w = random_tensor(dt, {11, 37}, {-1, 1}, 16);
      const auto dx = [&](const Tensor& xs, const Tensor& ws) {
        return grad([&](const Tensor& a) { return sum(layer_norm(a, g, b) * ws); })(xs);
      };
      const Tensor y = layer_norm(x, g, b), dx_all = dx(x, w);
      for (std::int64_t i = 0; i < 11; ++i) {
        CAPTURE(i);
        const Tensor xi = x.slice(0, i, i + 1), wi = w.slice(0, i, i + 1);
        CHECK(ms::test::bitwise_equal(layer_norm(xi, g, b), y.slice(0, i, i + 1)));
        CHECK(ms::test::bitwise_equal(dx(xi, wi), dx_all.slice(0, i, i + 1)));
      }
    }
  }

  TEST_CASE("layer_norm: nn::LayerNorm runs on the op, forward and gradient") {
    nn::LayerNorm ln({4, 6});
    const Tensor x = random_tensor(float32, {3, 4, 6}, {-2, 2}, 12);
    CHECK(ms::test::bitwise_equal(ln(x),
                                  layer_norm(x, ln.gamma, ln.beta, {.axis = -2, .eps = ln.eps})));
    auto f = jit(
        [&](const Tensor& a) { return grad([&](const Tensor& t) { return sum(ln(t) * t); })(a); });
    (void)f(x);
    const std::string text = f.dump();
    CHECK(text.find("LayerNorm(") != std::string::npos);
    CHECK(text.find("LayerNormGrad(") != std::string::npos);
    CHECK(text.find("Rsqrt") == std::string::npos);
  }
}
