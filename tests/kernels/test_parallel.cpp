// kernels/parallel.hpp: parallel_for on ms's thread pool. Every item is
// computed by exactly one call, in the documented chunks (ceil(n / parts)
// items each, parts = min(threads * k, ceil(n / grain)), k = 1 or, for a
// while after a chunk waited for a parked thread, kStallChunksPerThread),
// whoever runs them: the
// pool's workers, the caller when another thread holds the pool, a worker
// woken from sleep, a pool grown by set_num_threads, a child after fork(), the
// caller alone when the workers cannot run (chunks are claimed, not owned).
//
// Chunks are claimed by whoever comes first, so a test that needs several
// threads to take part makes every chunk wait until that many threads have
// entered one (with a timeout that fails the test rather than hanging it).
#include <doctest/doctest.h>

#include "random.hpp"
#include "temp_dir.hpp"
#include "thread_guard.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ms/core/error.hpp>
#include <ms/kernels/elementwise.hpp>
#include <ms/kernels/gemm.hpp>
#include <ms/kernels/parallel.hpp>

namespace {

// Restores ms's thread count at the end of a test, and keeps the workers
// taking part while the test runs: the suite's other processes share the
// cores, which would otherwise make the caller run every chunk alone.
struct NoYieldThreadGuard : ms::test::ThreadGuard {
  NoYieldThreadGuard() { ms::kernels::detail::yield_to_load(false); }
  ~NoYieldThreadGuard() { ms::kernels::detail::yield_to_load(true); }
  NoYieldThreadGuard(const NoYieldThreadGuard&) = delete;
  NoYieldThreadGuard& operator=(const NoYieldThreadGuard&) = delete;
};
using Chunks = std::set<std::pair<std::int64_t, std::int64_t>>;

constexpr int kFine = ms::kernels::detail::kStallChunksPerThread;

// The chunks parallel_for documents for n items, grain, nt threads and
// `per_thread` chunks per thread at most.
Chunks expected_chunks(std::int64_t n, std::int64_t grain, int nt, int per_thread = 1) {
  Chunks c;
  if (n <= 0) return c;
  const std::int64_t by_grain = (n + grain - 1) / grain;
  const std::int64_t parts =
      n <= grain || nt == 1 ? 1 : std::min<std::int64_t>(std::int64_t{nt} * per_thread, by_grain);
  const std::int64_t chunk = (n + parts - 1) / parts;
  for (std::int64_t b = 0; b < n; b += chunk) c.insert({b, std::min(n, b + chunk)});
  return c;
}

// Waits until `count` reaches `want` (true), or 10 s passed (false).
bool wait_for(const std::atomic<int>& count, int want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (count.load() < want)
    if (std::chrono::steady_clock::now() > deadline) return false;
  return true;
}

// One of the two documented layouts: one chunk per thread, or (after a stall)
// up to kFine per thread.
bool documented(const Chunks& seen, std::int64_t n, std::int64_t grain, int nt) {
  return seen == expected_chunks(n, grain, nt) || seen == expected_chunks(n, grain, nt, kFine);
}

// Runs short calls until parallel_for is back to one chunk per thread (the
// calls after a stall are cut finer for a while); false if it never is.
bool settle(int nt) {
  for (int round = 0; round < 100000; ++round) {
    if (ms::kernels::detail::threads_for(1 << 20, 1) == nt) return true;
    ms::kernels::parallel_for(64, 1, [](std::int64_t, std::int64_t) {});
  }
  return false;
}

// Runs parallel_for and checks the chunks it called and that every item was
// written once; returns the number of distinct threads that ran chunks. With
// `meet` > 1 each chunk first waits until `meet` distinct threads have entered
// a chunk (so that many must take part).
int check_cover(std::int64_t n, std::int64_t grain, int nt, int meet = 1) {
  std::vector<int> hits(static_cast<std::size_t>(n), 0);
  std::mutex m;
  Chunks seen;
  std::set<std::thread::id> threads;
  std::atomic<int> entered{0};
  std::atomic<bool> timed_out{false};
  ms::kernels::parallel_for(n, grain, [&](std::int64_t b, std::int64_t e) {
    {
      const std::lock_guard lock(m);
      if (threads.insert(std::this_thread::get_id()).second) ++entered;
    }
    if (!wait_for(entered, meet)) timed_out = true;
    for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
    const std::lock_guard lock(m);
    seen.insert({b, e});
  });
  CHECK_FALSE(timed_out);
  CHECK(documented(seen, n, grain, nt));
  CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  return static_cast<int>(threads.size());
}

}  // namespace

