#include <algorithm>
#include <cctype>
#include <complex>
#include <cstdio>
#include <deque>
#include <functional>
#include <numeric>
#include <ostream>
#include <queue>
#include <unordered_map>

#include "ms/expr/expr.hpp"
#include "ms/jit/compile.hpp"
#include "ms/jit/detail/fused_ops.hpp"
#include "ms/jit/dump.hpp"
#include "ms/ops/elementwise.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/linalg.hpp"
#include "ms/ops/nn.hpp"

namespace ms::compiler {
namespace {

using ir::Graph;
using ir::IdTable;
using ir::kNoValue;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;
using ir::ValueId;

bool is_ew(const Node& n) { return n.kind == NodeKind::Op && n.ew_id >= 0; }
bool is_random(const Node& n) {
  return n.kind == NodeKind::Op && n.def->kind == ops::OpKind::Random;
}
// Elementwise and free to fuse: not a split point of graph_split.
// Marked ops (set_dump) keep their own tensors to write.
bool fusable(const Node& n) {
  return is_ew(n) && !n.attrs.has("split_op") && !dump_enabled(n.def->name) && n.dump_scope.empty();
}

// A cast between floating dtypes, free to fuse: within a fused region it is a
// register conversion (exact when it widens), or, as a region's root, the
// store's rounding to the narrower dtype.
bool fusable_cast(const Graph& g, const Node& n) {
  if (n.kind != NodeKind::Op || n.def->name != "cast" || n.attrs.has("split_op") ||
      dump_enabled(n.def->name) || !n.dump_scope.empty())
    return false;
  const DType from = g.value(n.inputs[0]).type.dtype, to = g.value(n.outputs[0]).type.dtype;
  return from != to && dtype_is_float(from) && dtype_is_float(to);
}
// Whether every value of `from` is exactly a value of `to` (both floating).
bool widens(DType from, DType to) {
  const bool half = from == DType::Float16 || from == DType::BFloat16;
  return (half && (to == DType::Float32 || to == DType::Float64)) ||
         (from == DType::Float32 && to == DType::Float64);
}

// Per value: the value that replaces it, or kNoValue for itself.
using Replacements = IdTable<ValueId, ValueId>;

// The value that finally replaces `v`.
ValueId follow(const Replacements& repl, ValueId v) {
  while (repl[v].valid()) v = repl[v];
  return v;
}

// Rebuilds `g` from the nodes `order` (old ids, each once, a valid order),
// reading every value through `repl` (old value -> the old value that replaces
// it, kNoValue for itself). Values are renumbered densely.
Graph rebuild(const Graph& g, const std::vector<NodeId>& order, const Replacements& repl) {
  auto resolve = [&](ValueId v) { return follow(repl, v); };
  IdTable<ValueId, ValueId> map(g.values.size());
  Graph out;
  for (NodeId id : order) {
    Node n = g.node(id);
    for (ValueId& v : n.inputs) {
      v = map[resolve(v)];
      MS_ASSERT(v.valid());
    }
    std::vector<ops::TensorType> types;
    bool weak = false;
    for (ValueId v : n.outputs) {
      types.push_back(g.value(v).type);
      weak = g.value(v).weak;
    }
    const std::vector<ValueId> old_outputs = n.outputs;
    const NodeId nid = out.add(std::move(n), types, weak);
    for (std::size_t k = 0; k < old_outputs.size(); ++k)
      map[old_outputs[k]] = out.node(nid).outputs[k];
  }
  for (ValueId v : g.outputs) out.outputs.push_back(map[resolve(v)]);
  return out;
}

Replacements no_replacements(const Graph& g) { return Replacements(g.values.size()); }

std::vector<NodeId> identity_order(const Graph& g) {
  std::vector<NodeId> o;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) o.push_back(NodeId{i});
  return o;
}

// The nodes in their order where it is valid once read through `repl`: a
// node that reads a value made by a later node moves after it (Kahn's
// algorithm taking the first ready node in the old order).
std::vector<NodeId> stable_order(const Graph& g, const Replacements& repl) {
  const std::size_t n = g.nodes.size();
  IdTable<NodeId, int> pending(n, 0);
  IdTable<NodeId, std::vector<NodeId>> readers(n);
  for (std::size_t i = 0; i < n; ++i)
    for (ValueId v : g.nodes[i].inputs) {
      ++pending[NodeId{i}];
      readers[g.value(follow(repl, v)).node].push_back(NodeId{i});
    }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (pending[NodeId{i}] == 0) ready.push(i);
  std::vector<NodeId> order;
  while (!ready.empty()) {
    const NodeId id{ready.top()};
    ready.pop();
    order.push_back(id);
    for (NodeId r : readers[id])
      if (--pending[r] == 0) ready.push(r.index());
  }
  MS_ASSERT(order.size() == n);
  return order;
}

// consumers[v] = nodes reading value v.
using Consumers = IdTable<ValueId, std::vector<NodeId>>;
Consumers consumers_of(const Graph& g) {
  Consumers c(g.values.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].inputs) c[v].push_back(NodeId{i});
  return c;
}

// is_output[v]: v is returned by the graph.
IdTable<ValueId, bool> outputs_of(const Graph& g) {
  IdTable<ValueId, bool> is_output(g.values.size(), false);
  for (ValueId v : g.outputs) is_output[v] = true;
  return is_output;
}

// Exact text of a number (printing rounds: 1e6 and 1000001 must differ).
std::string exact(double d) {
  char b[32];
  std::snprintf(b, sizeof b, "%a", d);
  return b;
}

std::string exact(const ms::Scalar& s) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, double>)
          return ::ms::detail::str_cat('d', exact(v));
        else if constexpr (std::is_same_v<V, std::complex<double>>)
          return ::ms::detail::str_cat('c', exact(v.real()), ',', exact(v.imag()));
        else
          return ::ms::detail::str_cat(std::is_same_v<V, bool> ? 'b' : 'i', v);
      },
      s.value());
}

