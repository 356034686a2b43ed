// Mixed precision of ms/nn/amp.hpp, and the to_float members of CellBase.
#include "ms/nn/amp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ms/expr/expr.hpp"
#include "ms/jit/jit.hpp"
#include "ms/nn/layers.hpp"
#include "ms/nn/loss.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/reduce.hpp"

namespace ms {
namespace detail {

const CellBase*& amp_entering() {
  thread_local const CellBase* entering = nullptr;
  return entering;
}

Tensor amp_cast(const Tensor& t, DType dtype) {
  if (!t.defined() || !dtype_is_float(t.dtype()) || t.dtype() == dtype) return t;
  return cast(t, dtype);
}

}  // namespace detail

Tensor CellBase::amp_tensor_call(bool cast_args, TensorCallFn f) {
  ops::CastPolicyScope scope(amp_policy_);
  const bool all = amp_policy_.mode == ops::CastPolicy::Mode::All;
  const DType to = amp_policy_.dtype;
  Args out;
  {
    // The token operator() takes for the call below: it runs the call itself.
    struct Enter {
      const CellBase* prev;
      explicit Enter(const CellBase* c) : prev(detail::amp_entering()) {
        detail::amp_entering() = c;
      }
      ~Enter() { detail::amp_entering() = prev; }
    } enter(this);
    if (cast_args) {
      Args in = f(TensorCallOp::kInputs, nullptr);
      if (all)
        for (Tensor& t : in) t = detail::amp_cast(t, to);
      out = f(TensorCallOp::kCallWith, &in);
    } else {
      out = f(TensorCallOp::kCall, nullptr);  // the ops still cast their inputs
    }
  }
  Tensor r = std::move(out[0]);
  if (all) r = detail::amp_cast(r, to);
  if (amp_output_fp32_) r = detail::amp_cast(r, float32);
  return r;
}

CellBase& CellBase::to_float(DType dtype) {
  MS_CHECK(dtype == float16 || dtype == bfloat16 || dtype == float32, ValueError, cls_name(),
           ".to_float: dtype must be float16, bfloat16 or float32, got ", dtype);
  apply([&](CellBase& c) { c.amp_policy_ = {ops::CastPolicy::Mode::All, dtype}; });
  compiler::bump_hook_version();  // graphs traced before hold the old casts
  return *this;
}

std::optional<DType> CellBase::get_mixed_precision_type() const {
  if (amp_policy_.mode != ops::CastPolicy::Mode::All) return std::nullopt;
  return amp_policy_.dtype;
}

namespace amp {
namespace detail {

// What auto_mixed_precision sets beyond to_float.
struct CellAccess {
  static void white_list(CellBase& net, DType dtype) {
    net.apply([&](CellBase& c) { c.amp_policy_ = {ops::CastPolicy::Mode::WhiteList, dtype}; });
  }
  static void finish(CellBase& net, const std::string& level, bool outputs_fp32) {
    net.amp_output_fp32_ = outputs_fp32;
    net.amp_level_ = level;
    compiler::bump_hook_version();
  }
};

bool black_listed(CellBase& c) {
  return dynamic_cast<nn::BatchNorm*>(&c) != nullptr ||
         dynamic_cast<nn::LayerNorm*>(&c) != nullptr || dynamic_cast<nn::Softmax*>(&c) != nullptr ||
         dynamic_cast<nn::LogSoftmax*>(&c) != nullptr ||
         dynamic_cast<nn::SoftmaxCrossEntropyWithLogits*>(&c) != nullptr ||
         dynamic_cast<nn::CrossEntropyLoss*>(&c) != nullptr ||
         dynamic_cast<nn::NLLLoss*>(&c) != nullptr ||
         dynamic_cast<nn::BCEWithLogitsLoss*>(&c) != nullptr ||
         dynamic_cast<nn::MSELoss*>(&c) != nullptr || dynamic_cast<nn::L1Loss*>(&c) != nullptr;
}

}  // namespace detail

std::vector<std::string> get_black_list() {
  return {"BatchNorm1d",      "BatchNorm2d", "LayerNorm",
          "Softmax",          "LogSoftmax",  "SoftmaxCrossEntropyWithLogits",
          "CrossEntropyLoss", "NLLLoss",     "BCEWithLogitsLoss",
          "MSELoss",          "L1Loss"};
}

std::vector<std::string> get_white_list() {
  std::vector<std::string> out;
  for (const ops::OpDef* d : ops::registry())
    if (d->kind == ops::OpKind::Linalg || d->kind == ops::OpKind::Conv) out.emplace_back(d->name);
  return out;
}

CellBase& auto_mixed_precision(CellBase& network, const std::string& amp_level, DType dtype) {
  static const std::vector<std::string> levels{"O0", "O1", "O2", "O3"};
  MS_CHECK(std::find(levels.begin(), levels.end(), amp_level) != levels.end(), ValueError,
           "auto_mixed_precision: amp_level must be \"O0\", \"O1\", \"O2\" or \"O3\", got \"",
           amp_level, "\"");
  MS_CHECK(dtype == float16 || dtype == bfloat16, ValueError,
           "auto_mixed_precision: dtype must be float16 or bfloat16, got ", dtype);
  if (amp_level == "O0") return network;
  if (!network.amp_level().empty()) {
    MS_CHECK(network.amp_level() == amp_level, ValueError,
             "auto_mixed_precision: the network already has amp_level \"", network.amp_level(),
             "\"; it cannot be changed to \"", amp_level, "\"");
    return network;  // the same level again: nothing to do (MindSpore warns)
  }
  if (amp_level == "O1") {
    detail::CellAccess::white_list(network, dtype);
  } else {
    network.to_float(dtype);
    if (amp_level == "O2")
      for (auto& [name, cell] : network.cells_and_names())
        if (detail::black_listed(*cell)) cell->to_float(float32);
  }
  detail::CellAccess::finish(network, amp_level, amp_level != "O1");
  return network;
}

Tensor all_finite(const std::vector<Tensor>& inputs) {
  // x * 0 is 0 for a finite x and NaN for inf or NaN, so the sum is 0 exactly
  // when every element is finite.
  Tensor total = zeros(Shape{}, float32);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& g = inputs[i];
    if (!g.defined()) continue;
    MS_CHECK(dtype_is_float(g.dtype()), TypeError, "all_finite: inputs[", i,
             "] must be floating, got ", g.dtype());
    total = total + cast(sum(g * 0.f), float32);
  }
  return Tensor(total == 0.f);
}

// ------------------------------------------------------------------ loss scale managers

LossScaleManager::LossScaleManager(double scale) : scale_(full(Shape{}, scale, float32)) {}

LossScaleManager::~LossScaleManager() = default;

double LossScaleManager::get_loss_scale() const { return scale_.item<double>(); }

Tensor LossScaleManager::scale(const Tensor& loss) const {
  return Tensor(loss * cast(scale_, loss.dtype()));
}

std::vector<Tensor> LossScaleManager::unscale(const std::vector<Tensor>& grads) const {
  const Tensor inv(1.f / scale_);
  std::vector<Tensor> out;
  out.reserve(grads.size());
  for (const Tensor& g : grads)
    out.push_back(g.defined() ? Tensor(g * cast(inv, g.dtype())) : Tensor());
  return out;
}

void LossScaleManager::update_loss_scale(bool overflow) {
  MS_CHECK(ops::active_tracer() == nullptr, ValueError,
           "update_loss_scale: overflow is a host bool, which ms::jit would bake into the graph; "
           "inside ms::jit call adjust(grads_finite) with the 0-d tensor of all_finite");
  adjust(full(Shape{}, overflow ? 0 : 1, bool_));
}

Tensor LossScaleManager::apply(optim::Optimizer& opt, const std::vector<Tensor>& scaled_grads) {
  const std::vector<Tensor> grads = unscale(scaled_grads);
  Tensor finite = all_finite(grads);
  if (get_drop_overflow_update())
    opt.apply(grads, finite);
  else
    opt.apply(grads);
  adjust(finite);
  return finite;
}

FixedLossScaleManager::FixedLossScaleManager(double loss_scale, bool drop_overflow_update)
    : LossScaleManager(loss_scale), drop_(drop_overflow_update) {
  MS_CHECK(std::isfinite(loss_scale) && loss_scale >= 1.0, ValueError,
           "FixedLossScaleManager: loss_scale must be finite and >= 1, got ", loss_scale);
}

void FixedLossScaleManager::adjust(const Tensor& grads_finite) {
  MS_CHECK(grads_finite.defined() && grads_finite.rank() == 0 && grads_finite.dtype() == bool_,
           ValueError, "FixedLossScaleManager.adjust: grads_finite must be a 0-d bool tensor");
}

DynamicLossScaleManager::DynamicLossScaleManager(double init_loss_scale, double scale_factor,
                                                 std::int64_t scale_window)
    : LossScaleManager(init_loss_scale),
      factor_(scale_factor),
      window_(scale_window),
      cur_iter_(full(Shape{}, 1.0, float32)),
      last_overflow_iter_(zeros(Shape{}, float32)) {
  MS_CHECK(std::isfinite(init_loss_scale) && init_loss_scale >= 1.0, ValueError,
           "DynamicLossScaleManager: init_loss_scale must be finite and >= 1, got ",
           init_loss_scale);
  MS_CHECK(std::isfinite(scale_factor) && scale_factor > 1.0, ValueError,
           "DynamicLossScaleManager: scale_factor must be > 1, got ", scale_factor);
  MS_CHECK(scale_window > 0, ValueError, "DynamicLossScaleManager: scale_window must be > 0, got ",
           scale_window);
}

// MindSpore's DynamicLossScaleUpdateCell: on overflow the scale becomes
// max(scale / factor, 1) and the window restarts; when cur_iter -
// last_overflow_iter reaches the window (finite steps in a row) it is
// multiplied by the factor (unless that overflows float32) and the window restarts.
void DynamicLossScaleManager::adjust(const Tensor& grads_finite) {
  MS_CHECK(grads_finite.defined() && grads_finite.rank() == 0 && grads_finite.dtype() == bool_,
           ValueError, "DynamicLossScaleManager.adjust: grads_finite must be a 0-d bool tensor");
  const float f = static_cast<float>(factor_);
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor down(maximum(scale_ / f, 1.f));
  const Tensor up(where(scale_ * f < inf, scale_ * f, scale_));
  const Tensor grow(cur_iter_ - last_overflow_iter_ >= static_cast<float>(window_));
  const Tensor new_scale(where(grads_finite, where(grow, up, scale_), down));
  const Tensor new_last(
      where(logical_or(logical_not(grads_finite), grow), cur_iter_, last_overflow_iter_));
  ms::assign(scale_, new_scale);
  ms::assign(last_overflow_iter_, new_last);
  ms::assign(cur_iter_, cur_iter_ + 1.f);
}

}  // namespace amp
}  // namespace ms
