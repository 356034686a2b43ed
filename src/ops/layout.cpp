// Shape and indexing ops: one OpDef each (see ms/ops/layout.hpp).
//
// Each op's `infer` does all validation that types and attributes allow
// (ranks, shapes, axes, dtypes, size overflow); `eval` calls it, then checks
// index *values* (which only concrete tensors have) before any kernel runs,
// so nothing can throw inside a parallel region.
#include "ms/ops/layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/kernels/layout.hpp"
#include "ms/kernels/parallel.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/op.hpp"

namespace ms {
namespace {

using ops::Attrs;
using ops::OpDef;
using ops::OpKind;
using ops::TensorType;
using Types = std::span<const TensorType>;
using Inputs = std::span<const Tensor>;
using Dims = std::vector<std::int64_t>;
using TypeList = std::vector<TensorType>;
using TensorList = std::vector<Tensor>;

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
// split: more outputs than this is certainly a mistake (and would exhaust memory).
constexpr std::int64_t kMaxSplitOutputs = std::int64_t{1} << 24;

using ops::detail::u;

void check_packed(DType t, std::string_view op, std::string_view arg) {
  MS_CHECK(t != DType::Int4, TypeError, op, ": ", arg,
           " has dtype Int4, which is packed (storage and cast only); cast it first");
}

void check_index_dtype(DType t, std::string_view op, std::string_view arg) {
  MS_CHECK(t == int32 || t == int64, TypeError, op, ": ", arg,
           " must have dtype Int32 or Int64, got ", t);
}

// An element-wise index (gather, gather_grad, scatter) against the shape it
// indexes, `xs` (named in messages by `xs_name`: "x of shape" or
// "input_size"): the same rank and, on every axis but the indexed one, no
// larger. Returns the normalized axis; `verb` names that axis ("gather").
std::int64_t check_index_shape(const Shape& index, const Shape& xs, std::int64_t axis,
                               std::string_view op, std::string_view xs_name,
                               std::string_view verb) {
  const std::int64_t r = xs.rank();
  MS_CHECK(index.rank() == r, ShapeError, op, ": index of shape ", index, " has rank ",
           index.rank(), " but ", xs_name, " ", xs, " has rank ", r, "; they must match");
  const std::int64_t ax = axis_normalize(axis, r, op);
  for (std::int64_t d = 0; d < r; ++d)
    MS_CHECK(d == ax || index[u(d)] <= xs[u(d)], ShapeError, op, ": index of shape ", index,
             " is larger than ", xs_name, " ", xs, " on axis ", d, " (", index[u(d)], " > ",
             xs[u(d)], "); only the ", verb, " axis ", ax, " may be larger");
  return ax;
}

// The output's element count and byte size must fit in int64: checked in
// infer, so that eval never attempts (or overflows) the allocation.
void check_out_size(const TensorType& t, std::string_view op) {
  shape_nbytes(shape_numel(t.shape, op), dtype_itemsize(t.dtype), op);
}

bool add_overflows(std::int64_t a, std::int64_t b, std::int64_t& out) {
  return __builtin_add_overflow(a, b, &out);
}

std::int64_t prod(const Shape& s, std::size_t begin, std::size_t end) {
  std::int64_t p = 1;
  for (std::size_t d = begin; d < end; ++d) p *= s[d];
  return p;
}

// "[1, 2]": the coordinates of row-major position `flat` in `shape` ("" for rank 0).
std::string position(std::int64_t flat, const Shape& shape) {
  if (shape.empty()) return "";
  Dims c(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return Shape(std::move(c)).to_string();
}

std::int64_t index_value(const Tensor& dense_index, std::int64_t pos) {
  return dense_index.dtype() == int32 ? dense_index.data<std::int32_t>()[pos]
                                      : dense_index.data<std::int64_t>()[pos];
}

// IndexError for the first value of `dense_index` outside [0, limit);
// `range()` names what the values index (called only to say so).
template <class Range>
void check_index_values(const Tensor& dense_index, std::int64_t limit, std::string_view op,
                        std::string_view arg, const Range& range) {
  const std::int64_t pos = kernels::index_find_out_of_range(dense_index, limit);
  if (pos < 0) return;
  detail::raise<IndexError>(op, ": ", arg, position(pos, dense_index.shape()), " = ",
                            index_value(dense_index, pos), " is out of range for ", range(),
                            " (expected 0 <= value < ", limit, ")");
}

// The `range` of check_index_values for an index along axis `ax` of x.
auto axis_of_x(std::int64_t ax, const Shape& shape) {
  return [ax, &shape] { return detail::str_cat("axis ", ax, " of x with shape ", shape); };
}

using ops::detail::alloc_output;

// ---------------------------------------------------------------- views

Shape reshape_target(const Shape& from, const Shape& to) {
  const std::int64_t numel = shape_numel(from, "reshape");
  Shape out = to;
  std::int64_t infer_at = -1;
  for (std::size_t i = 0; i < to.size(); ++i) {
    if (to[i] == -1) {
      MS_CHECK(infer_at < 0, ShapeError, "reshape: only one dim may be -1, shape ", to,
               " has several");
      infer_at = static_cast<std::int64_t>(i);
    } else {
      MS_CHECK(to[i] >= 0, ValueError, "reshape: shape ", to, " has a negative size ", to[i],
               " at axis ", i);
    }
  }
  Shape known = out;
  if (infer_at >= 0) known[u(infer_at)] = 1;
  const std::int64_t k = shape_numel(known, "reshape");
  if (infer_at >= 0) {
    MS_CHECK(k != 0 && numel % k == 0, ShapeError, "reshape: cannot reshape ", from, " (", numel,
             " elements) into ", to);
    out[u(infer_at)] = numel / k;
  } else {
    MS_CHECK(k == numel, ShapeError, "reshape: cannot reshape ", from, " (", numel,
             " elements) into ", to, " (", k, " elements)");
  }
  return out;
}

TypeList infer_reshape(Types in, const ops::Reshape::Attrs& a) {
  return {{in[0].dtype, reshape_target(in[0].shape, Shape(a.shape))}};
}

// The strides of `shape` viewing the elements of a tensor with (old_shape,
// old_strides) in the same order, or nothing when no view is possible (the
// algorithm of NumPy's _attempt_nocopy_reshape).
bool view_strides(const Shape& old_shape, std::span<const std::int64_t> old_strides,
                  const Shape& shape, DimVector& out) {
  out = DimVector(shape.size(), 0);
  DimVector od, os;  // (inline storage: a reshape allocates nothing here)
  for (std::size_t i = 0; i < old_shape.size(); ++i)
    if (old_shape[i] != 1) od.push_back(old_shape[i]), os.push_back(old_strides[i]);
  const std::size_t on = od.size(), nn = shape.size();
  std::size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < nn && oi < on) {
    std::int64_t np = shape[ni], op = od[oi];
    while (np != op) {
      if (np < op)
        np *= shape[nj++];
      else
        op *= od[oj++];
    }
    for (std::size_t k = oi; k + 1 < oj; ++k)
      if (os[k] != od[k + 1] * os[k + 1]) return false;
    out[nj - 1] = os[oj - 1];
    for (std::size_t k = nj - 1; k > ni; --k) out[k - 1] = out[k] * shape[k];
    ni = nj++;
    oi = oj++;
  }
  // Trailing size-1 dims of the new shape.
  std::int64_t last = ni > 0 ? out[ni - 1] : 1;
  for (std::size_t k = ni; k < nn; ++k) out[k] = last;
  return true;
}

// x viewed (or copied) as `shape`, already validated. An empty tensor is
// viewed directly: it has no element to reach, and the stride search does not
// handle zero-size dims. Packed Int4 is viewed only when contiguous.
Tensor reshape_to(const Tensor& x, const Shape& shape) {
  if (x.numel() == 0 || (x.dtype() == DType::Int4 && x.is_contiguous()))
    return Tensor(x.storage(), x.dtype(), shape, shape_contiguous_strides(shape, "reshape"),
                  x.offset());
  DimVector st;
  if (x.dtype() != DType::Int4 && view_strides(x.shape(), x.strides(), shape, st))
    return Tensor(x.storage(), x.dtype(), shape, std::move(st), x.offset());
  const Tensor dense = ::ms::detail::to_dense(x, x.dtype());
  return Tensor(dense.storage(), dense.dtype(), shape, shape_contiguous_strides(shape, "reshape"),
                dense.offset());
}

// x without the axes where `drop` is true (each of size 1): a view.
Tensor drop_axes(const Tensor& x, const std::vector<bool>& drop) {
  Dims d, st;
  for (std::size_t i = 0; i < x.shape().size(); ++i)
    if (!drop[i]) d.push_back(x.shape()[i]), st.push_back(x.strides()[i]);
  return Tensor(x.storage(), x.dtype(), Shape(std::move(d)), std::move(st), x.offset());
}

TensorList eval_reshape(Inputs in, const ops::Reshape::Attrs& a) {
  const TypeList t = infer_reshape(ops::types_of(in), a);
  return {reshape_to(in[0], t[0].shape)};
}

TypeList infer_transpose(Types in, const ops::Transpose::Attrs& a) {
  check_packed(in[0].dtype, "transpose", "x");
  const std::int64_t r = in[0].shape.rank();
  const std::int64_t a0 = axis_normalize(a.axis0, r, "transpose");
  const std::int64_t a1 = axis_normalize(a.axis1, r, "transpose");
  Shape out = in[0].shape;
  if (r > 0) std::swap(out[u(a0)], out[u(a1)]);
  return {{in[0].dtype, out}};
}

TensorList eval_transpose(Inputs in, const ops::Transpose::Attrs& a) {
  infer_transpose(ops::types_of(in), a);
  const std::int64_t r = in[0].rank();
  Dims axes(u(r));
  std::iota(axes.begin(), axes.end(), 0);
  if (r > 0)
    std::swap(axes[u(axis_normalize(a.axis0, r, "transpose"))],
              axes[u(axis_normalize(a.axis1, r, "transpose"))]);
  return {::ms::detail::permute_view(in[0], axes)};
}

TypeList infer_permute(Types in, const ops::Permute::Attrs& a) {
  check_packed(in[0].dtype, "permute", "x");
  const Shape& s = in[0].shape;
  const Dims axes = a.axes;
  MS_CHECK(static_cast<std::int64_t>(axes.size()) == s.rank(), ShapeError, "permute: ", axes.size(),
           " axes ", Shape(axes), " given for x of shape ", s, " (rank ", s.rank(), ")");
  std::vector<bool> seen(s.size(), false);
  Dims out(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto ax = u(axis_normalize(axes[i], s.rank(), "permute"));
    MS_CHECK(!seen[ax], ValueError, "permute: axis ", ax, " appears more than once in ",
             Shape(axes));
    seen[ax] = true;
    out[i] = s[ax];
  }
  return {{in[0].dtype, Shape(std::move(out))}};
}

TensorList eval_permute(Inputs in, const ops::Permute::Attrs& a) {
  infer_permute(ops::types_of(in), a);
  Dims axes = a.axes;
  for (std::int64_t& ax : axes) ax = axis_normalize(ax, in[0].rank(), "permute");
  return {::ms::detail::permute_view(in[0], axes)};
}

TypeList infer_squeeze(Types in, const ops::Squeeze::Attrs& a) {
  const Shape& s = in[0].shape;
  Dims out;
  if (a.axis) {
    const std::int64_t axis = *a.axis;
    const std::int64_t ax = axis_normalize(axis, s.rank(), "squeeze");
    out = s.to_vector();
    if (s.rank() > 0) {
      MS_CHECK(s[u(ax)] == 1, ShapeError, "squeeze: axis ", axis, " of shape ", s, " has size ",
               s[u(ax)], ", expected 1");
      out.erase(out.begin() + ax);
    }
  } else {
    for (std::int64_t d : s)
      if (d != 1) out.push_back(d);
  }
  return {{in[0].dtype, Shape(std::move(out))}};
}

TensorList eval_squeeze(Inputs in, const ops::Squeeze::Attrs& a) {
  infer_squeeze(ops::types_of(in), a);
  const Shape& s = in[0].shape();
  std::vector<bool> drop(s.size(), false);
  if (!a.axis)
    for (std::size_t i = 0; i < s.size(); ++i) drop[i] = s[i] == 1;
  else if (s.rank() > 0)
    drop[u(axis_normalize(*a.axis, s.rank(), "squeeze"))] = true;
  return {drop_axes(in[0], drop)};
}

TypeList infer_unsqueeze(Types in, const ops::Unsqueeze::Attrs& a) {
  const Shape& s = in[0].shape;
  const std::int64_t ax = axis_normalize(a.axis, s.rank() + 1, "unsqueeze");
  Dims out = s.to_vector();
  out.insert(out.begin() + ax, 1);
  return {{in[0].dtype, Shape(std::move(out))}};
}

TensorList eval_unsqueeze(Inputs in, const ops::Unsqueeze::Attrs& a) {
  infer_unsqueeze(ops::types_of(in), a);
  const Tensor& x = in[0];
  const auto ax = u(axis_normalize(a.axis, x.rank() + 1, "unsqueeze"));
  Dims d = x.shape().to_vector(), st(x.strides().begin(), x.strides().end());
  const std::int64_t inner = ax < st.size() ? st[ax] * std::max<std::int64_t>(d[ax], 1) : 1;
  d.insert(d.begin() + static_cast<std::ptrdiff_t>(ax), 1);
  st.insert(st.begin() + static_cast<std::ptrdiff_t>(ax), inner);
  return {Tensor(x.storage(), x.dtype(), Shape(std::move(d)), std::move(st), x.offset())};
}

TypeList infer_flatten(Types in, const ops::Flatten::Attrs& a) {
  const Shape& s = in[0].shape;
  shape_numel(s, "flatten");  // valid sizes: products of sub-ranges cannot overflow
  const std::int64_t r = s.rank();
  const std::int64_t start = axis_normalize(a.start, r, "flatten");
  const std::int64_t end = axis_normalize(a.end, r, "flatten");
  if (r == 0) return {{in[0].dtype, Shape{1}}};
  MS_CHECK(start <= end, ValueError, "flatten: start axis ", start, " is after end axis ", end,
           " (x of shape ", s, ")");
  Dims out(s.begin(), s.begin() + start);
  out.push_back(prod(s, u(start), u(end) + 1));
  out.insert(out.end(), s.begin() + end + 1, s.end());
  return {{in[0].dtype, Shape(std::move(out))}};
}

TensorList eval_flatten(Inputs in, const ops::Flatten::Attrs& a) {
  const TypeList t = infer_flatten(ops::types_of(in), a);
  return {reshape_to(in[0], t[0].shape)};
}

TypeList infer_broadcast_to(Types in, const ops::BroadcastTo::Attrs& a) {
  check_packed(in[0].dtype, "broadcast_to", "x");
  const Shape& s = in[0].shape;
  const Shape to(a.shape);
  MS_CHECK(to.size() >= s.size(), ShapeError, "broadcast_to: cannot broadcast shape ", s,
           " to the lower rank ", to);
  const std::size_t lead = to.size() - s.size();
  Dims out(to.size());
  for (std::size_t i = 0; i < to.size(); ++i) {
    const std::int64_t want = to[i];
    const std::int64_t have = i < lead ? 1 : s[i - lead];
    if (i >= lead && (want == -1 || want == have)) {
      out[i] = have;
      continue;
    }
    MS_CHECK(want >= 0, ValueError, "broadcast_to: shape ", to, " has the negative size ", want,
             " at axis ", i, i < lead ? " (-1 only keeps an existing dim)" : "");
    MS_CHECK(have == 1, ShapeError, "broadcast_to: cannot broadcast shape ", s, " to ", to,
             ": axis ", static_cast<std::int64_t>(i) - static_cast<std::int64_t>(to.size()),
             " has size ", have, " (only size-1 axes expand)");
    out[i] = want;
  }
  TensorType t{in[0].dtype, Shape(std::move(out))};
  shape_numel(t.shape, "broadcast_to");
  return {t};
}

TensorList eval_broadcast_to(Inputs in, const ops::BroadcastTo::Attrs& a) {
  const TypeList t = infer_broadcast_to(ops::types_of(in), a);
  return {::ms::detail::expand_view(in[0], t[0].shape)};
}

// ---------------------------------------------------------------- concat, stack

// PyTorch's legacy rule: 1-D empty tensors are skipped by cat.
bool concat_skipped(const TensorType& t) { return t.shape.size() == 1 && t.shape[0] == 0; }

DType promote_all(Types in, std::string_view op) {
  DType dt = in[0].dtype;
  for (std::size_t i = 0; i < in.size(); ++i) {
    check_packed(in[i].dtype, op, detail::str_cat("input ", i));
    dt = promote_types(dt, in[i].dtype);
  }
  return dt;
}

struct ConcatPlan {
  TensorType out;
  std::int64_t axis = 0;
};

ConcatPlan plan_concat(Types in, const ops::Concat::Attrs& a) {
  MS_CHECK(!in.empty(), ValueError, "concat: expected a non-empty list of tensors, got none");
  const std::int64_t axis = a.axis;
  const DType dt = promote_all(in, "concat");
  std::size_t first = 0;
  while (first < in.size() && concat_skipped(in[first])) ++first;
  if (first == in.size()) {  // all of shape [0]
    return {{dt, Shape{0}}, axis_normalize(axis, 1, "concat")};
  }
  const Shape& ref = in[first].shape;
  const std::int64_t r = ref.rank();
  MS_CHECK(r > 0, ShapeError, "concat: input ", first,
           " is a rank-0 tensor, which has no axis to concatenate along (use stack)");
  const std::int64_t ax = axis_normalize(axis, r, "concat");
  std::int64_t total = 0;
  for (std::size_t i = first; i < in.size(); ++i) {
    if (concat_skipped(in[i])) continue;
    const Shape& s = in[i].shape;
    MS_CHECK(s.rank() == r, ShapeError, "concat: input ", i, " has shape ", s, " of rank ",
             s.rank(), " but input ", first, " has shape ", ref, " of rank ", r);
    for (std::int64_t d = 0; d < r; ++d)
      MS_CHECK(d == ax || s[u(d)] == ref[u(d)], ShapeError, "concat: input ", i, " has shape ", s,
               " but input ", first, " has shape ", ref, ": axis ", d, " sizes differ (", s[u(d)],
               " vs ", ref[u(d)], "); only the concat axis ", ax, " may differ");
    MS_CHECK(!add_overflows(total, s[u(ax)], total), ValueError, "concat: the sizes along axis ",
             ax, " overflow int64");
  }
  Shape out = ref;
  out[u(ax)] = total;
  TensorType t{dt, std::move(out)};
  check_out_size(t, "concat");
  return {std::move(t), ax};
}

TypeList infer_concat(Types in, const ops::Concat::Attrs& a) { return {plan_concat(in, a).out}; }

// Copies each input (converted to out's dtype) as row blocks of the output:
// rows = prod(out.shape[:axis]); input i gives prod(its shape[axis:]) elements per row.
void copy_blocks(Inputs in, const std::vector<bool>& skip, std::int64_t block_axis,
                 const Tensor& out, std::int64_t rows) {
  std::vector<Tensor> dense;
  std::vector<const std::byte*> srcs;
  std::vector<std::int64_t> blocks;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (skip[i]) continue;
    dense.push_back(in[i].to(out.dtype()));
    const Shape& s = dense.back().shape();
    srcs.push_back(dense.back().raw_data());
    blocks.push_back(prod(s, u(block_axis), s.size()) * out.itemsize());
  }
  kernels::concat_rows(srcs, blocks, out.raw_data(), rows);
}

// The result as a view of the inputs' buffer when they are its adjacent
// pieces along `axis`, in order (one storage, one dtype, the same strides,
// each starting where the previous one ends), and that buffer is a value of
// the compiled graph running on this thread (Storage::from_thread_source):
// the gradients of q, k and v split out of one projection, which attention's
// backward writes into one buffer. A tensor made outside a compiled graph may
// be written in place later, so elsewhere concat copies, as PyTorch's cat.
std::optional<Tensor> concat_view(Inputs in, const std::vector<bool>& skip, std::int64_t axis,
                                  const TensorType& out) {
  const Tensor* first = nullptr;
  std::int64_t next = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (skip[i]) continue;
    const Tensor& t = in[i];
    if (t.dtype() != out.dtype || !t.storage()->from_thread_source()) return std::nullopt;
    if (first != nullptr && (t.storage() != first->storage() || t.offset() != next ||
                             !std::ranges::equal(t.strides(), first->strides())))
      return std::nullopt;
    if (first == nullptr) first = &t;
    next = t.offset() + t.shape()[u(axis)] * t.strides()[u(axis)];
  }
  if (first == nullptr) return std::nullopt;
  return Tensor(first->storage(), out.dtype, out.shape, DimVector(first->strides()),
                first->offset());
}

