/* api internals: shared by the files of api/ only (not a public header). */
#ifndef BOARDD_API_INT_H
#define BOARDD_API_INT_H

#include "api/api.h"

#include <gnutls/abstract.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#define API_MAX_PARAMS 4
#define API_DETAIL_MAX 256
#define API_STRING_MAX 65536 /* titles, bodies, comments */
#define API_REASON_MAX 256   /* state reasons, gave_up reasons */

struct api_req;

/* A handler returns CORE_OK after filling r->status/r->out, or an error code (with an
 * optional r->detail); it never renders an error itself. */
typedef enum core_rc (*api_handler_fn)(struct api_req *r);

enum api_route_flags {
	API_ROUTE_PUBLIC = 1u << 0, /* no token needed */
	API_ROUTE_BODY = 1u << 1,   /* expects a JSON body */
	API_ROUTE_JSONRPC = 1u << 2, /* errors before the handler answer as JSON-RPC (/mcp) */
	API_ROUTE_FLAT = 1u << 3,   /* the handler reads its body only through the api_json_*
				     * helpers: a flat body is parsed without a tree (body.c) */
};
/* A route's capability (enum api_cap) rides in its flags above this shift; a route whose
 * need depends on the body (PATCH state: move or close) checks in its handler. */
#define API_ROUTE_CAP_SHIFT 8
#define API_ROUTE_CAP(cap) ((unsigned)(cap) << API_ROUTE_CAP_SHIFT)

struct api_route {
	const char *method;
	const char *pattern; /* "/v1/cards/{id}/claim" */
	api_handler_fn handler;
	unsigned roles; /* enum api_role bits; checked before the handler (finer checks inside) */
	unsigned flags;
	const char *fields; /* API_ROUTE_BODY: the body's fields, "a b ?c" (?: may be null) */
	const char *query;  /* the query parameters it reads, "a b"; NULL: none */
};

/* A flat body (body.c): one object of scalar members, strings NUL-terminated in place in
 * r->body (borrowed from it). */
#define API_FLAT_MAX 8
enum api_flat_type {
	API_FLAT_NULL,
	API_FLAT_STR,
	API_FLAT_INT,
	API_FLAT_BOOL,
};

struct api_flat_field {
	const char *key;
	size_t klen;
	enum api_flat_type type;
	const char *str; /* API_FLAT_STR, len bytes of printable ASCII */
	size_t len;
	int64_t i;       /* API_FLAT_INT */
	bool b;          /* API_FLAT_BOOL */
};

struct api_flat {
	struct api_flat_field f[API_FLAT_MAX];
	size_t n;
	bool on; /* parsed: the body's members, in order */
};

enum api_poll_state {
	API_POLL_NONE,
	API_POLL_WAITING,
	API_POLL_DONE,
};

/* Per TCP connection (MHD's socket context, conns.c): the last bearer token verified on it, so
 * a keep-alive client is not hashed again on every request (auth.c), and what the headers
 * deadline needs (conns.c's sweeper; fields below `conns` are under api->conns.mu). */
#define API_TOKEN_CACHE_MAX 128
struct api_conn {
	char plain[API_TOKEN_CACHE_MAX];
	size_t len;                  /* 0: nothing cached */
	const struct api_token *tok; /* what `plain` resolved to */
	unsigned tokens_gen;         /* api->tokens_gen when cached; another: stale */

	struct api_conn *prev, *next; /* api->conns */
	int fd;
	int64_t ready_ms;            /* monotonic: started, or answered its last request */
	int64_t line_ms;             /* monotonic: the current request's line arrived; 0: none */
	bool served;                 /* answered a request (then idle until ready_ms + idle) */
	bool in_request;             /* headers arrived; the request is being served */
	bool cut;                    /* the sweeper shut it down */
	struct api_req *spare;       /* owned: the last request's memory, for the next (api.c:
				      * keep-alive requests skip a 1.5 KiB calloc and free) */
};

enum api_ack_state {
	API_ACK_NONE,
	API_ACK_WAITING,
	API_ACK_DONE,
};

/* The request headers api_req_header finds (one table: headers.c's head_names). */
enum api_hdr {
	API_HDR_CONTENT_LENGTH,
	API_HDR_TRANSFER_ENCODING,
	API_HDR_CONTENT_TYPE,
	API_HDR_AUTHORIZATION,
	API_HDR_IF_MATCH,
	API_HDR_N,
};

/* Per-request state, allocated on the first callback into *req_cls and freed only in the
 * completion callback (api.c). */
struct api_req {
	struct api *api;
	struct MHD_Connection *conn;
	const char *method;          /* borrowed from MHD for the request */
	const char *uri_raw;         /* the request target as on_uri got it (borrowed from MHD; */
	size_t uri_len;              /* a NUL inside cuts it short: api_bytes_check) */
	bool uri_ctl;                /* a control byte in it (seen by on_uri: the library then
				      * writes NULs into the target as it splits the query) */
	char *path;                  /* owned: the raw (still escaped) path */
	int64_t t0_ns;               /* monotonic start */
	bool started;                /* headers checked, route resolved */
	bool close_after;            /* answer with Connection: close (framing in doubt) */
	bool raw_answered;           /* answered on the socket by api_problem_write_raw */
	bool accounted;              /* counted and logged (access_log.c's api_req_account) */
	bool answered;               /* a response was queued */
	unsigned final_status;

