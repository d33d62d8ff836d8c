/* Every error code of DESIGN §8 produced at least once through HTTP, plus lists, runs,
 * boards and the routes that need no token. */
#include "tests/api/api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(err_400_401_403_404_405)
{
	char *allow, *www;

	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, "{\"title\":");
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, "[1,2]");
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, "{\"title\":7}");
	t_problem(400, "bad_request", "GET", "/v1/cards?limit=0", BOT, NULL, NULL);
	t_problem(400, "bad_request", "GET", "/v1/cards?claimed=maybe", BOT, NULL, NULL);

	t_problem(401, "unauthorized", "GET", "/v1/cards", NULL, NULL, NULL);
	www = httpc_header(T_HDRS, "WWW-Authenticate");
	ck_assert_str_eq(www, "Bearer");
	free(www);
	t_problem(401, "unauthorized", "GET", "/v1/cards", "not-a-token", NULL, NULL);
	t_problem(401, "unauthorized", "GET", "/v1/cards", NULL, "Authorization: Basic eDp5", NULL);
	/* Two credentials (a valid one and an invalid one, in either order; or the same twice):
	 * which one speaks is not guessed. 400, and nothing is created. */
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, "Authorization: Bearer not-a-token",
		  "{\"title\":\"two credentials\"}");
	ck_assert_msg(strstr(T_BODY, "more than one Authorization header"), "%s", T_BODY);
	t_problem(400, "bad_request", "GET", "/v1/cards", "not-a-token", "Authorization: Bearer " OP,
		  NULL);
	t_problem(400, "bad_request", "GET", "/v1/cards", OP, "Authorization: Bearer " OP, NULL);
	{
		json_t *j = t_must(200, "GET", "/v1/cards?limit=200", OP, NULL, NULL);

		ck_assert_ptr_null(strstr(T_BODY, "two credentials"));
		json_decref(j);
	}

	t_problem(403, "forbidden", "POST", "/v1/cards", W, NULL, "{}");

	t_problem(404, "not_found", "GET", "/v1/nothing", BOT, NULL, NULL);
	t_problem(404, "not_found", "GET", "/v1/cards/nope", BOT, NULL, NULL);
	t_problem(404, "not_found", "POST", "/v1/labels/nowhere/rename", OP, NULL, "{}");
	t_problem(404, "not_found", "POST", "/v1/boards/default/columns/nope/rename", OP, NULL,
		  "{\"to\":\"x2\"}");
	t_problem(404, "not_found", "GET", "/v1/cards/", BOT, NULL, NULL);

	t_problem(405, "method_not_allowed", "DELETE", "/v1/cards", OP, NULL, NULL);
	allow = httpc_header(T_HDRS, "Allow");
	ck_assert_str_eq(allow, "POST, GET, HEAD");
	free(allow);
	t_problem(405, "method_not_allowed", "POST", "/v1/cards/x/state", W, NULL, "{}");
	allow = httpc_header(T_HDRS, "Allow");
	ck_assert_str_eq(allow, "PATCH");
	free(allow);
}
END_TEST

/* The claim routes and owned writes on a missing card answer 404 "no card <id>", and on a
 * malformed id 400, with the same detail whether the token sees every board (the handler
 * skips its own read of the card: api_card_scope_lazy) or only some (it reads it). */
