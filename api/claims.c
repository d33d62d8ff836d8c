/* Claim handlers (DESIGN §3, §8): claim, renew, release, and the owned writes fenced by
 * (marker, epoch), whose epoch arrives in If-Match. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_cards.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <stdio.h>
#include <string.h>

/* The board of the path's card, for a detail ("default" when it cannot be read). Valid until
 * the next call on this thread. */
static const char *c_board(struct api_req *r)
{
	static _Thread_local char name[CORE_NAME_MAX + 1];
	struct core_card *c = NULL;

	snprintf(name, sizeof(name), "default");
	if (store_card_get(r->api->st, api_param(r), &c) == CORE_OK)
		snprintf(name, sizeof(name), "%s", c->board);
	core_card_free(c);
	return name;
}

/* The body's epoch: a non-negative integer. */
static enum core_rc epoch_field(struct api_req *r, int64_t *epoch)
{
	enum core_rc rc = api_json_int(r, "epoch", true, epoch, NULL);

	if (rc == CORE_OK && *epoch < 0)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "epoch must be >= 0");
	return rc;
}

/* lease_ms from the body; absent: 0, which keeps the claim's (or run's) own (DESIGN §11). */
enum core_rc api_json_lease_keep(struct api_req *r, int64_t *out)
{
	*out = 0;
	if (!api_json_has(r, "lease_ms"))
		return CORE_OK;
	return api_json_lease(r, out);
}

/* The detail of a blockers_pending refusal: the first blocker not in the completed column. */
static enum core_rc blockers_pending(struct api_req *r, const char *id)
{
	struct core_card *c = NULL, *bc = NULL;
	struct core_board b = {0};
	size_t i;

	if (store_card_get(r->api->st, id, &c) == CORE_OK &&
	    store_board_get(r->api->st, c->board, &b) == CORE_OK) {
		for (i = 0; i < c->blockers.n; i++) {
			if (store_card_get(r->api->st, c->blockers.v[i], &bc) != CORE_OK)
				continue;
			if (!b.completed || strcmp(bc->state, b.completed) != 0) {
				api_fail(r, CORE_ERR_BLOCKERS_PENDING,
					 "card %s waits on blocker %s, which is in %s, not %s", id,
					 bc->id, bc->state, b.completed ? b.completed : "(none)");
				core_card_free(bc);
				break;
			}
			core_card_free(bc);
			bc = NULL;
		}
	}
	core_board_release(&b);
	core_card_free(c);
	return CORE_ERR_BLOCKERS_PENDING;
}

enum core_rc api_h_claim(struct api_req *r)
{
	struct store_claim_result res = {0};
	struct store_actor actor = api_auth_actor(r);
	const char *marker;
	int64_t lease_ms;
	enum core_rc rc;

	if ((rc = api_json_marker(r, true, &marker)) != CORE_OK ||
	    (rc = api_json_lease(r, &lease_ms)) != CORE_OK ||
	    (rc = api_card_scope_lazy(r)) != CORE_OK)
		return rc;
	rc = api_card_missing(r, store_card_claim(r->api->st, api_param(r), marker, lease_ms,
						  &actor, &res));
	if (rc == CORE_ERR_CLAIM_CONFLICT)
		metrics_inc(r->api->metrics, METRICS_CLAIMS, "conflict");
	if (rc == CORE_ERR_BLOCKERS_PENDING) {
		metrics_inc(r->api->metrics, METRICS_CLAIMS, "blockers_pending");
		return blockers_pending(r, api_param(r));
	}
	if (rc == CORE_ERR_TRANSITION_REJECTED)
		return api_fail(r, rc, "card %s is in a terminal column: it cannot be claimed",
				api_param(r));
	/* DESIGN §17: the twin says which limit is full, or until when the card waits. */
	if (rc == CORE_ERR_CAPACITY_REACHED || rc == CORE_ERR_NOT_YET) {
		metrics_inc(r->api->metrics, METRICS_CLAIMS, core_rc_code(rc));
		if (res.detail[0])
			return api_fail(r, rc, "%.*s", (int)sizeof res.detail, res.detail);
	}
	if (rc != CORE_OK)
		return rc;
	metrics_inc_board(r->api->metrics, METRICS_CLAIMS, res.fresh ? "fresh" : "idempotent",
			  res.card->board);
	{
		size_t len = 0;
		char *text = api_claim_json_text(res.card, &res.token, res.fresh, false, &len);

		core_card_free(res.card);
		return api_reply_json_text(r, 200, text, len);
	}
}

enum core_rc api_h_renew(struct api_req *r)
{
	struct core_token t = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	int64_t lease_ms;
	enum core_rc rc;

	if ((rc = api_json_marker(r, true, &t.marker)) != CORE_OK ||
	    (rc = epoch_field(r, &t.epoch)) != CORE_OK ||
	    (rc = api_json_lease_keep(r, &lease_ms)) != CORE_OK ||
	    (rc = api_card_scope_lazy(r)) != CORE_OK)
		return rc;
	rc = api_card_missing(r, store_card_renew(r->api->st, api_param(r), &t, lease_ms, &actor,
						  &c));
	if (rc != CORE_OK)
		return rc;
	{
		size_t len = 0;
		char *text = api_renew_json_text(c, t.marker, &len); /* no tree */

		core_card_free(c);
		return api_reply_json_text(r, 200, text, len);
	}
}

