#!/usr/bin/env bash
# What DESIGN §17's column limit costs (issue 27): the drain (bench/drain: claim-next ->
# fenced done+release, W workers, N ready cards) on a board without a limit and on the same
# board with `limit` on its ready column, alternated ROUNDS times on fresh FS stores, same
# binary, same run. LIMIT defaults to the number of workers: every claim is counted and
# checked, and the bound never has to refuse one (the cost of the bookkeeping alone); a
# LIMIT below the workers shows the bound working (throughput then follows the limit, not the
# cost). Prints drain's figures per round and the mean ratio; asserts nothing.
#
#   bench/policy.sh                      # 10 000 jobs, 32 workers, limit 32, 3 rounds
#   LIMIT=8 ROUNDS=2 bench/policy.sh     # a binding limit
#   BUILD=build bench/policy.sh          # another build directory (default build-bench)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build-bench}
JOBS=${JOBS:-10000}
WORKERS=${WORKERS:-32}
ROUNDS=${ROUNDS:-3}
LIMIT=${LIMIT:-$WORKERS}
source "$root/bench/lib.sh" # boardd_log_port, bench_tokens

if [ ! -d "$BUILD" ]; then
  meson setup "$BUILD" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd bench/drain >/dev/null

tmp=$(mktemp -d /tmp/boardd-policy.XXXXXX)
boardd_pid=""
cleanup() {
  [ -n "$boardd_pid" ] && kill "$boardd_pid" 2>/dev/null && wait "$boardd_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

bench_tokens "$BUILD/server/boardd" "$tmp"
"$BUILD/server/boardd" token add --tokens "$tmp/tokens.json" --name bench-op --role operator \
  >"$tmp/op.tok" 2>/dev/null
export BENCH_WORKER_TOKEN=$(tail -1 "$tmp/worker.tok") BENCH_BOT_TOKEN=$(tail -1 "$tmp/bot.tok")
op=$(tail -1 "$tmp/op.tok")

start_boardd() { # fresh store in $tmp/fs-$1
  "$BUILD/server/boardd" --listen 127.0.0.1:0 --store "fs:$tmp/fs-$1" --tokens "$tmp/tokens.json" \
    2>"$tmp/boardd-$1.log" &
  boardd_pid=$!
  port=$(boardd_log_port "$tmp/boardd-$1.log") && return 0
  echo "policy.sh: boardd did not start" >&2
  cat "$tmp/boardd-$1.log" >&2
  exit 1
}
stop_boardd() {
  kill "$boardd_pid"
  wait "$boardd_pid" 2>/dev/null || true
  boardd_pid=""
}

# Board "job": the default board's columns; with a limit on ready when $1 > 0.
put_board() {
  local limit=$1 ready='{"name":"ready","terminal":false,"eligible":true}'
  [ "$limit" -gt 0 ] && ready="{\"name\":\"ready\",\"terminal\":false,\"eligible\":true,\"limit\":$limit}"
  curl -sf -o /dev/null -X PUT -H "Authorization: Bearer $op" -H 'Content-Type: application/json' \
    "http://127.0.0.1:$port/v1/boards/job" -d "{\"name\":\"job\",\"columns\":[
      {\"name\":\"inbox\",\"terminal\":false,\"eligible\":false}, $ready,
      {\"name\":\"waiting_deps\",\"terminal\":false,\"eligible\":false},
      {\"name\":\"in_progress\",\"terminal\":false,\"eligible\":true},
      {\"name\":\"done\",\"terminal\":true,\"eligible\":false},
      {\"name\":\"blocked\",\"terminal\":true,\"eligible\":false}],
      \"running\":\"in_progress\",\"completed\":\"done\",\"failed\":\"blocked\",
      \"waiting\":\"waiting_deps\"}"
}

echo "policy.sh: $JOBS jobs, $WORKERS workers, limit $LIMIT on ready, $ROUNDS rounds;" \
  "$(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); commit $(git -C "$root" rev-parse --short HEAD)"
declare -a none limited
for r in $(seq "$ROUNDS"); do
  # Alternate which side runs first, so neither always gets the quieter minute.
  for side in $( [ $((r % 2)) -eq 1 ] && echo "none limit" || echo "limit none"); do
    start_boardd "$r-$side"
    put_board "$([ "$side" = limit ] && echo "$LIMIT" || echo 0)"
    out=$(BENCH_SERVER_PID=$boardd_pid "$BUILD/bench/drain" boardd -p "$port" -n "$JOBS" \
      -w "$WORKERS" -B job 2>&1) || true
    stop_boardd
    echo "== round $r, $side"
    echo "$out" | sed 's/^/   /'
    jps=$(echo "$out" | sed -n 's/.* \([0-9.]*\) jobs\/s.*/\1/p' | head -1)
    if [ "$side" = limit ]; then limited+=("${jps:-0}"); else none+=("${jps:-0}"); fi
  done
done
awk -v a="${none[*]}" -v b="${limited[*]}" 'BEGIN {
  n = split(a, x, " "); split(b, y, " ")
  for (i = 1; i <= n; i++) { sx += x[i]; sy += y[i] }
  if (n && sx > 0)
    printf "mean jobs/s: no limit %.0f, limit %.0f: the limit costs %+.1f %%\n",
      sx / n, sy / n, 100 * (sx - sy) / sx
}'
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
