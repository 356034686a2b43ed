// The executor of compiled graphs and its memory plan.
//
// Memory plan by record and replay: a frame's first run installs a
// StorageSource that only records each storage allocation's size and
// lifetime (allocation and release times on one clock). After the run the
// blocks that died during the run are packed into one arena (greedy, largest
// first, a block may share bytes only with blocks whose lifetimes are
// disjoint); blocks still alive at the end (outputs, or views of them) stay
// system allocations. Later runs serve the i-th allocation from its planned
// offset when its size matches and no block sharing its bytes is alive, else
// from the system, so a replay that differs from the recording stays correct.
#include <algorithm>
#include <limits>
#include <mutex>

#include "ms/jit/compile.hpp"
#include "ms/jit/dump.hpp"
#include "ms/kernels/layout.hpp"

namespace ms::compiler {
namespace {

class PlannedSource final : public StorageSource {
 public:
  std::byte* acquire(std::int64_t nbytes, std::int64_t& token) override {
    token = next_++;
    if (recording_) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back({nbytes, clock_++, -1});
      return nullptr;
    }
    const auto i = static_cast<std::size_t>(token);
    if (i >= blocks_.size() || blocks_[i].offset < 0 || blocks_[i].nbytes != nbytes) return nullptr;
    const Block& b = blocks_[i];
    std::lock_guard<std::mutex> lock(mu_);
    // The blocks served now are few (those alive at one point of the graph):
    // block i is free when none of them is i or shares bytes with it.
    for (std::size_t j : live_)
      if (j == i || (blocks_[j].offset < b.end && b.offset < blocks_[j].end)) return nullptr;
    live_.push_back(i);
    return arena_->data() + b.offset;
  }

  void release(std::int64_t token, bool from_source) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    if (from_source) {
      std::erase(live_, static_cast<std::size_t>(token));
    } else if (recording_ && static_cast<std::size_t>(token) < events_.size()) {
      events_[static_cast<std::size_t>(token)].freed = clock_++;
    }
  }

  void begin_run() { next_ = 0; }

  /// Ends the recording run and plans the arena. Returns the arena bytes.
  std::int64_t plan() {
    std::vector<Event> ev;
    {
      std::lock_guard<std::mutex> lock(mu_);
      recording_ = false;
      ev = events_;
    }
    blocks_.assign(ev.size(), Block{});
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      blocks_[i].nbytes = ev[i].nbytes;
      if (ev[i].freed >= 0) idx.push_back(i);  // died during the run: plannable
    }
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      return ev[a].nbytes != ev[b].nbytes ? ev[a].nbytes > ev[b].nbytes : a < b;
    });
    auto rounded = [](std::int64_t n) { return std::max<std::int64_t>(64, (n + 63) / 64 * 64); };
    std::int64_t total = 0;
    std::vector<std::size_t> placed;
    for (std::size_t i : idx) {
      // Lowest offset not overlapping any placed block that is alive at the same time.
      std::vector<std::pair<std::int64_t, std::int64_t>> busy;
      for (std::size_t j : placed)
        if (ev[i].alloc < ev[j].freed && ev[j].alloc < ev[i].freed)
          busy.emplace_back(blocks_[j].offset, blocks_[j].offset + rounded(ev[j].nbytes));
      std::sort(busy.begin(), busy.end());
      std::int64_t off = 0;
      for (const auto& [lo, hi] : busy) {
        if (off + rounded(ev[i].nbytes) <= lo) break;
        off = std::max(off, hi);
      }
      blocks_[i].offset = off;
      blocks_[i].end = off + rounded(ev[i].nbytes);
      total = std::max(total, blocks_[i].end);
      placed.push_back(i);
    }
    live_.clear();
    planned_ = static_cast<std::int64_t>(placed.size());
    if (total > 0) arena_ = Storage::allocate(total, "jit memory plan");
    return total;
  }

  std::int64_t planned() const { return planned_; }
  bool recording() const { return recording_; }

 private:
  struct Event {
    std::int64_t nbytes;
    std::int64_t alloc;
    std::int64_t freed;
  };
  struct Block {
    std::int64_t nbytes = 0;
    std::int64_t offset = -1;  ///< -1: served by the system
    std::int64_t end = -1;     ///< offset + its rounded size
  };
  std::mutex mu_;
  bool recording_ = true;
  std::int64_t next_ = 0;
  std::int64_t clock_ = 0;
  std::int64_t planned_ = 0;
  std::vector<Event> events_;
  std::vector<Block> blocks_;
  std::vector<std::size_t> live_;  ///< the planned blocks served and not yet released
  std::shared_ptr<Storage> arena_;
};

// Restores the thread's previous storage source.
struct SourceScope {
  std::shared_ptr<StorageSource> prev;
  explicit SourceScope(std::shared_ptr<StorageSource> s) : prev(set_storage_source(std::move(s))) {}
  ~SourceScope() { set_storage_source(std::move(prev)); }
  SourceScope(const SourceScope&) = delete;
  SourceScope& operator=(const SourceScope&) = delete;
};

}  // namespace

