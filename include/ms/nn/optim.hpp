// ms/nn/optim.hpp — optimizers (ms::optim) and learning-rate schedules.
//
// Stage: nn. `opt.apply(grads)` updates the parameters in place, in the order
// of the list the optimizer was made with (the order of
// `net.trainable_params()`, which is also the order ms::value_and_grad returns
// the weights' gradients in). Eagerly it computes at once; inside ms::jit it
// records in-graph updates (Assign nodes), so forward, backward and update
// are one compiled graph. The learning rate and the step count are 0-d
// tensors the graph reads, so a schedule changing the rate never recompiles.
//
//   ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.05, .momentum = 0.9});
//   auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
//     auto [loss, grads] = ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights =
//     opt.parameters()})(x, y); opt.apply(grads); return loss;
//   });
//   ms::optim::CosineAnnealingLR sched(opt, /*t_max=*/1000);   // sched.step() after each step
//   ms::optim::WarmupCosineLR gpt(opt, /*warmup_steps=*/100, /*total_steps=*/5000, 1e-5);
//   auto [clipped, norm] = ms::nn::clip_grad_norm(grads, 1.0);  // before opt.apply(clipped)
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/expr/expr.hpp"
#include "ms/nn/cell.hpp"
#include "ms/nn/parameter.hpp"

namespace ms::optim {

/// Base of the optimizers: parameters, learning rate, step count, state.
class Optimizer {
 public:
  /// Updates `params` (in their order) with learning rate `lr`; `name` is the
  /// class name used in messages ("SGD", "Adam", ...).
  Optimizer(ParameterList params, double lr, std::string name);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Updates every parameter with its gradient (same order as parameters()).
  /// ValueError when the count differs, ShapeError / TypeError naming the
  /// parameter when a gradient does not match it.
  void apply(const std::vector<Tensor>& grads);
  /// As apply(grads), where `condition` (a 0-d bool tensor) is true; where it
  /// is false every parameter, state buffer and the step count keep their
  /// values (the step is skipped, as MindSpore's loss-scaled training step
  /// skips the optimizer on overflow). Each write is a select, so inside
  /// ms::jit the whole step stays one graph with no host sync.
  ///   opt.apply(grads, ms::amp::all_finite(grads));
  /// ValueError naming `condition` unless it is a defined 0-d bool tensor.
  void apply(const std::vector<Tensor>& grads, const Tensor& condition);
  /// The same as apply(grads).
  void operator()(const std::vector<Tensor>& grads) { apply(grads); }

  /// The parameters updated, in the order apply() expects their gradients.
  const ParameterList& parameters() const { return params_; }
  /// The learning rate (read from its 0-d tensor).
  double lr() const;
  /// Sets the learning rate in place (no recompilation of graphs that use it).
  void set_lr(double lr);
  /// Number of apply() steps run (eagerly or by compiled graphs).
  std::int64_t step_count() const;

  /// The optimizer state: "step", "lr" and, per parameter `p` and state
  /// buffer `s`, "<p.name()>.<s>" (e.g. "fc1.weight.moments"). Tensors, not copies.
  StateDict state_dict() const;
  /// Loads a state_dict() (all-or-nothing: every entry checked first).
  void load_state_dict(const StateDict& sd);
  /// The class name ("SGD", "Momentum", "Adam", "AdamW").
  const std::string& name() const { return name_; }

 protected:
  /// Records or computes the update of parameter `i` with gradient `g`. The
  /// 0-d tensors lr_ and step_ (already incremented) may be read.
  virtual void update(std::size_t i, const Parameter& p, const Tensor& g) = 0;
  /// Adds a per-parameter state buffer (zeros like parameter i) named `name`.
  Tensor& add_state(std::size_t i, const std::string& name);
  /// Writes `value` into the parameter or state `dst` (ms::assign), or keeps
  /// `dst` where the condition of apply(grads, condition) is false. Every
  /// update() writes through it.
  template <class E>
  void write(const Tensor& dst, E&& value) {
    if (gate_.defined())
      ms::assign(dst, ms::where(gate_, std::forward<E>(value), dst));
    else
      ms::assign(dst, std::forward<E>(value));
  }

  /// The parameters updated.
  ParameterList params_;
  Tensor lr_;    ///< float32 []
  Tensor step_;  ///< float32 [] (exact up to 2^24 steps)
  /// Per parameter, its state buffers by name (see add_state()).
  std::vector<std::vector<std::pair<std::string, Tensor>>> state_;
  /// The class name.
  std::string name_;

