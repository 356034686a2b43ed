// 2-D convolution: im2col of a tile of output positions into a reused buffer,
// then one GEMM per (image, group, tile) written straight into the NCHW output
// (no transpose afterwards). The gradients reuse the machinery: the input's is
// a GEMM W^T G per tile followed by col2im (im2col's adjoint), the weight's a
// GEMM G cols^T per tile accumulated over the images.
#include "ms/kernels/conv.hpp"

#include <algorithm>
#include <cstdint>

#include "ms/core/tensor.hpp"
#include "ms/kernels/gemm.hpp"
#include "ms/kernels/parallel.hpp"

namespace ms::kernels {
namespace {

// conv2d_grad_weight: the batch is summed in at most this many partial sums
// (the parallelism of the weight gradient when groups == 1).
constexpr std::int64_t kWeightChunks = 8;

// ceil(a / b) for a >= 0, b > 0, without overflow for b near 2^63.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

// What the whole-row fast paths of im2col_cols / col2im_cols need about row
// `row` of the im2col matrix (channel ci, kernel tap i, j) over the output rows
// [p0 / ow, p1 / ow) at stride 1 along the width.
struct RowRuns {
  std::int64_t ci, hoff, woff;
  std::int64_t lo, hi;  // output columns [lo, hi) read input columns c + woff inside [0, w)
  // Same width (sh == 1, ow == w) only: output q reads input q + shift; output
  // rows [v0, v1) lie inside the input, positions [q0, q1) of them read inside the plane.
  std::int64_t shift, v0, v1, q0, q1;
};

RowRuns row_runs(const Conv2dGeometry& g, std::int64_t row, std::int64_t p0, std::int64_t p1) {
  const std::int64_t taps = g.kh * g.kw, i = (row % taps) / g.kw, j = row % g.kw;
  RowRuns r{};
  r.ci = row / taps;
  r.hoff = i * g.dh - g.ph;
  r.woff = j * g.dw - g.pw;
  r.hi = std::min(g.ow, std::max<std::int64_t>(g.w - r.woff, 0));
  r.lo = std::min(r.hi, std::max<std::int64_t>(-r.woff, 0));
  if (g.sh == 1 && g.ow == g.w) {
    const std::int64_t r0 = p0 / g.ow, r1 = p1 / g.ow;
    r.shift = r.hoff * g.w + r.woff;
    r.v0 = std::min(std::max(-r.hoff, r0), r1);
    r.v1 = std::min(std::max(g.h - r.hoff, r.v0), r1);
    r.q0 = std::min(std::max(r.v0 * g.ow, -r.shift), r.v1 * g.ow);
    r.q1 = std::min(std::max(r.q0, g.h * g.w - r.shift), r.v1 * g.ow);
  }
  return r;
}

// Zeroes columns outside [lo, hi) of output rows [v0, v1) of one im2col row
// (its entries for output rows from p0 / ow on).
template <class T>
void zero_border_columns(T* buf, const Conv2dGeometry& g, const RowRuns& r, std::int64_t p0) {
  for (std::int64_t oh = r.v0; oh < r.v1; ++oh) {
    T* d = buf + (oh * g.ow - p0);
    for (std::int64_t c = 0; c < r.lo; ++c) d[c] = T(0);
    for (std::int64_t c = r.hi; c < g.ow; ++c) d[c] = T(0);
  }
}

// Columns [p0, p1) (output positions, row-major over [oh, ow]) of the first
// `rows` rows of one image's im2col matrix, into col [rows, p1 - p0].
template <class T>
void im2col_cols(const T* x, const Conv2dGeometry& g, std::int64_t rows, std::int64_t p0,
                 std::int64_t p1, T* col) {
  const std::int64_t taps = g.kh * g.kw, plane = g.h * g.w, width = p1 - p0;
  if (g.sw == 1 && p0 % g.ow == 0 && width % g.ow == 0) {
    // Whole output rows at stride 1 (the usual tile): each output row is one
    // run of input pixels with the same zero borders for every row, so no
    // division or library call per run (this loop was most of im2col's time).
    for (std::int64_t row = 0; row < rows; ++row) {
      const RowRuns r = row_runs(g, row, p0, p1);
      const T* xc = x + r.ci * plane;
      T* dst = col + row * width;
      if (g.sh == 1 && g.ow == g.w) {
        // "same" width: the rows inside the input are one contiguous shifted
        // copy; the columns outside [lo, hi), which read the neighbouring input
        // row, are zeroed after.
        std::fill(dst, dst + (r.q0 - p0), T(0));
        for (std::int64_t q = r.q0; q < r.q1; ++q) dst[q - p0] = xc[q + r.shift];
        std::fill(dst + (r.q1 - p0), dst + width, T(0));
        zero_border_columns(dst, g, r, p0);
        continue;
      }
      for (std::int64_t oh = p0 / g.ow; oh < p1 / g.ow; ++oh) {
        T* d = dst + (oh * g.ow - p0);
        const std::int64_t ih = oh * g.sh + r.hoff;
        if (ih < 0 || ih >= g.h) {
          for (std::int64_t c = 0; c < g.ow; ++c) d[c] = T(0);
          continue;
        }
        const T* src = xc + ih * g.w;  // src[c + woff] for c in [lo, hi) is inside the row
        for (std::int64_t c = 0; c < r.lo; ++c) d[c] = T(0);
        for (std::int64_t c = r.lo; c < r.hi; ++c) d[c] = src[c + r.woff];
        for (std::int64_t c = r.hi; c < g.ow; ++c) d[c] = T(0);
      }
    }
    return;
  }
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t ci = row / taps, i = (row % taps) / g.kw, j = row % g.kw;
    const T* xc = x + ci * plane;
    T* dst = col + row * width;
    const std::int64_t hoff = i * g.dh - g.ph, woff = j * g.dw - g.pw;
    // Output columns whose input column ow * sw + woff lies in [0, w).
    std::int64_t lo = woff >= 0 ? 0 : ceil_div(-woff, g.sw);
    std::int64_t hi = g.w - woff <= 0 ? 0 : ceil_div(g.w - woff, g.sw);
    hi = std::min(hi, g.ow);
    lo = std::min(lo, hi);
    for (std::int64_t q = p0; q < p1;) {  // one output row segment [c0, c1) at a time
      const std::int64_t oh = q / g.ow, c0 = q - oh * g.ow;
      const std::int64_t c1 = std::min(g.ow, c0 + (p1 - q));
      T* d = dst + (q - p0);  // d[c - c0] is output column c
      const std::int64_t ih = oh * g.sh + hoff;
      if (ih < 0 || ih >= g.h) {
        std::fill(d, d + (c1 - c0), T(0));
      } else {
        const std::int64_t a = std::min(std::max(lo, c0), c1), b = std::min(std::max(hi, a), c1);
        const std::int64_t base = ih * g.w + woff;  // input of column c: xc[base + c * sw]
        std::fill(d, d + (a - c0), T(0));
        if (g.sw == 1) {
          std::copy(xc + base + a, xc + base + b, d + (a - c0));
        } else {
          for (std::int64_t c = a; c < b; ++c) d[c - c0] = xc[base + c * g.sw];
        }
        std::fill(d + (b - c0), d + (c1 - c0), T(0));
      }
      q += c1 - c0;
    }
  }
}

// The adjoint of im2col_cols: adds columns [p0, p1) of the first `rows` rows
// of col [rows, p1 - p0] back into the image dx (each input pixel receives the
// sum over the taps and output positions that read it; padding is dropped).
// col is a workspace: its entries that fall in the padding may be zeroed.
template <class T>
void col2im_cols(T* col, const Conv2dGeometry& g, std::int64_t rows, std::int64_t p0,
                 std::int64_t p1, T* dx) {
  const std::int64_t taps = g.kh * g.kw, plane = g.h * g.w, width = p1 - p0;
  if (g.sw == 1 && p0 % g.ow == 0 && width % g.ow == 0) {  // as im2col_cols's fast path
    for (std::int64_t row = 0; row < rows; ++row) {
      const RowRuns r = row_runs(g, row, p0, p1);
      T* xc = dx + r.ci * plane;
      T* src = col + row * width;
      if (g.sh == 1 && g.ow == g.w) {
        // As im2col_cols: one contiguous shifted add per row of col, after
        // zeroing col's entries outside [lo, hi) (they belong to no pixel of
        // this row and would land in the neighbouring one).
        zero_border_columns(src, g, r, p0);
        for (std::int64_t q = r.q0; q < r.q1; ++q) xc[q + r.shift] += src[q - p0];
        continue;
      }
      for (std::int64_t oh = p0 / g.ow; oh < p1 / g.ow; ++oh) {
        const std::int64_t ih = oh * g.sh + r.hoff;
        if (ih < 0 || ih >= g.h) continue;
        const T* s = src + (oh * g.ow - p0);
        T* d = xc + ih * g.w;  // d[c + woff] for c in [lo, hi) is inside the row
        for (std::int64_t c = r.lo; c < r.hi; ++c) d[c + r.woff] += s[c];
      }
    }
    return;
  }
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t ci = row / taps, i = (row % taps) / g.kw, j = row % g.kw;
    T* xc = dx + ci * plane;
    const T* src = col + row * width;
    const std::int64_t hoff = i * g.dh - g.ph, woff = j * g.dw - g.pw;
    std::int64_t lo = woff >= 0 ? 0 : ceil_div(-woff, g.sw);
    std::int64_t hi = g.w - woff <= 0 ? 0 : ceil_div(g.w - woff, g.sw);
    hi = std::min(hi, g.ow);
    lo = std::min(lo, hi);
    for (std::int64_t q = p0; q < p1;) {
      const std::int64_t oh = q / g.ow, c0 = q - oh * g.ow;
      const std::int64_t c1 = std::min(g.ow, c0 + (p1 - q));
      const T* s = src + (q - p0);  // s[c - c0] belongs to output column c
      const std::int64_t ih = oh * g.sh + hoff;
      if (ih >= 0 && ih < g.h) {
        const std::int64_t a = std::min(std::max(lo, c0), c1), b = std::min(std::max(hi, a), c1);
        const std::int64_t base = ih * g.w + woff;  // pixel of column c: xc[base + c * sw]
        if (g.sw == 1) {
          for (std::int64_t c = a; c < b; ++c) xc[base + c] += s[c - c0];
        } else {
          for (std::int64_t c = a; c < b; ++c) xc[base + c * g.sw] += s[c - c0];
        }
      }
      q += c1 - c0;
    }
  }
}

