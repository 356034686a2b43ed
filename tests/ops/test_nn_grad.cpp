// The backward ops of conv2d, pooling, gather and index_select
// (conv2d_grad_input, conv2d_grad_weight, max_pool2d_grad, avg_pool2d_grad,
// gather_grad, index_select_grad) against naive double-precision loops
// written here from the forward's definition, plus threads, layouts, errors.
#include <doctest/doctest.h>

#include "random.hpp"
#include "thread_guard.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include <ms/expr/expr.hpp>
#include <ms/jit/jit.hpp>
#include <ms/kernels/parallel.hpp>
#include <ms/ops/layout.hpp>
#include <ms/ops/nn.hpp>

#include "ops_test_util.hpp"
#include "pool_calls.hpp"
#include "pool_cases.hpp"

using namespace ms;
using ms::test::random_tensor;

namespace {

using Values = std::vector<double>;
using Ints = std::vector<std::int64_t>;
using ms_test::kI64Min;
using ms_test::kInf;
using ms_test::kTwo40;

std::size_t u(std::int64_t i) { return static_cast<std::size_t>(i); }

double grad_tolerance(DType dt) {
  switch (dt) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-5;
    case DType::Float16: return 2e-2;
    default: return 5e-2;  // bfloat16
  }
}

// Within the dtype's tolerance of each value, and absolutely of the largest:
// an output summing many products (a weight gradient over 9 x 14 x 14
// positions, values up to 42) is off by its terms' roundings, which the
// order of the sums (Winograd's transforms, the GEMM backend's blocking)
// moves by about 1e-6 of the largest, also where the value itself is small.
void check_close(const Tensor& got, const Values& want, const Shape& shape, DType dt) {
  REQUIRE(got.shape() == shape);
  CHECK(got.dtype() == dt);
  const double tol = grad_tolerance(dt);
  double largest = 1;
  for (const double v : want) largest = std::max(largest, std::abs(v));
  CHECK(allclose(got.to(float64), from_vector(want, shape), tol, tol * largest, true));
}

using ms_test::Hw;
using ms_test::hw;

using ms::test::check_thread_invariant;
using Tensors = std::vector<Tensor>;

// A strided view with the same values: the transpose of a transposed copy.
Tensor strided(const Tensor& t) {
  const std::int64_t r = t.rank();
  if (r < 2) return t;
  return t.transpose(r - 2, r - 1).contiguous().transpose(r - 2, r - 1);
}

// ---------------------------------------------------------------- conv2d

struct ConvGradCase {
  Shape x, w;
  Conv2dOptions o;
};

/// Output spatial size of conv2d.
Shape conv_out_shape(const Shape& x, const Shape& w, const Conv2dOptions& o) {
  const Hw s = hw(o.stride), p = hw(o.padding), d = hw(o.dilation);
  return {x[0], w[0], (x[2] + 2 * p.h - d.h * (w[2] - 1) - 1) / s.h + 1,
          (x[3] + 2 * p.w - d.w * (w[3] - 1) - 1) / s.w + 1};
}

/// Calls f(n, oc, y, z, ci_abs, ci_in_group, i, j, ih, iw) for every
/// (output, tap) pair of the convolution that reads an input pixel.
template <class F>
void conv_taps(const Shape& x, const Shape& w, const Conv2dOptions& o, F f) {
  const Shape y = conv_out_shape(x, w, o);
  const Hw s = hw(o.stride), p = hw(o.padding), d = hw(o.dilation);
  const std::int64_t cg = w[1], og = w[0] / o.groups;
  for (std::int64_t n = 0; n < x[0]; ++n)
    for (std::int64_t q = 0; q < w[0]; ++q)
      for (std::int64_t a = 0; a < y[2]; ++a)
        for (std::int64_t b = 0; b < y[3]; ++b)
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t i = 0; i < w[2]; ++i)
              for (std::int64_t j = 0; j < w[3]; ++j) {
                const std::int64_t ih = a * s.h - p.h + i * d.h, iw = b * s.w - p.w + j * d.w;
                if (ih < 0 || ih >= x[2] || iw < 0 || iw >= x[3]) continue;
                f(n, q, a, b, (q / og) * cg + ci, ci, i, j, ih, iw);
              }
}

/// dx[n, c, ih, iw] = sum over (output, tap) reading it of g * w.
Values conv_grad_input_ref(const Tensor& g, const Tensor& w, const Shape& xs,
                           const Conv2dOptions& o) {
  const Values gv = g.to_vector<double>(), wv = w.to_vector<double>();
  const Shape ws = w.shape(), ys = g.shape();
  Values dx(u(shape_numel(xs)), 0.0);
  conv_taps(xs, ws, o,
            [&](auto n, auto q, auto a, auto b, auto c, auto ci, auto i, auto j, auto ih, auto iw) {
              dx[u(((n * xs[1] + c) * xs[2] + ih) * xs[3] + iw)] +=
                  gv[u(((n * ys[1] + q) * ys[2] + a) * ys[3] + b)] *
                  wv[u(((q * ws[1] + ci) * ws[2] + i) * ws[3] + j)];
            });
  return dx;
}

/// dw[q, ci, i, j] = sum over images and outputs of g * x under the tap.
Values conv_grad_weight_ref(const Tensor& x, const Tensor& g, const Shape& ws,
                            const Conv2dOptions& o) {
  const Values xv = x.to_vector<double>(), gv = g.to_vector<double>();
  const Shape xs = x.shape(), ys = g.shape();
  Values dw(u(shape_numel(ws)), 0.0);
  conv_taps(xs, ws, o,
            [&](auto n, auto q, auto a, auto b, auto c, auto ci, auto i, auto j, auto ih, auto iw) {
              dw[u(((q * ws[1] + ci) * ws[2] + i) * ws[3] + j)] +=
                  gv[u(((n * ys[1] + q) * ys[2] + a) * ys[3] + b)] *
                  xv[u(((n * xs[1] + c) * xs[2] + ih) * xs[3] + iw)];
            });
  return dw;
}

