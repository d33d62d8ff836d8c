/* Boards on the Mongo twin: list, get, put (with its board_updated event in the board
 * document's outbox) and the default board created at open. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <stdlib.h>
#include <string.h>

struct boards_ctx {
	struct core_board *v;
	size_t n, cap;
};

static enum core_rc collect_board(void *ctx, const bson_t *doc)
{
	struct boards_ctx *b = ctx;
	struct core_board *nv;
	enum core_rc rc;

	if (b->n == b->cap) {
		nv = realloc(b->v, (b->cap ? b->cap * 2 : 4) * sizeof(*nv));
		if (!nv)
			return CORE_ERR_NOMEM;
		b->v = nv;
		b->cap = b->cap ? b->cap * 2 : 4;
	}
	rc = mgo_board_from_bson(doc, &b->v[b->n]);
	if (rc == CORE_OK)
		b->n++;
	return rc == CORE_ERR_BAD_REQUEST ? CORE_OK : rc; /* a foreign, unreadable board */
}

enum core_rc mgo_board_list(struct store *st, struct core_board **boards, size_t *n)
{
	struct boards_ctx b = {0};
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "_id", 1);
	bson_append_document_end(&opts, &sort);
	rc = mgo_find_each(c.boards, &filter, &opts, collect_board, &b);
	mgo_conn_close(&c);
	bson_destroy(&opts);
	bson_destroy(&filter);
	if (rc == CORE_OK && !b.v && !(b.v = calloc(1, sizeof(*b.v))))
		rc = CORE_ERR_NOMEM;
	if (rc != CORE_OK) {
		store_boards_free(b.v, b.n);
		return rc;
	}
	*boards = b.v;
	*n = b.n;
	return CORE_OK;
}

enum core_rc mgo_board_get(struct store *st, const char *name, struct core_board *out)
{
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	rc = mgo_board_read(&c, name, out);
	mgo_conn_close(&c);
	return rc;
}

/* A column the new config drops that still holds a card of the board (one query per
 * dropped column). *busy true when one does. */
static enum core_rc dropped_column_in_use(struct mgo_conn *c, const struct core_board *old,
					  const struct core_board *b, bool *busy)
{
	bson_t filter;
	bson_error_t e;
	int64_t cnt;
	size_t i;

	*busy = false;
	for (i = 0; i < old->n_cols && !*busy; i++) {
		if (core_board_column(b, old->cols[i].name))
			continue;
		bson_init(&filter);
		BSON_APPEND_UTF8(&filter, "board", old->name);
		BSON_APPEND_UTF8(&filter, "state", old->cols[i].name);
		cnt = mongoc_collection_count_documents(c->cards, &filter, NULL, NULL, NULL, &e);
		bson_destroy(&filter);
		if (cnt < 0)
			return mgo_error("count cards", &e);
		*busy = cnt > 0;
	}
	return CORE_OK;
}

/* The optional fields of a board document (mgo_board_to_bson): absent = none. */
static const char *const board_opt[] = {"max_claims", "retry",  "running",
					"completed",  "failed", "waiting"};

enum core_rc mgo_board_write(struct mgo_conn *c, const struct core_board *b,
			     const char *must_have, json_t *payload, bool *hit)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set, unset, push, full, opts;
	size_t i, n_unset;
	struct mgo_evq q;
	bson_error_t e;
	bson_t reply;
	bson_iter_t it;
	int64_t matched = 0;
	enum core_rc rc = CORE_ERR_NOMEM;

	*hit = false;
	mgo_evq_init(&q, c->m);
	if (payload)
		mgo_evq_add(&q, CORE_EV_BOARD_UPDATED, b->name, NULL, c->actor, NULL, c->now,
			    payload);
	bson_init(&full);
	bson_init(&opts);
	if (q.failed || !mgo_board_to_bson(b, &full))
		goto out;
	BSON_APPEND_UTF8(&filter, "_id", b->name);
	if (must_have)
		BSON_APPEND_UTF8(&filter, "cols.name", must_have);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	bson_copy_to_excluding_noinit(&full, &set, "_id", NULL);
	bson_append_document_end(&update, &set);
	/* A put replaces the configuration: an optional field the new one leaves out goes (the
	 * document also holds the board's event ring, so it is no replaceOne). No empty $unset:
	 * MongoDB refuses one. */
	for (i = 0, n_unset = 0; i < sizeof board_opt / sizeof board_opt[0]; i++)
		n_unset += !bson_has_field(&full, board_opt[i]);
	if (n_unset) {
		BSON_APPEND_DOCUMENT_BEGIN(&update, "$unset", &unset);
		for (i = 0; i < sizeof board_opt / sizeof board_opt[0]; i++)
			if (!bson_has_field(&full, board_opt[i]))
				BSON_APPEND_INT32(&unset, board_opt[i], 1);
		bson_append_document_end(&update, &unset);
	}
	if (q.n) {
		BSON_APPEND_DOCUMENT_BEGIN(&update, "$push", &push);
		mgo_evq_push_append(&q, &push);
		bson_append_document_end(&update, &push);
	}
	/* A conditional write never creates: only a plain put upserts. */
	BSON_APPEND_BOOL(&opts, "upsert", must_have == NULL);
	rc = CORE_OK;
	if (!mongoc_collection_update_one(c->boards, &filter, &update, &opts, &reply, &e))
		rc = mgo_error("board put", &e);
	else if (bson_iter_init_find(&it, &reply, "matchedCount") && mgo_iter_i64(&it, &matched))
		*hit = matched > 0 || bson_has_field(&reply, "upsertedId");
	bson_destroy(&reply); /* always initialised by the driver */
	if (rc == CORE_OK && *hit)
		rc = mgo_evq_deliver(c, c->boards, b->name, &q, NULL);
