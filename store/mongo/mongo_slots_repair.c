/* DESIGN §17 on the Mongo twin: the repair of the capacity slots (mongo_slots.c has the
 * design and the argument): the held slots older than MGO_SLOT_GRACE_MS judged against their
 * cards, exactly, and the adoption of live claims that hold no slot. Run by the reaper's
 * repair pass (mgo_reaper_list_repair) and after a board write (the adoption). */
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

/* Sets `field` to v on the card `filter` matches (filter is destroyed); hit: one matched. */
static enum core_rc card_set_if(struct mgo_conn *c, bson_t *filter, const char *field, int64_t v,
				bool *hit)
{
	bson_t update = BSON_INITIALIZER, set, *doc = NULL;
	enum core_rc rc;

	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	BSON_APPEND_INT64(&set, field, v);
	bson_append_document_end(&update, &set);
	rc = mgo_find_modify(c->cards, filter, &update, &doc);
	*hit = rc == CORE_OK && doc;
	bson_destroy(doc);
	bson_destroy(&update);
	bson_destroy(filter);
	return rc;
}

/* Raises unclaimed card id's epoch from `from` (has: present) to `to` without claiming. */
static enum core_rc epoch_bump(struct mgo_conn *c, const char *id, bool has, int64_t from,
			       int64_t to, bool *hit)
{
	bson_t filter = BSON_INITIALIZER, ex;

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
	return card_set_if(c, &filter, "claim_epoch", to, hit);
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
		rc = mgo_slot_free_id(sl, r->sid, r->owner, r->epoch);
		*freed += rc == CORE_OK;
		return rc;
	}
	if (rc != CORE_OK)
		return rc;
	same_col = !r->col[0] || (card->claim.from && strcmp(card->claim.from, r->col) == 0);
	/* The epoch names the claim: still held, whatever its column is called now (a column
	 * rename moves the slots and the claims' from one after the other). */
	if (card->claim.present && card->has_epoch && card->claim_epoch == r->epoch) {
		rc = slot_set(sl, r, c->now, -1); /* live: looked at again after the grace */
		goto out;
	}
	if (card->claim.present && card->has_epoch && same_col) {
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
		rc = mgo_slot_free_id(sl, r->sid, r->owner, r->epoch);
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
	/* Then the live claims that hold no slot, on every board with a limit. */
	if (rc == CORE_OK) {
		struct core_board *boards = NULL;
		size_t nb = 0, adopted;

		rc = mgo_board_list(&c->m->base, &boards, &nb);
		for (i = 0; rc == CORE_OK && i < nb; i++)
			rc = mgo_slots_adopt(c, &boards[i], &adopted);
		store_boards_free(boards, nb);
	}
	for (i = 0; i < acc.n; i++)
		free(acc.v[i].sid), free(acc.v[i].board), free(acc.v[i].col), free(acc.v[i].owner);
	free(acc.v);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mongoc_collection_destroy(sl);
	return rc;
}

/* ---- adoption: live claims that hold no slot ----
 * A claim taken while its column had no limit (or before max_claims was set), or by a
 * claim-next that read the board just before another replica set the limit, holds no slot.
 * It is adopted: a slot is made for it (above the limit if need be: the held count is what a
 * fresh claim checks, so no new claim is let in until the count is below the limit again).
 * Run after a board write that sets or raises a limit, and by every repair pass. A hold of a
 * recovery claim whose move has not run yet may be adopted twice: counted twice until its
 * release frees both (never under-counted). */

struct held {
	char *owner, *col;
	int64_t epoch;
};

struct held_acc {
	struct held *v;
	size_t n, cap;
	bool slots; /* reading slots (owner, col, epoch) or cards (_id, claim.from, claim_epoch) */
};

static enum core_rc collect_held(void *ctx, const bson_t *doc)
{
	struct held_acc *acc = ctx;
	struct held h = {0}, *nv;
	bson_iter_t it, sub;

	if (acc->slots) {
		if (bson_iter_init_find(&it, doc, "owner") && BSON_ITER_HOLDS_UTF8(&it))
			h.owner = strdup(bson_iter_utf8(&it, NULL));
		if (bson_iter_init_find(&it, doc, "col") && BSON_ITER_HOLDS_UTF8(&it))
			h.col = strdup(bson_iter_utf8(&it, NULL));
		if (bson_iter_init_find(&it, doc, "epoch"))
			mgo_iter_i64(&it, &h.epoch);
	} else {
		if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it))
			h.owner = strdup(bson_iter_utf8(&it, NULL));
		if (bson_iter_init_find(&it, doc, "claim") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
		    bson_iter_recurse(&it, &sub) && bson_iter_find(&sub, "from") &&
		    BSON_ITER_HOLDS_UTF8(&sub))
			h.col = strdup(bson_iter_utf8(&sub, NULL));
		else
			h.col = strdup(""); /* a claim from no column: the board's count only */
		if (!bson_iter_init_find(&it, doc, "claim_epoch") || !mgo_iter_i64(&it, &h.epoch))
			h.epoch = -1; /* stripped: not ours to count */
	}
	if (!h.owner || !h.col || h.epoch < 0) {
		free(h.owner), free(h.col);
		return CORE_OK;
	}
	if (acc->n == acc->cap) {
		nv = realloc(acc->v, (acc->cap ? acc->cap * 2 : 16) * sizeof(*nv));
		if (!nv) {
			free(h.owner), free(h.col);
			return CORE_ERR_NOMEM;
		}
		acc->v = nv;
		acc->cap = acc->cap ? acc->cap * 2 : 16;
	}
	acc->v[acc->n++] = h;
	return CORE_OK;
}

