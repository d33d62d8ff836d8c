/* The worker side over HTTP (DESIGN §12): claim-next (shape, refusals, the long-poll woken by
 * each kind of availability, 204 at the end of the wait, 32 workers draining one board),
 * priority, run result/error, the worker's fenced comment, and the outcome + release step. */
#include "tests/api/api_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NEXT "/v1/boards/default/claim-next"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(next_shape_and_refusals)
{
	json_t *j, *tok, *card;

	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL,
			   "{\"id\":\"lo\",\"state\":\"ready\"}"));
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL,
			   "{\"id\":\"hi\",\"state\":\"ready\",\"priority\":3}"));
	j = t_must(200, "POST", NEXT, W, NULL, "{\"marker\":\"m1\",\"lease_ms\":30000}");
	card = json_object_get(j, "card");
	tok = json_object_get(j, "token");
	ck_assert_str_eq(t_str(card, "id"), "hi");
	ck_assert_int_eq(t_int(card, "priority"), 3);
	ck_assert_str_eq(t_str(tok, "marker"), "m1");
	ck_assert_int_eq(t_int(tok, "epoch"), t_int(card, "claim_epoch"));
	ck_assert_int_eq(t_int(tok, "lease_ms"), 30000);
	ck_assert_int_eq(t_int(tok, "renew_after_ms"), 10000);
	ck_assert(json_is_true(json_object_get(tok, "fresh")));
	ck_assert_ptr_nonnull(t_str(tok, "claimed_at"));
	ck_assert_ptr_nonnull(t_str(tok, "lease_until"));
	json_decref(j);

	t_problem(400, "bad_request", "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"wait_ms\":30001}");
	t_problem(400, "bad_request", "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"wait_ms\":-1}");
	t_problem(400, "bad_request", "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"columns\":\"x\"}");
	t_problem(400, "bad_request", "POST", NEXT, W, NULL, "{\"wait_ms\":0}");
	t_problem(422, "transition_rejected", "POST", NEXT, W, NULL,
		  "{\"marker\":\"m\",\"columns\":[\"nope\"]}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "nope"));
	t_problem(422, "transition_rejected", "POST", NEXT, W, NULL,
		  "{\"marker\":\"m\",\"columns\":[\"done\"]}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "column done of board default is terminal"));
	/* a missing board says so, with or without columns (without, the store finds it) */
	t_problem(404, "not_found", "POST", "/v1/boards/ghost/claim-next", W, NULL,
		  "{\"marker\":\"m\"}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "no board ghost"));
	t_problem(404, "not_found", "POST", "/v1/boards/ghost/claim-next", W, NULL,
		  "{\"marker\":\"m\",\"columns\":[\"ready\"]}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "no board ghost"));
	/* the owned done+release of a missing card names it */
	t_problem(404, "not_found", "PATCH", "/v1/cards/ghost/state", W, "If-Match: \"1\"",
		  "{\"marker\":\"m\",\"to\":\"done\",\"release\":true}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "no card ghost"));
	t_problem(400, "bad_request", "PATCH", "/v1/cards/bad%20id/state", W, "If-Match: \"1\"",
		  "{\"marker\":\"m\",\"to\":\"done\"}");
	t_problem(403, "forbidden", "POST", NEXT, BOT, NULL, "{\"marker\":\"m\"}");
	t_problem(403, "forbidden", "POST", "/v1/boards/default/claim-next", SCOPED, NULL,
		  "{\"marker\":\"m\"}");
	/* None of that claimed anything: "lo" is still the next one. */
	j = t_must(200, "POST", NEXT, W, NULL, "{\"marker\":\"m2\"}");
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), "lo");
	json_decref(j);
	/* Nothing left, no wait: 204 at once. */
	json_decref(t_must(204, "POST", NEXT, W, NULL, "{\"marker\":\"m3\"}"));
	ck_assert(T_BODY == NULL || T_BODY[0] == '\0');
}
END_TEST

START_TEST(next_wait_ends_with_204)
{
	int64_t t0 = now_ms();

	json_decref(t_must(204, "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"wait_ms\":300}"));
	ck_assert_int_ge(now_ms() - t0, 290); /* it did wait (a lower bound never flakes) */
	/* A card that exists but does not fit wakes nobody into a claim. */
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"bk\",\"state\":\"backlog\"}"));
	json_decref(t_must(204, "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"wait_ms\":200}"));
}
END_TEST

