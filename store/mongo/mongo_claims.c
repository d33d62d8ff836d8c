/* Claims on the Mongo twin (DESIGN §3; ADR-096 §1, §2, §6): claim, renew, release and the
 * fenced owned writes. core decides on the document as read; the write is one conditional
 * update whose filter pins (claim.marker, claim_epoch) as read — equality on the epoch, so a
 * card whose epoch field was dropped never matches and refuses every fenced write, the
 * holder's included. A fresh acquisition floors the epoch at the server clock:
 * max(previous + 1, now), monotone even across a write that dropped the field. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <stdlib.h>
#include <string.h>

static json_t *token_json(const char *marker, const struct core_card *c)
{
	return json_pack("{ssso}", "marker", marker, "epoch",
			 c->has_epoch ? json_integer(c->claim_epoch) : json_null());
}

/* ---- claim ---- */

struct claim_arg {
	const char *id, *marker, *holder;
	int64_t lease_ms;
	bool fresh;      /* OUT of the attempt that hit */
	bool only_fresh; /* claim-next: a card claimed already is a conflict, never a re-claim */
	char *detail;    /* NOT_YET, CAPACITY_REACHED: what was found (DESIGN §17) */
	size_t detail_len;
};

/* Whether the card's claim moved since `was` was read (claimed, released or taken again). */
static bool claim_moved(struct mgo_conn *c, const struct core_card *was)
{
	struct core_card *now = NULL;
	bool moved = false;

	if (mgo_card_read(c, was->id, &now) == CORE_OK)
		moved = now->claim.present != was->claim.present ||
			now->claim_epoch != was->claim_epoch;
	core_card_free(now);
	return moved;
}

static enum core_rc claim_once(struct mgo_conn *c, const void *arg, bool *hit,
			       struct core_card **out)
{
	struct claim_arg *x = (struct claim_arg *)arg;
	struct mgo_attempt a;
	struct mgo_evq q;
	struct mgo_slot_hold hold = {0};
	bool again = false;
	enum core_rc rc = mgo_attempt_begin(c, x->id, &a);

	struct mgo_lookup lk;
	struct core_card_lookup look;

	mgo_evq_init(&q, c->m);
	x->fresh = false;
	if (rc == CORE_OK && x->only_fresh && a.was->claim.present)
		rc = CORE_ERR_CLAIM_CONFLICT;
	/* A fresh hold of a card still waiting on its blockers would let it be worked and
	 * filed done before them (DESIGN §11). Read, not guarded: a blocker only ever moves
	 * toward done while it has dependents (reopen refuses otherwise). */
	if (rc == CORE_OK && !a.was->claim.present && !core_board_is_terminal(&a.b, a.was->state)) {
		look = mgo_lookup_init(&lk, c);
		if (!core_blockers_all_done(&a.b, &a.was->blockers, &look))
			rc = lk.rc != CORE_OK ? lk.rc : CORE_ERR_BLOCKERS_PENDING;
		mgo_lookup_release(&lk);
	}
	if (rc == CORE_OK)
		rc = core_claim_acquire(a.now, &a.b, x->marker, x->holder, x->lease_ms, c->now,
					c->now, &x->fresh);
	if (rc == CORE_ERR_NOT_YET && x->detail)
		core_not_yet_check(a.was, c->now, x->detail, x->detail_len);
	/* DESIGN §17: a fresh claim from a column (or board) with a limit holds a slot first
	 * (mongo_slots.c); the card write then carries the slots' epoch. */
	if (rc == CORE_OK && x->fresh && mgo_slots_needed(&a.b, a.now->claim.from)) {
		rc = mgo_slots_take(c, &a.b, a.now->claim.from, a.now->id, a.now->claim_epoch,
				    &hold, x->detail, x->detail_len);
		if (rc == CORE_OK)
			c->slot_epoch_set = a.now->claim_epoch;
		/* Decided on the card as it stands (DESIGN §16): full because its other
		 * claimers held slots, one of which took it meanwhile? Then the next attempt
		 * answers that (claim_conflict), not capacity_reached. */
		if (rc == CORE_ERR_CAPACITY_REACHED && claim_moved(c, a.was)) {
			rc = CORE_OK;
			again = true;
		}
	}
	/* An idempotent re-claim is renewal-like: no event. */
	if (rc == CORE_OK && x->fresh && !again)
		mgo_evq_add(&q, CORE_EV_CARD_CLAIMED, a.now->board, a.now->id, c->actor, NULL,
			    c->now, token_json(x->marker, a.now));
	/* A fresh hold also pins the blockers it judged all done, and the schedule: one added
	 * since the read makes the write miss and the next attempt judge again. */
	if (rc == CORE_OK && !again)
		rc = mgo_card_cas(c, a.was, a.now,
				  MGO_PRE_STATE | MGO_PRE_CLAIM |
					  (x->fresh ? MGO_PRE_BLOCKERS | MGO_PRE_SCHED : 0),
				  &q, hit, out);
	c->slot_epoch_set = 0;
	/* Given back only when the card write did not land: a claim written whose events then
	 * failed to be stored still holds its card, and so its slots. */
	if (!*hit)
		mgo_slots_give_back(c, &hold);
	mgo_evq_release(&q);
	mgo_attempt_end(&a);
	return rc;
}

