#!/usr/bin/env bash
# Configures and builds Myriad: scripts/build.sh [release|debug] (default release).
# Release and debug builds live apart, in build/release and build/debug.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
case "$kind" in
  release) type=Release ;;
  debug) type=Debug ;;
  *) echo "usage: scripts/build.sh [release|debug]" >&2; exit 2 ;;
esac
cmake -S . -B "build/$kind" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DMYRIAD_WERROR=ON >/dev/null
ninja -C "build/$kind" -j"${MYRIAD_JOBS:-2}"
