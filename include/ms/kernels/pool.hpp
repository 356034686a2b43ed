// ms/kernels/pool.hpp — 2-D max and average pooling on dense [planes, h, w] buffers.
//
// Stage: kernels. Called by the max_pool2d / avg_pool2d ops (src/ops/nn.cpp),
// which validate every size first (PyTorch's output-size and padding rules).
// Planes (image x channel) are split over the threads; each output element is
// computed by one thread in a fixed order, so results do not depend on the
// thread count. Instantiated in src/kernels/pool.cpp: max for float, double,
// std::int32_t, std::int64_t; average for float and double.
//
//   ms::kernels::Pool2dGeometry g{.planes = 3, .h = 4, .w = 4, .kh = 2, .kw = 2,
//                                 .oh = 2, .ow = 2, .sh = 2, .sw = 2};
//   ms::kernels::max_pool2d<float>(x, y, g);   // x [3, 4, 4] -> y [3, 2, 2]
#pragma once

#include <cstdint>

namespace ms::kernels {

/// Sizes of one pooling: `planes` independent [h, w] inputs, each pooled to
/// [oh, ow] by a kh x kw window with strides, implicit paddings and dilations.
struct Pool2dGeometry {
  std::int64_t planes = 0;  ///< independent input planes
  std::int64_t h = 0;       ///< input height
  std::int64_t w = 0;       ///< input width
  std::int64_t kh = 1;      ///< window height
  std::int64_t kw = 1;      ///< window width
  std::int64_t oh = 0;      ///< output height
  std::int64_t ow = 0;      ///< output width
  std::int64_t sh = 1;      ///< stride along height
  std::int64_t sw = 1;      ///< stride along width
  std::int64_t ph = 0;      ///< implicit padding along height (each side)
  std::int64_t pw = 0;      ///< implicit padding along width (each side)
  std::int64_t dh = 1;      ///< dilation along height
  std::int64_t dw = 1;      ///< dilation along width
};

/// y = the maximum of each window; padding never wins (it is -inf), and a NaN
/// in a window gives NaN (as PyTorch).
template <class T>
void max_pool2d(const T* x, T* y, const Pool2dGeometry& g) noexcept;

/// y = the mean of each window (dilation must be 1), PyTorch's rule: the window
/// is clipped to the padded input; the divisor is its size with the padding
/// (`count_include_pad`) or without it; a window with no input element gives 0.
template <class T>
void avg_pool2d(const T* x, T* y, const Pool2dGeometry& g, bool count_include_pad) noexcept;

/// dx = the gradient of max_pool2d's input x given the output's gradient gy:
/// each gy element goes to the position the forward chose in its window (the
/// first maximum; the last NaN; the first element of an all -inf window) and
/// overlapping windows add up. With `positive_only`, a gy element whose chosen
/// input is not > 0 (0, negative, NaN) is dropped: the gradient of
/// max_pool2d(relu(y)) followed by relu's gradient in one pass (x = relu(y) is
/// > 0 exactly where y is). float, double.
template <class T>
void max_pool2d_grad(const T* x, const T* gy, T* dx, const Pool2dGeometry& g,
                     bool positive_only = false) noexcept;

/// dx = the gradient of avg_pool2d's input given the output's gradient gy:
/// each gy element divided by its window's divisor (as the forward) is added to
/// every input element of its window. float, double.
template <class T>
void avg_pool2d_grad(const T* gy, T* dx, const Pool2dGeometry& g, bool count_include_pad) noexcept;

/// The geometry of 2x2 windows at stride 2 (no padding, floor) over `planes`
/// [h, w] planes: what max_pool2x2_index and max_pool2x2_grad_index take.
inline Pool2dGeometry pool2x2_geometry(std::int64_t planes, std::int64_t h, std::int64_t w) {
  return {.planes = planes,
          .h = h,
          .w = w,
          .kh = 2,
          .kw = 2,
          .oh = h / 2,
          .ow = w / 2,
          .sh = 2,
          .sw = 2};
}

/// Bits of a max_pool2x2_index entry: bits 0-1 the tap the window's maximum
/// came from (0 top left, 1 top right, 2 bottom left, 3 bottom right), and
/// kPoolIndexNotPositive when that value is not > 0 (0, negative or NaN).
inline constexpr std::uint8_t kPoolIndexTap = 3;
/// The bit of a max_pool2x2_index entry set when the window's maximum is not > 0.
inline constexpr std::uint8_t kPoolIndexNotPositive = 4;

/// y = max_pool2d(x) with 2x2 windows at stride 2 (g must be that pooling:
/// no padding or dilation, oh = h / 2, ow = w / 2), bitwise max_pool2d's
/// values, and `index` [planes, oh, ow] names the tap each window chose, the
/// one max_pool2d_grad sends its gradient to (the first maximum; the last NaN).
/// With it, the gradient needs neither x nor y (max_pool2x2_grad_index).
/// float, double.
template <class T>
void max_pool2x2_index(const T* x, T* y, std::uint8_t* index, const Pool2dGeometry& g) noexcept;

/// dx = max_pool2d_grad(x, gy) for the pooling that max_pool2x2_index ran,
/// from its index alone: each gy element goes to the tap the index names, the
/// three others and an odd last row or column get 0. With `positive_only`, an
/// element whose index has kPoolIndexNotPositive passes nothing (max_pool2d_grad's
/// positive_only). Bitwise max_pool2d_grad's result. float, double.
template <class T>
void max_pool2x2_grad_index(const std::uint8_t* index, const T* gy, T* dx, const Pool2dGeometry& g,
                            bool positive_only) noexcept;

/// \cond EXPLICIT_INSTANTIATIONS (compiled once in libms)
extern template void max_pool2d<float>(const float*, float*, const Pool2dGeometry&) noexcept;
extern template void max_pool2d<double>(const double*, double*, const Pool2dGeometry&) noexcept;
extern template void max_pool2d<std::int32_t>(const std::int32_t*, std::int32_t*,
                                              const Pool2dGeometry&) noexcept;
extern template void max_pool2d<std::int64_t>(const std::int64_t*, std::int64_t*,
                                              const Pool2dGeometry&) noexcept;
extern template void avg_pool2d<float>(const float*, float*, const Pool2dGeometry&, bool) noexcept;
extern template void avg_pool2d<double>(const double*, double*, const Pool2dGeometry&,
                                        bool) noexcept;
extern template void max_pool2d_grad<float>(const float*, const float*, float*,
                                            const Pool2dGeometry&, bool) noexcept;
extern template void max_pool2d_grad<double>(const double*, const double*, double*,
                                             const Pool2dGeometry&, bool) noexcept;
extern template void avg_pool2d_grad<float>(const float*, float*, const Pool2dGeometry&,
                                            bool) noexcept;
extern template void avg_pool2d_grad<double>(const double*, double*, const Pool2dGeometry&,
                                             bool) noexcept;
extern template void max_pool2x2_index<float>(const float*, float*, std::uint8_t*,
                                              const Pool2dGeometry&) noexcept;
extern template void max_pool2x2_index<double>(const double*, double*, std::uint8_t*,
                                               const Pool2dGeometry&) noexcept;
extern template void max_pool2x2_grad_index<float>(const std::uint8_t*, const float*, float*,
                                                   const Pool2dGeometry&, bool) noexcept;
extern template void max_pool2x2_grad_index<double>(const std::uint8_t*, const double*, double*,
                                                    const Pool2dGeometry&, bool) noexcept;
/// \endcond

}  // namespace ms::kernels
