// ms's thread pool (see ms/kernels/parallel.hpp).
//
// Which threads: OpenMP's when the GEMM backend is OpenBLAS (its OpenMP build
// is called from OpenMP threads only, each call on one thread: see gemm.cpp),
// ms's pool otherwise (then no OpenBLAS call is made at all). One set per
// process.
//
// The pool runs one job at a time. The caller writes the job, then publishes
// it twice: in `claim_` (generation, the first and one past the last chunk
// left) and in `word_` (generation and number of threads taking part), which
// the workers watch. Chunks are not owned by threads: the caller (from the
// front) and every worker with index < threads (from the back) claim the
// next one from `claim_` (a compare-and-swap that fails once the generation
// moved on) until none is left, so a chunk whose worker is asleep or lost its
// core to another program is run by whoever comes first, usually the caller.
// The chunks themselves (their boundaries) depend only on the job, never on
// who runs them.
// `remaining_` counts the chunks not finished; the caller waits for it to
// reach zero, spinning for a while, then asleep on it (a futex) so that its
// core is free for the thread that still holds a chunk.
//
// A claimed chunk cannot be taken back: a thread descheduled in the middle of
// one holds the job until it runs again. The caller times its own chunks, and
// when the others' are not done within a few of its chunk times (kStallFactor,
// kStallSlack) it counts a stall: the next kStallJobs jobs are cut into up to
// kStallChunksPerThread chunks per thread (never below the grain), so that a
// thread parked in a chunk holds a small part of the job and the running ones
// take the rest. On a quiet machine no chunk waits and the jobs keep one
// chunk per thread (the fewest claims).
//
// On a crowded machine (another program's running threads and the job's
// would be more than the cores: the kernel's count of runnable tasks, from
// /proc/loadavg, less the pool's threads awake), the caller runs the job's
// chunks alone: a worker would share a core with that program and hold the
// job each time the scheduler parks it. The count is read at most every
// kLoadSample, and two readings in a row decide (a worker woken a moment ago
// is runnable before it counts itself awake); the same chunks run either way
// (the same bits).
//
// A worker spins on the word for kSpin after a job it could take part in,
// then sleeps on `wake_`; either yields its core when it notices it was
// descheduled while spinning (the core is wanted by another program). Each
// pair of "store, then load the other side's flag" (word and sleepers_,
// remaining_ and waiting_) is sequentially consistent, so one of the two
// sides always sees the other.
#include "ms/kernels/parallel.hpp"

#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "ms/core/error.hpp"
#include "ms/kernels/gemm.hpp"

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

// At most this many chunks per call (the claim word holds 16-bit counts).
constexpr std::int64_t kMaxParts = 4096;

thread_local bool t_in_parallel = false;

// Sets this thread's in-parallel flag for a scope (nested parallel_for runs inline).
struct InParallel {
  bool saved = t_in_parallel;
  InParallel() { t_in_parallel = true; }
  ~InParallel() { t_in_parallel = saved; }
  InParallel(const InParallel&) = delete;
  InParallel& operator=(const InParallel&) = delete;
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

using Clock = std::chrono::steady_clock;
// How long a worker spins after a job before it sleeps: long enough to bridge
// the gaps between the ops of a step, short enough not to hold a core once
// the program does something else.
constexpr auto kSpin = std::chrono::microseconds(100);
// How long the caller spins for the chunks other threads still run before it
// sleeps (a sleeping caller costs the last worker a wake-up call).
constexpr auto kWait = std::chrono::milliseconds(1);
// A gap this long between two looks at the clock of a spinning thread means
// it was descheduled: another program wants the core, so it yields.
constexpr auto kPreempted = std::chrono::microseconds(50);
// The caller counts a stall when the other threads' chunks are still running
// kStallFactor of its own chunk times plus kStallSlack after it ran out of
// chunks (they started before it ran out, so on their core they would be done
// within one chunk time).
constexpr int kStallFactor = 3;
constexpr auto kStallSlack = std::chrono::microseconds(50);
// How many jobs after a stall are cut into finer chunks.
constexpr int kStallJobs = 1024;
// Jobs left to cut finely (written by the thread that holds the pool).
std::atomic<int> g_fine_jobs{0};

// Chunk `part` of [0, n) in chunks of `chunk` items (possibly empty at the end).
void run_part(kernels::detail::ChunkBody body, void* ctx, std::int64_t n, std::int64_t chunk,
              int part) noexcept {
  const std::int64_t b = static_cast<std::int64_t>(part) * chunk;
  const std::int64_t e = std::min(n, b + chunk);
  if (b < e) body(ctx, b, e);
}

// Spins with `done()` polled until it is true (returns true) or until `limit`
// passed (returns false). When the thread notices it was descheduled while
// spinning (another program wants the core), it yields the core at once
// instead of spinning on, and keeps polling when it gets it back: sleeping
// instead would make every later call pay a wake-up.
template <class Done>
bool spin_until(Done done, Clock::duration limit) noexcept {
  Clock::time_point last = Clock::now();
  const Clock::time_point start = last;
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 0) {
      const Clock::time_point now = Clock::now();
      if (now - start > limit) return false;
      if (now - last > kPreempted) {
        std::this_thread::yield();
        last = Clock::now();
      } else {
        last = now;
      }
    }
  }
}