namespace {
// Whether value v is a capture or a constant: bound once per frame, never
// released by a step.
bool capture_or_const(const ir::Graph& g, ir::ValueId v) {
  const ir::NodeKind k = g.producer(v).kind;
  return k == ir::NodeKind::Capture || k == ir::NodeKind::Const;
}

// Bit k of a step's input mask (take_in, fixed_in; inputs past the 64th have none).
bool step_bit(std::uint64_t mask, std::size_t k) { return k < 64 && (mask >> k & 1) != 0; }

// The file-name stem of node `i` when it is dumped ("MatMul.3", or with the
// marked cells it was traced in, "Block-Dense.MatMul.3"); "" when it is not.
std::string dump_stem(const ir::Node& n, std::size_t i) {
  const bool cell = !n.dump_scope.empty() && compiler::detail::cell_dumps_active();
  if (!cell && !dump_enabled(n.def->name)) return {};
  return ::ms::detail::str_cat(n.dump_scope, n.dump_scope.empty() ? "" : ".", ops::ir_name(*n.def),
                               '.', i);
}
}  // namespace

struct Executable::Step {
  enum class Kind : std::uint8_t { Op, Fused, Assign } kind = Kind::Op;
  const ops::OpDef* def = nullptr;
  ops::BoundEvalFn eval;      ///< Op: def's eval on the node's attributes
  ops::BoundUpdateFn update;  ///< Op whose def has an update form: it, on them
  std::shared_ptr<const ir::FusedRegion> region;
  std::vector<ir::ValueId> in, out;
  std::vector<ir::ValueId> release;  ///< values dead after this step
  ir::ValueId in_place;              ///< Fused: a capture to write the result into (its Assign is
                                     ///< skipped); an Op with an update form: its first input, each
                                     ///< output k written into input k (their Assigns skipped)
  bool skip = false;                 ///< Assign: done in place by the step that computes its value
  /// Op (a cast of a capture): its value is kept copy `kept` (not computed);
  /// Fused with in_place: also writes kept copy `kept` (cast of the result);
  /// Op with in_place (an update whose row names an input it can copy,
  /// OpDef::update_bf16_copy): also writes kept copy `kept` (cast of that input).
  int kept = -1;
  std::string dump;  ///< file-name stem when the op is marked by set_dump
  /// Op: a layout op that may return views (OpKind::Layout, may_alias): a
  /// frame replays the views it returned when its inputs' layouts repeat.
  bool replay_views = false;
  /// Op: bit k set when input k dies at this step and is read once by it: the
  /// step moves it out of the frame instead of copying it.
  std::uint64_t take_in = 0;
  /// Op: bit k set when input k is a capture, a constant or a bound view (the
  /// same tensor for a frame's life): the frame's argument list for the step
  /// holds it from the start, so a run does not copy it.
  std::uint64_t fixed_in = 0;
  /// Op whose entry has a run form and whose outputs' shapes are all known:
  /// the run form, called on outputs allocated as `outs` says (the graph's
  /// types: the op is not asked to infer them again).
  ops::BoundRunFn run;
  struct Out {
    DType dtype;
    Shape shape;
    DimVector strides;
    std::int64_t nbytes;
  };
  std::vector<Out> outs;
};

namespace {
// Gives op step `s` the run form of `def` when it has one and the graph knows
// every output's shape (an Executable's inputs fix its values' types).
void bind_run(Executable::Step& s, const ir::Graph& g, const ops::OpDef& def,
              const ops::Attrs& attrs) {
  if (def.bind_run == nullptr) return;
  const char* name = def.name.data();  // an entry's name: a string literal
  std::vector<Executable::Step::Out> outs;
  for (ir::ValueId v : s.out) {
    const ops::TensorType& t = g.value(v).type;
    if (!t.shape.is_static()) return;
    outs.push_back({t.dtype, t.shape, shape_contiguous_strides(t.shape, name),
                    shape_nbytes(shape_numel(t.shape, name), dtype_itemsize(t.dtype), name)});
  }
  s.run = def.bind_run(attrs);
  s.outs = std::move(outs);
}

// What a layout step returned in one frame's last run of it, when every
// result was a view of an input: the inputs' layouts, and per result the
// input it views, its offset from that input's and its own layout. Layout
// ops decide their results from the inputs' dtypes, shapes and strides and
// their attributes only, so equal layouts give equal views. (An Executable's
// shapes are fixed by its input check; its inputs' strides and offsets are
// not: a graph input may be any strided view.)
struct ViewReplay {
  struct Layout {
    DType dtype;
    Shape shape;
    DimVector strides;
  };
  struct Result {
    std::size_t input;
    std::int64_t delta;
    Layout layout;
  };
  enum class State : std::uint8_t { Unknown, Views, Never } state = State::Unknown;
  std::vector<Layout> in;
  std::vector<Result> out;

  static Layout layout_of(const Tensor& t) { return {t.dtype(), t.shape(), t.strides()}; }

