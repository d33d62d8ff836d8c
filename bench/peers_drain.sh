#!/usr/bin/env bash
# The drain beside its peers' own drains (issue 28): in one run, on 127.0.0.1 only, each side on
# a private server in a temp dir (stopped by PID at the end, whatever happens):
#   boardd  bench/drain (claim-next + done-and-release per job, W workers) on a fresh release
#           boardd with the FS store; and the batched drain when bench/drain has it (the hook
#           below: drain -b BATCH, claim-next count + finish many)
#   River   its own `river bench --num-total-jobs N` (cmd/river at RIVER_VERSION, stock: 2 000
#           workers) on a private PostgreSQL (pg.sh, durable defaults, TCP), then the same
#           bench rebuilt with MaxWorkers 32 (its bench takes no worker count: one line patched)
#   BullMQ  bullmq_drain.cjs (bullmq BULLMQ_VERSION, one Worker at concurrency W, N no-op jobs
#           added in bulk before the clock) on Debian's redis-server with the AOF on,
#           `appendfsync always`, then `everysec`, a fresh server for each
# then one table (jobs/s, p99 per job, the server's CPU per job, boardd ÷ side; with ROUNDS > 1
# each side's median and its rounds) and the fairness notes. Prints figures, asserts nothing.
# Missing tools are installed here (never by a test): Debian's postgresql, redis-server and npm;
# at pinned versions, River built with the Go toolchain and bullmq + ioredis with npm, into
# PEERS_CACHE. A peer that cannot be had is reported as skipped, with the reason.
#
#   bench/peers_drain.sh                        # 10 000 jobs, 32 workers
#   JOBS=20000 WORKERS=32 ROUNDS=3 bench/peers_drain.sh   # medians of 3 rounds, each side once a round
#   RIVER_GIT=/path/to/river.git bench/peers_drain.sh   # when `go install` cannot resolve cmd/river
#   SIDES="boardd bullmq" bench/peers_drain.sh  # a subset (boardd river bullmq)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build-bench}
JOBS=${JOBS:-10000}
WORKERS=${WORKERS:-32}
ROUNDS=${ROUNDS:-1}
SIDES=${SIDES:-boardd river bullmq}
RIVER_VERSION=${RIVER_VERSION:-v0.43.0}
BULLMQ_VERSION=${BULLMQ_VERSION:-6.7.0}
IOREDIS_VERSION=${IOREDIS_VERSION:-5.11.1}
PEERS_CACHE=${PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/boardd-peers}
RIVER_GIT=${RIVER_GIT:-}
source "$root/bench/pg.sh"  # pg_cluster_start/stop, pg_setting, PGBIN
source "$root/bench/lib.sh" # boardd_log_port, bench_tokens, pick_port, wait_port, stop_pid

tmp=$(mktemp -d /tmp/boardd-peers.XXXXXX)
boardd_pid="" redis_pid=""
cleanup() {
	stop_pid "$boardd_pid"
	stop_pid "$redis_pid"
	pg_cluster_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
rows=()  # "side|jobs/s|p99 ms|note|server µs per job", one per side and round
notes=()
row() { rows+=("$1|$2|$3|${4:-}|${5:--}"); } # side jobs/s p99-ms note [server-us-per-job]
tree_cpu_s() { # PID: CPU seconds of PID and its descendants (with the children they reaped)
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v root="$1" -v hz="$(getconf CLK_TCK)" '
		{ pid = $1; rest = substr($0, match($0, /\) [A-Za-z] /) + 2); split(rest, f, " ")
		  parent[pid] = f[2]; ticks[pid] = f[12] + f[13] + f[14] + f[15] } # after "(comm)"
		END {
			in_tree[root] = 1
			do { grew = 0; for (p in parent) if (!(p in in_tree) && (parent[p] in in_tree)) { in_tree[p] = 1; grew = 1 } } while (grew)
			for (p in in_tree) t += ticks[p]
			printf "%.3f", t / hz
		}'
}
side_on() { [[ " $SIDES " == *" $1 "* ]]; }

apt_need() { # PACKAGE BINARY: Debian's package when BINARY is missing
	command -v "$2" >/dev/null || [ -x "$2" ] && return 0
	echo "peers_drain.sh: installing Debian's $1" >&2
	[ -n "${APT_UPDATED:-}" ] || { apt-get update >/dev/null 2>&1 || true; APT_UPDATED=1; }
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$1" >/dev/null
}

