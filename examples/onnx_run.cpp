// onnx_run — runs an ONNX model (fashion_mnist_mlp / _cnn --export) on the Fashion-MNIST test set.
#include <cstdio>
#include <ms/ms.hpp>
#include <ms/onnx/graph_cell.hpp>

int main(int argc, char** argv) try {
  if (argc < 2) return std::fprintf(stderr, "usage: onnx_run model.onnx [data-dir]\n"), 2;
  ms::GraphCell net(argv[1]);   // input [batch, 784] or [batch, 1, 28, 28], output logits
  auto forward = ms::jit(net);  // one graph for every batch size
  ms::data::FashionMNIST test(argc > 2 ? argv[2] : "/usr/share/datasets/fashion-mnist",
                              ms::data::Split::Test);
  ms::data::DataLoader loader(test, {.batch_size = 1000,
                                     .shuffle = false,
                                     .normalize = ms::data::Normalize{0.2860, 0.3530},
                                     .flatten = net.input_specs()[0].shape.size() == 2});
  std::int64_t right = 0;
  for (auto& [x, y] : loader)
    right += ms::sum(ms::eq(ms::argmax(forward(x), 1), y.to(ms::int64))).item<std::int64_t>();
  std::printf("test accuracy: %.2f%%\n", 100.0 * static_cast<double>(right) / test.size());
} catch (const ms::Error& e) {
  return std::fprintf(stderr, "onnx_run: %s\n", e.what()), 1;
}
