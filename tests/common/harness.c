/* The in-process test server (see harness.h). */
#include "tests/common/harness.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void log_sink(void *ctx, const char *line)
{
	if (getenv("BOARDD_TEST_LOG"))
		fprintf(stderr, "%s\n", line);
}

/* A bot per capability holding only it (t-cap0 .. t-cap5, enum api_cap bit order), a bot
 * with none (t-nocaps) and a worker that holds only board.read (t-worker-read). */
static bool cap_tokens_add(struct api_tokens *t)
{
	char name[32], plain[64];
	unsigned i;

	for (i = 0; i < HARNESS_N_CAPS; i++) {
		snprintf(name, sizeof name, "t-cap%u", i);
		snprintf(plain, sizeof plain, HARNESS_TOK_CAP_FMT, i);
		if (api_tokens_push_caps(t, name, plain, API_ROLE_BOT, 1u << i, NULL) != CORE_OK)
			return false;
	}
	return api_tokens_push_caps(t, "t-nocaps", HARNESS_TOK_NOCAPS, API_ROLE_BOT, 0, NULL) ==
		       CORE_OK &&
	       api_tokens_push_caps(t, "t-worker-read", HARNESS_TOK_WORKER_READ, API_ROLE_WORKER,
				    API_CAP_READ, NULL) == CORE_OK;
}

static bool tokens_make(struct api_tokens *t)
{
	static const char *const scoped[] = {HARNESS_SCOPED_BOARD, NULL};

	return api_tokens_push(t, "t-worker", HARNESS_TOK_WORKER, API_ROLE_WORKER, NULL) ==
		       CORE_OK &&
	       api_tokens_push(t, "t-worker2", HARNESS_TOK_WORKER2, API_ROLE_WORKER, NULL) ==
		       CORE_OK &&
	       api_tokens_push(t, "t-bot", HARNESS_TOK_BOT, API_ROLE_BOT, NULL) == CORE_OK &&
	       api_tokens_push(t, "t-operator", HARNESS_TOK_OPERATOR, API_ROLE_OPERATOR, NULL) ==
		       CORE_OK &&
	       api_tokens_push(t, "t-all", HARNESS_TOK_ALL, API_ROLE_ANY, NULL) == CORE_OK &&
	       api_tokens_push(t, "t-scoped", HARNESS_TOK_SCOPED, API_ROLE_ANY, scoped) == CORE_OK &&
	       cap_tokens_add(t);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

bool harness_start(struct harness *h, const struct harness_options *opt)
{
	struct harness_options none = {0};
	struct api_config cfg;
	char spec[320], err[512];

	memset(h, 0, sizeof *h);
	if (!opt)
		opt = &none;
	snprintf(h->dir, sizeof h->dir, "/tmp/boardd-test-XXXXXX");
	if (!mkdtemp(h->dir)) {
		perror("harness: mkdtemp");
		return false;
	}
	snprintf(spec, sizeof spec, "fs:%s/data", h->dir);
	if (store_open(spec, NULL, &h->st, err, sizeof err) != CORE_OK) {
		fprintf(stderr, "harness: store_open %s: %s\n", spec, err);
		goto fail;
	}
	if (!tokens_make(&h->tokens)) {
		fprintf(stderr, "harness: tokens\n");
		goto fail;
	}
	api_config_init(&cfg);
	cfg.listen = "127.0.0.1:0";
	if (opt->unix_socket) {
		snprintf(h->sock, sizeof h->sock, "%s/api.sock", h->dir);
		snprintf(spec, sizeof spec, "unix:%s", h->sock);
		cfg.listen = spec;
	}
	cfg.threads = opt->threads ? opt->threads : 4;
	if (opt->max_body)
		cfg.max_body = opt->max_body;
	if (opt->lease_min_ms)
		cfg.lease_min_ms = opt->lease_min_ms;
	if (opt->conn_timeout_s)
		cfg.conn_timeout_s = opt->conn_timeout_s;
	if (opt->lease_default_ms)
		cfg.lease_default_ms = opt->lease_default_ms;
	cfg.tokens = &h->tokens;
	cfg.reaper = opt->reaper;
	cfg.log = log_sink;
	cfg.shutdown_grace_ms = 2000;
	if (opt->before_api && !opt->before_api(opt->ctx, h->st, &cfg.reaper)) {
		fprintf(stderr, "harness: before_api refused\n");
		goto fail;
	}
	if (api_start(&cfg, h->st, &h->api, err, sizeof err) != CORE_OK) {
		fprintf(stderr, "harness: api_start: %s\n", err);
		goto fail;
	}
	h->port = api_port(h->api);
	return true;
fail:
	harness_stop(h);
	return false;
}

void harness_stop(struct harness *h)
{
	api_stop(h->api);
	h->api = NULL;
	store_close(h->st);
	h->st = NULL;
	api_tokens_release(&h->tokens);
	if (h->dir[0] && !getenv("BOARDD_TEST_KEEP"))
		nftw(h->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	h->dir[0] = '\0';
}

struct httpc *harness_connect(const struct harness *h)
{
	return h->sock[0] ? httpc_connect_unix(h->sock) : httpc_connect("127.0.0.1", h->port);
}

int harness_call_h(struct httpc *c, const char *method, const char *path, const char *token,
		   const char *extra_header, const char *body, char **resp_headers,
		   char **resp_body)
{
	char auth[2200]; /* agent tokens are longer than plain ones */
	const char *hdrs[4];
	size_t n = 0;
	int status = 0;

	if (token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
		hdrs[n++] = auth;
	}
	if (body)
		hdrs[n++] = "Content-Type: application/json";
	if (extra_header)
		hdrs[n++] = extra_header;
	hdrs[n] = NULL;
	if (httpc_request(c, method, path, hdrs, body, &status, resp_headers, resp_body) != 0)
		return 0;
	return status;
}

int harness_call(struct httpc *c, const char *method, const char *path, const char *token,
		 const char *extra_header, const char *body, char **resp_body)
{
	return harness_call_h(c, method, path, token, extra_header, body, NULL, resp_body);
}
