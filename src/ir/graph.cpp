#include "ms/ir/graph.hpp"

#include <sstream>

#include "ms/expr/expr.hpp"

namespace ms::ir {

std::string_view node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::Input: return "Input";
    case NodeKind::Capture: return "Capture";
    case NodeKind::Const: return "Const";
    case NodeKind::Scalar: return "Scalar";
    case NodeKind::Op: return "Op";
    case NodeKind::Fused: return "Fused";
    case NodeKind::Assign: return "Assign";
  }
  return "?";
}

NodeId Graph::add(Node n, const std::vector<ops::TensorType>& types, bool weak) {
  const NodeId id = next_node();
  n.outputs.clear();
  for (std::size_t i = 0; i < types.size(); ++i) {
    n.outputs.push_back(next_value());
    values.push_back({types[i], id, static_cast<int>(i), weak});
  }
  nodes.push_back(std::move(n));
  return id;
}

std::size_t Graph::count(NodeKind k) const {
  std::size_t c = 0;
  for (const Node& n : nodes) c += n.kind == k;
  return c;
}

std::size_t Graph::count_op(std::string_view name) const {
  std::size_t c = 0;
  for (const Node& n : nodes) c += n.kind == NodeKind::Op && n.def->name == name;
  return c;
}

std::string_view short_dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int4: return "i4";
    case DType::Int8: return "i8";
    case DType::Int16: return "i16";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::UInt8: return "u8";
    case DType::UInt16: return "u16";
    case DType::UInt32: return "u32";
    case DType::UInt64: return "u64";
    case DType::Float16: return "f16";
    case DType::BFloat16: return "bf16";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
    case DType::Complex64: return "c64";
    case DType::Complex128: return "c128";
  }
  return "?";
}

namespace {

std::string type_str(const ops::TensorType& t) {
  std::string s(short_dtype_name(t.dtype));
  s += '[';
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(t.shape[i]);
  }
  return s + ']';
}

// The printed type of value `v`: symbolic dims when the graph has them.
std::string type_str(const Graph& g, ValueId v) {
  const std::size_t i = v.index();
  if (i >= g.symbolic_dims.size() || g.symbolic_dims[i].empty()) return type_str(g.value(v).type);
  std::string s(short_dtype_name(g.value(v).type.dtype));
  s += '[';
  for (std::size_t k = 0; k < g.symbolic_dims[i].size(); ++k) {
    if (k) s += ',';
    s += g.symbolic_dims[i][k];
  }
  return s + ']';
}

// Names values as they are printed: inputs and captures by name, the others
// by a running number in print order.
struct Namer {
  const Graph& g;
  std::vector<std::string> names;
  explicit Namer(const Graph& graph) : g(graph), names(graph.values.size()) {
    int next = 0;
    for (const Node& n : g.nodes)
      for (ValueId v : n.outputs)
        names[v.index()] =
            ::ms::detail::str_cat('%', n.name.empty() ? std::to_string(next++) : n.name);
  }
  std::string operand(ValueId v) const {
    const Node& p = g.producer(v);
    if (p.kind == NodeKind::Scalar) return p.scalar.to_string();
    return names[v.index()];
  }
};

std::string op_name(const Node& n) {
  switch (n.kind) {
    case NodeKind::Op: return ops::ir_name(*n.def);
    case NodeKind::Fused: {
      std::string s = "Fused[";
      for (std::size_t i = 0; i < n.fused->ops.size(); ++i) {
        if (i) s += ", ";
        s += n.fused->ops[i];
      }
      s += ']';
      return s;
    }
    default: return std::string(node_kind_name(n.kind));
  }
}

}  // namespace

std::vector<std::string> value_names(const Graph& g) { return Namer(g).names; }

