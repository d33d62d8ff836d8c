/* Internals of the Mongo twin (DESIGN §9, ADR-096). Not a public header: store/store.h is.
 *
 * Collections (one database, named by the URI's path):
 *   cards     {_id, ord, board, title, body, state, labels[], blockers[], comments[],
 *              claim{marker, claimed_at, lease_until, lease_ms}?, claim_epoch?, last_run_id?,
 *              awaiting_input, gave_up{..}?, state_reason?, created_at, updated_at, state_at,
 *              outbox[]}
 *   runs      {_id, card_id, board, status, continuation?, failure_code?, owner, result_json?,
 *              error?, output? (the tail, DESIGN §20), claim_epoch, lock_until, lease_ms,
 *              created_at, updated_at, pruned, outbox[]}
 *   events    {_id: eid, seq, board_seq, ts, at, board, type, card_id?, actor, reason?, machine,
 *              payload{}} (board_seq: the board's own 1, 2, 3 ...; mongo_bseq.c)
 *             or a filler {_id: "filler-<seq>", seq, ts, filler: true} (a seq left unused)
 *   boards    {_id: name, cols[{name, terminal, eligible}], running, completed, failed,
 *              waiting, outbox[]}
 *   counters  {_id: "events" | "cards" | "runs", seq}; "events" also holds b{<board>: last}
 * Times are BSON dates (ms). A missing field and a null one read alike.
 *
 * The outbox: a mutation pushes its events into the outbox array of the document it changes,
 * in the same single-document update, so the change and its events commit together. The
 * writer then moves them to `events` (seq from counters, _id = eid so a second delivery is a
 * duplicate-key no-op) and has them pulled (by the puller thread, in bulk; on FerretDB by
 * itself); the maintenance thread delivers what a crashed or failed writer left behind. See the top of mongo.c for the full atomicity ledger.
 */
#ifndef BOARDD_STORE_MONGO_MONGO_H
#define BOARDD_STORE_MONGO_MONGO_H

#include "metrics/metrics.h"
#include "store/store.h"

#include <mongoc/mongoc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MGO_HORIZON_DEFAULT_MS ((int64_t)24 * 3600 * 1000)
#define MGO_RESAMPLE_MS 10000  /* server clock re-sample period */
#define MGO_SAMPLE_MAX_RTT_MS 1000 /* a slower round trip is not a sample (after the first) */
#define MGO_OUTBOX_GRACE_MS 5000 /* the maintenance drain leaves younger outboxes to writers */
#define MGO_GAP_GRACE_MS 2000  /* an unfilled seq older than this is a permanent gap */
#define MGO_CAS_TRIES 16       /* a conditional update missed this often answers a conflict */
#define MGO_SEQ_TRIES 16       /* an event insert that keeps meeting taken seqs gives up */
#define MGO_FILLER "filler"    /* marks an `events` document that fills an unused seq */
#define MGO_EVENTS_KEEP_DEFAULT ((int64_t)100000) /* the audit tail keeps the newest seqs */
#define MGO_TRIM_BATCH ((int64_t)10000) /* seqs per delete when trimming `events` */
#define MGO_TRIM_ROUNDS 50     /* deletes per trim; the rest waits for the next maintenance */
/* A waiting tail (mongo_events.c) naps between polls, from MIN doubling to MAX while nothing
 * comes; this process's own event inserts wake it at once. After a nap it reads the events
 * counter (one document by _id) and queries `events` only when the counter moved past it,
 * or when FULL has passed since its last query (a counter behind the stored events: on
 * FerretDB each query of `events` reads and sorts all of it, so this is kept long). */
#define MGO_TAIL_NAP_MIN_MS 100
#define MGO_TAIL_NAP_MAX_MS 250
#define MGO_TAIL_FULL_MS 60000
/* How long this process's waiting tails share one read of the events counter. */
#define MGO_TAIL_PROBE_SHARE_MS 200
/* How long a lease that found no due delivery spares this process's deliverers the query
 * (each deliverer polls every 250 ms; on FerretDB each poll scans `deliveries`): a delivery
 * another replica enqueued is leased here within this; this process's own at once. */
#define MGO_LEASE_QUIET_MS 1000
/* The deferred outbox pull (mongo_events.c): a writer whose events reached `events` hands
 * the pull to the puller thread, which gathers them for this long and then pulls them all in
 * one unordered bulk update per collection (one round trip for many writes, none on the
 * writer's request). More than MGO_PULL_QUEUE_MAX waiting: the writer pulls itself. */
/* How many findAndModify of the events counter this process keeps under way at once
 * (mongo_bseq.c): a writer that finds that many asking queues, and the next to ask takes the
 * whole queue in one. Two: a writer never waits behind another unless two are asking. */
