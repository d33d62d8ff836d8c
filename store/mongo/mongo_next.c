/* claim-next on the Mongo twin (DESIGN §12): ONE findAndModify whose filter is the whole of
 * core_pick_fits (board, state in the columns, unclaimed, every label, no blockers pending)
 * and whose sort is core_pick_before (priority desc, created_at, _id), served by the
 * cards index "claim_next" {board, state, priority -1, created_at, _id}. Many workers at once
 * each get a different card: the server takes the first match and writes it in one step.
 *
 * The fresh epoch is max(previous + 1, now) (DESIGN §3) without reading the previous value:
 * the filter also requires claim_epoch < now (or none), so `now` is that maximum. The best
 * card is looked up first (one find, same filter and sort); only when its epoch is already
 * >= now (claimed and released within this millisecond, or a clock that went back) does the
 * findAndModify require exactly that epoch and write it + 1. Either way the epoch is
 * monotone and known before the write, so the card_claimed event rides in the same update.
 *
 * Blockers live in other documents, so "all done" cannot be a filter term. One find looks at
 * the first few cards in claim order (their epoch and blockers, a lookup of the blockers of
 * those that have some); the findAndModify admits cards with no blockers, and the one card
 * with blockers found all done. A card whose blockers are pending is never claimed, whatever
 * the order. So a claim is one find and one findAndModify, both on the claim_next index; only
 * when the first few are all blocked does a longer look follow (blocked_pick, best_epoch).
 *
 * DESIGN §17: the filter leaves out cards scheduled after now. The claim records the column
 * the card sat in (claim.from): in the same update when one column is asked, else right after
 * from the post-image's state (from_record). A board with a limit among the asked columns (or
 * max_claims) claims through the capacity slots instead (next_limited: the columns with room,
 * then the best cards there one fresh claim at a time, mongo_slots.c). With nothing to take,
 * wake_at is the earliest not_before of a card that would fit, in a column with room. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEXT_BLOCKED_SCAN 20 /* cards with blockers looked at per call, best first */

static bool strv_array(bson_t *d, const char *key, const struct core_strv *sv)
{
	bson_t arr;
	char ibuf[16];
	const char *ikey;
	size_t i;
	bool ok = BSON_APPEND_ARRAY_BEGIN(d, key, &arr);

	for (i = 0; ok && i < sv->n; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		ok = BSON_APPEND_UTF8(&arr, ikey, sv->v[i]);
	}
	return ok && bson_append_array_end(d, &arr);
}

/* {board, state: {$in}, claim: null, labels: {$all}, not_before passed} — the part every
 * query shares. sched_now < 0: no schedule term (the wake_at look-up adds its own). */
static bool base_filter_at(bson_t *f, const char *board, const struct core_strv *cols,
			   const struct core_strv *labels, int64_t sched_now)
{
	bson_t sub, o;
	bool ok = BSON_APPEND_UTF8(f, "board", board) &&
		  BSON_APPEND_DOCUMENT_BEGIN(f, "state", &sub) && strv_array(&sub, "$in", cols) &&
		  bson_append_document_end(f, &sub) && BSON_APPEND_NULL(f, "claim");

	if (ok && labels && labels->n)
		ok = BSON_APPEND_DOCUMENT_BEGIN(f, "labels", &sub) &&
		     strv_array(&sub, "$all", labels) && bson_append_document_end(f, &sub);
	/* DESIGN §17: a card scheduled after now does not fit (no schedule: absent, which
	 * $not matches too). Not an $or: the planner keeps to the claim_next index's order. */
	if (ok && sched_now >= 0)
		ok = BSON_APPEND_DOCUMENT_BEGIN(f, "not_before", &sub) &&
		     BSON_APPEND_DOCUMENT_BEGIN(&sub, "$not", &o) &&
		     BSON_APPEND_DATE_TIME(&o, "$gt", sched_now) && bson_append_document_end(&sub, &o) &&
		     bson_append_document_end(f, &sub);
	return ok;
}



