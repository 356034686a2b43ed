// ms/io/file.hpp — atomic file writing and bounded reading.
//
// Stage: io (checkpoints: ms/io/safetensors.hpp, ms/io/npy.hpp). Files are
// written and read through the active ms::io::FileSystem (ms/io/file_system.hpp;
// POSIX unless an application registered another). A save never leaves a
// half-written file where a good one was: the bytes go to a temporary file in
// the target's directory, which is synced and renamed over the target only when
// everything was written (on a backend without atomic rename, see
// write_file_atomic). Reads are bounded (a size cap, short reads and files that
// change size are errors).
//
//   ms::io::write_file_atomic("ckpt/model.bin", bytes);           // all or nothing
//   ms::io::write_file_atomic("ckpt/model.bin", [&](ms::io::ByteSink& out) {
//     out.write(header.data(), header.size());                    // streamed; an exception
//     out.write(payload.data(), payload.size());                  // here keeps the old file
//   });
//   std::vector<std::uint8_t> b = ms::io::read_file("ckpt/model.bin", 1 << 20);
//
// Errors: core has no I/O error class, so every failure here is an
// ms::ValueError whose message names the API, the path and the OS reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/core/error.hpp"
#include "ms/core/std_parts.hpp"
#include "ms/io/file_system.hpp"

namespace ms::io {

/// Where serializers write their bytes: a file being written atomically, or memory.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  /// Appends `n` bytes; ms::ValueError when they cannot be written.
  virtual void write(const void* data, std::size_t n) = 0;
  /// Bytes written so far.
  virtual std::uint64_t written() const = 0;
};

/// A ByteSink appending to a byte vector. Example:
/// `std::vector<std::uint8_t> v; ms::io::VectorSink s(v); s.write("ab", 2);`
class VectorSink final : public ByteSink {
 public:
  /// Appends to `out`, which must outlive the sink.
  explicit VectorSink(std::vector<std::uint8_t>& out) : out_(out) {}
  void write(const void* data, std::size_t n) override;
  std::uint64_t written() const override { return out_.size(); }

 private:
  std::vector<std::uint8_t>& out_;
};

/// Writes `path` through the active file system (ms::io::file_system(), taken once
/// at the start): `produce` writes the contents into a sink backed by a new
/// temporary file in the same directory (named `.NAME.tmp.PID.N` for a file NAME),
/// which is then synced, closed and renamed onto `path` (the directory is synced
/// too). If anything fails — `produce` throws, a write, sync, close or rename
/// fails — the temporary file is removed, `path` keeps its previous contents (or
/// stays absent), and the exception propagates (file-system failures as
/// ms::ValueError "write_file_atomic: '<path>': <step> failed: <reason>").
/// On POSIX a symlink at `path` is replaced, not followed.
///
/// This is atomic only on a backend whose supports_atomic_rename() is true (POSIX
/// is). On another backend the save is NOT atomic; ms does the best it can: the
/// temporary file is written and synced in full first (a failure there keeps the
/// old file, as above), then `path` is overwritten with a copy of it and the
/// temporary file removed. A failure or a crash during that copy can leave `path`
/// damaged; the error then names the temporary file, which keeps the complete new
/// contents. (MindSpore's basic backend removes the old checkpoint before writing.)
///
/// A process killed mid-save leaves its temporary file behind: each save first
/// removes from the directory the regular files named `.<name>.tmp.<pid>.<n>`
/// whose process no longer exists (never those of a live process; pids are those
/// of this machine's pid namespace, so do not share a directory across machines),
/// as far as the backend lists directories (FileSystem::list_directory).
/// Example: `ms::io::write_file_atomic("a.bin", [](ms::io::ByteSink& s) { s.write("x", 1); });`
void write_file_atomic(const std::string& path, const std::function<void(ByteSink&)>& produce);

/// Writes `bytes` to `path` atomically (see above).
/// Example: `ms::io::write_file_atomic("a.txt", std::vector<std::uint8_t>{'h', 'i'});`
void write_file_atomic(const std::string& path, std::span<const std::uint8_t> bytes);

/// The default cap of read_file: ms::max_alloc_bytes() (64 GiB unless changed).
inline constexpr std::int64_t kReadFileDefaultMax = -1;

