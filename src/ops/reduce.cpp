// The reduction ops and the softmax family: their entries (see ms/ops/reduce.hpp).
// `infer` validates axes, dtypes and empty reductions; `eval` converts the input to a
// kernel dtype where needed (half -> float32, ints -> float32 for logsumexp), runs
// kernels::reduce / kernels::softmax, and rounds half results on store.
#include "ms/ops/reduce.hpp"

#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/expr/expr.hpp"
#include "ms/kernels/reduce.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/layout.hpp"
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
  bool has_ddof;        ///< var/std
};

/// The kernel and dtype rule of each reduction entry.
template <class E>
constexpr Spec spec(ReduceKind kind, DtypeRule rule, bool needs_nonempty = false,
                    bool has_ddof = false) {
  return {E::name, kind, rule, needs_nonempty, has_ddof};
}
template <class E>
extern const Spec kSpec;
template <>
constexpr Spec kSpec<ops::Sum> = spec<ops::Sum>(ReduceKind::Sum, DtypeRule::SumLike);
template <>
constexpr Spec kSpec<ops::Mean> = spec<ops::Mean>(ReduceKind::Mean, DtypeRule::FloatOnly);
template <>
constexpr Spec kSpec<ops::Prod> = spec<ops::Prod>(ReduceKind::Prod, DtypeRule::SumLike);
template <>
constexpr Spec kSpec<ops::Max> = spec<ops::Max>(ReduceKind::Max, DtypeRule::Keep, true);
template <>
constexpr Spec kSpec<ops::Min> = spec<ops::Min>(ReduceKind::Min, DtypeRule::Keep, true);
template <>
constexpr Spec kSpec<ops::All> = spec<ops::All>(ReduceKind::All, DtypeRule::Bool);
template <>
constexpr Spec kSpec<ops::Any> = spec<ops::Any>(ReduceKind::Any, DtypeRule::Bool);
template <>
constexpr Spec kSpec<ops::Argmax> = spec<ops::Argmax>(ReduceKind::ArgMax, DtypeRule::Index, true);
template <>
constexpr Spec kSpec<ops::Argmin> = spec<ops::Argmin>(ReduceKind::ArgMin, DtypeRule::Index, true);
template <>
constexpr Spec kSpec<ops::Var> = spec<ops::Var>(ReduceKind::Var, DtypeRule::FloatOnly, false, true);
template <>
constexpr Spec kSpec<ops::Std> = spec<ops::Std>(ReduceKind::Std, DtypeRule::FloatOnly, false, true);
template <>
constexpr Spec kSpec<ops::Logsumexp> = spec<ops::Logsumexp>(ReduceKind::LogSumExp,
                                                            DtypeRule::FloatPromote);

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

/// What a reduction call asks for: axes (empty: every axis), keepdims, ddof.
struct Request {
  std::vector<std::int64_t> axes;
  bool keepdims = false;
  std::int64_t ddof = 0;
};
Request request(const ops::AxesAttrs& a) { return {a.axes, a.keepdims, 0}; }
Request request(const ops::VarAttrs& a) { return {a.axes, a.keepdims, a.ddof}; }
Request request(const ops::ArgAttrs& a) {
  return {a.axis ? std::vector<std::int64_t>{*a.axis} : std::vector<std::int64_t>{}, a.keepdims, 0};
}

/// A validated reduction call: normalized axes, output type, ddof.
struct Parsed {
  std::vector<std::int64_t> axes;  ///< sorted, unique, in [0, rank); empty for rank 0
  ops::TensorType out;
  std::int64_t ddof = 0;
};

