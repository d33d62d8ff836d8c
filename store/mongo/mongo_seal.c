/* Sealing the holes of the Mongo twin's audit tail before a reader steps over them.
 *
 * A hole is a seq (or a board's board_seq) a writer took and has not inserted an event under.
 * The tail waits for it until the event after it is MGO_GAP_GRACE_MS old (mongo_tail.c). A
 * writer can outlast that without being dead (a paused process, a slow network): its insert
 * would then land behind readers that already stepped on, and a stream or long-poll past it
 * would never deliver an acknowledged event. So a reader seals a hole before stepping over
 * it: it inserts a filler (MGO_SEALED) under every free seq of it, and the unique index on
 * `events.seq` then refuses the late writer, whose collision path (mongo_insert.c) stores its
 * events under new seqs, after every reader's cursor. A writer that meets a sealed seq takes
 * new board_seqs too: a board's tail may have stepped over the ones it held (board_seq has no
 * unique index; the board's tail seals the seqs around its hole instead, below).
 *
 * What is not sealed: seqs at or below the trim mark (counters {_id: MGO_TRIMMED_ID}; the
 * retention raises it before it deletes), which are gone, not late. What a board's tail
 * cannot seal: a writer that met a taken seq (a counter restored from an older backup, or
 * FerretDB's non-atomic $inc) keeps its board_seqs under new seqs, which may lie past the
 * range sealed; stalled past the grace on top of that, it can still land behind a board's
 * reader. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mgo_trim_mark(struct mgo_conn *c, int64_t upto)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, opts = BSON_INITIALIZER, max;
	bson_error_t e;
	bool ok;

	BSON_APPEND_UTF8(&filter, "_id", MGO_TRIMMED_ID);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$max", &max);
	BSON_APPEND_INT64(&max, "seq", upto);
	bson_append_document_end(&update, &max);
	BSON_APPEND_BOOL(&opts, "upsert", true);
	ok = mongoc_collection_update_one(c->counters, &filter, &update, &opts, NULL, &e);
	if (!ok)
		mgo_error("events trim mark", &e);
	bson_destroy(&opts);
	bson_destroy(&update);
	bson_destroy(&filter);
	return ok;
}

/* The trim mark into *trimmed (0: none yet). */
static enum core_rc trim_mark_read(struct mgo_conn *c, int64_t *trimmed)
{
	bson_t *doc = NULL;
	bson_iter_t it;
	enum core_rc rc = mgo_find_by_id(c->counters, MGO_TRIMMED_ID, &doc);

	*trimmed = 0;
	if (rc == CORE_OK && doc && bson_iter_init_find(&it, doc, "seq"))
		mgo_iter_i64(&it, trimmed);
	bson_destroy(doc);
	return rc;
}

/* Inserts a sealing filler under each of seqs[0..n): a seq taken meanwhile refuses its own
 * (duplicate key), which is what a seal wants. */
static enum core_rc seal_insert(struct mgo_conn *c, const int64_t *seqs, size_t n)
{
	mongoc_bulk_operation_t *bulk;
	bson_t opts = BSON_INITIALIZER, reply, *doc;
	bson_iter_t it;
	bson_error_t e;
	int64_t ts = mgo_clock_now(&c->m->base), sealed;
	enum core_rc rc = CORE_OK;
	size_t i;

	if (!n)
		return CORE_OK;
	BSON_APPEND_BOOL(&opts, "ordered", false);
	bulk = mongoc_collection_create_bulk_operation_with_opts(c->events, &opts);
	for (i = 0; i < n; i++) {
		doc = mgo_filler_new(seqs[i], ts);
		BSON_APPEND_BOOL(doc, MGO_SEALED, true);
		mongoc_bulk_operation_insert(bulk, doc);
		bson_destroy(doc);
	}
	if (!mongoc_bulk_operation_execute(bulk, &reply, &e) && !mgo_error_is_dup(&e))
		rc = mgo_error("seal events seqs", &e);
	else if (bson_iter_init_find(&it, &reply, "nInserted") && mgo_iter_i64(&it, &sealed) &&
		 sealed > 0)
		fprintf(stderr, "boardd: mongo: events: %" PRId64 " seq(s) from %" PRId64 " to %"
				PRId64 " sealed: taken and not filled within the grace (a stalled "
				"or dead writer)\n", sealed, seqs[0], seqs[n - 1]);
	bson_destroy(&reply);
	mongoc_bulk_operation_destroy(bulk);
	bson_destroy(&opts);
	return rc;
}

enum core_rc mgo_seal_seqs(struct mgo *m, int64_t *trimmed, int64_t lo, int64_t hi)
{
	struct mgo_conn c;
	int64_t *seqs;
	size_t n = 0;
	enum core_rc rc = mgo_conn_open_bare(m, &c);

