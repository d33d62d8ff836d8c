/* The libpq helpers shared by the PostgreSQL drivers (bench_pg.h). */
#include "bench/bench_pg.h"

#include <stdio.h>

static void pg_notice_drop(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

PGconn *bench_pg_open(const char *conninfo, const char *who)
{
	PGconn *pg = PQconnectdb(conninfo);

	if (PQstatus(pg) != CONNECTION_OK) {
		fprintf(stderr, "%s: pg: %s", who, PQerrorMessage(pg));
		PQfinish(pg);
		return NULL;
	}
	PQsetNoticeProcessor(pg, pg_notice_drop, NULL);
	return pg;
}

bool bench_pg_ok(const PGresult *r)
{
	ExecStatusType s = PQresultStatus(r);

	return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

int bench_pg_exec(PGconn *pg, const char *sql, const char *who)
{
	PGresult *r = PQexec(pg, sql);
	int rc = 0;

	if (!bench_pg_ok(r)) {
		fprintf(stderr, "%s: pg: %s", who, PQerrorMessage(pg));
		rc = -1;
	}
	PQclear(r);
	return rc;
}

int bench_pg_prepare(PGconn *pg, const char *name, const char *sql, int n_params,
		     const char *who)
{
	PGresult *r = PQprepare(pg, name, sql, n_params, NULL);
	int rc = 0;

	if (!bench_pg_ok(r)) {
		fprintf(stderr, "%s: pg: prepare %s: %s", who, name, PQerrorMessage(pg));
		rc = -1;
	}
	PQclear(r);
	return rc;
}
