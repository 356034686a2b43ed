// Gradient rules, one line (or a few) per op, in one table (as tinygrad's
// gradient table): each rule is written with ops, so that tracing it records
// the backward graph, which is differentiable again (grad of grad).
//
// Conventions: x, y, z are the inputs, o the output, g the output's gradient.
// A gradient always has its input's shape: broadcasting in the forward op is
// undone by `sum_to`.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ms/expr/expr.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/linalg.hpp"
#include "ms/ops/nn.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::ops::detail {
namespace {

using Grads = std::vector<Tensor>;

// Shorthands for the rules.
const Tensor& in(const GradContext& c, std::size_t i) { return c.inputs[i]; }
const Tensor& gout(const GradContext& c) { return c.out_grads[0]; }

void rule(std::string_view name, GradFn fn) { set_grad(name, std::move(fn)); }

void reduction_rules() {
  rule("softmax_cross_entropy", [](const GradContext& c) -> Grads {
    const Tensor& x = in(c, 0);
    const Tensor target = one_hot(in(c, 1), x.dim(1), x.dtype());
    return {Tensor((softmax(x, 1) - target) * unsqueeze(gout(c), 1)), Tensor()};
  });
}

// conv2d and pooling: the backward ops of src/ops/nn.cpp, with the forward's
// attributes (absent ones take the forward's defaults).
std::vector<std::int64_t> ints_attr(const GradContext& c, std::string_view name,
                                    std::vector<std::int64_t> fallback, std::string_view op) {
  return c.attrs.get_or<std::vector<std::int64_t>>(name, std::move(fallback), op);
}

Conv2dOptions conv_options(const GradContext& c) {
  return {.stride = ints_attr(c, "stride", {1, 1}, "conv2d"),
          .padding = ints_attr(c, "padding", {0, 0}, "conv2d"),
          .dilation = ints_attr(c, "dilation", {1, 1}, "conv2d"),
          .groups = c.attrs.get_or<std::int64_t>("groups", 1, "conv2d")};
}

void nn_rules() {
  rule("conv2d", [](const GradContext& c) -> Grads {
    // The jit fuses relu into conv2d after differentiation, in compiled graphs
    // only; a graph carrying the fused form is never differentiated again.
    MS_CHECK(!c.attrs.get_or<bool>("relu", false, "conv2d"), ValueError,
             "conv2d: the fused relu form (relu=true, set by the jit's activation fusion) has "
             "no gradient rule; differentiate conv2d followed by relu");
    const Tensor &x = in(c, 0), &w = in(c, 1), &g = gout(c);
    Grads r{conv2d_grad_input(g, w, x.shape(), conv_options(c)),
            conv2d_grad_weight(x, g, w.shape(), conv_options(c))};
    if (c.inputs.size() > 2) r.push_back(sum(g, {0, 2, 3}));  // bias: over N, OH, OW
    return r;
  });
  rule("max_pool2d", [](const GradContext& c) -> Grads {
    constexpr std::string_view op = "max_pool2d";
    return {max_pool2d_grad(in(c, 0), gout(c), ints_attr(c, "kernel_size", {}, op),
                            ints_attr(c, "stride", {}, op), ints_attr(c, "padding", {0, 0}, op),
                            ints_attr(c, "dilation", {1, 1}, op),
                            c.attrs.get_or<bool>("ceil_mode", false, op))};
  });
  rule("avg_pool2d", [](const GradContext& c) -> Grads {
    constexpr std::string_view op = "avg_pool2d";
    return {avg_pool2d_grad(gout(c), in(c, 0).shape(), ints_attr(c, "kernel_size", {}, op),
                            ints_attr(c, "stride", {}, op), ints_attr(c, "padding", {0, 0}, op),
                            c.attrs.get_or<bool>("ceil_mode", false, op),
                            c.attrs.get_or<bool>("count_include_pad", true, op))};
  });
}

// (height, width) of a pooling attribute of 1 or 2 values.
std::pair<std::int64_t, std::int64_t> pair_hw(const std::vector<std::int64_t>& v) {
  return {v.at(0), v.size() > 1 ? v[1] : v[0]};
}

// Which windows have tap `t` inside the input along one axis (size n, out
// windows, stride s, padding p, dilation d): 1 or 0 per window.
std::vector<std::uint8_t> taps_inside(std::int64_t t, std::int64_t n, std::int64_t out,
                                      std::int64_t s, std::int64_t p, std::int64_t d) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    const std::int64_t at = o * s - p + t * d;
    v[static_cast<std::size_t>(o)] = at >= 0 && at < n ? 1 : 0;
  }
  return v;
}

