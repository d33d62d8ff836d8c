/* Events on the Mongo twin (DESIGN §7): the outbox a mutation writes its events into, their
 * delivery to the `events` collection with a monotone seq, the maintenance drain, the
 * retention, and the audit tail with its long-poll.
 *
 * Seqs come from one counters document ($inc in findAndModify), so on MongoDB they are unique
 * and increase in allocation order; but two writers may insert out of that order, and a writer
 * may die between allocating a seq and inserting. The tail therefore serves only the prefix
 * without holes: a hole is waited for until the event right after it is MGO_GAP_GRACE_MS old
 * (by the server clock), and then skipped as a seq that will never be filled. A reader that
 * skipped a hole never sees an event that fills it later; that takes a writer stalled for
 * longer than the grace between two back-to-back round trips.
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

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mgo_evq_init(struct mgo_evq *q, struct mgo *m)
{
	memset(q, 0, sizeof(*q));
	q->q_ts = mgo_clock_now(&m->base);
}

void mgo_evq_release(struct mgo_evq *q)
{
	size_t i;

	for (i = 0; i < q->n; i++)
		bson_destroy(q->ev[i]);
	memset(q, 0, sizeof(*q));
}

void mgo_evq_add(struct mgo_evq *q, enum core_event_type type, const char *board,
		 const char *card_id, struct mgo_actor actor, const char *reason, int64_t now,
		 json_t *payload)
{
	bool machine = core_is_machine_reason(reason);
	bson_oid_t oid;
	bson_t *d;
	bool ok;

	if (!payload)
		payload = json_object();
	if (q->failed || q->n == sizeof(q->ev) / sizeof(q->ev[0]) || !payload ||
	    !(d = bson_new())) {
		q->failed = true;
		json_decref(payload);
		return;
	}
	bson_oid_init(&oid, NULL);
	bson_oid_to_string(&oid, q->eid[q->n]);
	ok = BSON_APPEND_UTF8(d, "_id", q->eid[q->n]) && BSON_APPEND_DATE_TIME(d, "at", now) &&
	     BSON_APPEND_DATE_TIME(d, "q_ts", q->q_ts) &&
	     BSON_APPEND_UTF8(d, "board", board) && BSON_APPEND_UTF8(d, "type", core_event_type_name(type));
	if (ok && card_id)
		ok = BSON_APPEND_UTF8(d, "card_id", card_id);
	/* A machine event still flows, with the actor blanked (DESIGN §7). */
	ok = ok && BSON_APPEND_UTF8(d, "actor", machine || !actor.name ? "" : actor.name);
	/* an agent token's events name the claim it acted under (DESIGN §13) */
	if (ok && actor.epoch && !machine && json_is_object(payload))
		ok = json_object_set_new(payload, "actor_epoch", json_integer(actor.epoch)) == 0;
	if (ok && reason)
		ok = BSON_APPEND_UTF8(d, "reason", reason);
	ok = ok && BSON_APPEND_BOOL(d, "machine", machine) &&
	     mgo_json_append(d, "payload", payload);
	json_decref(payload);
	if (!ok) {
		bson_destroy(d);
		q->failed = true;
		return;
	}
	q->ev[q->n++] = d;
}

bool mgo_evq_push_append(const struct mgo_evq *q, bson_t *push)
{
	bson_t each, arr;
	char ibuf[16];
	const char *ikey;
	size_t i;
	bool ok = BSON_APPEND_DOCUMENT_BEGIN(push, "outbox", &each) &&
		  BSON_APPEND_ARRAY_BEGIN(&each, "$each", &arr);

	for (i = 0; ok && i < q->n; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		ok = BSON_APPEND_DOCUMENT(&arr, ikey, q->ev[i]);
	}
	return ok && bson_append_array_end(&each, &arr) && bson_append_document_end(push, &each);
}

/* Copies into *fresh (zeroed here) the events of q that `events` does not hold yet, so no
 * seq is spent on a second delivery of an outbox entry: a spent, never-filled seq is a hole
 * the tail has to wait out. */
static enum core_rc evq_undelivered(struct mgo_conn *c, const struct mgo_evq *q,
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
					      NULL);
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
	char id[32];
	int64_t ts = mgo_clock_now(&c->m->base);
	size_t i;

	BSON_APPEND_BOOL(&opts, "ordered", false);
	bulk = mongoc_collection_create_bulk_operation_with_opts(c->events, &opts);
	for (i = 0; i < n; i++) {
		doc = bson_new();
		snprintf(id, sizeof(id), "filler-%" PRId64, first + (int64_t)i);
		BSON_APPEND_UTF8(doc, "_id", id);
		BSON_APPEND_INT64(doc, "seq", first + (int64_t)i);
		if (lost[i]) {
			BSON_APPEND_UTF8(doc, "board", boards[i]);
			BSON_APPEND_INT64(doc, "board_seq", lost[i]);
		}
		BSON_APPEND_DATE_TIME(doc, "ts", ts);
		BSON_APPEND_BOOL(doc, MGO_FILLER, true);
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
static bool events_edge(struct mgo_conn *c, int dir, int64_t *seq)
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

	if (!events_edge(c, -1, &top))
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

/* Writers that collided on a seq all read the counter at the same moment: a jittered,
 * growing nap spreads their next tries, so they do not collide again in lockstep (FerretDB,
 * many reaper workers). */
static void collision_backoff(int tries)
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
static enum core_rc evq_store(struct mgo_conn *c, const struct mgo_evq *q, bool just_pushed,
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
			rc = evq_undelivered(c, q, &rest);
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
			counter_catch_up(c);
		}
		mgo_evq_release(&rest);
		if (rc != CORE_ERR_ALREADY_EXISTS)
			return rc;
		if (tries + 1 < MGO_SEQ_TRIES)
			collision_backoff(tries);
	}
	fprintf(stderr, "boardd: mongo: events: seqs still taken after %d tries; left in the "
			"outbox for the drain\n", MGO_SEQ_TRIES);
	return CORE_ERR_STORE_UNAVAILABLE;
}