// Attributes as an exact key for CSE.
std::string exact(const ops::Attrs& attrs) {
  std::string k;
  for (const auto& [name, v] : attrs.items()) {
    k += name;
    k += '=';
    k += std::to_string(v.index());
    k += ':';
    std::visit(
        [&](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, double>) {
            k += exact(x);
          } else if constexpr (std::is_same_v<X, std::vector<std::int64_t>>) {
            for (std::int64_t i : x) k += ::ms::detail::str_cat(i, ',');
          } else if constexpr (std::is_same_v<X, std::string>) {
            k += ::ms::detail::str_cat(x.size(), ':', x);
          } else if constexpr (std::is_same_v<X, DType>) {
            k += std::to_string(static_cast<int>(x));
          } else {
            k += std::to_string(x);
          }
        },
        v);
    k += ';';
  }
  return k;
}

void check(const Graph& g, const CompileOptions& o, std::string_view pass) {
  if (o.verify) ir::verify(g, pass);
}

}  // namespace

void eliminate_dead_code(Graph& g) {
  IdTable<NodeId, bool> live(g.nodes.size(), false);
  std::vector<NodeId> stack;
  auto mark_value = [&](ValueId v) { stack.push_back(g.value(v).node); };
  for (ValueId v : g.outputs) mark_value(v);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].kind == NodeKind::Assign || g.nodes[i].kind == NodeKind::Input ||
        is_random(g.nodes[i]))  // a draw advances its generator even when unused
      stack.push_back(NodeId{i});
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    if (live[n]) continue;
    live[n] = true;
    for (ValueId v : g.node(n).inputs) mark_value(v);
  }
  std::vector<NodeId> order;
  for (NodeId id : identity_order(g))
    if (live[id]) order.push_back(id);
  if (order.size() == g.nodes.size()) return;
  g = rebuild(g, order, no_replacements(g));
}

void eliminate_common_subexpressions(Graph& g) {
  Replacements repl = no_replacements(g);
  auto resolve = [&](ValueId v) { return follow(repl, v); };
  std::unordered_map<std::string, NodeId> seen;  // key -> node
  bool changed = false;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::string key;
    switch (n.kind) {
      case NodeKind::Op:
        // A recomputed clone merges only with clones: merged with the forward
        // original, the forward value would be kept for the backward again.
        key = ::ms::detail::str_cat(n.recomputed ? "rc:" : "op:", n.def->name, ":", exact(n.attrs));
        break;
      case NodeKind::Scalar: key = ::ms::detail::str_cat("scalar:", exact(n.scalar)); break;
      case NodeKind::Const:
        // The same tensor bound twice (captures are already unique).
        key = ::ms::detail::str_cat("const:", static_cast<const void*>(n.tensor.storage().get()),
                                    ":", n.tensor.offset(), ":", n.tensor.shape(), ":",
                                    Shape(n.tensor.strides()), ":", n.tensor.dtype());
        break;
      default: continue;  // inputs, captures, fused regions, side effects stay
    }
    for (ValueId v : n.inputs) key += ::ms::detail::str_cat(",", resolve(v));
    auto [it, fresh] = seen.emplace(std::move(key), NodeId{i});
    if (fresh) continue;
    const Node& first = g.node(it->second);
    for (std::size_t k = 0; k < n.outputs.size(); ++k) repl[n.outputs[k]] = first.outputs[k];
    changed = true;
  }
  if (!changed) return;
  g = rebuild(g, identity_order(g), repl);
  eliminate_dead_code(g);
}

std::shared_ptr<ir::FusedRegion> build_region(const Graph& g, std::span<const NodeId> members,
                                              std::vector<ValueId>& leaves) {
  auto region = std::make_shared<ir::FusedRegion>();
  expr::Lowering L;
  std::unordered_map<ValueId, expr::Lowered> lowered;  // value -> its register
  leaves.clear();
  auto operand = [&](ValueId v) -> expr::Lowered {
    if (auto it = lowered.find(v); it != lowered.end()) return it->second;
    const ir::Value& val = g.value(v);
    expr::Lowered lo;
    lo.dtype = val.type.dtype;
    if (val.weak) {
      lo.is_scalar = true;
      lo.value = g.producer(v).scalar;
      lo.reg_type = lo.dtype;
    } else {
      lo.reg_type = kernels::ew_register_type(val.type.dtype, "fused region");
      lo.shape = val.type.shape;
      lo.reg = L.builder.load(static_cast<int>(leaves.size()), lo.reg_type);
      leaves.push_back(v);
    }
    lowered.emplace(v, lo);
    return lo;
  };
  expr::Lowered root;
  for (NodeId id : members) {
    const Node& n = g.node(id);
    if (!is_ew(n)) {  // a cast (fusable_cast): a register conversion, rounded by the store
      MS_ASSERT(fusable_cast(g, n));
      root = operand(n.inputs[0]);
      root.dtype = g.value(n.outputs[0]).type.dtype;
      const DType rt = kernels::ew_register_type(root.dtype, "fused region");
      root.reg = L.builder.convert(root.reg, root.reg_type, rt);
      root.reg_type = rt;
      lowered[n.outputs[0]] = root;
      region->ops.push_back(ops::ir_name(*n.def));
      continue;
    }
    expr::Lowered ops_in[3];
    for (std::size_t k = 0; k < n.inputs.size(); ++k) ops_in[k] = operand(n.inputs[k]);
    root = expr::lower_apply(L, n.ew_id, std::span<const expr::Lowered>(ops_in, n.inputs.size()));
    lowered[n.outputs[0]] = root;
    region->ops.push_back(ops::ir_name(*n.def));
  }
  const ir::Value& out = g.value(g.value_of(members.back()));
  region->program = L.builder.finish(root.reg, out.type.shape, out.type.dtype);
  return region;
}

