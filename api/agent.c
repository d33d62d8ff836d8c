/* Agent tokens (DESIGN §13): a worker holding a claim mints a bot token for the card's board
 * with a subset of its capabilities, for the agent its job runs. The token works only while
 * that claim is the card's current claim: every request with it reads the card and checks the
 * fence (marker + epoch), so a release, a reaper's reclaim or a revoke ends it at once.
 *
 * Nothing stores the token. It carries its own binding, signed:
 *     "bat1." base64url(payload JSON) "." base64url(HMAC-SHA256(key, "bat1." payload))
 * payload {c: card, b: board, m: marker, e: epoch, h: minting token's name, d: its print,
 *          k: caps, x: expiry}
 * The print (minter_print) binds it to the minting token as the tokens file holds it: once a
 * reload removes or changes that token, the agent token is refused (401) at once.
 * The key is the deployment's secret "agent-token-key" (store_secret_get), the same bytes on
 * every replica that shares the store, so any replica verifies a token another one minted,
 * and the claim it is bound to is read from that same store. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_cards.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGENT_PREFIX "bat1."
#define AGENT_TOKEN_MAX 2048 /* card id + marker + names: far below this */

static const char b64u[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* base64url without padding into out (room for 4 * ceil(n / 3) + 1). */
static void b64u_encode(const unsigned char *in, size_t n, char *out)
{
	size_t i, o = 0;

	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];

		out[o++] = b64u[v >> 18];
		out[o++] = b64u[(v >> 12) & 63];
		out[o++] = b64u[(v >> 6) & 63];
		out[o++] = b64u[v & 63];
	}
	if (n - i == 1) {
		unsigned v = (unsigned)in[i] << 16;

		out[o++] = b64u[v >> 18];
		out[o++] = b64u[(v >> 12) & 63];
	} else if (n - i == 2) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;

		out[o++] = b64u[v >> 18];
		out[o++] = b64u[(v >> 12) & 63];
		out[o++] = b64u[(v >> 6) & 63];
	}
	out[o] = '\0';
}

static int b64u_val(char c)
{
	const char *p = c ? strchr(b64u, c) : NULL;

	return p ? (int)(p - b64u) : -1;
}

/* Decodes [s, s+n) into out (room for n bytes); the length, or -1 when not base64url. */
static long b64u_decode(const char *s, size_t n, unsigned char *out)
{
	unsigned acc = 0;
	int bits = 0;
	long o = 0;
	size_t i;

	if (n % 4 == 1)
		return -1;
	for (i = 0; i < n; i++) {
		int v = b64u_val(s[i]);

		if (v < 0)
			return -1;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
		acc &= (1u << bits) - 1;
	}
	return acc ? -1 : o; /* leftover bits must be zero: one spelling per token */
}

/* The signing key, read from the store once per api. */
static enum core_rc agent_key(struct api *a, unsigned char key[STORE_SECRET_LEN])
{
	enum core_rc rc = CORE_OK;

	pthread_mutex_lock(&a->agent_mu);
	if (!a->agent_key_ok) {
		rc = store_secret_get(a->st, "agent-token-key", a->agent_key);
		a->agent_key_ok = rc == CORE_OK;
	}
	if (rc == CORE_OK)
		memcpy(key, a->agent_key, STORE_SECRET_LEN);
	pthread_mutex_unlock(&a->agent_mu);
	return rc;
}

static bool agent_mac(const unsigned char key[STORE_SECRET_LEN], const char *msg, size_t n,
		      unsigned char mac[32])
{
	unsigned int len = 0;

	return HMAC(EVP_sha256(), key, STORE_SECRET_LEN, (const unsigned char *)msg, n, mac,
		    &len) && len == 32;
}

/* The minting token as it stands in the tokens file (its digest, roles, capabilities and
 * boards), keyed so the payload shows nothing of it: out gets 22 base64url characters. An
 * agent token carries its minter's print ("d"); a reload that removes or changes the minter
 * changes the print (or leaves no such token), and the agent token is refused at once. */
