/* store — one interface, two twins (DESIGN §9).
 *
 * A twin defines one `const struct store_ops` with designated initializers and embeds
 * `struct store base` as the first field of its own struct (git's ref_store shape). Callers
 * use the store_*() wrappers only; the wrapper checks arguments and optional methods.
 *
 * Every function returns an enum core_rc. Results come through OUT parameters, which are
 * NULL/zero on failure; on failure nothing was changed. A store failure (I/O, database) is
 * CORE_ERR_STORE_UNAVAILABLE, never an empty success. All functions are thread-safe.
 *
 * "now": each twin supplies its own clock (FS: the host clock; Mongo: the database server's).
 * Tests may inject a clock with store_clock_set() (store/store_twins.h).
 *
 * Every mutation appends its events (DESIGN §7) atomically with the change and returns only
 * after the change is durable.
 */
#ifndef BOARDD_STORE_H
#define BOARDD_STORE_H

#include "core/core.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;
struct metrics_sink;
struct store_fs_options;    /* store/store_twins.h */
struct store_mongo_options; /* store/store_twins.h */
struct store_idem_ops;      /* §18, at the end */

/* A clock the tests can inject; returns ms since the epoch. */
typedef int64_t (*store_clock_fn)(void *ctx);

/* Who asks: `name` is recorded as the event actor (machine events blank it). A claim records
 * the name of the actor that took it as its holder (DESIGN §11), and every fenced write of
 * that claim (renew, release, owned writes, run writes) must come from an actor of that name,
 * else CLAIM_CONFLICT. An actor without a name (NULL or "") takes unbound claims. */
struct store_actor {
	const char *name;
	/* The claim epoch an agent token acts under (DESIGN §13): both twins record it on the
	 * actor's events as payload.actor_epoch. 0: none. */
	int64_t epoch;
	/* The actor holds the operator role: its SetStateFrom may refile a card from one
	 * terminal column into another (core_transition_check, CORE_MOVER_OPERATOR). false (a
	 * bot, the default): that move is TERMINAL_STATE_EXIT. */
	bool operator_role;
};

/* The mover a SetStateFrom by actor is (NULL: a bot). */
enum core_mover store_actor_mover(const struct store_actor *actor);

/* The holder name an actor presents: its name, or NULL when it has none. */
const char *store_actor_holder(const struct store_actor *actor);

/* ---- arguments ---- */

struct store_card_create {
	const char *id;    /* NULL: generated */
	const char *board; /* NULL: "default" */
	const char *title; /* NULL: "" */
	const char *body;  /* NULL: "" */
	const char *state; /* NULL: the board's first column */
	const struct core_strv *labels;   /* may be NULL */
	const struct core_strv *blockers; /* may be NULL */
	int32_t priority;                 /* claim-next order (DESIGN §12) */
	int64_t not_before;               /* DESIGN §17: 0 none; else not claimable before */
};

struct store_card_patch {
	const char *title;                /* NULL: unchanged */
	const char *body;                 /* NULL: unchanged */
	const struct core_strv *blockers; /* NULL: unchanged */
	bool has_priority;                /* false: priority unchanged */
	int32_t priority;
	bool has_not_before;              /* false: not_before unchanged */
	int64_t not_before;               /* 0: clears the schedule (DESIGN §17) */
};

struct store_card_filter {
	const char *board;               /* NULL: any */
	const char *const *boards;       /* NULL: any; else NULL-terminated list the caller may see */
	const char *state;               /* NULL: any */
	const char *label;               /* NULL: any */
	int claimed;                     /* -1 any, 0 unclaimed, 1 claimed */
	size_t limit;                    /* 1..1000 */
	const char *after;               /* opaque cursor from a previous page, or NULL */
};

/* What an owned write sets. */
enum store_owned_kind {
	STORE_OWNED_STATE,
	STORE_OWNED_LAST_RUN,
	STORE_OWNED_AWAITING_INPUT,
	STORE_OWNED_GAVE_UP,
	STORE_OWNED_COMMENT, /* a worker's comment, by the claim's holder (DESIGN §11, §12) */
	STORE_OWNED_NOTHING, /* no write: with .release, the release alone (a retry release) */
};

struct store_owned_write {
	enum store_owned_kind kind;
	struct core_token token;
	const char *state;  /* STATE: target column */
	/* STATE: NULL, or the column the card must still be in (else STATE_CONFLICT, nothing
	 * changed): a holder that decided on where the card was never moves it out of a column
	 * somebody chose since (the reaper's filing, boardctl's give-back). */
	const char *from;
	const char *reason; /* STATE: reason (may be NULL) */
	const char *run_id; /* LAST_RUN (NULL clears) */
	bool awaiting_input;
	/* GAVE_UP: NULL or !set clears; a state that is no column of the card's board is
	 * TRANSITION_REJECTED (core_gave_up_check) */
	const struct core_gave_up *gave_up;
	const char *comment;                /* COMMENT: the body, non-empty */
	/* The reason the GAVE_UP event and the release's event carry (NULL: none); the reaper's
	 * "watchdog" makes them machine events (DESIGN §7). */
	const char *event_reason;
	/* Then release the claim, fenced by the same token, in the same atomic step (the FS
	 * twin: one journal line; the events of both). *out is the card as released. A twin
	 * without store_ops.owned_write_release gets the write, then a release (see there). */
	bool release;
	/* With release (DESIGN §17): the claim ended without the work being done. In the same
	 * step the card's attempts grow by one (core_retry_count under the board's policy,
	 * store_retry_default for a board without one): LATER sets not_before; EXHAUSTED files
	 * the card into the board's failed column with gave_up {reason "attempts_exhausted"}
	 * (a machine event when event_reason is "watchdog"). A write into the completed
	 * column never counts one. */
	bool retry;
};

struct store_claim_result {
	struct core_token token; /* token.marker borrowed from card->claim.marker */
	bool fresh;
	struct core_card *card; /* caller frees */
	/* claim-next with nothing to take (OK, card NULL): the earliest not_before (store clock,
	 * ms) of a card that would fit but for its schedule, in a column with room; 0: none.
	 * A waiting claim-next tries again then (DESIGN §17: no polling loop). */
	int64_t wake_at;
	/* CAPACITY_REACHED, NOT_YET: what the twin found (the column or board and its limit,
	 * the time), for the problem's detail. */
	char detail[192];
};

/* claim-next (DESIGN §12): a fresh claim of the best unclaimed card (core_pick_fits,
 * core_pick_before) in one atomic step. */
/* Where a reaper listing resumes (store_reaper_list_expired_after): after the candidate
 * (arm, at, id) in the listing's order. Arm 0: leased, fenced claims by (lease_until, id);
 * arm 1 (the Mongo twin's stripped claims, after all of arm 0): by (claimed_at, id). */
