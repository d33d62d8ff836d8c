/* The request's headers: the ones boardd reads, found in one pass (api_req_header), and the
 * checks on them made before routing -- the body's framing (Content-Length,
 * Transfer-Encoding) and the JSON media type. */
#include "api/api_int.h"

#include <string.h>
#include <strings.h>

bool api_json_media_type(const char *ct)
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

bool api_request_has_body(struct api_req *r)
{
	const char *cl = api_req_header(r, API_HDR_CONTENT_LENGTH);

	return (cl && strcmp(cl, "0") != 0) || api_req_header(r, API_HDR_TRANSFER_ENCODING);
}

/* The body's framing, before anything else: a request whose length is in doubt is refused
 * and its connection closed, so no byte of it is ever read as a next request (smuggling
 * behind a proxy that framed it the other way). */
enum core_rc api_framing_check(struct api_req *r)
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
