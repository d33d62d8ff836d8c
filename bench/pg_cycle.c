/* pg_cycle — the claim cycle of loadgen, expressed on PostgreSQL with libpq.
 *
 *   pg_cycle -H SOCKET_DIR -p PORT [-c CONNINFO] [-w 32] [-d 20] [-W 2] [-n CYCLES] [-l 30000]
 *            [-r 3] [-P bench] [-e 0]
 *
 * Same runner, same concurrency, same cycle shape as loadgen and etcd_cycle; each worker owns
 * one card, i.e. one row of bench_cards (id '<prefix>-<i>', made in_progress before the clock
 * starts), and one connection (a unix socket: -H is libpq's host, a directory), with its
 * statements prepared once:
 *
 *   claim   UPDATE ... SET marker = $2, epoch = epoch + 1, lease_until = now() + lease
 *           WHERE id = $1 AND (marker IS NULL OR lease_until < now()) RETURNING epoch
 *           -- one row, the new epoch: boardd's fresh acquisition (epoch + 1)
 *   renew   UPDATE ... SET lease_until = now() + lease WHERE id AND marker AND epoch   (x3)
 *   write   UPDATE ... SET state = 'review' WHERE id AND marker AND epoch, then the same
 *           with 'in_progress' (boardd's PATCH .../state with If-Match: "<epoch>")
 *   release UPDATE ... SET marker = NULL, lease_until = NULL WHERE id AND marker AND epoch
 *           (boardd's release: the claim cleared, the epoch kept)
 *
 * Each statement is its own transaction (autocommit), acknowledged after its commit record is
 * flushed: PostgreSQL's durable defaults, fsync = on and synchronous_commit = on (printed with
 * the table), as boardd acknowledges a write only after the group fdatasync covering it and
 * etcd after its WAL fsync. Every fenced statement must touch exactly one row, and the claim
 * return exactly one: anything else is counted as an error of its operation (status -1),
 * a statement PostgreSQL refused as status 0; a failed cycle gives the row back with a fenced
 * release (untimed) so the next one starts fresh, as loadgen and etcd_cycle do.
 *
 * The client, two ways, the statements and the checks the same (-e, as loadgen and etcd_cycle):
 * -e 0 (the default) one blocking thread per worker, PQexecPrepared; -e N the workers as
 * coroutines on N event-loop threads (bench/green.c), each connection nonblocking after its
 * setup and every statement sent with libpq's asynchronous calls (PQsendQueryPrepared, then
 * PQconsumeInput / PQisBusy / PQgetResult), the coroutine parked on PQsocket while PostgreSQL
 * works, as bench/http.c parks on its socket. The setup (connect, prepare, the row) stays
 * blocking: it is before the clock, and one loop thread connects its workers one by one.
 *
 * The fence is the same compare-and-swap on (marker, epoch) as boardd's owned writes: a late
 * write of a worker whose claim was taken matches no row. One difference in the claim: boardd
 * refuses to hand over a claim whose lease expired (only its reaper takes those), while the
 * statement above takes it; in this benchmark the card is always unclaimed when it is claimed,
 * so that branch never runs. What each side does per write favours PostgreSQL: boardd's owned
 * state write also stamps updated_at/state_at/state_reason and appends an event (the stream,
 * the journal line), a claim answers the whole token and every answer is JSON over HTTP on
 * loopback TCP; PostgreSQL updates the row in place (HOT: no indexed column changes) and
 * answers prepared statements (extended protocol, text parameters) over a unix socket, with
 * no event log.
 *
 * The server's CPU per request counts every postgres process (run.sh sets BENCH_SERVER_PID to
 * the postmaster: the runner adds its live and reaped children, i.e. the backends, the WAL
 * writer, the checkpointer, autovacuum). The closing note reports PostgreSQL's own group
 * commit over the window (pg_stat_wal's WAL syncs, pg_stat_database's commits; the statistics
 * are flushed by each backend about once a second, so both figures lag by up to that). */