TEST_CASE("parallel_for: documented chunks, each item once, for 1 to 4 threads") {
  const NoYieldThreadGuard guard;
  for (int nt = 1; nt <= 4; ++nt) {
    ms::set_num_threads(nt);
    for (std::int64_t n : {0, 1, 2, 3, 7, 100, 1000, 1001, 4099})
      for (std::int64_t grain : {1, 2, 10, 1000, 5000}) {
        CAPTURE(nt);
        CAPTURE(n);
        CAPTURE(grain);
        const int used = check_cover(n, grain, nt);
        if (n > 0)
          CHECK(used <=
                std::min(nt, static_cast<int>(expected_chunks(n, grain, nt, kFine).size())));
      }
  }
}

TEST_CASE("parallel_for: chunks run on the pool's workers, nested calls inline") {
  const NoYieldThreadGuard guard;
  ms::set_num_threads(2);
  std::atomic<int> outer_calls{0}, nested_calls{0}, flagged{0};
  std::mutex m;
  std::set<std::thread::id> threads;
  CHECK_FALSE(ms::kernels::detail::in_parallel());
  std::atomic<int> entered{0};
  std::atomic<bool> timed_out{false};
  ms::kernels::parallel_for(2, 1, [&](std::int64_t, std::int64_t) {
    ++outer_calls;
    if (ms::kernels::detail::in_parallel()) ++flagged;
    {
      const std::lock_guard lock(m);
      if (threads.insert(std::this_thread::get_id()).second) ++entered;
    }
    if (!wait_for(entered, 2)) timed_out = true;  // the worker must take the other chunk
    // A parallel_for inside a chunk is one call on this thread.
    ms::kernels::parallel_for(1000, 1, [&](std::int64_t b, std::int64_t e) {
      CHECK(b == 0);
      CHECK(e == 1000);
      ++nested_calls;
    });
  });
  CHECK_FALSE(timed_out);
  CHECK(outer_calls == 2);
  CHECK(flagged == 2);
  CHECK(nested_calls == 2);
  CHECK(threads.size() == 2);  // the caller and one worker
  CHECK_FALSE(ms::kernels::detail::in_parallel());
}

TEST_CASE("parallel_for: many calls in a row, and calls after the workers went to sleep") {
  const NoYieldThreadGuard guard;
  ms::set_num_threads(2);
  std::vector<std::int64_t> v(4096);
  for (int round = 0; round < 2000; ++round) {
    ms::kernels::parallel_for(4096, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) v[static_cast<std::size_t>(i)] += i;
    });
  }
  bool all = true;
  for (std::int64_t i = 0; i < 4096; ++i) all = all && v[static_cast<std::size_t>(i)] == 2000 * i;
  CHECK(all);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the workers' spinning
    CHECK(check_cover(1000, 10, 2, 2) == 2);                    // woken from sleep
    CHECK(check_cover(1000, 10, 2, 2) == 2);                    // still spinning
  }
}

TEST_CASE("parallel_for: two threads of the program calling at once") {
  const NoYieldThreadGuard guard;
  ms::set_num_threads(2);
  constexpr std::int64_t n = 20000;
  std::atomic<int> failures{0};
  auto caller = [&](std::int64_t mul) {
    std::vector<std::int64_t> out(n);
    for (int round = 0; round < 300; ++round) {
      std::fill(out.begin(), out.end(), -1);
      ms::kernels::parallel_for(n, 100, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) out[static_cast<std::size_t>(i)] = mul * i + round;
      });
      for (std::int64_t i = 0; i < n; ++i)
        if (out[static_cast<std::size_t>(i)] != mul * i + round) {
          ++failures;
          break;
        }
    }
  };
  std::thread a(caller, 3), b(caller, 5);
  a.join();
  b.join();
  CHECK(failures == 0);
}