struct store_reaper_cursor {
	bool set; /* false: from the first */
	int arm;
	int64_t at;
	char id[CORE_ID_MAX + 1];
};

struct store_claim_next {
	const char *board;
	const char *marker;
	int64_t lease_ms;
	const struct core_strv *columns; /* NULL or empty: the board's eligible columns */
	const struct core_strv *labels;  /* NULL or empty: any */
	const char *holder; /* the name of the token taking it (DESIGN §11's claim.holder): set
			     * by store_card_claim_next from the actor, whatever the caller says */
};

/* A run is created by the card's current holder only (marker and actor, DESIGN §11): else
 * CLAIM_CONFLICT. It records the claim's epoch (core_run.claim_epoch). */
struct store_run_create {
	const char *id; /* NULL: generated */
	const char *card_id;
	const char *marker; /* becomes the owner; must be the card's claim marker */
	const char *status;
	int64_t lease_ms;
};

/* Run writes by the owner: CLAIM_CONFLICT unless the run's claim is still the card's current
 * claim (core_run_of_claim) and the actor is its holder; RUN_FINAL when the run is final. */
struct store_run_update {
	const char *marker;       /* must equal the run's owner */
	const char *status;       /* NULL: unchanged */
	const char *continuation; /* NULL: unchanged */
	bool clear_continuation;
	const char *failure_code; /* NULL: unchanged */
	const char *result;       /* compact JSON text (<= CORE_RUN_RESULT_MAX); NULL: unchanged */
	const char *error;        /* <= CORE_RUN_ERROR_MAX bytes; NULL: unchanged */
	const char *output;       /* appended to the output, whose tail of CORE_RUN_OUTPUT_MAX
				   * bytes is kept (core_run_output_append; valid UTF-8); NULL:
				   * unchanged (DESIGN §20) */
	int64_t lease_ms;         /* the run lock is renewed to now + lease_ms; 0: the run's own */
};

/* The runs listing (DESIGN §20): newest first (core_run_newer_cmp), tombstones left out. */
struct store_run_filter {
	const char *card_id;       /* NULL: any card */
	int64_t card_since;        /* with card_id: the card's created_at. Runs created before it
				    * were an earlier card's of that id (deleted, then created
				    * again): not this card's */
	const char *board;         /* NULL: any */
	const char *const *boards; /* NULL: any; else NULL-terminated list the caller may see */
	const char *status;        /* NULL: any */
	size_t limit;              /* 1..1000 */
	const char *after;         /* a cursor from a previous page (core_run_cursor_parse), or
				    * NULL */
};

/* The label admin sweeps (DESIGN §8: POST /v1/labels/rename, /merge, DELETE /v1/labels/{name}):
 * every card of the scope carrying one of `from` is rewritten with core_labels_transform, each
 * card's write guarded on the labels it was read with (ADR-096 §9). */
enum store_label_sweep_kind {
	STORE_LABELS_RENAME, /* from = {one label}, to */
	STORE_LABELS_MERGE,  /* from = {labels...}, to */
	STORE_LABELS_DELETE, /* from = {one label}, to = NULL */
};

struct store_label_sweep {
	enum store_label_sweep_kind kind;
	const char *board;            /* NULL: every board in `boards` */
	const char *const *boards;    /* NULL: any; else NULL-terminated list the caller may see */
	const struct core_strv *from;
	const char *to;
};


/* ---- effects (DESIGN §14): subscriptions and the webhook outbox ----
 *
 * A subscription belongs to a board and is named there. Every event a mutation appends is
 * matched (core_sub_matches) against the enabled subscriptions of its board in the same atomic
 * step: a match enqueues one delivery and applies the subscription's consume_labels to the
 * card, and the consumption is recorded as one card_labels_changed event per card and step
 * (reason "consume_labels", payload {removed, subscriptions}) that is itself never matched (a one-shot fires one delivery, never a
 * cascade). A machine event matches nothing. */

struct store_sub {
	char *board;
	char *name;
	char *url;
	char *secret;                /* "whsec_<base64>"; never served */
	struct core_sub_filter on;
	struct core_strv consume;    /* consume_labels */
	bool enabled;
	char *disabled_reason;       /* NULL unless disabled by a 410 ("gone") */
	int64_t created_at, updated_at;
};

/* A subscription by name: the deliverer's lease passes over the deliveries of those whose
 * queue is full (server/deliver.c), so a hung receiver's backlog is not leased ahead of the
 * others' (DESIGN §16). */
struct store_sub_ref {
	const char *board;
	const char *name;
};

void store_sub_free(struct store_sub *s);
void store_subs_free(struct store_sub **v, size_t n);

#define STORE_DELIVERY_STATUSES(X)                                                           \
	X(STORE_DELIVERY_PENDING, "pending")                                                  \
	X(STORE_DELIVERY_DONE, "done")                                                        \
	X(STORE_DELIVERY_DEAD, "dead")

enum store_delivery_status {
#define STORE_DLV_ENUM(id, name) id,
	STORE_DELIVERY_STATUSES(STORE_DLV_ENUM)
#undef STORE_DLV_ENUM
	STORE_DELIVERY_STATUS_COUNT_
};
const char *store_delivery_status_name(enum store_delivery_status s);
/* -1 when unknown. */
int store_delivery_status_parse(const char *s);

struct store_delivery {
	char *id;          /* the webhook-id: "<event key>.<subscription>" */
	char *board;
	char *sub;         /* the subscription's name */
	int64_t event_seq; /* the event's board_seq (its board's sequence, DESIGN §11) */
	char *event_type;
	char *card_id;     /* may be NULL */
	char *body;        /* the request body, fixed at enqueue: {type, event, card} */
	enum store_delivery_status status;
	int attempts;      /* attempts made */
	int64_t next_at;   /* pending: not before */
	char *lease_owner; /* NULL: not leased */
	int64_t lease_until;
	int64_t lease_epoch; /* the fence of the outcome write; never repeats for an id */
	int last_status;   /* HTTP status of the last attempt; 0: none / no answer */
	char *last_error;  /* may be NULL */
	int64_t created_at, updated_at;
};

void store_delivery_free(struct store_delivery *d);
void store_deliveries_free(struct store_delivery **v, size_t n);

/* The fenced outcome of one delivery attempt (the deliverer judged it with
 * core_delivery_judge). */
