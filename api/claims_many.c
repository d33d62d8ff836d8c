/* Renew many and finish many (DESIGN §18): POST /v1/claims/renew and POST /v1/claims/release.
 *
 * Each item is exactly the single request it stands for — renew is POST /v1/cards/{id}/renew,
 * a release item is the owned state write with "release": true (PATCH .../state) or, without
 * `to`, POST .../release — through the same store call, so it is fenced and refused the same
 * way; the answer lists one result per item, in order, and a refused item never touches
 * another. The whole body is checked before anything is done: a malformed item, an empty
 * list, more than API_MANY_MAX items or a card named twice is 400 naming the item's index,
 * and nothing changes. Finish many hands its items to the store as one batch of owned writes
 * (store_reaper_act: the same writes, in order, each with its outcome; the FS twin commits a
 * batch without a refusal as one step). Everything runs under the request's one deferred
 * acknowledgement (answer.c): on the FS twin the journal lines of all items join one
 * durability wait, and the answer leaves once all of them are durable. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_cards.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API_MANY_MAX 1000
#define API_EPOCH_MAX 9007199254740991LL /* openapi's Epoch: what a JSON number holds exactly */

struct many_item {
	const char *card; /* borrowed from the body */
	struct core_token tok;
	const char *to;     /* release: NULL: the release alone */
	const char *reason; /* release: the state write's event's, or without `to` the release's */
	bool retry;         /* release: the claim ended without the work done (DESIGN §17) */
};

/* One result object (store_json_members_text), comma-separated from the one before. */
static void out_item(struct api_text *o, const struct store_json_member *m, size_t n)
{
	size_t len = 0;
	char *text = store_json_members_text(m, n, &len);

	if (!text) {
		o->oom = true;
		return;
	}
	if (o->len > 1 && o->p[o->len - 1] != '[')
		api_text_add(o, ",", 1);
	api_text_add(o, text, len);
	free(text);
}

/* A refused item: {card, status, code, detail}. */
static void out_refused(struct api_text *o, const char *card, enum core_rc rc, const char *detail)
{
	const struct store_json_member m[] = {
		{"card", STORE_JSON_STR, card, 0},
		{"status", STORE_JSON_INT, NULL, api_rc_status(rc)},
		{"code", STORE_JSON_STR, core_rc_code(rc), 0},
		{"detail", STORE_JSON_STR, detail && detail[0] ? detail : api_rc_detail(rc), 0},
	};

	out_item(o, m, sizeof m / sizeof m[0]);
}

/* Prefixes the detail a helper left in r->detail with the item's index. Returns rc. */
static enum core_rc item_fail(struct api_req *r, size_t i, enum core_rc rc)
{
	char d[API_DETAIL_MAX];

	snprintf(d, sizeof d, "%s", r->detail[0] ? r->detail : api_rc_detail(rc));
	return api_fail(r, rc, "tokens[%zu]: %s", i, d);
}

/* Item i of the body into *it, through the single routes' own field helpers (r->json points
 * at the item meanwhile), so an item is checked exactly as its single request is. */
static enum core_rc item_parse(struct api_req *r, size_t i, json_t *j, bool release,
			       struct many_item *it)
{
	json_t *body = r->json;
	int64_t epoch = 0;
	enum core_rc rc;

	if (!json_is_object(j))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"tokens[%zu]: must be an object {card, marker, epoch%s}", i,
				release ? ", to?, reason?, retry?" : "");
	r->json = j;
	r->detail[0] = '\0';
	if ((rc = api_json_fields_check(r, j, release ? "card marker epoch to reason retry"
						      : "card marker epoch",
					"")) != CORE_OK ||
	    (rc = api_json_id(r, "card", true, &it->card)) != CORE_OK ||
	    (rc = api_json_marker(r, true, &it->tok.marker)) != CORE_OK ||
	    (rc = api_json_int(r, "epoch", true, &epoch, NULL)) != CORE_OK)
		goto out;
	if (epoch < 0 || epoch > API_EPOCH_MAX) {
		rc = api_fail(r, CORE_ERR_BAD_REQUEST, "epoch must be within 0..%lld",
			      (long long)API_EPOCH_MAX);
		goto out;
	}
	it->tok.epoch = epoch;
	if (release &&
	    ((rc = api_json_name(r, "to", false, &it->to)) != CORE_OK ||
	     (rc = api_json_reason(r, &it->reason)) != CORE_OK ||
	     (rc = api_json_bool(r, "retry", false, &it->retry)) != CORE_OK))
		goto out;
out:
	r->json = body;
	return rc == CORE_OK ? rc : item_fail(r, i, rc);
}

static int by_card(const void *a, const void *b)
{
	const struct many_item *const *x = a, *const *y = b;
	int c = strcmp((*x)->card, (*y)->card);

	return c ? c : (*x < *y ? -1 : *x > *y);
}

