// A row-major matrix held in a vector, transposed: for tests that compare a
// product or a decomposition against one computed on the other layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ms::test {

// v, [rows, cols] row-major, as [cols, rows].
template <class T>
std::vector<T> transposed(const std::vector<T>& v, std::int64_t rows, std::int64_t cols) {
  std::vector<T> t(v.size());
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      t[static_cast<std::size_t>(j * rows + i)] = v[static_cast<std::size_t>(i * cols + j)];
  return t;
}

}  // namespace ms::test
