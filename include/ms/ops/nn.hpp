// ms/ops/nn.hpp — neural-network ops (group `nn`): conv2d, max_pool2d, avg_pool2d,
// softmax_cross_entropy, and the backward ops their gradients call.
//
// Stage: ops. One entry per op (ms/ops/entry.hpp), defined in src/ops/nn.cpp
// with its gradient and samples, evaluated by the kernels of
// ms/kernels/{conv,pool}.hpp. Layout is NCHW, and sizes follow PyTorch's
// formulas, so models port over unchanged. The options structs are the
// entries' attributes: their defaults are written here only.
//
//   ms::Tensor y = ms::conv2d(x, w, b, {.padding = {1}});   // [64,32,28,28] -> [64,O,28,28]
//   ms::Tensor p = ms::max_pool2d(y, {.kernel = {2, 2}});   // -> [64,O,14,14]
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/ops/entry.hpp"

namespace ms {

/// Options of `conv2d` and `nn::Conv2d`. Each list holds one value (both
/// spatial axes) or two (height, width).
/// Example: `ms::Conv2dOptions{.stride = {2}, .padding = {1, 1}}`.
struct Conv2dOptions {
  std::vector<std::int64_t> stride{1, 1};    ///< > 0
  std::vector<std::int64_t> padding{0, 0};   ///< zero padding on each side, >= 0
  std::vector<std::int64_t> dilation{1, 1};  ///< spacing of kernel taps, > 0
  std::int64_t groups = 1;                   ///< divides C and O
  /// The fields by name (serialized attributes of the conv2d op).
  static void fields(auto&& visit) {
    visit("stride", &Conv2dOptions::stride);
    visit("padding", &Conv2dOptions::padding);
    visit("dilation", &Conv2dOptions::dilation);
    visit("groups", &Conv2dOptions::groups);
  }
};

/// Options of `max_pool2d` and `nn::MaxPool2d`. `kernel`, `stride` (empty:
/// the kernel), `padding` and `dilation` hold 1 value (both axes) or 2.
/// Example: `ms::max_pool2d(x, {.kernel = {3}, .stride = {2}, .padding = {1}})`.
struct MaxPool2dOptions {
  std::vector<std::int64_t> kernel = {};     ///< window size, > 0 (required)
  std::vector<std::int64_t> stride = {};     ///< > 0; empty: the kernel
  std::vector<std::int64_t> padding{0, 0};   ///< -inf padding, at most kernel / 2
  std::vector<std::int64_t> dilation{1, 1};  ///< spacing of window taps, > 0
  bool ceil_mode = false;                    ///< ceil instead of floor for the output size
  /// The fields by name (serialized attributes of the max_pool2d op).
  static void fields(auto&& visit) {
    visit("kernel", &MaxPool2dOptions::kernel);
    visit("stride", &MaxPool2dOptions::stride);
    visit("padding", &MaxPool2dOptions::padding);
    visit("dilation", &MaxPool2dOptions::dilation);
    visit("ceil_mode", &MaxPool2dOptions::ceil_mode);
  }
};

/// Options of `avg_pool2d` and `nn::AvgPool2d` (as MaxPool2dOptions, without
/// dilation, with the divisor's rule).
/// Example: `ms::avg_pool2d(x, {.kernel = {3}, .padding = {1}, .count_include_pad = false})`.
struct AvgPool2dOptions {
  std::vector<std::int64_t> kernel = {};    ///< window size, > 0 (required)
  std::vector<std::int64_t> stride = {};    ///< > 0; empty: the kernel
  std::vector<std::int64_t> padding{0, 0};  ///< zero padding, at most kernel / 2
  bool ceil_mode = false;                   ///< ceil instead of floor for the output size
  bool count_include_pad = true;            ///< the divisor counts the padding
  /// The fields by name (serialized attributes of the avg_pool2d op).
  static void fields(auto&& visit) {
    visit("kernel", &AvgPool2dOptions::kernel);
    visit("stride", &AvgPool2dOptions::stride);
    visit("padding", &AvgPool2dOptions::padding);
    visit("ceil_mode", &AvgPool2dOptions::ceil_mode);
    visit("count_include_pad", &AvgPool2dOptions::count_include_pad);
  }
};

}  // namespace ms