START_TEST(err_missing_card_writes)
{
	static const struct {
		const char *method, *route, *body;
	} writes[] = {
		{"POST", "claim", "{\"marker\":\"m\"}"},
		{"POST", "renew", "{\"marker\":\"m\",\"epoch\":1}"},
		{"POST", "release", "{\"marker\":\"m\",\"epoch\":1}"},
		{"PATCH", "state", "{\"marker\":\"m\",\"to\":\"review\"}"},
		{"PUT", "last-run", "{\"marker\":\"m\",\"run_id\":null}"},
		{"PUT", "awaiting-input", "{\"marker\":\"m\",\"awaiting_input\":true}"},
	};
	static const char *const toks[] = {W, ALL, SCOPED};
	char path[256];
	size_t i, k;

	for (i = 0; i < sizeof writes / sizeof writes[0]; i++) {
		for (k = 0; k < sizeof toks / sizeof toks[0]; k++) {
			json_t *j;

			snprintf(path, sizeof path, "/v1/cards/nope/%s", writes[i].route);
			ck_assert_int_eq(t_call(writes[i].method, path, toks[k], "If-Match: \"1\"",
						writes[i].body, &j),
					 404);
			ck_assert_msg(j && strcmp(t_str(j, "detail"), "no card nope") == 0,
				      "%s %s: %s", writes[i].method, path, T_BODY);
			json_decref(j);
			snprintf(path, sizeof path, "/v1/cards/a%%20b/%s", writes[i].route);
			ck_assert_int_eq(t_call(writes[i].method, path, toks[k], "If-Match: \"1\"",
						writes[i].body, &j),
					 400);
			ck_assert_msg(j && strcmp(t_str(j, "detail"),
						  "card id must match [A-Za-z0-9._:-]{1,128}") == 0,
				      "%s %s: %s", writes[i].method, path, T_BODY);
			json_decref(j);
		}
	}
}
END_TEST

START_TEST(err_409)
{
	char *a, *b, path[256], body[256];

	a = t_card_new("{\"id\":\"c-a\",\"title\":\"a\"}");
	/* already_exists */
	t_problem(409, "already_exists", "POST", "/v1/cards", BOT, NULL, "{\"id\":\"c-a\"}");
	/* claim_conflict: another marker, even one of the same worker token */
	t_claim(a, "m-1");
	snprintf(path, sizeof path, "/v1/cards/%s/claim", a);
	t_problem(409, "claim_conflict", "POST", path, W, NULL, "{\"marker\":\"m-2\"}");
	t_problem(409, "claim_conflict", "POST", path, W2, NULL, "{\"marker\":\"m-3\"}");
	/* state_conflict: the bot's declared source is wrong */
	snprintf(path, sizeof path, "/v1/cards/%s/state", a);
	t_problem(409, "state_conflict", "PATCH", path, BOT, NULL,
		  "{\"from\":\"ready\",\"to\":\"review\"}");
	/* dependents_outstanding: b depends on a; a is done; b sits outside waiting_deps */
	json_decref(t_must(200, "PATCH", path, OP, NULL, "{\"to\":\"done\"}"));
	snprintf(body, sizeof body, "{\"id\":\"c-b\",\"blockers\":[\"%s\"]}", a);
	b = t_card_new(body);
	snprintf(path, sizeof path, "/v1/cards/%s/reopen", a);
	t_problem(409, "dependents_outstanding", "POST", path, OP, NULL, "{\"to\":\"ready\"}");
	free(a);
	free(b);
}
END_TEST

