/* Request helpers: the JSON body, query parameters, body fields, If-Match, JSON answers.
 * Every check of outside input ends in BAD_REQUEST with a detail, never an assert. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_daemon.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STRV_MAX 1000 /* labels or blockers in one body */

static bool spec_has(const char *spec, const char *key, bool *nullable);

enum core_rc api_body_parse_tree(struct api_req *r)
{
	json_error_t jerr;

	if (!r->body || r->body_len == 0)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "a JSON object body is required");
	r->json = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!r->json)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "malformed JSON: %s (line %d, column %d)",
				jerr.text, jerr.line, jerr.column);
	if (json_is_array(r->json) && (r->route->flags & API_ROUTE_ARRAY))
		return CORE_OK; /* a batch: its handler checks each item */
	if (!json_is_object(r->json))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "the body must be a JSON object");
	return api_json_fields_check(r, r->json, r->route->fields ? r->route->fields : "", "");
}

static enum core_rc field_check(struct api_req *r, const char *spec, const char *prefix,
				const char *key, bool is_null);

enum core_rc api_body_none(struct api_req *r)
{
	size_t i = 0;

	while (r->body && i < r->body_len && strchr(" \t\r\n", r->body[i]))
		i++;
	if (!r->body || i == r->body_len)
		return CORE_OK;
	/* An empty schema: {} passes, a member is "unknown field" as on every other route. */
	return api_body_parse_tree(r);
}

enum core_rc api_body_parse(struct api_req *r)
{
	const char *spec = r->route->fields ? r->route->fields : "";
	enum core_rc rc;
	size_t i;

	if (!(r->route->flags & API_ROUTE_FLAT) || !r->body ||
	    !api_flat_parse(r->body, r->body_len, &r->flat))
		return api_body_parse_tree(r);
	for (i = 0; i < r->flat.n; i++) {
		rc = field_check(r, spec, "", r->flat.f[i].key, r->flat.f[i].type == API_FLAT_NULL);
		if (rc != CORE_OK)
			return rc;
	}
	return CORE_OK;
}

/* Is `key` a word of spec? *nullable when it is written "?key". */
static bool spec_has(const char *spec, const char *key, bool *nullable)
{
	size_t klen = strlen(key);

	while (*spec) {
		const char *w;
		size_t n;

		while (*spec == ' ')
			spec++;
		*nullable = *spec == '?';
		w = spec + *nullable;
		n = strcspn(w, " ");
		if (n && n == klen && memcmp(w, key, n) == 0)
			return true;
		spec = w + n;
	}
	return false;
}

/* One member of a body object against spec: the one wording of both parsers' refusals. */
static enum core_rc field_check(struct api_req *r, const char *spec, const char *prefix,
				const char *key, bool is_null)
{
	bool nullable;

	if (!spec_has(spec, key, &nullable)) {
		char allowed[160];
		size_t i, o = 0;

		for (i = 0; spec[i] && o + 1 < sizeof allowed; i++)
			if (spec[i] != '?')
				allowed[o++] = spec[i] == ' ' ? ',' : spec[i];
		allowed[o] = '\0';
		return api_fail(r, CORE_ERR_BAD_REQUEST, "unknown field \"%s%.64s\" (known: %s)",
				prefix, key, allowed[0] ? allowed : "none");
	}
	if (is_null && !nullable)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"%s%s\" may not be null", prefix,
				key);
	return CORE_OK;
}

enum core_rc api_json_fields_check(struct api_req *r, const json_t *obj, const char *spec,
				   const char *prefix)
{
	const char *key;
	json_t *v;
	enum core_rc rc;

	json_object_foreach((json_t *)obj, key, v) {
		rc = field_check(r, spec, prefix, key, json_is_null(v));
		if (rc != CORE_OK)
			return rc;
	}
	return CORE_OK;
}

struct query_scan {
	const char *spec;
	const char *seen[8]; /* the known keys met so far (borrowed from the spec's words) */
	size_t n_seen;
	const char *bad;     /* the first unknown, repeated or valueless key (borrowed from MHD) */
	bool repeated;
	bool novalue;        /* "?limit": libmicrohttpd's NULL value, which a lookup cannot tell
			      * from an absent key */
};

static enum MHD_Result query_each(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	struct query_scan *q = cls;
	bool nullable;
	size_t i;

	(void)kind;
	if (!spec_has(q->spec, key, &nullable)) {
		q->bad = key;
		return MHD_NO;
	}
	if (!value) {
		q->bad = key;
		q->novalue = true;
		return MHD_NO;
	}
	for (i = 0; i < q->n_seen; i++)
		if (strcmp(q->seen[i], key) == 0) {
			q->bad = key;
			q->repeated = true;
			return MHD_NO;
		}
	if (q->n_seen < sizeof q->seen / sizeof q->seen[0])
		q->seen[q->n_seen++] = key;
	return MHD_YES;
}

