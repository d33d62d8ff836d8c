/* Shared fixtures of the Mongo twin's suite (test_store_mongo*.c): a fresh database per
 * store, raw driver access behind boardd's back, the server's own clock, small helpers. */
#ifndef BOARDD_TESTS_STORE_TEST_STORE_MONGO_H
#define BOARDD_TESTS_STORE_TEST_STORE_MONGO_H

#include "store/store_twins.h"

#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern const char *base_uri; /* BOARDD_TEST_MONGO_URI */
extern int64_t tnow;         /* an injected clock for the tests that move time */
extern const struct store_actor bot;

int64_t test_clock(void *ctx);
/* boardd_test_<pid>_<n> */
void db_name_new(char *buf, size_t len);
/* Opens the twin on database db (horizon 0: default; extra URI options may be NULL). */
struct store *open_db(const char *db, int64_t horizon_ms, const char *extra_opts);
/* The same with every option of base (its uri is ignored). */
struct store *open_db_opts(const char *db, const struct store_mongo_options *base,
			   const char *extra_opts);
/* A fresh database; the conformance factory. */
struct store *open_fresh(void);
/* Closes st and drops its database unless another open store still uses it. */
void close_db(struct store *st);
/* A JSON update on document `id` of a collection, or an insert, behind boardd's back. */
void raw_update(struct store *st, const char *coll, const char *id, const char *json);
void raw_insert(struct store *st, const char *coll, const char *json);
void raw_delete(struct store *st, const char *coll, const char *id);
/* Deletes the documents of a collection matching a JSON filter. */
void raw_delete_where(struct store *st, const char *coll, const char *filter_json);
/* How many documents of a collection match a JSON filter. */
int64_t raw_count(struct store *st, const char *coll, const char *filter_json);
/* The same updates on a client of their own, connected before raw_fast_open returns, so
 * each costs one round trip (a change that must land within a few ms). */
struct raw_fast;
struct raw_fast *raw_fast_open(struct store *st, const char *coll);
void raw_fast_update(struct raw_fast *r, const char *id, const char *json);
void raw_fast_close(struct raw_fast *r);
/* How many entries the outbox of document `id` of a collection holds (0: none, or no field). */
size_t raw_outbox_len(struct store *st, const char *coll, const char *id);
/* hello.localTime, read independently of the twin. */
int64_t server_now(void);
/* buildInfo names FerretDB (its single-document updates are not atomic under concurrency). */
bool is_ferretdb(void);
void nap_ms(long ms);
/* A store's test_read hook that holds the thread reaching point `what` ("insert": between a
 * writer's seqs and its insert; "claimed": right after claim-next's write), the first time
 * after `armed` is set, until `release` is (at most 60 s): a writer stalled or killed there. */
struct mongo_hold {
	const char *what;
	atomic_int armed, inside, release;
};
void mongo_hold_hook(void *ctx, const char *what);
/* Arms h: the next thread to reach its point is held. */
void mongo_hold_arm(struct mongo_hold *h);
/* Waits (up to 10 s) for a thread armed before to be held: asserts it is. */
void mongo_hold_await(struct mongo_hold *h);
void create(struct store *st, const char *id, const char *state);
struct core_token claim(struct store *st, const char *id, const char *marker);
void set_last_run(struct store *st, const char *id, struct core_token t, const char *run);
bool listed(struct core_card **v, size_t n, const char *id);

void mongo_add_faults(TCase *tc);
void mongo_add_reaper(TCase *tc);
void mongo_add_interleave(TCase *tc);
void mongo_add_effects(TCase *tc);
void mongo_add_tail(TCase *tc);
void mongo_add_trips(TCase *tc);
void mongo_add_bseq(TCase *tc);
void mongo_add_policy(TCase *tc);

#endif