#define MGO_SEQ_INFLIGHT 2
#define MGO_PULL_WINDOW_MS 50
#define MGO_DLV_CACHE 4096 /* event ids delivered lately, remembered (mgo_evq_deliver) */
#define MGO_PULL_QUEUE_MAX 4096

/* One deferred pull: $pullAll of `arr` (an array document of the exact entries pushed) from
 * the outbox of document doc_id of collection `coll` (enum mgo_pull_coll). */
enum mgo_pull_coll { MGO_PULL_CARDS, MGO_PULL_RUNS, MGO_PULL_BOARDS, MGO_PULL_COLLS_ };
struct mgo_pull {
	enum mgo_pull_coll coll;
	char *doc_id; /* owned */
	bson_t *arr;  /* owned */
};

/* A writer's own pull, shared with the writers pulling at the same moment (racy servers:
 * mgo_evq_deliver), queued on its writer's stack under seq_mu. */
struct mgo_pull_req {
	enum mgo_pull_coll coll;
	const char *doc_id;
	const bson_t *arr;
	bool taken, done;
	pthread_cond_t cv; /* as mgo_seq_req's */
	struct mgo_pull_req *next;
};

struct mgo {
	struct store base; /* first: what the wrappers see */
	mongoc_client_pool_t *pool;
	char *db;
	int64_t unleased_horizon_ms;
	int64_t events_keep; /* `events` retention, in seqs (BOARDD_TEST_MONGO_EVENTS_KEEP: tests) */
	void (*test_before_write)(void *ctx, const char *card_id); /* store_mongo_options */
	void (*test_read)(void *ctx, const char *what);            /* store_mongo_options */
	void *test_ctx;
	int64_t tail_nap_ms; /* 0: adaptive; BOARDD_TEST_MONGO_TAIL_NAP_MS (tests) fixes it */

	/* ---- the server clock (mongo_clock.c): guarded by clock_mu ---- */
	pthread_mutex_t clock_mu;
	int64_t clock_server_ms; /* server time at the sample, round-trip corrected */
	int64_t clock_mono_ms;   /* CLOCK_MONOTONIC at the same instant */
	int64_t clock_offset_ms; /* server - local wall clock at the sample (diagnostic) */
	int64_t clock_last_ms;   /* the last "now" handed out: never goes backwards */
	int64_t local_skew_ms;   /* test only: BOARDD_TEST_LOCAL_CLOCK_SKEW_MS */

	/* ---- seq and id counters (mongo_db.c) ---- */
	/* FerretDB (buildInfo at open): its findAndModify $inc is a read then a write, so this
	 * process's own writers take turns on the counters; between processes the unique
	 * indexes still decide (mongo_events.c). MongoDB's $inc is atomic: no lock. */
	bool counter_serial;
	pthread_mutex_t counter_mu;
	/* The ids of events this process delivered lately, one per slot (a cache; a miss only
	 * costs a read): mgo_evq_deliver knows from it that an earlier write's entry left in an
	 * outbox (its pull deferred) is stored. Guarded by dlv_mu. */
	pthread_mutex_t dlv_mu;
	char dlv_ids[MGO_DLV_CACHE][25];
	/* The shared seq allocations (mgo_seqs_take), guarded by seq_mu. */
	pthread_mutex_t seq_mu;
	struct mgo_seq_req *seq_head, **seq_tail; /* queued, not taken yet */
	int seq_inflight;                         /* batches under way */
	int seq_inflight_max; /* MGO_SEQ_INFLIGHT (a test may lower it to 1) */
	/* The writers' own pulls shared the same way (one bulk under way at a time), also
	 * guarded by seq_mu. */
	struct mgo_pull_req *pullg_head, **pullg_tail;
	bool pullg_busy;
	/* FerretDB too: an update there is a read then a write, so two updates of one document
	 * racing can lose one. A deferred outbox pull would race the next write of the same
	 * card (the next request) and could undo it: there each writer's pull is done before it
	 * answers, in a bulk shared with the writers pulling at the same moment. */
	bool racy_updates;
	/* The server runs the $lookup stage (not FerretDB 1.24): a write that needs the card and
	 * its board reads both in one aggregate (mongo_cas.c). */
	bool board_lookup;

	/* ---- the subscriptions cache (mongo_effect.c): guarded by subs_mu ---- */
	pthread_mutex_t subs_mu;
	struct mgo_subs_ent *subs_cache;
	size_t n_subs_cache;
	/* FerretDB (counter_serial): this process's deliverers take turns on the lease's
	 * findAndModify, which is not atomic there; between processes nothing can help. */
	pthread_mutex_t lease_mu;
	/* ---- connections (mongo_db.c) ---- */
	/* Clients popped from the pool with their collections, kept across ops (guarded by
	 * conn_mu): an op pops one here before it asks the pool, and pushes it back here. */
	pthread_mutex_t conn_mu;
	struct mgo_client *clients;
	/* The card this thread's last op read for its caller (mgo_card_get), for the write
	 * that follows it on the same thread (mgo_attempt_begin): struct mgo_just_read. */
	pthread_key_t just_read;
	bool just_read_key;
	/* ---- the driver's counters (mongo_stats.c; atomic, from its monitoring callbacks) ---- */
	atomic_uint_least64_t round_trips;   /* commands started */
	atomic_uint_least64_t err_command;   /* commands failed */
	atomic_uint_least64_t err_heartbeat; /* server monitor checks failed */
	struct metrics_hist cmd_duration;    /* round trips of the commands that succeeded */

