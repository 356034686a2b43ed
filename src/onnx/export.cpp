// ms::onnx::export_model (ms/onnx/export.hpp): trace, passes, symbolic dims,
// mapping through the rules of op_rules.cpp, checking, atomic write.
#include "ms/onnx/export.hpp"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <set>

#include "emit.hpp"
#include "external_data.hpp"
#include "ms/core/error.hpp"
#include "ms/io/file.hpp"
#include "ms/jit/compile.hpp"
#include "ms/jit/trace.hpp"

namespace ms::onnx {
namespace {

using detail::Emitter;
using detail::ExportRequest;
using I64s = std::vector<std::int64_t>;
constexpr std::string_view kApi = "ms::onnx::export_model";

/// One symbolic dim: its dim_param name, its size in the example and when probed.
struct Sym {
  std::string name;
  std::int64_t base = 0;
  std::int64_t probe = 0;
};

/// The graph's inputs and outputs: names and symbolic dims.
struct Signature {
  std::vector<std::string> in_names, out_names;
  std::vector<Sym> syms;
  std::vector<std::vector<int>> in_sym;  ///< per input, per axis: symbol index or -1
};

void check_options(const ExportOptions& o, std::size_t inputs) {
  MS_CHECK(o.opset_version >= kMinOpset && o.opset_version <= kMaxOpset, ValueError, kApi,
           ": opset_version must be between ", kMinOpset, " and ", kMaxOpset, ", got ",
           o.opset_version);
  MS_CHECK(o.input_names.size() <= inputs, ValueError, kApi, ": input_names has ",
           o.input_names.size(), " names for ", inputs, " inputs");
  std::set<std::string> seen;
  for (const auto* names : {&o.input_names, &o.output_names})
    for (const std::string& n : *names) {
      MS_CHECK(!n.empty(), ValueError, kApi, ": input and output names must not be empty");
      MS_CHECK(seen.insert(n).second, ValueError, kApi, ": the name '", n,
               "' is given twice in input_names / output_names");
    }
}

std::string name_at(const std::vector<std::string>& given, std::size_t i, std::string_view stem) {
  return i < given.size() ? given[i] : std::string(stem) + "_" + std::to_string(i);
}

/// The symbol named `name` (new when absent) for a dim of size `size`.
int symbol(Signature& s, const std::string& name, std::int64_t size) {
  for (std::size_t i = 0; i < s.syms.size(); ++i)
    if (s.syms[i].name == name) {
      MS_CHECK(s.syms[i].base == size, ValueError, kApi, ": the dims named '", name,
               "' have different sizes in the example arguments (", s.syms[i].base, " and ", size,
               ")");
      return static_cast<int>(i);
    }
  s.syms.push_back({name, size, 0});
  return static_cast<int>(s.syms.size() - 1);
}

/// Symbolic dims of the inputs from the specs, then dynamic_axes.
void input_symbols(const ExportRequest& req, const ExportOptions& o, Signature& s) {
  const std::vector<TensorSpec>* specs = req.specs;
  std::string api = req.spec_api;
  if (specs == nullptr && !o.input_signature.empty()) {
    specs = &o.input_signature;
    api = "input_signature";
  }
  const std::size_t n = req.examples.size();
  MS_CHECK(specs == nullptr || specs->size() == n, ValueError, kApi, ": ", api, " has ",
           specs ? specs->size() : 0, " specs for ", n, " example arguments");
  for (std::size_t i = 0; i < n; ++i) {
    const Shape& shape = req.examples[i].shape();
    s.in_sym.emplace_back(static_cast<std::size_t>(shape.rank()), -1);
    if (specs == nullptr) continue;
    const TensorSpec& spec = (*specs)[i];
    MS_CHECK(!spec.any_rank, ValueError, kApi, ": ", api, " spec ", i,
             " has any rank (-2); ONNX inputs have a fixed rank");
    MS_CHECK(spec.dtype == req.examples[i].dtype() && spec.shape.size() == shape.size(), ShapeError,
             kApi, ": example argument ", i, " (", dtype_name(req.examples[i].dtype()), shape,
             ") does not fit ", api, " spec ", spec.to_string());
    for (std::size_t a = 0; a < shape.size(); ++a) {
      const Dim& d = spec.shape[a];
      MS_CHECK(!d.is_static() || d.size() == shape[a], ShapeError, kApi, ": example argument ", i,
               " has size ", shape[a], " at axis ", a, " where ", api, " spec ", spec.to_string(),
               " requires ", d.size());
      if (!d.is_static())
        s.in_sym[i][a] = symbol(
            s, d.is_named() ? d.name() : s.in_names[i] + "_dim" + std::to_string(a), shape[a]);
    }
  }
}

/// dynamic_axes of the inputs: name (or make) symbolic dims; other keys must name an input or
/// output.
void dynamic_axes_of_inputs(const ExportRequest& req, const ExportOptions& o, Signature& s) {
  for (const auto& [name, axes] : o.dynamic_axes) {
    auto it = std::find(s.in_names.begin(), s.in_names.end(), name);
    if (it == s.in_names.end()) continue;  // an output: checked once the outputs are known
    const auto i = static_cast<std::size_t>(it - s.in_names.begin());
    const Shape& shape = req.examples[i].shape();
    for (const auto& [axis, dim] : axes) {
      MS_CHECK(axis >= 0 && axis < shape.rank(), ValueError, kApi, ": dynamic_axes['", name,
               "'] names axis ", axis, " of an input of rank ", shape.rank());
      MS_CHECK(!dim.empty(), ValueError, kApi, ": dynamic_axes['", name, "'][", axis,
               "] is an empty name");
      int& slot = s.in_sym[i][static_cast<std::size_t>(axis)];
      if (slot >= 0 && s.syms[static_cast<std::size_t>(slot)].name != dim) {
        // Renames the symbol: every dim that shares it (same spec name) gets the new name.
        s.syms[static_cast<std::size_t>(slot)].name = dim;
      } else if (slot < 0) {
        slot = symbol(s, dim, shape[static_cast<std::size_t>(axis)]);
      }
    }
  }
}

/// The traced graph at input shapes `shapes`, after the passes that keep ops whole.
ir::Graph trace_at(const ExportRequest& req, const std::vector<Shape>& shapes) {
  compiler::TraceContext tc;
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    in.push_back(tc.add_input(req.examples[i].dtype(), shapes[i]));
  const std::vector<Tensor> out = req.trace(in);
  ir::Graph g = tc.finish(out);
  compiler::eliminate_dead_code(g);
  compiler::eliminate_common_subexpressions(g);
  compiler::fold_constants(g);
  compiler::simplify(g);
  compiler::fold_transposed_matmuls(g);
  compiler::eliminate_dead_code(g);
  compiler::order_nodes(g, ExecOrder::Bfs);
  ir::verify(g, kApi);
  return g;
}

std::vector<Shape> shapes_at(const ExportRequest& req, const Signature& s, bool probe) {
  std::vector<Shape> shapes;
  for (std::size_t i = 0; i < req.examples.size(); ++i) {
    std::vector<std::int64_t> d = req.examples[i].shape().to_vector();
    for (std::size_t a = 0; a < d.size(); ++a)
      if (const int k = s.in_sym[i][a]; k >= 0 && probe)
        d[a] = s.syms[static_cast<std::size_t>(k)].probe;
    shapes.emplace_back(std::move(d));
  }
  return shapes;
}

[[noreturn]] void not_size_free(const ir::Node& n, std::string_view what) {
  ::ms::detail::raise<ValueError>(kApi, ": ", n.def ? "op '" : "a node '",
                                  n.def ? n.def->name : node_kind_name(n.kind), "' has ", what,
                                  " that depends on a symbolic dim; ONNX cannot express it "
                                  "(export with a static size for that dim)");
}

bool same_contents(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), static_cast<std::size_t>(ca.nbytes())) == 0;
}

