/* Contract gaps a black-box audit found (session 23): terminal -> terminal is the operator's
 * refiling only (ADR-096 §5), a route without a body refuses one with members, gave_up.state
 * must be a column of the card's board, a subscription's to_states must name columns, and
 * a path that names a missing board is 404. Each test runs against a fresh in-process
 * server, and each refusal is checked to change nothing. */

#include "api/api_handlers.h"
#include "api/api_req.h"
#include "tests/api/api_test.h"

#include <stdio.h>
#include <string.h>

/* Terminal -> terminal: an operator's ordinary state write refiles; a bot's SetStateFrom and
 * a worker's owned write are refused 422 terminal_state_exit, saying so, and change
 * nothing (ADR-096 §5, which wins over DESIGN §4). */
START_TEST(refiling_is_the_operators)
{
	char *id = t_card_new("{\"state\":\"ready\"}"), *w = t_card_new("{\"state\":\"ready\"}");
	char path[128], hdr[64], *before;
	long long e;

	snprintf(path, sizeof path, "/v1/cards/%s/state", id);
	json_decref(t_must(200, "PATCH", path, BOT, NULL, "{\"from\":\"ready\",\"to\":\"done\"}"));
	before = t_card_raw(id);
	t_problem_says(422, "terminal_state_exit", "refiling it into blocked is an operator's",
		       "PATCH", path, BOT, NULL, "{\"from\":\"done\",\"to\":\"blocked\"}");
	{
		char *after = t_card_raw(id);

		ck_assert_str_eq(after, before);
		free(after);
	}
	/* Writing the column the card is in is no move: nothing to refuse. */
	json_decref(t_must(200, "PATCH", path, BOT, NULL, "{\"from\":\"done\",\"to\":\"done\"}"));
	json_decref(t_must(200, "PATCH", path, OP, NULL, "{\"from\":\"done\",\"to\":\"blocked\"}"));
	json_decref(t_must(200, "PATCH", path, OP, NULL, "{\"to\":\"done\"}"));
	free(before);

	/* A worker's run must not drag its card from done into blocked either. */
	e = t_claim(w, "w-1");
	ck_assert_int_eq(t_owned_state(W, w, "w-1", e, "done"), 200);
	before = t_card_raw(w);
	snprintf(path, sizeof path, "/v1/cards/%s/state", w);
	snprintf(hdr, sizeof hdr, "If-Match: \"%lld\"", e);
	t_problem_says(422, "terminal_state_exit", "refiling it into blocked is an operator's",
		       "PATCH", path, W, hdr, "{\"marker\":\"w-1\",\"to\":\"blocked\"}");
	{
		char *after = t_card_raw(w);

		ck_assert_str_eq(after, before);
		free(after);
	}
	ck_assert_int_eq(t_owned_state(W, w, "w-1", e, "done"), 200);
	/* Leaving for a working column keeps its own detail. */
	t_problem_says(422, "terminal_state_exit", "only an operator's reopen", "PATCH", path, W,
		       hdr, "{\"marker\":\"w-1\",\"to\":\"ready\"}");
	free(before);
	free(id);
	free(w);
}
END_TEST

/* gave_up.state names a column of the card's board, or the write is 422 transition_rejected
 * naming it, as for an unknown column anywhere; nothing changes. */
START_TEST(gave_up_state_is_a_column)
{
	char *id = t_card_new("{\"state\":\"ready\"}"), path[128], hdr[64], *before, *after;
	long long e = t_claim(id, "w-1");
	json_t *j;

	snprintf(path, sizeof path, "/v1/cards/%s/gave-up", id);
	snprintf(hdr, sizeof hdr, "If-Match: \"%lld\"", e);
	before = t_card_raw(id);
	t_problem_says(422, "transition_rejected", "no column nowhere on board default", "PUT",
		       path, W, hdr,
		       "{\"marker\":\"w-1\",\"gave_up\":{\"reason\":\"x\",\"state\":\"nowhere\"}}");
	after = t_card_raw(id);
	ck_assert_str_eq(after, before);
	free(after);
	j = t_must(200, "PUT", path, W, hdr,
		   "{\"marker\":\"w-1\",\"gave_up\":{\"reason\":\"x\",\"state\":\"ready\"}}");
	ck_assert_str_eq(t_str(json_object_get(j, "gave_up"), "state"), "ready");
	json_decref(j);
	free(before);
	free(id);
}
END_TEST

/* A subscription's on.to_states names columns of its board: an unknown one is 422
 * transition_rejected naming it (nothing stored); a column rename carries the subscription
 * along, and a board PUT that would drop a column it names is 422 invalid_board naming both. */
