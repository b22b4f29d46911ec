#!/usr/bin/env bash
# The gateway's cost as a proxy and its KV-aware routing, on loopback:
#   (a) one emulator directly, (b) nginx round-robin over N emulators, (c) the gateway with
#   routing.policy kv-aware and (d) round-robin over the same emulators, each under the same
#   closed-loop streaming load (`myriad loadgen`), REPEAT times interleaved; then
#   (e) a shared-prefix workload through the gateway, kv-aware against round-robin, each on
#   fresh emulators whose KV caches hold only part of the groups' prefixes, so where a group's
#   requests land decides whether its prefix is cached.
# Prints per-run lines, then the summary tables (median and min-max over the repeats).
# Everything it starts is on 127.0.0.1, bounded by `timeout`, and stopped by its trap.
#
# Usage: bench/gateway_bench.sh [path/to/myriad]
# Settings (environment): EMUS=2 DURATION=10s CONCURRENCY=32 MAX_TOKENS=16 PROMPT_WORDS=64
#   SPEED=1000 REPEAT=3 BASE_PORT=18100 PREFIX_EMUS=4 PREFIX_SPEED=4 PREFIX_GROUPS=16
#   PREFIX_WORDS=2048 PREFIX_KV_BLOCKS=768 PREFIX_CONCURRENCY=8 PREFIX_DURATION=15s SKIP_E=0
#   LIGHT_RATE=100 (requests/s of the light open-loop runs that measure the latency added)
#   GW_THREADS=2 GW_UPSTREAM_THREADS=0 (the gateway's HTTP and upstream client threads)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-build/release/myriad}")"
EMUS=${EMUS:-2}
DURATION=${DURATION:-10s}
CONCURRENCY=${CONCURRENCY:-32}
MAX_TOKENS=${MAX_TOKENS:-16}
PROMPT_WORDS=${PROMPT_WORDS:-64}
SPEED=${SPEED:-1000}
REPEAT=${REPEAT:-3}
BASE_PORT=${BASE_PORT:-18100}
PREFIX_EMUS=${PREFIX_EMUS:-4}
PREFIX_SPEED=${PREFIX_SPEED:-4}
PREFIX_GROUPS=${PREFIX_GROUPS:-16}
PREFIX_WORDS=${PREFIX_WORDS:-2048}
PREFIX_KV_BLOCKS=${PREFIX_KV_BLOCKS:-768}
PREFIX_CONCURRENCY=${PREFIX_CONCURRENCY:-8}
PREFIX_DURATION=${PREFIX_DURATION:-15s}
SKIP_E=${SKIP_E:-0}
# Latency added by a proxy is read at a light open-loop load (the CPUs not saturated), where it
# is the proxy's own work rather than queueing for the two cores.
LIGHT_RATE=${LIGHT_RATE:-100}
# No process outlives this, even if the trap never runs (kill -9 of this script).
LIFETIME=${LIFETIME:-1800}

[[ -x "$bin" ]] || { echo "gateway_bench: $bin is not built (scripts/build.sh release)" >&2; exit 2; }
if ! command -v nginx >/dev/null 2>&1; then
  echo "gateway_bench: installing nginx (apt-get)" >&2
  apt-get install -y --no-install-recommends nginx >/dev/null
fi
nginx_bin="$(command -v nginx)"

BENCH_NAME=gateway_bench
# shellcheck source=bench_procs.sh
source "$(dirname "$0")/bench_procs.sh"

direct_port=$BASE_PORT
nginx_port=$((BASE_PORT + 1))
kv_port=$((BASE_PORT + 2))
rr_port=$((BASE_PORT + 3))
emu_port0=$((BASE_PORT + 10))
for p in $direct_port $nginx_port $kv_port $rr_port $(seq "$emu_port0" $((emu_port0 + EMUS + PREFIX_EMUS))); do
  port_free "$p" || { echo "gateway_bench: port $p is in use; set BASE_PORT" >&2; exit 2; }
done

