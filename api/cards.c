/* Card handlers: create, list, read, patch, delete, reopen, labels, comments, label counts.
 * Every card body goes through the store's codec (store_card_to_json). */
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

enum core_rc api_card_load(struct api_req *r, const char *id, struct core_card **out)
{
	struct core_card *c = NULL;
	enum core_rc rc;

	*out = NULL;
	if (!core_id_valid(id))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "card id must match [A-Za-z0-9._:-]{1,128}");
	rc = store_card_get(r->api->st, id, &c);
	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, rc, "no card %s", id);
	if (rc != CORE_OK)
		return rc;
	rc = api_auth_board(r, c->board);
	if (rc != CORE_OK) {
		core_card_free(c);
		return rc;
	}
	*out = c;
	return CORE_OK;
}

enum core_rc api_card_scope_id(struct api_req *r, const char *id)
{
	struct core_card *c = NULL;
	enum core_rc rc = api_card_load(r, id, &c);

	core_card_free(c);
	return rc;
}

enum core_rc api_reply_card(struct api_req *r, unsigned status, struct core_card *c)
{
	size_t len = 0;
	char *text = store_card_json_text(c, &len); /* the tree's bytes, without the tree */

	core_card_free(c);
	return api_reply_json_text(r, status, text, len);
}

enum core_rc api_card_scope(struct api_req *r)
{
	return api_card_scope_id(r, api_param(r));
}

enum core_rc api_card_scope_lazy(struct api_req *r)
{
	if (!r->tok || !r->tok->all_boards)
		return api_card_scope(r);
	/* Every board is in scope: only what api_card_load would refuse before reading. */
	if (!core_id_valid(api_param(r)))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "card id must match [A-Za-z0-9._:-]{1,128}");
	return CORE_OK;
}

enum core_rc api_card_missing(struct api_req *r, enum core_rc rc)
{
	if (rc == CORE_ERR_NOT_FOUND && !r->detail[0])
		return api_fail(r, rc, "no card %s", api_param(r));
	return rc;
}

/* Details that say what was wrong (DESIGN §11), worked out after the store refused: the
 * store answers a code, the request knows the names. Each returns rc. */

/* A card write that refused a column: names it when board `board` has no such column. */
enum core_rc api_column_detail(struct api_req *r, enum core_rc rc, const char *board,
			       const char *col)
{
	struct core_board b = {0};

	if (!col)
		return rc;
	if (store_board_get(r->api->st, board, &b) != CORE_OK)
		goto out;
	if (rc == CORE_ERR_TRANSITION_REJECTED && !core_board_column(&b, col))
		api_fail(r, rc, "no column %s on board %s", col, board);
	else if (rc == CORE_ERR_TERMINAL_STATE_EXIT && core_board_is_terminal(&b, col))
		api_fail(r, rc,
			 "the card is in another terminal column: refiling it into %s is an "
			 "operator's state write, never a bot's or a worker's (ADR-096 §5)",
			 col);
out:
	core_board_release(&b);
	return rc;
}

/* A blocker list refused: which blocker, and why (self, unknown, another board, or a cycle). */
static enum core_rc blockers_detail(struct api_req *r, const char *self, const char *board,
				    const struct core_strv *bl)
{
	enum core_rc rc = CORE_ERR_TRANSITION_REJECTED;
	struct core_card *c = NULL;
	size_t i;

	for (i = 0; bl && i < bl->n; i++) {
		if (self && strcmp(bl->v[i], self) == 0)
			return api_fail(r, rc, "card %s cannot block itself", self);
		if (store_card_get(r->api->st, bl->v[i], &c) != CORE_OK)
			return api_fail(r, rc, "blocker %s is not a card", bl->v[i]);
		if (strcmp(c->board, board) != 0) {
			/* A board the token may not see is not named (DESIGN §8). */
			if (api_token_board_allowed(r->tok, c->board))
				api_fail(r, rc, "blocker %s is on board %s, not %s", bl->v[i],
					 c->board, board);
			else
				api_fail(r, rc, "blocker %s is not a card of board %s", bl->v[i],
					 board);
			core_card_free(c);
			return rc;
		}
		core_card_free(c);
		c = NULL;
	}
	if (bl && bl->n)
		return api_fail(r, rc, "these blockers would close a cycle through %s",
				self ? self : "the new card");
	return rc;
}

