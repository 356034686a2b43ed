// The slicing views (`slice`, `select`), `stop_gradient`, `depend`, and the view and
// copy methods of ms::Tensor.
//
// Tensor's view methods are declared in core (ms/core/tensor.hpp) and defined
// here: each is the public form of its op entry, so that one code path serves
// a concrete tensor (the entry checks its arguments once, then computes the
// view), a symbolic one and a tensor captured while ms::jit traces (the call
// records the entry's node). The copies (`contiguous`, `clone`, `to`) record a
// `cast` while tracing and run core's eager copy otherwise; the in-place
// writes (`copy_`, `fill_`) record an update node while tracing.
#include <algorithm>

#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/op.hpp"

namespace ms {
namespace ops {
namespace {

using TypeList = std::vector<TensorType>;
using TensorList = std::vector<Tensor>;
using Types = std::span<const TensorType>;
using Inputs = std::span<const Tensor>;

using detail::u;

// Pads for ms::pad (PyTorch order: last axis first) that put a [start, start+len)
// window of an axis back in place, with `after` zeros behind it.
std::vector<std::int64_t> window_pads(std::int64_t rank, std::int64_t axis, std::int64_t start,
                                      std::int64_t after) {
  std::vector<std::int64_t> pads(u(2 * (rank - axis)), 0);
  pads[pads.size() - 2] = start;
  pads[pads.size() - 1] = after;
  return pads;
}

// A slice's axis, clamped start and length, from checked attributes.
struct SliceWindow {
  std::size_t axis;
  std::int64_t start, len;
};

SliceWindow slice_window(const Slice::Attrs& a, const Shape& x) {
  MS_CHECK(x.rank() > 0, IndexError, "slice: cannot slice a rank-0 tensor");
  const auto ax = u(axis_normalize(a.axis, x.rank(), "slice"));
  MS_CHECK(a.step > 0, ValueError, "slice: step must be > 0, got ", a.step);
  const std::int64_t n = x[ax];
  auto clampi = [n](std::int64_t v) {
    if (v < 0) v = v < -n ? 0 : v + n;
    return std::min(v, n);
  };
  const std::int64_t start = clampi(a.start), stop = clampi(a.stop);
  return {ax, start, stop > start ? (stop - start - 1) / a.step + 1 : 0};
}

// The select's axis and non-negative index, from checked attributes.
std::pair<std::size_t, std::int64_t> select_at(const Select::Attrs& a, const Shape& x) {
  MS_CHECK(x.rank() > 0, IndexError, "select: cannot index a rank-0 tensor");
  const auto ax = u(axis_normalize(a.axis, x.rank(), "select"));
  const std::int64_t n = x[ax];
  MS_CHECK(a.index >= -n && a.index < n, IndexError, "select: index ", a.index,
           " is out of range for axis ", ax, " of size ", n);
  return {ax, a.index < 0 ? a.index + n : a.index};
}

void check_unpacked(DType t, std::string_view op) {
  MS_CHECK(t != DType::Int4, TypeError, op, ": Int4 tensors are packed; cast first");
}

}  // namespace

// ---------------------------------------------------------------- slice

TypeList Slice::infer(const Attrs& a, Types in) {
  check_unpacked(in[0].dtype, name);
  const SliceWindow w = slice_window(a, in[0].shape);
  Shape out = in[0].shape;
  out[w.axis] = w.len;
  return {{in[0].dtype, out}};
}

TensorList Slice::eval(const Attrs& a, Inputs in) {
  check_unpacked(in[0].dtype(), name);
  const Tensor& x = in[0];
  const SliceWindow w = slice_window(a, x.shape());
  Shape s = x.shape();
  s[w.axis] = w.len;
  DimVector st = x.strides();
  st[w.axis] *= a.step;
  return {Tensor(x.storage(), x.dtype(), std::move(s), std::move(st),
                 w.len > 0 ? x.offset() + w.start * x.strides()[w.axis] : x.offset())};
}

// The gradient goes back to the window it came from, zeros elsewhere.
TensorList Slice::vjp(const Attrs& a, const GradContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& g = c.out_grads[0];
  const SliceWindow w = slice_window(a, x.shape());
  const auto axis = static_cast<std::int64_t>(w.axis);
  const std::int64_t n = x.dim(axis);
  if (a.step == 1 || w.len == 0)
    return {pad(g, window_pads(x.rank(), axis, w.start, n - w.start - w.len))};
  // A strided slice: step - 1 zeros after each gradient slice (a pad on a
  // new axis, merged back), then placed at `start` (the tail past x cropped).
  const Tensor spread =
      pad(unsqueeze(g, axis + 1), window_pads(x.rank() + 1, axis + 1, 0, a.step - 1));
  Shape merged = x.shape();
  merged[w.axis] = w.len * a.step;
  return {pad(reshape(spread, merged),
              window_pads(x.rank(), axis, w.start, n - w.start - w.len * a.step))};
}

// ---------------------------------------------------------------- select

TypeList Select::infer(const Attrs& a, Types in) {
  check_unpacked(in[0].dtype, name);
  const auto [ax, index] = select_at(a, in[0].shape);
  std::vector<std::int64_t> d = in[0].shape.to_vector();
  d.erase(d.begin() + static_cast<std::ptrdiff_t>(ax));
  return {{in[0].dtype, Shape(std::move(d))}};
}

TensorList Select::eval(const Attrs& a, Inputs in) {
  check_unpacked(in[0].dtype(), name);
  const Tensor& x = in[0];
  const auto [ax, index] = select_at(a, x.shape());
  std::vector<std::int64_t> d = x.shape().to_vector(), st(x.strides().begin(), x.strides().end());
  const std::int64_t offset = x.offset() + index * st[ax];
  d.erase(d.begin() + static_cast<std::ptrdiff_t>(ax));
  st.erase(st.begin() + static_cast<std::ptrdiff_t>(ax));
  return {Tensor(x.storage(), x.dtype(), Shape(std::move(d)), std::move(st), offset)};
}

TensorList Select::vjp(const Attrs& a, const GradContext& c) {
  const Tensor& x = c.inputs[0];
  const auto [ax, index] = select_at(a, x.shape());
  const auto axis = static_cast<std::int64_t>(ax);
  return {pad(unsqueeze(c.out_grads[0], axis),
              window_pads(x.rank(), axis, index, x.dim(axis) - index - 1))};
}

// ---------------------------------------------------------------- stop_gradient

TypeList StopGradient::infer(const Attrs&, Types in) { return {in[0]}; }
TensorList StopGradient::eval(const Attrs&, Inputs in) { return {in[0]}; }

// ---------------------------------------------------------------- depend

TypeList Depend::infer(const Attrs&, Types in) { return {in[0]}; }
TensorList Depend::eval(const Attrs&, Inputs in) { return {in[0]}; }
TensorList Depend::vjp(const Attrs&, const GradContext& c) {
  TensorList g(c.inputs.size());
  g[0] = c.out_grads[0];
  return g;
}

// ---------------------------------------------------------------- samples

namespace {
Tensor s45(unsigned seed) { return detail::sample_tensor({4, 5}, seed, -2, 2, float64); }
}  // namespace

Samples Slice::samples() {
  return {
      .cases = {detail::sample("[0..5) step 2", {tensor({0, 1, 2, 3, 4})}, Attrs{0, 0, 5, 2},
                               {tensor({0, 2, 4})}),
                detail::sample("negative start, axis 1", {detail::sample_tensor({3, 5}, 31)},
                               Attrs{1, -3, 5, 1}),
                detail::sample("stop before start: empty", {detail::sample_tensor({3, 5}, 32)},
                               Attrs{1, 4, 2, 1}),
                detail::sample("clamped past the end", {detail::sample_tensor({6}, 33)},
                               Attrs{0, 2, 100, 3}),
                detail::sample("gradient, step 1", {s45(34)}, Attrs{1, 1, 4, 1}, {}, {0}),
                detail::sample("gradient, step 2, axis 0", {s45(35)}, Attrs{0, -3, 4, 2}, {}, {0}),
                detail::sample("gradient, step 3 (the tail cropped)",
                               {detail::sample_tensor({5, 2}, 39, -2, 2, float64)},
                               Attrs{0, -3, 3, 3}, {}, {0}),
                detail::sample("gradient, step 2 of a 3-D middle axis",
                               {detail::sample_tensor({2, 5, 3}, 40, -2, 2, float64)},
                               Attrs{1, 0, 5, 2}, {}, {0})},
      .errors = {detail::error_sample("step 0", {zeros({3})}, Attrs{0, 0, 3, 0}, "ms::ValueError",
                                      "slice: step must be > 0, got 0"),
                 detail::error_sample("rank 0", {tensor(1.0)}, Attrs{0, 0, 1, 1}, "ms::IndexError",
                                      "slice: cannot slice a rank-0 tensor"),
                 detail::error_sample("axis out of range", {zeros({2, 3})}, Attrs{2, 0, 1, 1},
                                      "ms::IndexError", "slice: axis 2 is out of range")}};
}

Samples Select::samples() {
  return {
      .cases = {detail::sample("row 1", {tensor({{1, 2}, {3, 4}})}, Attrs{0, 1}, {tensor({3, 4})}),
                detail::sample("index -1 of axis 1", {detail::sample_tensor({3, 4}, 36)},
                               Attrs{1, -1}),
                detail::sample("gradient", {s45(37)}, Attrs{1, 2}, {}, {0})},
      .errors = {
          detail::error_sample("index past the end", {zeros({2, 3})}, Attrs{1, 3}, "ms::IndexError",
                               "select: index 3 is out of range for axis 1 of size 3"),
          detail::error_sample("rank 0", {tensor(1.0)}, Attrs{0, 0}, "ms::IndexError",
                               "select: cannot index a rank-0 tensor")}};
}

Samples StopGradient::samples() {
  return {.cases = {
              detail::sample("the identity", {tensor({1.5, -2.0})}, Attrs{}, {tensor({1.5, -2.0})}),
              detail::sample("i64 [3, 4]", {detail::sample_tensor({3, 4}, 38, -9, 9, int64)},
                             Attrs{})}};
}

Samples Depend::samples() {
  const Tensor a = s45(44);
  return {.cases = {detail::sample("the first input", {a, tensor({1.0, 2.0})}, Attrs{}, {a}),
                    detail::sample("gradient to the first input only", {s45(45), s45(46)}, Attrs{},
                                   {}, {0})}};
}

namespace detail {
void register_view_ops() { register_entries<Slice, Select, StopGradient, Depend>(); }
}  // namespace detail
}  // namespace ops

// ---------------------------------------------------------------- Tensor's views

namespace {
// While ms::jit traces, a copy of a captured tensor must be a graph op, so
// that later in-place updates of that tensor are seen by the graph.
bool records(const Tensor& t) { return t.is_symbolic() || ::ms::detail::tracing_active(); }
}  // namespace

Tensor Tensor::reshape(const Shape& shape) const { return ms::reshape(*this, shape); }

Tensor Tensor::view(const Shape& shape) const {
  if (records(*this)) return ms::reshape(*this, shape);
  check_defined("view");
  const Tensor out = ms::reshape(*this, shape);
  MS_CHECK(out.storage() == storage_ || numel_ == 0, ShapeError, "view: a tensor of shape ", shape_,
           " and strides ", Shape(strides_), " cannot be viewed as ", out.shape(),
           " without a copy; use reshape()");
  return out;
}

Tensor Tensor::transpose(std::int64_t a, std::int64_t b) const {
  return ms::transpose(*this, a, b);
}
Tensor Tensor::permute(const std::vector<std::int64_t>& axes) const {
  return ms::permute(*this, axes);
}
Tensor Tensor::slice(std::int64_t axis, std::int64_t start, std::int64_t stop,
                     std::int64_t step) const {
  return ops::invoke1<ops::Slice>({*this}, {axis, start, stop, step});
}
Tensor Tensor::select(std::int64_t axis, std::int64_t index) const {
  return ops::invoke1<ops::Select>({*this}, {axis, index});
}
Tensor Tensor::squeeze() const { return ms::squeeze(*this); }
Tensor Tensor::squeeze(std::int64_t axis) const { return ms::squeeze(*this, axis); }
Tensor Tensor::unsqueeze(std::int64_t axis) const { return ms::unsqueeze(*this, axis); }
// -1 keeps a dim: resolved here, so that a recorded node holds the sizes.
Tensor Tensor::expand(const Shape& shape) const {
  std::vector<std::int64_t> d = shape.to_vector();
  const std::size_t lead = d.size() >= shape_.size() ? d.size() - shape_.size() : 0;
  for (std::size_t i = lead; i < d.size(); ++i)
    if (d[i] == -1) d[i] = shape_[i - lead];
  return ms::broadcast_to(*this, Shape(std::move(d)));
}
Tensor Tensor::flatten(std::int64_t start, std::int64_t end) const {
  return ms::flatten(*this, start, end);
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_symbolic()) return *this;  // graph values are dense
  if (::ms::detail::tracing_active() && !is_contiguous()) return ms::cast(*this, dtype_);
  check_defined("contiguous");
  return ::ms::detail::to_dense(*this, dtype_);
}

