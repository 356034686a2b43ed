#!/usr/bin/env bash
# bench/compare_parallel.sh — one epoch of Fashion-MNIST as 1 process x 2
# threads against 2 MPI ranks x 1 thread (the same global batch); owns the
# table of the section "bench/compare_parallel.sh" of docs/benchmarks.md.
#
# Builds the example (examples/fashion_mnist_mlp, or _cnn with --cnn) and
# bench/bm_parallel in $BUILD_DIR (default build/, configured with MPI and the
# examples), then
#  1. trains one epoch as 1 process:  fashion_mnist_<model> --threads 2 --batch-size 64
#  2. trains one epoch as 2 ranks:    mpirun -np 2 fashion_mnist_<model> --threads 1 --batch-size 32
#     (each rank reads its half of every epoch; 64 samples per step in all)
#     and takes the epoch's seconds, samples/s and the final test accuracy
#     from what the example prints; with ONE_THREAD=1 (the default) also
#     1 process x 1 thread at batch 64, the baseline of both;
#  3. runs bm_parallel's MLP step cases under mpirun -np 2 (one thread per
#     rank): the jitted step alone (BM_MlpStep_Local), with the gradient
#     reducer (BM_MlpStep_DataParallel: one 25 MB bucket; BM_MlpStep_Buckets:
#     256 KB buckets) and the reduction of the same gradients alone
#     (BM_MlpGrads_AllReduce); the fraction of the all-reduce hidden behind
#     the backward is 1 - (step with reducer - step alone) / reduction alone
#     (1: all of it hidden; 0: none; below 0: the reducer costs more inside
#     the step than alone). bm_parallel has the MLP step only: for the CNN
#     the MLP's fraction is printed with that caveat.
# Prints a Markdown table on stdout (progress and the programs' output go to
# stderr). OpenMPI runs over shared memory only (--mca btl self,vader).
#
# With --shared instead: a shared machine. Runs, in build-bench/ (BUILD_DIR),
# bm_train's MLP step at batch 64 and bm_dynamic's dynamic-shape stream
# (ms_dynamic), with 1 and 2 threads interleaved in one process per case
# (and their LibTorch twins when the binaries have them), first on the
# machine as it is, then beside one CPU-bound competitor at the same
# priority (`sh -c 'while :; do :; done'`, started before and killed after
# each process); prints each case's speed and the ratio 2 threads / 1 thread
# both ways (target: >= 0.95 with the competitor), with the load. TORCH=1
# adds the LibTorch twins (slower: the stream's warm-up); the JSON stays in
# $BUILD_DIR/bench-results-shared/.
#
#   bench/compare_parallel.sh              # the MLP
#   bench/compare_parallel.sh --cnn        # the CNN
#   REPS=5 bench/compare_parallel.sh --shared   # the shared-machine table
#   TORCH=1 NO_BUILD=1 bench/compare_parallel.sh --shared
#   REPORT_ONLY=1 bench/compare_parallel.sh --shared   # the table again from the JSON
#   RUNS=3 bench/compare_parallel.sh       # 3 alternated (1 process, 2 ranks) pairs; medians
#   ONE_THREAD=0 bench/compare_parallel.sh # without the 1 process x 1 thread row
#   NO_BUILD=1 BUILD_DIR=build bench/compare_parallel.sh
set -euo pipefail

model=mlp
shared=0
for arg in "$@"; do
  case "$arg" in
    --cnn) model=cnn ;;
    --mlp) model=mlp ;;
    --shared) shared=1 ;;
    -h | --help)
      sed -n '2,43p' "$0"
      exit 0
      ;;
    *)
      echo "compare_parallel.sh: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
load() { cut -d' ' -f1 /proc/loadavg; }

# --shared: the 2-thread / 1-thread ratios, quiet and beside a competitor.
shared_machine() {
  local build=${BUILD_DIR:-$root/build-bench} reps=${REPS:-5} min_time=${MIN_TIME:-0.5}
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" --buildtype=release -Dtorch=enabled -Dtests=false \
      -Dexamples=false -Dbench=enabled --wrap-mode=nodownload >&2
  fi
  [ "${NO_BUILD:-0}" = 1 ] || [ "${REPORT_ONLY:-0}" = 1 ] ||
    ninja -C "$build" -j "${JOBS:-2}" bench/bm_train bench/bm_dynamic >&2
  local out="$build/bench-results-shared"
  [ "${REPORT_ONLY:-0}" = 1 ] || shared_runs "$build" "$out" "$reps" "$min_time"
  shared_report "$out" "$(cat "$out/reps" 2>/dev/null || echo "$reps")"
}

