/* Batches of claims over HTTP (DESIGN §18): claim-next `count`, renew many
 * (POST /v1/claims/renew) and finish many (POST /v1/claims/release) — the answers per item, a
 * stale token among good ones, a card of another board, the bad inputs refused whole with the
 * item's index (nothing done), and finish many's retry (DESIGN §17). */
#include "tests/api/api_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NEXT "/v1/boards/default/claim-next"
#define RENEW "/v1/claims/renew"
#define RELEASE "/v1/claims/release"

static void card(const char *id, const char *state, int priority)
{
	char body[160];

	snprintf(body, sizeof body, "{\"id\":\"%s\",\"state\":\"%s\",\"priority\":%d}", id, state,
		 priority);
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, body));
}

/* The card as served (caller decrefs). */
static json_t *get(const char *id)
{
	char path[200];

	snprintf(path, sizeof path, "/v1/cards/%s", id);
	return t_must(200, "GET", path, OP, NULL, NULL);
}

/* The card's claim.lease_until as served (NULL when unclaimed); caller frees. */
static char *lease_of(const char *id)
{
	json_t *c = get(id), *cl = json_object_get(c, "claim");
	char *s = NULL;

	if (json_is_object(cl) && json_string_value(json_object_get(cl, "lease_until")))
		s = strdup(json_string_value(json_object_get(cl, "lease_until")));
	json_decref(c);
	return s;
}

static bool claimed(const char *id)
{
	json_t *c = get(id);
	bool held = json_is_object(json_object_get(c, "claim"));

	json_decref(c);
	return held;
}

/* results[i] of a batch answer, asserting its card and status. */
static json_t *result(json_t *j, size_t i, const char *card_id, int status)
{
	json_t *res = json_array_get(json_object_get(j, "results"), i);

	ck_assert_msg(res, "no results[%zu] in %s", i, T_BODY);
	ck_assert_str_eq(t_str(res, "card"), card_id);
	ck_assert_int_eq(t_int(res, "status"), status);
	return res;
}

START_TEST(next_count_claims_many)
{
	const char *order[] = {"p3", "p2", "p1"};
	json_t *j, *claims, *it;
	size_t i;

	card("p1", "ready", 1);
	card("p2", "ready", 2);
	card("p3", "ready", 3);
	card("p0", "ready", 0);
	card("p00", "ready", 0);
	j = t_must(200, "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"count\":3,\"lease_ms\":30000}");
	claims = json_object_get(j, "claims");
	ck_assert_msg(json_is_array(claims) && json_array_size(claims) == 3, "%s", T_BODY);
	ck_assert_ptr_null(json_object_get(j, "card")); /* the batch shape only */
	json_array_foreach(claims, i, it) {
		json_t *c = json_object_get(it, "card"), *tok = json_object_get(it, "token");

		/* best first, each a fresh claim with its own token, the single answer's fields */
		ck_assert_str_eq(t_str(c, "id"), order[i]);
		ck_assert_str_eq(t_str(tok, "marker"), "m");
		ck_assert_int_eq(t_int(tok, "epoch"), t_int(c, "claim_epoch"));
		ck_assert_int_eq(t_int(tok, "lease_ms"), 30000);
		ck_assert_int_eq(t_int(tok, "renew_after_ms"), 10000);
		ck_assert(json_is_true(json_object_get(tok, "fresh")));
		ck_assert_ptr_nonnull(t_str(tok, "claimed_at"));
		ck_assert_ptr_nonnull(t_str(tok, "lease_until"));
		ck_assert(claimed(order[i]));
	}
	json_decref(j);
	/* fewer left than asked: what there is */
	j = t_must(200, "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"count\":100}");
	ck_assert_int_eq(json_array_size(json_object_get(j, "claims")), 2);
	json_decref(j);
	/* none: 204, as without count */
	json_decref(t_must(204, "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"count\":5}"));
	/* bad counts claim nothing */
	card("last", "ready", 0);
	t_problem_says(400, "bad_request", "1..100", "POST", NEXT, W, NULL,
		       "{\"marker\":\"m\",\"count\":0}");
	t_problem_says(400, "bad_request", "1..100", "POST", NEXT, W, NULL,
		       "{\"marker\":\"m\",\"count\":101}");
	t_problem(400, "bad_request", "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"count\":\"2\"}");
	ck_assert(!claimed("last"));
	/* without count the answer keeps its shape */
	j = t_must(200, "POST", NEXT, W, NULL, "{\"marker\":\"m\"}");
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), "last");
	ck_assert_ptr_null(json_object_get(j, "claims"));
	json_decref(j);
}
END_TEST

