// ms/core/dtype.hpp — element types, their C++ types, and type promotion.
//
// Stage: core. Names follow MindSpore: `ms::float32`, `ms::int64`, `ms::bool_`.
// float16 and bfloat16 are ms::float16_t / ms::bfloat16_t (ms/core/half.hpp);
// they are computed in float32 and rounded on store. int4 is packed two to a byte (storage and cast
// only).
#pragma once

#include <complex>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "ms/core/error.hpp"
#include "ms/core/half.hpp"

namespace ms {

/// The element type of a tensor.
enum class DType : std::uint8_t {
  Bool,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128,
  Int4,  ///< packed two per byte, low nibble first; storage and cast only
};

/// The number of DType values (the size of a table indexed by dtype).
inline constexpr int kNumDTypes = 16;

/// The dtype DType::Bool (`ms::bool_`, as MindSpore's `mindspore.bool_`).
inline constexpr DType bool_ = DType::Bool;
/// The dtype DType::Int8 (`ms::int8`, as MindSpore's `mindspore.int8`).
inline constexpr DType int8 = DType::Int8;
/// The dtype DType::Int16 (`ms::int16`, as MindSpore's `mindspore.int16`).
inline constexpr DType int16 = DType::Int16;
/// The dtype DType::Int32 (`ms::int32`, as MindSpore's `mindspore.int32`).
inline constexpr DType int32 = DType::Int32;
/// The dtype DType::Int64 (`ms::int64`, as MindSpore's `mindspore.int64`).
inline constexpr DType int64 = DType::Int64;
/// The dtype DType::UInt8 (`ms::uint8`, as MindSpore's `mindspore.uint8`).
inline constexpr DType uint8 = DType::UInt8;
/// The dtype DType::UInt16 (`ms::uint16`, as MindSpore's `mindspore.uint16`).
inline constexpr DType uint16 = DType::UInt16;
/// The dtype DType::UInt32 (`ms::uint32`, as MindSpore's `mindspore.uint32`).
inline constexpr DType uint32 = DType::UInt32;
/// The dtype DType::UInt64 (`ms::uint64`, as MindSpore's `mindspore.uint64`).
inline constexpr DType uint64 = DType::UInt64;
/// The dtype DType::Float16 (`ms::float16`, as MindSpore's `mindspore.float16`).
inline constexpr DType float16 = DType::Float16;
/// The dtype DType::BFloat16 (`ms::bfloat16`, as MindSpore's `mindspore.bfloat16`).
inline constexpr DType bfloat16 = DType::BFloat16;
/// The dtype DType::Float32 (`ms::float32`, as MindSpore's `mindspore.float32`).
inline constexpr DType float32 = DType::Float32;
/// The dtype DType::Float64 (`ms::float64`, as MindSpore's `mindspore.float64`).
inline constexpr DType float64 = DType::Float64;
/// The dtype DType::Complex64 (`ms::complex64`, as MindSpore's `mindspore.complex64`).
inline constexpr DType complex64 = DType::Complex64;
/// The dtype DType::Complex128 (`ms::complex128`, as MindSpore's `mindspore.complex128`).
inline constexpr DType complex128 = DType::Complex128;
/// The dtype DType::Int4 (packed two per byte; storage and cast only).
inline constexpr DType int4 = DType::Int4;

// MindSpore's other names for the same dtypes (mindspore/common/dtype.py).
/// `ms::byte`: int8 (MindSpore's `mindspore.byte`).
inline constexpr DType byte = int8;
/// `ms::short_`: int16 (MindSpore's `mindspore.short`; `short` is a C++ keyword).
inline constexpr DType short_ = int16;
/// `ms::intc`: int32 (MindSpore's `mindspore.intc`).
inline constexpr DType intc = int32;
/// `ms::intp`: int64 (MindSpore's `mindspore.intp`).
inline constexpr DType intp = int64;
/// `ms::ubyte`: uint8 (MindSpore's `mindspore.ubyte`).
inline constexpr DType ubyte = uint8;
/// `ms::ushort`: uint16 (MindSpore's `mindspore.ushort`).
inline constexpr DType ushort = uint16;
/// `ms::uintc`: uint32 (MindSpore's `mindspore.uintc`).
inline constexpr DType uintc = uint32;
/// `ms::uintp`: uint64 (MindSpore's `mindspore.uintp`).
inline constexpr DType uintp = uint64;
/// `ms::half`: float16 (MindSpore's `mindspore.half`).
inline constexpr DType half = float16;
/// `ms::single`: float32 (MindSpore's `mindspore.single`).
inline constexpr DType single = float32;
/// `ms::double_`: float64 (MindSpore's `mindspore.double`; `double` is a C++ keyword).
inline constexpr DType double_ = float64;
/// `ms::qint4x2`: int4, two per byte (MindSpore's `mindspore.qint4x2`).
inline constexpr DType qint4x2 = int4;
// MindSpore's `int_`, `uint` and `float_` are the generic types "any int",
// "any unsigned int", "any float" (typing.kInt, kUInt, kFloat), not dtypes a
// tensor can have. ms has only concrete dtypes, so they name NumPy's defaults
// for those kinds (numpy.int_, numpy.uint, numpy.float_): 64 bits each.
/// `ms::int_`: int64 (NumPy's `int_`; MindSpore's `int_` is the generic int type).
inline constexpr DType int_ = int64;
/// `ms::uint`: uint64 (NumPy's `uint`; MindSpore's `uint` is the generic unsigned type).
inline constexpr DType uint = uint64;
/// `ms::float_`: float64 (NumPy's `float_`; MindSpore's `float_` is the generic float type).
inline constexpr DType float_ = float64;

/// The C++ type of complex64 elements.
using complex64_t = std::complex<float>;
/// The C++ type of complex128 elements.
using complex128_t = std::complex<double>;

/// MindSpore's spelling of a dtype, as printed in tensors: "Float32", "Int64", "Bool".
constexpr std::string_view dtype_name(DType t) {
  constexpr std::string_view names[] = {
      "Bool",   "Int8",    "Int16",    "Int32",   "Int64",   "UInt8",     "UInt16",     "UInt32",
      "UInt64", "Float16", "BFloat16", "Float32", "Float64", "Complex64", "Complex128", "Int4"};
  return names[static_cast<int>(t)];
}

/// Prints dtype_name(t).
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

/// Bytes per element; 0 for int4, whose size is given by `dtype_nbytes`.
constexpr std::int64_t dtype_itemsize(DType t) {
  constexpr std::int64_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16, 0};
  return sizes[static_cast<int>(t)];
}