static enum core_rc claim_run(struct mgo_conn *c, struct claim_arg *x,
			      struct store_claim_result *out)
{
	enum core_rc rc = mgo_card_retry_on(c, claim_once, x, CORE_ERR_CLAIM_CONFLICT, &out->card);

	if (rc == CORE_OK && (!out->card->claim.present || !out->card->has_epoch)) {
		/* The stored post-image lost the claim at once (a foreign writer): no token. */
		core_card_free(out->card);
		out->card = NULL;
		return CORE_ERR_CLAIM_CONFLICT;
	}
	if (rc == CORE_OK) {
		out->fresh = x->fresh;
		out->token.marker = out->card->claim.marker;
		out->token.epoch = out->card->claim_epoch;
	}
	return rc;
}

enum core_rc mgo_card_claim(struct store *st, const char *id, const char *marker,
			    int64_t lease_ms, const struct store_actor *actor,
			    struct store_claim_result *out)
{
	struct claim_arg x = {id, marker, store_actor_holder(actor), lease_ms, false, false,
			      out->detail, sizeof(out->detail)};
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	rc = claim_run(&c, &x, out);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_claim_fresh(struct mgo_conn *c, const char *id, const char *marker,
			     const char *holder, int64_t lease_ms, struct store_claim_result *out)
{
	struct claim_arg x = {id, marker, holder, lease_ms, false, true,
			      out->detail, sizeof(out->detail)};

	return claim_run(c, &x, out);
}

/* ---- renew, release ---- */

struct token_arg {
	const char *id;
	const struct core_token *t;
	int64_t lease_ms;
};

static enum core_rc renew_once(struct mgo_conn *c, const void *arg, bool *hit,
			       struct core_card **out)
{
	const struct token_arg *x = arg;
	struct mgo_evq q;
	struct mgo_attempt a;
	enum core_rc rc = mgo_attempt_begin_card(c, x->id, &a);

	mgo_evq_init(&q, c->m);
	if (rc == CORE_OK && (rc = core_claim_renew(a.now, x->t, x->lease_ms, c->now)) ==
				    CORE_ERR_CLAIM_CONFLICT)
		store_fence_refused(&c->m->base, a.was, x->t);
	if (rc == CORE_OK)
		rc = mgo_card_cas(c, a.was, a.now, MGO_PRE_CLAIM, &q, hit, out);
	mgo_evq_release(&q);
	mgo_attempt_end(&a);
	return rc;
}

/* A renew that names its lease is decided by its filter alone, so it reads nothing first:
 * core_claim_renew accepts exactly when core_fence_why says OK (the claim's marker and epoch
 * are the token's, and its holder is unbound or the token's), and then sets the lease to
 * now + lease_ms whatever the card held; that is this findAndModify's filter and update,
 * judged by the server on the document as it stands. A miss (a stale token, a card gone, a
 * claim the reaper took) is answered by renew_once: it reads and lets core say why, as
 * before. One round trip instead of two (the read, then the write). *hit: the write hit. */
static enum core_rc renew_blind(struct mgo_conn *c, const struct token_arg *x, bool *hit,
				struct core_card **out)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set, or, alt, ex;
	bson_t *doc = NULL;
	enum core_rc rc;

