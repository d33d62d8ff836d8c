/* Storing a queue of events in the Mongo twin's `events` collection with a monotone seq and
 * their board_seqs (mgo_evq_store; the outbox and its delivery are mongo_outbox.c's): the
 * shared insert, the collision path, the fillers and the counter's catch-up.
 *
 * Seqs come from one counters document ($inc in findAndModify), so on MongoDB they are unique
 * and increase in allocation order; but two writers may insert out of that order, and a writer
 * may die between allocating a seq and inserting. The tail therefore serves only the prefix
 * without holes: a hole is waited for until the event right after it is MGO_GAP_GRACE_MS old
 * (by the server clock), and then sealed (mongo_seal.c: a filler under each free seq of it)
 * and stepped over. A writer stalled past the grace meets the seal as a duplicate key and
 * stores its events under new seqs and board_seqs, after every reader's cursor.
 *
 * The counter is not the arbiter of a seq, the unique index on events.seq is: on FerretDB the
 * counter's findAndModify is not atomic under concurrency (two writers can be handed the same
 * seqs, and the counter can even move back), and a counter restored from an older backup
 * hands out taken seqs on MongoDB too. So a duplicate key on insert is never read as "already
 * delivered": delivery re-reads which of its events `events` holds (by _id) and inserts the
 * rest with new seqs, in the write's order (ordered insert); the seqs it was handed and did
 * not use are filled with fillers the tail steps over, so they hold no reader back; and the
 * counter is raised to the highest stored seq. Only when every event is in `events` are they
 * pulled from the outbox.
 */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_ops.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Copies into *fresh (zeroed here) the events of q that `events` does not hold yet, so no
 * seq is spent on a second delivery of an outbox entry: a spent, never-filled seq is a hole
 * the tail has to wait out. */
enum core_rc mgo_evq_undelivered(struct mgo_conn *c, const struct mgo_evq *q,
				 struct mgo_evq *fresh)
{
	bson_t filter = BSON_INITIALIZER, in, arr, opts = BSON_INITIALIZER, proj;
	mongoc_cursor_t *cur;
	const bson_t *d;
	bson_iter_t it;
	bson_error_t e;
	char ibuf[16];
	const char *ikey;
	bool seen[sizeof(q->ev) / sizeof(q->ev[0])] = {false};
	enum core_rc rc = CORE_OK;
	size_t i;

	memset(fresh, 0, sizeof(*fresh));
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &in);
	BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	for (i = 0; i < q->n; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		BSON_APPEND_UTF8(&arr, ikey, q->eid[i]);
	}
	bson_append_array_end(&in, &arr);
	bson_append_document_end(&filter, &in);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "_id", 1);
	bson_append_document_end(&opts, &proj);
	cur = mongoc_collection_find_with_opts(c->events, &filter, &opts, NULL);
	while (mongoc_cursor_next(cur, &d))
		for (i = 0; i < q->n; i++)
			if (bson_iter_init_find(&it, d, "_id") && BSON_ITER_HOLDS_UTF8(&it) &&
			    strcmp(q->eid[i], bson_iter_utf8(&it, NULL)) == 0)
				seen[i] = true;
	if (mongoc_cursor_error(cur, &e))
		rc = mgo_error("find events", &e);
	mongoc_cursor_destroy(cur);
	for (i = 0; rc == CORE_OK && i < q->n; i++) {
		if (seen[i])
			continue;
		if (!(fresh->ev[fresh->n] = bson_copy(q->ev[i]))) {
			rc = CORE_ERR_NOMEM;
			break;
		}
		memcpy(fresh->eid[fresh->n++], q->eid[i], sizeof(q->eid[i]));
	}
	if (rc != CORE_OK)
		mgo_evq_release(fresh);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc;
}

/* The board an event of an evq names (mgo_evq_add always writes one). */
static const char *ev_board(const bson_t *ev)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, ev, "board") && BSON_ITER_HOLDS_UTF8(&it)
		       ? bson_iter_utf8(&it, NULL)
		       : "";
}

/* Kept and newly taken board_seqs mix after a collision: each board's go to its events in
 * ascending order, so a write's events keep their order in the board's sequence too. */
static void bseq_order(const struct mgo_evq *q, int64_t *bseq)
{
	size_t i, j;
	int64_t t;

	for (i = 0; i < q->n; i++)
		for (j = i + 1; j < q->n; j++)
			if (bseq[j] < bseq[i] &&
			    strcmp(ev_board(q->ev[i]), ev_board(q->ev[j])) == 0) {
				t = bseq[i];
				bseq[i] = bseq[j];
				bseq[j] = t;
			}
}

