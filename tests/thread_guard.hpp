// Thread-count helpers of the tests: a guard that restores ms's thread count
// when a scope ends, and the check that a result does not depend on it.
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include <ms/core/tensor.hpp>
#include <ms/kernels/parallel.hpp>

namespace ms::test {

struct ThreadGuard {
  int saved = get_num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

/// True when a and b have the same dtype, shape and element bytes (row-major),
/// so NaN payloads and the sign of zero count.
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return ac.nbytes() == 0 ||
         std::memcmp(ac.raw_data(), bc.raw_data(), static_cast<std::size_t>(ac.nbytes())) == 0;
}

/// The result of a checked function as tensors, evaluated now (an expression
/// would otherwise be evaluated later, at another thread count).
template <class R>
std::vector<Tensor> evaluated(R&& r) {
  if constexpr (std::is_same_v<std::decay_t<R>, std::vector<Tensor>>)
    return r;
  else
    return {Tensor(std::forward<R>(r)).contiguous()};
}

/// Runs `fn` (returning a tensor, an expression or a std::vector<Tensor>) with 1
/// thread and with `threads` threads and checks the results are bitwise
/// identical (ms cuts work by shape, never by thread count). Restores the
/// thread count.
template <class F>
void check_thread_invariant(F&& fn, int threads = 2) {
  const ThreadGuard guard;
  set_num_threads(1);
  const std::vector<Tensor> one = evaluated(fn());
  set_num_threads(threads);
  const std::vector<Tensor> many = evaluated(fn());
  REQUIRE(one.size() == many.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK_MESSAGE(bitwise_equal(one[i], many[i]), "result ", i, ": 1 thread and ", threads,
                  " threads differ");
  }
}

}  // namespace ms::test
