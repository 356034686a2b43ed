// ms/jit/script.hpp — front-end graphs, graph split, and jit_begin / jit_end.
//
// Stage: jit. MindSpore's internal entry points `_frontend_compile`,
// `_graph_split` and `jit_begin` / `jit_end`, in namespace ms::advanced: they
// expose the jit's own machinery (unoptimized graphs, fragments, a trace held
// open across statements). A model needs none of them; ms::jit covers its uses.
//
//   namespace adv = ms::advanced;
//   adv::ScriptGraph sg = adv::frontend_compile(fn)(x, y);   // traced, not optimized
//   sg.print();
//   auto frags = adv::graph_split(sg);   // split around ops flagged {"split_op", true}
//   auto out = adv::run_fragments(sg, frags, {x, y});        // == running the whole graph
//
//   adv::jit_begin("snippet", x, y);     // eager code between the two marks is
//   ms::Tensor z = x * y + 1.f;          // recorded, compiled once per signature,
//   z = adv::jit_end(z);                 // and run compiled at jit_end
//
// An op is flagged as a split point with attributes on its call, like
// MindSpore's `add_prim_attr`:
//   ms::ops::call1(ms::ops::op("add"), {a, b}, {{"split_op", true}, {"func_id", "add_func"}});
// The same machinery places host callbacks (hooks) inside compiled graphs.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "ms/jit/compile.hpp"
#include "ms/jit/jit.hpp"
#include "ms/jit/trace.hpp"

namespace ms::advanced {

/// A graph made by the front end: traced, dead code removed, not optimized.
class ScriptGraph {
 public:
  /// Wraps the traced graph `g` made by the call with key `phase`.
  ScriptGraph(ir::Graph g, std::string phase) : graph_(std::move(g)), phase_(std::move(phase)) {}
  /// The graph.
  const ir::Graph& graph() const { return graph_; }
  /// The readable key of the call that made it.
  const std::string& phase() const { return phase_; }
  /// The graph as ir::to_string prints it.
  std::string to_string() const { return ir::to_string(graph_); }
  /// Prints the graph (to std::cout unless another stream is given).
  void print() const;
  /// Prints the graph to `os`.
  void print(std::ostream& os) const;

 private:
  ir::Graph graph_;
  std::string phase_;
};

/// One piece of a split graph: a compiled segment (`is_graph()`), or a single
/// split op run on the host. Fragments read and write values of the script
/// graph, named by their ids in it.
class GraphFragment {
 public:
  /// A fragment made by graph_split: `id` in split order, `g` its graph (compiled here).
  GraphFragment(int id, bool is_graph, std::string py_key, std::vector<ir::ValueId> args,
                std::vector<ir::ValueId> outputs, ir::Graph g);
  /// The fragment's position in the split order.
  int id() const { return id_; }
  /// True for a compiled segment, false for a single split op run on the host.
  bool is_graph() const { return is_graph_; }
  /// The split op's `func_id` attribute (empty for graph fragments).
  const std::string& py_key() const { return py_key_; }
  /// Script-graph values the fragment reads, in argument order.
  const std::vector<ir::ValueId>& args_list() const { return args_; }
  /// Script-graph values the fragment produces, in result order.
  const std::vector<ir::ValueId>& outputs() const { return outputs_; }
  /// The fragment's graph.
  const ir::Graph& graph() const { return exe_->graph(); }
  /// Runs the fragment on tensors for args_list(); returns tensors for outputs().
  std::vector<Tensor> operator()(std::span<const Tensor> args) const;
  /// A one-line description: id, kind, py_key, args and outputs.
  std::string to_string() const;

 private:
  int id_;
  bool is_graph_;
  std::string py_key_;
  std::vector<ir::ValueId> args_, outputs_;
  std::shared_ptr<compiler::Executable> exe_;
};

/// Splits `sg` before and after every op flagged `split_op`.
std::vector<GraphFragment> graph_split(const ScriptGraph& sg);

/// Runs `frags` in order on the script graph's flat tensor inputs; returns its outputs.
std::vector<Tensor> run_fragments(const ScriptGraph& sg, const std::vector<GraphFragment>& frags,
                                  std::span<const Tensor> inputs);

}  // namespace ms::advanced

namespace ms::compiler::detail {
/// The ScriptGraph of a traced call (dead code removed, verified).
advanced::ScriptGraph make_script_graph(ir::Graph g, std::string phase);
}  // namespace ms::compiler::detail

namespace ms::advanced {

/// `frontend_compile(fn)(args...)` traces fn for these arguments into a ScriptGraph.
template <class F>
auto frontend_compile(F fn) {
  return [fn = std::move(fn)](const auto&... args) {
    auto materialized = std::make_tuple(compiler::detail::materialize(args)...);
    return std::apply(
        [&](const auto&... a) {
          using namespace compiler::detail;
          KeyBuilder p(true);
          (ArgTraits<std::remove_cvref_t<decltype(a)>>::key(a, p), ...);
          p.finish();
          compiler::TraceContext tc;
          std::tuple<typename ArgTraits<std::remove_cvref_t<decltype(a)>>::traced...> targs{
              ArgTraits<std::remove_cvref_t<decltype(a)>>::trace(a, tc)...};
          std::vector<Tensor> flat;
          std::vector<std::size_t> st;
          {
            auto r = std::apply(fn, targs);
            OutTraits<std::remove_cvref_t<decltype(r)>>::flatten(r, flat, st);
          }
          return make_script_graph(tc.finish(flat), std::move(p.phase()));
        },
        materialized);
  };
}

/// Starts recording a snippet of eager code named `name` whose inputs are `args`.
void jit_begin(const std::string& name, std::vector<Tensor> args);
/// As jit_begin(name, args) with the tensors given one by one.
template <class... T>
requires(std::same_as<std::remove_cvref_t<T>, Tensor>&&...) void jit_begin(const std::string& name,
                                                                           const T&... args) {
  jit_begin(name, std::vector<Tensor>{args...});
}
/// Ends the snippet: compiles it (once per name and input signature), runs it
/// on the inputs given to jit_begin, and returns the concrete values of `outputs`.
std::vector<Tensor> jit_end(const std::vector<Tensor>& outputs);
/// As jit_end(outputs) for a single output.
inline Tensor jit_end(const Tensor& output) { return jit_end(std::vector<Tensor>{output})[0]; }
/// Compiles done by jit_end for snippet `name` so far.
int jit_snippet_compile_count(const std::string& name);

}  // namespace ms::advanced
