/* The Idempotency-Key header (DESIGN §18) of POST /v1/cards, POST /v1/runs and claim-next
 * (routes flagged API_ROUTE_IDEM): a repeat within 24 h answers what the first answered,
 * byte for byte, and changes nothing; the same key with another body is 422
 * idempotency_key_reused. Keys are scoped by the token's name (an agent token's with the
 * claim it was minted under), the method and the path, and
 * fingerprinted by the body's SHA-256. The records live in the store (store_idem_*), so they
 * survive a restart and are shared by replicas. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_cards.h"
#include "api/api_daemon.h"
#include "api/api_idem.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum core_rc api_idem_key_check(struct api_req *r, const char *key, const char *what)
{
	size_t n = strlen(key), i;

	for (i = 0; i < n; i++)
		if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
			break;
	if (n == 0 || n > API_IDEM_KEY_MAX || i < n)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"%s must be 1 to %d printable ASCII characters", what,
				API_IDEM_KEY_MAX);
	return CORE_OK;
}

/* Whose keys: "<bytes>:<name>" with the bytes of a name outside printable ASCII (and '%')
 * %XX-escaped, the length the name's own, so no two names meet (the store takes printable
 * ASCII keys: a token named in UTF-8 could use no key at all); a name that escapes to more
 * than 128 bytes is "#" and its SHA-256 (the key would not fit). out: at least 160 bytes. */
static bool idem_who(const char *who, char *out)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = strlen(who), esc = 0, i, k;

	for (i = 0; i < len; i++)
		esc += (unsigned char)who[i] < 0x20 || (unsigned char)who[i] > 0x7e || who[i] == '%'
			       ? 3
			       : 1;
	if (esc > 128) {
		out[0] = '#';
		return api_idem_fp(who, len, out + 1);
	}
	k = (size_t)sprintf(out, "%zu:", len);
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)who[i];

		if (ch < 0x20 || ch > 0x7e || ch == '%') {
			out[k++] = '%';
			out[k++] = hex[ch >> 4];
			out[k++] = hex[ch & 15];
		} else {
			out[k++] = (char)ch;
		}
	}
	out[k] = '\0';
	return true;
}

bool api_idem_scope(struct api_req *r, const char *scope, const char *key, char *out, size_t n)
{
	struct store_actor actor = api_auth_actor(r);
	const char *who = r->agent_idem ? r->agent_idem : actor.name ? actor.name : "";
	char w_text[160];
	int w;

	if (!idem_who(who, w_text))
		return false;
	w = snprintf(out, n, "%s %s %s", w_text, scope, key);
	return w > 0 && (size_t)w < n;
}

bool api_idem_fp(const void *data, size_t len, char *out)
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	size_t i;

	if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return false;
	for (i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	return true;
}

enum core_rc api_idem_refusal(struct api_req *r, const struct store_idem *k, const char *key)
{
	if (k->state == STORE_IDEM_LOST)
		return api_fail(r, CORE_ERR_IDEMPOTENCY_KEY_IN_FLIGHT,
				"the request first sent with Idempotency-Key %.64s was written, but "
				"the server stopped before it recorded the answer: read the resource "
				"instead of retrying",
				key);
	return api_fail(r, CORE_ERR_IDEMPOTENCY_KEY_IN_FLIGHT,
			"another request with Idempotency-Key %.64s is still being served; retry "
			"shortly",
			key);
}

/* Answers the recorded answer (takes k's body). */
/* Whether every "board" string at any depth of j is one the token may access now. */
static bool boards_allowed(struct api_req *r, const json_t *j, int depth)
{
	const char *key;
	const json_t *v;
	size_t i;

	if (depth > 8)
		return true; /* answers hold cards a few levels down, never deeper */
	if (json_is_object(j)) {
		json_object_foreach((json_t *)j, key, v) {
			if (strcmp(key, "board") == 0 && json_is_string(v) &&
			    !api_token_board_allowed(r->tok, json_string_value(v)))
				return false;
			if (!boards_allowed(r, v, depth + 1))
				return false;
		}
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			if (!boards_allowed(r, v, depth + 1))
				return false;
	}
	return true;
}

static enum core_rc replay(struct api_req *r, struct store_idem *k)
{
	/* A token narrowed (a reload) since the key was answered is not shown that answer's
	 * cards of boards it may no longer access: 403, as the request would get now. */
	if (api_auth_boards(r)) {
		json_t *j = json_loads(k->body, 0, NULL);
		bool ok = !j || boards_allowed(r, j, 0);

		json_decref(j);
		if (!ok)
			return api_fail(r, CORE_ERR_FORBIDDEN, "token %s may no longer access a board "
					"this Idempotency-Key's answer holds",
					r->tok ? r->tok->name : "?");
	}
	free(r->raw_owned);
	json_decref(r->out);
	r->out = NULL;
	r->raw_owned = k->body;
	r->raw_len = strlen(k->body);
	k->body = NULL;
	r->raw_type = k->status >= 400 ? "application/problem+json" : "application/json";
	r->status = (unsigned)k->status;
	snprintf(r->location, sizeof r->location, "%s", k->location ? k->location : "");
	return CORE_OK;
}

/* The handler's answer as it will be sent: status and body (new string) for rc. NULL: not
 * one to record (a 5xx, an answer of its own, OOM). */
