#include "ms/jit/jit.hpp"

#include "ms/core/detail/env_switch.hpp"
#include "ms/dyn/detail/manager.hpp"
#include "ms/jit/detail/cache.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string_view>
#include <tuple>
#include <unordered_map>

namespace ms::compiler {
namespace {
std::atomic<std::uint64_t> g_hook_version{0};
}  // namespace

std::uint64_t hook_version() { return g_hook_version.load(std::memory_order_acquire); }
void bump_hook_version() { g_hook_version.fetch_add(1, std::memory_order_acq_rel); }

namespace detail {

namespace {
// One training flag a trace read, and the value it read.
struct ModeRead {
  const std::atomic<bool>* id;
  std::weak_ptr<std::atomic<bool>> flag;
  bool value;
};
// The reads of the trace ms::jit runs on this thread (null: none is recording).
thread_local std::vector<ModeRead>* t_mode_reads = nullptr;

// Collects the training flags read by the traces made while it lives.
class ModeRecording {
 public:
  explicit ModeRecording(std::vector<ModeRead>& out) : prev_(t_mode_reads) { t_mode_reads = &out; }
  ~ModeRecording() { t_mode_reads = prev_; }
  ModeRecording(const ModeRecording&) = delete;
  ModeRecording& operator=(const ModeRecording&) = delete;

 private:
  std::vector<ModeRead>* prev_;
};
}  // namespace

void note_mode_read(const std::shared_ptr<std::atomic<bool>>& flag, bool value) {
  if (t_mode_reads == nullptr) return;
  for (const ModeRead& r : *t_mode_reads)
    if (r.id == flag.get()) return;
  t_mode_reads->push_back({flag.get(), flag, value});
}

}  // namespace detail
}  // namespace ms::compiler

namespace ms {
namespace {
constinit detail::EnvSwitch g_jit_enabled{"MS_JIT"};
}  // namespace

bool jit_enabled() { return g_jit_enabled.on(); }

void set_jit_enabled(bool enabled) { g_jit_enabled.set(enabled); }
}  // namespace ms

