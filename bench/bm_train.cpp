// bench/bm_train.cpp — one full training step (forward, backward, momentum
// update) of the Fashion-MNIST models, ms (one jitted graph) against LibTorch
// (torch::nn + torch::optim::SGD, autograd), in the same binary.
//
//   BM_TrainMlp_Ms/batch:B/nt:N     MLP 784-512-256-10, ms::jit step, B = 64, 256
//   BM_TrainMlp_Torch/batch:B/nt:N  the same step in LibTorch
//   BM_TrainMlpO2_Ms/batch:64/nt:N  the ms MLP step under amp O2 in bfloat16 (float32
//                                   master weights), beside BM_TrainMlp_Ms
//   BM_TrainCnn_Ms/batch:64/nt:N    CNN (train_models.hpp), ms::jit step
//   BM_TrainCnnO2_Ms/batch:64/nt:N  the ms CNN step under amp O2 in bfloat16
//   BM_TrainCnn_Torch/batch:64/nt:N the same step in LibTorch
//   BM_TrainGpt_Ms/batch:32/nt:N    examples/char_lm's model and step at its defaults
//                                   (ms::nn::Gpt, 4 layers, d_model 192, 6 heads,
//                                   context 128; AdamW, clip_grad_norm 1, one jitted step)
//   BM_TrainGpt_Torch/batch:32/nt:N the same step on its LibTorch twin (bench/gpt_torch.hpp,
//                                   char_lm_torch's step: torch::optim::AdamW, ms's clip rule)
//   BM_Peak_Fma/nt:N                the FMA peak of the same process (the MLP step's
//                                   flop_per_step counter over it: its fraction of the peak)
//   BM_CellCall_Dense/nt:1          net(x): Dense 784->512 at batch 1 through Cell::operator()
//   BM_CellConstruct_Dense/nt:1     net.construct(x): the same without the cell call
//   BM_CellCallHooked_Dense/nt:1    net(x) with one no-op forward hook (what a hook costs)
//
// Inputs are synthetic, from fixed seeds (bench::Batches: 16 batches of
// uniform images in [-1, 1), labels uniform in 0..9, cycled through), SGD lr
// 0.01, momentum 0.9. The counter steps_per_s is training steps per second (real
// time). Each ms step benchmark checks after its loop that the step compiled
// exactly once (the loop ran cache hits). Each LibTorch benchmark first runs
// three steps of a fresh ms trainer and of LibTorch from the same weights and
// checks that the three losses agree (the benchmark fails otherwise). The GPT
// steps run on 8 batches of uniform byte tokens [32, 128] (next tokens [32, 128]);
// BM_TrainGpt_Torch starts from the ms model's initial weights and checks that
// its first loss agrees with ms's to 1e-4. Their repetitions interleave, so the
// ratio does not move with the host's speed as bench/char_lm_twin.sh's
// (two processes one after the other) does.
// bench/compare_train.sh runs them and prints the table with the ratios.
#include <algorithm>
#include <functional>

#include "bench_common.hpp"
#include "train_models.hpp"
#if MS_BENCH_TORCH
#include "gpt_torch.hpp"
#endif

namespace {

constexpr double kLr = 0.01;
constexpr std::uint64_t kSeed = 1;

void set_counters(benchmark::State& state, std::int64_t batch, double last_loss) {
  state.counters["steps_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["samples_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * batch), benchmark::Counter::kIsRate);
  state.counters["last_loss"] = last_loss;
}

template <class Net, bool AmpO2 = false>
void BM_Train_Ms(benchmark::State& state) {
  const bool cnn = std::is_same_v<Net, bench::MsCNN>;
  const std::int64_t batch = state.range(0);
  bench::set_threads(state.range(1));
  const bench::Batches data(bench::input_shape(cnn, batch), 7);
  ms::default_generator().manual_seed(kSeed);
  bench::MsTrainer<Net> t(kLr);
  if (AmpO2) ms::amp::auto_mixed_precision(t.net, "O2", ms::bfloat16);
  // Warm-up: the first call traces and compiles, the second plans the arena.
  t.step(data.x[0], data.y[0]);
  t.step(data.x[1], data.y[1]);
  int i = 2;
  ms::Tensor loss;
  for (auto _ : state) {
    loss = t.step(data.x[i % bench::kBatchPool], data.y[i % bench::kBatchPool]);
    benchmark::DoNotOptimize(loss.raw_data());
    ++i;
  }
  if (t.step.compile_count() != 1)
    state.SkipWithError(
        ("expected 1 compile, got " + std::to_string(t.step.compile_count())).c_str());
  set_counters(state, batch, loss.item<float>());
  if constexpr (std::is_same_v<Net, bench::MsMLP>) {
    // Multiply-adds x 2: the forward products, the weight gradients (as many)
    // and the input gradients of fc2 and fc3 (fc1's input needs none).
    const double fwd = 784.0 * 512 + 512.0 * 256 + 256.0 * 10, grad_in = 512.0 * 256 + 256.0 * 10;
    state.counters["flop_per_step"] = 2.0 * static_cast<double>(batch) * (2 * fwd + grad_in);
  }
}

