/* DESIGN §11 over HTTP (issue 9): the claim bound to its token, runs fenced and final,
 * last-run checked, reopen and revoke releasing, epochs across delete, the reserved marker
 * in any case, blockers, renew keeping its lease, the comment limit, and details that say
 * what was wrong. Each test runs against a fresh in-process server. */
#include "tests/api/api_test.h"

#include <stdio.h>
#include <string.h>

START_TEST(claim_bound_to_the_token)
{
	char *id = t_card_new("{\"state\":\"ready\"}"), path[128], body[128], hdr[64], *before;
	long long e = t_claim(id, "w1");
	json_t *j;

	snprintf(path, sizeof path, "/v1/cards/%s", id);
	j = t_must(200, "GET", path, BOT, NULL, NULL);
	ck_assert_str_eq(t_str(json_object_get(j, "claim"), "holder"), "t-worker");
	json_decref(j);
	before = t_card_raw(id);
	/* Another worker token that read (marker, epoch) off the card is not the holder. */
	snprintf(body, sizeof body, "{\"marker\":\"w1\",\"epoch\":%lld}", e);
	snprintf(hdr, sizeof hdr, "If-Match: \"%lld\"", e);
	snprintf(path, sizeof path, "/v1/cards/%s/renew", id);
	t_problem(409, "claim_conflict", "POST", path, W2, NULL, body);
	snprintf(path, sizeof path, "/v1/cards/%s/release", id);
	t_problem(409, "claim_conflict", "POST", path, W2, NULL, body);
	snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
	t_problem(409, "claim_conflict", "POST", path, W2, NULL, "{\"marker\":\"w1\"}");
	ck_assert_int_eq(t_owned_state(W2, id, "w1", e, "review"), 409);
	snprintf(path, sizeof path, "/v1/cards/%s/awaiting-input", id);
	t_problem(409, "claim_conflict", "PUT", path, W2, hdr,
		  "{\"marker\":\"w1\",\"awaiting_input\":true}");
	snprintf(body, sizeof body, "{\"card_id\":\"%s\",\"marker\":\"w1\",\"status\":\"running\"}",
		 id);
	t_problem(409, "claim_conflict", "POST", "/v1/runs", W2, NULL, body);
	{
		char *after = t_card_raw(id);

		ck_assert_str_eq(before, after);
		free(after);
	}
	free(before);
	/* A worker comments as the claim's holder: fenced like every owned write. */
	snprintf(path, sizeof path, "/v1/cards/%s/comments", id);
	t_problem(409, "claim_conflict", "POST", path, W2, hdr,
		  "{\"marker\":\"w1\",\"body\":\"not mine\"}");
	t_problem(428, "precondition_required", "POST", path, W, NULL,
		  "{\"marker\":\"w1\",\"body\":\"no epoch\"}");
	t_problem(403, "forbidden", "POST", path, W, NULL, "{\"body\":\"no marker\"}");
	j = t_must(201, "POST", path, W, hdr, "{\"marker\":\"w1\",\"body\":\"progress\"}");
	ck_assert_str_eq(t_str(json_array_get(json_object_get(j, "comments"), 0), "author"),
			 "t-worker");
	json_decref(j);
	/* The holder's own token goes on. */
	ck_assert_int_eq(t_owned_state(W, id, "w1", e, "review"), 200);
	free(id);
}
END_TEST

