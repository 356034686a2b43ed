// The IDX reader and writer (see ms/data/idx.hpp).
#include "ms/data/idx.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <system_error>

#include "ms/core/error.hpp"

namespace ms::data {
namespace {

struct IdxType {
  std::uint8_t code;
  DType dtype;
};
constexpr IdxType kIdxTypes[] = {{0x08, DType::UInt8},   {0x09, DType::Int8},
                                 {0x0B, DType::Int16},   {0x0C, DType::Int32},
                                 {0x0D, DType::Float32}, {0x0E, DType::Float64}};

std::string hex_byte(std::uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", static_cast<unsigned>(b));
  return buf;
}

std::uint32_t load_be32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
         static_cast<std::uint32_t>(p[2]) << 8 | static_cast<std::uint32_t>(p[3]);
}

/// Copies `n` elements of `size` bytes from big-endian `src` to host-order `dst`.
void copy_from_big_endian(const std::uint8_t* src, std::byte* dst, std::size_t n,
                          std::size_t size) {
  if (size == 1 || std::endian::native == std::endian::big) {
    std::memcpy(dst, src, n * size);
    return;
  }
  // Byte reversal per element; memcpy keeps it free of alignment assumptions
  // and compiles to a load + bswap.
  for (std::size_t i = 0; i < n; ++i, src += size, dst += size) {
    if (size == 2) {
      std::uint16_t v;
      std::memcpy(&v, src, 2);
      v = __builtin_bswap16(v);
      std::memcpy(dst, &v, 2);
    } else if (size == 4) {
      std::uint32_t v;
      std::memcpy(&v, src, 4);
      v = __builtin_bswap32(v);
      std::memcpy(dst, &v, 4);
    } else {
      std::uint64_t v;
      std::memcpy(&v, src, 8);
      v = __builtin_bswap64(v);
      std::memcpy(dst, &v, 8);
    }
  }
}

}  // namespace

std::uint8_t idx_type_code(DType dtype) {
  for (const IdxType& t : kIdxTypes)
    if (t.dtype == dtype) return t.code;
  detail::raise<TypeError>(
      "idx_type_code: IDX files hold uint8, int8, int16, int32, float32 or "
      "float64, got dtype ",
      dtype);
}

Tensor parse_idx(std::span<const std::uint8_t> bytes, std::string_view what) {
  const std::size_t n = bytes.size();
  MS_CHECK(n >= 4, ValueError, what, ": not an IDX file: ", n,
           " bytes is shorter than the 4-byte magic");
  MS_CHECK(!is_gzip(bytes), ValueError, what,
           ": gzip-compressed data given to parse_idx (use read_idx or read_idx_bytes)");
  MS_CHECK(bytes[0] == 0 && bytes[1] == 0, ValueError, what, ": not an IDX file: magic starts ",
           hex_byte(bytes[0]), " ", hex_byte(bytes[1]), ", expected 0x00 0x00 <type> <ndim>");
  const std::uint8_t code = bytes[2];
  DType dtype = DType::UInt8;
  bool known = false;
  for (const IdxType& t : kIdxTypes)
    if (t.code == code) dtype = t.dtype, known = true;
  MS_CHECK(known, ValueError, what, ": unknown IDX type code ", hex_byte(code),
           " (expected 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32 or 0x0E "
           "float64)");
  const int ndim = bytes[3];
  MS_CHECK(ndim >= 1 && ndim <= kIdxMaxRank, ValueError, what, ": IDX ndim ", ndim,
           " is out of range (expected 1 to ", kIdxMaxRank, ")");
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(ndim);
  MS_CHECK(n >= header, ValueError, what, ": truncated IDX header: ", ndim, " dims need ", header,
           " bytes, the file has ", n);

  std::vector<std::int64_t> dims(static_cast<std::size_t>(ndim));
  const auto itemsize = static_cast<std::uint64_t>(dtype_itemsize(dtype));
  // Elements and bytes, overflow-checked in 64 bits (a dim is < 2^32, the product is not).
  for (int i = 0; i < ndim; ++i)
    dims[static_cast<std::size_t>(i)] = load_be32(bytes.data() + 4 + 4 * i);
  // The product of the nonzero dims must fit int64 even when a zero dim makes
  // the tensor empty (ms's shape rule, shape_numel); the count is 0 then.
  std::uint64_t count = 1;
  for (std::int64_t d : dims)
    MS_CHECK(
        d == 0 || (!__builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count) &&
                   count <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())),
        ValueError, what, ": IDX dims ", Shape(dims), " overflow the element count");
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) count = 0;
  std::uint64_t data_bytes = 0;
  MS_CHECK(!__builtin_mul_overflow(count, itemsize, &data_bytes) &&
               data_bytes <= std::numeric_limits<std::uint64_t>::max() - header,
           ValueError, what, ": IDX dims ", Shape(dims), " of ", dtype, " overflow the byte count");
  const std::uint64_t expected = header + data_bytes;
  MS_CHECK(n >= expected, ValueError, what, ": truncated IDX file: dims ", Shape(dims), " of ",
           dtype, " need ", expected, " bytes, the file has ", n);
  MS_CHECK(n == expected, ValueError, what, ": ", n - expected,
           " trailing bytes in IDX file: dims ", Shape(dims), " of ", dtype, " need ", expected,
           " bytes, the file has ", n);

  Tensor t = empty(Shape(std::move(dims)), dtype);
  copy_from_big_endian(bytes.data() + header, t.raw_data(), static_cast<std::size_t>(count),
                       static_cast<std::size_t>(itemsize));
  return t;
}

