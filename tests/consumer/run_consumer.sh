#!/usr/bin/env bash
# tests/consumer/run_consumer.sh — how a user gets ms, tested end to end.
#
#   run_consumer.sh subproject SOURCE_ROOT WORK_DIR
#       Builds tests/consumer/project (a separate meson project) in WORK_DIR (in
#       the build tree; kept, so that a second run only rebuilds what changed),
#       with ms as its subproject (subprojects/ms -> SOURCE_ROOT, found through
#       ms's `meson.override_dependency('ms', ...)`), runs it and checks its output.
#   run_consumer.sh install SOURCE_ROOT BUILD_ROOT
#       `meson install --destdir` of the already built BUILD_ROOT into a temp dir,
#       checks that headers, libms and ms.pc are there, then compiles (with
#       -Wall -Wextra -Werror) and runs two programs with the flags
#       `pkg-config --cflags --libs ms` gives for that tree.
#
# Writes only into WORK_DIR and a temp dir (removed at exit), never into the source tree.
set -euo pipefail

mode=${1:?usage: run_consumer.sh subproject|install SOURCE_ROOT [BUILD_ROOT]}
src=$(cd "${2:?missing SOURCE_ROOT}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ms-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The output of the consumer program (project/main.cpp) for x = arange(0, 6)
# reshaped to [2, 3] and transposed: a strided [3, 2] view whose elements in
# row-major order are x[0][0], x[1][0], x[0][1], x[1][1], x[0][2], x[1][2].
check_output() {
  local out=$1
  echo "$out"
  grep -q 'shape=\[3, 2\]' <<<"$out" || fail "printed tensor does not have shape [3, 2]"
  grep -qx 'view: strided' <<<"$out" || fail "transpose was not a strided view"
  grep -qx 'elements: 0 3 1 4 2 5' <<<"$out" || fail "wrong elements of the transposed view"
}

case "$mode" in
  subproject)
    work=${3:?missing WORK_DIR}
    mkdir -p "$work/consumer/subprojects"
    # cp -p keeps the mtimes, so an unchanged project is not rebuilt.
    cp -p "$here/project/meson.build" "$here/project/main.cpp" "$work/consumer/"
    ln -sfn "$src" "$work/consumer/subprojects/ms"
    # The compiler: clang++ when there is one (scripts/setup.sh installs clang-14 for
    # the fuzz targets). Building all of libms at -O0 is this test's whole cost, and
    # clang does it in about half of g++'s CPU time; the -Werror g++ builds of
    # scripts/run_tests.sh check g++ already, so this also builds libms with a second
    # compiler, under -Wall -Wextra -Werror too.
    cxx=c++
    for c in clang++-14 clang++; do
      if command -v "$c" >/dev/null 2>&1; then
        cxx=$c
        break
      fi
    done
    # A work dir set up another way (another compiler, or other default_options in
    # project/meson.build, which meson applies only at setup) is set up again.
    stamp="CXX=$cxx project/meson.build $(cksum <"$here/project/meson.build")"
    if [[ ! -f "$work/build/meson-private/coredata.dat" ||
      "$(cat "$work/setup.stamp" 2>/dev/null)" != "$stamp" ]]; then
      rm -rf "$work/build" "$work/setup.stamp"
      # nodownload: ms's dependencies must come from the system here, as in CI.
      CXX=$cxx meson setup "$work/build" "$work/consumer" --wrap-mode=nodownload \
        >"$tmp/setup.log" 2>&1 ||
        {
          cat "$tmp/setup.log"
          fail "meson setup of the consumer project failed"
        }
      echo "$stamp" >"$work/setup.stamp"
      grep -E "Executing subproject ms|Dependency ms |ms [0-9.]+$" "$tmp/setup.log" || true
      echo "compiler: $cxx"
    fi
    ninja -C "$work/build" ${MS_JOBS:+-j "$MS_JOBS"} >"$tmp/build.log" 2>&1 ||
      {
        cat "$tmp/build.log"
        fail "building the consumer project (with libms as a subproject) failed"
      }
    tail -n 1 "$tmp/build.log"
    check_output "$("$work/build/consumer")"
    echo "OK: ms consumed as a meson subproject through dependency('ms')"
    ;;

  install)
    build=$(cd "${3:?missing BUILD_ROOT}" && pwd)
    dest="$tmp/dest"
    meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
      {
        cat "$tmp/install.log"
        fail "meson install --destdir failed"
      }
    # Where this build installs (prefix, libdir, includedir), as meson reports it.
    read -r prefix libdir includedir < <(
      meson introspect "$build" --buildoptions |
        python3 -c '
import json, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
print(opts["prefix"], opts["libdir"], opts["includedir"])'
    )
    [[ "$libdir" == /* ]] || libdir="$prefix/$libdir"
    [[ "$includedir" == /* ]] || includedir="$prefix/$includedir"
    root="$dest$prefix"
    for f in "$dest$includedir/ms/ms.hpp" "$dest$includedir/ms/core/tensor.hpp" \
      "$dest$libdir/pkgconfig/ms.pc"; do
      [[ -f "$f" ]] || fail "not installed: ${f#"$dest"}"
    done
    compgen -G "$dest$libdir/libms.so*" >/dev/null || fail "not installed: $libdir/libms.so"
    echo "installed under $prefix: $(cd "$dest" && find . -path '*ms*' -type f | wc -l) files"

    # ms.pc names its real prefix; rewrite it to the destdir copy (what a
    # relocated install does). PKG_CONFIG_SYSROOT_DIR would also prefix the
    # paths of eigen3.pc (a system package outside the destdir), so it is not used.
    grep -q "^prefix=$prefix\$" "$dest$libdir/pkgconfig/ms.pc" ||
      fail "ms.pc does not start from prefix=$prefix"
    mkdir -p "$tmp/pc"
    sed "s|^prefix=.*|prefix=$root|" "$dest$libdir/pkgconfig/ms.pc" >"$tmp/pc/ms.pc"
    export PKG_CONFIG_PATH="$tmp/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    cflags=$(pkg-config --cflags ms) || fail "pkg-config --cflags ms failed"
    libs=$(pkg-config --libs ms) || fail "pkg-config --libs ms failed"
    echo "pkg-config --cflags ms: $cflags"
    echo "pkg-config --libs ms:   $libs"
    # -Wall -Wextra -Werror, as a user's own project builds: ms.pc gives Eigen's
    # directory as -isystem, so Eigen's own warnings (Eigen 3.4 under
    # -march=native on AVX-512) do not count, and any warning of ms's installed
    # headers fails. Both forms a user writes: main.cpp in one step, as the
    # README shows (`c++ app.cpp $(pkg-config --cflags --libs ms)`); parallel.cpp
    # compiled and linked as two steps, as a build system does (--libs alone must
    # be enough to link).
    werror=(-Wall -Wextra -Werror)
    # shellcheck disable=SC2086  # flags are words
    ${CXX:-c++} "${werror[@]}" -o "$tmp/main" "$here/project/main.cpp" $cflags $libs \
      2>"$tmp/cxx.log" || {
      cat "$tmp/cxx.log"
      fail "project/main.cpp does not build with -Wall -Wextra -Werror \$(pkg-config --cflags --libs ms)"
    }
    # shellcheck disable=SC2086  # flags are words
    { ${CXX:-c++} "${werror[@]}" -c -o "$tmp/parallel.o" "$here/parallel.cpp" $cflags &&
      ${CXX:-c++} -o "$tmp/parallel" "$tmp/parallel.o" $libs; } 2>"$tmp/cxx.log" || {
      cat "$tmp/cxx.log"
      fail "parallel.cpp does not compile (-Wall -Wextra -Werror \$(pkg-config --cflags ms)) and link (\$(pkg-config --libs ms))"
    }
    LD_LIBRARY_PATH="$dest$libdir" "$tmp/parallel" || fail "parallel_for program failed"
    check_output "$(LD_LIBRARY_PATH="$dest$libdir" "$tmp/main")"
    echo "OK: meson install --destdir gives headers, libms and a working ms.pc"
    ;;

  *) fail "unknown mode '$mode'" ;;
esac
