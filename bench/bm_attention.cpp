// bench/bm_attention.cpp — forward + backward of causal self-attention at the
// shapes of examples/char_lm (batch 4, 6 heads, head size 32) for T = 128,
// 512 and 1024: ms's fused op against the naive composition, in ms and in
// LibTorch 1.13 (which has no fused attention).
//
//   BM_Attention/ms_fused/T:512/nt:N   ms::scaled_dot_product_attention(q, k, v,
//                                      {.causal = true}), gradients by ms::grad
//   BM_Attention/ms_naive/T:512/nt:N   matmul(q, k^T) * scale, masked_fill(upper
//                                      triangle, -inf), softmax, matmul(., v),
//                                      gradients by ms::grad
//   BM_Attention/torch_naive/T:512/nt:N  the same ops in LibTorch, gradients by
//                                      torch::autograd::grad
//
// One iteration: the loss sum(attention(q, k, v) * w) (w fixed random [B, H,
// T, E], the same for every side) and its gradients with respect to q, k and
// v. The ms sides run under ms::jit (the function traced once with ms::grad
// inside, then cache hits); the causal mask of the naive sides ([T, T] Bool,
// true above the diagonal) is an argument, made once. Before timing, every
// side's gradients are checked against ms_fused's (max relative difference
// 1e-4, the benchmark fails otherwise), and each ms side must have compiled
// exactly once after its loop.
//
// Counters:
//   of_peak   flop/s over the float32 FMA peak of the same thread count
//             (bench::fma_peak, measured in this process). Flops count the
//             useful causal work, the same for every side: forward 2 B H T^2 E
//             (the two products over the lower triangle), backward 2.5x the
//             forward (FlashAttention's convention), 7 B H T^2 E in all.
//   peak_MiB  the largest number of bytes of live tensor storage during one
//             forward + backward, above what was live before (the inputs and
//             the mask are excluded), measured once before the timed loop.
//             ms: ms::memory_stats().peak_bytes (after memory_stats_reset_peak)
//             minus live_bytes taken before the jitted function was made, so
//             the memory plan's arena that the compiled graph keeps is
//             included. LibTorch: the same count kept by a counting wrapper
//             around c10's CPU allocator (installed for that one call only).
//             Neither counts blocks an allocator keeps cached for reuse.
//   score_MiB one [B, H, T, T] float32 tensor, the unit the naive sides'
//             memory grows in.
// bench/transformer_table.sh runs the rows and prints the ratios.
#include "bench_common.hpp"

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#if MS_BENCH_TORCH
#include <c10/core/CPUAllocator.h>
#include <torch/csrc/autograd/autograd.h>
#endif

