/* Idempotency keys on the Mongo twin (DESIGN §18): collection `idempotency`, one document per
 * scoped key, shared by every replica:
 *   {_id: key, fp, status (0: pending), body, location, nonce, pending_until, expires_at}
 * (times: the server clock, ms). The unique _id decides between requests racing on one key,
 * on one replica or several: one inserts the pending record, the others find it and wait
 * (store_idem_begin), then answer what it recorded, or IDEMPOTENCY_KEY_IN_FLIGHT. A pending
 * record whose pending_until passed was left by a crash (or a request far slower than any
 * write): the next request takes it over with a conditional update on its nonce, so of two
 * doing so at once one wins. There are no transactions (DESIGN §9): the write and the record
 * are two steps, and docs/design.md says what the window between them costs. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_ops.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define IDEM_COLL "idempotency"

static atomic_uint sweeps;

static bool nonce_new(char *out)
{
	unsigned char r[16];
	size_t i;

	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return false;
	for (i = 0; i < sizeof r; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	return true;
}

static const char *doc_str(const bson_t *d, const char *key)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, d, key) && BSON_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return NULL;
}

static int64_t doc_int(const bson_t *d, const char *key)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, d, key) && BSON_ITER_HOLDS_NUMBER(&it))
		return bson_iter_as_int64(&it);
	return 0;
}

/* The fields every reservation sets. */
static void pending_fields(bson_t *d, const struct store_idem *k, int64_t now)
{
	BSON_APPEND_UTF8(d, "fp", k->fp);
	BSON_APPEND_INT32(d, "status", 0);
	BSON_APPEND_UTF8(d, "body", "");
	BSON_APPEND_UTF8(d, "location", "");
	BSON_APPEND_UTF8(d, "nonce", k->nonce);
	BSON_APPEND_INT64(d, "pending_until", now + STORE_IDEM_PENDING_MS);
	BSON_APPEND_INT64(d, "expires_at", now + STORE_IDEM_TTL_MS);
}

/* What the stored document says to request k. */
static enum core_rc judge(const bson_t *d, struct store_idem *k)
{
	const char *fp = doc_str(d, "fp"), *body = doc_str(d, "body"), *loc = doc_str(d, "location");
	int64_t status = doc_int(d, "status");

	if (!fp || !body || !loc)
		return CORE_ERR_STORE_UNAVAILABLE; /* a foreign or torn document: never guess */
	if (strcmp(fp, k->fp) != 0)
		return CORE_ERR_IDEMPOTENCY_KEY_REUSED;
	if (status == 0) {
		k->state = STORE_IDEM_PENDING;
		return CORE_OK;
	}
	k->body = strdup(body);
	k->location = strdup(loc);
	if (!k->body || !k->location) {
		store_idem_release(k);
		return CORE_ERR_NOMEM;
	}
	k->state = STORE_IDEM_DONE;
	k->status = (int)status;
	return CORE_OK;
}

static enum core_rc mgo_idem_begin(struct store *st, struct store_idem *k)
{
	struct mgo *m = mgo_of(st);
	struct mgo_conn c;
	mongoc_collection_t *coll = NULL;
	bson_t *doc = NULL;
	bson_error_t e;
	enum core_rc rc = mgo_conn_open(m, &c);
	int attempt;

