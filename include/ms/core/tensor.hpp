// ms/core/tensor.hpp — the Tensor: a dtype and a strided view over a Storage.
//
// Stage: core. A Tensor is cheap to copy (it shares its storage); views
// (reshape when possible, transpose, permute, slice, squeeze, unsqueeze,
// expand) share memory, `clone()` and `contiguous()` copy. Arithmetic lives in
// the ops and expr stages (`ms/ops/...`, `ms/expr/...`), not here.
//
// The view and copy methods (and copy_ / fill_) are declared here but defined
// by the ops stage (src/ops/view.cpp): each is the public form of an op entry
// (`x.transpose(0, 1)` is `ms::transpose(x, 0, 1)`, `x.slice` the `slice` entry),
// so a symbolic tensor, or any tensor while ms::jit traces, records that op's
// node, and arguments are checked once, by the entry. Core and kernels code
// does not call them; it uses the eager `detail::to_dense`, `expand_view`, `permute_view`.
//
//   ms::Tensor x = ms::arange(0, 6).reshape({2, 3});   // [[0,1,2],[3,4,5]] float32
//   ms::Tensor t = x.transpose(0, 1);                  // a view, no copy
//   std::cout << t.contiguous() << "\n";
#pragma once

#include <complex>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "ms/core/dtype.hpp"
#include "ms/core/error.hpp"
#include "ms/core/shape.hpp"
#include "ms/core/storage.hpp"

namespace ms {

/// A number of any kind, for fills and scalar operands:
/// `ms::full({2, 2}, 1.5)`, `ms::full({3}, true, ms::bool_)`.
class Scalar {
 public:
  /// The value, one alternative per ScalarKind.
  using Value = std::variant<bool, std::int64_t, double, std::complex<double>>;
  /// A bool.
  Scalar(bool v) : v_(v) {}  // NOLINT: implicit on purpose, like a C++ number
  /// An integer (kept as int64).
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) Scalar(T v)
      : v_(static_cast<std::int64_t>(v)) {}  // NOLINT
  /// A floating-point number (kept as double).
  template <class T>
  requires std::is_floating_point_v<T> Scalar(T v) : v_(static_cast<double>(v)) {}  // NOLINT
  /// A float16 number (kept as double).
  Scalar(float16_t v) : v_(static_cast<double>(static_cast<float>(v))) {}  // NOLINT
  /// A bfloat16 number (kept as double).
  Scalar(bfloat16_t v) : v_(static_cast<double>(static_cast<float>(v))) {}  // NOLINT
  /// A complex number (kept as std::complex<double>).
  template <class T>
  Scalar(std::complex<T> v) : v_(std::complex<double>(v)) {}  // NOLINT

  /// Which kind of number it holds.
  ScalarKind kind() const { return static_cast<ScalarKind>(v_.index()); }
  /// The number.
  const Value& value() const { return v_; }
  /// The value converted like a cast to T.
  template <class T>
  T to() const {
    return std::visit([](const auto& x) { return scalar_cast<T>(x); }, v_);
  }
  /// The dtype a literal of this kind gets on its own: bool, int64, float32, complex64.
  DType default_dtype() const;
  /// The number as text (`2`, `2.5`, `true`, `(1+2j)`).
  std::string to_string() const;

 private:
  Value v_;
};

