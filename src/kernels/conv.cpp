// 2-D convolution: im2col of a tile of output positions into a reused buffer,
// then one GEMM per (image, group, tile) written straight into the NCHW output
// (no transpose afterwards). The gradients reuse the machinery: the input's is
// a GEMM W^T G per tile followed by col2im (im2col's adjoint), the weight's a
// GEMM G cols^T per tile accumulated over the images. 3x3 convolutions at
// stride 1 with enough channels (and their input gradients, convolutions too)
// take the Winograd F(2x2, 3x3) path instead: 2.25x fewer multiplications.
// float32 convolutions (and bfloat16 forwards and input gradients) at stride 1
// along the width run on libxsmm's batch-reduce kernels instead when libxsmm is
// usable (src/kernels/conv_libxsmm.cpp), faster than both on the CNN's shapes;
// 3x3 convolutions with padding 1 over a few input channels on ms's AVX-512
// kernels (src/kernels/conv_narrow.cpp).
// The other bfloat16 gradients take the im2col path on gemm_bf16 (float32
// sums of bfloat16 products; no Winograd: its transforms would round).
#include "ms/kernels/conv.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "bf16_convert.hpp"
#include "ceil_div.hpp"
#include "conv_libxsmm.hpp"
#include "conv_narrow.hpp"
#include "ms/core/tensor.hpp"
#include "ms/kernels/gemm.hpp"
#include "ms/kernels/parallel.hpp"
#include "ms/kernels/pool.hpp"
#include "transpose.hpp"

