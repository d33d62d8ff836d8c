/* Agent tokens (DESIGN §13): minted only by the claim's holder, a subset of its caps, scoped
 * to the card's board, dead (401) the moment the claim is released, reclaimed by the reaper,
 * or expired, or its minting token is removed or changed on reload (§16); tampering is caught
 * by the signature. */
#include "tests/api/api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *mint_call(int want, const char *tok, const char *id, long long epoch,
			 const char *body)
{
	char path[300], hdr[64];

	snprintf(path, sizeof path, "/v1/cards/%s/agent-tokens", id);
	snprintf(hdr, sizeof hdr, "If-Match: \"%lld\"", epoch);
	return t_must(want, "POST", path, tok, epoch >= 0 ? hdr : NULL, body);
}

/* A new agent token (caller frees) for the worker's claim (marker m-1, epoch). */
static char *mint(const char *id, long long epoch, const char *caps)
{
	char body[300];
	json_t *j;
	char *tok;

	snprintf(body, sizeof body, "{\"marker\":\"m-1\",\"caps\":%s}", caps);
	j = mint_call(201, W, id, epoch, body);
	ck_assert(json_is_string(json_object_get(j, "expires_at")));
	tok = strdup(t_str(j, "token"));
	json_decref(j);
	return tok;
}

static int get_card(const char *tok, const char *id)
{
	char path[300];

	snprintf(path, sizeof path, "/v1/cards/%s", id);
	return t_call("GET", path, tok, NULL, NULL, NULL);
}

START_TEST(test_agent_mint_refusals)
{
	char *id = t_card_new("{\"title\":\"a\",\"state\":\"ready\"}");
	const char *ok = "{\"marker\":\"m-1\",\"caps\":[\"board.read\"]}";
	char path[300];
	long long e;
	json_t *j;

	json_decref(mint_call(409, W, id, 0, ok)); /* not claimed */
	e = t_claim(id, "m-1");
	snprintf(path, sizeof path, "/v1/cards/%s/agent-tokens", id);
	t_problem(428, "precondition_required", "POST", path, W, NULL, ok);
	json_decref(mint_call(409, W, id, e + 1, ok));
	json_decref(mint_call(409, W, id, e, "{\"marker\":\"m-2\",\"caps\":[\"board.read\"]}"));
	json_decref(mint_call(403, BOT, id, e, ok));
	json_decref(mint_call(400, W, id, e, "{\"marker\":\"m-1\",\"caps\":[\"board.fly\"]}"));
	json_decref(mint_call(400, W, id, e, "{\"marker\":\"m-1\",\"caps\":[]}"));
	json_decref(mint_call(400, W, id, e, "{\"marker\":\"m-1\"}"));
	json_decref(mint_call(400, W, id, e,
			      "{\"marker\":\"m-1\",\"caps\":[\"board.read\"],\"x\":1}"));
	ck_assert(strstr(T_BODY, "unknown field"));
	json_decref(mint_call(400, W, id, e,
			      "{\"marker\":\"m-1\",\"caps\":[\"board.read\"],\"ttl_ms\":0}"));
	/* a worker grants only what it holds */
	j = mint_call(403, HARNESS_TOK_WORKER_READ, id, e,
		      "{\"marker\":\"m-1\",\"caps\":[\"board.move\"]}");
	ck_assert(strstr(T_BODY, "board.move"));
	json_decref(j);
	free(id);
}
END_TEST

/* A run is read with board.read, as every other read (README: "reads need board.read"): an
 * agent token minted without it is refused the run it could otherwise read. */
