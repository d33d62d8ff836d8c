/* Batch create (DESIGN §18): POST /v1/cards with a JSON array of card bodies, at most
 * API_BATCH_MAX, answers 200 {results: [...]}, one per item in order: {status: 201, card} or
 * {status, code, detail}. Items are independent: each is created as POST /v1/cards would
 * create it, and a refused item never affects another. The whole list is checked first: an
 * item of the wrong shape, or two items naming the same id (or idempotency_key), is 400 naming
 * the index(es), and nothing is created. Every item's write shares the request's one
 * deferred acknowledgement (store_ack): on the FS twin one durability wait covers the batch,
 * and nothing is answered before every item is durable.
 *
 * An item may carry `idempotency_key`: a repeat answers that item's first result (scoped by
 * the token's name, apart from the Idempotency-Key header's keys); the header itself keys the
 * whole batch (idem.c). */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_daemon.h"
#include "api/api_cards.h"
#include "api/api_handlers.h"
#include "api/api_idem.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API_BATCH_MAX 1000

/* The item's id and idempotency_key, when given as strings (borrowed from the tree). */
static const char *item_str(const json_t *item, const char *key)
{
	return json_string_value(json_object_get(item, key));
}

/* Says which item the detail the checks left is about. Returns rc. */
static enum core_rc item_fail(struct api_req *r, enum core_rc rc, size_t i)
{
	char d[API_DETAIL_MAX];

	snprintf(d, sizeof d, "%s", r->detail[0] ? r->detail : api_rc_detail(rc));
	return api_fail(r, rc, "item %zu: %s", i, d);
}

/* The list's checks, before anything is created. */
static enum core_rc batch_check(struct api_req *r, json_t *arr, size_t n)
{
	char spec[512], prefix[32];
	enum core_rc rc = CORE_OK;
	size_t i, j;

	if (n == 0)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"the list of cards is empty: send 1 to %d card bodies", API_BATCH_MAX);
	if (n > API_BATCH_MAX)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"a batch holds at most %d cards (%zu given)", API_BATCH_MAX, n);
	snprintf(spec, sizeof spec, "%s idempotency_key", r->route->fields ? r->route->fields : "");
	for (i = 0; i < n; i++) {
		json_t *item = json_array_get(arr, i), *key;

		r->detail[0] = '\0';
		if (!json_is_object(item))
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"item %zu: must be a JSON object (a card's fields)", i);
		snprintf(prefix, sizeof prefix, "[%zu].", i);
		if ((rc = api_json_fields_check(r, item, spec, prefix)) != CORE_OK)
			return item_fail(r, rc, i);
		key = json_object_get(item, "idempotency_key");
		if (key && !json_is_string(key))
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"item %zu: field \"idempotency_key\" must be a string", i);
		if (key && (rc = api_idem_key_check(r, json_string_value(key),
						    "idempotency_key")) != CORE_OK)
			return item_fail(r, rc, i);
		r->json = item;
		rc = api_card_create_check(r);
		r->json = arr;
		/* Only the shape refuses the batch; the rest (a board out of scope) is the item's
		 * own answer. */
		if (rc == CORE_ERR_BAD_REQUEST || rc == CORE_ERR_NOMEM)
			return rc == CORE_ERR_NOMEM ? rc : item_fail(r, rc, i);
	}
	r->detail[0] = '\0';
	for (i = 0; i < n; i++) {
		const json_t *a = json_array_get(arr, i);
		const char *id = item_str(a, "id"), *key = item_str(a, "idempotency_key");

		for (j = i + 1; (id || key) && j < n; j++) {
			const json_t *b = json_array_get(arr, j);
			const char *id2 = item_str(b, "id"), *key2 = item_str(b, "idempotency_key");

			if (id && id2 && strcmp(id, id2) == 0)
				return api_fail(r, CORE_ERR_BAD_REQUEST,
						"items %zu and %zu both create card %s", i, j, id);
			if (key && key2 && strcmp(key, key2) == 0)
				return api_fail(r, CORE_ERR_BAD_REQUEST,
						"items %zu and %zu carry the same idempotency_key", i,
						j);
		}
	}
	return CORE_OK;
}

