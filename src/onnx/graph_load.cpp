// GraphCell's loader (ms/onnx/graph_cell.hpp): ModelProto bytes -> Program.
// Checks, in order: the protobuf parses; opsets and domains; every node's op
// is mapped; initializer sizes and data (external data read and checked by
// external_data.cpp); every value is defined once; no cycle; then ONNX's
// checker and strict shape inference.
// Needs only ms's core (Tensor, Storage, Shape), so the fuzz target links it
// without the ops.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <unordered_map>

#include "external_data.hpp"
#include "graph_program.hpp"
#include "ms/core/error.hpp"

namespace ms::onnx::detail {
namespace {

using P = ::onnx::TensorProto;
constexpr std::string_view kApi = "GraphCell";

// The ops of the default domain the interpreter maps (graph_run.cpp implements each).
constexpr std::string_view kOps[] = {"Abs",
                                     "Add",
                                     "And",
                                     "ArgMax",
                                     "ArgMin",
                                     "AveragePool",
                                     "BatchNormalization",
                                     "Cast",
                                     "Ceil",
                                     "Concat",
                                     "Constant",
                                     "ConstantOfShape",
                                     "Conv",
                                     "Cos",
                                     "CumSum",
                                     "Div",
                                     "Equal",
                                     "Erf",
                                     "Exp",
                                     "Expand",
                                     "Flatten",
                                     "Floor",
                                     "Gather",
                                     "GatherElements",
                                     "Gemm",
                                     "Greater",
                                     "GreaterOrEqual",
                                     "Identity",
                                     "LayerNormalization",
                                     "Less",
                                     "LessOrEqual",
                                     "Log",
                                     "LogSoftmax",
                                     "MatMul",
                                     "Max",
                                     "MaxPool",
                                     "Min",
                                     "Mul",
                                     "Neg",
                                     "Not",
                                     "Or",
                                     "Pow",
                                     "Range",
                                     "Reciprocal",
                                     "ReduceMax",
                                     "ReduceMean",
                                     "ReduceMin",
                                     "ReduceProd",
                                     "ReduceSum",
                                     "Relu",
                                     "Reshape",
                                     "ScatterElements",
                                     "Shape",
                                     "Sigmoid",
                                     "Sign",
                                     "Sin",
                                     "Slice",
                                     "Softmax",
                                     "Softplus",
                                     "Split",
                                     "Sqrt",
                                     "Squeeze",
                                     "Sub",
                                     "Tanh",
                                     "Transpose",
                                     "Trilu",
                                     "Unsqueeze",
                                     "Where"};

/// The node's name, or `#<index>` when it has none.
std::string node_name(const ::onnx::NodeProto& n, int index) {
  if (!n.name().empty()) return n.name();
  std::string s = std::to_string(index);
  s.insert(s.begin(), '#');
  return s;
}

std::string node_label(const ::onnx::NodeProto& n, int index) {
  std::string s = "node '";
  s += node_name(n, index);
  s += "' (";
  s += n.op_type();
  s += ')';
  return s;
}

bool default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

/// The default-domain opset; ValueError for one out of range or a node of another domain.
int check_opsets(const ::onnx::ModelProto& m, const std::string& origin) {
  int opset = -1;
  for (const auto& o : m.opset_import())
    if (default_domain(o.domain())) opset = static_cast<int>(o.version());
  MS_CHECK(opset >= 0, ValueError, kApi, ": ", origin, " imports no opset of the default domain");
  MS_CHECK(opset >= kMinImportOpset && opset <= kMaxImportOpset, ValueError, kApi, ": ", origin,
           " uses opset ", opset, " of the default domain; GraphCell loads opsets ",
           kMinImportOpset, " to ", kMaxImportOpset);
  const auto& nodes = m.graph().node();
  for (int i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    MS_CHECK(default_domain(n.domain()), ValueError, kApi, ": ", node_label(n, i),
             " is of domain '", n.domain(), "'; GraphCell maps the default ONNX domain only");
    MS_CHECK(op_supported(n.op_type()), ValueError, kApi, ": ", node_label(n, i), ": op '",
             n.op_type(), "' has no ms mapping (docs/onnx_import.md lists the supported ops)");
  }
  return opset;
}

/// The product of `dims`; ValueError naming `what` for a negative dim or more than 2^40 elements.
template <class Dims>
std::int64_t checked_numel(const Dims& dims, const std::string& what) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    MS_CHECK(d >= 0, ValueError, kApi, ": ", what, " has a negative dim ", d);
    MS_CHECK(d == 0 || n <= kMaxElements / d, ValueError, kApi, ": ", what,
             " has more than 2^40 elements (its dims overflow)");
    n *= d;
  }
  return n;
}

