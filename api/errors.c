/* The one error table (core_rc -> HTTP status, title) and the one problem+json renderer.
 * No other file formats an error answer: handlers return an enum core_rc (answer.c sends
 * the problem). */
#include "api/api_answer.h"
#include "api/api_req.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every enum core_rc, with its status and title. A row missing here fails the build (the
 * count check below) and the unit test that walks CORE_RC_LIST. */
#define API_RC_HTTP(X)                                                                     \
	X(CORE_OK, 200, "OK", "")                                                          \
	X(CORE_ERR_BAD_REQUEST, 400, "Bad Request", "the request is malformed")            \
	X(CORE_ERR_UNAUTHORIZED, 401, "Unauthorized",                                      \
	  "a valid Authorization: Bearer token is required")                               \
	X(CORE_ERR_FORBIDDEN, 403, "Forbidden",                                            \
	  "the token lacks the role or the board for this request")                        \
	X(CORE_ERR_NOT_FOUND, 404, "Not Found", "no such resource")                        \
	X(CORE_ERR_METHOD_NOT_ALLOWED, 405, "Method Not Allowed",                          \
	  "the method is not allowed here")                                                \
	X(CORE_ERR_CLAIM_CONFLICT, 409, "Claim Conflict",                                  \
	  "the card is not held by this claim token (another marker holds it, the epoch "  \
	  "is stale, or it is not claimed); nothing was changed")                          \
	X(CORE_ERR_STATE_CONFLICT, 409, "State Conflict",                                  \
	  "the card is not in the declared source column; nothing was changed")            \
	X(CORE_ERR_DEPENDENTS_OUTSTANDING, 409, "Dependents Outstanding",                  \
	  "cards blocked on this one have already moved on; it cannot leave done")         \
	X(CORE_ERR_BLOCKERS_PENDING, 409, "Blockers Pending",                              \
	  "a blocker of this card is not in the completed column yet; nothing was changed") \
	X(CORE_ERR_RUN_FINAL, 409, "Run Final",                                            \
	  "the run is finished, failed or cancelled: final statuses stay final")           \
	X(CORE_ERR_ALREADY_EXISTS, 409, "Already Exists", "the resource already exists")   \
	X(CORE_ERR_PAYLOAD_TOO_LARGE, 413, "Payload Too Large",                            \
	  "the request body is larger than the server accepts")                            \
	X(CORE_ERR_UNSUPPORTED_MEDIA_TYPE, 415, "Unsupported Media Type",                  \
	  "send Content-Type: application/json")                                           \
	X(CORE_ERR_TERMINAL_STATE_EXIT, 422, "Terminal State Exit",                        \
	  "terminal columns are sinks: only an operator's reopen leaves them")             \
	X(CORE_ERR_TRANSITION_REJECTED, 422, "Transition Rejected",                        \
	  "the workflow does not allow this transition")                                   \
	X(CORE_ERR_PRECONDITION_REQUIRED, 428, "Precondition Required",                    \
	  "owned writes need If-Match: \"<epoch>\"")                                       \
	X(CORE_ERR_URI_TOO_LONG, 414, "URI Too Long",                                      \
	  "the request target is longer than the server accepts")                          \
	X(CORE_ERR_INVALID_BOARD, 422, "Invalid Board",                                    \
	  "the columns do not make a board")                                               \
	X(CORE_ERR_CAPACITY_REACHED, 409, "Capacity Reached",                              \
	  "a column's limit or the board's max_claims is reached; nothing was changed")    \
	X(CORE_ERR_NOT_YET, 409, "Not Yet",                                                \
	  "the card is scheduled (not_before) and cannot be claimed yet")                  \
	X(CORE_ERR_IDEMPOTENCY_KEY_REUSED, 422, "Idempotency Key Reused",                  \
	  "this Idempotency-Key was used with another request body in the last 24 h; "     \
	  "nothing was changed")                                                           \
	X(CORE_ERR_IDEMPOTENCY_KEY_IN_FLIGHT, 409, "Idempotency Key In Flight",            \
	  "a request with this Idempotency-Key is still being served; retry shortly")      \
	X(CORE_ERR_NOT_IMPLEMENTED, 501, "Not Implemented",                                \
	  "the server does not implement what the request needs")                          \
	X(CORE_ERR_STORE_UNAVAILABLE, 503, "Store Unavailable",                            \
	  "the store could not complete the request; nothing was acknowledged, retry")     \
	X(CORE_ERR_BUSY, 503, "Busy",                                                      \
	  "the server cannot take this now (at a limit, or the record is being written by "   \
	  "many at once); nothing was changed, retry after Retry-After")                     \
	X(CORE_ERR_NOMEM, 500, "Out Of Memory", "the server ran out of memory")            \
	X(CORE_ERR_INTERNAL, 500, "Internal Error", "internal error")

