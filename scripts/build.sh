#!/usr/bin/env bash
# Configures and builds Myriad: scripts/build.sh [release|debug|asan] (default release).
# Each kind lives apart, in build/KIND. asan: the tests with AddressSanitizer and
# UndefinedBehaviorSanitizer (-O1, line tables, asserts on; no benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
extra=()
werror=ON
case "$kind" in
  release) type=Release ;;
  debug) type=Debug ;;
  # Without -Werror: the sanitizers' instrumentation makes GCC warn falsely (mismatched-new-delete
  # in Asio's coroutine frames); the release build keeps the warnings fatal.
  # -O1 -g1 (line tables): about half the compile time of -O2 -g, the stack traces keep lines;
  # asserts stay on.
  asan) type=Asan; werror=OFF
        extra=(-DMYRIAD_SANITIZE=ON -DMYRIAD_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS=-O1 -g1") ;;
  *) echo "usage: scripts/build.sh [release|debug|asan]" >&2; exit 2 ;;
esac
launcher=()
# ccache, where installed (developer machines), lets several work trees share one compile cache;
# CCACHE_BASEDIR makes the cached paths relative so /work/main and /work/wt_x hit alike.
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(cd .. && pwd)}"
fi
cmake -S . -B "build/$kind" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DMYRIAD_WERROR=$werror "${extra[@]}" "${launcher[@]}" >/dev/null
ninja -C "build/$kind" -j"${MYRIAD_JOBS:-2}"