void fold_constants(Graph& g) {
  bool changed = false;
  for (Node& n : g.nodes) {
    if (n.kind != NodeKind::Op || n.outputs.size() != 1) continue;
    if (n.def->kind == ops::OpKind::HostCallback || n.def->kind == ops::OpKind::Random)
      continue;  // runs at run time, every time
    bool all_const = !n.inputs.empty(), any_tensor = false;
    for (ValueId v : n.inputs) {
      const NodeKind k = g.producer(v).kind;
      all_const &= k == NodeKind::Const || k == NodeKind::Scalar;
      any_tensor |= k == NodeKind::Const;
    }
    if (!all_const || !any_tensor) continue;
    Tensor value;
    if (is_ew(n)) {
      std::vector<ValueId> leaves;
      const NodeId id = g.value(n.outputs[0]).node;
      const auto region = build_region(g, std::span<const NodeId>(&id, 1), leaves);
      std::vector<const Tensor*> in;
      for (ValueId v : leaves) in.push_back(&g.producer(v).tensor);
      value = kernels::ew_eval(region->program, in);
    } else {
      std::vector<Tensor> in;
      for (ValueId v : n.inputs) in.push_back(g.producer(v).tensor);
      value = n.def->eval(in, n.attrs)[0];
    }
    n.kind = NodeKind::Const;
    n.tensor = value;
    n.inputs.clear();
    n.def = nullptr;
    n.ew_id = -1;
    n.attrs = {};
    changed = true;
  }
  if (changed) eliminate_dead_code(g);
}

void simplify(Graph& g) {
  Replacements repl = no_replacements(g);
  auto resolve = [&](ValueId v) { return follow(repl, v); };
  auto scalar_is = [&](ValueId v, double x) {
    const Node& p = g.producer(v);
    if (p.kind != NodeKind::Scalar) return false;
    const auto k = p.scalar.kind();
    return (k == ScalarKind::Int || k == ScalarKind::Float) && p.scalar.to<double>() == x;
  };
  // A graph output is never replaced by a leaf (input, capture, constant): the
  // caller would get an alias of it instead of a new tensor.
  const IdTable<ValueId, bool> is_output = outputs_of(g);
  bool changed = false;
  for (Node& n : g.nodes) {
    if (n.kind != NodeKind::Op || n.outputs.size() != 1) continue;
    for (ValueId& v : n.inputs) v = resolve(v);
    const ValueId out = n.outputs[0];
    const ops::TensorType& ot = g.value(out).type;
    ValueId same;  // the input that the node's value equals
    const ops::Algebra& alg = n.def->algebra;
    const auto& in = n.inputs;
    if (in.size() == 2 && (alg.identity_right || alg.identity_left)) {
      const bool exact = alg.identity_exact_for_floats ||
                         (!dtype_is_float(ot.dtype) && !dtype_is_complex(ot.dtype));
      if (exact && alg.identity_right && scalar_is(in[1], alg.identity))
        same = in[0];
      else if (exact && alg.identity_left && scalar_is(in[0], alg.identity))
        same = in[1];
    } else if (in.size() == 1 && alg.involution) {
      const Node& p = g.producer(in[0]);
      if (p.kind == NodeKind::Op && p.def == n.def && p.attrs == n.attrs)
        same = resolve(p.inputs[0]);
    } else if (in.size() == 1 && n.def->name == "cast" && g.producer(in[0]).kind == NodeKind::Op &&
               g.producer(in[0]).def == n.def) {
      // cast(cast(x, wider), x's dtype) is x: the widening is exact.
      const ValueId x = resolve(g.producer(in[0]).inputs[0]);
      if (dtype_is_float(ot.dtype) && g.value(x).type.dtype == ot.dtype &&
          widens(ot.dtype, g.value(in[0]).type.dtype))
        same = x;
    } else if (in.size() == 1 && alg.identity_when_same_type &&
               (alg.identity_when == nullptr || alg.identity_when(n.attrs))) {
      same = in[0];
    }
    if (same.valid() && is_output[out] && g.producer(same).inputs.empty()) same = kNoValue;
    if (same.valid() && !g.value(same).weak && g.value(same).type == ot) {
      repl[out] = same;
      changed = true;
    }
  }
  if (!changed) return;
  g = rebuild(g, identity_order(g), repl);
  eliminate_dead_code(g);
}

// Transpose(MatMul(Transpose(a), b)) -> MatMul(Transpose(b), a), and
// Transpose(MatMul(a, Transpose(b))) -> MatMul(b, Transpose(a)), for 2-D
// operands. The gradient of x @ W^T with respect to W has this form; the
// rewrite makes it a contiguous [out, in] result instead of a transposed view
// that the optimizer update would then read with strides. The inner MatMul
// (used only by the Transpose) becomes the new Transpose, so no node is added
// and the order stays valid.
void fold_transposed_matmuls(Graph& g) {
  const auto consumers = consumers_of(g);
  const IdTable<ValueId, bool> is_output = outputs_of(g);
  auto rank2 = [&](ValueId v) { return g.value(v).type.shape.rank() == 2; };
  auto is_t2 = [&](const Node& n) {
    return n.kind == NodeKind::Op && n.def == &ops::def_of<ops::Transpose>() &&
           n.inputs.size() == 1 && n.outputs.size() == 1 && rank2(n.outputs[0]) &&
           !ops::Transpose::is_identity(
               ops::attrs_from<ops::Transpose::Attrs>(n.attrs, ops::Transpose::name));
  };
  static const ops::OpDef& mm = ops::def_of<ops::Matmul>();
  static const ops::OpDef& tr = ops::def_of<ops::Transpose>();
  const ops::Attrs swap = ops::attrs_to(ops::Transpose::Attrs{.axis0 = 0, .axis1 = 1});
  for (Node& t : g.nodes) {
    if (!is_t2(t)) continue;
    const ValueId mv = t.inputs[0];
    Node& m = g.node(g.value(mv).node);
    if (m.kind != NodeKind::Op || m.def != &mm || m.inputs.size() != 2 || m.outputs.size() != 1)
      continue;
    if (consumers[mv].size() != 1 || is_output[mv]) continue;
    const ValueId a = m.inputs[0], b = m.inputs[1];
    if (!rank2(a) || !rank2(b)) continue;
    const Node& pa = g.producer(a);
    const Node& pb = g.producer(b);
    ValueId first, second, flip;  // t := MatMul(first, second); m := Transpose(flip)
    if (is_t2(pa)) {
      flip = b;
      second = pa.inputs[0];
    } else if (is_t2(pb)) {
      flip = a;
      first = pb.inputs[0];
    } else {
      continue;
    }
    const ops::TensorType ft = g.value(flip).type;
    m.def = &tr;
    m.inputs = {flip};
    m.attrs = swap;
    g.value(mv).type = ops::TensorType{ft.dtype, Shape({ft.shape.dims()[1], ft.shape.dims()[0]})};
    t.def = &mm;
    t.attrs = {};
    t.inputs = first.valid() ? std::vector<ValueId>{first, mv} : std::vector<ValueId>{mv, second};
  }
}