 private:
  void check_grads(const std::vector<Tensor>& grads) const;
  Tensor gate_;  // the condition of the running apply(grads, condition); undefined otherwise
};

/// The options of ms::optim::SGD (PyTorch's defaults, lr aside):
/// `ms::optim::SGD opt(net.trainable_params(), {.lr = 0.01, .momentum = 0.9});`
struct SGDOptions {
  /// The learning rate (> 0).
  double lr = 0.1;
  /// Momentum factor (0: plain SGD).
  double momentum = 0.0;
  /// Dampening of the gradient in the momentum buffer.
  double dampening = 0.0;
  /// L2 penalty: weight_decay * p is added to the gradient (>= 0).
  double weight_decay = 0.0;
  /// Nesterov momentum (needs momentum > 0 and dampening 0).
  bool nesterov = false;
};

/// SGD as PyTorch's (momentum buffer v = momentum * v + (1 - dampening) * g).
class SGD : public Optimizer {
 public:
  /// Updates `params` with options `o`; ValueError for a negative rate, momentum
  /// or weight decay, or nesterov without momentum.
  SGD(ParameterList params, SGDOptions o = {});
  /// The options it was made with.
  SGDOptions opts;

 protected:
  void update(std::size_t i, const Parameter& p, const Tensor& g) override;
};

/// The options of ms::optim::Momentum (MindSpore's names):
/// `ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.05, .momentum = 0.9});`
struct MomentumOptions {
  /// The learning rate (> 0).
  double lr = 0.1;
  /// Momentum factor.
  double momentum = 0.9;
  /// L2 penalty: weight_decay * p is added to the gradient (>= 0).
  double weight_decay = 0.0;
  /// Nesterov momentum.
  bool use_nesterov = false;
};

/// MindSpore's Momentum: accum = momentum * accum + g; p -= lr * accum
/// (nesterov: p -= lr * (g + momentum * accum)); state "moments".
class Momentum : public Optimizer {
 public:
  /// Updates `params` with options `o`; ValueError for a negative rate, momentum
  /// or weight decay.
  Momentum(ParameterList params, MomentumOptions o = {});
  /// The options it was made with.
  MomentumOptions opts;

 protected:
  void update(std::size_t i, const Parameter& p, const Tensor& g) override;
};

/// The options of ms::optim::Adam:
/// `ms::optim::Adam opt(net.trainable_params(), {.lr = 1e-3, .weight_decay = 1e-4});`
struct AdamOptions {
  /// The learning rate (> 0).
  double lr = 1e-3;
  /// Decay of the first-moment (mean) estimate, in [0, 1).
  double beta1 = 0.9;
  /// Decay of the second-moment estimate, in [0, 1).
  double beta2 = 0.999;
  /// Added to the denominator for stability (> 0).
  double eps = 1e-8;
  double weight_decay = 0.0;  ///< Adam: added to the gradient; AdamW: decoupled
};

/// Adam with bias correction; state "moment1", "moment2".
class Adam : public Optimizer {
 public:
  /// Updates `params` with options `o`; ValueError for an option out of range.
  Adam(ParameterList params, AdamOptions o = {});
  /// The options it was made with.
  AdamOptions opts;

 protected:
  /// For AdamW: class name `name`, weight decay `decoupled` from the gradient.
  Adam(ParameterList params, AdamOptions o, std::string name, bool decoupled);
  void update(std::size_t i, const Parameter& p, const Tensor& g) override;
  /// True for AdamW: the decay shrinks the parameter instead of adding to the gradient.
  bool decoupled_ = false;
};

/// AdamW's options: Adam's, with weight decay 0.01 by default (as MindSpore and PyTorch).
struct AdamWOptions {
  /// The learning rate (> 0).
  double lr = 1e-3;
  /// Decay of the first-moment (mean) estimate, in [0, 1).
  double beta1 = 0.9;
  /// Decay of the second-moment estimate, in [0, 1).
  double beta2 = 0.999;
  /// Added to the denominator for stability (> 0).
  double eps = 1e-8;
  double weight_decay = 0.01;  ///< decoupled: p -= lr * weight_decay * p
};

/// AdamW: Adam with decoupled weight decay (p -= lr * wd * p).
class AdamW : public Adam {
 public:
  /// Updates `params` with options `o`; ValueError for an option out of range.
  AdamW(ParameterList params, AdamWOptions o = {});
};

// ------------------------------------------------------------------ schedules

/// Multiplies the rate by `gamma` every `step_size` calls of step().
class StepLR {
 public:
  /// Schedules `opt`'s rate from its current value; ValueError when step_size <= 0
  /// or gamma <= 0. Example: `ms::optim::StepLR sched(opt, 30, 0.1);`
  StepLR(Optimizer& opt, std::int64_t step_size, double gamma = 0.1);
  /// Counts one step and sets the optimizer's rate for the next.
  void step();
  /// The number of step() calls so far.
  std::int64_t last_step() const { return n_; }

