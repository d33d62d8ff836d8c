/* Flat request bodies, read without building a jansson tree.
 *
 * The hot routes (claim, renew, release, the owned writes: DESIGN §3, §8) take a closed
 * object of a few scalar fields. Parsing it with json_loadb and freeing the tree cost more
 * than the rest of the request's own work in the claim-cycle profile (bench/README.md). This
 * parser accepts only a strict subset of JSON -- one object of at most API_FLAT_MAX members
 * whose keys and string values are printable ASCII without escapes, integers without fraction
 * or exponent and at most 18 digits, true, false, null; no duplicate key -- and declines
 * everything else, which then goes to json_loadb as before. So every malformed body, and every
 * body it does not know, gets exactly the answer it got before (the same parser says what is
 * wrong), and a body it accepts holds the same members, in the same order, with the same values
 * jansson would give. tests/api/test_api_units.c feeds both a corpus of bodies and
 * tests/fuzz/fuzz_body.c compares them on arbitrary bytes. */
#include "api/api_req.h"
#include "api/api_request.h"

#include <string.h>

static const char *ws_skip(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* A string without escapes or non-ASCII bytes: *p at its opening quote; the position after
 * the closing quote, NULL to decline. OUT: [*s, *s + *len). */
static const char *str_scan(const char *p, const char *end, const char **s, size_t *len)
{
	const char *q;

	if (p >= end || *p != '"')
		return NULL;
	for (q = ++p; q < end; q++) {
		unsigned char c = (unsigned char)*q;

		if (c == '"') {
			*s = p;
			*len = (size_t)(q - p);
			return q + 1;
		}
		if (c < 0x20 || c > 0x7e || c == '\\')
			return NULL;
	}
	return NULL;
}

static bool delim(const char *p, const char *end)
{
	return p == end || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',' ||
	       *p == '}';
}

/* One scalar value; the position after it, NULL to decline. */
static const char *value_scan(const char *p, const char *end, struct api_flat_field *f)
{
	static const struct {
		const char *lit;
		size_t len;
		enum api_flat_type type;
		bool b;
	} lits[] = {
		{"true", 4, API_FLAT_BOOL, true},
		{"false", 5, API_FLAT_BOOL, false},
		{"null", 4, API_FLAT_NULL, false},
	};
	size_t i;

	if (p >= end)
		return NULL;
	if (*p == '"') {
		f->type = API_FLAT_STR;
		return str_scan(p, end, &f->str, &f->len);
	}
	if (*p == '-' || (*p >= '0' && *p <= '9')) {
		bool neg = *p == '-';
		const char *d = p + neg, *q = d;
		int64_t v = 0;

		while (q < end && *q >= '0' && *q <= '9')
			q++;
		/* "01", "-", fractions, exponents, more than 18 digits (jansson's range checks):
		 * json_loadb's to judge */
		if (q == d || (*d == '0' && q - d > 1) || q - d > 18 || !delim(q, end))
			return NULL;
		for (; d < q; d++)
			v = v * 10 + (*d - '0');
		f->type = API_FLAT_INT;
		f->i = neg ? -v : v;
		return q;
	}
	for (i = 0; i < sizeof lits / sizeof lits[0]; i++) {
		if ((size_t)(end - p) >= lits[i].len && memcmp(p, lits[i].lit, lits[i].len) == 0 &&
		    delim(p + lits[i].len, end)) {
			f->type = lits[i].type;
			f->b = lits[i].b;
			return p + lits[i].len;
		}
	}
	return NULL;
}

/* The members of the object [p, end) into fl (fl->n of them); false to decline. */
static bool flat_members(const char *p, const char *end, struct api_flat *fl)
{
	size_t i;

	p = ws_skip(p, end);
	if (p >= end || *p != '{')
		return false;
	p = ws_skip(p + 1, end);
	if (p < end && *p == '}') {
		p++;
	} else {
		for (;;) {
			struct api_flat_field *f;

			if (fl->n == API_FLAT_MAX)
				return false;
			f = &fl->f[fl->n];
			p = str_scan(p, end, &f->key, &f->klen);
			if (!p)
				return false;
			for (i = 0; i < fl->n; i++) /* a duplicate: json_loadb's refusal */
				if (fl->f[i].klen == f->klen &&
				    memcmp(fl->f[i].key, f->key, f->klen) == 0)
					return false;
			p = ws_skip(p, end);
			if (p >= end || *p != ':')
				return false;
			p = value_scan(ws_skip(p + 1, end), end, f);
			if (!p)
				return false;
			fl->n++;
			p = ws_skip(p, end);
			if (p < end && *p == ',') {
				p = ws_skip(p + 1, end);
				continue;
			}
			if (p < end && *p == '}') {
				p++;
				break;
			}
			return false;
		}
	}
	return ws_skip(p, end) == end;
}

bool api_flat_parse(char *body, size_t len, struct api_flat *out)
{
	const char *end = body + len;
	size_t i;

	/* Parsed in place (a copy of the whole struct cost more than the scan); declined, it
	 * is left empty. */
	out->n = 0;
	out->on = false;
	if (!flat_members(body, end, out)) {
		out->n = 0;
		return false;
	}
	/* Accepted: each key and string ends at its closing quote, which becomes its NUL. */
	for (i = 0; i < out->n; i++) {
		body[out->f[i].key + out->f[i].klen - body] = '\0';
		if (out->f[i].type == API_FLAT_STR)
			body[out->f[i].str + out->f[i].len - body] = '\0';
	}
	out->on = true;
	return true;
}

const struct api_flat_field *api_flat_get(const struct api_flat *fl, const char *key)
{
	size_t klen = strlen(key), i;

	for (i = 0; fl->on && i < fl->n; i++) /* the first byte before the call */
		if (fl->f[i].klen == klen && fl->f[i].key[0] == key[0] &&
		    memcmp(fl->f[i].key, key, klen) == 0)
			return &fl->f[i];
	return NULL;
}