	/* body */
	char *body;                  /* owned, NUL-terminated, NULL when empty */
	size_t body_len, body_cap;
	bool body_too_large;
	size_t body_discarded;
	json_t *json;                /* owned: the parsed body (API_ROUTE_BODY routes) */
	struct api_flat flat;        /* or, API_ROUTE_FLAT routes, the flat body (body.c) */

	/* routing and auth */
	const struct api_route *route;
	char *params[API_MAX_PARAMS]; /* owned: percent-decoded path parameters */
	size_t n_params;
	enum core_rc early_rc;        /* an error found before the handler (CORE_OK: none) */
	char allow[64];               /* for 405 */
	const struct api_token *tok;  /* borrowed from api->tokens, or &agent_tok */
	struct api_token agent_tok;   /* owned: an agent token's identity (agent.c) */
	int64_t agent_epoch;          /* the claim epoch an agent token is bound to; 0: none */
	char *qdec[8];                /* owned: decoded query values */
	size_t n_qdec;

	/* output (handlers fill these) */
	unsigned status;
	json_t *out;                 /* owned: the JSON body */
	const char *raw_body;        /* static text body (metrics, openapi) with raw_type */
	char *raw_owned;             /* owned raw body */
	size_t answer_held;          /* bytes of its answer counted in api.answer_bytes */
	size_t raw_len;
	const char *raw_type;
	char location[CORE_ID_MAX + 32];
	char detail[API_DETAIL_MAX];
	struct MHD_Response *resp;   /* owned: a handler's own answer (the event stream), queued
				      * as it is */
	const char *const *headers;  /* static NULL-terminated name, value, ... pairs added to
				      * the success answer (the UI's security headers) */
	const char *cache_control;   /* static; NULL: no-store */

	/* events long-poll (events.c); `suspended` is only touched by MHD's thread, the poll_*
	 * results only by the helper until it resumes the connection */
	bool suspended;
	enum api_poll_state poll;
	enum core_rc poll_rc;
	struct core_event *poll_ev;
	size_t poll_n;
	int64_t poll_next;
	int64_t poll_after;
	size_t poll_limit;
	int64_t poll_wait_ms;
	char *poll_board;            /* owned */
	bool poll_by_board;          /* the board's own seq (a token scoped to boards) */

	/* claim-next long-poll (claimnext.c): next_link and next_parked are guarded by the
	 * waker's mutex while parked; the rest is only touched by MHD's thread */
	struct api_req *next_link;
	bool next_parked;
	bool next_woken;             /* resumed by the waker: the checks were made already */
	int64_t next_deadline;       /* monotonic ms */
	char next_board[CORE_NAME_MAX + 1];

	/* deferred acknowledgement (answer.c): a write's answer waits, connection suspended, for
	 * the store to make it durable; ack_rc is set by the store's thread before it resumes */
	struct store_ack ack;
	enum api_ack_state ack_state;
	enum core_rc ack_rc;         /* the durability outcome */
	enum core_rc handler_rc;     /* what the handler returned, answered once durable */
	unsigned params_heap;        /* bit i: params[i] was malloc'd (else it is in inl.params) */
	/* The headers boardd reads, found in one pass over the request's (api_req_header) */
	struct {
		const char *v[API_HDR_N];  /* the first of each; borrowed from MHD for the request */
		bool cl_disagree;          /* two Content-Length headers that differ */
		bool auth_twice;           /* more than one Authorization header */
		bool te_twice;             /* more than one Transfer-Encoding header */
		const char *bad;           /* a header holding a NUL or a control byte (its name) */
		const char *line_end;      /* the scan: where the last line read ends (headers.c) */
		bool scanned;
	} hdr;

	/* Storage that lives as long as the struct, which a keep-alive connection reuses for its
	 * next request (api_conn.spare): the path, a small body and the decoded path parameters
	 * go here instead of in a malloc each; larger ones are malloc'd. Last in the struct:
	 * req_new clears only what is above (API_REQ_CLEAR). */
	struct {
		char path[256];
		char body[512];
		char params[256];      /* the decoded parameters, each NUL-terminated */
		size_t params_len;     /* bytes of `params` in use */
	} inl;
};
/* The part of struct api_req a new request starts zeroed. */
#define API_REQ_CLEAR offsetof(struct api_req, inl)


#define API_ACKS_CLOSED (1u << 31)

/* Where the api listens (listen.c): a TCP address libmicrohttpd binds, or a Unix-domain socket
 * file bound here. */
struct api_listen {
	struct sockaddr_storage ss;  /* TCP: the address; len 0 for a socket file */
	socklen_t len;
	bool v6;
	int fd;                      /* bound and listening (TCP: once api_start bound it); -1 */
	char *path;                  /* unix: the socket file (owned); NULL for TCP */
	dev_t dev;                   /* unix: the file we bound, removed at stop only if it */
	ino_t ino;                   /* is still this one */
};

