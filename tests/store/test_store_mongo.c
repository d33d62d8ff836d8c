/* The Mongo twin's suite: the shared conformance body against a real MongoDB-wire server
 * (FerretDB 1.24 in tests/run.sh, MongoDB in production), each test on a fresh database
 * (boardd_test_<pid>_<n>, dropped afterwards), plus what only this twin has: the server
 * clock, the epoch floor, the missing-epoch refusal and the un-leased arms, the outbox, the
 * tail's hole rule, the events retention, and a database failure answered STORE_UNAVAILABLE.
 *
 * BOARDD_TEST_MONGO_URI names the server (mongodb://host:port/anything). Unset: the suite is
 * skipped locally (exit 77), but fails when CI=true: the Mongo suite must run in CI.
 * Tests that rely on single-document atomicity under concurrency detect FerretDB (buildInfo's
 * ferretdbVersion) and skip with the reason printed: its updates are not atomic. */
#include "store/mongo/mongo_db.h"
#include "tests/store/conformance.h"
#include "tests/store/test_store_mongo.h"

#include <check.h>
#include <pthread.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *base_uri;
static int db_seq;

/* ---- databases ---- */

/* base_uri with its database replaced by `db`; caller frees. */
static char *uri_with_db(const char *db, const char *extra_opts)
{
	const char *hosts = strstr(base_uri, "://");
	const char *slash, *q;
	char *out;

	ck_assert_ptr_nonnull(hosts);
	slash = strchr(hosts + 3, '/');
	q = strchr(hosts + 3, '?');
	if (!slash || (q && q < slash))
		slash = q ? q : base_uri + strlen(base_uri);
	q = strchr(slash, '?');
	ck_assert_int_gt(asprintf(&out, "%.*s/%s%s%s%s", (int)(slash - base_uri), base_uri, db,
				  q ? q : (extra_opts ? "?" : ""), q && extra_opts ? "&" : "",
				  extra_opts ? extra_opts : ""),
			 0);
	return out;
}

void db_name_new(char *buf, size_t len)
{
	snprintf(buf, len, "boardd_test_%ld_%d", (long)getpid(), ++db_seq);
}

static mongoc_client_t *raw_client(void)
{
	mongoc_client_t *c = mongoc_client_new(base_uri);

	ck_assert_ptr_nonnull(c);
	mongoc_client_set_error_api(c, MONGOC_ERROR_API_VERSION_2);
	return c;
}

static void db_drop(const char *db)
{
	mongoc_client_t *c = raw_client();
	mongoc_database_t *d = mongoc_client_get_database(c, db);

	mongoc_database_drop(d, NULL);
	mongoc_database_destroy(d);
	mongoc_client_destroy(c);
}

/* Open stores and the database each uses (a test may open a second store on one db). */
static struct {
	struct store *st;
	char db[64];
} opened[8];

struct store *open_db(const char *db, int64_t horizon_ms, const char *extra_opts)
{
	struct store_mongo_options o = {.unleased_horizon_ms = horizon_ms};

	return open_db_opts(db, &o, extra_opts);
}

struct store *open_db_opts(const char *db, const struct store_mongo_options *base,
			   const char *extra_opts)
{
	struct store_mongo_options o = *base;
	struct store *st = NULL;
	char err[256];
	char *uri = uri_with_db(db, extra_opts);
	enum core_rc rc;
	size_t i;

	o.uri = NULL; /* store_open: the spec's */
	rc = store_open(uri, &(struct store_open_options){.mongo = &o}, &st, err, sizeof(err));
	free(uri);
	ck_assert_msg(rc == CORE_OK, "open %s: %s: %s", db, core_rc_code(rc), err);
	for (i = 0; i < sizeof(opened) / sizeof(opened[0]); i++) {
		if (!opened[i].st) {
			opened[i].st = st;
			snprintf(opened[i].db, sizeof(opened[i].db), "%s", db);
			break;
		}
	}
	return st;
}

/* Closes st; drops its database unless another open store still uses it. */
void close_db(struct store *st)
{
	char db[64] = "";
	size_t i;
	bool shared = false;

	for (i = 0; i < sizeof(opened) / sizeof(opened[0]); i++)
		if (opened[i].st == st) {
			snprintf(db, sizeof(db), "%s", opened[i].db);
			opened[i].st = NULL;
		}
	store_close(st);
	for (i = 0; i < sizeof(opened) / sizeof(opened[0]); i++)
		shared = shared || (opened[i].st && strcmp(opened[i].db, db) == 0);
	if (db[0] && !shared)
		db_drop(db);
}

struct store *open_fresh(void)
{
	char db[64];

	db_name_new(db, sizeof(db));
	return open_db(db, 0, NULL);
}

static const char *db_of(struct store *st)
{
	size_t i;

	for (i = 0; i < sizeof(opened) / sizeof(opened[0]); i++)
		if (opened[i].st == st)
			return opened[i].db;
	ck_abort_msg("store not opened here");
	return NULL;
}

