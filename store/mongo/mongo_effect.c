/* Effects on the Mongo twin (DESIGN §14).
 *
 * Collections:
 *   subscriptions {_id: "<board>/<name>", board, name, url, secret, on{..}, consume_labels[],
 *                  enabled, disabled_reason, created_at, updated_at}
 *   deliveries    {_id: "<board>:<board_seq>.<subscription>", board, subscription, event_seq, ...,
 *                  status, attempts, next_at, lease_owner, lease_until, lease_epoch, body}
 * Both hold the stored JSON form of store/effect.c (times as integer ms), converted to BSON.
 *
 * The atomic step. A card write's events ride in the card document's outbox (mongo_events.c);
 * matching runs on them before the write, and each match is written INTO the event's outbox
 * entry (`dlv`: the delivery ids, `dlv_card`: the card as the step leaves it), with the
 * consume_labels removal and its card_labels_changed event in the same single-document
 * update. When the events are moved to `events`, the deliveries are inserted into
 * `deliveries` keyed "<event _id>.<subscription>" (a second insert of one is a duplicate-key
 * no-op, so a retried or re-drained outbox never enqueues twice), and only then is the outbox
 * entry pulled. A writer killed in between leaves the entry to the maintenance drain.
 *
 * Subscriptions are read through a per-process cache refreshed every MGO_SUBS_TTL_MS and
 * dropped by this process's own PUT/DELETE: another replica's change is seen within that
 * bound.
 *
 * Leasing: a candidate is read, then taken with one conditional findAndModify whose filter
 * carries the lease as read (free or expired) and the epoch, which the update increments;
 * the outcome is written with a filter on (lease_owner, lease_epoch). On MongoDB two replicas
 * therefore never hold one delivery at once; FerretDB's findAndModify is not atomic under
 * concurrency (README), so there the guarantee is only as good as that. */
#include "store/mongo/mongo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MGO_SUBS_TTL_MS 1000
#define MGO_LEASE_CANDIDATES 8

static mongoc_collection_t *coll_get(struct mgo_conn *c, const char *name)
{
	return mongoc_client_get_collection(c->client, c->m->db, name);
}

/* ---- JSON <-> BSON of the stored form ---- */

static bson_t *json_to_bson(json_t *j, const char *id)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	bson_error_t e;
	bson_t *b = text ? bson_new_from_json((const uint8_t *)text, -1, &e) : NULL;
	bson_t *out = NULL;

	free(text);
	if (b && id) {
		out = bson_new();
		if (out && (!BSON_APPEND_UTF8(out, "_id", id) || !bson_concat(out, b))) {
			bson_destroy(out);
			out = NULL;
		}
		bson_destroy(b);
		return out;
	}
	return b;
}

static json_t *bson_to_json(const bson_t *doc)
{
	char *text = bson_as_relaxed_extended_json(doc, NULL);
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;

	bson_free(text);
	return j;
}

static enum core_rc sub_from_bson(const bson_t *doc, struct store_sub **out)
{
	json_t *j = bson_to_json(doc);
	enum core_rc rc = j ? store_sub_from_json(j, out) : CORE_ERR_INTERNAL;

	json_decref(j);
	return rc == CORE_ERR_BAD_REQUEST ? CORE_ERR_INTERNAL : rc;
}

static enum core_rc dlv_from_bson(const bson_t *doc, struct store_delivery **out)
{
	json_t *j = bson_to_json(doc);
	enum core_rc rc = j ? store_delivery_from_json(j, out) : CORE_ERR_INTERNAL;

	json_decref(j);
	return rc == CORE_ERR_BAD_REQUEST ? CORE_ERR_INTERNAL : rc;
}

static void sub_id(char *buf, size_t len, const char *board, const char *name)
{
	snprintf(buf, len, "%s/%s", board, name);
}

/* ---- the subscriptions cache ---- */

struct mgo_subs_ent {
	char *board;
	struct store_sub **v;
	size_t n;
	int64_t at; /* CLOCK_MONOTONIC ms of the read */
};

static void subs_cache_drop(struct mgo *m, const char *board)
{
	size_t i;

	pthread_mutex_lock(&m->subs_mu);
	for (i = 0; i < m->n_subs_cache; i++)
		if (!board || strcmp(m->subs_cache[i].board, board) == 0)
			m->subs_cache[i].at = INT64_MIN / 2;
	pthread_mutex_unlock(&m->subs_mu);
}

