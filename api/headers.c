/* The request's headers: the ones boardd reads, found in one pass (api_req_header), and the
 * checks on them made before routing -- no NUL or control byte in the request target or a
 * header, the body's framing (Content-Length, Transfer-Encoding) and the JSON media type. */
#include "api/api_answer.h"
#include "api/api_req.h"

#include <microhttpd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *ows(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* One parameter value at *s (a token, or a quoted-string with backslash escapes): *s moves
 * past it; [*val, *val + *len) is its text (quotes excluded). False when unterminated. */
static bool param_value(const char **s, const char **val, size_t *len)
{
	const char *p = *s;

	if (*p != '"') {
		*val = p;
		*len = strcspn(p, "; \t");
		*s = p + *len;
		return true;
	}
	*val = ++p;
	for (; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	if (*p != '"')
		return false;
	*len = (size_t)(p - *val);
	*s = p + 1;
	return true;
}

/* application/json, then only parameters (RFC 9110 §5.6.6, §8.3.1): "application/json
 * ,text/plain" is another value, not ours, and a parameter is name=value. A charset, if
 * named, is UTF-8 (RFC 8259 §8.1: JSON is UTF-8; a body declared latin1 would be read as
 * what it is not). Other parameters are ignored. */
bool api_json_media_type(const char *ct)
{
	size_t n = strlen("application/json"), k, len;
	const char *val;

	if (!ct)
		return false;
	ct = ows(ct);
	if (strncasecmp(ct, "application/json", n) != 0)
		return false;
	ct = ows(ct + n);
	while (*ct == ';') {
		ct = ows(ct + 1);
		if (!*ct || *ct == ';') /* an empty parameter */
			continue;
		k = strcspn(ct, "=; \t");
		if (!k || ct[k] != '=')
			return false;
		if (k == 7 && strncasecmp(ct, "charset", 7) == 0) {
			ct += k + 1;
			if (!param_value(&ct, &val, &len) || len != 5 ||
			    strncasecmp(val, "utf-8", 5) != 0)
				return false;
		} else {
			ct += k + 1;
			if (!param_value(&ct, &val, &len))
				return false;
		}
		ct = ows(ct);
	}
	return *ct == '\0';
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
	HEAD(API_HDR_IDEMPOTENCY_KEY, "Idempotency-Key"),
	HEAD(API_HDR_HOST, MHD_HTTP_HEADER_HOST),
	HEAD(API_HDR_LAST_EVENT_ID, "Last-Event-ID"),
#undef HEAD
};

static bool ctl_byte(unsigned char c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

/* A NUL or a control byte (but HTAB) in [s, s+n): a NUL cuts the C string libmicrohttpd
 * hands out short of the length it counted, and what follows it would be read by nobody
 * here but by whatever reads the raw line (a proxy, a log). */
bool api_has_ctl(const char *s, size_t n)
{
	/* Eight bytes at a time (every request's target and header lines pass here): a word
	 * with no byte below 0x20 and none equal to 0x7f is clean; one that may hold one (a
	 * HTAB too) is looked at byte by byte. */
	const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, k;
	uint64_t v, del;

	for (; i + 8 <= n; i += 8) {
		memcpy(&v, p + i, 8);
		del = v ^ (ones * 0x7f);
		if (!(((v - ones * 0x20) & ~v & highs) | ((del - ones) & ~del & highs)))
			continue;
		for (k = 0; k < 8; k++)
			if (ctl_byte(p[i + k]))
				return true;
	}
	if (i == n)
		return false;
	/* The last one to seven bytes as one more word too (most names and many values are
	 * shorter than eight): the word ending at n, whose bytes before i were found clean
	 * already, or the bytes themselves after clean filler. */
	v = ones * 'a';
	if (n >= 8)
		memcpy(&v, p + n - 8, 8);
	else
		memcpy(&v, p + i, n - i);
	del = v ^ (ones * 0x7f);
	if (!(((v - ones * 0x20) & ~v & highs) | ((del - ones) & ~del & highs)))
		return false;
	for (; i < n; i++)
		if (ctl_byte(p[i]))
			return true;
	return false;
}

/* Are [from, to) between `min` and `max` bytes, all NUL? libmicrohttpd reads the head in
 * place: each line's CR and LF become NULs and the next line starts right after them. */
static bool nul_gap(const char *from, const char *to, size_t min, size_t max)
{
	size_t n, i;

	if (!from || !to || (uintptr_t)to < (uintptr_t)from)
		return false;
	n = (size_t)((uintptr_t)to - (uintptr_t)from);
	if (n < min || n > max)
		return false;
	for (i = 0; i < n; i++)
		if (from[i])
			return false;
	return true;
}

/* A NUL inside a header's value: libmicrohttpd counts the value with strlen, so it ends
 * there, and the rest of the line ("Authorization: Bearer <token><NUL>garbage") is read by
 * nobody here. Seen from where the value ends: the next line (this header's key) starts one
 * or two NULs (LF, CRLF) after the previous line's end; a longer or non-NUL gap is what the
 * NUL hid. (A line folded onto the next -- obs-fold -- moves the value out of the buffer and
 * is refused the same way: RFC 7230 §3.2.4 allows the 400.) */
static bool head_line_ok(struct api_req *r, const char *key, const char *value,
			 size_t value_size)
{
	bool ok = !r->hdr.line_end || nul_gap(r->hdr.line_end, key, 1, 2);

	r->hdr.line_end = value ? value + value_size : NULL;
	return ok;
}

/* RFC 9110 §5.6.2: a field name is a token. A name with a space (or a tab) before its colon
 * is read by libmicrohttpd 0.9.75 as a name ending in that space -- "Content-Length " frames
 * nothing, so the body is read as the next request -- where a proxy may drop the space and
 * frame by it: RFC 9112 §5.1 says reject. */
static const unsigned char tchar[256] = {
	['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
	['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
	['8'] = 1, ['9'] = 1,
	['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
	['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
	['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
	['Y'] = 1, ['Z'] = 1,
	['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
	['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
	['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
	['y'] = 1, ['z'] = 1,
};

static bool is_token(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!tchar[(unsigned char)s[i]])
			return false;
	return n > 0;
}

static enum MHD_Result head_each(void *cls, enum MHD_ValueKind kind, const char *key,
				 size_t key_size, const char *value, size_t value_size)
{
	struct api_req *r = cls;
	size_t n = strlen(key), i;
	bool tok;

	(void)kind;
	if (!head_line_ok(r, key, value, value_size) && !r->hdr.bad)
		r->hdr.bad = key;
	/* A name that is a token holds no control byte: the name is read once. */
	tok = is_token(key, n);
	if (!r->hdr.bad && (n != key_size || (value && api_has_ctl(value, value_size)) ||
			    (!tok && api_has_ctl(key, n))))
		r->hdr.bad = key;
	else if (!tok && !r->hdr.bad && !r->hdr.bad_name)
		r->hdr.bad_name = key;
	for (i = 0; i < API_HDR_N; i++) {
		/* the length, then the first byte as either case, then the call */
		if (n != head_names[i].len ||
		    (((unsigned char)key[0] ^ (unsigned char)head_names[i].name[0]) & ~0x20u) ||
		    strcasecmp(key, head_names[i].name) != 0)
			continue;
		if (i == API_HDR_CONTENT_LENGTH && r->hdr.v[i] &&
		    strcmp(r->hdr.v[i], value ? value : "") != 0)
			r->hdr.cl_disagree = true;
		if (i == API_HDR_AUTHORIZATION && r->hdr.v[i])
			r->hdr.auth_twice = true;
		if (i == API_HDR_TRANSFER_ENCODING && r->hdr.v[i])
			r->hdr.te_twice = true;
		if (i == API_HDR_HOST && r->hdr.v[i])
			r->hdr.host_twice = true;
		if (i == API_HDR_CONTENT_TYPE && r->hdr.v[i])
			r->hdr.ct_twice = true;
		if (r->hdr.v[i])
			r->hdr.twice |= 1u << i;
		else
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
	MHD_get_connection_values_n(r->conn, MHD_HEADER_KIND, head_each, r);
}

const char *api_req_header(struct api_req *r, enum api_hdr h)
{
	head_scan(r);
	return r->hdr.v[h];
}

const char *api_hdr_once(struct api_req *r, enum api_hdr h, enum core_rc *rc)
{
	const char *v = api_req_header(r, h);

	*rc = CORE_OK;
	if (r->hdr.twice & (1u << h)) {
		*rc = api_fail(r, CORE_ERR_BAD_REQUEST, "%s given more than once",
			       head_names[h].name);
		return NULL;
	}
	return v;
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

	if (r->hdr.te_twice) {
		/* One proxy joins the lines ("chunked, gzip": 501 here), another reads the first
		 * or the last: a body framed one way here may be framed another way there. */
		r->close_after = true;
		return api_fail(r, CORE_ERR_BAD_REQUEST, "two Transfer-Encoding headers");
	}
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

/* RFC 9112 §3.2: an HTTP/1.1 request without a Host header, any request with two, or one
 * whose value is no uri-host[:port] is a 400. boardd routes by the target alone, but a proxy
 * in front may route or cache by Host: two of them, read one way there and another here, is
 * the same doubt as two Transfer-Encoding headers. Empty is allowed (a target without an
 * authority). The characters: unreserved, sub-delims, %, ':' and the brackets of an IPv6
 * literal. */
enum core_rc api_host_check(struct api_req *r, const char *version)
{
	const char *h = api_req_header(r, API_HDR_HOST);

	if (r->hdr.host_twice) {
		r->close_after = true;
		return api_fail(r, CORE_ERR_BAD_REQUEST, "two Host headers");
	}
	if (!h) {
		if (version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"no Host header (HTTP/1.1 requires one)");
		return CORE_OK;
	}
	for (; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') ||
		      (*h >= '0' && *h <= '9') || strchr("-._~%!$&'()*+,;=:[]", *h)))
			return api_fail(r, CORE_ERR_BAD_REQUEST,
					"the Host header is not a host[:port]");
	return CORE_OK;
}

/* Where the head ends: libmicrohttpd counts it from the method (where the request line
 * starts in its buffer) through the empty line. NULL when it does not say. */
static const char *method_head_end(struct api_req *r)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);

	return ci && r->method && ci->header_size ? r->method + ci->header_size : NULL;
}

enum core_rc api_bytes_check(struct api_req *r, const char *version)
{
	/* libmicrohttpd ends the target where the request line's last space was (the version
	 * starts after it) but hands out a C string: a NUL inside the target cuts it there,
	 * and "DELETE /v1/cards/a<NUL>zzz" would name card a. on_uri saw that string (uri_raw,
	 * uri_len); the version still begins past the whole target. */
	if (r->uri_raw && version && *version &&
	    (uintptr_t)version > (uintptr_t)r->uri_raw + r->uri_len + 1) {
		r->close_after = true;
		return api_fail(r, CORE_ERR_BAD_REQUEST, "a NUL byte in the request target");
	}
	if (r->uri_ctl) {
		r->close_after = true;
		return api_fail(r, CORE_ERR_BAD_REQUEST, "a control character in the request target");
	}
	/* the request line ends after the version; the head after an empty line */
	if (!r->hdr.scanned && version && *version)
		r->hdr.line_end = version + strlen(version);
	head_scan(r);
	if (!r->hdr.bad && r->hdr.line_end && method_head_end(r) &&
	    !nul_gap(r->hdr.line_end, method_head_end(r), 2, 4))
		r->hdr.bad = "(the last)";
	if (r->hdr.bad) {
		char name[64];

		snprintf(name, sizeof name, "%s", r->hdr.bad);
		api_text_utf8(name);
		for (size_t i = 0; name[i]; i++)
			if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
				name[i] = '?';
		r->close_after = true;
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"a NUL byte or a control character in header %s", name);
	}
	if (r->hdr.bad_name) {
		char name[64];

		snprintf(name, sizeof name, "%s", r->hdr.bad_name);
		api_text_utf8(name);
		r->close_after = true;
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"header name \"%s\" is not a token (RFC 9110: letters, digits and "
				"!#$%%&'*+-.^_`|~, nothing before the colon)",
				name);
	}
	return CORE_OK;
}
