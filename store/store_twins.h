/* store_twins — what only the twins, their tests and the benches use, beside store/store.h
 * (which every caller includes): the helpers both twins share inside a mutation (fences
 * counted, limits, the ack bound to the thread, the effects' matching), each twin's own
 * opening options and extras (FS stats, compaction, fault injection), and the test clock.
 * A handler in api/ or server/ never needs it: it opens a store with store_open and reaches
 * it through the store_*() wrappers.
 */
#ifndef BOARDD_STORE_TWINS_H
#define BOARDD_STORE_TWINS_H

#include "store/store.h"

/* ---- shared by the twins inside a mutation ---- */

/* For twins: the ack bound to this thread, or NULL (then wait before returning). */
struct store_ack *store_ack_current(void);

/* For twins: a fenced write of `t` was refused on card c as the twin observed it; counts the
 * reason (core_fence_why) for store_stats. Nothing when the fence passes or c is NULL. */
void store_fence_refused(struct store *st, const struct core_card *c, const struct core_token *t);
/* For twins: a run write (create, update, heartbeat) was refused because its claim is not the
 * card's current claim, or another token holds it; served as reason "run". */
void store_run_fence_refused(struct store *st);

/* For twins, before a write that grows a card: PAYLOAD_TOO_LARGE when c has more comments
 * than the store allows or is larger than CORE_CARD_BYTES_MAX; detail (may be NULL) says
 * which. */
enum core_rc store_card_fits(const struct store *st, const struct core_card *c, char *detail,
			     size_t detail_len);

/* For twins: sorts v (newest update first, then id) and cuts it to limit, freeing the rest;
 * *truncated tells whether anything was cut. */
void store_attention_finish(struct store_attention *v, size_t *n, size_t limit,
			    bool *truncated);

/* A deep copy of s (through its stored form); NULL on OOM. */
struct store_sub *store_sub_dup(const struct store_sub *s);
/* What a put stores over `old` (NULL: none yet), the same in both twins: a copy of s that
 * keeps old's secret when s brings none (secret_if_new when there is no old), old's
 * created_at (else now), no disabled_reason, updated_at now. New; NULL on OOM. */
struct store_sub *store_sub_put_merge(const struct store_sub *s, const struct store_sub *old,
				      const char *secret_if_new, int64_t now);

/* The matching both twins run in a mutation's atomic step (store/effect.c). */
/* Does event (type, reason, the state its payload moved the card to or NULL) on `card` (its
 * labels after the step) fire s? The state of a card_created event is the card's. */
bool store_effect_match(const struct store_sub *s, enum core_event_type type, const char *reason,
			const char *to_state, const struct core_card *card);
/* The event key of e's deliveries, "<board>:<board_seq>": a subscription is one board's, so
 * neither its webhook-id nor its body tells how much other boards write (DESIGN §11). */
#define STORE_DELIVERY_EKEY_MAX (CORE_NAME_MAX + 24)
void store_delivery_ekey(char *out, size_t cap, const struct core_event *e);
/* The request body of a delivery: {"type":"board.event","event":<e>,"card":<c or null>},
 * the event as its board sees it (seq: its board_seq).
 * New string (caller frees), NULL on OOM. */
char *store_delivery_body(const struct core_event *e, const struct core_card *card);
/* A new pending delivery of event key `ekey` (FS: its seq; Mongo: its _id) to s. */
struct store_delivery *store_delivery_new(const struct store_sub *s, const char *ekey,
					  int64_t seq, enum core_event_type type,
					  const char *card_id, char *body, int64_t now);

/* ---- the test clock ---- */

/* Test hook: replaces the clock (NULL restores the twin's own). */
void store_clock_set(struct store *st, store_clock_fn fn, void *ctx);

/* ---- the FS twin (store_open("fs:DIR") opens it with these options) ---- */

struct store_fs_options {
	const char *dir;
	size_t compact_bytes;  /* journal size that triggers a snapshot; 0: 64 MiB */
	size_t events_keep;    /* events kept in the audit tail; 0: 100 000 */
	const char *hostname;  /* for the legacy same-host sweep; NULL: gethostname() */
	bool serial_load;      /* decode the snapshot on the opening thread alone (tests compare
				* it with the default: a second thread checks and decodes while
				* the opening one applies) */
};

enum core_rc store_fs_open(const struct store_fs_options *o, struct store **out, char *err,
			   size_t errlen);

