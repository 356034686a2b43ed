// The export mapping: one row per op of ms's op table (src/onnx/emit.hpp), and
// the ops that do not export with their reasons. docs/onnx_ops.md is generated
// from these two tables (tests/onnx/test_export.cpp checks it is in sync).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <string>

#include "emit.hpp"
#include "ms/core/error.hpp"
#include "ms/ops/attention.hpp"
#include "ms/ops/elementwise.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/linalg.hpp"
#include "ms/ops/nn.hpp"
#include "ms/ops/norm.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::onnx::detail {
namespace {

using NodeProto = ::onnx::NodeProto;
using AttrProto = ::onnx::AttributeProto;
using I64s = std::vector<std::int64_t>;

void set_i(NodeProto& n, const char* name, std::int64_t v) {
  AttrProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(AttrProto::INT);
  a.set_i(v);
}
void set_f(NodeProto& n, const char* name, double v) {
  AttrProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(AttrProto::FLOAT);
  a.set_f(static_cast<float>(v));
}
void set_ints(NodeProto& n, const char* name, const I64s& v) {
  AttrProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(AttrProto::INTS);
  for (std::int64_t x : v) a.add_ints(x);
}
void set_s(NodeProto& n, const char* name, const std::string& v) {
  AttrProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(AttrProto::STRING);
  a.set_s(v);
}

/// The node's typed attributes (absent fields keep their defaults).
template <class A>
A typed(const NodeCtx& c) {
  return ops::attrs_from<A>(c.node.attrs, c.node.def->name);
}

std::int64_t norm_axis(std::int64_t axis, std::int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// The dtype an ONNX op that takes floats only computes `t` in: float16,
/// float32 and float64 themselves, bfloat16 in float32 (as ms does), integers
/// in float64 when `ints` (exact for max pooling), else `t` (the checker then
/// rejects the model with a TypeError).
DType float_compute(DType t, bool ints) {
  if (t == DType::BFloat16) return DType::Float32;
  if (ints && dtype_is_int(t) && t != DType::Int8 && t != DType::UInt8) return DType::Float64;
  return t;
}
/// Where's dtype for `t`: bfloat16 in float32 before opset 16.
DType where_dtype(const Emitter& e, DType t) {
  return t == DType::BFloat16 && e.opset < 16 ? DType::Float32 : t;
}

/// The output written under the node's own output name.
void emit_as(NodeCtx& c, std::string_view op, std::vector<std::string> in) {
  c.e.add(op, std::move(in), {c.out.at(0)});
}
/// Identity from `x` to the node's output.
void forward(NodeCtx& c, const std::string& x) { emit_as(c, "Identity", {x}); }
/// Node `op` computing in dtype `w`, its result converted to the output's
/// dtype `t` (and squeezed at axis 0 when `squeeze0`) into the node's output.
NodeProto& emit_via(NodeCtx& c, std::string_view op, std::vector<std::string> in, DType w, DType t,
                    bool squeeze0 = false) {
  Emitter& e = c.e;
  if (w == t && !squeeze0) return e.add(op, std::move(in), {c.out[0]});
  const std::string y = e.fresh(op);
  NodeProto& n = e.add(op, std::move(in), {y});  // protobuf keeps elements in place
  std::string z = y;
  if (squeeze0) {
    z = w == t ? c.out[0] : e.fresh("Squeeze");
    e.add("Squeeze", {y, e.ints({0})}, {z});
  }
  if (w != t) set_i(e.add("Cast", {z}, {c.out[0]}), "to", onnx_dtype(t, "a cast"));
  return n;
}

// ---------------------------------------------------------------- elementwise

/// A unary or binary op computed in the output dtype.
template <const char* Op>
void same(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  std::vector<std::string> in;
  for (std::size_t i = 0; i < c.arity(); ++i) in.push_back(c.in(i, t));
  emit_as(c, Op, std::move(in));
}
/// A comparison computed in the operands' common dtype (bool result).
template <const char* Op, bool Negate = false>
void compare(NodeCtx& c) {
  const DType t = c.common_dtype();
  if (!Negate) return emit_as(c, Op, {c.in(0, t), c.in(1, t)});
  emit_as(c, "Not", {c.e.add1(Op, {c.in(0, t), c.in(1, t)})});
}
/// A logical op on operands read as bool.
template <const char* Op>
void logical(NodeCtx& c) {
  std::vector<std::string> in;
  for (std::size_t i = 0; i < c.arity(); ++i) in.push_back(c.in(i, DType::Bool));
  emit_as(c, Op, std::move(in));
}
/// floor, ceil, round: the identity on integers (ONNX's ops take floats only).
template <const char* Op>
void rounding(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  if (!dtype_is_float(t)) return forward(c, c.in(0, t));
  emit_as(c, Op, {c.in(0, t)});
}

constexpr char kNeg[] = "Neg", kAbs[] = "Abs", kExp[] = "Exp", kLog[] = "Log", kSqrt[] = "Sqrt",
               kReciprocal[] = "Reciprocal", kSign[] = "Sign", kFloor[] = "Floor", kCeil[] = "Ceil",
               kRound[] = "Round", kSin[] = "Sin", kCos[] = "Cos", kTanh[] = "Tanh",
               kSigmoid[] = "Sigmoid", kRelu[] = "Relu", kErf[] = "Erf", kSoftplus[] = "Softplus",
               kNot[] = "Not", kAdd[] = "Add", kSub[] = "Sub", kMul[] = "Mul", kDiv[] = "Div",
               kPow[] = "Pow", kMax[] = "Max", kMin[] = "Min", kEqual[] = "Equal", kLess[] = "Less",
               kLessEq[] = "LessOrEqual", kGreater[] = "Greater", kGreaterEq[] = "GreaterOrEqual",
               kAnd[] = "And", kOr[] = "Or";

void log1p(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  emit_as(c, "Log", {c.e.add1("Add", {c.in(0, t), c.e.scalar(1, t)})});
}
void rsqrt(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  emit_as(c, "Reciprocal", {c.e.add1("Sqrt", {c.in(0, t)})});
}
void square(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  const std::string x = c.in(0, t);
  emit_as(c, "Mul", {x, x});
}
void silu(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  const std::string x = c.in(0, t);
  emit_as(c, "Mul", {x, c.e.add1("Sigmoid", {x})});
}
// 0.5 * x * (1 + erf(x / sqrt(2)))
void gelu(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  Emitter& e = c.e;
  const std::string x = c.in(0, t);
  const std::string erf = e.add1("Erf", {e.add1("Mul", {x, e.scalar(std::numbers::sqrt2 / 2, t)})});
  const std::string half_x = e.add1("Mul", {x, e.scalar(0.5, t)});
  emit_as(c, "Mul", {half_x, e.add1("Add", {erf, e.scalar(1, t)})});
}
// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
void gelu_tanh(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  Emitter& e = c.e;
  const std::string x = c.in(0, t);
  const std::string x3 = e.add1("Mul", {e.add1("Mul", {x, x}), x});
  const std::string inner = e.add1("Add", {x, e.add1("Mul", {x3, e.scalar(0.044715, t)})});
  const double k = std::sqrt(2 / std::numbers::pi);
  const std::string th = e.add1("Tanh", {e.add1("Mul", {inner, e.scalar(k, t)})});
  const std::string half_x = e.add1("Mul", {x, e.scalar(0.5, t)});
  emit_as(c, "Mul", {half_x, e.add1("Add", {th, e.scalar(1, t)})});
}
void hardswish(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  const std::string x = c.in(0, t);
  if (c.e.opset >= 14) return emit_as(c, "HardSwish", {x});
  NodeProto& hs = c.e.add("HardSigmoid", {x}, {c.e.fresh("HardSigmoid")});
  set_f(hs, "alpha", 1.0 / 6);
  set_f(hs, "beta", 0.5);
  emit_as(c, "Mul", {x, hs.output(0)});
}
void where(NodeCtx& c) {
  const DType t = c.out_type().dtype, w = where_dtype(c.e, t);
  emit_via(c, "Where", {c.in(0, DType::Bool), c.in(1, w), c.in(2, w)}, w, t);
}
// min(max(x, lo), hi)
void clamp(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  emit_as(c, "Min", {c.e.add1("Max", {c.in(0, t), c.in(1, t)}), c.in(2, t)});
}

// ---------------------------------------------------------------- reductions

/// `axes` of input 0, normalized (empty: every axis).
I64s reduce_axes(NodeCtx& c, I64s axes) {
  for (auto& a : axes) a = norm_axis(a, c.in_type(0).shape.rank());
  return axes;
}
/// A reduction of `x` over `axes`: axes as an input for ReduceSum, as an
/// attribute for the others (ONNX opsets 13-17).
NodeProto& reduce(NodeCtx& c, std::string_view op, const std::string& x, const I64s& axes,
                  bool keepdims, std::string out) {
  std::vector<std::string> in{x};
  if (op == "ReduceSum" && !axes.empty()) in.push_back(c.e.ints(axes));
  NodeProto& n = c.e.add(op, std::move(in), {std::move(out)});
  if (op != "ReduceSum" && !axes.empty()) set_ints(n, "axes", axes);
  set_i(n, "keepdims", keepdims ? 1 : 0);
  return n;
}
template <const char* Op>
void reduction(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  const auto a = typed<ops::AxesAttrs>(c);
  reduce(c, Op, c.in(0, t), reduce_axes(c, a.axes), a.keepdims, c.out[0]);
}
constexpr char kReduceSum[] = "ReduceSum", kReduceMean[] = "ReduceMean",
               kReduceProd[] = "ReduceProd", kReduceMax[] = "ReduceMax", kReduceMin[] = "ReduceMin",
               kReduceLogSumExp[] = "ReduceLogSumExp";
/// all / any: ReduceMin / ReduceMax over the operand as int32, back to bool.
template <const char* Op>
void bool_reduction(NodeCtx& c) {
  const std::string x = c.in(0, DType::Bool);
  const std::string r = c.e.fresh(Op);
  const auto a = typed<ops::AxesAttrs>(c);
  reduce(c, Op, c.e.cast(x, DType::Bool, DType::Int32), reduce_axes(c, a.axes), a.keepdims, r);
  forward(c, c.e.cast(r, DType::Int32, DType::Bool));
}
template <const char* Op>
void arg_reduction(NodeCtx& c) {
  std::string x = c.in(0);
  const auto a = typed<ops::ArgAttrs>(c);
  const std::optional<std::int64_t> axis = a.axis;
  if (!axis) x = c.e.add1("Reshape", {x, c.e.ints({-1})});
  const std::string r = c.e.fresh(Op);
  NodeProto& n = c.e.add(Op, {x}, {r});
  set_i(n, "axis", axis ? norm_axis(*axis, c.in_type(0).shape.rank()) : 0);
  set_i(n, "keepdims", a.keepdims && axis ? 1 : 0);
  forward(c, c.e.cast(r, DType::Int64, c.out_type().dtype));
}
constexpr char kArgMax[] = "ArgMax", kArgMin[] = "ArgMin";
/// var = sum((x - mean)^2) / (N - ddof), N from the input's shape (Shape,
/// Gather, ReduceProd), so that a symbolic dim stays symbolic; std = sqrt(var).
template <bool Sqrt>
void variance(NodeCtx& c) {
  Emitter& e = c.e;
  const DType t = c.out_type().dtype;
  const std::string x = c.in(0, t);
  const auto va = typed<ops::VarAttrs>(c);
  I64s axes = reduce_axes(c, va.axes);
  if (axes.empty())
    for (std::int64_t i = 0; i < c.in_type(0).shape.rank(); ++i) axes.push_back(i);
  const std::string mean = e.fresh("mean");
  reduce(c, "ReduceMean", x, axes, true, mean);
  const std::string d = e.add1("Sub", {x, mean});
  const std::string ss = e.fresh("sumsq");
  reduce(c, "ReduceSum", e.add1("Mul", {d, d}), axes, va.keepdims, ss);
  const std::string dims = e.add1("Gather", {e.add1("Shape", {x}), e.ints(axes)});
  const std::string n = e.fresh("count");
  reduce(c, "ReduceProd", dims, {}, false, n);
  const std::string denom =
      e.add1("Sub", {e.cast(n, DType::Int64, t), e.scalar(static_cast<double>(va.ddof), t)});
  if (!Sqrt) return emit_as(c, "Div", {ss, denom});
  emit_as(c, "Sqrt", {e.add1("Div", {ss, denom})});
}
// LayerNormalization from opset 17; before, its definition written out:
// (x - ReduceMean(x)) / Sqrt(ReduceMean(d * d) + eps) * gamma + beta.
void layer_norm(NodeCtx& c) {
  Emitter& e = c.e;
  const DType t = c.out_type().dtype;
  const auto a = typed<ops::LayerNormAttrs>(c);
  const std::int64_t rank = c.in_type(0).shape.rank();
  const std::int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
  const std::string x = c.in(0, t), gamma = c.in(1, t), beta = c.in(2, t);
  if (e.opset >= 17) {
    NodeProto& n = e.add("LayerNormalization", {x, gamma, beta}, {c.out[0]});
    set_i(n, "axis", axis);
    set_f(n, "epsilon", a.eps);
    return;
  }
  I64s axes;
  for (std::int64_t i = axis; i < rank; ++i) axes.push_back(i);
  const std::string mean = e.fresh("mean"), var = e.fresh("var");
  reduce(c, "ReduceMean", x, axes, true, mean);
  const std::string d = e.add1("Sub", {x, mean});
  reduce(c, "ReduceMean", e.add1("Mul", {d, d}), axes, true, var);
  const std::string den = e.add1("Sqrt", {e.add1("Add", {var, e.scalar(a.eps, t)})});
  emit_as(c, "Add", {e.add1("Mul", {e.add1("Div", {d, den}), gamma}), beta});
}
template <const char* Op>
void softmax(NodeCtx& c) {
  NodeProto& n = c.e.add(Op, {c.in(0, c.out_type().dtype)}, {c.out[0]});
  set_i(n, "axis", typed<ops::SoftmaxAttrs>(c).axis);
}
constexpr char kSoftmax[] = "Softmax", kLogSoftmax[] = "LogSoftmax";

// ---------------------------------------------------------------- layout

void reshape(NodeCtx& c) {
  const I64s target = c.target ? *c.target : c.out_type().shape.to_vector();
  emit_as(c, "Reshape", {c.in(0), c.e.target(target)});
}
void flatten(NodeCtx& c) {
  const std::int64_t r = c.in_type(0).shape.rank();
  if (r == 0) return emit_as(c, "Reshape", {c.in(0), c.e.ints({1})});
  const auto fa = typed<ops::Flatten::Attrs>(c);
  const std::int64_t start = norm_axis(fa.start, r);
  const std::int64_t end = norm_axis(fa.end, r);
  I64s target(static_cast<std::size_t>(start), 0);
  target.push_back(-1);
  for (std::int64_t i = end + 1; i < r; ++i) target.push_back(c.in_type(0).shape[i]);
  emit_as(c, "Reshape", {c.in(0), c.e.ints(target)});
}
void broadcast_to(NodeCtx& c) {
  const I64s target = c.target ? *c.target : c.out_type().shape.to_vector();
  emit_as(c, "Expand", {c.in(0), c.e.target(target)});
}
void transpose(NodeCtx& c) {
  const std::int64_t r = c.in_type(0).shape.rank();
  I64s perm;
  for (std::int64_t i = 0; i < r; ++i) perm.push_back(i);
  const auto ta = typed<ops::Transpose::Attrs>(c);
  if (r > 0)
    std::swap(perm[static_cast<std::size_t>(norm_axis(ta.axis0, r))],
              perm[static_cast<std::size_t>(norm_axis(ta.axis1, r))]);
  set_ints(c.e.add("Transpose", {c.in(0)}, {c.out[0]}), "perm", perm);
}
void permute(NodeCtx& c) {
  I64s perm = typed<ops::Permute::Attrs>(c).axes;
  for (auto& a : perm) a = norm_axis(a, c.in_type(0).shape.rank());
  set_ints(c.e.add("Transpose", {c.in(0)}, {c.out[0]}), "perm", perm);
}
void squeeze(NodeCtx& c) {
  const Shape& s = c.in_type(0).shape;
  I64s axes;
  if (const auto axis = typed<ops::Squeeze::Attrs>(c).axis) {
    const std::int64_t a = norm_axis(*axis, s.rank());
    if (s.rank() > 0 && s[static_cast<std::size_t>(a)] == 1) axes.push_back(a);
  } else {
    for (std::int64_t i = 0; i < s.rank(); ++i)
      if (s[static_cast<std::size_t>(i)] == 1) axes.push_back(i);
  }
  if (axes.empty()) return forward(c, c.in(0));
  emit_as(c, "Squeeze", {c.in(0), c.e.ints(axes)});
}
void unsqueeze(NodeCtx& c) {
  const std::int64_t a =
      norm_axis(typed<ops::Unsqueeze::Attrs>(c).axis, c.in_type(0).shape.rank() + 1);
  emit_as(c, "Unsqueeze", {c.in(0), c.e.ints({a})});
}
void concat(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  std::vector<std::string> in;
  for (std::size_t i = 0; i < c.arity(); ++i) in.push_back(c.in(i, t));
  set_i(c.e.add("Concat", std::move(in), {c.out[0]}), "axis",
        norm_axis(typed<ops::Concat::Attrs>(c).axis, c.out_type().shape.rank()));
}
void stack(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  const std::int64_t a = norm_axis(typed<ops::Stack::Attrs>(c).axis, c.out_type().shape.rank());
  std::vector<std::string> in;
  for (std::size_t i = 0; i < c.arity(); ++i)
    in.push_back(c.e.add1("Unsqueeze", {c.in(i, t), c.e.ints({a})}));
  set_i(c.e.add("Concat", std::move(in), {c.out[0]}), "axis", a);
}
void split(NodeCtx& c) {
  const std::int64_t a = norm_axis(typed<ops::Split::Attrs>(c).axis, c.in_type(0).shape.rank());
  I64s sizes;
  for (std::size_t i = 0; i < c.node.outputs.size(); ++i)
    sizes.push_back(c.out_type(i).shape[static_cast<std::size_t>(a)]);
  set_i(c.e.add("Split", {c.in(0), c.e.ints(sizes)}, c.out), "axis", a);
}
// ms's pads: (before, after) pairs, last axis first; ONNX's: all befores, then all afters.
void pad(NodeCtx& c) {
  const auto pa = typed<ops::Pad::Attrs>(c);
  const I64s& p = pa.pads;
  const std::int64_t r = c.in_type(0).shape.rank();
  I64s onnx_pads(static_cast<std::size_t>(2 * r), 0);
  for (std::size_t k = 0; 2 * k + 1 < p.size(); ++k) {
    const auto axis = static_cast<std::size_t>(r - 1 - static_cast<std::int64_t>(k));
    onnx_pads[axis] = p[2 * k];
    onnx_pads[axis + static_cast<std::size_t>(r)] = p[2 * k + 1];
  }
  const std::string& mode = pa.mode;
  const DType t = c.out_type().dtype;
  std::vector<std::string> in{c.in(0), c.e.ints(onnx_pads)};
  if (mode == "constant") in.push_back(c.e.scalar(pa.value, t));
  set_s(c.e.add("Pad", std::move(in), {c.out[0]}), "mode", mode == "replicate" ? "edge" : mode);
}
void cast(NodeCtx& c) {
  set_i(c.e.add("Cast", {c.in(0)}, {c.out[0]}), "to", onnx_dtype(c.out_type().dtype, "cast"));
}
void slice(NodeCtx& c) {
  Emitter& e = c.e;
  const auto sa = typed<ops::Slice::Attrs>(c);
  const std::int64_t a = norm_axis(sa.axis, c.in_type(0).shape.rank());
  emit_as(c, "Slice",
          {c.in(0), e.ints({sa.start}), e.ints({sa.stop}), e.ints({a}), e.ints({sa.step})});
}
void select(NodeCtx& c) {
  const auto sa = typed<ops::Select::Attrs>(c);
  const std::int64_t a = norm_axis(sa.axis, c.in_type(0).shape.rank());
  const std::string idx = c.e.scalar(sa.index, DType::Int64);
  set_i(c.e.add("Gather", {c.in(0), idx}, {c.out[0]}), "axis", a);
}
void identity(NodeCtx& c) { forward(c, c.in(0)); }
template <const char* Op>
void indexed(NodeCtx& c) {
  set_i(c.e.add(Op, {c.in(0), c.in(1)}, {c.out[0]}), "axis",
        norm_axis(typed<ops::Gather::Attrs>(c).axis, c.in_type(0).shape.rank()));
}
constexpr char kGather[] = "Gather", kGatherElements[] = "GatherElements";
/// index_copy: ScatterElements of the source into x along the axis, the index
/// (one per source slice) reshaped onto the axis and expanded to the source's shape.
void index_copy(NodeCtx& c) {
  Emitter& e = c.e;
  const std::int64_t r = c.in_type(0).shape.rank();
  const std::int64_t a = norm_axis(typed<ops::IndexCopy::Attrs>(c).axis, r);
  std::vector<std::int64_t> along(static_cast<std::size_t>(r), 1);
  along[static_cast<std::size_t>(a)] = -1;
  const std::string idx = e.add1(
      "Expand",
      {e.add1("Reshape", {c.in(1, DType::Int64), e.ints(along)}), e.add1("Shape", {c.in(2)})});
  set_i(e.add("ScatterElements", {c.in(0), idx, c.in(2)}, {c.out[0]}), "axis", a);
}
void scatter(NodeCtx& c) {
  set_i(c.e.add("ScatterElements", {c.in(0), c.in(1), c.in(2)}, {c.out[0]}), "axis",
        norm_axis(typed<ops::Scatter::Attrs>(c).axis, c.in_type(0).shape.rank()));
}
void cumsum(NodeCtx& c) {
  const auto ca = typed<ops::Cumsum::Attrs>(c);
  const std::int64_t a = norm_axis(ca.axis, c.in_type(0).shape.rank());
  NodeProto& n = c.e.add("CumSum", {c.in(0, c.out_type().dtype), c.e.ints({a})}, {c.out[0]});
  set_i(n, "exclusive", ca.exclusive ? 1 : 0);
  set_i(n, "reverse", ca.reverse ? 1 : 0);
}
void one_hot(NodeCtx& c) {
  Emitter& e = c.e;
  const DType t = c.out_type().dtype;
  const Tensor values = ms::tensor({Scalar(0), Scalar(1)}).to(t);
  const std::string vals = e.fresh("onehot_values");
  fill_tensor(*e.graph.add_initializer(), values, vals);
  const std::string depth = e.ints({typed<ops::OneHot::Attrs>(c).num_classes});
  set_i(e.add("OneHot", {c.in(0), depth, vals}, {c.out[0]}), "axis", -1);
}
/// Trilu from opset 14; at 13, Where over a constant mask of the last two axes.
template <bool Upper>
void triangle(NodeCtx& c) {
  Emitter& e = c.e;
  const std::int64_t k = typed<ops::TriangleAttrs>(c).diagonal;
  if (e.opset >= 14) {
    set_i(e.add("Trilu", {c.in(0), e.ints({k})}, {c.out[0]}), "upper", Upper ? 1 : 0);
    return;
  }
  const Shape& s = c.in_type(0).shape;
  const std::int64_t rows = s[static_cast<std::size_t>(s.rank() - 2)];
  const std::int64_t cols = s[static_cast<std::size_t>(s.rank() - 1)];
  Tensor mask = zeros(Shape({rows, cols}), DType::Bool);
  auto* m = reinterpret_cast<bool*>(mask.raw_data());
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) m[i * cols + j] = Upper ? j - i >= k : j - i <= k;
  const std::string name = e.fresh("triangle_mask");
  fill_tensor(*e.graph.add_initializer(), mask, name);
  const DType t = c.out_type().dtype, w = where_dtype(e, t);
  emit_via(c, "Where", {name, c.in(0, w), e.scalar(0, w)}, w, t);
}
void masked_fill(NodeCtx& c) {
  const DType t = c.out_type().dtype, w = where_dtype(c.e, t);
  const std::string fill = c.e.scalar(typed<ops::MaskedFill::Attrs>(c).value, w);
  emit_via(c, "Where", {c.in(1, DType::Bool), fill, c.in(0, w)}, w, t);
}

// ---------------------------------------------------------------- linalg, nn

void matmul(NodeCtx& c) {
  const DType t = c.out_type().dtype;
  emit_as(c, "MatMul", {c.in(0, t), c.in(1, t)});
}
/// An option list of 1 value (both spatial axes) or 2, as 2 values.
I64s two(const I64s& v) { return v.size() == 1 ? I64s{v[0], v[0]} : v; }
I64s onnx_pads(const I64s& p) {
  const I64s t = two(p);
  return {t[0], t[1], t[0], t[1]};
}
void conv2d(NodeCtx& c) {
  const DType t = c.out_type().dtype, f = float_compute(t, false);
  std::vector<std::string> in{c.in(0, f), c.in(1, f)};
  if (c.arity() > 2) in.push_back(c.in(2, f));
  NodeProto& n = emit_via(c, "Conv", std::move(in), f, t);
  const Shape& w = c.in_type(1).shape;
  set_ints(n, "kernel_shape", {w[2], w[3]});
  const auto o = typed<Conv2dOptions>(c);
  set_ints(n, "strides", two(o.stride));
  set_ints(n, "pads", onnx_pads(o.padding));
  set_ints(n, "dilations", two(o.dilation));
  set_i(n, "group", o.groups);
}
template <bool Max>
void pool2d(NodeCtx& c) {
  using Options = std::conditional_t<Max, MaxPool2dOptions, AvgPool2dOptions>;
  const auto o = typed<Options>(c);
  Emitter& e = c.e;
  const DType t = c.out_type().dtype, f = float_compute(t, Max);
  const bool unbatched = c.in_type(0).shape.rank() == 3;  // [C, H, W]
  std::string x = c.in(0, f);
  if (unbatched) x = e.add1("Unsqueeze", {x, e.ints({0})});
  NodeProto& n = emit_via(c, Max ? "MaxPool" : "AveragePool", {x}, f, t, unbatched);
  const I64s kernel = two(o.kernel);
  set_ints(n, "kernel_shape", kernel);
  set_ints(n, "strides", o.stride.empty() ? kernel : two(o.stride));
  set_ints(n, "pads", onnx_pads(o.padding));
  set_i(n, "ceil_mode", o.ceil_mode ? 1 : 0);
  if constexpr (Max)
    set_ints(n, "dilations", two(o.dilation));
  else
    set_i(n, "count_include_pad", o.count_include_pad ? 1 : 0);
}

// ---------------------------------------------------------------- attention

/// Whether value `v` is read by a node or is a graph output.
bool used(const ir::Graph& g, ir::ValueId v) {
  for (const ir::Node& n : g.nodes)
    if (std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end()) return true;
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}
/// Dim `axis` (>= 0) of `x`'s runtime shape, 0-d int64.
std::string runtime_dim(Emitter& e, const std::string& x, std::int64_t axis) {
  NodeProto& n =
      e.add("Gather", {e.add1("Shape", {x}), e.scalar(axis, DType::Int64)}, {e.fresh("dim")});
  set_i(n, "axis", 0);
  return n.output(0);
}
/// The causal band [Tq, Tk] of q and k (ranks r): key j kept by query i when
/// j <= i + (Tk - Tq), from the runtime Tq and Tk (Range, LessOrEqual).
std::string causal_band(Emitter& e, const std::string& q, const std::string& k, std::int64_t r) {
  const std::string tq = runtime_dim(e, q, r - 2), tk = runtime_dim(e, k, r - 2);
  const std::string zero = e.scalar(0, DType::Int64), one = e.scalar(1, DType::Int64);
  const std::string rows = e.add1("Range", {zero, tq, one});
  const std::string cols = e.add1("Range", {zero, tk, one});
  const std::string last = e.add1("Add", {rows, e.add1("Sub", {tk, tq})});  // the last key kept
  return e.add1("LessOrEqual", {e.add1("Unsqueeze", {cols, e.ints({0})}),
                                e.add1("Unsqueeze", {last, e.ints({1})})});
}
/// lse = max + Log(ReduceSum(Exp(s - max))) over the last axis; -inf on the
/// rows that keep no key (`none`, when some key may be dropped), as ms's.
void attention_lse(NodeCtx& c, const std::string& s, const std::string& mx, const std::string& none,
                   std::int64_t r) {
  Emitter& e = c.e;
  const DType t = c.out_type().dtype;
  const std::string m = none.empty() ? mx : e.add1("Where", {none, e.scalar(0, t), mx});
  const std::string sum = e.fresh("ReduceSum");
  reduce(c, "ReduceSum", e.add1("Exp", {e.add1("Sub", {s, m})}), {r - 1}, true, sum);
  const std::string lse = e.add1("Add", {m, e.add1("Log", {sum})});
  const std::string neg_inf = e.scalar(-std::numeric_limits<double>::infinity(), t);
  const std::string fixed = none.empty() ? lse : e.add1("Where", {none, neg_inf, lse});
  e.add("Squeeze", {fixed, e.ints({r - 1})}, {c.out.at(1)});
}
/// No keys (Tk = 0): out MatMul([..., Tq, 0], [..., 0, Ev]) = 0, lse
/// ReduceSum over the empty axis (0) + -inf (ReduceMax has no empty axis).
void attention_no_keys(NodeCtx& c, const std::string& s, bool lse, std::int64_t r) {
  Emitter& e = c.e;
  emit_as(c, "MatMul", {s, c.in(2)});
  if (!lse) return;
  const std::string sum = e.fresh("ReduceSum");
  reduce(c, "ReduceSum", s, {r - 1}, false, sum);
  const DType t = c.out_type().dtype;
  e.add("Add", {sum, e.scalar(-std::numeric_limits<double>::infinity(), t)}, {c.out.at(1)});
}
/// The scaled scores with the mask applied: Mul(MatMul(q, Transpose(k)),
/// scale), a floating mask added, then -inf where a Bool mask or the causal
/// band drops a key. Sets `masked` when some key may be dropped.
std::string attention_scores(NodeCtx& c, const ops::AttentionAttrs& a, bool& masked) {
  Emitter& e = c.e;
  const DType t = c.out_type().dtype;
  const std::int64_t r = c.in_type(0).shape.rank();
  const std::int64_t dim_e = c.in_type(0).shape[static_cast<std::size_t>(r - 1)];
  const double scale = a.scale     ? *a.scale
                       : dim_e > 0 ? 1.0 / std::sqrt(static_cast<double>(dim_e))
                                   : 1.0;
  I64s perm;
  for (std::int64_t i = 0; i < r; ++i) perm.push_back(i);
  std::swap(perm[static_cast<std::size_t>(r - 2)], perm[static_cast<std::size_t>(r - 1)]);
  NodeProto& kt = e.add("Transpose", {c.in(1)}, {e.fresh("Transpose")});
  set_ints(kt, "perm", perm);
  std::string s = e.add1("Mul", {e.add1("MatMul", {c.in(0), kt.output(0)}), e.scalar(scale, t)});
  std::optional<std::string> keep;
  masked = c.arity() > 3;
  if (masked && c.in_type(3).dtype == DType::Bool) keep = c.in(3);
  if (masked && !keep) s = e.add1("Add", {s, c.in(3)});
  if (a.causal) {
    const std::string band = causal_band(e, c.in(0), c.in(1), r);
    keep = keep ? e.add1("And", {*keep, band}) : band;
    masked = true;
  }
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (keep) s = e.add1("Where", {*keep, s, e.scalar(neg_inf, t)});
  return s;
}
/// softmax(scale q k^T + mask) v; a row that keeps no key (its max is -inf)
/// gets weights 0 by Where on both sides of the Softmax (no NaN), as ms's.
/// The logsumexp output only when something reads it.
void attention(NodeCtx& c) {
  Emitter& e = c.e;
  const DType t = c.out_type().dtype;
  const std::int64_t r = c.in_type(0).shape.rank();
  bool masked = false;
  const std::string s = attention_scores(c, typed<ops::AttentionAttrs>(c), masked);
  const bool lse = c.node.outputs.size() > 1 && used(e.g, c.node.outputs[1]);
  if (c.in_type(1).shape[static_cast<std::size_t>(r - 2)] == 0)
    return attention_no_keys(c, s, lse, r);
  std::string mx, none, x = s;
  if (masked || lse) {
    mx = e.fresh("ReduceMax");
    reduce(c, "ReduceMax", s, {r - 1}, true, mx);
  }
  const std::string zero = e.scalar(0, t);
  if (masked) {
    none = e.add1("Equal", {mx, e.scalar(-std::numeric_limits<double>::infinity(), t)});
    x = e.add1("Where", {none, zero, s});
  }
  NodeProto& sm = e.add("Softmax", {x}, {e.fresh("Softmax")});
  set_i(sm, "axis", -1);
  std::string p = sm.output(0);
  if (masked) p = e.add1("Where", {none, zero, p});
  emit_as(c, "MatMul", {p, c.in(2)});
  if (lse) attention_lse(c, s, mx, none, r);
}
/// depend(value, deps...): the value (the order has no meaning in ONNX's data flow).
void depend(NodeCtx& c) { forward(c, c.in(0)); }

template <class E>
constexpr std::string_view name_of = E::name;

const OpRule kRules[] = {
    // elementwise
    {name_of<ops::Neg>, "Neg", "", same<kNeg>},
    {name_of<ops::Abs>, "Abs", "", same<kAbs>},
    {name_of<ops::Exp>, "Exp", "", same<kExp>},
    {name_of<ops::Log>, "Log", "", same<kLog>},
    {name_of<ops::Log1p>, "Log(Add(x, 1))", "", log1p},
    {name_of<ops::Sqrt>, "Sqrt", "", same<kSqrt>},
    {name_of<ops::Rsqrt>, "Reciprocal(Sqrt(x))", "", rsqrt},
    {name_of<ops::Square>, "Mul(x, x)", "", square},
    {name_of<ops::Reciprocal>, "Reciprocal", "", same<kReciprocal>},
    {name_of<ops::Sign>, "Sign", "", same<kSign>},
    {name_of<ops::Floor>, "Floor", "Identity on integers", rounding<kFloor>},
    {name_of<ops::Ceil>, "Ceil", "Identity on integers", rounding<kCeil>},
    {name_of<ops::Round>, "Round", "half to even in both; Identity on integers", rounding<kRound>},
    {name_of<ops::Sin>, "Sin", "", same<kSin>},
    {name_of<ops::Cos>, "Cos", "", same<kCos>},
    {name_of<ops::Tanh>, "Tanh", "", same<kTanh>},
    {name_of<ops::Sigmoid>, "Sigmoid", "", same<kSigmoid>},
    {name_of<ops::Relu>, "Relu", "", same<kRelu>},
    {name_of<ops::Gelu>, "Mul(Mul(x, 0.5), Add(1, Erf(x / sqrt 2)))", "ONNX Gelu needs opset 20",
     gelu},
    {name_of<ops::Erf>, "Erf", "", same<kErf>},
    {name_of<ops::GeluTanh>, "0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3)))", "", gelu_tanh},
    {name_of<ops::Silu>, "Mul(x, Sigmoid(x))", "", silu},
    {name_of<ops::Softplus>, "Softplus", "", same<kSoftplus>},
    {name_of<ops::Hardswish>, "HardSwish", "opset 13: Mul(x, HardSigmoid(x, 1/6, 0.5))", hardswish},
    {name_of<ops::LogicalNot>, "Not", "operand read as bool", logical<kNot>},
    {name_of<ops::Add>, "Add", "", same<kAdd>},
    {name_of<ops::Sub>, "Sub", "", same<kSub>},
    {name_of<ops::Mul>, "Mul", "", same<kMul>},
    {name_of<ops::Div>, "Div", "integers divide as float32 (Cast first)", same<kDiv>},
    {name_of<ops::Pow>, "Pow", "", same<kPow>},
    {name_of<ops::Maximum>, "Max", "", same<kMax>},
    {name_of<ops::Minimum>, "Min", "", same<kMin>},
    {name_of<ops::Eq>, "Equal", "", compare<kEqual>},
    {name_of<ops::Ne>, "Not(Equal)", "", compare<kEqual, true>},
    {name_of<ops::Lt>, "Less", "", compare<kLess>},
    {name_of<ops::Le>, "LessOrEqual", "", compare<kLessEq>},
    {name_of<ops::Gt>, "Greater", "", compare<kGreater>},
    {name_of<ops::Ge>, "GreaterOrEqual", "", compare<kGreaterEq>},
    {name_of<ops::LogicalAnd>, "And", "operands read as bool", logical<kAnd>},
    {name_of<ops::LogicalOr>, "Or", "operands read as bool", logical<kOr>},
    {name_of<ops::Where>, "Where", "", where},
    {name_of<ops::Clamp>, "Min(Max(x, lo), hi)", "", clamp},
    // reductions
    {name_of<ops::Sum>, "ReduceSum", "axes as an input", reduction<kReduceSum>},
    {name_of<ops::Mean>, "ReduceMean", "", reduction<kReduceMean>},
    {name_of<ops::Prod>, "ReduceProd", "", reduction<kReduceProd>},
    {name_of<ops::Max>, "ReduceMax", "", reduction<kReduceMax>},
    {name_of<ops::Min>, "ReduceMin", "", reduction<kReduceMin>},
    {name_of<ops::All>, "Cast(ReduceMin(Cast(x, int32)), bool)", "", bool_reduction<kReduceMin>},
    {name_of<ops::Any>, "Cast(ReduceMax(Cast(x, int32)), bool)", "", bool_reduction<kReduceMax>},
    {name_of<ops::Argmax>, "ArgMax", "no axis: Reshape to 1-D first", arg_reduction<kArgMax>},
    {name_of<ops::Argmin>, "ArgMin", "no axis: Reshape to 1-D first", arg_reduction<kArgMin>},
    {name_of<ops::Var>, "ReduceSum((x - ReduceMean(x))^2) / (N - ddof)", "N from Shape",
     variance<false>},
    {name_of<ops::Std>, "Sqrt(var)", "N from Shape", variance<true>},
    {name_of<ops::Logsumexp>, "ReduceLogSumExp", "", reduction<kReduceLogSumExp>},
    {name_of<ops::Softmax>, "Softmax", "", softmax<kSoftmax>},
    {name_of<ops::LogSoftmax>, "LogSoftmax", "", softmax<kLogSoftmax>},
    {name_of<ops::LayerNorm>, "LayerNormalization",
     "opset 13-16: (x - ReduceMean) / Sqrt(ReduceMean(d * d) + eps) * gamma + beta", layer_norm},
    // layout and indexing
    {name_of<ops::Reshape>, "Reshape", "symbolic dims: 0 (copy) or -1", reshape},
    {name_of<ops::Transpose>, "Transpose", "", transpose},
    {name_of<ops::Permute>, "Transpose", "", permute},
    {name_of<ops::Squeeze>, "Squeeze", "axes as an input", squeeze},
    {name_of<ops::Unsqueeze>, "Unsqueeze", "axes as an input", unsqueeze},
    {name_of<ops::Flatten>, "Reshape", "target [0, .., -1, trailing dims]", flatten},
    {name_of<ops::BroadcastTo>, "Expand", "symbolic dims: 1", broadcast_to},
    {name_of<ops::Concat>, "Concat", "", concat},
    {name_of<ops::Stack>, "Concat(Unsqueeze(x_i))", "", stack},
    {name_of<ops::Split>, "Split", "sizes as an input", split},
    {name_of<ops::Pad>, "Pad", "modes constant, reflect, edge (replicate)", pad},
    {name_of<ops::Cast>, "Cast", "", cast},
    {name_of<ops::Slice>, "Slice", "", slice},
    {name_of<ops::Select>, "Gather (0-d index)", "", select},
    {name_of<ops::StopGradient>, "Identity", "", identity},
    {name_of<ops::Depend>, "Identity (of the value)", "the dependencies are dropped", depend},
    {name_of<ops::Gather>, "GatherElements", "", indexed<kGatherElements>},
    {name_of<ops::IndexSelect>, "Gather", "", indexed<kGather>},
    {name_of<ops::IndexCopy>, "ScatterElements", "index expanded to the source's shape",
     index_copy},
    {name_of<ops::Scatter>, "ScatterElements", "", scatter},
    {name_of<ops::Cumsum>, "CumSum", "", cumsum},
    {name_of<ops::OneHot>, "OneHot", "", one_hot},
    {name_of<ops::Triu>, "Trilu", "opset 13: Where over a constant mask (static last dims)",
     triangle<true>},
    {name_of<ops::Tril>, "Trilu", "opset 13: Where over a constant mask (static last dims)",
     triangle<false>},
    {name_of<ops::MaskedFill>, "Where", "", masked_fill},
    // linalg, nn
    {name_of<ops::Matmul>, "MatMul", "", matmul},
    {name_of<ops::Conv2d>, "Conv", "NCHW", conv2d},
    {name_of<ops::MaxPool2d>, "MaxPool", "", pool2d<true>},
    {name_of<ops::AvgPool2d>, "AveragePool", "", pool2d<false>},
    {name_of<ops::ScaledDotProductAttention>,
     "MatMul(Softmax(MatMul(q, Transpose(k)) * scale + mask), v)",
     "Bool mask and causal band (Range, LessOrEqual on the runtime Tq, Tk) by Where -inf; "
     "rows keeping no key give 0 (Where around Softmax); lse when read",
     attention},
};

constexpr std::string_view kGradOp =
    "a gradient op: only inference graphs export (call the model, not its training step)";
const OpGap kGaps[] = {
    {"relu_grad", kGradOp},
    {"gelu_grad", kGradOp},
    {"gelu_tanh_grad", kGradOp},
    {"conv2d_grad_input", kGradOp},
    {"conv2d_grad_weight", kGradOp},
    {"max_pool2d_grad", kGradOp},
    {"avg_pool2d_grad", kGradOp},
    {"gather_grad", kGradOp},
    {"index_select_grad", kGradOp},
    {"scaled_dot_product_attention_grad", kGradOp},
    {"scaled_dot_product_attention_mask_grad", kGradOp},
    {"layer_norm_grad", kGradOp},
    {"softmax_cross_entropy",
     "a training loss with ms's own label rules; export the model without its loss"},
    {"random",
     "draws random numbers when the graph runs (dropout in training mode: call set_train(false); "
     "scaled_dot_product_attention with dropout > 0: pass dropout 0)"},
    {"host_callback", "runs C++ code when the graph runs (a hook or callback)"},
    {"grad_hook", "runs C++ code on gradients (a tensor hook)"},
    {"custom_grad", "a cell's own bprop: a training construct"},
};

}  // namespace

std::span<const OpRule> op_rules() { return kRules; }
std::span<const OpGap> op_gaps() { return kGaps; }

const OpRule* find_rule(std::string_view op) {
  for (const OpRule& r : kRules)
    if (r.op == op) return &r;
  return nullptr;
}

std::string_view gap_reason(std::string_view op) {
  for (const OpGap& g : kGaps)
    if (g.op == op) return g.reason;
  return "no ONNX mapping";
}

}  // namespace ms::onnx::detail
