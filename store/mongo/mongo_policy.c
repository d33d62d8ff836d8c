/* DESIGN §17 on the Mongo twin: the retry step of an owned release (attempts, backoff,
 * filing when exhausted), the capacity slots that bound live claims across replicas, their
 * repair, the claimed counts (store_ops.board_claimed) and claim-next's wake_at.
 *
 * ---- Capacity: slots ----
 * No multi-document transaction is available (FerretDB 1.24, mongo-java-server), so a count
 * of cards cannot gate a claim: two replicas would both read "2 of 3" and both claim. The
 * bound rests on single-document atomicity instead. Collection `slots` holds one document per
 * (board, column, i) — column "" for the board's max_claims — {board, col, i, owner, epoch,
 * at}; owner is the card id holding it (null: free), epoch the claim epoch of that hold.
 *
 * A fresh claim from column C with limit L takes a slot BEFORE its card write: one
 * findAndModify {board, col: C, owner: null, i < L} -> {owner: card, epoch: E, at: now}, E
 * being the epoch the claim will get. No free slot: a new one is inserted at i = the number
 * of C's slots when fewer than L are owned (a unique _id "<board>/<C>/<i>": two inserters of
 * one i, one wins), else CAPACITY_REACHED. Slots are made as concurrency needs them, densely
 * from 0, so slots i < L all exist once L are owned. Then the owned count of C is read; above L
 * (slots of a higher limit since lowered are still held) the slot is given back and the claim
 * refused: whoever took a slot last counts every hold taken before it, so the live holds never
 * exceed L. The board's slot follows the same way; then the card's CAS (expected old epoch).
 * A CAS that misses or fails gives the slots back by _id (conditional on owner and epoch).
 *
 * A release, a filing or a reopen frees the holds {owner: card, epoch: E} after its CAS; a
 * recovery claim (the reaper's transfer) moves them to its new epoch. The card remembers
 * that its claim holds slots (`slot_epoch`, top level, never read by core), so a release on a
 * board without limits costs nothing more.
 *
 * Leaks (a process dying between the slot and the card write, or between the card write and
 * the free) are repaired by the reaper's repair pass (mgo_slots_repair, from
 * reaper_list_repair), exactly: a held slot older than MGO_SLOT_GRACE_MS is compared with its
 * card. Still held by that claim (epoch E, from C): kept (its `at` renewed so the scan moves
 * on). Held by a later claim from C (a transfer whose move did not run, or a claim from before
 * the limit): the slot follows it. Card gone, claimed by another epoch, or unclaimed at an
 * epoch >= E: that hold is over, freed. Unclaimed at an epoch below E: the claim's CAS may
 * still be in flight, so the card's epoch is first raised to E without claiming (CAS on the
 * epoch read, unclaimed): the in-flight CAS, which expects the old epoch, can never land;
 * then the slot is freed. Nothing is guessed from time alone.
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
#include <time.h>

#define SLOT_TAKE_TRIES 8

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
	if (!a->b.failed)
		return CORE_ERR_INTERNAL;
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

/* ---- slots ---- */

static void slot_id(char *buf, size_t len, const char *board, const char *col, int64_t i)
{
	snprintf(buf, len, "%s/%s/%lld", board, col, (long long)i);
}

static enum core_rc slots_count(mongoc_collection_t *sl, const char *board, const char *col,
				bool owned, int64_t *n)
{
	bson_t filter = BSON_INITIALIZER, ne;
	bson_error_t e;
	int64_t k;

	BSON_APPEND_UTF8(&filter, "board", board);
	BSON_APPEND_UTF8(&filter, "col", col);
	if (owned) {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "owner", &ne);
		BSON_APPEND_NULL(&ne, "$ne");
		bson_append_document_end(&filter, &ne);
	}
	k = mongoc_collection_count_documents(sl, &filter, NULL, NULL, NULL, &e);
	bson_destroy(&filter);
	if (k < 0)
		return mgo_error("count slots", &e);
	*n = k;
	return CORE_OK;
}

/* Frees slot `sid` if it is still (owner, epoch). */
static enum core_rc slot_free_id(mongoc_collection_t *sl, const char *sid, const char *owner,
				 int64_t epoch)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set;
	bson_error_t e;
	enum core_rc rc = CORE_OK;

	BSON_APPEND_UTF8(&filter, "_id", sid);
	BSON_APPEND_UTF8(&filter, "owner", owner);
	BSON_APPEND_INT64(&filter, "epoch", epoch);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	BSON_APPEND_NULL(&set, "owner");
	bson_append_document_end(&update, &set);
	if (!mongoc_collection_update_one(sl, &filter, &update, NULL, NULL, &e))
		rc = mgo_error("free slot", &e);
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

