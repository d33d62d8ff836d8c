#!/bin/bash
# The claim-cycle benchmark: boardd (FS store) against etcd and PostgreSQL, same machine, same
# runner, same concurrency, alternating runs, and the SAME TRANSPORT on all three sides: a
# unix-domain socket in the temp dir (boardd --listen unix:PATH, etcd --listen-client-urls
# unix://NAME:PORT, PostgreSQL's socket directory), or TCP on 127.0.0.1 (boardd, etcd and
# PostgreSQL each on a free port; PostgreSQL then has no socket file at all). Everything stops
# by itself; the temp dir goes on exit.
#
#   bench/run.sh                      # 32 workers, TCP, 2 rounds of 20 s per target
#   TRANSPORT=both bench/run.sh       # each target over a unix socket and over TCP, back to back
#   WORKERS=64 DURATION=10 ROUNDS=3 bench/run.sh
#
# The three servers start on each transport asked (with both: six servers, side by side). Each
# round runs the three drivers one after the other (loadgen, etcd_cycle, pg_cycle), the order
# rotated by one each round so no target always runs first, each driver on every transport in
# turn (that order reversed each round); each round prints its tables and, per transport, the
# ratios boardd/PostgreSQL and boardd/etcd. The end prints, per transport, the means and their
# ratios (never a ratio across transports), and with both transports each side's unix/TCP
# figures.
#
# Environment:
#   TRANSPORT (tcp)  unix, tcp or both (each target on both, the order reversed each round);
#                    see bench/README.md "Transport" for why tcp is the default
#   WORKERS (32)  DURATION seconds per run (20)  WARMUP seconds (2)  ROUNDS (2) per transport
#   RENEWS           renewals per cycle (3; 0 shows what the durable renew costs boardd)
#   TARGETS          which drivers of "boardd etcd pg ceiling ceiling-mhd" to run (default
#                    "boardd etcd pg"; boardd the server always starts). ceiling: bench/ceiling,
#                    the least server loadgen accepts, durable group commit on its own epoll
#                    loops; ceiling-mhd: the same on libmicrohttpd with boardd's suspend/resume
#                    (bench/README.md, "The ceiling (stop 23)"); loadgen drives both, and the
#                    means and ratios are printed for them as for boardd
#   BOARDD_THREADS   --threads for boardd (unset: boardd's default, one per core)
#   CLIENT_LOOPS (1) the client architecture, the same on all three sides: each driver's
#                    32 workers as coroutines on this many event-loop threads (bench/green.c;
#                    pg_cycle with libpq's asynchronous calls); 0: the old clients, one
#                    blocking thread per worker (PQexecPrepared for pg). The header and each
#                    table say which mode each side ran in
#   ETCD_FLAGS       extra etcd_cycle flags, e.g. -g (a lease per claim); given after -e, so
#                    an -e here overrides CLIENT_LOOPS for etcd alone
#   BENCH_TMP        parent of the temp dir (default ${TMPDIR:-/tmp}); put it on a real
#                    disk: the servers fsync there, and tmpfs would make fsync free (keep it
#                    short: the sockets live there, and a unix socket path has 107 bytes)
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
TRANSPORT=${TRANSPORT:-tcp}
case $TRANSPORT in
unix | tcp) transports=$TRANSPORT ;;
both) transports="unix tcp" ;;
*) echo "run.sh: TRANSPORT is unix, tcp or both, not '$TRANSPORT'" >&2; exit 2 ;;
esac

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
	$({ want ceiling || want ceiling-mhd; } && echo bench/ceiling) >/dev/null
boardd=$BUILD/server/boardd
loadgen=$BUILD/bench/loadgen
etcd_cycle=$BUILD/bench/etcd_cycle
pg_cycle=$BUILD/bench/pg_cycle
ceiling=$BUILD/bench/ceiling

