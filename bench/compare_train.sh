#!/usr/bin/env bash
# bench/compare_train.sh — training speed of ms against LibTorch; owns the
# tables of the section "bench/compare_train.sh" of docs/benchmarks.md.
#
# Builds bm_train, train_epoch and train_epoch_torch in build-bench
# (-Dtorch=enabled -Dtests=false -Dexamples=false), then
#  1. runs bm_train: one training step (forward, backward, momentum update) of
#     the MLP at batch 64 and 256 and of the CNN at batch 64, ms and LibTorch
#     in one process per case with their repetitions interleaved, 1 and 2
#     threads, examples/char_lm's GPT step at batch 32 against its LibTorch
#     twin the same way, and the cell-call overhead case; prints a Markdown
#     table of medians (steps/s) and the ratio ms / LibTorch, and the MLP step
#     at batch 64 as a fraction of the FMA peak measured in its process;
#  2. with PART=grad instead: bm_grad, forward + backward without the
#     optimizer (the loss and every parameter's gradient), the same cases and table;
#  3. runs train_epoch: one epoch of Fashion-MNIST in ms and in LibTorch, each
#     in its own process, 1 and 2 threads; prints its table (s/epoch, test
#     accuracy, peak RSS) and where ms's epoch goes (the steps that compiled,
#     the other steps, waiting for the loader; epoch / steps). PREFETCH=P
#     sets the loader's prefetch (default 2; 0: batches made between steps).
# The tables go to stdout in the Markdown form of docs/benchmarks.md; progress
# goes to stderr.
#
#   bench/compare_train.sh                   # both parts, MLP epochs only
#   bench/compare_train.sh --markdown        # the same (the default output)
#   CNN=1 EPOCHS=1 bench/compare_train.sh    # the CNN epoch too
#   PART=epoch CNN=1 PAIRS=5 bench/compare_train.sh  # 5 alternated (ms, LibTorch) runs per row
#   PART=epoch CNN=only bench/compare_train.sh       # the CNN epoch alone
#   PART=steps bench/compare_train.sh        # only bm_train (PART=epoch: only train_epoch)
#   PART=grad bench/compare_train.sh         # only bm_grad
#   REPS=7 MIN_TIME=1 NO_BUILD=1 bench/compare_train.sh
#   REPORT_ONLY=1 bench/compare_train.sh     # the step table again from the last JSON
#
# Raw Google Benchmark JSON goes to $BUILD_DIR/bench-results-train/.
set -euo pipefail

for arg in "$@"; do
  case "$arg" in
    --markdown) ;;
    -h | --help)
      sed -n '2,33p' "$0"
      exit 0
      ;;
    *)
      echo "compare_train.sh: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
reps=${REPS:-5}
min_time=${MIN_TIME:-1}
jobs=${JOBS:-2}
part=${PART:-all}
[ "${REPORT_ONLY:-0}" = 1 ] && [ "$part" != grad ] && part=steps  # nothing to report again for the epochs
kind=Train
bin=bm_train
out="$build/bench-results-train"
if [ "$part" = grad ]; then
  kind=Grad
  bin=bm_grad
  out="$build/bench-results-grad"
fi

# LibTorch's best configuration on this kind of machine: glibc keeps freed
# memory instead of returning it to the kernel (no mmap for large blocks, no
# trimming of the heap). Without it LibTorch's tensors are fresh pages on
# most calls, and a page fault costs ~20 µs on these VMs: LibTorch's 1-thread
# CNN step fell to 11-13 steps/s (its "slow mode") against 38 with it
# (bm_train). Both sides run under the same setting (ms maps its own large
# blocks and caches them, so it does not depend on it). GLIBC_TUNABLES= (empty)
# measures glibc's defaults.
export GLIBC_TUNABLES=${GLIBC_TUNABLES-glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296}

load() { cut -d' ' -f1 /proc/loadavg; }

# What a table was measured on: the commit and the CPU.
meta() {
  printf 'commit %s' "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$root" diff --quiet HEAD 2>/dev/null || printf ' (with uncommitted changes)'
  printf ', %s, %s CPUs, %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
    "$(nproc)" "$(date -u '+%Y-%m-%d %H:%M UTC')"
}

