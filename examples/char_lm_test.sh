#!/bin/bash
# Runs char_lm with tiny sizes in a temporary directory: 3 training steps
# (checkpoint, curves, validation bits per character, the initial weights of
# --save-init, steps/s), then --generate from the checkpoint (tokens/s).
# Exit 77 (skipped) when Debian's fortunes are not installed.
set -euo pipefail
exe="$1"
fortunes=/usr/share/games/fortunes
[ -d "$fortunes" ] || { echo "no $fortunes (Debian package fortunes): skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$exe" --steps 3 --layers 1 --d-model 32 --heads 2 --context 16 --batch 4 --eval-every 2 \
  --eval-batches 2 --threads 1 --out "$dir/lm" --save-init "$dir/init.safetensors" |
  tee "$dir/train.log"
# --save-init: the initial parameters under ms's names, the sizes in the metadata.
grep -aq '"h.0.self_attn.in_proj_weight"' "$dir/init.safetensors"
grep -aq '"n_layer":"1"' "$dir/init.safetensors"
grep -q "training: 3 steps in [0-9.]* s without validation; steps 2-3, the step alone: [0-9.]* steps/s" "$dir/train.log"
for f in model.safetensors curves.csv curves.svg curves_steps.csv curves_steps.svg; do
  [ -s "$dir/lm/$f" ] || { echo "missing $dir/lm/$f"; exit 1; }
done
grep -q "final validation: [0-9.]* bits per character" "$dir/train.log"
grep -q "compiled graphs: train step 1, validation loss 1" "$dir/train.log"
# Steps 2 and 3 were validated: rows with val_bpc in the per-step CSV.
[ "$(grep -cE ',[0-9.]+,[0-9.]+$' "$dir/lm/curves_steps.csv")" -eq 2 ]
"$exe" --out "$dir/lm" --generate "Q: " --tokens 20 --temperature 0.8 --seed 3 \
  >"$dir/gen.txt" 2>"$dir/gen.err"
cat "$dir/gen.txt" "$dir/gen.err"
head -c 3 "$dir/gen.txt" | grep -q "Q: "
[ "$(wc -c <"$dir/gen.txt")" -ge 24 ]  # "Q: ", 20 bytes (a separator shows as 3), newline
grep -q "compiled graphs: prefill 1, increment 1" "$dir/gen.err"
grep -q "generated 20 bytes in [0-9.]* s ([0-9.]* tokens/s)" "$dir/gen.err"
# Bad input is an error naming the API and the argument.
if "$exe" --out "$dir/lm" --generate "x" --temperature 0 2>"$dir/bad.err"; then exit 1; fi
grep -q "GptGenerator::generate: temperature must be finite and > 0" "$dir/bad.err"
echo "char_lm: ok"