// How a convolution is cut into work items: (image, group, column tile).
// Depends on the shape only, never on the thread count, so every output
// element is computed by the same single-threaded GEMM call whatever the
// number of threads: results are bitwise reproducible.
struct ConvPlan {
  std::int64_t cg, og, k, p;  // channels per group, GEMM sizes
  std::int64_t tile, tiles, items;
  bool direct;  // 1x1, stride 1, no padding: the input is its own im2col matrix
};

ConvPlan conv_plan(const Conv2dGeometry& g) {
  ConvPlan pl{};
  pl.cg = g.c / g.groups;
  pl.og = g.o / g.groups;
  pl.k = pl.cg * g.kh * g.kw;
  pl.p = g.oh * g.ow;
  pl.direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
  const std::int64_t units = g.n * g.groups;
  if (units == 0 || pl.p == 0) return pl;
  // Tiles of up to ~1024 columns keep the im2col buffer near the caches; a
  // batch of fewer than 4 (image, group) pairs is cut further (tiles of >= 256
  // columns, so that packing the weights stays cheap next to the product).
  std::int64_t n_tiles = ceil_div(pl.p, 1024);
  if (units * n_tiles < 4) n_tiles = std::max(n_tiles, std::min(ceil_div(4, units), pl.p / 256));
  pl.tile = std::min(pl.p, ceil_div(ceil_div(pl.p, n_tiles), 16) * 16);
  pl.tiles = ceil_div(pl.p, pl.tile);
  pl.items = units * pl.tiles;
  return pl;
}

}  // namespace

