/* board_seq on the Mongo twin (DESIGN §11): each board's events are numbered 1, 2, 3 ... in
 * that board's own sequence, so a token scoped to boards reads cursors that say nothing of
 * other boards' traffic.
 *
 * The counters live beside the global one, in the same document of `counters`:
 * {_id: "events", seq, b: {<board>: last}} (a board name's '.' written ':', which no board
 * name holds). So one findAndModify hands out an event's seq and its board_seq together:
 * allocating board_seq costs no round trip. Both are read off the counters as they were
 * BEFORE the $inc, plus this batch's increments (mgo_counter_old): a post-image can show a
 * later writer's $inc (mongo-java-server 1.47), which handed two writers one number and a
 * third none. Both come in the order the batches reach the server, so a board's board_seq
 * runs in seq order (DESIGN §16). A board_seq is kept across the retries of a
 * seq collision (it is re-taken only when `events` shows it taken: a counter restored from
 * an older backup, or FerretDB's non-atomic $inc between processes), so a collision leaves no
 * hole in the board's sequence. What can leave one is a writer that dies between taking and
 * inserting (its outbox is delivered later under new numbers); the board tail waits such a
 * hole out like the global tail does (MGO_GAP_GRACE_MS), then steps over it and counts it
 * (boardd_mongo_board_seq_holes_total). Two writers delivering one outbox entry would leave
 * one too: mongo_outbox.c's peers_settle keeps them apart.
 *
 * Events written before board_seq existed get theirs at open (mgo_bseq_migrate), in seq
 * order per board, from the same counters. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The counter field of a board: "b.<board>" with '.' as ':'. */
void mgo_bseq_field(char *out, size_t cap, const char *board)
{
	size_t i;

	snprintf(out, cap, "b.%s", board);
	for (i = 2; out[i]; i++)
		if (out[i] == '.')
			out[i] = ':';
}

/* The findAndModify itself. */
static enum core_rc seqs_take_one(struct mgo_conn *c, int64_t n, const char *const *boards,
				  const int64_t *counts, size_t nb, int64_t *last, int64_t *blast)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, inc, reply;
	char f[CORE_NAME_MAX + 8];
	enum core_rc rc;
	size_t i;

	*last = 0;
	for (i = 0; i < nb; i++)
		blast[i] = 0;
	BSON_APPEND_UTF8(&filter, "_id", "events");
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
	BSON_APPEND_INT64(&inc, "seq", n);
	for (i = 0; i < nb; i++) {
		mgo_bseq_field(f, sizeof f, boards[i]);
		BSON_APPEND_INT64(&inc, f, counts[i]);
	}
	bson_append_document_end(&update, &inc);
	/* The whole document comes back: FerretDB 1.24's findAndModify takes no `fields`. */
	rc = mgo_counter_fam(c, &filter, &update, &reply);
	if (rc != CORE_OK)
		goto out;
	/* The counters as they were before this $inc, plus its own increments: the range the
	 * server's step handed this batch alone (mgo_counter_fam says why not the post-image). */
	if (!mgo_counter_old(&reply, "seq", last))
		rc = CORE_ERR_STORE_UNAVAILABLE;
	*last += n;
	for (i = 0; rc == CORE_OK && i < nb; i++) {
		mgo_bseq_field(f, sizeof f, boards[i]);
		if (!mgo_counter_old(&reply, f, &blast[i]))
			rc = CORE_ERR_STORE_UNAVAILABLE;
		blast[i] += counts[i];
	}
	if (rc != CORE_OK)
		fprintf(stderr, "boardd: mongo: counter events: malformed reply\n");
out:
	bson_destroy(&reply);
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

/* One findAndModify for every request of the batch: the sum of their seqs and, per board,
 * of their board_seqs; then each request, in queue order, its own contiguous part of each
 * range. The server's $inc hands the whole range to this batch alone (the same atomicity
 * each writer relied on before; on FerretDB this process's batches still take turns,
 * counter_serial), so the parts are disjoint. A failure is every request's. */
