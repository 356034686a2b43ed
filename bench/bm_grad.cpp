// bench/bm_grad.cpp — forward + backward without the optimizer (PART=grad
// bench/compare_train.sh): the loss and the gradients of every parameter of
// the Fashion-MNIST models, ms against LibTorch in the same binary.
//
//   BM_GradMlp_Ms/batch:B/nt:N     MLP 784-512-256-10, B = 64, 256:
//                                  ms::jit(ms::value_and_grad(loss, {.position = nullopt,
//                                                                 .weights = params}))
//   BM_GradMlp_Torch/batch:B/nt:N  zero_grad, forward, cross entropy, backward
//   BM_GradCnn_Ms/batch:64/nt:N    CNN (train_models.hpp), the same jitted call
//   BM_GradCnn_Torch/batch:64/nt:N the same in LibTorch
//
// ms returns the gradients as fresh tensors each call (the caller owns them);
// LibTorch accumulates them into each parameter's .grad, which
// Module::zero_grad() (LibTorch 1.13's default: in place) zeroes first, as a
// LibTorch training loop does. The weights do not change between calls:
// every call computes the gradients at the same point, on a pool of bench::kBatchPool
// synthetic batches (uniform images in [-1, 1), labels uniform in 0..9,
// fixed seeds). Run it through bench/compare_train.sh, which gives LibTorch
// its best glibc malloc setting (GLIBC_TUNABLES, see there).
//
// Before timing, each LibTorch benchmark computes the loss and every gradient
// on both sides from the same weights and batch, and fails unless they agree
// (relative to max(1, |LibTorch|), 1e-4); each ms benchmark checks after its
// loop that the function compiled exactly once. The counter steps_per_s is
// calls per second (real time). bench/compare_train.sh (PART=grad) prints the
// ratios.
#include "bench_common.hpp"
#include "train_models.hpp"

namespace {

constexpr std::uint64_t kSeed = 1;

/// A model and its jitted gradients-only call: `grad(x, y)` returns the loss
/// and the gradients of net.trainable_params(), in that order.
template <class Net>
struct MsGrad {
  Net net;
  std::vector<ms::Tensor> params;
  std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)> loss_fn;
  decltype(ms::jit(
      ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights = params}))) grad;
  MsGrad()
      : params([this] {
          std::vector<ms::Tensor> p;
          for (const auto& q : net.trainable_params()) p.push_back(q);
          return p;
        }()),
        loss_fn([this](const ms::Tensor& x, const ms::Tensor& y) {
          return ms::nn::cross_entropy(net(x), y);
        }),
        grad(ms::jit(ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights = params}))) {}
  MsGrad(const MsGrad&) = delete;
  MsGrad& operator=(const MsGrad&) = delete;
};

void set_counters(benchmark::State& state, std::int64_t batch) {
  state.counters["steps_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["samples_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * batch), benchmark::Counter::kIsRate);
}

template <class Net>
void BM_Grad_Ms(benchmark::State& state) {
  const bool cnn = std::is_same_v<Net, bench::MsCNN>;
  const std::int64_t batch = state.range(0);
  bench::set_threads(state.range(1));
  const bench::Batches data(bench::input_shape(cnn, batch), 7);
  ms::default_generator().manual_seed(kSeed);
  MsGrad<Net> m;
  // Warm-up: the first call traces and compiles, the second plans the arena.
  m.grad(data.x[0], data.y[0]);
  m.grad(data.x[1], data.y[1]);
  int i = 2;
  for (auto _ : state) {
    auto [loss, grads] = m.grad(data.x[i % bench::kBatchPool], data.y[i % bench::kBatchPool]);
    benchmark::DoNotOptimize(grads.back().raw_data());
    ++i;
  }
  if (m.grad.compile_count() != 1)
    state.SkipWithError(
        ("expected 1 compile, got " + std::to_string(m.grad.compile_count())).c_str());
  set_counters(state, batch);
}

#if MS_BENCH_TORCH

template <class TNet>
torch::Tensor torch_grad(TNet& net, const torch::Tensor& x, const torch::Tensor& y) {
  net->zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
  loss.backward();
  return loss.detach();
}

template <class Net>
void BM_Grad_Torch(benchmark::State& state) {
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
  TNet net;
  {
    // Same weights, same batch: the loss and every gradient must agree.
    MsGrad<Net> m;
    net->copy_from(m.net);
    auto [lm, gm] = m.grad(data.x[0], data.y[0]);
    const torch::Tensor lt = torch_grad(net, tx[0], ty[0]);
    const std::vector<torch::Tensor> pt = net->parameters();
    std::string bad;
    if (gm.size() != pt.size())
      bad = "gradient counts differ: " + std::to_string(gm.size()) + " vs " +
            std::to_string(pt.size());
    else if (bench::max_rel_diff(lm, lt) > 1e-4)
      bad = "losses differ";
    for (std::size_t k = 0; bad.empty() && k < gm.size(); ++k)
      if (bench::max_rel_diff(gm[k], pt[k].grad()) > 1e-4)
        bad = "the gradients of parameter " + std::to_string(k) + " differ";
    if (!bad.empty()) {
      state.SkipWithError(bad.c_str());
      return;
    }
  }
  int i = 1;
  torch::Tensor loss;
  for (auto _ : state) {
    loss = torch_grad(net, tx[i % bench::kBatchPool], ty[i % bench::kBatchPool]);
    benchmark::DoNotOptimize(net->parameters().back().grad().data_ptr());
    ++i;
  }
  set_counters(state, batch);
}
#endif

BENCHMARK(BM_Grad_Ms<bench::MsMLP>)
    ->Name("BM_GradMlp_Ms")
    ->Apply([](benchmark::internal::Benchmark* b) { bench::model_step_args(b, false); });
BENCHMARK(BM_Grad_Ms<bench::MsCNN>)
    ->Name("BM_GradCnn_Ms")
    ->Apply([](benchmark::internal::Benchmark* b) { bench::model_step_args(b, true); });
#if MS_BENCH_TORCH
BENCHMARK(BM_Grad_Torch<bench::MsMLP>)
    ->Name("BM_GradMlp_Torch")
    ->Apply([](benchmark::internal::Benchmark* b) { bench::model_step_args(b, false); });
BENCHMARK(BM_Grad_Torch<bench::MsCNN>)
    ->Name("BM_GradCnn_Torch")
    ->Apply([](benchmark::internal::Benchmark* b) { bench::model_step_args(b, true); });
#endif

}  // namespace

MS_BENCH_MAIN()