static bool sort_append(bson_t *d, const char *key)
{
	bson_t s;

	return BSON_APPEND_DOCUMENT_BEGIN(d, key, &s) && BSON_APPEND_INT32(&s, "priority", -1) &&
	       BSON_APPEND_INT32(&s, "created_at", 1) && BSON_APPEND_INT32(&s, "_id", 1) &&
	       bson_append_document_end(d, &s);
}

/* The best card carrying blockers that are all done, looked for NEXT_BLOCKED_SCAN at a time
 * in claim order until one is found or none are left (a fixed look missed a card behind
 * twenty whose blockers were pending); *id receives a copy (caller frees) or stays NULL. */
static enum core_rc blocked_pick(struct mgo_conn *c, const struct core_board *b,
				 const struct core_strv *cols, const struct core_strv *labels,
				 char **id)
{
	struct mgo_lookup lk;
	struct core_card_lookup look = mgo_lookup_init(&lk, c);
	enum core_rc rc = CORE_OK;
	int64_t skip;
	size_t n = NEXT_BLOCKED_SCAN;

	*id = NULL;
	for (skip = 0; rc == CORE_OK && !*id && n == NEXT_BLOCKED_SCAN; skip += NEXT_BLOCKED_SCAN) {
		bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, ex;
		struct core_card **cards = NULL;
		size_t i;

		n = 0;
		rc = CORE_ERR_NOMEM;
		if (base_filter_at(&filter, b->name, cols, labels, c->now) &&
		    BSON_APPEND_DOCUMENT_BEGIN(&filter, "blockers.0", &ex) &&
		    BSON_APPEND_BOOL(&ex, "$exists", true) && bson_append_document_end(&filter, &ex) &&
		    sort_append(&opts, "sort") && BSON_APPEND_INT64(&opts, "skip", skip) &&
		    BSON_APPEND_INT64(&opts, "limit", NEXT_BLOCKED_SCAN))
			rc = mgo_cards_query(c, &filter, &opts, &cards, &n);
		for (i = 0; rc == CORE_OK && i < n && !*id; i++) {
			bool done = core_blockers_all_done(b, &cards[i]->blockers, &look);

			if ((rc = lk.rc) == CORE_OK && done && !(*id = strdup(cards[i]->id)))
				rc = CORE_ERR_NOMEM;
		}
		store_cards_free(cards, n);
		bson_destroy(&opts);
		bson_destroy(&filter);
	}
	mgo_lookup_release(&lk);
	return rc;
}

/* The findAndModify filter: base, admitted blockers, and the epoch below `now` (epoch_eq < 0)
 * or exactly epoch_eq. */
static bool take_filter(bson_t *f, const char *board, const struct core_strv *cols,
			const struct core_strv *labels, const char *blocked_ok, int64_t now,
			int64_t epoch_eq)
{
	bson_t and, a0, a1, or0, or1, o, sub;
	bool ok = base_filter_at(f, board, cols, labels, now) &&
		  BSON_APPEND_ARRAY_BEGIN(f, "$and", &and);

	/* blockers: none, or the one card checked above */
	ok = ok && BSON_APPEND_DOCUMENT_BEGIN(&and, "0", &a0) &&
	     BSON_APPEND_ARRAY_BEGIN(&a0, "$or", &or0) &&
	     BSON_APPEND_DOCUMENT_BEGIN(&or0, "0", &o) &&
	     BSON_APPEND_DOCUMENT_BEGIN(&o, "blockers", &sub) && BSON_APPEND_INT32(&sub, "$size", 0) &&
	     bson_append_document_end(&o, &sub) && bson_append_document_end(&or0, &o) &&
	     BSON_APPEND_DOCUMENT_BEGIN(&or0, "1", &o) &&
	     BSON_APPEND_DOCUMENT_BEGIN(&o, "blockers", &sub) &&
	     BSON_APPEND_BOOL(&sub, "$exists", false) && bson_append_document_end(&o, &sub) &&
	     bson_append_document_end(&or0, &o);
	if (ok && blocked_ok)
		ok = BSON_APPEND_DOCUMENT_BEGIN(&or0, "2", &o) &&
		     BSON_APPEND_UTF8(&o, "_id", blocked_ok) && bson_append_document_end(&or0, &o);
	ok = ok && bson_append_array_end(&a0, &or0) && bson_append_document_end(&and, &a0);
	if (epoch_eq == INT64_MIN) /* no epoch term (best_epoch's look-up) */
		return ok && bson_append_array_end(f, &and);
	if (epoch_eq >= 0) /* then epoch_eq + 1 is max(previous + 1, now) */
		return ok && bson_append_array_end(f, &and) &&
		       BSON_APPEND_INT64(f, "claim_epoch", epoch_eq);
	/* claim_epoch < now, or none: then `now` is max(previous + 1, now) */
	ok = ok && BSON_APPEND_DOCUMENT_BEGIN(&and, "1", &a1) &&
	     BSON_APPEND_ARRAY_BEGIN(&a1, "$or", &or1) &&
	     BSON_APPEND_DOCUMENT_BEGIN(&or1, "0", &o) &&
	     BSON_APPEND_DOCUMENT_BEGIN(&o, "claim_epoch", &sub) &&
	     BSON_APPEND_INT64(&sub, "$lt", now) && bson_append_document_end(&o, &sub) &&
	     bson_append_document_end(&or1, &o) && BSON_APPEND_DOCUMENT_BEGIN(&or1, "1", &o) &&
	     BSON_APPEND_DOCUMENT_BEGIN(&o, "claim_epoch", &sub) &&
	     BSON_APPEND_BOOL(&sub, "$exists", false) && bson_append_document_end(&o, &sub) &&
	     bson_append_document_end(&or1, &o) && bson_append_array_end(&a1, &or1) &&
	     bson_append_document_end(&and, &a1);
	return ok && bson_append_array_end(f, &and);
}

