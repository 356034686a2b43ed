// The random tensor functions (ms/ops/random.hpp) and the Random op.
//
// Every function validates its arguments, reserves the Philox blocks it needs
// with one Generator::step, then fills element i from block `offset + i / k`
// (k elements per block) inside kernels::parallel_for. A chunk that starts in
// the middle of a block recomputes that block and keeps only its own elements,
// so any chunking, hence any thread count, yields the same numbers.
//
// A random function called while tracing records one `Random` node (the
// entry ops::Random) whose attribute `fn` names its draw (a closure over the
// function's arguments and its generator, kept by id in the table of host
// callbacks). The node's data inputs are the tensors the draw reads (dropout's
// input for its shape, bernoulli's probabilities); a last input chains it to
// the trace's previous Random node, so that every execution order (bfs, dfs)
// draws in the order the function called them, which is what makes a jitted
// function draw the eager function's numbers.
#include "ms/ops/random.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <span>
#include <string_view>
#include <vector>

#include "ms/core/error.hpp"
#include "ms/kernels/parallel.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/host.hpp"
#include "ms/ops/op.hpp"

namespace ms {

// ------------------------------------------------------------------ under a trace
namespace {

/// A random function's work at run time: the result of shape `shape` (the
/// node's, known when a dynamic-shape graph runs) from the concrete tensors it reads.
using RandomDrawFn = std::function<Tensor(std::span<const Tensor> inputs, const Shape& shape)>;

/// A random function called while tracing.
struct TracedRandom {
  std::string label;           ///< names the node in dumps, e.g. "uniform(low=0, high=1)"
  std::vector<Tensor> inputs;  ///< tensors the draw reads at run time (symbolic or concrete)
  DType dtype = float32;       ///< the draw's dtype
  Shape shape;                 ///< the draw's shape when `inputs` is empty, else inputs[0]'s
  RandomDrawFn draw;
  /// Set instead of `draw` for a generator created in the trace: the numbers,
  /// drawn at trace time (a constant of the graph, no Random node).
  Tensor drawn = {};
  /// Dropout: the draw is the bool drop mask of inputs[0], and the result is
  /// where(mask, 0, inputs[0] * scale) computed in float32 (float64) and cast back.
  std::optional<double> dropout_scale = {};
};

struct Draw {
  RandomDrawFn fn;
  std::string label;
};

std::shared_ptr<const Draw> find_draw(std::int64_t id) {
  return std::static_pointer_cast<const Draw>(ops::detail::find_closure(id, "random"));
}

// The trace's last Random node (its output), to chain the next one to.
struct LastDraw {
  std::uint32_t trace = 0;
  Tensor value;
};
thread_local LastDraw t_last;

// where(drop, 0, x * scale) in float32 (float64): eager dropout's numbers.
Tensor dropout_result(const TracedRandom& r, const Tensor& drawn) {
  static const ops::OpDef& mul = ops::op("mul");
  static const ops::OpDef& where = ops::op("where");
  const Tensor& x = r.inputs[0];
  const DType ct = x.dtype() == float64 ? float64 : float32;
  const Tensor kept = ops::call1(mul, {x.to(ct), full({}, *r.dropout_scale, ct)});
  return ops::call1(where, {drawn, zeros({}, ct), kept}).to(x.dtype());
}

Tensor record(TracedRandom r) {
  ops::Tracer* tracer = ops::active_tracer();
  MS_CHECK(tracer != nullptr, ValueError, r.label, ": recorded without an active trace");
  if (r.drawn.defined()) return r.dropout_scale ? dropout_result(r, r.drawn) : r.drawn;
  ops::Random::Attrs a;
  a.fn = ops::detail::keep_closure(std::make_shared<const Draw>(Draw{std::move(r.draw), r.label}));
  a.label = r.label;
  a.dtype = r.dtype;
  a.data_inputs = static_cast<std::int64_t>(r.inputs.size());
  if (a.data_inputs == 0) a.shape = r.shape.to_vector();
  std::vector<Tensor> in = r.inputs;
  if (t_last.trace == tracer->trace_id() && t_last.value.defined()) in.push_back(t_last.value);
  Tensor drawn = ops::invoke<ops::Random>(std::span<const Tensor>(in), a)[0];
  t_last = {tracer->trace_id(), drawn};
  return r.dropout_scale ? dropout_result(r, drawn) : drawn;
}

}  // namespace

// ------------------------------------------------------------------ helpers
namespace {

constexpr std::int64_t kGrain = 16384;
constexpr double kInv2Pow32 = 1.0 / 4294967296.0;
constexpr double kInv2Pow53 = 1.0 / 9007199254740992.0;

using Words = std::array<std::uint32_t, 4>;

Words philox_block(std::uint64_t seed, std::uint64_t index) {
  return philox4x32_10(
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0u, 0u},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

/// [0, 1) with 24 random bits: exact in float.
float u24(std::uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }
/// [0, 1) with 32 random bits.
double u32(std::uint32_t w) { return w * kInv2Pow32; }
/// (0, 1) with 32 random bits (never 0: safe for log).
double u32_open(std::uint32_t w) { return (w + 0.5) * kInv2Pow32; }
std::uint64_t bits64(std::uint32_t hi, std::uint32_t lo) {
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}
/// [0, 1) with 53 random bits.
double u53(std::uint32_t hi, std::uint32_t lo) {
  return static_cast<double>(bits64(hi, lo) >> 11) * kInv2Pow53;
}
/// (0, 1) with 53 random bits.
double u53_open(std::uint32_t hi, std::uint32_t lo) {
  return (static_cast<double>(bits64(hi, lo) >> 11) + 0.5) * kInv2Pow53;
}

std::uint64_t blocks_for(std::int64_t n, int per_block) {
  return static_cast<std::uint64_t>((n + per_block - 1) / per_block);
}

/// Calls f(i0, j0, j1, words) for each Philox block touched by [0, n): the
/// block holds elements i0 .. i0 + EPB - 1 and this call owns j in [j0, j1).
template <int EPB, class F>
void for_blocks(std::int64_t n, Generator::Draw d, F&& f) {
  kernels::parallel_for(n, kGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t blk = b / EPB; blk * EPB < e; ++blk) {
      const Words w = philox_block(d.seed, d.offset + static_cast<std::uint64_t>(blk));
      const std::int64_t i0 = blk * EPB;
      const int j0 = static_cast<int>(std::max<std::int64_t>(b - i0, 0));
      const int j1 = static_cast<int>(std::min<std::int64_t>(e - i0, EPB));
      f(i0, j0, j1, w);
    }
  });
}

/// While tracing: a node that draws `draw()` each time the graph runs; for a
/// generator made in the trace, the numbers drawn now (a graph constant).
Tensor traced(std::string label, const Shape& shape, DType dtype, const Generator& gen,
              std::function<Tensor(const Shape&)> draw) {
  if (gen.created_in_trace()) {
    const detail::TracingSuspend eager;
    return draw(shape);
  }
  TracedRandom r;
  r.label = std::move(label);
  r.dtype = dtype;
  r.shape = shape;
  r.draw = [d = std::move(draw)](std::span<const Tensor>, const Shape& s) { return d(s); };
  return record(std::move(r));
}

void check_float_dtype(std::string_view what, DType dtype) {
  MS_CHECK(dtype_is_float(dtype), TypeError, what,
           ": dtype must be a floating type (Float16, "
           "BFloat16, Float32, Float64), got ",
           dtype);
}

void check_finite(std::string_view what, std::string_view arg, double v) {
  MS_CHECK(std::isfinite(v), ValueError, what, ": '", arg, "' must be finite, got ", v);
}

/// A tensor computed in float32 or float64 then rounded to `dtype` (half types).
DType float_compute(DType dtype) { return dtype == float64 ? float64 : float32; }
Tensor finish(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

// Standard normal CDF, accurate in the lower tail (erfc keeps relative precision).
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

// Inverse of the standard normal CDF: Acklam's rational approximation (relative
// error < 1.2e-9) refined by one Halley step on erfc, which brings it to about
// double precision. Exact for p == 0 and p == 1 (-inf, +inf).
double normal_quantile(double p) {
  if (p <= 0.0) return -std::numeric_limits<double>::infinity();
  if (p >= 1.0) return std::numeric_limits<double>::infinity();
  constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                          1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                          6.680131188771972e+01, -1.328068155288572e+01};
  constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                          -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                          3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  double x = 0.0;
  if (p < kLow) {
    const double q = std::sqrt(-2.0 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else if (p <= 1.0 - kLow) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  } else {
    const double q = std::sqrt(-2.0 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  }
  // Halley: e = Phi(x) - p; u = e / phi(x); x -= u / (1 + x u / 2).
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
  if (pdf > 0.0 && std::isfinite(pdf)) {
    const double u = (normal_cdf(x) - p) / pdf;
    const double refined = x - u / (1.0 + 0.5 * x * u);
    if (std::isfinite(refined)) x = refined;
  }
  return x;
}

/// The largest T below `high` (a float result rounded up to `high` goes one step back).
template <class T>
T below(T x, double high, double low) {
  if (static_cast<double>(x) < high) return x;
  const T down = std::nextafter(static_cast<T>(high), -std::numeric_limits<T>::infinity());
  const T v = static_cast<double>(down) < high
                  ? down
                  : std::nextafter(down, -std::numeric_limits<T>::infinity());
  return std::max(v, static_cast<T>(low));
}

/// Largest n such that 0 .. n-1 are exact in `dtype` (integers and floats).
std::int64_t exact_count(DType dtype) {
  switch (dtype) {
    case DType::Float16: return std::int64_t{1} << 11;
    case DType::BFloat16: return std::int64_t{1} << 8;
    case DType::Float32: return std::int64_t{1} << 24;
    case DType::Float64: return std::int64_t{1} << 53;
    default: break;
  }
  return dtype_dispatch(dtype, [](auto tag) -> std::int64_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if constexpr (sizeof(T) >= 8)
        return std::numeric_limits<std::int64_t>::max();
      else
        return static_cast<std::int64_t>(std::numeric_limits<T>::max()) + 1;
    } else {
      return 0;
    }
  });
}

}  // namespace

