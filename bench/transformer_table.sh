#!/usr/bin/env bash
# bench/transformer_table.sh — attention and generation: bench/bm_attention
# (ms's fused scaled_dot_product_attention against the naive composition in ms
# and in LibTorch, forward + backward, causal, char_lm shapes) and
# bench/bm_generation (ms::nn::GptGenerator with its key/value cache against
# recomputing the whole context for every token, and against its LibTorch
# twin with a key/value cache); prints the ratios of the
# section "bench/transformer_table.sh" of docs/benchmarks.md.
#
# One process per binary and thread count; repetitions interleaved
# (--benchmark_enable_random_interleaving). Markdown on stdout, progress on
# stderr.
#
#   bench/transformer_table.sh               # 5 repetitions of 0.3 s each
#   REPS=9 MIN_TIME=0.5 bench/transformer_table.sh > table.md
#   BUILD_DIR=/tmp/b NO_BUILD=1 bench/transformer_table.sh
#   REPORT_ONLY=1 bench/transformer_table.sh # the tables again from the last run's JSON
#
# Raw Google Benchmark JSON is kept in $BUILD_DIR/bench-results-transformer/.
set -euo pipefail

case "${1:-}" in
  -h | --help)
    sed -n '2,18p' "$0"
    exit 0
    ;;
  "") ;;
  *)
    echo "transformer_table.sh: unknown argument '$1' (try --help)" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
build=${BUILD_DIR:-$root/build-bench}
reps=${REPS:-5}
min_time=${MIN_TIME:-0.3}
out="$build/bench-results-transformer"

run_all() {
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" -Dtorch=enabled -Dtests=false -Dexamples=false -Dbench=enabled \
      >&2
  fi
  if [ "${NO_BUILD:-0}" != 1 ]; then
    ninja -C "$build" -j "${JOBS:-2}" bench/bm_attention bench/bm_generation >&2
  fi
  rm -rf "$out"
  mkdir -p "$out"
  bench_meta "$root" >"$out/meta"
  local nt bin
  for bin in bm_attention bm_generation; do
    for nt in 1 2; do
      bench_run_json "$build/bench/$bin" "$out/${bin}_nt$nt.json" \
        --benchmark_filter="/nt:$nt(/real_time|/manual_time)?\$"
    done
  done
  cut -d' ' -f1 /proc/loadavg >>"$out/load_samples"
}

[ "${REPORT_ONLY:-0}" = 1 ] || run_all

PYTHONPATH="$root/bench" python3 - "$out" "$reps" "$min_time" <<'EOF'
import glob, os, statistics, sys
from bench_results import iterations, meta_and_loads, seconds

out, reps, min_time = sys.argv[1:]
meta, loads = meta_and_loads(out)
runs, _ = iterations(sorted(glob.glob(os.path.join(out, "bm_*_nt*.json"))))

def med(name, key):
    rs = runs.get(name)
    if not rs:
        return None
    return statistics.median(seconds(r) if key == "time" else r[key] for r in rs)

def ratio(x, y):
    return None if x is None or not y else x / y

def fx(v, digits=2):
    return "n/a" if v is None else f"{v:.{digits}f}x"

def ms_(v):
    return "n/a" if v is None else f"{v * 1e3:.2f}"

def num(v, digits=2):
    return "n/a" if v is None else f"{v:.{digits}f}"

print(f"Measured at {meta}. Medians of {reps} repetitions of {min_time} s, interleaved in one "
      f"process per binary and thread count. 1-minute load average during the run: "
      f"{min(loads):.1f} to {max(loads):.1f}.")
print()
print("Attention, forward + backward (causal; batch 4, 6 heads, head size 32; `bm_attention`). "
      "Time in ms; `of peak`: useful causal flop/s (7 B H T^2 E per call) over the FMA peak of "
      "the same process; memory: peak live tensor bytes above the inputs (ms: `memory_stats()`, "
      "the jit arena included; LibTorch: a counting wrapper around its CPU allocator). Ratios > 1: "
      "the fused op is faster or smaller.")