#if MS_BENCH_TORCH

template <class Net>
void BM_Train_Torch(benchmark::State& state) {
  using TNet = typename bench::TorchTwin<Net>::type;
  const bool cnn = std::is_same_v<Net, bench::MsCNN>;
  const std::int64_t batch = state.range(0);
  bench::set_threads(state.range(1));
  const bench::Batches data(bench::input_shape(cnn, batch), 7);
  std::vector<torch::Tensor> tx, ty;
  for (int j = 0; j < bench::kBatchPool; ++j) {
    tx.push_back(bench::to_torch(data.x[j]));
    ty.push_back(bench::torch_labels(data.y[j]));
  }
  ms::default_generator().manual_seed(kSeed);
  bench::TorchTrainer<TNet> t(kLr);
  {
    // Same weights, same three steps: the losses must agree.
    bench::MsTrainer<Net> m(kLr);
    t.net->copy_from(m.net);
    for (int j = 0; j < 3; ++j) {
      const double lm = m.step(data.x[j], data.y[j]).template item<float>();
      const double lt = t.step(tx[j], ty[j]).template item<float>();
      if (!(std::fabs(lm - lt) <= 1e-4 * std::max(1.0, std::fabs(lt)))) {
        state.SkipWithError(("ms and LibTorch losses differ at step " + std::to_string(j) + ": " +
                             std::to_string(lm) + " vs " + std::to_string(lt))
                                .c_str());
        return;
      }
    }
  }
  int i = 3;
  torch::Tensor loss;
  for (auto _ : state) {
    loss = t.step(tx[i % bench::kBatchPool], ty[i % bench::kBatchPool]);
    benchmark::DoNotOptimize(loss.data_ptr());
    ++i;
  }
  set_counters(state, batch, loss.item<float>());
}
#endif

// ---------------------------------------------------------------- GPT (char_lm)

constexpr std::int64_t kGptBatch = 32, kGptContext = 128, kGptBatches = 8;
constexpr double kGptLr = 1e-3, kGptWeightDecay = 0.1, kGptClip = 1.0;

// Token batches (x, y) of uniform bytes from a fixed seed.
struct GptBatches {
  std::vector<ms::Tensor> x, y;
  GptBatches() {
    ms::Generator gen(11);
    for (std::int64_t i = 0; i < kGptBatches; ++i) {
      x.push_back(ms::randint(0, 256, ms::Shape({kGptBatch, kGptContext}), gen));
      y.push_back(ms::randint(0, 256, ms::Shape({kGptBatch, kGptContext}), gen));
    }
  }
};

// char_lm's model, optimizer and jitted step (examples/char_lm.cpp).
struct MsGptTrainer {
  ms::nn::Gpt gpt{
      {.vocab_size = 256, .block_size = kGptContext, .n_layer = 4, .n_head = 6, .n_embd = 192}};
  ms::optim::AdamW opt{gpt.trainable_params(), {.lr = kGptLr, .weight_decay = kGptWeightDecay}};
  std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)> step_fn =
      [this](const ms::Tensor& x, const ms::Tensor& y) {
        auto loss_fn = [this](const ms::Tensor& a, const ms::Tensor& b) {
          return ms::nn::cross_entropy(gpt(a), b);
        };
        auto [loss, grads] = ms::value_and_grad(
            loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
        opt.apply(ms::nn::clip_grad_norm(grads, kGptClip).grads);
        return loss;
      };
  decltype(ms::jit(
      std::declval<std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)>>())) step =
      ms::jit(step_fn);
};

void gpt_step_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "nt"})
      ->Args({kGptBatch, 1})
      ->Args({kGptBatch, 2})
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

void BM_TrainGpt_Ms(benchmark::State& state) {
  bench::set_threads(state.range(1));
  const GptBatches data;
  ms::default_generator().manual_seed(kSeed);
  MsGptTrainer t;
  t.step(data.x[0], data.y[0]);  // traces and compiles
  t.step(data.x[1], data.y[1]);  // plans the arena
  std::int64_t i = 2;
  ms::Tensor loss;
  for (auto _ : state) {
    loss = t.step(data.x[static_cast<std::size_t>(i % kGptBatches)],
                  data.y[static_cast<std::size_t>(i % kGptBatches)]);
    benchmark::DoNotOptimize(loss.raw_data());
    ++i;
  }
  if (t.step.compile_count() != 1) state.SkipWithError("the GPT step compiled more than once");
  set_counters(state, kGptBatch, loss.item<float>());
}

