/* Admin handlers: the label sweeps (rename, merge, delete) and the column rename. Operator
 * only (the route table says so); a board-scoped operator sweeps only its own boards. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <string.h>

/* NOT_FOUND naming board `board` when there is none (a sweep of a misspelt board would
 * touch nothing and say 200). */
static enum core_rc board_exists(struct api_req *r, const char *board)
{
	struct core_board b = {0};
	enum core_rc rc = store_board_get(r->api->st, board, &b);

	core_board_release(&b);
	return rc == CORE_ERR_NOT_FOUND ? api_fail(r, rc, "no board %s", board) : rc;
}

/* The optional board of a sweep: from the body (rename, merge) or the query (delete). */
static enum core_rc sweep_board(struct api_req *r, bool from_query, const char **board)
{
	enum core_rc rc = from_query ? api_query(r, "board", board)
				     : api_json_name(r, "board", false, board);

	if (rc != CORE_OK)
		return rc;
	if (*board && !core_name_valid(*board))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	if (*board && (rc = api_auth_board(r, *board)) == CORE_OK)
		rc = board_exists(r, *board);
	return rc;
}

static enum core_rc sweep_run(struct api_req *r, struct store_label_sweep *sw)
{
	struct store_actor actor = api_auth_actor(r);
	size_t touched = 0;
	enum core_rc rc;

	sw->boards = api_auth_boards(r);
	rc = store_labels_sweep(r->api->st, sw, &actor, &touched);
	if (rc != CORE_OK)
		return rc;
	return api_reply(r, 200, json_pack("{s:I}", "touched", (json_int_t)touched));
}

/* A single label field of the body. */
static enum core_rc label_field(struct api_req *r, const char *key, const char **out)
{
	enum core_rc rc = api_json_str(r, key, true, 256, out);

	if (rc != CORE_OK)
		return rc;
	if (!core_label_valid(*out))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"\"%s\" must be a label: 1 to 64 characters, no space or comma",
				key);
	return CORE_OK;
}

enum core_rc api_h_labels_rename(struct api_req *r)
{
	struct store_label_sweep sw = {.kind = STORE_LABELS_RENAME};
	struct core_strv from = {0};
	const char *f, *to;
	enum core_rc rc;

	if ((rc = sweep_board(r, false, &sw.board)) != CORE_OK ||
	    (rc = label_field(r, "from", &f)) != CORE_OK ||
	    (rc = label_field(r, "to", &to)) != CORE_OK)
		return rc;
	if (core_strv_push(&from, f) != CORE_OK)
		return CORE_ERR_NOMEM;
	sw.from = &from;
	sw.to = to;
	rc = sweep_run(r, &sw);
	core_strv_release(&from);
	return rc;
}

enum core_rc api_h_labels_merge(struct api_req *r)
{
	struct store_label_sweep sw = {.kind = STORE_LABELS_MERGE};
	struct core_strv from = {0};
	const char *to;
	bool present = false;
	enum core_rc rc;

	if ((rc = sweep_board(r, false, &sw.board)) != CORE_OK ||
	    (rc = label_field(r, "to", &to)) != CORE_OK)
		return rc;
	rc = api_json_strv(r, NULL, "from", core_label_valid, &from, &present);
	if (rc == CORE_OK && (!present || from.n == 0 || from.n > CORE_LABELS_MAX))
		rc = api_fail(r, CORE_ERR_BAD_REQUEST,
			      "\"from\" must be a list of 1 to %d labels", CORE_LABELS_MAX);
	if (rc == CORE_OK) {
		sw.from = &from;
		sw.to = to;
		rc = sweep_run(r, &sw);
	}
	core_strv_release(&from);
	return rc;
}

enum core_rc api_h_labels_delete(struct api_req *r)
{
	struct store_label_sweep sw = {.kind = STORE_LABELS_DELETE};
	struct core_strv from = {0};
	const char *name = api_param(r);
	enum core_rc rc;

	if (!core_label_valid(name))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"the label must be 1 to 64 characters, no space or comma");
	if ((rc = sweep_board(r, true, &sw.board)) != CORE_OK)
		return rc;
	if (core_strv_push(&from, name) != CORE_OK)
		return CORE_ERR_NOMEM;
	sw.from = &from;
	rc = sweep_run(r, &sw);
	core_strv_release(&from);
	return rc;
}

enum core_rc api_h_column_rename(struct api_req *r)
{
	struct store_actor actor = api_auth_actor(r);
	struct core_board b = {0};
	const char *board = r->n_params > 0 ? r->params[0] : NULL;
	const char *col = r->n_params > 1 ? r->params[1] : NULL;
	const char *to;
	size_t touched = 0;
	json_t *bj;
	enum core_rc rc;

	if (!core_name_valid(board) || !core_name_valid(col))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"board and column must match [A-Za-z0-9._-]{1,64}");
	if ((rc = api_auth_board(r, board)) != CORE_OK ||
	    (rc = api_json_name(r, "to", true, &to)) != CORE_OK)
		return rc;
	rc = store_board_column_rename(r->api->st, board, col, to, &actor, &touched);
	if (rc == CORE_ERR_NOT_FOUND && (rc = board_exists(r, board)) == CORE_OK)
		rc = CORE_ERR_NOT_FOUND;
	if (rc == CORE_ERR_NOT_FOUND && !r->detail[0])
		return api_fail(r, rc, "no column %s on board %s", col, board);
	if (rc == CORE_ERR_ALREADY_EXISTS)
		return api_fail(r, rc, "board %s already has a column %s", board, to);
	if (rc != CORE_OK)
		return rc;
	rc = store_board_get(r->api->st, board, &b);
	if (rc != CORE_OK)
		return rc;
	rc = api_board_json(r, &b, &bj);
	core_board_release(&b);
	if (rc != CORE_OK)
		return rc;
	return api_reply(r, 200, json_pack("{s:I, s:o}", "touched", (json_int_t)touched, "board", bj));
}
