/* Answering a request: the error table and problem+json renderer (errors.c), the request's
 * headers and framing (headers.c), dispatch and the queued answer (answer.c), and the hot
 * answers written as text (answer_json.c). */
#ifndef BOARDD_API_API_ANSWER_H
#define BOARDD_API_API_ANSWER_H

#include "api/api_req.h"
#include "core/core.h"

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

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
/* The same for a header whose meaning two copies would leave in doubt: given more than once,
 * NULL with *rc a 400 naming it. */
const char *api_hdr_once(struct api_req *r, enum api_hdr h, enum core_rc *rc);
/* A Content-Length other than 0, or a Transfer-Encoding. */
bool api_request_has_body(struct api_req *r);
/* The body's framing, before anything else: a request whose length is in doubt is refused
 * (with close_after set). */
enum core_rc api_framing_check(struct api_req *r);
/* 400 for an HTTP/1.1 request without Host, two Host headers (closing the connection) or a
 * Host that is no host[:port] (RFC 9112 §3.2). */
enum core_rc api_host_check(struct api_req *r, const char *version);
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

#endif