enum core_rc api_query_check(struct api_req *r)
{
	struct query_scan q = {.spec = r->route->query ? r->route->query : ""};

	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_each, &q);
	if (!q.bad)
		return CORE_OK;
	if (q.repeated)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "query parameter \"%.64s\" given twice",
				q.bad);
	if (q.novalue)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"query parameter \"%.64s\" has no value (%.64s=...)", q.bad, q.bad);
	return api_fail(r, CORE_ERR_BAD_REQUEST, "unknown query parameter \"%.64s\" (known: %s)",
			q.bad, r->route->query ? r->route->query : "none");
}

enum core_rc api_query(struct api_req *r, const char *key, const char **out)
{
	const char *raw;
	char *dec;
	bool oom;

	*out = NULL;
	raw = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
	if (!raw)
		return CORE_OK;
	if (r->n_qdec == sizeof r->qdec / sizeof r->qdec[0])
		return api_fail(r, CORE_ERR_BAD_REQUEST, "too many query parameters");
	dec = api_pct_decode(raw, strlen(raw), true, &oom);
	if (!dec)
		return oom ? CORE_ERR_NOMEM
			   : api_fail(r, CORE_ERR_BAD_REQUEST, "query parameter %s: bad escape", key);
	r->qdec[r->n_qdec++] = dec;
	*out = dec;
	return CORE_OK;
}

static bool int_parse(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

enum core_rc api_query_int(struct api_req *r, const char *key, int64_t def, int64_t min,
			   int64_t max, int64_t *out)
{
	const char *s;
	enum core_rc rc = api_query(r, key, &s);
	int64_t v;

	if (rc != CORE_OK)
		return rc;
	if (!s) {
		*out = def;
		return CORE_OK;
	}
	if (!int_parse(s, &v) || v < min || v > max)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"query parameter %s must be an integer in [%" PRId64 ", %" PRId64 "]",
				key, min, max);
	*out = v;
	return CORE_OK;
}

/* Characters (code points) of a UTF-8 string (jansson checked it): the contract counts
 * characters, as JSON Schema's maxLength does. */
static size_t utf8_chars(const char *s, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xc0) != 0x80;
	return n;
}

/* A body member as the helpers see it, from the tree (r->json, also MCP's arguments) or the
 * flat body: FV_ABSENT for absent and for JSON null. */
enum fv_type {
	FV_ABSENT,
	FV_STR,
	FV_INT,
	FV_BOOL,
	FV_OTHER, /* real, array, object */
};

struct fv {
	enum fv_type t;
	const char *s;
	size_t len;
	int64_t i;
	bool b;
};

static struct fv field(struct api_req *r, const char *key)
{
	struct fv v = {FV_ABSENT, NULL, 0, 0, false};

	if (r->json) {
		const json_t *j = json_object_get(r->json, key);

		if (!j || json_is_null(j))
			return v;
		if (json_is_string(j)) {
			v.t = FV_STR;
			v.s = json_string_value(j);
			v.len = json_string_length(j);
		} else if (json_is_integer(j)) {
			v.t = FV_INT;
			v.i = json_integer_value(j);
		} else if (json_is_boolean(j)) {
			v.t = FV_BOOL;
			v.b = json_is_true(j);
		} else {
			v.t = FV_OTHER;
		}
	} else {
		const struct api_flat_field *f = api_flat_get(&r->flat, key);

		if (!f || f->type == API_FLAT_NULL)
			return v;
		v.t = f->type == API_FLAT_STR ? FV_STR : f->type == API_FLAT_INT ? FV_INT : FV_BOOL;
		v.s = f->str;
		v.len = f->len;
		v.i = f->i;
		v.b = f->b;
	}
	return v;
}

bool api_json_has(struct api_req *r, const char *key)
{
	if (r->json)
		return json_object_get(r->json, key) != NULL;
	return api_flat_get(&r->flat, key) != NULL;
}

enum core_rc api_json_str(struct api_req *r, const char *key, bool required, size_t max,
			  const char **out)
{
	struct fv v = field(r, key);

	*out = NULL;
	if (v.t == FV_ABSENT)
		return required ? api_fail(r, CORE_ERR_BAD_REQUEST, "missing field \"%s\"", key)
				: CORE_OK;
	if (v.t != FV_STR)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"%s\" must be a string", key);
	if (utf8_chars(v.s, v.len) > max)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"field \"%s\" is longer than %zu characters", key, max);
	*out = v.s;
	return CORE_OK;
}

enum core_rc api_json_id(struct api_req *r, const char *key, bool required, const char **out)
{
	enum core_rc rc = api_json_str(r, key, required, CORE_ID_MAX, out);

