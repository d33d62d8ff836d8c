/* DESIGN §11 at the HTTP edge, in-process: unknown body fields and forbidden nulls are
 * refused on every route with a body, and any member on every route without one (from the
 * route table itself), /readyz follows a store
 * that refuses writes, a board-scoped token sees neither the reaper's counts nor other
 * boards' traffic in its event cursors. */
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "tests/api/api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The route's pattern with every {param} replaced by "x". */
static void path_fill(const char *pattern, char *out, size_t cap)
{
	size_t o = 0;

	for (; *pattern && o + 2 < cap; pattern++) {
		if (*pattern == '{') {
			out[o++] = 'x';
			while (*pattern && *pattern != '}')
				pattern++;
			continue;
		}
		out[o++] = *pattern;
	}
	out[o] = '\0';
}

START_TEST(unknown_field_refused_on_every_body_route)
{
	const struct api_route *rt;
	size_t n, i, seen = 0;
	char path[256];

	rt = api_router_table(&n);
	for (i = 0; i < n; i++) {
		if (!(rt[i].flags & API_ROUTE_BODY))
			continue;
		ck_assert_msg(rt[i].fields != NULL, "%s %s lists no fields", rt[i].method,
			      rt[i].pattern);
		path_fill(rt[i].pattern, path, sizeof path);
		/* A token holding every role: the field check comes before anything else. */
		t_problem(400, "bad_request", rt[i].method, path, ALL, NULL,
			  "{\"zz_unknown\":1}");
		ck_assert_msg(strstr(T_BODY, "unknown field \\\"zz_unknown\\\"") != NULL, "%s %s: %s",
			      rt[i].method, path, T_BODY);
		seen++;
	}
	ck_assert_uint_ge(seen, 15);
	/* A field name that is not ASCII is echoed escaped: the body is ASCII, whatever charset
	 * a client guesses (one guessed Shift-JIS and read broken JSON). */
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, "{\"caf\u00e9\":1}");
	ck_assert_msg(strstr(T_BODY, "caf\\u00E9") != NULL, "%s", T_BODY);
	for (i = 0; T_BODY[i]; i++)
		ck_assert_msg((unsigned char)T_BODY[i] < 0x80, "%s", T_BODY);
}
END_TEST

/* A route without a body has an empty schema: none, an empty one or {} pass; a member is
 * the same 400 "unknown field" as on a body route, a non-object 400, and either changes
 * nothing (it used to be ignored: a DELETE with a body deleted). */
START_TEST(member_refused_on_every_bodiless_route)
{
	const struct api_route *rt;
	size_t n, i, seen = 0;
	char path[256], *id, *before, *after;

	rt = api_router_table(&n);
	for (i = 0; i < n; i++) {
		if (rt[i].flags & (API_ROUTE_BODY | API_ROUTE_JSONRPC))
			continue;
		path_fill(rt[i].pattern, path, sizeof path);
		t_problem(400, "bad_request", rt[i].method, path, ALL, NULL, "{\"zz_unknown\":1}");
		ck_assert_msg(strstr(T_BODY, "unknown field \\\"zz_unknown\\\"") != NULL,
			      "%s %s: %s", rt[i].method, path, T_BODY);
		t_problem(400, "bad_request", rt[i].method, path, ALL, NULL, "[1]");
		ck_assert_msg(strstr(T_BODY, "must be a JSON object") != NULL, "%s %s: %s",
			      rt[i].method, path, T_BODY);
		seen++;
	}
	ck_assert_uint_ge(seen, 20);
	/* Nothing changed: the card is still there, its claim still held. */
	id = t_card_new("{\"state\":\"ready\"}");
	t_claim(id, "w-1");
	before = t_card_raw(id);
	snprintf(path, sizeof path, "/v1/cards/%s", id);
	t_problem(400, "bad_request", "DELETE", path, OP, NULL, "{\"force\":true}");
	snprintf(path, sizeof path, "/v1/cards/%s/claim/revoke", id);
	t_problem(400, "bad_request", "POST", path, OP, NULL, "{\"reason\":\"x\"}");
	after = t_card_raw(id);
	ck_assert_str_eq(after, before);
	free(after);
	/* {}, whitespace and no body at all are fine. */
	json_decref(t_must(200, "POST", path, OP, NULL, "{}"));
	snprintf(path, sizeof path, "/v1/cards/%s", id);
	json_decref(t_must(200, "GET", path, OP, NULL, " \r\n"));
	json_decref(t_must(200, "GET", path, OP, NULL, NULL));
	json_decref(t_must(204, "DELETE", path, OP, NULL, "{ }"));
	free(before);
	free(id);
}
END_TEST

/* A header whose meaning two copies leave in doubt is refused, naming it, and changes
 * nothing (each used to be read as its first copy). */
