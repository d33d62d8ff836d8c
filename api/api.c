/* The daemon: libmicrohttpd's adapter. Start and stop; the callbacks libmicrohttpd makes for
 * a request -- its request line (on_uri), its headers and body (on_request: the first checks,
 * body accumulation, then api_dispatch), its end (on_completed) -- and the library's own
 * messages (lib_log). The rooms it calls into: headers.c (the header scan and framing),
 * answer.c (dispatch, answers, the deferred acknowledgement), access_log.c (the log line and
 * the counters), conns.c (connections and the headers deadline), listen.c (the socket and
 * the acceptor), tokens.c (the token sets).
 *
 * Per-request state (struct api_req) is allocated on the first callback into *req_cls and
 * freed only in the completion callback. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_conns.h"
#include "api/api_daemon.h"
#include "api/api_events.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define BODY_DISCARD_MAX (16u << 20) /* past max_body + this, an unbounded body is cut off */

void api_config_init(struct api_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->listen = "127.0.0.1:8080";
	cfg->max_body = 1u << 20;
	cfg->lease_default_ms = 900000;
	cfg->lease_min_ms = 1000;
	cfg->lease_max_ms = 86400000;
	cfg->conn_timeout_s = 30;
	cfg->max_connections = 4096;
	cfg->max_connections_per_ip = 512;
	cfg->header_timeout_ms = 10000;
	cfg->events_wait_max_ms = 30000;
	cfg->max_long_polls = 256;
	cfg->max_streams = 128;
	cfg->max_answer_bytes = API_ANSWER_BYTES_MAX;
	cfg->stream_heartbeat_ms = 15000;
	cfg->shutdown_grace_ms = 5000;
	cfg->log_format = API_LOG_TEXT;
}

/* ---- the request's first callback: route, auth, media type, declared length ---- */

static enum core_rc request_begin(struct api_req *r, const char *version)
{
	const struct api *a = r->api;
	const char *cl, *te, *ct;
	enum core_rc rc;

	rc = api_bytes_check(r, version);
	if (rc != CORE_OK)
		return rc;
	rc = api_framing_check(r);
	if (rc != CORE_OK)
		return rc;
	rc = api_host_check(r, version);
	if (rc != CORE_OK)
		return rc;
	rc = api_router_match(r);
	if (rc != CORE_OK)
		return rc;
	rc = api_auth_check(r);
	if (rc != CORE_OK)
		return rc;
	rc = api_query_check(r);
	if (rc != CORE_OK)
		return rc;
	cl = api_req_header(r, API_HDR_CONTENT_LENGTH);
	te = api_req_header(r, API_HDR_TRANSFER_ENCODING);
	if (cl) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(cl, &end, 10);
		if (errno == 0 && *end == '\0' && v > a->cfg.max_body)
			return api_fail(r, CORE_ERR_PAYLOAD_TOO_LARGE,
					"the body is larger than %zu bytes", a->cfg.max_body);
		if (errno == 0 && *end == '\0' && v > 0 && v <= a->cfg.max_body) {
			r->body = (size_t)v < sizeof r->inl.body ? r->inl.body : malloc((size_t)v + 1);
			if (!r->body)
				return CORE_ERR_NOMEM;
			r->body_cap = (size_t)v + 1;
		}
	}
	if (r->route->flags & API_ROUTE_BODY) {
		ct = api_req_header(r, API_HDR_CONTENT_TYPE);
		/* A singleton field (RFC 9110 §8.3): which of two says what the body is, is
		 * not ours to guess. */
		if (r->hdr.ct_twice)
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"more than one Content-Type header: send exactly one");
		if ((cl && strcmp(cl, "0") != 0) || te || ct) {
			if (!api_json_media_type(ct))
				return api_fail(r, CORE_ERR_UNSUPPORTED_MEDIA_TYPE,
						"expected Content-Type: application/json");
		}
	}
	return CORE_OK;
}

