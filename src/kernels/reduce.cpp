// Reduction and softmax kernels. See ms/kernels/reduce.hpp for the layout strategy.
//
// Accuracy and determinism: every output is computed in an order fixed by the shapes alone.
// "Row" reductions accumulate into 16 interleaved lanes (element j goes to lane j % 16 of
// its chunk) over chunks of kRowChunk elements; lanes are merged pairwise (RowAcc::result),
// then chunks in order.
// "Column" reductions accumulate each output sequentially over the reduced index, in
// chunks chosen from the shapes only. Floating sums accumulate in float64 (float32 inputs
// lose nothing; float64 inputs gain the lane/chunk splitting), integer sums in uint64
// (wrapping, as two's complement int64 does, without signed-overflow UB).
#include "ms/kernels/reduce.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>
#include "ms/core/detail/eigen.hpp"

#include "ms/kernels/ew_instructions.hpp"
#include "ms/kernels/parallel.hpp"

namespace ms::kernels {
namespace {

#if defined(__GNUC__)
#define MS_REDUCE_NOINLINE __attribute__((noinline))
#else
#define MS_REDUCE_NOINLINE
#endif

constexpr int kLanes = 16;
constexpr std::int64_t kRowChunk = 32768;  // reduced elements of one output per row task
// Outputs one column task accumulates at once: up to 1024 values of each row
// read in order, so that rows up to that wide stream from memory as one
// sequence (bench/bm_elementwise BM_ColumnSum_Ms; 256 read strided pieces).
constexpr std::int64_t kColBlock = 1024;
constexpr std::int64_t kGrainElems = 32768;  // elements below which a thread is not worth it
constexpr std::int64_t kTransformBlock = 256;
constexpr std::int64_t kRowOutBlock = 32;  // outputs fed run by run in [R][K][R] layouts

template <class T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

template <class T>
inline bool is_nan(T v) {
  if constexpr (kIsFloat<T>)
    return v != v;
  else
    return false;
}

// parallel_for with the body type-erased: parallel_for inlines its body twice (the
// serial path and the OpenMP region) for every body type, and this file has hundreds
// (reducers x dtypes x loops). Here each body is compiled once, behind one OpenMP region
// for the whole file; the chunking is parallel_for's, so results are unchanged.
using ChunkFn = void (*)(const void*, std::int64_t, std::int64_t);

void par_for_erased(std::int64_t n, std::int64_t grain, ChunkFn call, const void* ctx) {
  parallel_for(n, grain, [&](std::int64_t b, std::int64_t e) { call(ctx, b, e); });
}

template <class F>
void par_for(std::int64_t n, std::int64_t grain, const F& fn) {
  par_for_erased(
      n, grain,
      [](const void* c, std::int64_t b, std::int64_t e) { (*static_cast<const F*>(c))(b, e); },
      &fn);
}

template <class T>
using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using CMap = Eigen::Map<const Arr<T>>;
template <class T>
using MMap = Eigen::Map<Arr<T>>;

// ------------------------------------------------------------------ reducers
// A reducer R has: In, Acc, Out; init(); step(acc, x, n, p) for element x at reduced index n
// with the output's parameter p (a mean or a max from a previous pass; 0 otherwise);
// merge(acc, later_acc); finish(acc, p) -> Out. With kTransform, transform() maps contiguous
// inputs block-wise (vectorized through Eigen) before step sees them.

template <class T>
using WideAcc = std::conditional_t<kIsFloat<T>, double, std::uint64_t>;
template <class T>
using SumOut = std::conditional_t<kIsFloat<T>, T, std::int64_t>;

struct NoTransform {
  static constexpr bool kTransform = false;
};

template <class T>
struct SumR : NoTransform {
  using In = T;
  using Acc = WideAcc<T>;
  using Out = SumOut<T>;
  Acc init() const { return Acc(0); }
  void step(Acc& a, In x, std::int64_t, double) const { a += static_cast<Acc>(x); }
  void merge(Acc& a, const Acc& b) const { a += b; }
  Out finish(Acc a, double) const { return static_cast<Out>(a); }
};

template <class T>
struct ProdR : NoTransform {
  using In = T;
  using Acc = WideAcc<T>;
  using Out = SumOut<T>;
  Acc init() const { return Acc(1); }
  void step(Acc& a, In x, std::int64_t, double) const { a *= static_cast<Acc>(x); }
  void merge(Acc& a, const Acc& b) const { a *= b; }
  Out finish(Acc a, double) const { return static_cast<Out>(a); }
};

// NaN-propagating max/min: once the accumulator is NaN it stays NaN.
template <class T, bool kMax, class O = T>
struct ExtremumR : NoTransform {
  using In = T;
  using Acc = T;
  using Out = O;
  Acc init() const {
    if constexpr (kIsFloat<T>)
      return kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else
      return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  void step(Acc& a, In x, std::int64_t, double) const {
    const bool better = kMax ? (x > a) : (x < a);
    a = (better || is_nan(x)) ? x : a;
  }
  void merge(Acc& a, const Acc& b) const { step(a, b, 0, 0.0); }
  Out finish(Acc a, double) const { return static_cast<Out>(a); }
  // A contiguous run at once: Eigen's vectorized NaN-propagating max/min (exact, so the
  // order does not matter).
  Acc contiguous(const In* p, std::int64_t n, std::int64_t) const {
    if (n == 0) return init();
    if constexpr (std::is_same_v<T, bool>) {
      const bool* end = p + n;
      return kMax ? std::find(p, end, true) != end : std::find(p, end, false) == end;
    } else {
      const CMap<T> m(p, n);
      return kMax ? m.template maxCoeff<Eigen::PropagateNaN>()
                  : m.template minCoeff<Eigen::PropagateNaN>();
    }
  }
};

template <class T, bool kAll>
struct LogicalR : NoTransform {
  using In = T;
  using Acc = bool;
  using Out = bool;
  Acc init() const { return kAll; }
  void step(Acc& a, In x, std::int64_t, double) const {
    const bool nz = x != In(0);  // NaN != 0 is true, as PyTorch
    a = kAll ? (a && nz) : (a || nz);
  }
  void merge(Acc& a, const Acc& b) const { a = kAll ? (a && b) : (a || b); }
  Out finish(Acc a, double) const { return a; }
};

template <class T, class O>
struct MeanR : NoTransform {
  using In = T;
  using Acc = double;
  using Out = O;
  std::int64_t n = 0;
  Acc init() const { return 0.0; }
  void step(Acc& a, In x, std::int64_t, double) const { a += static_cast<double>(x); }
  void merge(Acc& a, const Acc& b) const { a += b; }
  Out finish(Acc a, double) const {
    return static_cast<Out>(n > 0 ? a / static_cast<double>(n)
                                  : std::numeric_limits<double>::quiet_NaN());
  }
};

// Second pass of var/std: p is the output's mean.
template <class T>
struct SqDevR : NoTransform {
  using In = T;
  using Acc = double;
  using Out = T;
  std::int64_t n = 0, ddof = 0;
  bool take_sqrt = false;
  Acc init() const { return 0.0; }
  void step(Acc& a, In x, std::int64_t, double p) const {
    const double d = static_cast<double>(x) - p;
    a += d * d;
  }
  void merge(Acc& a, const Acc& b) const { a += b; }
  Out finish(Acc a, double) const {
    // N - ddof <= 0: inf for a positive sum, NaN for 0 (0/0), as PyTorch.
    double v;
    if (n > ddof)
      v = a / static_cast<double>(n - ddof);
    else
      v = a > 0 ? std::numeric_limits<double>::infinity()
                : std::numeric_limits<double>::quiet_NaN();
    return static_cast<Out>(take_sqrt ? std::sqrt(v) : v);
  }
};

// Second pass of logsumexp: p is the output's max (0 when infinite), inputs are
// transformed to exp(x - p) in T precision (Eigen's vectorized exp), summed in double.
template <class T>
struct LseR {
  static constexpr bool kTransform = true;
  using In = T;
  using Acc = double;
  using Out = T;
  Acc init() const { return 0.0; }
  static void transform(const T* in, std::int64_t len, double p, T* tmp) {
    MMap<T>(tmp, len) = exp_flushed(CMap<T>(in, len) - static_cast<T>(p));
  }
  static void transform(const T* in, std::int64_t len, const double* p, T* tmp) {
    MMap<T>(tmp, len) = exp_flushed(CMap<T>(in, len) - CMap<double>(p, len).template cast<T>());
  }
  void step(Acc& a, In x, std::int64_t, double) const { a += static_cast<double>(x); }
  void merge(Acc& a, const Acc& b) const { a += b; }
  Out finish(Acc a, double p) const { return static_cast<Out>(std::log(a) + p); }
};

template <class T>
struct ArgAcc {
  T v{};
  std::int64_t i = -1;  // -1: nothing seen yet
};

// First index of the max (min); NaN beats everything, the first NaN wins.
template <class T, bool kMax>
struct ArgR : NoTransform {
  using In = T;
  using Acc = ArgAcc<T>;
  using Out = std::int64_t;
  static bool better(T x, T v) { return (kMax ? (x > v) : (x < v)) || (is_nan(x) && !is_nan(v)); }
  Acc init() const { return {}; }
  void step(Acc& a, In x, std::int64_t n, double) const {
    if (a.i < 0 || better(x, a.v)) {
      a.v = x;
      a.i = n;
    }
  }
  void merge(Acc& a, const Acc& b) const {
    if (b.i < 0) return;
    if (a.i < 0 || better(b.v, a.v) || (!better(a.v, b.v) && b.i < a.i)) a = b;
  }
  Out finish(Acc a, double) const { return a.i; }
  // A contiguous run: the (vectorized) max, then the first element equal to it.
  Acc contiguous(const In* p, std::int64_t n, std::int64_t base) const {
    if (n == 0) return {};
    const T m = ExtremumR<T, kMax>{}.contiguous(p, n, 0);
    const In* end = p + n;
    const In* at =
        is_nan(m) ? std::find_if(p, end, [](T v) { return is_nan(v); }) : std::find(p, end, m);
    return {m, base + (at - p)};
  }
};

// ------------------------------------------------------------------ layout plan

// ROW: out[o * os_o] reduces x[o * xs_o + r * xs_r + n], r < R, n < N (runs of N
//      contiguous elements; reduced index r * N + n).
// COL: out[o * os_o + i * os_i] reduces x[o * xs_o + n * xs_n + i], n < N, i < I.
// SPREAD: a ROW plan with R = 1 whose outputs run over up to kSpreadDims kept
//      dims that do not merge into one (heads split out of [B, T, H, D] summed
//      over D): output o is the multi-index of o over `kept` (outermost first,
//      in the input's memory order), each kept dim with its input and output
//      stride.
constexpr std::size_t kSpreadDims = 4;
struct Kept {
  std::int64_t size = 1, xs = 0, os = 0;
};
struct Plan {
  Tensor x;
  bool row = true;
  std::int64_t O = 0, R = 1, N = 0, I = 1;
  std::int64_t xs_o = 0, xs_r = 0, xs_n = 1, os_o = 0, os_i = 0;
  std::size_t spread = 0;  // kept dims of a SPREAD plan (0: not one)
  std::array<Kept, kSpreadDims> kept{};
};

// The input and output offsets of outputs o, o + 1, ... of a SPREAD plan, in
// order: an odometer over the kept dims, set once at the first output.
class SpreadWalk {
 public:
  SpreadWalk(const Plan& p, std::int64_t o) : p_(p) {
    for (std::size_t k = p.spread; k-- > 0;) {
      idx_[k] = o % p.kept[k].size;
      o /= p.kept[k].size;
      x_ += idx_[k] * p.kept[k].xs;
      out_ += idx_[k] * p.kept[k].os;
    }
  }
  std::int64_t x() const { return x_; }
  std::int64_t out() const { return out_; }
  void next() {
    for (std::size_t k = p_.spread; k-- > 0;) {
      const Kept& d = p_.kept[k];
      x_ += d.xs;
      out_ += d.os;
      if (++idx_[k] < d.size) return;
      x_ -= d.xs * d.size;
      out_ -= d.os * d.size;
      idx_[k] = 0;
    }
  }

