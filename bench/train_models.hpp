// bench/train_models.hpp — the two Fashion-MNIST models of the training
// benchmarks (bm_train, train_epoch), in ms and in LibTorch, with the same
// layers, the same parameter layouts and a weight copy from ms to LibTorch,
// plus ms's jitted training step (forward, backward, Momentum update in one
// graph) and LibTorch's equivalent (zero_grad, forward, backward, SGD step).
//
//   MLP: 784-512-256-10, ReLU                                    (x [B, 784])
//   CNN: conv 1->32 3x3 same + bias, ReLU, max pool 2, conv 32->64 3x3 same
//        + bias, ReLU, max pool 2, fc 3136->128, ReLU, fc 128->10 (x [B, 1, 28, 28])
//
// ms's Momentum (accum = m * accum + g; p -= lr * accum) and LibTorch's SGD
// with momentum and no dampening (buf = m * buf + g; p -= lr * buf) are the
// same update, so from the same weights both sides compute the same losses.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ms/cell.hpp"
#include "ms/data/dataloader.hpp"
#include "ms/data/fashion_mnist.hpp"
#include "ms/kernels/parallel.hpp"

#ifndef MS_BENCH_TORCH
#define MS_BENCH_TORCH 0
#endif

#if MS_BENCH_TORCH
#include <torch/nn.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#endif

namespace bench {

struct MsMLP : ms::Cell<MsMLP> {
  ms::nn::Dense fc1{784, 512}, fc2{512, 256}, fc3{256, 10};
  MsMLP() { register_cells("fc1", fc1, "fc2", fc2, "fc3", fc3); }
  ms::Tensor construct(const ms::Tensor& x) { return fc3(ms::relu(fc2(ms::relu(fc1(x))))); }
};

struct MsCNN : ms::Cell<MsCNN> {
  ms::nn::Conv2d conv1{1, 32, 3, {}, {.has_bias = true}}, conv2{32, 64, 3, {}, {.has_bias = true}};
  ms::nn::MaxPool2d pool{2};
  ms::nn::Dense fc1{3136, 128}, fc2{128, 10};
  MsCNN() { register_cells("conv1", conv1, "conv2", conv2, "pool", pool, "fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) {
    ms::Tensor h = pool(ms::relu(conv1(x)));
    h = pool(ms::relu(conv2(h)));
    return fc2(ms::relu(fc1(h.flatten(1))));
  }
};

/// A model, its Momentum optimizer and the jitted training step of the
/// examples: `step(x, y)` runs forward, backward and the update as one
/// compiled graph and returns the loss.
template <class Net>
struct MsTrainer {
  Net net;
  ms::optim::Momentum opt;
  std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)> loss_fn;
  decltype(ms::jit(
      std::declval<std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)>>())) step;

  /// The training step (forward, backward, Momentum update), to jit with any JitConfig.
  std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)> step_fn() {
    return [this](const ms::Tensor& x, const ms::Tensor& y) {
      auto [loss, grads] = ms::value_and_grad(
          loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
      opt.apply(grads);
      return loss;
    };
  }

  explicit MsTrainer(double lr, double momentum = 0.9, ms::JitConfig cfg = {})
      : opt(net.trainable_params(), {.lr = lr, .momentum = momentum}),
        loss_fn([this](const ms::Tensor& x, const ms::Tensor& y) {
          return ms::nn::cross_entropy(net(x), y);
        }),
        step(ms::jit(step_fn(), std::move(cfg))) {}
  MsTrainer(const MsTrainer&) = delete;
  MsTrainer& operator=(const MsTrainer&) = delete;
};

#if MS_BENCH_TORCH
/// A contiguous float32 ms tensor copied into a LibTorch one.
inline torch::Tensor torch_copy(const ms::Tensor& t) {
  const ms::Tensor c = t.contiguous();
  std::vector<std::int64_t> sizes(c.shape().begin(), c.shape().end());
  return torch::from_blob(const_cast<float*>(c.data<float>()), sizes, torch::kFloat32).clone();
}

struct TorchMLPImpl : torch::nn::Module {
  torch::nn::Linear fc1{784, 512}, fc2{512, 256}, fc3{256, 10};
  TorchMLPImpl() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
  void copy_from(const MsMLP& m) {
    torch::NoGradGuard g;
    fc1->weight.copy_(torch_copy(m.fc1.weight));
    fc1->bias.copy_(torch_copy(m.fc1.bias));
    fc2->weight.copy_(torch_copy(m.fc2.weight));
    fc2->bias.copy_(torch_copy(m.fc2.bias));
    fc3->weight.copy_(torch_copy(m.fc3.weight));
    fc3->bias.copy_(torch_copy(m.fc3.bias));
  }
};
TORCH_MODULE(TorchMLP);

