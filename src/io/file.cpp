// ms/io/file.hpp: atomic writes (temp file + fsync + rename) and bounded reads.
#include "ms/io/file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string_view>

#include "ms/core/storage.hpp"

namespace ms::io {
namespace {

std::string os_reason(int err) { return std::strerror(err); }

[[noreturn]] void raise_os(std::string_view what, const std::string& path, std::string_view action,
                           int err) {
  detail::raise<ValueError>(what, ": '", path, "': ", action, " failed: ", os_reason(err));
}

/// Closes a descriptor, retrying nothing (close must not be retried on EINTR on Linux).
int close_fd(int fd) { return ::close(fd); }

/// The ByteSink of write_file_atomic: unbuffered writes to the temporary file.
class FdSink final : public ByteSink {
 public:
  FdSink(int fd, const std::string& path) : fd_(fd), path_(path) {}
  void write(const void* data, std::size_t n) override {
    const auto* p = static_cast<const std::uint8_t*>(data);
    while (n > 0) {
      // Linux writes at most 0x7ffff000 bytes per call.
      const std::size_t chunk = std::min<std::size_t>(n, std::size_t{1} << 30);
      const ssize_t w = ::write(fd_, p, chunk);
      if (w < 0) {
        if (errno == EINTR) continue;
        raise_os("write_file_atomic", path_, "write", errno);
      }
      if (w == 0) raise_os("write_file_atomic", path_, "write", EIO);
      p += w;
      n -= static_cast<std::size_t>(w);
      written_ += static_cast<std::uint64_t>(w);
    }
  }
  std::uint64_t written() const override { return written_; }

 private:
  int fd_;
  const std::string& path_;
  std::uint64_t written_ = 0;
};

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::atomic<std::uint64_t> g_temp_counter{0};

/// The pid in a temporary file name of write_file_atomic (`.<name>.tmp.<pid>.<n>`),
/// or 0 when `entry` is not such a name.
pid_t temp_file_pid(std::string_view entry) {
  const auto all_digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 18 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (entry.size() < 2 || entry[0] != '.') return 0;
  const auto dot_n = entry.rfind('.');
  const auto dot_pid = dot_n == 0 ? std::string_view::npos : entry.rfind('.', dot_n - 1);
  if (dot_pid == std::string_view::npos || dot_pid < 5) return 0;
  const std::string_view pid = entry.substr(dot_pid + 1, dot_n - dot_pid - 1);
  if (!all_digits(pid) || !all_digits(entry.substr(dot_n + 1))) return 0;
  // ".tmp" ends where the pid begins, after a non-empty name.
  if (entry.substr(dot_pid - 4, 4) != ".tmp" || dot_pid - 4 < 2) return 0;
  const long long v = std::stoll(std::string(pid));
  return v > 0 && v <= std::numeric_limits<pid_t>::max() ? static_cast<pid_t>(v) : 0;
}

/// Removes from `dir` the temporary files of saves whose process no longer exists
/// (killed mid-save: nothing else removes them). Files of a live process, of this
/// one (a save in progress on another thread) and of a pid this process may not
/// signal (EPERM: it exists) are kept. Best effort: a failure removes nothing more.
void remove_stale_temporaries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const pid_t self = ::getpid();
  while (const dirent* e = ::readdir(d)) {
    const pid_t pid = temp_file_pid(e->d_name);
    if (pid == 0 || pid == self) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st {};
    // Regular files only (lstat: a symlink is not followed).
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      (void)::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

}  // namespace

void VectorSink::write(const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  out_.insert(out_.end(), p, p + n);
}

void write_file_atomic(const std::string& path, const std::function<void(ByteSink&)>& produce) {
  constexpr std::string_view kWhat = "write_file_atomic";
  MS_CHECK(!path.empty(), ValueError, kWhat, ": empty path");
  const std::string base = base_of(path);
  MS_CHECK(!base.empty() && base != "." && base != "..", ValueError, kWhat, ": '", path,
           "' does not name a file");
  const std::string dir = dir_of(path);
  remove_stale_temporaries(dir);

  // A fresh name in the same directory (rename is atomic only within one file system).
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = dir + "/." + base + ".tmp." + std::to_string(::getpid()) + "." +
          std::to_string(g_temp_counter.fetch_add(1));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    const int err = errno;
    if (fd < 0 && err != EEXIST)
      raise_os(kWhat, path, "creating temporary file '" + tmp + "'", err);
  }
  if (fd < 0) raise_os(kWhat, path, "creating a temporary file", EEXIST);

