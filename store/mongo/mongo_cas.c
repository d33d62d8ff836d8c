/* The one write shape of the Mongo twin's cards: read the document, let core decide on a
 * private copy, then write the difference with ONE findAndModify whose filter carries the
 * precondition the decision was taken on. A concurrent change to any of those fields makes
 * the update a clean miss; the caller re-reads and lets core decide again (gone: NOT_FOUND;
 * otherwise the rule's own refusal, or another try).
 *
 * The update is a scoped $set/$unset of the fields that changed, never a replacement: a field
 * this op did not decide on is never written from a stale read. The events ride in the same
 * update (the outbox), so the change and its audit entries commit together.
 *
 * Also here: the state move with its unblocked cascade (shared by every op that changes a
 * column), the board read and the on-demand card lookup core's blocker rules walk.
 */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum core_rc mgo_card_read(struct mgo_conn *c, const char *id, struct core_card **out)
{
	bson_t *doc = NULL;
	enum core_rc rc;

	*out = NULL;
	rc = mgo_find_by_id(c->cards, id, &doc);
	if (rc == CORE_OK)
		rc = doc ? mgo_card_from_bson(doc, out) : CORE_ERR_NOT_FOUND;
	if (rc == CORE_ERR_BAD_REQUEST)
		rc = CORE_ERR_INTERNAL; /* a stored document we cannot read is not the client's */
	bson_destroy(doc);
	return rc;
}

enum core_rc mgo_board_read(struct mgo_conn *c, const char *name, struct core_board *out)
{
	bson_t filter = BSON_INITIALIZER, *doc = NULL;
	enum core_rc rc;

	BSON_APPEND_UTF8(&filter, "_id", name);
	rc = mgo_find_one(c->boards, &filter, NULL, &doc);
	if (rc == CORE_OK)
		rc = doc ? mgo_board_from_bson(doc, out) : CORE_ERR_NOT_FOUND;
	if (rc == CORE_ERR_BAD_REQUEST)
		rc = CORE_ERR_INTERNAL;
	bson_destroy(doc);
	bson_destroy(&filter);
	return rc;
}

/* ---- the filter ---- */

static void exists_false(bson_t *d, const char *key)
{
	bson_t ex;

	BSON_APPEND_DOCUMENT_BEGIN(d, key, &ex);
	BSON_APPEND_BOOL(&ex, "$exists", false);
	bson_append_document_end(d, &ex);
}

static void filter_build(bson_t *f, const struct core_card *was, unsigned pre)
{
	bson_t sz;

	BSON_APPEND_UTF8(f, "_id", was->id);
	if (pre & MGO_PRE_STATE)
		BSON_APPEND_UTF8(f, "state", was->state);
	if (pre & MGO_PRE_CLAIM) {
		if (was->claim.present)
			BSON_APPEND_UTF8(f, "claim.marker", was->claim.marker);
		else
			exists_false(f, "claim.marker");
		/* Equality on the epoch: a document whose field was dropped never matches. */
		if (was->has_epoch)
			BSON_APPEND_INT64(f, "claim_epoch", was->claim_epoch);
		else
			exists_false(f, "claim_epoch");
	}
	if ((pre & MGO_PRE_LEASE) && was->claim.present) {
		if (was->claim.has_lease)
			BSON_APPEND_DATE_TIME(f, "claim.lease_until", was->claim.lease_until);
		else
			exists_false(f, "claim.lease_until");
		BSON_APPEND_DATE_TIME(f, "claim.claimed_at", was->claim.claimed_at);
	}
	if (pre & MGO_PRE_LABELS)
		mgo_strv_append(f, "labels", &was->labels);
	if (pre & MGO_PRE_BLOCKERS)
		mgo_strv_append(f, "blockers", &was->blockers);
	if (pre & MGO_PRE_SCHED) {
		if (was->not_before)
			BSON_APPEND_DATE_TIME(f, "not_before", was->not_before);
		else
			exists_false(f, "not_before");
	}
	if (pre & MGO_PRE_COMMENTS) {
		BSON_APPEND_DOCUMENT_BEGIN(f, "comments", &sz);
		BSON_APPEND_INT32(&sz, "$size", (int32_t)was->n_comments);
		bson_append_document_end(f, &sz);
	}
}

