// A file system in memory for the tests (tests/io/test_file_system.cpp,
// tests/train/test_checkpoint.cpp): files are byte vectors in a map, with
// injectable failures (writes past a byte count, writes to one path) and a
// switch for backends without atomic rename.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <ms/io/file_system.hpp>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace io_test {

class MemoryFileSystem : public ms::io::FileSystem {
 public:
  using Bytes = std::vector<std::uint8_t>;

  /// false: a backend without rename (write_file_atomic copies over the target).
  bool atomic = true;
  /// >= 0: a write that would bring the bytes written since set past this fails.
  std::int64_t fail_after_bytes = -1;
  /// Non-empty: every write to this path fails.
  std::string fail_writes_to;

  std::string name() const override { return "memory"; }

  std::unique_ptr<ms::io::WritableFile> create(const std::string& path,
                                               ms::io::CreateMode mode) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    if (it != files_.end() && mode == ms::io::CreateMode::kNew) return nullptr;
    auto data = std::make_shared<Bytes>();
    files_[path] = data;
    return std::make_unique<File>(*this, path, data);
  }

  std::unique_ptr<ms::io::ReadableFile> open(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) throw std::runtime_error("memory: no file '" + path + "'");
    return std::make_unique<Reader>(*this, it->second);
  }

  bool exists(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    return files_.count(path) > 0 || dirs_.count(path) > 0;
  }

  bool remove(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    return files_.erase(path) > 0;
  }

  bool supports_atomic_rename() const override { return atomic; }

  void rename(const std::string& from, const std::string& to) override {
    if (!atomic) FileSystem::rename(from, to);  // the default: throws
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(from);
    if (it == files_.end()) throw std::runtime_error("memory: no file '" + from + "'");
    files_[to] = it->second;
    files_.erase(from);
    ++renames_;
  }

  void create_directories(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.insert(path);
  }

  std::vector<std::string> list_directory(const std::string& dir) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> names;
    const std::string prefix = dir + "/";
    for (const auto& [p, data] : files_)
      if (p.compare(0, prefix.size(), prefix) == 0 && p.find('/', prefix.size()) == p.npos)
        names.push_back(p.substr(prefix.size()));
    return names;
  }

  /// The paths of the files, sorted.
  std::vector<std::string> paths() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [p, data] : files_) out.push_back(p);
    return out;
  }
  /// A copy of the contents of `path` (empty when absent).
  Bytes contents(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    return it == files_.end() ? Bytes{} : *it->second;
  }
  /// Puts `bytes` at `path` directly.
  void put(const std::string& path, Bytes bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    files_[path] = std::make_shared<Bytes>(std::move(bytes));
  }
  /// The directories created.
  std::set<std::string> dirs() {
    std::lock_guard<std::mutex> lock(mu_);
    return dirs_;
  }
  /// The number of renames done.
  int renames() {
    std::lock_guard<std::mutex> lock(mu_);
    return renames_;
  }

 private:
  class File final : public ms::io::WritableFile {
   public:
    File(MemoryFileSystem& fs, std::string path, std::shared_ptr<Bytes> data)
        : fs_(fs), path_(std::move(path)), data_(std::move(data)) {}
    void write(const void* p, std::size_t n) override {
      std::lock_guard<std::mutex> lock(fs_.mu_);
      if (closed_) throw std::runtime_error("memory: write after close");
      if (!fs_.fail_writes_to.empty() && path_ == fs_.fail_writes_to)
        throw std::runtime_error("injected failure writing '" + path_ + "'");
      if (fs_.fail_after_bytes >= 0 &&
          fs_.written_ + static_cast<std::int64_t>(n) > fs_.fail_after_bytes)
        throw std::runtime_error("injected failure after " + std::to_string(fs_.written_) +
                                 " bytes");
      fs_.written_ += static_cast<std::int64_t>(n);
      const auto* b = static_cast<const std::uint8_t*>(p);
      data_->insert(data_->end(), b, b + n);
    }
    void sync() override {}
    void close() override { closed_ = true; }

   private:
    MemoryFileSystem& fs_;
    std::string path_;
    std::shared_ptr<Bytes> data_;
    bool closed_ = false;
  };

  class Reader final : public ms::io::ReadableFile {
   public:
    Reader(MemoryFileSystem& fs, std::shared_ptr<Bytes> data) : fs_(fs), data_(std::move(data)) {}
    std::uint64_t size() const override {
      std::lock_guard<std::mutex> lock(fs_.mu_);
      return data_->size();
    }
    std::size_t read_at(std::uint64_t offset, void* dst, std::size_t n) const override {
      std::lock_guard<std::mutex> lock(fs_.mu_);
      if (offset >= data_->size()) return 0;
      const std::size_t k = std::min<std::size_t>(n, data_->size() - offset);
      std::memcpy(dst, data_->data() + offset, k);
      return k;
    }

   private:
    MemoryFileSystem& fs_;
    std::shared_ptr<Bytes> data_;
  };

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Bytes>> files_;
  std::set<std::string> dirs_;
  std::int64_t written_ = 0;
  int renames_ = 0;

 public:
  /// Starts counting bytes for fail_after_bytes from 0.
  void reset_written() {
    std::lock_guard<std::mutex> lock(mu_);
    written_ = 0;
  }
};

/// Registers `fs` for its scope, restoring POSIX at the end (also when a check fails).
struct ScopedFileSystem {
  explicit ScopedFileSystem(std::shared_ptr<ms::io::FileSystem> fs) {
    if (!ms::io::register_file_system(std::move(fs)))
      throw std::runtime_error("ScopedFileSystem: registration failed");
  }
  ~ScopedFileSystem() { ms::io::restore_default_file_system(); }
  ScopedFileSystem(const ScopedFileSystem&) = delete;
  ScopedFileSystem& operator=(const ScopedFileSystem&) = delete;
};

}  // namespace io_test
