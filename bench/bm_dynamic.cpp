// bench/bm_dynamic.cpp — dynamic shapes (bench/compare_dynamic.sh): throughput of
// the jitted MLP training step (train_models.hpp: 784-512-256-10, forward,
// cross entropy, backward, Momentum update in one graph) over a stream of
// random batch sizes, auto-dynamic against static graphs and LibTorch.
//
//   BM_DynamicStream/ms_dynamic/nt:N  JitConfig{.dynamic = 1, .binding_cache_capacity = 256}:
//                                     2 static graphs, then one generalized graph,
//                                     instantiated once per concrete size
//   BM_DynamicStream/ms_static/nt:N   JitConfig{.cache_capacity = 256}: a static graph per size
//   BM_DynamicStream/torch/nt:N       LibTorch: zero_grad, forward, cross entropy,
//                                     backward, SGD step (momentum, no dampening)
//
// The stream: kStream batch sizes drawn uniformly from [1, kMaxBatch]
// (std::mt19937, seed 1), the same for every variant. The data is made once
// per process (not timed): for each size n in [1, kMaxBatch] one batch, x
// [n, 784] float32 standard normal and int32 labels in 0..9 (int64 copies for
// LibTorch). Before timing, each benchmark runs one warm-up pass of one step
// per distinct size (in the order of first appearance in the stream, then the
// sizes the stream lacks), so every graph, instantiation and memory plan
// exists (and LibTorch's allocator has seen every size); one benchmark
// iteration then runs the whole stream. items/s = samples/s; counters:
// steps_per_s, time_per_step (s), last_loss. Same hyperparameters on every side:
// lr 0.05, momentum 0.9, ms weights from ms::default_generator() seed 1,
// copied into LibTorch.
//
// Guards (the benchmark fails with an error otherwise): the first kCheckSteps
// sizes of the stream, from the same weights, give the same losses under
// dynamic = 1, static graphs and LibTorch; after the warm-up the dynamic step
// has compiled exactly 3 graphs (2 static + 1 generalized) and is still
// auto-dynamic; during the timed loop neither ms step compiles or traces again.
#include <algorithm>
#include <functional>
#include <set>

#include "bench_common.hpp"
#include "train_models.hpp"

namespace {

constexpr std::int64_t kMaxBatch = 256;
constexpr int kStream = 512;
constexpr int kCheckSteps = 6;
constexpr double kLr = 0.05;
constexpr std::uint64_t kSeed = 1;

using Trainer = bench::MsTrainer<bench::MsMLP>;

/// The stream of batch sizes, the warm-up order and one batch per size.
struct Data {
  std::vector<std::int64_t> stream;  ///< kStream sizes in [1, kMaxBatch]
  std::vector<std::int64_t> warmup;  ///< every size once
  std::int64_t samples = 0;          ///< sum of the stream
  std::vector<ms::Tensor> x, y;      ///< index n - 1: x [n, 784] float32, y [n] int32
#if MS_BENCH_TORCH
  std::vector<torch::Tensor> tx, ty;  ///< the same, labels int64
#endif

  Data() {
    std::mt19937 gen(1);
    std::uniform_int_distribution<std::int64_t> size(1, kMaxBatch);
    std::set<std::int64_t> seen;
    for (int i = 0; i < kStream; ++i) {
      stream.push_back(size(gen));
      samples += stream.back();
      if (seen.insert(stream.back()).second) warmup.push_back(stream.back());
    }
    for (std::int64_t n = 1; n <= kMaxBatch; ++n)
      if (!seen.count(n)) warmup.push_back(n);
    ms::Generator g(7);
    for (std::int64_t n = 1; n <= kMaxBatch; ++n) {
      x.push_back(ms::normal({n, 784}, 0.0, 1.0, g));
      y.push_back(ms::randint(0, 10, {n}, g, ms::int32));
#if MS_BENCH_TORCH
      tx.push_back(bench::to_torch(x.back()));
      ty.push_back(
          torch::from_blob(y.back().data<std::int32_t>(), {n}, torch::kInt32).to(torch::kInt64));
#endif
    }
  }
  std::size_t at(std::int64_t n) const { return static_cast<std::size_t>(n - 1); }
};

/// The data of the process, made on first use. Leaked on purpose: a static
/// ms::Tensor destroyed at exit would be freed after the main thread's
/// thread_local block cache of src/core/storage.cpp, which ~Storage still
/// writes into (heap corruption, "corrupted double-linked list").
const Data& data() {
  static const Data& d = *new Data;
  return d;
}

/// The trainer's step (train_models.hpp) compiled with `cfg`.
auto jit_step(Trainer& t, ms::JitConfig cfg) { return ms::jit(t.step_fn(), std::move(cfg)); }
using Step = decltype(jit_step(std::declval<Trainer&>(), {}));

ms::JitConfig dynamic_config() {
  ms::JitConfig c;
  c.dynamic = 1;
  c.binding_cache_capacity = static_cast<std::size_t>(kMaxBatch);
  return c;
}

ms::JitConfig static_config() {
  ms::JitConfig c;
  c.cache_capacity = static_cast<std::size_t>(kMaxBatch);
  return c;
}

/// A fresh trainer with the weights of seed kSeed.
std::unique_ptr<Trainer> make_trainer() {
  ms::default_generator().manual_seed(kSeed);
  return std::make_unique<Trainer>(kLr);
}

bool agree(double a, double b, double tol) {
  return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b));
}

