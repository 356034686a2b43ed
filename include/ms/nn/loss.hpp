// ms/nn/loss.hpp — losses, as functions and as cells (MindSpore's nn.loss).
//
// Stage: nn. Every loss takes `reduction` "mean" (default), "sum" or "none"
// (ValueError otherwise) and is built from table ops, so it runs eagerly, is
// traced under ms::jit and is differentiated by ms::grad.
//
//   ms::Tensor loss = ms::nn::cross_entropy(logits, labels);          // labels int32 [N]
//   ms::Tensor lm = ms::nn::cross_entropy(logits_btv, tokens_bt);     // classes on the last axis
//   ms::Tensor l2 = ms::nn::mse_loss(pred, target, "sum");
//   ms::nn::CrossEntropyLoss ce({.label_smoothing = 0.1});  ms::Tensor l = ce(logits, labels);
#pragma once

#include <cstdint>
#include <optional>
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
  /// Class-index labels equal to this contribute neither loss nor gradient
  /// (PyTorch's and MindSpore's default -100, e.g. padding in a GPT batch);
  /// std::nullopt: no label is ignored, and the loss is the fused op alone.
  std::optional<std::int64_t> ignore_index = -100;
};

/// Cross entropy of `logits` against `labels`, classes on the LAST axis:
/// logits [C], [N, C] or [B, T, ..., C], labels the class indices (int32 /
/// int64, the shape of logits without its last axis: [], [N], [B, T, ...]) or
/// class probabilities (floating, the shape of logits). Note: PyTorch and
/// MindSpore put the classes on axis 1 for N-d input ([N, C, d1, ...]); ms
/// follows what a GPT training loop computes, logits [B, T, V] against
/// labels [B, T], with no reshape (the same loss as PyTorch's
/// `cross_entropy(logits.view(-1, V), labels.view(-1))`); permute other
/// layouts first. Computed as -log_softmax(logits)[label] per position (one
/// fused, numerically stable op), or -sum(target * log_softmax(logits)).
///
/// Class-index labels equal to `ignore_index` (default -100) add nothing to
/// the loss or the gradient; "mean" divides by the number of the other
/// positions (by the sum of their weights with `weight`), so when every
/// position is ignored "mean" is NaN, as PyTorch, with a zero gradient;
/// "sum" is 0, "none" is 0 at ignored positions.
///
/// Errors: ShapeError for mismatched shapes (naming both; e.g. [N, C, T]
/// logits against [N, T] labels), TypeError for non-floating logits,
/// ValueError for a bad reduction or smoothing; a class index outside [0, C)
/// that is not ignore_index raises IndexError naming its position and value
/// (`labels[1, 3]`) eagerly; inside a compiled graph the fused op raises
/// IndexError when the graph runs, naming the value and its row of the
/// flattened [N, C] logits.
///
///   ms::Tensor loss = ms::nn::cross_entropy(logits, targets);   // [B, T, V], [B, T] int64
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