const std::vector<ConvGradCase> kConvGradCases = {
    {{2, 3, 7, 7}, {4, 3, 3, 3}, {}},
    {{2, 3, 7, 8}, {4, 3, 3, 2}, {.stride = {2, 1}, .padding = {1, 0}}},
    {{1, 4, 9, 9}, {6, 2, 3, 3}, {.stride = {2}, .padding = {1}, .dilation = {2}, .groups = 2}},
    {{3, 4, 5, 5}, {4, 1, 3, 3}, {.padding = {1}, .groups = 4}},  // depthwise
    {{2, 8, 5, 6}, {4, 8, 1, 1}, {}},                             // 1x1: the direct path
    {{2, 8, 5, 6}, {4, 8, 1, 1}, {.stride = {2}}},                // 1x1 with a stride
    {{2, 2, 6, 6}, {3, 2, 6, 6}, {}},                             // 1x1 output
    {{1, 3, 4, 4}, {2, 3, 3, 3}, {.padding = {2}}},               // output larger than input
    {{1, 2, 5, 7}, {3, 2, 2, 4}, {.stride = {1, 2}, .padding = {1, 2}, .dilation = {2, 1}}},
    {{2, 1, 1, 5}, {2, 1, 3, 3}, {.padding = {1}}},    // H = 1 with padding
    {{2, 3, 8, 8}, {2, 3, 2, 2}, {.stride = {3}}},     // stride > kernel: unread pixels
    {{11, 5, 6, 6}, {7, 5, 3, 3}, {.padding = {1}}},   // 11 images: 8 weight chunks
    {{1, 2, 40, 41}, {3, 2, 3, 3}, {.padding = {1}}},  // several column tiles
    {{2, 6, 8, 8}, {9, 2, 3, 3}, {.padding = {1}, .groups = 3}},
    {{0, 3, 5, 5}, {2, 3, 3, 3}, {}},  // empty batch
    {{1, 0, 5, 5}, {2, 0, 3, 3}, {}},  // no input channels
    {{2, 4, 5, 5}, {0, 4, 3, 3}, {}},  // no output channels
};

void check_conv_grads(const ConvGradCase& c, DType dt, bool non_contiguous) {
  CAPTURE(c.x);
  CAPTURE(c.w);
  CAPTURE(dt);
  const Shape ys = conv_out_shape(c.x, c.w, c.o);
  Tensor x = random_tensor(dt, c.x, {}, 1), w = random_tensor(dt, c.w, {}, 2);
  Tensor g = random_tensor(dt, ys, {}, 3);
  if (non_contiguous) x = strided(x), w = strided(w), g = strided(g);
  check_close(conv2d_grad_input(g, w, c.x, c.o), conv_grad_input_ref(g, w, c.x, c.o), c.x, dt);
  check_close(conv2d_grad_weight(x, g, c.w, c.o), conv_grad_weight_ref(x, g, c.w, c.o), c.w, dt);
}

// ---------------------------------------------------------------- pooling

using ms_test::kPoolStressCases;
using ms_test::pool_size;
using ms_test::pool_stress_tensor;
using ms_test::PoolCase;

Shape pool_out_shape(const PoolCase& c, bool is_max) {
  const std::size_t r = c.x.size();
  const Hw k = hw(c.kernel), s = c.stride.empty() ? k : hw(c.stride), p = hw(c.padding),
           d = is_max ? hw(c.dilation) : Hw{1, 1};
  Shape out(Ints(c.x.begin(), c.x.end() - 2));
  out.push_back(pool_size(c.x[r - 2], k.h, s.h, p.h, d.h, c.ceil_mode));
  out.push_back(pool_size(c.x[r - 1], k.w, s.w, p.w, d.w, c.ceil_mode));
  return out;
}

/// The pooling gradient from the definition: max sends g to the window's
/// first maximum (the last NaN; an all -inf window: its first element), avg
/// spreads g / divisor over the window's input elements.
Values pool_grad_ref(const Tensor& x, const Tensor& g, const PoolCase& c, bool is_max) {
  const Values xv = x.to_vector<double>(), gv = g.to_vector<double>();
  const std::size_t r = c.x.size();
  const std::int64_t h = c.x[r - 2], w = c.x[r - 1];
  const std::int64_t planes = h * w == 0 ? 0 : shape_numel(c.x) / (h * w);
  const Shape ys = pool_out_shape(c, is_max);
  const std::int64_t oh = ys[r - 2], ow = ys[r - 1];
  const Hw k = hw(c.kernel), s = c.stride.empty() ? k : hw(c.stride), p = hw(c.padding),
           d = is_max ? hw(c.dilation) : Hw{1, 1};
  Values dx(u(shape_numel(c.x)), 0.0);
  for (std::int64_t pl = 0; pl < planes; ++pl)
    for (std::int64_t y = 0; y < oh; ++y)
      for (std::int64_t z = 0; z < ow; ++z) {
        const double gval = gv[u((pl * oh + y) * ow + z)];
        double best = -kInf;
        std::int64_t at = -1, padded = 0;
        std::vector<std::int64_t> inside;
        for (std::int64_t i = 0; i < k.h; ++i)
          for (std::int64_t j = 0; j < k.w; ++j) {
            const std::int64_t ih = y * s.h - p.h + i * d.h, iw = z * s.w - p.w + j * d.w;
            if (ih < h + p.h && iw < w + p.w) ++padded;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            const std::int64_t pos = (pl * h + ih) * w + iw;
            inside.push_back(pos);
            const double v = xv[u(pos)];
            if (at < 0) at = pos;
            if (v > best || std::isnan(v)) best = v, at = pos;
          }
        if (inside.empty()) continue;
        if (is_max) {
          dx[u(at)] += gval;
        } else {
          const double div = static_cast<double>(
              c.count_include_pad ? padded : static_cast<std::int64_t>(inside.size()));
          for (std::int64_t pos : inside) dx[u(pos)] += gval / div;
        }
      }
  return dx;
}

