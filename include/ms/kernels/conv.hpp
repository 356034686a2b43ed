// ms/kernels/conv.hpp — 2-D convolution on NCHW buffers, by one of three
// algorithms chosen per shape (`conv2d_algorithm`): direct convolution on
// libxsmm's JIT'ed batch-reduce GEMM kernels (float32 and bfloat16; stride 1
// along the width; for 3x3 kernels with padding 1 over at most 4 input
// channels, ms's own AVX-512 kernels), Winograd F(2x2, 3x3) (floating 3x3
// kernels at stride 1 without dilation or groups, >= 16 input and output
// channels, outputs of at most 32 x 32), or im2col + GEMM (everything). Each
// is bitwise the same for any thread count; they round differently from one
// another by a few ulps.
//
// Stage: kernels. Called by the conv2d op (src/ops/nn.cpp), which validates
// every size first; these functions assume a consistent, overflow-free
// geometry. Instantiated in src/kernels/conv.cpp for float, double,
// std::int32_t and std::int64_t.
//
//   ms::kernels::Conv2dGeometry g{.n = 1, .c = 3, .h = 8, .w = 8, .o = 4, .kh = 3, .kw = 3,
//                                 .oh = 6, .ow = 6};
//   ms::kernels::conv2d<float>(x, w, nullptr, y, g);   // x [1,3,8,8], w [4,3,3,3], y [1,4,6,6]
#pragma once

#include <cstdint>

#include "ms/core/half.hpp"