/* Appends upload data, counting every byte; past max_body the rest is discarded (and an
 * endless body is cut off) so memory never grows beyond the limit. */
static bool body_append(struct api_req *r, const char *data, size_t n)
{
	size_t max = r->api->cfg.max_body;

	if (r->body_too_large || r->body_len + n > max) {
		r->body_too_large = true;
		r->body_discarded += n;
		return r->body_discarded <= BODY_DISCARD_MAX;
	}
	if (r->body_len + n + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 4096;
		char *nb;

		while (cap < r->body_len + n + 1)
			cap *= 2;
		if (cap > max + 1)
			cap = max + 1;
		if (r->body == r->inl.body) { /* more than Content-Length said: to the heap */
			nb = malloc(cap);
			if (nb)
				memcpy(nb, r->body, r->body_len);
		} else {
			nb = realloc(r->body, cap);
		}
		if (!nb)
			return false;
		r->body = nb;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, data, n);
	r->body_len += n;
	r->body[r->body_len] = '\0';
	return true;
}

/* The request whose query string libmicrohttpd is splitting on this thread, or NULL. In
 * 0.9.75 one call on the connection's thread (parse_initial_message_line) runs the URI log
 * callback (on_uri, which sets it), splits the query into its pool (unescaping each
 * parameter), then unescapes the path itself -- the very pointer on_uri was given
 * (unescape_none clears it then); nothing of another connection runs between. So an answer
 * the library announces (lib_log) inside that window is exactly this request's: its pool
 * could not hold the query's parameters. The only such window 0.9.75 has: its other own
 * answers come while no callback of ours tells which connection is being read. */
static _Thread_local struct api_req *query_req;
static _Thread_local const char *query_uri;

#define API_URI_MAX 8192     /* longer request targets: 414 */
#define API_QUERY_PARAMS_MAX 64 /* more query parameters: 414 (libmicrohttpd's pool holds
				 * each one; past it, it would stall the connection unanswered) */

static struct api_req *req_new(struct api *a, struct MHD_Connection *conn, const char *uri)
{
	struct api_conn *cc = api_conn_of(conn);
	struct api_req *r;
	size_t plen = strcspn(uri, "?");

	if (cc && cc->spare) {
		r = cc->spare;
		cc->spare = NULL;
		memset(r, 0, API_REQ_CLEAR);
	} else {
		r = malloc(sizeof *r);
		if (r)
			memset(r, 0, API_REQ_CLEAR);
	}
	if (!r)
		return NULL;
	r->api = a;
	r->conn = conn;
	r->t0_ns = api_mono_ns();
	r->inl.params_len = 0;
	if (plen < sizeof r->inl.path) {
		memcpy(r->inl.path, uri, plen);
		r->inl.path[plen] = '\0';
		r->path = r->inl.path;
	} else if (!(r->path = strndup(uri, plen))) {
		free(r);
		return NULL;
	}
	return r;
}

/* libmicrohttpd calls this once a request line is read, before it parses the query or the
 * headers: the request's state starts here (it becomes *req_cls), so every request is
 * logged and counted, also one libmicrohttpd then answers itself. A target it could not
 * parse safely is answered here. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct api *a = cls;
	struct api_req *r = req_new(a, conn, uri ? uri : "");
	const char *q;
	size_t n = 0;

	/* the request's start is the same clock's reading (api_mono_ms's value) */
	api_conn_line(a, conn, r ? r->t0_ns / 1000000 : api_mono_ms());
	if (!r || !uri)
		return r;
	q = strchr(uri, '?');
	if (q && q[1]) {
		n = 1;
		for (q++; *q; q++)
			n += *q == '&';
	}
	r->uri_raw = uri;
	r->uri_len = strlen(uri);
	r->uri_ctl = api_has_ctl(uri, r->uri_len);
	if (r->uri_len > API_URI_MAX)
		api_fail(r, CORE_ERR_URI_TOO_LONG, "the request target is longer than %d bytes",
			 API_URI_MAX);
	else if (n > API_QUERY_PARAMS_MAX)
		api_fail(r, CORE_ERR_URI_TOO_LONG, "%zu query parameters (at most %d)", n,
			 API_QUERY_PARAMS_MAX);
	/* libmicrohttpd may drop the connection without telling us the request ended: the
	 * answer is accounted now. Over TLS (no raw answer) it is given through libmicrohttpd
	 * when the headers are in, unless the query overflows its pool first (lib_log). */
	if (r->detail[0]) {
		if (api_problem_write_raw(r, CORE_ERR_URI_TOO_LONG, r->detail))
			api_req_account(a, r);
		else
			r->early_rc = CORE_ERR_URI_TOO_LONG;
	}
	if (q) { /* the query is split next: see query_req */
		query_req = r;
		query_uri = uri;
	}
	return r;
}

