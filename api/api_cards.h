/* The card helpers cards.c defines for the other handlers (claims.c, runs.c, mcp_tools.c,
 * ...): loading a card under the token's scope, the details of refused writes, creating a
 * card and a page of the list, the label and comment bodies. */
#ifndef BOARDD_API_API_CARDS_H
#define BOARDD_API_API_CARDS_H

#include "api/api_req.h"
#include "core/core.h"
#include "store/store.h"

#include <stddef.h>

/* ---- cards.c ---- */
/* Reads card `id` and checks the token may see its board; caller frees *out. */
enum core_rc api_card_load(struct api_req *r, const char *id, struct core_card **out);
/* Checks the token may see the board of card `id` (MCP tools name the card in their
 * arguments). */
enum core_rc api_card_scope_id(struct api_req *r, const char *id);
/* Checks the token may see the board of the path's card (before a mutation: a card never
 * changes board). */
enum core_rc api_card_scope(struct api_req *r);
/* The same before a write whose store call reads the card itself (claim, renew, release, the
 * owned writes): a token that sees every board skips the read (a copy of the card) and only
 * the id is checked; the store's NOT_FOUND then goes through api_card_missing, so the answer
 * is the one api_card_scope gives. */
enum core_rc api_card_scope_lazy(struct api_req *r);
/* rc; NOT_FOUND with no detail yet gets api_card_load's "no card <id>". */
enum core_rc api_card_missing(struct api_req *r, enum core_rc rc);
/* The detail of a state write into `col` refused with rc: TRANSITION_REJECTED names `col`
 * when board `board` has no such column; TERMINAL_STATE_EXIT into a terminal `col` says a
 * refiling is the operator's (ADR-096 §5). Returns rc. */
enum core_rc api_column_detail(struct api_req *r, enum core_rc rc, const char *board,
			       const char *col);
/* The detail of a refused card creation (the board, the column, the blocker, the size), for
 * POST /v1/cards and the create_card tool alike; returns rc. */
enum core_rc api_card_create_detail(struct api_req *r, enum core_rc rc,
				    const struct store_card_create *in);
/* Creates the card the body describes (id, board, title, body, state, labels, blockers,
 * priority, not_before), checked the same way for POST /v1/cards and the create_card tool (`title`
 * required there): the fields, then the token's board, then the store (its refusal with
 * api_card_create_detail's detail). *out: the card (caller frees). */
enum core_rc api_card_create(struct api_req *r, bool title_required, struct core_card **out);
/* The same checks (the fields, then the token's board), nothing created. */
enum core_rc api_card_create_check(struct api_req *r);
/* POST /v1/cards with a JSON array (DESIGN §18, cards_batch.c). */
enum core_rc api_h_card_create_batch(struct api_req *r);
/* BAD_REQUEST unless `after` (NULL: none) is a card list cursor (the next of a page). */
enum core_rc api_list_after_check(struct api_req *r, const char *after);
/* store_card_list for an answer: a page whose cards hold more than API_LIST_BYTES is cut
 * before the card that passes it (never below one card), with the store's `next` for the
 * cut page, so one list answer stays a few MiB however large the cards (1 MiB each, 1000
 * a page, would be 1 GiB). Same outputs as store_card_list. */
#define API_LIST_BYTES ((size_t)8 << 20)
enum core_rc api_card_page(struct api_req *r, struct store_card_filter *f,
			   struct core_card ***cards, size_t *n, char **next);
/* The detail of a label write refused for the card's label count; returns rc. */
enum core_rc api_labels_detail(struct api_req *r, enum core_rc rc);
/* The detail of a card write refused as too large (comments or bytes); returns rc. */
enum core_rc api_card_too_large_detail(struct api_req *r, const char *id);
/* Answers the card (consumes it). */
enum core_rc api_reply_card(struct api_req *r, unsigned status, struct core_card *c);
/* The bodies of the label and comment writes, checked the same way for REST and MCP:
 * "labels" (required); "add" and/or "remove"; a non-empty "body". The lists are zeroed by
 * the caller and released by it; *body is borrowed from the request. */
enum core_rc api_json_labels(struct api_req *r, struct core_strv *labels);
enum core_rc api_json_labels_delta(struct api_req *r, struct core_strv *add,
				   struct core_strv *remove);
enum core_rc api_json_comment(struct api_req *r, const char **body);

#endif
