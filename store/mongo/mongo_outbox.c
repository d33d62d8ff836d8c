/* The outbox of the Mongo twin's events (DESIGN §7): the queue a mutation writes its events
 * into (pushed into the changed document's outbox in the same update), and their delivery
 * (mgo_evq_deliver): in the document's commit order, an earlier write's entries first (left
 * to their own writer a moment, peers_settle), then stored with their seqs (mgo_evq_store,
 * mongo_insert.c), their deliveries enqueued (mongo_effect.c), and pulled out of the outbox
 * (mongo_pull.c). The maintenance drain of what a writer left behind is mongo_drain.c's; the
 * audit tail and the retention mongo_tail.c's.
 */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_ops.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mgo_evq_init(struct mgo_evq *q, struct mgo *m)
{
	memset(q, 0, sizeof(*q));
	q->q_ts = mgo_clock_now(&m->base);
}

void mgo_evq_release(struct mgo_evq *q)
{
	size_t i;

	for (i = 0; i < q->n; i++)
		bson_destroy(q->ev[i]);
	memset(q, 0, sizeof(*q));
}

void mgo_evq_add(struct mgo_evq *q, enum core_event_type type, const char *board,
		 const char *card_id, struct mgo_actor actor, const char *reason, int64_t now,
		 json_t *payload)
{
	bool machine = core_is_machine_reason(reason);
	bson_oid_t oid;
	bson_t *d;
	bool ok;

	if (!payload)
		payload = json_object();
	if (q->failed || q->n == sizeof(q->ev) / sizeof(q->ev[0]) || !payload ||
	    !(d = bson_new())) {
		q->failed = true;
		json_decref(payload);
		return;
	}
	bson_oid_init(&oid, NULL);
	bson_oid_to_string(&oid, q->eid[q->n]);
	ok = BSON_APPEND_UTF8(d, "_id", q->eid[q->n]) && BSON_APPEND_DATE_TIME(d, "at", now) &&
	     BSON_APPEND_DATE_TIME(d, "q_ts", q->q_ts) &&
	     BSON_APPEND_UTF8(d, "board", board) && BSON_APPEND_UTF8(d, "type", core_event_type_name(type));
	if (ok && card_id)
		ok = BSON_APPEND_UTF8(d, "card_id", card_id);
	/* A machine event still flows, with the actor blanked (DESIGN §7). */
	ok = ok && BSON_APPEND_UTF8(d, "actor", machine || !actor.name ? "" : actor.name);
	/* an agent token's events name the claim it acted under (DESIGN §13) */
	if (ok && actor.epoch && !machine && json_is_object(payload))
		ok = json_object_set_new(payload, "actor_epoch", json_integer(actor.epoch)) == 0;
	if (ok && reason)
		ok = BSON_APPEND_UTF8(d, "reason", reason);
	ok = ok && BSON_APPEND_BOOL(d, "machine", machine) &&
	     mgo_json_append(d, "payload", payload);
	json_decref(payload);
	if (!ok) {
		bson_destroy(d);
		q->failed = true;
		return;
	}
	q->ev[q->n++] = d;
}

bool mgo_evq_push_append(const struct mgo_evq *q, bson_t *push)
{
	bson_t each, arr;
	char ibuf[16];
	const char *ikey;
	size_t i;
	bool ok = BSON_APPEND_DOCUMENT_BEGIN(push, "outbox", &each) &&
		  BSON_APPEND_ARRAY_BEGIN(&each, "$each", &arr);

	for (i = 0; ok && i < q->n; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		ok = BSON_APPEND_DOCUMENT(&arr, ikey, q->ev[i]);
	}
	return ok && bson_append_array_end(&each, &arr) && bson_append_document_end(push, &each);
}


/* The cache slot of event id `eid` (FNV-1a). */
static size_t dlv_slot(const char *eid)
{
	uint32_t h = 2166136261u;

	for (; *eid; eid++)
		h = (h ^ (uint8_t)*eid) * 16777619u;
	return h % MGO_DLV_CACHE;
}

/* Remembers q's events as stored. */
static void dlv_note(struct mgo *m, const struct mgo_evq *q)
{
	size_t i;

	pthread_mutex_lock(&m->dlv_mu);
	for (i = 0; i < q->n; i++)
		memcpy(m->dlv_ids[dlv_slot(q->eid[i])], q->eid[i], sizeof(q->eid[i]));
	pthread_mutex_unlock(&m->dlv_mu);
}