/* A card write the store refused as BAD_REQUEST with more blockers than a card may list
 * (core_blockers_check; their ids passed the body's check): says so. Returns rc. */
static enum core_rc blockers_count_detail(struct api_req *r, enum core_rc rc,
					  const struct core_strv *bl)
{
	if (rc == CORE_ERR_BAD_REQUEST && bl && bl->n > CORE_BLOCKERS_MAX && !r->detail[0])
		api_fail(r, rc, "a card lists at most %d blockers (%zu given)", CORE_BLOCKERS_MAX,
			 bl->n);
	return rc;
}

/* A grown card refused as too large: how many comments, or how many bytes. */
enum core_rc api_card_too_large_detail(struct api_req *r, const char *id)
{
	struct core_card *c = NULL;
	size_t max = store_limits_comments(r->api->st);

	if (store_card_get(r->api->st, id, &c) == CORE_OK && c->n_comments >= max)
		api_fail(r, CORE_ERR_PAYLOAD_TOO_LARGE, "card %s already has %zu comments; at most %zu",
			 id, c->n_comments, max);
	else
		api_fail(r, CORE_ERR_PAYLOAD_TOO_LARGE,
			 "card %s would be larger than %d bytes stored", id, CORE_CARD_BYTES_MAX);
	core_card_free(c);
	return CORE_ERR_PAYLOAD_TOO_LARGE;
}

/* A label write the store refused as BAD_REQUEST after every label passed the body's check:
 * the card would carry too many (core_labels_set, _adjust). Returns rc. */
enum core_rc api_labels_detail(struct api_req *r, enum core_rc rc)
{
	if (rc == CORE_ERR_BAD_REQUEST && !r->detail[0])
		api_fail(r, rc, "a card carries at most %d labels", CORE_LABELS_MAX);
	return rc;
}

enum core_rc api_card_create_detail(struct api_req *r, enum core_rc rc,
				    const struct store_card_create *in)
{
	const char *board = in->board ? in->board : "default";

	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, rc, "no board %s", board);
	if (rc == CORE_ERR_ALREADY_EXISTS && in->id)
		return api_fail(r, rc, "card %s already exists", in->id);
	if (rc == CORE_ERR_TRANSITION_REJECTED) {
		/* The column, else the blockers. */
		rc = api_column_detail(r, rc, board, in->state);
		if (!r->detail[0] && in->blockers)
			rc = blockers_detail(r, in->id, board, in->blockers);
		return rc;
	}
	if (rc == CORE_ERR_PAYLOAD_TOO_LARGE)
		return api_fail(r, rc, "the card would be larger than %d bytes stored",
				CORE_CARD_BYTES_MAX);
	rc = blockers_count_detail(r, rc, in->blockers);
	return in->labels ? api_labels_detail(r, rc) : rc;
}

/* api_card_create; check_only: the body's checks and the board's, nothing created. */
static enum core_rc card_create(struct api_req *r, bool title_required, bool check_only,
				struct core_card **out)
{
	struct store_card_create in = {0};
	struct core_strv labels = {0}, blockers = {0};
	struct store_actor actor = api_auth_actor(r);
	bool has_labels = false, has_blockers = false, has_nb;
	enum core_rc rc;