# --- River: cmd/river at RIVER_VERSION, stock and MaxWorkers 32, built into the cache ------------
river_dir=$PEERS_CACHE/river-$RIVER_VERSION
river_install() { # sets river_why on failure
	[ -x "$river_dir/river" ] && [ -x "$river_dir/river-w32" ] && return 0
	command -v go >/dev/null || { river_why="no Go toolchain (go) on PATH"; return 1; }
	rm -rf "$river_dir" && mkdir -p "$river_dir"
	local mod=github.com/riverqueue/river/cmd/river
	# cmd/river is its own module: `go install` works only when the module proxy serves it
	if GOBIN=$river_dir go install "$mod@$RIVER_VERSION" >"$river_dir/install.log" 2>&1; then
		cp -r "$(go env GOMODCACHE)/$mod@$RIVER_VERSION" "$river_dir/src"
		chmod -R u+w "$river_dir/src"
	elif [ -n "$RIVER_GIT" ]; then # from its source at the release tag (deps from the proxy)
		mkdir -p "$river_dir/tree"
		git -C "$RIVER_GIT" archive "$RIVER_VERSION" cmd/river | tar -x -C "$river_dir/tree" ||
			{ river_why="no tag $RIVER_VERSION with cmd/river in RIVER_GIT=$RIVER_GIT"; return 1; }
		mv "$river_dir/tree/cmd/river" "$river_dir/src"
		# -mod=mod: its go.sum omits river's own modules (upstream builds it in a go.work)
		(cd "$river_dir/src" && go build -mod=mod -o "$river_dir/river" .) >>"$river_dir/install.log" 2>&1 ||
			{ river_why="build of cmd/river $RIVER_VERSION failed (see $river_dir/install.log)"; return 1; }
	else
		river_why="go install $mod@$RIVER_VERSION: $(grep -m1 -o 'does not contain package.*\|not found.*\|no matching.*' "$river_dir/install.log" || tail -1 "$river_dir/install.log"); set RIVER_GIT to a clone of riverqueue/river"
		return 1
	fi
	# the same bench with 32 workers: its queue's MaxWorkers is a constant (2 000) in river_bench.go
	sed -i 's/MaxWorkers: 2_000/MaxWorkers: 32/' "$river_dir/src/riverbench/river_bench.go"
	grep -q 'MaxWorkers: 32' "$river_dir/src/riverbench/river_bench.go" ||
		{ river_why="MaxWorkers: 2_000 not found in $RIVER_VERSION's river_bench.go"; return 1; }
	(cd "$river_dir/src" && go build -mod=mod -o "$river_dir/river-w32" .) >>"$river_dir/install.log" 2>&1 ||
		{ river_why="build of the 32-worker bench failed (see $river_dir/install.log)"; return 1; }
}

river_run() { # BIN LABEL: one bench on the private cluster; p99 from river_job's timestamps
	local bin=$1 label=$2 out=$tmp/river-$2.out rate p99 cpu0 cpu1 pgus done_n
	echo "-- River $label: river bench --num-total-jobs $JOBS; load $(cut -d' ' -f1 /proc/loadavg)" >&2
	cpu0=$(tree_cpu_s "$PG_PID")
	if ! timeout 600 "$bin" bench --database-url "$river_url" --num-total-jobs "$JOBS" >"$out" 2>&1; then
		tail -5 "$out" >&2
		row "River $RIVER_VERSION $label" - - "river bench failed"
		return 0
	fi
	cpu1=$(tree_cpu_s "$PG_PID")
	grep '^bench: total' "$out" >&2 || true
	pgus=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$JOBS" 'BEGIN { printf "%.0f", (b - a) * 1e6 / n }')
	echo "  postgres cpu $(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }') s over the command (insert included): $pgus us per job" >&2
	rate=$(sed -n 's/.*overall job\/sec \[ *\([0-9.]*\) \].*/\1/p' "$out" | tail -1)
	# River prints no latency: fetched (attempted_at) -> the worker's completion time
	# (finalized_at, set before the batch completer writes it), per completed job
	p99=$(pg "$PGBIN/psql" -h "$PG_HOST" -p "$PG_PORT" -U postgres -Atc \
		"select round((1000 * percentile_cont(0.99) within group (order by extract(epoch from finalized_at - attempted_at)))::numeric, 2) from river_job where state = 'completed'") || true
	done_n=$(pg "$PGBIN/psql" -h "$PG_HOST" -p "$PG_PORT" -U postgres -Atc \
		"select count(*) from river_job where state = 'completed'") || true
	row "River $RIVER_VERSION $label" "${rate:--}" "${p99:--}" \
		"$done_n/$JOBS completed; p99: attempted_at -> finalized_at; CPU: the whole command" "$pgus"
}