	/* ---- the tail's wake-ups (mongo_events.c): guarded by tail_mu ---- */
	pthread_mutex_t tail_mu;
	pthread_cond_t tail_cv; /* CLOCK_MONOTONIC; broadcast when this process stores events */
	uint64_t tail_gen;      /* bumped with each broadcast */
	/* The last unfiltered tail query that found nothing new: from tail_memo_after, at
	 * tail_memo_ms (monotonic), before write tail_memo_gen. A call from the same place
	 * within MGO_TAIL_FULL_MS starts with the counter instead of the query. */
	int64_t tail_memo_after, tail_memo_ms;
	uint64_t tail_memo_gen;
	bson_t *probe_doc; /* the events counter as last read (owned), at probe_ms (mono) */
	int64_t probe_ms;
	/* The deliverers' gate (mongo_effect.c), under tail_mu too: a lease that found nothing
	 * due lets this process's next leases skip the query until lease_quiet_until (server
	 * ms): MGO_LEASE_QUIET_MS later, or sooner when a retry it wrote falls due. This
	 * process's own enqueues and retries (lease_gen moves) open it at once. */
	int64_t lease_quiet_until;
	uint64_t lease_gen;
	bool lease_asking;         /* a deliverer of this process is querying ... */
	uint64_t lease_asking_gen; /* ... since this generation */

	/* ---- the deferred outbox pulls (mongo_events.c): guarded by pull_mu ---- */
	pthread_mutex_t pull_mu;
	pthread_cond_t pull_cv; /* CLOCK_MONOTONIC; signalled by the first pull queued */
	struct mgo_pull *pulls; /* queued, in order (owned) */
	size_t n_pulls, cap_pulls;
	pthread_t pull_thread;
	bool pull_started;
	bool pull_stopping; /* close: the puller pulls what is queued, then ends */

	/* ---- the maintenance thread (mongo.c): guarded by mu ---- */
	pthread_mutex_t mu;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	pthread_t thread;
	bool thread_started;
	bool stopping;

	/* ---- the database's reachability (mongo_breaker.c): brk under brk_mu ---- */
	pthread_mutex_t brk_mu;
	pthread_cond_t brk_cv; /* CLOCK_MONOTONIC: wakes the prober */
	struct core_breaker brk;
	int64_t brk_opened_ms;           /* mono: when it last opened */
	atomic_uint_least64_t brk_word;  /* brk.gen << 1 | brk.open, read by ops without the lock */
	atomic_bool brk_on;              /* ops may open it (false while the store opens) */
	mongoc_uri_t *probe_uri;         /* the pool's URI with the probe's short timeouts */
	pthread_t brk_thread;            /* the prober */
	bool brk_init, brk_started, brk_stopping;
};

static inline struct mgo *mgo_of(struct store *st)
{
	return (struct mgo *)st;
}

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

/* A card read for the caller of an op, kept for the next op of the same thread. */
struct mgo_just_read {
	struct core_card *card; /* owned */
	int64_t mono_us;        /* CLOCK_MONOTONIC when read */
};

