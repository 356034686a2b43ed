// find_layer_norms (src/onnx/emit.hpp): layer normalization written out as ops
// (nn::LayerNorm itself calls the layer_norm op), found so that opset 17 writes
// one LayerNormalization node:
//   %m = Mean(x) {axes=trailing, keepdims=true}   %c = Sub(x, %m)
//   %v = Mean(Square(%c)) {same axes}             %r = Rsqrt(Add(%v, eps))
//   %out = Add(Mul(Mul(%c, %r), scale), bias)     (either operand order of Mul and Add)
#include <algorithm>
#include <optional>
#include <utility>

#include "emit.hpp"

namespace ms::onnx::detail {
namespace {

struct Matcher {
  const ir::Graph& g;
  std::vector<ir::NodeId> nodes;  ///< matched so far (root first)

  /// The op node producing `v` when it is op `name`, else null; records it.
  const ir::Node* op(ir::ValueId v, std::string_view name) {
    const ir::Node& n = g.producer(v);
    if (n.kind != ir::NodeKind::Op || n.def->name != name) return nullptr;
    nodes.push_back(g.value(v).node);
    return &n;
  }
  /// A binary node's operands with the one produced by op `name` first.
  std::optional<std::pair<ir::ValueId, ir::ValueId>> operands(const ir::Node& n,
                                                              std::string_view name) {
    for (int first : {0, 1}) {
      const ir::ValueId a = n.inputs[static_cast<std::size_t>(first)];
      const ir::ValueId b = n.inputs[static_cast<std::size_t>(1 - first)];
      if (const ir::Node& p = g.producer(a); p.kind == ir::NodeKind::Op && p.def->name == name)
        return std::pair{a, b};
    }
    return std::nullopt;
  }
  /// A Mean over trailing axes with keepdims; the first axis, or nullopt.
  std::optional<std::int64_t> trailing_mean(const ir::Node& n) {
    const std::int64_t r = g.value(n.inputs[0]).type.shape.rank();
    std::vector<std::int64_t> axes = n.attrs.get_or<std::vector<std::int64_t>>("axes", {}, "mean");
    if (axes.empty() || !n.attrs.get_or<bool>("keepdims", false, "mean")) return std::nullopt;
    for (auto& a : axes) a = a < 0 ? a + r : a;
    std::sort(axes.begin(), axes.end());
    for (std::size_t i = 0; i < axes.size(); ++i)
      if (axes[i] != r - static_cast<std::int64_t>(axes.size() - i)) return std::nullopt;
    return axes[0];
  }
};

std::optional<LayerNormMatch> match_at(const ir::Graph& g, ir::NodeId root) {
  Matcher m{g, {root}};
  const ir::Node& add = g.node(root);
  if (add.kind != ir::NodeKind::Op || add.def->name != "add" || add.inputs.size() != 2)
    return std::nullopt;
  const auto ab = m.operands(add, "mul");
  if (!ab) return std::nullopt;
  const ir::Node* mul_scale = m.op(ab->first, "mul");
  const auto ns = m.operands(*mul_scale, "mul");
  if (!ns) return std::nullopt;
  const ir::Node* mul_norm = m.op(ns->first, "mul");
  const auto cr = m.operands(*mul_norm, "sub");
  if (!cr) return std::nullopt;
  const ir::Node* sub = m.op(cr->first, "sub");
  const ir::Node* rsqrt = m.op(cr->second, "rsqrt");
  const ir::Node* add_eps = rsqrt ? m.op(rsqrt->inputs[0], "add") : nullptr;
  if (add_eps == nullptr || !g.value(add_eps->inputs[1]).weak) return std::nullopt;
  const ir::Node* var = m.op(add_eps->inputs[0], "mean");
  const ir::Node* sq = var ? m.op(var->inputs[0], "square") : nullptr;
  const ir::Node* mean = m.op(sub->inputs[1], "mean");
  if (sq == nullptr || mean == nullptr || sq->inputs[0] != cr->first ||
      mean->inputs[0] != sub->inputs[0])
    return std::nullopt;
  const auto axis = m.trailing_mean(*mean);
  if (!axis || m.trailing_mean(*var) != axis) return std::nullopt;
  LayerNormMatch r{root,       sub->inputs[0], ns->second,
                   ab->second, *axis,          g.producer(add_eps->inputs[1]).scalar.to<double>(),
                   {}};
  const ops::TensorType& xt = g.value(r.x).type;
  const std::vector<std::int64_t> normalized(xt.shape.dims().begin() + *axis,
                                             xt.shape.dims().end());
  for (ir::ValueId p : {r.scale, r.bias})
    if (g.value(p).type.dtype != xt.dtype || g.value(p).type.shape.to_vector() != normalized)
      return std::nullopt;
  if (!dtype_is_float(xt.dtype)) return std::nullopt;
  r.inner.assign(m.nodes.begin() + 1, m.nodes.end());
  return r;
}

}  // namespace

std::vector<LayerNormMatch> find_layer_norms(const ir::Graph& g) {
  // users[v]: the nodes reading value v (graph outputs count as a user outside).
  std::vector<std::vector<ir::NodeId>> users(g.values.size());
  for (std::size_t k = 0; k < g.nodes.size(); ++k)
    for (ir::ValueId v : g.nodes[k].inputs) users[v.index()].push_back(ir::NodeId{k});
  for (ir::ValueId v : g.outputs) users[v.index()].push_back(ir::kNoNode);
  std::vector<LayerNormMatch> out;
  for (std::size_t k = 0; k < g.nodes.size(); ++k) {
    std::optional<LayerNormMatch> m = match_at(g, ir::NodeId{k});
    if (!m) continue;
    std::vector<ir::NodeId> members = m->inner;
    members.push_back(m->root);
    bool closed = true;
    for (ir::NodeId n : m->inner)
      for (ir::ValueId v : g.node(n).outputs)
        for (ir::NodeId u : users[v.index()])
          closed &= std::find(members.begin(), members.end(), u) != members.end();
    if (closed) out.push_back(std::move(*m));
  }
  return out;
}

}  // namespace ms::onnx::detail
