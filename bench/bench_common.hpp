// bench/bench_common.hpp — what every bm_*.cpp shares: the thread setting for
// both libraries, random inputs, the LibTorch side (when MS_BENCH_TORCH), a
// result check, and the machine figures measured in the same binary (FMA peak,
// STREAM triad) that GEMM and the fused chain are compared against.
//
// Each benchmark takes the thread count as its last argument ("nt") and calls
// set_threads() first, so ms and LibTorch always run with the same setting:
//
//   static void BM_Add_Ms(benchmark::State& state) {
//     bench::set_threads(state.range(0));
//     ...
//   }
//   BENCHMARK(BM_Add_Ms)->ArgName("nt")->Arg(1)->Arg(2)->UseRealTime();
#pragma once

#include <benchmark/benchmark.h>
#include <link.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ms/kernels/gemm.hpp"
#include "ms/ms.hpp"
#include "openblas_core.hpp"

#ifndef MS_BENCH_TORCH
#define MS_BENCH_TORCH 0
#endif

#if MS_BENCH_TORCH
// The light LibTorch headers: tensors, ATen ops and factories (torch/torch.h
// would also pull in nn, optim and data, doubling the compile time).
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/types.h>

#include "torch_convert.hpp"
#endif

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace bench {

/// Sets the thread count of ms (its OpenMP pool and OpenBLAS) and of
/// LibTorch (ATen's OpenMP pool, the same libgomp pool here), for both sides
/// of every case, so that the two always run under the same setting.
inline void set_threads(std::int64_t n) {
  ms::set_num_threads(static_cast<int>(n));
#if MS_BENCH_TORCH
  at::set_num_threads(static_cast<int>(n));
#endif
}

/// A float32 ms tensor of the given shape with uniform values in [lo, hi),
/// from a fixed seed (so ms and LibTorch can read the same numbers).
inline ms::Tensor random_tensor(const ms::Shape& shape, std::uint32_t seed, float lo = -1.f,
                                float hi = 1.f) {
  ms::Tensor t = ms::empty(shape, ms::float32);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
  return t;
}

#if MS_BENCH_TORCH

/// Largest |ms - torch| relative to max(1, |torch|): a guard that both sides
/// compute the same thing (the benchmark is skipped with an error otherwise).
inline double max_rel_diff(const ms::Tensor& m, const torch::Tensor& t) {
  const ms::Tensor mc = m.contiguous();
  const torch::Tensor tc = t.contiguous();
  if (mc.numel() != tc.numel()) return INFINITY;
  const float* a = mc.data<float>();
  const float* b = tc.data_ptr<float>();
  double worst = 0;
  for (std::int64_t i = 0; i < mc.numel(); ++i) {
    const double d =
        std::fabs(double(a[i]) - double(b[i])) / std::max(1.0, std::fabs(double(b[i])));
    if (!(d <= worst)) worst = d;  // NaN counts as the worst
  }
  return worst;
}

/// Skips the benchmark with an error when ms and LibTorch disagree.
inline bool check_same(benchmark::State& state, const ms::Tensor& m, const torch::Tensor& t,
                       double tol) {
  const double d = max_rel_diff(m, t);
  if (d <= tol) return true;
  state.SkipWithError(
      ("ms and LibTorch results differ: max relative difference " + std::to_string(d)).c_str());
  return false;
}
#endif

/// Largest |x - ref| relative to max(1, |ref|) of two float32 ms tensors of
/// the same size (INFINITY when the sizes differ, NaN counts as the worst).
inline double max_rel_diff(const ms::Tensor& x, const ms::Tensor& ref) {
  const ms::Tensor xc = x.contiguous(), rc = ref.contiguous();
  if (xc.numel() != rc.numel()) return INFINITY;
  const float* a = xc.data<float>();
  const float* b = rc.data<float>();
  double worst = 0;
  for (std::int64_t i = 0; i < xc.numel(); ++i) {
    const double d =
        std::fabs(double(a[i]) - double(b[i])) / std::max(1.0, std::fabs(double(b[i])));
    if (!(d <= worst)) worst = d;
  }
  return worst;
}

/// Skips the benchmark with an error when two ms results disagree (e.g. a
/// jitted function against the same expression run eagerly).
inline bool check_same(benchmark::State& state, const ms::Tensor& x, const ms::Tensor& ref,
                       double tol, const char* what) {
  const double d = max_rel_diff(x, ref);
  if (d <= tol) return true;
  state.SkipWithError((std::string(what) + ": max relative difference " + std::to_string(d) +
                       " > " + std::to_string(tol))
                          .c_str());
  return false;
}

// ---------------------------------------------------------------- 20 ops on 32x32

/// One round of 5 elementwise ops: tanh(relu((x + b) * b - a)). Generic, so ms
/// (expression templates, or a trace under ms::jit) and LibTorch (eager ops)
/// run exactly the same ops in the same order.
template <class T, class X>
auto round5(const X& x, const T& a, const T& b) {
  if constexpr (std::is_same_v<T, ms::Tensor>) return ms::tanh(ms::relu((x + b) * b - a));
#if MS_BENCH_TORCH
  else
    return torch::tanh(torch::relu((x + b) * b - a));
#endif
}

/// Four rounds of add, mul, sub, relu, tanh: the 20-op elementwise chain of
/// BM_SmallChain20_* (bm_elementwise) and BM_JitChain20_* (bm_jit).
template <class T>
auto chain20(const T& a, const T& b) {
  return round5(round5(round5(round5(a, a, b), a, b), a, b), a, b);
}

// ---------------------------------------------------------------- FMA peak

/// Single-precision multiply-adds of the micro-kernel per call of fma_kernel:
/// kAcc independent accumulators (enough to cover FMA latency x pipes) of
/// kLanes floats, each updated kSteps times. The accumulators and the two
/// constants must fit the vector registers: 16 of AVX2's 16 ymm spilled to the
/// stack and measured 58 GFLOP/s on AMD Zen 3 where 8 to 14 reached 100.5
/// (3.14 GHz x 32 flop per cycle).
#if defined(__AVX512F__)
inline constexpr int kLanes = 16;
inline constexpr int kAcc = 16;
#elif defined(__AVX2__) && defined(__FMA__)
inline constexpr int kLanes = 8;
inline constexpr int kAcc = 12;
#else
inline constexpr int kLanes = 1;
inline constexpr int kAcc = 16;
#endif
inline constexpr std::int64_t kSteps = 1 << 16;

/// Name of the SIMD kernel the peak is measured with.
inline const char* fma_isa() {
#if defined(__AVX512F__)
  return "AVX-512 FMA (zmm)";
#elif defined(__AVX2__) && defined(__FMA__)
  return "AVX2 FMA (ymm)";
#else
  return "scalar fmaf";
#endif
}

/// Runs kAcc x kSteps vector FMAs on one thread; returns a value depending on
/// all of them (so nothing is optimized away). Flops: 2 * kLanes * kAcc * kSteps.
inline float fma_kernel(float seed) {
#if defined(__AVX512F__)
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (std::int64_t s = 0; s < kSteps; ++s)
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  __m512 sum = acc[0];
  for (int i = 1; i < kAcc; ++i) sum = _mm512_add_ps(sum, acc[i]);
  // Summed through memory: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized
  // inside its own intrinsics header.
  alignas(64) float lanes[kLanes];
  _mm512_store_ps(lanes, sum);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_ps(seed + float(i));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (std::int64_t s = 0; s < kSteps; ++s)
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  __m256 sum = acc[0];
  for (int i = 1; i < kAcc; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
#else
  float acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = seed + float(i);
  for (std::int64_t s = 0; s < kSteps; ++s)
    for (int i = 0; i < kAcc; ++i) acc[i] = std::fma(acc[i], 0.999999f, 1e-7f);
  float r = 0;
  for (float v : acc) r += v;
  return r;
#endif
}

/// The FMA peak of nt (1 or 2) threads in flop/s: the best of 20 runs of
/// fma_kernel, measured once per thread count and process (what the tables'
/// "fraction of peak" divides by).
inline double fma_peak(int nt) {
  static double peak[3] = {0, 0, 0};
  if (nt < 1 || nt > 2) return 0;
  if (peak[nt] == 0)
    for (int rep = 0; rep < 20; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      float r = 0;
#pragma omp parallel num_threads(nt) reduction(+ : r)
      r += fma_kernel(1.f + float(omp_get_thread_num()));
      benchmark::DoNotOptimize(r);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      peak[nt] = std::max(peak[nt], nt * 2.0 * kLanes * kAcc * kSteps / s);
    }
  return peak[nt];
}

/// BM_Peak_Fma/nt:N — the single-precision FMA peak of N threads (items/s =
/// flop/s), the reference for GEMM's "% of peak".
inline void BM_Peak_Fma(benchmark::State& state) {
  const int nt = static_cast<int>(state.range(0));
  set_threads(nt);
  for (auto _ : state) {
    float r = 0;
#pragma omp parallel num_threads(nt) reduction(+ : r)
    r += fma_kernel(1.f + float(omp_get_thread_num()));
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * nt * 2 * kLanes * kAcc * kSteps);
  state.SetLabel(fma_isa());
}

// ---------------------------------------------------------------- reading weights

/// Sums of float32 arrays read in 128-lane steps into 8 independent sums of
/// 16 lanes (GCC vectors: one AVX-512 register each here), so the loads, not
/// the additions, set the pace: the floor of a batch-1 pass that multiplies by
/// those arrays, whatever its arithmetic (BM_Mlp_ReadWeights, the read_floor
/// side of bm_generation).
class FloatReader {
 public:
  /// Reads p[0 .. n) (n rounded down to a multiple of 128), last to first
  /// with `backward`; returns the bytes read.
  std::int64_t read(const float* p, std::int64_t n, bool backward) {
    n = n / 128 * 128;
    // Sums in registers: the members, which a float store may alias, were
    // loaded and stored at every step (and 8 vectors of 64 bytes are all 16
    // of AVX2's registers): 10.7 GB/s on AMD Zen 3 where ms's batch-1 MLP read
    // the same weights at 38.
    V acc[kSums];
    std::memcpy(acc, acc_, sizeof(acc));
    for (std::int64_t s = 0; s < n; s += 128) {
      const std::int64_t i = backward ? n - 128 - s : s;
      for (int j = 0; j < 128 / kFloats; ++j) {
        V v;
        std::memcpy(&v, p + i + kFloats * j, sizeof(V));
        acc[j % kSums] += v;
      }
    }
    std::memcpy(acc_, acc, sizeof(acc));
    return n * std::int64_t(sizeof(float));
  }
  /// Keeps the sums from being optimized away.
  void keep() { benchmark::DoNotOptimize(acc_); }

 private:
  // One native vector per load, 8 independent sums.
#if defined(__AVX512F__)
  static constexpr int kFloats = 16;
#else
  static constexpr int kFloats = 8;
#endif
  static constexpr int kSums = 8;
  using V = float __attribute__((vector_size(kFloats * sizeof(float))));
  V acc_[kSums] = {};
};

// ---------------------------------------------------------------- triad

/// BM_Stream_Triad/nt:N — STREAM triad a[i] = b[i] + s * c[i] over three
/// arrays of 16M floats, a plain loop split over N threads (bytes/s counts
/// 2 reads + 1 write, as STREAM does): the memory bandwidth a fused
/// elementwise pass can hope for. The arrays are ms tensors, so they sit in
/// the same memory as the chain's operands (2 MiB pages: with a std::vector's
/// 4 KiB pages the triad moved between 20 and 41 GB/s on these VMs).
inline void BM_Stream_Triad(benchmark::State& state) {
  const int nt = static_cast<int>(state.range(0));
  set_threads(nt);
  const std::int64_t n = std::int64_t{1} << 24;
  const ms::Tensor a = ms::zeros({n}), b = ms::full({n}, 1.0), c = ms::full({n}, 2.0);
  const float s = 0.5f;
  float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const float* pc = c.data<float>();
  for (auto _ : state) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    benchmark::DoNotOptimize(pa);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 3 * std::int64_t(sizeof(float)));
}

/// The triad y[i] = a[i] + s * b[i] over [lo, hi): one vectorized loop,
/// whichever thread calls it (restrict pointers; through a lambda's captured
/// references GCC reloaded the pointers and ran 20 % slower on one thread).
inline void triad_range(float* __restrict y, const float* __restrict a, const float* __restrict b,
                        float s, std::int64_t lo, std::int64_t hi) {
  for (std::int64_t i = lo; i < hi; ++i) y[i] = a[i] + s * b[i];
}

/// A pass over 16M-float tensors against the triad over the same memory,
/// measured in pairs: each iteration times `pass()` (which returns the
/// float32 result it wrote, fresh or not) and then the triad
/// y = a + 0.5 * b into that result, on ms's pool in equal parts per
/// thread. Counters: `vs_triad`, the median over the iterations of (pass
/// GB/s) / (triad GB/s), the pass counting `pass_bytes` and the triad 3
/// arrays; `pass_GiBps` and `triad_GiBps` over the whole run.
///
/// Why pairs over one memory: on the shared VMs this is measured on, the
/// bandwidth of a process moves by up to 2x from second to second, so
/// separate benchmarks of the pass and of BM_Stream_Triad gave ratios from
/// 0.4 to 1.3 for the same code, and an ad-hoc program alternating passes
/// over separate arrays 0.66 in one process and 1.06-1.13 in others; a pair
/// takes both within ~10 ms on the same buffers. Why not OpenMP: libgomp's
/// worker spins after a region and holds the second core while the next ms
/// pass runs (in that program, a 2-thread chain after an OpenMP triad ran at
/// 0.56-0.62x it; with OMP_WAIT_POLICY=passive at 1.18x).
template <class Pass>
void versus_triad(benchmark::State& state, const ms::Tensor& a, const ms::Tensor& b, Pass&& pass,
                  std::int64_t pass_bytes) {
  using clock = std::chrono::steady_clock;
  const std::int64_t n = a.numel();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  std::vector<double> ratios;
  double pass_s = 0, triad_s = 0;
  for (auto _ : state) {
    const auto t0 = clock::now();
    ms::Tensor y = pass();
    const auto t1 = clock::now();
    float* py = y.data<float>();
    ms::kernels::parallel_for(
        n, std::int64_t{1} << 16,
        [py, pa, pb](std::int64_t lo, std::int64_t hi) { triad_range(py, pa, pb, 0.5f, lo, hi); });
    benchmark::DoNotOptimize(py);
    benchmark::ClobberMemory();
    const auto t2 = clock::now();
    const double tp = std::chrono::duration<double>(t1 - t0).count();
    const double tt = std::chrono::duration<double>(t2 - t1).count();
    pass_s += tp;
    triad_s += tt;
    ratios.push_back((double(pass_bytes) / tp) / (double(n) * 12 / tt));
  }
  if (ratios.empty()) return;
  std::nth_element(ratios.begin(), ratios.begin() + std::ptrdiff_t(ratios.size() / 2),
                   ratios.end());
  const double iters = double(ratios.size());
  state.counters["vs_triad"] = ratios[ratios.size() / 2];
  state.counters["pass_GiBps"] = double(pass_bytes) * iters / pass_s / double(1 << 30);
  state.counters["triad_GiBps"] = double(n) * 12 * iters / triad_s / double(1 << 30);
}

// ---------------------------------------------------------------- training inputs

/// Inputs of the step benchmarks (bm_train, bm_grad): kBatchPool synthetic
/// batches of shape `x_shape` (batch first; random_tensor images in [-1, 1)
/// from fixed seeds) and int32 labels uniform in 0..9, cycled through.
inline constexpr int kBatchPool = 16;
struct Batches {
  std::vector<ms::Tensor> x, y;
  Batches(const ms::Shape& x_shape, std::uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> cls(0, 9);
    for (int i = 0; i < kBatchPool; ++i) {
      x.push_back(random_tensor(x_shape, seed * 1000 + static_cast<std::uint32_t>(i)));
      ms::Tensor lab = ms::empty({x_shape[0]}, ms::int32);
      for (std::int64_t j = 0; j < x_shape[0]; ++j) lab.data<std::int32_t>()[j] = cls(gen);
      y.push_back(lab);
    }
  }
};

/// A Fashion-MNIST model's input shape at `batch`: [B, 1, 28, 28] (CNN) or [B, 784] (MLP).
inline ms::Shape input_shape(bool cnn, std::int64_t batch) {
  return cnn ? ms::Shape{batch, 1, 28, 28} : ms::Shape{batch, 784};
}

/// The arguments of a step benchmark: batch 64 (CNN) or 64 and 256 (MLP),
/// each with 1 and 2 threads, timed in real time.
inline void model_step_args(benchmark::internal::Benchmark* b, bool cnn) {
  b->ArgNames({"batch", "nt"})->UseRealTime();
  for (std::int64_t nt : {1, 2})
    for (std::int64_t batch :
         cnn ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{64, 256})
      b->Args({batch, nt});
}

#if MS_BENCH_TORCH
/// int32 ms labels as LibTorch's int64 class indices.
inline torch::Tensor torch_labels(const ms::Tensor& y) {
  torch::Tensor t = torch::empty({y.numel()}, torch::kInt64);
  for (std::int64_t j = 0; j < y.numel(); ++j)
    t.data_ptr<std::int64_t>()[j] = y.data<std::int32_t>()[j];
  return t;
}
#endif

// ---------------------------------------------------------------- context

/// Paths of the loaded BLAS libraries (to show in the run's context that ms
/// and LibTorch use the same OpenMP OpenBLAS).
inline std::string loaded_blas() {
  std::string out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("blas") != std::string::npos || name.find("lapack") != std::string::npos) {
          auto& s = *static_cast<std::string*>(data);
          s += (s.empty() ? "" : " ") + name;
        }
        return 0;
      },
      &out);
  return out.empty() ? "none" : out;
}

/// Adds the run's context (libraries, threads) to the benchmark output.
inline void add_context() {
  benchmark::AddCustomContext("ms_blas_libraries", loaded_blas());
  benchmark::AddCustomContext("openblas_core", openblas_core());
  benchmark::AddCustomContext("ms_gemm_backend", ms::kernels::gemm_backend().detail);
  benchmark::AddCustomContext("libtorch", MS_BENCH_TORCH ? "yes (same binary)" : "no");
  benchmark::AddCustomContext("fma_kernel", fma_isa());
}

}  // namespace bench

/// The main of every bm_* binary: Google Benchmark's, plus the context.
#define MS_BENCH_MAIN()                                               \
  int main(int argc, char** argv) {                                   \
    bench::use_best_openblas(argv);                                   \
    benchmark::Initialize(&argc, argv);                               \
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1; \
    bench::add_context();                                             \
    benchmark::RunSpecifiedBenchmarks();                              \
    benchmark::Shutdown();                                            \
    return 0;                                                         \
  }
