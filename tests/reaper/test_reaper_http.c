/* The reaper through the real listening server: a worker dies, the operator runs a pass over
 * HTTP, a new worker takes the card, and every late write of the zombie is refused 409 with
 * the card byte-identical. */
#include "server/reaper.h"
#include "tests/common/harness.h"

#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1764670000000LL
#define LEASE 60000LL

static int64_t now_ms;
static struct harness H;
static struct httpc *C;
static struct server_reaper *R;

static int64_t test_clock(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&now_ms, __ATOMIC_SEQ_CST);
}

static void quiet(void *ctx, const char *line)
{
	(void)ctx;
	(void)line;
}

static bool start_reaper(void *ctx, struct store *st, struct api_reaper_hooks *hooks)
{
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000, .batch = 100,
					   .lease_ms = LEASE, .hostname = "httptest",
					   .log = quiet};

	(void)ctx;
	store_clock_set(st, test_clock, NULL);
	if (server_reaper_new(st, &cfg, &R) != CORE_OK)
		return false;
	*hooks = (struct api_reaper_hooks){server_reaper_hook_status, server_reaper_hook_pass, R};
	return true;
}

static void setup(void)
{
	struct harness_options o = {.before_api = start_reaper};

	now_ms = T0;
	ck_assert(harness_start(&H, &o));
	C = harness_connect(&H);
	ck_assert_ptr_nonnull(C);
}

static void teardown(void)
{
	httpc_close(C);
	harness_stop(&H);
	server_reaper_free(R);
	R = NULL;
}

/* One call; returns the status and (when body_out) the body. */
static int call(const char *method, const char *path, const char *tok, const char *hdr,
		const char *body, char **body_out)
{
	char *b = NULL;
	int st = harness_call(C, method, path, tok, hdr, body, &b);

	if (body_out)
		*body_out = b;
	else
		free(b);
	return st;
}

static json_t *call_json(int want, const char *method, const char *path, const char *tok,
			 const char *hdr, const char *body)
{
	char *b = NULL;
	int st = call(method, path, tok, hdr, body, &b);
	json_t *j;

	ck_assert_msg(st == want, "%s %s: want %d got %d: %s", method, path, want, st,
		      b ? b : "");
	j = json_loads(b ? b : "null", JSON_DECODE_ANY, NULL);
	free(b);
	return j;
}

static void expect_conflict(const char *method, const char *path, const char *hdr,
			    const char *body)
{
	json_t *j = call_json(409, method, path, HARNESS_TOK_WORKER, hdr, body);

	ck_assert_str_eq(json_string_value(json_object_get(j, "code")), "claim_conflict");
	json_decref(j);
}

/* w1, holding c1 at the epoch in hdr ("If-Match: ..."), creates run `run` (its lock for
 * lease_ms) and records it as the card's last run. */
static void record_run(const char *hdr, const char *run, int lease_ms)
{
	char body[192];

	snprintf(body, sizeof(body),
		 "{\"id\":\"%s\",\"card_id\":\"c1\",\"marker\":\"w1\","
		 "\"status\":\"running\",\"lease_ms\":%d}",
		 run, lease_ms);
	json_decref(call_json(201, "POST", "/v1/runs", HARNESS_TOK_WORKER, NULL, body));
	snprintf(body, sizeof(body), "{\"marker\":\"w1\",\"run_id\":\"%s\"}", run);
	json_decref(call_json(200, "PUT", "/v1/cards/c1/last-run", HARNESS_TOK_WORKER, hdr, body));
}

/* w1 moves c1 to in_progress and records run R (lock 1 s) under the epoch in hdr. */
static void start_run_r(const char *hdr)
{
	json_decref(call_json(200, "PATCH", "/v1/cards/c1/state", HARNESS_TOK_WORKER, hdr,
			      "{\"marker\":\"w1\",\"to\":\"in_progress\"}"));
	record_run(hdr, "R", 1000);
}

/* An operator's reaper pass; the caller frees the stats. */
static json_t *operator_pass(void)
{
	return call_json(200, "POST", "/v1/reaper/pass", HARNESS_TOK_OPERATOR, NULL, "{}");
}

/* One action's count in a pass's stats. */
static json_int_t pass_action(const json_t *stats, const char *action)
{
	return json_integer_value(json_object_get(json_object_get(stats, "actions"), action));
}

