#!/bin/bash
# Server CPU per request of two (or more) boardd binaries, side by side: each runs on its own
# FS store in a temp dir with its own loadgen (the claim cycle, 32 workers), all in the SAME
# window, so they share whatever else the machine does (a busy machine moves both alike; one
# after the other, the figure follows the minute more than the code). Everything stays on
# 127.0.0.1 and stops by itself.
#
#   bench/cpu_ab.sh OLD/server/boardd NEW/server/boardd
#   ROUNDS=5 DURATION=10 bench/cpu_ab.sh A B C
#
# Environment: ROUNDS (3), DURATION seconds per window (8), WORKERS per server (32),
# LOADGEN (build-bench/bench/loadgen), LOADGENS (one loadgen per server, space-separated, in
# the order of the servers: to compare clients too), LOADGEN_ARGS (more loadgen options, e.g.
# "-G 1": a read per cycle), BENCH_TMP parent of the temp dirs (TMPDIR, /tmp).
# Prints one line per server and round (cycles/s, p99 per request and per cycle, server CPU per
# request) and the means.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
source "$here/lib.sh" # boardd_log_port, bench_tokens
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
WORKERS=${WORKERS:-32}
LOADGEN=${LOADGEN:-$top/build-bench/bench/loadgen}
[ $# -ge 1 ] || { echo "usage: bench/cpu_ab.sh BOARDD [BOARDD...]" >&2; exit 2; }
read -ra loadgens <<<"${LOADGENS:-}"
for i in $(seq $#); do
	[ -n "${loadgens[$((i - 1))]:-}" ] || loadgens[$((i - 1))]=$LOADGEN
	[ -x "${loadgens[$((i - 1))]}" ] ||
		{ echo "cpu_ab.sh: no ${loadgens[$((i - 1))]} (ninja -C build-bench)" >&2; exit 2; }
done

tmp=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/boardd-cpu-ab.XXXXXX")
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== cpu_ab: $# server(s) side by side, $ROUNDS round(s) x ${DURATION} s, $WORKERS workers each =="
for r in $(seq "$ROUNDS"); do
	pids=()
	ports=()
	for i in $(seq $#); do
		bin=${!i}
		d=$tmp/r$r-s$i
		mkdir -p "$d"
		bench_tokens "$bin" "$d"
		"$bin" --store "fs:$d/data" --tokens "$d/tokens.json" --listen 127.0.0.1:0 \
			2>"$d/boardd.log" &
		pids+=($!)
		port=$(boardd_log_port "$d/boardd.log") ||
			{ echo "cpu_ab.sh: $bin did not start:" >&2; cat "$d/boardd.log" >&2; exit 1; }
		ports+=("$port")
	done
	load=$(cut -d' ' -f1 /proc/loadavg)
	lg=()
	for i in $(seq $#); do
		d=$tmp/r$r-s$i
		BENCH_SERVER_PID=${pids[$((i - 1))]} "${loadgens[$((i - 1))]}" -p "${ports[$((i - 1))]}" -T "$d/plain" \
			-w "$WORKERS" -d "$DURATION" -W 2 -P "r$r" ${LOADGEN_ARGS:-} >"$d/out" 2>&1 &
		lg+=($!)
	done
	for p in "${lg[@]}"; do wait "$p" || true; done
	for i in $(seq $#); do
		d=$tmp/r$r-s$i
		printf '%s round %d load %s: %s\n' "${!i}${LOADGENS:+ (${loadgens[$((i - 1))]})}" "$r" "$load" \
			"$(grep '^RESULT' "$d/out" | grep -o 'cycles_per_s=[0-9.]*\|p99_op_ms=[0-9.]*\|p99_cycle_ms=[0-9.]*\|server_cpu_us_per_op=[0-9]*\|client_cpu_us_per_op=[0-9]*\|errors=[0-9]*\|steal_pct=[0-9]*' | tr '\n' ' ')" |
			tee -a "$tmp/results"
	done
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
done
echo "== means =="
awk '{ name = substr($0, 1, index($0, " round ") - 1); for (i = 2; i <= NF; i++) { split($i, kv, "=");
	if (kv[1] == "server_cpu_us_per_op") { cpu[name] += kv[2]; n[name]++ }
	if (kv[1] == "client_cpu_us_per_op") { ccpu[name] += kv[2]; cn[name]++ }
	if (kv[1] == "p99_op_ms") p99[name] += kv[2]
	if (kv[1] == "p99_cycle_ms") p99c[name] += kv[2]
	if (kv[1] == "cycles_per_s") cps[name] += kv[2] } ; if (!(name in seen)) { seen[name] = 1; order[++k] = name } }
     END { for (j = 1; j <= k; j++) { s = order[j]
	printf "%s: %.1f us server CPU per request, %.1f us client CPU per request, %.1f cycles/s, p99 %.3f ms per request, %.3f ms per cycle (%d rounds)\n",
		s, cpu[s] / n[s], cn[s] ? ccpu[s] / cn[s] : -1, cps[s] / n[s], p99[s] / n[s], p99c[s] / n[s], n[s] } }' \
	"$tmp/results"
