// bench/compile_time_sample.cpp — a typical user translation unit, timed by
// bench/compile_time.sh (budget: under 15 s at -O2 on one core): it
// includes <ms/cell.hpp>, defines a 3-layer Cell and a jitted training step
// (forward, backward, Momentum update in one graph), and a main that runs a
// few steps on random data.
#include <ms/cell.hpp>

#include <cstdio>

struct Net : ms::Cell<Net> {
  ms::nn::Dense fc1{784, 256}, fc2{256, 128}, fc3{128, 10};
  Net() { register_cells("fc1", fc1, "fc2", fc2, "fc3", fc3); }
  ms::Tensor construct(const ms::Tensor& x) { return fc3(ms::relu(fc2(ms::relu(fc1(x))))); }
};

int main() {
  ms::default_generator().manual_seed(1);
  Net net;
  ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.05, .momentum = 0.9});
  auto loss_fn = [&](const ms::Tensor& x, const ms::Tensor& y) {
    return ms::nn::cross_entropy(net(x), y);
  };
  auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
    auto [loss, grads] =
        ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
    opt.apply(grads);
    return loss;
  });
  const ms::Tensor x = ms::normal({32, 784}, 0.0, 1.0);
  const ms::Tensor y = ms::randint(0, 10, {32}, ms::int32);
  for (int i = 0; i < 5; ++i) std::printf("step %d: loss %.4f\n", i, step(x, y).item<float>());
  return 0;
}
