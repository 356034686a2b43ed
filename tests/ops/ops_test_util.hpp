// Helpers of the op tests: the limits the edge cases use, the (h, w) pair of
// conv2d's and pooling's options, and pooling's output size.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ms_test {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kTwo40 = std::int64_t{1} << 40;
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

/// A stride, padding, dilation or kernel size of 2-D conv or pooling options:
/// {h, w}, or one value for both.
struct Hw {
  std::int64_t h, w;
};
inline Hw hw(const std::vector<std::int64_t>& v) { return {v[0], v.size() > 1 ? v[1] : v[0]}; }

/// Output size as PyTorch computes it (checked against recorded values in test_nn.cpp).
inline std::int64_t pool_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                              std::int64_t d, bool ceil_mode) {
  const double q = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  std::int64_t out = static_cast<std::int64_t>(ceil_mode ? std::ceil(q) : std::floor(q)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

}  // namespace ms_test
