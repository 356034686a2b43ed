// ms/io/file.hpp: atomic writes (temp file + sync + rename) and bounded reads,
// through the active ms::io::FileSystem.
#include "ms/io/file.hpp"

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

/// Runs `step` (a call into the file system) and turns its failure into an
/// ms::ValueError "<what>: '<path>': <action> failed: <reason>". bad_alloc passes.
template <class F>
auto fs_step(std::string_view what, const std::string& path, std::string_view action, F&& step)
    -> decltype(step()) {
  try {
    return std::forward<F>(step)();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    detail::raise<ValueError>(what, ": '", path, "': ", action, " failed: ", e.what());
  } catch (...) {
    detail::raise<ValueError>(what, ": '", path, "': ", action,
                              " failed: an exception that is not a std::exception");
  }
}

constexpr std::string_view kWrite = "write_file_atomic";

/// The ByteSink of write_file_atomic: writes to the temporary file, naming the
/// target in errors.
class FileSink final : public ByteSink {
 public:
  FileSink(WritableFile& file, const std::string& path) : file_(file), path_(path) {}
  void write(const void* data, std::size_t n) override {
    fs_step(kWrite, path_, "write", [&] { file_.write(data, n); });
    written_ += n;
  }
  std::uint64_t written() const override { return written_; }

 private:
  WritableFile& file_;
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
/// signal (EPERM: it exists) are kept. Best effort: failures are ignored.
void remove_stale_temporaries(FileSystem& fs, const std::string& dir) {
  const pid_t self = ::getpid();
  for (const std::string& name : fs.list_directory(dir)) {
    const pid_t pid = temp_file_pid(name);
    if (pid == 0 || pid == self) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    try {
      (void)fs.remove(dir + "/" + name);
    } catch (const std::exception&) {  // another process removed it, or no permission
    }
  }
}

/// A new temporary file next to `path` (rename is atomic only within one file
/// system); `tmp` receives its name.
std::unique_ptr<WritableFile> create_temporary(FileSystem& fs, const std::string& path,
                                               std::string& tmp) {
  const std::string prefix =
      dir_of(path) + "/." + base_of(path) + ".tmp." + std::to_string(::getpid()) + ".";
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = prefix + std::to_string(g_temp_counter.fetch_add(1));
    auto file = fs_step(kWrite, path, "creating temporary file '" + tmp + "'",
                        [&] { return fs.create(tmp, CreateMode::kNew); });
    if (file) return file;
  }
  detail::raise<ValueError>(kWrite, ": '", path,
                            "': creating a temporary file failed: ", "100 names like '", tmp,
                            "' exist already");
}

/// Overwrites `path` with the contents of the complete temporary file `tmp`: the
/// best a backend without rename allows. The temporary file is removed only when
/// the copy succeeded.
void copy_over(FileSystem& fs, const std::string& tmp, const std::string& path) {
  try {
    const auto in = fs.open(tmp);
    const std::uint64_t size = in->size();
    const auto out = fs.create(path, CreateMode::kTruncate);
    MS_CHECK(out != nullptr, ValueError, "create returned no file");
    std::vector<std::uint8_t> buf(std::size_t{8} << 20);
    for (std::uint64_t off = 0; off < size;) {
      const std::size_t want =
          static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size - off));
      const std::size_t got = in->read_at(off, buf.data(), want);
      MS_CHECK(got == want, ValueError, "'", tmp, "' ended at byte ", off + got, " of ", size);
      out->write(buf.data(), got);
      off += got;
    }
    out->sync();
    out->close();
  } catch (const std::exception& e) {
    detail::raise<ValueError>(kWrite, ": '", path, "': replacing the file failed: ", e.what(),
                              "; the file system '", fs.name(), "' cannot rename atomically, so '",
                              path, "' may be damaged; the complete new contents are in '", tmp,
                              "'");
  }
  try {
    (void)fs.remove(tmp);
  } catch (const std::exception&) {  // the save itself succeeded
  }
}

}  // namespace

void VectorSink::write(const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  out_.insert(out_.end(), p, p + n);
}

void write_file_atomic(const std::string& path, const std::function<void(ByteSink&)>& produce) {
  MS_CHECK(!path.empty(), ValueError, kWrite, ": empty path");
  const std::string base = base_of(path);
  MS_CHECK(!base.empty() && base != "." && base != "..", ValueError, kWrite, ": '", path,
           "' does not name a file");
  const std::shared_ptr<FileSystem> fs = file_system();
  const std::string dir = dir_of(path);
  remove_stale_temporaries(*fs, dir);

  std::string tmp;
  std::unique_ptr<WritableFile> file = create_temporary(*fs, path, tmp);
  const bool atomic = fs->supports_atomic_rename();
  try {
    FileSink sink(*file, path);
    produce(sink);
    fs_step(kWrite, path, "sync", [&] { file->sync(); });
    fs_step(kWrite, path, "close", [&] { file->close(); });
    file.reset();
    if (atomic) fs_step(kWrite, path, "rename", [&] { fs->rename(tmp, path); });
  } catch (...) {
    file.reset();  // closes, ignoring errors
    try {
      (void)fs->remove(tmp);
    } catch (const std::exception&) {  // the original failure is the one to report
    }
    throw;
  }
  if (!atomic) copy_over(*fs, tmp, path);
  // Make the rename itself durable. Best effort: the new file is in place already.
  fs->sync_directory(dir);
}

void write_file_atomic(const std::string& path, std::span<const std::uint8_t> bytes) {
  write_file_atomic(path, [&](ByteSink& sink) { sink.write(bytes.data(), bytes.size()); });
}

InputFile::InputFile(const std::string& path) : path_(path), fs_(file_system()) {
  file_ = fs_step("read", path, "open", [&] { return fs_->open(path); });
  MS_CHECK(file_ != nullptr, ValueError, "read: '", path, "': open failed: the file system '",
           fs_->name(), "' returned no file");
  size_ = fs_step("read", path, "size", [&] { return file_->size(); });
}

InputFile::~InputFile() = default;

void InputFile::read_at(std::uint64_t offset, void* dst, std::size_t n) const {
  auto* p = static_cast<std::uint8_t*>(dst);
  std::uint64_t pos = offset;
  while (n > 0) {
    const std::size_t r = fs_step("read", path_, "read", [&] { return file_->read_at(pos, p, n); });
    MS_CHECK(r > 0 && r <= n, ValueError, "read: '", path_, "': the file ended at byte ", pos,
             " but ", n, " more bytes were expected (it was truncated while being read)");
    p += r;
    pos += r;
    n -= r;
  }
}

void InputFile::check_unchanged() const {
  const std::uint64_t now = fs_step("read", path_, "size", [&] { return file_->size(); });
  MS_CHECK(now == size_, ValueError, "read: '", path_, "' changed size while being read (", size_,
           " -> ", now, " bytes)");
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
