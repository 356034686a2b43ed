#!/usr/bin/env bash
# bench/onnx_table.sh — ONNX round trip against the original: every row of
# bench/bm_onnx as the time of the exported MLP's GraphCell (jitted) over the
# time of the jitted cell it came from, at batch 1 and 64 with 1 and 2
# threads, and the time to construct a GraphCell from a ~100 MB model file.
# Targets: GraphCell within 5% of the cell (ratio <= 1.05), loading < 1 s.
#
# Repetitions interleaved (--benchmark_enable_random_interleaving), so a change
# of load on this shared machine hits every row alike. Where the weights lie
# in physical memory moves a process's batch-1 figures by several percent
# (2.1 MB of weights, about one core's L2; src/core/storage.cpp), so the MLP
# cases run in PROCS separate processes: each ratio is the median of the
# processes' ratios, with their range beside it. Prints Markdown on stdout;
# progress on stderr.
#
#   bench/onnx_table.sh                 # 3 processes x 5 repetitions of 0.3 s each
#   REPS=9 MIN_TIME=0.5 bench/onnx_table.sh > table.md
#   BUILD_DIR=build NO_BUILD=1 PROCS=1 REPS=1 MIN_TIME=0.01 bench/onnx_table.sh   # a quick check
#   REPORT_ONLY=1 bench/onnx_table.sh   # the table again from the last run's JSON
#
# Raw Google Benchmark JSON is kept in $BUILD_DIR/bench-results-onnx/.
set -euo pipefail

case "${1:-}" in
  -h | --help)
    sed -n '2,18p' "$0"
    exit 0
    ;;
  "") ;;
  *)
    echo "onnx_table.sh: unknown argument '$1' (try --help)" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
build=${BUILD_DIR:-$root/build-bench}
reps=${REPS:-5}
min_time=${MIN_TIME:-0.3}
procs=${PROCS:-3}
out="$build/bench-results-onnx"

run_all() {
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" -Dtests=false -Dexamples=false -Dbench=enabled -Donnx=enabled >&2
  fi
  if [ "${NO_BUILD:-0}" != 1 ]; then
    ninja -C "$build" -j "${JOBS:-2}" bench/bm_onnx >&2
  fi
  [ -x "$build/bench/bm_onnx" ] || {
    echo "onnx_table.sh: no $build/bench/bm_onnx (needs libms_onnx: meson option onnx)" >&2
    exit 1
  }
  rm -rf "$out"
  mkdir -p "$out"
  bench_meta "$root" >"$out/meta"
  for p in $(seq 1 "$procs"); do
    bench_run_json "$build/bench/bm_onnx" "$out/mlp$p.json" --benchmark_filter='^BM_OnnxMlp_'
  done
  bench_run_json "$build/bench/bm_onnx" "$out/load.json" --benchmark_filter='^BM_OnnxLoad_'
  cut -d' ' -f1 /proc/loadavg >>"$out/load_samples"
}

[ "${REPORT_ONLY:-0}" = 1 ] || run_all

PYTHONPATH="$root/bench" python3 - "$out" "$reps" "$min_time" <<'EOF'
import glob, os, statistics, sys
from bench_results import iterations, meta_and_loads, seconds

out, reps, min_time = sys.argv[1:]
meta, loads = meta_and_loads(out)
failed = False

def medians(path):
    """Case name -> median wall time of one iteration in seconds, of one JSON run."""
    global failed
    runs, bad = iterations([path])
    failed |= bad
    return {k: statistics.median(seconds(r) for r in v) for k, v in runs.items()}

procs = [medians(p) for p in sorted(glob.glob(os.path.join(out, "mlp*.json")))]
loading = medians(os.path.join(out, "load.json"))

def case_time(name):
    """Median over the processes of a case's time (None when not run)."""
    vs = [p[name] for p in procs if name in p] or ([loading[name]] if name in loading else [])
    return statistics.median(vs) if vs else None

def ratio_of(num, den):
    """Median over the processes of num / den, and the lowest and highest."""
    rs = [p[num] / p[den] for p in procs if num in p and p.get(den)]
    return (statistics.median(rs), min(rs), max(rs)) if rs else (None, None, None)

def us(v):
    return "n/a" if v is None else f"{v * 1e6:.1f}"

def span(r):
    mid, lo, hi = r
    return "n/a" if mid is None else f"{mid:.3f} [{lo:.3f}-{hi:.3f}]"

print(f"Measured at {meta}. {len(procs)} processes; in each, medians of {reps} repetitions of "
      f"{min_time} s, interleaved; times are medians over the processes, ratios the median of "
      f"the processes' ratios [lowest-highest]; wall time. 1-minute load average during the run: "
      f"{min(loads):.1f} to "
      f"{max(loads):.1f}. `GraphCell`: the exported file loaded as it is (dynamic batch: one "
      f"graph for every size); `static`: loaded with `set_inputs = false` (ms::jit specializes "
      f"on the batch, as for the cell).")
print()
print("| MLP 784-512-256-10 | threads | jitted cell µs | GraphCell µs | GraphCell / jit | "
      "static µs | static / jit |")
print("|---|---|---|---|---|---|---|")
checks = []
for nt in (1, 2):
    for batch in (1, 64):
        args = f"batch:{batch}/nt:{nt}"
        j = f"BM_OnnxMlp_Jit/{args}"
        g = f"BM_OnnxMlp_GraphCell/{args}"
        s = f"BM_OnnxMlp_GraphCellStatic/{args}"
        rg, rs_ = ratio_of(g, j), ratio_of(s, j)
        print(f"| batch {batch} | {nt} | {us(case_time(j))} | {us(case_time(g))} | {span(rg)} | "
              f"{us(case_time(s))} | {span(rs_)} |")
        checks.append((f"GraphCell / jit at batch {batch}, {nt} thread(s) <= 1.05",
                       rg[0] is not None and rg[0] <= 1.05, span(rg)))
print()
print("| loading the ~100 MB model | ms |")
print("|---|---|")
for what, name in (("GraphCell(path): read, parse, check, map", "BM_OnnxLoad_File/nt:1"),
                   ("GraphCell(bytes, origin): the same without the read", "BM_OnnxLoad_Bytes/nt:1"),
                   ("ms::io::read_file alone", "BM_OnnxLoad_ReadFile/nt:1")):
    v = case_time(name)
    print(f"| {what} | {'n/a' if v is None else f'{v * 1e3:.0f}'} |")
    if name == "BM_OnnxLoad_File/nt:1":
        checks.append(("GraphCell from the ~100 MB file < 1 s", v is not None and v < 1.0,
                       "n/a" if v is None else f"{v:.3f} s"))
print()
print("Targets:")
for what, ok, got in checks:
    print(f"- {what}: {'met' if ok else 'NOT met'} ({got})")
sys.exit(1 if failed else 0)
EOF