/* Takes one slot of (board, col) under limit for (id, epoch); *sid receives its _id.
 * CAPACITY_REACHED when `limit` are held. */
static enum core_rc slot_take(struct mgo_conn *c, mongoc_collection_t *sl, const char *board,
			      const char *col, int32_t limit, const char *id, int64_t epoch,
			      char *sid, size_t sid_len)
{
	bson_t *doc = NULL;
	bson_iter_t it;
	int64_t n_all = 0, n_own = 0;
	bson_error_t e;
	enum core_rc rc = CORE_OK;
	int tries;

	for (tries = 0; tries < SLOT_TAKE_TRIES; tries++) {
		bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, sort = BSON_INITIALIZER;
		bson_t lt, set, ins = BSON_INITIALIZER;

		BSON_APPEND_UTF8(&filter, "board", board);
		BSON_APPEND_UTF8(&filter, "col", col);
		BSON_APPEND_NULL(&filter, "owner");
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "i", &lt);
		BSON_APPEND_INT64(&lt, "$lt", limit);
		bson_append_document_end(&filter, &lt);
		BSON_APPEND_INT32(&sort, "i", 1);
		BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
		BSON_APPEND_UTF8(&set, "owner", id);
		BSON_APPEND_INT64(&set, "epoch", epoch);
		BSON_APPEND_DATE_TIME(&set, "at", c->now);
		bson_append_document_end(&update, &set);
		rc = mgo_find_modify_sort(sl, &filter, &sort, &update, &doc);
		bson_destroy(&sort);
		bson_destroy(&update);
		bson_destroy(&filter);
		if (rc != CORE_OK)
			break;
		if (doc) {
			if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it))
				snprintf(sid, sid_len, "%s", bson_iter_utf8(&it, NULL));
			bson_destroy(doc);
			doc = NULL;
			break;
		}
		/* None free below the limit: make one when fewer than `limit` are held. */
		rc = slots_count(sl, board, col, true, &n_own);
		if (rc == CORE_OK && n_own >= limit)
			rc = CORE_ERR_CAPACITY_REACHED;
		if (rc == CORE_OK)
			rc = slots_count(sl, board, col, false, &n_all);
		if (rc == CORE_OK && n_all >= limit)
			rc = CORE_ERR_CAPACITY_REACHED; /* dense below the limit: all held */
		if (rc != CORE_OK)
			break;
		slot_id(sid, sid_len, board, col, n_all);
		BSON_APPEND_UTF8(&ins, "_id", sid);
		BSON_APPEND_UTF8(&ins, "board", board);
		BSON_APPEND_UTF8(&ins, "col", col);
		BSON_APPEND_INT64(&ins, "i", n_all);
		BSON_APPEND_UTF8(&ins, "owner", id);
		BSON_APPEND_INT64(&ins, "epoch", epoch);
		BSON_APPEND_DATE_TIME(&ins, "at", c->now);
		if (mongoc_collection_insert_one(sl, &ins, NULL, NULL, &e)) {
			bson_destroy(&ins);
			break;
		}
		bson_destroy(&ins);
		if (!mgo_error_is_dup(&e)) {
			rc = mgo_error("insert slot", &e);
			break;
		}
		rc = CORE_ERR_CLAIM_CONFLICT; /* another inserter made it: look again */
	}
	if (rc != CORE_OK)
		return rc == CORE_ERR_CLAIM_CONFLICT ? CORE_ERR_CAPACITY_REACHED : rc;
	/* Held slots of a higher limit since lowered count too: over the limit, give it back. */
	rc = slots_count(sl, board, col, true, &n_own);
	if (rc == CORE_OK && n_own > limit)
		rc = CORE_ERR_CAPACITY_REACHED;
	if (rc != CORE_OK)
		slot_free_id(sl, sid, id, epoch);
	return rc;
}

bool mgo_slots_needed(const struct core_board *b, const char *col)
{
	const struct core_column *cl = col ? core_board_column(b, col) : NULL;

	return b->max_claims > 0 || (cl && cl->limit > 0);
}

