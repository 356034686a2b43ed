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

struct CrossEntropyOptions {
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

class MSELoss : public Cell<MSELoss> {
 public:
  explicit MSELoss(std::string reduction = "mean");
  Tensor construct(const Tensor& a, const Tensor& b) const { return mse_loss(a, b, reduction); }
  std::string reduction;
};

class L1Loss : public Cell<L1Loss> {
 public:
  explicit L1Loss(std::string reduction = "mean");
  Tensor construct(const Tensor& a, const Tensor& b) const { return l1_loss(a, b, reduction); }
  std::string reduction;
};

class CrossEntropyLoss : public Cell<CrossEntropyLoss> {
 public:
  explicit CrossEntropyLoss(CrossEntropyOptions o = {});
  Tensor construct(const Tensor& logits, const Tensor& labels) const {
    return cross_entropy(logits, labels, opts);
  }
  CrossEntropyOptions opts;
};

/// MindSpore's SoftmaxCrossEntropyWithLogits: `sparse` labels are class
/// indices, else one-hot / probabilities; reduction "none" by default (as MindSpore).
class SoftmaxCrossEntropyWithLogits : public Cell<SoftmaxCrossEntropyWithLogits> {
 public:
  explicit SoftmaxCrossEntropyWithLogits(bool sparse = false, std::string reduction = "none");
  Tensor construct(const Tensor& logits, const Tensor& labels) const;
  bool sparse;
  std::string reduction;
};

class NLLLoss : public Cell<NLLLoss> {
 public:
  explicit NLLLoss(std::string reduction = "mean");
  Tensor construct(const Tensor& logp, const Tensor& labels) const {
    return nll_loss(logp, labels, reduction);
  }
  std::string reduction;
};

class BCEWithLogitsLoss : public Cell<BCEWithLogitsLoss> {
 public:
  explicit BCEWithLogitsLoss(std::string reduction = "mean");
  Tensor construct(const Tensor& logits, const Tensor& targets) const {
    return binary_cross_entropy_with_logits(logits, targets, reduction);
  }
  std::string reduction;
};

}  // namespace ms::nn
