#!/usr/bin/env bash
# Renew many against single renews (DESIGN §18, issue 28): one fresh boardd (FS store, in a
# temp dir, loopback), bench/renew_many's A/B of K single renews against one POST
# /v1/claims/renew of K, by W workers. Prints the server CPU per claim renewed; asserts
# nothing.
#
#   bench/renew_many.sh                 # 4 workers x 32 claims, 500 rounds a phase (many: x10)
#   K=32 WORKERS=4 ROUNDS=500 bench/renew_many.sh
#   BUILD=build bench/renew_many.sh     # another build directory (default build-bench, release)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build-bench}
K=${K:-32}
WORKERS=${WORKERS:-4}
ROUNDS=${ROUNDS:-500}
MULT=${MULT:-10}
source "$root/bench/lib.sh" # boardd_log_port, bench_tokens, stop_pid

if [ ! -d "$BUILD" ]; then
  meson setup "$BUILD" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd bench/renew_many >/dev/null

tmp=$(mktemp -d /tmp/boardd-renew-many.XXXXXX)
boardd_pid=""
cleanup() {
  stop_pid "$boardd_pid"
  rm -rf "$tmp"
}
trap cleanup EXIT

bench_tokens "$BUILD/server/boardd" "$tmp"
export BENCH_WORKER_TOKEN=$(tail -1 "$tmp/worker.tok") BENCH_BOT_TOKEN=$(tail -1 "$tmp/bot.tok")
"$BUILD/server/boardd" --listen 127.0.0.1:0 --store "fs:$tmp/fs" --tokens "$tmp/tokens.json" \
  2>"$tmp/boardd.log" &
boardd_pid=$!
port=$(boardd_log_port "$tmp/boardd.log") || { cat "$tmp/boardd.log" >&2; exit 1; }
echo "renew_many.sh: $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); $(git -C "$root" rev-parse --short HEAD)"
BENCH_SERVER_PID=$boardd_pid "$BUILD/bench/renew_many" -p "$port" -k "$K" -w "$WORKERS" -r "$ROUNDS" -m "$MULT"
