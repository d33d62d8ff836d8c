/* The admin operations on the Mongo twin (DESIGN §8): column rename and the label sweeps.
 *
 * Neither can be one atomic step here (no transactions): each card is its own conditional
 * update, guarded on what it was read with (state for a rename, labels for a sweep — the
 * ADR-096 §9 choke), so a card changed mid-walk is re-read and re-derived, never clobbered.
 * The summary event goes last, on the board document's outbox.
 *
 * Column rename writes the board first (guarded on the old column still being there), so from
 * then on no write can move a card INTO the old name; then it moves the cards. A rename
 * interrupted between the two is resumed by asking for it again: a board that already has
 * `to` and no `from`, with cards still in `from`, just moves them. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <stdlib.h>
#include <string.h>

struct move_arg {
	const char *id, *board, *from, *to;
	const struct core_board *b;
	bool moved; /* OUT */
};

/* One card out of the renamed column, as machine provenance (no effects, DESIGN §7). */
static enum core_rc move_once(struct mgo_conn *c, const void *arg, bool *hit,
			      struct core_card **out)
{
	struct move_arg *x = (struct move_arg *)arg;
	struct core_card *was = NULL, *now = NULL;
	enum core_rc rc = mgo_card_read(c, x->id, &was);

	x->moved = false;
	if (rc == CORE_ERR_NOT_FOUND || (rc == CORE_OK && (strcmp(was->board, x->board) != 0 ||
							   strcmp(was->state, x->from) != 0))) {
		*hit = true; /* gone or moved away meanwhile: not ours any more */
		core_card_free(was);
		return CORE_OK;
	}
	if (rc == CORE_OK && !(now = core_card_dup(was)))
		rc = CORE_ERR_NOMEM;
	if (rc == CORE_OK)
		rc = mgo_state_move(c, was, now, x->b, x->to, "state_rename", NULL, 0, NULL, hit,
				    out);
	x->moved = rc == CORE_OK && *hit;
	core_card_free(now);
	core_card_free(was);
	return rc;
}

/* Every claim of board taken from `from` (claim.from), and its slots, now name `to`. */
static enum core_rc claims_from_rename(struct mgo_conn *c, const char *board, const char *from,
				       const char *to)
{
	mongoc_collection_t *sl = mgo_effect_coll(c, "slots");
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set;
	bson_error_t e;
	enum core_rc rc = sl ? CORE_OK : CORE_ERR_NOMEM;

	BSON_APPEND_UTF8(&filter, "board", board);
	BSON_APPEND_UTF8(&filter, "col", from);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	BSON_APPEND_UTF8(&set, "col", to);
	bson_append_document_end(&update, &set);
	/* Not fatal: slots left under the old name stay held by their claims (the repair pass
	 * keeps a slot its claim's epoch still names) until those release them. */
	if (rc == CORE_OK && !mongoc_collection_update_many(sl, &filter, &update, NULL, NULL, &e))
		(void)mgo_error("rename slots", &e);
	bson_reinit(&filter);
	bson_reinit(&update);
	BSON_APPEND_UTF8(&filter, "board", board);
	BSON_APPEND_UTF8(&filter, "claim.from", from);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	BSON_APPEND_UTF8(&set, "claim.from", to);
	bson_append_document_end(&update, &set);
	if (rc == CORE_OK &&
	    !mongoc_collection_update_many(c->cards, &filter, &update, NULL, NULL, &e))
		rc = mgo_error("rename claims' from", &e);
	bson_destroy(&update);
	bson_destroy(&filter);
	mongoc_collection_destroy(sl);
	return rc;
}