static void seqs_take_batch(struct mgo_conn *c, struct mgo_seq_req *batch)
{
	struct mgo_seq_req *r;
	size_t cap = 0, nu = 0, i, u;
	int64_t total = 0, last = 0, seq_base;
	const char **ub = NULL;
	int64_t *ucount = NULL, *ublast = NULL, *ubase = NULL;
	enum core_rc rc = CORE_OK;

	for (r = batch; r; r = r->next)
		cap += r->nb;
	if (cap && (!(ub = calloc(cap, sizeof(*ub))) || !(ucount = calloc(cap, sizeof(*ucount))) ||
		    !(ublast = calloc(cap, sizeof(*ublast))) || !(ubase = calloc(cap, sizeof(*ubase)))))
		rc = CORE_ERR_NOMEM;
	for (r = batch; rc == CORE_OK && r; r = r->next) {
		total += r->n;
		for (i = 0; i < r->nb; i++) {
			for (u = 0; u < nu && strcmp(ub[u], r->boards[i]) != 0; u++)
				;
			if (u == nu)
				ub[nu++] = r->boards[i];
			ucount[u] += r->counts[i];
		}
	}
	if (rc == CORE_OK)
		rc = seqs_take_one(c, total, ub, ucount, nu, &last, ublast);
	seq_base = last - total;
	for (u = 0; u < nu; u++)
		ubase[u] = ublast[u] - ucount[u];
	for (r = batch; r; r = r->next) {
		r->rc = rc;
		r->last = 0;
		for (i = 0; i < r->nb; i++)
			r->blast[i] = 0;
		if (rc != CORE_OK)
			continue;
		seq_base += r->n;
		r->last = seq_base;
		for (i = 0; i < r->nb; i++) {
			for (u = 0; strcmp(ub[u], r->boards[i]) != 0; u++)
				;
			ubase[u] += r->counts[i];
			r->blast[i] = ubase[u];
		}
	}
	free(ub);
	free(ucount);
	free(ublast);
	free(ubase);
}

/* The index of the write error that stopped an ordered bulk (its reply's first
 * writeErrors entry); false when the reply names none. */
static bool bulk_error_index(const bson_t *reply, size_t *at)
{
	bson_iter_t it, e;
	int64_t v;

	if (!bson_iter_init_find(&it, reply, "writeErrors") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &it) || !bson_iter_next(&it) ||
	    !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &e) ||
	    !bson_iter_find(&e, "index") || !mgo_iter_i64(&e, &v) || v < 0)
		return false;
	*at = (size_t)v;
	return true;
}

/* The shared insert: every request of the batch that has documents and got its seqs puts
 * them in one ordered insert, in queue order (so in seq order, as the writers' own inserts
 * would have been numbered). Each request's outcome is its own: OK when the insert went
 * past all its documents; ALREADY_EXISTS when a duplicate key stopped it at or before one
 * of them (an ordered insert tries nothing after the error): that writer then takes the
 * collision path it always took (mongo_insert.c: it re-reads which of its events `events`
 * holds, fills the seqs it was handed, and tries again with new ones), whatever another
 * writer's documents did; any other error is every unfinished request's (their events stay
 * in the outbox for the drain, as a writer's own failed insert left them). */
static void seqs_insert_batch(struct mgo_conn *c, struct mgo_seq_req *batch)
{
	mongoc_bulk_operation_t *bulk = NULL;
	bson_t opts = BSON_INITIALIZER, reply;
	bson_error_t e;
	struct mgo_seq_req *r;
	size_t total = 0, stop = 0;
	bool stopped = false, some = false;
	enum core_rc rc = CORE_OK;
	int64_t ts = mgo_clock_now(&c->m->base);

	BSON_APPEND_BOOL(&opts, "ordered", true);
	for (r = batch; r; r = r->next) {
		r->ins_rc = r->rc;
		if (r->rc != CORE_OK || !r->docs || !r->ndocs)
			continue;
		if (!bulk)
			bulk = mongoc_collection_create_bulk_operation_with_opts(c->events, &opts);
		r->at = total;
		r->docs(r, bulk, ts);
		total += r->ndocs;
	}
	bson_destroy(&opts);
	if (!bulk)
		return;
	if (c->m->test_read)
		c->m->test_read(c->m->test_ctx, "insert");
	if (!mongoc_bulk_operation_execute(bulk, &reply, &e)) {
		rc = mgo_error("insert events", &e);
		stopped = rc == CORE_ERR_ALREADY_EXISTS && bulk_error_index(&reply, &stop);
	}
	for (r = batch; r; r = r->next) {
		if (r->ins_rc != CORE_OK || !r->docs || !r->ndocs)
			continue;
		/* Before the duplicate key: inserted. Otherwise the bulk's error (a duplicate
		 * whose place is unknown reads as each one's: the collision path finds out). */
		if (rc != CORE_OK && !(stopped && r->at + r->ndocs <= stop))
			r->ins_rc = rc;
		some = some || r->ins_rc == CORE_OK;
	}
	if (some)
		mgo_tail_wake(c->m); /* this process's waiting tails read them at once */
	bson_destroy(&reply);
	mongoc_bulk_operation_destroy(bulk);
}

enum core_rc mgo_seqs_take(struct mgo_conn *c, int64_t n, const char *const *boards,
			   const int64_t *counts, size_t nb, int64_t *last, int64_t *blast)
{
	struct mgo_seq_req r = {.n = n, .boards = boards, .counts = counts, .nb = nb,
				.blast = blast};
	enum core_rc rc = mgo_seqs_take_insert(c, &r);

	*last = r.last;
	return rc;
}

