// onnx_torch_check DIR: checks the models tests/onnx/torch_export_models.py
// wrote to DIR with ms::GraphCell (tests/onnx/torch_models_check.hpp); exit 0
// when every model matches PyTorch's outputs within 1e-5, 1 otherwise.
#include <cstdio>

#include "onnx/torch_models_check.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx_torch_check DIR\n");
    return 2;
  }
  const ms_onnx_test::TorchCheck r = ms_onnx_test::check_torch_models(argv[1]);
  for (const std::string& f : r.failures) std::printf("FAIL %s\n", f.c_str());
  std::printf("%d models, %d runs, %zu failures\n", r.models, r.runs, r.failures.size());
  return r.failures.empty() && r.models > 0 ? 0 : 1;
}
