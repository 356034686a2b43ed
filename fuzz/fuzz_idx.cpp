// libFuzzer target: the IDX reader (ms::data::read_idx_bytes), gzip'd or not.
// Any input must either parse or raise an ms::Error; anything else (a crash, a
// sanitizer report, another exception, a huge allocation) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ms/data/gzip.hpp>
#include <ms/data/idx.hpp>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const std::span<const std::uint8_t> bytes(data, size);
    // A 16 MiB cap on the decompressed size keeps every run small.
    constexpr std::size_t kCap = 16 << 20;
    const ms::Tensor t = ms::data::read_idx_bytes(bytes, "fuzz", kCap);
    // What parsed is exactly what encode_idx writes back (the format has one
    // encoding per tensor): compare with the decompressed input.
    if (ms::data::encode_idx(t) != ms::data::gunzip(bytes, kCap, "fuzz")) std::abort();
  } catch (const ms::Error&) {
  }
  return 0;
}
