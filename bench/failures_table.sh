#!/usr/bin/env bash
# The practices table of docs/failures.md: runs a failures scenario with everything on, then
# with each practice turned off in turn, and prints one markdown row per run.
#   bench/failures_table.sh scenarios/failures_incidents.yaml [extra --set flags...]
#   bench/failures_table.sh scenarios/failures.yaml --set hardware.nodes=320 ...
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=$1
shift
source bench/table_rows.sh
rows=(
  "baseline (every practice on)|"
  "watchdog 10 min (NCCL default)|--set faults.detection.watchdog_timeout=10m"
  "no straggler eviction|--set faults.straggler_detection.enabled=false"
  "no known-answer probes|--set faults.detection.probe_interval=0s"
  "weights from shared storage|--set faults.recovery.weights=storage"
  "no recompute limiter|--set faults.recompute_limit=0"
  "decode units of 9 nodes (DP72) instead of 18|--set pools.1.layout.dp=72 --set pools.1.layout.ep=72 --set pools.1.layout.nodes=9 --set pools.1.count=DOUBLE"
  "elastic EP on, 32 redundant experts (DeepSeek's layout)|--set faults.elastic_ep.enabled=true"
  "320 / 256 redundant experts (decode / prefill), elastic EP off|--set pools.1.layout.redundant_experts=320 --set pools.0.layout.redundant_experts=256"
  "320 / 256 redundant experts, elastic EP on|--set pools.1.layout.redundant_experts=320 --set pools.0.layout.redundant_experts=256 --set faults.elastic_ep.enabled=true"
)
decode_count=$("$myriad_bin" sim "$scenario" "$@" --set duration=1s --set drain=1s --json --no-progress 2>/dev/null |
  python3 -c 'import json,sys; j=json.load(sys.stdin); print([p["units"] for p in j["pools"] if p["name"]=="decode"][0])')
echo "| run | goodput tok/s | SLO attainment | availability prefill / decode | retried | corrupted | shed by limiter | wall |"
echo "|---|---|---|---|---|---|---|---|"
rows=("${rows[@]//DOUBLE/$((decode_count * 2))}")
table_rows "$scenario" "${MYRIAD_TABLE_DIR:-results/failures_table}" "$(cat <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); f = j["failures"]; a = f["availability"]
print(f"| {sys.argv[2]} | {j['throughput']['goodput_tokens_per_s']/1e6:.3f}M | {100*j['requests']['slo_attainment']:.2f}% "
      f"| {100*a['prefill']:.3f}% / {100*a['decode']:.3f}% | {f['retried_requests']} | {j['requests'].get('corrupted', 0)} "
      f"| {f['recompute_limiter']['shed']} | {float(sys.argv[3]):.0f} s |")
PY
)" "$@"