  // Whether the values `ids` (a step's inputs, in order) have the recorded layouts.
  bool matches(std::span<const ir::ValueId> ids,
               const ir::IdTable<ir::ValueId, Tensor>& vals) const {
    if (state != State::Views || ids.size() != in.size()) return false;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const Tensor& t = vals[ids[k]];
      if (t.dtype() != in[k].dtype || !(t.shape() == in[k].shape) ||
          !(t.strides() == in[k].strides))
        return false;
    }
    return true;
  }

  // Records the results `r` of a run on `args`; Never when one is not a view.
  void record(std::span<const Tensor> args, std::span<const Tensor> r) {
    in.clear();
    out.clear();
    state = State::Never;
    for (const Tensor& t : args) in.push_back(layout_of(t));
    for (const Tensor& y : r) {
      const auto j = static_cast<std::size_t>(
          std::find_if(args.begin(), args.end(),
                       [&](const Tensor& x) { return x.storage() == y.storage(); }) -
          args.begin());
      if (j == args.size()) return;  // not a view of an input (undefined: no storage)
      out.push_back({j, y.offset() - args[j].offset(), layout_of(y)});
    }
    state = State::Views;
  }
};
}  // namespace

// A cast of a captured tensor kept across runs (see plan_kept_casts).
struct Executable::Kept {
  Tensor master;             ///< the captured tensor
  Tensor copy;               ///< cast(master), of the cast's dtype
  std::uint64_t synced = 0;  ///< master's write_count() when copy was last made equal
  bool made = false;         ///< copy was ever made
  bool rewritten = false;    ///< a fused update rewrites it with the capture
};

struct Executable::Frame {
  ir::IdTable<ir::ValueId, Tensor> vals;
  /// Per op step, its arguments: the fixed inputs always, the others while it runs.
  std::vector<std::vector<Tensor>> args;
  std::vector<Tensor> results;  ///< a run-form step's outputs while it runs
  std::vector<const Tensor*> ptrs;
  std::vector<ViewReplay> views;  ///< per step (used by replay_views steps)
  std::shared_ptr<PlannedSource> source = std::make_shared<PlannedSource>();
};

Executable::Executable(ir::Graph g) : graph_(std::move(g)) {
  const ir::Graph& G = graph_;
  constexpr std::size_t kNoStep = std::numeric_limits<std::size_t>::max();
  ir::IdTable<ir::ValueId, std::size_t> last_use(G.values.size(), kNoStep);
  // bound for the frame's life or returned
  ir::IdTable<ir::ValueId, bool> keep(G.values.size(), false);
  for (ir::ValueId v : G.outputs) keep[v] = true;
  for (std::size_t i = 0; i < G.nodes.size(); ++i) {
    const ir::Node& n = G.nodes[i];
    switch (n.kind) {
      case ir::NodeKind::Input: {
        const auto a = static_cast<std::size_t>(n.arg_index);
        if (input_values_.size() <= a) input_values_.resize(a + 1);
        input_values_[a] = n.outputs[0];
        leaf_values_.push_back(n.outputs[0]);
        break;
      }
      case ir::NodeKind::Capture:
      case ir::NodeKind::Const:
        keep[n.outputs[0]] = true;
        leaf_values_.push_back(n.outputs[0]);
        break;
      case ir::NodeKind::Scalar: break;
      case ir::NodeKind::Op:
      case ir::NodeKind::Fused:
      case ir::NodeKind::Assign: {
        Step s;
        s.in = n.inputs;
        s.out = n.outputs;
        if (n.kind == ir::NodeKind::Assign) {
          s.kind = Step::Kind::Assign;
        } else if (n.kind == ir::NodeKind::Fused) {
          s.kind = Step::Kind::Fused;
          s.region = n.fused;
        } else if (n.ew_id >= 0) {  // an unfused elementwise op: a region of one
          s.kind = Step::Kind::Fused;
          const ir::NodeId id{i};
          s.region = build_region(G, std::span<const ir::NodeId>(&id, 1), s.in);
          s.dump = dump_stem(n, i);
        } else {
          s.dump = dump_stem(n, i);
          s.def = n.def;
          s.replay_views = n.def->kind == ops::OpKind::Layout && n.def->may_alias && s.dump.empty();
          s.eval = ops::bind_eval(*n.def, n.attrs);
          if (n.def->update) s.update = ops::bind_update(*n.def, n.attrs);
          bind_run(s, G, *n.def, n.attrs);
        }
        // An output nothing reads (conv2d's pre-pool output in a forward-only
        // graph, an unused draw) is released right after its own step.
        for (ir::ValueId v : s.out) last_use[v] = steps_.size();
        for (ir::ValueId v : s.in) last_use[v] = steps_.size();
        steps_.push_back(std::move(s));
        break;
      }
    }
  }
  for (std::size_t i = 0; i < G.values.size(); ++i) {
    const ir::ValueId v{i};
    if (last_use[v] != kNoStep && !keep[v]) steps_[last_use[v]].release.push_back(v);
  }
  plan_in_place_updates();
  plan_kept_casts();
  plan_bound_views();
  ir::IdTable<ir::ValueId, bool> bound_view(G.values.size(), false);
  for (const auto& bv : bound_views_) bound_view[bv.first] = true;
  for (Step& s : steps_) {
    if (s.kind != Step::Kind::Op) continue;
    for (std::size_t k = 0; k < s.in.size() && k < 64; ++k)
      if (capture_or_const(G, s.in[k]) || bound_view[s.in[k]]) s.fixed_in |= std::uint64_t{1} << k;
    if (s.in_place.valid() || s.kept >= 0 || !s.dump.empty()) continue;
    for (std::size_t k = 0; k < s.in.size() && k < 64; ++k)
      if (std::count(s.in.begin(), s.in.end(), s.in[k]) == 1 &&
          std::find(s.release.begin(), s.release.end(), s.in[k]) != s.release.end())
        s.take_in |= std::uint64_t{1} << k;
  }
}

