// ms/nn/amp.hpp — mixed precision (MindSpore's mindspore.amp): low-precision
// cells and levels, loss scaling, overflow checks.
//
// Stage: nn. How it works. Mixed precision is casts inserted at cell
// boundaries and op inputs; the parameters stay float32 master weights:
//  - A cell set with `cell.to_float(dtype)` (ms/nn/cell.hpp) makes an
//    ops::CastPolicy (ms/ops/cast_policy.hpp) this thread's while it runs. Its
//    floating tensor arguments are cast to `dtype` on entry, and every op of
//    the op table it runs (matmul, conv2d, reductions, softmax, layout ops...)
//    casts its floating inputs to `dtype` first: so the float32 parameters it
//    reads are cast where they are used, and its outputs are in `dtype`.
//    Elementwise expressions are not ops of the table: they follow type
//    promotion (a bfloat16 value plus a float32 parameter computes in
//    float32), and the cell's floating outputs are cast to `dtype` on exit.
//  - The casts are ordinary `cast` ops. Eagerly they run at once; under
//    ms::jit and ms::grad they are recorded as graph nodes, so the same
//    construct gives the same dtypes in both modes, and autodiff takes each
//    gradient back through its cast: a float32 parameter (the master weight)
//    gets a float32 gradient and the optimizer state stays float32.
//  - In a compiled graph the cast of a parameter is not computed every run:
//    the executor keeps the low-precision copy across runs (see
//    compiler::Executable::plan_kept_casts). The optimizer's fused in-place
//    update of the float32 master (float32 arithmetic) stores the copy in the
//    same pass, and a run recasts a copy whose master was written elsewhere
//    since (set_data, ms::assign, load_state_dict, load_checkpoint, an eager
//    step: every write counted by Storage::write_count; a raw write through
//    data<T>() must call note_write()). The copy is not a parameter: state
//    dicts and checkpoints hold the float32 masters only. Eagerly every call
//    casts; eager and jit compute the same values.
//  - Widening casts (the bfloat16 gradients to float32) fuse into the
//    elementwise regions that read them, so the optimizer's update reads the
//    bfloat16 gradient directly.
//  - Changing a cell's precision bumps the global hook version, so graphs
//    traced before recompile.
//  - Hooks of such a cell see its arguments after the entry cast and its
//    outputs before the exit cast.
//
// auto_mixed_precision's levels, as MindSpore's:
//  - "O0": nothing changes.
//  - "O1": the white list (ops of kinds Linalg and Conv: matmul, hence Dense,
//    and conv2d) runs in `dtype` with float32 outputs; everything else float32.
//  - "O2": the whole network in `dtype` except the black list, kept float32
//    (get_black_list()); the network's floating outputs become float32.
//  - "O3": the whole network in `dtype`; outputs float32.
//
//   MLP net;
//   ms::amp::auto_mixed_precision(net, "O2", ms::bfloat16);
//   ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.05});  // float32 state
//   ms::amp::DynamicLossScaleManager scaler(1024.0);
//   auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
//     auto scaled = [&](const ms::Tensor& a, const ms::Tensor& b) {
//       return scaler.scale(ms::nn::cross_entropy(net(a), b));
//     };
//     auto [loss, grads] = ms::value_and_grad(
//         scaled, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
//     scaler.apply(opt, grads);   // unscale, check, update or skip, adjust the scale
//     return loss;
//   });
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/nn/cell.hpp"
#include "ms/nn/optim.hpp"

namespace ms::amp {

/// The cells O2 keeps in float32, by class name: MindSpore's black list
/// (BatchNorm1d, BatchNorm2d, LayerNorm), the loss cells that MindSpore's
/// build_train_network keeps in float32 (SoftmaxCrossEntropyWithLogits,
/// CrossEntropyLoss, NLLLoss, BCEWithLogitsLoss, MSELoss, L1Loss), and
/// Softmax and LogSoftmax (on MindSpore's black list of its "auto" level).
std::vector<std::string> get_black_list();
/// The ops O1 runs in low precision, by op name: those of kinds Linalg and
/// Conv in ms's op table (matmul, conv2d and conv2d's gradient ops).
std::vector<std::string> get_white_list();

/// Mixed precision for `network` at `amp_level` ("O0", "O1", "O2" or "O3",
/// see the top of this header) with low precision `dtype` (bfloat16, the
/// CPU's native one, by default; MindSpore's default is float16). Changes
/// `network` in place (a cell cannot be wrapped in ms) and returns it; its
/// amp_level() is then `amp_level`. Calling it again with the same level
/// does nothing; with another: ValueError. ValueError naming
/// `auto_mixed_precision` and the argument for a level other than those four
/// or a `dtype` other than float16 and bfloat16.
///   ms::amp::auto_mixed_precision(net, "O2", ms::bfloat16);
CellBase& auto_mixed_precision(CellBase& network, const std::string& amp_level = "O0",
                               DType dtype = bfloat16);

/// A 0-d bool tensor: true when every element of every defined tensor of
/// `inputs` is finite (MindSpore's amp.all_finite). A tensor op, so inside
/// ms::jit it is part of the graph (no host sync). TypeError naming the
/// position for a non-floating tensor.
///   ms::Tensor ok = ms::amp::all_finite(grads);
Tensor all_finite(const std::vector<Tensor>& inputs);

/// Loss scaling (MindSpore's LossScaleManager and amp.LossScaler): the loss is
/// multiplied by the scale before the backward, the gradients divided by it
/// after. The scale is a float32 0-d tensor that graphs read, and every update
/// of it is a tensor op, so one jitted train step (forward, backward, update,
/// scale adjustment) compiles once and runs without host syncs; eagerly the
/// same calls compute at once.
class LossScaleManager {
 public:
  virtual ~LossScaleManager();
  LossScaleManager(const LossScaleManager&) = delete;
  LossScaleManager& operator=(const LossScaleManager&) = delete;