START_TEST(runs_fenced_and_final)
{
	char *id = t_card_new("{\"state\":\"ready\"}"), body[256], hdr[64], path[128];
	long long e = t_claim(id, "w1");
	json_t *j;

	snprintf(body, sizeof body,
		 "{\"id\":\"r1\",\"card_id\":\"%s\",\"marker\":\"w1\",\"status\":\"running\"}", id);
	j = t_must(201, "POST", "/v1/runs", W, NULL, body);
	ck_assert_int_eq(t_int(j, "claim_epoch"), e);
	json_decref(j);
	/* run events carry the marker */
	j = t_must(200, "GET", "/v1/events?after=0&limit=1000", OP, NULL, NULL);
	{
		json_t *ev = json_object_get(j, "events"), *last;

		last = json_array_get(ev, json_array_size(ev) - 1);
		ck_assert_str_eq(t_str(last, "type"), "run_created");
		ck_assert_str_eq(t_str(json_object_get(last, "payload"), "marker"), "w1");
	}
	json_decref(j);
	/* last-run: a made-up run, and a run of another card, are refused 422 */
	snprintf(hdr, sizeof hdr, "If-Match: \"%lld\"", e);
	snprintf(path, sizeof path, "/v1/cards/%s/last-run", id);
	t_problem_says(422, "transition_rejected", "no run made-up", "PUT", path, W, hdr,
		       "{\"marker\":\"w1\",\"run_id\":\"made-up\"}");
	json_decref(t_must(200, "PUT", path, W, hdr, "{\"marker\":\"w1\",\"run_id\":\"r1\"}"));
	/* final stays final: the owner cannot undo it, nor an operator cancel it */
	json_decref(t_must(200, "PATCH", "/v1/runs/r1", W, NULL,
			   "{\"marker\":\"w1\",\"status\":\"cancelled\"}"));
	t_problem(409, "run_final", "PATCH", "/v1/runs/r1", W, NULL,
		  "{\"marker\":\"w1\",\"status\":\"running\"}");
	t_problem(409, "run_final", "POST", "/v1/runs/r1/heartbeat", W, NULL, "{\"marker\":\"w1\"}");
	t_problem(409, "run_final", "POST", "/v1/runs/r1/cancel", OP, NULL, NULL);
	j = t_must(200, "GET", "/v1/runs/r1", BOT, NULL, NULL);
	ck_assert_str_eq(t_str(j, "status"), "cancelled");
	json_decref(j);
	free(id);
}
END_TEST

START_TEST(reopen_and_revoke_release)
{
	char *id = t_card_new("{\"state\":\"ready\"}"), path[128], body[128];
	long long e = t_claim(id, "w1");
	json_t *j;

	ck_assert_int_eq(t_owned_state(W, id, "w1", e, "done"), 200);
	snprintf(path, sizeof path, "/v1/cards/%s/reopen", id);
	t_problem_says(422, "transition_rejected", "not a working column", "POST", path, OP, NULL,
		       "{\"to\":\"blocked\"}");
	t_problem_says(422, "transition_rejected", "no column nowhere", "POST", path, OP, NULL,
		       "{\"to\":\"nowhere\"}");
	j = t_must(200, "POST", path, OP, NULL, "{\"to\":\"ready\"}");
	ck_assert(json_is_null(json_object_get(j, "claim")));
	ck_assert_int_eq(t_int(j, "claim_epoch"), e);
	json_decref(j);
	/* the worker that filed it done can no longer write */
	ck_assert_int_eq(t_owned_state(W, id, "w1", e, "in_progress"), 409);
	snprintf(body, sizeof body, "{\"marker\":\"w1\",\"epoch\":%lld}", e);
	snprintf(path, sizeof path, "/v1/cards/%s/renew", id);
	t_problem(409, "claim_conflict", "POST", path, W, NULL, body);

	/* revoke: the operator's lever when the reaper is off */
	e = t_claim(id, "w1");
	snprintf(path, sizeof path, "/v1/cards/%s/claim/revoke", id);
	t_problem(403, "forbidden", "POST", path, W, NULL, NULL);
	j = t_must(200, "POST", path, OP, NULL, NULL);
	ck_assert(json_is_null(json_object_get(j, "claim")));
	json_decref(j);
	j = t_must(200, "GET", "/v1/events?after=0&limit=1000", OP, NULL, NULL);
	{
		json_t *ev = json_object_get(j, "events"), *last;

		last = json_array_get(ev, json_array_size(ev) - 1);
		ck_assert_str_eq(t_str(last, "type"), "card_released");
		ck_assert_str_eq(t_str(last, "reason"), "operator_revoke");
		ck_assert_str_eq(t_str(last, "actor"), "t-operator");
	}
	json_decref(j);
	snprintf(path, sizeof path, "/v1/cards/%s/renew", id);
	snprintf(body, sizeof body, "{\"marker\":\"w1\",\"epoch\":%lld}", e);
	t_problem(409, "claim_conflict", "POST", path, W, NULL, body);
	t_problem(404, "not_found", "POST", "/v1/cards/ghost/claim/revoke", OP, NULL, NULL);
	free(id);
}
END_TEST