// ---------------------------------------------------------------- fusion rules
//
// Fused forms of op patterns, one rule per pattern (as tinygrad's
// PatternMatcher): a rule looks at one node and, when the pattern rooted there
// matches, rewrites it into a fused op of the jit (ms/jit/detail/fused_ops.hpp).
// The rules below fold the CNN pattern conv2d -> relu -> max_pool2d and its
// gradient into one-pass forms, exact by construction. They run in table
// order, each over the whole graph: the first removes relu_grad's read of the
// conv output, after which relu is that output's only reader. A rewritten node
// keeps its place (its new inputs precede the node it replaces); the nodes it
// absorbed become dead. Nodes marked for dumping are left alone.

namespace {

// What a rule sees of the graph besides the node: readers of each value, the
// graph outputs, and `repl` (old value -> the value replacing it) for rules
// that redirect readers.
struct FusionSite {
  Graph& g;
  Consumers consumers;
  IdTable<ValueId, bool> is_output;
  Replacements repl;
  // v is read by one node and is not a graph output
  bool only_reader(ValueId v) const { return consumers[v].size() == 1 && !is_output[v]; }
};

struct FusionRule {
  std::string_view pattern;
  bool (*rewrite)(Node& n, FusionSite& s);  // true when it rewrote n
};

// n is an op of row `def` with one output, not marked for dumping.
bool is_single(const Node& n, const ops::OpDef& def) {
  return n.kind == NodeKind::Op && n.def == &def && n.outputs.size() == 1 &&
         !dump_enabled(def.name) && n.dump_scope.empty();
}

bool fusable_dtype(DType dt) {
  return dt == DType::Float32 || dt == DType::Float64 || dt == DType::Int32 || dt == DType::Int64;
}

// max_pool2d with 2x2 windows at stride 2, no padding or dilation, floor.
bool pool_is_2x2(const MaxPool2dOptions& a) {
  using Ints = std::vector<std::int64_t>;
  const auto all = [](const Ints& v, std::int64_t x) {
    return !v.empty() && v.size() <= 2 &&
           std::all_of(v.begin(), v.end(), [&](std::int64_t e) { return e == x; });
  };
  return all(a.kernel, 2) && (a.stride.empty() || all(a.stride, 2)) && all(a.padding, 0) &&
         all(a.dilation, 1) && !a.ceil_mode;
}

template <class E>
typename E::Attrs attrs_of(const Node& n) {
  return ops::attrs_from<typename E::Attrs>(n.attrs, E::name);
}

// The conv2d (plain or fused) producing value v, as fused attributes; false
// when v is not the first output of a conv.
bool conv_attrs_at(const Graph& g, ValueId v, fused::Conv2dFused::Attrs& a) {
  const Node& c = g.producer(v);
  if (c.kind != NodeKind::Op || g.value(v).index != 0) return false;
  if (c.def == &ops::def_of<ops::Conv2d>()) {
    if (dump_enabled(ops::Conv2d::name)) return false;
    a = {};
    static_cast<Conv2dOptions&>(a) = attrs_of<ops::Conv2d>(c);
    return true;
  }
  if (c.def != &fused::def<fused::Conv2dFused>()) return false;
  a = attrs_of<fused::Conv2dFused>(c);
  return true;
}

// relu_grad(max_pool2d_grad(relu(y), gy), y) -> max_pool2d_grad_relu(relu(y), gy):
// relu(y) > 0 exactly where y > 0, so the pooled gradient keeps a window's
// value only when its chosen input is > 0, which is what relu_grad keeps.
bool fuse_pool_grad_relu(Node& n, FusionSite& s) {
  if (!is_single(n, ops::def_of<ops::ReluGrad>()) || n.inputs.size() != 2) return false;
  const ValueId gv = n.inputs[0], y = n.inputs[1];
  const Node& pg = s.g.producer(gv);
  if (!is_single(pg, ops::def_of<ops::MaxPool2dGrad>()) || !s.only_reader(gv) ||
      s.g.value(gv).type != s.g.value(n.outputs[0]).type)
    return false;
  const Node& r = s.g.producer(pg.inputs[0]);
  if (!is_single(r, ops::def_of<ops::Relu>()) || r.inputs.size() != 1 || r.inputs[0] != y)
    return false;
  n.def = &fused::def<fused::MaxPool2dGradRelu>();
  n.ew_id = -1;
  n.attrs = pg.attrs;
  n.inputs = pg.inputs;
  return true;
}

// add(matmul(a, b), bias) -> matmul_bias(a, b, bias) (float32, b 2-D, bias
// [n], the product read by the add alone and of the add's type): the bias is
// added to each tile of the product while in cache instead of in a pass of
// its own over the whole product. Neither op may be a split point
// (split_op), and both must be of one recompute region (or none): the fused
// node stands for both.
bool fuse_matmul_bias(Node& n, FusionSite& s) {
  if (!is_single(n, ops::def_of<ops::Add>()) || n.inputs.size() != 2 || n.attrs.has("split_op"))
    return false;
  const ops::TensorType& out = s.g.value(n.outputs[0]).type;
  for (std::size_t side = 0; side < 2; ++side) {
    const ValueId mv = n.inputs[side], bv = n.inputs[1 - side];
    const Node& mm = s.g.producer(mv);
    if (!is_single(mm, ops::def_of<ops::Matmul>()) || !s.only_reader(mv) ||
        mm.attrs.has("split_op") || mm.recompute_region != n.recompute_region ||
        mm.recomputed != n.recomputed)
      continue;
    const ops::TensorType &mt = s.g.value(mv).type, &bt = s.g.value(bv).type;
    const ops::TensorType& at = s.g.value(mm.inputs[0]).type;
    const ops::TensorType& wt = s.g.value(mm.inputs[1]).type;
    if (mt != out || at.dtype != DType::Float32 || bt.dtype != DType::Float32 ||
        at.shape.is_any_rank() || at.shape.rank() < 2 || wt.shape.is_any_rank() ||
        wt.shape.rank() != 2 || bt.shape.is_any_rank() || bt.shape.rank() != 1 || bt.shape[0] < 0 ||
        bt.shape[0] != wt.shape[1])
      continue;
    n.def = &fused::def<fused::MatmulBias>();
    n.ew_id = -1;
    n.attrs = {};  // relu off; the add's (func_id, ...) are not matmul_bias's
    n.inputs = {mm.inputs[0], mm.inputs[1], bv};
    return true;
  }
  return false;
}

// relu(matmul_bias(a, b, bias)) -> matmul_bias{relu}(a, b, bias): relu
// applied to each tile with its bias. Besides the relu, the sum may be read
// only as the second input of relu_grad nodes after it (a training graph's
// backward), which then read the relu's result instead: relu(x) > 0 exactly
// where x > 0. The same conditions as matmul_bias on split points and
// recompute regions.
bool fuse_matmul_bias_relu(Node& n, FusionSite& s) {
  if (!is_single(n, ops::def_of<ops::Relu>()) || n.inputs.size() != 1 || n.attrs.has("split_op"))
    return false;
  const ValueId mv = n.inputs[0], y = n.outputs[0];
  const Node& mm = s.g.producer(mv);
  if (!is_single(mm, fused::def<fused::MatmulBias>()) || s.is_output[mv] ||
      attrs_of<fused::MatmulBias>(mm).relu || mm.recompute_region != n.recompute_region ||
      mm.recomputed != n.recomputed || s.g.value(mv).type != s.g.value(y).type)
    return false;
  const auto at = static_cast<std::size_t>(&n - s.g.nodes.data());
  std::vector<NodeId> grads;
  for (NodeId r : s.consumers[mv]) {
    if (r.index() == at) continue;
    const Node& rg = s.g.node(r);
    if (r.index() < at || !is_single(rg, ops::def_of<ops::ReluGrad>()) || rg.inputs.size() != 2 ||
        rg.inputs[0] == mv || rg.inputs[1] != mv)
      return false;
    grads.push_back(r);
  }
  for (NodeId r : grads) {
    s.g.nodes[r.index()].inputs[1] = y;
    s.consumers[y].push_back(r);
  }
  s.consumers[mv].clear();
  n.def = &fused::def<fused::MatmulBias>();
  n.ew_id = -1;
  n.attrs = ops::attrs_to(fused::MatmulBias::Attrs{.relu = true});
  n.inputs = mm.inputs;
  return true;
}

// add(mul(c, s), matmul(a, b)) -> matmul_scale_add(c, a, b){s} (float32, a
// and b 2-D, c of the product's type, s a number; the product and c * s read
// by the add alone): c * s + the product with each tile of c combined while in
// cache, and in place when the add's result is assigned to c (a Momentum
// update). Also add(mul(c, s), cast(matmul(a, b))) with a bfloat16 product
// cast to float32 (read by the cast alone): amp O2's Momentum update of a
// float32 master weight. The same conditions as matmul_bias on split points
// and recompute regions.
bool fuse_matmul_scale_add(Node& n, FusionSite& s) {
  if (!is_single(n, ops::def_of<ops::Add>()) || n.inputs.size() != 2 || n.attrs.has("split_op"))
    return false;
  const ops::TensorType& out = s.g.value(n.outputs[0]).type;
  if (out.dtype != DType::Float32 || out.shape.is_any_rank() || out.shape.rank() != 2) return false;
  const auto same_region = [&](const Node& p) {
    return !p.attrs.has("split_op") && p.recompute_region == n.recompute_region &&
           p.recomputed == n.recomputed;
  };
  // The matmul making mv, or the bfloat16 one a cast of mv reads.
  const auto product = [&](ValueId mv) -> const Node& {
    const Node& p = s.g.producer(mv);
    if (!is_single(p, ops::def_of<ops::Cast>()) || p.inputs.size() != 1 || !same_region(p))
      return p;
    const ValueId pv = p.inputs[0];
    const Node& mm = s.g.producer(pv);
    const ops::TensorType& pt = s.g.value(pv).type;
    return pt.dtype == DType::BFloat16 && pt.shape == out.shape && s.only_reader(pv) &&
                   is_single(mm, ops::def_of<ops::Matmul>())
               ? mm
               : p;
  };
  for (std::size_t side = 0; side < 2; ++side) {
    const ValueId mv = n.inputs[side], sv = n.inputs[1 - side];
    const Node& mm = product(mv);
    const Node& mul = s.g.producer(sv);
    if (!is_single(mm, ops::def_of<ops::Matmul>()) || !s.only_reader(mv) || !same_region(mm) ||
        !is_single(mul, ops::def_of<ops::Mul>()) || mul.inputs.size() != 2 || !s.only_reader(sv) ||
        !same_region(mul) || s.g.value(mv).type != out || s.g.value(sv).type != out)
      continue;
    const ops::TensorType &at = s.g.value(mm.inputs[0]).type, &bt = s.g.value(mm.inputs[1]).type;
    if (at.shape.is_any_rank() || at.shape.rank() != 2 || bt.shape.is_any_rank() ||
        bt.shape.rank() != 2)
      continue;
    for (std::size_t k = 0; k < 2; ++k) {
      const ValueId c = mul.inputs[k];
      const Node& sc = s.g.producer(mul.inputs[1 - k]);
      if (sc.kind != NodeKind::Scalar || s.g.value(c).type != out) continue;
      const ScalarKind kind = sc.scalar.kind();
      if (kind != ScalarKind::Int && kind != ScalarKind::Float) continue;
      n.def = &fused::def<fused::MatmulScaleAdd>();
      n.ew_id = -1;
      n.attrs = ops::attrs_to(fused::MatmulScaleAdd::Attrs{.scale = sc.scalar.to<double>()});
      n.inputs = {c, mm.inputs[0], mm.inputs[1]};
      return true;
    }
  }
  return false;
}

// sub(d, mul(t, matmul_scale_add(c, a, b))) -> matmul_scale_add(c, d, a, b, t)
// in the sub's place, the sum its first output and the sub's result its
// second (t a 0-d float32 value, the mul read by the sub alone, the sum read
// elsewhere only after the sub): d's tiles are taken while the sum's are in
// cache (a Momentum step's parameter update with its learning rate, in place
// when assigned to d). The sub's place, since an optimizer's learning rate is
// a capture first read after the gradients are made; an update of the sum
// traced before the sub (Assign) moves after it (fuse_activations' order).
bool fuse_matmul_scale_sub(Node& n, FusionSite& s) {
  if (!is_single(n, ops::def_of<ops::Sub>()) || n.inputs.size() != 2 || n.attrs.has("split_op"))
    return false;
  const ValueId d = n.inputs[0], mv = n.inputs[1];
  const ir::Value sub_out = s.g.value(n.outputs[0]);
  const NodeId mul_id = s.g.value(mv).node;
  const Node& mul = s.g.node(mul_id);
  if (!is_single(mul, ops::def_of<ops::Mul>()) || mul.inputs.size() != 2 || !s.only_reader(mv) ||
      mul.attrs.has("split_op") || mul.recompute_region != n.recompute_region ||
      mul.recomputed != n.recomputed || s.g.value(mv).type != sub_out.type ||
      s.g.value(d).type != sub_out.type)
    return false;
  const ops::TensorType scalar{DType::Float32, Shape{}};
  for (std::size_t k = 0; k < 2; ++k) {
    const ValueId sum = mul.inputs[k], t = mul.inputs[1 - k];
    const ir::Value cv = s.g.value(sum);
    const Node& q = s.g.node(cv.node);
    if (s.g.producer(t).kind == NodeKind::Scalar || s.g.value(t).type != scalar ||
        !is_single(q, fused::def<fused::MatmulScaleAdd>()) || q.inputs.size() != 3 ||
        cv.type != sub_out.type || q.recompute_region != n.recompute_region ||
        q.recomputed != n.recomputed)
      continue;
    bool later = true;  // the sum's other readers run after the sub (updates run last)
    for (NodeId r : s.consumers[sum])
      later &=
          r == mul_id || r.index() > sub_out.node.index() || s.g.node(r).kind == NodeKind::Assign;
    if (!later) continue;
    const ValueId first = s.g.next_value();
    s.g.values.push_back(ir::Value{cv.type, sub_out.node, 0, false});
    s.repl.resize(s.g.values.size());  // the site's tables cover the new value
    s.is_output.resize(s.g.values.size(), false);
    s.consumers.resize(s.g.values.size());
    s.g.value(n.outputs[0]).index = 1;
    n.def = &fused::def<fused::MatmulScaleAdd>();
    n.ew_id = -1;
    n.attrs = q.attrs;
    n.inputs = {q.inputs[0], d, q.inputs[1], q.inputs[2], t};
    n.outputs = {first, n.outputs[0]};
    s.repl[sum] = first;
    return true;
  }
  return false;
}

// relu(conv2d(...)) -> conv2d_fused{relu}(...): each output tile relu'd while
// in cache.
bool fuse_conv_relu(Node& n, FusionSite& s) {
  if (!is_single(n, ops::def_of<ops::Relu>()) || n.inputs.size() != 1) return false;
  const ValueId cv = n.inputs[0];
  const Node& c = s.g.producer(cv);
  if (!is_single(c, ops::def_of<ops::Conv2d>()) || !s.only_reader(cv) ||
      s.g.value(cv).type != s.g.value(n.outputs[0]).type ||
      !fusable_dtype(s.g.value(cv).type.dtype))
    return false;
  fused::Conv2dFused::Attrs a;
  static_cast<Conv2dOptions&>(a) = attrs_of<ops::Conv2d>(c);
  a.relu = true;
  n.def = &fused::def<fused::Conv2dFused>();
  n.ew_id = -1;
  n.attrs = ops::attrs_to(a);
  n.inputs = c.inputs;
  return true;
}

// max_pool2d(conv(...), 2) -> the second output of conv2d_fused{max_pool2x2}:
// the planes pooled right after they are written. Readers of the pool's value
// read that output instead, and the pool becomes dead.
bool fuse_conv_pool(Node& n, FusionSite& s) {
  if (!is_single(n, ops::def_of<ops::MaxPool2d>()) || n.inputs.size() != 1 ||
      !pool_is_2x2(attrs_of<ops::MaxPool2d>(n)))
    return false;
  const ValueId cv = n.inputs[0];
  fused::Conv2dFused::Attrs a;
  const ops::TensorType& ct = s.g.value(cv).type;
  if (!conv_attrs_at(s.g, cv, a) || a.max_pool2x2 || !fusable_dtype(ct.dtype) ||
      ct.shape.rank() != 4 || ct.shape[2] < 2 || ct.shape[3] < 2)
    return false;
  const NodeId ci = s.g.value(cv).node;
  Node& c = s.g.node(ci);
  const ValueId nv = s.g.next_value();
  s.g.values.push_back(ir::Value{s.g.value(n.outputs[0]).type, ci, 1, false});
  c.outputs.push_back(nv);
  a.max_pool2x2 = true;
  c.def = &fused::def<fused::Conv2dFused>();
  c.attrs = ops::attrs_to(a);
  s.repl.resize(s.g.values.size());
  s.repl[n.outputs[0]] = nv;
  return true;
}

// max_pool2d_grad[_relu](conv2d_fused{max_pool2x2}'s output, gy) ->
// max_pool2x2_grad_index(index, gy), index the third output of
// conv2d_fused{max_pool2x2, max_pool2x2_index}: the tap each window chose,
// noted by the forward (float32, float64), so the backward does not read the
// conv output back (a quarter byte per output element instead of 4 or 8).
bool fuse_pool_grad_index(Node& n, FusionSite& s) {
  const bool relu = is_single(n, fused::def<fused::MaxPool2dGradRelu>());
  if ((!relu && !is_single(n, ops::def_of<ops::MaxPool2dGrad>())) || n.inputs.size() != 2 ||
      !pool_is_2x2(attrs_of<ops::MaxPool2dGrad>(n)))
    return false;
  const ir::Value x = s.g.value(n.inputs[0]);  // a copy: values grow below
  Node& c = s.g.node(x.node);
  if (c.kind != NodeKind::Op || c.def != &fused::def<fused::Conv2dFused>() || x.index != 0 ||
      dump_enabled(fused::Conv2dFused::name) ||
      (x.type.dtype != DType::Float32 && x.type.dtype != DType::Float64))
    return false;
  auto a = attrs_of<fused::Conv2dFused>(c);
  if (!a.max_pool2x2) return false;
  if (!a.max_pool2x2_index) {
    // conv2d_fused's pooled output (its second) has the index's shape
    const ops::TensorType pooled = s.g.value(c.outputs[1]).type;
    c.outputs.push_back(s.g.next_value());
    s.g.values.push_back(ir::Value{{DType::UInt8, pooled.shape}, x.node, 2, false});
    a.max_pool2x2_index = true;
    c.attrs = ops::attrs_to(a);
  }
  const Shape& xs = x.type.shape;
  n.def = &fused::def<fused::MaxPool2x2GradIndex>();
  n.ew_id = -1;
  n.attrs = ops::attrs_to(fused::MaxPool2x2GradIndex::Attrs{{xs[2], xs[3]}, relu});
  n.inputs = {c.outputs[2], n.inputs[1]};
  return true;
}

constexpr FusionRule kFusionRules[] = {
    {"relu_grad(max_pool2d_grad(relu(y), gy), y)", fuse_pool_grad_relu},
    {"relu(conv2d(x, w))", fuse_conv_relu},
    {"add(matmul(a, b), bias)", fuse_matmul_bias},
    {"relu(matmul_bias(a, b, bias))", fuse_matmul_bias_relu},
    {"add(mul(c, s), matmul(a, b))", fuse_matmul_scale_add},
    {"sub(d, mul(t, matmul_scale_add(c, a, b)))", fuse_matmul_scale_sub},
    {"max_pool2d(conv2d(x, w), 2)", fuse_conv_pool},
    {"max_pool2d_grad(conv2d_fused{max_pool2x2}(x, w), gy)", fuse_pool_grad_index},
};

}  // namespace

