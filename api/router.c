/* The route table (DESIGN §8) and path matching with safe percent-decoding.
 *
 * openapi/check_routes.py reads
 * API_ROUTES below and checks openapi/openapi.yaml lists exactly these methods and paths. */
#include "api/api_answer.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W API_ROLE_WORKER
#define B API_ROLE_BOT
#define O API_ROLE_OPERATOR
#define ANY API_ROLE_ANY
#define PUB API_ROUTE_PUBLIC
#define BODY API_ROUTE_BODY
#define RPC API_ROUTE_JSONRPC
#define FLAT API_ROUTE_FLAT
#define IDEM API_ROUTE_IDEM
#define ARRAY API_ROUTE_ARRAY
#define C_READ API_ROUTE_CAP(API_CAP_READ)
#define C_CREATE API_ROUTE_CAP(API_CAP_CREATE)
#define C_LABEL API_ROUTE_CAP(API_CAP_LABEL)
#define C_COMMENT API_ROUTE_CAP(API_CAP_COMMENT)

/* method, pattern, handler, roles, flags, the body's fields (BODY routes; "?name": may be
 * null), the query's parameters. A field or parameter not listed is refused with 400 naming
 * it (request.c), before the handler: a new one is one word here. FLAT: the handler reads
 * the body through the api_json_* helpers only, so a flat body needs no tree (body.c). */