#include "bench/bench.h"
#include "bench/bench_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N_OPS = BENCH_CYCLE_OPS };

static const char *const op_names[N_OPS] = {
	BENCH_CYCLE_OP_NAMES,
};

static char conninfo[1024];

static const char table_sql[] =
	"CREATE TABLE IF NOT EXISTS bench_cards (id text PRIMARY KEY, state text NOT NULL,"
	" marker text, epoch bigint NOT NULL DEFAULT 0, lease_until timestamptz)";

/* Prepared on every worker's connection: name, text, parameters. */
static const struct {
	const char *name, *sql;
	int n_params;
} stmts[] = {
	{"claim",
	 "UPDATE bench_cards SET marker = $2, epoch = epoch + 1,"
	 " lease_until = now() + $3::interval"
	 " WHERE id = $1 AND (marker IS NULL OR lease_until < now()) RETURNING epoch",
	 3},
	{"renew",
	 "UPDATE bench_cards SET lease_until = now() + $4::interval"
	 " WHERE id = $1 AND marker = $2 AND epoch = $3",
	 4},
	{"state", "UPDATE bench_cards SET state = $4 WHERE id = $1 AND marker = $2 AND epoch = $3",
	 4},
	{"release",
	 "UPDATE bench_cards SET marker = NULL, lease_until = NULL"
	 " WHERE id = $1 AND marker = $2 AND epoch = $3",
	 3},
};

/* An event-loop worker gives up on a statement after this long (a blocking thread waits for
 * ever; a durable UPDATE on a stalled disk takes seconds, not minutes). */
#define PGC_GREEN_WAIT_MS 60000

struct pg_worker {
	PGconn *pg;
	bool stuck; /* event loop: a statement got no answer in time; the connection is reset */
	char id[160];
	char marker[64];
	char lease[48]; /* "<lease_ms> milliseconds" */
	char epoch[24]; /* as the claim returned it */
};

/* Inside an event-loop worker: the connection nonblocking, its socket on the loop (a new
 * socket after every reset). Outside: nothing, the connection stays blocking. 0 or -1. */
static int pgc_green_attach(struct pg_worker *pw)
{
	if (!bench_green_on())
		return 0;
	/* Woken by answers only: PostgreSQL reading a statement off the unix socket would
	 * otherwise wake the worker for nothing (a recv that says EAGAIN) on every statement. */
	if (PQsetnonblocking(pw->pg, 1) != 0 || bench_green_register(PQsocket(pw->pg)) != 0 ||
	    bench_green_want_write(PQsocket(pw->pg), false) != 0) {
		fprintf(stderr, "pg_cycle: cannot put the connection on the event loop: %s",
			PQerrorMessage(pw->pg));
		return -1;
	}
	return 0;
}

/* Event loop: after a PQsend* call, the one result of that command, the coroutine parked on
 * the socket whenever libpq would block; NULL when the connection failed (PQerrorMessage says
 * why) or nothing came in PGC_GREEN_WAIT_MS (pw->stuck). No read is tried right after the
 * send: an answer that arrives before the worker parks still wakes it (the loop takes no
 * event of this socket while this coroutine runs), as in bench/http.c. Spurious wake-ups just
 * wait again. */
