/* The handlers of the route table (router.c): one prototype per route, by the file that
 * defines it, and the router itself; the openapi data embedded at build time. */
#ifndef BOARDD_API_API_HANDLERS_H
#define BOARDD_API_API_HANDLERS_H

#include "api/api_req.h"
#include "core/core.h"

#include <jansson.h>

#include <stddef.h>

/* ---- router.c ---- */
/* Resolves r->path against the table: sets r->route and r->params, or returns NOT_FOUND /
 * METHOD_NOT_ALLOWED (filling r->allow) / BAD_REQUEST (undecodable segment). */
enum core_rc api_router_match(struct api_req *r);
const struct api_route *api_router_table(size_t *n);

/* ---- handlers: cards.c, claims.c, runs.c, runs_history.c, events.c, stream.c,
 * attention.c, ui.c, claimnext.c, boards.c, admin.c, meta.c, agent.c, mcp.c ---- */
enum core_rc api_h_card_create(struct api_req *r);
enum core_rc api_h_card_list(struct api_req *r);
enum core_rc api_h_card_get(struct api_req *r);
enum core_rc api_h_card_patch(struct api_req *r);
enum core_rc api_h_card_delete(struct api_req *r);
enum core_rc api_h_card_reopen(struct api_req *r);
enum core_rc api_h_labels_put(struct api_req *r);
enum core_rc api_h_labels_patch(struct api_req *r);
enum core_rc api_h_comment_add(struct api_req *r);
enum core_rc api_h_labels_count(struct api_req *r);

enum core_rc api_h_claim(struct api_req *r);
enum core_rc api_h_renew(struct api_req *r);
enum core_rc api_h_release(struct api_req *r);
enum core_rc api_h_claim_revoke(struct api_req *r);
/* claims_many.c (DESIGN §18) */
enum core_rc api_h_claims_renew(struct api_req *r);
enum core_rc api_h_claims_release(struct api_req *r);
enum core_rc api_h_state(struct api_req *r);
enum core_rc api_h_last_run(struct api_req *r);
enum core_rc api_h_awaiting_input(struct api_req *r);
enum core_rc api_h_gave_up(struct api_req *r);

enum core_rc api_h_run_create(struct api_req *r);
enum core_rc api_h_run_get(struct api_req *r);
enum core_rc api_h_run_patch(struct api_req *r);
enum core_rc api_h_run_heartbeat(struct api_req *r);
enum core_rc api_h_run_cancel(struct api_req *r);
enum core_rc api_h_run_delete(struct api_req *r);
/* runs_history.c (DESIGN §20) */
enum core_rc api_h_card_runs(struct api_req *r);
enum core_rc api_h_run_list(struct api_req *r);
enum core_rc api_h_run_output(struct api_req *r);

enum core_rc api_h_events(struct api_req *r);
enum core_rc api_h_events_stream(struct api_req *r);
/* attention.c: GET /v1/attention. ui.c: GET /ui/..., GET /v1/whoami. */
enum core_rc api_h_attention(struct api_req *r);
enum core_rc api_h_root(struct api_req *r);
enum core_rc api_h_ui_root(struct api_req *r);
enum core_rc api_h_ui_index(struct api_req *r);
enum core_rc api_h_ui_asset(struct api_req *r);
enum core_rc api_h_whoami(struct api_req *r);

enum core_rc api_h_claim_next(struct api_req *r);

/* boards.c: board b as the board routes answer it (the codec's config, plus each column's
 * and the board's live `claimed` count, store_board_claimed, and `retry_effective`,
 * store_retry_of). *out: a new reference. */
enum core_rc api_board_json(struct api_req *r, const struct core_board *b, json_t **out);
enum core_rc api_h_board_list(struct api_req *r);
enum core_rc api_h_board_get(struct api_req *r);
enum core_rc api_h_board_put(struct api_req *r);
enum core_rc api_h_reaper_get(struct api_req *r);
enum core_rc api_h_board_activity(struct api_req *r);
enum core_rc api_h_reaper_pass(struct api_req *r);

enum core_rc api_h_labels_rename(struct api_req *r);
enum core_rc api_h_labels_merge(struct api_req *r);
enum core_rc api_h_labels_delete(struct api_req *r);
enum core_rc api_h_column_rename(struct api_req *r);

enum core_rc api_h_sub_put(struct api_req *r);
enum core_rc api_h_sub_get(struct api_req *r);
enum core_rc api_h_sub_list(struct api_req *r);
enum core_rc api_h_sub_delete(struct api_req *r);
enum core_rc api_h_delivery_list(struct api_req *r);
enum core_rc api_h_delivery_retry(struct api_req *r);

enum core_rc api_h_healthz(struct api_req *r);
enum core_rc api_h_readyz(struct api_req *r);
enum core_rc api_h_metrics(struct api_req *r);
enum core_rc api_h_openapi_json(struct api_req *r);
enum core_rc api_h_openapi_yaml(struct api_req *r);
enum core_rc api_h_agent_token(struct api_req *r);
enum core_rc api_h_mcp(struct api_req *r);

/* openapi data embedded at build time (openapi/gen_c.py). */
extern const char api_openapi_yaml[];
extern const size_t api_openapi_yaml_len;
extern const char api_openapi_json[];
extern const size_t api_openapi_json_len;

#endif