tmp=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/boardd-bench.XXXXXX")
if [ ${#tmp} -gt 80 ]; then # sun_path: 108 bytes with the NUL, and the names below
	echo "run.sh: temp dir $tmp too long for a unix socket path (set BENCH_TMP)" >&2
	rm -rf "$tmp"
	exit 2
fi
chmod 711 "$tmp" # PostgreSQL's user traverses it to its data dirs (bench/pg.sh)
# Per transport (unix, tcp): the servers' pids, the drivers' address options, the PG cluster.
declare -A boardd_pid=() etcd_pid=() boardd_to=() etcd_to=() pg_data=() pg_pid=() pg_host=() pg_port=()
# bench/ceiling, keyed "TARGET/TRANSPORT" (ceiling, ceiling-mhd)
declare -A ceil_pid=() ceil_to=()

cleanup() {
	local tr
	for tr in "${!boardd_pid[@]}"; do stop_pid "${boardd_pid[$tr]}"; done
	for tr in "${!etcd_pid[@]}"; do stop_pid "${etcd_pid[$tr]}"; done
	for tr in "${!ceil_pid[@]}"; do stop_pid "${ceil_pid[$tr]}"; done
	for tr in "${!pg_data[@]}"; do pg_cluster_stop "${pg_data[$tr]}"; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Other people compile on this machine: wait (bounded) for a quiet moment.
source "$here/quiet.sh"
quiet_wait "${QUIET_LOAD:-1.5}" "${QUIET_WAIT:-300}"

echo "== claim-cycle benchmark: $WORKERS workers, $ROUNDS round(s) x ${DURATION} s per target" \
	"($TARGETS), transport: ${transports// / and } =="
echo "host: $(nproc) cores, $(uname -r); data dir on $(df -T "$tmp" | awk 'NR==2{print $2}')"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "boardd: FS store, group commit, threads ${BOARDD_THREADS:-default (one per core)}"
want etcd && echo "etcd: $("$ETCD" --version | head -1), default fsync"
if [ "$CLIENT_LOOPS" = 0 ]; then client_mode="one blocking thread per worker (CLIENT_LOOPS=0)"
else client_mode="the workers on $CLIENT_LOOPS event-loop thread(s) (CLIENT_LOOPS=$CLIENT_LOOPS)"; fi
for t in $TARGETS; do
	case $t in
	boardd) echo "client of boardd: loadgen, $client_mode" ;;
	ceiling | ceiling-mhd) echo "client of $t: loadgen, $client_mode" ;;
	etcd) echo "client of etcd: etcd_cycle, $client_mode${ETCD_FLAGS:+, then ETCD_FLAGS \"$ETCD_FLAGS\" (an -e there wins)}" ;;
	pg) echo "client of pg: pg_cycle, $client_mode$([ "$CLIENT_LOOPS" != 0 ] &&
		echo ", libpq's asynchronous calls")" ;;
	esac
done
bench_tokens "$boardd" "$tmp"

