// 2-D max and average pooling and their gradients, parallel over planes
// (image x channel): overlapping windows add into one plane on one thread.
#include "ms/kernels/pool.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "ceil_div.hpp"
#include "ms/kernels/parallel.hpp"
#include "prefetch.hpp"

namespace ms::kernels {
namespace {

// First tap index t >= 0 with start + t * step >= 0, and one past the last with
// start + t * step < size (clamped to [0, taps]).
struct TapRange {
  std::int64_t lo, hi;
};
using detail::ceil_div;
using detail::prefetch_bytes;

TapRange tap_range(std::int64_t start, std::int64_t step, std::int64_t taps, std::int64_t size) {
  std::int64_t lo = start >= 0 ? 0 : ceil_div(-start, step);
  std::int64_t hi = size - start <= 0 ? 0 : ceil_div(size - start, step);
  hi = std::min(hi, taps);
  return {std::min(lo, hi), hi};
}

// Output columns [lo, hi) whose whole window lies inside [0, w): for them
// tap_range is the full [0, kw) and need not be computed (it divides).
TapRange interior_cols(const Pool2dGeometry& g) {
  std::int64_t span = 0;  // (kw - 1) * dw, the window's width less one
  if (g.kw < 1 || __builtin_mul_overflow(g.kw - 1, g.dw, &span)) return {0, 0};
  // ow * sw - pw >= 0 and ow * sw - pw + span <= w - 1
  const std::int64_t lo = ceil_div(g.pw, g.sw);
  std::int64_t last = 0;  // w - 1 + pw - span
  if (__builtin_sub_overflow(g.w - 1 + g.pw, span, &last) || last < 0) return {0, 0};
  const std::int64_t hi = std::min(g.ow, last / g.sw + 1);
  return {std::min(lo, hi), hi};
}

// One tap of a max that a NaN wins, without a branch (random data would
// mispredict every other one): `v > best ? v : best` is one maxss; a NaN is
// recorded in `nan` (bitwise or, no branch) and the caller takes the window's
// last NaN then (a rare second pass).
template <class T>
T max_step(T best, T v, bool& nan) {
  if constexpr (std::is_floating_point_v<T>) {
    nan |= v != v;
    return v > best ? v : best;
  } else {
    return std::max(best, v);
  }
}

// The last NaN of a window (row-major over its taps), for max_step's caller.
template <class T>
T last_nan(const T* x0, std::int64_t rows, std::int64_t row_step, std::int64_t w0, TapRange rw,
           std::int64_t dw) {
  T out = T(0);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = rw.lo; j < rw.hi; ++j) {
      const T v = x0[i * row_step + w0 + j * dw];
      if (v != v) out = v;
    }
  return out;
}

// The input index the forward max chose in a window (taps [rw.lo, rw.hi) of
// `rows` rows from index `first`): the first maximum, or the last NaN; a window
// of -inf gives its first tap (as PyTorch). The maximum comes from max_step
// (no branch), then one reverse pass keeps the first tap equal to it with
// integer masks: random data would mispredict compare-and-branch code.
template <class T>
std::int64_t window_arg(const T* xp, std::int64_t first, std::int64_t rows, std::int64_t row_step,
                        TapRange rw, std::int64_t dw) {
  T m = -std::numeric_limits<T>::infinity();
  bool nan = false;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = rw.lo; j < rw.hi; ++j)
      m = max_step(m, xp[first + i * row_step + j * dw], nan);
  std::int64_t at = first + rw.lo * dw;
  if (nan) {  // rare: the last NaN, plainly
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = rw.lo; j < rw.hi; ++j) {
        const std::int64_t k = first + i * row_step + j * dw;
        if (xp[k] != xp[k]) at = k;
      }
    return at;
  }
  for (std::int64_t i = rows; i-- > 0;)
    for (std::int64_t j = rw.hi; j-- > rw.lo;) {
      const std::int64_t k = first + i * row_step + j * dw;
      at += (k - at) & -static_cast<std::int64_t>(xp[k] == m);
    }
  return at;
}

