// Direct 2-D convolution on libxsmm's JIT'ed batch-reduce GEMM kernels.
//
// Forward, per image: the input is copied once into a zero-padded buffer
// [c, hp, wp] (a thread's image stays in L1/L2; a row's right padding is the
// next row's left padding), then each call of a
// batch-reduce kernel computes a block of output positions (`rows` output
// rows, vectorized along the positions) for a block of up to kBlock output
// channels, summed over the batch of (input-channel block, kernel tap) pairs:
//   C [positions, outputs] += A_i [positions, channels] B_i [channels, outputs]
// with A_i the padded input shifted by the tap (column-major, ld = hp * wp: the
// padded planes are its columns) and B_i the tap's weights laid out as
// [group, tap, output, channel]. At stride 1 along the height the `rows` output
// rows of a call are one run of rows * wp padded positions, the wp - ow
// positions between two rows being computed and dropped; the block is then
// copied into the NCHW output with the bias and the relu. No im2col matrix.
//
// Input gradient (stride 1): the forward above on gy, padded by (k - 1) * d - p,
// with the kernel rotated by 180 degrees and the channels swapped (bfloat16
// too, on the bf16 kernels).
//
// Weight gradient, per (tap, output block, channel block): dW [outputs,
// channels] += sum over the output rows of gy_row [outputs, ow] x_row [ow,
// channels], with gy channels last (ld = o) and x the padded input (ld =
// hp * wp), a batch-reduce over the rows of one image. The batch is cut into
// at most kWeightChunks chunks of images (by the shape only), each summed by
// one thread into its own partial dW; the partials are added in chunk order.
//
// Every output element is computed by one kernel call (or one fixed sequence
// of them) whatever the thread count: results are bitwise the same for any
// number of threads. libxsmm starts no threads: the items run on ms's pool.
#include "conv_libxsmm.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/kernels/parallel.hpp"
#include "ms_libxsmm_config.h"  // MS_HAVE_LIBXSMM, from meson.build

#if MS_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

