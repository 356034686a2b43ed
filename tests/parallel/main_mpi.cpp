// The doctest main of the parallel stage. Every rank runs the same test cases
// in the same order (a collective needs every rank); the exit code is non-zero
// on every rank when a check failed on any rank.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>
#include <ms/parallel/collective.hpp>
#include <ms/parallel/comm.hpp>

int main(int argc, char** argv) {
  ms::parallel::init();
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit()) return rc;
  int failed = rc != 0 ? 1 : 0;
  try {
    failed = ms::parallel::all_reduce(ms::full({}, failed, ms::int32), ms::parallel::ReduceOp::Max)
                 .item<int>();
    ms::parallel::finalize();
  } catch (const ms::Error& e) {
    std::cerr << "rank " << ms::parallel::rank() << ": " << e.what() << "\n";
    return 1;
  }
  return failed;
}