struct store_delivery_outcome {
	const char *owner;   /* the lease owner */
	int64_t epoch;       /* the lease epoch */
	enum core_delivery_verdict verdict;
	int status;          /* the answer's HTTP status; 0: none */
	int64_t next_at;     /* RETRY */
	const char *error;   /* may be NULL */
	/* DISABLE: the subscription as the attempt read it (borrowed). The 410 disables only
	 * that version: not one deleted and created again under the name, nor one changed since
	 * (another url, re-enabled). NULL: the subscription is left as it is. */
	const struct store_sub *sub;
};

struct store_delivery_filter {
	const char *board;         /* NULL: any */
	const char *const *boards; /* NULL: any; else NULL-terminated list the caller may see */
	int status;                /* -1: any */
	size_t limit;              /* 1..1000 */
};

/* One TRANSFER of store_reaper_transfer_many. */
struct store_transfer {
	const char *id;
	struct core_token prev;  /* the claim as listed */
	enum core_rc rc;         /* OUT: what reaper_transfer would answer for this card */
	struct core_card *card;  /* OUT on rc OK: the card as the transfer left it; caller frees */
};

/* One card's action under its recovery token (store_reaper_act; DESIGN §6 step 6): up to two
 * owned writes applied in order, the last of which may carry .release; or, with none, an
 * exact release of `release_expect` (store_reaper_release_exact); or nothing. */
struct store_reaper_act {
	const char *id;
	struct store_owned_write w[2]; /* tokens: the wrapper sets each holder from the actor */
	size_t n_w;
	const struct core_card *release_expect; /* borrowed; used only when n_w == 0 */
	/* The release (the last write's, or the exact one) returns the card to the pool after
	 * a claim that ended without the work being done: an attempt is counted as with
	 * store_owned_write.retry (DESIGN §17). */
	bool retry;
	enum core_rc rc; /* OUT: the first failing step's rc (the steps before it stay done),
			  * else OK */
};

/* One card of the attention lane (DESIGN §15). */
struct store_attention {
	struct core_card *card; /* owned */
	unsigned reasons;       /* bits 1u << enum core_attention_reason; never 0 */
};

/* ---- deferred acknowledgement ----
 *
 * A write is acknowledged only once durable (DESIGN §9). A caller that must not hold a thread
 * through that wait (the HTTP front end: one thread per core serves every connection) brackets
 * a store call with store_ack_begin / store_ack_end on its own thread. A twin that supports it
 * (the FS store) then returns from a write once it is applied in memory and its journal record
 * appended (written by the group's flusher), and leaves the durability wait in the ack: store_ack_end says whether one is owed, and
 * store_ack_submit hands it to the store, which calls `done` exactly once, from its own thread,
 * when every line of the ack is durable (rc OK) or was rolled back after a failed write or
 * sync (STORE_UNAVAILABLE: the write never happened, answer 503). Until `done`, the caller must not
 * acknowledge. store_ack_wait is the blocking form, for a thread that makes several writes
 * and waits once (the reaper's workers). A later write that depends on an earlier one not
 * yet durable is journaled after it, so it is never durable without it. A read, or a write
 * answered without a line of its own (a refusal), may owe a wait too (the FS read barrier:
 * nothing is shown before it is durable, DESIGN §16): same ack, same outcome. Unbound
 * callers and the Mongo twin wait inside each call, as before.
 */
struct store_ack {
	/* filled by the store while bound */
	struct store *st;   /* the store owed a wait; NULL: none */
	uint64_t seq;       /* the last journal line of the ack */
	unsigned lines;     /* journal lines it covers */
	int64_t last_event; /* the highest event seq those lines carry (0: none) */
	bool compact;       /* the journal grew past its compaction threshold */
	/* completion */
	void (*done)(struct store_ack *ack, enum core_rc rc);
	struct store_ack *next; /* the store's queue */
};

/* Zeroes ack and binds it to the calling thread (one at a time per thread). */
void store_ack_begin(struct store_ack *ack);
/* Unbinds it; true when a durability wait is owed: then store_ack_submit must follow. */
bool store_ack_end(struct store_ack *ack);
/* Hands an owed wait to its store; `done` may run before this returns, on another thread. */
void store_ack_submit(struct store_ack *ack, void (*done)(struct store_ack *, enum core_rc));
/* Or waits on the calling thread: OK once durable, STORE_UNAVAILABLE when rolled back (a
 * thread that batches several writes into one wait: the reaper's pass workers). */
enum core_rc store_ack_wait(struct store_ack *ack);
/* Unbinds the calling thread's ack, if any, and returns it; store_ack_rebind puts it back.
 * For code that must not run under a caller's ack: a reaper pass started by an HTTP request
 * binds its own per worker, and waits for them before it returns. */
struct store_ack *store_ack_unbind(void);
void store_ack_rebind(struct store_ack *ack);

/* ---- the interface ---- */

/* Counters every twin keeps the same way (store_fence_refused); store_stats serves them. */
struct store_counters {
	atomic_uint_least64_t fence_refused[CORE_FENCE_REASON_COUNT_];
	atomic_uint_least64_t run_refused; /* run writes whose claim is gone (DESIGN §11) */
};

struct store {
	const struct store_ops *ops;
	store_clock_fn clock;
	void *clock_ctx;
	/* comments per card; 0: CORE_COMMENTS_MAX. Atomic: store_limits_set may run while HTTP
	 * threads serve (tests change it between requests); read with store_limits_comments. */
	atomic_size_t max_comments;
	/* DESIGN §17: max_attempts of a board without a retry policy (--run-ceiling); 0:
	 * CORE_RETRY_MAX_ATTEMPTS. Read with store_retry_default. */
	atomic_int retry_max_attempts;
	struct store_counters counters;
};

struct store_ops {
	const char *name;
	/* card_owned_write honours store_owned_write.release as one atomic step. When false,
	 * store_card_owned_write runs the write, then a fenced card_release: two steps, so a
	 * failure between them leaves the write done and the claim held (the caller gets the
	 * release's error; a recovery claim left so is the reaper's repair sweep's to free). */
	bool owned_write_release;
	void (*close)(struct store *st);
	/* An owed durability wait (see store_ack), queued or on this thread; both required of a
	 * twin that fills acks. */
	void (*ack_submit)(struct store *st, struct store_ack *ack);
	enum core_rc (*ack_wait)(struct store *st, struct store_ack *ack);
	/* flush / readiness */
	enum core_rc (*ping)(struct store *st);
	int64_t (*now)(struct store *st);

	enum core_rc (*board_list)(struct store *st, struct core_board **boards, size_t *n);
	enum core_rc (*board_get)(struct store *st, const char *name, struct core_board *out);
	enum core_rc (*board_put)(struct store *st, const struct core_board *b,
				  const struct store_actor *actor);
	/* DESIGN §17: the live claims taken from each column of b (per_col[i] for b->cols[i],
	 * by claim.from) and on the board (*total), recovery claims included. */
	enum core_rc (*board_claimed)(struct store *st, const struct core_board *b,
				      int64_t *per_col, int64_t *total);

