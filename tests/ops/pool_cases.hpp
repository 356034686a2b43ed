// tests/ops/pool_cases.hpp — pooling cases shared by test_nn.cpp (forward) and
// test_nn_grad.cpp (gradients): the case type, and inputs that stress max
// pooling's tie and NaN rules on both of its kernels.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <ms/core/tensor.hpp>

namespace ms_test {

struct PoolCase {
  ms::Shape x;
  std::vector<std::int64_t> kernel, stride, padding, dilation;
  bool ceil_mode, count_include_pad;
};

/// Values that stress max pooling's tie and NaN rules: half zeros of either
/// sign (relu outputs tie at 0), some ±1 and 0.5, ±inf, and 2% NaN (so some
/// rows of windows hold a NaN and others do not).
inline ms::Tensor pool_stress_tensor(const ms::Shape& shape, ms::DType dt, std::uint32_t seed) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(ms::shape_numel(shape)));
  for (double& e : v) {
    const unsigned r = rng() % 100;
    e = r < 50   ? (r % 2 == 0 ? 0.0 : -0.0)
        : r < 80 ? (r % 3 == 0   ? 1.0
                    : r % 3 == 1 ? -1.0
                                 : 0.5)
        : r < 90 ? inf
        : r < 98 ? -inf
                 : std::numeric_limits<double>::quiet_NaN();
  }
  return ms::from_vector(v, shape).to(dt);
}

/// 2x2 windows at stride 2 on even and odd sizes (the dedicated kernel), and
/// cases that take the general kernel (partial windows, padding, overlap).
inline const std::vector<PoolCase> kPoolStressCases = {
    {{2, 3, 8, 10}, {2}, {}, {0}, {1}, false, true},
    {{2, 3, 7, 9}, {2}, {}, {0}, {1}, false, true},
    {{1, 2, 7, 9}, {2}, {2}, {0}, {1}, true, true},
    {{1, 2, 6, 6}, {3}, {2}, {1}, {1}, false, true},
    {{1, 2, 6, 6}, {2}, {1}, {0}, {1}, false, true},
};

}  // namespace ms_test
