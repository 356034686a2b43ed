// ms/io/file_system.hpp — the pluggable file system under checkpoints and dumps.
//
// Stage: io. Every file ms::io writes or reads (write_file_atomic, read_file,
// InputFile, hence safetensors, npy / npz, ms::save_checkpoint, the
// train::Checkpoint and CurveWriter callbacks, and set_dump's files) goes
// through the active ms::io::FileSystem. The default is POSIX (files on the local disk, written
// atomically). An application registers its own backend (MindIO, an object
// store, a test's in-memory map); when the backend's init() fails, ms warns and
// keeps POSIX, as MindSpore's mindspore/common/file_system.py does for MindIO.
//
//   struct MyStore : ms::io::FileSystem { ... };          // see FileSystem below
//   if (!ms::io::register_file_system(std::make_shared<MyStore>()))
//     ;                                                    // warned; POSIX is active
//   ms::io::save_safetensors("ckpt/model.safetensors", tensors);   // through MyStore
//   ms::io::restore_default_file_system();                 // POSIX again
//
// Differences from MindSpore: MindSpore picks MindIO by itself when the Python
// module `mindio` can be imported; ms has no plugin loader, so the application
// registers the backend. MindSpore's basic backend deletes the old checkpoint and
// then writes the new one, while ms writes a temporary file and renames it (see
// write_file_atomic). MindSpore logs an info line when MindIO is used; ms has no
// info log and says nothing on success.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ms::io {

/// A file opened for writing by FileSystem::create. ms::io keeps the FileSystem
/// alive (a shared_ptr) for as long as a file it opened is open. Methods report failures by
/// throwing (ms::ValueError from the POSIX backend); ms::io adds the API and the
/// path it was saving to. Destroying an unclosed file closes it, ignoring errors.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  /// Appends all `n` bytes (a short write is retried or an error, never partial success).
  virtual void write(const void* data, std::size_t n) = 0;
  /// Makes what was written durable (POSIX: fsync).
  virtual void sync() = 0;
  /// Closes the file; an error here means the contents may not be stored.
  virtual void close() = 0;
};

/// A file opened for positioned reads by FileSystem::open.
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  /// The file's current size in bytes (ms::io::InputFile compares it with the size
  /// at opening to notice a file that changed while read).
  virtual std::uint64_t size() const = 0;
  /// Reads up to `n` bytes at `offset` into `dst` and returns how many were read:
  /// fewer than `n` only when the file ends first (0 at or past its end).
  virtual std::size_t read_at(std::uint64_t offset, void* dst, std::size_t n) const = 0;
};

/// How FileSystem::create treats an existing file.
enum class CreateMode {
  kNew,       ///< only a new file: create returns nullptr when `path` exists
  kTruncate,  ///< a new file or an existing one emptied (a symlink is followed)
};

/// The operations ms's writers and readers need from storage. Paths are strings
/// with '/' separators; what they mean is the backend's business. Every method may
/// be called from several threads at once. Failures are thrown (any std::exception;
/// ms::io turns them into ms::ValueError naming the API and the path).
///
/// A backend implements name, create, open, exists and remove; the others have
/// defaults for stores without directories or renames. Example, a backend that
/// keeps files in memory (the one of tests/io/test_file_system.cpp, shortened):
/// @code
/// struct MemoryFs : ms::io::FileSystem {
///   std::mutex mu;
///   std::map<std::string, std::shared_ptr<std::vector<std::uint8_t>>> files;
///   std::string name() const override { return "memory"; }
///   std::unique_ptr<ms::io::WritableFile> create(const std::string& p,
///                                                ms::io::CreateMode m) override;
///   std::unique_ptr<ms::io::ReadableFile> open(const std::string& p) override;
///   bool exists(const std::string& p) override;
///   bool remove(const std::string& p) override;
///   bool supports_atomic_rename() const override { return true; }
///   void rename(const std::string& from, const std::string& to) override;
/// };
/// ms::io::register_file_system(std::make_shared<MemoryFs>());
/// @endcode
class FileSystem {
 public:
  virtual ~FileSystem() = default;

  /// A short name for messages, e.g. "posix", "mindio".
  virtual std::string name() const = 0;
  /// Called once by register_file_system before the backend becomes active;
  /// throwing means the backend cannot be used (ms warns and keeps POSIX).
  virtual void init() {}

  /// Opens `path` for writing (see CreateMode); nullptr only for kNew when it exists.
  virtual std::unique_ptr<WritableFile> create(const std::string& path, CreateMode mode) = 0;
  /// Opens the existing regular file `path` for reading; throws when it cannot
  /// (absent, not a regular file, no permission). Must not block on a FIFO.
  virtual std::unique_ptr<ReadableFile> open(const std::string& path) = 0;
  /// True when `path` names a file or directory.
  virtual bool exists(const std::string& path) = 0;
  /// Removes the file `path`; false when there was none.
  virtual bool remove(const std::string& path) = 0;

  /// True when rename() replaces its target atomically: a reader sees either the
  /// old or the new file, never a mix or none, even if the process dies. Only then
  /// is write_file_atomic atomic. Default: false.
  virtual bool supports_atomic_rename() const { return false; }
  /// Moves `from` onto `to`, replacing a file there. Default: throws (no rename).
  virtual void rename(const std::string& from, const std::string& to);
  /// The size of the file `path`. Default: open(path)->size().
  virtual std::uint64_t file_size(const std::string& path);
  /// Creates the directory `path` and its missing parents. Default: nothing
  /// (a store without directories).
  virtual void create_directories(const std::string& path);
  /// Makes the entries of directory `dir` durable after a rename (POSIX: fsync of
  /// the directory). Best effort, must not throw. Default: nothing.
  virtual void sync_directory(const std::string& dir) noexcept;
  /// The names (not paths) of the regular files in directory `dir`; write_file_atomic
  /// uses it to remove temporary files left by killed processes. Default: none
  /// (nothing is cleaned up). Best effort, must not throw.
  virtual std::vector<std::string> list_directory(const std::string& dir) noexcept;
};

/// The POSIX backend, ms's default: local files with open / write / fsync / rename.
/// create(kNew) uses O_EXCL; open refuses what is not a regular file without
/// blocking on a FIFO; rename is rename(2), atomic within one file system.
/// Errors are ms::ValueError "<OS reason> (posix: <operation> '<path>')".
/// Example: `auto fs = ms::io::posix_file_system(); bool b = fs->exists("x.npy");`
std::shared_ptr<FileSystem> posix_file_system();

/// Makes `fs` the active file system: calls fs->init(); when it throws, warns
/// (ms::warn: "register_file_system: the file system '<name>' failed to
/// initialize: <reason>; checkpoints and dumps use the POSIX file system") once
/// for this call, makes POSIX active and returns false. Returns true when `fs` is
/// active. Saves and loads already running finish on the backend they started
/// with. ms::ValueError when `fs` is null. Thread-safe.
/// Example: `bool active = ms::io::register_file_system(fs);` (`fs`: a std::shared_ptr<MyFs>)
bool register_file_system(std::shared_ptr<FileSystem> fs);

/// The active file system (POSIX unless one was registered). Thread-safe; the
/// returned pointer keeps the backend alive while it is used.
/// Example: `bool there = ms::io::file_system()->exists("ckpt/model.safetensors");`
std::shared_ptr<FileSystem> file_system();

/// Makes POSIX the active file system again. Thread-safe.
/// Example: `ms::io::restore_default_file_system();`
void restore_default_file_system();

}  // namespace ms::io