START_TEST(subscription_to_states_are_columns)
{
	const char *path = "/v1/boards/default/subscriptions/s1";
	json_t *j, *b;
	char *text;

	t_problem_says(422, "transition_rejected", "on.to_states: no column nowhere, gone on board "
		       "default", "PUT", path, OP, NULL,
		       "{\"url\":\"http://127.0.0.1:9/x\",\"on\":{\"to_states\":[\"nowhere\","
		       "\"review\",\"gone\"]}}");
	t_problem(404, "not_found", "GET", path, OP, NULL, NULL);
	json_decref(t_must(201, "PUT", path, OP, NULL,
			   "{\"url\":\"http://127.0.0.1:9/x\",\"on\":{\"to_states\":[\"review\"]}}"));
	json_decref(t_must(200, "POST", "/v1/boards/default/columns/review/rename", OP, NULL,
			   "{\"to\":\"qa\"}"));
	j = t_must(200, "GET", path, OP, NULL, NULL);
	ck_assert_str_eq(json_string_value(json_array_get(
				 json_object_get(json_object_get(j, "on"), "to_states"), 0)),
			 "qa");
	json_decref(j);
	/* The board without qa: refused while s1 names it. */
	b = t_must(200, "GET", "/v1/boards/default", OP, NULL, NULL);
	{
		json_t *cols = json_object_get(b, "columns"), *c;
		size_t i;

		json_array_foreach(cols, i, c)
			if (strcmp(t_str(c, "name"), "qa") == 0)
				break;
		json_array_remove(cols, i);
	}
	text = json_dumps(b, 0);
	t_problem_says(422, "invalid_board", "subscription s1 of board default names column qa",
		       "PUT", "/v1/boards/default", OP, NULL, text);
	j = t_must(200, "GET", "/v1/boards/default", OP, NULL, NULL);
	ck_assert_ptr_nonnull(strstr(T_BODY, "\"qa\""));
	json_decref(j);
	json_decref(t_must(204, "DELETE", path, OP, NULL, NULL));
	json_decref(t_must(200, "PUT", "/v1/boards/default", OP, NULL, text));
	free(text);
	json_decref(b);
}
END_TEST

/* A path that names a board which does not exist is 404 "no board X" on every route that
 * names one (PUT /v1/boards/{b} creates it, so it is not here); a board-scoped token gets
 * the same 403 for a board that exists outside its scope and for one that does not, so it
 * learns nothing. ?board= on a list is a filter: 200 with nothing in it. */
static const struct {
	const char *method, *tail, *body, *tok; /* tail: after /v1/boards/{b} */
} board_routes[] = {
	{"GET", "", NULL, ALL},
	{"POST", "/columns/ready/rename", "{\"to\":\"r2\"}", ALL},
	{"POST", "/claim-next", "{\"marker\":\"m\"}", ALL},
	{"GET", "/activity", NULL, ALL},
	{"GET", "/subscriptions", NULL, ALL},
	{"GET", "/subscriptions/s", NULL, ALL},
	{"PUT", "/subscriptions/s", "{\"url\":\"http://127.0.0.1:9/x\"}", ALL},
	{"DELETE", "/subscriptions/s", NULL, ALL},
};

START_TEST(a_missing_board_in_the_path_is_404)
{
	const struct api_route *rt;
	size_t n, i, k = 0, want = sizeof board_routes / sizeof board_routes[0];
	char path[160], d1[300], d2[300];
	json_t *j;

	/* Every route whose path names a board is in the table (a new one must be added). */
	rt = api_router_table(&n);
	for (i = 0; i < n; i++)
		if (strstr(rt[i].pattern, "{b}") &&
		    !(strcmp(rt[i].method, "PUT") == 0 && strcmp(rt[i].pattern, "/v1/boards/{b}") == 0))
			k++;
	ck_assert_uint_eq(k, want);
	for (i = 0; i < want; i++) {
		snprintf(path, sizeof path, "/v1/boards/ghost%s", board_routes[i].tail);
		t_problem_says(404, "not_found", "no board ghost", board_routes[i].method, path,
			       board_routes[i].tok, NULL, board_routes[i].body);
		/* Scoped elsewhere: the one answer whether the board exists or not. */
		j = t_must(403, board_routes[i].method, path, SCOPED, NULL, board_routes[i].body);
		snprintf(d1, sizeof d1, "%s", t_str(j, "detail"));
		json_decref(j);
		snprintf(path, sizeof path, "/v1/boards/default%s", board_routes[i].tail);
		j = t_must(403, board_routes[i].method, path, SCOPED, NULL, board_routes[i].body);
		snprintf(d2, sizeof d2, "%s", t_str(j, "detail"));
		json_decref(j);
		ck_assert_ptr_nonnull(strstr(d1, "ghost"));
		ck_assert_ptr_nonnull(strstr(d2, "default"));
		ck_assert_uint_eq(strlen(d1) - strlen("ghost"), strlen(d2) - strlen("default"));
	}
	/* ?board= filters: nothing matches, 200; scoped elsewhere: 403 either way. */
	j = t_must(200, "GET", "/v1/cards?board=ghost", ALL, NULL, NULL);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "cards")), 0);
	json_decref(j);
	json_decref(t_must(200, "GET", "/v1/attention?board=ghost", ALL, NULL, NULL));
	json_decref(t_must(200, "GET", "/v1/events?board=ghost", ALL, NULL, NULL));
	t_problem(403, "forbidden", "GET", "/v1/attention?board=ghost", SCOPED, NULL, NULL);
	t_problem(403, "forbidden", "GET", "/v1/attention?board=default", SCOPED, NULL, NULL);
}
END_TEST

TCase *api_tcase_contract(void)
{
	TCase *tc = tcase_create("contract");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, refiling_is_the_operators);
	tcase_add_test(tc, gave_up_state_is_a_column);
	tcase_add_test(tc, subscription_to_states_are_columns);
	tcase_add_test(tc, a_missing_board_in_the_path_is_404);
	return tc;
}
