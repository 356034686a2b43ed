#!/usr/bin/env bash
# scripts/run_fuzz.sh — build the libFuzzer targets (fuzz/fuzz_*.cpp) with clang 14,
# AddressSanitizer and UndefinedBehaviorSanitizer (-fsanitize=undefined, fatal), and run
# each for a bounded time over a copy of its seed corpus (as many targets at a time as
# there are cores).
#
#   bash scripts/run_fuzz.sh            # every target, MS_FUZZ_SECONDS each
#   bash scripts/run_fuzz.sh npy npz    # only these targets
#
# Exit status: 0 all targets ran without a finding; 1 a target crashed, leaked, timed
# out, ran out of memory, or the build failed; 77 skipped (clang-14 or
# libclang-rt-14-dev is missing: `apt-get install clang-14 libclang-rt-14-dev`).
# The committed corpora (fuzz/corpus/<name>/) are never modified: each run fuzzes a
# temporary copy. A finding is kept in BUILD/fuzz-artifacts/<name>/ (reproduce with
# `BUILD/fuzz/fuzz_<name> FILE`) and the end of the log is printed.
#
# Environment:
#   MS_FUZZ_BUILD_DIR  build directory (default: build-fuzz)
#   MS_FUZZ_SECONDS    seconds per target (default: 30)
#   MS_JOBS            parallel compile jobs (default: ninja's own)
#
# The build uses -Dwerror=false: clang 14 warns where g++ 12 (the -Werror build of
# scripts/run_tests.sh) does not, and this build exists to find crashes, not warnings.
# Every TU (libms included) gets -fsanitize=fuzzer-no-link: the parsers live in libms,
# and without its coverage instrumentation libFuzzer would mutate blindly. Of libms,
# only the objects the targets link are built (fuzz/meson.build lists them).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$(pwd)
build_dir=${MS_FUZZ_BUILD_DIR:-build-fuzz}
seconds=${MS_FUZZ_SECONDS:-30}
jobs_args=()
[[ -n "${MS_JOBS:-}" ]] && jobs_args=(-j "$MS_JOBS")

skip() {
  echo "run_fuzz.sh: SKIPPED: $*"
  exit 77
}

# ------------------------------------------------------------------ toolchain
command -v clang++-14 >/dev/null 2>&1 || skip "clang++-14 not found (apt-get install clang-14)"
command -v clang-14 >/dev/null 2>&1 || skip "clang-14 not found (apt-get install clang-14)"
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }' \
  >"$probe_dir/probe.cpp"
if ! clang++-14 -fsanitize=fuzzer,address "$probe_dir/probe.cpp" -o "$probe_dir/probe" \
  >"$probe_dir/log" 2>&1; then
  skip "clang++-14 cannot link -fsanitize=fuzzer,address (apt-get install libclang-rt-14-dev):" \
    "$(head -c 300 "$probe_dir/log")"
fi

# ------------------------------------------------------------------ build
if [[ ! -f "$build_dir/meson-private/coredata.dat" ]]; then
  # -O2, not the release -O3: the same speed of fuzzing, half the compile time (the
  # 225 dtype-pair loops of src/core/tensor_copy.cpp: 65 s of CPU at -O3, 30 s at -O2).
  CXX=clang++-14 CC=clang-14 meson setup "$build_dir" -Dfuzz=true -Dtests=false -Doptimization=2 \
    -Dexamples=false -Dbench=disabled -Dtorch=disabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Dwerror=false -Dcpp_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined" \
    -Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined" || {
    echo "run_fuzz.sh: FAILED: meson setup $build_dir"
    exit 1
  }
fi
# Only the fuzz targets (the alias of fuzz/meson.build): they link the few libms
# objects the parsers need, so the rest of libms is never compiled here.
ninja -C "$build_dir" "${jobs_args[@]}" fuzz-targets || {
  echo "run_fuzz.sh: FAILED: build of $build_dir"
  exit 1
}

# ------------------------------------------------------------------ run
targets=()
if (($# > 0)); then
  for name in "$@"; do targets+=("$build_dir/fuzz/fuzz_$name"); done
else
  for bin in "$build_dir"/fuzz/fuzz_*; do
    [[ -f "$bin" && -x "$bin" ]] && targets+=("$bin")
  done
fi
((${#targets[@]} > 0)) || {
  echo "run_fuzz.sh: FAILED: no fuzz targets were built in $build_dir/fuzz"
  exit 1
}

# One OpenMP thread: the parsers are serial, and idle pools only slow libFuzzer down.
export OMP_NUM_THREADS=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"

# fuzz_one NAME BIN: fuzzes a copy of NAME's seed corpus for $seconds; writes its
# report to $probe_dir/NAME.out and returns libFuzzer's status.
fuzz_one() {
  local name=$1 bin=$2 work artifacts log rc
  work=$(mktemp -d)
  mkdir -p "$work/corpus"
  artifacts="$build_dir/fuzz-artifacts/$name"
  log="$build_dir/fuzz-logs/$name.log"
  mkdir -p "$artifacts" "$(dirname "$log")"
  {
    if [[ -d "$root/fuzz/corpus/$name" ]]; then
      cp -R "$root/fuzz/corpus/$name/." "$work/corpus/"
    else
      echo "run_fuzz.sh: $name: no seed corpus in fuzz/corpus/$name (starting empty)"
    fi
    echo "=== fuzz $name: ${seconds}s, $(find "$work/corpus" -type f | wc -l) seed files"
  } >"$probe_dir/$name.out"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work/corpus" >"$log" 2>&1
  rc=$?
  rm -rf "$work"
  if ((rc != 0)); then
    echo "run_fuzz.sh: $name: FAILED (exit $rc); log $log, inputs in $artifacts/:"
    tail -n 40 "$log"
  else
    grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$log" | tail -n 2 | sed "s/^/  /"
    echo "  ok"
  fi >>"$probe_dir/$name.out"
  return $rc
}

# The targets run side by side, one per core (each is single-threaded, and
# -max_total_time is wall-clock time, so each still fuzzes for $seconds); their
# reports are printed in order at the end.
slots=$(nproc 2>/dev/null || echo 1)
names=()
declare -A pid_of=()
for bin in "${targets[@]}"; do
  name=$(basename "$bin")
  name=${name#fuzz_}
  names+=("$name")
  if [[ ! -x "$bin" ]]; then
    echo "run_fuzz.sh: $name: no binary $bin" >"$probe_dir/$name.out"
    continue
  fi
  while (($(jobs -rp | wc -l) >= slots)); do wait -n; done
  fuzz_one "$name" "$bin" &
  pid_of[$name]=$!
done

failed=()
for name in "${names[@]}"; do
  rc=1
  [[ -n "${pid_of[$name]:-}" ]] && { wait "${pid_of[$name]}"; rc=$?; }
  cat "$probe_dir/$name.out"
  ((rc == 0)) || failed+=("$name")
done

if ((${#failed[@]} > 0)); then
  echo "run_fuzz.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "run_fuzz.sh: ${#targets[@]} targets ran ${seconds}s each without a finding"
