/* store_ops.stats for the Mongo twin: cards by board and column and the claims, counted by the
 * server at scrape time; the driver's round trips and errors, counted as they happen through
 * the client pool's monitoring callbacks (mgo_stats_attach). */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"

#include <stdlib.h>
#include <string.h>

/* The commands this thread started (the monitoring callbacks run on the thread that sends
 * the command): what lets a test count one op's round trips while other threads talk. */
static _Thread_local uint64_t trips_here;

uint64_t mgo_round_trips_here(void)
{
	return trips_here;
}

static void on_started(const mongoc_apm_command_started_t *ev)
{
	struct mgo *m = mongoc_apm_command_started_get_context(ev);

	atomic_fetch_add_explicit(&m->round_trips, 1, memory_order_relaxed);
	trips_here++;
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

/* The breaker's other source: the driver's view of the topology (mongo_breaker.c). */
static void on_topology_changed(const mongoc_apm_topology_changed_t *ev)
{
	struct mgo *m = mongoc_apm_topology_changed_get_context(ev);

	mgo_breaker_topology(m,
			     mongoc_topology_description_has_writable_server(
				     mongoc_apm_topology_changed_get_previous_description(ev)),
			     mongoc_topology_description_has_writable_server(
				     mongoc_apm_topology_changed_get_new_description(ev)));
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
	mongoc_apm_set_topology_changed_cb(cb, on_topology_changed);
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

/* A board's cards by column: one aggregate ($match board, $group by state), so a scrape
 * asks once per board instead of once per column (on FerretDB each question reads every
 * card). A column without cards reads 0. */
static enum core_rc board_collect(struct mgo_conn *c, const struct core_board *b,
				  struct metrics_sink *out)
{
	bson_t pipeline = BSON_INITIALIZER, stage, match, group, sum, opts = BSON_INITIALIZER;
	double *v = calloc(b->n_cols ? b->n_cols : 1, sizeof(*v));
	mongoc_cursor_t *cur;
	const bson_t *d;
	bson_iter_t it;
	bson_error_t e;
	enum core_rc rc = v ? CORE_OK : CORE_ERR_NOMEM;
	int64_t cnt;
	size_t j;

	if (rc != CORE_OK)
		return rc;
	BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "0", &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&stage, "$match", &match);
	BSON_APPEND_UTF8(&match, "board", b->name);
	bson_append_document_end(&stage, &match);
	bson_append_document_end(&pipeline, &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "1", &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&stage, "$group", &group);
	BSON_APPEND_UTF8(&group, "_id", "$state");
	BSON_APPEND_DOCUMENT_BEGIN(&group, "n", &sum);
	BSON_APPEND_INT32(&sum, "$sum", 1);
	bson_append_document_end(&group, &sum);
	bson_append_document_end(&stage, &group);
	bson_append_document_end(&pipeline, &stage);
	BSON_APPEND_INT32(&opts, "maxTimeMS", MGO_STATS_MAX_TIME_MS);
	cur = mongoc_collection_aggregate(c->cards, MONGOC_QUERY_NONE, &pipeline, &opts, NULL);
	while (mongoc_cursor_next(cur, &d)) {
		cnt = 0;
		if (!bson_iter_init_find(&it, d, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
			continue;
		for (j = 0; j < b->n_cols; j++)
			if (strcmp(b->cols[j].name, bson_iter_utf8(&it, NULL)) == 0)
				break;
		if (j < b->n_cols && bson_iter_init_find(&it, d, "n") && mgo_iter_i64(&it, &cnt))
			v[j] = (double)cnt;
	}
	if (mongoc_cursor_error(cur, &e))
		rc = mgo_error("stats: cards by column", &e);
	mongoc_cursor_destroy(cur);
	bson_destroy(&opts);
	bson_destroy(&pipeline);
	for (j = 0; rc == CORE_OK && j < b->n_cols; j++) {
		const char *labels[2] = {b->name, b->cols[j].name};

		metrics_sink_value(out, METRICS_CARDS, labels, v[j]);
	}
	free(v);
	return rc;
}

/* Cards of every column of every board. */
static enum core_rc cards_collect(struct mgo_conn *c, struct metrics_sink *out)
{
	struct core_board *boards = NULL;
	size_t n = 0, i;
	enum core_rc rc = store_board_list(&c->m->base, &boards, &n);

	for (i = 0; rc == CORE_OK && i < n; i++)
		rc = board_collect(c, &boards[i], out);
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
	mgo_breaker_collect(m, out);
	mgo_holes_collect(m, out);
	rc = mgo_conn_open(m, &c);
	if (rc != CORE_OK)
		return rc;
	rc = cards_collect(&c, out);
	if (rc == CORE_OK)
		rc = claims_collect(&c, out);
	mgo_conn_close(&c);
	return rc;
}
