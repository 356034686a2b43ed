#include "ms/kernels/parallel.hpp"

#include <omp.h>

#include <atomic>

#include "ms/core/error.hpp"

#if defined(MS_HAVE_BLAS)
extern "C" void openblas_set_num_threads(int);
#endif

namespace ms {
namespace {
std::atomic<int> g_threads{0};  // 0: not set yet, use the OpenMP default

int initial_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = omp_get_max_threads();
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}
}  // namespace

void set_num_threads(int n) {
  MS_CHECK(n >= 1, ValueError, "set_num_threads: n must be >= 1, got ", n);
  g_threads.store(n);
  omp_set_num_threads(n);
#if defined(MS_HAVE_BLAS)
  openblas_set_num_threads(n);
#endif
}

int get_num_threads() { return initial_threads(); }

namespace kernels::detail {

bool in_parallel() { return omp_in_parallel() != 0; }

int omp_threads_for(std::int64_t n, std::int64_t grain) {
  if (in_parallel()) return 1;
  const int nt = initial_threads();
  if (nt <= 1 || n <= grain) return 1;
  const std::int64_t by_grain = (n + grain - 1) / (grain > 0 ? grain : 1);
  return static_cast<int>(by_grain < nt ? by_grain : nt);
}

}  // namespace kernels::detail
}  // namespace ms