/* FS twin counters (tests, metrics). Added after the first interface; nothing above changed. */
struct store_fs_stats {
	uint64_t commits;       /* journal lines written since open */
	uint64_t syncs;         /* fdatasync calls on the journal since open (group commit) */
	uint64_t writes;        /* write calls on the journal since open: one per group commit
				 * (per generation it wrote to; more only past IOV_MAX pieces) */
	uint64_t compactions;   /* snapshots written since open */
	uint64_t generation;    /* current journal generation */
	uint64_t journal_bytes; /* records in the current generation (its logical size) */
	uint64_t journal_alloc_bytes; /* its file: records, then the pre-allocated zeros */
	uint64_t journal_grows; /* zero-filled steps added ahead of the writer since open */
	bool failed;            /* a write or sync failed: writes refused until a fresh snapshot
				 * of the rolled-back state is durable (retried by the next write
				 * and every second in the background) */
	bool snapshot_held;     /* a snapshot waits at STORE_FS_FAULT_HOLD_SNAPSHOT (tests) */
	bool sync_held;         /* a journal sync waits at STORE_FS_FAULT_HOLD_SYNC (tests) */
};
/* Fills *out; BAD_REQUEST when st is not an FS store. */
enum core_rc store_fs_stats_get(struct store *st, struct store_fs_stats *out);
/* Snapshot now and start a new journal generation, synchronously (tests, shutdown).
 * BAD_REQUEST when st is not an FS store. */
enum core_rc store_fs_compact(struct store *st);

/* Test-only fault injection (issue 5, storage faults): while a fault is on, the FS twin's own
 * write(2) to its journal and snapshot files (STORE_FS_FAULT_WRITE) and/or its fdatasync and
 * fsync calls (STORE_FS_FAULT_SYNC) fail with EIO without being made, as a disk that refuses;
 * STORE_FS_FAULT_SLOW_SYNC only slows the journal's syncs down, STORE_FS_FAULT_SLOW_SNAPSHOT
 * a snapshot's (a compaction's or a recovery's).
 * Turning faults off lets the next write attempt recovery at once (no back-off).
 * BAD_REQUEST when st is not an FS store. */
enum store_fs_fault {
	STORE_FS_FAULT_WRITE = 1,
	STORE_FS_FAULT_SYNC = 2,
	STORE_FS_FAULT_SLOW_SYNC = 4, /* not a failure: every journal sync first sleeps 100 ms,
				       * as a slow disk (group-commit tests) */
	STORE_FS_FAULT_SLOW_SNAPSHOT = 8, /* not a failure: a snapshot's fsync first sleeps
					   * 300 ms (a recovery other threads meet under way) */
	STORE_FS_FAULT_HOLD_SNAPSHOT = 16, /* not a failure: a snapshot written and fsynced
					    * waits while it is on, before it is installed
					    * (stats.snapshot_held says it waits): the tests
					    * make the flush of what it captured fail meanwhile */
	STORE_FS_FAULT_HOLD_SYNC = 32, /* not a failure: a journal sync (its group written)
					* waits while it is on, before it is made or refused
					* (stats.sync_held says it waits) */
};
enum core_rc store_fs_fault_set(struct store *st, unsigned faults, bool on);

/* ---- the Mongo twin (store/mongo; built when libmongoc is found: BOARDD_HAVE_MONGO) ---- */

struct store_mongo_options {
	const char *uri;             /* mongodb://...; the database is the URI's path ("boardd") */
	int64_t unleased_horizon_ms; /* the un-leased arm's horizon (ADR-096 §6); 0: 24 h */
	/* Test hook (NULL in production): called by every conditional card write between its
	 * read and its write, so a test can interleave a concurrent change deterministically. */
	void (*test_before_write)(void *ctx, const char *card_id);
	/* Test hook (NULL in production): called before each read a background poll makes,
	 * naming it ("tail": `events`, "probe": the events counter, "lease": `deliveries`), so
	 * a test can count what an idle poller asks the database; and, on the thread that sends
	 * it, before each outbox pull ("pull": one per bulk of the puller, one per writer's or
	 * drain's own pull) and each insert of events ("insert": one per shared insert). */
	void (*test_read)(void *ctx, const char *what);
	void *test_ctx;
};

/* Opens the Mongo twin: client pool, indexes, the server clock, the default board on a new
 * database. STORE_UNAVAILABLE when the server cannot be reached; err says why (never the
 * URI's credentials). Caller closes with store_close. */
enum core_rc store_mongo_open(const struct store_mongo_options *o, struct store **out,
			      char *err, size_t errlen);

#endif
