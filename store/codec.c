/* The JSON codec: the served shapes of DESIGN §2/§5/§7 (the FS journal and snapshot reuse it).
 *
 * _to_json builds a new reference. _from_json reads a borrowed json_t into fresh objects and
 * either hands them over whole or frees everything it built: on failure nothing stays
 * allocated and the OUT parameter is NULL/zeroed. Every field is required (nullable ones as
 * explicit null), so a truncated document is refused instead of half-read.
 */
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

/* New reference to a time string; NULL on OOM. */
static json_t *time_json(int64_t ms)
{
	char buf[CORE_TIME_BUF];

	return json_string(core_time_format(ms, buf));
}

json_t *store_json_str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *store_json_strv(const struct core_strv *sv)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && i < sv->n; i++) {
		if (json_array_append_new(a, json_string(sv->v[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

void store_json_put(json_t *o, const char *key, json_t *v, bool *ok)
{
	if (!v || json_object_set_new(o, key, v) != 0)
		*ok = false;
}

static json_t *comments_json(const struct core_card *c)
{
	json_t *a = json_array();
	size_t i;
	bool ok = a != NULL;

	for (i = 0; ok && i < c->n_comments; i++) {
		const struct core_comment *cm = &c->comments[i];
		json_t *o = json_object();

		if (!o) {
			ok = false;
			break;
		}
		store_json_put(o, "id", json_string(cm->id ? cm->id : ""), &ok);
		store_json_put(o, "author", json_string(cm->author ? cm->author : ""), &ok);
		store_json_put(o, "body", json_string(cm->body ? cm->body : ""), &ok);
		store_json_put(o, "created_at", time_json(cm->created_at), &ok);
		if (json_array_append_new(a, o) != 0)
			ok = false;
	}
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *claim_json(const struct core_card *c)
{
	json_t *o;
	bool ok = true;

	if (!c->claim.present)
		return json_null();
	o = json_object();
	if (!o)
		return NULL;
	store_json_put(o, "marker", json_string(c->claim.marker ? c->claim.marker : ""), &ok);
	store_json_put(o, "holder", store_json_str_or_null(c->claim.holder), &ok);
	store_json_put(o, "epoch", c->has_epoch ? json_integer(c->claim_epoch) : json_null(), &ok);
	store_json_put(o, "claimed_at", time_json(c->claim.claimed_at), &ok);
	/* A legacy or stripped claim has no lease: say so rather than invent one. */
	store_json_put(o, "lease_until",
		       c->claim.has_lease ? time_json(c->claim.lease_until) : json_null(), &ok);
	store_json_put(o, "lease_ms",
		       c->claim.has_lease ? json_integer(c->claim.lease_ms) : json_null(), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *store_gave_up_to_json(const struct core_gave_up *g)
{
	json_t *o;
	bool ok = true;

	if (!g->set)
		return json_null();
	o = json_object();
	if (!o)
		return NULL;
	store_json_put(o, "reason", json_string(g->reason ? g->reason : ""), &ok);
	store_json_put(o, "run_id", store_json_str_or_null(g->run_id), &ok);
	store_json_put(o, "state", store_json_str_or_null(g->state), &ok);
	store_json_put(o, "at", time_json(g->at), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *store_card_to_json(const struct core_card *c)
{
	json_t *o;
	bool ok = true;

	if (!c || !(o = json_object()))
		return NULL;
	store_json_put(o, "id", json_string(c->id ? c->id : ""), &ok);
	store_json_put(o, "board", json_string(c->board ? c->board : ""), &ok);
	store_json_put(o, "title", json_string(c->title ? c->title : ""), &ok);
	store_json_put(o, "body", json_string(c->body ? c->body : ""), &ok);
	store_json_put(o, "state", json_string(c->state ? c->state : ""), &ok);
	store_json_put(o, "priority", json_integer(c->priority), &ok);
	store_json_put(o, "labels", store_json_strv(&c->labels), &ok);
	store_json_put(o, "blockers", store_json_strv(&c->blockers), &ok);
	store_json_put(o, "comments", comments_json(c), &ok);
	store_json_put(o, "claim", claim_json(c), &ok);
	store_json_put(o, "claim_epoch", c->has_epoch ? json_integer(c->claim_epoch) : json_null(),
		       &ok);
	store_json_put(o, "last_run_id", store_json_str_or_null(c->last_run_id), &ok);
	store_json_put(o, "awaiting_input", json_boolean(c->awaiting_input), &ok);
	store_json_put(o, "gave_up", store_gave_up_to_json(&c->gave_up), &ok);
	store_json_put(o, "state_reason", store_json_str_or_null(c->state_reason), &ok);
	store_json_put(o, "created_at", time_json(c->created_at), &ok);
	store_json_put(o, "updated_at", time_json(c->updated_at), &ok);
	store_json_put(o, "state_at", time_json(c->state_at), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

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

/* Printable ASCII that JSON carries as it is: the bytes of almost every string served. */
static bool jb_plain(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

static void jb_str(struct jbuf *b, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0, n;
	char esc[8];

	JB_LIT(b, "\"");
	while (b->ok) {
		unsigned char c;
		const char *e = NULL;

		while (jb_plain(u[i]))
			i++;
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

static void jb_time(struct jbuf *b, int64_t ms)
{
	char t[CORE_TIME_BUF];

	jb_str(b, core_time_format(ms, t));
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

char *store_claim_json_text(const struct core_card *c, const struct core_token *t, bool fresh,
			    bool with_card, size_t *len)
{
	const struct core_claim *cl = &c->claim;
	struct jbuf b = {.ok = true};

	jb_put(&b, "{", 1);
	if (with_card) {
		jb_key(&b, "card");
		jb_card(&b, c);
		jb_key(&b, "token");
		jb_put(&b, "{", 1);
	}
	jb_key(&b, "marker");
	jb_str(&b, t->marker ? t->marker : "");
	jb_key(&b, "epoch");
	jb_int(&b, t->epoch);
	jb_key(&b, "claimed_at");
	jb_time(&b, cl->claimed_at);
	jb_key(&b, "lease_until");
	jb_time(&b, cl->lease_until);
	jb_key(&b, "lease_ms");
	jb_int(&b, cl->lease_ms);
	jb_key(&b, "renew_after_ms");
	jb_int(&b, cl->lease_ms / 3);
	jb_key(&b, "fresh");
	jb_lit(&b, fresh ? "true" : "false");
	jb_put(&b, with_card ? "}}" : "}", with_card ? 2 : 1);
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
		if (m[i].type == STORE_JSON_STR)
			jb_str(&b, m[i].s);
		else if (m[i].type == STORE_JSON_INT)
			jb_int(&b, m[i].i);
		else
			JB_LIT(&b, "null");
	}
	JB_LIT(&b, "}");
	return jb_done(&b, len);
}

/* POST renew's answer (DESIGN §3): {marker, epoch, lease_until, lease_ms} of the renewed card
 * for token marker `marker`, written as store_card_json_text writes (byte for byte what
 * json_dumps wrote of the json_pack tree api/claims.c built before). */
char *store_renew_json_text(const struct core_card *c, const char *marker, size_t *len)
{
	struct jbuf b = {.ok = true};

	jb_put(&b, "{", 1);
	jb_key(&b, "marker");
	jb_str(&b, marker ? marker : "");
	jb_key(&b, "epoch");
	jb_int(&b, c->claim_epoch);
	jb_key(&b, "lease_until");
	jb_time(&b, c->claim.lease_until);
	jb_key(&b, "lease_ms");
	jb_int(&b, c->claim.lease_ms);
	jb_put(&b, "}", 1);
	return jb_done(&b, len);
}

json_t *store_board_to_json(const struct core_board *b)
{
	json_t *o, *cols;
	size_t i;
	bool ok = true;

	if (!b || !(o = json_object()))
		return NULL;
	store_json_put(o, "name", json_string(b->name ? b->name : ""), &ok);
	cols = json_array();
	for (i = 0; ok && cols && i < b->n_cols; i++) {
		json_t *col = json_object();

		if (!col) {
			ok = false;
			break;
		}
		store_json_put(col, "name", json_string(b->cols[i].name ? b->cols[i].name : ""),
			       &ok);
		store_json_put(col, "terminal", json_boolean(b->cols[i].terminal), &ok);
		store_json_put(col, "eligible", json_boolean(b->cols[i].eligible), &ok);
		if (json_array_append_new(cols, col) != 0)
			ok = false;
	}
	store_json_put(o, "columns", cols, &ok);
	store_json_put(o, "running", store_json_str_or_null(b->running), &ok);
	store_json_put(o, "completed", store_json_str_or_null(b->completed), &ok);
	store_json_put(o, "failed", store_json_str_or_null(b->failed), &ok);
	store_json_put(o, "waiting", store_json_str_or_null(b->waiting), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* A run's result is stored as JSON text; served as the value it holds (null when none). */
static json_t *run_result_json(const char *text)
{
	if (!text)
		return json_null();
	return json_loads(text, JSON_DECODE_ANY, NULL);
}

json_t *store_run_to_json(const struct core_run *r)
{
	json_t *o;
	bool ok = true;

	if (!r || !(o = json_object()))
		return NULL;
	store_json_put(o, "id", json_string(r->id ? r->id : ""), &ok);
	store_json_put(o, "card_id", json_string(r->card_id ? r->card_id : ""), &ok);
	store_json_put(o, "board", json_string(r->board ? r->board : ""), &ok);
	store_json_put(o, "status", json_string(r->status ? r->status : ""), &ok);
	store_json_put(o, "continuation", store_json_str_or_null(r->continuation), &ok);
	store_json_put(o, "failure_code", store_json_str_or_null(r->failure_code), &ok);
	store_json_put(o, "owner", store_json_str_or_null(r->owner), &ok);
	store_json_put(o, "result", run_result_json(r->result), &ok);
	store_json_put(o, "error", store_json_str_or_null(r->error), &ok);
	store_json_put(o, "output", store_json_str_or_null(r->output), &ok);
	store_json_put(o, "claim_epoch", json_integer(r->claim_epoch), &ok);
	store_json_put(o, "lock_until", time_json(r->lock_until), &ok);
	store_json_put(o, "lease_ms", json_integer(r->lease_ms), &ok);
	store_json_put(o, "created_at", time_json(r->created_at), &ok);
	store_json_put(o, "updated_at", time_json(r->updated_at), &ok);
	if (r->pruned)
		store_json_put(o, "pruned", json_true(), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *store_event_to_json(const struct core_event *e)
{
	return store_event_to_json_as(e, false);
}

json_t *store_event_to_json_as(const struct core_event *e, bool board_view)
{
	json_t *o, *payload = NULL;
	bool ok = true;

	if (!e || !(o = json_object()))
		return NULL;
	if (e->payload)
		payload = json_loads(e->payload, JSON_DECODE_ANY, NULL);
	/* The payload is built by the stores; a non-object would break clients, so it is
	 * served as {} rather than passed through. */
	if (!json_is_object(payload)) {
		json_decref(payload);
		payload = json_object();
	}
	store_json_put(o, "seq", json_integer(board_view ? e->board_seq : e->seq), &ok);
	store_json_put(o, "board_seq", json_integer(e->board_seq), &ok);
	store_json_put(o, "at", time_json(e->at), &ok);
	store_json_put(o, "board", json_string(e->board ? e->board : ""), &ok);
	store_json_put(o, "type", json_string(core_event_type_name(e->type)), &ok);
	store_json_put(o, "card_id", store_json_str_or_null(e->card_id), &ok);
	store_json_put(o, "actor", json_string(e->actor ? e->actor : ""), &ok);
	store_json_put(o, "reason", store_json_str_or_null(e->reason), &ok);
	store_json_put(o, "machine", json_boolean(e->machine), &ok);
	store_json_put(o, "payload", payload, &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- reading ----
 * The readers below fill a struct that the caller releases on failure; each returns false on
 * a missing field, a wrong type or OOM (the codec does not tell these apart: the input is
 * refused either way, and OOM on a small document is not worth a separate code path). */

static bool get_str(const json_t *o, const char *key, char **dst)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_string(v))
		return false;
	return core_str_set(dst, json_string_value(v)) == CORE_OK;
}

/* A string or explicit null. */
static bool get_str_opt(const json_t *o, const char *key, char **dst)
{
	const json_t *v = json_object_get(o, key);

	if (json_is_null(v))
		return core_str_set(dst, NULL) == CORE_OK;
	return get_str(o, key, dst);
}

static bool get_int(const json_t *o, const char *key, int64_t *dst)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		return false;
	*dst = (int64_t)json_integer_value(v);
	return true;
}

static bool get_bool(const json_t *o, const char *key, bool *dst)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_boolean(v))
		return false;
	*dst = json_is_true(v);
	return true;
}

static bool get_time(const json_t *o, const char *key, int64_t *dst)
{
	const json_t *v = json_object_get(o, key);

	return json_is_string(v) && core_time_parse(json_string_value(v), dst);
}

bool store_json_get_strv(const json_t *o, const char *key, bool opt, struct core_strv *dst)
{
	const json_t *a = json_object_get(o, key), *v;
	size_t i;

	if (!a)
		return opt;
	if (!json_is_array(a))
		return false;
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v) || core_strv_push(dst, json_string_value(v)) != CORE_OK)
			return false;
	}
	return true;
}

static bool get_comments(const json_t *o, struct core_card *c)
{
	const json_t *a = json_object_get(o, "comments"), *v;
	size_t i;

	if (!json_is_array(a))
		return false;
	if (json_array_size(a) == 0)
		return true;
	c->comments = calloc(json_array_size(a), sizeof(*c->comments));
	if (!c->comments)
		return false;
	json_array_foreach(a, i, v)
	{
		struct core_comment *cm = &c->comments[i];

		/* Counted before filling so a half-read comment is still released. */
		c->n_comments++;
		if (!json_is_object(v) || !get_str(v, "id", &cm->id) ||
		    !get_str(v, "author", &cm->author) || !get_str(v, "body", &cm->body) ||
		    !get_time(v, "created_at", &cm->created_at))
			return false;
	}
	return true;
}

static bool get_claim(const json_t *o, struct core_card *c)
{
	const json_t *cl = json_object_get(o, "claim");

	if (json_is_null(cl))
		return true;
	if (!json_is_object(cl))
		return false;
	c->claim.present = true;
	if (!get_str(cl, "marker", &c->claim.marker) ||
	    !get_time(cl, "claimed_at", &c->claim.claimed_at))
		return false;
	/* Written since the claim is bound to its token; absent in older journals. */
	if (json_object_get(cl, "holder") && !get_str_opt(cl, "holder", &c->claim.holder))
		return false;
	if (json_is_null(json_object_get(cl, "lease_until")))
		return json_is_null(json_object_get(cl, "lease_ms"));
	c->claim.has_lease = true;
	return get_time(cl, "lease_until", &c->claim.lease_until) &&
	       get_int(cl, "lease_ms", &c->claim.lease_ms);
}

static bool get_gave_up(const json_t *o, struct core_gave_up *g)
{
	const json_t *v = json_object_get(o, "gave_up");

	if (json_is_null(v))
		return true;
	if (!json_is_object(v))
		return false;
	g->set = true;
	return get_str(v, "reason", &g->reason) && get_str_opt(v, "run_id", &g->run_id) &&
	       get_str_opt(v, "state", &g->state) && get_time(v, "at", &g->at);
}

enum core_rc store_card_from_json(const json_t *j, struct core_card **out)
{
	struct core_card *c;
	const json_t *ep, *pri;
	bool ok;

	if (!out)
		return CORE_ERR_BAD_REQUEST;
	*out = NULL;
	if (!json_is_object(j))
		return CORE_ERR_BAD_REQUEST;
	c = core_card_new();
	if (!c)
		return CORE_ERR_NOMEM;
	ep = json_object_get(j, "claim_epoch");
	ok = get_str(j, "id", &c->id) && core_id_valid(c->id) && get_str(j, "board", &c->board) &&
	     get_str(j, "title", &c->title) && get_str(j, "body", &c->body) &&
	     get_str(j, "state", &c->state) && store_json_get_strv(j, "labels", false, &c->labels) &&
	     store_json_get_strv(j, "blockers", false, &c->blockers) && get_comments(j, c) && get_claim(j, c) &&
	     (json_is_null(ep) || get_int(j, "claim_epoch", &c->claim_epoch)) &&
	     get_str_opt(j, "last_run_id", &c->last_run_id) &&
	     get_bool(j, "awaiting_input", &c->awaiting_input) && get_gave_up(j, &c->gave_up) &&
	     get_str_opt(j, "state_reason", &c->state_reason) &&
	     get_time(j, "created_at", &c->created_at) &&
	     get_time(j, "updated_at", &c->updated_at) && get_time(j, "state_at", &c->state_at);
	if (!ok) {
		core_card_free(c);
		return CORE_ERR_BAD_REQUEST;
	}
	c->has_epoch = json_is_integer(ep);
	/* Written since DESIGN §12; older lines have none (0). */
	pri = json_object_get(j, "priority");
	if (pri && (!json_is_integer(pri) || json_integer_value(pri) < INT32_MIN ||
		    json_integer_value(pri) > INT32_MAX)) {
		core_card_free(c);
		return CORE_ERR_BAD_REQUEST;
	}
	c->priority = (int32_t)json_integer_value(pri);
	*out = c;
	return CORE_OK;
}

enum core_rc store_board_from_json(const json_t *j, struct core_board *out)
{
	struct core_board b = {0};
	const json_t *cols, *v;
	size_t i;
	bool ok;

	if (!out)
		return CORE_ERR_BAD_REQUEST;
	memset(out, 0, sizeof(*out));
	if (!json_is_object(j))
		return CORE_ERR_BAD_REQUEST;
	cols = json_object_get(j, "columns");
	ok = get_str(j, "name", &b.name) && json_is_array(cols);
	if (ok && json_array_size(cols)) {
		b.cols = calloc(json_array_size(cols), sizeof(*b.cols));
		ok = b.cols != NULL;
	}
	if (ok) {
		json_array_foreach(cols, i, v)
		{
			b.n_cols++;
			if (!json_is_object(v) || !get_str(v, "name", &b.cols[i].name) ||
			    !get_bool(v, "terminal", &b.cols[i].terminal) ||
			    !get_bool(v, "eligible", &b.cols[i].eligible)) {
				ok = false;
				break;
			}
		}
	}
	ok = ok && get_str_opt(j, "running", &b.running) &&
	     get_str_opt(j, "completed", &b.completed) && get_str_opt(j, "failed", &b.failed) &&
	     get_str_opt(j, "waiting", &b.waiting);
	if (!ok) {
		core_board_release(&b);
		return CORE_ERR_BAD_REQUEST;
	}
	*out = b;
	return CORE_OK;
}

enum core_rc store_run_from_json(const json_t *j, struct core_run **out)
{
	struct core_run *r;
	const json_t *pr, *res;
	bool ok;

	if (!out)
		return CORE_ERR_BAD_REQUEST;
	*out = NULL;
	if (!json_is_object(j))
		return CORE_ERR_BAD_REQUEST;
	r = core_run_new();
	if (!r)
		return CORE_ERR_NOMEM;
	pr = json_object_get(j, "pruned");
	ok = get_str(j, "id", &r->id) && core_id_valid(r->id) &&
	     get_str(j, "card_id", &r->card_id) && get_str(j, "board", &r->board) &&
	     get_str(j, "status", &r->status) && get_str_opt(j, "continuation", &r->continuation) &&
	     get_str_opt(j, "failure_code", &r->failure_code) && get_str_opt(j, "owner", &r->owner) &&
	     get_time(j, "lock_until", &r->lock_until) && get_int(j, "lease_ms", &r->lease_ms) &&
	     get_time(j, "created_at", &r->created_at) &&
	     get_time(j, "updated_at", &r->updated_at) && (!pr || json_is_boolean(pr)) &&
	     (!json_object_get(j, "claim_epoch") || get_int(j, "claim_epoch", &r->claim_epoch));
	if (!ok) {
		core_run_free(r);
		return CORE_ERR_BAD_REQUEST;
	}
	r->pruned = json_is_true(pr);
	res = json_object_get(j, "result");
	if (res && !json_is_null(res) &&
	    !(r->result = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY))) {
		core_run_free(r);
		return CORE_ERR_NOMEM;
	}
	if ((json_object_get(j, "error") && !get_str_opt(j, "error", &r->error)) ||
	    (json_object_get(j, "output") && !get_str_opt(j, "output", &r->output))) {
		core_run_free(r);
		return CORE_ERR_BAD_REQUEST;
	}
	*out = r;
	return CORE_OK;
}

enum core_rc store_event_from_json(const json_t *j, struct core_event *out)
{
	struct core_event e = {0};
	const json_t *payload, *type;
	int t;
	bool ok;

	if (!out)
		return CORE_ERR_BAD_REQUEST;
	memset(out, 0, sizeof(*out));
	if (!json_is_object(j))
		return CORE_ERR_BAD_REQUEST;
	type = json_object_get(j, "type");
	t = core_event_type_parse(json_string_value(type));
	payload = json_object_get(j, "payload");
	ok = t >= 0 && json_is_object(payload) && get_int(j, "seq", &e.seq) &&
	     get_time(j, "at", &e.at) && get_str(j, "board", &e.board) &&
	     get_str_opt(j, "card_id", &e.card_id) && get_str(j, "actor", &e.actor) &&
	     get_str_opt(j, "reason", &e.reason) && get_bool(j, "machine", &e.machine);
	/* board_seq: absent from what earlier versions stored (derived on load) */
	if (ok && json_object_get(j, "board_seq"))
		ok = get_int(j, "board_seq", &e.board_seq);
	if (ok) {
		e.type = (enum core_event_type)t;
		/* Kept as compact text, as the stores build it, so a round trip is exact. */
		e.payload = json_dumps(payload, JSON_COMPACT);
		ok = e.payload != NULL;
	}
	if (!ok) {
		core_event_release(&e);
		return CORE_ERR_BAD_REQUEST;
	}
	*out = e;
	return CORE_OK;
}