size_t raw_outbox_len(struct store *st, const char *coll, const char *id)
{
	mongoc_client_t *c = raw_client();
	mongoc_collection_t *col = mongoc_client_get_collection(c, db_of(st), coll);
	bson_t *f = BCON_NEW("_id", BCON_UTF8(id));
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, f, NULL, NULL);
	const bson_t *d;
	bson_iter_t it, ai;
	size_t n = 0;

	ck_assert_msg(mongoc_cursor_next(cur, &d), "no document %s in %s", id, coll);
	if (bson_iter_init_find(&it, d, "outbox") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &ai))
		while (bson_iter_next(&ai))
			n++;
	mongoc_cursor_destroy(cur);
	bson_destroy(f);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	return n;
}

/* Deletes the documents of a collection matching a JSON filter, behind boardd's back. */
void raw_delete_where(struct store *st, const char *coll, const char *filter_json)
{
	mongoc_client_t *c = raw_client();
	mongoc_collection_t *col = mongoc_client_get_collection(c, db_of(st), coll);
	bson_error_t e;
	bson_t *f = bson_new_from_json((const uint8_t *)filter_json, -1, &e);

	ck_assert_msg(f != NULL, "bad json %s", filter_json);
	ck_assert_msg(mongoc_collection_delete_many(col, f, NULL, NULL, &e), "%s", e.message);
	bson_destroy(f);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
}

/* How many documents of a collection match a JSON filter, behind boardd's back. */
int64_t raw_count(struct store *st, const char *coll, const char *filter_json)
{
	mongoc_client_t *c = raw_client();
	mongoc_collection_t *col = mongoc_client_get_collection(c, db_of(st), coll);
	bson_error_t e;
	bson_t *f = bson_new_from_json((const uint8_t *)filter_json, -1, &e);
	int64_t n;

	ck_assert_msg(f != NULL, "bad json %s", filter_json);
	n = mongoc_collection_count_documents(col, f, NULL, NULL, NULL, &e);
	ck_assert_msg(n >= 0, "count %s: %s", coll, e.message);
	bson_destroy(f);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	return n;
}

/* Runs a JSON update on card `id` of st's database behind boardd's back. */
void raw_update(struct store *st, const char *coll, const char *id, const char *json)
{
	mongoc_client_t *c = raw_client();
	mongoc_collection_t *col = mongoc_client_get_collection(c, db_of(st), coll);
	bson_error_t e;
	bson_t *u = bson_new_from_json((const uint8_t *)json, -1, &e);
	bson_t *f = BCON_NEW("_id", BCON_UTF8(id));
	bson_t reply;

	ck_assert_msg(u != NULL, "bad json %s", json);
	ck_assert_msg(mongoc_collection_update_one(col, f, u, NULL, &reply, &e), "%s", e.message);
	bson_destroy(&reply);
	bson_destroy(f);
	bson_destroy(u);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
}

struct raw_fast {
	mongoc_client_t *c;
	mongoc_collection_t *col;
};

struct raw_fast *raw_fast_open(struct store *st, const char *coll)
{
	struct raw_fast *r = calloc(1, sizeof(*r));
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1));
	bson_error_t e;

	ck_assert_ptr_nonnull(r);
	r->c = raw_client();
	r->col = mongoc_client_get_collection(r->c, db_of(st), coll);
	ck_assert_msg(mongoc_client_command_simple(r->c, "admin", ping, NULL, NULL, &e), "%s",
		      e.message);
	bson_destroy(ping);
	return r;
}

void raw_fast_update(struct raw_fast *r, const char *id, const char *json)
{
	bson_error_t e;
	bson_t *u = bson_new_from_json((const uint8_t *)json, -1, &e);
	bson_t *f = BCON_NEW("_id", BCON_UTF8(id));

	ck_assert_msg(u != NULL, "bad json %s", json);
	ck_assert_msg(mongoc_collection_update_one(r->col, f, u, NULL, NULL, &e), "%s", e.message);
	bson_destroy(f);
	bson_destroy(u);
}

void raw_fast_close(struct raw_fast *r)
{
	mongoc_collection_destroy(r->col);
	mongoc_client_destroy(r->c);
	free(r);
}

void raw_delete(struct store *st, const char *coll, const char *id)
{
	mongoc_client_t *c = raw_client();
	mongoc_collection_t *col = mongoc_client_get_collection(c, db_of(st), coll);
	bson_t *f = BCON_NEW("_id", BCON_UTF8(id));
	bson_error_t e;

	ck_assert_msg(mongoc_collection_delete_one(col, f, NULL, NULL, &e), "%s", e.message);
	bson_destroy(f);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
}

void raw_insert(struct store *st, const char *coll, const char *json)
{
	mongoc_client_t *c = raw_client();
	mongoc_collection_t *col = mongoc_client_get_collection(c, db_of(st), coll);
	bson_error_t e;
	bson_t *d = bson_new_from_json((const uint8_t *)json, -1, &e);

	ck_assert_msg(d != NULL, "bad json %s", json);
	ck_assert_msg(mongoc_collection_insert_one(col, d, NULL, NULL, &e), "%s", e.message);
	bson_destroy(d);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
}

