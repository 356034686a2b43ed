// Installs the writer of ms::set_dump's files (ms/jit/dump.hpp): .npy files
// written through the active ms::io::FileSystem.
#include <exception>
#include <string>

#include "ms/core/error.hpp"
#include "ms/io/file_system.hpp"
#include "ms/io/npy.hpp"
#include "ms/jit/dump.hpp"

namespace ms::io {
namespace {

void write_dump(const std::string& dir, const std::string& path, const Tensor& t) {
  const std::shared_ptr<FileSystem> fs = file_system();
  try {
    fs->create_directories(dir);
  } catch (const std::exception& e) {
    detail::raise<ValueError>("cannot create the dump directory '", dir, "': ", e.what());
  }
  save_npy(path, t);
}

/// Installs write_dump when libms is loaded (the jit stage cannot call up into io).
struct InstallDumpWriter {
  InstallDumpWriter() { compiler::detail::set_dump_writer(write_dump); }
} const g_install_dump_writer;

}  // namespace
}  // namespace ms::io
