#!/usr/bin/env bash
# bench/before_after.sh — the bench tables of two commits, measured in one run
# with their runs alternated, so that a change of load on this shared machine
# hits both alike. Use it to show that a change leaves the ratios of
# bench/run_bench.sh and bench/compare_train.sh unchanged within noise.
#
#   bench/before_after.sh REF              # REF (e.g. main~3) against the work tree
#   ROUNDS=3 bench/before_after.sh REF     # 3 rounds (default 2)
#   PARTS="bench steps" bench/before_after.sh REF   # which tables (default: bench steps epoch)
#   REPS=3 MIN_TIME=0.2 bench/before_after.sh REF   # passed on to the two scripts
#
# "before" is REF checked out in a detached git worktree ($BEFORE_DIR, default
# a temporary folder removed at the end); "after" is this tree. Each side is
# built in its own build-bench (-Dtorch=enabled) by its own scripts. Each
# round runs every part once per side, the side that goes first alternating
# between rounds. Parts: bench = bench/run_bench.sh, steps =
# bench/compare_train.sh with PART=steps, epoch = the same with PART=epoch
# (MLP epoch, one run per side and round). Tables go to stdout, headed by
# side and round; raw output stays in $OUT (default build-bench/before-after).
set -euo pipefail

case "${1:-}" in
  -h | --help | "")
    sed -n '2,19p' "$0"
    exit 2
    ;;
esac
ref=$1
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${ROUNDS:-2}
parts=${PARTS:-bench steps epoch}
export REPS=${REPS:-3} MIN_TIME=${MIN_TIME:-0.3}
out=${OUT:-$root/build-bench/before-after}

before=${BEFORE_DIR:-}
if [ -z "$before" ]; then
  before=$(mktemp -d)/before
  git -C "$root" worktree add --detach "$before" "$ref" >&2
  trap 'git -C "$root" worktree remove --force "$before"' EXIT
elif [ ! -d "$before" ]; then
  git -C "$root" worktree add --detach "$before" "$ref" >&2
fi
mkdir -p "$out"

build_side() {
  local tree=$1
  local b=$tree/build-bench
  [ -f "$b/build.ninja" ] ||
    meson setup "$b" "$tree" -Dtorch=enabled -Dtests=false -Dexamples=false -Dbench=enabled \
      --wrap-mode=nodownload >&2
  ninja -C "$b" -j "${JOBS:-2}" bench/bm_gemm bench/bm_elementwise bench/bm_conv bench/bm_jit \
    bench/bm_train bench/bm_grad bench/train_epoch bench/train_epoch_torch >&2
}
build_side "$before"
build_side "$root"

# part <side> <tree> <round> <part>: one script run, its table kept.
part() {
  local side=$1 tree=$2 round=$3 p=$4
  local f="$out/$side-round$round-$p.md"
  echo "round $round: $p, $side (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  case "$p" in
    bench) NO_BUILD=1 bash "$tree/bench/run_bench.sh" >"$f" ;;
    steps) NO_BUILD=1 PART=steps bash "$tree/bench/compare_train.sh" >"$f" ;;
    epoch) NO_BUILD=1 PART=epoch PAIRS=1 bash "$tree/bench/compare_train.sh" >"$f" ;;
    *)
      echo "before_after.sh: unknown part '$p' (bench, steps, epoch)" >&2
      exit 2
      ;;
  esac
}

for round in $(seq "$rounds"); do
  for p in $parts; do
    if [ $((round % 2)) = 1 ]; then
      part before "$before" "$round" "$p"
      part after "$root" "$round" "$p"
    else
      part after "$root" "$round" "$p"
      part before "$before" "$round" "$p"
    fi
  done
done

echo "# Before ($ref = $(git -C "$before" rev-parse --short HEAD)) and after ($(git -C "$root" rev-parse --short HEAD)), alternated, $rounds rounds, REPS=$REPS MIN_TIME=$MIN_TIME"
for p in $parts; do
  for round in $(seq "$rounds"); do
    for side in before after; do
      echo
      echo "## $p — $side, round $round"
      echo
      cat "$out/$side-round$round-$p.md"
    done
  done
done
