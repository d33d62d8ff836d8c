#!/usr/bin/env bash
# bench/ceiling (bench/README.md, "The ceiling (stop 23)") against bench/loadgen for half a
# second per mode and transport: its own epoll loops and libmicrohttpd (-m), over TCP and over
# a unix socket. Checks that loadgen accepted every answer of every cycle (a claim that was
# not fresh, a fence refused, any non-2xx is an error), that the run went over the transport
# asked, that the group commit's counters moved (GET /metrics), and that the journal file holds
# records (every write was written before its answer). A stale epoch is refused (409), a
# request without Authorization is 401. Figures are not asserted.
#   tests/bench/ceiling_smoke.sh BUILD/bench/ceiling BUILD/bench/loadgen SOURCE_ROOT
set -euo pipefail
ceiling=${1:?usage: ceiling_smoke.sh CEILING LOADGEN SOURCE_ROOT}
loadgen=${2:?usage: ceiling_smoke.sh CEILING LOADGEN SOURCE_ROOT}
root=${3:?usage: ceiling_smoke.sh CEILING LOADGEN SOURCE_ROOT}
source "$root/bench/lib.sh" # stop_pid, pick_port, wait_port, bench_result

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ceiling-smoke.XXXXXX")
pid=
trap 'stop_pid "$pid"; rm -rf "$tmp"' EXIT

fail() {
	echo "ceiling_smoke: $*" >&2
	[ -f "$tmp/ceiling.log" ] && tail -5 "$tmp/ceiling.log" >&2
	exit 1
}

for mode in loops mhd; do
	for tr in tcp unix; do
		d=$tmp/$mode-$tr
		mkdir -p "$d"
		if [ "$tr" = unix ]; then
			listen=unix:$d/s
			to=(-U "$d/s")
		else
			port=$(pick_port)
			listen=127.0.0.1:$port
			to=(-p "$port")
		fi
		"$ceiling" -l "$listen" -D "$d" -J 1 $([ "$mode" = mhd ] && echo -m) \
			2>"$tmp/ceiling.log" &
		pid=$!
		for _ in $(seq 200); do
			if [ "$tr" = unix ]; then [ -S "$d/s" ] && break
			else (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; fi
			kill -0 "$pid" 2>/dev/null || fail "$mode $tr: ceiling exited"
			sleep 0.05
		done
		rc=0
		BENCH_TARGET=ceiling BENCH_SERVER_PID=$pid BENCH_WORKER_TOKEN=w BENCH_BOT_TOKEN=b \
			"$loadgen" "${to[@]}" -w 4 -d 0.5 -W 0.1 -P "smoke" >"$tmp/out" || rc=$?
		cat "$tmp/out"
		[ "$rc" = 0 ] || fail "$mode $tr: loadgen exited $rc"
		[ "$(bench_result "$tmp/out" target)" = ceiling ] || fail "$mode $tr: target not named"
		[ "$(bench_result "$tmp/out" transport)" = "$tr" ] || fail "$mode $tr: ran over another transport"
		[ "$(bench_result "$tmp/out" errors)" = 0 ] && [ "$(bench_result "$tmp/out" failed_cycles)" = 0 ] ||
			fail "$mode $tr: loadgen counted errors"
		[ "$(bench_result "$tmp/out" cycles)" -gt 0 ] || fail "$mode $tr: no cycle"
		grep -q '^group commit (server.s /metrics over the window): .* journal lines per fdatasync' \
			"$tmp/out" || fail "$mode $tr: no group-commit counters"
		# The fences: an epoch the card never had is refused; no token is 401.
		if [ "$tr" = tcp ]; then
			code=$(curl -s -o /dev/null -w '%{http_code}' -X POST \
				-H 'Authorization: Bearer w' -d '{"marker":"smoke-w0","epoch":999}' \
				"http://127.0.0.1:$port/v1/cards/smoke-0/renew")
			[ "$code" = 409 ] || fail "$mode: a stale epoch got $code, not 409"
			code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' \
				"http://127.0.0.1:$port/v1/cards/smoke-0/claim")
			[ "$code" = 401 ] || fail "$mode: no token got $code, not 401"
		fi
		stop_pid "$pid"
		pid=
		# records were written over the zero-filled journal
		[ "$(tr -d '\0' <"$d/journal" | wc -c)" -gt 0 ] || fail "$mode $tr: empty journal"
	done
done
echo "ceiling_smoke: ok"