struct waiter {
	int status;
	char *resp;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct httpc *c = harness_connect(&T);

	w->status = c ? harness_call(c, "POST", NEXT, W, NULL,
				     "{\"marker\":\"w\",\"count\":4,\"wait_ms\":20000}", &w->resp)
		      : 0;
	httpc_close(c);
	return NULL;
}

/* A waiting claim-next with count is woken as the single one is, and answers the batch. */
START_TEST(next_count_waits)
{
	struct waiter w = {0};
	pthread_t th;
	json_t *j;

	ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
	usleep(300 * 1000);
	card("late", "ready", 0);
	pthread_join(th, NULL);
	ck_assert_msg(w.status == 200, "%d %s", w.status, w.resp ? w.resp : "");
	j = json_loads(w.resp, 0, NULL);
	ck_assert_int_ge(json_array_size(json_object_get(j, "claims")), 1);
	ck_assert_str_eq(
		t_str(json_object_get(json_array_get(json_object_get(j, "claims"), 0), "card"),
		      "id"),
		"late");
	json_decref(j);
	free(w.resp);
}
END_TEST

START_TEST(renew_many_per_item)
{
	long long ea, eb, ec;
	char body[512], *lb0, *lb1, *la0, *la1;
	json_t *j, *res;

	card("a", "ready", 0);
	card("b", "ready", 0);
	card("c", "ready", 0);
	ea = t_claim("a", "m");
	eb = t_claim("b", "m");
	ec = t_claim("c", "m");
	la0 = lease_of("a");
	lb0 = lease_of("b");
	usleep(20 * 1000);
	/* b's epoch is stale, ghost does not exist: a and c are renewed all the same */
	snprintf(body, sizeof body,
		 "{\"lease_ms\":120000,\"tokens\":["
		 "{\"card\":\"a\",\"marker\":\"m\",\"epoch\":%lld},"
		 "{\"card\":\"b\",\"marker\":\"m\",\"epoch\":%lld},"
		 "{\"card\":\"ghost\",\"marker\":\"m\",\"epoch\":1},"
		 "{\"card\":\"c\",\"marker\":\"m\",\"epoch\":%lld}]}",
		 ea, eb + 1, ec);
	j = t_must(200, "POST", RENEW, W, NULL, body);
	ck_assert_int_eq(json_array_size(json_object_get(j, "results")), 4);
	res = result(j, 0, "a", 200);
	la1 = lease_of("a");
	ck_assert_str_eq(t_str(res, "lease_until"), la1);
	ck_assert_str_ne(la0, la1);
	res = result(j, 1, "b", 409);
	ck_assert_str_eq(t_str(res, "code"), "claim_conflict");
	res = result(j, 2, "ghost", 404);
	ck_assert_str_eq(t_str(res, "code"), "not_found");
	ck_assert_ptr_nonnull(strstr(t_str(res, "detail"), "ghost"));
	res = result(j, 3, "c", 200);
	ck_assert_ptr_nonnull(t_str(res, "lease_until"));
	json_decref(j);
	lb1 = lease_of("b");
	ck_assert_str_eq(lb0, lb1); /* the refused item changed nothing */
	/* the claim is bound to its credential: another worker token is refused per item */
	snprintf(body, sizeof body,
		 "{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":%lld}]}", ea);
	j = t_must(200, "POST", RENEW, W2, NULL, body);
	ck_assert_str_eq(t_str(result(j, 0, "a", 409), "code"), "claim_conflict");
	json_decref(j);
	/* and a role without the worker's is refused whole */
	t_problem(403, "forbidden", "POST", RENEW, BOT, NULL, body);
	free(la0);
	free(la1);
	free(lb0);
	free(lb1);
}
END_TEST