void fuse_activations(Graph& g) {
  for (const FusionRule& rule : kFusionRules) {
    FusionSite s{g, consumers_of(g), outputs_of(g), no_replacements(g)};
    bool changed = false;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) changed |= rule.rewrite(g.nodes[i], s);
    if (!changed) continue;
    if (std::any_of(s.repl.begin(), s.repl.end(), [](ValueId v) { return v.valid(); }))
      g = rebuild(g, stable_order(g, s.repl), s.repl);
    eliminate_dead_code(g);
  }
}

void fuse_elementwise(Graph& g) {
  const auto consumers = consumers_of(g);
  const IdTable<ValueId, bool> is_output = outputs_of(g);
  // region[i]: the root of the region node i belongs to (kNoNode: none).
  IdTable<NodeId, NodeId> region(g.nodes.size());
  IdTable<NodeId, std::vector<NodeId>> members(g.nodes.size());
  // A cast (fusable_cast) takes in only producers whose registers hold their
  // values exactly (float32, float64 values); a cast that does not widen
  // exactly is only a root (its store rounds).
  auto exact_reg = [&](ValueId v) {
    const DType t = g.value(v).type.dtype;
    return t == DType::Float32 || t == DType::Float64;
  };
  auto narrowing = [&](const Node& n) {
    return fusable_cast(g, n) &&
           !widens(g.value(n.inputs[0]).type.dtype, g.value(n.outputs[0]).type.dtype);
  };
  for (NodeId id : identity_order(g)) {
    const Node& n = g.node(id);
    const bool cast = fusable_cast(g, n);
    if (!fusable(n) && !cast) continue;
    region[id] = id;
    std::vector<NodeId> m;
    for (ValueId v : n.inputs) {
      const NodeId p = g.value(v).node;
      const Node& pn = g.node(p);
      if ((!fusable(pn) && !fusable_cast(g, pn)) || region[p] != p || narrowing(pn)) continue;
      if (cast && !exact_reg(v)) continue;
      if (consumers[v].size() != 1 || is_output[v]) continue;
      // Absorb the producer's region (a tree rooted at p) into this one.
      for (NodeId q : members[p]) region[q] = id;
      m.insert(m.end(), members[p].begin(), members[p].end());
      members[p].clear();
    }
    m.push_back(id);
    std::sort(m.begin(), m.end());
    members[id] = std::move(m);
  }
  const std::vector<NodeId> all = identity_order(g);
  auto is_root = [&](NodeId id) { return region[id] == id && members[id].size() > 1; };
  if (std::none_of(all.begin(), all.end(), is_root)) return;
  // Replace each multi-op region's root by a Fused node; members become dead.
  for (NodeId id : all) {
    if (!is_root(id)) continue;
    std::vector<ValueId> leaves;
    auto fused = build_region(g, members[id], leaves);
    Node& n = g.node(id);
    n.kind = NodeKind::Fused;
    n.fused = std::move(fused);
    n.inputs = leaves;
    n.def = nullptr;
    n.ew_id = -1;
    n.attrs = {};
  }
  // Members other than roots are now unread: but they precede their roots and
  // are still valid nodes; dead-code elimination drops them.
  eliminate_dead_code(g);
}