TensorList eval_concat(Inputs in, const ops::Concat::Attrs& a) {
  const TypeList types = ops::types_of(in);
  const ConcatPlan p = plan_concat(types, a);
  std::vector<bool> skip(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) skip[i] = concat_skipped(types[i]);
  if (std::optional<Tensor> v = concat_view(in, skip, p.axis, p.out)) return {*v};
  Tensor out = alloc_output(p.out, "concat");
  if (out.numel() == 0) return {out};
  copy_blocks(in, skip, p.axis, out, prod(out.shape(), 0, u(p.axis)));
  return {out};
}

struct StackPlan {
  TensorType out;
  std::int64_t axis = 0;
};

StackPlan plan_stack(Types in, const ops::Stack::Attrs& a) {
  MS_CHECK(!in.empty(), ValueError, "stack: expected a non-empty list of tensors, got none");
  const DType dt = promote_all(in, "stack");
  const Shape& ref = in[0].shape;
  for (std::size_t i = 1; i < in.size(); ++i) {
    const Shape& s = in[i].shape;
    if (s == ref) continue;
    MS_CHECK(s.rank() == ref.rank(), ShapeError, "stack: input ", i, " has shape ", s,
             " but input 0 has shape ", ref, "; stack needs equal shapes (ranks ", s.rank(),
             " and ", ref.rank(), " differ)");
    std::size_t d = 0;
    while (s[d] == ref[d]) ++d;
    detail::raise<ShapeError>("stack: input ", i, " has shape ", s, " but input 0 has shape ", ref,
                              "; stack needs equal shapes (axis ", d, ": ", s[d], " vs ", ref[d],
                              ")");
  }
  const std::int64_t ax = axis_normalize(a.axis, ref.rank() + 1, "stack");
  Dims out = ref.to_vector();
  out.insert(out.begin() + ax, static_cast<std::int64_t>(in.size()));
  TensorType t{dt, Shape(std::move(out))};
  check_out_size(t, "stack");
  return {std::move(t), ax};
}

TypeList infer_stack(Types in, const ops::Stack::Attrs& a) { return {plan_stack(in, a).out}; }

TensorList eval_stack(Inputs in, const ops::Stack::Attrs& a) {
  const StackPlan p = plan_stack(ops::types_of(in), a);
  Tensor out = alloc_output(p.out, "stack");
  if (out.numel() == 0) return {out};
  // Each input is one block per row of the output's leading axes [:axis].
  copy_blocks(in, std::vector<bool>(in.size(), false), p.axis, out,
              prod(out.shape(), 0, u(p.axis)));
  return {out};
}

// ---------------------------------------------------------------- split

struct SplitPlan {
  std::int64_t axis = 0;
  Dims sizes;
};

