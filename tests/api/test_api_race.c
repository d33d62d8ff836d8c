/* Concurrency and hostile input through HTTP: the claim race, stale-token writes after a
 * forced epoch change, bad input that must change nothing, and the events long-poll. */
#include "tests/api/api_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RACERS 16

struct racer {
	int idx;
	pthread_barrier_t *go;
	int status;
	bool fresh;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	struct httpc *c = harness_connect(&T);
	char body[64], *resp = NULL;
	json_t *j;

	snprintf(body, sizeof body, "{\"marker\":\"racer-%d\",\"lease_ms\":60000}", r->idx);
	pthread_barrier_wait(r->go);
	r->status = c ? harness_call(c, "POST", "/v1/cards/race/claim", W, NULL, body, &resp) : 0;
	j = resp ? json_loads(resp, 0, NULL) : NULL;
	r->fresh = json_is_true(json_object_get(j, "fresh"));
	json_decref(j);
	free(resp);
	httpc_close(c);
	return NULL;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(claim_race_and_stale_tokens)
{
	pthread_t th[RACERS];
	struct racer rs[RACERS];
	pthread_barrier_t go;
	int wins = 0, conflicts = 0, i, winner = -1;
	char marker[32], body[256], hdr[64], *before, *after;
	long long old_epoch, new_epoch;
	json_t *j;

	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"race\",\"state\":\"ready\"}"));
	pthread_barrier_init(&go, NULL, RACERS);
	for (i = 0; i < RACERS; i++) {
		rs[i] = (struct racer){.idx = i, .go = &go};
		ck_assert_int_eq(pthread_create(&th[i], NULL, racer_main, &rs[i]), 0);
	}
	for (i = 0; i < RACERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (i = 0; i < RACERS; i++) {
		if (rs[i].status == 200 && rs[i].fresh) {
			wins++;
			winner = i;
		} else if (rs[i].status == 409) {
			conflicts++;
		}
	}
	ck_assert_int_eq(wins, 1);
	ck_assert_int_eq(conflicts, RACERS - 1);

	/* force an epoch change: the winner releases, another marker claims */
	j = t_must(200, "GET", "/v1/cards/race", W, NULL, NULL);
	old_epoch = t_int(j, "claim_epoch");
	json_decref(j);
	snprintf(marker, sizeof marker, "racer-%d", winner);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"epoch\":%lld}", marker, old_epoch);
	json_decref(t_must(200, "POST", "/v1/cards/race/release", W, NULL, body));
	new_epoch = t_claim("race", "the-new-owner");
	ck_assert_int_eq(new_epoch, old_epoch + 1);

	/* every stale-token write is refused and changes nothing */
	before = t_card_raw("race");
	snprintf(hdr, sizeof hdr, "If-Match: \"%lld\"", old_epoch);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"epoch\":%lld}", marker, old_epoch);
	t_problem(409, "claim_conflict", "POST", "/v1/cards/race/renew", W, NULL, body);
	t_problem(409, "claim_conflict", "POST", "/v1/cards/race/release", W, NULL, body);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"to\":\"in_progress\"}", marker);
	t_problem(409, "claim_conflict", "PATCH", "/v1/cards/race/state", W, hdr, body);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"run_id\":\"r-stale\"}", marker);
	t_problem(409, "claim_conflict", "PUT", "/v1/cards/race/last-run", W, hdr, body);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"awaiting_input\":true}", marker);
	t_problem(409, "claim_conflict", "PUT", "/v1/cards/race/awaiting-input", W, hdr, body);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"gave_up\":{\"reason\":\"x\"}}", marker);
	t_problem(409, "claim_conflict", "PUT", "/v1/cards/race/gave-up", W, hdr, body);
	/* the new owner's marker with the old epoch is stale too */
	t_problem(409, "claim_conflict", "PATCH", "/v1/cards/race/state", W, hdr,
		  "{\"marker\":\"the-new-owner\",\"to\":\"in_progress\"}");
	after = t_card_raw("race");
	ck_assert_str_eq(before, after);
	free(after);
	/* the live owner still writes */
	ck_assert_int_eq(t_owned_state(W, "race", "the-new-owner", new_epoch, "in_progress"), 200);
	free(before);
}
END_TEST