	*out = NULL;
	if ((rc = api_json_id(r, "id", false, &in.id)) != CORE_OK ||
	    (rc = api_json_name(r, "board", false, &in.board)) != CORE_OK ||
	    (rc = api_json_str(r, "title", title_required, API_STRING_MAX, &in.title)) !=
		    CORE_OK ||
	    (rc = api_json_str(r, "body", false, API_STRING_MAX, &in.body)) != CORE_OK ||
	    (rc = api_json_name(r, "state", false, &in.state)) != CORE_OK ||
	    (rc = api_json_strv(r, NULL, "labels", core_label_valid, &labels, &has_labels)) !=
		    CORE_OK ||
	    (rc = api_json_strv(r, NULL, "blockers", core_id_valid, &blockers, &has_blockers)) !=
		    CORE_OK ||
	    (rc = api_json_priority(r, &in.priority, NULL)) != CORE_OK ||
	    (rc = api_json_time(r, "not_before", &in.not_before, &has_nb)) != CORE_OK ||
	    (rc = api_auth_board(r, in.board ? in.board : "default")) != CORE_OK)
		goto out;
	/* A card created straight into a terminal column is a closing: board.close, as a
	 * move there is (subscriptions to the terminal column fire on it). */
	if (in.state &&
	    (rc = api_auth_cap(r, api_auth_state_cap(r, in.board ? in.board : "default",
						     in.state) & API_CAP_CLOSE)) != CORE_OK)
		goto out;
	in.labels = has_labels ? &labels : NULL;
	in.blockers = has_blockers ? &blockers : NULL;
	if (check_only)
		goto out;
	rc = store_card_create(r->api->st, &in, &actor, out);
	if (rc != CORE_OK)
		rc = api_card_create_detail(r, rc, &in);
out:
	core_strv_release(&labels);
	core_strv_release(&blockers);
	return rc;
}

enum core_rc api_card_create(struct api_req *r, bool title_required, struct core_card **out)
{
	return card_create(r, title_required, false, out);
}

enum core_rc api_card_create_check(struct api_req *r)
{
	struct core_card *none = NULL;

	return card_create(r, false, true, &none);
}

enum core_rc api_h_card_create(struct api_req *r)
{
	struct core_card *c = NULL;
	enum core_rc rc;

	if (json_is_array(r->json))
		return api_h_card_create_batch(r); /* DESIGN §18: cards_batch.c */
	rc = api_card_create(r, false, &c);
	if (rc != CORE_OK)
		return rc;
	snprintf(r->location, sizeof r->location, "/v1/cards/%s", c->id);
	return api_reply_card(r, 201, c);
}

static json_t *cards_json(struct core_card **cards, size_t n)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && i < n; i++)
		if (json_array_append_new(a, store_card_to_json(cards[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

enum core_rc api_list_after_check(struct api_req *r, const char *after)
{
	if (after && (!*after || strlen(after) > 18 ||
		      strspn(after, "0123456789") != strlen(after)))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"after is not a cursor (the next of a previous page)");
	return CORE_OK;
}

enum core_rc api_card_page(struct api_req *r, struct store_card_filter *f,
			   struct core_card ***cards, size_t *n, char **next)
{
	enum core_rc rc;
	size_t i, bytes;
	int round;

	/* Cards change between two reads: a second cut is possible, a third is not needed
	 * for the bound (the cut page holds at most the bound plus one card). */
	for (round = 0;; round++) {
		rc = store_card_list(r->api->st, f, cards, n, next);
		if (rc != CORE_OK || round == 2)
			return rc;
		for (i = 0, bytes = 0; i < *n; i++) {
			bytes += core_card_size((*cards)[i]) + 256; /* + the fields' framing */
			if (bytes > API_LIST_BYTES)
				break;
		}
		if (i >= *n || (i == 0 && *n == 1))
			return CORE_OK;
		store_cards_free(*cards, *n);
		free(*next);
		*cards = NULL;
		*n = 0;
		*next = NULL;
		f->limit = i > 0 ? i : 1;
	}
}

enum core_rc api_h_card_list(struct api_req *r)
{
	struct store_card_filter f = {0};
	struct core_card **cards = NULL;
	const char *claimed = NULL;
	json_t *list;
	char *next = NULL;
	size_t n = 0;
	int64_t limit;
	enum core_rc rc;

	if ((rc = api_query(r, "board", &f.board)) != CORE_OK ||
	    (rc = api_query(r, "state", &f.state)) != CORE_OK ||
	    (rc = api_query(r, "label", &f.label)) != CORE_OK ||
	    (rc = api_query(r, "claimed", &claimed)) != CORE_OK ||
	    (rc = api_query(r, "after", &f.after)) != CORE_OK ||
	    (rc = api_query_int(r, "limit", 100, 1, 1000, &limit)) != CORE_OK)
		return rc;
	if (f.board && !core_name_valid(f.board))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	if (f.state && !core_name_valid(f.state))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "state must match [A-Za-z0-9._-]{1,64}");
	if (f.label && !core_label_valid(f.label))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "label is not a valid label");
	if ((rc = api_list_after_check(r, f.after)) != CORE_OK)
		return rc;
	f.claimed = -1;
	if (claimed && strcmp(claimed, "true") == 0)
		f.claimed = 1;
	else if (claimed && strcmp(claimed, "false") == 0)
		f.claimed = 0;
	else if (claimed)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "claimed must be true or false");
	if (f.board && (rc = api_auth_board(r, f.board)) != CORE_OK)
		return rc;
	f.boards = api_auth_boards(r);
	f.limit = (size_t)limit;
	rc = api_card_page(r, &f, &cards, &n, &next);
	if (rc != CORE_OK)
		return rc;
	list = cards_json(cards, n);
	rc = list ? api_reply(r, 200, json_pack("{s:o, s:s?}", "cards", list, "next", next))
		  : CORE_ERR_NOMEM;
	store_cards_free(cards, n);
	free(next);
	return rc;
}