// The common 2x2 window with stride 2, no padding or dilation, every window
// inside the input: windows do not overlap, so each output row reads two input
// rows and the gradient writes every input element once (no zero fill, no
// scatter). Plain selects only, which g++ vectorizes; the results are those of
// the general code (first maximum, last NaN).
bool is_pool2x2(const Pool2dGeometry& g) {
  return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.dh == 1 &&
         g.dw == 1 && 2 * g.oh <= g.h && 2 * g.ow <= g.w;
}

// Which of a window's taps (a b / c d) max pooling picks: the last NaN if there
// is one, else the first maximum. Returns 0..3.
template <class T>
int pick2x2(T a, T b, T c, T d) {
  const T v[4] = {a, b, c, d};
  int k = 0;
  for (int i = 1; i < 4; ++i)
    if (v[i] > v[k] || v[i] != v[i]) k = i;
  return k;
}

// v, or +0 when `keep` is 0: a bit mask, so no branch and no -0 or NaN from v * 0.
template <class T>
T keep_if(T v, bool keep) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  U u;
  std::memcpy(&u, &v, sizeof u);
  u &= U(0) - U(keep);
  std::memcpy(&v, &u, sizeof u);
  return v;
}

#if defined(__AVX512F__)
// 16 windows of two input rows at once (float, AVX-512): a b / c d of window
// j in lane j, loaded with masks for a partial last group (masked-off lanes
// are never read). The lanes compute exactly what the scalar loops compute.
struct Windows16 {
  __m512 a, b, c, d;
  __mmask16 valid, lo, hi;  // windows; the two 16-float halves of a row pair
};

// The masks of n (>= 1) windows: a Windows16 whose values are unset.
inline Windows16 window_masks(std::int64_t n) {
  Windows16 w;
  w.valid = static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1);
  w.lo = static_cast<__mmask16>(n >= 8 ? 0xFFFFu : (1u << (2 * n)) - 1);
  w.hi = static_cast<__mmask16>(n <= 8 ? 0u : n >= 16 ? 0xFFFFu : (1u << (2 * n - 16)) - 1);
  return w;
}

inline Windows16 load_windows(const float* r0, const float* r1, std::int64_t n) {
  Windows16 w = window_masks(n);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 x0 = _mm512_maskz_loadu_ps(w.lo, r0), x1 = _mm512_maskz_loadu_ps(w.hi, r0 + 16);
  const __m512 y0 = _mm512_maskz_loadu_ps(w.lo, r1), y1 = _mm512_maskz_loadu_ps(w.hi, r1 + 16);
  w.a = _mm512_permutex2var_ps(x0, even, x1);
  w.b = _mm512_permutex2var_ps(x0, odd, x1);
  w.c = _mm512_permutex2var_ps(y0, even, y1);
  w.d = _mm512_permutex2var_ps(y0, odd, y1);
  return w;
}

// The maximum of each window (_mm512_max_ps(x, y) is x > y ? x : y, as the
// scalar loops), and whether a valid window's sum is NaN.
inline __m512 windows_max(const Windows16& w, bool& nan) {
  const __m512 m = _mm512_max_ps(_mm512_max_ps(w.d, w.c), _mm512_max_ps(w.b, w.a));
  const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(w.a, w.b), w.c), w.d);
  nan |= _mm512_mask_cmp_ps_mask(w.valid, s, s, _CMP_UNORD_Q) != 0;
  return m;
}

// The n (>= 1) bytes at p (16 at most; the others 0) without reading past them.
inline __m128i load_bytes16(const std::uint8_t* p, __mmask16 valid, std::int64_t n) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  (void)n;
  return _mm_maskz_loadu_epi8(valid, p);
#else
  (void)valid;
  if (n >= 16) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  alignas(16) std::uint8_t bytes[16] = {};
  std::memcpy(bytes, p, static_cast<std::size_t>(n));
  return _mm_load_si128(reinterpret_cast<const __m128i*>(bytes));
#endif
}