  try {
    FdSink sink(fd, path);
    produce(sink);
    while (::fsync(fd) != 0) {
      if (errno != EINTR) raise_os(kWhat, path, "fsync", errno);
    }
    const int fd_to_close = fd;
    fd = -1;
    if (close_fd(fd_to_close) != 0) raise_os(kWhat, path, "close", errno);
    if (::rename(tmp.c_str(), path.c_str()) != 0) raise_os(kWhat, path, "rename", errno);
  } catch (...) {
    if (fd >= 0) close_fd(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename itself durable. Best effort: the new file is in place already,
  // and some file systems refuse fsync on directories.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    close_fd(dfd);
  }
}

void write_file_atomic(const std::string& path, std::span<const std::uint8_t> bytes) {
  write_file_atomic(path, [&](ByteSink& sink) { sink.write(bytes.data(), bytes.size()); });
}

namespace {

/// What a file that is not regular is, for messages.
std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of another kind";
}

/// Opens `path` for reading and checks it is a regular file, without blocking;
/// `size` receives its size.
int open_regular_file(const std::string& path, std::string_view what, std::uint64_t& size) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever; the type is checked first and the flag cleared before any read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) raise_os(what, path, "open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    close_fd(fd);
    raise_os(what, path, "fstat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    close_fd(fd);
    detail::raise<ValueError>(what, ": '", path, "' is not a regular file (it is ",
                              file_kind(st.st_mode), ")");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    close_fd(fd);
    raise_os(what, path, "fcntl", err);
  }
  size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}

}  // namespace

InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = open_regular_file(path, "read", size_);
}

InputFile::~InputFile() {
  if (fd_ >= 0) close_fd(fd_);
}

void InputFile::read_at(std::uint64_t offset, void* dst, std::size_t n) const {
  auto* p = static_cast<std::uint8_t*>(dst);
  MS_CHECK(offset <= static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()), ValueError,
           "read: '", path_, "': offset ", offset, " is out of range");
  auto pos = static_cast<off_t>(offset);
  while (n > 0) {
    const std::size_t chunk = std::min<std::size_t>(n, std::size_t{1} << 30);
    const ssize_t r = ::pread(fd_, p, chunk, pos);
    if (r < 0) {
      if (errno == EINTR) continue;
      raise_os("read", path_, "pread", errno);
    }
    MS_CHECK(r > 0, ValueError, "read: '", path_, "': the file ended at byte ", pos, " but ", n,
             " more bytes were expected (it was truncated while being read)");
    p += r;
    pos += r;
    n -= static_cast<std::size_t>(r);
  }
}

void InputFile::check_unchanged() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) raise_os("read", path_, "fstat", errno);
  MS_CHECK(static_cast<std::uint64_t>(st.st_size) == size_, ValueError, "read: '", path_,
           "' changed size while being read (", size_, " -> ", st.st_size, " bytes)");
}

std::vector<std::uint8_t> read_file(const std::string& path, std::int64_t max_bytes) {
  if (max_bytes < 0) max_bytes = max_alloc_bytes();
  InputFile f(path);
  MS_CHECK(f.size() <= static_cast<std::uint64_t>(max_bytes), ValueError, "read_file: '", path,
           "' has ", f.size(), " bytes, more than the limit of ", max_bytes);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(f.size()));
  f.read_at(0, out.data(), out.size());
  f.check_unchanged();
  return out;
}

void SpanSource::read(std::uint64_t offset, void* dst, std::size_t n) const {
  MS_CHECK(offset <= bytes_.size() && n <= bytes_.size() - offset, ValueError, what_, ": reading ",
           n, " bytes at offset ", offset, " goes past the end of the data (", bytes_.size(),
           " bytes)");
  if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
}

std::optional<std::size_t> utf8_invalid_at(std::span<const std::uint8_t> b) {
  const std::size_t n = b.size();
  std::size_t i = 0;
  while (i < n) {
    const std::uint8_t c = b[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return i;  // a continuation byte or 0xF8..0xFF where a sequence must start
    }
    if (n - i < len) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::nullopt;
}

}  // namespace ms::io