enum core_rc api_h_card_get(struct api_req *r)
{
	struct core_card *c = NULL;
	enum core_rc rc = api_card_load(r, api_param(r), &c);

	if (rc != CORE_OK)
		return rc;
	return api_reply_card(r, 200, c);
}

enum core_rc api_h_card_patch(struct api_req *r)
{
	struct store_card_patch p = {0};
	struct core_strv blockers = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	bool has_blockers = false;
	enum core_rc rc;

	if ((rc = api_json_str(r, "title", false, API_STRING_MAX, &p.title)) != CORE_OK ||
	    (rc = api_json_str(r, "body", false, API_STRING_MAX, &p.body)) != CORE_OK ||
	    (rc = api_json_strv(r, NULL, "blockers", core_id_valid, &blockers, &has_blockers)) !=
		    CORE_OK ||
	    (rc = api_json_priority(r, &p.priority, &p.has_priority)) != CORE_OK ||
	    (rc = api_json_time(r, "not_before", &p.not_before, &p.has_not_before)) != CORE_OK ||
	    (rc = api_card_scope(r)) != CORE_OK)
		goto out;
	/* Blockers move the card (pending ones park it in the waiting column, the last one
	 * done lets it out): a state write, board.move's. */
	if (has_blockers && (rc = api_auth_cap(r, API_CAP_MOVE)) != CORE_OK)
		goto out;
	p.blockers = has_blockers ? &blockers : NULL;
	rc = store_card_patch(r->api->st, api_param(r), &p, &actor, &c);
	if (rc == CORE_ERR_PAYLOAD_TOO_LARGE)
		rc = api_card_too_large_detail(r, api_param(r));
	rc = blockers_count_detail(r, rc, p.blockers);
	if (rc == CORE_ERR_TRANSITION_REJECTED && p.blockers) {
		struct core_card *self = NULL;

		if (store_card_get(r->api->st, api_param(r), &self) == CORE_OK)
			rc = blockers_detail(r, self->id, self->board, p.blockers);
		core_card_free(self);
	}
	if (rc == CORE_OK)
		rc = api_reply_card(r, 200, c);
out:
	core_strv_release(&blockers);
	return rc;
}

/* A delete or a reopen refused for dependents_outstanding: names one card of the board that
 * lists card `id` in its blockers (outside `waiting` when a reopen asks; NULL: anywhere),
 * found by paging the board on this error path only. Returns rc, with the generic detail
 * when none is found (a write moved it meanwhile). */
static enum core_rc dependents_detail(struct api_req *r, enum core_rc rc, const char *id,
				      const char *board, const char *waiting, const char *why)
{
	struct store_card_filter f = {.board = board, .claimed = -1, .limit = 1000};
	char *after = NULL, *next = NULL;
	bool found = false;

	do {
		struct core_card **cards = NULL;
		size_t n = 0, i;

		f.after = after;
		if (store_card_list(r->api->st, &f, &cards, &n, &next) != CORE_OK)
			break;
		for (i = 0; i < n && !found; i++)
			if (core_strv_contains(&cards[i]->blockers, id) &&
			    (!waiting || strcmp(cards[i]->state, waiting) != 0)) {
				api_fail(r, rc, "card %s lists %s in its blockers (%s): %s",
					 cards[i]->id, id, cards[i]->state, why);
				found = true;
			}
		store_cards_free(cards, n);
		free(after);
		after = next;
		next = NULL;
	} while (after && !found);
	free(after);
	return rc;
}