/* What evq_insert hands the shared insert (mgo_seqs_take_insert) to build its documents. */
struct evq_ins {
	const struct mgo_evq *q;
	const char *fill;
	int64_t *bseq;
	const char *const *boards; /* the boards whose board_seqs are taken now */
	const int64_t *counts;
	size_t nb;
};

/* Called with r's seqs taken (on whichever writer's thread sends the batch, while r's writer
 * waits for it): numbers q's events and appends them to the batch's insert. */
static void evq_docs(struct mgo_seq_req *r, mongoc_bulk_operation_t *bulk, int64_t ts)
{
	struct evq_ins *x = r->ctx;
	const struct mgo_evq *q = x->q;
	int64_t blast[sizeof(q->ev) / sizeof(q->ev[0])];
	int64_t first = r->last - (int64_t)q->n + 1;
	bson_t *doc;
	size_t i, k;

	for (k = 0; k < x->nb; k++)
		blast[k] = r->blast[k] - x->counts[k]; /* the last one before this range */
	for (i = 0; i < q->n; i++) {
		if (x->bseq[i])
			continue;
		for (k = 0; strcmp(x->boards[k], ev_board(q->ev[i])) != 0; k++)
			;
		x->bseq[i] = ++blast[k];
	}
	bseq_order(q, x->bseq);
	for (i = 0; i < q->n; i++) {
		doc = bson_new();
		bson_copy_to_excluding_noinit(q->ev[i], doc, "q_ts", "dlv", "dlv_board", "dlv_card",
					      MGO_DLV_LATE, NULL);
		/* An event pushed before its card was known (claim-next picks the card in the
		 * same findAndModify) names the card whose outbox held it. */
		if (x->fill && !bson_has_field(q->ev[i], "card_id"))
			BSON_APPEND_UTF8(doc, "card_id", x->fill);
		BSON_APPEND_INT64(doc, "seq", first + (int64_t)i);
		BSON_APPEND_INT64(doc, "board_seq", x->bseq[i]);
		BSON_APPEND_DATE_TIME(doc, "ts", ts);
		mongoc_bulk_operation_insert(bulk, doc);
		bson_destroy(doc);
	}
}

/* Inserts q's events, in q's order, with seqs [*first, *first + q->n) from the counter and
 * board_seqs bseq[i] (0: taken here, in the same findAndModify as the seqs, so a board_seq
 * costs no round trip; bseq is filled in). The seqs and the insert are shared with the
 * writers of this process delivering at the same moment (mgo_seqs_take_insert: one
 * findAndModify and one ordered insert for all of them). ALREADY_EXISTS: a duplicate key
 * stopped the insert before all of q's events were in (ordered: nothing after it was
 * tried) — on _id (delivered meanwhile by someone else) or on seq (the counter handed out a
 * seq that is taken), q's own or an earlier writer's in the same insert; which, and what of
 * q is stored, the caller finds out from `events` itself. */
static enum core_rc evq_insert(struct mgo_conn *c, const struct mgo_evq *q, const char *fill,
			       int64_t *bseq, int64_t *first)
{
	const char *boards[sizeof(q->ev) / sizeof(q->ev[0])];
	int64_t counts[sizeof(q->ev) / sizeof(q->ev[0])], blast[sizeof(q->ev) / sizeof(q->ev[0])];
	struct evq_ins x = {.q = q, .fill = fill, .bseq = bseq, .boards = boards, .counts = counts};
	struct mgo_seq_req r = {.n = (int64_t)q->n, .boards = boards, .counts = counts,
				.blast = blast, .docs = evq_docs, .ctx = &x, .ndocs = q->n};
	enum core_rc rc;
	size_t i, k, nb = 0;

	*first = 0;
	for (i = 0; i < q->n; i++) {
		if (bseq[i])
			continue;
		for (k = 0; k < nb && strcmp(boards[k], ev_board(q->ev[i])) != 0; k++)
			;
		if (k == nb) {
			boards[nb] = ev_board(q->ev[i]);
			counts[nb++] = 0;
		}
		counts[k]++;
	}
	r.nb = x.nb = nb;
	rc = mgo_seqs_take_insert(c, &r);
	if (rc != CORE_OK)
		return rc;
	*first = r.last - (int64_t)q->n + 1;
	return r.ins_rc;
}

bson_t *mgo_filler_new(int64_t seq, int64_t ts)
{
	bson_t *doc = bson_new();
	char id[32];

	snprintf(id, sizeof(id), "filler-%" PRId64, seq);
	BSON_APPEND_UTF8(doc, "_id", id);
	BSON_APPEND_INT64(doc, "seq", seq);
	BSON_APPEND_DATE_TIME(doc, "ts", ts);
	BSON_APPEND_BOOL(doc, MGO_FILLER, true);
	return doc;
}