START_TEST(bad_input_changes_nothing)
{
	static const char *const card_bodies[] = {
		"{",
		"not json",
		"{\"title\":[1]}",
		"{\"labels\":\"a\"}",
		"{\"labels\":[\"has space\"]}",
		"{\"labels\":[\"a,b\"]}",
		"{\"labels\":[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]}",
		"{\"id\":\"bad id\"}",
		"{\"id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
		"{\"blockers\":[7]}",
		"{\"board\":\"no/slash\"}",
		"{\"title\":\"a\",\"title\":\"b\"}",
		"\"just a string\"",
	};
	char *before, *list_before, *list_after, *after, path[400];
	size_t i;

	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"keep\",\"state\":\"ready\"}"));
	before = t_card_raw("keep");
	json_decref(t_must(200, "GET", "/v1/cards", BOT, NULL, NULL));
	list_before = strdup(T_BODY);
	for (i = 0; i < sizeof card_bodies / sizeof card_bodies[0]; i++)
		t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, card_bodies[i]);
	/* bad input on an existing card */
	t_problem(400, "bad_request", "POST", "/v1/cards/keep/claim", W, NULL, "{\"marker\":5}");
	t_problem(400, "bad_request", "POST", "/v1/cards/keep/claim", W, NULL, "{}");
	t_problem(400, "bad_request", "POST", "/v1/cards/keep/claim", W, NULL,
		  "{\"marker\":\"reaper:host\"}");
	t_problem(400, "bad_request", "POST", "/v1/cards/keep/claim", W, NULL,
		  "{\"marker\":\"m\",\"lease_ms\":5}");
	t_problem(400, "bad_request", "POST", "/v1/cards/keep/claim", W, NULL,
		  "{\"marker\":\"m\",\"lease_ms\":\"60000\"}");
	t_problem(400, "bad_request", "POST", "/v1/cards/keep/claim", W, NULL,
		  "{\"marker\":\"m\",\"lease_ms\":99999999999}");
	t_problem(400, "bad_request", "PATCH", "/v1/cards/keep", BOT, NULL, "{\"blockers\":[\"x y\"]}");
	t_problem(400, "bad_request", "PUT", "/v1/cards/keep/labels", BOT, NULL, "{\"labels\":[1]}");
	t_problem(400, "bad_request", "PUT", "/v1/cards/keep/labels", BOT, NULL, "{}");
	t_problem(400, "bad_request", "PATCH", "/v1/cards/keep/labels", BOT, NULL, "{}");
	t_problem(400, "bad_request", "POST", "/v1/cards/keep/comments", BOT, NULL, "{\"body\":1}");
	t_problem(400, "bad_request", "PATCH", "/v1/cards/keep/state", BOT, NULL,
		  "{\"from\":\"ready\",\"to\":\"a b\"}");
	/* unsafe path encodings */
	t_problem(400, "bad_request", "GET", "/v1/cards/ke%00ep", BOT, NULL, NULL);
	t_problem(400, "bad_request", "GET", "/v1/cards/ke%2Fep", BOT, NULL, NULL);
	t_problem(400, "bad_request", "GET", "/v1/cards/ke%zzep", BOT, NULL, NULL);
	t_problem(400, "bad_request", "GET", "/v1/cards/ke%", BOT, NULL, NULL);
	json_decref(t_must(200, "GET", "/v1/cards/%6beep", BOT, NULL, NULL)); /* %6b = k */
	memset(path, 'a', sizeof path);
	memcpy(path, "/v1/cards/", 10);
	path[sizeof path - 1] = '\0';
	t_problem(400, "bad_request", "GET", path, BOT, NULL, NULL);
	t_problem(400, "bad_request", "GET", "/v1/cards?board=%00", BOT, NULL, NULL);
	/* a huge string field inside an acceptable body size */
	{
		size_t n = 70000;
		char *big = malloc(n + 32);

		strcpy(big, "{\"title\":\"");
		memset(big + 10, 'x', n);
		strcpy(big + 10 + n, "\"}");
		t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, big);
		free(big);
	}

	after = t_card_raw("keep");
	ck_assert_str_eq(before, after);
	json_decref(t_must(200, "GET", "/v1/cards", BOT, NULL, NULL));
	list_after = strdup(T_BODY);
	ck_assert_str_eq(list_before, list_after);
	free(before);
	free(after);
	free(list_before);
	free(list_after);
}
END_TEST

struct poller {
	char path[128];
	int status;
	json_t *body;
	int64_t ms;
};

static void *poller_main(void *arg)
{
	struct poller *p = arg;
	struct httpc *c = harness_connect(&T);
	char *resp = NULL;
	int64_t t0 = now_ms();

	p->status = c ? harness_call(c, "GET", p->path, W, NULL, NULL, &resp) : 0;
	p->ms = now_ms() - t0;
	p->body = resp ? json_loads(resp, 0, NULL) : NULL;
	free(resp);
	httpc_close(c);
	return NULL;
}

START_TEST(events_long_poll)
{
	struct poller ps[8];
	pthread_t th[8];
	json_t *j;
	long long next;
	int64_t t0;
	int i;

	j = t_must(200, "GET", "/v1/events", W, NULL, NULL);
	next = t_int(j, "next");
	json_decref(j);

	/* an empty wait ends with an empty page after about wait_ms */
	t0 = now_ms();
	{
		char p[128];

		snprintf(p, sizeof p, "/v1/events?after=%lld&wait_ms=300", next);
		j = t_must(200, "GET", p, W, NULL, NULL);
	}
	ck_assert_int_ge(now_ms() - t0, 250);
	ck_assert_int_eq(json_array_size(json_object_get(j, "events")), 0);
	ck_assert_int_eq(t_int(j, "next"), next);
	json_decref(j);

	/* more waiters than HTTP threads (4): none of them blocks the others */
	for (i = 0; i < 8; i++) {
		snprintf(ps[i].path, sizeof ps[i].path, "/v1/events?after=%lld&wait_ms=20000", next);
		ck_assert_int_eq(pthread_create(&th[i], NULL, poller_main, &ps[i]), 0);
	}
	usleep(300 * 1000);
	t0 = now_ms();
	json_decref(t_must(200, "GET", "/healthz", NULL, NULL, NULL));
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"wake\"}"));
	ck_assert_int_lt(now_ms() - t0, 2000);
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(ps[i].status, 200);
		ck_assert_int_lt(ps[i].ms, 10000);
		ck_assert_int_ge(json_array_size(json_object_get(ps[i].body, "events")), 1);
		ck_assert_str_eq(t_str(json_array_get(json_object_get(ps[i].body, "events"), 0),
				       "type"),
				 "card_created");
		ck_assert_int_gt(t_int(ps[i].body, "next"), next);
		json_decref(ps[i].body);
	}
}
END_TEST

TCase *api_tcase_race(void)
{
	TCase *tc = tcase_create("race");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, claim_race_and_stale_tokens);
	tcase_add_test(tc, bad_input_changes_nothing);
	tcase_add_test(tc, events_long_poll);
	return tc;
}