START_TEST(err_415_422_428_503)
{
	const char *hdrs[] = {"Authorization: Bearer " BOT, "Content-Type: text/plain", NULL};
	char *id, *before, path[256];
	int st = 0;
	char *rb = NULL, *rh = NULL;
	long long e;

	/* 415 */
	ck_assert_int_eq(httpc_request(TC, "POST", "/v1/cards", hdrs, "{}", &st, &rh, &rb), 0);
	ck_assert_int_eq(st, 415);
	ck_assert_ptr_nonnull(strstr(rb, "unsupported_media_type"));
	free(rb);
	free(rh);

	/* 422 terminal_state_exit and transition_rejected */
	id = t_card_new("{\"title\":\"t\"}");
	snprintf(path, sizeof path, "/v1/cards/%s/state", id);
	json_decref(t_must(200, "PATCH", path, BOT, NULL, "{\"from\":\"inbox\",\"to\":\"done\"}"));
	t_problem(422, "terminal_state_exit", "PATCH", path, BOT, NULL,
		  "{\"from\":\"done\",\"to\":\"ready\"}");
	t_problem(422, "transition_rejected", "PATCH", path, OP, NULL, "{\"to\":\"nowhere\"}");
	snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
	t_problem(422, "transition_rejected", "POST", path, W, NULL, "{\"marker\":\"m\"}");
	free(id);

	/* 428: owned write without If-Match; 400 on a malformed one */
	id = t_card_new("{\"title\":\"u\"}");
	e = t_claim(id, "m-9");
	snprintf(path, sizeof path, "/v1/cards/%s/state", id);
	before = t_card_raw(id);
	t_problem(428, "precondition_required", "PATCH", path, W, NULL,
		  "{\"marker\":\"m-9\",\"to\":\"in_progress\"}");
	t_problem(400, "bad_request", "PATCH", path, W, "If-Match: \"abc\"",
		  "{\"marker\":\"m-9\",\"to\":\"in_progress\"}");
	snprintf(path, sizeof path, "/v1/cards/%s/last-run", id);
	t_problem(428, "precondition_required", "PUT", path, W, NULL,
		  "{\"marker\":\"m-9\",\"run_id\":null}");
	snprintf(path, sizeof path, "/v1/cards/%s/gave-up", id);
	t_problem(428, "precondition_required", "PUT", path, W, NULL,
		  "{\"marker\":\"m-9\",\"gave_up\":null}");
	snprintf(path, sizeof path, "/v1/cards/%s/awaiting-input", id);
	t_problem(428, "precondition_required", "PUT", path, W, NULL,
		  "{\"marker\":\"m-9\",\"awaiting_input\":true}");
	{
		char *after = t_card_raw(id);

		ck_assert_str_eq(before, after);
		free(after);
	}
	ck_assert_int_ge(e, 1);
	free(before);
	free(id);

	/* 503 store_unavailable (with Retry-After) from the NULL reaper hooks */
	t_problem(503, "store_unavailable", "GET", "/v1/reaper", W, NULL, NULL);
	rh = httpc_header(T_HDRS, "Retry-After");
	ck_assert_str_eq(rh, "1");
	free(rh);
	t_problem(503, "store_unavailable", "POST", "/v1/reaper/pass", OP, NULL, NULL);
}
END_TEST