enum core_rc mgo_seqs_take_insert(struct mgo_conn *c, struct mgo_seq_req *req)
{
	struct mgo *m = c->m;
	struct mgo_seq_req *batch, *p, *ins;

	req->taken = req->done = false;
	req->next = NULL;
	req->ins_rc = CORE_ERR_INTERNAL;
	if (pthread_cond_init(&req->cv, NULL) != 0) {
		req->rc = CORE_ERR_NOMEM;
		return req->rc;
	}
	pthread_mutex_lock(&m->seq_mu);
	*m->seq_tail = req;
	m->seq_tail = &req->next;
	while (!req->taken && m->seq_inflight >= m->seq_inflight_max)
		pthread_cond_wait(&req->cv, &m->seq_mu);
	if (!req->taken) {
		/* This writer goes, for everyone queued (itself included). */
		batch = m->seq_head;
		m->seq_head = NULL;
		m->seq_tail = &m->seq_head;
		for (p = batch; p; p = p->next)
			p->taken = true;
		m->seq_inflight++;
		pthread_mutex_unlock(&m->seq_mu);
		seqs_take_batch(c, batch);
		for (ins = batch; ins && !ins->docs; ins = ins->next)
			;
		if (ins)
			seqs_insert_batch(c, batch);
		pthread_mutex_lock(&m->seq_mu);
		/* Each request lives on its writer's stack: nothing of it is touched once its
		 * writer may see done and return (it reads it under seq_mu, after this). */
		for (p = batch; p; p = p->next) {
			p->done = true;
			if (p != req)
				pthread_cond_signal(&p->cv);
		}
		m->seq_inflight--;
		if (m->seq_head) /* the first one queued meanwhile may go now */
			pthread_cond_signal(&m->seq_head->cv);
	}
	while (!req->done)
		pthread_cond_wait(&req->cv, &m->seq_mu);
	pthread_mutex_unlock(&m->seq_mu);
	pthread_cond_destroy(&req->cv);
	return req->rc;
}

/* The highest board_seq `events` holds for board (0: none); false when the read failed. */
static bool bseq_top(struct mgo_conn *c, const char *board, int64_t *top)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort, proj, *doc = NULL;
	bson_iter_t it;
	enum core_rc rc;

	*top = 0;
	BSON_APPEND_UTF8(&filter, "board", board);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "board", 1);
	BSON_APPEND_INT32(&sort, "board_seq", -1);
	bson_append_document_end(&opts, &sort);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "board_seq", 1);
	bson_append_document_end(&opts, &proj);
	rc = mgo_find_one(c->events, &filter, &opts, &doc);
	if (rc == CORE_OK && doc && bson_iter_init_find(&it, doc, "board_seq"))
		mgo_iter_i64(&it, top);
	bson_destroy(doc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc == CORE_OK;
}

bool mgo_bseq_taken(struct mgo_conn *c, const char *board, int64_t bseq, const char *eid)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, ne, proj, *doc = NULL;
	bool taken;

	BSON_APPEND_UTF8(&filter, "board", board);
	BSON_APPEND_INT64(&filter, "board_seq", bseq);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &ne);
	BSON_APPEND_UTF8(&ne, "$ne", eid);
	bson_append_document_end(&filter, &ne);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "_id", 1);
	bson_append_document_end(&opts, &proj);
	/* A failed read counts as taken: a new number costs a hole at worst, never a twin. */
	taken = mgo_find_one(c->events, &filter, &opts, &doc) != CORE_OK || doc;
	bson_destroy(doc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return taken;
}

void mgo_bseq_catch_up(struct mgo_conn *c, const char *board)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, max;
	bson_error_t e;
	char f[CORE_NAME_MAX + 8];
	int64_t top;

	if (!bseq_top(c, board, &top) || top < 1)
		return;
	mgo_bseq_field(f, sizeof f, board);
	BSON_APPEND_UTF8(&filter, "_id", "events");
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$max", &max);
	BSON_APPEND_INT64(&max, f, top);
	bson_append_document_end(&update, &max);
	if (!mongoc_collection_update_one(c->counters, &filter, &update, NULL, NULL, &e))
		mgo_error("board counter catch-up", &e);
	bson_destroy(&update);
	bson_destroy(&filter);
}

/* ---- events stored before board_seq: numbered once, at open ---- */

struct legacy {
	char (*eid)[25];
	char **board; /* borrowed from names */
	size_t n, cap;
	char **names; /* owned: distinct boards */
	int64_t *count, *next;
	size_t nn;
};

