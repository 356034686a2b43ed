# shellcheck shell=bash disable=SC2154  # $out, $reps and $min_time are the caller's
# bench/lib.sh — what the bench/*_table.sh scripts share; sourced, not run.
# (Their Python reports share bench/bench_results.py.)

# One line: the commit (and whether the tree has uncommitted changes), the
# CPU, its count and the time, for the tables' "Measured at" line.
#   bench_meta "$root" >"$out/meta"
bench_meta() {
  printf 'commit %s' "$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$1" diff --quiet HEAD 2>/dev/null || printf ' (with uncommitted changes)'
  printf ', %s, %s CPUs, %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
    "$(nproc)" "$(date -u '+%Y-%m-%d %H:%M UTC')"
}

# Runs the Google Benchmark binary EXE with the caller's $reps repetitions of
# $min_time s, randomly interleaved, its JSON into JSON; the 1-minute load
# before the run is appended to $out/load_samples.
#   bench_run_json "$build/bench/bm_gemm" "$out/gemm_nt1.json" --benchmark_filter=...
bench_run_json() {
  local exe=$1 json=$2
  shift 2
  echo "running ${exe##*/} $* (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  cut -d' ' -f1 /proc/loadavg >>"$out/load_samples"
  "$exe" "$@" \
    --benchmark_repetitions="$reps" \
    --benchmark_enable_random_interleaving=true \
    --benchmark_min_time="$min_time" \
    --benchmark_format=json \
    --benchmark_out="$json" --benchmark_out_format=json >/dev/null
}