START_TEST(repeated_headers_in_doubt_are_refused)
{
	t_problem_says(400, "bad_request", "Last-Event-ID given more than once", "GET",
		       "/v1/events/stream", ALL, "Last-Event-ID: 1\r\nLast-Event-ID: 2", NULL);
	t_problem_says(400, "bad_request", "Idempotency-Key given more than once", "POST",
		       "/v1/cards", BOT, "Idempotency-Key: a\r\nidempotency-key: b",
		       "{\"id\":\"dupk\",\"title\":\"x\"}");
	t_problem(404, "not_found", "GET", "/v1/cards/dupk", BOT, NULL, NULL);
	t_problem_says(400, "bad_request", "If-Match given more than once", "PATCH",
		       "/v1/cards/dupk/state", ALL, "If-Match: \"1\"\r\nIf-Match: \"2\"",
		       "{\"marker\":\"w\",\"to\":\"done\"}");
}
END_TEST

START_TEST(misspelt_lease_is_not_a_long_lease)
{
	char *id = t_card_new("{\"title\":\"t\",\"state\":\"ready\"}");
	char path[256];
	json_t *j;

	snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
	/* The example: leas_ms used to be ignored and the lease became 15 minutes. */
	t_problem(400, "bad_request", "POST", path, W, NULL, "{\"marker\":\"m\",\"leas_ms\":1000}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "leas_ms"));
	snprintf(path, sizeof path, "/v1/cards/%s", id);
	j = t_must(200, "GET", path, BOT, NULL, NULL);
	ck_assert(json_is_null(json_object_get(j, "claim"))); /* and nothing was claimed */
	json_decref(j);
	free(id);
}
END_TEST

START_TEST(null_refused_where_the_schema_forbids_it)
{
	char *id = t_card_new("{\"title\":\"t\",\"state\":\"ready\"}");
	char path[256];

	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, "{\"title\":null}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "\\\"title\\\" may not be null"));
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, "{\"labels\":null}");
	snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
	t_problem(400, "bad_request", "POST", path, W, NULL, "{\"marker\":\"m\",\"lease_ms\":null}");
	snprintf(path, sizeof path, "/v1/cards/%s", id);
	t_problem(400, "bad_request", "PATCH", path, BOT, NULL, "{\"body\":null}");
	t_problem(400, "bad_request", "PUT", "/v1/boards/default", OP, NULL,
		  "{\"columns\":[{\"name\":\"a\",\"terminal\":false,\"eligible\":true,\"x\":1}]}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "columns[].x"));
	free(id);
}
END_TEST

START_TEST(readyz_503_while_the_store_refuses_writes)
{
	int st;

	json_decref(t_must(200, "GET", "/readyz", NULL, NULL, NULL));
	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_WRITE, true), CORE_OK);
	t_problem(503, "store_unavailable", "POST", "/v1/cards", BOT, NULL, "{\"title\":\"a\"}");
	t_problem(503, "store_unavailable", "GET", "/readyz", NULL, NULL, NULL);
	st = t_call("GET", "/metrics", NULL, NULL, NULL, NULL);
	ck_assert_int_eq(st, 200);
	ck_assert_msg(strstr(T_BODY, "\nboardd_fs_writes_refused 1\n") != NULL, "%s", T_BODY);
	/* Still refused, and still not ready, while the disk refuses. */
	t_problem(503, "store_unavailable", "POST", "/v1/cards", BOT, NULL, "{\"title\":\"b\"}");
	t_problem(503, "store_unavailable", "GET", "/readyz", NULL, NULL, NULL);
	/* The disk takes writes again: the next write re-establishes the journal. */
	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_WRITE, false), CORE_OK);
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"title\":\"c\"}"));
	json_decref(t_must(200, "GET", "/readyz", NULL, NULL, NULL));
	st = t_call("GET", "/metrics", NULL, NULL, NULL, NULL);
	ck_assert_int_eq(st, 200);
	ck_assert_msg(strstr(T_BODY, "\nboardd_fs_writes_refused 0\n") != NULL, "%s", T_BODY);
}
END_TEST


/* ---- a board-scoped token (HARNESS_TOK_SCOPED: board "scoped" only) ---- */

static json_t *fake_status(void *ctx)
{
	(void)ctx;
	return json_pack("{s:s, s:I, s:I, s:{s:I, s:I}}", "gate", "on", "interval_ms",
			 (json_int_t)60000, "passes", (json_int_t)3, "last_pass", "listed",
			 (json_int_t)41, "transferred", (json_int_t)7);
}

static enum core_rc fake_pass(void *ctx, json_t **out)
{
	*out = fake_status(ctx);
	return CORE_OK;
}

static void setup_reaper(void)
{
	struct harness_options o = {.reaper = {fake_status, fake_pass, NULL}};

	t_setup_with(&o);
}

