/* The BSON codec of the Mongo twin: cards, runs, boards and events as stored (mongo.h has the
 * shapes), and JSON <-> BSON for event payloads.
 *
 * Writers append to a caller's bson_t and return false on overflow. Readers build fresh
 * objects and either hand them over whole or free everything: nothing stays allocated on
 * failure. A missing optional field and a null one read alike; a missing claim_epoch reads as
 * has_epoch = false (ADR-096 §6: a foreign writer dropped it), never as 0.
 */
#include "store/mongo/mongo_codec.h"

#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

static bool append_str_opt(bson_t *d, const char *key, const char *s)
{
	return s ? BSON_APPEND_UTF8(d, key, s) : BSON_APPEND_NULL(d, key);
}

bool mgo_strv_append(bson_t *doc, const char *key, const struct core_strv *sv)
{
	bson_t arr;
	char ibuf[16];
	const char *ikey;
	size_t i;
	bool ok = BSON_APPEND_ARRAY_BEGIN(doc, key, &arr);

	for (i = 0; ok && i < sv->n; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		ok = BSON_APPEND_UTF8(&arr, ikey, sv->v[i]);
	}
	return bson_append_array_end(doc, &arr) && ok;
}

bool mgo_comment_append(bson_t *arr, const char *key, const struct core_comment *cm)
{
	bson_t d;
	bool ok = BSON_APPEND_DOCUMENT_BEGIN(arr, key, &d);

	ok = ok && BSON_APPEND_UTF8(&d, "id", cm->id) &&
	     BSON_APPEND_UTF8(&d, "author", cm->author ? cm->author : "") &&
	     BSON_APPEND_UTF8(&d, "body", cm->body ? cm->body : "") &&
	     BSON_APPEND_DATE_TIME(&d, "created_at", cm->created_at);
	return bson_append_document_end(arr, &d) && ok;
}

bool mgo_claim_append(bson_t *doc, const char *key, const struct core_claim *cl)
{
	bson_t d;
	bool ok = BSON_APPEND_DOCUMENT_BEGIN(doc, key, &d);

	ok = ok && BSON_APPEND_UTF8(&d, "marker", cl->marker) &&
	     BSON_APPEND_DATE_TIME(&d, "claimed_at", cl->claimed_at);
	if (ok && cl->holder)
		ok = BSON_APPEND_UTF8(&d, "holder", cl->holder);
	/* DESIGN §17: the column it was taken from; absent on older claims. */
	if (ok && cl->from)
		ok = BSON_APPEND_UTF8(&d, "from", cl->from);
	/* A claim without a lease is written without the lease fields, as a stripped one
	 * reads: the absence is what the un-leased arm selects. */
	if (ok && cl->has_lease)
		ok = BSON_APPEND_DATE_TIME(&d, "lease_until", cl->lease_until) &&
		     BSON_APPEND_INT64(&d, "lease_ms", cl->lease_ms);
	return bson_append_document_end(doc, &d) && ok;
}

bool mgo_gave_up_append(bson_t *doc, const char *key, const struct core_gave_up *g)
{
	bson_t d;
	bool ok = BSON_APPEND_DOCUMENT_BEGIN(doc, key, &d);

	ok = ok && BSON_APPEND_UTF8(&d, "reason", g->reason ? g->reason : "") &&
	     append_str_opt(&d, "run_id", g->run_id) && append_str_opt(&d, "state", g->state) &&
	     BSON_APPEND_DATE_TIME(&d, "at", g->at);
	return bson_append_document_end(doc, &d) && ok;
}

