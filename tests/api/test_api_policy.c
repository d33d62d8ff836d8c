/* The HTTP side of the dispatch policy (DESIGN §17, issue 27): a board's column limits,
 * max_claims and retry policy (PUT's checks, GET's read-only counts), a card's not_before on
 * create and PATCH, claims refused with capacity_reached / not_yet and their detail,
 * claim-next skipping a full column, long-polls woken by a release, by a schedule passing and
 * by a schedule cleared, the retry release and its exhaustion, and create_card's not_before
 * over MCP. The rules themselves are the twins' (tests/store/conformance_policy.c); this
 * checks what the routes make of them. */
#include "tests/api/api_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POL "/v1/boards/pol"
#define POL_NEXT "/v1/boards/pol/claim-next"

/* The body of board "pol": ready (eligible; `ready` spliced into its object, e.g.
 * ",\"limit\":1"), in_progress (eligible, the running column), waiting_deps, done (`done`
 * spliced likewise) and blocked; `extra` is spliced into the board object. */
static void pol_body(char *buf, size_t n, const char *ready, const char *done, const char *extra)
{
	snprintf(buf, n,
		 "{\"columns\":[{\"name\":\"ready\",\"terminal\":false,\"eligible\":true%s},"
		 "{\"name\":\"in_progress\",\"terminal\":false,\"eligible\":true},"
		 "{\"name\":\"waiting_deps\",\"terminal\":false,\"eligible\":false},"
		 "{\"name\":\"done\",\"terminal\":true,\"eligible\":false%s},"
		 "{\"name\":\"blocked\",\"terminal\":true,\"eligible\":false}],"
		 "\"running\":\"in_progress\",\"completed\":\"done\",\"failed\":\"blocked\","
		 "\"waiting\":\"waiting_deps\"%s}",
		 ready, done, extra);
}

/* Board "pol" with ready's limit 1; `extra` spliced into the board object. */
static void pol_board(const char *extra)
{
	char body[1024];

	pol_body(body, sizeof body, ",\"limit\":1", "", extra);
	json_decref(t_must(200, "PUT", POL, OP, NULL, body));
}

/* A card on board pol in `state` with that priority and extra fields (",..." or ""). */
static void pol_card(const char *id, const char *state, int priority, const char *extra)
{
	char body[512];

	snprintf(body, sizeof body,
		 "{\"id\":\"%s\",\"board\":\"pol\",\"state\":\"%s\",\"priority\":%d%s}", id, state,
		 priority, extra);
	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, body));
}

static json_t *col_of(const json_t *board, const char *name)
{
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(board, "columns"), i, c)
		if (strcmp(t_str(c, "name"), name) == 0)
			return c;
	ck_abort_msg("no column %s", name);
	return NULL;
}

/* The store clock's time `ms_ahead` from now, as RFC 3339. */
static const char *store_time_in(int64_t ms_ahead, char *buf)
{
	return core_time_format(store_now(T.st) + ms_ahead, buf);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *claim_body(const char *id, const char *marker, int want)
{
	char path[128], body[128];

	snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"lease_ms\":60000}", marker);
	return t_must(want, "POST", path, W, NULL, body);
}