// ------------------------------------------------------------------ uniform

Tensor uniform(const Shape& shape, double low, double high, DType dtype) {
  return uniform(shape, low, high, default_generator(), dtype);
}

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  constexpr std::string_view kWhat = "uniform";
  check_float_dtype(kWhat, dtype);
  check_finite(kWhat, "low", low);
  check_finite(kWhat, "high", high);
  MS_CHECK(low < high, ValueError, "uniform: expected low < high, got low = ", low,
           " and high = ", high);
  MS_CHECK(std::isfinite(high - low), ValueError, "uniform: the range high - low = ", high, " - ",
           low, " overflows a double");
  const std::int64_t n = shape_numel(shape, kWhat);
  if (detail::tracing_active())
    return traced(detail::str_cat("uniform(low=", low, ", high=", high, ")"), shape, dtype, gen,
                  [=, g = &gen](const Shape& s) { return uniform(s, low, high, *g, dtype); });
  const DType ct = float_compute(dtype);
  Tensor out = empty(shape, ct);
  const double range = high - low;
  if (ct == float32) {
    float* o = out.data<float>();
    for_blocks<4>(n, gen.step(blocks_for(n, 4)),
                  [&](std::int64_t i0, int j0, int j1, const Words& w) {
                    for (int j = j0; j < j1; ++j)
                      o[i0 + j] = below(static_cast<float>(low + u24(w[j]) * range), high, low);
                  });
  } else {
    double* o = out.data<double>();
    for_blocks<2>(n, gen.step(blocks_for(n, 2)),
                  [&](std::int64_t i0, int j0, int j1, const Words& w) {
                    for (int j = j0; j < j1; ++j)
                      o[i0 + j] = below(low + u53(w[2 * j], w[2 * j + 1]) * range, high, low);
                  });
  }
  return finish(out, dtype);
}

