// src/kernels/conv_narrow.hpp — private to src/kernels: float32 3x3
// convolutions of inputs with few channels ("same" padding, stride 1) on
// AVX-512 registers (src/kernels/conv_narrow.cpp), the Direct algorithm's
// passes for such shapes (ms::kernels::conv2d_algorithm).
#pragma once

#include <cstdint>

#include "conv_libxsmm.hpp"
#include "ms/core/half.hpp"
#include "ms/kernels/conv.hpp"

namespace ms::kernels::detail {

/// The most input channels the narrow kernels take (grayscale, RGB and RGBA
/// inputs; bench/conv_table.sh measures one channel).
inline constexpr std::int64_t kNarrowChannels = 4;

/// True when the narrow kernels take g (every pass): built for AVX-512F,
/// groups 1, at most kNarrowChannels input channels, a 3x3 kernel at stride 1
/// without dilation, padding 1 (so the output plane is the input plane).
bool conv_narrow_fits(const Conv2dGeometry& g) noexcept;

/// y = conv2d(x, w) + bias (bias may be null), relu'd with `relu`, on dense
/// NCHW buffers, then `done` (may be null) on each image's planes. Each
/// element is one chain of multiply-adds from the bias (or 0) over the input
/// channels and taps in order; images are split over the threads, so the bits
/// do not depend on their count. Returns false, computing nothing, when
/// conv_narrow_fits(g) is false.
bool conv_narrow_forward(const float* x, const float* w, const float* bias, float* y,
                         const Conv2dGeometry& g, bool relu, const PlanesDone* done);

/// The same forward (without relu) with each element of y rounded to
/// bfloat16 once as it is stored: the bits of the float32 forward's output
/// converted by ms::bfloat16_t. The bfloat16 forward of such shapes
/// (conv2d_bf16) runs here on float32 copies of its bfloat16 x and w (exact).
bool conv_narrow_forward(const float* x, const float* w, const float* bias, bfloat16_t* y,
                         const Conv2dGeometry& g);

/// dx = conv2d_grad_input(gy, w) on dense buffers: per image and input channel,
/// each tap's column sum over the output channels of w * gy (in order), then
/// each vector of dx the sum, in tap order, of the columns' values whose
/// input it is; images are split over the threads. Returns false, computing nothing, when
/// conv_narrow_fits(g) is false. May raise ms::MemoryError before writing dx.
bool conv_narrow_grad_input(const float* gy, const float* w, float* dx, const Conv2dGeometry& g);

/// dw = conv2d_grad_weight(x, gy) on dense buffers: the batch in `chunks`
/// runs of images (fixed by the caller from the shape), each summed into its
/// own partial, the partials added in order: the same bits for any thread
/// count. Returns false, computing nothing, when conv_narrow_fits(g) is
/// false. May raise ms::MemoryError before writing dw.
bool conv_narrow_grad_weight(const float* x, const float* gy, float* dw, const Conv2dGeometry& g,
                             std::int64_t chunks);

}  // namespace ms::kernels::detail
