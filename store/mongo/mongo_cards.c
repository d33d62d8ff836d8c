/* Cards on the Mongo twin: create, read, list (creation order, opaque cursor), patch (title,
 * body, blockers with the waiting-column placement), delete, and the label counts. Every
 * rule is core's; ordinary writes never touch the claim fields. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "store/mongo/mongo_ops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mgo_board_filter_append(bson_t *filter, const char *board, const char *const *boards)
{
	bson_t in, arr;
	char ibuf[16];
	const char *ikey;
	uint32_t i;
	bool ok;

	/* One board asked for: the caller has checked it against the allowed list. */
	if (board)
		return BSON_APPEND_UTF8(filter, "board", board);
	if (!boards)
		return true;
	ok = BSON_APPEND_DOCUMENT_BEGIN(filter, "board", &in) &&
	     BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	for (i = 0; ok && boards[i]; i++) {
		bson_uint32_to_string(i, &ikey, ibuf, sizeof(ibuf));
		ok = BSON_APPEND_UTF8(&arr, ikey, boards[i]);
	}
	return ok && bson_append_array_end(&in, &arr) && bson_append_document_end(filter, &in);
}

struct query_ctx {
	struct core_card **v;
	int64_t *ords; /* the creation ordinal of each card */
	size_t n, cap;
};

static enum core_rc collect(void *ctx, const bson_t *doc)
{
	struct query_ctx *q = ctx;
	struct core_card *card, **nv;
	int64_t *no, ord = 0;
	bson_iter_t it;
	size_t cap = q->cap ? q->cap * 2 : 16;
	enum core_rc rc = mgo_card_from_bson(doc, &card);

	if (rc == CORE_ERR_BAD_REQUEST)
		return CORE_ERR_INTERNAL;
	if (rc != CORE_OK)
		return rc;
	if (q->n == q->cap) {
		nv = realloc(q->v, cap * sizeof(*nv));
		if (nv)
			q->v = nv;
		no = nv ? realloc(q->ords, cap * sizeof(*no)) : NULL;
		if (!no) {
			core_card_free(card);
			return CORE_ERR_NOMEM;
		}
		q->ords = no;
		q->cap = cap;
	}
	if (bson_iter_init_find(&it, doc, "ord"))
		mgo_iter_i64(&it, &ord);
	q->ords[q->n] = ord;
	q->v[q->n++] = card;
	return CORE_OK;
}

static enum core_rc query_run(struct mgo_conn *c, const bson_t *filter, const bson_t *opts,
			      struct query_ctx *q)
{
	bson_t o = BSON_INITIALIZER, proj;
	enum core_rc rc;

	if (opts)
		bson_copy_to_excluding_noinit(opts, &o, "projection", NULL);
	BSON_APPEND_DOCUMENT_BEGIN(&o, "projection", &proj);
	BSON_APPEND_INT32(&proj, "outbox", 0);
	bson_append_document_end(&o, &proj);
	rc = mgo_find_each(c->cards, filter, &o, collect, q);
	bson_destroy(&o);
	if (rc == CORE_OK && !q->v && !(q->v = calloc(1, sizeof(*q->v))))
		rc = CORE_ERR_NOMEM;
	if (rc != CORE_OK) {
		store_cards_free(q->v, q->n);
		free(q->ords);
		memset(q, 0, sizeof(*q));
	}
	return rc;
}

enum core_rc mgo_cards_query(struct mgo_conn *c, const bson_t *filter, const bson_t *opts,
			     struct core_card ***out, size_t *n)
{
	struct query_ctx q = {0};
	enum core_rc rc = query_run(c, filter, opts, &q);

	if (rc == CORE_OK) {
		*out = q.v;
		*n = q.n;
	}
	free(q.ords);
	return rc;
}

enum core_rc mgo_card_get(struct store *st, const char *id, struct core_card **out)
{
	struct mgo_conn c;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	rc = mgo_card_read(&c, id, out);
	mgo_conn_close(&c);
	return rc;
}

enum core_rc mgo_card_list(struct store *st, const struct store_card_filter *f,
			   struct core_card ***out, size_t *n, char **next)
{
	struct query_ctx q = {0};
	struct mgo_conn c;
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sub, sort;
	char *end, buf[32];
	long long after = 0;
	enum core_rc rc;

