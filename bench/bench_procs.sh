# Sourced by the benchmark scripts that start servers: a temporary directory for their logs and
# configs, background processes bounded in time and stopped on exit, and waiting for a port.
# The caller sets BENCH_NAME (for messages) and LIFETIME (each process's bound, for timeout(1))
# before sourcing; it gets $tmp and the functions below.
tmp="$(mktemp -d "/tmp/${BENCH_NAME}.XXXXXX")"
pids=()
stop_all() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# wait_port PORT [SECONDS]: until something listens on 127.0.0.1:PORT (default 10 s), else exit 1
# with the logs' tails.
wait_port() {
  local i tries=$(( ${2:-10} * 10 ))
  for i in $(seq 1 "$tries"); do
    if ! port_free "$1"; then return 0; fi
    sleep 0.1
  done
  echo "$BENCH_NAME: nothing listens on 127.0.0.1:$1 after ${2:-10} s; logs in $tmp:" >&2
  tail -n 5 "$tmp"/*.log >&2 || true
  exit 1
}
# start NAME CMD...: runs CMD in the background, bounded by LIFETIME, logging to $tmp/NAME.log.
start() {
  local name="$1"
  shift
  timeout -s TERM "$LIFETIME" "$@" >"$tmp/$name.log" 2>&1 &
  pids+=("$!")
}