void mgo_subs_cache_release(struct mgo *m)
{
	size_t i;

	for (i = 0; i < m->n_subs_cache; i++) {
		free(m->subs_cache[i].board);
		store_subs_free(m->subs_cache[i].v, m->subs_cache[i].n);
	}
	free(m->subs_cache);
	m->subs_cache = NULL;
	m->n_subs_cache = 0;
}

struct subs_collect {
	struct store_sub **v;
	size_t n, cap;
	bool enabled_only;
};

static enum core_rc subs_collect_one(void *ctx, const bson_t *doc)
{
	struct subs_collect *sc = ctx;
	struct store_sub *s, **nv;
	enum core_rc rc = sub_from_bson(doc, &s);

	if (rc != CORE_OK)
		return rc;
	if (sc->enabled_only && !s->enabled) {
		store_sub_free(s);
		return CORE_OK;
	}
	if (sc->n == sc->cap) {
		nv = realloc(sc->v, (sc->cap ? sc->cap * 2 : 4) * sizeof(*nv));
		if (!nv) {
			store_sub_free(s);
			return CORE_ERR_NOMEM;
		}
		sc->v = nv;
		sc->cap = sc->cap ? sc->cap * 2 : 4;
	}
	sc->v[sc->n++] = s;
	return CORE_OK;
}

static enum core_rc subs_query(struct mgo_conn *c, const char *board, bool enabled_only,
			       struct store_sub ***out, size_t *n)
{
	mongoc_collection_t *coll = coll_get(c, "subscriptions");
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort;
	struct subs_collect sc = {.enabled_only = enabled_only};
	enum core_rc rc;

	BSON_APPEND_UTF8(&filter, "board", board);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "name", 1);
	bson_append_document_end(&opts, &sort);
	rc = mgo_find_each(coll, &filter, &opts, subs_collect_one, &sc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mongoc_collection_destroy(coll);
	if (rc != CORE_OK) {
		store_subs_free(sc.v, sc.n);
		return rc;
	}
	*out = sc.v;
	*n = sc.n;
	return CORE_OK;
}

/* The enabled subscriptions of board (copies; caller frees with store_subs_free). */
static enum core_rc board_subs(struct mgo_conn *c, const char *board, struct store_sub ***out,
			       size_t *n)
{
	struct mgo *m = c->m;
	struct store_sub **v = NULL;
	size_t k = 0, i;
	int64_t now = mgo_mono_ms();
	enum core_rc rc;
	struct mgo_subs_ent *e = NULL, *ne;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&m->subs_mu);
	for (i = 0; i < m->n_subs_cache; i++)
		if (strcmp(m->subs_cache[i].board, board) == 0)
			e = &m->subs_cache[i];
	if (e && now - e->at < MGO_SUBS_TTL_MS) {
		size_t want = e->n; /* read under subs_mu: another thread may refill e after it */

		v = calloc(want + 1, sizeof(*v));
		for (i = 0; v && i < want; i++)
			if ((v[k] = store_sub_dup(e->v[i])))
				k++;
		pthread_mutex_unlock(&m->subs_mu);
		if (!v || k != want) {
			store_subs_free(v, k);
			return CORE_ERR_NOMEM;
		}
		*out = v;
		*n = k;
		return CORE_OK;
	}
	pthread_mutex_unlock(&m->subs_mu);
	rc = subs_query(c, board, true, &v, &k);
	if (rc != CORE_OK)
		return rc;
	/* Cache a copy; a failure to cache only costs the next write a read. */
	pthread_mutex_lock(&m->subs_mu);
	e = NULL;
	for (i = 0; i < m->n_subs_cache; i++)
		if (strcmp(m->subs_cache[i].board, board) == 0)
			e = &m->subs_cache[i];
	if (!e && (ne = realloc(m->subs_cache, (m->n_subs_cache + 1) * sizeof(*ne)))) {
		m->subs_cache = ne;
		e = &ne[m->n_subs_cache];
		memset(e, 0, sizeof(*e));
		if ((e->board = strdup(board)))
			m->n_subs_cache++;
		else
			e = NULL;
	}
	if (e) {
		struct store_sub **cv = calloc(k + 1, sizeof(*cv));
		size_t ck = 0;

		for (i = 0; cv && i < k; i++)
			if ((cv[ck] = store_sub_dup(v[i])))
				ck++;
		if (cv && ck == k) {
			store_subs_free(e->v, e->n);
			e->v = cv;
			e->n = ck;
			e->at = now;
		} else {
			store_subs_free(cv, ck);
		}
	}
	pthread_mutex_unlock(&m->subs_mu);
	*out = v;
	*n = k;
	return CORE_OK;
}

