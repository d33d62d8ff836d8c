/* Reading a request: flat bodies without a tree (body.c), then bodies, queries, path
 * parameters, JSON field helpers, times and the answer setters (request.c); the body fuzz
 * comparison (fuzz_body.c). */
#ifndef BOARDD_API_API_REQUEST_H
#define BOARDD_API_API_REQUEST_H

#include "api/api_req.h"
#include "core/core.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

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
/* An RFC 3339 time (ms into *out); absent or null: *out 0. *present: the key was there
 * (null included: "clears" on a PATCH). Anything else -> BAD_REQUEST. */
enum core_rc api_json_time(struct api_req *r, const char *key, int64_t *out, bool *present);
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

/* A JSON answer written piece by piece (the batch answers of DESIGN §18). oom: an allocation
 * failed; every later add is then a no-op and api_reply_text answers out_of_memory. */
struct api_text {
	char *p;
	size_t len, cap;
	bool oom;
};

void api_text_add(struct api_text *t, const char *s, size_t n);
void api_text_str(struct api_text *t, const char *s);
/* Sets t's text as the answer (taken; t is left empty), or frees it and returns NOMEM. */
enum core_rc api_reply_text(struct api_req *r, unsigned status, struct api_text *t);

#endif
