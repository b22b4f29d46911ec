#!/usr/bin/env bash
# Configures and builds Myriad: scripts/build.sh [release|debug|asan] (default release).
# Each kind lives apart, in build/KIND. asan: the tests with AddressSanitizer and
# UndefinedBehaviorSanitizer (optimised, with debug info; no benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
extra=()
case "$kind" in
  release) type=Release ;;
  debug) type=Debug ;;
  asan) type=RelWithDebInfo; extra=(-DMYRIAD_SANITIZE=ON -DMYRIAD_BUILD_BENCH=OFF) ;;
  *) echo "usage: scripts/build.sh [release|debug|asan]" >&2; exit 2 ;;
esac
launcher=()
# ccache, where installed (developer machines), lets several work trees share one compile cache;
# CCACHE_BASEDIR makes the cached paths relative so /work/main and /work/wt_x hit alike.
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(cd .. && pwd)}"
fi
cmake -S . -B "build/$kind" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DMYRIAD_WERROR=ON "${extra[@]}" "${launcher[@]}" >/dev/null
ninja -C "build/$kind" -j"${MYRIAD_JOBS:-2}"