struct rc_http {
	unsigned status;
	const char *title;
	const char *detail; /* used when the handler gave none */
};

static const struct rc_http rc_table[CORE_RC_COUNT_] = {
#define API_RC_ROW(rc, st, ti, de) [rc] = {st, ti, de},
	API_RC_HTTP(API_RC_ROW)
#undef API_RC_ROW
};

#define API_RC_ONE(rc, st, ti, de) +1
_Static_assert(0 API_RC_HTTP(API_RC_ONE) == CORE_RC_COUNT_,
	       "every enum core_rc needs a row in API_RC_HTTP");
#undef API_RC_ONE

unsigned api_rc_status(enum core_rc rc)
{
	if ((int)rc < 0 || rc >= CORE_RC_COUNT_ || rc_table[rc].status == 0)
		return 500;
	return rc_table[rc].status;
}

const char *api_rc_title(enum core_rc rc)
{
	if ((int)rc < 0 || rc >= CORE_RC_COUNT_ || !rc_table[rc].title)
		return "Internal Error";
	return rc_table[rc].title;
}

const char *api_rc_detail(enum core_rc rc)
{
	if ((int)rc < 0 || rc >= CORE_RC_COUNT_ || !rc_table[rc].detail)
		return "internal error";
	return rc_table[rc].detail;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when s does not start one. */
static size_t utf8_seq(const unsigned char *s)
{
	size_t n, i;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

void api_text_utf8(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		size_t n = utf8_seq(p);

		if (!n)
			*p++ = '?';
		else
			p += n;
	}
}

enum core_rc api_fail(struct api_req *r, enum core_rc rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof r->detail, fmt, ap);
	va_end(ap);
	/* a detail quotes input, and the cut may split a character: JSON needs it whole */
	api_text_utf8(r->detail);
	return rc;
}

char *api_problem_text(enum core_rc rc, const char *detail, unsigned *status)
{
	char type[64];
	json_t *j;
	char *text = NULL;

	if (rc == CORE_OK)
		rc = CORE_ERR_INTERNAL; /* an error answer for "ok" is a bug, never a success */
	*status = api_rc_status(rc);
	snprintf(type, sizeof type, "/problems/%s", core_rc_code(rc));
	j = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", api_rc_title(rc),
		      "status", (int)*status, "code", core_rc_code(rc), "detail",
		      detail && detail[0] ? detail : api_rc_detail(rc));
	if (!j && detail) {
		/* A detail cut inside a UTF-8 sequence (or echoing bad bytes): say it in ASCII. */
		char ascii[API_DETAIL_MAX];
		size_t i;

		for (i = 0; detail[i] && i + 1 < sizeof ascii; i++)
			ascii[i] = (unsigned char)detail[i] < 0x80 ? detail[i] : '?';
		ascii[i] = '\0';
		j = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", api_rc_title(rc),
			      "status", (int)*status, "code", core_rc_code(rc), "detail",
			      ascii[0] ? ascii : api_rc_detail(rc));
	}
	/* ASCII only: a detail that echoes a client's bytes (an unknown field's name) reads the
	 * same whatever charset a client guesses for a body without one. */
	if (j)
		text = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(j);
	return text;
}
