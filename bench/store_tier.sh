#!/usr/bin/env bash
# The KV store as the engines' second tier, end to end (issue 20, item 5): a multi-turn trace
# whose working set is several times the engines' HBM is replayed through `myriad up` without
# and with `--store`, on fresh processes each time, and the two runs are printed side by side:
# TTFT p50/p99 (measured by the client, real seconds), prompt tokens prefilled, and the prefix
# hits by tier as fractions of all prompt tokens (the engines' vLLM counters: HBM, and the
# external tier = the store), with the gateway's expected split from its access log
# (hit=hbm:H,store:S), and the gateway's KV-event indexer's orphans (CPU blocks it could not
# chain) and parents it recalled.
#
# The trace is generated here (seeded, Mooncake's JSONL with 512-token hash blocks): SESSIONS
# conversations of TURNS turns, each turn adding TURN_BLOCKS blocks to the conversation so far,
# the sessions' first turns spread over START_SPREAD seconds, THINK seconds between turns.
#
# Usage: bench/store_tier.sh [path/to/myriad]
# Settings (environment): ENGINES=2 KV_BLOCKS=1024 SPEED=1 SESSIONS=64 TURNS=4 TURN_BLOCKS=2
#   START_SPREAD=40 THINK=15 OUTPUT=16 CONCURRENCY=64 STORE_NODES=2 NODE_BYTES=268435456
#   BLOCK_BYTES=4096 STORE_GBPS=0.1 SEED=7
# BLOCK_BYTES/STORE_GBPS: the engines store a 4 KiB stand-in per 16-token block instead of the
# model's 2 MiB (Llama-3.1-8B), and a load takes at least its bytes over 0.1 GB/s: 4 KiB at
# 0.1 GB/s is 41 us, what 2 MiB takes over a 400 Gb/s NIC (50 GB/s). The real TCP reads are
# timed too; a load takes the longer of the two.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-build/release/myriad}")"
ENGINES=${ENGINES:-2}
KV_BLOCKS=${KV_BLOCKS:-1024}
SPEED=${SPEED:-1}
SESSIONS=${SESSIONS:-64}
TURNS=${TURNS:-4}
TURN_BLOCKS=${TURN_BLOCKS:-2}
START_SPREAD=${START_SPREAD:-40}
THINK=${THINK:-15}
OUTPUT=${OUTPUT:-16}
CONCURRENCY=${CONCURRENCY:-64}
STORE_NODES=${STORE_NODES:-2}
NODE_BYTES=${NODE_BYTES:-268435456}
BLOCK_BYTES=${BLOCK_BYTES:-4096}
STORE_GBPS=${STORE_GBPS:-0.1}
SEED=${SEED:-7}
LIFETIME=${LIFETIME:-1200}  # no process outlives this, even if the trap never runs

