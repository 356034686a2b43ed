#!/usr/bin/env bash
# bench/compile_time.sh — how long a user's translation unit takes to compile;
# owns the table of the section "bench/compile_time.sh" of docs/benchmarks.md.
#
# Compiles bench/compile_time_sample.cpp (it includes <ms/cell.hpp>, defines a
# 3-layer Cell and a jitted training step) with `c++ -O2 -c` (one process, so
# one core) and the project's flags, REPS times, and reports wall-clock and CPU
# (user + sys) seconds of each run, the compiler's peak memory, the 1-minute
# load average before each run, and the verdict against the budget (BUDGET
# seconds of CPU, default 15). On a loaded machine the CPU time is the figure
# to judge (the wall time includes waiting for a core); both are reported.
#
# Prints the Markdown table of docs/benchmarks.md on stdout; each run's line
# goes to stderr as it finishes.
#
#   bench/compile_time.sh                 # 3 runs, g++ (c++), -O2
#   bench/compile_time.sh --markdown      # the same (the default output)
#   REPS=5 CXX=clang++-14 bench/compile_time.sh
#   LINK=build-bench bench/compile_time.sh   # also link against build-bench/libms.so and run it
set -euo pipefail

for arg in "$@"; do
  case "$arg" in
    --markdown) ;;
    -h | --help)
      sed -n '2,19p' "$0"
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
budget=${BUDGET:-15}
src=$root/bench/compile_time_sample.cpp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

flags=(-std=c++20 -O2 -fopenmp -march=native -Wall -Wextra -Werror
       -I "$root/include" -isystem /usr/include/eigen3)

meta="commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$root" diff --quiet HEAD 2>/dev/null || meta+=" (with uncommitted changes)"
meta+=", $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs"
compiler=$($cxx --version | head -1)
lines=$($cxx "${flags[@]}" -E "$src" | wc -l)
echo "compiler: $compiler" >&2
echo "command:  $cxx ${flags[*]} -c bench/compile_time_sample.cpp" >&2

walls=() cpus=() rsss=() loads=()
best_cpu="" best_wall=""
for i in $(seq "$reps"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" \
    "$cxx" "${flags[@]}" -c "$src" -o "$tmp/sample.o"
  read -r wall user sys rss <"$tmp/time"
  cpu=$(echo "$user + $sys" | bc)
  printf 'run %d: wall %6.2f s  cpu %6.2f s (user %.2f + sys %.2f)  peak %d MB  load %s\n' \
    "$i" "$wall" "$cpu" "$user" "$sys" "$((rss / 1024))" "$load" >&2
  walls+=("$(printf '%.2f' "$wall")")
  cpus+=("$(printf '%.2f' "$cpu")")
  rsss+=("$((rss / 1024))")
  loads+=("$load")
  if [ -z "$best_cpu" ] || [ "$(echo "$cpu < $best_cpu" | bc)" = 1 ]; then
    best_cpu=$cpu
    best_wall=$wall
  fi
done
verdict="NOT met"
[ "$(echo "$best_cpu < $budget" | bc)" = 1 ] && verdict="met"
peak=$(printf '%s\n' "${rsss[@]}" | sort -n | tail -1)
join() { local IFS=/; echo "$*"; }

echo "Measured at $meta; $compiler, one process (one core):"
echo "\`c++ ${flags[*]//$root\//} -c bench/compile_time_sample.cpp\`"
echo "($lines lines after preprocessing)."
echo
echo "| runs | CPU s (user + sys) | wall s | compiler peak | 1-min load | best CPU s (its wall) | budget |"
echo "|---|---|---|---|---|---|---|"
printf '| %d | %s | %s | %d MB | %s | **%.2f** (%.2f) | < %s s CPU: %s |\n' "$reps" \
  "$(join "${cpus[@]}")" "$(join "${walls[@]}")" "$peak" "$(join "${loads[@]}")" "$best_cpu" \
  "$best_wall" "$budget" "$verdict"

if [ -n "${LINK:-}" ]; then
  build=$root/$LINK
  "$cxx" -fopenmp "$tmp/sample.o" -o "$tmp/sample" -L "$build" -lms -Wl,-rpath,"$build"
  echo
  echo "Linked against $LINK/libms.so, the sample runs:"
  echo
  "$tmp/sample" | sed 's/^/    /'
fi