// A step qualifies when it is a layout op that may return a view (OpKind::Layout
// and OpDef::may_alias: transpose, reshape, slice, ...; no host callback), it reads
// only captures, constants and views bound before it (so chains of views
// fold), nothing else is asked of it (a dump, an in-place write, a kept cast)
// and its results are not graph outputs (a frame drops those after a run).
// It runs here once, on the captured tensors; it is bound only when every
// result shares an input's storage and has the type the graph gives it: a
// reshape that had to copy keeps running, or its copy would go stale when
// the capture is written.
void Executable::plan_bound_views() {
  const ir::Graph& G = graph_;
  ir::IdTable<ir::ValueId, Tensor> bound(G.values.size());
  for (const ir::Node& n : G.nodes)
    if (n.kind == ir::NodeKind::Capture || n.kind == ir::NodeKind::Const)
      bound[n.outputs[0]] = n.tensor;
  ir::IdTable<ir::ValueId, bool> is_output(G.values.size(), false);
  for (ir::ValueId v : G.outputs) is_output[v] = true;
  for (Step& s : steps_) {
    if (s.kind != Step::Kind::Op || s.def->kind != ops::OpKind::Layout || !s.def->may_alias ||
        s.in_place.valid() || s.kept >= 0 || !s.dump.empty())
      continue;
    if (!std::all_of(s.in.begin(), s.in.end(), [&](ir::ValueId v) { return bound[v].defined(); }) ||
        std::any_of(s.out.begin(), s.out.end(), [&](ir::ValueId v) { return is_output[v]; }))
      continue;
    std::vector<Tensor> in;
    for (ir::ValueId v : s.in) in.push_back(bound[v]);
    std::vector<Tensor> r;
    try {
      r = s.eval(in);
    } catch (const Error&) {
      continue;  // the step raises when it runs
    }
    bool views = r.size() == s.out.size();
    for (std::size_t k = 0; views && k < r.size(); ++k) {
      const ops::TensorType& t = G.value(s.out[k]).type;
      views = r[k].defined() && r[k].dtype() == t.dtype && r[k].shape() == t.shape &&
              std::any_of(in.begin(), in.end(),
                          [&](const Tensor& x) { return x.storage() == r[k].storage(); });
    }
    if (!views) continue;
    for (std::size_t k = 0; k < r.size(); ++k) {
      bound[s.out[k]] = r[k];
      bound_views_.emplace_back(s.out[k], r[k]);
    }
  }
  // A bound step's outputs are bound: the step goes. Bound views live as long
  // as the frame, as the captures do.
  std::erase_if(steps_, [&](const Step& s) { return !s.out.empty() && bound[s.out[0]].defined(); });
  for (Step& s : steps_)
    std::erase_if(s.release, [&](ir::ValueId v) { return bound[v].defined(); });
}

namespace {
using StepUsers = ir::IdTable<ir::ValueId, std::vector<std::size_t>>;  // steps reading a value

// Value v and the values that may share its memory (the outputs of may_alias
// ops on it, transitively).
std::vector<ir::ValueId> aliases_of(const StepUsers& users,
                                    const std::vector<Executable::Step>& steps, ir::ValueId v,
                                    std::size_t nv) {
  std::vector<ir::ValueId> all{v};
  ir::IdTable<ir::ValueId, bool> seen(nv, false);
  seen[v] = true;
  for (std::size_t i = 0; i < all.size(); ++i)
    for (std::size_t u : users[all[i]]) {
      const Executable::Step& us = steps[u];
      if (us.kind == Executable::Step::Kind::Op && us.def->may_alias)
        for (ir::ValueId o : us.out)
          if (!seen[o]) {
            seen[o] = true;
            all.push_back(o);
          }
    }
  return all;
}

// Steps (indices) that read value v or a value that may share its memory.
// `reaches_output` is set when one of those values is a graph output.
std::vector<std::size_t> readers_of(const StepUsers& users,
                                    const std::vector<Executable::Step>& steps, ir::ValueId v,
                                    std::size_t nv, bool& reaches_output,
                                    const ir::IdTable<ir::ValueId, bool>& is_output) {
  std::vector<std::size_t> out;
  for (ir::ValueId x : aliases_of(users, steps, v, nv)) {
    reaches_output |= is_output[x];
    out.insert(out.end(), users[x].begin(), users[x].end());
  }
  return out;
}

// Whether step si may write capture c in place of Assign step a: no view of c
// is a graph output, nothing reads c's old value after si (directly or
// through a view of it), and si reads c only directly.
bool writable_in_place(const StepUsers& users, const std::vector<Executable::Step>& steps,
                       const ir::IdTable<ir::ValueId, bool>& is_output, ir::ValueId c,
                       std::size_t si, std::size_t a) {
  for (ir::ValueId x : aliases_of(users, steps, c, is_output.size())) {
    if (x != c && is_output[x]) return false;
    for (std::size_t u : users[x]) {
      if (u == a) continue;
      if (u == si) {
        if (x != c) return false;  // S reads the parameter itself, not a view of it
        continue;
      }
      if (u > si || steps[u].kind == Executable::Step::Kind::Assign) return false;  // after S
    }
  }
  return true;
}
}  // namespace

