/* Run handlers (DESIGN §5, §10): create, read, update and heartbeat by the owner, cancel and
 * prune by an operator. Every run body goes through store_run_to_json. */
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

#define FAILURE_CODE_MAX 64

static enum core_rc reply_run(struct api_req *r, unsigned status, struct core_run *run)
{
	json_t *j = store_run_to_json(run);

	core_run_free(run);
	return api_reply(r, status, j);
}

/* Reads the path's run and checks the token sees its board; caller frees *out (may be
 * NULL when the caller only needs the check). */
static enum core_rc run_load(struct api_req *r, struct core_run **out)
{
	struct core_run *run = NULL;
	const char *id = api_param(r);
	enum core_rc rc;

	if (out)
		*out = NULL;
	if (!core_id_valid(id))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "run id must match [A-Za-z0-9._:-]{1,128}");
	rc = store_run_get(r->api->st, id, &run);
	if (rc == CORE_ERR_NOT_FOUND)
		return api_fail(r, rc, "no run %s", id);
	if (rc != CORE_OK)
		return rc;
	rc = api_auth_board(r, run->board);
	if (rc == CORE_OK && out) {
		*out = run;
		run = NULL;
	}
	core_run_free(run);
	return rc;
}

static bool failure_code_valid(const char *s)
{
	size_t n;

	for (n = 0; s[n]; n++) {
		char c = s[n];

		if (n >= FAILURE_CODE_MAX ||
		    !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return n > 0;
}

static enum core_rc status_field(struct api_req *r, bool required, const char **out)
{
	enum core_rc rc = api_json_str(r, "status", required, CORE_STATUS_MAX, out);

	if (rc == CORE_OK && *out && !core_status_valid(*out)) {
		*out = NULL;
		return api_fail(r, CORE_ERR_BAD_REQUEST, "status must match [a-z_]{1,32}");
	}
	return rc;
}

enum core_rc api_h_run_create(struct api_req *r)
{
	struct store_run_create in = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *card = NULL;
	struct core_run *run = NULL;
	enum core_rc rc;

	if ((rc = api_json_id(r, "card_id", true, &in.card_id)) != CORE_OK ||
	    (rc = api_json_marker(r, true, &in.marker)) != CORE_OK ||
	    (rc = status_field(r, true, &in.status)) != CORE_OK ||
	    (rc = api_json_id(r, "id", false, &in.id)) != CORE_OK ||
	    (rc = api_json_lease(r, &in.lease_ms)) != CORE_OK)
		return rc;
	rc = api_card_load(r, in.card_id, &card);
	core_card_free(card);
	if (rc != CORE_OK)
		return rc;
	rc = store_run_create(r->api->st, &in, &actor, &run);
	if (rc == CORE_ERR_CLAIM_CONFLICT)
		return api_fail(r, rc,
				"card %s is not claimed by marker %s with this token: only its "
				"current holder starts a run",
				in.card_id, in.marker);
	if (rc == CORE_ERR_ALREADY_EXISTS && in.id)
		return api_fail(r, rc, "run %s already exists (a pruned run's id is not reused)",
				in.id);
	if (rc != CORE_OK)
		return rc;
	snprintf(r->location, sizeof r->location, "/v1/runs/%s", run->id);
	/* A run created in a final status reached it here (it takes no further write). */
	if (core_run_status_final(run->status))
		metrics_inc_board(r->api->metrics, METRICS_RUNS_FINISHED, run->status, run->board);
	return reply_run(r, 201, run);
}

enum core_rc api_h_run_get(struct api_req *r)
{
	struct core_run *run = NULL;
	enum core_rc rc = run_load(r, &run);

	if (rc != CORE_OK)
		return rc;
	return reply_run(r, 200, run);
}

/* "result" (any JSON, at most CORE_RUN_RESULT_MAX bytes as compact text) and "error" (a
 * string of at most CORE_RUN_ERROR_MAX bytes), DESIGN §12. *text: new string, caller frees. */
static enum core_rc run_outcome_fields(struct api_req *r, struct store_run_update *u, char **text)
{
	const json_t *res = json_object_get(r->json, "result");
	enum core_rc rc = api_json_str(r, "error", false, CORE_RUN_ERROR_MAX, &u->error);

	if (rc != CORE_OK)
		return rc;
	/* api_json_str counts characters; the limit is bytes (the store refuses more). */
	if (u->error && strlen(u->error) > CORE_RUN_ERROR_MAX)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"field \"error\" is %zu bytes as UTF-8; at most %d are kept",
				strlen(u->error), CORE_RUN_ERROR_MAX);
	if (!res)
		return CORE_OK;
	*text = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!*text)
		return CORE_ERR_NOMEM;
	if (strlen(*text) > CORE_RUN_RESULT_MAX)
		return api_fail(r, CORE_ERR_PAYLOAD_TOO_LARGE,
				"result is %zu bytes as compact JSON; at most %d are kept",
				strlen(*text), CORE_RUN_RESULT_MAX);
	u->result = *text;
	return CORE_OK;
}