SplitPlan plan_split(const TensorType& x, const ops::Split::Attrs& a) {
  check_packed(x.dtype, "split", "x");
  const Shape& s = x.shape;
  MS_CHECK(s.rank() > 0, ShapeError, "split: x must have rank >= 1, got a rank-0 tensor");
  SplitPlan p;
  p.axis = axis_normalize(a.axis, s.rank(), "split");
  const std::int64_t n = s[u(p.axis)];
  MS_CHECK(a.sizes.has_value() != a.split_size.has_value(), ValueError,
           "split: give exactly one of the attributes 'sizes' and 'split_size'");
  if (a.sizes) {
    p.sizes = *a.sizes;
    MS_CHECK(!p.sizes.empty(), ValueError, "split: sizes is empty; give at least one size");
    MS_CHECK(static_cast<std::int64_t>(p.sizes.size()) <= kMaxSplitOutputs, ValueError,
             "split: ", p.sizes.size(), " sizes given, more than the limit of ", kMaxSplitOutputs,
             " outputs");
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < p.sizes.size(); ++i) {
      MS_CHECK(p.sizes[i] >= 0, ValueError, "split: sizes[", i, "] = ", p.sizes[i], " is negative");
      MS_CHECK(!add_overflows(sum, p.sizes[i], sum), ValueError, "split: sizes ", Shape(p.sizes),
               " overflow int64 when summed");
    }
    MS_CHECK(sum == n, ShapeError, "split: sizes ", Shape(p.sizes), " sum to ", sum, " but axis ",
             p.axis, " of x with shape ", s, " has size ", n);
    return p;
  }
  const std::int64_t size = *a.split_size;
  MS_CHECK(size >= 0, ValueError, "split: split_size must be >= 0, got ", size);
  MS_CHECK(size > 0 || n == 0, ValueError,
           "split: split_size 0 is only valid for an empty axis, but axis ", p.axis,
           " of x with shape ", s, " has size ", n);
  if (n == 0) {
    p.sizes = {0};
    return p;
  }
  const std::int64_t count = n / size + (n % size != 0 ? 1 : 0);
  MS_CHECK(count <= kMaxSplitOutputs, ValueError, "split: split_size ", size, " on axis ", p.axis,
           " of size ", n, " gives ", count, " outputs, more than the limit of ", kMaxSplitOutputs);
  p.sizes.assign(u(count), size);
  p.sizes.back() = n - size * (count - 1);
  return p;
}

TypeList infer_split(Types in, const ops::Split::Attrs& a) {
  const SplitPlan p = plan_split(in[0], a);
  TypeList out;
  out.reserve(p.sizes.size());
  for (std::int64_t sz : p.sizes) {
    Shape s = in[0].shape;
    s[u(p.axis)] = sz;
    out.push_back({in[0].dtype, std::move(s)});
  }
  return out;
}

TensorList eval_split(Inputs in, const ops::Split::Attrs& a) {
  const SplitPlan p = plan_split(ops::types_of(in)[0], a);
  TensorList out;
  out.reserve(p.sizes.size());
  std::int64_t off = 0;
  for (std::int64_t sz : p.sizes) {
    out.push_back(in[0].slice(p.axis, off, off + sz));
    off += sz;
  }
  return out;
}

// ---------------------------------------------------------------- gather, index_select

// ---------------------------------------------------------------- gather_grad, index_select_grad
//
// The gradients of gather and index_select: grad_out added into zeros of x's
// shape (the `input_size` attribute) at the indexed positions. Work items are
// (outer position, block of inner positions): each output element is written
// by one item, which adds its contributions in index order, so results do not
// depend on the thread count. Floating dtypes only (float16 and bfloat16 add
// in float32).

void check_grad_dtype(DType t, std::string_view op) {
  MS_CHECK(t == float16 || t == bfloat16 || t == float32 || t == float64, TypeError, op,
           ": grad_out dtype ", t,
           " is not supported (float16, bfloat16, float32, float64: gradients are floating)");
}

Shape input_size_attr(const ops::ScatterGradAttrs& a, std::string_view op) {
  const Shape s(a.input_size);
  for (std::int64_t d : s)
    MS_CHECK(d >= 0, ValueError, op, ": input_size ", s, " has a negative size ", d);
  return s;
}

// Offsets (row-major strides of `strides`) of every coordinate of dims [b, e) of `shape`.
std::vector<std::int64_t> coord_offsets(const Shape& shape, std::size_t b, std::size_t e,
                                        const std::vector<std::int64_t>& strides) {
  std::vector<std::int64_t> offs{0};
  for (std::size_t d = b; d < e; ++d) {
    std::vector<std::int64_t> next;
    next.reserve(offs.size() * u(shape[d]));
    for (std::int64_t base : offs)
      for (std::int64_t k = 0; k < shape[d]; ++k) next.push_back(base + k * strides[d]);
    offs = std::move(next);
  }
  return offs;
}

// out[outer_off[o] + index(o, k, i) * axis_stride + inner_off[i]] += g[(o * n + k) * inner + i]
// over o < outer, k < n, i < inner; index(o, k, i) is ip[(o * n + k) * inner + i], or ip[k]
// when `index_1d`. Parallel over (o, block of i), k in order inside.
template <class T>
void scatter_add(const T* g, const Tensor& index, bool index_1d, std::int64_t n,
                 const std::vector<std::int64_t>& outer_off,
                 const std::vector<std::int64_t>& inner_off, std::int64_t axis_stride, T* out) {
  const auto outer = static_cast<std::int64_t>(outer_off.size());
  const auto inner = static_cast<std::int64_t>(inner_off.size());
  if (outer == 0 || inner == 0 || n == 0) return;
  constexpr std::int64_t kBlock = 1024;
  const std::int64_t blocks = inner / kBlock + (inner % kBlock != 0);
  const std::int64_t per_item = n * std::min(inner, kBlock);
  const auto run = [&](const auto* ip) {
    kernels::parallel_for(
        outer * blocks, std::max<std::int64_t>(1, (std::int64_t{1} << 15) / per_item),
        [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t item = b; item < e; ++item) {
            const std::int64_t o = item / blocks, i0 = (item % blocks) * kBlock;
            const std::int64_t i1 = std::min(inner, i0 + kBlock);
            for (std::int64_t k = 0; k < n; ++k) {
              const std::int64_t row = (o * n + k) * inner;
              if (index_1d) {
                T* dst = out + outer_off[u(o)] + static_cast<std::int64_t>(ip[k]) * axis_stride;
                for (std::int64_t i = i0; i < i1; ++i) dst[inner_off[u(i)]] += g[row + i];
              } else {
                for (std::int64_t i = i0; i < i1; ++i)
                  out[outer_off[u(o)] + static_cast<std::int64_t>(ip[row + i]) * axis_stride +
                      inner_off[u(i)]] += g[row + i];
              }
            }
          }
        });
  };
  if (index.dtype() == int32)
    run(index.data<std::int32_t>());
  else
    run(index.data<std::int64_t>());
}

// Zeros of type `t` with grad_out (of index's layout) scatter-added along `ax`.
Tensor scatter_grad(const TensorType& t, const Tensor& grad_out, const Tensor& index,
                    std::int64_t ax, bool index_1d) {
  const DType ct = t.dtype == float64 ? float64 : float32;
  const Tensor g = grad_out.to(ct);  // dense
  Tensor out = zeros(t.shape, ct);
  if (t.shape.rank() == 0) {  // gather of a scalar: index 0, one element
    if (ct == float64)
      out.data<double>()[0] = g.data<double>()[0];
    else
      out.data<float>()[0] = g.data<float>()[0];
  } else if (out.numel() > 0) {
    const Shape& gs = g.shape();
    const std::vector<std::int64_t> strides = shape_contiguous_strides(t.shape).to_vector();
    const std::vector<std::int64_t> outer_off = coord_offsets(gs, 0, u(ax), strides);
    const std::vector<std::int64_t> inner_off = coord_offsets(gs, u(ax) + 1, gs.size(), strides);
    if (ct == float64)
      scatter_add(g.data<double>(), index, index_1d, gs[u(ax)], outer_off, inner_off,
                  strides[u(ax)], out.data<double>());
    else
      scatter_add(g.data<float>(), index, index_1d, gs[u(ax)], outer_off, inner_off, strides[u(ax)],
                  out.data<float>());
  }
  if (ct != t.dtype) out = out.to(t.dtype);
  return out;
}

// ---------------------------------------------------------------- one_hot

TypeList infer_one_hot(Types in, const ops::OneHot::Attrs& a) {
  check_index_dtype(in[0].dtype, "one_hot", "indices");
  const std::int64_t classes = a.num_classes;
  const DType dt = a.dtype;
  MS_CHECK(dt != DType::Int4, TypeError,
           "one_hot: dtype Int4 is packed (storage and cast only); use Int8 and cast");
  MS_CHECK(classes >= 0, ValueError,
           "one_hot: num_classes must be >= 0 (or -1 to infer it from the data), got ", classes);
  Shape out = in[0].shape;
  out.push_back(classes);
  TensorType t{dt, std::move(out)};
  check_out_size(t, "one_hot");
  return {t};
}

TensorList eval_one_hot(Inputs in, const ops::OneHot::Attrs& a) {
  const TypeList t = infer_one_hot(ops::types_of(in), a);
  Tensor out = alloc_output(t[0], "one_hot");
  const Tensor index = in[0].contiguous();
  const std::int64_t classes = t[0].shape.dims().back();
  // Before the empty-output return: with num_classes 0 every index is out of
  // range (PyTorch: "Class values must be smaller than num_classes").
  check_index_values(index, classes, "one_hot", "indices",
                     [&] { return detail::str_cat("num_classes ", classes); });
  if (out.numel() == 0) return {out};
  kernels::one_hot(index, out);
  return {out};
}

// ---------------------------------------------------------------- pad

struct PadPlan {
  TensorType out;
  kernels::PadMode mode = kernels::PadMode::Constant;
  Dims before;  // per axis
  double value = 0;
};

// A fill value (pad's constant, masked_fill's value) for an integer dtype
// must survive the cast (no UB, no wrap).
void check_fill_value(double v, DType dt, std::string_view op) {
  if (!dtype_is_int(dt)) return;
  dtype_dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      constexpr int bits = static_cast<int>(sizeof(T) * 8);
      const double lo = std::is_signed_v<T> ? -std::ldexp(1.0, bits - 1) : 0.0;
      const double hi = std::ldexp(1.0, std::is_signed_v<T> ? bits - 1 : bits);
      const double t = std::trunc(v);
      MS_CHECK(std::isfinite(v) && t >= lo && t < hi, ValueError, op, ": value ", v,
               " does not fit dtype ", dt, " of x");
    }
  });
}

PadPlan plan_pad(const TensorType& x, const ops::Pad::Attrs& a) {
  check_packed(x.dtype, "pad", "x");
  const Shape& s = x.shape;
  const std::int64_t r = s.rank();
  const Dims pads = a.pads;
  const std::string mode = a.mode;
  PadPlan p;
  p.value = a.value;
  MS_CHECK(pads.size() % 2 == 0, ValueError,
           "pad: pads must be (left, right) pairs, got an odd number of values ", Shape(pads));
  const auto pairs = static_cast<std::int64_t>(pads.size() / 2);
  MS_CHECK(pairs <= r, ValueError, "pad: pads ", Shape(pads), " has ", pairs,
           " (left, right) pairs but x of shape ", s, " has only ", r, " axes");
  if (mode == "constant")
    p.mode = kernels::PadMode::Constant;
  else if (mode == "reflect")
    p.mode = kernels::PadMode::Reflect;
  else if (mode == "replicate")
    p.mode = kernels::PadMode::Replicate;
  else
    detail::raise<ValueError>(
        "pad: mode must be \"constant\", \"reflect\" or \"replicate\", got \"", mode, "\"");
  if (p.mode == kernels::PadMode::Constant) check_fill_value(p.value, x.dtype, "pad");
  p.before.assign(u(r), 0);
  Shape out = s;
  for (std::int64_t k = 0; k < pairs; ++k) {
    const std::int64_t d = r - 1 - k, l = pads[u(2 * k)], rt = pads[u(2 * k + 1)];
    const std::int64_t n = s[u(d)], axis = d - r;
    MS_CHECK(l >= -n && rt >= -n, ValueError, "pad: pads (", l, ", ", rt, ") on axis ", axis,
             " of size ", n, " crop more than the axis holds");
    std::int64_t size = 0;
    MS_CHECK(!add_overflows(n, l, size) && !add_overflows(size, rt, size), ValueError, "pad: axis ",
             axis, " of size ", n, " with pads (", l, ", ", rt, ") overflows int64");
    MS_CHECK(size >= 0, ValueError, "pad: axis ", axis, " of size ", n, " with pads (", l, ", ", rt,
             ") gives the negative size ", size);
    if (p.mode == kernels::PadMode::Reflect)
      MS_CHECK((l <= 0 || l < n) && (rt <= 0 || rt < n), ValueError, "pad: reflect pads (", l, ", ",
               rt, ") on axis ", axis, " must be smaller than its size ", n);
    if (p.mode == kernels::PadMode::Replicate)
      MS_CHECK(n > 0 || (l <= 0 && rt <= 0), ValueError, "pad: replicate pads (", l, ", ", rt,
               ") on axis ", axis, " of size 0: there is no edge to repeat");
    out[u(d)] = size;
    p.before[u(d)] = l;
  }
  p.out = {x.dtype, std::move(out)};
  check_out_size(p.out, "pad");
  return p;
}

