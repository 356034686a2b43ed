// ms/io/file_system.hpp: the POSIX backend and the registry of the active file system.
#include "ms/io/file_system.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <string_view>
#include <system_error>

#include "ms/core/error.hpp"
#include "ms/core/warning.hpp"

namespace ms::io {

void FileSystem::rename(const std::string& from, const std::string& to) {
  detail::raise<ValueError>("file system '", name(), "' cannot rename ('", from, "' -> '", to,
                            "')");
}

std::uint64_t FileSystem::file_size(const std::string& path) { return open(path)->size(); }

void FileSystem::create_directories(const std::string&) {}

void FileSystem::sync_directory(const std::string&) noexcept {}

std::vector<std::string> FileSystem::list_directory(const std::string&) noexcept { return {}; }

namespace {

[[noreturn]] void posix_fail(std::string_view op, const std::string& path, int err) {
  detail::raise<ValueError>(std::strerror(err), " (posix: ", op, " '", path, "')");
}

/// What a file that is not regular is, for messages.
std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of another kind";
}

/// Unbuffered writes to a descriptor.
class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const void* data, std::size_t n) override {
    const auto* p = static_cast<const std::uint8_t*>(data);
    while (n > 0) {
      // Linux writes at most 0x7ffff000 bytes per call.
      const std::size_t chunk = std::min<std::size_t>(n, std::size_t{1} << 30);
      const ssize_t w = ::write(fd_, p, chunk);
      if (w < 0) {
        if (errno == EINTR) continue;
        posix_fail("write", path_, errno);
      }
      if (w == 0) posix_fail("write", path_, EIO);
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }
  void sync() override {
    while (::fsync(fd_) != 0) {
      if (errno != EINTR) posix_fail("fsync", path_, errno);
    }
  }
  void close() override {
    const int fd = fd_;
    fd_ = -1;
    // close must not be retried on EINTR on Linux.
    if (fd >= 0 && ::close(fd) != 0) posix_fail("close", path_, errno);
  }

 private:
  int fd_;
  std::string path_;
};

/// Positioned reads (pread) of a regular file.
class PosixReadableFile final : public ReadableFile {
 public:
  PosixReadableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixReadableFile() override { ::close(fd_); }
  std::uint64_t size() const override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) posix_fail("fstat", path_, errno);
    return static_cast<std::uint64_t>(st.st_size);
  }
  std::size_t read_at(std::uint64_t offset, void* dst, std::size_t n) const override {
    MS_CHECK(offset <= static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()), ValueError,
             "posix: read '", path_, "': offset ", offset, " is out of range");
    auto* p = static_cast<std::uint8_t*>(dst);
    auto pos = static_cast<off_t>(offset);
    std::size_t done = 0;
    while (done < n) {
      const std::size_t chunk = std::min<std::size_t>(n - done, std::size_t{1} << 30);
      const ssize_t r = ::pread(fd_, p + done, chunk, pos);
      if (r < 0) {
        if (errno == EINTR) continue;
        posix_fail("pread", path_, errno);
      }
      if (r == 0) break;  // end of file
      pos += r;
      done += static_cast<std::size_t>(r);
    }
    return done;
  }

 private:
  int fd_;
  std::string path_;
};

/// Opens `path` for reading and checks it is a regular file, without blocking.
int open_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever; the type is checked first and the flag cleared before any read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) posix_fail("open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    posix_fail("fstat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    detail::raise<ValueError>("'", path, "' is not a regular file (it is ", file_kind(st.st_mode),
                              "; posix: open)");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    posix_fail("fcntl", path, err);
  }
  return fd;
}

class PosixFileSystem final : public FileSystem {
 public:
  std::string name() const override { return "posix"; }

  std::unique_ptr<WritableFile> create(const std::string& path, CreateMode mode) override {
    const int flags =
        O_WRONLY | O_CREAT | O_CLOEXEC | (mode == CreateMode::kNew ? O_EXCL : O_TRUNC);
    const int fd = ::open(path.c_str(), flags, 0666);
    if (fd < 0) {
      if (mode == CreateMode::kNew && errno == EEXIST) return nullptr;
      posix_fail("create", path, errno);
    }
    return std::make_unique<PosixWritableFile>(fd, path);
  }

  std::unique_ptr<ReadableFile> open(const std::string& path) override {
    return std::make_unique<PosixReadableFile>(open_regular_file(path), path);
  }

  bool exists(const std::string& path) override {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) return true;
    if (errno == ENOENT || errno == ENOTDIR) return false;
    posix_fail("lstat", path, errno);
  }

  bool remove(const std::string& path) override {
    if (::unlink(path.c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    posix_fail("unlink", path, errno);
  }

  bool supports_atomic_rename() const override { return true; }

  void rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0)
      detail::raise<ValueError>(std::strerror(errno), " (posix: rename '", from, "' -> '", to,
                                "')");
  }

  std::uint64_t file_size(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) posix_fail("stat", path, errno);
    return static_cast<std::uint64_t>(st.st_size);
  }

  void create_directories(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) posix_fail("create directories", path, ec.value());
  }

  void sync_directory(const std::string& dir) noexcept override {
    // Some file systems refuse fsync on directories: best effort.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);
      ::close(dfd);
    }
  }

  std::vector<std::string> list_directory(const std::string& dir) noexcept override {
    std::vector<std::string> names;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return names;
    try {
      while (const dirent* e = ::readdir(d)) {
        struct stat st {};
        // Regular files only (a symlink is not followed).
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
          names.emplace_back(e->d_name);
      }
    } catch (...) {  // out of memory: what was listed so far
    }
    ::closedir(d);
    return names;
  }
};

std::mutex g_fs_mu;

std::shared_ptr<FileSystem>& active() {
  static std::shared_ptr<FileSystem> fs = posix_file_system();
  return fs;
}

/// The text of the exception being handled.
std::string current_reason() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

std::shared_ptr<FileSystem> posix_file_system() {
  static const std::shared_ptr<FileSystem> fs = std::make_shared<PosixFileSystem>();
  return fs;
}

bool register_file_system(std::shared_ptr<FileSystem> fs) {
  MS_CHECK(fs != nullptr, ValueError, "register_file_system: fs is null; expected a file system ",
           "(restore_default_file_system() makes POSIX active)");
  // init() runs without the lock: a slow backend does not hold up file_system().
  bool failed = false;
  std::string reason;
  try {
    fs->init();
  } catch (...) {
    failed = true;
    reason = current_reason();
  }
  if (failed) {
    restore_default_file_system();
    warn(detail::str_cat("register_file_system: the file system '", fs->name(),
                         "' failed to initialize: ", reason,
                         "; checkpoints and dumps use the POSIX file system"));
    return false;
  }
  std::shared_ptr<FileSystem> old;  // released after the lock, as in restore_default_file_system
  std::lock_guard<std::mutex> lock(g_fs_mu);
  old = std::exchange(active(), std::move(fs));
  return true;
}

std::shared_ptr<FileSystem> file_system() {
  std::lock_guard<std::mutex> lock(g_fs_mu);
  return active();
}

void restore_default_file_system() {
  std::shared_ptr<FileSystem> old;  // released after the lock
  std::lock_guard<std::mutex> lock(g_fs_mu);
  old = std::exchange(active(), posix_file_system());
}

}  // namespace ms::io
