#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang++ (ASan) in build/fuzz and runs each for N
# seconds: scripts/fuzz.sh [seconds per target, default 60] [target name filter].
# Clang is optional for Myriad (the build uses GCC); this script installs it when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
filter="${2:-}"
if ! command -v clang++ >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "fuzz: installing clang"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-dev
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(cd .. && pwd)}"
fi
# -O1 with line tables: the compile is what a short run in the test command mostly costs.
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Fuzz "-DCMAKE_CXX_FLAGS=-O1 -g1" -DCMAKE_CXX_COMPILER=clang++ \
  -DMYRIAD_BUILD_FUZZ=ON -DMYRIAD_BUILD_TESTS=OFF -DMYRIAD_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
targets=()
for src in fuzz/*_fuzz.cc; do
  name="$(basename "$src" .cc)"
  if [ -n "$filter" ] && [[ "$name" != *"$filter"* ]]; then continue; fi
  targets+=("$name")
done
ninja -C build/fuzz -j"${MYRIAD_JOBS:-2}" "${targets[@]}"
for t in "${targets[@]}"; do
  corpus="build/fuzz/corpus/$t"
  mkdir -p "$corpus"
  echo "fuzz: $t for ${seconds}s (corpus $corpus)"
  "build/fuzz/$t" -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/$t-" "$corpus"
done