/* 413: declared too large (answered before the body is read), and counted while streamed. */
START_TEST(err_413)
{
	char *rb = NULL, *rh = NULL, big[8192], req[512];
	int st = 0;

	snprintf(req, sizeof req,
		 "POST /v1/cards HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " BOT
		 "\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n");
	ck_assert_int_eq(httpc_raw(TC, req, strlen(req), &st, &rh, &rb), 0);
	ck_assert_int_eq(st, 413);
	ck_assert_ptr_nonnull(strstr(rb, "payload_too_large"));
	free(rb);
	free(rh);

	/* chunked: no length up front, the count trips while accumulating */
	{
		char *stream = NULL;
		size_t len = 0, i;
		FILE *f = open_memstream(&stream, &len);

		fprintf(f, "POST /v1/cards HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " BOT
			   "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
		memset(big, ' ', sizeof big);
		for (i = 0; i < 4; i++) {
			fprintf(f, "%zx\r\n", sizeof big);
			fwrite(big, 1, sizeof big, f);
			fprintf(f, "\r\n");
		}
		fprintf(f, "0\r\n\r\n");
		fclose(f);
		ck_assert_int_eq(httpc_raw(TC, stream, len, &st, &rh, &rb), 0);
		ck_assert_int_eq(st, 413);
		free(stream);
		free(rb);
		free(rh);
	}
	/* a body just under the limit still works, on a fresh connection */
	json_decref(t_must(200, "GET", "/v1/cards", BOT, NULL, NULL));
	{
		json_t *j = t_must(200, "GET", "/v1/cards", BOT, NULL, NULL);

		ck_assert_int_eq(json_array_size(json_object_get(j, "cards")), 0);
		json_decref(j);
	}
}
END_TEST

/* A query parameter without a value ("?limit", "?board") is as bad as an empty one
 * ("?limit="): 400 naming it, on every route that takes a query, never silently dropped. */
START_TEST(err_query_key_without_value)
{
	const char *paths[] = {"/v1/cards?limit", "/v1/cards?board", "/v1/cards?claimed",
			       "/v1/cards?after", "/v1/events?limit", "/v1/events?after",
			       "/v1/events?wait_ms", "/v1/labels?board", "/v1/attention?limit",
			       "/v1/cards?state=ready&label"};
	size_t i;

	for (i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		t_problem(400, "bad_request", "GET", paths[i], OP, NULL, NULL);
		ck_assert_msg(strstr(T_BODY, "has no value"), "%s: %s", paths[i], T_BODY);
	}
	t_problem(400, "bad_request", "DELETE", "/v1/labels/x?board", OP, NULL, NULL);
	ck_assert_msg(strstr(T_BODY, "has no value"), "%s", T_BODY);
	json_decref(t_must(200, "GET", "/v1/cards?limit=1", OP, NULL, NULL));
}
END_TEST

/* The labels a card may carry (CORE_LABELS_MAX) are counted on the card, after the write:
 * past them the answer says so on every door that writes labels, and nothing changes. */
START_TEST(err_too_many_labels_named)
{
	char *id = t_card_new("{\"title\":\"many\"}"), *before, *after, path[128];
	char body[4096], list[3800];
	size_t i, len = 0;

	for (i = 0; i <= CORE_LABELS_MAX; i++)
		len += (size_t)snprintf(list + len, sizeof list - len, "%s\"l%zu\"", i ? "," : "", i);
	before = t_card_raw(id);
	snprintf(path, sizeof path, "/v1/cards/%s/labels", id);
	snprintf(body, sizeof body, "{\"labels\":[%s]}", list);
	t_problem(400, "bad_request", "PUT", path, BOT, NULL, body);
	ck_assert_msg(strstr(T_BODY, "at most 128 labels"), "%s", T_BODY);
	snprintf(body, sizeof body, "{\"add\":[%s]}", list);
	t_problem(400, "bad_request", "PATCH", path, BOT, NULL, body);
	ck_assert_msg(strstr(T_BODY, "at most 128 labels"), "%s", T_BODY);
	after = t_card_raw(id);
	ck_assert_str_eq(after, before);
	snprintf(body, sizeof body, "{\"title\":\"x\",\"labels\":[%s]}", list);
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, body);
	ck_assert_msg(strstr(T_BODY, "at most 128 labels"), "%s", T_BODY);
	free(after);
	free(before);
	free(id);
}
END_TEST

/* More blockers than a card may list (CORE_BLOCKERS_MAX) is said as such on create and patch,
 * labels or not (a create with labels used to be told "at most 128 labels"), and changes
 * nothing. */
START_TEST(err_too_many_blockers_named)
{
	char *id = t_card_new("{\"title\":\"few\"}"), *before, *after, path[128];
	char body[8192], list[6000];
	size_t i, len = 0;
	json_t *j;

	for (i = 0; i <= CORE_BLOCKERS_MAX; i++)
		len += (size_t)snprintf(list + len, sizeof list - len, "%s\"b%zu\"", i ? "," : "", i);
	before = t_card_raw(id);
	snprintf(body, sizeof body, "{\"title\":\"x\",\"labels\":[\"a\"],\"blockers\":[%s]}", list);
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, body);
	ck_assert_msg(strstr(T_BODY, "at most 256 blockers"), "%s", T_BODY);
	snprintf(body, sizeof body, "{\"title\":\"x\",\"blockers\":[%s]}", list);
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, body);
	ck_assert_msg(strstr(T_BODY, "at most 256 blockers"), "%s", T_BODY);
	snprintf(path, sizeof path, "/v1/cards/%s", id);
	snprintf(body, sizeof body, "{\"blockers\":[%s]}", list);
	t_problem(400, "bad_request", "PATCH", path, BOT, NULL, body);
	ck_assert_msg(strstr(T_BODY, "at most 256 blockers"), "%s", T_BODY);
	after = t_card_raw(id);
	ck_assert_str_eq(after, before);
	j = t_must(200, "GET", "/v1/cards?limit=1000", OP, NULL, NULL);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "cards")), 1);
	json_decref(j);
	free(after);
	free(before);
	free(id);
}
END_TEST