/* The server's clock, read independently of the twin: hello.localTime. */
int64_t server_now(void)
{
	mongoc_client_t *c = raw_client();
	bson_t *cmd = BCON_NEW("hello", BCON_INT32(1));
	bson_t reply;
	bson_iter_t it;
	int64_t t = 0;

	ck_assert(mongoc_client_command_simple(c, "admin", cmd, NULL, &reply, NULL));
	ck_assert(bson_iter_init_find(&it, &reply, "localTime"));
	t = bson_iter_date_time(&it);
	bson_destroy(&reply);
	bson_destroy(cmd);
	mongoc_client_destroy(c);
	return t;
}

bool is_ferretdb(void)
{
	mongoc_client_t *c = raw_client();
	bson_t *cmd = BCON_NEW("buildInfo", BCON_INT32(1));
	bson_t reply;
	bson_iter_t it;
	bool yes;

	ck_assert(mongoc_client_command_simple(c, "admin", cmd, NULL, &reply, NULL));
	yes = bson_iter_init_find(&it, &reply, "ferretdbVersion") ||
	      bson_iter_init_find(&it, &reply, "ferretdb");
	bson_destroy(&reply);
	bson_destroy(cmd);
	mongoc_client_destroy(c);
	return yes;
}

/* For the conformance suite's race tests (ct_atomic). */
static bool server_atomic(const char **why)
{
	if (!is_ferretdb())
		return true;
	*why = "FerretDB 1.24 runs findAndModify as a read then a write, not atomically, so "
	       "concurrent claim-next calls could take one card twice (run it on MongoDB)";
	return false;
}

void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

void mongo_hold_hook(void *ctx, const char *what)
{
	struct mongo_hold *h = ctx;
	int i;

	if (strcmp(what, h->what) != 0 || !atomic_exchange(&h->armed, 0))
		return;
	atomic_store(&h->inside, 1);
	for (i = 0; i < 12000 && !atomic_load(&h->release); i++)
		nap_ms(5);
}

void mongo_hold_await(struct mongo_hold *h)
{
	int i;

	for (i = 0; i < 2000 && !atomic_load(&h->inside); i++)
		nap_ms(5);
	ck_assert_int_eq(atomic_load(&h->inside), 1);
}

void mongo_hold_arm(struct mongo_hold *h)
{
	atomic_store(&h->inside, 0);
	atomic_store(&h->release, 0);
	atomic_store(&h->armed, 1);
}

/* An injected clock for the tests that move time. */
int64_t tnow;

int64_t test_clock(void *ctx)
{
	return *(const int64_t *)ctx;
}

const struct store_actor bot = {.name = "ci-bot"};

void create(struct store *st, const char *id, const char *state)
{
	struct store_card_create in = {.id = id, .title = id, .state = state};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
}

struct core_token claim(struct store *st, const char *id, const char *marker)
{
	struct store_claim_result r;
	struct core_token t = {marker, 0, NULL};

	ck_assert_int_eq(store_card_claim(st, id, marker, 60000, &bot, &r), CORE_OK);
	t.epoch = r.token.epoch;
	core_card_free(r.card);
	return t;
}

void set_last_run(struct store *st, const char *id, struct core_token t, const char *run)
{
	struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .token = t, .run_id = run};
	struct store_run_create in = {.id = run, .card_id = id, .marker = t.marker,
				      .status = "running", .lease_ms = 60000};
	struct core_card *c = NULL;
	struct core_run *r = NULL;

	/* A card records only a run of its own, created under the current claim (§11). */
	if (store_run_get(st, run, &r) == CORE_ERR_NOT_FOUND)
		ck_assert_int_eq(store_run_create(st, &in, &bot, &r), CORE_OK);
	core_run_free(r);
	ck_assert_int_eq(store_card_owned_write(st, id, &w, &bot, &c), CORE_OK);
	core_card_free(c);
}

bool listed(struct core_card **v, size_t n, const char *id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i]->id, id) == 0)
			return true;
	return false;
}

/* ---- the server clock ---- */

/* A replica whose local clock runs an hour fast still stamps the server's time. */
START_TEST(clock_lease_follows_server_despite_local_skew)
{
	struct store *st;
	struct store_claim_result r;
	int64_t before, after;

	setenv("BOARDD_TEST_LOCAL_CLOCK_SKEW_MS", "3600000", 1);
	st = open_fresh();
	unsetenv("BOARDD_TEST_LOCAL_CLOCK_SKEW_MS");
	create(st, "c1", "ready");
	before = server_now();
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 60000, &bot, &r), CORE_OK);
	after = server_now();
	ck_assert(r.card->claim.has_lease);
	ck_assert_int_ge(r.card->claim.lease_until - 60000, before - 3000);
	ck_assert_int_le(r.card->claim.lease_until - 60000, after + 3000);
	ck_assert_int_ge(r.card->claim.claimed_at, before - 3000);
	ck_assert_int_le(r.card->claim.claimed_at, after + 3000);
	ck_assert_int_lt(llabs(store_now(st) - server_now()), 3000);
	core_card_free(r.card);
	close_db(st);
}
END_TEST

