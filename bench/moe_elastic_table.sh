#!/usr/bin/env bash
# The elastic EP table of docs/moe.md: one decode GPU (and its node) lost in a `moe:` pool,
# with elastic EP off, on (surviving copies), on with re-placement (incremental, then a fresh
# EPLB), and on over DeepSeek's EPLB.
#   bench/moe_elastic_table.sh [scenario] [extra --set flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-scenarios/moe_elastic.yaml}
shift || true
source bench/table_rows.sh
rows=(
  "no fault (elastic EP's placement)|--set faults.scripted.0.at=1h"
  "no fault, DeepSeek's EPLB|--set faults.scripted.0.at=1h --set faults.elastic_ep.enabled=false"
  "elastic EP off|--set faults.elastic_ep.enabled=false"
  "on: the surviving copies carry the lost ones' load|"
  "on, re-placed incrementally|--set faults.elastic_ep.rebalance=true"
  "on, re-placed by a fresh EPLB|--set faults.elastic_ep.rebalance=true --set faults.elastic_ep.rebalance_mode=full"
  "on, DeepSeek's EPLB (min_copies 1)|--set faults.elastic_ep.min_copies=1"
)
echo "| run | unit serving again | whole again | degraded expert imbalance | decode availability | TPOT p50 / p99 | TTFT p99 | SLO attainment | goodput tok/s | retried |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
table_rows "$scenario" "${MYRIAD_TABLE_DIR:-results/moe_elastic_table}" "$(cat <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = r["failures"]
if not f["events"] or f["events"][0]["at_s"] > r["scenario"]["end_s"]:
    e = {"recovered_s": float("nan")}
else:
    e = f["events"][0]
back = e.get("resumed_degraded_s", e["recovered_s"])
hot = e.get("degraded_expert_imbalance")
moved = e.get("re_placement_gigabytes")
hot_s = "-" if hot is None else f"{hot:.3f}" + (f" (after {moved:.0f} GB, {e['re_placement_pause_s']:.2f} s)" if moved is not None else "")
t, q = r["latency_s"]["tpot"], r["latency_s"]["ttft"]
sec = lambda x: "-" if x != x else f"{x:.1f} s"
print(f"| {sys.argv[2]} | {sec(back)} | {sec(e['recovered_s'])} | {hot_s} | {f['availability']['decode']:.4%} | "
      f"{t['p50']*1e3:.1f} / {t['p99']*1e3:.1f} ms | {q['p99']:.2f} s | {r['requests']['slo_attainment']:.2%} | "
      f"{r['throughput']['goodput_tokens_per_s'] / 1e3:.1f} k | {f['retried_requests']:,} |")
PY
)" "$@"