# start_emus FIRST_PORT COUNT SPEED [extra emu flags]
start_emus() {
  local first="$1" count="$2" speed="$3" i
  shift 3
  for i in $(seq 0 $((count - 1))); do
    start "emu$((first + i))" "$bin" emu --listen "127.0.0.1:$((first + i))" --speed "$speed" "$@"
  done
  for i in $(seq 0 $((count - 1))); do wait_port $((first + i)); done
}

# gateway_config FILE PORT POLICY FIRST_EMU_PORT COUNT
gateway_config() {
  local file="$1" port="$2" policy="$3" first="$4" count="$5" i
  {
    echo "listen: 127.0.0.1:$port"
    echo "threads: ${GW_THREADS:-2}"
    echo "upstream_threads: ${GW_UPSTREAM_THREADS:-0}"
    echo "access_log: \"\""
    echo "routing: {policy: $policy}"
    echo "backends:"
    for i in $(seq 0 $((count - 1))); do
      echo "  - {name: emu$i, url: \"http://127.0.0.1:$((first + i))\", model: emu-model}"
    done
  } >"$file"
}

nginx_config() {
  local file="$1" i
  {
    [[ "$(id -u)" == 0 ]] && echo "user root;"
    echo "worker_processes 2;"
    echo "pid $tmp/nginx.pid;"
    echo "error_log $tmp/nginx_error.log warn;"
    echo "events { worker_connections 4096; }"
    echo "http {"
    echo "  access_log off;"
    for t in client_body proxy fastcgi uwsgi scgi; do echo "  ${t}_temp_path $tmp/nginx_$t;"; done
    echo "  upstream emus {"
    for i in $(seq 0 $((EMUS - 1))); do echo "    server 127.0.0.1:$((emu_port0 + i));"; done
    echo "    keepalive 256;"
    echo "  }"
    echo "  server {"
    echo "    listen 127.0.0.1:$nginx_port;"
    echo "    keepalive_requests 1000000;"
    echo "    location / {"
    echo "      proxy_pass http://emus;"
    echo "      proxy_http_version 1.1;"
    echo "      proxy_set_header Connection \"\";"
    echo "      proxy_buffering off;"
    echo "      proxy_request_buffering off;"
    echo "    }"
    echo "  }"
    echo "}"
  } >"$file"
}

results="$tmp/results.jsonl"
: >"$results"
# run LABEL REP PORT DURATION [loadgen flags]: one measured run with seed REP, after a 1 s
# warm-up with another seed.
run() {
  local label="$1" rep="$2" port="$3" duration="$4"
  shift 4
  timeout 120 "$bin" loadgen --url "http://127.0.0.1:$port" --duration 1s --seed 999 "$@" >/dev/null
  timeout 300 "$bin" loadgen --url "http://127.0.0.1:$port" --duration "$duration" --seed "$rep" \
    --json "$@" >"$tmp/run.json"
  python3 - "$tmp/run.json" "$label" "$rep" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["label"], r["rep"] = sys.argv[2], int(sys.argv[3])
print(json.dumps(r))
PY
  python3 - "$tmp/run.json" "$label" "$rep" <<'PY' >&2
import json, sys
r = json.load(open(sys.argv[1])); t = r.get("ttft_ms", {})
print(f'  {sys.argv[2]:<22} rep {sys.argv[3]}: {r["throughput"]["requests_per_s"]:8.1f} req/s, '
      f'p50 {r["latency_ms"]["p50"]:7.2f} ms, p99 {r["latency_ms"]["p99"]:7.2f} ms, '
      f'ttft p50 {t.get("p50", 0):7.2f} p99 {t.get("p99", 0):7.2f} ms, '
      f'errors {r["requests"]["errors"]}')
PY
}

