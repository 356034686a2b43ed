// The pooling calls of the op tests, by position: the tests run tables of
// (kernel, stride, padding, dilation, ceil_mode, count_include_pad) through
// ms::max_pool2d and friends, whose options these fill field by field.
#pragma once

#include <cstdint>
#include <ms/ms.hpp>
#include <vector>

namespace ms::test {

using PoolInts = std::vector<std::int64_t>;

inline ms::Tensor max_pool(const ms::Tensor& x, PoolInts k, PoolInts s = {}, PoolInts p = {0, 0},
                           PoolInts d = {1, 1}, bool ceil_mode = false) {
  return ms::max_pool2d(
      x, {.kernel = k, .stride = s, .padding = p, .dilation = d, .ceil_mode = ceil_mode});
}

inline ms::Tensor avg_pool(const ms::Tensor& x, PoolInts k, PoolInts s = {}, PoolInts p = {0, 0},
                           bool ceil_mode = false, bool count_include_pad = true) {
  return ms::avg_pool2d(x, {.kernel = k,
                            .stride = s,
                            .padding = p,
                            .ceil_mode = ceil_mode,
                            .count_include_pad = count_include_pad});
}

inline ms::Tensor max_pool_grad(const ms::Tensor& x, const ms::Tensor& g, PoolInts k,
                                PoolInts s = {}, PoolInts p = {0, 0}, PoolInts d = {1, 1},
                                bool ceil_mode = false) {
  return ms::max_pool2d_grad(
      x, g, {.kernel = k, .stride = s, .padding = p, .dilation = d, .ceil_mode = ceil_mode});
}

inline ms::Tensor avg_pool_grad(const ms::Tensor& g, const ms::Shape& input_size, PoolInts k,
                                PoolInts s = {}, PoolInts p = {0, 0}, bool ceil_mode = false,
                                bool count_include_pad = true) {
  return ms::avg_pool2d_grad(g, input_size,
                             {.kernel = k,
                              .stride = s,
                              .padding = p,
                              .ceil_mode = ceil_mode,
                              .count_include_pad = count_include_pad});
}

}  // namespace ms::test