Parsed parse(const Spec& s, const ops::TensorType& in, const Request& r) {
  check_dtype(s.name, s.rule, in.dtype);
  Parsed p;
  p.out.dtype = out_dtype(s.rule, in.dtype);
  if (s.has_ddof) {
    p.ddof = r.ddof;
    MS_CHECK(p.ddof >= 0, ValueError, s.name, ": ddof (correction) must be >= 0, got ", p.ddof);
  }
  const Shape& shape = in.shape;
  if (shape.is_any_rank()) {  // symbolic input of unknown rank
    p.out.shape = r.axes.empty() && !r.keepdims ? Shape{} : Shape{kAnyRank};
    return p;
  }
  const std::int64_t rank = shape.rank();
  p.axes = axes_normalize(r.axes, rank, s.name);
  std::vector<bool> red(static_cast<std::size_t>(rank), false);
  for (std::int64_t a : p.axes) red[static_cast<std::size_t>(a)] = true;
  for (std::int64_t d = 0; d < rank; ++d) {
    const std::int64_t size = shape[static_cast<std::size_t>(d)];
    if (!red[static_cast<std::size_t>(d)]) {
      p.out.shape.push_back(size);
      continue;
    }
    if (r.keepdims) p.out.shape.push_back(1);
    MS_CHECK(!(s.needs_nonempty && size == 0), ValueError, s.name, ": cannot reduce over axis ", d,
             " of size 0 (input shape ", shape, "): ", s.name,
             " of an empty set is undefined; reduce over non-empty axes");
  }
  return p;
}

std::vector<ops::TensorType> infer_reduce(const Spec& s, std::span<const ops::TensorType> in,
                                          const Request& r) {
  return {parse(s, in[0], r).out};
}

std::vector<Tensor> eval_reduce(const Spec& s, std::span<const Tensor> in, const Request& r) {
  const Parsed p = parse(s, ops::TensorType{in[0].dtype(), in[0].shape()}, r);
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

std::int64_t parse_softmax(std::string_view name, const ops::TensorType& in, std::int64_t axis) {
  check_dtype(name, DtypeRule::FloatOnly, in.dtype);
  if (in.shape.is_any_rank()) return axis;
  return axis_normalize(axis, in.shape.rank(), name);
}

std::vector<Tensor> eval_softmax(std::string_view name, bool log, std::span<const Tensor> in,
                                 std::int64_t axis_attr) {
  const Tensor& x = in[0];
  const std::int64_t axis = parse_softmax(name, {x.dtype(), x.shape()}, axis_attr);
  const DType dt = x.dtype();
  const bool half = dt == float16 || dt == bfloat16;
  const Tensor xk = half ? x.to(float32) : x;
  Tensor out = empty(x.shape(), xk.dtype());
  kernels::softmax(xk, axis, out, log);
  if (half) out = out.to(dt);
  return {out};
}

}  // namespace

// ---------------------------------------------------------------- the entries

namespace ops {

std::vector<TensorType> Sum::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Sum>, in, request(a));
}
std::vector<Tensor> Sum::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Sum>, in, request(a));
}
std::vector<TensorType> Mean::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Mean>, in, request(a));
}
std::vector<Tensor> Mean::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Mean>, in, request(a));
}
std::vector<TensorType> Prod::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Prod>, in, request(a));
}
std::vector<Tensor> Prod::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Prod>, in, request(a));
}
std::vector<TensorType> Max::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Max>, in, request(a));
}
std::vector<Tensor> Max::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Max>, in, request(a));
}
std::vector<TensorType> Min::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Min>, in, request(a));
}
std::vector<Tensor> Min::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Min>, in, request(a));
}
std::vector<TensorType> All::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<All>, in, request(a));
}
std::vector<Tensor> All::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<All>, in, request(a));
}
std::vector<TensorType> Any::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Any>, in, request(a));
}
std::vector<Tensor> Any::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Any>, in, request(a));
}
std::vector<TensorType> Argmax::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Argmax>, in, request(a));
}
std::vector<Tensor> Argmax::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Argmax>, in, request(a));
}
std::vector<TensorType> Argmin::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Argmin>, in, request(a));
}
std::vector<Tensor> Argmin::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Argmin>, in, request(a));
}
std::vector<TensorType> Var::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Var>, in, request(a));
}
std::vector<Tensor> Var::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Var>, in, request(a));
}
std::vector<TensorType> Std::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Std>, in, request(a));
}
std::vector<Tensor> Std::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Std>, in, request(a));
}
std::vector<TensorType> Logsumexp::infer(const Attrs& a, std::span<const TensorType> in) {
  return infer_reduce(kSpec<Logsumexp>, in, request(a));
}
std::vector<Tensor> Logsumexp::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_reduce(kSpec<Logsumexp>, in, request(a));
}
std::vector<TensorType> Softmax::infer(const Attrs& a, std::span<const TensorType> in) {
  parse_softmax(name, in[0], a.axis);
  return {in[0]};
}
std::vector<Tensor> Softmax::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_softmax(name, false, in, a.axis);
}
std::vector<TensorType> LogSoftmax::infer(const Attrs& a, std::span<const TensorType> in) {
  parse_softmax(name, in[0], a.axis);
  return {in[0]};
}
std::vector<Tensor> LogSoftmax::eval(const Attrs& a, std::span<const Tensor> in) {
  return eval_softmax(name, true, in, a.axis);
}