TEST_CASE("parallel_for: more threads set later grow the pool, fewer leave workers idle") {
  const NoYieldThreadGuard guard;
  ms::set_num_threads(2);
  CHECK(check_cover(64, 1, 2, 2) == 2);
  ms::set_num_threads(4);
  CHECK(check_cover(64, 1, 4, 4) == 4);
  ms::set_num_threads(3);
  CHECK(check_cover(64, 1, 3, 3) == 3);
  ms::set_num_threads(2);
  for (int round = 0; round < 100; ++round) CHECK(check_cover(64, 1, 2) <= 2);
  CHECK(check_cover(64, 1, 2, 2) == 2);
  ms::set_num_threads(4);  // the idle workers, asleep, take part again
  CHECK(check_cover(64, 1, 4, 4) == 4);
}

TEST_CASE("parallel_for: a child process made by fork() has its own pool") {
  // (With the openblas backend parallel_for runs on OpenMP, which makes no
  // such promise after fork().)
  if (ms::kernels::detail::runs_on_openmp()) return;
  const NoYieldThreadGuard guard;
  ms::set_num_threads(2);
  CHECK(check_cover(1000, 1, 2, 2) == 2);  // the parent's workers exist
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // No doctest assertion here: the child reports through its exit status.
    std::vector<int> hits(1000, 0);
    std::mutex m;
    std::set<std::thread::id> threads;
    std::atomic<int> entered{0};
    std::atomic<bool> met{true};
    ms::kernels::parallel_for(1000, 1, [&](std::int64_t b, std::int64_t e) {
      {
        const std::lock_guard lock(m);
        if (threads.insert(std::this_thread::get_id()).second) ++entered;
      }
      if (!wait_for(entered, 2)) met = false;
      for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
    });
    const bool ok = met && threads.size() == 2 &&
                    std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; });
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

namespace {

// A worker held in a signal handler (SIGUSR1) until released: a thread of
// the pool that cannot run, as when the scheduler gives its core to another
// program.
std::atomic<bool> g_held{false}, g_release{false};
static_assert(std::atomic<bool>::is_always_lock_free);  // used in a signal handler

extern "C" void hold_handler(int) {
  g_held.store(true);
  while (!g_release.load()) {
    const timespec ms1{0, 1000000};
    nanosleep(&ms1, nullptr);
  }
  g_held.store(false);
}

// The pool's worker with 2 threads: the thread that runs the second chunk of
// a call whose first chunk waits for it.
pthread_t pool_worker() {
  const pthread_t self = pthread_self();
  pthread_t worker = self;
  std::atomic<int> entered{0};
  ms::kernels::parallel_for(2, 1, [&](std::int64_t, std::int64_t) {
    if (pthread_equal(pthread_self(), self) == 0) worker = pthread_self();
    ++entered;
    (void)wait_for(entered, 2);
  });
  return worker;
}

// exp(x) * tanh(y) + x on float32 [n]: transcendental functions, whose
// scalar and SIMD paths round differently, over many tiles.
ms::kernels::EwProgram transcendental_program(std::int64_t n) {
  ms::kernels::EwBuilder b;
  const auto op = [](const char* name) { return ms::kernels::ew_op_find(name); };
  const int x = b.load(0, ms::float32), y = b.load(1, ms::float32);
  const int e = b.apply(op("exp"), ms::float32, x);
  const int t = b.apply(op("tanh"), ms::float32, y);
  const int m = b.apply(op("mul"), ms::float32, e, t);
  return b.finish(b.apply(op("add"), ms::float32, m, x), ms::Shape{n}, ms::float32);
}

}  // namespace

