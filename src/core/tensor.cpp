#include "ms/core/tensor.hpp"

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

Tensor::Tensor(const Tensor&) = default;
Tensor::Tensor(Tensor&&) noexcept = default;
Tensor& Tensor::operator=(const Tensor&) = default;
Tensor& Tensor::operator=(Tensor&&) noexcept = default;
Tensor::~Tensor() = default;

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, DimVector strides,
               std::int64_t offset)
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
thread_local bool t_tracing = false;
}  // namespace
bool tracing_active() { return t_tracing; }
void set_tracing_active(bool on) { t_tracing = on; }

Tensor to_dense(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype && t.is_contiguous()) return t;
  Tensor out = empty(t.shape(), dtype);
  copy_convert(t, out);
  return out;
}

Tensor expand_view(const Tensor& t, const Shape& shape) {
  MS_ASSERT(shape.size() >= t.shape().size());
  const std::size_t lead = shape.size() - t.shape().size();
  std::vector<std::int64_t> st(shape.size(), 0);
  for (std::size_t i = lead; i < shape.size(); ++i)
    if (t.shape()[i - lead] == shape[i]) st[i] = t.strides()[i - lead];
  return Tensor(t.storage(), t.dtype(), shape, std::move(st), t.offset());
}

Tensor permute_view(const Tensor& t, std::span<const std::int64_t> axes) {
  MS_ASSERT(static_cast<std::int64_t>(axes.size()) == t.rank());
  std::vector<std::int64_t> dims(axes.size()), st(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<std::size_t>(axes[i]);
    dims[i] = t.shape()[a];
    st[i] = t.strides()[a];
  }
  return Tensor(t.storage(), t.dtype(), Shape(std::move(dims)), std::move(st), t.offset());
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
    return detail::to_dense(arange(start, stop, step, int64), dtype);
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
  return detail::to_dense(t, dtype);
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
  return detail::to_dense(literal_carrier({values.begin(), values.size()}, {n}, dtype), dtype);
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
  const Tensor x = detail::to_dense(detail::expand_view(detail::to_dense(a, dt), s), dt);
  const Tensor y = detail::to_dense(detail::expand_view(detail::to_dense(b, dt), s), dt);
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

// The explicit instantiations that ms/core/tensor.hpp declares extern.
#define MS_TENSOR_ELEMENT_ACCESS(T)   \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
MS_TENSOR_ELEMENT_TYPES(MS_TENSOR_ELEMENT_ACCESS)
#undef MS_TENSOR_ELEMENT_ACCESS

}  // namespace ms
