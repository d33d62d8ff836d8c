/* The api suite against the real listening server: helpers, a card's whole life, every
 * error code of DESIGN §8, lists, runs, boards, meta routes. */
#include "tests/api/api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct harness T;
struct httpc *TC;
char *T_HDRS;
char *T_BODY;

void t_setup_with(const struct harness_options *o)
{
	ck_assert_msg(harness_start(&T, o), "harness_start");
	TC = harness_connect(&T);
	ck_assert_ptr_nonnull(TC);
}

void t_setup(void)
{
	t_setup_with(NULL);
}

void t_setup_small_body(void)
{
	struct harness_options o = {.max_body = 4096};

	t_setup_with(&o);
}

void t_setup_short_lease(void)
{
	struct harness_options o = {.lease_min_ms = 1};

	t_setup_with(&o);
}

void t_setup_one_thread(void)
{
	struct harness_options o = {.threads = 1};

	t_setup_with(&o);
}

void t_teardown(void)
{
	httpc_close(TC);
	TC = NULL;
	free(T_HDRS);
	free(T_BODY);
	T_HDRS = T_BODY = NULL;
	harness_stop(&T);
}

int t_call(const char *method, const char *path, const char *tok, const char *hdr,
	   const char *body, json_t **out)
{
	int st;

	free(T_HDRS);
	free(T_BODY);
	T_HDRS = T_BODY = NULL;
	st = harness_call_h(TC, method, path, tok, hdr, body, &T_HDRS, &T_BODY);
	if (out)
		*out = T_BODY ? json_loads(T_BODY, 0, NULL) : NULL;
	return st;
}

json_t *t_must(int want, const char *method, const char *path, const char *tok, const char *hdr,
	       const char *body)
{
	json_t *j = NULL;
	int st = t_call(method, path, tok, hdr, body, &j);

	ck_assert_msg(st == want, "%s %s: want %d, got %d: %s", method, path, want, st,
		      T_BODY ? T_BODY : "");
	return j;
}

void t_problem_says(int want, const char *code, const char *needle, const char *method,
		    const char *path, const char *tok, const char *hdr, const char *body)
{
	json_t *j = t_must(want, method, path, tok, hdr, body);
	const char *d = t_str(j, "detail");

	ck_assert_str_eq(t_str(j, "code"), code);
	ck_assert_msg(d && strstr(d, needle), "detail \"%s\" lacks \"%s\"", d ? d : "", needle);
	json_decref(j);
}

void t_problem(int want, const char *code, const char *method, const char *path, const char *tok,
	       const char *hdr, const char *body)
{
	json_t *j = t_must(want, method, path, tok, hdr, body);
	char *ct = httpc_header(T_HDRS, "Content-Type");
	char type[96];

	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(ct, "application/problem+json");
	ck_assert_str_eq(t_str(j, "code"), code);
	ck_assert_int_eq(t_int(j, "status"), want);
	snprintf(type, sizeof type, "/problems/%s", code);
	ck_assert_str_eq(t_str(j, "type"), type);
	ck_assert_ptr_nonnull(t_str(j, "title"));
	ck_assert_ptr_nonnull(t_str(j, "detail"));
	free(ct);
	json_decref(j);
}

const char *t_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

long long t_int(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	ck_assert_msg(json_is_integer(v), "field %s is not an integer", key);
	return json_integer_value(v);
}

char *t_card_raw(const char *id)
{
	char path[300];

	snprintf(path, sizeof path, "/v1/cards/%s", id);
	json_decref(t_must(200, "GET", path, OP, NULL, NULL));
	return strdup(T_BODY);
}

char *t_card_new(const char *body)
{
	json_t *j = t_must(201, "POST", "/v1/cards", BOT, NULL, body);
	char *id = strdup(t_str(j, "id"));

	json_decref(j);
	return id;
}

long long t_claim(const char *id, const char *marker)
{
	char path[300], body[300];
	json_t *j;
	long long e;

	snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"lease_ms\":60000}", marker);
	j = t_must(200, "POST", path, W, NULL, body);
	e = t_int(j, "epoch");
	json_decref(j);
	return e;
}

int t_owned_state(const char *tok, const char *id, const char *marker, long long epoch,
		  const char *to)
{
	char path[300], body[300], hdr[64];

	snprintf(path, sizeof path, "/v1/cards/%s/state", id);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"to\":\"%s\"}", marker, to);
	snprintf(hdr, sizeof hdr, "If-Match: \"%lld\"", epoch);
	return t_call("PATCH", path, tok, hdr, body, NULL);
}

