/* mongo_cas — the one write shape of the Mongo twin's cards: read, let core decide on a
 * private copy, write the difference with one conditional update (mongo_cas.c); the state
 * move with its cascade, the board read and the blockers' lookup. */
#ifndef BOARDD_STORE_MONGO_MONGO_CAS_H
#define BOARDD_STORE_MONGO_MONGO_CAS_H

#include "store/mongo/mongo_events.h"

/* ---- card writes: the read-decide-CAS step (mongo_cas.c) ---- */

/* What a conditional update requires to be unchanged since the read (its precondition). */
enum mgo_pre {
	MGO_PRE_STATE = 1 << 0,    /* state */
	MGO_PRE_CLAIM = 1 << 1,    /* claim.marker and claim_epoch, absence included */
	MGO_PRE_LEASE = 1 << 2,    /* claim.lease_until and claim.claimed_at, absence included */
	MGO_PRE_LABELS = 1 << 3,   /* labels, the whole array */
	MGO_PRE_BLOCKERS = 1 << 4, /* blockers, the whole array */
	MGO_PRE_COMMENTS = 1 << 5, /* the number of comments */
	MGO_PRE_SCHED = 1 << 6,    /* not_before, absence included (DESIGN §17) */
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

#endif