TypeList infer_pad(Types in, const ops::Pad::Attrs& a) { return {plan_pad(in[0], a).out}; }

TensorList eval_pad(Inputs in, const ops::Pad::Attrs& a) {
  const PadPlan p = plan_pad(ops::types_of(in)[0], a);
  Tensor out = alloc_output(p.out, "pad");
  const Tensor fill = full({}, Scalar(p.value), p.out.dtype);
  kernels::pad(in[0], p.before, p.mode, fill, out);
  return {out};
}

// ---------------------------------------------------------------- cast

TypeList infer_cast(Types in, const ops::Cast::Attrs& a) {
  TensorType t{a.dtype, in[0].shape};
  check_out_size(t, "cast");
  return {t};
}

TensorList eval_cast(Inputs in, const ops::Cast::Attrs& a) {
  const TypeList t = infer_cast(ops::types_of(in), a);
  if (in[0].dtype() == t[0].dtype && in[0].is_contiguous()) return {in[0]};
  Tensor out = alloc_output(t[0], "cast");
  kernels::cast(in[0], out);
  return {out};
}

}  // namespace

// ---------------------------------------------------------------- indexing entries

namespace ops {

TypeList Gather::infer(const Attrs& a, Types in) {
  const TensorType &x = in[0], &index = in[1];
  check_packed(x.dtype, "gather", "x");
  check_index_dtype(index.dtype, "gather", "index");
  check_index_shape(index.shape, x.shape, a.axis, "gather", "x of shape", "gather");
  TensorType t{x.dtype, index.shape};
  check_out_size(t, "gather");
  return {t};
}

void Gather::run(const Attrs& a, Inputs in, Inputs out) {
  const Tensor &x = in[0], index = in[1].contiguous();
  const std::int64_t r = x.rank();
  const std::int64_t ax = axis_normalize(a.axis, r, "gather");
  const std::int64_t limit = r == 0 ? 1 : x.shape()[u(ax)];
  check_index_values(index, limit, "gather", "index", axis_of_x(ax, x.shape()));
  kernels::gather(x, ax, index, out[0]);
}

TypeList IndexSelect::infer(const Attrs& a, Types in) {
  const TensorType &x = in[0], &index = in[1];
  check_packed(x.dtype, "index_select", "x");
  check_index_dtype(index.dtype, "index_select", "index");
  MS_CHECK(x.shape.rank() > 0, ShapeError,
           "index_select: x must have rank >= 1, got a rank-0 tensor");
  MS_CHECK(index.shape.rank() == 1, ShapeError, "index_select: index must be 1-D, got shape ",
           index.shape);
  const std::int64_t ax = axis_normalize(a.axis, x.shape.rank(), "index_select");
  Shape out = x.shape;
  out[u(ax)] = index.shape[0];
  TensorType t{x.dtype, std::move(out)};
  check_out_size(t, "index_select");
  return {t};
}

void IndexSelect::run(const Attrs& a, Inputs in, Inputs out) {
  const Tensor &x = in[0], index = in[1].contiguous();
  const std::int64_t ax = axis_normalize(a.axis, x.rank(), "index_select");
  check_index_values(index, x.shape()[u(ax)], "index_select", "index", axis_of_x(ax, x.shape()));
  kernels::index_select(x, ax, index, out[0]);
}

TypeList IndexCopy::infer(const Attrs& a, Types in) {
  constexpr std::string_view op = "index_copy";
  const TensorType &x = in[0], &index = in[1], &src = in[2];
  check_packed(x.dtype, op, "x");
  check_index_dtype(index.dtype, op, "index");
  MS_CHECK(src.dtype == x.dtype, TypeError, "index_copy: source must have x's dtype ", x.dtype,
           ", got ", src.dtype);
  MS_CHECK(x.shape.rank() > 0, ShapeError,
           "index_copy: x must have rank >= 1, got a rank-0 tensor");
  MS_CHECK(index.shape.rank() == 1, ShapeError, "index_copy: index must be 1-D, got shape ",
           index.shape);
  const std::int64_t ax = axis_normalize(a.axis, x.shape.rank(), op);
  Shape want = x.shape;
  want[u(ax)] = index.shape[0];
  MS_CHECK(src.shape == want, ShapeError, "index_copy: source must have shape ", want, " (x ",
           x.shape, " with index's length on axis ", ax, "), got ", src.shape);
  TensorType t{x.dtype, x.shape};
  check_out_size(t, op);
  return {t};
}

namespace {

// The index values of index_copy (checked in range and distinct).
template <class Range>
std::vector<std::int64_t> copy_positions(const Tensor& index, std::int64_t limit,
                                         const Range& range) {
  check_index_values(index, limit, "index_copy", "index", range);
  const Tensor i64 = index.dtype() == int64 ? index : index.to(int64).contiguous();
  const std::int64_t* p = i64.data<std::int64_t>();
  const std::vector<std::int64_t> pos(p, p + i64.numel());
  std::vector<std::int64_t> sorted = pos;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  MS_CHECK(dup == sorted.end(), ValueError, "index_copy: index must hold distinct positions, got ",
           dup == sorted.end() ? 0 : *dup, " twice");
  return pos;
}

}  // namespace

namespace {

// Writes the slices of `src` (contiguous) at positions `pos` along `ax` of
// `out` (contiguous, x's shape).
void copy_slices(const Tensor& out, std::int64_t ax, const std::vector<std::int64_t>& pos,
                 const Tensor& src) {
  // Row-major: `outer` blocks of [len, inner] in out and of [n, inner] in source.
  const auto n = static_cast<std::int64_t>(pos.size());
  const std::int64_t len = out.shape()[u(ax)];
  std::int64_t outer = 1, inner = out.itemsize();
  for (std::int64_t d = 0; d < ax; ++d) outer *= out.shape()[u(d)];
  for (std::int64_t d = ax + 1; d < out.rank(); ++d) inner *= out.shape()[u(d)];
  std::byte* o = out.raw_data();
  const std::byte* s = src.raw_data();
  for (std::int64_t b = 0; b < outer; ++b)
    for (std::int64_t i = 0; i < n; ++i)
      std::memcpy(o + (b * len + pos[u(i)]) * inner, s + (b * n + i) * inner, u(inner));
}

// index_copy's slices written into `out` (x itself, or a copy of it).
void index_copy_into(Tensor out, const IndexCopy::Attrs& a, Inputs in) {
  const Tensor &x = in[0], index = in[1].contiguous(), src = in[2].contiguous();
  const std::int64_t ax = axis_normalize(a.axis, x.rank(), "index_copy");
  const std::vector<std::int64_t> pos =
      copy_positions(index, x.shape()[u(ax)], axis_of_x(ax, x.shape()));
  if (!out.is_same(x)) out.copy_(x);
  copy_slices(out, ax, pos, src);
}

}  // namespace

void IndexCopy::run(const Attrs& a, Inputs in, Inputs out) { index_copy_into(out[0], a, in); }

void IndexCopy::update(const Attrs& a, Inputs in) {
  MS_CHECK(in[0].is_contiguous(), ValueError,
           "index_copy: an in-place update needs a contiguous x, got a strided view of shape ",
           in[0].shape());
  index_copy_into(in[0], a, in);
}

TypeList Scatter::infer(const Attrs& a, Types in) {
  constexpr std::string_view op = "scatter";
  const TensorType &x = in[0], &index = in[1], &src = in[2];
  check_packed(x.dtype, op, "x");
  check_index_dtype(index.dtype, op, "index");
  MS_CHECK(src.dtype == x.dtype, TypeError, "scatter: src must have x's dtype ", x.dtype, ", got ",
           src.dtype);
  check_index_shape(index.shape, x.shape, a.axis, op, "x of shape", "scatter");
  MS_CHECK(src.shape == index.shape, ShapeError, "scatter: src must have index's shape ",
           index.shape, ", got ", src.shape);
  TensorType t{x.dtype, x.shape};
  check_out_size(t, op);
  return {t};
}

void Scatter::run(const Attrs& a, Inputs in, Inputs out) {
  const Tensor &x = in[0], index = in[1].contiguous(), src = in[2].contiguous();
  const std::int64_t r = x.rank();
  const std::int64_t ax = axis_normalize(a.axis, r, "scatter");
  check_index_values(index, r == 0 ? 1 : x.shape()[u(ax)], "scatter", "index",
                     axis_of_x(ax, x.shape()));
  Tensor y = out[0];
  y.copy_(x);
  const std::int64_t repeated = kernels::scatter(y, ax, index, src);
  MS_CHECK(repeated < 0, ValueError, "scatter: index", position(repeated, index.shape()), " = ",
           index_value(index, repeated),
           " sends a second element of src to a position already written (positions must be "
           "distinct)");
}

TypeList GatherGrad::infer(const Attrs& a, Types in) {
  constexpr std::string_view op = "gather_grad";
  const TensorType &g = in[0], &index = in[1];
  check_grad_dtype(g.dtype, op);
  check_index_dtype(index.dtype, op, "index");
  const Shape xs = input_size_attr(a, op);
  MS_CHECK(g.shape == index.shape, ShapeError, "gather_grad: grad_out of shape ", g.shape,
           " must have index's shape ", index.shape);
  check_index_shape(index.shape, xs, a.axis, op, "input_size", "gather");
  TensorType t{g.dtype, xs};
  check_out_size(t, op);
  return {t};
}

TensorList GatherGrad::eval(const Attrs& a, Inputs in) {
  const TypeList t = infer(a, types_of(in));
  const Tensor index = in[1].contiguous();
  const Shape& xs = t[0].shape;
  const std::int64_t r = xs.rank();
  const std::int64_t ax = axis_normalize(a.axis, r, "gather_grad");
  check_index_values(index, r == 0 ? 1 : xs[u(ax)], "gather_grad", "index",
                     [&] { return ::ms::detail::str_cat("axis ", ax, " of input_size ", xs); });
  return {scatter_grad(t[0], in[0], index, ax, false)};
}

TypeList IndexSelectGrad::infer(const Attrs& a, Types in) {
  constexpr std::string_view op = "index_select_grad";
  const TensorType &g = in[0], &index = in[1];
  check_grad_dtype(g.dtype, op);
  check_index_dtype(index.dtype, op, "index");
  const Shape xs = input_size_attr(a, op);
  MS_CHECK(xs.rank() > 0, ShapeError, "index_select_grad: input_size must have rank >= 1, got []");
  MS_CHECK(index.shape.rank() == 1, ShapeError, "index_select_grad: index must be 1-D, got shape ",
           index.shape);
  const std::int64_t ax = axis_normalize(a.axis, xs.rank(), op);
  Shape want = xs;
  want[u(ax)] = index.shape[0];
  MS_CHECK(g.shape == want, ShapeError, "index_select_grad: grad_out of shape ", g.shape,
           " must have the index_select output shape ", want, " (input_size ", xs, ", index ",
           index.shape, ", axis ", ax, ")");
  TensorType t{g.dtype, xs};
  check_out_size(t, op);
  return {t};
}

TensorList IndexSelectGrad::eval(const Attrs& a, Inputs in) {
  const TypeList t = infer(a, types_of(in));
  const Tensor index = in[1].contiguous();
  const Shape& xs = t[0].shape;
  const std::int64_t ax = axis_normalize(a.axis, xs.rank(), "index_select_grad");
  check_index_values(index, xs[u(ax)], "index_select_grad", "index",
                     [&] { return ::ms::detail::str_cat("axis ", ax, " of input_size ", xs); });
  return {scatter_grad(t[0], in[0], index, ax, true)};
}

// Gradients: scatter-add into zeros of the input's shape (the index gets none);
// the scatter-adds' adjoints gather.

TensorList Gather::vjp(const Attrs& a, const GradContext& c) {
  return {gather_grad(c.out_grads[0], a.axis, c.inputs[1], c.inputs[0].shape()), Tensor()};
}
TensorList IndexSelect::vjp(const Attrs& a, const GradContext& c) {
  return {index_select_grad(c.out_grads[0], a.axis, c.inputs[1], c.inputs[0].shape()), Tensor()};
}
TensorList IndexCopy::vjp(const Attrs& a, const GradContext& c) {
  const Tensor& g = c.out_grads[0];
  const Tensor& index = c.inputs[1];
  return {index_copy(g, a.axis, index, zeros_like(c.inputs[2])), Tensor(),
          index_select(g, a.axis, index)};
}
TensorList Scatter::vjp(const Attrs& a, const GradContext& c) {
  const Tensor& g = c.out_grads[0];
  const Tensor& index = c.inputs[1];
  return {scatter(g, a.axis, index, zeros_like(c.inputs[2])), Tensor(), gather(g, a.axis, index)};
}
TensorList GatherGrad::vjp(const Attrs& a, const GradContext& c) {
  return {gather(c.out_grads[0], a.axis, c.inputs[1]), Tensor()};
}
TensorList IndexSelectGrad::vjp(const Attrs& a, const GradContext& c) {
  return {index_select(c.out_grads[0], a.axis, c.inputs[1]), Tensor()};
}

using detail::sample_345;
using detail::sample_tensor;

Samples Gather::samples() {
  const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}});
  return {
      .cases = {{"torch's example, axis 1",
                 {x, tensor({{0, 0}, {1, 0}})},
                 attrs_to(Attrs{.axis = 1}),
                 {tensor({{1.0, 1.0}, {4.0, 3.0}})}},
                {"axis 1, repeated indices",
                 {sample_tensor({3, 5}, 54), tensor({{0, 0, 4, 2}, {1, 3, 3, 3}, {4, 0, 1, 2}})},
                 attrs_to(Attrs{.axis = 1}),
                 {},
                 0,
                 {0}},
                {"axis 0, int32 index smaller than x on the other axis",
                 {sample_tensor({3, 4}, 55),
                  tensor({{2, 0}, {2, 1}, {0, 0}, {1, 2}, {2, 2}}, int32)},
                 attrs_to(Attrs{.axis = 0}),
                 {},
                 0,
                 {0}},
                {"axis -1, int64 data",
                 {sample_tensor({2, 3}, 56, -9, 9, int64), tensor({{2, 2, 0, 1}, {0, 1, 1, 2}})},
                 attrs_to(Attrs{.axis = -1})},
                {"bool data",
                 {sample_tensor({2, 3}, 57, -1, 1, int8).to(bool_),
                  from_vector(std::vector<std::int64_t>{1, 2}, {2, 1})},
                 attrs_to(Attrs{.axis = 1})},
                {"rank 0", {tensor(7.0), tensor(0)}, {}, {tensor(7.0)}}},
      .errors = {{"float index",
                  {x, zeros({2, 2})},
                  {},
                  "ms::TypeError",
                  "gather: index must have dtype Int32 or Int64, got Float32"},
                 {"ranks differ",
                  {x, zeros({2}, int64)},
                  {},
                  "ms::ShapeError",
                  "index of shape [2] has rank 1 but x of shape [2, 2] has rank 2"},
                 {"axis out of range",
                  {x, zeros({2, 2}, int64)},
                  attrs_to(Attrs{.axis = 2}),
                  "ms::IndexError",
                  "gather: axis"},
                 {"index value out of range",
                  {x, tensor({{0, 1}, {-1, 0}})},
                  attrs_to(Attrs{.axis = 1}),
                  "ms::IndexError",
                  "gather: index[1, 0] = -1 is out of range"}}};
}