/* Is event id `eid` one of q's? */
static bool evq_has(const struct mgo_evq *q, const char *eid)
{
	size_t i;

	for (i = 0; i < q->n; i++)
		if (strcmp(q->eid[i], eid) == 0)
			return true;
	return false;
}

/* Does this process remember storing event `eid`? (A miss may be an entry evicted from the
 * cache: what is stored already is only pulled, mgo_evq_store.) */
static bool dlv_known(struct mgo *m, const char *eid)
{
	bool known;

	pthread_mutex_lock(&m->dlv_mu);
	known = strcmp(m->dlv_ids[dlv_slot(eid)], eid) == 0;
	pthread_mutex_unlock(&m->dlv_mu);
	return known;
}

/* Does the outbox of `after` (the document as this write left it) hold, besides q's own
 * events, an entry that may not be stored yet (not one this process remembers delivering)?
 * Read in place: the common outbox holds only q's and entries awaiting their deferred pull. */
static bool outbox_ahead(struct mgo *m, const bson_t *after, const struct mgo_evq *q)
{
	bson_iter_t ai, ei;
	const char *eid;
	bool ahead = false;

	if (!bson_iter_init_find(&ai, after, "outbox") || !BSON_ITER_HOLDS_ARRAY(&ai) ||
	    !bson_iter_recurse(&ai, &ai))
		return false;
	pthread_mutex_lock(&m->dlv_mu);
	while (!ahead && bson_iter_next(&ai)) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&ai) || !bson_iter_recurse(&ai, &ei) ||
		    !bson_iter_find(&ei, "_id") || !BSON_ITER_HOLDS_UTF8(&ei))
			continue;
		eid = bson_iter_utf8(&ei, NULL);
		ahead = !evq_has(q, eid) && strcmp(m->dlv_ids[dlv_slot(eid)], eid) != 0;
	}
	pthread_mutex_unlock(&m->dlv_mu);
	return ahead;
}

/* Waits, until MGO_PEER_WAIT_MS after they were queued, for the writers of the entries of
 * `all` that are not `own`'s (earlier writes on the same document, whose writers are still
 * delivering them) to store them themselves. Delivered by two writers at once, an event
 * would be handed two seqs and two board_seqs, and the loser's would be left as holes
 * (fillers) in the board's sequence, and its board_seq kept out of seq order on its retry
 * (DESIGN §16). An entry older than that is a writer that died or failed: this write
 * delivers it (mgo_evq_store), and that is the one hole left, counted where readers step
 * over it (boardd_mongo_event_holes_total). */
static void peers_settle(struct mgo_conn *c, const struct mgo_evq *all, const struct mgo_evq *own)
{
	struct mgo_evq ahead = {0}, rest;
	struct timespec nap = {0, 2 * 1000 * 1000};
	int64_t youngest = 0, ts;
	bson_iter_t it;
	size_t i, left;

	for (i = 0; i < all->n; i++) {
		if (evq_has(own, all->eid[i]))
			continue;
		if (bson_iter_init_find(&it, all->ev[i], "q_ts") && mgo_iter_i64(&it, &ts) &&
		    ts > youngest)
			youngest = ts;
		ahead.ev[ahead.n] = all->ev[i]; /* borrowed: never released here */
		memcpy(ahead.eid[ahead.n++], all->eid[i], sizeof(ahead.eid[0]));
	}
	while (ahead.n && mgo_clock_now(&c->m->base) - youngest < MGO_PEER_WAIT_MS) {
		if (mgo_evq_undelivered(c, &ahead, &rest) != CORE_OK)
			return;
		left = rest.n;
		mgo_evq_release(&rest);
		if (!left)
			return;
		nanosleep(&nap, NULL);
	}
}

/* The entries of `after`'s outbox up to q's own, in the outbox's order, into *all (zeroed
 * here): q's, and those of earlier writes that may not be stored yet. An outbox holds more
 * than that: entries already stored stay in it until their deferred pull (every
 * MGO_PULL_WINDOW_MS), so on a busy card they fill a queue many times over. Those this
 * process remembers storing are left out; when the view is full before it reaches q's, the
 * ones another writer (or replica) stored meanwhile are dropped and the reading goes on.
 * false (all released): q's entries not all in view, more unstored entries ahead of them
 * than a queue holds, or the store unreadable. */