struct api {
	struct MHD_Daemon *daemon;
	struct store *st;
	const struct api_tokens *tokens;
	/* Tokens: replaced whole on SIGHUP (api_tokens_replace); requests load the pointer once.
	 * Every set handed over is kept in `owned` until api_stop. */
	const struct api_tokens *_Atomic tokens_now;
	atomic_uint tokens_gen;
	struct api_tokens **owned;
	size_t n_owned;
	pthread_mutex_t tokens_mu;   /* replacements */
	struct api_config cfg;
	char *listen;                /* owned copy of cfg.listen */
	struct api_listen where;     /* parsed cfg.listen; the socket file, when unix: */
	char *tls_cert, *tls_key;    /* owned copies of cfg.tls_cert / tls_key */
	uint16_t port;
	/* Stopping: every new connection is closed as it is accepted (api_on_accept, listen.c). */
	atomic_bool draining;
	/* The thread that accepts on where.fd and deals the connections out to libmicrohttpd's
	 * threads in turn (listen.c, acceptor_main). */
	struct {
		pthread_t th;
		int wake;      /* eventfd: acceptor_stop */
		unsigned next; /* the pool thread the next connection goes to (its thread only) */
		bool started;
	} acceptor;

	/* metrics (metrics.c) */
	struct metrics *metrics;     /* cfg.metrics, or owned when metrics_owned */
	bool metrics_owned;
	bool tls;                    /* serving HTTPS (tls.c) */
	/* boardd_http_request_duration_seconds: one histogram per (route slot, method, code),
	 * allocated on its first request; route slots are the router table's rows, then
	 * "unmatched" */
	_Atomic(struct metrics_hist *) *http_series;
	size_t http_routes;
	atomic_ulong header_timeouts;   /* connections cut by the headers deadline */
	atomic_ulong library_answers;   /* requests libmicrohttpd answered itself */
	atomic_ulong connections_refused; /* over --max-connections or --max-connections-per-ip */
	/* Bytes of JSON answers built and not yet sent whole (a client that does not read keeps
	 * its answer here): cfg.max_answer_bytes bounds them (answer.c, answer_hold). */
	atomic_size_t answer_bytes;
	atomic_ulong answers_refused;   /* large reads refused 503 busy by that bound */
	_Atomic int64_t lib_log_last_ms; /* libmicrohttpd's other messages: one line per 5 s */

	/* open connections, for the headers deadline (conns.c's sweeper thread) */
	struct {
		pthread_mutex_t mu;
		pthread_cond_t cv;
		pthread_t th;
		struct api_conn *head;
		unsigned n;
		bool started, stop;
	} conns;

	/* the access log on stderr (access_log.c): lines queue in `buf`; a writer thread empties it
	 * with one write(2) per batch */
	struct {
		pthread_mutex_t mu;
		pthread_cond_t cv;   /* the writer's: a first line, or stop */
		pthread_cond_t idle; /* the writer finished a batch */
		pthread_t th;
		char *buf, *out; /* API_LOG_BUF bytes each: filling, being written */
		size_t len;
		bool started, busy, stop;
	} log;

	/* the agent-token signing key (agent.c), read from the store on first use */
	pthread_mutex_t agent_mu;
	bool agent_key_ok;
	unsigned char agent_key[STORE_SECRET_LEN];
	struct api_next *next;       /* claim-next's waiters and waker (claimnext.c) */

	/* long-polls in flight (helper threads) */
	pthread_mutex_t poll_mu;
	pthread_cond_t poll_cv;
	unsigned polls;
	atomic_uint acks;            /* requests bound to a store_ack, until answered or resumed,
				      * | API_ACKS_CLOSED once api_stop waits for them (answer.c) */
	bool stopping;

	struct api_streams *streams; /* GET /v1/events/stream (stream.c) */
};

/* ---- errors.c: the one error table and the one renderer ---- */
unsigned api_rc_status(enum core_rc rc);
const char *api_rc_title(enum core_rc rc);
/* The detail a problem carries when its handler gave none. */
const char *api_rc_detail(enum core_rc rc);
/* The problem+json body for rc (detail may be ""): a new string (caller frees), NULL on OOM;
 * *status gets the HTTP status. */
char *api_problem_text(enum core_rc rc, const char *detail, unsigned *status);
/* Replaces, in place, every byte of s that is not part of a valid UTF-8 sequence with '?'
 * (what a JSON string may carry). */
