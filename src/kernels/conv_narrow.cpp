// 3x3 convolutions with padding 1 at stride 1 of inputs with few channels
// (the first layer of a network on grayscale or RGB images): there the
// product's inner dimension is 9 per input channel, too shallow for a GEMM
// kernel (libxsmm's direct kernels are as wide as the input's channels, and
// im2col + GEMM spends as much moving the columns as multiplying them).
//
// The output plane is the input plane, so output position p (row-major over
// the plane) reads input p + (i - 1) w + (j - 1) for tap (i, j), where the
// tap's row and column fall inside the plane. Each AVX-512 vector holds 16
// consecutive positions; per vector and tap a 16-bit mask (computed once per
// thread and plane shape) marks the positions whose input lies inside, and
// masked loads read zeros for the others, exactly the zeros im2col would
// have placed there.
//   - forward: per vector (per two vectors with one input channel), the 9
//     shifted input vectors of each channel are multiplied into 8 (6) output
//     channels' accumulators at a time (weights broadcast), each element a
//     chain of multiply-adds from the bias over (channel, tap) in order; relu
//     and the image's pooling follow (or, for the bfloat16 forward, each
//     output is rounded to bfloat16 as it is stored);
//   - input gradient: per image and input channel, each tap's column (the
//     sum over output channels of the tap's weight times gy, 3 position
//     vectors x 9 taps of accumulators at a time), then each vector of dx
//     the sum of the columns' shifted vectors in tap order, through the
//     mirrored taps' masks (col2im without a GEMM);
//   - weight gradient: per image and 3 output channels, 27 vector
//     accumulators (3 channels x 9 taps) sum gy times the shifted input over
//     the plane; each chunk of the batch keeps its own accumulators, reduced
//     across lanes at its end, and the chunks' sums are added in order.
// bench/conv_table.sh compares them with the other algorithms on the CNN's
// first layer.
#include "conv_narrow.hpp"
#include "scratch.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "ms/kernels/parallel.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ms::kernels::detail {

bool conv_narrow_fits(const Conv2dGeometry& g) noexcept {
#if defined(__AVX512F__)
  return g.groups == 1 && g.c >= 1 && g.c <= kNarrowChannels && g.n > 0 && g.o > 0 && g.h > 0 &&
         g.w > 0 && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
         g.ph == 1 && g.pw == 1 && g.oh == g.h && g.ow == g.w;
#else
  (void)g;
  return false;
#endif
}

#if defined(__AVX512F__)
namespace {

constexpr int kTaps = 9;

// Mask m in a mask register, loaded straight from memory (kmovw): g++ 12
// otherwise loads a mask into a general register and moves it over (kmovd),
// which held conv1's weight gradient 10 % below the same loop with masks
// loaded straight (two per vector, 27 multiply-adds; ad-hoc loops on the
// Zen 5 VM).
inline __mmask16 load_mask(const __mmask16& m) {
  __mmask16 k;
  asm("kmovw %1, %0" : "=Yk"(k) : "m"(m));
  return k;
}

// The plane's vectors of 16 positions and, per (vector, tap), the lanes whose
// input lies inside the plane; `last` masks the positions of the last vector.
// The vectors [inner_begin, inner_end) are the plane's inner ones: every tap
// of every lane reads inside the plane's buffer (rows 1 to h - 2), so only the
// row's first and last column leave taps out, the lanes `columns` [vecs, 2]
// marks (the left and right neighbour in the row).
struct Plane {
  std::int64_t size = 0, vecs = 0, height = 0, width = 0, inner_begin = 0, inner_end = 0;
  std::vector<__mmask16> inside;   // [vecs, kTaps]
  std::vector<__mmask16> columns;  // [vecs, 2]
  __mmask16 last = 0;

