// ms/ops/reduce.hpp — reductions over any axes (sum, mean, max, ..., argmax, var, logsumexp,
// all, any) and the softmax family.
//
// Stage: ops. One entry per op (ms/ops/entry.hpp), defined in src/ops/reduce.cpp with
// its gradient and samples; the kernels live in src/kernels/reduce.cpp. Conventions shared by the
// reductions:
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
#include <optional>
#include <utility>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/ops/entry.hpp"

namespace ms::ops {

/// Attributes of the reductions over a list of axes (empty: every axis).
struct AxesAttrs {
  /// The axes reduced (negative count from the end); empty: every axis.
  std::vector<std::int64_t> axes = {};
  /// Keep each reduced axis with size 1.
  bool keepdims = false;
  /// Each attribute by name, for dumps and export.
  static void fields(auto&& visit) {
    visit("axes", &AxesAttrs::axes);
    visit("keepdims", &AxesAttrs::keepdims);
  }
};
/// Attributes of argmax and argmin: one axis, or none (the flattened tensor).
struct ArgAttrs {
  /// The axis searched; none: the flattened tensor.
  std::optional<std::int64_t> axis = {};
  /// Keep the searched axis with size 1.
  bool keepdims = false;
  /// Each attribute by name, for dumps and export.
  static void fields(auto&& visit) {
    visit("axis", &ArgAttrs::axis);
    visit("keepdims", &ArgAttrs::keepdims);
  }
};
/// Attributes of var and std: axes, the correction `ddof` (>= 0), keepdims.
struct VarAttrs {
  /// The axes reduced; empty: every axis.
  std::vector<std::int64_t> axes = {};
  /// The divisor is N - ddof (0: population, 1: sample).
  std::int64_t ddof = 0;
  /// Keep each reduced axis with size 1.
  bool keepdims = false;
  /// Each attribute by name, for dumps and export.
  static void fields(auto&& visit) {
    visit("axes", &VarAttrs::axes);
    visit("ddof", &VarAttrs::ddof);
    visit("keepdims", &VarAttrs::keepdims);
  }
};
/// Attributes of softmax and log_softmax: the axis.
struct SoftmaxAttrs {
  /// The axis normalized (negative counts from the end).
  std::int64_t axis = -1;
  /// Each attribute by name, for dumps and export.
  static void fields(auto&& visit) { visit("axis", &SoftmaxAttrs::axis); }
};

/// Sum over `axes` (all when empty).
struct Sum {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "sum";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = AxesAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Arithmetic mean; floating inputs only.
struct Mean {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "mean";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = AxesAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Product over `axes`.
struct Prod {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "prod";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = AxesAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Maximum (NaN-propagating) over `axes`; the dtype is kept.
struct Max {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "max";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = AxesAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Minimum (NaN-propagating) over `axes`.
struct Min {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "min";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = AxesAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// True where every element over `axes` is nonzero.
struct All {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "all";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.differentiable = false};
  using Attrs = AxesAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static Samples samples();
  ///@}
};

/// True where some element over `axes` is nonzero.
struct Any {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "any";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.differentiable = false};
  using Attrs = AxesAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static Samples samples();
  ///@}
};

/// Index (int64) of the first maximum along `axis` (absent: of the flattened tensor); NaN counts as
/// the maximum.
struct Argmax {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "argmax";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.differentiable = false};
  using Attrs = ArgAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static Samples samples();
  ///@}
};

/// Index (int64) of the first minimum along `axis` (absent: flattened); NaN counts as the minimum.
struct Argmin {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "argmin";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.differentiable = false};
  using Attrs = ArgAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static Samples samples();
  ///@}
};

/// Variance over `axes` with `ddof` (see ms::var).
struct Var {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "var";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = VarAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Standard deviation, sqrt of ms::ops::Var.
struct Std {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "std";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = VarAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// log(sum(exp(x))) over `axes`, computed stably.
struct Logsumexp {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "logsumexp";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = AxesAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// exp(x - max) / sum(exp(x - max)) along `axis`, one fused kernel.
struct Softmax {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "softmax";
  static constexpr OpKind kind = OpKind::Composite;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = SoftmaxAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// x - max - log(sum(exp(x - max))) along `axis`, one fused kernel.
struct LogSoftmax {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "log_softmax";
  static constexpr OpKind kind = OpKind::Composite;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = SoftmaxAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

}  // namespace ms::ops

namespace ms {

/// Sum over `axes` (all when empty). Example: `ms::sum(x, {0, 2}, true)`.
inline Tensor sum(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false) {
  return ops::invoke1<ops::Sum>({x}, {std::move(axes), keepdims});
}
/// Arithmetic mean; floating inputs only. Example: `ms::mean(x, {-1})`.
inline Tensor mean(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false) {
  return ops::invoke1<ops::Mean>({x}, {std::move(axes), keepdims});
}
/// Product over `axes`. Example: `ms::prod(x, {1})`.
inline Tensor prod(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false) {
  return ops::invoke1<ops::Prod>({x}, {std::move(axes), keepdims});
}
/// Maximum (NaN-propagating) over `axes`; the dtype is kept. Example: `ms::max(x, {1}, true)`.
inline Tensor max(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false) {
  return ops::invoke1<ops::Max>({x}, {std::move(axes), keepdims});
}
/// Minimum (NaN-propagating) over `axes`. Example: `ms::min(x)`.
inline Tensor min(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false) {
  return ops::invoke1<ops::Min>({x}, {std::move(axes), keepdims});
}
/// True where every element over `axes` is nonzero. Example: `ms::all(mask, {1})`.
inline Tensor all(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false) {
  return ops::invoke1<ops::All>({x}, {std::move(axes), keepdims});
}
/// True where some element over `axes` is nonzero. Example: `ms::any(mask)`.
inline Tensor any(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false) {
  return ops::invoke1<ops::Any>({x}, {std::move(axes), keepdims});
}

/// Index (int64) of the first maximum along `axis`; NaN counts as the maximum.
/// Example: `ms::argmax(logits, 1)` gives the predicted class per row.
inline Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdims = false) {
  return ops::invoke1<ops::Argmax>({x}, {axis, keepdims});
}
/// Index of the first maximum of the flattened tensor (a rank-0 int64 tensor).
/// Example: `ms::argmax(x).item<std::int64_t>()`.
inline Tensor argmax(const Tensor& x) { return ops::invoke1<ops::Argmax>({x}, {}); }
/// Index (int64) of the first minimum along `axis`; NaN counts as the minimum.
/// Example: `ms::argmin(dist, -1)`.
inline Tensor argmin(const Tensor& x, std::int64_t axis, bool keepdims = false) {
  return ops::invoke1<ops::Argmin>({x}, {axis, keepdims});
}
/// Index of the first minimum of the flattened tensor. Example: `ms::argmin(x)`.
inline Tensor argmin(const Tensor& x) { return ops::invoke1<ops::Argmin>({x}, {}); }

/// Variance sum((x - mean)^2) / (N - ddof) over `axes`; `ddof` >= 0 is PyTorch's
/// `correction` (default 0, as MindSpore). N - ddof <= 0 gives inf (or NaN when every
/// deviation is 0), as PyTorch. Two passes (mean, then squared deviations) for accuracy.
/// Example: `ms::var(x, {0}, 1)` is the unbiased variance of each column.
inline Tensor var(const Tensor& x, std::vector<std::int64_t> axes = {}, std::int64_t ddof = 0,
                  bool keepdims = false) {
  return ops::invoke1<ops::Var>({x}, {std::move(axes), ddof, keepdims});
}
/// Standard deviation, sqrt(var(x, axes, ddof, keepdims)). `ms::std` does not clash with
/// the namespace `std` (a nested-name lookup ignores functions). Example: `ms::std(x, {1})`.
inline Tensor std(const Tensor& x, std::vector<std::int64_t> axes = {}, std::int64_t ddof = 0,
                  bool keepdims = false) {
  return ops::invoke1<ops::Std>({x}, {std::move(axes), ddof, keepdims});
}
/// log(sum(exp(x))) over `axes`, computed stably as m + log(sum(exp(x - m))) with m the
/// maximum. Bool and integer inputs are promoted to float32. Example: `ms::logsumexp(x, {1})`.
inline Tensor logsumexp(const Tensor& x, std::vector<std::int64_t> axes = {},
                        bool keepdims = false) {
  return ops::invoke1<ops::Logsumexp>({x}, {std::move(axes), keepdims});
}

/// exp(x - max) / sum(exp(x - max)) along `axis`; floating inputs only.
/// A row of all -inf (or holding NaN or +inf) gives NaN, as PyTorch. Example:
/// `ms::softmax(logits)`.
inline Tensor softmax(const Tensor& x, std::int64_t axis = -1) {
  return ops::invoke1<ops::Softmax>({x}, {axis});
}
/// x - max - log(sum(exp(x - max))) along `axis`. Example: `ms::log_softmax(logits, 1)`.
inline Tensor log_softmax(const Tensor& x, std::int64_t axis = -1) {
  return ops::invoke1<ops::LogSoftmax>({x}, {axis});
}

}  // namespace ms
