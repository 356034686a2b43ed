#!/bin/bash
# Trains fashion_mnist_mlp for one short epoch (batch 1000: 60 steps) with
# --export, runs onnx_run on the ONNX file and checks that its test accuracy is
# the one the training run printed (same 10000 test images; at most 0.05
# points apart, 5 images whose top logits are within rounding of each other,
# since the two jitted graphs may order float sums differently). Exit 77
# (skipped) without Debian's dataset-fashion-mnist (FASHION_MNIST_DIR: another
# directory with the four files).
set -euo pipefail
mlp="$1"
run="$2"
data=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
  t10k-labels-idx1-ubyte; do
  [ -e "$data/$f.gz" ] || [ -e "$data/$f" ] ||
    { echo "no $data/$f (Debian package dataset-fashion-mnist): skipped"; exit 77; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mlp" --epochs 1 --batch-size 1000 --threads 2 --checkpoint '' --curves '' \
  --data-dir "$data" --export "$dir/mlp.onnx" | tee "$dir/train.log"
[ -s "$dir/mlp.onnx" ] || { echo "missing $dir/mlp.onnx"; exit 1; }
train_acc=$(sed -n 's/^final test accuracy: \([0-9.]*\)%$/\1/p' "$dir/train.log")
"$run" "$dir/mlp.onnx" "$data" | tee "$dir/run.log"
run_acc=$(sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p' "$dir/run.log")
if [ -z "$train_acc" ] || [ -z "$run_acc" ]; then
  echo "no accuracy printed"
  exit 1
fi
echo "training run: $train_acc%, onnx_run: $run_acc%"
awk -v a="$train_acc" -v b="$run_acc" 'BEGIN { d = a - b; exit !(d <= 0.05 && d >= -0.05) }' ||
  { echo "accuracies differ by more than 0.05 points"; exit 1; }
# A file that cannot be written is an error after training, and the exit code is not 0.
if "$mlp" --epochs 0 --checkpoint '' --curves '' --data-dir "$data" \
  --export "$dir/no/such/dir/m.onnx" >/dev/null 2>"$dir/bad.err"; then exit 1; fi
cat "$dir/bad.err"
grep -q -- "--export $dir/no/such/dir/m.onnx failed: " "$dir/bad.err"
# A file that is not ONNX: onnx_run names GraphCell's error, exit 1.
echo "not a model" >"$dir/bad.onnx"
if "$run" "$dir/bad.onnx" "$data" 2>"$dir/run.err"; then exit 1; fi
cat "$dir/run.err"
grep -q "^onnx_run: GraphCell" "$dir/run.err"
echo "onnx_run: ok"
