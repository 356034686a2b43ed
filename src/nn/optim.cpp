// Optimizers and schedules of ms/nn/optim.hpp.
#include "ms/nn/optim.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <unordered_map>

#include "ms/expr/expr.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::optim {

Optimizer::Optimizer(ParameterList params, double lr, std::string name)
    : params_(std::move(params)), state_(params_.size()), name_(std::move(name)) {
  MS_CHECK(!params_.empty(), ValueError, name_, ": the parameter list is empty");
  MS_CHECK(std::isfinite(lr) && lr >= 0.0, ValueError, name_, ": lr must be >= 0, got ", lr);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    MS_CHECK(params_[i].defined(), ValueError, name_, ": parameter ", i, " is undefined");
    MS_CHECK(dtype_is_float(params_[i].dtype()), TypeError, name_, ": parameter '",
             params_[i].name(), "' has dtype ", params_[i].dtype(), "; only floating ones train");
    for (std::size_t j = 0; j < i; ++j)
      MS_CHECK(!params_[i].same_as(params_[j]), ValueError, name_, ": parameter '",
               params_[i].name(), "' is listed twice");
  }
  lr_ = full(Shape{}, lr, float32);
  step_ = zeros(Shape{}, float32);
}

Optimizer::~Optimizer() = default;

double Optimizer::lr() const { return lr_.item<double>(); }

void Optimizer::set_lr(double lr) {
  MS_CHECK(std::isfinite(lr) && lr >= 0.0, ValueError, name_, ": lr must be >= 0, got ", lr);
  MS_CHECK(ops::active_tracer() == nullptr, ValueError, name_,
           ": set_lr inside ms::jit would be baked into the graph; call it between steps");
  lr_.fill_(lr);
}

std::int64_t Optimizer::step_count() const {
  return static_cast<std::int64_t>(step_.item<double>());
}

Tensor& Optimizer::add_state(std::size_t i, const std::string& name) {
  state_.at(i).emplace_back(name, zeros(params_[i].shape(), params_[i].dtype()));
  return state_[i].back().second;
}

void Optimizer::check_grads(const std::vector<Tensor>& grads) const {
  MS_CHECK(grads.size() == params_.size(), ValueError, name_, ".apply: ", grads.size(),
           " gradients for ", params_.size(), " parameters");
  for (std::size_t i = 0; i < grads.size(); ++i) {
    MS_CHECK(grads[i].defined(), ValueError, name_, ".apply: the gradient of '", params_[i].name(),
             "' is undefined");
    MS_CHECK(grads[i].shape() == params_[i].shape(), ShapeError, name_, ".apply: the gradient of '",
             params_[i].name(), "' has shape ", grads[i].shape(), ", the parameter ",
             params_[i].shape());
    MS_CHECK(grads[i].dtype() == params_[i].dtype(), TypeError, name_, ".apply: the gradient of '",
             params_[i].name(), "' has dtype ", grads[i].dtype(), ", the parameter ",
             params_[i].dtype());
  }
}

void Optimizer::apply(const std::vector<Tensor>& grads) {
  check_grads(grads);
  ms::assign(step_, step_ + 1.0);
  for (std::size_t i = 0; i < grads.size(); ++i) update(i, params_[i], grads[i]);
}

void Optimizer::apply(const std::vector<Tensor>& grads, const Tensor& condition) {
  MS_CHECK(condition.defined() && condition.rank() == 0 && condition.dtype() == bool_, ValueError,
           name_, ".apply: condition must be a 0-d bool tensor, got ",
           condition.defined() ? detail::str_cat(condition.dtype(), " ", condition.shape())
                               : std::string("an undefined tensor"));
  check_grads(grads);
  struct Gate {  // the condition in force for this call only, exceptions included
    Tensor& g;
    ~Gate() { g = Tensor(); }
  } gate{gate_};
  gate_ = condition;
  write(step_, step_ + 1.0);
  for (std::size_t i = 0; i < grads.size(); ++i) update(i, params_[i], grads[i]);
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  sd.emplace_back("step", step_);
  sd.emplace_back("lr", lr_);
  for (std::size_t i = 0; i < params_.size(); ++i)
    for (const auto& [n, t] : state_[i]) sd.emplace_back(params_[i].name() + "." + n, t);
  return sd;
}