START_TEST(board_policy_config_and_counts)
{
	json_t *b, *r;
	char *text;

	pol_board(",\"max_claims\":5,\"retry\":{\"max_attempts\":3,\"backoff_ms\":500}");
	b = t_must(200, "GET", POL, BOT, NULL, NULL);
	ck_assert_int_eq(t_int(col_of(b, "ready"), "limit"), 1);
	ck_assert_int_eq(t_int(col_of(b, "ready"), "claimed"), 0);
	ck_assert_ptr_null(json_object_get(col_of(b, "in_progress"), "limit")); /* none */
	ck_assert_int_eq(t_int(col_of(b, "in_progress"), "claimed"), 0);
	ck_assert_int_eq(t_int(b, "max_claims"), 5);
	ck_assert_int_eq(t_int(b, "claimed"), 0);
	/* the config as given; the policy in force fills what it left out */
	r = json_object_get(b, "retry");
	ck_assert_int_eq(t_int(r, "max_attempts"), 3);
	ck_assert_int_eq(t_int(r, "backoff_ms"), 500);
	r = json_object_get(b, "retry_effective");
	ck_assert_int_eq(t_int(r, "max_attempts"), 3);
	ck_assert_int_eq(t_int(r, "backoff_ms"), 500);
	ck_assert_int_eq(t_int(r, "max_backoff_ms"), CORE_RETRY_MAX_BACKOFF_MS);
	/* What GET answered goes back in a PUT unchanged: the counts are read-only, ignored. */
	text = json_dumps(b, 0);
	json_decref(t_must(200, "PUT", POL, OP, NULL, text));
	free(text);
	json_decref(b);

	/* Two cards taken from ready and in_progress: each column counts its own, by claim.from
	 * (a move of a claimed card does not change it). */
	pol_card("a", "ready", 0, "");
	pol_card("b", "in_progress", 0, "");
	ck_assert_int_eq(t_claim("a", "w-a"), 1);
	ck_assert_int_eq(t_claim("b", "w-b"), 1);
	ck_assert_int_eq(t_owned_state(W, "a", "w-a", 1, "in_progress"), 200);
	b = t_must(200, "GET", POL, BOT, NULL, NULL);
	ck_assert_int_eq(t_int(col_of(b, "ready"), "claimed"), 1);
	ck_assert_int_eq(t_int(col_of(b, "in_progress"), "claimed"), 1);
	ck_assert_int_eq(t_int(b, "claimed"), 2);
	json_decref(b);
	/* The list serves the same counts; the column rename's board too. */
	b = t_must(200, "GET", "/v1/boards", BOT, NULL, NULL);
	{
		size_t i;
		json_t *x;
		bool seen = false;

		json_array_foreach(json_object_get(b, "boards"), i, x) {
			ck_assert_ptr_nonnull(json_object_get(x, "retry_effective"));
			if (strcmp(t_str(x, "name"), "pol") != 0)
				continue;
			seen = true;
			ck_assert_int_eq(t_int(x, "claimed"), 2);
			ck_assert_int_eq(t_int(col_of(x, "ready"), "claimed"), 1);
		}
		ck_assert(seen);
	}
	json_decref(b);

	/* A board without a retry policy: none configured, the server's defaults in force. */
	b = t_must(200, "GET", "/v1/boards/default", BOT, NULL, NULL);
	ck_assert_ptr_null(json_object_get(b, "retry"));
	ck_assert_ptr_null(json_object_get(b, "max_claims"));
	r = json_object_get(b, "retry_effective");
	ck_assert_int_eq(t_int(r, "max_attempts"), CORE_RETRY_MAX_ATTEMPTS);
	ck_assert_int_eq(t_int(r, "backoff_ms"), CORE_RETRY_BACKOFF_MS);
	ck_assert_int_eq(t_int(b, "claimed"), 0);
	json_decref(b);
}
END_TEST

/* A retry policy without max_attempts takes the server's default for it (--run-ceiling), as
 * a board without one does; it took the built-in 20, and a card went on past the ceiling. */
START_TEST(board_retry_defaults_to_the_run_ceiling)
{
	json_t *b;

	store_retry_default_set(T.st, 3);
	pol_board(",\"retry\":{\"backoff_ms\":10}");
	b = t_must(200, "GET", POL, BOT, NULL, NULL);
	ck_assert_int_eq(t_int(json_object_get(b, "retry"), "max_attempts"), 3);
	ck_assert_int_eq(t_int(json_object_get(b, "retry"), "backoff_ms"), 10);
	ck_assert_int_eq(t_int(json_object_get(b, "retry_effective"), "max_attempts"), 3);
	json_decref(b);
}
END_TEST

