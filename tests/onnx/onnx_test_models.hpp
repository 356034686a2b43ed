// The models the ONNX tests export and load (export and GraphCell alike),
// their checks on messages, outputs and serialized models, and the python3
// the interoperability checks run.
#pragma once

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ms/cell.hpp"

namespace ms_onnx_test {

/// Whether `msg` contains `part` (prints `msg` when it does not).
inline bool has(const std::string& msg, const std::string& part) {
  const bool found = msg.find(part) != std::string::npos;
  if (!found) MESSAGE(msg);
  return found;
}

/// max |a - b| / max(1, |b|) over the elements (a NaN in a gives NaN).
inline double max_rel_diff(const ms::Tensor& a, const ms::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = ms::cast(a, ms::float64).contiguous().to_vector<double>();
  const auto y = ms::cast(b, ms::float64).contiguous().to_vector<double>();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]) / std::max(1.0, std::abs(y[i]));
    if (!(d <= m)) m = d;  // NaN sticks
  }
  return m;
}

/// The serialized bytes of `m`.
inline std::string bytes_of(const ::onnx::ModelProto& m) {
  std::string s;
  REQUIRE(m.SerializeToString(&s));
  return s;
}

/// The message of the error of class E that `f()` raises (a test failure when none).
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("no error");
  return {};
}

/// The Fashion-MNIST MLP (784 -> hidden -> 10).
template <std::int64_t Hidden>
struct Mlp : ms::Cell<Mlp<Hidden>> {
  ms::nn::Dense fc1{784, Hidden}, fc2{Hidden, 10};
  Mlp() { this->register_cells("fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
};

/// The CNN of examples/fashion_mnist_cnn.cpp, with fewer channels.
struct CNN : ms::Cell<CNN> {
  ms::nn::Conv2d conv1{1, 4, 3, {}, {.has_bias = true}}, conv2{4, 8, 3, {}, {.has_bias = true}};
  ms::nn::MaxPool2d pool{2};
  ms::nn::BatchNorm2d bn{8};
  ms::nn::Dense fc1{392, 16}, fc2{16, 10};
  CNN() {
    register_cells("conv1", conv1, "conv2", conv2, "pool", pool, "bn", bn, "fc1", fc1, "fc2", fc2);
  }
  ms::Tensor construct(const ms::Tensor& x) {
    ms::Tensor h = pool(ms::relu(conv1(x)));
    h = pool(ms::relu(bn(conv2(h))));
    return ms::log_softmax(fc2(ms::relu(fc1(h.flatten(1)))), 1);
  }
};

/// A python3 that imports onnx and numpy: the one on PATH, else Debian's
/// /usr/bin/python3 (python3-onnx installs there); empty when neither does.
inline std::string python_with_onnx() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const std::string cmd = std::string(py) + " -c 'import onnx, numpy' > /dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return {};
}

}  // namespace ms_onnx_test