	*hit = false;
	BSON_APPEND_UTF8(&filter, "_id", x->id);
	BSON_APPEND_UTF8(&filter, "claim.marker", x->t->marker);
	BSON_APPEND_INT64(&filter, "claim_epoch", x->t->epoch);
	/* core_holder_match: a claim bound to no holder, or to this token's */
	BSON_APPEND_ARRAY_BEGIN(&filter, "$or", &or);
	BSON_APPEND_DOCUMENT_BEGIN(&or, "0", &alt);
	BSON_APPEND_DOCUMENT_BEGIN(&alt, "claim.holder", &ex);
	BSON_APPEND_BOOL(&ex, "$exists", false);
	bson_append_document_end(&alt, &ex);
	bson_append_document_end(&or, &alt);
	if (x->t->holder) {
		BSON_APPEND_DOCUMENT_BEGIN(&or, "1", &alt);
		BSON_APPEND_UTF8(&alt, "claim.holder", x->t->holder);
		bson_append_document_end(&or, &alt);
	}
	bson_append_array_end(&filter, &or);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	BSON_APPEND_DATE_TIME(&set, "claim.lease_until", c->now + x->lease_ms);
	BSON_APPEND_INT64(&set, "claim.lease_ms", x->lease_ms);
	BSON_APPEND_DATE_TIME(&set, "updated_at", c->now);
	bson_append_document_end(&update, &set);
	if (c->m->test_before_write)
		c->m->test_before_write(c->m->test_ctx, x->id);
	rc = mgo_find_modify(c->cards, &filter, &update, &doc);
	if (rc == CORE_OK && doc) {
		*hit = true;
		rc = mgo_card_from_bson(doc, out);
		if (rc == CORE_ERR_BAD_REQUEST)
			rc = CORE_ERR_INTERNAL;
	}
	bson_destroy(doc);
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

enum core_rc mgo_card_renew(struct store *st, const char *id, const struct core_token *t,
			    int64_t lease_ms, const struct store_actor *actor,
			    struct core_card **out)
{
	struct token_arg x = {id, t, lease_ms};
	struct mgo_conn c;
	bool hit = false;
	enum core_rc rc;

	if (lease_ms <= 0) /* "keep its own lease": the card says how long */
		return mgo_card_retry(st, actor, renew_once, &x, CORE_ERR_BUSY, out);
	if ((rc = mgo_conn_open(mgo_of(st), &c)) != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	rc = renew_blind(&c, &x, &hit, out);
	if (rc == CORE_OK && !hit)
		rc = mgo_card_retry_on(&c, renew_once, &x, CORE_ERR_BUSY, out);
	mgo_conn_close(&c);
	return rc;
}

/* Clears a->now's claim and queues card_released {marker, epoch} as the claim stands now,
 * with `extra`'s fields (stolen; may be NULL). */
static void release_apply_extra(struct mgo_conn *c, struct mgo_attempt *a, const char *reason,
				struct mgo_evq *q, json_t *extra)
{
	json_t *payload = token_json(a->now->claim.marker, a->now);

	if (payload && extra)
		json_object_update(payload, extra);
	json_decref(extra);

