/* api — boardd's HTTP/JSON front end (DESIGN §8) over libmicrohttpd.
 *
 * One daemon per struct api: an internal thread pool (epoll), one handler per route that
 * calls the store synchronously, one table that maps every enum core_rc to an HTTP status
 * (errors.c), bearer-token auth with roles and board scopes (auth.c).
 *
 * Ownership: api_start() borrows the store and the tokens for the lifetime of the api (the
 * caller keeps them alive until api_stop() returns). Everything else in api_config is copied.
 */
#ifndef BOARDD_API_H
#define BOARDD_API_H

#include "core/core.h"
#include "metrics/metrics.h"
#include "store/store.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------- */
/* Tokens (DESIGN §8, §10). Plain tokens are never stored: only their SHA-256.              */

enum api_role {
	API_ROLE_WORKER = 1u << 0,
	API_ROLE_BOT = 1u << 1,
	API_ROLE_OPERATOR = 1u << 2,
};
#define API_ROLE_ANY (API_ROLE_WORKER | API_ROLE_BOT | API_ROLE_OPERATOR)

/* Capabilities (DESIGN §13): what a token may do to the board, through /mcp and the REST
 * routes alike. One table; names are the tokens file's and `boardd token add --cap`'s. */
#define API_CAPS(X)                                                                        \
	X(API_CAP_READ, 0, "board.read")                                                   \
	X(API_CAP_CREATE, 1, "board.create")                                               \
	X(API_CAP_MOVE, 2, "board.move")                                                   \
	X(API_CAP_LABEL, 3, "board.label")                                                 \
	X(API_CAP_COMMENT, 4, "board.comment")                                             \
	X(API_CAP_CLOSE, 5, "board.close")

enum api_cap {
#define API_CAP_ENUM(id, bit, name) id = 1u << bit,
	API_CAPS(API_CAP_ENUM)
#undef API_CAP_ENUM
};
#define API_CAP_ALL 0x3fu

/* "board.move" -> API_CAP_MOVE; 0 when unknown. */
unsigned api_cap_parse(const char *s);
/* The name of one cap bit; NULL when not exactly one known bit. */
const char *api_cap_name(unsigned bit);

struct api_token {
	char *name;
	unsigned char sha256[32];
	unsigned roles;     /* enum api_role bits */
	unsigned caps;      /* enum api_cap bits; API_CAP_ALL unless the tokens file narrows it */
	bool all_boards;    /* boards: ["*"] */
	char **boards;      /* NULL-terminated list when !all_boards */
	size_t n_boards;
};

struct api_tokens {
	struct api_token *v;
	size_t n;
};

/* "worker" -> API_ROLE_WORKER; 0 when unknown. */
unsigned api_role_parse(const char *s);

/* Loads a tokens file ({"tokens":[{name, token_sha256, roles, boards, caps?}]}) into *out
 * (zeroed by the caller); a token without "caps" holds all six. On failure *out stays empty and err holds a readable reason. */
enum core_rc api_tokens_load(const char *path, struct api_tokens *out, char *err, size_t errlen);
/* Frees the contents; t is left empty. */
void api_tokens_release(struct api_tokens *t);
/* Whether name may name a token: the actor of its changes, so never one the server writes
 * itself: no ':' (the reaper's "reaper:<host>"), no '/' (agent tokens' "<holder>/agent"), no
 * control byte; at most API_TOKEN_NAME_MAX bytes. */
#define API_TOKEN_NAME_MAX 128
bool api_token_name_valid(const char *name);
/* Appends an in-memory token whose plain text is `plain` (tests, dev tokens). boards is a
 * NULL-terminated list, NULL or containing "*" for every board. */
enum core_rc api_tokens_push(struct api_tokens *t, const char *name, const char *plain,
			     unsigned roles, const char *const *boards);
/* The same with capabilities (enum api_cap bits, at least one). */
enum core_rc api_tokens_push_caps(struct api_tokens *t, const char *name, const char *plain,
				  unsigned roles, unsigned caps, const char *const *boards);
/* Writes t to path atomically (temp file + rename), mode 0600. */
enum core_rc api_tokens_save(const struct api_tokens *t, const char *path, char *err,
			     size_t errlen);
/* Fills plain (at least API_TOKEN_PLAIN_BUF bytes) with a new random token (32 bytes, hex). */
#define API_TOKEN_PLAIN_BUF 65
enum core_rc api_token_generate(char *plain);
/* Finds the token whose SHA-256 matches `plain`, comparing every entry in constant time.
 * Borrowed pointer into t, or NULL. */
const struct api_token *api_tokens_find(const struct api_tokens *t, const char *plain);
/* May this token see board `board`? */
bool api_token_board_allowed(const struct api_token *tok, const char *board);

/* ---------------------------------------------------------------------------------------- */
/* The server.                                                                               */

enum api_log_format {
	API_LOG_TEXT,
	API_LOG_JSON,
	API_LOG_NONE,
};

/* Reaper hooks the server fills in. Both return new references. NULL hooks: the reaper
 * routes answer 503 store_unavailable ("reaper not running"). */
struct api_reaper_hooks {
	json_t *(*status)(void *ctx);
	enum core_rc (*pass)(void *ctx, json_t **out);
	void *ctx;
};

