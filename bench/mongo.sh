#!/bin/bash
# The claim cycle on the Mongo twin: boardd --store mongodb://... on each test server
# (mongo-java-server in memory, FerretDB 1.24 on SQLite: tests/tools/), driven by loadgen.
# Prints, per round and as means: cycles/s, boardd's CPU per request, the database server's
# CPU per request, and boardd's round trips to it per request. Everything stays on 127.0.0.1
# and stops by itself; asserts nothing.
#
#   bench/mongo.sh                          # both servers, 32 workers, 2 rounds x 15 s each
#   SERVERS=mjs ROUNDS=3 bench/mongo.sh     # mongo-java-server only
#   PERF=1 bench/mongo.sh                   # and perf record -g boardd in each server's round 1
#   BASELINE=/other/build/server/boardd bench/mongo.sh   # before/after: each round runs that
#                                           # boardd, then this one, on the same server
#   SERVERS="mjs mjs-delay" bench/mongo.sh  # mongo-java-server, then the same behind a proxy
#                                           # that answers DELAY_MS later (delayproxy.py)
#
# Environment:
#   SERVERS ("mjs ferretdb"; also mjs-delay)  DELAY_MS (4: mjs-delay's added latency per answer)
#   WORKERS (32)  DURATION seconds per round (15)  WARMUP (2)
#   ROUNDS (2)  RENEWS (3)  BOARDD_THREADS (unset: boardd's default, one per core)
#   PERF (unset)     1: perf record -g (DWARF unwinding) of boardd over PERF_S seconds (8) of
#                    round 1 on each server, then the flat profile and boardd's own functions
#   PERF_KEEP        a directory to keep the perf.data files in (perf report -i them later)
#   BUILD            build dir (default build-bench, configured --buildtype=release)
#   BASELINE         another boardd binary, measured alternately with BUILD's ("base" rows)
#   QUIET_LOAD (1.5) QUIET_WAIT seconds (300): see quiet.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
source "$here/lib.sh"
source "$here/quiet.sh"
SERVERS=${SERVERS:-mjs ferretdb}
WORKERS=${WORKERS:-32}
DURATION=${DURATION:-15}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-2}
RENEWS=${RENEWS:-3}
PERF=${PERF:-}
PERF_S=${PERF_S:-8}
BUILD=${BUILD:-$top/build-bench}

if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$top" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd bench/loadgen >/dev/null
loadgen=$BUILD/bench/loadgen
builds="this=$BUILD/server/boardd"
[ -n "${BASELINE:-}" ] && builds="base=$BASELINE $builds"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/boardd-mongo-bench.XXXXXX")
boardd_pid=
proxy_pid=
db_dir=
db_tool=

