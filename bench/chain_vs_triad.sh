#!/usr/bin/env bash
# bench/chain_vs_triad.sh — the fused chain relu(a * b + c) * 0.5 on 16M floats
# against the STREAM triad of the same process; owns the table of the section
# "bench/chain_vs_triad.sh" of docs/benchmarks.md.
#
# On the shared VMs this project is measured on, memory bandwidth moves by up
# to 2x from second to second and between processes, so one process's GB/s
# says little: each case (BM_ChainVsTriad_* in bm_elementwise for the eager
# expression, BM_JitChainVsTriad_* in bm_jit for ms::jit) times the chain and
# the triad over the chain's own buffers in pairs, pass after pass, and reports
# the median ratio chain / triad of its pairs (counter vs_triad; see
# bench::versus_triad). This runs each binary RUNS times, takes each
# process's median over REPS repetitions, then the median over the processes.
# "into" assigns into an existing result, "fresh" makes a new 64 MiB result
# per call.
#
# Prints the Markdown table of docs/benchmarks.md on stdout (the median ratio
# over the processes, and their range); each process's ratios go to stderr.
#
#   bench/chain_vs_triad.sh                        # 5 processes per binary
#   RUNS=9 REPS=5 BUILD_DIR=build-bench bench/chain_vs_triad.sh > table.md
#   bench/chain_vs_triad.sh --markdown             # the same (the default output)
#
# Needs the benchmark binaries: build-bench (bench/run_bench.sh builds it) or
# BUILD_DIR. Only the ms side runs, so a build dir without LibTorch works too.
set -euo pipefail

for arg in "$@"; do
  case "$arg" in
    --markdown) ;;
    -h | --help)
      sed -n '2,22p' "$0"
      exit 0
      ;;
    *)
      echo "chain_vs_triad.sh: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
runs=${RUNS:-5}
reps=${REPS:-3}
if ! [[ "$runs" =~ ^[0-9]+$ && "$reps" =~ ^[0-9]+$ ]] || ((runs < 1 || reps < 2)); then
  # Google Benchmark reports medians only for 2 repetitions or more.
  echo "chain_vs_triad.sh: RUNS must be >= 1 and REPS >= 2 (given RUNS=$runs REPS=$reps)" >&2
  exit 2
fi

# ratios <binary> <into case> <fresh case>: one line per thread count,
# "nt:N into R fresh R triad GiB/s" (the cases' vs_triad counters, medians of
# the repetitions; the triad's GiB/s of the "into" case).
ratios() {
  "$build/bench/$1" --benchmark_filter="^BM_($2|$3)/nt:[12]/real_time\$" \
    --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true 2>/dev/null |
    awk -v into="$2" -v fresh="$3" '
      / *_median / {
        split($1, p, "/"); name = p[1]; nt = p[2]; sub("BM_", "", name)
        for (i = 1; i <= NF; ++i) {
          if ($i ~ /^vs_triad=/) { v = $i; sub("vs_triad=", "", v); r[name, nt] = v }
          if ($i ~ /^triad_GiBps=/) { v = $i; sub("triad_GiBps=", "", v); bw[name, nt] = v }
        }
      }
      END {
        for (t = 1; t <= 2; ++t) {
          nt = "nt:" t
          printf "%s into %.2f fresh %.2f triad %.1f\n", nt, r[into, nt], r[fresh, nt], bw[into, nt]
        }
      }'
}

# stats: "median (min-max)" of the numbers on stdin.
stats() {
  sort -g | awk '{ v[NR] = $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "**%.2f** (%.2f-%.2f)", m, v[1], v[NR] }'
}

if [ ! -x "$build/bench/bm_elementwise" ] || [ ! -x "$build/bench/bm_jit" ]; then
  echo "chain_vs_triad.sh: no $build/bench/bm_elementwise or bm_jit (build them, or set BUILD_DIR)" >&2
  exit 1
fi

meta="commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$root" diff --quiet HEAD 2>/dev/null || meta+=" (with uncommitted changes)"
meta+=", $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs"
load0=$(cut -d' ' -f1 /proc/loadavg)

declare -A lines
for bin in bm_elementwise bm_jit; do
  if [ "$bin" = bm_elementwise ]; then
    into=ChainVsTriad_MsInto fresh=ChainVsTriad_Ms
  else
    into=JitChainVsTriad_MsInto fresh=JitChainVsTriad_Ms
  fi
  lines[$bin]=""
  echo "## $bin: chain / triad per process (GiB/s of the triad alongside)" >&2
  for ((r = 1; r <= runs; ++r)); do
    out=$(ratios "$bin" "$into" "$fresh")
    echo "$out" | sed "s/^/run $r /" >&2
    lines[$bin]+="$out"$'\n'
  done
done

# cell <binary> <nt:N> <column of `ratios`' output>
cell() { printf '%s' "${lines[$1]}" | awk -v nt="$2" -v c="$3" '$1 == nt { print $c }' | stats; }
triad() { printf '%s%s' "${lines[bm_elementwise]}" "${lines[bm_jit]}" |
  awk -v nt="$1" '$1 == nt { print $7 }' | sort -g | awk '{ v[NR] = $1 } END { printf "%.0f-%.0f", v[1], v[NR] }'; }

echo "Measured at $meta; $runs processes per binary, each the median of $reps repetitions;"
echo "ratio = chain GB/s / triad GB/s, the median of pairs (one chain pass, then one triad pass"
echo "over the chain's a, b and y) in a repetition; median over the processes (their range in"
echo "brackets). 1-minute load at the start: $load0."
echo
echo "| case | 1 thread | 2 threads |"
echo "|---|---|---|"
echo "| eager expression, into y | $(cell bm_elementwise nt:1 3) | $(cell bm_elementwise nt:2 3) |"
echo "| eager expression, fresh y | $(cell bm_elementwise nt:1 5) | $(cell bm_elementwise nt:2 5) |"
echo "| ms::jit, into y | $(cell bm_jit nt:1 3) | $(cell bm_jit nt:2 3) |"
echo "| ms::jit, fresh y | $(cell bm_jit nt:1 5) | $(cell bm_jit nt:2 5) |"
echo
echo "The triad in these processes: $(triad nt:1) GiB/s on one thread, $(triad nt:2) GiB/s on two."
