// ms/jit/compile.hpp — graph passes and the executor of compiled graphs.
//
// Stage: jit. `optimize` runs the passes of a jit level on a traced graph:
//   O0: dead-code elimination, execution order;
//   O1: + common-subexpression elimination, constant folding, algebraic
//       simplification, elementwise fusion (regions run tile by tile by the
//       same kernel as eager expression templates).
// An `Executable` runs the result. Its first run records the graph's storage
// allocations; from then on every intermediate is served from one arena
// planned from the recorded lifetimes, so a steady-state call allocates only
// its outputs (see ms::memory_stats()).
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ms/ir/graph.hpp"
#include "ms/jit/options.hpp"

namespace ms::compiler {

/// What optimize does to a graph: the pass level, the node order and whether to verify.
struct CompileOptions {
  /// Which passes run (see ms::JitLevel).
  JitLevel jit_level = JitLevel::O1;
  /// The node order of the final graph (see ms::ExecOrder).
  ExecOrder exec_order = ExecOrder::Bfs;
  bool verify = kVerifyDefault;  ///< run ir::verify after every pass
};

/// Runs the passes of `opts.jit_level` on `g`. ValueError for a level or order
/// outside its enum.
void optimize(ir::Graph& g, const CompileOptions& opts);

// The passes, one by one (each leaves a valid graph).
/// Removes nodes whose values reach no output and no Assign.
void eliminate_dead_code(ir::Graph& g);
/// Merges nodes with the same op, inputs and attributes.
void eliminate_common_subexpressions(ir::Graph& g);
/// Evaluates ops whose inputs are all constants.
void fold_constants(ir::Graph& g);
/// x*1, x/1, x+0, x-0, -(-x), reshape/cast/broadcast to the same type -> x, as
/// each op's `ops::Algebra` allows.
void simplify(ir::Graph& g);
/// Transpose(MatMul(Transpose(a), b)) -> MatMul(Transpose(b), a) (and the mirror
/// form) for 2-D operands: weight gradients of x @ W^T come out contiguous.
void fold_transposed_matmuls(ir::Graph& g);
/// The fusion rules, one per pattern, in order: relu_grad(max_pool2d_grad(relu(y),
/// gy), y) -> max_pool2d_grad_relu, relu(conv2d) -> conv2d_fused{relu},
/// max_pool2d(conv, 2) -> conv2d_fused{max_pool2x2}'s second output, and the
/// pooling's gradient from the taps the conv noted: exact one-pass forms (the
/// jit's private fused ops) of the CNN pattern conv2d -> relu -> max_pool2d and
/// of its gradient; and add(matmul(a, b), bias) -> matmul_bias (a dense
/// layer's bias added to each tile of its float32 product while in cache).
void fuse_activations(ir::Graph& g);
/// Groups connected elementwise ops into Fused nodes.
void fuse_elementwise(ir::Graph& g);
/// Reorders nodes: ExecOrder::Bfs (level by level) or ExecOrder::Dfs (depth
/// first from the outputs).
void order_nodes(ir::Graph& g, ExecOrder exec_order);

/// Builds the elementwise program computing the value of node `root` from the
/// elementwise Op nodes `members` (in graph order, root last). `leaves`
/// receives the value ids the program loads, in leaf order.
std::shared_ptr<ir::FusedRegion> build_region(const ir::Graph& g,
                                              std::span<const ir::NodeId> members,
                                              std::vector<ir::ValueId>& leaves);

/// A compiled graph, ready to run. Thread-safe: concurrent runs use separate frames.
class Executable {
 public:
  /// Plans `g` as given (buffer lifetimes, the arena); run optimize on it first.
  explicit Executable(ir::Graph g);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  /// Runs the graph on the flat tensor inputs (checked against the graph's types).
  std::vector<Tensor> run(std::span<const Tensor> inputs) const;
  /// The graph this executable runs.
  const ir::Graph& graph() const { return graph_; }
  /// Bytes of the planned arena of the most recently planned frame (0 before the 2nd run).
  std::int64_t arena_bytes() const;
  /// Number of intermediate allocations the plan serves from the arena.
  std::int64_t planned_allocations() const;
  /// Number of casts of captured tensors (parameters) that runs read from a
  /// kept copy instead of computing (see plan_kept_casts).
  std::size_t kept_casts() const;
  /// Number of view steps (transpose, reshape, ...) of captured tensors and
  /// constants made once when the graph is planned instead of on every run
  /// (see plan_bound_views).
  std::size_t bound_views() const { return bound_views_.size(); }

  struct Step;
  struct Frame;
  struct Kept;

 private:
  ir::Graph graph_;
  std::vector<Step> steps_;
  std::vector<ir::ValueId> input_values_;  ///< by argument index
  std::vector<ir::ValueId> leaf_values_;   ///< inputs, captures and constants
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Frame>> free_frames_;
  mutable std::int64_t arena_bytes_ = 0;
  mutable std::int64_t planned_ = 0;
  mutable std::atomic<std::int64_t> calls_{0};
  std::unique_ptr<Frame> take_frame() const;
  void give_frame(std::unique_ptr<Frame> f) const;
  mutable std::vector<Kept> kept_;  ///< kept casts of captures (see plan_kept_casts)
  /// Lets a fused step write a parameter update straight into the parameter.
  void plan_in_place_updates();
  /// Keeps the casts of captured tensors (a mixed-precision step's
  /// low-precision weights) across runs: a run reads the kept copy, which the
  /// fused update of the capture rewrites in the same pass, and which is
  /// recast at the start of a run when the capture was written elsewhere.
  void plan_kept_casts();
  /// Recasts the kept copies whose capture was written since they were made.
  void refresh_kept_casts() const;
  /// Views of captures (a dense layer's transposed weight) bound to every
  /// frame like the captures, their steps dropped: (value, view).
  std::vector<std::pair<ir::ValueId, Tensor>> bound_views_;
  /// Makes the views of captured tensors and constants once: a view's
  /// elements are the capture's, whatever it holds at a run, so the view
  /// itself never changes.
  void plan_bound_views();
};

}  // namespace ms::compiler