namespace ms::kernels::detail {

#if MS_HAVE_LIBXSMM
namespace {

// Channels per batch entry (the kernels' K) and output channels per call (N).
constexpr std::int64_t kBlock = 64;
// Output positions per forward call (M), at least one output row.
constexpr std::int64_t kPositions = 128;
// The weight gradient sums the batch in at most this many partials.
constexpr std::int64_t kWeightChunks = 8;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

// libxsmm's sizes and leading dimensions are ints; offsets stay far below.
bool fits_int(std::int64_t v) { return v >= 0 && v < (std::int64_t{1} << 30); }

using BatchSKernel = libxsmm_smmfunction_reducebatch_addr;
using BatchBKernel = libxsmm_bsmmfunction_reducebatch_addr;

// The few kernels one convolution needs (full and edge sizes), generated
// before any parallel region and looked up by size inside it.
template <class Fn>
struct KernelSet {
  struct Entry {
    std::int64_t m, n, k;
    bool beta1;
    Fn fn;
  };
  std::array<Entry, 8> e{};
  int count = 0;
  Fn find(std::int64_t m, std::int64_t n, std::int64_t k, bool beta1) const {
    for (int i = 0; i < count; ++i)
      if (e[i].m == m && e[i].n == n && e[i].k == k && e[i].beta1 == beta1) return e[i].fn;
    return nullptr;
  }
  // Adds C [m, n] (+)= sum_i A_i [m, k] B_i [k, n] (column-major); false when
  // libxsmm cannot generate it. Zero sizes need no kernel.
  bool add(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda, std::int64_t ldb,
           std::int64_t ldc, bool beta1, int flags) {
    if (m == 0 || n == 0 || k == 0 || find(m, n, k, beta1) != nullptr) return true;
    if (count == static_cast<int>(e.size())) return false;
    const auto ia = static_cast<libxsmm_blasint>(lda), ib = static_cast<libxsmm_blasint>(ldb),
               ic = static_cast<libxsmm_blasint>(ldc);
    const float alpha = 1.f, beta = beta1 ? 1.f : 0.f;
    const int fl = flags | (beta1 ? 0 : LIBXSMM_GEMM_FLAG_BETA_0);
    const int prefetch = LIBXSMM_PREFETCH_NONE;
    Fn fn = nullptr;
    if constexpr (std::is_same_v<Fn, BatchSKernel>)
      fn = libxsmm_smmdispatch_reducebatch_addr(
          static_cast<libxsmm_blasint>(m), static_cast<libxsmm_blasint>(n),
          static_cast<libxsmm_blasint>(k), &ia, &ib, &ic, &alpha, &beta, &fl, &prefetch);
    else
      fn = libxsmm_bsmmdispatch_reducebatch_addr(
          static_cast<libxsmm_blasint>(m), static_cast<libxsmm_blasint>(n),
          static_cast<libxsmm_blasint>(k), &ia, &ib, &ic, &alpha, &beta, &fl, &prefetch);
    if (fn == nullptr) return false;
    e[count++] = {m, n, k, beta1, fn};
    return true;
  }
};

// Calls a batch-reduce kernel on `count` pairs (A_i, B_i) into c.
template <class Fn, class T>
void run_kernel(Fn fn, const T** a, const T** b, float* c, std::int64_t count) {
  const auto cnt = static_cast<unsigned long long>(count);
  if constexpr (std::is_same_v<T, float>)
    fn(a, b, c, &cnt);
  else  // ms's bfloat16_t is libxsmm's libxsmm_bfloat16: the same 16 bits
    fn(reinterpret_cast<const libxsmm_bfloat16**>(a), reinterpret_cast<const libxsmm_bfloat16**>(b),
       c, &cnt);
}

std::int64_t parts_for(std::int64_t items) {
  return in_parallel()
             ? 1
             : std::max<std::int64_t>(1, std::min<std::int64_t>(get_num_threads(), items));
}

// How the forward of one geometry (stride 1 along the width) is cut. `pair`
// is 2 for bfloat16 (its kernels take channels in pairs: K is rounded up to
// even, a zero plane padding an odd count).
struct FwdPlan {
  std::int64_t cg, og, taps;
  std::int64_t cgp;                 // channels per group, padded to `pair`
  std::int64_t hp, wp, plane;       // the padded input
  std::int64_t rows, chunks;        // output rows per call; calls per output plane
  std::int64_t m_full, m_last;      // positions of a full and of the last call
  std::int64_t bc, kblocks, ktail;  // channels per batch entry; full blocks; the rest
  std::int64_t bn, nblocks;         // outputs per call; blocks per group
  std::int64_t batch;               // batch entries of one call (at most)
};

FwdPlan fwd_plan(const Conv2dGeometry& g, std::int64_t pair) {
  FwdPlan p{};
  p.cg = g.c / g.groups;
  p.og = g.o / g.groups;
  p.taps = g.kh * g.kw;
  p.cgp = ceil_div(p.cg, pair) * pair;
  // Rows of the padded input share their zero columns: the right padding of
  // a row is the left padding of the next one (at stride 1 the rightmost tap
  // reads up to column ow - 1 + (kw - 1) dw - pw = w + pw - 1), so a row is
  // w + pw wide and a run of rows computes pw dropped positions per row
  // instead of 2 pw. The plane ends with the last row's right padding.
  p.hp = g.h + 2 * g.ph;
  p.wp = g.w + g.pw;
  p.plane = p.hp * p.wp + g.pw;
  // Several output rows per call only at stride 1 along the height (then the
  // rows' padded positions are one run); the count is fixed by the shape.
  p.rows =
      g.sh == 1 ? std::max<std::int64_t>(1, std::min(g.oh, (kPositions - g.ow) / p.wp + 1)) : 1;
  p.chunks = ceil_div(g.oh, p.rows);
  p.m_full = (p.rows - 1) * p.wp + g.ow;
  p.m_last = (g.oh - (p.chunks - 1) * p.rows - 1) * p.wp + g.ow;
  p.bc = std::min(p.cgp, kBlock);
  p.kblocks = p.cgp / p.bc;
  p.ktail = p.cgp % p.bc;
  p.bn = std::min(p.og, kBlock);
  p.nblocks = ceil_div(p.og, p.bn);
  p.batch = (p.kblocks + 1) * p.taps;
  return p;
}

bool fwd_fits(const Conv2dGeometry& g) {
  if (g.sw != 1 || g.groups <= 0 || g.c % g.groups != 0 || g.o % g.groups != 0) return false;
  const std::int64_t hp = g.h + 2 * g.ph, wp = g.w + 2 * g.pw;
  return fits_int(hp * wp) && fits_int(g.c * hp * wp) && fits_int(g.oh * g.ow) && fits_int(g.o) &&
         fits_int(g.c * g.kh * g.kw) && g.ow <= wp;
}

// The forward's kernels: full and last position blocks x full and edge output
// blocks x (full channel blocks from zero | the channel rest added).
template <class Fn>
bool fwd_kernels(const FwdPlan& p, KernelSet<Fn>& ks, int flags) {
  const std::int64_t ms[2] = {p.m_full, p.m_last}, ns[2] = {p.bn, p.og - (p.nblocks - 1) * p.bn};
  const std::int64_t lda = p.plane, ldb = p.cgp, ldc = p.m_full;
  for (std::int64_t m : ms)
    for (std::int64_t n : ns) {
      if (p.kblocks > 0 && !ks.add(m, n, p.bc, lda, ldb, ldc, false, flags)) return false;
      if (p.ktail > 0 && !ks.add(m, n, p.ktail, lda, ldb, ldc, p.kblocks > 0, flags)) return false;
    }
  return true;
}

// Copies channels [c0, c0 + cg) of one NCHW image into pad [cgp, hp, wp] with
// zero borders (and zero planes for the channels past cg). T is float, or
// bfloat16 interleaved in channel pairs ([cgp / 2, hp * wp, 2]: libxsmm's VNNI
// layout of its bf16 kernels' A operand) when `pair` is 2.
template <class T>
void pad_image(const T* x, const Conv2dGeometry& g, const FwdPlan& p, std::int64_t pair, T* pad) {
  std::fill(pad, pad + p.cgp * p.plane, T{});
  for (std::int64_t ci = 0; ci < p.cg; ++ci) {
    const T* src = x + ci * g.h * g.w;
    T* dst = pad + (ci / pair) * p.plane * pair + ci % pair;
    for (std::int64_t r = 0; r < g.h; ++r) {
      T* d = dst + ((r + g.ph) * p.wp + g.pw) * pair;
      const T* s = src + r * g.w;
      if (pair == 1)
        std::memcpy(d, s, static_cast<std::size_t>(g.w) * sizeof(T));
      else
        for (std::int64_t q = 0; q < g.w; ++q) d[q * pair] = s[q];
    }
  }
}

// The weights for the forward's B operands: wt [groups, taps, og, cgp] from w
// [o, cg, kh, kw], or, with `adjoint` (the input gradient's convolution:
// geometry g is the adjoint one, w is [g.c, g.o / groups, kh, kw] of the
// forward), w[(grp * cg + ci) * og + co] rotated by 180 degrees.
template <class T>
void weights_for_forward(const T* w, const Conv2dGeometry& g, const FwdPlan& p, bool adjoint,
                         T* wt) {
  std::fill(wt, wt + g.groups * p.taps * p.og * p.cgp, T{});
  for (std::int64_t grp = 0; grp < g.groups; ++grp)
    for (std::int64_t co = 0; co < p.og; ++co)
      for (std::int64_t ci = 0; ci < p.cg; ++ci)
        for (std::int64_t t = 0; t < p.taps; ++t) {
          const T v = adjoint ? w[((grp * p.cg + ci) * p.og + co) * p.taps + (p.taps - 1 - t)]
                              : w[((grp * p.og + co) * p.cg + ci) * p.taps + t];
          wt[((grp * p.taps + t) * p.og + co) * p.cgp + ci] = v;
        }
}

// What one thread holds: the padded image it last copied, the pointer arrays
// of a call and the block a call writes.
template <class T>
struct FwdPart {
  T* pad;
  float* out;
  const T** a;
  const T** b;
  std::int64_t img = -1, grp = -1;
};

// Output channels [o0, o0 + n) of (image, group), rows [oh0, oh0 + rows): the
// block out [n, m] (ld m_full) copied into y with bias and relu.
template <class T>
void fwd_store(const float* out, const Conv2dGeometry& g, const FwdPlan& p, std::int64_t first,
               std::int64_t n, std::int64_t oh0, std::int64_t rows, const float* bias, bool relu,
               T* y) {
  for (std::int64_t k = 0; k < n; ++k) {
    const float bk = bias != nullptr ? bias[(first + k) % g.o] : 0.f;
    T* dst = y + ((first + k) * g.oh + oh0) * g.ow;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* s = out + k * p.m_full + r * p.wp;
      T* d = dst + r * g.ow;
      for (std::int64_t q = 0; q < g.ow; ++q) {
        float v = s[q] + bk;
        if (relu) v = v < 0.f ? 0.f : v;  // the relu op's rule (NaN kept)
        d[q] = T(v);
      }
    }
  }
}

// One (image, group, output block) item of the forward.
template <class T, class Fn>
void fwd_item(const T* x, const T* wt, const float* bias, T* y, const Conv2dGeometry& g,
              const FwdPlan& p, std::int64_t pair, const KernelSet<Fn>& ks, bool relu,
              const PlanesDone* done, std::int64_t item, FwdPart<T>& pt) {
  const std::int64_t nb = item % p.nblocks, u = item / p.nblocks;
  const std::int64_t img = u / g.groups, grp = u % g.groups;
  if (pt.img != img || pt.grp != grp) {
    pad_image(x + (img * g.c + grp * p.cg) * g.h * g.w, g, p, pair, pt.pad);
    pt.img = img, pt.grp = grp;
  }
  const std::int64_t o0 = nb * p.bn, n = std::min(p.bn, p.og - o0);
  const T* wg = wt + (grp * p.taps * p.og + o0) * p.cgp;
  for (std::int64_t ch = 0; ch < p.chunks; ++ch) {
    const std::int64_t oh0 = ch * p.rows, rows = std::min(p.rows, g.oh - oh0);
    const std::int64_t m = ch + 1 < p.chunks ? p.m_full : p.m_last;
    std::int64_t cnt = 0;
    const auto add = [&](std::int64_t c0) {
      for (std::int64_t t = 0; t < p.taps; ++t) {
        const std::int64_t i = t / g.kw, j = t % g.kw;
        const std::int64_t at = (oh0 * g.sh + i * g.dh) * p.wp + j * g.dw;
        pt.a[cnt] = pt.pad + (c0 / pair * p.plane + at) * pair;
        pt.b[cnt++] = wg + t * p.og * p.cgp + c0;
      }
    };
    for (std::int64_t kb = 0; kb < p.kblocks; ++kb) add(kb * p.bc);
    if (cnt > 0) run_kernel(ks.find(m, n, p.bc, false), pt.a, pt.b, pt.out, cnt);
    if (p.ktail > 0) {
      cnt = 0;
      add(p.kblocks * p.bc);
      run_kernel(ks.find(m, n, p.ktail, p.kblocks > 0), pt.a, pt.b, pt.out, cnt);
    }
    fwd_store(pt.out, g, p, (img * g.groups + grp) * p.og + o0, n, oh0, rows, bias, relu, y);
  }
  if (done != nullptr) done->fn(done->ctx, (img * g.groups + grp) * p.og + o0, n);
}

// The forward on prepared weights wt (weights_for_forward); T float or
// bfloat16 (then Fn is the bf16 kernel and `pair` 2).
template <class T, class Fn>
bool fwd_run(const T* x, const T* wt, const float* bias, T* y, const Conv2dGeometry& g,
             const FwdPlan& p, std::int64_t pair, int flags, bool relu, const PlanesDone* done) {
  KernelSet<Fn> ks;
  if (!fwd_kernels(p, ks, flags)) return false;
  const std::int64_t items = g.n * g.groups * p.nblocks;
  const std::int64_t parts = parts_for(items);
  // One buffer of bytes for every part's padded image (T) and output block (float).
  const std::int64_t pad_bytes = ceil_div(p.cgp * p.plane * std::int64_t(sizeof(T)), 64) * 64;
  const std::int64_t per_part =
      pad_bytes + ceil_div(p.m_full * p.bn * std::int64_t(sizeof(float)), 64) * 64;
  Tensor work = empty(Shape{parts * per_part}, DType::UInt8);
  std::vector<const T*> ptrs(static_cast<std::size_t>(2 * parts * p.batch));
  std::vector<FwdPart<T>> pts(static_cast<std::size_t>(parts));
  for (std::int64_t q = 0; q < parts; ++q) {
    std::uint8_t* base = work.data<std::uint8_t>() + q * per_part;
    pts[q].pad = reinterpret_cast<T*>(base);
    pts[q].out = reinterpret_cast<float*>(base + pad_bytes);
    pts[q].a = ptrs.data() + 2 * q * p.batch;
    pts[q].b = pts[q].a + p.batch;
  }
  for_items(items, parts, [&](std::int64_t item, std::int64_t part) {
    fwd_item(x, wt, bias, y, g, p, pair, ks, relu, done, item, pts[part]);
  });
  return true;
}

// ---------------------------------------------------------------- weight gradient

struct WgtPlan {
  FwdPlan f;                 // the padded input (pair 1)
  std::int64_t bo, oblocks;  // outputs per call (M)
  std::int64_t bc, cblocks;  // channels per call (N)
  std::int64_t chunks;       // partial sums of the batch
};

WgtPlan wgt_plan(const Conv2dGeometry& g) {
  WgtPlan p{};
  p.f = fwd_plan(g, 1);
  p.bo = std::min(p.f.og, kBlock);
  p.oblocks = ceil_div(p.f.og, p.bo);
  p.bc = std::min(p.f.cg, kBlock);
  p.cblocks = ceil_div(p.f.cg, p.bc);
  p.chunks = std::min(g.n, kWeightChunks);
  return p;
}

// The partial dW of one chunk of images: dwt [groups, taps, cg, og] (ld og).
void wgt_chunk(const float* x, const float* gy, const Conv2dGeometry& g, const WgtPlan& p,
               const KernelSet<BatchSKernel>& ks, std::int64_t chunk, float* pad, float* gcl,
               const float** a, const float** b, float* dwt) {
  const FwdPlan& f = p.f;
  const std::int64_t pos = g.oh * g.ow;
  std::fill(dwt, dwt + g.groups * f.taps * f.cg * f.og, 0.f);
  const std::int64_t i0 = g.n * chunk / p.chunks, i1 = g.n * (chunk + 1) / p.chunks;
  for (std::int64_t img = i0; img < i1; ++img) {
    // gy channels last: [oh * ow, o].
    libxsmm_otrans(gcl, gy + img * g.o * pos, sizeof(float), static_cast<libxsmm_blasint>(pos),
                   static_cast<libxsmm_blasint>(g.o), static_cast<libxsmm_blasint>(pos),
                   static_cast<libxsmm_blasint>(g.o));
    for (std::int64_t grp = 0; grp < g.groups; ++grp) {
      pad_image(x + (img * g.c + grp * f.cg) * g.h * g.w, g, f, 1, pad);
      for (std::int64_t t = 0; t < f.taps; ++t) {
        const std::int64_t i = t / g.kw, j = t % g.kw;
        for (std::int64_t ob = 0; ob < p.oblocks; ++ob)
          for (std::int64_t cb = 0; cb < p.cblocks; ++cb) {
            const std::int64_t o0 = ob * p.bo, c0 = cb * p.bc;
            const std::int64_t m = std::min(p.bo, f.og - o0), n = std::min(p.bc, f.cg - c0);
            for (std::int64_t r = 0; r < g.oh; ++r) {
              a[r] = gcl + r * g.ow * g.o + grp * f.og + o0;
              b[r] = pad + c0 * f.plane + (r * g.sh + i * g.dh) * f.wp + j * g.dw;
            }
            float* c = dwt + ((grp * f.taps + t) * f.cg + c0) * f.og + o0;
            run_kernel(ks.find(m, n, g.ow, true), a, b, c, g.oh);
          }
      }
    }
  }
}

// The input gradient's convolution: gy, padded by (k - 1) * d - p, convolved
// with the rotated kernels, the channels swapped (stride 1).
Conv2dGeometry adjoint_geometry(const Conv2dGeometry& g) {
  Conv2dGeometry a = g;
  a.c = g.o, a.o = g.c, a.h = g.oh, a.w = g.ow, a.oh = g.h, a.ow = g.w;
  a.ph = (g.kh - 1) * g.dh - g.ph, a.pw = (g.kw - 1) * g.dw - g.pw;
  return a;
}

// Whether libxsmm generates a 16 x 16 x 16 batch-reduce kernel of type Fn
// (the direct kernels' test of the CPU; KernelSet::add dispatches it).
template <class Fn>
bool generates_kernels(int flags) {
  KernelSet<Fn> ks;
  return ks.add(16, 16, 16, 16, 16, 16, false, flags);
}

// libxsmm 1.17 generates bfloat16 kernels only for AVX-512 targets (none on
// AMD Zen 3, target 'hsw').
bool conv_libxsmm_bf16_usable() noexcept {
  static const bool usable =
      conv_libxsmm_usable() && generates_kernels<BatchBKernel>(LIBXSMM_GEMM_FLAG_VNNI_A);
  return usable;
}

}  // namespace