 private:
  const Plan& p_;
  std::array<std::int64_t, kSpreadDims> idx_{};
  std::int64_t x_ = 0, out_ = 0;
};

struct Dim {
  std::int64_t size, xs, os, axis;
  bool red;
};

// The non-unit axes of `x` in memory order (outermost first), adjacent axes
// of the same kind merged when they are contiguous with each other in the
// input and the output; at least one reduced group. `in_order` is false when
// `ordered` and memory order permutes the reduced axes.
std::vector<Dim> merged_dims(const Tensor& x, const std::vector<bool>& red, bool ordered,
                             bool& in_order) {
  const std::int64_t rank = x.rank();
  // Output strides of the kept axes (the output is dense in logical order).
  std::vector<std::int64_t> os(static_cast<std::size_t>(rank), 0);
  for (std::int64_t d = rank - 1, run = 1; d >= 0; --d)
    if (!red[static_cast<std::size_t>(d)]) {
      os[static_cast<std::size_t>(d)] = run;
      run *= x.dim(d);
    }
  std::vector<Dim> dims;
  for (std::int64_t d = 0; d < rank; ++d)
    if (x.dim(d) != 1)
      dims.push_back({x.dim(d), x.strides()[static_cast<std::size_t>(d)],
                      os[static_cast<std::size_t>(d)], d, red[static_cast<std::size_t>(d)]});
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return a.xs > b.xs; });
  in_order = true;
  if (ordered) {
    std::int64_t last = -1;
    for (const Dim& d : dims)
      if (d.red) {
        if (d.axis < last) in_order = false;
        last = d.axis;
      }
  }
  std::vector<Dim> c;
  for (const Dim& d : dims) {
    if (!c.empty() && c.back().red == d.red && c.back().xs == d.xs * d.size &&
        c.back().os == d.os * d.size) {
      c.back().size *= d.size;
      c.back().xs = d.xs;
      c.back().os = d.os;
    } else {
      c.push_back(d);
    }
  }
  if (std::none_of(c.begin(), c.end(), [](const Dim& d) { return d.red; }))
    c.push_back({1, 1, 0, rank, true});  // nothing left to reduce: N = 1
  return c;
}

// A ROW plan for merged dims [K][R], [R1][K][R], [K][R1][R] or [R1][R] (at
// most one kept and one more reduced group, the innermost reduced and dense).
bool row_plan(const std::vector<Dim>& c, Plan& p) {
  const std::size_t n = c.size();
  if (!(c.back().red && c.back().xs == 1 && n <= 3)) return false;
  const auto kept = std::count_if(c.begin(), c.end(), [](const Dim& d) { return !d.red; });
  if (kept > 1 || static_cast<std::size_t>(kept) + 2 < n) return false;
  p.row = true;
  p.N = c.back().size;
  p.O = 1;
  for (std::size_t k = 0; k + 1 < n; ++k) {
    if (c[k].red) {
      p.R = c[k].size;
      p.xs_r = c[k].xs;
    } else {
      p.O = c[k].size;
      p.xs_o = c[k].xs;
      p.os_o = c[k].os;
    }
  }
  return true;
}

// A SPREAD plan for merged dims [K]...[K][R] (2 to kSpreadDims kept groups,
// the one reduced group innermost, dense and at most kRowChunk long).
bool spread_plan(const std::vector<Dim>& c, Plan& p) {
  const std::size_t n = c.size();
  if (!(c.back().red && c.back().xs == 1 && c.back().size <= kRowChunk && n >= 3 &&
        n - 1 <= kSpreadDims) ||
      std::any_of(c.begin(), c.end() - 1, [](const Dim& d) { return d.red; }))
    return false;
  p.row = true;
  p.N = c.back().size;
  p.O = 1;
  p.spread = n - 1;
  for (std::size_t k = 0; k + 1 < n; ++k) {
    p.kept[k] = {c[k].size, c[k].xs, c[k].os};
    p.O *= c[k].size;
  }
  return true;
}

// A COL plan for merged dims [R][I] or [K][R][I] (the innermost kept and dense).
bool col_plan(const std::vector<Dim>& c, Plan& p) {
  const std::size_t n = c.size();
  if (!(!c.back().red && c.back().xs == 1 &&
        ((n == 2 && c[0].red) || (n == 3 && !c[0].red && c[1].red))))
    return false;
  const Dim& r = c[n - 2];
  p.row = false;
  p.I = c.back().size;
  p.os_i = c.back().os;
  p.N = r.size;
  p.xs_n = r.xs;
  p.O = n == 3 ? c[0].size : 1;
  p.xs_o = n == 3 ? c[0].xs : 0;
  p.os_o = n == 3 ? c[0].os : 0;
  return true;
}

// `ordered`: the reduced index must be the row-major flattening of the reduced axes in
// their logical order (argmax/argmin), so memory order may not permute reduced axes.
Plan make_plan(const Tensor& x, std::span<const std::int64_t> axes, bool ordered, bool allow_copy) {
  const std::int64_t rank = x.rank();
  std::vector<bool> red(static_cast<std::size_t>(rank), false);
  for (std::int64_t a : axes) red[static_cast<std::size_t>(a)] = true;
  std::int64_t out_numel = 1, red_numel = 1;
  for (std::int64_t d = 0; d < rank; ++d)
    (red[static_cast<std::size_t>(d)] ? red_numel : out_numel) *= x.dim(d);

  Plan p;
  p.x = x;
  if (out_numel == 0) return p;  // O = 0: nothing to compute
  if (red_numel == 0) {          // every output reduces nothing: init + finish
    p.O = out_numel;
    p.N = 0;
    p.os_o = 1;
    return p;
  }
  bool in_order = true;
  const std::vector<Dim> c = merged_dims(x, red, ordered, in_order);
  if (in_order && (row_plan(c, p) || col_plan(c, p) || spread_plan(c, p))) return p;
  // Any other layout: one copy into [kept..., reduced...] order, which is a ROW plan.
  MS_ASSERT(allow_copy);
  (void)allow_copy;
  std::vector<std::int64_t> perm, new_axes;
  for (std::int64_t d = 0; d < rank; ++d)
    if (!red[static_cast<std::size_t>(d)]) perm.push_back(d);
  for (std::int64_t d = 0; d < rank; ++d)
    if (red[static_cast<std::size_t>(d)]) {
      new_axes.push_back(static_cast<std::int64_t>(perm.size()));
      perm.push_back(d);
    }
  const Tensor xc = ::ms::detail::to_dense(::ms::detail::permute_view(x, perm), x.dtype());
  return make_plan(xc, new_axes, ordered, false);
}

// ------------------------------------------------------------------ loops

template <class R>
concept HasContiguous = requires(const R& r, const typename R::In* p) {
  r.contiguous(p, 0, 0);
};

// The running state of one output within a chunk: 16 interleaved lanes, or a single
// accumulator for reducers with an exact contiguous fast path.
template <class R>
struct RowAcc {
  using Acc = typename R::Acc;
  using In = typename R::In;
  static constexpr int kCount = HasContiguous<R> ? 1 : kLanes;
  Acc lanes[kCount];