void order_nodes(Graph& g, ExecOrder exec_order) {
  MS_CHECK(exec_order == ExecOrder::Bfs || exec_order == ExecOrder::Dfs, ValueError,
           "jit: exec_order must be ms::ExecOrder::Bfs or ms::ExecOrder::Dfs, got the value ",
           static_cast<int>(exec_order));
  const std::size_t n = g.nodes.size();
  const std::vector<NodeId> all = identity_order(g);
  std::vector<NodeId> order;
  IdTable<NodeId, bool> placed(n, false);
  // Leaves (inputs, captures, constants, scalars) first, in their order.
  for (NodeId id : all)
    if (g.node(id).inputs.empty() && g.node(id).kind != NodeKind::Assign) {
      order.push_back(id);
      placed[id] = true;
    }
  std::vector<NodeId> assigns;
  for (NodeId id : all)
    if (g.node(id).kind == NodeKind::Assign) assigns.push_back(id);
  if (exec_order == ExecOrder::Bfs) {
    // Kahn's algorithm with a FIFO queue: level by level.
    const auto consumers = consumers_of(g);
    IdTable<NodeId, int> pending(n, 0);
    std::deque<NodeId> ready;
    for (NodeId id : all) {
      if (placed[id] || g.node(id).kind == NodeKind::Assign) continue;
      for (ValueId v : g.node(id).inputs) pending[id] += !placed[g.value(v).node];
      if (pending[id] == 0) ready.push_back(id);
    }
    auto release = [&](NodeId id) {
      for (ValueId v : g.node(id).outputs)
        for (NodeId c : consumers[v])
          if (g.node(c).kind != NodeKind::Assign && --pending[c] == 0) ready.push_back(c);
    };
    while (!ready.empty()) {
      const NodeId id = ready.front();
      ready.pop_front();
      order.push_back(id);
      placed[id] = true;
      release(id);
    }
  } else {
    // Depth first from each output (then each update), children before parents.
    std::function<void(NodeId)> visit = [&](NodeId id) {
      if (placed[id]) return;
      placed[id] = true;
      for (ValueId v : g.node(id).inputs) visit(g.value(v).node);
      order.push_back(id);
    };
    for (ValueId v : g.outputs) visit(g.value(v).node);
    for (NodeId a : assigns)
      for (ValueId v : g.node(a).inputs) visit(g.value(v).node);
    for (NodeId id : all)
      if (g.node(id).kind != NodeKind::Assign) visit(id);
  }
  // Updates last, in trace order: every read of a parameter's old value precedes them.
  order.insert(order.end(), assigns.begin(), assigns.end());
  MS_ASSERT(order.size() == n);
  g = rebuild(g, order, no_replacements(g));
}