# shared_runs <build> <out> <reps> <min time>: the processes of --shared.
shared_runs() {
  local build=$1 out=$2 reps=$3 min_time=$4
  rm -rf "$out"
  mkdir -p "$out"
  # The competitor is killed (by its pid) whatever happens to this script.
  busy=""
  trap 'if [ -n "$busy" ]; then kill "$busy" 2>/dev/null || true; fi' EXIT
  local ms="Ms" dyn="ms_dynamic"
  if [ "${TORCH:-0}" = 1 ]; then ms="(Ms|Torch)" dyn="(ms_dynamic|torch)"; fi
  local cases=("mlp bm_train ^BM_TrainMlp_$ms/batch:64/nt:[12]/real_time\$"
    "stream bm_dynamic ^BM_DynamicStream/$dyn/nt:[12]/real_time\$")
  local c name bin filter with
  for with in quiet busy; do
    for c in "${cases[@]}"; do
      read -r name bin filter <<<"$c"
      if [ "$with" = busy ]; then
        sh -c 'while :; do :; done' &
        busy=$!
        sleep 1
      fi
      echo "running $name, $with (load $(load))" >&2
      echo "${name}_$with $(load)" >>"$out/load"
      "$build/bench/$bin" --benchmark_filter="$filter" --benchmark_repetitions="$reps" \
        --benchmark_enable_random_interleaving=true --benchmark_min_time="$min_time" \
        --benchmark_format=json --benchmark_out="$out/${name}_$with.json" \
        --benchmark_out_format=json >/dev/null
      echo "${name}_$with $(load)" >>"$out/load"
      if [ -n "$busy" ]; then
        kill "$busy"
        wait "$busy" 2>/dev/null || true
        busy=""
      fi
    done
  done
  git -C "$root" rev-parse --short HEAD >"$out/commit" 2>/dev/null || echo unknown >"$out/commit"
  git -C "$root" diff --quiet HEAD 2>/dev/null || echo " (with uncommitted changes)" >>"$out/commit"
  date -u '+%Y-%m-%d %H:%M UTC' >"$out/date"
  echo "$reps" >"$out/reps"
}

