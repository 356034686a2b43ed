// bench/compile_time_sample_torch.cpp — the LibTorch twin of
// bench/compile_time_sample.cpp, compiled beside it by bench/compile_time.sh:
// the same 3-layer model (784-256-128-10, ReLU), the same training step
// (cross-entropy, SGD with momentum 0.9, lr 0.05) and the same main, written
// with <torch/torch.h>.
#include <torch/torch.h>

#include <cstdio>

struct Net : torch::nn::Module {
  torch::nn::Linear fc1{784, 256}, fc2{256, 128}, fc3{128, 10};
  Net() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
};

int main() {
  torch::manual_seed(1);
  Net net;
  torch::optim::SGD opt(net.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  auto step = [&](const torch::Tensor& x, const torch::Tensor& y) {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net.forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  const torch::Tensor x = torch::randn({32, 784});
  const torch::Tensor y = torch::randint(0, 10, {32}, torch::kInt64);
  for (int i = 0; i < 5; ++i) std::printf("step %d: loss %.4f\n", i, step(x, y).item<float>());
  return 0;
}
