// ms/kernels/norm.hpp — the fused CPU kernels of layer normalization.
//
// Stage: kernels (called by src/ops/norm.cpp after the op's `infer` has
// validated everything; these functions do no user-facing checks). x is seen
// as rows of d = gamma.numel() elements; each row is normalized on its own:
// its mean and biased variance, then y = (x - mean) * rsqrt(var + eps) *
// gamma + beta, in one pass over the row while it is in L1. The backward
// recomputes the row's statistics instead of keeping them. The parameters'
// gradients are sums over rows: each block of rows (blocks fixed by the shape)
// sums its own, and the blocks' sums are added in order, so results are
// bitwise the same for any thread count. float32 and float64 compute in their
// own type, bfloat16 and float16 in float32 (rounded once on store).
#pragma once

#include "ms/core/tensor.hpp"

namespace ms::kernels {

/// y = (x - mean) * rsqrt(var + eps) * gamma + beta over each row. x and y
/// contiguous with x's shape; gamma and beta contiguous with d elements; one
/// floating dtype.
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                        const Tensor& y);

/// The gradients of layer_norm_forward from dy (x's shape): dx (x's shape),
/// dgamma and dbeta (gamma's shape). All contiguous, one floating dtype.
void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, double eps,
                         const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta);

}  // namespace ms::kernels
