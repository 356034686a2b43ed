// ms/kernels/parallel.hpp — intra-op threading on one pool shared with BLAS.
//
// Stage: kernels. ms runs its kernels on the OpenMP pool, and links the OpenMP
// build of OpenBLAS, so ms and its GEMM share one set of worker threads (two
// pools spinning against each other on a 2-core machine make everything
// slower). `ms::set_num_threads` sets both.
#pragma once

#include <omp.h>

#include <cstdint>

namespace ms {

/// Sets the number of threads ms kernels and BLAS use (>= 1).
/// Example: `ms::set_num_threads(2);`
void set_num_threads(int n);
/// The number of threads kernels use.
int get_num_threads();

namespace kernels {

/// Splits [0, n) into contiguous chunks of at least `grain` items and calls
/// `fn(begin, end)` for each, on the shared pool. Chunk boundaries depend only
/// on n, grain and the thread count, and every item is computed by exactly one
/// call, so elementwise results are bitwise identical for any thread count.
/// Runs inline (no pool) when n <= grain or one thread is set, or when called
/// from inside a parallel region. `fn` must not throw: validate before.
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& fn);

namespace detail {
int omp_threads_for(std::int64_t n, std::int64_t grain);
bool in_parallel();
}  // namespace detail

template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& fn) {
  if (n <= 0) return;
  const int nt = detail::omp_threads_for(n, grain);
  if (nt <= 1) {
    fn(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const std::int64_t chunk = (n + nt - 1) / nt;
    const std::int64_t b = static_cast<std::int64_t>(t) * chunk;
    const std::int64_t e = b + chunk < n ? b + chunk : n;
    if (b < e) fn(b, e);
  }
}

}  // namespace kernels
}  // namespace ms