	core_claim_clear(a->now);
	a->now->updated_at = c->now;
	mgo_evq_add(q, CORE_EV_CARD_RELEASED, a->now->board, a->now->id, c->actor, reason, c->now,
		    payload);
}

void mgo_release_apply(struct mgo_conn *c, struct mgo_attempt *a, const char *reason,
		       struct mgo_evq *q)
{
	release_apply_extra(c, a, reason, q, NULL);
}

enum core_rc mgo_release_write(struct mgo_conn *c, struct mgo_attempt *a, const char *reason,
			       bool *hit, struct core_card **out)
{
	struct mgo_evq q;
	enum core_rc rc;

	mgo_evq_init(&q, c->m);
	mgo_release_apply(c, a, reason, &q);
	rc = mgo_card_cas(c, a->was, a->now, MGO_PRE_CLAIM, &q, hit, out);
	mgo_evq_release(&q);
	return rc;
}

enum core_rc mgo_retry_release_write(struct mgo_conn *c, struct mgo_attempt *a,
				     const char *reason, bool *hit, struct core_card **out)
{
	struct mgo_evq q;
	json_t *extra = NULL;
	enum core_rc rc;

	mgo_evq_init(&q, c->m);
	rc = mgo_retry_apply(c, a, reason, &q, &extra);
	if (rc == CORE_OK) {
		release_apply_extra(c, a, reason, &q, extra);
		rc = mgo_card_cas(c, a->was, a->now, MGO_PRE_CLAIM | MGO_PRE_STATE, &q, hit, out);
	} else {
		json_decref(extra);
	}
	mgo_evq_release(&q);
	return rc;
}

static enum core_rc release_once(struct mgo_conn *c, const void *arg, bool *hit,
				 struct core_card **out)
{
	const struct token_arg *x = arg;
	struct mgo_attempt a;
	enum core_rc rc = mgo_attempt_begin_card(c, x->id, &a);

	if (rc == CORE_OK && (rc = core_fence_check(a.was, x->t)) != CORE_OK)
		store_fence_refused(&c->m->base, a.was, x->t);
	if (rc == CORE_OK)
		rc = mgo_release_write(c, &a, NULL, hit, out);
	mgo_attempt_end(&a);
	return rc;
}

enum core_rc mgo_card_release(struct store *st, const char *id, const struct core_token *t,
			      const struct store_actor *actor, struct core_card **out)
{
	struct token_arg x = {id, t, 0};

	return mgo_card_retry(st, actor, release_once, &x, CORE_ERR_BUSY, out);
}

static enum core_rc revoke_once(struct mgo_conn *c, const void *arg, bool *hit,
				struct core_card **out)
{
	const struct token_arg *x = arg;
	struct mgo_attempt a;
	enum core_rc rc = mgo_attempt_begin_card(c, x->id, &a);

	if (rc == CORE_OK && !a.was->claim.present) {
		*hit = true; /* nothing held: answered as it stands */
		rc = (*out = core_card_dup(a.was)) ? CORE_OK : CORE_ERR_NOMEM;
	} else if (rc == CORE_OK) {
		rc = mgo_release_write(c, &a, "operator_revoke", hit, out);
	}
	mgo_attempt_end(&a);
	return rc;
}

enum core_rc mgo_card_revoke(struct store *st, const char *id, const struct store_actor *actor,
			     struct core_card **out)
{
	struct token_arg x = {id, NULL, 0};

	return mgo_card_retry(st, actor, revoke_once, &x, CORE_ERR_CLAIM_CONFLICT, out);
}

/* ---- owned writes ---- */

static json_t *gave_up_payload(const struct core_gave_up *g)
{
	return json_pack("{s:o}", "gave_up", store_gave_up_to_json(g));
}

/* Sets or clears gave_up (core_card_gave_up_set) and queues its event. */
static enum core_rc gave_up_write(struct mgo_conn *c, struct core_card *card,
				  const struct core_gave_up *g, const char *reason, struct mgo_evq *q)
{
	enum core_rc rc = core_card_gave_up_set(card, g, c->now);

	if (rc != CORE_OK)
		return rc;
	mgo_evq_add(q, CORE_EV_CARD_GAVE_UP, card->board, card->id, c->actor, reason, c->now,
		    gave_up_payload(&card->gave_up));
	return CORE_OK;
}

struct owned_arg {
	const char *id;
	const struct store_owned_write *w;
};

static enum core_rc owned_once(struct mgo_conn *c, const void *arg, bool *hit,
			       struct core_card **out)
{
	const struct owned_arg *x = arg;
	const struct store_owned_write *w = x->w;
	struct mgo_evq q;
	struct mgo_attempt a;
	struct core_run *run = NULL;
	bool moved = false;
	json_t *extra = NULL;
	enum core_rc rc = mgo_attempt_begin(c, x->id, &a);