// ---------------------------------------------------------------- gradients
// A reduction's output (or its gradient) is expanded back over the reduced axes.

namespace {

struct Reduced {
  std::vector<std::int64_t> axes;  // normalized (every axis when none is given)
  const Tensor& x;

  Reduced(const std::vector<std::int64_t>& given, const GradContext& c, std::string_view op)
      : x(c.inputs[0]) {
    if (given.empty())
      for (std::int64_t a = 0; a < x.rank(); ++a) axes.push_back(a);
    for (std::int64_t a : given) axes.push_back(axis_normalize(a, x.rank(), op));
  }
  // `t` with the reduced axes kept as size 1, broadcast back to x's shape.
  Tensor back(const Tensor& t) const {
    std::vector<std::int64_t> kept = x.shape().to_vector();
    for (std::int64_t a : axes) kept[static_cast<std::size_t>(a)] = 1;
    return broadcast_to(reshape(t, Shape(kept)), x.shape());
  }
  // Elements each output element reads.
  double count() const {
    double n = 1;
    for (std::int64_t a : axes) n *= static_cast<double>(x.dim(a));
    return n;
  }
};

// Ties share the gradient equally.
std::vector<Tensor> extremum_vjp(const Reduced& r, const GradContext& c) {
  const Tensor hit = cast(r.x == r.back(c.outputs[0]), r.x.dtype());
  const Tensor count = r.back(sum(hit, r.axes, true));
  return {Tensor(r.back(c.out_grads[0]) * hit / count)};
}

// The deviations from the mean and the divisor N - ddof of var and std.
std::pair<Tensor, double> centered(const Reduced& r, std::int64_t ddof) {
  return {Tensor(r.x - r.back(mean(r.x, r.axes, true))), r.count() - static_cast<double>(ddof)};
}

}  // namespace

