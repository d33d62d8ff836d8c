/* The daemon: start/stop, the libmicrohttpd access handler (body accumulation, routing,
 * auth, dispatch), answers, the per-request log line and the status counters.
 *
 * Per-request state (struct api_req) is allocated on the first callback into *req_cls and
 * freed only in the completion callback. */
#include "api/api_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
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
	cfg->stream_heartbeat_ms = 15000;
	cfg->shutdown_grace_ms = 5000;
	cfg->log_format = API_LOG_TEXT;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- answers ---- */

enum MHD_Result api_response_queue(struct api_req *r, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result ok;

	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
				r->cache_control ? r->cache_control : "no-store");
	if (r->close_after) /* MHD closes the connection after an answer saying so */
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	ok = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	if (ok == MHD_YES) {
		r->answered = true;
		r->final_status = status;
	}
	return ok;
}

/* Queues the handler's success answer. */
static enum MHD_Result success_queue(struct api_req *r)
{
	struct MHD_Response *resp;
	char *text = NULL;
	size_t i;

	if (r->resp) {
		resp = r->resp; /* the handler's own (the event stream): headers already set */
		r->resp = NULL;
		/* Its length is unknown, so libmicrohttpd 0.9.75 frames it chunked -- and then
		 * ends a HEAD answer with the chunked terminator, a body a HEAD answer must not
		 * carry. Unchunked, an unknown length is framed by the close: headers only, then
		 * the connection closes. (A handler's own answer sets no other flag.) */
		if (strcmp(r->method, "HEAD") == 0)
			MHD_set_response_options(resp, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RO_END);
		return api_response_queue(r, r->status ? r->status : 200, resp);
	} else if (r->status == 204 || (r->status == 202 && !r->out)) {
		resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	} else if (r->out) {
		size_t len = 0;

		text = store_json_text(r->out, &len);
		if (!text)
			return api_problem_queue(r, CORE_ERR_NOMEM, "");
		resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
		if (!resp)
			free(text);
	} else if (r->raw_owned) {
		resp = MHD_create_response_from_buffer(r->raw_len, r->raw_owned,
						       MHD_RESPMEM_MUST_FREE);
		if (resp)
			r->raw_owned = NULL;
	} else if (r->raw_body) {
		resp = MHD_create_response_from_buffer(r->raw_len, (void *)r->raw_body,
						       MHD_RESPMEM_PERSISTENT);
	} else {
		/* A handler said OK and gave nothing to say: never an empty success. */
		return api_problem_queue(r, CORE_ERR_INTERNAL, "handler produced no answer");
	}
	if (!resp)
		return api_problem_queue(r, CORE_ERR_NOMEM, "");
	if (r->status != 204)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					r->out ? "application/json" : r->raw_type);
	if (r->location[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, r->location);
	for (i = 0; r->headers && r->headers[i] && r->headers[i + 1]; i += 2)
		MHD_add_response_header(resp, r->headers[i], r->headers[i + 1]);
	return api_response_queue(r, r->status ? r->status : 200, resp);
}

/* ---- the request's first callback: route, auth, media type, declared length ---- */