enum core_rc api_h_card_delete(struct api_req *r)
{
	struct store_actor actor = api_auth_actor(r);
	enum core_rc rc = api_card_scope(r);

	if (rc == CORE_OK)
		rc = store_card_delete(r->api->st, api_param(r), &actor);
	if (rc == CORE_ERR_DEPENDENTS_OUTSTANDING) {
		struct core_card *c = NULL;

		if (store_card_get(r->api->st, api_param(r), &c) == CORE_OK)
			dependents_detail(r, rc, c->id, c->board, NULL,
					  "deleting it would strand them; remove it from their "
					  "blockers first");
		core_card_free(c);
		if (!r->detail[0])
			api_fail(r, rc,
				 "other cards list %s in their blockers: deleting it would strand "
				 "them; remove it from their blockers first",
				 api_param(r));
		return rc;
	}
	if (rc == CORE_OK)
		r->status = 204;
	return rc;
}

/* Why a reopen was rejected: the target, or the card's own column. */
static enum core_rc reopen_detail(struct api_req *r, const char *to)
{
	enum core_rc rc = CORE_ERR_TRANSITION_REJECTED;
	struct core_card *c = NULL;
	struct core_board b = {0};

	if (store_card_get(r->api->st, api_param(r), &c) == CORE_OK &&
	    store_board_get(r->api->st, c->board, &b) == CORE_OK) {
		if (!core_board_column(&b, to))
			api_fail(r, rc, "no column %s on board %s", to, b.name);
		else if (!core_board_is_working(&b, to))
			api_fail(r, rc, "reopen target %s is not a working column of board %s", to,
				 b.name);
		else if (!core_board_is_terminal(&b, c->state))
			api_fail(r, rc, "card %s is in %s, not in a terminal column: nothing to reopen",
				 c->id, c->state);
	}
	core_board_release(&b);
	core_card_free(c);
	return rc;
}

enum core_rc api_h_card_reopen(struct api_req *r)
{
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	const char *to, *reason;
	enum core_rc rc;

	if ((rc = api_json_name(r, "to", true, &to)) != CORE_OK ||
	    (rc = api_json_reason(r, &reason)) != CORE_OK)
		return rc;
	if ((rc = api_card_scope(r)) != CORE_OK)
		return rc;
	rc = store_card_reopen(r->api->st, api_param(r), to, reason, &actor, &c);
	if (rc == CORE_ERR_TRANSITION_REJECTED)
		return reopen_detail(r, to);
	if (rc == CORE_ERR_DEPENDENTS_OUTSTANDING) {
		struct core_board b = {0};

		if (store_card_get(r->api->st, api_param(r), &c) == CORE_OK &&
		    store_board_get(r->api->st, c->board, &b) == CORE_OK)
			dependents_detail(r, rc, c->id, c->board, b.waiting,
					  "it has moved on since this card was done, so this card "
					  "cannot leave done");
		core_board_release(&b);
		core_card_free(c);
		return rc;
	}
	if (rc != CORE_OK)
		return rc;
	return api_reply_card(r, 200, c);
}

enum core_rc api_json_labels(struct api_req *r, struct core_strv *labels)
{
	bool present = false;
	enum core_rc rc = api_json_strv(r, NULL, "labels", core_label_valid, labels, &present);

	if (rc == CORE_OK && !present)
		rc = api_fail(r, CORE_ERR_BAD_REQUEST, "missing field \"labels\"");
	return rc;
}

enum core_rc api_json_labels_delta(struct api_req *r, struct core_strv *add,
				   struct core_strv *remove)
{
	bool has_add = false, has_remove = false;
	enum core_rc rc = api_json_strv(r, NULL, "add", core_label_valid, add, &has_add);

