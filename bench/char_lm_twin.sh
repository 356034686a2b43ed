#!/usr/bin/env bash
# bench/char_lm_twin.sh — examples/char_lm against its LibTorch twin
# (bench/char_lm_torch.cpp, bench/gpt_torch.hpp): the same GPT from the same
# initial weights on the same batches for the same number of steps.
#
# For each thread count (THREADS, default "1 2"):
#  1. char_lm trains STEPS steps (--minutes 0: no time limit; validation only
#     at the end; both sides' steps/s time the step call alone, from step 2:
#     no data loading, no compile) and writes its
#     initial weights (--save-init) and its checkpoint;
#  2. char_lm_torch train starts from those weights and trains as many steps;
#  3. both continue the prompt PROMPT by 256 greedy bytes from char_lm's
#     checkpoint (char_lm --generate --greedy: its two compiled graphs, their
#     compilation included in its time; the twin: eager forward over a
#     per-layer KV cache), and the texts are compared byte for byte.
# It prints a Markdown table: the first step's loss of both (the same weights
# and batch: they should agree within 1e-4), the final validation bits per
# character of both and their difference (target: within 0.05), the training
# steps/s of both and the ratio ms / LibTorch (target: >= 1.3), the
# generation tokens/s of both and where their greedy texts first differ.
#
#   bench/char_lm_twin.sh            # STEPS: what 10 minutes of char_lm reach
#                                    # (estimated from a 1-minute run, all cores)
#   bench/char_lm_twin.sh 2000       # 2000 steps
#   THREADS=1 LAYERS=1 D_MODEL=32 HEADS=2 CONTEXT=16 BATCH=4 bench/char_lm_twin.sh 20
#                                    # a tiny model (a correctness check, not a timing)
#
# Builds examples/char_lm and bench/char_lm_torch in BUILD_DIR (default
# build-twin, -Dtorch=enabled -Dtests=false; NO_BUILD=1 skips the build). The
# runs' files go to $BUILD_DIR/char_lm_twin/.
set -euo pipefail

case "${1:-}" in
  -h | --help)
    sed -n '2,31p' "$0"
    exit 0
    ;;
esac
steps=${1:-auto}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-twin}
threads=${THREADS:-1 2}
prompt=${PROMPT:-Q: }
sizes=(--layers "${LAYERS:-4}" --d-model "${D_MODEL:-192}" --heads "${HEADS:-6}"
  --context "${CONTEXT:-128}" --batch "${BATCH:-32}")
# The allocator setting of bench/compare_train.sh (see there), for both sides.
export GLIBC_TUNABLES=${GLIBC_TUNABLES-glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296}

if [ "${NO_BUILD:-0}" != 1 ]; then
  [ -f "$build/build.ninja" ] ||
    meson setup "$build" "$root" --buildtype=release -Dtorch=enabled -Dtests=false >&2
  ninja -C "$build" -j "${JOBS:-2}" examples/char_lm bench/char_lm_torch >&2
fi
ms_exe=$build/examples/char_lm
torch_exe=$build/bench/char_lm_torch
work=$build/char_lm_twin
mkdir -p "$work"

# The value after `key` on the line matching `pattern` of a log.
field() { grep -m1 -- "$2" "$1" | sed -E "s/.*$3 ([0-9.eE+-]+).*/\1/"; }

if [ "$steps" = auto ]; then
  echo "estimating the steps of 10 minutes of char_lm from a 1-minute run" >&2
  "$ms_exe" "${sizes[@]}" --minutes 1 --eval-every 100000 --out "$work/calibrate" \
    >"$work/calibrate.log"
  rate=$(sed -nE 's/^training: .* ([0-9.]+) steps\/s$/\1/p' "$work/calibrate.log")
  steps=$(awk -v r="$rate" 'BEGIN { printf "%d", r * 600 }')
  echo "char_lm: $rate steps/s -> $steps steps" >&2
fi

printf '%s steps, %s\n\n' "$steps" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "| threads | first loss ms | first loss LibTorch | val bpc ms | val bpc LibTorch | difference | steps/s ms | steps/s LibTorch | ms / LibTorch | gen tokens/s ms (its 2 compiles included) | gen tokens/s LibTorch | greedy texts |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for t in $threads; do
  d=$work/t$t
  echo "threads $t: char_lm" >&2
  "$ms_exe" "${sizes[@]}" --steps "$steps" --minutes 0 --eval-every "$steps" --threads "$t" \
    --save-init "$d.init.safetensors" --out "$d" >"$d.ms.log"
  echo "threads $t: char_lm_torch" >&2
  "$torch_exe" train --init "$d.init.safetensors" --steps "$steps" --batch "${BATCH:-32}" \
    --threads "$t" >"$d.torch.log"
  echo "threads $t: generation" >&2
  "$ms_exe" --out "$d" --generate "$prompt" --tokens 256 --greedy --threads "$t" \
    >"$d.ms.txt" 2>"$d.ms.gen"
  "$torch_exe" generate --checkpoint "$d/model.safetensors" --prompt "$prompt" --tokens 256 \
    --threads "$t" >"$d.torch.txt" 2>"$d.torch.gen"
  first_ms=$(sed -n 2p "$d/curves_steps.csv" | cut -d, -f3)
  first_torch=$(field "$d.torch.log" '^step 1 loss' loss)
  bpc_ms=$(field "$d.ms.log" '^final validation' validation:)
  bpc_torch=$(field "$d.torch.log" '^final validation' validation:)
  sps_ms=$(sed -nE 's/^training: .* ([0-9.]+) steps\/s$/\1/p' "$d.ms.log")
  sps_torch=$(sed -nE 's/^training: .* ([0-9.]+) steps\/s$/\1/p' "$d.torch.log")
  gen_ms=$(sed -nE 's/.*\(([0-9.]+) tokens\/s\).*/\1/p' "$d.ms.gen")
  gen_torch=$(sed -nE 's/.*\(([0-9.]+) tokens\/s\).*/\1/p' "$d.torch.gen")
  if cmp -s "$d.ms.txt" "$d.torch.txt"; then
    same=identical
  else
    same=$(cmp "$d.ms.txt" "$d.torch.txt" 2>&1 | sed -E 's/.*byte ([0-9]+).*/differ from byte \1/')
  fi
  awk -v t="$t" -v f1="$first_ms" -v f2="$first_torch" -v b1="$bpc_ms" -v b2="$bpc_torch" \
    -v s1="$sps_ms" -v s2="$sps_torch" -v g1="$gen_ms" -v g2="$gen_torch" -v same="$same" \
    'BEGIN {
      d = b1 - b2; if (d < 0) d = -d
      printf "| %s | %.6f | %.6f | %.4f | %.4f | %.4f (%s) | %.2f | %.2f | %.2fx (%s) | %.0f | %.0f | %s |\n",
        t, f1, f2, b1, b2, d, (d <= 0.05 ? "within 0.05" : "over 0.05"), s1, s2, s1 / s2,
        (s1 / s2 >= 1.3 ? ">= 1.3" : "< 1.3"), g1, g2, same
    }'
done
