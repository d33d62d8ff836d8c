#!/bin/bash
# The claim-cycle benchmark: boardd (FS store) against etcd and PostgreSQL, same machine, same
# runner, same concurrency, alternating runs. Everything stays on 127.0.0.1 (PostgreSQL on a
# unix socket in the temp dir) and stops by itself; the temp dir goes on exit.
#
#   bench/run.sh                      # 32 workers, 2 rounds of 20 s per target
#   WORKERS=64 DURATION=10 ROUNDS=3 bench/run.sh
#
# Each round runs the three drivers one after the other (loadgen, etcd_cycle, pg_cycle), the
# order rotated by one each round so no target always runs first; each round prints its
# three tables and the ratios boardd/PostgreSQL and boardd/etcd; the end prints the means.
#
# Environment:
#   WORKERS (32)  DURATION seconds per run (20)  WARMUP seconds (2)  ROUNDS (2)
#   RENEWS           renewals per cycle (3; 0 shows what the durable renew costs boardd)
#   TARGETS          which drivers of "boardd etcd pg" to run (default all three; boardd the
#                    server always starts)
#   BOARDD_THREADS   --threads for boardd (unset: boardd's default, one per core)
#   CLIENT_LOOPS (1) the client architecture, the same on all three sides: each driver's
#                    32 workers as coroutines on this many event-loop threads (bench/green.c;
#                    pg_cycle with libpq's asynchronous calls); 0: the old clients, one
#                    blocking thread per worker (PQexecPrepared for pg). The header and each
#                    table say which mode each side ran in
#   ETCD_FLAGS       extra etcd_cycle flags, e.g. -g (a lease per claim); given after -e, so
#                    an -e here overrides CLIENT_LOOPS for etcd alone
#   BENCH_TMP        parent of the temp dir (default ${TMPDIR:-/tmp}); put it on a real
#                    disk: the servers fsync there, and tmpfs would make fsync free
#   ETCD             etcd binary (default: etcd from PATH, Debian's etcd-server)
#   PGBIN            PostgreSQL's binaries (default: the newest /usr/lib/postgresql/*/bin)
#   BUILD            build dir (default build-bench, configured --buildtype=release)
#   QUIET_LOAD (1.5) QUIET_WAIT seconds (300): before measuring, wait (bounded) until the
#                    1-minute load average is below QUIET_LOAD; the load is printed either way
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
source "$here/lib.sh"
WORKERS=${WORKERS:-32}
DURATION=${DURATION:-20}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-2}
RENEWS=${RENEWS:-3}
ETCD_FLAGS=${ETCD_FLAGS:-}
BUILD=${BUILD:-$top/build-bench}
ETCD=${ETCD:-$(command -v etcd || true)}
TARGETS=${TARGETS:-boardd etcd pg}
CLIENT_LOOPS=${CLIENT_LOOPS:-1}
[[ $CLIENT_LOOPS =~ ^[0-9]+$ ]] || { echo "run.sh: CLIENT_LOOPS is a number (0: a thread per worker)" >&2; exit 2; }

want() { [[ " $TARGETS " == *" $1 "* ]]; }

source "$here/pg.sh" # the private PostgreSQL cluster (shared with drain.sh)
if want etcd && { [ -z "$ETCD" ] || [ ! -x "$ETCD" ]; }; then
	echo "run.sh: no etcd binary (Debian: apt-get install etcd-server)" >&2
	exit 2
fi
if want pg && { [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ]; }; then
	echo "run.sh: no PostgreSQL binaries (Debian: apt-get install postgresql)" >&2
	exit 2
fi

# ---- build (release) ----
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$top" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd bench/loadgen bench/etcd_cycle $(want pg && echo bench/pg_cycle) \
	>/dev/null
boardd=$BUILD/server/boardd
loadgen=$BUILD/bench/loadgen
etcd_cycle=$BUILD/bench/etcd_cycle
pg_cycle=$BUILD/bench/pg_cycle

tmp=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/boardd-bench.XXXXXX")
boardd_pid=
etcd_pid=