#define API_ROUTES(X)                                                                      \
	X("GET", "/healthz", api_h_healthz, ANY, PUB, NULL, NULL)                          \
	X("GET", "/readyz", api_h_readyz, ANY, PUB, NULL, NULL)                            \
	X("GET", "/metrics", api_h_metrics, ANY, PUB, NULL, NULL)                          \
	X("GET", "/openapi.json", api_h_openapi_json, ANY, PUB, NULL, NULL)                \
	X("GET", "/openapi.yaml", api_h_openapi_yaml, ANY, PUB, NULL, NULL)                \
	X("POST", "/v1/cards", api_h_card_create, B | O, BODY | IDEM | ARRAY | C_CREATE,   \
	  "id board title body state labels blockers priority ?not_before", NULL)          \
	X("GET", "/v1/cards", api_h_card_list, ANY, C_READ,                                \
	  NULL, "board state label claimed limit after")                                   \
	X("GET", "/v1/cards/{id}", api_h_card_get, ANY, C_READ, NULL, NULL)                \
	X("GET", "/v1/cards/{id}/runs", api_h_card_runs, ANY, C_READ, NULL, "limit after") \
	X("PATCH", "/v1/cards/{id}", api_h_card_patch, B | O, BODY | C_CREATE,             \
	  "title body blockers priority ?not_before", NULL)                                \
	X("DELETE", "/v1/cards/{id}", api_h_card_delete, O, 0, NULL, NULL)                 \
	X("POST", "/v1/cards/{id}/claim", api_h_claim, W, BODY | FLAT,                     \
	  "marker lease_ms", NULL)                                                         \
	X("POST", "/v1/cards/{id}/renew", api_h_renew, W, BODY | FLAT,                     \
	  "marker epoch lease_ms", NULL)                                                   \
	X("POST", "/v1/cards/{id}/release", api_h_release, W, BODY | FLAT,                 \
	  "marker epoch retry", NULL)                                                      \
	X("POST", "/v1/cards/{id}/claim/revoke", api_h_claim_revoke, O, 0, NULL, NULL)     \
	X("POST", "/v1/claims/renew", api_h_claims_renew, W, BODY, "tokens lease_ms", NULL) \
	X("POST", "/v1/claims/release", api_h_claims_release, W, BODY, "tokens", NULL)     \
	X("PATCH", "/v1/cards/{id}/state", api_h_state, ANY, BODY | FLAT,                  \
	  "marker from to reason release retry", NULL)                                     \
	X("PUT", "/v1/cards/{id}/last-run", api_h_last_run, W, BODY | FLAT,                \
	  "marker ?run_id", NULL)                                                          \
	X("PUT", "/v1/cards/{id}/awaiting-input", api_h_awaiting_input, W, BODY | FLAT,    \
	  "marker awaiting_input", NULL)                                                   \
	X("PUT", "/v1/cards/{id}/gave-up", api_h_gave_up, W, BODY,                         \
	  "marker ?gave_up", NULL)                                                         \
	X("POST", "/v1/cards/{id}/reopen", api_h_card_reopen, O, BODY, "to reason", NULL)  \
	X("PUT", "/v1/cards/{id}/labels", api_h_labels_put, B | O, BODY | C_LABEL, "labels", \
	  NULL)                                                                            \
	X("PATCH", "/v1/cards/{id}/labels", api_h_labels_patch, B | O, BODY | C_LABEL,     \
	  "add remove", NULL)                                                              \
	X("POST", "/v1/cards/{id}/agent-tokens", api_h_agent_token, W, BODY,               \
	  "marker caps ttl_ms", NULL)                                                      \
	X("POST", "/v1/cards/{id}/comments", api_h_comment_add, W | B | O, BODY | C_COMMENT, \
	  "body marker", NULL)                                                             \
	X("GET", "/v1/labels", api_h_labels_count, ANY, C_READ, NULL, "board")             \
	X("POST", "/v1/labels/rename", api_h_labels_rename, O, BODY | C_LABEL,             \
	  "board from to", NULL)                                                           \
	X("POST", "/v1/labels/merge", api_h_labels_merge, O, BODY | C_LABEL,               \
	  "board from to", NULL)                                                           \
	X("DELETE", "/v1/labels/{name}", api_h_labels_delete, O, C_LABEL, NULL, "board")   \
	X("POST", "/v1/runs", api_h_run_create, W, BODY | IDEM,                            \
	  "card_id marker status id lease_ms", NULL)                                       \
	X("GET", "/v1/runs", api_h_run_list, ANY, C_READ, NULL,                            \
	  "board status limit after")                                                      \
	X("GET", "/v1/runs/{id}", api_h_run_get, ANY, C_READ, NULL, NULL)                  \
	X("PATCH", "/v1/runs/{id}", api_h_run_patch, W, BODY,                              \
	  "marker status ?continuation failure_code ?result error lease_ms", NULL)         \
	X("DELETE", "/v1/runs/{id}", api_h_run_delete, O, 0, NULL, NULL)                   \
	X("POST", "/v1/runs/{id}/heartbeat", api_h_run_heartbeat, W, BODY,                 \
	  "marker lease_ms", NULL)                                                         \
	X("POST", "/v1/runs/{id}/cancel", api_h_run_cancel, O, 0, NULL, NULL)              \
	X("POST", "/v1/runs/{id}/output", api_h_run_output, W, BODY, "marker text", NULL)  \
	X("GET", "/v1/events", api_h_events, ANY, C_READ, NULL, "board after limit wait_ms") \
	X("GET", "/v1/events/stream", api_h_events_stream, ANY, C_READ, NULL, "board after") \
	X("GET", "/v1/attention", api_h_attention, ANY, C_READ, NULL, "board limit")       \
	X("GET", "/v1/whoami", api_h_whoami, ANY, 0, NULL, NULL)                           \
	X("GET", "/", api_h_root, ANY, PUB, NULL, NULL)                                    \
	X("GET", "/ui", api_h_ui_root, ANY, PUB, NULL, NULL)                               \
	X("GET", "/ui/", api_h_ui_index, ANY, PUB, NULL, NULL)                             \
	X("GET", "/ui/{file}", api_h_ui_asset, ANY, PUB, NULL, NULL)                       \
	X("GET", "/v1/boards", api_h_board_list, ANY, C_READ, NULL, NULL)                  \
	X("GET", "/v1/boards/{b}", api_h_board_get, ANY, C_READ, NULL, NULL)               \
	X("PUT", "/v1/boards/{b}", api_h_board_put, O, BODY,                               \
	  "name columns running completed failed waiting ?max_claims ?retry claimed retry_effective", \
	  NULL)                                                                            \
	X("POST", "/v1/boards/{b}/columns/{c}/rename", api_h_column_rename, O, BODY,       \
	  "to", NULL)                                                                      \
	X("POST", "/v1/boards/{b}/claim-next", api_h_claim_next, W, BODY | IDEM,           \
	  "marker lease_ms columns labels wait_ms count", NULL)                            \
	X("GET", "/v1/boards/{b}/activity", api_h_board_activity, ANY, C_READ, NULL, "minutes") \
	X("GET", "/v1/boards/{b}/subscriptions", api_h_sub_list, O, 0, NULL, NULL)         \
	X("GET", "/v1/boards/{b}/subscriptions/{name}", api_h_sub_get, O, 0, NULL, NULL)   \
	X("PUT", "/v1/boards/{b}/subscriptions/{name}", api_h_sub_put, O, BODY,            \
	  "url secret on consume_labels enabled", NULL)                                    \
	X("DELETE", "/v1/boards/{b}/subscriptions/{name}", api_h_sub_delete, O, 0,         \
	  NULL, NULL)                                                                      \
	X("GET", "/v1/deliveries", api_h_delivery_list, O, 0, NULL, "board status limit")  \
	X("POST", "/v1/deliveries/{id}/retry", api_h_delivery_retry, O, 0, NULL, NULL)     \
	X("GET", "/v1/reaper", api_h_reaper_get, ANY, 0, NULL, NULL)                       \
	X("POST", "/v1/reaper/pass", api_h_reaper_pass, O, 0, NULL, NULL)                  \
	X("POST", "/mcp", api_h_mcp, B | O, RPC, NULL, NULL)