/* ADR-096 §6: a fresh acquisition's epoch is floored at the server's now, and stays
 * monotone across a write that dropped the field. */
START_TEST(epoch_floor_is_server_now)
{
	struct store *st = open_fresh();
	struct core_token t, t2;
	struct core_card *c = NULL;
	int64_t before;

	create(st, "c1", "ready");
	before = server_now();
	t = claim(st, "c1", "w1");
	ck_assert_int_ge(t.epoch, before - 3000);
	ck_assert_int_le(t.epoch, server_now() + 3000);
	ck_assert_int_eq(store_card_release(st, "c1", &t, &bot, &c), CORE_OK);
	core_card_free(c);
	/* Another binary drops the field; the next hold still gets a newer token. */
	raw_update(st, "cards", "c1", "{\"$unset\": {\"claim_epoch\": 1}}");
	nap_ms(5);
	t2 = claim(st, "c1", "w1");
	ck_assert_int_gt(t2.epoch, t.epoch);
	close_db(st);
}
END_TEST

/* ---- the missing epoch and the un-leased arm ---- */

START_TEST(missing_epoch_refuses_holder_until_unleased_arm)
{
	const int64_t horizon = 3600000;
	char db[64];
	struct store *st;
	struct core_token t, bad;
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = "review"};
	struct store_claim_result r;
	struct core_card *c = NULL, **v = NULL;
	size_t n = 0;

	db_name_new(db, sizeof(db));
	st = open_db(db, horizon, NULL);
	tnow = CT_T0;
	store_clock_set(st, test_clock, &tnow);
	create(st, "c1", "in_progress");
	t = claim(st, "c1", "w1");
	raw_update(st, "cards", "c1", "{\"$unset\": {\"claim_epoch\": 1}}");

	/* Every fenced write refuses the live holder: renew, release, owned writes, re-claim. */
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 60000, &bot, &c), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_release(st, "c1", &t, &bot, &c), CORE_ERR_CLAIM_CONFLICT);
	w.token = t;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &bot, &c), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 60000, &bot, &r), CORE_ERR_CLAIM_CONFLICT);
	bad = t;
	bad.epoch = 0;
	ck_assert_int_eq(store_card_renew(st, "c1", &bad, 60000, &bot, &c), CORE_ERR_CLAIM_CONFLICT);
	c = NULL;
	ck_assert_int_eq(store_card_get(st, "c1", &c), CORE_OK);
	ck_assert(c->claim.present && !c->has_epoch);
	ck_assert_str_eq(c->state, "in_progress");
	core_card_free(c);

	/* Its lease proves nothing once the holder cannot renew: not in the expired arm... */
	tnow = CT_T0 + 120000;
	ck_assert_int_eq(store_reaper_list_expired(st, 100, &v, &n), CORE_OK);
	ck_assert(!listed(v, n, "c1"));
	store_cards_free(v, n);
	/* ...but in the un-leased arm past the horizon. */
	tnow = CT_T0 + horizon + 1;
	ck_assert_int_eq(store_reaper_list_expired(st, 100, &v, &n), CORE_OK);
	ck_assert(listed(v, n, "c1"));
	store_cards_free(v, n);

	/* And the reaper can take it from there: transfer from the listed (epoch-less) claim. */
	bad = (struct core_token){.marker = "w1", .epoch = 0};
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &bad, "reaper:h", 60000, &c), CORE_OK);
	ck_assert_str_eq(c->claim.marker, "reaper:h");
	ck_assert(c->has_epoch);
	ck_assert_int_ge(c->claim_epoch, tnow);
	core_card_free(c);
	c = NULL;
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 60000, &bot, &c), CORE_ERR_CLAIM_CONFLICT);
	close_db(st);
}
END_TEST