void optimize(Graph& g, const CompileOptions& o) {
  MS_CHECK(o.jit_level == JitLevel::O0 || o.jit_level == JitLevel::O1, ValueError,
           "jit: jit_level must be ms::JitLevel::O0 or ms::JitLevel::O1, got the value ",
           static_cast<int>(o.jit_level));
  check(g, o, "trace");
  eliminate_dead_code(g);
  check(g, o, "dead-code elimination");
  if (o.jit_level == JitLevel::O1) {
    eliminate_common_subexpressions(g);
    check(g, o, "common-subexpression elimination");
    simplify(g);
    check(g, o, "algebraic simplification");
    fold_transposed_matmuls(g);
    check(g, o, "transposed matmul folding");
    fold_constants(g);
    check(g, o, "constant folding");
    eliminate_common_subexpressions(g);
    check(g, o, "common-subexpression elimination");
    fuse_activations(g);
    check(g, o, "activation fusion");
    fuse_elementwise(g);
    check(g, o, "elementwise fusion");
  }
  order_nodes(g, o.exec_order);
  check(g, o, "execution order");
}

}  // namespace ms::compiler

namespace ms {

namespace {
bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}
}  // namespace

JitLevel parse_jit_level(std::string_view text) {
  for (JitLevel l : {JitLevel::O0, JitLevel::O1})
    if (equals_ignoring_case(text, to_string(l))) return l;
  ::ms::detail::raise<ValueError>("parse_jit_level: expected \"O0\" or \"O1\", got \"", text, "\"");
}

ExecOrder parse_exec_order(std::string_view text) {
  for (ExecOrder o : {ExecOrder::Bfs, ExecOrder::Dfs})
    if (equals_ignoring_case(text, to_string(o))) return o;
  ::ms::detail::raise<ValueError>("parse_exec_order: expected \"bfs\" or \"dfs\", got \"", text,
                                  "\"");
}

std::string_view to_string(JitLevel level) { return level == JitLevel::O0 ? "O0" : "O1"; }
std::string_view to_string(ExecOrder order) { return order == ExecOrder::Dfs ? "dfs" : "bfs"; }
std::ostream& operator<<(std::ostream& os, JitLevel level) { return os << to_string(level); }
std::ostream& operator<<(std::ostream& os, ExecOrder order) { return os << to_string(order); }

}  // namespace ms
