#include "ms/jit/script.hpp"

#include "ms/jit/detail/cache.hpp"

#include <algorithm>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace ms::compiler::detail {
advanced::ScriptGraph make_script_graph(ir::Graph g, std::string phase) {
  eliminate_dead_code(g);
  ir::verify(g, "frontend_compile");
  return advanced::ScriptGraph(std::move(g), std::move(phase));
}
}  // namespace ms::compiler::detail

namespace ms::advanced {

void ScriptGraph::print() const { print(std::cout); }
void ScriptGraph::print(std::ostream& os) const { os << to_string() << std::flush; }

// ---------------------------------------------------------------- graph split

GraphFragment::GraphFragment(int id, bool is_graph, std::string py_key,
                             std::vector<ir::ValueId> args, std::vector<ir::ValueId> outputs,
                             ir::Graph g)
    : id_(id),
      is_graph_(is_graph),
      py_key_(std::move(py_key)),
      args_(std::move(args)),
      outputs_(std::move(outputs)) {
  compiler::optimize(g, {.jit_level = is_graph ? JitLevel::O1 : JitLevel::O0, .verify = true});
  exe_ = std::make_shared<compiler::Executable>(std::move(g));
}

std::vector<Tensor> GraphFragment::operator()(std::span<const Tensor> args) const {
  MS_CHECK(args.size() == args_.size(), ValueError, "GraphFragment ", id_, ": takes ", args_.size(),
           " arguments, got ", args.size());
  return exe_->run(args);
}

std::string GraphFragment::to_string() const {
  std::ostringstream os;
  os << "GraphFragment(id=" << id_ << ", is_graph=" << (is_graph_ ? "true" : "false");
  if (!py_key_.empty()) os << ", py_key=" << py_key_;
  os << ", args=[";
  for (std::size_t i = 0; i < args_.size(); ++i) os << (i ? ", " : "") << args_[i];
  os << "], outputs=[";
  for (std::size_t i = 0; i < outputs_.size(); ++i) os << (i ? ", " : "") << outputs_[i];
  os << "])\n" << ir::to_string(exe_->graph());
  return os.str();
}

namespace {

bool is_leaf(ir::NodeKind k) {
  return k == ir::NodeKind::Input || k == ir::NodeKind::Capture || k == ir::NodeKind::Const ||
         k == ir::NodeKind::Scalar;
}

bool is_split(const ir::Node& n) {
  return n.kind == ir::NodeKind::Op && n.attrs.has("split_op") &&
         n.attrs.get<bool>("split_op", n.def->name);
}

// The subgraph of `nodes` (ids of g) reading `args` as its inputs and returning `outs`;
// captures, constants and scalars it reads are copied in.
ir::Graph extract(const ir::Graph& g, const std::vector<ir::NodeId>& nodes,
                  const std::vector<ir::ValueId>& args, const std::vector<ir::ValueId>& outs) {
  ir::Graph f;
  std::unordered_map<ir::ValueId, ir::ValueId> map;  // value of g -> value of f
  for (std::size_t k = 0; k < args.size(); ++k) {
    ir::Node in;
    in.kind = ir::NodeKind::Input;
    in.arg_index = static_cast<int>(k);
    in.name = "arg" + std::to_string(k);
    map[args[k]] = f.value_of(f.add(std::move(in), {g.value(args[k]).type}));
  }
  auto value = [&](ir::ValueId v) {
    if (auto it = map.find(v); it != map.end()) return it->second;
    const ir::Node& p = g.producer(v);
    MS_ASSERT(is_leaf(p.kind) && p.kind != ir::NodeKind::Input);
    ir::Node copy = p;
    copy.inputs.clear();
    const ir::ValueId nv = f.value_of(f.add(std::move(copy), {g.value(v).type}, g.value(v).weak));
    map[v] = nv;
    return nv;
  };
  for (ir::NodeId id : nodes) {
    ir::Node n = g.node(id);
    for (ir::ValueId& v : n.inputs) v = value(v);
    std::vector<ops::TensorType> types;
    for (ir::ValueId v : n.outputs) types.push_back(g.value(v).type);
    const std::vector<ir::ValueId> old = n.outputs;
    const ir::NodeId nid = f.add(std::move(n), types);
    for (std::size_t k = 0; k < old.size(); ++k) map[old[k]] = f.node(nid).outputs[k];
  }
  for (ir::ValueId v : outs) f.outputs.push_back(value(v));
  return f;
}

}  // namespace

std::vector<GraphFragment> graph_split(const ScriptGraph& sg) {
  const ir::Graph& g = sg.graph();
  // Segments of consecutive non-split nodes, and each split node alone.
  std::vector<std::pair<std::vector<ir::NodeId>, bool>> segs;
  std::vector<ir::NodeId> cur;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (is_leaf(n.kind)) continue;
    if (is_split(n)) {
      if (!cur.empty()) segs.emplace_back(std::move(cur), true);
      cur.clear();
      segs.emplace_back(std::vector<ir::NodeId>{ir::NodeId{i}}, false);
    } else {
      cur.push_back(ir::NodeId{i});
    }
  }
  if (!cur.empty()) segs.emplace_back(std::move(cur), true);

