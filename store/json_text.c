/* JSON as text without a jansson tree, byte for byte what json_dumps(JSON_COMPACT) writes:
 * the card as served (the answer to most writes), any tree boardd builds (the journal's lines
 * and the answers), and a flat object's members (an event's payload, an answer's token). The
 * trees themselves, and reading them back, are codec.c's. */
#include "store/store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the card as text, without a jansson tree ----
 *
 * The answer to most writes is the card. Building it as a jansson tree, dumping the tree and
 * freeing it cost ~10 % of the server's CPU in the claim-cycle profile; this writes the same
 * bytes json_dumps(store_card_to_json(c), JSON_COMPACT) writes (same keys in the same order,
 * jansson's escapes), straight into one buffer. A string that is not valid UTF-8 fails the
 * whole card, as json_string does. tests/store/test_store.c holds the two outputs equal. */

struct jbuf {
	char *p;
	size_t len, cap;
	bool ok;
	bool on_stack; /* p is the caller's buffer: growing copies it to the heap */
};

/* Room for n more bytes and the final NUL (written once, by jb_done). */
static void jb_need(struct jbuf *b, size_t n)
{
	size_t cap;
	char *np;

	if (!b->ok || b->len + n + 1 <= b->cap)
		return;
	cap = b->cap ? b->cap : 512;
	while (cap < b->len + n + 1)
		cap *= 2;
	np = b->on_stack ? malloc(cap) : realloc(b->p, cap);
	if (!np) {
		b->ok = false;
		return;
	}
	if (b->on_stack)
		memcpy(np, b->p, b->len);
	b->on_stack = false;
	b->p = np;
	b->cap = cap;
}

static void jb_put(struct jbuf *b, const char *s, size_t n)
{
	jb_need(b, n);
	if (!b->ok)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void jb_lit(struct jbuf *b, const char *s)
{
	jb_put(b, s, strlen(s));
}

/* A string literal: its length is known at compile time. */
#define JB_LIT(b, s) jb_put((b), "" s, sizeof(s) - 1)

/* Length of the UTF-8 sequence at s (as jansson accepts it: no overlongs, no surrogates,
 * nothing past U+10FFFF); 0 when invalid. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned c = s[0], cp;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
	    (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

/* Printable ASCII that JSON carries as it is (0x20..0x7f but '"' and '\\'): the bytes of
 * almost every string served, one lookup each (strings were a tenth of boardd's own
 * instructions per request, bench/instr.sh). */
#define JB_ROW(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
static const unsigned char jb_plain_byte[256] = {
	JB_ROW(0),								/* 0x00 */
	JB_ROW(0),								/* 0x10 */
	1, 1, 0 /* " */, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,		/* 0x20 */
	JB_ROW(1),								/* 0x30 */
	JB_ROW(1),								/* 0x40 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0 /* \\ */, 1, 1, 1,		/* 0x50 */
	JB_ROW(1),								/* 0x60 */
	JB_ROW(1),								/* 0x70 */
	JB_ROW(0), JB_ROW(0), JB_ROW(0), JB_ROW(0),				/* 0x80.. */
	JB_ROW(0), JB_ROW(0), JB_ROW(0), JB_ROW(0),				/* ..0xff */
};
#undef JB_ROW

static bool jb_plain(unsigned char c)
{
	return jb_plain_byte[c];
}

/* The first byte at or after i that is not plain (at most len, the NUL): eight bytes at a
 * time while they lie inside the string (a token or a body is long), then one by one. A word
 * is passed over only when none of its bytes is below 0x20, from 0x80, '"' or '\\' (the
 * tests below have no false negatives). */
static size_t jb_plain_skip(const unsigned char *u, size_t i, size_t len)
{
	const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;

	for (; i + 8 <= len; i += 8) {
		uint64_t v, q, bs;

		memcpy(&v, u + i, 8);
		q = v ^ (ones * '"');
		bs = v ^ (ones * '\\');
		if ((((v - ones * 0x20) & ~v) | v | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & highs)
			break;
	}
	while (jb_plain(u[i]))
		i++;
	return i;
}

static void jb_str(struct jbuf *b, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strlen(s), i = jb_plain_skip(u, 0, len), run = 0, n;
	char esc[8];

	if (i == len) { /* nothing to escape: almost every string, in one copy */
		jb_need(b, len + 2);
		if (!b->ok)
			return;
		b->p[b->len++] = '"';
		memcpy(b->p + b->len, s, len);
		b->len += len;
		b->p[b->len++] = '"';
		return;
	}
	JB_LIT(b, "\"");
	while (b->ok) {
		unsigned char c;
		const char *e = NULL;

		i = jb_plain_skip(u, i, len);
		c = u[i];
		if (!c)
			break;
		switch (c) {
		case '"': e = "\\\""; break;
		case '\\': e = "\\\\"; break;
		case '\b': e = "\\b"; break;
		case '\f': e = "\\f"; break;
		case '\n': e = "\\n"; break;
		case '\r': e = "\\r"; break;
		case '\t': e = "\\t"; break;
		default:
			if (c < 0x20) {
				snprintf(esc, sizeof esc, "\\u%04X", c);
				e = esc;
			}
		}
		if (e) {
			jb_put(b, s + run, i - run);
			jb_lit(b, e);
			run = ++i;
			continue;
		}
		n = utf8_len(u + i);
		if (!n) {
			b->ok = false;
			return;
		}
		i += n;
	}
	jb_need(b, i - run + 1);
	if (!b->ok)
		return;
	memcpy(b->p + b->len, s + run, i - run);
	b->len += i - run;
	b->p[b->len++] = '"';
}

static void jb_str_or_null(struct jbuf *b, const char *s)
{
	if (s)
		jb_str(b, s);
	else
		JB_LIT(b, "null");
}

/* v in decimal, as "%lld" writes it. */
static void jb_int(struct jbuf *b, int64_t v)
{
	char num[24];
	char *p = num + sizeof num;
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	jb_put(b, p, (size_t)(num + sizeof num - p));
}

/* A time is digits and "-:.TZ" (core_time_format): nothing to escape, copied at once. */
/* Formatted in place (a card's answer holds three or four). */
static void jb_time(struct jbuf *b, int64_t ms)
{
	size_t n;

	jb_need(b, CORE_TIME_BUF + 2);
	if (!b->ok)
		return;
	b->p[b->len] = '"';
	core_time_format(ms, b->p + b->len + 1);
	n = strlen(b->p + b->len + 1);
	b->p[b->len + 1 + n] = '"';
	b->len += n + 2;
}

/* A member's key: `key` is a literal of plain ASCII (nothing to escape), written with its
 * quotes and colon in one copy; a comma first unless it opens its object. */
static void jb_key_n(struct jbuf *b, const char *quoted, size_t n)
{
	jb_need(b, n + 1);
	if (!b->ok)
		return;
	if (b->len && b->p[b->len - 1] != '{')
		b->p[b->len++] = ',';
	memcpy(b->p + b->len, quoted, n);
	b->len += n;
}
#define jb_key(b, key) jb_key_n((b), "\"" key "\":", sizeof("\"" key "\":") - 1)

static void jb_strv(struct jbuf *b, const struct core_strv *sv)
{
	size_t i;

	jb_put(b, "[", 1);
	for (i = 0; i < sv->n; i++) {
		if (i)
			jb_put(b, ",", 1);
		jb_str(b, sv->v[i]);
	}
	jb_put(b, "]", 1);
}

/* The card as served (DESIGN §2), appended to b. */
static void jb_card(struct jbuf *b, const struct core_card *c)
{
	size_t i;

	jb_put(b, "{", 1);
	jb_key(b, "id");
	jb_str(b, c->id ? c->id : "");
	jb_key(b, "board");
	jb_str(b, c->board ? c->board : "");
	jb_key(b, "title");
	jb_str(b, c->title ? c->title : "");
	jb_key(b, "body");
	jb_str(b, c->body ? c->body : "");
	jb_key(b, "state");
	jb_str(b, c->state ? c->state : "");
	jb_key(b, "priority");
	jb_int(b, c->priority);
	jb_key(b, "labels");
	jb_strv(b, &c->labels);
	jb_key(b, "blockers");
	jb_strv(b, &c->blockers);
	jb_key(b, "comments");
	jb_put(b, "[", 1);
	for (i = 0; i < c->n_comments; i++) {
		const struct core_comment *cm = &c->comments[i];

		jb_lit(b, i ? ",{" : "{");
		jb_key(b, "id");
		jb_str(b, cm->id ? cm->id : "");
		jb_key(b, "author");
		jb_str(b, cm->author ? cm->author : "");
		jb_key(b, "body");
		jb_str(b, cm->body ? cm->body : "");
		jb_key(b, "created_at");
		jb_time(b, cm->created_at);
		jb_put(b, "}", 1);
	}
	jb_put(b, "]", 1);
	jb_key(b, "claim");
	if (!c->claim.present) {
		JB_LIT(b, "null");
	} else {
		jb_put(b, "{", 1);
		jb_key(b, "marker");
		jb_str(b, c->claim.marker ? c->claim.marker : "");
		jb_key(b, "holder");
		jb_str_or_null(b, c->claim.holder);
		jb_key(b, "epoch");
		if (c->has_epoch)
			jb_int(b, c->claim_epoch);
		else
			JB_LIT(b, "null");
		jb_key(b, "claimed_at");
		jb_time(b, c->claim.claimed_at);
		jb_key(b, "lease_until");
		if (c->claim.has_lease)
			jb_time(b, c->claim.lease_until);
		else
			JB_LIT(b, "null");
		jb_key(b, "lease_ms");
		if (c->claim.has_lease)
			jb_int(b, c->claim.lease_ms);
		else
			JB_LIT(b, "null");
		jb_key(b, "from");
		jb_str_or_null(b, c->claim.from);
		jb_put(b, "}", 1);
	}
	jb_key(b, "claim_epoch");
	if (c->has_epoch)
		jb_int(b, c->claim_epoch);
	else
		JB_LIT(b, "null");
	jb_key(b, "last_run_id");
	jb_str_or_null(b, c->last_run_id);
	jb_key(b, "awaiting_input");
	jb_lit(b, c->awaiting_input ? "true" : "false");
	jb_key(b, "gave_up");
	if (!c->gave_up.set) {
		JB_LIT(b, "null");
	} else {
		jb_put(b, "{", 1);
		jb_key(b, "reason");
		jb_str(b, c->gave_up.reason ? c->gave_up.reason : "");
		jb_key(b, "run_id");
		jb_str_or_null(b, c->gave_up.run_id);
		jb_key(b, "state");
		jb_str_or_null(b, c->gave_up.state);
		jb_key(b, "at");
		jb_time(b, c->gave_up.at);
		jb_put(b, "}", 1);
	}
	jb_key(b, "state_reason");
	jb_str_or_null(b, c->state_reason);
	jb_key(b, "created_at");
	jb_time(b, c->created_at);
	jb_key(b, "updated_at");
	jb_time(b, c->updated_at);
	jb_key(b, "state_at");
	jb_time(b, c->state_at);
	jb_key(b, "not_before");
	if (c->not_before)
		jb_time(b, c->not_before);
	else
		JB_LIT(b, "null");
	jb_key(b, "attempts");
	jb_int(b, c->attempts);
	jb_put(b, "}", 1);
}

/* b's text (caller frees) and its length, or NULL when a write failed. */
static char *jb_done(struct jbuf *b, size_t *len)
{
	char *text;

	jb_need(b, 0);
	if (!b->ok) {
		if (!b->on_stack)
			free(b->p);
		return NULL;
	}
	b->p[b->len] = '\0';
	*len = b->len;
	if (!b->on_stack)
		return b->p;
	/* Kept (an event's payload lives in the store): exactly its size, as json_dumps. */
	text = malloc(b->len + 1);
	if (text)
		memcpy(text, b->p, b->len + 1);
	return text;
}

char *store_card_json_text(const struct core_card *c, size_t *len)
{
	struct jbuf b = {.ok = true};

	jb_need(&b, 1023); /* a card's answer is 500-1000 bytes: one allocation, no realloc */
	jb_card(&b, c);
	return jb_done(&b, len);
}

/* ---- any tree as compact text, without json_dumps ----
 * json_dumps builds a loop-detection hashtable and a growing strbuffer for every call: with the
 * event payloads of every write it was ~2 % of the server's CPU in the claim-cycle profile.
 * This writes the same bytes for the trees boardd builds (objects, arrays, strings, integers,
 * true, false, null, in jansson's order); anything else (a real, a string or key holding a
 * NUL, deeper than JB_TREE_DEPTH) returns false and the caller lets json_dumps write it. */
#define JB_TREE_DEPTH 32

static bool jb_tree(struct jbuf *b, const json_t *j, unsigned depth)
{
	const char *key;
	json_t *v;
	size_t i;

	if (depth > JB_TREE_DEPTH)
		return false;
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		JB_LIT(b, "{");
		i = 0;
		json_object_foreach((json_t *)j, key, v) {
			if (strlen(key) != json_object_iter_key_len(json_object_key_to_iter(key)))
				return false;
			if (i++)
				JB_LIT(b, ",");
			jb_str(b, key);
			JB_LIT(b, ":");
			if (!jb_tree(b, v, depth + 1))
				return false;
		}
		JB_LIT(b, "}");
		return b->ok;
	case JSON_ARRAY:
		JB_LIT(b, "[");
		json_array_foreach(j, i, v) {
			if (i)
				JB_LIT(b, ",");
			if (!jb_tree(b, v, depth + 1))
				return false;
		}
		JB_LIT(b, "]");
		return b->ok;
	case JSON_STRING:
		if (strlen(json_string_value(j)) != json_string_length(j))
			return false;
		jb_str(b, json_string_value(j));
		return b->ok;
	case JSON_INTEGER:
		jb_int(b, json_integer_value(j));
		return b->ok;
	case JSON_TRUE:
		JB_LIT(b, "true");
		return b->ok;
	case JSON_FALSE:
		JB_LIT(b, "false");
		return b->ok;
	case JSON_NULL:
		JB_LIT(b, "null");
		return b->ok;
	default:
		return false;
	}
}

char *store_json_text(const json_t *j, size_t *len)
{
	char stack[512];
	struct jbuf b = {.p = stack, .cap = sizeof stack, .ok = true, .on_stack = true};
	char *text;

	if (j && (json_is_object(j) || json_is_array(j))) {
		if (jb_tree(&b, j, 0))
			return jb_done(&b, len); /* NULL: out of memory */
		if (!b.on_stack)
			free(b.p);
	}
	text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (text)
		*len = strlen(text);
	return text;
}

char *store_json_members_text(const struct store_json_member *m, size_t n, size_t *len)
{
	char stack[256];
	struct jbuf b = {.p = stack, .cap = sizeof stack, .ok = true, .on_stack = true};
	size_t i;

	JB_LIT(&b, "{");
	for (i = 0; i < n; i++) {
		if (i)
			JB_LIT(&b, ",");
		jb_str(&b, m[i].key);
		JB_LIT(&b, ":");
		switch (m[i].type) {
		case STORE_JSON_STR:
			jb_str(&b, m[i].s);
			break;
		case STORE_JSON_INT:
			jb_int(&b, m[i].i);
			break;
		case STORE_JSON_BOOL:
			jb_lit(&b, m[i].i ? "true" : "false");
			break;
		case STORE_JSON_RAW:
			jb_lit(&b, m[i].s);
			break;
		case STORE_JSON_NULL:
		default:
			JB_LIT(&b, "null");
			break;
		}
	}
	JB_LIT(&b, "}");
	return jb_done(&b, len);
}