bool conv_libxsmm_usable() noexcept {
  static const bool usable = [] {
    libxsmm_init();
    return libxsmm_get_target_archid() >= LIBXSMM_X86_AVX2 && generates_kernels<BatchSKernel>(0);
  }();
  return usable;
}

bool conv_direct_bf16_fits(const Conv2dGeometry& g, ConvPass pass) noexcept {
  return conv_libxsmm_bf16_usable() && conv_direct_fits(g, pass);
}

bool conv_direct_fits(const Conv2dGeometry& g, ConvPass pass) noexcept {
  if (!conv_libxsmm_usable() || g.n <= 0 || g.oh <= 0 || g.ow <= 0 || g.o <= 0 || g.c <= 0)
    return false;
  if (pass != ConvPass::GradInput) return fwd_fits(g) && fits_int(g.o * g.oh * g.ow);
  if (g.sh != 1 || g.sw != 1 || (g.kh - 1) * g.dh < g.ph || (g.kw - 1) * g.dw < g.pw) return false;
  return fwd_fits(adjoint_geometry(g));
}

bool conv_direct_forward(const float* x, const float* w, const float* bias, float* y,
                         const Conv2dGeometry& g, bool relu, const PlanesDone* done) {
  if (!conv_direct_fits(g, ConvPass::Forward)) return false;
  const FwdPlan p = fwd_plan(g, 1);
  Tensor wt = empty(Shape{g.groups * p.taps * p.og * p.cgp}, DType::Float32);
  weights_for_forward(w, g, p, false, wt.data<float>());
  return fwd_run<float, BatchSKernel>(x, wt.data<float>(), bias, y, g, p, 1, 0, relu, done);
}