static PGresult *pgc_green_result(struct pg_worker *pw)
{
	PGresult *first = NULL, *r;
	int f;

	/* libpq's nonblocking send: flush what the socket did not take (in practice nothing:
	 * a statement fits in the socket's buffer), woken by writability meanwhile. */
	if ((f = PQflush(pw->pg)) == 1) {
		bench_green_want_write(PQsocket(pw->pg), true);
		while ((f = PQflush(pw->pg)) == 1)
			if (bench_green_wait(PGC_GREEN_WAIT_MS) != 0 || !PQconsumeInput(pw->pg))
				break;
		bench_green_want_write(PQsocket(pw->pg), false);
	}
	if (f != 0)
		goto broken;
	for (;;) {
		while (PQisBusy(pw->pg)) {
			if (bench_green_wait(PGC_GREEN_WAIT_MS) != 0 || !PQconsumeInput(pw->pg))
				goto broken;
		}
		r = PQgetResult(pw->pg);
		if (!r) /* the command is over: the connection takes the next one */
			return first;
		if (!first)
			first = r;
		else
			PQclear(r); /* one statement: no second result */
	}
broken:
	/* A timeout leaves the statement in flight: only a reset makes the connection usable. */
	if (PQstatus(pw->pg) == CONNECTION_OK)
		pw->stuck = true;
	PQclear(first);
	return NULL;
}

/* Runs prepared statement `stmt`: PQexecPrepared on a blocking thread, the same through the
 * asynchronous calls on an event loop. NULL only on the event loop's transport failures. */
static PGresult *pgc_exec(struct pg_worker *pw, const char *stmt, int n, const char *const *params)
{
	if (!bench_green_on())
		return PQexecPrepared(pw->pg, stmt, n, params, NULL, NULL, 0);
	if (!PQsendQueryPrepared(pw->pg, stmt, n, params, NULL, NULL, 0))
		return NULL;
	return pgc_green_result(pw);
}

/* Prepares the statements again on a reset connection (errors show on the next statement). */
static void pgc_prepare_again(struct pg_worker *pw)
{
	size_t i;

	for (i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
		if (!bench_green_on())
			PQclear(PQprepare(pw->pg, stmts[i].name, stmts[i].sql, stmts[i].n_params,
					  NULL));
		else if (PQsendPrepare(pw->pg, stmts[i].name, stmts[i].sql, stmts[i].n_params,
				       NULL))
			PQclear(pgc_green_result(pw));
	}
}

static int pgc_setup(struct bench_worker *w)
{
	struct pg_worker *pw = calloc(1, sizeof *pw);
	const char *p[2];
	PGresult *r;
	size_t i;
	int rc = 0;

	if (!pw)
		return -1;
	w->ctx = pw;
	snprintf(pw->id, sizeof pw->id, "%s-%zu", w->opts->prefix, w->idx);
	snprintf(pw->marker, sizeof pw->marker, "bench-w%zu", w->idx);
	snprintf(pw->lease, sizeof pw->lease, "%lld milliseconds", (long long)w->opts->lease_ms);
	snprintf(pw->epoch, sizeof pw->epoch, "0");
	pw->pg = bench_pg_open(conninfo, "pg_cycle");
	if (!pw->pg)
		return -1;
	for (i = 0; i < sizeof stmts / sizeof stmts[0]; i++)
		if (bench_pg_prepare(pw->pg, stmts[i].name, stmts[i].sql, stmts[i].n_params,
				     "pg_cycle") != 0)
			return -1;
	if (pgc_green_attach(pw) != 0)
		return -1;
	/* The card, like loadgen's POST /v1/cards. One left by an earlier run with the same
	 * prefix stays as it is: the first claim tells whether it is usable. */
	p[0] = pw->id;
	p[1] = "in_progress";
	r = PQexecParams(pw->pg,
			 "INSERT INTO bench_cards (id, state) VALUES ($1, $2)"
			 " ON CONFLICT (id) DO NOTHING",
			 2, NULL, p, NULL, NULL, 0);
	if (!bench_pg_ok(r)) {
		fprintf(stderr, "pg_cycle: create %s: %s", pw->id, PQerrorMessage(pw->pg));
		rc = -1;
	}
	PQclear(r);
	return rc;
}

/* One timed statement of `op`; 0 when it touched exactly one row (the claim: and returned
 * it, its epoch kept). */