START_TEST(board_policy_refusals)
{
	char *before;
	static const struct {
		const char *extra;
		int status;
		const char *code, *needle;
	} cases[] = {
		/* a wrong type: 400 */
		{",\"max_claims\":\"5\"", 400, "bad_request", "\"max_claims\" must be an integer"},
		{",\"max_claims\":1.5", 400, "bad_request", "\"max_claims\" must be an integer"},
		{",\"retry\":3", 400, "bad_request", "\"retry\" must be an object"},
		{",\"retry\":{\"max_attempts\":\"3\"}", 400, "bad_request",
		 "\"retry.max_attempts\" must be an integer"},
		{",\"retry\":{\"backoff_ms\":\"5\"}", 400, "bad_request",
		 "\"retry.backoff_ms\" must be an integer"},
		{",\"retry\":{\"attempts\":3}", 400, "bad_request", "retry.attempts"},
		/* well-formed, not a policy: 422 naming the value */
		{",\"max_claims\":0", 422, "invalid_board", "max_claims"},
		{",\"max_claims\":1000001", 422, "invalid_board", "max_claims"},
		{",\"retry\":{\"max_attempts\":0}", 422, "invalid_board", "retry.max_attempts"},
		{",\"retry\":{\"backoff_ms\":2000,\"max_backoff_ms\":1000}", 422, "invalid_board",
		 "retry.max_backoff_ms"},
	};
	static const struct {
		const char *ready, *done;
		int status;
		const char *code, *needle;
	} cols[] = {
		{",\"limit\":\"2\"", "", 400, "bad_request", "limit"},
		{",\"limit\":0", "", 422, "invalid_board", "column ready: limit must be within"},
		{",\"limit\":1000001", "", 422, "invalid_board", "column ready: limit"},
		{"", ",\"limit\":2", 422, "invalid_board", "column done is terminal"},
		{",\"weight\":2", "", 400, "bad_request", "columns[].weight"},
	};
	size_t i;

	pol_board("");
	before = strdup(T_BODY);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char body[1024];

		pol_body(body, sizeof body, "", "", cases[i].extra);
		t_problem_says(cases[i].status, cases[i].code, cases[i].needle, "PUT", POL, OP, NULL,
			       body);
	}
	/* a column's limit: a wrong type, out of range, on a terminal column; an unknown
	 * member of a column */
	for (i = 0; i < sizeof cols / sizeof cols[0]; i++) {
		char body[1024];

		pol_body(body, sizeof body, cols[i].ready, cols[i].done, "");
		t_problem_says(cols[i].status, cols[i].code, cols[i].needle, "PUT", POL, OP, NULL,
			       body);
	}
	/* None of them changed the board. */
	json_decref(t_must(200, "GET", POL, OP, NULL, NULL));
	ck_assert_str_eq(T_BODY, before);
	free(before);
}
END_TEST

START_TEST(capacity_reached_and_claim_next_skips_a_full_column)
{
	json_t *j;

	pol_board("");
	pol_card("r1", "ready", 3, "");
	pol_card("r2", "ready", 2, "");
	pol_card("p1", "in_progress", 1, "");
	ck_assert_int_eq(t_claim("r1", "w1"), 1);
	/* ready's one slot is taken: a fresh claim of another of its cards is refused, and
	 * says which column and its limit; a re-claim by the holder is no new claim. */
	t_problem_says(409, "capacity_reached", "column ready of board pol is at its limit of 1",
		       "POST", "/v1/cards/r2/claim", W, NULL, "{\"marker\":\"w2\"}");
	json_decref(claim_body("r1", "w1", 200));
	j = t_must(200, "GET", "/v1/cards/r2", OP, NULL, NULL);
	ck_assert(json_is_null(json_object_get(j, "claim"))); /* the refusal changed nothing */
	json_decref(j);
	/* claim-next passes over r2 (ready is full) and takes p1 from in_progress. */
	j = t_must(200, "POST", POL_NEXT, W, NULL, "{\"marker\":\"n1\"}");
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), "p1");
	ck_assert_str_eq(t_str(json_object_get(json_object_get(j, "card"), "claim"), "from"),
			 "in_progress");
	json_decref(j);
	/* Nothing else has room: 204. r1's claim ends (done) and frees the slot: r2 is next. */
	json_decref(t_must(204, "POST", POL_NEXT, W, NULL, "{\"marker\":\"n2\"}"));
	json_decref(t_must(200, "PATCH", "/v1/cards/r1/state", W, "If-Match: \"1\"",
			   "{\"marker\":\"w1\",\"to\":\"done\",\"release\":true}"));
	j = t_must(200, "POST", POL_NEXT, W, NULL, "{\"marker\":\"n3\"}");
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), "r2");
	json_decref(j);

	/* The board's max_claims: two claims held (p1, r2); with max_claims 2 the third is
	 * refused naming the board, and claim-next answers nothing. */
	pol_board(",\"max_claims\":2");
	pol_card("p2", "in_progress", 0, "");
	t_problem_says(409, "capacity_reached", "board pol is at its max_claims of 2", "POST",
		       "/v1/cards/p2/claim", W, NULL, "{\"marker\":\"w3\"}");
	json_decref(t_must(204, "POST", POL_NEXT, W, NULL, "{\"marker\":\"n4\"}"));
	/* A full board waits out wait_ms (nothing to wake it), then 204. */
	{
		int64_t t0 = mono_ms();

		json_decref(t_must(204, "POST", POL_NEXT, W, NULL,
				   "{\"marker\":\"n5\",\"wait_ms\":300}"));
		ck_assert_int_ge(mono_ms() - t0, 290);
	}
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

	w->status = c ? harness_call(c, "POST", POL_NEXT, W, NULL, w->body, &w->resp) : 0;
	httpc_close(c);
	w->done = 1;
	return NULL;
}

