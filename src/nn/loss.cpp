// Losses of ms/nn/loss.hpp.
#include "ms/nn/loss.hpp"

#include "ms/expr/expr.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/nn.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::nn {
namespace {

void check_reduction(const std::string& r, std::string_view api) {
  MS_CHECK(r == "mean" || r == "sum" || r == "none", ValueError, api,
           ": reduction must be \"mean\", \"sum\" or \"none\", got \"", r, "\"");
}

void check_same(const Tensor& a, const Tensor& b, std::string_view api, std::string_view an,
                std::string_view bn) {
  MS_CHECK(a.shape() == b.shape(), ShapeError, api, ": ", an, " ", a.shape(), " and ", bn, " ",
           b.shape(), " must have the same shape");
}

// Sparse labels [N] (or [] for one sample) of C classes -> float one-hot.
void check_labels(const Tensor& labels, std::int64_t classes, std::string_view api) {
  MS_CHECK(labels.dtype() == int32 || labels.dtype() == int64, TypeError, api,
           ": class labels must be int32 or int64, got ", labels.dtype());
  if (!labels.is_symbolic() && labels.numel() > 0) {
    // Concrete labels (also inside an eager ms::grad trace, where they are a
    // constant): an out-of-range label is an error (one_hot would give a zero row).
    struct NoTrace {
      ops::Tracer* prev = ops::active_tracer();
      ms::detail::TracingSuspend core;
      NoTrace() { ops::set_active_tracer(nullptr); }
      ~NoTrace() { ops::set_active_tracer(prev); }
    } no_trace;
    const Tensor lo = ms::min(labels), hi = ms::max(labels);
    const auto l = lo.item<std::int64_t>(), h = hi.item<std::int64_t>();
    MS_CHECK(l >= 0 && h < classes, IndexError, api, ": class labels must be in [0, ", classes,
             "), got values in [", l, ", ", h, "]");
  }
}

Tensor one_hot_of(const Tensor& labels, std::int64_t classes, DType dtype, std::string_view api) {
  check_labels(labels, classes, api);
  return one_hot(labels, classes, dtype);
}

}  // namespace

Tensor reduce_loss(const Tensor& loss, const std::string& reduction, std::string_view api) {
  check_reduction(reduction, api);
  if (reduction == "mean") return mean(loss);
  if (reduction == "sum") return sum(loss);
  return loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, const CrossEntropyOptions& o) {
  constexpr std::string_view api = "cross_entropy";
  check_reduction(o.reduction, api);
  MS_CHECK(dtype_is_float(logits.dtype()), TypeError, api, ": logits must be floating, got ",
           logits.dtype());
  MS_CHECK(logits.rank() == 1 || logits.rank() == 2, ShapeError, api,
           ": logits must be [N, C] or [C], got ", logits.shape());
  MS_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing < 1.0, ValueError, api,
           ": label_smoothing must be in [0, 1), got ", o.label_smoothing);
  const std::int64_t axis = logits.rank() - 1;
  const std::int64_t classes = logits.dim(axis);
  const bool sparse = !dtype_is_float(labels.dtype());
  if (sparse) {
    MS_CHECK(labels.rank() == logits.rank() - 1 &&
                 (labels.rank() == 0 || labels.dim(0) == logits.dim(0)),
             ShapeError, api, ": class labels ", labels.shape(), " must be [N] for logits ",
             logits.shape());
    check_labels(labels, classes, api);
    // The common case: one fused, numerically stable op.
    if (logits.rank() == 2 && !o.weight.defined() && o.label_smoothing == 0.0)
      return reduce_loss(softmax_cross_entropy(logits, labels), o.reduction, api);
  }
  const Tensor logp = log_softmax(logits, axis);
  Tensor target;
  if (sparse) {
    target = one_hot(labels, classes, logits.dtype());
  } else {
    check_same(logits, labels, api, "logits", "probabilities");
    target = labels;
  }
  if (o.weight.defined()) {
    MS_CHECK(sparse, ValueError, api, ": a class weight needs class-index labels");
    MS_CHECK(o.weight.rank() == 1 && o.weight.dim(0) == classes, ShapeError, api,
             ": weight must be [", classes, "], got ", o.weight.shape());
    // As PyTorch: (1 - s) * w[y] * -logp[y] + s / C * sum_c w[c] * -logp[c];
    // "mean" divides by sum_i w[y_i].
    const Tensor wy = sum(target * o.weight, {axis});
    Tensor per = -sum(target * logp, {axis}) * wy;
    if (o.label_smoothing > 0.0)
      per = per * (1.0 - o.label_smoothing) -
            sum(logp * o.weight, {axis}) * (o.label_smoothing / static_cast<double>(classes));
    if (o.reduction == "mean") return sum(per) / sum(wy);
    return reduce_loss(per, o.reduction, api);
  }
  if (o.label_smoothing > 0.0)
    target = target * (1.0 - o.label_smoothing) + o.label_smoothing / static_cast<double>(classes);
  Tensor per = -sum(target * logp, {axis});
  return reduce_loss(per, o.reduction, api);
}

