/* harness — boardd's api started in-process on 127.0.0.1, port 0, over a fresh temporary FS
 * store, with a generated tokens structure. For the api tests, the reaper tests and the
 * benchmark. */
#ifndef BOARDD_TESTS_HARNESS_H
#define BOARDD_TESTS_HARNESS_H

#include "api/api.h"
#include "store/store_twins.h"
#include "tests/common/httpc.h"

#include <stdbool.h>
#include <stdint.h>

/* The plain tokens the harness installs (names in parentheses are the event actors):
 * worker (t-worker), a second worker (t-worker2), bot (t-bot), operator (t-operator), all
 * three roles (t-all), and all three roles scoped to HARNESS_SCOPED_BOARD only (t-scoped). */
#define HARNESS_TOK_WORKER "tok-worker-0123456789"
#define HARNESS_TOK_WORKER2 "tok-worker2-0123456789"
#define HARNESS_TOK_BOT "tok-bot-0123456789"
#define HARNESS_TOK_OPERATOR "tok-operator-0123456789"
#define HARNESS_TOK_ALL "tok-all-0123456789"
#define HARNESS_TOK_SCOPED "tok-scoped-0123456789"
#define HARNESS_SCOPED_BOARD "scoped"
/* Capability tokens: t-cap<i> (a bot holding only the cap 1 << i), t-nocaps (a bot holding
 * none), t-worker-read (a worker holding only board.read). */
#define HARNESS_N_CAPS 6
#define HARNESS_TOK_CAP_FMT "tok-cap%u-0123456789"
#define HARNESS_TOK_NOCAPS "tok-nocaps-0123456789"
#define HARNESS_TOK_WORKER_READ "tok-worker-read-0123456789"

struct harness_options {
	size_t max_body;             /* 0: 1 MiB */
	int64_t lease_min_ms;        /* 0: 1000 */
	int64_t lease_default_ms;    /* 0: 900000 */
	unsigned threads;            /* 0: 4 */
	unsigned conn_timeout_s;     /* 0: the api default (30) */
	struct api_reaper_hooks reaper; /* NULL hooks: /v1/reaper answers 503 */
	/* Called after the store is open and before the api starts (e.g. to start a reaper
	 * and fill *hooks). May be NULL. Returns false to abort the start. */
	bool (*before_api)(void *ctx, struct store *st, struct api_reaper_hooks *hooks);
	void *ctx;
	bool unix_socket;            /* listen on dir/api.sock (unix:) instead of 127.0.0.1:0 */
};

struct harness {
	char dir[256];               /* the temporary directory (removed by harness_stop) */
	struct store *st;
	struct api_tokens tokens;
	struct api *api;
	uint16_t port;               /* 0 on a Unix socket */
	char sock[300];              /* the Unix socket file, or "" */
};

/* Starts everything; opt may be NULL. Returns false (with a message on stderr) on failure,
 * h then needs no harness_stop. Request logs go to stderr only when BOARDD_TEST_LOG is set. */
bool harness_start(struct harness *h, const struct harness_options *opt);
/* Stops the api, closes the store, removes the directory. */
void harness_stop(struct harness *h);

/* A new keep-alive connection to the harness (its port or its socket file); caller closes
 * with httpc_close. */
struct httpc *harness_connect(const struct harness *h);

/* One JSON request: token may be NULL (no Authorization), body may be NULL, extra_header
 * one "Name: value" line or NULL. Returns the HTTP status (0 on a transport error);
 * *resp_body (may be NULL) receives the malloc'd body, *resp_headers likewise. */
int harness_call(struct httpc *c, const char *method, const char *path, const char *token,
		 const char *extra_header, const char *body, char **resp_body);
int harness_call_h(struct httpc *c, const char *method, const char *path, const char *token,
		   const char *extra_header, const char *body, char **resp_headers,
		   char **resp_body);

#endif
