/* Column moves and the ordinary edits that are one conditional update each on the Mongo
 * twin: SetStateFrom, Reopen, labels (set: absolute; adjust: relative, guarded on the labels
 * read and re-derived on a miss — ADR-096 §9) and comments. */
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- SetStateFrom ---- */

struct state_from_arg {
	const char *id, *from, *to, *reason;
	enum core_mover by; /* SetStateFrom's mover (store_actor_mover) */
};

static enum core_rc state_from_once(struct mgo_conn *c, const void *arg, bool *hit,
				    struct core_card **out)
{
	const struct state_from_arg *x = arg;
	struct mgo_attempt a;
	enum core_rc rc = mgo_attempt_begin(c, x->id, &a);

	if (rc == CORE_OK)
		rc = core_state_from_check(a.was, x->from);
	if (rc == CORE_OK)
		rc = core_transition_check(&a.b, a.was->state, x->to, x->by);
	if (rc == CORE_OK)
		rc = mgo_state_move(c, a.was, a.now, &a.b, x->to, x->reason, NULL, 0, NULL, hit,
				    out);
	mgo_attempt_end(&a);
	return rc;
}

enum core_rc mgo_card_set_state_from(struct store *st, const char *id, const char *from,
				     const char *to, const char *reason,
				     const struct store_actor *actor, struct core_card **out)
{
	struct state_from_arg x = {id, from, to, reason, store_actor_mover(actor)};

	return mgo_card_retry(st, actor, state_from_once, &x, CORE_ERR_STATE_CONFLICT, out);
}

/* ---- Reopen ---- */

/* Cards listing `id` as a blocker that already left the waiting column (Reopen's guard). */
static enum core_rc dependents_outside_waiting(struct mgo_conn *c, const struct core_board *b,
					       const char *id, size_t *n)
{
	bson_t filter = BSON_INITIALIZER, ne;
	bson_error_t e;
	int64_t cnt;

	BSON_APPEND_UTF8(&filter, "blockers", id);
	if (b->waiting) {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "state", &ne);
		BSON_APPEND_UTF8(&ne, "$ne", b->waiting);
		bson_append_document_end(&filter, &ne);
	}
	cnt = mongoc_collection_count_documents(c->cards, &filter, NULL, NULL, NULL, &e);
	bson_destroy(&filter);
	if (cnt < 0)
		return mgo_error("count dependents", &e);
	*n = (size_t)cnt;
	return CORE_OK;
}

static enum core_rc reopen_once(struct mgo_conn *c, const void *arg, bool *hit,
				struct core_card **out)
{
	const struct state_from_arg *x = arg;
	struct mgo_attempt a;
	struct mgo_evq q;
	size_t deps = 0;
	bool moved = false;
	enum core_rc rc = mgo_attempt_begin(c, x->id, &a);

	mgo_evq_init(&q, c->m);
	if (rc == CORE_OK)
		rc = dependents_outside_waiting(c, &a.b, x->id, &deps);
	if (rc == CORE_OK)
		rc = core_reopen_check(&a.b, a.was, x->to, deps);
	if (rc == CORE_OK)
		rc = mgo_state_apply(c, a.now, x->to, x->reason, json_pack("{sb}", "reopened", 1),
				     &q, &moved);
	if (rc == CORE_OK) /* DESIGN §17: an operator's reopen starts the attempts afresh */
		core_attempts_reset(a.now);
	/* Whoever filed it holds nothing any more, in the same update; the epoch stays, so
	 * every earlier token is refused (DESIGN §11). */
	if (rc == CORE_OK && a.was->claim.present)
		mgo_release_apply(c, &a, "reopen", &q);
	if (rc == CORE_OK)
		rc = mgo_card_cas(c, a.was, a.now, MGO_PRE_STATE | MGO_PRE_CLAIM, &q, hit, out);
	if (rc == CORE_OK && *hit && moved)
		mgo_state_after(c, &a.b, a.now->id, x->to, x->reason);
	mgo_evq_release(&q);
	mgo_attempt_end(&a);
	return rc;
}

enum core_rc mgo_card_reopen(struct store *st, const char *id, const char *to,
			     const char *reason, const struct store_actor *actor,
			     struct core_card **out)
{
	struct state_from_arg x = {id, NULL, to, reason, CORE_MOVER_OPERATOR};

	return mgo_card_retry(st, actor, reopen_once, &x, CORE_ERR_STATE_CONFLICT, out);
}