/* A worker parked in claim-next on its own connection. */
struct waiter {
	const char *body;
	int status;
	char *resp;
	volatile int done;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct httpc *c = harness_connect(&T);

	w->status = c ? harness_call(c, "POST", NEXT, W, NULL, w->body, &w->resp) : 0;
	httpc_close(c);
	w->done = 1;
	return NULL;
}

/* Starts a waiter, checks it is still parked after a while, runs `act`, and asserts the
 * waiter got 200 and card `want`. */
static void wake_by(const char *body, void (*act)(void), const char *want)
{
	struct waiter w = {.body = body};
	pthread_t th;
	json_t *j;

	ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
	usleep(300 * 1000);
	ck_assert_msg(!w.done, "claim-next returned before anything was available: %d %s",
		      w.status, w.resp ? w.resp : "");
	act();
	pthread_join(th, NULL);
	ck_assert_msg(w.status == 200, "woken claim-next: %d %s", w.status, w.resp ? w.resp : "");
	j = json_loads(w.resp, 0, NULL);
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), want);
	json_decref(j);
	free(w.resp);
}

static void act_create(void)
{
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"new\",\"state\":\"ready\"}"));
}

static void act_move(void)
{
	json_decref(t_must(200, "PATCH", "/v1/cards/parked/state", BOT, NULL,
			   "{\"from\":\"backlog\",\"to\":\"ready\"}"));
}

static long long held_epoch;

static void act_release(void)
{
	char body[96];

	snprintf(body, sizeof body, "{\"marker\":\"holder\",\"epoch\":%lld}", held_epoch);
	json_decref(t_must(200, "POST", "/v1/cards/held/release", W, NULL, body));
}

static void act_unblock(void)
{
	json_decref(t_must(200, "PATCH", "/v1/cards/blocker/state", OP, NULL, "{\"to\":\"done\"}"));
}

static void act_label(void)
{
	json_decref(t_must(200, "PATCH", "/v1/cards/plain/labels", BOT, NULL,
			   "{\"add\":[\"gpu\"]}"));
}

START_TEST(next_wakes_on_each_availability)
{
	/* created */
	wake_by("{\"marker\":\"w\",\"wait_ms\":20000}", act_create, "new");
	/* moved into an eligible column */
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL,
			   "{\"id\":\"parked\",\"state\":\"backlog\"}"));
	wake_by("{\"marker\":\"w\",\"wait_ms\":20000}", act_move, "parked");
	/* released (the reaper's FS repark is a release in place: the same event) */
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"held\",\"state\":\"ready\"}"));
	held_epoch = t_claim("held", "holder");
	wake_by("{\"marker\":\"w\",\"wait_ms\":20000}", act_release, "held");
	/* unblocked: its blocker reaches done, the dependent moves to ready */
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL,
			   "{\"id\":\"blocker\",\"state\":\"backlog\"}"));
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL,
			   "{\"id\":\"dep\",\"state\":\"ready\",\"blockers\":[\"blocker\"]}"));
	wake_by("{\"marker\":\"w\",\"wait_ms\":20000}", act_unblock, "dep");
	/* a label the waiter asked for arrives */
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"plain\",\"state\":\"ready\"}"));
	wake_by("{\"marker\":\"w\",\"wait_ms\":20000,\"labels\":[\"gpu\"]}", act_label, "plain");
}
END_TEST

static void act_delete_held(void)
{
	json_decref(t_must(204, "DELETE", "/v1/cards/held", OP, NULL, NULL));
}

/* A claimed card deleted frees its board's capacity: a waiter parked on a full board takes
 * the next card at once (it used to sleep out its wait_ms and find it only at the end). */