/* ---- the update: the difference, field by field ---- */

static bool str_eq(const char *a, const char *b)
{
	return a && b ? strcmp(a, b) == 0 : a == b;
}

static bool claim_eq(const struct core_claim *a, const struct core_claim *b)
{
	return a->present == b->present && str_eq(a->marker, b->marker) &&
	       str_eq(a->holder, b->holder) && str_eq(a->from, b->from) &&
	       a->claimed_at == b->claimed_at && a->has_lease == b->has_lease &&
	       a->lease_until == b->lease_until && a->lease_ms == b->lease_ms;
}

static bool gave_up_eq(const struct core_gave_up *a, const struct core_gave_up *b)
{
	return a->set == b->set && str_eq(a->reason, b->reason) && str_eq(a->run_id, b->run_id) &&
	       str_eq(a->state, b->state) && a->at == b->at;
}

/* $set / $unset of one optional string. */
static void diff_str(bson_t *set, bson_t *unset, const char *key, const char *was,
		     const char *now, size_t *n)
{
	if (str_eq(was, now))
		return;
	if (now)
		BSON_APPEND_UTF8(set, key, now);
	else
		BSON_APPEND_INT32(unset, key, 1);
	(*n)++;
}

static void diff_date(bson_t *set, const char *key, int64_t was, int64_t now, size_t *n)
{
	if (was == now)
		return;
	BSON_APPEND_DATE_TIME(set, key, now);
	(*n)++;
}