enum core_rc mgo_slots_take(struct mgo_conn *c, const struct core_board *b, const char *col,
			    const char *id, int64_t epoch, struct mgo_slot_hold *h, char *detail,
			    size_t detail_len)
{
	const struct core_column *cl = col ? core_board_column(b, col) : NULL;
	mongoc_collection_t *sl = mgo_effect_coll(c, "slots");
	enum core_rc rc = CORE_OK;

	memset(h, 0, sizeof(*h));
	if (!sl)
		return CORE_ERR_NOMEM;
	if (cl && cl->limit > 0) {
		rc = slot_take(c, sl, b->name, col, cl->limit, id, epoch, h->col_sid,
			       sizeof(h->col_sid));
		if (rc == CORE_ERR_CAPACITY_REACHED)
			core_capacity_check(b, col, cl->limit, 0, detail, detail_len);
		h->has_col = rc == CORE_OK;
	}
	if (rc == CORE_OK && b->max_claims > 0) {
		rc = slot_take(c, sl, b->name, "", b->max_claims, id, epoch, h->board_sid,
			       sizeof(h->board_sid));
		if (rc == CORE_ERR_CAPACITY_REACHED)
			core_capacity_check(b, NULL, 0, b->max_claims, detail, detail_len);
		h->has_board = rc == CORE_OK;
	}
	if (rc == CORE_OK) {
		snprintf(h->owner, sizeof(h->owner), "%s", id);
		h->epoch = epoch;
	} else if (h->has_col) {
		slot_free_id(sl, h->col_sid, id, epoch);
		h->has_col = false;
	}
	mongoc_collection_destroy(sl);
	return rc;
}

void mgo_slots_give_back(struct mgo_conn *c, struct mgo_slot_hold *h)
{
	mongoc_collection_t *sl;

	if (!h->has_col && !h->has_board)
		return;
	sl = mgo_effect_coll(c, "slots");
	if (sl && h->has_col)
		slot_free_id(sl, h->col_sid, h->owner, h->epoch);
	if (sl && h->has_board)
		slot_free_id(sl, h->board_sid, h->owner, h->epoch);
	h->has_col = h->has_board = false;
	mongoc_collection_destroy(sl);
}

/* Every slot held by (id, epoch): freed (to < 0) or moved to epoch `to`. */
static enum core_rc slots_update(struct mgo_conn *c, const char *id, int64_t epoch, int64_t to)
{
	mongoc_collection_t *sl = mgo_effect_coll(c, "slots");
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set;
	bson_error_t e;
	enum core_rc rc = CORE_OK;

	if (!sl)
		return CORE_ERR_NOMEM;
	BSON_APPEND_UTF8(&filter, "owner", id);
	BSON_APPEND_INT64(&filter, "epoch", epoch);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	if (to < 0)
		BSON_APPEND_NULL(&set, "owner");
	else
		BSON_APPEND_INT64(&set, "epoch", to);
	bson_append_document_end(&update, &set);
	if (!mongoc_collection_update_many(sl, &filter, &update, NULL, NULL, &e))
		rc = mgo_error(to < 0 ? "free slots" : "move slots", &e);
	bson_destroy(&update);
	bson_destroy(&filter);
	mongoc_collection_destroy(sl);
	return rc;
}

void mgo_slots_after_cas(struct mgo_conn *c, const struct core_card *was,
			 const struct core_card *now, const bson_t *post)
{
	bson_iter_t it;
	int64_t se = 0;

	if (!was->claim.present || !was->has_epoch || !post ||
	    !bson_iter_init_find(&it, post, "slot_epoch") || !mgo_iter_i64(&it, &se) || !se)
		return;
	if (now->claim.present && now->has_epoch && now->claim_epoch == was->claim_epoch)
		return; /* the same hold (a renew, an owned write) */
	if (se != was->claim_epoch && !(now->claim.present && se == now->claim_epoch))
		return; /* the slots belong to an earlier claim, already dealt with */
	/* A failure leaves the slots to the repair pass (logged by mgo_error). */
	if (now->claim.present && now->has_epoch)
		slots_update(c, was->id, was->claim_epoch, now->claim_epoch);
	else
		slots_update(c, was->id, was->claim_epoch, -1);
}

/* Raises unclaimed card id's epoch from `from` (has: present) to `to` without claiming. */
static enum core_rc epoch_bump(struct mgo_conn *c, const char *id, bool has, int64_t from,
			       int64_t to, bool *hit)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set, ex, *doc = NULL;
	enum core_rc rc;

	BSON_APPEND_UTF8(&filter, "_id", id);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim.marker", &ex);
	BSON_APPEND_BOOL(&ex, "$exists", false);
	bson_append_document_end(&filter, &ex);
	if (has) {
		BSON_APPEND_INT64(&filter, "claim_epoch", from);
	} else {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim_epoch", &ex);
		BSON_APPEND_BOOL(&ex, "$exists", false);
		bson_append_document_end(&filter, &ex);
	}
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	BSON_APPEND_INT64(&set, "claim_epoch", to);
	bson_append_document_end(&update, &set);
	rc = mgo_find_modify(c->cards, &filter, &update, &doc);
	*hit = rc == CORE_OK && doc;
	bson_destroy(doc);
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

