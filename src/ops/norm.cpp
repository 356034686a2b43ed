// Layer normalization: its entry, backward entry, gradients, samples and
// public function (see ms/ops/norm.hpp). `infer` checks everything types and
// attributes allow; `eval` makes the inputs dense and calls the fused kernels
// of ms/kernels/norm.hpp.
#include "ms/ops/norm.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/expr/expr.hpp"
#include "ms/kernels/norm.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/elementwise.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::ops {
namespace {

using Types = std::span<const TensorType>;
using Inputs = std::span<const Tensor>;
using TypeList = std::vector<TensorType>;
using TensorList = std::vector<Tensor>;

constexpr std::string_view kLayerNorm = "layer_norm";

// x's shape, gamma's and the third input's (beta, or dy for the backward op)
// against each other; `third` names it.
void check(const LayerNormAttrs& a, Types in, std::string_view op, const char* third) {
  const DType dt = in[0].dtype;
  MS_CHECK(dt == float32 || dt == float64 || dt == bfloat16 || dt == float16, TypeError, op,
           ": x must have dtype Float32, Float64, BFloat16 or Float16, got ", dt);
  const char* names[] = {"x", "gamma", third};
  for (std::size_t i = 1; i < 3; ++i)
    MS_CHECK(in[i].dtype == dt, TypeError, op, ": ", names[i], " has dtype ", in[i].dtype,
             ", expected x's dtype ", dt, " (cast it with .to())");
  MS_CHECK(std::isfinite(a.eps) && a.eps >= 0, ValueError, op,
           ": eps must be finite and >= 0, got ", a.eps);
  const Shape& x = in[0].shape;
  if (x.is_any_rank()) return;
  MS_CHECK(x.rank() >= 1, ShapeError, op, ": x must have rank >= 1, got a rank-0 tensor");
  const std::int64_t ax = axis_normalize(a.axis, x.rank(), op);
  const Shape normalized(std::vector<std::int64_t>(x.begin() + ax, x.end()));
  // Shapes agree unless a dim is unknown on either side.
  const auto agree = [](const Shape& s, const Shape& want) {
    if (s.is_any_rank()) return true;
    if (s.rank() != want.rank()) return false;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (s[i] >= 0 && want[i] >= 0 && s[i] != want[i]) return false;
    return true;
  };
  MS_CHECK(agree(in[1].shape, normalized), ShapeError, op, ": gamma must have the shape of x's ",
           "normalized axes (x ", x, " from axis ", ax, "): ", normalized, ", got ", in[1].shape);
  const bool is_dy = std::string_view(third) == "dy";
  const Shape& want = is_dy ? x : normalized;
  MS_CHECK(agree(in[2].shape, want), ShapeError, op, ": ", third, " must have shape ", want,
           is_dy ? " (x's)" : " (gamma's)", ", got ", in[2].shape);
}

// The normalized axes of x (rank known).
std::vector<std::int64_t> normalized_axes(const LayerNormAttrs& a, const Tensor& x) {
  std::vector<std::int64_t> axes;
  for (std::int64_t i = axis_normalize(a.axis, x.rank(), kLayerNorm); i < x.rank(); ++i)
    axes.push_back(i);
  return axes;
}

using detail::dense;

}  // namespace

TypeList LayerNorm::infer(const Attrs& a, Types in) {
  check(a, in, name, "beta");
  return {in[0]};
}

void LayerNorm::run(const Attrs& a, Inputs in, Inputs out) {
  kernels::layer_norm_forward(dense(in[0]), dense(in[1]), dense(in[2]), a.eps, out[0]);
}

TensorList LayerNorm::vjp(const Attrs& a, const GradContext& c) {
  const Tensor& y = c.outputs[0];
  const Tensor dy = c.out_grads[0].defined() ? c.out_grads[0] : zeros(y.shape(), y.dtype());
  return invoke<LayerNormGrad>(std::vector<Tensor>{c.inputs[0], c.inputs[1], dy}, a);
}

TypeList LayerNormGrad::infer(const Attrs& a, Types in) {
  check(a, in, name, "dy");
  return {in[0], in[1], in[1]};
}

void LayerNormGrad::run(const Attrs& a, Inputs in, Inputs out) {
  kernels::layer_norm_backward(dense(in[0]), dense(in[1]), dense(in[2]), a.eps, out[0], out[1],
                               out[2]);
}

