#!/usr/bin/env bash
# bench/loadgen over a unix-domain socket (bench/run.sh's TRANSPORT=unix): a real boardd on the
# FS store in a temp dir, listening only on a socket file (--listen unix:PATH), and half a
# second of the claim cycle through loadgen -U in both client modes (the event loop, -e 1:
# run.sh's default, and a blocking thread per worker, -e 0). Checks that every step of every
# cycle answered as the cycle expects (loadgen counts a non-2xx or a claim that was not fresh
# as an error), that the run says it went over a unix socket, that loadgen's /metrics scrape
# went over it too (the group-commit note), that the server journaled the writes, that the log
# carries none of libmicrohttpd's TCP-option complaints, and that -U with -C (TLS) is refused. Figures are not asserted.
#   tests/bench/loadgen_unix_smoke.sh BUILD/server/boardd BUILD/bench/loadgen SOURCE_ROOT
set -euo pipefail
boardd=${1:?usage: loadgen_unix_smoke.sh BOARDD LOADGEN SOURCE_ROOT}
loadgen=${2:?usage: loadgen_unix_smoke.sh BOARDD LOADGEN SOURCE_ROOT}
root=${3:?usage: loadgen_unix_smoke.sh BOARDD LOADGEN SOURCE_ROOT}
source "$root/bench/lib.sh" # stop_pid, bench_tokens, bench_result

tmp=$(mktemp -d "${TMPDIR:-/tmp}/loadgen-unix.XXXXXX")
pid=
trap 'stop_pid "$pid"; rm -rf "$tmp"' EXIT

fail() {
	echo "loadgen_unix_smoke: $*" >&2
	[ -f "$tmp/boardd.log" ] && tail -20 "$tmp/boardd.log" >&2
	exit 1
}

bench_tokens "$boardd" "$tmp"
sock=$tmp/boardd.sock
"$boardd" --store "fs:$tmp/data" --tokens "$tmp/tokens.json" --listen "unix:$sock" \
	2>"$tmp/boardd.log" &
pid=$!
for _ in $(seq 200); do
	[ -S "$sock" ] && break
	kill -0 "$pid" 2>/dev/null || fail "boardd exited"
	sleep 0.05
done
[ -S "$sock" ] || fail "no socket at $sock after 10 s"

for loops in 1 0; do
	rc=0
	BENCH_SERVER_PID=$pid "$loadgen" -U "$sock" -T "$tmp/plain" -w 4 -d 0.5 -W 0.1 \
		-P "smoke$loops" -e "$loops" >"$tmp/out" || rc=$?
	cat "$tmp/out"
	[ "$rc" = 0 ] || fail "loadgen -U -e $loops exited $rc"
	[ "$(bench_result "$tmp/out" transport)" = unix ] ||
		fail "-e $loops: transport $(bench_result "$tmp/out" transport), not unix"
	grep -q "^transport: unix (unix socket $sock)" "$tmp/out" || fail "-e $loops: no transport line"
	[ "$(bench_result "$tmp/out" client_loops)" = "$loops" ] || fail "-e $loops: ran on other loops"
	[ "$(bench_result "$tmp/out" errors)" = 0 ] && [ "$(bench_result "$tmp/out" failed_cycles)" = 0 ] ||
		fail "-e $loops: errors over the unix socket"
	[ "$(bench_result "$tmp/out" cycles)" -gt 0 ] || fail "-e $loops: no cycle"
	# GET /metrics over the socket at both ends of the window: the FS store's group commit.
	grep -q '^group commit (server.s /metrics over the window): .* journal lines per fdatasync' \
		"$tmp/out" || fail "-e $loops: no group-commit note (the /metrics scrape over -U failed)"
	[ "$(bench_result "$tmp/out" server_cpu_us_per_op)" -gt 0 ] || fail "-e $loops: no server CPU"
done

# libmicrohttpd's complaints about TCP options a unix socket lacks (after every answer) are
# not the log's business.
! grep -q 'libmicrohttpd: \(Setting\|Failed to push\)' "$tmp/boardd.log" ||
	fail "libmicrohttpd's TCP-option messages reached the log: $(grep -m1 libmicrohttpd "$tmp/boardd.log")"

# TLS over a unix socket is refused, clearly, before any connection.
rc=0
"$loadgen" -U "$sock" -C "$tmp/tokens.json" -T "$tmp/plain" -w 1 -d 0.5 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q 'TLS over a unix socket is not supported' "$tmp/err" ||
	fail "-U with -C: rc $rc, $(cat "$tmp/err")"
echo "loadgen_unix_smoke: ok"
