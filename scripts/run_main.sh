#!/usr/bin/env bash
# scripts/run_main.sh — set up (packages, configure; see setup.sh), build only
# the main job's program (libms and that example: no tests, no benchmarks) and
# run it. Arguments are passed to the main program.
#
#   bash scripts/run_main.sh
#   bash scripts/run_main.sh --epochs 1 --threads 2
#   bash scripts/run_main.sh --help      # the program's options
set -euo pipefail

# The main job: train the MLP example on Fashion-MNIST (Debian's
# dataset-fashion-mnist) for 3 epochs and print the test accuracy. Its
# checkpoint and loss / accuracy curves go to <build dir>/main_job/.
MAIN=examples/fashion_mnist_mlp

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${MS_BUILD_DIR:-build}

bash scripts/setup.sh --target "$MAIN"
echo
echo "=== $build_dir/$MAIN $*"
t0=$SECONDS
out="$build_dir/main_job"
mkdir -p "$out"
"$build_dir/$MAIN" --checkpoint "$out/fashion_mnist_mlp.safetensors" \
  --curves "$out/fashion_mnist_mlp" "$@"
echo "=== $MAIN finished in $((SECONDS - t0)) s"
