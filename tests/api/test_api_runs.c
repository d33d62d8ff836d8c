/* Runs as a record over HTTP (DESIGN §20): GET /v1/cards/{id}/runs and GET /v1/runs (shape,
 * order, paging, filters, scope) and POST /v1/runs/{id}/output (fenced, bounded, served by
 * GET /v1/runs/{id}). */
#include "tests/api/api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run_new(const char *card, const char *marker, const char *id)
{
	char body[256];

	snprintf(body, sizeof body,
		 "{\"card_id\":\"%s\",\"marker\":\"%s\",\"status\":\"running\",\"id\":\"%s\"}",
		 card, marker, id);
	json_decref(t_must(201, "POST", "/v1/runs", W, NULL, body));
}

/* The ids of a {runs} answer, comma-separated (static buffer). */
static const char *ids_of(const json_t *j)
{
	static char buf[512];
	const json_t *runs = json_object_get(j, "runs"), *v;
	size_t i, len = 0;

	buf[0] = '\0';
	json_array_foreach(runs, i, v)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "," : "",
					t_str(v, "id"));
	return buf;
}

START_TEST(card_runs_listed_newest_first)
{
	char *id = t_card_new("{\"title\":\"r\"}"), path[256], page2[512];
	json_t *j, *r0;
	long long epoch = t_claim(id, "w-1");

	run_new(id, "w-1", "ra");
	run_new(id, "w-1", "rb");
	run_new(id, "w-1", "rc");
	json_decref(t_must(200, "POST", "/v1/runs/rb/output", W, NULL,
			   "{\"marker\":\"w-1\",\"text\":\"line one\\n\"}"));
	json_decref(t_must(200, "PATCH", "/v1/runs/rb", W, NULL,
			   "{\"marker\":\"w-1\",\"status\":\"failed\",\"error\":\"exit status 3\","
			   "\"result\":{\"n\":1}}"));

	snprintf(path, sizeof path, "/v1/cards/%s/runs", id);
	j = t_must(200, "GET", path, BOT, NULL, NULL);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "runs")), 3);
	ck_assert(json_is_null(json_object_get(j, "next")));
	/* The same ms may hold all three: the id breaks the tie, newest (largest) first. */
	ck_assert_str_eq(ids_of(j), "rc,rb,ra");
	r0 = json_array_get(json_object_get(j, "runs"), 1);
	ck_assert_int_eq(t_int(r0, "claim_epoch"), epoch);
	ck_assert_str_eq(t_str(r0, "status"), "failed");
	ck_assert_str_eq(t_str(r0, "error"), "exit status 3");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(r0, "result"), "n")), 1);
	ck_assert_ptr_nonnull(json_object_get(r0, "created_at"));
	ck_assert_ptr_null(json_object_get(r0, "output")); /* the listing leaves it out */
	json_decref(j);

	/* Paged as every listing: limit, then after=<next>. */
	snprintf(path, sizeof path, "/v1/cards/%s/runs?limit=2", id);
	j = t_must(200, "GET", path, BOT, NULL, NULL);
	ck_assert_str_eq(ids_of(j), "rc,rb");
	ck_assert(json_is_string(json_object_get(j, "next")));
	snprintf(page2, sizeof page2, "/v1/cards/%s/runs?limit=2&after=%s", id,
		 t_str(j, "next"));
	json_decref(j);
	j = t_must(200, "GET", page2, BOT, NULL, NULL);
	ck_assert_str_eq(ids_of(j), "ra");
	ck_assert(json_is_null(json_object_get(j, "next")));
	json_decref(j);

	/* Bad input is 400; an unknown card 404; a scoped token from another board 403. */
	snprintf(path, sizeof path, "/v1/cards/%s/runs?after=12", id);
	t_problem(400, "bad_request", "GET", path, BOT, NULL, NULL);
	snprintf(path, sizeof path, "/v1/cards/%s/runs?limit=0", id);
	t_problem(400, "bad_request", "GET", path, BOT, NULL, NULL);
	snprintf(path, sizeof path, "/v1/cards/%s/runs?status=running", id);
	t_problem(400, "bad_request", "GET", path, BOT, NULL, NULL);
	t_problem(404, "not_found", "GET", "/v1/cards/no-such-card/runs", BOT, NULL, NULL);
	snprintf(path, sizeof path, "/v1/cards/%s/runs", id);
	t_problem(403, "forbidden", "GET", path, SCOPED, NULL, NULL);
	free(id);
}
END_TEST

START_TEST(runs_listed_by_board_and_status)
{
	char *a = t_card_new("{\"title\":\"a\"}"), *b = NULL;
	json_t *j;

	t_board_new("scoped");
	b = t_card_new("{\"title\":\"b\",\"board\":\"scoped\"}");
	t_claim(a, "w-1");
	t_claim(b, "w-1");
	run_new(a, "w-1", "a1");
	run_new(b, "w-1", "b1");
	json_decref(t_must(200, "PATCH", "/v1/runs/a1", W, NULL,
			   "{\"marker\":\"w-1\",\"status\":\"finished\"}"));

	j = t_must(200, "GET", "/v1/runs", OP, NULL, NULL);
	ck_assert_str_eq(ids_of(j), "b1,a1");
	json_decref(j);
	j = t_must(200, "GET", "/v1/runs?board=default&status=finished", OP, NULL, NULL);
	ck_assert_str_eq(ids_of(j), "a1");
	json_decref(j);
	j = t_must(200, "GET", "/v1/runs?status=running", OP, NULL, NULL);
	ck_assert_str_eq(ids_of(j), "b1");
	json_decref(j);
	/* The token's board scope applies. */
	j = t_must(200, "GET", "/v1/runs", SCOPED, NULL, NULL);
	ck_assert_str_eq(ids_of(j), "b1");
	json_decref(j);
	t_problem(403, "forbidden", "GET", "/v1/runs?board=default", SCOPED, NULL, NULL);
	t_problem_says(400, "bad_request", "unknown status", "GET", "/v1/runs?status=exploded",
		       OP, NULL, NULL);
	t_problem(400, "bad_request", "GET", "/v1/runs?board=no%20such", OP, NULL, NULL);
	t_problem(400, "bad_request", "GET", "/v1/runs?card_id=x", OP, NULL, NULL);
	free(a);
	free(b);
}
END_TEST

