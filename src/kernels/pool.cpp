// 2-D max and average pooling and their gradients, parallel over planes
// (image x channel): overlapping windows add into one plane on one thread.
#include "ms/kernels/pool.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ms/kernels/parallel.hpp"

namespace ms::kernels {
namespace {

// First tap index t >= 0 with start + t * step >= 0, and one past the last with
// start + t * step < size (clamped to [0, taps]).
struct TapRange {
  std::int64_t lo, hi;
};
// ceil(a / b) for a >= 0, b > 0, without overflow for b near 2^63.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

TapRange tap_range(std::int64_t start, std::int64_t step, std::int64_t taps, std::int64_t size) {
  std::int64_t lo = start >= 0 ? 0 : ceil_div(-start, step);
  std::int64_t hi = size - start <= 0 ? 0 : ceil_div(size - start, step);
  hi = std::min(hi, taps);
  return {std::min(lo, hi), hi};
}

template <class F>
void for_planes(const Pool2dGeometry& g, F&& fn) {
  // Work per plane, saturating: kernels near 2^40 would overflow the product.
  std::int64_t per_plane = 1;
  for (std::int64_t f : {g.oh, g.ow, g.kh, g.kw})
    if (__builtin_mul_overflow(per_plane, std::max<std::int64_t>(f, 1), &per_plane)) {
      per_plane = std::numeric_limits<std::int64_t>::max();
      break;
    }
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 15) / per_plane);
  parallel_for(g.planes, grain, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) fn(p);
  });
}

}  // namespace

template <class T>
void max_pool2d(const T* x, T* y, const Pool2dGeometry& g) noexcept {
  const T lowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                        : std::numeric_limits<T>::lowest();
  for_planes(g, [&](std::int64_t p) {
    const T* xp = x + p * g.h * g.w;
    T* yp = y + p * g.oh * g.ow;
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      const std::int64_t h0 = oh * g.sh - g.ph;
      const TapRange rh = tap_range(h0, g.dh, g.kh, g.h);
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        const std::int64_t w0 = ow * g.sw - g.pw;
        const TapRange rw = tap_range(w0, g.dw, g.kw, g.w);
        T best = lowest;
        for (std::int64_t i = rh.lo; i < rh.hi; ++i) {
          const std::int64_t row = (h0 + i * g.dh) * g.w + w0;  // may be < 0 before + j * dw
          for (std::int64_t j = rw.lo; j < rw.hi; ++j) {
            const T v = xp[row + j * g.dw];
            if constexpr (std::is_floating_point_v<T>) {
              if (v > best || std::isnan(v)) best = v;
            } else {
              best = std::max(best, v);
            }
          }
        }
        yp[oh * g.ow + ow] = best;
      }
    }
  });
}

template <class T>
void avg_pool2d(const T* x, T* y, const Pool2dGeometry& g, bool count_include_pad) noexcept {
  for_planes(g, [&](std::int64_t p) {
    const T* xp = x + p * g.h * g.w;
    T* yp = y + p * g.oh * g.ow;
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      // PyTorch: the window is clipped to the padded input for the divisor,
      // and to the input for the sum.
      // h1 = min(h0 + kh, h + ph), without forming h0 + kh (kh may be near 2^63)
      std::int64_t h0 = oh * g.sh - g.ph;
      std::int64_t h1 = g.kh >= g.h + g.ph - h0 ? g.h + g.ph : h0 + g.kh;
      const std::int64_t hpad = h1 - h0;
      h0 = std::max<std::int64_t>(h0, 0);
      h1 = std::min(h1, g.h);
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        std::int64_t w0 = ow * g.sw - g.pw;
        std::int64_t w1 = g.kw >= g.w + g.pw - w0 ? g.w + g.pw : w0 + g.kw;
        const std::int64_t wpad = w1 - w0;
        w0 = std::max<std::int64_t>(w0, 0);
        w1 = std::min(w1, g.w);
        if (h0 >= h1 || w0 >= w1) {
          yp[oh * g.ow + ow] = T(0);
          continue;
        }
        T sum = T(0);
        for (std::int64_t i = h0; i < h1; ++i)
          for (std::int64_t j = w0; j < w1; ++j) sum += xp[i * g.w + j];
        // in T: with a huge kernel and padding the padded window's area overflows int64
        const T count = count_include_pad ? static_cast<T>(hpad) * static_cast<T>(wpad)
                                          : static_cast<T>((h1 - h0) * (w1 - w0));
        yp[oh * g.ow + ow] = sum / count;
      }
    }
  });
}