/* A stripped claim without a lease (an old binary's replace) waits for the horizon too. */
START_TEST(unleased_arm_lists_after_expired_ones)
{
	struct store *st = open_fresh();
	struct core_card **v = NULL;
	size_t n = 0;

	tnow = CT_T0;
	store_clock_set(st, test_clock, &tnow);
	create(st, "old", "in_progress");
	create(st, "exp", "in_progress");
	claim(st, "old", "w1");
	raw_update(st, "cards", "old", "{\"$unset\": {\"claim.lease_until\": 1, \"claim.lease_ms\": 1}}");
	tnow = CT_T0 + 24LL * 3600000 - 1000;
	claim(st, "exp", "w2");
	tnow = CT_T0 + 24LL * 3600000 - 10; /* exp not expired, old not past 24 h */
	ck_assert_int_eq(store_reaper_list_expired(st, 100, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 0);
	store_cards_free(v, n);
	tnow = CT_T0 + 24LL * 3600000 + 60000; /* both */
	ck_assert_int_eq(store_reaper_list_expired(st, 100, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(v[0]->id, "exp"); /* the expired arm first */
	ck_assert_str_eq(v[1]->id, "old");
	ck_assert(!v[1]->claim.has_lease);
	store_cards_free(v, n);
	ck_assert_int_eq(store_reaper_list_expired(st, 1, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0]->id, "exp");
	store_cards_free(v, n);
	close_db(st);
}
END_TEST

/* ADR-096 §9: the residue listing selects running-column stripped claims with a recorded run,
 * plus expired recovery claims, and caps the batch in the query. */
START_TEST(repair_lists_unleased_residue)
{
	struct store *st = open_fresh();
	struct core_card **v = NULL;
	size_t n = 0;
	struct core_token t;
	char id[16];
	int i;

	tnow = CT_T0;
	store_clock_set(st, test_clock, &tnow);
	/* The conserved population, oldest: stripped in the running column, no run. */
	for (i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "norun%d", i);
		create(st, id, "in_progress");
		claim(st, id, "w0");
		raw_update(st, "cards", id, "{\"$unset\": {\"claim.lease_until\": 1}}");
	}
	tnow += 1000;
	create(st, "ready1", "ready"); /* stripped, has a run, but a launch column */
	t = claim(st, "ready1", "w1");
	set_last_run(st, "ready1", t, "r-1");
	raw_update(st, "cards", "ready1", "{\"$unset\": {\"claim.lease_until\": 1}}");
	create(st, "leased", "in_progress"); /* a healthy claim with a run */
	t = claim(st, "leased", "w2");
	set_last_run(st, "leased", t, "r-2");
	tnow += 1000;
	create(st, "resid", "in_progress"); /* the residue: no lease */
	t = claim(st, "resid", "w3");
	set_last_run(st, "resid", t, "r-3");
	raw_update(st, "cards", "resid", "{\"$unset\": {\"claim.lease_until\": 1}}");
	tnow += 1000;
	create(st, "noepoch", "in_progress"); /* the residue: no epoch */
	t = claim(st, "noepoch", "w4");
	set_last_run(st, "noepoch", t, "r-4");
	raw_update(st, "cards", "noepoch", "{\"$unset\": {\"claim_epoch\": 1}}");

	ck_assert_int_eq(store_reaper_list_repair(st, 100, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert(listed(v, n, "resid") && listed(v, n, "noepoch"));
	store_cards_free(v, n);
	/* Batch 1: the cap is the query's, so the conserved (older) cards cannot starve it. */
	ck_assert_int_eq(store_reaper_list_repair(st, 1, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0]->id, "resid");
	store_cards_free(v, n);

	/* An abandoned recovery claim is listed once its lease expired. */
	create(st, "rec", "in_progress");
	claim(st, "rec", "reaper:h");
	ck_assert_int_eq(store_reaper_list_repair(st, 100, &v, &n), CORE_OK);
	ck_assert(!listed(v, n, "rec"));
	store_cards_free(v, n);
	tnow += 61000;
	ck_assert_int_eq(store_reaper_list_repair(st, 100, &v, &n), CORE_OK);
	ck_assert(listed(v, n, "rec") && listed(v, n, "resid"));
	ck_assert(!listed(v, n, "leased") && !listed(v, n, "ready1") && !listed(v, n, "norun0"));
	store_cards_free(v, n);
	close_db(st);
}
END_TEST

START_TEST(run_count_includes_pruned)
{
	struct store *st = open_fresh();
	struct store_run_create in = {.card_id = "c1", .marker = "w1", .status = "running",
				      .lease_ms = 60000};
	struct core_run *r = NULL;
	size_t n = 0;

	create(st, "c1", "ready");
	claim(st, "c1", "w1");
	in.id = "r1";
	ck_assert_int_eq(store_run_create(st, &in, &bot, &r), CORE_OK);
	core_run_free(r);
	in.id = "r2";
	ck_assert_int_eq(store_run_create(st, &in, &bot, &r), CORE_OK);
	core_run_free(r);
	ck_assert_int_eq(store_run_prune(st, "r1", &bot), CORE_OK);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_run_count_for_card(st, "c1", &n), CORE_OK);
	ck_assert_uint_eq(n, 2);
	in.id = "r1"; /* a tombstone keeps its id */
	ck_assert_int_eq(store_run_create(st, &in, &bot, &r), CORE_ERR_ALREADY_EXISTS);
	close_db(st);
}
END_TEST

/* ---- events: the outbox and the tail's hole rule ---- */

/* A writer that died after its card update left the event in the outbox: the next store to
 * open the database delivers it. */
START_TEST(outbox_left_behind_is_delivered)
{
	char db[64];
	struct store *st, *st2;
	struct core_event *ev = NULL;
	size_t n = 0, i, k;
	int64_t next, before;
	bool found = false;
	char json[512];

	db_name_new(db, sizeof(db));
	st = open_db(db, 0, NULL);
	create(st, "c1", "ready");
	before = server_now();
	snprintf(json, sizeof(json),
		 "{\"$push\": {\"outbox\": {\"_id\": \"orphan-1\", \"at\": {\"$date\": %lld}, "
		 "\"q_ts\": {\"$date\": %lld}, \"board\": \"default\", \"type\": \"card_updated\", "
		 "\"card_id\": \"c1\", \"actor\": \"x\", \"machine\": false, "
		 "\"payload\": {\"fields\": [\"title\"]}}}}",
		 (long long)before, (long long)(before - 60000));
	raw_update(st, "cards", "c1", json);
	st2 = open_db(db, 0, NULL); /* its maintenance thread drains at start, then every 10 s */
	/* Polled every 200 ms for up to 35 s: past three drain rounds, so a first drain that a
	 * loaded machine (TSan, CI) made miss is not a failure; a drain that never delivers
	 * still is. (The list answers at once while older events exist: the pause is ours.) */
	for (i = 0; i < 175 && !found; i++) {
		ck_assert_int_eq(store_events_list(st2, NULL, NULL, 0, 1000, 0, &ev, &n, &next),
				 CORE_OK);
		for (k = 0; k < n; k++)
			found = found || (ev[k].type == CORE_EV_CARD_UPDATED &&
					  strcmp(ev[k].payload, "{\"fields\":[\"title\"]}") == 0);
		store_events_free(ev, n);
		if (!found)
			nap_ms(200);
	}
	ck_assert_msg(found, "the orphaned outbox event was not delivered");
	close_db(st2);
	close_db(st);
}
END_TEST

struct hole_fill {
	struct store *st;
	char json[512];
};

static void *hole_fill_later(void *arg)
{
	struct hole_fill *h = arg;

	nap_ms(300);
	raw_insert(h->st, "events", h->json);
	return NULL;
}

static void hole_event_json(char *out, size_t cap, const char *id, int64_t seq, int64_t now)
{
	snprintf(out, cap,
		 "{\"_id\": \"%s\", \"seq\": %lld, \"ts\": {\"$date\": %lld}, "
		 "\"at\": {\"$date\": %lld}, \"board\": \"default\", \"type\": \"card_updated\", "
		 "\"card_id\": \"c1\", \"actor\": \"\", \"machine\": false, \"payload\": {}}",
		 id, (long long)seq, (long long)now, (long long)now);
}

/* DESIGN §16: a listing shows every event acknowledged before it began. A fresh hole (a
 * writer took seq last+1 and is writing its event) is waited out, even by a listing that
 * asked not to wait: when the event comes, both are served in seq order; a hole whose next
 * event is older than the grace is stepped over (a writer that died). */
START_TEST(tail_waits_for_a_fresh_hole_and_skips_an_old_one)
{
	struct store *st = open_fresh();
	struct core_event *ev = NULL;
	struct hole_fill h = {.st = NULL};
	pthread_t t;
	size_t n = 0;
	int64_t next, last, now;
	char json[512];

	create(st, "c1", "ready");
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	ck_assert_uint_gt(n, 0);
	last = ev[n - 1].seq;
	store_events_free(ev, n);
	now = server_now();
	/* seq last+1 is allocated but not inserted (a writer in flight); last+2 is there. */
	hole_event_json(json, sizeof(json), "e-after", last + 2, now);
	raw_insert(st, "events", json);
	h.st = st;
	hole_event_json(h.json, sizeof(h.json), "e-hole", last + 1, now);
	ck_assert_int_eq(pthread_create(&t, NULL, hole_fill_later, &h), 0);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, last, 1000, 0, &ev, &n, &next),
			 CORE_OK);
	pthread_join(t, NULL);
	ck_assert_uint_eq(n, 2); /* waited for the hole to fill: nothing left out */
	ck_assert_int_eq(ev[0].seq, last + 1);
	ck_assert_int_eq(ev[1].seq, last + 2);
	ck_assert_int_eq(next, last + 2);
	store_events_free(ev, n);
	/* A hole that never fills: the listing waits until the event after it is older than
	 * the grace, then steps over it. */
	now = server_now();
	hole_event_json(json, sizeof(json), "e-after2", last + 4, now);
	raw_insert(st, "events", json);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, last + 2, 1000, 0, &ev, &n, &next),
			 CORE_OK);
	/* Not before the event after the hole was MGO_GAP_GRACE_MS (2 s) old, give or take
	 * the twin's clock sample (half a round trip). */
	ck_assert_int_ge(server_now() - now, 1900);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(ev[0].seq, last + 4);
	ck_assert_int_eq(next, last + 4);
	store_events_free(ev, n);
	close_db(st);
}
END_TEST