namespace ms::ops {

/// 2-D convolution (cross-correlation, as PyTorch's `conv2d`) of x [N, C, H, W]
/// with weight [O, C / groups, KH, KW] and an optional bias [O]; the output is
/// [N, O, OH, OW] with OH = (H + 2 * pad_h - dil_h * (KH - 1) - 1) / stride_h + 1
/// (likewise OW). Runs on the algorithm kernels::conv2d_algorithm picks
/// (libxsmm's direct kernels, Winograd or im2col + GEMM), split over images.
/// dtypes (all inputs alike): float32, float64, int32, int64; bfloat16 on
/// libxsmm's bf16 kernels (float32 sums, one rounding) where they take the
/// shape, else, as float16, in float32. Errors: TypeError for mixed or other dtypes;
/// ShapeError for ranks other than 4, channel counts that do not match or are
/// not divisible by `groups`, a bias that is not [O], a kernel larger than the
/// padded input; ValueError for a stride, dilation or groups <= 0, a negative
/// padding, option lists not of 1 or 2 values, sizes that overflow int64.
struct Conv2d {
  /// The op-table name.
  static constexpr std::string_view name = "conv2d";
  /// The name in graph dumps.
  static constexpr std::string_view ir_name = "Conv2D";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Conv;
  /// How many inputs it takes.
  static constexpr Arity arity{2, 3};
  /// What passes and tests may assume of it.
  static constexpr Props props{};
  /// Its attributes.
  using Attrs = Conv2dOptions;
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// 2-D max pooling of x [N, C, H, W] or [C, H, W] (as PyTorch, a 3-D input is
/// one image). Output size as PyTorch:
/// OH = floor_or_ceil((H + 2 * pad - dil * (K - 1) - 1) / stride) + 1, where with
/// `ceil_mode` a last window that would start in the right padding is dropped.
/// Padding is -inf (never the maximum); a NaN in a window propagates.
/// dtypes: float32, float64, int8, int16, int32, int64, uint8; float16 and
/// bfloat16 (computed in float32, exact). Errors: TypeError for other dtypes;
/// ShapeError for other ranks, an empty H or W, an output size <= 0;
/// ValueError for a kernel, stride or dilation <= 0, a negative padding or one
/// over kernel / 2, lists not of 1 or 2 values, sizes that overflow int64.
struct MaxPool2d {
  /// The op-table name.
  static constexpr std::string_view name = "max_pool2d";
  /// The name in graph dumps.
  static constexpr std::string_view ir_name = "MaxPool2D";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Pool;
  /// How many inputs it takes.
  static constexpr Arity arity{1, 1};
  /// What passes and tests may assume of it.
  static constexpr Props props{};
  /// Its attributes.
  using Attrs = MaxPool2dOptions;
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// 2-D average pooling of x [N, C, H, W] or [C, H, W], with PyTorch's sizes
/// (as `max_pool2d`, without dilation) and divisor: the window clipped to the
/// padded input, counting the padding when `count_include_pad`, else only the
/// input elements. dtypes: float32, float64; float16 and bfloat16 compute in
/// float32. Errors as `max_pool2d`, and TypeError for integer inputs.
struct AvgPool2d {
  /// The op-table name.
  static constexpr std::string_view name = "avg_pool2d";
  /// The name in graph dumps.
  static constexpr std::string_view ir_name = "AvgPool2D";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Pool;
  /// How many inputs it takes.
  static constexpr Arity arity{1, 1};
  /// What passes and tests may assume of it.
  static constexpr Props props{};
  /// Its attributes.
  using Attrs = AvgPool2dOptions;
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// Cross-entropy of each row of `logits` [N, C] (floating) against its class
/// label in `labels` [N] (int32 or int64): logsumexp(row) - row[label], one
/// fused, numerically stable pass (MindSpore's SparseSoftmaxCrossEntropyWithLogits
/// without the reduction); the result is [N] in the logits' dtype (float16 and
/// bfloat16 computed in float32). A label outside [0, C) is an ms::IndexError
/// naming the row, also when a compiled graph runs. Its gradient is
/// (softmax(logits) - one_hot(labels)) * grad.
struct SoftmaxCrossEntropy {
  /// The op-table name.
  static constexpr std::string_view name = "softmax_cross_entropy";
  /// The name in graph dumps.
  static constexpr std::string_view ir_name = "SoftmaxCrossEntropy";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Composite;
  /// How many inputs it takes.
  static constexpr Arity arity{2, 2};
  /// What passes and tests may assume of it.
  static constexpr Props props{};
  /// Its attributes.
  using Attrs = NoAttrs;
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

// ---------------------------------------------------------------- gradients
// The backward ops of the entries above. Each takes the forward's options,
// checks the forward op with its own rules and that grad_out has the forward
// output's shape (ShapeError otherwise), and is floating only (float16 and
// bfloat16 compute in float32; TypeError for other or mixed dtypes). They are
// differentiable themselves (linear in grad_out), so grad(grad(f)) and
// gradient penalties go through them.

/// The gradient of `conv2d`'s input [N, C, H, W] = input_size, given the
/// output's gradient grad_out [N, O, OH, OW] and the weight: the transposed
/// convolution (kernels::conv2d_grad_input: libxsmm's direct kernels,
/// Winograd, or GEMM W^T G + col2im per image). input_size: 4 sizes >= 0
/// (ValueError for a negative one).
struct Conv2dGradInput {
  /// The op-table name.
  static constexpr std::string_view name = "conv2d_grad_input";
  /// The name in graph dumps.
  static constexpr std::string_view ir_name = "Conv2DGradInput";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Conv;
  /// How many inputs it takes.
  static constexpr Arity arity{2, 2};
  /// What passes and tests may assume of it.
  static constexpr Props props{};
  /// conv2d's options, and the shape of the input whose gradient is computed.
  struct Attrs : Conv2dOptions {
    /// The input's shape [N, C, H, W].
    std::vector<std::int64_t> input_size = {};
    /// Each attribute's name and member, for dumps and export.
    static void fields(auto&& visit) {
      Conv2dOptions::fields(visit);
      visit("input_size", &Attrs::input_size);
    }
  };
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// The gradient of `conv2d`'s weight [O, C / groups, KH, KW] = weight_size,
/// given the input x and the output's gradient grad_out: the sum over images
/// of G cols^T (kernels::conv2d_grad_weight: libxsmm's direct kernels,
/// Winograd, or GEMM on im2col columns). The batch is summed in a fixed order
/// (results do not depend on the thread count).
struct Conv2dGradWeight {
  /// The op-table name.
  static constexpr std::string_view name = "conv2d_grad_weight";
  /// The name in graph dumps.
  static constexpr std::string_view ir_name = "Conv2DGradWeight";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Conv;
  /// How many inputs it takes.
  static constexpr Arity arity{2, 2};
  /// What passes and tests may assume of it.
  static constexpr Props props{};
  /// conv2d's options, and the shape of the weight whose gradient is computed.
  struct Attrs : Conv2dOptions {
    /// The weight's shape [O, C / groups, KH, KW].
    std::vector<std::int64_t> weight_size = {};
    /// Each attribute's name and member, for dumps and export.
    static void fields(auto&& visit) {
      Conv2dOptions::fields(visit);
      visit("weight_size", &Attrs::weight_size);
    }
  };
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// The gradient of `max_pool2d(x, ...)`'s input: each grad_out element goes to
/// the element its window's maximum came from (the first one on ties, the
/// last NaN, as the forward), recomputed from x; overlapping windows add up.
struct MaxPool2dGrad {
  /// The op-table name.
  static constexpr std::string_view name = "max_pool2d_grad";
  /// The name in graph dumps.
  static constexpr std::string_view ir_name = "MaxPool2DGrad";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Pool;
  /// How many inputs it takes.
  static constexpr Arity arity{2, 2};
  /// What passes and tests may assume of it.
  static constexpr Props props{};
  /// Its attributes.
  using Attrs = MaxPool2dOptions;
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// The gradient of `avg_pool2d`'s input of shape input_size ([C, H, W] or
/// [N, C, H, W]): each grad_out element divided by its window's divisor is
/// added to the window's input elements.
struct AvgPool2dGrad {
  /// The op-table name.
  static constexpr std::string_view name = "avg_pool2d_grad";
  /// The name in graph dumps.
  static constexpr std::string_view ir_name = "AvgPool2DGrad";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Pool;
  /// How many inputs it takes.
  static constexpr Arity arity{1, 1};
  /// What passes and tests may assume of it.
  static constexpr Props props{};
  /// avg_pool2d's options, and the shape of the input whose gradient is computed.
  struct Attrs : AvgPool2dOptions {
    /// The input's shape.
    std::vector<std::int64_t> input_size = {};
    /// Each attribute's name and member, for dumps and export.
    static void fields(auto&& visit) {
      AvgPool2dOptions::fields(visit);
      visit("input_size", &Attrs::input_size);
    }
  };
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

}  // namespace ms::ops

namespace ms {

/// 2-D convolution of x [N, C, H, W] with weight [O, C / groups, KH, KW] and
/// an optional bias [O] (ms::ops::Conv2d).
/// Example: `ms::conv2d(ms::ones({1, 3, 8, 8}), ms::ones({4, 3, 3, 3}))` is [1, 4, 6, 6].
inline Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = {},
                     const Conv2dOptions& opts = {}) {
  if (bias && bias->defined()) return ops::invoke1<ops::Conv2d>({x, weight, *bias}, opts);
  return ops::invoke1<ops::Conv2d>({x, weight}, opts);
}

/// 2-D max pooling of x [N, C, H, W] or [C, H, W] (ms::ops::MaxPool2d).
/// Example: `ms::max_pool2d(x, {.kernel = {2, 2}})` halves H and W.
inline Tensor max_pool2d(const Tensor& x, const MaxPool2dOptions& opts) {
  return ops::invoke1<ops::MaxPool2d>({x}, opts);
}

/// 2-D average pooling of x [N, C, H, W] or [C, H, W] (ms::ops::AvgPool2d).
/// Example: `ms::avg_pool2d(x, {.kernel = {3}, .stride = {1}, .padding = {1}})`.
inline Tensor avg_pool2d(const Tensor& x, const AvgPool2dOptions& opts) {
  return ops::invoke1<ops::AvgPool2d>({x}, opts);
}

/// Cross-entropy of each row of logits [N, C] against its label in labels [N]
/// (ms::ops::SoftmaxCrossEntropy).
/// Example: `ms::mean(ms::softmax_cross_entropy(logits, labels))`.
inline Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& labels) {
  return ops::invoke1<ops::SoftmaxCrossEntropy>({logits, labels}, {});
}

/// conv2d's input gradient (ms::ops::Conv2dGradInput).
/// Example: `ms::conv2d_grad_input(g, w, x.shape(), {.padding = {1}})`.
inline Tensor conv2d_grad_input(const Tensor& grad_out, const Tensor& weight,
                                const Shape& input_size, const Conv2dOptions& opts = {}) {
  ops::Conv2dGradInput::Attrs a;
  static_cast<Conv2dOptions&>(a) = opts;
  a.input_size = input_size.to_vector();
  return ops::invoke1<ops::Conv2dGradInput>({grad_out, weight}, a);
}

/// conv2d's weight gradient (ms::ops::Conv2dGradWeight).
/// Example: `ms::conv2d_grad_weight(x, g, w.shape(), {.padding = {1}})`.
inline Tensor conv2d_grad_weight(const Tensor& x, const Tensor& grad_out, const Shape& weight_size,
                                 const Conv2dOptions& opts = {}) {
  ops::Conv2dGradWeight::Attrs a;
  static_cast<Conv2dOptions&>(a) = opts;
  a.weight_size = weight_size.to_vector();
  return ops::invoke1<ops::Conv2dGradWeight>({x, grad_out}, a);
}

/// max_pool2d's input gradient (ms::ops::MaxPool2dGrad).
/// Example: `ms::max_pool2d_grad(x, g, {.kernel = {2, 2}})`.
inline Tensor max_pool2d_grad(const Tensor& x, const Tensor& grad_out,
                              const MaxPool2dOptions& opts) {
  return ops::invoke1<ops::MaxPool2dGrad>({x, grad_out}, opts);
}

/// avg_pool2d's input gradient (ms::ops::AvgPool2dGrad).
/// Example: `ms::avg_pool2d_grad(g, x.shape(), {.kernel = {3}, .count_include_pad = false})`.
inline Tensor avg_pool2d_grad(const Tensor& grad_out, const Shape& input_size,
                              const AvgPool2dOptions& opts) {
  ops::AvgPool2dGrad::Attrs a;
  static_cast<AvgPool2dOptions&>(a) = opts;
  a.input_size = input_size.to_vector();
  return ops::invoke1<ops::AvgPool2dGrad>({grad_out}, a);
}

}  // namespace ms