void api_text_utf8(char *s);
/* Records a detail for the error the handler is about to return; returns rc. */
enum core_rc api_fail(struct api_req *r, enum core_rc rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- headers.c: the request's headers ---- */
/* The first request header `h` (as MHD_lookup_connection_value finds it), or NULL; the
 * first call reads every header once for all of them. Borrowed from MHD for the request. */
const char *api_req_header(struct api_req *r, enum api_hdr h);
/* A Content-Length other than 0, or a Transfer-Encoding. */
bool api_request_has_body(struct api_req *r);
/* The body's framing, before anything else: a request whose length is in doubt is refused
 * (with close_after set). */
enum core_rc api_framing_check(struct api_req *r);
/* 400 (closing the connection) for a NUL or a control byte in the request target (version:
 * what libmicrohttpd gave on_request) or in any header's name or value: libmicrohttpd hands
 * out C strings, so a NUL would silently cut a path, a token or a length short. */
enum core_rc api_bytes_check(struct api_req *r, const char *version);
/* A NUL or a control byte (but HTAB) in [s, s+n). */
bool api_has_ctl(const char *s, size_t n);
/* Is ct (a Content-Type value; NULL: none) application/json, with or without parameters? */
bool api_json_media_type(const char *ct);

/* ---- answer.c: dispatch, answers, the deferred acknowledgement ---- */
#define API_ANSWER_BYTES_MAX ((size_t)256 << 20) /* default of cfg.max_answer_bytes */
/* Queues resp with status (adds the common headers), records the status for the log and the
 * metrics, and destroys resp. */
enum MHD_Result api_response_queue(struct api_req *r, unsigned status, struct MHD_Response *resp);
/* Queues the problem+json answer for rc (detail may be ""); JSON-RPC on /mcp. */
enum MHD_Result api_problem_queue(struct api_req *r, enum core_rc rc, const char *detail);
/* Answers rc straight on the socket, before libmicrohttpd has parsed the request (which it
 * could not: a target longer than its buffer, more query parameters than its pool holds),
 * then shuts the socket for writing. False when it cannot (TLS, OOM): libmicrohttpd answers. */
bool api_problem_write_raw(struct api_req *r, enum core_rc rc, const char *detail);
/* The request is whole (headers and body): parses its body, runs its handler and queues the
 * answer, or suspends the connection until the store made the write durable (then, resumed,
 * queues the answer kept for it). */
enum MHD_Result api_dispatch(struct api_req *r);

/* ---- access_log.c: the access log and the per-answer accounting ---- */
/* The text access-log line into line (API_LOG_LINE_MAX bytes), exactly as
 * snprintf("%s %s %.200s %u %.1fms%s%s%s%s", ts, method, path, status, ns / 1e6,
 * tok ? " " : "", tok ? tok : "", by[0] ? " answered-by=" : "", by) would write it
 * (access_log.c);
 * returns its length. method is at most 39 bytes (escaped). */
#define API_LOG_LINE_MAX 1024
size_t api_log_text(char *line, const char *ts, const char *method, const char *path,
		    unsigned status, int64_t ns, const char *tok, const char *by);
/* The writer thread (unless cfg.log takes the lines); stop writes what is queued. */
void api_log_start(struct api *a);
void api_log_stop(struct api *a);
/* One line (without its newline) into the log. */
void api_log_emit(struct api *a, const char *line);
/* Counts r's answer in the metrics and writes its log line, once (now_ns: monotonic). */
void api_req_account_at(struct api *a, struct api_req *r, int64_t now_ns);
void api_req_account(struct api *a, struct api_req *r);

/* ---- conns.c: the open connections and the headers deadline ---- */
/* The connection's state (NULL when its socket context is gone). */
static inline struct api_conn *api_conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}
/* A request's headers arrived (in_request) or its answer ended (now_ms, monotonic: the
 * connection's idle time starts then). */
void api_conn_mark(struct api *a, struct MHD_Connection *conn, bool in_request,
		   int64_t now_ms);
/* The request line arrived (at now_ms, monotonic): its headers' deadline runs from then. */
void api_conn_line(struct api *a, struct MHD_Connection *conn, int64_t now_ms);
/* MHD_OPTION_NOTIFY_CONNECTION: tracks a connection from its start to its close. */
void api_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		     enum MHD_ConnectionNotificationCode toe);
/* The sweeper thread (inits conns.mu and conns.cv); stop after the daemon stopped. */
bool api_sweeper_start(struct api *a);
void api_sweeper_stop(struct api *a);

/* ---- tokens.c: the served token sets ---- */
/* The token named `name` in t (the first), or NULL. */
const struct api_token *api_tokens_named(const struct api_tokens *t, const char *name);
/* Frees every set api_tokens_replace was handed (api_stop). */
void api_tokens_free(struct api *a);

/* ---- listen.c ---- */
/* Parses spec ("HOST:PORT", "[V6]:PORT", ":PORT" or "unix:PATH"). For unix:PATH also binds
 * and listens on the socket file (see listen.c for its rules: too long, not a socket, live,
 * stale), so l->fd is a listening socket the caller hands over or releases. On failure l
 * holds nothing and err says why (BAD_REQUEST: the spec; ALREADY_EXISTS: a file or a live
 * server is in the way; STORE_UNAVAILABLE: a system call failed). */
enum core_rc api_listen_open(const char *spec, struct api_listen *l, char *err, size_t errlen);
/* Closes l->fd unless it is -1 (set it to -1 once libmicrohttpd owns it), removes the socket
 * file if it is still the one bound, frees l's contents. */