START_TEST(scoped_token_sees_no_pass_counts)
{
	json_t *j;

	j = t_must(200, "GET", "/v1/reaper", ALL, NULL, NULL);
	ck_assert(json_is_object(json_object_get(j, "last_pass")));
	json_decref(j);
	j = t_must(200, "GET", "/v1/reaper", SCOPED, NULL, NULL);
	ck_assert_ptr_null(json_object_get(j, "last_pass"));
	ck_assert_str_eq(t_str(j, "gate"), "on");
	json_decref(j);
}
END_TEST

/* The scoped token's GET /v1/events?after=`after`: no event, and `next` still `after`. */
static void scoped_nothing_after(long long after)
{
	char path[128];
	json_t *j;

	snprintf(path, sizeof path, "/v1/events?after=%lld", after);
	j = t_must(200, "GET", path, SCOPED, NULL, NULL);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "events")), 0);
	ck_assert_int_eq(t_int(j, "next"), after);
	json_decref(j);
}

/* A blocker on a board the token may not see is refused without naming that board (it used
 * to say "blocker x is on board default, not <scoped>"). */
START_TEST(scoped_blocker_refusal_names_no_other_board)
{
	char *other = t_card_new("{\"title\":\"elsewhere\"}"), body[256];

	t_board_new(HARNESS_SCOPED_BOARD);
	snprintf(body, sizeof body, "{\"title\":\"t\",\"board\":\"%s\",\"blockers\":[\"%s\"]}",
		 HARNESS_SCOPED_BOARD, other);
	t_problem_says(422, "transition_rejected", "is not a card of board", "POST", "/v1/cards",
		       SCOPED, NULL, body);
	ck_assert_msg(strstr(T_BODY, "default") == NULL, "%s", T_BODY);
	/* A token that sees both boards is told where the blocker is. */
	t_problem_says(422, "transition_rejected", "is on board default", "POST", "/v1/cards",
		       ALL, NULL, body);
	free(other);
}
END_TEST

START_TEST(scoped_cursor_says_nothing_of_other_boards)
{
	json_t *j;
	char path[128];
	long long mine, base;
	int i;

	t_board_new(HARNESS_SCOPED_BOARD);
	j = t_must(200, "GET", "/v1/events?after=0", SCOPED, NULL, NULL);
	base = t_int(j, "next"); /* its board's creation, if that is an event of it */
	json_decref(j);
	for (i = 0; i < 5; i++)
		free(t_card_new("{\"title\":\"elsewhere\"}"));
	/* Nothing new of its own: the cursor stays where the client put it. */
	scoped_nothing_after(base);
	snprintf(path, sizeof path, "/v1/events?after=%lld&wait_ms=50", base);
	j = t_must(200, "GET", path, SCOPED, NULL, NULL);
	ck_assert_int_eq(t_int(j, "next"), base);
	json_decref(j);
	free(t_card_new("{\"title\":\"mine\",\"board\":\"" HARNESS_SCOPED_BOARD "\"}"));
	snprintf(path, sizeof path, "/v1/events?after=%lld", base);
	j = t_must(200, "GET", path, SCOPED, NULL, NULL);
	ck_assert_uint_ge(json_array_size(json_object_get(j, "events")), 1);
	mine = t_int(j, "next");
	ck_assert_int_eq(mine, t_int(json_array_get(json_object_get(j, "events"),
						     json_array_size(json_object_get(j, "events")) -
							     1),
				     "seq"));
	json_decref(j);
	for (i = 0; i < 5; i++)
		free(t_card_new("{\"title\":\"elsewhere again\"}"));
	scoped_nothing_after(mine);
	/* A token for every board keeps the store's cursor (it sees every event anyway). */
	snprintf(path, sizeof path, "/v1/events?after=%lld", mine);
	j = t_must(200, "GET", path, ALL, NULL, NULL);
	ck_assert_int_gt(t_int(j, "next"), mine);
	json_decref(j);
}
END_TEST

TCase *api_tcase_edge(void)
{
	TCase *tc = tcase_create("edge");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, unknown_field_refused_on_every_body_route);
	tcase_add_test(tc, member_refused_on_every_bodiless_route);
	tcase_add_test(tc, misspelt_lease_is_not_a_long_lease);
	tcase_add_test(tc, repeated_headers_in_doubt_are_refused);
	tcase_add_test(tc, null_refused_where_the_schema_forbids_it);
	tcase_add_test(tc, readyz_503_while_the_store_refuses_writes);
	tcase_add_test(tc, scoped_cursor_says_nothing_of_other_boards);
	tcase_add_test(tc, scoped_blocker_refusal_names_no_other_board);
	return tc;
}

TCase *api_tcase_edge_reaper(void)
{
	TCase *tc = tcase_create("edge_reaper");

	tcase_add_checked_fixture(tc, setup_reaper, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, scoped_token_sees_no_pass_counts);
	return tc;
}