namespace {

constexpr std::int64_t kBatch = 4, kHeads = 6, kHeadDim = 32;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kTol = 1e-4;

enum Side : std::int64_t { kMsFused = 0, kMsNaive = 1, kTorchNaive = 2 };
const char* const kSideNames[] = {"ms_fused", "ms_naive", "torch_naive"};

double flops(std::int64_t t) {
  return 7.0 * double(kBatch * kHeads) * double(t) * double(t) * double(kHeadDim);
}

double scale() { return 1.0 / std::sqrt(double(kHeadDim)); }

/// The inputs of one T: q, k, v, the loss weights w ([B, H, T, E], fixed
/// seeds) and the causal mask (Bool [T, T], true above the diagonal).
struct Inputs {
  ms::Tensor q, k, v, w, mask;
  explicit Inputs(std::int64_t t) {
    const ms::Shape s{kBatch, kHeads, t, kHeadDim};
    q = bench::random_tensor(s, 1);
    k = bench::random_tensor(s, 2);
    v = bench::random_tensor(s, 3);
    w = bench::random_tensor(s, 4);
    mask = ms::triu(ms::ones({t, t}, ms::bool_), {.diagonal = 1});
  }
};

ms::Tensor fused_loss(const ms::Tensor& q, const ms::Tensor& k, const ms::Tensor& v,
                      const ms::Tensor& w) {
  return ms::sum(ms::scaled_dot_product_attention(q, k, v, {.causal = true}) * w);
}

ms::Tensor naive_loss(const ms::Tensor& q, const ms::Tensor& k, const ms::Tensor& v,
                      const ms::Tensor& w, const ms::Tensor& mask) {
  const ms::Tensor s = ms::matmul(q, ms::transpose(k, -2, -1)) * scale();
  const ms::Tensor p =
      ms::softmax(ms::masked_fill(s, mask, -std::numeric_limits<double>::infinity()), -1);
  return ms::sum(ms::matmul(p, v) * w);
}

/// The jitted gradients (q, k, v) of one ms side.
auto ms_step(Side side) {
  return ms::jit([side](const ms::Tensor& q, const ms::Tensor& k, const ms::Tensor& v,
                        const ms::Tensor& w, const ms::Tensor& mask) {
    if (side == kMsFused) return ms::grad(fused_loss, {.position = {0, 1, 2}})(q, k, v, w);
    return ms::grad(naive_loss, {.position = {0, 1, 2}})(q, k, v, w, mask);
  });
}

/// The reference gradients: ms_fused's, eager.
std::vector<ms::Tensor> reference(const Inputs& in) {
  return ms::grad(fused_loss, {.position = {0, 1, 2}})(in.q, in.k, in.v, in.w);
}

/// Fails the benchmark unless each of `got` is within kTol of `want`'s.
template <class G>
bool check_grads(benchmark::State& state, const std::vector<ms::Tensor>& want, const G& got) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = bench::max_rel_diff(want[i], got[i]);
    if (!(d <= kTol)) {
      state.SkipWithError(
          ("gradient " + std::to_string(i) + " differs from ms_fused's by " + std::to_string(d))
              .c_str());
      return false;
    }
  }
  return true;
}

void set_counters(benchmark::State& state, std::int64_t t, int nt, double peak_bytes) {
  state.counters["of_peak"] = benchmark::Counter(
      double(state.iterations()) * flops(t) / bench::fma_peak(nt), benchmark::Counter::kIsRate);
  state.counters["peak_MiB"] = peak_bytes / kMiB;
  state.counters["score_MiB"] = double(kBatch * kHeads * t * t) * 4.0 / kMiB;
  state.SetItemsProcessed(static_cast<std::int64_t>(double(state.iterations()) * flops(t)));
}

void run_ms(benchmark::State& state, Side side, const Inputs& in, std::int64_t t, int nt) {
  const std::int64_t live0 = ms::memory_stats().live_bytes;
  auto step = ms_step(side);
  // Warm-up: the first call traces and compiles, the second plans the arena.
  if (!check_grads(state, reference(in), step(in.q, in.k, in.v, in.w, in.mask))) return;
  (void)step(in.q, in.k, in.v, in.w, in.mask);
  ms::memory_stats_reset_peak();
  (void)step(in.q, in.k, in.v, in.w, in.mask);
  const double peak = double(ms::memory_stats().peak_bytes - live0);
  for (auto _ : state) {
    auto g = step(in.q, in.k, in.v, in.w, in.mask);
    benchmark::DoNotOptimize(g.back().raw_data());
  }
  if (step.compile_count() != 1) {
    state.SkipWithError(
        ("expected 1 compile, got " + std::to_string(step.compile_count())).c_str());
    return;
  }
  set_counters(state, t, nt, peak);
}

#if MS_BENCH_TORCH