struct slot_row {
	char *sid, *board, *col, *owner;
	int64_t epoch;
};

static enum core_rc collect_slot(void *ctx, const bson_t *doc)
{
	struct {
		struct slot_row *v;
		size_t n, cap;
	} *acc = ctx;
	struct slot_row r = {0}, *nv;
	bson_iter_t it;

	if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it))
		r.sid = strdup(bson_iter_utf8(&it, NULL));
	if (bson_iter_init_find(&it, doc, "board") && BSON_ITER_HOLDS_UTF8(&it))
		r.board = strdup(bson_iter_utf8(&it, NULL));
	if (bson_iter_init_find(&it, doc, "col") && BSON_ITER_HOLDS_UTF8(&it))
		r.col = strdup(bson_iter_utf8(&it, NULL));
	if (bson_iter_init_find(&it, doc, "owner") && BSON_ITER_HOLDS_UTF8(&it))
		r.owner = strdup(bson_iter_utf8(&it, NULL));
	if (bson_iter_init_find(&it, doc, "epoch"))
		mgo_iter_i64(&it, &r.epoch);
	if (!r.sid || !r.board || !r.col || !r.owner) {
		free(r.sid), free(r.board), free(r.col), free(r.owner);
		return CORE_OK; /* a slot we did not write: not ours to judge */
	}
	if (acc->n == acc->cap) {
		nv = realloc(acc->v, (acc->cap ? acc->cap * 2 : 16) * sizeof(*nv));
		if (!nv) {
			free(r.sid), free(r.board), free(r.col), free(r.owner);
			return CORE_ERR_NOMEM;
		}
		acc->v = nv;
		acc->cap = acc->cap ? acc->cap * 2 : 16;
	}
	acc->v[acc->n++] = r;
	return CORE_OK;
}

/* Sets slot sid (still owner, epoch) to `set_epoch` (>= 0) or touches its `at`. */
static enum core_rc slot_set(mongoc_collection_t *sl, const struct slot_row *r, int64_t now,
			     int64_t set_epoch)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set;
	bson_error_t e;
	enum core_rc rc = CORE_OK;

	BSON_APPEND_UTF8(&filter, "_id", r->sid);
	BSON_APPEND_UTF8(&filter, "owner", r->owner);
	BSON_APPEND_INT64(&filter, "epoch", r->epoch);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	BSON_APPEND_DATE_TIME(&set, "at", now);
	if (set_epoch >= 0)
		BSON_APPEND_INT64(&set, "epoch", set_epoch);
	bson_append_document_end(&update, &set);
	if (!mongoc_collection_update_one(sl, &filter, &update, NULL, NULL, &e))
		rc = mgo_error("slot repair", &e);
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

/* Does (owner, epoch) hold a slot of (board, col) other than r? */
static enum core_rc slot_held_by(mongoc_collection_t *sl, const struct slot_row *r,
				 int64_t epoch, bool *held)
{
	bson_t filter = BSON_INITIALIZER;
	bson_error_t e;
	int64_t k;

	BSON_APPEND_UTF8(&filter, "board", r->board);
	BSON_APPEND_UTF8(&filter, "col", r->col);
	BSON_APPEND_UTF8(&filter, "owner", r->owner);
	BSON_APPEND_INT64(&filter, "epoch", epoch);
	k = mongoc_collection_count_documents(sl, &filter, NULL, NULL, NULL, &e);
	bson_destroy(&filter);
	if (k < 0)
		return mgo_error("count slots", &e);
	*held = k > 0;
	return CORE_OK;
}

static enum core_rc slot_judge(struct mgo_conn *c, mongoc_collection_t *sl,
			       const struct slot_row *r, size_t *freed)
{
	struct core_card *card = NULL;
	bool same_col, held = false, hit = false;
	enum core_rc rc = mgo_card_read(c, r->owner, &card);

	if (rc == CORE_ERR_NOT_FOUND) {
		rc = slot_free_id(sl, r->sid, r->owner, r->epoch);
		*freed += rc == CORE_OK;
		return rc;
	}
	if (rc != CORE_OK)
		return rc;
	same_col = !r->col[0] || (card->claim.from && strcmp(card->claim.from, r->col) == 0);
	if (card->claim.present && card->has_epoch && same_col) {
		if (card->claim_epoch == r->epoch) {
			rc = slot_set(sl, r, c->now, -1); /* live: looked at again after the grace */
			goto out;
		}
		if (card->claim_epoch > r->epoch) {
			/* A later claim from the same column holding no slot (a transfer whose move
			 * did not run): the slot follows it. */
			rc = slot_held_by(sl, r, card->claim_epoch, &held);
			if (rc == CORE_OK && !held) {
				rc = slot_set(sl, r, c->now, card->claim_epoch);
				goto out;
			}
		}
	}
	if (rc == CORE_OK && !card->claim.present &&
	    (!card->has_epoch || card->claim_epoch < r->epoch)) {
		/* The claim's CAS may still be in flight: take its expected epoch away first. */
		rc = epoch_bump(c, card->id, card->has_epoch, card->claim_epoch, r->epoch, &hit);
		if (rc == CORE_OK && !hit)
			goto out; /* the card moved: judged again next pass */
	}
	if (rc == CORE_OK) {
		rc = slot_free_id(sl, r->sid, r->owner, r->epoch);
		*freed += rc == CORE_OK;
	}
out:
	core_card_free(card);
	return rc;
}

