// fashion_mnist_mlp — trains the MLP 784-512-256-10 (ReLU) on Fashion-MNIST
// with one jitted training step (forward, backward, Momentum update), then
// reports per-epoch time, throughput and test accuracy, saves a checkpoint
// and the loss / accuracy curves (CSV and SVG, per epoch and per step).
//
//   fashion_mnist_mlp                        # 3 epochs, batch 64, lr 0.05, momentum 0.9
//   fashion_mnist_mlp --epochs 1 --threads 1 --checkpoint mlp.safetensors
//   fashion_mnist_mlp --export mlp.onnx      # ONNX after training (libms_onnx); onnx_run runs it
//   fashion_mnist_mlp --amp O2 --amp-dtype bf16   # mixed precision, float32 master weights
//   fashion_mnist_mlp --resume mlp.safetensors --epochs 5   # warns if the saved run had another
//                                                           # count: the schedule now spans 5
#include "fashion_mnist_common.hpp"

struct MLP : ms::Cell<MLP> {
  ms::nn::Dense fc1{784, 512}, fc2{512, 256}, fc3{256, 10};
  MLP() { register_cells("fc1", fc1, "fc2", fc2, "fc3", fc3); }
  ms::Tensor construct(const ms::Tensor& x) { return fc3(ms::relu(fc2(ms::relu(fc1(x))))); }
};

int main(int argc, char** argv) {
  return examples::train_fashion_mnist<MLP>(
      "fashion_mnist_mlp", "Train an MLP (784-512-256-10) on Fashion-MNIST with ms", true, 3, argc,
      argv);
}