START_TEST(capacity_full_long_poll_woken_by_a_release)
{
	struct waiter w = {.body = "{\"marker\":\"n\",\"columns\":[\"ready\"],\"wait_ms\":5000}"};
	struct timespec ts = {0, 300 * 1000000L};
	pthread_t th;
	json_t *j;
	int64_t t0;

	pol_board("");
	pol_card("r1", "ready", 1, "");
	pol_card("r2", "ready", 0, "");
	ck_assert_int_eq(t_claim("r1", "w1"), 1);
	/* A full column waits out its wait_ms, then 204. */
	t0 = mono_ms();
	json_decref(t_must(204, "POST", POL_NEXT, W, NULL,
			   "{\"marker\":\"n\",\"columns\":[\"ready\"],\"wait_ms\":300}"));
	ck_assert_int_ge(mono_ms() - t0, 290);
	/* A waiter parked on the full column is woken when r1's claim ends (the work done):
	 * the slot is free again and r2 is its card. */
	ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
	nanosleep(&ts, NULL);
	ck_assert_msg(!w.done, "the waiter answered %d before the slot was freed: %s", w.status,
		      w.resp ? w.resp : "");
	json_decref(t_must(200, "PATCH", "/v1/cards/r1/state", W, "If-Match: \"1\"",
			   "{\"marker\":\"w1\",\"to\":\"done\",\"release\":true}"));
	pthread_join(th, NULL);
	ck_assert_msg(w.status == 200, "waiter: %d %s", w.status, w.resp ? w.resp : "");
	j = json_loads(w.resp, 0, NULL);
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), "r2");
	json_decref(j);
	free(w.resp);
}
END_TEST