/// Copies `count` elements of a typed repeated field into `dst` as `T`.
template <class T, class Field>
void copy_field(const Field& f, std::byte* dst, std::int64_t count, const std::string& what,
                std::int64_t numel) {
  MS_CHECK(count == numel, ValueError, kApi, ": ", what, " holds ", count, " values, its dims say ",
           numel);
  for (std::int64_t i = 0; i < count; ++i) {
    const T v = static_cast<T>(f[static_cast<int>(i)]);
    std::memcpy(dst + i * static_cast<std::int64_t>(sizeof(T)), &v, sizeof(T));
  }
}

void fill_typed(const P& t, Tensor& out, const std::string& what, std::int64_t n) {
  std::byte* d = out.raw_data();
  switch (t.data_type()) {
    case P::FLOAT: return copy_field<float>(t.float_data(), d, t.float_data_size(), what, n);
    case P::DOUBLE: return copy_field<double>(t.double_data(), d, t.double_data_size(), what, n);
    case P::INT64: return copy_field<std::int64_t>(t.int64_data(), d, t.int64_data_size(), what, n);
    case P::INT32: return copy_field<std::int32_t>(t.int32_data(), d, t.int32_data_size(), what, n);
    case P::INT16: return copy_field<std::int16_t>(t.int32_data(), d, t.int32_data_size(), what, n);
    case P::INT8: return copy_field<std::int8_t>(t.int32_data(), d, t.int32_data_size(), what, n);
    case P::UINT8: return copy_field<std::uint8_t>(t.int32_data(), d, t.int32_data_size(), what, n);
    case P::BOOL: return copy_field<bool>(t.int32_data(), d, t.int32_data_size(), what, n);
    case P::UINT16:
    case P::FLOAT16:
    case P::BFLOAT16:
      return copy_field<std::uint16_t>(t.int32_data(), d, t.int32_data_size(), what, n);
    case P::UINT32:
      return copy_field<std::uint32_t>(t.uint64_data(), d, t.uint64_data_size(), what, n);
    case P::UINT64:
      return copy_field<std::uint64_t>(t.uint64_data(), d, t.uint64_data_size(), what, n);
    default: break;
  }
  ::ms::detail::raise<ValueError>(kApi, ": ", what, " has element type ", t.data_type(),
                                  ", which GraphCell does not load");
}

}  // namespace

DType dtype_from_onnx(int t, const std::string& what) {
  switch (t) {
    case P::BOOL: return DType::Bool;
    case P::INT8: return DType::Int8;
    case P::INT16: return DType::Int16;
    case P::INT32: return DType::Int32;
    case P::INT64: return DType::Int64;
    case P::UINT8: return DType::UInt8;
    case P::UINT16: return DType::UInt16;
    case P::UINT32: return DType::UInt32;
    case P::UINT64: return DType::UInt64;
    case P::FLOAT16: return DType::Float16;
    case P::BFLOAT16: return DType::BFloat16;
    case P::FLOAT: return DType::Float32;
    case P::DOUBLE: return DType::Float64;
    default: break;
  }
  ::ms::detail::raise<ValueError>(kApi, ": ", what, " has ONNX element type ", t,
                                  ", which ms has no dtype for");
}

