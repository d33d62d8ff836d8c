# Sourced by the test servers' scripts (ferretdb.sh, mongo-java-server.sh): a background
# server's wait-until-listening and stop, once. Each caller has set -euo pipefail.

# daemon_wait NAME DIR LOG PATTERN: waits (30 s at most) until LOG has a line matching PATTERN
# while the process of DIR/pid lives; exits 1 saying why otherwise.
daemon_wait() {
  local name=$1 dir=$2 log=$3 pattern=$4
  for _ in $(seq 1 300); do
    if grep -q "$pattern" "$log" 2>/dev/null; then return 0; fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      echo "$name: the server exited at start:" >&2; tail -20 "$log" >&2; exit 1
    fi
    sleep 0.1
  done
  echo "$name: the server did not listen within 30 s" >&2; exit 1
}

# daemon_stop DIR: SIGTERM to the process of DIR/pid, waits (10 s at most) until it is gone.
daemon_stop() {
  local dir=$1 pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$dir/pid"
}