TCase *api_tcase_errors(void)
{
	TCase *tc = tcase_create("errors");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, err_400_401_403_404_405);
	tcase_add_test(tc, err_missing_card_writes);
	tcase_add_test(tc, err_409);
	tcase_add_test(tc, err_415_422_428_503);
	tcase_add_test(tc, err_query_key_without_value);
	tcase_add_test(tc, err_too_many_labels_named);
	tcase_add_test(tc, err_too_many_blockers_named);
	return tc;
}

TCase *api_tcase_errors_small(void)
{
	TCase *tc = tcase_create("errors_small_body");

	tcase_add_checked_fixture(tc, t_setup_small_body, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, err_413);
	return tc;
}

/* ---- lists, runs, boards, meta ---- */

START_TEST(lists_and_cursor)
{
	char *ids[5], path[256], *next;
	json_t *j;
	size_t i, seen = 0;

	for (i = 0; i < 5; i++) {
		char body[128];

		snprintf(body, sizeof body, "{\"title\":\"n%zu\",\"labels\":[\"%s\"]}", i,
			 i % 2 ? "odd" : "even");
		ids[i] = t_card_new(body);
	}
	t_claim(ids[0], "m-l");
	j = t_must(200, "GET", "/v1/cards?claimed=true", BOT, NULL, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "cards")), 1);
	json_decref(j);
	j = t_must(200, "GET", "/v1/cards?claimed=false&label=odd", BOT, NULL, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "cards")), 2);
	json_decref(j);
	j = t_must(200, "GET", "/v1/cards?board=default&state=inbox", BOT, NULL, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "cards")), 5);
	json_decref(j);

	/* pages of 2 through the cursor */
	snprintf(path, sizeof path, "/v1/cards?limit=2");
	for (;;) {
		j = t_must(200, "GET", path, BOT, NULL, NULL);
		seen += json_array_size(json_object_get(j, "cards"));
		ck_assert_int_le(json_array_size(json_object_get(j, "cards")), 2);
		if (json_is_null(json_object_get(j, "next"))) {
			json_decref(j);
			break;
		}
		next = strdup(t_str(j, "next"));
		json_decref(j);
		{
			char *q = NULL;
			size_t k, o = 0;

			/* percent-encode the opaque cursor */
			q = malloc(strlen(next) * 3 + 1);
			for (k = 0; next[k]; k++)
				o += (size_t)sprintf(q + o, "%%%02X", (unsigned char)next[k]);
			snprintf(path, sizeof path, "/v1/cards?limit=2&after=%s", q);
			free(q);
		}
		free(next);
		ck_assert_int_le(seen, 5);
	}
	ck_assert_int_eq(seen, 5);

	j = t_must(200, "GET", "/v1/labels?board=default", BOT, NULL, NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "labels"), "odd")),
			 2);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "labels"), "even")),
			 3);
	json_decref(j);
	for (i = 0; i < 5; i++)
		free(ids[i]);
}
END_TEST