/* Builds the update; *n counts the fields written (0 and no events: nothing to do). */
static bool update_build(bson_t *u, const struct core_card *was, const struct core_card *now,
			 const struct mgo_evq *q, int64_t slot_epoch, size_t *n)
{
	bson_t set, unset, push, each, arr;
	char ibuf[16];
	const char *ikey;
	size_t i;
	bool ok = true;

	*n = 0;
	bson_init(&set);
	bson_init(&unset);
	bson_init(&push);
	diff_str(&set, &unset, "title", was->title, now->title, n);
	diff_str(&set, &unset, "body", was->body, now->body, n);
	diff_str(&set, &unset, "state", was->state, now->state, n);
	diff_str(&set, &unset, "state_reason", was->state_reason, now->state_reason, n);
	diff_str(&set, &unset, "last_run_id", was->last_run_id, now->last_run_id, n);
	diff_date(&set, "state_at", was->state_at, now->state_at, n);
	diff_date(&set, "updated_at", was->updated_at, now->updated_at, n);
	if (!core_strv_equal(&was->labels, &now->labels) && ++*n)
		ok = ok && mgo_strv_append(&set, "labels", &now->labels);
	if (!core_strv_equal(&was->blockers, &now->blockers) && ++*n)
		ok = ok && mgo_strv_append(&set, "blockers", &now->blockers);
	if (!claim_eq(&was->claim, &now->claim) && ++*n) {
		if (now->claim.present)
			ok = ok && mgo_claim_append(&set, "claim", &now->claim);
		else
			BSON_APPEND_INT32(&unset, "claim", 1);
	}
	/* The epoch is never unset by boardd: release keeps it (the fence generation). */
	if (now->has_epoch && (!was->has_epoch || was->claim_epoch != now->claim_epoch) && ++*n)
		ok = ok && BSON_APPEND_INT64(&set, "claim_epoch", now->claim_epoch);
	if (was->priority != now->priority && ++*n)
		ok = ok && BSON_APPEND_INT32(&set, "priority", now->priority);
	/* DESIGN §17: the schedule and the attempts (absent: none). */
	if (was->not_before != now->not_before && ++*n) {
		if (now->not_before)
			ok = ok && BSON_APPEND_DATE_TIME(&set, "not_before", now->not_before);
		else
			BSON_APPEND_INT32(&unset, "not_before", 1);
	}
	if (was->attempts != now->attempts && ++*n)
		ok = ok && BSON_APPEND_INT32(&set, "attempts", now->attempts);
	if (was->awaiting_input != now->awaiting_input && ++*n)
		ok = ok && BSON_APPEND_BOOL(&set, "awaiting_input", now->awaiting_input);
	if (!gave_up_eq(&was->gave_up, &now->gave_up) && ++*n) {
		if (now->gave_up.set)
			ok = ok && mgo_gave_up_append(&set, "gave_up", &now->gave_up);
		else
			BSON_APPEND_INT32(&unset, "gave_up", 1);
	}
	/* Comments only ever grow: the new ones are pushed (PRE_COMMENTS pins the count). */
	if (now->n_comments > was->n_comments && ++*n) {
		ok = ok && BSON_APPEND_DOCUMENT_BEGIN(&push, "comments", &each) &&
		     BSON_APPEND_ARRAY_BEGIN(&each, "$each", &arr);
		for (i = was->n_comments; ok && i < now->n_comments; i++) {
			bson_uint32_to_string((uint32_t)(i - was->n_comments), &ikey, ibuf,
					       sizeof(ibuf));
			ok = mgo_comment_append(&arr, ikey, &now->comments[i]);
		}
		ok = ok && bson_append_array_end(&each, &arr) &&
		     bson_append_document_end(&push, &each);
	}
	if (slot_epoch > 0) /* DESIGN §17: the claim holds capacity slots (mongo_slots.c) */
		ok = ok && BSON_APPEND_INT64(&set, "slot_epoch", slot_epoch) && ++*n;
	if (q->n)
		ok = ok && mgo_evq_push_append(q, &push);
	if (!bson_empty(&set))
		ok = ok && BSON_APPEND_DOCUMENT(u, "$set", &set);
	if (!bson_empty(&unset))
		ok = ok && BSON_APPEND_DOCUMENT(u, "$unset", &unset);
	if (!bson_empty(&push))
		ok = ok && BSON_APPEND_DOCUMENT(u, "$push", &push);
	bson_destroy(&push);
	bson_destroy(&unset);
	bson_destroy(&set);
	return ok && !q->failed;
}

/* Copies of `now` and `q` with the effects applied (mgo_effects_match). */
static enum core_rc effects_copy(struct mgo_conn *c, const struct core_card *now,
				 const struct mgo_evq *q, struct core_card **card,
				 struct mgo_evq *eq, bool *consumed)
{
	size_t i;

	*card = core_card_dup(now);
	*eq = *q;
	eq->n = 0;
	for (i = 0; *card && i < q->n; i++, eq->n++)
		if (!(eq->ev[i] = bson_copy(q->ev[i])))
			break;
	if (!*card || eq->n != q->n)
		return CORE_ERR_NOMEM;
	return mgo_effects_match(c, *card, eq, consumed);
}