/* BAD_REQUEST naming both indexes when a card is in the list twice (the first such pair by
 * its later index): two items on one card would each be judged against the other's write. */
static enum core_rc dup_check(struct api_req *r, struct many_item *v, size_t n)
{
	const struct many_item **s = malloc(n * sizeof *s);
	size_t i, first = n, other = 0;

	if (!s)
		return CORE_ERR_NOMEM;
	for (i = 0; i < n; i++)
		s[i] = &v[i];
	qsort(s, n, sizeof *s, by_card);
	for (i = 1; i < n; i++)
		if (strcmp(s[i - 1]->card, s[i]->card) == 0 && (size_t)(s[i] - v) < first) {
			first = (size_t)(s[i] - v);
			other = (size_t)(s[i - 1] - v);
		}
	free(s);
	if (first == n)
		return CORE_OK;
	return api_fail(r, CORE_ERR_BAD_REQUEST,
			"tokens[%zu]: card %s is also tokens[%zu]; a card may be named once", first,
			v[first].card, other);
}

/* The whole body, checked before anything is done. *out: caller frees. */
static enum core_rc many_parse(struct api_req *r, bool release, struct many_item **out,
			       size_t *n)
{
	json_t *list = json_object_get(r->json, "tokens"), *j;
	struct many_item *v;
	enum core_rc rc = CORE_OK;
	size_t i;

	*out = NULL;
	*n = 0;
	if (!list)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "missing field \"tokens\"");
	if (!json_is_array(list))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"tokens\" must be a list");
	if (json_array_size(list) == 0)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "\"tokens\" is empty: send 1..%d",
				API_MANY_MAX);
	if (json_array_size(list) > API_MANY_MAX)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"\"tokens\" holds %zu items: at most %d, tokens[%d] is one too many",
				json_array_size(list), API_MANY_MAX, API_MANY_MAX);
	v = calloc(json_array_size(list), sizeof *v);
	if (!v)
		return CORE_ERR_NOMEM;
	json_array_foreach(list, i, j)
		if ((rc = item_parse(r, i, j, release, &v[i])) != CORE_OK)
			break;
	if (rc == CORE_OK)
		rc = dup_check(r, v, json_array_size(list));
	if (rc != CORE_OK) {
		free(v);
		return rc;
	}
	*out = v;
	*n = json_array_size(list);
	return CORE_OK;
}

/* A token scoped to some boards acts only on their cards (DESIGN §8): NOT_FOUND or FORBIDDEN
 * for this item, with its detail in r->detail. A token that sees every board skips the read
 * (as api_card_scope_lazy does). */
static enum core_rc item_scope(struct api_req *r, const char *card)
{
	struct core_card *c = NULL;
	enum core_rc rc;

	if (r->tok && r->tok->all_boards)
		return CORE_OK;
	rc = api_card_load(r, card, &c);
	core_card_free(c);
	return rc;
}

/* The detail of a refused item: what its helper said, or "no card X" for NOT_FOUND. */
static const char *item_detail(struct api_req *r, enum core_rc rc, const char *card)
{
	if (rc == CORE_ERR_NOT_FOUND && !r->detail[0])
		api_fail(r, rc, "no card %s", card);
	return r->detail;
}

/* The answer {"results": [...]} (takes o's text). */
static enum core_rc many_reply(struct api_req *r, struct api_text *o)
{
	api_text_add(o, "]}", 2);
	return api_reply_text(r, 200, o);
}

enum core_rc api_h_claims_renew(struct api_req *r)
{
	struct store_actor actor = api_auth_actor(r);
	struct api_text o = {0};
	struct many_item *v = NULL;
	int64_t lease_ms = 0;
	size_t n = 0, i;
	enum core_rc rc;

	if ((rc = api_json_lease_keep(r, &lease_ms)) != CORE_OK ||
	    (rc = many_parse(r, false, &v, &n)) != CORE_OK)
		return rc;
	api_text_str(&o, "{\"results\":[");
	for (i = 0; i < n; i++) {
		struct core_card *c = NULL;
		char lu[CORE_TIME_BUF];

		r->detail[0] = '\0';
		rc = item_scope(r, v[i].card);
		if (rc == CORE_OK)
			rc = store_card_renew(r->api->st, v[i].card, &v[i].tok, lease_ms, &actor, &c);
		if (rc == CORE_OK) {
			const struct store_json_member m[] = {
				{"card", STORE_JSON_STR, v[i].card, 0},
				{"status", STORE_JSON_INT, NULL, 200},
				{"lease_until", STORE_JSON_STR,
				 core_time_format(c->claim.lease_until, lu), 0},
			};

			out_item(&o, m, sizeof m / sizeof m[0]);
		} else {
			out_refused(&o, v[i].card, rc, item_detail(r, rc, v[i].card));
		}
		core_card_free(c);
	}
	r->detail[0] = '\0';
	free(v);
	return many_reply(r, &o);
}

