/* Answers: the success answer a handler filled in (api_dispatch runs the handler), the
 * problem+json (or JSON-RPC) answer of an error, the common headers every answer carries, the
 * bound on answer bytes built and not yet read (--max-answer-bytes), and the deferred
 * acknowledgement that holds a write's answer until the store made it durable. */
#include "api/api_answer.h"
#include "api/api_daemon.h"
#include "api/api_idem.h"
#include "api/api_mcp.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define API_ANSWER_SMALL ((size_t)64 << 10)      /* an answer this small is never refused */

/* ---- answers ---- */

/* Last resort when even the problem body cannot be built: a fixed body, never empty. */
static const char oom_body[] = "{\"type\":\"/problems/out_of_memory\",\"title\":\"Out Of "
			       "Memory\",\"status\":500,\"code\":\"out_of_memory\",\"detail\":\"\"}";


enum MHD_Result api_response_queue(struct api_req *r, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result ok;

	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
				r->cache_control ? r->cache_control : "no-store");
	/* Every answer but the UI's files (which carry their own set, ui.c): a JSON or problem
	 * body is never sniffed as something a browser would run or render. */
	if (!r->headers)
		MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
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

/* A built answer stays in memory until its client has read it all, and a client need not
 * read: thousands of connections each asking for a large list and never reading would hold
 * gigabytes. So the bytes of the JSON answers built and not yet sent, over all connections,
 * are counted (released in req_free, once libmicrohttpd is done with the answer), and a read
 * (GET, HEAD) whose answer is larger than API_ANSWER_SMALL and would take the count past
 * cfg.max_answer_bytes is refused 503 busy with Retry-After instead, unless nothing else is
 * held (an answer larger than the bound alone still goes: it is bounded by the list limits). Small answers (health,
 * problems, a card) and the answers of writes (which already happened) always go: those are
 * bounded by the connection limits. False: refused, nothing counted. */
static bool answer_hold(struct api_req *r, size_t len)
{
	struct api *a = r->api;
	size_t held = atomic_fetch_add(&a->answer_bytes, len);
	bool read = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;

	if (read && len > API_ANSWER_SMALL && held > 0 && held + len > a->cfg.max_answer_bytes) {
		atomic_fetch_sub(&a->answer_bytes, len);
		atomic_fetch_add(&a->answers_refused, 1);
		return false;
	}
	r->answer_held = len;
	return true;
}

/* While the bound is reached, a read that needs a token (any list) is refused before its
 * handler builds an answer that would only be thrown away: its cost is what a client that
 * never reads would otherwise make the server pay again and again. The public routes
 * (health, readiness, metrics, the UI's files) still answer. */
static bool answers_full(struct api_req *r)
{
	return !(r->route->flags & API_ROUTE_PUBLIC) &&
	       (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0) &&
	       atomic_load(&r->api->answer_bytes) >= r->api->cfg.max_answer_bytes;
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
		if (!answer_hold(r, len)) {
			char detail[200];

			free(text);
			snprintf(detail, sizeof detail,
				 "the server holds %zu bytes of answers not yet read by their "
				 "clients (--max-answer-bytes); this one (%zu bytes) must wait: "
				 "retry, or ask for a smaller page (limit)",
				 (size_t)atomic_load(&r->api->answer_bytes), len);
			return api_problem_queue(r, CORE_ERR_BUSY, detail);
		}
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

enum MHD_Result api_dispatch(struct api_req *r)
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
	if (answers_full(r)) {
		atomic_fetch_add(&r->api->answers_refused, 1);
		return api_problem_queue(r, CORE_ERR_BUSY,
					 "the server holds --max-answer-bytes of answers not yet "
					 "read by their clients; retry");
	}
	if ((r->route->flags & API_ROUTE_BODY) && !r->json && !r->flat.on)
		rc = api_body_parse(r);
	else if (!(r->route->flags & (API_ROUTE_BODY | API_ROUTE_JSONRPC)) && !r->json)
		rc = api_body_none(r);
	if (rc == CORE_OK) {
		bound = ack_bind(r);
		rc = (r->route->flags & API_ROUTE_IDEM) ? api_idem_handle(r) : r->route->handler(r);
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

/* ---- problems: an error as problem+json (or, on /mcp, JSON-RPC) ---- */

enum MHD_Result api_problem_queue(struct api_req *r, enum core_rc rc, const char *detail)
{
	struct MHD_Response *resp = NULL;
	unsigned status;
	char *text;
	json_t *j;

	if (r->route && (r->route->flags & API_ROUTE_JSONRPC)) {
		/* /mcp speaks JSON-RPC even when refused before (or after) its handler. */
		if (rc == CORE_OK)
			rc = CORE_ERR_INTERNAL;
		status = api_rc_status(rc);
		j = api_mcp_early_error(rc, detail && detail[0] ? detail : api_rc_detail(rc));
		if (j && json_object_get(r->json, "id"))
			json_object_set(j, "id", json_object_get(r->json, "id"));
		text = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
		json_decref(j);
		resp = text ? MHD_create_response_from_buffer(strlen(text), text,
							      MHD_RESPMEM_MUST_FREE)
			    : NULL;
		if (!resp) {
			free(text);
			return MHD_NO;
		}
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
		goto headers;
	}
	text = api_problem_text(rc, detail, &status);
	if (text) {
		resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
		if (!resp)
			free(text);
	} else {
		status = 500;
		resp = MHD_create_response_from_buffer(sizeof oom_body - 1, (void *)oom_body,
						       MHD_RESPMEM_PERSISTENT);
	}
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/problem+json");
headers:
	if (status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (status == 503)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	if (status == 405 && r->allow[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
	return api_response_queue(r, status, resp);
}

bool api_problem_write_raw(struct api_req *r, enum core_rc rc, const char *detail)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	unsigned status;
	char head[256], *text;
	int n;

	/* Raw bytes on a TLS connection would break its record stream: libmicrohttpd answers
	 * those itself. */
	if (!ci || MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_GNUTLS_SESSION))
		return false;
	text = api_problem_text(rc, detail, &status);
	if (!text)
		return false;
	n = snprintf(head, sizeof head,
		     "HTTP/1.1 %u %s\r\nContent-Type: application/problem+json\r\n"
		     "Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
		     status, api_rc_title(rc), strlen(text));
	/* A fresh connection's send buffer takes these few hundred bytes at once; whatever it
	 * does not take is lost with the connection, which closes either way. */
	if (n > 0 && (size_t)n < sizeof head) {
		(void)send(ci->connect_fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)send(ci->connect_fd, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	shutdown(ci->connect_fd, SHUT_WR);
	free(text);
	r->answered = true;
	r->raw_answered = true;
	r->final_status = status;
	return true;
}
