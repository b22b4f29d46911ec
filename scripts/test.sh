#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a passing test suite: installs what the build
# and tests need, then
#   1. builds the release tree and runs every test with CTest;
#   2. builds the tests with AddressSanitizer + UndefinedBehaviorSanitizer (build/asan) and runs
#      them again: a memory error or undefined behaviour any test reaches fails the suite;
#   3. builds the libFuzzer targets (Clang, ASan) and runs each for a short while
#      (MYRIAD_FUZZ_SECONDS, default 20).
# MYRIAD_TEST_STAGES picks stages (default "release asan fuzz").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
stages="${MYRIAD_TEST_STAGES:-release asan fuzz}"
for stage in $stages; do
  case "$stage" in
    release)
      scripts/build.sh release
      (cd build/release && ctest --output-on-failure -j2 --timeout 600)
      ;;
    asan)
      scripts/build.sh asan
      # halt_on_error: the first report fails the test; leaks are reported too.
      (cd build/asan && ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        ctest --output-on-failure -j2 --timeout 900)
      ;;
    fuzz)
      scripts/fuzz.sh "${MYRIAD_FUZZ_SECONDS:-20}"
      ;;
    *) echo "test.sh: unknown stage '$stage' (release, asan, fuzz)" >&2; exit 2 ;;
  esac
done
