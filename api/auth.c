/* A request's authentication (DESIGN §8, §10): its bearer token (a tokens-file token, cached
 * per connection, or an agent token, agent.c), the route's roles and capabilities, and the
 * token's board scope. The tokens themselves are tokens.c's. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_conns.h"
#include "api/api_daemon.h"
#include "api/api_req.h"

#include <openssl/crypto.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Do a and b hold the same n bytes? In time that depends on n only, eight bytes a step: the
 * byte loop of CRYPTO_memcmp cost ~450 instructions a request of the claim cycle
 * (bench/instr.sh), this ~40. */
static bool same_bytes(const char *a, const char *b, size_t n)
{
	uint64_t x, y, diff = 0;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		diff |= x ^ y;
		/* An empty barrier: the compiler cannot see diff, so it cannot stop the loop
		 * early once diff is non-zero (what CRYPTO_memcmp's volatile reads guard). */
		__asm__ volatile("" : "+r"(diff));
	}
	for (; i < n; i++) {
		diff |= (uint64_t)((unsigned char)a[i] ^ (unsigned char)b[i]);
		__asm__ volatile("" : "+r"(diff));
	}
	return diff == 0;
}

/* The token for `plain`: the connection's cached one when the client sends the same token
 * again (compared in constant time), else looked up (SHA-256 of every try) and cached. */
static const struct api_token *conn_token(struct api_req *r, const char *plain)
{
	struct api_conn *cc = api_conn_of(r->conn);
	size_t len = strlen(plain);
	const struct api_token *tok;
	/* The generation first: a set replaced after this load is seen by the next request. */
	unsigned gen = atomic_load(&r->api->tokens_gen);

	if (cc && cc->len && cc->len == len && cc->tokens_gen == gen &&
	    same_bytes(cc->plain, plain, len))
		return cc->tok;
	tok = api_tokens_find(atomic_load(&r->api->tokens_now), plain);
	if (cc) {
		OPENSSL_cleanse(cc->plain, sizeof(cc->plain));
		cc->len = 0;
		cc->tok = NULL;
		if (tok && len < sizeof(cc->plain)) {
			memcpy(cc->plain, plain, len);
			cc->len = len;
			cc->tok = tok;
			cc->tokens_gen = gen;
		}
	}
	return tok;
}

enum core_rc api_auth_check(struct api_req *r)
{
	const char *h;

	if (r->route->flags & API_ROUTE_PUBLIC)
		return CORE_OK;
	h = api_req_header(r, API_HDR_AUTHORIZATION);
	if (!h)
		return api_fail(r, CORE_ERR_UNAUTHORIZED, "missing Authorization: Bearer <token>");
	/* A singleton field (RFC 9110): which of two credentials speaks is not ours to guess. */
	if (r->hdr.auth_twice)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"more than one Authorization header: send exactly one");
	if (strncasecmp(h, "Bearer ", 7) != 0)
		return api_fail(r, CORE_ERR_UNAUTHORIZED, "expected a Bearer token");
	h += 7;
	while (*h == ' ')
		h++;
	if (api_agent_is(h)) {
		enum core_rc rc = api_agent_auth(r, h);

		if (rc != CORE_OK)
			return rc;
	} else {
		r->tok = conn_token(r, h);
	}
	if (!r->tok)
		return api_fail(r, CORE_ERR_UNAUTHORIZED, "unknown token");
	if (!(r->tok->roles & r->route->roles))
		return api_fail(r, CORE_ERR_FORBIDDEN, "token %s lacks the role for %s %s",
				r->tok->name, r->route->method, r->route->pattern);
	return api_auth_cap(r, r->route->flags >> API_ROUTE_CAP_SHIFT);
}

enum core_rc api_auth_cap(struct api_req *r, unsigned caps)
{
	unsigned missing = caps & ~(r->tok ? r->tok->caps : 0u);
	unsigned bit;