void t_board_new(const char *name)
{
	json_t *b = t_must(200, "GET", "/v1/boards/default", OP, NULL, NULL);
	char path[128], *text;

	json_object_set_new(b, "name", json_string(name));
	text = json_dumps(b, 0);
	snprintf(path, sizeof path, "/v1/boards/%s", name);
	json_decref(t_must(200, "PUT", path, OP, NULL, text));
	free(text);
	json_decref(b);
}

/* ---- a card's whole life ---- */

static bool events_have(json_t *events, const char *type, const char *key, const char *val)
{
	size_t i;
	json_t *e;

	json_array_foreach(events, i, e) {
		json_t *p = json_object_get(e, "payload");

		if (strcmp(t_str(e, "type"), type) != 0)
			continue;
		if (!key)
			return true;
		if (json_is_true(json_object_get(p, key)) ||
		    (val && json_string_value(json_object_get(p, key)) &&
		     strcmp(json_string_value(json_object_get(p, key)), val) == 0))
			return true;
	}
	return false;
}

START_TEST(card_life)
{
	json_t *j, *ev;
	char *id, *loc, path[256], hdr[64];
	long long epoch;

	/* A field the route does not know is refused, naming it, and nothing is created. */
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL,
		  "{\"title\":\"write docs\",\"labels\":[\"docs\",\"p1\"],\"unknown\":42}");
	ck_assert_ptr_nonnull(strstr(T_BODY, "unknown field \\\"unknown\\\""));
	j = t_must(201, "POST", "/v1/cards", BOT, NULL,
		   "{\"title\":\"write docs\",\"labels\":[\"docs\",\"p1\"]}");
	id = strdup(t_str(j, "id"));
	loc = httpc_header(T_HDRS, "Location");
	snprintf(path, sizeof path, "/v1/cards/%s", id);
	ck_assert_str_eq(loc, path);
	ck_assert_str_eq(t_str(j, "state"), "inbox");
	ck_assert_str_eq(t_str(j, "board"), "default");
	ck_assert(json_is_null(json_object_get(j, "claim")));
	free(loc);
	json_decref(j);

	/* bot moves it to ready (SetStateFrom) */
	snprintf(path, sizeof path, "/v1/cards/%s/state", id);
	json_decref(t_must(200, "PATCH", path, BOT, NULL, "{\"from\":\"inbox\",\"to\":\"ready\"}"));

	/* worker claims: fresh acquisition */
	snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
	j = t_must(200, "POST", path, W, NULL, "{\"marker\":\"w-1\",\"lease_ms\":30000}");
	ck_assert_str_eq(t_str(j, "marker"), "w-1");
	ck_assert(json_is_true(json_object_get(j, "fresh")));
	ck_assert_int_eq(t_int(j, "lease_ms"), 30000);
	ck_assert_int_eq(t_int(j, "renew_after_ms"), 10000);
	ck_assert_ptr_nonnull(t_str(j, "claimed_at"));
	ck_assert_ptr_nonnull(t_str(j, "lease_until"));
	epoch = t_int(j, "epoch");
	ck_assert_int_ge(epoch, 1);
	json_decref(j);
	/* idempotent re-claim: same epoch, not fresh */
	j = t_must(200, "POST", path, W, NULL, "{\"marker\":\"w-1\"}");
	ck_assert(json_is_false(json_object_get(j, "fresh")));
	ck_assert_int_eq(t_int(j, "epoch"), epoch);
	ck_assert_int_eq(t_int(j, "lease_ms"), 900000);
	json_decref(j);

	/* renew */
	snprintf(path, sizeof path, "/v1/cards/%s/renew", id);
	{
		char body[128];

		snprintf(body, sizeof body, "{\"marker\":\"w-1\",\"epoch\":%lld,\"lease_ms\":20000}",
			 epoch);
		j = t_must(200, "POST", path, W, NULL, body);
		ck_assert_str_eq(t_str(j, "marker"), "w-1");
		ck_assert_int_eq(t_int(j, "epoch"), epoch);
		ck_assert_ptr_nonnull(t_str(j, "lease_until"));
		json_decref(j);
	}

	/* owned state write, with a bare-integer If-Match */
	ck_assert_int_eq(t_owned_state(W, id, "w-1", epoch, "in_progress"), 200);
	snprintf(hdr, sizeof hdr, "If-Match: %lld", epoch);
	snprintf(path, sizeof path, "/v1/cards/%s/awaiting-input", id);
	j = t_must(200, "PUT", path, W, hdr, "{\"marker\":\"w-1\",\"awaiting_input\":true}");
	ck_assert(json_is_true(json_object_get(j, "awaiting_input")));
	json_decref(j);
	j = t_must(200, "PUT", path, W, hdr, "{\"marker\":\"w-1\",\"awaiting_input\":false}");
	json_decref(j);

	/* a run, recorded on the card */
	{
		char body[256];

		snprintf(body, sizeof body,
			 "{\"card_id\":\"%s\",\"marker\":\"w-1\",\"status\":\"running\","
			 "\"id\":\"run-1\",\"lease_ms\":60000}",
			 id);
		j = t_must(201, "POST", "/v1/runs", W, NULL, body);
		ck_assert_str_eq(t_str(j, "id"), "run-1");
		ck_assert_str_eq(t_str(j, "owner"), "w-1");
		loc = httpc_header(T_HDRS, "Location");
		ck_assert_str_eq(loc, "/v1/runs/run-1");
		free(loc);
		json_decref(j);
	}
	snprintf(path, sizeof path, "/v1/cards/%s/last-run", id);
	j = t_must(200, "PUT", path, W, hdr, "{\"marker\":\"w-1\",\"run_id\":\"run-1\"}");
	ck_assert_str_eq(t_str(j, "last_run_id"), "run-1");
	json_decref(j);
	json_decref(t_must(200, "POST", "/v1/runs/run-1/heartbeat", W, NULL, "{\"marker\":\"w-1\"}"));
	j = t_must(200, "PATCH", "/v1/runs/run-1", W, NULL,
		   "{\"marker\":\"w-1\",\"status\":\"finished\",\"continuation\":\"final\"}");
	ck_assert_str_eq(t_str(j, "status"), "finished");
	ck_assert_str_eq(t_str(j, "continuation"), "final");
	json_decref(j);

	/* done, then release: the claim goes, the epoch stays */
	ck_assert_int_eq(t_owned_state(W, id, "w-1", epoch, "done"), 200);
	snprintf(path, sizeof path, "/v1/cards/%s/release", id);
	{
		char body[128];

		snprintf(body, sizeof body, "{\"marker\":\"w-1\",\"epoch\":%lld}", epoch);
		j = t_must(200, "POST", path, W, NULL, body);
	}
	ck_assert(json_is_null(json_object_get(j, "claim")));
	ck_assert_int_eq(t_int(j, "claim_epoch"), epoch);
	ck_assert_str_eq(t_str(j, "state"), "done");
	json_decref(j);

	/* operator reopens out of done */
	snprintf(path, sizeof path, "/v1/cards/%s/reopen", id);
	j = t_must(200, "POST", path, OP, NULL, "{\"to\":\"ready\",\"reason\":\"again\"}");
	ck_assert_str_eq(t_str(j, "state"), "ready");
	json_decref(j);

	/* comments and labels */
	snprintf(path, sizeof path, "/v1/cards/%s/comments", id);
	j = t_must(201, "POST", path, BOT, NULL, "{\"body\":\"looks good\"}");
	ck_assert_int_eq(json_array_size(json_object_get(j, "comments")), 1);
	json_decref(j);
	snprintf(path, sizeof path, "/v1/cards/%s/labels", id);
	j = t_must(200, "PATCH", path, BOT, NULL, "{\"add\":[\"p2\"],\"remove\":[\"p1\"]}");
	ck_assert_int_eq(json_array_size(json_object_get(j, "labels")), 2);
	json_decref(j);
	j = t_must(200, "PUT", path, OP, NULL, "{\"labels\":[\"only\"]}");
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "labels"), 0)),
			 "only");
	json_decref(j);

	/* the events tail shows it all, with actors */
	j = t_must(200, "GET", "/v1/events?limit=1000", OP, NULL, NULL);
	ev = json_object_get(j, "events");
	ck_assert(events_have(ev, "card_created", NULL, NULL));
	ck_assert(events_have(ev, "card_claimed", "marker", "w-1"));
	ck_assert(events_have(ev, "card_state_changed", "to", "in_progress"));
	ck_assert(events_have(ev, "card_state_changed", "reopened", NULL));
	ck_assert(events_have(ev, "card_released", NULL, NULL));
	ck_assert(events_have(ev, "card_last_run", NULL, NULL));
	ck_assert(events_have(ev, "run_created", NULL, NULL));
	ck_assert(events_have(ev, "card_comment_added", NULL, NULL));
	ck_assert(json_is_integer(json_object_get(j, "next")));
	{
		size_t i;
		json_t *e;
		bool seen = false;

		json_array_foreach(ev, i, e) {
			if (strcmp(t_str(e, "type"), "card_created") != 0)
				continue;
			ck_assert_str_eq(t_str(e, "actor"), "t-bot");
			ck_assert_str_eq(t_str(e, "card_id"), id);
			seen = true;
		}
		ck_assert(seen);
	}
	json_decref(j);

	/* delete: 204, then 404 */
	snprintf(path, sizeof path, "/v1/cards/%s", id);
	ck_assert_int_eq(t_call("DELETE", path, OP, NULL, NULL, NULL), 204);
	t_problem(404, "not_found", "GET", path, OP, NULL, NULL);
	free(id);
}
END_TEST