/* The update that pulls the entries of array document `arr` out of a document's outbox:
 * $pullAll of the exact elements pushed (FerretDB 1.24's $pull takes no conditions; an
 * exact value matches on both servers). */
static void pull_update(bson_t *update, const bson_t *arr)
{
	bson_t pull;

	BSON_APPEND_DOCUMENT_BEGIN(update, "$pullAll", &pull);
	BSON_APPEND_ARRAY(&pull, "outbox", arr);
	bson_append_document_end(update, &pull);
}

/* q's entries as an array document (for $pullAll). */
static void pull_array(bson_t *arr, const struct mgo_evq *q)
{
	char ibuf[16];
	const char *ikey;
	size_t i;

	for (i = 0; i < q->n; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		BSON_APPEND_DOCUMENT(arr, ikey, q->ev[i]);
	}
}

/* Pulls q's events out of doc_id's outbox, now. */
static void evq_pull(struct mgo *m, mongoc_collection_t *coll, const char *doc_id,
		     const struct mgo_evq *q)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, arr = BSON_INITIALIZER;
	bson_error_t e;

	if (m->test_read)
		m->test_read(m->test_ctx, "pull");
	BSON_APPEND_UTF8(&filter, "_id", doc_id);
	pull_array(&arr, q);
	pull_update(&update, &arr);
	/* A failed pull only means a later drain finds them delivered and pulls again. */
	if (!mongoc_collection_update_one(coll, &filter, &update, NULL, NULL, &e))
		mgo_error("outbox pull", &e);
	bson_destroy(&arr);
	bson_destroy(&update);
	bson_destroy(&filter);
}

/* ---- the deferred pull ----
 *
 * Why a pull may wait: it removes only entries that are in `events` already (evq_store said
 * so), by exact value, so it changes nothing any reader or writer decides on. An entry left
 * in an outbox a while longer is one a delete, the drain (after MGO_OUTBOX_GRACE_MS) or the
 * puller delivers again as "stored already" — each re-reads `events` by _id first and only
 * pulls (evq_undelivered), never a second event or a second seq. A process that dies with
 * pulls queued leaves entries for the drain, exactly as a writer that died before its pull
 * always did. So the writer hands the pull to the puller and answers one round trip sooner;
 * the puller pulls every MGO_PULL_WINDOW_MS what all writers queued, one round trip per
 * collection. The pull then runs beside the next write of the same document: on a server
 * whose single-document updates are atomic (MongoDB, mongo-java-server) each applies to
 * what the other left; on FerretDB (racy_updates) one could overwrite the other, so there
 * the writer's pull is done before it answers (evq_pull_shared, below). */

static void pull_free(struct mgo_pull *p)
{
	free(p->doc_id);
	bson_destroy(p->arr);
}

/* Hands q's pull from doc_id's outbox in coll to the puller; false: not taken (no puller,
 * closing, queue full, no memory): the caller pulls. */
static bool pull_defer(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
		       const struct mgo_evq *q)
{
	struct mgo *m = c->m;
	struct mgo_pull p = {0}, *grown;
	bool taken = false;

	if (!m->pull_started || m->racy_updates)
		return false;
	if (coll == c->cards)
		p.coll = MGO_PULL_CARDS;
	else if (coll == c->runs)
		p.coll = MGO_PULL_RUNS;
	else if (coll == c->boards)
		p.coll = MGO_PULL_BOARDS;
	else
		return false;
	if (!(p.doc_id = strdup(doc_id)) || !(p.arr = bson_new())) {
		pull_free(&p);
		return false;
	}
	pull_array(p.arr, q);
	pthread_mutex_lock(&m->pull_mu);
	if (!m->pull_stopping && m->n_pulls < MGO_PULL_QUEUE_MAX) {
		if (m->n_pulls == m->cap_pulls) {
			size_t cap = m->cap_pulls ? m->cap_pulls * 2 : 64;

			if ((grown = realloc(m->pulls, cap * sizeof(*grown)))) {
				m->pulls = grown;
				m->cap_pulls = cap;
			}
		}
		if (m->n_pulls < m->cap_pulls) {
			m->pulls[m->n_pulls++] = p;
			taken = true;
			if (m->n_pulls == 1)
				pthread_cond_signal(&m->pull_cv);
		}
	}
	pthread_mutex_unlock(&m->pull_mu);
	if (!taken)
		pull_free(&p);
	return taken;
}

