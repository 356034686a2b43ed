// The seeded random tensors of the tests: one generator, deterministic for a
// given dtype, shape, range and seed, so a failing case can be rerun alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <random>
#include <vector>

#include <ms/core/tensor.hpp>

namespace ms::test {

/// Where random_tensor draws its values. The fields mirror ops::Domain, so an
/// op's domain converts with range_of.
struct Range {
  double lo = -1, hi = 1;                ///< floats (both parts of complex): uniform in [lo, hi)
  std::int64_t int_lo = -4, int_hi = 4;  ///< integers: uniform in [int_lo, int_hi] (>= 0 unsigned)
  bool halves = false;      ///< floats rounded to multiples of 0.5 (ties, equal elements)
  bool avoid_zero = false;  ///< floats |x| >= 0.25, integers x != 0 (redrawn)
};

/// The Range of an op's ops::Domain (or any struct with its fields).
template <class D>
Range range_of(const D& d) {
  return {d.lo,
          d.hi,
          static_cast<std::int64_t>(d.int_lo),
          static_cast<std::int64_t>(d.int_hi),
          d.halves,
          d.avoid_zero};
}

/// A contiguous tensor of `dtype` and `shape` with values drawn from `r` by a
/// std::mt19937 seeded with `seed`: the same arguments give the same tensor.
/// bool is 0 or 1 with equal odds.
inline Tensor random_tensor(DType dtype, const Shape& shape, Range r, std::uint32_t seed) {
  std::mt19937 gen(seed);
  const auto n = static_cast<std::size_t>(shape_numel(shape));
  const auto draw = [&] {
    if (dtype == bool_) return static_cast<double>(gen() % 2);
    if (dtype_is_int(dtype)) {
      const std::int64_t hi = r.int_hi;
      const std::int64_t lo = dtype_is_unsigned_int(dtype) && r.int_lo < 0 ? 0 : r.int_lo;
      std::uniform_int_distribution<std::int64_t> d(lo, hi);
      std::int64_t x = d(gen);
      while (r.avoid_zero && x == 0 && (lo != 0 || hi != 0)) x = d(gen);
      return static_cast<double>(x);
    }
    std::uniform_real_distribution<double> d(r.lo, r.hi);
    double x = 0;
    do {
      x = d(gen);
      if (r.halves) x = std::clamp(std::round(x * 2) / 2, r.lo, r.hi);
    } while (r.avoid_zero && std::fabs(x) < 0.25);
    return x;
  };
  if (dtype_is_complex(dtype)) {
    std::vector<std::complex<double>> v(n);
    for (auto& x : v) {
      const double re = draw();
      x = {re, draw()};
    }
    return from_vector(v, shape).to(dtype);
  }
  std::vector<double> v(n);
  for (double& x : v) x = draw();
  return from_vector(v, shape).to(dtype);
}

}  // namespace ms::test