// How often the caller looks at the machine's load (LoadProbe).
constexpr auto kLoadSample = std::chrono::milliseconds(10);
std::atomic<bool> g_yield_to_load{true};

// Whether the machine is crowded: the running tasks of /proc/loadavg (its
// fourth field, "running/total"), less `ours` (this pool's threads awake,
// counted there), plus the `threads` a job would use, exceed `cores`.
// Sampled at most every kLoadSample; crowded when two samples in a row are;
// never when the file cannot be read. Used by the thread holding the pool.
class LoadProbe {
 public:
  bool crowded(int ours, int threads, unsigned cores) noexcept {
    const Clock::time_point now = Clock::now();
    if (sampled_ && now - last_ < kLoadSample) return crowded_;
    sampled_ = true;
    last_ = now;
    const int others = running() - ours;
    const bool now_crowded = others > 0 && static_cast<unsigned>(others + threads) > cores;
    crowded_ = now_crowded && last_crowded_;
    last_crowded_ = now_crowded;
    return crowded_;
  }

  // Reads `path` instead of /proc/loadavg from now on (tests).
  void read_from(const char* path) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = ::open(path, O_RDONLY | O_CLOEXEC);
    sampled_ = false;
    crowded_ = last_crowded_ = false;
  }

 private:
  // The running tasks, or 0 when unknown.
  int running() const noexcept {
    char text[128];
    const ssize_t got = fd_ < 0 ? -1 : ::pread(fd_, text, sizeof text - 1, 0);
    if (got <= 0) return 0;
    text[got] = '\0';
    const char* p = text;
    for (int field = 0; field < 3 && p != nullptr; ++field) {
      p = std::strchr(p, ' ');
      if (p != nullptr) ++p;
    }
    return p != nullptr ? std::atoi(p) : 0;
  }

  int fd_ = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  bool sampled_ = false;
  bool crowded_ = false;
  bool last_crowded_ = false;
  Clock::time_point last_{};
};