/* One pull into the collection's unordered bulk (made at the first); *in counts those in. */
static void pull_bulk_add(mongoc_bulk_operation_t **bulk, mongoc_collection_t *coll,
			  const bson_t *opts, const char *doc_id, const bson_t *arr, size_t *in)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER;
	bson_error_t e;

	if (!*bulk)
		*bulk = mongoc_collection_create_bulk_operation_with_opts(coll, opts);
	BSON_APPEND_UTF8(&filter, "_id", doc_id);
	pull_update(&update, arr);
	if (mongoc_bulk_operation_update_one_with_opts(*bulk, &filter, &update, NULL, &e))
		(*in)++;
	else
		mgo_error("outbox pull", &e);
	bson_destroy(&update);
	bson_destroy(&filter);
}

/* Sends a bulk of pull_bulk_add's (when any got in) and frees it. A failed bulk leaves its
 * entries for the drain. */
static void pull_bulk_send(struct mgo *m, mongoc_bulk_operation_t *bulk, size_t in)
{
	bson_t reply;
	bson_error_t e;

	if (in && m->test_read)
		m->test_read(m->test_ctx, "pull");
	if (in && !mongoc_bulk_operation_execute(bulk, &reply, &e))
		mgo_error("outbox pull", &e);
	if (in)
		bson_destroy(&reply);
	if (bulk)
		mongoc_bulk_operation_destroy(bulk);
}

/* Runs the n pulls of ps: one unordered bulk of updateOne per collection. A failure is
 * logged: those entries stay for the drain, which finds them stored and pulls them. */
static void pulls_run(struct mgo *m, struct mgo_pull *ps, size_t n)
{
	struct mgo_conn c;
	mongoc_collection_t *colls[MGO_PULL_COLLS_];
	bson_t opts = BSON_INITIALIZER;
	size_t i, k, in;

	if (mgo_conn_open_bare(m, &c) != CORE_OK)
		return; /* no memory, or the breaker is open: the drain pulls them */
	colls[MGO_PULL_CARDS] = c.cards;
	colls[MGO_PULL_RUNS] = c.runs;
	colls[MGO_PULL_BOARDS] = c.boards;
	BSON_APPEND_BOOL(&opts, "ordered", false);
	for (k = 0; k < MGO_PULL_COLLS_; k++) {
		mongoc_bulk_operation_t *bulk = NULL;

		for (i = 0, in = 0; i < n; i++)
			if (ps[i].coll == k)
				pull_bulk_add(&bulk, colls[k], &opts, ps[i].doc_id, ps[i].arr, &in);
		pull_bulk_send(m, bulk, in);
	}
	bson_destroy(&opts);
	mgo_conn_close(&c);
}

static void *puller_main(void *arg)
{
	struct mgo *m = arg;
	struct mgo_pull *ps;
	struct timespec until;
	size_t n, i;

	pthread_mutex_lock(&m->pull_mu);
	for (;;) {
		while (!m->pull_stopping && !m->n_pulls)
			pthread_cond_wait(&m->pull_cv, &m->pull_mu);
		if (!m->n_pulls)
			break; /* stopping, nothing left */
		/* The window: what the other writers queue meanwhile rides in the same bulk. */
		clock_gettime(CLOCK_MONOTONIC, &until);
		core_timespec_add_ns(&until, (int64_t)MGO_PULL_WINDOW_MS * 1000000);
		while (!m->pull_stopping &&
		       pthread_cond_timedwait(&m->pull_cv, &m->pull_mu, &until) == 0)
			;
		ps = m->pulls;
		n = m->n_pulls;
		m->pulls = NULL;
		m->n_pulls = m->cap_pulls = 0;
		pthread_mutex_unlock(&m->pull_mu);
		pulls_run(m, ps, n);
		for (i = 0; i < n; i++)
			pull_free(&ps[i]);
		free(ps);
		pthread_mutex_lock(&m->pull_mu);
	}
	pthread_mutex_unlock(&m->pull_mu);
	return NULL;
}

bool mgo_puller_start(struct mgo *m)
{
	pthread_condattr_t ca;
	bool ok;

	if (pthread_condattr_init(&ca) != 0)
		return false;
	ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
	     pthread_mutex_init(&m->pull_mu, NULL) == 0;
	if (ok && pthread_cond_init(&m->pull_cv, &ca) != 0) {
		pthread_mutex_destroy(&m->pull_mu);
		ok = false;
	}
	pthread_condattr_destroy(&ca);
	if (!ok)
		return false;
	if (pthread_create(&m->pull_thread, NULL, puller_main, m) != 0) {
		pthread_cond_destroy(&m->pull_cv);
		pthread_mutex_destroy(&m->pull_mu);
		return false;
	}
	m->pull_started = true;
	return true;
}

void mgo_puller_stop(struct mgo *m)
{
	if (!m->pull_started)
		return;
	pthread_mutex_lock(&m->pull_mu);
	m->pull_stopping = true;
	pthread_cond_signal(&m->pull_cv);
	pthread_mutex_unlock(&m->pull_mu);
	pthread_join(m->pull_thread, NULL); /* it pulls what is queued first */
	m->pull_started = false;
	free(m->pulls);
	m->pulls = NULL;
	pthread_cond_destroy(&m->pull_cv);
	pthread_mutex_destroy(&m->pull_mu);
}

