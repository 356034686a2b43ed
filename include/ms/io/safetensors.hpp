// ms/io/safetensors.hpp — safetensors checkpoints (save and validating load).
//
// Stage: io (the train stage saves state dicts through here). The format, as
// written by the reference implementation (huggingface/safetensors):
//   [u64 little-endian N][N bytes of JSON header, padded with spaces to a multiple of 8][data]
// The header maps each tensor name to {"dtype": "F32", "shape": [2, 3],
// "data_offsets": [begin, end]} (byte offsets into the data, row-major,
// little-endian) and may hold "__metadata__": {string: string}.
//
//   ms::io::NamedTensors state = {{"fc.weight", w}, {"fc.bias", b}};
//   ms::io::save_safetensors("model.safetensors", state, {{"format", "ms"}});
//   ms::io::SafetensorsFile f = ms::io::load_safetensors("model.safetensors");
//   ms::Tensor w2 = f.at("fc.weight");
//
// dtypes: BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64 and
// C64 (complex64) map onto the ms dtypes of the same width. ms's complex128 and
// int4 have no safetensors name (saving them is an ms::TypeError); the format's
// float8/float4/float6 types have no ms dtype (loading them is an ms::TypeError).
//
// Writing follows the reference library byte for byte where it is deterministic:
// compact JSON, "__metadata__" first (omitted when empty), then the tensors in
// data order, which is by dtype alignment (largest first) then by name; header
// padded with spaces to 8 bytes. Non-contiguous tensors are written contiguous.
//
// Loading checks everything before returning anything: header length (8 bytes
// present, at least 2 [the empty header "{}" is valid], at most 100,000,000,
// within the file), UTF-8, no NUL byte (padding is trailing spaces only, as the
// reference reader requires), a JSON object, no duplicate keys at any depth,
// known dtypes, non-negative integer shapes whose byte size does not overflow,
// data_offsets = [begin, end] integers with end - begin = numel * itemsize, the
// tensors tiling the data exactly (no overlap, no gap, nothing past the end, no
// trailing bytes), "__metadata__" string -> string, and BOOL bytes 0 or 1.
// Every failure is an ms::ValueError (ms::TypeError for a dtype ms lacks) whose
// message names the API, the file and the offending key. The header is parsed in
// time linear in its size (bench/bm_io.cpp: BM_Safetensors_LoadHeader).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/io/named_tensors.hpp"  // ms::io::NamedTensors

namespace ms::io {

/// The largest header a safetensors file may declare (the reference library's limit).
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

/// What a safetensors file holds.
struct SafetensorsFile {
  /// The tensors in the order of their data in the file (increasing data_offsets),
  /// each a dense tensor owning its memory.
  NamedTensors tensors;
  /// The "__metadata__" entries (empty when the file has none).
  std::map<std::string, std::string> metadata;

  /// The tensor named `name`; ms::ValueError listing the names when there is none.
  /// Example: `ms::Tensor w = f.at("fc.weight");`
  const Tensor& at(std::string_view name) const;
  /// True when a tensor is named `name`.
  bool contains(std::string_view name) const;
};

/// The safetensors name of a dtype ("F32", "BF16", "BOOL", "C64", ...);
/// ms::TypeError for complex128 and int4. Example: `ms::io::safetensors_dtype_name(ms::float16) ==
/// "F16"`.
std::string_view safetensors_dtype_name(DType dtype);

/// The file contents for `tensors` and `metadata` (see the header comment for
/// the layout). ValueError for duplicate names, the reserved name
/// "__metadata__", undefined or symbolic tensors; TypeError for dtypes the format lacks.
/// Example: `std::vector<std::uint8_t> b = ms::io::to_safetensors_bytes({{"x", ms::ones({2})}});`
std::vector<std::uint8_t> to_safetensors_bytes(
    const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});

/// Writes `tensors` to `path` atomically (ms/io/file.hpp: a failure part-way leaves
/// the previous file intact). Tensor data is streamed: non-contiguous tensors are
/// copied one at a time, never the whole state dict.
/// Example: `ms::io::save_safetensors("ckpt.safetensors", {{"w", w}}, {{"epoch", "3"}});`
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Parses and validates a whole safetensors file held in memory (see the header
/// comment for what is checked). Example: `auto f = ms::io::from_safetensors_bytes(bytes);`
SafetensorsFile from_safetensors_bytes(std::span<const std::uint8_t> bytes);

/// Loads `path`: the header is read and validated first, then each tensor's bytes
/// are read straight into its storage (no second copy of the file in memory).
/// Example: `ms::Tensor w = ms::io::load_safetensors("ckpt.safetensors").at("w");`
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace ms::io