/* A keep-alive connection reuses its request's memory (api.c's spare), whose own storage holds
 * a path under 256 bytes, a body under 512 and decoded path parameters under 256; larger ones
 * go to the heap. Alternating small and large on one connection, every request reads exactly
 * its own path, parameters and body (never the previous request's bytes). */
START_TEST(request_storage_small_and_large)
{
	char id[129], enc[129 * 3 + 1], path[600], body[2200], title[1500], want[1600];
	const char *sizes[] = {"small", "large", "small", "large", "small"};
	json_t *j;
	size_t i, k;

	for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		bool large = sizes[k][0] == 'l';
		size_t idlen = large ? 128 : 5 + k;
		size_t tlen = large ? 1400 - k : 10 + k;

		for (i = 0; i < idlen; i++)
			id[i] = (char)('a' + (i + k) % 26);
		id[idlen] = '\0';
		for (i = 0; i < tlen; i++)
			title[i] = (char)('A' + (i + k) % 26);
		title[tlen] = '\0';
		snprintf(body, sizeof body, "{\"id\":\"%s\",\"title\":\"%s\"}", id, title);
		j = t_must(201, "POST", "/v1/cards", BOT, NULL, body);
		ck_assert_str_eq(t_str(j, "id"), id);
		ck_assert_str_eq(t_str(j, "title"), title);
		json_decref(j);
		/* the id percent-encoded byte by byte: a path of 11 + 3 x 128 bytes */
		for (i = 0; i < idlen; i++)
			snprintf(enc + 3 * i, 4, "%%%02X", (unsigned char)id[i]);
		snprintf(path, sizeof path, "/v1/cards/%s", large ? enc : id);
		j = t_must(200, "GET", path, OP, NULL, NULL);
		ck_assert_str_eq(t_str(j, "id"), id);
		ck_assert_str_eq(t_str(j, "title"), title);
		json_decref(j);
		/* a parameter longer than the request's own storage (decoded on the heap, freed
		 * with the request: the ASan build checks), or a short one, of a missing card */
		memset(title, 'q', large ? 300 : 3);
		title[large ? 300 : 3] = '\0';
		snprintf(path, sizeof path, "/v1/cards/%.400s", title);
		j = t_must(large ? 400 : 404, "GET", path, OP, NULL, NULL);
		snprintf(want, sizeof want, "no card %.400s", title);
		ck_assert_str_eq(t_str(j, "detail"),
				 large ? "card id must match [A-Za-z0-9._:-]{1,128}" : want);
		json_decref(j);
	}
}
END_TEST