enum core_rc mgo_card_cas(struct mgo_conn *c, const struct core_card *was,
			  const struct core_card *now, unsigned pre, const struct mgo_evq *q,
			  bool *hit, struct core_card **out)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, *doc = NULL;
	struct core_card *eff_card = NULL;
	struct mgo_evq eff_q = {0};
	size_t n;
	int64_t slot_epoch = c->slot_epoch_set;
	enum core_rc rc = CORE_ERR_NOMEM;

	*hit = false;
	c->slot_epoch_set = 0;
	if (out)
		*out = NULL;
	/* The effects of the step's events, decided on private copies: the caller's queue and
	 * card stay as given, so a miss retried by the caller matches afresh. */
	if (q->n) {
		bool consumed = false;

		rc = effects_copy(c, now, q, &eff_card, &eff_q, &consumed);
		if (rc != CORE_OK)
			goto out;
		now = eff_card;
		q = &eff_q;
		if (consumed)
			pre |= MGO_PRE_LABELS;
		rc = CORE_ERR_NOMEM;
	}
	if (!update_build(&update, was, now, q, slot_epoch, &n))
		goto out;
	if (n == 0 && q->n == 0) {
		/* Nothing changed: the read was the linearisation point. */
		*hit = true;
		rc = CORE_OK;
		if (out && !(*out = core_card_dup(was)))
			rc = CORE_ERR_NOMEM;
		goto out;
	}
	filter_build(&filter, was, pre);
	if (c->m->test_before_write)
		c->m->test_before_write(c->m->test_ctx, was->id);
	rc = mgo_find_modify(c->cards, &filter, &update, &doc);
	if (rc != CORE_OK || !doc)
		goto out;
	*hit = true;
	rc = mgo_evq_deliver(c, c->cards, was->id, q, doc);
	/* After the events: a claim that takes a freed slot is logged after this release. */
	mgo_slots_after_cas(c, was, now, doc);
	if (rc == CORE_OK && out) {
		rc = mgo_card_from_bson(doc, out);
		if (rc == CORE_ERR_BAD_REQUEST)
			rc = CORE_ERR_INTERNAL;
	}
out:
	core_card_free(eff_card);
	mgo_evq_release(&eff_q);
	bson_destroy(doc);
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

enum core_rc mgo_attempt_begin_card(struct mgo_conn *c, const char *id, struct mgo_attempt *a)
{
	enum core_rc rc = CORE_OK;

	memset(a, 0, sizeof(*a));
	/* Always a read of its own, made while this request is served: a refusal is decided on
	 * the document as it stands (DESIGN §16), never on a card an earlier read kept. */
	rc = mgo_card_read(c, id, &a->was);
	if (rc == CORE_OK && !(a->now = core_card_dup(a->was)))
		rc = CORE_ERR_NOMEM;
	return rc;
}

/* The card (without its outbox) and its board in one round trip: an aggregate of the card
 * with its board looked up ($lookup). The two are read one after the other by the server, as
 * two finds would read them, one round trip apart: neither is a snapshot of both, and the
 * write's filter pins what the decision rests on in the card. NOT_FOUND: no card; INTERNAL:
 * a card whose board is gone. */
static enum core_rc card_board_read(struct mgo_conn *c, const char *id, struct core_card **card,
				    struct core_board *b)
{
	bson_t pipeline = BSON_INITIALIZER, stage, op, *doc = NULL;
	bson_iter_t it;
	bson_error_t e;
	mongoc_cursor_t *cur;
	const bson_t *d;
	const uint8_t *data;
	uint32_t len;
	bson_t bd;
	enum core_rc rc = CORE_ERR_NOT_FOUND;

	BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "0", &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&stage, "$match", &op);
	BSON_APPEND_UTF8(&op, "_id", id);
	bson_append_document_end(&stage, &op);
	bson_append_document_end(&pipeline, &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "1", &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&stage, "$project", &op);
	BSON_APPEND_INT32(&op, "outbox", 0);
	bson_append_document_end(&stage, &op);
	bson_append_document_end(&pipeline, &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "2", &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&stage, "$lookup", &op);
	BSON_APPEND_UTF8(&op, "from", "boards");
	BSON_APPEND_UTF8(&op, "localField", "board");
	BSON_APPEND_UTF8(&op, "foreignField", "_id");
	BSON_APPEND_UTF8(&op, "as", "board_doc");
	bson_append_document_end(&stage, &op);
	bson_append_document_end(&pipeline, &stage);
	cur = mongoc_collection_aggregate(c->cards, MONGOC_QUERY_NONE, &pipeline, NULL, NULL);
	if (mongoc_cursor_next(cur, &d))
		rc = (doc = bson_copy(d)) ? CORE_OK : CORE_ERR_NOMEM;
	else if (mongoc_cursor_error(cur, &e))
		rc = mgo_error("find card and board", &e);
	mongoc_cursor_destroy(cur);
	bson_destroy(&pipeline);
	if (rc == CORE_OK && (rc = mgo_card_from_bson(doc, card)) == CORE_ERR_BAD_REQUEST)
		rc = CORE_ERR_INTERNAL; /* a stored document we cannot read is not the client's */
	if (rc == CORE_OK) {
		rc = CORE_ERR_INTERNAL; /* no board, or one we cannot read */
		if (bson_iter_init_find(&it, doc, "board_doc") && BSON_ITER_HOLDS_ARRAY(&it) &&
		    bson_iter_recurse(&it, &it) && bson_iter_next(&it) &&
		    BSON_ITER_HOLDS_DOCUMENT(&it)) {
			bson_iter_document(&it, &len, &data);
			if (bson_init_static(&bd, data, len))
				rc = mgo_board_from_bson(&bd, b);
			if (rc == CORE_ERR_BAD_REQUEST || rc == CORE_ERR_NOT_FOUND)
				rc = CORE_ERR_INTERNAL;
		}
	}
	bson_destroy(doc);
	return rc;
}

enum core_rc mgo_attempt_begin(struct mgo_conn *c, const char *id, struct mgo_attempt *a)
{
	enum core_rc rc;

	memset(a, 0, sizeof(*a));
	if (c->m->board_lookup) { /* a read of its own, as in mgo_attempt_begin_card */
		rc = card_board_read(c, id, &a->was, &a->b);
		if (rc == CORE_OK && !(a->now = core_card_dup(a->was)))
			rc = CORE_ERR_NOMEM;
		return rc;
	}
	rc = mgo_card_read(c, id, &a->was);
	if (rc == CORE_OK && !(a->now = core_card_dup(a->was)))
		rc = CORE_ERR_NOMEM;
	if (rc == CORE_OK && (rc = mgo_board_read(c, a->was->board, &a->b)) == CORE_ERR_NOT_FOUND)
		rc = CORE_ERR_INTERNAL;
	return rc;
}

void mgo_attempt_end(struct mgo_attempt *a)
{
	core_card_free(a->now);
	core_card_free(a->was);
	core_board_release(&a->b);
}

enum core_rc mgo_card_retry_on(struct mgo_conn *c, mgo_attempt_fn fn, const void *arg,
			       enum core_rc exhausted, struct core_card **out)
{
	struct core_card *dummy = NULL;
	bool hit = false;
	int tries;
	enum core_rc rc = CORE_OK;

	for (tries = 0; rc == CORE_OK && !hit && tries < MGO_CAS_TRIES; tries++) {
		if (tries > 1)
			mgo_backoff(tries - 2);
		rc = fn(c, arg, &hit, out ? out : &dummy);
	}
	if (rc == CORE_OK && !hit)
		rc = exhausted;
	core_card_free(dummy);
	return rc;
}

enum core_rc mgo_card_retry(struct store *st, const struct store_actor *actor,
			    mgo_attempt_fn fn, const void *arg, enum core_rc exhausted,
			    struct core_card **out)
{
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	rc = mgo_card_retry_on(&c, fn, arg, exhausted, out);
	mgo_conn_close(&c);
	return rc;
}

/* ---- the lookup core's blocker rules walk ---- */