START_TEST(test_zombie_refused_over_http)
{
	json_t *j;
	char *before = NULL, *after = NULL, hdr[64];
	int64_t epoch, epoch2;

	json_decref(call_json(201, "POST", "/v1/cards", HARNESS_TOK_BOT, NULL,
			      "{\"id\":\"c1\",\"state\":\"in_progress\"}"));
	j = call_json(200, "POST", "/v1/cards/c1/claim", HARNESS_TOK_WORKER, NULL,
		      "{\"marker\":\"w1\",\"lease_ms\":60000}");
	epoch = json_integer_value(json_object_get(j, "epoch"));
	json_decref(j);
	snprintf(hdr, sizeof(hdr), "If-Match: \"%lld\"", (long long)epoch);
	record_run(hdr, "r1", 30000);

	/* the worker dies: neither the claim nor the run lock is renewed */
	__atomic_add_fetch(&now_ms, LEASE + 1, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(call("POST", "/v1/reaper/pass", HARNESS_TOK_WORKER, NULL, "{}", NULL), 403);
	j = operator_pass();
	ck_assert_int_eq(json_integer_value(json_object_get(j, "transferred")), 1);
	ck_assert_int_eq(pass_action(j, "repark"), 1);
	json_decref(j);
	j = call_json(200, "GET", "/v1/runs/r1", HARNESS_TOK_OPERATOR, NULL, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "failed_resumable");
	ck_assert_str_eq(json_string_value(json_object_get(j, "failure_code")), "PROCESS_ORPHANED");
	json_decref(j);

	/* a new worker takes the card, once the backoff of its return has passed (DESIGN §17) */
	__atomic_add_fetch(&now_ms, 2000, __ATOMIC_SEQ_CST);
	j = call_json(200, "POST", "/v1/cards/c1/claim", HARNESS_TOK_WORKER2, NULL,
		      "{\"marker\":\"w2\",\"lease_ms\":60000}");
	epoch2 = json_integer_value(json_object_get(j, "epoch"));
	ck_assert_int_eq(epoch2, epoch + 2);
	ck_assert(json_is_true(json_object_get(j, "fresh")));
	json_decref(j);

	ck_assert_int_eq(call("GET", "/v1/cards/c1", HARNESS_TOK_OPERATOR, NULL, NULL, &before), 200);
	expect_conflict("POST", "/v1/cards/c1/renew", NULL, "{\"marker\":\"w1\",\"epoch\":1}");
	expect_conflict("PATCH", "/v1/cards/c1/state", hdr, "{\"marker\":\"w1\",\"to\":\"done\"}");
	expect_conflict("PUT", "/v1/cards/c1/last-run", hdr,
			"{\"marker\":\"w1\",\"run_id\":\"zombie\"}");
	expect_conflict("PUT", "/v1/cards/c1/awaiting-input", hdr,
			"{\"marker\":\"w1\",\"awaiting_input\":true}");
	expect_conflict("PUT", "/v1/cards/c1/gave-up", hdr,
			"{\"marker\":\"w1\",\"gave_up\":{\"reason\":\"zombie\"}}");
	expect_conflict("POST", "/v1/cards/c1/release", NULL, "{\"marker\":\"w1\",\"epoch\":1}");
	ck_assert_int_eq(call("GET", "/v1/cards/c1", HARNESS_TOK_OPERATOR, NULL, NULL, &after), 200);
	ck_assert_str_eq(before, after);
	free(before);
	free(after);

	j = call_json(200, "GET", "/v1/reaper", HARNESS_TOK_BOT, NULL, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(j, "gate")), "on");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "passes")), 1);
	ck_assert(json_is_string(json_object_get(json_object_get(j, "last_pass"), "finished_at")));
	json_decref(j);
}
END_TEST

/* Issue 9, finding 1, over HTTP: w1 claims (lease 1 s), moves to in_progress, creates run R
 * and records it; the reaper promotes R and frees the card; w2 claims; w1 wakes and PATCHes
 * R finished (was 200: now 409, R unchanged); w2 dies before recording a run; the next pass
 * must not file the card done (was: done under run_finished). */
