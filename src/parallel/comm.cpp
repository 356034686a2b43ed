// The process's place in a data-parallel run: see ms/parallel/comm.hpp.
#include "ms/parallel/comm.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "mpi_context.hpp"

namespace ms::parallel {
namespace {

struct Context {
  std::once_flag once;
  bool mpi = false;      // MPI is initialized and usable
  bool started = false;  // MPI_Init was called by init()
  bool broken = false;   // a timeout or MPI failure: no more collectives, no MPI_Finalize
  bool finalized = false;
  int rank = 0, size = 1;
  double timeout = 300.0;
  MPI_Comm comm = MPI_COMM_NULL;
};

Context& ctx() {
  static Context c;
  return c;
}

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

double timeout_from_env() {
  const char* s = std::getenv("MS_PARALLEL_TIMEOUT");
  if (s == nullptr || *s == '\0') return 300.0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  MS_CHECK(end != s && *end == '\0' && std::isfinite(v) && v > 0, ValueError,
           "ms::parallel::init: MS_PARALLEL_TIMEOUT must be a number of seconds > 0, got '", s,
           "'");
  return v;
}

void finalize_at_exit() { finalize(); }

void start() {
  Context& c = ctx();
  c.timeout = timeout_from_env();
  if (!launched_by_mpirun()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    MS_CHECK(rc == MPI_SUCCESS, CommError, "ms::parallel::init: MPI_Init_thread failed (code ", rc,
             ")");
    c.started = true;
    std::atexit(finalize_at_exit);
  }
  c.mpi = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  detail::check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &c.comm), "ms::parallel::init", "MPI_Comm_dup");
  MPI_Comm_rank(c.comm, &c.rank);
  MPI_Comm_size(c.comm, &c.size);
}

}  // namespace

void init() {
  Context& c = ctx();
  std::call_once(c.once, start);
}

bool mpi_active() {
  init();
  return ctx().mpi;
}

int rank() {
  init();
  return ctx().rank;
}

int world_size() {
  init();
  return ctx().size;
}

void barrier() {
  init();
  if (ctx().size == 1 && !ctx().mpi) return;
  detail::check_usable("barrier");
  MPI_Request req = MPI_REQUEST_NULL;
  detail::check_mpi(MPI_Ibarrier(ctx().comm, &req), "barrier", "MPI_Ibarrier");
  detail::wait_all(std::span(&req, 1), "barrier");
}

void set_timeout(double seconds) {
  init();
  MS_CHECK(std::isfinite(seconds) && seconds > 0, ValueError,
           "ms::parallel::set_timeout: seconds must be finite and > 0, got ", seconds);
  ctx().timeout = seconds;
}

double timeout() {
  init();
  return ctx().timeout;
}

void finalize() {
  Context& c = ctx();
  if (!c.mpi || c.finalized) return;
  c.finalized = true;
  // After a failure MPI_Finalize would wait for the ranks that stopped answering.
  if (c.broken) return;
  if (c.comm != MPI_COMM_NULL) MPI_Comm_free(&c.comm);
  if (c.started) MPI_Finalize();
}

namespace detail {

MPI_Comm world_comm() {
  init();
  return ctx().comm;
}

void check_usable(std::string_view api) {
  const Context& c = ctx();
  MS_CHECK(!c.broken, CommError, api,
           ": the communicator is broken by an earlier timeout or MPI failure; no collective "
           "can run any more (exit and restart the run)");
  MS_CHECK(!c.finalized, CommError, api, ": ms::parallel::finalize() was called");
}

void check_mpi(int rc, std::string_view api, std::string_view call) {
  if (rc == MPI_SUCCESS) [[likely]]
    return;
  ctx().broken = true;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  ms::detail::raise<CommError>(api, ": ", call, " failed on rank ", ctx().rank, " of ", ctx().size,
                               ": ", std::string_view(msg, static_cast<std::size_t>(len)));
}

MPI_Comm dup_comm(std::string_view api) {
  init();
  check_usable(api);
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Request req = MPI_REQUEST_NULL;
  // Non-blocking, so that a rank that never arrives is a timeout, not a hang.
  check_mpi(MPI_Comm_idup(ctx().comm, &out, &req), api, "MPI_Comm_idup");
  wait_all(std::span(&req, 1), api);
  MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN);
  return out;
}

bool test_all(std::span<MPI_Request> reqs, std::string_view api) {
  int done = 0;
  check_mpi(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE),
            api, "MPI_Testall");
  return done != 0;
}

void raise_timeout(std::string_view api) {
  Context& c = ctx();
  c.broken = true;
  ms::detail::raise<TimeoutError>(
      api, ": no answer from the other ranks after ", c.timeout, " s (rank ", c.rank, " of ",
      c.size,
      "): a rank died, hangs, or called another collective; the deadline is "
      "ms::parallel::set_timeout (or MS_PARALLEL_TIMEOUT)");
}

void poll_pause(std::chrono::steady_clock::time_point since) {
  // Non-blocking collectives advance only inside MPI calls, so the wait keeps
  // polling; but a rank waiting for a slow one must not take the CPU from it
  // (ranks often share cores): spin for 50 us (a collective between ranks of
  // one machine takes microseconds), then yield the core between polls, and
  // after 20 ms (a rank that is far behind or gone) sleep 50 us between them.
  const auto waited = std::chrono::steady_clock::now() - since;
  if (waited < std::chrono::microseconds(50)) return;
  if (waited < std::chrono::milliseconds(20))
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void wait_all(std::span<MPI_Request> reqs, std::string_view api) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::duration_cast<clock::duration>(
                                    std::chrono::duration<double>(ctx().timeout));
  while (!test_all(reqs, api)) {
    if (clock::now() > deadline) raise_timeout(api);
    poll_pause(start);
  }
}

}  // namespace detail
}  // namespace ms::parallel