/* Fills each seq of [first, first + n) that is still free with a filler the tail steps over
 * (MGO_FILLER), so a seq handed out and left unused never holds the tail back for the gap
 * grace. A taken seq refuses its filler (duplicate key): that is the point. The filler of
 * slot i also fills board_seq lost[i] of board boards[i] (lost[i] 0: none): the board_seq of
 * an event another deliverer stored first, under a number of its own. */
static void seqs_fill(struct mgo_conn *c, int64_t first, size_t n, const char *const *boards,
		      const int64_t *lost)
{
	mongoc_bulk_operation_t *bulk;
	bson_t opts = BSON_INITIALIZER, reply, *doc;
	bson_error_t e;
	int64_t ts = mgo_clock_now(&c->m->base);
	size_t i;

	BSON_APPEND_BOOL(&opts, "ordered", false);
	bulk = mongoc_collection_create_bulk_operation_with_opts(c->events, &opts);
	for (i = 0; i < n; i++) {
		doc = mgo_filler_new(first + (int64_t)i, ts);
		if (lost[i]) {
			BSON_APPEND_UTF8(doc, "board", boards[i]);
			BSON_APPEND_INT64(doc, "board_seq", lost[i]);
		}
		mongoc_bulk_operation_insert(bulk, doc);
		bson_destroy(doc);
	}
	if (!mongoc_bulk_operation_execute(bulk, &reply, &e) && !mgo_error_is_dup(&e))
		mgo_error("fill events seqs", &e); /* left a hole: the tail waits out its grace */
	mgo_tail_wake(c->m); /* a filled hole lets a waiting tail step over it */
	bson_destroy(&reply);
	mongoc_bulk_operation_destroy(bulk);
	bson_destroy(&opts);
}

/* The seq of the newest (dir -1) or oldest (dir 1) document of `events`; false when there is
 * none or the read failed (logged). */
bool mgo_events_edge(struct mgo_conn *c, int dir, int64_t *seq)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort, proj, *doc = NULL;
	bson_iter_t it;
	bool ok;

	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "seq", dir);
	bson_append_document_end(&opts, &sort);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "seq", 1);
	bson_append_document_end(&opts, &proj);
	ok = mgo_find_one(c->events, &filter, &opts, &doc) == CORE_OK && doc &&
	     bson_iter_init_find(&it, doc, "seq") && mgo_iter_i64(&it, seq);
	bson_destroy(doc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return ok;
}

/* Raises the events counter to the highest seq stored when it is behind it (restored from an
 * older backup; moved back by a non-atomic $inc on FerretDB), so the next allocation does
 * not walk through taken seqs one collision at a time. Never lowers it. */
static void counter_catch_up(struct mgo_conn *c)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, lt, set;
	bson_error_t e;
	int64_t top;

	if (!mgo_events_edge(c, -1, &top))
		return;
	BSON_APPEND_UTF8(&filter, "_id", "events");
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "seq", &lt);
	BSON_APPEND_INT64(&lt, "$lt", top);
	bson_append_document_end(&filter, &lt);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	BSON_APPEND_INT64(&set, "seq", top);
	bson_append_document_end(&update, &set);
	if (!mongoc_collection_update_one(c->counters, &filter, &update, NULL, NULL, &e))
		mgo_error("counter catch-up", &e);
	bson_destroy(&update);
	bson_destroy(&filter);
}

void mgo_backoff(int tries)
{
	struct timespec ts;
	long cap_ms = 1L << (tries < 5 ? tries : 5); /* 1, 2, 4 ... 32 ms */

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec = (ts.tv_nsec / 1000) % (cap_ms * 1000) * 1000; /* µs jitter from the clock */
	ts.tv_sec = 0;
	nanosleep(&ts, NULL);
}

/* After a try that met a duplicate key: fills the seqs it was handed, and the board_seqs
 * bseq[] of its events that another deliverer (the maintenance drain, a stalled writer's
 * twin) stored first under numbers of its own, so neither sequence keeps a hole. A board_seq
 * whose event is not stored yet is kept for the next try, never filled. */