 private:
  Optimizer& opt_;
  double base_;
  std::int64_t step_size_;
  double gamma_;
  std::int64_t n_ = 0;
};

/// The cosine rate shared by the cosine schedules (CosineAnnealingLR,
/// WarmupCosineLR, ms::train::CosineSchedule): from `base` at step 0 to
/// `min_lr` at step `total` (> 0), and `min_lr` after:
/// min_lr + (base - min_lr) * (1 + cos(pi * min(step, total) / total)) / 2.
/// ValueError unless total > 0. `ms::optim::cosine_lr(0.1, 0.0, 50, 100)` is 0.05.
double cosine_lr(double base, double min_lr, std::int64_t step, std::int64_t total);

/// Cosine annealing from the optimizer's rate to `eta_min` over `t_max` steps.
class CosineAnnealingLR {
 public:
  /// Schedules `opt`'s rate from its current value down to `eta_min`; ValueError
  /// when t_max <= 0 or eta_min is not in [0, rate].
  CosineAnnealingLR(Optimizer& opt, std::int64_t t_max, double eta_min = 0.0);
  /// Counts one step and sets the optimizer's rate for the next.
  void step();
  /// The number of step() calls so far.
  std::int64_t last_step() const { return n_; }

 private:
  Optimizer& opt_;
  double base_;
  std::int64_t t_max_;
  double eta_min_;
  std::int64_t n_ = 0;
};

/// Linear warm-up then cosine decay, the usual schedule of GPT-style training
/// (PyTorch's LinearLR followed by CosineAnnealingLR; Hugging Face's
/// get_cosine_schedule_with_warmup with a floor). With base = the optimizer's
/// rate when constructed, the rate after n calls of step() is
///   base * (start_factor + (1 - start_factor) * n / warmup_steps)  for n < warmup_steps,
///   cosine_lr(base, min_lr, n - warmup_steps, total_steps - warmup_steps)  after,
/// so it reaches base at n = warmup_steps and min_lr at n = total_steps and
/// stays there. The constructor sets the optimizer's rate for step 0.
///   ms::optim::WarmupCosineLR sched(opt, 100, 5000, 1e-5);   // sched.step() after each step
class WarmupCosineLR {
 public:
  /// Schedules `opt`'s rate; ValueError unless 0 <= warmup_steps < total_steps,
  /// min_lr is in [0, rate] and start_factor in [0, 1].
  WarmupCosineLR(Optimizer& opt, std::int64_t warmup_steps, std::int64_t total_steps,
                 double min_lr = 0.0, double start_factor = 0.0);
  /// Counts one step and sets the optimizer's rate for the next.
  void step();
  /// The number of step() calls so far.
  std::int64_t last_step() const { return n_; }
  /// The rate it sets for the step after `last_step()` calls: lr_at(last_step()).
  double lr() const { return lr_at(n_); }
  /// The rate after `n` steps (a pure function of n; ms::train::LRSchedule
  /// drives it by the global step).
  double lr_at(std::int64_t n) const;
  /// The rate it warms up to (the optimizer's rate when constructed).
  double base_lr() const { return base_; }

 private:
  Optimizer& opt_;
  double base_;
  std::int64_t warmup_, total_;
  double min_lr_, start_factor_;
  std::int64_t n_ = 0;
};

}  // namespace ms::optim

namespace ms::nn {

/// The options of ms::nn::clip_grad_norm.
struct ClipGradNormOptions {
  /// The p of the p-norm (> 0), or infinity for the largest |g|.
  double norm_type = 2.0;
};

/// What ms::nn::clip_grad_norm returns: `auto [grads, norm] = clip_grad_norm(g, 1.0);`.
struct ClippedGrads {
  std::vector<Tensor> grads;  ///< the clipped gradients, in the given order
  Tensor total_norm;          ///< 0-d: the norm of all gradients before clipping
};

/// Clips gradients by their global norm, as PyTorch's clip_grad_norm_ (not in
/// place: the clipped tensors are returned). `total` is the p-norm of all
/// gradients together (the norm of the per-tensor norms; with p = infinity
/// the largest |g|), computed in float32 (float64 when a gradient is float64);
/// when total > max_norm every gradient is multiplied by
/// max_norm / (total + 1e-6), else returned unchanged (PyTorch multiplies by
/// min(1, max_norm / (total + 1e-6)), which differs only by that 1e-6 just
/// below max_norm). A NaN total clips nothing; an infinite one multiplies every
/// gradient by 0 (an infinite element becomes NaN), as PyTorch's does when
/// not asked to raise on non-finite norms. The norm stays a
/// 0-d tensor, so inside ms::jit this records graph ops and needs no host
/// sync; eagerly it computes at once. Undefined tensors (no gradient) are
/// skipped and returned undefined; no gradients give a norm of 0.
/// ValueError unless max_norm >= 0 and norm_type > 0; TypeError for a
/// non-floating gradient (naming its position).
///   auto [loss, grads] = ms::value_and_grad(
///       loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
///   opt.apply(ms::nn::clip_grad_norm(grads, 1.0).grads);
ClippedGrads clip_grad_norm(const std::vector<Tensor>& grads, double max_norm,
                            const ClipGradNormOptions& o = {});

}  // namespace ms::nn
