// Helpers of the io tests: deterministic test tensors, byte-exact comparison,
// temporary directories, little-endian byte crafting.
#pragma once

#include <doctest/doctest.h>

#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ms/core/tensor.hpp>
#include <string>
#include <vector>

namespace io_test {

/// The value of element i of the pattern tensors (the Python side of the interop
/// tests computes the same): signed ints ((7i) mod 23) - 11, unsigned (7i) mod 23,
/// floats a quarter of the signed value (exact in float16 and bfloat16), bool
/// i mod 3 == 0, complex f(i) + f(i + 5) j.
inline double pattern_value(std::int64_t i, ms::DType t) {
  const double base = static_cast<double>((i * 7) % 23);
  if (ms::dtype_is_unsigned_int(t)) return base;
  if (ms::dtype_is_int(t)) return base - 11;
  return (base - 11) * 0.25;
}

/// A contiguous tensor of `shape` and `dtype` holding the pattern.
inline ms::Tensor pattern(const ms::Shape& shape, ms::DType t) {
  const std::int64_t n = ms::shape_numel(shape);
  if (t == ms::bool_) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[i] = i % 3 == 0 ? 1.0 : 0.0;
    return ms::from_vector(v, shape).to(t);
  }
  if (ms::dtype_is_complex(t)) {
    std::vector<std::complex<double>> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      v[i] = {pattern_value(i, ms::float32), pattern_value(i + 5, ms::float32)};
    return ms::from_vector(v, shape).to(t);
  }
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = pattern_value(i, t);
  return ms::from_vector(v, shape).to(t);
}

/// True when both have the same dtype, shape and element bytes (row-major).
inline bool same_tensor(const ms::Tensor& a, const ms::Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const ms::Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.numel() == 0 || std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

/// A fresh directory under the system temp dir, removed with its contents at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ms_io_test_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  /// Number of entries in the directory (to see that no temporary file was left behind).
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(path),
                                                  std::filesystem::directory_iterator()));
  }
};

inline std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(f), {});
}

inline void write_all(const std::string& path, const std::vector<std::uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline std::vector<std::uint8_t> bytes_of(const std::string& s) {
  return std::vector<std::uint8_t>(s.begin(), s.end());
}

inline void put_le(std::vector<std::uint8_t>& b, std::size_t at, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint64_t get_le(const std::vector<std::uint8_t>& b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

}  // namespace io_test
