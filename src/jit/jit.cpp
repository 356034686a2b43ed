#include "ms/jit/jit.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string_view>
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

void KeyBuilder::record(SigItem it) {
  it.depth = depth_;
  sig_->items.push_back(std::move(it));
}

void KeyBuilder::sep() {
  if (readable_ && !first_) phase_ += ", ";
  first_ = false;
}

void KeyBuilder::tensor(const Tensor& t) {
  MS_CHECK(t.defined(), ValueError, "jit: an argument is an undefined tensor");
  if (sig_) {
    SigItem it;
    it.kind = SigItem::Kind::Tensor;
    it.dtype = t.dtype();
    it.shape = t.shape();
    record(std::move(it));
  }
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
  if (sig_) {
    SigItem it;
    it.kind = SigItem::Kind::Mutable;
    it.dtype = t;
    record(std::move(it));
  }
  key_ += 'M';
  put(key_, static_cast<std::uint8_t>(t));
  if (!readable_) return;
  sep();
  phase_ += "mutable ";
  phase_ += ir::short_dtype_name(t);
}

void KeyBuilder::number(const Scalar& s, char type_tag) {
  if (sig_) {
    SigItem it;
    it.kind = SigItem::Kind::Number;
    it.value = s;
    it.tag = type_tag;
    record(std::move(it));
  }
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

void KeyBuilder::open(char c, std::size_t n, bool is_mutable) {
  if (sig_) {
    SigItem it;
    it.kind = SigItem::Kind::Open;
    it.tag = c;
    it.length = n;
    it.is_mutable = is_mutable;
    record(std::move(it));
  }
  ++depth_;
  key_ += c;
  put(key_, static_cast<std::uint64_t>(n));
  if (!readable_) return;
  sep();
  phase_ += c;
  first_ = true;
}

void KeyBuilder::close(char c) {
  --depth_;
  if (sig_) {
    SigItem it;
    it.kind = SigItem::Kind::Close;
    it.tag = c;
    record(std::move(it));
  }
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

namespace {

bool env_is_1(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && std::string_view(e) == "1";
}

// Why a call switches auto-dynamic off for good (MindSpore's argument checks),
// or empty.
std::string switch_off_reason(const Signature& call, const Signature& first) {
  for (const SigItem& it : call.items)
    if (it.kind == SigItem::Kind::Tensor && it.shape.rank() == 0)
      return "an argument is a 0-d tensor";
  if (call.arguments() != first.arguments())
    return ::ms::detail::str_cat("the argument count changed from ", first.arguments(), " to ",
                                 call.arguments());
  if (call.items.size() != first.items.size()) return {};  // a sequence length: not a switch-off
  for (std::size_t i = 0; i < call.items.size(); ++i) {
    const SigItem& a = call.items[i];
    const SigItem& b = first.items[i];
    if (a.kind != b.kind || a.tag != b.tag || a.is_mutable != b.is_mutable)
      return ::ms::detail::str_cat("an argument changed kind (item ", i, ")");
    if (a.kind == SigItem::Kind::Number) {
      const double x = a.value.to<double>(), y = b.value.to<double>();
      if (std::fabs(x - y) > 1e-9 * std::max(std::fabs(x), std::fabs(y)))
        return ::ms::detail::str_cat("a scalar argument changed from ", b.value.to_string(), " to ",
                                     a.value.to_string());
    }
    if ((a.kind == SigItem::Kind::Tensor || a.kind == SigItem::Kind::Mutable) && a.dtype != b.dtype)
      return ::ms::detail::str_cat("a tensor argument changed dtype from ", b.dtype, " to ",
                                   a.dtype);
  }
  return {};
}

// "argument 0 dim 0: 2 -> 4" for every fixed dim of `ref` that `call` changes.
std::string changes(const Generalized& call, const Generalized& ref) {
  if (call.inputs.size() != ref.inputs.size()) return "the number of tensor inputs changed";
  std::string s;
  auto add = [&](auto&&... a) {
    if (!s.empty()) s += ", ";
    s += ::ms::detail::str_cat(a...);
  };
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    const InputSpec& c = call.inputs[i];
    const InputSpec& r = ref.inputs[i];
    if (r.any_rank) continue;
    if (c.dims.size() != r.dims.size()) {
      add("argument ", c.argument, " rank ", r.dims.size(), " -> ", c.dims.size());
      continue;
    }
    for (std::size_t k = 0; k < c.dims.size(); ++k)
      if (!is_symbol(r.dims[k]) && r.dims[k] != c.dims[k])
        add("argument ", c.argument, " dim ", k, ": ", r.dims[k], " -> ", c.dims[k]);
  }
  return s.empty() ? std::string("no dim changed") : s;
}

using Lru = std::list<std::pair<std::string, std::shared_ptr<const Compiled>>>;

// The hook version a key was built with (KeyBuilder::finish ends every key
// with 'H' and its 8 bytes).
std::uint64_t key_hook_version(const std::string& key) {
  std::uint64_t v = 0;
  if (key.size() >= 9 && key[key.size() - 9] == 'H')
    std::memcpy(&v, key.data() + key.size() - 8, sizeof v);
  return v;
}

// Drops the graphs keyed with a hook version older than `now`: the version
// only grows, so no later call can build their key again.
void lru_evict_stale(Lru& lru, std::unordered_map<std::string, Lru::iterator>& index,
                     std::uint64_t now) {
  for (auto it = lru.begin(); it != lru.end();) {
    if (key_hook_version(it->first) < now) {
      index.erase(it->first);
      it = lru.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

/// A generalized graph: its symbolic forms (one per rank of its any-rank
/// inputs) and the concrete graphs made from them, one per size.
struct DynEntry {
  Generalized gen;
  std::string label;
  std::map<std::vector<std::int64_t>, std::shared_ptr<SymbolicGraph>> families;
  Lru lru;
  std::unordered_map<std::string, Lru::iterator> index;
};

struct FunctionCache::Impl {
  mutable std::mutex mu;
  Lru lru;  // static graphs; front: most recent
  std::unordered_map<std::string, Lru::iterator> index;
  int compiles = 0;
  int traces = 0;
  int generalized_made = 0;
  std::shared_ptr<const Compiled> last;
  bool auto_on = false;
  bool off = false;
  std::optional<Signature> first;
  std::vector<Generalized> real;              // the static signatures kept for generalizing
  std::list<std::shared_ptr<DynEntry>> gens;  // front: newest
  std::shared_ptr<DynEntry> spec;             // input_signature
  std::vector<TensorSpec> spec_of;            // the specs `spec` was made for
  std::uint64_t hook_seen = 0;
};

FunctionCache::FunctionCache(JitConfig cfg)
    : cfg_(std::move(cfg)), impl_(std::make_unique<Impl>()) {
  MS_CHECK(cfg_.jit_level == JitLevel::O0 || cfg_.jit_level == JitLevel::O1, ValueError,
           "ms::jit: jit_level must be ms::JitLevel::O0 or O1, got the value ",
           static_cast<int>(cfg_.jit_level));
  MS_CHECK(cfg_.exec_order == ExecOrder::Bfs || cfg_.exec_order == ExecOrder::Dfs, ValueError,
           "ms::jit: exec_order must be ms::ExecOrder::Bfs or Dfs, got the value ",
           static_cast<int>(cfg_.exec_order));
  MS_CHECK(cfg_.cache_capacity >= 1, ValueError, "ms::jit: cache_capacity must be >= 1, got ",
           cfg_.cache_capacity);
  MS_CHECK(cfg_.dynamic == 0 || cfg_.dynamic == 1, ValueError,
           "ms::jit: dynamic must be 0 or 1, got ", cfg_.dynamic);
  MS_CHECK(cfg_.dynamic_policy == DynamicPolicy::AllDims ||
               cfg_.dynamic_policy == DynamicPolicy::ChangedDims,
           ValueError,
           "ms::jit: dynamic_policy must be ms::DynamicPolicy::AllDims or ChangedDims, got the "
           "value ",
           static_cast<int>(cfg_.dynamic_policy));
  MS_CHECK(cfg_.max_generalized >= 1, ValueError, "ms::jit: max_generalized must be >= 1, got ",
           cfg_.max_generalized);
  MS_CHECK(cfg_.binding_cache_capacity >= 1, ValueError,
           "ms::jit: binding_cache_capacity must be >= 1, got ", cfg_.binding_cache_capacity);
  impl_->auto_on = cfg_.input_signature.empty() &&
                   (cfg_.dynamic == 1 || env_is_1("MS_AUTO_DYNAMIC_SHAPE_ENABLE"));
  impl_->hook_seen = hook_version();
}

FunctionCache::~FunctionCache() = default;

namespace {

template <class Msg>
void log_compile(const JitConfig& cfg, const Msg& msg) {
  static const bool to_stderr = env_is_1("MS_LOG_RECOMPILES");
  if (!cfg.on_recompile && !to_stderr) return;
  const std::string line = msg();
  if (to_stderr) std::fprintf(stderr, "ms::jit: %s\n", line.c_str());
  if (cfg.on_recompile) cfg.on_recompile(line);
}

std::shared_ptr<const Compiled> lru_find(Lru& lru,
                                         std::unordered_map<std::string, Lru::iterator>& index,
                                         const std::string& key) {
  auto it = index.find(key);
  if (it == index.end()) return nullptr;
  lru.splice(lru.begin(), lru, it->second);
  return it->second->second;
}

void lru_put(Lru& lru, std::unordered_map<std::string, Lru::iterator>& index,
             const std::string& key, std::shared_ptr<const Compiled> c, std::size_t capacity) {
  lru.emplace_front(key, std::move(c));
  index[key] = lru.begin();
  while (lru.size() > capacity) {
    index.erase(lru.back().first);
    lru.pop_back();
  }
}

}  // namespace

std::shared_ptr<const Compiled> FunctionCache::get(const std::string& key,
                                                   std::span<const Tensor> inputs,
                                                   const CallInfo& call) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  if (const std::uint64_t hv = hook_version(); hv != m.hook_seen) {
    // Hooks changed: every graph traced before is stale. Generalized graphs
    // are dropped; static ones, keyed by the old version, can never be hit
    // again, so they go too instead of filling the cache (hook churn).
    m.hook_seen = hv;
    m.gens.clear();
    if (m.spec) m.spec = nullptr;
    lru_evict_stale(m.lru, m.index, hv);
  }
  auto found = [&](std::shared_ptr<const Compiled> c) {
    m.last = std::move(c);
    return m.last;
  };
  const std::vector<TensorSpec>* specs = call.specs != nullptr          ? call.specs
                                         : cfg_.input_signature.empty() ? nullptr
                                                                        : &cfg_.input_signature;
  const std::string_view api = call.specs != nullptr ? call.spec_api : "input_signature";
  if (specs == nullptr)
    if (auto c = lru_find(m.lru, m.index, key)) return found(std::move(c));
  if (m.spec && specs != nullptr && m.spec_of == *specs)
    if (auto c = lru_find(m.spec->lru, m.spec->index, key)) return found(std::move(c));
  for (const auto& e : m.gens)
    if (auto c = lru_find(e->lru, e->index, key)) return found(std::move(c));

  // A miss. Compiles happen under the lock: two threads calling with the same
  // new signature compile it once.
  std::vector<Shape> shapes;
  shapes.reserve(inputs.size());
  for (const Tensor& t : inputs) shapes.push_back(t.shape());

  auto compile_static = [&](const std::string& why) {
    Traced t = call.trace({});
    ++m.traces;
    optimize(t.graph,
             {.jit_level = cfg_.jit_level, .exec_order = cfg_.exec_order, .verify = cfg_.verify});
    auto c = std::make_shared<Compiled>();
    c->dump = ir::to_string(t.graph);
    c->exe = std::make_shared<Executable>(std::move(t.graph));
    c->structure = std::move(t.structure);
    c->phase = call.phase();
    ++m.compiles;
    log_compile(cfg_, [&] {
      return ::ms::detail::str_cat("compile #", m.compiles, ": static graph ", c->phase, ": ", why);
    });
    // A key built before a hook change that this call already saw is never
    // built again: run its graph, keep it out of the cache.
    if (key_hook_version(key) >= m.hook_seen) lru_put(m.lru, m.index, key, c, cfg_.cache_capacity);
    return found(std::move(c));
  };

  auto run_dynamic = [&](DynEntry& e) {
    // The symbolic form for the ranks of the any-rank inputs.
    Generalized g = e.gen;
    std::vector<std::int64_t> ranks;
    for (std::size_t i = 0; i < g.inputs.size(); ++i) {
      InputSpec& in = g.inputs[i];
      if (!in.any_rank) continue;
      ranks.push_back(static_cast<std::int64_t>(shapes[i].size()));
      in.any_rank = false;
      in.dims.clear();
      for (std::size_t k = 0; k < shapes[i].size(); ++k) {
        in.dims.push_back(symbol_dim(g.num_symbols()));
        g.names.emplace_back();
      }
    }
    std::shared_ptr<SymbolicGraph>& fam = e.families[ranks];
    if (!fam) {
      fam = std::make_shared<SymbolicGraph>(g, shapes, call.trace);
      m.traces += fam->traces();
      log_compile(cfg_, [&] {
        if (!fam->generalizable())
          return ::ms::detail::str_cat(e.label, " (", e.gen.to_string(),
                                       "): the function cannot be generalized: ", fam->why(),
                                       "; every size gets its own graph");
        std::string guards;
        for (const std::string& s : fam->guards()) guards += (guards.empty() ? "" : ", ") + s;
        return ::ms::detail::str_cat(e.label, " (", e.gen.to_string(), "): traced ", fam->traces(),
                                     " times", ranks.empty() ? "" : " for this rank",
                                     guards.empty() ? std::string() : "; guards: " + guards);
      });
    }
    std::vector<std::int64_t> values;
    std::string why;
    MS_CHECK(bind_symbols(g, shapes, values, &why), ShapeError, "ms::jit: ", why);
    std::string binding;
    for (int s = 0; s < g.num_symbols(); ++s)
      binding += ::ms::detail::str_cat(s ? ", " : "", g.symbol_name(s), '=',
                                       values[static_cast<std::size_t>(s)]);
    std::optional<ir::Graph> graph = fam->instantiate(values, &why);
    if (graph) {
      try {
        ir::verify(*graph, "ms::jit generalized graph");
      } catch (const Error& err) {
        why = err.what();
        graph.reset();
      }
    }
    std::vector<std::size_t> structure = fam->structure();
    bool specialized = false;
    if (!graph) {
      Traced t = call.trace(shapes);
      ++m.traces;
      graph = std::move(t.graph);
      structure = std::move(t.structure);
      specialized = true;
      log_compile(cfg_, [&] {
        return ::ms::detail::str_cat(e.label, ": sizes ", binding,
                                     " traced a graph of their own: ", why);
      });
    }
    optimize(*graph,
             {.jit_level = cfg_.jit_level, .exec_order = cfg_.exec_order, .verify = cfg_.verify});
    auto c = std::make_shared<Compiled>();
    c->dump = ::ms::detail::str_cat(
        "// ", e.label, " (", e.gen.to_string(), ")",
        fam->generalizable() ? "\n" + fam->dump() : std::string(" not generalizable\n"), "// ",
        specialized ? "specialized" : "instantiated", " for ", binding, ":\n",
        ir::to_string(*graph));
    c->exe = std::make_shared<Executable>(std::move(*graph));
    c->structure = std::move(structure);
    c->phase = ::ms::detail::str_cat('(', e.gen.to_string(), "), hook_version ", hook_version(),
                                     ", ", e.label, " with ", binding);
    lru_put(e.lru, e.index, key, c, cfg_.binding_cache_capacity);
    return found(std::move(c));
  };

  auto new_entry = [&](Generalized g, const std::string& why) {
    auto e = std::make_shared<DynEntry>();
    e->gen = std::move(g);
    ++m.compiles;
    e->label = ::ms::detail::str_cat("generalized graph #", ++m.generalized_made);
    log_compile(cfg_, [&] {
      return ::ms::detail::str_cat("compile #", m.compiles, ": ", e->label, " (",
                                   e->gen.to_string(), "): ", why);
    });
    return e;
  };

  // Explicit specs: one generalized graph; a call that does not fit is an error.
  if (specs != nullptr) {
    Generalized g = from_specs(*specs, call.signature(), ::ms::detail::str_cat("ms::jit ", api));
    if (!m.spec || m.spec_of != *specs) {
      m.spec = new_entry(std::move(g), std::string(api));
      m.spec_of = *specs;
    }
    return run_dynamic(*m.spec);
  }

  if (!m.auto_on || m.off)
    return compile_static(m.auto_on ? "auto-dynamic is off" : "new signature");
  const Signature sig = call.signature();
  if (!m.first) m.first = sig;
  if (std::string r = switch_off_reason(sig, *m.first); !r.empty()) {
    m.off = true;
    m.real.clear();
    m.gens.clear();
    return compile_static("auto-dynamic switched off for this function: " + r);
  }
  const Generalized now = exact(sig);
  const bool changed_dims = cfg_.dynamic_policy == DynamicPolicy::ChangedDims;
  const std::size_t keep_static = changed_dims ? 1 : 2;
  if (m.real.size() < keep_static) {
    const std::string why = m.real.empty() ? std::string("first call")
                                           : "static graph " + std::to_string(m.real.size() + 1) +
                                                 " of " + std::to_string(keep_static) + " (" +
                                                 changes(now, m.real.front()) + ")";
    m.real.push_back(now);
    return compile_static(why);
  }
  // A kept generalized graph that this call fits.
  std::vector<std::int64_t> values;
  for (auto it = m.gens.begin(); it != m.gens.end(); ++it)
    if (same_structure((*it)->gen, now) && bind_symbols((*it)->gen, shapes, values)) {
      m.gens.splice(m.gens.begin(), m.gens, it);
      return run_dynamic(*m.gens.front());
    }
  // Generalize against the kept signatures; the fewest unknown ranks, then
  // the fewest unknown shapes, wins.
  std::optional<Generalized> best;
  const Generalized* against = nullptr;
  auto consider = [&](const Generalized& entry) {
    std::optional<Generalized> c =
        changed_dims ? generalize_changed_dims(now, entry) : generalize_all_dims(now, entry);
    if (!c || c->is_static()) return;
    if (!best || std::pair(c->unknown_ranks(), c->unknown_shapes()) <
                     std::pair(best->unknown_ranks(), best->unknown_shapes())) {
      best = std::move(c);
      against = &entry;
    }
  };
  if (changed_dims) {
    consider(m.gens.empty() ? m.real.front() : m.gens.front()->gen);
  } else {
    for (const Generalized& r : m.real) consider(r);
    for (const auto& e : m.gens) consider(e->gen);
  }
  if (!best) return compile_static("no kept signature generalizes to this call");
  const std::string why = ::ms::detail::str_cat(changes(now, *against), "; generalized against (",
                                                against->to_string(), ")");
  m.gens.push_front(new_entry(std::move(*best), why));
  const std::size_t keep = changed_dims ? cfg_.max_generalized : 1;
  while (m.gens.size() > keep) {
    log_compile(cfg_, [&] {
      return ::ms::detail::str_cat(m.gens.back()->label, " (", m.gens.back()->gen.to_string(),
                                   ") deleted");
    });
    m.gens.pop_back();
  }
  return run_dynamic(*m.gens.front());
}

int FunctionCache::compile_count() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->compiles;
}

int FunctionCache::trace_count() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->traces;
}

std::size_t FunctionCache::size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lru.size() + impl_->gens.size() + (impl_->spec ? 1 : 0);
}

std::size_t FunctionCache::generalized_count() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->gens.size() + (impl_->spec ? 1 : 0);
}

bool FunctionCache::auto_dynamic_active() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->auto_on && !impl_->off;
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

namespace ms {

DynamicPolicy parse_dynamic_policy(std::string_view text) {
  for (DynamicPolicy p : {DynamicPolicy::AllDims, DynamicPolicy::ChangedDims}) {
    const std::string_view name = to_string(p);
    if (std::equal(text.begin(), text.end(), name.begin(), name.end(), [](char x, char y) {
          return std::tolower(static_cast<unsigned char>(x)) == y;  // names are lowercase
        }))
      return p;
  }
  ::ms::detail::raise<ValueError>(
      "parse_dynamic_policy: expected \"all_dims\" or \"changed_dims\", got \"", text, "\"");
}

std::string_view to_string(DynamicPolicy policy) {
  return policy == DynamicPolicy::ChangedDims ? "changed_dims" : "all_dims";
}

std::ostream& operator<<(std::ostream& os, DynamicPolicy policy) { return os << to_string(policy); }

}  // namespace ms