/// An n-dimensional array view: dtype, shape, strides (in elements), offset.
class Tensor {
 public:
  /// An undefined tensor (no storage); `defined()` is false.
  Tensor() = default;
  /// @{
  /// Copies share the storage (a view of the same elements). Defined in
  /// src/core/tensor.cpp, so that a file passing tensors around does not
  /// compile their members' code each time (bench/compile_time.sh).
  Tensor(const Tensor&);
  Tensor(Tensor&&) noexcept;
  Tensor& operator=(const Tensor&);
  Tensor& operator=(Tensor&&) noexcept;
  ~Tensor();
  /// @}
  /// A view over `storage`. Checks that every element it can reach lies inside.
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, DimVector strides,
         std::int64_t offset);

  /// False only for a default-constructed tensor. A symbolic tensor is defined.
  bool defined() const { return storage_ != nullptr || sym_ >= 0; }

  // ------------------------------------------------------------ symbolic tensors
  /// True for a tensor traced by ms::jit: it has a dtype and a shape but no
  /// values yet (they exist only when the compiled graph runs). Ops on it record
  /// graph nodes; views dispatch to the matching op; reading its values
  /// (`item`, `data`, `to_vector`, printing values) raises ms::ValueError.
  bool is_symbolic() const { return sym_ >= 0; }
  /// The value number inside its trace (-1 for a concrete tensor).
  std::int32_t symbolic_id() const { return sym_; }
  /// The trace that made this symbolic tensor (0 for a concrete tensor).
  std::uint32_t trace_id() const { return trace_; }
  /// A symbolic tensor (made by the jit tracer only).
  static Tensor symbolic(DType dtype, Shape shape, std::uint32_t trace, std::int32_t id);
  /// The element type.
  DType dtype() const { return dtype_; }
  /// The dims.
  const Shape& shape() const { return shape_; }
  /// The number of dims.
  std::int64_t rank() const { return shape_.rank(); }
  /// Size of a (possibly negative) axis.
  std::int64_t dim(std::int64_t axis) const { return shape_.at(axis); }
  /// The number of elements (the product of the dims).
  std::int64_t numel() const { return numel_; }
  /// Bytes per element (dtype_itemsize).
  std::int64_t itemsize() const { return dtype_itemsize(dtype_); }
  /// Bytes of the elements (not of the whole storage).
  std::int64_t nbytes() const;
  /// The step between neighbours along each axis, in elements.
  std::span<const std::int64_t> strides() const { return strides_; }
  /// The position of element 0 in the storage, in elements.
  std::int64_t offset() const { return offset_; }
  /// The memory (null for an undefined or symbolic tensor).
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  /// True when the elements are dense in row-major order.
  bool is_contiguous() const;
  /// True when both view the same elements of the same storage.
  bool is_same(const Tensor& other) const;

  /// Pointer to element 0 as bytes (offset applied). For int4 the byte that holds element 0.
  std::byte* raw_data() const;
  /// Typed pointer to element 0. TypeError when T is not this dtype's C++ type.
  template <Element T>
  T* data() const {
    check_defined("Tensor::data");
    MS_CHECK(dtype_of<T> == dtype_, TypeError, "Tensor::data: tensor has dtype ", dtype_,
             " but data<", dtype_name(dtype_of<T>), "> was requested");
    return reinterpret_cast<T*>(raw_data());
  }

  // ------------------------------------------------------------ views
  /// Same elements with a new shape; a view when the strides allow it, else a
  /// copy. One dim may be -1 (inferred). ShapeError when the counts differ.
  Tensor reshape(const Shape& shape) const;
  /// Like reshape but never copies: ShapeError when a view is impossible.
  Tensor view(const Shape& shape) const;
  /// Swaps axes `axis0` and `axis1` (negative: from the end); a view, no copy.
  Tensor transpose(std::int64_t axis0, std::int64_t axis1) const;
  /// Reorders axes: `permute({2, 0, 1})`.
  Tensor permute(const std::vector<std::int64_t>& axes) const;
  /// Elements start, start+step, ... < stop along `axis` (Python slice
  /// semantics: negative start/stop count from the end, clamped; step > 0).
  Tensor slice(std::int64_t axis, std::int64_t start, std::int64_t stop,
               std::int64_t step = 1) const;
  /// The sub-tensor at `index` along `axis`, which is removed.
  Tensor select(std::int64_t axis, std::int64_t index) const;
  /// Removes every size-1 axis.
  Tensor squeeze() const;
  /// Removes `axis`, which must have size 1.
  Tensor squeeze(std::int64_t axis) const;
  /// Inserts a size-1 axis at `axis` (in [-rank-1, rank]).
  Tensor unsqueeze(std::int64_t axis) const;
  /// Broadcasts to `shape` with stride 0 along expanded axes (NumPy rules;
  /// -1 keeps a dim). A view: do not write through it.
  Tensor expand(const Shape& shape) const;
  /// As expand(shape) (PyTorch's name for it).
  Tensor broadcast_to(const Shape& shape) const { return expand(shape); }
  /// Merges axes [start, end] into one.
  Tensor flatten(std::int64_t start = 0, std::int64_t end = -1) const;

  // ------------------------------------------------------------ copies
  /// This tensor if already contiguous, else a dense copy.
  Tensor contiguous() const;
  /// A dense copy with its own storage.
  Tensor clone() const;
  /// A dense copy converted to `dtype` (this tensor when the dtype already matches and
  /// it is contiguous). Float -> int truncates toward zero; -> bool is `!= 0`.
  Tensor to(DType dtype) const;
  /// Copies `src` (broadcast to this shape, converted to this dtype) into this
  /// tensor's elements in place.
  void copy_(const Tensor& src);
  /// Sets every element to `value`.
  void fill_(const Scalar& value);

  /// The single element of a one-element tensor, converted to T.
  template <Element T>
  T item() const;
  /// All elements in row-major order, converted to T.
  template <Element T>
  std::vector<T> to_vector() const;

  /// MindSpore-style text: `Tensor(shape=[2, 3], dtype=Float32, value=\n[[...]])`,
  /// summarized with "..." past 1000 elements.
  std::string to_string() const;

 private:
  void check_defined(const char* what) const;
  DType dtype_ = DType::Float32;
  std::int32_t sym_ = -1;
  std::uint32_t trace_ = 0;
  Shape shape_;
  DimVector strides_;
  std::int64_t offset_ = 0;
  std::int64_t numel_ = 0;
  std::shared_ptr<Storage> storage_;
};