	/* The cursor is the creation ordinal of the last card served; ordinals come from a
	 * counter and are never reused, so a page boundary survives deletes. */
	if (f->after) {
		errno = 0;
		after = strtoll(f->after, &end, 10);
		if (*end || errno || after < 0 || f->after[0] < '0' || f->after[0] > '9')
			return CORE_ERR_BAD_REQUEST;
	}
	if (f->board && !mgo_board_allowed(f->board, NULL, f->boards)) {
		*out = calloc(1, sizeof(**out));
		return *out ? CORE_OK : CORE_ERR_NOMEM;
	}
	rc = mgo_conn_open(mgo_of(st), &c);
	if (rc != CORE_OK)
		return rc;
	mgo_board_filter_append(&filter, f->board, f->boards);
	if (f->state)
		BSON_APPEND_UTF8(&filter, "state", f->state);
	if (f->label)
		BSON_APPEND_UTF8(&filter, "labels", f->label);
	if (f->claimed >= 0) {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "claim.marker", &sub);
		BSON_APPEND_BOOL(&sub, "$exists", f->claimed == 1);
		bson_append_document_end(&filter, &sub);
	}
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "ord", &sub);
	BSON_APPEND_INT64(&sub, "$gt", after);
	bson_append_document_end(&filter, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "ord", 1);
	bson_append_document_end(&opts, &sort);
	/* One more than the page tells whether there is a next page. */
	BSON_APPEND_INT64(&opts, "limit", (int64_t)f->limit + 1);
	rc = query_run(&c, &filter, &opts, &q);
	mgo_conn_close(&c);
	bson_destroy(&opts);
	bson_destroy(&filter);
	if (rc != CORE_OK)
		return rc;
	if (q.n > f->limit) {
		core_card_free(q.v[--q.n]);
		snprintf(buf, sizeof(buf), "%" PRId64, q.ords[q.n - 1]);
		*next = strdup(buf);
		if (!*next) {
			store_cards_free(q.v, q.n);
			free(q.ords);
			return CORE_ERR_NOMEM;
		}
	}
	free(q.ords);
	*out = q.v;
	*n = q.n;
	return CORE_OK;
}

/* Dedups `in` into *out and checks it for card `self` on `board`: valid, known, same board,
 * not self, no cycle (core_blockers_check over cards read on demand). */
static enum core_rc blockers_prepare(struct mgo_conn *c, const char *self, const char *board,
				     const struct core_strv *in, struct core_strv *out)
{
	struct mgo_lookup lk;
	struct core_card_lookup look = mgo_lookup_init(&lk, c);
	enum core_rc rc;
	size_t i, j;

	rc = core_strv_copy(out, in);
	if (rc == CORE_OK) {
		core_strv_dedup(out);
		rc = core_blockers_check(self, out, &look, NULL, 0);
		if (lk.rc != CORE_OK)
			rc = lk.rc;
	}
	for (i = 0; rc == CORE_OK && i < out->n; i++) {
		const struct core_card *bc = NULL;

		look.state_of(look.ctx, out->v[i], NULL);
		for (j = 0; j < lk.n; j++)
			if (strcmp(lk.cache[j]->id, out->v[i]) == 0)
				bc = lk.cache[j];
		if (lk.rc != CORE_OK)
			rc = lk.rc;
		else if (!bc || strcmp(bc->board, board) != 0)
			rc = CORE_ERR_TRANSITION_REJECTED;
	}
	mgo_lookup_release(&lk);
	if (rc != CORE_OK)
		core_strv_release(out);
	return rc;
}

static bool blockers_all_done(struct mgo_conn *c, const struct core_board *b,
			      const struct core_strv *bl, enum core_rc *rc)
{
	struct mgo_lookup lk;
	struct core_card_lookup look = mgo_lookup_init(&lk, c);
	bool done = core_blockers_all_done(b, bl, &look);

	*rc = lk.rc;
	mgo_lookup_release(&lk);
	return done;
}

/* The epoch floor of a card id deleted before (counters {_id: "epoch:<id>", seq}): a card
 * re-created under the id starts above every epoch it had (DESIGN §11). 0: none. */
static enum core_rc floor_read(struct mgo_conn *c, const char *id, int64_t *floor)
{
	char key[CORE_ID_MAX + 16];
	bson_t *doc = NULL;
	bson_iter_t it;
	enum core_rc rc;

	*floor = 0;
	snprintf(key, sizeof(key), "epoch:%s", id);
	rc = mgo_find_by_id(c->counters, key, &doc);
	if (rc == CORE_OK && doc && bson_iter_init_find(&it, doc, "seq"))
		mgo_iter_i64(&it, floor);
	bson_destroy(doc);
	return rc;
}

