#!/usr/bin/env bash
# The controller's incident with the real thresholds (issue 21 item 7; the scaled version is
# the test ControlIncident.*): `myriad up --control` with its defaults (scrapes every 1 s, a
# crash after 2 failed scrapes, a hang after 30 s without progress while requests are in
# flight), under `myriad loadgen`; FAULT_AFTER seconds in, engine-0 crashes and engine-1 hangs
# (the emulator's fault API). Prints, for each, the time from the fault to its drain (detected)
# and to its readmit (back, restart and warmup gate included), from the controller's own log.
# Targets: crash <= 10 s, hang <= 45 s including the restart.
#
# Usage: bench/control_incident.sh [path/to/myriad]
# Settings (environment): ENGINES=3 SPEED=1 DURATION=60 FAULT_AFTER=5 CONCURRENCY=6
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-build/release/myriad}")"
ENGINES=${ENGINES:-3}
SPEED=${SPEED:-1}
DURATION=${DURATION:-60}
FAULT_AFTER=${FAULT_AFTER:-5}
CONCURRENCY=${CONCURRENCY:-6}

work=$(mktemp -d /tmp/myriad_incident_XXXXXX)
up_pid=""
cleanup() {
  [ -n "$up_pid" ] && kill "$up_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

"$bin" up --engines "$ENGINES" --port 0 --speed "$SPEED" --control >"$work/up.out" 2>&1 &
up_pid=$!
for _ in $(seq 1 100); do grep -q "controller on" "$work/up.out" && break; sleep 0.1; done
grep -q "controller on" "$work/up.out" || { cat "$work/up.out" >&2; exit 1; }
gateway=$(grep -o 'gateway on http://[0-9.:]*' "$work/up.out" | cut -d' ' -f3)
url() { grep -m1 -o "^  engine-$1 .*" "$work/up.out" | grep -m1 -o 'http://[0-9.:]*'; }

"$bin" loadgen --url "$gateway" --duration "${DURATION}s" -c "$CONCURRENCY" --max-tokens 64 --timeout 120s --json \
  >"$work/load.json" 2>&1 &
load_pid=$!
sleep "$FAULT_AFTER"
# The faults, and when each was sent on CLOCK_MONOTONIC (the controller's t_s).
read -r crashed_at hung_at < <(python3 - "$(url 0)" "$(url 1)" <<'PY'
import sys, time, urllib.request
def fault(url, kind):
    at = time.clock_gettime(time.CLOCK_MONOTONIC)
    try:
        urllib.request.urlopen(urllib.request.Request(url + "/admin/fault", data=('{"kind":"%s"}' % kind).encode()), timeout=1)
    except Exception:
        pass  # a crash cuts the connection before it answers
    return at
print(fault(sys.argv[1], "crash"), fault(sys.argv[2], "hang"))
PY
)
wait "$load_pid" || true

python3 - "$work/up.out" "$crashed_at" "$hung_at" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def first(target, action):
    return next((l for l in lines if l.get("target") == target and l.get("action") == action), None)
for name, target, at, limit in (("crash", "engine-0", float(sys.argv[2]), 10), ("hang", "engine-1", float(sys.argv[3]), 45)):
    drain, back = first(target, "drain"), first(target, "readmit")
    d = f"{drain['t_s'] - at:.2f} s ({drain['reason']})" if drain else "never"
    b = f"{back['t_s'] - at:.2f} s" if back else "never"
    print(f"{name:5}: detected {d}, back {b} (target <= {limit} s)")
PY
python3 -c 'import json,sys; t=open(sys.argv[1]).read(); r=json.loads(t[t.index("{"):]); print("loadgen:", json.dumps(r["requests"]))' "$work/load.json"
