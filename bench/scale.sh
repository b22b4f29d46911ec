#!/usr/bin/env bash
# Wall time and peak memory of the 10,240-GPU chat scenario (the default until 2026-12-02) at
# 1,280 to 20,480 GPUs (--scale 0.125 to 2: cluster, pools and load scaled together). Prints one
# row per size.
# Usage: bench/scale.sh [path/to/myriad] [scenario]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build/release/myriad}"
scenario="${2:-scenarios/chat_10k.yaml}"
printf "%8s %8s %10s %10s %12s %14s %10s\n" gpus scale requests wall_s Mevents/s krequests/s peak_MiB
for scale in 0.125 0.25 0.5 1 2; do
  out=$(mktemp)
  /usr/bin/time -f "%e %M" -o "$out.time" "$bin" sim "$scenario" --scale "$scale" --json --no-progress > "$out"
  read -r wall rss < "$out.time"
  python3 - "$out" "$scale" "$wall" "$rss" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
scale, wall, rss = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
ev = r["simulator"]["events"]; req = r["requests"]["arrived"]
print(f'{r["scenario"]["gpus"]:8d} {scale:8.3f} {req:10d} {wall:10.1f} {ev/wall/1e6:12.2f} {req/wall/1e3:14.0f} {rss/1024:10.0f}')
PY
  rm -f "$out" "$out.time"
done
