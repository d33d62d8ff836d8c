/* Reaper support on the Mongo twin (DESIGN §6; ADR-096 §3, §6-§9): the candidate listing
 * with its un-leased arm, the repair listing with the un-leased residue, TRANSFER and the
 * exact release. Every batch cap is applied by the query itself (limit), never after.
 *
 * "Stripped" below means a claim without a lease or without an epoch: a foreign writer
 * dropped the field (ADR-096 §8). Its holder can neither renew nor write, so its lease
 * (if any) proves nothing about the holder's liveness: such a claim is never in the
 * expired arm, only in the un-leased arm, once claimed_at is older than the horizon
 * (a missing lease is an absence, where an expired one is evidence a heartbeat stopped).
 * The FS twin has no un-leased arm (ADR-096 §7): only this store can lose the fields. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <stdlib.h>
#include <string.h>

/* ---- small filter builders ---- */

static void exists(bson_t *d, const char *key, bool yes)
{
	bson_t ex;

	BSON_APPEND_DOCUMENT_BEGIN(d, key, &ex);
	BSON_APPEND_BOOL(&ex, "$exists", yes);
	bson_append_document_end(d, &ex);
}

static void date_cmp(bson_t *d, const char *key, const char *op, int64_t ms)
{
	bson_t cmp;

	BSON_APPEND_DOCUMENT_BEGIN(d, key, &cmp);
	BSON_APPEND_DATE_TIME(&cmp, op, ms);
	bson_append_document_end(d, &cmp);
}

/* Appends {"$or": [{lease missing}, {epoch missing}]} as element `key` of an $and array. */
static void stripped_append(bson_t *and_arr, const char *key)
{
	bson_t el, or, a;

	BSON_APPEND_DOCUMENT_BEGIN(and_arr, key, &el);
	BSON_APPEND_ARRAY_BEGIN(&el, "$or", &or);
	BSON_APPEND_DOCUMENT_BEGIN(&or, "0", &a);
	exists(&a, "claim.lease_until", false);
	bson_append_document_end(&or, &a);
	BSON_APPEND_DOCUMENT_BEGIN(&or, "1", &a);
	exists(&a, "claim_epoch", false);
	bson_append_document_end(&or, &a);
	bson_append_array_end(&el, &or);
	bson_append_document_end(and_arr, &el);
}

static void sort_limit(bson_t *opts, const char *key, size_t limit)
{
	bson_t sort;

	BSON_APPEND_DOCUMENT_BEGIN(opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, key, 1);
	BSON_APPEND_INT32(&sort, "_id", 1);
	bson_append_document_end(opts, &sort);
	BSON_APPEND_INT64(opts, "limit", (int64_t)limit);
}

/* Appends the cards of `more` not already in *v (by id); frees `more`. */
static enum core_rc cards_merge(struct core_card ***v, size_t *n, struct core_card **more,
				size_t m)
{
	struct core_card **nv = realloc(*v, (*n + m + 1) * sizeof(*nv));
	size_t i, j;
	bool dup;

	if (!nv) {
		store_cards_free(more, m);
		return CORE_ERR_NOMEM;
	}
	*v = nv;
	for (i = 0; i < m; i++) {
		for (j = 0, dup = false; j < *n && !dup; j++)
			dup = strcmp(nv[j]->id, more[i]->id) == 0;
		if (dup)
			core_card_free(more[i]);
		else
			nv[(*n)++] = more[i];
	}
	free(more);
	return CORE_OK;
}

/* ---- the candidate listing ---- */

/* Appends {$or: [{key > at}, {key: at, _id > id}]} (after the cursor, in the order (key, _id))
 * as element `el_key` of an $and array. */
static void after_append(bson_t *and_arr, const char *el_key, const char *key,
			 const struct store_reaper_cursor *after)
{
	bson_t el, or, a, cmp;

	BSON_APPEND_DOCUMENT_BEGIN(and_arr, el_key, &el);
	BSON_APPEND_ARRAY_BEGIN(&el, "$or", &or);
	BSON_APPEND_DOCUMENT_BEGIN(&or, "0", &a);
	date_cmp(&a, key, "$gt", after->at);
	bson_append_document_end(&or, &a);
	BSON_APPEND_DOCUMENT_BEGIN(&or, "1", &a);
	BSON_APPEND_DATE_TIME(&a, key, after->at);
	BSON_APPEND_DOCUMENT_BEGIN(&a, "_id", &cmp);
	BSON_APPEND_UTF8(&cmp, "$gt", after->id);
	bson_append_document_end(&a, &cmp);
	bson_append_document_end(&or, &a);
	bson_append_array_end(&el, &or);
	bson_append_document_end(and_arr, &el);
}