START_TEST(next_wakes_when_a_claimed_card_is_deleted)
{
	json_t *b = t_must(200, "GET", "/v1/boards/default", OP, NULL, NULL);
	long long t0;
	char *text;

	json_object_set_new(b, "max_claims", json_integer(1));
	json_object_del(b, "retry_effective");
	json_object_del(b, "claimed");
	text = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	json_decref(t_must(200, "PUT", "/v1/boards/default", OP, NULL, text));
	free(text);
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"held\",\"state\":\"ready\"}"));
	held_epoch = t_claim("held", "holder");
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"next\",\"state\":\"ready\"}"));
	t0 = now_ms();
	wake_by("{\"marker\":\"w\",\"wait_ms\":20000}", act_delete_held, "next");
	/* Woken by the delete, not by its wait's end (20 s): a bound no busy machine reaches. */
	ck_assert_msg(now_ms() - t0 < 10000, "woken after %lld ms", now_ms() - t0);
}
END_TEST

/* 1 500 events while nobody waits (backlog cards: nothing a worker may take). The waker, idle
 * meanwhile, reads them all once a worker parks (more than one batch of 1 000, woken once at
 * the end of that catch-up), and the worker is still woken by the card that comes next. */
START_TEST(next_wakes_after_a_long_idle)
{
	char body[96];
	int i;

	for (i = 0; i < 1500; i++) {
		snprintf(body, sizeof body, "{\"id\":\"bk%d\",\"state\":\"backlog\"}", i);
		json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, body));
	}
	wake_by("{\"marker\":\"w\",\"wait_ms\":20000}", act_create, "new");
	/* and parks again afterwards: nothing else is there */
	json_decref(t_must(204, "POST", NEXT, W, NULL, "{\"marker\":\"w2\",\"wait_ms\":300}"));
}
END_TEST

/* A start over an audit tail of several batches (2 500 card.created events, backlog cards:
 * nothing a worker may take). The waker finds the tail on its own thread after the api is up
 * (api/claimnext.c tail_find); a claim-next sent at once waits for that, and nothing changes
 * for it: the events from before the start wake nobody into a claim (204 at the end of its
 * wait), and a card created afterwards wakes the next waiter. */
static bool fill_tail(void *ctx, struct store *st, struct api_reaper_hooks *hooks)
{
	const struct store_actor bot = {.name = "t-bot"};
	char id[32];
	int i;

	(void)ctx;
	(void)hooks;
	for (i = 0; i < 2500; i++) {
		struct store_card_create in = {.id = id, .state = "backlog"};
		struct core_card *c = NULL;

		snprintf(id, sizeof id, "pre%d", i);
		if (store_card_create(st, &in, &bot, &c) != CORE_OK)
			return false;
		core_card_free(c);
	}
	return true;
}

START_TEST(next_after_a_start_over_a_long_tail)
{
	struct harness_options o = {.before_api = fill_tail};
	int64_t t0;

	t_setup_with(&o);
	t0 = now_ms();
	json_decref(t_must(204, "POST", NEXT, W, NULL, "{\"marker\":\"m\",\"wait_ms\":300}"));
	ck_assert_int_ge(now_ms() - t0, 290);
	wake_by("{\"marker\":\"w\",\"wait_ms\":20000}", act_create, "new");
}
END_TEST

#define DRAINERS 32
#define DRAIN_CARDS 160

struct drainer {
	pthread_barrier_t *go;
	int idx;
	char ids[DRAIN_CARDS][24];
	int n, bad_status;
};

static void *drainer_main(void *arg)
{
	struct drainer *d = arg;
	struct httpc *c = harness_connect(&T);
	char body[64], *resp = NULL;
	int st;

	snprintf(body, sizeof body, "{\"marker\":\"d%d\"}", d->idx);
	pthread_barrier_wait(d->go);
	while (c) {
		st = harness_call(c, "POST", NEXT, W, NULL, body, &resp);
		if (st == 200) {
			json_t *j = json_loads(resp, 0, NULL);

			if (d->n < DRAIN_CARDS)
				snprintf(d->ids[d->n++], sizeof d->ids[0], "%s",
					 t_str(json_object_get(j, "card"), "id"));
			json_decref(j);
		} else {
			if (st != 204)
				d->bad_status = st;
			free(resp);
			break;
		}
		free(resp);
		resp = NULL;
	}
	httpc_close(c);
	return NULL;
}