  explicit Plane(const Conv2dGeometry& g)
      : size(g.h * g.w), vecs((size + 15) / 16), height(g.h), width(g.w) {
    inside.assign(static_cast<std::size_t>(vecs * kTaps), 0);
    columns.assign(static_cast<std::size_t>(vecs * 2), 0);
    std::int64_t p = 0;  // r * w + c (divisions per position were 3 % of conv1's input gradient)
    for (std::int64_t r = 0; r < g.h; ++r)
      for (std::int64_t c = 0; c < g.w; ++c, ++p) {
        const auto lane = static_cast<__mmask16>(1u << (p % 16));
        __mmask16* in = inside.data() + (p / 16) * kTaps;
        for (int t = 0; t < kTaps; ++t) {
          const std::int64_t rr = r + t / 3 - 1, cc = c + t % 3 - 1;
          if (rr >= 0 && rr < g.h && cc >= 0 && cc < g.w) in[t] |= lane;
        }
        if (c > 0) columns[static_cast<std::size_t>((p / 16) * 2)] |= lane;
        if (c + 1 < g.w) columns[static_cast<std::size_t>((p / 16) * 2 + 1)] |= lane;
      }
    const std::int64_t rest = size - (vecs - 1) * 16;
    last = static_cast<__mmask16>((1u << rest) - 1);
    // Vector v reads positions 16 v - width - 1 to 16 v + 15 + width + 1.
    inner_begin = std::min((width + 1 + 15) / 16, vecs);
    const std::int64_t room = size - width - 17;  // the largest 16 v of an inner vector
    inner_end = room < 0 ? inner_begin : std::max(inner_begin, room / 16 + 1);
  }
  __mmask16 lanes(std::int64_t v) const { return v + 1 == vecs ? last : __mmask16(0xffff); }
  // The lanes of inner vector v whose tap in column j (0 to 2) lies in the row.
  __mmask16 in_row(std::int64_t v, int j) const {
    return j == 1 ? __mmask16(0xffff) : load_mask(columns[static_cast<std::size_t>(v * 2 + j / 2)]);
  }
  // From a position to the input tap t = (i, j) reads: (i - 1) rows, j - 1 columns.
  std::int64_t offset(int t) const { return (t / 3 - 1) * width + (t % 3 - 1); }
};

// The plane of g's shape, built on this thread's first call with the shape
// and kept for its next ones (the last kPlanes shapes): building it took
// 10 us for conv1's 28 x 28 (an ad-hoc loop), 6 % of its forward on 1
// thread and 12 % on 2, where it runs before the threads start.
const Plane& plane_of(const Conv2dGeometry& g) {
  constexpr std::size_t kPlanes = 4;
  thread_local std::array<std::unique_ptr<const Plane>, kPlanes> planes;
  thread_local std::size_t next = 0;
  for (const auto& p : planes)
    if (p != nullptr && p->height == g.h && p->width == g.w) return *p;
  auto& slot = planes[next];
  next = (next + 1) % kPlanes;
  slot = std::make_unique<const Plane>(g);
  return *slot;
}

// fn.template operator()<B>(first) over [0, count) in blocks of B, then the
// rest (fewer than B) as one block of its own size.
template <int B, class F>
void in_blocks(std::int64_t first, std::int64_t count, F&& fn) {
  for (; first + B <= count; first += B) fn.template operator()<B>(first);
  if constexpr (B > 1)
    if (first < count) in_blocks<B - 1>(first, count, fn);
}

// Stores the `lanes` of v at dst: as they are, or each rounded to bfloat16
// as ms::bfloat16_t(float) does (to nearest even; a NaN to the quiet NaN of
// its sign), the same bits as detail::float_to_bfloat16_n.
inline void store_lanes(float* dst, __mmask16 lanes, __m512 v) {
  _mm512_mask_storeu_ps(dst, lanes, v);
}
inline void store_lanes(bfloat16_t* dst, __mmask16 lanes, __m512 v) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  // The CPU's conversion rounds alike; a NaN keeps its payload's top bits
  // there, so NaN lanes take the quiet NaN of their sign instead.
  __m256i bits = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  if (is_nan != 0) [[unlikely]] {
    const __m256i qnan = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi16(-0x8000)),
                                         _mm256_set1_epi16(0x7fc0));
    bits = _mm256_mask_blend_epi16(is_nan, bits, qnan);
  }
  _mm256_mask_storeu_epi16(dst, lanes, bits);