echo "gateway_bench: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) before the start" >&2
echo "(a-d) $EMUS emulators at --speed $SPEED; loadgen -c $CONCURRENCY --duration $DURATION --stream --max-tokens $MAX_TOKENS --prompt-words $PROMPT_WORDS; $REPEAT repeats" >&2
start_emus "$emu_port0" "$EMUS" "$SPEED"
nginx_config "$tmp/nginx.conf"
start nginx "$nginx_bin" -p "$tmp" -e "$tmp/nginx_error.log" -c "$tmp/nginx.conf" -g 'daemon off;'
gateway_config "$tmp/gw_kv.yaml" "$kv_port" kv-aware "$emu_port0" "$EMUS"
gateway_config "$tmp/gw_rr.yaml" "$rr_port" round-robin "$emu_port0" "$EMUS"
start gw_kv "$bin" gateway --config "$tmp/gw_kv.yaml"
start gw_rr "$bin" gateway --config "$tmp/gw_rr.yaml"
wait_port "$nginx_port"
wait_port "$kv_port"
wait_port "$rr_port"

load=(--concurrency "$CONCURRENCY" --stream --max-tokens "$MAX_TOKENS"
      --prompt-words "$PROMPT_WORDS")
light=(--rate "$LIGHT_RATE" --concurrency 256 --stream --max-tokens "$MAX_TOKENS"
       --prompt-words "$PROMPT_WORDS")
for rep in $(seq 1 "$REPEAT"); do
  run direct "$rep" "$emu_port0" "$DURATION" "${load[@]}"
  run nginx "$rep" "$nginx_port" "$DURATION" "${load[@]}"
  run gateway-kv-aware "$rep" "$kv_port" "$DURATION" "${load[@]}"
  run gateway-round-robin "$rep" "$rr_port" "$DURATION" "${load[@]}"
  run light-direct "$rep" "$emu_port0" "$DURATION" "${light[@]}"
  run light-nginx "$rep" "$nginx_port" "$DURATION" "${light[@]}"
  run light-gateway-kv-aware "$rep" "$kv_port" "$DURATION" "${light[@]}"
  run light-gateway-round-robin "$rep" "$rr_port" "$DURATION" "${light[@]}"
done
stop_all

if [[ "$SKIP_E" != 1 ]]; then
  pfirst=$((emu_port0 + EMUS))
  echo "(e) $PREFIX_EMUS emulators at --speed $PREFIX_SPEED with --kv-blocks $PREFIX_KV_BLOCKS;" \
       "loadgen -c $PREFIX_CONCURRENCY --duration $PREFIX_DURATION --stream --max-tokens $MAX_TOKENS" \
       "--prompt-words $PROMPT_WORDS --shared-prefix-words $PREFIX_WORDS --prefix-groups $PREFIX_GROUPS" >&2
  prefix_load=(--concurrency "$PREFIX_CONCURRENCY" --stream
               --max-tokens "$MAX_TOKENS" --prompt-words "$PROMPT_WORDS"
               --shared-prefix-words "$PREFIX_WORDS" --prefix-groups "$PREFIX_GROUPS" --timeout 120s)
  for rep in $(seq 1 "$REPEAT"); do
    for policy in kv-aware round-robin; do
      # Fresh emulators and gateway: both policies start from empty caches and index.
      start_emus "$pfirst" "$PREFIX_EMUS" "$PREFIX_SPEED" --kv-blocks "$PREFIX_KV_BLOCKS"
      gateway_config "$tmp/gw_prefix.yaml" "$kv_port" "$policy" "$pfirst" "$PREFIX_EMUS"
      start gw_prefix "$bin" gateway --config "$tmp/gw_prefix.yaml"
      wait_port "$kv_port"
      # The warm-up's seed differs, so its prefixes are other ones: it warms connections only.
      run "prefix-$policy" "$rep" "$kv_port" "$PREFIX_DURATION" "${prefix_load[@]}"
      # The engines' own count of prompt tokens found in their prefix caches (warm-up included).
      hits=0 queries=0
      for i in $(seq 0 $((PREFIX_EMUS - 1))); do
        m="$(curl -s --max-time 5 "http://127.0.0.1:$((pfirst + i))/metrics" || true)"
        hits=$((hits + $(awk '/^vllm:prefix_cache_hits_total/ {s += $NF} END {printf "%d", s}' <<<"$m")))
        queries=$((queries + $(awk '/^vllm:prefix_cache_queries_total/ {s += $NF} END {printf "%d", s}' <<<"$m")))
      done
      echo "  prefix-$policy rep $rep: engines' prefix cache hits $hits of $queries prompt tokens" >&2
      echo "{\"label\": \"hits-$policy\", \"rep\": $rep, \"hits\": $hits, \"queries\": $queries}" >>"$results"
      stop_all
    done
  done