START_TEST(next_drain_32_workers)
{
	static struct drainer d[DRAINERS];
	static char seen[DRAIN_CARDS];
	pthread_t th[DRAINERS];
	pthread_barrier_t go;
	char body[96];
	int i, k, total = 0, idx;

	for (i = 0; i < DRAIN_CARDS; i++) {
		snprintf(body, sizeof body, "{\"id\":\"d%03d\",\"state\":\"ready\",\"priority\":%d}",
			 i, i % 3);
		json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, body));
	}
	memset(seen, 0, sizeof seen);
	pthread_barrier_init(&go, NULL, DRAINERS);
	for (i = 0; i < DRAINERS; i++) {
		memset(&d[i], 0, sizeof d[i]);
		d[i].go = &go;
		d[i].idx = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, drainer_main, &d[i]), 0);
	}
	for (i = 0; i < DRAINERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (i = 0; i < DRAINERS; i++) {
		ck_assert_msg(d[i].bad_status == 0, "worker %d got %d (never a conflict)", i,
			      d[i].bad_status);
		for (k = 0; k < d[i].n; k++) {
			ck_assert_int_eq(sscanf(d[i].ids[k], "d%d", &idx), 1);
			ck_assert_msg(!seen[idx], "card %s handed out twice", d[i].ids[k]);
			seen[idx] = 1;
			total++;
		}
	}
	ck_assert_int_eq(total, DRAIN_CARDS);
}
END_TEST

START_TEST(run_result_comment_and_finish)
{
	char big[70000], body[1024], hdr[64];
	long long e;
	json_t *j;

	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"job\",\"state\":\"ready\"}"));
	e = t_claim("job", "wk");
	snprintf(hdr, sizeof hdr, "If-Match: \"%lld\"", e);
	json_decref(t_must(201, "POST", "/v1/runs", W, NULL,
			   "{\"id\":\"run1\",\"card_id\":\"job\",\"marker\":\"wk\",\"status\":\"running\"}"));
	/* result: any JSON; error: a string */
	j = t_must(200, "PATCH", "/v1/runs/run1", W, NULL,
		   "{\"marker\":\"wk\",\"status\":\"finished\",\"result\":{\"out\":[1,\"two\",null]},"
		   "\"error\":\"none\"}");
	ck_assert_str_eq(t_str(j, "error"), "none");
	ck_assert_int_eq(json_integer_value(json_array_get(
				 json_object_get(json_object_get(j, "result"), "out"), 0)),
			 1);
	json_decref(j);
	j = t_must(200, "GET", "/v1/runs/run1", OP, NULL, NULL);
	ck_assert_str_eq(json_string_value(json_array_get(
				 json_object_get(json_object_get(j, "result"), "out"), 1)),
			 "two");
	ck_assert(json_is_null(json_array_get(json_object_get(json_object_get(j, "result"), "out"),
					      2)));
	ck_assert_str_eq(t_str(j, "error"), "none");
	json_decref(j);
	/* Too big a result: 413, nothing changes. */
	memset(big, 'a', sizeof big);
	memcpy(big, "{\"marker\":\"wk\",\"result\":\"", 25);
	memcpy(big + sizeof big - 3, "\"}", 3);
	t_problem(413, "payload_too_large", "PATCH", "/v1/runs/run1", W, NULL, big);
	memset(big, 'e', sizeof big);
	memcpy(big, "{\"marker\":\"wk\",\"error\":\"", 24);
	memcpy(big + 24 + 5000, "\"}", 3);
	t_problem(400, "bad_request", "PATCH", "/v1/runs/run1", W, NULL, big);
	/* 4 KiB is bytes: 3 000 two-byte characters are refused too, and the detail says so. */
	{
		size_t i, n = 24;

		for (i = 0; i < 3000; i++)
			n += (size_t)snprintf(big + n, sizeof big - n, "\xc3\xa9");
		memcpy(big + n, "\"}", 3);
		j = t_must(400, "PATCH", "/v1/runs/run1", W, NULL, big);
		ck_assert_str_eq(t_str(j, "code"), "bad_request");
		ck_assert_msg(strstr(t_str(j, "detail"), "\"error\"") != NULL, "detail: %s",
			      t_str(j, "detail"));
		json_decref(j);
	}

	/* The holder comments, fenced; a stale epoch or a missing If-Match adds nothing. */
	j = t_must(201, "POST", "/v1/cards/job/comments", W, hdr,
		   "{\"marker\":\"wk\",\"body\":\"step 1 done\"}");
	ck_assert_int_eq(json_array_size(json_object_get(j, "comments")), 1);
	json_decref(j);
	t_problem(428, "precondition_required", "POST", "/v1/cards/job/comments", W, NULL,
		  "{\"marker\":\"wk\",\"body\":\"x\"}");
	snprintf(body, sizeof body, "If-Match: \"%lld\"", e + 1);
	t_problem(409, "claim_conflict", "POST", "/v1/cards/job/comments", W, body,
		  "{\"marker\":\"wk\",\"body\":\"x\"}");
	t_problem(409, "claim_conflict", "POST", "/v1/cards/job/comments", W, hdr,
		  "{\"marker\":\"other\",\"body\":\"x\"}");
	t_problem(403, "forbidden", "POST", "/v1/cards/job/comments", W, NULL, "{\"body\":\"x\"}");
	t_problem(403, "forbidden", "POST", "/v1/cards/job/comments", BOT, hdr,
		  "{\"marker\":\"wk\",\"body\":\"x\"}");
	j = t_must(200, "GET", "/v1/cards/job", OP, NULL, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "comments")), 1);
	json_decref(j);

	/* Outcome and release in one fenced step. */
	t_problem(400, "bad_request", "PATCH", "/v1/cards/job/state", OP, NULL,
		  "{\"to\":\"done\",\"release\":true}");
	j = t_must(200, "PATCH", "/v1/cards/job/state", W, hdr,
		   "{\"marker\":\"wk\",\"to\":\"done\",\"release\":true}");
	ck_assert_str_eq(t_str(j, "state"), "done");
	ck_assert(json_is_null(json_object_get(j, "claim")));
	ck_assert_int_eq(t_int(j, "claim_epoch"), e);
	json_decref(j);
	/* And the token is dead. */
	t_problem(409, "claim_conflict", "PATCH", "/v1/cards/job/state", W, hdr,
		  "{\"marker\":\"wk\",\"to\":\"blocked\",\"release\":true}");
}
END_TEST

