/* Webhook deliveries on the Mongo twin (DESIGN §14): get, list, the deliverers' lease with
 * its quiet gate, the fenced outcome (a 410 disables the subscription), the operator's retry,
 * and the retention of settled deliveries. They are enqueued by mongo_effect.c.
 *
 * Leasing: a candidate is read, then taken with one conditional findAndModify whose filter
 * carries the lease as read (free or expired) and the epoch, which the update increments;
 * the outcome is written with a filter on (lease_owner, lease_epoch). On MongoDB two replicas
 * therefore never hold one delivery at once; FerretDB's findAndModify is not atomic under
 * concurrency (README), so there the guarantee is only as good as that. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MGO_LEASE_CANDIDATES 8

/* ---- deliveries ---- */

enum core_rc mgo_delivery_get(struct store *st, const char *id, struct store_delivery **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t *doc = NULL;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = mgo_effect_coll(&c, "deliveries");
	rc = mgo_find_by_id(coll, id, &doc);
	if (rc == CORE_OK)
		rc = doc ? mgo_dlv_from_bson(doc, out) : CORE_ERR_NOT_FOUND;
	if (doc)
		bson_destroy(doc);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

struct dlv_collect {
	struct store_delivery **v;
	size_t n, cap;
};

static enum core_rc dlv_collect_one(void *ctx, const bson_t *doc)
{
	struct dlv_collect *dc = ctx;
	struct store_delivery *d, **nv;
	enum core_rc rc = mgo_dlv_from_bson(doc, &d);

	if (rc != CORE_OK)
		return rc;
	if (dc->n == dc->cap) {
		nv = realloc(dc->v, (dc->cap ? dc->cap * 2 : 8) * sizeof(*nv));
		if (!nv) {
			store_delivery_free(d);
			return CORE_ERR_NOMEM;
		}
		dc->v = nv;
		dc->cap = dc->cap ? dc->cap * 2 : 8;
	}
	dc->v[dc->n++] = d;
	return CORE_OK;
}

static enum core_rc dlv_query(struct mgo_conn *c, const bson_t *filter, int dir, size_t limit,
			      struct store_delivery ***out, size_t *n)
{
	mongoc_collection_t *coll = mgo_effect_coll(c, "deliveries");
	bson_t opts = BSON_INITIALIZER, sort;
	struct dlv_collect dc = {0};
	enum core_rc rc;

	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	if (dir > 0)
		BSON_APPEND_INT32(&sort, "next_at", 1);
	BSON_APPEND_INT32(&sort, "created_at", dir);
	/* The events of one step (or millisecond) share created_at: their board_seq orders them
	 * (DESIGN §16), not the _id string ("b:10.s" < "b:6.s"). A document without event_seq
	 * (none is written so now) sorts as null, ahead of the numbers, then by _id. */
	BSON_APPEND_INT32(&sort, "event_seq", dir);
	BSON_APPEND_INT32(&sort, "_id", dir);
	bson_append_document_end(&opts, &sort);
	BSON_APPEND_INT64(&opts, "limit", (int64_t)limit);
	rc = mgo_find_each(coll, filter, &opts, dlv_collect_one, &dc);
	bson_destroy(&opts);
	mongoc_collection_destroy(coll);
	if (rc != CORE_OK) {
		store_deliveries_free(dc.v, dc.n);
		return rc;
	}
	*out = dc.v;
	*n = dc.n;
	return CORE_OK;
}

enum core_rc mgo_delivery_list(struct store *st, const struct store_delivery_filter *f,
			       struct store_delivery ***out, size_t *n)
{
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	mgo_board_filter_append(&filter, f->board, f->boards);
	if (f->status >= 0)
		BSON_APPEND_UTF8(&filter, "status", store_delivery_status_name(f->status));
	rc = dlv_query(&c, &filter, -1, f->limit, out, n);
	bson_destroy(&filter);
	mgo_conn_close(&c);
	return rc;
}

static void lease_free_filter(bson_t *f, int64_t now)
{
	bson_t or, a, b, lt;

	BSON_APPEND_ARRAY_BEGIN(f, "$or", &or);
	BSON_APPEND_DOCUMENT_BEGIN(&or, "0", &a);
	BSON_APPEND_NULL(&a, "lease_owner");
	bson_append_document_end(&or, &a);
	BSON_APPEND_DOCUMENT_BEGIN(&or, "1", &b);
	BSON_APPEND_DOCUMENT_BEGIN(&b, "lease_until", &lt);
	BSON_APPEND_INT64(&lt, "$lt", now);
	bson_append_document_end(&b, &lt);
	bson_append_document_end(&or, &b);
	bson_append_array_end(f, &or);
}

void mgo_lease_open(struct mgo *m, int64_t due)
{
	pthread_mutex_lock(&m->tail_mu);
	m->lease_gen++;
	if (due < m->lease_quiet_until)
		m->lease_quiet_until = due;
	pthread_mutex_unlock(&m->tail_mu);
}

/* Whether the gate is closed at server time now (no query): quiet, or another deliverer of
 * this process is asking right now with nothing enqueued here since. Else *gen: the gate's
 * generation as this query starts (lease_quiet_after compares it). */
static bool lease_quiet(struct mgo *m, int64_t now, uint64_t *gen)
{
	bool quiet;

	pthread_mutex_lock(&m->tail_mu);
	quiet = now < m->lease_quiet_until ||
		(m->lease_asking && m->lease_asking_gen == m->lease_gen);
	*gen = m->lease_gen;
	if (!quiet) {
		m->lease_asking = true;
		m->lease_asking_gen = *gen;
	}
	pthread_mutex_unlock(&m->tail_mu);
	return quiet;
}

/* The query that started at `now` is over (found: whether it found a delivery due): with
 * none, close the gate for MGO_LEASE_QUIET_MS unless this process enqueued one since. */
static void lease_quiet_after(struct mgo *m, int64_t now, uint64_t gen, bool found)
{
	pthread_mutex_lock(&m->tail_mu);
	m->lease_asking = false;
	if (!found && m->lease_gen == gen)
		m->lease_quiet_until = now + MGO_LEASE_QUIET_MS;
	pthread_mutex_unlock(&m->tail_mu);
}

/* Passes over the deliveries of the subscriptions in skip: {$nor: [{board, subscription}]}. */
static void lease_skip_filter(bson_t *f, const struct store_sub_ref *skip, size_t n_skip)
{
	bson_t nor, one;
	char k[24];
	const char *key;
	size_t i;

	if (!n_skip)
		return;
	BSON_APPEND_ARRAY_BEGIN(f, "$nor", &nor);
	for (i = 0; i < n_skip; i++) {
		bson_uint32_to_string((uint32_t)i, &key, k, sizeof k);
		BSON_APPEND_DOCUMENT_BEGIN(&nor, key, &one);
		BSON_APPEND_UTF8(&one, "board", skip[i].board);
		BSON_APPEND_UTF8(&one, "subscription", skip[i].name);
		bson_append_document_end(&nor, &one);
	}
	bson_append_array_end(f, &nor);
}

enum core_rc mgo_delivery_lease(struct store *st, const char *owner, int64_t lease_ms,
				const struct store_sub_ref *skip, size_t n_skip,
				struct store_delivery **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll = NULL;
	struct store_delivery **cand = NULL;
	size_t n = 0, i;
	bson_t filter = BSON_INITIALIZER, lte;
	uint64_t gen;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	if (lease_quiet(c.m, c.now, &gen)) {
		mgo_conn_close(&c);
		return CORE_OK; /* nothing due here a moment ago, and nothing enqueued since */
	}
	if (c.m->test_read)
		c.m->test_read(c.m->test_ctx, "lease");
	if (c.m->counter_serial)
		pthread_mutex_lock(&c.m->lease_mu);
	BSON_APPEND_UTF8(&filter, "status", "pending");
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "next_at", &lte);
	BSON_APPEND_INT64(&lte, "$lte", c.now);
	bson_append_document_end(&filter, &lte);
	lease_free_filter(&filter, c.now);
	lease_skip_filter(&filter, skip, n_skip);
	rc = dlv_query(&c, &filter, 1, MGO_LEASE_CANDIDATES, &cand, &n);
	bson_destroy(&filter);
	/* Nothing found while passing over some subscriptions says nothing about theirs: the
	 * gate stays open (the deliverer naps between empty turns anyway). */
	lease_quiet_after(c.m, c.now, gen, rc != CORE_OK || n > 0 || n_skip > 0);
	coll = mgo_effect_coll(&c, "deliveries");
	for (i = 0; rc == CORE_OK && i < n && !*out; i++) {
		bson_t f = BSON_INITIALIZER, u = BSON_INITIALIZER, set, inc, *doc = NULL;

		/* Judged again on what was read: a server may hand back a document as it stands
		 * after the query matched it (mongo-java-server does), and a lease taken
		 * meanwhile must not be read as one to take over. */
		if (cand[i]->status != STORE_DELIVERY_PENDING || cand[i]->next_at > c.now ||
		    (cand[i]->lease_owner && cand[i]->lease_until >= c.now))
			continue;

		/* The whole precondition: still pending, the lease as read, the epoch as read. */
		BSON_APPEND_UTF8(&f, "_id", cand[i]->id);
		BSON_APPEND_UTF8(&f, "status", "pending");
		BSON_APPEND_INT64(&f, "lease_epoch", cand[i]->lease_epoch);
		if (cand[i]->lease_owner) {
			BSON_APPEND_UTF8(&f, "lease_owner", cand[i]->lease_owner);
			BSON_APPEND_INT64(&f, "lease_until", cand[i]->lease_until);
		} else {
			BSON_APPEND_NULL(&f, "lease_owner");
		}
		BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
		BSON_APPEND_UTF8(&set, "lease_owner", owner);
		BSON_APPEND_INT64(&set, "lease_until", c.now + lease_ms);
		BSON_APPEND_INT64(&set, "updated_at", c.now);
		bson_append_document_end(&u, &set);
		BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
		BSON_APPEND_INT64(&inc, "lease_epoch", 1);
		bson_append_document_end(&u, &inc);
		if (c.m->test_before_write)
			c.m->test_before_write(c.m->test_ctx, cand[i]->id);
		rc = mgo_find_modify(coll, &f, &u, &doc);
		if (rc == CORE_OK && doc)
			rc = mgo_dlv_from_bson(doc, out);
		if (doc)
			bson_destroy(doc);
		bson_destroy(&u);
		bson_destroy(&f);
	}
	if (c.m->counter_serial)
		pthread_mutex_unlock(&c.m->lease_mu);
	store_deliveries_free(cand, n);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

/* Disables the subscription if it is still the version the attempt was made for (`seen`),
 * judged by the update's own filter: a 410 from an old receiver says nothing of one created
 * again under the name, pointed elsewhere or re-enabled since (mongo_subs.c writes
 * created_at, updated_at and url with every put). */
static enum core_rc sub_disable(struct mgo_conn *c, const char *board, const char *name,
				const struct store_sub *seen)
{
	mongoc_collection_t *coll = mgo_effect_coll(c, "subscriptions");
	bson_t filter = BSON_INITIALIZER, u = BSON_INITIALIZER, set;
	char id[2 * CORE_NAME_MAX + 2];
	bson_error_t e;
	enum core_rc rc = CORE_OK;

	mgo_sub_id(id, sizeof id, board, name);
	BSON_APPEND_UTF8(&filter, "_id", id);
	BSON_APPEND_INT64(&filter, "created_at", seen->created_at);
	BSON_APPEND_INT64(&filter, "updated_at", seen->updated_at);
	BSON_APPEND_UTF8(&filter, "url", seen->url);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
	BSON_APPEND_BOOL(&set, "enabled", false);
	BSON_APPEND_UTF8(&set, "disabled_reason", "gone");
	BSON_APPEND_INT64(&set, "updated_at", c->now);
	bson_append_document_end(&u, &set);
	if (!mongoc_collection_update_one(coll, &filter, &u, NULL, NULL, &e))
		rc = mgo_error("disable subscription", &e);
	mgo_subs_cache_drop(c->m, board);
	bson_destroy(&u);
	bson_destroy(&filter);
	mongoc_collection_destroy(coll);
	return rc;
}

/* A conditional update of delivery id; on a miss, NOT_FOUND when it is gone, else `miss`. */
static enum core_rc dlv_cas(struct mgo_conn *c, mongoc_collection_t *coll, const char *id,
			    const bson_t *f, const bson_t *u, enum core_rc miss,
			    struct store_delivery **out)
{
	bson_t *doc = NULL;
	enum core_rc rc = mgo_find_modify(coll, f, u, &doc);

	if (rc == CORE_OK && doc) {
		if (out)
			rc = mgo_dlv_from_bson(doc, out);
	} else if (rc == CORE_OK) {
		rc = mgo_find_by_id(coll, id, &doc);
		if (rc == CORE_OK)
			rc = doc ? miss : CORE_ERR_NOT_FOUND;
	}
	if (doc)
		bson_destroy(doc);
	(void)c;
	return rc;
}

enum core_rc mgo_delivery_finish(struct store *st, const char *id,
				 const struct store_delivery_outcome *o,
				 struct store_delivery **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t f = BSON_INITIALIZER, u = BSON_INITIALIZER, set, unset, inc;
	struct store_delivery *d = NULL;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = mgo_effect_coll(&c, "deliveries");
	BSON_APPEND_UTF8(&f, "_id", id);
	BSON_APPEND_UTF8(&f, "status", "pending");
	BSON_APPEND_UTF8(&f, "lease_owner", o->owner);
	BSON_APPEND_INT64(&f, "lease_epoch", o->epoch);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
	BSON_APPEND_UTF8(&set, "status",
			 o->verdict == CORE_DELIVERY_DONE    ? "done"
			 : o->verdict == CORE_DELIVERY_RETRY ? "pending"
							     : "dead");
	if (o->verdict == CORE_DELIVERY_RETRY)
		BSON_APPEND_INT64(&set, "next_at", o->next_at);
	if (o->status)
		BSON_APPEND_INT32(&set, "last_status", o->status);
	else
		BSON_APPEND_NULL(&set, "last_status");
	if (o->error)
		BSON_APPEND_UTF8(&set, "last_error", o->error);
	else
		BSON_APPEND_NULL(&set, "last_error");
	BSON_APPEND_NULL(&set, "lease_owner");
	BSON_APPEND_INT64(&set, "lease_until", 0);
	BSON_APPEND_INT64(&set, "updated_at", c.now);
	bson_append_document_end(&u, &set);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
	BSON_APPEND_INT32(&inc, "attempts", 1);
	bson_append_document_end(&u, &inc);
	(void)unset;
	rc = dlv_cas(&c, coll, id, &f, &u, CORE_ERR_CLAIM_CONFLICT, &d);
	if (rc == CORE_OK && o->verdict == CORE_DELIVERY_RETRY)
		mgo_lease_open(c.m, o->next_at); /* leased here when it falls due */
	/* After the outcome: a replica that dies in between leaves the subscription enabled,
	 * and the next delivery to it meets the 410 again. */
	if (rc == CORE_OK && o->verdict == CORE_DELIVERY_DISABLE && o->sub)
		rc = sub_disable(&c, d->board, d->sub, o->sub);
	if (rc == CORE_OK && out) {
		*out = d;
		d = NULL;
	}
	store_delivery_free(d);
	bson_destroy(&u);
	bson_destroy(&f);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_delivery_retry(struct store *st, const char *id, struct store_delivery **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t f = BSON_INITIALIZER, u = BSON_INITIALIZER, set, ne, inc;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = mgo_effect_coll(&c, "deliveries");
	BSON_APPEND_UTF8(&f, "_id", id);
	BSON_APPEND_DOCUMENT_BEGIN(&f, "status", &ne);
	BSON_APPEND_UTF8(&ne, "$ne", "pending");
	bson_append_document_end(&f, &ne);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
	BSON_APPEND_UTF8(&set, "status", "pending");
	BSON_APPEND_INT32(&set, "attempts", 0);
	BSON_APPEND_INT64(&set, "next_at", c.now);
	BSON_APPEND_NULL(&set, "lease_owner");
	BSON_APPEND_INT64(&set, "lease_until", 0);
	BSON_APPEND_INT64(&set, "updated_at", c.now);
	bson_append_document_end(&u, &set);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
	BSON_APPEND_INT64(&inc, "lease_epoch", 1);
	bson_append_document_end(&u, &inc);
	rc = dlv_cas(&c, coll, id, &f, &u, CORE_ERR_STATE_CONFLICT, out);
	if (rc == CORE_OK)
		mgo_lease_open(c.m, 0);
	bson_destroy(&u);
	bson_destroy(&f);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

/* ---- retention ---- */

/* Keeps the newest MGO_SETTLED_KEEP settled (done or dead) deliveries: the maintenance
 * thread deletes the older ones. Pending deliveries are never deleted. */
#define MGO_SETTLED_KEEP 10000

void mgo_deliveries_trim(struct mgo *m)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort, in, arr, lte, *doc = NULL;
	bson_iter_t it;
	bson_error_t e;
	int64_t cut;

	if (mgo_conn_open_bare(m, &c) != CORE_OK)
		return;
	coll = mgo_effect_coll(&c, "deliveries");
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "status", &in);
	BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	BSON_APPEND_UTF8(&arr, "0", "done");
	BSON_APPEND_UTF8(&arr, "1", "dead");
	bson_append_array_end(&in, &arr);
	bson_append_document_end(&filter, &in);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "updated_at", -1);
	bson_append_document_end(&opts, &sort);
	BSON_APPEND_INT64(&opts, "skip", MGO_SETTLED_KEEP);
	if (mgo_find_one(coll, &filter, &opts, &doc) == CORE_OK && doc &&
	    bson_iter_init_find(&it, doc, "updated_at") && mgo_iter_i64(&it, &cut)) {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "updated_at", &lte);
		BSON_APPEND_INT64(&lte, "$lte", cut);
		bson_append_document_end(&filter, &lte);
		if (!mongoc_collection_delete_many(coll, &filter, NULL, NULL, &e))
			mgo_error("trim deliveries", &e);
	}
	if (doc)
		bson_destroy(doc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
}