enum core_rc mgo_board_column_rename(struct store *st, const char *board, const char *from,
				     const char *to, const struct store_actor *actor,
				     size_t *touched)
{
	struct core_board b = {0}, nb = {0};
	struct core_card **v = NULL;
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort;
	size_t n = 0, i;
	bool resume, hit = true;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	*touched = 0;
	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	rc = mgo_board_read(&c, board, &b);
	if (rc != CORE_OK)
		goto out;
	resume = !core_board_column(&b, from) && core_board_column(&b, to);
	if (!resume && !core_board_column(&b, from)) {
		rc = CORE_ERR_NOT_FOUND;
		goto out;
	}
	if (strcmp(from, to) == 0)
		goto out;
	if (!resume && core_board_column(&b, to)) {
		rc = CORE_ERR_ALREADY_EXISTS;
		goto out;
	}
	rc = resume ? core_board_copy(&nb, &b) : core_board_rename_column(&b, from, to, &nb);
	if (rc == CORE_OK && !resume)
		rc = mgo_board_write(&c, &nb, from, NULL, &hit);
	if (rc == CORE_OK && !hit)
		rc = CORE_ERR_NOT_FOUND; /* renamed (or dropped) by someone else meanwhile */
	if (rc != CORE_OK)
		goto out;
	BSON_APPEND_UTF8(&filter, "board", board);
	BSON_APPEND_UTF8(&filter, "state", from);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "ord", 1);
	bson_append_document_end(&opts, &sort);
	rc = mgo_cards_query(&c, &filter, &opts, &v, &n);
	for (i = 0; rc == CORE_OK && i < n; i++) {
		struct move_arg x = {v[i]->id, board, from, to, &nb, false};

		rc = mgo_card_retry_on(&c, move_once, &x, CORE_ERR_STATE_CONFLICT, NULL);
		*touched += x.moved;
	}
	if (rc == CORE_OK && resume && *touched == 0)
		rc = CORE_ERR_NOT_FOUND; /* nothing was left to finish: `from` is simply unknown */
	/* DESIGN §17: a claim taken from the column is now taken from its new name, and keeps
	 * its capacity slots (idempotent: a resumed rename repeats it harmlessly). */
	if (rc == CORE_OK)
		rc = claims_from_rename(&c, board, from, to);
	/* A subscription to the old name would never fire again: it follows the column. */
	if (rc == CORE_OK)
		rc = mgo_subs_column_rename(&c, board, from, to);
	c.actor = (struct mgo_actor){.name = ""};
	if (rc == CORE_OK)
		rc = mgo_board_event(&c, board, CORE_EV_BOARD_UPDATED, "state_rename",
				     json_pack("{s{ssss}sI}", "column_renamed", "from", from, "to",
					       to, "touched", (json_int_t)*touched));
out:
	store_cards_free(v, n);
	bson_destroy(&opts);
	bson_destroy(&filter);
	core_board_release(&nb);
	core_board_release(&b);
	mgo_conn_close(&c);
	/* touched counts what was done even on a late failure: those moves are committed. */
	return rc;
}

/* ---- label sweeps ---- */

static const enum core_event_type sweep_event[] = {
	[STORE_LABELS_RENAME] = CORE_EV_LABEL_RENAME,
	[STORE_LABELS_MERGE] = CORE_EV_LABEL_MERGE,
	[STORE_LABELS_DELETE] = CORE_EV_LABEL_DELETE,
};

struct sweep_arg {
	const char *id;
	const struct store_label_sweep *sw;
	bool changed; /* OUT */
};

/* One card: transform the labels as read, write guarded on them; a miss re-derives. */
static enum core_rc sweep_once(struct mgo_conn *c, const void *arg, bool *hit,
			       struct core_card **out)
{
	struct sweep_arg *x = (struct sweep_arg *)arg;
	struct core_card *was = NULL, *now = NULL;
	struct mgo_evq q;
	json_t *labels = NULL;
	size_t k;
	enum core_rc rc = mgo_card_read(c, x->id, &was);

