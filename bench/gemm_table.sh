#!/usr/bin/env bash
# bench/gemm_table.sh — GEMM against the machine: every row of bench/bm_gemm
# (ms::matmul float32 and bfloat16 against torch::mm, each GEMM backend on
# square and training shapes) as a fraction of the FMA peak measured in the
# same process; owns the tables of the section "bench/gemm_table.sh" of
# docs/benchmarks.md.
#
# One process per thread count; its repetitions interleaved
# (--benchmark_enable_random_interleaving), so a change of load on this shared
# machine hits every row alike. Prints Markdown on stdout; progress on stderr.
#
#   bench/gemm_table.sh                 # 5 repetitions of 0.3 s each
#   REPS=9 MIN_TIME=0.5 bench/gemm_table.sh > table.md
#   BUILD_DIR=/tmp/b NO_BUILD=1 bench/gemm_table.sh
#   REPORT_ONLY=1 bench/gemm_table.sh   # the tables again from the last run's JSON
#
# Raw Google Benchmark JSON is kept in $BUILD_DIR/bench-results-gemm/.
set -euo pipefail

case "${1:-}" in
  -h | --help)
    sed -n '2,16p' "$0"
    exit 0
    ;;
  "") ;;
  *)
    echo "gemm_table.sh: unknown argument '$1' (try --help)" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
build=${BUILD_DIR:-$root/build-bench}
reps=${REPS:-5}
min_time=${MIN_TIME:-0.3}
out="$build/bench-results-gemm"

run_all() {
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" -Dtorch=enabled -Dtests=false -Dexamples=false -Dbench=enabled \
      >&2
  fi
  if [ "${NO_BUILD:-0}" != 1 ]; then
    ninja -C "$build" -j "${JOBS:-2}" bench/bm_gemm >&2
  fi
  rm -rf "$out"
  mkdir -p "$out"
  bench_meta "$root" >"$out/meta"
  local nt
  for nt in 1 2; do
    bench_run_json "$build/bench/bm_gemm" "$out/gemm_nt$nt.json" \
      --benchmark_filter="/nt:$nt(/real_time)?\$"
  done
  cut -d' ' -f1 /proc/loadavg >>"$out/load_samples"
}

[ "${REPORT_ONLY:-0}" = 1 ] || run_all

python3 - "$out" "$reps" "$min_time" <<'EOF'
import glob, json, os, re, statistics, sys

out, reps, min_time = sys.argv[1:]
with open(os.path.join(out, "load_samples")) as f:
    loads = [float(x) for x in f.read().split()]
with open(os.path.join(out, "meta")) as f:
    meta = f.read().strip()
runs = {}
for path in sorted(glob.glob(os.path.join(out, "gemm_nt*.json"))):
    with open(path) as f:
        for b in json.load(f)["benchmarks"]:
            if b.get("run_type") != "iteration":
                continue
            if b.get("error_occurred"):
                print(f"ERROR {b['name']}: {b.get('error_message')}", file=sys.stderr)
                continue
            runs.setdefault(re.sub(r"/real_time$", "", b["run_name"]), []).append(b)

def med(name, key):
    rs = runs.get(name)
    return statistics.median(r[key] for r in rs) if rs else None

def cpu_rate(r):
    """flop/s per second of the calling thread's CPU time (1 thread: what
    the core did while it ran, whatever the other tenants took)."""
    return r["items_per_second"] * r["real_time"] / r["cpu_time"]

def peak(nt, cpu=False):
    rs = runs.get(f"BM_Peak_Fma/nt:{nt}")
    if not rs:
        return None
    return max(cpu_rate(r) if cpu else r["items_per_second"] for r in rs)

def frac(name, nt, cpu=False):
    rs = runs.get(name)
    p = peak(nt, cpu)
    if not rs or not p:
        return None
    return statistics.median((cpu_rate(r) if cpu else r["items_per_second"]) for r in rs) / p

def gf(v):
    return "n/a" if v is None else f"{v / 1e9:.0f}"

def fr(v):
    return "n/a" if v is None else f"{v:.2f}"

def ratio(x, y):
    return None if x is None or not y else x / y

def matching(pattern):
    """(name, the pattern's groups) of the runs it matches, by thread count, then shape."""
    pat = re.compile(pattern)
    for name in sorted(runs, key=lambda s: [int(x) for x in re.findall(r"\d+", s)[::-1]]):
        mt = pat.match(name)
        if mt:
            yield name, mt.groups()

print(f"Measured at {meta}. Medians of {reps} repetitions of {min_time} s, interleaved in one "
      f"process per thread count. `of peak`: flop/s over the float32 FMA peak of the same process "
      f"and thread count (`BM_Peak_Fma`, best repetition), in wall time; `CPU`: the same for 1 "
      f"thread in the thread's CPU time (what the core did while it ran, robust to other "
      f"processes taking turns on it). 1-minute load average during the run: "
      f"{min(loads):.1f} to {max(loads):.1f}.")
print()
print("| case | threads | ms GFLOP/s | ms of peak | ms of peak, CPU | LibTorch GFLOP/s | "
      "LibTorch of peak | ms / LibTorch |")