/// The losses of the first kCheckSteps stream sizes agree between dynamic = 1,
/// static graphs and LibTorch, from the same weights. Run once per process;
/// returns an error message, or "" when they agree.
const std::string& check_losses() {
  static const std::string error = [] {
    const Data& d = data();
    auto td = make_trainer(), ts = make_trainer();
    Step sd = jit_step(*td, dynamic_config()), ss = jit_step(*ts, static_config());
#if MS_BENCH_TORCH
    bench::TorchTrainer<bench::TorchMLP> tt(kLr);
    tt.net->copy_from(td->net);
#endif
    for (int j = 0; j < kCheckSteps; ++j) {
      const std::size_t k = d.at(d.stream[static_cast<std::size_t>(j)]);
      const double ld = sd(d.x[k], d.y[k]).item<float>();
      const double ls = ss(d.x[k], d.y[k]).item<float>();
      const std::string at = " at step " + std::to_string(j) + " (batch " +
                             std::to_string(d.stream[static_cast<std::size_t>(j)]) + "): ";
      if (!agree(ld, ls, 1e-6))
        return "dynamic and static losses differ" + at + std::to_string(ld) + " vs " +
               std::to_string(ls);
#if MS_BENCH_TORCH
      const double lt = tt.step(d.tx[k], d.ty[k]).item<float>();
      if (!agree(ld, lt, 1e-4))
        return "ms and LibTorch losses differ" + at + std::to_string(ld) + " vs " +
               std::to_string(lt);
#endif
    }
    if (sd.compile_count() != 3 || sd.generalized_count() != 1)
      return "dynamic step: expected 2 static + 1 generalized graph, got " +
             std::to_string(sd.compile_count()) + " compiles, " +
             std::to_string(sd.generalized_count()) + " generalized";
    return std::string();
  }();
  return error;
}

void set_counters(benchmark::State& state, double last_loss) {
  const Data& d = data();
  const double steps = static_cast<double>(state.iterations()) * kStream;
  state.SetItemsProcessed(state.iterations() * d.samples);
  state.counters["steps_per_s"] = benchmark::Counter(steps, benchmark::Counter::kIsRate);
  state.counters["time_per_step"] =
      benchmark::Counter(steps, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["last_loss"] = last_loss;
}

/// ms: one jitted step with `dynamic` 1 or 0 over the stream.
void BM_Ms(benchmark::State& state, bool dynamic) {
  bench::set_threads(state.range(0));
  const Data& d = data();
  if (const std::string& e = check_losses(); !e.empty()) {
    state.SkipWithError(e.c_str());
    return;
  }
  auto t = make_trainer();
  Step step = jit_step(*t, dynamic ? dynamic_config() : static_config());
  ms::Tensor loss;
  for (std::int64_t n : d.warmup) loss = step(d.x[d.at(n)], d.y[d.at(n)]);
  const int compiles = step.compile_count(), traces = step.trace_count();
  if (dynamic && (compiles != 3 || step.generalized_count() != 1 || !step.auto_dynamic_active())) {
    state.SkipWithError(("dynamic step after warm-up: " + std::to_string(compiles) +
                         " compiles (expected 3), " + std::to_string(step.generalized_count()) +
                         " generalized (expected 1), auto-dynamic " +
                         (step.auto_dynamic_active() ? "on" : "off"))
                            .c_str());
    return;
  }
  if (!dynamic && compiles != static_cast<int>(kMaxBatch)) {
    state.SkipWithError(("static step after warm-up: " + std::to_string(compiles) +
                         " compiles, expected " + std::to_string(kMaxBatch))
                            .c_str());
    return;
  }
  for (auto _ : state) {
    for (std::int64_t n : d.stream) {
      loss = step(d.x[d.at(n)], d.y[d.at(n)]);
      benchmark::DoNotOptimize(loss.raw_data());
    }
  }
  if (step.compile_count() != compiles || step.trace_count() != traces)
    state.SkipWithError(("the timed loop compiled or traced again: compiles " +
                         std::to_string(compiles) + " -> " + std::to_string(step.compile_count()) +
                         ", traces " + std::to_string(traces) + " -> " +
                         std::to_string(step.trace_count()))
                            .c_str());
  set_counters(state, loss.item<float>());
}

#if MS_BENCH_TORCH
void BM_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const Data& d = data();
  if (const std::string& e = check_losses(); !e.empty()) {
    state.SkipWithError(e.c_str());
    return;
  }
  auto m = make_trainer();
  bench::TorchTrainer<bench::TorchMLP> t(kLr);
  t.net->copy_from(m->net);
  torch::Tensor loss;
  for (std::int64_t n : d.warmup) loss = t.step(d.tx[d.at(n)], d.ty[d.at(n)]);
  for (auto _ : state) {
    for (std::int64_t n : d.stream) {
      loss = t.step(d.tx[d.at(n)], d.ty[d.at(n)]);
      benchmark::DoNotOptimize(loss.data_ptr());
    }
  }
  set_counters(state, loss.item<float>());
}
#endif

void stream_args(benchmark::internal::Benchmark* b) {
  b->ArgName("nt")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_Ms, ms_dynamic, true)->Name("BM_DynamicStream/ms_dynamic")->Apply(stream_args);
BENCHMARK_CAPTURE(BM_Ms, ms_static, false)->Name("BM_DynamicStream/ms_static")->Apply(stream_args);
#if MS_BENCH_TORCH
BENCHMARK(BM_Torch)->Name("BM_DynamicStream/torch")->Apply(stream_args);
#endif

}  // namespace

MS_BENCH_MAIN()