// The lanes whose window's maximum m is at tap a, b, c or d: the first tap
// equal to m, else d (a NaN window, which the caller redoes).
struct Taps16 {
  __mmask16 a, b, c, d;
};
inline Taps16 first_max_taps(const Windows16& w, __m512 m) {
  const __mmask16 ka = _mm512_mask_cmp_ps_mask(w.valid, w.a, m, _CMP_EQ_OQ);
  const __mmask16 kb = _mm512_mask_cmp_ps_mask(w.valid & ~ka, w.b, m, _CMP_EQ_OQ);
  const __mmask16 kc = _mm512_mask_cmp_ps_mask(w.valid & ~ka & ~kb, w.c, m, _CMP_EQ_OQ);
  return {ka, kb, kc, static_cast<__mmask16>(w.valid & ~(ka | kb | kc))};
}

// Stores the lanes of e (even positions) and o (odd positions) interleaved
// into the row pair's 2n floats at r.
inline void store_interleaved(float* r, __m512 e, __m512 o, const Windows16& w) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  _mm512_mask_storeu_ps(r, w.lo, _mm512_permutex2var_ps(e, lo, o));
  _mm512_mask_storeu_ps(r + 16, w.hi, _mm512_permutex2var_ps(e, hi, o));
}
#endif

// The maximum of a window a b / c d by plain selects (one maxss each, as the
// AVX-512 lanes), noting in `nan` (bitwise or, no branch) a window whose sum
// is NaN: the caller redoes such a row with pick2x2's exact rule.
template <class T>
[[gnu::always_inline]] inline T plain_window_max(T a, T b, T c, T d, bool& nan) {
  const T m1 = b > a ? b : a, m2 = d > c ? d : c, s = a + b + c + d;
  nan |= s != s;
  return m2 > m1 ? m2 : m1;
}

// One output row of 2x2 max pooling. The loop takes plain maxima (one maxss
// each, vectorizable) and notes whether any window may hold a NaN (its sum is
// NaN); such a rare row is redone with pick2x2's exact rule (the last NaN).
// noinline and __restrict: inlined into the plane loop, or with possible
// aliasing, g++ 12 does not vectorize these loops.
template <class T>
[[gnu::noinline]] void max_pool2x2_row(const T* __restrict r0, const T* __restrict r1,
                                       T* __restrict y, std::int64_t ow) {
  if constexpr (std::is_floating_point_v<T>) {
    bool nan = false;
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>) {
      for (std::int64_t j = 0; j < ow; j += 16) {
        const Windows16 w = load_windows(r0 + 2 * j, r1 + 2 * j, ow - j);
        _mm512_mask_storeu_ps(y + j, w.valid, windows_max(w, nan));
      }
    } else  // NOLINT(readability/braces): the scalar loop below
#endif
      for (std::int64_t j = 0; j < ow; ++j) {
        y[j] = plain_window_max(r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1], nan);
      }
    if (!nan) return;
    for (std::int64_t j = 0; j < ow; ++j) {
      const T v[4] = {r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]};
      y[j] = v[pick2x2(v[0], v[1], v[2], v[3])];
    }
  } else {
    for (std::int64_t j = 0; j < ow; ++j)
      y[j] = std::max(std::max(r0[2 * j], r0[2 * j + 1]), std::max(r1[2 * j], r1[2 * j + 1]));
  }
}

// The gradient of one output row: each window's gradient goes to the tap the
// forward picked (the first maximum; the row is redone exactly when a window
// may hold a NaN), the three others get 0.
template <class T>
[[gnu::noinline]] void max_pool2x2_grad_row(const T* __restrict r0, const T* __restrict r1,
                                            const T* __restrict gy, T* __restrict d0,
                                            T* __restrict d1, std::int64_t ow, bool positive_only) {
  bool nan = false;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    for (std::int64_t j = 0; j < ow; j += 16) {
      const Windows16 w = load_windows(r0 + 2 * j, r1 + 2 * j, ow - j);
      const __m512 m = windows_max(w, nan);
      const auto [ka, kb, kc, kd] = first_max_taps(w, m);
      // positive_only: a window whose maximum is not > 0 (0, negative or NaN) passes nothing.
      const __mmask16 pass =
          positive_only ? _mm512_mask_cmp_ps_mask(w.valid, m, _mm512_setzero_ps(), _CMP_GT_OQ)
                        : w.valid;
      const __m512 v = _mm512_maskz_loadu_ps(pass, gy + j);
      store_interleaved(d0 + 2 * j, _mm512_maskz_mov_ps(ka, v), _mm512_maskz_mov_ps(kb, v), w);
      store_interleaved(d1 + 2 * j, _mm512_maskz_mov_ps(kc, v), _mm512_maskz_mov_ps(kd, v), w);
    }
  } else  // NOLINT(readability/braces): the scalar loop below
