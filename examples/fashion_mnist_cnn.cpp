// fashion_mnist_cnn — trains a small CNN on Fashion-MNIST: conv 1->32 (3x3,
// same), ReLU, max pool 2, conv 32->64 (3x3, same), ReLU, max pool 2,
// fc 3136->128, ReLU, fc 128->10; one jitted training step, as the MLP example.
//
//   fashion_mnist_cnn --epochs 3 --threads 2
//   fashion_mnist_cnn --amp O2 --amp-dtype bf16   # mixed precision, float32 master weights
#include "fashion_mnist_common.hpp"

struct CNN : ms::Cell<CNN> {
  ms::nn::Conv2d conv1{1, 32, 3, {}, {.has_bias = true}}, conv2{32, 64, 3, {}, {.has_bias = true}};
  ms::nn::MaxPool2d pool{2};
  ms::nn::Dense fc1{3136, 128}, fc2{128, 10};
  CNN() { register_cells("conv1", conv1, "conv2", conv2, "pool", pool, "fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) {
    ms::Tensor h = pool(ms::relu(conv1(x)));
    h = pool(ms::relu(conv2(h)));
    return fc2(ms::relu(fc1(h.flatten(1))));
  }
};

int main(int argc, char** argv) {
  return examples::train_fashion_mnist<CNN>(
      "fashion_mnist_cnn", "Train a small CNN on Fashion-MNIST with ms", false, 3, argc, argv);
}