// The adjoint of max_pool2d_grad(x, .), which is linear in its gradient input:
// for each window, G at the tap max_pool2d_grad routes to (the first maximum in
// row-major tap order, else the last NaN; the first tap inside the input for a
// window of -inf). Tap (i, j) of every window is a strided slice of the padded
// x (and of the padded G), so overlapping windows, padding, dilation and ceil
// mode need nothing special; taps in the padding are masked out.
Tensor max_pool2d_grad_adjoint(const GradContext& c) {
  constexpr std::string_view op = "max_pool2d_grad";
  const Tensor &x = in(c, 0), &gy = in(c, 1), &G = gout(c);
  const std::vector<std::int64_t> kernel = ints_attr(c, "kernel_size", {}, op);
  std::vector<std::int64_t> stride = ints_attr(c, "stride", {}, op);
  if (stride.empty()) stride = kernel;
  const std::vector<std::int64_t> padding = ints_attr(c, "padding", {0, 0}, op);
  const std::vector<std::int64_t> dilation = ints_attr(c, "dilation", {1, 1}, op);
  const Tensor m = max_pool2d(x, kernel, stride, padding, dilation,
                              c.attrs.get_or<bool>("ceil_mode", false, op));
  // Plain variables, not structured bindings: clang 14 cannot capture those.
  const std::int64_t kh = pair_hw(kernel).first, kw = pair_hw(kernel).second;
  const std::int64_t sh = pair_hw(stride).first, sw = pair_hw(stride).second;
  const std::int64_t ph = pair_hw(padding).first, pw = pair_hw(padding).second;
  const std::int64_t dh = pair_hw(dilation).first, dw = pair_hw(dilation).second;
  const std::int64_t h = x.dim(-2), w = x.dim(-1), oh = gy.dim(-2), ow = gy.dim(-1);
  // Pad (bottom and right as far as ceil mode's last window reaches) so that
  // every tap's strided slice has oh x ow elements.
  const std::vector<std::int64_t> pads{
      pw, std::max<std::int64_t>((ow - 1) * sw + dw * (kw - 1) + 1 - w - pw, 0), ph,
      std::max<std::int64_t>((oh - 1) * sh + dh * (kh - 1) + 1 - h - ph, 0)};
  const Tensor xp = pad(x, pads), gp = pad(G, pads);
  struct Tap {
    Tensor is_max, is_nan, g;
  };
  std::vector<Tap> taps;
  for (std::int64_t i = 0; i < kh; ++i) {
    const std::vector<std::uint8_t> rows = taps_inside(i, h, oh, sh, ph, dh);
    const auto rows_in = std::count(rows.begin(), rows.end(), 1);
    if (rows_in == 0) continue;
    for (std::int64_t j = 0; j < kw; ++j) {
      const std::vector<std::uint8_t> cols = taps_inside(j, w, ow, sw, pw, dw);
      const auto cols_in = std::count(cols.begin(), cols.end(), 1);
      if (cols_in == 0) continue;
      const auto tap = [&](const Tensor& t) {
        return t.slice(-2, i * dh, i * dh + (oh - 1) * sh + 1, sh)
            .slice(-1, j * dw, j * dw + (ow - 1) * sw + 1, sw);
      };
      const Tensor xt = tap(xp);
      Tensor is_max = xt == m, is_nan = xt != xt;
      if (rows_in < oh || cols_in < ow) {  // some windows have this tap in the padding
        const Tensor inside = logical_and(cast(from_vector(rows, Shape{oh, 1}), bool_),
                                          cast(from_vector(cols, Shape{ow}), bool_));
        is_max = logical_and(is_max, inside);
        is_nan = logical_and(is_nan, inside);
      }
      taps.push_back({is_max, is_nan, tap(gp)});
    }
  }
  if (taps.empty()) return zeros(gy.shape(), G.dtype());
  Tensor first_max = where(taps.back().is_max, taps.back().g, 0);
  for (std::size_t k = taps.size() - 1; k-- > 0;)
    first_max = where(taps[k].is_max, taps[k].g, first_max);
  Tensor last_nan = where(taps.front().is_nan, taps.front().g, 0);
  for (std::size_t k = 1; k < taps.size(); ++k)
    last_nan = where(taps[k].is_nan, taps[k].g, last_nan);
  Tensor r = where(m != m, last_nan, first_max);
  // relu (the jit's activation fusion): windows whose maximum is not > 0 pass nothing.
  if (c.attrs.get_or<bool>("relu", false, op)) r = where(m > 0, r, 0);
  return r;
}

