#!/usr/bin/env bash
# The proof of issue 25: routing in front of engines like llama.cpp's llama-server (slots that
# each cache their last sequence, no KV events, CPU speed), on a multi-turn conversation trace.
# Routers side by side, each run on freshly started engines:
#   Myriad round-robin, least-loaded and kv-aware (approximate: no KV events), and conversation
#   affinity (nginx `hash $http_authorization consistent` with one API key per conversation:
#   a hash of the conversation, no load balancing); each REPEAT times.
# Then kv-aware with KV events: the same trace on `myriad emu` in its vLLM profile.
# Prints per run TTFT p50/p90/p99 (emulated ms: real x SPEED), the engines' own cache hit share
# (their counters, not the gateway's belief) against the trace's ideal reuse, and how many
# requests each engine got. Bounded (every process under `timeout`), not in CI.
#
# Usage: bench/approx_routing.sh [path/to/myriad]
# Settings (environment): ENGINES=4 SLOTS=2 SPEED=2 REPEAT=2 REQUESTS=120 RATE=0.8 SEED=8
#   BASE_PORT=19100 LIFETIME=1800 POLICIES="round-robin least-loaded kv-aware affinity" VLLM=1
#   KEEP=DIR: keep each run's loadgen log, the gateway's access log and the trace there
#   (DIR/<router>_<rep>.run.jsonl, .access.jsonl; DIR/trace.jsonl), for bench/approx_join.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-build/release/myriad}")"
ENGINES=${ENGINES:-4}
SLOTS=${SLOTS:-2}
SPEED=${SPEED:-2}
REPEAT=${REPEAT:-2}
REQUESTS=${REQUESTS:-120}
RATE=${RATE:-0.8}
SEED=${SEED:-8}
BASE_PORT=${BASE_PORT:-19100}
LIFETIME=${LIFETIME:-1800}
POLICIES=${POLICIES:-"round-robin least-loaded kv-aware affinity"}
VLLM=${VLLM:-1}
KEEP=${KEEP:-}

[[ -x "$bin" ]] || { echo "approx_routing: $bin is not built (scripts/build.sh release)" >&2; exit 2; }
nginx_bin="$(command -v nginx || true)"
[[ -n "$nginx_bin" ]] || { echo "approx_routing: needs nginx (apt-get install nginx)" >&2; exit 2; }
for v in ENGINES SLOTS REPEAT REQUESTS; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 && "${!v}" -le 1000 ]] || {
    echo "approx_routing: $v must be an integer in [1, 1000], got '${!v}'" >&2; exit 2; }
done

BENCH_NAME=approx_routing
# shellcheck source=bench_procs.sh
source "$(dirname "$0")/bench_procs.sh"

front_port=$BASE_PORT
emu_port0=$((BASE_PORT + 10))
events_port0=$((BASE_PORT + 40))
for p in $front_port $(seq "$emu_port0" $((emu_port0 + ENGINES - 1))) $(seq "$events_port0" $((events_port0 + ENGINES - 1))); do
  port_free "$p" || { echo "approx_routing: port $p is in use; set BASE_PORT" >&2; exit 2; }
done

# The trace: conversations whose every turn repeats the history before it (the last prompt,
# then the answer and the next question as new tokens), in Mooncake JSONL; hash id blocks are
# 512 tokens in `loadgen --trace`, a turn's prompt the conversation's first ids cut to its
# length, so turn k shares exactly turn k-1's prompt. Tenant = conversation (the affinity key).
trace="$tmp/conversations.jsonl"
python3 - "$trace" "$REQUESTS" "$RATE" "$SEED" >"$tmp/trace_summary.txt" <<'PY'
import json, random, sys
path, n, rate, seed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
span = n / rate                      # seconds of trace for n requests at `rate`
reqs, conv = [], 0
while len(reqs) < n:
    turns = rng.choice((1, 1, 2, 3, 4))
    t = rng.uniform(0, span * 0.8)
    length = rng.randint(500, 1000)
    for k in range(turns):
        if len(reqs) == n or t > span:
            break
        reqs.append({"t": t, "conv": conv, "turn": k, "len": length, "out": rng.randint(30, 150)})
        t += rng.uniform(0.1, 0.3) * span / 4   # the user's think time
        length += rng.randint(450, 950)
    conv += 1