	/* A card re-created under an id deleted before starts with claim_epoch at the id's
	 * highest epoch, so no epoch repeats (DESIGN §11). Over the limits: PAYLOAD_TOO_LARGE
	 * (store_card_fits; so do card_patch and card_comment_add). */
	enum core_rc (*card_create)(struct store *st, const struct store_card_create *in,
				    const struct store_actor *actor, struct core_card **out);
	enum core_rc (*card_get)(struct store *st, const char *id, struct core_card **out);
	enum core_rc (*card_list)(struct store *st, const struct store_card_filter *f,
				  struct core_card ***out, size_t *n, char **next);
	enum core_rc (*card_patch)(struct store *st, const char *id,
				   const struct store_card_patch *p, const struct store_actor *actor,
				   struct core_card **out);
	/* DEPENDENTS_OUTSTANDING while another card lists it in its blockers. */
	enum core_rc (*card_delete)(struct store *st, const char *id,
				    const struct store_actor *actor);

	/* The claim records store_actor_holder(actor) as its holder. A fresh claim of a card
	 * whose blockers are not all done: BLOCKERS_PENDING. */
	enum core_rc (*card_claim)(struct store *st, const char *id, const char *marker,
				   int64_t lease_ms, const struct store_actor *actor,
				   struct store_claim_result *out);
	/* OK with out->card NULL: nothing available now. NOT_FOUND: no such board;
	 * TRANSITION_REJECTED: a column unknown or terminal (core_pick_check). */
	enum core_rc (*card_claim_next)(struct store *st, const struct store_claim_next *in,
					const struct store_actor *actor,
					struct store_claim_result *out);
	/* lease_ms 0: the claim's own lease_ms. */
	enum core_rc (*card_renew)(struct store *st, const char *id, const struct core_token *t,
				   int64_t lease_ms, const struct store_actor *actor,
				   struct core_card **out);
	enum core_rc (*card_release)(struct store *st, const char *id, const struct core_token *t,
				     const struct store_actor *actor, struct core_card **out);
	enum core_rc (*card_owned_write)(struct store *st, const char *id,
					 const struct store_owned_write *w,
					 const struct store_actor *actor, struct core_card **out);
	/* SetStateFrom: from NULL = unconditional (operator). */
	enum core_rc (*card_set_state_from)(struct store *st, const char *id, const char *from,
					    const char *to, const char *reason,
					    const struct store_actor *actor, struct core_card **out);
	/* Reopen also releases any claim (card_released, reason "reopen"); the epoch stays. */
	enum core_rc (*card_reopen)(struct store *st, const char *id, const char *to,
				    const char *reason, const struct store_actor *actor,
				    struct core_card **out);
	/* The operator's lever (DESIGN §11): drops any claim, unfenced, with card_released
	 * reason "operator_revoke" by the actor. An unclaimed card is answered unchanged. */
	enum core_rc (*card_revoke)(struct store *st, const char *id,
				    const struct store_actor *actor, struct core_card **out);
	enum core_rc (*card_labels_set)(struct store *st, const char *id,
					const struct core_strv *labels,
					const struct store_actor *actor, struct core_card **out);
	enum core_rc (*card_labels_adjust)(struct store *st, const char *id,
					   const struct core_strv *add,
					   const struct core_strv *remove,
					   const struct store_actor *actor, struct core_card **out);
	enum core_rc (*card_comment_add)(struct store *st, const char *id, const char *body,
					 const struct store_actor *actor, struct core_card **out);
	/* label -> count over a board (NULL: all boards); *out is a new json object. */
	enum core_rc (*labels_count)(struct store *st, const char *board,
				     const char *const *boards, json_t **out);

	/* Events after seq `after`, oldest first, at most limit; waits up to wait_ms for one. */
	enum core_rc (*events_list)(struct store *st, const char *board, const char *const *boards,
				    int64_t after, size_t limit, int64_t wait_ms,
				    struct core_event **out, size_t *n, int64_t *next);
	/* Events of one board after board_seq `after`, oldest first, at most limit; waits up
	 * to wait_ms for one. *next: the board_seq to resume from. Read off a per-board index,
	 * never a scan of other boards' events (DESIGN §11). */
	enum core_rc (*events_list_board)(struct store *st, const char *board, int64_t after,
					  size_t limit, int64_t wait_ms, struct core_event **out,
					  size_t *n, int64_t *next);

	/* The cards that need an operator (DESIGN §15) with their reasons
	 * (core_attention_reasons at the store's now), newest update first, at most `limit`;
	 * *truncated when more were found. Never a scan of the whole board: the FS twin reads
	 * its candidate and claim indexes, the Mongo twin runs indexed queries. */
	enum core_rc (*attention_list)(struct store *st, const char *board,
				       const char *const *boards, size_t limit,
				       struct store_attention **out, size_t *n, bool *truncated);

	/* Runs (DESIGN §5). */
	enum core_rc (*run_create)(struct store *st, const struct store_run_create *in,
				   const struct store_actor *actor, struct core_run **out);
	/* A pruned run answers NOT_FOUND to run_get. */
	enum core_rc (*run_get)(struct store *st, const char *id, struct core_run **out);
	/* The same, tombstones included (pruned set): the reaper asks which claim a pruned run
	 * was created under. NOT_FOUND only for an id never used. */
	enum core_rc (*run_get_any)(struct store *st, const char *id, struct core_run **out);
	enum core_rc (*run_update)(struct store *st, const char *id,
				   const struct store_run_update *u,
				   const struct store_actor *actor, struct core_run **out);
	enum core_rc (*run_cancel)(struct store *st, const char *id,
				   const struct store_actor *actor, struct core_run **out);
	enum core_rc (*run_prune)(struct store *st, const char *id,
				  const struct store_actor *actor);
	/* promoteIfOrphaned as one CAS on the run (only when still running/queued and expired). */
	enum core_rc (*run_promote_if_orphaned)(struct store *st, const char *id,
						struct core_run **out, bool *promoted);
	/* Number of runs recorded for a card (run ceiling). */
	enum core_rc (*run_count_for_card)(struct store *st, const char *card_id, size_t *n);
	/* The runs of f, newest first, at most f->limit; *next: the cursor of the next page
	 * (new string, caller frees), NULL at the end. A card keeps CORE_RUN_HISTORY_MAX runs
	 * whole: run_create retires older ones it may (core_run_retirable) in its own step
	 * (FS) or right after it (Mongo, best effort: a failure there fails nothing). */
	enum core_rc (*run_list)(struct store *st, const struct store_run_filter *f,
				 struct core_run ***out, size_t *n, char **next);