#endif
    for (std::int64_t j = 0; j < ow; ++j) {
      const T a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
      const T m = plain_window_max(a, b, c, d, nan);
      const bool ka = a == m, kb = !ka & (b == m), kc = !ka & !kb & (c == m);
      const T v = positive_only ? keep_if(gy[j], m > T(0)) : gy[j];
      d0[2 * j] = keep_if(v, ka);
      d0[2 * j + 1] = keep_if(v, kb);
      d1[2 * j] = keep_if(v, kc);
      d1[2 * j + 1] = keep_if(v, !ka & !kb & !kc);
    }
  if (!nan) return;
  for (std::int64_t j = 0; j < ow; ++j) {
    const T v[4] = {r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]};
    const int k = pick2x2(v[0], v[1], v[2], v[3]);
    const T gv = !positive_only || v[k] > T(0) ? gy[j] : T(0);
    d0[2 * j] = k == 0 ? gv : T(0);
    d0[2 * j + 1] = k == 1 ? gv : T(0);
    d1[2 * j] = k == 2 ? gv : T(0);
    d1[2 * j + 1] = k == 3 ? gv : T(0);
  }
}

// One output row of 2x2 max pooling that also notes each window's tap (see
// max_pool2x2_index): the values of max_pool2x2_row, the taps of
// max_pool2x2_grad_row (the first maximum; a row that may hold a NaN is redone
// with pick2x2's exact rule).
template <class T>
[[gnu::noinline]] void max_pool2x2_index_row(const T* __restrict r0, const T* __restrict r1,
                                             T* __restrict y, std::uint8_t* __restrict idx,
                                             std::int64_t ow) {
  bool nan = false;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512i one = _mm512_set1_epi32(1), two = _mm512_set1_epi32(2);
    const __m512i three = _mm512_set1_epi32(3), not_positive = _mm512_set1_epi32(4);
    for (std::int64_t j = 0; j < ow; j += 16) {
      const Windows16 w = load_windows(r0 + 2 * j, r1 + 2 * j, ow - j);
      const __m512 m = windows_max(w, nan);
      const auto [ka, kb, kc, kd] = first_max_taps(w, m);
      const __mmask16 positive = _mm512_cmp_ps_mask(m, _mm512_setzero_ps(), _CMP_GT_OQ);
      __m512i k = _mm512_maskz_mov_epi32(kb, one);
      k = _mm512_mask_mov_epi32(k, kc, two);
      k = _mm512_mask_mov_epi32(k, kd, three);
      k = _mm512_mask_or_epi32(k, static_cast<__mmask16>(~positive), k, not_positive);
      _mm512_mask_storeu_ps(y + j, w.valid, m);
      _mm512_mask_cvtepi32_storeu_epi8(idx + j, w.valid, k);
    }
  } else  // NOLINT(readability/braces): the scalar loop below
#endif
    for (std::int64_t j = 0; j < ow; ++j) {
      const T a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
      const T m = plain_window_max(a, b, c, d, nan);
      const int k = a == m ? 0 : b == m ? 1 : c == m ? 2 : 3;
      y[j] = m;
      idx[j] = static_cast<std::uint8_t>(k | (m > T(0) ? 0 : kPoolIndexNotPositive));
    }
  if (!nan) return;
  for (std::int64_t j = 0; j < ow; ++j) {
    const T v[4] = {r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]};
    const int k = pick2x2(v[0], v[1], v[2], v[3]);
    y[j] = v[k];
    idx[j] = static_cast<std::uint8_t>(k | (v[k] > T(0) ? 0 : kPoolIndexNotPositive));
  }
}