template <class T>
void max_pool2d_grad(const T* x, const T* gy, T* dx, const Pool2dGeometry& g) noexcept {
  for_planes(g, [&](std::int64_t p) {
    const T* xp = x + p * g.h * g.w;
    const T* gp = gy + p * g.oh * g.ow;
    T* dp = dx + p * g.h * g.w;
    std::fill(dp, dp + g.h * g.w, T(0));
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      const std::int64_t h0 = oh * g.sh - g.ph;
      const TapRange rh = tap_range(h0, g.dh, g.kh, g.h);
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        const std::int64_t w0 = ow * g.sw - g.pw;
        const TapRange rw = tap_range(w0, g.dw, g.kw, g.w);
        if (rh.lo >= rh.hi || rw.lo >= rw.hi) continue;
        // The forward's choice: the first strict maximum, or the last NaN; a
        // window of -inf routes to its first element (as PyTorch).
        std::int64_t at = (h0 + rh.lo * g.dh) * g.w + w0 + rw.lo * g.dw;
        T best = -std::numeric_limits<T>::infinity();
        for (std::int64_t i = rh.lo; i < rh.hi; ++i) {
          const std::int64_t row = (h0 + i * g.dh) * g.w + w0;
          for (std::int64_t j = rw.lo; j < rw.hi; ++j) {
            const T v = xp[row + j * g.dw];
            if (v > best || std::isnan(v)) {
              best = v;
              at = row + j * g.dw;
            }
          }
        }
        dp[at] += gp[oh * g.ow + ow];
      }
    }
  });
}

template <class T>
void avg_pool2d_grad(const T* gy, T* dx, const Pool2dGeometry& g, bool count_include_pad) noexcept {
  for_planes(g, [&](std::int64_t p) {
    const T* gp = gy + p * g.oh * g.ow;
    T* dp = dx + p * g.h * g.w;
    std::fill(dp, dp + g.h * g.w, T(0));
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      // The forward's windows and divisors (see avg_pool2d).
      std::int64_t h0 = oh * g.sh - g.ph;
      std::int64_t h1 = g.kh >= g.h + g.ph - h0 ? g.h + g.ph : h0 + g.kh;
      const std::int64_t hpad = h1 - h0;
      h0 = std::max<std::int64_t>(h0, 0);
      h1 = std::min(h1, g.h);
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        std::int64_t w0 = ow * g.sw - g.pw;
        std::int64_t w1 = g.kw >= g.w + g.pw - w0 ? g.w + g.pw : w0 + g.kw;
        const std::int64_t wpad = w1 - w0;
        w0 = std::max<std::int64_t>(w0, 0);
        w1 = std::min(w1, g.w);
        if (h0 >= h1 || w0 >= w1) continue;
        const T count = count_include_pad ? static_cast<T>(hpad) * static_cast<T>(wpad)
                                          : static_cast<T>((h1 - h0) * (w1 - w0));
        const T v = gp[oh * g.ow + ow] / count;
        for (std::int64_t i = h0; i < h1; ++i)
          for (std::int64_t j = w0; j < w1; ++j) dp[i * g.w + j] += v;
      }
    }
  });
}

template void max_pool2d<float>(const float*, float*, const Pool2dGeometry&) noexcept;
template void max_pool2d<double>(const double*, double*, const Pool2dGeometry&) noexcept;
template void max_pool2d<std::int32_t>(const std::int32_t*, std::int32_t*,
                                       const Pool2dGeometry&) noexcept;
template void max_pool2d<std::int64_t>(const std::int64_t*, std::int64_t*,
                                       const Pool2dGeometry&) noexcept;
template void avg_pool2d<float>(const float*, float*, const Pool2dGeometry&, bool) noexcept;
template void avg_pool2d<double>(const double*, double*, const Pool2dGeometry&, bool) noexcept;
template void max_pool2d_grad<float>(const float*, const float*, float*,
                                     const Pool2dGeometry&) noexcept;
template void max_pool2d_grad<double>(const double*, const double*, double*,
                                      const Pool2dGeometry&) noexcept;
template void avg_pool2d_grad<float>(const float*, float*, const Pool2dGeometry&, bool) noexcept;
template void avg_pool2d_grad<double>(const double*, double*, const Pool2dGeometry&, bool) noexcept;

}  // namespace ms::kernels