static bool minter_print(const unsigned char key[STORE_SECRET_LEN], const struct api_token *t,
			 char out[23])
{
	char head[64], *msg = NULL;
	size_t n = 0, i;
	unsigned char mac[32];
	FILE *f = open_memstream(&msg, &n);
	bool ok;

	if (!f)
		return false;
	snprintf(head, sizeof head, "minter\n%u\n%u\n%d\n", t->roles, t->caps, (int)t->all_boards);
	fputs(head, f);
	fputs(t->name ? t->name : "", f);
	fputc('\n', f);
	fwrite(t->sha256, 1, sizeof t->sha256, f);
	for (i = 0; i < t->n_boards; i++) {
		fputc('\n', f);
		fputs(t->boards[i], f);
	}
	ok = fclose(f) == 0 && msg && agent_mac(key, msg, n, mac);
	free(msg);
	if (ok)
		b64u_encode(mac, 16, out);
	OPENSSL_cleanse(mac, sizeof mac);
	return ok;
}

/* ---- minting: POST /v1/cards/{id}/agent-tokens ---- */

/* caps: a non-empty array of cap names, each held by the minting token. */
static enum core_rc caps_parse(struct api_req *r, unsigned *out)
{
	const json_t *arr = json_object_get(r->json, "caps"), *v;
	size_t i;

	*out = 0;
	if (!arr)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "missing field \"caps\"");
	if (!json_is_array(arr) || json_array_size(arr) == 0)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"\"caps\" must be a non-empty array of capability names");
	json_array_foreach(arr, i, v) {
		unsigned bit = api_cap_parse(json_string_value(v));

		if (!bit)
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"caps[%zu] is not a capability (board.read, board.create, "
					"board.move, board.label, board.comment, board.close)",
					i);
		if (!(r->tok->caps & bit))
			return api_fail(r, CORE_ERR_FORBIDDEN,
					"token %s does not hold %s, so it cannot grant it",
					r->tok->name, api_cap_name(bit));
		*out |= bit;
	}
	return CORE_OK;
}

enum core_rc api_h_agent_token(struct api_req *r)
{
	struct core_card *c = NULL;
	struct core_token t;
	unsigned char key[STORE_SECRET_LEN], mac[32];
	char *payload = NULL, *tok = NULL, *p64 = NULL, print[23];
	json_t *pj = NULL;
	const char *marker;
	int64_t epoch, ttl = 0, expires;
	unsigned caps;
	bool has_ttl = false;
	size_t plen, n;
	enum core_rc rc;

