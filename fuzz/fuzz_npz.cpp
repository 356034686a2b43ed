// libFuzzer target: ms::io::from_npz_bytes (zip structure, inflate, CRC and the .npy members),
// with a 64 MiB decompression cap (libFuzzer's default RSS limit is 2 GiB) and the
// compression-ratio limits applied from 1 MiB on (the default exempts 64 MiB, which
// would leave them unreached by inputs of fuzzing size).
// Any ms::Error is an accepted rejection; anything else (a crash, a sanitizer
// report, another exception, a leak) is a bug. Seeds: fuzz/corpus/npz/.
#include <cstddef>
#include <cstdint>
#include <ms/io/npy.hpp>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    (void)ms::io::from_npz_bytes(
        bytes, ms::io::NpzLimits{.max_bytes = std::int64_t{64} << 20, .ratio_free_bytes = 1 << 20});
  } catch (const ms::Error&) {
  }
  return 0;
}
