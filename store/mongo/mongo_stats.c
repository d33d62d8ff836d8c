/* store_ops.stats for the Mongo twin: cards by board and column and the claims, counted by the
 * server at scrape time; the driver's round trips and errors, counted as they happen through
 * the client pool's monitoring callbacks (mgo_stats_attach). */
#include "store/mongo/mongo.h"

static void on_started(const mongoc_apm_command_started_t *ev)
{
	struct mgo *m = mongoc_apm_command_started_get_context(ev);

	atomic_fetch_add_explicit(&m->round_trips, 1, memory_order_relaxed);
}

static void on_succeeded(const mongoc_apm_command_succeeded_t *ev)
{
	struct mgo *m = mongoc_apm_command_succeeded_get_context(ev);
	int64_t us = mongoc_apm_command_succeeded_get_duration(ev);

	metrics_hist_observe(&m->cmd_duration, METRICS_B_MONGO_US, us > 0 ? (uint64_t)us : 0);
}

static void on_failed(const mongoc_apm_command_failed_t *ev)
{
	struct mgo *m = mongoc_apm_command_failed_get_context(ev);

	atomic_fetch_add_explicit(&m->err_command, 1, memory_order_relaxed);
}

static void on_heartbeat_failed(const mongoc_apm_server_heartbeat_failed_t *ev)
{
	struct mgo *m = mongoc_apm_server_heartbeat_failed_get_context(ev);

	atomic_fetch_add_explicit(&m->err_heartbeat, 1, memory_order_relaxed);
}

bool mgo_stats_attach(struct mgo *m)
{
	mongoc_apm_callbacks_t *cb = mongoc_apm_callbacks_new();
	bool ok;

	if (!cb)
		return false;
	mongoc_apm_set_command_started_cb(cb, on_started);
	mongoc_apm_set_command_succeeded_cb(cb, on_succeeded);
	mongoc_apm_set_command_failed_cb(cb, on_failed);
	mongoc_apm_set_server_heartbeat_failed_cb(cb, on_heartbeat_failed);
	ok = mongoc_client_pool_set_apm_callbacks(m->pool, cb, m);
	mongoc_apm_callbacks_destroy(cb);
	return ok;
}

/* A scrape must not outlast Prometheus' scrape timeout (10 s by default): each count is
 * bounded on the server; an unreachable server costs the server selection timeout (5 s
 * unless the URI says otherwise) once, since the first failure ends the scrape's questions. */
#define MGO_STATS_MAX_TIME_MS 2000

/* count_documents(filter) as a double; STORE_UNAVAILABLE on a driver error. */
static enum core_rc count(struct mgo_conn *c, const bson_t *filter, double *n)
{
	bson_error_t e;
	bson_t opts = BSON_INITIALIZER;
	int64_t cnt;

	BSON_APPEND_INT32(&opts, "maxTimeMS", MGO_STATS_MAX_TIME_MS);
	cnt = mongoc_collection_count_documents(c->cards, filter, &opts, NULL, NULL, &e);
	bson_destroy(&opts);

	if (cnt < 0)
		return mgo_error("stats: count cards", &e);
	*n = (double)cnt;
	return CORE_OK;
}

/* Cards of every column of every board (one count each: boards have a handful of columns). */
static enum core_rc cards_collect(struct mgo_conn *c, struct metrics_sink *out)
{
	struct core_board *boards = NULL;
	size_t n = 0, i, j;
	enum core_rc rc = store_board_list(&c->m->base, &boards, &n);

	for (i = 0; rc == CORE_OK && i < n; i++) {
		for (j = 0; rc == CORE_OK && j < boards[i].n_cols; j++) {
			const char *labels[2] = {boards[i].name, boards[i].cols[j].name};
			bson_t filter = BSON_INITIALIZER;
			double v = 0;

			BSON_APPEND_UTF8(&filter, "board", labels[0]);
			BSON_APPEND_UTF8(&filter, "state", labels[1]);
			rc = count(c, &filter, &v);
			bson_destroy(&filter);
			if (rc == CORE_OK)
				metrics_sink_value(out, METRICS_CARDS, labels, v);
		}
	}
	store_boards_free(boards, n);
	return rc;
}

static enum core_rc claims_collect(struct mgo_conn *c, struct metrics_sink *out)
{
	bson_t filter = BSON_INITIALIZER, cond;
	double held = 0, expired = 0;
	enum core_rc rc;

	BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim.marker", &cond);
	BSON_APPEND_BOOL(&cond, "$exists", true);
	bson_append_document_end(&filter, &cond);
	rc = count(c, &filter, &held);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim.lease_until", &cond);
	BSON_APPEND_DATE_TIME(&cond, "$lt", c->now);
	bson_append_document_end(&filter, &cond);
	if (rc == CORE_OK)
		rc = count(c, &filter, &expired);
	bson_destroy(&filter);
	if (rc != CORE_OK)
		return rc;
	metrics_sink_value(out, METRICS_CLAIMS_HELD, NULL, held);
	metrics_sink_value(out, METRICS_CLAIMS_EXPIRED, NULL, expired);
	return CORE_OK;
}

enum core_rc mgo_stats(struct store *st, struct metrics_sink *out)
{
	struct mgo *m = mgo_of(st);
	const char *kind;
	struct mgo_conn c;
	enum core_rc rc;

	/* The driver's counters first: they matter most when the server cannot be reached. */
	metrics_sink_value(out, METRICS_MONGO_ROUND_TRIPS, NULL,
			   (double)atomic_load_explicit(&m->round_trips, memory_order_relaxed));
	kind = "command";
	metrics_sink_value(out, METRICS_MONGO_ERRORS, &kind,
			   (double)atomic_load_explicit(&m->err_command, memory_order_relaxed));
	kind = "heartbeat";
	metrics_sink_value(out, METRICS_MONGO_ERRORS, &kind,
			   (double)atomic_load_explicit(&m->err_heartbeat, memory_order_relaxed));
	metrics_sink_hist(out, METRICS_MONGO_DURATION, NULL, &m->cmd_duration);
	rc = mgo_conn_open(m, &c);
	if (rc != CORE_OK)
		return rc;
	rc = cards_collect(&c, out);
	if (rc == CORE_OK)
		rc = claims_collect(&c, out);
	mgo_conn_close(&c);
	return rc;
}
