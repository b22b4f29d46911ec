#!/usr/bin/env bash
# Installs the Debian packages Myriad's build and tests need. Idempotent: packages already
# present are skipped, so a second run does nothing but check.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config
  libabsl-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost1.81-dev
  cppzmq-dev libzmq3-dev
  etcd-server
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
