#!/usr/bin/env bash
# A rank that stops answering or dies fails the run within seconds, with a
# clear error, and leaves rank 0's last checkpoint intact.
#   run_failures.sh <mpirun> <failing_rank program>
set -u
mpirun=$1
prog=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "run_failures.sh: FAIL: $*"
  exit 1
}
run() { # mode -> sets out, rc, elapsed
  local start=$SECONDS
  out=$("$mpirun" -np 2 --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo \
    "$prog" "$1" "$dir" 2>&1)
  rc=$?
  elapsed=$((SECONDS - start))
  echo "--- $1: exit $rc after ${elapsed} s"
  echo "$out" | grep -v '^\s*$' | head -20
}

run hang
((rc != 0)) || fail "hang: mpirun exited 0"
grep -q "rank 0: ms::parallel::TimeoutError: DistributedGradReducer: no answer from the other ranks after 2 s" <<<"$out" ||
  fail "hang: rank 0 did not report the TimeoutError"
((elapsed < 30)) || fail "hang: took ${elapsed} s (deadline 2 s)"

rm -f "$dir/ckpt.safetensors"
run kill
((rc != 0)) || fail "kill: mpirun exited 0"
((elapsed < 30)) || fail "kill: took ${elapsed} s"
[[ -f "$dir/ckpt.safetensors" ]] || fail "kill: rank 0 saved no checkpoint"
"$prog" verify "$dir/ckpt.safetensors" || fail "kill: the last checkpoint does not load"
echo "run_failures.sh: ok"