const Shape& shape_of(const ir::Graph& g, ir::ValueId v) { return g.value(v).type.shape; }

/// The symbol of sizes `base` (traced) and `probe`, or -1.
int symbol_of(const std::vector<Sym>& syms, std::int64_t base, std::int64_t probe) {
  for (std::size_t k = 0; k < syms.size(); ++k)
    if (syms[k].base == base && syms[k].probe == probe) return static_cast<int>(k);
  return -1;
}

/// A reshape's (Expand's) target over the symbolic dims: dims that moved become
/// 0 (copy the input's; 1 for Expand), else -1 when only one moved that way,
/// else -2 - k for symbolic dim k (read at run time, Emitter::target) and
/// -1 for at most one other; ValueError when that cannot express it.
I64s size_free_target(const ir::Graph& gb, const ir::Graph& gp, const ir::Node& nb,
                      const ir::Node& np, bool expand, const std::vector<Sym>& syms) {
  const Shape& ib = shape_of(gb, nb.inputs[0]);
  const Shape& ip = shape_of(gp, np.inputs[0]);
  const Shape& ob = shape_of(gb, nb.outputs[0]);
  const Shape& op = shape_of(gp, np.outputs[0]);
  I64s t = ob.to_vector();
  std::vector<std::size_t> other;
  const std::int64_t shift = ob.rank() - ib.rank();
  for (std::size_t a = 0; a < t.size(); ++a) {
    if (ob[a] == op[a]) continue;
    const std::int64_t j =
        expand ? static_cast<std::int64_t>(a) - shift : static_cast<std::int64_t>(a);
    const bool copies = j >= 0 && j < ib.rank() && ib[static_cast<std::size_t>(j)] == ob[a] &&
                        ip[static_cast<std::size_t>(j)] == op[a];
    if (copies)
      t[a] = expand ? 1 : 0;
    else
      other.push_back(a);
  }
  if (!expand && other.size() == 1) {
    t[other[0]] = -1;
    return t;
  }
  int inferred = 0;
  for (std::size_t a : other) {
    if (const int k = symbol_of(syms, ob[a], op[a]); k >= 0)
      t[a] = -2 - k;
    else if (!expand && inferred++ == 0)
      t[a] = -1;
    else
      not_size_free(nb, "a target shape");
  }
  return t;
}

