// Helpers shared by the jit tests.
#pragma once

#include <ms/ms.hpp>
#include <random>
#include <vector>

namespace ms::test {

/// A tensor of shape `s` with values uniform in [-2, 2) from seed `seed`.
inline Tensor rand_t(const Shape& s, unsigned seed, DType dt = float32) {
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(shape_numel(s)));
  for (double& x : v) x = std::uniform_real_distribution<double>(-2, 2)(rng);
  return from_vector(v, s).to(dt);
}

}  // namespace ms::test
