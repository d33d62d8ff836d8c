/* The one error table (core_rc -> HTTP status, title) and the one problem+json renderer.
 * No other file formats an error answer: handlers return an enum core_rc. */
#include "api/api_int.h"

#include <stdio.h>
#include <string.h>

/* Every enum core_rc, with its status and title. A row missing here fails the build (the
 * count check below) and the unit test that walks CORE_RC_LIST. */
#define API_RC_HTTP(X)                                                                     \
	X(CORE_OK, 200, "OK")                                                              \
	X(CORE_ERR_BAD_REQUEST, 400, "Bad Request")                                        \
	X(CORE_ERR_UNAUTHORIZED, 401, "Unauthorized")                                      \
	X(CORE_ERR_FORBIDDEN, 403, "Forbidden")                                            \
	X(CORE_ERR_NOT_FOUND, 404, "Not Found")                                            \
	X(CORE_ERR_METHOD_NOT_ALLOWED, 405, "Method Not Allowed")                          \
	X(CORE_ERR_CLAIM_CONFLICT, 409, "Claim Conflict")                                  \
	X(CORE_ERR_STATE_CONFLICT, 409, "State Conflict")                                  \
	X(CORE_ERR_DEPENDENTS_OUTSTANDING, 409, "Dependents Outstanding")                  \
	X(CORE_ERR_ALREADY_EXISTS, 409, "Already Exists")                                  \
	X(CORE_ERR_PAYLOAD_TOO_LARGE, 413, "Payload Too Large")                            \
	X(CORE_ERR_UNSUPPORTED_MEDIA_TYPE, 415, "Unsupported Media Type")                  \
	X(CORE_ERR_TERMINAL_STATE_EXIT, 422, "Terminal State Exit")                        \
	X(CORE_ERR_TRANSITION_REJECTED, 422, "Transition Rejected")                        \
	X(CORE_ERR_PRECONDITION_REQUIRED, 428, "Precondition Required")                    \
	X(CORE_ERR_STORE_UNAVAILABLE, 503, "Store Unavailable")                            \
	X(CORE_ERR_NOMEM, 500, "Out Of Memory")                                            \
	X(CORE_ERR_INTERNAL, 500, "Internal Error")

struct rc_http {
	unsigned status;
	const char *title;
};

static const struct rc_http rc_table[CORE_RC_COUNT_] = {
#define API_RC_ROW(rc, st, ti) [rc] = {st, ti},
	API_RC_HTTP(API_RC_ROW)
#undef API_RC_ROW
};

#define API_RC_ONE(rc, st, ti) +1
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

enum core_rc api_fail(struct api_req *r, enum core_rc rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof r->detail, fmt, ap);
	va_end(ap);
	return rc;
}

/* Last resort when even the problem body cannot be built: a fixed body, never empty. */
static const char oom_body[] = "{\"type\":\"/problems/out_of_memory\",\"title\":\"Out Of "
			       "Memory\",\"status\":500,\"code\":\"out_of_memory\",\"detail\":\"\"}";

enum MHD_Result api_problem_queue(struct api_req *r, enum core_rc rc, const char *detail)
{
	struct MHD_Response *resp = NULL;
	unsigned status;
	char type[64];
	json_t *j = NULL;
	char *text = NULL;

	if (rc == CORE_OK)
		rc = CORE_ERR_INTERNAL; /* an error answer for "ok" is a bug, never a success */
	status = api_rc_status(rc);
	snprintf(type, sizeof type, "/problems/%s", core_rc_code(rc));
	j = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", api_rc_title(rc),
		      "status", (int)status, "code", core_rc_code(rc), "detail",
		      detail ? detail : "");
	if (j)
		text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
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
	if (status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (status == 503)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	if (status == 405 && r->allow[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
	return api_response_queue(r, status, resp);
}