/// True for bool_.
constexpr bool dtype_is_bool(DType t) { return t == DType::Bool; }
/// True for int4, int8, int16, int32 and int64.
constexpr bool dtype_is_signed_int(DType t) {
  return t == DType::Int8 || t == DType::Int16 || t == DType::Int32 || t == DType::Int64 ||
         t == DType::Int4;
}
/// True for uint8, uint16, uint32 and uint64.
constexpr bool dtype_is_unsigned_int(DType t) {
  return t == DType::UInt8 || t == DType::UInt16 || t == DType::UInt32 || t == DType::UInt64;
}
/// Integral, bool excluded.
constexpr bool dtype_is_int(DType t) { return dtype_is_signed_int(t) || dtype_is_unsigned_int(t); }
/// True for float16, bfloat16, float32 and float64.
constexpr bool dtype_is_float(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
/// True for complex64 and complex128.
constexpr bool dtype_is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }

/// The type kernels compute in for a stored dtype: half types in float32,
/// small integers and bool in int32, uint32 in int64; others as themselves.
constexpr DType dtype_compute(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16: return DType::Float32;
    case DType::Bool:
    case DType::Int8:
    case DType::Int16:
    case DType::UInt8:
    case DType::UInt16:
    case DType::Int4: return DType::Int32;
    case DType::UInt32: return DType::Int64;
    default: return t;
  }
}

/// Type promotion of two tensor dtypes (as NumPy / PyTorch):
/// bool < integers < floating < complex; within a kind the wider wins;
/// int + float -> the float; f16 + bf16 -> f32; signed + unsigned of the same
/// width -> the next wider signed type (uint64 + signed -> int64); int4 acts as int8.
DType promote_types(DType a, DType b);

/// The kind of a C++ scalar operand, for `tensor op scalar` promotion.
enum class ScalarKind : std::uint8_t { Bool, Int, Float, Complex };

/// Promotion of a tensor dtype with a scalar of the given kind: a scalar only
/// lifts the kind (int tensor + 2.5 -> float32; float16 tensor * 2.0 -> float16;
/// int32 tensor + 5 -> int32), as PyTorch does for Python numbers.
DType promote_with_scalar(DType t, ScalarKind k);