struct TorchCNNImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 32, 3).padding(1).bias(true)};
  torch::nn::Conv2d conv2{torch::nn::Conv2dOptions(32, 64, 3).padding(1).bias(true)};
  torch::nn::MaxPool2d pool{torch::nn::MaxPool2dOptions(2)};
  torch::nn::Linear fc1{3136, 128}, fc2{128, 10};
  TorchCNNImpl() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("pool", pool);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = pool(torch::relu(conv1(x)));
    h = pool(torch::relu(conv2(h)));
    return fc2(torch::relu(fc1(h.flatten(1))));
  }
  void copy_from(const MsCNN& m) {
    torch::NoGradGuard g;
    conv1->weight.copy_(torch_copy(m.conv1.weight));
    conv1->bias.copy_(torch_copy(m.conv1.bias));
    conv2->weight.copy_(torch_copy(m.conv2.weight));
    conv2->bias.copy_(torch_copy(m.conv2.bias));
    fc1->weight.copy_(torch_copy(m.fc1.weight));
    fc1->bias.copy_(torch_copy(m.fc1.bias));
    fc2->weight.copy_(torch_copy(m.fc2.weight));
    fc2->bias.copy_(torch_copy(m.fc2.bias));
  }
};
TORCH_MODULE(TorchCNN);

/// A LibTorch model, its SGD (momentum, no dampening) and the usual step:
/// zero_grad, forward, cross entropy, backward, step. Labels int64.
template <class Module>
struct TorchTrainer {
  Module net;
  torch::optim::SGD opt;
  explicit TorchTrainer(double lr, double momentum = 0.9)
      : net(), opt(net->parameters(), torch::optim::SGDOptions(lr).momentum(momentum)) {}
  torch::Tensor step(const torch::Tensor& x, const torch::Tensor& y) {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    return loss.detach();
  }
};

/// The LibTorch twin of an ms model type.
template <class MsNet>
struct TorchTwin;
template <>
struct TorchTwin<MsMLP> {
  using type = TorchMLP;
};
template <>
struct TorchTwin<MsCNN> {
  using type = TorchCNN;
};
#endif

}  // namespace bench

// ---------------------------------------------------------------- train_epoch children

namespace bench::epoch {

/// What one child of train_epoch is asked to do.
struct ChildArgs {
  std::string model = "mlp";  ///< "mlp" or "cnn"
  int threads = 1;
  int epochs = 1;
  std::string data_dir = std::string(ms::data::FashionMNIST::kDefaultDir);
  std::uint64_t seed = 1;
  std::int64_t prefetch = 2;  ///< the training loader's DataLoaderOptions::prefetch
};

/// Parses `--model m --threads n --epochs e --data-dir d --seed s` (the
/// driver passes all of them) and an optional `--prefetch p`; false on
/// anything else.
inline bool parse_child_args(int argc, char** argv, int first, ChildArgs& a) {
  for (int i = first; i + 1 < argc; i += 2) {
    const std::string_view k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--model")
      a.model = v;
    else if (k == "--threads")
      a.threads = std::atoi(v);
    else if (k == "--epochs")
      a.epochs = std::atoi(v);
    else if (k == "--data-dir")
      a.data_dir = v;
    else if (k == "--seed")
      a.seed = std::strtoull(v, nullptr, 10);
    else if (k == "--prefetch")
      a.prefetch = std::atoll(v);
    else
      return false;
  }
  return (a.model == "mlp" || a.model == "cnn") && a.threads > 0 && a.epochs > 0 && a.prefetch >= 0;
}

/// Resident set size now (VmRSS of /proc/self/status), in KiB.
inline long current_rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

/// Peak resident set size of this process (getrusage), in KiB.
inline long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

/// The loaders of the examples: batch 64, shuffled with `seed`, normalized.
struct Data {
  ms::data::FashionMNIST train_set, test_set;
  ms::data::DataLoader train, test;
  Data(const ChildArgs& a)
      : train_set(a.data_dir, ms::data::Split::Train),
        test_set(a.data_dir, ms::data::Split::Test),
        train(train_set, {.batch_size = 64,
                          .shuffle = true,
                          .seed = a.seed,
                          .normalize = ms::data::Normalize{0.2860, 0.3530},
                          .flatten = a.model == "mlp",
                          .prefetch = a.prefetch}),
        test(test_set, {.batch_size = 1000,
                        .shuffle = false,
                        .normalize = ms::data::Normalize{0.2860, 0.3530},
                        .flatten = a.model == "mlp"}) {}
};

/// The line the driver parses (one per child, on stdout).
inline void print_result(const char* framework, const ChildArgs& a,
                         const std::vector<double>& epoch_seconds, double accuracy,
                         double last_epoch_loss, long start_rss, long compiles) {
  double total = 0;
  for (double s : epoch_seconds) total += s;
  std::printf(
      "RESULT fw=%s model=%s threads=%d epochs=%d sec_per_epoch=%.4f first_epoch_sec=%.4f "
      "acc=%.4f loss=%.4f peak_rss_kib=%ld start_rss_kib=%ld compiles=%ld\n",
      framework, a.model.c_str(), a.threads, a.epochs,
      total / static_cast<double>(epoch_seconds.size()), epoch_seconds.front(), accuracy,
      last_epoch_loss, peak_rss_kib(), start_rss, compiles);
  std::fflush(stdout);
}

}  // namespace bench::epoch