Tensor Tensor::clone() const {
  if (records(*this)) return ms::cast(*this, dtype_);
  check_defined("clone");
  Tensor out = empty(shape_, dtype_);
  ::ms::detail::copy_convert(*this, out);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (is_symbolic()) return dtype == dtype_ ? *this : ms::cast(*this, dtype);
  if (::ms::detail::tracing_active() && !(dtype == dtype_ && is_contiguous()))
    return ms::cast(*this, dtype);
  check_defined("to");
  return ::ms::detail::to_dense(*this, dtype);
}

// ---------------------------------------------------------------- in-place writes

namespace {
// An update node of the active trace: writes into or from a symbolic tensor,
// or into a captured one (a parameter) while tracing.
void record_assign(const Tensor& dst, const Tensor& src, const char* what) {
  ops::Tracer* t = ops::active_tracer();
  MS_CHECK(t != nullptr, ValueError, what,
           ": a symbolic tensor is used outside its trace (was a traced value kept after ms::jit "
           "returned?)");
  t->record_assign(dst, src, what);
}
}  // namespace

void Tensor::copy_(const Tensor& src) {
  if (records(*this) || src.is_symbolic()) return record_assign(*this, src, "Tensor::copy_");
  check_defined("copy_");
  src.check_defined("copy_");
  const Tensor b = src.shape() == shape_ ? src : ms::broadcast_to(src, shape_);
  storage()->note_write();
  if (is_contiguous()) {
    ::ms::detail::copy_convert(b, *this);
  } else {
    // The source may overlap this tensor's elements: read it all first.
    Tensor tmp = empty(shape_, dtype_);
    ::ms::detail::copy_convert(b, tmp);
    ::ms::detail::copy_convert(tmp, *this);
  }
}

void Tensor::fill_(const Scalar& value) {
  if (records(*this)) return record_assign(*this, full({}, value, dtype_), "Tensor::fill_");
  check_defined("fill_");
  copy_(full({}, value, dtype_));
}

}  // namespace ms
