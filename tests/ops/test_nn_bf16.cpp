// conv2d on bfloat16 tensors (src/ops/nn.cpp): on the bf16 kernels where they
// take the shape (kernels::conv2d_bf16), else through float32; either way
// within what an 8-bit mantissa allows of the float64 convolution of the same
// bfloat16 values, for odd shapes, a bias, strides and non-contiguous inputs;
// 1 and 2 threads bitwise. conv2d_grad_input and conv2d_grad_weight on
// bfloat16 (the bf16 kernels, float32 sums) the same way.
#include <doctest/doctest.h>

#include "random.hpp"
#include "thread_guard.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include <ms/kernels/conv.hpp>
#include <ms/ops/linalg.hpp>
#include <ms/ops/nn.hpp>

using namespace ms;
using ms::test::random_tensor;

namespace {

Tensor abs_of(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  for (double& e : v) e = std::abs(e);
  return from_vector(v, t.shape());
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("bfloat16 matmul and conv2d: bad inputs") {
    // A bfloat16 operand does not mix with a float32 one (no silent promotion
    // onto the float32 path); shapes are checked as for float32.
    CHECK_THROWS_AS(matmul(zeros({2, 2}, bfloat16), zeros({2, 2})), TypeError);
    CHECK_THROWS_AS(matmul(zeros({2, 3}, bfloat16), zeros({4, 2}, bfloat16)), ShapeError);
    CHECK_THROWS_AS(conv2d(zeros({1, 2, 5, 5}, bfloat16), zeros({3, 2, 3, 3})), TypeError);
    CHECK_THROWS_AS(conv2d(zeros({1, 2, 5, 5}, bfloat16), zeros({3, 4, 3, 3}, bfloat16)),
                    ShapeError);
  }

  TEST_CASE("conv2d on bfloat16: float64 of the same values within one bfloat16 rounding") {
    struct Case {
      Shape xs, ws;
      Conv2dOptions o;
    };
    const std::vector<Case> cases = {
        {{2, 32, 14, 14}, {64, 32, 3, 3}, {.padding = {1}}},
        {{3, 1, 28, 28}, {32, 1, 3, 3}, {.padding = {1}}},
        {{1, 17, 17, 17}, {3, 17, 3, 3}, {}},
        {{2, 3, 33, 7}, {17, 3, 5, 3}, {.padding = {2, 1}, .dilation = {1}}},
        {{1, 3, 17, 17}, {17, 3, 3, 3}, {.stride = {2}, .padding = {1}}},  // through float32
        {{2, 6, 7, 7}, {9, 2, 3, 3}, {.padding = {1}, .groups = 3}},
    };
    for (const Case& c : cases) {
      const Tensor x = random_tensor(bfloat16, c.xs, {}, 21),
                   w = random_tensor(bfloat16, c.ws, {}, 22);
      const Tensor b = random_tensor(bfloat16, {c.ws[0]}, {}, 23);
      CAPTURE(c.xs);
      CAPTURE(c.ws);
      const Tensor y = conv2d(x, w, b, c.o);
      REQUIRE(y.dtype() == bfloat16);
      const Tensor x64 = x.to(float64), w64 = w.to(float64), b64 = b.to(float64);
      const std::vector<double> want = conv2d(x64, w64, b64, c.o).to_vector<double>();
      // The float64 convolution of |x| and |w|: what the float32 sum's error scales with.
      const std::vector<double> mag =
          conv2d(abs_of(x64), abs_of(w64), abs_of(b64), c.o).to_vector<double>();
      const std::vector<double> got = y.to_vector<double>();
      const double terms = double(c.ws[1] * c.ws[2] * c.ws[3] + 1);
      std::int64_t bad = 0;
      for (std::size_t e = 0; e < got.size(); ++e) {
        const double sum_err = (terms + 4) * 0x1p-24 * mag[e];
        bad += !(std::abs(got[e] - want[e]) <= 0x1p-8 * (std::abs(want[e]) + sum_err) + sum_err);
      }
      CHECK(bad == 0);
      ms::test::check_thread_invariant([&] { return conv2d(x, w, b, c.o); });
      // A non-contiguous input (a transposed view) gives the same bits as its copy.
      const Tensor xt = x.transpose(2, 3).contiguous().transpose(2, 3);
      CHECK(ms::test::bitwise_equal(conv2d(xt, w, b, c.o), y));
    }
  }

  TEST_CASE("conv2d gradients on bfloat16: float64 of the same values within one rounding") {
    struct Case {
      Shape xs, ws;
      Conv2dOptions o;
    };
    const std::vector<Case> cases = {
        {{2, 32, 14, 14}, {64, 32, 3, 3}, {.padding = {1}}},                 // Direct dx
        {{3, 1, 28, 28}, {32, 1, 3, 3}, {.padding = {1}}},                   // one input channel
        {{2, 3, 33, 7}, {17, 3, 5, 3}, {.padding = {2, 1}}},                 // odd sizes
        {{1, 17, 17, 17}, {17, 17, 3, 3}, {.stride = {2}, .padding = {1}}},  // stride 2
        {{2, 6, 7, 7}, {9, 2, 3, 3}, {.padding = {1}, .dilation = {2}, .groups = 3}},
    };
    for (const Case& c : cases) {
      const Tensor x = random_tensor(bfloat16, c.xs, {}, 31),
                   w = random_tensor(bfloat16, c.ws, {}, 32);
      const Tensor gy = random_tensor(bfloat16, conv2d(x, w, std::nullopt, c.o).shape(), {}, 33);
      CAPTURE(c.xs);
      CAPTURE(c.ws);
      const Tensor dx = conv2d_grad_input(gy, w, c.xs, c.o),
                   dw = conv2d_grad_weight(x, gy, c.ws, c.o);
      REQUIRE(dx.dtype() == bfloat16);
      REQUIRE(dw.dtype() == bfloat16);
      const Tensor x64 = x.to(float64), w64 = w.to(float64), gy64 = gy.to(float64);
      const auto check = [](const Tensor& got_t, const Tensor& want_t, const Tensor& mag_t,
                            double terms) {
        const std::vector<double> got = got_t.to_vector<double>(),
                                  want = want_t.to_vector<double>(),
                                  mag = mag_t.to_vector<double>();
        std::int64_t bad = 0;
        for (std::size_t e = 0; e < got.size(); ++e) {
          const double sum_err = (terms + 4) * 0x1p-24 * mag[e];
          bad += !(std::abs(got[e] - want[e]) <= 0x1p-8 * (std::abs(want[e]) + sum_err) + sum_err);
        }
        return bad;
      };
      const double dx_terms = double(c.ws[0] * c.ws[2] * c.ws[3]);
      const double dw_terms = double(gy.shape()[0] * gy.shape()[2] * gy.shape()[3]);
      CHECK(check(dx, conv2d_grad_input(gy64, w64, c.xs, c.o),
                  conv2d_grad_input(abs_of(gy64), abs_of(w64), c.xs, c.o), dx_terms) == 0);
      CHECK(check(dw, conv2d_grad_weight(x64, gy64, c.ws, c.o),
                  conv2d_grad_weight(abs_of(x64), abs_of(gy64), c.ws, c.o), dw_terms) == 0);
      ms::test::check_thread_invariant([&] { return conv2d_grad_input(gy, w, c.xs, c.o); });
      ms::test::check_thread_invariant([&] { return conv2d_grad_weight(x, gy, c.ws, c.o); });
    }
  }
}