out:
	bson_destroy(&opts);
	bson_destroy(&full);
	bson_destroy(&update);
	bson_destroy(&filter);
	mgo_evq_release(&q);
	return rc;
}

enum core_rc mgo_board_event(struct mgo_conn *c, const char *name, enum core_event_type type,
			     const char *reason, json_t *payload)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, push;
	struct mgo_evq q;
	bson_error_t e;
	enum core_rc rc = CORE_ERR_NOMEM;

	mgo_evq_init(&q, c->m);
	mgo_evq_add(&q, type, name, NULL, c->actor, reason, c->now, payload);
	BSON_APPEND_UTF8(&filter, "_id", name);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$push", &push);
	if (!q.failed && mgo_evq_push_append(&q, &push)) {
		bson_append_document_end(&update, &push);
		rc = CORE_OK;
		if (!mongoc_collection_update_one(c->boards, &filter, &update, NULL, NULL, &e))
			rc = mgo_error("board event", &e);
		if (rc == CORE_OK)
			rc = mgo_evq_deliver(c, c->boards, name, &q, NULL);
	}
	bson_destroy(&update);
	bson_destroy(&filter);
	mgo_evq_release(&q);
	return rc;
}

enum core_rc mgo_board_put(struct store *st, const struct core_board *b,
			   const struct store_actor *actor)
{
	struct core_board old = {0};
	struct mgo_conn c;
	char detail[160];
	bool exists = false, busy = false, hit;
	enum core_rc rc;

	rc = core_board_validate(b, detail, sizeof(detail));
	if (rc != CORE_OK)
		return rc;
	rc = mgo_conn_open(mgo_of(st), &c);
	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	rc = mgo_board_read(&c, b->name, &old);
	if (rc == CORE_OK) {
		exists = true;
		rc = dropped_column_in_use(&c, &old, b, &busy);
	} else if (rc == CORE_ERR_NOT_FOUND) {
		rc = CORE_OK;
	}
	/* Dropping a column would strand its cards in a state the board no longer has. */
	if (rc == CORE_OK && busy)
		rc = CORE_ERR_TRANSITION_REJECTED;
	if (rc == CORE_OK)
		rc = mgo_board_write(&c, b, NULL, json_pack("{sb}", "created", !exists), &hit);
	/* DESIGN §17: claims already live count against a limit set now (mongo_slots_repair.c); a
	 * failure is logged and left to the repair pass, which adopts them too. */
	if (rc == CORE_OK && exists) {
		size_t adopted = 0;

		(void)mgo_slots_adopt(&c, b, &adopted);
	}
	core_board_release(&old);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_board_default(struct mgo *m)
{
	struct core_board b = {0};
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER;
	bson_error_t e;
	int64_t cnt;
	bool hit;
	enum core_rc rc = mgo_conn_open(m, &c);

	if (rc != CORE_OK)
		return rc;
	cnt = mongoc_collection_count_documents(c.boards, &filter, NULL, NULL, NULL, &e);
	if (cnt < 0)
		rc = mgo_error("count boards", &e);
	/* Two replicas opening a new database at once both write the same default: the
	 * upsert makes that one board (and at most one extra board_updated event). */
	if (rc == CORE_OK && cnt == 0 && (rc = core_board_init_default(&b, "default")) == CORE_OK)
		rc = mgo_board_write(&c, &b, NULL, json_pack("{sb}", "created", 1), &hit);
	core_board_release(&b);
	bson_destroy(&filter);
	mgo_conn_close(&c);
	return rc;
}
