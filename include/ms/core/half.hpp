// ms/core/half.hpp — ms's 16-bit floating storage types: float16_t and bfloat16_t.
//
// Stage: core. IEEE binary16 (float16) and bfloat16 values as they are stored
// in tensors: 16 bits, converted to and from float with round-to-nearest-even
// (the bits Eigen::half and Eigen::bfloat16 give; ms/core/detail/eigen.hpp
// maps these types onto Eigen's, of the same layout, inside libms). Values
// compute in float: arithmetic and comparisons convert both sides to float,
// arithmetic rounds the result back. Conversions are explicit both ways.
//
//   ms::float16_t h(1.0f / 3.0f);          // rounded to the nearest float16
//   float f = static_cast<float>(h);        // 0.333251953125
//   ms::bfloat16_t b = ms::bfloat16_t(2.5); // from any arithmetic type
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <ostream>
#include <type_traits>

namespace ms {

namespace detail {

#if defined(__F16C__) && (defined(__GNUC__) || defined(__clang__))
// The CPU's conversion instructions (what <immintrin.h>'s _cvtss_sh / _cvtsh_ss
// compile to), without parsing that header.
using v8hi_ = short __attribute__((vector_size(16)));
using v4sf_ = float __attribute__((vector_size(16)));
#endif

/// float -> binary16 bits, round to nearest even; NaN -> a quiet NaN.
inline std::uint16_t float_to_half_bits(float x) noexcept {
#if defined(__F16C__) && (defined(__GNUC__) || defined(__clang__))
  return static_cast<std::uint16_t>(__builtin_ia32_vcvtps2ph(v4sf_{x, 0, 0, 0}, 0)[0]);
#endif
  std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = f & 0x80000000u;
  f ^= sign;
  std::uint16_t o;
  if (f >= 0x47800000u) {  // at least 65536 (rounds to inf), inf or NaN
    o = f > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (f < 0x38800000u) {  // below 2^-14: a subnormal half or zero
    // Adding 0.5 aligns the mantissa so that the float addition rounds it (to nearest even).
    const float t = std::bit_cast<float>(f) + 0.5f;
    o = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(t) - 0x3f000000u);
  } else {
    const std::uint32_t odd = (f >> 13) & 1u;
    f += 0xc8000fffu;  // rebias the exponent (15 - 127 << 23) and add 0.5 ulp - 1
    f += odd;          // ties to even
    o = static_cast<std::uint16_t>(f >> 13);
  }
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

/// binary16 bits -> float (exact).
inline float half_bits_to_float(std::uint16_t h) noexcept {
#if defined(__F16C__) && (defined(__GNUC__) || defined(__clang__))
  return __builtin_ia32_vcvtph2ps(v8hi_{static_cast<short>(h), 0, 0, 0, 0, 0, 0, 0})[0];
#endif
  constexpr std::uint32_t shifted_exp = 0x7c00u << 13;
  std::uint32_t o = static_cast<std::uint32_t>(h & 0x7fffu) << 13;
  const std::uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {  // inf or NaN
    o += (128u - 16u) << 23;
  } else if (exp == 0) {  // zero or subnormal: renormalize through a float subtraction
    o += 1u << 23;
    o = std::bit_cast<std::uint32_t>(std::bit_cast<float>(o) - std::bit_cast<float>(113u << 23));
  }
  return std::bit_cast<float>(o | (static_cast<std::uint32_t>(h & 0x8000u) << 16));
}

/// float -> bfloat16 bits, round to nearest even; NaN -> a quiet NaN of its sign.
inline std::uint16_t float_to_bfloat16_bits(float x) noexcept {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  if (x != x) return (f & 0x80000000u) ? 0xffc0 : 0x7fc0;
  const std::uint32_t bias = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<std::uint16_t>((f + bias) >> 16);
}

/// bfloat16 bits -> float (exact).
inline float bfloat16_bits_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// The operations both 16-bit types share: explicit conversions from and to
/// arithmetic types, arithmetic and comparisons in float.
template <class Self, std::uint16_t (*ToBits)(float), float (*ToFloat)(std::uint16_t)>
struct Float16Base {
  std::uint16_t x = 0;  ///< the bits

  /// Rounds `v` (through float) to the nearest value of this type.
  template <class T>
  requires std::is_arithmetic_v<T>
  static constexpr Self from(T v) noexcept {
    Self s;
    s.x = ToBits(static_cast<float>(v));
    return s;
  }
  /// The value with these bits.
  static constexpr Self from_bits(std::uint16_t bits) noexcept {
    Self s;
    s.x = bits;
    return s;
  }
  /// The value as an arithmetic type (through float).
  template <class T>
  requires std::is_arithmetic_v<T>
  explicit operator T() const noexcept { return static_cast<T>(ToFloat(x)); }

  friend Self operator+(Self a, Self b) { return Self(float(a) + float(b)); }
  friend Self operator-(Self a, Self b) { return Self(float(a) - float(b)); }
  friend Self operator*(Self a, Self b) { return Self(float(a) * float(b)); }
  friend Self operator/(Self a, Self b) { return Self(float(a) / float(b)); }
  friend Self operator-(Self a) { return from_bits(static_cast<std::uint16_t>(a.x ^ 0x8000u)); }
  friend Self& operator+=(Self& a, Self b) { return a = a + b; }
  friend Self& operator-=(Self& a, Self b) { return a = a - b; }
  friend Self& operator*=(Self& a, Self b) { return a = a * b; }
  friend Self& operator/=(Self& a, Self b) { return a = a / b; }
  friend bool operator==(Self a, Self b) { return float(a) == float(b); }
  friend bool operator<(Self a, Self b) { return float(a) < float(b); }
  friend bool operator<=(Self a, Self b) { return float(a) <= float(b); }
  friend bool operator>(Self a, Self b) { return float(a) > float(b); }
  friend bool operator>=(Self a, Self b) { return float(a) >= float(b); }
  /// Prints the value as float prints it.
  friend std::ostream& operator<<(std::ostream& os, Self v) { return os << float(v); }
};

}  // namespace detail

/// IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits (ms::float16).
struct float16_t
    : detail::Float16Base<float16_t, detail::float_to_half_bits, detail::half_bits_to_float> {
  constexpr float16_t() = default;
  /// Rounds `v` (through float) to the nearest float16.
  template <class T>
  requires std::is_arithmetic_v<T>
  explicit float16_t(T v) noexcept { x = detail::float_to_half_bits(static_cast<float>(v)); }
};

/// bfloat16: 1 sign, 8 exponent, 7 mantissa bits, float's range (ms::bfloat16).
struct bfloat16_t : detail::Float16Base<bfloat16_t, detail::float_to_bfloat16_bits,
                                        detail::bfloat16_bits_to_float> {
  constexpr bfloat16_t() = default;
  /// Rounds `v` (through float) to the nearest bfloat16.
  template <class T>
  requires std::is_arithmetic_v<T>
  explicit bfloat16_t(T v) noexcept { x = detail::float_to_bfloat16_bits(static_cast<float>(v)); }
};

static_assert(sizeof(float16_t) == 2 && sizeof(bfloat16_t) == 2);
static_assert(std::is_trivially_copyable_v<float16_t> && std::is_trivially_copyable_v<bfloat16_t>);

}  // namespace ms

namespace std {

/// The limits of ms::float16_t (those of IEEE binary16).
template <>
class numeric_limits<ms::float16_t> {
  using T = ms::float16_t;