START_TEST(not_before_on_create_patch_and_claim)
{
	char t[CORE_TIME_BUF], body[256];
	json_t *j;
	int64_t at;

	pol_board("");
	/* malformed: 400 and no card */
	t_problem_says(400, "bad_request", "not_before", "POST", "/v1/cards", BOT, NULL,
		       "{\"id\":\"x\",\"board\":\"pol\",\"not_before\":\"tomorrow\"}");
	t_problem_says(400, "bad_request", "not_before", "POST", "/v1/cards", BOT, NULL,
		       "{\"id\":\"x\",\"board\":\"pol\",\"not_before\":1765000000000}");
	/* a day its month lacks */
	t_problem_says(400, "bad_request", "not_before", "POST", "/v1/cards", BOT, NULL,
		       "{\"id\":\"x\",\"board\":\"pol\",\"not_before\":\"2026-02-31T00:00:00Z\"}");
	json_decref(t_must(404, "GET", "/v1/cards/x", OP, NULL, NULL));

	store_time_in(60000, t);
	snprintf(body, sizeof body, ",\"not_before\":\"%s\"", t);
	pol_card("s", "ready", 0, body);
	j = t_must(200, "GET", "/v1/cards/s", OP, NULL, NULL);
	ck_assert_str_eq(t_str(j, "not_before"), t);
	ck_assert_int_eq(t_int(j, "attempts"), 0);
	json_decref(j);
	/* Before it: not_yet naming the time; claim-next skips the card. */
	t_problem_says(409, "not_yet", t, "POST", "/v1/cards/s/claim", W, NULL,
		       "{\"marker\":\"w\"}");
	json_decref(t_must(204, "POST", POL_NEXT, W, NULL, "{\"marker\":\"n\"}"));
	/* PATCH moves it (an offset is the same instant), then null clears it. */
	at = store_now(T.st) + 120000;
	{
		char off[64];

		/* the same instant written at +01:00 */
		core_time_format(at + 3600000, t);
		snprintf(off, sizeof off, "%.*s+01:00", (int)strlen(t) - 1, t);
		snprintf(body, sizeof body, "{\"not_before\":\"%s\"}", off);
	}
	j = t_must(200, "PATCH", "/v1/cards/s", BOT, NULL, body);
	ck_assert_str_eq(t_str(j, "not_before"), core_time_format(at, t));
	json_decref(j);
	t_problem_says(400, "bad_request", "not_before", "PATCH", "/v1/cards/s", BOT, NULL,
		       "{\"not_before\":\"2026-13-01T00:00:00Z\"}");
	t_problem_says(400, "bad_request", "not_before", "PATCH", "/v1/cards/s", BOT, NULL,
		       "{\"not_before\":true}");
	j = t_must(200, "GET", "/v1/cards/s", OP, NULL, NULL);
	ck_assert_str_eq(t_str(j, "not_before"), t); /* the refusals changed nothing */
	json_decref(j);
	j = t_must(200, "PATCH", "/v1/cards/s", BOT, NULL, "{\"not_before\":null}");
	ck_assert(json_is_null(json_object_get(j, "not_before")));
	json_decref(j);
	/* Claimable now. */
	j = t_must(200, "POST", POL_NEXT, W, NULL, "{\"marker\":\"n\"}");
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), "s");
	json_decref(j);
	/* A time before 1970 is past: no schedule, on create and on PATCH (the FS store of
	 * 8cc620b kept it, then refused to open: test_store_fs_policy early_schedule_loads).
	 * In in_progress: ready's limit of 1 is s's. One an offset carries past 9999 is held
	 * at its last instant. */
	j = t_must(201, "POST", "/v1/cards", BOT, NULL,
		   "{\"id\":\"old\",\"board\":\"pol\",\"state\":\"in_progress\","
		   "\"not_before\":\"1969-12-31T23:59:59Z\"}");
	ck_assert(json_is_null(json_object_get(j, "not_before")));
	json_decref(j);
	j = t_must(200, "POST", POL_NEXT, W, NULL, "{\"marker\":\"o\"}");
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), "old");
	json_decref(j);
	pol_card("far", "ready", 0, ",\"not_before\":\"9999-12-31T23:59:59-23:59\"");
	j = t_must(200, "GET", "/v1/cards/far", OP, NULL, NULL);
	ck_assert_str_eq(t_str(j, "not_before"), "9999-12-31T23:59:59.999Z");
	json_decref(j);
	j = t_must(200, "PATCH", "/v1/cards/far", BOT, NULL,
		   "{\"not_before\":\"1900-01-01T00:00:00+01:00\"}");
	ck_assert(json_is_null(json_object_get(j, "not_before")));
	json_decref(j);
}
END_TEST

START_TEST(long_poll_woken_by_a_schedule)
{
	char t[CORE_TIME_BUF], body[128];
	json_t *j;
	int64_t t0, took;

	pol_board("");
	snprintf(body, sizeof body, ",\"not_before\":\"%s\"", store_time_in(300, t));
	pol_card("soon", "ready", 0, body);
	/* No event happens when a schedule passes: the waiter is woken at the store's wake_at,
	 * and answered with the card long before its wait ends. */
	t0 = mono_ms();
	j = t_must(200, "POST", POL_NEXT, W, NULL, "{\"marker\":\"n\",\"wait_ms\":5000}");
	took = mono_ms() - t0;
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), "soon");
	json_decref(j);
	ck_assert_msg(took < 5000, "answered after %lld ms: the whole wait", (long long)took);
	ck_assert_int_ge(took, 200); /* it did wait for the schedule */
}
END_TEST

