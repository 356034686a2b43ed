#include "ms/jit/dump.hpp"

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "ms/jit/jit.hpp"
#include "ms/ops/op.hpp"

namespace ms {
namespace {
std::mutex g_mu;
std::set<std::string, std::less<>>& marked() {
  static std::set<std::string, std::less<>> s;
  return s;
}
std::filesystem::path& dir() {
  static std::filesystem::path d = [] {
    const char* env = std::getenv("MS_DUMP_DIR");
    return std::filesystem::path(env && *env ? env : "ms_dump");
  }();
  return d;
}
}  // namespace

void set_dump(std::string_view target, bool enabled) {
  ops::op(target);  // ValueError for an unknown op
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (enabled)
      marked().emplace(target);
    else if (auto it = marked().find(target); it != marked().end())
      marked().erase(it);
  }
  compiler::bump_hook_version();  // graphs compiled before recompile
}

bool dump_enabled(std::string_view target) {
  std::lock_guard<std::mutex> lock(g_mu);
  return marked().find(target) != marked().end();
}

void set_dump_dir(const std::filesystem::path& d) {
  std::lock_guard<std::mutex> lock(g_mu);
  dir() = d;
}

std::filesystem::path dump_dir() {
  std::lock_guard<std::mutex> lock(g_mu);
  return dir();
}

namespace compiler::detail {

namespace {
DumpWriter& writer() {
  static DumpWriter w;
  return w;
}
}  // namespace

DumpWriter set_dump_writer(DumpWriter w) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::swap(writer(), w);
  return w;
}

void dump_tensor(const Tensor& t, const std::string& name) {
  const std::filesystem::path d = dump_dir();
  const std::string path = (d / (name + ".npy")).string();
  DumpWriter write;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    write = writer();
  }
  MS_CHECK(static_cast<bool>(write), ValueError, "set_dump: cannot write ", path,
           ": no dump writer is installed (ms's io stage, which installs it, is not linked)");
  DType dt = t.dtype();
  if (dt == DType::Float16 || dt == DType::BFloat16) dt = DType::Float32;
  if (dt == DType::Int4) dt = DType::Int8;
  const Tensor c = t.to(dt);  // dense, in a type NumPy knows
  try {
    write(d.string(), path, c);
  } catch (const std::exception& e) {
    ::ms::detail::raise<ValueError>("set_dump: cannot write ", path, ": ", e.what());
  }
}

}  // namespace compiler::detail
}  // namespace ms
