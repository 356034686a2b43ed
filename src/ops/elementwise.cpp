// Op-table entries of the elementwise ops: derived from the structs of
// ms/ops/elementwise.hpp (name, arity, dtype rule), evaluated by the same
// lowering and fused tile loop as the expression templates.
#include "ms/ops/elementwise.hpp"

#include <cmath>
#include <numbers>

#include "ms/expr/expr.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::ops::detail {

Tensor add_defined(const Tensor& a, const Tensor& b) { return a.defined() ? a + b : b; }

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const std::int64_t lead = g.rank() - shape.rank();
  std::vector<std::int64_t> axes;
  for (std::int64_t i = 0; i < g.rank(); ++i)
    if (i < lead || (shape[static_cast<std::size_t>(i - lead)] == 1 && g.dim(i) != 1))
      axes.push_back(i);
  const Tensor r = axes.empty() ? g : sum(g, axes, true);
  return reshape(r, shape);
}

namespace {

// The gradients of an elementwise op's inputs from its vjp: broadcasting in
// the forward op is undone by `sum_to`.
template <class Op>
std::vector<Tensor> ew_grad(const GradContext& c) {
  const Tensor &out = c.outputs[0], &g = c.out_grads[0];
  const auto undo = [&](const Tensor& d, std::size_t i) {
    return d.defined() ? sum_to(d, c.inputs[i].shape()) : d;
  };
  if constexpr (Op::arity == 1) {
    return {Op::vjp(c.inputs[0], out, g)};
  } else if constexpr (Op::arity == 2) {
    const auto [dx, dy] = Op::vjp(c.inputs[0], c.inputs[1], out, g);
    return {undo(dx, 0), undo(dy, 1)};
  } else {
    const auto d = Op::vjp(c.inputs[0], c.inputs[1], c.inputs[2], out, g);
    return {undo(d[0], 0), undo(d[1], 1), undo(d[2], 2)};
  }
}

std::vector<TensorType> ew_infer(int id, std::span<const TensorType> in) {
  const EwOpInfo& info = ew_op_info(id);
  kernels::EwOperand operands[3];
  Shape shape = in[0].shape;
  for (std::size_t i = 0; i < in.size(); ++i) {
    operands[i] = {in[i].dtype, false, ScalarKind::Float};
    if (i) shape = shape_broadcast(shape, in[i].shape, info.name);
  }
  const auto types =
      kernels::ew_infer_types(id, std::span<const kernels::EwOperand>(operands, in.size()));
  return {TensorType{types.out, shape}};
}

template <class Op>
GradFn ew_grad_fn() {
  if constexpr (EwDifferentiable<Op>)
    return ew_grad<Op>;
  else
    return {};
}

template <class Op>
constexpr Algebra ew_algebra() {
  if constexpr (requires { Op::algebra; })
    return Op::algebra;
  else
    return {};
}

template <class... Ops>
void register_list(OpList<Ops...>) {
  (registry_add(OpDef{
       .name = Ops::name,
       .kind = OpKind::Elementwise,
       .min_inputs = Ops::arity,
       .max_inputs = Ops::arity,
       .differentiable = EwDifferentiable<Ops>,
       // An unfused elementwise step (split_op, a dump) is rare: assume it may alias.
       .may_alias = true,
       .infer = [](std::span<const TensorType> in,
                   const Attrs&) { return ew_infer(ew_op_id<Ops>, in); },
       .eval =
           [](std::span<const Tensor> in, const Attrs&) {
             expr::Lowering L;
             expr::Lowered operands[3];
             for (std::size_t i = 0; i < in.size(); ++i) operands[i] = expr::lower_tensor(L, in[i]);
             const expr::Lowered root = expr::lower_apply(
                 L, ew_op_id<Ops>, std::span<const expr::Lowered>(operands, in.size()));
             return std::vector<Tensor>{expr::evaluate(L, root)};
           },
       .grad = ew_grad_fn<Ops>(),
       .algebra = ew_algebra<Ops>(),
   }),
   ...);
}

}  // namespace

void register_elementwise_ops() { register_list(ElementwiseOps{}); }

}  // namespace ms::ops::detail

namespace ms::ops {

// Checked here, once, rather than in every file that includes the header.
namespace {
template <class... Ops>
constexpr bool ew_ids_in_order(OpList<Ops...>) {
  int i = 0;
  return ((ew_op_id<Ops> == i++) && ...);
}
}  // namespace
static_assert(
    ElementwiseOps::size == kernels::EwInstructions::size && ew_ids_in_order(ElementwiseOps{}),
    "ElementwiseOps lists one entry per kernels::EwInstructions instruction, in its order");

// ---------------------------------------------------------------- gradients
// x, y, z are the inputs, out the output, g its gradient; a binary or ternary
// vjp returns the gradients before broadcasting is undone.

namespace {
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi)
using Pair = std::pair<Tensor, Tensor>;
}  // namespace

