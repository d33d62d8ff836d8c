/* Driver plumbing of the Mongo twin: pooled connections, the one place a bson_error_t becomes
 * an enum core_rc, and thin find / findAndModify / counter helpers. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_cas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum core_rc mgo_conn_open(struct mgo *m, struct mgo_conn *c)
{
	enum core_rc rc = mgo_conn_open_bare(m, c);

	if (rc == CORE_OK)
		c->now = store_now(&m->base);
	return rc;
}

static void client_free(struct mgo *m, struct mgo_client *mc)
{
	mongoc_collection_destroy(mc->counters);
	mongoc_collection_destroy(mc->boards);
	mongoc_collection_destroy(mc->events);
	mongoc_collection_destroy(mc->runs);
	mongoc_collection_destroy(mc->cards);
	if (mc->client)
		mongoc_client_pool_push(m->pool, mc->client);
	free(mc);
}

/* An idle client of ours, or a new one from the pool (which blocks while the pool is
 * exhausted) with its collections made once: they copy the client's read and write
 * concerns, which is work no op needs to repeat. */
static struct mgo_client *client_get(struct mgo *m)
{
	struct mgo_client *mc;

	pthread_mutex_lock(&m->conn_mu);
	mc = m->clients;
	if (mc)
		m->clients = mc->next;
	pthread_mutex_unlock(&m->conn_mu);
	if (mc)
		return mc;
	if (!(mc = calloc(1, sizeof(*mc))))
		return NULL;
	mc->client = mongoc_client_pool_pop(m->pool);
	if (mc->client) {
		mc->cards = mongoc_client_get_collection(mc->client, m->db, "cards");
		mc->runs = mongoc_client_get_collection(mc->client, m->db, "runs");
		mc->events = mongoc_client_get_collection(mc->client, m->db, "events");
		mc->boards = mongoc_client_get_collection(mc->client, m->db, "boards");
		mc->counters = mongoc_client_get_collection(mc->client, m->db, "counters");
	}
	if (!mc->client || !mc->cards || !mc->runs || !mc->events || !mc->boards ||
	    !mc->counters) {
		client_free(m, mc);
		return NULL;
	}
	return mc;
}

void mgo_clients_release(struct mgo *m)
{
	struct mgo_client *mc;

	while ((mc = m->clients)) {
		m->clients = mc->next;
		client_free(m, mc);
	}
}

enum core_rc mgo_conn_open_bare(struct mgo *m, struct mgo_conn *c)
{
	enum core_rc rc;

	memset(c, 0, sizeof(*c));
	c->m = m;
	c->actor = (struct mgo_actor){.name = ""};
	/* Not while the database is held unreachable: at once, not after a server selection. */
	rc = mgo_breaker_enter(m, &c->brk_gen);
	if (rc != CORE_OK)
		return rc;
	c->mc = client_get(m);
	if (!c->mc)
		return CORE_ERR_NOMEM;
	c->client = c->mc->client;
	c->cards = c->mc->cards;
	c->runs = c->mc->runs;
	c->events = c->mc->events;
	c->boards = c->mc->boards;
	c->counters = c->mc->counters;
	return CORE_OK;
}

void mgo_conn_close(struct mgo_conn *c)
{
	struct mgo *m = c->m;

	if (!m)
		return;
	mgo_breaker_leave(m, c->brk_gen);
	if (c->mc) {
		pthread_mutex_lock(&m->conn_mu);
		c->mc->next = m->clients;
		m->clients = c->mc;
		pthread_mutex_unlock(&m->conn_mu);
	}
	memset(c, 0, sizeof(*c));
}

bool mgo_error_is_dup(const bson_error_t *e)
{
	return e->code == 11000 || e->code == 11001;
}

enum core_rc mgo_error(const char *what, const bson_error_t *e)
{
	if (mgo_error_is_dup(e))
		return CORE_ERR_ALREADY_EXISTS;
	/* The driver's words are for the operator's log only; the client sees 503. */
	mgo_breaker_note(what, e);
	fprintf(stderr, "boardd: mongo: %s: %s (domain %u, code %u)\n", what, e->message,
		e->domain, e->code);
	return CORE_ERR_STORE_UNAVAILABLE;
}