	if ((rc = api_json_marker(r, true, &marker)) != CORE_OK ||
	    (rc = caps_parse(r, &caps)) != CORE_OK ||
	    (rc = api_json_int(r, "ttl_ms", false, &ttl, &has_ttl)) != CORE_OK ||
	    (rc = api_if_match(r, &epoch)) != CORE_OK)
		return rc;
	if (has_ttl && (ttl < 1 || ttl > r->api->cfg.lease_max_ms))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "ttl_ms must be in [1, %lld]",
				(long long)r->api->cfg.lease_max_ms);
	if (!has_ttl)
		ttl = r->api->cfg.lease_max_ms;
	if ((rc = api_card_load(r, api_param(r), &c)) != CORE_OK)
		return rc;
	/* Only the claim's holder mints: the exact (marker, epoch) of the current claim. */
	t.marker = marker;
	t.epoch = epoch;
	t.holder = r->tok->name; /* the claim is bound to the token that took it (§11) */
	if (core_fence_check(c, &t) != CORE_OK) {
		rc = api_fail(r, CORE_ERR_CLAIM_CONFLICT,
			      "card %s is not held by marker %s at epoch %lld for token %s", c->id,
			      marker, (long long)epoch, r->tok->name);
		goto out;
	}
	if ((rc = agent_key(r->api, key)) != CORE_OK)
		goto out;
	rc = CORE_ERR_INTERNAL;
	if (!minter_print(key, r->tok, print))
		goto out;
	expires = store_now(r->api->st) + ttl;
	pj = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:i, s:I}", "c", c->id, "b", c->board,
		       "m", marker, "e", (json_int_t)epoch, "h", r->tok->name, "d", print, "k",
		       (int)caps, "x", (json_int_t)expires);
	payload = pj ? json_dumps(pj, JSON_COMPACT) : NULL;
	rc = CORE_ERR_NOMEM;
	if (!payload)
		goto out;
	plen = strlen(payload);
	p64 = malloc(strlen(AGENT_PREFIX) + plen / 3 * 4 + 8);
	tok = malloc(strlen(AGENT_PREFIX) + plen / 3 * 4 + 8 + 1 + 44);
	if (!p64 || !tok)
		goto out;
	strcpy(p64, AGENT_PREFIX);
	b64u_encode((const unsigned char *)payload, plen, p64 + strlen(AGENT_PREFIX));
	rc = CORE_ERR_INTERNAL;
	if (!agent_mac(key, p64, strlen(p64), mac))
		goto out;
	n = strlen(p64);
	memcpy(tok, p64, n);
	tok[n] = '.';
	b64u_encode(mac, sizeof mac, tok + n + 1);
	rc = api_reply(r, 201, json_pack("{s:s, s:o}", "token", tok, "expires_at",
					 api_time_json(expires)));
out:
	OPENSSL_cleanse(key, sizeof key);
	if (tok)
		OPENSSL_cleanse(tok, strlen(tok));
	free(tok);
	free(p64);
	free(payload);
	json_decref(pj);
	core_card_free(c);
	return rc;
}

/* ---- verifying: every request that presents one ---- */

bool api_agent_is(const char *plain)
{
	return strncmp(plain, AGENT_PREFIX, strlen(AGENT_PREFIX)) == 0;
}

void api_agent_release(struct api_req *r)
{
	size_t i;

	free(r->agent_tok.name);
	free(r->agent_idem);
	r->agent_idem = NULL;
	for (i = 0; i < r->agent_tok.n_boards; i++)
		free(r->agent_tok.boards[i]);
	free(r->agent_tok.boards);
	memset(&r->agent_tok, 0, sizeof r->agent_tok);
}

/* The request's token for an agent token: "<h>/agent", role bot, the card's board, caps k. */
static enum core_rc agent_tok_fill(struct api_req *r, const char *holder, const char *board,
				   unsigned caps)
{
	struct api_token *t = &r->agent_tok;

	api_agent_release(r);
	if (asprintf(&t->name, "%s/agent", holder) < 0) {
		t->name = NULL;
		return CORE_ERR_NOMEM;
	}
	t->boards = calloc(2, sizeof *t->boards);
	if (!t->boards || !(t->boards[0] = strdup(board))) {
		api_agent_release(r);
		return CORE_ERR_NOMEM;
	}
	t->n_boards = 1;
	t->roles = API_ROLE_BOT;
	t->caps = caps & API_CAP_ALL;
	return CORE_OK;
}

enum core_rc api_agent_auth(struct api_req *r, const char *plain)
{
	unsigned char key[STORE_SECRET_LEN], mac[32], got[33];
	unsigned char *pbuf = NULL;
	const char *dot, *p = plain + strlen(AGENT_PREFIX);
	const char *card, *board, *marker, *holder, *print;
	const struct api_token *minter;
	char now_print[23];
	json_t *pj = NULL;
	json_int_t epoch = 0, caps = 0, expires = 0;
	struct core_card *c = NULL;
	struct core_token t;
	size_t n = strlen(plain);
	long plen;
	enum core_rc rc = CORE_ERR_UNAUTHORIZED;

