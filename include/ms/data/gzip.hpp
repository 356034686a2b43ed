// ms/data/gzip.hpp — reading whole files, gunzipping them (both with a size cap), gzipping.
//
// Stage: data (the IDX reader and Fashion-MNIST build on it; the io stage may
// too). Nothing here trusts its input: a missing file, a file over the cap, a
// truncated or corrupt gzip stream and a "gzip bomb" that inflates past the cap
// are each an ms::Error naming the file, never a crash or an unbounded allocation.
//
//   std::vector<std::uint8_t> raw = ms::data::read_file("train-labels-idx1-ubyte.gz", 1 << 20);
//   std::vector<std::uint8_t> idx = ms::data::gunzip(raw, 64 << 20, "train-labels-idx1-ubyte.gz");
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/error.hpp"

namespace ms::data {

/// The default cap (bytes) on a file read and on a decompressed size: 1 GiB,
/// twenty times Fashion-MNIST's largest file.
inline constexpr std::size_t kDefaultMaxBytes = std::size_t{1} << 30;

/// True when `bytes` starts with the gzip magic 0x1f 0x8b.
/// Example: `ms::data::is_gzip(bytes) ? ms::data::gunzip(bytes, cap, path) : bytes`.
bool is_gzip(std::span<const std::uint8_t> bytes);

/// Decompresses a gzip file's bytes (one or more concatenated members, each
/// checked against its CRC-32 and length trailer) with zlib. Bytes that do not
/// start with the gzip magic are returned unchanged, so uncompressed files pass
/// through. ms::ValueError naming `what` (a file name, for messages) when the
/// output would exceed `max_out` bytes, when the stream is truncated or corrupt,
/// or when bytes other than another gzip member follow a member. The output grows
/// as zlib produces it; the size a trailer claims is never allocated up front.
/// Example: `auto idx = ms::data::gunzip(raw, 64 << 20, "t10k-labels-idx1-ubyte.gz");`
std::vector<std::uint8_t> gunzip(std::span<const std::uint8_t> bytes, std::size_t max_out,
                                 std::string_view what);

/// Compresses `bytes` into one gzip member with zlib at `level` (0 = stored to
/// 9 = best; ms::ValueError otherwise). `gunzip(gzip(b), ...)` gives back `b`.
/// Example: `auto gz = ms::data::gzip(ms::data::encode_idx(labels));`
std::vector<std::uint8_t> gzip(std::span<const std::uint8_t> bytes, int level = 6);

/// The whole content of the regular file at `path`. ms::ValueError naming the
/// path when it is missing, unreadable, not a regular file (a FIFO is an error,
/// not a wait for a writer) or larger than `max_bytes`, or when it shrinks while
/// being read.
/// Example: `auto raw = ms::data::read_file("/tmp/x.idx", ms::data::kDefaultMaxBytes);`
std::vector<std::uint8_t> read_file(const std::string& path,
                                    std::size_t max_bytes = kDefaultMaxBytes);

}  // namespace ms::data