Samples IndexCopy::samples() {
  return {.cases = {{"rows 2 and 0",
                     {tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}), tensor({2, 0}),
                      tensor({{7.0, 8.0}, {9.0, 10.0}})},
                     {},
                     {tensor({{9.0, 10.0}, {3.0, 4.0}, {7.0, 8.0}})}},
                    {"a cache slot: axis 2 of [1, 2, 5, 3], int32 index",
                     {sample_tensor({1, 2, 5, 3}, 62), tensor({3}, int32),
                      sample_tensor({1, 2, 1, 3}, 63)},
                     attrs_to(Attrs{.axis = 2}),
                     {},
                     0,
                     {0, 2}},
                    {"axis -1",
                     {sample_tensor({2, 4}, 64), tensor({3, 1}), sample_tensor({2, 2}, 65)},
                     attrs_to(Attrs{.axis = -1}),
                     {},
                     0,
                     {0, 2}}},
          .errors = {{"repeated index",
                      {zeros({3, 2}), tensor({1, 1}), zeros({2, 2})},
                      {},
                      "ms::ValueError",
                      "index_copy: index must hold distinct positions, got 1 twice"},
                     {"source of the wrong shape",
                      {zeros({3, 2}), tensor({1}), zeros({2, 2})},
                      {},
                      "ms::ShapeError",
                      "index_copy: source must have shape [1, 2]"},
                     {"source of another dtype",
                      {zeros({3, 2}), tensor({1}), zeros({1, 2}, float64)},
                      {},
                      "ms::TypeError",
                      "index_copy: source must have x's dtype"},
                     {"index value out of range",
                      {zeros({3, 2}), tensor({3}), zeros({1, 2})},
                      {},
                      "ms::IndexError",
                      "is out of range"}}};
}

Samples Scatter::samples() {
  return {
      .cases = {{"two per row, axis 1",
                 {zeros({2, 3}), tensor({{2, 1}, {0, 2}}), tensor({{1.0, 3.0}, {2.0, 4.0}})},
                 attrs_to(Attrs{.axis = 1}),
                 {tensor({{0.0, 3.0, 1.0}, {2.0, 0.0, 4.0}})}},
                {"axis 0, a permutation of rows in each column",
                 {sample_tensor({3, 4}, 66), tensor({{2, 0, 1, 2}, {0, 2, 0, 1}}),
                  sample_tensor({2, 4}, 67)},
                 {},
                 {},
                 0,
                 {0, 2}},
                {"axis -1 of [2, 3, 4], int32 index smaller than x on axis 1",
                 {sample_tensor({2, 3, 4}, 68),
                  from_vector(std::vector<std::int32_t>{3, 0, 1, 2, 0, 1, 2, 3}, Shape{2, 2, 2}),
                  sample_tensor({2, 2, 2}, 69)},
                 attrs_to(Attrs{.axis = -1}),
                 {},
                 0,
                 {0, 2}},
                {"int64 elements (any dtype)",
                 {tensor({10, 20, 30}), tensor({1}), tensor({7})},
                 {},
                 {tensor({10, 7, 30})}}},
      .errors = {{"two elements to one position",
                  {zeros({3, 2}), tensor({{1, 0}, {1, 1}}), zeros({2, 2})},
                  {},
                  "ms::ValueError",
                  "scatter: index[1, 0] = 1 sends a second element of src to a position "
                  "already written"},
                 {"src of another shape",
                  {zeros({3, 2}), tensor({{1, 0}}), zeros({2, 2})},
                  {},
                  "ms::ShapeError",
                  "scatter: src must have index's shape [1, 2], got [2, 2]"},
                 {"src of another dtype",
                  {zeros({3, 2}), tensor({{1, 0}}), zeros({1, 2}, float64)},
                  {},
                  "ms::TypeError",
                  "scatter: src must have x's dtype"},
                 {"index of another rank",
                  {zeros({3, 2}), tensor({1}), zeros({1})},
                  {},
                  "ms::ShapeError",
                  "scatter: index of shape [1] has rank 1 but x of shape [3, 2] has rank 2"},
                 {"index value out of range",
                  {zeros({3, 2}), tensor({{3, 0}}), zeros({1, 2})},
                  {},
                  "ms::IndexError",
                  "scatter: index[0, 0] = 3 is out of range"},
                 {"a floating index",
                  {zeros({3, 2}), tensor({{1.0, 0.0}}), zeros({1, 2})},
                  {},
                  "ms::TypeError",
                  "scatter: index must have dtype Int32 or Int64, got Float32"},
                 {"index larger than x on another axis",
                  {zeros({3, 2}), tensor({{1, 0, 2}}), zeros({1, 3})},
                  {},
                  "ms::ShapeError",
                  "scatter: index of shape [1, 3] is larger than x of shape [3, 2] on axis 1"}}};
}

Samples IndexSelect::samples() {
  return {
      .cases =
          {{"rows 1, 1, 0",
            {tensor({{1.0, 2.0}, {3.0, 4.0}}), tensor({1, 1, 0})},
            {},
            {tensor({{3.0, 4.0}, {3.0, 4.0}, {1.0, 2.0}})}},
           {"axis 0, repeated", {sample_tensor({5, 3}, 60), tensor({4, 0, 4, 2})}, {}, {}, 0, {0}},
           {"axis -1, int32 index",
            {sample_tensor({2, 3, 4}, 61), tensor({3, 0, 3}, int32)},
            attrs_to(Attrs{.axis = -1}),
            {},
            0,
            {0}}},
      .errors = {{"2-D index",
                  {zeros({3, 4}), zeros({2, 2}, int64)},
                  {},
                  "ms::ShapeError",
                  "index_select: index must be 1-D, got shape [2, 2]"},
                 {"index value out of range",
                  {zeros({3, 4}), tensor({0, 3})},
                  {},
                  "ms::IndexError",
                  "is out of range"}}};
}

Samples GatherGrad::samples() {
  const Attrs a{.axis = 1, .input_size = {2, 2}};
  return {
      .cases = {{"repeated indices add up",
                 {tensor({{1.0, 2.0}, {3.0, 4.0}}), tensor({{0, 0}, {1, 0}})},
                 attrs_to(a),
                 {tensor({{3.0, 0.0}, {4.0, 3.0}})}},
                {"axis 1",
                 {sample_tensor({3, 4}, 62), tensor({{0, 0, 4, 2}, {1, 3, 3, 3}, {4, 0, 1, 2}})},
                 attrs_to(Attrs{.axis = 1, .input_size = {3, 5}}),
                 {},
                 0,
                 {0}},
                {"axis 0, int32 index",
                 {sample_tensor({5, 2}, 63),
                  tensor({{2, 0}, {2, 1}, {0, 0}, {1, 2}, {2, 2}}, int32)},
                 attrs_to(Attrs{.axis = 0, .input_size = {3, 4}}),
                 {},
                 0,
                 {0}}},
      .errors = {{"integer grad_out",
                  {zeros({2, 2}, int64), zeros({2, 2}, int64)},
                  attrs_to(a),
                  "ms::TypeError",
                  "gather_grad: grad_out dtype Int64 is not supported"},
                 {"negative input_size",
                  {zeros({2, 2}), zeros({2, 2}, int64)},
                  attrs_to(Attrs{.axis = 1, .input_size = {2, -2}}),
                  "ms::ValueError",
                  "gather_grad: input_size [2, -2] has a negative size -2"}}};
}

