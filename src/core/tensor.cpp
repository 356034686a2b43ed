#include "ms/core/tensor.hpp"

#include <atomic>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace ms {

// ---------------------------------------------------------------- Scalar

DType Scalar::default_dtype() const {
  switch (kind()) {
    case ScalarKind::Bool: return bool_;
    case ScalarKind::Int: return int64;
    case ScalarKind::Float: return float32;
    case ScalarKind::Complex: return complex64;
  }
  return float32;
}

std::string Scalar::to_string() const {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>)
          return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::complex<double>>)
          return detail::str_cat("(", x.real(), "+", x.imag(), "j)");
        else
          return detail::str_cat(x);
      },
      v_);
}

// ---------------------------------------------------------------- Tensor

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape,
               std::vector<std::int64_t> strides, std::int64_t offset)
    : dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      storage_(std::move(storage)) {
  MS_CHECK(storage_ != nullptr, ValueError, "Tensor: storage is null");
  MS_CHECK(strides_.size() == shape_.size(), ValueError, "Tensor: ", strides_.size(),
           " strides given for shape ", shape_, " of rank ", shape_.rank());
  numel_ = shape_numel(shape_, "Tensor");
  MS_CHECK(offset_ >= 0, ValueError, "Tensor: offset must be >= 0, got ", offset_);
  if (numel_ == 0) return;
  // Every reachable element must lie inside the storage.
  std::int64_t lo = offset_, hi = offset_;
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    const std::int64_t span = (shape_[i] - 1) * strides_[i];
    (span < 0 ? lo : hi) += span;
  }
  const std::int64_t need =
      dtype_ == DType::Int4 ? (hi + 2) / 2 : (hi + 1) * dtype_itemsize(dtype_);
  MS_CHECK(lo >= 0 && need <= storage_->nbytes(), IndexError, "Tensor: view of shape ", shape_,
           " with offset ", offset_, " reaches outside its storage of ", storage_->nbytes(),
           " bytes");
}

void Tensor::check_defined(const char* what) const {
  MS_CHECK(sym_ < 0, ValueError, what, ": cannot read the values of a symbolic tensor (", dtype_,
           shape_, ", value %", sym_,
           ") while ms::jit traces; values exist only when the compiled graph runs");
  MS_CHECK(storage_ != nullptr, ValueError, what,
           ": the tensor is undefined (default-constructed)");
}

Tensor Tensor::symbolic(DType dtype, Shape shape, std::uint32_t trace, std::int32_t id) {
  MS_CHECK(id >= 0 && trace != 0, ValueError, "Tensor::symbolic: bad trace ", trace, " or id ", id);
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = shape_numel(shape, "Tensor::symbolic");
  t.strides_ = shape_contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.sym_ = id;
  t.trace_ = trace;
  return t;
}

namespace detail {
namespace {
std::atomic<SymbolicViewFn> g_symbolic_view{nullptr};
std::atomic<SymbolicAssignFn> g_symbolic_assign{nullptr};
}  // namespace

void set_symbolic_view_fn(SymbolicViewFn fn) { g_symbolic_view.store(fn); }

Tensor symbolic_view(std::string_view op, const Tensor& x, const std::vector<std::int64_t>& ints,
                     DType dtype) {
  const SymbolicViewFn fn = g_symbolic_view.load();
  MS_CHECK(fn != nullptr, ValueError, "Tensor::", op,
           ": a symbolic tensor needs the op table (include ms/ops/layout.hpp)");
  return fn(op, x, ints, dtype);
}

namespace {
thread_local bool t_tracing = false;
}  // namespace
bool tracing_active() { return t_tracing; }
void set_tracing_active(bool on) { t_tracing = on; }

void set_symbolic_assign_fn(SymbolicAssignFn fn) { g_symbolic_assign.store(fn); }

void symbolic_assign(const Tensor& dst, const Tensor& src, const char* what) {
  const SymbolicAssignFn fn = g_symbolic_assign.load();
  MS_CHECK(fn != nullptr, ValueError, what,
           ": cannot write into or from a symbolic tensor outside a jit trace");
  fn(dst, src, what);
}
}  // namespace detail

std::int64_t Tensor::nbytes() const {
  return shape_nbytes(numel_, dtype_itemsize(dtype_), "Tensor::nbytes");
}