template <class T>
void im2col(const T* x, std::int64_t c, const Conv2dGeometry& g, std::int64_t p0, std::int64_t p1,
            T* col) noexcept {
  im2col_cols(x, g, c * g.kh * g.kw, p0, p1, col);
}

template <class T>
void conv2d(const T* x, const T* w, const T* bias, T* y, const Conv2dGeometry& g) {
  const ConvPlan pl = conv_plan(g);
  if (pl.items == 0 || pl.og == 0) return;
  // One part per thread, even with fewer items than threads: GEMM runs on one
  // thread inside the region (with the "openblas" backend a threaded GEMM would
  // round the elements at its block edges differently, and results would
  // depend on the threads).
  const std::int64_t parts = detail::in_parallel() ? 1 : get_num_threads();
  // One im2col buffer per part, allocated here: exceptions must not reach a region.
  const std::int64_t col_numel = pl.direct ? 0 : pl.k * pl.tile;
  Tensor work;
  if (col_numel > 0) work = empty(Shape{parts, col_numel}, dtype_of<T>);
  T* const ws = col_numel > 0 ? work.data<T>() : nullptr;

  const auto run_item = [&](std::int64_t item, T* col) {
    const std::int64_t u = item / pl.tiles, t = item % pl.tiles;
    const std::int64_t img = u / g.groups, grp = u % g.groups;
    const std::int64_t p0 = t * pl.tile, p1 = std::min(pl.p, p0 + pl.tile), width = p1 - p0;
    const T* xin = x + (img * g.c + grp * pl.cg) * g.h * g.w;
    T* out = y + (img * g.o + grp * pl.og) * pl.p + p0;  // [og, width], row stride p
    const T* b = nullptr;  // the [k, width] right-hand side (unread when k == 0)
    std::int64_t ldb = std::max<std::int64_t>(width, 1);
    if (pl.k > 0 && pl.direct) {  // columns p0.. of x viewed as [cg, h * w]
      b = xin + p0;
      ldb = pl.p;
    } else if (pl.k > 0) {
      im2col_cols(xin, g, pl.k, p0, p1, col);
      b = col;
    }
    T beta = T(0);
    if (bias != nullptr) {
      for (std::int64_t r = 0; r < pl.og; ++r)
        std::fill(out + r * pl.p, out + r * pl.p + width, bias[grp * pl.og + r]);
      beta = T(1);
    }
    gemm<T>(false, false, pl.og, width, pl.k, T(1), w + grp * pl.og * pl.k,
            std::max<std::int64_t>(pl.k, 1), b, ldb, beta, out, pl.p);
  };

  // Contiguous runs of items per part; inside the region GEMM runs on one thread.
  parallel_for(parts, 1, [&](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t part = q0; part < q1; ++part) {
      const std::int64_t i0 = pl.items * part / parts, i1 = pl.items * (part + 1) / parts;
      for (std::int64_t item = i0; item < i1; ++item)
        run_item(item, ws != nullptr ? ws + part * col_numel : nullptr);
    }
  });
}