namespace ms::kernels {
namespace {

// conv2d_grad_weight: the batch is summed in at most this many partial sums
// (the parallelism of the weight gradient when groups == 1).
constexpr std::int64_t kWeightChunks = 8;

using detail::ceil_div;

// What the whole-row fast paths of im2col_cols / col2im_cols need about the
// im2col rows of kernel tap `tap` = (i, j) (the same for every channel) over
// the output rows [p0 / ow, p1 / ow) at stride 1 along the width.
struct RowRuns {
  std::int64_t hoff, woff;
  std::int64_t lo, hi;  // output columns [lo, hi) read input columns c + woff inside [0, w)
  // Same width (sh == 1, ow == w) only: output q reads input q + shift; output
  // rows [v0, v1) lie inside the input, positions [q0, q1) of them read inside the plane.
  std::int64_t shift, v0, v1, q0, q1;
};

RowRuns row_runs(const Conv2dGeometry& g, std::int64_t tap, std::int64_t p0, std::int64_t p1) {
  const std::int64_t i = tap / g.kw, j = tap % g.kw;
  RowRuns r{};
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
    // The runs depend on the kernel tap only: computed once per tap (not per
    // row: its divisions were a visible share of small convolutions).
    for (std::int64_t tap = 0; tap < std::min(rows, taps); ++tap) {
      const RowRuns r = row_runs(g, tap, p0, p1);
      for (std::int64_t ci = 0, rr = tap; rr < rows; ++ci, rr += taps) {
        const T* xc = x + ci * plane;
        T* dst = col + rr * width;
        if (g.sh == 1 && g.ow == g.w) {
          // "same" width: the rows inside the input are one contiguous shifted
          // copy; the columns outside [lo, hi), which read the neighbouring input
          // row, are zeroed after.
          std::fill(dst, dst + (r.q0 - p0), T(0));
          std::copy(xc + r.q0 + r.shift, xc + r.q1 + r.shift, dst + (r.q0 - p0));
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
    // Per tap, as im2col_cols; each pixel still receives its taps in order.
    for (std::int64_t tap = 0; tap < std::min(rows, taps); ++tap) {
      const RowRuns r = row_runs(g, tap, p0, p1);
      for (std::int64_t ci = 0, rr = tap; rr < rows; ++ci, rr += taps) {
        T* xc = dx + ci * plane;
        T* src = col + rr * width;
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

// Item `item` of an Im2col pass over conv_plan's items: its (image, group),
// its output positions [p0, p0 + width), and the right-hand side of its
// product, b [k, width] (row stride ldb): columns p0.. of the image viewed as
// [cg, h * w] when pl.direct, else its im2col columns written into `col`;
// null when k is 0.
template <class T>
struct ImItem {
  std::int64_t img, grp, p0, width;
  const T* b;
  std::int64_t ldb;
};

template <class T>
ImItem<T> im2col_item(const T* x, const Conv2dGeometry& g, const ConvPlan& pl, std::int64_t item,
                      T* col) {
  const std::int64_t u = item / pl.tiles, t = item % pl.tiles;
  ImItem<T> it{u / g.groups, u % g.groups, t * pl.tile, 0, nullptr, 0};
  it.width = std::min(pl.p, it.p0 + pl.tile) - it.p0;
  it.ldb = std::max<std::int64_t>(it.width, 1);
  const T* xin = x + (it.img * g.c + it.grp * pl.cg) * g.h * g.w;
  if (pl.k > 0 && pl.direct) {
    it.b = xin + it.p0;
    it.ldb = pl.p;
  } else if (pl.k > 0) {
    im2col_cols(xin, g, pl.k, it.p0, it.p0 + it.width, col);
    it.b = col;
  }
  return it;
}

// max_pool2d with 2x2 windows at stride 2 (no padding, floor) of the
// `planes` [oh, ow] planes of y from plane `first` on into pooled (and the
// chosen taps into `index` when it is not null): the fused pooling of
// conv2d's second (and third) output, run on planes the convolution has just
// written (still in cache).
template <class T>
void pool2x2_planes(const T* y, T* pooled, std::uint8_t* index, std::int64_t first,
                    std::int64_t planes, const Conv2dGeometry& g) {
  const Pool2dGeometry pg = pool2x2_geometry(planes, g.oh, g.ow);
  const std::int64_t at = first * pg.oh * pg.ow;
  if constexpr (std::is_floating_point_v<T>) {
    if (index != nullptr) {
      max_pool2x2_index(y + first * g.oh * g.ow, pooled + at, index + at, pg);
      return;
    }
  }
  max_pool2d(y + first * g.oh * g.ow, pooled + at, pg);
}

// ---------------------------------------------------------------- Winograd F(2x2, 3x3)

// The next loop carries no dependence through memory (its stores go to buffers
// it does not read): lets the compiler vectorize it without checks.
#if defined(__clang__)
#define MS_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define MS_IVDEP _Pragma("GCC ivdep")
#endif
//
// For 3x3 kernels at stride 1 without dilation or groups (most convolution
// layers), each 2x2 block of outputs comes from a 4x4 input patch with 16
// multiplications per (input, output) channel pair instead of 36 (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016):
//   Y = A^T [ (G k G^T) .* (B^T d B) ] A.
// Summed over the input channels, the 16 elementwise products are 16 GEMMs
// U[xi] [cout, cin] x V[xi] [cin, tiles]. Tiles are grouped by images into
// chunks fixed by the shape, never by the thread count, and each chunk is
// computed by one thread: bitwise the same results for any thread count.
// Floating types only (the transforms halve values); the rounding differs
// from im2col + GEMM's by a few units in the last place.

// Worth it: enough channels for the GEMMs to dominate the transforms. And
// planes of at most 32 x 32 outputs (256 tiles): a chunk holds whole images,
// so its workspace grows with the plane (larger planes take im2col + GEMM,
// whose buffer is tiled; cutting images into tile rows would lift this).
bool winograd_fits(const Conv2dGeometry& g) {
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
         g.groups == 1 && g.c >= 16 && g.o >= 16 && g.oh >= 2 && g.ow >= 2 &&
         ((g.oh + 1) / 2) * ((g.ow + 1) / 2) <= 256;
}

// Winograd for `pass` (the input gradient's convolution pads by 2 - p).
bool winograd_fits(const Conv2dGeometry& g, ConvPass pass) {
  return winograd_fits(g) && (pass != ConvPass::GradInput || (g.ph <= 2 && g.pw <= 2));
}

// The algorithm of conv2d<T> (and its gradients): float as conv2d_algorithm,
// double Winograd where it fits (unless Im2col is asked for), integers Im2col.
template <class T>
ConvAlgo algorithm_of(const Conv2dGeometry& g, ConvPass pass) {
  if constexpr (std::is_same_v<T, float>) {
    return conv2d_algorithm(g, pass);
  } else if constexpr (std::is_floating_point_v<T>) {
    return g.algo != ConvAlgo::Im2col && winograd_fits(g, pass) ? ConvAlgo::Winograd
                                                                : ConvAlgo::Im2col;
  } else {
    return ConvAlgo::Im2col;
  }
}

// The Direct forward (false when libxsmm cannot run it), with the pooling of
// each block of planes right after it is written (in cache).
bool direct_forward(const float* x, const float* w, const float* bias, float* y,
                    const Conv2dGeometry& g, bool relu, float* pooled, std::uint8_t* pool_index) {
  struct Pool {
    const float* y;
    float* pooled;
    std::uint8_t* index;
    const Conv2dGeometry* g;
  } pool{y, pooled, pool_index, &g};
  const detail::PlanesDone done{[](void* ctx, std::int64_t first, std::int64_t count) {
                                  const Pool& pc = *static_cast<const Pool*>(ctx);
                                  pool2x2_planes(pc.y, pc.pooled, pc.index, first, count, *pc.g);
                                },
                                &pool};
  const detail::PlanesDone* const after = pooled != nullptr ? &done : nullptr;
  return detail::conv_narrow_forward(x, w, bias, y, g, relu, after) ||
         detail::conv_direct_forward(x, w, bias, y, g, relu, after);
}

// U [16, rows, cols] of the kernels: kernel (r, s) is w[(r * cols + s) * 9 ..]
// or, with `adjoint` (the input gradient's convolution: channels swapped,
// kernel rotated by 180 degrees), w[(s * rows + r) * 9 + 8 - t].
template <class T>
void winograd_kernels(const T* w, std::int64_t rows, std::int64_t cols, bool adjoint, T* u) {
  const std::int64_t mat = rows * cols;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t s = 0; s < cols; ++s) {
      T k[9];
      for (int t = 0; t < 9; ++t)
        k[t] = adjoint ? w[(s * rows + r) * 9 + 8 - t] : w[(r * cols + s) * 9 + t];
      T gk[4][3];  // G k
      for (int j = 0; j < 3; ++j) {
        gk[0][j] = k[j];
        gk[1][j] = (k[j] + k[3 + j] + k[6 + j]) * T(0.5);
        gk[2][j] = (k[j] - k[3 + j] + k[6 + j]) * T(0.5);
        gk[3][j] = k[6 + j];
      }
      T* dst = u + r * cols + s;
      for (int i = 0; i < 4; ++i) {  // (G k) G^T
        dst[(i * 4 + 0) * mat] = gk[i][0];
        dst[(i * 4 + 1) * mat] = (gk[i][0] + gk[i][1] + gk[i][2]) * T(0.5);
        dst[(i * 4 + 2) * mat] = (gk[i][0] - gk[i][1] + gk[i][2]) * T(0.5);
        dst[(i * 4 + 3) * mat] = gk[i][2];
      }
    }
}

struct WinogradPlan {
  std::int64_t th, tw, tiles;            // tiles per image: th x tw
  std::int64_t per_chunk, chunks, cols;  // images per chunk; chunks; tiles per chunk (max)
};

WinogradPlan winograd_plan(const Conv2dGeometry& g) {
  WinogradPlan p{};
  p.th = (g.oh + 1) / 2;
  p.tw = (g.ow + 1) / 2;
  p.tiles = p.th * p.tw;
  // ~256 tiles per chunk, fewer when that makes the chunk count even (two
  // threads then get the same work; by the shape only, as everything here).
  p.per_chunk = std::max<std::int64_t>(1, 256 / p.tiles);
  for (std::int64_t q = p.per_chunk; q > std::max<std::int64_t>(1, p.per_chunk / 2); --q)
    if (ceil_div(g.n, q) % 2 == 0) {
      p.per_chunk = q;
      break;
    }
  p.chunks = ceil_div(g.n, p.per_chunk);
  p.cols = p.per_chunk * p.tiles;
  return p;
}

// dst[c * ldd + r] = f(c, src[r * lds + c]) for r < rows, c < cols, in 8 x 8
// blocks (each touches 8 lines on both sides, instead of a line per element
// on one side).
template <class T, class F>
void transpose_block(const T* src, std::int64_t lds, std::int64_t rows, std::int64_t cols, T* dst,
                     std::int64_t ldd, F&& f) {
  for (std::int64_t r0 = 0; r0 < rows; r0 += 8)
    for (std::int64_t c0 = 0; c0 < cols; c0 += 8) {
      const std::int64_t r1 = std::min(rows, r0 + 8), c1 = std::min(cols, c0 + 8);
      for (std::int64_t c = c0; c < c1; ++c)
        for (std::int64_t r = r0; r < r1; ++r) dst[c * ldd + r] = f(c, src[r * lds + c]);
    }
}

// Sizes of one chunk's workspace, in elements.
struct WinogradSpace {
  // V, M, the channels-last padded input, the channels-last output, and one
  // image's planes transposed (to_channels_last's scratch)
  std::int64_t v, m, in, out, tr;
  std::int64_t total() const { return v + m + in + out + tr; }
};

WinogradSpace winograd_space(const WinogradPlan& p, std::int64_t cin, std::int64_t cout) {
  // (An image's input is at most the padded plane, its output at most the tiles' plane.)
  return {16 * cin * p.cols, 16 * cout * p.cols,
          p.per_chunk * (2 * p.th + 2) * (2 * p.tw + 2) * cin,
          p.per_chunk * (2 * p.th) * (2 * p.tw) * cout,
          (2 * p.th + 2) * (2 * p.tw + 2) * std::max(cin, cout)};
}

// Planes x [imgs, ch, h, w] into dst [imgs, bh, bw, ch] (channels last), at
// row and column offsets top, left >= 0, clipped to the buffer, zeros
// elsewhere. Floats: each image's [ch, h w] block transposed by SIMD packets
// (transpose32), straight into dst when its rows are the image's, else into
// `scratch` (room for h w ch) whose rows are then copied into place (one
// element at a time, each plane row read in order and scattered ch apart,
// took 10 % of the CNN's training step on 1 thread: bm_train's
// BM_TrainCnn_Ms). Moves only: the bits are kept.
template <class T>
void to_channels_last(const T* x, std::int64_t imgs, std::int64_t ch, std::int64_t h,
                      std::int64_t w, T* dst, std::int64_t bh, std::int64_t bw, std::int64_t top,
                      std::int64_t left, T* scratch) {
  const std::int64_t r1 = std::min(bh, h + top), c1 = std::min(bw, w + left);
  if (top > 0 || left > 0 || r1 < bh || c1 < bw)  // not every element is written below
    std::fill(dst, dst + imgs * bh * bw * ch, T(0));
  if (r1 <= top || c1 <= left) return;
  if constexpr (std::is_same_v<T, float>) {
    const std::int64_t plane = h * w, rows = r1 - top, cols = c1 - left;
    if (top == 0 && left == 0 && cols == w && bw == w) {  // dst's rows are the image's
      for (std::int64_t i = 0; i < imgs; ++i)
        detail::transpose32(x + i * ch * plane, plane, ch, rows * w, dst + i * bh * bw * ch, ch);
      return;
    }
    for (std::int64_t i = 0; i < imgs; ++i) {
      detail::transpose32(x + i * ch * plane, plane, ch, rows * w, scratch, ch);
      for (std::int64_t r = 0; r < rows; ++r)
        std::copy_n(scratch + r * w * ch, cols * ch,
                    dst + (i * bh * bw + (r + top) * bw + left) * ch);
    }
    return;
  }
  for (std::int64_t i = 0; i < imgs; ++i)
    for (std::int64_t c = 0; c < ch; ++c) {
      const T* xp = x + (i * ch + c) * h * w;
      T* d = dst + i * bh * bw * ch + c;
      for (std::int64_t r = top; r < r1; ++r) {
        const T* src = xp + (r - top) * w;
        for (std::int64_t q = left; q < c1; ++q) d[(r * bw + q) * ch] = src[q - left];
      }
    }
}

// The input side of a chunk, images [i0, i1): the padded input, channels
// last, into `in` ([image, row, col, cin], zeros outside the image), and its
// transform V[xi] [tiles, cin] = (B^T d B)[xi] of each tile's 4x4 patch d
// into v (planes cols * cin apart, cols = the chunk's tiles); `tr` is the
// workspace's to_channels_last scratch.
template <class T>
void winograd_input(const T* x, const Conv2dGeometry& g, std::int64_t cin, const WinogradPlan& p,
                    std::int64_t i0, std::int64_t i1, T* in, T* v, T* tr) {
  const std::int64_t imgs = i1 - i0, cols = imgs * p.tiles;
  const std::int64_t ph = 2 * p.th + 2, pw = 2 * p.tw + 2;  // the padded plane
  // The padded input, channels last (zeros outside the image).
  to_channels_last(x + i0 * cin * g.h * g.w, imgs, cin, g.h, g.w, in, ph, pw, g.ph, g.pw, tr);
  // Input transform: V[xi][t] = (B^T d B)[xi] of tile t's 4x4 patch d, per channel.
  const std::int64_t vstride = cols * cin;  // between xi planes of V
  for (std::int64_t i = 0; i < imgs; ++i)
    for (std::int64_t ty = 0; ty < p.th; ++ty)
      for (std::int64_t tx = 0; tx < p.tw; ++tx) {
        const std::int64_t t = i * p.tiles + ty * p.tw + tx;
        const T* d = in + ((i * ph + 2 * ty) * pw + 2 * tx) * cin;
        T* vt = v + t * cin;
        const std::int64_t row = pw * cin;
        MS_IVDEP  // V's 16 planes, and the padded input, are disjoint
        for (std::int64_t ci = 0; ci < cin; ++ci) {
          T b[4][4];  // B^T d
          for (int j = 0; j < 4; ++j) {
            const T d0 = d[j * cin + ci], d1 = d[row + j * cin + ci];
            const T d2 = d[2 * row + j * cin + ci], d3 = d[3 * row + j * cin + ci];
            b[0][j] = d0 - d2;
            b[1][j] = d1 + d2;
            b[2][j] = d2 - d1;
            b[3][j] = d1 - d3;
          }
          for (int k = 0; k < 4; ++k) {  // (B^T d) B
            vt[(k * 4 + 0) * vstride + ci] = b[k][0] - b[k][2];
            vt[(k * 4 + 1) * vstride + ci] = b[k][1] + b[k][2];
            vt[(k * 4 + 2) * vstride + ci] = b[k][2] - b[k][1];
            vt[(k * 4 + 3) * vstride + ci] = b[k][1] - b[k][3];
          }
        }
      }
}

// y [n, cout, oh, ow] = the convolution of x [n, cin, h, w] by the kernels
// transformed into u [16, cout, cin] (+ bias, then relu), for images
// [i0, i1). The transforms run channels-last so that they vectorize over the
// channels: the padded input is copied to [image, row, col, cin], V is
// [16, tile, cin], M = V U^T is [16, tile, cout], and the output transform
// writes [image, row, col, cout], copied back to NCHW at the end.
template <class T>
void winograd_chunk(const T* x, const T* u, const T* bias, T* y, const Conv2dGeometry& g,
                    std::int64_t cin, std::int64_t cout, const WinogradPlan& p, std::int64_t i0,
                    std::int64_t i1, bool relu, T* pooled, std::uint8_t* pool_index, T* ws) {
  const WinogradSpace sp = winograd_space(p, cin, cout);
  const std::int64_t imgs = i1 - i0, cols = imgs * p.tiles;
  T* const v = ws;
  T* const m = v + sp.v;
  T* const in = m + sp.m;
  T* const out = in + sp.in;
  T* const tr = out + sp.out;
  winograd_input(x, g, cin, p, i0, i1, in, v, tr);
  const std::int64_t vstride = cols * cin;  // between xi planes of V
  // The 16 products M[xi] [tiles, cout] = V[xi] [tiles, cin] x U[xi]^T, summed over cin.
  for (int xi = 0; xi < 16; ++xi)
    gemm<T>(false, true, cols, cout, cin, T(1), v + xi * vstride, cin, u + xi * cout * cin, cin,
            T(0), m + xi * cols * cout, cout);
  // Output transform: Y = A^T M A per tile (+ bias, relu), channels last.
  const std::int64_t mstride = cols * cout, oh2 = 2 * p.th, ow2 = 2 * p.tw;
  for (std::int64_t i = 0; i < imgs; ++i)
    for (std::int64_t ty = 0; ty < p.th; ++ty)
      for (std::int64_t tx = 0; tx < p.tw; ++tx) {
        const std::int64_t t = i * p.tiles + ty * p.tw + tx;
        const T* e = m + t * cout;
        T* o0 = out + ((i * oh2 + 2 * ty) * ow2 + 2 * tx) * cout;
        T* o1 = o0 + ow2 * cout;
        MS_IVDEP  // M's planes and the output are disjoint
        for (std::int64_t co = 0; co < cout; ++co) {
          T a[2][4];  // A^T M
          for (int j = 0; j < 4; ++j) {
            const T e0 = e[j * mstride + co], e1 = e[(4 + j) * mstride + co];
            const T e2 = e[(8 + j) * mstride + co], e3 = e[(12 + j) * mstride + co];
            a[0][j] = e0 + e1 + e2;
            a[1][j] = e1 - e2 - e3;
          }
          o0[co] = a[0][0] + a[0][1] + a[0][2];
          o0[cout + co] = a[0][1] - a[0][2] - a[0][3];
          o1[co] = a[1][0] + a[1][1] + a[1][2];
          o1[cout + co] = a[1][1] - a[1][2] - a[1][3];
        }
      }
  // Back to NCHW, + bias, relu (the relu op's rule: x < 0 ? 0 : x): [oh ow,
  // cout] transposed into [cout, oh ow] by SIMD packets (floats, an even
  // width: the tiles' rows are the image's), bias and relu then added along
  // each channel's plane; else per output row, [ow, cout] transposed into
  // [cout, ow] (row stride oh * ow), an odd last row or column of tiles
  // writing its valid half only. (The element-wise transpose of every row
  // took a quarter of this function's time in the CNN's training step.)
  const auto finish = [&](std::int64_t co, T val) {
    if (bias != nullptr) val += bias[co];
    return relu && val < T(0) ? T(0) : val;
  };
  const std::int64_t plane = g.oh * g.ow;
  for (std::int64_t i = 0; i < imgs; ++i) {
    T* const yi = y + (i0 + i) * cout * plane;
    const T* const oi = out + i * oh2 * ow2 * cout;
    if constexpr (std::is_same_v<T, float>) {
      if (ow2 == g.ow) {
        detail::transpose32(oi, cout, plane, cout, yi, plane);
        if (bias != nullptr || relu)
          for (std::int64_t co = 0; co < cout; ++co) {
            T* const row = yi + co * plane;
            for (std::int64_t q = 0; q < plane; ++q) row[q] = finish(co, row[q]);
          }
        continue;
      }
    }
    for (std::int64_t r = 0; r < g.oh; ++r)
      transpose_block(oi + r * ow2 * cout, cout, g.ow, cout, yi + r * g.ow, plane, finish);
  }
  if (pooled != nullptr) pool2x2_planes(y, pooled, pool_index, i0 * cout, imgs * cout, g);
}

// The convolution of x [n, cin, ...] into y [n, cout, ...] by Winograd: the
// forward (w [cout, cin, 3, 3]) or, with `adjoint`, the input gradient's
// convolution (w [cin, cout, 3, 3], flipped). Allocates before the region.
template <class T>
void winograd_conv(const T* x, const T* w, const T* bias, T* y, const Conv2dGeometry& g,
                   std::int64_t cin, std::int64_t cout, bool adjoint, bool relu, T* pooled,
                   std::uint8_t* pool_index) {
  const WinogradPlan p = winograd_plan(g);
  const std::int64_t parts =
      detail::in_parallel() ? 1 : std::min<std::int64_t>(get_num_threads(), p.chunks);
  const std::int64_t per_part = winograd_space(p, cin, cout).total();
  Tensor work = empty(Shape{16 * cout * cin + parts * per_part}, dtype_of<T>);
  T* const u = work.data<T>();
  winograd_kernels(w, cout, cin, adjoint, u);
  parallel_for(parts, 1, [&](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t part = q0; part < q1; ++part) {
      const std::int64_t c0 = p.chunks * part / parts, c1 = p.chunks * (part + 1) / parts;
      for (std::int64_t c = c0; c < c1; ++c)
        winograd_chunk(x, u, bias, y, g, cin, cout, p, c * p.per_chunk,
                       std::min(g.n, (c + 1) * p.per_chunk), relu, pooled, pool_index,
                       u + 16 * cout * cin + part * per_part);
    }
  });
}

}  // namespace

template <class T>
void im2col(const T* x, std::int64_t c, const Conv2dGeometry& g, std::int64_t p0, std::int64_t p1,
            T* col) noexcept {
  im2col_cols(x, g, c * g.kh * g.kw, p0, p1, col);
}

template <class T>
void conv2d(const T* x, const T* w, const T* bias, T* y, const Conv2dGeometry& g, bool relu,
            T* pooled, std::uint8_t* pool_index) {
  const ConvPlan pl = conv_plan(g);
  if (pl.items == 0 || pl.og == 0) return;
  const ConvAlgo algo = algorithm_of<T>(g, ConvPass::Forward);
  if constexpr (std::is_same_v<T, float>) {
    if (algo == ConvAlgo::Direct && direct_forward(x, w, bias, y, g, relu, pooled, pool_index))
      return;
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (algo == ConvAlgo::Winograd) {
      winograd_conv(x, w, bias, y, g, g.c, g.o, false, relu, pooled, pool_index);
      return;
    }
  }
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
    const auto [img, grp, p0, width, b, ldb] = im2col_item(x, g, pl, item, col);
    T* out = y + (img * g.o + grp * pl.og) * pl.p + p0;  // [og, width], row stride p
    T beta = T(0);
    if (bias != nullptr) {
      for (std::int64_t r = 0; r < pl.og; ++r)
        std::fill(out + r * pl.p, out + r * pl.p + width, bias[grp * pl.og + r]);
      beta = T(1);
    }
    gemm<T>(false, false, pl.og, width, pl.k, T(1), w + grp * pl.og * pl.k,
            std::max<std::int64_t>(pl.k, 1), b, ldb, beta, out, pl.p);
    if (relu)  // while the tile is in cache; the relu op's rule: x < 0 ? 0 : x (NaN, -0 kept)
      for (std::int64_t r = 0; r < pl.og; ++r) {
        T* row = out + r * pl.p;
        for (std::int64_t q = 0; q < width; ++q) row[q] = row[q] < T(0) ? T(0) : row[q];
      }
    if (pooled != nullptr && pl.tiles == 1)  // the item is whole planes: pool them now
      pool2x2_planes(y, pooled, pool_index, img * g.o + grp * pl.og, pl.og, g);
  };

  // Contiguous runs of items per part; inside the region GEMM runs on one thread.
  parallel_for(parts, 1, [&](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t part = q0; part < q1; ++part) {
      const std::int64_t i0 = pl.items * part / parts, i1 = pl.items * (part + 1) / parts;
      for (std::int64_t item = i0; item < i1; ++item)
        run_item(item, ws != nullptr ? ws + part * col_numel : nullptr);
    }
  });
  if (pooled != nullptr && pl.tiles > 1) pool2x2_planes(y, pooled, pool_index, 0, g.n * g.o, g);
}

namespace {

// Y[xi][t] = (A g A^T)[xi] of tile t's 2x2 block g = [[a, b], [c, d]] of
// the output gradient `gl` (channels last, [image, 2 th, 2 tw, cout]): A g has
// the rows [a, b], [a + c, b + d], [a - c, b - d], [-c, -d], and each row
// [e, f] times A^T is [e, e + f, e - f, -f]. Y has 16 planes of `ystride`.
template <class T>
void winograd_grad_output(const T* gl, const WinogradPlan& p, std::int64_t imgs, std::int64_t cout,
                          T* yt, std::int64_t ystride) {
  const std::int64_t oh2 = 2 * p.th, ow2 = 2 * p.tw;
  for (std::int64_t i = 0; i < imgs; ++i)
    for (std::int64_t ty = 0; ty < p.th; ++ty)
      for (std::int64_t tx = 0; tx < p.tw; ++tx) {
        const std::int64_t t = i * p.tiles + ty * p.tw + tx;
        const T* g0 = gl + ((i * oh2 + 2 * ty) * ow2 + 2 * tx) * cout;
        const T* g1 = g0 + ow2 * cout;
        T* yr = yt + t * cout;
        MS_IVDEP  // Y's 16 planes and gy's buffer are disjoint
        for (std::int64_t co = 0; co < cout; ++co) {
          const T a = g0[co], b = g0[cout + co], cc = g1[co], d = g1[cout + co];
          const T e[4] = {a, a + cc, a - cc, -cc}, f[4] = {b, b + d, b - d, -d};
          for (int k = 0; k < 4; ++k) {
            yr[(k * 4 + 0) * ystride + co] = e[k];
            yr[(k * 4 + 1) * ystride + co] = e[k] + f[k];
            yr[(k * 4 + 2) * ystride + co] = e[k] - f[k];
            yr[(k * 4 + 3) * ystride + co] = -f[k];
          }
        }
      }
}

// The chunks' M (`partial`, 16 planes of `mat` per chunk) summed in chunk
// order into the first chunk's, then dW = G^T M G per (cout, cin) pair: G^T
// has the rows [1, 1/2, 1/2, 0], [0, 1/2, -1/2, 0], [0, 1/2, 1/2, 1].
template <class T>
void winograd_weight_from_m(T* partial, std::int64_t chunks, std::int64_t mat, T* dw) {
  parallel_for(16 * mat, std::int64_t{1} << 14, [&](std::int64_t e0, std::int64_t e1) {
    for (std::int64_t c = 1; c < chunks; ++c) {
      const T* src = partial + c * 16 * mat;
      for (std::int64_t e = e0; e < e1; ++e) partial[e] += src[e];
    }
  });
  parallel_for(mat, 256, [&](std::int64_t e0, std::int64_t e1) {
    for (std::int64_t e = e0; e < e1; ++e) {
      T m[16];
      for (int xi = 0; xi < 16; ++xi) m[xi] = partial[xi * mat + e];
      T r[3][4];  // G^T M
      for (int j = 0; j < 4; ++j) {
        const T h = (m[4 + j] + m[8 + j]) * T(0.5);
        r[0][j] = m[j] + h;
        r[1][j] = (m[4 + j] - m[8 + j]) * T(0.5);
        r[2][j] = h + m[12 + j];
      }
      T* out = dw + e * 9;
      for (int i = 0; i < 3; ++i) {  // (G^T M) G
        const T h = (r[i][1] + r[i][2]) * T(0.5);
        out[i * 3 + 0] = r[i][0] + h;
        out[i * 3 + 1] = (r[i][1] - r[i][2]) * T(0.5);
        out[i * 3 + 2] = h + r[i][3];
      }
    }
  });
}

// The weight gradient by Winograd F(3x3, 2x2) (Lavin and Gray, section 4):
// per tile, dW = G^T [ (B^T d B) .* (A g A^T) ] G with d the tile's 4x4 input
// patch (the forward's V) and g its 2x2 block of output gradient, so the sum
// over tiles is 16 GEMMs M[xi] [cout, cin] = Y[xi]^T [cout, tiles] x V[xi]
// [tiles, cin] (16 multiplications per tile and channel pair instead of 36),
// then dW = G^T M G per (cout, cin) pair. The forward's chunks of images: each
// chunk's M is computed by one thread into its own partial, and the partials
// are added in chunk order, so results do not depend on the thread count.
// The rounding differs from im2col + GEMM's by a few units in the last place.
template <class T>
void winograd_grad_weight(const T* x, const T* gy, T* dw, const Conv2dGeometry& g) {
  const WinogradPlan p = winograd_plan(g);
  const std::int64_t cin = g.c, cout = g.o, mat = cout * cin;
  const std::int64_t parts =
      detail::in_parallel() ? 1 : std::min<std::int64_t>(get_num_threads(), p.chunks);
  // Per part: V [16, cols, cin], Y [16, cols, cout], the padded input, and
  // the chunk's gy channels last [image, 2 th, 2 tw, cout] (the forward's
  // output buffer); then each chunk's M [16, cout, cin].
  const WinogradSpace sp = winograd_space(p, cin, cout);
  const std::int64_t per_part = sp.total();
  Tensor work = empty(Shape{parts * per_part + p.chunks * 16 * mat}, dtype_of<T>);
  T* const partial = work.data<T>() + parts * per_part;
  const std::int64_t oh2 = 2 * p.th, ow2 = 2 * p.tw;
  detail::for_items(p.chunks, parts, [&](std::int64_t c, std::int64_t part) {
    T* const v = work.data<T>() + part * per_part;
    T* const yt = v + sp.v;
    T* const in = yt + sp.m;
    T* const gl = in + sp.in;
    T* const tr = gl + sp.out;
    const std::int64_t i0 = c * p.per_chunk, i1 = std::min(g.n, i0 + p.per_chunk);
    const std::int64_t imgs = i1 - i0, cols = imgs * p.tiles;
    winograd_input(x, g, cin, p, i0, i1, in, v, tr);
    // gy channels last, an odd last row or column of tiles padded with zeros.
    to_channels_last(gy + i0 * cout * g.oh * g.ow, imgs, cout, g.oh, g.ow, gl, oh2, ow2, 0, 0, tr);
    const std::int64_t ystride = cols * cout;
    winograd_grad_output(gl, p, imgs, cout, yt, ystride);
    // M[xi] [cout, cin] = Y[xi]^T x V[xi], summed over the chunk's tiles.
    const std::int64_t vstride = cols * cin;
    for (int xi = 0; xi < 16; ++xi)
      gemm<T>(true, false, cout, cin, cols, T(1), yt + xi * ystride, cout, v + xi * vstride, cin,
              T(0), partial + (c * 16 + xi) * mat, cin);
  });
  winograd_weight_from_m(partial, p.chunks, mat, dw);
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
  const ConvAlgo algo = algorithm_of<T>(g, ConvPass::GradInput);
  if constexpr (std::is_same_v<T, float>)
    if (algo == ConvAlgo::Direct && (detail::conv_narrow_grad_input(gy, w, dx, g) ||
                                     detail::conv_direct_grad_input(gy, w, dx, g)))
      return;
  if (algo == ConvAlgo::Winograd) {
    // dx is the convolution of gy by the flipped kernels with the channels
    // swapped, padded by 2 - p: the forward's Winograd path with those sizes.
    Conv2dGeometry a = g;
    a.c = g.o, a.o = g.c, a.h = g.oh, a.w = g.ow, a.oh = g.h, a.ow = g.w;
    a.ph = 2 - g.ph, a.pw = 2 - g.pw;
    winograd_conv(gy, w, static_cast<const T*>(nullptr), dx, a, g.o, g.c, true, false,
                  static_cast<T*>(nullptr), nullptr);
    return;
  }
  const std::int64_t parts = detail::in_parallel() ? 1 : get_num_threads();
  const std::int64_t col_numel = pl.direct ? 0 : pl.k * pl.tile;
  Tensor work;
  if (col_numel > 0) work = empty(Shape{parts, col_numel}, dtype_of<T>);
  T* const ws = col_numel > 0 ? work.data<T>() : nullptr;
  // One item per (image, group): its tiles all add into the same part of dx,
  // so they stay on one thread, in order.
  detail::for_items(units, parts, [&](std::int64_t u, std::int64_t part) {
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
  const ConvAlgo algo = algorithm_of<T>(g, ConvPass::GradWeight);
  if constexpr (std::is_same_v<T, float>)
    if (algo == ConvAlgo::Direct && (detail::conv_narrow_grad_weight(x, gy, dw, g, kWeightChunks) ||
                                     detail::conv_direct_grad_weight(x, gy, dw, g)))
      return;
  if (algo == ConvAlgo::Winograd) {
    winograd_grad_weight(x, gy, dw, g);
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
  detail::for_items(chunks * g.groups, parts, [&](std::int64_t item, std::int64_t part) {
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

ConvAlgo conv2d_algorithm(const Conv2dGeometry& g, ConvPass pass) noexcept {
  const bool narrow_direct = detail::conv_narrow_fits(g);
  const bool direct = narrow_direct || detail::conv_direct_fits(g, pass);
  const bool wino = winograd_fits(g, pass);
  switch (g.algo) {
    case ConvAlgo::Im2col: return ConvAlgo::Im2col;
    case ConvAlgo::Winograd:
      if (wino) return ConvAlgo::Winograd;
      break;
    case ConvAlgo::Direct:
      if (direct) return ConvAlgo::Direct;
      break;
    case ConvAlgo::Auto: break;
  }
  // By bench/conv_table.sh (bm_conv's BM_Conv<Pass>_<Algo> rows, the CNN's two
  // layers), fractions of the FMA peak, 1 / 2 threads: conv2 (32 input
  // channels) on Winograd against Direct, Intel Xeon VM (model 207, full-width
  // AVX-512) at 5f5bfb7: forward 0.92 / 0.67 against 0.67 / 0.51, input
  // gradient 0.92 / 0.70 against 0.66 / 0.45, weight gradient 0.93 / 0.76
  // against 0.73 / 0.45; Zen 4 VM (AVX-512 on 256-bit units) at e570bf0:
  // 1.33 / 1.25, 1.34 / 1.22, 1.45 / 1.43 against 0.78 / 0.63, 0.78 / 0.68,
  // 0.85 / 0.83. So Winograd for every pass where it applies.
  // Below 16 channels per group (16: the smallest width of a full AVX-512
  // vector; between the measured 1 and 32) libxsmm's kernels are too narrow:
  // every pass takes the narrow kernels where they apply
  // (src/kernels/conv_narrow.cpp; conv1 on the Zen 4 VM, 1 / 2 threads:
  // forward 0.88 / 0.79 of the peak against Im2col's 0.60 / 0.55, input
  // gradient 0.76 / 0.69 against 0.66 / 0.62, weight gradient 0.73 / 0.68
  // against 0.34 / 0.36), everything else Im2col.
  const bool narrow = g.c / std::max<std::int64_t>(g.groups, 1) < 16;
  if (narrow) return narrow_direct ? ConvAlgo::Direct : ConvAlgo::Im2col;
  if (wino) return ConvAlgo::Winograd;
  return direct ? ConvAlgo::Direct : ConvAlgo::Im2col;
}

ConvAlgo conv2d_bf16_algorithm(const Conv2dGeometry& g, ConvPass pass) noexcept {
  if (pass == ConvPass::GradWeight) return ConvAlgo::Im2col;
  const bool forward = pass == ConvPass::Forward;
  const ConvAlgo none = forward ? ConvAlgo::Auto : ConvAlgo::Im2col;  // no bf16 kernel of its own
  // The forward's Direct: the narrow kernels (rounding as they store), else libxsmm's.
  const bool narrow = detail::conv_narrow_fits(g);
  const bool direct = (forward && narrow) || detail::conv_direct_bf16_fits(g, pass);
  switch (g.algo) {
    case ConvAlgo::Direct: return direct ? ConvAlgo::Direct : none;
    case ConvAlgo::Im2col: return ConvAlgo::Im2col;
    case ConvAlgo::Winograd: return none;
    case ConvAlgo::Auto: break;
  }
  const ConvAlgo f32 = conv2d_algorithm(g, pass);
  if (f32 == ConvAlgo::Direct && narrow) return forward ? ConvAlgo::Direct : none;
  if (gemm_bf16_on_amx()) return ConvAlgo::Im2col;
  if (direct && (forward || f32 != ConvAlgo::Im2col)) return ConvAlgo::Direct;
  return none;
}

namespace {

// The bfloat16 forward on gemm_bf16, cut as conv2d's Im2col path: per (image,
// group, tile of output positions), the tile's im2col columns times the
// group's weights in float32 sums, plus the bias, each rounded to
// bfloat16 once as the tile is stored.
void conv2d_bf16_im2col(const bfloat16_t* x, const bfloat16_t* w, const float* bias, bfloat16_t* y,
                        const Conv2dGeometry& g) {
  const ConvPlan pl = conv_plan(g);
  if (pl.items == 0 || pl.og == 0) return;
  const std::int64_t parts = detail::in_parallel() ? 1 : get_num_threads();
  const std::int64_t col_numel = pl.direct ? 0 : pl.k * pl.tile, sum_numel = pl.og * pl.tile;
  Tensor cols_t = empty(Shape{std::max<std::int64_t>(parts * col_numel, 1)}, DType::BFloat16);
  Tensor sums_t = empty(Shape{parts * sum_numel}, DType::Float32);
  bfloat16_t* const cols = cols_t.data<bfloat16_t>();
  float* const sums = sums_t.data<float>();
  detail::for_items(pl.items, parts, [&](std::int64_t item, std::int64_t part) {
    const auto [img, grp, p0, width, b, ldb] = im2col_item(x, g, pl, item, cols + part * col_numel);
    float* sum = sums + part * sum_numel;  // [og, width]
    for (std::int64_t r = 0; r < pl.og; ++r)
      std::fill(sum + r * width, sum + (r + 1) * width,
                bias != nullptr ? bias[grp * pl.og + r] : 0.f);
    gemm_bf16(false, false, pl.og, width, pl.k, 1.f, w + grp * pl.og * pl.k,
              std::max<std::int64_t>(pl.k, 1), b, ldb, 1.f, sum, width);
    bfloat16_t* out = y + (img * g.o + grp * pl.og) * pl.p + p0;  // [og, width], row stride p
    for (std::int64_t r = 0; r < pl.og; ++r)
      detail::float_to_bfloat16_n(sum + r * width, out + r * pl.p, width);
  });
}

// The narrow kernels' bfloat16 forward, on float32 copies of x and w (each
// bfloat16 value exactly; x is small where they apply: at most 4 channels).
bool narrow_forward_bf16(const bfloat16_t* x, const bfloat16_t* w, const float* bias, bfloat16_t* y,
                         const Conv2dGeometry& g) {
  Tensor xf = empty(Shape{g.n * g.c * g.h * g.w}, DType::Float32);
  Tensor wf = empty(Shape{g.o * g.c * g.kh * g.kw}, DType::Float32);
  const auto widen = [](bfloat16_t v) { return static_cast<float>(v); };
  std::transform(x, x + xf.numel(), xf.data<float>(), widen);
  std::transform(w, w + wf.numel(), wf.data<float>(), widen);
  return detail::conv_narrow_forward(xf.data<float>(), wf.data<float>(), bias, y, g);
}

}  // namespace

bool conv2d_bf16(const bfloat16_t* x, const bfloat16_t* w, const float* bias, bfloat16_t* y,
                 const Conv2dGeometry& g) {
  switch (conv2d_bf16_algorithm(g, ConvPass::Forward)) {
    case ConvAlgo::Direct:
      if (detail::conv_narrow_fits(g)) return narrow_forward_bf16(x, w, bias, y, g);
      return detail::conv_direct_forward_bf16(x, w, bias, y, g);
    case ConvAlgo::Im2col: conv2d_bf16_im2col(x, w, bias, y, g); return true;
    default: return false;
  }
}

void conv2d_grad_input_bf16(const bfloat16_t* gy, const bfloat16_t* w, bfloat16_t* dx,
                            const Conv2dGeometry& g) {
  const ConvPlan pl = conv_plan(g);
  const std::int64_t units = g.n * g.groups, image_group = pl.cg * g.h * g.w;
  if (units == 0 || image_group == 0) return;
  if (pl.p == 0 || pl.og == 0 || pl.k == 0) {  // nothing reads the input
    std::fill(dx, dx + g.n * g.c * g.h * g.w, bfloat16_t{});
    return;
  }
  if (conv2d_bf16_algorithm(g, ConvPass::GradInput) == ConvAlgo::Direct &&
      detail::conv_direct_grad_input_bf16(gy, w, dx, g))
    return;
  // Per (image, group): col [k, width] = W_g^T G_g[:, p0:p1] in float32 sums
  // (gemm_bf16), col2im into a float32 image, rounded to bfloat16 once.
  const std::int64_t parts = detail::in_parallel() ? 1 : get_num_threads();
  const std::int64_t col_numel = pl.direct ? 0 : pl.k * pl.tile;
  Tensor work = empty(Shape{parts, col_numel + image_group}, DType::Float32);
  detail::for_items(units, parts, [&](std::int64_t u, std::int64_t part) {
    const std::int64_t img = u / g.groups, grp = u % g.groups;
    float* acc = work.data<float>() + part * (col_numel + image_group);
    float* col = acc + image_group;
    const bfloat16_t* gi = gy + (img * g.o + grp * pl.og) * pl.p;  // [og, p]
    const bfloat16_t* wg = w + grp * pl.og * pl.k;                 // [og, k]
    if (pl.direct) {
      gemm_bf16(true, false, pl.k, pl.p, pl.og, 1.f, wg, pl.k, gi, pl.p, 0.f, acc, pl.p);
    } else {
      std::fill(acc, acc + image_group, 0.f);
      for (std::int64_t p0 = 0; p0 < pl.p; p0 += pl.tile) {
        const std::int64_t p1 = std::min(pl.p, p0 + pl.tile), width = p1 - p0;
        gemm_bf16(true, false, pl.k, width, pl.og, 1.f, wg, pl.k, gi + p0, pl.p, 0.f, col, width);
        col2im_cols(col, g, pl.k, p0, p1, acc);
      }
    }
    bfloat16_t* dxi = dx + (img * g.c + grp * pl.cg) * g.h * g.w;
    detail::float_to_bfloat16_n(acc, dxi, image_group);
  });
}

void conv2d_grad_weight_bf16(const bfloat16_t* x, const bfloat16_t* gy, bfloat16_t* dw,
                             const Conv2dGeometry& g) {
  const ConvPlan pl = conv_plan(g);
  const std::int64_t wnumel = g.o * pl.k;
  if (wnumel == 0) return;
  if (g.n == 0 || pl.p == 0) {
    std::fill(dw, dw + wnumel, bfloat16_t{});
    return;
  }
  // As conv2d_grad_weight's im2col path: a fixed number of chunks of the
  // batch, each summed in float32 (gemm_bf16) into its own partial dW; the
  // partials added in chunk order and rounded to bfloat16 once.
  const std::int64_t chunks = std::min<std::int64_t>(g.n, kWeightChunks);
  const std::int64_t parts = detail::in_parallel() ? 1 : get_num_threads();
  const std::int64_t col_numel = pl.direct ? 0 : pl.k * pl.tile;
  Tensor cols_t = empty(Shape{std::max<std::int64_t>(parts * col_numel, 1)}, DType::BFloat16);
  Tensor partial_t = empty(Shape{chunks, wnumel}, DType::Float32);
  bfloat16_t* const cols = cols_t.data<bfloat16_t>();
  float* const partials = partial_t.data<float>();
  detail::for_items(chunks * g.groups, parts, [&](std::int64_t item, std::int64_t part) {
    const std::int64_t chunk = item / g.groups, grp = item % g.groups;
    float* dwc = partials + chunk * wnumel + grp * pl.og * pl.k;  // [og, k]
    bfloat16_t* col = cols + part * col_numel;
    const std::int64_t i0 = g.n * chunk / chunks, i1 = g.n * (chunk + 1) / chunks;
    float beta = 0.f;
    for (std::int64_t img = i0; img < i1; ++img) {
      const bfloat16_t* xin = x + (img * g.c + grp * pl.cg) * g.h * g.w;
      const bfloat16_t* gi = gy + (img * g.o + grp * pl.og) * pl.p;  // [og, p]
      for (std::int64_t p0 = 0; p0 < pl.p; p0 += pl.tile) {
        const std::int64_t p1 = std::min(pl.p, p0 + pl.tile), width = p1 - p0;
        const bfloat16_t* b = xin + p0;
        std::int64_t ldb = pl.p;
        if (!pl.direct) {
          im2col_cols(xin, g, pl.k, p0, p1, col);
          b = col;
          ldb = width;
        }
        gemm_bf16(false, true, pl.og, pl.k, width, 1.f, gi + p0, pl.p, b, ldb, beta, dwc, pl.k);
        beta = 1.f;
      }
    }
  });
  parallel_for(wnumel, std::int64_t{1} << 14, [&](std::int64_t e0, std::int64_t e1) {
    for (std::int64_t e = e0; e < e1; ++e) {
      float s = partials[e];
      for (std::int64_t c = 1; c < chunks; ++c) s += partials[c * wnumel + e];
      dw[e] = bfloat16_t(s);
    }
  });
}

#define MS_CONV_INSTANTIATE(T)                                                               \
  template void im2col<T>(const T*, std::int64_t, const Conv2dGeometry&, std::int64_t,       \
                          std::int64_t, T*) noexcept;                                        \
  template void conv2d<T>(const T*, const T*, const T*, T*, const Conv2dGeometry&, bool, T*, \
                          std::uint8_t*);
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