// The gradient of one output row from its taps (max_pool2x2_index_row's):
// what max_pool2x2_grad_row writes, without reading the pooled input.
template <class T>
[[gnu::noinline]] void max_pool2x2_grad_index_row(const std::uint8_t* __restrict idx,
                                                  const T* __restrict gy, T* __restrict d0,
                                                  T* __restrict d1, std::int64_t ow,
                                                  bool positive_only) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512i tap = _mm512_set1_epi32(kPoolIndexTap);
    const __m512i not_positive = _mm512_set1_epi32(kPoolIndexNotPositive);
    for (std::int64_t j = 0; j < ow; j += 16) {
      const Windows16 w = window_masks(ow - j);
      const __m512i k = _mm512_cvtepu8_epi32(load_bytes16(idx + j, w.valid, ow - j));
      const __mmask16 pass =
          positive_only ? _mm512_mask_testn_epi32_mask(w.valid, k, not_positive) : w.valid;
      const __m512 v = _mm512_maskz_loadu_ps(pass, gy + j);
      const __m512i t = _mm512_and_si512(k, tap);
      const __mmask16 ka = _mm512_cmpeq_epi32_mask(t, _mm512_setzero_si512());
      const __mmask16 kb = _mm512_cmpeq_epi32_mask(t, _mm512_set1_epi32(1));
      const __mmask16 kc = _mm512_cmpeq_epi32_mask(t, _mm512_set1_epi32(2));
      const __mmask16 kd = _mm512_cmpeq_epi32_mask(t, tap);
      store_interleaved(d0 + 2 * j, _mm512_maskz_mov_ps(ka, v), _mm512_maskz_mov_ps(kb, v), w);
      store_interleaved(d1 + 2 * j, _mm512_maskz_mov_ps(kc, v), _mm512_maskz_mov_ps(kd, v), w);
    }
    return;
  }
#endif
  for (std::int64_t j = 0; j < ow; ++j) {
    const int k = idx[j];
    const T v = positive_only ? keep_if(gy[j], (k & kPoolIndexNotPositive) == 0) : gy[j];
    const int t = k & kPoolIndexTap;
    d0[2 * j] = keep_if(v, t == 0);
    d0[2 * j + 1] = keep_if(v, t == 1);
    d1[2 * j] = keep_if(v, t == 2);
    d1[2 * j + 1] = keep_if(v, t == 3);
  }
}