/* libmicrohttpd's answer to the request on this thread whose query it could not hold (called
 * from lib_log inside the query_req window). Plain HTTP: boardd's own 414 goes out first (it
 * may have already: then the library's answer never reaches the client), and the library's
 * is not counted. True when that is so. Over TLS no raw answer can be written, and 0.9.75
 * would not deliver its own either (it parses on as if the line were fine; the connection
 * stalls until the headers deadline): the connection is ended now, and the library's answer
 * is counted as given. */
static bool query_overflow(struct api_req *r)
{
	const union MHD_ConnectionInfo *ci;

	if (!r->raw_answered &&
	    api_problem_write_raw(r, CORE_ERR_URI_TOO_LONG,
				  "the query's parameters do not fit the server's request buffer"))
		api_req_account(r->api, r);
	if (r->raw_answered)
		return true;
	if (r->early_rc == CORE_OK) /* should the library read on, it is refused all the same */
		r->early_rc = api_fail(r, CORE_ERR_URI_TOO_LONG, "the query's parameters do not "
				       "fit the server's request buffer");
	ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		shutdown(ci->connect_fd, SHUT_RDWR);
	return false;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **req_cls)
{
	struct api *a = cls;
	struct api_req *r = *req_cls;
	enum core_rc rc;

	if (!r) { /* on_uri ran out of memory */
		r = req_new(a, conn, url);
		if (!r)
			return MHD_NO;
		*req_cls = r;
	}
	if (r->raw_answered)
		return MHD_NO; /* answered on the socket already: close */
	if (!r->started) {
		r->started = true;
		r->method = method;
		api_conn_mark(a, conn, true, 0); /* the headers arrived: the deadline is met */
		if (r->early_rc != CORE_OK) { /* on_uri's verdict, over TLS */
			r->close_after = true;
			return api_problem_queue(r, r->early_rc, r->detail);
		}
		rc = request_begin(r, version);
		if (rc != CORE_OK && (api_request_has_body(r) || r->close_after))
			return api_problem_queue(r, rc, r->detail); /* the body is never read */
		/* Without a body, answering on the next call keeps the connection alive. */
		r->early_rc = rc;
		return MHD_YES;
	}
	if (r->answered) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->early_rc != CORE_OK)
		return api_problem_queue(r, r->early_rc, r->detail);
	if (*upload_data_size) {
		if (!body_append(r, upload_data, *upload_data_size))
			return MHD_NO; /* out of memory or an endless body: drop the connection */
		*upload_data_size = 0;
		return MHD_YES;
	}
	return api_dispatch(r);
}

