/* Test/fuzz only (not linked into boardd): the flat body parser (body.c) against json_loadb.
 * One body goes through api_body_parse (the flat path when it accepts) and through
 * api_body_parse_tree (the path every body took before), for one API_ROUTE_FLAT route; the
 * two requests must agree on the outcome and its detail, and then on what every helper a
 * handler calls reads out of the body. tests/api/test_api_units.c runs it on a corpus of
 * bodies, tests/fuzz/fuzz_body.c on arbitrary bytes. */
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys asked for: the route's own and some it does not know. */
static size_t keys_of(const char *spec, char keys[][32], size_t max)
{
	static const char *const extra[] = {"x", "", "labels", "epoch", "marker"};
	size_t n = 0, i;

	while (*spec && n < max) {
		size_t l;

		while (*spec == ' ' || *spec == '?')
			spec++;
		l = strcspn(spec, " ");
		if (l && l < 32) {
			memcpy(keys[n], spec, l);
			keys[n++][l] = '\0';
		}
		spec += l;
	}
	for (i = 0; i < sizeof extra / sizeof extra[0] && n < max; i++)
		snprintf(keys[n++], 32, "%s", extra[i]);
	return n;
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The helpers' readings of one key, as text. */
static void readings(struct api_req *r, const char *key, char *out, size_t cap)
{
	const char *s = NULL;
	int64_t i = -7;
	bool b = false, present = false, has;
	struct core_strv sv = {0};
	enum core_rc rc_s, rc_i, rc_b, rc_v;
	int n;

	r->detail[0] = '\0';
	rc_s = api_json_str(r, key, false, API_STRING_MAX, &s);
	n = snprintf(out, cap, "str %d %s [%s]", rc_s, s ? s : "(null)", r->detail);
	r->detail[0] = '\0';
	rc_i = api_json_int(r, key, true, &i, &present);
	n += snprintf(out + n, cap - (size_t)n, " int %d %lld %d [%s]", rc_i, (long long)i, present,
		      r->detail);
	r->detail[0] = '\0';
	rc_b = api_json_bool(r, key, false, &b);
	n += snprintf(out + n, cap - (size_t)n, " bool %d %d [%s]", rc_b, b, r->detail);
	r->detail[0] = '\0';
	present = false;
	rc_v = api_json_strv(r, NULL, key, NULL, &sv, &present);
	has = api_json_has(r, key);
	snprintf(out + n, cap - (size_t)n, " strv %d %zu %d [%s] has %d", rc_v, sv.n, present,
		 r->detail, has);
	core_strv_release(&sv);
	r->detail[0] = '\0';
}

const char *api_fuzz_body(unsigned route_sel, const char *body, size_t len, bool *flat)
{
	static _Thread_local char why[1280];
	const struct api_route *routes, *route = NULL;
	struct api a = {0};
	struct api_req r1 = {0}, r2 = {0};
	char keys[16][32], got1[1024], got2[1024];
	size_t n_routes, n_flat = 0, i, n_keys;
	enum core_rc rc1, rc2;
	const char *res = NULL;

	*flat = false;
	routes = api_router_table(&n_routes);
	for (i = 0; i < n_routes; i++)
		n_flat += (routes[i].flags & API_ROUTE_FLAT) != 0;
	if (!n_flat)
		return "no API_ROUTE_FLAT route";
	route_sel %= (unsigned)n_flat;
	for (i = 0; i < n_routes && !route; i++)
		if ((routes[i].flags & API_ROUTE_FLAT) && route_sel-- == 0)
			route = &routes[i];
	api_config_init(&a.cfg);
	r1.api = r2.api = &a;
	r1.route = r2.route = route;
	/* Both own a copy, NUL-terminated as api.c keeps it. */
	r1.body = malloc(len + 1);
	r2.body = malloc(len + 1);
	if (!r1.body || !r2.body) {
		res = NULL; /* out of memory: nothing to compare */
		goto out;
	}
	memcpy(r1.body, body, len);
	memcpy(r2.body, body, len);
	r1.body[len] = r2.body[len] = '\0';
	r1.body_len = r2.body_len = len;
	rc1 = api_body_parse(&r1);
	rc2 = api_body_parse_tree(&r2);
	*flat = r1.flat.on;
	if (rc1 != rc2 || strcmp(r1.detail, r2.detail) != 0) {
		snprintf(why, sizeof why, "%s %s: flat %d [%.256s], tree %d [%.256s]", route->method,
			 route->pattern, rc1, r1.detail, rc2, r2.detail);
		res = why;
		goto out;
	}
	if (rc1 != CORE_OK)
		goto out;
	if (r1.flat.on && r1.json) {
		res = "both a flat body and a tree";
		goto out;
	}
	n_keys = keys_of(route->fields ? route->fields : "", keys, 16);
	for (i = 0; i < n_keys; i++) {
		readings(&r1, keys[i], got1, sizeof got1);
		readings(&r2, keys[i], got2, sizeof got2);
		if (!same_str(got1, got2)) {
			snprintf(why, sizeof why, "%s %s, key \"%s\": flat {%.480s}, tree {%.480s}",
				 route->method, route->pattern, keys[i], got1, got2);
			res = why;
			goto out;
		}
	}
out:
	json_decref(r1.json);
	json_decref(r2.json);
	free(r1.body);
	free(r2.body);
	return res;
}