void Optimizer::load_state_dict(const StateDict& in) {
  StateDict mine = state_dict();
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [k, t] : in)
    MS_CHECK(given.emplace(k, &t).second, ValueError, name_, ".load_state_dict: key '", k,
             "' appears twice");
  for (const auto& [k, t] : mine) {
    auto it = given.find(k);
    MS_CHECK(it != given.end(), ValueError, name_, ".load_state_dict: missing key '", k,
             "' (nothing was loaded)");
    const Tensor& s = *it->second;
    MS_CHECK(s.defined() && s.shape() == t.shape(), ShapeError, name_, ".load_state_dict: '", k,
             "' has shape ", t.shape(), " but ", s.shape(), " was given (nothing was loaded)");
    MS_CHECK(s.dtype() == t.dtype(), TypeError, name_, ".load_state_dict: '", k, "' has dtype ",
             t.dtype(), " but ", s.dtype(), " was given (nothing was loaded)");
  }
  MS_CHECK(in.size() == mine.size(), ValueError, name_,
           ".load_state_dict: ", in.size() - mine.size(), " unexpected keys (nothing was loaded)");
  std::vector<Tensor> src;
  for (const auto& [k, t] : mine) src.push_back(given.at(k)->clone());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    Tensor d = mine[i].second;
    d.copy_(src[i]);
  }
}

// ------------------------------------------------------------------ SGD, Momentum

SGD::SGD(ParameterList params, SGDOptions o) : Optimizer(std::move(params), o.lr, "SGD"), opts(o) {
  MS_CHECK(o.momentum >= 0.0, ValueError, "SGD: momentum must be >= 0, got ", o.momentum);
  MS_CHECK(o.weight_decay >= 0.0, ValueError, "SGD: weight_decay must be >= 0, got ",
           o.weight_decay);
  MS_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0), ValueError,
           "SGD: nesterov needs momentum > 0 and dampening 0");
  if (o.momentum > 0.0)
    for (std::size_t i = 0; i < params_.size(); ++i) add_state(i, "momentum_buffer");
}

void SGD::update(std::size_t i, const Parameter& p, const Tensor& g0) {
  Tensor g = opts.weight_decay > 0.0 ? Tensor(g0 + p * opts.weight_decay) : g0;
  if (opts.momentum > 0.0) {
    Tensor& v = state_[i][0].second;
    // PyTorch: the first step sets v = g (no dampening); later v = m v + (1 - d) g.
    if (opts.dampening == 0.0) {
      write(v, v * opts.momentum + g);
    } else {
      write(v, ms::where(step_ == 1.0, g, v * opts.momentum + g * (1.0 - opts.dampening)));
    }
    g = opts.nesterov ? Tensor(g + v * opts.momentum) : v;
  }
  write(p, p - lr_ * g);
}

Momentum::Momentum(ParameterList params, MomentumOptions o)
    : Optimizer(std::move(params), o.lr, "Momentum"), opts(o) {
  MS_CHECK(o.momentum >= 0.0, ValueError, "Momentum: momentum must be >= 0, got ", o.momentum);
  MS_CHECK(o.weight_decay >= 0.0, ValueError, "Momentum: weight_decay must be >= 0, got ",
           o.weight_decay);
  for (std::size_t i = 0; i < params_.size(); ++i) add_state(i, "moments");
}

