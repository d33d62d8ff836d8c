/* bench_pg — the libpq pieces the PostgreSQL drivers share (drain.c, pg_cycle.c): opening a
 * connection, telling a good result from a bad one, preparing a statement or failing loudly.
 * Built only when libpq is found (BENCH_HAVE_PQ). */
#ifndef BOARDD_BENCH_PG_H
#define BOARDD_BENCH_PG_H

#include <stdbool.h>

#include <libpq-fe.h>

/* Connects with conninfo; NULL on failure, with "<who>: pg: <libpq's message>" on stderr.
 * Notices (a CREATE ... IF NOT EXISTS that skipped) are dropped: they are not figures.
 * Caller frees with PQfinish. */
PGconn *bench_pg_open(const char *conninfo, const char *who);

/* true when r is a command or a query that succeeded. */
bool bench_pg_ok(const PGresult *r);

/* Runs sql (one or more statements, no parameters); 0, or -1 with the error on stderr. */
int bench_pg_exec(PGconn *pg, const char *sql, const char *who);

/* Prepares `name` on pg (parameter types inferred); 0, or -1 with the error on stderr. */
int bench_pg_prepare(PGconn *pg, const char *name, const char *sql, int n_params,
		     const char *who);

#endif
