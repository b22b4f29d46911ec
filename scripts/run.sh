#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the default simulation: installs what the
# build needs, builds the release binary and simulates scenarios/default.yaml (10,240 H200
# GPUs serving DeepSeek-V3 for one hour), writing results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
exec build/release/myriad sim scenarios/default.yaml -o results.json "$@"
