/* Runs as a record (DESIGN §20): GET /v1/cards/{id}/runs and GET /v1/runs (listings, newest
 * first, paged as every listing: {runs, next} and ?after=<next>), and POST
 * /v1/runs/{id}/output, the owner's append to the run's output tail. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_cards.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <stdlib.h>
#include <string.h>

/* The output text of one append: any length the body allows (the tail is what is kept). */
#define OUTPUT_TEXT_MAX ((size_t)1 << 30)

/* {runs: [...], next}: each run as GET /v1/runs/{id} serves it, without its output. */
static enum core_rc reply_runs(struct api_req *r, struct core_run **v, size_t n,
			       const char *next)
{
	json_t *list = json_array(), *o = NULL;
	size_t i;

	for (i = 0; list && i < n; i++) {
		json_t *j = store_run_to_json(v[i]);

		if (j)
			json_object_del(j, "output");
		if (!j || json_array_append_new(list, j) != 0) {
			json_decref(list);
			list = NULL;
		}
	}
	if (list)
		o = json_pack("{s:o, s:o}", "runs", list, "next",
			      next ? json_string(next) : json_null());
	return o ? api_reply(r, 200, o) : CORE_ERR_NOMEM;
}

static enum core_rc page(struct api_req *r, struct store_run_filter *f)
{
	struct core_run **v = NULL;
	char *next = NULL;
	size_t n = 0;
	int64_t limit;
	int64_t at;
	const char *aid;
	enum core_rc rc;

	if ((rc = api_query(r, "after", &f->after)) != CORE_OK ||
	    (rc = api_query_int(r, "limit", 100, 1, 1000, &limit)) != CORE_OK)
		return rc;
	if (f->after && !core_run_cursor_parse(f->after, &at, &aid))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"after must be the next of an earlier page of runs");
	f->limit = (size_t)limit;
	rc = store_run_list(r->api->st, f, &v, &n, &next);
	if (rc == CORE_OK)
		rc = reply_runs(r, v, n, next);
	store_runs_free(v, n);
	free(next);
	return rc;
}

enum core_rc api_h_card_runs(struct api_req *r)
{
	struct store_run_filter f = {0};
	struct core_card *c = NULL;
	enum core_rc rc = api_card_load(r, api_param(r), &c);

	if (rc != CORE_OK)
		return rc;
	/* This card's runs: a card deleted and created again (on any board) does not inherit
	 * the runs of the earlier one (they stay in GET /v1/runs?board= of their board). */
	f.card_id = c->id;
	f.card_since = c->created_at;
	f.board = c->board;
	rc = page(r, &f);
	core_card_free(c);
	return rc;
}

enum core_rc api_h_run_list(struct api_req *r)
{
	struct store_run_filter f = {0};
	enum core_rc rc;

	if ((rc = api_query(r, "board", &f.board)) != CORE_OK ||
	    (rc = api_query(r, "status", &f.status)) != CORE_OK)
		return rc;
	if (f.board && !core_name_valid(f.board))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	if (f.status && !core_run_status_known(f.status))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "unknown status %s: one of %s",
				f.status, CORE_RUN_STATUSES_TEXT);
	if (f.board && (rc = api_auth_board(r, f.board)) != CORE_OK)
		return rc;
	f.boards = api_auth_boards(r);
	return page(r, &f);
}

enum core_rc api_h_run_output(struct api_req *r)
{
	struct store_run_update u = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_run *run = NULL;
	const char *id = api_param(r);
	json_t *j;
	enum core_rc rc;

	if ((rc = api_json_marker(r, true, &u.marker)) != CORE_OK ||
	    (rc = api_json_str(r, "text", true, OUTPUT_TEXT_MAX, &u.output)) != CORE_OK)
		return rc;
	/* The body parser has checked the text is UTF-8; a NUL would cut it short. */
	if (!core_run_output_valid(u.output, strlen(u.output)))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"text\" must be valid UTF-8");
	if (!core_id_valid(id))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "run id must match [A-Za-z0-9._:-]{1,128}");
	rc = store_run_get(r->api->st, id, &run);
	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, rc, "no run %s", id);
	if (rc == CORE_OK)
		rc = api_auth_board(r, run->board);
	core_run_free(run);
	run = NULL;
	if (rc != CORE_OK)
		return rc;
	rc = store_run_update(r->api->st, id, &u, &actor, &run);
	if (rc == CORE_ERR_CLAIM_CONFLICT)
		return api_fail(r, rc,
				"run %s is not held by marker %s under the card's current claim and "
				"this token",
				id, u.marker);
	if (rc == CORE_ERR_RUN_FINAL)
		return api_fail(r, rc, "run %s is final: finished, failed and cancelled stay final",
				id);
	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, rc, "no run %s", id);
	if (rc != CORE_OK)
		return rc;
	j = store_run_to_json(run);
	core_run_free(run);
	return api_reply(r, 200, j);
}
