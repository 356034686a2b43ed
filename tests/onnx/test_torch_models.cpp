// ms::GraphCell on models PyTorch exported (tests/onnx/torch_fixtures, written
// by tests/onnx/torch_export_models.py): an MLP, a CNN with BatchNorm2d and an
// nn.TransformerEncoderLayer at opsets 13 and 17, matching PyTorch's outputs
// eagerly and under ms::jit at two batch sizes.
#include <doctest/doctest.h>

#include <string>

#include "onnx/torch_models_check.hpp"

TEST_CASE("GraphCell: models exported by PyTorch give PyTorch's outputs") {
  const ms_onnx_test::TorchCheck r =
      ms_onnx_test::check_torch_models(std::string(MS_SOURCE_ROOT) + "/tests/onnx/torch_fixtures");
  for (const std::string& f : r.failures) FAIL_CHECK(f);
  CHECK(r.failures.empty());
  CHECK(r.models == 8);  // mlp, cnn, encoder, gated at opsets 13 and 17
  CHECK(r.runs == 16);   // two batch sizes each
}