/* ---- the writers' own pulls, shared ----
 *
 * Where a pull cannot wait for the puller (racy_updates: it could undo the card's next
 * write), each writer still pulls its own before it answers; but the writers pulling at the
 * same moment send their pulls in one unordered bulk of updateOne, as they share the seqs
 * and the insert (mgo_seqs_take_insert): one bulk under way at a time, whoever comes while
 * it is takes everything queued in the next one. Each writer answers only once the bulk
 * that carried its pull came back, so no pull is ever left to run beside the card's next
 * request: the same window as a pull of its own. The bulk's updates are each a single
 * document's, applied one after the other by the server: two writers of one document in the
 * same bulk are two pulls in a row. A failed bulk leaves those entries for the drain, as a
 * writer's failed pull did. */

static void pulls_send_group(struct mgo_conn *c, struct mgo_pull_req *batch)
{
	struct mgo *m = c->m;
	mongoc_collection_t *colls[MGO_PULL_COLLS_];
	bson_t opts = BSON_INITIALIZER;
	struct mgo_pull_req *r;
	size_t k, in;

	colls[MGO_PULL_CARDS] = c->cards;
	colls[MGO_PULL_RUNS] = c->runs;
	colls[MGO_PULL_BOARDS] = c->boards;
	BSON_APPEND_BOOL(&opts, "ordered", false);
	for (k = 0; k < MGO_PULL_COLLS_; k++) {
		mongoc_bulk_operation_t *bulk = NULL;

		for (r = batch, in = 0; r; r = r->next)
			if (r->coll == k)
				pull_bulk_add(&bulk, colls[k], &opts, r->doc_id, r->arr, &in);
		pull_bulk_send(m, bulk, in);
	}
	bson_destroy(&opts);
}

static void evq_pull_shared(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
			    const struct mgo_evq *q)
{
	struct mgo *m = c->m;
	bson_t arr = BSON_INITIALIZER;
	struct mgo_pull_req r = {.doc_id = doc_id, .arr = &arr}, *batch, *p;

	if (coll == c->cards)
		r.coll = MGO_PULL_CARDS;
	else if (coll == c->runs)
		r.coll = MGO_PULL_RUNS;
	else if (coll == c->boards)
		r.coll = MGO_PULL_BOARDS;
	else {
		evq_pull(m, coll, doc_id, q);
		return;
	}
	if (pthread_cond_init(&r.cv, NULL) != 0) {
		evq_pull(m, coll, doc_id, q);
		return;
	}
	pull_array(&arr, q);
	pthread_mutex_lock(&m->seq_mu);
	*m->pullg_tail = &r;
	m->pullg_tail = &r.next;
	while (!r.taken && m->pullg_busy)
		pthread_cond_wait(&r.cv, &m->seq_mu);
	if (!r.taken) {
		/* This writer sends the bulk, for everyone queued (itself included). */
		batch = m->pullg_head;
		m->pullg_head = NULL;
		m->pullg_tail = &m->pullg_head;
		for (p = batch; p; p = p->next)
			p->taken = true;
		m->pullg_busy = true;
		pthread_mutex_unlock(&m->seq_mu);
		pulls_send_group(c, batch);
		pthread_mutex_lock(&m->seq_mu);
		/* each request lives on its writer's stack: untouched once done is seen */
		for (p = batch; p; p = p->next) {
			p->done = true;
			if (p != &r)
				pthread_cond_signal(&p->cv);
		}
		m->pullg_busy = false;
		if (m->pullg_head) /* the first one queued meanwhile sends the next bulk */
			pthread_cond_signal(&m->pullg_head->cv);
	}
	while (!r.done)
		pthread_cond_wait(&r.cv, &m->seq_mu);
	pthread_mutex_unlock(&m->seq_mu);
	pthread_cond_destroy(&r.cv);
	bson_destroy(&arr);
}

/* The cache slot of event id `eid` (FNV-1a). */
static size_t dlv_slot(const char *eid)
{
	uint32_t h = 2166136261u;

	for (; *eid; eid++)
		h = (h ^ (uint8_t)*eid) * 16777619u;
	return h % MGO_DLV_CACHE;
}

/* Remembers q's events as stored. */
static void dlv_note(struct mgo *m, const struct mgo_evq *q)
{
	size_t i;

	pthread_mutex_lock(&m->dlv_mu);
	for (i = 0; i < q->n; i++)
		memcpy(m->dlv_ids[dlv_slot(q->eid[i])], q->eid[i], sizeof(q->eid[i]));
	pthread_mutex_unlock(&m->dlv_mu);
}

/* Is event id `eid` one of q's? */
static bool evq_has(const struct mgo_evq *q, const char *eid)
{
	size_t i;

	for (i = 0; i < q->n; i++)
		if (strcmp(q->eid[i], eid) == 0)
			return true;
	return false;
}

/* Does the outbox of `after` (the document as this write left it) hold, besides q's own
 * events, an entry that may not be stored yet (not one this process remembers delivering)?
 * Read in place: the common outbox holds only q's and entries awaiting their deferred pull. */
