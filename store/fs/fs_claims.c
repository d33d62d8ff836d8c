/* Claims on the FS twin (DESIGN §3, §6; ADR-096 §1-§3, §6-§8): claim, renew, release, revoke,
 * the fenced owned writes, and the transaction head and tail every claim op shares (with
 * claim-next, fs_next.c, and the reaper's ops, fs_reaper.c). The epoch is a counter here
 * (epoch_floor 0). Every fenced write checks the fence before touching anything, and a
 * refused write leaves no copy behind to journal. */
#include "store/fs/fs.h"
#include "store/fs/fs_cards.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_policy.h"
#include "store/fs/fs_txn.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Card `id` in an open transaction (its private copy) with its board. */
enum core_rc fs_claim_card_in(struct fs_txn *t, const char *id, struct core_card **c,
			      const struct core_board **b)
{
	enum core_rc rc;

	*b = NULL;
	rc = fs_txn_card(t, id, c);
	if (rc == CORE_OK) {
		*b = fs_board_find(t->fs, (*c)->board);
		if (!*b)
			rc = CORE_ERR_INTERNAL;
	}
	return rc;
}

/* A transaction over card `id` with its board; the usual head of every claim op. */
enum core_rc fs_claim_begin(struct store *st, struct fs_txn *t, const char *id,
			    const struct store_actor *actor, struct core_card **c,
			    const struct core_board **b)
{
	fs_txn_begin(fs_of(st), t, actor);
	return fs_claim_card_in(t, id, c, b);
}

enum core_rc fs_claim_end(struct fs_txn *t, enum core_rc rc, const struct core_card *c,
			  struct core_card **out)
{
	if (rc == CORE_OK && out)
		rc = fs_txn_answer(t, c, out);
	rc = fs_txn_end(t, rc);
	if (rc != CORE_OK && out && *out) {
		core_card_free(*out);
		*out = NULL;
	}
	return rc;
}

/* The claim's token as an event payload, {"marker": .., "epoch": n or null}, written as text
 * (json_dumps of the json_pack tree it was; NULL on OOM). */
char *fs_claim_token_text(const char *marker, const struct core_card *c)
{
	const struct store_json_member m[] = {
		{"marker", STORE_JSON_STR, marker, 0},
		{"epoch", c->has_epoch ? STORE_JSON_INT : STORE_JSON_NULL, NULL, c->claim_epoch},
	};
	size_t len;

	return store_json_members_text(m, 2, &len);
}

enum core_rc fs_card_claim(struct store *st, const char *id, const char *marker, int64_t lease_ms,
			   const struct store_actor *actor, struct store_claim_result *out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	bool fresh = false;
	enum core_rc rc;

	struct core_card_lookup lk;

	rc = fs_claim_begin(st, &t, id, actor, &c, &b);
	/* A fresh hold of a card still waiting on its blockers would let it be worked and
	 * filed done before them (DESIGN §11). */
	if (rc == CORE_OK && !c->claim.present && !core_board_is_terminal(b, c->state)) {
		lk = fs_txn_lookup(&t);
		if (!core_blockers_all_done(b, &c->blockers, &lk))
			rc = CORE_ERR_BLOCKERS_PENDING;
	}
	if (rc == CORE_OK)
		rc = core_claim_acquire(c, b, marker, store_actor_holder(actor), lease_ms, t.now,
					0, &fresh);
	/* DESIGN §17: a scheduled card says until when; a fresh claim needs room in the column
	 * it is taken from and on the board (counts of the published state, under the write
	 * lock: no other claim lands in between). A holder's re-claim never counts again. */
	if (rc == CORE_ERR_NOT_YET)
		core_not_yet_check(c, t.now, out->detail, sizeof out->detail);
	if (rc == CORE_OK && fresh)
		rc = fs_capacity_check(t.fs, b, c->claim.from, out->detail, sizeof out->detail);
	/* An idempotent re-claim is renewal-like: no event. */
	if (rc == CORE_OK && fresh)
		rc = fs_txn_event_text(&t, CORE_EV_CARD_CLAIMED, c->board, c->id, NULL,
				       fs_claim_token_text(marker, c));
	rc = fs_claim_end(&t, rc, c, &out->card);
	if (rc == CORE_OK) {
		out->fresh = fresh;
		out->token.marker = out->card->claim.marker;
		out->token.epoch = out->card->claim_epoch;
	}
	return rc;
}

enum core_rc fs_card_renew(struct store *st, const char *id, const struct core_token *tok,
			   int64_t lease_ms, const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	/* core_claim_renew sets the lease's numbers alone: a fixed copy will do */
	rc = fs_txn_card_fixed(&t, id, &c);
	if (rc == CORE_OK && !fs_board_find(t.fs, c->board))
		rc = CORE_ERR_INTERNAL; /* as fs_claim_card_in */
	if (rc == CORE_OK)
		rc = core_claim_renew(c, tok, lease_ms, t.now);
	if (rc == CORE_ERR_CLAIM_CONFLICT)
		store_fence_refused(st, c, tok);
	return fs_claim_end(&t, rc, c, out);
}

enum core_rc fs_release_with_event(struct fs_txn *t, struct core_card *c, const char *reason)
{
	char *payload = fs_claim_token_text(c->claim.marker, c);