START_TEST(test_agent_run_read_needs_board_read)
{
	char *id = t_card_new("{\"title\":\"r\",\"state\":\"ready\"}");
	long long e = t_claim(id, "m-1");
	char body[300], *label_only, *reader;

	snprintf(body, sizeof body,
		 "{\"card_id\":\"%s\",\"marker\":\"m-1\",\"status\":\"running\",\"id\":\"ra-1\"}",
		 id);
	json_decref(t_must(201, "POST", "/v1/runs", W, NULL, body));
	label_only = mint(id, e, "[\"board.label\"]");
	t_problem(403, "forbidden", "GET", "/v1/runs/ra-1", label_only, NULL, NULL);
	ck_assert(strstr(T_BODY, "board.read"));
	reader = mint(id, e, "[\"board.read\"]");
	json_decref(t_must(200, "GET", "/v1/runs/ra-1", reader, NULL, NULL));
	free(reader);
	free(label_only);
	free(id);
}
END_TEST

/* Every agent token of a worker is named "<worker>/agent", but an Idempotency-Key is its
 * claim's own: an agent scoped to board "oth" replaying a key another claim's agent used on
 * "default" gets its own refusal (403), not that card; nor does another claim's agent on the
 * same board see it. */
START_TEST(test_agent_idempotency_keys_are_the_claims)
{
	const char *key = "Idempotency-Key: agent-k1";
	const char *create = "{\"title\":\"by agent\",\"board\":\"default\"}";
	char *a_id, *b_id, *c_id, *a, *b, *c, *made;
	json_t *j;

	t_board_new("oth");
	a_id = t_card_new("{\"title\":\"a\",\"state\":\"ready\"}");
	b_id = t_card_new("{\"title\":\"b\",\"state\":\"ready\",\"board\":\"oth\"}");
	c_id = t_card_new("{\"title\":\"c\",\"state\":\"ready\"}");
	a = mint(a_id, t_claim(a_id, "m-1"), "[\"board.read\",\"board.create\"]");
	b = mint(b_id, t_claim(b_id, "m-1"), "[\"board.read\",\"board.create\"]");
	c = mint(c_id, t_claim(c_id, "m-1"), "[\"board.read\",\"board.create\"]");
	j = t_must(201, "POST", "/v1/cards", a, key, create);
	made = strdup(t_str(j, "id"));
	json_decref(j);
	j = t_must(201, "POST", "/v1/cards", a, key, create); /* its own replay */
	ck_assert_str_eq(t_str(j, "id"), made);
	json_decref(j);
	t_problem(403, "forbidden", "POST", "/v1/cards", b, key, create);
	ck_assert(!strstr(T_BODY, made));
	j = t_must(201, "POST", "/v1/cards", c, key, create); /* a card of its own */
	ck_assert_str_ne(t_str(j, "id"), made);
	json_decref(j);
	free(made);
	free(a);
	free(b);
	free(c);
	free(a_id);
	free(b_id);
	free(c_id);
}
END_TEST