static const struct api_route routes[] = {
#define API_ROUTE_ROW(m, p, h, ro, fl, fi, q) {m, p, h, ro, fl, fi, q},
	API_ROUTES(API_ROUTE_ROW)
#undef API_ROUTE_ROW
};

const struct api_route *api_router_table(size_t *n)
{
	*n = sizeof routes / sizeof routes[0];
	return routes;
}

#define MAX_SEGS 8

/* Splits "/a/b/c" into borrowed [start, len) segments; false when malformed or too deep. */
static bool path_split(const char *p, const char **seg, size_t *len, size_t *n)
{
	size_t k = 0;

	if (!p || p[0] != '/')
		return false;
	p++;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t l = slash ? (size_t)(slash - p) : strlen(p);

		if (k == MAX_SEGS)
			return false;
		seg[k] = p;
		len[k] = l;
		k++;
		if (!slash)
			break;
		p = slash + 1;
	}
	*n = k;
	return true;
}

/* Path parameter k of r decoded: into the request's own storage when it fits, else malloc'd
 * (params_heap says which). NULL as api_pct_decode. */
static char *param_decode(struct api_req *r, size_t k, const char *s, size_t len, bool *oom)
{
	char *out;

	*oom = false;
	if (len + 1 <= sizeof r->inl.params - r->inl.params_len) {
		out = r->inl.params + r->inl.params_len;
		if (!api_pct_decode_to(s, len, false, out))
			return NULL;
		r->inl.params_len += len + 1;
		return out;
	}
	out = api_pct_decode(s, len, false, oom);
	if (out)
		r->params_heap |= 1u << k;
	return out;
}

/* The patterns split once (they are constant): splitting ~80 patterns twice per request
 * cost 3 % of the server's CPU in the claim-cycle profile. */
struct route_segs {
	const char *seg[MAX_SEGS];
	size_t len[MAX_SEGS];
	size_t n;
	bool ok;
	bool last_lit; /* the last segment is literal: a path's must have its length and first byte */
};

#define N_ROUTES (sizeof routes / sizeof routes[0])

static struct route_segs route_segs[N_ROUTES];
/* Routes, by index, in table order. */
struct route_list {
	unsigned short v[N_ROUTES];
	size_t n;
};
/* The routes a path of n segments can match, by its last segment: for each last segment a
 * pattern has as a literal (its last_key), the routes with that one or a parameter there;
 * for any other, those with a parameter there (`wild`). A path is matched against its list
 * only: it was every route of its length (20 of 4 segments), each judged by its last
 * segment, and before that every route. */
static struct {
	uint32_t key[N_ROUTES];
	struct route_list list[N_ROUTES];
	size_t n;
	struct route_list wild;
} route_by_last[MAX_SEGS + 1];
static pthread_once_t route_segs_once = PTHREAD_ONCE_INIT;

/* A segment's length and first byte in one word (a literal segment is never empty here). */
static uint32_t last_key(const char *seg, size_t len)
{
	return len ? (uint32_t)(len << 8 | (unsigned char)seg[0]) : 0;
}

static uint32_t route_last_key(size_t i)
{
	const struct route_segs *p = &route_segs[i];

	return p->last_lit ? last_key(p->seg[p->n - 1], p->len[p->n - 1]) : 0;
}

static void route_segs_init(void)
{
	size_t i, j, n;
	uint32_t k;

	for (i = 0; i < N_ROUTES; i++) {
		route_segs[i].ok = path_split(routes[i].pattern, route_segs[i].seg,
					      route_segs[i].len, &route_segs[i].n);
		if (!route_segs[i].ok)
			continue;
		n = route_segs[i].n;
		route_segs[i].last_lit = route_segs[i].len[n - 1] > 0 &&
					 route_segs[i].seg[n - 1][0] != '{';
		k = route_last_key(i);
		for (j = 0; k && j < route_by_last[n].n && route_by_last[n].key[j] != k; j++)
			;
		if (k && j == route_by_last[n].n)
			route_by_last[n].key[route_by_last[n].n++] = k;
	}
	/* Each list in table order: the first among the best matches wins (api_router_match). */
	for (i = 0; i < N_ROUTES; i++) {
		if (!route_segs[i].ok)
			continue;
		n = route_segs[i].n;
		k = route_last_key(i);
		for (j = 0; j < route_by_last[n].n; j++)
			if (!k || route_by_last[n].key[j] == k)
				route_by_last[n].list[j].v[route_by_last[n].list[j].n++] =
					(unsigned short)i;
		if (!k)
			route_by_last[n].wild.v[route_by_last[n].wild.n++] = (unsigned short)i;
	}
}