# --- BullMQ: bullmq + ioredis pinned, into the cache; a private redis-server per appendfsync -----
bull_dir=$PEERS_CACHE/bullmq-$BULLMQ_VERSION-ioredis-$IOREDIS_VERSION
bullmq_install() { # sets bull_why on failure
	[ -f "$bull_dir/node_modules/bullmq/package.json" ] && [ -f "$bull_dir/node_modules/ioredis/package.json" ] && return 0
	apt_need nodejs node || true
	apt_need npm npm || true
	command -v npm >/dev/null || { bull_why="no npm"; return 1; }
	mkdir -p "$bull_dir"
	(cd "$bull_dir" && npm install --no-audit --no-fund --save-exact --prefix . \
		"bullmq@$BULLMQ_VERSION" "ioredis@$IOREDIS_VERSION") >"$bull_dir/install.log" 2>&1 ||
		{ bull_why="npm install bullmq@$BULLMQ_VERSION ioredis@$IOREDIS_VERSION failed: $(tail -1 "$bull_dir/install.log")"; return 1; }
}

bullmq_run() { # FSYNC: a fresh redis-server (AOF on, appendfsync FSYNC), the drain, stop
	local mode=$1 port out=$tmp/bullmq-$1.out rate p99
	port=$(pick_port) || { row "BullMQ $mode" - - "no free port"; return 0; }
	mkdir -p "$tmp/redis-$mode"
	redis-server --bind 127.0.0.1 --port "$port" --dir "$tmp/redis-$mode" --save '' \
		--appendonly yes --appendfsync "$mode" --daemonize no --logfile "$tmp/redis-$mode/log" &
	redis_pid=$!
	if ! wait_port "$port" 10 || ! kill -0 "$redis_pid" 2>/dev/null; then
		tail -3 "$tmp/redis-$mode/log" >&2
		row "BullMQ $BULLMQ_VERSION, appendfsync $mode" - - "redis-server did not start"
		stop_pid "$redis_pid"; redis_pid=""
		return 0
	fi
	echo "-- BullMQ, appendfsync $mode ($(redis-cli -p "$port" config get appendfsync | tail -1));" \
		"load $(cut -d' ' -f1 /proc/loadavg)" >&2
	NODE_PATH=$bull_dir/node_modules REDIS_PORT=$port JOBS=$JOBS CONCURRENCY=$WORKERS LABEL=$mode \
		timeout 900 node "$root/bench/bullmq_drain.cjs" >"$out" 2>&1 || true
	grep -v '^RESULT' "$out" >&2 || true
	rate=$(bench_result "$out" jobs_per_s)
	p99=$(bench_result "$out" p99_ms)
	row "BullMQ $BULLMQ_VERSION, appendfsync $mode" "${rate:--}" "${p99:--}" \
		"p99: processor start -> completed" "$(bench_result "$out" server_us_per_job)"
	stop_pid "$redis_pid"; redis_pid=""
}