void Momentum::update(std::size_t i, const Parameter& p, const Tensor& g0) {
  Tensor& v = state_[i][0].second;
  if (opts.weight_decay > 0.0) {
    const Tensor g = g0 + p * opts.weight_decay;
    write(v, v * opts.momentum + g);
    if (opts.use_nesterov)
      write(p, p - lr_ * (g + v * opts.momentum));
    else
      write(p, p - lr_ * v);
    return;
  }
  write(v, v * opts.momentum + g0);
  if (opts.use_nesterov)
    write(p, p - lr_ * (g0 + v * opts.momentum));
  else
    write(p, p - lr_ * v);
}

// ------------------------------------------------------------------ Adam, AdamW

Adam::Adam(ParameterList params, AdamOptions o) : Adam(std::move(params), o, "Adam", false) {}

Adam::Adam(ParameterList params, AdamOptions o, std::string name, bool decoupled)
    : Optimizer(std::move(params), o.lr, std::move(name)), opts(o), decoupled_(decoupled) {
  MS_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0, ValueError, name_,
           ": beta1 and beta2 must be in [0, 1), got ", o.beta1, " and ", o.beta2);
  MS_CHECK(o.eps > 0.0, ValueError, name_, ": eps must be > 0, got ", o.eps);
  MS_CHECK(o.weight_decay >= 0.0, ValueError, name_, ": weight_decay must be >= 0, got ",
           o.weight_decay);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    add_state(i, "moment1");
    add_state(i, "moment2");
  }
}

void Adam::update(std::size_t i, const Parameter& p, const Tensor& g0) {
  Tensor& m = state_[i][0].second;
  Tensor& v = state_[i][1].second;
  const Tensor g =
      (!decoupled_ && opts.weight_decay > 0.0) ? Tensor(g0 + p * opts.weight_decay) : g0;
  write(m, m * opts.beta1 + g * (1.0 - opts.beta1));
  write(v, v * opts.beta2 + ms::square(g) * (1.0 - opts.beta2));
  // Bias corrections from the step tensor: 1 - beta^t, folded into 0-d
  // factors as PyTorch does (step size lr / bc1, sqrt(v) / sqrt(bc2)), so
  // that each element costs one square root and one division.
  const Tensor bc1 = 1.0 - ms::exp(step_ * std::log(opts.beta1 > 0 ? opts.beta1 : 1e-300));
  const Tensor bc2 = 1.0 - ms::exp(step_ * std::log(opts.beta2 > 0 ? opts.beta2 : 1e-300));
  const Tensor step_size = lr_ / bc1, root_bc2 = ms::sqrt(bc2);
  // The decoupled decay in the same pass as the step: p (1 - lr wd) minus the step.
  const Tensor decayed = decoupled_ && opts.weight_decay > 0.0
                             ? Tensor(p * (1.0 - lr_ * opts.weight_decay))
                             : Tensor(p);
  write(p, decayed - step_size * (m / (ms::sqrt(v) / root_bc2 + opts.eps)));
}

AdamW::AdamW(ParameterList params, AdamWOptions o)
    : Adam(std::move(params),
           {.lr = o.lr,
            .beta1 = o.beta1,
            .beta2 = o.beta2,
            .eps = o.eps,
            .weight_decay = o.weight_decay},
           "AdamW", true) {}

// ------------------------------------------------------------------ schedules

StepLR::StepLR(Optimizer& opt, std::int64_t step_size, double gamma)
    : opt_(opt), base_(opt.lr()), step_size_(step_size), gamma_(gamma) {
  MS_CHECK(step_size > 0, ValueError, "StepLR: step_size must be > 0, got ", step_size);
  MS_CHECK(gamma > 0.0, ValueError, "StepLR: gamma must be > 0, got ", gamma);
}

void StepLR::step() {
  ++n_;
  opt_.set_lr(base_ * std::pow(gamma_, static_cast<double>(n_ / step_size_)));
}

