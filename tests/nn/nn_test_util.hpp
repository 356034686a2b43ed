// Helpers of the nn tests: seeded normal inputs, and the small MLP the cell
// tests build on.
#pragma once

#include <cstdint>
#include <vector>

#include <ms/cell.hpp>

namespace ms_test {

/// Standard normal draws of `shape` from a generator seeded with `seed`, in `dt`.
inline ms::Tensor randn(std::vector<std::int64_t> shape, std::uint64_t seed,
                        ms::DType dt = ms::float32) {
  ms::Generator g(seed);
  return ms::normal(ms::Shape(shape), 0.0, 1.0, g).to(dt);
}

/// A batch of n inputs of 4 features: standard normal draws from `seed`.
inline ms::Tensor input(std::int64_t n = 2, std::uint64_t seed = 3) {
  ms::Generator g(seed);
  return ms::normal({n, 4}, 0.0, 1.0, g);
}

/// 4 features -> 8 -> relu -> 3.
struct MLP : ms::Cell<MLP> {
  ms::nn::Dense fc1{4, 8}, fc2{8, 3};
  MLP() { register_cells("fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
};

}  // namespace ms_test
