// src/kernels/transpose.hpp — private to src/kernels: a transpose of 32-bit
// words by SIMD packets, for the packing of src/kernels/gemm_libxsmm.cpp and
// the transposed key blocks of src/kernels/attention.cpp.
#pragma once

#include <cstdint>

#include "ms/core/detail/eigen.hpp"

namespace ms::kernels::detail {

// out[c][r] = in[r][c] for a rows x cols block of 32-bit words (floats, or
// pairs of bfloat16), by square blocks of SIMD packets transposed in
// registers (Eigen's ptranspose; libxsmm_otrans ran at 0.5 ns per float
// here), the edges one by one. Moves only: the bits are kept.
// (Eigen's packet types carry vector attributes that a template argument drops.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
inline void transpose32(const float* in, std::int64_t ldi, std::int64_t rows, std::int64_t cols,
                        float* out, std::int64_t ldo) {
  using P = Eigen::internal::packet_traits<float>::type;
  constexpr std::int64_t PS = Eigen::internal::unpacket_traits<P>::size;
  const std::int64_t r_full = rows / PS * PS, c_full = cols / PS * PS;
  for (std::int64_t r = 0; r < r_full; r += PS)
    for (std::int64_t c = 0; c < c_full; c += PS) {
      Eigen::internal::PacketBlock<P, PS> blk;
      for (std::int64_t i = 0; i < PS; ++i)
        blk.packet[i] = Eigen::internal::ploadu<P>(in + (r + i) * ldi + c);
      Eigen::internal::ptranspose(blk);
      for (std::int64_t i = 0; i < PS; ++i)
        Eigen::internal::pstoreu(out + (c + i) * ldo + r, blk.packet[i]);
    }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = r < r_full ? c_full : 0; c < cols; ++c)
      out[c * ldo + r] = in[r * ldi + c];
}
#pragma GCC diagnostic pop

}  // namespace ms::kernels::detail