// ------------------------------------------------------------------ normal

Tensor normal(const Shape& shape, double mean, double std, DType dtype) {
  return normal(shape, mean, std, default_generator(), dtype);
}

Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype) {
  constexpr std::string_view kWhat = "normal";
  check_float_dtype(kWhat, dtype);
  check_finite(kWhat, "mean", mean);
  check_finite(kWhat, "std", std);
  MS_CHECK(std >= 0.0, ValueError, "normal: expected std >= 0, got std = ", std);
  const std::int64_t n = shape_numel(shape, kWhat);
  if (detail::tracing_active())
    return traced(detail::str_cat("normal(mean=", mean, ", std=", std, ")"), shape, dtype, gen,
                  [=, g = &gen](const Shape& s) { return normal(s, mean, std, *g, dtype); });
  const DType ct = float_compute(dtype);
  Tensor out = empty(shape, ct);
  constexpr double kTwoPi = 2.0 * std::numbers::pi;
  // Box-Muller: (u1, u2) -> r (cos t, sin t), r = sqrt(-2 ln u1), t = 2 pi u2.
  if (ct == float32) {
    float* o = out.data<float>();
    for_blocks<4>(n, gen.step(blocks_for(n, 4)),
                  [&](std::int64_t i0, int j0, int j1, const Words& w) {
                    double z[4];
                    for (int k = 0; k < 2; ++k) {
                      const double r = std::sqrt(-2.0 * std::log(u32_open(w[2 * k])));
                      const double t = kTwoPi * u32(w[2 * k + 1]);
                      z[2 * k] = r * std::cos(t);
                      z[2 * k + 1] = r * std::sin(t);
                    }
                    for (int j = j0; j < j1; ++j) o[i0 + j] = static_cast<float>(mean + std * z[j]);
                  });
  } else {
    double* o = out.data<double>();
    for_blocks<2>(n, gen.step(blocks_for(n, 2)),
                  [&](std::int64_t i0, int j0, int j1, const Words& w) {
                    const double r = std::sqrt(-2.0 * std::log(u53_open(w[0], w[1])));
                    const double t = kTwoPi * u53(w[2], w[3]);
                    const double z[2] = {r * std::cos(t), r * std::sin(t)};
                    for (int j = j0; j < j1; ++j) o[i0 + j] = mean + std * z[j];
                  });
  }
  return finish(out, dtype);
}