static void req_free(struct api_req *r)
{
	struct api_conn *cc;
	size_t i;

	api_poll_release(r);
	if (r->answer_held)
		atomic_fetch_sub(&r->api->answer_bytes, r->answer_held);
	for (i = 0; i < r->n_params; i++)
		if (r->params_heap & (1u << i))
			free(r->params[i]);
	for (i = 0; i < r->n_qdec; i++)
		free(r->qdec[i]);
	api_agent_release(r);
	json_decref(r->json);
	json_decref(r->out);
	if (r->resp)
		MHD_destroy_response(r->resp); /* never queued: its free callback runs here */
	free(r->raw_owned);
	if (r->body != r->inl.body)
		free(r->body);
	if (r->path != r->inl.path)
		free(r->path);
	cc = api_conn_of(r->conn);
	if (cc && !cc->spare) {
		cc->spare = r; /* the connection's next request reuses it */
		return;
	}
	free(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct api *a = cls;
	struct api_req *r = *req_cls;
	int64_t now_ns;

	if (!r)
		return;
	if (query_req == r) /* never left open by libmicrohttpd; never dangling either */
		query_req = NULL;
	now_ns = api_mono_ns(); /* one reading for both */
	api_conn_mark(a, conn, false, now_ns / 1000000); /* the next request's headers deadline
						      * starts now */
	/* A request whose headers never reached us was either refused by libmicrohttpd (its
	 * answer is counted and logged by lib_log) or dropped by the client mid-headers. */
	if (r->started || r->answered)
		api_req_account_at(a, r, now_ns);
	req_free(r);
	*req_cls = NULL;
}

/* libmicrohttpd's own messages (MHD_USE_ERROR_LOG). The answers it gives by itself -- a
 * request line or headers too large for its buffer (414, 431), an HTTP version it does not
 * speak (505), a malformed header (400) -- are announced here just before they are sent, on
 * the connection's thread: each is counted and logged like any other answer. Its bodies stay
 * its own: the message does not say which connection is concerned (docs/http.md, "What
 * libmicrohttpd answers itself", lists each and why) -- but for the query split, whose
 * request query_req names (query_overflow). The targets and query strings that would reach
 * those limits first are answered as problem+json in on_uri. Other messages (connection
 * limits, peers gone) are counted; a line at most every few seconds. */
__attribute__((format(printf, 2, 0)))
static void lib_log(void *cls, const char *fmt, va_list ap)
{
	static const char answer_fmt[] = "Error processing request (HTTP response code is %u";
	struct api *a = cls;

	/* Over a unix socket 0.9.75 says this three times per answer (its TCP_NODELAY and
	 * TCP_CORK fail with EOPNOTSUPP, which it does not take as "not TCP"): nothing to count
	 * or show, and the cheapest way out, first thing (it was 0.8 % of the claim cycle's
	 * server CPU; bench/ceiling -m drops them the same way). */
	if (fmt[0] == 'S' && strncmp(fmt, "Setting ", 8) == 0)
		return;
	/* And this one after each answer there (its TCP_CORK off fails the same way): over a
	 * unix socket it says nothing about the client, and was a line every few seconds. */
	if (fmt[0] == 'F' && a->where.path && strncmp(fmt, "Failed to push ", 15) == 0)
		return;
	if (strncmp(fmt, answer_fmt, sizeof answer_fmt - 1) == 0) {
		struct api_req r = {.api = a, .method = "-", .path = (char *)"-"};
		struct api_req *q = query_req;

		query_req = NULL;
		if (q && query_overflow(q))
			return;

		r.final_status = va_arg(ap, unsigned);
		r.t0_ns = api_mono_ns();
		r.answered = true;
		atomic_fetch_add(&a->library_answers, 1);
		api_req_account(a, &r);
		return;
	}
	if (strstr(fmt, "connection limit") || strstr(fmt, "per-IP") ||
	    strstr(fmt, "connections from"))
		atomic_fetch_add(&a->connections_refused, 1);
	{
		int64_t now = api_mono_ms(), last = atomic_load(&a->lib_log_last_ms);

		if (now - last < 5000 ||
		    !atomic_compare_exchange_strong(&a->lib_log_last_ms, &last, now))
			return;
		if (a->cfg.log_format != API_LOG_NONE) {
			char msg[256], line[300];
			size_t n;

			vsnprintf(msg, sizeof msg, fmt, ap);
			n = strlen(msg);
			while (n && msg[n - 1] == '\n')
				msg[--n] = '\0';
			snprintf(line, sizeof line, "boardd: libmicrohttpd: %s", msg);
			api_log_emit(a, line);
		}
	}
}

/* We percent-decode path segments ourselves (router.c): MHD's in-place decoding of the whole
 * path would turn %2F into a separator and %00 into a silent cut. */
static size_t unescape_none(void *cls, struct MHD_Connection *c, char *s)
{
	if (s == query_uri) { /* the path, after its query was split: the window closes */
		query_req = NULL;
		query_uri = NULL;
	}
	return strlen(s);
}

/* MHD's per-connection pool holds the request line and headers (bodies are copied out as they
 * arrive) and is zeroed for every request on a keep-alive connection: MHD's 32 KiB default
 * cost 5 % of the server's CPU in the claim-cycle profile. 16 KiB takes a request line of up
 * to 16 382 bytes and a head of about 16 200 bytes less 64 per header field and query
 * parameter (measured; docs/http.md); larger ones are answered 414/431 by MHD. */
#define API_CONN_MEMORY (16u * 1024u)

/* libmicrohttpd's own connection limit, set where it cannot be reached: each connection is a
 * descriptor, so no thread of the pool (the limit is divided among them) can hold more than
 * the process may open. --max-connections is held by the acceptor (listen.c): libmicrohttpd
 * 0.9.75's path for a connection over its limit leaves a mutex locked for good. */
static unsigned mhd_connection_limit(const struct api *a)
{
	struct rlimit rl;
	uint64_t fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
			       ? (uint64_t)rl.rlim_cur
			       : (uint64_t)1 << 20;
	uint64_t lim = (fds + 64) * (a->cfg.threads ? a->cfg.threads : 1);

	if (lim < a->cfg.max_connections)
		lim = a->cfg.max_connections;
	return lim > UINT_MAX / 2 ? UINT_MAX / 2 : (unsigned)lim;
}

static struct MHD_Daemon *daemon_start(struct api *a, unsigned flags)
{
	/* The logger first: libmicrohttpd's messages about the options after it reach it. */
	return MHD_start_daemon(flags | MHD_USE_NO_LISTEN_SOCKET, 0, api_on_accept, a, on_request, a,
				MHD_OPTION_EXTERNAL_LOGGER, lib_log, a,
				MHD_OPTION_THREAD_POOL_SIZE, a->cfg.threads,
				MHD_OPTION_CONNECTION_TIMEOUT, a->cfg.conn_timeout_s,
				MHD_OPTION_CONNECTION_LIMIT, mhd_connection_limit(a),
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, a->cfg.max_connections_per_ip,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, a,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_CONN_MEMORY,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
				MHD_OPTION_NOTIFY_CONNECTION, api_conn_notify, a,
				MHD_OPTION_UNESCAPE_CALLBACK, unescape_none, NULL,
				/* HTTPS last: without TLS the list ends here */
				a->tls ? MHD_OPTION_HTTPS_PRIORITIES : MHD_OPTION_END,
				api_tls_priorities(), MHD_OPTION_HTTPS_CERT_CALLBACK2,
				api_tls_cert_callback, MHD_OPTION_END);
}

enum core_rc api_start(const struct api_config *cfg, struct store *st, struct api **out,
		       char *err, size_t errlen)
{
	struct api *a = NULL;
	struct api_listen where;
	unsigned flags;
	long cores;
	int e;
	enum core_rc rc = CORE_ERR_BAD_REQUEST;

	*out = NULL;
	if (!cfg || !st || !cfg->tokens) {
		snprintf(err, errlen, "api_start: a store and a tokens structure are required");
		return CORE_ERR_BAD_REQUEST;
	}
	if ((rc = api_listen_open(cfg->listen, &where, err, errlen)) != CORE_OK)
		return rc;
	a = calloc(1, sizeof *a);
	if (!a) {
		api_listen_release(&where);
		return CORE_ERR_NOMEM;
	}
	a->where = where; /* released by api_stop, or at fail: */
	a->cfg = *cfg;
	a->st = st;
	atomic_init(&a->draining, false);
	a->acceptor.wake = -1;
	atomic_init(&a->tokens_now, cfg->tokens);
	pthread_mutex_init(&a->tokens_mu, NULL);
	a->listen = strdup(cfg->listen);
	if (!a->listen) {
		rc = CORE_ERR_NOMEM;
		goto fail;
	}
	a->cfg.listen = a->listen;
	a->tls_cert = cfg->tls_cert ? strdup(cfg->tls_cert) : NULL;
	a->tls_key = cfg->tls_key ? strdup(cfg->tls_key) : NULL;
	if ((cfg->tls_cert && !a->tls_cert) || (cfg->tls_key && !a->tls_key)) {
		rc = CORE_ERR_NOMEM;
		goto fail;
	}
	a->cfg.tls_cert = a->tls_cert;
	a->cfg.tls_key = a->tls_key;
	if ((rc = api_tls_setup(a, err, errlen)) != CORE_OK)
		goto fail;
	if ((rc = api_metrics_init(a)) != CORE_OK) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (!a->cfg.max_body)
		a->cfg.max_body = 1u << 20;
	if (!a->cfg.conn_timeout_s)
		a->cfg.conn_timeout_s = 30;
	if (!a->cfg.max_connections)
		a->cfg.max_connections = 4096;
	if (!a->cfg.max_connections_per_ip)
		a->cfg.max_connections_per_ip = 512;
	if (!a->cfg.header_timeout_ms)
		a->cfg.header_timeout_ms = 10000;
	if (a->cfg.events_wait_max_ms <= 0)
		a->cfg.events_wait_max_ms = 30000;
	if (!a->cfg.max_long_polls)
		a->cfg.max_long_polls = 256;
	if (!a->cfg.max_streams)
		a->cfg.max_streams = 128;
	if (!a->cfg.max_answer_bytes)
		a->cfg.max_answer_bytes = API_ANSWER_BYTES_MAX;
	if (a->cfg.stream_heartbeat_ms <= 0)
		a->cfg.stream_heartbeat_ms = 15000;
	if (!a->cfg.threads) {
		cores = sysconf(_SC_NPROCESSORS_ONLN);
		a->cfg.threads = cores > 0 ? (unsigned)cores : 2;
	}
	pthread_mutex_init(&a->poll_mu, NULL);
	pthread_cond_init(&a->poll_cv, NULL);
	pthread_mutex_init(&a->agent_mu, NULL);
	if (api_streams_init(a) != CORE_OK) {
		pthread_cond_destroy(&a->poll_cv);
		pthread_mutex_destroy(&a->poll_mu);
		pthread_mutex_destroy(&a->agent_mu);
		rc = CORE_ERR_NOMEM;
		goto fail;
	}
	api_log_start(a);
	if (!api_sweeper_start(a)) {
		snprintf(err, errlen, "cannot start the headers-deadline thread");
		rc = CORE_ERR_NOMEM;
		api_log_stop(a);
		api_sweeper_stop(a);
		pthread_cond_destroy(&a->poll_cv);
		pthread_mutex_destroy(&a->poll_mu);
		goto fail;
	}

	/* The waker before MHD's threads: a claim-next reads a->next from its first request on. */
	if (api_next_start(a) != CORE_OK) /* without it claim-next answers at once, never waits */
		fprintf(stderr, "boardd: claim-next: no waker thread; wait_ms is not honoured\n");
	flags = MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (a->tls ? MHD_USE_TLS : 0);
	if (a->where.fd < 0) /* TCP: bound here as well (a socket file is bound already) */
		a->where.fd = api_listen_tcp(&a->where.ss, a->where.len, a->where.v6);
	if (a->where.fd >= 0) {
		a->daemon = daemon_start(a, flags | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL);
		if (!a->daemon) /* no epoll: let MHD pick */
			a->daemon = daemon_start(a, flags | MHD_USE_AUTO_INTERNAL_THREAD);
		if (a->daemon && (e = api_acceptor_start(a)) != 0) {
			MHD_stop_daemon(a->daemon);
			a->daemon = NULL;
			errno = e;
		}
	}
	if (!a->daemon) {
		snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen, strerror(errno));
		api_acceptor_stop(a);
		rc = CORE_ERR_STORE_UNAVAILABLE;
		api_next_stop(a);
		api_next_free(a);
		api_log_stop(a);
		api_sweeper_stop(a);
		api_streams_free(a);
		pthread_cond_destroy(&a->poll_cv);
		pthread_mutex_destroy(&a->poll_mu);
		pthread_mutex_destroy(&a->agent_mu);
		goto fail;
	}
	if (!a->where.path) { /* 0 on a socket file */
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof ss;

		if (getsockname(a->where.fd, (struct sockaddr *)&ss, &sslen) == 0)
			a->port = ntohs(ss.ss_family == AF_INET6
						? ((struct sockaddr_in6 *)&ss)->sin6_port
						: ((struct sockaddr_in *)&ss)->sin_port);
	}
	*out = a;
	return CORE_OK;
fail:
	api_tokens_free(a);
	api_listen_release(&a->where);
	api_metrics_release(a);
	api_tls_release(a);
	free(a->tls_cert);
	free(a->tls_key);
	free(a->listen);
	free(a);
	return rc;
}

