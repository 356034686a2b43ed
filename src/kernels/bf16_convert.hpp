// src/kernels/bf16_convert.hpp — private to src/kernels: float32 -> bfloat16
// over arrays, bitwise what ms::bfloat16_t's conversion gives element by
// element (round to nearest even; NaN -> the quiet NaN of its sign), written
// without branches so that the compiler vectorizes it (the element-by-element
// conversion, with its NaN branch, does not vectorize).
#pragma once

#include <bit>
#include <cstdint>

#include "ms/core/half.hpp"

namespace ms::kernels::detail {

/// out[i] = bfloat16_t(in[i]) for i < n.
inline void float_to_bfloat16_n(const float* in, bfloat16_t* out, std::int64_t n) {
  static_assert(sizeof(bfloat16_t) == sizeof(std::uint16_t));
  auto* o = reinterpret_cast<std::uint16_t*>(out);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t f = std::bit_cast<std::uint32_t>(in[i]);
    const auto rounded = static_cast<std::uint16_t>((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
    const auto nan = static_cast<std::uint16_t>(((f >> 16) & 0x8000u) | 0x7fc0u);
    o[i] = (f & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
  }
}

}  // namespace ms::kernels::detail
