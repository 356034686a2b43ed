// ms/parallel/comm.hpp — the processes of a data-parallel run: init, rank, world size.
//
// Stage: parallel (above nn/, beside train/; built into libms_parallel when MPI
// is found). A program started by `mpirun -np N` is one of N ranks that talk
// through MPI (OpenMPI); a program started without mpirun is rank 0 of 1 and
// needs no mpirun (init() does not call MPI_Init then, and every collective is
// a copy; libmpi is still loaded, as libms_parallel links it). Every blocking step polls
// non-blocking MPI requests against a deadline (`set_timeout`, default 300 s, or
// MS_PARALLEL_TIMEOUT in seconds): a rank that dies or stops answering makes the others raise
// ms::parallel::TimeoutError instead of hanging. After a timeout the
// communicator is broken: later collectives raise at once and the process
// exits without MPI_Finalize (mpirun then stops the other ranks).
//
//   ms::parallel::init();                        // reads what mpirun set
//   if (ms::parallel::rank() == 0) std::cout << ms::parallel::world_size() << " ranks\n";
//   ms::parallel::barrier();
#pragma once

#include <string>

#include "ms/core/error.hpp"

namespace ms::parallel {

/// A collective that did not complete before the deadline (`set_timeout`):
/// another rank died, hangs, or called a different collective.
class TimeoutError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ms::parallel::TimeoutError"; }
};

/// An MPI call that failed, or a collective on a communicator broken by an earlier failure.
class CommError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ms::parallel::CommError"; }
};

/// Joins the run: MPI_Init (thread level SERIALIZED) when the process was
/// started by mpirun (OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK set), else
/// rank 0 of 1 without MPI. Idempotent; every other function calls it first.
/// MPI_Finalize runs at exit (skipped after a timeout).
void init();
/// True when this process runs with MPI (started by mpirun), even as 1 rank.
bool mpi_active();
/// This process's rank in [0, world_size()).
int rank();
/// The number of ranks (1 without mpirun).
int world_size();
/// Waits until every rank has reached it (TimeoutError after the deadline).
void barrier();
/// Sets the deadline of every later collective, in seconds (> 0, finite;
/// ValueError otherwise). Each rank sets its own; tests use a few seconds.
void set_timeout(double seconds);
/// The deadline of a collective, in seconds.
double timeout();
/// Ends MPI now (MPI_Finalize) when init() started it and nothing failed;
/// later calls of the collectives raise CommError. Also run at exit.
void finalize();

}  // namespace ms::parallel