void api_listen_release(struct api_listen *l);
/* The TCP listen socket for ss (libmicrohttpd's own settings: SO_REUSEADDR, IPv6 only on a v6
 * address, the system's backlog), non-blocking as a socket file's; -1 with errno set. */
int api_listen_tcp(const struct sockaddr_storage *ss, socklen_t len, bool v6);
/* MHD's accept policy: refuses every connection once a->draining. */
enum MHD_Result api_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* The acceptor thread on a->where.fd (0 or an errno); stop joins it (the socket itself is
 * closed by api_listen_release). */
int api_acceptor_start(struct api *a);
void api_acceptor_stop(struct api *a);

/* ---- tls.c: HTTPS with a certificate re-read on SIGHUP ---- */
/* Loads cfg.tls_cert/tls_key when set (a->tls on success); err says what is wrong. */
enum core_rc api_tls_setup(struct api *a, char *err, size_t errlen);
void api_tls_release(struct api *a);
/* MHD_OPTION_HTTPS_PRIORITIES: TLS 1.2 and 1.3 only. */
const char *api_tls_priorities(void);
/* MHD_OPTION_HTTPS_CERT_CALLBACK2: the current pair, copied for each handshake. */
int api_tls_cert_callback(gnutls_session_t session, const struct gnutls_cert_retr_st *info,
			  gnutls_pcert_st **certs, unsigned int *certs_length,
			  gnutls_ocsp_data_st **ocsp, unsigned int *ocsp_length,
			  gnutls_privkey_t *privkey, unsigned int *flags);
/* The served certificate's expiry (METRICS_TLS_NOT_AFTER) when TLS is on. */
void api_tls_collect(const struct api *a, struct metrics_sink *s);

/* ---- metrics.c: the api's samples for /metrics ---- */
enum core_rc api_metrics_init(struct api *a);
void api_metrics_release(struct api *a);
/* A finished request: its latency by route template, method and status (lock-free). */
void api_metrics_request(struct api *a, const struct api_req *r, uint64_t ns);

/* ---- router.c ---- */
/* Resolves r->path against the table: sets r->route and r->params, or returns NOT_FOUND /
 * METHOD_NOT_ALLOWED (filling r->allow) / BAD_REQUEST (undecodable segment). */
enum core_rc api_router_match(struct api_req *r);
const struct api_route *api_router_table(size_t *n);

/* ---- auth.c: a request's token ---- */
/* Checks the bearer token and the route's roles. */
enum core_rc api_auth_check(struct api_req *r);
/* 403 unless the token sees `board`. */
enum core_rc api_auth_board(struct api_req *r, const char *board);
static inline bool api_auth_has(const struct api_req *r, unsigned roles)
{
	return r->tok && (r->tok->roles & roles);
}
/* 403 naming the capability unless the token holds every bit of `caps`. */
enum core_rc api_auth_cap(struct api_req *r, unsigned caps);
/* The capability a state write into column `to` of board `board` needs: board.close into a
 * terminal column, board.move otherwise (an unknown board or column: board.move, and the
 * store refuses the write itself). */
unsigned api_auth_state_cap(struct api_req *r, const char *board, const char *to);

/* ---- agent.c: agent tokens ---- */
/* Does this bearer token look like an agent token? */
bool api_agent_is(const char *plain);
/* Verifies an agent token (signature, expiry, the claim still current) and points r->tok at
 * the request's own token for it. UNAUTHORIZED with a detail otherwise. */
enum core_rc api_agent_auth(struct api_req *r, const char *plain);
/* (An agent token also dies with the token that minted it: removed or changed on reload.) */
/* Frees r->agent_tok's contents. */
void api_agent_release(struct api_req *r);
enum core_rc api_h_agent_token(struct api_req *r);

/* ---- mcp.c, mcp_tools.c: POST /mcp (DESIGN §13) ---- */
enum core_rc api_h_mcp(struct api_req *r);
/* tools/list's `tools` for a token holding `caps` (new reference; NULL on OOM). */
json_t *api_mcp_tools_json(unsigned caps);
/* Runs tool `name` with `args` (an object) for r's token. OUT: *result, the CallToolResult
 * (new reference) also for a refusal (isError). NOT_FOUND: no such tool; FORBIDDEN: not
 * granted (detail set); NOMEM, STORE_UNAVAILABLE, INTERNAL: no answer to give. */
enum core_rc api_mcp_tool_call(struct api_req *r, const char *name, json_t *args,
			       json_t **result);
/* Renders a JSON-RPC error answer for an error found before the /mcp handler ran. */
json_t *api_mcp_early_error(enum core_rc rc, const char *detail);
/* The token's board list for store filters: NULL for all boards (borrowed). */
const char *const *api_auth_boards(const struct api_req *r);
/* The actor recorded on events. */
struct store_actor api_auth_actor(const struct api_req *r);

/* ---- body.c: flat bodies without a tree ---- */
/* Parses [body, body+len) when it is a flat object (see body.c for the subset), writing the
 * NULs that end its keys and strings into body; false, body untouched and *out off, for
 * anything else (json_loadb judges it then). */