/* The audit tail is bounded: the maintenance thread keeps the newest events_keep seqs
 * (100 000; 5 here) and deletes the older ones; a reader from 0 resumes at the oldest kept. */
/* The driver's log lines (mongo_log.c): its DEBUG/INFO chatter is dropped, warnings and
 * errors carry boardd's prefix, and a burst is held to one line a second with a count. */
START_TEST(driver_log_gate_keeps_warnings_drops_chatter)
{
	struct mgo_log_gate g = {0};
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	int i;

	ck_assert_ptr_nonnull(out);
	mgo_log_write(out, &g, MONGOC_LOG_LEVEL_DEBUG, "monitor", "heartbeat failed", 1000);
	mgo_log_write(out, &g, MONGOC_LOG_LEVEL_INFO, "client", "info", 1000);
	mgo_log_write(out, &g, MONGOC_LOG_LEVEL_MESSAGE, "client", "message", 1000);
	mgo_log_write(out, &g, MONGOC_LOG_LEVEL_TRACE, "client", "trace", 1000);
	fflush(out);
	ck_assert_uint_eq(len, 0);
	mgo_log_write(out, &g, MONGOC_LOG_LEVEL_WARNING, "stream", "Failed to buffer 4 bytes", 1000);
	fflush(out);
	ck_assert_str_eq(text, "boardd: mongo driver WARNING (stream): Failed to buffer 4 bytes\n");
	for (i = 0; i < 3; i++) /* within the second: held back */
		mgo_log_write(out, &g, MONGOC_LOG_LEVEL_WARNING, "stream", "again", 1500 + i * 100);
	fflush(out);
	ck_assert_ptr_null(strstr(text, "again"));
	mgo_log_write(out, &g, MONGOC_LOG_LEVEL_ERROR, NULL, "lost", 2000);
	fflush(out);
	ck_assert_ptr_nonnull(strstr(text, "\nboardd: mongo driver ERROR (-): lost (3 more driver "
					   "lines held back in the last 1000 ms)\n"));
	fclose(out);
	free(text);
}
END_TEST