#else
  const __m512i f = _mm512_castps_si512(v), high = _mm512_srli_epi32(f, 16);
  const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(f, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i nan =
      _mm512_or_si512(_mm512_and_si512(high, _mm512_set1_epi32(0x8000)), _mm512_set1_epi32(0x7fc0));
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(f, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  _mm512_mask_cvtepi32_storeu_epi16(dst, lanes, _mm512_mask_blend_epi32(is_nan, rounded, nan));
#endif
}

// Output channels [o, o + OB) at NV consecutive vectors of positions from p
// of an image, from their shifted input vectors xs [NV, C, 9]: y is the
// image's output [o, plane]; `store` masks the last vector's lanes. Each
// broadcast weight feeds NV multiply-adds: with one vector, the broadcasts
// held conv1's forward at 0.63 of the peak with y in cache on the Zen 5 VM
// (an ad-hoc loop; two vectors of 6 channels: 0.80).
template <int C, int NV, int OB, class Y>
inline void forward_block(const __m512 (&xs)[NV][C][kTaps], const float* w, const float* bias, Y* y,
                          std::int64_t plane, std::int64_t p, __mmask16 store, std::int64_t o,
                          bool relu) {
  // Unrolled completely (the pragmas), or GCC 12 keeps the sums in memory.
  __m512 acc[NV][OB];
#pragma GCC unroll 16
  for (int b = 0; b < OB; ++b) {
    const __m512 start = bias != nullptr ? _mm512_set1_ps(bias[o + b]) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int n = 0; n < NV; ++n) acc[n][b] = start;
  }
  const float* wo = w + o * C * kTaps;
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 16
    for (int t = 0; t < kTaps; ++t)
#pragma GCC unroll 16
      for (int b = 0; b < OB; ++b) {
        const __m512 wt = _mm512_set1_ps(wo[(b * C + c) * kTaps + t]);
#pragma GCC unroll 16
        for (int n = 0; n < NV; ++n) acc[n][b] = _mm512_fmadd_ps(wt, xs[n][c][t], acc[n][b]);
      }
#pragma GCC unroll 16
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 16
    for (int n = 0; n < NV; ++n) {
      __m512 r = acc[n][b];
      if (relu)  // the relu op's rule, x < 0 ? 0 : x: NaN and -0 kept
        r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(r, _mm512_setzero_ps(), _CMP_LT_OQ), r,
                                 _mm512_setzero_ps());
      store_lanes(y + (o + b) * plane + p + n * 16, n + 1 == NV ? store : __mmask16(0xffff), r);
    }
}

// Position vectors [v, v + NV) of one image: x [C, plane] into y [o, plane];
// their input vectors are loaded once for all output channels.
template <int C, int NV, class Y>
inline void forward_vectors(const float* x, const float* w, const float* bias, Y* y,
                            std::int64_t outs, const Plane& pl, bool relu, std::int64_t v) {
  const std::int64_t p = v * 16;
  __m512 xs[NV][C][kTaps];
#pragma GCC unroll 16
  for (int n = 0; n < NV; ++n) {
    const float* xn = x + p + n * 16;
    if (const std::int64_t vn = v + n; vn >= pl.inner_begin && vn < pl.inner_end) {
      // An inner vector: only the first and last columns' lanes leave taps out.
      const __mmask16 left = pl.in_row(vn, 0), right = pl.in_row(vn, 2);
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c)
#pragma GCC unroll 16
        for (int t = 0; t < kTaps; ++t) {
          const float* at = xn + c * pl.size + pl.offset(t);
          xs[n][c][t] = t % 3 == 1 ? _mm512_loadu_ps(at)
                                   : _mm512_maskz_loadu_ps(t % 3 == 0 ? left : right, at);
        }
    } else {
      const __mmask16* inside = pl.inside.data() + vn * kTaps;
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c)
#pragma GCC unroll 16
        for (int t = 0; t < kTaps; ++t)
          xs[n][c][t] = _mm512_maskz_loadu_ps(inside[t], xn + c * pl.size + pl.offset(t));
    }
  }
  const __mmask16 store = pl.lanes(v + NV - 1);
  // Two vectors of 6 channels take 30 of the 32 registers.
  in_blocks<NV == 1 ? 8 : 6>(0, outs, [&]<int OB>(std::int64_t o) {
    forward_block<C, NV, OB, Y>(xs, w, bias, y, pl.size, p, store, o, relu);
  });
}

