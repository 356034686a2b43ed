// conv2d and 2-D pooling against naive double-precision loops written here,
// plus a few outputs recorded from LibTorch 1.13 (Debian libtorch-dev).
#include <doctest/doctest.h>

#include "random.hpp"
#include "thread_guard.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include <ms/core/storage.hpp>
#include <ms/kernels/conv.hpp>
#include <ms/kernels/parallel.hpp>
#include <ms/ops/nn.hpp>

#include <ms/ops/op.hpp>
#include "ops_test_util.hpp"
#include "pool_calls.hpp"
#include "pool_cases.hpp"

using namespace ms;
using ms::test::random_tensor;

namespace {

using Values = std::vector<double>;
using Ints = std::vector<std::int64_t>;
using ms_test::kI64Max;
using ms_test::kInf;
using ms_test::kTwo40;
constexpr std::int64_t kTwo31 = std::int64_t{1} << 31;

double tolerance(DType dt) {
  switch (dt) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-5;
    case DType::Float16: return 1e-2;
    case DType::BFloat16: return 4e-2;
    default: return 0;
  }
}

void check_close(const Tensor& got, const Values& want, const Shape& shape) {
  REQUIRE(got.shape() == shape);
  if (!dtype_is_float(got.dtype())) {
    CHECK(got.to_vector<double>() == want);
    return;
  }
  const double tol = tolerance(got.dtype());
  CHECK(allclose(got, from_vector(want, shape), tol, tol, true));
}

using ms_test::Hw;
using ms_test::hw;

// ---------------------------------------------------------------- conv2d

/// The convolution as 7 nested loops in double.
Values conv_ref(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dOptions& o,
                Shape& out_shape) {
  const Values xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const Values bv = bias ? bias->to_vector<double>() : Values{};
  const std::int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const std::int64_t oc = w.dim(0), cg = w.dim(1), kh = w.dim(2), kw = w.dim(3);
  const Hw s = hw(o.stride), p = hw(o.padding), d = hw(o.dilation);
  const std::int64_t oh = (h + 2 * p.h - d.h * (kh - 1) - 1) / s.h + 1;
  const std::int64_t ow = (wd + 2 * p.w - d.w * (kw - 1) - 1) / s.w + 1;
  const std::int64_t og = oc / o.groups;
  out_shape = Shape{n, oc, oh, ow};
  Values out(static_cast<std::size_t>(n * oc * oh * ow));
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t q = 0; q < oc; ++q)
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t z = 0; z < ow; ++z) {
          double sum = bias ? bv[static_cast<std::size_t>(q)] : 0.0;
          const std::int64_t g = q / og;
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t ih = y * s.h - p.h + i * d.h, iw = z * s.w - p.w + j * d.w;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                sum += xv[static_cast<std::size_t>(((b * c + g * cg + ci) * h + ih) * wd + iw)] *
                       wv[static_cast<std::size_t>(((q * cg + ci) * kh + i) * kw + j)];
              }
          out[static_cast<std::size_t>(((b * oc + q) * oh + y) * ow + z)] = sum;
        }
  return out;
}

void check_conv(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                const Conv2dOptions& o) {
  CAPTURE(x.shape());
  CAPTURE(w.shape());
  Shape shape;
  const Values want = conv_ref(x, w, bias ? &*bias : nullptr, o, shape);
  const Tensor y = conv2d(x, w, bias, o);
  CHECK(y.dtype() == x.dtype());
  check_close(y, want, shape);
}

struct ConvCase {
  Shape x, w;
  Conv2dOptions o;
  bool bias;
};

const std::vector<ConvCase> kConvCases = {
    {{2, 3, 7, 7}, {4, 3, 3, 3}, {}, true},
    {{2, 3, 7, 8}, {4, 3, 3, 2}, {.stride = {2, 1}, .padding = {1, 0}}, false},
    {{1, 4, 9, 9},
     {6, 2, 3, 3},
     {.stride = {2}, .padding = {1}, .dilation = {2}, .groups = 2},
     true},
    {{3, 4, 5, 5}, {4, 1, 3, 3}, {.padding = {1}, .groups = 4}, false},  // depthwise
    {{2, 8, 5, 6}, {4, 8, 1, 1}, {}, true},                // 1x1: the input is the im2col matrix
    {{2, 8, 5, 6}, {4, 8, 1, 1}, {.stride = {2}}, false},  // 1x1 with a stride
    {{2, 2, 6, 6}, {3, 2, 6, 6}, {}, true},                // kernel = input: 1x1 output
    {{1, 3, 4, 4}, {2, 3, 3, 3}, {.padding = {2}}, true},  // output larger than the input
    {{1, 2, 5, 7}, {3, 2, 2, 4}, {.stride = {1, 2}, .padding = {1, 2}, .dilation = {2, 1}}, true},
    {{2, 1, 1, 5}, {2, 1, 3, 3}, {.padding = {1}}, true},       // H = 1 with padding
    {{8, 16, 12, 12}, {32, 16, 3, 3}, {.padding = {1}}, true},  // images over threads
    {{1, 16, 20, 20}, {32, 16, 3, 3}, {.padding = {1}}, true},  // one image: threaded GEMM
    {{2, 6, 8, 8}, {9, 2, 3, 3}, {.padding = {1}, .groups = 3}, true},
    {{0, 3, 5, 5}, {2, 3, 3, 3}, {}, true},   // empty batch
    {{1, 0, 5, 5}, {2, 0, 3, 3}, {}, true},   // no input channels: the bias
    {{2, 4, 5, 5}, {0, 4, 3, 3}, {}, false},  // no output channels
};