	mgo_evq_init(&q, c->m);
	/* The fence first, for every kind: a stale token changes nothing at all. */
	if (rc == CORE_OK && (rc = core_fence_check(a.was, &w->token)) != CORE_OK)
		store_fence_refused(&c->m->base, a.was, &w->token);
	if (rc != CORE_OK)
		goto out;
	switch (w->kind) {
	case STORE_OWNED_STATE:
		/* from: read here, held by the update's guard on the state (MGO_PRE_STATE) */
		rc = w->from && strcmp(a.was->state, w->from) != 0
			     ? CORE_ERR_STATE_CONFLICT
			     : core_transition_check(&a.b, a.was->state, w->state,
						     CORE_MOVER_OWNER);
		if (rc == CORE_OK)
			rc = mgo_state_apply(c, a.now, w->state, w->reason, NULL, &q, &moved);
		/* DESIGN §17: a completion resets the attempts */
		if (rc == CORE_OK && moved && a.b.completed && strcmp(w->state, a.b.completed) == 0)
			core_attempts_reset(a.now);
		break;
	case STORE_OWNED_NOTHING: /* the release alone (a retry release) */
		rc = w->release ? CORE_OK : CORE_ERR_BAD_REQUEST;
		break;
	case STORE_OWNED_LAST_RUN:
		/* A run's card, owner and claim epoch never change: read, not guarded. */
		rc = w->run_id ? mgo_run_read_any(c, w->run_id, &run) : CORE_OK;
		if (rc == CORE_ERR_NOT_FOUND)
			rc = CORE_OK; /* run stays NULL: refused below */
		if (rc == CORE_OK && w->run_id)
			rc = core_last_run_check(run, x->id, &w->token);
		if (rc == CORE_OK)
			rc = core_str_set(&a.now->last_run_id, w->run_id);
		a.now->updated_at = c->now;
		mgo_evq_add(&q, CORE_EV_CARD_LAST_RUN, a.now->board, a.now->id, c->actor, NULL,
			    c->now,
			    json_pack("{so}", "run_id",
				      w->run_id ? json_string(w->run_id) : json_null()));
		break;
	case STORE_OWNED_AWAITING_INPUT:
		a.now->awaiting_input = w->awaiting_input;
		a.now->updated_at = c->now;
		mgo_evq_add(&q, CORE_EV_CARD_UPDATED, a.now->board, a.now->id, c->actor, NULL,
			    c->now, json_pack("{s[s]}", "fields", "awaiting_input"));
		break;
	case STORE_OWNED_GAVE_UP:
		rc = core_gave_up_check(&a.b, w->gave_up);
		if (rc == CORE_OK)
			rc = gave_up_write(c, a.now, w->gave_up, w->event_reason, &q);
		break;
	case STORE_OWNED_COMMENT:
		rc = mgo_comment_apply(c, a.now, w->comment, &q);
		break;
	default:
		rc = CORE_ERR_BAD_REQUEST;
	}
	/* The release rides in the same conditional update as the write (the reaper's
	 * file-and-release): fenced by the same token, one atomic step, the events of both. */
	/* DESIGN §17: a retry counts its attempt in the same step (or files the card). */
	if (rc == CORE_OK && w->release && w->retry)
		rc = mgo_retry_apply(c, &a, w->event_reason, &q, &extra);
	if (rc == CORE_OK && w->release) {
		release_apply_extra(c, &a, w->event_reason, &q, extra);
		extra = NULL;
	}
	if (rc == CORE_OK)
		rc = mgo_card_cas(c, a.was, a.now,
				  MGO_PRE_CLAIM | MGO_PRE_STATE |
					  (w->kind == STORE_OWNED_COMMENT ? MGO_PRE_COMMENTS : 0),
				  &q, hit, out);
	if (rc == CORE_OK && *hit && moved)
		mgo_state_after(c, &a.b, a.now->id, w->state, w->reason);
out:
	json_decref(extra);
	core_run_free(run);
	mgo_evq_release(&q);
	mgo_attempt_end(&a);
	return rc;
}

enum core_rc mgo_card_owned_write(struct store *st, const char *id,
				  const struct store_owned_write *w,
				  const struct store_actor *actor, struct core_card **out)
{
	struct owned_arg x = {id, w};

	return mgo_card_retry(st, actor, owned_once, &x, CORE_ERR_BUSY, out);
}