	/* Admin (DESIGN §8). Column rename: the column keeps its place and flags, role names
	 * follow it, and every card in it moves under machine reason state_rename.
	 * `to` existing -> ALREADY_EXISTS; unknown board/column -> NOT_FOUND. */
	enum core_rc (*board_column_rename)(struct store *st, const char *board, const char *from,
					    const char *to, const struct store_actor *actor,
					    size_t *touched);
	enum core_rc (*labels_sweep)(struct store *st, const struct store_label_sweep *sw,
				     const struct store_actor *actor, size_t *touched);

	/* Effects (DESIGN §14). sub_put upserts (s->secret NULL keeps the stored one; a new
	 * subscription then takes `secret_if_new`); *created says which. */
	enum core_rc (*sub_put)(struct store *st, const struct store_sub *s,
				const char *secret_if_new, bool *created, struct store_sub **out);
	enum core_rc (*sub_get)(struct store *st, const char *board, const char *name,
				struct store_sub **out);
	enum core_rc (*sub_list)(struct store *st, const char *board, struct store_sub ***out,
				 size_t *n);
	enum core_rc (*sub_delete)(struct store *st, const char *board, const char *name);
	enum core_rc (*delivery_get)(struct store *st, const char *id,
				     struct store_delivery **out);
	/* Newest first. */
	enum core_rc (*delivery_list)(struct store *st, const struct store_delivery_filter *f,
				      struct store_delivery ***out, size_t *n);
	/* Leases the oldest pending delivery that is due (next_at <= now) and not leased (or
	 * whose lease expired) to `owner` for lease_ms, passing over those of the n_skip
	 * subscriptions in skip: lease_epoch advances. *out NULL: none. */
	enum core_rc (*delivery_lease)(struct store *st, const char *owner, int64_t lease_ms,
				       const struct store_sub_ref *skip, size_t n_skip,
				       struct store_delivery **out);
	/* Writes an attempt's outcome, fenced by (owner, epoch): CLAIM_CONFLICT when the lease
	 * was lost (expired and taken, or retried by an operator). Clears the lease. DISABLE also
	 * disables the subscription in that step when it is still the version o->sub. */
	enum core_rc (*delivery_finish)(struct store *st, const char *id,
					const struct store_delivery_outcome *o,
					struct store_delivery **out);
	/* Operator retry: a done or dead delivery becomes pending again, due now, with a fresh
	 * schedule (attempts 0); any lease is voided. STATE_CONFLICT when it is pending. */
	enum core_rc (*delivery_retry)(struct store *st, const char *id,
				       struct store_delivery **out);
	/* Metrics (metrics/metrics.h): adds this twin's samples to a scrape — cards by board
	 * and state (METRICS_CARDS), claims held and expired (now: the twin's clock), and the
	 * twin's own counters (FS journal, Mongo driver). A failure to read is
	 * STORE_UNAVAILABLE; what was added by then stays in the sink. */
	enum core_rc (*stats)(struct store *st, struct metrics_sink *out);

	/* Reaper support (DESIGN §6). */
	/* Claimed cards with an expired lease (lease_until < now), oldest lease first, after
	 * `after` in that order (NULL or unset: from the first). */
	enum core_rc (*reaper_list_expired)(struct store *st, size_t batch,
					    const struct store_reaper_cursor *after,
					    struct core_card ***out, size_t *n);
	/* Claims the repair sweep may release: markers starting with "reaper:" whose lease
	 * expired, and claims with no lease or no epoch (stripped). Oldest first. */
	enum core_rc (*reaper_list_repair)(struct store *st, size_t batch,
					   struct core_card ***out, size_t *n);
	/* TRANSFER: CAS from exactly prev (and still expired) to marker; returns the card as it
	 * now stands. A miss is CLAIM_CONFLICT. Event card_claimed with reclaimed_from. */
	enum core_rc (*reaper_transfer)(struct store *st, const char *id,
					const struct core_token *prev, const char *marker,
					int64_t lease_ms, struct core_card **out);
	/* Release without a fence: only when the claim is still exactly `expect` (marker and
	 * epoch or missing epoch as observed). For the repair sweeps. */
	enum core_rc (*reaper_release_exact)(struct store *st, const char *id,
					     const struct core_card *expect,
					     const struct store_actor *actor);

	/* The pass's batches (DESIGN §6): exactly what reaper_transfer, resp. the owned writes
	 * and reaper_release_exact, would do for each item in order (each item sees the ones
	 * before it), every outcome in the item. A twin may commit a whole batch as one step
	 * (the FS twin: one journal line, one durability wait); one that cannot loops the single
	 * operations. Returns OK once every item has its outcome. */
	enum core_rc (*reaper_transfer_many)(struct store *st, struct store_transfer *v,
					     size_t n, const char *marker, int64_t lease_ms);
	enum core_rc (*reaper_act)(struct store *st, struct store_reaper_act *v, size_t n,
				   const struct store_actor *actor);

	/* The deployment's secret `name` ([a-z0-9-]{1,32}): STORE_SECRET_LEN random bytes,
	 * made on first use, the same bytes for every process that shares the store (the key
	 * agent tokens are signed with, DESIGN §13). */
	enum core_rc (*secret_get)(struct store *st, const char *name, unsigned char *out);

	/* DESIGN §18: idempotency keys (see the §18 block at the end); NULL: none. */
	const struct store_idem_ops *idem;
};

/* ---- wrappers (the only way callers reach a twin) ----
 * Each store_X() checks its arguments (BAD_REQUEST on NULL/invalid ids, never an assert on
 * input) and calls st->ops->X. Same contract as the op. */

#define STORE_SECRET_LEN 32
/* OUT: out (STORE_SECRET_LEN bytes), untouched on failure. */
enum core_rc store_secret_get(struct store *st, const char *name, unsigned char *out);

/* How store_open opens the twin a spec names. NULL or a zero field: the default. */
struct store_open_options {
	/* The un-leased arm's horizon (ADR-096 §6), the Mongo twin's (the FS twin has no
	 * un-leased arm); 0: 24 h. */
	int64_t unleased_horizon_ms;
	/* A twin's own extras (store/store_twins.h: tests and benches), used when the spec
	 * names that twin; the directory or URI is the spec's, whatever they say. */
	const struct store_fs_options *fs;
	const struct store_mongo_options *mongo;
};

/* Opens a store from a spec: "fs:DIR" (or a bare DIR), "mongodb://..." or
 * "mongodb+srv://..." — the one place a spec is parsed. On failure writes a readable reason
 * into err (never a URI's credentials). Caller closes with store_close. */
