/* Board and reaper handlers: board config (list, read, replace) with its read-only counts
 * (DESIGN §17: live claims per column and per board, the retry policy in force), and the
 * reaper admin routes, which call the hooks the server filled in. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <stdlib.h>
#include <string.h>

enum core_rc api_board_json(struct api_req *r, const struct core_board *b, json_t **out)
{
	int64_t *per_col = NULL, total = 0;
	struct core_retry eff;
	json_t *j, *cols, *col;
	enum core_rc rc;
	size_t i;

	*out = NULL;
	if (b->n_cols && !(per_col = calloc(b->n_cols, sizeof *per_col)))
		return CORE_ERR_NOMEM;
	rc = store_board_claimed(r->api->st, b, per_col, &total);
	if (rc != CORE_OK) {
		free(per_col);
		return rc;
	}
	store_retry_of(r->api->st, b, &eff);
	j = store_board_to_json(b);
	cols = json_object_get(j, "columns");
	rc = j && json_array_size(cols) == b->n_cols ? CORE_OK : CORE_ERR_NOMEM;
	json_array_foreach(cols, i, col) {
		if (rc == CORE_OK && json_object_set_new(col, "claimed", json_integer(per_col[i])))
			rc = CORE_ERR_NOMEM;
	}
	if (rc == CORE_OK &&
	    (json_object_set_new(j, "claimed", json_integer(total)) ||
	     json_object_set_new(j, "retry_effective",
				 json_pack("{s:i, s:I, s:I}", "max_attempts", (int)eff.max_attempts,
					   "backoff_ms", (json_int_t)eff.backoff_ms,
					   "max_backoff_ms", (json_int_t)eff.max_backoff_ms))))
		rc = CORE_ERR_NOMEM;
	free(per_col);
	if (rc != CORE_OK) {
		json_decref(j);
		return rc;
	}
	*out = j;
	return CORE_OK;
}

enum core_rc api_h_board_list(struct api_req *r)
{
	struct core_board *boards = NULL;
	size_t n = 0, i;
	json_t *list, *bj = NULL;
	enum core_rc rc;

	rc = store_board_list(r->api->st, &boards, &n);
	if (rc != CORE_OK)
		return rc;
	list = json_array();
	if (!list)
		rc = CORE_ERR_NOMEM;
	for (i = 0; rc == CORE_OK && i < n; i++) {
		if (!api_token_board_allowed(r->tok, boards[i].name))
			continue;
		rc = api_board_json(r, &boards[i], &bj);
		if (rc == CORE_OK && json_array_append_new(list, bj) != 0)
			rc = CORE_ERR_NOMEM;
	}
	store_boards_free(boards, n);
	if (rc != CORE_OK) {
		json_decref(list);
		return rc;
	}
	return api_reply(r, 200, json_pack("{s:o}", "boards", list));
}

static enum core_rc board_param(struct api_req *r, const char **name)
{
	*name = r->n_params ? r->params[0] : NULL;
	if (!core_name_valid(*name))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	return api_auth_board(r, *name);
}

enum core_rc api_h_board_get(struct api_req *r)
{
	struct core_board b = {0};
	const char *name;
	json_t *j;
	enum core_rc rc;

	if ((rc = board_param(r, &name)) != CORE_OK)
		return rc;
	rc = store_board_get(r->api->st, name, &b);
	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, rc, "no board %s", name);
	if (rc != CORE_OK)
		return rc;
	rc = api_board_json(r, &b, &j);
	core_board_release(&b);
	if (rc != CORE_OK)
		return rc;
	return api_reply(r, 200, j);
}

/* A board PUT the store refused because a column it drops still holds cards: which column,
 * and one of its cards. Returns rc. */
