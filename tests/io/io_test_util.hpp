// Helpers of the io tests: deterministic test tensors, byte-exact comparison,
// the shared temporary directory, little-endian byte crafting.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ms/core/error.hpp>
#include <ms/core/tensor.hpp>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.hpp"

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

using ms::test::TempDir;

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

/// Makes a FIFO at `path` and calls `load` on it, which must throw an ms::ValueError
/// naming the path without blocking. A regression fails instead of hanging the
/// suite: after 5 s a guard thread opens the FIFO's write end, which releases an
/// `open` blocked on it, and the test fails for the wait.
template <class F>
void check_fifo_refused(const std::string& path, F load) {
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  std::atomic<bool> done{false}, rescued{false};
  std::thread guard([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    while (!done) {  // a blocked reader lets a non-blocking writer open
      rescued = true;
      const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  CHECK_THROWS_WITH_AS(load(),
                       doctest::Contains((path + "' is not a regular file (it is a FIFO").c_str()),
                       ms::ValueError);
  done = true;
  guard.join();
  CHECK_MESSAGE(!rescued, "opening the FIFO '", path, "' blocked until a writer came");
}

/// How a child of run_with_address_limit ended.
enum ChildEnd : int { kReturned = 0, kMsError = 10, kBadAlloc = 20, kOtherException = 30 };

/// True when AddressSanitizer is on (it reserves terabytes of address space, so an
/// address-space limit cannot be used to bound memory).
constexpr bool kAddressSanitizer =
#if defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

/// Runs `body` in a child process whose address space may grow by at most `extra`
/// bytes over what this process maps now, and returns how it ended (a ChildEnd,
/// or -1 when it crashed). An allocation the size of what a hostile header claims
/// fails there with std::bad_alloc instead of taking the machine's memory.
template <class F>
int run_with_address_limit(std::uint64_t extra, F body) {
  std::uint64_t pages = 0;
  {
    std::ifstream statm("/proc/self/statm");
    statm >> pages;
  }
  const auto mapped = pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = mapped + extra;
    if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(99);
    int end = kReturned;
    try {
      body();
    } catch (const ms::Error&) {
      end = kMsError;
    } catch (const std::bad_alloc&) {
      end = kBadAlloc;
    } catch (...) {
      end = kOtherException;
    }
    ::_exit(end);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace io_test