cleanup() {
	stop_pid "$boardd_pid"
	stop_pid "$etcd_pid"
	pg_cluster_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Other people compile on this machine: wait (bounded) for a quiet moment.
source "$here/quiet.sh"
quiet_wait "${QUIET_LOAD:-1.5}" "${QUIET_WAIT:-300}"

echo "== claim-cycle benchmark: $WORKERS workers, $ROUNDS round(s) x ${DURATION} s per target" \
	"($TARGETS) =="
echo "host: $(nproc) cores, $(uname -r); data dir on $(df -T "$tmp" | awk 'NR==2{print $2}')"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "boardd: FS store, group commit, threads ${BOARDD_THREADS:-default (one per core)}"
want etcd && echo "etcd: $("$ETCD" --version | head -1), default fsync"
if [ "$CLIENT_LOOPS" = 0 ]; then client_mode="one blocking thread per worker (CLIENT_LOOPS=0)"
else client_mode="the workers on $CLIENT_LOOPS event-loop thread(s) (CLIENT_LOOPS=$CLIENT_LOOPS)"; fi
for t in $TARGETS; do
	case $t in
	boardd) echo "client of boardd: loadgen, $client_mode" ;;
	etcd) echo "client of etcd: etcd_cycle, $client_mode${ETCD_FLAGS:+, then ETCD_FLAGS \"$ETCD_FLAGS\" (an -e there wins)}" ;;
	pg) echo "client of pg: pg_cycle, $client_mode$([ "$CLIENT_LOOPS" != 0 ] &&
		echo ", libpq's asynchronous calls")" ;;
	esac
done

# ---- boardd on the FS store, with a tokens file of our own ----
bench_tokens "$boardd" "$tmp"
bport=$(pick_port)
"$boardd" --store "fs:$tmp/boardd" --tokens "$tmp/tokens.json" --listen "127.0.0.1:$bport" \
	${BOARDD_THREADS:+--threads "$BOARDD_THREADS"} 2>"$tmp/boardd.log" &
boardd_pid=$!
wait_port "$bport" 10 || { echo "run.sh: boardd did not start:" >&2; cat "$tmp/boardd.log" >&2; exit 1; }

# ---- etcd, single member, its data dir beside boardd's ----
start_etcd() {
	eport=$(pick_port)
	"$ETCD" --name bench --data-dir "$tmp/etcd" \
		--listen-client-urls "http://127.0.0.1:$eport" --advertise-client-urls "http://127.0.0.1:$eport" \
		--listen-peer-urls "http://127.0.0.1:$((eport + 1))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((eport + 1))" \
		--initial-cluster "bench=http://127.0.0.1:$((eport + 1))" 2>"$tmp/etcd.log" &
	etcd_pid=$!
	wait_port "$eport" 20 || { echo "run.sh: etcd did not start:" >&2; tail "$tmp/etcd.log" >&2; exit 1; }
	sleep 1 # leader election of the single member
}
want etcd && start_etcd

# ---- PostgreSQL: a private cluster, durable defaults, a unix socket (bench/pg.sh) ----
if want pg; then
	pg_cluster_start "$tmp" $((WORKERS + 20))
	echo "PostgreSQL $PG_VERSION: fsync=$(pg_setting fsync)," \
		"synchronous_commit=$(pg_setting synchronous_commit)," \
		"wal_sync_method=$(pg_setting wal_sync_method), private cluster on a unix socket"
fi

common=(-w "$WORKERS" -d "$DURATION" -W "$WARMUP" -r "$RENEWS" -e "$CLIENT_LOOPS")
run_target() { # target round: one driver's run, its table on stdout, its RESULT kept
	case $1 in
	boardd)
		BENCH_SERVER_PID=$boardd_pid "$loadgen" -p "$bport" -T "$tmp/plain" -P "r$2" \
			"${common[@]}" ;;
	etcd)
		# shellcheck disable=SC2086
		BENCH_SERVER_PID=$etcd_pid "$etcd_cycle" -p "$eport" -P "r$2" "${common[@]}" \
			$ETCD_FLAGS ;;
	pg)
		BENCH_SERVER_PID=$PG_PID "$pg_cycle" -H "$PG_SOCKDIR" -p "$PG_PORT" -P "r$2" \
			"${common[@]}" ;;
	esac | tee "$tmp/out"
	grep '^RESULT ' "$tmp/out" | sed "s/^RESULT /RESULT round=$2 /" >>"$tmp/results" || true
}

# The awk helpers over RESULT lines: val(key) reads a key=value field.
awk_val='function val(k,   i, kv) {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] }
	return ""
}'

