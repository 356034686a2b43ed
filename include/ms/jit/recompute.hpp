// ms/jit/recompute.hpp — recompute regions: the ops of a cell marked with
// `cell.recompute()` whose values are recomputed for the backward pass
// instead of being kept from the forward.
//
// Stage: jit. While a RecomputeScope is alive on a thread, every op that a
// trace records is tagged with the scope's region (ir::Node::recompute_region);
// a region is one call of a marked cell, nested marked calls belong to the
// outermost one. Autodiff (src/autodiff/backward.cpp) reads the tags: when
// the backward reaches a region, it re-emits the region's ops as clones
// (ir::Node::recomputed) from the region's inputs, and the region's gradient
// rules read the clones instead of the forward values:
//
//   * the clones are the same ops with the same attributes on the same
//     values in the same order, so every gradient is bitwise the one of the
//     graph without recompute (for grad(grad(f)) equal up to rounding only:
//     the second backward reaches the region's inputs along two paths, the
//     forward values and the clones, and sums them in another order);
//   * the clones' reads of the region's inputs go through `ms::depend` on the
//     gradients flowing into the region, so no execution order can run them
//     before the backward reaches the region (the forward values they stand
//     for die after the forward, the clones live only in the backward);
//   * common-subexpression elimination never merges a clone with a node that
//     is not one (it would bring the forward value back);
//   * random draws (dropout's mask) and host callbacks (hooks) are not
//     re-emitted: their forward outputs are kept, so a recomputed dropout
//     applies the mask the forward drew and a hook runs once per step.
//
// What it saves: the values computed inside the region that its gradient
// rules read (a Dense + relu layer's pre-activation, which relu's gradient
// reads); the region's inputs and outputs are kept as without recompute. The
// price is one more forward of the region per backward. Re-tracing construct
// in the backward (a custom_grad-like node) was not chosen: a second trace
// may record other ops (hooks, mode-dependent code) and another draw of its
// random ops, so bitwise-equal gradients could not be promised.
//
// Outside a trace (plain eager calls) a scope does nothing: nothing is kept
// for a backward there.
#pragma once

namespace ms::compiler::detail {

/// The recompute region of the ops traced now on this thread; -1 outside any.
int current_recompute_region();

/// One call of a recompute-marked cell: its ops form a region (a fresh id),
/// unless a region is open already (an outer marked cell), which then holds
/// them too. `on` false: does nothing (a cell that is not marked).
class RecomputeScope {
 public:
  /// Opens a region when `on` and none is open on this thread.
  explicit RecomputeScope(bool on);
  /// Closes the region this scope opened, if any.
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  bool opened_ = false;  ///< this scope opened the region (and closes it)
};

}  // namespace ms::compiler::detail
