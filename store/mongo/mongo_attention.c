/* The attention lane on the Mongo twin (DESIGN §15): indexed queries, never a board scan.
 *
 * 1. runs {status: failed | paused_*} (index runs.status): the cards behind them;
 * 2. cards {$or: [gave_up.at set (index), awaiting_input (index), a recovery marker (a
 *    range on claim.marker), an expired lease (claim_lease), _id in (1)]} in scope;
 * 3. the recorded runs of those cards by _id, and each board's config once;
 * then core_attention_reasons decides each card at the database server's now, as the FS
 * twin does. The run arm reads every failed or paused run in scope, including runs whose
 * card has moved on since; it is bounded by those runs, not by the board's cards. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

static const char *const attn_statuses[] = {CORE_RUN_FAILED, CORE_RUN_PAUSED_HUMAN,
					    CORE_RUN_PAUSED_OPERATOR};

struct ids {
	char **v;
	size_t n, cap;
};

static void ids_release(struct ids *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static enum core_rc ids_add(struct ids *s, const char *id)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->v[i], id) == 0)
			return CORE_OK;
	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 16;
		char **nv = realloc(s->v, nc * sizeof(*nv));

		if (!nv)
			return CORE_ERR_NOMEM;
		s->v = nv;
		s->cap = nc;
	}
	if (!(s->v[s->n] = strdup(id)))
		return CORE_ERR_NOMEM;
	s->n++;
	return CORE_OK;
}

static bool ids_append(bson_t *d, const char *key, const char *op, const struct ids *s)
{
	bson_t sub, arr;
	char ibuf[16];
	const char *ikey;
	uint32_t i;
	bool ok = BSON_APPEND_DOCUMENT_BEGIN(d, key, &sub) && BSON_APPEND_ARRAY_BEGIN(&sub, op, &arr);

	for (i = 0; ok && i < s->n; i++) {
		bson_uint32_to_string(i, &ikey, ibuf, sizeof(ibuf));
		ok = BSON_APPEND_UTF8(&arr, ikey, s->v[i]);
	}
	return ok && bson_append_array_end(&sub, &arr) && bson_append_document_end(d, &sub);
}

static enum core_rc run_card_id(void *ctx, const bson_t *doc)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, doc, "card_id") && BSON_ITER_HOLDS_UTF8(&it))
		return ids_add(ctx, bson_iter_utf8(&it, NULL));
	return CORE_OK;
}

struct runs {
	struct core_run **v;
	size_t n, cap;
};

static enum core_rc run_collect(void *ctx, const bson_t *doc)
{
	struct runs *rs = ctx;
	struct core_run *r = NULL;
	enum core_rc rc = mgo_run_from_bson(doc, &r);

	if (rc == CORE_ERR_BAD_REQUEST)
		return CORE_OK; /* a foreign document: it records no run we can judge */
	if (rc != CORE_OK)
		return rc;
	if (rs->n == rs->cap) {
		size_t nc = rs->cap ? 2 * rs->cap : 16;
		struct core_run **nv = realloc(rs->v, nc * sizeof(*nv));

		if (!nv) {
			core_run_free(r);
			return CORE_ERR_NOMEM;
		}
		rs->v = nv;
		rs->cap = nc;
	}
	rs->v[rs->n++] = r;
	return CORE_OK;
}

static const struct core_run *runs_find(const struct runs *rs, const char *id)
{
	size_t i;

	for (i = 0; id && i < rs->n; i++)
		if (strcmp(rs->v[i]->id, id) == 0)
			return rs->v[i];
	return NULL;
}

/* Step 1: the cards behind failed or paused runs in scope. */
static enum core_rc run_arm(struct mgo_conn *c, const char *board, const char *const *boards,
			    struct ids *cards)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, st, arr, proj;
	char ibuf[16];
	const char *ikey;
	uint32_t i;
	enum core_rc rc;

	BSON_APPEND_DOCUMENT_BEGIN(&filter, "status", &st);
	BSON_APPEND_ARRAY_BEGIN(&st, "$in", &arr);
	for (i = 0; i < sizeof(attn_statuses) / sizeof(attn_statuses[0]); i++) {
		bson_uint32_to_string(i, &ikey, ibuf, sizeof(ibuf));
		BSON_APPEND_UTF8(&arr, ikey, attn_statuses[i]);
	}
	bson_append_array_end(&st, &arr);
	bson_append_document_end(&filter, &st);
	mgo_board_filter_append(&filter, board, boards);
	BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
	BSON_APPEND_INT32(&proj, "card_id", 1);
	bson_append_document_end(&opts, &proj);
	rc = mgo_find_each(c->runs, &filter, &opts, run_card_id, cards);
	bson_destroy(&opts);
	bson_destroy(&filter);
	return rc;
}

