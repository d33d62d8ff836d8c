/* core — boardd's domain: model, workflow rules, claim rules, the stuck-card decision table.
 *
 * Pure C11 over libc: no I/O, no clock reads, no threads. Time enters as `now_ms` (milliseconds
 * since the Unix epoch, UTC). Every function that can fail returns an enum core_rc; on failure
 * the objects it was given are left unchanged and OUT parameters are zeroed/NULL.
 *
 * Ownership: every `char *` field of a struct below is owned by that struct (heap, NUL-ended)
 * and freed by its _release/_free function. `const char *` parameters are borrowed for the call.
 */
#ifndef BOARDD_CORE_H
#define BOARDD_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------- */
/* Errors: one enum for the whole program. api/ maps each to an HTTP status in one table.   */

#define CORE_RC_LIST(X)                                                                       \
	X(CORE_OK, "ok")                                                                      \
	X(CORE_ERR_BAD_REQUEST, "bad_request")                                                \
	X(CORE_ERR_UNAUTHORIZED, "unauthorized")                                              \
	X(CORE_ERR_FORBIDDEN, "forbidden")                                                    \
	X(CORE_ERR_NOT_FOUND, "not_found")                                                    \
	X(CORE_ERR_METHOD_NOT_ALLOWED, "method_not_allowed")                                  \
	X(CORE_ERR_CLAIM_CONFLICT, "claim_conflict")                                          \
	X(CORE_ERR_STATE_CONFLICT, "state_conflict")                                          \
	X(CORE_ERR_DEPENDENTS_OUTSTANDING, "dependents_outstanding")                          \
	X(CORE_ERR_BLOCKERS_PENDING, "blockers_pending")                                      \
	X(CORE_ERR_RUN_FINAL, "run_final")                                                    \
	X(CORE_ERR_ALREADY_EXISTS, "already_exists")                                          \
	X(CORE_ERR_PAYLOAD_TOO_LARGE, "payload_too_large")                                    \
	X(CORE_ERR_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")                          \
	X(CORE_ERR_TERMINAL_STATE_EXIT, "terminal_state_exit")                                \
	X(CORE_ERR_TRANSITION_REJECTED, "transition_rejected")                                \
	X(CORE_ERR_PRECONDITION_REQUIRED, "precondition_required")                            \
	X(CORE_ERR_URI_TOO_LONG, "uri_too_long")                                              \
	X(CORE_ERR_NOT_IMPLEMENTED, "not_implemented")                                        \
	X(CORE_ERR_INVALID_BOARD, "invalid_board")                                            \
	X(CORE_ERR_CAPACITY_REACHED, "capacity_reached") /* DESIGN §17: a limit is full */   \
	X(CORE_ERR_NOT_YET, "not_yet") /* DESIGN §17: the card's not_before has not passed */ \
	X(CORE_ERR_IDEMPOTENCY_KEY_REUSED, "idempotency_key_reused") /* §18: another body */ \
	X(CORE_ERR_IDEMPOTENCY_KEY_IN_FLIGHT, "idempotency_key_in_flight") /* §18 */          \
	X(CORE_ERR_STORE_UNAVAILABLE, "store_unavailable")                                    \
	X(CORE_ERR_BUSY, "busy")                                                              \
	X(CORE_ERR_NOMEM, "out_of_memory")                                                    \
	X(CORE_ERR_INTERNAL, "internal")

enum core_rc {
#define CORE_RC_ENUM(name, code) name,
	CORE_RC_LIST(CORE_RC_ENUM)
#undef CORE_RC_ENUM
	CORE_RC_COUNT_
};

/* The stable machine-readable code ("claim_conflict"); never NULL. */
const char *core_rc_code(enum core_rc rc);

/* ErrTerminalStateExit is a kind of ErrTransitionRejected (ADR-096 §5). */
bool core_rc_is_transition_rejected(enum core_rc rc);

/* ---------------------------------------------------------------------------------------- */
/* Time: RFC 3339 UTC with milliseconds ("2026-12-02T10:36:23.123Z").                        */

#define CORE_TIME_BUF 32
/* Writes ms into buf (at least CORE_TIME_BUF bytes); returns buf. */
char *core_time_format(int64_t ms, char *buf);
/* Parses RFC 3339 (Z or +hh:mm offset, optional fraction); false on malformed input and on a
 * day its month does not have. An instant an offset carries past 0000-01-01T00:00:00Z or
 * 9999-12-31T23:59:59.999Z is held at that end (core_time_format writes years 0..9999). */
bool core_time_parse(const char *s, int64_t *ms);
/* ts += ns (ns >= 0), tv_nsec kept below one second: the deadline of a timed wait, from a
 * clock reading the caller took (core/ reads no clock). */
void core_timespec_add_ns(struct timespec *ts, int64_t ns);

/* ---------------------------------------------------------------------------------------- */
/* Reachability of a database (the Mongo twin's breaker): the rules, time as an argument (ms of
 * a monotonic clock), no lock (the caller holds one).
 *
 * CLOSED: calls go to the database. A call that could not reach it OPENS the breaker: calls
 * then fail at once instead of each waiting out the driver's timeouts, and one probe at a
 * time tests reachability, the first at once, the next after CORE_BREAKER_BACKOFF_MIN_MS,
 * doubling up to _MAX_MS while they fail. A probe that reaches it, or other evidence that it
 * is reachable, CLOSES it. Each close starts a new generation: the failure of a call that
 * began before it (it waited out a timeout meanwhile) is old news and opens nothing. */

#define CORE_BREAKER_BACKOFF_MIN_MS 250
#define CORE_BREAKER_BACKOFF_MAX_MS 2000

struct core_breaker {
	bool open;
	bool probing;         /* a probe is under way: no second one */
	uint64_t gen;         /* bumped at each close */
	int64_t since_ms;     /* when it last opened or closed */
	int64_t probe_at_ms;  /* open: when the next probe is due */
	int64_t backoff_ms;   /* open: the wait after the next failed probe */
	uint64_t opens;       /* times it opened */
	uint64_t probes_failed; /* failed probes since it last opened */
	uint64_t probe_of;    /* the opening (opens) the probe under way was started for */
};

/* Closed, generation 0, at now_ms. */
void core_breaker_init(struct core_breaker *b, int64_t now_ms);
/* A call that began in generation `gen` could not reach the database. true: this opened the
 * breaker (the caller says so once); false: it was open already, or gen is an older
 * generation's. */
bool core_breaker_fail(struct core_breaker *b, uint64_t gen, int64_t now_ms);
/* How long until a probe is due: 0 now, > 0 in that many ms, -1 none (closed, or one is
 * under way). */
int64_t core_breaker_probe_wait(const struct core_breaker *b, int64_t now_ms);
/* true: a probe is due; the caller runs it and reports with core_breaker_probe_end. */
bool core_breaker_probe_begin(struct core_breaker *b, int64_t now_ms);
/* The probe's outcome. true: it reached the database and this closed the breaker. A failed
 * probe schedules the next one after the back-off, which then doubles (up to _MAX_MS). */
bool core_breaker_probe_end(struct core_breaker *b, bool reached, int64_t now_ms);
/* Evidence of reachability from elsewhere (the driver found a writable server). true: this
 * closed the breaker. */
bool core_breaker_reached(struct core_breaker *b, int64_t now_ms);

/* ---------------------------------------------------------------------------------------- */
/* Limits and validation of names coming from outside.                                      */

#define CORE_ID_MAX 128      /* card and run ids: [A-Za-z0-9._:-]{1,128} */
#define CORE_NAME_MAX 64     /* board and column names: [A-Za-z0-9._-]{1,64} */
#define CORE_LABEL_MAX 64    /* labels: [^\s,]{1,64} code points, valid UTF-8 */
#define CORE_MARKER_MAX 128  /* claim markers: printable ASCII, no space, {1,128} */
#define CORE_STATUS_MAX 32   /* run status / continuation: [a-z_]{1,32} */
#define CORE_LABELS_MAX 128  /* labels on one card */
#define CORE_BLOCKERS_MAX 256 /* blockers of one card */
#define CORE_RUN_RESULT_MAX 65536 /* a run's result, as compact JSON text */
#define CORE_RUN_ERROR_MAX 4096   /* a run's error message */
#define CORE_RUN_OUTPUT_MAX 65536 /* a run's output: the tail kept, in bytes (DESIGN §20) */
#define CORE_RUN_HISTORY_MAX 50   /* runs kept whole per card; older ones are retired */
#define CORE_RECOVERY_PREFIX "reaper:" /* matched case-insensitively */
#define CORE_COMMENTS_MAX 1000 /* comments on one card (the default of --max-comments) */
#define CORE_CARD_BYTES_MAX (1024 * 1024) /* a card's stored size (DESIGN §11) */

bool core_id_valid(const char *s);
bool core_name_valid(const char *s);
bool core_label_valid(const char *s);
/* Decodes the well-formed UTF-8 sequence at s (at most n bytes there; a NUL-terminated string
 * may pass SIZE_MAX, a sequence stops at its NUL): its length, and its code point in *cp, or 0
 * when it is malformed, overlong, a surrogate or cut short. NUL is a sequence of length 1. */
size_t core_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
bool core_marker_valid(const char *s);
bool core_status_valid(const char *s);
/* A marker of the reaper's recovery family ("reaper:<host>"). Clients may not claim with one. */
bool core_marker_is_recovery(const char *marker);

/* ---------------------------------------------------------------------------------------- */
/* String vector (labels, blockers): set semantics are applied by the rule functions.       */

struct core_strv {
	char **v;
	size_t n;
};

void core_strv_release(struct core_strv *sv);
/* Deep copy; dst must be released/empty. */
enum core_rc core_strv_copy(struct core_strv *dst, const struct core_strv *src);
enum core_rc core_strv_push(struct core_strv *sv, const char *s);
bool core_strv_contains(const struct core_strv *sv, const char *s);
/* The same strings in the same order (a list's equality, not a set's). */
bool core_strv_equal(const struct core_strv *a, const struct core_strv *b);

/* ---------------------------------------------------------------------------------------- */
/* Boards and columns (DESIGN §2).                                                           */

struct core_column {
	char *name;
	bool terminal;
	bool eligible;
	/* DESIGN §17: at most `limit` live claims taken from this column at once (recovery
	 * claims included); 0: no limit. */
	int32_t limit;
};

/* DESIGN §17: how a board retries a claim that ended without the work being done. */
#define CORE_RETRY_MAX_ATTEMPTS 20
#define CORE_RETRY_BACKOFF_MS 1000
#define CORE_RETRY_MAX_BACKOFF_MS 300000
#define CORE_LIMIT_MAX 1000000 /* a column's limit and a board's max_claims: 1..this */
#define CORE_RETRY_ATTEMPTS_MAX 1000000
#define CORE_RETRY_BACKOFF_MAX_MS (7LL * 24 * 3600 * 1000) /* a week */

struct core_retry {
	int32_t max_attempts;   /* >= 1 */
	int64_t backoff_ms;     /* >= 1 */
	int64_t max_backoff_ms; /* >= backoff_ms */
};

struct core_board {
	char *name;
	struct core_column *cols;
	size_t n_cols;
	/* Role columns: each names one of cols. */
	char *running;   /* in_progress */
	char *completed; /* done */
	char *failed;    /* blocked */
	char *waiting;   /* waiting_deps */
	/* DESIGN §17: at most max_claims live claims on the board at once; 0: no limit. */
	int32_t max_claims;
	/* DESIGN §17: has_retry false: the defaults (max_attempts from the server's
	 * --run-ceiling, see core_retry_effective). */
	bool has_retry;
	struct core_retry retry;
};

/* Fills *b with the default board of DESIGN §2 under `name`. b must be zeroed. */
enum core_rc core_board_init_default(struct core_board *b, const char *name);
void core_board_release(struct core_board *b);
enum core_rc core_board_copy(struct core_board *dst, const struct core_board *src);
/* Checks a board config: names valid and unique, role columns exist, running/waiting are
 * working columns, completed/failed are terminal, at least one eligible column.
 * On failure writes a reason into detail (may be NULL). */
enum core_rc core_board_validate(const struct core_board *b, char *detail, size_t detail_len);

/* *out = a copy of b with column `from` renamed `to` (same place, same flags) and every role
 * naming `from` following it. out must be zeroed; released on failure. The caller checks
 * that `from` exists and `to` does not. */
enum core_rc core_board_rename_column(const struct core_board *b, const char *from,
				      const char *to, struct core_board *out);

/* Borrowed pointer into b->cols, or NULL for an unknown column. */
const struct core_column *core_board_column(const struct core_board *b, const char *name);
bool core_board_is_terminal(const struct core_board *b, const char *col);
/* Working = known and not terminal. */
bool core_board_is_working(const struct core_board *b, const char *col);
bool core_board_is_eligible(const struct core_board *b, const char *col);
/* eligible[0]: the first launch column (ready on the default board); NULL if none. */
const char *core_board_first_eligible(const struct core_board *b);

/* ---------------------------------------------------------------------------------------- */
/* Cards (DESIGN §2).                                                                        */

struct core_comment {
	char *id;
	char *author;
	char *body;
	int64_t created_at;
};

struct core_gave_up {
	bool set;
	char *reason;
	char *run_id; /* may be NULL */
	char *state;  /* may be NULL */
	int64_t at;
};

/* The claim token: marker + epoch, and the name of the credential that presents it (DESIGN
 * §11: the claim is bound to the token that took it). holder NULL presents no credential: it
 * passes only a claim that records no holder (taken by an unnamed caller, or legacy). */
struct core_token {
	const char *marker;
	int64_t epoch;
	const char *holder;
};

struct core_claim {
	char *marker;       /* non-NULL iff present */
	char *holder;       /* the name of the token that took it; NULL: not bound (unnamed
			     * caller, or a claim older than the binding) */
	int64_t claimed_at;
	int64_t lease_until;
	int64_t lease_ms;
	bool present;       /* card is claimed */
	bool has_lease;     /* false: a legacy or stripped claim with no lease stamped */
	char *from;         /* DESIGN §17: the column it was taken from (served as claim.from;
			     * a recovery claim keeps the one it replaced); NULL on a claim older
			     * than §17, which counts against no column limit */
};

struct core_card {
	/* Fields are ordered so that the struct has no holes: a million of them are held in
	 * memory by the FS twin. */
	char *id;
	char *board;
	char *title;
	char *body;
	char *state;
	int32_t priority; /* claim-next takes the highest first (DESIGN §12); default 0 */
	bool has_epoch; /* false only when a foreign writer dropped the field (Mongo twin) */
	bool awaiting_input;
	/* A view: the struct borrows every field from something else (the FS twin's views of
	 * its published cards, store/fs/fs_flat.c): read-only, never released nor freed; a copy
	 * (core_card_dup) is an ordinary card. */
	bool flat;
	/* One allocation: the struct first, then everything it points to (store/fs's answers,
	 * fs_card_block). Read-only: core_card_free frees it whole; no field is ever replaced
	 * or freed alone. A copy (core_card_dup) is an ordinary card. */
	bool one_block;
	struct core_strv labels;
	struct core_strv blockers;
	struct core_comment *comments;
	size_t n_comments;
	struct core_claim claim;
	int64_t claim_epoch;
	char *last_run_id; /* may be NULL */
	struct core_gave_up gave_up;
	char *state_reason; /* may be NULL */
	int64_t created_at;
	int64_t updated_at;
	int64_t state_at;
	/* DESIGN §17: not claimable before this time (ms); 0: no schedule. */
	int64_t not_before;
	/* DESIGN §17: claims that ended without the work being done (retry releases, reaper
	 * returns); reset by a completion or an operator's reopen. */
	int32_t attempts;
};

/* Allocates a zeroed card; caller frees with core_card_free. NULL on OOM. */
struct core_card *core_card_new(void);
void core_card_release(struct core_card *c);
void core_card_free(struct core_card *c);
/* Deep copy; caller frees with core_card_free. NULL on OOM. */
struct core_card *core_card_dup(const struct core_card *c);
/* Deep equality of every field (used by tests and by the stores' "unchanged" checks). */
bool core_card_equal(const struct core_card *a, const struct core_card *b);
/* The same, ignoring the claim fields (claim, has_epoch, claim_epoch) and updated_at: true
 * when a write changed nothing but the claim (the FS journal then records only that). */
bool core_card_equal_except_claim(const struct core_card *a, const struct core_card *b);
/* The rest: the claim fields and updated_at alone. core_card_equal is both. */
bool core_card_equal_claim(const struct core_card *a, const struct core_card *b);
/* The card's stored size in bytes as the limits count it (DESIGN §11): its strings, labels,
 * blockers and comments, without framing. */
size_t core_card_size(const struct core_card *c);

/* Sets c->gave_up to a copy of g (stamped now when g->at is 0) or clears it (g NULL or
 * !g->set); updated_at = now. NOMEM leaves the card unchanged. */
enum core_rc core_card_gave_up_set(struct core_card *c, const struct core_gave_up *g,
				   int64_t now_ms);

/* Appends a comment {id "cm-<n>", author, body, created_at = now} (n: its position, 1-based:
 * comments are never removed, so it is unique per card); updated_at = now. The new comment's
 * id is c->comments[c->n_comments - 1].id. NOMEM leaves the card unchanged. */
enum core_rc core_comment_append(struct core_card *c, const char *author, const char *body,
				 int64_t now_ms);

/* Replaces *dst by a copy of src (NULL clears). */
enum core_rc core_str_set(char **dst, const char *src);
/* n zeroed bytes (free with free), NULL on OOM: calloc(1, n) through malloc's per-thread cache,
 * which Debian 12's calloc (glibc 2.36) never takes: ~3x cheaper for the small blocks a write
 * allocates each time (a card, an event, an undo entry; bench/instr.sh). */
void *core_zalloc(size_t n);

/* ---------------------------------------------------------------------------------------- */
/* Claim rules (DESIGN §3, ADR-096 §1, §2, §6).                                              */

/* Claim `c` for `marker` with a lease of lease_ms, on behalf of the token named `holder`
 * (NULL: unnamed; the claim records no holder).
 * - unclaimed: fresh acquisition; epoch = max(claim_epoch + 1, epoch_floor) (the FS twin
 *   passes 0, the Mongo twin passes the server's now), claimed_at = now, lease = now + lease_ms.
 * - claimed by `marker` and the same holder: idempotent re-claim: lease refreshed, epoch
 *   unchanged (*fresh = false); refused with CLAIM_CONFLICT when the epoch field is missing
 *   or another token holds it.
 * - claimed by another marker: CLAIM_CONFLICT, even when that lease expired.
 * - card in a terminal column: TRANSITION_REJECTED. */
enum core_rc core_claim_acquire(struct core_card *c, const struct core_board *b, const char *marker,
				const char *holder, int64_t lease_ms, int64_t now_ms,
				int64_t epoch_floor, bool *fresh);

/* The fence: OK iff the card is claimed by exactly (marker, epoch), has its epoch field, and
 * t->holder is the claim's holder (when the claim records one). */
enum core_rc core_fence_check(const struct core_card *c, const struct core_token *t);

/* The credential half alone: OK when the claim records no holder or `holder` equals it. */
bool core_holder_match(const struct core_claim *cl, const char *holder);

/* Why the fence refuses a token (the metrics' reasons): the same test as core_fence_check, one
 * row per way it fails, in the order checked. */
#define CORE_FENCE_REASONS(X)                                                                 \
	X(CORE_FENCE_OK, "ok")                                                                \
	X(CORE_FENCE_UNCLAIMED, "unclaimed") /* no claim, or one without its epoch field */  \
	X(CORE_FENCE_MARKER, "marker")       /* another marker holds the claim */             \
	X(CORE_FENCE_EPOCH, "epoch")         /* the right marker, an older epoch */           \
	X(CORE_FENCE_HOLDER, "holder")       /* the right (marker, epoch), another token */

enum core_fence_reason {
#define CORE_FENCE_ENUM(name, str) name,
	CORE_FENCE_REASONS(CORE_FENCE_ENUM)
#undef CORE_FENCE_ENUM
	CORE_FENCE_REASON_COUNT_
};

enum core_fence_reason core_fence_why(const struct core_card *c, const struct core_token *t);
const char *core_fence_reason_name(enum core_fence_reason r);

/* Renew (heartbeat): fenced; lease_until = now + lease_ms, where lease_ms <= 0 keeps the
 * claim's own lease_ms (BAD_REQUEST when it has none). */
enum core_rc core_claim_renew(struct core_card *c, const struct core_token *t, int64_t lease_ms,
			      int64_t now_ms);

/* ReleaseOwned: fenced; clears the claim, keeps claim_epoch. */
enum core_rc core_claim_release(struct core_card *c, const struct core_token *t);

/* Unfenced release used by the repair sweeps and the reaper's own recovery token path. */
void core_claim_clear(struct core_card *c);

/* True when the claim has a lease and lease_until < now. */
bool core_claim_expired(const struct core_card *c, int64_t now_ms);

/* The reaper's TRANSFER (ADR-096 §3): CAS the claim from exactly `prev` (marker and epoch; the
 * holder is not asked: the server takes over) to `marker`, requiring the lease to be still
 * expired at now. Epoch = max(prev.epoch + 1, epoch_floor); claimed_at = now; lease = now +
 * lease_ms; the recovery claim is the server's own: its holder is `marker`. Any miss is
 * CLAIM_CONFLICT. */
enum core_rc core_claim_transfer(struct core_card *c, const struct core_token *prev,
				 const char *marker, int64_t lease_ms, int64_t now_ms,
				 int64_t epoch_floor);

/* claim-next (DESIGN §12): which unclaimed card a worker gets next. One rule for both twins:
 * the FS twin walks a posting list with it, the Mongo twin's query filter and sort say the
 * same thing (and its conformance test holds it to this). */
struct core_card_lookup;

struct core_pick {
	const struct core_board *board;
	int64_t now_ms; /* cards whose not_before is after it do not fit (DESIGN §17) */
	const struct core_strv *columns;  /* NULL or empty: the board's eligible columns */
	const struct core_strv *labels;   /* NULL or empty: any */
	const struct core_card_lookup *lk; /* blockers' states (NULL: blockers are not looked at) */
};

/* Checks a columns filter: every column known on b and not terminal (a terminal card cannot
 * be claimed). TRANSITION_REJECTED with a detail naming the column otherwise. */
enum core_rc core_pick_check(const struct core_board *b, const struct core_strv *columns,
			     char *detail, size_t detail_len);
/* c is a card of p->board, unclaimed, sits in one of the columns, carries every label and
 * its blockers are all in the completed column. (The FS twin's candidate lists hold every
 * board's cards of a column or a label: the board is part of the fit.) */
bool core_pick_fits(const struct core_pick *p, const struct core_card *c);
/* a comes before b: higher priority, then older created_at, then smaller id. */
bool core_pick_before(const struct core_card *a, const struct core_card *b);
/* The same order from the three keys (for a store that holds its cards in another form). */
bool core_pick_keys_before(int32_t priority_a, int64_t created_a, const char *id_a,
			   int32_t priority_b, int64_t created_b, const char *id_b);

/* ---------------------------------------------------------------------------------------- */
/* Dispatch policy (DESIGN §17): capacity, schedules, retries with backoff. The twins count
 * the live claims; these are the rules they apply to the counts. */

/* A claim taken from column `col` of b, with `claimed_col` live claims already taken from it
 * and `claimed_board` on the board: OK, or CAPACITY_REACHED with a detail naming the column
 * (or the board) and its limit. The column is checked first. */
enum core_rc core_capacity_check(const struct core_board *b, const char *col,
				 int64_t claimed_col, int64_t claimed_board, char *detail,
				 size_t detail_len);
/* Has col room for one more claim (the column's limit alone)? */
bool core_column_has_room(const struct core_board *b, const char *col, int64_t claimed_col);
/* c's not_before has not passed at now: NOT_YET with a detail naming the time; else OK. */
enum core_rc core_not_yet_check(const struct core_card *c, int64_t now_ms, char *detail,
				size_t detail_len);

/* The retry policy in force on b: its own, or the defaults with max_attempts =
 * default_max_attempts (the server's --run-ceiling; <= 0: CORE_RETRY_MAX_ATTEMPTS). */
void core_retry_effective(const struct core_board *b, int32_t default_max_attempts,
			  struct core_retry *out);
/* Checks a board's retry policy (ranges); detail as core_board_validate. */
enum core_rc core_retry_validate(const struct core_retry *r, char *detail, size_t detail_len);
/* The wait before the next claim after `attempts` failed ones (attempts >= 1):
 * min(max_backoff_ms, backoff_ms * 2^(attempts-1)), then +-10 % jitter from rnd (any
 * 32-bit value: 0 gives -10 %, UINT32_MAX +10 %). Never below 1. */
int64_t core_retry_backoff(const struct core_retry *r, int32_t attempts, uint32_t rnd);

enum core_retry_outcome {
	CORE_RETRY_LATER,     /* attempts counted; not_before set: back to the pool */
	CORE_RETRY_EXHAUSTED, /* attempts reached max_attempts: file into the failed column with
			       * gave_up {reason "attempts_exhausted"} instead */
};
#define CORE_GAVE_UP_ATTEMPTS_EXHAUSTED "attempts_exhausted"

/* A claim of c ended without the work being done (an owned release with retry, a reaper
 * return to the pool): attempts + 1, and either not_before = now + the backoff (LATER) or
 * EXHAUSTED (not_before left as it was; the caller files the card). updated_at = now. */
enum core_retry_outcome core_retry_count(struct core_card *c, const struct core_retry *r,
					 int64_t now_ms, uint32_t rnd);
/* c now sits in its board's completed column, or an operator reopened it: attempts = 0 and
 * (on a reopen) no schedule left over from the retries. Call after the state was set. */
void core_attempts_reset(struct core_card *c);

/* ---------------------------------------------------------------------------------------- */
/* Workflow rules (DESIGN §4, ADR-096 §5).                                                   */

/* Who writes a card's state. Terminal -> terminal refiling is an operator's act only
 * (ADR-096 §5, which wins over DESIGN §4's "allowed"): a bot's SetStateFrom or a worker's
 * owned write must not drag a card from one sink into another. */
enum core_mover {
	CORE_MOVER_OPERATOR, /* an operator's ordinary (unowned) state write */
	CORE_MOVER_BOT,      /* a bot's SetStateFrom (REST or MCP move_card / close_card) */
	CORE_MOVER_OWNER,    /* the claim holder's owned write (a worker, or the reaper's) */
};

/* May `by` move a card from `from` to `to` on board b?
 * unknown `to` -> TRANSITION_REJECTED; terminal -> working -> TERMINAL_STATE_EXIT;
 * terminal -> another terminal column -> TERMINAL_STATE_EXIT unless by is
 * CORE_MOVER_OPERATOR; a write to the column the card is in and every other move -> OK. */
enum core_rc core_transition_check(const struct core_board *b, const char *from, const char *to,
				   enum core_mover by);

/* A gave_up stamp g (NULL or !g->set: a clear) for a card of board b: its state, when
 * given, must be a column of b (TRANSITION_REJECTED, as for an unknown column anywhere). */
enum core_rc core_gave_up_check(const struct core_board *b, const struct core_gave_up *g);

/* SetStateFrom's CAS on the declared source: `from` NULL means "any" (operator form). */
enum core_rc core_state_from_check(const struct core_card *c, const char *from);

/* Reopen(card, to): the card must sit in a terminal column, `to` must be a working column
 * (else TRANSITION_REJECTED); leaving the completed column is refused with
 * DEPENDENTS_OUTSTANDING while `dependents_outside_waiting` > 0 (the number of cards listing
 * this card in blockers whose state is not the waiting column). */
enum core_rc core_reopen_check(const struct core_board *b, const struct core_card *c, const char *to,
			       size_t dependents_outside_waiting);

/* Writes the state fields: state, state_reason (NULL clears), state_at = updated_at = now. */
enum core_rc core_card_state_write(struct core_card *c, const char *to, const char *reason,
				   int64_t now_ms);

/* Provenance (DESIGN §7): true for watchdog, state_rename, state_delete, migration, and
 * attempts_exhausted (DESIGN §17's filing of a card out of attempts). */
bool core_is_machine_reason(const char *reason);

/* Blockers: a lookup the caller provides so core can see other cards without owning them.
 * Returns the state of card `id` (borrowed until the next call), or NULL when unknown.
 * `blockers_out` (may be NULL) receives a borrowed pointer to that card's blockers. */
struct core_card_lookup {
	const char *(*state_of)(void *ctx, const char *id, const struct core_strv **blockers_out);
	void *ctx;
};

/* Validates a blocker list for card `self_id`: every id valid and known, none is self_id, no
 * cycle through the existing blocker graph (TRANSITION_REJECTED, reason in detail). Duplicates
 * are dropped by the caller beforehand (core_strv_dedup). */
enum core_rc core_blockers_check(const char *self_id, const struct core_strv *blockers,
				 const struct core_card_lookup *lk, char *detail, size_t detail_len);

/* True when every blocker sits in the board's completed column (vacuously true for none). */
bool core_blockers_all_done(const struct core_board *b, const struct core_strv *blockers,
			    const struct core_card_lookup *lk);

/* Removes duplicates keeping the first occurrence (set semantics, order kept). */
void core_strv_dedup(struct core_strv *sv);

/* ---------------------------------------------------------------------------------------- */
/* Labels (ADR-096 §9: set is absolute, adjust is relative and one atomic step).             */

/* Replaces c->labels by `labels` (deduplicated, order kept). *changed tells whether it moved.
 * Every label must be core_label_valid (BAD_REQUEST otherwise, card unchanged). */
enum core_rc core_labels_set(struct core_card *c, const struct core_strv *labels, bool *changed);
/* Appends each of `add` not present, then removes each of `remove`. */
enum core_rc core_labels_adjust(struct core_card *c, const struct core_strv *add,
				const struct core_strv *remove, bool *changed);

/* The admin sweeps' transform (rename, merge, delete): removes every label of `from`; when
 * one was present and `to` is not NULL, `to` takes the place of the first removed label
 * (once: a card that already has `to` keeps its position). `to` among `from` is kept, not
 * removed (a rename onto itself changes nothing). *changed tells whether it moved.
 * Labels must be core_label_valid (BAD_REQUEST, card unchanged). */
enum core_rc core_labels_transform(struct core_card *c, const struct core_strv *from,
				   const char *to, bool *changed);

/* ---------------------------------------------------------------------------------------- */
/* Events (DESIGN §7).                                                                       */

#define CORE_EVENT_TYPES(X)                                                                   \
	X(CORE_EV_CARD_CREATED, "card_created")                                               \
	X(CORE_EV_CARD_UPDATED, "card_updated")                                               \
	X(CORE_EV_CARD_STATE_CHANGED, "card_state_changed")                                   \
	X(CORE_EV_CARD_DELETED, "card_deleted")                                               \
	X(CORE_EV_CARD_CLAIMED, "card_claimed")                                               \
	X(CORE_EV_CARD_RELEASED, "card_released")                                             \
	X(CORE_EV_CARD_LAST_RUN, "card_last_run")                                             \
	X(CORE_EV_CARD_GAVE_UP, "card_gave_up")                                               \
	X(CORE_EV_CARD_COMMENT_ADDED, "card_comment_added")                                   \
	X(CORE_EV_CARD_LABELS_CHANGED, "card_labels_changed")                                 \
	X(CORE_EV_CARD_UNBLOCKED, "card_unblocked")                                           \
	X(CORE_EV_RUN_CREATED, "run_created")                                                 \
	X(CORE_EV_RUN_UPDATED, "run_updated")                                                 \
	X(CORE_EV_BOARD_UPDATED, "board_updated")                                             \
	X(CORE_EV_LABEL_RENAME, "label_rename")                                               \
	X(CORE_EV_LABEL_MERGE, "label_merge")                                                 \
	X(CORE_EV_LABEL_DELETE, "label_delete")

enum core_event_type {
#define CORE_EV_ENUM(name, str) name,
	CORE_EVENT_TYPES(CORE_EV_ENUM)
#undef CORE_EV_ENUM
	CORE_EV_COUNT_
};

const char *core_event_type_name(enum core_event_type t);
/* -1 when unknown. */
int core_event_type_parse(const char *s);

struct core_event {
	int64_t seq;       /* assigned by the store: one sequence over every board */
	int64_t board_seq; /* assigned by the store with seq: 1, 2, 3 ... per board, no gaps
			    * (what a token scoped to boards reads its cursors in, DESIGN §11) */
	int64_t at;
	char *board;
	enum core_event_type type;
	char *card_id; /* may be NULL (board events) */
	char *actor;   /* "" for machine events */
	char *reason;  /* may be NULL */
	bool machine;
	char *payload; /* a JSON object as text, built by the store/api codec; may be NULL */
};

/* Fills e (zeroed by the caller): machine = core_is_machine_reason(reason); a machine event
 * gets actor "" whatever `actor` says. payload is taken over (may be NULL). */
enum core_rc core_event_init(struct core_event *e, enum core_event_type t, const char *board,
			     const char *card_id, const char *actor, const char *reason,
			     int64_t now_ms, char *payload);
void core_event_release(struct core_event *e);
enum core_rc core_event_copy(struct core_event *dst, const struct core_event *src);

/* The boards a batch of events touched, so that only the listeners reading one of them are
 * woken (an event stream on one board, say, while another board is busy). Names are
 * borrowed from the events. `all`: more distinct boards than fit, or an event with none. */
#define CORE_TOUCHED_MAX 16
struct core_touched {
	const char *board[CORE_TOUCHED_MAX];
	size_t n;
	bool all;
};
void core_touched_of(struct core_touched *t, const struct core_event *ev, size_t n);
/* Whether t may hold news for a listener of `board`, or (board NULL) of the boards in the
 * NULL-terminated `boards`, or (both NULL) of every board. */
bool core_touched_any(const struct core_touched *t, const char *board,
		      const char *const *boards);

/* ---------------------------------------------------------------------------------------- */
/* Runs and the liveness oracle (DESIGN §5).                                                 */

#define CORE_RUN_QUEUED "queued"
#define CORE_RUN_RUNNING "running"
#define CORE_RUN_PAUSED_HUMAN "paused_waiting_human"
#define CORE_RUN_PAUSED_OPERATOR "paused_operator"
#define CORE_RUN_FINISHED "finished"
#define CORE_RUN_FAILED "failed"
#define CORE_RUN_FAILED_RESUMABLE "failed_resumable"
#define CORE_RUN_CANCELLED "cancelled"
#define CORE_CONT_REDELIVERY "redelivery_pending"
#define CORE_CONT_RETRY "retry_armed"
#define CORE_CONT_FINAL "final"
#define CORE_FAILURE_ORPHANED "PROCESS_ORPHANED"

struct core_run {
	char *id;
	char *card_id;
	char *board;
	char *status;
	char *continuation; /* may be NULL */
	char *failure_code; /* may be NULL */
	char *owner;        /* the marker holding the run lock */
	char *result;       /* the owner's result: JSON text (any value, <= 64 KiB); may be NULL */
	char *error;        /* the owner's error message (<= 4 KiB); may be NULL */
	char *output;       /* the tail of the job's output: valid UTF-8, at most
			     * CORE_RUN_OUTPUT_MAX bytes (DESIGN §20); may be NULL */
	int64_t claim_epoch; /* the epoch of the card's claim the run was created under (DESIGN
			      * §11); 0: a run older than the fence, of no claim */
	int64_t lock_until;
	int64_t lease_ms;
	int64_t created_at;
	int64_t updated_at;
	bool pruned; /* a tombstone: the run was deleted by an operator */
};

struct core_run *core_run_new(void);
void core_run_release(struct core_run *r);
void core_run_free(struct core_run *r);
struct core_run *core_run_dup(const struct core_run *r);

/* finished, failed and cancelled are final: no write may change such a run (DESIGN §11). */
bool core_run_status_final(const char *status);

/* Was run r created under the claim the card holds now (marker, epoch, and the card's
 * board)? The reaper judges a claim only by such a run; run writes need it. */
bool core_run_of_claim(const struct core_run *r, const struct core_card *c);
/* The same for a claim a foreign writer stripped of its epoch (Mongo, DESIGN §6's un-leased
 * arm), which has no epoch to compare: the run's owner is the claim's marker, on this card,
 * created at or after the claim was taken (when claimed_at survived). The reaper judges such
 * a claim by that run, so a finished, cancelled or paused run still decides (it used to read
 * as "no run": released, whatever the run said). */
bool core_run_of_stripped_claim(const struct core_run *r, const struct core_card *c);

/* May a card record run r as its last run (PUT last-run, DESIGN §11)? Only a live run of the
 * same card created under the claim `t` presents (the caller has checked the fence):
 * else TRANSITION_REJECTED. r NULL (unknown or pruned) is refused too. */
enum core_rc core_last_run_check(const struct core_run *r, const char *card_id,
				 const struct core_token *t);

/* Continuation must be one of the three known values. */
bool core_continuation_valid(const char *s);

/* ---- run history and output (DESIGN §20; core/run_history.c) ---- */

/* Is s one of the eight statuses DESIGN §5 names (queued ... cancelled)? Others are valid
 * but unknown; the runs listing filters by a known one only. */
bool core_run_status_known(const char *s);
/* Those statuses, comma-separated (for a detail). */
#define CORE_RUN_STATUSES_TEXT                                                              \
	"queued, running, paused_waiting_human, paused_operator, finished, failed, "        \
	"failed_resumable, cancelled"
/* Is [s, s+len) valid UTF-8 without NUL (what a run's output may hold)? */
bool core_run_output_valid(const char *s, size_t len);
/* The output after appending `text` (valid UTF-8) to `old` (NULL: none): the last `max` bytes
 * at most of old + text, cut at a code point boundary (older bytes drop off the front).
 * OUT: *out, a new string (caller frees), NULL when the result is empty. BAD_REQUEST when
 * text is not valid UTF-8 (nothing allocated); NOMEM. */
enum core_rc core_run_output_append(const char *old, const char *text, size_t max, char **out);
/* The history's order: newest first (created_at descending, then id descending). qsort
 * comparator over struct core_run * elements. */
int core_run_newer_cmp(const void *a, const void *b);
/* Does r come after the cursor (created_at `at`, id `id`) in that order? */
bool core_run_after(const struct core_run *r, int64_t at, const char *id);
/* A listing's cursor: "<created_at>:<id>" of the last run served (buf of
 * CORE_RUN_CURSOR_MAX bytes), parsed back by core_run_cursor_parse (false: not a cursor;
 * *id points into s). */
#define CORE_RUN_CURSOR_MAX (CORE_ID_MAX + 24)
void core_run_cursor_format(const struct core_run *r, char *buf, size_t cap);
bool core_run_cursor_parse(const char *s, int64_t *at, const char **id);
/* May a card's history drop run r to stay within CORE_RUN_HISTORY_MAX (c: the card as it
 * stands, NULL when gone)? Never the card's last_run_id (the reaper judges by it), never a
 * run still live under the card's current claim (its owner is writing it): a tombstone then
 * answers its writes NOT_FOUND. A retired run becomes a tombstone without its result, error
 * and output (core_run_retire), so the id is never reused and the run ceiling still
 * counts it. */
bool core_run_retirable(const struct core_run *r, const struct core_card *c);
/* Turns r into the tombstone retention leaves (pruned; result, error and output dropped). */
void core_run_retire(struct core_run *r);

/* promoteIfOrphaned: a running/queued run whose lock has expired (lock_until < now) becomes
 * failed_resumable / PROCESS_ORPHANED; *promoted tells whether it did. Never touches a run
 * whose lock is live. */
void core_run_promote_if_orphaned(struct core_run *r, int64_t now_ms, bool *promoted);

/* ---------------------------------------------------------------------------------------- */
/* The stuck-card decision table (DESIGN §6, ADR-096 §4). One definition, shared by every    */
/* caller; pure: the caller resolves the run (promoteIfOrphaned first) and hands in what it  */
/* found.                                                                                    */

#define CORE_STUCK_ACTIONS(X)                                                                 \
	X(CORE_STUCK_KEEP, "keep")                                                            \
	X(CORE_STUCK_COMPLETE, "complete")                                                    \
	X(CORE_STUCK_FAIL, "fail")                                                            \
	X(CORE_STUCK_REPARK, "repark")                                                        \
	X(CORE_STUCK_RELEASE, "release")                                                      \
	X(CORE_STUCK_GIVE_UP, "give_up")

enum core_stuck_action {
#define CORE_STUCK_ENUM(name, str) name,
	CORE_STUCK_ACTIONS(CORE_STUCK_ENUM)
#undef CORE_STUCK_ENUM
	CORE_STUCK_ACTION_COUNT_
};

const char *core_stuck_action_name(enum core_stuck_action a);

/* What resolving the card's last_run_id found. */
enum core_run_seen {
	CORE_RUN_SEEN_NONE,       /* no run recorded on the card */
	CORE_RUN_SEEN_LOADED,     /* the run was read */
	CORE_RUN_SEEN_GONE,       /* a run was recorded but is gone (pruned) */
	CORE_RUN_SEEN_UNREADABLE, /* reading it failed */
};

struct core_stuck_input {
	enum core_run_seen seen;
	const struct core_run *run;    /* when seen == LOADED */
	const struct core_board *board;
	const char *state;             /* the card's state as observed with the ownership */
	bool stamp_window_open;        /* core_stamp_window_open() of the listed claim */
};

struct core_stuck_decision {
	enum core_stuck_action action;
	const char *row; /* stable name of the row that decided, for logs and tests */
	const char *reason; /* the reason a write carries: run_finished, run_failed, watchdog */
};

/* StampWindowOpen: the claim was taken less than two of its own leases ago, so a run stamp
 * (written after the launch, best-effort) may still be on its way. A zero claimed_at or
 * lease reads as closed: an unknown age must not grant an unbounded hold. */
bool core_stamp_window_open(int64_t claimed_at, int64_t lease_ms, int64_t now_ms);

/* DecideStuckCard: the table of DESIGN §6.5, rows in precedence order. */
struct core_stuck_decision core_decide_stuck_card(const struct core_stuck_input *in);

/* DecideTransfer: the same table before the transfer, liveness rows only: the parked row
 * does not speak (refusing the transfer would make its bound unreachable). */
struct core_stuck_decision core_decide_transfer(const struct core_stuck_input *in);

/* RecoveryHoldExpired: the listed claim is already a recovery (reaper:) claim and nothing
 * may be alive behind it (run readable, not running/queued, no stamp in flight). */
bool core_recovery_hold_expired(const struct core_stuck_input *in, const char *prev_marker);

/* ShouldFileStuckCard: may the watchdog write `target` onto a card observed in `state`?
 * Only when the card still sits in the running column or a launch (eligible) column and is
 * not already there: a column somebody chose is never overwritten. */
bool core_should_file_stuck_card(const struct core_board *b, const char *state, const char *target);

/* ---------------------------------------------------------------------------------------- */
/* Effects: subscription matching and the delivery schedule (DESIGN §14).                    */

/* The match dimensions, defined once: the matcher, the subscription codec and the docs all
 * walk this table. Each dimension is a list of strings; OR within a dimension, AND across.
 * An empty list means "any", except `types`, whose empty list means CORE_SUB_DEFAULT_TYPES. */
#define CORE_SUB_DIMENSIONS(X)                                                                \
	X(CORE_SUB_TYPES, "types", "the event's type is one of these")                        \
	X(CORE_SUB_TO_STATES, "to_states", "the state the event moved the card into is one of these") \
	X(CORE_SUB_ALL_LABELS, "all_labels", "the card carries every one of these labels")

enum core_sub_dimension {
#define CORE_SUB_ENUM(id, name, doc) id,
	CORE_SUB_DIMENSIONS(CORE_SUB_ENUM)
#undef CORE_SUB_ENUM
	CORE_SUB_DIM_COUNT_
};

#define CORE_SUB_DEFAULT_TYPES "card_created", "card_state_changed", "card_unblocked"

const char *core_sub_dimension_name(enum core_sub_dimension d);
const char *core_sub_dimension_doc(enum core_sub_dimension d);

struct core_sub_filter {
	struct core_strv dim[CORE_SUB_DIM_COUNT_];
};

/* Every to_states value of f is a column of board b; else TRANSITION_REJECTED (an unknown
 * column, DESIGN §8) with detail (may be NULL) naming each unknown one. */
enum core_rc core_sub_filter_columns_check(const struct core_board *b,
					   const struct core_sub_filter *f, char *detail,
					   size_t detail_len);
/* A column rename carried into f: `from` in to_states becomes `to` (kept once). *changed
 * says whether f changed; NOMEM leaves f as it was. */
enum core_rc core_sub_filter_column_rename(struct core_sub_filter *f, const char *from,
					   const char *to, bool *changed);

/* Checks every value of every dimension (types known, states and labels well-formed);
 * BAD_REQUEST with a detail naming the value otherwise. */
enum core_rc core_sub_filter_validate(const struct core_sub_filter *f, char *detail,
				      size_t detail_len);
void core_sub_filter_release(struct core_sub_filter *f);

/* An event as the matcher sees it. */
struct core_effect_event {
	enum core_event_type type;
	bool machine;                   /* core_is_machine_reason of the event's reason */
	const char *to_state;           /* the state the event moved the card into; NULL if none */
	const struct core_strv *labels; /* the card's labels after the event; NULL: none */
};

/* The types a subscription may name: card events but card_deleted (-1 and unknown: false). */
bool core_event_type_subscribable(int t);

/* True when the event fires the subscription. A machine event never matches (ADR-096). */
bool core_sub_matches(const struct core_sub_filter *f, const struct core_effect_event *ev);

/* The one-shot: removes every label of `consume` from the card (a matched subscription's
 * consume_labels, applied in the same atomic step as the event). */
enum core_rc core_effect_consume(struct core_card *c, const struct core_strv *consume,
				 bool *changed);

/* What a delivery attempt's answer means. */
enum core_delivery_verdict {
	CORE_DELIVERY_DONE,    /* 2xx */
	CORE_DELIVERY_RETRY,   /* try again at *next_at */
	CORE_DELIVERY_DEAD,    /* the last attempt failed */
	CORE_DELIVERY_DISABLE, /* 410 Gone: the subscription is disabled, the delivery dead */
};

#define CORE_DELIVERY_ATTEMPTS 7 /* the first try and six retries */

/* The verdict on attempt number `attempt` (1-based) that answered `status` (0: no answer:
 * connect error or timeout) at now_ms. For RETRY, *next_at = now + the schedule's delay for
 * this attempt (5 s, 5 min, 30 min, 2 h, 5 h, 10 h) scaled by jitter in [0.9, 1.1) from
 * `unit` in [0, 1), and never before now + retry_after_ms (the receiver's Retry-After; 0 when
 * absent). Pure: the caller supplies the time and the randomness. */
enum core_delivery_verdict core_delivery_judge(int status, int attempt, int64_t now_ms,
					       double unit, int64_t retry_after_ms,
					       int64_t *next_at);


/* ---------------------------------------------------------------------------------------- */
/* Attention (DESIGN §15): why a card needs an operator. One table; the API's reason names,
 * the stores' candidate indexes and the tests derive from it.                                */

#define CORE_ATTENTION_REASONS(X)                                                            \
	X(CORE_ATTN_GAVE_UP, "gave_up", "a give-up stamp the card was not moved out of")       \
	X(CORE_ATTN_RUN_FAILED, "run_failed", "its current run failed and the card stayed")    \
	X(CORE_ATTN_RECOVERY_HOLD, "recovery_hold", "held by a reaper: recovery marker")       \
	X(CORE_ATTN_LEASE_EXPIRED_KEPT, "lease_expired_kept",                                  \
	  "the claim's lease expired and the claim is still there")                           \
	X(CORE_ATTN_AWAITING_INPUT, "awaiting_input", "the card waits for input")              \
	X(CORE_ATTN_RUN_PAUSED, "run_paused", "the run of its current claim is paused")

enum core_attention_reason {
#define CORE_ATTN_ENUM(id, name, doc) id,
	CORE_ATTENTION_REASONS(CORE_ATTN_ENUM)
#undef CORE_ATTN_ENUM
	CORE_ATTN_COUNT_
};

/* "gave_up", ...; "unknown" out of range. */
const char *core_attention_reason_name(enum core_attention_reason r);
const char *core_attention_reason_doc(enum core_attention_reason r);

/* The reasons (bit 1u << reason) card c needs an operator at now_ms. `terminal`: c sits in a
 * terminal column of its board. `run`: the card's recorded run (c->last_run_id), or NULL when
 * none is recorded or it cannot be read; a run that is not the one recorded is ignored, and
 * so, while the card is claimed, is a run created under another claim than the card's
 * current one (DESIGN §11: a superseded claim's run never speaks for the new claim).
 * gave_up and run_failed hold while the card sits in a terminal column, or has not moved
 * since the stamp / the run's last write (a reopen clears them). run_paused needs the claim
 * the paused run was created under to be still the card's (ADR-096 §4: that claim is the
 * parking brake; without it the run holds nothing). */
unsigned core_attention_reasons(const struct core_card *c, bool terminal,
				const struct core_run *run, int64_t now_ms);
/* The part that needs neither the clock nor the board: could this card (with this run) be in
 * the lane through gave_up, run_failed, awaiting_input or run_paused? The FS twin's candidate
 * index holds exactly these cards; the clock-bound reasons come from its claim indexes. */
bool core_attention_candidate(const struct core_card *c, const struct core_run *run);

/* ---- rules both twins apply, written once ---- */

/* Whether card c's claim is still exactly what a caller observed in `expect`: both claimed,
 * the same marker, and the same epoch or the same absence of one. The reaper's exact release
 * refuses (CLAIM_CONFLICT) when it is not. */
bool core_claim_matches(const struct core_card *c, const struct core_card *expect);
/* Whether a card or event of `board` is in a read's scope: equal to `one` (NULL: any board)
 * and listed in `many` (NULL: any; else a NULL-terminated list, empty: none). */
bool core_scope_allows(const char *board, const char *one, const char *const *many);

#endif