static const char *lookup_state(void *ctx, const char *id, const struct core_strv **blockers)
{
	struct mgo_lookup *lk = ctx;
	struct core_card *card = NULL, **nv;
	enum core_rc rc;
	size_t i;

	if (blockers)
		*blockers = NULL;
	for (i = 0; i < lk->n; i++)
		if (strcmp(lk->cache[i]->id, id) == 0)
			card = lk->cache[i];
	if (!card && lk->rc == CORE_OK) {
		rc = mgo_card_read(lk->c, id, &card);
		if (rc == CORE_ERR_NOT_FOUND)
			return NULL;
		if (rc == CORE_OK && lk->n == lk->cap) {
			nv = realloc(lk->cache, (lk->cap ? lk->cap * 2 : 8) * sizeof(*nv));
			if (!nv)
				rc = CORE_ERR_NOMEM;
			else
				lk->cache = nv, lk->cap = lk->cap ? lk->cap * 2 : 8;
		}
		if (rc != CORE_OK) {
			/* Remembered: the caller turns the rule's verdict into this error. */
			core_card_free(card);
			lk->rc = rc;
			return NULL;
		}
		lk->cache[lk->n++] = card;
	}
	if (!card)
		return NULL;
	if (blockers)
		*blockers = &card->blockers;
	return card->state;
}

struct core_card_lookup mgo_lookup_init(struct mgo_lookup *lk, struct mgo_conn *c)
{
	memset(lk, 0, sizeof(*lk));
	lk->c = c;
	return (struct core_card_lookup){.state_of = lookup_state, .ctx = lk};
}

void mgo_lookup_release(struct mgo_lookup *lk)
{
	size_t i;

	for (i = 0; i < lk->n; i++)
		core_card_free(lk->cache[i]);
	free(lk->cache);
	memset(lk, 0, sizeof(*lk));
}

/* ---- the state move and the unblocked cascade ---- */

struct cascade_ctx {
	struct core_card **deps;
	size_t n, cap;
	enum core_rc rc;
};

static enum core_rc collect_card(void *ctx, const bson_t *doc)
{
	struct cascade_ctx *cc = ctx;
	struct core_card *card, **nv;
	enum core_rc rc = mgo_card_from_bson(doc, &card);

	if (rc == CORE_ERR_BAD_REQUEST)
		return CORE_OK; /* unreadable foreign document: not ours to promote */
	if (rc != CORE_OK)
		return rc;
	if (cc->n == cc->cap) {
		nv = realloc(cc->deps, (cc->cap ? cc->cap * 2 : 8) * sizeof(*nv));
		if (!nv) {
			core_card_free(card);
			return CORE_ERR_NOMEM;
		}
		cc->deps = nv;
		cc->cap = cc->cap ? cc->cap * 2 : 8;
	}
	cc->deps[cc->n++] = card;
	return CORE_OK;
}

/* Each waiting dependent of `blocker` whose blockers are now all done moves to the first
 * eligible column (reason "unblocked", not machine: its triggers fire). Each promotion is its
 * own conditional update on (state, blockers); a dependent changed meanwhile is left alone. */
static enum core_rc cascade_unblocked(struct mgo_conn *c, const struct core_board *b,
				      const char *blocker)
{
	const char *to = core_board_first_eligible(b);
	struct cascade_ctx cc = {0};
	struct mgo_lookup lk;
	struct core_card_lookup look;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, proj, sort;
	enum core_rc rc;
	size_t i;

	if (!to || !b->waiting)
		return CORE_OK;
	BSON_APPEND_UTF8(&filter, "board", b->name);
	BSON_APPEND_UTF8(&filter, "state", b->waiting);
	BSON_APPEND_UTF8(&filter, "blockers", blocker);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "outbox", 0);
	bson_append_document_end(&opts, &proj);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "ord", 1);
	bson_append_document_end(&opts, &sort);
	rc = mgo_find_each(c->cards, &filter, &opts, collect_card, &cc);
	look = mgo_lookup_init(&lk, c);
	for (i = 0; rc == CORE_OK && i < cc.n; i++) {
		struct core_card *dep = core_card_dup(cc.deps[i]);
		struct mgo_evq q;
		bool done, hit;

		if (!dep) {
			rc = CORE_ERR_NOMEM;
			break;
		}
		done = core_blockers_all_done(b, &dep->blockers, &look);
		rc = lk.rc;
		if (rc == CORE_OK && done)
			rc = core_card_state_write(dep, to, "unblocked", c->now);
		if (rc == CORE_OK && done) {
			mgo_evq_init(&q, c->m);
			mgo_evq_add(&q, CORE_EV_CARD_UNBLOCKED, dep->board, dep->id, c->actor,
				    "unblocked", c->now,
				    json_pack("{ssssss}", "from", cc.deps[i]->state, "to", to,
					      "blocker", blocker));
			rc = mgo_card_cas(c, cc.deps[i], dep, MGO_PRE_STATE | MGO_PRE_BLOCKERS, &q,
					  &hit, NULL);
			mgo_evq_release(&q);
		}
		core_card_free(dep);
	}
	mgo_lookup_release(&lk);
	store_cards_free(cc.deps, cc.n);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc;
}