  void init(const R& r) {
    for (Acc& l : lanes) l = r.init();
  }
  // Feeds q[0, len), whose first element has reduced index `base`.
  void feed(const R& r, const In* q, std::int64_t len, std::int64_t base, double param) {
    if constexpr (HasContiguous<R>) {
      r.merge(lanes[0], r.contiguous(q, len, base));
    } else if constexpr (R::kTransform) {
      alignas(64) In tmp[kTransformBlock];
      for (std::int64_t b = 0; b < len; b += kTransformBlock) {
        const std::int64_t m = std::min(kTransformBlock, len - b);
        R::transform(q + b, m, param, tmp);
        step_lanes(r, tmp, m, base + b, param);
      }
    } else {
      step_lanes(r, q, len, base, param);
    }
  }
  // The lanes merged pairwise (lane j with lane j + 8, then j + 4, j + 2,
  // j + 1), the order in which float_lane_sum merges its vectors' lanes.
  Acc result(const R& r) const {
    Acc t[kCount];
    std::copy(std::begin(lanes), std::end(lanes), t);
    for (int w = kCount / 2; w >= 1; w /= 2)
      for (int j = 0; j < w; ++j) r.merge(t[j], t[j + w]);
    return t[0];
  }

 private:
  void step_lanes(const R& r, const In* q, std::int64_t m, std::int64_t base, double param) {
    std::int64_t i = 0;
    for (; i + kCount <= m; i += kCount)
      for (int j = 0; j < kCount; ++j) r.step(lanes[j], q[i + j], base + i + j, param);
    for (int j = 0; i + j < m; ++j) r.step(lanes[j], q[i + j], base + i + j, param);
  }
};

/// Reduces one contiguous run.
template <class R>
typename R::Acc reduce_run(const R& r, const typename R::In* p, std::int64_t len) {
  RowAcc<R> a;
  a.init(r);
  a.feed(r, p, len, 0, 0.0);
  return a.result(r);
}

#if defined(__AVX512F__)
// Reducers whose step adds a float32 input to a float64 accumulator and
// whose merge adds accumulators: their lanes can be fed a vector at a time.
template <class R>
constexpr bool kFloatAddLanes =
    std::is_same_v<R, SumR<float>> || std::is_same_v<R, MeanR<float, typename R::Out>>;

// RowAcc's result for a run of n float32 values, a vector of 16 at a time:
// lanes 0-7 and 8-15 in two float64 registers, the missing elements of the
// last vector read as +0 (a lane starts at +0, so adding +0 changes nothing),
// then merged in RowAcc::result's pairwise order.
double float_lane_sum(const float* p, std::int64_t n) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  const auto add = [&](__m512 v) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    hi = _mm512_add_pd(
        hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  };
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) add(_mm512_loadu_ps(p + i));
  if (i < n) add(_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (n - i)) - 1), p + i));
  const __m512d w8 = _mm512_add_pd(lo, hi);  // lane j + lane j + 8
  const __m256d w4 =
      _mm256_add_pd(_mm512_castpd512_pd256(w8), _mm512_extractf64x4_pd(w8, 1));  // j + 4
  const __m128d w2 = _mm_add_pd(_mm256_castpd256_pd128(w4), _mm256_extractf128_pd(w4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(w2, _mm_unpackhi_pd(w2, w2)));
}
#endif