uint16_t api_port(const struct api *a)
{
	return a ? a->port : 0;
}

void api_quiesce(struct api *a)
{
	if (a)
		atomic_store(&a->draining, true); /* api_on_accept: why not MHD_quiesce_daemon */
}

void api_stop(struct api *a)
{
	int64_t deadline;

	if (!a)
		return;
	api_quiesce(a);
	api_next_stop(a);
	api_polls_stop(a);
	api_streams_stop(a);
	/* No request binds an ack any more (stopping is set); the bound ones end within a sync,
	 * and their answers go out in the grace period below. */
	pthread_mutex_lock(&a->poll_mu);
	atomic_fetch_or(&a->acks, API_ACKS_CLOSED);
	while (atomic_load(&a->acks) & ~API_ACKS_CLOSED)
		pthread_cond_wait(&a->poll_cv, &a->poll_mu);
	pthread_mutex_unlock(&a->poll_mu);
	/* Give in-flight requests (and idle keep-alive clients) a grace period to finish. */
	deadline = api_mono_ns() + (int64_t)a->cfg.shutdown_grace_ms * 1000000;
	while (api_mono_ns() < deadline) {
		const union MHD_DaemonInfo *info =
			MHD_get_daemon_info(a->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

		if (!info || info->num_connections == 0)
			break;
		usleep(10000);
	}
	api_acceptor_stop(a); /* before the daemon: it hands connections to it */
	MHD_stop_daemon(a->daemon);
	api_listen_release(&a->where); /* after the daemon closed its socket */
	api_next_free(a);
	api_sweeper_stop(a);
	api_streams_free(a);
	api_log_stop(a);
	api_tokens_free(a);
	pthread_cond_destroy(&a->poll_cv);
	pthread_mutex_destroy(&a->poll_mu);
	OPENSSL_cleanse(a->agent_key, sizeof a->agent_key);
	pthread_mutex_destroy(&a->agent_mu);
	api_metrics_release(a);
	api_tls_release(a);
	free(a->tls_cert);
	free(a->tls_key);
	free(a->listen);
	free(a);
}
