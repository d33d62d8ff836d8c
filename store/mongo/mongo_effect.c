/* Effects on the Mongo twin (DESIGN §14): the atomic step — matching a write's events against
 * its board's subscriptions before the write, and enqueueing the deliveries once the events
 * are stored. Subscriptions (their CRUD, cache and stored form) are mongo_subs.c's;
 * deliveries (listing, leasing, outcomes, retry, retention) mongo_deliveries.c's.
 *
 * Collections:
 *   subscriptions {_id: "<board>/<name>", board, name, url, secret, on{..}, consume_labels[],
 *                  enabled, disabled_reason, created_at, updated_at}
 *   deliveries    {_id: "<board>:<board_seq>.<subscription>", board, subscription, event_seq, ...,
 *                  status, attempts, next_at, lease_owner, lease_until, lease_epoch, body}
 * Both hold the stored JSON form of store/effect.c (times as integer ms), converted to BSON.
 *
 * The atomic step. A card write's events ride in the card document's outbox (mongo_outbox.c);
 * matching runs on them before the write, and each match is written INTO the event's outbox
 * entry (`dlv`: the delivery ids, `dlv_card`: the card as the step leaves it), with the
 * consume_labels removal and its card_labels_changed event in the same single-document
 * update. When the events are moved to `events`, the deliveries are inserted into
 * `deliveries` keyed "<event _id>.<subscription>" (a second insert of one is a duplicate-key
 * no-op, so a retried or re-drained outbox never enqueues twice), and only then is the outbox
 * entry pulled. A writer killed in between leaves the entry to the maintenance drain. */
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- matching, before the card's single-document write ---- */

enum core_rc mgo_effects_match_late(struct mgo_conn *c, struct mgo_evq *q, const char *card_id)
{
	struct core_card *card = NULL;
	enum core_rc rc = CORE_OK;
	size_t i;

	for (i = 0; rc == CORE_OK && i < q->n; i++) {
		struct mgo_evq m;
		bool changed;

		if (!bson_has_field(q->ev[i], MGO_DLV_LATE) || bson_has_field(q->ev[i], "dlv"))
			continue;
		if (!card && (rc = mgo_card_read(c, card_id, &card)) != CORE_OK)
			break;
		mgo_evq_init(&m, c->m);
		m.ev[0] = bson_copy(q->ev[i]);
		memcpy(m.eid[0], q->eid[i], sizeof(m.eid[0]));
		m.n = 1;
		if (!m.ev[0] ||
		    (!bson_has_field(m.ev[0], "card_id") && !BSON_APPEND_UTF8(m.ev[0], "card_id",
									      card_id)))
			rc = CORE_ERR_NOMEM;
		if (rc == CORE_OK)
			rc = mgo_effects_match(c, card, &m, &changed);
		if (rc == CORE_OK && bson_has_field(m.ev[0], "dlv")) {
			bson_destroy(q->ev[i]);
			q->ev[i] = m.ev[0];
			m.ev[0] = NULL;
		}
		mgo_evq_release(&m); /* a consume_labels event (m.ev[1]): not made this late */
	}
	core_card_free(card);
	return rc == CORE_ERR_NOT_FOUND ? CORE_OK : rc; /* a card gone: nothing to match on */
}

static const char *doc_str(const bson_t *d, const char *key)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, d, key) && BSON_ITER_HOLDS_UTF8(&it)
		       ? bson_iter_utf8(&it, NULL)
		       : NULL;
}

struct hit {
	size_t ev;
	struct store_sub *sub;
};