/* A bad batch is refused whole, naming the item, and nothing is done (a's lease stays). */
START_TEST(many_bad_input_names_the_index)
{
	char *big, *la0, *la1, body[512];
	long long ea;
	size_t i, o;
	static const char *const renew_bad[][2] = {
		{"{\"tokens\":[]}", "empty"},
		{"{}", "tokens"},
		{"{\"tokens\":{}}", "list"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1},7]}", "tokens[1]"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1},"
		 "{\"card\":\"b\",\"marker\":\"m\"}]}",
		 "tokens[1]: missing field \"epoch\""},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1,\"x\":1}]}",
		 "tokens[0]: unknown field \"x\""},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":-1}]}", "tokens[0]"},
		{"{\"tokens\":[{\"card\":\"a b\",\"marker\":\"m\",\"epoch\":1}]}", "tokens[0]"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"reaper:x\",\"epoch\":1}]}", "tokens[0]"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1},"
		 "{\"card\":\"b\",\"marker\":\"m\",\"epoch\":1},"
		 "{\"card\":\"a\",\"marker\":\"m\",\"epoch\":2}]}",
		 "tokens[2]: card a is also tokens[0]"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1,\"to\":\"done\"}]}",
		 "tokens[0]: unknown field \"to\""},
		{"{\"lease_ms\":-5,\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1}]}",
		 "lease_ms"},
	};
	static const char *const release_bad[][2] = {
		{"{\"tokens\":[]}", "empty"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1,\"to\":7}]}", "tokens[0]"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1,\"retry\":\"yes\"}]}",
		 "tokens[0]"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":9007199254740992}]}",
		 "tokens[0]: epoch"},
		{"{\"tokens\":[{\"card\":\"b\",\"marker\":\"m\",\"epoch\":1},{\"card\":\"a\","
		 "\"marker\":\"m\",\"epoch\":1,\"to\":\"done\",\"reason\":\"watchdog\"}]}",
		 "tokens[1]: reason watchdog is reserved"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1},"
		 "{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1}]}",
		 "tokens[1]: card a is also tokens[0]"},
		{"{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":1}],\"lease_ms\":1000}",
		 "lease_ms"},
	};

	card("a", "ready", 0);
	ea = t_claim("a", "m");
	la0 = lease_of("a");
	for (i = 0; i < sizeof renew_bad / sizeof renew_bad[0]; i++)
		t_problem_says(400, "bad_request", renew_bad[i][1], "POST", RENEW, W, NULL,
			       renew_bad[i][0]);
	for (i = 0; i < sizeof release_bad / sizeof release_bad[0]; i++)
		t_problem_says(400, "bad_request", release_bad[i][1], "POST", RELEASE, W, NULL,
			       release_bad[i][0]);
	/* a good item first, then a bad one: the good one is not done either */
	snprintf(body, sizeof body,
		 "{\"lease_ms\":120000,\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":%lld},"
		 "{\"card\":\"b\",\"marker\":\"m\",\"epoch\":\"1\"}]}",
		 ea);
	t_problem_says(400, "bad_request", "tokens[1]", "POST", RENEW, W, NULL, body);
	snprintf(body, sizeof body,
		 "{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":%lld,\"to\":\"done\"},"
		 "{\"card\":\"b\",\"marker\":\"m\"}]}",
		 ea);
	t_problem_says(400, "bad_request", "tokens[1]", "POST", RELEASE, W, NULL, body);
	/* 1 001 items: one too many */
	big = malloc(1001 * 64 + 64);
	o = (size_t)sprintf(big, "{\"tokens\":[");
	for (i = 0; i < 1001; i++)
		o += (size_t)sprintf(big + o, "%s{\"card\":\"c%zu\",\"marker\":\"m\",\"epoch\":1}",
				     i ? "," : "", i);
	sprintf(big + o, "]}");
	t_problem_says(400, "bad_request", "at most 1000", "POST", RENEW, W, NULL, big);
	t_problem_says(400, "bad_request", "at most 1000", "POST", RELEASE, W, NULL, big);
	free(big);
	la1 = lease_of("a");
	ck_assert_str_eq(la0, la1);
	ck_assert(claimed("a"));
	free(la0);
	free(la1);
}
END_TEST