std::string to_string(const Graph& g) {
  const Namer nm(g);
  std::ostringstream os;
  auto params = [&](NodeKind k) {
    std::string s;
    for (const Node& n : g.nodes)
      if (n.kind == k) {
        if (!s.empty()) s += ", ";
        s += nm.names[n.outputs[0].index()];
        s += ": ";
        s += type_str(g, n.outputs[0]);
      }
    return s;
  };
  os << "graph(" << params(NodeKind::Input) << ")";
  const std::string caps = params(NodeKind::Capture);
  if (!caps.empty()) os << " captures(" << caps << ")";
  os << " {\n";
  for (const Node& n : g.nodes) {
    if (n.kind == NodeKind::Input || n.kind == NodeKind::Capture || n.kind == NodeKind::Scalar)
      continue;
    os << "  ";
    for (std::size_t i = 0; i < n.outputs.size(); ++i)
      os << (i ? ", " : "") << nm.names[n.outputs[i].index()];
    if (!n.outputs.empty()) os << " = ";
    os << op_name(n) << "(";
    std::string in_types;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      os << (i ? ", " : "") << nm.operand(n.inputs[i]);
      const Value& v = g.value(n.inputs[i]);
      if (i) in_types += ", ";
      if (v.weak) {
        in_types += "weak ";
        in_types += short_dtype_name(v.type.dtype);
      } else {
        in_types += type_str(g, n.inputs[i]);
      }
    }
    os << ")";
    if (n.kind == NodeKind::Op && !n.attrs.items().empty())
      os << " {" << n.attrs.to_string() << "}";
    os << " : (" << in_types << ") -> ";
    if (n.outputs.size() != 1) os << "(";
    for (std::size_t i = 0; i < n.outputs.size(); ++i)
      os << (i ? ", " : "") << type_str(g, n.outputs[i]);
    if (n.outputs.size() != 1) os << ")";
    if (n.recomputed) os << " [recompute]";
    os << "\n";
  }
  os << "  return ";
  for (std::size_t i = 0; i < g.outputs.size(); ++i)
    os << (i ? ", " : "") << nm.operand(g.outputs[i]);
  os << "\n}\n";
  return os.str();
}

ops::TensorType infer_elementwise(int ew_id, std::span<const Value> operands,
                                  std::span<const ms::Scalar> scalars) {
  expr::Lowering L;
  expr::Lowered lo[3];
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Value& v = operands[i];
    if (v.weak) {
      lo[i].is_scalar = true;
      lo[i].value = scalars[i];
      lo[i].dtype = v.type.dtype;
      lo[i].reg_type = v.type.dtype;
      continue;
    }
    lo[i].dtype = v.type.dtype;
    lo[i].reg_type = kernels::ew_register_type(v.type.dtype, kernels::ew_op_info(ew_id).name);
    lo[i].shape = v.type.shape;
    lo[i].reg = L.builder.load(static_cast<int>(i), lo[i].reg_type);
  }
  const expr::Lowered r =
      expr::lower_apply(L, ew_id, std::span<const expr::Lowered>(lo, operands.size()));
  return {r.dtype, r.shape};
}

namespace {

// The checks of ir::verify, node by node.
struct Verifier {
  const Graph& g;
  std::string_view stage;
  std::vector<NodeId> defined_at;  ///< per value: the node that defines it, or kNoNode

  template <class... M>
  [[noreturn]] void fail(std::size_t node, const M&... msg) const {
    ::ms::detail::raise<ValueError>(stage, ": node ", node, " (",
                                    node_kind_name(g.nodes[node].kind), "): ", msg...);
  }

  // Inputs are defined before they are read; outputs name this node and are
  // defined once.
  bool exists(ValueId v) const { return v.valid() && v.index() < g.values.size(); }

  void wiring(std::size_t i) {
    const Node& n = g.nodes[i];
    for (ValueId v : n.inputs) {
      if (!exists(v)) fail(i, "input value ", v, " does not exist");
      if (!defined_at[v.index()].valid()) fail(i, "reads value ", v, " before it is defined");
    }
    for (std::size_t k = 0; k < n.outputs.size(); ++k) {
      const ValueId v = n.outputs[k];
      if (!exists(v)) fail(i, "output value ", v, " does not exist");
      const Value& val = g.value(v);
      if (val.node != NodeId{i} || val.index != static_cast<int>(k))
        fail(i, "output value ", v, " names another producer");
      if (defined_at[v.index()].valid()) fail(i, "value ", v, " is defined twice");
      defined_at[v.index()] = NodeId{i};
    }
  }