bool Tensor::is_contiguous() const {
  if (sym_ >= 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

bool Tensor::is_same(const Tensor& o) const {
  if (sym_ >= 0 || o.sym_ >= 0) return sym_ == o.sym_ && trace_ == o.trace_;
  return storage_ == o.storage_ && offset_ == o.offset_ && shape_ == o.shape_ &&
         strides_ == o.strides_ && dtype_ == o.dtype_;
}

std::byte* Tensor::raw_data() const {
  check_defined("Tensor::raw_data");
  if (dtype_ == DType::Int4) return storage_->data() + offset_ / 2;
  return storage_->data() + offset_ * dtype_itemsize(dtype_);
}

// ---------------------------------------------------------------- views

namespace {

// The strides of `shape` viewing the elements of a tensor with (old_shape,
// old_strides) in the same order, or nothing when no view is possible (the
// algorithm of NumPy's _attempt_nocopy_reshape).
bool view_strides(const Shape& old_shape, const std::vector<std::int64_t>& old_strides,
                  const Shape& shape, std::vector<std::int64_t>& out) {
  out.assign(shape.size(), 0);
  std::vector<std::int64_t> od, os;
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

Shape infer_reshape(const Shape& from, std::int64_t numel, const Shape& to, const char* op) {
  Shape out = to;
  std::int64_t infer = -1, known = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      MS_CHECK(infer < 0, ShapeError, op, ": only one dim may be -1, shape ", to, " has several");
      infer = static_cast<std::int64_t>(i);
    } else {
      MS_CHECK(out[i] >= 0, ValueError, op, ": shape ", to, " has a negative size ", out[i],
               " at axis ", i);
    }
  }
  Shape known_shape = out;
  if (infer >= 0) known_shape[static_cast<std::size_t>(infer)] = 1;
  known = shape_numel(known_shape, op);
  if (infer >= 0) {
    MS_CHECK(known != 0 && numel % known == 0, ShapeError, op, ": cannot reshape ", from, " (",
             numel, " elements) into ", to);
    out[static_cast<std::size_t>(infer)] = numel / known;
  } else {
    MS_CHECK(known == numel, ShapeError, op, ": cannot reshape ", from, " (", numel,
             " elements) into ", to, " (", known, " elements)");
  }
  return out;
}

}  // namespace

Tensor Tensor::reshape(const Shape& shape) const {
  if (sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_view("reshape", *this, shape.dims());
  check_defined("reshape");
  const Shape target = infer_reshape(shape_, numel_, shape, "reshape");
  std::vector<std::int64_t> st;
  if (dtype_ != DType::Int4 && view_strides(shape_, strides_, target, st))
    return Tensor(storage_, dtype_, target, std::move(st), offset_);
  if (dtype_ == DType::Int4 && is_contiguous())
    return Tensor(storage_, dtype_, target, shape_contiguous_strides(target), offset_);
  // A copy. While tracing, a copy of a captured tensor must be a graph op, so
  // that later in-place updates of the tensor are seen by the graph.
  if (detail::tracing_active()) return detail::symbolic_view("reshape", *this, target.dims());
  return contiguous().reshape(target);
}

Tensor Tensor::view(const Shape& shape) const {
  if (sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_view("reshape", *this, shape.dims());
  check_defined("view");
  const Shape target = infer_reshape(shape_, numel_, shape, "view");
  std::vector<std::int64_t> st;
  MS_CHECK(view_strides(shape_, strides_, target, st), ShapeError, "view: a tensor of shape ",
           shape_, " and strides ", Shape(strides_), " cannot be viewed as ", target,
           " without a copy; use reshape()");
  return Tensor(storage_, dtype_, target, std::move(st), offset_);
}

Tensor Tensor::transpose(std::int64_t a, std::int64_t b) const {
  if (sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_view("transpose", *this, {a, b});
  check_defined("transpose");
  const auto r = rank();
  a = axis_normalize(a, r, "transpose");
  b = axis_normalize(b, r, "transpose");
  std::vector<std::int64_t> axes(static_cast<std::size_t>(r));
  std::iota(axes.begin(), axes.end(), 0);
  if (r > 0) std::swap(axes[static_cast<std::size_t>(a)], axes[static_cast<std::size_t>(b)]);
  return permute(axes);
}

Tensor Tensor::permute(const std::vector<std::int64_t>& axes) const {
  if (sym_ >= 0 || detail::tracing_active()) return detail::symbolic_view("permute", *this, axes);
  check_defined("permute");
  MS_CHECK(dtype_ != DType::Int4, TypeError, "permute: Int4 tensors are packed; cast first");
  const auto r = rank();
  MS_CHECK(static_cast<std::int64_t>(axes.size()) == r, ShapeError, "permute: ", axes.size(),
           " axes given for a tensor of rank ", r, " (shape ", shape_, ")");
  std::vector<bool> seen(static_cast<std::size_t>(r), false);
  std::vector<std::int64_t> dims(axes.size()), st(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<std::size_t>(axis_normalize(axes[i], r, "permute"));
    MS_CHECK(!seen[a], ValueError, "permute: axis ", a, " appears more than once in ", Shape(axes));
    seen[a] = true;
    dims[i] = shape_[a];
    st[i] = strides_[a];
  }
  return Tensor(storage_, dtype_, Shape(std::move(dims)), std::move(st), offset_);
}

Tensor Tensor::slice(std::int64_t axis, std::int64_t start, std::int64_t stop,
                     std::int64_t step) const {
  if (sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_view("slice", *this, {axis, start, stop, step});
  check_defined("slice");
  MS_CHECK(dtype_ != DType::Int4, TypeError, "slice: Int4 tensors are packed; cast first");
  MS_CHECK(rank() > 0, IndexError, "slice: cannot slice a rank-0 tensor");
  const auto ax = static_cast<std::size_t>(axis_normalize(axis, rank(), "slice"));
  MS_CHECK(step > 0, ValueError, "slice: step must be > 0, got ", step);
  const std::int64_t n = shape_[ax];
  auto clampi = [n](std::int64_t v) {
    if (v < 0) v = v < -n ? 0 : v + n;
    return std::min(v, n);
  };
  start = clampi(start);
  stop = clampi(stop);
  const std::int64_t len = stop > start ? (stop - start - 1) / step + 1 : 0;
  Shape s = shape_;
  s[ax] = len;
  std::vector<std::int64_t> st = strides_;
  st[ax] = strides_[ax] * step;
  return Tensor(storage_, dtype_, std::move(s), std::move(st),
                len > 0 ? offset_ + start * strides_[ax] : offset_);
}

Tensor Tensor::select(std::int64_t axis, std::int64_t index) const {
  if (sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_view("select", *this, {axis, index});
  check_defined("select");
  MS_CHECK(rank() > 0, IndexError, "select: cannot index a rank-0 tensor");
  const auto ax = static_cast<std::size_t>(axis_normalize(axis, rank(), "select"));
  const std::int64_t n = shape_[ax];
  MS_CHECK(index >= -n && index < n, IndexError, "select: index ", index,
           " is out of range for axis ", ax, " of size ", n);
  if (index < 0) index += n;
  Tensor s = slice(static_cast<std::int64_t>(ax), index, index + 1);
  return s.squeeze(static_cast<std::int64_t>(ax));
}

Tensor Tensor::squeeze() const {
  if (sym_ >= 0 || detail::tracing_active()) return detail::symbolic_view("squeeze", *this, {});
  check_defined("squeeze");
  std::vector<std::int64_t> d, st;
  for (std::size_t i = 0; i < shape_.size(); ++i)
    if (shape_[i] != 1) d.push_back(shape_[i]), st.push_back(strides_[i]);
  return Tensor(storage_, dtype_, Shape(std::move(d)), std::move(st), offset_);
}

Tensor Tensor::squeeze(std::int64_t axis) const {
  if (sym_ >= 0 || detail::tracing_active()) return detail::symbolic_view("squeeze", *this, {axis});
  check_defined("squeeze");
  const auto ax = static_cast<std::size_t>(axis_normalize(axis, rank(), "squeeze"));
  if (rank() == 0) return *this;
  MS_CHECK(shape_[ax] == 1, ShapeError, "squeeze: axis ", axis, " of shape ", shape_, " has size ",
           shape_[ax], ", expected 1");
  std::vector<std::int64_t> d = shape_.dims(), st = strides_;
  d.erase(d.begin() + static_cast<std::ptrdiff_t>(ax));
  st.erase(st.begin() + static_cast<std::ptrdiff_t>(ax));
  return Tensor(storage_, dtype_, Shape(std::move(d)), std::move(st), offset_);
}

Tensor Tensor::unsqueeze(std::int64_t axis) const {
  if (sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_view("unsqueeze", *this, {axis});
  check_defined("unsqueeze");
  const auto ax = static_cast<std::size_t>(axis_normalize(axis, rank() + 1, "unsqueeze"));
  std::vector<std::int64_t> d = shape_.dims(), st = strides_;
  const std::int64_t inner = ax < st.size() ? st[ax] * std::max<std::int64_t>(d[ax], 1) : 1;
  d.insert(d.begin() + static_cast<std::ptrdiff_t>(ax), 1);
  st.insert(st.begin() + static_cast<std::ptrdiff_t>(ax), inner);
  return Tensor(storage_, dtype_, Shape(std::move(d)), std::move(st), offset_);
}

Tensor Tensor::expand(const Shape& shape) const {
  if (sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_view("broadcast_to", *this, shape.dims());
  check_defined("expand");
  MS_CHECK(dtype_ != DType::Int4, TypeError, "expand: Int4 tensors are packed; cast first");
  MS_CHECK(shape.size() >= shape_.size(), ShapeError, "expand: cannot expand shape ", shape_,
           " to the lower rank ", shape);
  const std::size_t lead = shape.size() - shape_.size();
  std::vector<std::int64_t> d(shape.size()), st(shape.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::int64_t want = shape[i];
    if (i < lead) {
      MS_CHECK(want >= 0, ValueError, "expand: shape ", shape, " has a negative size at axis ", i);
      d[i] = want;
      continue;
    }
    const std::int64_t have = shape_[i - lead];
    if (want == -1 || want == have) {
      d[i] = have;
      st[i] = strides_[i - lead];
    } else {
      MS_CHECK(have == 1, ShapeError, "expand: cannot expand shape ", shape_, " to ", shape,
               ": axis ", static_cast<std::int64_t>(i) - static_cast<std::int64_t>(shape.size()),
               " has size ", have, " (only size-1 axes expand)");
      MS_CHECK(want >= 0, ValueError, "expand: shape ", shape, " has a negative size at axis ", i);
      d[i] = want;
    }
  }
  return Tensor(storage_, dtype_, Shape(std::move(d)), std::move(st), offset_);
}

Tensor Tensor::flatten(std::int64_t start, std::int64_t end) const {
  if (sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_view("flatten", *this, {start, end});
  check_defined("flatten");
  if (rank() == 0) return reshape({1});
  start = axis_normalize(start, rank(), "flatten");
  end = axis_normalize(end, rank(), "flatten");
  MS_CHECK(start <= end, ValueError, "flatten: start axis ", start, " is after end axis ", end);
  std::vector<std::int64_t> d;
  for (std::int64_t i = 0; i < start; ++i) d.push_back(shape_[static_cast<std::size_t>(i)]);
  std::int64_t m = 1;
  for (std::int64_t i = start; i <= end; ++i) m *= shape_[static_cast<std::size_t>(i)];
  d.push_back(m);
  for (std::int64_t i = end + 1; i < rank(); ++i) d.push_back(shape_[static_cast<std::size_t>(i)]);
  return reshape(Shape(std::move(d)));
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (sym_ >= 0) return *this;                       // graph values are dense
  if (detail::tracing_active() && !is_contiguous())  // a copy: a graph op (see reshape)
    return detail::symbolic_view("cast", *this, {}, dtype_);
  check_defined("contiguous");
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  if (sym_ >= 0 || detail::tracing_active())  // a copy: a graph op (see reshape)
    return detail::symbolic_view("cast", *this, {}, dtype_);
  check_defined("clone");
  Tensor out = empty(shape_, dtype_);
  detail::copy_convert(*this, out);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (sym_ >= 0) return dtype == dtype_ ? *this : detail::symbolic_view("cast", *this, {}, dtype);
  if (detail::tracing_active() && !(dtype == dtype_ && is_contiguous()))
    return detail::symbolic_view("cast", *this, {}, dtype);  // a copy: a graph op (see reshape)
  check_defined("to");
  if (dtype == dtype_ && is_contiguous()) return *this;
  Tensor out = empty(shape_, dtype);
  detail::copy_convert(*this, out);
  return out;
}

void Tensor::copy_(const Tensor& src) {
  if (sym_ >= 0 || src.sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_assign(*this, src, "Tensor::copy_");
  check_defined("copy_");
  src.check_defined("copy_");
  const Tensor b = src.expand(shape_);
  if (is_contiguous()) {
    detail::copy_convert(b, *this);
  } else {
    Tensor tmp = empty(shape_, dtype_);
    detail::copy_convert(b, tmp);
    detail::copy_convert(tmp, *this);
  }
}

void Tensor::fill_(const Scalar& value) {
  if (sym_ >= 0 || detail::tracing_active())
    return detail::symbolic_assign(*this, full({}, value, dtype_), "Tensor::fill_");
  check_defined("fill_");
  copy_(full({}, value, dtype_));
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

// ---------------------------------------------------------------- creation

Tensor empty(const Shape& shape, DType dtype) {
  const std::int64_t n = shape_numel(shape, "empty");
  const std::int64_t bytes = shape_nbytes(n, dtype_itemsize(dtype), "empty");
  return Tensor(Storage::allocate(bytes, "empty"), dtype, shape,
                shape_contiguous_strides(shape, "empty"), 0);
}

Tensor full(const Shape& shape, const Scalar& value, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (dtype == DType::Int4) {
    const auto v = static_cast<std::uint8_t>(value.to<std::int64_t>() & 0xF);
    std::memset(t.raw_data(), v | (v << 4), static_cast<std::size_t>(t.storage()->nbytes()));
    return t;
  }
  dtype_dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = value.to<T>();
    std::fill_n(t.data<T>(), t.numel(), v);
  });
  return t;
}

Tensor full(const Shape& shape, const Scalar& value) {
  return full(shape, value, value.default_dtype());
}
Tensor zeros(const Shape& shape, DType dtype) { return full(shape, Scalar(0), dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, Scalar(1), dtype); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }

Tensor arange(double start, double stop, double step, DType dtype) {
  MS_CHECK(step != 0 && std::isfinite(step), ValueError,
           "arange: step must be finite and non-zero, got ", step);
  MS_CHECK(std::isfinite(start) && std::isfinite(stop), ValueError,
           "arange: start and stop must be finite, got ", start, " and ", stop);
  // NumPy's length: ceil((stop - start) / step), where a quotient that
  // underflows to 0 from a non-zero distance counts 1 element when the signs
  // agree (arange(0, 1e-300, 1e300) has one element).
  const double delta = stop - start;
  const double q = delta / step;
  const double count = (q == 0.0 && delta != 0.0) ? (std::signbit(q) ? 0.0 : 1.0) : std::ceil(q);
  MS_CHECK(count < 9.2e18, ValueError, "arange: [", start, ", ", stop, ") with step ", step,
           " has too many elements");
  const auto n = static_cast<std::int64_t>(std::max(0.0, count));
  if (dtype == int4 || dtype == bool_)  // tiny ranges of values: exact through int64
    return arange(start, stop, step, int64).to(dtype);
  // Built in its own dtype (a float32 range takes no float64 buffer).
  Tensor t = empty({n}, dtype);
  dtype_dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    if constexpr (std::is_integral_v<T>) {
      if (std::trunc(start) == start && std::trunc(step) == step && std::fabs(start) < 0x1p63 &&
          std::fabs(step) < 0x1p63) {
        // Integral start and step: exact integer arithmetic, wrapping like
        // NumPy's integer fill (unsigned: no UB), also above 2^53.
        const auto a = static_cast<std::uint64_t>(static_cast<std::int64_t>(start));
        const auto d = static_cast<std::uint64_t>(static_cast<std::int64_t>(step));
        for (std::int64_t i = 0; i < n; ++i)
          p[i] = static_cast<T>(a + static_cast<std::uint64_t>(i) * d);
        return;
      }
    }
    // Each element start + i * step in double, rounded (or truncated) once.
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = scalar_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

Tensor eye(std::int64_t n, std::int64_t m, DType dtype) {
  if (m < 0 && m == -1) m = n;
  MS_CHECK(n >= 0 && m >= 0, ValueError, "eye: sizes must be >= 0, got n=", n, " m=", m);
  Tensor t = zeros({n, m}, float64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = 1.0;
  return t.to(dtype);
}

namespace {
DType literal_dtype(std::initializer_list<Scalar> values) {
  int kind = 0;
  for (const Scalar& s : values) kind = std::max(kind, static_cast<int>(s.kind()));
  if (values.size() == 0) return float32;
  return kind == 0 ? bool_ : kind == 1 ? int64 : kind == 2 ? float32 : complex64;
}
}  // namespace

Tensor tensor(const Scalar& value) { return full({}, value); }
Tensor tensor(const Scalar& value, DType dtype) { return full({}, value, dtype); }

namespace {
// A literal's values (row-major) as a `shape` tensor in an exact carrier:
// int64 for integer and bool targets (complex128 would round integers above
// 2^53), complex128 otherwise.
Tensor literal_carrier(std::span<const Scalar> values, const Shape& shape, DType dtype) {
  if (dtype_is_int(dtype) || dtype == bool_ || dtype == int4) {
    Tensor t = empty(shape, int64);
    auto* q = t.data<std::int64_t>();
    for (const Scalar& s : values) *q++ = s.to<std::int64_t>();
    return t;
  }
  Tensor t = empty(shape, complex128);
  auto* p = t.data<complex128_t>();
  for (const Scalar& s : values) *p++ = s.to<complex128_t>();
  return t;
}
}  // namespace

Tensor tensor(std::initializer_list<Scalar> values, DType dtype) {
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  return literal_carrier({values.begin(), values.size()}, {n}, dtype).to(dtype);
}
Tensor tensor(std::initializer_list<Scalar> values) {
  return tensor(values, literal_dtype(values));
}

Tensor tensor(std::initializer_list<std::initializer_list<Scalar>> rows, DType dtype) {
  const std::int64_t r = static_cast<std::int64_t>(rows.size());
  const std::int64_t c = r ? static_cast<std::int64_t>(rows.begin()->size()) : 0;
  std::int64_t i = 0;
  for (const auto& row : rows) {
    MS_CHECK(static_cast<std::int64_t>(row.size()) == c, ShapeError, "tensor: row ", i, " has ",
             row.size(), " values but row 0 has ", c, " (rows must have equal lengths)");
    ++i;
  }
  // The values in an exact carrier, converted straight into the result: a
  // literal is a constant, also while ms::jit traces (no in-place row copies,
  // which a trace would record as writes into a value of the graph).
  std::vector<Scalar> flat;
  flat.reserve(static_cast<std::size_t>(r * c));
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  const Tensor carrier = literal_carrier(flat, {r, c}, dtype);
  if (carrier.dtype() == dtype) return carrier;
  Tensor out = empty({r, c}, dtype);
  detail::copy_convert(carrier, out);
  return out;
}
Tensor tensor(std::initializer_list<std::initializer_list<Scalar>> rows) {
  int kind = 0;
  bool any = false;
  for (const auto& row : rows)
    for (const Scalar& s : row) kind = std::max(kind, static_cast<int>(s.kind())), any = true;
  const DType dt = !any        ? float32
                   : kind == 0 ? bool_
                   : kind == 1 ? int64
                   : kind == 2 ? float32
                               : complex64;
  return tensor(rows, dt);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  const Shape s = shape_broadcast(a.shape(), b.shape(), "allclose");
  const bool cplx = dtype_is_complex(a.dtype()) || dtype_is_complex(b.dtype());
  const DType dt = cplx ? complex128 : float64;
  const Tensor x = a.to(dt).expand(s).contiguous(), y = b.to(dt).expand(s).contiguous();
  bool ok = true;
  auto compare = [&](const auto* px, const auto* py) {
    for (std::int64_t i = 0; i < x.numel() && ok; ++i) {
      const bool nx = std::isnan(std::abs(px[i])), ny = std::isnan(std::abs(py[i]));
      if (nx || ny) {
        ok = equal_nan && nx && ny;
      } else if (px[i] == py[i]) {
        continue;  // equal infinities too
      } else {
        ok = std::abs(px[i] - py[i]) <= atol + rtol * std::abs(py[i]);
      }
    }
  };
  if (cplx)
    compare(x.data<complex128_t>(), y.data<complex128_t>());
  else
    compare(x.data<double>(), y.data<double>());
  return ok;
}

}  // namespace ms