TEST_CASE("parallel_for: the caller runs the chunks of a worker that cannot run, same bits") {
  // (OpenMP's regions, the openblas backend, give each thread its chunks.)
  if (ms::kernels::detail::runs_on_openmp()) return;
  const NoYieldThreadGuard guard;
  constexpr std::int64_t n = 3 * (1 << 16) + 1234;  // several chunks of tiles on 2 threads
  const ms::Tensor x = ms::test::random_tensor(ms::float32, {n}, {.lo = -3, .hi = 3}, 1),
                   y = ms::test::random_tensor(ms::float32, {n}, {.lo = -3, .hi = 3}, 2);
  const ms::Tensor* in[2] = {&x, &y};
  const ms::kernels::EwProgram prog = transcendental_program(n);
  ms::set_num_threads(1);
  const ms::Tensor one = ms::kernels::ew_eval(prog, in);
  ms::set_num_threads(2);
  const ms::Tensor two = ms::kernels::ew_eval(prog, in);
  REQUIRE(settle(2));
  REQUIRE(ms::kernels::detail::threads_for(n, 1) == 2);

  const pthread_t worker = pool_worker();
  REQUIRE(pthread_equal(worker, pthread_self()) == 0);
  struct sigaction hold {};
  struct sigaction saved {};
  hold.sa_handler = hold_handler;
  sigemptyset(&hold.sa_mask);
  REQUIRE(sigaction(SIGUSR1, &hold, &saved) == 0);
  g_release = false;
  REQUIRE(pthread_kill(worker, SIGUSR1) == 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!g_held && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  REQUIRE(g_held);
  // Releases the worker after 10 s, so a pool that waits for it fails the
  // test instead of hanging it.
  std::thread watchdog([] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!g_release && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    g_release = true;
  });
  std::mutex m;
  Chunks seen;
  std::set<std::thread::id> threads;
  ms::kernels::parallel_for(1000, 1, [&](std::int64_t b, std::int64_t e) {
    const std::lock_guard lock(m);
    seen.insert({b, e});
    threads.insert(std::this_thread::get_id());
  });
  const ms::Tensor held = ms::kernels::ew_eval(prog, in);
  const bool returned_while_held = !g_release.load();
  g_release = true;
  watchdog.join();
  while (g_held) std::this_thread::yield();
  REQUIRE(sigaction(SIGUSR1, &saved, nullptr) == 0);

  CHECK(returned_while_held);
  CHECK(documented(seen, 1000, 1, 2));
  CHECK(threads == std::set<std::thread::id>{std::this_thread::get_id()});
  CHECK(ms::test::bitwise_equal(one, two));
  CHECK(ms::test::bitwise_equal(one, held));
  CHECK(check_cover(1000, 1, 2, 2) == 2);  // the worker, back, takes part again
}

namespace {

// One chunk of a call: its items and the thread that ran it.
struct Ran {
  std::int64_t begin, end;
  std::thread::id thread;
};

// Calls on 2 threads whose worker sleeps in its chunk while the caller has
// finished its own: the caller waits for a thread that does not run. The
// caller's chunk lasts until the worker entered its own (as long as the
// worker took to wake), and the worker sleeps 5 times that (50 ms at least).
// True once the next calls are cut finely (up to 5 tries: on a loaded machine
// the caller itself may lose its core while it waits).
bool stall() {
  const std::thread::id self = std::this_thread::get_id();
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::atomic<int> entered{0};
    const auto start = std::chrono::steady_clock::now();
    ms::kernels::parallel_for(2, 1, [&](std::int64_t, std::int64_t) {
      ++entered;
      if (std::this_thread::get_id() != self)
        std::this_thread::sleep_for(std::max<std::chrono::steady_clock::duration>(
            std::chrono::milliseconds(50), 5 * (std::chrono::steady_clock::now() - start)));
      else
        (void)wait_for(entered, 2);  // the worker holds the other chunk
    });
    if (ms::kernels::detail::threads_for(1 << 20, 1) == 2 * kFine) return true;
  }
  return false;
}