enum core_rc mgo_reaper_list_expired(struct store *st, size_t batch,
				     const struct store_reaper_cursor *after,
				     struct core_card ***out, size_t *n)
{
	struct mgo *m = mgo_of(st);
	struct core_card **v = NULL, **more = NULL;
	size_t nv = 0, nm = 0;
	struct mgo_conn c;
	bson_t filter, opts, and, el, or, a;
	enum core_rc rc = mgo_conn_open(m, &c);

	if (rc != CORE_OK)
		return rc;
	/* Arm 1: leased, fenced claims whose lease expired, oldest lease first (after the
	 * cursor; none when the cursor is in arm 2 already). */
	if (!after || after->arm == 0) {
		bson_init(&filter);
		bson_init(&opts);
		exists(&filter, "claim.marker", true);
		exists(&filter, "claim_epoch", true);
		date_cmp(&filter, "claim.lease_until", "$lt", c.now);
		if (after) {
			BSON_APPEND_ARRAY_BEGIN(&filter, "$and", &and);
			after_append(&and, "0", "claim.lease_until", after);
			bson_append_array_end(&filter, &and);
		}
		sort_limit(&opts, "claim.lease_until", batch);
		rc = mgo_cards_query(&c, &filter, &opts, &v, &nv);
		bson_destroy(&opts);
		bson_destroy(&filter);
	}
	/* Arm 2, after them: stripped claims older than the horizon (a claim without
	 * claimed_at is as old as it gets), oldest claim first. */
	if (rc == CORE_OK && nv < batch) {
		bson_init(&filter);
		bson_init(&opts);
		exists(&filter, "claim.marker", true);
		BSON_APPEND_ARRAY_BEGIN(&filter, "$and", &and);
		stripped_append(&and, "0");
		BSON_APPEND_DOCUMENT_BEGIN(&and, "1", &el);
		BSON_APPEND_ARRAY_BEGIN(&el, "$or", &or);
		BSON_APPEND_DOCUMENT_BEGIN(&or, "0", &a);
		date_cmp(&a, "claim.claimed_at", "$lt", c.now - m->unleased_horizon_ms);
		bson_append_document_end(&or, &a);
		BSON_APPEND_DOCUMENT_BEGIN(&or, "1", &a);
		exists(&a, "claim.claimed_at", false);
		bson_append_document_end(&or, &a);
		bson_append_array_end(&el, &or);
		bson_append_document_end(&and, &el);
		if (after && after->arm == 1)
			after_append(&and, "2", "claim.claimed_at", after);
		bson_append_array_end(&filter, &and);
		sort_limit(&opts, "claim.claimed_at", batch - nv);
		rc = mgo_cards_query(&c, &filter, &opts, &more, &nm);
		if (rc == CORE_OK)
			rc = cards_merge(&v, &nv, more, nm);
		bson_destroy(&opts);
		bson_destroy(&filter);
	}
	mgo_conn_close(&c);
	if (rc != CORE_OK) {
		store_cards_free(v, nv);
		return rc;
	}
	*out = v;
	*n = nv;
	return CORE_OK;
}

/* ---- the repair listing ---- */

/* Appends {"$or": [{board: b, state: running(b)} ...]} for every board with a running column
 * as element `key` of an $and array. *none: no board has one. */
static enum core_rc running_columns_append(struct store *st, bson_t *and_arr, const char *key,
					   bool *none)
{
	struct core_board *boards = NULL;
	size_t nb = 0, i, k = 0;
	bson_t el, or, a;
	char ibuf[16];
	const char *ikey;
	enum core_rc rc = mgo_board_list(st, &boards, &nb);

	*none = true;
	if (rc != CORE_OK)
		return rc;
	BSON_APPEND_DOCUMENT_BEGIN(and_arr, key, &el);
	BSON_APPEND_ARRAY_BEGIN(&el, "$or", &or);
	for (i = 0; i < nb; i++) {
		if (!boards[i].running)
			continue;
		bson_uint32_to_string((uint32_t)k++, &ikey, ibuf, sizeof(ibuf));
		BSON_APPEND_DOCUMENT_BEGIN(&or, ikey, &a);
		BSON_APPEND_UTF8(&a, "board", boards[i].name);
		BSON_APPEND_UTF8(&a, "state", boards[i].running);
		bson_append_document_end(&or, &a);
	}
	bson_append_array_end(&el, &or);
	bson_append_document_end(and_arr, &el);
	*none = k == 0;
	store_boards_free(boards, nb);
	return CORE_OK;
}

