/* Subscriptions on the Mongo twin (DESIGN §14): put, get, list, delete, the column rename
 * carrying them along, their stored form (JSON <-> BSON, shared with mongo_deliveries.c), and
 * the per-process cache the matching reads (mongo_effect.c).
 *
 * Subscriptions are read through the cache, refreshed every MGO_SUBS_TTL_MS and dropped by
 * this process's own PUT/DELETE: another replica's change is seen within that bound. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MGO_SUBS_TTL_MS 1000

mongoc_collection_t *mgo_effect_coll(struct mgo_conn *c, const char *name)
{
	return mongoc_client_get_collection(c->client, c->m->db, name);
}

/* ---- JSON <-> BSON of the stored form ---- */

bson_t *mgo_effect_json_to_bson(json_t *j, const char *id)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	bson_error_t e;
	bson_t *b = text ? bson_new_from_json((const uint8_t *)text, -1, &e) : NULL;
	bson_t *out = NULL;

	free(text);
	if (b && id) {
		out = bson_new();
		if (out && (!BSON_APPEND_UTF8(out, "_id", id) || !bson_concat(out, b))) {
			bson_destroy(out);
			out = NULL;
		}
		bson_destroy(b);
		return out;
	}
	return b;
}

static json_t *bson_to_json(const bson_t *doc)
{
	char *text = bson_as_relaxed_extended_json(doc, NULL);
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;

	bson_free(text);
	return j;
}

enum core_rc mgo_sub_from_bson(const bson_t *doc, struct store_sub **out)
{
	json_t *j = bson_to_json(doc);
	enum core_rc rc = j ? store_sub_from_json(j, out) : CORE_ERR_INTERNAL;

	json_decref(j);
	return rc == CORE_ERR_BAD_REQUEST ? CORE_ERR_INTERNAL : rc;
}

enum core_rc mgo_dlv_from_bson(const bson_t *doc, struct store_delivery **out)
{
	json_t *j = bson_to_json(doc);
	enum core_rc rc = j ? store_delivery_from_json(j, out) : CORE_ERR_INTERNAL;

	json_decref(j);
	return rc == CORE_ERR_BAD_REQUEST ? CORE_ERR_INTERNAL : rc;
}

void mgo_sub_id(char *buf, size_t len, const char *board, const char *name)
{
	snprintf(buf, len, "%s/%s", board, name);
}

/* ---- the subscriptions cache ---- */

struct mgo_subs_ent {
	char *board;
	struct store_sub **v;
	size_t n;
	int64_t at; /* CLOCK_MONOTONIC ms of the read */
};

void mgo_subs_cache_drop(struct mgo *m, const char *board)
{
	size_t i;

	pthread_mutex_lock(&m->subs_mu);
	for (i = 0; i < m->n_subs_cache; i++)
		if (!board || strcmp(m->subs_cache[i].board, board) == 0)
			m->subs_cache[i].at = INT64_MIN / 2;
	pthread_mutex_unlock(&m->subs_mu);
}

void mgo_subs_cache_release(struct mgo *m)
{
	size_t i;

	for (i = 0; i < m->n_subs_cache; i++) {
		free(m->subs_cache[i].board);
		store_subs_free(m->subs_cache[i].v, m->subs_cache[i].n);
	}
	free(m->subs_cache);
	m->subs_cache = NULL;
	m->n_subs_cache = 0;
}

struct subs_collect {
	struct store_sub **v;
	size_t n, cap;
	bool enabled_only;
};

static enum core_rc subs_collect_one(void *ctx, const bson_t *doc)
{
	struct subs_collect *sc = ctx;
	struct store_sub *s, **nv;
	enum core_rc rc = mgo_sub_from_bson(doc, &s);

	if (rc != CORE_OK)
		return rc;
	if (sc->enabled_only && !s->enabled) {
		store_sub_free(s);
		return CORE_OK;
	}
	if (sc->n == sc->cap) {
		nv = realloc(sc->v, (sc->cap ? sc->cap * 2 : 4) * sizeof(*nv));
		if (!nv) {
			store_sub_free(s);
			return CORE_ERR_NOMEM;
		}
		sc->v = nv;
		sc->cap = sc->cap ? sc->cap * 2 : 4;
	}
	sc->v[sc->n++] = s;
	return CORE_OK;
}

