// hooks_demo — cell hooks eagerly and inside compiled graphs.
//
// A forward hook records activation statistics (mean and fraction of zeros
// after each ReLU block), a backward hook clips the gradient flowing out of
// the last layer, and both run the same way in an eager training step and in
// an ms::jit-compiled one (where they are host-callback nodes of the graph).
//
//   hooks_demo
#include <cstdio>
#include <ms/cell.hpp>

namespace {

struct Block : ms::Cell<Block> {
  ms::nn::Dense fc;
  Block(std::int64_t in, std::int64_t out) : fc(in, out) { register_cells("fc", fc); }
  ms::Tensor construct(const ms::Tensor& x) { return ms::relu(fc(x)); }
};

struct Net : ms::Cell<Net> {
  Block b1{20, 64}, b2{64, 64};
  ms::nn::Dense head{64, 4};
  Net() { register_cells("b1", b1, "b2", b2, "head", head); }
  ms::Tensor construct(const ms::Tensor& x) { return head(b2(b1(x))); }
};

struct Stats {
  double mean = 0, zeros = 0;
  int calls = 0;
};

}  // namespace

int main() {
  Net net;
  ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.05, .momentum = 0.9});
  ms::Generator g(0);
  const ms::Tensor x = ms::normal({32, 20}, 0.0, 1.0, g);
  const ms::Tensor y = ms::argmax(x.slice(1, 0, 4), 1).to(ms::int32);

  // Activation statistics: the hook reads values (it runs on the host, with
  // concrete tensors, also under ms::jit).
  Stats s1, s2;
  auto stats_hook = [](Stats& s) {
    return [&s](Block&, const ms::Args&, const ms::Tensor& out) {
      s.mean = ms::mean(out).item<double>();
      s.zeros = ms::mean(ms::Tensor(ms::eq(out, 0.0f)).to(ms::float32)).item<double>();
      ++s.calls;
    };
  };
  ms::ScopedHook h1 = net.b1.register_forward_hook(stats_hook(s1));
  ms::ScopedHook h2 = net.b2.register_forward_hook(stats_hook(s2));
  // Gradient clipping: the gradient flowing into the head's output is
  // clipped to a maximum L2 norm of 0.5 per step.
  int clipped = 0;
  ms::ScopedHook h3 = net.head.register_backward_pre_hook([&](ms::nn::Dense&, const ms::Args& g) {
    const double norm = std::sqrt(ms::sum(ms::square(g[0])).item<double>());
    if (norm <= 0.5) return ms::Args{g[0]};
    ++clipped;
    return ms::Args{ms::Tensor(g[0] * static_cast<float>(0.5 / norm))};
  });

  auto loss_fn = [&](const ms::Tensor& a, const ms::Tensor& b) {
    return ms::nn::cross_entropy(net(a), b, {.reduction = "sum"});
  };
  auto step = [&](const ms::Tensor& a, const ms::Tensor& b) {
    auto [loss, grads] =
        ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(a, b);
    opt.apply(grads);
    return loss;
  };
  auto jitted = ms::jit(step);

  std::printf("step  mode   loss      b1 mean  b1 zeros  b2 mean  b2 zeros  clipped\n");
  for (int i = 0; i < 6; ++i) {
    const bool use_jit = i >= 3;
    const double loss = (use_jit ? jitted(x, y) : step(x, y)).item<double>();
    std::printf("%4d  %-5s  %8.4f  %7.4f  %8.3f  %7.4f  %8.3f  %7d\n", i + 1,
                use_jit ? "jit" : "eager", loss, s1.mean, s1.zeros, s2.mean, s2.zeros, clipped);
  }
  std::printf("forward hook calls: b1 %d, b2 %d (one per step, eager or compiled)\n", s1.calls,
              s2.calls);
  std::printf("compiled graphs: %zu\n", static_cast<std::size_t>(jitted.compile_count()));
  return 0;
}