enum core_rc api_h_release(struct api_req *r)
{
	struct core_token t = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	bool retry = false;
	enum core_rc rc;

	if ((rc = api_json_marker(r, true, &t.marker)) != CORE_OK ||
	    (rc = epoch_field(r, &t.epoch)) != CORE_OK ||
	    (rc = api_json_bool(r, "retry", false, &retry)) != CORE_OK ||
	    (rc = api_card_scope_lazy(r)) != CORE_OK)
		return rc;
	/* retry (DESIGN §17): the work was not done; an attempt is counted in the same step,
	 * and the card comes back with not_before set, or filed into the failed column. */
	rc = api_card_missing(r, retry ? store_card_release_retry(r->api->st, api_param(r), &t,
								    &actor, &c)
				       : store_card_release(r->api->st, api_param(r), &t, &actor,
							    &c));
	if (rc != CORE_OK)
		return rc;
	return api_reply_card(r, 200, c);
}

/* POST /v1/cards/{id}/claim/revoke (operator): the lever when the reaper is off (§11). */
enum core_rc api_h_claim_revoke(struct api_req *r)
{
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	enum core_rc rc = api_card_scope(r);

	if (rc != CORE_OK)
		return rc;
	rc = store_card_revoke(r->api->st, api_param(r), &actor, &c);
	if (rc != CORE_OK)
		return rc;
	return api_reply_card(r, 200, c);
}

/* Why PUT last-run refused its run: unknown, another card's, or another claim's. */
static enum core_rc last_run_detail(struct api_req *r, const struct store_owned_write *w)
{
	enum core_rc rc = CORE_ERR_TRANSITION_REJECTED;
	struct core_run *run = NULL;

	if (store_run_get(r->api->st, w->run_id, &run) != CORE_OK)
		api_fail(r, rc, "no run %s", w->run_id);
	else if (strcmp(run->card_id, api_param(r)) != 0)
		api_fail(r, rc, "run %s is a run of card %s, not %s", w->run_id, run->card_id,
			 api_param(r));
	else
		api_fail(r, rc,
			 "run %s was created under claim (%s, epoch %lld), not the current one "
			 "(%s, epoch %lld)",
			 w->run_id, run->owner ? run->owner : "", (long long)run->claim_epoch,
			 w->token.marker, (long long)w->token.epoch);
	core_run_free(run);
	return rc;
}

/* The owned form of every fenced write: worker role, marker in the body, epoch in If-Match.
 * w->kind and its value are filled by the caller. */
static enum core_rc owned_write(struct api_req *r, struct store_owned_write *w)
{
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	enum core_rc rc;

	if (!api_auth_has(r, API_ROLE_WORKER))
		return api_fail(r, CORE_ERR_FORBIDDEN, "owned writes need the worker role");
	if ((rc = api_json_marker(r, true, &w->token.marker)) != CORE_OK ||
	    (rc = api_if_match(r, &w->token.epoch)) != CORE_OK ||
	    (rc = api_card_scope_lazy(r)) != CORE_OK)
		return rc;
	rc = api_card_missing(r, store_card_owned_write(r->api->st, api_param(r), w, &actor, &c));
	if (rc == CORE_ERR_TRANSITION_REJECTED && w->kind == STORE_OWNED_LAST_RUN)
		return last_run_detail(r, w);
	if (core_rc_is_transition_rejected(rc) && w->kind == STORE_OWNED_STATE)
		return api_column_detail(r, rc, c_board(r), w->state);
	if (rc == CORE_ERR_TRANSITION_REJECTED && w->kind == STORE_OWNED_GAVE_UP && w->gave_up)
		return api_column_detail(r, rc, c_board(r), w->gave_up->state);
	if (rc == CORE_ERR_STATE_CONFLICT && w->kind == STORE_OWNED_STATE && w->from)
		return api_fail(r, rc,
				"card %s is no longer in %s (moved since); nothing was changed, the "
				"claim is still held",
				api_param(r), w->from);
	if (rc != CORE_OK)
		return rc;
	return api_reply_card(r, 200, c);
}

enum core_rc api_h_state(struct api_req *r)
{
	struct store_owned_write w = {.kind = STORE_OWNED_STATE};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	const char *from = NULL, *to, *reason;
	bool owned = api_json_has(r, "marker");
	enum core_rc rc;