// One output from its run of n inputs at p: the vector path where the
// reducer has one, else RowAcc (run_row with a run per output, and run_spread).
template <class R>
typename R::Out reduce_one(const R& r, const typename R::In* p, std::int64_t n, double param) {
#if defined(__AVX512F__)
  if constexpr (kFloatAddLanes<R>) return r.finish(float_lane_sum(p, n), param);
#endif
  RowAcc<R> st;
  st.init(r);
  st.feed(r, p, n, 0, param);
  return r.finish(st.result(r), param);
}

// A SPREAD plan: one run per output, reduced as run_row reduces one.
template <class R>
void run_spread(const R& r, const Plan& pl, typename R::Out* out, const double* param) {
  using In = typename R::In;
  const In* x = reinterpret_cast<const In*>(pl.x.raw_data());  // see dispatch_bits
  const std::int64_t N = pl.N;
  par_for(pl.O, std::max<std::int64_t>(1, kGrainElems / std::max<std::int64_t>(N, 1)),
          [&](std::int64_t b, std::int64_t e) {
            SpreadWalk at(pl, b);
            for (std::int64_t o = b; o < e; ++o, at.next())
              out[at.out()] = reduce_one(r, x + at.x(), N, param ? param[at.out()] : 0.0);
          });
}

template <class R>
void run_row(const R& r, const Plan& pl, typename R::Out* out, const double* param) {
  using Acc = typename R::Acc;
  using In = typename R::In;
  const In* x = reinterpret_cast<const In*>(pl.x.raw_data());  // see dispatch_bits
  const std::int64_t O = pl.O, R1 = pl.R, N = pl.N, xs = pl.xs_o, rs = pl.xs_r, os = pl.os_o;
  auto par = [&](std::int64_t o) { return param ? param[o * os] : 0.0; };
  // Chunks of about kRowChunk elements: whole runs when they are short, pieces of a run
  // when it is long. A function of the shapes only.
  const std::int64_t nn = N <= kRowChunk ? 1 : (N + kRowChunk - 1) / kRowChunk;
  const std::int64_t piece = nn == 1 ? N : kRowChunk;
  const std::int64_t runs =
      nn == 1 ? std::max<std::int64_t>(1, kRowChunk / std::max<std::int64_t>(N, 1)) : 1;
  const std::int64_t nr = (R1 + runs - 1) / runs;
  const std::int64_t nchunks = nr * nn;
  // With several runs per output ([R][K][R], e.g. NCHW over (0, 2, 3)) a task feeds a
  // block of outputs run by run, so memory is read in order; each output still sees its
  // runs in the same order, so the result is the same as one output at a time.
  const std::int64_t ob = R1 > 1 ? kRowOutBlock : 1;
  const std::int64_t nob = (O + ob - 1) / ob;
  // Outputs of block `blk` over chunk `ch` into res[0, ob).
  // (Not inlined: both loops below call it, and one copy of it per reducer is enough.)
  auto task = [&](std::int64_t blk, std::int64_t ch, Acc* res) MS_REDUCE_NOINLINE {
    const std::int64_t o0 = blk * ob, o1 = std::min(O, o0 + ob);
    const std::int64_t cr = ch / nn, na = (ch % nn) * piece, nb = std::min(N, na + piece);
    RowAcc<R> st[kRowOutBlock];
    for (std::int64_t o = o0; o < o1; ++o) st[o - o0].init(r);
    for (std::int64_t k = cr * runs; k < std::min(R1, (cr + 1) * runs); ++k)
      for (std::int64_t o = o0; o < o1; ++o)
        st[o - o0].feed(r, x + o * xs + k * rs + na, nb - na, k * N + na, par(o));
    for (std::int64_t o = o0; o < o1; ++o) res[o - o0] = st[o - o0].result(r);
  };
  if (nchunks == 1 && R1 == 1) {  // one contiguous run per output
    par_for(O, std::max<std::int64_t>(1, kGrainElems / std::max<std::int64_t>(N, 1)),
            [&](std::int64_t b, std::int64_t e) {
              for (std::int64_t o = b; o < e; ++o)
                out[o * os] = reduce_one(r, x + o * xs, N, par(o));
            });
    return;
  }
  if (nchunks == 1) {
    par_for(nob, std::max<std::int64_t>(1, kGrainElems / std::max<std::int64_t>(ob * R1 * N, 1)),
            [&](std::int64_t b, std::int64_t e) {
              Acc res[kRowOutBlock];
              for (std::int64_t blk = b; blk < e; ++blk) {
                task(blk, 0, res);
                for (std::int64_t o = blk * ob; o < std::min(O, (blk + 1) * ob); ++o)
                  out[o * os] = r.finish(res[o - blk * ob], par(o));
              }
            });
    return;
  }
  // (not std::vector: Acc may be bool)
  const auto part = std::make_unique<Acc[]>(static_cast<std::size_t>(O * nchunks));
  par_for(nob * nchunks, 1, [&](std::int64_t b, std::int64_t e) {
    Acc res[kRowOutBlock];
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t blk = t / nchunks, ch = t % nchunks;
      task(blk, ch, res);
      for (std::int64_t o = blk * ob; o < std::min(O, (blk + 1) * ob); ++o)
        part[static_cast<std::size_t>(o * nchunks + ch)] = res[o - blk * ob];
    }
  });
  par_for(O, std::max<std::int64_t>(1, 4096 / nchunks), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      Acc a = part[static_cast<std::size_t>(o * nchunks)];
      for (std::int64_t ch = 1; ch < nchunks; ++ch)
        r.merge(a, part[static_cast<std::size_t>(o * nchunks + ch)]);
      out[o * os] = r.finish(a, par(o));
    }
  });
}

