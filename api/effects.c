/* Effects handlers (DESIGN §14): subscriptions per board, the deliveries list and the
 * operator retry. The secret is shown once, in the answer of the PUT that generated it. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUB_URL_MAX 2048
#define SECRET_PREFIX "whsec_"
#define SECRET_MIN 24 /* Standard Webhooks: 24..64 bytes of key */
#define SECRET_MAX 64

/* ---- helpers ---- */

/* Fails with the name of the first key of obj not in `allowed` (NULL-terminated). */
static enum core_rc keys_known(struct api_req *r, const json_t *obj, const char *where,
			       const char *const *allowed)
{
	const char *key;
	const json_t *v;
	size_t i;

	json_object_foreach((json_t *)obj, key, v) {
		for (i = 0; allowed[i] && strcmp(allowed[i], key) != 0; i++)
			;
		if (!allowed[i])
			return api_fail(r, CORE_ERR_BAD_REQUEST, "unknown field \"%s%s\"", where,
					key);
	}
	return CORE_OK;
}

/* The authority of an http(s) URL, [host, end): a host name (letters, digits, "-._~" and
 * percent escapes) or a bracketed IPv6 literal, then an optional port 1..65535 (no leading
 * zero). No credentials (nothing else passes). openapi.yaml's Subscription.url pattern says
 * the same; the deliverer's libcurl parses what passes as written. */
static bool authority_valid(const char *host, const char *end)
{
	const char *p, *hend;
	unsigned long port = 0;

	if (host == end)
		return false;
	if (*host == '[') {
		hend = memchr(host, ']', (size_t)(end - host));
		if (!hend || hend == host + 1)
			return false;
		for (p = host + 1; p < hend; p++)
			if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
				return false;
		hend++;
	} else {
		for (hend = host; hend < end && *hend != ':'; hend++)
			if (!isalnum((unsigned char)*hend) && !strchr("-._~%", *hend))
				return false;
		if (hend == host)
			return false;
	}
	if (hend == end)
		return true;
	if (*hend != ':' || hend + 1 == end || end - (hend + 1) > 5 || hend[1] == '0')
		return false;
	for (p = hend + 1; p < end; p++) {
		if (!isdigit((unsigned char)*p))
			return false;
		port = port * 10 + (unsigned long)(*p - '0');
	}
	return port >= 1 && port <= 65535;
}

/* http(s)://authority[/?#...]: no whitespace or control characters. */
static bool url_valid(const char *u)
{
	const char *host;
	size_t i, n = strlen(u);

	/* Its length was checked in characters, as the contract counts (api_json_str). */
	for (i = 0; i < n; i++)
		if ((unsigned char)u[i] <= 0x20 || u[i] == 0x7f)
			return false;
	if (strncmp(u, "http://", 7) == 0)
		host = u + 7;
	else if (strncmp(u, "https://", 8) == 0)
		host = u + 8;
	else
		return false;
	return authority_valid(host, host + strcspn(host, "/?#"));
}

/* "whsec_" + base64 of 24..64 bytes. */
static bool secret_valid(const char *s)
{
	unsigned char key[3 * (SECRET_MAX * 4 / 3 + 4) / 4 + 3];
	const char *b64;
	size_t n;
	int len;

	if (strncmp(s, SECRET_PREFIX, strlen(SECRET_PREFIX)) != 0)
		return false;
	b64 = s + strlen(SECRET_PREFIX);
	n = strlen(b64);
	if (n == 0 || n % 4 != 0 || n > (SECRET_MAX + 2) / 3 * 4 ||
	    strspn(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != n)
		return false;
	len = EVP_DecodeBlock(key, (const unsigned char *)b64, (int)n);
	if (len < 0)
		return false;
	len -= (b64[n - 1] == '=') + (b64[n - 2] == '=');
	return len >= SECRET_MIN && len <= SECRET_MAX;
}

/* A fresh secret: whsec_ + base64 of 32 random bytes. buf: at least 64 bytes. */
static bool secret_generate(char *buf, size_t len)
{
	unsigned char key[32];
	char b64[48];

	if (RAND_bytes(key, sizeof key) != 1)
		return false;
	EVP_EncodeBlock((unsigned char *)b64, key, sizeof key);
	snprintf(buf, len, SECRET_PREFIX "%s", b64);
	return true;
}

static bool any_string(const char *s)
{
	return s != NULL;
}

/* {b} and {name} from the path, checked, and the token's scope on b. */
static enum core_rc sub_params(struct api_req *r, const char **board, const char **name)
{
	*board = r->n_params > 0 ? r->params[0] : NULL;
	*name = r->n_params > 1 ? r->params[1] : NULL;
	if (!core_name_valid(*board))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	if (r->n_params > 1 && !core_name_valid(*name))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"subscription name must match [A-Za-z0-9._-]{1,64}");
	return api_auth_board(r, *board);
}

