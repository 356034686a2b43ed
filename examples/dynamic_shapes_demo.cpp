// dynamic_shapes_demo — one compiled training step for every batch size.
//
// The same jitted training step (MLP forward, cross-entropy, backward,
// Momentum update) is fed a stream of changing batch sizes four ways:
//   static        ms::jit(step)                           a graph per shape
//   all_dims      {.dynamic = 1}                          MindSpore's manager: 2 static
//                                                         graphs, then one generalized graph
//   changed_dims  {.dynamic = 1,                          only the batch dim becomes a symbol
//                  .dynamic_policy = ms::DynamicPolicy::ChangedDims}
//   signature     {.input_signature = {[batch,784], [batch]}}   one graph from the start
// It prints, per call, the compile count of each, then each one's recompile
// log (why every graph was compiled) and the time of a third pass over the
// stream, when every size has been compiled and its memory planned.
//
//   dynamic_shapes_demo            (MS_LOG_RECOMPILES=1 also logs to stderr)
#include <chrono>
#include <cstdio>
#include <ms/cell.hpp>
#include <string>
#include <vector>

namespace {

struct MLP : ms::Cell<MLP> {
  ms::nn::Dense fc1{784, 256}, fc2{256, 10};
  MLP() { register_cells("fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
};

struct Variant {
  std::string name;
  MLP net;
  ms::optim::Momentum opt{net.trainable_params(), {.lr = 0.05, .momentum = 0.9}};
  std::vector<std::string> log;
  std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)> step() {
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
};

}  // namespace

int main() {
  const std::vector<std::int64_t> sizes{64, 64, 32, 17, 100, 1, 256, 64, 33, 200, 17, 5};
  ms::Generator g(0);
  std::vector<ms::Tensor> xs, ys;
  for (std::int64_t n : sizes) {
    xs.push_back(ms::normal({n, 784}, 0.0, 1.0, g));
    ys.push_back(ms::randint(0, 10, {n}, ms::int32));
  }

  Variant v[4];
  const char* names[4] = {"static", "all_dims", "changed_dims", "signature"};
  ms::JitConfig cfg[4];
  cfg[1].dynamic = 1;
  cfg[2].dynamic = 1;
  cfg[2].dynamic_policy = ms::DynamicPolicy::ChangedDims;
  const ms::Dim batch("batch");
  cfg[3].input_signature = {ms::TensorSpec({batch, 784}, ms::float32),
                            ms::TensorSpec({batch}, ms::int32)};
  using Step = decltype(ms::jit(v[0].step()));
  std::vector<Step> steps;
  for (int k = 0; k < 4; ++k) {
    v[k].name = names[k];
    v[k].net.load_state_dict(v[0].net.state_dict());  // the same start for all four
    cfg[k].on_recompile = [&log = v[k].log](const std::string& l) { log.push_back(l); };
    steps.push_back(ms::jit(v[k].step(), cfg[k]));
  }

  std::printf("%6s  %6s  %8s  %12s  %9s   %s\n", "batch", "static", "all_dims", "changed_dims",
              "signature", "loss (the same for all four)");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    float loss[4];
    for (int k = 0; k < 4; ++k) loss[k] = steps[k](xs[i], ys[i]).item<float>();
    std::printf(
        "%6lld  %6d  %8d  %12d  %9d   %.6f%s\n", static_cast<long long>(sizes[i]),
        steps[0].compile_count(), steps[1].compile_count(), steps[2].compile_count(),
        steps[3].compile_count(), loss[0],
        loss[1] == loss[0] && loss[2] == loss[0] && loss[3] == loss[0] ? "" : "  (differs!)");
  }

  for (int k = 0; k < 4; ++k) {
    std::printf("\n%s: %d graphs compiled, %d traces; why:\n", names[k], steps[k].compile_count(),
                steps[k].trace_count());
    for (const std::string& l : v[k].log) std::printf("  %s\n", l.c_str());
  }

  // Pass 1 compiled or instantiated each size; pass 2 planned its memory;
  // pass 3 is the steady state.
  for (int k = 0; k < 4; ++k)
    for (std::size_t i = 0; i < sizes.size(); ++i) steps[k](xs[i], ys[i]);
  std::printf("\nthird pass over the stream (every size seen twice already):\n");
  for (int k = 0; k < 4; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < sizes.size(); ++i) steps[k](xs[i], ys[i]);
    const double ms_total =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  %-13s %7.2f ms, compiles now %d\n", names[k], ms_total,
                steps[k].compile_count());
  }
  std::printf("\nlast graph of all_dims, as traced with symbolic dims and as instantiated:\n%s",
              steps[1].dump().c_str());
  return 0;
}
