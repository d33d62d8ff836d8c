/* Internals of the Mongo twin (DESIGN §9, ADR-096): the document shapes, the limits and
 * struct mgo. Not a public header: store/store.h is. What each concern shares is in its own
 * header: mongo_db.h (connections, driver helpers, breaker, clock, log, metrics),
 * mongo_codec.h (BSON), mongo_events.h (outbox, pulls, drain, tail, board_seq), mongo_cas.h
 * (the read-decide-CAS step of card writes), mongo_ops.h (the store ops by file).
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
#include "store/store_twins.h"

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
/* A write that finds an earlier write's entries in its document's outbox, not yet in
 * `events`, leaves them this long (from when they were queued) to their own writer before it
 * delivers them itself (mongo_outbox.c, peers_settle); below MGO_GAP_GRACE_MS, so a reader
 * waits out such a hole rather than stepping over it. */
#define MGO_PEER_WAIT_MS 1000
/* A conditional update missed this often: the document kept changing under it (a holder's
 * write then answers busy, 503, never a conflict it was not refused for; DESIGN §16). */
#define MGO_CAS_TRIES 16
/* Writers that collided (on a seq, on a document's version) all read at the same moment: a
 * jittered nap growing with `tries` (up to 32 ms) spreads their next tries, so they do not
 * collide again in lockstep (FerretDB, many reaper workers, many writers of one run). */
void mgo_backoff(int tries);
/* DESIGN §17: a held capacity slot younger than this is not judged by the repair pass (its
 * claim's CAS may be under way); older, it is compared with its card (mongo_slots_repair.c). */
#define MGO_SLOT_GRACE_MS 60000
#define MGO_SEQ_TRIES 16       /* an event insert that keeps meeting taken seqs gives up */
#define MGO_FILLER "filler"    /* marks an `events` document that fills an unused seq */
/* Marks an outbox entry pushed before its card was known (claim-next's card_claimed): its
 * writer matches it after the write; a drain that finds it unmatched matches it itself
 * (mgo_effects_match_late). */
#define MGO_DLV_LATE "dlv_late"
/* The counters document whose seq is the trim mark: every seq at or below may be deleted. */
#define MGO_TRIMMED_ID "events_trimmed"
/* Marks a filler a reader inserted to seal a hole it steps over (mongo_seal.c). */
#define MGO_SEALED "sealed"
/* The most seqs a reader seals at once before stepping over an old hole (mongo_seal.c), and
 * the widest range of seqs a board's tail searches for the free ones. */
#define MGO_SEAL_MAX ((int64_t)4096)
#define MGO_SEAL_SCAN_MAX ((int64_t)100000)
#define MGO_SEAL_ROUNDS 8 /* seals (and trim mark reads) per listing call */
#define MGO_EVENTS_KEEP_DEFAULT ((int64_t)100000) /* the audit tail keeps the newest seqs */
#define MGO_TRIM_BATCH ((int64_t)10000) /* seqs per delete when trimming `events` */
#define MGO_TRIM_ROUNDS 50     /* deletes per trim; the rest waits for the next maintenance */
/* A waiting tail (mongo_tail.c) naps between polls, from MIN doubling to MAX while nothing
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
/* The deferred outbox pull (mongo_pull.c): a writer whose events reached `events` hands
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
	 * indexes still decide (mongo_insert.c). MongoDB's $inc is atomic: no lock. */
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

	/* ---- the subscriptions cache (mongo_subs.c): guarded by subs_mu ---- */
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
	/* ---- the driver's counters (mongo_stats.c; atomic, from its monitoring callbacks) ---- */
	atomic_uint_least64_t round_trips;   /* commands started */
	atomic_uint_least64_t err_command;   /* commands failed */
	atomic_uint_least64_t err_heartbeat; /* server monitor checks failed */
	struct metrics_hist cmd_duration;    /* round trips of the commands that succeeded */

	/* ---- the tail's wake-ups (mongo_tail.c): guarded by tail_mu ---- */
	pthread_mutex_t tail_mu;
	pthread_cond_t tail_cv; /* CLOCK_MONOTONIC; broadcast when this process stores events */
	uint64_t tail_gen;      /* bumped with each broadcast */
	/* The last unfiltered tail query that found nothing new: from tail_memo_after, at
	 * tail_memo_ms (monotonic), before write tail_memo_gen. A call from the same place
	 * within MGO_TAIL_FULL_MS starts with the counter instead of the query. */
	int64_t tail_memo_after, tail_memo_ms;
	uint64_t tail_memo_gen;
	bson_t *probe_doc; /* the events counter as last read (owned), at probe_ms (mono) */
	/* board_seq holes a board's tail stepped over (boardd_mongo_board_seq_holes_total),
	 * each counted once per process: per board (a small table; a board pushed out of it
	 * may count a hole again), the highest board_seq counted so far. Under tail_mu. */
	struct {
		char board[CORE_NAME_MAX + 1];
		int64_t hw;
	} holes_hw[32];
	uint64_t holes_board;
	int64_t probe_ms;
	/* The deliverers' gate (mongo_deliveries.c), under tail_mu too: a lease that found nothing
	 * due lets this process's next leases skip the query until lease_quiet_until (server
	 * ms): MGO_LEASE_QUIET_MS later, or sooner when a retry it wrote falls due. This
	 * process's own enqueues and retries (lease_gen moves) open it at once. */
	int64_t lease_quiet_until;
	uint64_t lease_gen;
	bool lease_asking;         /* a deliverer of this process is querying ... */
	uint64_t lease_asking_gen; /* ... since this generation */

	/* ---- the deferred outbox pulls (mongo_pull.c): guarded by pull_mu ---- */
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

#endif