/// Whether `t` is [0, 1, .., n-1] (1-D, an integer dtype).
bool is_iota(const Tensor& t) {
  if (t.shape().rank() != 1 || !dtype_is_int(t.dtype())) return false;
  const auto v = t.to(DType::Int64).contiguous().to_vector<std::int64_t>();
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<std::int64_t>(i)) return false;
  return true;
}

/// The symbol whose sizes are the lengths of constants `b` (traced) and `p`
/// (probed) when both are [0, .., n-1] (`arange(0, T)` of a symbolic T); -1 otherwise.
int iota_symbol(const Signature& s, const Tensor& b, const Tensor& p) {
  if (!is_iota(b) || !is_iota(p)) return -1;
  return symbol_of(s.syms, b.shape()[0], p.shape()[0]);
}

/// scaled_dot_product_attention without a scale uses 1 / sqrt(E): E must not
/// be symbolic; nor Tk when the example has none (its export is the no-key form).
void check_attention(const ir::Graph& gb, const ir::Graph& gp, const ir::Node& nb,
                     const ir::Node& np) {
  if (nb.def->name != "scaled_dot_product_attention") return;
  const Shape &qb = shape_of(gb, nb.inputs[0]), &qp = shape_of(gp, np.inputs[0]);
  if (!nb.attrs.has("scale") && qb[qb.size() - 1] != qp[qp.size() - 1])
    not_size_free(nb, "a scale 1 / sqrt(E)");
  const Shape &kb = shape_of(gb, nb.inputs[1]), &kp = shape_of(gp, np.inputs[1]);
  if (kb[kb.size() - 2] == 0 && kp[kp.size() - 2] != 0)
    not_size_free(nb, "no keys (Tk = 0) in the example");
}

