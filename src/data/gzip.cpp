// gunzip through zlib and whole-file reads, both capped (see ms/data/gzip.hpp).
#include "ms/data/gzip.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <system_error>

#include "ms/core/error.hpp"

namespace ms::data {
namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

/// inflateEnd on every path out of gunzip.
struct InflateGuard {
  z_stream* zs;
  ~InflateGuard() { inflateEnd(zs); }
};

}  // namespace

bool is_gzip(std::span<const std::uint8_t> bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

std::vector<std::uint8_t> gunzip(std::span<const std::uint8_t> bytes, std::size_t max_out,
                                 std::string_view what) {
  if (!is_gzip(bytes)) {
    MS_CHECK(bytes.size() <= max_out, ValueError, what, ": ", bytes.size(),
             " bytes is over the limit of ", max_out, " bytes");
    return {bytes.begin(), bytes.end()};
  }
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip wrapper (header, CRC-32 and ISIZE trailer checked by zlib).
  const int init = inflateInit2(&zs, 16 + MAX_WBITS);
  MS_CHECK(init == Z_OK, MemoryError, what, ": zlib inflateInit2 failed (code ", init, ")");
  const InflateGuard guard{&zs};

  const std::size_t n = bytes.size();
  // One past the cap: producing that byte proves the output is over it.
  const std::size_t limit = max_out == SIZE_MAX ? SIZE_MAX : max_out + 1;
  // The output grows (doubling) as zlib produces it: the trailer's ISIZE is
  // never trusted for an allocation (it is checked by zlib only at the end), so
  // noise with a trailer claiming 4 GiB costs a few times its own size.
  const std::size_t first = n > SIZE_MAX / 2 ? SIZE_MAX : std::max<std::size_t>(2 * n, 65536);
  std::vector<std::uint8_t> out(std::min(first, limit));
  std::size_t produced = 0;
  std::size_t fed = 0;                            // bytes handed to zlib so far
  zs.next_in = const_cast<Bytef*>(bytes.data());  // zlib's API is not const-correct
  for (;;) {
    if (zs.avail_in == 0 && fed < n) {
      const std::size_t chunk = std::min<std::size_t>(n - fed, UINT_MAX);
      zs.next_in = const_cast<Bytef*>(bytes.data() + fed);
      zs.avail_in = static_cast<uInt>(chunk);
      fed += chunk;
    }
    if (produced == out.size()) {
      MS_CHECK(produced < limit, ValueError, what, ": gzip data decompresses to more than ",
               max_out, " bytes (the limit; a corrupt file or a decompression bomb)");
      const std::size_t grown = out.size() > limit / 2 ? limit : out.size() * 2;
      out.resize(std::min(std::max<std::size_t>(grown, 65536), limit));
    }
    const std::size_t room = std::min<std::size_t>(out.size() - produced, UINT_MAX);
    zs.next_out = out.data() + produced;
    zs.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced += room - zs.avail_out;
    MS_CHECK(produced <= max_out, ValueError, what, ": gzip data decompresses to more than ",
             max_out, " bytes (the limit; a corrupt file or a decompression bomb)");
    if (rc == Z_STREAM_END) {
      const std::size_t consumed = fed - zs.avail_in;
      if (consumed == n) break;
      const std::span<const std::uint8_t> rest = bytes.subspan(consumed);
      MS_CHECK(is_gzip(rest), ValueError, what, ": ", rest.size(),
               " trailing bytes after the gzip stream (at offset ", consumed, " of a file of ", n,
               " bytes)");
      MS_CHECK(inflateReset(&zs) == Z_OK, ValueError, what, ": zlib inflateReset failed");
      continue;  // next member; next_in and avail_in still point at it
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR) {
      // No progress: either the output is full (grown above) or the input ran out.
      if (zs.avail_out == 0 || (zs.avail_in == 0 && fed < n)) continue;
      detail::raise<ValueError>(what, ": truncated gzip data (the stream ends after ", n,
                                " bytes, ", produced, " bytes decompressed)");
    }
    MS_CHECK(rc != Z_MEM_ERROR, MemoryError, what, ": zlib ran out of memory");
    detail::raise<ValueError>(what, ": corrupt gzip data at byte ", fed - zs.avail_in, " of ", n,
                              " (zlib: ", zs.msg != nullptr ? zs.msg : "error", ", code ", rc, ")");
  }
  out.resize(produced);
  return out;
}

std::vector<std::uint8_t> gzip(std::span<const std::uint8_t> bytes, int level) {
  MS_CHECK(level >= 0 && level <= 9, ValueError, "gzip: level must be in 0..9, got ", level);
  z_stream zs{};
  // windowBits 16 + MAX_WBITS: a gzip wrapper; memLevel 8 is zlib's default.
  const int init = deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  MS_CHECK(init == Z_OK, MemoryError, "gzip: zlib deflateInit2 failed (code ", init, ")");
  struct DeflateGuard {
    z_stream* zs;
    ~DeflateGuard() { deflateEnd(zs); }
  } guard{&zs};
  std::vector<std::uint8_t> out(65536);
  std::size_t produced = 0, fed = 0;
  const std::size_t n = bytes.size();
  zs.next_in = const_cast<Bytef*>(bytes.data());  // zlib's API is not const-correct
  for (;;) {
    if (zs.avail_in == 0 && fed < n) {
      const std::size_t chunk = std::min<std::size_t>(n - fed, UINT_MAX);
      zs.next_in = const_cast<Bytef*>(bytes.data() + fed);
      zs.avail_in = static_cast<uInt>(chunk);
      fed += chunk;
    }
    if (produced == out.size()) out.resize(out.size() * 2);
    const std::size_t room = std::min<std::size_t>(out.size() - produced, UINT_MAX);
    zs.next_out = out.data() + produced;
    zs.avail_out = static_cast<uInt>(room);
    const int rc = deflate(&zs, fed == n && zs.avail_in == 0 ? Z_FINISH : Z_NO_FLUSH);
    produced += room - zs.avail_out;
    if (rc == Z_STREAM_END) break;
    MS_CHECK(rc == Z_OK || rc == Z_BUF_ERROR, ValueError, "gzip: zlib deflate failed (code ", rc,
             ")");
  }
  out.resize(produced);
  return out;
}

std::vector<std::uint8_t> read_file(const std::string& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever; the
  // type is checked before any read and the flag cleared for regular files.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  MS_CHECK(fd >= 0, ValueError, "cannot open '", path, "': ", errno_text(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  MS_CHECK(::fstat(fd, &st) == 0, ValueError, "cannot stat '", path, "': ", errno_text(errno));
  MS_CHECK(S_ISREG(st.st_mode), ValueError, "'", path, "' is not a regular file (it is ",
           S_ISFIFO(st.st_mode)  ? "a FIFO"
           : S_ISDIR(st.st_mode) ? "a directory"
                                 : "a device, socket or other special file",
           ")");
  const int flags = ::fcntl(fd, F_GETFL);
  MS_CHECK(flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0, ValueError,
           "cannot read '", path, "': fcntl: ", errno_text(errno));
  const auto size = static_cast<std::size_t>(st.st_size);
  MS_CHECK(size <= max_bytes, ValueError, "'", path, "' has ", size, " bytes, over the limit of ",
           max_bytes, " bytes");
  std::vector<std::uint8_t> out(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, out.data() + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    MS_CHECK(got >= 0, ValueError, "error reading '", path, "': ", errno_text(errno));
    MS_CHECK(got > 0, ValueError, "'", path, "' ended after ", done, " of ", size,
             " bytes while being read (modified concurrently?)");
    done += static_cast<std::size_t>(got);
  }
  return out;
}

}  // namespace ms::data