#if MS_BENCH_TORCH
void BM_TrainGpt_Torch(benchmark::State& state) {
  bench::set_threads(state.range(1));
  const GptBatches data;
  ms::default_generator().manual_seed(kSeed);
  MsGptTrainer ms_side;
  ms::io::SafetensorsFile init;
  init.tensors = ms_side.gpt.state_dict();
  bench::GptTorch gpt({256, kGptContext, 4, 6, 192});
  gpt.load(init, "the ms model's initial weights");
  torch::optim::AdamW opt(gpt.parameters(), torch::optim::AdamWOptions(kGptLr)
                                                .betas({0.9, 0.999})
                                                .eps(1e-8)
                                                .weight_decay(kGptWeightDecay));
  auto step = [&](std::int64_t i) {
    opt.zero_grad();
    torch::Tensor loss = bench::gpt_loss(gpt, data.x[static_cast<std::size_t>(i % kGptBatches)],
                                         data.y[static_cast<std::size_t>(i % kGptBatches)]);
    loss.backward();
    bench::clip_grad_norm(gpt.parameters(), kGptClip);
    opt.step();
    return loss.item<double>();
  };
  const double ms_first = ms_side.step(data.x[0], data.y[0]).item<double>();
  const double torch_first = step(0);  // also LibTorch's allocator warm-up
  if (!(std::abs(torch_first - ms_first) <= 1e-4 * std::abs(ms_first))) {
    state.SkipWithError("the GPT twins' first losses differ");
    return;
  }
  std::int64_t i = 1;
  double loss = 0;
  for (auto _ : state) loss = step(i++);
  set_counters(state, kGptBatch, loss);
}
#endif

// ---------------------------------------------------------------- cell call overhead

struct DenseCase {
  ms::nn::Dense net{784, 512};
  ms::Tensor x = bench::random_tensor({1, 784}, 21);
};

void BM_CellCall_Dense(benchmark::State& state) {
  bench::set_threads(state.range(0));
  DenseCase c;
  for (auto _ : state) {
    ms::Tensor y = c.net(c.x);
    benchmark::DoNotOptimize(y.raw_data());
  }
}

void BM_CellConstruct_Dense(benchmark::State& state) {
  bench::set_threads(state.range(0));
  DenseCase c;
  for (auto _ : state) {
    ms::Tensor y = c.net.construct(c.x);
    benchmark::DoNotOptimize(y.raw_data());
  }
}

void BM_CellCallHooked_Dense(benchmark::State& state) {
  bench::set_threads(state.range(0));
  DenseCase c;
  int calls = 0;
  ms::HookHandle h = c.net.register_forward_hook(
      [&calls](ms::nn::Dense&, const ms::Args&, const ms::Tensor&) { ++calls; });
  for (auto _ : state) {
    ms::Tensor y = c.net(c.x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  if (calls < static_cast<int>(state.iterations())) state.SkipWithError("the hook did not run");
  h.remove();
}

BENCHMARK(BM_Train_Ms<bench::MsMLP>)
    ->Name("BM_TrainMlp_Ms")
    ->Apply([](benchmark::internal::Benchmark* b) { bench::model_step_args(b, false); });
BENCHMARK(BM_Train_Ms<bench::MsMLP, true>)
    ->Name("BM_TrainMlpO2_Ms")
    ->ArgNames({"batch", "nt"})
    ->Args({64, 1})
    ->Args({64, 2})
    ->UseRealTime();
BENCHMARK(BM_Train_Ms<bench::MsCNN>)
    ->Name("BM_TrainCnn_Ms")
    ->Apply([](benchmark::internal::Benchmark* b) { bench::model_step_args(b, true); });
BENCHMARK(BM_Train_Ms<bench::MsCNN, true>)
    ->Name("BM_TrainCnnO2_Ms")
    ->ArgNames({"batch", "nt"})
    ->Args({64, 1})
    ->Args({64, 2})
    ->UseRealTime();
BENCHMARK(BM_TrainGpt_Ms)->Apply(gpt_step_args);
#if MS_BENCH_TORCH
BENCHMARK(BM_TrainGpt_Torch)->Apply(gpt_step_args);
BENCHMARK(BM_Train_Torch<bench::MsMLP>)
    ->Name("BM_TrainMlp_Torch")
    ->Apply([](benchmark::internal::Benchmark* b) { bench::model_step_args(b, false); });
BENCHMARK(BM_Train_Torch<bench::MsCNN>)
    ->Name("BM_TrainCnn_Torch")
    ->Apply([](benchmark::internal::Benchmark* b) { bench::model_step_args(b, true); });
#endif
BENCHMARK(bench::BM_Peak_Fma)->Name("BM_Peak_Fma")->ArgName("nt")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_CellCall_Dense)->ArgName("nt")->Arg(1)->UseRealTime();
BENCHMARK(BM_CellConstruct_Dense)->ArgName("nt")->Arg(1)->UseRealTime();
BENCHMARK(BM_CellCallHooked_Dense)->ArgName("nt")->Arg(1)->UseRealTime();

}  // namespace

MS_BENCH_MAIN()