/* Raises the floor of id to epoch ($max, upsert). */
static enum core_rc floor_raise(struct mgo_conn *c, const char *id, int64_t epoch)
{
	char key[CORE_ID_MAX + 16];
	bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, opts = BSON_INITIALIZER, max;
	bson_error_t e;
	enum core_rc rc = CORE_OK;

	snprintf(key, sizeof(key), "epoch:%s", id);
	BSON_APPEND_UTF8(&filter, "_id", key);
	BSON_APPEND_DOCUMENT_BEGIN(&update, "$max", &max);
	BSON_APPEND_INT64(&max, "seq", epoch);
	bson_append_document_end(&update, &max);
	BSON_APPEND_BOOL(&opts, "upsert", true);
	if (!mongoc_collection_update_one(c->counters, &filter, &update, &opts, NULL, &e))
		rc = mgo_error("epoch floor", &e);
	bson_destroy(&opts);
	bson_destroy(&update);
	bson_destroy(&filter);
	return rc;
}

/* Builds the new card of a create; rc as the FS twin orders its refusals. */
static enum core_rc create_build(struct mgo_conn *c, const struct store_card_create *in,
				 const char *id, const struct core_board *b, struct core_card **out)
{
	struct core_card *card = core_card_new();
	const char *state = in->state ? in->state : b->cols[0].name;
	enum core_rc rc = CORE_ERR_NOMEM;
	bool changed, done;

	*out = NULL;
	if (!card || core_str_set(&card->id, id) || core_str_set(&card->board, b->name) ||
	    core_str_set(&card->title, in->title ? in->title : "") ||
	    core_str_set(&card->body, in->body ? in->body : ""))
		goto out;
	card->priority = in->priority;
	card->not_before = in->not_before > 0 ? in->not_before : 0; /* DESIGN §17 */
	if (in->labels && (rc = core_labels_set(card, in->labels, &changed)) != CORE_OK)
		goto out;
	if (in->blockers &&
	    (rc = blockers_prepare(c, id, b->name, in->blockers, &card->blockers)) != CORE_OK)
		goto out;
	done = blockers_all_done(c, b, &card->blockers, &rc);
	if (rc != CORE_OK)
		goto out;
	/* Blocked from birth: the card waits whatever column was asked for. */
	if (!done)
		state = b->waiting;
	rc = store_card_fits(&c->m->base, card, NULL, 0);
	if (rc != CORE_OK)
		goto out;
	card->has_epoch = true;
	rc = floor_read(c, id, &card->claim_epoch);
	if (rc != CORE_OK)
		goto out;
	card->created_at = c->now;
	rc = core_card_state_write(card, state, NULL, c->now);
out:
	if (rc == CORE_OK)
		*out = card;
	else
		core_card_free(card);
	return rc;
}

enum core_rc mgo_card_create(struct store *st, const struct store_card_create *in,
			     const struct store_actor *actor, struct core_card **out)
{
	struct core_board b = {0};
	struct core_card *card = NULL, *exists = NULL;
	struct mgo_conn c;
	struct mgo_evq q;
	bson_t doc = BSON_INITIALIZER, push;
	char idbuf[CORE_ID_MAX + 1], ibuf[16];
	const char *ikey;
	bson_error_t e;
	int64_t ord;
	size_t i;
	bool consumed;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	mgo_evq_init(&q, c.m);
	rc = mgo_board_read(&c, in->board ? in->board : "default", &b);
	if (rc != CORE_OK)
		goto out;
	rc = CORE_ERR_TRANSITION_REJECTED;
	if (in->state && !core_board_column(&b, in->state))
		goto out;
	if (in->id) {
		rc = mgo_card_read(&c, in->id, &exists);
		if (rc == CORE_OK)
			rc = CORE_ERR_ALREADY_EXISTS;
		if (rc != CORE_ERR_NOT_FOUND)
			goto out;
	}
	rc = mgo_counter_add(&c, "cards", 1, &ord);
	if (rc != CORE_OK)
		goto out;
	/* A fresh id: time-ordered stamp + the creation ordinal, unique by the counter. */
	snprintf(idbuf, sizeof(idbuf), "c-%011" PRIx64 "-%" PRId64, (uint64_t)c.now, ord);
	rc = create_build(&c, in, in->id ? in->id : idbuf, &b, &card);
	if (rc != CORE_OK)
		goto out;
	mgo_evq_add(&q, CORE_EV_CARD_CREATED, b.name, card->id, c.actor, NULL, c.now,
		    json_pack("{ss}", "state", card->state));
	/* Its subscriptions fire in the insert itself (DESIGN §14). */
	rc = mgo_effects_match(&c, card, &q, &consumed);
	if (rc != CORE_OK)
		goto out;
	rc = CORE_ERR_NOMEM;
	if (q.failed || !mgo_card_to_bson(card, ord, &doc) ||
	    !BSON_APPEND_ARRAY_BEGIN(&doc, "outbox", &push))
		goto out;
	for (i = 0; i < q.n; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		BSON_APPEND_DOCUMENT(&push, ikey, q.ev[i]);
	}
	bson_append_array_end(&doc, &push);
	rc = CORE_OK;
	if (!mongoc_collection_insert_one(c.cards, &doc, NULL, NULL, &e))
		rc = mgo_error("insert card", &e);
	if (rc == CORE_OK)
		rc = mgo_evq_deliver(&c, c.cards, card->id, &q, NULL);
	if (rc == CORE_OK) {
		*out = card;
		card = NULL;
	}
out:
	bson_destroy(&doc);
	mgo_evq_release(&q);
	core_card_free(exists);
	core_card_free(card);
	core_board_release(&b);
	mgo_conn_close(&c);
	return rc;
}

