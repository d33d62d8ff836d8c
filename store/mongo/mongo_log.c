/* The driver's own log lines (mongoc_log_set_handler, installed once with mongoc_init).
 *
 * libmongoc's default handler prints every level but TRACE, and INFO and DEBUG on stdout,
 * outside boardd's log: while the database is unreachable, its topology monitor alone writes
 * a DEBUG line per heartbeat (two a second) for as long as the outage lasts. boardd reports
 * the failures that matter itself ("boardd: mongo: <op>: <driver error>", mgo_fail) and
 * /readyz says the store is down, so here the driver's INFO, DEBUG and TRACE lines are
 * dropped, and its warnings and errors go to stderr with boardd's prefix, at most one line
 * per MGO_LOG_QUIET_MS; the next line printed says how many were held back meanwhile. */
#include "store/mongo/mongo_db.h"

#include <inttypes.h>
#include <stdio.h>

bool mgo_log_pass(struct mgo_log_gate *g, mongoc_log_level_t level, int64_t now_ms,
		  unsigned long *held)
{
	*held = 0;
	if (level > MONGOC_LOG_LEVEL_WARNING)
		return false; /* MESSAGE, INFO, DEBUG, TRACE */
	if (g->printed && now_ms - g->last_ms < MGO_LOG_QUIET_MS) {
		g->held++;
		return false;
	}
	*held = g->held;
	g->held = 0;
	g->last_ms = now_ms;
	g->printed = true;
	return true;
}

void mgo_log_write(FILE *out, struct mgo_log_gate *g, mongoc_log_level_t level,
		   const char *domain, const char *message, int64_t now_ms)
{
	unsigned long held;
	int64_t since = now_ms - g->last_ms;

	if (!mgo_log_pass(g, level, now_ms, &held))
		return;
	if (held)
		fprintf(out,
			"boardd: mongo driver %s (%s): %s (%lu more driver lines held back in the "
			"last %" PRId64 " ms)\n",
			mongoc_log_level_str(level), domain ? domain : "-", message ? message : "",
			held, since);
	else
		fprintf(out, "boardd: mongo driver %s (%s): %s\n", mongoc_log_level_str(level),
			domain ? domain : "-", message ? message : "");
}

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mgo_log_gate log_gate;

/* Any thread of the driver's (the monitors' too) may call it. */
static void on_driver_log(mongoc_log_level_t level, const char *domain, const char *message,
			  void *user)
{
	(void)user;
	pthread_mutex_lock(&log_mu);
	mgo_log_write(stderr, &log_gate, level, domain, message, mgo_mono_ms());
	pthread_mutex_unlock(&log_mu);
}

void mgo_log_install(void)
{
	mongoc_log_set_handler(on_driver_log, NULL);
}