/* $set of the fresh claim and its epoch, the card_claimed event pushed into the outbox
 * (its card_id is filled in on delivery: the card is not known before the write). */
static bool take_update(bson_t *u, const char *marker, const char *holder, const char *from,
			int64_t lease_ms, int64_t now, int64_t epoch, const struct mgo_evq *q)
{
	bson_t set, push;
	struct core_claim cl = {.present = true,
				.marker = (char *)marker,
				.holder = (char *)holder,
				.from = (char *)from,
				.claimed_at = now,
				.has_lease = true,
				.lease_until = now + lease_ms,
				.lease_ms = lease_ms};

	return BSON_APPEND_DOCUMENT_BEGIN(u, "$set", &set) && mgo_claim_append(&set, "claim", &cl) &&
	       BSON_APPEND_INT64(&set, "claim_epoch", epoch) &&
	       BSON_APPEND_DATE_TIME(&set, "updated_at", now) && bson_append_document_end(u, &set) &&
	       BSON_APPEND_DOCUMENT_BEGIN(u, "$push", &push) && mgo_evq_push_append(q, &push) &&
	       bson_append_document_end(u, &push);
}

/* ---- the look-up before the write: one find, usually ----
 * The first NEXT_PEEK cards in claim order (blockers aside), with their epoch and blockers:
 * the first with no blockers, or with blockers all done, is the best card that fits. Only when
 * each of those is blocked does the caller fall back to blocked_pick + best_epoch. */

#define NEXT_PEEK 4

struct peek {
	struct mgo_conn *c;
	const struct core_board *b;
	struct mgo_lookup lk;
	struct core_card_lookup look;
	size_t seen;
	bool found, has_epoch;
	int64_t epoch;
	char *blocked_ok; /* the card found, when it carries blockers (all done) */
};

static enum core_rc peek_doc(void *ctx, const bson_t *doc)
{
	struct peek *pk = ctx;
	struct core_strv bl = {0};
	bson_iter_t it, ai;
	const char *id = NULL;
	enum core_rc rc = CORE_OK;
	bool done = true;

	if (pk->found)
		return CORE_OK;
	pk->seen++;
	if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it))
		id = bson_iter_utf8(&it, NULL);
	if (bson_iter_init_find(&it, doc, "blockers") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &ai))
		while (rc == CORE_OK && bson_iter_next(&ai))
			if (BSON_ITER_HOLDS_UTF8(&ai))
				rc = core_strv_push(&bl, bson_iter_utf8(&ai, NULL));
	if (rc == CORE_OK && bl.n) {
		done = core_blockers_all_done(pk->b, &bl, &pk->look);
		rc = pk->lk.rc;
	}
	if (rc == CORE_OK && done && id) {
		pk->found = true;
		pk->has_epoch = bson_iter_init_find(&it, doc, "claim_epoch") &&
				mgo_iter_i64(&it, &pk->epoch);
		if (bl.n && !(pk->blocked_ok = strdup(id)))
			rc = CORE_ERR_NOMEM;
	}
	core_strv_release(&bl);
	return rc;
}

