#!/bin/bash
# Kernel crossings per request of boardd, bench/ceiling and bench/ceiling -m (libmicrohttpd),
# each alone in turn under bench/loadgen (the claim cycle, 32 workers), alternated:
# `perf stat -e task-clock,context-switches,raw_syscalls:sys_enter` on the server and on the
# client over the same PERF_S seconds inside each loadgen window, divided by the requests
# answered in them (loadgen's ops/s x PERF_S). bench/README.md, "The ceiling (stop 23)".
#
#   bench/ceiling_perf.sh                          # both transports, 2 rounds
#   TRANSPORT=unix ROUNDS=3 bench/ceiling_perf.sh
#
# Environment: TRANSPORT (both) unix|tcp|both; ROUNDS (2); WINDOW seconds per loadgen run (12);
# PERF_S seconds of perf stat inside it (8, starting 3 s in); TARGETS ("boardd ceiling
# ceiling-mhd"; also ceiling-mhd-A: libmicrohttpd accepting itself, ceiling -m -A); BUILD
# (build-bench, release); BENCH_TMP as run.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
source "$here/lib.sh"
TRANSPORT=${TRANSPORT:-both}
ROUNDS=${ROUNDS:-2}
WINDOW=${WINDOW:-12}
PERF_S=${PERF_S:-8}
TARGETS=${TARGETS:-boardd ceiling ceiling-mhd}
BUILD=${BUILD:-$top/build-bench}
case $TRANSPORT in
unix | tcp) transports=$TRANSPORT ;;
both) transports="unix tcp" ;;
*) echo "ceiling_perf.sh: TRANSPORT is unix, tcp or both" >&2; exit 2 ;;
esac
command -v perf >/dev/null || { echo "ceiling_perf.sh: no perf" >&2; exit 2; }
[ "$WINDOW" -ge $((PERF_S + 4)) ] || { echo "ceiling_perf.sh: WINDOW >= PERF_S + 4" >&2; exit 2; }

if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$top" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd bench/loadgen bench/ceiling >/dev/null
boardd=$BUILD/server/boardd
loadgen=$BUILD/bench/loadgen
ceiling=$BUILD/bench/ceiling

tmp=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/ceiling-perf.XXXXXX")
declare -A pid=() to=()
cleanup() {
	local k
	for k in "${!pid[@]}"; do stop_pid "${pid[$k]}"; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bench_tokens "$boardd" "$tmp"

for tr in $transports; do
	for t in $TARGETS; do
		d=$tmp/$t-$tr
		mkdir -p "$d"
		if [ "$tr" = unix ]; then
			listen=$d/s
			to[$t/$tr]="-U $listen"
		else
			port=$(pick_port)
			listen=127.0.0.1:$port
			to[$t/$tr]="-p $port"
		fi
		case $t in
		boardd)
			"$boardd" --store "fs:$d/data" --tokens "$tmp/tokens.json" \
				--listen "$([ "$tr" = unix ] && echo "unix:$listen" || echo "$listen")" \
				2>"$d/log" & ;;
		ceiling | ceiling-mhd | ceiling-mhd-A)
			flags=()
			[ "$t" = ceiling ] || flags+=(-m)
			[ "$t" = ceiling-mhd-A ] && flags+=(-A)
			"$ceiling" -l "$([ "$tr" = unix ] && echo "unix:$listen" || echo "$listen")" \
				-D "$d" "${flags[@]}" 2>"$d/log" & ;;
		*) echo "ceiling_perf.sh: unknown target $t" >&2; exit 2 ;;
		esac
		pid[$t/$tr]=$!
		for _ in $(seq 200); do
			if [ "$tr" = unix ]; then [ -S "$listen" ] && break
			else (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; fi
			sleep 0.05
		done
	done
done

# field VALUE-LINES EVENT: perf stat -x, prints "value,unit,event,..."
field() { awk -F, -v e="$2" '$3 == e { print $1 }' "$1"; }

echo "== kernel crossings per request: $TARGETS; ${WINDOW} s windows, perf stat over ${PERF_S} s of each =="
echo "host: $(nproc) cores, $(uname -r); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-12s %-5s %9s %8s %7s %7s | %10s %9s %8s | %10s %9s %8s\n' round target tr \
	cycles/s "steal%" others load "srv us" "syscalls" "ctxsw" "cli us" "syscalls" "ctxsw"
read -ra order <<<"$TARGETS"
for r in $(seq "$ROUNDS"); do
	for i in "${!order[@]}"; do
		t=${order[(i + r - 1) % ${#order[@]}]}
		for tr in $transports; do
			read -ra addr <<<"${to[$t/$tr]}"
			BENCH_TARGET=$t BENCH_SERVER_PID=${pid[$t/$tr]} "$loadgen" "${addr[@]}" \
				-T "$tmp/plain" -P "p$r" -d "$((WINDOW - 2))" -W 2 >"$tmp/out" &
			lg=$!
			sleep 3
			perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter \
				-p "${pid[$t/$tr]}" -o "$tmp/srv" -- sleep "$PERF_S" &
			ps1=$!
			perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter \
				-p "$lg" -o "$tmp/cli" -- sleep "$PERF_S" &
			ps2=$!
			wait "$ps1" "$ps2"
			wait "$lg"
			ops=$(bench_result "$tmp/out" ops_per_s)
			cps=$(bench_result "$tmp/out" cycles_per_s)
			steal=$(bench_result "$tmp/out" steal_pct)
			others=$(bench_result "$tmp/out" others_cpu_pct)
			errs=$(bench_result "$tmp/out" errors)
			awk -v r="$r" -v t="$t" -v tr="$tr" -v ops="$ops" -v s="$PERF_S" -v cps="$cps" \
				-v steal="$steal" -v oth="$others" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
				-v stc="$(field "$tmp/srv" task-clock)" -v scs="$(field "$tmp/srv" context-switches)" \
				-v ssc="$(field "$tmp/srv" raw_syscalls:sys_enter)" \
				-v ctc="$(field "$tmp/cli" task-clock)" -v ccs="$(field "$tmp/cli" context-switches)" \
				-v csc="$(field "$tmp/cli" raw_syscalls:sys_enter)" 'BEGIN {
				n = ops * s
				printf "%-5s %-12s %-5s %9.1f %8s %7s %7s | %10.1f %9.2f %8.2f | %10.1f %9.2f %8.2f\n",
				       r, t, tr, cps, steal, oth, load, stc * 1000 / n, ssc / n, scs / n,
				       ctc * 1000 / n, csc / n, ccs / n
			}'
			[ "${errs:-1}" = 0 ] || { echo "ceiling_perf.sh: $t $tr: errors" >&2; cat "$tmp/out" >&2; }
			echo "RESULT round=$r $(grep '^RESULT ' "$tmp/out" | cut -d' ' -f2-)" >>"$tmp/results"
		done
	done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(srv us / cli us: perf's task-clock of the server / of loadgen per request, in us; syscalls, ctxsw: per request; steal%, others: loadgen's CPU line for the window, in % of one core)"