	dot = strchr(p, '.');
	if (n > AGENT_TOKEN_MAX || !dot || strlen(dot + 1) != 43 ||
	    b64u_decode(dot + 1, 43, got) != 32)
		return api_fail(r, rc, "malformed agent token");
	rc = agent_key(r->api, key);
	if (rc != CORE_OK)
		return rc;
	rc = CORE_ERR_UNAUTHORIZED;
	if (!agent_mac(key, plain, (size_t)(dot - plain), mac) || CRYPTO_memcmp(mac, got, 32) != 0) {
		OPENSSL_cleanse(key, sizeof key);
		return api_fail(r, rc, "agent token signature does not verify");
	}
	pbuf = malloc((size_t)(dot - p) + 1);
	if (!pbuf) {
		OPENSSL_cleanse(key, sizeof key);
		return CORE_ERR_NOMEM;
	}
	plen = b64u_decode(p, (size_t)(dot - p), pbuf);
	pj = plen > 0 ? json_loadb((const char *)pbuf, (size_t)plen, 0, NULL) : NULL;
	free(pbuf);
	if (!pj || json_unpack(pj, "{s:s, s:s, s:s, s:I, s:s, s:s, s:I, s:I}", "c", &card, "b",
			       &board, "m", &marker, "e", &epoch, "h", &holder, "d", &print, "k",
			       &caps, "x", &expires) != 0) {
		OPENSSL_cleanse(key, sizeof key);
		rc = api_fail(r, rc, "malformed agent token");
		goto out;
	}
	/* The minter as the tokens file holds it now: removed, or changed by a reload (another
	 * secret, role, capability or board), and its agent tokens die with it. */
	minter = api_tokens_named(atomic_load(&r->api->tokens_now), holder);
	if (!minter || !minter_print(key, minter, now_print) ||
	    strlen(print) != 22 || CRYPTO_memcmp(now_print, print, 22) != 0) {
		OPENSSL_cleanse(key, sizeof key);
		rc = api_fail(r, rc, "agent token: the token that minted it (%s) was removed or "
			      "changed", holder);
		goto out;
	}
	OPENSSL_cleanse(key, sizeof key);
	if (store_now(r->api->st) >= expires) {
		rc = api_fail(r, rc, "agent token expired");
		goto out;
	}
	rc = store_card_get(r->api->st, card, &c);
	if (rc == CORE_ERR_NOT_FOUND) {
		rc = api_fail(r, CORE_ERR_UNAUTHORIZED, "agent token: card %s is gone", card);
		goto out;
	}
	if (rc != CORE_OK)
		goto out;
	t.marker = marker;
	t.epoch = epoch;
	t.holder = holder;
	if (strcmp(c->board, board) != 0 || core_fence_check(c, &t) != CORE_OK) {
		rc = api_fail(r, CORE_ERR_UNAUTHORIZED,
			      "agent token: the claim it was minted under (card %s, marker %s, epoch "
			      "%lld) is no longer the card's claim (released, reclaimed or revoked)",
			      card, marker, (long long)epoch);
		goto out;
	}
	rc = agent_tok_fill(r, holder, board, (unsigned)caps);
	/* Every agent token of a worker is named "<worker>/agent": its keys are scoped by the
	 * claim it was minted under too, or one claim's agent would replay another's answers
	 * (another card, maybe another board). */
	if (rc == CORE_OK && asprintf(&r->agent_idem, "%s card %s epoch %lld", r->agent_tok.name,
				      card, (long long)epoch) < 0) {
		r->agent_idem = NULL;
		api_agent_release(r);
		rc = CORE_ERR_NOMEM;
	}
	if (rc == CORE_OK) {
		r->tok = &r->agent_tok;
		r->agent_epoch = (int64_t)epoch;
	}
out:
	core_card_free(c);
	json_decref(pj);
	return rc;
}