bool mgo_card_to_bson(const struct core_card *c, int64_t ord, bson_t *doc)
{
	bson_t arr;
	char ibuf[16];
	const char *ikey;
	size_t i;
	bool ok;

	ok = BSON_APPEND_UTF8(doc, "_id", c->id) && BSON_APPEND_INT64(doc, "ord", ord) &&
	     BSON_APPEND_UTF8(doc, "board", c->board) && BSON_APPEND_UTF8(doc, "title", c->title) &&
	     BSON_APPEND_UTF8(doc, "body", c->body) && BSON_APPEND_UTF8(doc, "state", c->state) &&
	     BSON_APPEND_INT32(doc, "priority", c->priority) &&
	     mgo_strv_append(doc, "labels", &c->labels) &&
	     mgo_strv_append(doc, "blockers", &c->blockers);
	ok = ok && BSON_APPEND_ARRAY_BEGIN(doc, "comments", &arr);
	for (i = 0; ok && i < c->n_comments; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		ok = mgo_comment_append(&arr, ikey, &c->comments[i]);
	}
	ok = ok && bson_append_array_end(doc, &arr);
	if (ok && c->claim.present)
		ok = mgo_claim_append(doc, "claim", &c->claim);
	if (ok && c->has_epoch)
		ok = BSON_APPEND_INT64(doc, "claim_epoch", c->claim_epoch);
	if (ok && c->last_run_id)
		ok = BSON_APPEND_UTF8(doc, "last_run_id", c->last_run_id);
	ok = ok && BSON_APPEND_BOOL(doc, "awaiting_input", c->awaiting_input);
	if (ok && c->gave_up.set)
		ok = mgo_gave_up_append(doc, "gave_up", &c->gave_up);
	if (ok && c->state_reason)
		ok = BSON_APPEND_UTF8(doc, "state_reason", c->state_reason);
	/* DESIGN §17: absent = no schedule, no attempts (documents of earlier versions). */
	if (ok && c->not_before)
		ok = BSON_APPEND_DATE_TIME(doc, "not_before", c->not_before);
	if (ok && c->attempts)
		ok = BSON_APPEND_INT32(doc, "attempts", c->attempts);
	return ok && BSON_APPEND_DATE_TIME(doc, "created_at", c->created_at) &&
	       BSON_APPEND_DATE_TIME(doc, "updated_at", c->updated_at) &&
	       BSON_APPEND_DATE_TIME(doc, "state_at", c->state_at);
}

bool mgo_run_to_bson(const struct core_run *r, bson_t *doc)
{
	return BSON_APPEND_UTF8(doc, "_id", r->id) && BSON_APPEND_UTF8(doc, "card_id", r->card_id) &&
	       BSON_APPEND_UTF8(doc, "board", r->board ? r->board : "") &&
	       BSON_APPEND_UTF8(doc, "status", r->status) &&
	       append_str_opt(doc, "continuation", r->continuation) &&
	       append_str_opt(doc, "failure_code", r->failure_code) &&
	       BSON_APPEND_UTF8(doc, "owner", r->owner ? r->owner : "") &&
	       append_str_opt(doc, "result_json", r->result) &&
	       append_str_opt(doc, "error", r->error) &&
	       append_str_opt(doc, "output", r->output) &&
	       BSON_APPEND_INT64(doc, "claim_epoch", r->claim_epoch) &&
	       BSON_APPEND_DATE_TIME(doc, "lock_until", r->lock_until) &&
	       BSON_APPEND_INT64(doc, "lease_ms", r->lease_ms) &&
	       BSON_APPEND_DATE_TIME(doc, "created_at", r->created_at) &&
	       BSON_APPEND_DATE_TIME(doc, "updated_at", r->updated_at) &&
	       BSON_APPEND_BOOL(doc, "pruned", r->pruned);
}

bool mgo_board_to_bson(const struct core_board *b, bson_t *doc)
{
	bson_t arr, col;
	char ibuf[16];
	const char *ikey;
	size_t i;
	bool ok = BSON_APPEND_UTF8(doc, "_id", b->name) && BSON_APPEND_ARRAY_BEGIN(doc, "cols", &arr);

	for (i = 0; ok && i < b->n_cols; i++) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		ok = BSON_APPEND_DOCUMENT_BEGIN(&arr, ikey, &col) &&
		     BSON_APPEND_UTF8(&col, "name", b->cols[i].name) &&
		     BSON_APPEND_BOOL(&col, "terminal", b->cols[i].terminal) &&
		     BSON_APPEND_BOOL(&col, "eligible", b->cols[i].eligible) &&
		     (b->cols[i].limit <= 0 || BSON_APPEND_INT32(&col, "limit", b->cols[i].limit)) &&
		     bson_append_document_end(&arr, &col);
	}
	ok = ok && bson_append_array_end(doc, &arr);
	/* DESIGN §17: absent = no limit, the default retry policy. */
	if (ok && b->max_claims > 0)
		ok = BSON_APPEND_INT32(doc, "max_claims", b->max_claims);
	if (ok && b->has_retry) {
		bson_t r;

		ok = BSON_APPEND_DOCUMENT_BEGIN(doc, "retry", &r) &&
		     BSON_APPEND_INT32(&r, "max_attempts", b->retry.max_attempts) &&
		     BSON_APPEND_INT64(&r, "backoff_ms", b->retry.backoff_ms) &&
		     BSON_APPEND_INT64(&r, "max_backoff_ms", b->retry.max_backoff_ms) &&
		     bson_append_document_end(doc, &r);
	}
	return ok && append_str_opt(doc, "running", b->running) &&
	       append_str_opt(doc, "completed", b->completed) &&
	       append_str_opt(doc, "failed", b->failed) && append_str_opt(doc, "waiting", b->waiting);
}