static char *answer_text(struct api_req *r, enum core_rc rc, unsigned *status)
{
	size_t len;

	if (rc != CORE_OK) {
		char *text;

		if (api_rc_status(rc) >= 500 || rc == CORE_ERR_IDEMPOTENCY_KEY_IN_FLIGHT)
			return NULL;
		text = api_problem_text(rc, r->detail, status);
		return *status >= 500 ? (free(text), NULL) : text;
	}
	*status = r->status ? r->status : 200;
	if (r->resp || r->suspended || *status >= 500)
		return NULL;
	if (r->out)
		return store_json_text(r->out, &len);
	if (r->raw_owned)
		return strndup(r->raw_owned, r->raw_len);
	if (r->raw_body)
		return strndup(r->raw_body, r->raw_len);
	return strdup(""); /* 204 */
}

enum core_rc api_idem_handle(struct api_req *r)
{
	enum core_rc rc, rc2;
	const char *key = api_hdr_once(r, API_HDR_IDEMPOTENCY_KEY, &rc);
	char scoped[API_IDEM_SCOPED_MAX], scope[640], fp[API_IDEM_FP_LEN + 1];
	struct store_idem k = {0};
	unsigned status = 0;
	size_t plen;
	char *text;
	int w;

	if (rc != CORE_OK)
		return rc;
	if (!key)
		return r->route->handler(r);
	if ((rc = api_idem_key_check(r, key, "Idempotency-Key")) != CORE_OK)
		return rc;
	/* The route as the router read it: the path percent-decoded (`/v1/boards/%64efault/...`
	 * is board default's claim-next, and its key too). */
	w = snprintf(scope, sizeof scope, "%s ", r->method);
	plen = strlen(r->path);
	if (w <= 0 || (size_t)w + plen >= sizeof scope ||
	    !api_pct_decode_to(r->path, plen, false, scope + w) ||
	    !api_idem_scope(r, scope, key, scoped, sizeof scoped))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "the request path is too long for an "
							 "Idempotency-Key");
	if (!api_idem_fp(r->body ? r->body : "", r->body ? r->body_len : 0, fp))
		return CORE_ERR_INTERNAL;
	k.key = scoped;
	k.fp = fp;
	rc = store_idem_begin(r->api->st, &k);
	if (rc == CORE_ERR_IDEMPOTENCY_KEY_REUSED)
		return api_fail(r, rc,
				"Idempotency-Key %.64s was used with another request body in the "
				"last 24 h; nothing was changed",
				key);
	if (rc != CORE_OK)
		return rc;
	if (k.state == STORE_IDEM_DONE) {
		rc = replay(r, &k);
		store_idem_release(&k);
		return rc;
	}
	if (k.state != STORE_IDEM_NEW)
		return api_idem_refusal(r, &k, key);

	store_idem_bind(&k);
	rc = r->route->handler(r);
	store_idem_unbind(&k);
	text = answer_text(r, rc, &status);
	if (!text) {
		store_idem_abort(r->api->st, &k);
		return rc;
	}
	rc2 = store_idem_end(r->api->st, &k, (int)status, text, r->location);
	free(text);
	store_idem_release(&k);
	/* The write was made but its key not recorded (the store stayed unreachable; on the FS
	 * twin the write's own line holds the key, which then answers in flight): a store
	 * failure, which must not read "nothing was changed". */
	if (rc2 != CORE_OK && rc == CORE_OK)
		return api_fail(r, rc2,
				"the request was carried out, but its Idempotency-Key %.64s could "
				"not be recorded: read what it changed before sending it again",
				key);
	return rc2 != CORE_OK ? rc2 : rc;
}

enum core_rc api_mcp_create_keyed(struct api_req *r, json_t **out)
{
	json_t *kv = json_object_get(r->json, "idempotency_key");
	const char *key = json_string_value(kv);
	char scoped[API_IDEM_SCOPED_MAX], fp[API_IDEM_FP_LEN + 1], *canon, *text;
	struct store_idem k = {0};
	struct core_card *c = NULL;
	enum core_rc rc;
	size_t len;

	*out = NULL;
	if (!key)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"argument \"idempotency_key\" must be a string");
	if ((rc = api_idem_key_check(r, key, "idempotency_key")) != CORE_OK)
		return rc;
	canon = json_dumps(r->json, JSON_COMPACT | JSON_SORT_KEYS);
	if (!canon || !api_idem_scope(r, "mcp create_card", key, scoped, sizeof scoped) ||
	    !api_idem_fp(canon, strlen(canon), fp)) {
		free(canon);
		return CORE_ERR_NOMEM;
	}
	free(canon);
	k.key = scoped;
	k.fp = fp;
	rc = store_idem_begin(r->api->st, &k);
	if (rc == CORE_ERR_IDEMPOTENCY_KEY_REUSED)
		return api_fail(r, rc,
				"idempotency_key %.64s was used with other arguments in the last "
				"24 h; nothing was changed",
				key);
	if (rc != CORE_OK)
		return rc;
	if (k.state == STORE_IDEM_DONE) {
		*out = json_loads(k.body, 0, NULL);
		store_idem_release(&k);
		return *out ? CORE_OK : CORE_ERR_NOMEM;
	}
	if (k.state != STORE_IDEM_NEW)
		return api_idem_refusal(r, &k, key);
	store_idem_bind(&k);
	rc = api_card_create(r, true, &c);
	store_idem_unbind(&k);
	if (rc != CORE_OK) {
		store_idem_abort(r->api->st, &k);
		return rc;
	}
	*out = store_card_to_json(c);
	core_card_free(c);
	text = *out ? store_json_text(*out, &len) : NULL;
	rc = text ? store_idem_end(r->api->st, &k, 201, text, NULL) : CORE_ERR_NOMEM;
	free(text);
	if (rc != CORE_OK) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}