// ------------------------------------------------------------- C++ types

/// A C++ type as a value, for dtype_dispatch: `typename std::decay_t<decltype(tag)>::type`.
template <class T>
struct TypeTag {
  /// The C++ type.
  using type = T;
};

namespace detail {
template <DType D>
struct dtype_cpp;
#define MS_DTYPE_CPP(D, T) \
  template <>              \
  struct dtype_cpp<D> {    \
    using type = T;        \
  };
MS_DTYPE_CPP(DType::Bool, bool)
MS_DTYPE_CPP(DType::Int8, std::int8_t)
MS_DTYPE_CPP(DType::Int16, std::int16_t)
MS_DTYPE_CPP(DType::Int32, std::int32_t)
MS_DTYPE_CPP(DType::Int64, std::int64_t)
MS_DTYPE_CPP(DType::UInt8, std::uint8_t)
MS_DTYPE_CPP(DType::UInt16, std::uint16_t)
MS_DTYPE_CPP(DType::UInt32, std::uint32_t)
MS_DTYPE_CPP(DType::UInt64, std::uint64_t)
MS_DTYPE_CPP(DType::Float16, float16_t)
MS_DTYPE_CPP(DType::BFloat16, bfloat16_t)
MS_DTYPE_CPP(DType::Float32, float)
MS_DTYPE_CPP(DType::Float64, double)
MS_DTYPE_CPP(DType::Complex64, complex64_t)
MS_DTYPE_CPP(DType::Complex128, complex128_t)
#undef MS_DTYPE_CPP
}  // namespace detail

/// The C++ element type of a dtype: `ms::cpp_type<ms::float32>` is `float`.
template <DType D>
using cpp_type = typename detail::dtype_cpp<D>::type;

/// The dtype of a C++ element type: `ms::dtype_of<float>` is `ms::float32`.
template <class T>
inline constexpr DType dtype_of = [] {
  if constexpr (std::is_same_v<T, bool>)
    return DType::Bool;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return DType::Int8;
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return DType::Int16;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DType::Int32;
  else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, long long>)
    return DType::Int64;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return DType::UInt8;
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return DType::UInt16;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return DType::UInt32;
  else if constexpr (std::is_same_v<T, std::uint64_t> || std::is_same_v<T, unsigned long long>)
    return DType::UInt64;
  else if constexpr (std::is_same_v<T, float16_t>)
    return DType::Float16;
  else if constexpr (std::is_same_v<T, bfloat16_t>)
    return DType::BFloat16;
  else if constexpr (std::is_same_v<T, float>)
    return DType::Float32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::Float64;
  else if constexpr (std::is_same_v<T, complex64_t>)
    return DType::Complex64;
  else if constexpr (std::is_same_v<T, complex128_t>)
    return DType::Complex128;
  else
    static_assert(sizeof(T) == 0, "ms::dtype_of: T is not an ms element type");
}();

/// True for the C++ element types that map onto a dtype.
template <class T>
concept Element = requires {
  dtype_of<T>;
}
&&std::is_trivially_copyable_v<T>;

/// Calls `f(ms::TypeTag<T>{})` with the C++ type of `t`; int4 has no element
/// type and raises TypeError naming `what`:
///
///     ms::dtype_dispatch(t, [&](auto tag) {
///       using T = typename std::decay_t<decltype(tag)>::type;
///       ...
///     });
template <class F>
decltype(auto) dtype_dispatch(DType t, F&& f, std::string_view what = "dtype_dispatch") {
  switch (t) {
    case DType::Bool: return f(TypeTag<bool>{});
    case DType::Int8: return f(TypeTag<std::int8_t>{});
    case DType::Int16: return f(TypeTag<std::int16_t>{});
    case DType::Int32: return f(TypeTag<std::int32_t>{});
    case DType::Int64: return f(TypeTag<std::int64_t>{});
    case DType::UInt8: return f(TypeTag<std::uint8_t>{});
    case DType::UInt16: return f(TypeTag<std::uint16_t>{});
    case DType::UInt32: return f(TypeTag<std::uint32_t>{});
    case DType::UInt64: return f(TypeTag<std::uint64_t>{});
    case DType::Float16: return f(TypeTag<float16_t>{});
    case DType::BFloat16: return f(TypeTag<bfloat16_t>{});
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    case DType::Complex64: return f(TypeTag<complex64_t>{});
    case DType::Complex128: return f(TypeTag<complex128_t>{});
    case DType::Int4: break;
  }
  detail::raise<TypeError>(what, ": dtype Int4 is packed (storage and cast only); cast it first");
}