/// Checks that the probe traced the same graph and finds the size-free
/// targets, and (in `iota`, per node) the constants [0, .., n-1] of a symbolic n.
std::vector<std::optional<I64s>> compare_traces(const ir::Graph& gb, const ir::Graph& gp, int opset,
                                                const Signature& s, std::vector<int>& iota) {
  MS_CHECK(gb.nodes.size() == gp.nodes.size(), ValueError, kApi,
           ": the function traces another graph when a symbolic dim changes (", gb.nodes.size(),
           " and ", gp.nodes.size(),
           " nodes); it branches on sizes, so those dims cannot be symbolic");
  std::vector<std::optional<I64s>> targets(gb.nodes.size());
  iota.assign(gb.nodes.size(), -1);
  for (std::size_t k = 0; k < gb.nodes.size(); ++k) {
    const ir::Node &nb = gb.nodes[k], &np = gp.nodes[k];
    MS_CHECK(nb.kind == np.kind && nb.def == np.def && nb.inputs == np.inputs, ValueError, kApi,
             ": the function traces another graph when a symbolic dim changes (node ", k,
             " differs); it branches on sizes, so those dims cannot be symbolic");
    if (nb.kind == ir::NodeKind::Scalar && nb.scalar.to_string() != np.scalar.to_string())
      not_size_free(nb, "a number (such as the 1/N of a mean written by hand)");
    if (nb.kind == ir::NodeKind::Const && !same_contents(nb.tensor, np.tensor)) {
      iota[k] = iota_symbol(s, nb.tensor, np.tensor);
      if (iota[k] < 0) not_size_free(nb, "a constant");
    }
    if (nb.kind != ir::NodeKind::Op) continue;
    const std::string_view op = nb.def->name;
    if (op == "reshape" || op == "broadcast_to") {
      targets[k] = size_free_target(gb, gp, nb, np, op == "broadcast_to", s.syms);
      continue;
    }
    if (!(nb.attrs == np.attrs)) not_size_free(nb, "attributes " + nb.attrs.to_string());
    check_attention(gb, gp, nb, np);
    const bool split = op == "split", flat = op == "flatten";
    const bool tri = opset < 14 && (op == "triu" || op == "tril");
    if (split) {  // the sizes along the split axis (the other dims may be symbolic)
      const std::int64_t rank = shape_of(gb, nb.inputs[0]).rank();
      std::int64_t axis = nb.attrs.get_or<std::int64_t>("axis", 0, op);
      if (axis < 0) axis += rank;
      for (std::size_t i = 0; i < nb.outputs.size(); ++i)
        if (shape_of(gb, nb.outputs[i])[static_cast<std::size_t>(axis)] !=
            shape_of(gp, np.outputs[i])[static_cast<std::size_t>(axis)])
          not_size_free(nb, "output sizes");
    }
    if (tri)
      for (std::size_t i = 0; i < nb.outputs.size(); ++i)
        if (shape_of(gb, nb.outputs[i]) != shape_of(gp, np.outputs[i]))
          not_size_free(nb, "a mask (Trilu needs opset 14)");
    if (flat && shape_of(gb, nb.inputs[0]).rank() > 0) {
      const Shape& ib = shape_of(gb, nb.inputs[0]);
      const std::int64_t end = nb.attrs.get_or<std::int64_t>("end", -1, op);
      for (std::int64_t a = (end < 0 ? end + ib.rank() : end) + 1; a < ib.rank(); ++a)
        if (ib[static_cast<std::size_t>(a)] !=
            shape_of(gp, np.inputs[0])[static_cast<std::size_t>(a)])
          not_size_free(nb, "trailing dims");
    }
  }
  return targets;
}

void set_type(::onnx::ValueInfoProto& vi, const std::string& name, const ops::TensorType& t,
              const std::vector<std::string>& dim_params) {
  vi.set_name(name);
  auto& tt = *vi.mutable_type()->mutable_tensor_type();
  tt.set_elem_type(detail::onnx_dtype(t.dtype, name));
  auto& shape = *tt.mutable_shape();
  for (std::size_t a = 0; a < t.shape.size(); ++a) {
    auto& d = *shape.add_dim();
    if (a < dim_params.size() && !dim_params[a].empty())
      d.set_dim_param(dim_params[a]);
    else
      d.set_dim_value(t.shape[a]);
  }
}

/// The argument index of graph input `name` (inputs come before parameters).
std::size_t arg_of(const Signature& s, const std::string& name) {
  return static_cast<std::size_t>(std::find(s.in_names.begin(), s.in_names.end(), name) -
                                  s.in_names.begin());
}

