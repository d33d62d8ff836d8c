/* Secrets of the Mongo twin (store_secret_get): collection `secrets`, one document
 * {_id: name, key: BinData(32)} per secret. The first replica to need one inserts fresh
 * random bytes; a duplicate-key answer means another replica won the race, and every replica
 * then reads the one document, so all of them hold the same bytes. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_ops.h"

#include <string.h>
#include <sys/random.h>

static enum core_rc secret_find(mongoc_collection_t *coll, const char *name, unsigned char *out)
{
	bson_t filter = BSON_INITIALIZER, *doc = NULL;
	bson_iter_t it;
	bson_subtype_t sub;
	const uint8_t *bin;
	uint32_t len = 0;
	enum core_rc rc;

	BSON_APPEND_UTF8(&filter, "_id", name);
	rc = mgo_find_one(coll, &filter, NULL, &doc);
	bson_destroy(&filter);
	if (rc != CORE_OK)
		return rc;
	if (!doc)
		return CORE_ERR_NOT_FOUND;
	rc = CORE_ERR_STORE_UNAVAILABLE; /* a foreign or torn document: never guess a key */
	if (bson_iter_init_find(&it, doc, "key") && BSON_ITER_HOLDS_BINARY(&it)) {
		bson_iter_binary(&it, &sub, &len, &bin);
		if (len == STORE_SECRET_LEN) {
			memcpy(out, bin, STORE_SECRET_LEN);
			rc = CORE_OK;
		}
	}
	bson_destroy(doc);
	return rc;
}

enum core_rc mgo_secret_get(struct store *st, const char *name, unsigned char *out)
{
	struct mgo *m = mgo_of(st);
	struct mgo_conn c;
	mongoc_collection_t *coll = NULL;
	unsigned char key[STORE_SECRET_LEN];
	bson_t doc = BSON_INITIALIZER;
	bson_error_t e;
	enum core_rc rc = mgo_conn_open_bare(m, &c);

	if (rc != CORE_OK)
		goto out;
	coll = mongoc_client_get_collection(c.client, m->db, "secrets");
	if (!coll) {
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	rc = secret_find(coll, name, out);
	if (rc != CORE_ERR_NOT_FOUND)
		goto out;
	if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key) {
		rc = CORE_ERR_INTERNAL;
		goto out;
	}
	BSON_APPEND_UTF8(&doc, "_id", name);
	BSON_APPEND_BINARY(&doc, "key", BSON_SUBTYPE_BINARY, key, sizeof key);
	if (!mongoc_collection_insert_one(coll, &doc, NULL, NULL, &e) && !mgo_error_is_dup(&e)) {
		rc = mgo_error("insert secret", &e);
		goto out;
	}
	rc = secret_find(coll, name, out); /* ours, or the one another replica inserted first */
	if (rc == CORE_ERR_NOT_FOUND)
		rc = CORE_ERR_STORE_UNAVAILABLE;
out:
	memset(key, 0, sizeof key);
	bson_destroy(&doc);
	if (coll)
		mongoc_collection_destroy(coll);
	if (c.m)
		mgo_conn_close(&c);
	return rc;
}