	if (!missing)
		return CORE_OK;
	for (bit = 1; !(missing & bit); bit <<= 1)
		;
	return api_fail(r, CORE_ERR_FORBIDDEN, "token %s lacks the capability %s",
			r->tok ? r->tok->name : "?", api_cap_name(bit));
}

unsigned api_auth_state_cap(struct api_req *r, const char *board, const char *to)
{
	struct core_board b = {0};
	unsigned cap = API_CAP_MOVE;

	if (store_board_get(r->api->st, board, &b) != CORE_OK)
		return cap;
	if (core_board_is_terminal(&b, to))
		cap = API_CAP_CLOSE;
	core_board_release(&b);
	return cap;
}

enum core_rc api_auth_board(struct api_req *r, const char *board)
{
	if (api_token_board_allowed(r->tok, board))
		return CORE_OK;
	return api_fail(r, CORE_ERR_FORBIDDEN, "token %s may not access board %s",
			r->tok ? r->tok->name : "?", board ? board : "?");
}

const char *const *api_auth_boards(const struct api_req *r)
{
	static const char *const none[] = {NULL};

	if (!r->tok)
		return none;
	if (r->tok->all_boards)
		return NULL;
	return r->tok->boards ? (const char *const *)r->tok->boards : none;
}

struct store_actor api_auth_actor(const struct api_req *r)
{
	struct store_actor a = {.name = r->tok ? r->tok->name : "",
				.epoch = r->agent_epoch,
				.operator_role = api_auth_has(r, API_ROLE_OPERATOR)};

	return a;
}

/* ---- a long-lived answer's credential ---- */

/* The bearer token of a request api_auth_check let through. */
static const char *bearer(struct api_req *r)
{
	const char *h = api_req_header(r, API_HDR_AUTHORIZATION);

	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	for (h += 7; *h == ' ';)
		h++;
	return h;
}

enum core_rc api_cred_keep(struct api_req *r, struct api_cred *c)
{
	const char *h = bearer(r);

	memset(c, 0, sizeof *c);
	if (!h || !(c->plain = strdup(h)))
		return CORE_ERR_NOMEM;
	c->agent = r->tok == &r->agent_tok;
	c->tok = c->agent ? NULL : r->tok;
	c->gen = atomic_load(&r->api->tokens_gen);
	return CORE_OK;
}

static bool same_token(const struct api_token *a, const struct api_token *b)
{
	size_t i;

	if (strcmp(a->name, b->name) != 0 || a->roles != b->roles || a->caps != b->caps ||
	    a->all_boards != b->all_boards || a->n_boards != b->n_boards)
		return false;
	for (i = 0; i < a->n_boards; i++)
		if (strcmp(a->boards[i], b->boards[i]) != 0)
			return false;
	return true;
}

bool api_cred_valid(struct api *a, struct api_cred *c)
{
	unsigned gen = atomic_load(&a->tokens_gen);
	const struct api_token *now;

	if (c->agent) {
		/* A request of its own: the same check any request with this token gets. */
		struct api_req *t = calloc(1, sizeof *t);
		enum core_rc rc;

		if (!t)
			return true; /* out of memory is not a revocation: the next check decides */
		t->api = a;
		rc = api_agent_auth(t, c->plain);
		api_agent_release(t);
		free(t);
		/* Only a refusal ends it: a store that cannot answer now is no revocation (the
		 * stream's own read fails the same way, and the client resumes from its id). */
		return rc != CORE_ERR_UNAUTHORIZED;
	}
	if (gen == c->gen)
		return true;
	now = api_tokens_find(atomic_load(&a->tokens_now), c->plain);
	if (!now || !c->tok || !same_token(now, c->tok))
		return false;
	c->tok = now;
	c->gen = gen;
	return true;
}

void api_cred_release(struct api_cred *c)
{
	if (c->plain) {
		OPENSSL_cleanse(c->plain, strlen(c->plain));
		free(c->plain);
	}
	memset(c, 0, sizeof *c);
}