static bool outbox_ahead(struct mgo *m, const bson_t *after, const struct mgo_evq *q)
{
	bson_iter_t ai, ei;
	const char *eid;
	bool ahead = false;

	if (!bson_iter_init_find(&ai, after, "outbox") || !BSON_ITER_HOLDS_ARRAY(&ai) ||
	    !bson_iter_recurse(&ai, &ai))
		return false;
	pthread_mutex_lock(&m->dlv_mu);
	while (!ahead && bson_iter_next(&ai)) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&ai) || !bson_iter_recurse(&ai, &ei) ||
		    !bson_iter_find(&ei, "_id") || !BSON_ITER_HOLDS_UTF8(&ei))
			continue;
		eid = bson_iter_utf8(&ei, NULL);
		ahead = !evq_has(q, eid) && strcmp(m->dlv_ids[dlv_slot(eid)], eid) != 0;
	}
	pthread_mutex_unlock(&m->dlv_mu);
	return ahead;
}

void mgo_evq_deliver(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
		     const struct mgo_evq *q, const bson_t *after)
{
	struct mgo_evq all = {0};
	bool just_pushed = true;

	/* Entries an earlier write on this document pushed and has not delivered yet go first,
	 * in the outbox's order, with ours: seqs are taken at delivery, so a write that took
	 * its seqs before the write it follows on the same card would be logged before it, and
	 * the log would contradict the card's history (found by tests/history). Whoever
	 * delivers an entry second finds it stored (evq_undelivered) and only pulls it. */
	if (after && q->n && outbox_ahead(c->m, after, q)) {
		size_t i, pos = 0;

		mgo_evq_from_outbox(&all, after, &pos);
		for (i = 0; i < q->n && evq_has(&all, q->eid[i]); i++)
			;
		/* An outbox longer than a queue holds (ours not in view): ours alone, as before. */
		if (i == q->n && !all.failed) {
			all.q_ts = q->q_ts;
			q = &all;
			just_pushed = false;
		}
	}
	if (!q->n || evq_store(c, q, just_pushed, coll == c->cards ? doc_id : NULL) != CORE_OK)
		goto out; /* left in the outbox: the maintenance drain retries */
	dlv_note(c->m, q);
	if (mgo_effects_store(c, q) != CORE_OK)
		goto out;
	if (pull_defer(c, coll, doc_id, q))
		goto out;
	if (c->m->racy_updates)
		evq_pull_shared(c, coll, doc_id, q);
	else
		evq_pull(c->m, coll, doc_id, q);
out:
	mgo_evq_release(&all);
}

enum core_rc mgo_evq_insert_direct(struct mgo_conn *c, const struct mgo_evq *q)
{
	return evq_store(c, q, false, NULL);
}

/* ---- the maintenance drain ---- */

struct drain_ctx {
	struct mgo_conn *c;
	mongoc_collection_t *coll;
};

bool mgo_evq_from_outbox(struct mgo_evq *q, const bson_t *doc, size_t *pos)
{
	bson_iter_t ai, ei;
	const uint8_t *data;
	uint32_t len;
	bson_t ev;
	size_t i = 0;

	if (!bson_iter_init_find(&ai, doc, "outbox") || !BSON_ITER_HOLDS_ARRAY(&ai) ||
	    !bson_iter_recurse(&ai, &ai))
		return false;
	while (bson_iter_next(&ai)) {
		if (i++ < *pos)
			continue;
		if (q->n == sizeof(q->ev) / sizeof(q->ev[0]))
			return true;
		*pos = i;
		if (!BSON_ITER_HOLDS_DOCUMENT(&ai))
			continue;
		bson_iter_document(&ai, &len, &data);
		if (!bson_init_static(&ev, data, len) || !bson_iter_init_find(&ei, &ev, "_id") ||
		    !BSON_ITER_HOLDS_UTF8(&ei))
			continue;
		bson_strncpy(q->eid[q->n], bson_iter_utf8(&ei, NULL), sizeof(q->eid[q->n]));
		q->ev[q->n] = bson_copy(&ev);
		if (q->ev[q->n])
			q->n++;
	}
	return false;
}

static enum core_rc drain_doc(void *ctx, const bson_t *doc)
{
	struct drain_ctx *d = ctx;
	struct mgo_evq q = {0};
	size_t pos = 0;
	bson_iter_t it;

	if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
		return CORE_OK;
	mgo_evq_from_outbox(&q, doc, &pos); /* the rest on the next pass, once these are pulled */
	/* What was delivered already (a writer that died before its pull) is only pulled. */
	if (q.n && evq_store(d->c, &q, false,
			     d->coll == d->c->cards ? bson_iter_utf8(&it, NULL) : NULL) == CORE_OK &&
	    mgo_effects_store(d->c, &q) == CORE_OK)
		evq_pull(d->c->m, d->coll, bson_iter_utf8(&it, NULL), &q);
	mgo_evq_release(&q);
	return CORE_OK;
}