bool conv_direct_forward_bf16(const bfloat16_t* x, const bfloat16_t* w, const float* bias,
                              bfloat16_t* y, const Conv2dGeometry& g) {
  if (!conv_direct_bf16_fits(g, ConvPass::Forward)) return false;
  const FwdPlan p = fwd_plan(g, 2);
  Tensor wt = empty(Shape{g.groups * p.taps * p.og * p.cgp}, DType::BFloat16);
  weights_for_forward(w, g, p, false, wt.data<bfloat16_t>());
  return fwd_run<bfloat16_t, BatchBKernel>(x, wt.data<bfloat16_t>(), bias, y, g, p, 2,
                                           LIBXSMM_GEMM_FLAG_VNNI_A, false, nullptr);
}

bool conv_direct_grad_input(const float* gy, const float* w, float* dx, const Conv2dGeometry& g) {
  if (!conv_direct_fits(g, ConvPass::GradInput)) return false;
  const Conv2dGeometry a = adjoint_geometry(g);
  const FwdPlan p = fwd_plan(a, 1);
  Tensor wt = empty(Shape{a.groups * p.taps * p.og * p.cgp}, DType::Float32);
  weights_for_forward(w, a, p, true, wt.data<float>());
  return fwd_run<float, BatchSKernel>(gy, wt.data<float>(), nullptr, dx, a, p, 1, 0, false,
                                      nullptr);
}