read -ra order <<<"$TARGETS"
for r in $(seq "$ROUNDS"); do
	echo
	echo "---- round $r/$ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg)) ----"
	for i in "${!order[@]}"; do
		run_target "${order[(i + r - 1) % ${#order[@]}]}" "$r"
	done
	# this round's ratios
	awk -v r="$r" "$awk_val"'
	val("round") == r { t = val("target"); c[t] = val("cycles_per_s"); p[t] = val("p99_op_ms")
			    s[t] = val("steal_pct") }
	END {
		line = ""
		split("pg etcd", os, " ")
		for (i = 1; i <= 2; i++) {
			o = os[i]
			if (!(("boardd" in c) && (o in c)) || c[o] <= 0 || p[o] <= 0) continue
			line = line sprintf("  boardd/%s: cycles/s %.2fx, p99 per op %.2fx;", o,
					    c["boardd"] / c[o], p["boardd"] / p[o])
		}
		if (line != "") printf "round %d ratios:%s (steal %% boardd %s, etcd %s, pg %s)\n",
			r, line, s["boardd"], s["etcd"], s["pg"]
	}' "$tmp/results"
done

echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
# ---- summary: means over the rounds ----
grep '^RESULT' "$tmp/results" | awk -v rounds="$ROUNDS" -v workers="$WORKERS" "$awk_val"'
{
	t = val("target"); n[t]++
	cps[t] += val("cycles_per_s"); ops[t] += val("ops_per_s")
	p99[t] += val("p99_op_ms"); p99c[t] += val("p99_cycle_ms"); p50[t] += val("p50_op_ms")
	err[t] += val("errors"); fail[t] += val("failed_cycles"); oth[t] += val("others_cpu_pct")
	scpu[t] += val("server_cpu_us_per_op"); stl[t] += val("steal_pct")
	ccpu[t] += val("client_cpu_us_per_op"); loops[t] = val("client_loops")
}
function ratio(o, target,   rc, rp, rq) {
	if (!n["boardd"] || !n[o] || cps[o] <= 0 || p99[o] <= 0 || p99c[o] <= 0) return
	rc = (cps["boardd"] / n["boardd"]) / (cps[o] / n[o])
	rp = (p99["boardd"] / n["boardd"]) / (p99[o] / n[o])
	rq = (p99c["boardd"] / n["boardd"]) / (p99c[o] / n[o])
	printf "ratio boardd/%s: cycles/s %.2fx (target >= %dx: %s), p99 per op %.2fx, " \
	       "p99 per cycle %.2fx (target < 1x: %s)\n", o, rc, target,
	       (rc >= target ? "met" : "MISSED"), rp, rq, ((rp < 1 && rq < 1) ? "met" : "MISSED")
}
END {
	printf "\n== summary: %d workers, mean of %d round(s) ==\n", workers, rounds
	printf "%-8s %10s %10s %10s %10s %12s %8s %10s %13s %8s %13s %7s\n", "target",
	       "cycles/s", "ops/s", "p50 op ms", "p99 op ms", "p99 cycle ms", "errors",
	       "us cpu/op", "others cpu %", "steal %", "client us/op", "client"
	split("boardd pg etcd", ts, " ")
	for (i = 1; i <= 3; i++) {
		t = ts[i]; if (!n[t]) continue
		printf "%-8s %10.1f %10.1f %10.3f %10.3f %12.3f %8d %10.0f %13.0f %8.0f %13.0f %7s\n",
		       t, cps[t] / n[t], ops[t] / n[t], p50[t] / n[t], p99[t] / n[t],
		       p99c[t] / n[t], err[t] + fail[t], scpu[t] / n[t], oth[t] / n[t],
		       stl[t] / n[t], ccpu[t] / n[t],
		       (loops[t] == "" ? "?" : loops[t] == 0 ? "threads" : "loop x" loops[t])
	}
	ratio("pg", 3)
	ratio("etcd", 8)
	printf "(us cpu/op: the server CPU per answered request (pg: every postgres process, " \
	       "backends, WAL writer, checkpointer...); others cpu %%: user+system " \
	       "CPU of other processes during the windows (interrupts not counted), in %% of one " \
	       "core; steal %%: CPU time the hypervisor gave to other guests, in %% of one core; " \
	       "client us/op: the CPU of the driver itself per request; client: its workers on event-loop " \
	       "threads (loop xN) or a blocking thread each (threads). " \
	       "The load average also counts the benchmark threads waiting on fsync.)\n"
}'