struct mgo_conn {
	struct mgo *m;
	struct mgo_client *mc; /* owned until mgo_conn_close */
	mongoc_client_t *client;
	mongoc_collection_t *cards, *runs, *events, *boards, *counters; /* mc's, borrowed */
	int64_t now;
	struct mgo_actor actor; /* name borrowed; "" by default */
	/* This thread's mgo_just_read, taken at open (owned; NULL: none); the first
	 * mgo_attempt_begin uses it as its read when it is the same card and young enough. */
	struct mgo_just_read *just;
	uint64_t brk_gen; /* the breaker's generation at open (mgo_breaker_enter) */
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
/* How old a card read for the caller may be and still serve as the read of the write that
 * follows it on the same thread (the API reads a card for its scope check, then writes it). */
#define MGO_JUST_READ_US 5000
/* The thread-local key of mgo.just_read (open) and its removal (close). */
bool mgo_just_read_init(struct mgo *m);
void mgo_just_read_fini(struct mgo *m);
/* Keeps a copy of `card` (just read for the caller) for this thread's next op. */
void mgo_just_read_keep(struct mgo *m, const struct core_card *card);
/* Takes c->just when it is card `id`'s and young enough; NULL otherwise. Either way c->just
 * is gone afterwards: only the first attempt of the next op may use it. */
struct core_card *mgo_just_read_take(struct mgo_conn *c, const char *id);

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
/* The counters collection's findAndModify (upsert, new document back, counter_serial
 * honoured). OUT: *reply, always initialised; the caller destroys it. */
enum core_rc mgo_counter_fam(struct mgo_conn *c, const bson_t *filter, const bson_t *update,
			     bson_t *reply);
enum core_rc mgo_counter_add(struct mgo_conn *c, const char *name, int64_t n, int64_t *last);

/* ---- the server clock (mongo_clock.c) ---- */

enum core_rc mgo_clock_init(struct mgo *m, char *err, size_t errlen);
void mgo_clock_release(struct mgo *m);
/* Samples hello.localTime now (used at open and by the maintenance thread). */
enum core_rc mgo_clock_sample(struct mgo *m);
/* The database server's now, extrapolated from the last sample (ops->now). */
int64_t mgo_clock_now(struct store *st);
/* The local wall clock as this twin would read it (with the test-only skew). */
int64_t mgo_clock_local_ms(const struct mgo *m);

/* ---- codec (mongo_codec.c) ---- */

/* Whole documents for insert. */
bool mgo_card_to_bson(const struct core_card *c, int64_t ord, bson_t *doc);
bool mgo_run_to_bson(const struct core_run *r, bson_t *doc);
bool mgo_board_to_bson(const struct core_board *b, bson_t *doc);
/* Pieces. */
bool mgo_claim_append(bson_t *doc, const char *key, const struct core_claim *cl);
bool mgo_gave_up_append(bson_t *doc, const char *key, const struct core_gave_up *g);
bool mgo_strv_append(bson_t *doc, const char *key, const struct core_strv *sv);
bool mgo_comment_append(bson_t *arr, const char *key, const struct core_comment *cm);
/* Readers: BAD_REQUEST for a malformed document, NOMEM; nothing allocated on failure. */
enum core_rc mgo_card_from_bson(const bson_t *doc, struct core_card **out);
enum core_rc mgo_run_from_bson(const bson_t *doc, struct core_run **out);
enum core_rc mgo_board_from_bson(const bson_t *doc, struct core_board *out);
enum core_rc mgo_event_from_bson(const bson_t *doc, struct core_event *out);
/* JSON <-> BSON for event payloads. _to_bson appends object o as a subdocument. */
bool mgo_json_append(bson_t *doc, const char *key, const json_t *o);
/* A new reference to the JSON form of a (sub)document; NULL on failure. */
json_t *mgo_bson_to_json(const bson_t *doc);
/* An int64 from a numeric or date field; false when absent/other. */
bool mgo_iter_i64(const bson_iter_t *it, int64_t *v);

/* ---- events: the outbox, delivery, the tail (mongo_events.c) ---- */

/* Events a mutation produces, pushed into the changed document's outbox. */
struct mgo_evq {
	bson_t *ev[8];
	char eid[8][25];
	size_t n;
	int64_t q_ts; /* the server clock when queued: the drain's grace is measured on it */
	bool failed;  /* NOMEM or overflow while building */
};

/* Zeroes q and stamps it with the server clock (never an injected one). */
void mgo_evq_init(struct mgo_evq *q, struct mgo *m);
void mgo_evq_release(struct mgo_evq *q);
/* Queues one event (payload stolen, NULL: {}); the actor is blanked for machine reasons. */
void mgo_evq_add(struct mgo_evq *q, enum core_event_type type, const char *board,
		 const char *card_id, struct mgo_actor actor, const char *reason, int64_t now,
		 json_t *payload);
/* Appends "outbox": {$each: [...]} to an open $push document. */
bool mgo_evq_push_append(const struct mgo_evq *q, bson_t *push);
/* Moves q's events (already in doc_id's outbox in coll) to `events`, then has them pulled
 * from the outbox: by the puller (deferred, batched), or here when it cannot take them.
 * `after`: the document as this write left it (borrowed; NULL: not at hand); the entries of
 * earlier writes still in its outbox are delivered first, so a document's events are logged
 * in the order its writes committed. Failure is logged only: the events stay in the outbox
 * for the maintenance drain. */
void mgo_evq_deliver(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
		     const struct mgo_evq *q, const bson_t *after);
/* Queues the events left in a document's outbox (for a delete, or the drain), from its
 * entry *pos on, as many as q holds, and moves *pos past them; returns whether entries are
 * left beyond. An outbox can hold more than a queue: its pulls are deferred (entries already
 * delivered stay until the puller comes; evq_store skips those). */
bool mgo_evq_from_outbox(struct mgo_evq *q, const bson_t *doc, size_t *pos);
/* Inserts q's events straight into `events` (for a deleted document: no outbox left). */
enum core_rc mgo_evq_insert_direct(struct mgo_conn *c, const struct mgo_evq *q);
/* Delivers outbox entries older than the grace period in all three collections. */
void mgo_outbox_drain(struct mgo *m);
/* The puller thread of the deferred outbox pulls: start (open), and stop (close: it pulls
 * everything queued first). Without it every writer pulls its own. */
bool mgo_puller_start(struct mgo *m);
void mgo_puller_stop(struct mgo *m);
/* Opens the deliverers' gate: this process enqueued or re-armed a delivery due at `due`
 * (server ms; 0: now) (mongo_effect.c). */
void mgo_lease_open(struct mgo *m, int64_t due);
/* Wakes this process's waiting tails: events were just stored (mongo_events.c). */
void mgo_tail_wake(struct mgo *m);
bool mgo_tail_init(struct mgo *m);
void mgo_tail_fini(struct mgo *m);
/* Deletes the events older than the newest m->events_keep seqs (the maintenance thread). */
void mgo_events_trim(struct mgo *m);

/* ---- board_seq (mongo_bseq.c) ---- */

/* n seqs (*last: the highest) and counts[i] board_seqs of boards[i] (blast[i]: the highest),
 * together, each a contiguous range: one findAndModify on the events counter, shared with the
 * writers of this process that ask at the same moment (at most MGO_SEQ_INFLIGHT at once; the
 * others queue and the next one to go takes the whole queue in one). */
enum core_rc mgo_seqs_take(struct mgo_conn *c, int64_t n, const char *const *boards,
			   const int64_t *counts, size_t nb, int64_t *last, int64_t *blast);
/* A queued request of mgo_seqs_take (on its caller's stack). */
struct mgo_seq_req {
	int64_t n;
	const char *const *boards;
	const int64_t *counts;
	size_t nb;
	int64_t last;    /* OUT */
	int64_t *blast;  /* OUT: nb */
	enum core_rc rc; /* OUT */
	/* The shared insert (mgo_seqs_take_insert; NULL: seqs only): once the batch has its
	 * seqs, whoever sends it calls docs(r, bulk, ts) for each request whose seqs came, in
	 * queue order, so that every request's `ndocs` documents go in ONE ordered insert. */
	void (*docs)(struct mgo_seq_req *r, mongoc_bulk_operation_t *bulk, int64_t ts);
	void *ctx;             /* docs' own */
	size_t ndocs;
	size_t at;             /* index of its first document in the bulk */
	enum core_rc ins_rc;   /* OUT: OK (all its documents inserted), ALREADY_EXISTS (a
				* duplicate key stopped the ordered insert at or before one of
				* them), or the insert's error */
	bool taken;      /* in a batch under way */
	bool done;       /* OUT filled */
	/* Its writer waits on its own: woken when its batch is done, or, first in the queue,
	 * when a batch under way ends (it may go next), never by every other batch's end. */
	pthread_cond_t cv;
	struct mgo_seq_req *next;
};
/* mgo_seqs_take for r, and (r->docs) its documents inserted into `events` in the same batch:
 * writers that ask at the same moment share the findAndModify AND the insert. Returns the
 * seqs' outcome; the insert's is r->ins_rc (not set when the seqs failed). */
enum core_rc mgo_seqs_take_insert(struct mgo_conn *c, struct mgo_seq_req *r);
/* Does an event other than eid hold board's bseq? (A failed read answers yes.) */
bool mgo_bseq_taken(struct mgo_conn *c, const char *board, int64_t bseq, const char *eid);
/* The events counter's field of a board ("b.<board>", '.' written ':'). */
void mgo_bseq_field(char *out, size_t cap, const char *board);
/* Raises board's counter to the highest board_seq stored (never lowers it). */
void mgo_bseq_catch_up(struct mgo_conn *c, const char *board);
/* At open: numbers the events stored before board_seq existed, per board in seq order. */
enum core_rc mgo_bseq_migrate(struct mgo *m);
enum core_rc mgo_events_list_board(struct store *st, const char *board, int64_t after,
				   size_t limit, int64_t wait_ms, struct core_event **out,
				   size_t *n, int64_t *next);

enum core_rc mgo_attention_list(struct store *st, const char *board, const char *const *boards,
				size_t limit, struct store_attention **out, size_t *n,
				bool *truncated);
enum core_rc mgo_events_list(struct store *st, const char *board, const char *const *boards,
			     int64_t after, size_t limit, int64_t wait_ms, struct core_event **out,
			     size_t *n, int64_t *next);

/* ---- card writes: the read-decide-CAS step (mongo_cas.c) ---- */

/* What a conditional update requires to be unchanged since the read (its precondition). */
enum mgo_pre {
	MGO_PRE_STATE = 1 << 0,    /* state */
	MGO_PRE_CLAIM = 1 << 1,    /* claim.marker and claim_epoch, absence included */
	MGO_PRE_LEASE = 1 << 2,    /* claim.lease_until and claim.claimed_at, absence included */
	MGO_PRE_LABELS = 1 << 3,   /* labels, the whole array */
	MGO_PRE_BLOCKERS = 1 << 4, /* blockers, the whole array */
	MGO_PRE_COMMENTS = 1 << 5, /* the number of comments */
};

/* Reads card `id`: NOT_FOUND, STORE_UNAVAILABLE, NOMEM. Caller frees *out. */
enum core_rc mgo_card_read(struct mgo_conn *c, const char *id, struct core_card **out);
/* Writes `now` over `was` with ONE findAndModify whose filter is _id plus the `pre` fields
 * as read in `was`, $set/$unset of the fields that differ, and q pushed into the outbox.
 * *hit false: the precondition no longer holds (nothing written). On a hit, q is delivered
 * and *out (may be NULL) receives the stored post-image. */
enum core_rc mgo_card_cas(struct mgo_conn *c, const struct core_card *was,
			  const struct core_card *now, unsigned pre, const struct mgo_evq *q,
			  bool *hit, struct core_card **out);
/* One attempt of a card op: reads, decides, writes with mgo_card_cas. *hit false: the
 * precondition moved between the read and the write (nothing written), try again. */
typedef enum core_rc (*mgo_attempt_fn)(struct mgo_conn *c, const void *arg, bool *hit,
				       struct core_card **out);
/* The head of every attempt: the card as read, its board, and a private copy to decide on. */
struct mgo_attempt {
	struct core_card *was, *now;
	struct core_board b;
};
/* NOT_FOUND, STORE_UNAVAILABLE, NOMEM, INTERNAL (no board). End with mgo_attempt_end always. */
enum core_rc mgo_attempt_begin(struct mgo_conn *c, const char *id, struct mgo_attempt *a);
/* The same without the board (a->b stays empty): for the writes whose rules never look at
 * it (renew, release, revoke, the reaper's transfer and exact release). */
enum core_rc mgo_attempt_begin_card(struct mgo_conn *c, const char *id, struct mgo_attempt *a);
void mgo_attempt_end(struct mgo_attempt *a);
/* Runs attempts until one hits or refuses, at most MGO_CAS_TRIES; a card that keeps moving
 * answers `exhausted`. out may be NULL. */
enum core_rc mgo_card_retry(struct store *st, const struct store_actor *actor,
			    mgo_attempt_fn fn, const void *arg, enum core_rc exhausted,
			    struct core_card **out);
/* The same on an open connection (c->actor and c->now as the caller set them). */
enum core_rc mgo_card_retry_on(struct mgo_conn *c, mgo_attempt_fn fn, const void *arg,
			       enum core_rc exhausted, struct core_card **out);
/* The board config of a card: NOT_FOUND becomes INTERNAL (a card never outlives its board). */
enum core_rc mgo_board_read(struct mgo_conn *c, const char *name, struct core_board *out);
/* A lookup over cards read on demand (for core_blockers_*); errors are remembered. */
struct mgo_lookup {
	struct mgo_conn *c;
	struct core_card **cache;
	size_t n, cap;
	enum core_rc rc;
};
struct core_card_lookup mgo_lookup_init(struct mgo_lookup *lk, struct mgo_conn *c);
void mgo_lookup_release(struct mgo_lookup *lk);
struct mgo_actor mgo_actor_name(const struct store_actor *actor);

/* Moves card `now` (a private copy, `was` as read) to `to` with reason and a
 * card_state_changed event ({from,to} + `extra`, stolen) appended to q (may be NULL: none
 * queued before), then writes it with mgo_card_cas (pre | STATE). When it entered the
 * completed column by a non-machine write, runs the unblocked cascade. A move to the current
 * column queues no event (other changes in `now` are still written). */
enum core_rc mgo_state_move(struct mgo_conn *c, const struct core_card *was,
			    struct core_card *now, const struct core_board *b, const char *to,
			    const char *reason, json_t *extra, unsigned pre, struct mgo_evq *q,
			    bool *hit, struct core_card **out);
/* Its two halves, for a write that adds more to the same update (an owned write that also
 * releases): the move of `now` with its event queued (extra stolen; *moved false: already
 * there, nothing queued), and what follows a committed move (the unblocked cascade). */
enum core_rc mgo_state_apply(struct mgo_conn *c, struct core_card *now, const char *to,
			     const char *reason, json_t *extra, struct mgo_evq *q, bool *moved);
void mgo_state_after(struct mgo_conn *c, const struct core_board *b, const char *id,
		     const char *to, const char *reason);

/* ---- the ops, by file ---- */

/* mongo_effect.c */
/* Matches q's events on `card` (a private copy about to be written, changed by the
 * consume_labels of the matches: *labels_changed) and marks each matched event's outbox entry
 * with its deliveries; queues the consumption event. */
enum core_rc mgo_effects_match(struct mgo_conn *c, struct core_card *card, struct mgo_evq *q,
			       bool *labels_changed);
/* Inserts the deliveries q's events carry (after the events are in `events`). */
enum core_rc mgo_effects_store(struct mgo_conn *c, const struct mgo_evq *q);
void mgo_subs_cache_release(struct mgo *m);
/* Deletes the settled deliveries older than the newest 10 000 (the maintenance thread). */
void mgo_deliveries_trim(struct mgo *m);
enum core_rc mgo_sub_put(struct store *st, const struct store_sub *s, const char *secret_if_new,
			 bool *created, struct store_sub **out);
enum core_rc mgo_sub_get(struct store *st, const char *board, const char *name,
			 struct store_sub **out);
/* Every subscription of board `board` whose on.to_states names column `from` names `to`
 * instead (the column rename carries its subscriptions along); idempotent, so a resumed
 * rename repeats it harmlessly. */
enum core_rc mgo_subs_column_rename(struct mgo_conn *c, const char *board, const char *from,
				    const char *to);
enum core_rc mgo_sub_list(struct store *st, const char *board, struct store_sub ***out,
			  size_t *n);
enum core_rc mgo_sub_delete(struct store *st, const char *board, const char *name);
enum core_rc mgo_delivery_get(struct store *st, const char *id, struct store_delivery **out);
enum core_rc mgo_delivery_list(struct store *st, const struct store_delivery_filter *f,
			       struct store_delivery ***out, size_t *n);
enum core_rc mgo_delivery_lease(struct store *st, const char *owner, int64_t lease_ms,
				struct store_delivery **out);
enum core_rc mgo_delivery_finish(struct store *st, const char *id,
				 const struct store_delivery_outcome *o,
				 struct store_delivery **out);
enum core_rc mgo_delivery_retry(struct store *st, const char *id, struct store_delivery **out);

/* mongo_boards.c */
enum core_rc mgo_board_list(struct store *st, struct core_board **boards, size_t *n);
enum core_rc mgo_board_get(struct store *st, const char *name, struct core_board *out);
enum core_rc mgo_board_put(struct store *st, const struct core_board *b,
			   const struct store_actor *actor);
/* Creates the default board when there is no board at all (open). */
enum core_rc mgo_board_default(struct mgo *m);

/* mongo_admin.c */
enum core_rc mgo_board_column_rename(struct store *st, const char *board, const char *from,
				     const char *to, const struct store_actor *actor,
				     size_t *touched);
enum core_rc mgo_labels_sweep(struct store *st, const struct store_label_sweep *sw,
			      const struct store_actor *actor, size_t *touched);
/* Pushes one board-level event into board `name`'s outbox and delivers it (mongo_boards.c). */
enum core_rc mgo_board_event(struct mgo_conn *c, const char *name, enum core_event_type type,
			     const char *reason, json_t *payload);
/* Writes b over its document (upsert), optionally requiring column `must_have` in the stored
 * one (*hit false when it is gone), with a board_updated event unless payload is NULL. */
enum core_rc mgo_board_write(struct mgo_conn *c, const struct core_board *b,
			     const char *must_have, json_t *payload, bool *hit);

/* mongo_cards.c */
enum core_rc mgo_card_create(struct store *st, const struct store_card_create *in,
			     const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_get(struct store *st, const char *id, struct core_card **out);
enum core_rc mgo_card_list(struct store *st, const struct store_card_filter *f,
			   struct core_card ***out, size_t *n, char **next);
enum core_rc mgo_card_patch(struct store *st, const char *id, const struct store_card_patch *p,
			    const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_delete(struct store *st, const char *id, const struct store_actor *actor);
enum core_rc mgo_labels_count(struct store *st, const char *board, const char *const *boards,
			      json_t **out);
/* Appends {board: ..} / {board: {$in: ..}} for a board filter (either may be NULL). */
bool mgo_board_filter_append(bson_t *filter, const char *board, const char *const *boards);
/* Runs a card query into a new array (at most `limit`; 0: no limit). */
enum core_rc mgo_cards_query(struct mgo_conn *c, const bson_t *filter, const bson_t *opts,
			     struct core_card ***out, size_t *n);

/* mongo_workflow.c */
enum core_rc mgo_card_set_state_from(struct store *st, const char *id, const char *from,
				     const char *to, const char *reason,
				     const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_reopen(struct store *st, const char *id, const char *to,
			     const char *reason, const struct store_actor *actor,
			     struct core_card **out);
enum core_rc mgo_card_labels_set(struct store *st, const char *id, const struct core_strv *labels,
				 const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_labels_adjust(struct store *st, const char *id, const struct core_strv *add,
				    const struct core_strv *remove,
				    const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_comment_add(struct store *st, const char *id, const char *body,
				  const struct store_actor *actor, struct core_card **out);

/* Appends a comment by c->actor to `now` with its event queued into q, within the card
 * limits; the caller's update must pin the comment count (MGO_PRE_COMMENTS). */
enum core_rc mgo_comment_apply(struct mgo_conn *c, struct core_card *now, const char *body,
			       struct mgo_evq *q);

/* mongo_claims.c */
/* Clears the claim of a->now (a->was as read) with its card_released event ({marker, epoch},
 * reason may be NULL) and writes it guarded on the claim as read. */
enum core_rc mgo_release_write(struct mgo_conn *c, struct mgo_attempt *a, const char *reason,
			       bool *hit, struct core_card **out);
enum core_rc mgo_card_claim(struct store *st, const char *id, const char *marker,
			    int64_t lease_ms, const struct store_actor *actor,
			    struct store_claim_result *out);
enum core_rc mgo_card_claim_next(struct store *st, const struct store_claim_next *in,
				 const struct store_actor *actor, struct store_claim_result *out);
enum core_rc mgo_card_renew(struct store *st, const char *id, const struct core_token *t,
			    int64_t lease_ms, const struct store_actor *actor,
			    struct core_card **out);
enum core_rc mgo_card_revoke(struct store *st, const char *id, const struct store_actor *actor,
			     struct core_card **out);
/* Clears a->now's claim and queues its card_released event ({marker, epoch}, reason may be
 * NULL) into q; the caller writes it guarded on the claim as read. */
void mgo_release_apply(struct mgo_conn *c, struct mgo_attempt *a, const char *reason,
		       struct mgo_evq *q);
enum core_rc mgo_card_release(struct store *st, const char *id, const struct core_token *t,
			      const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_owned_write(struct store *st, const char *id,
				  const struct store_owned_write *w,
				  const struct store_actor *actor, struct core_card **out);

/* mongo_reaper.c */
/* ---- metrics (mongo_stats.c) ---- */
/* Counts the pool's commands and errors into m (before any client is popped). */
bool mgo_stats_attach(struct mgo *m);
/* Commands started by the calling thread so far, any store (tests: an op's round trips). */
uint64_t mgo_round_trips_here(void);
enum core_rc mgo_stats(struct store *st, struct metrics_sink *out);

enum core_rc mgo_reaper_list_expired(struct store *st, size_t batch, struct core_card ***out,
				     size_t *n);
enum core_rc mgo_reaper_list_repair(struct store *st, size_t batch, struct core_card ***out,
				    size_t *n);
enum core_rc mgo_reaper_transfer(struct store *st, const char *id, const struct core_token *prev,
				 const char *marker, int64_t lease_ms, struct core_card **out);
enum core_rc mgo_reaper_release_exact(struct store *st, const char *id,
				      const struct core_card *expect,
				      const struct store_actor *actor);
/* mongo_reaper_batch.c: the reaper's batches, looping the single operations */
enum core_rc mgo_reaper_transfer_many(struct store *st, struct store_transfer *v, size_t n,
				      const char *marker, int64_t lease_ms);
enum core_rc mgo_reaper_act(struct store *st, struct store_reaper_act *v, size_t n,
			    const struct store_actor *actor);
/* mongo_secret.c */
enum core_rc mgo_secret_get(struct store *st, const char *name, unsigned char *out);

/* mongo_runs.c */
/* Run `id` as stored, tombstones included: NOT_FOUND, STORE_UNAVAILABLE. Caller frees. */
enum core_rc mgo_run_read_any(struct mgo_conn *c, const char *id, struct core_run **out);
enum core_rc mgo_run_create(struct store *st, const struct store_run_create *in,
			    const struct store_actor *actor, struct core_run **out);
enum core_rc mgo_run_get(struct store *st, const char *id, struct core_run **out);
enum core_rc mgo_run_get_any(struct store *st, const char *id, struct core_run **out);
enum core_rc mgo_run_update(struct store *st, const char *id, const struct store_run_update *u,
			    const struct store_actor *actor, struct core_run **out);
enum core_rc mgo_run_cancel(struct store *st, const char *id, const struct store_actor *actor,
			    struct core_run **out);
enum core_rc mgo_run_prune(struct store *st, const char *id, const struct store_actor *actor);
enum core_rc mgo_run_promote_if_orphaned(struct store *st, const char *id,
					 struct core_run **out, bool *promoted);
enum core_rc mgo_run_count_for_card(struct store *st, const char *card_id, size_t *n);
/* mongo_runs_list.c */
enum core_rc mgo_run_list(struct store *st, const struct store_run_filter *f,
			  struct core_run ***out, size_t *n, char **next);
/* After run_create's insert: retires card's runs past CORE_RUN_HISTORY_MAX that it may
 * (core_run_retirable), each by one conditional update. */
enum core_rc mgo_runs_retain(struct mgo_conn *c, const struct core_card *card);

#endif
