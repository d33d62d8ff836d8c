/* POST /mcp and capabilities (DESIGN §13): the JSON-RPC envelope's errors, version
 * negotiation in both eras, the capability matrix over every tool and every gated REST route,
 * and agent tokens that die with their claim. The MCP SDK's own run is tests/mcp/mcp_sdk.py. */
#include "tests/api/api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODERN_HDRS(method) "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: " method
#define META "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
	     "\"io.modelcontextprotocol/clientCapabilities\":{}}"

/* tmpl with its "%s" (if any) replaced by id. */
static void fill(char *out, size_t cap, const char *tmpl, const char *id)
{
	const char *p = strstr(tmpl, "%s");

	if (!p)
		snprintf(out, cap, "%s", tmpl);
	else
		snprintf(out, cap, "%.*s%s%s", (int)(p - tmpl), tmpl, id, p + 2);
}

static const char *cap_tok(unsigned i)
{
	static char buf[HARNESS_N_CAPS][64];

	snprintf(buf[i], sizeof buf[i], HARNESS_TOK_CAP_FMT, i);
	return buf[i];
}

/* One POST /mcp; asserts the HTTP status and returns the parsed answer. */
static json_t *rpc(int want, const char *tok, const char *hdrs, const char *body)
{
	return t_must(want, "POST", "/mcp", tok, hdrs, body);
}

static long long err_code(const json_t *ans)
{
	return json_integer_value(json_object_get(json_object_get(ans, "error"), "code"));
}

static void rpc_err(int status, long long code, const char *tok, const char *hdrs,
		    const char *body)
{
	json_t *j = rpc(status, tok, hdrs, body);

	ck_assert_msg(err_code(j) == code, "want error %lld for %s, got %s", code, body, T_BODY);
	json_decref(j);
}

static long long n_events(void)
{
	json_t *j = t_must(200, "GET", "/v1/events?limit=1000", OP, NULL, NULL);
	long long n = (long long)json_array_size(json_object_get(j, "events"));

	json_decref(j);
	return n;
}

/* tools/call in the handshake era; returns the whole answer. */
static json_t *tool(const char *tok, const char *name, const char *args)
{
	char body[4096];

	snprintf(body, sizeof body,
		 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
		 "\"%s\",\"arguments\":%s}}",
		 name, args);
	return rpc(200, tok, NULL, body);
}

static const char *result_code(const json_t *ans)
{
	const json_t *res = json_object_get(ans, "result");

	if (!json_is_true(json_object_get(res, "isError")))
		return NULL;
	return json_string_value(json_object_get(json_object_get(res, "structuredContent"), "code"));
}