static int pgc_step(struct bench_worker *w, size_t op, const char *stmt, int n,
		    const char *const *params)
{
	struct pg_worker *pw = w->ctx;
	uint64_t t0 = bench_now_us();
	PGresult *r = pgc_exec(pw, stmt, n, params);
	char detail[200];
	bool ok = false;
	int code = 0;

	if (!bench_pg_ok(r)) {
		if (pw->stuck)
			snprintf(detail, sizeof detail, "%s: no answer in %d s", stmt,
				 PGC_GREEN_WAIT_MS / 1000);
		else
			snprintf(detail, sizeof detail, "%s", PQerrorMessage(pw->pg));
	} else if (strcmp(PQcmdTuples(r), "1") != 0 ||
		   (op == BENCH_OP_CLAIM && (PQntuples(r) != 1 || PQgetisnull(r, 0, 0)))) {
		code = -1;
		snprintf(detail, sizeof detail, "%s touched %s rows (fence or claim refused)",
			 stmt, PQcmdTuples(r));
	} else {
		ok = true;
	}
	bench_op_record(w, op, t0, ok, code, ok ? NULL : detail);
	if (ok && op == BENCH_OP_CLAIM)
		snprintf(pw->epoch, sizeof pw->epoch, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return ok ? 0 : -1;
}

/* After a failed step: give the row back if it is still ours (fenced, untimed). A broken
 * (or, on the event loop, stuck) connection is reset and its statements prepared again;
 * while the server is unreachable each failed cycle waits 100 ms, so a worker never spins.
 * The reset itself blocks (on the event loop too: a unix socket's connect is quick, and only
 * after a failure). */
static void pgc_recover(struct pg_worker *pw)
{
	const char *p[3] = {pw->id, pw->marker, pw->epoch};

	if (pw->stuck || PQstatus(pw->pg) != CONNECTION_OK) {
		pw->stuck = false;
		PQreset(pw->pg);
		if (PQstatus(pw->pg) != CONNECTION_OK || pgc_green_attach(pw) != 0) {
			if (bench_green_on())
				bench_green_sleep_ms(100);
			else
				nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
			return;
		}
		pgc_prepare_again(pw);
	}
	PQclear(pgc_exec(pw, "release", 3, p));
}

static int pgc_cycle(struct bench_worker *w)
{
	struct pg_worker *pw = w->ctx;
	const char *claim[3] = {pw->id, pw->marker, pw->lease};
	const char *renew[4] = {pw->id, pw->marker, pw->epoch, pw->lease};
	const char *review[4] = {pw->id, pw->marker, pw->epoch, "review"};
	const char *back[4] = {pw->id, pw->marker, pw->epoch, "in_progress"};
	const char *release[3] = {pw->id, pw->marker, pw->epoch};
	unsigned k;

	if (pgc_step(w, BENCH_OP_CLAIM, "claim", 3, claim) != 0)
		goto fail;
	for (k = 0; k < w->opts->renews; k++)
		if (pgc_step(w, BENCH_OP_RENEW, "renew", 4, renew) != 0)
			goto fail;
	if (pgc_step(w, BENCH_OP_TO_REVIEW, "state", 4, review) != 0 ||
	    pgc_step(w, BENCH_OP_TO_PROGRESS, "state", 4, back) != 0 ||
	    pgc_step(w, BENCH_OP_RELEASE, "release", 3, release) != 0)
		goto fail;
	return 0;
fail:
	pgc_recover(pw);
	return -1;
}

static void pgc_teardown(struct bench_worker *w)
{
	struct pg_worker *pw = w->ctx;

	if (pw)
		PQfinish(pw->pg);
	free(pw);
	w->ctx = NULL;
}

/* PostgreSQL's group commit over the window: WAL syncs and commits, from its statistics. */
struct pgc_counters {
	bool ok;
	unsigned long long syncs, commits;
	double t;
	char durability[96];
};

static bool pgc_stats(struct pgc_counters *c)
{
	PGconn *pg = bench_pg_open(conninfo, "pg_cycle");
	PGresult *r = NULL;

	c->ok = false;
	if (pg)
		r = PQexec(pg, "SELECT (SELECT wal_sync FROM pg_stat_wal),"
			       " (SELECT xact_commit FROM pg_stat_database"
			       "  WHERE datname = current_database()),"
			       " current_setting('fsync'), current_setting('synchronous_commit'),"
			       " current_setting('wal_sync_method')");
	if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
	    sscanf(PQgetvalue(r, 0, 0), "%llu", &c->syncs) == 1 &&
	    sscanf(PQgetvalue(r, 0, 1), "%llu", &c->commits) == 1) {
		snprintf(c->durability, sizeof c->durability,
			 "fsync=%s synchronous_commit=%s wal_sync_method=%s", PQgetvalue(r, 0, 2),
			 PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 4));
		c->ok = true;
	}
	c->t = bench_mono_s();
	PQclear(r);
	PQfinish(pg);
	return c->ok;
}

