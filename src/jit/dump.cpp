#include "ms/jit/dump.hpp"

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "ms/jit/jit.hpp"
#include "ms/ops/op.hpp"

#if MS_HAVE_XTENSOR
#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>
#endif

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

void dump_tensor(const Tensor& t, const std::string& name) {
#if MS_HAVE_XTENSOR
  const std::filesystem::path d = dump_dir();
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  MS_CHECK(!ec, ValueError, "set_dump: cannot create the dump directory ", d.string(), ": ",
           ec.message());
  DType dt = t.dtype();
  if (dt == DType::Float16 || dt == DType::BFloat16) dt = DType::Float32;
  if (dt == DType::Int4) dt = DType::Int8;
  const Tensor c = t.to(dt);  // dense, in a type NumPy knows
  std::vector<std::size_t> shape;
  for (std::int64_t s : c.shape().dims()) shape.push_back(static_cast<std::size_t>(s));
  const std::string path = (d / (name + ".npy")).string();
  dtype_dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::complex<float>> ||
                  std::is_same_v<T, std::complex<double>>) {
      const auto view =
          xt::adapt(c.data<T>(), static_cast<std::size_t>(c.numel()), xt::no_ownership(), shape);
      try {
        xt::dump_npy(path, view);
      } catch (const std::exception& e) {
        ::ms::detail::raise<ValueError>("set_dump: cannot write ", path, ": ", e.what());
      }
    }
  });
#else
  (void)t;
  ::ms::detail::raise<ValueError>("set_dump: ms was built without xtensor; cannot write ", name,
                                  ".npy");
#endif
}

}  // namespace compiler::detail
}  // namespace ms
