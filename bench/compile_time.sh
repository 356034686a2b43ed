#!/usr/bin/env bash
# bench/compile_time.sh — how long a user's translation unit takes to compile,
# beside the same model written with LibTorch; owns the table of the section
# "bench/compile_time.sh" of docs/benchmarks.md.
#
# Compiles bench/compile_time_sample.cpp (it includes <ms/cell.hpp>, defines a
# 3-layer Cell and a jitted training step) and its LibTorch twin
# bench/compile_time_sample_torch.cpp (<torch/torch.h>, the same model, step
# and main) with `c++ -O2 -c` and the same flags (each library's headers by
# -isystem, ms's by -I), REPS times each, alternated (ms, torch, ms, torch,
# ...), so that both see the same load. Reports CPU (user + sys) and
# wall-clock seconds and the compiler's peak memory of each run, the ratio of
# the best CPU times (ms / LibTorch), and the verdict against the target: at
# most RATIO (default 0.2) of the LibTorch file's CPU time and at most PEAK_MB
# (default 250) MB peak. On a loaded machine CPU time is the figure to judge
# (wall time includes waiting for a core); both are reported.
#
# Prints the Markdown table of docs/benchmarks.md on stdout; each run's line
# goes to stderr as it finishes. Exits 1 when LibTorch's headers are missing.
#
#   bench/compile_time.sh                 # 3 runs each, g++ (c++), -O2
#   REPS=5 CXX=clang++-14 bench/compile_time.sh
#   LINK=build bench/compile_time.sh      # also link the ms file against build/libms.so and run it
set -euo pipefail

for arg in "$@"; do
  case "$arg" in
    --markdown) ;;
    -h | --help)
      sed -n '2,22p' "$0"
      exit 0
      ;;
    *)
      echo "compile_time.sh: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
cxx=${CXX:-c++}
reps=${REPS:-3}
target_ratio=${RATIO:-0.2}
target_mb=${PEAK_MB:-250}
ms_src=$root/bench/compile_time_sample.cpp
torch_src=$root/bench/compile_time_sample_torch.cpp
torch_inc=${TORCH_INCLUDE:-/usr/include/torch/csrc/api/include}
if [ ! -f "$torch_inc/torch/torch.h" ]; then
  echo "compile_time.sh: no LibTorch headers in $torch_inc (apt-get install libtorch-dev," \
    "or set TORCH_INCLUDE)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

common=(-std=c++20 -O2 -fopenmp -march=native -Wall -Wextra -Werror)
ms_flags=("${common[@]}" -I "$root/include" -isystem /usr/include/eigen3)
torch_flags=("${common[@]}" -isystem "$torch_inc")

meta="commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$root" diff --quiet HEAD 2>/dev/null || meta+=" (with uncommitted changes)"
meta+=", $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs"
compiler=$($cxx --version | head -1)
ms_lines=$($cxx "${ms_flags[@]}" -E "$ms_src" | wc -l)
torch_lines=$($cxx "${torch_flags[@]}" -E "$torch_src" | wc -l)
echo "compiler: $compiler" >&2

# One compile; appends "cpu wall peak_mb load" to the file $1.results.
measure() {
  local name=$1 src=$2
  shift 2
  local load wall user sys rss cpu
  load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$cxx" "$@" -c "$src" -o "$tmp/$name.o"
  read -r wall user sys rss <"$tmp/time"
  cpu=$(echo "$user + $sys" | bc)
  printf '%-5s run: wall %6.2f s  cpu %6.2f s (user %.2f + sys %.2f)  peak %d MB  load %s\n' \
    "$name" "$wall" "$cpu" "$user" "$sys" "$((rss / 1024))" "$load" >&2
  printf '%.2f %.2f %d %s\n' "$cpu" "$wall" "$((rss / 1024))" "$load" >>"$tmp/$name.results"
}

for _ in $(seq "$reps"); do
  measure ms "$ms_src" "${ms_flags[@]}"
  measure torch "$torch_src" "${torch_flags[@]}"
done

join() { local IFS=/; echo "$*"; }
column() { cut -d' ' -f"$2" "$tmp/$1.results" | paste -sd/; }
best_cpu() { cut -d' ' -f1 "$tmp/$1.results" | sort -n | head -1; }
peak_mb() { cut -d' ' -f3 "$tmp/$1.results" | sort -n | tail -1; }

ms_cpu=$(best_cpu ms)
torch_cpu=$(best_cpu torch)
ms_peak=$(peak_mb ms)
ratio=$(echo "scale=3; $ms_cpu / $torch_cpu" | bc)
verdict_time="NOT met"
[ "$(echo "$ratio <= $target_ratio" | bc)" = 1 ] && verdict_time="met"
verdict_mem="NOT met"
[ "$ms_peak" -le "$target_mb" ] && verdict_mem="met"

echo "Measured at $meta; $compiler, one process (one core) per compile, runs alternated:"
echo "\`c++ ${common[*]} -I include -isystem /usr/include/eigen3 -c bench/compile_time_sample.cpp\`"
echo "beside \`c++ ${common[*]} -isystem $torch_inc -c bench/compile_time_sample_torch.cpp\`"
echo "($ms_lines and $torch_lines lines after preprocessing)."
echo
echo "| file | runs | CPU s (user + sys) | wall s | peak MB | 1-min load | best CPU s |"
echo "|---|---|---|---|---|---|---|"
for name in ms torch; do
  label="compile_time_sample.cpp (<ms/cell.hpp>)"
  [ "$name" = torch ] && label="compile_time_sample_torch.cpp (<torch/torch.h>)"
  printf '| %s | %d | %s | %s | %s | %s | **%s** |\n' "$label" "$reps" "$(column "$name" 1)" \
    "$(column "$name" 2)" "$(column "$name" 3)" "$(column "$name" 4)" "$(best_cpu "$name")"
done
echo
printf 'ms / LibTorch, best CPU: **%.2fx** (target <= %sx: %s); ms peak %d MB (target <= %d MB: %s)\n' \
  "$ratio" "$target_ratio" "$verdict_time" "$ms_peak" "$target_mb" "$verdict_mem"

if [ -n "${LINK:-}" ]; then
  build=$root/$LINK
  "$cxx" -fopenmp "$tmp/ms.o" -o "$tmp/sample" -L "$build" -lms -Wl,-rpath,"$build"
  echo
  echo "Linked against $LINK/libms.so, the sample runs:"
  echo
  "$tmp/sample" | sed 's/^/    /'
fi