struct api_config {
	const char *listen;          /* "127.0.0.1:8080", "[::1]:0", ":8080" (port 0: any), or
				      * "unix:PATH": a Unix-domain socket file, mode 0660,
				      * removed at api_stop (api/listen.c) */
	unsigned threads;            /* MHD thread pool size; 0: number of cores */
	size_t max_body;             /* request body limit; 0: 1 MiB */
	int64_t lease_default_ms;    /* claim lease and run lock when a body omits lease_ms */
	int64_t lease_min_ms;
	int64_t lease_max_ms;
	unsigned conn_timeout_s;     /* idle connections are dropped after this; 0: 30 */
	unsigned max_connections;    /* open connections in all; 0: 4096 */
	unsigned max_connections_per_ip; /* open connections from one address; 0: 512 */
	unsigned header_timeout_ms;  /* a request's headers must arrive whole within this of its
				      * first line (a new connection's: of its start); 0: 10000 */
	int64_t events_wait_max_ms;  /* cap on wait_ms of GET /v1/events; 0: 30000 */
	unsigned max_long_polls;     /* concurrent suspended long-polls; 0: 256 */
	unsigned max_streams;        /* open GET /v1/events/stream answers; 0: 128 */
	size_t max_answer_bytes;     /* bytes of answers built and not yet sent, all connections
				      * together: a large read answer past it is 503 busy; 0: 256 MiB */
	int64_t stream_heartbeat_ms; /* comment line on an idle stream; 0: 15000 */
	unsigned shutdown_grace_ms;  /* api_stop waits this long for open connections */
	const struct api_tokens *tokens; /* borrowed; required */
	enum api_log_format log_format;
	/* One line per request (no trailing newline); NULL: written to stderr. */
	void (*log)(void *ctx, const char *line);
	void *log_ctx;
	struct api_reaper_hooks reaper;
	/* The metrics registry (metrics/metrics.h), borrowed; NULL: the api keeps its own. */
	struct metrics *metrics;
	const char *version;         /* boardd_build_info's label; NULL: "unknown" */
	/* HTTPS (TLS 1.2+): a PEM certificate chain and its PEM key, both or neither; NULL:
	 * plain HTTP. Re-read by api_tls_reload. One api per process may serve TLS. */
	const char *tls_cert;
	const char *tls_key;
};

struct api;

/* Fills the defaults of DESIGN §10 (tokens and reaper hooks NULL). */
void api_config_init(struct api_config *cfg);

/* Starts listening. The store and cfg->tokens are borrowed until api_stop(). On failure
 * *out is NULL and err holds a readable reason. */
enum core_rc api_start(const struct api_config *cfg, struct store *st, struct api **out,
		       char *err, size_t errlen);
/* Replaces the tokens every new request is checked against (SIGHUP). Takes ownership of the
 * contents of *fresh (left empty); the api keeps every set it was given until api_stop(),
 * since requests in flight may still borrow from an older one. The set given to api_start()
 * stays the caller's. */
enum core_rc api_tokens_replace(struct api *a, struct api_tokens *fresh);

/* Re-reads the certificate and key named at start and serves them to new handshakes; the
 * listener and open connections stay. On failure (unreadable, unparsable, a key that is not
 * the certificate's) the pair in use stays and err says why. BAD_REQUEST when TLS is off. */
enum core_rc api_tls_reload(struct api *a, char *err, size_t errlen);
/* The metrics registry in use (cfg->metrics or the api's own); borrowed until api_stop. */
struct metrics *api_metrics(const struct api *a);
/* Counts board b's cards per column into m's activity ring (metrics/activity.h) at now_ms:
 * the gauge behind GET /v1/boards/{b}/activity, sampled each minute by the server. The
 * counts are the store's boardd_cards{board,state}: from `stats` (a store_stats sink, shared
 * by the boards of one sampling) or, when NULL, a store_stats of its own. use: a reader's
 * sample (takes the board a place in the ring's table if need be); false: the sampler's
 * (activity_sample's `use`). */
enum core_rc api_activity_sample(struct store *st, struct metrics *m, const struct core_board *b,
				 int64_t now_ms, const struct metrics_sink *stats, bool use);
/* The bound TCP port (useful with port 0); 0 on a unix: socket file. */
uint16_t api_port(const struct api *a);
/* Stops taking new connections (each is closed as it is accepted); in-flight requests and
 * open keep-alive connections go on. Idempotent; callable from any thread. */
void api_quiesce(struct api *a);
/* Quiesces, wakes long-polls, finishes in-flight requests, stops the threads, frees a. */
void api_stop(struct api *a);

/* The MCP tools (DESIGN §13), rendered from the one table api/mcp_tools.c serves: as the
 * `tools` array of tools/list (every tool, JSON, 2-space indented) or as the README's
 * Markdown section. New string, caller frees; NULL on out of memory. */
char *api_mcp_tools_render(bool markdown);

/* ---------------------------------------------------------------------------------------- */
/* Test/fuzz only: api/fuzz.c, linked by tests/fuzz and never by boardd.                    */

/* Runs one request made from arbitrary bytes through a started api's own daemon, over a
 * socketpair (no port). The bytes read as
 *     METHOD SP TARGET LF  (NAME ":" VALUE LF)*  LF  BODY
 * The method keeps its letters A-Z (none: GET), bytes HTTP forbids in the target are
 * percent-encoded, header lines keep what a header may hold; Host, Connection and the body
 * framing are set here (a Transfer-Encoding line asks for a chunked body). Returns the HTTP
 * status of the answer, 0 when the connection closed without one, -1 on a local failure or
 * when no answer came within 10 s (a hang). OUT: *resp (may be NULL) gets the raw answer,
 * NUL-terminated, caller frees; *resp_len its length. */
int api_fuzz_request(struct api *a, const uint8_t *data, size_t len, char **resp,
		     size_t *resp_len);

#endif