// ------------------------------------------------------------------ truncated normal

Tensor truncated_normal(const Shape& shape, double mean, double std, double a, double b,
                        DType dtype) {
  return truncated_normal(shape, mean, std, a, b, default_generator(), dtype);
}

Tensor truncated_normal(const Shape& shape, double mean, double std, double a, double b,
                        Generator& gen, DType dtype) {
  constexpr std::string_view kWhat = "truncated_normal";
  check_float_dtype(kWhat, dtype);
  check_finite(kWhat, "mean", mean);
  check_finite(kWhat, "std", std);
  MS_CHECK(std >= 0.0, ValueError, "truncated_normal: expected std >= 0, got std = ", std);
  MS_CHECK(!std::isnan(a) && !std::isnan(b) && a < b, ValueError,
           "truncated_normal: expected bounds a < b, got a = ", a, " and b = ", b);
  const std::int64_t n = shape_numel(shape, kWhat);
  if (detail::tracing_active())
    return traced(
        detail::str_cat("truncated_normal(mean=", mean, ", std=", std, ", a=", a, ", b=", b, ")"),
        shape, dtype, gen,
        [=, g = &gen](const Shape& s) { return truncated_normal(s, mean, std, a, b, *g, dtype); });
  const DType ct = float_compute(dtype);
  Tensor out = empty(shape, ct);

  // Standardized bounds; an interval in the upper half is mirrored into the
  // lower half, where the CDF keeps its relative precision (far tails work).
  double alpha = std > 0 ? (a - mean) / std : -std::numeric_limits<double>::infinity();
  double beta = std > 0 ? (b - mean) / std : std::numeric_limits<double>::infinity();
  const bool flip = alpha + beta > 0;
  if (flip) {
    const double t = alpha;
    alpha = -beta;
    beta = -t;
  }
  const double pa = normal_cdf(alpha), pb = normal_cdf(beta);
  const auto sample = [&](double u) {
    double x = std::clamp(normal_quantile(pa + u * (pb - pa)), alpha, beta);
    if (flip) x = -x;
    return std::clamp(mean + std * x, a, b);
  };
  if (ct == float32) {
    float* o = out.data<float>();
    for_blocks<4>(n, gen.step(blocks_for(n, 4)),
                  [&](std::int64_t i0, int j0, int j1, const Words& w) {
                    for (int j = j0; j < j1; ++j)
                      o[i0 + j] = static_cast<float>(sample(u32_open(w[j])));
                  });
  } else {
    double* o = out.data<double>();
    for_blocks<2>(n, gen.step(blocks_for(n, 2)),
                  [&](std::int64_t i0, int j0, int j1, const Words& w) {
                    for (int j = j0; j < j1; ++j)
                      o[i0 + j] = sample(u53_open(w[2 * j], w[2 * j + 1]));
                  });
  }
  return finish(out, dtype);
}