// A parameter update `Assign(p, v)` where v is computed by an elementwise
// (fused) step S, or is output k of an op with an in-place form (OpDef::update)
// reading p as its input k, copies v into p after the whole graph ran. When
// nothing reads p's old value after S (directly or through a view of it), and
// S reads p only directly (same index as it writes), S can write into p
// itself: one pass over the parameter instead of three (write v, read v,
// write p). An op's update form writes all its outputs, so it runs in place
// only when every output qualifies (matmul_scale_add's moment and parameter).
void Executable::plan_in_place_updates() {
  const ir::Graph& G = graph_;
  const std::size_t nv = G.values.size();
  constexpr std::size_t kNoStep = std::numeric_limits<std::size_t>::max();
  ir::IdTable<ir::ValueId, std::size_t> producer(nv, kNoStep);   // step index
  ir::IdTable<ir::ValueId, std::vector<std::size_t>> users(nv);  // step indices
  ir::IdTable<ir::ValueId, int> assigns(nv, 0);
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    for (ir::ValueId v : steps_[i].in) users[v].push_back(i);
    for (ir::ValueId v : steps_[i].out) producer[v] = i;
    if (steps_[i].kind == Step::Kind::Assign) ++assigns[steps_[i].in[0]];
  }
  ir::IdTable<ir::ValueId, bool> is_output(nv, false);
  for (ir::ValueId v : G.outputs) is_output[v] = true;
  // Per op step with an update form, the Assigns it can do in place (one per output).
  std::vector<std::vector<std::size_t>> op_assigns(steps_.size());
  for (std::size_t a = 0; a < steps_.size(); ++a) {
    Step& as = steps_[a];
    if (as.kind != Step::Kind::Assign) continue;
    const ir::ValueId c = as.in[0], v = as.in[1];
    const std::size_t si = producer[v];
    if (assigns[c] != 1 || si == kNoStep) continue;
    Step& s = steps_[si];
    if (s.in_place.valid()) continue;
    if (!(G.value(c).type == G.value(v).type)) continue;
    // A fused region (one output) qualifies; an op's update form writes each
    // output k into its input k: output k qualifies when c is that input, read
    // once by the step and contiguous (captures are bound when the graph is
    // planned), and the step when all its outputs do.
    const auto k =
        static_cast<std::size_t>(std::find(s.out.begin(), s.out.end(), v) - s.out.begin());
    const bool op_update = s.kind == Step::Kind::Op && s.def->update && k < s.in.size() &&
                           s.in[k] == c && std::count(s.in.begin(), s.in.end(), c) == 1 &&
                           G.producer(c).tensor.is_contiguous();
    if (!(s.kind == Step::Kind::Fused && s.out.size() == 1) && !op_update) continue;
    if (!writable_in_place(users, steps_, is_output, c, si, a)) continue;
    if (s.kind == Step::Kind::Fused) {
      s.in_place = c;
      as.skip = true;
    } else {
      op_assigns[si].push_back(a);
    }
  }
  for (std::size_t si = 0; si < steps_.size(); ++si) {
    Step& s = steps_[si];
    if (op_assigns[si].empty() || op_assigns[si].size() != s.out.size()) continue;
    // The captures written must not share memory with each other.
    bool distinct = true;
    for (std::size_t i = 0; i < s.out.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        distinct &= G.producer(s.in[i]).tensor.storage() != G.producer(s.in[j]).tensor.storage();
    if (!distinct) continue;
    s.in_place = s.in[0];
    for (std::size_t a : op_assigns[si]) steps_[a].skip = true;
  }
}