Tensor nll_loss(const Tensor& logp, const Tensor& labels, const std::string& reduction) {
  constexpr std::string_view api = "nll_loss";
  check_reduction(reduction, api);
  MS_CHECK(logp.rank() == 2, ShapeError, api, ": log-probabilities must be [N, C], got ",
           logp.shape());
  MS_CHECK(labels.rank() == 1 && labels.dim(0) == logp.dim(0), ShapeError, api, ": labels ",
           labels.shape(), " must be [", logp.dim(0), "]");
  const Tensor t = one_hot_of(labels, logp.dim(1), logp.dtype(), api);
  return reduce_loss(-sum(t * logp, {1}), reduction, api);
}

Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& reduction) {
  check_reduction(reduction, "mse_loss");
  check_same(a, b, "mse_loss", "prediction", "target");
  return reduce_loss(ms::square(a - b), reduction, "mse_loss");
}

Tensor l1_loss(const Tensor& a, const Tensor& b, const std::string& reduction) {
  check_reduction(reduction, "l1_loss");
  check_same(a, b, "l1_loss", "prediction", "target");
  return reduce_loss(ms::abs(a - b), reduction, "l1_loss");
}

Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y,
                                        const std::string& reduction) {
  constexpr std::string_view api = "binary_cross_entropy_with_logits";
  check_reduction(reduction, api);
  check_same(x, y, api, "logits", "targets");
  MS_CHECK(dtype_is_float(x.dtype()), TypeError, api, ": logits must be floating, got ", x.dtype());
  return reduce_loss(ms::relu(x) - x * y + ms::log1p(ms::exp(-ms::abs(x))), reduction, api);
}

MSELoss::MSELoss(std::string r) : reduction(std::move(r)) { check_reduction(reduction, "MSELoss"); }
L1Loss::L1Loss(std::string r) : reduction(std::move(r)) { check_reduction(reduction, "L1Loss"); }
CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions o) : opts(std::move(o)) {
  check_reduction(opts.reduction, "CrossEntropyLoss");
}
SoftmaxCrossEntropyWithLogits::SoftmaxCrossEntropyWithLogits(bool s, std::string r)
    : sparse(s), reduction(std::move(r)) {
  check_reduction(reduction, "SoftmaxCrossEntropyWithLogits");
}
Tensor SoftmaxCrossEntropyWithLogits::construct(const Tensor& logits, const Tensor& labels) const {
  MS_CHECK(sparse != dtype_is_float(labels.dtype()), TypeError,
           "SoftmaxCrossEntropyWithLogits: sparse = ", sparse ? "true" : "false", " needs ",
           sparse ? "integer class labels" : "floating one-hot labels", ", got ", labels.dtype());
  return cross_entropy(logits, labels, {.reduction = reduction});
}
NLLLoss::NLLLoss(std::string r) : reduction(std::move(r)) { check_reduction(reduction, "NLLLoss"); }
BCEWithLogitsLoss::BCEWithLogitsLoss(std::string r) : reduction(std::move(r)) {
  check_reduction(reduction, "BCEWithLogitsLoss");
}

}  // namespace ms::nn
