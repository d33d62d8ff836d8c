/* The JSON codec: the served shapes of DESIGN §2/§5/§7 as jansson trees, and back (the FS
 * journal and snapshot reuse it). The same shapes written as text without a tree are
 * json_text.c's.
 *
 * _to_json builds a new reference. _from_json reads a borrowed json_t into fresh objects and
 * either hands them over whole or frees everything it built: on failure nothing stays
 * allocated and the OUT parameter is NULL/zeroed. Every field is required (nullable ones as
 * explicit null), so a truncated document is refused instead of half-read.
 */
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

/* New reference to a time string; NULL on OOM. */
static json_t *time_json(int64_t ms)
{
	char buf[CORE_TIME_BUF];

	return json_string(core_time_format(ms, buf));
}

json_t *store_json_str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *store_json_strv(const struct core_strv *sv)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && i < sv->n; i++) {
		if (json_array_append_new(a, json_string(sv->v[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

void store_json_put(json_t *o, const char *key, json_t *v, bool *ok)
{
	if (!v || json_object_set_new(o, key, v) != 0)
		*ok = false;
}

static json_t *comments_json(const struct core_card *c)
{
	json_t *a = json_array();
	size_t i;
	bool ok = a != NULL;

	for (i = 0; ok && i < c->n_comments; i++) {
		const struct core_comment *cm = &c->comments[i];
		json_t *o = json_object();

		if (!o) {
			ok = false;
			break;
		}
		store_json_put(o, "id", json_string(cm->id ? cm->id : ""), &ok);
		store_json_put(o, "author", json_string(cm->author ? cm->author : ""), &ok);
		store_json_put(o, "body", json_string(cm->body ? cm->body : ""), &ok);
		store_json_put(o, "created_at", time_json(cm->created_at), &ok);
		if (json_array_append_new(a, o) != 0)
			ok = false;
	}
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *claim_json(const struct core_card *c)
{
	json_t *o;
	bool ok = true;

	if (!c->claim.present)
		return json_null();
	o = json_object();
	if (!o)
		return NULL;
	store_json_put(o, "marker", json_string(c->claim.marker ? c->claim.marker : ""), &ok);
	store_json_put(o, "holder", store_json_str_or_null(c->claim.holder), &ok);
	store_json_put(o, "epoch", c->has_epoch ? json_integer(c->claim_epoch) : json_null(), &ok);
	store_json_put(o, "claimed_at", time_json(c->claim.claimed_at), &ok);
	/* A legacy or stripped claim has no lease: say so rather than invent one. */
	store_json_put(o, "lease_until",
		       c->claim.has_lease ? time_json(c->claim.lease_until) : json_null(), &ok);
	store_json_put(o, "lease_ms",
		       c->claim.has_lease ? json_integer(c->claim.lease_ms) : json_null(), &ok);
	store_json_put(o, "from", store_json_str_or_null(c->claim.from), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *store_gave_up_to_json(const struct core_gave_up *g)
{
	json_t *o;
	bool ok = true;

	if (!g->set)
		return json_null();
	o = json_object();
	if (!o)
		return NULL;
	store_json_put(o, "reason", json_string(g->reason ? g->reason : ""), &ok);
	store_json_put(o, "run_id", store_json_str_or_null(g->run_id), &ok);
	store_json_put(o, "state", store_json_str_or_null(g->state), &ok);
	store_json_put(o, "at", time_json(g->at), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *store_card_to_json(const struct core_card *c)
{
	json_t *o;
	bool ok = true;

	if (!c || !(o = json_object()))
		return NULL;
	store_json_put(o, "id", json_string(c->id ? c->id : ""), &ok);
	store_json_put(o, "board", json_string(c->board ? c->board : ""), &ok);
	store_json_put(o, "title", json_string(c->title ? c->title : ""), &ok);
	store_json_put(o, "body", json_string(c->body ? c->body : ""), &ok);
	store_json_put(o, "state", json_string(c->state ? c->state : ""), &ok);
	store_json_put(o, "priority", json_integer(c->priority), &ok);
	store_json_put(o, "labels", store_json_strv(&c->labels), &ok);
	store_json_put(o, "blockers", store_json_strv(&c->blockers), &ok);
	store_json_put(o, "comments", comments_json(c), &ok);
	store_json_put(o, "claim", claim_json(c), &ok);
	store_json_put(o, "claim_epoch", c->has_epoch ? json_integer(c->claim_epoch) : json_null(),
		       &ok);
	store_json_put(o, "last_run_id", store_json_str_or_null(c->last_run_id), &ok);
	store_json_put(o, "awaiting_input", json_boolean(c->awaiting_input), &ok);
	store_json_put(o, "gave_up", store_gave_up_to_json(&c->gave_up), &ok);
	store_json_put(o, "state_reason", store_json_str_or_null(c->state_reason), &ok);
	store_json_put(o, "created_at", time_json(c->created_at), &ok);
	store_json_put(o, "updated_at", time_json(c->updated_at), &ok);
	store_json_put(o, "state_at", time_json(c->state_at), &ok);
	store_json_put(o, "not_before", c->not_before ? time_json(c->not_before) : json_null(),
		       &ok);
	store_json_put(o, "attempts", json_integer(c->attempts), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}


json_t *store_board_to_json(const struct core_board *b)
{
	json_t *o, *cols;
	size_t i;
	bool ok = true;

	if (!b || !(o = json_object()))
		return NULL;
	store_json_put(o, "name", json_string(b->name ? b->name : ""), &ok);
	cols = json_array();
	for (i = 0; ok && cols && i < b->n_cols; i++) {
		json_t *col = json_object();

		if (!col) {
			ok = false;
			break;
		}
		store_json_put(col, "name", json_string(b->cols[i].name ? b->cols[i].name : ""),
			       &ok);
		store_json_put(col, "terminal", json_boolean(b->cols[i].terminal), &ok);
		store_json_put(col, "eligible", json_boolean(b->cols[i].eligible), &ok);
		if (b->cols[i].limit > 0) /* absent: no limit (DESIGN §17) */
			store_json_put(col, "limit", json_integer(b->cols[i].limit), &ok);
		if (json_array_append_new(cols, col) != 0)
			ok = false;
	}
	store_json_put(o, "columns", cols, &ok);
	store_json_put(o, "running", store_json_str_or_null(b->running), &ok);
	store_json_put(o, "completed", store_json_str_or_null(b->completed), &ok);
	store_json_put(o, "failed", store_json_str_or_null(b->failed), &ok);
	store_json_put(o, "waiting", store_json_str_or_null(b->waiting), &ok);
	if (b->max_claims > 0)
		store_json_put(o, "max_claims", json_integer(b->max_claims), &ok);
	if (b->has_retry) {
		json_t *r = json_object();

		if (!r)
			ok = false;
		else {
			store_json_put(r, "max_attempts", json_integer(b->retry.max_attempts), &ok);
			store_json_put(r, "backoff_ms", json_integer(b->retry.backoff_ms), &ok);
			store_json_put(r, "max_backoff_ms", json_integer(b->retry.max_backoff_ms),
				       &ok);
		}
		store_json_put(o, "retry", r, &ok);
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* A run's result is stored as JSON text; served as the value it holds (null when none). */
static json_t *run_result_json(const char *text)
{
	if (!text)
		return json_null();
	return json_loads(text, JSON_DECODE_ANY, NULL);
}

json_t *store_run_to_json(const struct core_run *r)
{
	json_t *o;
	bool ok = true;

	if (!r || !(o = json_object()))
		return NULL;
	store_json_put(o, "id", json_string(r->id ? r->id : ""), &ok);
	store_json_put(o, "card_id", json_string(r->card_id ? r->card_id : ""), &ok);
	store_json_put(o, "board", json_string(r->board ? r->board : ""), &ok);
	store_json_put(o, "status", json_string(r->status ? r->status : ""), &ok);
	store_json_put(o, "continuation", store_json_str_or_null(r->continuation), &ok);
	store_json_put(o, "failure_code", store_json_str_or_null(r->failure_code), &ok);
	store_json_put(o, "owner", store_json_str_or_null(r->owner), &ok);
	store_json_put(o, "result", run_result_json(r->result), &ok);
	store_json_put(o, "error", store_json_str_or_null(r->error), &ok);
	store_json_put(o, "output", store_json_str_or_null(r->output), &ok);
	store_json_put(o, "claim_epoch", json_integer(r->claim_epoch), &ok);
	store_json_put(o, "lock_until", time_json(r->lock_until), &ok);
	store_json_put(o, "lease_ms", json_integer(r->lease_ms), &ok);
	store_json_put(o, "created_at", time_json(r->created_at), &ok);
	store_json_put(o, "updated_at", time_json(r->updated_at), &ok);
	if (r->pruned)
		store_json_put(o, "pruned", json_true(), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *store_event_to_json(const struct core_event *e)
{
	return store_event_to_json_as(e, false);
}

json_t *store_event_to_json_as(const struct core_event *e, bool board_view)
{
	json_t *o, *payload = NULL;
	bool ok = true;

	if (!e || !(o = json_object()))
		return NULL;
	if (e->payload)
		payload = json_loads(e->payload, JSON_DECODE_ANY, NULL);
	/* The payload is built by the stores; a non-object would break clients, so it is
	 * served as {} rather than passed through. */
	if (!json_is_object(payload)) {
		json_decref(payload);
		payload = json_object();
	}
	store_json_put(o, "seq", json_integer(board_view ? e->board_seq : e->seq), &ok);
	store_json_put(o, "board_seq", json_integer(e->board_seq), &ok);
	store_json_put(o, "at", time_json(e->at), &ok);
	store_json_put(o, "board", json_string(e->board ? e->board : ""), &ok);
	store_json_put(o, "type", json_string(core_event_type_name(e->type)), &ok);
	store_json_put(o, "card_id", store_json_str_or_null(e->card_id), &ok);
	store_json_put(o, "actor", json_string(e->actor ? e->actor : ""), &ok);
	store_json_put(o, "reason", store_json_str_or_null(e->reason), &ok);
	store_json_put(o, "machine", json_boolean(e->machine), &ok);
	store_json_put(o, "payload", payload, &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- reading ----
 * The readers below fill a struct that the caller releases on failure; each returns false on
 * a missing field, a wrong type or OOM (the codec does not tell these apart: the input is
 * refused either way, and OOM on a small document is not worth a separate code path). */

static bool get_str(const json_t *o, const char *key, char **dst)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_string(v))
		return false;
	return core_str_set(dst, json_string_value(v)) == CORE_OK;
}

/* A string or explicit null. */
static bool get_str_opt(const json_t *o, const char *key, char **dst)
{
	const json_t *v = json_object_get(o, key);

	if (json_is_null(v))
		return core_str_set(dst, NULL) == CORE_OK;
	return get_str(o, key, dst);
}

static bool get_int(const json_t *o, const char *key, int64_t *dst)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		return false;
	*dst = (int64_t)json_integer_value(v);
	return true;
}

static bool get_bool(const json_t *o, const char *key, bool *dst)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_boolean(v))
		return false;
	*dst = json_is_true(v);
	return true;
}

static bool get_time(const json_t *o, const char *key, int64_t *dst)
{
	const json_t *v = json_object_get(o, key);

	return json_is_string(v) && core_time_parse(json_string_value(v), dst);
}

bool store_json_get_strv(const json_t *o, const char *key, bool opt, struct core_strv *dst)
{
	const json_t *a = json_object_get(o, key), *v;
	size_t i;

	if (!a)
		return opt;
	if (!json_is_array(a))
		return false;
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v) || core_strv_push(dst, json_string_value(v)) != CORE_OK)
			return false;
	}
	return true;
}

static bool get_comments(const json_t *o, struct core_card *c)
{
	const json_t *a = json_object_get(o, "comments"), *v;
	size_t i;

	if (!json_is_array(a))
		return false;
	if (json_array_size(a) == 0)
		return true;
	c->comments = calloc(json_array_size(a), sizeof(*c->comments));
	if (!c->comments)
		return false;
	json_array_foreach(a, i, v)
	{
		struct core_comment *cm = &c->comments[i];

		/* Counted before filling so a half-read comment is still released. */
		c->n_comments++;
		if (!json_is_object(v) || !get_str(v, "id", &cm->id) ||
		    !get_str(v, "author", &cm->author) || !get_str(v, "body", &cm->body) ||
		    !get_time(v, "created_at", &cm->created_at))
			return false;
	}
	return true;
}

static bool get_claim(const json_t *o, struct core_card *c)
{
	const json_t *cl = json_object_get(o, "claim");

	if (json_is_null(cl))
		return true;
	if (!json_is_object(cl))
		return false;
	c->claim.present = true;
	if (!get_str(cl, "marker", &c->claim.marker) ||
	    !get_time(cl, "claimed_at", &c->claim.claimed_at))
		return false;
	/* Written since the claim is bound to its token; absent in older journals. */
	if (json_object_get(cl, "holder") && !get_str_opt(cl, "holder", &c->claim.holder))
		return false;
	/* Written since DESIGN §17; absent in older journals (the claim counts against no
	 * column's limit). */
	if (json_object_get(cl, "from") && !get_str_opt(cl, "from", &c->claim.from))
		return false;
	if (json_is_null(json_object_get(cl, "lease_until")))
		return json_is_null(json_object_get(cl, "lease_ms"));
	c->claim.has_lease = true;
	return get_time(cl, "lease_until", &c->claim.lease_until) &&
	       get_int(cl, "lease_ms", &c->claim.lease_ms);
}

static bool get_gave_up(const json_t *o, struct core_gave_up *g)
{
	const json_t *v = json_object_get(o, "gave_up");

	if (json_is_null(v))
		return true;
	if (!json_is_object(v))
		return false;
	g->set = true;
	return get_str(v, "reason", &g->reason) && get_str_opt(v, "run_id", &g->run_id) &&
	       get_str_opt(v, "state", &g->state) && get_time(v, "at", &g->at);
}

static bool get_policy_fields(const json_t *j, struct core_card *c)
{
	const json_t *nb = json_object_get(j, "not_before"), *at = json_object_get(j, "attempts");

	if (nb && !json_is_null(nb) && !get_time(j, "not_before", &c->not_before))
		return false;
	if (at && (!json_is_integer(at) || json_integer_value(at) < 0 ||
		   json_integer_value(at) > INT32_MAX))
		return false;
	c->attempts = (int32_t)json_integer_value(at);
	return true;
}

enum core_rc store_card_from_json(const json_t *j, struct core_card **out)
{
	struct core_card *c;
	const json_t *ep, *pri;
	bool ok;

	if (!out)
		return CORE_ERR_BAD_REQUEST;
	*out = NULL;
	if (!json_is_object(j))
		return CORE_ERR_BAD_REQUEST;
	c = core_card_new();
	if (!c)
		return CORE_ERR_NOMEM;
	ep = json_object_get(j, "claim_epoch");
	ok = get_str(j, "id", &c->id) && core_id_valid(c->id) && get_str(j, "board", &c->board) &&
	     get_str(j, "title", &c->title) && get_str(j, "body", &c->body) &&
	     get_str(j, "state", &c->state) && store_json_get_strv(j, "labels", false, &c->labels) &&
	     store_json_get_strv(j, "blockers", false, &c->blockers) && get_comments(j, c) && get_claim(j, c) &&
	     (json_is_null(ep) || get_int(j, "claim_epoch", &c->claim_epoch)) &&
	     get_str_opt(j, "last_run_id", &c->last_run_id) &&
	     get_bool(j, "awaiting_input", &c->awaiting_input) && get_gave_up(j, &c->gave_up) &&
	     get_str_opt(j, "state_reason", &c->state_reason) &&
	     get_time(j, "created_at", &c->created_at) &&
	     get_time(j, "updated_at", &c->updated_at) && get_time(j, "state_at", &c->state_at);
	if (!ok) {
		core_card_free(c);
		return CORE_ERR_BAD_REQUEST;
	}
	c->has_epoch = json_is_integer(ep);
	/* Written since DESIGN §12; older lines have none (0). */
	pri = json_object_get(j, "priority");
	if (pri && (!json_is_integer(pri) || json_integer_value(pri) < INT32_MIN ||
		    json_integer_value(pri) > INT32_MAX)) {
		core_card_free(c);
		return CORE_ERR_BAD_REQUEST;
	}
	c->priority = (int32_t)json_integer_value(pri);
	/* Written since DESIGN §17; older lines have neither (no schedule, no attempts). */
	if (!get_policy_fields(j, c)) {
		core_card_free(c);
		return CORE_ERR_BAD_REQUEST;
	}
	*out = c;
	return CORE_OK;
}

/* A limit (DESIGN §17): absent or null is none (0); an integer out of 1..CORE_LIMIT_MAX is
 * kept out of range (-1 or CORE_LIMIT_MAX + 1) for core_board_validate to name; any other
 * type is malformed. */
static bool get_limit(const json_t *o, const char *key, int32_t *out)
{
	const json_t *v = json_object_get(o, key);
	json_int_t n;

	*out = 0;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_integer(v))
		return false;
	n = json_integer_value(v);
	*out = n < 1 ? -1 : n > CORE_LIMIT_MAX ? CORE_LIMIT_MAX + 1 : (int32_t)n;
	return true;
}

/* retry {max_attempts, backoff_ms, max_backoff_ms}, each optional (the defaults); null or
 * absent: none. Values out of range are kept for core_retry_validate to name. */
static bool get_retry(const json_t *o, struct core_board *b)
{
	const json_t *r = json_object_get(o, "retry"), *v;
	const char *key;
	const char *const keys[] = {"max_attempts", "backoff_ms", "max_backoff_ms"};
	json_int_t vals[] = {CORE_RETRY_MAX_ATTEMPTS, CORE_RETRY_BACKOFF_MS,
			     CORE_RETRY_MAX_BACKOFF_MS};
	size_t i;

	if (!r || json_is_null(r))
		return true;
	if (!json_is_object(r))
		return false;
	json_object_foreach((json_t *)r, key, v)
	{
		for (i = 0; i < 3; i++)
			if (strcmp(key, keys[i]) == 0)
				break;
		if (i == 3 || !json_is_integer(v))
			return false;
		vals[i] = json_integer_value(v);
	}
	/* Clamp into int ranges that stay out of bounds when they were. */
	b->retry.max_attempts = vals[0] < 1 ? 0 : vals[0] > INT32_MAX ? INT32_MAX : (int32_t)vals[0];
	b->retry.backoff_ms = vals[1] < 1 ? 0 : vals[1];
	b->retry.max_backoff_ms = vals[2] < 1 ? 0 : vals[2];
	b->has_retry = true;
	return true;
}

enum core_rc store_board_from_json(const json_t *j, struct core_board *out)
{
	struct core_board b = {0};
	const json_t *cols, *v;
	size_t i;
	bool ok;

	if (!out)
		return CORE_ERR_BAD_REQUEST;
	memset(out, 0, sizeof(*out));
	if (!json_is_object(j))
		return CORE_ERR_BAD_REQUEST;
	cols = json_object_get(j, "columns");
	ok = get_str(j, "name", &b.name) && json_is_array(cols);
	if (ok && json_array_size(cols)) {
		b.cols = calloc(json_array_size(cols), sizeof(*b.cols));
		ok = b.cols != NULL;
	}
	if (ok) {
		json_array_foreach(cols, i, v)
		{
			b.n_cols++;
			if (!json_is_object(v) || !get_str(v, "name", &b.cols[i].name) ||
			    !get_bool(v, "terminal", &b.cols[i].terminal) ||
			    !get_bool(v, "eligible", &b.cols[i].eligible) ||
			    !get_limit(v, "limit", &b.cols[i].limit)) {
				ok = false;
				break;
			}
		}
	}
	ok = ok && get_str_opt(j, "running", &b.running) &&
	     get_str_opt(j, "completed", &b.completed) && get_str_opt(j, "failed", &b.failed) &&
	     get_str_opt(j, "waiting", &b.waiting) && get_limit(j, "max_claims", &b.max_claims) &&
	     get_retry(j, &b);
	if (!ok) {
		core_board_release(&b);
		return CORE_ERR_BAD_REQUEST;
	}
	*out = b;
	return CORE_OK;
}

enum core_rc store_run_from_json(const json_t *j, struct core_run **out)
{
	struct core_run *r;
	const json_t *pr, *res;
	bool ok;

	if (!out)
		return CORE_ERR_BAD_REQUEST;
	*out = NULL;
	if (!json_is_object(j))
		return CORE_ERR_BAD_REQUEST;
	r = core_run_new();
	if (!r)
		return CORE_ERR_NOMEM;
	pr = json_object_get(j, "pruned");
	ok = get_str(j, "id", &r->id) && core_id_valid(r->id) &&
	     get_str(j, "card_id", &r->card_id) && get_str(j, "board", &r->board) &&
	     get_str(j, "status", &r->status) && get_str_opt(j, "continuation", &r->continuation) &&
	     get_str_opt(j, "failure_code", &r->failure_code) && get_str_opt(j, "owner", &r->owner) &&
	     get_time(j, "lock_until", &r->lock_until) && get_int(j, "lease_ms", &r->lease_ms) &&
	     get_time(j, "created_at", &r->created_at) &&
	     get_time(j, "updated_at", &r->updated_at) && (!pr || json_is_boolean(pr)) &&
	     (!json_object_get(j, "claim_epoch") || get_int(j, "claim_epoch", &r->claim_epoch));
	if (!ok) {
		core_run_free(r);
		return CORE_ERR_BAD_REQUEST;
	}
	r->pruned = json_is_true(pr);
	res = json_object_get(j, "result");
	if (res && !json_is_null(res) &&
	    !(r->result = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY))) {
		core_run_free(r);
		return CORE_ERR_NOMEM;
	}
	if ((json_object_get(j, "error") && !get_str_opt(j, "error", &r->error)) ||
	    (json_object_get(j, "output") && !get_str_opt(j, "output", &r->output))) {
		core_run_free(r);
		return CORE_ERR_BAD_REQUEST;
	}
	*out = r;
	return CORE_OK;
}

enum core_rc store_event_from_json(const json_t *j, struct core_event *out)
{
	struct core_event e = {0};
	const json_t *payload, *type;
	int t;
	bool ok;

	if (!out)
		return CORE_ERR_BAD_REQUEST;
	memset(out, 0, sizeof(*out));
	if (!json_is_object(j))
		return CORE_ERR_BAD_REQUEST;
	type = json_object_get(j, "type");
	t = core_event_type_parse(json_string_value(type));
	payload = json_object_get(j, "payload");
	ok = t >= 0 && json_is_object(payload) && get_int(j, "seq", &e.seq) &&
	     get_time(j, "at", &e.at) && get_str(j, "board", &e.board) &&
	     get_str_opt(j, "card_id", &e.card_id) && get_str(j, "actor", &e.actor) &&
	     get_str_opt(j, "reason", &e.reason) && get_bool(j, "machine", &e.machine);
	/* board_seq: absent from what earlier versions stored (derived on load) */
	if (ok && json_object_get(j, "board_seq"))
		ok = get_int(j, "board_seq", &e.board_seq);
	if (ok) {
		e.type = (enum core_event_type)t;
		/* Kept as compact text, as the stores build it, so a round trip is exact. */
		e.payload = json_dumps(payload, JSON_COMPACT);
		ok = e.payload != NULL;
	}
	if (!ok) {
		core_event_release(&e);
		return CORE_ERR_BAD_REQUEST;
	}
	*out = e;
	return CORE_OK;
}