static bool json_media_type(const char *ct)
{
	size_t n = strlen("application/json");

	while (ct && *ct == ' ')
		ct++;
	return ct && strncasecmp(ct, "application/json", n) == 0 &&
	       (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* ---- the request's headers, read in one pass ----
 * Each MHD_lookup_connection_value walks every header with a caseless compare; the framing
 * check walked them all once more. One walk now finds the first of each header boardd reads
 * (what the lookup returns) and whether two Content-Length headers disagree. */
static const struct {
	const char *name;
	size_t len;
} head_names[API_HDR_N] = {
#define HEAD(id, name) [id] = {name, sizeof(name) - 1}
	HEAD(API_HDR_CONTENT_LENGTH, MHD_HTTP_HEADER_CONTENT_LENGTH),
	HEAD(API_HDR_TRANSFER_ENCODING, MHD_HTTP_HEADER_TRANSFER_ENCODING),
	HEAD(API_HDR_CONTENT_TYPE, MHD_HTTP_HEADER_CONTENT_TYPE),
	HEAD(API_HDR_AUTHORIZATION, MHD_HTTP_HEADER_AUTHORIZATION),
	HEAD(API_HDR_IF_MATCH, MHD_HTTP_HEADER_IF_MATCH),
#undef HEAD
};

static enum MHD_Result head_each(void *cls, enum MHD_ValueKind kind, const char *key,
				 const char *value)
{
	struct api_req *r = cls;
	size_t n = strlen(key), i;

	(void)kind;
	for (i = 0; i < API_HDR_N; i++) {
		if (n != head_names[i].len || strcasecmp(key, head_names[i].name) != 0)
			continue;
		if (i == API_HDR_CONTENT_LENGTH && r->hdr.v[i] &&
		    strcmp(r->hdr.v[i], value ? value : "") != 0)
			r->hdr.cl_disagree = true;
		if (i == API_HDR_AUTHORIZATION && r->hdr.v[i])
			r->hdr.auth_twice = true;
		if (!r->hdr.v[i])
			r->hdr.v[i] = value ? value : "";
		break;
	}
	return MHD_YES;
}

static void head_scan(struct api_req *r)
{
	if (r->hdr.scanned)
		return;
	r->hdr.scanned = true;
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, head_each, r);
}

const char *api_req_header(struct api_req *r, enum api_hdr h)
{
	head_scan(r);
	return r->hdr.v[h];
}

static bool request_has_body(struct api_req *r)
{
	const char *cl = api_req_header(r, API_HDR_CONTENT_LENGTH);

	return (cl && strcmp(cl, "0") != 0) || api_req_header(r, API_HDR_TRANSFER_ENCODING);
}

/* The body's framing, before anything else: a request whose length is in doubt is refused
 * and its connection closed, so no byte of it is ever read as a next request (smuggling
 * behind a proxy that framed it the other way). */
static enum core_rc framing_check(struct api_req *r)
{
	struct {
		const char *first;
		bool disagree;
	} c = {api_req_header(r, API_HDR_CONTENT_LENGTH), r->hdr.cl_disagree};
	const char *te = api_req_header(r, API_HDR_TRANSFER_ENCODING);

	if (c.disagree) {
		r->close_after = true;
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"two Content-Length headers that disagree");
	}
	if (te && strcasecmp(te, "chunked") != 0) {
		r->close_after = true;
		return api_fail(r, CORE_ERR_NOT_IMPLEMENTED,
				"Transfer-Encoding \"%.64s\" is not supported (only chunked)", te);
	}
	if (te && c.first) {
		r->close_after = true;
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"both Transfer-Encoding and Content-Length");
	}
	return CORE_OK;
}

static enum core_rc request_begin(struct api_req *r)
{
	const struct api *a = r->api;
	const char *cl, *te, *ct;
	enum core_rc rc;

