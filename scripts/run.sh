#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the default simulation: installs what the
# build needs, builds the release binary and simulates scenarios/default.yaml (DeepSeek-V3 on
# 1,152 H200 GPUs at DeepSeek's published operating point, one hour), writing results.json.
# scenarios/chat_10k.yaml and scenarios/failures.yaml are the 10,240-GPU runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
exec build/release/myriad sim scenarios/default.yaml -o results.json "$@"