enum core_rc store_open(const char *spec, const struct store_open_options *o,
			struct store **out, char *err, size_t errlen);
void store_close(struct store *st);
const char *store_name(const struct store *st);
enum core_rc store_ping(struct store *st);

/* Adds the store's samples to a scrape: the fence refusals every twin counts
 * (METRICS_FENCE_REFUSED, by reason), then the twin's stats op. */
enum core_rc store_stats(struct store *st, struct metrics_sink *out);

/* The store's clock (the injected clock if set). */
int64_t store_now(struct store *st);

/* Every board, by name (byte order). */
enum core_rc store_board_list(struct store *st, struct core_board **boards, size_t *n);
enum core_rc store_board_get(struct store *st, const char *name, struct core_board *out);
enum core_rc store_board_put(struct store *st, const struct core_board *b,
			     const struct store_actor *actor);
/* Frees an array from store_board_list. */
void store_boards_free(struct core_board *boards, size_t n);

enum core_rc store_board_column_rename(struct store *st, const char *board, const char *from,
				       const char *to, const struct store_actor *actor,
				       size_t *touched);
enum core_rc store_labels_sweep(struct store *st, const struct store_label_sweep *sw,
				const struct store_actor *actor, size_t *touched);

enum core_rc store_card_create(struct store *st, const struct store_card_create *in,
			       const struct store_actor *actor, struct core_card **out);
enum core_rc store_card_get(struct store *st, const char *id, struct core_card **out);
enum core_rc store_card_list(struct store *st, const struct store_card_filter *f,
			     struct core_card ***out, size_t *n, char **next);
/* Frees an array of cards from a list call. */
void store_cards_free(struct core_card **cards, size_t n);
enum core_rc store_card_patch(struct store *st, const char *id, const struct store_card_patch *p,
			      const struct store_actor *actor, struct core_card **out);
enum core_rc store_card_delete(struct store *st, const char *id, const struct store_actor *actor);
enum core_rc store_card_claim(struct store *st, const char *id, const char *marker,
			      int64_t lease_ms, const struct store_actor *actor,
			      struct store_claim_result *out);
enum core_rc store_card_claim_next(struct store *st, const struct store_claim_next *in,
				   const struct store_actor *actor, struct store_claim_result *out);
enum core_rc store_card_renew(struct store *st, const char *id, const struct core_token *t,
			      int64_t lease_ms, const struct store_actor *actor,
			      struct core_card **out);
enum core_rc store_card_release(struct store *st, const char *id, const struct core_token *t,
				const struct store_actor *actor, struct core_card **out);
/* An owned release with {"retry": true} (DESIGN §17): the release and an attempt counted in
 * one step (store_owned_write.retry); *out is the card as released (or filed). */
enum core_rc store_card_release_retry(struct store *st, const char *id,
				      const struct core_token *t, const struct store_actor *actor,
				      struct core_card **out);
/* GET /v1/boards/{b}'s counts (store_ops.board_claimed): per_col has b->n_cols slots. */
enum core_rc store_board_claimed(struct store *st, const struct core_board *b, int64_t *per_col,
				 int64_t *total);
enum core_rc store_card_owned_write(struct store *st, const char *id,
				    const struct store_owned_write *w,
				    const struct store_actor *actor, struct core_card **out);
enum core_rc store_card_set_state_from(struct store *st, const char *id, const char *from,
				       const char *to, const char *reason,
				       const struct store_actor *actor, struct core_card **out);
enum core_rc store_card_reopen(struct store *st, const char *id, const char *to,
			       const char *reason, const struct store_actor *actor,
			       struct core_card **out);
enum core_rc store_card_revoke(struct store *st, const char *id, const struct store_actor *actor,
			       struct core_card **out);

/* Limits (DESIGN §11): comments per card (0: CORE_COMMENTS_MAX). */
void store_limits_set(struct store *st, size_t max_comments);
/* DESIGN §17: the default max_attempts of a board without a retry policy (the server's
 * --run-ceiling); 0 or less: CORE_RETRY_MAX_ATTEMPTS. */
void store_retry_default_set(struct store *st, int32_t max_attempts);
/* The retry policy in force on b (core_retry_effective with that default). */
void store_retry_of(const struct store *st, const struct core_board *b, struct core_retry *out);
/* The comment limit in force (CORE_COMMENTS_MAX unless set). */
size_t store_limits_comments(const struct store *st);
enum core_rc store_card_labels_set(struct store *st, const char *id, const struct core_strv *labels,
				   const struct store_actor *actor, struct core_card **out);
enum core_rc store_card_labels_adjust(struct store *st, const char *id, const struct core_strv *add,
				      const struct core_strv *remove,
				      const struct store_actor *actor, struct core_card **out);
enum core_rc store_card_comment_add(struct store *st, const char *id, const char *body,
				    const struct store_actor *actor, struct core_card **out);
enum core_rc store_labels_count(struct store *st, const char *board, const char *const *boards,
				json_t **out);
/* wait_ms STORE_EVENTS_NO_WAIT: never waits, not even for a hole in the tail another writer
 * is filling (the Mongo twin waits those out, up to 2 s, whatever the wait asked): a read that
 * found no event before such a hole answers CORE_ERR_BUSY at once, for a caller on a thread
 * that must not block (an HTTP thread) to ask again where it may wait. */
#define STORE_EVENTS_NO_WAIT ((int64_t)-1)
enum core_rc store_events_list(struct store *st, const char *board, const char *const *boards,
			       int64_t after, size_t limit, int64_t wait_ms,
			       struct core_event **out, size_t *n, int64_t *next);
/* The same, for one board in its own sequence: `after` and *next are board_seqs (what a
 * token scoped to boards reads, so its cursors say nothing of other boards' traffic). */
enum core_rc store_events_list_board(struct store *st, const char *board, int64_t after,
				     size_t limit, int64_t wait_ms, struct core_event **out,
				     size_t *n, int64_t *next);
/* Frees an array from store_events_list or store_events_list_board. */
void store_events_free(struct core_event *ev, size_t n);
/* limit 1..1000. *out: caller frees with store_attention_free (also when n is 0). */
enum core_rc store_attention_list(struct store *st, const char *board, const char *const *boards,
				  size_t limit, struct store_attention **out, size_t *n,
				  bool *truncated);
void store_attention_free(struct store_attention *v, size_t n);

enum core_rc store_run_create(struct store *st, const struct store_run_create *in,
			      const struct store_actor *actor, struct core_run **out);