class Pool {
 public:
  // Runs the job on the pool; false (nothing run) when another thread holds
  // it, no worker could be started or the machine is crowded (LoadProbe).
  // `threads` (at most `parts`) threads take part: the caller and workers
  // 1 .. threads - 1.
  bool run(std::int64_t n, int parts, int threads, std::int64_t chunk,
           kernels::detail::ChunkBody body, void* ctx) noexcept {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || !grow(threads - 1)) return false;
    if (const int fine = g_fine_jobs.load(std::memory_order_relaxed); fine > 0)
      g_fine_jobs.store(fine - 1, std::memory_order_relaxed);
    if (g_yield_to_load.load(std::memory_order_relaxed) &&
        probe_.crowded(
            1 + static_cast<int>(threads_.size()) - sleepers_.load(std::memory_order_relaxed),
            threads, cores_))
      return false;
    n_ = n;
    chunk_ = chunk;
    body_ = body;
    ctx_ = ctx;
    remaining_.store(parts, std::memory_order_relaxed);
    // More threads than cores: a spinning worker would hold a core another needs.
    // (Stored only when it changes: the workers read its cache line.)
    if (const bool spin = static_cast<unsigned>(threads) <= cores_;
        spin_.load(std::memory_order_relaxed) != spin)
      spin_.store(spin, std::memory_order_relaxed);
    const std::uint64_t gen = ((word_.load(std::memory_order_relaxed) >> 32) + 1) & 0xffffffffu;
    const auto uparts = static_cast<std::uint64_t>(parts);
    claim_.store((gen << 32) | (uparts << 16), std::memory_order_release);
    word_.store((gen << 32) | static_cast<std::uint64_t>(threads), std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      wake_.fetch_add(1, std::memory_order_seq_cst);
      wake_.notify_all();
    }
    const Clock::time_point start = Clock::now();
    int done = 0;
    {
      const InParallel flag;
      done = run_claimed(gen, false);
    }
    if (done > 0 && remaining_.fetch_sub(done, std::memory_order_acq_rel) == done) return true;
    // (No chunk of its own to time, the workers took them all: no stall counted.)
    wait_done(done > 0 ? (Clock::now() - start) / done * kStallFactor + kStallSlack
                       : Clock::duration::zero());
    return true;
  }

  // The load probe reads `path` from now on (tests).
  void read_load_from(const char* path) noexcept {
    const std::lock_guard lock(mutex_);
    probe_.read_from(path);
  }

 private:
  // Starts workers until there are `count` (under mutex_). Workers are never
  // stopped: the pool lives as long as the process.
  bool grow(int count) noexcept {
    if (static_cast<int>(threads_.size()) >= count) return true;
    try {
      while (static_cast<int>(threads_.size()) < count) {
        const int index = static_cast<int>(threads_.size()) + 1;
        const std::uint64_t seen = word_.load(std::memory_order_relaxed);
        threads_.emplace_back([this, index, seen] { work(index, seen); });
      }
      return true;
    } catch (...) {  // no thread could be started (resource limits): run on the caller
      return false;
    }
  }

  // The next unclaimed chunk of job `gen`, now this thread's: the first one
  // left, or with `from_back` the last one; -1 when every chunk is taken or
  // the job is no longer `gen`. A successful claim keeps the job (and its
  // fields) alive until this thread counts the chunk done. The caller claims
  // from the front and the workers from the back, so that with two threads
  // each runs neighbouring chunks (one boundary between them) even when a
  // job is cut finely: handed out in turn, neighbouring chunks of the CNN's
  // pooling written by the two threads ran its training step at half its
  // speed in whole processes (bm_train's BM_TrainCnn_Ms on 2 threads, 2 of 4
  // processes at 77-85 steps/s against 141-150).
  int claim(std::uint64_t gen, bool from_back) noexcept {
    std::uint64_t c = claim_.load(std::memory_order_acquire);
    for (;;) {
      const auto front = static_cast<int>(c & 0xffffu);
      const auto back = static_cast<int>((c >> 16) & 0xffffu);
      if ((c >> 32) != gen || front >= back) return -1;
      const std::uint64_t next = from_back ? c - (std::uint64_t{1} << 16) : c + 1;
      if (claim_.compare_exchange_weak(c, next, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
        return from_back ? back - 1 : front;
    }
  }

  // Claims and runs chunks of job `gen` until none is left; returns how many.
  int run_claimed(std::uint64_t gen, bool from_back) noexcept {
    int done = 0;
    for (int part; (part = claim(gen, from_back)) >= 0; ++done)
      run_part(body_, ctx_, n_, chunk_, part);
    return done;
  }

  // The caller's wait for the chunks other threads still run: spinning for
  // kWait, then asleep. A wait longer than a nonzero `stall` (zero: unknown)
  // is a stall: the next kStallJobs jobs are cut finely.
  void wait_done(Clock::duration stall) noexcept {
    const Clock::time_point start = Clock::now();
    if (!spin_until([this] { return remaining_.load(std::memory_order_acquire) == 0; }, kWait)) {
      waiting_.store(true, std::memory_order_seq_cst);
      for (int r; (r = remaining_.load(std::memory_order_seq_cst)) != 0;)
        remaining_.wait(r, std::memory_order_seq_cst);
      waiting_.store(false, std::memory_order_relaxed);
    }
    if (stall > Clock::duration::zero() && Clock::now() - start > stall)
      g_fine_jobs.store(kStallJobs, std::memory_order_relaxed);
  }

  [[noreturn]] void work(int index, std::uint64_t seen) noexcept {
    t_in_parallel = true;
    bool used = true;
    for (;;) {
      seen = next_word(seen, used);
      const int threads = static_cast<int>(seen & 0xffffffffu);
      used = index < threads;
      if (!used) continue;
      const int done = run_claimed(seen >> 32, true);
      if (done > 0 && remaining_.fetch_sub(done, std::memory_order_seq_cst) == done &&
          waiting_.load(std::memory_order_seq_cst))
        remaining_.notify_one();
    }
  }

  // Waits until the word differs from `seen`: spinning first (only a worker
  // the last job could use, and only when that job had no more threads than
  // cores), then asleep.
  std::uint64_t next_word(std::uint64_t seen, bool used) noexcept {
    std::uint64_t w = seen;
    if (used && spin_.load(std::memory_order_relaxed) &&
        spin_until([&] { return (w = word_.load(std::memory_order_acquire)) != seen; }, kSpin))
      return w;
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    for (;;) {
      const std::uint32_t wake = wake_.load(std::memory_order_seq_cst);
      if ((w = word_.load(std::memory_order_seq_cst)) != seen) break;
      wake_.wait(wake, std::memory_order_seq_cst);
    }
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return w;
  }

  std::mutex mutex_;  // held by the thread whose job the pool runs
  LoadProbe probe_;   // under mutex_
  std::vector<std::thread> threads_;
  const unsigned cores_ = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<bool> spin_{true};
  // The word and the job share a cache line: a worker that sees the word has
  // the job too. The job is written by the holder of mutex_ before it
  // publishes the word.
  alignas(64) std::atomic<std::uint64_t> word_{0};
  std::int64_t n_ = 0;
  std::int64_t chunk_ = 0;
  kernels::detail::ChunkBody body_ = nullptr;
  void* ctx_ = nullptr;
  // Generation (high 32 bits), one past the last chunk left (16 bits), the
  // first chunk left (16 bits).
  alignas(64) std::atomic<std::uint64_t> claim_{0};
  alignas(64) std::atomic<int> remaining_{0};
  std::atomic<bool> waiting_{false};  // the caller sleeps on remaining_
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<std::uint32_t> wake_{0};
};

// The process's pool. Never destroyed (workers may still be spinning while
// static destructors run). A child process made by fork() has none of the
// parent's workers: it starts a fresh pool (the old one is dropped as is).
std::atomic<Pool*> g_pool{nullptr};

Pool& pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p != nullptr) return *p;
  static std::once_flag once;
  std::call_once(once, [] {
    g_pool.store(new Pool, std::memory_order_release);
    pthread_atfork(nullptr, nullptr, [] { g_pool.store(new Pool, std::memory_order_release); });
  });
  return *g_pool.load(std::memory_order_acquire);
}
}  // namespace

