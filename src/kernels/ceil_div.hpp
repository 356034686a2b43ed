// src/kernels/ceil_div.hpp — private to src/kernels: integer division rounding
// up, for tiles and the taps of convolution and pooling windows.
#pragma once

#include <cstdint>

namespace ms::kernels::detail {

// ceil(a / b) for a >= 0, b > 0, without overflow for b near 2^63.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

}  // namespace ms::kernels::detail