enum core_rc store_run_get(struct store *st, const char *id, struct core_run **out);
enum core_rc store_run_get_any(struct store *st, const char *id, struct core_run **out);
enum core_rc store_run_update(struct store *st, const char *id, const struct store_run_update *u,
			      const struct store_actor *actor, struct core_run **out);
enum core_rc store_run_cancel(struct store *st, const char *id, const struct store_actor *actor,
			      struct core_run **out);
enum core_rc store_run_prune(struct store *st, const char *id, const struct store_actor *actor);
enum core_rc store_run_promote_if_orphaned(struct store *st, const char *id,
					   struct core_run **out, bool *promoted);
enum core_rc store_run_count_for_card(struct store *st, const char *card_id, size_t *n);
/* store/runs_list.c. BAD_REQUEST for a bad filter (an unknown cursor included). *out: caller
 * frees with store_runs_free (also when n is 0). */
enum core_rc store_run_list(struct store *st, const struct store_run_filter *f,
			    struct core_run ***out, size_t *n, char **next);
void store_runs_free(struct core_run **v, size_t n);
/* For twins: sorts v (core_run_newer_cmp), keeps the first limit, frees the rest, and sets
 * *next to the cursor of the last kept when some were cut (else NULL). NOMEM: v untouched
 * but *next NULL. */
enum core_rc store_runs_finish(struct core_run **v, size_t *n, size_t limit, char **next);

enum core_rc store_sub_put(struct store *st, const struct store_sub *s, const char *secret_if_new,
			   bool *created, struct store_sub **out);
enum core_rc store_sub_get(struct store *st, const char *board, const char *name,
			   struct store_sub **out);
enum core_rc store_sub_list(struct store *st, const char *board, struct store_sub ***out,
			    size_t *n);
enum core_rc store_sub_delete(struct store *st, const char *board, const char *name);
enum core_rc store_delivery_get(struct store *st, const char *id, struct store_delivery **out);
enum core_rc store_delivery_list(struct store *st, const struct store_delivery_filter *f,
				 struct store_delivery ***out, size_t *n);
enum core_rc store_delivery_lease(struct store *st, const char *owner, int64_t lease_ms,
				  struct store_delivery **out);
/* store_delivery_lease passing over the deliveries of the n_skip subscriptions in skip. */
enum core_rc store_delivery_lease_except(struct store *st, const char *owner, int64_t lease_ms,
					 const struct store_sub_ref *skip, size_t n_skip,
					 struct store_delivery **out);
enum core_rc store_delivery_finish(struct store *st, const char *id,
				   const struct store_delivery_outcome *o,
				   struct store_delivery **out);
enum core_rc store_delivery_retry(struct store *st, const char *id, struct store_delivery **out);

enum core_rc store_reaper_list_expired(struct store *st, size_t batch, struct core_card ***out,
				       size_t *n);
/* The same after a cursor: where the last listing of a reaper pass ended. The kept claims
 * (a paused or cancelled run's card keeps its expired lease) never leave the head of the
 * order, so a pass that always listed from the first would see only them once there are a
 * batch of them: each pass resumes after the last one's last candidate, and from the first
 * again once a listing came back short (DESIGN §6: every expired claim is judged within
 * ceil(expired / batch) passes). */
enum core_rc store_reaper_list_expired_after(struct store *st, size_t batch,
					     const struct store_reaper_cursor *after,
					     struct core_card ***out, size_t *n);
/* Moves c past card, a candidate the listing returned. */
void store_reaper_cursor_past(struct store_reaper_cursor *c, const struct core_card *card);
enum core_rc store_reaper_list_repair(struct store *st, size_t batch, struct core_card ***out,
				      size_t *n);
enum core_rc store_reaper_transfer(struct store *st, const char *id, const struct core_token *prev,
				   const char *marker, int64_t lease_ms, struct core_card **out);
enum core_rc store_reaper_release_exact(struct store *st, const char *id,
					const struct core_card *expect,
					const struct store_actor *actor);
/* Batches: see store_ops. An invalid item is BAD_REQUEST for the whole call (nothing done). */
enum core_rc store_reaper_transfer_many(struct store *st, struct store_transfer *v, size_t n,
					const char *marker, int64_t lease_ms);
enum core_rc store_reaper_act(struct store *st, struct store_reaper_act *v, size_t n,
			      const struct store_actor *actor);

/* ---- JSON codec (the served shape of DESIGN §2; the FS journal reuses it) ----
 * _to_json returns a new reference (NULL on OOM). _from_json reads a borrowed json_t and
 * returns BAD_REQUEST with nothing allocated when a field is missing or of the wrong type. */
json_t *store_card_to_json(const struct core_card *c);
/* The same card as the bytes json_dumps(store_card_to_json(c), JSON_COMPACT) gives, written
 * without the tree (the hot path of every answer that is a card). New string (caller frees)
 * and its length; NULL on OOM or a string that is not UTF-8 (json_string refuses those). */
char *store_card_json_text(const struct core_card *c, size_t *len);
/* A card's gave_up as served: null when not set, else {reason, run_id, state, at}. */
json_t *store_gave_up_to_json(const struct core_gave_up *g);
enum core_rc store_card_from_json(const json_t *j, struct core_card **out);
json_t *store_board_to_json(const struct core_board *b);
enum core_rc store_board_from_json(const json_t *j, struct core_board *out);
json_t *store_run_to_json(const struct core_run *r);
enum core_rc store_run_from_json(const json_t *j, struct core_run **out);
json_t *store_event_to_json(const struct core_event *e);
/* The same; board_view: "seq" is the event's board_seq, so nothing in it tells how much other
 * boards write (what a token scoped to boards and a webhook subscriber see, DESIGN §11). */
json_t *store_event_to_json_as(const struct core_event *e, bool board_view);
enum core_rc store_event_from_json(const json_t *j, struct core_event *out);
/* json_dumps(j, JSON_COMPACT), byte for byte, for an object or array (the journal's and the
 * answers' trees), written without jansson's dump machinery when the tree holds only objects,
 * arrays, strings, integers, booleans and null (else through json_dumps). New string (caller
 * frees) and its length; NULL on OOM. */
char *store_json_text(const json_t *j, size_t *len);
/* A flat object's members, for store_json_members_text (an event's payload). */
enum store_json_type {
	STORE_JSON_STR,  /* s */
	STORE_JSON_INT,  /* i */
	STORE_JSON_NULL,
	STORE_JSON_BOOL, /* i: 0 false, else true */
	STORE_JSON_RAW,  /* s: JSON text written as it is (a card's text, another object's) */
};
struct store_json_member {
	const char *key;
	enum store_json_type type;
	const char *s;
	int64_t i;
};
/* {"key":value,...} in order, byte for byte what json_dumps(JSON_COMPACT) writes of the
 * json_pack tree of the same members, without the tree. New string (caller frees) and its
 * length; NULL on OOM or a string that is not UTF-8 (where json_pack fails too). */