/* *state: 1 found (blocked_ok, epoch set), 0 none fits at all, -1 the peek cannot tell. */
static enum core_rc peek_best(struct mgo_conn *c, const struct core_board *b,
			      const struct core_strv *cols, const struct core_strv *labels,
			      int *state, char **blocked_ok, bool *has_epoch, int64_t *epoch)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, proj;
	struct peek pk = {.c = c, .b = b};
	enum core_rc rc = CORE_ERR_NOMEM;

	pk.look = mgo_lookup_init(&pk.lk, c);
	if (base_filter_at(&filter, b->name, cols, labels, c->now) && sort_append(&opts, "sort") &&
	    BSON_APPEND_INT64(&opts, "limit", NEXT_PEEK) &&
	    BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj) &&
	    BSON_APPEND_INT32(&proj, "claim_epoch", 1) && BSON_APPEND_INT32(&proj, "blockers", 1) &&
	    bson_append_document_end(&opts, &proj))
		rc = mgo_find_each(c->cards, &filter, &opts, peek_doc, &pk);
	mgo_lookup_release(&pk.lk);
	*state = pk.found ? 1 : pk.seen < NEXT_PEEK ? 0 : -1;
	*blocked_ok = pk.blocked_ok;
	*has_epoch = pk.has_epoch;
	*epoch = pk.epoch;
	if (rc != CORE_OK) {
		free(pk.blocked_ok);
		*blocked_ok = NULL;
	}
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc;
}

/* The epoch of the best card that fits now (*found false: none fits). */
static enum core_rc best_epoch(struct mgo_conn *c, const char *board,
			       const struct core_strv *cols, const struct core_strv *labels,
			       const char *blocked_ok, bool *found, bool *has_epoch, int64_t *epoch)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, proj, *doc = NULL;
	bson_iter_t it;
	enum core_rc rc = CORE_ERR_NOMEM;

	*found = *has_epoch = false;
	*epoch = 0;
	/* epoch_eq 0 would pin the epoch: take the filter without its epoch part instead */
	if (take_filter(&filter, board, cols, labels, blocked_ok, c->now, INT64_MIN) &&
	    sort_append(&opts, "sort") && BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj) &&
	    BSON_APPEND_INT32(&proj, "claim_epoch", 1) && bson_append_document_end(&opts, &proj))
		rc = mgo_find_one(c->cards, &filter, &opts, &doc);
	if (rc == CORE_OK && doc) {
		*found = true;
		*has_epoch = bson_iter_init_find(&it, doc, "claim_epoch") && mgo_iter_i64(&it, epoch);
	}
	bson_destroy(doc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc;
}

/* ---- DESIGN §14: the card_claimed event, matched once the card is known ----
 * The card is picked inside the write, so its card_claimed went into the outbox unmatched
 * (marked MGO_DLV_LATE). It is matched right after, against the post-image: its deliveries
 * ride in q (in memory) and are enqueued when q is delivered, as every write's are. A writer
 * killed between the write and the delivery leaves the entry to the maintenance drain (or the
 * card's next write), which matches it on the card as it then stands. The one-shot
 * labels of a match are removed right after the delivery, by a write guarded on the claim and
 * the labels as the claim left them, with their card_labels_changed event; a card changed in
 * between keeps them. */

struct claimed_match {
	struct core_card *now; /* the card with the one-shots removed, or NULL: none matched */
	struct mgo_evq lq;     /* its card_labels_changed */
};

static enum core_rc claimed_match(struct mgo_conn *c, const struct core_card *card,
				  struct mgo_evq *q, struct claimed_match *cm)
{
	struct mgo_evq m;
	bool changed = false;
	enum core_rc rc = CORE_OK;