/* Clearing a schedule is an event (card_updated): a waiter parked on the scheduled card is
 * woken by it at once, not at the old not_before. */
START_TEST(long_poll_woken_by_clearing_a_schedule)
{
	struct waiter w = {.body = "{\"marker\":\"n\",\"wait_ms\":5000}"};
	struct timespec ts = {0, 300 * 1000000L};
	char t[CORE_TIME_BUF], body[128];
	pthread_t th;
	json_t *j;

	pol_board("");
	snprintf(body, sizeof body, ",\"not_before\":\"%s\"", store_time_in(3600000, t));
	pol_card("later", "ready", 0, body);
	ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
	nanosleep(&ts, NULL);
	ck_assert_msg(!w.done, "the waiter answered %d before the schedule was cleared: %s",
		      w.status, w.resp ? w.resp : "");
	json_decref(t_must(200, "PATCH", "/v1/cards/later", BOT, NULL, "{\"not_before\":null}"));
	pthread_join(th, NULL);
	ck_assert_msg(w.status == 200, "waiter: %d %s", w.status, w.resp ? w.resp : "");
	j = json_loads(w.resp, 0, NULL);
	ck_assert_str_eq(t_str(json_object_get(j, "card"), "id"), "later");
	json_decref(j);
	free(w.resp);
}
END_TEST

START_TEST(retry_release_counts_an_attempt)
{
	json_t *j;
	int64_t nb;

	pol_board("");
	pol_card("j", "in_progress", 0, "");
	ck_assert_int_eq(t_claim("j", "w"), 1);
	/* retry must be a boolean */
	t_problem_says(400, "bad_request", "retry", "POST", "/v1/cards/j/release", W, NULL,
		       "{\"marker\":\"w\",\"epoch\":1,\"retry\":\"yes\"}");
	j = t_must(200, "POST", "/v1/cards/j/release", W, NULL,
		   "{\"marker\":\"w\",\"epoch\":1,\"retry\":true}");
	ck_assert(json_is_null(json_object_get(j, "claim")));
	ck_assert_str_eq(t_str(j, "state"), "in_progress");
	ck_assert_int_eq(t_int(j, "attempts"), 1);
	ck_assert_ptr_nonnull(t_str(j, "not_before"));
	ck_assert(core_time_parse(t_str(j, "not_before"), &nb));
	/* the first backoff: 1000 ms +-10 % (the defaults) */
	ck_assert_int_gt(nb, store_now(T.st));
	json_decref(j);
	/* Scheduled by the retry: not claimable yet. */
	t_problem(409, "not_yet", "POST", "/v1/cards/j/claim", W, NULL, "{\"marker\":\"w2\"}");
	/* A plain release counts nothing. */
	json_decref(t_must(200, "PATCH", "/v1/cards/j", BOT, NULL, "{\"not_before\":null}"));
	ck_assert_int_eq(t_claim("j", "w3"), 2);
	j = t_must(200, "POST", "/v1/cards/j/release", W, NULL, "{\"marker\":\"w3\",\"epoch\":2}");
	ck_assert_int_eq(t_int(j, "attempts"), 1);
	ck_assert(json_is_null(json_object_get(j, "not_before")));
	json_decref(j);
}
END_TEST

