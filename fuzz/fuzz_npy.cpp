// libFuzzer target: ms::io::from_npy_bytes (the .npy preamble, header dict and data).
// Any ms::Error is an accepted rejection; anything else (a crash, a sanitizer
// report, another exception, a leak) is a bug. Seeds: fuzz/corpus/npy/.
#include <cstddef>
#include <cstdint>
#include <ms/io/npy.hpp>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    (void)ms::io::from_npy_bytes(bytes);
  } catch (const ms::Error&) {
  }
  return 0;
}
