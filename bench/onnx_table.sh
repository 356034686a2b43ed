#!/usr/bin/env bash
# bench/onnx_table.sh — ONNX round trip against the original: every row of
# bench/bm_onnx as the time of the exported MLP's GraphCell (jitted) over the
# time of the jitted cell it came from, at batch 1 and 64 with 1 and 2
# threads, and the time to construct a GraphCell from a ~100 MB model file.
# Targets: GraphCell within 5% of the cell (ratio <= 1.05), loading < 1 s.
#
# Repetitions interleaved (--benchmark_enable_random_interleaving), so a change
# of load on this shared machine hits every row alike. Prints Markdown on
# stdout; progress on stderr.
#
#   bench/onnx_table.sh                 # 5 repetitions of 0.3 s each
#   REPS=9 MIN_TIME=0.5 bench/onnx_table.sh > table.md
#   BUILD_DIR=build NO_BUILD=1 REPS=1 MIN_TIME=0.01 bench/onnx_table.sh   # a quick check
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
  bench_run_json "$build/bench/bm_onnx" "$out/onnx.json"
  cut -d' ' -f1 /proc/loadavg >>"$out/load_samples"
}

[ "${REPORT_ONLY:-0}" = 1 ] || run_all

python3 - "$out" "$reps" "$min_time" <<'EOF'
import json, os, re, statistics, sys

out, reps, min_time = sys.argv[1:]
with open(os.path.join(out, "load_samples")) as f:
    loads = [float(x) for x in f.read().split()]
with open(os.path.join(out, "meta")) as f:
    meta = f.read().strip()
runs = {}
failed = False
with open(os.path.join(out, "onnx.json")) as f:
    for b in json.load(f)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        if b.get("error_occurred"):
            print(f"ERROR {b['name']}: {b.get('error_message')}", file=sys.stderr)
            failed = True
            continue
        runs.setdefault(re.sub(r"/real_time$", "", b["run_name"]), []).append(b)

UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}

def seconds(name):
    """Median wall time of one iteration, in seconds (None when not run)."""
    rs = runs.get(name)
    if not rs:
        return None
    return statistics.median(r["real_time"] * UNIT[r["time_unit"]] for r in rs)

def us(v):
    return "n/a" if v is None else f"{v * 1e6:.1f}"

def ratio(x, y):
    return None if x is None or not y else x / y

def rs(v):
    return "n/a" if v is None else f"{v:.3f}"

print(f"Measured at {meta}. Medians of {reps} repetitions of {min_time} s, interleaved in one "
      f"process; wall time. 1-minute load average during the run: {min(loads):.1f} to "
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
        j = seconds(f"BM_OnnxMlp_Jit/{args}")
        g = seconds(f"BM_OnnxMlp_GraphCell/{args}")
        s = seconds(f"BM_OnnxMlp_GraphCellStatic/{args}")
        print(f"| batch {batch} | {nt} | {us(j)} | {us(g)} | {rs(ratio(g, j))} | {us(s)} | "
              f"{rs(ratio(s, j))} |")
        r = ratio(g, j)
        checks.append((f"GraphCell / jit at batch {batch}, {nt} thread(s) <= 1.05",
                       r is not None and r <= 1.05, rs(r)))
print()
print("| loading the ~100 MB model | ms |")
print("|---|---|")
for what, name in (("GraphCell(path): read, parse, check, map", "BM_OnnxLoad_File/nt:1"),
                   ("GraphCell(bytes, origin): the same without the read", "BM_OnnxLoad_Bytes/nt:1"),
                   ("ms::io::read_file alone", "BM_OnnxLoad_ReadFile/nt:1")):
    v = seconds(name)
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