/// A constant [0, .., n-1] of dtype `t` whose n is symbolic dim `k`: Range(0, n, 1).
std::string emit_iota(Emitter& e, int k, DType t) {
  e.scope = "arange";
  const std::string r =
      e.add1("Range", {e.scalar(Scalar(std::int64_t{0}), DType::Int64), e.sym_dim(k, true),
                       e.scalar(Scalar(std::int64_t{1}), DType::Int64)});
  std::string out = e.cast(r, DType::Int64, t);
  e.scope.clear();
  return out;
}

/// Where each symbolic dim's size is read at run time: the first input axis with it.
std::vector<std::pair<std::string, std::int64_t>> sym_sources(const Signature& s) {
  std::vector<std::pair<std::string, std::int64_t>> out(s.syms.size());
  for (std::size_t i = s.in_sym.size(); i-- > 0;)
    for (std::size_t a = s.in_sym[i].size(); a-- > 0;)
      if (const int k = s.in_sym[i][a]; k >= 0)
        out[static_cast<std::size_t>(k)] = {s.in_names[i], static_cast<std::int64_t>(a)};
  return out;
}

/// The ONNX name of every leaf value; initializers and graph inputs; Range for
/// the constants [0, .., n-1] of a symbolic n (`iota`, per node; may be empty).
void emit_leaves(Emitter& e, const ExportRequest& req, const ExportOptions& o, const Signature& s,
                 const std::vector<int>& iota) {
  const ir::Graph& g = e.g;
  for (std::size_t k = 0; k < g.nodes.size(); ++k) {
    const ir::Node& n = g.nodes[k];
    const ir::ValueId v = n.outputs.empty() ? ir::kNoValue : n.outputs[0];
    if (!iota.empty() && iota[k] >= 0) {
      e.names[v.index()] = emit_iota(e, iota[k], n.tensor.dtype());
    } else if (n.kind == ir::NodeKind::Input) {
      // The graph inputs in argument order (the node order may differ).
      const auto i = static_cast<std::size_t>(n.arg_index);
      e.names[v.index()] = s.in_names[i];
      std::vector<std::string> params;
      for (int k : s.in_sym[i])
        params.push_back(k >= 0 ? s.syms[static_cast<std::size_t>(k)].name : "");
      auto* inputs = e.graph.mutable_input();
      int at = inputs->size();
      while (at > 0 && arg_of(s, inputs->Get(at - 1).name()) > i) --at;
      set_type(*inputs->Add(), s.in_names[i], g.value(v).type, params);
      for (int j = inputs->size() - 1; j > at; --j) inputs->SwapElements(j, j - 1);
    } else if (n.kind == ir::NodeKind::Capture || n.kind == ir::NodeKind::Const) {
      std::string name = n.kind == ir::NodeKind::Const ? e.fresh("const") : n.name;
      for (const auto& [pname, t] : req.named_tensors)
        if (n.kind == ir::NodeKind::Capture && t.is_same(n.tensor)) name = pname;
      e.names[v.index()] = name;
      const bool param = n.kind == ir::NodeKind::Capture;
      if (!param || o.export_params)
        detail::fill_tensor(*e.graph.add_initializer(), n.tensor, name);
      if ((param && !o.export_params) || o.keep_initializers_as_inputs)
        set_type(*e.graph.add_input(), name, g.value(v).type, {});
    } else if (n.kind == ir::NodeKind::Assign) {
      ::ms::detail::raise<ValueError>(
          kApi, ": the graph updates the parameter '", e.names[n.inputs.at(0).index()],
          "' in place (an optimizer step or assign); only inference graphs export");
    }
  }
}

/// The ONNX nodes of every op node.
/// Opset 17+: layer normalization written out as ops, one LayerNormalization node each. Marks
/// the nodes it replaces in `done`; writes the node at the root's place.
std::vector<std::optional<detail::LayerNormMatch>> layer_norms(Emitter& e,
                                                               std::vector<bool>& done) {
  std::vector<std::optional<detail::LayerNormMatch>> at(e.g.nodes.size());
  if (e.opset < 17) return at;
  for (detail::LayerNormMatch& m : detail::find_layer_norms(e.g)) {
    bool free = !done[m.root.index()];
    for (ir::NodeId n : m.inner) free &= !done[n.index()];
    if (!free) continue;  // overlaps one found before
    for (ir::NodeId n : m.inner) done[n.index()] = true;
    at[m.root.index()] = std::move(m);
  }
  return at;
}