static void held_release(struct held_acc *acc)
{
	size_t i;

	for (i = 0; i < acc->n; i++)
		free(acc->v[i].owner), free(acc->v[i].col);
	free(acc->v);
}

static bool held_has(const struct held_acc *acc, const char *owner, const char *col,
		     int64_t epoch)
{
	size_t i;

	for (i = 0; i < acc->n; i++)
		if (acc->v[i].epoch == epoch && strcmp(acc->v[i].owner, owner) == 0 &&
		    strcmp(acc->v[i].col, col) == 0)
			return true;
	return false;
}

/* A slot of (board, col) for (id, epoch) with no bound: i = the number of the slots. */
static enum core_rc slot_make(struct mgo_conn *c, mongoc_collection_t *sl, const char *board,
			      const char *col, const char *id, int64_t epoch)
{
	char sid[160];
	int64_t n_all = 0;
	enum core_rc rc = CORE_OK;
	int tries;

	for (tries = 0; tries < SLOT_TAKE_TRIES; tries++) {
		rc = mgo_slots_count(sl, board, col, false, &n_all);
		if (rc == CORE_OK)
			rc = mgo_slot_insert(c, sl, board, col, n_all, id, epoch, sid, sizeof(sid));
		if (rc != CORE_ERR_CLAIM_CONFLICT) /* CLAIM_CONFLICT: another inserter made i */
			return rc;
	}
	return CORE_ERR_STORE_UNAVAILABLE;
}

/* Marks card id's claim (still at epoch) as holding slots, so its release frees them. */
static enum core_rc slot_epoch_mark(struct mgo_conn *c, const char *id, int64_t epoch, bool *hit)
{
	bson_t filter = BSON_INITIALIZER, ex;

	BSON_APPEND_UTF8(&filter, "_id", id);
	BSON_APPEND_INT64(&filter, "claim_epoch", epoch);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim.marker", &ex);
	BSON_APPEND_BOOL(&ex, "$exists", true);
	bson_append_document_end(&filter, &ex);
	return card_set_if(c, &filter, "slot_epoch", epoch, hit);
}

enum core_rc mgo_slots_adopt(struct mgo_conn *c, const struct core_board *b, size_t *adopted)
{
	mongoc_collection_t *sl;
	struct held_acc slots = {.slots = true}, cards = {0};
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, ex, proj;
	enum core_rc rc;
	size_t i, k;

	*adopted = 0;
	for (i = 0; i < b->n_cols && b->max_claims <= 0; i++)
		if (b->cols[i].limit > 0)
			break;
	if (b->max_claims <= 0 && i == b->n_cols)
		return CORE_OK; /* no limit on this board */
	if (!(sl = mgo_effect_coll(c, "slots")))
		return CORE_ERR_NOMEM;
	/* The claims first, then the slots: a claim made in between took its slot before its
	 * card write, so it is seen holding one. */
	BSON_APPEND_UTF8(&filter, "board", b->name);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim.marker", &ex);
	BSON_APPEND_BOOL(&ex, "$exists", true);
	bson_append_document_end(&filter, &ex);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "claim.from", 1);
	BSON_APPEND_INT32(&proj, "claim_epoch", 1);
	bson_append_document_end(&opts, &proj);
	rc = mgo_find_each(c->cards, &filter, &opts, collect_held, &cards);
	bson_reinit(&filter);
	bson_reinit(&opts);
	BSON_APPEND_UTF8(&filter, "board", b->name);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "owner", &ex);
	BSON_APPEND_NULL(&ex, "$ne");
	bson_append_document_end(&filter, &ex);
	if (rc == CORE_OK)
		rc = mgo_find_each(sl, &filter, NULL, collect_held, &slots);
	for (i = 0; rc == CORE_OK && i < cards.n; i++) {
		const struct held *h = &cards.v[i];
		const struct core_column *cl = h->col[0] ? core_board_column(b, h->col) : NULL;
		const char *need[2];
		size_t n_need = 0;
		bool hit = false;

		if (cl && cl->limit > 0 && !held_has(&slots, h->owner, h->col, h->epoch))
			need[n_need++] = h->col;
		if (b->max_claims > 0 && !held_has(&slots, h->owner, "", h->epoch))
			need[n_need++] = "";
		for (k = 0; rc == CORE_OK && k < n_need; k++)
			rc = slot_make(c, sl, b->name, need[k], h->owner, h->epoch);
		if (rc == CORE_OK && n_need)
			rc = slot_epoch_mark(c, h->owner, h->epoch, &hit);
		/* Released meanwhile: its slots are over (the repair pass frees them too). */
		if (rc == CORE_OK && n_need && !hit)
			mgo_slots_update(c, h->owner, h->epoch, -1);
		*adopted += n_need && hit;
	}
	held_release(&cards);
	held_release(&slots);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mongoc_collection_destroy(sl);
	return rc;
}