	mgo_evq_init(&cm->lq, c->m);
	cm->now = NULL;
	if (q->n != 1)
		return CORE_OK;
	mgo_evq_init(&m, c->m);
	m.ev[0] = bson_copy(q->ev[0]);
	memcpy(m.eid[0], q->eid[0], sizeof(m.eid[0]));
	m.n = 1;
	if (!m.ev[0] || !BSON_APPEND_UTF8(m.ev[0], "card_id", card->id) ||
	    !(cm->now = core_card_dup(card)))
		rc = CORE_ERR_NOMEM;
	if (rc == CORE_OK)
		rc = mgo_effects_match(c, cm->now, &m, &changed);
	if (rc == CORE_OK && bson_has_field(m.ev[0], "dlv")) {
		bson_destroy(q->ev[0]);
		q->ev[0] = m.ev[0]; /* the event with its deliveries (and its card_id) */
		m.ev[0] = NULL;
	}
	if (rc == CORE_OK && changed && m.n == 2) {
		cm->lq.ev[0] = m.ev[1];
		memcpy(cm->lq.eid[0], m.eid[1], sizeof(cm->lq.eid[0]));
		cm->lq.n = 1;
		m.ev[1] = NULL;
	} else {
		core_card_free(cm->now);
		cm->now = NULL;
	}
	mgo_evq_release(&m);
	return rc;
}

/* The one-shots of claimed_match removed from *card (the post-image, replaced on a hit). */
static void claimed_consume(struct mgo_conn *c, struct core_card **card, struct claimed_match *cm)
{
	struct core_card *post = NULL;
	bool hit = false;

	if (cm->now && mgo_card_cas(c, *card, cm->now, MGO_PRE_CLAIM | MGO_PRE_LABELS, &cm->lq,
				    &hit, &post) == CORE_OK &&
	    hit && post) {
		core_card_free(*card);
		*card = post;
		post = NULL;
	}
	core_card_free(post);
	core_card_free(cm->now);
	cm->now = NULL;
	mgo_evq_release(&cm->lq);
}

/* ---- DESIGN §17: claim.from, capacity, wake_at ---- */

/* The fast path's claim over several columns: the card was picked inside the write, so the
 * column it sat in (the post-image's state) is recorded right after, guarded on the claim
 * just written. Nobody else can move the card before: the token is not handed out yet, and an
 * operator's move would only make this write miss (from stays absent: that claim counts
 * against no column, as one of an earlier version). */
static enum core_rc from_record(struct mgo_conn *c, struct core_card *card)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set;
	bson_error_t e;
	enum core_rc rc = CORE_OK;

	BSON_APPEND_UTF8(&filter, "_id", card->id);
	BSON_APPEND_UTF8(&filter, "claim.marker", card->claim.marker);
	BSON_APPEND_INT64(&filter, "claim_epoch", card->claim_epoch);
	BSON_APPEND_UTF8(&filter, "state", card->state);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	BSON_APPEND_UTF8(&set, "claim.from", card->state);
	bson_append_document_end(&update, &set);
	if (!mongoc_collection_update_one(c->cards, &filter, &update, NULL, NULL, &e))
		rc = mgo_error("claim-next from", &e);
	else if (!card->claim.from && !(card->claim.from = strdup(card->state)))
		rc = CORE_ERR_NOMEM;
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

/* out->wake_at: the earliest not_before after now of a card in cols that would fit but for
 * its schedule (blockers all done), looked for NEXT_BLOCKED_SCAN at a time. */
