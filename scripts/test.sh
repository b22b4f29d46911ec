#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a passing test suite: installs what the build
# and tests need, builds (release) and runs every test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
cd build/release
ctest --output-on-failure -j2 --timeout 600