void emit_layer_norm(Emitter& e, const detail::LayerNormMatch& m) {
  const ir::ValueId out = e.g.node(m.root).outputs[0];
  std::string& name = e.names[out.index()];
  if (name.empty()) name = e.fresh("LayerNormalization");
  e.scope = "layer_norm";
  ::onnx::NodeProto& n =
      e.add("LayerNormalization",
            {e.names[m.x.index()], e.names[m.scale.index()], e.names[m.bias.index()]}, {name});
  e.scope.clear();
  auto* axis = n.add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(m.axis);
  auto* eps = n.add_attribute();
  eps->set_name("epsilon");
  eps->set_type(::onnx::AttributeProto::FLOAT);
  eps->set_f(static_cast<float>(m.epsilon));
}

void emit_ops(Emitter& e, const std::vector<std::optional<I64s>>& targets) {
  const ir::Graph& g = e.g;
  std::vector<bool> done(g.nodes.size(), false);
  const auto norms = layer_norms(e, done);
  for (std::size_t k = 0; k < g.nodes.size(); ++k) {
    const ir::Node& n = g.nodes[k];
    if (norms[k]) {
      emit_layer_norm(e, *norms[k]);
      continue;
    }
    if (done[k]) continue;
    if (n.kind != ir::NodeKind::Op) {
      MS_CHECK(n.kind != ir::NodeKind::Fused, ValueError, kApi,
               ": a fused region reached export (internal: export runs no fusion)");
      continue;
    }
    const detail::OpRule* rule = detail::find_rule(n.def->name);
    MS_CHECK(rule != nullptr, ValueError, kApi, ": op '", n.def->name, "' (", ops::ir_name(*n.def),
             ") has no ONNX mapping: ", detail::gap_reason(n.def->name),
             " (docs/onnx_ops.md lists the ops that export)");
    detail::NodeCtx c{e, n, {}, targets.empty() ? std::nullopt : targets[k]};
    for (ir::ValueId v : n.outputs) {
      std::string& name = e.names[v.index()];
      if (name.empty()) name = e.fresh(ops::ir_name(*n.def));
      c.out.push_back(name);
    }
    e.scope = n.def->name;
    rule->emit(c);
    e.scope.clear();
  }
}

/// Names op outputs that are graph outputs after them (so no Identity is needed).
void claim_output_names(Emitter& e, const Signature& s) {
  std::set<std::size_t> claimed;
  for (std::size_t i = 0; i < e.g.outputs.size(); ++i) {
    const ir::ValueId v = e.g.outputs[i];
    if (e.g.producer(v).kind == ir::NodeKind::Op && claimed.insert(v.index()).second)
      e.names[v.index()] = s.out_names[i];
  }
}

/// Graph outputs with their dim_params: symbols of dims that moved in the
/// probe, renamed by dynamic_axes.
void emit_outputs(Emitter& e, const Signature& s, const ir::Graph* probe, const ExportOptions& o) {
  for (std::size_t i = 0; i < e.g.outputs.size(); ++i) {
    const ir::ValueId v = e.g.outputs[i];
    const std::string& name = s.out_names[i];
    if (e.names[v.index()] != name) e.add("Identity", {e.names[v.index()]}, {name});
    const Shape& sb = shape_of(e.g, v);
    std::vector<std::string> params(sb.size());
    for (std::size_t a = 0; probe != nullptr && a < sb.size(); ++a) {
      const std::int64_t p = shape_of(*probe, probe->outputs[i])[a];
      if (p == sb[a]) continue;
      params[a] = name + "_dim" + std::to_string(a);
      for (const Sym& sym : s.syms)
        if (sym.base == sb[a] && sym.probe == p) params[a] = sym.name;
    }
    if (auto it = o.dynamic_axes.find(name); it != o.dynamic_axes.end())
      for (const auto& [axis, dim] : it->second) {
        MS_CHECK(axis >= 0 && axis < sb.rank() && !dim.empty(), ValueError, kApi,
                 ": dynamic_axes['", name, "'] names axis ", axis, " of an output of rank ",
                 sb.rank());
        params[static_cast<std::size_t>(axis)] = dim;
      }
    set_type(*e.graph.add_output(), name, e.g.value(v).type, params);
  }
}