std::vector<Tensor> Sum::vjp(const Attrs& a, const GradContext& c) {
  return {Reduced(a.axes, c, name).back(c.out_grads[0])};
}
std::vector<Tensor> Mean::vjp(const Attrs& a, const GradContext& c) {
  const Reduced r(a.axes, c, name);
  return {Tensor(r.back(c.out_grads[0]) / r.count())};
}
std::vector<Tensor> Max::vjp(const Attrs& a, const GradContext& c) {
  return extremum_vjp(Reduced(a.axes, c, name), c);
}
std::vector<Tensor> Min::vjp(const Attrs& a, const GradContext& c) {
  return extremum_vjp(Reduced(a.axes, c, name), c);
}
// prod / x: exact away from zeros (a zero input gets NaN or Inf).
std::vector<Tensor> Prod::vjp(const Attrs& a, const GradContext& c) {
  const Reduced r(a.axes, c, name);
  return {Tensor(r.back(c.out_grads[0]) * r.back(c.outputs[0]) / r.x)};
}
std::vector<Tensor> Var::vjp(const Attrs& a, const GradContext& c) {
  const Reduced r(a.axes, c, name);
  const auto [d, n] = centered(r, a.ddof);
  return {Tensor(r.back(c.out_grads[0]) * d * (2.0 / n))};
}
std::vector<Tensor> Std::vjp(const Attrs& a, const GradContext& c) {
  const Reduced r(a.axes, c, name);
  const auto [d, n] = centered(r, a.ddof);
  return {Tensor(r.back(c.out_grads[0]) * d / (r.back(c.outputs[0]) * n))};
}
std::vector<Tensor> Logsumexp::vjp(const Attrs& a, const GradContext& c) {
  const Reduced r(a.axes, c, name);
  return {Tensor(r.back(c.out_grads[0]) * exp(r.x - r.back(c.outputs[0])))};
}
std::vector<Tensor> Softmax::vjp(const Attrs& a, const GradContext& c) {
  const Tensor &o = c.outputs[0], &g = c.out_grads[0];
  return {Tensor(o * (g - sum(Tensor(g * o), {a.axis}, true)))};
}
std::vector<Tensor> LogSoftmax::vjp(const Attrs& a, const GradContext& c) {
  const Tensor &o = c.outputs[0], &g = c.out_grads[0];
  return {Tensor(g - exp(o) * sum(g, {a.axis}, true))};
}

// ---------------------------------------------------------------- samples

namespace {

using detail::error_sample;
using detail::sample;
using detail::sample_345;
using detail::sample_tensor;

Tensor r34(unsigned seed, double lo = -2, double hi = 2) {
  return sample_tensor({3, 4}, seed, lo, hi, float64);
}
Tensor m23() { return tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}); }

}  // namespace

Samples Sum::samples() {
  return {
      .cases = {sample("rows of [[1, 2, 3], [4, 5, 6]]", {m23()}, Attrs{.axes = {1}},
                       {tensor({6.0, 15.0})}),
                sample("axes {1} keepdims", {sample_345(1)}, Attrs{.axes = {1}, .keepdims = true}),
                sample("all, i32 -> i64", {sample_345(2, int32)}, Attrs{}),
                sample("axes {0, -1}, f64", {sample_345(3, float64)}, Attrs{.axes = {0, -1}}),
                sample("u8", {sample_tensor({3, 4}, 4, 0, 9, uint8)}, Attrs{.axes = {1}}),
                sample("bool -> i64", {tensor({true, false, true})}, Attrs{},
                       {tensor(std::int64_t{2})}),
                sample("empty [0, 4] over axis 0", {zeros({0, 4})}, Attrs{.axes = {0}},
                       {zeros({4})}),
                sample("gradient, axis 1", {r34(12)}, Attrs{.axes = {1}}, {}, {0}),
                sample("gradient, all, keepdims", {r34(12)}, Attrs{.keepdims = true}, {}, {0})},
      .errors = {error_sample("repeated axis", {zeros({2, 3})}, Attrs{.axes = {1, -1}},
                              "ms::ValueError", "sum: axis 1 appears more than once"),
                 error_sample("axis out of range", {zeros({2, 3})}, Attrs{.axes = {2}},
                              "ms::IndexError", "sum: axis 2 is out of range"),
                 error_sample("int4", {zeros({2}, int4)}, Attrs{}, "ms::TypeError",
                              "sum: dtype Int4 is packed")}};
}

Samples Mean::samples() {
  return {.cases = {sample("rows", {m23()}, Attrs{.axes = {1}}, {tensor({2.0, 5.0})}),
                    sample("axes {2}", {sample_345(5)}, Attrs{.axes = {2}}),
                    sample("all, f64", {sample_345(6, float64)}, Attrs{}),
                    sample("f16", {sample_345(7, float16)}, Attrs{.axes = {1}}),
                    sample("gradient, axis 0", {r34(12)}, Attrs{.axes = {0}}, {}, {0})},
          .errors = {error_sample("integer input", {zeros({2}, int32)}, Attrs{}, "ms::TypeError",
                                  "mean: input dtype Int32 is not a floating dtype")}};
}

