// libFuzzer target: ms::io::from_safetensors_bytes (the safetensors header and data validation).
// Any ms::Error is an accepted rejection; anything else (a crash, a sanitizer
// report, another exception, a leak) is a bug. Seeds: fuzz/corpus/safetensors/.
#include <cstddef>
#include <cstdint>
#include <ms/io/safetensors.hpp>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    (void)ms::io::from_safetensors_bytes(bytes);
  } catch (const ms::Error&) {
  }
  return 0;
}
