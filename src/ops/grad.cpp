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
#include "ms/ops/op.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::ops::detail {
namespace {

using Grads = std::vector<Tensor>;

// Shorthands for the rules.
const Tensor& in(const GradContext& c, std::size_t i) { return c.inputs[i]; }
const Tensor& out(const GradContext& c) { return c.outputs[0]; }
const Tensor& gout(const GradContext& c) { return c.out_grads[0]; }

void rule(std::string_view name, GradFn fn) { set_grad(name, std::move(fn)); }

// Pads for ms::pad (PyTorch order: last axis first) that put a [start, start+len)
// window of an axis of size n back in place.
std::vector<std::int64_t> window_pads(std::int64_t rank, std::int64_t axis, std::int64_t start,
                                      std::int64_t after) {
  std::vector<std::int64_t> pads(static_cast<std::size_t>(2 * (rank - axis)), 0);
  pads[pads.size() - 2] = start;
  pads[pads.size() - 1] = after;
  return pads;
}

void layout_rules() {
  rule("slice", [](const GradContext& c) -> Grads {
    const Tensor& x = in(c, 0);
    const std::int64_t axis =
        axis_normalize(c.attrs.get<std::int64_t>("axis", "slice"), x.rank(), "slice");
    const std::int64_t step = c.attrs.get<std::int64_t>("step", "slice");
    const std::int64_t n = x.dim(axis), len = out(c).dim(axis);
    std::int64_t start = c.attrs.get<std::int64_t>("start", "slice");
    if (start < 0) start = start < -n ? 0 : start + n;
    start = std::min(start, n);
    if (step == 1 || len == 0)
      return {pad(gout(c), window_pads(x.rank(), axis, start, n - start - len))};
    // A strided slice: step - 1 zeros after each gradient slice (a pad on a
    // new axis, merged back), then placed at `start` (the tail past x cropped).
    const Tensor spread =
        pad(unsqueeze(gout(c), axis + 1), window_pads(x.rank() + 1, axis + 1, 0, step - 1));
    Shape merged = x.shape();
    merged[static_cast<std::size_t>(axis)] = len * step;
    return {
        pad(spread.reshape(merged), window_pads(x.rank(), axis, start, n - start - len * step))};
  });
  rule("select", [](const GradContext& c) -> Grads {
    const Tensor& x = in(c, 0);
    const std::int64_t axis =
        axis_normalize(c.attrs.get<std::int64_t>("axis", "select"), x.rank(), "select");
    std::int64_t index = c.attrs.get<std::int64_t>("index", "select");
    if (index < 0) index += x.dim(axis);
    return {
        pad(unsqueeze(gout(c), axis), window_pads(x.rank(), axis, index, x.dim(axis) - index - 1))};
  });
}

}  // namespace

void register_grads() { layout_rules(); }

}  // namespace ms::ops::detail