/* Reads what fd `fd` received while `fn` ran (into a temp file); the caller frees. */
static char *capture_fd(int fd, void (*fn)(void))
{
	char path[] = "/tmp/boardd-mongo-log-XXXXXX";
	int tmp = mkstemp(path), saved = dup(fd);
	char *text = calloc(1, 65536);
	ssize_t r;

	ck_assert_int_ge(tmp, 0);
	ck_assert_int_ge(saved, 0);
	ck_assert_ptr_nonnull(text);
	unlink(path);
	fflush(NULL);
	ck_assert_int_ge(dup2(tmp, fd), 0);
	fn();
	fflush(NULL);
	ck_assert_int_ge(dup2(saved, fd), 0);
	close(saved);
	r = pread(tmp, text, 65535, 0);
	ck_assert_int_ge(r, 0);
	close(tmp);
	return text;
}

static void log_probe(void)
{
	mongoc_log(MONGOC_LOG_LEVEL_DEBUG, "monitor", "probe-debug-line");
	mongoc_log(MONGOC_LOG_LEVEL_INFO, "client", "probe-info-line");
}

/* Opening the store installs the handler: libmongoc's default one prints DEBUG and INFO on
 * stdout (the topology monitor's two lines a second while the database is down). */
START_TEST(driver_log_handler_is_installed)
{
	struct store *st = open_fresh();
	char *out, *err;

	out = capture_fd(STDOUT_FILENO, log_probe);
	err = capture_fd(STDERR_FILENO, log_probe);
	ck_assert_msg(!strstr(out, "probe-"), "driver chatter on stdout: %s", out);
	ck_assert_msg(!strstr(err, "probe-"), "driver chatter on stderr: %s", err);
	free(out);
	free(err);
	close_db(st);
}
END_TEST

START_TEST(events_trimmed_to_the_newest)
{
	char db[64], id[16];
	struct store *st, *st2;
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t next, top;
	int i;

	db_name_new(db, sizeof(db));
	st = open_db(db, 0, NULL);
	for (i = 0; i < 12; i++) {
		snprintf(id, sizeof(id), "c%d", i);
		create(st, id, "ready");
	}
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	ck_assert_uint_ge(n, 12);
	top = next;
	store_events_free(ev, n);
	setenv("BOARDD_TEST_MONGO_EVENTS_KEEP", "5", 1);
	st2 = open_db(db, 0, NULL); /* its maintenance thread trims at start */
	unsetenv("BOARDD_TEST_MONGO_EVENTS_KEEP");
	/* The trim runs on the maintenance thread (at start, then every 10 s); then the trimmed
	 * seqs read as a hole until the oldest kept event is past the gap grace. Up to ~35 s:
	 * a loaded machine may make the first round miss. */
	for (i = 0; i < 175; i++) {
		ck_assert_int_eq(store_events_list(st2, NULL, NULL, 0, 1000, 200, &ev, &n, &next),
				 CORE_OK);
		if (n > 0 && ev[0].seq > 1)
			break;
		store_events_free(ev, n);
		ev = NULL;
		n = 0;
		nap_ms(200);
	}
	ck_assert_uint_eq(n, 5);
	ck_assert_int_eq(ev[0].seq, top - 4);
	ck_assert_int_eq(ev[4].seq, top);
	ck_assert_str_eq(ev[4].card_id, "c11");
	ck_assert_int_eq(next, top);
	store_events_free(ev, n);
	close_db(st2);
	close_db(st);
}
END_TEST