	if (owned && !api_auth_has(r, API_ROLE_WORKER))
		return api_fail(r, CORE_ERR_FORBIDDEN, "owned writes need the worker role");
	if (!owned && !api_auth_has(r, API_ROLE_BOT | API_ROLE_OPERATOR))
		return api_fail(r, CORE_ERR_FORBIDDEN,
				"unowned state writes need the bot or operator role (workers send "
				"\"marker\" and If-Match)");
	if ((rc = api_json_name(r, "to", true, &to)) != CORE_OK ||
	    (rc = api_json_reason(r, &reason)) != CORE_OK)
		return rc;
	if (owned) {
		/* Fenced by the claim; "from", when sent, is a compare on the column as well: a
		 * holder giving a card back never moves it out of a column somebody chose since
		 * (409 state_conflict, nothing changed). */
		if ((rc = api_json_name(r, "from", false, &w.from)) != CORE_OK)
			return rc;
		w.state = to;
		w.reason = reason;
		/* "release": true ends the hold in the same fenced step (boardctl's outcome);
		 * "retry": true with it counts an attempt (DESIGN §17). */
		if ((rc = api_json_bool(r, "release", false, &w.release)) != CORE_OK ||
		    (rc = api_json_bool(r, "retry", false, &w.retry)) != CORE_OK)
			return rc;
		if (w.retry && !w.release)
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"\"retry\": true counts an attempt as the claim ends: it "
					"needs \"release\": true");
		return owned_write(r, &w);
	}
	if (api_json_has(r, "release") || api_json_has(r, "retry"))
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"\"%s\" is for the owned form (with \"marker\" and If-Match)",
				api_json_has(r, "release") ? "release" : "retry");
	/* SetStateFrom: bots must declare the source column, operators may omit it. */
	if ((rc = api_json_name(r, "from", false, &from)) != CORE_OK)
		return rc;
	if (!from && !api_auth_has(r, API_ROLE_OPERATOR))
		return api_fail(r, CORE_ERR_FORBIDDEN,
				"only an operator may move a card without \"from\"; a bot must "
				"send the column it expects the card in");
	if ((rc = api_card_load(r, api_param(r), &c)) != CORE_OK)
		return rc;
	/* board.move, or board.close into a terminal column (DESIGN §13) */
	rc = api_auth_cap(r, api_auth_state_cap(r, c->board, to));
	core_card_free(c);
	c = NULL;
	if (rc != CORE_OK)
		return rc;
	rc = store_card_set_state_from(r->api->st, api_param(r), from, to, reason, &actor, &c);
	if (core_rc_is_transition_rejected(rc))
		return api_column_detail(r, rc, c_board(r), to);
	if (rc != CORE_OK)
		return rc;
	return api_reply_card(r, 200, c);
}

enum core_rc api_h_last_run(struct api_req *r)
{
	struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN};
	enum core_rc rc;

	if (!api_json_has(r, "run_id"))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "missing field \"run_id\" (null clears)");
	if ((rc = api_json_id(r, "run_id", false, &w.run_id)) != CORE_OK)
		return rc;
	return owned_write(r, &w);
}

enum core_rc api_h_awaiting_input(struct api_req *r)
{
	struct store_owned_write w = {.kind = STORE_OWNED_AWAITING_INPUT};
	enum core_rc rc;

	if ((rc = api_json_bool(r, "awaiting_input", true, &w.awaiting_input)) != CORE_OK)
		return rc;
	return owned_write(r, &w);
}

enum core_rc api_h_gave_up(struct api_req *r)
{
	struct store_owned_write w = {.kind = STORE_OWNED_GAVE_UP};
	struct core_gave_up g = {0};
	const json_t *v = json_object_get(r->json, "gave_up"), *f;
	const char *at;

	if (!v)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "missing field \"gave_up\" (null clears)");
	if (json_is_object(v)) {
		enum core_rc frc = api_json_fields_check(r, v, "reason ?run_id ?state at", "gave_up.");

		if (frc != CORE_OK)
			return frc;
		g.set = true;
		g.reason = (char *)json_string_value(json_object_get(v, "reason"));
		if (!g.reason || !*g.reason || strlen(g.reason) > API_REASON_MAX)
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"gave_up.reason must be a non-empty string");
		f = json_object_get(v, "run_id");
		if (f && !json_is_null(f)) {
			g.run_id = (char *)json_string_value(f);
			if (!core_id_valid(g.run_id))
				return api_fail(r, CORE_ERR_BAD_REQUEST,
						"gave_up.run_id must be a run id");
		}
		f = json_object_get(v, "state");
		if (f && !json_is_null(f)) {
			g.state = (char *)json_string_value(f);
			if (!core_name_valid(g.state))
				return api_fail(r, CORE_ERR_BAD_REQUEST,
						"gave_up.state must be a column name");
		}
		f = json_object_get(v, "at");
		at = json_string_value(f);
		if (f && !json_is_null(f)) {
			if (!at || !core_time_parse(at, &g.at))
				return api_fail(r, CORE_ERR_BAD_REQUEST,
						"gave_up.at must be an RFC 3339 time");
		} else {
			g.at = store_now(r->api->st);
		}
		w.gave_up = &g;
	} else if (!json_is_null(v)) {
		return api_fail(r, CORE_ERR_BAD_REQUEST, "gave_up must be an object or null");
	}
	/* g's strings are borrowed from the body for the call; the store copies them. */
	return owned_write(r, &w);
}
