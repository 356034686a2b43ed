// ms/kernels/parallel.hpp — intra-op threading on ms's own thread pool.
//
// Stage: kernels. Every ms kernel that uses more than one thread goes through
// `parallel_for`, which runs on a pool of `get_num_threads() - 1` workers kept
// by libms. The caller and the workers claim the chunks of a call one by one,
// so a chunk is never left waiting for a worker the scheduler has parked (a
// shared machine): the caller or a running worker takes it. A chunk already
// claimed by a thread that was then parked does hold the call; after such a
// wait the next calls are cut into more chunks than threads (up to
// `detail::kStallChunksPerThread` per thread), so that a parked thread holds
// only a small part of a call. A worker that has
// just finished a chunk spins for a short while before it sleeps (yielding
// its core when it notices another program wants it), so the next call
// of a chain of small ops reaches it in well under a microsecond: an OpenMP
// parallel region (libgomp) costs ~2.4 us and an OpenMP barrier ~1.2 us on
// the 2-core VMs this project is measured on, which kept small products on one
// thread. While the machine is crowded (other programs' running threads and a
// call's would be more than the cores in two readings of /proc/loadavg, made
// at most every 10 ms) the caller runs a call's chunks alone. With the
// `openblas` GEMM backend (`gemm_backend()`: OpenBLAS's OpenMP build, which
// expects to be called from OpenMP's threads), `parallel_for` opens OpenMP
// regions instead, and every OpenBLAS call runs on the one thread that makes
// it (OpenBLAS's own threading would change a product's sums with the thread
// count). `ms::set_num_threads` sets both.
#pragma once

#include <cstdint>
#include <type_traits>

namespace ms {

/// Sets the number of threads ms kernels and BLAS use (>= 1). The default is
/// OpenMP's (`OMP_NUM_THREADS`, else the number of cores).
/// Example: `ms::set_num_threads(2);`
void set_num_threads(int n);
/// The number of threads kernels use.
int get_num_threads();

namespace kernels {

/// Splits [0, n) into contiguous chunks of at least `grain` items and calls
/// `fn(begin, end)` for each, on ms's pool: `parts` chunks of ceil(n / parts)
/// items, parts = min(ceil(n / grain), threads * k), where k is 1, or
/// `detail::kStallChunksPerThread` for a while after a call of the pool waited
/// for a chunk whose thread was not running (a shared machine). Chunk
/// boundaries depend only on n, grain, the thread count and k, never on which
/// thread runs them, and every item is computed by exactly one call, so
/// elementwise results are bitwise identical for any thread count; which
/// thread runs a chunk is not fixed (the caller runs every chunk no worker
/// has claimed yet). Runs
/// inline (one call `fn(0, n)`) when n <= grain or one thread is set, or when
/// called from inside another `parallel_for`. When another thread of the
/// program holds the pool, the caller computes the same chunks itself, one
/// after the other. `fn` must not throw: validate before.
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& fn);

namespace detail {
/// The most chunks per thread `parallel_for` cuts a call into after the pool
/// waited for a chunk whose thread was not running (1 otherwise).
inline constexpr int kStallChunksPerThread = 4;
/// The number of chunks `parallel_for(n, grain, ...)` uses from this thread now.
int threads_for(std::int64_t n, std::int64_t grain);
/// True on a pool worker, on a thread running chunks for `parallel_for`, and
/// inside an OpenMP parallel region.
bool in_parallel();
/// Runs `body(ctx, begin, end)` for the `parts` chunks of [0, n) (parts >= 2).
using ChunkBody = void (*)(void* ctx, std::int64_t begin, std::int64_t end);
void run_chunks(std::int64_t n, int parts, ChunkBody body, void* ctx);
/// True when `parallel_for` runs on OpenMP's threads (the `openblas` backend).
bool runs_on_openmp() noexcept;
/// Whether the caller runs a call's chunks alone while the machine is
/// crowded (on by default; tests that need the workers to take part switch
/// it off), and, when `loadavg` is not null, the file read for the running
/// tasks instead of /proc/loadavg (tests).
void yield_to_load(bool on, const char* loadavg = nullptr) noexcept;
}  // namespace detail

template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& fn) {
  if (n <= 0) return;
  const int parts = detail::threads_for(n, grain);
  if (parts <= 1) {
    fn(std::int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  detail::run_chunks(
      n, parts, [](void* ctx, std::int64_t b, std::int64_t e) { (*static_cast<Fn*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace kernels
}  // namespace ms
