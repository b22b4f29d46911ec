#!/usr/bin/env bash
# The KV store master's failover under load: 1 etcd + 3 masters (`myriad kvstore master
# --etcd ...`) on loopback, a put load through leader-following clients (`myriad kvstore load`),
# and the leader killed with SIGKILL (a crash: its etcd lease is left to expire) KILL_AFTER
# seconds into the load. Prints the load's report: the longest time without an acknowledged put
# (the write outage) and the acknowledged objects the new leader does not know (lost), plus each
# master's /v1/ha state. REPEAT runs, each on a fresh etcd and fresh masters.
#
# Usage: bench/kvstore_failover.sh [path/to/myriad]
# Settings (environment): DURATION=15 KILL_AFTER=5 CLIENTS=4 LEASE_TTL=2 SYNC_STANDBYS=1
#   REPEAT=1 BASE_PORT=18700 ETCD=/usr/bin/etcd
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-build/release/myriad}")"
DURATION=${DURATION:-15}
KILL_AFTER=${KILL_AFTER:-5}
CLIENTS=${CLIENTS:-4}
LEASE_TTL=${LEASE_TTL:-2}
SYNC_STANDBYS=${SYNC_STANDBYS:-1}
REPEAT=${REPEAT:-1}
BASE_PORT=${BASE_PORT:-18700}
ETCD=${ETCD:-$(command -v etcd || echo /usr/bin/etcd)}
[ -x "$ETCD" ] || { echo "etcd not found (install etcd-server)" >&2; exit 2; }

work=$(mktemp -d /tmp/myriad_failover_XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

ha_state() { curl -s --max-time 1 "$1/v1/ha" || echo '{}'; }

for run in $(seq 1 "$REPEAT"); do
  pids=()
  # Each run on its own ports: a process of the previous run still closing cannot interfere.
  BASE=$((BASE_PORT + 20 * (run - 1)))
  etcd_port=$BASE
  peer_port=$((BASE + 1))
  rm -rf "$work/etcd"
  # Not under `timeout` either: its pid must be etcd's own, for the trap's kill.
  "$ETCD" --name default --data-dir "$work/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "default=http://127.0.0.1:$peer_port" --log-level error \
    --heartbeat-interval 20 --election-timeout 200 >"$work/etcd.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -s --max-time 1 -X POST "http://127.0.0.1:$etcd_port/v3/kv/range" -d '{"key":"cHJvYmU="}' \
      >/dev/null 2>&1 && break
    sleep 0.1
  done
  urls=()
  declare -A master_pid=()
  key="/myriad/bench/failover-$run-$$"
  for i in 1 2 3; do
    port=$((BASE + 10 + i))
    url="http://127.0.0.1:$port"
    # Not under `timeout`: the pid must be the master's own, for the kill -9 below (the trap
    # stops them).
    "$bin" kvstore master --listen "127.0.0.1:$port" --etcd "http://127.0.0.1:$etcd_port" \
      --election-key "$key" --advertise "$url" --lease-ttl "$LEASE_TTL" \
      --sync-standbys "$SYNC_STANDBYS" >"$work/master$i.log" 2>&1 &
    pids+=($!)
    master_pid[$url]=$!
    urls+=("$url")
  done
  # A leader within a few seconds.
  leader=""
  for _ in $(seq 100); do
    for u in "${urls[@]}"; do
      if ha_state "$u" | grep -q '"leading":true'; then leader=$u; fi
    done
    [ -n "$leader" ] && break
    sleep 0.1
  done
  [ -n "$leader" ] || { echo "no leader elected" >&2; cat "$work"/master*.log >&2; exit 1; }
  list=$(IFS=,; echo "${urls[*]}")
  "$bin" kvstore load --master "$list" --duration "$DURATION" --clients "$CLIENTS" >"$work/load.json" &
  load_pid=$!
  sleep "$KILL_AFTER"
  echo "run $run: killing leader $leader (pid ${master_pid[$leader]}) at ${KILL_AFTER}s of ${DURATION}s"
  killed_ns=$(date +%s%N)
  kill -9 "${master_pid[$leader]}"
  # The takeover: until a survivor says it leads (polled every 20 ms).
  takeover_ms=""
  for _ in $(seq 500); do
    for u in "${urls[@]}"; do
      [ "$u" = "$leader" ] && continue
      if ha_state "$u" | grep -q '"leading":true'; then
        takeover_ms=$(( ($(date +%s%N) - killed_ns) / 1000000 ))
        break
      fi
    done
    [ -n "$takeover_ms" ] && break
    sleep 0.02
  done
  echo "run $run: a standby leads ${takeover_ms:-(none within 10 s)} ms after the kill"
  set +e
  wait "$load_pid"
  rc=$?
  set -e
  cat "$work/load.json"
  for u in "${urls[@]}"; do
    [ "$u" = "$leader" ] && continue
    echo "$u: $(ha_state "$u")"
  done
  echo "run $run: load exit code $rc (0: nothing acknowledged was lost)"
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
done