// One image: x [C, plane] into y [o, plane]; with one input channel, two
// position vectors at a time.
template <int C, class Y>
void forward_image(const float* x, const float* w, const float* bias, Y* y, std::int64_t outs,
                   const Plane& pl, bool relu) {
  constexpr int kPair = C == 1 ? 2 : 1;
  std::int64_t v = 0;
  for (; v + kPair <= pl.vecs; v += kPair)
    forward_vectors<C, kPair, Y>(x, w, bias, y, outs, pl, relu, v);
  for (; v < pl.vecs; ++v) forward_vectors<C, 1, Y>(x, w, bias, y, outs, pl, relu, v);
}

// One position vector v of grad_weight_block (INNER: an inner vector).
template <int OB, bool INNER>
inline void grad_weight_vector(const float* xc, const float* const (&g)[OB], __m512 (&a)[OB][kTaps],
                               const Plane& pl, std::int64_t v) {
  const std::int64_t size = pl.size, width = pl.width, p = v * 16;
  __mmask16 keep[kTaps];  // per tap, the lanes whose product counts
  __m512 gv[OB];
  if constexpr (INNER) {
#pragma GCC unroll 16
    for (int t = 0; t < kTaps; ++t) keep[t] = pl.in_row(v, t % 3);
#pragma GCC unroll 16
    for (int b = 0; b < OB; ++b) gv[b] = _mm512_loadu_ps(g[b] + p);
#pragma GCC unroll 16
    // The next block's planes (gy is [image, o, plane], so past the last
    // block the next image's first): an ad-hoc loop of conv1's weight
    // gradient with gy out of cache, 150-171 -> 159-194 GFLOP/s.
    for (int b = 0; b < OB; ++b)
      _mm_prefetch(reinterpret_cast<const char*>(g[b] + p + OB * size), _MM_HINT_T0);
  } else {
    const __mmask16 lanes = pl.lanes(v);
#pragma GCC unroll 16
    for (int t = 0; t < kTaps; ++t) keep[t] = pl.inside[static_cast<std::size_t>(v * kTaps + t)];
#pragma GCC unroll 16
    for (int b = 0; b < OB; ++b) gv[b] = _mm512_maskz_loadu_ps(lanes, g[b] + p);
  }
  // Tap (i, j) reads row i's base at column offset j - 1: three base
  // pointers and constant displacements (9 offsets held apart spilled
  // to the stack here: 0.72 of the peak against 0.73).
  const float* rows[3] = {xc + p - width, xc + p, xc + p + width};
#pragma GCC unroll 16
  for (int t = 0; t < kTaps; ++t) {
    __m512 xv;
    if constexpr (INNER) {
      xv = _mm512_loadu_ps(rows[t / 3] + (t % 3 - 1));
      // One load for the OB multiply-adds: g++ would fold it into each.
      asm("" : "+v"(xv));
    } else {
      xv = _mm512_maskz_loadu_ps(keep[t], rows[t / 3] + (t % 3 - 1));
    }
#pragma GCC unroll 16
    for (int b = 0; b < OB; ++b) a[b][t] = _mm512_mask3_fmadd_ps(gv[b], xv, a[b][t], keep[t]);
  }
}

// acc [OB, C, 9] (vectors) += the image's gy channels [o, o + OB) times its
// shifted input x [C, plane]. A lane whose tap lies outside the plane adds
// nothing (the masked multiply-add keeps the sum): the bits of adding gy
// times im2col's zero, as the sums start from +0, unless gy is inf or NaN
// there (then im2col's product is NaN). The inner vectors (rows 1 to h - 2,
// Plane::inner_begin to inner_end) read x unmasked and leave out only the
// first and last columns' lanes: the nine mask loads per vector of the
// others held conv1's weight gradient at 0.48 of the peak on the Zen 5 VM
// (bm_conv's BM_ConvGradW_Direct). The accumulators stay in registers over
// all of a channel's vectors: loaded and stored around each of the three
// ranges (edge, inner, edge) instead, the edge ranges (4 of conv1's 49
// vectors) took 18 % of the pass.
template <int C, int OB>
inline void grad_weight_block(const float* x, const float* gy, __m512* acc, const Plane& pl,
                              std::int64_t o) {
  // gy's rows in locals; the loops over registers are unrolled completely
  // (the pragmas): otherwise GCC 12 keeps the accumulators in memory.
  const float* g[OB];
#pragma GCC unroll 16
  for (int b = 0; b < OB; ++b) g[b] = gy + (o + b) * pl.size;
  for (int c = 0; c < C; ++c) {
    __m512 a[OB][kTaps];
#pragma GCC unroll 16
    for (int b = 0; b < OB; ++b)
#pragma GCC unroll 16
      for (int t = 0; t < kTaps; ++t) a[b][t] = acc[(b * C + c) * kTaps + t];
    const float* xc = x + c * pl.size;
    for (std::int64_t v = 0; v < pl.inner_begin; ++v)
      grad_weight_vector<OB, false>(xc, g, a, pl, v);
    for (std::int64_t v = pl.inner_begin; v < pl.inner_end; ++v)
      grad_weight_vector<OB, true>(xc, g, a, pl, v);
    for (std::int64_t v = pl.inner_end; v < pl.vecs; ++v)
      grad_weight_vector<OB, false>(xc, g, a, pl, v);
#pragma GCC unroll 16
    for (int b = 0; b < OB; ++b)
#pragma GCC unroll 16
      for (int t = 0; t < kTaps; ++t) acc[(b * C + c) * kTaps + t] = a[b][t];
  }
}

