/* GET /v1/boards/{b}/activity (DESIGN §21): the per-minute series move with the claims and
 * runs the server counts, each board's with its own only (issue 30), the board's cards per
 * column are sampled, a board-scoped token sees its board's counts, and bad input is a 4xx
 * problem. Sums over the hour, never one
 * minute's slot, so a minute boundary between two reads cannot flake a test. */
#include "tests/api/api_test.h"
#include "metrics/activity.h"
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long long sum(const json_t *act, const char *series)
{
	const json_t *a = json_object_get(json_object_get(act, "series"), series), *v;
	long long n = 0;
	size_t i;

	ck_assert_msg(json_is_array(a), "series %s is not an array", series);
	json_array_foreach(a, i, v)
		n += json_integer_value(v);
	return n;
}

/* The last sampled count of column col. */
static long long column_now(const json_t *act, const char *col)
{
	const json_t *cols = json_object_get(act, "columns"), *c;
	size_t i;

	json_array_foreach(cols, i, c)
		if (strcmp(t_str(c, "name"), col) == 0) {
			const json_t *cards = json_object_get(c, "cards");

			return json_integer_value(json_array_get(cards, json_array_size(cards) - 1));
		}
	ck_abort_msg("no column %s", col);
	return -1;
}

static void run_to(const char *card, const char *id, const char *status)
{
	char body[256], path[64];

	snprintf(body, sizeof body,
		 "{\"card_id\":\"%s\",\"marker\":\"w-1\",\"status\":\"running\",\"id\":\"%s\"}",
		 card, id);
	json_decref(t_must(201, "POST", "/v1/runs", W, NULL, body));
	snprintf(path, sizeof path, "/v1/runs/%s", id);
	snprintf(body, sizeof body, "{\"marker\":\"w-1\",\"status\":\"%s\"}", status);
	json_decref(t_must(200, "PATCH", path, W, NULL, body));
}

START_TEST(activity_counts_move)
{
	char *a = t_card_new("{\"title\":\"a\",\"state\":\"ready\"}"),
	     *b = t_card_new("{\"title\":\"b\",\"state\":\"ready\"}");
	json_t *j = t_must(200, "GET", "/v1/boards/default/activity", BOT, NULL, NULL);
	long long claims, done, failed;

	ck_assert_int_eq(json_array_size(json_object_get(j, "minutes")), 60);
	ck_assert_int_eq(t_int(j, "minute_ms"), 60000);
	ck_assert_str_eq(t_str(j, "board"), "default");
	ck_assert_int_eq(json_array_size(json_object_get(json_object_get(j, "series"), "claims")),
			 60);
	/* The first read of the minute sampled the board: both cards sit in ready. */
	ck_assert_int_eq(column_now(j, "ready"), 2);
	claims = sum(j, "claims");
	done = sum(j, "completions");
	failed = sum(j, "failures");
	json_decref(j);

	t_claim(a, "w-1");
	t_claim(b, "w-1");
	run_to(a, "ra", "finished");
	run_to(b, "rb", "failed");
	j = t_must(200, "GET", "/v1/boards/default/activity?minutes=60", OP, NULL, NULL);
	ck_assert_int_eq(sum(j, "claims"), claims + 2);
	ck_assert_int_eq(sum(j, "completions"), done + 1);
	ck_assert_int_eq(sum(j, "failures"), failed + 1);
	ck_assert_int_eq(sum(j, "reaper_actions"), 0);
	json_decref(j);

	j = t_must(200, "GET", "/v1/boards/default/activity?minutes=5", W, NULL, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "minutes")), 5);
	ck_assert_int_eq(json_array_size(json_object_get(json_object_get(j, "series"), "failures")),
			 5);
	json_decref(j);
	free(a);
	free(b);
}
END_TEST

/* Issue 30: a claim or a run on board A is A's, never B's (under B's route an operator reads
 * the series as B's). */
