// ms/io/npy.hpp — NumPy .npy files and .npz archives (save and validating load).
//
// Stage: io. Our own parser (xtensor's npy reader is unsafe on hostile files):
//
//   ms::io::save_npy("x.npy", x);                      // np.load("x.npy") reads it
//   ms::Tensor y = ms::io::load_npy("x.npy");
//   ms::io::save_npz("state.npz", {{"w", w}, {"b", b}}, ms::io::NpzCompression::Deflate);
//   ms::io::NamedTensors s = ms::io::load_npz("state.npz");   // np.savez / savez_compressed files
//
// .npy: magic "\x93NUMPY", version 1.0, 2.0 or 3.0, a little-endian header
// length (2 bytes for 1.0, 4 otherwise, at most 1 MiB here), then a Python
// dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } parsed
// strictly (exactly those three keys, each once; quotes ' or ", no escapes; a
// tuple of non-negative decimal integers; True/False), then exactly
// numel * itemsize bytes of data (a short or longer file is an error).
// descr: b1 i1 i2 i4 i8 u1 u2 u4 u8 f2 f4 f8 c8 c16 with byte order '<' or '='
// (little-endian), '>' (big-endian: byte-swapped on load) or '|' (1-byte types
// only); anything else (structured, strings, objects, datetimes, long double) is
// an ms::TypeError. fortran_order True is loaded as a C-contiguous tensor with
// the same values (transposed on load). bool bytes must be 0 or 1.
// Writing: version 1.0 (2.0 when the header needs it), descr '<' (or '|' for
// 1-byte types), fortran_order False, header padded to 64 bytes as NumPy does.
// bfloat16 and int4 have no NumPy dtype: saving them is an ms::TypeError.
//
// .npz: a zip archive of NAME.npy members (NumPy's savez). Written with the
// members in the given order, stored or raw-deflated, fixed timestamps (equal
// inputs give equal bytes), no zip64 (archives must stay under 4 GiB). Read:
// stored and deflated members; zip64 records (NumPy writes them); every bound
// checked; each local header must agree with its central directory entry
// (name, method, flags, CRC-32, sizes), members may not overlap, names must end
// in ".npy" and be unique, CRC-32 verified, and the decompressed sizes are
// capped, in total and in ratio to the compressed sizes (NpzLimits: a zip bomb is
// an error, not an allocation). Every failure is an ms::ValueError
// (ms::TypeError for dtypes, ms::MemoryError when the system refuses memory)
// naming the API, file and member.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/io/named_tensors.hpp"  // ms::io::NamedTensors

namespace ms::io {

/// The largest .npy header accepted (NumPy itself refuses more than 10,000 by default).
inline constexpr std::uint32_t kNpyMaxHeaderBytes = 1u << 20;

/// The NumPy descr ms writes for a dtype: "<f4", "|b1", "<c16", ...; ms::TypeError
/// for bfloat16 and int4. Example: `ms::io::npy_descr(ms::int64) == "<i8"`.
std::string npy_descr(DType dtype);

/// The .npy file contents for `tensor` (written C-contiguous).
/// Example: `std::vector<std::uint8_t> b = ms::io::to_npy_bytes(ms::ones({2, 3}));`
std::vector<std::uint8_t> to_npy_bytes(const Tensor& tensor);

/// Writes `tensor` to `path` atomically (see ms/io/file.hpp).
/// Example: `ms::io::save_npy("x.npy", x);`
void save_npy(const std::string& path, const Tensor& tensor);

/// Parses and validates a whole .npy file held in memory.
/// Example: `ms::Tensor x = ms::io::from_npy_bytes(bytes);`
Tensor from_npy_bytes(std::span<const std::uint8_t> bytes);

/// Loads `path` (the data is read straight into the tensor's storage).
/// Example: `ms::Tensor x = ms::io::load_npy("x.npy");`
Tensor load_npy(const std::string& path);

/// How save_npz stores members: as they are (np.savez) or raw-deflated (np.savez_compressed).
enum class NpzCompression { Stored, Deflate };

/// The default cap on the total decompressed size of an archive's members: 4 GiB.
inline constexpr std::int64_t kNpzDefaultMaxBytes = std::int64_t{1} << 32;

/// The largest central directory read (it is held in memory): 64 MiB, some
/// 500,000 members of NumPy's archives.
inline constexpr std::uint64_t kNpzMaxCentralDirBytes = std::uint64_t{64} << 20;

/// What loading an archive may cost, checked on the declared sizes before anything
/// is inflated (a member inflating past its declared size is an error, so they bind).
/// A deflated member may declare at most `max_ratio` times its compressed size,
/// and the archive's members together at most `max_ratio` times the archive's
/// size; sizes up to `ratio_free_bytes` are exempt from the ratio. The defaults:
/// real tensors compress at most a few times (float weights ~1.1:1, labels and
/// images under 10:1), a bomb near deflate's maximum of 1032:1; only a tensor of
/// over 64 MiB that is almost all one byte value (zeros) compresses past 100:1,
/// and loading one needs a larger `max_ratio`.
/// Example: `ms::io::load_npz("big.npz", {.max_bytes = 16LL << 30, .max_ratio = 2000});`
struct NpzLimits {
  /// Cap on the total decompressed size of the members, in bytes.
  std::int64_t max_bytes = kNpzDefaultMaxBytes;
  /// Cap on decompressed / compressed size, per member and for the whole archive.
  double max_ratio = 100;
  /// Decompressed sizes up to this many bytes are never refused for their ratio.
  std::int64_t ratio_free_bytes = std::int64_t{64} << 20;
};

/// The .npz archive for `tensors`, member "NAME.npy" per entry, in order.
/// ValueError for duplicate names, an archive over 4 GiB, undefined tensors.
/// Example: `auto b = ms::io::to_npz_bytes({{"x", x}}, ms::io::NpzCompression::Deflate);`
std::vector<std::uint8_t> to_npz_bytes(const NamedTensors& tensors,
                                       NpzCompression compression = NpzCompression::Stored);

/// Writes the archive to `path` atomically.
/// Example: `ms::io::save_npz("state.npz", {{"w", w}, {"b", b}});`
void save_npz(const std::string& path, const NamedTensors& tensors,
              NpzCompression compression = NpzCompression::Stored);

/// Parses and validates an archive in memory; the names lose their ".npy", in the
/// order of the central directory. `limits` bound what it may decompress (a
/// ValueError naming the member when exceeded; ms::MemoryError when the system
/// refuses memory). Example: `ms::io::NamedTensors s = ms::io::from_npz_bytes(bytes);`
NamedTensors from_npz_bytes(std::span<const std::uint8_t> bytes, const NpzLimits& limits = {});

/// from_npz_bytes with the default limits but a total of `max_bytes`.
/// Example: `auto s = ms::io::from_npz_bytes(bytes, std::int64_t{1} << 20);`
NamedTensors from_npz_bytes(std::span<const std::uint8_t> bytes, std::int64_t max_bytes);

/// Loads the archive `path` (see from_npz_bytes). The file is read where needed
/// (its central directory, then each member), never whole into memory, and only
/// after the sizes it declares were checked; opening does not block (a FIFO is
/// an error). Example: `ms::Tensor w = ms::io::load_npz("state.npz")[0].second;`
NamedTensors load_npz(const std::string& path, const NpzLimits& limits = {});

/// load_npz with the default limits but a total of `max_bytes`.
/// Example: `auto s = ms::io::load_npz("state.npz", std::int64_t{1} << 30);`
NamedTensors load_npz(const std::string& path, std::int64_t max_bytes);

}  // namespace ms::io