START_TEST(priority_on_create_and_patch)
{
	json_t *j;

	j = t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"p\",\"priority\":-5}");
	ck_assert_int_eq(t_int(j, "priority"), -5);
	json_decref(j);
	j = t_must(200, "PATCH", "/v1/cards/p", BOT, NULL, "{\"priority\":2147483647}");
	ck_assert_int_eq(t_int(j, "priority"), 2147483647);
	json_decref(j);
	t_problem(400, "bad_request", "PATCH", "/v1/cards/p", BOT, NULL, "{\"priority\":2147483648}");
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, "{\"priority\":\"high\"}");
	j = t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"q\"}");
	ck_assert_int_eq(t_int(j, "priority"), 0);
	json_decref(j);
	j = t_must(200, "GET", "/v1/cards/p", OP, NULL, NULL);
	ck_assert_int_eq(t_int(j, "priority"), 2147483647);
	json_decref(j);
}
END_TEST

TCase *api_tcase_next(void)
{
	TCase *tc = tcase_create("claim-next");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, next_shape_and_refusals);
	tcase_add_test(tc, next_wait_ends_with_204);
	tcase_add_test(tc, next_wakes_on_each_availability);
	tcase_add_test(tc, next_wakes_after_a_long_idle);
	tcase_add_test(tc, next_wakes_when_a_claimed_card_is_deleted);
	tcase_add_test(tc, next_drain_32_workers);
	tcase_add_test(tc, run_result_comment_and_finish);
	tcase_add_test(tc, priority_on_create_and_patch);
	return tc;
}

TCase *api_tcase_next_start(void)
{
	TCase *tc = tcase_create("claim-next after a start");

	tcase_add_checked_fixture(tc, NULL, t_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, next_after_a_start_over_a_long_tail);
	return tc;
}