/* ---- JSON <-> BSON (event payloads) ---- */

static bool json_value_append(bson_t *d, const char *key, const json_t *v);

static bool json_children_append(bson_t *d, const json_t *v)
{
	const char *k;
	json_t *x;
	char ibuf[16];
	const char *ikey;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x)
			if (!json_value_append(d, k, x))
				return false;
		return true;
	}
	json_array_foreach(v, i, x) {
		bson_uint32_to_string((uint32_t)i, &ikey, ibuf, sizeof(ibuf));
		if (!json_value_append(d, ikey, x))
			return false;
	}
	return true;
}

static bool json_value_append(bson_t *d, const char *key, const json_t *v)
{
	bson_t child;
	bool ok;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
	case JSON_ARRAY:
		ok = json_is_object(v) ? BSON_APPEND_DOCUMENT_BEGIN(d, key, &child)
				       : BSON_APPEND_ARRAY_BEGIN(d, key, &child);
		if (!ok)
			return false;
		ok = json_children_append(&child, v);
		return (json_is_object(v) ? bson_append_document_end(d, &child)
					  : bson_append_array_end(d, &child)) &&
		       ok;
	case JSON_STRING:
		return bson_append_utf8(d, key, -1, json_string_value(v),
					(int)json_string_length(v));
	case JSON_INTEGER:
		return BSON_APPEND_INT64(d, key, (int64_t)json_integer_value(v));
	case JSON_REAL:
		return BSON_APPEND_DOUBLE(d, key, json_real_value(v));
	case JSON_TRUE:
	case JSON_FALSE:
		return BSON_APPEND_BOOL(d, key, json_is_true(v));
	case JSON_NULL:
		return BSON_APPEND_NULL(d, key);
	}
	return false;
}

bool mgo_json_append(bson_t *doc, const char *key, const json_t *o)
{
	return json_value_append(doc, key, o);
}

static json_t *iter_to_json(bson_iter_t *it);

