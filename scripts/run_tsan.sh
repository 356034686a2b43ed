#!/usr/bin/env bash
# ThreadSanitizer over the concurrency tests: hook registration and removal
# while other threads call and trace a cell (tests/nn/test_cell.cpp), the jit
# cache under concurrent calls and compiles (tests/jit/test_jit.cpp,
# tests/jit/test_dynamic.cpp), and the thread pool (tests/kernels/test_parallel.cpp).
# Run it before submitting a change that touches threads, jit caches or hooks.
#
# The whole suite under TSan would take far longer than the ASan + UBSan pass of
# scripts/run_tests.sh, so this configures its own build dir with
# -Db_sanitize=thread, builds libms and only the three test programs that hold
# these tests, and runs only the concurrency test cases of each (doctest filters
# below). OpenBLAS is disabled there: with it the pool is OpenMP's (libgomp is not
# instrumented, so TSan cannot see its barriers and reports false races); without
# it ms's own pool runs every parallel loop, which is what the pool tests check.
#
# Exits non-zero when the build fails, a test fails, or TSan reports anything.
#
# Environment:
#   MS_TSAN_BUILD_DIR  build dir (default: build-tsan)
#   MS_JOBS            ninja -j (default: 2)
set -uo pipefail

cd "$(dirname "$0")/.."
dir=${MS_TSAN_BUILD_DIR:-build-tsan}
jobs=${MS_JOBS:-2}

if [[ ! -f "$dir/meson-private/coredata.dat" ]]; then
  # -O1 -g1: readable reports at a bearable compile time; the test programs
  # compile at -O0 in a sanitizer build (tests/meson.build).
  meson setup "$dir" -Doptimization=1 -Ddebug=false -Dcpp_args="-g1 -fno-omit-frame-pointer" \
    -Dwerror=true -Db_sanitize=thread -Db_lundef=false -Dblas=disabled \
    -Dbench=disabled -Dexamples=false -Dtorch=disabled --wrap-mode=nodownload || exit 1
fi
ninja -C "$dir" -j "$jobs" tests/test_nn tests/test_jit tests/test_kernels || exit 1

# halt_on_error: the first report ends the program with exit code 66. Not
# abort_on_error: the test runner's SIGABRT handler, run while other threads hold
# locks, can hang the process instead of ending it. second_deadlock_stack: both
# stacks of a lock-order inversion.
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:history_size=4"
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive

failed=0
run() {  # run PROGRAM FILTER [EXCLUDE]: the test cases matching FILTER (doctest wildcards)
  local prog=$1 filter=$2 exclude=${3:-}
  echo "== $prog -tc=\"$filter\"${exclude:+ -tce=\"$exclude\"}"
  # timeout: a hung program fails the run instead of hanging it.
  if ! timeout 900 "$dir/tests/$prog" --test-case="$filter" --test-case-exclude="$exclude" \
    --no-version=true; then
    echo "FAILED: $prog ($filter)"
    failed=$((failed + 1))
  fi
}
run test_nn "*hooks while other threads*,*hook churn*,hook handles*"
run test_jit "two threads*,*hook churn*,the cache is bounded*"
run test_jit "two threads with new shapes*,a hook change makes*"
# Not the fork() test: TSan cannot start threads in a child of a threaded process.
run test_kernels "parallel_for:*,set_num_threads*" "*fork()*"

if [[ $failed -ne 0 ]]; then
  echo "run_tsan: $failed program(s) failed or had a ThreadSanitizer report"
  exit 1
fi
echo "run_tsan: no ThreadSanitizer report"