// ------------------------------------------------------------------ bernoulli

namespace {
void check_real_dtype(std::string_view what, DType dtype) {
  MS_CHECK(!dtype_is_complex(dtype) && dtype != int4, TypeError, what,
           ": dtype must be Bool, an integer or a floating type, got ", dtype);
}
}  // namespace

Tensor bernoulli(const Shape& shape, double p, DType dtype) {
  return bernoulli(shape, p, default_generator(), dtype);
}

Tensor bernoulli(const Shape& shape, double p, Generator& gen, DType dtype) {
  constexpr std::string_view kWhat = "bernoulli";
  check_real_dtype(kWhat, dtype);
  MS_CHECK(p >= 0.0 && p <= 1.0, ValueError, "bernoulli: expected p in [0, 1], got p = ", p);
  const std::int64_t n = shape_numel(shape, kWhat);
  if (detail::tracing_active())
    return traced(detail::str_cat("bernoulli(p=", p, ")"), shape, dtype, gen,
                  [=, g = &gen](const Shape& s) { return bernoulli(s, p, *g, dtype); });
  Tensor out = empty(shape, dtype);
  const Generator::Draw d = gen.step(blocks_for(n, 4));
  dtype_dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = out.data<T>();
    const T one = scalar_cast<T>(1), zero = scalar_cast<T>(0);
    for_blocks<4>(n, d, [&](std::int64_t i0, int j0, int j1, const Words& w) {
      for (int j = j0; j < j1; ++j) o[i0 + j] = u32(w[j]) < p ? one : zero;
    });
  });
  return out;
}

Tensor bernoulli(const Tensor& probs) { return bernoulli(probs, default_generator()); }

Tensor bernoulli(const Tensor& probs, Generator& gen) {
  MS_CHECK(probs.defined(), ValueError, "bernoulli: probs is an undefined tensor");
  MS_CHECK(dtype_is_float(probs.dtype()), TypeError,
           "bernoulli: probs must be a floating tensor, got dtype ", probs.dtype());
  if (detail::tracing_active()) {
    MS_CHECK(!gen.created_in_trace(), ValueError,
             "bernoulli: a Generator created inside the traced function cannot draw with traced "
             "probabilities (they are known only when the graph runs); create it outside");
    // The probabilities are read (and checked) when the graph runs.
    TracedRandom r;
    r.label = "bernoulli(probs)";
    r.inputs = {probs};
    r.dtype = probs.dtype();
    r.draw = [g = &gen](std::span<const Tensor> in, const Shape&) { return bernoulli(in[0], *g); };
    return record(std::move(r));
  }
  const Tensor pd = probs.to(float64);
  const double* p = pd.data<double>();
  const std::int64_t n = pd.numel();
  for (std::int64_t i = 0; i < n; ++i)  // validated before the parallel region
    MS_CHECK(p[i] >= 0.0 && p[i] <= 1.0, ValueError, "bernoulli: probs must lie in [0, 1], got ",
             p[i], " at flat index ", i);
  Tensor out = empty(probs.shape(), probs.dtype());
  const Generator::Draw d = gen.step(blocks_for(n, 4));
  dtype_dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16_t> ||
                  std::is_same_v<T, bfloat16_t>) {
      T* o = out.data<T>();
      const T one = scalar_cast<T>(1), zero = scalar_cast<T>(0);
      for_blocks<4>(n, d, [&](std::int64_t i0, int j0, int j1, const Words& w) {
        for (int j = j0; j < j1; ++j) o[i0 + j] = u32(w[j]) < p[i0 + j] ? one : zero;
      });
    }
  });
  return out;
}