  // An op node: its arity, and its output types re-inferred from the op table.
  void op(std::size_t i) const {
    const Node& n = g.nodes[i];
    if (n.def == nullptr) fail(i, "has no op");
    const int k = static_cast<int>(n.inputs.size());
    if (k < n.def->min_inputs || (n.def->max_inputs >= 0 && k > n.def->max_inputs))
      fail(i, n.def->name, " has ", k, " inputs");
    std::vector<ops::TensorType> out;
    if (n.ew_id >= 0) {
      std::vector<Value> vals;
      std::vector<ms::Scalar> sc;
      for (ValueId v : n.inputs) {
        vals.push_back(g.value(v));
        sc.push_back(g.producer(v).scalar);
      }
      out.push_back(infer_elementwise(n.ew_id, vals, sc));
    } else {
      std::vector<ops::TensorType> in;
      for (ValueId v : n.inputs) {
        if (g.value(v).weak) fail(i, n.def->name, " reads a weak scalar");
        in.push_back(g.value(v).type);
      }
      out = n.def->infer(in, n.attrs);
    }
    if (out.size() != n.outputs.size()) fail(i, n.def->name, " has the wrong output count");
    for (std::size_t k2 = 0; k2 < out.size(); ++k2)
      if (!(out[k2] == g.value(n.outputs[k2]).type))
        fail(i, n.def->name, " output ", k2, " type ", type_str(g.value(n.outputs[k2]).type),
             " differs from the inferred ", type_str(out[k2]));
  }

  // The checks of the node's kind.
  void kind(std::size_t i) const {
    const Node& n = g.nodes[i];
    auto one_output = [&] {
      if (n.outputs.size() != 1) fail(i, "has ", n.outputs.size(), " outputs, expected 1");
    };
    switch (n.kind) {
      case NodeKind::Input:
        one_output();
        if (!n.inputs.empty() || n.arg_index < 0) fail(i, "bad input node");
        break;
      case NodeKind::Capture:
      case NodeKind::Const: {
        one_output();
        if (!n.tensor.defined() || n.tensor.is_symbolic()) fail(i, "holds no concrete tensor");
        const ops::TensorType& t = g.value(n.outputs[0]).type;
        if (t.dtype != n.tensor.dtype() || t.shape != n.tensor.shape())
          fail(i, "value type differs from the bound tensor");
        break;
      }
      case NodeKind::Scalar:
        one_output();
        if (!g.value(n.outputs[0]).weak) fail(i, "scalar value not marked weak");
        break;
      case NodeKind::Op: op(i); break;
      case NodeKind::Fused:
        one_output();
        if (!n.fused) fail(i, "has no program");
        for (ValueId v : n.inputs)
          if (g.value(v).weak) fail(i, "fused region reads a weak scalar as an input");
        if (n.fused->program.dtype != g.value(n.outputs[0]).type.dtype)
          fail(i, "program dtype differs from its value");
        break;
      case NodeKind::Assign:
        if (n.inputs.size() != 2 || !n.outputs.empty()) fail(i, "needs 2 inputs and no output");
        if (g.producer(n.inputs[0]).kind != NodeKind::Capture)
          fail(i, "writes into a non-captured value");
        if (!(g.value(n.inputs[0]).type == g.value(n.inputs[1]).type))
          fail(i, "value type differs from the destination");
        break;
    }
  }
};

}  // namespace

void verify(const Graph& g, std::string_view stage) {
  Verifier check{g, stage, std::vector<NodeId>(g.values.size())};
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    check.wiring(i);
    check.kind(i);
  }
  for (ValueId v : g.outputs)
    if (!check.exists(v) || !check.defined_at[v.index()].valid() || g.value(v).weak)
      ::ms::detail::raise<ValueError>(stage, ": graph output ", v,
                                      " is not a defined tensor value");
}

}  // namespace ms::ir