/// Prints `t.to_string()`.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---------------------------------------------------------------- creation
/// Uninitialized dense tensor.
Tensor empty(const Shape& shape, DType dtype = float32);
/// Zero-filled dense tensor: `ms::zeros({2, 3})`.
Tensor zeros(const Shape& shape, DType dtype = float32);
/// One-filled dense tensor: `ms::ones({2, 3}, ms::int64)`.
Tensor ones(const Shape& shape, DType dtype = float32);
/// Every element `value`; the dtype defaults to the value's own (float32 for
/// a floating literal, int64 for an integer one, bool for bool).
Tensor full(const Shape& shape, const Scalar& value);
/// As full(shape, value), converted to `dtype`.
Tensor full(const Shape& shape, const Scalar& value, DType dtype);
/// An uninitialized tensor with the dtype and shape of `t`.
Tensor empty_like(const Tensor& t);
/// A zero tensor with the dtype and shape of `t`.
Tensor zeros_like(const Tensor& t);
/// A one tensor with the dtype and shape of `t`.
Tensor ones_like(const Tensor& t);
/// start, start+step, ... < stop (1-D), built in `dtype`: NumPy's length
/// (ceil((stop - start) / step)); element i is start + i * step in double
/// rounded once to `dtype`, or exact integer arithmetic for an integer dtype
/// with integral start and step. ValueError for step 0 or a huge count.
Tensor arange(double start, double stop, double step = 1.0, DType dtype = float32);
/// Identity matrix n x m (m = n when omitted).
Tensor eye(std::int64_t n, std::int64_t m = -1, DType dtype = float32);
/// A tensor owning a copy of `values` with `shape` (element counts must match).
template <Element T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape);
/// A 1-D tensor owning a copy of `values`.
template <Element T>
Tensor from_vector(const std::vector<T>& values) {
  return from_vector(values, Shape{static_cast<std::int64_t>(values.size())});
}
/// @{
/// Literals, as LibTorch's `torch::tensor`: floating literals give float32,
/// integer literals int64, bool bool, unless a dtype is given.
/// `ms::tensor({1.f, 2.f})`, `ms::tensor({{1, 2}, {3, 4}}, ms::float64)`.
Tensor tensor(const Scalar& value);
Tensor tensor(const Scalar& value, DType dtype);
Tensor tensor(std::initializer_list<Scalar> values);
Tensor tensor(std::initializer_list<Scalar> values, DType dtype);
Tensor tensor(std::initializer_list<std::initializer_list<Scalar>> values);
Tensor tensor(std::initializer_list<std::initializer_list<Scalar>> values, DType dtype);
/// @}