	if (rc != CORE_OK)
		return rc;
	if (*out && !core_id_valid(*out)) {
		*out = NULL;
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"field \"%s\" must match [A-Za-z0-9._:-]{1,128}", key);
	}
	return CORE_OK;
}

enum core_rc api_json_marker(struct api_req *r, bool client, const char **out)
{
	enum core_rc rc = api_json_str(r, "marker", true, CORE_MARKER_MAX, out);

	if (rc != CORE_OK)
		return rc;
	if (!core_marker_valid(*out)) {
		*out = NULL;
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"\"marker\" must be 1..128 printable ASCII characters, no space");
	}
	if (client && core_marker_is_recovery(*out)) {
		*out = NULL;
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"markers starting with \"" CORE_RECOVERY_PREFIX
				"\" are reserved for the reaper");
	}
	return CORE_OK;
}

enum core_rc api_json_reason(struct api_req *r, const char **out)
{
	enum core_rc rc = api_json_str(r, "reason", false, API_REASON_MAX, out);

	if (rc != CORE_OK || !*out || !core_is_machine_reason(*out))
		return rc;
	/* An operator's migration (deploy/boardd-copy filling a new store) is the one machine
	 * write a client makes: the copied cards' moves must fire nothing on the target. */
	if (strcmp(*out, "migration") == 0 && api_auth_has(r, API_ROLE_OPERATOR))
		return CORE_OK;
	rc = api_fail(r, CORE_ERR_BAD_REQUEST,
		      "reason %s is reserved: the machine reasons (watchdog, state_rename, "
		      "state_delete, and migration but for an operator's) are the server's own "
		      "provenance",
		      *out);
	*out = NULL;
	return rc;
}

enum core_rc api_json_int(struct api_req *r, const char *key, bool required, int64_t *out,
			  bool *present)
{
	struct fv v = field(r, key);

	if (present)
		*present = v.t != FV_ABSENT;
	if (v.t == FV_ABSENT)
		return required ? api_fail(r, CORE_ERR_BAD_REQUEST, "missing field \"%s\"", key)
				: CORE_OK;
	if (v.t != FV_INT)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"%s\" must be an integer", key);
	*out = v.i;
	return CORE_OK;
}

enum core_rc api_json_priority(struct api_req *r, int32_t *out, bool *present)
{
	int64_t v = 0;
	bool have = false;
	enum core_rc rc = api_json_int(r, "priority", false, &v, &have);

	if (present)
		*present = have;
	if (rc != CORE_OK || !have)
		return rc;
	if (v < INT32_MIN || v > INT32_MAX)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"field \"priority\" must be a 32-bit integer (-2147483648..2147483647)");
	*out = (int32_t)v;
	return CORE_OK;
}

enum core_rc api_json_time(struct api_req *r, const char *key, int64_t *out, bool *present)
{
	struct fv v = field(r, key);

	*present = api_json_has(r, key);
	*out = 0;
	if (v.t == FV_ABSENT) /* absent, or null: no time */
		return CORE_OK;
	if (v.t != FV_STR || !core_time_parse(v.s, out)) {
		*out = 0;
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"field \"%s\" must be an RFC 3339 time (2026-12-24T18:00:00Z, or with "
				"an offset +hh:mm) or null",
				key);
	}
	return CORE_OK;
}

enum core_rc api_json_bool(struct api_req *r, const char *key, bool required, bool *out)
{
	struct fv v = field(r, key);

	if (v.t == FV_ABSENT)
		return required ? api_fail(r, CORE_ERR_BAD_REQUEST, "missing field \"%s\"", key)
				: CORE_OK;
	if (v.t != FV_BOOL)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"%s\" must be a boolean", key);
	*out = v.b;
	return CORE_OK;
}

enum core_rc api_json_strv(struct api_req *r, const json_t *obj, const char *key,
			   bool (*valid)(const char *), struct core_strv *out, bool *present)
{
	const json_t *arr = json_object_get(obj ? obj : r->json, key), *v;
	enum core_rc rc;
	size_t i;

	if (!obj && !r->json) { /* a flat body: only scalars, which are not arrays */
		struct fv f = field(r, key);

		if (present)
			*present = f.t != FV_ABSENT;
		return f.t == FV_ABSENT ? CORE_OK
					: api_fail(r, CORE_ERR_BAD_REQUEST,
						   "field \"%s\" must be an array of strings", key);
	}
	if (present)
		*present = arr && !json_is_null(arr);
	if (!arr || json_is_null(arr))
		return CORE_OK;
	if (!json_is_array(arr))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"%s\" must be an array of strings",
				key);
	if (json_array_size(arr) > STRV_MAX)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "field \"%s\" has more than %d entries",
				key, STRV_MAX);
	json_array_foreach(arr, i, v) {
		const char *s = json_string_value(v);

		if (!s || (valid && !valid(s))) {
			core_strv_release(out);
			return api_fail(r, CORE_ERR_BAD_REQUEST, "%s[%zu] is not a valid entry", key,
					i);
		}
		rc = core_strv_push(out, s);
		if (rc != CORE_OK) {
			core_strv_release(out);
			return rc;
		}
	}
	return CORE_OK;
}

