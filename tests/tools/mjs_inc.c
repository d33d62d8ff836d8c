/* mjs_inc — whether a MongoDB-wire server's replies show a document as it was when the
 * operation ran, not as a later write left it (DESIGN §16 "the test servers do not lie",
 * issue 31 item 8: stock mongo-java-server 1.47.0 serialises the live stored document after
 * the collection's lock is released; tests/tools/mongo-java-server/BoarddMongoServer.java
 * hands out copies made inside the lock).
 *
 *   mjs_inc URI [CALLS [WAYS]]      (defaults: 2000 calls per connection, 16 connections)
 *   mjs_inc --test [CALLS [WAYS]]   the URI from BOARDD_TEST_MONGO_URI (the test's way)
 *
 * One document {_id: "n", n: 0, m: 0}. WAYS threads, each with its own connection, each send
 * CALLS times
 *   findAndModify {_id: "n"} {$inc: {n: 1, m: 1}} returning the new document
 * and, every fourth call, a find of the document as well. An honest atomic server returns each
 * value of n from 1 to CALLS*WAYS exactly once, with m equal to n, finds see m equal to n,
 * and n ends at CALLS*WAYS. Printed: values returned twice or more, values never returned,
 * replies with m != n (torn), and the final n.
 *
 * Exit: 0 honest; 1 not (the figures say how); 2 usage or a driver error. With --test
 * (tests/tools/meson.build, suite mongo): no BOARDD_TEST_MONGO_URI skips (77; fails when
 * CI=true); on FerretDB, whose updates are not atomic at all (mongo_race.c), it skips (77).
 * The database (boardd_mjsinc_<pid>) is dropped. */
#include "tests/common/mongo_probe.h"

#include <mongoc/mongoc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_WAYS 64
#define PROG "mjs_inc"

struct run {
	mongoc_client_pool_t *pool;
	char db[64];
	int calls, ways;
	pthread_barrier_t start;
	int64_t *got;   /* [ways * calls]: the n each call returned (-1: none) */
	int torn;       /* replies (findAndModify or find) with m != n, under mu */
	int errors;     /* driver errors, under mu */
	pthread_mutex_t mu;
};

struct worker {
	struct run *r;
	int id;
};

static bool get_nm(const bson_t *doc, int64_t *n, int64_t *m)
{
	bson_iter_t it;

	if (!bson_iter_init_find(&it, doc, "n") || !BSON_ITER_HOLDS_NUMBER(&it))
		return false;
	*n = bson_iter_as_int64(&it);
	if (!bson_iter_init_find(&it, doc, "m") || !BSON_ITER_HOLDS_NUMBER(&it))
		return false;
	*m = bson_iter_as_int64(&it);
	return true;
}

static void note_error(struct run *r, const char *what, const char *msg)
{
	pthread_mutex_lock(&r->mu);
	if (r->errors++ < 5)
		fprintf(stderr, "mjs_inc: %s: %s\n", what, msg);
	pthread_mutex_unlock(&r->mu);
}

static void note_torn(struct run *r, int64_t n, int64_t m)
{
	pthread_mutex_lock(&r->mu);
	if (r->torn++ < 3)
		fprintf(stderr, "mjs_inc: a reply showed n=%lld m=%lld\n", (long long)n, (long long)m);
	pthread_mutex_unlock(&r->mu);
}

/* One findAndModify $inc; the n it returned, or -1. */
static int64_t inc_once(struct run *r, mongoc_collection_t *coll)
{
	mongoc_find_and_modify_opts_t *o = mongoc_find_and_modify_opts_new();
	bson_t *q = BCON_NEW("_id", BCON_UTF8("n"));
	bson_t *u = BCON_NEW("$inc", "{", "n", BCON_INT64(1), "m", BCON_INT64(1), "}");
	bson_t reply, value;
	bson_iter_t it;
	bson_error_t err;
	int64_t n = -1, m = -1;
	const uint8_t *data;
	uint32_t len;

	mongoc_find_and_modify_opts_set_update(o, u);
	mongoc_find_and_modify_opts_set_flags(o, MONGOC_FIND_AND_MODIFY_RETURN_NEW);
	if (!mongoc_collection_find_and_modify_with_opts(coll, q, o, &reply, &err)) {
		note_error(r, "findAndModify", err.message);
	} else if (bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &len, &data);
		if (bson_init_static(&value, data, len) && get_nm(&value, &n, &m)) {
			if (m != n)
				note_torn(r, n, m);
		} else {
			n = -1;
			note_error(r, "findAndModify", "no n/m in the value");
		}
	} else {
		note_error(r, "findAndModify", "no value in the reply");
	}
	bson_destroy(&reply);
	bson_destroy(q);
	bson_destroy(u);
	mongoc_find_and_modify_opts_destroy(o);
	return n;
}