	if (rc != CORE_OK)
		return rc;
	if (*trimmed < 0) {
		rc = trim_mark_read(&c, trimmed);
		mgo_conn_close(&c);
		return rc;
	}
	if (hi - lo >= MGO_SEAL_MAX)
		hi = lo + MGO_SEAL_MAX - 1;
	seqs = malloc(sizeof(*seqs) * (size_t)(hi - lo + 1));
	if (!seqs) {
		mgo_conn_close(&c);
		return CORE_ERR_NOMEM;
	}
	for (; lo <= hi; lo++)
		seqs[n++] = lo;
	rc = seal_insert(&c, seqs, n);
	free(seqs);
	mgo_conn_close(&c);
	return rc;
}

/* The seq of board's event with the highest board_seq up to bseq; -1 when there is none. */
static enum core_rc board_seq_before(struct mgo_conn *c, const char *board, int64_t bseq,
				     int64_t *seq)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, lt, sort, *doc = NULL;
	bson_iter_t it;
	enum core_rc rc;

	*seq = -1;
	BSON_APPEND_UTF8(&filter, "board", board);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "board_seq", &lt);
	BSON_APPEND_INT64(&lt, "$lte", bseq);
	bson_append_document_end(&filter, &lt);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "board", -1);
	BSON_APPEND_INT32(&sort, "board_seq", -1);
	bson_append_document_end(&opts, &sort);
	rc = mgo_find_one(c->events, &filter, &opts, &doc);
	if (rc == CORE_OK && doc && bson_iter_init_find(&it, doc, "seq") &&
	    !mgo_iter_i64(&it, seq))
		*seq = -1;
	bson_destroy(doc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc;
}

/* A board's tail has no unique index to seal a board_seq with; but a writer takes its seq and
 * its board_seq in one $inc, so the event of a missing board_seq holds a seq between those of
 * the board's events around the hole: the free seqs there are sealed. */
enum core_rc mgo_seal_board(struct mgo *m, const char *board, int64_t *trimmed, int64_t bseq,
			    int64_t lo, int64_t hi)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, range, sort, proj;
	struct mgo_conn c;
	mongoc_cursor_t *cur;
	const bson_t *d;
	bson_iter_t it;
	bson_error_t e;
	int64_t *seqs = NULL, have, want;
	size_t n = 0;
	enum core_rc rc = mgo_conn_open_bare(m, &c);

	if (rc != CORE_OK)
		return rc;
	if (*trimmed < 0 && (rc = trim_mark_read(&c, trimmed)) != CORE_OK)
		goto out;
	if (lo < 0 && (rc = board_seq_before(&c, board, bseq, &lo)) != CORE_OK)
		goto out;
	if (lo < *trimmed)
		lo = *trimmed;
	if (hi - lo > MGO_SEAL_SCAN_MAX) /* a writer stalled that long is not waited for */
		lo = hi - MGO_SEAL_SCAN_MAX;
	if (!(seqs = malloc(sizeof(*seqs) * MGO_SEAL_MAX))) {
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "seq", &range);
	BSON_APPEND_INT64(&range, "$gt", lo);
	BSON_APPEND_INT64(&range, "$lt", hi);
	bson_append_document_end(&filter, &range);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "seq", 1);
	bson_append_document_end(&opts, &sort);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "seq", 1);
	bson_append_document_end(&opts, &proj);
	cur = mongoc_collection_find_with_opts(c.events, &filter, &opts, NULL);
	want = lo + 1;
	while (n < MGO_SEAL_MAX && mongoc_cursor_next(cur, &d)) {
		if (!bson_iter_init_find(&it, d, "seq") || !mgo_iter_i64(&it, &have))
			continue;
		for (; want < have && n < MGO_SEAL_MAX; want++)
			seqs[n++] = want;
		if (have >= want)
			want = have + 1;
	}
	if (mongoc_cursor_error(cur, &e))
		rc = mgo_error("find events seqs", &e);
	mongoc_cursor_destroy(cur);
	for (; rc == CORE_OK && want < hi && n < MGO_SEAL_MAX; want++)
		seqs[n++] = want;
	if (rc == CORE_OK)
		rc = seal_insert(&c, seqs, n);
out:
	free(seqs);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mgo_conn_close(&c);
	return rc;
}

bool mgo_seqs_sealed(struct mgo_conn *c, int64_t first, size_t n)
{
	bson_t filter = BSON_INITIALIZER, range, *doc = NULL;
	bool sealed;

	BSON_APPEND_DOCUMENT_BEGIN(&filter, "seq", &range);
	BSON_APPEND_INT64(&range, "$gte", first);
	BSON_APPEND_INT64(&range, "$lt", first + (int64_t)n);
	bson_append_document_end(&filter, &range);
	BSON_APPEND_BOOL(&filter, MGO_SEALED, true);
	/* A failed read counts as sealed: new board_seqs cost a counted hole, never an event. */
	sealed = mgo_find_one(c->events, &filter, NULL, &doc) != CORE_OK || doc;
	bson_destroy(doc);
	bson_destroy(&filter);
	return sealed;
}