/* ---- matching, before the card's single-document write ---- */

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
	rc = board_subs(c, card->board, &subs, &n_subs);
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
			dc = coll_get(c, "deliveries");
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
			doc = dj ? json_to_bson(dj, d->id) : NULL;
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

/* ---- subscriptions ---- */

enum core_rc mgo_sub_put(struct store *st, const struct store_sub *s, const char *secret_if_new,
			 bool *created, struct store_sub **out)
{
	struct mgo *m = mgo_of(st);
	struct mgo_conn c;
	struct core_board b = {0};
	struct store_sub *old = NULL, *now = NULL;
	mongoc_collection_t *coll = NULL;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, *doc = NULL, *found = NULL;
	char id[2 * CORE_NAME_MAX + 2];
	bson_error_t e;
	json_t *j = NULL;
	enum core_rc rc = mgo_conn_open(m, &c);

	if (rc != CORE_OK)
		return rc;
	coll = coll_get(&c, "subscriptions");
	rc = mgo_board_read(&c, s->board, &b);
	if (rc == CORE_OK)
		rc = core_sub_filter_columns_check(&b, &s->on, NULL, 0);
	sub_id(id, sizeof id, s->board, s->name);
	if (rc == CORE_OK)
		rc = mgo_find_by_id(coll, id, &found);
	if (rc == CORE_OK && found)
		rc = sub_from_bson(found, &old);
	if (rc == CORE_OK) {
		now = store_sub_put_merge(s, old, secret_if_new, c.now);
		rc = now ? CORE_OK : CORE_ERR_NOMEM;
	}
	if (rc == CORE_OK) {
		j = store_sub_to_json(now, true);
		doc = json_to_bson(j, id);
		rc = doc ? CORE_OK : CORE_ERR_NOMEM;
	}
	if (rc == CORE_OK) {
		BSON_APPEND_UTF8(&filter, "_id", id);
		BSON_APPEND_BOOL(&opts, "upsert", true);
		if (!mongoc_collection_replace_one(coll, &filter, doc, &opts, NULL, &e))
			rc = mgo_error("put subscription", &e);
	}
	subs_cache_drop(m, s->board);
	if (rc == CORE_OK) {
		*created = !old;
		*out = now;
		now = NULL;
	}
	json_decref(j);
	if (doc)
		bson_destroy(doc);
	if (found)
		bson_destroy(found);
	bson_destroy(&opts);
	bson_destroy(&filter);
	store_sub_free(old);
	store_sub_free(now);
	core_board_release(&b);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_sub_get(struct store *st, const char *board, const char *name,
			 struct store_sub **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t *doc = NULL;
	char id[2 * CORE_NAME_MAX + 2];
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = coll_get(&c, "subscriptions");
	sub_id(id, sizeof id, board, name);
	rc = mgo_find_by_id(coll, id, &doc);
	if (rc == CORE_OK)
		rc = doc ? sub_from_bson(doc, out) : CORE_ERR_NOT_FOUND;
	if (doc)
		bson_destroy(doc);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_subs_column_rename(struct mgo_conn *c, const char *board, const char *from,
				    const char *to)
{
	mongoc_collection_t *coll = coll_get(c, "subscriptions");
	struct store_sub **v = NULL;
	size_t n = 0, i;
	enum core_rc rc = subs_query(c, board, false, &v, &n);

	for (i = 0; rc == CORE_OK && i < n; i++) {
		bson_t filter = BSON_INITIALIZER, *doc = NULL;
		char id[2 * CORE_NAME_MAX + 2];
		bool changed = false;
		bson_error_t e;
		json_t *j = NULL;

		rc = core_sub_filter_column_rename(&v[i]->on, from, to, &changed);
		if (rc == CORE_OK && changed) {
			v[i]->updated_at = c->now;
			sub_id(id, sizeof id, v[i]->board, v[i]->name);
			j = store_sub_to_json(v[i], true);
			doc = j ? json_to_bson(j, id) : NULL;
			rc = doc ? CORE_OK : CORE_ERR_NOMEM;
			BSON_APPEND_UTF8(&filter, "_id", id);
			/* Replaced whole, as sub_put writes it; one deleted meanwhile stays deleted. */
			if (rc == CORE_OK &&
			    !mongoc_collection_replace_one(coll, &filter, doc, NULL, NULL, &e))
				rc = mgo_error("rename a column in a subscription", &e);
		}
		json_decref(j);
		if (doc)
			bson_destroy(doc);
		bson_destroy(&filter);
	}
	subs_cache_drop(c->m, board);
	store_subs_free(v, n);
	mongoc_collection_destroy(coll);
	return rc;
}

enum core_rc mgo_sub_list(struct store *st, const char *board, struct store_sub ***out, size_t *n)
{
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	rc = subs_query(&c, board, false, out, n);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_sub_delete(struct store *st, const char *board, const char *name)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t filter = BSON_INITIALIZER, reply;
	bson_iter_t it;
	char id[2 * CORE_NAME_MAX + 2];
	bson_error_t e;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = coll_get(&c, "subscriptions");
	sub_id(id, sizeof id, board, name);
	BSON_APPEND_UTF8(&filter, "_id", id);
	if (!mongoc_collection_delete_one(coll, &filter, NULL, &reply, &e))
		rc = mgo_error("delete subscription", &e);
	else if (!bson_iter_init_find(&it, &reply, "deletedCount") || bson_iter_as_int64(&it) < 1)
		rc = CORE_ERR_NOT_FOUND;
	bson_destroy(&reply);
	subs_cache_drop(c.m, board);
	bson_destroy(&filter);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

/* ---- deliveries ---- */

enum core_rc mgo_delivery_get(struct store *st, const char *id, struct store_delivery **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t *doc = NULL;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = coll_get(&c, "deliveries");
	rc = mgo_find_by_id(coll, id, &doc);
	if (rc == CORE_OK)
		rc = doc ? dlv_from_bson(doc, out) : CORE_ERR_NOT_FOUND;
	if (doc)
		bson_destroy(doc);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

struct dlv_collect {
	struct store_delivery **v;
	size_t n, cap;
};

static enum core_rc dlv_collect_one(void *ctx, const bson_t *doc)
{
	struct dlv_collect *dc = ctx;
	struct store_delivery *d, **nv;
	enum core_rc rc = dlv_from_bson(doc, &d);

	if (rc != CORE_OK)
		return rc;
	if (dc->n == dc->cap) {
		nv = realloc(dc->v, (dc->cap ? dc->cap * 2 : 8) * sizeof(*nv));
		if (!nv) {
			store_delivery_free(d);
			return CORE_ERR_NOMEM;
		}
		dc->v = nv;
		dc->cap = dc->cap ? dc->cap * 2 : 8;
	}
	dc->v[dc->n++] = d;
	return CORE_OK;
}

static enum core_rc dlv_query(struct mgo_conn *c, const bson_t *filter, int dir, size_t limit,
			      struct store_delivery ***out, size_t *n)
{
	mongoc_collection_t *coll = coll_get(c, "deliveries");
	bson_t opts = BSON_INITIALIZER, sort;
	struct dlv_collect dc = {0};
	enum core_rc rc;

	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	if (dir > 0)
		BSON_APPEND_INT32(&sort, "next_at", 1);
	BSON_APPEND_INT32(&sort, "created_at", dir);
	BSON_APPEND_INT32(&sort, "_id", dir);
	bson_append_document_end(&opts, &sort);
	BSON_APPEND_INT64(&opts, "limit", (int64_t)limit);
	rc = mgo_find_each(coll, filter, &opts, dlv_collect_one, &dc);
	bson_destroy(&opts);
	mongoc_collection_destroy(coll);
	if (rc != CORE_OK) {
		store_deliveries_free(dc.v, dc.n);
		return rc;
	}
	*out = dc.v;
	*n = dc.n;
	return CORE_OK;
}

enum core_rc mgo_delivery_list(struct store *st, const struct store_delivery_filter *f,
			       struct store_delivery ***out, size_t *n)
{
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	mgo_board_filter_append(&filter, f->board, f->boards);
	if (f->status >= 0)
		BSON_APPEND_UTF8(&filter, "status", store_delivery_status_name(f->status));
	rc = dlv_query(&c, &filter, -1, f->limit, out, n);
	bson_destroy(&filter);
	mgo_conn_close(&c);
	return rc;
}

static void lease_free_filter(bson_t *f, int64_t now)
{
	bson_t or, a, b, lt;

	BSON_APPEND_ARRAY_BEGIN(f, "$or", &or);
	BSON_APPEND_DOCUMENT_BEGIN(&or, "0", &a);
	BSON_APPEND_NULL(&a, "lease_owner");
	bson_append_document_end(&or, &a);
	BSON_APPEND_DOCUMENT_BEGIN(&or, "1", &b);
	BSON_APPEND_DOCUMENT_BEGIN(&b, "lease_until", &lt);
	BSON_APPEND_INT64(&lt, "$lt", now);
	bson_append_document_end(&b, &lt);
	bson_append_document_end(&or, &b);
	bson_append_array_end(f, &or);
}

void mgo_lease_open(struct mgo *m, int64_t due)
{
	pthread_mutex_lock(&m->tail_mu);
	m->lease_gen++;
	if (due < m->lease_quiet_until)
		m->lease_quiet_until = due;
	pthread_mutex_unlock(&m->tail_mu);
}

/* Whether the gate is closed at server time now (no query): quiet, or another deliverer of
 * this process is asking right now with nothing enqueued here since. Else *gen: the gate's
 * generation as this query starts (lease_quiet_after compares it). */
static bool lease_quiet(struct mgo *m, int64_t now, uint64_t *gen)
{
	bool quiet;

	pthread_mutex_lock(&m->tail_mu);
	quiet = now < m->lease_quiet_until ||
		(m->lease_asking && m->lease_asking_gen == m->lease_gen);
	*gen = m->lease_gen;
	if (!quiet) {
		m->lease_asking = true;
		m->lease_asking_gen = *gen;
	}
	pthread_mutex_unlock(&m->tail_mu);
	return quiet;
}

/* The query that started at `now` is over (found: whether it found a delivery due): with
 * none, close the gate for MGO_LEASE_QUIET_MS unless this process enqueued one since. */
static void lease_quiet_after(struct mgo *m, int64_t now, uint64_t gen, bool found)
{
	pthread_mutex_lock(&m->tail_mu);
	m->lease_asking = false;
	if (!found && m->lease_gen == gen)
		m->lease_quiet_until = now + MGO_LEASE_QUIET_MS;
	pthread_mutex_unlock(&m->tail_mu);
}

enum core_rc mgo_delivery_lease(struct store *st, const char *owner, int64_t lease_ms,
				struct store_delivery **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll = NULL;
	struct store_delivery **cand = NULL;
	size_t n = 0, i;
	bson_t filter = BSON_INITIALIZER, lte;
	uint64_t gen;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	if (lease_quiet(c.m, c.now, &gen)) {
		mgo_conn_close(&c);
		return CORE_OK; /* nothing due here a moment ago, and nothing enqueued since */
	}
	if (c.m->test_read)
		c.m->test_read(c.m->test_ctx, "lease");
	if (c.m->counter_serial)
		pthread_mutex_lock(&c.m->lease_mu);
	BSON_APPEND_UTF8(&filter, "status", "pending");
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "next_at", &lte);
	BSON_APPEND_INT64(&lte, "$lte", c.now);
	bson_append_document_end(&filter, &lte);
	lease_free_filter(&filter, c.now);
	rc = dlv_query(&c, &filter, 1, MGO_LEASE_CANDIDATES, &cand, &n);
	bson_destroy(&filter);
	lease_quiet_after(c.m, c.now, gen, rc != CORE_OK || n > 0);
	coll = coll_get(&c, "deliveries");
	for (i = 0; rc == CORE_OK && i < n && !*out; i++) {
		bson_t f = BSON_INITIALIZER, u = BSON_INITIALIZER, set, inc, *doc = NULL;

		/* Judged again on what was read: a server may hand back a document as it stands
		 * after the query matched it (mongo-java-server does), and a lease taken
		 * meanwhile must not be read as one to take over. */
		if (cand[i]->status != STORE_DELIVERY_PENDING || cand[i]->next_at > c.now ||
		    (cand[i]->lease_owner && cand[i]->lease_until >= c.now))
			continue;

		/* The whole precondition: still pending, the lease as read, the epoch as read. */
		BSON_APPEND_UTF8(&f, "_id", cand[i]->id);
		BSON_APPEND_UTF8(&f, "status", "pending");
		BSON_APPEND_INT64(&f, "lease_epoch", cand[i]->lease_epoch);
		if (cand[i]->lease_owner) {
			BSON_APPEND_UTF8(&f, "lease_owner", cand[i]->lease_owner);
			BSON_APPEND_INT64(&f, "lease_until", cand[i]->lease_until);
		} else {
			BSON_APPEND_NULL(&f, "lease_owner");
		}
		BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
		BSON_APPEND_UTF8(&set, "lease_owner", owner);
		BSON_APPEND_INT64(&set, "lease_until", c.now + lease_ms);
		BSON_APPEND_INT64(&set, "updated_at", c.now);
		bson_append_document_end(&u, &set);
		BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
		BSON_APPEND_INT64(&inc, "lease_epoch", 1);
		bson_append_document_end(&u, &inc);
		if (c.m->test_before_write)
			c.m->test_before_write(c.m->test_ctx, cand[i]->id);
		rc = mgo_find_modify(coll, &f, &u, &doc);
		if (rc == CORE_OK && doc)
			rc = dlv_from_bson(doc, out);
		if (doc)
			bson_destroy(doc);
		bson_destroy(&u);
		bson_destroy(&f);
	}
	if (c.m->counter_serial)
		pthread_mutex_unlock(&c.m->lease_mu);
	store_deliveries_free(cand, n);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

static enum core_rc sub_disable(struct mgo_conn *c, const char *board, const char *name)
{
	mongoc_collection_t *coll = coll_get(c, "subscriptions");
	bson_t filter = BSON_INITIALIZER, u = BSON_INITIALIZER, set;
	char id[2 * CORE_NAME_MAX + 2];
	bson_error_t e;
	enum core_rc rc = CORE_OK;

	sub_id(id, sizeof id, board, name);
	BSON_APPEND_UTF8(&filter, "_id", id);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
	BSON_APPEND_BOOL(&set, "enabled", false);
	BSON_APPEND_UTF8(&set, "disabled_reason", "gone");
	BSON_APPEND_INT64(&set, "updated_at", c->now);
	bson_append_document_end(&u, &set);
	if (!mongoc_collection_update_one(coll, &filter, &u, NULL, NULL, &e))
		rc = mgo_error("disable subscription", &e);
	subs_cache_drop(c->m, board);
	bson_destroy(&u);
	bson_destroy(&filter);
	mongoc_collection_destroy(coll);
	return rc;
}

/* A conditional update of delivery id; on a miss, NOT_FOUND when it is gone, else `miss`. */
static enum core_rc dlv_cas(struct mgo_conn *c, mongoc_collection_t *coll, const char *id,
			    const bson_t *f, const bson_t *u, enum core_rc miss,
			    struct store_delivery **out)
{
	bson_t *doc = NULL;
	enum core_rc rc = mgo_find_modify(coll, f, u, &doc);

	if (rc == CORE_OK && doc) {
		if (out)
			rc = dlv_from_bson(doc, out);
	} else if (rc == CORE_OK) {
		rc = mgo_find_by_id(coll, id, &doc);
		if (rc == CORE_OK)
			rc = doc ? miss : CORE_ERR_NOT_FOUND;
	}
	if (doc)
		bson_destroy(doc);
	(void)c;
	return rc;
}

enum core_rc mgo_delivery_finish(struct store *st, const char *id,
				 const struct store_delivery_outcome *o,
				 struct store_delivery **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t f = BSON_INITIALIZER, u = BSON_INITIALIZER, set, unset, inc;
	struct store_delivery *d = NULL;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = coll_get(&c, "deliveries");
	BSON_APPEND_UTF8(&f, "_id", id);
	BSON_APPEND_UTF8(&f, "status", "pending");
	BSON_APPEND_UTF8(&f, "lease_owner", o->owner);
	BSON_APPEND_INT64(&f, "lease_epoch", o->epoch);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
	BSON_APPEND_UTF8(&set, "status",
			 o->verdict == CORE_DELIVERY_DONE    ? "done"
			 : o->verdict == CORE_DELIVERY_RETRY ? "pending"
							     : "dead");
	if (o->verdict == CORE_DELIVERY_RETRY)
		BSON_APPEND_INT64(&set, "next_at", o->next_at);
	if (o->status)
		BSON_APPEND_INT32(&set, "last_status", o->status);
	else
		BSON_APPEND_NULL(&set, "last_status");
	if (o->error)
		BSON_APPEND_UTF8(&set, "last_error", o->error);
	else
		BSON_APPEND_NULL(&set, "last_error");
	BSON_APPEND_NULL(&set, "lease_owner");
	BSON_APPEND_INT64(&set, "lease_until", 0);
	BSON_APPEND_INT64(&set, "updated_at", c.now);
	bson_append_document_end(&u, &set);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
	BSON_APPEND_INT32(&inc, "attempts", 1);
	bson_append_document_end(&u, &inc);
	(void)unset;
	rc = dlv_cas(&c, coll, id, &f, &u, CORE_ERR_CLAIM_CONFLICT, &d);
	if (rc == CORE_OK && o->verdict == CORE_DELIVERY_RETRY)
		mgo_lease_open(c.m, o->next_at); /* leased here when it falls due */
	/* After the outcome: a replica that dies in between leaves the subscription enabled,
	 * and the next delivery to it meets the 410 again. */
	if (rc == CORE_OK && o->verdict == CORE_DELIVERY_DISABLE)
		rc = sub_disable(&c, d->board, d->sub);
	if (rc == CORE_OK && out) {
		*out = d;
		d = NULL;
	}
	store_delivery_free(d);
	bson_destroy(&u);
	bson_destroy(&f);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_delivery_retry(struct store *st, const char *id, struct store_delivery **out)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t f = BSON_INITIALIZER, u = BSON_INITIALIZER, set, ne, inc;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	coll = coll_get(&c, "deliveries");
	BSON_APPEND_UTF8(&f, "_id", id);
	BSON_APPEND_DOCUMENT_BEGIN(&f, "status", &ne);
	BSON_APPEND_UTF8(&ne, "$ne", "pending");
	bson_append_document_end(&f, &ne);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
	BSON_APPEND_UTF8(&set, "status", "pending");
	BSON_APPEND_INT32(&set, "attempts", 0);
	BSON_APPEND_INT64(&set, "next_at", c.now);
	BSON_APPEND_NULL(&set, "lease_owner");
	BSON_APPEND_INT64(&set, "lease_until", 0);
	BSON_APPEND_INT64(&set, "updated_at", c.now);
	bson_append_document_end(&u, &set);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
	BSON_APPEND_INT64(&inc, "lease_epoch", 1);
	bson_append_document_end(&u, &inc);
	rc = dlv_cas(&c, coll, id, &f, &u, CORE_ERR_STATE_CONFLICT, out);
	if (rc == CORE_OK)
		mgo_lease_open(c.m, 0);
	bson_destroy(&u);
	bson_destroy(&f);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
	return rc;
}

/* ---- retention ---- */

/* Keeps the newest MGO_SETTLED_KEEP settled (done or dead) deliveries: the maintenance
 * thread deletes the older ones. Pending deliveries are never deleted. */
#define MGO_SETTLED_KEEP 10000

void mgo_deliveries_trim(struct mgo *m)
{
	struct mgo_conn c;
	mongoc_collection_t *coll;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort, in, arr, lte, *doc = NULL;
	bson_iter_t it;
	bson_error_t e;
	int64_t cut;

	if (mgo_conn_open_bare(m, &c) != CORE_OK)
		return;
	coll = coll_get(&c, "deliveries");
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "status", &in);
	BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	BSON_APPEND_UTF8(&arr, "0", "done");
	BSON_APPEND_UTF8(&arr, "1", "dead");
	bson_append_array_end(&in, &arr);
	bson_append_document_end(&filter, &in);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "updated_at", -1);
	bson_append_document_end(&opts, &sort);
	BSON_APPEND_INT64(&opts, "skip", MGO_SETTLED_KEEP);
	if (mgo_find_one(coll, &filter, &opts, &doc) == CORE_OK && doc &&
	    bson_iter_init_find(&it, doc, "updated_at") && mgo_iter_i64(&it, &cut)) {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "updated_at", &lte);
		BSON_APPEND_INT64(&lte, "$lte", cut);
		bson_append_document_end(&filter, &lte);
		if (!mongoc_collection_delete_many(coll, &filter, NULL, NULL, &e))
			mgo_error("trim deliveries", &e);
	}
	if (doc)
		bson_destroy(doc);
	bson_destroy(&opts);
	bson_destroy(&filter);
	mongoc_collection_destroy(coll);
	mgo_conn_close(&c);
}
