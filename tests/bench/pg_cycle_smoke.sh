#!/usr/bin/env bash
# bench/pg_cycle's smoke (issue 15): half a second of the claim cycle against a private
# PostgreSQL cluster (bench/pg.sh: initdb in a temp dir, durable defaults, a unix socket; at
# the end a second one on TCP 127.0.0.1 alone, as bench/run.sh's TRANSPORT=tcp runs it),
# a few seconds in all, in both client modes: the workers on an event loop (-e 1: libpq's
# asynchronous calls, each worker parked on its socket; what bench/run.sh runs by default)
# and one blocking thread per worker (-e 0). Checks that the driver runs the whole cycle with
# no error in each mode and says which mode it ran, that the server's CPU it reports includes
# the backends (children of the postmaster), that the cluster ran with fsync and
# synchronous_commit on, and that a refused claim is counted as an error (two drivers on the
# same rows, one per mode), not hidden. Figures are not asserted.
#   tests/bench/pg_cycle_smoke.sh BUILD/bench/pg_cycle SOURCE_ROOT
# Exits 77 (skip) without PostgreSQL's server binaries, and fails then when CI=true.
set -euo pipefail
pg_cycle=${1:?usage: pg_cycle_smoke.sh PG_CYCLE SOURCE_ROOT}
root=${2:?usage: pg_cycle_smoke.sh PG_CYCLE SOURCE_ROOT}
source "$root/bench/pg.sh"

if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ] || [ ! -x "$PGBIN/pg_ctl" ]; then
	echo "pg_cycle_smoke: no PostgreSQL server binaries (/usr/lib/postgresql/*/bin;" \
		"Debian: apt-get install postgresql, deploy/deps.sh --test)" >&2
	[ "${CI:-}" = true ] && exit 1
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pg-cycle-smoke.XXXXXX")
trap 'pg_cluster_stop; rm -rf "$tmp"' EXIT
pg_cluster_start "$tmp" 20

fail() {
	echo "pg_cycle_smoke: $*" >&2
	exit 1
}
# result FILE KEY: the value of KEY in FILE's RESULT line
result() {
	sed -n 's/^RESULT .*[[:space:]]'"$2"'=\([^[:space:]]*\).*/\1/p' "$1"
}

# 1. The cycle alone, in each client mode: every statement touched its one row. The same
# rows (prefix smoke) for both: the event loop's run starts from the cards the threads left.
for loops in 1 0; do
	rc=0
	BENCH_SERVER_PID=$PG_PID "$pg_cycle" -H "$PG_SOCKDIR" -p "$PG_PORT" -w 4 -d 0.5 -W 0.1 \
		-P smoke -e "$loops" >"$tmp/clean" || rc=$?
	cat "$tmp/clean"
	[ "$rc" = 0 ] || fail "pg_cycle -e $loops exited $rc"
	[ "$(result "$tmp/clean" client_loops)" = "$loops" ] ||
		fail "pg_cycle -e $loops ran its workers on $(result "$tmp/clean" client_loops) loops"
	[ "$(result "$tmp/clean" errors)" = 0 ] || fail "errors in a run alone (-e $loops)"
	[ "$(result "$tmp/clean" failed_cycles)" = 0 ] || fail "failed cycles in a run alone (-e $loops)"
	[ "$(result "$tmp/clean" cycles)" -gt 0 ] || fail "no cycle in one second (-e $loops)"
	# The postmaster alone would show ~0: the backends that run the statements are its
	# children.
	[ "$(result "$tmp/clean" server_cpu_us_per_op)" -gt 0 ] ||
		fail "no server CPU counted (the backends are missing from it)"
	grep -q 'fsync=on synchronous_commit=on' "$tmp/clean" ||
		fail "not PostgreSQL's durable defaults"
done
# The rows after the event loop's and the threads' cycles: each released (no marker left),
# each claimed once per cycle counted in the windows and the warm-ups (epoch > cycles counted
# in the windows of both runs together).
rows=$(pg "$PGBIN/psql" -h "$PG_SOCKDIR" -p "$PG_PORT" -U postgres -Atc \
	"SELECT count(*), count(marker), coalesce(sum(epoch), 0) FROM bench_cards WHERE id LIKE 'smoke-%'")
