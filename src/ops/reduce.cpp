// The reduction ops and the softmax family: one OpDef each (see ms/ops/reduce.hpp).
// `infer` validates axes, dtypes and empty reductions; `eval` converts the input to a
// kernel dtype where needed (half -> float32, ints -> float32 for logsumexp), runs
// kernels::reduce / kernels::softmax, and rounds half results on store.
#include "ms/ops/reduce.hpp"

#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/kernels/reduce.hpp"
#include "ms/ops/op.hpp"

namespace ms {
namespace {

using kernels::ReduceKind;

/// How an op's output dtype follows from its input dtype.
enum class DtypeRule : std::uint8_t {
  SumLike,       ///< floating kept, bool/integers -> int64
  Keep,          ///< the input dtype (max, min)
  Bool,          ///< bool (all, any); complex accepted
  FloatOnly,     ///< floating kept; others a TypeError (mean, var, std, softmax)
  FloatPromote,  ///< floating kept; bool/integers -> float32 (logsumexp)
  Index,         ///< int64 (argmax, argmin)
};

struct Spec {
  std::string_view name;
  ReduceKind kind;
  DtypeRule rule;
  bool needs_nonempty;  ///< max/min/argmax/argmin: an empty reduction has no identity
  bool single_axis;     ///< argmax/argmin: attribute "axis" (absent: flattened)
  bool has_ddof;        ///< var/std
};

constexpr Spec kSpecs[] = {
    {"sum", ReduceKind::Sum, DtypeRule::SumLike, false, false, false},
    {"mean", ReduceKind::Mean, DtypeRule::FloatOnly, false, false, false},
    {"prod", ReduceKind::Prod, DtypeRule::SumLike, false, false, false},
    {"max", ReduceKind::Max, DtypeRule::Keep, true, false, false},
    {"min", ReduceKind::Min, DtypeRule::Keep, true, false, false},
    {"all", ReduceKind::All, DtypeRule::Bool, false, false, false},
    {"any", ReduceKind::Any, DtypeRule::Bool, false, false, false},
    {"argmax", ReduceKind::ArgMax, DtypeRule::Index, true, true, false},
    {"argmin", ReduceKind::ArgMin, DtypeRule::Index, true, true, false},
    {"var", ReduceKind::Var, DtypeRule::FloatOnly, false, false, true},
    {"std", ReduceKind::Std, DtypeRule::FloatOnly, false, false, true},
    {"logsumexp", ReduceKind::LogSumExp, DtypeRule::FloatPromote, false, false, false},
};

void check_dtype(std::string_view op, DtypeRule rule, DType t) {
  MS_CHECK(t != DType::Int4, TypeError, op,
           ": dtype Int4 is packed (storage and cast only); cast it first, e.g. x.to(ms::int8)");
  if (rule == DtypeRule::Bool) return;  // nonzero-ness is defined for every other dtype
  MS_CHECK(!dtype_is_complex(t), TypeError, op, ": complex dtype ", t,
           " is not supported; reduce the real and imaginary parts separately");
  if (rule == DtypeRule::FloatOnly)
    MS_CHECK(dtype_is_float(t), TypeError, op, ": input dtype ", t,
             " is not a floating dtype; cast to a floating dtype first, e.g. x.to(ms::float32)");
}

DType out_dtype(DtypeRule rule, DType t) {
  switch (rule) {
    case DtypeRule::SumLike: return dtype_is_float(t) ? t : int64;
    case DtypeRule::Keep: return t;
    case DtypeRule::Bool: return bool_;
    case DtypeRule::FloatOnly: return t;
    case DtypeRule::FloatPromote: return dtype_is_float(t) ? t : float32;
    case DtypeRule::Index: return int64;
  }
  return t;
}

/// A validated reduction call: normalized axes, output type, ddof.
struct Parsed {
  std::vector<std::int64_t> axes;  ///< sorted, unique, in [0, rank); empty for rank 0
  ops::TensorType out;
  std::int64_t ddof = 0;
};

Parsed parse(const Spec& s, const ops::TensorType& in, const ops::Attrs& attrs) {
  check_dtype(s.name, s.rule, in.dtype);
  const bool keepdims = attrs.get_or<bool>("keepdims", false, s.name);
  Parsed p;
  p.out.dtype = out_dtype(s.rule, in.dtype);
  if (s.has_ddof) {
    p.ddof = attrs.get_or<std::int64_t>("ddof", 0, s.name);
    MS_CHECK(p.ddof >= 0, ValueError, s.name, ": ddof (correction) must be >= 0, got ", p.ddof);
  }
  const Shape& shape = in.shape;
  if (shape.is_any_rank()) {  // symbolic input of unknown rank
    const bool all_axes = s.single_axis
                              ? !attrs.has("axis")
                              : attrs.get_or<std::vector<std::int64_t>>("axes", {}, s.name).empty();
    p.out.shape = all_axes && !keepdims ? Shape{} : Shape{kAnyRank};
    return p;
  }
  const std::int64_t rank = shape.rank();
  if (s.single_axis) {
    if (attrs.has("axis")) {
      const std::int64_t axis = attrs.get<std::int64_t>("axis", s.name);
      p.axes = axes_normalize(std::span<const std::int64_t>(&axis, 1), rank, s.name);
    } else {
      p.axes = axes_normalize({}, rank, s.name);
    }
  } else {
    const auto axes = attrs.get_or<std::vector<std::int64_t>>("axes", {}, s.name);
    p.axes = axes_normalize(axes, rank, s.name);
  }
  std::vector<bool> red(static_cast<std::size_t>(rank), false);
  for (std::int64_t a : p.axes) red[static_cast<std::size_t>(a)] = true;
  for (std::int64_t d = 0; d < rank; ++d) {
    const std::int64_t size = shape[static_cast<std::size_t>(d)];
    if (!red[static_cast<std::size_t>(d)]) {
      p.out.shape.push_back(size);
      continue;
    }
    if (keepdims) p.out.shape.push_back(1);
    MS_CHECK(!(s.needs_nonempty && size == 0), ValueError, s.name, ": cannot reduce over axis ", d,
             " of size 0 (input shape ", shape, "): ", s.name,
             " of an empty set is undefined; reduce over non-empty axes");
  }
  return p;
}

std::vector<ops::TensorType> infer_reduce(const Spec& s, std::span<const ops::TensorType> in,
                                          const ops::Attrs& attrs) {
  return {parse(s, in[0], attrs).out};
}

std::vector<Tensor> eval_reduce(const Spec& s, std::span<const Tensor> in,
                                const ops::Attrs& attrs) {
  const Parsed p = parse(s, ops::TensorType{in[0].dtype(), in[0].shape()}, attrs);
  const Tensor& x = in[0];
  const DType dt = x.dtype();
  // The dtype the kernel reads: half types compute in float32; logsumexp promotes
  // bool/integers to float32; all/any read complex as "nonzero" bools.
  DType kin = dt;
  if (dt == float16 || dt == bfloat16) kin = float32;
  if (s.rule == DtypeRule::FloatPromote && !dtype_is_float(dt)) kin = float32;
  if (dtype_is_complex(dt)) kin = bool_;
  const Tensor xk = kin == dt ? x : x.to(kin);
  const DType kout = (p.out.dtype == float16 || p.out.dtype == bfloat16) ? float32 : p.out.dtype;
  Tensor out = empty(p.out.shape, kout);
  kernels::reduce(s.kind, xk, p.axes, out, p.ddof);
  if (kout != p.out.dtype) out = out.to(p.out.dtype);
  return {out};
}

// ---------------------------------------------------------------- softmax family

struct Softmax {
  std::string_view name;
  bool log;
};

std::int64_t parse_softmax(std::string_view name, const ops::TensorType& in,
                           const ops::Attrs& attrs) {
  check_dtype(name, DtypeRule::FloatOnly, in.dtype);
  const std::int64_t axis = attrs.get_or<std::int64_t>("axis", -1, name);
  if (in.shape.is_any_rank()) return axis;
  return axis_normalize(axis, in.shape.rank(), name);
}

std::vector<Tensor> eval_softmax(const Softmax& s, std::span<const Tensor> in,
                                 const ops::Attrs& attrs) {
  const Tensor& x = in[0];
  const std::int64_t axis = parse_softmax(s.name, {x.dtype(), x.shape()}, attrs);
  const DType dt = x.dtype();
  const bool half = dt == float16 || dt == bfloat16;
  const Tensor xk = half ? x.to(float32) : x;
  Tensor out = empty(x.shape(), xk.dtype());
  kernels::softmax(xk, axis, out, s.log);
  if (half) out = out.to(dt);
  return {out};
}

ops::Attrs axes_attrs(std::vector<std::int64_t> axes, bool keepdims) {
  return ops::Attrs{{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

Tensor call_axes(const ops::OpDef& def, const Tensor& x, std::vector<std::int64_t> axes,
                 bool keepdims) {
  return ops::call1(def, {x}, axes_attrs(std::move(axes), keepdims));
}

}  // namespace

// ---------------------------------------------------------------- public API

Tensor sum(const Tensor& x, std::vector<std::int64_t> axes, bool keepdims) {
  static const ops::OpDef& def = ops::op("sum");
  return call_axes(def, x, std::move(axes), keepdims);
}
Tensor mean(const Tensor& x, std::vector<std::int64_t> axes, bool keepdims) {
  static const ops::OpDef& def = ops::op("mean");
  return call_axes(def, x, std::move(axes), keepdims);
}
Tensor prod(const Tensor& x, std::vector<std::int64_t> axes, bool keepdims) {
  static const ops::OpDef& def = ops::op("prod");
  return call_axes(def, x, std::move(axes), keepdims);
}
Tensor max(const Tensor& x, std::vector<std::int64_t> axes, bool keepdims) {
  static const ops::OpDef& def = ops::op("max");
  return call_axes(def, x, std::move(axes), keepdims);
}
Tensor min(const Tensor& x, std::vector<std::int64_t> axes, bool keepdims) {
  static const ops::OpDef& def = ops::op("min");
  return call_axes(def, x, std::move(axes), keepdims);
}
Tensor all(const Tensor& x, std::vector<std::int64_t> axes, bool keepdims) {
  static const ops::OpDef& def = ops::op("all");
  return call_axes(def, x, std::move(axes), keepdims);
}
Tensor any(const Tensor& x, std::vector<std::int64_t> axes, bool keepdims) {
  static const ops::OpDef& def = ops::op("any");
  return call_axes(def, x, std::move(axes), keepdims);
}
Tensor logsumexp(const Tensor& x, std::vector<std::int64_t> axes, bool keepdims) {
  static const ops::OpDef& def = ops::op("logsumexp");
  return call_axes(def, x, std::move(axes), keepdims);
}

Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdims) {
  static const ops::OpDef& def = ops::op("argmax");
  return ops::call1(def, {x}, ops::Attrs{{"axis", axis}, {"keepdims", keepdims}});
}
Tensor argmax(const Tensor& x) {
  static const ops::OpDef& def = ops::op("argmax");
  return ops::call1(def, {x}, ops::Attrs{{"keepdims", false}});
}
Tensor argmin(const Tensor& x, std::int64_t axis, bool keepdims) {
  static const ops::OpDef& def = ops::op("argmin");
  return ops::call1(def, {x}, ops::Attrs{{"axis", axis}, {"keepdims", keepdims}});
}
Tensor argmin(const Tensor& x) {
  static const ops::OpDef& def = ops::op("argmin");
  return ops::call1(def, {x}, ops::Attrs{{"keepdims", false}});
}

Tensor var(const Tensor& x, std::vector<std::int64_t> axes, std::int64_t ddof, bool keepdims) {
  static const ops::OpDef& def = ops::op("var");
  return ops::call1(def, {x},
                    ops::Attrs{{"axes", std::move(axes)}, {"ddof", ddof}, {"keepdims", keepdims}});
}
Tensor std(const Tensor& x, std::vector<std::int64_t> axes, std::int64_t ddof, bool keepdims) {
  static const ops::OpDef& def = ops::op("std");
  return ops::call1(def, {x},
                    ops::Attrs{{"axes", std::move(axes)}, {"ddof", ddof}, {"keepdims", keepdims}});
}

Tensor softmax(const Tensor& x, std::int64_t axis) {
  static const ops::OpDef& def = ops::op("softmax");
  return ops::call1(def, {x}, ops::Attrs{{"axis", axis}});
}
Tensor log_softmax(const Tensor& x, std::int64_t axis) {
  static const ops::OpDef& def = ops::op("log_softmax");
  return ops::call1(def, {x}, ops::Attrs{{"axis", axis}});
}

}  // namespace ms

namespace ms::ops::detail {

void register_reduce_ops() {
  for (const auto& spec : ms::kSpecs) {
    const ms::Spec* s = &spec;
    const bool differentiable = s->rule != ms::DtypeRule::Bool && s->rule != ms::DtypeRule::Index;
    registry_add(OpDef{
        .name = s->name,
        .kind = OpKind::Reduction,
        .min_inputs = 1,
        .max_inputs = 1,
        .differentiable = differentiable,
        .infer = [s](std::span<const TensorType> in,
                     const Attrs& attrs) { return ms::infer_reduce(*s, in, attrs); },
        .eval = [s](std::span<const Tensor> in,
                    const Attrs& attrs) { return ms::eval_reduce(*s, in, attrs); },
    });
  }
  // softmax / log_softmax: composites of max, exp, sum, div/sub, run as one fused,
  // numerically stable kernel (the max is subtracted first).
  static constexpr ms::Softmax kSoftmax[] = {{"softmax", false}, {"log_softmax", true}};
  for (const auto& sm : kSoftmax) {
    const ms::Softmax* s = &sm;
    registry_add(OpDef{
        .name = s->name,
        .kind = OpKind::Composite,
        .min_inputs = 1,
        .max_inputs = 1,
        .differentiable = true,
        .infer =
            [s](std::span<const TensorType> in, const Attrs& attrs) {
              ms::parse_softmax(s->name, in[0], attrs);
              return std::vector<TensorType>{in[0]};
            },
        .eval = [s](std::span<const Tensor> in,
                    const Attrs& attrs) { return ms::eval_softmax(*s, in, attrs); },
    });
  }
}

}  // namespace ms::ops::detail
