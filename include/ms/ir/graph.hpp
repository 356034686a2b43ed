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

#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"
#include "ms/kernels/elementwise.hpp"
#include "ms/ops/op.hpp"

namespace ms::ir {

/// A typed index into one of a Graph's tables: `ValueId` into `values`,
/// `NodeId` into `nodes`. Made explicitly from an index, read back with
/// `index()`, so a node id cannot be passed where a value id is meant.
/// Default-constructed, it is "none" (`kNoValue`, `kNoNode`).
template <class Tag>
class Id {
 public:
  constexpr Id() = default;
  /// The id of table position `i` (-1: "none").
  template <std::integral I>
  constexpr explicit Id(I i) : v_(static_cast<int>(i)) {}
  /// The position in the graph's table (the id must not be "none").
  constexpr std::size_t index() const { return static_cast<std::size_t>(v_); }
  /// The id as a signed number (-1 for "none"): for printing and for the
  /// places that store it as a plain int (a symbolic tensor's id).
  constexpr int raw() const { return v_; }
  /// False for "none".
  constexpr bool valid() const { return v_ >= 0; }
  friend constexpr bool operator==(Id, Id) = default;
  friend constexpr auto operator<=>(Id, Id) = default;
  friend std::ostream& operator<<(std::ostream& os, Id id) { return os << id.v_; }

 private:
  int v_ = -1;
};

/// The id of a value of a Graph (an index into `Graph::values`).
using ValueId = Id<struct ValueTag>;
/// The id of a node of a Graph (an index into `Graph::nodes`).
using NodeId = Id<struct NodeTag>;
/// "No value" (a default-constructed ValueId).
inline constexpr ValueId kNoValue{};
/// "No node" (a default-constructed NodeId).
inline constexpr NodeId kNoNode{};

/// A table with one entry per value (`IdTable<ValueId, T>`) or per node,
/// indexed by id.
template <class K, class T>
class IdTable {
 public:
  IdTable() = default;
  /// `n` entries, each `init`.
  explicit IdTable(std::size_t n, const T& init = T{}) : v_(n, init) {}
  /// The entry of id `k`.
  /// @{
  decltype(auto) operator[](K k) { return v_[k.index()]; }
  decltype(auto) operator[](K k) const { return v_[k.index()]; }
  /// @}
  /// The number of entries.
  std::size_t size() const { return v_.size(); }
  /// Grows or shrinks to `n` entries (new ones `init`).
  void resize(std::size_t n, const T& init = T{}) { v_.resize(n, init); }
  /// Iteration in id order.
  /// @{
  auto begin() const { return v_.begin(); }
  auto end() const { return v_.end(); }
  /// @}

 private:
  std::vector<T> v_;
};

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
  std::vector<ValueId> inputs;               ///< read values
  std::vector<ValueId> outputs;              ///< defined values
  ops::Attrs attrs;                          ///< Op
  Tensor tensor;                             ///< Capture, Const
  ms::Scalar scalar = 0;                     ///< Scalar
  std::shared_ptr<const FusedRegion> fused;  ///< Fused
  int arg_index = -1;                        ///< Input
  std::string name;                          ///< Input, Capture: printed name (without %)
  /// Op: the set_dump-marked cells it was traced inside ("Outer-Inner"; empty: none).
  std::string dump_scope;
  /// Op: the recompute region (one call of a cell marked with `recompute()`)
  /// it was traced in; -1: none. Autodiff re-emits a region's ops for its
  /// backward instead of keeping their values (ms/jit/recompute.hpp).
  int recompute_region = -1;
  /// Op: a clone that autodiff re-emitted in the backward of a recompute
  /// region. Common-subexpression elimination never merges it with a node
  /// that is not one, so the forward's values are not kept for it; dumps
  /// print it with a `[recompute]` mark.
  bool recomputed = false;
};

/// One SSA value: a tensor produced by one output of one node.
struct Value {
  /// Its dtype and shape.
  ops::TensorType type;
  NodeId node;        ///< producing node
  int index = 0;      ///< output index in that node
  bool weak = false;  ///< a Scalar node's value: a weak number
};

/// An SSA graph. Nodes are stored in execution order.
struct Graph {
  /// The nodes, in execution order.
  std::vector<Node> nodes;
  /// The values, indexed by value id.
  std::vector<Value> values;
  std::vector<ValueId> outputs;  ///< values returned by the function, in order
  /// A generalized graph's dims as printed (`s0`, `784*s0`), per value; empty
  /// (or an empty entry) prints the concrete dims. Only the printer reads it.
  std::vector<std::vector<std::string>> symbolic_dims;

  /// Appends `n`, creating one value per entry of `types`; returns the node id.
  NodeId add(Node n, const std::vector<ops::TensorType>& types, bool weak = false);
  /// The value produced by single-output node `node`.
  ValueId value_of(NodeId node) const { return this->node(node).outputs.at(0); }
  /// The value with id `v`.
  /// @{
  const Value& value(ValueId v) const { return values[v.index()]; }
  Value& value(ValueId v) { return values[v.index()]; }
  /// @}
  /// The node with id `n`.
  /// @{
  const Node& node(NodeId n) const { return nodes[n.index()]; }
  Node& node(NodeId n) { return nodes[n.index()]; }
  /// @}
  /// The node that produces value `v`.
  const Node& producer(ValueId v) const { return node(value(v).node); }
  /// The id of the next node `add` makes / of the next value.
  NodeId next_node() const { return NodeId{nodes.size()}; }
  /// The id of the next value a node added now would produce.
  ValueId next_value() const { return ValueId{values.size()}; }
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

/// Hashing of IR ids, for unordered containers keyed by value or node.
template <class Tag>
struct std::hash<ms::ir::Id<Tag>> {
  /// The hash of the id's number.
  std::size_t operator()(ms::ir::Id<Tag> id) const noexcept { return std::hash<int>{}(id.raw()); }
};