/// The whole contents of the regular file `path`, read through the active file
/// system. ValueError naming the path when
/// it cannot be opened, is not a regular file, is larger than `max_bytes`
/// (kReadFileDefaultMax: ms::max_alloc_bytes()), or changes size while read.
/// Example: `auto bytes = ms::io::read_file("weights.safetensors", 1LL << 30);`
std::vector<std::uint8_t> read_file(const std::string& path,
                                    std::int64_t max_bytes = kReadFileDefaultMax);

/// A regular file opened for positioned reads through the active file system (the
/// loaders read headers first and then each tensor's bytes straight into its
/// storage). Closed by the destructor.
/// Example: `ms::io::InputFile f("x.npy"); std::uint8_t magic[6]; f.read_at(0, magic, 6);`
class InputFile {
 public:
  /// Opens `path` without blocking (a FIFO is an error, not a wait for a writer);
  /// ValueError naming it when it cannot be opened or is not a regular file.
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  /// The size when opened.
  std::uint64_t size() const { return size_; }
  /// The path it was opened with.
  const std::string& path() const { return path_; }
  /// Reads exactly `n` bytes at `offset` into `dst`; ValueError on an OS error or
  /// when the file ends first (it was truncated since it was opened).
  void read_at(std::uint64_t offset, void* dst, std::size_t n) const;
  /// ValueError when the file's size is no longer the one it had when opened
  /// (a file that grew while read would otherwise be silently cut).
  void check_unchanged() const;

 private:
  std::string path_;
  std::shared_ptr<FileSystem> fs_;      // the file system active when opened, kept alive
  std::unique_ptr<ReadableFile> file_;  // opened by fs_ (destroyed first)
  std::uint64_t size_ = 0;
};

/// Random-access bytes the loaders parse: a span in memory or an InputFile.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// The number of bytes.
  virtual std::uint64_t size() const = 0;
  /// Exactly `n` bytes at `offset`; ms::ValueError when they are not there.
  virtual void read(std::uint64_t offset, void* dst, std::size_t n) const = 0;
  /// Called after the last read: ValueError when the source changed meanwhile.
  virtual void finish() const {}
};

/// A ByteSource over memory; `what` names the API in errors.
class SpanSource final : public ByteSource {
 public:
  /// Reads `bytes` (which must outlive the source); `what` names the API in errors.
  SpanSource(std::span<const std::uint8_t> bytes, std::string what)
      : bytes_(bytes), what_(std::move(what)) {}
  std::uint64_t size() const override { return bytes_.size(); }
  void read(std::uint64_t offset, void* dst, std::size_t n) const override;

 private:
  std::span<const std::uint8_t> bytes_;
  std::string what_;
};

/// A ByteSource over an open InputFile (which must outlive it).
class FileSource final : public ByteSource {
 public:
  /// Reads `file`, which must outlive the source.
  explicit FileSource(const InputFile& file) : file_(file) {}
  std::uint64_t size() const override { return file_.size(); }
  void read(std::uint64_t offset, void* dst, std::size_t n) const override {
    file_.read_at(offset, dst, n);
  }
  void finish() const override { file_.check_unchanged(); }

 private:
  const InputFile& file_;
};

/// Runs `load` and turns a std::bad_alloc (the system refusing memory that the
/// checked sizes allowed) into an ms::MemoryError naming `what`, so that every
/// loader fails with an ms::Error. Example:
/// `return ms::io::memory_error_as("load_npy: 'x.npy'", [&] { return parse(bytes); });`
template <class F>
auto memory_error_as(std::string_view what, F&& load) -> decltype(load()) {
  try {
    return std::forward<F>(load)();
  } catch (const std::bad_alloc&) {
    detail::raise<MemoryError>(what, ": out of memory (the system refused an allocation; ",
                               "ms::set_max_alloc_bytes caps what ms asks for)");
  }
}

/// The offset of the first byte of `bytes` that is not well-formed UTF-8
/// (overlong forms, surrogates and code points over U+10FFFF are ill-formed),
/// or nullopt when all of it is. Example: `ms::io::utf8_invalid_at(bytes).has_value()`.
std::optional<std::size_t> utf8_invalid_at(std::span<const std::uint8_t> bytes);

}  // namespace ms::io