/* ---- subscriptions ---- */

/* A subscription not found: the board itself when that is what is missing (a path that names
 * a missing board is "no board X", DESIGN §11), else the subscription. Returns NOT_FOUND. */
static enum core_rc sub_missing(struct api_req *r, const char *board, const char *name)
{
	struct core_board b = {0};
	enum core_rc rc = store_board_get(r->api->st, board, &b);

	core_board_release(&b);
	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, CORE_ERR_NOT_FOUND, "no board %s", board);
	return api_fail(r, CORE_ERR_NOT_FOUND, "no subscription %s on board %s", name, board);
}

enum core_rc api_h_sub_put(struct api_req *r)
{
	static const char *const top[] = {"url", "secret", "on", "consume_labels", "enabled", NULL};
	static const char *const on_keys[] = {
#define API_SUB_DIM_KEY(id, name, doc) name,
		CORE_SUB_DIMENSIONS(API_SUB_DIM_KEY)
#undef API_SUB_DIM_KEY
		NULL};
	struct store_sub in = {0}, *out = NULL;
	const json_t *on = json_object_get(r->json, "on");
	const char *board, *name, *url = NULL, *secret = NULL;
	char generated[96], detail[API_DETAIL_MAX];
	bool created = false, enabled = true;
	json_t *j;
	enum core_rc rc;
	int d;

	if ((rc = sub_params(r, &board, &name)) != CORE_OK ||
	    (rc = keys_known(r, r->json, "", top)) != CORE_OK)
		return rc;
	if (on && !json_is_null(on) && !json_is_object(on))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"on\" must be an object");
	if (json_is_object(on) && (rc = keys_known(r, on, "on.", on_keys)) != CORE_OK)
		return rc;
	if ((rc = api_json_str(r, "url", true, SUB_URL_MAX, &url)) != CORE_OK ||
	    (rc = api_json_str(r, "secret", false, 256, &secret)) != CORE_OK)
		return rc;
	if (json_object_get(r->json, "enabled") &&
	    (rc = api_json_bool(r, "enabled", false, &enabled)) != CORE_OK)
		return rc;
	if (!url_valid(url))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"url must be an absolute http:// or https:// URL with a host (a "
				"name or a bracketed IPv6 address), an optional port 1..65535 and "
				"no credentials");
	if (secret && !secret_valid(secret))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"secret must be whsec_ followed by the base64 of 24 to 64 bytes");
	in.board = (char *)board;
	in.name = (char *)name;
	in.url = (char *)url;
	in.secret = (char *)secret;
	in.enabled = enabled;
	for (d = 0; rc == CORE_OK && d < CORE_SUB_DIM_COUNT_ && json_is_object(on); d++)
		rc = api_json_strv(r, on, core_sub_dimension_name(d), any_string, &in.on.dim[d],
				   NULL);
	if (rc == CORE_OK)
		rc = api_json_strv(r, NULL, "consume_labels", core_label_valid, &in.consume, NULL);
	detail[0] = '\0';
	if (rc == CORE_OK && core_sub_filter_validate(&in.on, detail, sizeof detail) != CORE_OK)
		rc = api_fail(r, CORE_ERR_BAD_REQUEST, "%s", detail);
	if (rc == CORE_OK && !secret && !secret_generate(generated, sizeof generated))
		rc = CORE_ERR_INTERNAL;
	if (rc == CORE_OK)
		rc = store_sub_put(r->api->st, &in, secret ? NULL : generated, &created, &out);
	if (rc == CORE_ERR_NOT_FOUND)
		rc = api_fail(r, rc, "no board %s", board);
	if (rc == CORE_ERR_TRANSITION_REJECTED) { /* an unknown column in on.to_states */
		struct core_board b = {0};

		if (store_board_get(r->api->st, board, &b) == CORE_OK &&
		    core_sub_filter_columns_check(&b, &in.on, detail, sizeof detail) != CORE_OK)
			rc = api_fail(r, rc, "%s", detail);
		core_board_release(&b);
	}
	core_sub_filter_release(&in.on);
	core_strv_release(&in.consume);
	if (rc != CORE_OK)
		return rc;
	j = store_sub_to_json(out, false);
	/* Shown once: only the answer that generated it carries it. */
	if (j && created && !secret && json_object_set_new(j, "secret", json_string(out->secret)))
		json_decref(j), j = NULL;
	store_sub_free(out);
	if (created)
		snprintf(r->location, sizeof r->location, "/v1/boards/%s/subscriptions/%s", board,
			 name);
	return api_reply(r, created ? 201 : 200, j);
}

enum core_rc api_h_sub_get(struct api_req *r)
{
	struct store_sub *s = NULL;
	const char *board, *name;
	json_t *j;
	enum core_rc rc;

