/* The role matrix (DESIGN §8): every mutating route with a token lacking its role answers
 * 403 and changes nothing; a token scoped to another board answers 403 too, and lists only
 * ever show the token's boards. */
#include "tests/api/api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RW API_ROLE_WORKER
#define RB API_ROLE_BOT
#define RO API_ROLE_OPERATOR

struct route_case {
	const char *method;
	const char *path; /* %s: the card id (or run id for /v1/runs/...) */
	const char *body;
	const char *if_match;
	unsigned allowed;
};

static const struct route_case mutating[] = {
	{"POST", "/v1/cards", "{\"title\":\"x\"}", NULL, RB | RO},
	{"PATCH", "/v1/cards/%s", "{\"title\":\"x\"}", NULL, RB | RO},
	{"DELETE", "/v1/cards/%s", NULL, NULL, RO},
	{"POST", "/v1/cards/%s/claim", "{\"marker\":\"m-x\"}", NULL, RW},
	{"POST", "/v1/cards/%s/renew", "{\"marker\":\"m\",\"epoch\":1}", NULL, RW},
	{"POST", "/v1/cards/%s/release", "{\"marker\":\"m\",\"epoch\":1}", NULL, RW},
	{"PATCH", "/v1/cards/%s/state", "{\"marker\":\"m\",\"to\":\"review\"}", "If-Match: \"1\"", RW},
	{"PATCH", "/v1/cards/%s/state", "{\"from\":\"ready\",\"to\":\"review\"}", NULL, RB | RO},
	{"PUT", "/v1/cards/%s/last-run", "{\"marker\":\"m\",\"run_id\":null}", "If-Match: 1", RW},
	{"PUT", "/v1/cards/%s/awaiting-input", "{\"marker\":\"m\",\"awaiting_input\":true}",
	 "If-Match: 1", RW},
	{"PUT", "/v1/cards/%s/gave-up", "{\"marker\":\"m\",\"gave_up\":null}", "If-Match: 1", RW},
	{"POST", "/v1/cards/%s/reopen", "{\"to\":\"ready\"}", NULL, RO},
	{"PUT", "/v1/cards/%s/labels", "{\"labels\":[\"a\"]}", NULL, RB | RO},
	{"PATCH", "/v1/cards/%s/labels", "{\"add\":[\"a\"]}", NULL, RB | RO},
	{"POST", "/v1/cards/%s/comments", "{\"body\":\"hi\"}", NULL, RB | RO},
	{"POST", "/v1/runs", "{\"card_id\":\"%s\",\"marker\":\"m\",\"status\":\"queued\"}", NULL, RW},
	{"PATCH", "/v1/runs/run-%s", "{\"marker\":\"m\",\"status\":\"running\"}", NULL, RW},
	{"POST", "/v1/runs/run-%s/heartbeat", "{\"marker\":\"m\"}", NULL, RW},
	{"POST", "/v1/runs/run-%s/cancel", NULL, NULL, RO},
	{"DELETE", "/v1/runs/run-%s", NULL, NULL, RO},
	{"PUT", "/v1/boards/default", "{\"columns\":[]}", NULL, RO},
	{"POST", "/v1/reaper/pass", NULL, NULL, RO},
	{"POST", "/v1/labels/rename", "{\"board\":\"default\",\"from\":\"a\",\"to\":\"b\"}",
	 NULL, RO},
	{"POST", "/v1/labels/merge", "{\"board\":\"default\",\"from\":[\"a\"],\"to\":\"b\"}",
	 NULL, RO},
	{"DELETE", "/v1/labels/a?board=default", NULL, NULL, RO},
	{"POST", "/v1/boards/default/columns/review/rename", "{\"to\":\"qa\"}", NULL, RO},
};

static const struct {
	const char *tok;
	unsigned role;
} single[] = {{W, RW}, {BOT, RB}, {OP, RO}};

