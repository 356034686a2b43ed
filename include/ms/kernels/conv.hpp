// ms/kernels/conv.hpp — 2-D convolution by im2col + GEMM on NCHW buffers, and
// by Winograd F(2x2, 3x3) for floating 3x3 kernels at stride 1 without
// dilation or groups, >= 16 input and output channels and outputs of at most
// 32 x 32 (conv2d and
// conv2d_grad_input; rounding a few ulps from im2col's, still bitwise the same
// for any thread count).
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

namespace ms::kernels {

/// Sizes of one convolution: input [n, c, h, w], weight [o, c / groups, kh, kw],
/// output [n, o, oh, ow]; strides, zero paddings and dilations per spatial axis.
struct Conv2dGeometry {
  std::int64_t n = 0;       ///< batch size
  std::int64_t c = 0;       ///< input channels
  std::int64_t h = 0;       ///< input height
  std::int64_t w = 0;       ///< input width
  std::int64_t o = 0;       ///< output channels
  std::int64_t kh = 1;      ///< kernel height
  std::int64_t kw = 1;      ///< kernel width
  std::int64_t oh = 0;      ///< output height
  std::int64_t ow = 0;      ///< output width
  std::int64_t sh = 1;      ///< stride along height
  std::int64_t sw = 1;      ///< stride along width
  std::int64_t ph = 0;      ///< zero padding along height (each side)
  std::int64_t pw = 0;      ///< zero padding along width (each side)
  std::int64_t dh = 1;      ///< dilation along height
  std::int64_t dw = 1;      ///< dilation along width
  std::int64_t groups = 1;  ///< channel groups (c and o are multiples of it)
};

/// Unfolds the patches of one image's `c` channels, x [c, h, w] (dense), into
/// the columns [p0, p1) of its im2col matrix [c * kh * kw, oh * ow], stored as
/// col [c * kh * kw, p1 - p0] (row-major): row (ci, i, j), column q holds the
/// input pixel under kernel tap (i, j) of channel ci for output position q
/// (row-major over [oh, ow]), or 0 in the padding. Uses g's h, w, kh, kw, oh,
/// ow, strides, paddings and dilations.
template <class T>
void im2col(const T* x, std::int64_t c, const Conv2dGeometry& g, std::int64_t p0, std::int64_t p1,
            T* col) noexcept;

/// y = conv2d(x, w) + bias on dense NCHW buffers (bias may be null). The work
/// is cut into (image, group, tile of output positions) items, the cut
/// depending on the shape only; each item is one im2col into a reused
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
/// dense): per (image, group), tiles of columns = W_g^T G_g (one GEMM each)
/// added back into dx by col2im (the adjoint of im2col). Items are (image,
/// group) pairs split over the threads in contiguous runs, each summed in a
/// fixed order: bitwise the same results for any thread count. float, double.
template <class T>
void conv2d_grad_input(const T* gy, const T* w, T* dx, const Conv2dGeometry& g);

/// dw [o, c / groups, kh, kw] = the gradient of conv2d's weight given the input
/// x and the output's gradient gy (dense): sum over the images of G_g cols_g^T
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