namespace ms::compiler {
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

void KeyBuilder::constant(char type_tag, std::string_view bytes, const std::string& readable) {
  if (sig_) {
    SigItem it;
    it.kind = SigItem::Kind::Constant;
    it.tag = type_tag;
    it.text = std::string(bytes);
    record(std::move(it));
  }
  key_ += type_tag;
  put(key_, static_cast<std::uint64_t>(bytes.size()));
  key_.append(bytes);
  if (!readable_) return;
  sep();
  phase_ += readable;
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

Tensor TraceInputs::add_input(DType dtype, const Shape& shape) {
  return tc_->add_input(dtype, shape);
}

void TraceInputs::finish(std::span<const Tensor> outputs, std::vector<std::size_t> structure) {
  result_->graph = tc_->finish(outputs);
  result_->structure = std::move(structure);
}

TraceResult trace_call(const CallInfo& call, std::span<const Shape> shapes) {
  TraceContext tc;
  if (!shapes.empty()) tc.override_input_shapes({shapes.begin(), shapes.end()});
  TraceResult r;
  TraceInputs in(tc, r);
  call.trace(in);
  return r;
}

std::vector<Tensor> run_compiled(const Compiled& c, std::span<const Tensor> inputs) {
  return c.exe->run(inputs);
}

const std::vector<std::size_t>& result_structure(const Compiled& c) { return c.structure; }

namespace {

using dyn::detail::AutoDynamic;
using dyn::detail::Decision;
using dyn::detail::Generalized;
using dyn::detail::InputSpec;
using dyn::detail::SymbolicGraph;
using ::ms::detail::str_cat;

bool env_is_1(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && std::string_view(e) == "1";
}

using Lru = std::list<std::pair<std::string, std::shared_ptr<const Compiled>>>;
using LruIndex = std::unordered_map<std::string, Lru::iterator>;

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
void lru_evict_stale(Lru& lru, LruIndex& index, std::uint64_t now) {
  for (auto it = lru.begin(); it != lru.end();) {
    if (key_hook_version(it->first) < now) {
      index.erase(it->first);
      it = lru.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<const Compiled> lru_find(Lru& lru, LruIndex& index, const std::string& key) {
  auto it = index.find(key);
  if (it == index.end()) return nullptr;
  lru.splice(lru.begin(), lru, it->second);
  return it->second->second;
}

void lru_put(Lru& lru, LruIndex& index, const std::string& key, std::shared_ptr<const Compiled> c,
             std::size_t capacity) {
  lru.emplace_front(key, std::move(c));
  index[key] = lru.begin();
  while (lru.size() > capacity) {
    index.erase(lru.back().first);
    lru.pop_back();
  }
}

template <class Msg>
void log_compile(const JitConfig& cfg, const Msg& msg) {
  static const bool to_stderr = env_is_1("MS_LOG_RECOMPILES");
  if (!cfg.on_recompile && !to_stderr) return;
  const std::string line = msg();
  if (to_stderr) std::fprintf(stderr, "ms::jit: %s\n", line.c_str());
  if (cfg.on_recompile) cfg.on_recompile(line);
}

void check_config(const JitConfig& cfg) {
  MS_CHECK(cfg.jit_level == JitLevel::O0 || cfg.jit_level == JitLevel::O1, ValueError,
           "ms::jit: jit_level must be ms::JitLevel::O0 or O1, got the value ",
           static_cast<int>(cfg.jit_level));
  MS_CHECK(cfg.exec_order == ExecOrder::Bfs || cfg.exec_order == ExecOrder::Dfs, ValueError,
           "ms::jit: exec_order must be ms::ExecOrder::Bfs or Dfs, got the value ",
           static_cast<int>(cfg.exec_order));
  MS_CHECK(cfg.cache_capacity >= 1, ValueError, "ms::jit: cache_capacity must be >= 1, got ",
           cfg.cache_capacity);
  MS_CHECK(cfg.dynamic == 0 || cfg.dynamic == 1, ValueError,
           "ms::jit: dynamic must be 0 or 1, got ", cfg.dynamic);
  MS_CHECK(cfg.dynamic_policy == DynamicPolicy::AllDims ||
               cfg.dynamic_policy == DynamicPolicy::ChangedDims,
           ValueError,
           "ms::jit: dynamic_policy must be ms::DynamicPolicy::AllDims or ChangedDims, got the "
           "value ",
           static_cast<int>(cfg.dynamic_policy));
  MS_CHECK(cfg.max_generalized >= 1, ValueError, "ms::jit: max_generalized must be >= 1, got ",
           cfg.max_generalized);
  MS_CHECK(cfg.binding_cache_capacity >= 1, ValueError,
           "ms::jit: binding_cache_capacity must be >= 1, got ", cfg.binding_cache_capacity);
}

// "s0=4, s1=7": the symbol values of a binding, for phases, dumps and logs.
std::string binding_text(const Generalized& g, std::span<const std::int64_t> values) {
  std::string binding;
  for (int s = 0; s < g.num_symbols(); ++s)
    binding += str_cat(s ? ", " : "", g.symbol_name(s), '=', values[static_cast<std::size_t>(s)]);
  return binding;
}

// `g` with its any-rank inputs given the ranks of `shapes` (fresh symbols for
// their dims); `ranks` receives those ranks (the key of the symbolic form).
Generalized fix_ranks(Generalized g, std::span<const Shape> shapes,
                      std::vector<std::int64_t>& ranks) {
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    InputSpec& in = g.inputs[i];
    if (!in.any_rank) continue;
    ranks.push_back(static_cast<std::int64_t>(shapes[i].size()));
    in.any_rank = false;
    in.dims.clear();
    for (std::size_t k = 0; k < shapes[i].size(); ++k) {
      in.dims.push_back(dyn::detail::symbol_dim(g.num_symbols()));
      g.names.emplace_back();
    }
  }
  return g;
}

// `key` with the mode component `mode` put before its hook version (the
// 'H' and 8 bytes that end every key, which key_hook_version reads).
std::string with_mode(const std::string& key, const std::string& mode) {
  std::string k = key.substr(0, key.size() - 9);
  k += mode;
  k.append(key, key.size() - 9, 9);
  return k;
}

Signature signature_of(const CallInfo& call) {
  Signature s;
  call.signature(s);
  return s;
}

}  // namespace

/// A generalized graph: its symbolic forms (one per rank of its any-rank
/// inputs) and the concrete graphs made from them, one per size.
struct DynEntry {
  Generalized gen;
  bool mode_known = false;   ///< its first trace recorded the training flags it read
  std::size_t mode_set = 0;  ///< their list (FunctionCache::Impl::mode_sets)
  std::string mode;          ///< the mode component of its first trace (which modes it serves)
  std::string label;
  /// A symbolic form and the training flags its traces read (the list and
  /// the values): it serves calls whose flags have those values.
  struct Family {
    std::size_t mode_set = 0;
    std::string mode;
    std::shared_ptr<SymbolicGraph> graph;
  };
  /// The symbolic forms by the ranks of the any-rank inputs, one per mode
  /// their traces read. A concrete graph's key in `lru` holds the mode
  /// component of the traces it came from.
  std::map<std::vector<std::int64_t>, std::vector<Family>> families;
  Lru lru;
  LruIndex index;
};

/// The state of one function's cache and the steps of FunctionCache::get:
/// lookup, static compile, dynamic policy (explicit specs or the auto-dynamic
/// manager), instantiation of a generalized graph for a call's sizes.
struct FunctionCache::Impl {
  Impl(JitConfig c, bool auto_on) : cfg(std::move(c)), auto_dyn(auto_on, cfg.dynamic_policy) {}

  const JitConfig cfg;
  mutable std::mutex mu;
  Lru lru;  // static graphs; front: most recent
  LruIndex index;
  int compiles = 0;
  int traces = 0;
  int generalized_made = 0;
  std::shared_ptr<const Compiled> last;
  AutoDynamic auto_dyn;
  std::list<std::shared_ptr<DynEntry>> gens;  // front: newest
  std::list<std::shared_ptr<DynEntry>> spec;  // explicit specs: one graph per training mode
  std::vector<TensorSpec> spec_of;            // the specs `spec` was made for
  std::uint64_t hook_seen = 0;
  // Mode guards: the distinct lists of training flags that traces read (one
  // list for most functions, empty for a function that reads none). A static
  // graph's key holds its list's index and the values read; a generalized
  // graph serves calls whose flags have the values it read.
  std::vector<std::vector<ModeRead>> mode_sets;
  std::vector<ModeRead> mode_reads;  // what the traces of the current compile read

  std::optional<std::string> mode_key(std::size_t set) const;
  std::pair<std::size_t, std::string> intern_reads();
  bool compatible(const DynEntry& e) const {
    return !e.mode_known || mode_key(e.mode_set) == e.mode;
  }
  std::shared_ptr<DynEntry> compatible_spec();
  void evict_generalized();
  std::shared_ptr<const Compiled> find_moded(Lru& lru, LruIndex& index, const std::string& key);

  std::shared_ptr<const Compiled> found(std::shared_ptr<const Compiled> c) {
    last = std::move(c);
    return last;
  }
  void drop_stale_graphs();
  std::shared_ptr<const Compiled> lookup(const std::string& key,
                                         const std::vector<TensorSpec>* specs);
  std::shared_ptr<const Compiled> compile_static(const std::string& key, const CallInfo& call,
                                                 const std::string& why);
  std::shared_ptr<DynEntry> new_entry(Generalized g, const std::string& why);
  std::shared_ptr<const Compiled> explicit_specs(const std::string& key,
                                                 std::span<const Shape> shapes,
                                                 const CallInfo& call,
                                                 const std::vector<TensorSpec>& specs,
                                                 std::string_view api);
  std::shared_ptr<const Compiled> auto_dynamic(const std::string& key,
                                               std::span<const Shape> shapes, const CallInfo& call);
  SymbolicGraph& symbolic_form(DynEntry& e, const Generalized& g,
                               const std::vector<std::int64_t>& ranks,
                               std::span<const Shape> shapes, const CallInfo& call,
                               std::string& mode);
  std::shared_ptr<const Compiled> instantiate(DynEntry& e, const std::string& key,
                                              std::span<const Shape> shapes, const CallInfo& call);
  Compiled finish(ir::Graph graph, std::vector<std::size_t> structure);
};

// The mode component of list `set` with the flags' values now ('R', the
// list's index, one '0' or '1' per flag); nullopt when a flag's cell is gone
// (no graph keyed with that list can be served again).
std::optional<std::string> FunctionCache::Impl::mode_key(std::size_t set) const {
  std::string k(1, 'R');
  put(k, static_cast<std::uint32_t>(set));
  for (const ModeRead& r : mode_sets[set]) {
    const std::shared_ptr<std::atomic<bool>> f = r.flag.lock();
    if (!f) return std::nullopt;
    k += f->load(std::memory_order_relaxed) ? '1' : '0';
  }
  return k;
}

// The list of the flags in mode_reads (added to mode_sets when new) and the
// mode component of the values read.
std::pair<std::size_t, std::string> FunctionCache::Impl::intern_reads() {
  auto same = [&](const std::vector<ModeRead>& set) {
    if (set.size() != mode_reads.size()) return false;
    for (std::size_t i = 0; i < set.size(); ++i)
      if (set[i].flag.lock().get() != mode_reads[i].id) return false;
    return true;
  };
  std::size_t i = 0;
  while (i < mode_sets.size() && !same(mode_sets[i])) ++i;
  if (i == mode_sets.size()) mode_sets.push_back(mode_reads);
  std::string k(1, 'R');
  put(k, static_cast<std::uint32_t>(i));
  for (const ModeRead& r : mode_reads) k += r.value ? '1' : '0';
  return {i, k};
}

FunctionCache::FunctionCache(JitConfig cfg) : cfg_(std::move(cfg)) {
  check_config(cfg_);
  const bool auto_on = cfg_.input_signature.empty() &&
                       (cfg_.dynamic == 1 || env_is_1("MS_AUTO_DYNAMIC_SHAPE_ENABLE"));
  impl_ = std::make_unique<Impl>(cfg_, auto_on);
  impl_->hook_seen = hook_version();
}

FunctionCache::~FunctionCache() = default;

std::shared_ptr<FunctionCache> make_function_cache(JitConfig&& cfg) {
  return std::make_shared<FunctionCache>(std::move(cfg));
}

std::shared_ptr<FunctionCache> make_function_cache(const JitConfig* cfg) {
  return std::make_shared<FunctionCache>(cfg != nullptr ? *cfg : JitConfig{});
}

// Hooks changed: every graph traced before is stale. Generalized graphs are
// dropped; static ones, keyed by the old version, can never be hit again, so
// they go too instead of filling the cache (hook churn).
void FunctionCache::Impl::drop_stale_graphs() {
  const std::uint64_t hv = hook_version();
  if (hv == hook_seen) return;
  hook_seen = hv;
  gens.clear();
  spec.clear();
  lru_evict_stale(lru, index, hv);
}

// The graph of `lru` keyed with `key` and the values now of the training
// flags its traces read, or null.
std::shared_ptr<const Compiled> FunctionCache::Impl::find_moded(Lru& l, LruIndex& idx,
                                                                const std::string& key) {
  for (std::size_t set = 0; set < mode_sets.size(); ++set)
    if (const std::optional<std::string> mode = mode_key(set))
      if (auto c = lru_find(l, idx, with_mode(key, *mode))) return c;
  return nullptr;
}

// The graph a previous call with this key compiled, or null.
std::shared_ptr<const Compiled> FunctionCache::Impl::lookup(const std::string& key,
                                                            const std::vector<TensorSpec>* specs) {
  if (specs == nullptr)
    if (auto c = find_moded(lru, index, key)) return found(std::move(c));
  if (specs != nullptr && spec_of == *specs)
    for (const auto& e : spec)
      if (compatible(*e))
        if (auto c = find_moded(e->lru, e->index, key)) return found(std::move(c));
  for (const auto& e : gens)
    if (compatible(*e))
      if (auto c = find_moded(e->lru, e->index, key)) return found(std::move(c));
  return nullptr;
}

// Optimizes `graph` and makes it runnable (the phase and dump are the caller's).
Compiled FunctionCache::Impl::finish(ir::Graph graph, std::vector<std::size_t> structure) {
  optimize(graph, {.jit_level = cfg.jit_level, .exec_order = cfg.exec_order, .verify = cfg.verify});
  Compiled c;
  c.dump = ir::to_string(graph);
  c.exe = std::make_shared<Executable>(std::move(graph));
  c.structure = std::move(structure);
  return c;
}

std::shared_ptr<const Compiled> FunctionCache::Impl::compile_static(const std::string& key,
                                                                    const CallInfo& call,
                                                                    const std::string& why) {
  mode_reads.clear();
  Traced t;
  {
    const ModeRecording rec(mode_reads);
    t = trace_call(call, {});
  }
  ++traces;
  const std::string mode = intern_reads().second;
  auto c = std::make_shared<Compiled>(finish(std::move(t.graph), std::move(t.structure)));
  c->phase = call.phase();
  if (mode.size() > 5) c->phase += str_cat(", training flags ", mode.substr(5));
  ++compiles;
  log_compile(
      cfg, [&] { return str_cat("compile #", compiles, ": static graph ", c->phase, ": ", why); });
  // A key built before a hook change that this call already saw is never
  // built again: run its graph, keep it out of the cache.
  if (key_hook_version(key) >= hook_seen)
    lru_put(lru, index, with_mode(key, mode), c, cfg.cache_capacity);
  return found(std::move(c));
}

std::shared_ptr<DynEntry> FunctionCache::Impl::new_entry(Generalized g, const std::string& why) {
  auto e = std::make_shared<DynEntry>();
  e->gen = std::move(g);
  ++compiles;
  e->label = str_cat("generalized graph #", ++generalized_made);
  log_compile(cfg, [&] {
    return str_cat("compile #", compiles, ": ", e->label, " (", e->gen.to_string(), "): ", why);
  });
  return e;
}

// The symbolic form of entry `e` for the ranks of its any-rank inputs and
// the training flags now (traced and probed on first use); `mode` receives
// the mode component of the flags its traces read.
SymbolicGraph& FunctionCache::Impl::symbolic_form(DynEntry& e, const Generalized& g,
                                                  const std::vector<std::int64_t>& ranks,
                                                  std::span<const Shape> shapes,
                                                  const CallInfo& call, std::string& mode) {
  std::vector<DynEntry::Family>& forms = e.families[ranks];
  // A form keyed with a destroyed cell's flag can never serve again.
  std::erase_if(forms, [&](const DynEntry::Family& f) { return !mode_key(f.mode_set); });
  for (const DynEntry::Family& f : forms)
    if (mode_key(f.mode_set) == f.mode) {
      mode = f.mode;
      return *f.graph;
    }
  auto at = [&](std::span<const Shape> s) { return trace_call(call, s); };
  mode_reads.clear();
  std::shared_ptr<SymbolicGraph> fam;
  {
    const ModeRecording rec(mode_reads);
    fam = std::make_shared<SymbolicGraph>(g, shapes, dyn::detail::TraceAt(at));
  }
  DynEntry::Family& form = forms.emplace_back();
  form.graph = fam;
  std::tie(form.mode_set, form.mode) = intern_reads();
  mode = form.mode;
  if (!e.mode_known) {
    e.mode_set = form.mode_set;
    e.mode = form.mode;
    e.mode_known = true;
  }
  traces += fam->traces();
  log_compile(cfg, [&] {
    if (!fam->generalizable())
      return str_cat(e.label, " (", e.gen.to_string(),
                     "): the function cannot be generalized: ", fam->why(),
                     "; every size gets its own graph");
    std::string guards;
    for (const std::string& s : fam->guards()) guards += (guards.empty() ? "" : ", ") + s;
    return str_cat(e.label, " (", e.gen.to_string(), "): traced ", fam->traces(), " times",
                   ranks.empty() ? "" : " for this rank",
                   guards.empty() ? std::string() : "; guards: " + guards);
  });
  return *fam;
}

// The concrete graph of entry `e` for the call's sizes: instantiated from its
// symbolic form, or traced at these sizes when the form does not serve them.
std::shared_ptr<const Compiled> FunctionCache::Impl::instantiate(DynEntry& e,
                                                                 const std::string& key,
                                                                 std::span<const Shape> shapes,
                                                                 const CallInfo& call) {
  std::vector<std::int64_t> ranks;
  const Generalized g = fix_ranks(e.gen, shapes, ranks);
  std::string mode;
  const SymbolicGraph& fam = symbolic_form(e, g, ranks, shapes, call, mode);
  std::vector<std::int64_t> values;
  std::string why;
  MS_CHECK(bind_symbols(g, shapes, values, &why), ShapeError, "ms::jit: ", why);
  const std::string binding = binding_text(g, values);
  std::optional<ir::Graph> graph = fam.instantiate(values, &why);
  if (graph) {
    try {
      ir::verify(*graph, "ms::jit generalized graph");
    } catch (const Error& err) {
      why = err.what();
      graph.reset();
    }
  }
  std::vector<std::size_t> structure = fam.structure();
  const bool specialized = !graph;
  if (specialized) {
    // A trace of its own: the training flags it reads key its graph.
    mode_reads.clear();
    Traced t;
    {
      const ModeRecording rec(mode_reads);
      t = trace_call(call, shapes);
    }
    mode = intern_reads().second;
    ++traces;
    graph = std::move(t.graph);
    structure = std::move(t.structure);
    log_compile(cfg, [&] {
      return str_cat(e.label, ": sizes ", binding, " traced a graph of their own: ", why);
    });
  }
  auto c = std::make_shared<Compiled>(finish(std::move(*graph), std::move(structure)));
  c->dump =
      str_cat("// ", e.label, " (", e.gen.to_string(), ")",
              fam.generalizable() ? "\n" + fam.dump() : std::string(" not generalizable\n"), "// ",
              specialized ? "specialized" : "instantiated", " for ", binding, ":\n", c->dump);
  c->phase = str_cat('(', e.gen.to_string(), "), hook_version ", hook_version(), ", ", e.label,
                     " with ", binding);
  lru_put(e.lru, e.index, with_mode(key, mode), c, cfg.binding_cache_capacity);
  return found(std::move(c));
}

// Explicit specs: one generalized graph; a call that does not fit is an error.
std::shared_ptr<const Compiled> FunctionCache::Impl::explicit_specs(
    const std::string& key, std::span<const Shape> shapes, const CallInfo& call,
    const std::vector<TensorSpec>& specs, std::string_view api) {
  Generalized g = from_specs(specs, signature_of(call), str_cat("ms::jit ", api));
  if (spec_of != specs) {
    spec.clear();
    spec_of = specs;
  }
  std::shared_ptr<DynEntry> e = compatible_spec();
  if (!e) {
    e = new_entry(std::move(g), std::string(api));
    spec.push_front(e);
    constexpr std::size_t kModesKept = 8;  // training-mode combinations of the specs' graph
    while (spec.size() > kModesKept) spec.pop_back();
  }
  return instantiate(*e, key, shapes, call);
}

// The explicit specs' graph for the training flags now, or null.
std::shared_ptr<DynEntry> FunctionCache::Impl::compatible_spec() {
  for (const auto& e : spec)
    if (compatible(*e)) return e;
  return nullptr;
}

// Keeps at most auto_dyn.keep(...) generalized graphs for the training flags
// now (the newest, gens.front(), stays); graphs of the other modes are kept,
// graphs keyed with a destroyed cell's flag (never served again) are deleted.
void FunctionCache::Impl::evict_generalized() {
  std::erase_if(gens, [&](const std::shared_ptr<DynEntry>& e) {
    if (!e->mode_known || mode_key(e->mode_set)) return false;
    log_compile(cfg, [&] {
      return str_cat(e->label, " (", e->gen.to_string(),
                     ") deleted: a cell whose training flag it read is gone");
    });
    return true;
  });
  std::size_t n = 0;
  for (const auto& e : gens) n += compatible(*e) ? 1 : 0;
  const std::size_t keep = auto_dyn.keep(cfg.max_generalized);
  for (auto it = std::prev(gens.end()); n > keep && it != gens.begin();) {
    auto here = it--;
    if (!compatible(**here)) continue;
    log_compile(
        cfg, [&] { return str_cat((*here)->label, " (", (*here)->gen.to_string(), ") deleted"); });
    gens.erase(here);
    --n;
  }
}

// The auto-dynamic manager decides; the cache compiles and keeps.
std::shared_ptr<const Compiled> FunctionCache::Impl::auto_dynamic(const std::string& key,
                                                                  std::span<const Shape> shapes,
                                                                  const CallInfo& call) {
  if (!auto_dyn.active())
    return compile_static(key, call, auto_dyn.enabled() ? "auto-dynamic is off" : "new signature");
  // Only the generalized graphs of the training flags now can serve the call.
  std::vector<const Generalized*> kept;
  std::vector<std::list<std::shared_ptr<DynEntry>>::iterator> kept_at;
  for (auto it = gens.begin(); it != gens.end(); ++it)
    if (compatible(**it)) {
      kept.push_back(&(*it)->gen);
      kept_at.push_back(it);
    }
  Decision d = auto_dyn.decide(signature_of(call), shapes, kept);
  if (d.switched_off) gens.clear();
  if (d.kind == Decision::Kind::Static) return compile_static(key, call, d.why);
  if (d.kind == Decision::Kind::Reuse) {
    gens.splice(gens.begin(), gens, kept_at[d.reuse]);
    return instantiate(*gens.front(), key, shapes, call);
  }
  gens.push_front(new_entry(std::move(d.gen), d.why));
  evict_generalized();
  return instantiate(*gens.front(), key, shapes, call);
}

std::shared_ptr<const Compiled> FunctionCache::get(const std::string& key,
                                                   std::span<const Tensor> inputs,
                                                   const CallInfo& call) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  m.drop_stale_graphs();
  const std::vector<TensorSpec>* specs = call.specs != nullptr          ? call.specs
                                         : cfg_.input_signature.empty() ? nullptr
                                                                        : &cfg_.input_signature;
  if (auto c = m.lookup(key, specs)) return c;
  // A miss. Compiles happen under the lock: two threads calling with the same
  // new signature compile it once.
  std::vector<Shape> shapes;
  shapes.reserve(inputs.size());
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  if (specs != nullptr)
    return m.explicit_specs(key, shapes, call, *specs,
                            call.specs != nullptr ? call.spec_api : "input_signature");
  return m.auto_dynamic(key, shapes, call);
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
  return impl_->lru.size() + impl_->gens.size() + impl_->spec.size();
}

std::size_t FunctionCache::generalized_count() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->gens.size() + impl_->spec.size();
}

bool FunctionCache::auto_dynamic_active() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->auto_dyn.active();
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
