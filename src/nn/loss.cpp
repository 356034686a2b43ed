// Losses of ms/nn/loss.hpp.
#include "ms/nn/loss.hpp"

#include <optional>

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

// Position `flat` of a row-major tensor of shape `shape` as "[i, j, ...]".
std::string position_of(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(shape.rank()));
  for (std::int64_t a = shape.rank() - 1; a >= 0; --a) {
    idx[static_cast<std::size_t>(a)] = flat % shape[a];
    flat /= shape[a];
  }
  std::string out = "[";
  for (std::size_t a = 0; a < idx.size(); ++a) out += (a ? ", " : "") + std::to_string(idx[a]);
  return out + "]";
}

// Class labels of C classes: int32 or int64; concrete labels (also inside an
// eager ms::grad trace, where they are a constant) must lie in [0, C) or equal
// `ignore` (an IndexError naming the first bad position). Symbolic labels are
// checked by the ops when the graph runs.
void check_labels(const Tensor& labels, std::int64_t classes, std::string_view api,
                  std::optional<std::int64_t> ignore = std::nullopt) {
  MS_CHECK(labels.dtype() == int32 || labels.dtype() == int64, TypeError, api,
           ": class labels must be int32 or int64, got ", labels.dtype());
  if (labels.is_symbolic() || labels.numel() == 0) return;
  struct NoTrace {
    ops::Tracer* prev = ops::active_tracer();
    ms::detail::TracingSuspend core;
    NoTrace() { ops::set_active_tracer(nullptr); }
    ~NoTrace() { ops::set_active_tracer(prev); }
  } no_trace;
  const Tensor y = labels.to(int64).contiguous();
  const std::int64_t* v = y.data<std::int64_t>();
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    if ((v[i] >= 0 && v[i] < classes) || (ignore && v[i] == *ignore)) continue;
    detail::raise<IndexError>(
        api, ": class labels must be in [0, ", classes, ")",
        ignore ? detail::str_cat(" or equal ignore_index ", *ignore) : std::string(), ", got ",
        v[i], " at labels", position_of(i, labels.shape()));
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

namespace {

// Probability targets, the shape of the logits (classes on the last axis).
Tensor dense_cross_entropy(const Tensor& logits, const Tensor& probs, const CrossEntropyOptions& o,
                           std::string_view api) {
  MS_CHECK(!o.weight.defined(), ValueError, api, ": a class weight needs class-index labels");
  check_same(logits, probs, api, "logits", "probabilities");
  const std::int64_t axis = logits.rank() - 1;
  const Tensor logp = log_softmax(logits, axis);
  Tensor target = probs;
  if (o.label_smoothing > 0.0)
    target = target * (1.0 - o.label_smoothing) +
             o.label_smoothing / static_cast<double>(logits.dim(axis));
  return reduce_loss(-sum(target * logp, {axis}), o.reduction, api);
}

// -log_softmax(logits)[label] per position, labels already in [0, C): one fused
// op over the rows [N, C] (logits of any rank are flattened to rows and back).
Tensor sparse_nll(const Tensor& logits, const Tensor& labels) {
  if (logits.rank() == 2) return softmax_cross_entropy(logits, labels);
  if (logits.rank() == 1)
    return squeeze(softmax_cross_entropy(unsqueeze(logits, 0), unsqueeze(labels, 0)), 0);
  const Tensor per = softmax_cross_entropy(flatten(logits, 0, -2), flatten(labels));
  return per.reshape(labels.shape());
}

// "mean" over `denom` (the count or total weight of the kept positions): NaN
// when it is 0, as PyTorch, with a zero gradient (the division sees
// max(denom, 1)). The NaN is computed (0 / 0), not a constant, so that a graph
// generalized over dynamic sizes holds no NaN literal (which compares unequal
// to itself when the traces at two sizes are matched).
Tensor mean_over(const Tensor& total, const Tensor& denom) {
  const Tensor any = denom > 0.0;
  return where(any, total / where(any, denom, 1.0), denom / denom);
}

Tensor sparse_cross_entropy(const Tensor& logits, const Tensor& labels,
                            const CrossEntropyOptions& o, std::string_view api) {
  const std::int64_t axis = logits.rank() - 1;
  const std::int64_t classes = logits.dim(axis);
  if (!o.ignore_index && !o.weight.defined() && o.label_smoothing == 0.0)
    return reduce_loss(sparse_nll(logits, labels), o.reduction, api);
  // Ignored positions look up class 0 and are masked out of loss and gradient
  // (without ignore_index every position is kept: labels == labels).
  const Tensor keep = o.ignore_index ? Tensor(labels != *o.ignore_index) : Tensor(labels == labels);
  const Tensor safe = Tensor(where(keep, labels, 0)).to(labels.dtype());
  const Tensor mask = keep.to(logits.dtype());
  // The logits of ignored rows are read as 0, so that a row masked to -inf
  // (or overflowed) cannot turn the loss or its gradient into NaN.
  const Tensor x = o.ignore_index ? Tensor(where(unsqueeze(keep, -1), logits, 0.0)) : logits;
  Tensor per, denom;
  if (!o.weight.defined() && o.label_smoothing == 0.0) {
    per = sparse_nll(x, safe) * mask;
    denom = sum(mask);
  } else {
    MS_CHECK(!o.weight.defined() || (o.weight.rank() == 1 && o.weight.dim(0) == classes),
             ShapeError, api, ": weight must be [", classes, "], got ", o.weight.shape());
    // As PyTorch: (1 - s) * w[y] * -logp[y] + s / C * sum_c w[c] * -logp[c];
    // "mean" divides by sum_i w[y_i] over the kept positions.
    const Tensor logp = log_softmax(x, axis);
    const Tensor target = one_hot(safe, classes, logits.dtype());
    const Tensor w = o.weight.defined() ? o.weight : ones(Shape{classes}, logits.dtype());
    const Tensor wy = sum(target * w, {axis}) * mask;
    per = -sum(target * logp, {axis}) * wy;
    if (o.label_smoothing > 0.0)
      per = per * (1.0 - o.label_smoothing) -
            sum(logp * w, {axis}) * mask * (o.label_smoothing / static_cast<double>(classes));
    denom = sum(wy);
  }
  if (o.reduction == "mean") return mean_over(sum(per), denom);
  return reduce_loss(per, o.reduction, api);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, const CrossEntropyOptions& o) {
  constexpr std::string_view api = "cross_entropy";
  check_reduction(o.reduction, api);
  MS_CHECK(dtype_is_float(logits.dtype()), TypeError, api, ": logits must be floating, got ",
           logits.dtype());
  MS_CHECK(logits.rank() >= 1, ShapeError, api,
           ": logits must be [C], [N, C] or [B, T, ..., C] (classes on the last axis), got ",
           logits.shape());
  MS_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing < 1.0, ValueError, api,
           ": label_smoothing must be in [0, 1), got ", o.label_smoothing);
  if (dtype_is_float(labels.dtype())) return dense_cross_entropy(logits, labels, o, api);
  bool fits = labels.rank() == logits.rank() - 1;
  for (std::int64_t a = 0; fits && a < labels.rank(); ++a) fits = labels.dim(a) == logits.dim(a);
  MS_CHECK(fits, ShapeError, api, ": class labels ", labels.shape(),
           " must have the shape of logits ", logits.shape(),
           " without its last axis (classes are on the last axis, not axis 1 as in PyTorch "
           "for N-d input: move them there with ms::permute)");
  MS_CHECK(logits.dim(logits.rank() - 1) > 0, ShapeError, api,
           ": logits must have at least one class, got ", logits.shape());
  check_labels(labels, logits.dim(logits.rank() - 1), api, o.ignore_index);
  return sparse_cross_entropy(logits, labels, o, api);
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
  // MindSpore's cell ignores no label: -100 is out of range, as any other.
  return cross_entropy(logits, labels, {.reduction = reduction, .ignore_index = std::nullopt});
}
NLLLoss::NLLLoss(std::string r) : reduction(std::move(r)) { check_reduction(reduction, "NLLLoss"); }
BCEWithLogitsLoss::BCEWithLogitsLoss(std::string r) : reduction(std::move(r)) {
  check_reduction(reduction, "BCEWithLogitsLoss");
}

}  // namespace ms::nn
