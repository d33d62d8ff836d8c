/* Run history on the Mongo twin (DESIGN §20): the runs listing (one indexed query, newest
 * first) and the retention that keeps CORE_RUN_HISTORY_MAX runs per card whole, run right
 * after a run's insert: each older run it may retire (core_run_retirable) becomes a tombstone
 * by one conditional update guarded on the status it was read with. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_ops.h"

#include <stdlib.h>
#include <string.h>

struct run_page {
	struct core_run **v;
	size_t n, cap;
};

static enum core_rc collect_run(void *ctx, const bson_t *doc)
{
	struct run_page *p = ctx;
	struct core_run *r = NULL;
	enum core_rc rc = mgo_run_from_bson(doc, &r);

	if (rc == CORE_ERR_BAD_REQUEST)
		return CORE_ERR_INTERNAL;
	if (rc != CORE_OK)
		return rc;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		struct core_run **g = realloc(p->v, cap * sizeof(*g));

		if (!g) {
			core_run_free(r);
			return CORE_ERR_NOMEM;
		}
		p->v = g;
		p->cap = cap;
	}
	p->v[p->n++] = r;
	return CORE_OK;
}

/* {sort: created_at -1, _id -1, projection: no output, no outbox[, limit]}. */
static bool list_opts(bson_t *opts, int64_t limit, bool without_result)
{
	bson_t sort, proj;

	return BSON_APPEND_DOCUMENT_BEGIN(opts, "sort", &sort) &&
	       BSON_APPEND_INT32(&sort, "created_at", -1) && BSON_APPEND_INT32(&sort, "_id", -1) &&
	       bson_append_document_end(opts, &sort) &&
	       BSON_APPEND_DOCUMENT_BEGIN(opts, "projection", &proj) &&
	       BSON_APPEND_INT32(&proj, "output", 0) && BSON_APPEND_INT32(&proj, "outbox", 0) &&
	       (!without_result || (BSON_APPEND_INT32(&proj, "result_json", 0) &&
				    BSON_APPEND_INT32(&proj, "error", 0))) &&
	       bson_append_document_end(opts, &proj) &&
	       (limit <= 0 || BSON_APPEND_INT64(opts, "limit", limit));
}

static bool not_pruned(bson_t *filter)
{
	bson_t ne;

	return BSON_APPEND_DOCUMENT_BEGIN(filter, "pruned", &ne) &&
	       BSON_APPEND_BOOL(&ne, "$ne", true) && bson_append_document_end(filter, &ne);
}

/* {created_at: {$gte: at}}: a card's runs, not an earlier card's of its id. */
static bool since(bson_t *f, int64_t at)
{
	bson_t gte;

	return BSON_APPEND_DOCUMENT_BEGIN(f, "created_at", &gte) &&
	       BSON_APPEND_DATE_TIME(&gte, "$gte", at) && bson_append_document_end(f, &gte);
}

/* $or: [{created_at < at}, {created_at == at, _id < id}]: after the cursor, newest first. */
static bool after_cursor(bson_t *filter, int64_t at, const char *id)
{
	bson_t arr, a, b, lt, lt2;

	return BSON_APPEND_ARRAY_BEGIN(filter, "$or", &arr) &&
	       BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &a) &&
	       BSON_APPEND_DOCUMENT_BEGIN(&a, "created_at", &lt) &&
	       BSON_APPEND_DATE_TIME(&lt, "$lt", at) && bson_append_document_end(&a, &lt) &&
	       bson_append_document_end(&arr, &a) && BSON_APPEND_DOCUMENT_BEGIN(&arr, "1", &b) &&
	       BSON_APPEND_DATE_TIME(&b, "created_at", at) &&
	       BSON_APPEND_DOCUMENT_BEGIN(&b, "_id", &lt2) && BSON_APPEND_UTF8(&lt2, "$lt", id) &&
	       bson_append_document_end(&b, &lt2) && bson_append_document_end(&arr, &b) &&
	       bson_append_array_end(filter, &arr);
}