static void find_once(struct run *r, mongoc_collection_t *coll)
{
	bson_t *f = BCON_NEW("_id", BCON_UTF8("n"));
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, f, NULL, NULL);
	const bson_t *doc;
	bson_error_t err;
	int64_t n, m;

	if (mongoc_cursor_next(cur, &doc)) {
		if (!get_nm(doc, &n, &m))
			note_error(r, "find", "no n/m in the document");
		else if (m != n)
			note_torn(r, n, m);
	} else if (mongoc_cursor_error(cur, &err)) {
		note_error(r, "find", err.message);
	} else {
		note_error(r, "find", "no document");
	}
	mongoc_cursor_destroy(cur);
	bson_destroy(f);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	mongoc_client_t *c = mongoc_client_pool_pop(r->pool);
	mongoc_collection_t *coll = mongoc_client_get_collection(c, r->db, "counter");
	int i;

	pthread_barrier_wait(&r->start);
	for (i = 0; i < r->calls; i++) {
		r->got[(size_t)w->id * (size_t)r->calls + (size_t)i] = inc_once(r, coll);
		if (i % 4 == 3)
			find_once(r, coll);
	}
	mongoc_collection_destroy(coll);
	mongoc_client_pool_push(r->pool, c);
	return NULL;
}

static int64_t final_n(mongoc_collection_t *coll)
{
	bson_t *f = BCON_NEW("_id", BCON_UTF8("n"));
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, f, NULL, NULL);
	const bson_t *doc;
	int64_t n = -1, m = -1;

	if (mongoc_cursor_next(cur, &doc))
		get_nm(doc, &n, &m);
	mongoc_cursor_destroy(cur);
	bson_destroy(f);
	return n;
}

int main(int argc, char **argv)
{
	struct run r = {0};
	struct worker w[MAX_WAYS];
	pthread_t t[MAX_WAYS];
	mongoc_uri_t *uri;
	mongoc_client_t *c;
	mongoc_collection_t *coll;
	bson_error_t err;
	bson_t reply;
	int i, code = 2;
	int64_t total, dup = 0, missing = 0, out_of_range = 0, n_end = -1;
	unsigned char *seen = NULL;
	bool test;
	const char *uri_s;

	code = mongo_probe_uri(argc, argv, "usage: mjs_inc URI|--test [CALLS [WAYS]]",
			       &test, &uri_s);
	if (code >= 0)
		return code;
	code = 2;
	r.calls = argc > 2 ? atoi(argv[2]) : 2000;
	r.ways = argc > 3 ? atoi(argv[3]) : 16;
	if (r.calls < 1 || r.ways < 2 || r.ways > MAX_WAYS) {
		fprintf(stderr, "mjs_inc: CALLS >= 1, 2 <= WAYS <= %d\n", MAX_WAYS);
		return 2;
	}
	total = (int64_t)r.calls * r.ways;
	r.pool = mongo_probe_pool(PROG, uri_s, r.ways + 1, &uri);
	if (!r.pool)
		return 2;
	snprintf(r.db, sizeof r.db, "boardd_mjsinc_%ld", (long)getpid());
	r.got = calloc((size_t)total, sizeof *r.got);
	seen = calloc((size_t)total + 1, 1);
	pthread_mutex_init(&r.mu, NULL);
	pthread_barrier_init(&r.start, NULL, (unsigned)r.ways);

	c = mongoc_client_pool_pop(r.pool);
	coll = mongoc_client_get_collection(c, r.db, "counter");
	if (test && mongo_probe_is_ferretdb(PROG, c)) {
		printf("SKIP: FerretDB 1.24's single-document updates are not atomic at all "
		       "(mongo_race); this checks mongo-java-server's replies\n");
		code = 77;
		goto out;
	}
	{
		bson_t *doc = BCON_NEW("_id", BCON_UTF8("n"), "n", BCON_INT64(0), "m", BCON_INT64(0));
		bool ok = mongoc_collection_insert_one(coll, doc, NULL, NULL, &err);

		bson_destroy(doc);
		if (!ok) {
			fprintf(stderr, "mjs_inc: insert: %s\n", err.message);
			goto out;
		}
	}
	for (i = 0; i < r.ways; i++) {
		w[i] = (struct worker){&r, i};
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	}
	for (i = 0; i < r.ways; i++)
		pthread_join(t[i], NULL);
	if (r.errors) {
		fprintf(stderr, "mjs_inc: %d driver errors\n", r.errors);
		goto out;
	}
	for (i = 0; i < total; i++) {
		int64_t v = r.got[i];

		if (v < 1 || v > total)
			out_of_range++;
		else if (seen[v])
			dup++;
		else
			seen[v] = 1;
	}
	for (i = 1; i <= total; i++)
		missing += !seen[i];
	n_end = final_n(coll);
	printf("mjs_inc: %d connections x %d findAndModify $inc: %lld values returned more than "
	       "once, %lld never returned, %lld out of range, %d torn replies (m != n); "
	       "n ends at %lld of %lld\n",
	       r.ways, r.calls, (long long)dup, (long long)missing, (long long)out_of_range,
	       r.torn, (long long)n_end, (long long)total);
	code = dup || missing || out_of_range || r.torn || n_end != total ? 1 : 0;
out:
	mongo_probe_command(PROG, c, r.db, BCON_NEW("dropDatabase", BCON_INT32(1)), &reply);
	bson_destroy(&reply);
	mongoc_collection_destroy(coll);
	mongoc_client_pool_push(r.pool, c);
	mongoc_client_pool_destroy(r.pool);
	mongoc_uri_destroy(uri);
	pthread_barrier_destroy(&r.start);
	pthread_mutex_destroy(&r.mu);
	free(r.got);
	free(seen);
	mongoc_cleanup();
	return code;
}
