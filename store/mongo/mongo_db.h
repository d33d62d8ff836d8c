/* mongo_db — the Mongo twin's driver plumbing: pooled connections and who writes (mongo_db.c),
 * the one place a bson_error_t becomes an rc, find / findAndModify / counter helpers, the
 * database's reachability (mongo_breaker.c), the driver's log (mongo_log.c), the server clock
 * (mongo_clock.c) and the driver's metrics (mongo_stats.c). */
#ifndef BOARDD_STORE_MONGO_MONGO_DB_H
#define BOARDD_STORE_MONGO_MONGO_DB_H

#include "store/mongo/mongo.h"

/* ---- connections (mongo_db.c) ---- */

/* One pooled client with the five collections, for the length of one op, with the op's
 * "now" (read once, through store_now) and actor name. */
/* Who writes: the event actor's name (borrowed) and an agent token's claim epoch (0: none). */
struct mgo_actor {
	const char *name;
	int64_t epoch;
};

/* A pooled client and its collections, made once per client (mongo_db.c). */
struct mgo_client {
	mongoc_client_t *client;
	mongoc_collection_t *cards, *runs, *events, *boards, *counters;
	struct mgo_client *next; /* on mgo.clients while idle */
};

struct mgo_conn {
	struct mgo *m;
	struct mgo_client *mc; /* owned until mgo_conn_close */
	mongoc_client_t *client;
	mongoc_collection_t *cards, *runs, *events, *boards, *counters; /* mc's, borrowed */
	int64_t now;
	struct mgo_actor actor; /* name borrowed; "" by default */
	uint64_t brk_gen; /* the breaker's generation at open (mgo_breaker_enter) */
	/* DESIGN §17: > 0: the next mgo_card_cas also sets the card's slot_epoch to it (its
	 * claim holds capacity slots, mongo_slots.c); reset by that write. */
	int64_t slot_epoch_set;
};

/* The driver's log lines (mongo_log.c): warnings and errors on stderr with boardd's prefix,
 * at most one per MGO_LOG_QUIET_MS (the next says how many were held back); the rest dropped. */
#define MGO_LOG_QUIET_MS 1000
struct mgo_log_gate {
	int64_t last_ms;     /* when the last line was printed */
	unsigned long held;  /* lines held back since */
	bool printed;        /* any line printed yet */
};
/* Whether a line of `level` at now_ms is printed; if so *held is how many were held back. */
bool mgo_log_pass(struct mgo_log_gate *g, mongoc_log_level_t level, int64_t now_ms,
		  unsigned long *held);
/* Prints one driver line to `out` when the gate lets it through. */
void mgo_log_write(FILE *out, struct mgo_log_gate *g, mongoc_log_level_t level,
		   const char *domain, const char *message, int64_t now_ms);
/* Makes mgo_log_write (on stderr, one gate for the process) the driver's log handler. */
void mgo_log_install(void);

/* ---- the database's reachability (mongo_breaker.c) ---- */
/* A probe's server selection, connect and socket timeouts at most (the URI's when shorter). */
#define MGO_PROBE_MS 2000
/* Whether e says the database could not be reached: no server selectable, a network error,
 * or a server that is no primary (any more) or is shutting down. */
bool mgo_error_unreachable(const bson_error_t *e);
/* Notes e for this thread's op when it says so (mgo_error calls it; `what` names the
 * command); the op's mgo_conn_close reports it to the breaker. */
void mgo_breaker_note(const char *what, const bson_error_t *e);
/* Whether this thread's op met an unreachable database already: its further finds,
 * findAndModifys and counter updates (mongo_db.c) then fail at once, not after a server
 * selection each. */
bool mgo_breaker_noted(void);
/* Whether an op may go to the database: STORE_UNAVAILABLE at once while the breaker is
 * open; else OK and *gen is its generation. No lock, no driver call. */
enum core_rc mgo_breaker_enter(struct mgo *m, uint64_t *gen);
/* The end of an op of generation gen: opens the breaker when the op noted an error that
 * says the database could not be reached. */
void mgo_breaker_leave(struct mgo *m, uint64_t gen);
/* The driver's topology gained or lost its writable server (the APM callback). */
void mgo_breaker_topology(struct mgo *m, bool writable_before, bool writable_now);
/* ops->ping: the breaker's state, without a round trip. */
enum core_rc mgo_breaker_ready(struct mgo *m);
/* boardd_mongo_unreachable and boardd_mongo_outages_total into out. */
void mgo_breaker_collect(struct mgo *m, struct metrics_sink *out);
/* Closed breaker and the probe's URI from the pool's (before the pool takes traffic);
 * mgo_breaker_start starts the prober and lets ops and the driver open it; mgo_breaker_stop
 * (before the pool is destroyed, whose monitors report its servers gone) stops both;
 * mgo_breaker_fini (after the pool is destroyed) stops and frees it all. */