void mgo_outbox_drain(struct mgo *m)
{
	struct mgo_conn c;
	struct drain_ctx d;
	mongoc_collection_t *colls[3];
	bson_t filter, opts, lt, proj;
	size_t i;

	if (mgo_conn_open_bare(m, &c) != CORE_OK)
		return;
	colls[0] = c.cards;
	colls[1] = c.runs;
	colls[2] = c.boards;
	for (i = 0; i < 3; i++) {
		bson_init(&filter);
		bson_init(&opts);
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "outbox.q_ts", &lt);
		BSON_APPEND_DATE_TIME(&lt, "$lt", mgo_clock_now(&m->base) - MGO_OUTBOX_GRACE_MS);
		bson_append_document_end(&filter, &lt);
		BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
		BSON_APPEND_INT32(&proj, "outbox", 1);
		bson_append_document_end(&opts, &proj);
		BSON_APPEND_INT64(&opts, "limit", 100);
		d = (struct drain_ctx){.c = &c, .coll = colls[i]};
		mgo_find_each(colls[i], &filter, &opts, drain_doc, &d);
		bson_destroy(&opts);
		bson_destroy(&filter);
	}
	mgo_conn_close(&c);
}

/* ---- retention ---- */

static bool tail_probe(struct mgo *m, const char *board, int64_t *top);

void mgo_events_trim(struct mgo *m)
{
	struct mgo_conn c;
	bson_t filter, lte;
	bson_error_t e;
	int64_t top, low, cut, upto;
	int rounds;

	if (mgo_conn_open_bare(m, &c) != CORE_OK)
		return;
	/* By seq, not by count: no count of a large collection, and holes and fillers only
	 * make the tail keep fewer than events_keep, never more. */
	/* The newest seq from the counter (one document by _id): no read of `events` at all
	 * while it holds fewer than events_keep seqs (FerretDB scans and sorts the whole
	 * collection for an edge). A counter ahead of `events` trims a few more of the oldest,
	 * one behind it trims less: neither loses a kept seq that matters. */
	if (!tail_probe(m, NULL, &top) || (cut = top - m->events_keep) < 1 ||
	    !events_edge(&c, 1, &low))
		goto out;
	/* A bounded delete at a time: a first trim of a long-grown collection does not hold one
	 * operation for minutes; what is left goes on the next round. */
	for (rounds = 0; low <= cut && rounds < MGO_TRIM_ROUNDS; rounds++, low = upto + 1) {
		upto = cut - low >= MGO_TRIM_BATCH ? low + MGO_TRIM_BATCH - 1 : cut;
		bson_init(&filter);
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "seq", &lte);
		BSON_APPEND_INT64(&lte, "$lte", upto);
		bson_append_document_end(&filter, &lte);
		if (!mongoc_collection_delete_many(c.events, &filter, NULL, NULL, &e)) {
			mgo_error("trim events", &e);
			bson_destroy(&filter);
			break;
		}
		bson_destroy(&filter);
	}
out:
	mgo_conn_close(&c);
}

/* ---- the tail ---- */

struct tail_ctx {
	struct mgo *m;
	const char *key;   /* the cursor's field: "seq", or "board_seq" (one board's tail) */
	const char *board;
	const char *const *boards;
	size_t limit;
	struct core_event *v;
	size_t *n;
	int64_t expect;    /* the next seq without a hole */
	int64_t safe;      /* the last seq scanned (served or not) */
	int64_t served;    /* the last seq served */
	int64_t real_now;  /* the server clock, for the hole grace */
	size_t scanned;
	bool stop;
};

static enum core_rc tail_doc(void *ctx, const bson_t *doc)
{
	struct tail_ctx *t = ctx;
	bson_iter_t it;
	int64_t seq = 0, ts = 0;
	struct core_event e;
	enum core_rc rc;

	t->scanned++;
	if (t->stop)
		return CORE_OK;
	if (!bson_iter_init_find(&it, doc, t->key) || !mgo_iter_i64(&it, &seq))
		return CORE_OK;
	if (seq < t->expect) /* a board_seq handed out twice (mongo_bseq.c): served once */
		return CORE_OK;
	if (seq != t->expect) {
		/* A hole: wait for it unless the event after it is old enough to prove it a
		 * seq that will never be filled. */
		if (!bson_iter_init_find(&it, doc, "ts") || !mgo_iter_i64(&it, &ts) ||
		    ts > t->real_now - MGO_GAP_GRACE_MS) {
			t->stop = true;
			return CORE_OK;
		}
	}
	if (bson_iter_init_find(&it, doc, MGO_FILLER)) {
		/* A seq handed out and left unused: nothing to serve, nothing to wait for. */
	} else if (!bson_iter_init_find(&it, doc, "board") || !BSON_ITER_HOLDS_UTF8(&it) ||
		   mgo_board_allowed(bson_iter_utf8(&it, NULL), t->board, t->boards)) {
		if (*t->n == t->limit) {
			t->stop = true;
			return CORE_OK;
		}
		rc = mgo_event_from_bson(doc, &e);
		if (rc == CORE_ERR_NOMEM)
			return rc;
		if (rc == CORE_OK) {
			t->v[(*t->n)++] = e;
			t->served = seq;
		}
	}
	t->safe = seq;
	t->expect = seq + 1;
	return CORE_OK;
}

/* ---- the tail's wake-ups ---- */

