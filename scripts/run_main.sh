#!/usr/bin/env bash
# scripts/run_main.sh — set up (packages, configure, build; see setup.sh) and run
# the main job. Arguments are passed to the main program.
#
#   bash scripts/run_main.sh
set -euo pipefail

# The main job: a program of build/, relative to the build dir. (Until the
# Fashion-MNIST training example exists, the tour of tensors and ops.)
MAIN=examples/tensor_tour

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${MS_BUILD_DIR:-build}

bash scripts/setup.sh
echo
echo "=== $build_dir/$MAIN $*"
t0=$SECONDS
"$build_dir/$MAIN" "$@"
echo "=== $MAIN finished in $((SECONDS - t0)) s"