// A call of n items that each sleep `item`, whose first chunk run by a worker
// (not the calling thread) first sleeps `park` (a thread parked in its
// chunk); returns the chunks and the call's wall time.
std::pair<std::vector<Ran>, std::chrono::steady_clock::duration> parked_call(
    std::int64_t n, std::chrono::milliseconds item, std::chrono::milliseconds park) {
  const std::thread::id self = std::this_thread::get_id();
  std::mutex m;
  std::vector<Ran> ran;
  std::atomic<bool> parked{false};
  const auto start = std::chrono::steady_clock::now();
  ms::kernels::parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
    const std::thread::id me = std::this_thread::get_id();
    if (me != self && !parked.exchange(true)) std::this_thread::sleep_for(park);
    for (std::int64_t i = b; i < e; ++i) std::this_thread::sleep_for(item);
    const std::lock_guard lock(m);
    ran.push_back({b, e, me});
  });
  return {ran, std::chrono::steady_clock::now() - start};
}

}  // namespace

TEST_CASE("parallel_for: after a chunk waited for a parked thread, calls are cut finer") {
  // (OpenMP's regions, the openblas backend, give each thread its chunks.)
  if (ms::kernels::detail::runs_on_openmp()) return;
  const NoYieldThreadGuard guard;
  ms::set_num_threads(2);
  REQUIRE(settle(2));
  REQUIRE(stall());
  const std::thread::id self = std::this_thread::get_id();
  CHECK(ms::kernels::detail::threads_for(1 << 20, 1) == 2 * kFine);
  CHECK(ms::kernels::detail::threads_for(5, 1) == 5);  // never below the grain
  CHECK(ms::kernels::detail::threads_for(1000, 400) == 3);

  // 16 items of 5 ms in 8 chunks; the worker parks 80 ms in its first chunk.
  // The caller runs the 7 other chunks meanwhile (70 ms), so the call takes
  // about 80 ms + one chunk (90 ms), where one chunk per thread would take
  // 80 ms + half the items (120 ms) and one thread 80 ms. (Repeated when the
  // worker, late, took no chunk at all.)
  constexpr std::int64_t n = 16;
  const auto item = std::chrono::milliseconds(5), park = std::chrono::milliseconds(80);
  for (int attempt = 0; attempt < 3; ++attempt) {
    REQUIRE(ms::kernels::detail::threads_for(n, 1) == 2 * kFine);
    const auto [ran, took] = parked_call(n, item, park);
    std::vector<int> hits(static_cast<std::size_t>(n), 0);
    Chunks seen;
    int by_worker = 0;
    for (const Ran& r : ran) {
      seen.insert({r.begin, r.end});
      for (std::int64_t i = r.begin; i < r.end; ++i) ++hits[static_cast<std::size_t>(i)];
      if (r.thread != self) ++by_worker;
    }
    CHECK(seen == expected_chunks(n, 1, 2, kFine));
    CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
    if (by_worker == 0) continue;
    CHECK(by_worker == 1);  // the parked chunk only: the caller ran all the others
    // The caller claims from the front, the workers from the back: each
    // thread runs neighbouring chunks.
    for (const Ran& r : ran)
      if (r.thread != self) CHECK(r.end == n);
    CHECK(took < park + n / 2 * item);
    MESSAGE("parked call: ", std::chrono::duration<double, std::milli>(took).count(), " ms");
    break;
  }
  // Calls that wait for nobody go back to one chunk per thread.
  CHECK(settle(2));
}