run() {
  local name=$1 filter=$2
  echo "running $name (load $(load))" >&2
  echo "$name start $(load)" >>"$out/load_samples"
  "$build/bench/$bin" \
    --benchmark_filter="$filter" \
    --benchmark_repetitions="$reps" \
    --benchmark_enable_random_interleaving=true \
    --benchmark_min_time="$min_time" \
    --benchmark_format=json \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json >/dev/null
  echo "$name end $(load)" >>"$out/load_samples"
}

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" -Dtorch=enabled -Dtests=false -Dexamples=false \
      -Dbench=enabled >&2
  fi
  if [ "${NO_BUILD:-0}" != 1 ]; then
    targets=(bench/bm_train bench/bm_grad bench/train_epoch)
    # train_epoch_torch exists only when the build dir has LibTorch (-Dtorch=enabled).
    if ninja -C "$build" -t targets all 2>/dev/null | grep -q '^bench/train_epoch_torch:'; then
      targets+=(bench/train_epoch_torch)
    fi
    ninja -C "$build" -j "$jobs" "${targets[@]}" >&2
  fi
fi

if [ "$part" != epoch ]; then
  if [ "${REPORT_ONLY:-0}" != 1 ]; then
    rm -rf "$out"
    mkdir -p "$out"
    meta >"$out/meta"
    for nt in 1 2; do
      for b in 64 256; do
        peak=
        [ "$kind" = Train ] && [ "$b" = 64 ] && peak="|BM_Peak_Fma/nt:$nt"
        run "mlp_b${b}_nt$nt" "^(BM_${kind}Mlp_(Ms|Torch)/batch:$b/nt:$nt$peak)/real_time\$"
      done
      run "cnn_b64_nt$nt" "^BM_${kind}Cnn_(Ms|Torch)/batch:64/nt:$nt/real_time\$"
      [ "$kind" = Train ] && run "gpt_b32_nt$nt" "^BM_TrainGpt_(Ms|Torch)/batch:32/nt:$nt/real_time\$"
    done
    [ "$kind" = Train ] &&
      run "cell_call" "^BM_Cell(Call|Construct|CallHooked)_Dense/nt:1/real_time\$"
  fi
  python3 - "$out" "$reps" "$min_time" "$kind" <<'PY'
import glob, json, os, re, statistics, sys

out, reps, min_time, kind = sys.argv[1:]
grad = kind == "Grad"
try:
    with open(os.path.join(out, "meta")) as f:
        meta = f.read().strip()
except OSError:
    meta = "an unrecorded commit and CPU"
loads = {}
with open(os.path.join(out, "load_samples")) as f:
    for line in f:
        case, _, v = line.split()
        loads.setdefault(case, []).append(float(v))