template <class R>
void run_col(const R& r, const Plan& pl, typename R::Out* out, const double* param) {
  using Acc = typename R::Acc;
  using In = typename R::In;
  const In* x = reinterpret_cast<const In*>(pl.x.raw_data());  // see dispatch_bits
  const std::int64_t O = pl.O, N = pl.N, I = pl.I;
  const std::int64_t nib = (I + kColBlock - 1) / kColBlock;
  const std::int64_t width = std::min(I, kColBlock);
  const std::int64_t tasks = O * nib;
  // Split the reduced range only when there are few output blocks; a function of the
  // shapes alone, so the summation order does not depend on the thread count.
  std::int64_t nchunks = 1;
  if (tasks < 8 && N * width >= 2 * kGrainElems)
    nchunks = std::min<std::int64_t>(16, N * width / kGrainElems);
  const std::int64_t cn = (N + nchunks - 1) / nchunks;
  nchunks = (N + cn - 1) / cn;

  // Accumulates outputs [i0, i0 + w) of row-block o over n in [n0, n1).
  // (Not inlined: both loops below call it, and one copy of it per reducer is enough.)
  auto accumulate = [&](std::int64_t o, std::int64_t i0, std::int64_t w, std::int64_t n0,
                        std::int64_t n1, const double* pm, Acc* acc) MS_REDUCE_NOINLINE {
    for (std::int64_t k = 0; k < w; ++k) acc[k] = r.init();
    alignas(64) In tmp[kColBlock];
    for (std::int64_t n = n0; n < n1; ++n) {
      const In* row = x + o * pl.xs_o + n * pl.xs_n + i0;
      const In* src = row;
      if constexpr (R::kTransform) {
        R::transform(row, w, pm, tmp);
        src = tmp;
      }
      for (std::int64_t k = 0; k < w; ++k) r.step(acc[k], src[k], n, pm[k]);
    }
  };
  auto load_params = [&](std::int64_t o, std::int64_t i0, std::int64_t w, double* pm) {
    for (std::int64_t k = 0; k < w; ++k)
      pm[k] = param ? param[o * pl.os_o + (i0 + k) * pl.os_i] : 0.0;
  };

  if (nchunks == 1) {
    par_for(tasks, std::max<std::int64_t>(1, kGrainElems / std::max<std::int64_t>(1, N * width)),
            [&](std::int64_t b, std::int64_t e) {
              Acc acc[kColBlock];
              double pm[kColBlock];
              for (std::int64_t t = b; t < e; ++t) {
                const std::int64_t o = t / nib, i0 = (t % nib) * kColBlock;
                const std::int64_t w = std::min(kColBlock, I - i0);
                load_params(o, i0, w, pm);
                accumulate(o, i0, w, 0, N, pm, acc);
                for (std::int64_t k = 0; k < w; ++k)
                  out[o * pl.os_o + (i0 + k) * pl.os_i] = r.finish(acc[k], pm[k]);
              }
            });
    return;
  }
  const auto part = std::make_unique<Acc[]>(static_cast<std::size_t>(tasks * nchunks * kColBlock));
  par_for(tasks * nchunks, 1, [&](std::int64_t b, std::int64_t e) {
    double pm[kColBlock];
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t blk = t / nchunks, ch = t % nchunks;
      const std::int64_t o = blk / nib, i0 = (blk % nib) * kColBlock;
      const std::int64_t w = std::min(kColBlock, I - i0);
      load_params(o, i0, w, pm);
      accumulate(o, i0, w, ch * cn, std::min(N, (ch + 1) * cn), pm, part.get() + t * kColBlock);
    }
  });
  par_for(tasks, 1, [&](std::int64_t b, std::int64_t e) {
    double pm[kColBlock];
    for (std::int64_t blk = b; blk < e; ++blk) {
      const std::int64_t o = blk / nib, i0 = (blk % nib) * kColBlock;
      const std::int64_t w = std::min(kColBlock, I - i0);
      load_params(o, i0, w, pm);
      const Acc* first = part.get() + blk * nchunks * kColBlock;
      for (std::int64_t k = 0; k < w; ++k) {
        Acc a = first[k];
        for (std::int64_t ch = 1; ch < nchunks; ++ch) r.merge(a, first[ch * kColBlock + k]);
        out[o * pl.os_o + (i0 + k) * pl.os_i] = r.finish(a, pm[k]);
      }
    }
  });
}