	rc = framing_check(r);
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
		if ((cl && strcmp(cl, "0") != 0) || te || ct) {
			if (!json_media_type(ct))
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

/* ---- deferred acknowledgement: a write's answer waits for durability off-thread ----
 *
 * Every write is acknowledged only once its journal line is durable (DESIGN §9). Blocking the
 * HTTP thread through that wait would leave one thread per core serving a few requests per
 * fdatasync; instead the handler runs with a store_ack bound, the connection is suspended,
 * and the store's thread resumes it once the group sync covering the write is done (or
 * failed: then the answer is 503 and the write was rolled back). The thread meanwhile serves
 * other connections, whose writes join the same sync. */

/* Counts r among the requests api_stop must wait for; false once it stops (then the store
 * waits on this thread, as for any other caller). No lock on this path, taken twice per write:
 * the count and api_stop's API_ACKS_CLOSED share one atomic word. */
static void ack_unbind(struct api *a);

static bool ack_bind(struct api_req *r)
{
	struct api *a = r->api;

	if (atomic_fetch_add(&a->acks, 1) & API_ACKS_CLOSED) {
		ack_unbind(a);
		return false;
	}
	store_ack_begin(&r->ack);
	return true;
}

/* Before api_stop closes the count, one compare-and-swap and `a` is not touched again; once it
 * is closed, the count goes down under poll_mu, so api_stop (waiting under it) neither misses
 * the last one nor frees `a` before this thread let go of the lock. */
static void ack_unbind(struct api *a)
{
	unsigned n = atomic_load(&a->acks);

	while (!(n & API_ACKS_CLOSED))
		if (atomic_compare_exchange_weak(&a->acks, &n, n - 1))
			return;
	pthread_mutex_lock(&a->poll_mu);
	atomic_fetch_sub(&a->acks, 1);
	pthread_cond_broadcast(&a->poll_cv);
	pthread_mutex_unlock(&a->poll_mu);
}

/* The store's thread: the write is durable (OK) or rolled back. */
static void ack_done(struct store_ack *ack, enum core_rc rc)
{
	struct api_req *r = (struct api_req *)(void *)((char *)ack - offsetof(struct api_req, ack));
	struct api *a = r->api;

	r->ack_rc = rc;
	r->ack_state = API_ACK_DONE;
	MHD_resume_connection(r->conn); /* r belongs to MHD's thread from here on */
	ack_unbind(a);
}

/* After the handler: true when the answer now waits for the store (connection suspended). */
static bool ack_finish(struct api_req *r, enum core_rc rc)
{
	if (!store_ack_end(&r->ack)) {
		ack_unbind(r->api);
		return false;
	}
	r->handler_rc = rc;
	r->ack_state = API_ACK_WAITING;
	MHD_suspend_connection(r->conn);
	store_ack_submit(&r->ack, ack_done);
	return true;
}

static enum MHD_Result dispatch(struct api_req *r)
{
	enum core_rc rc = CORE_OK;
	bool bound;

	if (r->ack_state == API_ACK_DONE) {
		r->ack_state = API_ACK_NONE;
		if (r->ack_rc != CORE_OK)
			return api_problem_queue(r, r->ack_rc, "");
		if (r->handler_rc != CORE_OK)
			return api_problem_queue(r, r->handler_rc, r->detail);
		return success_queue(r);
	}
	if (r->body_too_large)
		return api_problem_queue(r, CORE_ERR_PAYLOAD_TOO_LARGE, "the body is too large");
	if ((r->route->flags & API_ROUTE_BODY) && !r->json && !r->flat.on)
		rc = api_body_parse(r);
	else if (!(r->route->flags & (API_ROUTE_BODY | API_ROUTE_JSONRPC)) && !r->json)
		rc = api_body_none(r);
	if (rc == CORE_OK) {
		bound = ack_bind(r);
		rc = r->route->handler(r);
		if (bound && ack_finish(r, rc))
			return MHD_YES; /* answered when the store resumes us */
	}
	if (rc == CORE_OK && r->suspended) {
		r->suspended = false;
		return MHD_YES; /* answered when the long-poll resumes us */
	}
	if (rc != CORE_OK)
		return api_problem_queue(r, rc, r->detail);
	return success_queue(r);
}

static void req_account(struct api *a, struct api_req *r);

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

/* The connection's state for the headers deadline (NULL when its socket context is gone). */
static struct api_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* now_ms: monotonic, when !in_request (the connection's idle time starts then). */
static void conn_mark(struct api *a, struct MHD_Connection *conn, bool in_request,
		      int64_t now_ms)
{
	struct api_conn *cc = conn_of(conn);

	if (!cc)
		return;
	pthread_mutex_lock(&a->conns.mu);
	cc->in_request = in_request;
	cc->line_ms = 0;
	if (!in_request) {
		cc->ready_ms = now_ms;
		cc->served = true;
	}
	pthread_mutex_unlock(&a->conns.mu);
}

/* The request line arrived (at now_ms, monotonic): its headers' deadline runs from then. */
static void conn_line(struct api *a, struct MHD_Connection *conn, int64_t now_ms)
{
	struct api_conn *cc = conn_of(conn);

	if (!cc)
		return;
	pthread_mutex_lock(&a->conns.mu);
	cc->line_ms = now_ms;
	pthread_mutex_unlock(&a->conns.mu);
}

static struct api_req *req_new(struct api *a, struct MHD_Connection *conn, const char *uri)
{
	struct api_conn *cc = conn_of(conn);
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
	r->t0_ns = mono_ns();
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
	conn_line(a, conn, r ? r->t0_ns / 1000000 : api_mono_ms());
	if (!r || !uri)
		return r;
	q = strchr(uri, '?');
	if (q && q[1]) {
		n = 1;
		for (q++; *q; q++)
			n += *q == '&';
	}
	if (strlen(uri) > API_URI_MAX)
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
			req_account(a, r);
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
		req_account(r->api, r);
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
		conn_mark(a, conn, true, 0); /* the headers arrived: the deadline is met */
		if (r->early_rc != CORE_OK) { /* on_uri's verdict, over TLS */
			r->close_after = true;
			return api_problem_queue(r, r->early_rc, r->detail);
		}
		rc = request_begin(r);
		if (rc != CORE_OK && (request_has_body(r) || r->close_after))
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
	return dispatch(r);
}

static void req_free(struct api_req *r)
{
	struct api_conn *cc;
	size_t i;

	api_poll_release(r);
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
	cc = conn_of(r->conn);
	if (cc && !cc->spare) {
		cc->spare = r; /* the connection's next request reuses it */
		return;
	}
	free(r);
}

/* ---- the access log on stderr ----
 *
 * One write(2) per request line cost about 5 % of the server's CPU under load. Lines are
 * queued instead, and a writer thread empties the queue with one write per batch: a line
 * alone is written within API_LOG_GATHER_MS (the first line after an idle spell wakes the
 * writer, which lets the batch gather that long, and keeps gathering while lines come), the
 * lines of a burst share one write. A full queue makes
 * the caller wait for the writer; a line is never dropped, and lines keep their order. */
#define API_LOG_BUF (64u * 1024u)
#define API_LOG_GATHER_MS 2

static void write_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* stderr is gone: nothing better to do with a log line */
		p += w;
		n -= (size_t)w;
	}
}

static void *log_main(void *arg)
{
	struct api *a = arg;
	char *out;
	size_t n;

	pthread_mutex_lock(&a->log.mu);
	for (;;) {
		while (!a->log.len && !a->log.stop)
			pthread_cond_wait(&a->log.cv, &a->log.mu);
		if (!a->log.len)
			break; /* stopping, and everything was written */
		/* A busy spell: gather, write, and gather again while lines keep coming. The writer
		 * stays `busy` until a gather brings nothing, so under load no caller has to wake
		 * it (that futex wake was 1 % of the server's CPU in the claim-cycle profile); a
		 * line still waits at most API_LOG_GATHER_MS (plus the write before it). */
		a->log.busy = true;
		for (;;) {
			/* (not when half the queue is full already: callers may soon wait for room) */
			if (!a->log.stop && a->log.len < API_LOG_BUF / 2) {
				struct timespec gather = {0, API_LOG_GATHER_MS * 1000000L};

				pthread_mutex_unlock(&a->log.mu);
				nanosleep(&gather, NULL);
				pthread_mutex_lock(&a->log.mu);
			}
			if (!a->log.len)
				break;
			out = a->log.buf; /* swap: callers fill the other buffer meanwhile */
			a->log.buf = a->log.out;
			a->log.out = out;
			n = a->log.len;
			a->log.len = 0;
			pthread_cond_broadcast(&a->log.idle); /* a caller waiting for room has it */
			pthread_mutex_unlock(&a->log.mu);
			write_all(STDERR_FILENO, out, n);
			pthread_mutex_lock(&a->log.mu);
		}
		a->log.busy = false;
		pthread_cond_broadcast(&a->log.idle);
	}
	pthread_mutex_unlock(&a->log.mu);
	return NULL;
}

static void log_start(struct api *a)
{
	pthread_mutex_init(&a->log.mu, NULL);
	pthread_cond_init(&a->log.cv, NULL);
	pthread_cond_init(&a->log.idle, NULL);
	if (a->cfg.log || a->cfg.log_format == API_LOG_NONE)
		return;
	a->log.buf = malloc(API_LOG_BUF);
	a->log.out = malloc(API_LOG_BUF);
	if (a->log.buf && a->log.out && pthread_create(&a->log.th, NULL, log_main, a) == 0)
		a->log.started = true;
}

/* After the daemon stopped (no more lines): writes what is queued and stops the writer. */
static void log_stop(struct api *a)
{
	if (a->log.started) {
		pthread_mutex_lock(&a->log.mu);
		a->log.stop = true;
		pthread_cond_signal(&a->log.cv);
		pthread_mutex_unlock(&a->log.mu);
		pthread_join(a->log.th, NULL);
	}
	free(a->log.buf);
	free(a->log.out);
	pthread_cond_destroy(&a->log.idle);
	pthread_cond_destroy(&a->log.cv);
	pthread_mutex_destroy(&a->log.mu);
}

/* line: n bytes, NUL-terminated. */
static void log_emit_n(struct api *a, const char *line, size_t n)
{
	if (a->cfg.log) {
		a->cfg.log(a->cfg.log_ctx, line);
		return;
	}
	if (!a->log.started) {
		fprintf(stderr, "%s\n", line);
		return;
	}
	pthread_mutex_lock(&a->log.mu);
	/* Full: wait for the writer to take the queue (backpressure, in order). */
	while (a->log.len + n + 1 > API_LOG_BUF && a->log.busy)
		pthread_cond_wait(&a->log.idle, &a->log.mu);
	if (a->log.len + n + 1 > API_LOG_BUF) {
		/* The writer is idle and it still does not fit: a line longer than the buffer, or
		 * a queue the writer was not woken for yet. Written here, under the lock. */
		write_all(STDERR_FILENO, a->log.buf, a->log.len);
		a->log.len = 0;
	}
	if (n + 1 > API_LOG_BUF) {
		write_all(STDERR_FILENO, line, n);
		write_all(STDERR_FILENO, "\n", 1);
	} else {
		memcpy(a->log.buf + a->log.len, line, n);
		a->log.buf[a->log.len + n] = '\n';
		/* Only the first line of a batch wakes the writer (which then gathers a moment). */
		if (!a->log.busy && !a->log.len)
			pthread_cond_signal(&a->log.cv);
		a->log.len += n + 1;
	}
	pthread_mutex_unlock(&a->log.mu);
}

static void log_emit(struct api *a, const char *line)
{
	log_emit_n(a, line, strlen(line));
}

/* Copies s into out (cap bytes) for a log line: valid UTF-8 stays, a control byte, DEL, a
 * backslash, a double quote and every byte that is not valid UTF-8 become \xHH, so a line
 * never carries a raw control byte and a JSON line never loses the path. Cut at cap. */
static void log_escape(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;

	while (*p && o + 5 < cap) {
		unsigned char c = *p;
		size_t k = 0, i;

		if (c >= 0xc2 && c <= 0xdf)
			k = 1;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3;
		for (i = 1; i <= k; i++)
			if ((p[i] & 0xc0) != 0x80)
				break;
		if (k && i > k && o + k + 1 < cap &&
		    !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0) &&
		    !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90)) {
			memcpy(out + o, p, k + 1);
			o += k + 1;
			p += k + 1;
			continue;
		}
		if (c < 0x20 || c >= 0x7f || c == '\\' || c == '"') {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			out[o++] = (char)c;
		}
		p++;
	}
	out[o] = '\0';
}