/// |a - b| <= atol + rtol * |b| elementwise, shapes broadcast; NaNs are equal
/// only with `equal_nan`. Compared in double (complex: by modulus).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);

// ---------------------------------------------------------------- templates

namespace detail {
/// Copies `src` into `dst` (same shape, any dtypes, any strides), converting.
void copy_convert(const Tensor& src, const Tensor& dst);

/// `t` as a dense tensor of `dtype`: `t` itself when it already is one, else
/// a converted copy. Always eager: the stages below ops use it where they need
/// dense values (Tensor::to, an op, also records a cast while tracing).
Tensor to_dense(const Tensor& t, DType dtype);
/// `t` broadcast to `shape` as a stride-0 view, eagerly. `shape` must be a
/// valid broadcast target of t's shape (no -1): callers have checked it.
Tensor expand_view(const Tensor& t, const Shape& shape);
/// `t` with its axes reordered (a view), eagerly. `axes` must be a
/// permutation of [0, rank) (non-negative): callers have checked it.
Tensor permute_view(const Tensor& t, std::span<const std::int64_t> axes);
/// True while ms::jit traces on this thread: in-place writes (copy_, fill_)
/// then become update nodes even on concrete tensors (parameters).
bool tracing_active();
void set_tracing_active(bool on);
/// Runs eagerly for its scope (reading a captured tensor's values while tracing).
struct TracingSuspend {
  bool prev;
  TracingSuspend() : prev(tracing_active()) { set_tracing_active(false); }
  ~TracingSuspend() { set_tracing_active(prev); }
  TracingSuspend(const TracingSuspend&) = delete;
  TracingSuspend& operator=(const TracingSuspend&) = delete;
};
}  // namespace detail

template <Element T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  const std::int64_t n = shape_numel(shape, "from_vector");
  MS_CHECK(n == static_cast<std::int64_t>(values.size()), ShapeError, "from_vector: shape ", shape,
           " holds ", n, " elements but ", values.size(), " values were given");
  Tensor t = empty(shape, dtype_of<T>);
  T* out = t.data<T>();
  for (const T& v : values) *out++ = v;
  return t;
}

template <Element T>
std::vector<T> Tensor::to_vector() const {
  check_defined("Tensor::to_vector");
  const Tensor c = detail::to_dense(*this, dtype_of<T>);
  const T* p = c.data<T>();
  return std::vector<T>(p, p + numel_);
}

template <Element T>
T Tensor::item() const {
  check_defined("Tensor::item");
  MS_CHECK(numel_ == 1, ValueError, "Tensor::item: tensor of shape ", shape_, " has ", numel_,
           " elements; item() needs exactly one");
  return to_vector<T>()[0];
}

// item and to_vector of the usual element types are compiled once, in libms
// (src/core/tensor.cpp), not in every translation unit that reads a value.
/// \cond INTERNAL
#define MS_TENSOR_ELEMENT_TYPES(X) \
  X(bool)                          \
  X(std::int8_t)                   \
  X(std::int16_t)                  \
  X(std::int32_t) X(std::int64_t) X(std::uint8_t) X(float16_t) X(bfloat16_t) X(float) X(double)
#define MS_TENSOR_ELEMENT_ACCESS(T)          \
  extern template T Tensor::item<T>() const; \
  extern template std::vector<T> Tensor::to_vector<T>() const;
MS_TENSOR_ELEMENT_TYPES(MS_TENSOR_ELEMENT_ACCESS)
#undef MS_TENSOR_ELEMENT_ACCESS
/// \endcond

}  // namespace ms