enum core_rc mgo_run_list(struct store *st, const struct store_run_filter *f,
			  struct core_run ***out, size_t *n, char **next)
{
	struct run_page p = {0};
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER;
	const char *aid = NULL;
	int64_t at = 0;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	rc = CORE_ERR_NOMEM;
	if ((f->card_id && !BSON_APPEND_UTF8(&filter, "card_id", f->card_id)) ||
	    (f->card_id && !since(&filter, f->card_since)) ||
	    !mgo_board_filter_append(&filter, f->board, f->boards) ||
	    (f->status && !BSON_APPEND_UTF8(&filter, "status", f->status)) ||
	    !not_pruned(&filter) ||
	    (f->after && core_run_cursor_parse(f->after, &at, &aid) &&
	     !after_cursor(&filter, at, aid)) ||
	    !list_opts(&opts, (int64_t)f->limit + 1, false))
		goto out;
	rc = mgo_find_each(c.runs, &filter, &opts, collect_run, &p);
	if (rc == CORE_OK && !p.v && !(p.v = calloc(1, sizeof(*p.v))))
		rc = CORE_ERR_NOMEM;
	if (rc == CORE_OK)
		rc = store_runs_finish(p.v, &p.n, f->limit, next);
out:
	bson_destroy(&opts);
	bson_destroy(&filter);
	mgo_conn_close(&c);
	if (rc != CORE_OK) {
		store_runs_free(p.v, p.n);
		return rc;
	}
	*out = p.v;
	*n = p.n;
	return CORE_OK;
}

/* Tombstones run r (read as it is listed) unless it moved meanwhile: pruned, result, error
 * and output cleared, guarded on its id, its status and not already pruned. */
static enum core_rc retire_one(struct mgo_conn *c, const struct core_run *r)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set;
	bson_error_t e;
	enum core_rc rc = CORE_ERR_NOMEM;

	if (BSON_APPEND_UTF8(&filter, "_id", r->id) && not_pruned(&filter) &&
	    BSON_APPEND_UTF8(&filter, "status", r->status) &&
	    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set) &&
	    BSON_APPEND_BOOL(&set, "pruned", true) && BSON_APPEND_NULL(&set, "result_json") &&
	    BSON_APPEND_NULL(&set, "error") && BSON_APPEND_NULL(&set, "output") &&
	    BSON_APPEND_DATE_TIME(&set, "updated_at", c->now) &&
	    bson_append_document_end(&update, &set)) {
		rc = CORE_OK;
		if (!mongoc_collection_update_one(c->runs, &filter, &update, NULL, NULL, &e))
			rc = mgo_error("retire run", &e);
	}
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

enum core_rc mgo_runs_retain(struct mgo_conn *c, const struct core_card *card)
{
	struct run_page p = {0};
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER;
	size_t i;
	enum core_rc rc = CORE_ERR_NOMEM;

	/* Past the newest CORE_RUN_HISTORY_MAX live runs (the card_created index). */
	/* This card's: not those of an earlier card of its id (deleted, created again, maybe on
	 * another board), which are not its history to trim. */
	if (BSON_APPEND_UTF8(&filter, "card_id", card->id) &&
	    BSON_APPEND_UTF8(&filter, "board", card->board) && since(&filter, card->created_at) &&
	    not_pruned(&filter) &&
	    list_opts(&opts, 0, true) && BSON_APPEND_INT64(&opts, "skip", CORE_RUN_HISTORY_MAX))
		rc = mgo_find_each(c->runs, &filter, &opts, collect_run, &p);
	for (i = 0; rc == CORE_OK && i < p.n; i++)
		if (core_run_retirable(p.v[i], card))
			rc = retire_one(c, p.v[i]);
	store_runs_free(p.v, p.n);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc;
}
