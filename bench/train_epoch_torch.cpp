// bench/train_epoch_torch.cpp — the LibTorch child of train_epoch
// (bench/train_epoch.cpp runs it; see there): trains the MLP or the CNN with
// torch::nn and torch::optim::SGD (lr 0.05, momentum 0.9) for the given
// epochs on the batches of ms's DataLoader (the same order as the ms child),
// starting from ms's initial weights for the seed, then prints its RESULT line.
//
//   train_epoch_torch --model mlp --threads 1 --epochs 1 --seed 1 --data-dir DIR
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>

#include "openblas_core.hpp"
#include "train_models.hpp"

namespace {

using bench::epoch::ChildArgs;

/// A LibTorch view of an ms batch tensor (float32 images or int32 labels; the
/// batch outlives the step).
torch::Tensor view_of(const ms::Tensor& t) {
  std::vector<std::int64_t> sizes(t.shape().begin(), t.shape().end());
  const auto dtype = t.dtype() == ms::float32 ? torch::kFloat32 : torch::kInt32;
  return torch::from_blob(const_cast<std::byte*>(t.raw_data()), sizes, dtype);
}

template <class MsNet>
int run_torch(const ChildArgs& a) {
  using TNet = typename bench::TorchTwin<MsNet>::type;
  const long start_rss = bench::epoch::current_rss_kib();
  ms::set_num_threads(a.threads);
  at::set_num_threads(a.threads);
  bench::epoch::Data data(a);
  bench::TorchTrainer<TNet> t(0.05, 0.9);
  {
    // ms's initialization for this seed (as the ms child draws it).
    ms::default_generator().manual_seed(a.seed);
    MsNet init;
    t.net->copy_from(init);
  }

  std::vector<double> seconds;
  double epoch_loss = 0;
  t.net->train();
  for (int e = 0; e < a.epochs; ++e) {
    double sum = 0;
    std::int64_t steps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& b : data.train) {
      sum += t.step(view_of(b.x), view_of(b.y).to(torch::kInt64)).template item<float>();
      ++steps;
    }
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    epoch_loss = sum / static_cast<double>(steps);
  }
  std::int64_t right = 0, total = 0;
  {
    torch::NoGradGuard g;
    t.net->eval();
    for (auto& b : data.test) {
      const torch::Tensor pred = t.net->forward(view_of(b.x)).argmax(1);
      right += pred.eq(view_of(b.y).to(torch::kInt64)).sum().template item<std::int64_t>();
      total += b.x.dim(0);
    }
  }
  bench::epoch::print_result("torch", a, seconds,
                             static_cast<double>(right) / static_cast<double>(total), epoch_loss,
                             start_rss, 0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bench::use_best_openblas(argv);
  ChildArgs a;
  if (!bench::epoch::parse_child_args(argc, argv, 1, a)) {
    std::fprintf(stderr,
                 "usage: train_epoch_torch --model mlp|cnn --threads N --epochs E --seed S "
                 "--data-dir DIR\n");
    return 2;
  }
  try {
    return a.model == "mlp" ? run_torch<bench::MsMLP>(a) : run_torch<bench::MsCNN>(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "LibTorch child: %s\n", e.what());
    return 1;
  }
}