enum core_rc api_h_run_patch(struct api_req *r)
{
	struct store_run_update u = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_run *run = NULL;
	const json_t *cont = json_object_get(r->json, "continuation");
	char *result_text = NULL;
	enum core_rc rc;

	if ((rc = api_json_marker(r, true, &u.marker)) != CORE_OK ||
	    (rc = status_field(r, false, &u.status)) != CORE_OK ||
	    (rc = api_json_str(r, "failure_code", false, FAILURE_CODE_MAX, &u.failure_code)) !=
		    CORE_OK ||
	    (rc = api_json_lease_keep(r, &u.lease_ms)) != CORE_OK)
		return rc;
	if (u.failure_code && !failure_code_valid(u.failure_code))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "failure_code must match [A-Za-z0-9_.-]{1,64}");
	if (json_is_null(cont)) {
		u.clear_continuation = true;
	} else if (cont) {
		u.continuation = json_string_value(cont);
		if (!u.continuation || !core_continuation_valid(u.continuation))
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"continuation must be redelivery_pending, retry_armed, "
					"final or null");
	}
	if ((rc = run_outcome_fields(r, &u, &result_text)) != CORE_OK ||
	    (rc = run_load(r, NULL)) != CORE_OK)
		goto out;
	rc = store_run_update(r->api->st, api_param(r), &u, &actor, &run);
	if (rc == CORE_ERR_CLAIM_CONFLICT)
		rc = api_fail(r, rc,
			      "run %s is not held by marker %s under the card's current claim and "
			      "this token",
			      api_param(r), u.marker);
	if (rc == CORE_ERR_RUN_FINAL)
		rc = api_fail(r, rc, "run %s is final: finished, failed and cancelled stay final",
			      api_param(r));
out:
	free(result_text);
	if (rc != CORE_OK)
		return rc;
	/* A final run takes no further write: each final status is counted once. */
	if (u.status && core_run_status_final(u.status))
		metrics_inc_board(r->api->metrics, METRICS_RUNS_FINISHED, u.status, run->board);
	return reply_run(r, 200, run);
}

enum core_rc api_h_run_heartbeat(struct api_req *r)
{
	struct store_run_update u = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_run *run = NULL;
	enum core_rc rc;

	if ((rc = api_json_marker(r, true, &u.marker)) != CORE_OK ||
	    (rc = api_json_lease_keep(r, &u.lease_ms)) != CORE_OK ||
	    (rc = run_load(r, NULL)) != CORE_OK)
		return rc;
	rc = store_run_update(r->api->st, api_param(r), &u, &actor, &run);
	if (rc == CORE_ERR_CLAIM_CONFLICT)
		return api_fail(r, rc,
				"run %s is not held by marker %s under the card's current claim and "
				"this token",
				api_param(r), u.marker);
	if (rc == CORE_ERR_RUN_FINAL)
		return api_fail(r, rc, "run %s is final: finished, failed and cancelled stay final",
				api_param(r));
	if (rc != CORE_OK)
		return rc;
	return reply_run(r, 200, run);
}

enum core_rc api_h_run_cancel(struct api_req *r)
{
	struct store_actor actor = api_auth_actor(r);
	struct core_run *run = NULL;
	enum core_rc rc;

	if ((rc = run_load(r, NULL)) != CORE_OK)
		return rc;
	rc = store_run_cancel(r->api->st, api_param(r), &actor, &run);
	if (rc == CORE_ERR_RUN_FINAL)
		return api_fail(r, rc, "run %s is final: finished, failed and cancelled stay final",
				api_param(r));
	if (rc != CORE_OK)
		return rc;
	metrics_inc_board(r->api->metrics, METRICS_RUNS_FINISHED, CORE_RUN_CANCELLED, run->board);
	return reply_run(r, 200, run);
}

enum core_rc api_h_run_delete(struct api_req *r)
{
	struct store_actor actor = api_auth_actor(r);
	enum core_rc rc;

	if ((rc = run_load(r, NULL)) != CORE_OK)
		return rc;
	rc = store_run_prune(r->api->st, api_param(r), &actor);
	if (rc == CORE_OK)
		r->status = 204;
	return rc;
}