START_TEST(test_agent_lives_with_the_claim)
{
	char *id = t_card_new("{\"title\":\"a\",\"state\":\"ready\"}");
	char *other = NULL, *agent, path[300];
	long long e = t_claim(id, "m-1"), e2;
	json_t *j, *ev;
	size_t i;
	bool seen = false;

	agent = mint(id, e, "[\"board.read\",\"board.label\"]");
	ck_assert_int_eq(get_card(agent, id), 200);
	snprintf(path, sizeof path, "/v1/cards/%s/labels", id);
	json_decref(t_must(200, "PUT", path, agent, NULL, "{\"labels\":[\"by-agent\"]}"));
	/* its events: actor <worker>/agent */
	ev = t_must(200, "GET", "/v1/events?limit=1000", OP, NULL, NULL);
	json_array_foreach(json_object_get(ev, "events"), i, j)
		if (!strcmp(t_str(j, "type"), "card_labels_changed") &&
		    !strcmp(t_str(j, "card_id"), id)) {
			ck_assert_str_eq(t_str(j, "actor"), "t-worker/agent");
			ck_assert_int_eq(json_integer_value(json_object_get(
						 json_object_get(j, "payload"), "actor_epoch")),
					 e);
			seen = true;
		}
	ck_assert(seen);
	json_decref(ev);
	/* only the granted caps, only the card's board, only the bot role */
	snprintf(path, sizeof path, "/v1/cards/%s/comments", id);
	t_problem(403, "forbidden", "POST", path, agent, NULL, "{\"body\":\"no\"}");
	t_board_new("other");
	other = t_card_new("{\"title\":\"b\",\"board\":\"other\"}");
	ck_assert_int_eq(get_card(agent, other), 403);
	json_decref(mint_call(403, agent, id, e, "{\"marker\":\"m-1\",\"caps\":[\"board.read\"]}"));
	/* tampering */
	{
		char *bad = strdup(agent);

		bad[10] = bad[10] == 'A' ? 'B' : 'A';
		ck_assert_int_eq(get_card(bad, id), 401);
		bad[strlen(bad) - 3] = '\0';
		ck_assert_int_eq(get_card(bad, id), 401);
		free(bad);
	}
	/* release: dead, and a re-claim by the same marker (a new epoch) does not revive it */
	snprintf(path, sizeof path, "/v1/cards/%s/release", id);
	{
		char body[128];

		snprintf(body, sizeof body, "{\"marker\":\"m-1\",\"epoch\":%lld}", e);
		json_decref(t_must(200, "POST", path, W, NULL, body));
	}
	ck_assert_int_eq(get_card(agent, id), 401);
	ck_assert(strstr(T_BODY, "no longer the card's claim"));
	snprintf(path, sizeof path, "/v1/cards/%s/labels", id);
	ck_assert_int_eq(t_call("PUT", path, agent, NULL, "{\"labels\":[]}", NULL), 401);
	e2 = t_claim(id, "m-1");
	ck_assert_int_gt(e2, e);
	ck_assert_int_eq(get_card(agent, id), 401);
	ck_assert_int_eq(t_call("POST", "/mcp", agent, NULL,
				"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", NULL),
			 401);
	free(agent);
	free(other);
	free(id);
}
END_TEST