/// dynamic_axes keys must name inputs or outputs.
void check_dynamic_axes_keys(const ExportOptions& o, const Signature& s) {
  for (const auto& [name, axes] : o.dynamic_axes) {
    const bool known = std::count(s.in_names.begin(), s.in_names.end(), name) +
                           std::count(s.out_names.begin(), s.out_names.end(), name) >
                       0;
    MS_CHECK(known, ValueError, kApi, ": dynamic_axes names '", name,
             "', which is neither an input nor an output name");
  }
}

::onnx::ModelProto build_model(const ExportRequest& req, const ExportOptions& o, Signature& s) {
  ir::Graph gb = trace_at(req, shapes_at(req, s, false));
  const std::size_t n_out = gb.outputs.size();
  MS_CHECK(o.output_names.size() <= n_out, ValueError, kApi, ": output_names has ",
           o.output_names.size(), " names for ", n_out, " outputs");
  for (std::size_t i = 0; i < n_out; ++i)
    s.out_names.push_back(name_at(o.output_names, i, "output"));
  check_dynamic_axes_keys(o, s);
  std::optional<ir::Graph> gp;
  std::vector<std::optional<I64s>> targets;
  std::vector<int> iota;
  if (!s.syms.empty()) {
    for (std::size_t k = 0; k < s.syms.size(); ++k)
      s.syms[k].probe = s.syms[k].base + 2 + static_cast<std::int64_t>(k);
    try {
      gp = trace_at(req, shapes_at(req, s, true));
    } catch (const Error& err) {
      ::ms::detail::raise<ValueError>(
          kApi,
          ": tracing with the symbolic dims at other sizes failed, so they cannot be "
          "symbolic (the function pins them, or ties dims that need one ms::Dim name): ",
          err.what());
    }
    targets = compare_traces(gb, *gp, o.opset_version, s, iota);
  }
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name(o.producer_name);
  m.set_producer_version(o.producer_version);
  m.set_doc_string(o.doc_string);
  auto& opset = *m.add_opset_import();
  opset.set_domain("");
  opset.set_version(o.opset_version);
  ::onnx::GraphProto& graph = *m.mutable_graph();
  graph.set_name("ms_graph");
  Emitter e(graph, gb, o.opset_version);
  e.sym_sources = sym_sources(s);
  emit_leaves(e, req, o, s, iota);
  claim_output_names(e, s);
  emit_ops(e, targets);
  emit_outputs(e, s, gp ? &*gp : nullptr, o);
  return m;
}

/// ONNX's checker, then its strict shape and type inference (on a copy: the
/// written model carries no inferred value_info). A dtype an ONNX op does not
/// take (int32 convolution, complex casts) is a TypeError; anything else is an
/// export bug, a ValueError. Node names start with the ms op.
void check_with_onnx(const ::onnx::ModelProto& m) {
  std::string why;
  try {
    ::onnx::checker::check_model(m);
    ::onnx::ModelProto copy = m;
    ::onnx::shape_inference::InferShapes(copy, ::onnx::OpSchemaRegistry::Instance(),
                                         ::onnx::ShapeInferenceOptions(true, 1));
    return;
  } catch (const std::exception& err) {
    why = err.what();
  }
  if (why.find("unsupported type") != std::string::npos)
    ::ms::detail::raise<TypeError>(kApi, ": ONNX opset ", m.opset_import(0).version(),
                                   " has no op for this dtype (the node name starts with the ms "
                                   "op): ",
                                   why);
  ::ms::detail::raise<ValueError>(kApi, ": ONNX rejects the exported graph (an export bug): ", why);
}

