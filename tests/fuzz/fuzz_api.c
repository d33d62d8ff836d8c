/* Fuzz target A: request parsing, routing, auth and JSON decoding, through the real daemon
 * (api_fuzz_request, api/fuzz.c) over a real FS store in a temporary directory.
 *
 * One input is up to FUZZ_REQS requests separated by a line "---", so an input can create a
 * card and then claim and write it. Tokens are short so that inputs can carry them:
 *   Bearer w (worker)  b (bot)  o (operator)  a (all three)  s (all three, board "scoped")
 *   r (a bot holding only board.read)
 *
 * Oracles, on every answer (a violation aborts, which libFuzzer reports as a crash):
 *   - an answer comes, within 10 s, on a connection that stays sane (no hang, no silent close);
 *   - no 5xx but 503 store_unavailable: a 500 is a bug in a handler;
 *   - a JSON content type carries JSON; a problem+json body has "code" and the same "status";
 *   - a 2xx other than 204 has a body (never an empty success); 202 (an MCP notification
 *     accepted) has none;
 *   - a JSON body that speaks JSON-RPC (POST /mcp) is one answer: "2.0", a result or an error
 *     with an integer code.
 * ASan/UBSan/LSan catch the rest.
 *
 * The store is reopened fresh every FUZZ_API_RESET inputs (environment; default 2000, the
 * replay program uses 1 so that each file starts from an empty store). FUZZ_VERBOSE prints
 * every request line with the body of its answer. */
#include "api/api.h"
#include "store/store_twins.h"
#include "tests/fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define FUZZ_REQS 4
#define FUZZ_SEP "\n---\n"

static struct {
	char dir[256];
	struct store *st;
	struct api_tokens tokens;
	struct api *api;
	unsigned long runs, reset_every;
	bool verbose;
} g;

static void up(void)
{
	struct store_fs_options so = {0};
	struct api_config cfg;
	char err[512];

	fuzz_tmpdir(g.dir, sizeof g.dir, "api");
	so.dir = g.dir;
	so.events_keep = 1000;
	if (store_fs_open(&so, &g.st, err, sizeof err) != CORE_OK)
		fuzz_die("store: %s", err);
	api_config_init(&cfg);
	cfg.listen = "127.0.0.1:0";
	cfg.threads = 1;
	cfg.max_body = 65536;
	cfg.events_wait_max_ms = 20;
	cfg.stream_heartbeat_ms = 20; /* a hung-up event stream is noticed at its next beat */
	cfg.shutdown_grace_ms = 200;
	cfg.conn_timeout_s = 5;
	cfg.log_format = API_LOG_NONE;
	cfg.tokens = &g.tokens;
	if (api_start(&cfg, g.st, &g.api, err, sizeof err) != CORE_OK)
		fuzz_die("api: %s", err);
}

static void down(void)
{
	api_stop(g.api);
	g.api = NULL;
	store_close(g.st);
	g.st = NULL;
	fuzz_rmtree(g.dir);
}

static void at_exit(void)
{
	if (g.api)
		down();
	api_tokens_release(&g.tokens);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const scoped[] = {"scoped", NULL};
	const char *every = getenv("FUZZ_API_RESET");

	if (api_tokens_push(&g.tokens, "t-worker", "w", API_ROLE_WORKER, NULL) ||
	    api_tokens_push(&g.tokens, "t-bot", "b", API_ROLE_BOT, NULL) ||
	    api_tokens_push(&g.tokens, "t-operator", "o", API_ROLE_OPERATOR, NULL) ||
	    api_tokens_push(&g.tokens, "t-all", "a", API_ROLE_ANY, NULL) ||
	    api_tokens_push(&g.tokens, "t-scoped", "s", API_ROLE_ANY, scoped) ||
	    api_tokens_push_caps(&g.tokens, "t-reader", "r", API_ROLE_BOT, API_CAP_READ, NULL))
		fuzz_die("tokens");
	g.reset_every = every ? strtoul(every, NULL, 10) : 2000;
	g.verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (!g.reset_every)
		g.reset_every = 1;
	up();
	atexit(at_exit);
	return 0;
}

