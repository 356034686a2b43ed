#!/usr/bin/env bash
# scripts/setup.sh — install what ms needs (Debian 12), configure build/ and build it.
#
#   bash scripts/setup.sh               # packages + configure + build build/
#   bash scripts/setup.sh --with-torch  # also libtorch-dev (for the side-by-side benchmarks)
#   bash scripts/setup.sh --no-build    # packages only
#   bash scripts/setup.sh --target examples/fashion_mnist_mlp   # build only that target
#                                       # (repeatable; ninja's target names:
#                                       # `ninja -C build -t targets all`)
#
# Idempotent and fast when nothing changed: packages are checked with one dpkg-query
# call, `apt-get update` runs only when something is missing, build/ is configured only
# once (ninja re-runs meson by itself when a meson.build changes), and ninja builds
# nothing when everything is up to date.
#
# Environment:
#   MS_BUILD_DIR   build directory (default: build)
#   MS_JOBS        parallel compile jobs (default: ninja's own, cores + 2)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

with_torch=0
do_build=1
targets=() # empty: everything (ninja's default)
while (($# > 0)); do
  case "$1" in
    --with-torch) with_torch=1 ;;
    --no-build) do_build=0 ;;
    --target)
      if (($# < 2)) || [[ -z "$2" || "$2" == -* ]]; then
        echo "setup.sh: --target needs a ninja target name, e.g. --target examples/fashion_mnist_mlp" >&2
        exit 2
      fi
      targets+=("$2")
      shift
      ;;
    --target=*) targets+=("${1#--target=}") ;;
    -h | --help)
      sed -n '2,18p' "$0"
      exit 0
      ;;
    *)
      echo "setup.sh: unknown argument '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done

# ------------------------------------------------------------------ packages
# Needed to build and test ms.
required=(
  meson ninja-build g++ pkg-config
  libeigen3-dev libopenblas-dev libopenblas0-openmp libopenblas-openmp-dev libxsmm-dev
  libxbyak-dev
  xtensor-dev librange-v3-dev doctest-dev libbenchmark-dev
  zlib1g-dev nlohmann-json3-dev libcli11-dev clang-format doxygen
  libopenmpi-dev openmpi-bin
  libonnx-dev protobuf-compiler libprotobuf-dev
  dataset-fashion-mnist fortunes
)
# Used by the tests when present (libFuzzer targets with clang, NumPy interop checks).
# All exist in Debian 12; installed when the archive has them.
optional=(clang-14 libclang-rt-14-dev python3-numpy python3-onnx)
# --with-torch: LibTorch for the benchmarks' side-by-side runs, and PyTorch's
# ONNX exporter for the onnx_torch test (skipped, exit 77, without it).
if ((with_torch)); then
  required+=(libtorch-dev)
  optional+=(python3-torch)
fi

# Prints the packages of "$@" that are not installed.
missing_of() {
  local installed
  installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "$@" 2>/dev/null |
    awk '$2 == "installed" { print $1 }' || true)
  local p
  for p in "$@"; do
    grep -qxF "$p" <<<"$installed" || echo "$p"
  done
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "setup.sh: need root (or sudo) to run: $*" >&2
    exit 1
  fi
}

mapfile -t missing < <(missing_of "${required[@]}" "${optional[@]}")
if ((${#missing[@]} > 0)); then
  echo "setup.sh: installing missing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -q
  to_install=()
  for p in "${missing[@]}"; do
    # Optional packages are skipped (with a note) when this archive does not have them.
    if [[ " ${optional[*]} " == *" $p "* ]]; then
      cand=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ { print $2 }')
      if [[ -z "$cand" || "$cand" == "(none)" ]]; then
        echo "setup.sh: optional package $p is not in this apt archive; skipping"
        continue
      fi
    fi
    to_install+=("$p")
  done
  if ((${#to_install[@]} > 0)); then
    as_root apt-get install -y -q --no-install-recommends "${to_install[@]}"
  fi
else
  echo "setup.sh: all Debian packages present"
fi

((do_build)) || exit 0

# ------------------------------------------------------------------ configure + build
build_dir=${MS_BUILD_DIR:-build}
if [[ ! -f "$build_dir/meson-private/coredata.dat" ]]; then
  # --wrap-mode=nodownload: the packages above provide every dependency, so a
  # missing one is an error here, never a silent download of a wrap.
  # -Dunity=on: each library compiles as chunks of 8 of its .cpp files included
  # into one (libms, libms_onnx, libms_parallel at -O3: 428 s of CPU instead of
  # 562 s file by file). The consumer test (tests/consumer) still builds libms
  # file by file, so every source keeps compiling on its own.
  meson setup "$build_dir" --buildtype=release -Dwerror=true -Dtorch=disabled \
    -Dunity=on -Dunity_size=8 --wrap-mode=nodownload
fi
ninja_args=(-C "$build_dir")
[[ -n "${MS_JOBS:-}" ]] && ninja_args+=(-j "$MS_JOBS")
# With --target: only those targets (and what they need, e.g. libms), not the
# tests and benchmarks.
ninja "${ninja_args[@]}" "${targets[@]}"