/// The data file's name (ExportOptions::external_data_file or `<model name>.data`);
/// ValueError for a name that is not a plain file name beside the model.
std::string external_file_name(const std::string& path, const ExportOptions& o) {
  const std::string model = std::filesystem::path(path).filename().string();
  const std::string name = o.external_data_file.empty() ? model + ".data" : o.external_data_file;
  MS_CHECK(name.find('/') == std::string::npos && name != "." && name != ".." &&
               name.find('\0') == std::string::npos,
           ValueError, kApi,
           ": external_data_file must be a file name in the model's directory "
           "(no '/'), got '",
           name, "'");
  MS_CHECK(name != model, ValueError, kApi, ": external_data_file '", name,
           "' is the model file itself");
  MS_CHECK(o.external_data_threshold >= 0, ValueError, kApi,
           ": external_data_threshold must be >= 0, got ", o.external_data_threshold);
  return name;
}

/// Writes `m` to `path` atomically; with ExportOptions::external_data, the
/// large initializers first go (atomically too) to the data file beside it.
void write_model(::onnx::ModelProto& m, const std::string& path, const ExportOptions& o) {
  if (o.external_data) {
    const std::string name = external_file_name(path, o);
    const std::vector<detail::ExternalBlob> blobs =
        detail::move_to_external(m, name, o.external_data_threshold);
    if (!blobs.empty())
      io::write_file_atomic(
          (std::filesystem::path(path).parent_path() / name).string(), [&](io::ByteSink& out) {
            static constexpr char kZeros[detail::kExternalAlign] = {};
            for (const detail::ExternalBlob& b : blobs) {
              out.write(kZeros, static_cast<std::size_t>(b.offset - out.written()));
              out.write(b.bytes->data(), b.bytes->size());
            }
          });
  }
  std::string bytes;
  MS_CHECK(m.SerializeToString(&bytes), ValueError, kApi,
           ": protobuf could not serialize the model (over 2 GB?",
           o.external_data ? ")" : " ExportOptions::external_data keeps the weights outside)");
  io::write_file_atomic(
      path, std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace

namespace detail {

void export_request(const ExportRequest& req, const std::string& path, const ExportOptions& o) {
  check_options(o, req.examples.size());
  if (o.external_data) external_file_name(path, o);
  Signature s;
  for (std::size_t i = 0; i < req.examples.size(); ++i)
    s.in_names.push_back(name_at(o.input_names, i, "input"));
  input_symbols(req, o, s);
  dynamic_axes_of_inputs(req, o, s);
  ::onnx::ModelProto m = build_model(req, o, s);
  check_with_onnx(m);
  write_model(m, path, o);
}

}  // namespace detail

std::vector<OpSupport> op_support() {
  std::vector<OpSupport> out;
  for (const ops::OpDef* def : ops::registry()) {
    OpSupport row{std::string(def->name), false, "", ""};
    if (const detail::OpRule* r = detail::find_rule(def->name)) {
      row.supported = true;
      row.onnx = r->onnx;
      row.note = r->note;
    } else {
      row.note = detail::gap_reason(def->name);
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::string op_support_markdown() {
  std::string md =
      "# ONNX export: ops\n\n"
      "Generated from `src/onnx/op_rules.cpp` by `build/tests/onnx/onnx_ops_table > "
      "docs/onnx_ops.md`;\n`tests/onnx/test_export.cpp` checks that this file is in sync. "
      "`ms::onnx::export_model`\nwrites opsets " +
      std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
      "; a graph holding an unsupported op is an `ms::ValueError` naming it.\n"
      "From opset 17, layer normalization written out as ops (mean, sub, square, mean, add,\n"
      "rsqrt, mul, mul, add over trailing axes) also becomes one `LayerNormalization` node.\n"
      "With symbolic dims, a constant `arange(0, n)` of a symbolic n becomes `Range`, and a\n"
      "reshape or broadcast target dim that is a symbolic dim is read with `Shape` at run time.\n\n"
      "## Supported\n\n| ms op | ONNX | notes |\n|---|---|---|\n";
  std::string gaps = "\n## Not supported\n\n| ms op | why |\n|---|---|\n";
  for (const OpSupport& r : op_support()) {
    if (r.supported)
      md += "| `" + r.op + "` | " + r.onnx + " | " + r.note + " |\n";
    else
      gaps += "| `" + r.op + "` | " + r.note + " |\n";
  }
  return md + gaps;
}

}  // namespace ms::onnx
