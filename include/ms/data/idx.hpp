// ms/data/idx.hpp — the IDX file format of MNIST and Fashion-MNIST.
//
// Stage: data. An IDX file is a 4-byte magic (0x00 0x00 <type> <ndim>), ndim
// big-endian uint32 dims, then the elements in row-major order, big-endian.
// Type codes: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
// 0x0E float64. Files may be gzip-compressed (detected by the gzip magic).
// Everything is validated: magic, type code, ndim (1..kIdxMaxRank), the product
// of the dims (overflow-checked) and the exact file size; a bad file is an
// ms::ValueError naming the file, never a crash.
//
//   ms::Tensor images = ms::data::read_idx("/usr/share/datasets/fashion-mnist/"
//                                          "t10k-images-idx3-ubyte.gz");  // uint8 [10000, 28, 28]
//   ms::data::write_idx("/tmp/x.idx", images);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/dtype.hpp"
#include "ms/core/tensor.hpp"
#include "ms/data/gzip.hpp"

namespace ms::data {

/// The largest ndim accepted in an IDX header.
inline constexpr int kIdxMaxRank = 16;

/// The IDX type code of a dtype (0x08 for uint8, ...). ms::TypeError for a dtype
/// IDX cannot hold. Example: `ms::data::idx_type_code(ms::float32) == 0x0D`.
std::uint8_t idx_type_code(DType dtype);

/// Parses the bytes of an uncompressed IDX file into a new tensor of the matching
/// dtype (host byte order). `what` names the file in error messages.
/// Example: `ms::Tensor t = ms::data::parse_idx(bytes, "labels.idx");`
Tensor parse_idx(std::span<const std::uint8_t> bytes, std::string_view what = "IDX data");

/// Like parse_idx, but gunzips first when `bytes` starts with the gzip magic
/// (the decompressed size capped at `max_bytes`).
/// Example: `ms::Tensor t = ms::data::read_idx_bytes(gz_bytes, "labels.idx.gz");`
Tensor read_idx_bytes(std::span<const std::uint8_t> bytes, std::string_view what = "IDX data",
                      std::size_t max_bytes = kDefaultMaxBytes);

/// Reads an IDX file, gzip-compressed or not. ms::ValueError naming `path` when
/// it is missing, over `max_bytes` (raw or decompressed), or not a valid IDX file.
/// Example: `ms::Tensor y = ms::data::read_idx("train-labels-idx1-ubyte.gz");`
Tensor read_idx(const std::string& path, std::size_t max_bytes = kDefaultMaxBytes);

/// The bytes of an IDX file holding `t` (any strides; dtype one of the six IDX
/// types, rank 1..kIdxMaxRank, every dim < 2^32). Uncompressed.
/// Example: `auto bytes = ms::data::encode_idx(ms::arange(0, 6, 1, ms::int32));`
std::vector<std::uint8_t> encode_idx(const Tensor& t);

/// Writes encode_idx(t) to `path`, gzip-compressed when `path` ends in ".gz".
/// ms::ValueError naming the path when it cannot be written.
/// Example: `ms::data::write_idx("/tmp/y-idx1-ubyte.gz", labels);`
void write_idx(const std::string& path, const Tensor& t);

}  // namespace ms::data