// ------------------------------------------------------------------ randint

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, DType dtype) {
  return randint(low, high, shape, default_generator(), dtype);
}

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator& gen,
               DType dtype) {
  constexpr std::string_view kWhat = "randint";
  MS_CHECK(dtype_is_int(dtype) && dtype != int4, TypeError,
           "randint: dtype must be an integer type, got ", dtype);
  MS_CHECK(low < high, ValueError, "randint: expected low < high, got low = ", low,
           " and high = ", high);
  const std::int64_t n = shape_numel(shape, kWhat);
  const bool fits = dtype_dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if constexpr (std::is_unsigned_v<T>)
        return low >= 0 && static_cast<std::uint64_t>(high - 1) <= std::numeric_limits<T>::max();
      else
        return low >= std::numeric_limits<T>::min() && high - 1 <= std::numeric_limits<T>::max();
    } else {
      return false;
    }
  });
  MS_CHECK(fits, ValueError, "randint: [low, high) = [", low, ", ", high, ") does not fit dtype ",
           dtype);
  if (detail::tracing_active())
    return traced(detail::str_cat("randint(low=", low, ", high=", high, ")"), shape, dtype, gen,
                  [=, g = &gen](const Shape& s) { return randint(low, high, s, *g, dtype); });
  Tensor out = empty(shape, dtype);
  // high - low as an unsigned count: exact even when it exceeds INT64_MAX.
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  dtype_dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      T* o = out.data<T>();
      const Generator::Draw d = gen.step(blocks_for(n, 2));
      for_blocks<2>(n, d, [&](std::int64_t i0, int j0, int j1, const Words& w) {
        for (int j = j0; j < j1; ++j) {
          // Multiply-shift (Lemire) on 64 random bits: bias <= range / 2^64.
          const auto r = static_cast<std::uint64_t>(
              (static_cast<unsigned __int128>(bits64(w[2 * j], w[2 * j + 1])) * range) >> 64);
          o[i0 + j] = static_cast<T>(static_cast<std::uint64_t>(low) + r);
        }
      });
    }
  });
  return out;
}

// ------------------------------------------------------------------ randperm

Tensor randperm(std::int64_t n, DType dtype) { return randperm(n, default_generator(), dtype); }

Tensor randperm(std::int64_t n, Generator& gen, DType dtype) {
  MS_CHECK(n >= 0, ValueError, "randperm: expected n >= 0, got n = ", n);
  MS_CHECK((dtype_is_int(dtype) || dtype_is_float(dtype)) && dtype != int4, TypeError,
           "randperm: dtype must be an integer or floating type, got ", dtype);
  MS_CHECK(n <= exact_count(dtype), ValueError, "randperm: n = ", n, " is too large for dtype ",
           dtype, " (at most ", exact_count(dtype), " distinct values)");
  if (detail::tracing_active())
    return traced(detail::str_cat("randperm(n=", n, ")"), Shape{n}, dtype, gen,
                  [=, g = &gen](const Shape& s) { return randperm(s[0], *g, dtype); });
  Tensor perm = empty(Shape{n}, int64);
  std::int64_t* v = perm.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) v[i] = i;
  // Fisher-Yates from the back; step i draws j in [0, i] from element i of the
  // draw (2 per block), so the numbers do not depend on anything but seed and offset.
  const Generator::Draw d = gen.step(blocks_for(n, 2));
  for (std::int64_t i = n - 1; i > 0; --i) {
    const Words w = philox_block(d.seed, d.offset + static_cast<std::uint64_t>(i / 2));
    const int k = static_cast<int>(i % 2);
    const auto j =
        static_cast<std::int64_t>((static_cast<unsigned __int128>(bits64(w[2 * k], w[2 * k + 1])) *
                                   static_cast<std::uint64_t>(i + 1)) >>
                                  64);
    std::swap(v[i], v[j]);
  }
  return dtype == int64 ? perm : perm.to(dtype);
}

// ------------------------------------------------------------------ dropout

