/* The pull of delivered events out of a document's outbox on the Mongo twin: at once
 * (mgo_evq_pull), deferred to the puller thread that gathers every writer's pulls into one
 * bulk per collection (mgo_pull_defer), or, where updates race (FerretDB), the writer's own
 * pull shared with the writers pulling at the same moment (mgo_evq_pull_shared). A pull only
 * ever removes entries that are in `events` already (mongo_outbox.c). */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_events.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
void mgo_evq_pull(struct mgo *m, mongoc_collection_t *coll, const char *doc_id,
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
 * the writer's pull is done before it answers (mgo_evq_pull_shared, below). */

static void pull_free(struct mgo_pull *p)
{
	free(p->doc_id);
	bson_destroy(p->arr);
}

/* Hands q's pull from doc_id's outbox in coll to the puller; false: not taken (no puller,
 * closing, queue full, no memory): the caller pulls. */
bool mgo_pull_defer(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
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

void mgo_evq_pull_shared(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
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
		mgo_evq_pull(m, coll, doc_id, q);
		return;
	}
	if (pthread_cond_init(&r.cv, NULL) != 0) {
		mgo_evq_pull(m, coll, doc_id, q);
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
