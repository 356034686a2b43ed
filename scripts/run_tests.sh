#!/usr/bin/env bash
# scripts/run_tests.sh — set up, build and run the whole suite, twice:
#   1. build/       release, -Werror: every test, including the consumer tests
#                   (ms as a meson subproject; meson install + pkg-config)
#   2. build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer (less its alignment and
#                   null checks): every test again, any sanitizer report fails the test
#   3. build-fuzz/  clang-14 libFuzzer targets of every file parser, under ASan and all of
#                   UBSan (scripts/run_fuzz.sh),
#                   MS_FUZZ_SECONDS each over the committed seed corpora; counted as one
#                   test per run (skipped when clang-14 / libclang-rt-14-dev are missing)
# Ends with the line `N passed, N failed, N skipped` (doctest test cases, plus one per
# other meson test) and exits non-zero on any failure. Idempotent: a second run with
# nothing changed rebuilds nothing and only runs the tests.
#
# Environment:
#   MS_BUILD_DIR       first build dir (default: build)
#   MS_ASAN_BUILD_DIR  sanitizer build dir (default: build-asan)
#   MS_SKIP_ASAN=1     skip the sanitizer build (quick local runs; CI never sets it)
#   MS_SKIP_FUZZ=1     skip the fuzz phase (quick local runs; CI never sets it)
#   MS_FUZZ_SECONDS    seconds per fuzz target (default here: 20)
#   MS_JOBS            parallel compile jobs (default: ninja's own)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit
root=$(pwd)
build_dir=${MS_BUILD_DIR:-build}
asan_dir=${MS_ASAN_BUILD_DIR:-build-asan}
export MS_BUILD_DIR=$build_dir

passed=0
failed=0
skipped=0
phases=()
t_start=$SECONDS

# Sets cpu to the CPU seconds (user + sys) used so far by finished child processes.
# (`times` must run in this shell, not in a $(...) subshell, to see them.)
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
cpu=0
children_cpu() {
  times >"$times_file" # second line: the children's user and sys time, e.g. 1m2.345s
  cpu=$(awk 'NR == 2 {
    n = split($0, f, " "); s = 0
    for (i = 1; i <= n; i++) { split(f[i], ms, "m"); s += ms[1] * 60 + ms[2] }
    printf "%d", s }' "$times_file")
}

# phase NAME CMD...: runs CMD, records its wall time (and CPU time, which does not
# depend on what else the machine is doing); returns CMD's status.
phase() {
  local name=$1
  shift
  local t0=$SECONDS c0
  children_cpu
  c0=$cpu
  echo
  echo "=== $name"
  "$@"
  local rc=$?
  children_cpu
  phases+=("$(printf '%-30s %5ds wall %6ds cpu%s' "$name" $((SECONDS - t0)) $((cpu - c0)) \
    "$([[ $rc -ne 0 ]] && echo '  FAILED')")")
  return $rc
}

# tally BUILD_DIR: adds the counts of the last `meson test` in BUILD_DIR.
tally() {
  local p f s
  read -r p f s < <(python3 "$root/scripts/count_tests.py" "$1")
  if [[ -z "${s:-}" ]]; then # the log could not be read: that is a failure too
    p=0 f=1 s=0
  fi
  echo "$1: $p passed, $f failed, $s skipped"
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + s))
}

finish() {
  echo
  echo "=== time per phase (wall clock, and CPU time of all its processes)"
  printf '  %s\n' "${phases[@]}"
  children_cpu
  printf '  %-30s %5ds wall %6ds cpu\n' "total" $((SECONDS - t_start)) "$cpu"
  echo
  echo "$passed passed, $failed failed, $skipped skipped"
  ((failed == 0))
  exit
}

jobs_args=()
[[ -n "${MS_JOBS:-}" ]] && jobs_args=(-j "$MS_JOBS")

# ------------------------------------------------------------------ 1. release build
phase "packages (scripts/setup.sh)" bash scripts/setup.sh --no-build || {
  failed=$((failed + 1))
  finish
}
phase "configure + build $build_dir" bash scripts/setup.sh || {
  failed=$((failed + 1))
  finish
}
phase "test $build_dir" meson test -C "$build_dir" --print-errorlogs
tally "$build_dir"

# ------------------------------------------------------------------ 2. sanitizers
if [[ "${MS_SKIP_ASAN:-0}" == 1 ]]; then
  echo "MS_SKIP_ASAN=1: skipping the sanitizer build"
  finish
fi

# shellcheck disable=SC2317  # reached: finish exits only when MS_SKIP_ASAN=1
configure_asan() {
  if [[ ! -f "$asan_dir/meson-private/coredata.dat" ]]; then
    # Unity chunks of 8 files, as in build/ (scripts/setup.sh).
    # -O1 -g1 (line tables): readable stack traces, and it compiles
    # 2.4x faster than -O2 -g (ASan + UBSan instrumentation of Eigen code is slow
    # to optimize: 49 s instead of 118 s of CPU for src/kernels/elementwise.cpp).
    # The test programs compile at -O0 there (tests/meson.build: 3x less CPU than -O1).
    # float-cast-overflow: GCC's -fsanitize=undefined leaves out float -> int
    # conversions of NaN, infinities and out-of-range values, which ms defines.
    # -fno-sanitize=alignment,null: these two checks on every load and store of inlined
    # Eigen and expression-template code cost 40% of this build's compile time
    # (src/ops/elementwise.cpp 35 -> 20 s, src/kernels/gemm.cpp 92 -> 51 s,
    # tests/nn/test_layers.cpp 10.0 -> 7.3 s, two compiles at a time). A load or
    # store through a null pointer is still caught (ASan reports the SEGV); the
    # parsers, where bytes from a file meet typed loads, are checked for both under
    # fuzzing (scripts/run_fuzz.sh builds them with clang's -fsanitize=undefined).
    meson setup "$asan_dir" -Doptimization=1 -Ddebug=false \
      -Dcpp_args="-g1 -fno-omit-frame-pointer -fsanitize=float-cast-overflow -fno-sanitize=alignment,null" \
      -Dwerror=true \
      -Db_sanitize=address,undefined -Db_lundef=false -Dunity=on -Dunity_size=8 \
      -Dbench=disabled -Dexamples=false -Dtorch=disabled --wrap-mode=nodownload || return
  fi
  ninja -C "$asan_dir" "${jobs_args[@]}"
}
phase "configure + build $asan_dir" configure_asan || {
  failed=$((failed + 1))
  finish
}

# Any sanitizer report aborts the test binary, so meson counts it as failed.
# allocator_may_return_null=1: an allocation too big for the system returns null as
# in a normal build (ms turns that into an ms::Error, which tests check) instead
# of ASan aborting on it.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1"
phase "test $asan_dir" meson test -C "$asan_dir" --print-errorlogs --timeout-multiplier 3
tally "$asan_dir"

# ------------------------------------------------------------------ 3. fuzzing
if [[ "${MS_SKIP_FUZZ:-0}" == 1 ]]; then
  echo "MS_SKIP_FUZZ=1: skipping the fuzz phase"
  finish
fi
export MS_FUZZ_SECONDS=${MS_FUZZ_SECONDS:-20}
phase "fuzz (scripts/run_fuzz.sh)" bash scripts/run_fuzz.sh
rc=$?
case $rc in
  0) passed=$((passed + 1)) ;;
  77) skipped=$((skipped + 1)) ;;
  *) failed=$((failed + 1)) ;;
esac

finish