Tensor dropout(const Tensor& x, double p, bool training) {
  return dropout(x, p, training, default_generator());
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  MS_CHECK(x.defined(), ValueError, "dropout: x is an undefined tensor");
  MS_CHECK(dtype_is_float(x.dtype()), TypeError, "dropout: x must be a floating tensor, got dtype ",
           x.dtype());
  MS_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout: expected p in [0, 1], got p = ", p);
  if (!training || p == 0.0) return x;
  if (detail::tracing_active()) {
    // The drop mask is drawn as the eager path draws it (bernoulli(p) is
    // "u < p" on the same 32-bit words; p == 1 draws nothing).
    TracedRandom r;
    r.label = detail::str_cat("dropout(p=", p, ")");
    r.inputs = {x};
    r.dtype = bool_;
    r.dropout_scale = 1.0 / (1.0 - p);
    r.draw = [p, g = &gen](std::span<const Tensor>, const Shape& s) {
      return p == 1.0 ? full(s, 1.0, bool_) : bernoulli(s, p, *g, bool_);
    };
    if (gen.created_in_trace()) {
      // A local generator: the mask is drawn now, a constant of the graph.
      const detail::TracingSuspend eager;
      r.drawn = r.draw({}, x.shape());
      r.draw = {};
    }
    return record(std::move(r));
  }
  if (p == 1.0) return zeros(x.shape(), x.dtype());
  const DType ct = float_compute(x.dtype());
  const Tensor xc = x.to(ct);  // contiguous, float32 for half types
  const std::int64_t n = xc.numel();
  Tensor out = empty(x.shape(), ct);
  const Generator::Draw d = gen.step(blocks_for(n, 4));
  dtype_dispatch(ct, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const T* in = xc.data<T>();
      T* o = out.data<T>();
      const T scale = static_cast<T>(1.0 / (1.0 - p));
      for_blocks<4>(n, d, [&](std::int64_t i0, int j0, int j1, const Words& w) {
        for (int j = j0; j < j1; ++j) o[i0 + j] = u32(w[j]) >= p ? in[i0 + j] * scale : T(0);
      });
    }
  });
  return finish(out, x.dtype());
}

// ------------------------------------------------------------------ the Random entry

namespace ops {

std::vector<TensorType> Random::infer(const Attrs& a, std::span<const TensorType> in) {
  MS_CHECK(a.data_inputs >= 0 && static_cast<std::size_t>(a.data_inputs) <= in.size() &&
               in.size() <= static_cast<std::size_t>(a.data_inputs) + 1,
           ValueError, "random: ", in.size(), " inputs for ", a.data_inputs, " data inputs");
  if (a.data_inputs > 0) return {{a.dtype, in[0].shape}};
  MS_CHECK(a.shape.has_value(), ValueError,
           "random: attribute 'shape' is required when there are no data inputs");
  return {{a.dtype, Shape(*a.shape)}};
}

std::vector<Tensor> Random::eval(const Attrs& a, std::span<const Tensor> in) {
  const std::vector<TensorType> want = infer(a, types_of(in));
  const auto d = find_draw(a.fn);
  Tensor out = d->fn(in.first(static_cast<std::size_t>(a.data_inputs)), want[0].shape);
  MS_CHECK(out.dtype() == want[0].dtype && out.shape() == want[0].shape, ValueError, d->label,
           ": drew ", out.dtype(), out.shape(), " where the graph expects ", want[0].dtype,
           want[0].shape);
  return {std::move(out)};
}

// A draw from a fresh generator of a fixed seed: the same numbers on every
// run, so that eager, jit O0 and jit O1 compare bitwise.
Samples Random::samples() {
  const auto keep = [](std::string label, RandomDrawFn fn) {
    return detail::keep_closure(std::make_shared<const Draw>(Draw{std::move(fn), label}));
  };
  const std::int64_t u = keep("uniform(seed 7)", [](std::span<const Tensor>, const Shape& s) {
    Generator g(7);
    return uniform(s, 0.0, 1.0, g);
  });
  const std::int64_t like =
      keep("bernoulli(probs, seed 3)", [](std::span<const Tensor> in, const Shape&) {
        Generator g(3);
        return bernoulli(in[0], g);
      });
  Generator g7(7);
  Generator g3(3);
  const Tensor probs = full({2, 3}, 0.5, float64);
  return {
      .cases = {detail::sample(
                    "uniform [2, 3]", {},
                    Attrs{.fn = u, .label = "u", .shape = std::vector<std::int64_t>{2, 3}},
                    {uniform({2, 3}, 0.0, 1.0, g7)}),
                detail::sample("bernoulli of probs", {probs},
                               Attrs{.fn = like, .label = "b", .dtype = float64, .data_inputs = 1},
                               {bernoulli(probs, g3)})},
      .errors = {detail::error_sample("a data input missing", {}, Attrs{.fn = u, .data_inputs = 1},
                                      "ms::ValueError", "random: 0 inputs for 1 data inputs"),
                 detail::error_sample("no such draw", {},
                                      Attrs{.fn = -7, .shape = std::vector<std::int64_t>{2}},
                                      "ms::ValueError", "random")}};
}

namespace detail {
void register_random_ops();
void register_random_ops() { register_entries<Random>(); }
}  // namespace detail

}  // namespace ops
}  // namespace ms