template <class R>
void run(const R& r, const Plan& pl, typename R::Out* out, const double* param = nullptr) {
  if (pl.O == 0) return;
  if (pl.spread != 0)
    run_spread(r, pl, out, param);
  else if (pl.row)
    run_row(r, pl, out, param);
  else
    run_col(r, pl, out, param);
}

// ------------------------------------------------------------------ dispatch

template <class F>
void dispatch_real(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(TypeTag<bool>{});
    case DType::Int8: return f(TypeTag<std::int8_t>{});
    case DType::Int16: return f(TypeTag<std::int16_t>{});
    case DType::Int32: return f(TypeTag<std::int32_t>{});
    case DType::Int64: return f(TypeTag<std::int64_t>{});
    case DType::UInt8: return f(TypeTag<std::uint8_t>{});
    case DType::UInt16: return f(TypeTag<std::uint16_t>{});
    case DType::UInt32: return f(TypeTag<std::uint32_t>{});
    case DType::UInt64: return f(TypeTag<std::uint64_t>{});
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    default: break;
  }
  ::ms::detail::raise<TypeError>("reduce kernel: dtype ", t, " has no kernel (convert it first)");
}

// All/Any only ask "is x != 0": for an integer or bool that is "is some bit set",
// whatever the signedness, so they read each integer dtype as the unsigned type of
// its size (bool as uint8: its bytes are 0 or 1) and have 6 kernels instead of 11.
template <class F>
void dispatch_bits(DType t, F&& f) {
  switch (t) {
    case DType::Bool:
    case DType::Int8:
    case DType::UInt8: return f(TypeTag<std::uint8_t>{});
    case DType::Int16:
    case DType::UInt16: return f(TypeTag<std::uint16_t>{});
    case DType::Int32:
    case DType::UInt32: return f(TypeTag<std::uint32_t>{});
    case DType::Int64:
    case DType::UInt64: return f(TypeTag<std::uint64_t>{});
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    default: break;
  }
  ::ms::detail::raise<TypeError>("reduce kernel: dtype ", t, " has no kernel (convert it first)");
}