bool mgo_breaker_init(struct mgo *m, const mongoc_uri_t *uri);
bool mgo_breaker_start(struct mgo *m);
void mgo_breaker_stop(struct mgo *m);
void mgo_breaker_fini(struct mgo *m);

/* Pops a client from the pool (blocks while the pool is exhausted) and reads now. NOMEM. */
/* CLOCK_MONOTONIC in ms (mongo_clock.c): caches' ages, naps and gates. */
int64_t mgo_mono_ms(void);
enum core_rc mgo_conn_open(struct mgo *m, struct mgo_conn *c);
/* The same without reading "now" (c->now stays 0): for the maintenance thread, which must
 * not call an injected test clock concurrently with the test that sets it. */
enum core_rc mgo_conn_open_bare(struct mgo *m, struct mgo_conn *c);
void mgo_conn_close(struct mgo_conn *c);
/* Pushes every idle client back to the pool (mgo_close, before the pool goes). */
void mgo_clients_release(struct mgo *m);

/* Translates a driver error: logs `what` and the driver's text to stderr (never to a client)
 * and returns STORE_UNAVAILABLE, or ALREADY_EXISTS for a duplicate key. One that says the
 * database could not be reached is noted for the breaker (mgo_breaker_note). */
enum core_rc mgo_error(const char *what, const bson_error_t *e);
/* Whether e is a duplicate-key error (E11000). */
bool mgo_error_is_dup(const bson_error_t *e);

/* find_one: *doc receives a copy (caller bson_destroy()s it) or stays NULL when nothing
 * matched (rc OK). */
enum core_rc mgo_find_one(mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
			  bson_t **doc);
/* findAndModify returning the post-image: *doc NULL when the filter matched nothing. */
enum core_rc mgo_find_modify(mongoc_collection_t *coll, const bson_t *filter,
			     const bson_t *update, bson_t **doc);
/* The same, taking the first match in `sort` order (NULL: any). */
enum core_rc mgo_find_modify_sort(mongoc_collection_t *coll, const bson_t *filter,
				  const bson_t *sort, const bson_t *update, bson_t **doc);
/* Runs a find and hands each document to fn (which returns an rc; non-OK stops). */
enum core_rc mgo_find_each(mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
			   enum core_rc (*fn)(void *ctx, const bson_t *doc), void *ctx);
/* Document `id` without its outbox (NULL when absent, rc OK). */
enum core_rc mgo_find_by_id(mongoc_collection_t *coll, const char *id, bson_t **doc);
/* Whether a card or event of `board` is in scope: `one` (NULL: any) and in `many` (NULL: any;
 * else a NULL-terminated list). */
bool mgo_board_allowed(const char *board, const char *one, const char *const *many);
/* Atomically adds n to counter `name`; *last receives the new value. */
/* The counters collection's findAndModify (upsert, the document as it was BEFORE back:
 * mgo_counter_old reads it; counter_serial honoured). OUT: *reply, always initialised; the
 * caller destroys it. */
enum core_rc mgo_counter_fam(struct mgo_conn *c, const bson_t *filter, const bson_t *update,
			     bson_t *reply);
enum core_rc mgo_counter_add(struct mgo_conn *c, const char *name, int64_t n, int64_t *last);
/* The value at `path` ("seq", "b.<board>") of the counter document a mgo_counter_fam reply
 * holds as it was BEFORE the update: 0 when there was no document or no such field; false
 * for a malformed reply. */
bool mgo_counter_old(const bson_t *reply, const char *path, int64_t *v);

/* ---- the server clock (mongo_clock.c) ---- */

enum core_rc mgo_clock_init(struct mgo *m, char *err, size_t errlen);
void mgo_clock_release(struct mgo *m);
/* Samples hello.localTime now (used at open and by the maintenance thread). */
enum core_rc mgo_clock_sample(struct mgo *m);
/* The database server's now, extrapolated from the last sample (ops->now). */
int64_t mgo_clock_now(struct store *st);
/* The local wall clock as this twin would read it (with the test-only skew). */
int64_t mgo_clock_local_ms(const struct mgo *m);


/* ---- metrics (mongo_stats.c) ---- */
/* Counts the pool's commands and errors into m (before any client is popped). */
bool mgo_stats_attach(struct mgo *m);
/* Commands started by the calling thread so far, any store (tests: an op's round trips). */
uint64_t mgo_round_trips_here(void);
enum core_rc mgo_stats(struct store *st, struct metrics_sink *out);

#endif
