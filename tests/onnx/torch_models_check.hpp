// The check of the models tests/onnx/torch_export_models.py writes (PyTorch's
// exporter, PyTorch's outputs): each loaded as ms::GraphCell and run eagerly
// and under ms::jit (one compiled graph for every batch size) at each batch
// size of the manifest, against PyTorch's output. Used by the committed
// fixtures' doctest (test_torch_models.cpp) and by the integration test that
// regenerates them (onnx_torch_check.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ms/cell.hpp"
#include "ms/io/npy.hpp"
#include "ms/onnx/graph_cell.hpp"

namespace ms_onnx_test {

/// What check_torch_models found.
struct TorchCheck {
  int models = 0;                     ///< manifest lines read
  int runs = 0;                       ///< (model, batch size) pairs compared
  std::vector<std::string> failures;  ///< one line per mismatch or error
};

/// The largest |a - b| / (1 + |b|): absolute for outputs of order 1 or less,
/// relative above (b is PyTorch's); infinity when the shapes differ.
inline double max_mixed_diff(const ms::Tensor& a, const ms::Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  const auto x = ms::cast(a, ms::float64).contiguous().to_vector<double>();
  const auto y = ms::cast(b, ms::float64).contiguous().to_vector<double>();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    m = std::max(m, std::abs(x[i] - y[i]) / (1 + std::abs(y[i])));
  return m;
}

/// Compares one model (manifest line `line` of `dir`) eagerly and under jit.
inline void check_torch_model(const std::string& dir, const std::string& line, double tol,
                              TorchCheck& r) {
  std::istringstream ss(line);
  std::string name;
  ss >> name;
  ms::GraphCell g(dir + "/" + name + ".onnx");
  auto jg = ms::jit(g);
  for (std::int64_t b = 0; ss >> b;) {
    const std::string stem = dir + "/" + name + ".b" + std::to_string(b);
    const ms::Tensor x = ms::io::load_npy(stem + ".in0.npy");
    const ms::Tensor want = ms::io::load_npy(stem + ".out0.npy");
    const double de = max_mixed_diff(g(x), want), dj = max_mixed_diff(jg(x), want);
    ++r.runs;
    if (!(de <= tol && dj <= tol))
      r.failures.push_back(name + " batch " + std::to_string(b) +
                           ": max |diff| / (1 + |want|) eager " + std::to_string(de) + ", jit " +
                           std::to_string(dj));
  }
  if (jg.compile_count() != 1)
    r.failures.push_back(name + ": ms::jit compiled " + std::to_string(jg.compile_count()) +
                         " graphs (the batch dim should be dynamic)");
}

/// Checks every model of `dir`/manifest.txt within `tol` of PyTorch's outputs.
inline TorchCheck check_torch_models(const std::string& dir, double tol = 1e-5) {
  TorchCheck r;
  std::ifstream manifest(dir + "/manifest.txt");
  if (!manifest) r.failures.push_back("no manifest.txt in " + dir);
  for (std::string line; std::getline(manifest, line);) {
    if (line.empty()) continue;
    ++r.models;
    try {
      check_torch_model(dir, line, tol, r);
    } catch (const std::exception& e) {
      r.failures.push_back(line + ": " + e.what());
    }
  }
  return r;
}

}  // namespace ms_onnx_test