/* Replaces the one "%s" of fmt by id (a hand-rolled expansion: -Wformat=2 wants literals). */
static void expand(char *out, size_t n, const char *fmt, const char *id)
{
	const char *p = strstr(fmt, "%s");

	if (!p)
		snprintf(out, n, "%s", fmt);
	else
		snprintf(out, n, "%.*s%s%s", (int)(p - fmt), fmt, id, p + 2);
}

START_TEST(role_matrix)
{
	char *id, *before, path[256], body[512], ev_before[64];
	json_t *j;
	size_t i, k;
	long long next0;

	json_decref(t_must(201, "POST", "/v1/cards", ALL, NULL, "{\"id\":\"rm\",\"state\":\"ready\"}"));
	id = strdup("rm");
	json_decref(t_must(200, "POST", "/v1/cards/rm/claim", ALL, NULL, "{\"marker\":\"m\"}"));
	json_decref(t_must(201, "POST", "/v1/runs", ALL, NULL,
			   "{\"card_id\":\"rm\",\"marker\":\"m\",\"status\":\"running\","
			   "\"id\":\"run-rm\"}"));
	before = t_card_raw(id);
	j = t_must(200, "GET", "/v1/events?limit=1", OP, NULL, NULL);
	next0 = t_int(j, "next");
	json_decref(j);
	snprintf(ev_before, sizeof ev_before, "/v1/events?after=%lld", next0);
	j = t_must(200, "GET", ev_before, OP, NULL, NULL);
	next0 = t_int(j, "next");
	json_decref(j);

	for (i = 0; i < sizeof mutating / sizeof mutating[0]; i++) {
		const struct route_case *rc = &mutating[i];

		expand(path, sizeof path, rc->path, id);
		if (rc->body)
			expand(body, sizeof body, rc->body, id);
		for (k = 0; k < 3; k++) {
			if (rc->allowed & single[k].role)
				continue;
			t_problem(403, "forbidden", rc->method, path, single[k].tok, rc->if_match,
				  rc->body ? body : NULL);
		}
		/* the scoped token holds every role, but not this board */
		t_problem(403, "forbidden", rc->method, path, SCOPED, rc->if_match,
			  rc->body ? body : NULL);
	}
	/* nothing changed: the card is byte-identical, and no event was appended */
	{
		char *after = t_card_raw(id), q[64];

		ck_assert_str_eq(before, after);
		free(after);
		snprintf(q, sizeof q, "/v1/events?after=%lld", next0);
		j = t_must(200, "GET", q, OP, NULL, NULL);
		ck_assert_int_eq(json_array_size(json_object_get(j, "events")), 0);
		json_decref(j);
	}
	/* bots must send "from" (the role, not the body's shape: 403); operators may omit it */
	t_problem(403, "forbidden", "PATCH", "/v1/cards/rm/state", BOT, NULL, "{\"to\":\"review\"}");
	json_decref(t_must(200, "PATCH", "/v1/cards/rm/state", OP, NULL, "{\"to\":\"review\"}"));
	free(before);
	free(id);
}
END_TEST

/* One keep-alive connection, tokens changing from request to request: each request is
 * judged by its own token (the per-connection cache of the last verified one never leaks a
 * previous token's identity or roles). */