START_TEST(epochs_never_repeat_and_markers_reserved)
{
	char path[128], body[128];
	long long e1, e2;

	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"re\",\"state\":\"ready\"}"));
	e1 = t_claim("re", "w1");
	ck_assert_int_eq(t_call("DELETE", "/v1/cards/re", OP, NULL, NULL, NULL), 204);
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"re\",\"state\":\"ready\"}"));
	e2 = t_claim("re", "w1");
	ck_assert_int_gt(e2, e1);
	snprintf(body, sizeof body, "{\"marker\":\"w1\",\"epoch\":%lld}", e1);
	t_problem(409, "claim_conflict", "POST", "/v1/cards/re/renew", W, NULL, body);
	/* the reaper's marker family, in any case */
	snprintf(path, sizeof path, "/v1/cards/re/claim");
	t_problem(400, "bad_request", "POST", path, W2, NULL, "{\"marker\":\"REAPER:x\"}");
	t_problem(400, "bad_request", "POST", path, W2, NULL, "{\"marker\":\"Reaper:host\"}");
}
END_TEST

START_TEST(blockers_pending_and_dependents)
{
	json_t *j;

	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"a\",\"state\":\"ready\"}"));
	j = t_must(201, "POST", "/v1/cards", BOT, NULL,
		   "{\"id\":\"b\",\"state\":\"ready\",\"blockers\":[\"a\"]}");
	ck_assert_str_eq(t_str(j, "state"), "waiting_deps");
	json_decref(j);
	t_problem_says(409, "blockers_pending", "blocker a", "POST", "/v1/cards/b/claim", W, NULL,
		       "{\"marker\":\"w1\"}");
	t_problem_says(409, "dependents_outstanding", "card b lists a in its blockers", "DELETE",
		       "/v1/cards/a", OP, NULL, NULL);
	json_decref(t_must(200, "PATCH", "/v1/cards/a/state", OP, NULL, "{\"to\":\"done\"}"));
	t_claim("b", "w1");
	/* b moved on (unblocked, claimed): a cannot leave done, and the answer says which card. */
	t_problem_says(409, "dependents_outstanding", "card b lists a in its blockers (ready)",
		       "POST", "/v1/cards/a/reopen", OP, NULL, "{\"to\":\"ready\"}");
}
END_TEST

START_TEST(renew_keeps_the_lease_and_limits)
{
	char *id = t_card_new("{\"state\":\"ready\"}"), path[128], body[256];
	json_t *j;
	long long e;
	int i;

	snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
	j = t_must(200, "POST", path, W, NULL, "{\"marker\":\"w1\",\"lease_ms\":5000}");
	e = t_int(j, "epoch");
	json_decref(j);
	snprintf(path, sizeof path, "/v1/cards/%s/renew", id);
	snprintf(body, sizeof body, "{\"marker\":\"w1\",\"epoch\":%lld}", e);
	j = t_must(200, "POST", path, W, NULL, body);
	ck_assert_int_eq(t_int(j, "lease_ms"), 5000); /* not the 15-minute default */
	json_decref(j);
	/* a run heartbeat likewise keeps the run's own */
	snprintf(body, sizeof body,
		 "{\"id\":\"rk\",\"card_id\":\"%s\",\"marker\":\"w1\",\"status\":\"running\","
		 "\"lease_ms\":4000}", id);
	json_decref(t_must(201, "POST", "/v1/runs", W, NULL, body));
	j = t_must(200, "POST", "/v1/runs/rk/heartbeat", W, NULL, "{\"marker\":\"w1\"}");
	ck_assert_int_eq(t_int(j, "lease_ms"), 4000);
	json_decref(j);

	store_limits_set(T.st, 2);
	snprintf(path, sizeof path, "/v1/cards/%s/comments", id);
	for (i = 0; i < 2; i++)
		json_decref(t_must(201, "POST", path, BOT, NULL, "{\"body\":\"note\"}"));
	t_problem_says(413, "payload_too_large", "at most 2", "POST", path, BOT, NULL,
		       "{\"body\":\"one too many\"}");
	free(id);
}
END_TEST

