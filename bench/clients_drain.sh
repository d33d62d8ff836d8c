#!/usr/bin/env bash
# The worker SDKs' drain (DESIGN §19, issue 29): JOBS no-op cards drained at concurrency
# WORKERS by the Python worker (clients/python, installed in a venv of its own) and by the Go
# worker (clients/go), beside bench/drain (the C driver: claim-next -> fenced done+release)
# in the same run, each on a fresh boardd (FS store), alternated ROUNDS times. An SDK job is
# five requests (claim-next, run create, last-run, run finished, done+release), the C driver's
# two; the SDK workers also renew every held claim each tick. Prints figures; asserts nothing.
#
#   bench/clients_drain.sh                      # 10 000 jobs, 32 workers, 1 round
#   JOBS=2000 WORKERS=8 ROUNDS=2 bench/clients_drain.sh
#   BUILD=build bench/clients_drain.sh          # another build directory (default build-bench)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build-bench}
JOBS=${JOBS:-10000}
WORKERS=${WORKERS:-32}
ROUNDS=${ROUNDS:-1}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
source "$root/bench/lib.sh" # boardd_log_port, bench_tokens

if [ ! -d "$BUILD" ]; then
  meson setup "$BUILD" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd bench/drain >/dev/null

tmp=$(mktemp -d /tmp/boardd-clients-drain.XXXXXX)
boardd_pid=""
cleanup() {
  [ -n "$boardd_pid" ] && kill "$boardd_pid" 2>/dev/null && wait "$boardd_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# the two SDK workers: the Python package installed as a user would, the Go check program
python3 -m venv "$tmp/venv" >/dev/null
"$tmp/venv/bin/python" -m pip install -q --no-index "$root/clients/python"
(cd "$root/tests/clients/gocheck" && GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0 \
  "$GO" build -o "$tmp/gocheck" .)

bench_tokens "$BUILD/server/boardd" "$tmp"
export BENCH_WORKER_TOKEN=$(tail -1 "$tmp/worker.tok") BENCH_BOT_TOKEN=$(tail -1 "$tmp/bot.tok")

start_boardd() { # fresh store in $tmp/fs-$1
  "$BUILD/server/boardd" --listen 127.0.0.1:0 --store "fs:$tmp/fs-$1" --tokens "$tmp/tokens.json" \
    2>"$tmp/boardd-$1.log" &
  boardd_pid=$!
  port=$(boardd_log_port "$tmp/boardd-$1.log") && return 0
  echo "clients_drain.sh: boardd did not start" >&2
  cat "$tmp/boardd-$1.log" >&2
  exit 1
}
server_ticks() { # utime+stime of boardd, in clock ticks
  awk '{ print $14 + $15 }' "/proc/$boardd_pid/stat"
}
stop_boardd() {
  kill "$boardd_pid"
  wait "$boardd_pid" 2>/dev/null || true
  boardd_pid=""
}

# sdk NAME ROUND CMD...: seed JOBS cards with the C driver (-S), drain them with CMD (one
# JSON stats line at the end), print and record jobs/s
sdk() {
  local name=$1 r=$2; shift 2
  start_boardd "$name-$r"
  "$BUILD/bench/drain" boardd -p "$port" -n "$JOBS" -w 8 -S >/dev/null
  local cpu0 cpu1
  cpu0=$(server_ticks)
  BOARDD_URL=http://127.0.0.1:$port BOARDD_TOKEN=$BENCH_WORKER_TOKEN SCEN=bench \
    CONC=$WORKERS MAXJOBS=$JOBS WAIT_MS=1000 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || true
  cpu1=$(server_ticks)
  stop_boardd
  python3 - "$tmp/$name.out" "$name" "$JOBS" "$WORKERS" "$((cpu1 - cpu0))" "$(getconf CLK_TCK)" <<'PY' | tee -a "$tmp/figures"
import json, sys
p, name, jobs, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
server_cpu = int(sys.argv[5]) / float(sys.argv[6])
s = {}
for line in open(p):
    try:
        s = json.loads(line)
    except ValueError:
        pass
if not s:
    print("%-6s no stats (see its stderr)" % name)
else:
    ok = s.get("succeeded", 0)
    print("%-6s jobs %d/%d workers %d  %.0f jobs/s  (%.2f s; lost %d, errors %d)  cpu per job:"
          " worker %.0f us, server %.0f us" % (
              name, ok, jobs, workers, ok / s["seconds"], s["seconds"], s.get("lost", 0),
              s.get("errors", 0), 1e6 * s.get("cpu", 0) / max(ok, 1), 1e6 * server_cpu / max(ok, 1)))
PY
}

echo "clients_drain.sh: $JOBS jobs, $WORKERS workers, $ROUNDS rounds; $(nproc) cores;" \
     "load $(cut -d' ' -f1-3 /proc/loadavg); $(python3 --version); $("$GO" version | cut -d' ' -f3)"
for r in $(seq "$ROUNDS"); do
  start_boardd "c-$r"
  "$BUILD/bench/drain" boardd -p "$port" -n "$JOBS" -w "$WORKERS" | head -1 | tee -a "$tmp/figures" || true
  stop_boardd
  sdk python "$r" "$tmp/venv/bin/python" "$root/tests/clients/check.py"
  sdk go "$r" "$tmp/gocheck"
done
