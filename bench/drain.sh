#!/usr/bin/env bash
# The drain (DESIGN §12, issue 10): N ready cards drained by W workers, each job claim-next ->
# fenced done+release, on boardd (FS store) and the same on PostgreSQL 15 (a private cluster
# in a temp dir, durable defaults: fsync and synchronous_commit on; SELECT ... FOR UPDATE SKIP
# LOCKED LIMIT 1 -> UPDATE, W connections), alternated ROUNDS times, fresh data each round;
# boardd's batched drain beside them in each round (DESIGN §18: `drain -b BATCH`, claim-next
# count BATCH + one finish many per batch); then `boardctl work -- true` (its own overhead per
# job: run create, last-run, run finished, outcome+release, a process spawned). Prints
# figures; asserts nothing.
#
#   bench/drain.sh                     # 10 000 jobs, 32 workers, 2 rounds, 1 000 boardctl jobs
#   JOBS=10000 WORKERS=32 ROUNDS=3 BOARDCTL_JOBS=2000 bench/drain.sh
#   BATCH=100 BATCH_JOBS=100000 bench/drain.sh   # the batched drain's K and its jobs (0: none)
#   BUILD=build bench/drain.sh         # another build directory (default build-bench, release)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build-bench}
JOBS=${JOBS:-10000}
WORKERS=${WORKERS:-32}
ROUNDS=${ROUNDS:-2}
BOARDCTL_JOBS=${BOARDCTL_JOBS:-1000}
BATCH=${BATCH:-32}
BATCH_JOBS=${BATCH_JOBS:-$((JOBS * 4))} # a batched round drains in a quarter of a second
source "$root/bench/pg.sh" # the private cluster: pg_cluster_start, pg_cluster_stop, PGBIN
source "$root/bench/lib.sh" # boardd_log_port, bench_tokens

if [ ! -d "$BUILD" ]; then
  meson setup "$BUILD" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd cli/boardctl bench/drain >/dev/null

tmp=$(mktemp -d /tmp/boardd-drain.XXXXXX)
boardd_pid=""
cleanup() {
  [ -n "$boardd_pid" ] && kill "$boardd_pid" 2>/dev/null && wait "$boardd_pid" 2>/dev/null || true
  pg_cluster_stop
  rm -rf "$tmp"
}
trap cleanup EXIT

start_boardd() { # fresh store in $tmp/fs-$1
  "$BUILD/server/boardd" --listen 127.0.0.1:0 --store "fs:$tmp/fs-$1" --tokens "$tmp/tokens.json" \
    2>"$tmp/boardd-$1.log" &
  boardd_pid=$!
  port=$(boardd_log_port "$tmp/boardd-$1.log") && return 0
  echo "drain.sh: boardd did not start" >&2
  cat "$tmp/boardd-$1.log" >&2
  exit 1
}
stop_boardd() {
  kill "$boardd_pid"
  wait "$boardd_pid" 2>/dev/null || true
  boardd_pid=""
}

# tokens: one worker, one bot (boardd token add prints the plain token on its last line)
bench_tokens "$BUILD/server/boardd" "$tmp"
export BENCH_WORKER_TOKEN=$(tail -1 "$tmp/worker.tok") BENCH_BOT_TOKEN=$(tail -1 "$tmp/bot.tok")

# the PostgreSQL cluster
pg_cluster_start "$tmp" $((WORKERS + 20))
conninfo=$PG_CONNINFO
echo "drain.sh: $JOBS jobs, $WORKERS workers, $ROUNDS rounds; $(nproc) cores;" \
     "load $(cut -d' ' -f1-3 /proc/loadavg); PostgreSQL $PG_VERSION" \
     "(fsync=$(pg_setting fsync), synchronous_commit=$(pg_setting synchronous_commit))"

for r in $(seq "$ROUNDS"); do
  start_boardd "$r"
  BENCH_SERVER_PID=$boardd_pid "$BUILD/bench/drain" boardd -p "$port" -n "$JOBS" -w "$WORKERS" || true
  stop_boardd
  if [ "$BATCH" -gt 0 ]; then
    start_boardd "$r-b"
    BENCH_SERVER_PID=$boardd_pid "$BUILD/bench/drain" boardd -p "$port" -n "$BATCH_JOBS" \
      -w "$WORKERS" -b "$BATCH" || true
    stop_boardd
  fi
  "$BUILD/bench/drain" pg -c "$conninfo" -n "$JOBS" -w "$WORKERS" || true
done

# boardctl work with `true`: jobs/s of one process (concurrency 1, then 8)
start_boardd bc
for conc in 1 8; do
  "$BUILD/bench/drain" boardd -p "$port" -n "$BOARDCTL_JOBS" -w 8 -S
  t0=$(date +%s.%N)
  BOARDD_URL=http://127.0.0.1:$port BOARDD_TOKEN=$BENCH_WORKER_TOKEN \
    "$BUILD/cli/boardctl" work --board default --concurrency $conc --max-jobs "$BOARDCTL_JOBS" \
    -- true 2>"$tmp/boardctl.err" || true
  t1=$(date +%s.%N)
  ok=$(grep -c ': succeeded in ' "$tmp/boardctl.err" || true)
  awk -v n="$ok" -v a="$t0" -v b="$t1" -v c="$conc" -v want="$BOARDCTL_JOBS" \
    'BEGIN { printf "boardctl work --concurrency %d -- true: %d/%d jobs in %.2f s: %.0f jobs/s\n", c, n, want, b - a, n / (b - a) }'
done
stop_boardd