enum core_rc mgo_find_one(mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
			  bson_t **doc)
{
	mongoc_cursor_t *cur;
	const bson_t *d;
	bson_error_t e;
	bson_t o = BSON_INITIALIZER;
	enum core_rc rc = CORE_OK;

	*doc = NULL;
	if (mgo_breaker_noted()) {
		bson_destroy(&o);
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	if (opts)
		bson_copy_to_excluding_noinit(opts, &o, "limit", NULL);
	BSON_APPEND_INT64(&o, "limit", 1);
	cur = mongoc_collection_find_with_opts(coll, filter, &o, NULL);
	if (mongoc_cursor_next(cur, &d)) {
		*doc = bson_copy(d);
		if (!*doc)
			rc = CORE_ERR_NOMEM;
	} else if (mongoc_cursor_error(cur, &e)) {
		rc = mgo_error("find", &e);
	}
	mongoc_cursor_destroy(cur);
	bson_destroy(&o);
	return rc;
}

enum core_rc mgo_find_modify(mongoc_collection_t *coll, const bson_t *filter,
			     const bson_t *update, bson_t **doc)
{
	return mgo_find_modify_sort(coll, filter, NULL, update, doc);
}

enum core_rc mgo_find_modify_sort(mongoc_collection_t *coll, const bson_t *filter,
				  const bson_t *sort, const bson_t *update, bson_t **doc)
{
	mongoc_find_and_modify_opts_t *opts = mongoc_find_and_modify_opts_new();
	bson_iter_t it;
	bson_error_t e;
	bson_t reply;
	enum core_rc rc = CORE_OK;

	*doc = NULL;
	if (!opts)
		return CORE_ERR_NOMEM;
	if (mgo_breaker_noted()) {
		mongoc_find_and_modify_opts_destroy(opts);
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	mongoc_find_and_modify_opts_set_update(opts, update);
	if (sort)
		mongoc_find_and_modify_opts_set_sort(opts, sort);
	mongoc_find_and_modify_opts_set_flags(opts, MONGOC_FIND_AND_MODIFY_RETURN_NEW);
	if (!mongoc_collection_find_and_modify_with_opts(coll, filter, opts, &reply, &e)) {
		rc = mgo_error("findAndModify", &e);
		goto out;
	}
	if (bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		const uint8_t *data;
		uint32_t len;

		bson_iter_document(&it, &len, &data);
		*doc = bson_new_from_data(data, len);
		if (!*doc)
			rc = CORE_ERR_NOMEM;
	}
out:
	bson_destroy(&reply);
	mongoc_find_and_modify_opts_destroy(opts);
	return rc;
}

enum core_rc mgo_find_each(mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
			   enum core_rc (*fn)(void *ctx, const bson_t *doc), void *ctx)
{
	mongoc_cursor_t *cur;
	const bson_t *d;
	bson_error_t e;
	enum core_rc rc = CORE_OK;

	if (mgo_breaker_noted())
		return CORE_ERR_STORE_UNAVAILABLE;
	cur = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
	while (rc == CORE_OK && mongoc_cursor_next(cur, &d))
		rc = fn(ctx, d);
	if (rc == CORE_OK && mongoc_cursor_error(cur, &e))
		rc = mgo_error("find", &e);
	mongoc_cursor_destroy(cur);
	return rc;
}

/* The counters collection's one findAndModify: UPDATE on the document FILTER names, upserted,
 * the new document back, taken in turns within this process where the server needs it
 * (counter_serial). OUT: *reply, always initialised: the caller destroys it. */
enum core_rc mgo_counter_fam(struct mgo_conn *c, const bson_t *filter, const bson_t *update,
			     bson_t *reply)
{
	mongoc_find_and_modify_opts_t *opts = mongoc_find_and_modify_opts_new();
	bson_error_t e;
	bool ok;

	if (!opts || mgo_breaker_noted()) {
		bson_init(reply);
		if (opts)
			mongoc_find_and_modify_opts_destroy(opts);
		return opts ? CORE_ERR_STORE_UNAVAILABLE : CORE_ERR_NOMEM;
	}
	mongoc_find_and_modify_opts_set_update(opts, update);
	/* The document as it was before: the pre-image is a copy the server makes inside the
	 * update's step, where a post-image may be serialised after the step and show a later
	 * writer's $inc too (mongo-java-server 1.47: two writers handed one value, one value
	 * handed to none). The caller adds its own increments. */
	mongoc_find_and_modify_opts_set_flags(opts, MONGOC_FIND_AND_MODIFY_UPSERT);
	if (c->m->counter_serial)
		pthread_mutex_lock(&c->m->counter_mu);
	ok = mongoc_collection_find_and_modify_with_opts(c->counters, filter, opts, reply, &e);
	if (c->m->counter_serial)
		pthread_mutex_unlock(&c->m->counter_mu);
	mongoc_find_and_modify_opts_destroy(opts);
	return ok ? CORE_OK : mgo_error("counter", &e);
}

bool mgo_counter_old(const bson_t *reply, const char *path, int64_t *v)
{
	bson_iter_t it, f;

	*v = 0;
	if (!bson_iter_init_find(&it, reply, "value"))
		return false;
	if (BSON_ITER_HOLDS_NULL(&it))
		return true; /* no document before: upserted */
	if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &f))
		return false;
	if (!bson_iter_find_descendant(&f, path, &f))
		return true; /* no such field before: 0 */
	return mgo_iter_i64(&f, v);
}

enum core_rc mgo_counter_add(struct mgo_conn *c, const char *name, int64_t n, int64_t *last)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, inc, reply;
	enum core_rc rc;

	*last = 0;
	BSON_APPEND_UTF8(&filter, "_id", name);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
	BSON_APPEND_INT64(&inc, "seq", n);
	bson_append_document_end(&update, &inc);
	rc = mgo_counter_fam(c, &filter, &update, &reply);
	/* A counter not there yet (upserted now) reads as 0. */
	if (rc == CORE_OK && !mgo_counter_old(&reply, "seq", last)) {
		fprintf(stderr, "boardd: mongo: counter %s: malformed reply\n", name);
		rc = CORE_ERR_STORE_UNAVAILABLE;
	}
	*last = rc == CORE_OK ? *last + n : 0;
	bson_destroy(&reply);
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

bool mgo_board_allowed(const char *board, const char *one, const char *const *many)
{
	return core_scope_allows(board, one, many);
}

enum core_rc mgo_find_by_id(mongoc_collection_t *coll, const char *id, bson_t **doc)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, proj;
	enum core_rc rc;

	BSON_APPEND_UTF8(&filter, "_id", id);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "outbox", 0);
	bson_append_document_end(&opts, &proj);
	rc = mgo_find_one(coll, &filter, &opts, doc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc;
}

struct mgo_actor mgo_actor_name(const struct store_actor *actor)
{
	struct mgo_actor a = {actor && actor->name ? actor->name : "", actor ? actor->epoch : 0};

	return a;
}
