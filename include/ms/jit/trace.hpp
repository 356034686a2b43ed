// ms/jit/trace.hpp — recording a C++ function into an ir::Graph.
//
// Stage: jit. A TraceContext is the ops::Tracer of one trace: while it is
// alive on a thread, every op call (through the op table or an expression
// template) is recorded as a graph node instead of being computed. Function
// arguments become symbolic tensors (`add_input`); concrete tensors that the
// function reads become `Capture` nodes (made before the trace: parameters,
// bound by identity) or `Const` nodes (made during the trace).
//
//   ms::compiler::TraceContext tc;
//   ms::Tensor x = tc.add_input(ms::float32, {2, 3});
//   ms::Tensor y = ms::relu(x * 2.f);           // recorded, not computed
//   ms::ir::Graph g = tc.finish({y});
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/ir/graph.hpp"
#include "ms/ops/op.hpp"

namespace ms::compiler {

/// Records the ops run on symbolic tensors into an ir::Graph: the tracer behind ms::jit,
/// ms::grad's traced mode and advanced::jit_begin. While it is this thread's active
/// tracer, every op called on a symbolic tensor appends a node instead of computing.
class TraceContext final : public ops::Tracer {
 public:
  /// Starts a trace and makes it this thread's active tracer.
  TraceContext();
  /// Ends the trace (restores the previous tracer).
  ~TraceContext() override;
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  /// A new graph input (the next flat argument): a symbolic tensor.
  Tensor add_input(DType dtype, const Shape& shape, std::string name = {});
  /// Traces with these shapes for the flat inputs instead of the arguments'
  /// own (input i gets `shapes[i]`): how a generalized graph is probed at other
  /// sizes (ms/dyn/detail/generalize.hpp). Call before the first add_input.
  void override_input_shapes(std::vector<Shape> shapes) { shapes_ = std::move(shapes); }
  /// Makes the concrete tensor `t` the next graph input (advanced::jit_begin): the
  /// function's reads of `t` become reads of that input.
  void bind_input(const Tensor& t, std::string name = {});
  /// Ends recording: the graph returning `outputs` (symbolic or concrete).
  /// The context stops being the active tracer.
  ir::Graph finish(std::span<const Tensor> outputs);

  /// The graph recorded so far.
  const ir::Graph& graph() const { return g_; }
  /// The value a tensor stands for in this trace (a concrete tensor becomes a
  /// capture or constant on first use).
  ir::ValueId value_id(const Tensor& t) { return value_of(t, "trace"); }
  /// A symbolic tensor for value `v`.
  Tensor symbolic_value(ir::ValueId v) const { return symbolic(v); }

  /// Appends a copy of op node `node` reading `inputs` instead of its own
  /// (same op, attributes and output types), marked as a recomputed clone
  /// (ir::Node::recomputed); its outputs as symbolic tensors.
  std::vector<Tensor> replay(ir::NodeId node, std::span<const ir::ValueId> inputs);

  std::uint32_t trace_id() const override { return id_; }
  std::vector<Tensor> record(const ops::OpDef& def, std::span<const Tensor> inputs,
                             const ops::Attrs& attrs) override;
  Tensor record_elementwise(int op_id, std::span<const ops::EwTraceArg> args) override;
  void record_assign(const Tensor& dst, const Tensor& src, const char* what) override;

 private:
  ir::ValueId value_of(const Tensor& t, std::string_view what);
  bool bound(const Tensor& t) const;  ///< its storage already feeds the graph
  Tensor symbolic(ir::ValueId value) const;
  void deactivate();

  ir::Graph g_;
  std::uint32_t id_;
  std::uint64_t first_serial_;  ///< storages with a serial >= this were made during the trace
  int num_inputs_ = 0;
  int num_captures_ = 0;
  bool active_ = false;
  ops::Tracer* prev_ = nullptr;
  struct Bound {
    Tensor tensor;        ///< the concrete tensor
    ir::ValueId value;    ///< its Capture / Const value
    ir::ValueId current;  ///< its value now (after Assign nodes: the assigned value)
  };
  std::vector<Bound> bound_;
  std::vector<Shape> shapes_;  ///< override_input_shapes
};

}  // namespace ms::compiler
