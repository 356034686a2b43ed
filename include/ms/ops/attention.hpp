// ms/ops/attention.hpp — fused scaled dot-product attention (PyTorch's
// F.scaled_dot_product_attention) and the backward op its gradient calls.
//
// Stage: ops. One entry (ms/ops/entry.hpp) defined in src/ops/attention.cpp
// with its gradient and samples, evaluated by the fused kernels of
// ms/kernels/attention.hpp: the scores are computed block by block with an
// online softmax, never as a [..., Tq, Tk] tensor.
//
//   ms::Tensor q = ms::randn({8, 4, 128, 64}), k = ..., v = ...;   // [B, H, T, E]
//   ms::Tensor y = ms::scaled_dot_product_attention(q, k, v, {.causal = true});
//   ms::Tensor z = ms::scaled_dot_product_attention(q, k, v, {.mask = keep});  // Bool [T, T]
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/ops/entry.hpp"

namespace ms {

/// Options of `scaled_dot_product_attention` (PyTorch's attn_mask, is_causal,
/// dropout_p and scale). Example: `{.mask = keep, .causal = true}`.
struct AttentionOptions {
  /// Bool (true keeps a key, as PyTorch) or floating (added to the scaled
  /// scores; q's dtype), broadcastable to [..., Tq, Tk]. A floating mask gets
  /// a gradient (summed over the axes it broadcasts along); a Bool one none.
  std::optional<Tensor> mask = {};
  /// Query row i sees keys 0 .. i + (Tk - Tq) only: the causal band aligned
  /// to the end of the keys, as incremental decoding needs (for Tq == Tk the
  /// usual lower triangle). With a mask, both apply.
  bool causal = false;
  /// The probability with which each attention weight is zeroed (the others
  /// scaled by 1 / (1 - dropout)), in [0, 1]; applied whenever > 0 (pass 0
  /// when not training). > 0 takes a slower path: the weights are
  /// materialized ([..., Tq, Tk]) and dropped by ms::dropout.
  double dropout = 0.0;
  /// The factor of q k^T; none: 1 / sqrt(E) (1 when E is 0).
  std::optional<double> scale = {};
};

}  // namespace ms

namespace ms::ops {

/// The attributes of scaled_dot_product_attention and its backward op.
struct AttentionAttrs {
  /// The causal band (AttentionOptions::causal).
  bool causal = false;
  /// The factor of q k^T; none: 1 / sqrt(E) (1 when E is 0).
  std::optional<double> scale = {};
  /// Each attribute by name, for dumps and export.
  static void fields(auto&& visit) {
    visit("causal", &AttentionAttrs::causal);
    visit("scale", &AttentionAttrs::scale);
  }
};

/// softmax(scale * q k^T + mask) v of q [..., Tq, E], k [..., Tk, E], v [...,
/// Tk, Ev] and an optional mask (4th input: Bool keeps where true, floating
/// is added; broadcastable to [..., Tq, Tk]); outputs out [..., Tq, Ev] and
/// the rows' logsumexp lse [..., Tq] (what the gradient recomputes the
/// weights from). The leading dims of q, k and v are equal (no broadcasting).
/// float32, float64, bfloat16 or float16, all alike: bfloat16 and float16 are
/// computed in float32 (out rounded once, lse float32). A query row that
/// keeps no key (fully masked, or before the causal band starts when Tq > Tk)
/// gets out 0 and lse -inf, and no gradient (PyTorch gives NaN there).
/// Gradients: q, k, v (through scaled_dot_product_attention_grad) and a
/// floating mask (through scaled_dot_product_attention_mask_grad); a Bool
/// mask gets none. Errors: TypeError for other or mixed dtypes and a mask
/// that is neither Bool nor q's dtype; ShapeError for ranks < 2 or unequal, leading dims that
/// differ, E of q and k or Tk of k and v that differ, a mask that does not broadcast; ValueError
/// for a scale that is not finite.
struct ScaledDotProductAttention {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "scaled_dot_product_attention";
  static constexpr OpKind kind = OpKind::Composite;
  static constexpr Arity arity{3, 4};
  static constexpr Props props{};
  using Attrs = AttentionAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// The gradients dq, dk, dv of scaled_dot_product_attention from inputs q,
/// k, v, dout [..., Tq, Ev], the forward's lse [..., Tq], delta [..., Tq] =
/// sum(dout * out, -1) minus lse's gradient, and the mask if the forward had
/// one; the weights are recomputed block by block from lse (the
/// flash-attention backward). lse and delta have lse's dtype (float32 for
/// bfloat16 and float16 inputs), dq, dk, dv q's. Checks as the forward, and
/// TypeError / ShapeError when dout, lse or delta do not have the forward's
/// output types. Its own gradient (second derivatives of attention)
/// recomposes the backward from ops on its inputs, materializing [..., Tq,
/// Tk]: correct, not fused.
struct ScaledDotProductAttentionGrad {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "scaled_dot_product_attention_grad";
  static constexpr OpKind kind = OpKind::Composite;
  static constexpr Arity arity{6, 7};
  static constexpr Props props{};
  using Attrs = AttentionAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// The gradient of a floating mask of scaled_dot_product_attention, of the
/// mask's shape: dS = P * (dout v^T - delta) summed over the axes the mask
/// broadcasts along, from the inputs of scaled_dot_product_attention_grad
/// (the mask required). A separate op, so that a mask whose gradient is not
/// used costs nothing (the dead node is dropped); fused, the weights
/// recomputed block by block, nothing of [..., Tq, Tk] allocated unless the
/// mask has that shape. TypeError for a Bool mask; other checks as the
/// backward op. Its gradient recomposes the backward from ops, as
/// scaled_dot_product_attention_grad's.
struct ScaledDotProductAttentionMaskGrad {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "scaled_dot_product_attention_mask_grad";
  static constexpr OpKind kind = OpKind::Composite;
  static constexpr Arity arity{7, 7};
  static constexpr Props props{};
  using Attrs = AttentionAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

}  // namespace ms::ops

namespace ms {

/// softmax(q k^T * scale + mask) v over the last two axes
/// (ms::ops::ScaledDotProductAttention, PyTorch's
/// F.scaled_dot_product_attention): q [..., Tq, E], k [..., Tk, E], v [...,
/// Tk, Ev] with equal leading dims give [..., Tq, Ev]. Rows that keep no key
/// give 0. Example: `ms::scaled_dot_product_attention(q, k, v, {.causal = true})`.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opts = {});

}  // namespace ms