static enum core_rc wake_find(struct mgo_conn *c, const struct core_board *b,
			      const struct core_strv *cols, const struct core_strv *labels,
			      int64_t *wake)
{
	struct mgo_lookup lk;
	struct core_card_lookup look;
	enum core_rc rc = CORE_OK;
	int64_t skip;
	size_t n = NEXT_BLOCKED_SCAN;

	*wake = 0;
	if (!cols->n)
		return CORE_OK;
	look = mgo_lookup_init(&lk, c);
	for (skip = 0; rc == CORE_OK && !*wake && n == NEXT_BLOCKED_SCAN; skip += NEXT_BLOCKED_SCAN) {
		bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, gt, sort;
		struct core_card **cards = NULL;
		size_t i;

		n = 0;
		rc = CORE_ERR_NOMEM;
		if (base_filter_at(&filter, b->name, cols, labels, -1) &&
		    BSON_APPEND_DOCUMENT_BEGIN(&filter, "not_before", &gt) &&
		    BSON_APPEND_DATE_TIME(&gt, "$gt", c->now) && bson_append_document_end(&filter, &gt) &&
		    BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort) &&
		    BSON_APPEND_INT32(&sort, "not_before", 1) && BSON_APPEND_INT32(&sort, "_id", 1) &&
		    bson_append_document_end(&opts, &sort) && BSON_APPEND_INT64(&opts, "skip", skip) &&
		    BSON_APPEND_INT64(&opts, "limit", NEXT_BLOCKED_SCAN))
			rc = mgo_cards_query(c, &filter, &opts, &cards, &n);
		for (i = 0; rc == CORE_OK && i < n && !*wake; i++) {
			bool done = !cards[i]->blockers.n ||
				    core_blockers_all_done(b, &cards[i]->blockers, &look);

			if ((rc = lk.rc) == CORE_OK && done)
				*wake = cards[i]->not_before;
		}
		store_cards_free(cards, n);
		bson_destroy(&opts);
		bson_destroy(&filter);
	}
	mgo_lookup_release(&lk);
	return rc;
}

static bool limited(const struct core_board *b, const struct core_strv *cols)
{
	const struct core_column *cl;
	size_t i;

	if (b->max_claims > 0)
		return true;
	for (i = 0; i < cols->n; i++)
		if ((cl = core_board_column(b, cols->v[i])) && cl->limit > 0)
			return true;
	return false;
}

#define NEXT_LIMITED_SCAN 64 /* cards looked at per look on a board with limits */

/* The columns of cols with room at the counts per_col (b->cols order), into room. */
static enum core_rc room_of(const struct core_board *b, const struct core_strv *cols,
			    const int64_t *per_col, struct core_strv *room)
{
	enum core_rc rc = CORE_OK;
	size_t i;

	for (i = 0; rc == CORE_OK && i < b->n_cols; i++)
		if (core_strv_contains(cols, b->cols[i].name) &&
		    core_column_has_room(b, b->cols[i].name, per_col[i]))
			rc = core_strv_push(room, b->cols[i].name);
	return rc;
}

/* claim-next on a board with limits: the columns with room (their held slots), then the
 * best cards there in claim order (those whose blockers are pending skipped), each claimed as
 * one fresh claim with its slots (mgo_claim_fresh), the next on a refusal. Only a refusal
 * another worker caused (the card taken, a slot taken) has it look again, with the counts
 * read anew. *room: the columns that had room. */
static enum core_rc next_limited(struct mgo_conn *c, const struct core_board *b,
				 const struct core_strv *cols, const struct store_claim_next *in,
				 struct store_claim_result *out, struct core_strv *room)
{
	int64_t *per_col = calloc(b->n_cols + 1, sizeof(*per_col)), board_n = 0;
	enum core_rc rc = per_col ? CORE_OK : CORE_ERR_NOMEM;
	bool raced = true;
	int tries;
	size_t i;