enum core_rc mgo_reaper_list_repair(struct store *st, size_t batch, struct core_card ***out,
				    size_t *n)
{
	struct core_card **v = NULL, **more = NULL;
	size_t nv = 0, nm = 0;
	struct mgo_conn c;
	bson_t filter, opts, range, and, ne;
	bool none = true;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	/* DESIGN §17: capacity slots leaked by a crash are repaired first (mongo_slots_repair.c);
	 * a failure is logged there and leaves them to the next pass. */
	{
		size_t freed = 0;

		(void)mgo_slots_repair(&c, batch, &freed);
	}
	/* Arm 1: abandoned recovery claims ("reaper:" markers, a range on the index) whose
	 * lease expired. */
	bson_init(&filter);
	bson_init(&opts);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim.marker", &range);
	BSON_APPEND_UTF8(&range, "$gte", CORE_RECOVERY_PREFIX);
	BSON_APPEND_UTF8(&range, "$lt", "reaper;"); /* ';' follows ':' */
	bson_append_document_end(&filter, &range);
	date_cmp(&filter, "claim.lease_until", "$lt", c.now);
	sort_limit(&opts, "claim.claimed_at", batch);
	rc = mgo_cards_query(&c, &filter, &opts, &v, &nv);
	bson_destroy(&opts);
	bson_destroy(&filter);
	/* Arm 2: the un-leased residue (ADR-096 §9): stripped claims in their board's running
	 * column with a recorded run. The cap is the query's: a post-hoc filter would let the
	 * conserved population starve the batch. */
	if (rc == CORE_OK && nv < batch) {
		bson_init(&filter);
		bson_init(&opts);
		exists(&filter, "claim.marker", true);
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "last_run_id", &ne);
		BSON_APPEND_BOOL(&ne, "$exists", true);
		BSON_APPEND_NULL(&ne, "$ne");
		bson_append_document_end(&filter, &ne);
		BSON_APPEND_ARRAY_BEGIN(&filter, "$and", &and);
		stripped_append(&and, "0");
		rc = running_columns_append(st, &and, "1", &none);
		bson_append_array_end(&filter, &and);
		sort_limit(&opts, "claim.claimed_at", batch - nv);
		if (rc == CORE_OK && !none)
			rc = mgo_cards_query(&c, &filter, &opts, &more, &nm);
		if (rc == CORE_OK && !none)
			rc = cards_merge(&v, &nv, more, nm);
		bson_destroy(&opts);
		bson_destroy(&filter);
	}
	mgo_conn_close(&c);
	if (rc == CORE_OK && !v && !(v = calloc(1, sizeof(*v))))
		rc = CORE_ERR_NOMEM;
	if (rc != CORE_OK) {
		store_cards_free(v, nv);
		return rc;
	}
	*out = v;
	*n = nv;
	return CORE_OK;
}

/* ---- TRANSFER ---- */

struct transfer_arg {
	const char *id;
	const struct core_token *prev;
	const char *marker;
	int64_t lease_ms;
};

static bool stripped(const struct core_card *c)
{
	return c->claim.present && (!c->claim.has_lease || !c->has_epoch);
}

/* The un-leased arm's transfer: the claim is still exactly the listed one (marker, and epoch
 * or its absence, which the listing reports as epoch 0: no claim ever has epoch 0) and older
 * than the horizon. core's transfer stamps the new hold; it is handed the stripped claim as
 * an expired, fenced one, which is what the horizon makes of it. */