	if (!payload)
		return CORE_ERR_NOMEM;
	core_claim_clear(c);
	c->updated_at = t->now;
	return fs_txn_event_text(t, CORE_EV_CARD_RELEASED, c->board, c->id, reason, payload);
}

enum core_rc fs_card_release(struct store *st, const char *id, const struct core_token *tok,
			     const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = fs_claim_begin(st, &t, id, actor, &c, &b);
	if (rc == CORE_OK && (rc = core_fence_check(c, tok)) != CORE_OK)
		store_fence_refused(st, c, tok);
	if (rc == CORE_OK)
		rc = fs_release_with_event(&t, c, NULL);
	return fs_claim_end(&t, rc, c, out);
}

static json_t *gave_up_payload(const struct core_gave_up *g)
{
	return json_pack("{s:o}", "gave_up", store_gave_up_to_json(g));
}

/* Sets or clears gave_up (core_card_gave_up_set) and appends its event. */
static enum core_rc gave_up_write(struct fs_txn *t, struct core_card *c,
				  const struct core_gave_up *g, const char *reason)
{
	enum core_rc rc = core_card_gave_up_set(c, g, t->now);

	if (rc != CORE_OK)
		return rc;
	return fs_txn_event(t, CORE_EV_CARD_GAVE_UP, c->board, c->id, reason,
			    gave_up_payload(&c->gave_up));
}

/* The owned write w on card c (its fence already passed) in transaction t. */
enum core_rc fs_owned_write_in(struct fs_txn *t, struct core_card *c, const struct core_board *b,
			       const struct store_owned_write *w)
{
	bool moved = false;
	enum core_rc rc;

	switch (w->kind) {
	case STORE_OWNED_STATE:
		rc = w->from && strcmp(c->state, w->from) != 0
			     ? CORE_ERR_STATE_CONFLICT
			     : core_transition_check(b, c->state, w->state, CORE_MOVER_OWNER);
		if (rc == CORE_OK)
			rc = fs_state_move_only(t, c, w->state, w->reason, NULL, &moved);
		break;
	case STORE_OWNED_LAST_RUN:
		rc = w->run_id ? core_last_run_check(fs_txn_run_peek(t, w->run_id), c->id,
						     &w->token)
			       : CORE_OK;
		if (rc == CORE_OK)
			rc = core_str_set(&c->last_run_id, w->run_id);
		c->updated_at = t->now;
		if (rc == CORE_OK)
			rc = fs_txn_event(t, CORE_EV_CARD_LAST_RUN, c->board, c->id, NULL,
					  json_pack("{so}", "run_id",
						    w->run_id ? json_string(w->run_id)
							      : json_null()));
		break;
	case STORE_OWNED_AWAITING_INPUT:
		c->awaiting_input = w->awaiting_input;
		c->updated_at = t->now;
		rc = fs_txn_event(t, CORE_EV_CARD_UPDATED, c->board, c->id, NULL,
				  json_pack("{s[s]}", "fields", "awaiting_input"));
		break;
	case STORE_OWNED_GAVE_UP:
		rc = core_gave_up_check(b, w->gave_up);
		if (rc == CORE_OK)
			rc = gave_up_write(t, c, w->gave_up, w->event_reason);
		break;
	case STORE_OWNED_COMMENT:
		rc = fs_comment_write(t, c, w->comment);
		break;
	case STORE_OWNED_NOTHING: /* the release alone (a retry release) */
		rc = w->release ? CORE_OK : CORE_ERR_BAD_REQUEST;
		break;
	default:
		rc = CORE_ERR_BAD_REQUEST;
	}
	/* The token passed the fence and the write kept the epoch: the release is as fenced as
	 * the write, and shares its line (the reaper's file-and-release). With retry, the
	 * attempt is counted in that same step, where the write left the card (DESIGN §17). */
	if (rc == CORE_OK && w->release)
		rc = w->retry ? fs_retry_release(t, c, b, w->event_reason)
			      : fs_release_with_event(t, c, w->event_reason);
	/* The dependents' promotions after the card's own events (its move, its release). */
	if (rc == CORE_OK && moved)
		rc = fs_state_cascade(t, b, c, w->state, w->reason);
	return rc;
}

enum core_rc fs_card_owned_write(struct store *st, const char *id,
				 const struct store_owned_write *w, const struct store_actor *actor,
				 struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = fs_claim_begin(st, &t, id, actor, &c, &b);
	/* The fence first, for every kind: a stale token changes nothing at all. */
	if (rc == CORE_OK && (rc = core_fence_check(c, &w->token)) != CORE_OK)
		store_fence_refused(st, c, &w->token);
	if (rc == CORE_OK)
		rc = fs_owned_write_in(&t, c, b, w);
	return fs_claim_end(&t, rc, c, out);
}

enum core_rc fs_card_revoke(struct store *st, const char *id, const struct store_actor *actor,
			    struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = fs_claim_begin(st, &t, id, actor, &c, &b);
	if (rc == CORE_OK && c->claim.present)
		rc = fs_release_with_event(&t, c, "operator_revoke");
	return fs_claim_end(&t, rc, c, out);
}