/* The board_seq of a board's events, in board_seq order; asserts 1..n without gaps. */
static size_t board_events(struct store *st, const char *board, struct core_event **ev)
{
	size_t n = 0, i;
	int64_t next = 0;

	ck_assert_int_eq(store_events_list_board(st, board, 0, 1000, 0, ev, &n, &next), CORE_OK);
	for (i = 0; i < n; i++)
		ck_assert_int_eq((*ev)[i].board_seq, (int64_t)i + 1);
	ck_assert_int_eq(next, (int64_t)n);
	return n;
}

/* Events an earlier version stored carry no board_seq: the first open numbers them per board
 * in seq order (DESIGN §11), after what the board had, and a later open changes nothing. */
START_TEST(events_of_earlier_versions_get_board_seq)
{
	char db[64], json[512];
	struct store *st, *st2, *st3;
	struct core_event *ev = NULL;
	size_t n = 0, k, i;
	int64_t top, now = server_now();

	db_name_new(db, sizeof(db));
	st = open_db(db, 0, NULL);
	create(st, "c0", "ready");
	create(st, "c1", "ready");
	k = board_events(st, "default", &ev);
	ck_assert_uint_ge(k, 2);
	top = ev[k - 1].seq;
	store_events_free(ev, k);
	for (i = 0; i < 5; i++) {
		snprintf(json, sizeof json,
			 "{\"_id\": \"legacy-%zu\", \"seq\": %lld, \"ts\": {\"$date\": %lld}, "
			 "\"at\": {\"$date\": %lld}, \"board\": \"%s\", \"type\": \"card_updated\", "
			 "\"card_id\": \"c0\", \"actor\": \"old\", \"machine\": false, \"payload\": {}}",
			 i, (long long)(top + 1 + (int64_t)i), (long long)now, (long long)now,
			 i % 2 ? "b2" : "default");
		raw_insert(st, "events", json);
	}
	snprintf(json, sizeof json, "{\"$set\": {\"seq\": %lld}}", (long long)(top + 5));
	raw_update(st, "counters", "events", json);
	for (i = 0; i < 2; i++) {
		st2 = open_db(db, 0, NULL); /* numbers them at open; the second numbers nothing */
		n = board_events(st2, "default", &ev);
		ck_assert_uint_eq(n, k + 3);
		ck_assert_str_eq(ev[k].actor, "old");
		ck_assert_int_eq(ev[k].seq, top + 1);
		ck_assert_int_eq(ev[k + 2].seq, top + 5);
		store_events_free(ev, n);
		n = board_events(st2, "b2", &ev);
		ck_assert_uint_eq(n, 2);
		ck_assert_int_eq(ev[0].seq, top + 2);
		ck_assert_int_eq(ev[1].seq, top + 4);
		store_events_free(ev, n);
		close_db(st2);
	}
	st3 = open_db(db, 0, NULL);
	create(st3, "c2", "ready"); /* the counter goes on after them */
	n = board_events(st3, "default", &ev);
	ck_assert_uint_eq(n, k + 4);
	ck_assert_str_eq(ev[n - 1].card_id, "c2");
	store_events_free(ev, n);
	close_db(st3);
	close_db(st);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	base_uri = getenv("BOARDD_TEST_MONGO_URI");
	if (!base_uri || !*base_uri) {
		const char *ci = getenv("CI");

		if (ci && strcmp(ci, "true") == 0) {
			fprintf(stderr, "store-mongo: BOARDD_TEST_MONGO_URI is not set, and CI=true: "
					"the Mongo suite must run in CI\n");
			return EXIT_FAILURE;
		}
		printf("store-mongo: BOARDD_TEST_MONGO_URI is not set: skipped\n");
		return 77; /* meson's skip */
	}
	/* The twin registers mongoc_cleanup at exit itself; both calls are once-only. */
	mongoc_init();
	s = suite_create("store-mongo");
	tc = tcase_create("mongo-only");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, clock_lease_follows_server_despite_local_skew);
	tcase_add_test(tc, epoch_floor_is_server_now);
	tcase_add_test(tc, missing_epoch_refuses_holder_until_unleased_arm);
	tcase_add_test(tc, unleased_arm_lists_after_expired_ones);
	tcase_add_test(tc, repair_lists_unleased_residue);
	tcase_add_test(tc, events_of_earlier_versions_get_board_seq);
	tcase_add_test(tc, run_count_includes_pruned);
	tcase_add_test(tc, outbox_left_behind_is_delivered);
	tcase_add_test(tc, tail_waits_for_a_fresh_hole_and_skips_an_old_one);
	tcase_add_test(tc, events_trimmed_to_the_newest);
	tcase_add_test(tc, driver_log_gate_keeps_warnings_drops_chatter);
	tcase_add_test(tc, driver_log_handler_is_installed);
	mongo_add_faults(tc);
	mongo_add_reaper(tc);
	mongo_add_interleave(tc);
	mongo_add_effects(tc);
	mongo_add_tail(tc);
	mongo_add_trips(tc);
	mongo_add_bseq(tc);
	mongo_add_policy(tc);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	ct_atomic = server_atomic;
	srunner_add_suite(sr, conformance_suite("conformance-mongo", open_fresh, close_db));
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

