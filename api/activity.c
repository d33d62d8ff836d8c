/* GET /v1/boards/{b}/activity: the board's last hour per minute, for the UI's charts (DESIGN
 * §21) — its claims, completions, failures and reaper actions (this replica's counts of the
 * board, from metrics/activity.h's table), and its cards per column (a gauge sampled each
 * minute by server/sampler.c through api_activity_sample, and here when the board's last
 * sample is more than ACTIVITY_FRESH_MS old). In memory: per replica, reset on restart. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"
#include "metrics/activity.h"

#include <stdlib.h>
#include <string.h>

enum core_rc api_activity_sample(struct store *st, struct metrics *m, const struct core_board *b,
				 int64_t now_ms, const struct metrics_sink *stats, bool use)
{
	struct activity *ring = metrics_activity(m);
	struct metrics_sink *own = NULL;
	uint64_t counts[ACTIVITY_COLS_MAX] = {0};
	const char *cols[ACTIVITY_COLS_MAX];
	size_t c;

	if (!ring)
		return CORE_OK;
	if (!stats) {
		/* The store's own counts (boardd_cards{board,state}, what /metrics serves): from its
		 * indexes, never a copy of the cards. */
		enum core_rc rc;

		if (!(own = metrics_sink_new()))
			return CORE_ERR_NOMEM;
		if ((rc = store_stats(st, own)) != CORE_OK) {
			metrics_sink_free(own);
			return rc;
		}
		stats = own;
	}
	for (c = 0; c < b->n_cols && c < ACTIVITY_COLS_MAX; c++) {
		const char *labels[] = {b->name, b->cols[c].name};
		double v = 0;

		cols[c] = b->cols[c].name;
		counts[c] = metrics_sink_get(stats, METRICS_CARDS, labels, &v) && v > 0 ? (uint64_t)v : 0;
	}
	metrics_sink_free(own);
	activity_sample(ring, b->name, cols, counts, c, now_ms, use);
	return CORE_OK;
}

/* The board's own counts: a token that may read the board may read them. */
static json_t *series_json(const struct activity_view *v, size_t from)
{
	json_t *o = json_object();
	int s;

	for (s = 0; o && s < ACTIVITY_SERIES_; s++) {
		json_t *a = json_array();
		size_t k;

		for (k = from; a && k < ACTIVITY_MINUTES; k++)
			json_array_append_new(a, json_integer((json_int_t)v->count[k][s]));
		json_object_set_new(o, activity_series_name((enum activity_series)s),
				    a ? a : json_null());
	}
	return o;
}

enum core_rc api_h_board_activity(struct api_req *r)
{
	struct core_board b = {0};
	struct activity *ring = metrics_activity(api_metrics(r->api));
	struct activity_view *v;
	const char *name = r->n_params ? r->params[0] : NULL, *q;
	int64_t now = activity_now_ms(), minutes = ACTIVITY_MINUTES;
	json_t *mins, *columns;
	char at[CORE_TIME_BUF], since[CORE_TIME_BUF], *end = NULL;
	size_t c, k, from;
	enum core_rc rc;

	if (!core_name_valid(name))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	if ((rc = api_auth_board(r, name)) != CORE_OK)
		return rc;
	if ((rc = api_query(r, "minutes", &q)) != CORE_OK)
		return rc;
	if (q) {
		minutes = strtoll(q, &end, 10);
		if (!*q || *end || minutes < 1 || minutes > ACTIVITY_MINUTES)
			return api_fail(r, CORE_ERR_BAD_REQUEST, "minutes must be an integer 1..%d",
					ACTIVITY_MINUTES);
	}
	rc = store_board_get(r->api->st, name, &b);
	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, rc, "no board %s", name);
	if (rc != CORE_OK)
		return rc;
	/* The sampler thread (server/sampler.c) samples each minute; a reader re-counts a board
	 * whose sample is older than ACTIVITY_FRESH_MS, so the last minute shows the board as it
	 * is (at most one count per board every 10 s, however many read). */
	if (ring && !activity_sampled(ring, name, now))
		rc = api_activity_sample(r->api->st, api_metrics(r->api), &b, now, NULL, true);
	else
		activity_use(ring, name, now); /* a look keeps the board's place, as a count does */
	core_board_release(&b);
	if (rc != CORE_OK)
		return rc;
	if (!(v = malloc(sizeof(*v))))
		return CORE_ERR_NOMEM;
	activity_read(ring, name, now, v);
	from = ACTIVITY_MINUTES - (size_t)minutes;
	mins = json_array();
	columns = json_array();
	for (k = from; mins && k < ACTIVITY_MINUTES; k++)
		json_array_append_new(mins, json_string(core_time_format(v->minute[k], at)));
	for (c = 0; columns && c < v->n_cols; c++) {
		json_t *cards = json_array();

		for (k = from; cards && k < ACTIVITY_MINUTES; k++)
			json_array_append_new(cards, v->sampled[k]
							     ? json_integer((json_int_t)v->gauge[k][c])
							     : json_null());
		json_array_append_new(columns, json_pack("{s:s, s:o*}", "name", v->cols[c],
							 "cards", cards));
	}
	{
		json_t *out = json_pack(
			"{s:s, s:I, s:o*, s:o*, s:o*, s:o*}", "board", name, "minute_ms",
			(json_int_t)60000, "minutes", mins, "series", series_json(v, from),
			"columns", columns, "counts_since",
			v->since > 0 ? json_string(core_time_format(v->since, since)) : json_null());

		free(v);
		return api_reply(r, 200, out);
	}
}
