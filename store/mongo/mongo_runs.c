/* Runs on the Mongo twin (DESIGN §5): create, read, owner updates that renew the run lock,
 * operator cancel and prune (a tombstone: the document stays, pruned: true), promoteIfOrphaned
 * as one conditional update, and the per-card count the cloud run ceiling reads. Each write
 * is one findAndModify carrying its precondition and its run_* event (outbox). */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run events name the marker, so an audit tells the workers apart (DESIGN §11). */
static json_t *run_payload(const struct core_run *r)
{
	return json_pack("{ssssso}", "run_id", r->id, "status", r->status, "marker",
			 r->owner ? json_string(r->owner) : json_null());
}

static enum core_rc run_read(struct mgo_conn *c, const char *id, struct core_run **out)
{
	bson_t *doc = NULL;
	enum core_rc rc;

	*out = NULL;
	rc = mgo_find_by_id(c->runs, id, &doc);
	if (rc == CORE_OK)
		rc = doc ? mgo_run_from_bson(doc, out) : CORE_ERR_NOT_FOUND;
	if (rc == CORE_ERR_BAD_REQUEST)
		rc = CORE_ERR_INTERNAL;
	bson_destroy(doc);
	return rc;
}

enum core_rc mgo_run_create(struct store *st, const struct store_run_create *in,
			    const struct store_actor *actor, struct core_run **out)
{
	struct core_card *card = NULL;
	struct core_run *r = NULL;
	struct mgo_conn c;
	struct mgo_evq q;
	bson_t doc = BSON_INITIALIZER, arr;
	char idbuf[CORE_ID_MAX + 1];
	bson_error_t e;
	int64_t n;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	mgo_evq_init(&q, c.m);
	rc = mgo_card_read(&c, in->card_id, &card);
	/* Only the card's current holder starts a run, bound to its claim (DESIGN §11). */
	if (rc == CORE_OK &&
	    (!card->claim.present || !card->has_epoch || strcmp(card->claim.marker, in->marker) != 0 ||
	     !core_holder_match(&card->claim, store_actor_holder(actor)))) {
		store_run_fence_refused(st);
		rc = CORE_ERR_CLAIM_CONFLICT;
	}
	if (rc == CORE_OK && !in->id)
		rc = mgo_counter_add(&c, "runs", 1, &n);
	if (rc != CORE_OK)
		goto out;
	if (!in->id)
		snprintf(idbuf, sizeof(idbuf), "r-%011" PRIx64 "-%012" PRId64, (uint64_t)c.now, n);
	rc = CORE_ERR_NOMEM;
	r = core_run_new();
	if (!r || core_str_set(&r->id, in->id ? in->id : idbuf) ||
	    core_str_set(&r->card_id, card->id) || core_str_set(&r->board, card->board) ||
	    core_str_set(&r->status, in->status) || core_str_set(&r->owner, in->marker))
		goto out;
	r->claim_epoch = card->claim_epoch;
	r->lease_ms = in->lease_ms;
	r->lock_until = c.now + in->lease_ms;
	r->created_at = r->updated_at = c.now;
	mgo_evq_add(&q, CORE_EV_RUN_CREATED, r->board, r->card_id, c.actor, NULL, c.now,
		    run_payload(r));
	if (q.failed || !mgo_run_to_bson(r, &doc) || !BSON_APPEND_ARRAY_BEGIN(&doc, "outbox", &arr))
		goto out;
	bson_append_document(&arr, "0", 1, q.ev[0]);
	bson_append_array_end(&doc, &arr);
	/* A tombstone keeps its id too: the insert refuses it as a duplicate key. */
	rc = CORE_OK;
	if (!mongoc_collection_insert_one(c.runs, &doc, NULL, NULL, &e))
		rc = mgo_error("insert run", &e);
	if (rc == CORE_OK)
		rc = mgo_evq_deliver(&c, c.runs, r->id, &q, NULL);
	if (rc == CORE_OK) {
		/* The card's history stays bounded (DESIGN §20): housekeeping after the insert,
		 * which stands whatever becomes of it (the next create retires what it left). */
		(void)mgo_runs_retain(&c, card);
		*out = r;
		r = NULL;
	}
out:
	bson_destroy(&doc);
	mgo_evq_release(&q);
	core_run_free(r);
	core_card_free(card);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_run_read_any(struct mgo_conn *c, const char *id, struct core_run **out)
{
	return run_read(c, id, out);
}

enum core_rc mgo_run_get_any(struct store *st, const char *id, struct core_run **out)
{
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	rc = run_read(&c, id, out);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_run_get(struct store *st, const char *id, struct core_run **out)
{
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	rc = run_read(&c, id, out);
	if (rc == CORE_OK && (*out)->pruned) {
		core_run_free(*out);
		*out = NULL;
		rc = CORE_ERR_NOT_FOUND;
	}
	mgo_conn_close(&c);
	return rc;
}

static void append_output(bson_t *doc, const char *output)
{
	if (output)
		BSON_APPEND_UTF8(doc, "output", output);
	else
		BSON_APPEND_NULL(doc, "output");
}

/* Appends text to now's output (core_run_output_append); the write is then guarded on the
 * output as read (`extra`), so two appends never both land on the same read. */
static enum core_rc output_append(struct core_run *now, const char *text, bson_t *extra)
{
	char *out = NULL;
	enum core_rc rc = core_run_output_append(now->output, text, CORE_RUN_OUTPUT_MAX, &out);

	if (rc != CORE_OK)
		return rc;
	append_output(extra, now->output);
	free(now->output);
	now->output = out;
	return CORE_OK;
}

/* One conditional write of run `was` -> `now` with q; filter: _id, not pruned, plus `extra`
 * (the op's precondition). *hit false: the filter no longer matches. */
static enum core_rc run_cas(struct mgo_conn *c, const struct core_run *now,
			    const bson_t *extra, const struct mgo_evq *q, bool with_output,
			    bool *hit, struct core_run **out)
{
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set, full, push, ne, *doc = NULL;
	enum core_rc rc = CORE_ERR_NOMEM;

	*hit = false;
	bson_init(&full);
	if (q->failed || !mgo_run_to_bson(now, &full))
		goto out;
	BSON_APPEND_UTF8(&filter, "_id", now->id);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "pruned", &ne);
	BSON_APPEND_BOOL(&ne, "$ne", true);
	bson_append_document_end(&filter, &ne);
	if (extra)
		bson_concat(&filter, extra);
	/* The run's fields as this op leaves them, written whole: the caller's guard on the
	 * version read (updated_at) keeps a concurrent write from being carried back. */
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
	bson_copy_to_excluding_noinit(&full, &set, "_id", "created_at", "card_id", "board",
				      "output", NULL);
	/* The output only when this write appends to it (guarded on the output it read), so
	 * no other write carries back an output it read before an append. */
	if (with_output)
		append_output(&set, now->output);
	bson_append_document_end(&update, &set);
	if (q->n) {
		BSON_APPEND_DOCUMENT_BEGIN(&update, "$push", &push);
		mgo_evq_push_append(q, &push);
		bson_append_document_end(&update, &push);
	}
	if (c->m->test_before_write)
		c->m->test_before_write(c->m->test_ctx, now->id);
	rc = mgo_find_modify(c->runs, &filter, &update, &doc);
	if (rc != CORE_OK || !doc)
		goto out;
	*hit = true;
	rc = mgo_evq_deliver(c, c->runs, now->id, q, doc);
	if (rc == CORE_OK && out && (rc = mgo_run_from_bson(doc, out)) == CORE_ERR_BAD_REQUEST)
		rc = CORE_ERR_INTERNAL;
out:
	bson_destroy(doc);
	bson_destroy(&full);
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

/* Read, change, conditional write, retried while the run moves under it. */
enum run_op { RUN_UPDATE, RUN_CANCEL, RUN_PRUNE, RUN_PROMOTE };

struct run_arg {
	enum run_op op;
	const struct store_run_update *u;
	const char *holder; /* RUN_UPDATE: the actor's name */
	bool promoted;
};

/* The run's claim must still be the card's current claim, held by this actor. Read, then
 * the run is written guarded on its own fields: no multi-document transaction (DESIGN §9),
 * so a claim that moves in between can still let one write land on the run. The reaper
 * never judges a claim by a run of another one, so such a write decides nothing. */
static enum core_rc run_fence(struct mgo_conn *c, const struct core_run *r, const char *holder)
{
	struct core_card *card = NULL;
	enum core_rc rc = mgo_card_read(c, r->card_id, &card);

	if (rc == CORE_ERR_NOT_FOUND)
		rc = CORE_ERR_CLAIM_CONFLICT;
	if (rc == CORE_OK &&
	    (!core_run_of_claim(r, card) || !core_holder_match(&card->claim, holder))) {
		store_run_fence_refused(&c->m->base);
		rc = CORE_ERR_CLAIM_CONFLICT;
	}
	core_card_free(card);
	return rc;
}

static enum core_rc run_change(struct mgo_conn *c, const char *id, struct run_arg *x,
			       struct core_run **out)
{
	struct core_run *was = NULL, *now = NULL;
	struct mgo_evq q;
	bson_t extra;
	bool hit = false;
	int tries;
	enum core_rc rc = CORE_OK;

	mgo_evq_init(&q, c->m);
	bson_init(&extra);
	for (tries = 0; rc == CORE_OK && !hit && tries < MGO_CAS_TRIES; tries++) {
		core_run_free(was);
		core_run_free(now);
		was = now = NULL;
		mgo_evq_release(&q);
		if (tries > 1)
			mgo_backoff(tries - 2);
		mgo_evq_init(&q, c->m);
		bson_reinit(&extra);
		rc = run_read(c, id, &was);
		if (rc == CORE_OK && was->pruned)
			rc = CORE_ERR_NOT_FOUND;
		if (rc == CORE_OK && !(now = core_run_dup(was)))
			rc = CORE_ERR_NOMEM;
		if (rc == CORE_OK && x->op == RUN_UPDATE) {
			/* Only the lock holder writes its run. */
			if (!was->owner || strcmp(was->owner, x->u->marker) != 0)
				rc = CORE_ERR_CLAIM_CONFLICT;
			else
				rc = run_fence(c, was, x->holder);
			if (rc == CORE_OK && core_run_status_final(was->status))
				rc = CORE_ERR_RUN_FINAL;
			else if (rc == CORE_OK &&
				 ((x->u->status && core_str_set(&now->status, x->u->status)) ||
				  (x->u->clear_continuation &&
				   core_str_set(&now->continuation, NULL)) ||
				  (x->u->continuation &&
				   core_str_set(&now->continuation, x->u->continuation)) ||
				  (x->u->failure_code &&
				   core_str_set(&now->failure_code, x->u->failure_code)) ||
				  (x->u->result && core_str_set(&now->result, x->u->result)) ||
				  (x->u->error && core_str_set(&now->error, x->u->error))))
				rc = CORE_ERR_NOMEM;
			else if (rc == CORE_OK && x->u->output)
				rc = output_append(now, x->u->output, &extra);
			if (x->u->lease_ms > 0)
				now->lease_ms = x->u->lease_ms; /* else the run keeps its own */
			now->lock_until = c->now + now->lease_ms;
			BSON_APPEND_UTF8(&extra, "owner", was->owner ? was->owner : "");
			BSON_APPEND_UTF8(&extra, "status", was->status);
		} else if (rc == CORE_OK && x->op == RUN_CANCEL) {
			rc = core_run_status_final(was->status)
				     ? CORE_ERR_RUN_FINAL
				     : core_str_set(&now->status, CORE_RUN_CANCELLED);
			/* Guarded on the status read: an owner's final write is never undone. */
			BSON_APPEND_UTF8(&extra, "status", was->status);
		} else if (rc == CORE_OK && x->op == RUN_PRUNE) {
			core_run_retire(now); /* a tombstone: result, error and output go with it */
		} else if (rc == CORE_OK && x->op == RUN_PROMOTE) {
			core_run_promote_if_orphaned(now, c->now, &x->promoted);
			if (!x->promoted) {
				/* Nothing to write: answered as it stands. */
				hit = true;
				break;
			}
			/* Only while still running/queued under the same, expired lock. */
			BSON_APPEND_UTF8(&extra, "status", was->status);
			BSON_APPEND_DATE_TIME(&extra, "lock_until", was->lock_until);
		}
		if (rc != CORE_OK)
			break;
		/* The write carries back every field it read: guarded on the version it read
		 * (updated_at, which each write moves strictly forward), so a write that landed in
		 * between -- another field of the PATCH, a heartbeat, an append, a cancel -- makes
		 * this one read again instead of being undone by it. */
		now->updated_at = c->now > was->updated_at ? c->now : was->updated_at + 1;
		BSON_APPEND_DATE_TIME(&extra, "updated_at", was->updated_at);
		if (x->op == RUN_PRUNE)
			mgo_evq_add(&q, CORE_EV_RUN_UPDATED, now->board, now->card_id, c->actor, NULL,
				    c->now, json_pack("{sssb}", "run_id", now->id, "pruned", 1));
		else if (x->op == RUN_PROMOTE)
			mgo_evq_add(&q, CORE_EV_RUN_UPDATED, now->board, now->card_id, c->actor,
				    "watchdog", c->now,
				    json_pack("{ssssssso}", "run_id", now->id, "status", now->status,
					      "failure_code", now->failure_code, "marker",
					      now->owner ? json_string(now->owner) : json_null()));
		else
			mgo_evq_add(&q, CORE_EV_RUN_UPDATED, now->board, now->card_id, c->actor, NULL,
				    c->now, run_payload(now));
		rc = run_cas(c, now, &extra, &q,
			     (x->op == RUN_UPDATE && x->u->output) || x->op == RUN_PRUNE, &hit, out);
	}
	mgo_evq_release(&q);
	bson_destroy(&extra);
	if (rc == CORE_OK && hit && x->op == RUN_PROMOTE && !x->promoted) {
		*out = now;
		now = NULL;
	}
	/* The run kept changing under every try (many writers of one run): not refused, so never
	 * a conflict (a worker told 409 kills a job it still holds, DESIGN §16); busy, retry. */
	if (rc == CORE_OK && !hit)
		rc = CORE_ERR_BUSY;
	core_run_free(was);
	core_run_free(now);
	return rc;
}

static enum core_rc run_op(struct store *st, const char *id, const struct store_actor *actor,
			   struct run_arg *x, struct core_run **out)
{
	struct core_run *dummy = NULL;
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	rc = run_change(&c, id, x, out ? out : &dummy);
	core_run_free(dummy);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_run_update(struct store *st, const char *id, const struct store_run_update *u,
			    const struct store_actor *actor, struct core_run **out)
{
	struct run_arg x = {.op = RUN_UPDATE, .u = u, .holder = store_actor_holder(actor)};

	return run_op(st, id, actor, &x, out);
}

enum core_rc mgo_run_cancel(struct store *st, const char *id, const struct store_actor *actor,
			    struct core_run **out)
{
	struct run_arg x = {.op = RUN_CANCEL};

	return run_op(st, id, actor, &x, out);
}

enum core_rc mgo_run_prune(struct store *st, const char *id, const struct store_actor *actor)
{
	struct run_arg x = {.op = RUN_PRUNE};

	return run_op(st, id, actor, &x, NULL);
}

enum core_rc mgo_run_promote_if_orphaned(struct store *st, const char *id,
					 struct core_run **out, bool *promoted)
{
	struct run_arg x = {.op = RUN_PROMOTE};
	enum core_rc rc = run_op(st, id, NULL, &x, out);

	*promoted = rc == CORE_OK && x.promoted;
	return rc;
}

enum core_rc mgo_run_count_for_card(struct store *st, const char *card_id, size_t *n)
{
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER;
	bson_error_t e;
	int64_t cnt;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	/* Every run recorded for the card, tombstones included: a pruned run was a spend. */
	BSON_APPEND_UTF8(&filter, "card_id", card_id);
	cnt = mongoc_collection_count_documents(c.runs, &filter, NULL, NULL, NULL, &e);
	if (cnt < 0)
		rc = mgo_error("count runs", &e);
	else
		*n = (size_t)cnt;
	bson_destroy(&filter);
	mgo_conn_close(&c);
	return rc;
}