START_TEST(runs_routes)
{
	char *id = t_card_new("{\"title\":\"r\"}"), body[256];
	json_t *j;

	snprintf(body, sizeof body, "{\"card_id\":\"%s\",\"marker\":\"w-r\",\"status\":\"queued\"}",
		 id);
	/* only the card's holder starts a run */
	t_problem(409, "claim_conflict", "POST", "/v1/runs", W, NULL, body);
	t_claim(id, "w-r");
	j = t_must(201, "POST", "/v1/runs", W, NULL, body);
	{
		char path[256];
		const char *rid = t_str(j, "id");

		ck_assert_ptr_nonnull(rid);
		snprintf(path, sizeof path, "/v1/runs/%s", rid);
		json_decref(t_must(200, "GET", path, BOT, NULL, NULL));
		/* not the owner */
		t_problem(409, "claim_conflict", "PATCH", path, W, NULL,
			  "{\"marker\":\"w-other\",\"status\":\"running\"}");
		t_problem(400, "bad_request", "PATCH", path, W, NULL,
			  "{\"marker\":\"w-r\",\"status\":\"Not Valid\"}");
		t_problem(400, "bad_request", "PATCH", path, W, NULL,
			  "{\"marker\":\"w-r\",\"continuation\":\"later\"}");
		json_decref(t_must(200, "PATCH", path, W, NULL,
				   "{\"marker\":\"w-r\",\"continuation\":null,\"failure_code\":\"X\"}"));
		strcat(path, "/cancel");
		json_decref(j);
		j = t_must(200, "POST", path, OP, NULL, NULL);
		ck_assert_str_eq(t_str(j, "status"), "cancelled");
		path[strlen(path) - strlen("/cancel")] = '\0';
		ck_assert_int_eq(t_call("DELETE", path, OP, NULL, NULL, NULL), 204);
		t_problem(404, "not_found", "GET", path, OP, NULL, NULL);
	}
	json_decref(j);
	/* the run's card must exist */
	t_problem(404, "not_found", "POST", "/v1/runs", W, NULL,
		  "{\"card_id\":\"ghost\",\"marker\":\"w\",\"status\":\"queued\"}");
	free(id);
}
END_TEST

START_TEST(boards_and_meta)
{
	json_t *j;
	char *ct;

	j = t_must(200, "GET", "/v1/boards", BOT, NULL, NULL);
	ck_assert_int_ge(json_array_size(json_object_get(j, "boards")), 1);
	json_decref(j);
	t_board_new("ops");
	j = t_must(200, "GET", "/v1/boards/ops", W, NULL, NULL);
	ck_assert_str_eq(t_str(j, "name"), "ops");
	json_decref(j);
	t_problem(400, "bad_request", "PUT", "/v1/boards/ops", OP, NULL, "{\"columns\":[]}");
	t_problem(422, "invalid_board", "PUT", "/v1/boards/ops", OP, NULL,
		  "{\"name\":\"other\",\"columns\":[{\"name\":\"a\",\"terminal\":false,"
		  "\"eligible\":true}],\"running\":\"a\",\"completed\":\"a\",\"failed\":\"a\","
		  "\"waiting\":\"a\"}");
	t_problem(400, "bad_request", "GET", "/v1/cards?limt=5", BOT, NULL, NULL);
	ck_assert_ptr_nonnull(strstr(T_BODY, "unknown query parameter \\\"limt\\\""));
	t_problem(400, "bad_request", "GET", "/v1/cards?limit=5&limit=6", BOT, NULL, NULL);
	t_problem(404, "not_found", "GET", "/v1/boards/none", BOT, NULL, NULL);

	j = t_must(200, "GET", "/healthz", NULL, NULL, NULL);
	ck_assert_str_eq(t_str(j, "status"), "ok");
	json_decref(j);
	json_decref(t_must(200, "GET", "/readyz", NULL, NULL, NULL));
	t_must(200, "GET", "/metrics", NULL, NULL, NULL);
	ck_assert_ptr_nonnull(strstr(T_BODY, "boardd_http_request_duration_seconds_count{"
					     "route=\"/healthz\",method=\"GET\",code=\"200\"} 1\n"));
	j = t_must(200, "GET", "/openapi.json", NULL, NULL, NULL);
	ck_assert_ptr_nonnull(json_object_get(json_object_get(j, "paths"), "/v1/cards"));
	json_decref(j);
	t_must(200, "GET", "/openapi.yaml", NULL, NULL, NULL);
	ct = httpc_header(T_HDRS, "Content-Type");
	ck_assert_str_eq(ct, "application/yaml");
	ck_assert_ptr_nonnull(strstr(T_BODY, "openapi: 3.1"));
	free(ct);
}
END_TEST

TCase *api_tcase_misc(void)
{
	TCase *tc = tcase_create("misc");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, lists_and_cursor);
	tcase_add_test(tc, runs_routes);
	tcase_add_test(tc, boards_and_meta);
	return tc;
}
