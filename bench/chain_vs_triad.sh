#!/usr/bin/env bash
# bench/chain_vs_triad.sh — the fused chain relu(a * b + c) * 0.5 on 16M floats
# against the STREAM triad of the same process (issues 2 and 3), as in
# docs/benchmarks.md, section "Session 10".
#
# On the shared VMs this project is measured on, memory bandwidth moves by up
# to 2x between processes minutes apart, so one process's GB/s says little:
# this runs bm_elementwise (eager expression) and bm_jit (ms::jit) RUNS times
# each, every process with the chain and the triad interleaved, and prints the
# ratio chain / triad of each process (medians of REPS repetitions), then the
# median ratio over the processes. "into" assigns into an existing result,
# "fresh" makes a new 64 MiB result per call.
#
#   bench/chain_vs_triad.sh                        # 5 processes per binary
#   RUNS=9 REPS=5 BUILD_DIR=build-bench bench/chain_vs_triad.sh
#
# Needs build-bench (bench/run_bench.sh builds it) or BUILD_DIR.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
runs=${RUNS:-5}
reps=${REPS:-3}

# ratios <binary> <into case> <fresh case>: one line per thread count.
ratios() {
  "$build/bench/$1" --benchmark_filter="^BM_($2|$3|Stream_Triad)/nt:[12]/real_time\$" \
    --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true 2>/dev/null |
    awk -v into="$2" -v fresh="$3" '
      / *_median / {
        split($1, p, "/"); name = p[1]; nt = p[2]; sub("BM_", "", name)
        for (i = 1; i <= NF; ++i) if ($i ~ /^bytes_per_second=/) {
          v = $i; sub("bytes_per_second=", "", v)
          scale = v ~ /M\/s$/ ? 1 / 1024 : v ~ /k\/s$/ ? 1 / 1048576 : 1  # in Gi/s
          sub("[kMG]/s$", "", v); bw[name, nt] = v * scale
        }
      }
      END {
        for (t = 1; t <= 2; ++t) {
          nt = "nt:" t
          printf "%s into %.2f fresh %.2f triad %.1f\n", nt, bw[into, nt] / bw["Stream_Triad", nt],
                 bw[fresh, nt] / bw["Stream_Triad", nt], bw["Stream_Triad", nt]
        }
      }'
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for bin in bm_elementwise bm_jit; do
  if [ "$bin" = bm_elementwise ]; then into=Chain_MsInto fresh=Chain_Ms; else into=JitChain_MsInto fresh=JitChain_Ms; fi
  lines=""
  echo "## $bin: chain / triad per process (GB/s of the triad alongside)"
  for ((r = 1; r <= runs; ++r)); do
    out=$(ratios "$bin" "$into" "$fresh")
    echo "$out" | sed "s/^/run $r /"
    lines+="$out"$'\n'
  done
  for nt in nt:1 nt:2; do
    for kind in into fresh; do
      col=$([ "$kind" = into ] && echo 3 || echo 5)
      m=$(printf '%s' "$lines" | awk -v nt="$nt" -v c="$col" '$1 == nt {print $c}' | median)
      echo "median $nt $kind: $m"
    done
  done
done