# shared_report <out> <reps>: the table of --shared from the JSON in <out>.
shared_report() {
  local out=$1 reps=$2 meta
  meta=$(printf 'commit %s, %s, %s CPUs, %s' "$(tr -d '\n' <"$out/commit")" \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" "$(nproc)" \
    "$(cat "$out/date")")
  python3 - "$out" "$reps" "$meta" <<'PY'
import json, os, re, statistics, sys

out, reps, meta = sys.argv[1:]
loads = {}
for line in open(os.path.join(out, "load")):
    k, v = line.split()
    loads.setdefault(k, []).append(float(v))

def rates(stem):
    """name without /real_time -> per-repetition items/s."""
    r = {}
    path = os.path.join(out, stem + ".json")
    if not os.path.exists(path):
        return r
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        # The step: training steps per second; the stream: samples per second.
        rate = b["items_per_second"] if stem.startswith("stream") else b["steps_per_s"]
        r.setdefault(re.sub(r"/real_time$", "", b["run_name"]), []).append(rate)
    return r

print(f"Measured at {meta}; medians of {reps} repetitions, 1 and 2 threads interleaved in one "
      "process per case; competitor: `sh -c 'while :; do :; done'` at the same priority.\n")
print("| case | machine | 1 thread | 2 threads | 2 threads / 1 thread | 1-min load |")
print("|---|---|---|---|---|---|")
cases = (("mlp", "MLP 784-512-256-10 step, batch 64", "BM_TrainMlp_{}/batch:64/nt:{}", "steps/s",
          ("Ms", "Torch")),
         ("stream", "dynamic-shape stream (MLP, batch 1-256)", "BM_DynamicStream/{}/nt:{}",
          "samples/s", ("ms_dynamic", "torch")))
verdicts = []
for stem, label, pattern, unit, sides in cases:
    for side in sides:
        for machine in ("quiet", "busy"):
            r = rates(f"{stem}_{machine}")
            one, two = (r.get(pattern.format(side, nt)) for nt in (1, 2))
            if not one or not two:
                continue
            m1, m2 = statistics.median(one), statistics.median(two)
            who = "ms" if side in ("Ms", "ms_dynamic") else "LibTorch"
            where = "quiet" if machine == "quiet" else "with competitor"
            ld = "-".join(f"{x:.1f}" for x in loads.get(f"{stem}_{machine}", []))
            print(f"| {who}: {label} | {where} | {m1:,.0f} {unit} | {m2:,.0f} {unit} | "
                  f"**{m2 / m1:.2f}x** | {ld} |")
            if who == "ms" and machine == "busy":
                verdicts.append((label, m2 / m1))
print()
for label, r in verdicts:
    print(f"- {label}, with the competitor: 2 threads >= 0.95x 1 thread "
          f"{'met' if r >= 0.95 else 'NOT met'} ({r:.2f}x)")
PY
}

if [ "$shared" = 1 ]; then
  shared_machine
  exit 0
fi
build=${BUILD_DIR:-$root/build}
runs=${RUNS:-1}
jobs=${JOBS:-2}
seed=${SEED:-1}
mpirun=$(command -v mpirun || command -v mpiexec || true)
[ -n "$mpirun" ] || {
  echo "compare_parallel.sh: mpirun not found (apt-get install openmpi-bin)" >&2
  exit 1
}
# OpenMPI refuses to run as root without these.
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mpi_args=(-np 2 --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" --buildtype=release -Dtorch=disabled --wrap-mode=nodownload >&2
fi
example="$build/examples/fashion_mnist_$model"
if [ "${NO_BUILD:-0}" != 1 ]; then
  ninja -C "$build" -j "$jobs" "examples/fashion_mnist_$model" bench/bm_parallel >&2
fi
for f in "$example" "$build/bench/bm_parallel"; do
  [ -x "$f" ] || {
    echo "compare_parallel.sh: $f was not built (MPI, the examples and Google Benchmark are needed)" >&2
    exit 1
  }
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One epoch; the example's output in $out/<name>.log, the load before and after in $out/<name>.load.
epoch() {
  local name=$1
  shift
  echo "running $name (load $(load)): $*" >&2
  local l0
  l0=$(load)
  (cd "$out" && "$@" --epochs 1 --seed "$seed" --checkpoint '' --curves '') >"$out/$name.log" 2>&1 || {
    cat "$out/$name.log" >&2
    echo "compare_parallel.sh: $name failed" >&2
    exit 1
  }
  echo "$l0 $(load)" >>"$out/$name.load"
  # Under mpirun rank 0's stdout is a terminal: its progress bar redraws with \r.
  tr '\r' '\n' <"$out/$name.log" | sed 's/\x1b\[K//g' | grep -E 'done:|final test accuracy' >&2
  cat "$out/$name.log" >>"$out/$name.all"
}

for ((i = 0; i < runs; ++i)); do
  OMP_NUM_THREADS=2 epoch one "$example" --threads 2 --batch-size 64
  epoch ranks "$mpirun" "${mpi_args[@]}" -x OMP_NUM_THREADS=1 "$example" --threads 1 --batch-size 32
  if [ "${ONE_THREAD:-1}" = 1 ]; then
    OMP_NUM_THREADS=1 epoch single "$example" --threads 1 --batch-size 64
  fi
done

echo "running bm_parallel's MLP steps (load $(load))" >&2
bl0=$(load)
"$mpirun" "${mpi_args[@]}" -x OMP_NUM_THREADS=1 "$build/bench/bm_parallel" \
  --benchmark_filter='^BM_Mlp' --benchmark_format=json --benchmark_out="$out/bm.json" \
  --benchmark_out_format=json >/dev/null
echo "$bl0 $(load)" >"$out/bm.load"

meta=$(printf 'commit %s' "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$root" diff --quiet HEAD 2>/dev/null || printf ' (with uncommitted changes)'
  printf ', %s, %s CPUs, %s' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
    "$(nproc)" "$(date -u '+%Y-%m-%d %H:%M UTC')")

python3 - "$out" "$model" "$runs" "$meta" <<'PY'
import json, os, re, statistics, sys

out, model, runs, meta = sys.argv[1:]

def epochs(name):
    """(seconds, samples/s, test accuracy %) of every run of `name`."""
    text = open(os.path.join(out, name + ".all")).read()
    done = re.findall(r"epoch 1/1 done: mean loss [0-9.]+, ([0-9.]+) s, ([0-9.]+) samples/s", text)
    acc = re.findall(r"final test accuracy: ([0-9.]+)%", text)
    if not done or len(done) != len(acc):
        sys.exit(f"compare_parallel.sh: could not read the epoch figures of '{name}'")
    return [(float(s), float(r), float(a)) for (s, r), a in zip(done, acc)]

def loads(name):
    v = [float(x) for line in open(os.path.join(out, name + ".load")) for x in line.split()]
    return f"{min(v):.1f}-{max(v):.1f}"

with open(os.path.join(out, "bm.json")) as f:
    bm = {b["name"]: b for b in json.load(f)["benchmarks"] if b.get("run_type") == "iteration"}

def ms_of(name):
    b = bm.get(name) or bm.get(name + "/iterations:200/real_time")
    if b is None:
        for k, v in bm.items():
            if k.startswith(name + "/"):
                b = v
    if b is None:
        return None
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale

local, dp, buckets, red = (ms_of(f"BM_Mlp{n}") for n in
                           ("Step_Local", "Step_DataParallel", "Step_Buckets", "Grads_AllReduce"))

def hidden(step):
    if None in (local, step, red) or red <= 0:
        return None
    return 1.0 - (step - local) / red

h1, h2 = hidden(dp), hidden(buckets)
fmt = lambda v: "n/a" if v is None else f"{v:.2f}"
label = {"mlp": "MLP 784-512-256-10", "cnn": "CNN"}[model]
hid = f"{fmt(h1)} (256 KB buckets: {fmt(h2)})"
if model == "cnn":
    hid += ", of the MLP step"

print(f"Measured at {meta}; {runs} run(s) per row"
      + (" (medians, and the range over the runs)" if int(runs) > 1 else "") + ".\n")
print("| model | run | global batch | epoch s | samples/s | test accuracy | "
      "all-reduce hidden behind backward | 1-min load |")
print("|---|---|---|---|---|---|---|---|")
rows = (("one", "1 process x 2 threads", "64 (1 x 64)", "-"),
        ("ranks", "`mpirun -np 2` x 1 thread", "64 (2 x 32)", hid),
        ("single", "1 process x 1 thread (baseline)", "64 (1 x 64)", "-"))
res = {}
for name, what, batch, h in rows:
    if not os.path.exists(os.path.join(out, name + ".all")):
        continue
    e = epochs(name)
    sec = statistics.median(x[0] for x in e)
    rate = statistics.median(x[1] for x in e)
    # The range over the runs beside the median when there are several.
    rng = lambda k, f: "" if len(e) < 2 else f" ({min(x[k] for x in e):{f}}-{max(x[k] for x in e):{f}})"
    acc = ", ".join(dict.fromkeys(f"{x[2]:.2f}%" for x in e))
    res[name] = (sec, rate)
    print(f"| {label} | {what} | {batch} | {sec:.2f}{rng(0, '.2f')} | {rate:.0f}{rng(1, '.0f')} | "
          f"{acc} | {h} | {loads(name)} |")
print()
line = f"2 ranks / 1 process x 2 threads: **{res['ranks'][1] / res['one'][1]:.2f}x** samples/s"
if "single" in res:
    line += (f"; against 1 thread: 2 threads {res['one'][1] / res['single'][1]:.2f}x, "
             f"2 ranks {res['ranks'][1] / res['single'][1]:.2f}x")
print(line + ".")
print()
print(f"bm_parallel, MLP step at 32 samples per rank, 2 ranks x 1 thread (load {loads('bm')}): "
      f"step alone {fmt(local)} ms, with the reducer {fmt(dp)} ms (256 KB buckets: "
      f"{fmt(buckets)} ms), the reduction alone {fmt(red)} ms; hidden = 1 - (with - alone) / "
      f"reduction.")
PY