// A step `X = Cast(c)` of a captured tensor c to another floating dtype reads
// a copy kept across runs instead of casting each run, when either
//  - the graph never writes c (the copy stays valid until c is written
//    elsewhere), or
//  - c is contiguous, its only write is the in-place fused update S
//    (plan_in_place_updates), or an in-place op S whose update can copy c
//    to bfloat16 (OpDef::update_bf16_copy: matmul_scale_add of a bfloat16
//    product, amp O2's Momentum update) with X bfloat16, and every reader of
//    X (or of a view of it) runs before S: S then also writes cast(result)
//    into the copy in the same pass.
// X must not be a graph output (the caller would hold the copy). Before each
// run a copy whose capture was written since (Storage::write_count: by
// copy_, assign, set_data, a checkpoint load, another graph) is recast.
namespace {
// The input of in-place step `s` whose bfloat16 copy its update pass can
// write (OpDef::update_bf16_copy), or -1.
int bf16_copy_input(const ir::Graph& G, const Executable::Step& s) {
  if (s.kind != Executable::Step::Kind::Op || !s.in_place.valid() ||
      s.def->update_bf16_copy == nullptr)
    return -1;
  std::vector<ops::TensorType> types;
  types.reserve(s.in.size());
  for (ir::ValueId v : s.in) types.push_back(G.value(v).type);
  return s.def->update_bf16_copy(types);
}
}  // namespace

void Executable::plan_kept_casts() {
  const ir::Graph& G = graph_;
  const std::size_t nv = G.values.size();
  constexpr std::size_t kNoStep = std::numeric_limits<std::size_t>::max();
  ir::IdTable<ir::ValueId, std::vector<std::size_t>> users(nv);
  ir::IdTable<ir::ValueId, int> assigns(nv, 0);
  ir::IdTable<ir::ValueId, std::size_t> writer(nv, kNoStep);  // the in-place fused step
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    for (ir::ValueId v : s.in) users[v].push_back(i);
    if (s.kind == Step::Kind::Assign) ++assigns[s.in[0]];
    if (s.kind == Step::Kind::Fused && s.in_place.valid()) writer[s.in_place] = i;
    if (const int k = bf16_copy_input(G, s); k >= 0) writer[s.in[static_cast<std::size_t>(k)]] = i;
  }
  ir::IdTable<ir::ValueId, bool> is_output(nv, false);
  for (ir::ValueId v : G.outputs) is_output[v] = true;
  for (std::size_t x = 0; x < steps_.size(); ++x) {
    Step& xs = steps_[x];
    if (xs.kind != Step::Kind::Op || xs.def->name != "cast" || !xs.dump.empty()) continue;
    const ir::ValueId c = xs.in[0], out = xs.out[0];
    const ir::Node& cn = G.producer(c);
    const DType from = G.value(c).type.dtype, to = G.value(out).type.dtype;
    if (cn.kind != ir::NodeKind::Capture || from == to || !dtype_is_float(from) ||
        !dtype_is_float(to))
      continue;
    bool reaches_output = false;
    const std::vector<std::size_t> readers =
        readers_of(users, steps_, out, nv, reaches_output, is_output);
    if (reaches_output) continue;
    const std::size_t w = writer[c];
    if (assigns[c] > 0) {
      // ew_run_also converts from the update's output: a register type (float32, float64),
      // written densely (a strided capture is recast each run instead).
      if (assigns[c] != 1 || w == kNoStep || steps_[w].kept >= 0 ||
          kernels::ew_register_type(from, "cast") != from || !cn.tensor.is_contiguous() ||
          (steps_[w].kind == Step::Kind::Op && to != DType::BFloat16))
        continue;
      if (std::any_of(readers.begin(), readers.end(), [&](std::size_t u) { return u >= w; }))
        continue;
    }
    Kept k;
    k.master = cn.tensor;
    k.copy = empty(cn.tensor.shape(), to);
    k.rewritten = assigns[c] > 0;
    xs.kept = static_cast<int>(kept_.size());
    if (k.rewritten) steps_[w].kept = xs.kept;
    kept_.push_back(std::move(k));
  }
}

std::size_t Executable::kept_casts() const { return kept_.size(); }

void Executable::refresh_kept_casts() const {
  if (kept_.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (Kept& k : kept_) {
    const std::uint64_t w = k.master.storage()->write_count();
    if (k.made && w == k.synced) continue;
    kernels::cast(k.master, k.copy);
    k.synced = w;
    k.made = true;
  }
}

Executable::~Executable() = default;

std::unique_ptr<Executable::Frame> Executable::take_frame() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_frames_.empty()) {
      auto f = std::move(free_frames_.back());
      free_frames_.pop_back();
      return f;
    }
  }
  auto f = std::make_unique<Frame>();
  f->vals.resize(graph_.values.size());
  for (const ir::Node& n : graph_.nodes)
    if (n.kind == ir::NodeKind::Capture || n.kind == ir::NodeKind::Const)
      f->vals[n.outputs[0]] = n.tensor;
  for (const auto& [v, view] : bound_views_) f->vals[v] = view;
  f->views.resize(steps_.size());
  f->args.resize(steps_.size());
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    if (s.kind != Step::Kind::Op) continue;
    f->args[i].resize(s.in.size());
    for (std::size_t k = 0; k < s.in.size(); ++k)
      if (step_bit(s.fixed_in, k)) f->args[i][k] = f->vals[s.in[k]];
  }
  return f;
}