# --- boardd: bench/drain on a fresh release boardd (FS store) -------------------------------------
boardd_run() { # LABEL DRAIN-ARGS...: a fresh store, the drain, stop
	local label=$1 out=$tmp/boardd-$1.out port rate p99 cpu
	shift
	"$BUILD/server/boardd" --listen 127.0.0.1:0 --store "fs:$tmp/fs-$label" --tokens "$tmp/tokens.json" \
		2>"$tmp/boardd-$label.log" &
	boardd_pid=$!
	port=$(boardd_log_port "$tmp/boardd-$label.log") ||
		{ cat "$tmp/boardd-$label.log" >&2; row "boardd $label" - - "boardd did not start"; stop_pid "$boardd_pid"; boardd_pid=""; return 0; }
	echo "-- boardd $label: bench/drain boardd -n $JOBS -w $WORKERS $*; load $(cut -d' ' -f1 /proc/loadavg)" >&2
	BENCH_SERVER_PID=$boardd_pid "$BUILD/bench/drain" boardd -p "$port" -n "$JOBS" -w "$WORKERS" "$@" \
		>"$out" 2>&1 || true
	cat "$out" >&2
	rate=$(sed -n 's/^drain boardd .* \([0-9]*\) jobs\/s .*/\1/p' "$out")
	p99=$(sed -n 's/^drain boardd .* p99 \([0-9.]*\) ms .*/\1/p' "$out")
	cpu=$(sed -n 's/^  server cpu .*: \([0-9]*\) us per job.*/\1/p' "$out")
	row "boardd bench/drain, $label" "${rate:--}" "${p99:--}" \
		"$(sed -n 's/^drain boardd.* jobs \([0-9]*\/[0-9]*\) .*conflicts \([0-9]*\)  errors \([0-9]*\).*/\1 done, \2 conflicts, \3 errors/p' "$out"); p99: claim-next + done-and-release" "$cpu"
	stop_pid "$boardd_pid"; boardd_pid=""
}

echo "peers_drain.sh: $JOBS jobs, $WORKERS workers, $ROUNDS round(s); $(nproc) cores; load" \
	"$(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%F %H:%M') UTC; commit" \
	"$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"

# --- setup: each side's tools and servers once; a side that cannot be had is skipped ------------
run_boardd=0 run_river=0 run_bullmq=0
if side_on boardd; then
	[ -d "$BUILD" ] || meson setup "$BUILD" --buildtype=release >/dev/null
	ninja -C "$BUILD" server/boardd bench/drain >/dev/null
	bench_tokens "$BUILD/server/boardd" "$tmp"
	export BENCH_WORKER_TOKEN=$(tail -1 "$tmp/worker.tok") BENCH_BOT_TOKEN=$(tail -1 "$tmp/bot.tok")
	# HOOK (issue 28, the other half of bench/): the batched drain, claim-next `count` and finish
	# many. Runs when bench/drain's usage names a batch flag ("-X K"); BATCH (32, as drain.sh) is K;
	# BATCH_FLAG overrides the flag.
	BATCH=${BATCH:-32}
	drain_usage=$("$BUILD/bench/drain" 2>&1 || true) # its usage (it exits 2)
	[ -n "${BATCH_FLAG:-}" ] ||
		BATCH_FLAG=$(grep -o '\-[a-zA-Z] \(K\|BATCH\)\b' <<<"$drain_usage" | head -1 | cut -c1-2 || true)
	run_boardd=1
fi
if side_on river; then
	if ! river_install; then
		row "River $RIVER_VERSION" - - "skipped: ${river_why:-?}"
	else
		apt_need postgresql "$PGBIN/initdb" || true
		PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
		pg_cluster_start "$tmp" 50 tcp # one cluster: river bench truncates its table each run
		river_url="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
		"$river_dir/river" migrate-up --database-url "$river_url" >"$tmp/river-migrate.out" 2>&1 ||
			{ cat "$tmp/river-migrate.out" >&2; exit 1; }
		notes+=("PostgreSQL $PG_VERSION: fsync=$(pg_setting fsync), synchronous_commit=$(pg_setting synchronous_commit), TCP 127.0.0.1")
		run_river=1
	fi
fi
if side_on bullmq; then
	apt_need redis-server redis-server || true
	if ! command -v redis-server >/dev/null; then
		row "BullMQ $BULLMQ_VERSION" - - "skipped: no redis-server (apt-get install redis-server failed)"
	elif ! bullmq_install; then
		row "BullMQ $BULLMQ_VERSION" - - "skipped: ${bull_why:-?}"
	else
		notes+=("Redis $(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p') (appendonly yes, save off), node $(node --version), ioredis $IOREDIS_VERSION")
		run_bullmq=1
	fi
fi