/* A refused item's result {status, code, detail}: new string, NULL on OOM. */
static char *item_refusal(struct api_req *r, enum core_rc rc, unsigned *status)
{
	json_t *j;
	char *text = NULL;
	size_t len;

	*status = api_rc_status(rc);
	j = json_pack("{s:i, s:s, s:s}", "status", (int)*status, "code", core_rc_code(rc),
		      "detail", r->detail[0] ? r->detail : api_rc_detail(rc));
	if (j)
		text = store_json_text(j, &len);
	json_decref(j);
	return text;
}

/* Creates item i as POST /v1/cards would: its result as text (new string, NULL on OOM). */
static char *item_create(struct api_req *r, json_t *arr, json_t *item, unsigned *status)
{
	struct core_card *c = NULL;
	enum core_rc rc;
	char *card, *text;
	size_t len = 0;

	r->detail[0] = '\0';
	r->json = item;
	rc = api_card_create(r, false, &c);
	r->json = arr;
	if (rc != CORE_OK)
		return item_refusal(r, rc, status);
	*status = 201;
	card = store_card_json_text(c, &len);
	core_card_free(c);
	if (!card)
		return NULL;
	text = malloc(len + 32);
	if (text)
		snprintf(text, len + 32, "{\"status\":201,\"card\":%s}", card);
	free(card);
	return text;
}

/* The same under the item's idempotency_key: a repeat answers the item's first result. */
static char *item_keyed(struct api_req *r, json_t *arr, json_t *item, const char *key)
{
	char scoped[API_IDEM_SCOPED_MAX], fp[API_IDEM_FP_LEN + 1], *canon, *text = NULL;
	struct store_idem k = {0};
	unsigned status = 0;
	enum core_rc rc;

	canon = json_dumps(item, JSON_COMPACT | JSON_SORT_KEYS);
	/* "#": no routed path holds one, so no Idempotency-Key's scope ("POST /v1/cards <key>")
	 * meets an item's ("item a" was item key "a"). */
	if (!canon || !api_idem_scope(r, "POST /v1/cards#item", key, scoped, sizeof scoped) ||
	    !api_idem_fp(canon, strlen(canon), fp)) {
		free(canon);
		return NULL;
	}
	free(canon);
	k.key = scoped;
	k.fp = fp;
	r->detail[0] = '\0';
	rc = store_idem_begin(r->api->st, &k);
	if (rc == CORE_ERR_IDEMPOTENCY_KEY_REUSED)
		api_fail(r, rc, "idempotency_key %.64s was used with another card body in the last "
				"24 h; nothing was changed", key);
	if (rc != CORE_OK)
		return item_refusal(r, rc, &status);
	if (k.state == STORE_IDEM_DONE) {
		text = k.body;
		k.body = NULL;
		store_idem_release(&k);
		return text;
	}
	if (k.state != STORE_IDEM_NEW)
		return item_refusal(r, api_idem_refusal(r, &k, key), &status);
	store_idem_bind(&k);
	text = item_create(r, arr, item, &status);
	store_idem_unbind(&k);
	if (!text || status >= 500) {
		store_idem_abort(r->api->st, &k);
		return text;
	}
	rc = store_idem_end(r->api->st, &k, (int)status, text, NULL);
	if (rc != CORE_OK) { /* created, but its key not recorded: not "nothing changed" */
		free(text);
		api_fail(r, rc, "the item was created, but its idempotency_key %.64s could not be "
				"recorded: read what it made before sending it again", key);
		text = item_refusal(r, rc, &status);
	}
	return text;
}

enum core_rc api_h_card_create_batch(struct api_req *r)
{
	json_t *arr = r->json;
	size_t n = json_array_size(arr), i;
	struct api_text b = {0};
	enum core_rc rc = batch_check(r, arr, n);

	if (rc != CORE_OK)
		return rc;
	api_text_str(&b, "{\"results\":[");
	for (i = 0; i < n && !b.oom; i++) {
		json_t *item = json_array_get(arr, i);
		const char *key = item_str(item, "idempotency_key");
		unsigned status;
		char *text;

		text = key ? item_keyed(r, arr, item, key) : item_create(r, arr, item, &status);
		if (!text) {
			b.oom = true;
			break;
		}
		if (i)
			api_text_str(&b, ",");
		api_text_str(&b, text);
		free(text);
	}
	api_text_str(&b, "]}");
	r->detail[0] = '\0';
	return api_reply_text(r, 200, &b);
}