reqs.sort(key=lambda r: r["t"])
last, ideal, total = {}, 0, 0
with open(path, "w") as f:
    for r in reqs:
        blocks = (r["len"] + 511) // 512
        f.write(json.dumps({"timestamp": int(r["t"] * 1000), "input_length": r["len"], "output_length": r["out"],
                            "hash_ids": [r["conv"] * 1000 + b for b in range(blocks)], "tenant": r["conv"]}) + "\n")
        ideal += last.get(r["conv"], 0)   # the turn before is the longest earlier prefix
        total += r["len"]
        last[r["conv"]] = r["len"]
print(f"{len(reqs)} requests of {conv} conversations over {reqs[-1]['t']:.0f} s "
      f"({len(reqs) / max(reqs[-1]['t'], 1):.2f} req/s), prompts {total / len(reqs):.0f} tokens on average, "
      f"ideal prefix reuse {100 * ideal / total:.1f}%")
print(conv)
PY
conversations=$(tail -n 1 "$tmp/trace_summary.txt")
keys=$(seq -s, -f 'conv-%g' 0 $((conversations - 1)))

# start_engines PROFILE: ENGINES fresh engines.
start_engines() {
  local i
  for i in $(seq 0 $((ENGINES - 1))); do
    if [[ "$1" == llama ]]; then
      start "emu$i" "$bin" emu --listen "127.0.0.1:$((emu_port0 + i))" --speed "$SPEED" --profile llama-server \
        --slots "$SLOTS"
    else
      start "emu$i" "$bin" emu --listen "127.0.0.1:$((emu_port0 + i))" --speed "$SPEED" \
        --kv-events "tcp://127.0.0.1:$((events_port0 + i))"
    fi
  done
  for i in $(seq 0 $((ENGINES - 1))); do wait_port $((emu_port0 + i)) 15; done
}

# gateway_config FILE POLICY EVENTS(0|1)
gateway_config() {
  local i
  {
    echo "listen: 127.0.0.1:$front_port"
    echo "access_log: \"$tmp/access.log\""
    echo "routing: {policy: $2}"
    echo "upstream: {first_byte_timeout: 300s}"
    echo "backends:"
    for i in $(seq 0 $((ENGINES - 1))); do
      if [[ "$3" == 1 ]]; then
        echo "  - {name: e$i, url: \"http://127.0.0.1:$((emu_port0 + i))\", model: emu-model, kv_events: \"tcp://127.0.0.1:$((events_port0 + i))\"}"
      else
        echo "  - {name: e$i, url: \"http://127.0.0.1:$((emu_port0 + i))\", model: emu-model}"
      fi
    done
  } >"$1"
}

nginx_config() {
  local i t
  {
    [[ "$(id -u)" == 0 ]] && echo "user root;"
    echo "worker_processes 1;"
    echo "pid $tmp/nginx.pid;"
    echo "error_log $tmp/nginx_error.log warn;"
    echo "events { worker_connections 1024; }"
    echo "http {"
    echo "  access_log off;"
    for t in client_body proxy fastcgi uwsgi scgi; do echo "  ${t}_temp_path $tmp/nginx_$t;"; done
    echo "  upstream engines {"
    echo "    hash \$http_authorization consistent;"
    for i in $(seq 0 $((ENGINES - 1))); do echo "    server 127.0.0.1:$((emu_port0 + i));"; done
    echo "  }"
    echo "  server {"
    echo "    listen 127.0.0.1:$front_port;"
    echo "    location / {"
    echo "      proxy_pass http://engines;"
    echo "      proxy_http_version 1.1;"
    echo "      proxy_set_header Connection \"\";"
    echo "      proxy_buffering off;"
    echo "      proxy_request_buffering off;"
    echo "      proxy_read_timeout 300s;"
    echo "    }"
    echo "  }"
    echo "}"
  } >"$1"
}

# The engines' own counters: cached and queried prompt tokens, and requests served.
engine_counters() {
  local i
  for i in $(seq 0 $((ENGINES - 1))); do
    curl -s --max-time 5 "http://127.0.0.1:$((emu_port0 + i))/metrics" || true
    echo "# engine-end"
  done
}