bool mgo_tail_init(struct mgo *m)
{
	pthread_condattr_t ca;
	bool ok;

	if (pthread_condattr_init(&ca) != 0)
		return false;
	ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
	     pthread_mutex_init(&m->tail_mu, NULL) == 0;
	if (ok && pthread_cond_init(&m->tail_cv, &ca) != 0) {
		pthread_mutex_destroy(&m->tail_mu);
		ok = false;
	}
	pthread_condattr_destroy(&ca);
	m->tail_memo_after = -1;
	return ok;
}

void mgo_tail_fini(struct mgo *m)
{
	bson_destroy(m->probe_doc);
	m->probe_doc = NULL;
	pthread_cond_destroy(&m->tail_cv);
	pthread_mutex_destroy(&m->tail_mu);
}

void mgo_tail_wake(struct mgo *m)
{
	pthread_mutex_lock(&m->tail_mu);
	m->tail_gen++;
	m->probe_ms = 0; /* the shared counter is stale now */
	pthread_cond_broadcast(&m->tail_cv);
	pthread_mutex_unlock(&m->tail_mu);
}

static uint64_t tail_gen(struct mgo *m)
{
	uint64_t g;

	pthread_mutex_lock(&m->tail_mu);
	g = m->tail_gen;
	pthread_mutex_unlock(&m->tail_mu);
	return g;
}

/* Naps up to ms unless this process stores events meanwhile (its gen moves past gen): true
 * then. */
static bool tail_nap(struct mgo *m, uint64_t gen, int64_t ms)
{
	struct timespec until;
	bool woke;

	clock_gettime(CLOCK_MONOTONIC, &until);
	core_timespec_add_ns(&until, ms * 1000000);
	pthread_mutex_lock(&m->tail_mu);
	while (m->tail_gen == gen && pthread_cond_timedwait(&m->tail_cv, &m->tail_mu, &until) == 0)
		;
	woke = m->tail_gen != gen;
	pthread_mutex_unlock(&m->tail_mu);
	return woke;
}

/* The newest seq handed out (board NULL) or board's newest board_seq, from the events counter:
 * one document by _id, which FerretDB reads without scanning (its SQLite backend pushes down
 * only an {_id} filter; the tail's query reads and sorts every event there). The document is
 * shared by this process's readers for MGO_TAIL_PROBE_SHARE_MS (dropped by its own inserts):
 * a round trip costs FerretDB milliseconds of CPU even by _id, and the readers (the stream
 * hub, the waker, every long-poll) would each ask several times a second. False when the read
 * failed: the caller queries instead. A missing counter reads 0. */
static bool tail_probe(struct mgo *m, const char *board, int64_t *top)
{
	struct mgo_conn c;
	bson_t *doc = NULL;
	bson_iter_t it;
	char f[CORE_NAME_MAX + 8];
	int64_t now = mgo_mono_ms();
	bool ok = true;

	pthread_mutex_lock(&m->tail_mu);
	if (m->probe_doc && now - m->probe_ms < MGO_TAIL_PROBE_SHARE_MS)
		doc = bson_copy(m->probe_doc);
	pthread_mutex_unlock(&m->tail_mu);
	if (!doc) {
		if (m->test_read)
			m->test_read(m->test_ctx, "probe");
		if (mgo_conn_open_bare(m, &c) != CORE_OK)
			return false;
		ok = mgo_find_by_id(c.counters, "events", &doc) == CORE_OK;
		mgo_conn_close(&c);
		if (ok && doc) {
			pthread_mutex_lock(&m->tail_mu);
			bson_destroy(m->probe_doc);
			m->probe_doc = bson_copy(doc);
			m->probe_ms = now;
			pthread_mutex_unlock(&m->tail_mu);
		}
	}
	*top = 0;
	if (ok && doc) {
		if (board)
			mgo_bseq_field(f, sizeof f, board);
		if (bson_iter_init(&it, doc) &&
		    bson_iter_find_descendant(&it, board ? f : "seq", &it))
			ok = mgo_iter_i64(&it, top);
	}
	bson_destroy(doc);
	return ok;
}

/* The tail: by seq over the boards asked for, or (by_board) one board's by board_seq off the
 * (board, board_seq) index, never a scan of other boards' events.
 *
 * Waiting (wait_ms), it queries `events` again only when there can be something new: this
 * process stored events (mgo_tail_wake wakes its nap at once), the counter moved past where
 * it stopped (read after each nap: another replica's events, within MGO_TAIL_NAP_MAX_MS), or
 * MGO_TAIL_FULL_MS passed since its last query (a counter behind what `events` holds: one
 * restored from an older backup, or moved back by FerretDB's non-atomic $inc). The naps grow
 * from MGO_TAIL_NAP_MIN_MS to MGO_TAIL_NAP_MAX_MS while nothing comes. An unfiltered call
 * from where the last one found nothing, within MGO_TAIL_FULL_MS and with no write of this
 * process since, starts with the counter too (the claim-next waker's back-to-back calls). */
