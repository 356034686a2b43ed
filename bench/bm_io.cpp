// bench/bm_io.cpp — loading checkpoints: the safetensors header parse, in time
// linear in the number of tensors, against a plain nlohmann-json parse of the
// same header (LibTorch has no safetensors loader; the JSON parse is the floor
// of any loader built on nlohmann-json, which ms's is).
//
//   BM_Safetensors_LoadHeader/tensors:N  io::from_safetensors_bytes of a file of N
//                                        one-byte tensors: the header validated
//                                        (UTF-8, duplicate keys, dtypes, shapes,
//                                        offsets tiling the data) and N tensors made
//   BM_Safetensors_JsonParse/tensors:N   nlohmann::json::parse of the same header text
//
// Linear means the same time per tensor (items_per_second) at 10k, 100k and 1M
// tensors; the header of 1M tensors is 74 MB, under the format's 100 MB limit.
#include <benchmark/benchmark.h>
#include <algorithm>

#include <cstdint>
#include <map>
#include <ms/io/safetensors.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

/// The header text of `n` U8 tensors of shape [1], named t0, t1, ..., in data order.
std::string header_of(std::int64_t n) {
  std::string h = "{";
  h.reserve(static_cast<std::size_t>(n) * 72 + 2);
  for (std::int64_t i = 0; i < n; ++i) {
    if (i > 0) h += ',';
    const std::string s = std::to_string(i), e = std::to_string(i + 1);
    h += "\"t" + s + R"(":{"dtype":"U8","shape":[1],"data_offsets":[)" + s + "," + e + "]}";
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

/// The whole file for `n` tensors (built once per size and kept).
const std::vector<std::uint8_t>& file_of(std::int64_t n) {
  static std::map<std::int64_t, std::vector<std::uint8_t>> files;
  auto& f = files[n];
  if (f.empty()) {
    const std::string h = header_of(n);
    f.resize(8 + h.size() + static_cast<std::size_t>(n));
    for (int b = 0; b < 8; ++b) f[b] = static_cast<std::uint8_t>(h.size() >> (8 * b));
    std::copy(h.begin(), h.end(), f.begin() + 8);
  }
  return f;
}

std::string_view header_in(const std::vector<std::uint8_t>& file) {
  std::uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | file[b];
  return {reinterpret_cast<const char*>(file.data() + 8), static_cast<std::size_t>(n)};
}

void BM_Safetensors_LoadHeader(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const auto& file = file_of(n);
  for (auto _ : state) {
    ms::io::SafetensorsFile f = ms::io::from_safetensors_bytes(file);
    if (static_cast<std::int64_t>(f.tensors.size()) != n) state.SkipWithError("wrong tensor count");
    benchmark::DoNotOptimize(f.tensors.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(header_in(file).size()));
}

void BM_Safetensors_JsonParse(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::string_view text = header_in(file_of(n));
  for (auto _ : state) {
    nlohmann::json j = nlohmann::json::parse(text.begin(), text.end());
    if (static_cast<std::int64_t>(j.size()) != n) state.SkipWithError("wrong key count");
    benchmark::DoNotOptimize(j);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}

}  // namespace

BENCHMARK(BM_Safetensors_LoadHeader)
    ->ArgName("tensors")
    ->Arg(10'000)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Safetensors_JsonParse)
    ->ArgName("tensors")
    ->Arg(10'000)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
