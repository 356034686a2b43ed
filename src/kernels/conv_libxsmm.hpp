// src/kernels/conv_libxsmm.hpp — private to src/kernels: direct 2-D
// convolution on libxsmm's JIT'ed batch-reduce GEMM kernels
// (src/kernels/conv_libxsmm.cpp), called by src/kernels/conv.cpp when the
// "direct" algorithm runs (ms::kernels::conv2d_algorithm).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "ms/core/half.hpp"
#include "ms/kernels/conv.hpp"
#include "ms/kernels/parallel.hpp"

namespace ms::kernels::detail {

/// Runs fn(item, part) for items [0, items) inside one parallel region, on
/// `parts` parts (one per thread; `part` names the scratch an item may use,
/// never used by two items at once). Each part owns a contiguous run of the
/// items and takes them from its front; a part whose run is done takes the
/// others' last items, from their backs. So a thread that starts late (woken
/// late, or its core lent to another program for a moment) leaves its items
/// to the others instead of holding the call (conv1's input gradient on 2
/// threads, an ad-hoc loop: the worker's first item started 17-28 us late on
/// average, 0.2 us at the median), while each thread still works through
/// neighbouring items (handed out one by one in turn instead, the two
/// threads writing neighbouring images of conv1's output in huge-page
/// storage ran its forward 6x slower than one thread). A kernel called
/// inside runs single-threaded, so each item's arithmetic is the same whoever
/// runs it, for any thread count. Items < 2^32 (a run's bounds are packed in
/// 32-bit halves).
template <class F>
void for_items(std::int64_t items, std::int64_t parts, F&& fn) {
  // Per part, the items left of its run: front in the low 32 bits, end in the
  // high; each in a cache line of its own, which stays with the thread taking
  // the part's items (the two parts in one line, conv1's input gradient on 2
  // threads ran 4-6 % slower: an ad-hoc program alternating both libraries in
  // one process, Zen 5 VM).
  struct alignas(64) Run {
    std::atomic<std::uint64_t> left;
  };
  std::vector<Run> runs(static_cast<std::size_t>(std::max<std::int64_t>(parts, 1)));
  for (std::int64_t q = 0; q < parts; ++q) {
    const auto i0 = static_cast<std::uint64_t>(items * q / parts);
    const auto i1 = static_cast<std::uint64_t>(items * (q + 1) / parts);
    runs[static_cast<std::size_t>(q)].left.store(i0 | (i1 << 32), std::memory_order_relaxed);
  }
  // The next item of part q's run, from its front or its back; -1 when none is left.
  const auto take = [&](std::int64_t q, bool back) -> std::int64_t {
    std::atomic<std::uint64_t>& w = runs[static_cast<std::size_t>(q)].left;
    std::uint64_t v = w.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t f = v & 0xffffffffu, e = v >> 32;
      if (f >= e) return -1;
      const std::uint64_t next = back ? f | ((e - 1) << 32) : (f + 1) | (e << 32);
      if (w.compare_exchange_weak(v, next, std::memory_order_relaxed))
        return static_cast<std::int64_t>(back ? e - 1 : f);
    }
  };
  parallel_for(parts, 1, [&](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t part = q0; part < q1; ++part) {
      for (std::int64_t item; (item = take(part, false)) >= 0;) fn(item, part);
      for (std::int64_t k = 1; k < parts; ++k)
        for (std::int64_t item; (item = take((part + k) % parts, true)) >= 0;) fn(item, part);
    }
  });
}

/// True when libxsmm was linked in and its JIT targets this CPU with AVX2 or
/// better (decided once, at the first call).
bool conv_libxsmm_usable() noexcept;

/// True when the direct kernels take `pass` of g: libxsmm usable, stride 1
/// along the width (and along the height too for the input gradient, whose
/// padding (k - 1) * d - p must be >= 0), sizes within libxsmm's int.
bool conv_direct_fits(const Conv2dGeometry& g, ConvPass pass) noexcept;

/// conv_direct_fits for the bfloat16 kernels, which libxsmm must also be able
/// to generate for this CPU (decided once).
bool conv_direct_bf16_fits(const Conv2dGeometry& g, ConvPass pass) noexcept;

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
/// rounded to bfloat16 once, on store; false, computing nothing, where
/// conv_direct_bf16_fits(g, Forward) is false.
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