Samples Prod::samples() {
  return {.cases = {sample("rows", {m23()}, Attrs{.axes = {1}}, {tensor({6.0, 120.0})}),
                    sample("axes {1}", {sample_345(8, float32, 0.5, 1.5)}, Attrs{.axes = {1}}),
                    sample("i64 keepdims", {sample_tensor({3, 4}, 9, -2, 2, int64)},
                           Attrs{.axes = {0}, .keepdims = true}),
                    sample("gradient, axis 1", {r34(13, 0.5, 1.5)}, Attrs{.axes = {1}}, {}, {0})},
          .errors = {error_sample("complex", {zeros({2}, complex64)}, Attrs{}, "ms::TypeError",
                                  "prod: complex dtype Complex64 is not supported")}};
}

Samples Max::samples() {
  return {.cases = {sample("rows", {m23()}, Attrs{.axes = {1}}, {tensor({3.0, 6.0})}),
                    sample("axes {0}", {sample_345(10)}, Attrs{.axes = {0}}),
                    sample("all, i32", {sample_345(11, int32)}, Attrs{}),
                    sample("i8", {sample_tensor({3, 4}, 12, -9, 9, int8)}, Attrs{.axes = {0}}),
                    sample("rank 0", {tensor(2.5)}, Attrs{}, {tensor(2.5)}),
                    sample("gradient, axis 1", {r34(12)}, Attrs{.axes = {1}}, {}, {0})},
          .errors = {error_sample("empty axis", {zeros({0, 3})}, Attrs{.axes = {0}},
                                  "ms::ValueError", "max: cannot reduce over axis 0 of size 0")}};
}

Samples Min::samples() {
  return {.cases = {sample("rows", {m23()}, Attrs{.axes = {1}}, {tensor({1.0, 4.0})}),
                    sample("axes {-1} keepdims", {sample_345(13)},
                           Attrs{.axes = {-1}, .keepdims = true}),
                    sample("gradient, all", {r34(12)}, Attrs{}, {}, {0})},
          .errors = {error_sample("empty", {zeros({0})}, Attrs{}, "ms::ValueError",
                                  "min: cannot reduce over axis 0 of size 0")}};
}

Samples All::samples() {
  return {.cases = {sample("rows", {tensor({{true, true}, {true, false}})}, Attrs{.axes = {1}},
                           {tensor({true, false})}),
                    sample("f32 nonzero, axes {1}", {sample_345(14)}, Attrs{.axes = {1}}),
                    sample("complex", {zeros({2}, complex64)}, Attrs{}, {tensor(false)})}};
}

Samples Any::samples() {
  return {.cases = {sample("rows", {tensor({{false, false}, {true, false}})}, Attrs{.axes = {1}},
                           {tensor({false, true})}),
                    sample("axes {0, 1}", {sample_345(15) > 1.5f}, Attrs{.axes = {0, 1}}),
                    sample("empty", {zeros({0})}, Attrs{}, {tensor(false)})}};
}

Samples Argmax::samples() {
  return {
      .cases = {sample("rows, first of ties", {tensor({{1.0, 3.0, 3.0}, {5.0, 4.0, 0.0}})},
                       Attrs{.axis = 1}, {tensor({std::int64_t{1}, std::int64_t{0}})}),
                sample("flat", {sample_345(16, int32)}, Attrs{}),
                sample("axis 1 keepdims", {sample_345(17)}, Attrs{.axis = 1, .keepdims = true})},
      .errors = {error_sample("empty", {zeros({0})}, Attrs{}, "ms::ValueError",
                              "argmax: cannot reduce over axis 0 of size 0")}};
}