cleanup() {
	stop_pid "$boardd_pid"
	stop_pid "$proxy_pid"
	[ -n "$db_dir" ] && "$db_tool" stop "$db_dir" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_tokens "$BUILD/server/boardd" "$tmp"
quiet_wait "${QUIET_LOAD:-1.5}" "${QUIET_WAIT:-300}"
echo "== the claim cycle on the Mongo twin: $WORKERS workers, $ROUNDS round(s) x ${DURATION} s" \
	"per server =="
echo "host: $(nproc) cores, $(uname -r); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"

profile() { # perf.data: the flat profile, then boardd's functions with their callees
	# (each pipeline ends in head: perf's SIGPIPE is not a failure of the script)
	echo
	echo "-- perf: boardd over ${PERF_S} s of this round, flat (self) --"
	{ perf report -i "$1" --no-children --sort dso,sym -g none 2>/dev/null | grep -v '^#' |
		grep -v '^$' | head -30; } || true
	echo "-- perf: by shared object --"
	{ perf report -i "$1" --no-children --sort dso -g none 2>/dev/null | grep -v '^#' |
		grep -v '^$' | head -12; } || true
	echo "-- perf: boardd's own functions and the driver's entry points, with callees --"
	{ perf report -i "$1" --children --sort sym -g none 2>/dev/null |
		grep -E '\] (mgo_|api_h_|api_card|store_|log_|mongoc_(collection|cursor_next|cluster_run|client_pool)|bson_(new|copy|init))' |
		head -45; } || true
	[ -z "${PERF_KEEP:-}" ] || cp "$1" "$PERF_KEEP/"
}

for server in $SERVERS; do
	case $server in
	mjs) db_tool=$top/tests/tools/mongo-java-server.sh name="mongo-java-server 1.47.0 (in memory)" ;;
	mjs-delay) db_tool=$top/tests/tools/mongo-java-server.sh
		name="mongo-java-server 1.47.0 (in memory) answering ${DELAY_MS:-4} ms later" ;;
	ferretdb) db_tool=$top/tests/tools/ferretdb.sh name="FerretDB 1.24.2 (SQLite)" ;;
	*) echo "mongo.sh: unknown server $server (mjs, mjs-delay, ferretdb)" >&2; exit 2 ;;
	esac
	db_dir=$tmp/$server
	port=$(pick_port)
	"$db_tool" start "$db_dir" "$port" >/dev/null
	db_pid=$(cat "$db_dir/pid")
	if [ "$server" = mjs-delay ]; then
		# boardd talks to the proxy; the database's CPU is still the server's own
		server_port=$port
		port=$(pick_port)
		python3 "$here/delayproxy.py" "$port" "$server_port" \
			"$(awk -v ms="${DELAY_MS:-4}" 'BEGIN { print ms / 1000 }')" &
		proxy_pid=$!
		wait_port "$port" 10
	fi
	echo
	echo "==== $name on 127.0.0.1:$port; boardd threads ${BOARDD_THREADS:-default (one per core)} ===="
	for r in $(seq "$ROUNDS"); do
		for b in $builds; do
			label=${b%%=*}
			boardd=${b#*=}
			bport=$(pick_port)
			"$boardd" --store "mongodb://127.0.0.1:$port/bench_$label" \
				--tokens "$tmp/tokens.json" --listen "127.0.0.1:$bport" \
				${BOARDD_THREADS:+--threads "$BOARDD_THREADS"} 2>"$tmp/boardd-$server.log" &
			boardd_pid=$!
			wait_port "$bport" 30 || {
				echo "mongo.sh: boardd did not start:" >&2
				tail "$tmp/boardd-$server.log" >&2
				exit 1
			}
			echo
			echo "---- $server, boardd $label ($boardd), round $r/$ROUNDS" \
				"(load $(cut -d' ' -f1 /proc/loadavg)) ----"
			perf_pid=
			if [ -n "$PERF" ] && [ "$r" = 1 ]; then
				# from the start of the window, for PERF_S seconds
				(sleep "$((WARMUP + 1))"
				 exec perf record -q -F 499 -g --call-graph dwarf,16384 \
					-o "$tmp/perf-$server-$label.data" -p "$boardd_pid" -- sleep "$PERF_S") \
					>/dev/null 2>&1 &
				perf_pid=$!
			fi
			BENCH_SERVER_PID=$boardd_pid BENCH_BACKEND_PID=$db_pid "$loadgen" -p "$bport" \
				-T "$tmp/plain" -P "$server-r$r" -w "$WORKERS" -d "$DURATION" -W "$WARMUP" \
				-r "$RENEWS" | tee "$tmp/round.out" | grep -Ev '^(RESULT|cycle:)'
			rt=$(sed -n 's/^mongo round trips .*: [0-9]*, \([0-9.]*\)\/s$/\1/p' "$tmp/round.out")
			sed -n "s/^RESULT /RESULT server=$server-$label round_trips_per_s=${rt:-0} /p" \
				"$tmp/round.out" >>"$tmp/results"
			if [ -n "$perf_pid" ]; then
				wait "$perf_pid" || true
				profile "$tmp/perf-$server-$label.data"
			fi
			stop_pid "$boardd_pid"
			boardd_pid=
		done
	done
	stop_pid "$proxy_pid"
	proxy_pid=
	"$db_tool" stop "$db_dir" >/dev/null 2>&1 || true
	db_dir=
done

echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v workers="$WORKERS" '
function val(k,   i, kv) {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] }
	return 0
}
{
	s = val("server"); if (!(s in n)) order[++ns] = s; n[s]++
	cps[s] += val("cycles_per_s"); ops[s] += val("ops_per_s"); p99[s] += val("p99_op_ms")
	cpu[s] += val("server_cpu_us_per_op"); db[s] += val("backend_cpu_us_per_op")
	rt[s] += val("round_trips_per_s"); err[s] += val("errors") + val("failed_cycles")
	stl[s] += val("steal_pct"); oth[s] += val("others_cpu_pct")
}
END {
	printf "\n== summary: %d workers, means over the rounds ==\n", workers
	printf "%-14s %9s %9s %10s %14s %14s %16s %7s %8s %8s\n", "server", "cycles/s", "ops/s",
	       "p99 op ms", "boardd us/req", "db us/req", "round trips/req", "errors", "steal %",
	       "others %"
	for (i = 1; i <= ns; i++) {
		s = order[i]
		printf "%-14s %9.1f %9.1f %10.1f %14.0f %14.0f %16.2f %7d %8.0f %8.0f\n", s,
		       cps[s] / n[s], ops[s] / n[s], p99[s] / n[s], cpu[s] / n[s], db[s] / n[s],
		       (ops[s] > 0 ? rt[s] / ops[s] : 0), err[s], stl[s] / n[s], oth[s] / n[s]
	}
	printf "(us/req: CPU (user + system) of the process over the window per answered request; " \
	       "round trips: boardd_mongo_round_trips_total over the window, per request; " \
	       "others %%: CPU of every other process, in %% of one core)\n"
}' "$tmp/results"
