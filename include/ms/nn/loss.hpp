// ms/nn/loss.hpp — losses, as functions and as cells (MindSpore's nn.loss).
//
// Stage: nn. Every loss takes `reduction` "mean" (default), "sum" or "none"
// (ValueError otherwise) and is built from table ops, so it runs eagerly, is
// traced under ms::jit and is differentiated by ms::grad.
//
//   ms::Tensor loss = ms::nn::cross_entropy(logits, labels);          // labels int32 [N]
//   ms::Tensor l2 = ms::nn::mse_loss(pred, target, "sum");
//   ms::nn::CrossEntropyLoss ce({.label_smoothing = 0.1});  ms::Tensor l = ce(logits, labels);
#pragma once

#include <string>

#include "ms/core/tensor.hpp"
#include "ms/nn/cell.hpp"

namespace ms::nn {

/// The options of ms::nn::cross_entropy and ms::nn::CrossEntropyLoss:
/// `ms::nn::cross_entropy(logits, labels, {.label_smoothing = 0.1})`.
struct CrossEntropyOptions {
  /// The reduction: "mean", "sum" or "none".
  std::string reduction = "mean";
  double label_smoothing = 0.0;  ///< in [0, 1): targets (1 - s) * one_hot + s / C
  /// Optional per-class weight [C] (sparse labels only): each sample's loss is
  /// scaled by weight[label]; "mean" divides by the sum of those weights.
  Tensor weight = {};
};

/// Cross entropy of `logits` [N, C] (or [C]) against `labels`: class indices
/// (int32/int64 [N], values in [0, C)) or class probabilities (floating, the
/// shape of logits). Computed as -sum(target * log_softmax(logits)) per sample
/// (numerically stable). Errors: ShapeError for mismatched shapes, TypeError
/// for non-floating logits, ValueError for a bad reduction or smoothing;
/// an out-of-range class index raises IndexError eagerly (under ms::jit it
/// gives a zero target row, as one_hot does).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, const CrossEntropyOptions& o = {});
/// Negative log likelihood of log-probabilities `logp` [N, C] at `labels` [N].
Tensor nll_loss(const Tensor& logp, const Tensor& labels, const std::string& reduction = "mean");
/// (a - b)^2, reduced.
Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& reduction = "mean");
/// |a - b|, reduced.
Tensor l1_loss(const Tensor& a, const Tensor& b, const std::string& reduction = "mean");
/// Binary cross entropy on logits (stable: max(x, 0) - x * y + log1p(exp(-|x|))).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const std::string& reduction = "mean");
/// Applies a reduction name to per-element losses.
Tensor reduce_loss(const Tensor& loss, const std::string& reduction, std::string_view api);

/// The cell form of ms::nn::mse_loss: `ms::nn::MSELoss loss; ms::Tensor l = loss(pred, target);`
class MSELoss : public Cell<MSELoss> {
 public:
  /// Reduction `reduction`: "mean", "sum" or "none" (ValueError otherwise).
  explicit MSELoss(std::string reduction = "mean");
  /// mse_loss(a, b, reduction).
  Tensor construct(const Tensor& a, const Tensor& b) const { return mse_loss(a, b, reduction); }
  /// The reduction: "mean", "sum" or "none".
  std::string reduction;
};

/// The cell form of ms::nn::l1_loss.
class L1Loss : public Cell<L1Loss> {
 public:
  /// Reduction `reduction`: "mean", "sum" or "none" (ValueError otherwise).
  explicit L1Loss(std::string reduction = "mean");
  /// l1_loss(a, b, reduction).
  Tensor construct(const Tensor& a, const Tensor& b) const { return l1_loss(a, b, reduction); }
  /// The reduction: "mean", "sum" or "none".
  std::string reduction;
};

/// The cell form of ms::nn::cross_entropy.
class CrossEntropyLoss : public Cell<CrossEntropyLoss> {
 public:
  /// Options `o`; ValueError for an unknown reduction.
  explicit CrossEntropyLoss(CrossEntropyOptions o = {});
  /// cross_entropy(logits, labels, opts).
  Tensor construct(const Tensor& logits, const Tensor& labels) const {
    return cross_entropy(logits, labels, opts);
  }
  /// The options.
  CrossEntropyOptions opts;
};

/// MindSpore's SoftmaxCrossEntropyWithLogits: `sparse` labels are class
/// indices, else one-hot / probabilities; reduction "none" by default (as MindSpore).
class SoftmaxCrossEntropyWithLogits : public Cell<SoftmaxCrossEntropyWithLogits> {
 public:
  /// Labels are class indices when `sparse`; `reduction` "mean", "sum" or "none".
  explicit SoftmaxCrossEntropyWithLogits(bool sparse = false, std::string reduction = "none");
  /// The loss of `logits` [N, C] against `labels` (errors as ms::nn::cross_entropy).
  Tensor construct(const Tensor& logits, const Tensor& labels) const;
  /// Labels are class indices (else probabilities or one-hot rows).
  bool sparse;
  /// The reduction: "mean", "sum" or "none".
  std::string reduction;
};

/// The cell form of ms::nn::nll_loss.
class NLLLoss : public Cell<NLLLoss> {
 public:
  /// Reduction `reduction`: "mean", "sum" or "none" (ValueError otherwise).
  explicit NLLLoss(std::string reduction = "mean");
  /// nll_loss(logp, labels, reduction).
  Tensor construct(const Tensor& logp, const Tensor& labels) const {
    return nll_loss(logp, labels, reduction);
  }
  /// The reduction: "mean", "sum" or "none".
  std::string reduction;
};

/// The cell form of ms::nn::binary_cross_entropy_with_logits.
class BCEWithLogitsLoss : public Cell<BCEWithLogitsLoss> {
 public:
  /// Reduction `reduction`: "mean", "sum" or "none" (ValueError otherwise).
  explicit BCEWithLogitsLoss(std::string reduction = "mean");
  /// binary_cross_entropy_with_logits(logits, targets, reduction).
  Tensor construct(const Tensor& logits, const Tensor& targets) const {
    return binary_cross_entropy_with_logits(logits, targets, reduction);
  }
  /// The reduction: "mean", "sum" or "none".
  std::string reduction;
};

}  // namespace ms::nn