namespace {

// Runs fn(item, part) for items [0, items), cut into `parts` contiguous runs,
// one per thread, inside one parallel region (so that GEMM runs single-threaded
// in it, and each item's arithmetic is the same for any thread count).
template <class F>
void for_items(std::int64_t items, std::int64_t parts, F&& fn) {
  parallel_for(parts, 1, [&](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t part = q0; part < q1; ++part) {
      const std::int64_t i0 = items * part / parts, i1 = items * (part + 1) / parts;
      for (std::int64_t item = i0; item < i1; ++item) fn(item, part);
    }
  });
}

}  // namespace

template <class T>
void conv2d_grad_input(const T* gy, const T* w, T* dx, const Conv2dGeometry& g) {
  const ConvPlan pl = conv_plan(g);
  const std::int64_t units = g.n * g.groups, image_group = pl.cg * g.h * g.w;
  if (units == 0 || image_group == 0) return;
  if (pl.p == 0 || pl.og == 0 || pl.k == 0) {  // nothing reads the input
    std::fill(dx, dx + g.n * g.c * g.h * g.w, T(0));
    return;
  }
  const std::int64_t parts = detail::in_parallel() ? 1 : get_num_threads();
  const std::int64_t col_numel = pl.direct ? 0 : pl.k * pl.tile;
  Tensor work;
  if (col_numel > 0) work = empty(Shape{parts, col_numel}, dtype_of<T>);
  T* const ws = col_numel > 0 ? work.data<T>() : nullptr;
  // One item per (image, group): its tiles all add into the same part of dx,
  // so they stay on one thread, in order.
  for_items(units, parts, [&](std::int64_t u, std::int64_t part) {
    const std::int64_t img = u / g.groups, grp = u % g.groups;
    T* dxi = dx + (img * g.c + grp * pl.cg) * g.h * g.w;
    const T* gi = gy + (img * g.o + grp * pl.og) * pl.p;  // [og, p]
    const T* wg = w + grp * pl.og * pl.k;                 // [og, k]
    if (pl.direct) {                                      // dx_g [cg, h * w] = W_g^T G_g
      gemm<T>(true, false, pl.k, pl.p, pl.og, T(1), wg, pl.k, gi, pl.p, T(0), dxi, pl.p);
      return;
    }
    T* col = ws + part * col_numel;
    std::fill(dxi, dxi + image_group, T(0));
    for (std::int64_t p0 = 0; p0 < pl.p; p0 += pl.tile) {
      const std::int64_t p1 = std::min(pl.p, p0 + pl.tile), width = p1 - p0;
      // col [k, width] = W_g^T [k, og] x G_g[:, p0:p1] [og, width]
      gemm<T>(true, false, pl.k, width, pl.og, T(1), wg, pl.k, gi + p0, pl.p, T(0), col, width);
      col2im_cols(col, g, pl.k, p0, p1, dxi);
    }
  });
}