START_TEST(details_name_what_was_wrong)
{
	char *id = t_card_new("{\"state\":\"ready\"}"), path[128], body[160];

	t_problem_says(422, "transition_rejected", "no column nowhere", "POST", "/v1/cards", BOT,
		       NULL, "{\"state\":\"nowhere\"}");
	t_problem_says(404, "not_found", "no board ghost", "POST", "/v1/cards", OP, NULL,
		       "{\"board\":\"ghost\"}");
	snprintf(path, sizeof path, "/v1/cards/%s/state", id);
	t_problem_says(422, "transition_rejected", "no column nowhere", "PATCH", path, OP, NULL,
		       "{\"to\":\"nowhere\"}");
	t_problem_says(422, "transition_rejected", "blocker ghost is not a card", "POST",
		       "/v1/cards", BOT, NULL, "{\"blockers\":[\"ghost\"]}");
	snprintf(path, sizeof path, "/v1/cards/%s", id);
	snprintf(body, sizeof body, "{\"blockers\":[\"%s\"]}", id);
	t_problem_says(422, "transition_rejected", "cannot block itself", "PATCH", path, BOT, NULL,
		       body);
	snprintf(body, sizeof body, "{\"id\":\"%s\"}", id);
	t_problem_says(409, "already_exists", "already exists", "POST", "/v1/cards", BOT, NULL,
		       body);
	ck_assert_ptr_nonnull(strstr(T_BODY, id));
	t_claim(id, "w1");
	snprintf(body, sizeof body,
		 "{\"id\":\"run-twice\",\"card_id\":\"%s\",\"marker\":\"w1\",\"status\":\"running\"}",
		 id);
	json_decref(t_must(201, "POST", "/v1/runs", W, NULL, body));
	t_problem_says(409, "already_exists", "run run-twice already exists", "POST", "/v1/runs", W,
		       NULL, body);
	/* A sweep or a column rename on a board that does not exist: 404 naming the board. */
	t_problem_says(404, "not_found", "no board ghost", "POST", "/v1/labels/rename", OP, NULL,
		       "{\"board\":\"ghost\",\"from\":\"a\",\"to\":\"b\"}");
	t_problem_says(404, "not_found", "no board ghost", "POST", "/v1/labels/merge", OP, NULL,
		       "{\"board\":\"ghost\",\"from\":[\"a\"],\"to\":\"b\"}");
	t_problem_says(404, "not_found", "no board ghost", "DELETE", "/v1/labels/a?board=ghost", OP,
		       NULL, NULL);
	t_problem_says(404, "not_found", "no board ghost", "POST",
		       "/v1/boards/ghost/columns/ready/rename", OP, NULL, "{\"to\":\"r2\"}");
	t_problem_says(404, "not_found", "no column nowhere on board default", "POST",
		       "/v1/boards/default/columns/nowhere/rename", OP, NULL, "{\"to\":\"r2\"}");
	/* A board PUT that drops a column still holding cards names the column and a card. */
	{
		json_t *b = t_must(200, "GET", "/v1/boards/default", OP, NULL, NULL), *cols, *kept;
		char *held = t_card_new("{\"state\":\"review\"}"), *text, *before, *after;
		size_t k;

		cols = json_object_get(b, "columns");
		kept = json_array();
		for (k = 0; k < json_array_size(cols); k++)
			if (strcmp(t_str(json_array_get(cols, k), "name"), "review") != 0)
				json_array_append(kept, json_array_get(cols, k));
		json_object_set_new(b, "columns", kept);
		text = json_dumps(b, JSON_COMPACT);
		before = t_card_raw(held);
		t_problem_says(422, "transition_rejected", "column review of board default", "PUT",
			       "/v1/boards/default", OP, NULL, text);
		ck_assert_ptr_nonnull(strstr(T_BODY, held));
		after = t_card_raw(held);
		ck_assert_str_eq(after, before);
		free(after);
		free(before);
		free(text);
		free(held);
		json_decref(b);
	}
	free(id);
}
END_TEST

