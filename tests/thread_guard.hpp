// Restores ms's thread count when a scope ends, so a test that switches
// between 1 and 2 threads leaves the next test as it found it.
#pragma once

#include <ms/kernels/parallel.hpp>

namespace ms::test {

struct ThreadGuard {
  int saved = get_num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

}  // namespace ms::test
