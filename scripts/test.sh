#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a passing test suite: installs what the build
# and tests need, then
#   1. builds the release tree and runs every test with CTest;
#   2. builds the tests with AddressSanitizer + UndefinedBehaviorSanitizer (build/asan) and runs
#      them again: a memory error or undefined behaviour any test reaches fails the suite;
#   3. builds the libFuzzer targets (Clang, ASan) and runs each for a short while
#      (MYRIAD_FUZZ_SECONDS, default 20).
# MYRIAD_TEST_STAGES picks stages (default "release asan fuzz").
# A test that fails is run once more on its own; the suite passes only if it passes then, and
# the log names it as flaky (a shared 2-core CI machine stretches the few tests that bound a
# wall time). A test that fails twice fails the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

# ctest in directory $1 with the rest as its options, each failed test retried once.
run_ctest() {
  local dir="$1"
  shift
  if (cd "$dir" && ctest "$@"); then return 0; fi
  local failed="$dir/Testing/Temporary/LastTestsFailed.log"
  [[ -s "$failed" ]] || return 1
  local first
  first="$(cat "$failed")"
  echo "test.sh: re-running the failed tests once: $(echo "$first" | tr '\n' ' ')" >&2
  if (cd "$dir" && ctest --rerun-failed "$@"); then
    echo "test.sh: FLAKY: failed once, passed on the second run: $(echo "$first" | tr '\n' ' ')" >&2
    return 0
  fi
  return 1
}
scripts/setup.sh
stages="${MYRIAD_TEST_STAGES:-release asan fuzz}"
for stage in $stages; do
  case "$stage" in
    release)
      scripts/build.sh release
      run_ctest build/release --output-on-failure -j2 --timeout 600
      ;;
    asan)
      scripts/build.sh asan
      # halt_on_error: the first report fails the test; leaks are reported too.
      ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        run_ctest build/asan --output-on-failure -j2 --timeout 900
      ;;
    fuzz)
      scripts/fuzz.sh "${MYRIAD_FUZZ_SECONDS:-20}"
      ;;
    *) echo "test.sh: unknown stage '$stage' (release, asan, fuzz)" >&2; exit 2 ;;
  esac
done