bool conv_direct_grad_input_bf16(const bfloat16_t* gy, const bfloat16_t* w, bfloat16_t* dx,
                                 const Conv2dGeometry& g) {
  if (!conv_direct_bf16_fits(g, ConvPass::GradInput)) return false;
  const Conv2dGeometry a = adjoint_geometry(g);
  const FwdPlan p = fwd_plan(a, 2);
  Tensor wt = empty(Shape{a.groups * p.taps * p.og * p.cgp}, DType::BFloat16);
  weights_for_forward(w, a, p, true, wt.data<bfloat16_t>());
  return fwd_run<bfloat16_t, BatchBKernel>(gy, wt.data<bfloat16_t>(), nullptr, dx, a, p, 2,
                                           LIBXSMM_GEMM_FLAG_VNNI_A, false, nullptr);
}

bool conv_direct_grad_weight(const float* x, const float* gy, float* dw, const Conv2dGeometry& g) {
  if (!conv_direct_fits(g, ConvPass::GradWeight)) return false;
  const WgtPlan p = wgt_plan(g);
  const FwdPlan& f = p.f;
  KernelSet<BatchSKernel> ks;
  const std::int64_t bos[2] = {p.bo, f.og - (p.oblocks - 1) * p.bo},
                     bcs[2] = {p.bc, f.cg - (p.cblocks - 1) * p.bc};
  for (std::int64_t m : bos)
    for (std::int64_t n : bcs)
      if (!ks.add(m, n, g.ow, g.o, f.plane, f.og, true, 0)) return false;
  const std::int64_t parts = parts_for(p.chunks);
  const std::int64_t wnumel = g.groups * f.taps * f.cg * f.og;
  const std::int64_t per_part = f.cgp * f.plane + g.oh * g.ow * g.o;
  Tensor work = empty(Shape{parts * per_part + p.chunks * wnumel}, DType::Float32);
  float* const partial = work.data<float>() + parts * per_part;
  std::vector<const float*> ptrs(static_cast<std::size_t>(2 * parts * g.oh));
  for_items(p.chunks, parts, [&](std::int64_t chunk, std::int64_t part) {
    float* pad = work.data<float>() + part * per_part;
    const float** a = ptrs.data() + 2 * part * g.oh;
    wgt_chunk(x, gy, g, p, ks, chunk, pad, pad + f.cgp * f.plane, a, a + g.oh,
              partial + chunk * wnumel);
  });
  // Partials summed in chunk order, then dwt [groups, taps, cg, og] -> dw [o, cg, kh, kw].
  parallel_for(wnumel, std::int64_t{1} << 14, [&](std::int64_t e0, std::int64_t e1) {
    for (std::int64_t c = 1; c < p.chunks; ++c)
      for (std::int64_t e = e0; e < e1; ++e) partial[e] += partial[c * wnumel + e];
  });
  for (std::int64_t grp = 0; grp < g.groups; ++grp)
    for (std::int64_t t = 0; t < f.taps; ++t)
      for (std::int64_t ci = 0; ci < f.cg; ++ci)
        for (std::int64_t co = 0; co < f.og; ++co)
          dw[((grp * f.og + co) * f.cg + ci) * f.taps + t] =
              partial[((grp * f.taps + t) * f.cg + ci) * f.og + co];
  return true;
}

#else  // libxsmm absent: the callers take the other algorithms.

bool conv_libxsmm_usable() noexcept { return false; }
bool conv_direct_fits(const Conv2dGeometry&, ConvPass) noexcept { return false; }
bool conv_direct_bf16_fits(const Conv2dGeometry&, ConvPass) noexcept { return false; }
bool conv_direct_forward(const float*, const float*, const float*, float*, const Conv2dGeometry&,
                         bool, const PlanesDone*) {
  return false;
}
bool conv_direct_forward_bf16(const bfloat16_t*, const bfloat16_t*, const float*, bfloat16_t*,
                              const Conv2dGeometry&) {
  return false;
}
bool conv_direct_grad_input(const float*, const float*, float*, const Conv2dGeometry&) {
  return false;
}
bool conv_direct_grad_weight(const float*, const float*, float*, const Conv2dGeometry&) {
  return false;
}
bool conv_direct_grad_input_bf16(const bfloat16_t*, const bfloat16_t*, bfloat16_t*,
                                 const Conv2dGeometry&) {
  return false;
}

#endif

}  // namespace ms::kernels::detail