Samples IndexSelectGrad::samples() {
  return {.cases = {{"rows 1, 1, 0",
                     {tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}), tensor({1, 1, 0})},
                     attrs_to(Attrs{.axis = 0, .input_size = {2, 2}}),
                     {tensor({{5.0, 6.0}, {4.0, 6.0}})}},
                    {"axis -1, int32 index",
                     {sample_tensor({2, 3, 3}, 64), tensor({3, 0, 3}, int32)},
                     attrs_to(Attrs{.axis = -1, .input_size = {2, 3, 4}}),
                     {},
                     0,
                     {0}}},
          .errors = {{"grad_out of another shape",
                      {zeros({2, 2}), tensor({1, 1, 0})},
                      attrs_to(Attrs{.axis = 0, .input_size = {2, 2}}),
                      "ms::ShapeError",
                      "must have the index_select output shape [3, 2]"}}};
}

// ---------------------------------------------------------------- cumsum

TypeList Cumsum::infer(const Attrs& a, Types in) {
  const TensorType& x = in[0];
  MS_CHECK(x.dtype != bool_ && !dtype_is_complex(x.dtype) && x.dtype != DType::Int4, TypeError,
           "cumsum: x has dtype ", x.dtype,
           ", expected a real number dtype (cast bool to an integer dtype first)");
  axis_normalize(a.axis, x.shape.rank(), "cumsum");
  return {x};
}

void Cumsum::run(const Attrs& a, Inputs in, Inputs out) {
  const std::int64_t ax = axis_normalize(a.axis, in[0].rank(), "cumsum");
  kernels::cumsum(in[0].contiguous(), ax, a.exclusive, a.reverse, out[0]);
}

// Each input element adds to the outputs after it (before it, reversed):
// its gradient sums the output gradients the other way.
TensorList Cumsum::vjp(const Attrs& a, const GradContext& c) {
  return {
      cumsum(c.out_grads[0], {.axis = a.axis, .exclusive = a.exclusive, .reverse = !a.reverse})};
}

Samples Cumsum::samples() {
  const Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  return {
      .cases = {{"axis 0", {x}, {}, {tensor({{1.0, 2.0, 3.0}, {5.0, 7.0, 9.0}})}},
                {"axis 1",
                 {x},
                 attrs_to(Attrs{.axis = 1}),
                 {tensor({{1.0, 3.0, 6.0}, {4.0, 9.0, 15.0}})}},
                {"axis -1, exclusive",
                 {x},
                 attrs_to(Attrs{.axis = -1, .exclusive = true}),
                 {tensor({{0.0, 1.0, 3.0}, {0.0, 4.0, 9.0}})}},
                {"axis 1, reverse",
                 {x},
                 attrs_to(Attrs{.axis = 1, .reverse = true}),
                 {tensor({{6.0, 5.0, 3.0}, {15.0, 11.0, 6.0}})}},
                {"int32, exclusive and reverse",
                 {tensor({1, 2, 3}, int32)},
                 attrs_to(Attrs{.exclusive = true, .reverse = true}),
                 {tensor({5, 3, 0}, int32)}},
                {"int64 wraps around",
                 {tensor({std::int64_t{9223372036854775807}, std::int64_t{1}})},
                 {},
                 {tensor({std::int64_t{9223372036854775807},
                          std::numeric_limits<std::int64_t>::min()})}},
                {"rank 0", {tensor(2.5)}, {}, {tensor(2.5)}},
                {"gradient, axis 1 of [3, 300] (more than one block of lines)",
                 {sample_tensor({3, 300}, 70)},
                 attrs_to(Attrs{.axis = 1}),
                 {},
                 0,
                 {0}},
                {"gradient, axis 0 of [4, 2, 3], exclusive, reverse",
                 {sample_tensor({4, 2, 3}, 71)},
                 attrs_to(Attrs{.exclusive = true, .reverse = true}),
                 {},
                 0,
                 {0}},
                {"gradient, float32 axis 2",
                 {sample_tensor({2, 3, 5}, 72)},
                 attrs_to(Attrs{.axis = 2}),
                 {},
                 0,
                 {0}}},
      .errors = {{"bool", {tensor({true, false})}, {}, "ms::TypeError", "cumsum: x has dtype Bool"},
                 {"complex",
                  {zeros({2}, complex64)},
                  {},
                  "ms::TypeError",
                  "cumsum: x has dtype Complex64"},
                 {"axis out of range",
                  {x},
                  attrs_to(Attrs{.axis = 2}),
                  "ms::IndexError",
                  "cumsum: axis"}}};
}

// ---------------------------------------------------------------- triu, tril

namespace {

TypeList infer_triangle(Types in, std::string_view op) {
  const TensorType& x = in[0];
  check_packed(x.dtype, op, "x");
  MS_CHECK(x.shape.rank() >= 2, ShapeError, op,
           ": x must have rank >= 2 (matrices in its last two axes), got shape ", x.shape,
           " of rank ", x.shape.rank());
  return {x};
}

TensorList eval_triangle(Inputs in, const TriangleAttrs& a, bool upper, const char* op) {
  const TypeList t = infer_triangle(types_of(in), op);
  Tensor out = alloc_output(t[0], op);
  kernels::triangle(in[0], a.diagonal, upper, out);
  return {out};
}

}  // namespace

TypeList Triu::infer(const Attrs&, Types in) { return infer_triangle(in, name); }
TensorList Triu::eval(const Attrs& a, Inputs in) { return eval_triangle(in, a, true, "triu"); }
TypeList Tril::infer(const Attrs&, Types in) { return infer_triangle(in, name); }
TensorList Tril::eval(const Attrs& a, Inputs in) { return eval_triangle(in, a, false, "tril"); }

// Each output element is its input element or 0: the gradient keeps the same band.
TensorList Triu::vjp(const Attrs& a, const GradContext& c) { return {triu(c.out_grads[0], a)}; }
TensorList Tril::vjp(const Attrs& a, const GradContext& c) { return {tril(c.out_grads[0], a)}; }