namespace ms::kernels {

/// How a convolution is computed. `Auto` picks per shape and pass by the
/// measurements of bench/bm_conv.cpp (see `conv2d_algorithm`); the others
/// force an algorithm where it applies (tests, benchmarks) and fall back to
/// `Auto`'s choice where it does not.
enum class ConvAlgo : std::uint8_t {
  Auto,      ///< chosen per shape
  Im2col,    ///< im2col + GEMM (any geometry, any dtype)
  Winograd,  ///< Winograd F(2x2, 3x3) (floating types)
  Direct,    ///< libxsmm batch-reduce kernels (float32; bfloat16 forward); narrow inputs:
             ///< ms's AVX-512 kernels (float32)
};

/// Which of conv2d's computations: the forward, or one of its gradients.
enum class ConvPass : std::uint8_t { Forward, GradInput, GradWeight };

/// Sizes of one convolution: input [n, c, h, w], weight [o, c / groups, kh, kw],
/// output [n, o, oh, ow]; strides, zero paddings and dilations per spatial axis.
struct Conv2dGeometry {
  std::int64_t n = 0;              ///< batch size
  std::int64_t c = 0;              ///< input channels
  std::int64_t h = 0;              ///< input height
  std::int64_t w = 0;              ///< input width
  std::int64_t o = 0;              ///< output channels
  std::int64_t kh = 1;             ///< kernel height
  std::int64_t kw = 1;             ///< kernel width
  std::int64_t oh = 0;             ///< output height
  std::int64_t ow = 0;             ///< output width
  std::int64_t sh = 1;             ///< stride along height
  std::int64_t sw = 1;             ///< stride along width
  std::int64_t ph = 0;             ///< zero padding along height (each side)
  std::int64_t pw = 0;             ///< zero padding along width (each side)
  std::int64_t dh = 1;             ///< dilation along height
  std::int64_t dw = 1;             ///< dilation along width
  std::int64_t groups = 1;         ///< channel groups (c and o are multiples of it)
  ConvAlgo algo = ConvAlgo::Auto;  ///< the algorithm (Auto: `conv2d_algorithm` picks)
};

/// The algorithm conv2d<float> (or its gradient `pass`) runs for g: g.algo
/// when it applies to g, else the fastest that applies as measured by
/// bench/conv_table.sh on the CNN's shapes: for convolutions with fewer than
/// 16 input channels per group, Direct's narrow kernels for 3x3 kernels with
/// padding 1 at stride 1 without dilation or groups over at most 4 channels
/// (builds with AVX-512), Im2col for everything else; otherwise Winograd for
/// every pass where it applies (3x3, stride 1, no dilation or groups, at
/// least 16 output channels, output planes of at most 32 x 32; for the input
/// gradient padding <= 2), then Direct where it applies (libxsmm usable on
/// this CPU, stride 1 along the width; for the input gradient stride 1 and
/// padding <= (k - 1) * dilation), else Im2col. double takes Winograd
/// or Im2col, integers Im2col. bfloat16 passes: `conv2d_bf16_algorithm`. The
/// choice depends on the shape and the CPU, never on the thread count.
///
///   if (ms::kernels::conv2d_algorithm(g, ms::kernels::ConvPass::Forward) ==
///       ms::kernels::ConvAlgo::Direct) { /* libxsmm's or the narrow kernels run it */ }
ConvAlgo conv2d_algorithm(const Conv2dGeometry& g, ConvPass pass) noexcept;

/// The algorithm the bfloat16 kernels run for pass `pass` of g: Direct
/// (for the forward of the narrow kernels' shapes, those kernels on float32
/// copies of x and w, rounding each output as they store it; else libxsmm's
/// bf16 batch-reduce kernels), Im2col (gemm_bf16 on im2col's columns), or
/// Auto where none of them takes the pass (the forward only: the op converts
/// to float32 and runs conv2d_algorithm's). By g.algo: Direct where it
/// applies (else Auto for the forward, Im2col for the input gradient), Im2col
/// always, Winograd never (no bfloat16 Winograd). Auto, as measured by
/// bench/conv_table.sh on the CNN's layers: where float32 takes the narrow
/// kernels, Direct for the forward (conv1: libxsmm's bf16 kernels ran it at
/// 0.06 of the float32 peak on the Intel Xeon VM, the narrow kernels 0.49)
/// and Im2col for the input gradient; where gemm_bf16 runs on AMX
/// (`gemm_bf16_on_amx`; libxsmm 1.17 has no AMX code and its bf16 kernels ran
/// conv2's forward at 0.32 of the float32 peak there, Im2col 0.88), Im2col;
/// else Direct where libxsmm's kernels apply (the forward; a gradient where
/// float32 takes Direct or Winograd), else none. The weight gradient is
/// always Im2col.
///
///   ms::kernels::conv2d_bf16_algorithm(g, ms::kernels::ConvPass::Forward)
ConvAlgo conv2d_bf16_algorithm(const Conv2dGeometry& g, ConvPass pass) noexcept;

/// y = conv2d(x, w) + bias on dense NCHW bfloat16 buffers (bias in float32,
/// may be null) by `conv2d_bf16_algorithm(g, Forward)`: products of bfloat16
/// values summed in float32 (the CPU's BF16 dot-product instructions where it
/// has them), plus the bias, each sum rounded to bfloat16 once. Returns false,
/// computing nothing, where that is Auto (the caller then converts to
/// float32). Bitwise the same for any thread count.
bool conv2d_bf16(const bfloat16_t* x, const bfloat16_t* w, const float* bias, bfloat16_t* y,
                 const Conv2dGeometry& g);

/// conv2d_grad_input on dense NCHW bfloat16 buffers: dx [n, c, h, w] from gy
/// and w, products of bfloat16 values summed in float32, each element of dx
/// rounded to bfloat16 once, by `conv2d_bf16_algorithm(g, GradInput)`: Direct
/// on libxsmm's bf16 batch-reduce kernels (as conv2d_bf16), Im2col with
/// gemm_bf16 (col2im adding in float32).
/// Bitwise the same for any thread count.
///
///   ms::kernels::conv2d_grad_input_bf16(gy, w, dx, g);
void conv2d_grad_input_bf16(const bfloat16_t* gy, const bfloat16_t* w, bfloat16_t* dx,
                            const Conv2dGeometry& g);

/// conv2d_grad_weight on dense NCHW bfloat16 buffers: dw [o, c / groups, kh,
/// kw] from x and gy on im2col's path with gemm_bf16 (products of bfloat16
/// values summed in float32, the batch in a fixed number of float32 partial
/// sums added in order), each element rounded to bfloat16 once. Bitwise the
/// same for any thread count.
///
///   ms::kernels::conv2d_grad_weight_bf16(x, gy, dw, g);
void conv2d_grad_weight_bf16(const bfloat16_t* x, const bfloat16_t* gy, bfloat16_t* dw,
                             const Conv2dGeometry& g);

/// Unfolds the patches of one image's `c` channels, x [c, h, w] (dense), into
/// the columns [p0, p1) of its im2col matrix [c * kh * kw, oh * ow], stored as
/// col [c * kh * kw, p1 - p0] (row-major): row (ci, i, j), column q holds the
/// input pixel under kernel tap (i, j) of channel ci for output position q
/// (row-major over [oh, ow]), or 0 in the padding. Uses g's h, w, kh, kw, oh,
/// ow, strides, paddings and dilations.
template <class T>
void im2col(const T* x, std::int64_t c, const Conv2dGeometry& g, std::int64_t p0, std::int64_t p1,
            T* col) noexcept;

/// y = conv2d(x, w) + bias on dense NCHW buffers (bias may be null), by the
/// algorithm `conv2d_algorithm` names. Im2col: the work is cut into (image, group, tile of output
/// positions) items, the cut depending on the shape only; each item is one im2col into a reused
/// per-thread buffer and one single-threaded GEMM [o/groups, c/groups*kh*kw] x
/// [c/groups*kh*kw, tile] written straight into y. Items are split over the
/// threads in contiguous runs, so results are bitwise the same for any thread
/// count. Allocates its buffers (may raise ms::MemoryError) before any parallel
/// region. With `relu`, y = relu(conv2d(x, w) + bias), applied to each tile
/// right after its GEMM (the relu op's values exactly, NaN and -0 included).
/// With `pooled` (size [n, o, oh / 2, ow / 2]), also pooled = max_pool2d(y)
/// with 2x2 windows at stride 2 (max_pool2d's values exactly), computed on the
/// planes just written while they are in cache (requires oh, ow >= 2). With
/// `pool_index` too (float and double; size [n, o, oh / 2, ow / 2]), the tap
/// each window chose, as max_pool2x2_index (kernels/pool.hpp) writes it.
template <class T>
void conv2d(const T* x, const T* w, const T* bias, T* y, const Conv2dGeometry& g, bool relu = false,
            T* pooled = nullptr, std::uint8_t* pool_index = nullptr);

/// dx = the gradient of conv2d's input x [n, c, h, w] given the output's
/// gradient gy [n, o, oh, ow] and the weight w [o, c / groups, kh, kw] (all
/// dense), by the algorithm `conv2d_algorithm(g, ConvPass::GradInput)` names
/// (Direct: the forward's kernels on gy with the rotated kernel). Im2col: per (image, group), tiles
/// of columns = W_g^T G_g (one GEMM each) added back into dx by col2im (the adjoint of im2col).
/// Items are (image, group) pairs, a contiguous run of them per thread whose last items another
/// thread takes when done with its own; each summed in a fixed order whoever runs it: bitwise the
/// same results for any thread count. float, double.
template <class T>
void conv2d_grad_input(const T* gy, const T* w, T* dx, const Conv2dGeometry& g);

/// dw [o, c / groups, kh, kw] = the gradient of conv2d's weight given the input
/// x and the output's gradient gy (dense), by the algorithm
/// `conv2d_algorithm(g, ConvPass::GradWeight)` names (Direct: per tap, a
/// batch-reduce over the output rows of each image). Im2col: sum over the images of G_g cols_g^T
/// (one GEMM per image and tile of columns). The batch is cut into at most 8
/// chunks (by the shape only), summed into partial gradients in parallel and
/// added in chunk order: bitwise the same results for any thread count.
/// float, double. Both allocate their buffers before any parallel region.
template <class T>
void conv2d_grad_weight(const T* x, const T* gy, T* dw, const Conv2dGeometry& g);

/// \cond EXPLICIT_INSTANTIATIONS (compiled once in libms)
extern template void im2col<float>(const float*, std::int64_t, const Conv2dGeometry&, std::int64_t,
                                   std::int64_t, float*) noexcept;
extern template void im2col<double>(const double*, std::int64_t, const Conv2dGeometry&,
                                    std::int64_t, std::int64_t, double*) noexcept;
extern template void im2col<std::int32_t>(const std::int32_t*, std::int64_t, const Conv2dGeometry&,
                                          std::int64_t, std::int64_t, std::int32_t*) noexcept;
extern template void im2col<std::int64_t>(const std::int64_t*, std::int64_t, const Conv2dGeometry&,
                                          std::int64_t, std::int64_t, std::int64_t*) noexcept;
extern template void conv2d<float>(const float*, const float*, const float*, float*,
                                   const Conv2dGeometry&, bool, float*, std::uint8_t*);
extern template void conv2d<double>(const double*, const double*, const double*, double*,
                                    const Conv2dGeometry&, bool, double*, std::uint8_t*);
extern template void conv2d<std::int32_t>(const std::int32_t*, const std::int32_t*,
                                          const std::int32_t*, std::int32_t*, const Conv2dGeometry&,
                                          bool, std::int32_t*, std::uint8_t*);
extern template void conv2d<std::int64_t>(const std::int64_t*, const std::int64_t*,
                                          const std::int64_t*, std::int64_t*, const Conv2dGeometry&,
                                          bool, std::int64_t*, std::uint8_t*);
extern template void conv2d_grad_input<float>(const float*, const float*, float*,
                                              const Conv2dGeometry&);
extern template void conv2d_grad_input<double>(const double*, const double*, double*,
                                               const Conv2dGeometry&);
extern template void conv2d_grad_weight<float>(const float*, const float*, float*,
                                               const Conv2dGeometry&);
extern template void conv2d_grad_weight<double>(const double*, const double*, double*,
                                                const Conv2dGeometry&);
/// \endcond

}  // namespace ms::kernels