// The lines of plane p + kPrefetchPlanes of `base` (planes of `size`
// elements; for writing when WRITE), asked for as plane p starts: each thread
// runs its planes in order. In the CNN's training step on 2 threads the
// pooling gradient's first pass over its planes ran 3-4x slower than a second
// pass right after it (its lines elsewhere: in memory or the other core's
// cache); with the planes two ahead prefetched, the step ran 7-8 % faster,
// and 3.5 % more with the forward's planes prefetched too (an ad-hoc program
// alternating both libraries in one process, Zen 5 VM).
constexpr std::int64_t kPrefetchPlanes = 2;
template <bool WRITE, class T>
void prefetch_plane(const T* base, std::int64_t size, std::int64_t p, std::int64_t planes) {
  if (p + kPrefetchPlanes < planes)
    prefetch_bytes<WRITE, 3>(base + (p + kPrefetchPlanes) * size,
                             static_cast<std::size_t>(size) * sizeof(T));
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
  if (is_pool2x2(g)) {
    for_planes(g, [&](std::int64_t p) {
      const T* xp = x + p * g.h * g.w;
      for (std::int64_t oh = 0; oh < g.oh; ++oh)
        max_pool2x2_row(xp + 2 * oh * g.w, xp + (2 * oh + 1) * g.w, y + (p * g.oh + oh) * g.ow,
                        g.ow);
    });
    return;
  }
  const TapRange inner = interior_cols(g);
  for_planes(g, [&](std::int64_t p) {
    const T* xp = x + p * g.h * g.w;
    T* yp = y + p * g.oh * g.ow;
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      const std::int64_t h0 = oh * g.sh - g.ph;
      const TapRange rh = tap_range(h0, g.dh, g.kh, g.h);
      T* yr = yp + oh * g.ow;
      if (rh.lo >= rh.hi) {  // the window's rows are all padding
        std::fill(yr, yr + g.ow, lowest);
        continue;
      }
      // Rows of the window inside the input, from its first one on.
      const T* x0 = xp + (h0 + rh.lo * g.dh) * g.w;
      // dh * w fits when a window has two rows inside the input (dh < h then);
      // with one row it is never used and may overflow (huge dilations).
      const std::int64_t rows = rh.hi - rh.lo, row_step = rows > 1 ? g.dh * g.w : 0;
      const auto one = [&](std::int64_t ow, TapRange rw) {
        const std::int64_t w0 = ow * g.sw - g.pw;
        T best = lowest;
        bool nan = false;
        for (std::int64_t i = 0; i < rows; ++i) {
          const T* r = x0 + i * row_step;  // r[w0 + j * dw] is tap j (w0 may be < 0)
          for (std::int64_t j = rw.lo; j < rw.hi; ++j) best = max_step(best, r[w0 + j * g.dw], nan);
        }
        if (nan) best = last_nan(x0, rows, row_step, w0, rw, g.dw);
        yr[ow] = best;
      };
      for (std::int64_t ow = 0; ow < inner.lo; ++ow)
        one(ow, tap_range(ow * g.sw - g.pw, g.dw, g.kw, g.w));
      if (g.kw == 2 && g.dw == 1) {  // the common 2-wide window, unrolled
        for (std::int64_t ow = inner.lo; ow < inner.hi; ++ow) {
          const T* r = x0 + ow * g.sw - g.pw;
          T best = lowest;
          bool nan = false;
          for (std::int64_t i = 0; i < rows; ++i, r += row_step)
            best = max_step(max_step(best, r[0], nan), r[1], nan);
          if (nan) best = last_nan(x0, rows, row_step, ow * g.sw - g.pw, TapRange{0, 2}, 1);
          yr[ow] = best;
        }
      } else {
        for (std::int64_t ow = inner.lo; ow < inner.hi; ++ow) one(ow, TapRange{0, g.kw});
      }
      for (std::int64_t ow = inner.hi; ow < g.ow; ++ow)
        one(ow, tap_range(ow * g.sw - g.pw, g.dw, g.kw, g.w));
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
void max_pool2d_grad(const T* x, const T* gy, T* dx, const Pool2dGeometry& g,
                     bool positive_only) noexcept {
  if (is_pool2x2(g)) {
    for_planes(g, [&](std::int64_t p) {
      const T* xp = x + p * g.h * g.w;
      T* dp = dx + p * g.h * g.w;
      for (std::int64_t oh = 0; oh < g.oh; ++oh) {
        const std::int64_t r = 2 * oh * g.w;
        max_pool2x2_grad_row(xp + r, xp + r + g.w, gy + (p * g.oh + oh) * g.ow, dp + r,
                             dp + r + g.w, g.ow, positive_only);
        // an odd last column is in no window
        for (std::int64_t c = 2 * g.ow; c < g.w; ++c) dp[r + c] = dp[r + g.w + c] = T(0);
      }
      std::fill(dp + 2 * g.oh * g.w, dp + g.h * g.w, T(0));  // an odd last row likewise
    });
    return;
  }
  const TapRange inner = interior_cols(g);
  for_planes(g, [&](std::int64_t p) {
    const T* xp = x + p * g.h * g.w;
    const T* gp = gy + p * g.oh * g.ow;
    T* dp = dx + p * g.h * g.w;
    std::fill(dp, dp + g.h * g.w, T(0));
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      const std::int64_t h0 = oh * g.sh - g.ph;
      const TapRange rh = tap_range(h0, g.dh, g.kh, g.h);
      if (rh.lo >= rh.hi) continue;
      const std::int64_t first = (h0 + rh.lo * g.dh) * g.w;  // the window's first input row
      // dh * w fits when a window has two rows inside the input (dh < h then);
      // with one row it is never used and may overflow (huge dilations).
      const std::int64_t rows = rh.hi - rh.lo, row_step = rows > 1 ? g.dh * g.w : 0;
      const T* gr = gp + oh * g.ow;
      const auto one = [&](std::int64_t ow, TapRange rw) {
        if (rw.lo >= rw.hi) return;
        const std::int64_t at = window_arg(xp, first + ow * g.sw - g.pw, rows, row_step, rw, g.dw);
        if (!positive_only || xp[at] > T(0)) dp[at] += gr[ow];
      };
      for (std::int64_t ow = 0; ow < inner.lo; ++ow)
        one(ow, tap_range(ow * g.sw - g.pw, g.dw, g.kw, g.w));
      for (std::int64_t ow = inner.lo; ow < inner.hi; ++ow) one(ow, TapRange{0, g.kw});
      for (std::int64_t ow = inner.hi; ow < g.ow; ++ow)
        one(ow, tap_range(ow * g.sw - g.pw, g.dw, g.kw, g.w));
    }
  });
}

template <class T>
void max_pool2x2_index(const T* x, T* y, std::uint8_t* index, const Pool2dGeometry& g) noexcept {
  for_planes(g, [&](std::int64_t p) {
    const T* xp = x + p * g.h * g.w;
    prefetch_plane<false>(x, g.h * g.w, p, g.planes);
    prefetch_plane<true>(y, g.oh * g.ow, p, g.planes);
    prefetch_plane<true>(index, g.oh * g.ow, p, g.planes);
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      const std::int64_t o = (p * g.oh + oh) * g.ow;
      max_pool2x2_index_row(xp + 2 * oh * g.w, xp + (2 * oh + 1) * g.w, y + o, index + o, g.ow);
    }
  });
}

template <class T>
void max_pool2x2_grad_index(const std::uint8_t* index, const T* gy, T* dx, const Pool2dGeometry& g,
                            bool positive_only) noexcept {
  for_planes(g, [&](std::int64_t p) {
    T* dp = dx + p * g.h * g.w;
    prefetch_plane<false>(index, g.oh * g.ow, p, g.planes);
    prefetch_plane<false>(gy, g.oh * g.ow, p, g.planes);
    prefetch_plane<true>(dx, g.h * g.w, p, g.planes);
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      const std::int64_t r = 2 * oh * g.w, o = (p * g.oh + oh) * g.ow;
      max_pool2x2_grad_index_row(index + o, gy + o, dp + r, dp + r + g.w, g.ow, positive_only);
      // an odd last column is in no window
      for (std::int64_t c = 2 * g.ow; c < g.w; ++c) dp[r + c] = dp[r + g.w + c] = T(0);
    }
    std::fill(dp + 2 * g.oh * g.w, dp + g.h * g.w, T(0));  // an odd last row likewise
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
template void max_pool2d_grad<float>(const float*, const float*, float*, const Pool2dGeometry&,
                                     bool) noexcept;
template void max_pool2d_grad<double>(const double*, const double*, double*, const Pool2dGeometry&,
                                      bool) noexcept;
template void avg_pool2d_grad<float>(const float*, float*, const Pool2dGeometry&, bool) noexcept;
template void avg_pool2d_grad<double>(const double*, double*, const Pool2dGeometry&, bool) noexcept;
template void max_pool2x2_index<float>(const float*, float*, std::uint8_t*,
                                       const Pool2dGeometry&) noexcept;
template void max_pool2x2_index<double>(const double*, double*, std::uint8_t*,
                                        const Pool2dGeometry&) noexcept;
template void max_pool2x2_grad_index<float>(const std::uint8_t*, const float*, float*,
                                            const Pool2dGeometry&, bool) noexcept;
template void max_pool2x2_grad_index<double>(const std::uint8_t*, const double*, double*,
                                             const Pool2dGeometry&, bool) noexcept;

}  // namespace ms::kernels