const std::vector<PoolCase> kPoolGradCases = {
    {{2, 3, 6, 6}, {2}, {}, {0}, {1}, false, true},
    {{2, 3, 7, 7}, {3}, {2}, {1}, {1}, false, true},
    {{1, 2, 7, 7}, {3}, {2}, {1}, {1}, true, true},
    {{1, 2, 5, 5}, {2}, {2}, {0}, {1}, true, true},
    {{1, 2, 4, 4}, {3}, {2}, {1}, {1}, true, false},
    {{2, 2, 9, 8}, {3, 2}, {2, 1}, {1, 1}, {2, 1}, false, false},
    {{2, 2, 9, 8}, {3, 4}, {2, 3}, {1, 2}, {1, 2}, true, false},
    {{1, 2, 6, 6}, {3}, {1}, {1}, {1}, false, true},  // stride 1: every pixel in 9 windows
    {{3, 5, 5}, {2}, {1}, {0}, {1}, false, true},     // CHW: one image
    {{4, 16, 17, 17}, {3}, {2}, {1}, {1}, false, true},
    {{0, 3, 4, 4}, {2}, {}, {0}, {1}, false, true},  // empty batch
    {{1, 0, 4, 4}, {2}, {}, {0}, {1}, false, true},  // no channels
    {{1, 1, 1, 1}, {1}, {}, {0}, {1}, false, true},
};

Tensor run_pool_grad(const Tensor& x, const Tensor& g, const PoolCase& c, bool is_max) {
  return is_max
             ? ms::test::max_pool_grad(x, g, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode)
             : ms::test::avg_pool_grad(g, x.shape(), c.kernel, c.stride, c.padding, c.ceil_mode,
                                       c.count_include_pad);
}

void check_pool_grad(const Tensor& x, const Tensor& g, const PoolCase& c, bool is_max) {
  CAPTURE(c.x);
  CAPTURE(Shape(c.kernel));
  CAPTURE(is_max);
  check_close(run_pool_grad(x, g, c, is_max), pool_grad_ref(x, g, c, is_max), c.x, x.dtype());
}

/// a and b hold the same bits (same dtype and shape; -0 differs from +0).
template <class T>
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data<T>(), cb.data<T>(), u(ca.numel()) * sizeof(T)) == 0;
}

// ---------------------------------------------------------------- indexing

/// zeros(xs) with g added at x[c with c[axis] = index[c]] for every c of index.
Values gather_grad_ref(const Tensor& g, std::int64_t axis, const Tensor& index, const Shape& xs) {
  const Values gv = g.to_vector<double>();
  const std::vector<std::int64_t> iv = index.to_vector<std::int64_t>();
  const Shape& is = index.shape();
  const ms::DimVector xstr = shape_contiguous_strides(xs);
  Values dx(u(shape_numel(xs)), 0.0);
  for (std::int64_t p = 0; p < index.numel(); ++p) {
    std::int64_t rest = p, off = 0;
    for (std::size_t d = is.size(); d-- > 0;) {
      const std::int64_t c = rest % is[d];
      rest /= is[d];
      off += (static_cast<std::int64_t>(d) == axis ? iv[u(p)] : c) * xstr[d];
    }
    dx[u(off)] += gv[u(p)];
  }
  return dx;
}

Values index_select_grad_ref(const Tensor& g, std::int64_t axis, const Tensor& index,
                             const Shape& xs) {
  const Values gv = g.to_vector<double>();
  const std::vector<std::int64_t> iv = index.to_vector<std::int64_t>();
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= xs[u(d)];
  for (std::int64_t d = axis + 1; d < xs.rank(); ++d) inner *= xs[u(d)];
  const std::int64_t n = index.numel(), len = xs[u(axis)];
  Values dx(u(shape_numel(xs)), 0.0);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < n; ++k)
      for (std::int64_t i = 0; i < inner; ++i)
        dx[u((o * len + iv[u(k)]) * inner + i)] += gv[u((o * n + k) * inner + i)];
  return dx;
}

}  // namespace