# wait_sock PATH SECONDS [NAME]: until a unix socket listens at PATH (ss when present, which
# shows the name the server bound, NAME when that was relative; else the socket file alone).
wait_sock() {
	local i
	for i in $(seq $(($2 * 20))); do
		if [ -S "$1" ] && { ! command -v ss >/dev/null || ss -Hxl | grep -qF " ${3:-$1} "; }
		then
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# ---- the three servers on one transport, in $tmp/TRANSPORT: start_servers unix|tcp ----
start_servers() {
	local tr=$1 d=$tmp/$1 listen sock curl ep eport bport
	mkdir -p "$d"
	chmod 711 "$d"
	# boardd on the FS store, with the tokens file made above
	if [ "$tr" = unix ]; then
		sock=$d/boardd.sock
		listen=unix:$sock
		boardd_to[$tr]="-U $sock"
	else
		bport=$(pick_port)
		listen=127.0.0.1:$bport
		boardd_to[$tr]="-p $bport"
	fi
	"$boardd" --store "fs:$d/boardd" --tokens "$tmp/tokens.json" --listen "$listen" \
		${BOARDD_THREADS:+--threads "$BOARDD_THREADS"} 2>"$d/boardd.log" &
	boardd_pid[$tr]=$!
	if ! if [ "$tr" = unix ]; then wait_sock "$sock" 10; else wait_port "$bport" 10; fi; then
		echo "run.sh: boardd did not start on $listen:" >&2
		cat "$d/boardd.log" >&2
		[ "$tr" = unix ] && echo "run.sh: (--listen unix:PATH needs a boardd built with it)" >&2
		exit 1
	fi
	echo "$tr: boardd --listen $listen"
	# etcd, single member, its data dir beside boardd's. Over a unix socket etcd wants a URL
	# of the form unix://HOST:PORT and makes the socket file "HOST:PORT" in its working
	# directory; its v3 JSON gateway dials the gRPC server through that same listener, so
	# both hops are on the transport measured. The peer URL (one member: no peer traffic)
	# stays on TCP.
	if want etcd; then
		eport=$(pick_port)
		if [ "$tr" = unix ]; then
			sock=$d/etcd.sock:0
			curl=unix://etcd.sock:0
			etcd_to[$tr]="-U $sock"
		else
			curl=http://127.0.0.1:$eport
			etcd_to[$tr]="-p $eport"
		fi
		ep=http://127.0.0.1:$((eport + 1))
		(cd "$d" && exec "$ETCD" --name bench --data-dir "$d/etcd" \
			--listen-client-urls "$curl" --advertise-client-urls "$curl" \
			--listen-peer-urls "$ep" --initial-advertise-peer-urls "$ep" \
			--initial-cluster "bench=$ep" 2>"$d/etcd.log") &
		etcd_pid[$tr]=$!
		if ! if [ "$tr" = unix ]; then wait_sock "$sock" 20 etcd.sock:0; else wait_port "$eport" 20; fi
		then
			echo "run.sh: etcd did not start on $curl:" >&2
			tail "$d/etcd.log" >&2
			exit 1
		fi
		sleep 1 # leader election of the single member
		echo "$tr: etcd --listen-client-urls $curl$([ "$tr" = unix ] && echo " (socket $sock)")"
	fi
	# bench/ceiling: its own epoll loops (ceiling) or libmicrohttpd (ceiling-mhd, -m), its
	# journal beside boardd's, one thread per core as boardd's default
	local t
	for t in ceiling ceiling-mhd; do
		want "$t" || continue
		mkdir -p "$d/$t"
		if [ "$tr" = unix ]; then
			sock=$d/$t.sock
			listen=unix:$sock
			ceil_to[$t/$tr]="-U $sock"
		else
			bport=$(pick_port)
			listen=127.0.0.1:$bport
			ceil_to[$t/$tr]="-p $bport"
		fi
		"$ceiling" -l "$listen" -D "$d/$t" $([ "$t" = ceiling-mhd ] && echo -m) \
			${BOARDD_THREADS:+-t "$BOARDD_THREADS"} 2>"$d/$t.log" &
		ceil_pid[$t/$tr]=$!
		if ! if [ "$tr" = unix ]; then wait_sock "$sock" 10; else wait_port "$bport" 10; fi; then
			echo "run.sh: $t did not start on $listen:" >&2
			cat "$d/$t.log" >&2
			exit 1
		fi
		echo "$tr: $(head -1 "$d/$t.log")"
	done
	# PostgreSQL: a private cluster, durable defaults, on this transport alone (bench/pg.sh)
	if want pg; then
		pg_cluster_start "$d" $((WORKERS + 20)) "$tr"
		pg_data[$tr]=$PG_DATA pg_pid[$tr]=$PG_PID pg_host[$tr]=$PG_HOST pg_port[$tr]=$PG_PORT
		echo "$tr: PostgreSQL $PG_VERSION: fsync=$(pg_setting fsync)," \
			"synchronous_commit=$(pg_setting synchronous_commit)," \
			"wal_sync_method=$(pg_setting wal_sync_method)," \
			"listen_addresses='$(pg_setting listen_addresses)'," \
			"unix_socket_directories='$(pg_setting unix_socket_directories)' (libpq host $PG_HOST)"
	fi
}

common=(-w "$WORKERS" -d "$DURATION" -W "$WARMUP" -r "$RENEWS" -e "$CLIENT_LOOPS")
run_target() { # target round transport: one driver's run, its table on stdout, its RESULT kept
	local to
	case $1 in
	boardd)
		read -ra to <<<"${boardd_to[$3]}"
		BENCH_SERVER_PID=${boardd_pid[$3]} "$loadgen" "${to[@]}" -T "$tmp/plain" -P "r$2" \
			"${common[@]}" ;;
	etcd)
		read -ra to <<<"${etcd_to[$3]}"
		# shellcheck disable=SC2086
		BENCH_SERVER_PID=${etcd_pid[$3]} "$etcd_cycle" "${to[@]}" -P "r$2" "${common[@]}" \
			$ETCD_FLAGS ;;
	pg)
		BENCH_SERVER_PID=${pg_pid[$3]} "$pg_cycle" -H "${pg_host[$3]}" -p "${pg_port[$3]}" \
			-P "r$2" "${common[@]}" ;;
	ceiling | ceiling-mhd)
		read -ra to <<<"${ceil_to[$1/$3]}"
		BENCH_TARGET=$1 BENCH_SERVER_PID=${ceil_pid[$1/$3]} "$loadgen" "${to[@]}" \
			-T "$tmp/plain" -P "r$2" "${common[@]}" ;;
	esac | tee "$tmp/out"
	# The driver's RESULT says its transport; a side that ran on another one than asked
	# would make the ratios meaningless.
	if grep -q '^RESULT ' "$tmp/out" && ! grep -q "^RESULT .* transport=$3\b" "$tmp/out"; then
		echo "run.sh: $1 did not run over $3" >&2
		exit 1
	fi
	grep '^RESULT ' "$tmp/out" | sed "s/^RESULT /RESULT round=$2 /" >>"$tmp/results" || true
}

