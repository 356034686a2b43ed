#!/bin/sh
# The onnx_torch integration test: regenerates the PyTorch-exported models of
# tests/onnx/torch_export_models.py into a temp dir, with fresh random inputs,
# and checks them with ms::GraphCell (onnx_torch_check). Exit 77 (skipped),
# with the reason, when Debian's python3 cannot import torch and numpy.
# Usage: torch_roundtrip.sh SCRIPT CHECKER
py=${MS_TORCH_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch, numpy' > /dev/null 2>&1; then
  echo "onnx_torch: skipped: $py cannot import torch and numpy (apt-get install python3-torch)"
  exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/ms_onnx_torch_XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
echo "onnx_torch: inputs seed $seed, models in $dir"
"$py" "$1" "$dir" --seed "$seed" || exit 1
"$2" "$dir"
