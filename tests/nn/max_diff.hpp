// The largest elementwise |a - b| of two tensors of one shape (read as
// doubles), for tests that compare two computations of the same values.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <ms/core/tensor.hpp>

namespace ms_test {

inline double max_diff(const ms::Tensor& a, const ms::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace ms_test
