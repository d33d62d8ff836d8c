/* DESIGN §17 on the Mongo twin: the capacity slots that bound live claims across replicas,
 * their repair and adoption, the held counts claim-next looks at.
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
 * of C's slots when fewer than L are owned (a unique index on (board, col, i): of two
 * inserters of one i, one wins), else CAPACITY_REACHED. Slots are made as needed, densely
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
#define SLOT_REFUSE_NAPS 6 /* 1 + 2 + ... + 32 ms at most before a refusal stands */

/* ---- slots ---- */

/* The arbiter of two inserters of one i is the unique index (board, col, i), not the _id: a
 * renamed column's slots keep their _id, and a new column may take the old name. */
enum core_rc mgo_slot_insert(struct mgo_conn *c, mongoc_collection_t *sl, const char *board,
			     const char *col, int64_t i, const char *id, int64_t epoch, char *sid,
			     size_t sid_len)
{
	bson_t ins = BSON_INITIALIZER;
	bson_error_t e;
	bool ok;

	snprintf(sid, sid_len, "%s/%s/%lld/%08x", board, col, (long long)i, (unsigned)mgo_rand32());
	BSON_APPEND_UTF8(&ins, "_id", sid);
	BSON_APPEND_UTF8(&ins, "board", board);
	BSON_APPEND_UTF8(&ins, "col", col);
	BSON_APPEND_INT64(&ins, "i", i);
	BSON_APPEND_UTF8(&ins, "owner", id);
	BSON_APPEND_INT64(&ins, "epoch", epoch);
	BSON_APPEND_DATE_TIME(&ins, "at", c->now);
	ok = mongoc_collection_insert_one(sl, &ins, NULL, NULL, &e);
	bson_destroy(&ins);
	if (ok)
		return CORE_OK;
	return mgo_error_is_dup(&e) ? CORE_ERR_CLAIM_CONFLICT : mgo_error("insert slot", &e);
}

enum core_rc mgo_slots_count(mongoc_collection_t *sl, const char *board, const char *col,
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
enum core_rc mgo_slot_free_id(mongoc_collection_t *sl, const char *sid, const char *owner,
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
	enum core_rc rc = CORE_OK;
	int tries;

	for (tries = 0; tries < SLOT_TAKE_TRIES; tries++) {
		bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, sort = BSON_INITIALIZER;
		bson_t lt, set;

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
		rc = mgo_slots_count(sl, board, col, true, &n_own);
		if (rc == CORE_OK && n_own >= limit)
			rc = CORE_ERR_CAPACITY_REACHED;
		if (rc == CORE_OK)
			rc = mgo_slots_count(sl, board, col, false, &n_all);
		if (rc == CORE_OK && n_all >= limit)
			rc = CORE_ERR_CAPACITY_REACHED; /* dense below the limit: all held */
		if (rc != CORE_OK)
			break;
		rc = mgo_slot_insert(c, sl, board, col, n_all, id, epoch, sid, sid_len);
		if (rc != CORE_ERR_CLAIM_CONFLICT) /* CLAIM_CONFLICT: another inserter made i */
			break;
	}
	if (rc != CORE_OK)
		return rc == CORE_ERR_CLAIM_CONFLICT ? CORE_ERR_CAPACITY_REACHED : rc;
	/* Held slots of a higher limit since lowered count too: over the limit, give it back. */
	rc = mgo_slots_count(sl, board, col, true, &n_own);
	if (rc == CORE_OK && n_own > limit)
		rc = CORE_ERR_CAPACITY_REACHED;
	if (rc != CORE_OK)
		mgo_slot_free_id(sl, sid, id, epoch);
	return rc;
}

enum core_rc mgo_live_room(struct mgo_conn *c, const struct core_board *b,
			   const struct core_strv *cols, bool *room)
{
	int64_t *per_col = calloc(b->n_cols + 1, sizeof(*per_col)), total = 0;
	enum core_rc rc = per_col ? mgo_board_claimed_on(c, b, per_col, &total) : CORE_ERR_NOMEM;
	bool col_room = !cols || !cols->n;
	size_t i;

	*room = false;
	for (i = 0; rc == CORE_OK && !col_room && i < b->n_cols; i++)
		col_room = core_strv_contains(cols, b->cols[i].name) &&
			   core_column_has_room(b, b->cols[i].name, per_col[i]);
	if (rc == CORE_OK)
		*room = col_room && (b->max_claims <= 0 || total < b->max_claims);
	free(per_col);
	return rc;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

bool mgo_slots_needed(const struct core_board *b, const char *col)
{
	const struct core_column *cl = col ? core_board_column(b, col) : NULL;

	return b->max_claims > 0 || (cl && cl->limit > 0);
}

static enum core_rc slots_take_once(struct mgo_conn *c, const struct core_board *b,
				    const char *col, const char *id, int64_t epoch,
				    struct mgo_slot_hold *h, char *detail, size_t detail_len);

/* A refusal is decided on the live claims (DESIGN §16): slots held by claims still in flight
 * (one racing for another card that is about to miss it) may fill the bound a moment; while
 * the cards leave room, the take is tried again after a short nap (SLOT_REFUSE_NAPS, 1 ms
 * doubling), then refused. Measured: 10-39 of ~280 claims of a free card refused, with 8
 * threads racing for another card of the column, before. */
enum core_rc mgo_slots_take(struct mgo_conn *c, const struct core_board *b, const char *col,
			    const char *id, int64_t epoch, struct mgo_slot_hold *h, char *detail,
			    size_t detail_len)
{
	struct core_strv cols = {.v = (char **)&col, .n = col ? 1 : 0};
	enum core_rc rc;
	bool room = false;
	int tries;

	for (tries = 0;; tries++) {
		rc = slots_take_once(c, b, col, id, epoch, h, detail, detail_len);
		if (rc != CORE_ERR_CAPACITY_REACHED || tries >= SLOT_REFUSE_NAPS ||
		    mgo_live_room(c, b, &cols, &room) != CORE_OK || !room)
			return rc;
		if (c->m->test_read)
			c->m->test_read(c->m->test_ctx, "slots-refused");
		nap_ms(1L << tries);
	}
}

static enum core_rc slots_take_once(struct mgo_conn *c, const struct core_board *b,
				    const char *col, const char *id, int64_t epoch,
				    struct mgo_slot_hold *h, char *detail, size_t detail_len)
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
		mgo_slot_free_id(sl, h->col_sid, id, epoch);
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
		mgo_slot_free_id(sl, h->col_sid, h->owner, h->epoch);
	if (sl && h->has_board)
		mgo_slot_free_id(sl, h->board_sid, h->owner, h->epoch);
	h->has_col = h->has_board = false;
	mongoc_collection_destroy(sl);
}

/* Every slot held by (id, epoch): freed (to < 0) or moved to epoch `to`. */
enum core_rc mgo_slots_update(struct mgo_conn *c, const char *id, int64_t epoch, int64_t to)
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
		mgo_slots_update(c, was->id, was->claim_epoch, now->claim_epoch);
	else
		mgo_slots_update(c, was->id, was->claim_epoch, -1);
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