TCase *api_tcase_life(void)
{
	TCase *tc = tcase_create("life");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, card_life);
	tcase_add_test(tc, request_storage_small_and_large);
	return tc;
}

static Suite *api_suite(void)
{
	Suite *s = suite_create("api");

	suite_add_tcase(s, api_tcase_units());
	suite_add_tcase(s, api_tcase_answer_text());
	suite_add_tcase(s, api_tcase_admin());
	suite_add_tcase(s, api_tcase_life());
	suite_add_tcase(s, api_tcase_errors());
	suite_add_tcase(s, api_tcase_errors_small());
	suite_add_tcase(s, api_tcase_misc());
	suite_add_tcase(s, api_tcase_roles());
	suite_add_tcase(s, api_tcase_race());
	suite_add_tcase(s, api_tcase_ack());
	suite_add_tcase(s, api_tcase_next());
	suite_add_tcase(s, api_tcase_next_start());
	suite_add_tcase(s, api_tcase_edge());
	suite_add_tcase(s, api_tcase_edge_reaper());
	suite_add_tcase(s, api_tcase_fence());
	suite_add_tcase(s, api_tcase_contract());
	suite_add_tcase(s, api_tcase_mcp());
	suite_add_tcase(s, api_tcase_mcp_small());
	suite_add_tcase(s, api_tcase_agent());
	suite_add_tcase(s, api_tcase_quiesce());
	suite_add_tcase(s, api_tcase_unix());
	suite_add_tcase(s, api_tcase_runs());
	suite_add_tcase(s, api_tcase_activity());
	suite_add_tcase(s, api_tcase_policy());
	suite_add_tcase(s, api_tcase_many());
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(api_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