  // seg_of[node]: the segment holding the node (leaves: none).
  constexpr std::size_t kNoSeg = std::numeric_limits<std::size_t>::max();
  ir::IdTable<ir::NodeId, std::size_t> seg_of(g.nodes.size(), kNoSeg);
  for (std::size_t s = 0; s < segs.size(); ++s)
    for (ir::NodeId id : segs[s].first) seg_of[id] = s;
  ir::IdTable<ir::ValueId, bool> is_out(g.values.size(), false);
  for (ir::ValueId v : g.outputs) is_out[v] = true;

  std::vector<GraphFragment> frags;
  for (std::size_t s = 0; s < segs.size(); ++s) {
    std::vector<ir::ValueId> args, outs;
    auto add_unique = [](std::vector<ir::ValueId>& xs, ir::ValueId v) {
      if (std::find(xs.begin(), xs.end(), v) == xs.end()) xs.push_back(v);
    };
    for (ir::NodeId id : segs[s].first)
      for (ir::ValueId v : g.node(id).inputs) {
        const ir::Node& p = g.producer(v);
        if (p.kind == ir::NodeKind::Input || (!is_leaf(p.kind) && seg_of[g.value(v).node] != s))
          add_unique(args, v);
      }
    for (ir::NodeId id : segs[s].first)
      for (ir::ValueId v : g.node(id).outputs) {
        bool needed = is_out[v];
        for (std::size_t i = 0; i < g.nodes.size() && !needed; ++i) {
          const std::size_t later = seg_of[ir::NodeId{i}];
          if (later != kNoSeg && later > s)
            for (ir::ValueId u : g.nodes[i].inputs) needed |= u == v;
        }
        if (needed) outs.push_back(v);
      }
    const bool graph = segs[s].second;
    std::string key;
    if (!graph) {
      const ir::Node& n = g.node(segs[s].first[0]);
      key = n.attrs.get_or<std::string>("func_id", std::string(n.def->name), n.def->name);
    }
    frags.emplace_back(static_cast<int>(s), graph, std::move(key), args, outs,
                       extract(g, segs[s].first, args, outs));
  }
  return frags;
}