/* The routes a path of n segments whose last one is [seg, seg + len) may match. */
static const struct route_list *route_candidates(size_t n, const char *seg, size_t len)
{
	uint32_t k = last_key(seg, len);
	size_t j;

	for (j = 0; j < route_by_last[n].n; j++)
		if (route_by_last[n].key[j] == k)
			return &route_by_last[n].list[j];
	return &route_by_last[n].wild;
}

/* Does route i's pattern match the split path? Literal segments compare raw, the last one
 * first (most routes that share a length differ there: claim, renew, state...), a first byte
 * before the rest. Returns the number of literal segments that matched (its specificity), or
 * -1. */
static int pattern_match(size_t route, const char *const *seg, const size_t *len, size_t n)
{
	const struct route_segs *p = &route_segs[route];
	size_t i = n;
	int lit = 0;

	if (!p->ok || p->n != n)
		return -1;
	while (i--) {
		if (p->len[i] > 0 && p->seg[i][0] == '{') {
			if (len[i] == 0)
				return -1;
			continue;
		}
		if (p->len[i] != len[i] ||
		    (len[i] && (p->seg[i][0] != seg[i][0] ||
				memcmp(p->seg[i] + 1, seg[i] + 1, len[i] - 1) != 0)))
			return -1;
		lit++;
	}
	return lit;
}

/* The highest specificity any route has for the path: a literal segment beats a parameter,
 * whatever the method (DELETE /v1/labels/merge is the merge route's 405, never the deletion
 * of a label named "merge"). -1 when none matches. Only the routes of `c` can match: OUT
 * m[j], the match of route c->v[j]. */
static int best_specificity(const struct route_list *c, const char *const *seg,
			    const size_t *len, size_t n, int *m)
{
	int best = -1;
	size_t j;

	for (j = 0; j < c->n; j++) {
		m[j] = pattern_match(c->v[j], seg, len, n);
		if (m[j] > best)
			best = m[j];
	}
	return best;
}

static void allow_add(char *allow, size_t cap, const char *method)
{
	size_t l = strlen(allow);

	if (strstr(allow, method))
		return;
	snprintf(allow + l, cap - l, "%s%s", l ? ", " : "", method);
}

enum core_rc api_router_match(struct api_req *r)
{
	const char *seg[MAX_SEGS];
	size_t len[MAX_SEGS], n, i, k;
	const struct api_route *hit = NULL;
	const struct route_segs *p;
	const struct route_list *c;
	int m[N_ROUTES];

	/* HEAD is answered by every GET route (libmicrohttpd sends the headers only). */
	const char *method = strcmp(r->method, "HEAD") == 0 ? "GET" : r->method;

	int best;

	pthread_once(&route_segs_once, route_segs_init);
	r->allow[0] = '\0';
	if (!path_split(r->path, seg, len, &n))
		return api_fail(r, CORE_ERR_NOT_FOUND, "no such route");
	c = route_candidates(n, seg[n - 1], len[n - 1]);
	best = best_specificity(c, seg, len, n, m);
	/* The first in table order among the best (the list keeps table order). */
	for (i = 0; best >= 0 && !hit && i < c->n; i++)
		if (m[i] == best && strcmp(routes[c->v[i]].method, method) == 0)
			hit = &routes[c->v[i]];
	if (best < 0)
		return api_fail(r, CORE_ERR_NOT_FOUND, "no such route");
	if (!hit) { /* the Allow header of the 405, only then */
		for (i = 0; i < c->n; i++) {
			const struct api_route *rt = &routes[c->v[i]];

			if (m[i] != best)
				continue;
			allow_add(r->allow, sizeof r->allow, rt->method);
			if (strcmp(rt->method, "GET") == 0)
				allow_add(r->allow, sizeof r->allow, "HEAD");
		}
		return api_fail(r, CORE_ERR_METHOD_NOT_ALLOWED, "allowed: %s", r->allow);
	}

	p = &route_segs[hit - routes];
	for (i = 0, k = 0; i < n; i++) {
		bool oom;

		if (p->len[i] == 0 || p->seg[i][0] != '{')
			continue;
		if (k == API_MAX_PARAMS)
			return CORE_ERR_INTERNAL;
		r->params[k] = param_decode(r, k, seg[i], len[i], &oom);
		if (!r->params[k])
			return oom ? CORE_ERR_NOMEM
				   : api_fail(r, CORE_ERR_BAD_REQUEST,
					      "malformed percent-encoding in the path");
		r->n_params = ++k;
	}
	r->route = hit;
	return CORE_OK;
}