char *store_json_members_text(const struct store_json_member *m, size_t n, size_t *len);
/* The codec's building blocks (store/codec.c), shared with the effect codecs (store/effect.c):
 * a new reference to s as a string, or null for NULL; a new array of sv's strings (NULL on
 * OOM); json_object_set_new that remembers a failure (NULL v included) in *ok, consuming v
 * either way. */
json_t *store_json_str_or_null(const char *s);
json_t *store_json_strv(const struct core_strv *sv);
void store_json_put(json_t *o, const char *key, json_t *v, bool *ok);
/* Appends the strings of array `key` of o to *dst; false on a wrong type or OOM, and on a
 * missing key unless `opt`. */
bool store_json_get_strv(const json_t *o, const char *key, bool opt, struct core_strv *dst);

/* Subscriptions and deliveries. `stored`: the twins' own form (times as integers, the secret
 * and the body included); else the served form (RFC 3339 times, no secret, no body). */
json_t *store_sub_to_json(const struct store_sub *s, bool stored);
enum core_rc store_sub_from_json(const json_t *j, struct store_sub **out);
json_t *store_delivery_to_json(const struct store_delivery *d, bool stored);
enum core_rc store_delivery_from_json(const json_t *j, struct store_delivery **out);

/* ---- §18: idempotency keys (DESIGN §18) ----
 *
 * A record says what the first request under a key answered (status, body, Location), so a
 * repeat within STORE_IDEM_TTL_MS answers the same and changes nothing. The key is scoped by
 * the caller (api/idem.c: route, token name, the client's key) and carries a fingerprint of
 * the request; the same key with another fingerprint is IDEMPOTENCY_KEY_REUSED.
 *
 * A request reserves its key (store_idem_begin: NEW), makes its write, then records its
 * answer (store_idem_end), or drops the reservation (store_idem_abort: a 5xx, so a retry may
 * try again). While reserved, the same key from another request is PENDING.
 *
 * FS twin: the reservation is in memory (one process owns the directory); while it is bound
 * to the thread (store_idem_bind), the first journal line the thread writes carries the record
 * as "written, answer not recorded yet", so a crash never keeps the write without its key:
 * after a restart such a key answers IDEMPOTENCY_KEY_IN_FLIGHT (state LOST) instead of
 * writing twice. The answer's own line follows in the same ack. Records are snapshotted and
 * dropped by the compaction once expired.
 * Mongo twin: collection `idempotency`, _id the scoped key (unique: of two replicas racing,
 * one inserts the pending record); a pending record older than STORE_IDEM_PENDING_MS was left
 * by a crash and is taken over (docs/design.md says what that window costs).
 */
#define STORE_IDEM_TTL_MS ((int64_t)24 * 3600 * 1000)
#define STORE_IDEM_PENDING_MS ((int64_t)30000)
/* store_idem_end retries an unreachable store until this long before the reservation could
 * be taken over. */
#define STORE_IDEM_END_MARGIN_MS ((int64_t)5000)
/* How long store_idem_begin waits for another request's reservation to end. */
#define STORE_IDEM_WAIT_MS 1000
#define STORE_IDEM_KEY_MAX 1024 /* the scoped key */

enum store_idem_state {
	STORE_IDEM_NEW,     /* reserved for this request: write, then store_idem_end */
	STORE_IDEM_DONE,    /* answered before: status, body, location */
	STORE_IDEM_PENDING, /* another request holds it (after STORE_IDEM_WAIT_MS) */
	STORE_IDEM_LOST,    /* the write was made, its answer lost in a crash (FS) */
};

struct store_idem {
	const char *key; /* the scoped key, printable ASCII, <= STORE_IDEM_KEY_MAX bytes */
	const char *fp;  /* the request's fingerprint (hex) */
	/* OUT of store_idem_begin; body and location: store_idem_release frees them */
	enum store_idem_state state;
	int status;
	char *body;
	char *location; /* "" when the answer had none */
	int64_t begun_ms;      /* CLOCK_MONOTONIC ms at store_idem_begin (store_idem_end's
				* retries end before the reservation could be taken over) */
	/* the twins' */
	char nonce[33];        /* Mongo: this reservation's own */
	bool attached;         /* FS: a journal line carries it */
	struct store *st;      /* the store it was reserved in */
	struct store_idem *up; /* store_idem_bind's stack */
};

struct store_idem_ops {
	/* Looks the key up and, when absent (or expired), reserves it: fills state (and, for
	 * DONE, status/body/location). IDEMPOTENCY_KEY_REUSED when recorded (or reserved) with
	 * another fingerprint. */
	enum core_rc (*begin)(struct store *st, struct store_idem *k);
	/* Records the answer of a NEW key (status 100..599, body text, location may be NULL). */
	enum core_rc (*end)(struct store *st, struct store_idem *k, int status, const char *body,
			    const char *location);
	/* Drops a NEW key's reservation. */
	void (*abort)(struct store *st, struct store_idem *k);
	/* An `end` that found the store unreachable is tried again (store_idem_end): a twin
	 * whose reservation another request can take over once the answer is late (Mongo). The
	 * FS twin's write carried its key in the same journal line: nothing to wait for. */
	bool end_retries;
};

/* NOT_IMPLEMENTED for a twin without keys; waits up to STORE_IDEM_WAIT_MS while PENDING. */
enum core_rc store_idem_begin(struct store *st, struct store_idem *k);
enum core_rc store_idem_end(struct store *st, struct store_idem *k, int status, const char *body,
			    const char *location);
void store_idem_abort(struct store *st, struct store_idem *k);
/* Frees what begin filled in (k itself is the caller's). */
void store_idem_release(struct store_idem *k);
/* Binds k to the calling thread until store_idem_unbind (nests); store_idem_bound: the
 * innermost, or NULL. */
void store_idem_bind(struct store_idem *k);
void store_idem_unbind(struct store_idem *k);
struct store_idem *store_idem_bound(void);
/* A record's stored form (both twins): {"fp","status","body","location","at"}; status 0:
 * written, answer not recorded (LOST). New string; NULL on OOM. */
char *store_idem_text(const char *fp, int status, const char *body, const char *location,
		      int64_t at);
/* Reads a stored record into k (state DONE or LOST; REUSED when its fp is not k->fp).
 * BAD_REQUEST (STORE_UNAVAILABLE to callers) when malformed. */
enum core_rc store_idem_parse(const char *text, struct store_idem *k);

#endif