static enum core_rc transfer_stripped(struct mgo_conn *c, struct core_card *now,
				      const struct transfer_arg *x)
{
	if (strcmp(now->claim.marker, x->prev->marker) != 0 ||
	    (now->has_epoch ? now->claim_epoch != x->prev->epoch : x->prev->epoch != 0) ||
	    now->claim.claimed_at >= c->now - c->m->unleased_horizon_ms)
		return CORE_ERR_CLAIM_CONFLICT;
	now->has_epoch = true;
	now->claim_epoch = x->prev->epoch;
	now->claim.has_lease = true;
	now->claim.lease_until = c->now - 1;
	return core_claim_transfer(now, x->prev, x->marker, x->lease_ms, c->now, c->now);
}

static enum core_rc transfer_once(struct mgo_conn *c, const void *arg, bool *hit,
				  struct core_card **out)
{
	const struct transfer_arg *x = arg;
	struct mgo_attempt a;
	struct mgo_evq q;
	enum core_rc rc = mgo_attempt_begin_card(c, x->id, &a);

	mgo_evq_init(&q, c->m);
	if (rc == CORE_OK && !a.was->claim.present)
		rc = CORE_ERR_CLAIM_CONFLICT;
	if (rc == CORE_OK)
		rc = stripped(a.was) ? transfer_stripped(c, a.now, x)
				     : core_claim_transfer(a.now, x->prev, x->marker, x->lease_ms,
							   c->now, c->now);
	if (rc == CORE_OK) {
		mgo_evq_add(&q, CORE_EV_CARD_CLAIMED, a.now->board, a.now->id, c->actor, "watchdog",
			    c->now,
			    json_pack("{sssIs{ssso}}", "marker", x->marker, "epoch",
				      (json_int_t)a.now->claim_epoch, "reclaimed_from", "marker",
				      x->prev->marker, "epoch",
				      a.was->has_epoch ? json_integer(a.was->claim_epoch)
						       : json_null()));
		/* The whole precondition: the claim exactly as listed, and its lease (or its
		 * absence) unchanged since the read that judged it expired. The capacity slots
		 * of the claim it replaces follow it (DESIGN §17: the same column's). */
		c->slot_epoch_set = a.now->claim_epoch;
		rc = mgo_card_cas(c, a.was, a.now, MGO_PRE_CLAIM | MGO_PRE_LEASE, &q, hit, out);
	}
	mgo_evq_release(&q);
	mgo_attempt_end(&a);
	return rc;
}

enum core_rc mgo_reaper_transfer(struct store *st, const char *id, const struct core_token *prev,
				 const char *marker, int64_t lease_ms, struct core_card **out)
{
	struct transfer_arg x = {id, prev, marker, lease_ms};

	return mgo_card_retry(st, NULL, transfer_once, &x, CORE_ERR_CLAIM_CONFLICT, out);
}

/* ---- the exact release ---- */

struct exact_arg {
	const char *id;
	const struct core_card *expect;
	bool retry; /* DESIGN §17: the card goes back to the pool: an attempt counted */
};

static enum core_rc release_exact_once(struct mgo_conn *c, const void *arg, bool *hit,
				       struct core_card **out)
{
	const struct exact_arg *x = arg;
	struct mgo_attempt a;
	enum core_rc rc = x->retry ? mgo_attempt_begin(c, x->id, &a)
				   : mgo_attempt_begin_card(c, x->id, &a);

	if (rc == CORE_OK && !core_claim_matches(a.was, x->expect))
		rc = CORE_ERR_CLAIM_CONFLICT;
	if (rc == CORE_OK && x->retry)
		rc = mgo_retry_release_write(c, &a, "watchdog", hit, out);
	else if (rc == CORE_OK)
		rc = mgo_release_write(c, &a, "watchdog", hit, out);
	mgo_attempt_end(&a);
	return rc;
}

enum core_rc mgo_reaper_release_exact_retry(struct store *st, const char *id,
					    const struct core_card *expect,
					    const struct store_actor *actor)
{
	struct exact_arg x = {id, expect, true};

	return mgo_card_retry(st, actor, release_exact_once, &x, CORE_ERR_CLAIM_CONFLICT, NULL);
}

enum core_rc mgo_reaper_release_exact(struct store *st, const char *id,
				      const struct core_card *expect,
				      const struct store_actor *actor)
{
	struct exact_arg x = {id, expect, false};

	return mgo_card_retry(st, actor, release_exact_once, &x, CORE_ERR_CLAIM_CONFLICT, NULL);
}