START_TEST(test_agent_dies_with_a_reaper_reclaim)
{
	char *id = t_card_new("{\"title\":\"a\",\"state\":\"in_progress\"}");
	char path[300], *agent;
	struct core_token prev = {"m-1", 0, "t-worker"};
	struct core_card *c = NULL;
	json_t *j;

	snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
	j = t_must(200, "POST", path, W, NULL, "{\"marker\":\"m-1\",\"lease_ms\":1}");
	prev.epoch = t_int(j, "epoch");
	json_decref(j);
	agent = mint(id, prev.epoch, "[\"board.read\"]");
	ck_assert_int_eq(get_card(agent, id), 200);
	usleep(20 * 1000); /* the 1 ms lease is over: only now may the reaper transfer it */
	ck_assert_int_eq(store_reaper_transfer(T.st, id, &prev, "reaper:test", 60000, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(get_card(agent, id), 401);
	free(agent);
	free(id);
}
END_TEST

START_TEST(test_agent_expires)
{
	char *id = t_card_new("{\"title\":\"a\",\"state\":\"ready\"}");
	long long e = t_claim(id, "m-1");
	json_t *j = mint_call(201, W, id, e,
			      "{\"marker\":\"m-1\",\"caps\":[\"board.read\"],\"ttl_ms\":1}");
	char *agent = strdup(t_str(j, "token"));

	json_decref(j);
	usleep(20 * 1000);
	ck_assert_int_eq(get_card(agent, id), 401);
	ck_assert(strstr(T_BODY, "expired"));
	free(agent);
	free(id);
}
END_TEST

/* Only the claim's holder mints (§11: the claim is bound to its token); a revoke kills it. */
START_TEST(test_agent_holder_and_revoke)
{
	char *id = t_card_new("{\"title\":\"a\",\"state\":\"ready\"}");
	long long e = t_claim(id, "m-1");
	char path[300], *agent;

	/* another worker that knows (marker, epoch) from a card read is not the holder */
	json_decref(mint_call(409, W2, id, e, "{\"marker\":\"m-1\",\"caps\":[\"board.read\"]}"));
	agent = mint(id, e, "[\"board.read\"]");
	ck_assert_int_eq(get_card(agent, id), 200);
	snprintf(path, sizeof path, "/v1/cards/%s/claim/revoke", id);
	json_decref(t_must(200, "POST", path, OP, NULL, NULL));
	ck_assert_int_eq(get_card(agent, id), 401);
	free(agent);
	free(id);
}
END_TEST

/* Serves a new token set (as a SIGHUP reload does): the worker under `worker_plain` (NULL:
 * no t-worker at all) and the operator. */
static void tokens_reload(const char *worker_plain)
{
	struct api_tokens fresh = {0};

	if (worker_plain)
		ck_assert_int_eq(api_tokens_push(&fresh, "t-worker", worker_plain, API_ROLE_WORKER,
						 NULL),
				 CORE_OK);
	ck_assert_int_eq(api_tokens_push(&fresh, "t-operator", HARNESS_TOK_OPERATOR,
					 API_ROLE_OPERATOR, NULL),
			 CORE_OK);
	ck_assert_int_eq(api_tokens_replace(T.api, &fresh), CORE_OK);
}

/* DESIGN §16: an agent token dies with the token that minted it -- changed or removed on
 * reload, it answers 401 at once, its claim still current; a reload that leaves the minter as
 * it was keeps it. */
START_TEST(test_agent_dies_with_its_minter)
{
	char *id = t_card_new("{\"title\":\"a\",\"state\":\"ready\"}");
	long long e = t_claim(id, "m-1");
	char *agent = mint(id, e, "[\"board.read\"]"), *agent2;
	json_t *j;

	ck_assert_int_eq(get_card(agent, id), 200);
	tokens_reload(HARNESS_TOK_WORKER); /* the minter unchanged */
	ck_assert_int_eq(get_card(agent, id), 200);
	tokens_reload("tok-worker-rotated"); /* the minter's secret changed */
	ck_assert_int_eq(get_card(agent, id), 401);
	ck_assert_ptr_nonnull(strstr(T_BODY, "removed or changed"));
	ck_assert_int_eq(get_card("tok-worker-rotated", id), 200); /* the claim lives on */
	/* the rotated token mints again (the claim is its name's); removed, that one dies too */
	{
		char path[300], hdr[64];

		snprintf(path, sizeof path, "/v1/cards/%s/agent-tokens", id);
		snprintf(hdr, sizeof hdr, "If-Match: \"%lld\"", e);
		j = t_must(201, "POST", path, "tok-worker-rotated", hdr,
			   "{\"marker\":\"m-1\",\"caps\":[\"board.read\"]}");
		agent2 = strdup(t_str(j, "token"));
		json_decref(j);
	}
	ck_assert_int_eq(get_card(agent2, id), 200);
	ck_assert_int_eq(get_card(agent, id), 401);
	tokens_reload(NULL); /* the minter removed */
	ck_assert_int_eq(get_card(agent2, id), 401);
	ck_assert_ptr_nonnull(strstr(T_BODY, "removed or changed"));
	free(agent);
	free(agent2);
	free(id);
}
END_TEST

TCase *api_tcase_agent(void)
{
	TCase *tc = tcase_create("agent");

	tcase_add_checked_fixture(tc, t_setup_short_lease, t_teardown);
	tcase_add_test(tc, test_agent_mint_refusals);
	tcase_add_test(tc, test_agent_lives_with_the_claim);
	tcase_add_test(tc, test_agent_run_read_needs_board_read);
	tcase_add_test(tc, test_agent_idempotency_keys_are_the_claims);
	tcase_add_test(tc, test_agent_dies_with_a_reaper_reclaim);
	tcase_add_test(tc, test_agent_expires);
	tcase_add_test(tc, test_agent_holder_and_revoke);
	tcase_add_test(tc, test_agent_dies_with_its_minter);
	return tc;
}