START_TEST(test_zombie_run_write_cannot_file_done)
{
	json_t *j;
	char hdr[64];
	int64_t epoch;

	json_decref(call_json(201, "POST", "/v1/cards", HARNESS_TOK_BOT, NULL,
			      "{\"id\":\"c1\",\"state\":\"ready\"}"));
	j = call_json(200, "POST", "/v1/cards/c1/claim", HARNESS_TOK_WORKER, NULL,
		      "{\"marker\":\"w1\",\"lease_ms\":1000}");
	epoch = json_integer_value(json_object_get(j, "epoch"));
	json_decref(j);
	snprintf(hdr, sizeof(hdr), "If-Match: \"%lld\"", (long long)epoch);
	start_run_r(hdr);
	__atomic_add_fetch(&now_ms, 1001, __ATOMIC_SEQ_CST);
	j = operator_pass();
	ck_assert_int_eq(pass_action(j, "repark"), 1);
	json_decref(j);
	__atomic_add_fetch(&now_ms, 2000, __ATOMIC_SEQ_CST); /* past the return's backoff */
	json_decref(call_json(200, "POST", "/v1/cards/c1/claim", HARNESS_TOK_WORKER2, NULL,
			      "{\"marker\":\"w2\",\"lease_ms\":1000}"));
	/* w1 wakes */
	expect_conflict("PATCH", "/v1/runs/R", NULL, "{\"marker\":\"w1\",\"status\":\"finished\"}");
	expect_conflict("POST", "/v1/runs/R/heartbeat", NULL, "{\"marker\":\"w1\"}");
	j = call_json(200, "GET", "/v1/runs/R", HARNESS_TOK_OPERATOR, NULL, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "failed_resumable");
	json_decref(j);
	/* w2 dies before recording a run; past its lease and stamp window */
	__atomic_add_fetch(&now_ms, 3000, __ATOMIC_SEQ_CST);
	j = operator_pass();
	ck_assert_int_eq(pass_action(j, "complete"), 0);
	json_decref(j);
	j = call_json(200, "GET", "/v1/cards/c1", HARNESS_TOK_OPERATOR, NULL, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "in_progress");
	json_decref(j);
}
END_TEST

/* A worker parked in claim-next (DESIGN §12) on its own connection. */
struct waiter {
	int status;
	char *body;
	volatile int done;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct httpc *c = harness_connect(&H);

	w->status = c ? harness_call(c, "POST", "/v1/boards/default/claim-next",
				     HARNESS_TOK_WORKER2, NULL,
				     "{\"marker\":\"w2\",\"wait_ms\":20000}", &w->body)
		      : 0;
	httpc_close(c);
	w->done = 1;
	return NULL;
}

/* The reaper reparks a dead worker's card (its run promoted failed_resumable), counting an
 * attempt with a backoff (DESIGN §17): a worker waiting in claim-next gets it once the backoff
 * has passed, not at the end of its wait. */
START_TEST(test_repark_wakes_claim_next)
{
	struct waiter w = {0};
	pthread_t th;
	json_t *j;
	char hdr[64];
	int64_t epoch;

	json_decref(call_json(201, "POST", "/v1/cards", HARNESS_TOK_BOT, NULL,
			      "{\"id\":\"c1\",\"state\":\"ready\"}"));
	j = call_json(200, "POST", "/v1/boards/default/claim-next", HARNESS_TOK_WORKER, NULL,
		      "{\"marker\":\"w1\",\"lease_ms\":1000}");
	epoch = json_integer_value(json_object_get(json_object_get(j, "token"), "epoch"));
	json_decref(j);
	snprintf(hdr, sizeof(hdr), "If-Match: \"%lld\"", (long long)epoch);
	start_run_r(hdr);
	ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
	usleep(300 * 1000);
	ck_assert_msg(!w.done, "claim-next answered with nothing free: %d %s", w.status,
		      w.body ? w.body : "");
	__atomic_add_fetch(&now_ms, 1001, __ATOMIC_SEQ_CST);
	j = operator_pass();
	ck_assert_int_eq(pass_action(j, "repark"), 1);
	json_decref(j);
	j = call_json(200, "GET", "/v1/cards/c1", HARNESS_TOK_BOT, NULL, NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "attempts")), 1);
	ck_assert(json_is_string(json_object_get(j, "not_before")));
	json_decref(j);
	/* the backoff (1 s +-10 %) passes on the store's clock */
	__atomic_add_fetch(&now_ms, 2000, __ATOMIC_SEQ_CST);
	pthread_join(th, NULL);
	ck_assert_msg(w.status == 200, "woken: %d %s", w.status, w.body ? w.body : "");
	j = json_loads(w.body, 0, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "card"), "id")),
			 "c1");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "card"), "state")),
			 "in_progress"); /* reparked in place: in_progress is eligible */
	ck_assert_int_gt(json_integer_value(json_object_get(json_object_get(j, "token"), "epoch")),
			 epoch);
	json_decref(j);
	free(w.body);
}
END_TEST

static Suite *reaper_http_suite(void)
{
	Suite *s = suite_create("reaper-http");
	TCase *tc = tcase_create("zombie");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_zombie_refused_over_http);
	tcase_add_test(tc, test_zombie_run_write_cannot_file_done);
	tcase_add_test(tc, test_repark_wakes_claim_next);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(reaper_http_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
