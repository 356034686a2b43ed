// A whole training step (forward, cross-entropy, backward, Momentum update)
// under auto-dynamic shapes: one generalized graph serves every batch size,
// and the parameters it produces equal those of static graphs, step by step.
#include <doctest/doctest.h>

#include <ms/cell.hpp>
#include <ms/ms.hpp>
#include <random>

namespace {

struct StepNet : ms::Cell<StepNet> {
  ms::nn::Dense fc1{12, 16}, fc2{16, 5};
  StepNet() { register_cells("fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
};

struct Trainer {
  StepNet net;
  ms::optim::Momentum opt{net.trainable_params(), {.lr = 0.05, .momentum = 0.9}};
  std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)> fn() {
    return [this](const ms::Tensor& x, const ms::Tensor& y) {
      auto loss_fn = [this](const ms::Tensor& a, const ms::Tensor& b) {
        return ms::nn::cross_entropy(net(a), b);
      };
      auto [loss, grads] = ms::value_and_grad(
          loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
      opt.apply(grads);
      return loss;
    };
  }
  explicit Trainer(std::uint64_t seed) {
    ms::Generator g(seed);
    for (auto& p : net.parameters()) p.set_data(ms::normal(p.shape(), 0.0, 0.3, g));
  }
};

}  // namespace

TEST_CASE("train: a jitted training step over changing batch sizes, auto-dynamic vs static") {
  Trainer a(1), b(1);
  std::vector<std::string> log;
  ms::JitConfig dyn;
  dyn.dynamic = 1;
  dyn.on_recompile = [&](const std::string& l) { log.push_back(l); };
  auto step_dyn = ms::jit(a.fn(), dyn);
  auto step_static = ms::jit(b.fn());
  std::mt19937 rng(5);
  ms::Generator g(9);
  std::vector<std::int64_t> sizes{64, 32, 17, 64, 1, 50, 3, 64, 17, 128};
  for (std::int64_t n : sizes) {
    const ms::Tensor x = ms::normal({n, 12}, 0.0, 1.0, g);
    const ms::Tensor y = ms::randint(0, 5, {n}, g).to(ms::int32);
    const ms::Tensor la = step_dyn(x, y), lb = step_static(x, y);
    CHECK(ms::allclose(la, lb, 0, 0));
  }
  const auto pa = a.net.parameters(), pb = b.net.parameters();
  REQUIRE(pa.size() == pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) CHECK(ms::allclose(pa[i], pb[i], 0, 0));
  CHECK(step_dyn.compile_count() == 3);  // 64, 32 static; then one generalized graph
  CHECK(step_dyn.generalized_count() == 1);
  std::string all;
  for (const auto& l : log) all += l + "\n";
  INFO(all);
  CHECK(all.find("cannot be generalized") == std::string::npos);
  CHECK(all.find("traced a graph of their own") == std::string::npos);
  CHECK(step_static.compile_count() == 7);
}