using ms::test::check_thread_invariant;

// ---------------------------------------------------------------- pooling

using ms_test::kPoolStressCases;
using ms_test::pool_size;
using ms_test::pool_stress_tensor;
using ms_test::PoolCase;

/// Max or mean over each window, in double. The mean divides by the window's
/// positions inside the padded input (count_include_pad) or inside the input.
Values pool_ref(const Tensor& x, const PoolCase& c, bool is_max, Shape& out_shape) {
  const Values xv = x.to_vector<double>();
  const std::size_t r = x.shape().size();
  const std::int64_t h = x.shape()[r - 2], w = x.shape()[r - 1];
  const std::int64_t planes = x.numel() / (h * w);
  const Hw k = hw(c.kernel), s = c.stride.empty() ? k : hw(c.stride), p = hw(c.padding),
           d = is_max ? hw(c.dilation) : Hw{1, 1};
  const std::int64_t oh = pool_size(h, k.h, s.h, p.h, d.h, c.ceil_mode);
  const std::int64_t ow = pool_size(w, k.w, s.w, p.w, d.w, c.ceil_mode);
  out_shape = Shape(Ints(x.shape().begin(), x.shape().end() - 2));
  out_shape.push_back(oh);
  out_shape.push_back(ow);
  Values out;
  for (std::int64_t pl = 0; pl < planes; ++pl)
    for (std::int64_t y = 0; y < oh; ++y)
      for (std::int64_t z = 0; z < ow; ++z) {
        double best = -kInf, sum = 0;
        std::int64_t inside = 0, padded = 0;
        for (std::int64_t i = 0; i < k.h; ++i)
          for (std::int64_t j = 0; j < k.w; ++j) {
            const std::int64_t ih = y * s.h - p.h + i * d.h, iw = z * s.w - p.w + j * d.w;
            if (ih < h + p.h && iw < w + p.w) ++padded;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            const double v = xv[static_cast<std::size_t>((pl * h + ih) * w + iw)];
            if (v > best || std::isnan(v)) best = std::isnan(best) ? best : v;
            sum += v;
            ++inside;
          }
        if (is_max)
          out.push_back(best);
        else
          out.push_back(
              inside == 0 ? 0.0 : sum / static_cast<double>(c.count_include_pad ? padded : inside));
      }
  return out;
}

const std::vector<PoolCase> kPoolCases = {
    {{2, 3, 6, 6}, {2}, {}, {0}, {1}, false, true},
    {{2, 3, 7, 7}, {3}, {2}, {1}, {1}, false, true},
    {{1, 2, 7, 7}, {3}, {2}, {1}, {1}, true, true},
    {{1, 2, 5, 5}, {2}, {2}, {0}, {1}, true, true},
    {{1, 2, 4, 4}, {3}, {2}, {1}, {1}, true, false},
    {{2, 2, 9, 8}, {3, 2}, {2, 1}, {1, 1}, {2, 1}, false, false},
    {{2, 2, 9, 8}, {3, 4}, {2, 3}, {1, 2}, {1, 2}, true, false},
    {{3, 5, 5}, {2}, {1}, {0}, {1}, false, true},  // CHW: one image
    {{4, 16, 32, 32}, {3}, {2}, {1}, {1}, false, true},
    {{0, 3, 4, 4}, {2}, {}, {0}, {1}, false, true},  // empty batch
    {{1, 0, 4, 4}, {2}, {}, {0}, {1}, false, true},  // no channels
    {{1, 1, 1, 1}, {1}, {}, {0}, {1}, false, true},
};

Tensor run_pool(const Tensor& x, const PoolCase& c, bool is_max) {
  return is_max ? ms::test::max_pool(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode)
                : ms::test::avg_pool(x, c.kernel, c.stride, c.padding, c.ceil_mode,
                                     c.count_include_pad);
}

void check_pool(const Tensor& x, const PoolCase& c, bool is_max) {
  CAPTURE(x.shape());
  CAPTURE(Shape(c.kernel));
  CAPTURE(is_max);
  Shape shape;
  const Values want = pool_ref(x, c, is_max, shape);
  const Tensor y = run_pool(x, c, is_max);
  CHECK(y.dtype() == x.dtype());
  check_close(y, want, shape);
}

}  // namespace