START_TEST(retry_exhausted_files_into_failed)
{
	json_t *j, *g;

	pol_board(",\"retry\":{\"max_attempts\":2,\"backoff_ms\":1,\"max_backoff_ms\":1}");
	pol_card("k", "ready", 0, "");
	/* The owned state write with release and retry: moved, released, one attempt. */
	ck_assert_int_eq(t_claim("k", "w"), 1);
	t_problem_says(400, "bad_request", "release", "PATCH", "/v1/cards/k/state", W,
		       "If-Match: \"1\"", "{\"marker\":\"w\",\"to\":\"in_progress\",\"retry\":true}");
	t_problem_says(400, "bad_request", "owned form", "PATCH", "/v1/cards/k/state", OP, NULL,
		       "{\"to\":\"in_progress\",\"retry\":true}");
	j = t_must(200, "PATCH", "/v1/cards/k/state", W, "If-Match: \"1\"",
		   "{\"marker\":\"w\",\"to\":\"in_progress\",\"release\":true,\"retry\":true}");
	ck_assert_str_eq(t_str(j, "state"), "in_progress");
	ck_assert(json_is_null(json_object_get(j, "claim")));
	ck_assert_int_eq(t_int(j, "attempts"), 1);
	ck_assert_ptr_nonnull(t_str(j, "not_before"));
	json_decref(j);
	/* The second attempt reaches max_attempts: filed into the failed column instead. */
	{
		struct timespec ts = {0, 20 * 1000000L}; /* past the 1 ms backoff (+10 %) */

		nanosleep(&ts, NULL);
	}
	ck_assert_int_eq(t_claim("k", "w"), 2);
	j = t_must(200, "POST", "/v1/cards/k/release", W, NULL,
		   "{\"marker\":\"w\",\"epoch\":2,\"retry\":true}");
	ck_assert_str_eq(t_str(j, "state"), "blocked");
	ck_assert(json_is_null(json_object_get(j, "claim")));
	ck_assert_int_eq(t_int(j, "attempts"), 2);
	g = json_object_get(j, "gave_up");
	ck_assert_str_eq(t_str(g, "reason"), "attempts_exhausted");
	ck_assert_str_eq(t_str(g, "state"), "blocked");
	json_decref(j);
	/* An operator's reopen starts it afresh. */
	j = t_must(200, "POST", "/v1/cards/k/reopen", OP, NULL, "{\"to\":\"ready\"}");
	ck_assert_int_eq(t_int(j, "attempts"), 0);
	json_decref(j);
}
END_TEST

START_TEST(mcp_create_card_not_before)
{
	char t[CORE_TIME_BUF], body[512];
	json_t *j, *res;

	store_time_in(60000, t);
	snprintf(body, sizeof body,
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
		 "\"create_card\",\"arguments\":{\"title\":\"later\",\"not_before\":\"%s\"}}}",
		 t);
	j = t_must(200, "POST", "/mcp", BOT, NULL, body);
	res = json_object_get(j, "result");
	ck_assert(!json_is_true(json_object_get(res, "isError")));
	ck_assert_str_eq(t_str(json_object_get(res, "structuredContent"), "not_before"), t);
	json_decref(j);
	j = t_must(200, "POST", "/mcp", BOT, NULL,
		   "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
		   "\"create_card\",\"arguments\":{\"title\":\"x\",\"not_before\":\"soon\"}}}");
	res = json_object_get(j, "result");
	ck_assert(json_is_true(json_object_get(res, "isError")));
	ck_assert_str_eq(t_str(json_object_get(res, "structuredContent"), "code"), "bad_request");
	ck_assert_ptr_nonnull(strstr(t_str(json_object_get(res, "structuredContent"), "detail"),
				     "not_before"));
	json_decref(j);
	/* tools/list shows the argument */
	j = t_must(200, "POST", "/mcp", BOT, NULL,
		   "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "\"not_before\""));
	json_decref(j);
}
END_TEST

TCase *api_tcase_policy(void)
{
	TCase *tc = tcase_create("policy");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, board_policy_config_and_counts);
	tcase_add_test(tc, board_policy_refusals);
	tcase_add_test(tc, board_retry_defaults_to_the_run_ceiling);
	tcase_add_test(tc, capacity_reached_and_claim_next_skips_a_full_column);
	tcase_add_test(tc, capacity_full_long_poll_woken_by_a_release);
	tcase_add_test(tc, not_before_on_create_patch_and_claim);
	tcase_add_test(tc, long_poll_woken_by_a_schedule);
	tcase_add_test(tc, long_poll_woken_by_clearing_a_schedule);
	tcase_add_test(tc, retry_release_counts_an_attempt);
	tcase_add_test(tc, retry_exhausted_files_into_failed);
	tcase_add_test(tc, mcp_create_card_not_before);
	return tc;
}