bool api_flat_parse(char *body, size_t len, struct api_flat *out);
/* The member `key` of a parsed flat body; NULL when absent (borrowed from fl). */
const struct api_flat_field *api_flat_get(const struct api_flat *fl, const char *key);

/* ---- request.c: bodies, queries, JSON helpers ---- */
/* Percent-decodes [s, s+len) into a new string (caller frees); NULL on a bad escape or a
 * decoded NUL, which would silently cut the value short. *oom tells allocation failure. */
char *api_pct_decode(const char *s, size_t len, bool plus_space, bool *oom);
/* The same into out (len + 1 bytes); false on a bad escape or a decoded NUL. */
bool api_pct_decode_to(const char *s, size_t len, bool plus_space, char *out);
/* Parses r->body (API_ROUTE_FLAT routes: into r->flat when it is flat, else) into r->json (an
 * object) and checks its fields against the route's list; BAD_REQUEST with a detail
 * otherwise. */
enum core_rc api_body_parse(struct api_req *r);
/* The same with json_loadb only (the path every body took before body.c; the tests compare). */
enum core_rc api_body_parse_tree(struct api_req *r);
/* A route without API_ROUTE_BODY has an empty schema: no body, an empty one (whitespace
 * only) or {} pass; a member or a non-object is BAD_REQUEST, in api_body_parse's words. */
enum core_rc api_body_none(struct api_req *r);
/* Is `key` in the body, null included? */
bool api_json_has(struct api_req *r, const char *key);
/* Test/fuzz only (api/fuzz_body.c, never linked into boardd): `body` through api_body_parse
 * and api_body_parse_tree for the (route_sel modulo their number)-th API_ROUTE_FLAT route.
 * NULL when both agree on the outcome, its detail and every helper's reading of the body;
 * else what differed (valid until the next call on this thread). *flat: the flat parser
 * took the body. */
const char *api_fuzz_body(unsigned route_sel, const char *body, size_t len, bool *flat);
/* Every key of obj must be in spec ("a b ?c": c may be null, the others may not): else
 * BAD_REQUEST naming the field (prefixed with `prefix`, e.g. "gave_up."). */
enum core_rc api_json_fields_check(struct api_req *r, const json_t *obj, const char *spec,
				   const char *prefix);
/* Every query parameter must be one the route reads, given once: else BAD_REQUEST naming it. */
enum core_rc api_query_check(struct api_req *r);
/* Query parameter, percent-decoded into a copy the request owns; *out NULL when absent.
 * BAD_REQUEST when the value cannot be decoded safely (bad escape, embedded NUL). */
enum core_rc api_query(struct api_req *r, const char *key, const char **out);
enum core_rc api_query_int(struct api_req *r, const char *key, int64_t def, int64_t min,
			   int64_t max, int64_t *out);
/* Body fields. `required`: missing -> BAD_REQUEST. Wrong type -> BAD_REQUEST. */
enum core_rc api_json_str(struct api_req *r, const char *key, bool required, size_t max,
			  const char **out);
enum core_rc api_json_id(struct api_req *r, const char *key, bool required, const char **out);
enum core_rc api_json_marker(struct api_req *r, bool client, const char **out);
/* "reason" of a state write or a reopen (optional): BAD_REQUEST for a machine reason
 * (core_is_machine_reason), which only the server writes (DESIGN §7), but for an operator's
 * `migration` (deploy/boardd-copy). */
enum core_rc api_json_reason(struct api_req *r, const char **out);
enum core_rc api_json_int(struct api_req *r, const char *key, bool required, int64_t *out,
			  bool *present);
enum core_rc api_json_bool(struct api_req *r, const char *key, bool required, bool *out);
/* A list of strings; each checked with `valid` (core_label_valid, core_id_valid). *out is
 * zeroed by the caller and released by it. *present tells whether the key was there. */
enum core_rc api_json_strv(struct api_req *r, const json_t *obj, const char *key,
			   bool (*valid)(const char *), struct core_strv *out, bool *present);
/* "priority" from the body: an int32 (absent: *out untouched, *present false). */
enum core_rc api_json_priority(struct api_req *r, int32_t *out, bool *present);
/* lease_ms from the body, default and bounds from the config. */
enum core_rc api_json_lease(struct api_req *r, int64_t *out);
/* The same, but absent is 0: "keep the claim's (run's) own" (claims.c). */
enum core_rc api_json_lease_keep(struct api_req *r, int64_t *out);
/* If-Match: "<epoch>" or a bare integer. Missing -> PRECONDITION_REQUIRED. */
enum core_rc api_if_match(struct api_req *r, int64_t *epoch);
/* A column or board name field ([A-Za-z0-9._-]{1,64}). */
enum core_rc api_json_name(struct api_req *r, const char *key, bool required, const char **out);
/* The first path parameter ({id}, {b}); NULL when the route has none. */
const char *api_param(const struct api_req *r);
/* RFC 3339 time as a new JSON string (NULL on OOM). */
json_t *api_time_json(int64_t ms);
/* Monotonic milliseconds, for durations and deadlines. */
int64_t api_mono_ms(void);
/* Monotonic nanoseconds (a request's start and duration). */
static inline int64_t api_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
/* Sets a JSON answer (takes the reference; NULL means out of memory). */
enum core_rc api_reply(struct api_req *r, unsigned status, json_t *out);
/* Sets a JSON answer already written as text (takes text, malloc'd; NULL means out of
 * memory): the hot answers skip the jansson tree. */