static size_t t_events_n(void)
{
	json_t *j = t_must(200, "GET", "/v1/events?limit=1000", OP, NULL, NULL);
	size_t n = json_array_size(json_object_get(j, "events"));

	json_decref(j);
	return n;
}

/* The machine reasons (DESIGN §7: watchdog, state_rename, state_delete, migration) are the
 * server's own provenance: a client that sends one would blank its own name off the event
 * (§8: every event records the token's name) and silence every effect of its write. Each
 * door that takes a reason refuses them, 400, and nothing changes (but an operator's
 * migration: next test); any other reason is kept, with the actor. */
START_TEST(machine_reasons_are_the_servers_own)
{
	const char *machine[] = {"watchdog", "state_rename", "state_delete", "migration"};
	char *id = t_card_new("{\"state\":\"ready\"}"), *dn = t_card_new("{\"state\":\"done\"}");
	char *before = t_card_raw(id), *before_dn = t_card_raw(dn), *after;
	char path[128], path_dn[128], body[256], im[64];
	long long ep = t_claim(id, "w1");
	size_t n, i;
	json_t *j, *evs, *last;

	free(before);
	before = t_card_raw(id);
	n = t_events_n();
	snprintf(path, sizeof path, "/v1/cards/%s/state", id);
	snprintf(path_dn, sizeof path_dn, "/v1/cards/%s/reopen", dn);
	snprintf(im, sizeof im, "If-Match: \"%lld\"", ep);
	for (i = 0; i < sizeof machine / sizeof machine[0]; i++) {
		snprintf(body, sizeof body, "{\"from\":\"ready\",\"to\":\"review\",\"reason\":\"%s\"}",
			 machine[i]);
		t_problem_says(400, "bad_request", machine[i], "PATCH", path, BOT, NULL, body);
		snprintf(body, sizeof body, "{\"to\":\"review\",\"reason\":\"%s\"}", machine[i]);
		if (strcmp(machine[i], "migration") != 0)
			t_problem_says(400, "bad_request", machine[i], "PATCH", path, OP, NULL, body);
		snprintf(body, sizeof body, "{\"marker\":\"w1\",\"to\":\"review\",\"reason\":\"%s\"}",
			 machine[i]);
		t_problem_says(400, "bad_request", machine[i], "PATCH", path, W, im, body);
		snprintf(body, sizeof body, "{\"to\":\"ready\",\"reason\":\"%s\"}", machine[i]);
		if (strcmp(machine[i], "migration") != 0)
			t_problem_says(400, "bad_request", machine[i], "POST", path_dn, OP, NULL,
				       body);
	}
	after = t_card_raw(id);
	ck_assert_str_eq(after, before);
	free(after);
	after = t_card_raw(dn);
	ck_assert_str_eq(after, before_dn);
	free(after);
	ck_assert_uint_eq(t_events_n(), n);
	/* Another reason is the client's to give: kept, and the event names the token. */
	json_decref(t_must(200, "PATCH", path, BOT, NULL,
			   "{\"from\":\"ready\",\"to\":\"review\",\"reason\":\"triaged\"}"));
	j = t_must(200, "GET", "/v1/events?limit=1000", OP, NULL, NULL);
	evs = json_object_get(j, "events");
	last = json_array_get(evs, json_array_size(evs) - 1);
	ck_assert_str_eq(t_str(last, "type"), "card_state_changed");
	ck_assert_str_eq(t_str(last, "reason"), "triaged");
	ck_assert(json_is_false(json_object_get(last, "machine")));
	ck_assert_str_ne(t_str(last, "actor"), "");
	json_decref(j);
	free(before);
	free(before_dn);
	free(id);
	free(dn);
}
END_TEST