std::vector<Tensor> run_fragments(const ScriptGraph& sg, const std::vector<GraphFragment>& frags,
                                  std::span<const Tensor> inputs) {
  const ir::Graph& g = sg.graph();
  std::unordered_map<ir::ValueId, Tensor> env;
  for (const ir::Node& n : g.nodes) {
    if (n.kind == ir::NodeKind::Input) {
      MS_CHECK(static_cast<std::size_t>(n.arg_index) < inputs.size(), ValueError,
               "run_fragments: the graph takes more than ", inputs.size(), " inputs");
      env[n.outputs[0]] = inputs[static_cast<std::size_t>(n.arg_index)];
    } else if (n.kind == ir::NodeKind::Capture || n.kind == ir::NodeKind::Const) {
      env[n.outputs[0]] = n.tensor;
    }
  }
  for (const GraphFragment& f : frags) {
    std::vector<Tensor> args;
    for (ir::ValueId v : f.args_list()) {
      auto it = env.find(v);
      MS_CHECK(it != env.end(), ValueError, "run_fragments: fragment ", f.id(), " reads value ", v,
               " that no earlier fragment produced");
      args.push_back(it->second);
    }
    std::vector<Tensor> out = f(args);
    for (std::size_t k = 0; k < out.size(); ++k) env[f.outputs()[k]] = std::move(out[k]);
  }
  std::vector<Tensor> res;
  for (ir::ValueId v : g.outputs) res.push_back(env.at(v));
  return res;
}

// ---------------------------------------------------------------- jit_begin / jit_end

namespace {

struct Snippet {
  std::string name;
  std::vector<Tensor> args;
  std::unique_ptr<compiler::TraceContext> tc;
};
thread_local std::unique_ptr<Snippet> t_snippet;

std::mutex g_snippets_mu;
std::map<std::string, std::unique_ptr<compiler::detail::FunctionCache>>& snippet_caches() {
  static std::map<std::string, std::unique_ptr<compiler::detail::FunctionCache>> m;
  return m;
}

compiler::detail::FunctionCache& snippet_cache(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_snippets_mu);
  auto& c = snippet_caches()[name];
  if (!c) c = std::make_unique<compiler::detail::FunctionCache>(JitConfig{});
  return *c;
}

}  // namespace

void jit_begin(const std::string& name, std::vector<Tensor> args) {
  if (t_snippet) {
    const std::string open = t_snippet->name;
    t_snippet.reset();  // discard it, so that the thread is usable again
    ::ms::detail::raise<ValueError>("jit_begin: snippet '", open,
                                    "' is still open (discarded); call jit_end before jit_begin('",
                                    name, "')");
  }
  MS_CHECK(ops::active_tracer() == nullptr, ValueError, "jit_begin('", name,
           "'): called while ms::jit traces another function");
  auto s = std::make_unique<Snippet>();
  s->name = name;
  s->args = std::move(args);
  s->tc = std::make_unique<compiler::TraceContext>();
  for (std::size_t i = 0; i < s->args.size(); ++i) s->tc->bind_input(s->args[i]);
  t_snippet = std::move(s);
}

std::vector<Tensor> jit_end(const std::vector<Tensor>& outputs) {
  MS_CHECK(t_snippet != nullptr, ValueError, "jit_end: no snippet is open (call jit_begin first)");
  std::unique_ptr<Snippet> s = std::move(t_snippet);
  ir::Graph g = s->tc->finish(outputs);
  s->tc.reset();
  compiler::detail::KeyBuilder k(false);
  for (const Tensor& t : s->args) k.tensor(t);
  k.finish();
  auto phase = [&] {
    compiler::detail::KeyBuilder p(true);
    for (const Tensor& t : s->args) p.tensor(t);
    p.finish();
    return s->name + p.phase();
  };
  // The snippet is already traced: its one graph is handed over (jit_begin /
  // jit_end sections have no dynamic shapes; a new shape is a new key).
  auto trace = [&](compiler::detail::TraceInputs& in) {
    in.result() = compiler::detail::Traced{std::move(g), {}};
  };
  auto signature = [](compiler::detail::Signature&) {};
  const compiler::detail::CallInfo info{phase, signature, trace, nullptr, {}};
  const auto c = snippet_cache(s->name).get(k.key(), s->args, info);
  return compiler::detail::run_compiled(*c, s->args);
}

int jit_snippet_compile_count(const std::string& name) {
  return snippet_cache(name).compile_count();
}

}  // namespace ms::advanced