START_TEST(run_output_fenced_and_bounded)
{
	char *id = t_card_new("{\"title\":\"o\"}"), path[256], *big;
	size_t n = 70000, i;
	const char *out;
	json_t *j;
	long long epoch = t_claim(id, "w-1");

	run_new(id, "w-1", "ro");
	j = t_must(200, "POST", "/v1/runs/ro/output", W, NULL,
		   "{\"marker\":\"w-1\",\"text\":\"h\\u00e9llo \"}");
	ck_assert_str_eq(t_str(j, "output"), "h\xc3\xa9llo ");
	json_decref(j);
	j = t_must(200, "POST", "/v1/runs/ro/output", W, NULL,
		   "{\"marker\":\"w-1\",\"text\":\"world\"}");
	ck_assert_str_eq(t_str(j, "output"), "h\xc3\xa9llo world");
	json_decref(j);
	j = t_must(200, "GET", "/v1/runs/ro", BOT, NULL, NULL);
	ck_assert_str_eq(t_str(j, "output"), "h\xc3\xa9llo world");
	json_decref(j);

	/* Refusals change nothing. */
	t_problem(400, "bad_request", "POST", "/v1/runs/ro/output", W, NULL, "{\"marker\":\"w-1\"}");
	t_problem(400, "bad_request", "POST", "/v1/runs/ro/output", W, NULL,
		  "{\"marker\":\"w-1\",\"text\":7}");
	t_problem(400, "bad_request", "POST", "/v1/runs/ro/output", W, NULL,
		  "{\"marker\":\"w-1\",\"text\":\"x\",\"more\":1}");
	t_problem(400, "bad_request", "POST", "/v1/runs/ro/output", W, NULL,
		  "{\"marker\":\"w-1\",\"text\":\"\xc3(\"}");
	t_problem(409, "claim_conflict", "POST", "/v1/runs/ro/output", W, NULL,
		  "{\"marker\":\"w-2\",\"text\":\"x\"}");
	t_problem(409, "claim_conflict", "POST", "/v1/runs/ro/output", W2, NULL,
		  "{\"marker\":\"w-1\",\"text\":\"x\"}");
	t_problem(403, "forbidden", "POST", "/v1/runs/ro/output", BOT, NULL,
		  "{\"marker\":\"w-1\",\"text\":\"x\"}");
	t_problem(404, "not_found", "POST", "/v1/runs/nope/output", W, NULL,
		  "{\"marker\":\"w-1\",\"text\":\"x\"}");

	/* The tail of 64 KiB is kept. */
	big = malloc(n + 64);
	ck_assert_ptr_nonnull(big);
	i = (size_t)snprintf(big, 64, "{\"marker\":\"w-1\",\"text\":\"");
	memset(big + i, 'x', n);
	memcpy(big + i + n - 3, "END\"}", 6);
	j = t_must(200, "POST", "/v1/runs/ro/output", W, NULL, big);
	out = t_str(j, "output");
	ck_assert_uint_eq(strlen(out), 65536);
	ck_assert_str_eq(out + 65533, "END");
	json_decref(j);
	free(big);

	/* A stale claim: released, then claimed again (a new epoch). */
	snprintf(path, sizeof path, "/v1/cards/%s/release", id);
	{
		char body[128];

		snprintf(body, sizeof body, "{\"marker\":\"w-1\",\"epoch\":%lld}", epoch);
		json_decref(t_must(200, "POST", path, W, NULL, body));
	}
	t_claim(id, "w-1");
	t_problem(409, "claim_conflict", "POST", "/v1/runs/ro/output", W, NULL,
		  "{\"marker\":\"w-1\",\"text\":\"zombie\"}");
	/* A final run takes no more. */
	run_new(id, "w-1", "rf");
	json_decref(t_must(200, "PATCH", "/v1/runs/rf", W, NULL,
			   "{\"marker\":\"w-1\",\"status\":\"finished\"}"));
	t_problem(409, "run_final", "POST", "/v1/runs/rf/output", W, NULL,
		  "{\"marker\":\"w-1\",\"text\":\"late\"}");
	j = t_must(200, "GET", "/v1/runs/rf", BOT, NULL, NULL);
	ck_assert(json_is_null(json_object_get(j, "output")));
	json_decref(j);
	free(id);
}
END_TEST

TCase *api_tcase_runs(void)
{
	TCase *tc = tcase_create("runs-history");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, card_runs_listed_newest_first);
	tcase_add_test(tc, runs_listed_by_board_and_status);
	tcase_add_test(tc, run_output_fenced_and_bounded);
	return tc;
}