// The dtype a reduction runs in. The rare integer dtypes (and bool, where the order
// matters) are first converted to a wider integer type that holds each of their values
// exactly: the wrapping sums and products, the extrema and the first index of an
// extremum of the same values are the same, and ~30 of the ~100 reducer x dtype kernels
// of this file need not exist. uint8 (images) and bool sums (counts) keep their kernels:
// no 4x larger copy for them.
DType run_dtype(ReduceKind kind, DType t) {
  const bool narrow = t == DType::Int8 || t == DType::Int16 || t == DType::UInt16;
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Prod: return narrow ? DType::Int32 : t == DType::UInt32 ? DType::Int64 : t;
    case ReduceKind::Max:
    case ReduceKind::Min:
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
      return narrow || t == DType::Bool ? DType::Int32 : t == DType::UInt32 ? DType::Int64 : t;
    default: return t;
  }
}

template <class F>
void dispatch_float(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    default: break;
  }
  ::ms::detail::raise<TypeError>("reduce kernel: dtype ", t, " is not float32/float64");
}

// ------------------------------------------------------------------ softmax

template <class T>
void softmax_rows(const T* x, T* y, std::int64_t O, std::int64_t N, bool log) {
  par_for(O, std::max<std::int64_t>(1, 8192 / N), [&](std::int64_t b, std::int64_t e) {
    const ExtremumR<T, true> maxr{};
    const SumR<T> sumr{};
    for (std::int64_t o = b; o < e; ++o) {
      const T* px = x + o * N;
      T* py = y + o * N;
      const T m = maxr.contiguous(px, N, 0);
      MMap<T> Y(py, N);
      const CMap<T> X(px, N);
      Y = exp_flushed(X - m);
      const double s = reduce_run(sumr, py, N);
      if (log)
        Y = (X - m) - static_cast<T>(std::log(s));
      else
        Y /= static_cast<T>(s);
    }
  });
}

// -log_softmax(x)[label] of each row: the row's max m, then sum exp(x - m)
// over whole SIMD packets (exp on packets, one packet of partial sums), across
// the packet, then the elements past the last whole packet; an order fixed by
// C alone, read where the row is (nothing written but the loss). char_lm's
// [4096, 256] logits on one thread of the Zen 4 VM: 0.57 ms, against 4.5 ms
// for the scalar loop of std::exp it replaces (an ad-hoc timing loop).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <class T>
void softmax_xent_rows(const T* x, const std::int64_t* labels, T* out, std::int64_t O,
                       std::int64_t N) {
  using P = typename Eigen::internal::packet_traits<T>::type;
  constexpr std::int64_t PS = Eigen::internal::unpacket_traits<P>::size;
  const std::int64_t full = N / PS * PS;
  par_for(O, std::max<std::int64_t>(1, 8192 / N), [&](std::int64_t b, std::int64_t e) {
    const ExtremumR<T, true> maxr{};
    for (std::int64_t o = b; o < e; ++o) {
      const T* px = x + o * N;
      const T m = maxr.contiguous(px, N, 0);
      const P pm = Eigen::internal::pset1<P>(m);
      P acc = Eigen::internal::pset1<P>(T(0));
      for (std::int64_t j = 0; j < full; j += PS)
        acc = Eigen::internal::padd(acc, Eigen::internal::pexp(Eigen::internal::psub(
                                             Eigen::internal::ploadu<P>(px + j), pm)));
      T sum = Eigen::internal::predux(acc);
      for (std::int64_t j = full; j < N; ++j) sum += std::exp(px[j] - m);
      out[o] = std::log(sum) + m - px[labels[o]];
    }
  });
}
#pragma GCC diagnostic pop

template <class T>
void softmax_cols(const T* x, T* y, std::int64_t O, std::int64_t N, std::int64_t I, bool log) {
  const std::int64_t nib = (I + kColBlock - 1) / kColBlock;
  const std::int64_t width = std::min(I, kColBlock);
  par_for(O * nib, std::max<std::int64_t>(1, 8192 / (N * width)),
          [&](std::int64_t b, std::int64_t e) {
            const ExtremumR<T, true> maxr{};
            alignas(64) T m[kColBlock];
            alignas(64) T c[kColBlock];
            alignas(64) double s[kColBlock];
            for (std::int64_t t = b; t < e; ++t) {
              const std::int64_t o = t / nib, i0 = (t % nib) * kColBlock;
              const std::int64_t w = std::min(kColBlock, I - i0);
              const T* px = x + o * N * I + i0;
              T* py = y + o * N * I + i0;
              for (std::int64_t k = 0; k < w; ++k) m[k] = maxr.init();
              for (std::int64_t n = 0; n < N; ++n)
                for (std::int64_t k = 0; k < w; ++k) maxr.step(m[k], px[n * I + k], n, 0.0);
              for (std::int64_t k = 0; k < w; ++k) s[k] = 0.0;
              const CMap<T> M(m, w);
              for (std::int64_t n = 0; n < N; ++n) {
                MMap<T> Y(py + n * I, w);
                Y = exp_flushed(CMap<T>(px + n * I, w) - M);
                for (std::int64_t k = 0; k < w; ++k) s[k] += static_cast<double>(py[n * I + k]);
              }
              for (std::int64_t k = 0; k < w; ++k)
                c[k] = static_cast<T>(log ? std::log(s[k]) : s[k]);
              const CMap<T> C(c, w);
              for (std::int64_t n = 0; n < N; ++n) {
                MMap<T> Y(py + n * I, w);
                if (log)
                  Y = (CMap<T>(px + n * I, w) - M) - C;
                else
                  Y /= C;
              }
            }
          });
}

}  // namespace