/// A wrapper around c10's CPU allocator that counts the bytes of the
/// storages it made that are still alive, and their peak.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(std::size_t n) const override {
    auto* ctx = new Ctx{inner_->allocate(n), n};
    const std::int64_t live = live_ += std::int64_t(n);
    std::int64_t peak = peak_.load();
    while (live > peak && !peak_.compare_exchange_weak(peak, live)) {
    }
    return {ctx->inner.get(), ctx, &CountingAllocator::release, c10::Device(c10::kCPU)};
  }
  /// The largest live byte count since this allocator was made.
  static std::int64_t peak() { return peak_.load(); }
  /// Starts counting from zero.
  static void reset() { live_ = peak_ = 0; }

 private:
  struct Ctx {
    c10::DataPtr inner;
    std::size_t n;
  };
  static void release(void* p) {
    auto* ctx = static_cast<Ctx*>(p);
    live_ -= std::int64_t(ctx->n);
    delete ctx;
  }
  c10::Allocator* inner_;
  static inline std::atomic<std::int64_t> live_{0}, peak_{0};
};

std::vector<torch::Tensor> torch_grads(const std::vector<torch::Tensor>& qkv,
                                       const torch::Tensor& w, const torch::Tensor& mask) {
  const torch::Tensor s = torch::matmul(qkv[0], qkv[1].transpose(-2, -1)) * scale();
  const torch::Tensor p =
      torch::softmax(s.masked_fill(mask, -std::numeric_limits<double>::infinity()), -1);
  const torch::Tensor loss = (torch::matmul(p, qkv[2]) * w).sum();
  return torch::autograd::grad({loss}, qkv);
}

/// The peak live bytes of one torch_grads call, by CountingAllocator.
double torch_peak(const std::vector<torch::Tensor>& qkv, const torch::Tensor& w,
                  const torch::Tensor& mask) {
  c10::Allocator* plain = c10::GetCPUAllocator();
  CountingAllocator counting(plain);
  CountingAllocator::reset();
  c10::SetCPUAllocator(&counting);
  { (void)torch_grads(qkv, w, mask); }
  c10::SetCPUAllocator(plain);
  return double(CountingAllocator::peak());
}

void run_torch(benchmark::State& state, const Inputs& in, std::int64_t t, int nt) {
  std::vector<torch::Tensor> qkv;
  for (const ms::Tensor& x : {in.q, in.k, in.v})
    qkv.push_back(bench::to_torch(x).requires_grad_(true));
  const torch::Tensor w = bench::to_torch(in.w);
  const torch::Tensor mask = torch::ones({t, t}, torch::kBool).triu(1);
  if (!check_grads(state, reference(in), torch_grads(qkv, w, mask))) return;
  const double peak = torch_peak(qkv, w, mask);
  for (auto _ : state) {
    auto g = torch_grads(qkv, w, mask);
    benchmark::DoNotOptimize(g.back().data_ptr());
  }
  set_counters(state, t, nt, peak);
}

#endif

void BM_Attention(benchmark::State& state, Side side) {
  const std::int64_t t = state.range(0);
  const int nt = static_cast<int>(state.range(1));
  bench::fma_peak(nt);
  bench::set_threads(nt);
  const Inputs in(t);
#if MS_BENCH_TORCH
  if (side == kTorchNaive) return run_torch(state, in, t, nt);
#endif
  run_ms(state, side, in, t, nt);
}

// Per (T, threads): the FMA peak's row once per thread count, then the sides.
void register_all() {
  for (std::int64_t nt : {1, 2})
    benchmark::RegisterBenchmark("BM_Peak_Fma", bench::BM_Peak_Fma)
        ->ArgName("nt")
        ->Arg(nt)
        ->UseRealTime();
  for (std::int64_t side : {kMsFused, kMsNaive, kTorchNaive}) {
    if (side == kTorchNaive && !MS_BENCH_TORCH) continue;
    const std::string name = std::string("BM_Attention/") + kSideNames[side];
    auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Attention, Side(side));
    b->ArgNames({"T", "nt"})->UseRealTime()->Unit(benchmark::kMillisecond);
    for (std::int64_t nt : {1, 2})
      for (std::int64_t t : {128, 512, 1024}) b->Args({t, nt});
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::use_best_openblas(argv);
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  bench::add_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