static enum core_rc subs_query(struct mgo_conn *c, const char *board, bool enabled_only,
			       struct store_sub ***out, size_t *n)
{
	mongoc_collection_t *coll = mgo_effect_coll(c, "subscriptions");
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort;
	struct subs_collect sc = {.enabled_only = enabled_only};
	enum core_rc rc;

	BSON_APPEND_UTF8(&filter, "board", board);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "name", 1);
	bson_append_document_end(&opts, &sort);
	rc = mgo_find_each(coll, &filter, &opts, subs_collect_one, &sc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mongoc_collection_destroy(coll);
	if (rc != CORE_OK) {
		store_subs_free(sc.v, sc.n);
		return rc;
	}
	*out = sc.v;
	*n = sc.n;
	return CORE_OK;
}

/* The enabled subscriptions of board (copies; caller frees with store_subs_free). */
enum core_rc mgo_board_subs(struct mgo_conn *c, const char *board, struct store_sub ***out,
			       size_t *n)
{
	struct mgo *m = c->m;
	struct store_sub **v = NULL;
	size_t k = 0, i;
	int64_t now = mgo_mono_ms();
	enum core_rc rc;
	struct mgo_subs_ent *e = NULL, *ne;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&m->subs_mu);
	for (i = 0; i < m->n_subs_cache; i++)
		if (strcmp(m->subs_cache[i].board, board) == 0)
			e = &m->subs_cache[i];
	if (e && now - e->at < MGO_SUBS_TTL_MS) {
		size_t want = e->n; /* read under subs_mu: another thread may refill e after it */

		v = calloc(want + 1, sizeof(*v));
		for (i = 0; v && i < want; i++)
			if ((v[k] = store_sub_dup(e->v[i])))
				k++;
		pthread_mutex_unlock(&m->subs_mu);
		if (!v || k != want) {
			store_subs_free(v, k);
			return CORE_ERR_NOMEM;
		}
		*out = v;
		*n = k;
		return CORE_OK;
	}
	pthread_mutex_unlock(&m->subs_mu);
	rc = subs_query(c, board, true, &v, &k);
	if (rc != CORE_OK)
		return rc;
	/* Cache a copy; a failure to cache only costs the next write a read. */
	pthread_mutex_lock(&m->subs_mu);
	e = NULL;
	for (i = 0; i < m->n_subs_cache; i++)
		if (strcmp(m->subs_cache[i].board, board) == 0)
			e = &m->subs_cache[i];
	if (!e && (ne = realloc(m->subs_cache, (m->n_subs_cache + 1) * sizeof(*ne)))) {
		m->subs_cache = ne;
		e = &ne[m->n_subs_cache];
		memset(e, 0, sizeof(*e));
		if ((e->board = strdup(board)))
			m->n_subs_cache++;
		else
			e = NULL;
	}
	if (e) {
		struct store_sub **cv = calloc(k + 1, sizeof(*cv));
		size_t ck = 0;

		for (i = 0; cv && i < k; i++)
			if ((cv[ck] = store_sub_dup(v[i])))
				ck++;
		if (cv && ck == k) {
			store_subs_free(e->v, e->n);
			e->v = cv;
			e->n = ck;
			e->at = now;
		} else {
			store_subs_free(cv, ck);
		}
	}
	pthread_mutex_unlock(&m->subs_mu);
	*out = v;
	*n = k;
	return CORE_OK;
}

/* ---- subscriptions ---- */