print()
print("| T | threads | fused ms | fused of peak | fused MiB | naive ms (ms) | naive MiB (ms) | "
      "time naive/fused (ms) | memory naive/fused (ms) | LibTorch naive ms | LibTorch MiB | "
      "time LibTorch/fused | memory LibTorch/fused |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for nt in (1, 2):
    for t in (128, 512, 1024):
        row = {s: f"BM_Attention/{s}/T:{t}/nt:{nt}" for s in ("ms_fused", "ms_naive", "torch_naive")}
        tm = {s: med(n, "time") for s, n in row.items()}
        mem = {s: med(n, "peak_MiB") for s, n in row.items()}
        peak = med(row["ms_fused"], "of_peak")
        print(f"| {t} | {nt} | {ms_(tm['ms_fused'])} | {num(peak)} | {num(mem['ms_fused'], 1)} | "
              f"{ms_(tm['ms_naive'])} | {num(mem['ms_naive'], 1)} | "
              f"{fx(ratio(tm['ms_naive'], tm['ms_fused']))} | "
              f"{fx(ratio(mem['ms_naive'], mem['ms_fused']), 1)} | {ms_(tm['torch_naive'])} | "
              f"{num(mem['torch_naive'], 1)} | {fx(ratio(tm['torch_naive'], tm['ms_fused']))} | "
              f"{fx(ratio(mem['torch_naive'], mem['ms_fused']), 1)} |")
if any((med(f"BM_Attention/ms_fused/T:{t}/nt:{nt}", "of_peak") or 0) > 1.0
       for t in (128, 512, 1024) for nt in (1, 2)):
    print()
    print("**The FMA peak of this run was disturbed** (a fraction above 1.0 is impossible): other "
          "processes took the cores while the peak ran. Trust the times and ratios measured side "
          "by side, not the fractions of peak.")
print()
print("Generation, greedy, one 16-token prompt, 256 new tokens (char_lm's Gpt: 4 layers, d_model "
      "192, 6 heads, random weights; `bm_generation`). `cached`: GptGenerator; `dyn`: the same "
      "compiled with JitConfig{.dynamic = 1}; no cache: the jitted Gpt (auto-dynamic) over the "
      "whole context for every token, through `Gpt::construct` or with the positions an input "
      "(`Gpt::forward_cached` as a prefill); its traces are those of the first generation. Per "
      "token: the increment's time, from rows of 1, 65, 192 and 256 tokens.")
print()
print("| context | threads | cached tok/s | no cache tok/s | no cache, positions input tok/s | "
      "cached / best no cache | dyn tok/s | first 64 ms/token | last 64 ms/token | dyn first 64 | "
      "dyn last 64 | compiles prefill / increment | no cache compiles (traces: untimed run / all) | positions input "
      "compiles (traces: untimed run / all) | same tokens |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
checks = []

def per_token(side, ctx, nt, lo, hi):
    a = med(f"BM_Generate/{side}/ctx:{ctx}/tokens:{lo}/nt:{nt}", "time")
    b = med(f"BM_Generate/{side}/ctx:{ctx}/tokens:{hi}/nt:{nt}", "time")
    return None if a is None or b is None else (b - a) / (hi - lo)

for nt in (1, 2):
    for ctx in (288, 512):
        c = f"BM_Generate/cached/ctx:{ctx}/tokens:256/nt:{nt}"
        d = f"BM_Generate/cached_dyn/ctx:{ctx}/tokens:256/nt:{nt}"
        n = f"BM_Generate/nocache/ctx:{ctx}/tokens:256/nt:{nt}"
        p = f"BM_Generate/nocache_pos/ctx:{ctx}/tokens:256/nt:{nt}"
        tc, tn, tp, td = (med(x, "tokens_per_s") for x in (c, n, p, d))
        best = max((x for x in (tn, tp) if x is not None), default=None)
        r = ratio(tc, best)
        comp = f"{num(med(c, 'prefill_compiles'), 0)} / {num(med(c, 'increment_compiles'), 0)}"
        for x in (n, p):
            comp += (f" | {num(med(x, 'nocache_compiles'), 0)} "
                     f"({num(med(x, 'nocache_traces_first'), 0)} / "
                     f"{num(med(x, 'nocache_traces'), 0)})")
        print(f"| {ctx} | {nt} | {num(tc, 0)} | {num(tn, 0)} | {num(tp, 0)} | {fx(r, 1)} | "
              f"{num(td, 0)} | "
              f"{ms_(per_token('cached', ctx, nt, 1, 65))} | "
              f"{ms_(per_token('cached', ctx, nt, 192, 256))} | "
              f"{ms_(per_token('cached_dyn', ctx, nt, 1, 65))} | "
              f"{ms_(per_token('cached_dyn', ctx, nt, 192, 256))} | {comp} | "
              f"{num(med(n, 'same_tokens'), 0)} / 256 |")
        checks.append((f"KV cache >= 5x the faster no-cache side at 256 tokens, context {ctx}, {nt} thread(s)",
                       r is not None and r >= 5, fx(r, 1)))
print()
print("The increment alone (`BM_Increment`, context 288): each iteration times a generation of 65 "
      "tokens and one of 1 token back to back, (t65 - t1) / 64, in microseconds per token; "
      "before timing, generations at batch sizes 1 .. `graphs` compile that many increment graphs "
      "for the static generator (the dynamic one generalizes them).")
print()
print("| threads | static, 1 graph | static, 8 graphs | dynamic, 1 graph | dynamic, 8 graphs | "
      "8 graphs / 1 (static) | dynamic / static (1 graph) | increment compiles static / dynamic "
      "(8) |")
print("|---|---|---|---|---|---|---|---|")
for nt in (1, 2):
    inc = {(d, g): f"BM_Increment/{d}/ctx:288/graphs:{g}/nt:{nt}"
           for d in ("cached", "cached_dyn") for g in (1, 8)}
    t = {k: med(n, "time") for k, n in inc.items()}
    us = lambda v: "n/a" if v is None else f"{v / 64 * 1e6:.0f}"  # 64 increments
    grow = ratio(t[("cached", 8)], t[("cached", 1)])
    dyn = ratio(t[("cached_dyn", 1)], t[("cached", 1)])
    print(f"| {nt} | {us(t[('cached', 1)])} | {us(t[('cached', 8)])} | {us(t[('cached_dyn', 1)])} | "
          f"{us(t[('cached_dyn', 8)])} | {fx(grow)} | {fx(dyn)} | "
          f"{num(med(inc[('cached', 8)], 'increment_compiles'), 0)} / "
          f"{num(med(inc[('cached_dyn', 8)], 'increment_compiles'), 0)} |")
    if grow is not None:
        checks.append((f"increment with 8 graphs compiled <= 1.05x with 1, {nt} thread(s)",
                       grow <= 1.05, fx(grow)))
    if dyn is not None:
        checks.append((f"dynamic increment <= 1.05x the static one, {nt} thread(s)", dyn <= 1.05,
                       fx(dyn)))
print()
print("Generation against the LibTorch twin (`BM_Generate/torch`: bench/gpt_torch.hpp with the "
      "same weights, eager, over its own key/value cache, the same restart rule), 256 greedy "
      "tokens after the 16-token prompt; both sides' graphs and caches warm (one untimed "
      "generation first): what a program that generates again and again gets. Context 128 is "
      "char_lm's (three window restarts). bench/char_lm_twin.sh times one generation per "
      "process instead, ms's two compiles included.")
print()
print("`floor`: `BM_Generate/read_floor` (1 thread), no generation, only the reads no batch-1 "
      "generation can skip, each token: the weights (all parameters but the position table) and "
      "the keys and values of the cache slots in use; `x floor`: a side's time over the floor's. "
      "2x LibTorch is within reach only where LibTorch's time is more than 2x the floor.")
print()
print("| context | threads | ms tok/s | LibTorch tok/s | ms / LibTorch | floor tok/s | ms x floor | "
      "LibTorch x floor | same tokens |")
print("|---|---|---|---|---|---|---|---|---|")
for nt in (1, 2):
    for ctx in (128, 288):
        c = f"BM_Generate/cached/ctx:{ctx}/tokens:256/nt:{nt}"
        t = f"BM_Generate/torch/ctx:{ctx}/tokens:256/nt:{nt}"
        tc, tt = med(c, "tokens_per_s"), med(t, "tokens_per_s")
        fl = med(f"BM_Generate/read_floor/ctx:{ctx}/tokens:256/nt:1", "tokens_per_s")
        r = ratio(tc, tt)
        at_floor = lambda side: fx(ratio(fl, side)) if nt == 1 else "n/a"
        print(f"| {ctx} | {nt} | {num(tc, 0)} | {num(tt, 0)} | {fx(r)} | "
              f"{num(fl, 0) if nt == 1 else 'n/a'} | {at_floor(tc)} | {at_floor(tt)} | "
              f"{num(med(t, 'same_tokens'), 0)} / 256 |")
        if tt is not None:
            checks.append((f"KV cache >= 2x the LibTorch twin with its KV cache, context {ctx}, "
                           f"{nt} thread(s)", r is not None and r >= 2, fx(r)))
print()
print("Batched generation (`BM_Generate/cached_batch8`: GptGenerator on 8 prompts of 9 to 16 "
      "bytes at once, left-padded), 256 tokens per prompt, context 288: tokens/s of all rows "
      "against one prompt's.")
print()
print("| threads | 1 prompt tok/s | 8 prompts tok/s | 8 / 1 |")
print("|---|---|---|---|")
for nt in (1, 2):
    one = med(f"BM_Generate/cached/ctx:288/tokens:256/nt:{nt}", "tokens_per_s")
    eight = med(f"BM_Generate/cached_batch8/ctx:288/tokens:256/nt:{nt}", "tokens_per_s")
    print(f"| {nt} | {num(one, 0)} | {num(eight, 0)} | {fx(ratio(eight, one))} |")
print()
print("Targets:")
for what, ok, got in checks:
    print(f"- {what}: {'met' if ok else 'NOT met'} ({got})")
EOF