TEST_CASE("parallel_for: the same bits for 1 thread and for 2 threads in finer chunks") {
  if (ms::kernels::detail::runs_on_openmp()) return;
  const NoYieldThreadGuard guard;
  constexpr std::int64_t n = 8 * (1 << 16) + 1234;  // 9 chunks of tiles by the grain
  const ms::Tensor x = ms::test::random_tensor(ms::float32, {n}, {.lo = -3, .hi = 3}, 3),
                   y = ms::test::random_tensor(ms::float32, {n}, {.lo = -3, .hi = 3}, 4);
  const ms::Tensor* in[2] = {&x, &y};
  const ms::kernels::EwProgram prog = transcendental_program(n);
  constexpr std::int64_t m = 300, k = 517, cols = 700;
  const ms::Tensor a = ms::test::random_tensor(ms::float32, {m, k}, {.lo = -1, .hi = 1}, 5),
                   b = ms::test::random_tensor(ms::float32, {k, cols}, {.lo = -1, .hi = 1}, 6);
  const auto product = [&] {
    std::vector<float> c(static_cast<std::size_t>(m * cols));
    ms::kernels::gemm<float>(false, false, m, cols, k, 1.0f, a.data<float>(), k, b.data<float>(),
                             cols, 0.0f, c.data(), cols);
    return c;
  };
  ms::set_num_threads(1);
  const ms::Tensor one = ms::kernels::ew_eval(prog, in);
  const std::vector<float> c1 = product();
  ms::set_num_threads(2);
  REQUIRE(settle(2));
  REQUIRE(stall());
  REQUIRE(ms::kernels::detail::threads_for(1 << 20, 1) == 2 * kFine);
  const ms::Tensor fine = ms::kernels::ew_eval(prog, in);
  const std::vector<float> c2 = product();
  CHECK(ms::kernels::detail::threads_for(1 << 20, 1) == 2 * kFine);  // still cut finely
  CHECK(ms::test::bitwise_equal(one, fine));
  CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
  CHECK(settle(2));
}

TEST_CASE("parallel_for: on a crowded machine the caller runs the chunks alone, same chunks") {
  // (OpenMP's regions, the openblas backend, give each thread its chunks.)
  if (ms::kernels::detail::runs_on_openmp()) return;
  const NoYieldThreadGuard guard;
  ms::set_num_threads(2);
  REQUIRE(settle(2));
  const ms::test::TempDir dir("ms_loadavg");
  const std::string loadavg = (dir.path / "loadavg").string();
  // /proc/loadavg's form: three averages, running/total tasks, the last pid.
  // Two calls 10 ms apart read it twice: a verdict holds from two samples in a row.
  const auto running = [&](int n) {
    std::ofstream(loadavg) << "0.50 0.40 0.30 " << n << "/120 4321\n";
    ms::kernels::detail::yield_to_load(true, loadavg.c_str());  // read again at the next call
    for (int sample = 0; sample < 2; ++sample) {
      ms::kernels::parallel_for(2, 1, [](std::int64_t, std::int64_t) {});
      std::this_thread::sleep_for(std::chrono::milliseconds(11));
    }
  };
  // The caller, a spinning worker and 2 other tasks: 3 cores wanted of 2.
  // Chunks of 2 ms, which a worker taking part would have time to claim.
  running(4);
  const std::thread::id self = std::this_thread::get_id();
  for (int round = 0; round < 3; ++round) {
    std::mutex m;
    Chunks seen;
    std::set<std::thread::id> threads;
    ms::kernels::parallel_for(1000, 1, [&](std::int64_t b, std::int64_t e) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const std::lock_guard lock(m);
      seen.insert({b, e});
      threads.insert(std::this_thread::get_id());
    });
    CHECK(documented(seen, 1000, 1, 2));
    CHECK(threads == std::set<std::thread::id>{self});
  }
  // Nothing else running: the worker takes part again.
  running(1);
  CHECK(check_cover(1000, 1, 2, 2) == 2);
  // Another task, but with the workers switched on regardless.
  running(3);
  ms::kernels::detail::yield_to_load(false);
  CHECK(check_cover(1000, 1, 2, 2) == 2);
  // An unreadable file: never crowded.
  ms::kernels::detail::yield_to_load(true, (dir.path / "missing").c_str());
  CHECK(check_cover(1000, 1, 2, 2) == 2);
  ms::kernels::detail::yield_to_load(false, "/proc/loadavg");
}

TEST_CASE("set_num_threads: fewer than one thread is a ValueError naming the API and the value") {
  const NoYieldThreadGuard guard;
  for (int bad : {0, -3}) {
    CAPTURE(bad);
    try {
      ms::set_num_threads(bad);
      FAIL("no error");
    } catch (const ms::ValueError& e) {
      const std::string what = e.what();
      CHECK(what.find("set_num_threads") != std::string::npos);
      CHECK(what.find(">= 1") != std::string::npos);
      CHECK(what.find(std::to_string(bad)) != std::string::npos);
    }
  }
  CHECK(ms::get_num_threads() == guard.saved);  // unchanged
}
