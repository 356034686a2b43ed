// src/kernels/conv_libxsmm.hpp — private to src/kernels: direct 2-D
// convolution on libxsmm's JIT'ed batch-reduce GEMM kernels
// (src/kernels/conv_libxsmm.cpp), called by src/kernels/conv.cpp when the
// "direct" algorithm runs (ms::kernels::conv2d_algorithm).
#pragma once

#include <atomic>
#include <cstdint>

#include "ms/core/half.hpp"
#include "ms/kernels/conv.hpp"
#include "ms/kernels/parallel.hpp"

namespace ms::kernels::detail {

/// Runs fn(item, part) for items [0, items) inside one parallel region, on
/// `parts` parts (one per thread; `part` names the scratch an item may use,
/// never used by two items at once): each part takes the next item not yet
/// taken until none is left, so a thread that starts late (woken late, or
/// its core lent to another program for a moment) leaves its items to the
/// others instead of holding the call (conv1's input gradient on 2 threads,
/// an ad-hoc loop: the worker's first item started 17-28 us late on average,
/// 0.2 us at the median). A kernel called inside runs single-threaded, so
/// each item's arithmetic is the same whoever runs it, for any thread count.
template <class F>
void for_items(std::int64_t items, std::int64_t parts, F&& fn) {
  std::atomic<std::int64_t> next{0};
  parallel_for(parts, 1, [&](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t part = q0; part < q1; ++part)
      for (std::int64_t item; (item = next.fetch_add(1, std::memory_order_relaxed)) < items;)
        fn(item, part);
  });
}

/// True when libxsmm was linked in and its JIT targets this CPU with AVX2 or
/// better (decided once, at the first call).
bool conv_libxsmm_usable() noexcept;

/// True when the direct kernels take `pass` of g: libxsmm usable, stride 1
/// along the width (and along the height too for the input gradient, whose
/// padding (k - 1) * d - p must be >= 0), sizes within libxsmm's int.
bool conv_direct_fits(const Conv2dGeometry& g, ConvPass pass) noexcept;

/// What to run on output planes [first, first + count) of y (planes of
/// [oh, ow], counted over images and channels) as soon as they are written,
/// while they are in cache: fn(ctx, first, count), on the thread that wrote
/// them (fused pooling).
struct PlanesDone {
  void (*fn)(void* ctx, std::int64_t first, std::int64_t count);
  void* ctx;
};

/// y = conv2d(x, w) + bias (bias may be null), relu'd with `relu`, on dense
/// NCHW float32 buffers, then `done` (may be null) on each finished block of
/// planes. Returns false, computing nothing, when conv_direct_fits(g, Forward)
/// is false or a kernel cannot be generated. May raise ms::MemoryError
/// (before any output is written).
bool conv_direct_forward(const float* x, const float* w, const float* bias, float* y,
                         const Conv2dGeometry& g, bool relu, const PlanesDone* done);

/// The same with bfloat16 x, w and y (bias in float32, may be null): pairs of
/// bfloat16 products summed in float32 by libxsmm's bf16 kernels, the sum
/// rounded to bfloat16 once, on store.
bool conv_direct_forward_bf16(const bfloat16_t* x, const bfloat16_t* w, const float* bias,
                              bfloat16_t* y, const Conv2dGeometry& g);

/// dx = conv2d_grad_input(gy, w) (float32, dense), as conv_direct_forward.
bool conv_direct_grad_input(const float* gy, const float* w, float* dx, const Conv2dGeometry& g);

/// The same with bfloat16 gy, w and dx: float32 sums of bfloat16 products
/// (libxsmm's bf16 kernels), each element rounded to bfloat16 once.
bool conv_direct_grad_input_bf16(const bfloat16_t* gy, const bfloat16_t* w, bfloat16_t* dx,
                                 const Conv2dGeometry& g);

/// dw = conv2d_grad_weight(x, gy) (float32, dense), as conv_direct_forward.
bool conv_direct_grad_weight(const float* x, const float* gy, float* dw, const Conv2dGeometry& g);

}  // namespace ms::kernels::detail