	if (rc == CORE_OK)
		rc = api_json_strv(r, NULL, "remove", core_label_valid, remove, &has_remove);
	if (rc == CORE_OK && !has_add && !has_remove)
		rc = api_fail(r, CORE_ERR_BAD_REQUEST, "expected \"add\" and/or \"remove\"");
	return rc;
}

enum core_rc api_json_comment(struct api_req *r, const char **body)
{
	enum core_rc rc = api_json_str(r, "body", true, API_STRING_MAX, body);

	if (rc == CORE_OK && !**body)
		rc = api_fail(r, CORE_ERR_BAD_REQUEST, "a comment body may not be empty");
	return rc;
}

enum core_rc api_h_labels_put(struct api_req *r)
{
	struct core_strv labels = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	enum core_rc rc;

	rc = api_json_labels(r, &labels);
	if (rc == CORE_OK)
		rc = api_card_scope(r);
	if (rc == CORE_OK)
		rc = store_card_labels_set(r->api->st, api_param(r), &labels, &actor, &c);
	if (rc == CORE_ERR_PAYLOAD_TOO_LARGE)
		rc = api_card_too_large_detail(r, api_param(r));
	rc = api_labels_detail(r, rc);
	if (rc == CORE_OK)
		rc = api_reply_card(r, 200, c);
	core_strv_release(&labels);
	return rc;
}

enum core_rc api_h_labels_patch(struct api_req *r)
{
	struct core_strv add = {0}, remove = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	enum core_rc rc;

	rc = api_json_labels_delta(r, &add, &remove);
	if (rc == CORE_OK)
		rc = api_card_scope(r);
	if (rc == CORE_OK)
		rc = store_card_labels_adjust(r->api->st, api_param(r), &add, &remove, &actor, &c);
	if (rc == CORE_ERR_PAYLOAD_TOO_LARGE)
		rc = api_card_too_large_detail(r, api_param(r));
	rc = api_labels_detail(r, rc);
	if (rc == CORE_OK)
		rc = api_reply_card(r, 200, c);
	core_strv_release(&add);
	core_strv_release(&remove);
	return rc;
}

enum core_rc api_h_comment_add(struct api_req *r)
{
	struct store_owned_write w = {.kind = STORE_OWNED_COMMENT};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	bool owned = api_json_has(r, "marker");
	const char *body;
	enum core_rc rc;

	/* With a marker it is a worker's comment, by the claim's holder: fenced like every
	 * owned write (DESIGN §11, §12). Without, a bot's or an operator's. */
	if (owned && !api_auth_has(r, API_ROLE_WORKER))
		return api_fail(r, CORE_ERR_FORBIDDEN, "a comment with \"marker\" needs the worker role");
	if (!owned && !api_auth_has(r, API_ROLE_BOT | API_ROLE_OPERATOR))
		return api_fail(r, CORE_ERR_FORBIDDEN,
				"workers comment as the claim's holder: send \"marker\" and If-Match");
	if ((rc = api_json_comment(r, &body)) != CORE_OK)
		return rc;
	if (owned && ((rc = api_json_marker(r, true, &w.token.marker)) != CORE_OK ||
		      (rc = api_if_match(r, &w.token.epoch)) != CORE_OK))
		return rc;
	if ((rc = api_card_scope(r)) != CORE_OK)
		return rc;
	w.comment = body;
	rc = owned ? store_card_owned_write(r->api->st, api_param(r), &w, &actor, &c)
		   : store_card_comment_add(r->api->st, api_param(r), body, &actor, &c);
	if (rc == CORE_ERR_PAYLOAD_TOO_LARGE)
		return api_card_too_large_detail(r, api_param(r));
	if (rc != CORE_OK)
		return rc;
	return api_reply_card(r, 201, c);
}

enum core_rc api_h_labels_count(struct api_req *r)
{
	const char *board;
	json_t *counts = NULL;
	enum core_rc rc;

	if ((rc = api_query(r, "board", &board)) != CORE_OK)
		return rc;
	if (board && !core_name_valid(board))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	if (board && (rc = api_auth_board(r, board)) != CORE_OK)
		return rc;
	rc = store_labels_count(r->api->st, board, api_auth_boards(r), &counts);
	if (rc != CORE_OK)
		return rc;
	return api_reply(r, 200, json_pack("{s:o}", "labels", counts));
}