bool op_supported(const std::string& op) {
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

std::vector<std::string> supported_ops() { return {std::begin(kOps), std::end(kOps)}; }

/// `t` with each byte of a bool tensor other than 0 and 1 stored as 1 (true).
Tensor bool_as_01(Tensor t) {
  if (t.dtype() == DType::Bool) {
    std::byte* b = t.raw_data();
    for (std::int64_t i = 0; i < t.nbytes(); ++i)
      b[i] = b[i] != std::byte{0} ? std::byte{1} : std::byte{0};
  }
  return t;
}

/// The number of values the typed field of `t`'s element type holds.
std::int64_t typed_count(const P& t) {
  switch (t.data_type()) {
    case P::FLOAT: return t.float_data_size();
    case P::DOUBLE: return t.double_data_size();
    case P::INT64: return t.int64_data_size();
    case P::UINT32:
    case P::UINT64: return t.uint64_data_size();
    default: return t.int32_data_size();
  }
}

/// An ms tensor holding TensorProto `t` (raw or typed data, or external data
/// read by `ext`); `what` names it in errors. The data's size is checked before
/// the tensor is allocated.
Tensor tensor_from_proto(const P& t, const std::string& what, ExternalReader& ext) {
  const bool external = ExternalReader::is_external(t, what);
  const DType dt = dtype_from_onnx(t.data_type(), what);
  const std::int64_t n = checked_numel(t.dims(), what);
  if (external) return bool_as_01(ext.read(t, dt, n, what));
  const auto want = static_cast<std::size_t>(n * dtype_itemsize(dt));
  if (t.has_raw_data()) {
    MS_CHECK(t.raw_data().size() == want, ValueError, kApi, ": ", what, " has ",
             t.raw_data().size(), " bytes of raw data, its dims and type need ", want);
  } else {
    MS_CHECK(typed_count(t) == n, ValueError, kApi, ": ", what, " holds ", typed_count(t),
             " values, its dims say ", n);
  }
  Tensor out = empty(Shape(std::vector<std::int64_t>(t.dims().begin(), t.dims().end())), dt);
  if (!t.has_raw_data()) {
    fill_typed(t, out, what, n);
  } else if (want > 0) {
    std::memcpy(out.raw_data(), t.raw_data().data(), want);
  }
  return bool_as_01(std::move(out));
}

namespace {

Attr decode_attr(const ::onnx::AttributeProto& a, const std::string& where, ExternalReader& ext) {
  using A = ::onnx::AttributeProto;
  Attr r;
  switch (a.type()) {
    case A::INT: r.i = a.i(); break;
    case A::FLOAT: r.f = a.f(); break;
    case A::STRING: r.s = a.s(); break;
    case A::INTS: r.ints.assign(a.ints().begin(), a.ints().end()); break;
    case A::FLOATS: r.floats.assign(a.floats().begin(), a.floats().end()); break;
    case A::TENSOR:
      r.t = tensor_from_proto(a.t(), where + " attribute '" + a.name() + "'", ext);
      break;
    default:
      ::ms::detail::raise<ValueError>(kApi, ": ", where, " attribute '", a.name(), "' has type ",
                                      static_cast<int>(a.type()), ", which GraphCell does not map");
  }
  return r;
}

/// Window sizes, strides and dilations are at least 1, and so is a group count (ONNX's shape
/// inference divides by strides before it checks them: a 0 would end the process).
void check_positive_attr(const ::onnx::AttributeProto& a, const std::string& where) {
  const std::string& name = a.name();
  if (name == "group") {
    MS_CHECK(a.i() >= 1, ValueError, kApi, ": ", where,
             ": attribute group must be at least 1, got ", a.i());
    return;
  }
  if (name != "strides" && name != "dilations" && name != "kernel_shape") return;
  for (std::int64_t v : a.ints())
    MS_CHECK(v >= 1, ValueError, kApi, ": ", where, ": every value of attribute ", name,
             " must be at least 1, got ", v);
}

struct Builder {
  Program& p;
  ExternalReader& ext;
  std::unordered_map<std::string, int> ids;

  int define(const std::string& name, const std::string& by) {
    MS_CHECK(!name.empty(), ValueError, kApi, ": ", by, " defines a value with an empty name");
    MS_CHECK(ids.emplace(name, static_cast<int>(p.values.size())).second, ValueError, kApi, ": ",
             by, " defines value '", name, "', which is already defined");
    p.values.push_back(name);
    return static_cast<int>(p.values.size() - 1);
  }
  int use(const std::string& name, const std::string& by) const {
    auto it = ids.find(name);
    MS_CHECK(it != ids.end(), ValueError, kApi, ": ", by, " reads '", name,
             "', which is neither a graph input, an initializer nor a node's output");
    return it->second;
  }
};

void add_input(Program& p, Builder& b, const ::onnx::ValueInfoProto& vi) {
  const std::string what = "graph input '" + vi.name() + "'";
  MS_CHECK(vi.type().has_tensor_type(), ValueError, kApi, ": ", what, " is not a tensor");
  const auto& tt = vi.type().tensor_type();
  GInput in{vi.name(), b.define(vi.name(), what), dtype_from_onnx(tt.elem_type(), what), {}, {}};
  MS_CHECK(tt.has_shape(), ValueError, kApi, ": ", what,
           " has no shape; GraphCell needs each input's rank");
  std::vector<std::int64_t> known;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) known.push_back(d.dim_value());
    in.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    in.dim_names.push_back(d.has_dim_param() ? d.dim_param() : std::string());
  }
  // Bounded like an initializer's: ONNX's shape inference multiplies the known dims in int64.
  checked_numel(known, what);
  p.inputs.push_back(std::move(in));
}