/* ---- labels ---- */

struct labels_arg {
	const char *id;
	const struct core_strv *set, *add, *remove;
};

static enum core_rc labels_once(struct mgo_conn *c, const void *arg, bool *hit,
				struct core_card **out)
{
	const struct labels_arg *x = arg;
	struct mgo_attempt a;
	struct mgo_evq q;
	json_t *labels = NULL;
	bool changed = false;
	size_t i;
	enum core_rc rc = mgo_attempt_begin(c, x->id, &a);

	mgo_evq_init(&q, c->m);
	if (rc == CORE_OK)
		rc = x->set ? core_labels_set(a.now, x->set, &changed)
			    : core_labels_adjust(a.now, x->add, x->remove, &changed);
	if (rc == CORE_OK && changed) {
		labels = json_array();
		for (i = 0; labels && i < a.now->labels.n; i++)
			if (json_array_append_new(labels, json_string(a.now->labels.v[i])))
				break;
		if (!labels || i < a.now->labels.n)
			rc = CORE_ERR_NOMEM;
		a.now->updated_at = c->now;
		if (rc == CORE_OK)
			mgo_evq_add(&q, CORE_EV_CARD_LABELS_CHANGED, a.now->board, a.now->id,
				    c->actor, NULL, c->now, json_pack("{sO}", "labels", labels));
	}
	/* Guarded on the labels as read: a concurrent consume is re-derived, never undone. */
	if (rc == CORE_OK)
		rc = mgo_card_cas(c, a.was, a.now, MGO_PRE_LABELS, &q, hit, out);
	json_decref(labels);
	mgo_evq_release(&q);
	mgo_attempt_end(&a);
	return rc;
}

enum core_rc mgo_card_labels_set(struct store *st, const char *id, const struct core_strv *labels,
				 const struct store_actor *actor, struct core_card **out)
{
	struct labels_arg x = {.id = id, .set = labels};

	return mgo_card_retry(st, actor, labels_once, &x, CORE_ERR_STATE_CONFLICT, out);
}

enum core_rc mgo_card_labels_adjust(struct store *st, const char *id, const struct core_strv *add,
				    const struct core_strv *remove,
				    const struct store_actor *actor, struct core_card **out)
{
	struct core_strv none = {0};
	struct labels_arg x = {.id = id, .add = add ? add : &none, .remove = remove ? remove : &none};

	return mgo_card_retry(st, actor, labels_once, &x, CORE_ERR_STATE_CONFLICT, out);
}

/* ---- comments ---- */

struct comment_arg {
	const char *id, *body;
};

enum core_rc mgo_comment_apply(struct mgo_conn *c, struct core_card *now, const char *body,
			       struct mgo_evq *q)
{
	enum core_rc rc = core_comment_append(now, c->actor.name, body, c->now);

	if (rc == CORE_OK)
		rc = store_card_fits(&c->m->base, now, NULL, 0);
	if (rc == CORE_OK)
		mgo_evq_add(q, CORE_EV_CARD_COMMENT_ADDED, now->board, now->id, c->actor, NULL,
			    c->now, json_pack("{ss}", "comment_id",
					      now->comments[now->n_comments - 1].id));
	return rc;
}

static enum core_rc comment_once(struct mgo_conn *c, const void *arg, bool *hit,
				 struct core_card **out)
{
	const struct comment_arg *x = arg;
	struct mgo_attempt a;
	struct mgo_evq q;
	enum core_rc rc = mgo_attempt_begin(c, x->id, &a);

	mgo_evq_init(&q, c->m);
	if (rc != CORE_OK)
		goto out;
	/* The position numbers a comment; the update is guarded on the count read, so two
	 * racing comments cannot share one. */
	rc = mgo_comment_apply(c, a.now, x->body, &q);
	if (rc == CORE_OK)
		rc = mgo_card_cas(c, a.was, a.now, MGO_PRE_COMMENTS, &q, hit, out);
out:
	mgo_evq_release(&q);
	mgo_attempt_end(&a);
	return rc;
}

enum core_rc mgo_card_comment_add(struct store *st, const char *id, const char *body,
				  const struct store_actor *actor, struct core_card **out)
{
	struct comment_arg x = {id, body};

	return mgo_card_retry(st, actor, comment_once, &x, CORE_ERR_STATE_CONFLICT, out);
}