static enum core_rc legacy_doc(void *ctx, const bson_t *doc)
{
	struct legacy *l = ctx;
	bson_iter_t it, bi;
	const char *board;
	size_t k;

	if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it) ||
	    !bson_iter_init_find(&bi, doc, "board") || !BSON_ITER_HOLDS_UTF8(&bi))
		return CORE_OK;
	board = bson_iter_utf8(&bi, NULL);
	if (!core_name_valid(board))
		return CORE_OK;
	for (k = 0; k < l->nn && strcmp(l->names[k], board) != 0; k++)
		;
	if (k == l->nn) {
		char **nv = realloc(l->names, (l->nn + 1) * sizeof(*nv));
		int64_t *cv = nv ? realloc(l->count, (l->nn + 1) * sizeof(*cv)) : NULL;
		int64_t *xv = cv ? realloc(l->next, (l->nn + 1) * sizeof(*xv)) : NULL;

		if (nv)
			l->names = nv;
		if (cv)
			l->count = cv;
		if (xv)
			l->next = xv;
		if (!xv || !(l->names[k] = strdup(board)))
			return CORE_ERR_NOMEM;
		l->count[k] = 0;
		l->nn++;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		char(*ev)[25] = realloc(l->eid, cap * sizeof(*ev));
		char **bv = ev ? realloc(l->board, cap * sizeof(*bv)) : NULL;

		if (ev)
			l->eid = ev;
		if (!bv)
			return CORE_ERR_NOMEM;
		l->board = bv;
		l->cap = cap;
	}
	bson_strncpy(l->eid[l->n], bson_iter_utf8(&it, NULL), sizeof(l->eid[l->n]));
	l->board[l->n++] = l->names[k];
	l->count[k]++;
	return CORE_OK;
}

enum core_rc mgo_bseq_migrate(struct mgo *m)
{
	struct legacy l = {0};
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, ex, sort, proj;
	mongoc_bulk_operation_t *bulk = NULL;
	bson_error_t e;
	int64_t last;
	enum core_rc rc;
	size_t i, k;

	rc = mgo_conn_open_bare(m, &c);
	if (rc != CORE_OK)
		return rc;
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "board_seq", &ex);
	BSON_APPEND_BOOL(&ex, "$exists", false);
	bson_append_document_end(&filter, &ex);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "board", &ex);
	BSON_APPEND_BOOL(&ex, "$exists", true);
	bson_append_document_end(&filter, &ex);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "seq", 1);
	bson_append_document_end(&opts, &sort);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "board", 1);
	bson_append_document_end(&opts, &proj);
	rc = mgo_find_each(c.events, &filter, &opts, legacy_doc, &l);
	/* One range per board, then one unordered bulk: a few round trips, however many. */
	for (k = 0; rc == CORE_OK && k < l.nn; k++) {
		rc = mgo_seqs_take(&c, 0, (const char *const *)&l.names[k], &l.count[k], 1, &last,
				   &l.next[k]);
		l.next[k] -= l.count[k] - 1;
	}
	if (rc == CORE_OK && l.n) {
		bson_t opts_b = BSON_INITIALIZER;

		BSON_APPEND_BOOL(&opts_b, "ordered", false);
		bulk = mongoc_collection_create_bulk_operation_with_opts(c.events, &opts_b);
		bson_destroy(&opts_b);
		for (i = 0; i < l.n; i++) {
			bson_t f = BSON_INITIALIZER, u = BSON_INITIALIZER, set, x;

			for (k = 0; l.names[k] != l.board[i]; k++)
				;
			BSON_APPEND_UTF8(&f, "_id", l.eid[i]);
			BSON_APPEND_DOCUMENT_BEGIN(&f, "board_seq", &x);
			BSON_APPEND_BOOL(&x, "$exists", false); /* another replica's numbering wins */
			bson_append_document_end(&f, &x);
			BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
			BSON_APPEND_INT64(&set, "board_seq", l.next[k]++);
			bson_append_document_end(&u, &set);
			mongoc_bulk_operation_update_one(bulk, &f, &u, false);
			bson_destroy(&u);
			bson_destroy(&f);
		}
		if (!mongoc_bulk_operation_execute(bulk, NULL, &e))
			rc = mgo_error("number legacy events by board", &e);
		else
			fprintf(stderr, "boardd: mongo: gave %zu earlier events their board_seq\n", l.n);
	}
	if (bulk)
		mongoc_bulk_operation_destroy(bulk);
	for (k = 0; k < l.nn; k++)
		free(l.names[k]);
	free(l.names);
	free(l.count);
	free(l.next);
	free(l.eid);
	free(l.board);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mgo_conn_close(&c);
	return rc;
}
