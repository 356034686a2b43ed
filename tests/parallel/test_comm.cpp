// rank / world size from mpirun's environment (rank 0 of 1 without it), barrier, timeouts.
#include <doctest/doctest.h>

#include <cstdlib>
#include <ms/parallel/comm.hpp>
#include <string>

TEST_SUITE("parallel") {
  TEST_CASE("rank and world size come from mpirun's environment; without it, rank 0 of 1") {
    ms::parallel::init();
    ms::parallel::init();  // idempotent
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (size == nullptr) {
      CHECK_FALSE(ms::parallel::mpi_active());
      CHECK(ms::parallel::world_size() == 1);
      CHECK(ms::parallel::rank() == 0);
    } else {
      CHECK(ms::parallel::mpi_active());
      CHECK(ms::parallel::world_size() == std::stoi(size));
      CHECK(ms::parallel::rank() == std::stoi(rank));
    }
    CHECK(ms::parallel::rank() >= 0);
    CHECK(ms::parallel::rank() < ms::parallel::world_size());
    ms::parallel::barrier();
  }

  TEST_CASE("set_timeout takes seconds > 0") {
    const double before = ms::parallel::timeout();
    CHECK(before > 0);
    CHECK_THROWS_WITH_AS(ms::parallel::set_timeout(0),
                         doctest::Contains("set_timeout: seconds must be finite and > 0, got 0"),
                         ms::ValueError);
    CHECK(ms::parallel::timeout() == before);
    ms::parallel::set_timeout(12.5);
    CHECK(ms::parallel::timeout() == 12.5);
    ms::parallel::set_timeout(before);
  }
}