res, context = {}, {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    with open(path) as f:
        doc = json.load(f)
    context = doc.get("context", context)
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        if b.get("error_occurred"):
            print(f"ERROR {b['name']}: {b.get('error_message')}", file=sys.stderr)
            continue
        name = re.sub(r"/real_time$", "", b["run_name"])
        res.setdefault(name, []).append(b)

def med(name, key):
    rs = res.get(name)
    if not rs:
        return None
    if key == "time":
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
        return statistics.median(r["real_time"] * scale[r["time_unit"]] for r in rs)
    return statistics.median(r[key] for r in rs)

def num(v, digits=0):
    """steps/s with `digits` decimals, or two below 10 (the GPT's rates)."""
    return f"{v:.{digits}f}" if v >= 10 else f"{v:.2f}"

def spread(name):
    rs = res.get(name)
    if not rs:
        return "n/a"
    v = [r["steps_per_s"] for r in rs]
    return f"{num(min(v))}-{num(max(v))}"

what = "forward + backward calls" if grad else "training steps"

print(f"Measured at {meta}.\n")
print(f"Medians of {reps} repetitions (min time {min_time} s each), ms and LibTorch interleaved "
      f"in one process per case; range = slowest-fastest repetition; steps/s = {what} per "
      f"second. Ratio = ms steps/s / LibTorch steps/s (> 1: ms faster); target >= 1.2x "
      f"(the GPT: >= 1.3x).\n")
print("| model | batch | threads | ms steps/s (range) | LibTorch steps/s (range) | ms / LibTorch | "
      "1-min load (start-end) |")
print("|---|---|---|---|---|---|---|")
checks = []
for nt in (1, 2):
    models = (("mlp", 64), ("mlp", 256), ("cnn", 64)) + ((("gpt", 32),) if not grad else ())
    for model, batch in models:
        m = f"BM_{kind}{model.capitalize()}_Ms/batch:{batch}/nt:{nt}"
        t = f"BM_{kind}{model.capitalize()}_Torch/batch:{batch}/nt:{nt}"
        ms_s, th_s = med(m, "steps_per_s"), med(t, "steps_per_s")
        ratio = None if not ms_s or not th_s else ms_s / th_s
        ld = loads.get(f"{model}_b{batch}_nt{nt}", [])
        ldt = "-".join(f"{x:.1f}" for x in ld) if ld else "n/a"
        name = {"mlp": "MLP 784-512-256-10", "cnn": "CNN", "gpt": "GPT (char_lm)"}[model]
        f = lambda v: "n/a" if v is None else num(v, 1)
        rt = "n/a" if ratio is None else f"**{ratio:.2f}x**"
        print(f"| {name} | {batch} | {nt} | {f(ms_s)} ({spread(m)}) | {f(th_s)} ({spread(t)}) | "
              f"{rt} | {ldt} |")
        goal = 1.3 if model == "gpt" else 1.2
        checks.append((f"{name} batch {batch}, {nt} thread(s)", ratio, goal))

print()
# The MLP step at batch 64 against the FMA peak measured in the same process
# (its best repetition, as bench/gemm_table.sh takes it).
for nt, goal in ((1, 0.6), (2, 0.5)):
    rs = res.get(f"BM_Peak_Fma/nt:{nt}")
    fl = med(f"BM_TrainMlp_Ms/batch:64/nt:{nt}", "flop_per_step")
    sp = med(f"BM_TrainMlp_Ms/batch:64/nt:{nt}", "steps_per_s")
    if grad or not rs or not fl or not sp:
        continue
    peak = max(r["items_per_second"] for r in rs)
    frac = sp * fl / peak
    print(f"MLP batch 64 step, {nt} thread(s): {sp * fl / 1e9:.1f} GFLOP/s ({fl / 1e6:.1f} MFLOP "
          f"per step) = {frac:.2f} of the FMA peak of the same process ({peak / 1e9:.0f} GFLOP/s).")
    checks.append((f"MLP batch 64 step, {nt} thread(s), of the FMA peak", frac, goal))
print()
c, k, h = (med(f"BM_Cell{x}_Dense/nt:1", "time") for x in ("Call", "Construct", "CallHooked"))
if c and k:
    ld = "-".join(f"{x:.1f}" for x in loads.get("cell_call", []))
    print(f"Cell call overhead (Dense 784->512, batch 1, 1 thread, load {ld}): net(x) "
          f"{c * 1e6:.2f} µs, net.construct(x) {k * 1e6:.2f} µs, difference "
          f"{(c - k) * 1e9:+.0f} ns ({100 * (c - k) / k:+.1f}%); with one no-op forward hook "
          f"{h * 1e6:.2f} µs ({(h - k) * 1e9:+.0f} ns)." if h else "")
print()
print(f"Targets ({what} per second against LibTorch's; the MLP step against the peak):")
for what, r, goal in checks:
    v = "n/a" if r is None else ("met" if r >= goal else "NOT met")
    x = "" if "peak" in what else "x"
    print(f"- {what} >= {goal}{x}: {v} ({'n/a' if r is None else f'{r:.2f}{x}'})")
PY
fi

if [ "$part" = all ] || [ "$part" = epoch ]; then
  echo >&2
  args=(--epochs "${EPOCHS:-1}" --seed "${SEED:-1}" --pairs "${PAIRS:-1}" --prefetch "${PREFETCH:-2}")
  [ "${CNN:-0}" = 1 ] && args+=(--cnn)
  [ "${CNN:-0}" = only ] && args+=(--cnn-only)
  echo
  echo "Measured at $(meta)."
  echo
  "$build/bench/train_epoch" "${args[@]}"
fi