/* Appends at most max bytes of s at *o, and never past the line's last byte (as snprintf
 * cuts). */
static void lt_put(char *line, size_t *o, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (n > API_LOG_LINE_MAX - 1 - *o)
		n = API_LOG_LINE_MAX - 1 - *o;

	memcpy(line + *o, s, n);
	*o += n;
}

static void lt_uint(char *line, size_t *o, uint64_t v)
{
	char d[24];
	size_t n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		line[(*o)++] = d[--n];
}

/* The text access line, as "%s %s %.200s %u %.1fms%s%s%s%s" (ts, method, path, status, ms,
 * " " token, " answered-by=" by) would print it, without snprintf: it was a tenth of the
 * request's user-space CPU. ms from ns: the tenths rounded to nearest; a tie (ns ending in
 * 50000) goes through %.1f, which rounds the double's exact value. line holds API_LOG_LINE_MAX
 * bytes: up to "ms" the parts are bounded (ts 24, method 39, path 200, the numbers); the
 * token's name and the rest are cut where the line ends, as snprintf would. Returns the
 * length. */
size_t api_log_text(char *line, const char *ts, const char *method, const char *path,
		    unsigned status, int64_t ns, const char *tok, const char *by)
{
	uint64_t u = ns > 0 ? (uint64_t)ns : 0, tenths = u / 100000, rem = u % 100000;
	size_t o = 0;

	lt_put(line, &o, ts, 40);
	line[o++] = ' ';
	lt_put(line, &o, method, 40);
	line[o++] = ' ';
	lt_put(line, &o, path, 200);
	line[o++] = ' ';
	lt_uint(line, &o, status);
	line[o++] = ' ';
	if (rem == 50000) {
		char num[48];

		snprintf(num, sizeof num, "%.1f", (double)u / 1e6);
		lt_put(line, &o, num, sizeof num);
	} else {
		tenths += rem > 50000;
		lt_uint(line, &o, tenths / 10);
		line[o++] = '.';
		line[o++] = (char)('0' + tenths % 10);
	}
	line[o++] = 'm';
	line[o++] = 's';
	if (tok) {
		line[o++] = ' ';
		lt_put(line, &o, tok, API_LOG_LINE_MAX);
	}
	if (by[0]) {
		lt_put(line, &o, " answered-by=", 16);
		lt_put(line, &o, by, 40);
	}
	line[o] = '\0';
	return o;
}