	if ((rc = sub_params(r, &board, &name)) != CORE_OK)
		return rc;
	rc = store_sub_get(r->api->st, board, name, &s);
	if (rc == CORE_ERR_NOT_FOUND)
		return sub_missing(r, board, name);
	if (rc != CORE_OK)
		return rc;
	j = store_sub_to_json(s, false);
	store_sub_free(s);
	return api_reply(r, 200, j);
}

enum core_rc api_h_sub_list(struct api_req *r)
{
	struct store_sub **v = NULL;
	const char *board, *name;
	json_t *list;
	size_t n = 0, i;
	enum core_rc rc;

	struct core_board b = {0};

	if ((rc = sub_params(r, &board, &name)) != CORE_OK)
		return rc;
	rc = store_board_get(r->api->st, board, &b);
	core_board_release(&b);
	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, rc, "no board %s", board);
	if (rc != CORE_OK)
		return rc;
	rc = store_sub_list(r->api->st, board, &v, &n);
	if (rc != CORE_OK)
		return rc;
	list = json_array();
	for (i = 0; list && i < n; i++)
		if (json_array_append_new(list, store_sub_to_json(v[i], false)) != 0)
			json_decref(list), list = NULL;
	store_subs_free(v, n);
	return api_reply(r, 200, list ? json_pack("{s:o}", "subscriptions", list) : NULL);
}

enum core_rc api_h_sub_delete(struct api_req *r)
{
	const char *board, *name;
	enum core_rc rc;

	if ((rc = sub_params(r, &board, &name)) != CORE_OK)
		return rc;
	rc = store_sub_delete(r->api->st, board, name);
	if (rc == CORE_ERR_NOT_FOUND)
		return sub_missing(r, board, name);
	if (rc == CORE_OK)
		r->status = 204;
	return rc;
}

/* ---- deliveries ---- */

enum core_rc api_h_delivery_list(struct api_req *r)
{
	struct store_delivery_filter f = {.status = -1};
	struct store_delivery **v = NULL;
	const char *board = NULL, *status = NULL;
	int64_t limit;
	json_t *list;
	size_t n = 0, i;
	enum core_rc rc;

	if ((rc = api_query(r, "board", &board)) != CORE_OK ||
	    (rc = api_query(r, "status", &status)) != CORE_OK ||
	    (rc = api_query_int(r, "limit", 100, 1, 1000, &limit)) != CORE_OK)
		return rc;
	if (board && !core_name_valid(board))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	if (board && (rc = api_auth_board(r, board)) != CORE_OK)
		return rc;
	if (status && (f.status = store_delivery_status_parse(status)) < 0)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "status must be pending, done or dead");
	f.board = board;
	f.boards = api_auth_boards(r);
	f.limit = (size_t)limit;
	rc = store_delivery_list(r->api->st, &f, &v, &n);
	if (rc != CORE_OK)
		return rc;
	list = json_array();
	for (i = 0; list && i < n; i++)
		if (json_array_append_new(list, store_delivery_to_json(v[i], false)) != 0)
			json_decref(list), list = NULL;
	store_deliveries_free(v, n);
	return api_reply(r, 200, list ? json_pack("{s:o}", "deliveries", list) : NULL);
}

enum core_rc api_h_delivery_retry(struct api_req *r)
{
	struct store_delivery *d = NULL;
	const char *id = api_param(r);
	json_t *j;
	const char *colon = strchr(id, ':');
	enum core_rc rc;

	/* The id names its board ("<board>:<seq>.<subscription>"): a token scoped to other
	 * boards gets its 403 before the lookup, whether the delivery exists or not (a 404
	 * would tell it which subscriptions and how many events a board it may not see has). */
	if (colon && colon > id && (size_t)(colon - id) <= CORE_NAME_MAX) {
		char board[CORE_NAME_MAX + 1];

		memcpy(board, id, (size_t)(colon - id));
		board[colon - id] = '\0';
		if ((rc = api_auth_board(r, board)) != CORE_OK)
			return rc;
	}
	rc = store_delivery_get(r->api->st, id, &d);
	if (rc == CORE_ERR_BAD_REQUEST)
		return api_fail(r, rc, "delivery id must match [A-Za-z0-9._:-]{1,200}");
	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, rc, "no delivery %s", id);
	if (rc == CORE_OK)
		rc = api_auth_board(r, d->board);
	store_delivery_free(d);
	d = NULL;
	if (rc != CORE_OK)
		return rc;
	rc = store_delivery_retry(r->api->st, id, &d);
	if (rc == CORE_ERR_STATE_CONFLICT)
		return api_fail(r, rc, "delivery %s is pending already", id);
	if (rc != CORE_OK)
		return rc;
	j = store_delivery_to_json(d, false);
	store_delivery_free(d);
	return api_reply(r, 200, j);
}