enum core_rc mgo_effects_match(struct mgo_conn *c, struct core_card *card, struct mgo_evq *q,
			       bool *labels_changed)
{
	struct store_sub **subs = NULL;
	struct hit *hits = NULL;
	size_t n_subs = 0, n_hits = 0, n_ev = q->n, i, k;
	enum core_rc rc = CORE_OK;
	char *card_text = NULL;
	json_t *cj;

	*labels_changed = false;
	if (!n_ev || q->failed)
		return CORE_OK;
	rc = mgo_board_subs(c, card->board, &subs, &n_subs);
	if (rc != CORE_OK || !n_subs)
		goto out;
	for (i = 0; rc == CORE_OK && i < n_ev; i++) {
		const bson_t *e = q->ev[i];
		const char *type = doc_str(e, "type"), *cid = doc_str(e, "card_id");
		bson_iter_t it, sub;
		const char *to = NULL;
		int t = type ? core_event_type_parse(type) : -1;

		/* A machine event is refused by the one rule (core_sub_matches, from its reason). */
		if (t < 0 || !cid || strcmp(cid, card->id) != 0)
			continue;
		if (bson_iter_init_find(&it, e, "payload") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
		    bson_iter_recurse(&it, &sub) && bson_iter_find(&sub, "to") &&
		    BSON_ITER_HOLDS_UTF8(&sub))
			to = bson_iter_utf8(&sub, NULL);
		for (k = 0; k < n_subs; k++) {
			struct hit *nh;

			if (!store_effect_match(subs[k], (enum core_event_type)t,
						doc_str(e, "reason"), to, card))
				continue;
			nh = realloc(hits, (n_hits + 1) * sizeof(*nh));
			if (!nh) {
				rc = CORE_ERR_NOMEM;
				break;
			}
			hits = nh;
			hits[n_hits++] = (struct hit){.ev = i, .sub = subs[k]};
		}
	}
	/* The one-shots, judged on the labels the step left, leave together: one event. */
	if (rc == CORE_OK && n_hits) {
		struct core_strv before = {0};
		json_t *removed = NULL, *names = json_array();
		bool changed, any = false;

		rc = names ? core_strv_copy(&before, &card->labels) : CORE_ERR_NOMEM;
		for (i = 0; rc == CORE_OK && i < n_hits; i++) {
			changed = false;
			if (!hits[i].sub->consume.n)
				continue;
			rc = core_effect_consume(card, &hits[i].sub->consume, &changed);
			if (rc == CORE_OK && changed &&
			    json_array_append_new(names, json_string(hits[i].sub->name)))
				rc = CORE_ERR_NOMEM;
			any |= changed;
		}
		if (rc == CORE_OK && any) {
			*labels_changed = true;
			card->updated_at = c->now;
			removed = json_array();
			for (k = 0; removed && k < before.n; k++)
				if (!core_strv_contains(&card->labels, before.v[k]))
					json_array_append_new(removed, json_string(before.v[k]));
			mgo_evq_add(q, CORE_EV_CARD_LABELS_CHANGED, card->board, card->id, c->actor,
				    "consume_labels", c->now,
				    json_pack("{s:o?, s:O}", "removed", removed, "subscriptions",
					      names));
			if (q->failed)
				rc = CORE_ERR_NOMEM;
		}
		json_decref(names);
		core_strv_release(&before);
	}
	if (rc != CORE_OK || !n_hits)
		goto out;
	cj = store_card_to_json(card);
	card_text = cj ? json_dumps(cj, JSON_COMPACT) : NULL;
	json_decref(cj);
	if (!card_text) {
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	/* Each matched event carries its deliveries into the outbox. */
	for (i = 0; rc == CORE_OK && i < n_ev; i++) {
		bson_t *nd, arr;
		char ibuf[16];
		const char *ikey;
		uint32_t j = 0;
		bool any = false, ok;

		for (k = 0; k < n_hits; k++)
			any |= hits[k].ev == i;
		if (!any)
			continue;
		nd = bson_copy(q->ev[i]);
		ok = nd && BSON_APPEND_ARRAY_BEGIN(nd, "dlv", &arr);
		for (k = 0; ok && k < n_hits; k++) {
			if (hits[k].ev != i)
				continue;
			bson_uint32_to_string(j++, &ikey, ibuf, sizeof(ibuf));
			ok = BSON_APPEND_UTF8(&arr, ikey, hits[k].sub->name);
		}
		ok = ok && bson_append_array_end(nd, &arr) &&
		     BSON_APPEND_UTF8(nd, "dlv_board", card->board) &&
		     BSON_APPEND_UTF8(nd, "dlv_card", card_text);
		if (!ok) {
			if (nd)
				bson_destroy(nd);
			rc = CORE_ERR_NOMEM;
			break;
		}
		bson_destroy(q->ev[i]);
		q->ev[i] = nd;
	}
out:
	free(card_text);
	free(hits);
	store_subs_free(subs, n_subs);
	return rc;
}

/* ---- enqueue: from the outbox entry to `deliveries` ---- */

/* For each event of q that carries deliveries: its seq from `events`, then one insert per
 * subscription (a duplicate is one enqueued already). OK only when every one is stored. */
enum core_rc mgo_effects_store(struct mgo_conn *c, const struct mgo_evq *q)
{
	mongoc_collection_t *dc = NULL;
	enum core_rc rc = CORE_OK;
	size_t i;

	for (i = 0; rc == CORE_OK && i < q->n; i++) {
		const bson_t *e = q->ev[i];
		const char *card_text = doc_str(e, "dlv_card"), *board = doc_str(e, "dlv_board");
		bson_iter_t it, arr;
		bson_t *stored = NULL;
		struct core_event ev = {0};
		struct core_card *card = NULL;
		json_t *cj = NULL;

		if (!bson_iter_init_find(&it, e, "dlv") || !BSON_ITER_HOLDS_ARRAY(&it) ||
		    !card_text || !board)
			continue;
		if (!dc)
			dc = mgo_effect_coll(c, "deliveries");
		rc = mgo_find_by_id(c->events, q->eid[i], &stored);
		if (rc == CORE_OK && !stored)
			rc = CORE_ERR_STORE_UNAVAILABLE; /* not delivered yet: the drain retries */
		if (rc == CORE_OK && (rc = mgo_event_from_bson(stored, &ev)) == CORE_ERR_BAD_REQUEST)
			rc = CORE_ERR_INTERNAL;
		if (rc == CORE_OK) {
			cj = json_loads(card_text, 0, NULL);
			if (!cj || store_card_from_json(cj, &card) != CORE_OK)
				card = NULL;
		}
		bson_iter_recurse(&it, &arr);
		while (rc == CORE_OK && bson_iter_next(&arr)) {
			struct store_sub s = {.board = (char *)board};
			char ekey[STORE_DELIVERY_EKEY_MAX];
			struct store_delivery *d;
			json_t *dj;
			bson_t *doc;
			bson_error_t err;

			if (!BSON_ITER_HOLDS_UTF8(&arr))
				continue;
			s.name = (char *)bson_iter_utf8(&arr, NULL);
			store_delivery_ekey(ekey, sizeof ekey, &ev);
			d = store_delivery_new(&s, ekey, ev.board_seq, ev.type, ev.card_id,
					       store_delivery_body(&ev, card), c->now ? c->now
										 : mgo_clock_now(&c->m->base));
			dj = d ? store_delivery_to_json(d, true) : NULL;
			doc = dj ? mgo_effect_json_to_bson(dj, d->id) : NULL;
			if (!doc)
				rc = CORE_ERR_NOMEM;
			else if (!mongoc_collection_insert_one(dc, doc, NULL, NULL, &err) &&
				 !mgo_error_is_dup(&err))
				rc = mgo_error("insert delivery", &err);
			else
				mgo_lease_open(c->m, 0); /* due now: this process's deliverers */
			if (doc)
				bson_destroy(doc);
			json_decref(dj);
			store_delivery_free(d);
		}
		json_decref(cj);
		core_card_free(card);
		core_event_release(&ev);
		if (stored)
			bson_destroy(stored);
	}
	if (dc)
		mongoc_collection_destroy(dc);
	return rc;
}