static void seqs_fill_lost(struct mgo_conn *c, const struct mgo_evq *todo, int64_t first,
			   const int64_t *bseq)
{
	bson_t filter = BSON_INITIALIZER, in, arr, opts = BSON_INITIALIZER, proj;
	const char *boards[sizeof(todo->ev) / sizeof(todo->ev[0])];
	int64_t lost[sizeof(todo->ev) / sizeof(todo->ev[0])] = {0}, have;
	mongoc_cursor_t *cur;
	const bson_t *d;
	bson_iter_t it;
	char ibuf[16];
	const char *ikey;
	size_t i;

	BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &in);
	BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	for (i = 0; i < todo->n; i++) {
		boards[i] = ev_board(todo->ev[i]);
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		BSON_APPEND_UTF8(&arr, ikey, todo->eid[i]);
	}
	bson_append_array_end(&in, &arr);
	bson_append_document_end(&filter, &in);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "board_seq", 1);
	bson_append_document_end(&opts, &proj);
	cur = mongoc_collection_find_with_opts(c->events, &filter, &opts, NULL);
	while (mongoc_cursor_next(cur, &d))
		for (i = 0; i < todo->n; i++)
			if (bson_iter_init_find(&it, d, "_id") && BSON_ITER_HOLDS_UTF8(&it) &&
			    strcmp(todo->eid[i], bson_iter_utf8(&it, NULL)) == 0 &&
			    bson_iter_init_find(&it, d, "board_seq") && mgo_iter_i64(&it, &have) &&
			    have != bseq[i])
				lost[i] = bseq[i];
	/* A failed read fills no board_seq: a hole the tail waits out, never a twin. */
	mongoc_cursor_destroy(cur);
	bson_destroy(&opts);
	bson_destroy(&filter);
	seqs_fill(c, first, todo->n, boards, lost);
}

/* Makes every event of q present in `events`: OK only then (the caller may pull them from the
 * outbox). `just_pushed`: q was pushed by this very write, so none of it can be delivered
 * yet (saves a read on the first try). A duplicate key is never taken for "delivered": each
 * try re-reads what `events` holds by _id and inserts the rest with new seqs, so a seq
 * collision costs a try, never an event. Any other failure is returned, and the events stay
 * in the outbox for the drain. */
enum core_rc mgo_evq_store(struct mgo_conn *c, const struct mgo_evq *q, bool just_pushed,
			      const char *fill)
{
	struct mgo_evq rest;
	const struct mgo_evq *todo = q;
	/* Each event's board_seq, kept across tries (by its index in q): a seq collision
	 * re-takes the seq, never a board_seq that is still free, so it leaves no hole. */
	int64_t bseq[sizeof(q->ev) / sizeof(q->ev[0])] = {0};
	int64_t tb[sizeof(q->ev) / sizeof(q->ev[0])];
	size_t qi[sizeof(q->ev) / sizeof(q->ev[0])];
	int64_t first = 0;
	enum core_rc rc;
	size_t i, j;
	int tries;

	if (q->failed)
		return CORE_ERR_NOMEM;
	if (!q->n)
		return CORE_OK;
	for (tries = 0; tries < MGO_SEQ_TRIES; tries++) {
		memset(&rest, 0, sizeof(rest));
		if (tries > 0 || !just_pushed) {
			rc = mgo_evq_undelivered(c, q, &rest);
			if (rc != CORE_OK)
				return rc;
			todo = &rest;
		}
		for (j = 0; j < todo->n; j++) {
			for (i = 0; todo != q && strcmp(q->eid[i], todo->eid[j]) != 0; i++)
				;
			qi[j] = todo == q ? j : i;
			tb[j] = bseq[qi[j]];
			/* After a collision: a board_seq another event holds is taken anew. */
			if (tb[j] && tries > 0 &&
			    mgo_bseq_taken(c, ev_board(todo->ev[j]), tb[j], todo->eid[j])) {
				mgo_bseq_catch_up(c, ev_board(todo->ev[j]));
				tb[j] = 0;
			}
		}
		rc = todo->n ? evq_insert(c, todo, fill, tb, &first) : CORE_OK;
		for (j = 0; j < todo->n; j++)
			bseq[qi[j]] = tb[j];
		if (rc == CORE_ERR_ALREADY_EXISTS) {
			if (first > 0) /* 0: the counter's own upsert raced, nothing handed out */
				seqs_fill_lost(c, todo, first, tb);
			/* A reader sealed a seq of ours: it stepped over the hole, and a board's
			 * tail may have stepped over our board_seqs too (mongo_seal.c). New ones,
			 * after every reader's cursor; the old stay holes. */
			if (first > 0 && mgo_seqs_sealed(c, first, todo->n))
				for (j = 0; j < todo->n; j++)
					bseq[qi[j]] = 0;
			counter_catch_up(c);
		}
		mgo_evq_release(&rest);
		if (rc != CORE_ERR_ALREADY_EXISTS)
			return rc;
		if (tries + 1 < MGO_SEQ_TRIES)
			mgo_backoff(tries);
	}
	fprintf(stderr, "boardd: mongo: events: seqs still taken after %d tries; left in the "
			"outbox for the drain\n", MGO_SEQ_TRIES);
	return CORE_ERR_STORE_UNAVAILABLE;
}