START_TEST(activity_counts_per_board)
{
	char *a, *b;
	json_t *ja, *jb, *j;
	long long a_claims, a_done, b_claims, b_done;

	t_board_new("other");
	a = t_card_new("{\"title\":\"a\",\"state\":\"ready\"}");
	b = t_card_new("{\"title\":\"b\",\"state\":\"ready\",\"board\":\"other\"}");
	free(t_card_new("{\"title\":\"c\",\"state\":\"ready\",\"board\":\"other\"}"));
	ja = t_must(200, "GET", "/v1/boards/default/activity", BOT, NULL, NULL);
	jb = t_must(200, "GET", "/v1/boards/other/activity", BOT, NULL, NULL);
	a_claims = sum(ja, "claims");
	a_done = sum(ja, "completions");
	b_claims = sum(jb, "claims");
	b_done = sum(jb, "completions");
	ck_assert(json_is_string(json_object_get(ja, "counts_since")));
	json_decref(ja);
	json_decref(jb);

	t_claim(a, "w-1");
	run_to(a, "ra", "finished");
	ja = t_must(200, "GET", "/v1/boards/default/activity", BOT, NULL, NULL);
	jb = t_must(200, "GET", "/v1/boards/other/activity", BOT, NULL, NULL);
	ck_assert_int_eq(sum(ja, "claims"), a_claims + 1);
	ck_assert_int_eq(sum(ja, "completions"), a_done + 1);
	ck_assert_int_eq(sum(jb, "claims"), b_claims);
	ck_assert_int_eq(sum(jb, "completions"), b_done);
	json_decref(ja);
	json_decref(jb);

	/* The other way, and through claim-next (count 2: two fresh claims). */
	t_claim(b, "w-1");
	j = t_must(200, "POST", "/v1/boards/other/claim-next", W, NULL,
		   "{\"marker\":\"w-2\",\"count\":2}");
	json_decref(j);
	ja = t_must(200, "GET", "/v1/boards/default/activity", BOT, NULL, NULL);
	jb = t_must(200, "GET", "/v1/boards/other/activity", BOT, NULL, NULL);
	ck_assert_int_eq(sum(ja, "claims"), a_claims + 1);
	ck_assert_int_eq(sum(jb, "claims"), b_claims + 2);
	json_decref(ja);
	json_decref(jb);
	free(a);
	free(b);
}
END_TEST

START_TEST(activity_scoped_and_bad_input)
{
	json_t *j;

	t_board_new("scoped");
	free(t_card_new("{\"title\":\"s\",\"state\":\"ready\",\"board\":\"scoped\"}"));
	/* The series are the board's own: a token scoped to it reads them. */
	j = t_must(200, "GET", "/v1/boards/scoped/activity", SCOPED, NULL, NULL);
	ck_assert_int_eq(sum(j, "claims"), 0);
	ck_assert_int_eq(column_now(j, "ready"), 1);
	json_decref(j);
	t_problem(403, "forbidden", "GET", "/v1/boards/default/activity", SCOPED, NULL, NULL);
	t_problem(404, "not_found", "GET", "/v1/boards/nope/activity", BOT, NULL, NULL);
	t_problem(400, "bad_request", "GET", "/v1/boards/default/activity?minutes=0", BOT, NULL,
		  NULL);
	t_problem(400, "bad_request", "GET", "/v1/boards/default/activity?minutes=61", BOT, NULL,
		  NULL);
	t_problem(400, "bad_request", "GET", "/v1/boards/default/activity?minutes=x", BOT, NULL,
		  NULL);
	t_problem(400, "bad_request", "GET", "/v1/boards/default/activity?board=default", BOT,
		  NULL, NULL);
	t_problem(400, "bad_request", "GET", "/v1/boards/b%20c/activity", BOT, NULL, NULL);
}
END_TEST

/* The server's sampler thread (server/sampler.c) samples every board as it starts and then
 * each minute, whether or not the route is read; it stops at once when asked. */
START_TEST(activity_sampler_samples_every_board)
{
	struct activity *ring = metrics_activity(api_metrics(T.api));
	struct activity_view *v = malloc(sizeof(*v));
	struct server_sampler *s = NULL;
	int64_t at = 0;
	int i;

	t_board_new("other");
	free(t_card_new("{\"title\":\"a\",\"state\":\"review\"}"));
	free(t_card_new("{\"title\":\"b\",\"state\":\"review\",\"board\":\"other\"}"));
	free(t_card_new("{\"title\":\"c\",\"state\":\"review\",\"board\":\"other\"}"));
	ck_assert(!activity_sampled(ring, "default", activity_now_ms()));
	ck_assert_int_eq(server_sampler_start(T.st, api_metrics(T.api), &s), CORE_OK);
	/* Its first pass runs at once; a minute boundary meanwhile only means another pass. */
	for (i = 0; i < 500; i++) {
		at = activity_now_ms();
		if (activity_sampled(ring, "default", at) && activity_sampled(ring, "other", at))
			break;
		usleep(10000);
	}
	server_sampler_stop(s);
	/* Read as of the minute the samples were seen in (a read a minute on would not find
	 * them in its last slot). */
	activity_read(ring, "other", at, v);
	ck_assert(v->sampled[ACTIVITY_MINUTES - 1]);
	ck_assert_str_eq(v->cols[6], "review");
	ck_assert_uint_eq(v->gauge[ACTIVITY_MINUTES - 1][6], 2);
	activity_read(ring, "default", at, v);
	ck_assert(v->sampled[ACTIVITY_MINUTES - 1]);
	ck_assert_uint_eq(v->gauge[ACTIVITY_MINUTES - 1][6], 1);
	free(v);
}
END_TEST

TCase *api_tcase_activity(void)
{
	TCase *tc = tcase_create("activity");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, activity_counts_move);
	tcase_add_test(tc, activity_counts_per_board);
	tcase_add_test(tc, activity_scoped_and_bad_input);
	tcase_add_test(tc, activity_sampler_samples_every_board);
	return tc;
}