void Executable::give_frame(std::unique_ptr<Frame> f) const {
  std::lock_guard<std::mutex> lock(mu_);
  free_frames_.push_back(std::move(f));
}

std::int64_t Executable::arena_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arena_bytes_;
}

std::int64_t Executable::planned_allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return planned_;
}

namespace {

void check_inputs(const ir::Graph& g, std::span<const ir::ValueId> input_values,
                  std::span<const Tensor> inputs) {
  MS_CHECK(inputs.size() == input_values.size(), ValueError, "jit: the graph takes ",
           input_values.size(), " tensor inputs, got ", inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ops::TensorType& t = g.value(input_values[i]).type;
    MS_CHECK(inputs[i].defined() && !inputs[i].is_symbolic(), ValueError, "jit: input ", i,
             " is not a concrete tensor");
    MS_CHECK(inputs[i].dtype() == t.dtype && inputs[i].shape() == t.shape, ShapeError,
             "jit: input ", i, " has type ", inputs[i].dtype(), inputs[i].shape(),
             " but the graph was compiled for ", t.dtype, t.shape);
  }
}

// The graph's outputs, taken before the first update (Assign steps come
// last). An output that shares memory with an input, capture or constant
// without being that tensor (a view, or a same-type cast that returned its
// input) is copied: the caller must not get an alias that later writes change.
std::vector<Tensor> take_outputs(const ir::Graph& g, std::span<const ir::ValueId> leaf_values,
                                 const Executable::Frame& f) {
  std::vector<Tensor> outs;
  outs.reserve(g.outputs.size());
  for (ir::ValueId v : g.outputs) {
    const Tensor& t = f.vals[v];
    const ir::NodeKind k = g.producer(v).kind;
    bool alias = k == ir::NodeKind::Const;  // the caller may write into it
    if (k != ir::NodeKind::Input && k != ir::NodeKind::Capture && !alias)
      for (ir::ValueId l : leaf_values) alias |= f.vals[l].storage() == t.storage();
    outs.push_back(alias ? t.clone() : t);
  }
  return outs;
}

// Step `i`'s views again, from its last run's record, when its inputs' layouts
// are the recorded ones; false (nothing done) otherwise.
bool replay_views(const Executable::Step& s, std::size_t i, Executable::Frame& f) {
  const ViewReplay& vr = f.views[i];
  if (!vr.matches(s.in, f.vals)) return false;
  for (std::size_t k = 0; k < s.out.size(); ++k) {
    const ViewReplay::Result& o = vr.out[k];
    const Tensor& x = f.vals[s.in[o.input]];
    f.vals[s.out[k]] =
        Tensor(x.storage(), o.layout.dtype, o.layout.shape, o.layout.strides, x.offset() + o.delta);
  }
  return true;
}

// Drops the arguments of op step `s` that are not fixed: a frame holds no
// input past its step.
void release_args(const Executable::Step& s, std::vector<Tensor>& args) {
  for (std::size_t k = 0; k < args.size(); ++k)
    if (!step_bit(s.fixed_in, k)) args[k] = Tensor();
}

void run_step(const Executable::Step& s, std::size_t i, Executable::Frame& f,
              std::span<Executable::Kept> kept) {
  switch (s.kind) {
    case Executable::Step::Kind::Fused: {
      f.ptrs.clear();
      for (ir::ValueId v : s.in) f.ptrs.push_back(&f.vals[v]);
      if (s.in_place.valid()) {
        const Tensor& dst = f.vals[s.in_place];
        Storage& st = *dst.storage();
        st.note_write();
        if (s.kept >= 0) {
          Executable::Kept& k = kept[static_cast<std::size_t>(s.kept)];
          kernels::ew_run_also(s.region->program, f.ptrs, dst, k.copy);
          k.synced = st.write_count();
        } else {
          kernels::ew_run(s.region->program, f.ptrs, dst);
        }
        f.vals[s.out[0]] = dst;
      } else {
        f.vals[s.out[0]] = kernels::ew_eval(s.region->program, f.ptrs);
      }
      break;
    }
    case Executable::Step::Kind::Op: {
      if (s.kept >= 0 && !s.in_place.valid()) {  // a cast of a capture: its kept copy
        f.vals[s.out[0]] = kept[static_cast<std::size_t>(s.kept)].copy;
        break;
      }
      if (s.replay_views && replay_views(s, i, f)) break;
      std::vector<Tensor>& args = f.args[i];
      for (std::size_t k = 0; k < s.in.size(); ++k) {
        if (step_bit(s.fixed_in, k)) continue;
        Tensor& x = f.vals[s.in[k]];
        if (step_bit(s.take_in, k))
          args[k] = std::move(x);
        else
          args[k] = x;
      }
      if (s.in_place.valid()) {  // the op's update form writes output k into input k
        Executable::Kept* copy = s.kept >= 0 ? &kept[static_cast<std::size_t>(s.kept)] : nullptr;
        if (copy != nullptr) args.push_back(copy->copy);  // see bf16_copy_input
        s.update(args);
        if (copy != nullptr) args.pop_back();
        release_args(s, args);
        for (std::size_t k = 0; k < s.out.size(); ++k) {
          f.vals[s.in[k]].storage()->note_write();  // other graphs' kept casts of it are stale
          f.vals[s.out[k]] = f.vals[s.in[k]];
        }
        if (copy != nullptr) copy->synced = copy->master.storage()->write_count();
        break;
      }
      if (s.run) {
        for (const Executable::Step::Out& o : s.outs)
          f.results.emplace_back(Storage::allocate(o.nbytes, s.def->name.data()), o.dtype, o.shape,
                                 o.strides, 0);
        s.run(args, f.results);
        release_args(s, args);
        for (std::size_t k = 0; k < s.out.size(); ++k) f.vals[s.out[k]] = std::move(f.results[k]);
        f.results.clear();
        break;
      }
      std::vector<Tensor> r = s.eval(args);
      if (s.replay_views && f.views[i].state != ViewReplay::State::Never)
        f.views[i].record(args, r);
      release_args(s, args);
      for (std::size_t k = 0; k < s.out.size(); ++k) f.vals[s.out[k]] = std::move(r[k]);
      break;
    }
    case Executable::Step::Kind::Assign:
      if (s.skip) break;
      f.vals[s.in[0]].copy_(f.vals[s.in[1]]);
      break;
  }
}

// Writes the step's inputs and outputs as files (ms::set_dump), those the
// dump configuration selects for this run (`call`, the iteration).
void dump_step(const Executable::Step& s, const Executable::Frame& f, std::int64_t call) {
  const compiler::detail::DumpSelection sel = compiler::detail::dump_selection(call);
  const std::string stem = ::ms::detail::str_cat(s.dump, '.', call);
  for (std::size_t k = 0; sel.inputs && k < s.in.size(); ++k)
    compiler::detail::dump_tensor(f.vals[s.in[k]], ::ms::detail::str_cat(stem, ".input.", k));
  for (std::size_t k = 0; sel.outputs && k < s.out.size(); ++k)
    compiler::detail::dump_tensor(f.vals[s.out[k]], ::ms::detail::str_cat(stem, ".output.", k));
}

// Drops the frame's tensors except captures and constants (`all`), or only
// its inputs and outputs (after a run: the other values were released by
// their steps), so that a frame keeps nothing alive.
void clear_frame(const ir::Graph& g, std::span<const ir::ValueId> input_values,
                 std::span<const Executable::Step> steps, Executable::Frame& f, bool all) {
  if (all) {  // after a step raised: also what it was given and made
    for (std::size_t i = 0; i < g.values.size(); ++i)
      if (!capture_or_const(g, ir::ValueId{i})) f.vals[ir::ValueId{i}] = Tensor();
    for (std::size_t i = 0; i < steps.size(); ++i)
      if (steps[i].kind == Executable::Step::Kind::Op) release_args(steps[i], f.args[i]);
    f.results.clear();
    return;
  }
  for (ir::ValueId v : input_values) f.vals[v] = Tensor();
  for (ir::ValueId v : g.outputs)
    if (!capture_or_const(g, v)) f.vals[v] = Tensor();
}

}  // namespace