static void pgc_window(const struct bench_opts *o, bool end, void *ctx, char *note, size_t len)
{
	struct pgc_counters *c0 = ctx, c1;

	(void)o;
	if (!end) {
		pgc_stats(c0);
		return;
	}
	if (!pgc_stats(&c1)) {
		snprintf(note, len, "group commit: no pg_stat_wal counters");
		return;
	}
	if (!c0->ok || c1.syncs <= c0->syncs || c1.t <= c0->t) {
		/* Backends flush their statistics about once a second: a short window may see
		 * none of them. */
		snprintf(note, len, "group commit: no WAL sync counted yet in the window; %s",
			 c1.durability);
		return;
	}
	snprintf(note, len,
		 "group commit (pg_stat_wal, pg_stat_database over the window, +-1 s): %.1f "
		 "commits per WAL sync, %.0f WAL syncs/s; %s",
		 (double)(c1.commits - c0->commits) / (double)(c1.syncs - c0->syncs),
		 (double)(c1.syncs - c0->syncs) / (c1.t - c0->t), c1.durability);
}

static int pgc_opt(int opt, const char *arg, void *ctx)
{
	if (opt != 'c')
		return -1;
	*(const char **)ctx = arg;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct bench_driver d = {
		.target = "pg",
		.ops = op_names,
		.n_ops = N_OPS,
		.cycle_desc = "UPDATE claim RETURNING epoch -> fenced UPDATE lease xN -> fenced "
			      "UPDATE state x2 -> fenced UPDATE release (each its own commit)",
		.setup = pgc_setup,
		.cycle = pgc_cycle,
		.teardown = pgc_teardown,
		.window = pgc_window,
		.window_ctx_size = sizeof(struct pgc_counters),
		.own_connection = true,
		.own_connection_parks = true,
		.err_legend = "0 = statement failed, -1 = touched or returned other than 1 row",
	};
	const char *extra = "user=postgres dbname=postgres";
	struct bench_opts o;
	PGconn *pg;
	int rc;

	if (bench_opts_parse(&o, argc, argv, "c:", pgc_opt, &extra,
			     "usage: pg_cycle -H SOCKET_DIR -p PORT [options]   (libpq's host and "
			     "port)\n"
			     "  -c CONNINFO more libpq keywords (\"user=postgres "
			     "dbname=postgres\")\n") != 0)
		return 2;
	if (o.cacert || o.unix_path) {
		fprintf(stderr, "pg_cycle: -C and -U are for the HTTP drivers (libpq reaches a unix "
				"socket with -H SOCKET_DIR -p PORT, TCP with -H 127.0.0.1 -p PORT)\n");
		return 2;
	}
	snprintf(conninfo, sizeof conninfo, "host='%s' port=%u %s", o.host, (unsigned)o.port,
		 extra);
	pg = bench_pg_open(conninfo, "pg_cycle");
	if (!pg)
		return 1;
	rc = bench_pg_exec(pg, table_sql, "pg_cycle");
	PQfinish(pg);
	if (rc != 0)
		return 1;
	return bench_run(&d, &o);
}