// acc [o, C, 9] += one image's share: x [C, plane], gy [o, plane].
template <int C>
void grad_weight_image(const float* x, const float* gy, __m512* acc, std::int64_t outs,
                       const Plane& pl) {
  in_blocks<3>(0, outs, [&]<int OB>(std::int64_t o) {
    grad_weight_block<C, OB>(x, gy, acc + o * C * kTaps, pl, o);
  });
}

// cols [9, vecs * 16] (vector aligned) for position vectors [v, v + VB):
// cols_t = sum over output channels o of w[o, c, t] gy_o, in order of o.
// WHOLE: none of them is the plane's partial last vector, so gy is loaded
// without masks (2-3 % of conv1's input gradient on 1 thread, Zen 5 VM).
template <int C, int VB, bool WHOLE>
inline void grad_input_cols(const float* gy, const float* w, float* cols, std::int64_t outs,
                            const Plane& pl, int c, std::int64_t v) {
  // The loops over the block's registers are unrolled completely (the
  // pragmas): at -O3 GCC 12 otherwise vectorizes some of them over the
  // __m512 values and keeps the accumulators in memory, storing them on
  // every iteration (0.34 of the peak instead of 0.78 on conv1).
  const std::int64_t size = pl.size, stride = pl.vecs * 16;
  __mmask16 lanes[VB];
  for (int b = 0; b < VB; ++b) lanes[b] = pl.lanes(v + b);
  const float* g = gy + v * 16;
  const float* wc = w + c * kTaps;
  // The first output channel's products start the sums (outs >= 1).
  __m512 acc[VB][kTaps];
  __m512 gv[VB];
#pragma GCC unroll 16
  for (int b = 0; b < VB; ++b)
    gv[b] = WHOLE ? _mm512_loadu_ps(g + b * 16) : _mm512_maskz_loadu_ps(lanes[b], g + b * 16);
#pragma GCC unroll 16
  for (int t = 0; t < kTaps; ++t)
#pragma GCC unroll 16
    for (int b = 0; b < VB; ++b) acc[b][t] = _mm512_mul_ps(_mm512_set1_ps(wc[t]), gv[b]);
  for (std::int64_t o = 1; o < outs; ++o) {
    g += size, wc += C * kTaps;
#pragma GCC unroll 16
    for (int b = 0; b < VB; ++b)
      gv[b] = WHOLE ? _mm512_loadu_ps(g + b * 16) : _mm512_maskz_loadu_ps(lanes[b], g + b * 16);
      // The next block's vectors of this plane: the loop reads 32-odd planes a
      // few lines at a time, a pattern the hardware prefetcher does not follow
      // (conv1's input gradient, 64 images, gy not in cache: 38 -> 82 GFLOP/s).
#pragma GCC unroll 16
    for (int b = 0; b < VB; ++b)
      _mm_prefetch(reinterpret_cast<const char*>(g + (VB + b) * 16), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int t = 0; t < kTaps; ++t) {
      const __m512 wt = _mm512_set1_ps(wc[t]);
#pragma GCC unroll 16
      for (int b = 0; b < VB; ++b) acc[b][t] = _mm512_fmadd_ps(wt, gv[b], acc[b][t]);
    }
  }
  float* out = cols + v * 16;
#pragma GCC unroll 16
  for (int b = 0; b < VB; ++b)
#pragma GCC unroll 16
    for (int t = 0; t < kTaps; ++t) _mm512_store_ps(out + t * stride + b * 16, acc[b][t]);
}