# --- the rounds: every side once per round, in the same order --------------------------------
for round in $(seq "$ROUNDS"); do
	echo "== round $round/$ROUNDS" >&2
	if [ $run_boardd = 1 ]; then
		boardd_run single
		if [ -n "${BATCH_FLAG:-}" ]; then
			boardd_run "batched ($BATCH_FLAG $BATCH)" "$BATCH_FLAG" "$BATCH"
		else
			row "boardd bench/drain, batched" - - "not run: bench/drain has no batch flag in this tree"
		fi
	fi
	if [ $run_river = 1 ]; then
		river_run "$river_dir/river" "stock (2 000 workers)"
		river_run "$river_dir/river-w32" "MaxWorkers 32 (patched)"
	fi
	if [ $run_bullmq = 1 ]; then
		bullmq_run always
		bullmq_run everysec
	fi
done
pg_cluster_stop

# --- the table: per side the median of its rounds (each round in brackets when more than one);
# boardd ÷ side from the medians, against the single-request drain and the batched one ----------
printf '%s\n' "${rows[@]}" | awk -F'|' -v rounds="$ROUNDS" '
	function median(list,   v, k, i, j, t) {
		k = split(list, v, " ")
		if (k == 0) return ""
		for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
		return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
	}
	function ratio(b, r) { return (b == "" || r == "" || r + 0 == 0) ? "—" : sprintf("%.2f×", b / r) }
	!($1 in seen) { seen[$1] = 1; order[++n] = $1 }
	$2 != "-" { rates[$1] = rates[$1] " " sprintf("%.0f", $2); if ($3 != "-") p99s[$1] = p99s[$1] " " $3
		if ($5 != "-" && $5 != "") cpus[$1] = cpus[$1] " " $5 }
	{ note[$1] = $4 }
	END {
		for (i = 1; i <= n; i++) {
			s = order[i]; mr[s] = median(rates[s]); mp[s] = median(p99s[s]); mc[s] = median(cpus[s])
			if (s ~ /^boardd .*single/) b1 = mr[s]
			if (s ~ /^boardd .*batched/) bb = mr[s]
		}
		print ""
		print "| side | jobs/s | p99 per job | server CPU per job | boardd single ÷ side | boardd batched ÷ side | note |"
		print "|---|---|---|---|---|---|---|"
		for (i = 1; i <= n; i++) {
			s = order[i]
			each = (rounds > 1 && rates[s] != "") ? " (" substr(rates[s], 2) ")" : ""
			printf "| %s | %s%s | %s | %s | %s | %s | %s |\n", s, mr[s] == "" ? "—" : sprintf("%.0f", mr[s]), each,
				mp[s] == "" ? "—" : sprintf("%.2f ms", mp[s]), mc[s] == "" ? "—" : sprintf("%.0f µs", mc[s]),
				ratio(b1, mr[s]), ratio(bb, mr[s]), note[s]
		}
	}'
echo
echo "Fairness notes:"
for n in "${notes[@]}"; do echo "- $n"; done
side_on boardd && cat <<EOF
- boardd: every job is 2 HTTP requests (claim-next, then the fenced done+release), each answered
  after its journal line is fdatasync'd (group commit across workers); nothing batched per request.
EOF
side_on river && cat <<EOF
- River: its bench inserts N jobs first (InsertMany, 5 000 per statement), then works them; the
  producer fetches up to (MaxWorkers - running) jobs per statement (2 000 stock, 32 patched), a
  worker's completion goes to the batch completer (up to 5 000 jobs per UPDATE; a tick of 50 ms
  flushes once 100 are pending, else every 5th): the worker takes its next job before its
  completion is durable (a crash re-runs those jobs). pgxpool's default pool (4 connections). The bench counts a job when the completer's batch has committed. Its rate is its
  own ("overall job/sec": client start -> last job worked).
EOF
side_on bullmq && cat <<EOF
- BullMQ: jobs added in bulk before the clock; each completion is one Lua script per job
  (moveToFinished, which also hands the worker its next job), answered after Redis writes its AOF:
  with appendfsync always Redis fsyncs before it replies (one fsync per event-loop pass, so
  concurrent workers share it); everysec fsyncs once a second (up to a second of completions lost).
EOF
echo "- p99 is each side's own per-job measure (see the note column): not the same interval."
echo "- server CPU per job: boardd's process over the drain; Redis's own (INFO cpu) over the drain;"
echo "  PostgreSQL's processes over the whole river bench command (its insert of N jobs included)."