namespace {

// x = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]] (float64) and int32
// [2, 3, 2] = 1 ... 12, the inputs of the triangle samples with values.
Tensor tri34() {
  return tensor({{1.0, 2.0, 3.0, 4.0}, {5.0, 6.0, 7.0, 8.0}, {9.0, 10.0, 11.0, 12.0}}, float64);
}
Tensor tri232() {
  return from_vector(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
}

// What triu and tril share: large diagonals, other dtypes and shapes (values
// compared across eager and jit), gradients, and the errors of `op`.
Samples triangle_samples(std::string_view op, std::vector<ops::Sample> cases) {
  using A = TriangleAttrs;
  const Tensor x = tri34();
  const Tensor none = zeros({3, 4}, float64);
  const bool up = op == "triu";
  cases.push_back(detail::sample("diagonal -5: beyond the matrix", {x}, A{-5}, {up ? x : none}));
  cases.push_back(detail::sample("diagonal 6: beyond the matrix", {x}, A{6}, {up ? none : x}));
  cases.push_back(detail::sample("bool [4, 4], diagonal 1",
                                 {sample_tensor({4, 4}, 80, 0, 1, int8).to(bool_)}, A{1}));
  cases.push_back(detail::sample("float16 [2, 2, 5, 3], diagonal -1",
                                 {sample_tensor({2, 2, 5, 3}, 81, -2, 2, float16)}, A{-1}));
  cases.push_back(detail::sample("bfloat16 [3, 6], diagonal 2",
                                 {sample_tensor({3, 6}, 82, -2, 2, bfloat16)}, A{2}));
  cases.push_back(
      detail::sample("uint8 [1, 4, 4]", {sample_tensor({1, 4, 4}, 83, 0, 9, uint8)}, A{}));
  cases.push_back(detail::sample("gradient, [2, 4, 3], diagonal 1", {sample_tensor({2, 4, 3}, 84)},
                                 A{1}, {}, {0}));
  cases.push_back(
      detail::sample("gradient, [3, 5], diagonal -2", {sample_tensor({3, 5}, 85)}, A{-2}, {}, {0}));
  const std::string rank_msg = ::ms::detail::str_cat(op, ": x must have rank >= 2");
  return {
      .cases = std::move(cases),
      .errors = {detail::error_sample("rank 1", {zeros({3})}, A{}, "ms::ShapeError",
                                      rank_msg + " (matrices in its last two axes), got "
                                                 "shape [3] of rank 1"),
                 detail::error_sample("rank 0", {tensor(1.0)}, A{}, "ms::ShapeError", rank_msg),
                 detail::error_sample("packed Int4", {zeros({2, 2}, int4)}, A{}, "ms::TypeError",
                                      ::ms::detail::str_cat(op, ": x has dtype Int4"))}};
}

}  // namespace

Samples Triu::samples() {
  const Tensor x = tri34();
  return triangle_samples(
      name,
      {detail::sample(
           "[3, 4], main diagonal", {x}, Attrs{},
           {tensor({{1.0, 2.0, 3.0, 4.0}, {0.0, 6.0, 7.0, 8.0}, {0.0, 0.0, 11.0, 12.0}}, float64)}),
       detail::sample(
           "[3, 4], diagonal 2", {x}, Attrs{2},
           {tensor({{0.0, 0.0, 3.0, 4.0}, {0.0, 0.0, 0.0, 8.0}, {0.0, 0.0, 0.0, 0.0}}, float64)}),
       detail::sample("[3, 4], diagonal -1", {x}, Attrs{-1},
                      {tensor({{1.0, 2.0, 3.0, 4.0}, {5.0, 6.0, 7.0, 8.0}, {0.0, 10.0, 11.0, 12.0}},
                              float64)}),
       detail::sample("int32 batch [2, 3, 2], diagonal 0", {tri232()}, Attrs{},
                      {from_vector(std::vector<std::int32_t>{1, 2, 0, 4, 0, 0, 7, 8, 0, 10, 0, 0},
                                   {2, 3, 2})})});
}

Samples Tril::samples() {
  const Tensor x = tri34();
  return triangle_samples(
      name,
      {detail::sample(
           "[3, 4], main diagonal", {x}, Attrs{},
           {tensor({{1.0, 0.0, 0.0, 0.0}, {5.0, 6.0, 0.0, 0.0}, {9.0, 10.0, 11.0, 0.0}}, float64)}),
       detail::sample("[3, 4], diagonal 2", {x}, Attrs{2},
                      {tensor({{1.0, 2.0, 3.0, 0.0}, {5.0, 6.0, 7.0, 8.0}, {9.0, 10.0, 11.0, 12.0}},
                              float64)}),
       detail::sample(
           "[3, 4], diagonal -1", {x}, Attrs{-1},
           {tensor({{0.0, 0.0, 0.0, 0.0}, {5.0, 0.0, 0.0, 0.0}, {9.0, 10.0, 0.0, 0.0}}, float64)}),
       detail::sample("int32 batch [2, 3, 2], diagonal -1", {tri232()}, Attrs{-1},
                      {from_vector(std::vector<std::int32_t>{0, 0, 3, 0, 5, 6, 0, 0, 9, 0, 11, 12},
                                   {2, 3, 2})})});
}

// ---------------------------------------------------------------- masked_fill

TypeList MaskedFill::infer(const Attrs& a, Types in) {
  const TensorType &x = in[0], &mask = in[1];
  const Shape &xs = x.shape, &m = mask.shape;
  check_packed(x.dtype, "masked_fill", "x");
  MS_CHECK(mask.dtype == bool_, TypeError, "masked_fill: mask must have dtype Bool, got ",
           mask.dtype, " (a comparison such as x == 0 gives one)");
  MS_CHECK(m.rank() <= xs.rank(), ShapeError, "masked_fill: mask of shape ", m, " has rank ",
           m.rank(), ", more than x of shape ", xs, " (rank ", xs.rank(),
           "); mask must broadcast to x's shape, which the output has");
  for (std::int64_t d = 1; d <= m.rank(); ++d) {
    const std::int64_t md = m[u(m.rank() - d)], xd = xs[u(xs.rank() - d)];
    MS_CHECK(md == xd || md == 1, ShapeError, "masked_fill: mask of shape ", m,
             " does not broadcast to x's shape ", xs, ": axis ", -d, " has size ", md,
             " in mask and ", xd, " in x (expected ", xd, " or 1",
             xd == 1 ? "; the output has x's shape, so x is not broadcast)" : ")");
  }
  check_fill_value(a.value, x.dtype, "masked_fill");
  return {x};
}

void MaskedFill::run(const Attrs& a, Inputs in, Inputs out) {
  const Tensor fill = full({}, Scalar(a.value), out[0].dtype());
  kernels::masked_fill(in[0], ::ms::detail::expand_view(in[1], out[0].shape()), fill, out[0]);
}

// Where mask is true the output does not depend on x.
TensorList MaskedFill::vjp(const Attrs&, const GradContext& c) {
  return {masked_fill(c.out_grads[0], c.inputs[1], 0), Tensor()};
}

Samples MaskedFill::samples() {
  const Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  const Tensor m = tensor({{true, false, false}, {false, true, true}});
  const auto a = [](double v) { return Attrs{.value = v}; };
  return {
      .cases = {detail::sample("same shape", {x, m}, a(-1),
                               {tensor({{-1.0, 2.0, 3.0}, {4.0, -1.0, -1.0}})}),
                detail::sample("mask [3] over [2, 3]", {x, tensor({false, true, false})}, a(9),
                               {tensor({{1.0, 9.0, 3.0}, {4.0, 9.0, 6.0}})}),
                detail::sample("mask [2, 1] over [2, 3]",
                               {x, tensor({false, true}).reshape({2, 1})}, a(0.5),
                               {tensor({{1.0, 2.0, 3.0}, {0.5, 0.5, 0.5}})}),
                detail::sample("int32, value -7",
                               {tensor({{1, 2}, {3, 4}}, int32), tensor({true, false})}, a(-7),
                               {tensor({{-7, 2}, {-7, 4}}, int32)}),
                detail::sample("int64, value 2.75 truncates",
                               {tensor({5, 6}), tensor({false, true})}, a(2.75), {tensor({5, 2})}),
                detail::sample("bool x", {tensor({true, false, true}), tensor({true, true, false})},
                               a(0), {tensor({false, false, true})}),
                detail::sample("rank 0", {tensor(3.0), tensor(true)}, a(4), {tensor(4.0)}),
                detail::sample("rank-0 mask", {x, tensor(false)}, a(4), {x}),
                detail::sample("float16 [2, 3, 4], mask [3, 1]",
                               {sample_tensor({2, 3, 4}, 90, -2, 2, float16),
                                sample_tensor({3, 1}, 91, 0, 1, int8).to(bool_)},
                               a(-65504)),
                detail::sample("gradient, mask [4] over [3, 4]",
                               {sample_tensor({3, 4}, 92), tensor({true, false, false, true})},
                               a(-3), {}, {0}),
                detail::sample("gradient, mask [2, 1, 3] over [2, 4, 3]",
                               {sample_tensor({2, 4, 3}, 93),
                                sample_tensor({2, 1, 3}, 94, 0, 1, int8).to(bool_)},
                               a(0), {}, {0})},
      .errors = {
          detail::error_sample("float mask", {x, zeros({2, 3})}, a(0), "ms::TypeError",
                               "masked_fill: mask must have dtype Bool, got Float32"),
          detail::error_sample("mask [4] over [2, 3]", {x, zeros({4}, bool_)}, a(0),
                               "ms::ShapeError",
                               "masked_fill: mask of shape [4] does not broadcast to x's shape "
                               "[2, 3]: axis -1 has size 4 in mask and 3 in x"),
          detail::error_sample("mask [2, 3] would grow x [1, 3]", {zeros({1, 3}), m}, a(0),
                               "ms::ShapeError", "axis -2 has size 2 in mask and 1 in x"),
          detail::error_sample("mask of a higher rank", {zeros({3}), zeros({1, 3}, bool_)}, a(0),
                               "ms::ShapeError", "masked_fill: mask of shape [1, 3] has rank 2"),
          detail::error_sample("value beyond int8", {zeros({2}, int8), zeros({2}, bool_)}, a(300),
                               "ms::ValueError",
                               "masked_fill: value 300 does not fit dtype Int8 of x")}};
}

// ---------------------------------------------------------------- shape and layout entries

TypeList Reshape::infer(const Attrs& a, Types in) { return infer_reshape(in, a); }
TensorList Reshape::eval(const Attrs& a, Inputs in) { return eval_reshape(in, a); }
TypeList Transpose::infer(const Attrs& a, Types in) { return infer_transpose(in, a); }
TensorList Transpose::eval(const Attrs& a, Inputs in) { return eval_transpose(in, a); }
TypeList Permute::infer(const Attrs& a, Types in) { return infer_permute(in, a); }
TensorList Permute::eval(const Attrs& a, Inputs in) { return eval_permute(in, a); }
TypeList Squeeze::infer(const Attrs& a, Types in) { return infer_squeeze(in, a); }
TensorList Squeeze::eval(const Attrs& a, Inputs in) { return eval_squeeze(in, a); }
TypeList Unsqueeze::infer(const Attrs& a, Types in) { return infer_unsqueeze(in, a); }
TensorList Unsqueeze::eval(const Attrs& a, Inputs in) { return eval_unsqueeze(in, a); }
TypeList Flatten::infer(const Attrs& a, Types in) { return infer_flatten(in, a); }
TensorList Flatten::eval(const Attrs& a, Inputs in) { return eval_flatten(in, a); }
TypeList BroadcastTo::infer(const Attrs& a, Types in) { return infer_broadcast_to(in, a); }
TensorList BroadcastTo::eval(const Attrs& a, Inputs in) { return eval_broadcast_to(in, a); }
TypeList Concat::infer(const Attrs& a, Types in) { return infer_concat(in, a); }
TensorList Concat::eval(const Attrs& a, Inputs in) { return eval_concat(in, a); }
TypeList Stack::infer(const Attrs& a, Types in) { return infer_stack(in, a); }
TensorList Stack::eval(const Attrs& a, Inputs in) { return eval_stack(in, a); }
TypeList Split::infer(const Attrs& a, Types in) { return infer_split(in, a); }
TensorList Split::eval(const Attrs& a, Inputs in) { return eval_split(in, a); }
TypeList Pad::infer(const Attrs& a, Types in) { return infer_pad(in, a); }
TensorList Pad::eval(const Attrs& a, Inputs in) { return eval_pad(in, a); }
TypeList Cast::infer(const Attrs& a, Types in) { return infer_cast(in, a); }
TensorList Cast::eval(const Attrs& a, Inputs in) { return eval_cast(in, a); }
TypeList OneHot::infer(const Attrs& a, Types in) { return infer_one_hot(in, a); }
TensorList OneHot::eval(const Attrs& a, Inputs in) { return eval_one_hot(in, a); }

// Gradients: views and copies move the gradient back to the input's layout.

TensorList Reshape::vjp(const Attrs&, const GradContext& c) {
  return {reshape(c.out_grads[0], c.inputs[0].shape())};
}
TensorList Flatten::vjp(const Attrs&, const GradContext& c) {
  return {reshape(c.out_grads[0], c.inputs[0].shape())};
}
TensorList Squeeze::vjp(const Attrs&, const GradContext& c) {
  return {reshape(c.out_grads[0], c.inputs[0].shape())};
}
TensorList Unsqueeze::vjp(const Attrs&, const GradContext& c) {
  return {reshape(c.out_grads[0], c.inputs[0].shape())};
}
TensorList Transpose::vjp(const Attrs& a, const GradContext& c) {
  return {transpose(c.out_grads[0], a.axis0, a.axis1)};
}
TensorList Permute::vjp(const Attrs& a, const GradContext& c) {
  const std::int64_t r = c.inputs[0].rank();
  std::vector<std::int64_t> inv(a.axes.size());
  for (std::size_t i = 0; i < a.axes.size(); ++i)
    inv[u(axis_normalize(a.axes[i], r, name))] = static_cast<std::int64_t>(i);
  return {permute(c.out_grads[0], inv)};
}
TensorList BroadcastTo::vjp(const Attrs&, const GradContext& c) {
  return {detail::sum_to(c.out_grads[0], c.inputs[0].shape())};
}
TensorList Cast::vjp(const Attrs&, const GradContext& c) {
  const DType t = c.inputs[0].dtype();
  if (!dtype_is_float(t)) return {Tensor()};  // no gradient into integers
  return {cast(c.out_grads[0], t)};
}
TensorList Concat::vjp(const Attrs& a, const GradContext& c) {
  const std::int64_t axis = axis_normalize(a.axis, c.inputs[0].rank(), name);
  std::vector<std::int64_t> sizes;
  for (const Tensor& x : c.inputs) sizes.push_back(x.dim(axis));
  return split(c.out_grads[0], sizes, axis);
}
TensorList Stack::vjp(const Attrs& a, const GradContext& c) {
  const std::int64_t axis = axis_normalize(a.axis, c.inputs[0].rank() + 1, name);
  TensorList parts = split(c.out_grads[0], 1, axis);
  for (Tensor& p : parts) p = squeeze(p, axis);
  return parts;
}
// Parts that get no gradient contribute zeros.
TensorList Split::vjp(const Attrs& a, const GradContext& c) {
  const std::int64_t axis = axis_normalize(a.axis, c.inputs[0].rank(), name);
  TensorList parts;
  for (std::size_t k = 0; k < c.outputs.size(); ++k)
    parts.push_back(c.out_grads[k].defined() ? c.out_grads[k]
                                             : zeros(c.outputs[k].shape(), c.outputs[k].dtype()));
  return {concat(parts, axis)};
}
// constant: crop what was added, pad what was cropped. reflect / replicate:
// along each padded axis, output position j reads x[src(j - left)] (the
// kernel's mapping), an index_select; its gradient adds each position's
// gradient into its source. Axes are independent.
TensorList Pad::vjp(const Attrs& a, const GradContext& c) {
  std::vector<std::int64_t> pads = a.pads;
  if (a.mode == "constant") {
    for (std::int64_t& p : pads) p = -p;
    return {pad(c.out_grads[0], pads)};
  }
  const bool reflect = a.mode == "reflect";
  const Tensor& x = c.inputs[0];
  Tensor g = c.out_grads[0];
  Shape shape = g.shape();
  for (std::size_t k = 0; 2 * k < pads.size(); ++k) {
    const std::int64_t d = x.rank() - 1 - static_cast<std::int64_t>(k);
    const std::int64_t left = pads[2 * k], n = x.dim(d), len = g.dim(d);
    if (left == 0 && len == n) continue;
    std::vector<std::int64_t> src(u(len));
    for (std::int64_t j = 0; j < len; ++j) {
      const std::int64_t q = j - left;
      src[u(j)] = q >= 0 && q < n ? q
                  : reflect       ? (q < 0 ? -q : 2 * (n - 1) - q)
                                  : (q < 0 ? 0 : n - 1);
    }
    shape[u(d)] = n;
    g = index_select_grad(g, d, from_vector(src, Shape{len}), shape);
  }
  return {g};
}

// ---------------------------------------------------------------- their samples

namespace {
Tensor s34(unsigned seed) { return sample_tensor({3, 4}, seed, -2, 2, float64); }
}  // namespace

Samples Reshape::samples() {
  return {.cases = {detail::sample("[2, 3] -> [3, 2]", {tensor({{1, 2, 3}, {4, 5, 6}})},
                                   Attrs{{3, 2}}, {tensor({{1, 2}, {3, 4}, {5, 6}})}),
                    detail::sample("[3,4,5] -> [4,-1]", {sample_345(1)}, Attrs{{4, -1}}),
                    detail::sample("rank 0 to [1, 1]", {tensor(2.0)}, Attrs{{1, 1}}),
                    detail::sample("gradient", {s34(12)}, Attrs{{2, 6}}, {}, {0})},
          .errors = {detail::error_sample("sizes differ", {zeros({2, 3})}, Attrs{{4, 2}},
                                          "ms::ShapeError", "reshape: cannot reshape [2, 3]"),
                     detail::error_sample("two -1", {zeros({2, 3})}, Attrs{{-1, -1}},
                                          "ms::ShapeError", "only one dim may be -1")}};
}

Samples Transpose::samples() {
  return {.cases = {detail::sample("[[1, 2]] -> [[1], [2]]", {tensor({{1, 2}})}, Attrs{0, 1},
                                   {from_vector(std::vector<std::int64_t>{1, 2}, {2, 1})}),
                    detail::sample("0, 2", {sample_345(2)}, Attrs{0, 2}),
                    detail::sample("gradient", {s34(12)}, Attrs{0, 1}, {}, {0})},
          .errors = {detail::error_sample("axis out of range", {zeros({2, 3})}, Attrs{0, 2},
                                          "ms::IndexError", "transpose: axis 2 is out of range")}};
}

Samples Permute::samples() {
  return {
      .cases = {detail::sample("{2, 0, 1}", {sample_345(3)}, Attrs{{2, 0, 1}}),
                detail::sample("gradient", {sample_tensor({2, 3, 4}, 25, -2, 2, float64)},
                               Attrs{{2, 0, 1}}, {}, {0})},
      .errors = {detail::error_sample("repeated axis", {zeros({2, 3})}, Attrs{{1, 1}},
                                      "ms::ValueError", "permute: axis 1 appears more than once"),
                 detail::error_sample("too few axes", {zeros({2, 3})}, Attrs{{0}}, "ms::ShapeError",
                                      "permute: 1 axes [0] given")}};
}

Samples Squeeze::samples() {
  return {
      .cases = {detail::sample("all", {sample_tensor({3, 1, 4, 1}, 4)}, Attrs{}),
                detail::sample("axis 1", {sample_tensor({3, 1, 4}, 5)}, Attrs{1}),
                detail::sample("gradient, axis 1", {sample_tensor({3, 1}, 24, -2, 2, float64)},
                               Attrs{1}, {}, {0})},
      .errors = {detail::error_sample("axis of size 3", {zeros({3, 1})}, Attrs{0}, "ms::ShapeError",
                                      "squeeze: axis 0 of shape [3, 1] has size 3")}};
}

Samples Unsqueeze::samples() {
  return {.cases = {detail::sample("axis -1", {sample_tensor({3, 4}, 6)}, Attrs{-1}),
                    detail::sample("rank 0", {tensor(1.5)}, Attrs{0}, {tensor({1.5})}),
                    detail::sample("gradient", {s34(12)}, Attrs{1}, {}, {0})},
          .errors = {detail::error_sample("axis out of range", {zeros({3})}, Attrs{2},
                                          "ms::IndexError", "unsqueeze: axis 2 is out of range")}};
}

Samples Flatten::samples() {
  return {.cases = {detail::sample("from 1", {sample_345(7)}, Attrs{1, -1}),
                    detail::sample("all, i64", {sample_345(8, int64)}, Attrs{}),
                    detail::sample("gradient", {s34(12)}, Attrs{}, {}, {0})},
          .errors = {detail::error_sample("start after end", {zeros({2, 3, 4})}, Attrs{2, 1},
                                          "ms::ValueError",
                                          "flatten: start axis 2 is after end axis 1")}};
}

Samples BroadcastTo::samples() {
  return {
      .cases = {detail::sample("[4] -> [3,4]", {sample_tensor({4}, 9)}, Attrs{{3, 4}}),
                detail::sample("[3,1] -> [2,3,4]", {sample_tensor({3, 1}, 10)}, Attrs{{2, 3, 4}}),
                detail::sample("gradient", {sample_tensor({3, 1}, 26, -2, 2, float64)},
                               Attrs{{2, 3, 4}}, {}, {0})},
      .errors = {detail::error_sample("size 3 to 4", {zeros({3})}, Attrs{{4}}, "ms::ShapeError",
                                      "broadcast_to: cannot broadcast shape [3] to [4]")}};
}

Samples Concat::samples() {
  return {
      .cases = {detail::sample("[[1], [2]] with [[3]]",
                               {from_vector(std::vector<float>{1, 2}, {2, 1}),
                                from_vector(std::vector<float>{3}, {1, 1})},
                               Attrs{0}, {from_vector(std::vector<float>{1, 2, 3}, {3, 1})}),
                detail::sample("axis 1, three inputs",
                               {sample_tensor({3, 2}, 11), sample_tensor({3, 4}, 12),
                                sample_tensor({3, 1}, 13)},
                               Attrs{1}),
                detail::sample("i32 with f32 promotes",
                               {sample_tensor({2, 4}, 14, -2, 2, int32), sample_tensor({3, 4}, 15)},
                               Attrs{0}),
                detail::sample("an empty part", {zeros({0, 3}), sample_tensor({2, 3}, 16)},
                               Attrs{0}),
                detail::sample("gradient, axis 1",
                               {s34(12), sample_tensor({3, 2}, 27, -2, 2, float64)}, Attrs{1}, {},
                               {0, 1})},
      .errors = {detail::error_sample("other sizes", {zeros({2, 3}), zeros({2, 4})}, Attrs{0},
                                      "ms::ShapeError", "concat")}};
}

Samples Stack::samples() {
  return {.cases = {detail::sample("axis 1", {sample_tensor({3, 4}, 17), sample_tensor({3, 4}, 18)},
                                   Attrs{1}),
                    detail::sample("gradient, axis 0",
                                   {s34(12), sample_tensor({3, 4}, 28, -2, 2, float64)}, Attrs{0},
                                   {}, {0, 1})},
          .errors = {detail::error_sample("shapes differ", {zeros({2, 3}), zeros({3, 2})}, Attrs{0},
                                          "ms::ShapeError", "stack")}};
}

Samples Split::samples() {
  return {
      .cases = {detail::sample("size 2 of 5", {tensor({1, 2, 3, 4, 5})}, Attrs{.split_size = 2},
                               {tensor({1, 2}), tensor({3, 4}), tensor({5})}),
                detail::sample("size 2 along 1", {sample_tensor({3, 5}, 19)},
                               Attrs{.split_size = 2, .axis = 1}),
                detail::sample("sizes {1, 3} along 0", {sample_tensor({4, 3}, 20)},
                               Attrs{.sizes = std::vector<std::int64_t>{1, 3}}),
                detail::sample("gradient, sizes along 1", {s34(12)},
                               Attrs{.sizes = std::vector<std::int64_t>{1, 3}, .axis = 1}, {},
                               {0})},
      .errors = {detail::error_sample("both sizes and split_size", {zeros({4})},
                                      Attrs{.split_size = 2, .sizes = std::vector<std::int64_t>{4}},
                                      "ms::ValueError", "split"),
                 detail::error_sample("sizes do not add up", {zeros({4})},
                                      Attrs{.sizes = std::vector<std::int64_t>{1, 2}},
                                      "ms::ShapeError", "split")}};
}

Samples Pad::samples() {
  return {
      .cases = {detail::sample("constant 1.5", {sample_tensor({2, 3, 4}, 21)},
                               Attrs{{1, 2, 0, 1}, "constant", 1.5}),
                detail::sample("[1, 2] reflect by 1", {tensor({1.0, 2.0})},
                               Attrs{{1, 1}, "reflect"}, {tensor({2.0, 1.0, 2.0, 1.0})}),
                detail::sample("replicate, crop, i32", {sample_tensor({2, 3, 4}, 22, -2, 2, int32)},
                               Attrs{{1, -1, 2, 2}, "replicate"}),
                detail::sample("gradient, constant", {s34(12)}, Attrs{{1, 2, 0, 1}}, {}, {0}),
                detail::sample("gradient, reflect, both axes", {s34(12)},
                               Attrs{{2, 3, 1, 2}, "reflect"}, {}, {0}),
                detail::sample("gradient, reflect, a crop on one side", {s34(12)},
                               Attrs{{-1, 2, 0, 0}, "reflect"}, {}, {0}),
                detail::sample("gradient, replicate, wide", {s34(12)},
                               Attrs{{5, 1, 0, 3}, "replicate"}, {}, {0})},
      .errors = {detail::error_sample("unknown mode", {zeros({3})}, Attrs{{1, 1}, "wrap"},
                                      "ms::ValueError", "pad"),
                 detail::error_sample("reflect wider than the axis", {zeros({3})},
                                      Attrs{{3, 0}, "reflect"}, "ms::ValueError", "pad")}};
}

Samples OneHot::samples() {
  return {.cases = {detail::sample("[0, 2] of 3", {tensor({0, 2})}, Attrs{3, float32},
                                   {tensor({{1.0, 0.0, 0.0}, {0.0, 0.0, 1.0}})}),
                    detail::sample("[2, 3] i32 of 4, i64", {tensor({{3, 0, 1}, {2, 2, 0}}, int32)},
                                   Attrs{4, int64}),
                    detail::sample("empty indices", {zeros({0}, int64)}, Attrs{5, float64})},
          .errors = {
              detail::error_sample("float indices", {zeros({2})}, Attrs{3, float32},
                                   "ms::TypeError", "one_hot: indices must have dtype"),
              detail::error_sample("negative count", {tensor({0})}, Attrs{-2, float32},
                                   "ms::ValueError", "one_hot: num_classes must be >= 0"),
              detail::error_sample("index past the count", {tensor({0, 3})}, Attrs{3, float32},
                                   "ms::IndexError", "one_hot: indices[1] = 3 is out of range")}};
}

Samples Cast::samples() {
  // Through float32 and back: a larger step, so that rounding stays below the tolerance.
  ops::Sample through_f32 =
      detail::sample("gradient, float64 -> float32", {s34(12)}, Attrs{float32}, {}, {0});
  through_f32.grad_eps = 1e-2;
  through_f32.grad_atol = 1e-3;
  return {.cases = {
              detail::sample("f32 -> i32 truncates", {tensor({1.7, -1.7})}, Attrs{int32},
                             {tensor({1, -1}, int32)}),
              detail::sample("f32 -> f16", {sample_tensor({3, 4}, 23)}, Attrs{float16}),
              detail::sample("f32 -> bool", {sample_tensor({3, 4}, 24)}, Attrs{bool_}),
              detail::sample("f64 -> u8", {sample_tensor({3, 4}, 25, 0, 9, float64)}, Attrs{uint8}),
              through_f32}};
}

}  // namespace ops

