// libFuzzer target: ms::data::gunzip with a cap on the decompressed size.
// Any input must either decompress within the cap or raise an ms::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ms/core/error.hpp>
#include <ms/data/gzip.hpp>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kCap = 1 << 20;
  try {
    const auto out = ms::data::gunzip(std::span<const std::uint8_t>(data, size), kCap, "fuzz");
    if (out.size() > kCap) std::abort();  // the cap is a guarantee
    // A round trip through gzip gives the same bytes.
    if (ms::data::gunzip(ms::data::gzip(out, 1), kCap, "roundtrip") != out) std::abort();
  } catch (const ms::Error&) {
  }
  return 0;
}