	if (rc != CORE_OK)
		return rc;
	coll = mongoc_client_get_collection(c.client, m->db, IDEM_COLL);
	if (!coll || !nonce_new(k->nonce)) {
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	rc = CORE_OK;
	k->state = STORE_IDEM_PENDING; /* contended past every attempt */
	for (attempt = 0; attempt < 4; attempt++) {
		bson_t ins = BSON_INITIALIZER, filter = BSON_INITIALIZER, upd = BSON_INITIALIZER, set;
		const char *old;
		bool took;

		BSON_APPEND_UTF8(&ins, "_id", k->key);
		pending_fields(&ins, k, c.now);
		took = mongoc_collection_insert_one(coll, &ins, NULL, NULL, &e);
		bson_destroy(&ins);
		if (took) {
			k->state = STORE_IDEM_NEW;
			break;
		}
		if (!mgo_error_is_dup(&e)) {
			rc = mgo_error("insert idempotency key", &e);
			break;
		}
		BSON_APPEND_UTF8(&filter, "_id", k->key);
		rc = mgo_find_one(coll, &filter, NULL, &doc);
		bson_destroy(&filter);
		if (rc != CORE_OK)
			break;
		if (!doc)
			continue; /* deleted since (an abort): insert again */
		if (doc_int(doc, "expires_at") > c.now &&
		    (doc_int(doc, "status") != 0 || doc_int(doc, "pending_until") > c.now)) {
			rc = judge(doc, k);
			break;
		}
		/* Expired, or a pending record left by a crash: take it over, if nobody else did
		 * since it was read (its nonce). */
		old = doc_str(doc, "nonce");
		bson_init(&filter);
		BSON_APPEND_UTF8(&filter, "_id", k->key);
		BSON_APPEND_UTF8(&filter, "nonce", old ? old : "");
		BSON_APPEND_DOCUMENT_BEGIN(&upd, "$set", &set);
		pending_fields(&set, k, c.now);
		bson_append_document_end(&upd, &set);
		bson_destroy(doc);
		doc = NULL;
		rc = mgo_find_modify(coll, &filter, &upd, &doc);
		bson_destroy(&filter);
		bson_destroy(&upd);
		if (rc != CORE_OK)
			break;
		if (doc) {
			k->state = STORE_IDEM_NEW;
			break;
		}
	}
out:
	if (doc)
		bson_destroy(doc);
	if (coll)
		mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

static enum core_rc mgo_idem_end(struct store *st, struct store_idem *k, int status,
				 const char *body, const char *location)
{
	struct mgo *m = mgo_of(st);
	struct mgo_conn c;
	mongoc_collection_t *coll = NULL;
	bson_t filter = BSON_INITIALIZER, upd = BSON_INITIALIZER, set;
	bson_error_t e;
	enum core_rc rc = mgo_conn_open(m, &c);

	if (rc != CORE_OK)
		goto out;
	coll = mongoc_client_get_collection(c.client, m->db, IDEM_COLL);
	if (!coll) {
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	BSON_APPEND_UTF8(&filter, "_id", k->key);
	BSON_APPEND_UTF8(&filter, "nonce", k->nonce);
	BSON_APPEND_DOCUMENT_BEGIN(&upd, "$set", &set);
	BSON_APPEND_INT32(&set, "status", status);
	BSON_APPEND_UTF8(&set, "body", body);
	BSON_APPEND_UTF8(&set, "location", location ? location : "");
	BSON_APPEND_INT64(&set, "pending_until", 0);
	BSON_APPEND_INT64(&set, "expires_at", c.now + STORE_IDEM_TTL_MS);
	bson_append_document_end(&upd, &set);
	/* Matching nothing means another request took the reservation over (this one outlived
	 * STORE_IDEM_PENDING_MS): that one's answer is recorded instead. */
	if (!mongoc_collection_update_one(coll, &filter, &upd, NULL, NULL, &e)) {
		rc = mgo_error("record idempotency key", &e);
		goto out;
	}
	/* Now and then, the expired records go (one delete per 256 answers of this process). */
	if ((atomic_fetch_add(&sweeps, 1) & 255) == 0) {
		bson_t old = BSON_INITIALIZER, lt;

		BSON_APPEND_DOCUMENT_BEGIN(&old, "expires_at", &lt);
		BSON_APPEND_INT64(&lt, "$lt", c.now);
		bson_append_document_end(&old, &lt);
		(void)mongoc_collection_delete_many(coll, &old, NULL, NULL, &e);
		bson_destroy(&old);
	}
out:
	bson_destroy(&filter);
	bson_destroy(&upd);
	if (coll)
		mongoc_collection_destroy(coll);
	if (c.m)
		mgo_conn_close(&c);
	return rc;
}

static void mgo_idem_abort(struct store *st, struct store_idem *k)
{
	struct mgo *m = mgo_of(st);
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t filter = BSON_INITIALIZER;
	bson_error_t e;

	if (mgo_conn_open(m, &c) != CORE_OK)
		return; /* the reservation expires after STORE_IDEM_PENDING_MS */
	coll = mongoc_client_get_collection(c.client, m->db, IDEM_COLL);
	BSON_APPEND_UTF8(&filter, "_id", k->key);
	BSON_APPEND_UTF8(&filter, "nonce", k->nonce);
	BSON_APPEND_INT32(&filter, "status", 0);
	if (coll && !mongoc_collection_delete_one(coll, &filter, NULL, NULL, &e))
		(void)mgo_error("drop idempotency key", &e);
	bson_destroy(&filter);
	if (coll)
		mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
}

const struct store_idem_ops mgo_idem_ops = {
	.begin = mgo_idem_begin,
	.end = mgo_idem_end,
	.abort = mgo_idem_abort,
	.end_retries = true,
};