enum core_rc mgo_state_apply(struct mgo_conn *c, struct core_card *now, const char *to,
			     const char *reason, json_t *extra, struct mgo_evq *q, bool *moved)
{
	json_t *payload = NULL;
	enum core_rc rc = CORE_OK;

	*moved = strcmp(now->state, to) != 0;
	if (!*moved)
		goto out;
	rc = CORE_ERR_NOMEM;
	payload = json_pack("{ssss}", "from", now->state, "to", to);
	if (!payload || (extra && json_object_update(payload, extra) != 0))
		goto out;
	rc = core_card_state_write(now, to, reason, c->now);
	if (rc != CORE_OK)
		goto out;
	mgo_evq_add(q, CORE_EV_CARD_STATE_CHANGED, now->board, now->id, c->actor, reason, c->now,
		    payload);
	payload = NULL;
out:
	json_decref(extra);
	json_decref(payload);
	return rc;
}

void mgo_state_after(struct mgo_conn *c, const struct core_board *b, const char *id,
		     const char *to, const char *reason)
{
	/* A machine write files without effects: no dependent promotion (DESIGN §7). The move
	 * is committed whatever the cascade does next; a failed cascade is logged, not undone
	 * (see the ledger in mongo.c). */
	if (b->completed && strcmp(to, b->completed) == 0 && !core_is_machine_reason(reason) &&
	    cascade_unblocked(c, b, id) != CORE_OK)
		fprintf(stderr, "boardd: mongo: card %s: unblocked cascade incomplete\n", id);
}

enum core_rc mgo_state_move(struct mgo_conn *c, const struct core_card *was,
			    struct core_card *now, const struct core_board *b, const char *to,
			    const char *reason, json_t *extra, unsigned pre, struct mgo_evq *q,
			    bool *hit, struct core_card **out)
{
	struct mgo_evq local;
	bool moved;
	enum core_rc rc;

	if (!q) {
		mgo_evq_init(&local, c->m);
		q = &local;
	}
	*hit = false;
	rc = mgo_state_apply(c, now, to, reason, extra, q, &moved);
	/* DESIGN §17: entering the completed column resets the attempts. Every write that
	 * counts one is a release (the claim goes), so the claim is the reset's precondition
	 * too: a retry release that lands between this read and this write (it leaves the
	 * state as it is) makes this write miss and be taken again on what it left, or its
	 * attempt would outlive the completion that came after it (tests/history, j). */
	if (rc == CORE_OK && moved && b && b->completed && strcmp(to, b->completed) == 0) {
		core_attempts_reset(now);
		pre |= MGO_PRE_CLAIM;
	}
	if (rc == CORE_OK)
		rc = mgo_card_cas(c, was, now, pre | MGO_PRE_STATE, q, hit, out);
	if (rc == CORE_OK && *hit && moved)
		mgo_state_after(c, b, now->id, to, reason);
	if (q == &local)
		mgo_evq_release(&local);
	return rc;
}