static enum core_rc dropped_column_detail(struct api_req *r, enum core_rc rc,
					  const struct core_board *nb)
{
	struct core_board old = {0};
	size_t i;

	if (store_board_get(r->api->st, nb->name, &old) != CORE_OK)
		return rc;
	for (i = 0; i < old.n_cols && !r->detail[0]; i++) {
		struct store_card_filter f = {.board = nb->name, .state = old.cols[i].name,
					      .claimed = -1, .limit = 1};
		struct core_card **cards = NULL;
		char *next = NULL;
		size_t n = 0;

		if (core_board_column(nb, old.cols[i].name))
			continue;
		if (store_card_list(r->api->st, &f, &cards, &n, &next) == CORE_OK && n)
			api_fail(r, rc,
				 "column %s of board %s still holds cards (%s%s): move them out, or "
				 "rename the column, before dropping it",
				 old.cols[i].name, nb->name, cards[0]->id, next ? ", ..." : "");
		store_cards_free(cards, n);
		free(next);
	}
	core_board_release(&old);
	return rc;
}

/* A board PUT must not leave a subscription of the board naming a column it drops (the
 * subscription would never fire again): INVALID_BOARD naming both. The column rename carries
 * subscriptions along; this is the other way a column goes. */
static enum core_rc subs_keep_columns(struct api_req *r, const struct core_board *nb)
{
	struct core_board old = {0};
	struct store_sub **v = NULL;
	size_t n = 0, i, k;
	enum core_rc rc = store_board_get(r->api->st, nb->name, &old);

	if (rc == CORE_ERR_NOT_FOUND)
		return CORE_OK; /* a new board: nothing subscribes to it yet */
	if (rc == CORE_OK)
		rc = store_sub_list(r->api->st, nb->name, &v, &n);
	for (i = 0; rc == CORE_OK && i < n; i++) {
		const struct core_strv *st = &v[i]->on.dim[CORE_SUB_TO_STATES];

		/* Only what this PUT drops: a name the old board lacked too is not its doing. */
		for (k = 0; k < st->n && rc == CORE_OK; k++)
			if (core_board_column(&old, st->v[k]) && !core_board_column(nb, st->v[k]))
				rc = api_fail(r, CORE_ERR_INVALID_BOARD,
					      "subscription %s of board %s names column %s, which "
					      "this board drops: rename the column "
					      "(POST /v1/boards/%s/columns/%s/rename), or change or "
					      "delete the subscription first",
					      v[i]->name, nb->name, st->v[k], nb->name, st->v[k]);
	}
	store_subs_free(v, n);
	core_board_release(&old);
	return rc;
}

/* The policy fields of a board PUT, each refused by name (the codec's refusal names none). */
static enum core_rc policy_fields_check(struct api_req *r)
{
	static const char *const keys[] = {"max_attempts", "backoff_ms", "max_backoff_ms"};
	const json_t *mc = json_object_get(r->json, "max_claims");
	const json_t *rt = json_object_get(r->json, "retry");
	enum core_rc rc;
	size_t i;

	if (mc && !json_is_null(mc) && !json_is_integer(mc))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"max_claims\" must be an integer");
	if (!rt || json_is_null(rt))
		return CORE_OK;
	if (!json_is_object(rt))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"retry\" must be an object");
	if ((rc = api_json_fields_check(r, rt, "?max_attempts ?backoff_ms ?max_backoff_ms",
					"retry.")) != CORE_OK)
		return rc;
	for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		const json_t *v = json_object_get(rt, keys[i]);

		if (v && !json_is_integer(v))
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"field \"retry.%s\" must be an integer", keys[i]);
	}
	return CORE_OK;
}

enum core_rc api_h_board_put(struct api_req *r)
{
	struct store_actor actor = api_auth_actor(r);
	struct core_board b = {0};
	const json_t *nj = json_object_get(r->json, "name");
	const json_t *cols = json_object_get(r->json, "columns");
	const char *name;
	char detail[API_DETAIL_MAX];
	json_t *j;
	enum core_rc rc;

