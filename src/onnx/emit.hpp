// src/onnx/emit.hpp — building an ONNX graph from ms's IR (private to libms_onnx).
//
// An Emitter holds the ONNX graph being built and the ONNX name of every ms
// value; the op rules (op_rules.cpp) turn one ms op node into ONNX nodes
// through a NodeCtx.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/ir/graph.hpp"

namespace ms::onnx::detail {

/// The ONNX element type of `t`; ValueError naming `what` for int4.
int onnx_dtype(DType t, std::string_view what);

/// Fills `proto` with the contents of concrete tensor `t` (raw little-endian data).
void fill_tensor(::onnx::TensorProto& proto, const Tensor& t, const std::string& name);

/// The ONNX graph being built and the names of ms's values in it.
struct Emitter {
  /// An emitter writing into `graph` the nodes of `g` at `opset`.
  Emitter(::onnx::GraphProto& graph_, const ir::Graph& g_, int opset_)
      : graph(graph_), g(g_), opset(opset_), names(g_.values.size()) {}
  /// The graph the nodes go to.
  ::onnx::GraphProto& graph;
  /// The ms graph being exported.
  const ir::Graph& g;
  /// The opset of the default domain.
  int opset = 17;
  /// ONNX name per ms value (empty: a weak scalar, materialized per use).
  std::vector<std::string> names;
  /// The ms op being mapped: ONNX node names start with it (`/conv2d/Conv_3`),
  /// so that ONNX's messages name the ms op.
  std::string scope;

  /// A new value name from `hint`.
  std::string fresh(std::string_view hint);
  /// Appends a node `op` reading `in`, writing `out`.
  ::onnx::NodeProto& add(std::string_view op, std::vector<std::string> in,
                         std::vector<std::string> out);
  /// As add with one new output named after `op`; returns its name.
  std::string add1(std::string_view op, std::vector<std::string> in);
  /// A 1-D int64 constant (an initializer).
  std::string ints(const std::vector<std::int64_t>& v);
  /// A 0-d constant of dtype `t` holding `v`.
  std::string scalar(const Scalar& v, DType t);
  /// `x` (of dtype `from`) converted to `to` (x itself when they match).
  std::string cast(const std::string& x, DType from, DType to);
  /// Per symbolic dim: the graph input and the axis its size is read from.
  std::vector<std::pair<std::string, std::int64_t>> sym_sources;
  /// The size of symbolic dim `k` at run time, Gather(Shape(input), axis):
  /// 1-D [1], or 0-d when `scalar` (emitted once per graph).
  std::string sym_dim(int k, bool scalar);
  /// A Reshape or Expand target: dims >= -1 as given (an initializer); a dim
  /// -2 - k is symbolic dim k's size at run time (then a Concat of the dims).
  std::string target(const std::vector<std::int64_t>& dims);

 private:
  int counter_ = 0;
  std::map<std::string, std::string> consts_;  ///< constant's (or sym_dim's) key -> its name
};

/// One ms op node being mapped.
struct NodeCtx {
  /// The emitter.
  Emitter& e;
  /// The node.
  const ir::Node& node;
  /// The ONNX names of the node's outputs.
  std::vector<std::string> out;
  /// A reshape or broadcast target made size-free by the dynamic-shape
  /// analysis (0: copy the input's dim, -1: inferred, -2 - k: symbolic dim
  /// k, see Emitter::target), when it has one.
  std::optional<std::vector<std::int64_t>> target;

  /// The number of inputs.
  std::size_t arity() const { return node.inputs.size(); }
  /// The type of input i.
  const ops::TensorType& in_type(std::size_t i) const;
  /// The type of output i.
  const ops::TensorType& out_type(std::size_t i = 0) const;
  /// Whether input i is a weak C++ number.
  bool weak(std::size_t i) const;
  /// Input i as ONNX dtype `t` (a weak number becomes a constant of `t`).
  std::string in(std::size_t i, DType t);
  /// Input i as it is.
  std::string in(std::size_t i);
  /// The operands' common dtype (weak numbers follow the tensors).
  DType common_dtype() const;
};

/// Writes the ONNX nodes of one ms op node.
using EmitFn = void (*)(NodeCtx&);

/// One row of the mapping table.
struct OpRule {
  std::string_view op;    ///< the op-table name
  std::string_view onnx;  ///< what it becomes, for docs/onnx_ops.md
  std::string_view note;  ///< opset differences, limits
  EmitFn emit;            ///< the mapping
};

/// An op of ms's table that does not export, and why.
struct OpGap {
  std::string_view op;      ///< the op-table name
  std::string_view reason;  ///< why
};

/// Layer normalization written out as ops, `(x - mean) * rsqrt(var + eps) * scale + bias`
/// over trailing axes: opset 17's LayerNormalization (layer_norm.cpp).
struct LayerNormMatch {
  ir::NodeId root;  ///< the final Add
  ir::ValueId x;    ///< the normalized input
  /// The scale and the bias (shaped as the normalized dims, x's dtype).
  ir::ValueId scale, bias;
  std::int64_t axis = -1;  ///< the first normalized axis
  double epsilon = 0;      ///< the number added to the variance
  /// The pattern's other nodes (none of their values is used outside it).
  std::vector<ir::NodeId> inner;
};
/// Every LayerNorm pattern of `g`.
std::vector<LayerNormMatch> find_layer_norms(const ir::Graph& g);

/// The mapping table (op_rules.cpp).
std::span<const OpRule> op_rules();
/// The ops that do not export, with their reasons.
std::span<const OpGap> op_gaps();
/// The rule of `op`, or null.
const OpRule* find_rule(std::string_view op);
/// The reason `op` does not export ("no ONNX mapping" when op_gaps() does not name it).
std::string_view gap_reason(std::string_view op);

}  // namespace ms::onnx::detail