static bool outbox_view(struct mgo_conn *c, const bson_t *after, const struct mgo_evq *q,
			struct mgo_evq *all)
{
	bson_iter_t ai, ei;
	const uint8_t *data;
	uint32_t len;
	bson_t ev;
	const char *eid;
	struct mgo_evq fresh;
	size_t mine = 0, cap = sizeof(all->ev) / sizeof(all->ev[0]);

	memset(all, 0, sizeof(*all));
	if (!bson_iter_init_find(&ai, after, "outbox") || !BSON_ITER_HOLDS_ARRAY(&ai) ||
	    !bson_iter_recurse(&ai, &ai))
		return false;
	while (mine < q->n && bson_iter_next(&ai)) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&ai))
			continue;
		bson_iter_document(&ai, &len, &data);
		if (!bson_init_static(&ev, data, len) || !bson_iter_init_find(&ei, &ev, "_id") ||
		    !BSON_ITER_HOLDS_UTF8(&ei))
			continue;
		eid = bson_iter_utf8(&ei, NULL);
		if (evq_has(q, eid))
			mine++;
		else if (dlv_known(c->m, eid))
			continue;
		if (all->n == cap) {
			if (mgo_evq_undelivered(c, all, &fresh) != CORE_OK)
				goto fail;
			mgo_evq_release(all);
			*all = fresh;
			if (all->n == cap)
				goto fail;
		}
		bson_strncpy(all->eid[all->n], eid, sizeof(all->eid[0]));
		if (!(all->ev[all->n] = bson_copy(&ev)))
			goto fail;
		all->n++;
	}
	if (mine == q->n)
		return true;
fail:
	mgo_evq_release(all);
	return false;
}

enum core_rc mgo_evq_deliver(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
			     const struct mgo_evq *q, const bson_t *after)
{
	struct mgo_evq all = {0};
	bool just_pushed = true;
	enum core_rc rc = CORE_OK;

	/* Entries an earlier write on this document pushed and has not delivered yet go first,
	 * in the outbox's order, with ours: seqs are taken at delivery, so a write that took
	 * its seqs before the write it follows on the same card would be logged before it, and
	 * the log would contradict the card's history (found by tests/history). Whoever
	 * delivers an entry second finds it stored (evq_undelivered) and only pulls it. */
	if (after && q->n && outbox_ahead(c->m, after, q)) {
		/* More unstored entries ahead of ours than a queue holds (or the store
		 * unreadable): ours alone, and the drain delivers the rest. */
		if (outbox_view(c, after, q, &all)) {
			peers_settle(c, &all, q);
			all.q_ts = q->q_ts;
			/* A dead claim-next's card_claimed, never matched (mgo_effects_match_late);
			 * this write's own entries are matched already. */
			if (coll == c->cards &&
			    (rc = mgo_effects_match_late(c, &all, doc_id)) != CORE_OK)
				goto out;
			q = &all;
			just_pushed = false;
		}
	}
	if (!q->n)
		goto out;
	rc = mgo_evq_store(c, q, just_pushed, coll == c->cards ? doc_id : NULL);
	if (rc != CORE_OK) {
		/* Left in the outbox: the maintenance drain delivers them. Until then a listing
		 * would not show them, so the write is not acknowledged (DESIGN §16). */
		rc = rc == CORE_ERR_NOMEM ? rc : CORE_ERR_STORE_UNAVAILABLE;
		goto out;
	}
	dlv_note(c->m, q);
	if (mgo_effects_store(c, q) != CORE_OK)
		goto out;
	if (mgo_pull_defer(c, coll, doc_id, q))
		goto out;
	if (c->m->racy_updates)
		mgo_evq_pull_shared(c, coll, doc_id, q);
	else
		mgo_evq_pull(c->m, coll, doc_id, q);
out:
	mgo_evq_release(&all);
	return rc;
}

enum core_rc mgo_evq_insert_direct(struct mgo_conn *c, const struct mgo_evq *q)
{
	return mgo_evq_store(c, q, false, NULL);
}
