// Slicing ops (`slice`, `select`) and the bridge that turns the view methods of
// a symbolic Tensor (core cannot call the op table) into op-table calls.
#include <algorithm>

#include "ms/ops/layout.hpp"
#include "ms/ops/op.hpp"

namespace ms {
namespace {

struct SliceArgs {
  std::int64_t axis, start, stop, step;
};

SliceArgs slice_args(const ops::Attrs& a) {
  return {a.get<std::int64_t>("axis", "slice"), a.get<std::int64_t>("start", "slice"),
          a.get<std::int64_t>("stop", "slice"), a.get<std::int64_t>("step", "slice")};
}

std::vector<ops::TensorType> infer_slice(std::span<const ops::TensorType> in,
                                         const ops::Attrs& attrs) {
  const SliceArgs s = slice_args(attrs);
  const Shape& x = in[0].shape;
  MS_CHECK(x.rank() > 0, IndexError, "slice: cannot slice a rank-0 tensor");
  const auto ax = static_cast<std::size_t>(axis_normalize(s.axis, x.rank(), "slice"));
  MS_CHECK(s.step > 0, ValueError, "slice: step must be > 0, got ", s.step);
  const std::int64_t n = x[ax];
  auto clampi = [n](std::int64_t v) {
    if (v < 0) v = v < -n ? 0 : v + n;
    return std::min(v, n);
  };
  const std::int64_t start = clampi(s.start), stop = clampi(s.stop);
  Shape out = x;
  out[ax] = stop > start ? (stop - start - 1) / s.step + 1 : 0;
  return {{in[0].dtype, out}};
}

std::vector<Tensor> eval_slice(std::span<const Tensor> in, const ops::Attrs& attrs) {
  const SliceArgs s = slice_args(attrs);
  return {in[0].slice(s.axis, s.start, s.stop, s.step)};
}

std::vector<ops::TensorType> infer_select(std::span<const ops::TensorType> in,
                                          const ops::Attrs& attrs) {
  const auto axis = attrs.get<std::int64_t>("axis", "select");
  const auto index = attrs.get<std::int64_t>("index", "select");
  const Shape& x = in[0].shape;
  MS_CHECK(x.rank() > 0, IndexError, "select: cannot index a rank-0 tensor");
  const auto ax = static_cast<std::size_t>(axis_normalize(axis, x.rank(), "select"));
  const std::int64_t n = x[ax];
  MS_CHECK(index >= -n && index < n, IndexError, "select: index ", index,
           " is out of range for axis ", ax, " of size ", n);
  std::vector<std::int64_t> d = x.dims();
  d.erase(d.begin() + static_cast<std::ptrdiff_t>(ax));
  return {{in[0].dtype, Shape(std::move(d))}};
}

std::vector<Tensor> eval_select(std::span<const Tensor> in, const ops::Attrs& attrs) {
  return {in[0].select(attrs.get<std::int64_t>("axis", "select"),
                       attrs.get<std::int64_t>("index", "select"))};
}

Tensor symbolic_view(std::string_view op, const Tensor& x, const std::vector<std::int64_t>& v,
                     DType dtype) {
  if (op == "reshape") return reshape(x, Shape(v));
  if (op == "transpose") return transpose(x, v.at(0), v.at(1));
  if (op == "permute") return permute(x, v);
  if (op == "squeeze") return v.empty() ? squeeze(x) : squeeze(x, v[0]);
  if (op == "unsqueeze") return unsqueeze(x, v.at(0));
  if (op == "flatten") return flatten(x, v.at(0), v.at(1));
  if (op == "cast") return cast(x, dtype);
  if (op == "broadcast_to") {  // Tensor::expand semantics: -1 keeps a dim
    std::vector<std::int64_t> d = v;
    const std::size_t lead = d.size() >= x.shape().size() ? d.size() - x.shape().size() : 0;
    for (std::size_t i = lead; i < d.size(); ++i)
      if (d[i] == -1) d[i] = x.shape()[i - lead];
    return broadcast_to(x, Shape(std::move(d)));
  }
  if (op == "slice") {
    static const ops::OpDef& def = ops::op("slice");
    return ops::call1(
        def, {x}, {{"axis", v.at(0)}, {"start", v.at(1)}, {"stop", v.at(2)}, {"step", v.at(3)}});
  }
  if (op == "select") {
    static const ops::OpDef& def = ops::op("select");
    return ops::call1(def, {x}, {{"axis", v.at(0)}, {"index", v.at(1)}});
  }
  ::ms::detail::raise<ValueError>("Tensor::", op, ": not supported on a symbolic tensor");
}

void symbolic_assign(const Tensor& dst, const Tensor& src, const char* what) {
  ops::Tracer* t = ops::active_tracer();
  MS_CHECK(t != nullptr, ValueError, what,
           ": a symbolic tensor is used outside its trace (was a traced value kept after ms::jit "
           "returned?)");
  t->record_assign(dst, src, what);
}

}  // namespace

namespace ops::detail {

void register_view_ops() {
  registry_add({.name = "slice",
                .kind = OpKind::Layout,
                .min_inputs = 1,
                .max_inputs = 1,
                .differentiable = true,
                .infer = infer_slice,
                .eval = eval_slice});
  registry_add({.name = "select",
                .kind = OpKind::Layout,
                .min_inputs = 1,
                .max_inputs = 1,
                .differentiable = true,
                .infer = infer_select,
                .eval = eval_select});
  registry_add(
      {.name = "stop_gradient",
       .kind = OpKind::Layout,
       .min_inputs = 1,
       .max_inputs = 1,
       .differentiable = false,
       .infer = [](std::span<const TensorType> in,
                   const Attrs&) { return std::vector<TensorType>{in[0]}; },
       .eval = [](std::span<const Tensor> in, const Attrs&) { return std::vector<Tensor>{in[0]}; },
       .algebra = {.identity_when_same_type = true}});
  ::ms::detail::set_symbolic_view_fn(symbolic_view);
  ::ms::detail::set_symbolic_assign_fn(symbolic_assign);
}

}  // namespace ops::detail
}  // namespace ms