[[ -x "$bin" ]] || { echo "store_tier: $bin is not built (scripts/build.sh release)" >&2; exit 2; }
tmp="$(mktemp -d /tmp/store_tier_bench.XXXXXX)"
up_pid=""
cleanup() {
  if [[ -n "$up_pid" ]]; then kill -TERM "$up_pid" 2>/dev/null || true; wait "$up_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

trace="$tmp/trace.jsonl"
python3 - "$trace" "$SESSIONS" "$TURNS" "$TURN_BLOCKS" "$START_SPREAD" "$THINK" "$OUTPUT" "$SEED" <<'PY'
import json, random, sys
path, sessions, turns, turn_blocks, spread, think, output, seed = sys.argv[1:]
sessions, turns, turn_blocks, output, seed = int(sessions), int(turns), int(turn_blocks), int(output), int(seed)
spread, think = float(spread), float(think)
rng = random.Random(seed)
records, next_id = [], 0
for s in range(sessions):
    t = rng.uniform(0, spread)
    history = []
    for turn in range(turns):
        history += list(range(next_id, next_id + turn_blocks))
        next_id += turn_blocks
        records.append({"timestamp": int(t * 1000), "input_length": 512 * len(history), "output_length": output,
                        "hash_ids": list(history)})
        t += rng.expovariate(1 / think)
records.sort(key=lambda r: r["timestamp"])
with open(path, "w") as f:
    for r in records: f.write(json.dumps(r) + "\n")
blocks = next_id
print(f"trace: {len(records)} requests, {sessions} sessions x {turns} turns, working set {blocks * 512} tokens")
PY
hbm_tokens=$((ENGINES * KV_BLOCKS * 16))
echo "engines' HBM: $ENGINES x $KV_BLOCKS blocks of 16 tokens = $hbm_tokens tokens"

# run LABEL [up flags...]: one replay through a fresh `myriad up`; leaves $tmp/LABEL.{json,metrics,err}.
run() {
  local label=$1; shift
  timeout "$LIFETIME" "$bin" up --engines "$ENGINES" --port 0 --speed "$SPEED" --kv-blocks "$KV_BLOCKS" "$@" \
    >"$tmp/$label.out" 2>"$tmp/$label.err" &
  up_pid=$!
  local port="" i
  for i in $(seq 1 300); do
    port=$(sed -n 's|.*gateway on http://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$tmp/$label.out" | head -1)
    [[ -n "$port" ]] && break
    kill -0 "$up_pid" 2>/dev/null || { cat "$tmp/$label.err" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n "$port" ]] || { echo "store_tier: up ($label) did not start" >&2; exit 1; }
  "$bin" loadgen --url "http://127.0.0.1:$port" --trace "$trace" --trace-format mooncake --time-scale "$SPEED" \
    --concurrency "$CONCURRENCY" --timeout 120s --json >"$tmp/$label.json"
  : >"$tmp/$label.metrics"
  local url
  for url in $(sed -n 's|.*engine-[0-9]* *colocated *\(http://[0-9.:]*\).*|\1|p' "$tmp/$label.out"); do
    curl -s "$url/metrics" >>"$tmp/$label.metrics"
  done
  curl -s "http://127.0.0.1:$port/metrics" >"$tmp/$label.gateway_metrics" || true
  kill -TERM "$up_pid"; wait "$up_pid" || true; up_pid=""
}

echo "run 1/2: without the store"
run no_store
echo "run 2/2: with --store"
run store --store --store-nodes "$STORE_NODES" --store-node-capacity "$NODE_BYTES" --kv-block-bytes "$BLOCK_BYTES" \
  --kv-store-gbps "$STORE_GBPS"

python3 - "$tmp" <<'PY'
import json, re, sys
tmp = sys.argv[1]
def load(label):
    text = open(f"{tmp}/{label}.json").read()
    rep = json.loads(text[text.index("{"):])
    m = {}
    for line in open(f"{tmp}/{label}.metrics"):
        if line.startswith("#"): continue
        name = line.split("{")[0].split(" ")[0]
        try: m[name] = m.get(name, 0) + float(line.rsplit(" ", 1)[1])
        except (ValueError, IndexError): pass
    hbm = store = 0
    for line in open(f"{tmp}/{label}.err"):
        g = re.search(r"hit=hbm:(\d+),store:(\d+)", line)
        if g: hbm += int(g.group(1)); store += int(g.group(2))
    # The gateway's KV-event indexer: CPU blocks dropped as orphans, and chained to a parent
    # just removed from HBM (absent from builds before those counters).
    gw = {}
    for line in open(f"{tmp}/{label}.gateway_metrics"):
        g = re.match(r'myriad_gateway_kv_event_(dropped_total\{reason="orphan"\}|recalled_parents_total) (\S+)', line)
        if g: gw[g.group(1)] = int(float(g.group(2)))
    prompt = rep["prefix"]["prompt_tokens"]
    return {"ok": f'{rep["requests"]["ok"]} of {rep["requests"]["sent"]}',
            "ttft_p50": rep["ttft_ms"]["p50"], "ttft_p99": rep["ttft_ms"]["p99"],
            "prompt": prompt, "prefilled": prompt - rep["prefix"]["cached_tokens"],
            # The emulator's vllm:prompt_tokens_total counts the tokens it computed.
            "engine_prefilled": int(m.get("vllm:prompt_tokens_total", 0)),
            "hbm_hit": m.get("vllm:prefix_cache_hits_total", 0) / max(prompt, 1),
            "store_hit": m.get("vllm:external_prefix_cache_hits_total", 0) / max(prompt, 1),
            "gw_hbm": hbm / max(prompt, 1), "gw_store": store / max(prompt, 1),
            "orphans": gw.get('dropped_total{reason="orphan"}', "-"),
            "recalled": gw.get("recalled_parents_total", "-")}
a, b = load("no_store"), load("store")
rows = [("requests ok", "ok", "{}"), ("TTFT p50 (ms)", "ttft_p50", "{:.1f}"), ("TTFT p99 (ms)", "ttft_p99", "{:.1f}"),
        ("prompt tokens", "prompt", "{:,}"), ("prefilled tokens", "prefilled", "{:,}"),
        ("prefilled (engines' count)", "engine_prefilled", "{:,}"),
        ("hit rate HBM (engines)", "hbm_hit", "{:.1%}"), ("hit rate store (engines)", "store_hit", "{:.1%}"),
        ("gateway expected HBM", "gw_hbm", "{:.1%}"), ("gateway expected store", "gw_store", "{:.1%}"),
        ("gateway orphan events", "orphans", "{}"), ("gateway recalled parents", "recalled", "{}")]
print(f"| {'':26} | {'without store':>14} | {'with --store':>14} |")
print(f"|{'-'*28}|{'-'*15}:|{'-'*15}:|")
for name, k, f in rows:
    print(f"| {name:26} | {f.format(a[k]):>14} | {f.format(b[k]):>14} |")
def less(k): return 1 - b[k] / a[k] if a[k] else 0
print(f"prefilled tokens {less('prefilled'):.1%} lower (target >= 40%), TTFT p50 {less('ttft_p50'):.1%} lower (target >= 30%)")
PY
