#!/usr/bin/env bash
# bench/conv_table.sh — ms's convolution algorithms on the Fashion-MNIST CNN's
# two convolutions (forward, input gradient, weight gradient) beside LibTorch,
# as fractions of the FMA peak measured in the same process; owns the table
# of the section "bench/conv_table.sh" of docs/benchmarks.md.
#
# Runs bench/bm_conv's BM_Conv<Pass>_<Algo> rows (float32's algorithms,
# bfloat16's, LibTorch, the memory floor; see bench/bm_conv.cpp) with 1 and 2
# threads, one process per thread count, the repetitions of ms and LibTorch
# interleaved (--benchmark_enable_random_interleaving) so that a change of load
# hits both alike; the FMA peak is the best of bm_conv's own (20 runs at the start of
# the process) and of the interleaved BM_Peak_Fma repetitions. Prints the
# Markdown table (medians) on stdout, progress and the load average on stderr.
#
#   bench/conv_table.sh                 # 5 repetitions of 0.3 s each
#   REPS=9 MIN_TIME=0.5 bench/conv_table.sh > table.md
#   NO_BUILD=1 BUILD_DIR=/tmp/b bench/conv_table.sh
#   REPORT_ONLY=1 bench/conv_table.sh   # the table again from the last run's JSON
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
build=${BUILD_DIR:-$root/build-bench}
reps=${REPS:-5}
min_time=${MIN_TIME:-0.3}
out="$build/bench-results-conv"

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  if [ "${NO_BUILD:-0}" != 1 ]; then
    ninja -C "$build" -j "${JOBS:-2}" bench/bm_conv >&2
  fi
  rm -rf "$out"
  mkdir -p "$out"
  bench_meta "$root" >"$out/meta"
  for nt in 1 2; do
    bench_run_json "$build/bench/bm_conv" "$out/conv_nt$nt.json" \
      --benchmark_filter="^BM_(Peak_Fma/nt:$nt|Conv(Fwd|GradIn|GradW)_[A-Za-z0-9]+/layer:[12]/nt:$nt(/real_time)?)\$"
    cut -d' ' -f1 /proc/loadavg >>"$out/load_samples"
  done
fi

python3 - "$out" <<'EOF'
import glob, json, os, re, statistics, sys

out = sys.argv[1]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "conv_nt*.json"))):
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        runs.setdefault(re.sub(r"/real_time$", "", b["run_name"]), []).append(b)

def med(name, key, agg=statistics.median):
    rs = runs.get(name)
    return agg(r[key] for r in rs) if rs else None

def cell(name, peak):
    f = med(name, "items_per_second")
    if f is None:
        return "—"
    label = runs[name][0].get("label", "")
    chosen = name.split("/")[0].endswith(("_Auto", "_Bf16Auto", "_Bf16Op"))  # labelled with the choice
    auto = f" ({label})" if chosen and label else ""
    return f"{f / 1e9:.0f} = {f / peak:.2f}{auto}"

meta = open(os.path.join(out, "meta")).read().strip()
loads = [l.strip() for l in open(os.path.join(out, "load_samples"))]
print(f"Measured: {meta}; load average (1 min) before/after each thread count: "
      f"{', '.join(loads)}.\n")
print("GFLOP/s (direct-convolution flops) = fraction of the in-process float32 FMA peak; "
      "Auto names the algorithm it chose; — where an algorithm does not apply. "
      "bf16: the pass on bfloat16 operands (float32 sums), Auto, libxsmm's bf16 kernels "
      "(Direct) and gemm_bf16 (Im2col); bf16 op: ms::conv2d on bfloat16 tensors, "
      "conversions included where it runs float32's kernels. "
      "Memory floor: the pass's flops over the time of its compulsory memory traffic alone "
      "(BM_Conv<Pass>_Floor: inputs read once, output written once), the most any kernel "
      "of the pass can reach here; Auto / floor: Auto's rate over it.\n")
print("| layer | pass | threads | FMA peak | Auto | Direct | Winograd | Im2col | LibTorch "
      "| memory floor | Auto / floor | bf16 Auto | bf16 Direct | bf16 Im2col | bf16 op |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
layers = {1: "conv1 [64,1,28,28]x[32,1,3,3]", 2: "conv2 [64,32,14,14]x[64,32,3,3]"}
passes = [("Fwd", "forward"), ("GradIn", "input grad"), ("GradW", "weight grad")]
for nt in (1, 2):
    # The FMA peak: the best of bm_conv's fma_peak(nt) (20 runs at the start of
    # the process, what the of_peak counters divide by) and of the interleaved
    # BM_Peak_Fma repetitions (load only ever lowers it).
    ref = [r for n, rs in runs.items() if n.endswith(f"/nt:{nt}") and "of_peak" in rs[0]
           for r in rs]
    if not ref:
        continue
    peak = max(ref[0]["items_per_second"] / ref[0]["of_peak"],
               med(f"BM_Peak_Fma/nt:{nt}", "items_per_second", max) or 0)
    for layer in (1, 2):
        for p, pname in passes:
            c = lambda algo: cell(f"BM_Conv{p}_{algo}/layer:{layer}/nt:{nt}", peak)
            op = c("Bf16Op") if p == "Fwd" else "—"
            rate = lambda algo: med(f"BM_Conv{p}_{algo}/layer:{layer}/nt:{nt}", "items_per_second")
            auto, floor = rate("Auto"), rate("Floor")
            of_floor = f"{auto / floor:.2f}" if auto and floor else "—"
            print(f"| {layers[layer]} | {pname} | {nt} | {peak / 1e9:.0f} | {c('Auto')} | "
                  f"{c('Direct')} | {c('Winograd')} | {c('Im2col')} | {c('Torch')} | "
                  f"{c('Floor')} | {of_floor} | {c('Bf16Auto')} | {c('Bf16Direct')} | "
                  f"{c('Bf16Im2col')} | {op} |")
EOF