START_TEST(tokens_switch_on_one_connection)
{
	static const char *const off[] = {"Tok-worker-0123456789", "tok-workeR-0123456789",
					  "tok-worker-01234X6789", "tok-worker-0123456780"};
	json_t *j;
	int round;
	size_t k;

	for (round = 0; round < 2; round++) {
		json_decref(t_must(200, "GET", "/v1/cards", W, NULL, NULL));
		t_problem(403, "forbidden", "PUT", "/v1/boards/sw", W, NULL,
			  "{\"columns\":[{\"name\":\"a\"}]}");
		t_problem(401, "unauthorized", "GET", "/v1/cards", "tok-worker-0123456788", NULL,
			  NULL);
		t_problem(401, "unauthorized", "GET", "/v1/cards", "tok-worker-012345678", NULL,
			  NULL);
		/* Right after the worker's token is cached: the same length, one byte off in
		 * each eight-byte word of the compare (auth.c same_bytes) and in its tail. */
		for (k = 0; k < sizeof off / sizeof off[0]; k++) {
			json_decref(t_must(200, "GET", "/v1/cards", W, NULL, NULL));
			t_problem(401, "unauthorized", "GET", "/v1/cards", off[k], NULL, NULL);
		}
		t_problem(401, "unauthorized", "GET", "/v1/cards", NULL, NULL, NULL);
		j = t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"title\":\"by bot\"}");
		ck_assert_ptr_nonnull(j);
		json_decref(j);
		t_problem(403, "forbidden", "GET", "/v1/boards/default", SCOPED, NULL, NULL);
		json_decref(t_must(200, "GET", "/v1/cards", SCOPED, NULL, NULL));
		json_decref(t_must(200, "GET", "/v1/boards/default", W, NULL, NULL));
	}
}
END_TEST

START_TEST(board_scope)
{
	char *mine, *theirs, path[256];
	json_t *j, *e;
	size_t i;

	t_board_new(HARNESS_SCOPED_BOARD);
	json_decref(t_must(201, "POST", "/v1/cards", SCOPED, NULL,
			   "{\"id\":\"mine\",\"board\":\"" HARNESS_SCOPED_BOARD "\"}"));
	mine = strdup("mine");
	json_decref(t_must(201, "POST", "/v1/cards", ALL, NULL, "{\"id\":\"theirs\"}"));
	theirs = strdup("theirs");
	/* creating on another board */
	t_problem(403, "forbidden", "POST", "/v1/cards", SCOPED, NULL, "{\"board\":\"default\"}");
	t_problem(403, "forbidden", "POST", "/v1/cards", SCOPED, NULL, "{}");
	/* direct reads of another board's card, run, board */
	snprintf(path, sizeof path, "/v1/cards/%s", theirs);
	t_problem(403, "forbidden", "GET", path, SCOPED, NULL, NULL);
	t_problem(403, "forbidden", "GET", "/v1/boards/default", SCOPED, NULL, NULL);
	t_problem(403, "forbidden", "GET", "/v1/cards?board=default", SCOPED, NULL, NULL);
	t_problem(403, "forbidden", "GET", "/v1/events?board=default", SCOPED, NULL, NULL);
	t_problem(403, "forbidden", "GET", "/v1/labels?board=default", SCOPED, NULL, NULL);
	/* its own card works */
	snprintf(path, sizeof path, "/v1/cards/%s", mine);
	json_decref(t_must(200, "GET", path, SCOPED, NULL, NULL));
	/* lists only show its board */
	j = t_must(200, "GET", "/v1/cards", SCOPED, NULL, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "cards")), 1);
	ck_assert_str_eq(t_str(json_array_get(json_object_get(j, "cards"), 0), "id"), "mine");
	json_decref(j);
	j = t_must(200, "GET", "/v1/boards", SCOPED, NULL, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "boards")), 1);
	json_decref(j);
	j = t_must(200, "GET", "/v1/events?limit=1000", SCOPED, NULL, NULL);
	ck_assert_int_ge(json_array_size(json_object_get(j, "events")), 1);
	json_array_foreach(json_object_get(j, "events"), i, e)
		ck_assert_str_eq(t_str(e, "board"), HARNESS_SCOPED_BOARD);
	json_decref(j);
	/* an unscoped token sees both */
	j = t_must(200, "GET", "/v1/cards", BOT, NULL, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "cards")), 2);
	json_decref(j);
	free(mine);
	free(theirs);
}
END_TEST

TCase *api_tcase_roles(void)
{
	TCase *tc = tcase_create("roles");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, role_matrix);
	tcase_add_test(tc, board_scope);
	tcase_add_test(tc, tokens_switch_on_one_connection);
	return tc;
}