	for (tries = 0; rc == CORE_OK && raced && tries < MGO_CAS_TRIES && !out->card; tries++) {
		struct mgo_lookup lk;
		struct core_card_lookup look;
		size_t n = NEXT_LIMITED_SCAN;
		int64_t skip;

		raced = false;
		core_strv_release(room);
		rc = mgo_slots_owned(c, b, per_col, &board_n);
		if (rc == CORE_OK)
			rc = room_of(b, cols, per_col, room);
		if (rc == CORE_OK && (!room->n || (b->max_claims > 0 && board_n >= b->max_claims))) {
			/* Full by the slots held. Decided on the live claims (DESIGN §16): slots
			 * held by claims in flight (racing for another card, about to miss it and
			 * give them back) do not make a column full; the take below waits them out
			 * (mgo_slots_take) or refuses, and this looks again. */
			core_strv_release(room);
			rc = mgo_board_claimed_on(c, b, per_col, &board_n);
			if (rc == CORE_OK)
				rc = room_of(b, cols, per_col, room);
			if (rc == CORE_OK && b->max_claims > 0 && board_n >= b->max_claims) {
				core_strv_release(room); /* a full board: nothing, no wake-up either */
				break;
			}
			if (rc != CORE_OK || !room->n)
				break;
		}
		if (rc != CORE_OK)
			break;
		/* The cards there in claim order, NEXT_LIMITED_SCAN at a time, until one is taken,
		 * another worker raced this one, or none are left (a fixed look missed a card
		 * behind 64 whose blockers were pending). */
		look = mgo_lookup_init(&lk, c);
		for (skip = 0; rc == CORE_OK && !out->card && !raced && n == NEXT_LIMITED_SCAN;
		     skip += NEXT_LIMITED_SCAN) {
			bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER;
			struct core_card **cards = NULL;

			n = 0;
			rc = CORE_ERR_NOMEM;
			if (base_filter_at(&filter, b->name, room, in->labels, c->now) &&
			    sort_append(&opts, "sort") && BSON_APPEND_INT64(&opts, "skip", skip) &&
			    BSON_APPEND_INT64(&opts, "limit", NEXT_LIMITED_SCAN))
				rc = mgo_cards_query(c, &filter, &opts, &cards, &n);
			bson_destroy(&opts);
			bson_destroy(&filter);
			for (i = 0; rc == CORE_OK && i < n && !out->card; i++) {
				enum core_rc r;

				if (cards[i]->blockers.n &&
				    !core_blockers_all_done(b, &cards[i]->blockers, &look)) {
					rc = lk.rc;
					continue;
				}
				r = mgo_claim_fresh(c, cards[i]->id, in->marker, in->holder,
						    in->lease_ms, out);
				out->detail[0] = '\0';
				if (r == CORE_ERR_CLAIM_CONFLICT || r == CORE_ERR_CAPACITY_REACHED)
					raced = true;
				else if (r != CORE_OK && r != CORE_ERR_NOT_YET &&
					 r != CORE_ERR_BLOCKERS_PENDING &&
					 r != CORE_ERR_TRANSITION_REJECTED && r != CORE_ERR_NOT_FOUND)
					rc = r;
			}
			store_cards_free(cards, n);
		}
		mgo_lookup_release(&lk);
		c->now = store_now(&c->m->base);
	}
	free(per_col);
	return rc;
}