// Second derivatives, by hand, with ops. Per row, with xh = (x - mean) r,
// r = rsqrt(var + eps), g = dy * gamma, P(u) = u - mean(u) - xh mean(u xh)
// (symmetric): dx = r P(g), dgamma = sum over rows of dy xh, dbeta = the sum
// of dy. For the gradients A, Bg, Bb of dx, dgamma, dbeta: d/d dy = Bb +
// Bg xh + gamma r P(A); d/d gamma = rows' sum of dy r P(A); d/d x = r P(u) -
// mean(w) r^2 xh, where u = Bg dy - r (mean(g xh) A + mean(A xh) g) is the
// gradient through xh (r held) and w = A (g - mean(g) - xh mean(g xh)) the
// one through r, whose gradient in x is -r^2 xh / n.
TensorList LayerNormGrad::vjp(const Attrs& a, const GradContext& c) {
  const Tensor &x = c.inputs[0], &gamma = c.inputs[1], &dy = c.inputs[2];
  const Tensor &ga = c.out_grads[0], &gg = c.out_grads[1], &gb = c.out_grads[2];
  const std::vector<std::int64_t> axes = normalized_axes(a, x);
  const auto mean_of = [&](const Tensor& t) { return mean(t, axes, true); };
  const Tensor centered = x - mean_of(x);
  const Tensor r = rsqrt(mean_of(centered * centered) + a.eps);
  const Tensor xh = centered * r;
  const Tensor g = dy * gamma;
  Tensor ddy, dgamma, u, w;
  if (gb.defined()) ddy = gb + zeros_like(dy);
  if (gg.defined()) {
    ddy = detail::add_defined(ddy, gg * xh);
    u = gg * dy;
  }
  if (ga.defined()) {
    const Tensor pa = ga - mean_of(ga) - xh * mean_of(ga * xh);
    ddy = detail::add_defined(ddy, gamma * r * pa);
    dgamma = detail::sum_to(dy * r * pa, gamma.shape());
    const Tensor m = mean_of(g * xh);
    u = detail::add_defined(u, -(r * (m * ga + mean_of(ga * xh) * g)));
    w = mean_of(ga * (g - mean_of(g) - xh * m));
  }
  Tensor dx;
  if (u.defined()) dx = r * (u - mean_of(u) - xh * mean_of(u * xh));
  if (w.defined()) dx = detail::add_defined(dx, -(w * r * r * xh));
  return {dx, dgamma, ddy};
}

// ---------------------------------------------------------------- samples

namespace {

using LnAttrs = LayerNormAttrs;
using detail::f64;
using detail::rnd;
Tensor vec64(std::initializer_list<Scalar> v) { return tensor(v, float64); }

Sample valued(std::string label, std::vector<Tensor> in, const LnAttrs& a,
              std::vector<Tensor> out) {
  Sample s = detail::sample(std::move(label), std::move(in), a, std::move(out));
  s.tol = 1e-12;
  return s;
}

}  // namespace

