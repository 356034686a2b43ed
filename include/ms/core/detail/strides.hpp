// ms/core/detail/strides.hpp — dense layouts in a given order of dims.
//
// Stage: core (private). A result laid out as one of its inputs (the
// elementwise kernels, attention's outputs and gradients) is dense in the
// order of that input's strides: these find that order, check a layout
// against it and make the strides of a dense layout in it.
#pragma once

#if !defined(MS_BUILDING_LIBRARY)
#error "ms/core/detail/strides.hpp is private to libms: include <ms/core/tensor.hpp>"
#endif

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace ms::detail {

// The dims from the largest stride to the smallest (ties in dim order): the
// order in which a dense tensor laid out alike holds them.
inline std::vector<std::int64_t> stride_order(std::span<const std::int64_t> strides) {
  std::vector<std::int64_t> order(strides.size());
  for (std::size_t d = 0; d < order.size(); ++d) order[d] = static_cast<std::int64_t>(d);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return strides[static_cast<std::size_t>(a)] > strides[static_cast<std::size_t>(b)];
  });
  return order;
}

// True when `strides` hold `shape` densely with its dims in `order` (the
// last one innermost); dims of size 1 may have any stride.
inline bool dense_in(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                     std::span<const std::int64_t> order) {
  std::int64_t expect = 1;
  for (std::size_t k = order.size(); k-- > 0;) {
    const auto d = static_cast<std::size_t>(order[k]);
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

// The strides of a dense layout of `shape` holding its dims in `order`.
inline std::vector<std::int64_t> dense_strides(std::span<const std::int64_t> shape,
                                               std::span<const std::int64_t> order) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t expect = 1;
  for (std::size_t k = order.size(); k-- > 0;) {
    const auto d = static_cast<std::size_t>(order[k]);
    strides[d] = expect;
    expect *= shape[d];
  }
  return strides;
}

}  // namespace ms::detail