enum core_rc api_reply_json_text(struct api_req *r, unsigned status, char *text, size_t len);

/* ---- answer_json.c: the hot answers as text ---- */
/* A claim's answer: the token of DESIGN §3 ({marker, epoch, claimed_at, lease_until,
 * lease_ms, renew_after_ms, fresh}, times from c's claim) or, with_card, {"card": <c>,
 * "token": <that>} (claim-next, DESIGN §12). New string (caller frees) and its length; NULL
 * on OOM or a string that is not UTF-8 (json_pack refused those). */
char *api_claim_json_text(const struct core_card *c, const struct core_token *t, bool fresh,
			  bool with_card, size_t *len);
/* POST renew's answer {marker, epoch, lease_until, lease_ms} for the renewed card c, written
 * the same way. */
char *api_renew_json_text(const struct core_card *c, const char *marker, size_t *len);

/* ---- handlers: cards.c, claims.c, runs.c, events.c, boards.c, admin.c, meta.c ---- */
/* Reads card `id` and checks the token may see its board; caller frees *out. */
enum core_rc api_card_load(struct api_req *r, const char *id, struct core_card **out);
/* Checks the token may see the board of card `id` (MCP tools name the card in their
 * arguments). */
enum core_rc api_card_scope_id(struct api_req *r, const char *id);
/* Checks the token may see the board of the path's card (before a mutation: a card never
 * changes board). */
enum core_rc api_card_scope(struct api_req *r);
/* The same before a write whose store call reads the card itself (claim, renew, release, the
 * owned writes): a token that sees every board skips the read (a copy of the card) and only
 * the id is checked; the store's NOT_FOUND then goes through api_card_missing, so the answer
 * is the one api_card_scope gives. */
enum core_rc api_card_scope_lazy(struct api_req *r);
/* rc; NOT_FOUND with no detail yet gets api_card_load's "no card <id>". */
enum core_rc api_card_missing(struct api_req *r, enum core_rc rc);
/* The detail of a state write into `col` refused with rc: TRANSITION_REJECTED names `col`
 * when board `board` has no such column; TERMINAL_STATE_EXIT into a terminal `col` says a
 * refiling is the operator's (ADR-096 §5). Returns rc. */
enum core_rc api_column_detail(struct api_req *r, enum core_rc rc, const char *board,
			       const char *col);
/* The detail of a refused card creation (the board, the column, the blocker, the size), for
 * POST /v1/cards and the create_card tool alike; returns rc. */
enum core_rc api_card_create_detail(struct api_req *r, enum core_rc rc,
				    const struct store_card_create *in);
/* Creates the card the body describes (id, board, title, body, state, labels, blockers,
 * priority), checked the same way for POST /v1/cards and the create_card tool (`title`
 * required there): the fields, then the token's board, then the store (its refusal with
 * api_card_create_detail's detail). *out: the card (caller frees). */
enum core_rc api_card_create(struct api_req *r, bool title_required, struct core_card **out);
/* BAD_REQUEST unless `after` (NULL: none) is a card list cursor (the next of a page). */
enum core_rc api_list_after_check(struct api_req *r, const char *after);
/* store_card_list for an answer: a page whose cards hold more than API_LIST_BYTES is cut
 * before the card that passes it (never below one card), with the store's `next` for the
 * cut page, so one list answer stays a few MiB however large the cards (1 MiB each, 1000
 * a page, would be 1 GiB). Same outputs as store_card_list. */
#define API_LIST_BYTES ((size_t)8 << 20)
enum core_rc api_card_page(struct api_req *r, struct store_card_filter *f,
			   struct core_card ***cards, size_t *n, char **next);
/* The detail of a label write refused for the card's label count; returns rc. */
enum core_rc api_labels_detail(struct api_req *r, enum core_rc rc);
/* The detail of a card write refused as too large (comments or bytes); returns rc. */
enum core_rc api_card_too_large_detail(struct api_req *r, const char *id);
/* Answers the card (consumes it). */
enum core_rc api_reply_card(struct api_req *r, unsigned status, struct core_card *c);
/* The bodies of the label and comment writes, checked the same way for REST and MCP:
 * "labels" (required); "add" and/or "remove"; a non-empty "body". The lists are zeroed by
 * the caller and released by it; *body is borrowed from the request. */
enum core_rc api_json_labels(struct api_req *r, struct core_strv *labels);
enum core_rc api_json_labels_delta(struct api_req *r, struct core_strv *add,
				   struct core_strv *remove);
enum core_rc api_json_comment(struct api_req *r, const char **body);