/* 1 000 items is the most, and each gets its answer. */
START_TEST(renew_many_thousand)
{
	char *big;
	size_t i, o;
	json_t *j;

	big = malloc(1000 * 64 + 64);
	o = (size_t)sprintf(big, "{\"tokens\":[");
	for (i = 0; i < 1000; i++)
		o += (size_t)sprintf(big + o, "%s{\"card\":\"c%zu\",\"marker\":\"m\",\"epoch\":1}",
				     i ? "," : "", i);
	sprintf(big + o, "]}");
	j = t_must(200, "POST", RENEW, W, NULL, big);
	ck_assert_int_eq(json_array_size(json_object_get(j, "results")), 1000);
	result(j, 999, "c999", 404);
	json_decref(j);
	free(big);
}
END_TEST

START_TEST(release_many_per_item)
{
	long long ea, eb, ec, ed;
	char body[768];
	json_t *j, *res, *c;

	card("a", "ready", 0);
	card("b", "ready", 0);
	card("c", "ready", 0);
	card("d", "ready", 0);
	ea = t_claim("a", "m");
	eb = t_claim("b", "m");
	ec = t_claim("c", "m");
	ed = t_claim("d", "m");
	snprintf(body, sizeof body,
		 "{\"tokens\":["
		 "{\"card\":\"a\",\"marker\":\"m\",\"epoch\":%lld,\"to\":\"done\",\"reason\":\"ok\"},"
		 "{\"card\":\"b\",\"marker\":\"m\",\"epoch\":%lld,\"to\":\"done\"},"
		 "{\"card\":\"c\",\"marker\":\"m\",\"epoch\":%lld},"
		 "{\"card\":\"d\",\"marker\":\"m\",\"epoch\":%lld,\"to\":\"nope\"}]}",
		 ea, eb + 7, ec, ed);
	j = t_must(200, "POST", RELEASE, W, NULL, body);
	ck_assert_int_eq(json_array_size(json_object_get(j, "results")), 4);
	result(j, 0, "a", 200);
	ck_assert_str_eq(t_str(result(j, 1, "b", 409), "code"), "claim_conflict");
	result(j, 2, "c", 200);
	res = result(j, 3, "d", 422);
	ck_assert_str_eq(t_str(res, "code"), "transition_rejected");
	ck_assert_ptr_nonnull(strstr(t_str(res, "detail"), "no column nope"));
	json_decref(j);
	/* a: done and released in one step; b and d untouched; c released where it was */
	c = get("a");
	ck_assert_str_eq(t_str(c, "state"), "done");
	ck_assert(!json_is_object(json_object_get(c, "claim")));
	json_decref(c);
	ck_assert(claimed("b"));
	ck_assert(!claimed("c"));
	c = get("d");
	ck_assert_str_eq(t_str(c, "state"), "ready");
	ck_assert(json_is_object(json_object_get(c, "claim")));
	json_decref(c);
	/* the same token again: the hold is over */
	snprintf(body, sizeof body,
		 "{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":%lld,\"to\":\"done\"}]}",
		 ea);
	j = t_must(200, "POST", RELEASE, W, NULL, body);
	ck_assert_str_eq(t_str(result(j, 0, "a", 409), "code"), "claim_conflict");
	json_decref(j);
}
END_TEST

