// The same values as a tensor, in a non-contiguous layout (stride 2, offset 1),
// for tests that check an op or a graph reads strided inputs like dense ones.
#pragma once

#include <cstdint>
#include <vector>

#include <ms/core/tensor.hpp>

namespace ms::test {

inline Tensor strided(const Tensor& x) {
  std::vector<std::int64_t> d = x.shape().to_vector();
  d.push_back(2);
  Tensor v = zeros(Shape(d), x.dtype()).select(-1, 1);
  v.copy_(x);
  return v;
}

}  // namespace ms::test