Tensor read_idx_bytes(std::span<const std::uint8_t> bytes, std::string_view what,
                      std::size_t max_bytes) {
  try {
    if (!is_gzip(bytes)) return parse_idx(bytes, what);
    const std::vector<std::uint8_t> raw = gunzip(bytes, max_bytes, what);
    return parse_idx(raw, what);
  } catch (const std::bad_alloc&) {
    // The sizes were checked against the cap; the system refused memory anyway.
    detail::raise<MemoryError>(what, ": out of memory reading IDX data");
  }
}

Tensor read_idx(const std::string& path, std::size_t max_bytes) {
  try {
    const std::vector<std::uint8_t> bytes = read_file(path, max_bytes);
    return read_idx_bytes(bytes, path, max_bytes);
  } catch (const std::bad_alloc&) {
    detail::raise<MemoryError>("read_idx: '", path, "': out of memory");
  }
}

std::vector<std::uint8_t> encode_idx(const Tensor& t) {
  MS_CHECK(t.defined() && !t.is_symbolic(), ValueError, "encode_idx: needs a concrete tensor, got ",
           t.defined() ? "a symbolic one" : "an undefined one");
  const std::uint8_t code = idx_type_code(t.dtype());
  MS_CHECK(t.rank() >= 1 && t.rank() <= kIdxMaxRank, ShapeError, "encode_idx: IDX holds rank 1 to ",
           kIdxMaxRank, ", got shape ", t.shape());
  for (std::int64_t d : t.shape().dims())
    MS_CHECK(d <= std::numeric_limits<std::uint32_t>::max(), ShapeError, "encode_idx: dim ", d,
             " of shape ", t.shape(), " does not fit IDX's uint32 dims");
  const Tensor c = ::ms::detail::to_dense(t, t.dtype());
  const auto header = static_cast<std::size_t>(4 + 4 * t.rank());
  const auto size = static_cast<std::size_t>(c.itemsize());
  std::vector<std::uint8_t> out(header + static_cast<std::size_t>(c.nbytes()));
  out[2] = code;
  out[3] = static_cast<std::uint8_t>(t.rank());
  for (std::int64_t i = 0; i < t.rank(); ++i) {
    const auto d = static_cast<std::uint32_t>(t.dim(i));
    for (int b = 0; b < 4; ++b) out[4 + 4 * i + b] = static_cast<std::uint8_t>(d >> (24 - 8 * b));
  }
  // Byte reversal is its own inverse: the reader's copy writes big-endian here.
  copy_from_big_endian(reinterpret_cast<const std::uint8_t*>(c.raw_data()),
                       reinterpret_cast<std::byte*>(out.data() + header),
                       static_cast<std::size_t>(c.numel()), size);
  return out;
}

void write_idx(const std::string& path, const Tensor& t) {
  std::vector<std::uint8_t> bytes = encode_idx(t);
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0) bytes = gzip(bytes);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  MS_CHECK(f != nullptr, ValueError, "write_idx: cannot open '", path,
           "' for writing: ", std::error_code(errno, std::generic_category()).message());
  const std::size_t wrote = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool closed = std::fclose(f) == 0;
  MS_CHECK(wrote == bytes.size() && closed, ValueError, "write_idx: error writing '", path, "'");
}

}  // namespace ms::data