TEST_SUITE("ops") {
  // ------------------------------------------------------------ conv2d

  TEST_CASE_TEMPLATE("conv2d_grad_input and conv2d_grad_weight match naive loops", T, float,
                     double) {
    for (const ConvGradCase& c : kConvGradCases) check_conv_grads(c, dtype_of<T>, false);
  }

  TEST_CASE("conv2d gradients of non-contiguous inputs, float16 and bfloat16") {
    for (const ConvGradCase& c : kConvGradCases) check_conv_grads(c, float64, true);
    for (std::size_t i : {0, 2, 4}) {
      check_conv_grads(kConvGradCases[i], float16, false);
      check_conv_grads(kConvGradCases[i], bfloat16, true);
    }
  }

  TEST_CASE("conv2d gradients: bitwise the same with 1 and 2 threads") {
    for (const ConvGradCase& c : std::vector<ConvGradCase>{
             {{8, 16, 14, 14}, {32, 16, 3, 3}, {.padding = {1}}},
             {{3, 16, 14, 14}, {32, 16, 3, 3}, {.padding = {1}}},  // odd batch
             {{1, 8, 40, 40}, {16, 8, 3, 3}, {.padding = {1}}},    // one image, several tiles
             {{13, 8, 10, 10}, {8, 2, 3, 3}, {.padding = {1}, .groups = 4}},
             {{4, 64, 7, 7}, {32, 64, 1, 1}, {}}}) {  // 1x1 direct
      CAPTURE(c.x);
      for (DType dt : {float32, float64}) {
        const Tensor x = random_tensor(dt, c.x, {}, 4), w = random_tensor(dt, c.w, {}, 5);
        const Tensor g = random_tensor(dt, conv_out_shape(c.x, c.w, c.o), {}, 6);
        check_thread_invariant([&] {
          return Tensors{conv2d_grad_input(g, w, c.x, c.o), conv2d_grad_weight(x, g, c.w, c.o)};
        });
      }
    }
  }

  TEST_CASE("conv2d gradients propagate NaN") {
    Values gv(1 * 1 * 3 * 3, 1.0);
    gv[4] = std::nan("");  // the centre output's gradient
    const Tensor g = from_vector(gv, {1, 1, 3, 3}), w = ones({1, 1, 3, 3}, float64);
    const Values dx = conv2d_grad_input(g, w, {1, 1, 5, 5}).to_vector<double>();
    for (std::size_t i = 0; i < dx.size(); ++i) {
      const std::int64_t r = static_cast<std::int64_t>(i) / 5, c = static_cast<std::int64_t>(i) % 5;
      CHECK(std::isnan(dx[i]) == (r >= 1 && r <= 3 && c >= 1 && c <= 3));
    }
    const Values dw =
        conv2d_grad_weight(ones({1, 1, 5, 5}, float64), g, {1, 1, 3, 3}).to_vector<double>();
    for (double e : dw) CHECK(std::isnan(e));
  }

  TEST_CASE("conv2d gradient errors") {
    const Tensor g = zeros({1, 2, 3, 3}), w = zeros({2, 4, 3, 3}), x = zeros({1, 4, 5, 5});
    const Shape xs{1, 4, 5, 5}, ws{2, 4, 3, 3};
    // dtypes
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g.to(int32), w.to(int32), xs),
                         doctest::Contains("conv2d_grad_input: grad_out dtype Int32"), TypeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g, w.to(float64), xs),
                         doctest::Contains("conv2d_grad_input: weight dtype Float64 differs"),
                         TypeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(x.to(int64), g.to(int64), ws),
                         doctest::Contains("conv2d_grad_weight: input dtype Int64"), TypeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(x, g.to(float16), ws),
                         doctest::Contains("grad_out dtype Float16 differs"), TypeError);
    // grad_out not the forward's output shape
    CHECK_THROWS_WITH_AS(conv2d_grad_input(zeros({1, 2, 4, 3}), w, xs),
                         doctest::Contains("conv2d_grad_input: grad_out [1, 2, 4, 3] must have "
                                           "the shape of the conv2d output [1, 2, 3, 3]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(x, zeros({1, 2, 3}), ws),
                         doctest::Contains("conv2d_grad_weight: grad_out [1, 2, 3]"), ShapeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(zeros({2, 4, 5, 5}), g, ws),
                         doctest::Contains("must have the shape of the conv2d output [2, 2, 3, 3]"),
                         ShapeError);
    // input_size / weight_size
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g, w, {4, 5, 5}),
                         doctest::Contains("conv2d_grad_input: input_size [4, 5, 5] must have "
                                           "rank 4"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g, w, {1, 4, -5, 5}),
                         doctest::Contains("input_size [1, 4, -5, 5] has a negative size -5"),
                         ValueError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(x, g, {2, 4, 3, kI64Min}),
                         doctest::Contains("conv2d_grad_weight: weight_size"), ValueError);
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g, w, {kTwo40, kTwo40, kTwo40, 5}),
                         doctest::Contains("conv2d_grad_input: input_size"), ValueError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(x, g, {2, 4, 0, 3}),
                         doctest::Contains("conv2d_grad_weight: weight"), ShapeError);
    // the forward's own rules, named after the gradient op
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g, w, {1, 6, 5, 5}),
                         doctest::Contains("conv2d_grad_input: input [1, 6, 5, 5] has 6 channels"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g, w, {1, 4, 2, 5}),
                         doctest::Contains("conv2d_grad_input: kernel height 3"), ShapeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g, w, xs, {.stride = {0}}),
                         doctest::Contains("conv2d_grad_input: stride must be > 0"), ValueError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(x, g, ws, {.dilation = {1, -1}}),
                         doctest::Contains("conv2d_grad_weight: dilation must be > 0"), ValueError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(x, g, ws, {.padding = {-1}}),
                         doctest::Contains("conv2d_grad_weight: padding must be >= 0"), ValueError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(x, g, ws, {.groups = 0}),
                         doctest::Contains("conv2d_grad_weight: groups must be > 0"), ValueError);
    CHECK_THROWS_WITH_AS(conv2d_grad_weight(x, g, {2, 4, 3, 3}, {.groups = 3}),
                         doctest::Contains("conv2d_grad_weight: groups 3 does not divide"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g, zeros({2, 4, 3}), xs),
                         doctest::Contains("conv2d_grad_input: weight [2, 4, 3] must be 4-D"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d_grad_input(g, w, xs, {.stride = {kTwo40, 1}, .padding = {kTwo40}}),
                         doctest::Contains("conv2d_grad_input"), Error);
  }

  // ------------------------------------------------------------ pooling

  TEST_CASE_TEMPLATE("max_pool2d_grad and avg_pool2d_grad match naive loops", T, float, double,
                     float16_t, bfloat16_t) {
    const DType dt = dtype_of<T>;
    for (const PoolCase& c : kPoolGradCases)
      for (bool is_max : {true, false}) {
        const Tensor x = random_tensor(dt, c.x, {}, 7);
        const Tensor g = random_tensor(dt, pool_out_shape(c, is_max), {}, 8);
        check_pool_grad(x, g, c, is_max);
        if (dt == float64) check_pool_grad(strided(x), strided(g), c, is_max);
      }
  }

  TEST_CASE_TEMPLATE("max_pool2d_grad on ties, NaN, infinities and signed zeros", T, float,
                     double) {
    std::uint32_t seed = 21;
    for (const PoolCase& c : kPoolStressCases) {
      const Tensor x = pool_stress_tensor(c.x, dtype_of<T>, seed++);
      check_pool_grad(x, random_tensor(dtype_of<T>, pool_out_shape(c, true), {}, seed++), c, true);
    }
  }

  // (Split into small cases: one large case crashed GCC 12's ASan with
  // detect_stack_use_after_return while building its first initializer list.)
  TEST_CASE("max_pool2d_grad: ties go to the first maximum, NaN to the last NaN") {
    // One 2x4 plane, 2x2 windows at stride 2: [[1, 1, nan, 0], [1, 0, 5, nan]]
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Tensor x = from_vector(std::vector<double>({1, 1, nan, 0, 1, 0, 5, nan}), {1, 1, 2, 4});
    const Tensor g = from_vector(std::vector<double>({10, 20}), {1, 1, 1, 2});
    const Values got = ms::test::max_pool_grad(x, g, {2}).to_vector<double>();
    CHECK(got == Values({10, 0, 0, 0, 0, 0, 0, 20}));
  }

  TEST_CASE("max_pool2d_grad: an all -inf window routes to its first element (as PyTorch)") {
    const Tensor ninf = full({1, 1, 2, 2}, -kInf, float64);
    const Values got =
        ms::test::max_pool_grad(ninf, full({1, 1, 1, 1}, 3.0, float64), {2}).to_vector<double>();
    CHECK(got == Values({3, 0, 0, 0}));
  }

  TEST_CASE("max_pool2d_grad: padding never wins, even over -inf inputs") {
    // 2x2 windows at stride 1 over a padded 2x2 plane: 9 windows, each routed
    // to its first input element.
    const Tensor ninf = full({1, 1, 2, 2}, -kInf, float64);
    const Values got = ms::test::max_pool_grad(ninf, ones({1, 1, 3, 3}, float64), {2}, {1}, {1})
                           .to_vector<double>();
    CHECK(got == Values({4, 2, 2, 1}));
  }

  TEST_CASE("max_pool2d_grad: overlapping windows add up") {
    // The centre of a 3x3 plane is the max of all 4 windows.
    const Tensor c = from_vector(std::vector<double>({0, 0, 0, 0, 9, 0, 0, 0, 0}), {1, 1, 3, 3});
    const Values got =
        ms::test::max_pool_grad(c, ones({1, 1, 2, 2}, float64), {2}, {1}).to_vector<double>();
    CHECK(got == Values({0, 0, 0, 0, 4, 0, 0, 0, 0}));
  }

  TEST_CASE("pooling gradients: bitwise the same with 1 and 2 threads") {
    const PoolCase c{{8, 16, 28, 28}, {3}, {2}, {1}, {1}, true, false};
    for (bool is_max : {true, false}) {
      const Tensor x = random_tensor(float32, c.x, {}, 9);
      const Tensor g = random_tensor(float32, pool_out_shape(c, is_max), {}, 10);
      check_thread_invariant([&] { return run_pool_grad(x, g, c, is_max); });
    }
  }

  TEST_CASE("pooling gradient errors") {
    const Tensor x = zeros({1, 2, 4, 4}), g = zeros({1, 2, 2, 2});
    const Shape xs{1, 2, 4, 4};
    CHECK_THROWS_WITH_AS(ms::test::max_pool_grad(x.to(int32), g.to(int32), {2}),
                         doctest::Contains("max_pool2d_grad: input dtype Int32 is not supported"),
                         TypeError);
    CHECK_THROWS_WITH_AS(ms::test::max_pool_grad(x, g.to(float64), {2}),
                         doctest::Contains("max_pool2d_grad: grad_out dtype Float64 differs"),
                         TypeError);
    CHECK_THROWS_WITH_AS(ms::test::avg_pool_grad(g.to(int64), xs, {2}),
                         doctest::Contains("avg_pool2d_grad: grad_out dtype Int64"), TypeError);
    CHECK_THROWS_WITH_AS(ms::test::max_pool_grad(x, zeros({1, 2, 3, 2}), {2}),
                         doctest::Contains("max_pool2d_grad: grad_out [1, 2, 3, 2] must have the "
                                           "shape of the max_pool2d output [1, 2, 2, 2]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(ms::test::avg_pool_grad(g, {1, 2, 5, 5}, {2}, {2}, {0}, true),
                         doctest::Contains("avg_pool2d output [1, 2, 3, 3]"), ShapeError);
    CHECK_THROWS_WITH_AS(ms::test::max_pool_grad(zeros({4, 4}), g, {2}),
                         doctest::Contains("max_pool2d_grad: input [4, 4] must be 3-D"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(ms::test::avg_pool_grad(g, {2, 4, 4, 4, 4}, {2}),
                         doctest::Contains("avg_pool2d_grad: input_size [2, 4, 4, 4, 4] must have "
                                           "rank 3 or 4"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(ms::test::avg_pool_grad(g, {1, 2, -4, 4}, {2}),
                         doctest::Contains("has a negative size -4"), ValueError);
    CHECK_THROWS_WITH_AS(ms::test::avg_pool_grad(g, {kTwo40, kTwo40, 4, 4}, {2}),
                         doctest::Contains("avg_pool2d_grad: input_size"), ValueError);
    CHECK_THROWS_WITH_AS(ms::test::max_pool_grad(x, g, {0}),
                         doctest::Contains("max_pool2d_grad: kernel must be > 0"), ValueError);
    CHECK_THROWS_WITH_AS(ms::test::max_pool_grad(x, g, {2}, {-1}),
                         doctest::Contains("max_pool2d_grad: stride must be > 0"), ValueError);
    CHECK_THROWS_WITH_AS(ms::test::max_pool_grad(x, g, {2}, {}, {0}, {0}),
                         doctest::Contains("max_pool2d_grad: dilation must be > 0"), ValueError);
    CHECK_THROWS_WITH_AS(ms::test::avg_pool_grad(g, xs, {2}, {}, {2}),
                         doctest::Contains("avg_pool2d_grad: padding [2, 2] must be at most half"),
                         ValueError);
    CHECK_THROWS_WITH_AS(ms::test::avg_pool_grad(g, xs, {kTwo40}),
                         doctest::Contains("avg_pool2d_grad: input [1, 2, 4, 4] is too small"),
                         ShapeError);
  }

  // ------------------------------------------------------------ indexing

  TEST_CASE("gather_grad and index_select_grad match naive loops") {
    for (DType dt : {float32, float64, float16, bfloat16}) {
      CAPTURE(dt);
      struct GatherCase {
        Shape x, index;
        std::int64_t axis;
      };
      for (const GatherCase& c : std::vector<GatherCase>{{{3, 5}, {3, 7}, 1},
                                                         {{4, 3}, {6, 2}, 0},
                                                         {{2, 3, 4}, {2, 2, 9}, -1},
                                                         {{5, 4, 3}, {8, 3, 2}, 0},
                                                         {{3, 6, 2}, {2, 10, 2}, 1},
                                                         {{40, 2, 1500}, {40, 3, 1100}, 1},
                                                         {{3, 4}, {0, 4}, 0}}) {
        CAPTURE(c.x);
        CAPTURE(c.index);
        const std::int64_t ax = c.axis < 0 ? c.axis + c.x.rank() : c.axis;
        for (DType it : {int64, int32}) {
          const Tensor index =
              random_tensor(it, c.index, {.int_lo = 0, .int_hi = c.x[u(ax)] - 1}, 11);
          const Tensor g = random_tensor(dt, c.index, {}, 12);
          check_close(gather_grad(g, c.axis, index, c.x), gather_grad_ref(g, ax, index, c.x), c.x,
                      dt);
          check_close(gather_grad(strided(g), c.axis, strided(index), c.x),
                      gather_grad_ref(g, ax, index, c.x), c.x, dt);
        }
      }
      struct SelectCase {
        Shape x;
        std::int64_t n, axis;
      };
      for (const SelectCase& c : std::vector<SelectCase>{{{5, 3}, 9, 0},
                                                         {{2, 6, 4}, 4, 1},
                                                         {{2, 3, 4}, 7, -1},
                                                         {{100, 64}, 300, 0},
                                                         {{3, 4}, 0, 1}}) {
        CAPTURE(c.x);
        const std::int64_t ax = c.axis < 0 ? c.axis + c.x.rank() : c.axis;
        const Tensor index =
            random_tensor(int64, {c.n}, {.int_lo = 0, .int_hi = c.x[u(ax)] - 1}, 13);
        Shape gs = c.x;
        gs[u(ax)] = c.n;
        const Tensor g = random_tensor(dt, gs, {}, 14);
        const Values want = index_select_grad_ref(g, ax, index, c.x);
        check_close(index_select_grad(g, c.axis, index, c.x), want, c.x, dt);
        check_close(index_select_grad(strided(g), c.axis, index.to(int32), c.x), want, c.x, dt);
      }
    }
    // A rank-0 gather: one element.
    CHECK(gather_grad(tensor(2.5), 0, tensor(std::int64_t{0}), Shape{}).to_vector<double>() ==
          Values{2.5});
  }

  TEST_CASE("gather_grad and index_select_grad: bitwise the same with 1 and 2 threads") {
    const Tensor gi = random_tensor(int64, {64, 3000}, {.int_lo = 0, .int_hi = 2000 - 1}, 15);
    const Tensor gg = random_tensor(float32, {64, 3000}, {}, 16);
    const Tensor si = random_tensor(int64, {5000}, {.int_lo = 0, .int_hi = 100 - 1}, 17);
    const Tensor sg = random_tensor(float32, {4, 5000, 30}, {}, 18);
    check_thread_invariant([&] {
      return Tensors{gather_grad(gg, 1, gi, {64, 2000}),
                     index_select_grad(sg, 1, si, {4, 100, 30})};
    });
  }

  TEST_CASE("gather_grad and index_select_grad errors") {
    const Tensor g = zeros({2, 3}), index = zeros({2, 3}, int64);
    CHECK_THROWS_WITH_AS(gather_grad(g.to(int32), 1, index, {2, 4}),
                         doctest::Contains("gather_grad: grad_out dtype Int32"), TypeError);
    CHECK_THROWS_WITH_AS(gather_grad(g, 1, index.to(float32), {2, 4}),
                         doctest::Contains("gather_grad: index must have dtype Int32 or Int64"),
                         TypeError);
    CHECK_THROWS_WITH_AS(gather_grad(zeros({2, 2}), 1, index, {2, 4}),
                         doctest::Contains("grad_out of shape [2, 2] must have index's shape"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(gather_grad(g, 1, index, {2, 3, 4}),
                         doctest::Contains("input_size [2, 3, 4] has rank 3"), ShapeError);
    CHECK_THROWS_WITH_AS(gather_grad(g, 1, index, {1, 4}),
                         doctest::Contains("gather_grad: index of shape [2, 3] is larger than "
                                           "input_size [1, 4] on axis 0"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(gather_grad(g, 2, index, {2, 4}), doctest::Contains("gather_grad"),
                         IndexError);
    CHECK_THROWS_WITH_AS(gather_grad(g, kI64Min, index, {2, 4}), doctest::Contains("gather_grad"),
                         IndexError);
    CHECK_THROWS_WITH_AS(gather_grad(g, 1, index, {2, -4}),
                         doctest::Contains("input_size [2, -4] has a negative size -4"),
                         ValueError);
    CHECK_THROWS_WITH_AS(gather_grad(g, 1, tensor({{0, 1, 4}, {0, 0, 0}}, int64), {2, 4}),
                         doctest::Contains("gather_grad: index[0, 2] = 4 is out of range"),
                         IndexError);
    CHECK_THROWS_WITH_AS(gather_grad(g, 1, tensor({{0, 1, 2}, {0, -1, 0}}, int32), {2, 4}),
                         doctest::Contains("gather_grad: index[1, 1] = -1 is out of range"),
                         IndexError);
    CHECK_THROWS_WITH_AS(gather_grad(zeros({1, 1}), 0, full({1, 1}, kI64Min, int64), {2, 4}),
                         doctest::Contains("is out of range"), IndexError);
    CHECK_THROWS_WITH_AS(gather_grad(zeros({1, 1}), 0, zeros({1, 1}, int64), {kTwo40, kTwo40}),
                         doctest::Contains("gather_grad"), ValueError);

    const Tensor sg = zeros({4, 3}), si = tensor({0, 1, 2, 1}, int64);
    CHECK_THROWS_WITH_AS(index_select_grad(sg.to(bool_), 0, si, {3, 3}),
                         doctest::Contains("index_select_grad: grad_out dtype Bool"), TypeError);
    CHECK_THROWS_WITH_AS(index_select_grad(sg, 0, si.to(float64), {3, 3}),
                         doctest::Contains("index must have dtype Int32 or Int64"), TypeError);
    CHECK_THROWS_WITH_AS(index_select_grad(sg, 0, si.reshape({2, 2}), {3, 3}),
                         doctest::Contains("index_select_grad: index must be 1-D"), ShapeError);
    CHECK_THROWS_WITH_AS(index_select_grad(sg, 0, si, {3, 4}),
                         doctest::Contains("must have the index_select output shape [4, 4]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(index_select_grad(sg, 0, si, Shape{}),
                         doctest::Contains("input_size must have rank >= 1"), ShapeError);
    CHECK_THROWS_WITH_AS(index_select_grad(sg, -3, si, {3, 3}),
                         doctest::Contains("index_select_grad"), IndexError);
    CHECK_THROWS_WITH_AS(index_select_grad(sg, 0, tensor({0, 1, 3, 1}, int64), {3, 3}),
                         doctest::Contains("index_select_grad: index[2] = 3 is out of range"),
                         IndexError);
    CHECK_THROWS_WITH_AS(index_select_grad(sg, 0, tensor({0, kI64Min, 0, 1}, int64), {3, 3}),
                         doctest::Contains("is out of range"), IndexError);
  }

  // ------------------------------------------------------------ the jit's fused forms
  // (the fusion rules of src/jit/passes.cpp run these ops' kernels with the
  // fused steps on: a graph compiled at O1 must give the eager ops' bits,
  // ties, NaN and signed zeros included, and hold the fused op)

  TEST_CASE_TEMPLATE("jit: relu_grad(max_pool2d_grad(relu(y), g), y) fused, bitwise", T, float,
                     double) {
    std::vector<PoolCase> cases = kPoolStressCases;
    cases.push_back({{1, 2, 6, 40}, {2}, {}, {0}, {1}, false, true});  // full 16-lane groups
    std::uint32_t seed = 40;
    for (const PoolCase& c : cases) {
      CAPTURE(c.x);
      const MaxPool2dOptions o{.kernel = c.kernel,
                               .stride = c.stride,
                               .padding = c.padding,
                               .dilation = c.dilation,
                               .ceil_mode = c.ceil_mode};
      const Tensor y = pool_stress_tensor(c.x, dtype_of<T>, seed++);
      const Tensor g = random_tensor(dtype_of<T>, pool_out_shape(c, true), {}, seed++);
      const auto f = [o](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{relu_grad(max_pool2d_grad(relu(in[0]), in[1], o), in[0])};
      };
      auto jf = jit(f, {.jit_level = JitLevel::O1, .verify = true});
      const Tensor want = f({y, g})[0], got = jf(std::vector<Tensor>{y, g})[0];
      CHECK(same_bits<T>(got, want));
      CHECK(jf.dump().find("MaxPool2DGradRelu(") != std::string::npos);
      // and it differs from the plain gradient wherever a chosen input is 0
      CHECK_FALSE(same_bits<T>(got, max_pool2d_grad(relu(y), g, o)));
    }
  }

  TEST_CASE("jit: relu(conv2d(...)) fused, bitwise; float16 is left unfused") {
    for (const ConvGradCase& c : kConvGradCases) {
      CAPTURE(c.x);
      CAPTURE(c.w);
      const Ints bs{c.w[0]};
      const auto f = [o = c.o](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{relu(conv2d(in[0], in[1], in[2], o))};
      };
      auto jf = jit(f, {.jit_level = JitLevel::O1, .verify = true});
      for (DType dt : {float32, float64, int32, float16}) {
        CAPTURE(dt);
        const Tensor x = Tensor(random_tensor(float64, c.x, {}, 1) * 4.0).to(dt);
        const Tensor w = Tensor(random_tensor(float64, c.w, {}, 2) * 4.0).to(dt);
        const Tensor b = Tensor(random_tensor(float64, Shape(bs), {}, 3) * 4.0).to(dt);
        const Tensor want = f({x, w, b})[0], got = jf(std::vector<Tensor>{x, w, b})[0];
        if (dt == float32 || dt == float16)
          CHECK(same_bits<float>(got.to(float32), want.to(float32)));
        else if (dt == float64)
          CHECK(same_bits<double>(got, want));
        else
          CHECK(same_bits<std::int32_t>(got, want));
        // a half type rounds after the conv: relu of the rounded value stays apart
        CHECK((jf.dump().find("Conv2DFused(") != std::string::npos) == (dt != float16));
      }
    }
  }

  TEST_CASE("jit: conv2d -> (relu) -> max_pool2d(2) and its gradient fused, bitwise") {
    const std::vector<ConvGradCase> cases = {
        {{2, 3, 7, 7}, {4, 3, 3, 3}, {}},                  // im2col, odd output (5x5)
        {{3, 4, 6, 9}, {5, 4, 3, 3}, {.padding = {1}}},    // im2col, 6x9
        {{1, 2, 40, 41}, {3, 2, 3, 3}, {.padding = {1}}},  // several column tiles
        {{2, 6, 8, 8}, {9, 2, 3, 3}, {.padding = {1}, .groups = 3}},
        {{5, 16, 14, 14}, {32, 16, 3, 3}, {.padding = {1}}},  // Winograd
        {{3, 16, 9, 7}, {16, 16, 3, 3}, {.padding = {1}}},    // Winograd, odd sizes
    };
    const MaxPool2dOptions two{.kernel = {2}};
    for (const ConvGradCase& c : cases)
      for (bool with_relu : {false, true})
        for (DType dt : {float32, float64, int32}) {
          CAPTURE(c.x);
          CAPTURE(with_relu);
          CAPTURE(dt);
          const Tensor x = Tensor(random_tensor(float64, c.x, {}, 1) * 4.0).to(dt);
          const Tensor w = Tensor(random_tensor(float64, c.w, {}, 2) * 4.0).to(dt);
          const Tensor b = Tensor(random_tensor(float64, Shape{c.w[0]}, {}, 3) * 4.0).to(dt);
          // the forward: y and its pooling (the conv's second output)
          const auto fwd = [o = c.o, with_relu, two](const std::vector<Tensor>& in) {
            const Tensor y0 = conv2d(in[0], in[1], in[2], o);
            const Tensor y = with_relu ? Tensor(relu(y0)) : y0;
            return std::vector<Tensor>{y, max_pool2d(y, two)};
          };
          auto jfwd = jit(fwd, {.jit_level = JitLevel::O1, .verify = true});
          const std::vector<Tensor> want = fwd({x, w, b}), got = jfwd(std::vector<Tensor>{x, w, b});
          REQUIRE(got.size() == 2);
          CHECK(jfwd.dump().find("max_pool2x2=true") != std::string::npos);
          CHECK(jfwd.dump().find(" = MaxPool2D(") == std::string::npos);
          for (std::size_t k = 0; k < 2; ++k) {
            if (dt == float32)
              CHECK(same_bits<float>(got[k], want[k]));
            else if (dt == float64)
              CHECK(same_bits<double>(got[k], want[k]));
            else
              CHECK(same_bits<std::int32_t>(got[k], want[k]));
          }
          if (dt == int32) continue;
          // With the pooling's gradient: from the taps the forward noted (a
          // third output of the conv), with relu's gradient folded in or not.
          const Tensor gp = Tensor(random_tensor(float64, want[1].shape(), {}, 4) * 4.0).to(dt);
          const auto both = [o = c.o, with_relu, two](const std::vector<Tensor>& in) {
            const Tensor y0 = conv2d(in[0], in[1], in[2], o);
            const Tensor y = with_relu ? Tensor(relu(y0)) : y0;
            const Tensor gy = max_pool2d_grad(y, in[3], two);
            return std::vector<Tensor>{max_pool2d(y, two), with_relu ? relu_grad(gy, y0) : gy};
          };
          auto jboth = jit(both, {.jit_level = JitLevel::O1, .verify = true});
          const std::vector<Tensor> want2 = both({x, w, b, gp}),
                                    got2 = jboth(std::vector<Tensor>{x, w, b, gp});
          CHECK(jboth.dump().find("MaxPool2x2GradIndex(") != std::string::npos);
          CHECK(jboth.dump().find("max_pool2x2_index=true") != std::string::npos);
          for (std::size_t k = 0; k < 2; ++k) {
            if (dt == float32)
              CHECK(same_bits<float>(got2[k], want2[k]));
            else
              CHECK(same_bits<double>(got2[k], want2[k]));
          }
        }
  }

  // ------------------------------------------------------------ Winograd F(2x2, 3x3)

  TEST_CASE("conv2d and its gradients on the Winograd path (3x3, stride 1, >= 16 channels)") {
    // Values against the double loops, with and without bias and relu, on
    // paddings 0..2, odd and even sizes (partial edge tiles), a batch that
    // does not fill its last chunk, a 2x2 output and a one-tile-wide plane.
    const std::vector<ConvGradCase> cases = {
        {{3, 16, 14, 14}, {32, 16, 3, 3}, {.padding = {1}}},
        {{9, 16, 14, 14}, {16, 16, 3, 3}, {.padding = {1}}},  // two chunks, the last partial
        {{2, 16, 9, 7}, {16, 16, 3, 3}, {.padding = {1}}},
        {{7, 24, 5, 6}, {16, 24, 3, 3}, {}},
        {{2, 16, 6, 5}, {20, 16, 3, 3}, {.padding = {2}}},
        {{2, 16, 4, 4}, {16, 16, 3, 3}, {.padding = {0, 1}}},
        {{1, 17, 3, 40}, {18, 17, 3, 3}, {.padding = {1, 0}}},
        {{12, 16, 2, 2}, {16, 16, 3, 3}, {.padding = {1}}},
    };
    for (const ConvGradCase& c : cases) {
      CAPTURE(c.x);
      // float32 values, so that both dtypes hold them exactly and share the references
      const Shape ys = conv_out_shape(c.x, c.w, c.o);
      const Tensor x64 = random_tensor(float32, c.x, {}, 11).to(float64),
                   w64 = random_tensor(float32, c.w, {}, 12).to(float64);
      const Tensor b64 = random_tensor(float32, Shape{c.w[0]}, {}, 13).to(float64),
                   g64 = random_tensor(float32, ys, {}, 14).to(float64);
      // forward: y[n, q, a, b] = sum of x * w under the taps (+ bias)
      Values want(u(shape_numel(ys)), 0.0);
      const Values xv = x64.to_vector<double>(), wv = w64.to_vector<double>();
      conv_taps(
          c.x, c.w, c.o,
          [&](auto n, auto q, auto a, auto bb, auto ci, auto, auto i, auto j, auto ih, auto iw) {
            want[u(((n * ys[1] + q) * ys[2] + a) * ys[3] + bb)] +=
                xv[u(((n * c.x[1] + ci) * c.x[2] + ih) * c.x[3] + iw)] *
                wv[u(((q * c.w[1] + ci) * c.w[2] + i) * c.w[3] + j)];
          });
      const Values bv = b64.to_vector<double>();
      Values with_bias = want, relu_bias = want;
      for (std::size_t e = 0; e < want.size(); ++e) {
        with_bias[e] += bv[(e / u(ys[2] * ys[3])) % u(ys[1])];
        relu_bias[e] = with_bias[e] < 0 ? 0.0 : with_bias[e];
      }
      const Values grad_input = conv_grad_input_ref(g64, w64, c.x, c.o),
                   grad_weight = conv_grad_weight_ref(x64, g64, c.w, c.o);
      for (DType dt : {float32, float64}) {
        CAPTURE(dt);
        const Tensor x = x64.to(dt), w = w64.to(dt), b = b64.to(dt), g = g64.to(dt);
        check_close(conv2d(x, w, std::nullopt, c.o), want, ys, dt);
        check_close(conv2d(x, w, b, c.o), with_bias, ys, dt);
        // relu fused into the conv by the jit
        auto conv_relu = jit(
            [o = c.o](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{relu(conv2d(in[0], in[1], in[2], o))};
            },
            {.jit_level = JitLevel::O1});
        check_close(conv_relu(std::vector<Tensor>{x, w, b})[0], relu_bias, ys, dt);
        check_close(conv2d_grad_input(g, w, c.x, c.o), grad_input, c.x, dt);
        check_close(conv2d_grad_weight(x, g, c.w, c.o), grad_weight, c.w, dt);
      }
    }
  }
}
