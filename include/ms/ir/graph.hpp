// ms/ir/graph.hpp — the SSA graph that ms::jit compiles and runs.
//
// Stage: ir. A Graph is a list of nodes in a valid execution order; each node
// produces values (SSA: a value is defined once) and reads values of earlier
// nodes. Ops are op-table entries with their attributes; graph inputs are the
// jitted function's tensor arguments; captured tensors (parameters) are inputs
// bound by identity; in-place parameter updates are explicit `Assign`
// side-effect nodes, so that a whole training step is one graph.
//
//   std::cout << ms::ir::to_string(g);
//   // graph(%arg0: f32[2,3]) captures(%cap0: f32[3,4]) {
//   //   %1 = MatMul(%arg0, %cap0) : (f32[2,3], f32[3,4]) -> f32[2,4]
//   //   return %1
//   // }
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/kernels/elementwise.hpp"
#include "ms/ops/op.hpp"

namespace ms::ir {

/// What a graph node is.
enum class NodeKind : std::uint8_t {
  Input,    ///< argument `arg_index` of the function (a tensor)
  Capture,  ///< a concrete tensor made before tracing (a parameter): bound by identity
  Const,    ///< a concrete tensor made while tracing: a constant of the graph
  Scalar,   ///< a weak C++ number operand of elementwise ops (not materialized)
  Op,       ///< an op-table entry applied to inputs with attributes
  Fused,    ///< elementwise ops fused into one program run tile by tile
  Assign,   ///< side effect: writes input 1 into the captured tensor input 0
};

/// The name of `k` as dumps print it.
std::string_view node_kind_name(NodeKind k);

/// A fused elementwise region: the program and the ops it was made of.
struct FusedRegion {
  /// The program, run tile by tile over the region's leaves.
  kernels::EwProgram program;
  std::vector<std::string> ops;  ///< op names in program order, for printing
};

/// One operation of a Graph; the fields a kind does not use keep their defaults.
struct Node {
  /// What the node is; decides which fields below are used.
  NodeKind kind = NodeKind::Op;
  const ops::OpDef* def = nullptr;           ///< Op
  int ew_id = -1;                            ///< Op of an elementwise def: its ElementwiseOps id
  std::vector<int> inputs;                   ///< value ids
  std::vector<int> outputs;                  ///< value ids
  ops::Attrs attrs;                          ///< Op
  Tensor tensor;                             ///< Capture, Const
  ms::Scalar scalar = 0;                     ///< Scalar
  std::shared_ptr<const FusedRegion> fused;  ///< Fused
  int arg_index = -1;                        ///< Input
  std::string name;                          ///< Input, Capture: printed name (without %)
};

/// One SSA value: a tensor produced by one output of one node.
struct Value {
  /// Its dtype and shape.
  ops::TensorType type;
  int node = -1;      ///< producing node
  int index = 0;      ///< output index in that node
  bool weak = false;  ///< a Scalar node's value: a weak number
};

/// An SSA graph. Nodes are stored in execution order.
struct Graph {
  /// The nodes, in execution order.
  std::vector<Node> nodes;
  /// The values, indexed by value id.
  std::vector<Value> values;
  std::vector<int> outputs;  ///< value ids returned by the function, in order
  /// A generalized graph's dims as printed (`s0`, `784*s0`), per value; empty
  /// (or an empty entry) prints the concrete dims. Only the printer reads it.
  std::vector<std::vector<std::string>> symbolic_dims;

  /// Appends `n`, creating one value per entry of `types`; returns the node id.
  int add(Node n, const std::vector<ops::TensorType>& types, bool weak = false);
  /// The value produced by single-output node `node`.
  int value_of(int node) const { return nodes[static_cast<std::size_t>(node)].outputs.at(0); }
  /// The value with id `v`.
  const Value& value(int v) const { return values[static_cast<std::size_t>(v)]; }
  /// The node that produces value `v`.
  const Node& producer(int v) const { return nodes[static_cast<std::size_t>(value(v).node)]; }
  /// Number of nodes of kind `k`.
  std::size_t count(NodeKind k) const;
  /// Number of Op nodes whose op is `name`.
  std::size_t count_op(std::string_view name) const;
};

/// Readable dump in the spirit of MindSpore's IR dump: one node a line,
/// `%3 = MatMul(%x, %w) : (f32[64,784], f32[784,512]) -> f32[64,512]`.
std::string to_string(const Graph& g);

/// The names values get in to_string (`%3`, `%x`, `%fc1.weight`), by value id.
std::vector<std::string> value_names(const Graph& g);

/// Short dtype name used in dumps: f32, f16, bf16, i64, u8, bool, c64, i4.
std::string_view short_dtype_name(DType t);

/// Checks the graph's invariants (SSA, order, arity, types re-inferred from
/// the op table, outputs defined); ms::ValueError naming `stage` and the node
/// otherwise.
void verify(const Graph& g, std::string_view stage = "ir::verify");

/// Output type of elementwise op `ew_id` on operand values (weak scalars
/// included); ms::Error as the eager op would raise.
ops::TensorType infer_elementwise(int ew_id, std::span<const Value> operands,
                                  std::span<const ms::Scalar> scalars);

}  // namespace ms::ir
