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
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/nn/cell.hpp"
#include "ms/nn/parameter.hpp"

namespace ms::optim {

/// Base of the optimizers: parameters, learning rate, step count, state.
class Optimizer {
 public:
  Optimizer(ParameterList params, double lr, std::string name);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Updates every parameter with its gradient (same order as parameters()).
  /// ValueError when the count differs, ShapeError / TypeError naming the
  /// parameter when a gradient does not match it.
  void apply(const std::vector<Tensor>& grads);
  void operator()(const std::vector<Tensor>& grads) { apply(grads); }

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
  const std::string& name() const { return name_; }

 protected:
  /// Records or computes the update of parameter `i` with gradient `g`. The
  /// 0-d tensors lr_ and step_ (already incremented) may be read.
  virtual void update(std::size_t i, const Parameter& p, const Tensor& g) = 0;
  /// Adds a per-parameter state buffer (zeros like parameter i) named `name`.
  Tensor& add_state(std::size_t i, const std::string& name);

  ParameterList params_;
  Tensor lr_;    ///< float32 []
  Tensor step_;  ///< float32 [] (exact up to 2^24 steps)
  std::vector<std::vector<std::pair<std::string, Tensor>>> state_;
  std::string name_;
};

struct SGDOptions {
  double lr = 0.1;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

/// SGD as PyTorch's (momentum buffer v = momentum * v + (1 - dampening) * g).
class SGD : public Optimizer {
 public:
  SGD(ParameterList params, SGDOptions o = {});
  SGDOptions opts;

 protected:
  void update(std::size_t i, const Parameter& p, const Tensor& g) override;
};

struct MomentumOptions {
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 0.0;
  bool use_nesterov = false;
};

/// MindSpore's Momentum: accum = momentum * accum + g; p -= lr * accum
/// (nesterov: p -= lr * (g + momentum * accum)); state "moments".
class Momentum : public Optimizer {
 public:
  Momentum(ParameterList params, MomentumOptions o = {});
  MomentumOptions opts;

 protected:
  void update(std::size_t i, const Parameter& p, const Tensor& g) override;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  ///< Adam: added to the gradient; AdamW: decoupled
};

/// Adam with bias correction; state "moment1", "moment2".
class Adam : public Optimizer {
 public:
  Adam(ParameterList params, AdamOptions o = {});
  AdamOptions opts;

 protected:
  Adam(ParameterList params, AdamOptions o, std::string name, bool decoupled);
  void update(std::size_t i, const Parameter& p, const Tensor& g) override;
  bool decoupled_ = false;
};

/// AdamW's options: Adam's, with weight decay 0.01 by default (as MindSpore and PyTorch).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  ///< decoupled: p -= lr * weight_decay * p
};

/// AdamW: Adam with decoupled weight decay (p -= lr * wd * p).
class AdamW : public Adam {
 public:
  AdamW(ParameterList params, AdamWOptions o = {});
};

// ------------------------------------------------------------------ schedules

/// Multiplies the rate by `gamma` every `step_size` calls of step().
class StepLR {
 public:
  StepLR(Optimizer& opt, std::int64_t step_size, double gamma = 0.1);
  void step();
  std::int64_t last_step() const { return n_; }

 private:
  Optimizer& opt_;
  double base_;
  std::int64_t step_size_;
  double gamma_;
  std::int64_t n_ = 0;
};

/// Cosine annealing from the optimizer's rate to `eta_min` over `t_max` steps.
class CosineAnnealingLR {
 public:
  CosineAnnealingLR(Optimizer& opt, std::int64_t t_max, double eta_min = 0.0);
  void step();
  std::int64_t last_step() const { return n_; }

 private:
  Optimizer& opt_;
  double base_;
  std::int64_t t_max_;
  double eta_min_;
  std::int64_t n_ = 0;
};

}  // namespace ms::optim