/* Step 2: the candidate cards. */
static enum core_rc card_arms(struct mgo_conn *c, const char *board, const char *const *boards,
			      const struct ids *run_cards, struct core_card ***v, size_t *n)
{
	bson_t filter = BSON_INITIALIZER, or, el, cmp;
	int k = 0;
	char key[8];
	enum core_rc rc;

	mgo_board_filter_append(&filter, board, boards);
	BSON_APPEND_ARRAY_BEGIN(&filter, "$or", &or);
#define ARM_BEGIN()                                            \
	do {                                                   \
		snprintf(key, sizeof(key), "%d", k++);         \
		BSON_APPEND_DOCUMENT_BEGIN(&or, key, &el);     \
	} while (0)
	ARM_BEGIN();
	/* Every date (a stamp may be before 1970), never a card without one: dates compare
	 * only with dates, and the bound keeps the gave_up index's scan to the dated keys. */
	BSON_APPEND_DOCUMENT_BEGIN(&el, "gave_up.at", &cmp);
	BSON_APPEND_DATE_TIME(&cmp, "$gte", INT64_MIN);
	bson_append_document_end(&el, &cmp);
	bson_append_document_end(&or, &el);
	ARM_BEGIN();
	BSON_APPEND_BOOL(&el, "awaiting_input", true);
	bson_append_document_end(&or, &el);
	ARM_BEGIN();
	BSON_APPEND_DOCUMENT_BEGIN(&el, "claim.marker", &cmp);
	BSON_APPEND_UTF8(&cmp, "$gte", CORE_RECOVERY_PREFIX);
	BSON_APPEND_UTF8(&cmp, "$lt", "reaper;"); /* ';' follows ':' */
	bson_append_document_end(&el, &cmp);
	bson_append_document_end(&or, &el);
	ARM_BEGIN();
	BSON_APPEND_DOCUMENT_BEGIN(&el, "claim.lease_until", &cmp);
	BSON_APPEND_DATE_TIME(&cmp, "$lt", c->now);
	bson_append_document_end(&el, &cmp);
	bson_append_document_end(&or, &el);
	if (run_cards->n) {
		ARM_BEGIN();
		ids_append(&el, "_id", "$in", run_cards);
		bson_append_document_end(&or, &el);
	}
#undef ARM_BEGIN
	bson_append_array_end(&filter, &or);
	rc = mgo_cards_query(c, &filter, NULL, v, n);
	bson_destroy(&filter);
	return rc;
}

enum core_rc mgo_attention_list(struct store *st, const char *board, const char *const *boards,
				size_t limit, struct store_attention **out, size_t *n,
				bool *truncated)
{
	struct mgo *m = mgo_of(st);
	struct mgo_conn c;
	struct ids run_cards = {0}, run_ids = {0}, names = {0};
	struct runs rs = {0};
	struct core_board *cfg = NULL;
	struct core_card **cards = NULL;
	struct store_attention *v = NULL;
	size_t nc = 0, k = 0, i, j;
	bson_t filter = BSON_INITIALIZER;
	enum core_rc rc = mgo_conn_open(m, &c);

	if (rc != CORE_OK)
		return rc;
	if (board && !mgo_board_allowed(board, NULL, boards))
		goto out; /* nothing in scope */
	rc = run_arm(&c, board, boards, &run_cards);
	if (rc == CORE_OK)
		rc = card_arms(&c, board, boards, &run_cards, &cards, &nc);
	/* Step 3: the recorded runs and the boards of the candidates. */
	for (i = 0; rc == CORE_OK && i < nc; i++) {
		if (cards[i]->last_run_id)
			rc = ids_add(&run_ids, cards[i]->last_run_id);
		if (rc == CORE_OK)
			rc = ids_add(&names, cards[i]->board);
	}
	if (rc == CORE_OK && run_ids.n) {
		ids_append(&filter, "_id", "$in", &run_ids);
		rc = mgo_find_each(c.runs, &filter, NULL, run_collect, &rs);
	}
	if (rc == CORE_OK && !(cfg = calloc(names.n + 1, sizeof(*cfg))))
		rc = CORE_ERR_NOMEM;
	for (j = 0; rc == CORE_OK && j < names.n; j++) {
		rc = mgo_board_get(st, names.v[j], &cfg[j]);
		if (rc == CORE_ERR_NOT_FOUND)
			rc = CORE_OK; /* a card of a board without a config: nothing is terminal */
	}
	if (rc == CORE_OK && !(v = calloc(nc + 1, sizeof(*v))))
		rc = CORE_ERR_NOMEM;
	for (i = 0; rc == CORE_OK && i < nc; i++) {
		const struct core_board *b = NULL;
		unsigned reasons;

		for (j = 0; j < names.n && !b; j++)
			if (strcmp(names.v[j], cards[i]->board) == 0 && cfg[j].name)
				b = &cfg[j];
		reasons = core_attention_reasons(cards[i], b && core_board_is_terminal(b, cards[i]->state),
						 runs_find(&rs, cards[i]->last_run_id), c.now);
		if (!reasons)
			continue;
		v[k].card = cards[i];
		v[k++].reasons = reasons;
		cards[i] = NULL;
	}
out:
	mgo_conn_close(&c);
	bson_destroy(&filter);
	for (i = 0; i < nc; i++)
		core_card_free(cards[i]);
	free(cards);
	for (i = 0; i < rs.n; i++)
		core_run_free(rs.v[i]);
	free(rs.v);
	for (j = 0; cfg && j < names.n; j++)
		core_board_release(&cfg[j]);
	free(cfg);
	ids_release(&run_cards);
	ids_release(&run_ids);
	ids_release(&names);
	if (rc == CORE_OK && !v && !(v = calloc(1, sizeof(*v))))
		rc = CORE_ERR_NOMEM;
	if (rc != CORE_OK) {
		store_attention_free(v, k);
		return rc;
	}
	store_attention_finish(v, &k, limit, truncated);
	*out = v;
	*n = k;
	return CORE_OK;
}