enum core_rc mgo_slots_repair(struct mgo_conn *c, size_t batch, size_t *freed)
{
	mongoc_collection_t *sl = mgo_effect_coll(c, "slots");
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, ne, lt, sort;
	struct {
		struct slot_row *v;
		size_t n, cap;
	} acc = {0};
	enum core_rc rc;
	size_t i;

	*freed = 0;
	if (!sl)
		return CORE_ERR_NOMEM;
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "owner", &ne);
	BSON_APPEND_NULL(&ne, "$ne");
	bson_append_document_end(&filter, &ne);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "at", &lt);
	BSON_APPEND_DATE_TIME(&lt, "$lt", c->now - MGO_SLOT_GRACE_MS);
	bson_append_document_end(&filter, &lt);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "at", 1);
	bson_append_document_end(&opts, &sort);
	BSON_APPEND_INT64(&opts, "limit", (int64_t)(batch ? batch : 64));
	rc = mgo_find_each(sl, &filter, &opts, collect_slot, &acc);
	for (i = 0; rc == CORE_OK && i < acc.n; i++)
		rc = slot_judge(c, sl, &acc.v[i], freed);
	for (i = 0; i < acc.n; i++)
		free(acc.v[i].sid), free(acc.v[i].board), free(acc.v[i].col), free(acc.v[i].owner);
	free(acc.v);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mongoc_collection_destroy(sl);
	return rc;
}

/* ---- counts ---- */

static enum core_rc count_owned(void *ctx, const bson_t *doc)
{
	struct {
		const struct core_board *b;
		int64_t *per_col, *board;
	} *x = ctx;
	bson_iter_t it;
	const char *col;
	size_t i;

	if (!bson_iter_init_find(&it, doc, "col") || !BSON_ITER_HOLDS_UTF8(&it))
		return CORE_OK;
	col = bson_iter_utf8(&it, NULL);
	if (!*col) {
		(*x->board)++;
		return CORE_OK;
	}
	for (i = 0; i < x->b->n_cols; i++)
		if (strcmp(x->b->cols[i].name, col) == 0)
			x->per_col[i]++;
	return CORE_OK;
}

enum core_rc mgo_slots_owned(struct mgo_conn *c, const struct core_board *b, int64_t *per_col,
			     int64_t *board)
{
	mongoc_collection_t *sl = mgo_effect_coll(c, "slots");
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, ne, proj;
	struct {
		const struct core_board *b;
		int64_t *per_col, *board;
	} x = {b, per_col, board};
	enum core_rc rc;

	memset(per_col, 0, b->n_cols * sizeof(*per_col));
	*board = 0;
	if (!sl)
		return CORE_ERR_NOMEM;
	BSON_APPEND_UTF8(&filter, "board", b->name);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "owner", &ne);
	BSON_APPEND_NULL(&ne, "$ne");
	bson_append_document_end(&filter, &ne);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "col", 1);
	bson_append_document_end(&opts, &proj);
	rc = mgo_find_each(sl, &filter, &opts, count_owned, &x);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mongoc_collection_destroy(sl);
	return rc;
}

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
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, ex, proj;
	struct {
		const struct core_board *b;
		int64_t *per_col, *total;
	} x = {b, per_col, total};
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	memset(per_col, 0, b->n_cols * sizeof(*per_col));
	*total = 0;
	BSON_APPEND_UTF8(&filter, "board", b->name);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim.marker", &ex);
	BSON_APPEND_BOOL(&ex, "$exists", true);
	bson_append_document_end(&filter, &ex);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "claim.from", 1);
	bson_append_document_end(&opts, &proj);
	rc = mgo_find_each(c.cards, &filter, &opts, count_from, &x);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mgo_conn_close(&c);
	return rc;
}