# The awk helpers over RESULT lines: val(key) reads a key=value field.
awk_val='function val(k,   i, kv) {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] }
	return ""
}'

# Every transport's servers run side by side (the idle ones cost next to nothing: their CPU
# is in "other processes"), so each round measures both transports in the same minutes: each
# target on one transport then at once on the other (the transports' order reversed each
# round), the targets' order rotated by one each round.
for tr in $transports; do start_servers "$tr"; done
read -ra order <<<"$TARGETS"
read -ra trs <<<"$transports"
for r in $(seq "$ROUNDS"); do
	echo
	echo "---- round $r/$ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg)) ----"
	for i in "${!order[@]}"; do
		for j in "${!trs[@]}"; do
			if ((r % 2)); then tr=${trs[j]}; else tr=${trs[${#trs[@]} - 1 - j]}; fi
			run_target "${order[(i + r - 1) % ${#order[@]}]}" "$r" "$tr"
		done
	done
	# this round's ratios, between sides on the same transport only
	for tr in $transports; do
		awk -v r="$r" -v tr="$tr" "$awk_val"'
		val("round") == r && val("transport") == tr {
			t = val("target"); c[t] = val("cycles_per_s"); p[t] = val("p99_op_ms")
			s[t] = val("steal_pct")
		}
		END {
			line = ""
			split("pg etcd", os, " ")
			split("boardd ceiling ceiling-mhd", hs, " ")
			for (h = 1; h <= 3; h++)
			for (i = 1; i <= 2; i++) {
				o = os[i]; b = hs[h]
				if (!((b in c) && (o in c)) || c[o] <= 0 || p[o] <= 0) continue
				line = line sprintf("  %s/%s: cycles/s %.2fx, p99 per op %.2fx;", b, o,
						    c[b] / c[o], p[b] / p[o])
			}
			if (line != "") printf "round %d ratios, %s on every side:%s (steal %% boardd %s, etcd %s, pg %s)\n",
				r, tr, line, s["boardd"], s["etcd"], s["pg"]
		}' "$tmp/results"
	done
done

echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
# ---- summary: means over the rounds, per transport ----
for tr in $transports; do
grep '^RESULT' "$tmp/results" | awk -v rounds="$ROUNDS" -v workers="$WORKERS" -v tr="$tr" "$awk_val"'
val("transport") == tr {
	t = val("target"); n[t]++
	cps[t] += val("cycles_per_s"); ops[t] += val("ops_per_s")
	p99[t] += val("p99_op_ms"); p99c[t] += val("p99_cycle_ms"); p50[t] += val("p50_op_ms")
	err[t] += val("errors"); fail[t] += val("failed_cycles"); oth[t] += val("others_cpu_pct")
	scpu[t] += val("server_cpu_us_per_op"); stl[t] += val("steal_pct")
	ccpu[t] += val("client_cpu_us_per_op"); loops[t] = val("client_loops")
	rc[t, val("round")] = val("cycles_per_s")
}
# boardd against ceiling-mhd (issue 28: within 5 %): the ratio of the means, and the ratio in
# each round (the two ran minutes apart at most) with their median: a round alone moves by
# more than 5 % on this machine.
function ceiling_ratio(   r, k, m, v, line, i, j, x) {
	if (!n["boardd"] || !n["ceiling-mhd"] || cps["ceiling-mhd"] <= 0) return
	m = 0
	for (r = 1; r <= rounds; r++)
		if ((("boardd", r) in rc) && (("ceiling-mhd", r) in rc) && rc["ceiling-mhd", r] > 0)
			v[++m] = rc["boardd", r] / rc["ceiling-mhd", r]
	line = ""
	for (i = 1; i <= m; i++) line = line sprintf(" %.3f", v[i])
	for (i = 2; i <= m; i++)
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
	k = (cps["boardd"] / n["boardd"]) / (cps["ceiling-mhd"] / n["ceiling-mhd"])
	printf "ratio boardd/ceiling-mhd (%s): cycles/s %.3fx of the means (target >= 0.95x: %s); " \
	       "per round%s, median %.3fx\n", tr, k, (k >= 0.95 ? "met" : "MISSED"), line,
	       (m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2)
}
function ratio(b, o, target,   rc, rp, rq) {
	if (!n[b] || !n[o] || cps[o] <= 0 || p99[o] <= 0 || p99c[o] <= 0) return
	rc = (cps[b] / n[b]) / (cps[o] / n[o])
	rp = (p99[b] / n[b]) / (p99[o] / n[o])
	rq = (p99c[b] / n[b]) / (p99c[o] / n[o])
	printf "ratio %s/%s (%s): cycles/s %.2fx (target >= %dx: %s), p99 per op %.2fx, " \
	       "p99 per cycle %.2fx (target < 1x: %s)\n", b, o, tr, rc, target,
	       (rc >= target ? "met" : "MISSED"), rp, rq, ((rp < 1 && rq < 1) ? "met" : "MISSED")
}
END {
	printf "\n== summary, transport %s (every side on it): %d workers, mean of %d round(s) ==\n",
	       tr, workers, rounds
	printf "%-11s %10s %10s %10s %10s %12s %8s %10s %13s %8s %13s %7s\n", "target",
	       "cycles/s", "ops/s", "p50 op ms", "p99 op ms", "p99 cycle ms", "errors",
	       "us cpu/op", "others cpu %", "steal %", "client us/op", "client"
	split("boardd ceiling ceiling-mhd pg etcd", ts, " ")
	for (i = 1; i <= 5; i++) {
		t = ts[i]; if (!n[t]) continue
		printf "%-11s %10.1f %10.1f %10.3f %10.3f %12.3f %8d %10.0f %13.0f %8.0f %13.0f %7s\n",
		       t, cps[t] / n[t], ops[t] / n[t], p50[t] / n[t], p99[t] / n[t],
		       p99c[t] / n[t], err[t] + fail[t], scpu[t] / n[t], oth[t] / n[t],
		       stl[t] / n[t], ccpu[t] / n[t],
		       (loops[t] == "" ? "?" : loops[t] == 0 ? "threads" : "loop x" loops[t])
	}
	split("boardd ceiling ceiling-mhd", hs, " ")
	for (h = 1; h <= 3; h++) {
		ratio(hs[h], "pg", 3)
		ratio(hs[h], "etcd", 8)
	}
	ceiling_ratio()
}'
done
# Each side against itself on the other transport, in the same rounds: what the transport
# costs it. "machine us/op": the server's, the driver's and the interrupts' CPU per request
# (the interrupts are the whole machine's, the disk's completions included).
if [ "$TRANSPORT" = both ]; then
	grep '^RESULT' "$tmp/results" | awk "$awk_val"'
	{
		k = val("target") SUBSEP val("transport"); n[k]++
		cps[k] += val("cycles_per_s"); scpu[k] += val("server_cpu_us_per_op")
		ccpu[k] += val("client_cpu_us_per_op"); irq[k] += val("irq_us_per_op")
	}
	function us(k) { return (scpu[k] + ccpu[k] + irq[k]) / n[k] }
	END {
		printf "\n== each side, unix socket vs TCP (means; a side against itself, never across sides) ==\n"
		printf "%-11s %10s %10s %8s %20s %20s %20s %20s\n", "target", "cycles/s", "cycles/s",
		       "unix/tcp", "server us/op", "client us/op", "irq us/op", "machine us/op"
		printf "%-11s %10s %10s %8s %20s %20s %20s %20s\n", "", "unix", "tcp", "", "unix / tcp",
		       "unix / tcp", "unix / tcp", "unix / tcp"
		split("boardd ceiling ceiling-mhd pg etcd", ts, " ")
		for (i = 1; i <= 5; i++) {
			t = ts[i]; u = t SUBSEP "unix"; c = t SUBSEP "tcp"
			if (!n[u] || !n[c] || cps[c] <= 0) continue
			printf "%-11s %10.1f %10.1f %7.2fx %9.0f / %-8.0f %9.0f / %-8.0f %9.0f / %-8.0f %9.0f / %-8.0f\n",
			       t, cps[u] / n[u], cps[c] / n[c], (cps[u] / n[u]) / (cps[c] / n[c]),
			       scpu[u] / n[u], scpu[c] / n[c], ccpu[u] / n[u], ccpu[c] / n[c],
			       irq[u] / n[u], irq[c] / n[c], us(u), us(c)
		}
	}'
fi
printf '(us cpu/op: the server CPU per answered request (pg: every postgres process, backends, WAL writer, checkpointer...); others cpu %%: user+system CPU of other processes during the windows (interrupts not counted), in %% of one core; steal %%: CPU time the hypervisor gave to other guests, in %% of one core; client us/op: the CPU of the driver itself per request; client: its workers on event-loop threads (loop xN) or a blocking thread each (threads). The load average also counts the benchmark threads waiting on fsync.)\n'