	if ((rc = board_param(r, &name)) != CORE_OK)
		return rc;
	if (json_is_array(cols)) {
		size_t i;
		const json_t *c;

		json_array_foreach(cols, i, c) {
			if (json_is_object(c) &&
			    (rc = api_json_fields_check(r, c, "name terminal eligible ?limit claimed",
							"columns[].")) != CORE_OK)
				return rc;
		}
	}
	if ((rc = policy_fields_check(r)) != CORE_OK)
		return rc;
	if (nj && !(json_is_string(nj) && strcmp(json_string_value(nj), name) == 0))
		return api_fail(r, CORE_ERR_INVALID_BOARD, "\"name\" must equal the board in the path");
	if (!nj && json_object_set_new(r->json, "name", json_string(name)) != 0)
		return CORE_ERR_NOMEM;
	/* GET's read-only counts (claimed, retry_effective) may come back in a PUT of what GET
	 * answered: they are not config, and are ignored (the codec reads only the config). */
	rc = store_board_from_json(r->json, &b);
	if (rc == CORE_ERR_BAD_REQUEST)
		return api_fail(r, rc,
				"expected {name, columns: [{name, terminal, eligible, limit?}], "
				"running, completed, failed, waiting, max_claims?, retry?: "
				"{max_attempts?, backoff_ms?, max_backoff_ms?}} (limits and retry "
				"values integers)");
	if (rc != CORE_OK)
		return rc;
	/* A retry without max_attempts takes the server's default for it (--run-ceiling), as
	 * a board without retry does (DESIGN §17), not the built-in 20. */
	if (b.has_retry && !json_object_get(json_object_get(r->json, "retry"), "max_attempts")) {
		struct core_retry d;

		store_retry_of(r->api->st, NULL, &d);
		b.retry.max_attempts = d.max_attempts;
	}
	detail[0] = '\0';
	rc = core_board_validate(&b, detail, sizeof detail);
	if (rc != CORE_OK) {
		core_board_release(&b);
		/* Well-formed, but not a board: 422, as the contract says (400 is for a body
		 * its schema refuses). */
		return api_fail(r, CORE_ERR_INVALID_BOARD, "invalid board: %s", detail);
	}
	rc = subs_keep_columns(r, &b);
	if (rc == CORE_OK)
		rc = store_board_put(r->api->st, &b, &actor);
	if (rc == CORE_ERR_TRANSITION_REJECTED)
		rc = dropped_column_detail(r, rc, &b);
	if (rc == CORE_OK && (rc = api_board_json(r, &b, &j)) == CORE_OK)
		rc = api_reply(r, 200, j);
	core_board_release(&b);
	return rc;
}

enum core_rc api_h_reaper_get(struct api_req *r)
{
	const struct api_reaper_hooks *h = &r->api->cfg.reaper;

	json_t *st;

	if (!h->status)
		return api_fail(r, CORE_ERR_STORE_UNAVAILABLE, "reaper not running");
	st = h->status(h->ctx);
	/* A pass spans every board: its counts would tell a board-scoped token about the
	 * others' cards. It sees the configuration only. */
	if (st && r->tok && !r->tok->all_boards) {
		json_object_del(st, "last_pass");
	}
	return api_reply(r, 200, st);
}

enum core_rc api_h_reaper_pass(struct api_req *r)
{
	const struct api_reaper_hooks *h = &r->api->cfg.reaper;
	json_t *out = NULL;
	enum core_rc rc;

	if (!r->tok || !r->tok->all_boards)
		return api_fail(r, CORE_ERR_FORBIDDEN,
				"a pass spans every board: a board-scoped token may not run one");
	if (!h->pass)
		return api_fail(r, CORE_ERR_STORE_UNAVAILABLE, "reaper not running");
	rc = h->pass(h->ctx, &out);
	if (rc != CORE_OK) {
		json_decref(out);
		return rc;
	}
	return api_reply(r, 200, out);
}