namespace detail {

/// A floating value converted to the integer type `To` as NumPy's casts
/// convert it on x86-64 (the C conversion its Linux builds compile for the
/// SSE2 baseline), computed without undefined behaviour: in range, the value
/// truncated toward zero. Otherwise (NaN, infinities, values out of range):
/// int64 gives INT64_MIN and int32 gives INT32_MIN (the CPU's "integer
/// indefinite"); int8, int16, uint8 and uint16 convert through int32 and keep
/// its low bits (NaN -> 0, 300.0 -> int8 44, -1.0 -> uint8 255); uint32
/// converts through int64 and keeps its low 32 bits (NaN -> 0, -1.0 ->
/// 4294967295); uint64 takes x < 2^63 through int64 (NaN and -inf -> 2^63,
/// -1.0 -> 2^64 - 1) and x >= 2^63 as int64(x - 2^63) + 2^63 (+inf -> 0).
/// Example: `ms::detail::float_to_int<std::int32_t>(NAN) == INT32_MIN`.
template <class To>
constexpr To float_to_int(double x) {
  static_assert(std::is_integral_v<To> && !std::is_same_v<To, bool>);
  constexpr double k2p31 = 2147483648.0, k2p63 = 9223372036854775808.0;
  if constexpr (sizeof(To) == 8 && std::is_signed_v<To>) {
    // !(in range) is also true for NaN.
    if (!(x >= -k2p63 && x < k2p63)) return static_cast<To>(INT64_MIN);
    return static_cast<To>(x);  // trunc(x) fits: defined
  } else if constexpr (sizeof(To) == 4 && std::is_signed_v<To>) {
    if (!(x > -k2p31 - 1.0 && x < k2p31)) return static_cast<To>(INT32_MIN);
    return static_cast<To>(x);
  } else if constexpr (sizeof(To) < 4) {
    // Modular since C++20: the low bits of the int32 result.
    return static_cast<To>(float_to_int<std::int32_t>(x));
  } else if constexpr (sizeof(To) == 4) {
    return static_cast<To>(static_cast<std::uint64_t>(float_to_int<std::int64_t>(x)));
  } else {
    if (!(x >= k2p63)) return static_cast<To>(float_to_int<std::int64_t>(x));
    return static_cast<To>(static_cast<std::uint64_t>(float_to_int<std::int64_t>(x - k2p63)) ^
                           (std::uint64_t{1} << 63));
  }
}

template <class T>
inline constexpr bool is_cast_float_v =
    std::is_floating_point_v<T> || std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

}  // namespace detail

/// Converts between element types the way a cast does: complex -> real drops
/// the imaginary part; float -> int truncates toward zero, and NaN, infinities
/// and values out of range give NumPy's values (detail::float_to_int, never
/// undefined behaviour); anything -> bool is `!= 0`.
template <class To, class From>
inline To scalar_cast(const From& v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool> &&
                       detail::is_cast_float_v<From>) {
    if constexpr (std::is_floating_point_v<From>)
      return detail::float_to_int<To>(static_cast<double>(v));
    else
      return detail::float_to_int<To>(static_cast<double>(static_cast<float>(v)));
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, complex64_t> || std::is_same_v<From, complex128_t>)
      return v.real() != 0 || v.imag() != 0;
    else
      return static_cast<float>(v) != 0.0f || static_cast<double>(v) != 0.0;
  } else if constexpr (std::is_same_v<From, complex64_t> || std::is_same_v<From, complex128_t>) {
    if constexpr (std::is_same_v<To, complex64_t> || std::is_same_v<To, complex128_t>)
      return To(static_cast<typename To::value_type>(v.real()),
                static_cast<typename To::value_type>(v.imag()));
    else if constexpr (std::is_integral_v<To>)
      return detail::float_to_int<To>(static_cast<double>(v.real()));
    else
      return static_cast<To>(v.real());
  } else if constexpr (std::is_same_v<To, complex64_t> || std::is_same_v<To, complex128_t>) {
    return To(static_cast<typename To::value_type>(static_cast<double>(v)), 0);
  } else if constexpr (std::is_same_v<From, float16_t> || std::is_same_v<From, bfloat16_t>) {
    return static_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, float16_t> || std::is_same_v<To, bfloat16_t>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ms