/* After a blockers change: an unclaimed working card with open blockers waits; a waiting card
 * whose blockers are all done is released to the first eligible column. *to NULL: stays. */
static enum core_rc blockers_reposition(struct mgo_conn *c, const struct core_card *card,
					const struct core_board *b, const char **to,
					const char **reason)
{
	bool waiting = b->waiting && strcmp(card->state, b->waiting) == 0;
	const char *eligible = core_board_first_eligible(b);
	enum core_rc rc;
	bool done = blockers_all_done(c, b, &card->blockers, &rc);

	*to = *reason = NULL;
	if (rc != CORE_OK)
		return rc;
	if (!done && !waiting && !card->claim.present && core_board_is_working(b, card->state)) {
		*to = b->waiting;
		*reason = "blocked";
	} else if (done && waiting && eligible) {
		*to = eligible;
		*reason = "unblocked";
	}
	return CORE_OK;
}

/* One attempt of a patch; *hit false: the card changed under it, try again. */
static enum core_rc patch_once(struct mgo_conn *c, const char *id,
			       const struct store_card_patch *p, bool *hit,
			       struct core_card **out)
{
	struct core_card *was = NULL, *now = NULL;
	struct core_board b = {0};
	struct core_strv bl = {0};
	struct mgo_evq q;
	json_t *fields = json_array();
	const char *to = NULL, *reason = NULL;
	enum core_rc rc;

	mgo_evq_init(&q, c->m);
	rc = fields ? mgo_card_read(c, id, &was) : CORE_ERR_NOMEM;
	if (rc == CORE_OK && (rc = mgo_board_read(c, was->board, &b)) == CORE_ERR_NOT_FOUND)
		rc = CORE_ERR_INTERNAL;
	if (rc == CORE_OK && p->blockers)
		rc = blockers_prepare(c, was->id, was->board, p->blockers, &bl);
	if (rc == CORE_OK && !(now = core_card_dup(was)))
		rc = CORE_ERR_NOMEM;
	if (rc != CORE_OK)
		goto out;
	rc = CORE_ERR_NOMEM;
	if (p->title && (core_str_set(&now->title, p->title) ||
			 json_array_append_new(fields, json_string("title"))))
		goto out;
	if (p->body && (core_str_set(&now->body, p->body) ||
			json_array_append_new(fields, json_string("body"))))
		goto out;
	if (p->has_priority) {
		now->priority = p->priority;
		if (json_array_append_new(fields, json_string("priority")))
			goto out;
	}
	if (p->has_not_before) { /* DESIGN §17: 0 clears; it may make the card available */
		now->not_before = p->not_before > 0 ? p->not_before : 0;
		if (json_array_append_new(fields, json_string("not_before")))
			goto out;
	}
	if (p->blockers) {
		core_strv_release(&now->blockers);
		now->blockers = bl;
		bl = (struct core_strv){0};
		if (json_array_append_new(fields, json_string("blockers")))
			goto out;
	}
	rc = CORE_OK;
	if (json_array_size(fields) == 0) {
		*hit = true;
		*out = now;
		now = NULL;
		goto out;
	}
	rc = store_card_fits(&c->m->base, now, NULL, 0);
	if (rc != CORE_OK)
		goto out;
	now->updated_at = c->now;
	mgo_evq_add(&q, CORE_EV_CARD_UPDATED, now->board, now->id, c->actor, NULL, c->now,
		    json_pack("{sO}", "fields", fields));
	if (p->blockers)
		rc = blockers_reposition(c, now, &b, &to, &reason);
	if (rc == CORE_OK)
		rc = mgo_state_move(c, was, now, &b, to ? to : now->state, reason, NULL,
				    MGO_PRE_CLAIM | (p->blockers ? MGO_PRE_BLOCKERS : 0), &q, hit,
				    out);
out:
	core_strv_release(&bl);
	json_decref(fields);
	mgo_evq_release(&q);
	core_card_free(now);
	core_card_free(was);
	core_board_release(&b);
	return rc;
}