// Vectors [v0, v1) of one channel of dx, d, from its columns (see
// grad_input_image). The inner vectors (INNER) read the columns unmasked and
// leave out only the first and last columns' lanes, whose mirrored tap lies
// outside the row: a masked add keeps the sum, the bits of adding the zero a
// masked load reads (the sums start from +0), with 3 mask loads instead of 9.
template <bool INNER>
inline void grad_input_gather(const float* cols, float* d, const Plane& pl, std::int64_t v0,
                              std::int64_t v1) {
  const std::int64_t stride = pl.vecs * 16;
  for (std::int64_t v = v0; v < v1; ++v) {
    __m512 sum = _mm512_setzero_ps();
    if constexpr (INNER) {
#pragma GCC unroll 16
      for (int t = 0; t < kTaps; ++t)  // tap t's mirror 8 - t is in column 2 - t % 3
        sum = _mm512_mask_add_ps(sum, pl.in_row(v, 2 - t % 3), sum,
                                 _mm512_loadu_ps(cols + t * stride + v * 16 - pl.offset(t)));
    } else {
      const __mmask16* inside = pl.inside.data() + v * kTaps;
#pragma GCC unroll 16
      for (int t = 0; t < kTaps; ++t)
        sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(inside[kTaps - 1 - t],
                                                       cols + t * stride + v * 16 - pl.offset(t)));
    }
    _mm512_mask_storeu_ps(d + v * 16, pl.lanes(v), sum);
  }
}

// One image: dx [C, plane] from gy [outs, plane]; per input channel, the
// columns of all positions (cols, 9 x vecs vectors), then each vector of dx
// gathered from them: tap t's column at the positions whose tap t input it
// is (position q - offset(t), kept where the mirrored tap 8 - t of q lies
// inside the plane), added in tap order from zero. That is the sum of adding
// each tap's column into a zeroed dx tap after tap (a lane a tap leaves out
// adds +0, which changes no sum that started from +0), without storing dx
// and loading it back at another offset nine times (a store forwarding
// stall each: 18 % of conv1's input gradient, an ad-hoc loop).
template <int C>
void grad_input_image(const float* gy, const float* w, float* dx, float* cols, std::int64_t outs,
                      const Plane& pl) {
  for (int c = 0; c < C; ++c) {
    in_blocks<3>(0, pl.vecs, [&]<int VB>(std::int64_t v) {
      if (v + VB < pl.vecs || pl.last == 0xffff)
        grad_input_cols<C, VB, true>(gy, w, cols, outs, pl, c, v);
      else
        grad_input_cols<C, VB, false>(gy, w, cols, outs, pl, c, v);
    });
    float* d = dx + c * pl.size;
    grad_input_gather<false>(cols, d, pl, 0, pl.inner_begin);
    grad_input_gather<true>(cols, d, pl, pl.inner_begin, pl.inner_end);
    grad_input_gather<false>(cols, d, pl, pl.inner_end, pl.vecs);
  }
}

// fn.template operator()<C>() for the input channel count c (1 to
// kNarrowChannels), a constant in the kernels.
template <class F>
void with_channels(std::int64_t c, F&& fn) {
  static_assert(kNarrowChannels == 4);
  switch (c) {
    case 1: fn.template operator()<1>(); break;
    case 2: fn.template operator()<2>(); break;
    case 3: fn.template operator()<3>(); break;
    default: fn.template operator()<4>(); break;
  }
}

}  // namespace
#endif

#if defined(__AVX512F__)
namespace {
template <class Y>
void forward_all(const float* x, const float* w, const float* bias, Y* y, const Conv2dGeometry& g,
                 bool relu, const PlanesDone* done) {
  const Plane& pl = plane_of(g);
  const std::int64_t parts = in_parallel() ? 1 : get_num_threads();
  for_items(g.n, parts, [&](std::int64_t img, std::int64_t) {
    const float* xi = x + img * g.c * pl.size;
    Y* yi = y + img * g.o * pl.size;
    with_channels(g.c, [&]<int C>() { forward_image<C>(xi, w, bias, yi, g.o, pl, relu); });
    if (done != nullptr) done->fn(done->ctx, img * g.o, g.o);
  });
}
}  // namespace
#endif