enum core_rc mgo_card_claim_next(struct store *st, const struct store_claim_next *in,
				 const struct store_actor *actor, struct store_claim_result *out)
{
	struct mgo *m = mgo_of(st);
	struct mgo_conn c;
	struct core_board b = {0};
	struct core_strv eligible = {0}, room = {0};
	const struct core_strv *cols = in->columns;
	char *blocked_ok = NULL;
	bson_t *doc = NULL;
	bool lim = false;
	int tries;
	size_t i;
	enum core_rc rc = mgo_conn_open(m, &c);

	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	rc = mgo_board_read(&c, in->board, &b);
	if (rc == CORE_OK)
		rc = core_pick_check(&b, cols, NULL, 0);
	if (rc == CORE_OK && (!cols || !cols->n)) {
		for (i = 0; rc == CORE_OK && i < b.n_cols; i++)
			if (b.cols[i].eligible)
				rc = core_strv_push(&eligible, b.cols[i].name);
		cols = &eligible;
	}
	/* DESIGN §17: a board with limits claims through the slots (next_limited). */
	if (rc == CORE_OK && (lim = limited(&b, cols)))
		rc = next_limited(&c, &b, cols, in, out, &room);
	for (tries = 0; rc == CORE_OK && !lim && tries < MGO_CAS_TRIES; tries++) {
		bson_t filter = BSON_INITIALIZER, sort = BSON_INITIALIZER, update = BSON_INITIALIZER;
		struct mgo_evq q;
		bool found = false, has_epoch = false;
		int64_t prev = 0, eq = -1, epoch = c.now;

		int state = -1;

		free(blocked_ok);
		blocked_ok = NULL;
		rc = peek_best(&c, &b, cols, in->labels, &state, &blocked_ok, &has_epoch, &prev);
		found = state == 1;
		if (rc == CORE_OK && state < 0) {
			/* the best few are all blocked: look further down the order */
			rc = blocked_pick(&c, &b, cols, in->labels, &blocked_ok);
			if (rc == CORE_OK)
				rc = best_epoch(&c, b.name, cols, in->labels, blocked_ok, &found,
						&has_epoch, &prev);
		}
		if (rc != CORE_OK || !found)
			break; /* nothing available */
		if (has_epoch && prev >= c.now) {
			eq = prev;
			epoch = prev + 1;
		}
		mgo_evq_init(&q, m);
		mgo_evq_add(&q, CORE_EV_CARD_CLAIMED, b.name, NULL, c.actor, NULL, c.now,
			    json_pack("{sssI}", "marker", in->marker, "epoch", (json_int_t)epoch));
		rc = CORE_ERR_NOMEM;
		/* Matched after the write (claimed_match); marked, so that a drain finding it
		 * unmatched (this writer died in between) matches it itself. */
		if (!q.failed && BSON_APPEND_BOOL(q.ev[0], MGO_DLV_LATE, true) &&
		    take_filter(&filter, b.name, cols, in->labels, blocked_ok, c.now, eq) &&
		    BSON_APPEND_INT32(&sort, "priority", -1) &&
		    BSON_APPEND_INT32(&sort, "created_at", 1) && BSON_APPEND_INT32(&sort, "_id", 1) &&
		    take_update(&update, in->marker, in->holder, cols->n == 1 ? cols->v[0] : NULL,
				in->lease_ms, c.now, epoch, &q))
			rc = mgo_find_modify_sort(c.cards, &filter, &sort, &update, &doc);
		if (rc == CORE_OK && doc) {
			struct claimed_match cm = {0};

			if (m->test_read)
				m->test_read(m->test_ctx, "claimed");
			rc = mgo_card_from_bson(doc, &out->card);
			if (rc == CORE_ERR_BAD_REQUEST)
				rc = CORE_ERR_INTERNAL;
			if (rc == CORE_OK)
				rc = claimed_match(&c, out->card, &q, &cm);
			if (rc == CORE_OK)
				rc = mgo_evq_deliver(&c, c.cards, out->card->id, &q, doc);
			if (rc == CORE_OK)
				claimed_consume(&c, &out->card, &cm);
			core_card_free(cm.now);
			mgo_evq_release(&cm.lq);
			/* Not fatal: the claim stands, counted against no column (logged). */
			if (rc == CORE_OK && cols->n != 1 && from_record(&c, out->card) != CORE_OK)
				fprintf(stderr, "boardd: mongo: card %s: claim.from not recorded\n",
					out->card->id);
			if (rc != CORE_OK) {
				core_card_free(out->card);
				out->card = NULL;
			}
		}
		mgo_evq_release(&q);
		bson_destroy(&update);
		bson_destroy(&sort);
		bson_destroy(&filter);
		if (rc != CORE_OK || doc)
			break;
		/* Taken by another worker between the look-up and the write: look again. */
		c.now = store_now(st);
	}
	if (rc == CORE_OK && out->card &&
	    (!out->card->claim.present || !out->card->has_epoch ||
	     strcmp(out->card->claim.marker, in->marker) != 0)) {
		core_card_free(out->card);
		out->card = NULL;
		rc = CORE_ERR_INTERNAL; /* the post-image must hold what was just written */
	}
	/* Nothing to take: when a scheduled card would fit, the waiter wakes at its time. */
	if (rc == CORE_OK && !out->card)
		rc = wake_find(&c, &b, lim ? &room : cols, in->labels, &out->wake_at);
	if (rc == CORE_OK && out->card) {
		out->fresh = true;
		out->token.marker = out->card->claim.marker;
		out->token.epoch = out->card->claim_epoch;
	}
	if (rc != CORE_OK && out->card) {
		core_card_free(out->card);
		out->card = NULL;
	}
	bson_destroy(doc);
	free(blocked_ok);
	core_strv_release(&eligible);
	core_strv_release(&room);
	core_board_release(&b);
	mgo_conn_close(&c);
	return rc;
}
