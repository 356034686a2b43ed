// ms/ops/nn.hpp — neural-network ops (group `nn`): conv2d, max_pool2d, avg_pool2d,
// and the gradient ops their autodiff rules call.
//
// Stage: ops. Each op here is one entry of the op table (src/ops/nn.cpp),
// evaluated by the kernels of ms/kernels/{conv,pool}.hpp. Layout is NCHW, and
// sizes follow PyTorch's formulas, so models port over unchanged.
//
//   ms::Tensor y = ms::conv2d(x, w, b, {.padding = {1}});   // [64,32,28,28] -> [64,O,28,28]
//   ms::Tensor p = ms::max_pool2d(y, {2, 2});               // -> [64,O,14,14]
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ms/core/tensor.hpp"

namespace ms {

/// Options of `conv2d`. Each list holds one value (both spatial axes) or two
/// (height, width). Example: `ms::Conv2dOptions{.stride = {2}, .padding = {1, 1}}`.
struct Conv2dOptions {
  std::vector<std::int64_t> stride{1, 1};    ///< > 0
  std::vector<std::int64_t> padding{0, 0};   ///< zero padding on each side, >= 0
  std::vector<std::int64_t> dilation{1, 1};  ///< spacing of kernel taps, > 0
  std::int64_t groups = 1;                   ///< divides C and O
};

/// 2-D convolution (cross-correlation, as PyTorch's `conv2d`) of x [N, C, H, W]
/// with weight [O, C / groups, KH, KW] and an optional bias [O]; the output is
/// [N, O, OH, OW] with OH = (H + 2 * pad_h - dil_h * (KH - 1) - 1) / stride_h + 1
/// (likewise OW). Runs as im2col + GEMM, split over images.
/// dtypes (all inputs alike): float32, float64, int32, int64; float16 and
/// bfloat16 compute in float32. Errors: TypeError for mixed or other dtypes;
/// ShapeError for ranks other than 4, channel counts that do not match or are
/// not divisible by `groups`, a bias that is not [O], a kernel larger than the
/// padded input; ValueError for a stride, dilation or groups <= 0, a negative
/// padding, option lists not of 1 or 2 values, sizes that overflow int64.
/// Example: `ms::conv2d(ms::ones({1, 3, 8, 8}), ms::ones({4, 3, 3, 3}))` is [1, 4, 6, 6].
Tensor conv2d(const Tensor& x, const Tensor& weight, std::optional<Tensor> bias = {},
              Conv2dOptions opts = {});

/// 2-D max pooling of x [N, C, H, W] or [C, H, W] (as PyTorch, a 3-D input is
/// one image). `kernel`, `stride` (empty: the kernel), `padding`, `dilation`
/// hold 1 or 2 values. Output size as PyTorch:
/// OH = floor_or_ceil((H + 2 * pad - dil * (K - 1) - 1) / stride) + 1, where with
/// `ceil_mode` a last window that would start in the right padding is dropped.
/// Padding is -inf (never the maximum); a NaN in a window propagates.
/// dtypes: float32, float64, int8, int16, int32, int64, uint8; float16 and
/// bfloat16 (computed in float32, exact). Errors: TypeError for other dtypes;
/// ShapeError for other ranks, an empty H or W, an output size <= 0;
/// ValueError for a kernel, stride or dilation <= 0, a negative padding or one
/// over kernel / 2, lists not of 1 or 2 values, sizes that overflow int64.
/// Example: `ms::max_pool2d(x, {2, 2})` halves H and W; `ms::max_pool2d(x, {3}, {2}, {1})`.
Tensor max_pool2d(const Tensor& x, std::vector<std::int64_t> kernel,
                  std::vector<std::int64_t> stride = {}, std::vector<std::int64_t> padding = {0, 0},
                  std::vector<std::int64_t> dilation = {1, 1}, bool ceil_mode = false);

/// 2-D average pooling of x [N, C, H, W] or [C, H, W], with PyTorch's sizes
/// (as `max_pool2d`, without dilation) and divisor: the window clipped to the
/// padded input, counting the padding when `count_include_pad`, else only the
/// input elements. dtypes: float32, float64; float16 and bfloat16 compute in
/// float32. Errors as `max_pool2d`, and TypeError for integer inputs.
/// Example: `ms::avg_pool2d(x, {2, 2})`; `ms::avg_pool2d(x, {3}, {1}, {1}, false, false)`.
Tensor avg_pool2d(const Tensor& x, std::vector<std::int64_t> kernel,
                  std::vector<std::int64_t> stride = {}, std::vector<std::int64_t> padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);

// ---------------------------------------------------------------- gradients
// The backward ops of the rules in src/ops/grad.cpp (ms::grad calls them; they
// are public for tests and custom rules). Each takes the forward's options,
// checks the forward op with its own rules and that grad_out has the forward
// output's shape (ShapeError otherwise), and is floating only (float16 and
// bfloat16 compute in float32; TypeError for other or mixed dtypes). They are
// differentiable themselves (linear in grad_out; rules in src/ops/grad.cpp), so
// grad(grad(f)) and gradient penalties go through them.

/// The gradient of `conv2d`'s input [N, C, H, W] = input_size, given the
/// output's gradient grad_out [N, O, OH, OW] and the weight: the transposed
/// convolution, as GEMM W^T G + col2im per image. input_size: 4 sizes >= 0
/// (ValueError for a negative one). Example:
/// `ms::conv2d_grad_input(g, w, x.shape(), {.padding = {1}})`.
Tensor conv2d_grad_input(const Tensor& grad_out, const Tensor& weight, const Shape& input_size,
                         Conv2dOptions opts = {});

/// The gradient of `conv2d`'s weight [O, C / groups, KH, KW] = weight_size,
/// given the input x and the output's gradient grad_out: the sum over images
/// of G cols^T (GEMM on im2col columns). The batch is summed in a fixed order
/// (results do not depend on the thread count). Example:
/// `ms::conv2d_grad_weight(x, g, w.shape(), {.padding = {1}})`.
Tensor conv2d_grad_weight(const Tensor& x, const Tensor& grad_out, const Shape& weight_size,
                          Conv2dOptions opts = {});

/// The gradient of `max_pool2d(x, ...)`'s input: each grad_out element goes to
/// the element its window's maximum came from (the first one on ties, the
/// last NaN, as the forward), recomputed from x; overlapping windows add up.
/// Example: `ms::max_pool2d_grad(x, g, {2, 2})`.
Tensor max_pool2d_grad(const Tensor& x, const Tensor& grad_out, std::vector<std::int64_t> kernel,
                       std::vector<std::int64_t> stride = {},
                       std::vector<std::int64_t> padding = {0, 0},
                       std::vector<std::int64_t> dilation = {1, 1}, bool ceil_mode = false);

/// The gradient of `avg_pool2d`'s input of shape input_size ([C, H, W] or
/// [N, C, H, W]): each grad_out element divided by its window's divisor is
/// added to the window's input elements. Example:
/// `ms::avg_pool2d_grad(g, x.shape(), {3}, {1}, {1}, false, false)`.
Tensor avg_pool2d_grad(const Tensor& grad_out, const Shape& input_size,
                       std::vector<std::int64_t> kernel, std::vector<std::int64_t> stride = {},
                       std::vector<std::int64_t> padding = {0, 0}, bool ceil_mode = false,
                       bool count_include_pad = true);

/// Cross-entropy of each row of `logits` [N, C] (floating) against its class
/// label in `labels` [N] (int32 or int64): logsumexp(row) - row[label], one
/// fused, numerically stable pass (MindSpore's SparseSoftmaxCrossEntropyWithLogits
/// without the reduction); the result is [N] in the logits' dtype (float16 and
/// bfloat16 computed in float32). A label outside [0, C) is an ms::IndexError
/// naming the row, also when a compiled graph runs. Its gradient is
/// (softmax(logits) - one_hot(labels)) * grad. Example:
/// `ms::mean(ms::softmax_cross_entropy(logits, labels))`.
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& labels);

}  // namespace ms
