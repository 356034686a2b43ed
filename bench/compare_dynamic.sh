#!/usr/bin/env bash
# bench/compare_dynamic.sh — dynamic shapes: one jitted training step over a
# stream of batch sizes; owns the table of the section
# "bench/compare_dynamic.sh" of docs/benchmarks.md.
#
# Builds bm_dynamic in build-bench (-Dtorch=enabled -Dtests=false
# -Dexamples=false), then runs the MLP training step over a stream of 512
# random batch sizes in [1, 256] (bench/bm_dynamic.cpp): ms with auto-dynamic
# (JitConfig::dynamic = 1), ms with a static graph per size, and LibTorch, in
# one process per thread count (1, 2) with their repetitions interleaved.
# Prints the Markdown table of docs/benchmarks.md on stdout: medians
# (samples/s, ms/step) and the ratios ms_dynamic / ms_static (target >= 0.95)
# and ms_dynamic / LibTorch (>= 1.2); progress goes to stderr.
#
#   bench/compare_dynamic.sh                   # 3 repetitions
#   bench/compare_dynamic.sh --markdown        # the same (the default output)
#   REPS=5 NO_BUILD=1 bench/compare_dynamic.sh
#   BUILD_DIR=build-bench-dyn JOBS=1 bench/compare_dynamic.sh
#   REPORT_ONLY=1 bench/compare_dynamic.sh     # the table again from the last JSON
#
# Raw Google Benchmark JSON goes to $BUILD_DIR/bench-results-dynamic/.
set -euo pipefail

for arg in "$@"; do
  case "$arg" in
    --markdown) ;;
    -h | --help)
      sed -n '2,21p' "$0"
      exit 0
      ;;
    *)
      echo "compare_dynamic.sh: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
reps=${REPS:-3}
min_time=${MIN_TIME:-0.5}
jobs=${JOBS:-2}
out="$build/bench-results-dynamic"

load() { cut -d' ' -f1 /proc/loadavg; }

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" -Dtorch=enabled -Dtests=false -Dexamples=false \
      -Dbench=enabled >&2
  fi
  [ "${NO_BUILD:-0}" = 1 ] || ninja -C "$build" -j "$jobs" bench/bm_dynamic >&2
  rm -rf "$out"
  mkdir -p "$out"
  # What the table was measured on: the commit and the CPU.
  {
    printf 'commit %s' "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    git -C "$root" diff --quiet HEAD 2>/dev/null || printf ' (with uncommitted changes)'
    printf ', %s, %s CPUs, %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
      "$(nproc)" "$(date -u '+%Y-%m-%d %H:%M UTC')"
  } >"$out/meta"
  for nt in 1 2; do
    echo "running stream_nt$nt (load $(load))" >&2
    echo "$nt start $(load)" >>"$out/load_samples"
    "$build/bench/bm_dynamic" \
      --benchmark_filter="^BM_DynamicStream/(ms_dynamic|ms_static|torch)/nt:$nt/real_time\$" \
      --benchmark_repetitions="$reps" \
      --benchmark_enable_random_interleaving=true \
      --benchmark_min_time="$min_time" \
      --benchmark_format=json \
      --benchmark_out="$out/stream_nt$nt.json" --benchmark_out_format=json >/dev/null
    echo "$nt end $(load)" >>"$out/load_samples"
  done
fi

python3 - "$out" "$reps" <<'PY'
import glob, json, os, re, statistics, sys

out, reps = sys.argv[1:]
try:
    with open(os.path.join(out, "meta")) as f:
        meta = f.read().strip()
except OSError:
    meta = "an unrecorded commit and CPU"
loads = {}
with open(os.path.join(out, "load_samples")) as f:
    for line in f:
        nt, _, v = line.split()
        loads.setdefault(int(nt), []).append(float(v))

res = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    with open(path) as f:
        doc = json.load(f)
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        if b.get("error_occurred"):
            print(f"ERROR {b['name']}: {b.get('error_message')}", file=sys.stderr)
            continue
        res.setdefault(re.sub(r"/real_time$", "", b["run_name"]), []).append(b)

def med(name, key):
    rs = res.get(name)
    return statistics.median(r[key] for r in rs) if rs else None

def rng(name):
    rs = res.get(name)
    if not rs:
        return "n/a"
    v = [r["items_per_second"] for r in rs]
    return f"{min(v):.0f}-{max(v):.0f}"

def cell(name):
    s, t = med(name, "items_per_second"), med(name, "time_per_step")
    return "n/a" if s is None else f"{s:.0f} ({rng(name)}); {t * 1e3:.2f} ms/step"

def ratio(a, b):
    return None if not a or not b else a / b

print(f"Measured at {meta}.\n")
print(f"Medians of {reps} repetitions, the three variants interleaved in one process per "
      "thread count; samples/s (slowest-fastest repetition); ms/step = mean time of one step "
      "over the stream (512 steps, batch sizes uniform in [1, 256]).\n")
print("| threads | ms dynamic=1 | ms static graphs | LibTorch | dynamic / static | "
      "dynamic / LibTorch | 1-min load (start-end) |")
print("|---|---|---|---|---|---|---|")
checks = []
for nt in (1, 2):
    n = {v: f"BM_DynamicStream/{v}/nt:{nt}" for v in ("ms_dynamic", "ms_static", "torch")}
    d, s, t = (med(n[v], "items_per_second") for v in ("ms_dynamic", "ms_static", "torch"))
    rs, rt = ratio(d, s), ratio(d, t)
    f = lambda r: "n/a" if r is None else f"**{r:.2f}x**"
    ld = "-".join(f"{x:.1f}" for x in loads.get(nt, [])) or "n/a"
    print(f"| {nt} | {cell(n['ms_dynamic'])} | {cell(n['ms_static'])} | {cell(n['torch'])} | "
          f"{f(rs)} | {f(rt)} | {ld} |")
    checks.append((nt, rs, rt))
print()
print("Targets:")
v = lambda r, goal: "n/a" if r is None else ("met" if r >= goal else "NOT met") + f" ({r:.2f}x)"
for nt, rs, rt in checks:
    print(f"- {nt} thread(s): dynamic >= 0.95x static {v(rs, 0.95)}; "
          f"dynamic >= 1.2x LibTorch {v(rt, 1.2)}")
PY