/// The nodes' order with every input defined before it is read; ValueError naming a node on a
/// cycle.
std::vector<int> topological_order(const ::onnx::GraphProto& g, const Program& p,
                                   const std::vector<std::vector<int>>& reads,
                                   const std::vector<std::vector<int>>& writes,
                                   const std::vector<int>& producer) {
  const int n = g.node_size();
  std::vector<int> pending(static_cast<std::size_t>(n), 0), order;
  std::vector<std::vector<int>> users(p.values.size());
  for (int i = 0; i < n; ++i)
    for (int v : reads[static_cast<std::size_t>(i)])
      if (v >= 0 && producer[static_cast<std::size_t>(v)] >= 0) {
        ++pending[static_cast<std::size_t>(i)];
        users[static_cast<std::size_t>(v)].push_back(i);
      }
  for (int i = 0; i < n; ++i)
    if (pending[static_cast<std::size_t>(i)] == 0) order.push_back(i);
  for (std::size_t k = 0; k < order.size(); ++k)
    for (int v : writes[static_cast<std::size_t>(order[k])])
      if (v >= 0)
        for (int u : users[static_cast<std::size_t>(v)])
          if (--pending[static_cast<std::size_t>(u)] == 0) order.push_back(u);
  if (static_cast<int>(order.size()) < n)
    for (int i = 0; i < n; ++i)
      MS_CHECK(pending[static_cast<std::size_t>(i)] == 0, ValueError, kApi, ": ",
               node_label(g.node(i), i), " is on a cycle: one of its inputs depends on its output");
  return order;
}

void add_nodes(Program& p, Builder& b, const ::onnx::GraphProto& g) {
  // Outputs first (a node may read a value defined by a later node), then inputs.
  std::vector<int> producer;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& o : g.node(i).output())
      if (!o.empty()) b.define(o, node_label(g.node(i), i));
  producer.assign(p.values.size(), -1);
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& o : g.node(i).output())
      if (!o.empty()) producer[static_cast<std::size_t>(b.ids.at(o))] = i;
  std::vector<std::vector<int>> reads, writes;
  for (int i = 0; i < g.node_size(); ++i) {
    reads.emplace_back();
    writes.emplace_back();
    for (const auto& in : g.node(i).input())
      reads.back().push_back(in.empty() ? -1 : b.use(in, node_label(g.node(i), i)));
    for (const auto& o : g.node(i).output()) writes.back().push_back(o.empty() ? -1 : b.ids.at(o));
  }
  for (int i : topological_order(g, p, reads, writes, producer)) {
    const auto& n = g.node(i);
    GNode node{n.op_type(),
               node_name(n, i),
               reads[static_cast<std::size_t>(i)],
               writes[static_cast<std::size_t>(i)],
               {}};
    for (const auto& a : n.attribute()) {
      check_positive_attr(a, node_label(n, i));
      node.attrs.emplace(a.name(), decode_attr(a, node_label(n, i), b.ext));
    }
    p.nodes.push_back(std::move(node));
  }
}

void onnx_checks(::onnx::ModelProto& m, const std::string& origin) {
  try {
    ::onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    ::ms::detail::raise<ValueError>(kApi, ": ONNX's checker rejects ", origin, ": ", e.what());
  }
  try {
    ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(),
                                         ::onnx::ShapeInferenceOptions(true, 1));
  } catch (const std::exception& e) {
    ::ms::detail::raise<ValueError>(kApi, ": ONNX's shape inference rejects ", origin, ": ",
                                    e.what());
  }
}

}  // namespace

std::shared_ptr<const Program> load_program(std::string_view bytes, const std::string& origin,
                                            const std::string& external_dir) {
  MS_CHECK(bytes.size() <= static_cast<std::size_t>(INT_MAX), ValueError, kApi, ": ", origin,
           " has ", bytes.size(),
           " bytes; protobuf reads at most 2 GiB (keep the weights in external data)");
  ::onnx::ModelProto m;
  MS_CHECK(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())), ValueError, kApi, ": ",
           origin, " is not an ONNX model (the protobuf ModelProto does not parse)");
  auto p = std::make_shared<Program>();
  p->origin = origin;
  p->opset = check_opsets(m, origin);
  const auto& g = m.graph();
  MS_CHECK(g.sparse_initializer_size() == 0, ValueError, kApi, ": ", origin,
           " has sparse initializers, which GraphCell does not load");
  ExternalReader ext(external_dir);
  Builder b{*p, ext, {}};
  for (const auto& t : g.initializer()) {
    const int v = b.define(t.name(), "initializer '" + t.name() + "'");
    p->initializers.emplace_back(t.name(),
                                 tensor_from_proto(t, "initializer '" + t.name() + "'", ext));
    p->init_values.push_back(v);
  }
  for (const auto& vi : g.input())
    if (b.ids.find(vi.name()) == b.ids.end()) add_input(*p, b, vi);
  add_nodes(*p, b, g);
  for (const auto& o : g.output()) p->outputs.push_back(b.use(o.name(), "graph output"));
  MS_CHECK(!p->outputs.empty(), ValueError, kApi, ": ", origin, " has no graph output");
  ext.finish(m);
  onnx_checks(m, origin);
  return p;
}

}  // namespace ms::onnx::detail