std::vector<Tensor> Executable::run(std::span<const Tensor> inputs) const {
  check_inputs(graph_, input_values_, inputs);
  const std::int64_t call = calls_.fetch_add(1, std::memory_order_relaxed);
  std::unique_ptr<Frame> f = take_frame();
  refresh_kept_casts();
  std::vector<Tensor> outs;
  {
    f->source->begin_run();
    SourceScope scope(f->source);
    for (std::size_t i = 0; i < inputs.size(); ++i) f->vals[input_values_[i]] = inputs[i];
    bool taken = false;
    try {
      for (std::size_t i = 0; i < steps_.size(); ++i) {
        const Step& s = steps_[i];
        if (s.kind == Step::Kind::Assign && !taken) {
          outs = take_outputs(graph_, leaf_values_, *f);
          taken = true;
        }
        run_step(s, i, *f, kept_);
        if (!s.dump.empty()) dump_step(s, *f, call);
        for (ir::ValueId v : s.release) f->vals[v] = Tensor();
      }
      if (!taken) outs = take_outputs(graph_, leaf_values_, *f);
    } catch (...) {
      clear_frame(graph_, input_values_, steps_, *f, true);
      throw;
    }
    clear_frame(graph_, input_values_, steps_, *f, false);
  }
  if (f->source->recording()) {
    const std::int64_t bytes = f->source->plan();
    std::lock_guard<std::mutex> lock(mu_);
    arena_bytes_ = bytes;
    planned_ = f->source->planned();
  }
  give_frame(std::move(f));
  return outs;
}

}  // namespace ms::compiler