static void log_line(struct api *a, const struct api_req *r, int64_t ns)
{
	double ms = (double)ns / 1e6;
	char line[API_LOG_LINE_MAX], ts[CORE_TIME_BUF], path[512], method[40];
	const char *status_by = "";

	if (a->cfg.log_format == API_LOG_NONE)
		return;
	core_time_format(wall_ms(), ts);
	log_escape(r->path ? r->path : "", path, sizeof path);
	log_escape(r->method ? r->method : "-", method, sizeof method);
	if (!r->started && !r->raw_answered)
		status_by = "libmicrohttpd"; /* refused the request itself (lib_log) */
	if (a->cfg.log_format == API_LOG_JSON) {
		json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:f, s:s?, s:s?}", "ts", ts, "method",
				      method, "path", path, "status", (int)r->final_status, "ms",
				      ms, "token", r->tok ? r->tok->name : NULL, "answered_by",
				      status_by[0] ? status_by : NULL);
		char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(4)) : NULL;

		/* Everything packed is escaped ASCII/UTF-8, so this holds; never a bare {}. */
		if (text)
			snprintf(line, sizeof line, "%s", text);
		else
			snprintf(line, sizeof line, "{\"ts\":\"%s\",\"path\":\"%s\",\"status\":%u}",
				 ts, path, r->final_status);
		free(text);
		json_decref(j);
	} else {
		log_emit_n(a, line, api_log_text(line, ts, method, path, r->final_status, ns,
						 r->tok ? r->tok->name : NULL, status_by));
		return;
	}
	log_emit(a, line);
}

/* Counts the request's answer in the metrics and writes its log line, once. */
static void req_account_at(struct api *a, struct api_req *r, int64_t now_ns)
{
	int64_t ns = now_ns - r->t0_ns;

	if (r->accounted)
		return;
	r->accounted = true;
	api_metrics_request(a, r, ns > 0 ? (uint64_t)ns : 0);
	log_line(a, r, ns);
}