namespace {

// A reduction whose kernels run in `rt`, not x's dtype: x is converted
// first (Max and Min convert back: out has x's dtype).
void reduce_as(ReduceKind kind, const Tensor& x, std::span<const std::int64_t> axes,
               const Tensor& out, std::int64_t ddof, DType rt) {
  std::int64_t n = 1;
  for (std::int64_t a : axes) n *= x.dim(a);
  if (n == 0 && (kind == ReduceKind::Max || kind == ReduceKind::Min)) {
    // No element (the ops reject this): the identity of x's own dtype, not of rt's.
    const bool mx = kind == ReduceKind::Max;
    return dtype_dispatch(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T>)
        std::fill_n(out.data<T>(), out.numel(),
                    mx ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max());
    });
  }
  const Tensor xr = empty(x.shape(), rt);
  ::ms::detail::copy_convert(x, xr);
  if (kind == ReduceKind::Max || kind == ReduceKind::Min) {  // out has x's dtype
    const Tensor outr = empty(out.shape(), rt);
    reduce(kind, xr, axes, outr, ddof);
    ::ms::detail::copy_convert(outr, out);  // exact: every value came from x's dtype
  } else {
    reduce(kind, xr, axes, out, ddof);
  }
}

// The floating-point reductions: mean, variance and standard deviation (two
// passes: the mean, then the squared deviations), log-sum-exp (the max, then
// the shifted sum). `n`: elements per output.
void reduce_float(ReduceKind kind, DType dtype, const Plan& pl, std::int64_t n, const Tensor& out,
                  std::int64_t ddof) {
  const auto nout = static_cast<std::size_t>(out.numel());
  switch (kind) {
    case ReduceKind::Mean:
      return dispatch_float(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        MeanR<T, T> r;
        r.n = n;
        run(r, pl, out.data<T>());
      });
    case ReduceKind::Var:
    case ReduceKind::Std:
      return dispatch_float(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<double> mu(nout);
        MeanR<T, double> mr;
        mr.n = n;
        run(mr, pl, mu.data());
        SqDevR<T> r;
        r.n = n;
        r.ddof = ddof;
        r.take_sqrt = kind == ReduceKind::Std;
        run(r, pl, out.data<T>(), mu.data());
      });
    case ReduceKind::LogSumExp:
      return dispatch_float(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<double> m(nout);
        run(ExtremumR<T, true, double>{}, pl, m.data());
        // exp(x - max) with an infinite max would be NaN: shift by 0 instead
        // (+inf then gives +inf, all -inf gives log(0) = -inf), as PyTorch.
        for (double& v : m)
          if (std::isinf(v)) v = 0.0;
        run(LseR<T>{}, pl, out.data<T>(), m.data());
      });
    default: MS_ASSERT(false);
  }
}

}  // namespace

void reduce(ReduceKind kind, const Tensor& x, std::span<const std::int64_t> axes, const Tensor& out,
            std::int64_t ddof) {
  const DType rt = run_dtype(kind, x.dtype());
  if (rt != x.dtype()) return reduce_as(kind, x, axes, out, ddof, rt);
  const bool ordered = kind == ReduceKind::ArgMax || kind == ReduceKind::ArgMin;
  const Plan pl = make_plan(x, axes, ordered, true);
  std::int64_t n = 1;
  for (std::int64_t a : axes) n *= x.dim(a);

  switch (kind) {
    case ReduceKind::Sum:
      return dispatch_real(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run(SumR<T>{}, pl, out.data<SumOut<T>>());
      });
    case ReduceKind::Prod:
      return dispatch_real(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run(ProdR<T>{}, pl, out.data<SumOut<T>>());
      });
    case ReduceKind::Max:
      return dispatch_real(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run(ExtremumR<T, true>{}, pl, out.data<T>());
      });
    case ReduceKind::Min:
      return dispatch_real(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run(ExtremumR<T, false>{}, pl, out.data<T>());
      });
    case ReduceKind::All:
      return dispatch_bits(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run(LogicalR<T, true>{}, pl, out.data<bool>());
      });
    case ReduceKind::Any:
      return dispatch_bits(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run(LogicalR<T, false>{}, pl, out.data<bool>());
      });
    case ReduceKind::ArgMax:
      return dispatch_real(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run(ArgR<T, true>{}, pl, out.data<std::int64_t>());
      });
    case ReduceKind::ArgMin:
      return dispatch_real(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run(ArgR<T, false>{}, pl, out.data<std::int64_t>());
      });
    case ReduceKind::Mean:
    case ReduceKind::Var:
    case ReduceKind::Std:
    case ReduceKind::LogSumExp: return reduce_float(kind, x.dtype(), pl, n, out, ddof);
  }
}

void softmax(const Tensor& x_in, std::int64_t axis, const Tensor& out, bool log) {
  const Tensor x = ::ms::detail::to_dense(x_in, x_in.dtype());
  if (x.numel() == 0) return;
  std::int64_t O = 1, N = 1, I = 1;
  for (std::int64_t d = 0; d < x.rank(); ++d) (d < axis ? O : d == axis ? N : I) *= x.dim(d);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (I == 1)
      softmax_rows(x.data<T>(), out.data<T>(), O, N, log);
    else
      softmax_cols(x.data<T>(), out.data<T>(), O, N, I, log);
  });
}

void softmax_cross_entropy(const Tensor& x, const std::int64_t* labels, const Tensor& out) {
  if (x.numel() == 0) return;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_xent_rows(x.data<T>(), labels, out.data<T>(), x.dim(0), x.dim(1));
  });
}

}  // namespace ms::kernels
