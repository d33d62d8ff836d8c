/* The maintenance drain of the Mongo twin's outboxes: the events a writer that died or failed
 * left in a card's, run's or board's outbox, older than MGO_OUTBOX_GRACE_MS, are delivered to
 * `events` (mgo_evq_store: whatever is stored already is only pulled) and pulled. Run by the
 * maintenance thread (mongo.c). */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_ops.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct drain_ctx {
	struct mgo_conn *c;
	mongoc_collection_t *coll;
};

bool mgo_evq_from_outbox(struct mgo_evq *q, const bson_t *doc, size_t *pos)
{
	bson_iter_t ai, ei;
	const uint8_t *data;
	uint32_t len;
	bson_t ev;
	size_t i = 0;

	if (!bson_iter_init_find(&ai, doc, "outbox") || !BSON_ITER_HOLDS_ARRAY(&ai) ||
	    !bson_iter_recurse(&ai, &ai))
		return false;
	while (bson_iter_next(&ai)) {
		if (i++ < *pos)
			continue;
		if (q->n == sizeof(q->ev) / sizeof(q->ev[0]))
			return true;
		*pos = i;
		if (!BSON_ITER_HOLDS_DOCUMENT(&ai))
			continue;
		bson_iter_document(&ai, &len, &data);
		if (!bson_init_static(&ev, data, len) || !bson_iter_init_find(&ei, &ev, "_id") ||
		    !BSON_ITER_HOLDS_UTF8(&ei))
			continue;
		bson_strncpy(q->eid[q->n], bson_iter_utf8(&ei, NULL), sizeof(q->eid[q->n]));
		q->ev[q->n] = bson_copy(&ev);
		if (q->ev[q->n])
			q->n++;
	}
	return false;
}

static enum core_rc drain_doc(void *ctx, const bson_t *doc)
{
	struct drain_ctx *d = ctx;
	struct mgo_evq q = {0};
	size_t pos = 0;
	bson_iter_t it;

	if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
		return CORE_OK;
	mgo_evq_from_outbox(&q, doc, &pos); /* the rest on the next pass, once these are pulled */
	/* What was delivered already (a writer that died before its pull) is only pulled. A
	 * claim-next whose writer died before it matched its card_claimed is matched here. */
	d->c->now = mgo_clock_now(&d->c->m->base);
	if (q.n && d->coll == d->c->cards &&
	    mgo_effects_match_late(d->c, &q, bson_iter_utf8(&it, NULL)) != CORE_OK) {
		mgo_evq_release(&q);
		return CORE_OK; /* left for the next pass */
	}
	if (q.n && mgo_evq_store(d->c, &q, false,
			     d->coll == d->c->cards ? bson_iter_utf8(&it, NULL) : NULL) == CORE_OK &&
	    mgo_effects_store(d->c, &q) == CORE_OK)
		mgo_evq_pull(d->c->m, d->coll, bson_iter_utf8(&it, NULL), &q);
	mgo_evq_release(&q);
	return CORE_OK;
}

void mgo_outbox_drain(struct mgo *m)
{
	struct mgo_conn c;
	struct drain_ctx d;
	mongoc_collection_t *colls[3];
	bson_t filter, opts, lt, proj;
	size_t i;

	if (mgo_conn_open_bare(m, &c) != CORE_OK)
		return;
	colls[0] = c.cards;
	colls[1] = c.runs;
	colls[2] = c.boards;
	for (i = 0; i < 3; i++) {
		bson_init(&filter);
		bson_init(&opts);
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "outbox.q_ts", &lt);
		BSON_APPEND_DATE_TIME(&lt, "$lt", mgo_clock_now(&m->base) - MGO_OUTBOX_GRACE_MS);
		bson_append_document_end(&filter, &lt);
		BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
		BSON_APPEND_INT32(&proj, "outbox", 1);
		bson_append_document_end(&opts, &proj);
		BSON_APPEND_INT64(&opts, "limit", 100);
		d = (struct drain_ctx){.c = &c, .coll = colls[i]};
		mgo_find_each(colls[i], &filter, &opts, drain_doc, &d);
		bson_destroy(&opts);
		bson_destroy(&filter);
	}
	mgo_conn_close(&c);
}