static void req_account(struct api *a, struct api_req *r)
{
	req_account_at(a, r, mono_ns());
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
	now_ns = mono_ns(); /* one reading for both */
	conn_mark(a, conn, false, now_ns / 1000000); /* the next request's headers deadline
						      * starts now */
	/* A request whose headers never reached us was either refused by libmicrohttpd (its
	 * answer is counted and logged by lib_log) or dropped by the client mid-headers. */
	if (r->started || r->answered)
		req_account_at(a, r, now_ns);
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

	if (strncmp(fmt, answer_fmt, sizeof answer_fmt - 1) == 0) {
		struct api_req r = {.api = a, .method = "-", .path = (char *)"-"};
		struct api_req *q = query_req;

		query_req = NULL;
		if (q && query_overflow(q))
			return;

		r.final_status = va_arg(ap, unsigned);
		r.t0_ns = mono_ns();
		r.answered = true;
		atomic_fetch_add(&a->library_answers, 1);
		req_account(a, &r);
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
			log_emit(a, line);
		}
	}
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct api *a = cls;
	struct api_conn *cc = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		cc = calloc(1, sizeof(struct api_conn)); /* NULL: no cache, no deadline */
		*socket_context = cc;
		if (!cc)
			return;
		cc->fd = ci ? ci->connect_fd : -1;
		cc->ready_ms = api_mono_ms();
		pthread_mutex_lock(&a->conns.mu);
		cc->next = a->conns.head;
		if (cc->next)
			cc->next->prev = cc;
		a->conns.head = cc;
		a->conns.n++;
		pthread_mutex_unlock(&a->conns.mu);
	} else if (cc) {
		/* Before libmicrohttpd closes the socket: the sweeper never sees a reused fd. */
		pthread_mutex_lock(&a->conns.mu);
		if (cc->prev)
			cc->prev->next = cc->next;
		else
			a->conns.head = cc->next;
		if (cc->next)
			cc->next->prev = cc->prev;
		a->conns.n--;
		pthread_mutex_unlock(&a->conns.mu);
		free(cc->spare);
		OPENSSL_cleanse(cc, sizeof(*cc)); /* the cached bearer token */
		free(cc);
		*socket_context = NULL;
	}
}

/* ---- the headers deadline ----
 *
 * libmicrohttpd's idle timeout restarts on every byte, so a client sending one header line
 * every few seconds holds a connection for ever (slowloris), and a thousand of them hold
 * every slot. Shut down here (libmicrohttpd then sees the end of the stream and closes it):
 * a request whose headers are not whole header_timeout_ms after its request line, a new
 * connection without a whole request that long after its start, and a keep-alive
 * connection idle (or sending a request line) for the idle timeout. */
static void *sweeper_main(void *arg)
{
	struct api *a = arg;
	int64_t limit = (int64_t)a->cfg.header_timeout_ms;
	int64_t idle = (int64_t)a->cfg.conn_timeout_s * 1000;
	struct timespec until;

	pthread_mutex_lock(&a->conns.mu);
	while (!a->conns.stop) {
		int64_t now = api_mono_ms();
		struct api_conn *cc;

		for (cc = a->conns.head; cc; cc = cc->next) {
			int64_t since = cc->line_ms ? cc->line_ms : cc->ready_ms;
			int64_t allowed = cc->line_ms || !cc->served ? limit : idle;

			if (cc->in_request || cc->cut || cc->fd < 0 || now - since < allowed)
				continue;
			cc->cut = true;
			shutdown(cc->fd, SHUT_RDWR);
			atomic_fetch_add(&a->header_timeouts, 1);
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		/* the deadline is kept to within a quarter second */
		core_timespec_add_ns(&until, (int64_t)250 * 1000000);
		pthread_cond_timedwait(&a->conns.cv, &a->conns.mu, &until);
	}
	pthread_mutex_unlock(&a->conns.mu);
	return NULL;
}

static bool sweeper_start(struct api *a)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&a->conns.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->conns.cv, &ca);
	pthread_condattr_destroy(&ca);
	a->conns.started = pthread_create(&a->conns.th, NULL, sweeper_main, a) == 0;
	return a->conns.started;
}

/* After the daemon stopped (every connection closed). */
static void sweeper_stop(struct api *a)
{
	if (a->conns.started) {
		pthread_mutex_lock(&a->conns.mu);
		a->conns.stop = true;
		pthread_cond_signal(&a->conns.cv);
		pthread_mutex_unlock(&a->conns.mu);
		pthread_join(a->conns.th, NULL);
	}
	pthread_cond_destroy(&a->conns.cv);
	pthread_mutex_destroy(&a->conns.mu);
}

/* ---- tokens ---- */

enum core_rc api_tokens_replace(struct api *a, struct api_tokens *fresh)
{
	struct api_tokens *t, **nv;