static json_t *children_to_json(bson_iter_t *it, bool array)
{
	bson_iter_t ch;
	json_t *o = array ? json_array() : json_object(), *v;

	if (!o || !bson_iter_recurse(it, &ch)) {
		json_decref(o);
		return NULL;
	}
	while (bson_iter_next(&ch)) {
		v = iter_to_json(&ch);
		if (!v || (array ? json_array_append_new(o, v)
				 : json_object_set_new(o, bson_iter_key(&ch), v))) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static json_t *iter_to_json(bson_iter_t *it)
{
	uint32_t len;
	const char *s;

	switch (bson_iter_type(it)) {
	case BSON_TYPE_DOCUMENT:
		return children_to_json(it, false);
	case BSON_TYPE_ARRAY:
		return children_to_json(it, true);
	case BSON_TYPE_UTF8:
		s = bson_iter_utf8(it, &len);
		return json_stringn(s, len);
	case BSON_TYPE_INT32:
		return json_integer(bson_iter_int32(it));
	case BSON_TYPE_INT64:
		return json_integer((json_int_t)bson_iter_int64(it));
	case BSON_TYPE_DOUBLE:
		return json_real(bson_iter_double(it));
	case BSON_TYPE_BOOL:
		return json_boolean(bson_iter_bool(it));
	case BSON_TYPE_DATE_TIME:
		return json_integer((json_int_t)bson_iter_date_time(it));
	default:
		return json_null();
	}
}

json_t *mgo_bson_to_json(const bson_t *doc)
{
	json_t *o = json_object(), *v;
	bson_iter_t it;

	if (!o || !bson_iter_init(&it, doc)) {
		json_decref(o);
		return NULL;
	}
	while (bson_iter_next(&it)) {
		v = iter_to_json(&it);
		if (!v || json_object_set_new(o, bson_iter_key(&it), v)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* ---- reading ---- */

bool mgo_iter_i64(const bson_iter_t *it, int64_t *v)
{
	switch (bson_iter_type(it)) {
	case BSON_TYPE_INT64:
		*v = bson_iter_int64(it);
		return true;
	case BSON_TYPE_INT32:
		*v = bson_iter_int32(it);
		return true;
	case BSON_TYPE_DOUBLE:
		*v = (int64_t)bson_iter_double(it);
		return true;
	case BSON_TYPE_DATE_TIME:
		*v = bson_iter_date_time(it);
		return true;
	default:
		return false;
	}
}

/* A reader's cursor over one document: missing fields are looked up by key. */
struct rd {
	const bson_t *doc;
	bool ok;    /* no allocation failed */
	bool shape; /* no required field was missing or mistyped */
};

static bool rd_find(const bson_t *doc, const char *key, bson_iter_t *it)
{
	return bson_iter_init_find(it, doc, key) && !BSON_ITER_HOLDS_NULL(it);
}

/* A copy of string `key`; NULL when absent/null (and shape broken if required). */
static char *rd_str(struct rd *r, const char *key, bool required)
{
	bson_iter_t it;
	char *s;

	if (!rd_find(r->doc, key, &it) || !BSON_ITER_HOLDS_UTF8(&it)) {
		if (required)
			r->shape = false;
		return NULL;
	}
	s = strdup(bson_iter_utf8(&it, NULL));
	if (!s)
		r->ok = false;
	return s;
}

static int64_t rd_i64(struct rd *r, const char *key, bool required, bool *present)
{
	bson_iter_t it;
	int64_t v = 0;
	bool have = rd_find(r->doc, key, &it) && mgo_iter_i64(&it, &v);

	if (!have && required)
		r->shape = false;
	if (present)
		*present = have;
	return v;
}

static bool rd_bool(struct rd *r, const char *key)
{
	bson_iter_t it;

	return rd_find(r->doc, key, &it) && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

/* Subdocument `key` into *sub (borrowed view); false when absent/null. */
static bool rd_sub(const bson_t *doc, const char *key, bson_t *sub, bool array)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	if (!rd_find(doc, key, &it) ||
	    (array ? !BSON_ITER_HOLDS_ARRAY(&it) : !BSON_ITER_HOLDS_DOCUMENT(&it)))
		return false;
	if (array)
		bson_iter_array(&it, &len, &data);
	else
		bson_iter_document(&it, &len, &data);
	return bson_init_static(sub, data, len);
}

static void rd_strv(struct rd *r, const char *key, struct core_strv *sv)
{
	bson_iter_t it;
	bson_t arr;

	if (!rd_sub(r->doc, key, &arr, true) || !bson_iter_init(&it, &arr))
		return;
	while (r->ok && bson_iter_next(&it))
		if (BSON_ITER_HOLDS_UTF8(&it) &&
		    core_strv_push(sv, bson_iter_utf8(&it, NULL)) != CORE_OK)
			r->ok = false;
}

static void rd_comments(struct rd *r, struct core_card *c)
{
	bson_iter_t it;
	bson_t arr, d;
	struct rd sub;
	uint32_t n;

	if (!rd_sub(r->doc, "comments", &arr, true))
		return;
	n = bson_count_keys(&arr);
	if (!n || !bson_iter_init(&it, &arr))
		return;
	c->comments = calloc(n, sizeof(*c->comments));
	if (!c->comments) {
		r->ok = false;
		return;
	}
	while (r->ok && c->n_comments < n && bson_iter_next(&it)) {
		struct core_comment *cm = &c->comments[c->n_comments];
		const uint8_t *data;
		uint32_t len;

		if (!BSON_ITER_HOLDS_DOCUMENT(&it))
			continue;
		bson_iter_document(&it, &len, &data);
		bson_init_static(&d, data, len);
		sub = (struct rd){.doc = &d, .ok = true, .shape = true};
		c->n_comments++;
		cm->id = rd_str(&sub, "id", true);
		cm->author = rd_str(&sub, "author", false);
		cm->body = rd_str(&sub, "body", false);
		cm->created_at = rd_i64(&sub, "created_at", false, NULL);
		r->ok = r->ok && sub.ok;
		r->shape = r->shape && sub.shape;
	}
}

static void rd_claim(struct rd *r, struct core_card *c)
{
	bson_t d;
	struct rd sub;
	bool lease;

	if (!rd_sub(r->doc, "claim", &d, false))
		return;
	sub = (struct rd){.doc = &d, .ok = true, .shape = true};
	c->claim.marker = rd_str(&sub, "marker", false);
	if (!c->claim.marker) {
		/* A claim object without a marker holds nothing. */
		r->ok = r->ok && sub.ok;
		return;
	}
	c->claim.present = true;
	c->claim.holder = rd_str(&sub, "holder", false);
	c->claim.from = rd_str(&sub, "from", false); /* DESIGN §17; absent on older claims */
	c->claim.claimed_at = rd_i64(&sub, "claimed_at", false, NULL);
	c->claim.lease_until = rd_i64(&sub, "lease_until", false, &lease);
	c->claim.has_lease = lease;
	c->claim.lease_ms = rd_i64(&sub, "lease_ms", false, NULL);
	r->ok = r->ok && sub.ok;
}

static void rd_gave_up(struct rd *r, struct core_gave_up *g)
{
	bson_t d;
	struct rd sub;

	if (!rd_sub(r->doc, "gave_up", &d, false))
		return;
	sub = (struct rd){.doc = &d, .ok = true, .shape = true};
	g->set = true;
	g->reason = rd_str(&sub, "reason", false);
	g->run_id = rd_str(&sub, "run_id", false);
	g->state = rd_str(&sub, "state", false);
	g->at = rd_i64(&sub, "at", false, NULL);
	if (!g->reason && sub.ok)
		g->reason = strdup("");
	r->ok = r->ok && sub.ok && g->reason;
}

enum core_rc mgo_card_from_bson(const bson_t *doc, struct core_card **out)
{
	struct rd r = {.doc = doc, .ok = true, .shape = true};
	struct core_card *c = core_card_new();
	bool epoch;

	*out = NULL;
	if (!c)
		return CORE_ERR_NOMEM;
	c->id = rd_str(&r, "_id", true);
	c->board = rd_str(&r, "board", true);
	c->state = rd_str(&r, "state", true);
	c->title = rd_str(&r, "title", false);
	c->body = rd_str(&r, "body", false);
	if (r.ok && !c->title)
		r.ok = (c->title = strdup("")) != NULL;
	if (r.ok && !c->body)
		r.ok = (c->body = strdup("")) != NULL;
	c->priority = (int32_t)rd_i64(&r, "priority", false, NULL);
	rd_strv(&r, "labels", &c->labels);
	rd_strv(&r, "blockers", &c->blockers);
	rd_comments(&r, c);
	rd_claim(&r, c);
	c->claim_epoch = rd_i64(&r, "claim_epoch", false, &epoch);
	c->has_epoch = epoch;
	c->last_run_id = rd_str(&r, "last_run_id", false);
	c->awaiting_input = rd_bool(&r, "awaiting_input");
	rd_gave_up(&r, &c->gave_up);
	c->state_reason = rd_str(&r, "state_reason", false);
	c->created_at = rd_i64(&r, "created_at", false, NULL);
	c->updated_at = rd_i64(&r, "updated_at", false, NULL);
	c->state_at = rd_i64(&r, "state_at", false, NULL);
	c->not_before = rd_i64(&r, "not_before", false, NULL);
	c->attempts = (int32_t)rd_i64(&r, "attempts", false, NULL);
	if (c->attempts < 0)
		c->attempts = 0;
	if (!r.ok || !r.shape) {
		core_card_free(c);
		return r.ok ? CORE_ERR_BAD_REQUEST : CORE_ERR_NOMEM;
	}
	*out = c;
	return CORE_OK;
}

enum core_rc mgo_run_from_bson(const bson_t *doc, struct core_run **out)
{
	struct rd r = {.doc = doc, .ok = true, .shape = true};
	struct core_run *run = core_run_new();

	*out = NULL;
	if (!run)
		return CORE_ERR_NOMEM;
	run->id = rd_str(&r, "_id", true);
	run->card_id = rd_str(&r, "card_id", true);
	run->board = rd_str(&r, "board", false);
	run->status = rd_str(&r, "status", true);
	run->continuation = rd_str(&r, "continuation", false);
	run->failure_code = rd_str(&r, "failure_code", false);
	run->owner = rd_str(&r, "owner", false);
	run->result = rd_str(&r, "result_json", false);
	run->error = rd_str(&r, "error", false);
	run->output = rd_str(&r, "output", false);
	run->claim_epoch = rd_i64(&r, "claim_epoch", false, NULL);
	run->lock_until = rd_i64(&r, "lock_until", false, NULL);
	run->lease_ms = rd_i64(&r, "lease_ms", false, NULL);
	run->created_at = rd_i64(&r, "created_at", false, NULL);
	run->updated_at = rd_i64(&r, "updated_at", false, NULL);
	run->pruned = rd_bool(&r, "pruned");
	if (!r.ok || !r.shape) {
		core_run_free(run);
		return r.ok ? CORE_ERR_BAD_REQUEST : CORE_ERR_NOMEM;
	}
	*out = run;
	return CORE_OK;
}

enum core_rc mgo_board_from_bson(const bson_t *doc, struct core_board *out)
{
	struct rd r = {.doc = doc, .ok = true, .shape = true}, sub;
	struct core_board b = {0};
	bson_iter_t it;
	bson_t arr, d;
	uint32_t n = 0;

	memset(out, 0, sizeof(*out));
	b.name = rd_str(&r, "_id", true);
	b.running = rd_str(&r, "running", false);
	b.completed = rd_str(&r, "completed", false);
	b.failed = rd_str(&r, "failed", false);
	b.waiting = rd_str(&r, "waiting", false);
	if (!rd_sub(doc, "cols", &arr, true) || !(n = bson_count_keys(&arr)) ||
	    !bson_iter_init(&it, &arr))
		r.shape = false;
	else if (!(b.cols = calloc(n, sizeof(*b.cols))))
		r.ok = false;
	while (r.ok && r.shape && b.n_cols < n && bson_iter_next(&it)) {
		const uint8_t *data;
		uint32_t len;

		if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
			r.shape = false;
			break;
		}
		bson_iter_document(&it, &len, &data);
		bson_init_static(&d, data, len);
		sub = (struct rd){.doc = &d, .ok = true, .shape = true};
		b.cols[b.n_cols].name = rd_str(&sub, "name", true);
		b.cols[b.n_cols].terminal = rd_bool(&sub, "terminal");
		b.cols[b.n_cols].eligible = rd_bool(&sub, "eligible");
		b.cols[b.n_cols].limit = (int32_t)rd_i64(&sub, "limit", false, NULL);
		b.n_cols++;
		r.ok = sub.ok;
		r.shape = sub.shape;
	}
	b.max_claims = (int32_t)rd_i64(&r, "max_claims", false, NULL);
	if (r.ok && r.shape && rd_sub(doc, "retry", &d, false)) {
		sub = (struct rd){.doc = &d, .ok = true, .shape = true};
		b.has_retry = true;
		b.retry.max_attempts = (int32_t)rd_i64(&sub, "max_attempts", true, NULL);
		b.retry.backoff_ms = rd_i64(&sub, "backoff_ms", true, NULL);
		b.retry.max_backoff_ms = rd_i64(&sub, "max_backoff_ms", true, NULL);
		r.shape = sub.shape;
	}
	if (!r.ok || !r.shape) {
		core_board_release(&b);
		return r.ok ? CORE_ERR_BAD_REQUEST : CORE_ERR_NOMEM;
	}
	*out = b;
	return CORE_OK;
}

enum core_rc mgo_event_from_bson(const bson_t *doc, struct core_event *out)
{
	struct rd r = {.doc = doc, .ok = true, .shape = true};
	struct core_event e = {0};
	json_t *payload = NULL;
	char *type;
	bson_t sub;
	int t;

	memset(out, 0, sizeof(*out));
	e.seq = rd_i64(&r, "seq", true, NULL);
	e.board_seq = rd_i64(&r, "board_seq", false, NULL); /* 0 until numbered (mgo_bseq_migrate) */
	e.at = rd_i64(&r, "at", false, NULL);
	e.board = rd_str(&r, "board", true);
	e.card_id = rd_str(&r, "card_id", false);
	e.actor = rd_str(&r, "actor", false);
	e.reason = rd_str(&r, "reason", false);
	e.machine = rd_bool(&r, "machine");
	type = rd_str(&r, "type", true);
	t = core_event_type_parse(type);
	free(type);
	if (t < 0)
		r.shape = false;
	e.type = t < 0 ? CORE_EV_CARD_UPDATED : (enum core_event_type)t;
	if (r.ok && !e.actor)
		r.ok = (e.actor = strdup("")) != NULL;
	payload = rd_sub(doc, "payload", &sub, false) ? mgo_bson_to_json(&sub) : json_object();
	if (!payload || !(e.payload = json_dumps(payload, JSON_COMPACT)))
		r.ok = false;
	json_decref(payload);
	if (!r.ok || !r.shape) {
		core_event_release(&e);
		return r.ok ? CORE_ERR_BAD_REQUEST : CORE_ERR_NOMEM;
	}
	*out = e;
	return CORE_OK;
}