/* A token scoped to some boards acts only on their cards; the others are refused per item. */
START_TEST(many_scoped_token)
{
	long long es, ed;
	char body[512];
	json_t *j, *claim;

	t_board_new(HARNESS_SCOPED_BOARD);
	json_decref(t_must(201, "POST", "/v1/cards", OP, NULL,
			   "{\"id\":\"mine\",\"board\":\"" HARNESS_SCOPED_BOARD
			   "\",\"state\":\"ready\"}"));
	card("theirs", "ready", 0);
	claim = t_must(200, "POST", "/v1/cards/mine/claim", SCOPED, NULL, "{\"marker\":\"s\"}");
	es = t_int(claim, "epoch");
	json_decref(claim);
	ed = t_claim("theirs", "m");
	snprintf(body, sizeof body,
		 "{\"tokens\":[{\"card\":\"mine\",\"marker\":\"s\",\"epoch\":%lld},"
		 "{\"card\":\"theirs\",\"marker\":\"m\",\"epoch\":%lld},"
		 "{\"card\":\"nobody\",\"marker\":\"m\",\"epoch\":1}]}",
		 es, ed);
	j = t_must(200, "POST", RENEW, SCOPED, NULL, body);
	result(j, 0, "mine", 200);
	ck_assert_str_eq(t_str(result(j, 1, "theirs", 403), "code"), "forbidden");
	result(j, 2, "nobody", 404);
	json_decref(j);
	j = t_must(200, "POST", RELEASE, SCOPED, NULL, body);
	result(j, 0, "mine", 200);
	result(j, 1, "theirs", 403);
	json_decref(j);
	ck_assert(!claimed("mine"));
	ck_assert(claimed("theirs"));
}
END_TEST

/* finish many's retry (DESIGN §17): the release counts an attempt and schedules the card. */
START_TEST(release_many_retry)
{
	long long ea, eb;
	char body[512];
	json_t *j, *c;

	card("a", "ready", 0);
	card("b", "in_progress", 0);
	ea = t_claim("a", "m");
	eb = t_claim("b", "m");
	snprintf(body, sizeof body,
		 "{\"tokens\":[{\"card\":\"a\",\"marker\":\"m\",\"epoch\":%lld,\"retry\":true},"
		 "{\"card\":\"b\",\"marker\":\"m\",\"epoch\":%lld,\"to\":\"ready\",\"retry\":true}]}",
		 ea, eb);
	j = t_must(200, "POST", RELEASE, W, NULL, body);
	result(j, 0, "a", 200);
	result(j, 1, "b", 200);
	json_decref(j);
	c = get("a");
	ck_assert(!json_is_object(json_object_get(c, "claim")));
	ck_assert_int_eq(t_int(c, "attempts"), 1);
	ck_assert_ptr_nonnull(t_str(c, "not_before"));
	json_decref(c);
	c = get("b");
	ck_assert_str_eq(t_str(c, "state"), "ready");
	ck_assert(!json_is_object(json_object_get(c, "claim")));
	ck_assert_int_eq(t_int(c, "attempts"), 1);
	json_decref(c);
}
END_TEST

TCase *api_tcase_many(void)
{
	TCase *tc = tcase_create("many");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, next_count_claims_many);
	tcase_add_test(tc, next_count_waits);
	tcase_add_test(tc, renew_many_per_item);
	tcase_add_test(tc, many_bad_input_names_the_index);
	tcase_add_test(tc, renew_many_thousand);
	tcase_add_test(tc, release_many_per_item);
	tcase_add_test(tc, many_scoped_token);
	tcase_add_test(tc, release_many_retry);
	return tc;
}