	t = malloc(sizeof *t);
	if (!t)
		return CORE_ERR_NOMEM;
	pthread_mutex_lock(&a->tokens_mu);
	nv = realloc(a->owned, (a->n_owned + 1) * sizeof *nv);
	if (!nv) {
		pthread_mutex_unlock(&a->tokens_mu);
		free(t);
		return CORE_ERR_NOMEM;
	}
	a->owned = nv;
	*t = *fresh;
	memset(fresh, 0, sizeof *fresh);
	a->owned[a->n_owned++] = t;
	/* The set first, then the generation: a connection that cached a token under the old
	 * generation looks it up again (auth.c). */
	atomic_store(&a->tokens_now, t);
	atomic_fetch_add(&a->tokens_gen, 1);
	pthread_mutex_unlock(&a->tokens_mu);
	return CORE_OK;
}

static void tokens_free(struct api *a)
{
	size_t i;

	for (i = 0; i < a->n_owned; i++) {
		api_tokens_release(a->owned[i]);
		free(a->owned[i]);
	}
	free(a->owned);
	pthread_mutex_destroy(&a->tokens_mu);
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

/* libmicrohttpd's accept policy, on the thread that hands it the connection: once stopping, a
 * new connection is closed at once (the client sees it closed before a byte was read, and
 * retries elsewhere).
 *
 * This is how boardd stops taking connections, not MHD_quiesce_daemon: in libmicrohttpd
 * 0.9.75 (and its later releases), quiescing an epoll daemon removes the listen socket from
 * each thread's epoll set from the caller's thread while those threads may be removing it
 * themselves (they read was_quiesced unlocked); the loser's epoll_ctl fails with ENOENT and
 * the library aborts ("Failed to remove listen FD from epoll set", daemon.c:4976 or :5531;
 * tests/api/test_api_quiesce.c hits it within a few rounds under TSan). The acceptor below
 * checks the same flag before it hands a connection over. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	const struct api *a = cls;

	(void)addr;
	(void)addrlen;
	return atomic_load_explicit(&a->draining, memory_order_relaxed) ? MHD_NO : MHD_YES;
}

/* ---- accepting: one thread deals the connections out to libmicrohttpd's threads ----
 *
 * With the listen socket its own, every thread of libmicrohttpd's pool polls it, and the one
 * that wakes first accepts up to ten connections in a row, then goes back for more: a client
 * that opens its connections in a burst (any pooled client) gets all of them on one thread.
 * Measured with the claim cycle (bench/loadgen, 32 keep-alive connections, 2 threads): in 3
 * of 5 runs one thread served all 32 and the other none (bench/README.md, stop 20: side by
 * side with another server, dealt evenly gets 12 % more cycles). So the socket is boardd's:
 * this thread accepts and gives each connection to MHD_add_connection, which puts it on pool
 * thread (descriptor mod pool size) (daemon.c, internal_add_connection, since 0.9.x); the
 * descriptor is moved to the number that selects the next thread in turn. Were a release to
 * choose differently, the connections would still be served, only not dealt evenly. */

/* fd, or a duplicate of it whose number is `want` modulo n (fd is then closed); fd itself
 * when no such duplicate can be had. */
static int fd_for_thread(int fd, unsigned n, unsigned want)
{
	int from, dup;

	if (n < 2 || (unsigned)fd % n == want)
		return fd;
	from = fd + (int)((want + n - (unsigned)fd % n) % n); /* the next number of the class */
	for (;;) {
		dup = fcntl(fd, F_DUPFD_CLOEXEC, from);
		if (dup < 0)
			return fd; /* out of descriptors: served where it lands */
		if ((unsigned)dup % n == want) {
			close(fd);
			return dup;
		}
		close(dup); /* `from` was taken: the class's next number after the free one */
		from = dup + (int)((want + n - (unsigned)dup % n) % n);
	}
}

static void *acceptor_main(void *arg)
{
	struct api *a = arg;
	struct pollfd pf[2] = {{.fd = a->where.fd, .events = POLLIN},
			       {.fd = a->acceptor.wake, .events = POLLIN}};
	struct sockaddr_storage peer;
	socklen_t len;
	int fd;

	for (;;) {
		len = sizeof peer;
		fd = accept4(a->where.fd, (struct sockaddr *)&peer, &len,
			     SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (poll(pf, 2, -1) < 0 && errno != EINTR)
					usleep(10000);
				if (pf[1].revents)
					break; /* acceptor_stop */
			} else if (errno != EINTR && errno != ECONNABORTED) {
				usleep(10000); /* EMFILE, ENOBUFS, ...: the backlog waits meanwhile */
			}
			continue;
		}
		if (atomic_load_explicit(&a->draining, memory_order_relaxed)) {
			close(fd);
			continue;
		}
		fd = fd_for_thread(fd, a->cfg.threads, a->acceptor.next);
		a->acceptor.next = (a->acceptor.next + 1) % a->cfg.threads;
		/* MHD owns fd from here on, also when it refuses it (limits: it closes it). */
		(void)MHD_add_connection(a->daemon, fd, (const struct sockaddr *)&peer, len);
	}
	return NULL;
}