TEST_SUITE("ops") {
  // ------------------------------------------------------------ conv2d

  TEST_CASE_TEMPLATE("conv2d matches 7 nested loops", T, float, double, std::int32_t, std::int64_t,
                     float16_t, bfloat16_t) {
    const DType dt = dtype_of<T>;
    std::uint32_t seed = 1;
    for (const ConvCase& c : kConvCases) {
      const Tensor x = random_tensor(dt, c.x, {}, seed++), w = random_tensor(dt, c.w, {}, seed++);
      std::optional<Tensor> b;
      if (c.bias) b = random_tensor(dt, {c.w[0]}, {}, seed++);
      check_conv(x, w, b, c.o);
    }
  }

  TEST_CASE_TEMPLATE("conv2d of non-contiguous inputs", T, float, double, std::int32_t) {
    const DType dt = dtype_of<T>;
    // NHWC memory seen as NCHW, every other kernel column, every other bias entry
    const Tensor x = random_tensor(dt, {2, 7, 6, 4}, {}, 1).permute({0, 3, 1, 2});
    const Tensor w = random_tensor(dt, {6, 4, 3, 6}, {}, 2).slice(3, 0, 6, 2);
    const Tensor b = random_tensor(dt, {12}, {}, 3).slice(0, 0, 12, 2);
    REQUIRE_FALSE(x.is_contiguous());
    REQUIRE_FALSE(w.is_contiguous());
    check_conv(x, w, b, {.stride = {2, 1}, .padding = {1}});
    check_conv(x, w.slice(0, 0, 6, 3), std::nullopt, {.padding = {1}, .dilation = {2, 1}});
    // a weight shared over the output channels by a stride-0 view
    check_conv(x, random_tensor(dt, {1, 4, 3, 3}, {}, 4).expand({5, 4, 3, 3}), std::nullopt, {});
  }

  TEST_CASE("conv2d options: one value stands for both axes; an undefined bias is none") {
    const Tensor x = random_tensor(float32, {2, 3, 9, 9}, {}, 5);
    const Tensor w = random_tensor(float32, {4, 3, 3, 3}, {}, 6);
    const Tensor a = conv2d(x, w, {}, {.stride = {2}, .padding = {1}, .dilation = {2}});
    const Tensor b = conv2d(x, w, {}, {.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}});
    CHECK(a.to_vector<float>() == b.to_vector<float>());
    CHECK(conv2d(x, w, Tensor()).to_vector<float>() == conv2d(x, w).to_vector<float>());
    // through the op table, as a traced graph will call it
    const ops::OpDef& def = ops::op("conv2d");
    CHECK(def.kind == ops::OpKind::Conv);
    const auto types =
        def.infer(std::vector<ops::TensorType>{{float32, {8, 3, 32, 32}}, {float32, {16, 3, 5, 5}}},
                  {{"stride", Ints{1}}, {"padding", Ints{2}}});
    CHECK(types[0].shape == Shape{8, 16, 32, 32});
    const auto dyn = def.infer(std::vector<ops::TensorType>{{float32, {kAnyDim, 3, 32, kAnyDim}},
                                                            {float32, {16, 3, 5, 5}}},
                               {});
    CHECK(dyn[0].shape == Shape{kAnyDim, 16, 28, kAnyDim});
  }

  TEST_CASE("conv2d: a stride near 2^40 and 2^63 keeps the first window") {
    const Tensor x = random_tensor(float64, {1, 2, 5, 5}, {}, 7);
    const Tensor w = random_tensor(float64, {3, 2, 3, 3}, {}, 8);
    const Tensor first = conv2d(x, w).slice(2, 0, 1).slice(3, 0, 1);
    for (std::int64_t s : {kTwo31, kTwo40, kI64Max}) {
      const Tensor y = conv2d(x, w, {}, {.stride = {s}});
      CHECK(y.shape() == Shape{1, 3, 1, 1});
      CHECK(allclose(y, first, 1e-12, 1e-12));  // one column instead of nine: another GEMM path
    }
  }

  TEST_CASE_TEMPLATE("kernels::im2col of a range of output positions", T, float, std::int64_t) {
    kernels::Conv2dGeometry g;
    g.n = 1, g.c = 2, g.h = 5, g.w = 6, g.o = 1, g.kh = 3, g.kw = 2;
    g.sh = 2, g.sw = 1, g.ph = 1, g.pw = 1, g.dh = 1, g.dw = 2;
    g.oh = (5 + 2 - 2 - 1) / 2 + 1, g.ow = (6 + 2 - 2 - 1) / 1 + 1;  // 3 x 6
    std::vector<T> x(2 * 5 * 6);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(i + 1);
    const std::int64_t rows = 2 * 3 * 2, p = g.oh * g.ow;
    for (const auto& [p0, p1] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {0, p}, {4, 13}, {7, 8}, {0, 5}, {12, p}}) {
      std::vector<T> col(static_cast<std::size_t>(rows * (p1 - p0)), T(-99));
      kernels::im2col<T>(x.data(), 2, g, p0, p1, col.data());
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t q = p0; q < p1; ++q) {
          const std::int64_t ci = r / 6, i = (r % 6) / 2, j = r % 2;
          const std::int64_t ih = (q / g.ow) * g.sh - g.ph + i * g.dh;
          const std::int64_t iw = (q % g.ow) * g.sw - g.pw + j * g.dw;
          const bool inside = ih >= 0 && ih < 5 && iw >= 0 && iw < 6;
          const T want = inside ? x[static_cast<std::size_t>((ci * 5 + ih) * 6 + iw)] : T(0);
          CHECK(col[static_cast<std::size_t>(r * (p1 - p0) + (q - p0))] == want);
        }
    }
  }

  TEST_CASE("conv2d: results do not depend on the thread count") {
    for (const auto& [xs, ws, groups] : std::vector<std::tuple<Shape, Shape, std::int64_t>>{
             {{8, 16, 14, 14}, {32, 16, 3, 3}, 1},   // images over threads
             {{3, 16, 14, 14}, {32, 16, 3, 3}, 1},   // odd count
             {{1, 32, 20, 20}, {64, 32, 3, 3}, 1},   // one image, one item
             {{1, 8, 40, 40}, {16, 8, 3, 3}, 1},     // one image in column tiles
             {{2, 8, 10, 10}, {8, 2, 3, 3}, 4},      // groups over threads
             {{4, 64, 7, 7}, {32, 64, 1, 1}, 1}}) {  // 1x1 direct
      for (DType dt : {float32, float64, int64}) {
        const Tensor x = random_tensor(dt, xs, {}, 11), w = random_tensor(dt, ws, {}, 12);
        const Tensor b = random_tensor(dt, {ws[0]}, {}, 13);
        const Conv2dOptions o{.padding = {ws[2] / 2}, .groups = groups};
        CAPTURE(xs);
        CAPTURE(dt);
        check_thread_invariant([&] { return conv2d(x, w, b, o); });
      }
    }
  }

  TEST_CASE("conv2d propagates NaN and Inf") {
    Values xv(1 * 1 * 5 * 5, 1.0);
    xv[12] = std::nan("");  // centre pixel
    xv[0] = kInf;           // top-left corner
    const Tensor y = conv2d(from_vector(xv, {1, 1, 5, 5}), ones({1, 1, 3, 3}, float64));
    const Values v = y.to_vector<double>();  // [3, 3]: every window holds the centre
    for (double e : v) CHECK(std::isnan(e));
    const Tensor z =
        conv2d(from_vector(xv, {1, 1, 5, 5}).slice(2, 0, 2), ones({1, 1, 2, 2}, float64));
    CHECK(z.to_vector<double>()[0] == kInf);
    CHECK(z.to_vector<double>()[1] == 4.0);
  }

  TEST_CASE("conv2d errors") {
    const Tensor x = zeros({1, 4, 5, 5}), w = zeros({2, 4, 3, 3});
    CHECK_THROWS_WITH_AS(conv2d(zeros({4, 5, 5}), w),
                         doctest::Contains("conv2d: input [4, 5, 5] must be 4-D [N, C, H, W], got "
                                           "rank 3 (use unsqueeze(0) for a single image)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(zeros({1, 1, 4, 5, 5}), w), doctest::Contains("got rank 5"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, zeros({2, 4, 3})),
                         doctest::Contains("weight [2, 4, 3] must be 4-D [O, C / groups, KH, KW]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, zeros({2, 3, 3, 3})),
                         doctest::Contains("input [1, 4, 5, 5] has 4 channels but weight "
                                           "[2, 3, 3, 3] with groups 1 expects 3 * 1 = 3"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, zeros({2, 1, 3, 3}), {}, {.groups = 3}),
                         doctest::Contains("groups 3 does not divide the input channels 4"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, zeros({3, 2, 3, 3}), {}, {.groups = 2}),
                         doctest::Contains("groups 2 does not divide the output channels 3"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, zeros({2, 4, 0, 3})), doctest::Contains("has an empty kernel"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, zeros({3})), doctest::Contains("bias [3] must be [2]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, zeros({1, 2})), doctest::Contains("bias [1, 2] must be [2]"),
                         ShapeError);
    // zero and negative options: clear errors, never a division by zero
    for (std::int64_t bad :
         {std::int64_t{0}, std::int64_t{-1}, std::numeric_limits<std::int64_t>::min()}) {
      CAPTURE(bad);
      CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.stride = {bad}}),
                           doctest::Contains("conv2d: stride must be > 0"), ValueError);
      CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.stride = {1, bad}}),
                           doctest::Contains("conv2d: stride must be > 0"), ValueError);
      CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.dilation = {bad}}),
                           doctest::Contains("conv2d: dilation must be > 0"), ValueError);
      CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.groups = bad}),
                           doctest::Contains("conv2d: groups must be > 0"), ValueError);
    }
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.padding = {-1}}),
                         doctest::Contains("conv2d: padding must be >= 0, got [-1, -1]"),
                         ValueError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.stride = {1, 1, 1}}),
                         doctest::Contains("stride must hold 1 value (both axes) or 2 (height, "
                                           "width), got [1, 1, 1]"),
                         ValueError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.padding = {}}),
                         doctest::Contains("padding must hold 1 value"), ValueError);
    // kernel larger than the padded input
    CHECK_THROWS_WITH_AS(conv2d(zeros({1, 4, 2, 5}), w),
                         doctest::Contains("kernel height 3 (dilation 1, extent 3) is larger than "
                                           "the padded input height 2"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.dilation = {1, 3}}),
                         doctest::Contains("kernel width 3 (dilation 3, extent 7) is larger than "
                                           "the padded input width 5"),
                         ShapeError);
    // dtypes
    CHECK_THROWS_WITH_AS(conv2d(x, zeros({2, 4, 3, 3}, float64)),
                         doctest::Contains("conv2d: weight dtype Float64 differs from input dtype "
                                           "Float32"),
                         TypeError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, zeros({2}, float64)),
                         doctest::Contains("bias dtype Float64 differs"), TypeError);
    for (DType dt : {int8, uint8, bool_, complex64, int4})
      CHECK_THROWS_WITH_AS(conv2d(zeros({1, 4, 5, 5}, dt), zeros({2, 4, 3, 3}, dt)),
                           doctest::Contains("is not supported"), TypeError);
  }

  TEST_CASE("conv2d: sizes near 2^31, 2^40 and 2^63") {
    const Tensor x = zeros({1, 1, 5, 5}), w = zeros({1, 1, 3, 3});
    // overflowing arithmetic is caught, whatever the order of the factors
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.padding = {std::int64_t{1} << 62}}),
                         doctest::Contains("padded input size overflows int64"), ValueError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.dilation = {std::int64_t{1} << 62}}),
                         doctest::Contains("dilated kernel extent overflows int64"), ValueError);
    // a valid geometry whose output has more than 2^63 elements
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {.padding = {kTwo40}}),
                         doctest::Contains("more than 2^63-1 elements"), ValueError);
    CHECK_THROWS_AS(
        conv2d(zeros({1, 1, 1, 1}).expand({kTwo31, 1, 1, 1}), w, {}, {.padding = {kTwo31}}),
        ValueError);
    // a kernel of 2^31 taps (a stride-0 view) is larger than the input
    CHECK_THROWS_WITH_AS(conv2d(x, zeros({1, 1, 1, 1}).expand({1, 1, kTwo31, kTwo31})),
                         doctest::Contains("kernel height 2147483648"), ShapeError);
    // valid sizes over the allocation cap: MemoryError before any work, nothing leaked
    set_max_alloc_bytes(std::int64_t{1} << 20);
    const auto before = memory_stats().live_bytes;
    CHECK_THROWS_AS(conv2d(x, w, {}, {.padding = {kTwo31, 0}}), MemoryError);
    CHECK(memory_stats().live_bytes == before);
    set_max_alloc_bytes(0);
  }

  // ------------------------------------------------------------ pooling

  TEST_CASE_TEMPLATE("max_pool2d matches a naive loop", T, float, double, std::int32_t,
                     std::int64_t, float16_t, bfloat16_t, std::int8_t, std::uint8_t) {
    std::uint32_t seed = 1;
    for (const PoolCase& c : kPoolCases)
      check_pool(random_tensor(dtype_of<T>, c.x, {}, seed++), c, true);
  }

  TEST_CASE_TEMPLATE("max_pool2d on ties, NaN, infinities and signed zeros", T, float, double) {
    std::uint32_t seed = 11;
    for (const PoolCase& c : kPoolStressCases)
      check_pool(pool_stress_tensor(c.x, dtype_of<T>, seed++), c, true);
  }

  TEST_CASE_TEMPLATE("avg_pool2d matches a naive loop", T, float, double, float16_t, bfloat16_t) {
    std::uint32_t seed = 1;
    for (const PoolCase& c : kPoolCases) {
      check_pool(random_tensor(dtype_of<T>, c.x, {}, seed++), c, false);
      PoolCase other = c;
      other.count_include_pad = !c.count_include_pad;
      if (std::all_of(c.dilation.begin(), c.dilation.end(), [](auto d) { return d == 1; }))
        check_pool(random_tensor(dtype_of<T>, c.x, {}, seed++), other, false);
    }
  }

  TEST_CASE("pooling: values recorded from LibTorch 1.13") {
    const Tensor x4 = arange(0, 16).reshape({1, 1, 4, 4});
    // F::avg_pool2d(x, AvgPool2dFuncOptions(3).stride(2).padding(1).ceil_mode(true)...)
    const Tensor a1 = ms::test::avg_pool(x4, {3}, {2}, {1}, true, false);
    CHECK(a1.shape() == Shape{1, 1, 3, 3});
    CHECK(allclose(
        a1, tensor({2.5, 4.0, 5.0, 8.5, 10.0, 11.0, 12.5, 14.0, 15.0}).reshape({1, 1, 3, 3})));
    const Tensor a2 = ms::test::avg_pool(x4, {3}, {2}, {1}, true, true);
    CHECK(allclose(a2,
                   tensor({1.1111, 2.6667, 1.6667, 5.6667, 10.0, 5.5, 4.1667, 7.0, 3.75})
                       .reshape({1, 1, 3, 3}),
                   1e-4, 1e-4));
    const Tensor x5 = arange(0, 25).reshape({1, 1, 5, 5});
    const Tensor m1 = ms::test::max_pool(x5, {2}, {2}, {0}, {1}, true);
    CHECK(m1.shape() == Shape{1, 1, 3, 3});
    CHECK(m1.to_vector<float>() == std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24});
    CHECK(allclose(
        ms::test::avg_pool(x5, {2}, {2}, {0}, true),
        tensor({3.0, 5.0, 6.5, 13.0, 15.0, 16.5, 20.5, 22.5, 24.0}).reshape({1, 1, 3, 3})));
    // output sizes: {H, kernel, stride, padding, dilation, ceil_mode, LibTorch's output H}
    const std::int64_t sizes[][7] = {
        {5, 2, 2, 0, 1, 1, 3},  {5, 2, 2, 0, 1, 0, 2}, {4, 3, 2, 1, 1, 1, 3},
        {4, 3, 2, 1, 1, 0, 2},  {6, 3, 3, 1, 1, 1, 3}, {7, 3, 2, 1, 2, 1, 3},
        {7, 3, 2, 1, 2, 0, 3},  {5, 3, 3, 1, 1, 1, 2}, {8, 4, 3, 2, 1, 1, 4},
        {10, 3, 4, 0, 1, 1, 3}, {3, 3, 2, 1, 1, 1, 2}, {2, 2, 3, 1, 1, 1, 1}};
    for (const auto& s : sizes) {
      CAPTURE(s[0]);
      CAPTURE(s[1]);
      const Tensor y =
          ms::test::max_pool(zeros({1, 1, s[0], s[0]}), {s[1]}, {s[2]}, {s[3]}, {s[4]}, s[5] != 0);
      CHECK(y.dim(2) == s[6]);
      CHECK(pool_size(s[0], s[1], s[2], s[3], s[4], s[5] != 0) == s[6]);
    }
  }

  TEST_CASE("pooling of non-contiguous inputs, NaN and Inf") {
    const Tensor x =
        random_tensor(float32, {2, 6, 7, 3}, {}, 3).permute({0, 3, 1, 2});  // [2,3,6,7]
    const PoolCase c{{2, 3, 6, 7}, {3}, {2}, {1}, {1}, true, false};
    check_pool(x, c, true);
    check_pool(x, c, false);
    check_pool(x.slice(3, 0, 7, 2), c, true);
    Values v(16, 1.0);
    v[0] = std::nan("");
    v[15] = kInf;
    const Tensor t = from_vector(v, {1, 1, 4, 4});
    const Values mx = ms::test::max_pool(t, {2}).to_vector<double>();
    CHECK(std::isnan(mx[0]));
    CHECK(mx[1] == 1.0);
    CHECK(mx[3] == kInf);
    const Values av = ms::test::avg_pool(t, {2}).to_vector<double>();
    CHECK(std::isnan(av[0]));
    CHECK(av[3] == kInf);
    // padding never wins a max, even against -inf inputs
    const Values neg =
        ms::test::max_pool(full({1, 1, 2, 2}, -kInf, float64), {3}, {1}, {1}).to_vector<double>();
    CHECK(neg == Values(4, -kInf));
    CHECK(ms::test::max_pool(full({1, 1, 2, 2}, -7, int32), {3}, {1}, {1}).to_vector<double>() ==
          Values(4, -7));
  }

  TEST_CASE("pooling: results do not depend on the thread count") {
    const Tensor x = random_tensor(float32, {4, 16, 32, 32}, {}, 9);
    for (bool is_max : {true, false}) {
      const PoolCase c{{}, {3}, {2}, {1}, {1}, true, false};
      check_thread_invariant([&] { return run_pool(x, c, is_max); });
    }
  }

  TEST_CASE("pooling: huge kernels, strides and paddings") {
    const Tensor x = random_tensor(float64, {1, 2, 4, 4}, {}, 4);
    const Values xv = x.to_vector<double>();
    for (std::int64_t k : {kTwo31 + 1, kTwo40 + 1}) {
      // one window covering everything (padding k / 2 <= kernel / 2 is allowed)
      const Tensor m = ms::test::max_pool(x, {k}, {}, {k / 2});
      CHECK(m.shape() == Shape{1, 2, 1, 1});
      CHECK(m.to_vector<double>()[0] == *std::max_element(xv.begin(), xv.begin() + 16));
      const Tensor a = ms::test::avg_pool(x, {k}, {}, {k / 2}, false, false);
      double sum = 0;
      for (std::size_t i = 0; i < 16; ++i) sum += xv[i];
      CHECK(a.to_vector<double>()[0] == doctest::Approx(sum / 16));
      // counting the padding: the whole window lies in the padded input, so the
      // divisor is k^2, beyond int64 for k = 2^40 + 1
      const Tensor ap = ms::test::avg_pool(x, {k}, {}, {k / 2});
      CHECK(ap.to_vector<double>()[0] ==
            doctest::Approx(sum / (static_cast<double>(k) * static_cast<double>(k))));
    }
    for (std::int64_t s : {kTwo31, kTwo40, kI64Max})
      for (bool ceil_mode : {false, true}) {
        const Tensor m = ms::test::max_pool(x, {2}, {s}, {0}, {1}, ceil_mode);
        CHECK(m.shape() == Shape{1, 2, 1, 1});
      }
    CHECK(ms::test::max_pool(x, {1}, {1}, {0}, {kI64Max}).shape() == Shape{1, 2, 4, 4});
    CHECK_THROWS_WITH_AS(ms::test::max_pool(x, {std::int64_t{1} << 62}, {}, {0}, {4}),
                         doctest::Contains("dilated kernel extent overflows int64"), ValueError);
    CHECK_THROWS_WITH_AS(ms::test::max_pool(x, {kTwo40}), doctest::Contains("is too small"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(ms::test::max_pool(x, {kI64Max}, {}, {kI64Max / 2}),
                         doctest::Contains("padded input size overflows int64"), ValueError);
  }

  TEST_CASE("pooling errors") {
    const Tensor x = zeros({1, 2, 5, 5});
    for (const char* op : {"max_pool2d", "avg_pool2d"}) {
      const bool mx = op[0] == 'm';
      const auto pool = [&](const Tensor& t, Ints k, Ints s = {}, Ints p = {0}) {
        return mx ? ms::test::max_pool(t, k, s, p) : ms::test::avg_pool(t, k, s, p);
      };
      CAPTURE(op);
      CHECK_THROWS_WITH_AS(pool(zeros({5, 5}), {2}),
                           doctest::Contains("input [5, 5] must be 3-D [C, H, W] or 4-D [N, C, H, "
                                             "W], got rank 2"),
                           ShapeError);
      CHECK_THROWS_WITH_AS(pool(zeros({1, 1, 1, 5, 5}), {2}), doctest::Contains("got rank 5"),
                           ShapeError);
      CHECK_THROWS_WITH_AS(pool(zeros({1, 2, 0, 5}), {2}),
                           doctest::Contains("has an empty spatial dim"), ShapeError);
      for (std::int64_t bad :
           {std::int64_t{0}, std::int64_t{-3}, std::numeric_limits<std::int64_t>::min()}) {
        CHECK_THROWS_WITH_AS(pool(x, {bad}), doctest::Contains("kernel must be > 0"), ValueError);
        CHECK_THROWS_WITH_AS(pool(x, {2}, {2, bad}), doctest::Contains("stride must be > 0"),
                             ValueError);
      }
      CHECK_THROWS_WITH_AS(pool(x, {2}, {}, {-1}), doctest::Contains("padding must be >= 0"),
                           ValueError);
      CHECK_THROWS_WITH_AS(pool(x, {3}, {}, {2}),
                           doctest::Contains("padding [2, 2] must be at most half the kernel size "
                                             "[3, 3]"),
                           ValueError);
      CHECK_THROWS_WITH_AS(pool(x, {2, 2, 2}),
                           doctest::Contains("kernel must hold 1 value (both axes) or 2"),
                           ValueError);
      CHECK_THROWS_WITH_AS(pool(x, {}), doctest::Contains("kernel must hold 1 value"), ValueError);
      CHECK_THROWS_WITH_AS(pool(x, {2}, {}, {0, 0, 0}), doctest::Contains("padding must hold"),
                           ValueError);
      CHECK_THROWS_WITH_AS(pool(zeros({1, 1, 2, 5}), {3}),
                           doctest::Contains("input [1, 1, 2, 5] is too small: kernel height 3"),
                           ShapeError);
      CHECK_NOTHROW(pool(x, {2}));
    }
    CHECK_THROWS_WITH_AS(ms::test::max_pool(x, {2}, {}, {0}, {0}),
                         doctest::Contains("dilation must be > 0"), ValueError);
    CHECK_THROWS_WITH_AS(ms::test::max_pool(x, {3}, {1}, {0}, {3}),
                         doctest::Contains("kernel height 3 (dilation 3, extent 7)"), ShapeError);
    CHECK_THROWS_WITH_AS(ms::test::avg_pool(zeros({1, 2, 5, 5}, int32), {2}),
                         doctest::Contains("avg_pool2d: dtype Int32 is not supported"), TypeError);
    for (DType dt : {bool_, complex64, uint16, int4})
      CHECK_THROWS_WITH_AS(ms::test::max_pool(zeros({1, 2, 5, 5}, dt), {2}),
                           doctest::Contains("max_pool2d: dtype"), TypeError);
  }

  TEST_CASE("softmax_cross_entropy: against double logsumexp, huge logits, half inputs, errors") {
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> u(-5, 5);
    // 11 classes: fewer than a SIMD packet; 40: two float packets and a tail; 256: char_lm's.
    for (const std::int64_t c : {11, 40, 256}) {
      const std::int64_t n = 37;
      CAPTURE(c);
      std::vector<double> xv(static_cast<std::size_t>(n * c));
      for (double& v : xv) v = u(rng);
      xv[0] = 1e30;  // row 0: one huge logit (a naive exp overflows)
      xv[static_cast<std::size_t>(c)] = -1e30;
      std::vector<std::int64_t> yv(static_cast<std::size_t>(n));
      for (std::int64_t r = 0; r < n; ++r) yv[static_cast<std::size_t>(r)] = (r * 7) % c;
      const Tensor y = from_vector(yv, Shape{n});
      for (DType dt : {float32, float64}) {
        const Tensor x = from_vector(xv, Shape{n, c}).to(dt);
        const auto got = softmax_cross_entropy(x, y).to_vector<double>();
        const auto xs = x.to_vector<double>();
        REQUIRE(got.size() == static_cast<std::size_t>(n));
        for (std::int64_t r = 0; r < n; ++r) {
          double m = -std::numeric_limits<double>::infinity(), s = 0;
          for (std::int64_t j = 0; j < c; ++j)
            m = std::max(m, xs[static_cast<std::size_t>(r * c + j)]);
          for (std::int64_t j = 0; j < c; ++j)
            s += std::exp(xs[static_cast<std::size_t>(r * c + j)] - m);
          const double want = std::log(s) + m -
                              xs[static_cast<std::size_t>(r * c + yv[static_cast<std::size_t>(r)])];
          CAPTURE(r);
          CHECK(std::isfinite(got[static_cast<std::size_t>(r)]));
          CHECK(got[static_cast<std::size_t>(r)] ==
                doctest::Approx(want).epsilon(dt == float32 ? 1e-5 : 1e-12).scale(1.0));
        }
      }
    }
    const Tensor h = from_vector(std::vector<double>{0, 1, 2, 3, 4, 5}, Shape{2, 3}).to(float16);
    const Tensor lh = softmax_cross_entropy(h, tensor({2, 0}, int32));
    CHECK(lh.dtype() == float16);
    CHECK(lh.to(float64).to_vector<double>()[1] ==
          doctest::Approx(std::log(std::exp(3.0) + std::exp(4.0) + std::exp(5.0)) - 3.0)
              .epsilon(1e-3));
    // Errors name the op, the argument, expected vs given.
    const Tensor x = zeros({2, 3});
    CHECK_THROWS_WITH_AS(
        softmax_cross_entropy(x, tensor({0, 3}, int64)),
        doctest::Contains("softmax_cross_entropy: label 3 of row 1 is outside [0, 3)"), IndexError);
    CHECK_THROWS_WITH_AS(softmax_cross_entropy(x, tensor({0, -1}, int64)),
                         doctest::Contains("label -1 of row 1"), IndexError);
    CHECK_THROWS_WITH_AS(softmax_cross_entropy(x, tensor({0, 1, 2}, int64)),
                         doctest::Contains("labels [3] must be [2]"), ShapeError);
    CHECK_THROWS_WITH_AS(softmax_cross_entropy(x, zeros({2})),
                         doctest::Contains("labels must be int32 or int64, got Float32"),
                         TypeError);
    CHECK_THROWS_WITH_AS(softmax_cross_entropy(zeros({2, 3}, int32), tensor({0, 1}, int64)),
                         doctest::Contains("logits must be floating"), TypeError);
    CHECK_THROWS_WITH_AS(softmax_cross_entropy(zeros({6}), tensor({0}, int64)),
                         doctest::Contains("logits must be [N, C], got [6]"), ShapeError);
    CHECK_THROWS_WITH_AS(softmax_cross_entropy(zeros({2, 0}), tensor({0, 0}, int64)),
                         doctest::Contains("at least one class"), ShapeError);
  }
}