  /// The current scale (reads its tensor).
  double get_loss_scale() const;
  /// The scale's float32 0-d tensor (the tensor itself).
  const Tensor& loss_scale() const { return scale_; }
  /// Whether a step whose gradients overflow is skipped (the optimizer does not run).
  virtual bool get_drop_overflow_update() const = 0;
  /// loss * scale (in loss's dtype).
  Tensor scale(const Tensor& loss) const;
  /// Each gradient / scale (in the gradient's dtype); undefined ones stay undefined.
  std::vector<Tensor> unscale(const std::vector<Tensor>& grads) const;
  /// Updates the scale after a step whose gradients were all finite or not
  /// (`grads_finite`, a 0-d bool tensor as all_finite returns); in-graph inside ms::jit.
  virtual void adjust(const Tensor& grads_finite) = 0;
  /// MindSpore's update_loss_scale(overflow): adjust() with a host bool
  /// (eager only: inside ms::jit it would be baked into the graph, a ValueError).
  void update_loss_scale(bool overflow);
  /// The step after the backward: unscales `scaled_grads`, checks them with
  /// all_finite, applies them with `opt` (only when finite if
  /// get_drop_overflow_update()), adjusts the scale. Returns the 0-d bool
  /// finiteness of the gradients.
  Tensor apply(optim::Optimizer& opt, const std::vector<Tensor>& scaled_grads);

 protected:
  /// A manager whose scale starts at `scale`.
  explicit LossScaleManager(double scale);
  /// The scale, float32 [].
  Tensor scale_;
};

/// A fixed scale (MindSpore's FixedLossScaleManager). With
/// `drop_overflow_update` a step whose gradients overflow is skipped.
///   ms::amp::FixedLossScaleManager scaler(128.0);
class FixedLossScaleManager : public LossScaleManager {
 public:
  /// ValueError naming `loss_scale` unless it is finite and >= 1 (MindSpore's check).
  explicit FixedLossScaleManager(double loss_scale = 128.0, bool drop_overflow_update = true);
  bool get_drop_overflow_update() const override { return drop_; }
  /// Nothing: the scale is fixed.
  void adjust(const Tensor& grads_finite) override;

 private:
  bool drop_;
};

/// A scale that adapts (MindSpore's DynamicLossScaleManager and its update
/// cell): on a step whose gradients overflow the step is skipped and the
/// scale divided by `scale_factor` (never below 1); after `scale_window`
/// finite steps in a row it is multiplied by `scale_factor`.
///   ms::amp::DynamicLossScaleManager scaler;   // 2^24, x2, every 2000 steps
class DynamicLossScaleManager : public LossScaleManager {
 public:
  /// ValueError naming the argument unless init_loss_scale >= 1,
  /// scale_factor > 1 and scale_window > 0 (MindSpore's checks).
  explicit DynamicLossScaleManager(double init_loss_scale = 16777216.0, double scale_factor = 2.0,
                                   std::int64_t scale_window = 2000);
  /// True: an overflowing step is always skipped.
  bool get_drop_overflow_update() const override { return true; }
  void adjust(const Tensor& grads_finite) override;
  /// The factor the scale is divided and multiplied by.
  double scale_factor() const { return factor_; }
  /// The number of finite steps in a row after which the scale grows.
  std::int64_t scale_window() const { return window_; }

 private:
  double factor_;
  std::int64_t window_;
  Tensor cur_iter_;            // float32 []: steps seen + 1
  Tensor last_overflow_iter_;  // float32 []: the step of the last overflow or growth
};

/// MindSpore's amp.LossScaler (the abstract scaler: scale, unscale, adjust).
using LossScaler = LossScaleManager;
/// MindSpore's amp.StaticLossScaler: a fixed scale.
using StaticLossScaler = FixedLossScaleManager;
/// MindSpore's amp.DynamicLossScaler(scale_value, scale_factor, scale_window).
using DynamicLossScaler = DynamicLossScaleManager;

}  // namespace ms::amp
