// Private to src/parallel: the MPI state of the process and the helpers every
// collective shares (deadline-polled waits, dtype -> MPI datatype / op, the
// header exchange that turns mismatched calls into errors).
#pragma once

// MPI's C API only: OpenMPI's mpi.h would also pull in the deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ms/core/dtype.hpp"
#include "ms/core/tensor.hpp"
#include "ms/parallel/collective.hpp"
#include "ms/parallel/comm.hpp"

namespace ms::parallel::detail {

/// The communicator of the eager collectives, or MPI_COMM_NULL without MPI.
MPI_Comm world_comm();
/// A new communicator over the same ranks (collective), for a sequence of
/// non-blocking collectives that must not be matched against the others.
MPI_Comm dup_comm(std::string_view api);
/// Raises CommError when the communicator is broken or finalized.
void check_usable(std::string_view api);
/// Raises CommError naming `api` and MPI's message when `rc` is not MPI_SUCCESS.
void check_mpi(int rc, std::string_view api, std::string_view call);
/// Polls `reqs` until all complete; TimeoutError naming `api` after timeout()
/// seconds (the communicator is then marked broken).
void wait_all(std::span<MPI_Request> reqs, std::string_view api);
/// Tests `reqs` once; true when all are complete.
bool test_all(std::span<MPI_Request> reqs, std::string_view api);
/// Marks the communicator broken and raises the TimeoutError of `api`.
[[noreturn]] void raise_timeout(std::string_view api);
/// What a wait does between two polls, by the time it has waited `since`:
/// nothing, then a yield of the core, then a short sleep.
void poll_pause(std::chrono::steady_clock::time_point since);

/// The MPI datatype of one element of `t` (a registered 2-byte type for the half types).
MPI_Datatype mpi_type(DType t);
/// The MPI op reducing `t` with `op` (Mean reduces with Sum); TypeError naming `api`
/// for pairs ms does not reduce (bool, int4, complex max, integer mean).
MPI_Op mpi_op(ReduceOp op, DType t, std::string_view api);
/// Raises the TypeError of `mpi_op` without needing MPI (also checked on 1 rank).
void check_reducible(ReduceOp op, DType t, std::string_view api);

/// What one rank passes to a collective; exchanged before the data so that
/// every rank sees every rank's call.
struct CallHeader {
  std::int64_t api = 0, op = 0, root = 0, dtype = 0, ndim = 0, numel = 0, dims_hash = 0;
  std::int64_t dims[6] = {};
};
/// Exchanges `h` (all ranks) and raises ShapeError / TypeError / ValueError
/// naming `api`, the first rank whose call differs from rank 0's, and both calls.
void check_same_call(const CallHeader& h, std::string_view api);
/// The header of a call of `api` (a small code) with a tensor of `dtype` and `shape`.
CallHeader header_of(int api, DType dtype, const Shape& shape, std::int64_t op, std::int64_t root);

/// Elements per MPI call: counts are ints.
inline constexpr std::int64_t kMaxCount = 0x7fffffff;

}  // namespace ms::parallel::detail