void set_num_threads(int n) {
  MS_CHECK(n >= 1, ValueError, "set_num_threads: n must be >= 1, got ", n);
  g_threads.store(n);
  omp_set_num_threads(n);
}

int get_num_threads() { return initial_threads(); }

namespace kernels::detail {

bool in_parallel() { return t_in_parallel || omp_in_parallel() != 0; }

int threads_for(std::int64_t n, std::int64_t grain) {
  if (in_parallel()) return 1;
  const int nt = initial_threads();
  if (nt <= 1 || n <= grain) return 1;
  const std::int64_t by_grain = (n + grain - 1) / (grain > 0 ? grain : 1);
  const std::int64_t per_thread =
      g_fine_jobs.load(std::memory_order_relaxed) > 0 ? kStallChunksPerThread : 1;
  return static_cast<int>(std::min<std::int64_t>({by_grain, nt * per_thread, kMaxParts}));
}

void yield_to_load(bool on, const char* loadavg) noexcept {
  g_yield_to_load.store(on, std::memory_order_relaxed);
  if (loadavg != nullptr) pool().read_load_from(loadavg);
}

bool runs_on_openmp() noexcept {
  static const bool b = std::strcmp(gemm_backend().name, "openblas") == 0;
  return b;
}

void run_chunks(std::int64_t n, int parts, ChunkBody body, void* ctx) {
  const std::int64_t chunk = (n + parts - 1) / parts;
  const int threads = std::clamp(initial_threads(), 1, parts);
  if (runs_on_openmp()) {
#pragma omp parallel num_threads(threads)  // in_parallel() sees omp_in_parallel()
    for (int part = omp_get_thread_num(); part < parts; part += omp_get_num_threads())
      run_part(body, ctx, n, chunk, part);
    return;
  }
  if (threads > 1 && pool().run(n, parts, threads, chunk, body, ctx)) return;
  // The pool is busy with another thread's job, or the machine is crowded (or
  // one thread is set now): the same chunks, here.
  const InParallel flag;
  for (int part = 0; part < parts; ++part) run_part(body, ctx, n, chunk, part);
}

}  // namespace kernels::detail
}  // namespace ms
