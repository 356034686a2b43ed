#include "ms/jit/jit.hpp"

#include <atomic>
#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>

namespace ms::compiler {
namespace {
std::atomic<std::uint64_t> g_hook_version{0};
}  // namespace

std::uint64_t hook_version() { return g_hook_version.load(std::memory_order_acquire); }
void bump_hook_version() { g_hook_version.fetch_add(1, std::memory_order_acq_rel); }

namespace detail {

namespace {
template <class T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}
}  // namespace

void KeyBuilder::sep() {
  if (readable_ && !first_) phase_ += ", ";
  first_ = false;
}

void KeyBuilder::tensor(const Tensor& t) {
  MS_CHECK(t.defined(), ValueError, "jit: an argument is an undefined tensor");
  key_ += 'T';
  put(key_, static_cast<std::uint8_t>(t.dtype()));
  put(key_, static_cast<std::uint8_t>(t.rank()));
  for (std::int64_t d : t.shape().dims()) put(key_, d);
  if (!readable_) return;
  sep();
  phase_ += ir::short_dtype_name(t.dtype());
  phase_ += '[';
  for (std::size_t i = 0; i < t.shape().size(); ++i) {
    if (i) phase_ += ',';
    phase_ += std::to_string(t.shape()[i]);
  }
  phase_ += ']';
}

void KeyBuilder::mutable_scalar(DType t) {
  key_ += 'M';
  put(key_, static_cast<std::uint8_t>(t));
  if (!readable_) return;
  sep();
  phase_ += "mutable ";
  phase_ += ir::short_dtype_name(t);
}

void KeyBuilder::number(const Scalar& s, char type_tag) {
  key_ += type_tag;
  if (s.kind() == ScalarKind::Float)
    put(key_, s.to<double>());
  else
    put(key_, s.to<std::int64_t>());
  if (!readable_) return;
  sep();
  phase_ += type_tag == 'b' ? "bool " : type_tag == 'i' ? "int " : "float ";
  phase_ += s.to_string();
}

void KeyBuilder::open(char c, std::size_t n) {
  key_ += c;
  put(key_, static_cast<std::uint64_t>(n));
  if (!readable_) return;
  sep();
  phase_ += c;
  first_ = true;
}

void KeyBuilder::close(char c) {
  key_ += c;
  if (readable_) phase_ += c;
  first_ = false;
}

void KeyBuilder::finish() {
  const std::uint64_t hv = hook_version();
  key_ += 'H';
  put(key_, hv);
  if (readable_) phase_ = ::ms::detail::str_cat('(', phase_, "), hook_version ", hv);
}

struct FunctionCache::Impl {
  mutable std::mutex mu;
  std::list<std::pair<std::string, std::shared_ptr<const Compiled>>> lru;  // front: most recent
  std::unordered_map<std::string, decltype(lru)::iterator> index;
  int compiles = 0;
  std::shared_ptr<const Compiled> last;
};

FunctionCache::FunctionCache(JitConfig cfg)
    : cfg_(std::move(cfg)), impl_(std::make_unique<Impl>()) {
  MS_CHECK(cfg_.jit_level == "O0" || cfg_.jit_level == "O1", ValueError,
           "ms::jit: jit_level must be \"O0\" or \"O1\", got \"", cfg_.jit_level, "\"");
  MS_CHECK(cfg_.exec_order == "bfs" || cfg_.exec_order == "dfs", ValueError,
           "ms::jit: exec_order must be \"bfs\" or \"dfs\", got \"", cfg_.exec_order, "\"");
  MS_CHECK(cfg_.cache_capacity >= 1, ValueError, "ms::jit: cache_capacity must be >= 1, got ",
           cfg_.cache_capacity);
  MS_CHECK(cfg_.dynamic == 0, ValueError, "ms::jit: dynamic = ", cfg_.dynamic,
           " (automatic dynamic shapes) is not available yet; use dynamic = 0");
}

FunctionCache::~FunctionCache() = default;

std::shared_ptr<const Compiled> FunctionCache::get(const std::string& key,
                                                   const std::function<std::string()>& phase,
                                                   const std::function<Traced()>& trace) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (auto it = impl_->index.find(key); it != impl_->index.end()) {
    impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second);
    impl_->last = it->second->second;
    return impl_->last;
  }
  // A miss: trace and compile while holding the lock, so that two threads
  // calling with the same new key compile once.
  Traced t = trace();
  optimize(t.graph,
           {.jit_level = cfg_.jit_level, .exec_order = cfg_.exec_order, .verify = cfg_.verify});
  auto c = std::make_shared<Compiled>();
  c->dump = ir::to_string(t.graph);
  c->exe = std::make_shared<Executable>(std::move(t.graph));
  c->structure = std::move(t.structure);
  c->phase = phase();
  ++impl_->compiles;
  impl_->lru.emplace_front(key, c);
  impl_->index[key] = impl_->lru.begin();
  while (impl_->lru.size() > cfg_.cache_capacity) {
    impl_->index.erase(impl_->lru.back().first);
    impl_->lru.pop_back();
  }
  impl_->last = c;
  return c;
}

int FunctionCache::compile_count() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->compiles;
}

std::size_t FunctionCache::size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lru.size();
}

std::string FunctionCache::phase() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->last ? impl_->last->phase : std::string();
}

std::string FunctionCache::dump() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->last ? impl_->last->dump : std::string();
}

}  // namespace detail
}  // namespace ms::compiler