 public:
  /// @{
  /// Each member as the C++ standard defines it for std::numeric_limits, for IEEE
  /// binary16 (1 sign, 5 exponent and 10 fraction bits).
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int radix = 2;
  static constexpr T min() noexcept { return T::from_bits(0x0400); }
  static constexpr T lowest() noexcept { return T::from_bits(0xfbff); }
  static constexpr T max() noexcept { return T::from_bits(0x7bff); }
  static constexpr T epsilon() noexcept { return T::from_bits(0x1400); }
  static constexpr T round_error() noexcept { return T::from_bits(0x3800); }
  static constexpr T infinity() noexcept { return T::from_bits(0x7c00); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7e00); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }
  /// @}
};

/// The limits of ms::bfloat16_t.
template <>
class numeric_limits<ms::bfloat16_t> {
  using T = ms::bfloat16_t;

 public:
  /// @{
  /// Each member as the C++ standard defines it for std::numeric_limits, for
  /// bfloat16 (1 sign, 8 exponent and 7 fraction bits).
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int radix = 2;
  static constexpr T min() noexcept { return T::from_bits(0x0080); }
  static constexpr T lowest() noexcept { return T::from_bits(0xff7f); }
  static constexpr T max() noexcept { return T::from_bits(0x7f7f); }
  static constexpr T epsilon() noexcept { return T::from_bits(0x3c00); }
  static constexpr T round_error() noexcept { return T::from_bits(0x3f00); }
  static constexpr T infinity() noexcept { return T::from_bits(0x7f80); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7fc0); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }
  /// @}
};

}  // namespace std