Samples LayerNorm::samples() {
  // Rows [1, 2, 3] and [2, 4, 6]: centered [-1, 0, 1] and [-2, 0, 2], variances
  // 2/3 and 8/3, so both normalize to [-s, 0, s] with s = sqrt(3/2).
  const double s = std::sqrt(1.5);
  const Tensor x = f64({{1, 2, 3}, {2, 4, 6}});
  std::vector<Sample> cases{
      valued("rows normalized, gamma 1, beta 0, eps 0", {x, vec64({1, 1, 1}), vec64({0, 0, 0})},
             LnAttrs{.eps = 0}, {f64({{-s, 0, s}, {-s, 0, s}})}),
      valued("gamma scales and beta shifts each column", {x, vec64({1, 2, 3}), vec64({1, 0, -1})},
             LnAttrs{.eps = 0}, {f64({{1 - s, 0, 3 * s - 1}, {1 - s, 0, 3 * s - 1}})}),
      valued("eps 1 adds to the variance 2/3",
             {f64({{1, 2, 3}}), vec64({1, 1, 1}), vec64({0, 0, 0})}, LnAttrs{.eps = 1},
             {f64({{-std::sqrt(0.6), 0, std::sqrt(0.6)}})}),
      valued("axis 0: the whole tensor is one row", {vec64({1, 3}), vec64({1, 1}), vec64({0, 0})},
             LnAttrs{.axis = 0, .eps = 0}, {vec64({-1, 1})}),
      detail::sample("float32 [4, 70, 33]",
                     {rnd({4, 70, 33}, 1, float32), rnd({33}, 2, float32), rnd({33}, 3, float32)},
                     LnAttrs{}),
      detail::sample("bfloat16 [3, 20]",
                     {rnd({3, 20}, 4, bfloat16), rnd({20}, 5, bfloat16), rnd({20}, 6, bfloat16)},
                     LnAttrs{}),
      detail::sample("float16 [3, 20]",
                     {rnd({3, 20}, 7, float16), rnd({20}, 8, float16), rnd({20}, 9, float16)},
                     LnAttrs{}),
      detail::sample("gradient [2, 3, 5], last axis",
                     {rnd({2, 3, 5}, 10), rnd({5}, 11), rnd({5}, 12)}, LnAttrs{}, {}, {0, 1, 2}),
      detail::sample("gradient [2, 3, 5] over axes 1 and 2, eps 0.1",
                     {rnd({2, 3, 5}, 13), rnd({3, 5}, 14), rnd({3, 5}, 15)},
                     LnAttrs{.axis = 1, .eps = 0.1}, {}, {0, 1, 2}),
      detail::sample("gradient, 70 rows of 17 (several blocks of rows)",
                     {rnd({70, 17}, 16), rnd({17}, 17), rnd({17}, 18)}, LnAttrs{}, {}, {0, 1, 2}),
  };
  const auto err = [](std::string label, std::vector<Tensor> in, const LnAttrs& a,
                      std::string_view kind, std::string msg) {
    return detail::error_sample(std::move(label), std::move(in), a, kind, std::move(msg));
  };
  const Tensor x2 = zeros({2, 3}), g3 = zeros({3});
  const std::string op(kLayerNorm);
  std::vector<ErrorSample> errors{
      err("int32 x", {zeros({2, 3}, int32), zeros({3}, int32), zeros({3}, int32)}, LnAttrs{},
          "ms::TypeError",
          op + ": x must have dtype Float32, Float64, BFloat16 or Float16, got Int32"),
      err("gamma of another dtype", {x2, zeros({3}, float64), g3}, LnAttrs{}, "ms::TypeError",
          op + ": gamma has dtype Float64, expected x's dtype Float32"),
      err("gamma of another shape", {x2, zeros({2}), g3}, LnAttrs{}, "ms::ShapeError",
          op + ": gamma must have the shape of x's normalized axes (x [2, 3] from axis 1): [3], "
               "got [2]"),
      err("beta of another shape", {x2, g3, zeros({2, 3})}, LnAttrs{}, "ms::ShapeError",
          op + ": beta must have shape [3] (gamma's), got [2, 3]"),
      err("axis out of range", {x2, g3, g3}, LnAttrs{.axis = 2}, "ms::IndexError",
          op + ": axis 2 is out of range for a tensor of rank 2"),
      err("negative eps", {x2, g3, g3}, LnAttrs{.eps = -1}, "ms::ValueError",
          op + ": eps must be finite and >= 0, got -1"),
      err("rank-0 x", {zeros({}), zeros({}), zeros({})}, LnAttrs{}, "ms::ShapeError",
          op + ": x must have rank >= 1, got a rank-0 tensor"),
  };
  return {.cases = std::move(cases), .errors = std::move(errors)};
}

Samples LayerNormGrad::samples() {
  // x = [1, 3] (xh = [-1, 1], r = 1), gamma = [2, 3], dy = [1, 0]: g = [2, 0],
  // mean(g) = 1, mean(g xh) = -1: dx = [2 - 1 - 1, 0 - 1 + 1] = [0, 0];
  // dgamma = dy xh = [-1, 0]; dbeta = dy.
  Sample hand =
      detail::sample("by hand, one row of 2, eps 0", {f64({{1, 3}}), vec64({2, 3}), f64({{1, 0}})},
                     LnAttrs{.eps = 0}, {f64({{0, 0}}), vec64({-1, 0}), vec64({1, 0})});
  hand.tol = 1e-15;
  std::vector<Sample> cases{
      hand,
      detail::sample("second order [2, 3, 4]",
                     {rnd({2, 3, 4}, 20), rnd({4}, 21), rnd({2, 3, 4}, 22)}, LnAttrs{}, {},
                     {0, 1, 2}),
      detail::sample("second order over axes 1 and 2, eps 0.2",
                     {rnd({2, 3, 4}, 23), rnd({3, 4}, 24), rnd({2, 3, 4}, 25)},
                     LnAttrs{.axis = 1, .eps = 0.2}, {}, {0, 1, 2}),
      detail::sample(
          "float32 [70, 17]",
          {rnd({70, 17}, 26, float32), rnd({17}, 27, float32), rnd({70, 17}, 28, float32)},
          LnAttrs{}),
  };
  const std::string op(name);
  std::vector<ErrorSample> errors{
      detail::error_sample("dy of another shape", {zeros({2, 3}), zeros({3}), zeros({3})},
                           LnAttrs{}, "ms::ShapeError",
                           op + ": dy must have shape [2, 3] (x's), got [3]"),
  };
  return {.cases = std::move(cases), .errors = std::move(errors)};
}

}  // namespace ms::ops

namespace ms {

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                  const LayerNormOptions& opts) {
  return ops::invoke<ops::LayerNorm>(std::vector<Tensor>{x, gamma, beta},
                                     ops::LayerNormAttrs{.axis = opts.axis, .eps = opts.eps})[0];
}

}  // namespace ms

namespace ms::ops::detail {

void register_norm_ops() { register_entries<LayerNorm, LayerNormGrad>(); }

}  // namespace ms::ops::detail