	mgo_evq_init(&q, c->m);
	x->changed = false;
	if (rc == CORE_ERR_NOT_FOUND) {
		*hit = true;
		rc = CORE_OK;
		goto out;
	}
	if (rc == CORE_OK && !(now = core_card_dup(was)))
		rc = CORE_ERR_NOMEM;
	if (rc == CORE_OK)
		rc = core_labels_transform(now, x->sw->from, x->sw->to, &x->changed);
	if (rc != CORE_OK)
		goto out;
	if (!x->changed) {
		*hit = true;
		goto out;
	}
	now->updated_at = c->now;
	labels = json_array();
	for (k = 0; labels && k < now->labels.n; k++)
		json_array_append_new(labels, json_string(now->labels.v[k]));
	mgo_evq_add(&q, CORE_EV_CARD_LABELS_CHANGED, now->board, now->id, c->actor,
		    core_event_type_name(sweep_event[x->sw->kind]), c->now,
		    json_pack("{sO}", "labels", labels));
	rc = mgo_card_cas(c, was, now, MGO_PRE_LABELS, &q, hit, out);
	x->changed = rc == CORE_OK && *hit;
out:
	json_decref(labels);
	mgo_evq_release(&q);
	core_card_free(now);
	core_card_free(was);
	return rc;
}

/* The scope's boards for the query: "*" in the list means every board. */
static const char *const *sweep_boards(const struct store_label_sweep *sw)
{
	const char *const *b;

	for (b = sw->boards; b && *b; b++)
		if (strcmp(*b, "*") == 0)
			return NULL;
	return sw->boards;
}

struct board_count {
	char *board;
	size_t n;
};

enum core_rc mgo_labels_sweep(struct store *st, const struct store_label_sweep *sw,
			      const struct store_actor *actor, size_t *touched)
{
	const char *const *boards = sweep_boards(sw);
	struct board_count *per = NULL;
	struct core_card **v = NULL;
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, in, arr, sort;
	char ibuf[16];
	const char *ikey;
	size_t n = 0, i, k, nper = 0;
	json_t *from;
	enum core_rc rc;

	*touched = 0;
	if (sw->board && !mgo_board_allowed(sw->board, NULL, boards))
		return CORE_OK;
	rc = mgo_conn_open(mgo_of(st), &c);
	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	mgo_board_filter_append(&filter, sw->board, sw->board ? NULL : boards);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "labels", &in);
	BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	for (i = 0; i < sw->from->n; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		BSON_APPEND_UTF8(&arr, ikey, sw->from->v[i]);
	}
	bson_append_array_end(&in, &arr);
	bson_append_document_end(&filter, &in);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "ord", 1);
	bson_append_document_end(&opts, &sort);
	rc = mgo_cards_query(&c, &filter, &opts, &v, &n);
	if (rc == CORE_OK && !(per = calloc(n ? n : 1, sizeof(*per))))
		rc = CORE_ERR_NOMEM;
	for (i = 0; rc == CORE_OK && i < n; i++) {
		struct sweep_arg x = {v[i]->id, sw, false};

		rc = mgo_card_retry_on(&c, sweep_once, &x, CORE_ERR_STATE_CONFLICT, NULL);
		if (rc != CORE_OK || !x.changed)
			continue;
		(*touched)++;
		for (k = 0; k < nper && strcmp(per[k].board, v[i]->board) != 0; k++)
			;
		if (k == nper)
			per[nper++].board = v[i]->board; /* borrowed from v */
		per[k].n++;
	}
	/* One summary per board touched: {from, to, touched}. */
	for (k = 0; rc == CORE_OK && k < nper; k++) {
		from = json_array();
		for (i = 0; from && i < sw->from->n; i++)
			json_array_append_new(from, json_string(sw->from->v[i]));
		rc = mgo_board_event(&c, per[k].board, sweep_event[sw->kind],
				     core_event_type_name(sweep_event[sw->kind]),
				     json_pack("{s:o, s:o, s:I}", "from", from, "to",
					       sw->to ? json_string(sw->to) : json_null(), "touched",
					       (json_int_t)per[k].n));
	}
	free(per);
	store_cards_free(v, n);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mgo_conn_close(&c);
	return rc;
}
