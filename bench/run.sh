#!/bin/bash
# The claim-cycle benchmark: boardd (FS store) against etcd, same machine, same client, same
# concurrency, alternating runs. Everything stays on 127.0.0.1 and stops by itself.
#
#   bench/run.sh                      # 32 workers, 2 rounds of 20 s per target
#   WORKERS=64 DURATION=10 ROUNDS=3 bench/run.sh
#
# Environment:
#   WORKERS (32)  DURATION seconds per run (20)  WARMUP seconds (2)  ROUNDS (2)
#   RENEWS           renewals per cycle (3; 0 shows what the durable renew costs boardd)
#   BOARDD_THREADS   --threads for boardd (unset: boardd's default, one per core)
#   ETCD_FLAGS       extra etcd_cycle flags, e.g. -g (a lease per claim)
#   BENCH_TMP        parent of the temp dir (default ${TMPDIR:-/tmp}); put it on a real
#                    disk: both servers fsync there, and tmpfs would make fsync free
#   ETCD             etcd binary (default: etcd from PATH, Debian's etcd-server)
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

if [ -z "$ETCD" ] || [ ! -x "$ETCD" ]; then
	echo "run.sh: no etcd binary (Debian: apt-get install etcd-server)" >&2
	exit 2
fi

# ---- build (release) ----
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$top" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd bench/loadgen bench/etcd_cycle >/dev/null
boardd=$BUILD/server/boardd
loadgen=$BUILD/bench/loadgen
etcd_cycle=$BUILD/bench/etcd_cycle

tmp=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/boardd-bench.XXXXXX")
boardd_pid=
etcd_pid=

cleanup() {
	stop_pid "$boardd_pid"
	stop_pid "$etcd_pid"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Other people compile on this machine: wait (bounded) for a quiet moment.
source "$here/quiet.sh"
quiet_wait "${QUIET_LOAD:-1.5}" "${QUIET_WAIT:-300}"

echo "== claim-cycle benchmark: $WORKERS workers, $ROUNDS round(s) x ${DURATION} s per target =="
echo "host: $(nproc) cores, $(uname -r); data dir on $(df -T "$tmp" | awk 'NR==2{print $2}')"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "etcd: $("$ETCD" --version | head -1), default fsync; boardd: FS store, group commit," \
	"threads ${BOARDD_THREADS:-default (one per core)}"

# ---- boardd on the FS store, with a tokens file of our own ----
bench_tokens "$boardd" "$tmp"
bport=$(pick_port)
"$boardd" --store "fs:$tmp/boardd" --tokens "$tmp/tokens.json" --listen "127.0.0.1:$bport" \
	${BOARDD_THREADS:+--threads "$BOARDD_THREADS"} 2>"$tmp/boardd.log" &
boardd_pid=$!
wait_port "$bport" 10 || { echo "run.sh: boardd did not start:" >&2; cat "$tmp/boardd.log" >&2; exit 1; }

# ---- etcd, single member, its data dir beside boardd's ----
eport=$(pick_port)
"$ETCD" --name bench --data-dir "$tmp/etcd" \
	--listen-client-urls "http://127.0.0.1:$eport" --advertise-client-urls "http://127.0.0.1:$eport" \
	--listen-peer-urls "http://127.0.0.1:$((eport + 1))" \
	--initial-advertise-peer-urls "http://127.0.0.1:$((eport + 1))" \
	--initial-cluster "bench=http://127.0.0.1:$((eport + 1))" 2>"$tmp/etcd.log" &
etcd_pid=$!
wait_port "$eport" 20 || { echo "run.sh: etcd did not start:" >&2; tail "$tmp/etcd.log" >&2; exit 1; }
sleep 1 # leader election of the single member

common=(-w "$WORKERS" -d "$DURATION" -W "$WARMUP" -r "$RENEWS")
for r in $(seq "$ROUNDS"); do
	echo
	echo "---- round $r/$ROUNDS (load $(cut -d' ' -f1 /proc/loadavg)) ----"
	BENCH_SERVER_PID=$boardd_pid "$loadgen" -p "$bport" -T "$tmp/plain" -P "r$r" \
		"${common[@]}" | tee -a "$tmp/results"
	# shellcheck disable=SC2086
	BENCH_SERVER_PID=$etcd_pid "$etcd_cycle" -p "$eport" -P "r$r" $ETCD_FLAGS "${common[@]}" |
		tee -a "$tmp/results"
done

echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
# ---- summary: means over the rounds ----
grep '^RESULT' "$tmp/results" | awk -v rounds="$ROUNDS" -v workers="$WORKERS" '
function val(k,   i, kv) {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] }
	return 0
}
{
	t = val("target"); n[t]++
	cps[t] += val("cycles_per_s"); ops[t] += val("ops_per_s")
	p99[t] += val("p99_op_ms"); p99c[t] += val("p99_cycle_ms"); p50[t] += val("p50_op_ms")
	err[t] += val("errors"); fail[t] += val("failed_cycles"); oth[t] += val("others_cpu_pct")
	scpu[t] += val("server_cpu_us_per_op"); stl[t] += val("steal_pct")
}
END {
	printf "\n== summary: %d workers, mean of %d round(s) ==\n", workers, rounds
	printf "%-8s %10s %10s %10s %10s %12s %8s %10s %13s %8s\n", "target", "cycles/s", "ops/s",
	       "p50 op ms", "p99 op ms", "p99 cycle ms", "errors", "us cpu/op", "others cpu %",
	       "steal %"
	split("boardd etcd", ts, " ")
	for (i = 1; i <= 2; i++) {
		t = ts[i]; if (!n[t]) continue
		printf "%-8s %10.1f %10.1f %10.3f %10.3f %12.3f %8d %10.0f %13.0f %8.0f\n", t,
		       cps[t] / n[t], ops[t] / n[t], p50[t] / n[t], p99[t] / n[t], p99c[t] / n[t],
		       err[t] + fail[t], scpu[t] / n[t], oth[t] / n[t], stl[t] / n[t]
	}
	if (n["boardd"] && n["etcd"] && cps["etcd"] > 0 && p99["etcd"] > 0) {
		rc = (cps["boardd"] / n["boardd"]) / (cps["etcd"] / n["etcd"])
		rp = (p99["boardd"] / n["boardd"]) / (p99["etcd"] / n["etcd"])
		rq = (p99c["boardd"] / n["boardd"]) / (p99c["etcd"] / n["etcd"])
		printf "ratio boardd/etcd: cycles/s %.2fx (target >= 4x: %s), p99 per op %.2fx, " \
		       "p99 per cycle %.2fx (target < 1x: %s)\n", rc, (rc >= 4 ? "met" : "MISSED"),
		       rp, rq, ((rp < 1 && rq < 1) ? "met" : "MISSED")
	}
	printf "(us cpu/op: the server process CPU per answered request; others cpu %%: user+system " \
	       "CPU of other processes during the windows (interrupts not counted), in %% of one " \
	       "core; steal %%: CPU time the hypervisor gave to other guests, in %% of one core. " \
	       "The load average also counts the benchmark threads waiting on fsync.)\n"
}'