/* The owned write item `it` stands for: the state write to `to` and the release in one
 * fenced step, or the release alone (its event carrying `reason`; an attempt counted with
 * retry). */
static struct store_owned_write finish_write(const struct many_item *it)
{
	struct store_owned_write w = {.kind = it->to ? STORE_OWNED_STATE : STORE_OWNED_NOTHING,
				      .token = it->tok,
				      .state = it->to,
				      .reason = it->to ? it->reason : NULL,
				      .event_reason = it->to ? NULL : it->reason,
				      .release = true,
				      .retry = it->retry};

	return w;
}

/* One finish alone, through the single routes' store calls. */
static enum core_rc finish_one(struct api_req *r, const struct many_item *it,
			       const struct store_actor *actor)
{
	struct store_owned_write w = finish_write(it);
	struct core_card *c = NULL;
	enum core_rc rc;

	/* the plain release: POST .../release's own store call */
	if (!it->to && !it->retry && !it->reason)
		rc = store_card_release(r->api->st, it->card, &it->tok, actor, &c);
	else
		rc = store_card_owned_write(r->api->st, it->card, &w, actor, &c);
	core_card_free(c);
	return rc;
}

/* The detail of a refused finish, worked out after the store refused (the error path only). */
static const char *finish_detail(struct api_req *r, const struct many_item *it, enum core_rc rc)
{
	struct core_card *cur = NULL;

	r->detail[0] = '\0';
	if (rc == CORE_ERR_FORBIDDEN)
		(void)item_scope(r, it->card);
	else if (core_rc_is_transition_rejected(rc) && it->to &&
		 store_card_get(r->api->st, it->card, &cur) == CORE_OK)
		api_column_detail(r, rc, cur->board, it->to); /* as PATCH .../state gives it */
	core_card_free(cur);
	return item_detail(r, rc, it->card);
}

/* Finish many: every item in scope goes to the store as one batch of owned writes
 * (store_reaper_act: exactly the single writes, in order, each with its outcome; the FS twin
 * commits a batch without a refusal as one journal step, and runs one with a refusal again
 * item by item), so a batch of K costs one step, not K. */
enum core_rc api_h_claims_release(struct api_req *r)
{
	struct store_actor actor = api_auth_actor(r);
	struct api_text o = {0};
	struct many_item *v = NULL;
	struct store_reaper_act *acts = NULL;
	enum core_rc *rcs = NULL;
	size_t *idx = NULL, n = 0, m = 0, i;
	enum core_rc rc;

	if ((rc = many_parse(r, true, &v, &n)) != CORE_OK)
		return rc;
	rcs = calloc(n, sizeof *rcs);
	acts = calloc(n, sizeof *acts);
	idx = calloc(n, sizeof *idx);
	if (!rcs || !acts || !idx) {
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		r->detail[0] = '\0';
		if ((rcs[i] = item_scope(r, v[i].card)) != CORE_OK)
			continue;
		/* The plain release keeps POST .../release's own store call (a twin's owned write
		 * need not know STORE_OWNED_NOTHING without retry); the cards are distinct, so the
		 * order between the two groups changes nothing. */
		if (!v[i].to && !v[i].retry && !v[i].reason) {
			rcs[i] = finish_one(r, &v[i], &actor);
			continue;
		}
		acts[m].id = v[i].card;
		acts[m].w[0] = finish_write(&v[i]);
		acts[m].n_w = 1;
		idx[m++] = i;
	}
	if (m && store_reaper_act(r->api->st, acts, m, &actor) == CORE_OK) {
		for (i = 0; i < m; i++)
			rcs[idx[i]] = acts[i].rc;
	} else {
		for (i = 0; i < m; i++)
			rcs[idx[i]] = finish_one(r, &v[idx[i]], &actor);
	}
	api_text_str(&o, "{\"results\":[");
	for (i = 0; i < n; i++) {
		if (rcs[i] == CORE_OK) {
			const struct store_json_member ok[] = {
				{"card", STORE_JSON_STR, v[i].card, 0},
				{"status", STORE_JSON_INT, NULL, 200},
			};

			out_item(&o, ok, sizeof ok / sizeof ok[0]);
		} else {
			out_refused(&o, v[i].card, rcs[i], finish_detail(r, &v[i], rcs[i]));
		}
	}
	r->detail[0] = '\0';
	rc = many_reply(r, &o);
out:
	free(o.p);
	free(idx);
	free(acts);
	free(rcs);
	free(v);
	return rc;
}
