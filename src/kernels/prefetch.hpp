// src/kernels/prefetch.hpp — private to src/kernels: software prefetch of a
// byte range, for the kernels whose access pattern the hardware prefetcher
// does not follow (attention's split heads, the pooling's planes ahead).
#pragma once

#include <cstddef>

namespace ms::kernels::detail {

// Asks for every cache line of [p, p + bytes), wherever p starts: for writing
// when WRITE, with __builtin_prefetch's temporal LOCALITY (0 to 3).
template <bool WRITE, int LOCALITY>
inline void prefetch_bytes(const void* p, std::size_t bytes) {
  if (bytes == 0) return;
  const auto* c = static_cast<const char*>(p);
  for (std::size_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, WRITE ? 1 : 0, LOCALITY);
  __builtin_prefetch(c + bytes - 1, WRITE ? 1 : 0, LOCALITY);  // the last line of an unaligned p
}

}  // namespace ms::kernels::detail
