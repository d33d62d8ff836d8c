/* DESIGN §17 on the Mongo twin: the retry step of an owned release (attempts, backoff, the
 * filing when exhausted) and the claimed counts (store_ops.board_claimed). The capacity slots
 * are mongo_slots.c's; claim-next's schedule and wake_at are mongo_next.c's. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint32_t mgo_rand32(void)
{
	static _Thread_local uint64_t s;
	uint64_t z;

	if (!s) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&s;
	}
	z = (s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (uint32_t)((z ^ (z >> 31)) >> 16);
}

/* ---- retry ---- */

enum core_rc mgo_retry_apply(struct mgo_conn *c, struct mgo_attempt *a, const char *event_reason,
			     struct mgo_evq *q, json_t **release_extra)
{
	struct core_retry pol;
	struct core_gave_up g;
	enum core_retry_outcome o;
	const char *reason;
	char t[CORE_TIME_BUF];
	bool moved = false;
	enum core_rc rc;

	*release_extra = NULL;
	/* The work was done: a completion counts no attempt. */
	if (a->b.completed && strcmp(a->now->state, a->b.completed) == 0)
		return CORE_OK;
	store_retry_of(&c->m->base, &a->b, &pol);
	o = core_retry_count(a->now, &pol, c->now, mgo_rand32());
	if (o == CORE_RETRY_LATER) {
		*release_extra = json_pack("{sbsiss}", "retry", 1, "attempts", (int)a->now->attempts,
					   "not_before", core_time_format(a->now->not_before, t));
		return *release_extra ? CORE_OK : CORE_ERR_NOMEM;
	}
	if (!a->b.failed) { /* no failed column to file into: the release alone */
		*release_extra = json_pack("{sbsi}", "retry", 1, "attempts", (int)a->now->attempts);
		return *release_extra ? CORE_OK : CORE_ERR_NOMEM;
	}
	/* EXHAUSTED: filed into the failed column, gave_up {attempts_exhausted}, then released.
	 * The reaper's filing stays a machine event (its reason). */
	reason = core_is_machine_reason(event_reason) ? event_reason
						      : CORE_GAVE_UP_ATTEMPTS_EXHAUSTED;
	rc = mgo_state_apply(c, a->now, a->b.failed, reason,
			     json_pack("{ss}", "cause", CORE_GAVE_UP_ATTEMPTS_EXHAUSTED), q, &moved);
	if (rc != CORE_OK)
		return rc;
	g = (struct core_gave_up){.set = true,
				  .reason = (char *)CORE_GAVE_UP_ATTEMPTS_EXHAUSTED,
				  .run_id = a->now->last_run_id,
				  .state = a->b.failed,
				  .at = c->now};
	rc = core_card_gave_up_set(a->now, &g, c->now);
	if (rc != CORE_OK)
		return rc;
	mgo_evq_add(q, CORE_EV_CARD_GAVE_UP, a->now->board, a->now->id, c->actor, reason, c->now,
		    json_pack("{s:o}", "gave_up", store_gave_up_to_json(&a->now->gave_up)));
	*release_extra = json_pack("{sbsi}", "retry", 1, "attempts", (int)a->now->attempts);
	return *release_extra ? CORE_OK : CORE_ERR_NOMEM;
}

/* ---- counts ---- */

static enum core_rc count_from(void *ctx, const bson_t *doc)
{
	struct {
		const struct core_board *b;
		int64_t *per_col, *total;
	} *x = ctx;
	bson_iter_t it, sub;
	size_t i;

	(*x->total)++;
	if (!bson_iter_init_find(&it, doc, "claim") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
	    !bson_iter_recurse(&it, &sub) || !bson_iter_find(&sub, "from") ||
	    !BSON_ITER_HOLDS_UTF8(&sub))
		return CORE_OK; /* a claim older than §17: no column's */
	for (i = 0; i < x->b->n_cols; i++)
		if (strcmp(x->b->cols[i].name, bson_iter_utf8(&sub, NULL)) == 0)
			x->per_col[i]++;
	return CORE_OK;
}

/* The live claims on b by claim.from: the cards themselves (expired claims included, until
 * the reaper acts), one query on the board's claimed cards. */
enum core_rc mgo_board_claimed(struct store *st, const struct core_board *b, int64_t *per_col,
			       int64_t *total)
{
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	rc = mgo_board_claimed_on(&c, b, per_col, total);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_board_claimed_on(struct mgo_conn *c, const struct core_board *b,
				  int64_t *per_col, int64_t *total)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, ex, proj;
	struct {
		const struct core_board *b;
		int64_t *per_col, *total;
	} x = {b, per_col, total};
	enum core_rc rc;

	memset(per_col, 0, b->n_cols * sizeof(*per_col));
	*total = 0;
	BSON_APPEND_UTF8(&filter, "board", b->name);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim.marker", &ex);
	BSON_APPEND_BOOL(&ex, "$exists", true);
	bson_append_document_end(&filter, &ex);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "claim.from", 1);
	bson_append_document_end(&opts, &proj);
	rc = mgo_find_each(c->cards, &filter, &opts, count_from, &x);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc;
}