enum core_rc mgo_card_patch(struct store *st, const char *id, const struct store_card_patch *p,
			    const struct store_actor *actor, struct core_card **out)
{
	struct mgo_conn c;
	bool hit = false;
	int tries;
	enum core_rc rc = mgo_conn_open(mgo_of(st), &c);

	if (rc != CORE_OK)
		return rc;
	c.actor = mgo_actor_name(actor);
	for (tries = 0; rc == CORE_OK && !hit && tries < MGO_CAS_TRIES; tries++)
		rc = patch_once(&c, id, p, &hit, out);
	if (rc == CORE_OK && !hit)
		rc = CORE_ERR_STATE_CONFLICT;
	mgo_conn_close(&c);
	return rc;
}

/* A deleted card's outbox into the tail, a queue at a time, then its card_deleted: the
 * outbox can hold more than one queue (its pulls are deferred), and a full queue had no room
 * left for card_deleted, which was lost. q: empty, initialised; released by the caller. */
static enum core_rc outbox_then_deleted(struct mgo_conn *c, const bson_t *gone,
					const struct core_card *card, struct mgo_evq *q)
{
	enum core_rc rc = CORE_OK;
	size_t pos = 0;
	bool more = true;

	while (rc == CORE_OK && more) {
		more = mgo_evq_from_outbox(q, gone, &pos);
		if (q->n)
			rc = mgo_evq_insert_direct(c, q);
		mgo_evq_release(q);
		mgo_evq_init(q, c->m);
	}
	if (rc != CORE_OK)
		return rc;
	mgo_evq_add(q, CORE_EV_CARD_DELETED, card->board, card->id, c->actor, NULL, c->now, NULL);
	return mgo_evq_insert_direct(c, q);
}

enum core_rc mgo_card_delete(struct store *st, const char *id, const struct store_actor *actor)
{
	mongoc_find_and_modify_opts_t *fam = mongoc_find_and_modify_opts_new();
	bson_t filter = BSON_INITIALIZER, reply, gone;
	struct core_card *card = NULL;
	struct mgo_conn c;
	struct mgo_evq q;
	bson_iter_t it;
	bson_error_t e;
	const uint8_t *data;
	uint32_t len;
	int64_t n_deps;
	enum core_rc rc = fam ? mgo_conn_open(mgo_of(st), &c) : CORE_ERR_NOMEM;