Samples Argmin::samples() {
  return {
      .cases = {sample("rows", {m23()}, Attrs{.axis = -1},
                       {tensor({std::int64_t{0}, std::int64_t{0}})}),
                sample("axis -1 keepdims", {sample_345(18)}, Attrs{.axis = -1, .keepdims = true}),
                sample("flat", {sample_345(19)}, Attrs{})},
      .errors = {error_sample("axis out of range", {zeros({2, 3})}, Attrs{.axis = 3},
                              "ms::IndexError", "argmin: axis 3 is out of range")}};
}

Samples Var::samples() {
  return {
      .cases = {sample("rows, ddof 1", {m23()}, Attrs{.axes = {1}, .ddof = 1},
                       {tensor({1.0, 1.0})}),
                sample("axes {1} ddof 1", {sample_345(20)}, Attrs{.axes = {1}, .ddof = 1}),
                sample("all, f64", {sample_345(21, float64)}, Attrs{}),
                sample("gradient, axis 1, ddof 1", {r34(12)}, Attrs{.axes = {1}, .ddof = 1}, {},
                       {0})},
      .errors = {error_sample("negative ddof", {zeros({3})}, Attrs{.ddof = -1}, "ms::ValueError",
                              "var: ddof (correction) must be >= 0, got -1")}};
}

Samples Std::samples() {
  return {
      .cases = {
          sample("rows, ddof 1", {m23()}, Attrs{.axes = {1}, .ddof = 1}, {tensor({1.0, 1.0})}),
          sample("axes {0, 2} keepdims", {sample_345(22)}, Attrs{.axes = {0, 2}, .keepdims = true}),
          sample("gradient, axis 0", {r34(12)}, Attrs{.axes = {0}}, {}, {0})}};
}

Samples Logsumexp::samples() {
  return {
      .cases = {sample("axes {2}", {sample_345(23)}, Attrs{.axes = {2}}),
                sample("i32 -> f32", {sample_345(24, int32)}, Attrs{.axes = {0}, .keepdims = true}),
                sample("empty is -inf", {zeros({0})}, Attrs{},
                       {tensor(-std::numeric_limits<double>::infinity()).to(float32)}),
                sample("gradient, axis 1", {r34(12)}, Attrs{.axes = {1}}, {}, {0})}};
}

Samples Softmax::samples() {
  return {.cases = {sample("uniform row", {tensor({{0.0, 0.0}})}, Attrs{}, {tensor({{0.5, 0.5}})}),
                    sample("axis -1", {sample_345(25)}, Attrs{}),
                    sample("axis 0, f64", {sample_345(26, float64)}, Attrs{.axis = 0}),
                    sample("bf16", {sample_tensor({2, 5}, 27, -2, 2, bfloat16)}, Attrs{.axis = 1}),
                    sample("empty rows", {zeros({0, 5})}, Attrs{}),
                    sample("gradient, axis -1", {r34(12)}, Attrs{}, {}, {0})},
          .errors = {error_sample("integer input", {zeros({2}, int64)}, Attrs{}, "ms::TypeError",
                                  "softmax: input dtype Int64 is not a floating dtype")}};
}

Samples LogSoftmax::samples() {
  return {.cases = {sample("axis 1", {sample_345(28)}, Attrs{.axis = 1}),
                    sample("f16", {sample_tensor({4, 6}, 29, -2, 2, float16)}, Attrs{}),
                    sample("gradient, axis 0", {r34(12)}, Attrs{.axis = 0}, {}, {0})}};
}

}  // namespace ops

namespace ops::detail {

void register_reduce_ops() {
  // softmax / log_softmax: composites of max, exp, sum, div/sub, run as one fused,
  // numerically stable kernel (the max is subtracted first).
  register_entries<Sum, Mean, Prod, Max, Min, All, Any, Argmax, Argmin, Var, Std, Logsumexp,
                   Softmax, LogSoftmax>();
}

}  // namespace ops::detail
}  // namespace ms