Tensor Neg::vjp(const Tensor&, const Tensor&, const Tensor& g) { return -g; }
Tensor Abs::vjp(const Tensor& x, const Tensor&, const Tensor& g) { return g * sign(x); }
Tensor Exp::vjp(const Tensor&, const Tensor& o, const Tensor& g) { return g * o; }
Tensor Log::vjp(const Tensor& x, const Tensor&, const Tensor& g) { return g / x; }
Tensor Log1p::vjp(const Tensor& x, const Tensor&, const Tensor& g) { return g / (x + 1.0); }
Tensor Sqrt::vjp(const Tensor&, const Tensor& o, const Tensor& g) { return g / (o * 2.0); }
Tensor Rsqrt::vjp(const Tensor&, const Tensor& o, const Tensor& g) { return g * o * o * o * -0.5; }
Tensor Square::vjp(const Tensor& x, const Tensor&, const Tensor& g) { return g * x * 2.0; }
Tensor Reciprocal::vjp(const Tensor&, const Tensor& o, const Tensor& g) { return -(g * o * o); }
Tensor Sin::vjp(const Tensor& x, const Tensor&, const Tensor& g) { return g * cos(x); }
Tensor Cos::vjp(const Tensor& x, const Tensor&, const Tensor& g) { return -(g * sin(x)); }
Tensor Tanh::vjp(const Tensor&, const Tensor& o, const Tensor& g) { return g * (1.0 - o * o); }
Tensor Sigmoid::vjp(const Tensor&, const Tensor& o, const Tensor& g) { return g * o * (1.0 - o); }
Tensor Relu::vjp(const Tensor& x, const Tensor&, const Tensor& g) { return relu_grad(g, x); }
// relu_grad(g, x) is linear in g; in x it is a step (no gradient).
Pair ReluGrad::vjp(const Tensor&, const Tensor& x, const Tensor&, const Tensor& g) {
  return {relu_grad(g, x), Tensor()};
}
Tensor Erf::vjp(const Tensor& x, const Tensor&, const Tensor& g) {
  return g * exp(-(x * x)) * (2.0 / std::sqrt(std::numbers::pi));
}
Tensor Gelu::vjp(const Tensor& x, const Tensor&, const Tensor& g) { return gelu_grad(g, x); }
// gelu_grad(g, x) = g * gelu'(x) is linear in g; in x its derivative is
// g * gelu''(x) = g * phi(x) * (2 - x^2).
Pair GeluGrad::vjp(const Tensor& g, const Tensor& x, const Tensor&, const Tensor& gg) {
  return {gelu_grad(gg, x), gg * g * exp(x * x * -0.5) * (2.0 - x * x) * kInvSqrt2Pi};
}
Tensor GeluTanh::vjp(const Tensor& x, const Tensor&, const Tensor& g) {
  return gelu_tanh_grad(g, x);
}
// With u = k (x + a x^3), t = tanh(u): gelu_tanh'(x) = (1 + t) / 2 + x (1 - t^2) u' / 2, and
// its derivative in x is (1 - t^2) (u' - x t u'^2 + x u'' / 2), u' = k (1 + 3 a x^2), u'' = 6 a k
// x.
Pair GeluTanhGrad::vjp(const Tensor& g, const Tensor& x, const Tensor&, const Tensor& gg) {
  constexpr double k = 0.7978845608028654;  // sqrt(2 / pi)
  constexpr double a = 0.044715;
  const Tensor t = tanh((x + x * x * x * a) * k);
  const Tensor du = (x * x * (3 * a) + 1.0) * k;
  const Tensor d2 = (1.0 - t * t) * (du - x * t * du * du + x * x * (3 * a * k));
  return {gelu_tanh_grad(gg, x), gg * g * d2};
}
Tensor Silu::vjp(const Tensor& x, const Tensor&, const Tensor& g) {
  const Tensor s = sigmoid(x);
  return g * s * (x * (1.0 - s) + 1.0);
}
Tensor Softplus::vjp(const Tensor& x, const Tensor&, const Tensor& g) { return g * sigmoid(x); }
// As PyTorch: 0 below -3, 1 above 3, (2x + 3) / 6 between (3 included).
Tensor Hardswish::vjp(const Tensor& x, const Tensor&, const Tensor& g) {
  return where(x < -3.0, 0, where(x > 3.0, g, g * (x / 3.0 + 0.5)));
}

Pair Add::vjp(const Tensor&, const Tensor&, const Tensor&, const Tensor& g) { return {g, g}; }
Pair Sub::vjp(const Tensor&, const Tensor&, const Tensor&, const Tensor& g) { return {g, -g}; }
Pair Mul::vjp(const Tensor& x, const Tensor& y, const Tensor&, const Tensor& g) {
  return {g * y, g * x};
}
Pair Div::vjp(const Tensor&, const Tensor& y, const Tensor& o, const Tensor& g) {
  return {g / y, -(g * o / y)};
}
// d/dy x^y = x^y log x, taken as 0 where x <= 0 (as PyTorch at x = 0).
Pair Pow::vjp(const Tensor& x, const Tensor& y, const Tensor& o, const Tensor& g) {
  return {g * y * pow(x, y - 1.0), where(x > 0, g * o * log(x), 0)};
}
// Ties share the gradient equally (as PyTorch).
Pair Maximum::vjp(const Tensor& x, const Tensor& y, const Tensor&, const Tensor& g) {
  const Tensor tie = where(x == y, g * 0.5, 0);
  return {where(x > y, g, tie), where(y > x, g, tie)};
}
Pair Minimum::vjp(const Tensor& x, const Tensor& y, const Tensor&, const Tensor& g) {
  const Tensor tie = where(x == y, g * 0.5, 0);
  return {where(x < y, g, tie), where(y < x, g, tie)};
}
std::array<Tensor, 3> Where::vjp(const Tensor& cond, const Tensor&, const Tensor&, const Tensor&,
                                 const Tensor& g) {
  return {Tensor(), where(cond, g, 0), where(cond, 0, g)};
}
// NaN bounds propagate to the output; the gradient goes where the value came from.
std::array<Tensor, 3> Clamp::vjp(const Tensor& x, const Tensor& lo, const Tensor& hi, const Tensor&,
                                 const Tensor& g) {
  const Tensor below = x < lo, above = logical_and(x > hi, !below);
  return {where(logical_or(below, above), 0, g), where(below, g, 0), where(above, g, 0)};
}

}  // namespace ms::ops