IFS='|' read -r n held epochs <<<"$rows"
[ "$n" = 4 ] && [ "$held" = 0 ] && [ "$epochs" -gt 0 ] ||
	fail "after both modes: $n rows, $held still claimed, epochs $epochs (want 4, 0, > 0)"

# 2. Two drivers on the same rows, one on the event loop and one with threads: one's claim
# finds the row held by the other and must be counted as an error of claim (status -1), never
# as a cycle done, whichever client counted it.
"$pg_cycle" -H "$PG_SOCKDIR" -p "$PG_PORT" -w 2 -d 0.5 -W 0.1 -P clash -e 1 >"$tmp/a" &
a=$!
"$pg_cycle" -H "$PG_SOCKDIR" -p "$PG_PORT" -w 2 -d 0.5 -W 0.1 -P clash -e 0 >"$tmp/b" || rc=$?
[ "$rc" = 0 ] || fail "the second clashing pg_cycle exited $rc"
wait "$a" || rc=$?
[ "$rc" = 0 ] || fail "the first clashing pg_cycle exited $rc"
errs=$(($(result "$tmp/a" errors) + $(result "$tmp/b" errors)))
cat "$tmp/a" "$tmp/b"
[ "$errs" -gt 0 ] || fail "two drivers on the same rows and no refused claim counted"
[ "$(result "$tmp/a" errors)" -gt 0 ] || fail "the event loop's driver counted no refused claim"
grep -q 'claim touched 0 rows' "$tmp/a" || fail "the event loop's refused claim is not named"

# 3. Over TCP (bench/run.sh's TRANSPORT=tcp): a second private cluster on 127.0.0.1 only (no
# socket file: unix_socket_directories is empty, so nothing but TCP can reach it), the cycle
# through libpq's host=127.0.0.1, and the driver says it ran over TCP.
pg_cluster_stop
pg_cluster_start "$tmp/tcp" 20 tcp
[ "$PG_HOST" = 127.0.0.1 ] && [ -z "$PG_SOCKDIR" ] ||
	fail "tcp cluster: host $PG_HOST, socket dir '$PG_SOCKDIR'"
[ "$(pg_setting listen_addresses)" = 127.0.0.1 ] && [ -z "$(pg_setting unix_socket_directories)" ] ||
	fail "tcp cluster: listen_addresses '$(pg_setting listen_addresses)'," \
		"unix_socket_directories '$(pg_setting unix_socket_directories)'"
[ -z "$(find "$tmp/tcp" -type s)" ] ||
	fail "tcp cluster left a socket file: $(find "$tmp/tcp" -type s)"
rc=0
BENCH_SERVER_PID=$PG_PID "$pg_cycle" -H "$PG_HOST" -p "$PG_PORT" -w 4 -d 0.5 -W 0.1 -P tcp -e 1 \
	>"$tmp/tcp.out" || rc=$?
cat "$tmp/tcp.out"
[ "$rc" = 0 ] || fail "pg_cycle over TCP exited $rc"
[ "$(result "$tmp/tcp.out" transport)" = tcp ] ||
	fail "pg_cycle over TCP says transport $(result "$tmp/tcp.out" transport)"
[ "$(result "$tmp/clean" transport)" = unix ] ||
	fail "pg_cycle on the socket says transport $(result "$tmp/clean" transport)"
[ "$(result "$tmp/tcp.out" errors)" = 0 ] && [ "$(result "$tmp/tcp.out" failed_cycles)" = 0 ] ||
	fail "errors over TCP"
[ "$(result "$tmp/tcp.out" cycles)" -gt 0 ] || fail "no cycle over TCP"
grep -q 'fsync=on synchronous_commit=on' "$tmp/tcp.out" ||
	fail "not PostgreSQL's durable defaults over TCP"
# -U is for the HTTP drivers: refused, not silently ignored.
rc=0
"$pg_cycle" -U "$tmp/x.sock" -p "$PG_PORT" -d 0.5 2>"$tmp/u.err" || rc=$?
[ "$rc" = 2 ] && grep -q -- '-U are for the HTTP drivers' "$tmp/u.err" ||
	fail "pg_cycle -U: rc $rc, $(cat "$tmp/u.err")"
echo "pg_cycle_smoke: ok ($errs refused statements counted in the clash; TCP run clean)"
