// A temporary directory for tests that write files: unique per process and
// per object, removed with its contents when the object goes out of scope.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <stdexcept>
#include <string>

namespace ms::test {

/// A fresh, empty directory under the system temp dir (made by mkdtemp, so two
/// tests or two processes never share one), removed with its contents at scope exit.
struct TempDir {
  std::filesystem::path path;

  explicit TempDir(const std::string& prefix = "ms_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("TempDir: mkdtemp failed for '" + tmpl + "'");
    path = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }

  /// The path of `name` inside the directory.
  std::string file(const std::string& name) const { return (path / name).string(); }
  /// The number of entries in the directory (to see that nothing was left behind).
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(path),
                                                  std::filesystem::directory_iterator()));
  }
};

}  // namespace ms::test