bool conv_narrow_forward(const float* x, const float* w, const float* bias, float* y,
                         const Conv2dGeometry& g, bool relu, const PlanesDone* done) {
  if (!conv_narrow_fits(g)) return false;
#if defined(__AVX512F__)
  forward_all(x, w, bias, y, g, relu, done);
  return true;
#else
  (void)x, (void)w, (void)bias, (void)y, (void)relu, (void)done;
  return false;
#endif
}

bool conv_narrow_forward(const float* x, const float* w, const float* bias, bfloat16_t* y,
                         const Conv2dGeometry& g) {
  if (!conv_narrow_fits(g)) return false;
#if defined(__AVX512F__)
  forward_all(x, w, bias, y, g, false, nullptr);
  return true;
#else
  (void)x, (void)w, (void)bias, (void)y;
  return false;
#endif
}

bool conv_narrow_grad_input(const float* gy, const float* w, float* dx, const Conv2dGeometry& g) {
  if (!conv_narrow_fits(g)) return false;
#if defined(__AVX512F__)
  const Plane& pl = plane_of(g);
  const std::int64_t parts = in_parallel() ? 1 : get_num_threads();
  const std::int64_t per_part = kTaps * pl.vecs * 16;  // a multiple of 16 floats
  // Each part's columns, kept by the calling thread for its next calls.
  thread_local Scratch work;
  auto* const all_cols = static_cast<float*>(
      work.need(static_cast<std::size_t>(parts * per_part) * sizeof(float), "conv2d_grad_input"));
  for_items(g.n, parts, [&](std::int64_t img, std::int64_t part) {
    const float* gi = gy + img * g.o * pl.size;
    float* di = dx + img * g.c * pl.size;
    float* cols = all_cols + part * per_part;
    with_channels(g.c, [&]<int C>() { grad_input_image<C>(gi, w, di, cols, g.o, pl); });
  });
  return true;
#else
  (void)gy, (void)w, (void)dx;
  return false;
#endif
}

bool conv_narrow_grad_weight(const float* x, const float* gy, float* dw, const Conv2dGeometry& g,
                             std::int64_t chunks) {
  if (!conv_narrow_fits(g)) return false;
#if defined(__AVX512F__)
  const Plane& pl = plane_of(g);
  const std::int64_t wnumel = g.o * g.c * kTaps;
  chunks = std::clamp<std::int64_t>(chunks, 1, g.n);
  // The chunks' vector accumulators [chunks, o, c, 9] of 16 lanes, then their
  // sums [chunks, o, c, 9], kept by the calling thread for its next calls.
  thread_local Scratch work;
  auto* const vectors = static_cast<__m512*>(work.need(
      static_cast<std::size_t>(chunks * wnumel * 17) * sizeof(float), "conv2d_grad_weight"));
  float* const sums = reinterpret_cast<float*>(vectors + chunks * wnumel);
  const std::int64_t parts = in_parallel() ? 1 : get_num_threads();
  for_items(chunks, parts, [&](std::int64_t chunk, std::int64_t) {
    __m512* const acc = vectors + chunk * wnumel;
    for (std::int64_t e = 0; e < wnumel; ++e) acc[e] = _mm512_setzero_ps();
    const std::int64_t i0 = g.n * chunk / chunks, i1 = g.n * (chunk + 1) / chunks;
    for (std::int64_t img = i0; img < i1; ++img) {
      const float* xi = x + img * g.c * pl.size;
      const float* gi = gy + img * g.o * pl.size;
      with_channels(g.c, [&]<int C>() { grad_weight_image<C>(xi, gi, acc, g.o, pl); });
    }
    for (std::int64_t e = 0; e < wnumel; ++e)
      sums[chunk * wnumel + e] = _mm512_reduce_add_ps(acc[e]);
  });
  for (std::int64_t e = 0; e < wnumel; ++e) {
    float s = sums[e];
    for (std::int64_t c = 1; c < chunks; ++c) s += sums[c * wnumel + e];
    dw[e] = s;
  }
  return true;
#else
  (void)x, (void)gy, (void)dw, (void)chunks;
  return false;
#endif
}

}  // namespace ms::kernels::detail