fi

python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def runs(label): return [r for r in rows if r["label"] == label]
def stat(label, f):
    v = [f(r) for r in runs(label)]
    if not v: return None
    return statistics.median(v), min(v), max(v)
def fmt(s, d=1):
    return "-" if s is None else f"{s[0]:.{d}f} ({s[1]:.{d}f}-{s[2]:.{d}f})"
rps = lambda r: r["throughput"]["requests_per_s"]
p50 = lambda r: r["latency_ms"]["p50"]
p99 = lambda r: r["latency_ms"]["p99"]
print("\nmedian (min-max) over the repeats")
print(f'{"target":<22} {"req/s":>26} {"p50 ms":>22} {"p99 ms":>22} {"errors":>7}')
for label in ["direct", "nginx", "gateway-kv-aware", "gateway-round-robin"]:
    if not runs(label): continue
    errs = sum(r["requests"]["errors"] for r in runs(label))
    print(f'{label:<22} {fmt(stat(label, rps)):>26} {fmt(stat(label, p50), 2):>22} {fmt(stat(label, p99), 2):>22} {errs:>7}')
ng = stat("nginx", rps)
for gw in ["gateway-kv-aware", "gateway-round-robin"]:
    g = stat(gw, rps)
    if g and ng:
        print(f'{gw}: throughput / nginx = {g[0] / ng[0]:.2f} (target >= 0.8)')
if runs("light-direct"):
    print(f'\nlight open-loop load: median (min-max) over the repeats')
    print(f'{"target":<26} {"req/s":>22} {"p50 ms":>22} {"p99 ms":>22} {"errors":>7}')
    for label in ["light-direct", "light-nginx", "light-gateway-kv-aware", "light-gateway-round-robin"]:
        errs = sum(r["requests"]["errors"] for r in runs(label))
        print(f'{label:<26} {fmt(stat(label, rps)):>22} {fmt(stat(label, p50), 2):>22} {fmt(stat(label, p99), 2):>22} {errs:>7}')
    d50, d99 = stat("light-direct", p50), stat("light-direct", p99)
    for label in ["light-nginx", "light-gateway-kv-aware", "light-gateway-round-robin"]:
        s50, s99 = stat(label, p50), stat(label, p99)
        print(f'{label}: added over direct: p50 {s50[0] - d50[0]:+.2f} ms, p99 {s99[0] - d99[0]:+.2f} ms (target p99 <= 1 ms)')
if runs("prefix-kv-aware"):
    print(f'\nshared-prefix workload through the gateway: TTFT ms, median (min-max)')
    print(f'{"policy":<22} {"req/s":>22} {"ttft p50":>22} {"ttft p99":>22} {"errors":>7}')
    for label in ["prefix-kv-aware", "prefix-round-robin"]:
        errs = sum(r["requests"]["errors"] for r in runs(label))
        hit = stat("hits-" + label[len("prefix-"):], lambda r: 100.0 * r["hits"] / max(1, r["queries"]))
        print(f'{label:<22} {fmt(stat(label, rps)):>22} {fmt(stat(label, lambda r: r["ttft_ms"]["p50"]), 2):>22} '
              f'{fmt(stat(label, lambda r: r["ttft_ms"]["p99"]), 2):>22} {errs:>7}   prefix-cache hit % {fmt(hit)}')
PY
echo "gateway_bench: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end" >&2