enum core_rc api_json_lease(struct api_req *r, int64_t *out)
{
	const struct api_config *c = &r->api->cfg;
	bool present = false;
	enum core_rc rc = api_json_int(r, "lease_ms", false, out, &present);

	if (rc != CORE_OK)
		return rc;
	if (!present) {
		*out = c->lease_default_ms;
		return CORE_OK;
	}
	if (*out < c->lease_min_ms || *out > c->lease_max_ms)
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"lease_ms must be in [%" PRId64 ", %" PRId64 "]", c->lease_min_ms,
				c->lease_max_ms);
	return CORE_OK;
}

enum core_rc api_if_match(struct api_req *r, int64_t *epoch)
{
	enum core_rc rc;
	const char *h = api_hdr_once(r, API_HDR_IF_MATCH, &rc);
	char buf[32];
	size_t n;

	if (rc != CORE_OK)
		return rc;
	if (!h)
		return api_fail(r, CORE_ERR_PRECONDITION_REQUIRED,
				"owned writes need If-Match: \"<epoch>\"");
	while (*h == ' ')
		h++;
	n = strlen(h);
	while (n && h[n - 1] == ' ')
		n--;
	if (n >= 2 && h[0] == '"' && h[n - 1] == '"') {
		h++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof buf)
		goto bad;
	memcpy(buf, h, n);
	buf[n] = '\0';
	if (!int_parse(buf, epoch) || *epoch < 0)
		goto bad;
	return CORE_OK;
bad:
	return api_fail(r, CORE_ERR_BAD_REQUEST, "If-Match must be \"<epoch>\" (an integer)");
}

enum core_rc api_json_name(struct api_req *r, const char *key, bool required, const char **out)
{
	enum core_rc rc = api_json_str(r, key, required, CORE_NAME_MAX, out);

	if (rc == CORE_OK && *out && !core_name_valid(*out)) {
		*out = NULL;
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"field \"%s\" must match [A-Za-z0-9._-]{1,64}", key);
	}
	return rc;
}

const char *api_param(const struct api_req *r)
{
	return r->n_params ? r->params[0] : NULL;
}

json_t *api_time_json(int64_t ms)
{
	char buf[CORE_TIME_BUF];

	return json_string(core_time_format(ms, buf));
}

/* ---- percent-decoding (the query here, the path's segments in router.c) ---- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool api_pct_decode_to(const char *s, size_t len, bool plus_space, char *out)
{
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		if (s[i] == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return false;
			hi = hexval(s[i + 1]);
			lo = hexval(s[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return false;
			out[o++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			out[o++] = (plus_space && s[i] == '+') ? ' ' : s[i];
		}
	}
	out[o] = '\0';
	return true;
}

char *api_pct_decode(const char *s, size_t len, bool plus_space, bool *oom)
{
	char *out = malloc(len + 1);

	*oom = !out;
	if (out && !api_pct_decode_to(s, len, plus_space, out)) {
		free(out);
		return NULL;
	}
	return out;
}

int64_t api_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum core_rc api_reply(struct api_req *r, unsigned status, json_t *out)
{
	if (!out)
		return CORE_ERR_NOMEM;
	json_decref(r->out);
	r->out = out;
	r->status = status;
	return CORE_OK;
}

void api_text_add(struct api_text *t, const char *s, size_t n)
{
	if (t->oom)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		char *np;

		while (cap < t->len + n + 1)
			cap *= 2;
		np = realloc(t->p, cap);
		if (!np) {
			t->oom = true;
			return;
		}
		t->p = np;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

void api_text_str(struct api_text *t, const char *s)
{
	api_text_add(t, s, strlen(s));
}

enum core_rc api_reply_text(struct api_req *r, unsigned status, struct api_text *t)
{
	char *p = t->p;
	size_t len = t->len;
	bool oom = t->oom || !p;

	*t = (struct api_text){0};
	if (oom) {
		free(p);
		return CORE_ERR_NOMEM;
	}
	return api_reply_json_text(r, status, p, len);
}

enum core_rc api_reply_json_text(struct api_req *r, unsigned status, char *text, size_t len)
{
	if (!text)
		return CORE_ERR_NOMEM;
	json_decref(r->out);
	r->out = NULL;
	free(r->raw_owned);
	r->raw_owned = text;
	r->raw_len = len;
	r->raw_type = "application/json";
	r->status = status;
	return CORE_OK;
}