// The backward ops are linear in their gradient input (conv2d's bilinear), so
// their own gradients are the forward ops again (grad of grad). With G the
// gradient of their output:
//   conv2d_grad_input(gy, w) = A_w^T gy, where A_w x = conv2d(x, w):
//     <A_w^T gy, G> = <gy, conv2d(G, w)>, so d/d gy = conv2d(G, w) and
//     d/d w = conv2d_grad_weight(G, gy) (conv2d's weight gradient at input G);
//   conv2d_grad_weight(x, gy) = B_x^T gy, where B_x k = conv2d(x, k):
//     <B_x^T gy, G> = <gy, conv2d(x, G)>, so d/d gy = conv2d(x, G) and
//     d/d x = conv2d_grad_input(gy, G) (conv2d's input gradient at weight G).
void nn_backward_rules() {
  rule("conv2d_grad_input", [](const GradContext& c) -> Grads {
    const Tensor &gy = in(c, 0), &w = in(c, 1), &g = gout(c);
    return {conv2d(g, w, std::nullopt, conv_options(c)),
            conv2d_grad_weight(g, gy, w.shape(), conv_options(c))};
  });
  rule("conv2d_grad_weight", [](const GradContext& c) -> Grads {
    const Tensor &x = in(c, 0), &gy = in(c, 1), &g = gout(c);
    return {conv2d_grad_input(gy, g, x.shape(), conv_options(c)),
            conv2d(x, g, std::nullopt, conv_options(c))};
  });
  // avg_pool2d_grad is avg_pool2d's transpose: its adjoint is avg_pool2d.
  rule("avg_pool2d_grad", [](const GradContext& c) -> Grads {
    constexpr std::string_view op = "avg_pool2d_grad";
    return {avg_pool2d(gout(c), ints_attr(c, "kernel_size", {}, op), ints_attr(c, "stride", {}, op),
                       ints_attr(c, "padding", {0, 0}, op),
                       c.attrs.get_or<bool>("ceil_mode", false, op),
                       c.attrs.get_or<bool>("count_include_pad", true, op))};
  });
  // Piecewise constant in x (no gradient), linear in gy.
  rule("max_pool2d_grad", [](const GradContext& c) -> Grads {
    return {Tensor(), max_pool2d_grad_adjoint(c)};
  });
}

}  // namespace

void register_grads() {
  reduction_rules();
  nn_rules();
  nn_backward_rules();
}

}  // namespace ms::ops::detail