print("|---|---|---|---|---|---|---|---|")
checks = []
disturbed = False
for nt in (1, 2):
    print(f"| FMA peak (`BM_Peak_Fma`) | {nt} | {gf(peak(nt))} | 1.00 | | | | |")
    for kind, ms_name, t_name, sizes in (("sgemm", "BM_Sgemm_Ms", "BM_Sgemm_Torch", (256, 512, 1024)),
                                         ("bf16 matmul", "BM_Bmatmul_Ms", "BM_Bmatmul_Torch",
                                          (512, 1024))):
        for n in sizes:
            mn, tn = f"{ms_name}/n:{n}/nt:{nt}", f"{t_name}/n:{n}/nt:{nt}"
            m_f, t_f = med(mn, "items_per_second"), med(tn, "items_per_second")
            m_p, t_p = frac(mn, nt), frac(tn, nt)
            m_c = frac(mn, nt, True) if nt == 1 else None
            r = ratio(m_f, t_f)
            print(f"| {kind} n={n} | {nt} | {gf(m_f)} | {fr(m_p)} | {fr(m_c)} | {gf(t_f)} | "
                  f"{fr(t_p)} | {'n/a' if r is None else f'{r:.2f}x'} |")
            if kind == "sgemm":
                disturbed |= m_p is not None and m_p > 1.0
                goal = 0.85 if nt == 1 else 0.8
                got = m_c if nt == 1 else m_p
                checks.append((f"sgemm n={n}, {nt} thread(s) >= {goal} of peak"
                               + (" (CPU time)" if nt == 1 else ""),
                               got is not None and got >= goal, fr(got)))
            else:
                s_f = med(f"BM_Sgemm_Ms/n:{n}/nt:{nt}", "items_per_second")
                r = ratio(m_f, s_f)
                checks.append((f"bf16 matmul n={n}, {nt} thread(s) >= 1.6x float32 matmul",
                               r is not None and r >= 1.6, "n/a" if r is None else f"{r:.2f}x"))
print()
print("Each backend on raw buffers (`ms::kernels::gemm_on`; `ac`: C += product, as gradients "
      "accumulate), and `gemm_bf16` on the default backend:")
print()
print("| m x n x k | op | threads | libxsmm of peak | Eigen of peak | libxsmm / Eigen | "
      "gemm_bf16 of peak | libxsmm of peak, CPU |")
print("|---|---|---|---|---|---|---|---|")
for name, (m, n, k, ta, tb, ac, nt) in matching(
        r"BM_Sgemm_libxsmm/m:(\d+)/n:(\d+)/k:(\d+)/ta:(\d)/tb:(\d)/ac:(\d)/nt:(\d)$"):
    x = frac(name, int(nt))
    e = frac(name.replace("libxsmm", "eigen"), int(nt))
    bf = frac(f"BM_Bgemm/m:{m}/n:{n}/k:{k}/ta:{ta}/tb:{tb}/nt:{nt}", int(nt))
    xc = frac(name, 1, True) if nt == "1" else None
    disturbed |= x is not None and x > 1.0
    op = ("A^T " if ta == "1" else "A ") + ("B^T" if tb == "1" else "B") + (", C +=" if ac == "1" else "")
    r = ratio(x, e)
    print(f"| {m} x {n} x {k} | {op} | {nt} | {fr(x)} | {fr(e)} | "
          f"{'n/a' if r is None else f'{r:.2f}x'} | {fr(bf)} | {fr(xc)} |")
    square = m == n == k and m in ("256", "512", "1024")
    if nt == "1" and not square:
        checks.append((f"training shape {m}x{n}x{k} ({op}), 1 thread >= 0.75 of peak on libxsmm "
                       "(CPU time)", xc is not None and xc >= 0.75, fr(xc)))
print()
print("A few rows times a weight stored [n, k] (`BM_FewRows`: `ms::matmul(x, w.transpose(0, 1))`, "
      "Dense's product, against `torch::mm(x, w.t())`): w's bytes read per second against the "
      "STREAM triad of the same process (`BM_Stream_Triad`, best repetition; 576 x 192 is "
      "0.4 MB, read from cache, so it may pass the triad) and flop/s against the FMA peak.")
print()
print("| m x n x k | threads | ms w GB/s | ms / triad | ms of peak | LibTorch w GB/s | "
      "ms / LibTorch |")
print("|---|---|---|---|---|---|---|")
for name, (m, n, k, nt) in matching(r"BM_FewRows_Ms/m:(\d+)/n:(\d+)/k:(\d+)/nt:(\d)$"):
    tri = runs.get(f"BM_Stream_Triad/nt:{nt}")
    triad = max(r["bytes_per_second"] for r in tri) / 1e9 if tri else None
    w_ms = med(name, "w_GBps")
    w_t = med(name.replace("_Ms", "_Torch"), "w_GBps")
    tr = ratio(w_ms, triad)
    r = ratio(w_ms, w_t)
    print(f"| {m} x {n} x {k} | {nt} | {fr(w_ms)} | {fr(tr)} | {fr(frac(name, int(nt)))} | "
          f"{fr(w_t)} | {'n/a' if r is None else f'{r:.2f}x'} |")
print()
if disturbed:
    print("**The wall-time peak of this run was disturbed** (a float32 product above 1.0 of it is "
          "impossible): other processes took the cores while the peak ran. Trust the CPU-time "
          "columns (1 thread) and the ratios measured side by side, not the wall-time fractions.")
    print()
print("Targets:")
for what, ok, got in checks:
    print(f"- {what}: {'met' if ok else 'NOT met'} ({got})")
EOF