double cosine_lr(double base, double min_lr, std::int64_t step, std::int64_t total) {
  MS_CHECK(total > 0, ValueError, "cosine_lr: total must be > 0, got ", total);
  const double t = static_cast<double>(std::min(step, total)) / static_cast<double>(total);
  return min_lr + (base - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, std::int64_t t_max, double eta_min)
    : opt_(opt), base_(opt.lr()), t_max_(t_max), eta_min_(eta_min) {
  MS_CHECK(t_max > 0, ValueError, "CosineAnnealingLR: t_max must be > 0, got ", t_max);
  MS_CHECK(eta_min >= 0.0 && eta_min <= base_, ValueError,
           "CosineAnnealingLR: eta_min must be in [0, lr = ", base_, "], got ", eta_min);
}

void CosineAnnealingLR::step() {
  ++n_;
  opt_.set_lr(cosine_lr(base_, eta_min_, n_, t_max_));
}

WarmupCosineLR::WarmupCosineLR(Optimizer& opt, std::int64_t warmup_steps, std::int64_t total_steps,
                               double min_lr, double start_factor)
    : opt_(opt),
      base_(opt.lr()),
      warmup_(warmup_steps),
      total_(total_steps),
      min_lr_(min_lr),
      start_factor_(start_factor) {
  MS_CHECK(warmup_steps >= 0 && warmup_steps < total_steps, ValueError,
           "WarmupCosineLR: expected 0 <= warmup_steps < total_steps, got warmup_steps ",
           warmup_steps, " and total_steps ", total_steps);
  MS_CHECK(min_lr >= 0.0 && min_lr <= base_, ValueError,
           "WarmupCosineLR: min_lr must be in [0, lr = ", base_, "], got ", min_lr);
  MS_CHECK(start_factor >= 0.0 && start_factor <= 1.0, ValueError,
           "WarmupCosineLR: start_factor must be in [0, 1], got ", start_factor);
  opt_.set_lr(lr_at(0));
}

double WarmupCosineLR::lr_at(std::int64_t n) const {
  if (n < warmup_)
    return base_ * (start_factor_ +
                    (1.0 - start_factor_) * static_cast<double>(n) / static_cast<double>(warmup_));
  return cosine_lr(base_, min_lr_, n - warmup_, total_ - warmup_);
}

void WarmupCosineLR::step() {
  ++n_;
  opt_.set_lr(lr_at(n_));
}

}  // namespace ms::optim

namespace ms::nn {

ClippedGrads clip_grad_norm(const std::vector<Tensor>& grads, double max_norm,
                            const ClipGradNormOptions& o) {
  constexpr std::string_view api = "clip_grad_norm";
  MS_CHECK(max_norm >= 0.0, ValueError, api, ": max_norm must be >= 0, got ", max_norm);
  MS_CHECK(o.norm_type > 0.0, ValueError, api, ": norm_type must be > 0 (or infinity), got ",
           o.norm_type);
  DType dt = float32;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    MS_CHECK(dtype_is_float(grads[i].dtype()), TypeError, api, ": gradient ", i,
             " must be floating, got ", grads[i].dtype());
    if (grads[i].dtype() == float64) dt = float64;
  }
  const bool inf = std::isinf(o.norm_type);
  const double p = o.norm_type;
  Tensor acc;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    const Tensor a = ms::abs(g.to(dt));
    // |g|^p summed (p = 2: squares); infinity: the largest |g|.
    const Tensor part = inf ? ms::max(a) : p == 2.0 ? sum(ms::square(a)) : sum(ms::pow(a, p));
    acc = !acc.defined() ? part : inf ? Tensor(ms::maximum(acc, part)) : Tensor(acc + part);
  }
  if (!acc.defined()) return {grads, zeros(Shape{}, dt)};
  const Tensor total = inf ? acc : p == 2.0 ? Tensor(ms::sqrt(acc)) : Tensor(ms::pow(acc, 1.0 / p));
  const Tensor factor = where(total > max_norm, max_norm / (total + 1e-6), 1.0);
  ClippedGrads out{{}, total};
  out.grads.reserve(grads.size());
  for (const Tensor& g : grads)
    out.grads.push_back(g.defined() ? Tensor(g * factor.to(g.dtype())) : g);
  return out;
}

}  // namespace ms::nn
