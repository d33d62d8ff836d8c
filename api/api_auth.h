/* A request's token: the served token sets (tokens.c), the bearer check, board scope and
 * capabilities (auth.c), and agent tokens (agent.c). */
#ifndef BOARDD_API_API_AUTH_H
#define BOARDD_API_API_AUTH_H

#include "api/api.h"
#include "api/api_req.h"
#include "store/store.h"

#include <stdbool.h>

/* ---- tokens.c: the served token sets ---- */
/* The token named `name` in t (the first), or NULL. */
const struct api_token *api_tokens_named(const struct api_tokens *t, const char *name);
/* Frees every set api_tokens_replace was handed (api_stop). */
void api_tokens_free(struct api *a);

/* ---- auth.c: a request's token ---- */
/* Checks the bearer token and the route's roles. */
enum core_rc api_auth_check(struct api_req *r);
/* 403 unless the token sees `board`. */
enum core_rc api_auth_board(struct api_req *r, const char *board);
static inline bool api_auth_has(const struct api_req *r, unsigned roles)
{
	return r->tok && (r->tok->roles & roles);
}
/* 403 naming the capability unless the token holds every bit of `caps`. */
enum core_rc api_auth_cap(struct api_req *r, unsigned caps);
/* The capability a state write into column `to` of board `board` needs: board.close into a
 * terminal column, board.move otherwise (an unknown board or column: board.move, and the
 * store refuses the write itself). */
unsigned api_auth_state_cap(struct api_req *r, const char *board, const char *to);

/* ---- a long-lived answer's credential (the event stream) ----
 * A request is authenticated once, when it arrives; an answer that goes on for hours checks
 * its token again before each thing it sends: revoked, expired, removed or changed by a
 * reload, and it ends (the client's reconnect then gets its 401). */
struct api_cred {
	char *plain;                 /* owned copy of the bearer token (cleansed when freed) */
	const struct api_token *tok; /* a tokens-file token as it was at the last check */
	unsigned gen;                /* tokens_gen then */
	bool agent;                  /* an agent token: its whole check again (agent.c) */
};
/* Keeps r's credential (after api_auth_check passed); NOMEM only. */
enum core_rc api_cred_keep(struct api_req *r, struct api_cred *c);
/* Is it still good? An agent token: signature, minter, expiry and claim, read now; a
 * tokens-file token: unchanged in the set now loaded (cheap while no reload happened). */
bool api_cred_valid(struct api *a, struct api_cred *c);
void api_cred_release(struct api_cred *c);

/* ---- agent.c: agent tokens ---- */
/* Does this bearer token look like an agent token? */
bool api_agent_is(const char *plain);
/* Verifies an agent token (signature, expiry, the claim still current) and points r->tok at
 * the request's own token for it. UNAUTHORIZED with a detail otherwise. */
enum core_rc api_agent_auth(struct api_req *r, const char *plain);
/* (An agent token also dies with the token that minted it: removed or changed on reload.) */
/* Frees r->agent_tok's contents. */
void api_agent_release(struct api_req *r);

const char *const *api_auth_boards(const struct api_req *r);
/* The actor recorded on events. */
struct store_actor api_auth_actor(const struct api_req *r);

#endif