template <class T>
void conv2d_grad_weight(const T* x, const T* gy, T* dw, const Conv2dGeometry& g) {
  const ConvPlan pl = conv_plan(g);
  const std::int64_t wnumel = g.o * pl.k;
  if (wnumel == 0) return;
  if (g.n == 0 || pl.p == 0) {
    std::fill(dw, dw + wnumel, T(0));
    return;
  }
  // The batch is cut into a fixed number of chunks (by the shape only); each
  // (chunk, group) item sums its images into its own partial dW, and the
  // partials are added in chunk order: the same sums for any thread count.
  const std::int64_t chunks = std::min<std::int64_t>(g.n, kWeightChunks);
  const std::int64_t parts = detail::in_parallel() ? 1 : get_num_threads();
  const std::int64_t col_numel = pl.direct ? 0 : pl.k * pl.tile;
  Tensor work = empty(Shape{parts * col_numel + (chunks - 1) * wnumel}, dtype_of<T>);
  T* const cols = work.data<T>();
  T* const partials = cols + parts * col_numel;  // chunk c > 0 at partials + (c - 1) * wnumel
  for_items(chunks * g.groups, parts, [&](std::int64_t item, std::int64_t part) {
    const std::int64_t chunk = item / g.groups, grp = item % g.groups;
    T* dwc = (chunk == 0 ? dw : partials + (chunk - 1) * wnumel) + grp * pl.og * pl.k;  // [og, k]
    T* col = cols + part * col_numel;
    const std::int64_t i0 = g.n * chunk / chunks, i1 = g.n * (chunk + 1) / chunks;
    T beta = T(0);
    for (std::int64_t img = i0; img < i1; ++img) {
      const T* xin = x + (img * g.c + grp * pl.cg) * g.h * g.w;
      const T* gi = gy + (img * g.o + grp * pl.og) * pl.p;  // [og, p]
      for (std::int64_t p0 = 0; p0 < pl.p; p0 += pl.tile) {
        const std::int64_t p1 = std::min(pl.p, p0 + pl.tile), width = p1 - p0;
        const T* b = xin + p0;  // [k, width] with row stride ldb
        std::int64_t ldb = pl.p;
        if (!pl.direct) {
          im2col_cols(xin, g, pl.k, p0, p1, col);
          b = col;
          ldb = width;
        }
        // dW_g [og, k] (+)= G_g[:, p0:p1] [og, width] x cols^T [width, k]
        gemm<T>(false, true, pl.og, pl.k, width, T(1), gi + p0, pl.p, b, ldb, beta, dwc, pl.k);
        beta = T(1);
      }
    }
  });
  if (chunks > 1)
    parallel_for(wnumel, std::int64_t{1} << 14, [&](std::int64_t e0, std::int64_t e1) {
      for (std::int64_t c = 1; c < chunks; ++c) {
        const T* src = partials + (c - 1) * wnumel;
        for (std::int64_t e = e0; e < e1; ++e) dw[e] += src[e];
      }
    });
}

#define MS_CONV_INSTANTIATE(T)                                                         \
  template void im2col<T>(const T*, std::int64_t, const Conv2dGeometry&, std::int64_t, \
                          std::int64_t, T*) noexcept;                                  \
  template void conv2d<T>(const T*, const T*, const T*, T*, const Conv2dGeometry&);
MS_CONV_INSTANTIATE(float)
MS_CONV_INSTANTIATE(double)
MS_CONV_INSTANTIATE(std::int32_t)
MS_CONV_INSTANTIATE(std::int64_t)
#undef MS_CONV_INSTANTIATE
template void conv2d_grad_input<float>(const float*, const float*, float*, const Conv2dGeometry&);
template void conv2d_grad_input<double>(const double*, const double*, double*,
                                        const Conv2dGeometry&);
template void conv2d_grad_weight<float>(const float*, const float*, float*, const Conv2dGeometry&);
template void conv2d_grad_weight<double>(const double*, const double*, double*,
                                         const Conv2dGeometry&);

}  // namespace ms::kernels