/* deploy/boardd-copy fills a new store as an operator and moves each copied card to its column
 * under reason migration, so that nothing fires on the target: that one machine reason is an
 * operator's to give. The event is machine (actor blanked, DESIGN §7); the same body from a
 * bot is refused and changes nothing. */
START_TEST(an_operators_migration_is_machine)
{
	char *id = t_card_new("{\"state\":\"ready\"}"), *before, *after, path[128];
	json_t *j, *evs, *last;
	size_t n;

	snprintf(path, sizeof path, "/v1/cards/%s/state", id);
	before = t_card_raw(id);
	n = t_events_n();
	t_problem_says(400, "bad_request", "migration", "PATCH", path, BOT, NULL,
		       "{\"from\":\"ready\",\"to\":\"review\",\"reason\":\"migration\"}");
	after = t_card_raw(id);
	ck_assert_str_eq(after, before);
	ck_assert_uint_eq(t_events_n(), n);
	free(after);
	json_decref(t_must(200, "PATCH", path, OP, NULL,
			   "{\"to\":\"review\",\"reason\":\"migration\"}"));
	j = t_must(200, "GET", "/v1/events?limit=1000", OP, NULL, NULL);
	evs = json_object_get(j, "events");
	last = json_array_get(evs, json_array_size(evs) - 1);
	ck_assert_str_eq(t_str(last, "type"), "card_state_changed");
	ck_assert_str_eq(t_str(last, "reason"), "migration");
	ck_assert(json_is_true(json_object_get(last, "machine")));
	json_decref(j);
	free(before);
	free(id);
}
END_TEST

/* The owned form of PATCH /state takes "from" as a compare on the column besides its fence
 * (a holder giving a card back never moves it out of a column somebody chose since): a
 * mismatch is 409 state_conflict, nothing changed, the claim kept. "release" in the unowned
 * form is refused, not dropped. */
START_TEST(state_forms_preconditions)
{
	char *id = t_card_new("{\"state\":\"ready\"}"), *before, *after, path[128], im[64];
	long long ep = t_claim(id, "w1");
	json_t *c;

	snprintf(path, sizeof path, "/v1/cards/%s/state", id);
	snprintf(im, sizeof im, "If-Match: \"%lld\"", ep);
	before = t_card_raw(id);
	t_problem_says(409, "state_conflict", "no longer in inbox", "PATCH", path, W, im,
		       "{\"marker\":\"w1\",\"from\":\"inbox\",\"to\":\"review\",\"release\":true}");
	t_problem_says(400, "bad_request", "\"release\" is for the owned form", "PATCH", path, BOT,
		       NULL, "{\"from\":\"ready\",\"to\":\"review\",\"release\":true}");
	t_problem(400, "bad_request", "PATCH", path, W, im,
		  "{\"marker\":\"w1\",\"from\":\"no such\",\"to\":\"review\"}");
	after = t_card_raw(id);
	ck_assert_str_eq(after, before);
	free(after);
	c = t_must(200, "PATCH", path, W, im,
		   "{\"marker\":\"w1\",\"from\":\"ready\",\"to\":\"review\",\"release\":true}");
	ck_assert_str_eq(t_str(c, "state"), "review");
	ck_assert(json_is_null(json_object_get(c, "claim")));
	json_decref(c);
	free(before);
	free(id);
}
END_TEST

TCase *api_tcase_fence(void)
{
	TCase *tc = tcase_create("fence");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, claim_bound_to_the_token);
	tcase_add_test(tc, runs_fenced_and_final);
	tcase_add_test(tc, reopen_and_revoke_release);
	tcase_add_test(tc, epochs_never_repeat_and_markers_reserved);
	tcase_add_test(tc, blockers_pending_and_dependents);
	tcase_add_test(tc, renew_keeps_the_lease_and_limits);
	tcase_add_test(tc, details_name_what_was_wrong);
	tcase_add_test(tc, machine_reasons_are_the_servers_own);
	tcase_add_test(tc, an_operators_migration_is_machine);
	tcase_add_test(tc, state_forms_preconditions);
	return tc;
}