results="$tmp/results.jsonl"
: >"$results"
# run LABEL REP PROFILE ROUTER EVENTS
run() {
  local label="$1" rep="$2" profile="$3" router="$4" events="$5"
  start_engines "$profile"
  local extra=()
  if [[ "$router" == affinity ]]; then
    nginx_config "$tmp/nginx.conf"
    start nginx "$nginx_bin" -p "$tmp" -e "$tmp/nginx_error.log" -c "$tmp/nginx.conf" -g 'daemon off;'
    extra=(--tenant-keys "$keys")
  else
    gateway_config "$tmp/gw.yaml" "$router" "$events"
    start gw "$bin" gateway --config "$tmp/gw.yaml"
  fi
  wait_port "$front_port" 15
  [[ "$events" == 1 ]] && sleep 1  # the gateway's event subscriptions connect
  timeout 900 "$bin" loadgen --url "http://127.0.0.1:$front_port" --trace "$trace" --time-scale "$SPEED" \
    -c 256 --log "$tmp/run.log" --json "${extra[@]}" >"$tmp/run.json" || true
  engine_counters >"$tmp/counters.txt"
  stop_all
  if [[ -n "$KEEP" ]]; then
    local name="${label//[^A-Za-z0-9.-]/_}_$rep"
    mkdir -p "$KEEP"
    cp "$trace" "$KEEP/trace.jsonl"
    cp "$tmp/run.log" "$KEEP/$name.run.jsonl"
    if [[ -f "$tmp/access.log" ]]; then mv "$tmp/access.log" "$KEEP/$name.access.jsonl"; fi
  fi
  rm -f "$tmp/access.log"
  python3 - "$tmp/run.log" "$tmp/counters.txt" "$label" "$rep" "$SPEED" "$ENGINES" >>"$results" <<'PY'
import json, sys
log, counters, label, rep, speed, engines = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
lines = [json.loads(l) for l in open(log)]
ok = [l for l in lines if l["status"] == 200 and l["ttft_s"] >= 0]
ttft = sorted(l["ttft_s"] * speed * 1e3 for l in ok)
q = lambda p: ttft[min(len(ttft) - 1, int(p * len(ttft)))] if ttft else float("nan")
hit = queried = 0
served = []
for block in open(counters).read().split("# engine-end")[:engines]:
    h = qd = 0
    for line in block.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        if name.startswith(("myriad_emu_prompt_cache_hit_tokens_total", "vllm:prefix_cache_hits_total")):
            h += float(value)
        elif name.startswith(("myriad_emu_prompt_cache_queried_tokens_total", "vllm:prefix_cache_queries_total")):
            qd += float(value)
    hit += h
    queried += qd
    served.append(int(qd))
print(json.dumps({"label": label, "rep": rep, "ok": len(ok), "sent": len(lines),
                  "p50": q(0.5), "p90": q(0.9), "p99": q(0.99),
                  "hit": hit / queried if queried else 0.0, "prompt_tokens_per_engine": served}))
PY
  tail -n 1 "$results" | python3 -c "$(cat <<'PY'
import json, sys
r = json.loads(sys.stdin.read())
print(f"  {r['label']:<28} rep {r['rep']}: {r['ok']}/{r['sent']} ok, TTFT p50 {r['p50']:6.0f} p90 {r['p90']:6.0f} "
      f"p99 {r['p99']:6.0f} ms, engines hit {100 * r['hit']:.1f}%, prompt tokens per engine {r['prompt_tokens_per_engine']}")
PY
)" >&2
}

echo "approx_routing: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start" >&2
echo "trace: $(head -n 1 "$tmp/trace_summary.txt")" >&2
echo "engines: $ENGINES x myriad emu --profile llama-server --slots $SLOTS --speed $SPEED (TTFT in emulated ms)" >&2
for rep in $(seq 1 "$REPEAT"); do
  for policy in $POLICIES; do
    case "$policy" in
      affinity) run "affinity (nginx hash)" "$rep" llama affinity 0 ;;
      *) run "myriad $policy" "$rep" llama "$policy" 0 ;;
    esac
  done
done
if [[ "$VLLM" == 1 ]]; then
  echo "with KV events: $ENGINES x myriad emu (vLLM profile) --kv-events, the gateway kv-aware (exact)" >&2
  run "myriad kv-aware, vLLM+events" 1 vllm kv-aware 1
fi

python3 - "$results" <<'PY'
import json, sys
from collections import defaultdict
rows = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows[r["label"]].append(r)
def span(vals, fmt):
    lo, hi = min(vals), max(vals)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else fmt.format(lo) + "-" + fmt.format(hi)
print("| router | runs | TTFT p50 | p90 | p99 | engines' cache hit |")
print("|---|---|---|---|---|---|")
for label, rs in rows.items():
    print(f"| {label} | {len(rs)} | {span([r['p50'] for r in rs], '{:,.0f}')} ms | {span([r['p90'] for r in rs], '{:,.0f}')} ms "
          f"| {span([r['p99'] for r in rs], '{:,.0f}')} ms | {span([100 * r['hit'] for r in rs], '{:.1f}')}% |")
PY
