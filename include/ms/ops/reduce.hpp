// ms/ops/reduce.hpp — reductions over any axes (sum, mean, max, ..., argmax, var, logsumexp,
// all, any) and the softmax family.
//
// Stage: ops. Each function is one entry of the op table (`ms::ops::op("sum")`, ...); the
// kernels live in src/kernels/reduce.cpp. Conventions shared by the reductions:
//  - `axes` empty means every axis; negative axes count from the end; a repeated axis is a
//    ValueError, an out-of-range one an IndexError. A rank-0 tensor accepts axis 0 / -1.
//  - `keepdims` keeps each reduced axis as a size-1 dim.
//  - dtypes as PyTorch: sum/prod of bool or integers give int64 (wrapping on overflow);
//    max/min keep the dtype; all/any give bool; mean/var/std/softmax/log_softmax need a
//    floating input (TypeError otherwise); logsumexp promotes bool/integers to float32;
//    argmax/argmin give int64. float16/bfloat16 compute in float32 and round on store.
//    Complex inputs are a TypeError (all/any accept them: nonzero is true).
//  - Accuracy: float32 (and half) sums accumulate in float64; float64 sums use 16
//    interleaved accumulators over fixed chunks of the reduced range, combined in order.
//    Chunks depend only on the shapes, never on the thread count, so results are bitwise
//    identical for any `ms::set_num_threads`.
//  - Empty reductions: sum 0, prod 1, all true, any false, mean/var/std NaN, logsumexp -inf;
//    max/min/argmax/argmin over an empty axis are a ValueError (no identity).
//  - NaN propagates through max/min/logsumexp; argmax/argmin return the first NaN's index.
//
//   ms::Tensor x = ms::arange(0, 6).reshape({2, 3});
//   ms::Tensor s = ms::sum(x, {1});             // [3, 12]
//   ms::Tensor p = ms::softmax(x);              // rows sum to 1
#pragma once

#include <cstdint>
#include <vector>

#include "ms/core/tensor.hpp"

namespace ms {

/// Sum over `axes` (all when empty). Example: `ms::sum(x, {0, 2}, true)`.
Tensor sum(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false);
/// Arithmetic mean; floating inputs only. Example: `ms::mean(x, {-1})`.
Tensor mean(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false);
/// Product over `axes`. Example: `ms::prod(x, {1})`.
Tensor prod(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false);
/// Maximum (NaN-propagating) over `axes`; the dtype is kept. Example: `ms::max(x, {1}, true)`.
Tensor max(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false);
/// Minimum (NaN-propagating) over `axes`. Example: `ms::min(x)`.
Tensor min(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false);
/// True where every element over `axes` is nonzero. Example: `ms::all(mask, {1})`.
Tensor all(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false);
/// True where some element over `axes` is nonzero. Example: `ms::any(mask)`.
Tensor any(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false);

/// Index (int64) of the first maximum along `axis`; NaN counts as the maximum.
/// Example: `ms::argmax(logits, 1)` gives the predicted class per row.
Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdims = false);
/// Index of the first maximum of the flattened tensor (a rank-0 int64 tensor).
/// Example: `ms::argmax(x).item<std::int64_t>()`.
Tensor argmax(const Tensor& x);
/// Index (int64) of the first minimum along `axis`; NaN counts as the minimum.
/// Example: `ms::argmin(dist, -1)`.
Tensor argmin(const Tensor& x, std::int64_t axis, bool keepdims = false);
/// Index of the first minimum of the flattened tensor. Example: `ms::argmin(x)`.
Tensor argmin(const Tensor& x);

/// Variance sum((x - mean)^2) / (N - ddof) over `axes`; `ddof` >= 0 is PyTorch's
/// `correction` (default 0, as MindSpore). N - ddof <= 0 gives inf (or NaN when every
/// deviation is 0), as PyTorch. Two passes (mean, then squared deviations) for accuracy.
/// Example: `ms::var(x, {0}, 1)` is the unbiased variance of each column.
Tensor var(const Tensor& x, std::vector<std::int64_t> axes = {}, std::int64_t ddof = 0,
           bool keepdims = false);
/// Standard deviation, sqrt(var(x, axes, ddof, keepdims)). `ms::std` does not clash with
/// the namespace `std` (a nested-name lookup ignores functions). Example: `ms::std(x, {1})`.
Tensor std(const Tensor& x, std::vector<std::int64_t> axes = {}, std::int64_t ddof = 0,
           bool keepdims = false);
/// log(sum(exp(x))) over `axes`, computed stably as m + log(sum(exp(x - m))) with m the
/// maximum. Bool and integer inputs are promoted to float32. Example: `ms::logsumexp(x, {1})`.
Tensor logsumexp(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false);

/// exp(x - max) / sum(exp(x - max)) along `axis`; floating inputs only.
/// A row of all -inf (or holding NaN or +inf) gives NaN, as PyTorch. Example:
/// `ms::softmax(logits)`.
Tensor softmax(const Tensor& x, std::int64_t axis = -1);
/// x - max - log(sum(exp(x - max))) along `axis`. Example: `ms::log_softmax(logits, 1)`.
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1);

}  // namespace ms