enum core_rc mgo_sub_put(struct store *st, const struct store_sub *s, const char *secret_if_new,
			 bool *created, struct store_sub **out)
{
	struct mgo *m = mgo_of(st);
	struct mgo_conn c;
	struct core_board b = {0};
	struct store_sub *old = NULL, *now = NULL;
	mongoc_collection_t *coll = NULL;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, *doc = NULL, *found = NULL;
	char id[2 * CORE_NAME_MAX + 2];
	bson_error_t e;
	json_t *j = NULL;
	enum core_rc rc = mgo_conn_open(m, &c);

	if (rc != CORE_OK)
		return rc;
	coll = mgo_effect_coll(&c, "subscriptions");
	rc = mgo_board_read(&c, s->board, &b);
	if (rc == CORE_OK)
		rc = core_sub_filter_columns_check(&b, &s->on, NULL, 0);
	mgo_sub_id(id, sizeof id, s->board, s->name);
	if (rc == CORE_OK)
		rc = mgo_find_by_id(coll, id, &found);
	if (rc == CORE_OK && found)
		rc = mgo_sub_from_bson(found, &old);
	if (rc == CORE_OK) {
		now = store_sub_put_merge(s, old, secret_if_new, c.now);
		rc = now ? CORE_OK : CORE_ERR_NOMEM;
	}
	if (rc == CORE_OK) {
		j = store_sub_to_json(now, true);
		doc = mgo_effect_json_to_bson(j, id);
		rc = doc ? CORE_OK : CORE_ERR_NOMEM;
	}
	if (rc == CORE_OK) {
		BSON_APPEND_UTF8(&filter, "_id", id);
		BSON_APPEND_BOOL(&opts, "upsert", true);
		if (!mongoc_collection_replace_one(coll, &filter, doc, &opts, NULL, &e))
			rc = mgo_error("put subscription", &e);
	}
	mgo_subs_cache_drop(m, s->board);
	if (rc == CORE_OK) {
		*created = !old;
		*out = now;
		now = NULL;
	}
	json_decref(j);
	if (doc)
		bson_destroy(doc);
	if (found)
		bson_destroy(found);
	bson_destroy(&opts);
	bson_destroy(&filter);
	store_sub_free(old);
	store_sub_free(now);
	core_board_release(&b);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_sub_get(struct store *st, const char *board, const char *name,
			 struct store_sub **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t *doc = NULL;
	char id[2 * CORE_NAME_MAX + 2];
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = mgo_effect_coll(&c, "subscriptions");
	mgo_sub_id(id, sizeof id, board, name);
	rc = mgo_find_by_id(coll, id, &doc);
	if (rc == CORE_OK)
		rc = doc ? mgo_sub_from_bson(doc, out) : CORE_ERR_NOT_FOUND;
	if (doc)
		bson_destroy(doc);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_subs_column_rename(struct mgo_conn *c, const char *board, const char *from,
				    const char *to)
{
	mongoc_collection_t *coll = mgo_effect_coll(c, "subscriptions");
	struct store_sub **v = NULL;
	size_t n = 0, i;
	enum core_rc rc = subs_query(c, board, false, &v, &n);

	for (i = 0; rc == CORE_OK && i < n; i++) {
		bson_t filter = BSON_INITIALIZER, *doc = NULL;
		char id[2 * CORE_NAME_MAX + 2];
		bool changed = false;
		bson_error_t e;
		json_t *j = NULL;

		rc = core_sub_filter_column_rename(&v[i]->on, from, to, &changed);
		if (rc == CORE_OK && changed) {
			v[i]->updated_at = c->now;
			mgo_sub_id(id, sizeof id, v[i]->board, v[i]->name);
			j = store_sub_to_json(v[i], true);
			doc = j ? mgo_effect_json_to_bson(j, id) : NULL;
			rc = doc ? CORE_OK : CORE_ERR_NOMEM;
			BSON_APPEND_UTF8(&filter, "_id", id);
			/* Replaced whole, as sub_put writes it; one deleted meanwhile stays deleted. */
			if (rc == CORE_OK &&
			    !mongoc_collection_replace_one(coll, &filter, doc, NULL, NULL, &e))
				rc = mgo_error("rename a column in a subscription", &e);
		}
		json_decref(j);
		if (doc)
			bson_destroy(doc);
		bson_destroy(&filter);
	}
	mgo_subs_cache_drop(c->m, board);
	store_subs_free(v, n);
	mongoc_collection_destroy(coll);
	return rc;
}

enum core_rc mgo_sub_list(struct store *st, const char *board, struct store_sub ***out, size_t *n)
{
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	rc = subs_query(&c, board, false, out, n);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_sub_delete(struct store *st, const char *board, const char *name)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t filter = BSON_INITIALIZER, reply;
	bson_iter_t it;
	char id[2 * CORE_NAME_MAX + 2];
	bson_error_t e;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = mgo_effect_coll(&c, "subscriptions");
	mgo_sub_id(id, sizeof id, board, name);
	BSON_APPEND_UTF8(&filter, "_id", id);
	if (!mongoc_collection_delete_one(coll, &filter, NULL, &reply, &e))
		rc = mgo_error("delete subscription", &e);
	else if (!bson_iter_init_find(&it, &reply, "deletedCount") || bson_iter_as_int64(&it) < 1)
		rc = CORE_ERR_NOT_FOUND;
	bson_destroy(&reply);
	mgo_subs_cache_drop(c.m, board);
	bson_destroy(&filter);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}