// ---------------------------------------------------------------- public API

Tensor one_hot(const Tensor& indices, std::int64_t num_classes, DType dtype) {
  if (num_classes == -1) {
    // Data-dependent shape (as PyTorch): resolved here, so the op itself
    // always sees a concrete count.
    MS_CHECK(indices.defined(), ValueError, "one_hot: indices is an undefined tensor");
    check_index_dtype(indices.dtype(), "one_hot", "indices");
    MS_CHECK(!indices.is_symbolic() && !::ms::detail::tracing_active(), ValueError,
             "one_hot: num_classes -1 infers the count from the indices' values, which a traced "
             "function does not have; pass num_classes");
    MS_CHECK(indices.numel() > 0, ValueError,
             "one_hot: num_classes -1 infers the count from the data, but indices of shape ",
             indices.shape(), " is empty; pass num_classes");
    const Tensor index = indices.contiguous();
    const std::int64_t pos = kernels::index_find_out_of_range(index, kInt64Max);
    if (pos >= 0) {
      const std::int64_t v = index_value(index, pos);
      MS_CHECK(v >= 0, IndexError, "one_hot: indices", position(pos, index.shape()), " = ", v,
               " is negative (expected 0 <= value)");
      detail::raise<ValueError>("one_hot: indices", position(pos, index.shape()), " = ", v,
                                ": num_classes = max + 1 overflows int64");
    }
    num_classes = kernels::index_max(index) + 1;
  }
  return ops::invoke1<ops::OneHot>({indices}, {num_classes, dtype});
}

// ---------------------------------------------------------------- registration

namespace ops::detail {

void register_layout_ops() {
  register_entries<Reshape, Transpose, Permute, Squeeze, Unsqueeze, Flatten, BroadcastTo, Concat,
                   Stack, Split, Pad, Cast, Gather, IndexSelect, IndexCopy, Scatter, GatherGrad,
                   IndexSelectGrad, Cumsum, OneHot, Triu, Tril, MaskedFill>();
}

}  // namespace ops::detail
}  // namespace ms
