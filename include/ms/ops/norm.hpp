// ms/ops/norm.hpp — layer normalization as one op (MindSpore's LayerNorm
// primitive, PyTorch's F.layer_norm) and the backward op its gradient calls.
//
// Stage: ops. Entries (ms/ops/entry.hpp) defined in src/ops/norm.cpp with
// their gradients and samples, evaluated by the fused kernels of
// ms/kernels/norm.hpp: one pass per row for the forward, one for the backward,
// instead of the mean, variance and normalization written out as ops (and
// their gradients) each reading and writing the whole tensor.
//
//   ms::Tensor x = ms::randn({32, 128, 192});
//   ms::Tensor y = ms::layer_norm(x, gamma, beta);           // over the last axis
//   ms::Tensor z = ms::layer_norm(x, g2, b2, {.axis = 1});   // over axes 1 and 2: g2 [128, 192]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/ops/entry.hpp"

namespace ms::ops {

/// The attributes of layer_norm and its backward op.
struct LayerNormAttrs {
  /// The first normalized axis (negative: from the end): x's axes from it on
  /// are normalized together, and gamma and beta have their shape.
  std::int64_t axis = -1;
  /// Added to the variance (>= 0, finite).
  double eps = 1e-5;
  /// Each attribute by name, for dumps and export.
  static void fields(auto&& visit) {
    visit("axis", &LayerNormAttrs::axis);
    visit("eps", &LayerNormAttrs::eps);
  }
};

/// (x - mean) / sqrt(var + eps) * gamma + beta, mean and biased variance over
/// x's axes from `axis` on. Inputs x, gamma, beta of one floating dtype.
struct LayerNorm {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "layer_norm";
  static constexpr OpKind kind = OpKind::Composite;
  static constexpr Arity arity{3, 3};
  static constexpr Props props{};
  using Attrs = LayerNormAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static void run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> out);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// The gradients of layer_norm: inputs x, gamma and dy (the output's
/// gradient); outputs dx, dgamma, dbeta. Its own gradient is written out as
/// ops (second derivatives).
struct LayerNormGrad {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "layer_norm_grad";
  static constexpr OpKind kind = OpKind::Composite;
  static constexpr Arity arity{3, 3};
  static constexpr Props props{};
  using Attrs = LayerNormAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static void run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> out);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

}  // namespace ms::ops

namespace ms {

/// The options of `layer_norm`: `{.axis = -1, .eps = 1e-5}`.
struct LayerNormOptions {
  /// The first normalized axis (negative: from the end).
  std::int64_t axis = -1;
  /// Added to the variance.
  double eps = 1e-5;
};

/// Layer normalization over x's axes from `axis` on, scaled by gamma and
/// shifted by beta (both of the normalized axes' shape), in one fused kernel
/// with a fused gradient. Errors name layer_norm, the argument, expected and
/// given: ShapeError for a gamma or beta of another shape, TypeError for
/// another dtype or a non-floating x, IndexError for an axis out of range,
/// ValueError for a negative or non-finite eps.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                  const LayerNormOptions& opts = {});

}  // namespace ms