	if (rc != CORE_OK) {
		mongoc_find_and_modify_opts_destroy(fam);
		return rc;
	}
	c.actor = mgo_actor_name(actor);
	mgo_evq_init(&q, c.m);
	/* A blocker that vanished would strand its dependents in waiting_deps (§11). Checked
	 * before the delete: a dependent added in between is the one race left (no
	 * multi-document transactions here, DESIGN §9). */
	BSON_APPEND_UTF8(&filter, "blockers", id);
	n_deps = mongoc_collection_count_documents(c.cards, &filter, NULL, NULL, NULL, &e);
	bson_reinit(&filter);
	if (n_deps < 0) {
		rc = mgo_error("count dependents", &e);
		goto out;
	}
	if (n_deps > 0) {
		rc = CORE_ERR_DEPENDENTS_OUTSTANDING;
		goto out;
	}
	BSON_APPEND_UTF8(&filter, "_id", id);
	mongoc_find_and_modify_opts_set_flags(fam, MONGOC_FIND_AND_MODIFY_REMOVE);
	if (!mongoc_collection_find_and_modify_with_opts(c.cards, &filter, fam, &reply, &e)) {
		rc = mgo_error("delete card", &e);
		goto out;
	}
	rc = CORE_ERR_NOT_FOUND;
	if (bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &len, &data);
		bson_init_static(&gone, data, len);
		rc = mgo_card_from_bson(&gone, &card);
		/* The id keeps its highest epoch past the delete. A failure here is logged: the
		 * server-clock floor of every fresh epoch still keeps it from repeating. */
		if (rc == CORE_OK && card->has_epoch && card->claim_epoch > 0 &&
		    floor_raise(&c, id, card->claim_epoch) != CORE_OK)
			fprintf(stderr, "boardd: mongo: card %s deleted; its epoch floor was not "
					"recorded\n", id);
		if (rc == CORE_OK) {
			/* The document and its outbox are gone: whatever it still owed the tail
			 * goes straight in, then card_deleted (ledger item 2 in mongo.c). */
			if (outbox_then_deleted(&c, &gone, card, &q) != CORE_OK)
				fprintf(stderr, "boardd: mongo: card %s deleted; its events were "
						"not recorded\n", id);
			/* DESIGN §17: a claim deleted with its card gives its slots back (else
			 * the repair pass would, finding the card gone). */
			mgo_slots_after_cas(&c, card, &(struct core_card){0}, &gone);
		} else {
			rc = CORE_OK; /* a foreign, unreadable document: deleted all the same */
		}
	}
	bson_destroy(&reply);
out:
	core_card_free(card);
	mgo_evq_release(&q);
	bson_destroy(&filter);
	mgo_conn_close(&c);
	mongoc_find_and_modify_opts_destroy(fam);
	return rc;
}

enum core_rc mgo_labels_count(struct store *st, const char *board, const char *const *boards,
			      json_t **out)
{
	struct mgo_conn c;
	mongoc_cursor_t *cur;
	bson_t pipeline = BSON_INITIALIZER, stage, match, group, sum, sort;
	const bson_t *d;
	bson_iter_t it;
	bson_error_t e;
	json_t *o = json_object();
	const char *label;
	int64_t cnt;
	enum core_rc rc = o ? CORE_OK : CORE_ERR_NOMEM;

	if (rc != CORE_OK || (board && !mgo_board_allowed(board, NULL, boards))) {
		*out = o;
		return rc;
	}
	rc = mgo_conn_open(mgo_of(st), &c);
	if (rc != CORE_OK) {
		json_decref(o);
		return rc;
	}
	BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "0", &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&stage, "$match", &match);
	mgo_board_filter_append(&match, board, boards);
	bson_append_document_end(&stage, &match);
	bson_append_document_end(&pipeline, &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "1", &stage);
	BSON_APPEND_UTF8(&stage, "$unwind", "$labels");
	bson_append_document_end(&pipeline, &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "2", &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&stage, "$group", &group);
	BSON_APPEND_UTF8(&group, "_id", "$labels");
	BSON_APPEND_DOCUMENT_BEGIN(&group, "n", &sum);
	BSON_APPEND_INT32(&sum, "$sum", 1);
	bson_append_document_end(&group, &sum);
	bson_append_document_end(&stage, &group);
	bson_append_document_end(&pipeline, &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "3", &stage);
	BSON_APPEND_DOCUMENT_BEGIN(&stage, "$sort", &sort);
	BSON_APPEND_INT32(&sort, "_id", 1);
	bson_append_document_end(&stage, &sort);
	bson_append_document_end(&pipeline, &stage);
	cur = mongoc_collection_aggregate(c.cards, MONGOC_QUERY_NONE, &pipeline, NULL, NULL);
	while (rc == CORE_OK && mongoc_cursor_next(cur, &d)) {
		cnt = 0;
		if (!bson_iter_init_find(&it, d, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
			continue;
		label = bson_iter_utf8(&it, NULL);
		if (bson_iter_init_find(&it, d, "n"))
			mgo_iter_i64(&it, &cnt);
		if (json_object_set_new(o, label, json_integer(cnt)) != 0)
			rc = CORE_ERR_NOMEM;
	}
	if (rc == CORE_OK && mongoc_cursor_error(cur, &e))
		rc = mgo_error("label counts", &e);
	mongoc_cursor_destroy(cur);
	bson_destroy(&pipeline);
	mgo_conn_close(&c);
	if (rc != CORE_OK) {
		json_decref(o);
		return rc;
	}
	*out = o;
	return CORE_OK;
}