static enum core_rc events_list(struct mgo *m, const char *board, const char *const *boards,
				bool by_board, int64_t after, size_t limit, int64_t wait_ms,
				struct core_event **out, size_t *n, int64_t *next)
{
	struct store *st = &m->base;
	const char *key = by_board ? "board_seq" : "seq";
	struct core_event *v = calloc(limit, sizeof(*v));
	bool plain = !by_board && !board && !boards; /* the memo's kind of call */
	struct tail_ctx t;
	struct mgo_conn c;
	bson_t filter, opts, gt, sort;
	int64_t deadline = mgo_mono_ms() + wait_ms, left, last_query, top;
	int64_t nap_ms = m->tail_nap_ms ? m->tail_nap_ms : MGO_TAIL_NAP_MIN_MS;
	uint64_t gen = tail_gen(m);
	bool query = true;
	enum core_rc rc = CORE_OK;

	if (!v)
		return CORE_ERR_NOMEM;
	*next = after;
	last_query = mgo_mono_ms();
	if (plain && wait_ms > 0) {
		pthread_mutex_lock(&m->tail_mu);
		query = !(m->tail_memo_after == after && m->tail_memo_gen == gen &&
			  last_query - m->tail_memo_ms < MGO_TAIL_FULL_MS);
		if (!query)
			last_query = m->tail_memo_ms;
		pthread_mutex_unlock(&m->tail_mu);
		if (!query)
			query = !tail_probe(m, NULL, &top) || top > after;
	}
	for (;;) {
		if (!query)
			goto nap;
		gen = tail_gen(m); /* a write from here on wakes the nap below */
		last_query = mgo_mono_ms();
		if (m->test_read)
			m->test_read(m->test_ctx, "tail");
		/* A pooled client per poll, never across a nap: long-polls must not hold the
		 * pool that every other request draws from. */
		rc = mgo_conn_open_bare(m, &c);
		if (rc != CORE_OK)
			break;
		t = (struct tail_ctx){.m = m, .key = key, .board = board, .boards = boards,
				      .limit = limit, .v = v, .n = n, .expect = *next + 1,
				      .safe = *next, .real_now = mgo_clock_now(st)};
		bson_init(&filter);
		bson_init(&opts);
		if (by_board)
			BSON_APPEND_UTF8(&filter, "board", board);
		BSON_APPEND_DOCUMENT_BEGIN(&filter, key, &gt);
		BSON_APPEND_INT64(&gt, "$gt", *next);
		bson_append_document_end(&filter, &gt);
		BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
		if (by_board)
			BSON_APPEND_INT32(&sort, "board", 1);
		BSON_APPEND_INT32(&sort, key, 1);
		bson_append_document_end(&opts, &sort);
		BSON_APPEND_INT64(&opts, "limit", 1000);
		rc = mgo_find_each(c.events, &filter, &opts, tail_doc, &t);
		mgo_conn_close(&c);
		bson_destroy(&opts);
		bson_destroy(&filter);
		if (rc != CORE_OK)
			break;
		/* A full page resumes after its last event only when another one is waiting
		 * (t.stop); a page that read the tail to its end resumes from there, past other
		 * boards' events, as the FS twin's does. */
		*next = *n == limit && t.stop ? t.served : t.safe;
		/* A full batch of other boards' events: read on without waiting. */
		if (*n == 0 && !t.stop && t.scanned == 1000)
			continue;
		if (plain && *n == 0 && *next == after) {
			pthread_mutex_lock(&m->tail_mu);
			m->tail_memo_after = after;
			m->tail_memo_ms = last_query;
			m->tail_memo_gen = gen;
			pthread_mutex_unlock(&m->tail_mu);
		}
	nap:
		left = deadline - mgo_mono_ms();
		if (*n > 0 || left <= 0)
			break;
		if (tail_nap(m, gen, left < nap_ms ? left : nap_ms)) {
			query = true; /* this process stored events */
			nap_ms = m->tail_nap_ms ? m->tail_nap_ms : MGO_TAIL_NAP_MIN_MS;
			continue;
		}
		if (!m->tail_nap_ms && nap_ms < MGO_TAIL_NAP_MAX_MS)
			nap_ms = nap_ms * 2 < MGO_TAIL_NAP_MAX_MS ? nap_ms * 2 : MGO_TAIL_NAP_MAX_MS;
		if (plain) { /* another reader's empty query from here counts as this one's */
			pthread_mutex_lock(&m->tail_mu);
			if (m->tail_memo_after == *next && m->tail_memo_gen == gen &&
			    m->tail_memo_ms > last_query)
				last_query = m->tail_memo_ms;
			pthread_mutex_unlock(&m->tail_mu);
		}
		query = mgo_mono_ms() - last_query >= MGO_TAIL_FULL_MS ||
			!tail_probe(m, by_board ? board : NULL, &top) || top > *next;
	}
	if (rc != CORE_OK) {
		store_events_free(v, *n);
		*n = 0;
		*next = 0;
		return rc;
	}
	*out = v;
	return CORE_OK;
}

enum core_rc mgo_events_list(struct store *st, const char *board, const char *const *boards,
			     int64_t after, size_t limit, int64_t wait_ms, struct core_event **out,
			     size_t *n, int64_t *next)
{
	return events_list(mgo_of(st), board, boards, false, after, limit, wait_ms, out, n, next);
}

enum core_rc mgo_events_list_board(struct store *st, const char *board, int64_t after,
				   size_t limit, int64_t wait_ms, struct core_event **out,
				   size_t *n, int64_t *next)
{
	return events_list(mgo_of(st), board, NULL, true, after, limit, wait_ms, out, n, next);
}