/* The header block's value of `name` (case-insensitive), copied into buf; false if absent. */
static bool header_get(const char *resp, const char *hend, const char *name, char *buf,
		       size_t len)
{
	size_t n = strlen(name);
	const char *p = strstr(resp, "\r\n");

	while (p && p < hend) {
		const char *line = p + 2, *eol = strstr(line, "\r\n");

		if (!eol || eol > hend)
			break;
		if ((size_t)(eol - line) > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
			const char *v = line + n + 1;

			while (*v == ' ')
				v++;
			snprintf(buf, len, "%.*s", (int)(eol - v), v);
			return true;
		}
		p = eol;
	}
	return false;
}

/* Is the request's method HEAD, read as api_fuzz_request reads it (the letters A-Z before
 * the first space of the first line)? A HEAD answer has no body. */
static bool method_is_head(const uint8_t *req, size_t len)
{
	char m[17];
	size_t i, k = 0;

	for (i = 0; i < len && req[i] != ' ' && req[i] != '\n' && k < sizeof m - 1; i++)
		if (req[i] >= 'A' && req[i] <= 'Z')
			m[k++] = (char)req[i];
	m[k] = '\0';
	return strcmp(m, "HEAD") == 0;
}

static void answer_check(const uint8_t *req, size_t req_len, int status, const char *resp,
			 size_t resp_len)
{
	const char *hend, *body;
	char ct[128] = "";
	size_t body_len;
	json_error_t jerr;
	json_t *j;
	bool head = method_is_head(req, req_len);

	if (status < 0)
		fuzz_fail(req, req_len, "no answer within 10 s, or the connection broke");
	if (status == 0)
		fuzz_fail(req, req_len, "the connection closed without an answer: %.200s",
			  resp ? resp : "");
	if (status >= 500 && status != 503)
		fuzz_fail(req, req_len, "answered %d: %.600s", status, resp);
	hend = strstr(resp, "\r\n\r\n");
	if (!hend)
		fuzz_fail(req, req_len, "answer without a header block: %.200s", resp);
	body = hend + 4;
	body_len = resp_len - (size_t)(body - resp);
	header_get(resp, hend + 2, "Content-Type", ct, sizeof ct);
	if (head || status == 204 || status == 202 || status == 304 || status < 200)
		return;
	if (status < 300 && body_len == 0)
		fuzz_fail(req, req_len, "an empty success %d", status);
	if (strncmp(ct, "application/json", 16) != 0 &&
	    strncmp(ct, "application/problem+json", 24) != 0)
		return;
	j = json_loadb(body, body_len, 0, &jerr);
	if (!j)
		fuzz_fail(req, req_len, "%d %s body is not JSON (%s): %.300s", status, ct, jerr.text,
			  body);
	if (json_object_get(j, "jsonrpc") &&
	    (strcmp(json_string_value(json_object_get(j, "jsonrpc")) ?
			    json_string_value(json_object_get(j, "jsonrpc")) : "", "2.0") != 0 ||
	     !json_object_get(j, "id") ||
	     !(json_is_object(json_object_get(j, "result")) ^
	       json_is_integer(json_object_get(json_object_get(j, "error"), "code")))))
		fuzz_fail(req, req_len, "a JSON-RPC answer that is not one: %.300s", body);
	if (strncmp(ct, "application/problem+json", 24) == 0 &&
	    (!json_is_string(json_object_get(j, "code")) ||
	     json_integer_value(json_object_get(j, "status")) != status))
		fuzz_fail(req, req_len, "problem body without code or with another status: %.300s",
			  body);
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t sep = strlen(FUZZ_SEP), off = 0;
	int i;

	if (g.runs++ % g.reset_every == 0 && g.runs > 1) {
		down();
		up();
	}
	for (i = 0; i < FUZZ_REQS && off <= size; i++) {
		size_t q = off, n, resp_len = 0;
		char *resp = NULL;
		int status;

		while (q + sep <= size && memcmp(data + q, FUZZ_SEP, sep) != 0)
			q++;
		n = q + sep <= size ? q - off : size - off;
		status = api_fuzz_request(g.api, data + off, n, &resp, &resp_len);
		if (g.verbose)
			fprintf(stderr, "  %.*s -> %d %.160s\n",
				(int)strcspn((const char *)data + off, "\n"), (const char *)data + off,
				status, resp && strstr(resp, "\r\n\r\n") ? strstr(resp, "\r\n\r\n") + 4
									  : "");
		answer_check(data + off, n, status, resp, resp_len);
		free(resp);
		off += n + sep;
	}
	return 0;
}