START_TEST(test_mcp_envelope_errors)
{
	char *id = t_card_new("{\"title\":\"env\"}");
	long long before = n_events();
	char big[8192];
	json_t *j;

	rpc_err(400, -32700, BOT, NULL, "{\"jsonrpc\":");
	rpc_err(400, -32700, BOT, NULL, "");
	rpc_err(400, -32600, BOT, NULL,
		"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
		"\"create_card\",\"arguments\":{\"title\":\"batched\"}}}]");
	rpc_err(400, -32600, BOT, NULL, "\"ping\"");
	rpc_err(400, -32600, BOT, NULL, "{\"id\":1,\"method\":\"ping\"}");
	rpc_err(400, -32600, BOT, NULL, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}");
	rpc_err(400, -32600, BOT, NULL, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}");
	rpc_err(400, -32600, BOT, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}");
	rpc_err(400, -32600, BOT, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1}");
	rpc_err(400, -32600, BOT, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
	rpc_err(400, -32600, BOT, NULL,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":[1]}");
	rpc_err(200, -32601, BOT, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope/nope\"}");
	rpc_err(200, -32602, BOT, NULL,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}");
	rpc_err(200, -32602, BOT, NULL,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
		"\"create_card\",\"arguments\":[\"x\"]}}");
	rpc_err(200, -32602, BOT, NULL,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
		"\"drop_tables\"}}");
	rpc_err(200, -32602, BOT, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}");
	rpc_err(400, -32022, BOT, "MCP-Protocol-Version: 1999-01-01",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	/* huge params inside the body limit: the argument's own bound, as a tool refusal */
	memset(big, 'a', sizeof big);
	big[sizeof big - 1] = '\0';
	{
		char *body = NULL;

		ck_assert(asprintf(&body,
				   "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
				   "\"params\":{\"name\":\"add_comment\",\"arguments\":{\"id\":\"%s\","
				   "\"body\":\"%s%s%s%s%s%s%s%s%s\"}}}",
				   id, big, big, big, big, big, big, big, big, big) > 0);
		j = rpc(200, BOT, NULL, body);
		ck_assert_str_eq(result_code(j), "bad_request");
		json_decref(j);
		free(body);
	}
	/* a request refused by the envelope answers its id */
	j = rpc(200, BOT, NULL, "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"nope\"}");
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "abc");
	json_decref(j);
	ck_assert_int_eq(n_events(), before); /* nothing changed */
	/* notifications: 202, no body */
	ck_assert_int_eq(t_call("POST", "/mcp", BOT, NULL,
				"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", NULL),
			 202);
	ck_assert(!T_BODY || !*T_BODY);
	/* no stream: GET is 405 with Allow: POST */
	json_decref(t_must(405, "GET", "/mcp", BOT, NULL, NULL));
	{
		char *allow = httpc_header(T_HDRS, "Allow");

		ck_assert_str_eq(allow, "POST");
		free(allow);
	}
	/* who may speak: a worker or no token is refused with a JSON-RPC body */
	j = rpc(403, W, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	ck_assert_int_eq(err_code(j), -32600);
	json_decref(j);
	j = rpc(401, NULL, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	ck_assert_int_eq(err_code(j), -32600);
	json_decref(j);
	/* a foreign page's Origin (DNS rebinding) is refused before any method runs */
	j = rpc(403, BOT, "Origin: http://evil.example",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	ck_assert_int_eq(err_code(j), -32600);
	json_decref(j);
	{
		char same[64];

		snprintf(same, sizeof same, "Origin: http://127.0.0.1:%u", (unsigned)T.port);
		json_decref(rpc(200, BOT, same,
				"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}"));
	}
	free(id);
}
END_TEST

START_TEST(test_mcp_body_too_large)
{
	char body[8192];
	json_t *j;

	memset(body, ' ', sizeof body);
	memcpy(body, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", 40);
	body[sizeof body - 1] = '\0';
	j = rpc(413, BOT, NULL, body);
	ck_assert_int_eq(err_code(j), -32600);
	ck_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(j, "error"), "data"), "code")),
			 "payload_too_large");
	json_decref(j);
}
END_TEST

START_TEST(test_mcp_negotiation)
{
	static const struct {
		const char *asked, *got;
	} rows[] = {
		{"2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25"},
		{"2025-03-26", "2025-11-25"},
		{"2026-07-28", "2025-11-25"}, /* no handshake in the 2026 era */
		{"2099-01-01", "2025-11-25"},
	};
	char body[512];
	json_t *j, *v;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		snprintf(body, sizeof body,
			 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
			 "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":"
			 "\"t\",\"version\":\"1\"}}}",
			 rows[i].asked);
		j = rpc(200, BOT, NULL, body);
		ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "result"),
								    "protocolVersion")),
				 rows[i].got);
		json_decref(j);
	}
	j = rpc(200, BOT, "MCP-Protocol-Version: 2025-06-18",
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
	ck_assert(json_is_object(json_object_get(j, "result")));
	json_decref(j);

	/* 2026-07-28: discover, then every request carries its version */
	j = rpc(200, BOT, MODERN_HDRS("server/discover"),
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{" META "}}");
	v = json_object_get(json_object_get(j, "result"), "supportedVersions");
	ck_assert_int_eq(json_array_size(v), 3);
	ck_assert_str_eq(json_string_value(json_array_get(v, 2)), "2026-07-28");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "result"),
							    "resultType")),
			 "complete");
	json_decref(j);
	j = rpc(200, BOT, MODERN_HDRS("tools/list"),
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META "}}");
	ck_assert_int_eq(json_array_size(json_object_get(json_object_get(j, "result"), "tools")),
			 8);
	ck_assert(json_is_integer(json_object_get(json_object_get(j, "result"), "ttlMs")));
	json_decref(j);
	/* envelope missing, headers disagreeing, unsupported version, removed methods */
	rpc_err(400, -32602, BOT, MODERN_HDRS("tools/list"),
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	rpc_err(400, -32020, BOT, MODERN_HDRS("tools/call"),
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META "}}");
	rpc_err(400, -32020, BOT, NULL,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META "}}");
	rpc_err(400, -32020, BOT, MODERN_HDRS("tools/call") "\r\nMcp-Name: get_card",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{" META
		",\"name\":\"list_cards\",\"arguments\":{}}}");
	rpc_err(400, -32022, BOT, "MCP-Protocol-Version: 2027-01-01\r\nMcp-Method: tools/list",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
		"\"io.modelcontextprotocol/protocolVersion\":\"2027-01-01\","
		"\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
	rpc_err(404, -32601, BOT, MODERN_HDRS("ping"),
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{" META "}}");
	rpc_err(404, -32601, BOT, MODERN_HDRS("initialize"),
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{" META "}}");
	j = rpc(200, BOT, MODERN_HDRS("tools/call") "\r\nMcp-Name: list_cards",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{" META
		",\"name\":\"list_cards\",\"arguments\":{}}}");
	ck_assert(json_is_object(json_object_get(json_object_get(j, "result"),
						 "structuredContent")));
	json_decref(j);
}
END_TEST

/* ---- the capability matrix ---- */

struct rest_case {
	const char *method, *path; /* %s: a fresh card's id */
	const char *body;
	unsigned cap;
	int ok;
};

static const struct rest_case rest_cases[] = {
	{"POST", "/v1/cards", "{\"title\":\"x\"}", API_CAP_CREATE, 201},
	{"GET", "/v1/cards", NULL, API_CAP_READ, 200},
	{"GET", "/v1/cards/%s", NULL, API_CAP_READ, 200},
	{"PATCH", "/v1/cards/%s", "{\"title\":\"y\"}", API_CAP_CREATE, 200},
	{"PATCH", "/v1/cards/%s/state", "{\"from\":\"backlog\",\"to\":\"ready\"}", API_CAP_MOVE,
	 200},
	{"PATCH", "/v1/cards/%s/state", "{\"from\":\"backlog\",\"to\":\"done\"}", API_CAP_CLOSE,
	 200},
	{"PUT", "/v1/cards/%s/labels", "{\"labels\":[\"a\"]}", API_CAP_LABEL, 200},
	{"PATCH", "/v1/cards/%s/labels", "{\"add\":[\"a\"]}", API_CAP_LABEL, 200},
	{"POST", "/v1/cards/%s/comments", "{\"body\":\"c\"}", API_CAP_COMMENT, 201},
	{"GET", "/v1/labels", NULL, API_CAP_READ, 200},
	{"GET", "/v1/events", NULL, API_CAP_READ, 200},
	{"GET", "/v1/boards", NULL, API_CAP_READ, 200},
	{"GET", "/v1/boards/default", NULL, API_CAP_READ, 200},
};

START_TEST(test_caps_rest_matrix)
{
	size_t i, k;

	for (k = 0; k <= HARNESS_N_CAPS; k++) {
		const char *tok = k < HARNESS_N_CAPS ? cap_tok((unsigned)k) : HARNESS_TOK_NOCAPS;
		unsigned held = k < HARNESS_N_CAPS ? 1u << k : 0;

		for (i = 0; i < sizeof rest_cases / sizeof rest_cases[0]; i++) {
			const struct rest_case *c = &rest_cases[i];
			char *id = t_card_new("{\"title\":\"m\",\"state\":\"backlog\"}");
			char path[256];
			int st;

			fill(path, sizeof path, c->path, id);
			st = t_call(c->method, path, tok, NULL, c->body, NULL);
			if (held & c->cap)
				ck_assert_msg(st == c->ok, "%s %s with %s: want %d, got %d: %s",
					      c->method, path, api_cap_name(held), c->ok, st, T_BODY);
			else
				ck_assert_msg(st == 403 && strstr(T_BODY, api_cap_name(c->cap)),
					      "%s %s without %s: want 403, got %d: %s", c->method,
					      path, api_cap_name(c->cap), st, T_BODY);
			free(id);
		}
	}
}
END_TEST

struct tool_case {
	const char *name, *args; /* %s: a fresh card's id (in backlog) */
	unsigned extra;          /* a cap needed beyond the tool's own (into a terminal column) */
};

static const struct tool_case tool_cases[] = {
	{"list_cards", "{}", 0},
	{"get_card", "{\"id\":\"%s\"}", 0},
	{"create_card", "{\"title\":\"t\"}", 0},
	{"move_card", "{\"id\":\"%s\",\"to\":\"ready\"}", 0},
	{"move_card", "{\"id\":\"%s\",\"from\":\"backlog\",\"to\":\"done\"}", API_CAP_CLOSE},
	{"close_card", "{\"id\":\"%s\"}", 0},
	{"set_labels", "{\"id\":\"%s\",\"labels\":[\"a\"]}", 0},
	{"adjust_labels", "{\"id\":\"%s\",\"remove\":[\"a\"]}", 0},
	{"add_comment", "{\"id\":\"%s\",\"body\":\"hi\"}", 0},
};

/* Each tool's capability, as tools/list tells it (the one table). */
static unsigned listed_cap(const json_t *tools, const char *name)
{
	const json_t *t;
	size_t i;

	json_array_foreach(tools, i, t)
		if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
			return api_cap_parse(json_string_value(json_object_get(
				json_object_get(t, "_meta"), "boardd/capability")));
	return 0;
}

START_TEST(test_caps_tool_matrix)
{
	const char *list = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}";
	json_t *all = rpc(200, BOT, NULL, list);
	json_t *all_tools = json_object_get(json_object_get(all, "result"), "tools");
	size_t i, k;

	ck_assert_int_eq(json_array_size(all_tools), 8);
	for (k = 0; k <= HARNESS_N_CAPS; k++) {
		const char *tok = k < HARNESS_N_CAPS ? cap_tok((unsigned)k) : HARNESS_TOK_NOCAPS;
		unsigned held = k < HARNESS_N_CAPS ? 1u << k : 0;
		json_t *mine = rpc(200, tok, NULL, list), *t;
		json_t *tools = json_object_get(json_object_get(mine, "result"), "tools");
		size_t n = 0;

		/* tools/list: exactly the granted tools */
		json_array_foreach(all_tools, i, t)
			n += (listed_cap(all_tools, json_string_value(json_object_get(t, "name"))) &
			      held) != 0;
		ck_assert_int_eq(json_array_size(tools), n);
		json_array_foreach(tools, i, t)
			ck_assert(listed_cap(all_tools, json_string_value(json_object_get(t, "name"))) &
				  held);
		json_decref(mine);

		for (i = 0; i < sizeof tool_cases / sizeof tool_cases[0]; i++) {
			const struct tool_case *c = &tool_cases[i];
			unsigned own = listed_cap(all_tools, c->name);
			char *id = t_card_new("{\"title\":\"m\",\"state\":\"backlog\",\"labels\":[\"a\"]}");
			char args[256];
			json_t *j;

			ck_assert(own);
			fill(args, sizeof args, c->args, id);
			j = tool(tok, c->name, args);
			if (!(held & own))
				ck_assert_msg(err_code(j) == -32602, "%s with %s: %s", c->name,
					      held ? api_cap_name(held) : "nothing", T_BODY);
			else if (c->extra && !(held & c->extra))
				ck_assert_msg(result_code(j) && !strcmp(result_code(j), "forbidden"),
					      "%s %s: %s", c->name, args, T_BODY);
			else
				ck_assert_msg(json_object_get(j, "result") && !result_code(j),
					      "%s %s with %s: %s", c->name, args,
					      api_cap_name(held), T_BODY);
			json_decref(j);
			free(id);
		}
	}
	json_decref(all);
}
END_TEST

/* A bot with every capability cannot reopen through any tool: no tool leaves done. */
START_TEST(test_bot_cannot_reopen)
{
	char *id = t_card_new("{\"title\":\"r\",\"state\":\"done\"}");
	char args[256];
	const char *to[] = {"inbox", "backlog", "ready", "in_progress", "review", "waiting_deps"};
	json_t *j;
	size_t i;

	for (i = 0; i < sizeof to / sizeof to[0]; i++) {
		snprintf(args, sizeof args, "{\"id\":\"%s\",\"to\":\"%s\"}", id, to[i]);
		j = tool(BOT, "move_card", args);
		ck_assert_str_eq(result_code(j), "terminal_state_exit");
		json_decref(j);
		snprintf(args, sizeof args, "{\"id\":\"%s\",\"from\":\"done\",\"to\":\"%s\"}", id,
			 to[i]);
		j = tool(BOT, "move_card", args);
		ck_assert_str_eq(result_code(j), "terminal_state_exit");
		json_decref(j);
		snprintf(args, sizeof args, "{\"id\":\"%s\",\"to\":\"%s\"}", id, to[i]);
		j = tool(BOT, "close_card", args);
		ck_assert_str_eq(result_code(j), "transition_rejected");
		json_decref(j);
	}
	snprintf(args, sizeof args, "/v1/cards/%s", id);
	j = t_must(200, "GET", args, OP, NULL, NULL);
	ck_assert_str_eq(t_str(j, "state"), "done");
	json_decref(j);
	free(id);
}
END_TEST

static const char *result_detail(const json_t *ans)
{
	return json_string_value(json_object_get(
		json_object_get(json_object_get(ans, "result"), "structuredContent"), "detail"));
}

/* A tool refuses the way its REST route does (DESIGN §11, §13): the same code and the same
 * detail, which names what was wrong (the column, the board, the blocker), never the bare
 * title. */
START_TEST(test_mcp_refusal_detail_matches_rest)
{
	char *ready = t_card_new("{\"title\":\"d\",\"state\":\"ready\"}");
	char *done = t_card_new("{\"title\":\"d\",\"state\":\"done\"}");
	struct {
		const char *method, *path, *body; /* the REST request ("%s": the card) */
		const char *tool, *args;           /* the same refusal through a tool */
		const char *id;
		int status;
		const char *code;
	} cases[] = {
		{"PATCH", "/v1/cards/%s/state", "{\"from\":\"ready\",\"to\":\"nosuch\"}", "move_card",
		 "{\"id\":\"%s\",\"from\":\"ready\",\"to\":\"nosuch\"}", ready, 422,
		 "transition_rejected"},
		{"PATCH", "/v1/cards/%s/state", "{\"from\":\"done\",\"to\":\"ready\"}", "move_card",
		 "{\"id\":\"%s\",\"from\":\"done\",\"to\":\"ready\"}", done, 422,
		 "terminal_state_exit"},
		{"PATCH", "/v1/cards/%s/state", "{\"from\":\"inbox\",\"to\":\"review\"}", "move_card",
		 "{\"id\":\"%s\",\"from\":\"inbox\",\"to\":\"review\"}", ready, 409,
		 "state_conflict"},
		{"POST", "/v1/cards", "{\"title\":\"x\",\"board\":\"nosuch\"}", "create_card",
		 "{\"title\":\"x\",\"board\":\"nosuch\"}", NULL, 404, "not_found"},
		{"POST", "/v1/cards", "{\"title\":\"x\",\"state\":\"nosuch\"}", "create_card",
		 "{\"title\":\"x\",\"state\":\"nosuch\"}", NULL, 422, "transition_rejected"},
		{"POST", "/v1/cards", "{\"title\":\"x\",\"blockers\":[\"nosuch\"]}", "create_card",
		 "{\"title\":\"x\",\"blockers\":[\"nosuch\"]}", NULL, 422, "transition_rejected"},
	};
	long long before = n_events();
	char path[256], body[512], args[512];
	json_t *rest, *j;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		fill(path, sizeof path, cases[i].path, cases[i].id);
		fill(body, sizeof body, cases[i].body, cases[i].id);
		fill(args, sizeof args, cases[i].args, cases[i].id);
		rest = t_must(cases[i].status, cases[i].method, path, BOT, NULL, body);
		ck_assert_str_eq(t_str(rest, "code"), cases[i].code);
		j = tool(BOT, cases[i].tool, args);
		ck_assert_msg(result_code(j) && strcmp(result_code(j), cases[i].code) == 0,
			      "%s %s: want %s, got %s", cases[i].tool, args, cases[i].code, T_BODY);
		ck_assert_int_eq(json_integer_value(json_object_get(
					 json_object_get(json_object_get(j, "result"),
							 "structuredContent"),
					 "status")),
				 cases[i].status);
		ck_assert_msg(result_detail(j) && strcmp(result_detail(j), t_str(rest, "detail")) == 0,
			      "%s %s: detail \"%s\", REST says \"%s\"", cases[i].tool, args,
			      result_detail(j) ? result_detail(j) : "(none)", t_str(rest, "detail"));
		json_decref(j);
		json_decref(rest);
	}
	/* One label past what a card carries: counted on the card, named on both doors. */
	{
		char list[1024], rbody[1200], targs[1300], *rdet;
		size_t k, len = 0;

		for (k = 0; k <= 128; k++)
			len += (size_t)snprintf(list + len, sizeof list - len, "%s\"l%zu\"",
						k ? "," : "", k);
		snprintf(path, sizeof path, "/v1/cards/%s/labels", ready);
		snprintf(rbody, sizeof rbody, "{\"labels\":[%s]}", list);
		rest = t_must(400, "PUT", path, BOT, NULL, rbody);
		rdet = strdup(t_str(rest, "detail"));
		json_decref(rest);
		snprintf(targs, sizeof targs, "{\"id\":\"%s\",\"labels\":[%s]}", ready, list);
		j = tool(BOT, "set_labels", targs);
		ck_assert_str_eq(result_code(j), "bad_request");
		ck_assert_str_eq(result_detail(j), rdet);
		ck_assert_ptr_nonnull(strstr(rdet, "at most 128 labels"));
		json_decref(j);
		free(rdet);
	}
	ck_assert_int_eq(n_events(), before);
	free(ready);
	free(done);
}
END_TEST

/* A store failure is never an empty success: 503 with a JSON-RPC error for the request's id,
 * and the card is as it was. */
START_TEST(test_mcp_store_failure)
{
	char *id = t_card_new("{\"title\":\"sf\"}"), *before = t_card_raw(id), *after, *ra;
	char args[256];
	json_t *j;

	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	snprintf(args, sizeof args,
		 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
		 "\"add_comment\",\"arguments\":{\"id\":\"%s\",\"body\":\"lost\"}}}",
		 id);
	j = rpc(503, BOT, NULL, args);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "id")), 7);
	ck_assert_int_eq(err_code(j), -32603);
	ck_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(j, "error"), "data"), "code")),
			 "store_unavailable");
	ra = httpc_header(T_HDRS, "Retry-After");
	ck_assert_ptr_nonnull(ra);
	free(ra);
	json_decref(j);
	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	after = t_card_raw(id);
	ck_assert_str_eq(after, before);
	free(after);
	free(before);
	free(id);
}
END_TEST

TCase *api_tcase_mcp(void)
{
	TCase *tc = tcase_create("mcp");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_mcp_envelope_errors);
	tcase_add_test(tc, test_mcp_negotiation);
	tcase_add_test(tc, test_caps_rest_matrix);
	tcase_add_test(tc, test_caps_tool_matrix);
	tcase_add_test(tc, test_bot_cannot_reopen);
	tcase_add_test(tc, test_mcp_refusal_detail_matches_rest);
	tcase_add_test(tc, test_mcp_store_failure);
	return tc;
}

TCase *api_tcase_mcp_small(void)
{
	TCase *tc = tcase_create("mcp_small");

	tcase_add_checked_fixture(tc, t_setup_small_body, t_teardown);
	tcase_add_test(tc, test_mcp_body_too_large);
	return tc;
}