/* The TCP listen socket for ss (libmicrohttpd's own settings: SO_REUSEADDR, IPv6 only on a v6
 * address, the system's backlog), non-blocking as a socket file's; -1 with errno set. */
static int listen_open(const struct sockaddr_storage *ss, socklen_t len, bool v6)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), on = 1;
	int err;

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
	    (v6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0) ||
	    bind(fd, (const struct sockaddr *)ss, len) != 0 || listen(fd, SOMAXCONN) != 0) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/* Starts the thread on a->where.fd (non-blocking); 0 or an errno. */
static int acceptor_start(struct api *a)
{
	int e;

	a->acceptor.wake = eventfd(0, EFD_CLOEXEC);
	if (a->acceptor.wake < 0)
		return errno;
	if ((e = pthread_create(&a->acceptor.th, NULL, acceptor_main, a)) != 0) {
		close(a->acceptor.wake);
		a->acceptor.wake = -1;
		return e;
	}
	a->acceptor.started = true;
	return 0;
}

/* Stops accepting (the socket itself is closed by api_listen_release). */
static void acceptor_stop(struct api *a)
{
	uint64_t one = 1;

	if (!a->acceptor.started)
		return;
	while (write(a->acceptor.wake, &one, sizeof one) < 0 && errno == EINTR)
		;
	pthread_join(a->acceptor.th, NULL);
	close(a->acceptor.wake);
	a->acceptor.wake = -1;
	a->acceptor.started = false;
}

static struct MHD_Daemon *daemon_start(struct api *a, unsigned flags)
{
	/* The logger first: libmicrohttpd's messages about the options after it reach it. */
	return MHD_start_daemon(flags | MHD_USE_NO_LISTEN_SOCKET, 0, on_accept, a, on_request, a,
				MHD_OPTION_EXTERNAL_LOGGER, lib_log, a,
				MHD_OPTION_THREAD_POOL_SIZE, a->cfg.threads,
				MHD_OPTION_CONNECTION_TIMEOUT, a->cfg.conn_timeout_s,
				MHD_OPTION_CONNECTION_LIMIT, a->cfg.max_connections,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, a->cfg.max_connections_per_ip,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, a,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_CONN_MEMORY,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, a,
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
	log_start(a);
	if (!sweeper_start(a)) {
		snprintf(err, errlen, "cannot start the headers-deadline thread");
		rc = CORE_ERR_NOMEM;
		log_stop(a);
		sweeper_stop(a);
		pthread_cond_destroy(&a->poll_cv);
		pthread_mutex_destroy(&a->poll_mu);
		goto fail;
	}

	/* The waker before MHD's threads: a claim-next reads a->next from its first request on. */
	if (api_next_start(a) != CORE_OK) /* without it claim-next answers at once, never waits */
		fprintf(stderr, "boardd: claim-next: no waker thread; wait_ms is not honoured\n");
	flags = MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (a->tls ? MHD_USE_TLS : 0);
	if (a->where.fd < 0) /* TCP: bound here as well (a socket file is bound already) */
		a->where.fd = listen_open(&a->where.ss, a->where.len, a->where.v6);
	if (a->where.fd >= 0) {
		a->daemon = daemon_start(a, flags | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL);
		if (!a->daemon) /* no epoll: let MHD pick */
			a->daemon = daemon_start(a, flags | MHD_USE_AUTO_INTERNAL_THREAD);
		if (a->daemon && (e = acceptor_start(a)) != 0) {
			MHD_stop_daemon(a->daemon);
			a->daemon = NULL;
			errno = e;
		}
	}
	if (!a->daemon) {
		snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen, strerror(errno));
		acceptor_stop(a);
		rc = CORE_ERR_STORE_UNAVAILABLE;
		api_next_stop(a);
		api_next_free(a);
		log_stop(a);
		sweeper_stop(a);
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
	tokens_free(a);
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
		atomic_store(&a->draining, true); /* on_accept: why not MHD_quiesce_daemon */
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
	deadline = mono_ns() + (int64_t)a->cfg.shutdown_grace_ms * 1000000;
	while (mono_ns() < deadline) {
		const union MHD_DaemonInfo *info =
			MHD_get_daemon_info(a->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

		if (!info || info->num_connections == 0)
			break;
		usleep(10000);
	}
	acceptor_stop(a); /* before the daemon: it hands connections to it */
	MHD_stop_daemon(a->daemon);
	api_listen_release(&a->where); /* after the daemon closed its socket */
	api_next_free(a);
	sweeper_stop(a);
	api_streams_free(a);
	log_stop(a);
	tokens_free(a);
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