enum core_rc api_h_card_create(struct api_req *r);
enum core_rc api_h_card_list(struct api_req *r);
enum core_rc api_h_card_get(struct api_req *r);
enum core_rc api_h_card_patch(struct api_req *r);
enum core_rc api_h_card_delete(struct api_req *r);
enum core_rc api_h_card_reopen(struct api_req *r);
enum core_rc api_h_labels_put(struct api_req *r);
enum core_rc api_h_labels_patch(struct api_req *r);
enum core_rc api_h_comment_add(struct api_req *r);
enum core_rc api_h_labels_count(struct api_req *r);

enum core_rc api_h_claim(struct api_req *r);
enum core_rc api_h_renew(struct api_req *r);
enum core_rc api_h_release(struct api_req *r);
enum core_rc api_h_claim_revoke(struct api_req *r);
enum core_rc api_h_state(struct api_req *r);
enum core_rc api_h_last_run(struct api_req *r);
enum core_rc api_h_awaiting_input(struct api_req *r);
enum core_rc api_h_gave_up(struct api_req *r);

enum core_rc api_h_run_create(struct api_req *r);
enum core_rc api_h_run_get(struct api_req *r);
enum core_rc api_h_run_patch(struct api_req *r);
enum core_rc api_h_run_heartbeat(struct api_req *r);
enum core_rc api_h_run_cancel(struct api_req *r);
enum core_rc api_h_run_delete(struct api_req *r);
/* attention.c: the lane's size by reason into a scrape (METRICS_ATTENTION). */
void api_attention_collect(struct api *a, struct metrics_sink *s);
/* runs_history.c (DESIGN §20) */
enum core_rc api_h_card_runs(struct api_req *r);
enum core_rc api_h_run_list(struct api_req *r);
enum core_rc api_h_run_output(struct api_req *r);

enum core_rc api_h_events(struct api_req *r);
/* stream.c: GET /v1/events/stream (Server-Sent Events) and its hub. */
enum core_rc api_h_events_stream(struct api_req *r);
enum core_rc api_streams_init(struct api *a);
/* Ends every stream and stops the hub thread (before MHD_stop_daemon). */
void api_streams_stop(struct api *a);
/* Streams open now (the metrics gauge). */
unsigned api_streams_open(struct api *a);
/* Frees the hub (after MHD_stop_daemon: the last streams are freed by it). */
void api_streams_free(struct api *a);
/* attention.c: GET /v1/attention. ui.c: GET /ui/..., GET /v1/whoami. */
enum core_rc api_h_attention(struct api_req *r);
enum core_rc api_h_root(struct api_req *r);
enum core_rc api_h_ui_root(struct api_req *r);
enum core_rc api_h_ui_index(struct api_req *r);
enum core_rc api_h_ui_asset(struct api_req *r);
enum core_rc api_h_whoami(struct api_req *r);
/* Long-poll plumbing for api.c (a request freed). */
void api_poll_release(struct api_req *r);
/* The events a request reads (GET /v1/events and its stream): an unscoped token reads every
 * board, or *board, in the global seq (*by_board false); a token scoped to boards reads one
 * board in that board's own seq (board_seq, DESIGN §11): *board, else its only board
 * (borrowed from the token), else 400 naming `board`. Checks *board's name and access. */
enum core_rc api_events_scope(struct api_req *r, const char **board, bool *by_board);
void api_polls_stop(struct api *a);

enum core_rc api_h_claim_next(struct api_req *r);
/* claim-next's waker thread: started with the daemon; stop resumes every waiter (they answer
 * 204) and joins it; free after the daemon stopped. */
enum core_rc api_next_start(struct api *a);
void api_next_stop(struct api *a);
void api_next_free(struct api *a);

enum core_rc api_h_board_list(struct api_req *r);
enum core_rc api_h_board_get(struct api_req *r);
enum core_rc api_h_board_put(struct api_req *r);
enum core_rc api_h_reaper_get(struct api_req *r);
enum core_rc api_h_board_activity(struct api_req *r);
enum core_rc api_h_reaper_pass(struct api_req *r);

enum core_rc api_h_labels_rename(struct api_req *r);
enum core_rc api_h_labels_merge(struct api_req *r);
enum core_rc api_h_labels_delete(struct api_req *r);
enum core_rc api_h_column_rename(struct api_req *r);

enum core_rc api_h_sub_put(struct api_req *r);
enum core_rc api_h_sub_get(struct api_req *r);
enum core_rc api_h_sub_list(struct api_req *r);
enum core_rc api_h_sub_delete(struct api_req *r);
enum core_rc api_h_delivery_list(struct api_req *r);
enum core_rc api_h_delivery_retry(struct api_req *r);

enum core_rc api_h_healthz(struct api_req *r);
enum core_rc api_h_readyz(struct api_req *r);
enum core_rc api_h_metrics(struct api_req *r);
enum core_rc api_h_openapi_json(struct api_req *r);
enum core_rc api_h_openapi_yaml(struct api_req *r);

/* openapi data embedded at build time (openapi/gen_c.py). */
extern const char api_openapi_yaml[];
extern const size_t api_openapi_yaml_len;
extern const char api_openapi_json[];
extern const size_t api_openapi_json_len;

#endif
