/* Reading the FS twin's binary records back (the layout is fs_codec.c's): framing a record
 * and checking its CRCs, and decoding a change or a snapshot's end record, cards straight
 * into their published form. Every length is checked against what is left, so arbitrary
 * bytes with a valid CRC decode to an error, never to a read out of bounds. */
#include "store/fs/fs_change.h"
#include "store/fs/fs_codec.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_map.h"

#include <stdlib.h>
#include <string.h>

/* ---- reading ---- */

struct rbuf {
	const unsigned char *p;
	size_t n, off;
	bool bad;
	bool v2; /* FS_REC_CHANGE2's layout (or CHANGE3's) */
	bool v3; /* FS_REC_CHANGE3's: board_seq, counted effect records, the boards' counters */
	bool v4; /* FS_REC_CHANGE4's: claim.from, not_before, attempts, the boards' policy */
	struct fs_atoms *atoms; /* NULL: nothing interned */
	struct fs_arena *ar;    /* set while a card is laid out in one block (r_card) */
	/* The atoms the measuring walk found, in order, for the filling walk to reuse */
	const char *memo[16];
	size_t n_memo, i_memo;
};

static const unsigned char *r_take(struct rbuf *b, size_t n)
{
	const unsigned char *p;

	if (b->bad || n > b->n - b->off) {
		b->bad = true;
		return NULL;
	}
	p = b->p + b->off;
	b->off += n;
	return p;
}

static unsigned r_u8(struct rbuf *b)
{
	const unsigned char *p = r_take(b, 1);

	return p ? p[0] : 0;
}

static uint32_t get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t r_u32(struct rbuf *b)
{
	const unsigned char *p = r_take(b, 4);

	return p ? get_u32(p) : 0;
}

static uint64_t r_u64(struct rbuf *b)
{
	const unsigned char *p = r_take(b, 8);
	uint64_t v = 0;
	int i;

	for (i = 0; p && i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int64_t r_i64(struct rbuf *b)
{
	return (int64_t)r_u64(b);
}

/* A count of items that take at least `min` bytes each: never more than what is left. */
static size_t r_count(struct rbuf *b, size_t min)
{
	uint32_t n = r_u32(b);

	if (b->bad || (size_t)n > (b->n - b->off) / min) {
		b->bad = true;
		return 0;
	}
	return n;
}

/* A string (NULL allowed only when `opt`); *dst receives a new copy, or while a card is
 * laid out its place in the arena (a placeholder while measuring), or its atom when `atom`. */
static void r_str_as(struct rbuf *b, char **dst, bool opt, bool atom)
{
	uint32_t n = r_u32(b);
	const unsigned char *p;
	const char *at;

	*dst = NULL;
	if (b->bad)
		return;
	if (n == FS_REC_STR_NULL) {
		b->bad = !opt;
		return;
	}
	p = r_take(b, n);
	if (!p)
		return;
	/* An embedded NUL would silently shorten the string: damage, not data. */
	if (memchr(p, '\0', n)) {
		b->bad = true;
		return;
	}
	if (b->ar) {
		if (atom && b->atoms) {
			if (b->ar->base && b->i_memo < b->n_memo) {
				at = b->memo[b->i_memo++];
			} else {
				at = fs_atom(b->atoms, (const char *)p, n, !b->ar->base);
				if (!b->ar->base && b->n_memo < sizeof b->memo / sizeof b->memo[0])
					b->memo[b->n_memo++] = at;
			}
			if (at) {
				*dst = (char *)at;
				return;
			}
		}
		*dst = fs_arena_take(b->ar, (size_t)n + 1, 1);
		if (!*dst) {
			/* Measuring: a placeholder (never read) that says the string is there,
			 * which decides whether the card needs its tail (fs_card_head). */
			*dst = (char *)"";
			return;
		}
	} else {
		*dst = malloc((size_t)n + 1);
		if (!*dst) {
			b->bad = true;
			return;
		}
	}
	if (*dst) {
		memcpy(*dst, p, n);
		(*dst)[n] = '\0';
	}
}

static void r_str(struct rbuf *b, char **dst, bool opt)
{
	r_str_as(b, dst, opt, false);
}

static void r_strv(struct rbuf *b, struct core_strv *sv, bool atom)
{
	size_t n = r_count(b, 4), i;
	char *measured;

	sv->v = NULL;
	sv->n = 0;
	if (b->bad || !n)
		return;
	if (b->ar) {
		sv->v = fs_arena_take(b->ar, n * sizeof(*sv->v), _Alignof(char *));
	} else if (!(sv->v = calloc(n, sizeof(*sv->v)))) {
		b->bad = true;
		return;
	}
	for (i = 0; i < n && !b->bad; i++, sv->n++)
		r_str_as(b, sv->v ? &sv->v[i] : &measured, false, atom);
}

/* w_claim's fields back (claim.present already read); `holder`: the record carries one
 * (FS_REC_CHANGE records, the first layout, do not); `from` likewise (FS_REC_CHANGE4). */
static void r_claim(struct rbuf *b, struct core_card *c, bool holder)
{
	r_str(b, &c->claim.marker, !c->claim.present);
	if (holder)
		r_str_as(b, &c->claim.holder, true, true);
	if (b->v4)
		r_str_as(b, &c->claim.from, true, true);
	c->claim.claimed_at = r_i64(b);
	c->claim.lease_until = r_i64(b);
	c->claim.lease_ms = r_i64(b);
	c->claim_epoch = r_i64(b);
}

/* The fields of a card record into c (zeroed), its strings and arrays as r_str places them. */
static void r_card_fields(struct rbuf *b, struct core_card *c)
{
	struct core_comment *cm = NULL, scratch;
	unsigned flags;
	size_t i, n;

	r_str(b, &c->id, false);
	r_str_as(b, &c->board, false, true);
	r_str(b, &c->title, false);
	r_str(b, &c->body, false);
	r_str_as(b, &c->state, false, true);
	r_strv(b, &c->labels, true);
	r_strv(b, &c->blockers, false);
	n = r_count(b, 20);
	if (n && !b->bad) {
		cm = fs_arena_take(b->ar, n * sizeof(*cm), _Alignof(struct core_comment));
		if (cm)
			memset(cm, 0, n * sizeof(*cm));
		c->comments = cm;
	}
	for (i = 0; i < n && !b->bad; i++, c->n_comments++) {
		struct core_comment *x = cm ? &cm[i] : &scratch;

		r_str(b, &x->id, false);
		r_str_as(b, &x->author, false, true);
		r_str(b, &x->body, false);
		x->created_at = r_i64(b);
	}
	flags = r_u8(b);
	c->claim.present = flags & 1u;
	c->claim.has_lease = flags & 2u;
	c->has_epoch = flags & 4u;
	c->awaiting_input = flags & 8u;
	c->gave_up.set = flags & 16u;
	r_claim(b, c, b->v2);
	r_str(b, &c->last_run_id, true);
	r_str(b, &c->gave_up.reason, !c->gave_up.set);
	r_str(b, &c->gave_up.run_id, true);
	r_str_as(b, &c->gave_up.state, true, true);
	c->gave_up.at = r_i64(b);
	r_str(b, &c->state_reason, true);
	c->created_at = r_i64(b);
	c->updated_at = r_i64(b);
	c->state_at = r_i64(b);
	if (flags & 32u) {
		int64_t pri = r_i64(b);

		if (pri < INT32_MIN || pri > INT32_MAX || pri == 0)
			b->bad = true;
		c->priority = (int32_t)pri;
	}
	if ((flags & 64u) && b->v4) {
		int64_t at;

		/* Any instant: before core_time_parse refused times before 1970, the API stored
		 * them, and a store that holds one must still open. */
		c->not_before = r_i64(b);
		at = r_i64(b);
		if (at < 0 || at > INT32_MAX || (!c->not_before && !at))
			b->bad = true;
		c->attempts = (int32_t)at;
	}
	if (flags & ~(b->v4 ? 127u : 63u))
		b->bad = true;
}

/* A card record in its published form (fs_flat.c): one walk measures it, the second lays its
 * arrays and strings out after the head in one block, so a load makes one allocation per
 * card. */
static struct fs_card *r_card(struct rbuf *b)
{
	struct fs_arena a = {0};
	struct core_card c = {0};
	size_t start = b->off, head;

	b->ar = &a;
	b->n_memo = b->i_memo = 0;
	r_card_fields(b, &c);
	b->ar = NULL;
	if (b->bad)
		return NULL;
	head = fs_card_head(&c);
	a.base = malloc(head + a.off);
	if (!a.base) {
		b->bad = true;
		return NULL;
	}
	a.off = head;
	b->off = start;
	b->ar = &a;
	memset(&c, 0, sizeof(c));
	r_card_fields(b, &c);
	b->ar = NULL;
	if (!b->bad && (!core_id_valid(c.id) ||
			(!c.claim.present && (c.claim.marker || c.claim.holder || c.claim.from))))
		b->bad = true;
	if (b->bad) {
		free(a.base);
		return NULL;
	}
	return fs_card_fill(a.base, a.off, &c);
}

static struct core_run *r_run(struct rbuf *b)
{
	struct core_run *r = core_run_new();
	unsigned pruned;

	if (!r) {
		b->bad = true;
		return NULL;
	}
	r_str(b, &r->id, false);
	r_str(b, &r->card_id, false);
	r_str(b, &r->board, false);
	r_str(b, &r->status, false);
	r_str(b, &r->continuation, true);
	r_str(b, &r->failure_code, true);
	r_str(b, &r->owner, true);
	if (b->v2)
		r->claim_epoch = r_i64(b);
	r->lock_until = r_i64(b);
	r->lease_ms = r_i64(b);
	r->created_at = r_i64(b);
	r->updated_at = r_i64(b);
	pruned = r_u8(b);
	r->pruned = pruned & 1u;
	if (pruned & 2u) {
		r_str(b, &r->result, true);
		r_str(b, &r->error, true);
	}
	if (pruned & 4u)
		r_str(b, &r->output, false);
	if (!b->bad && (!core_id_valid(r->id) || pruned > 7))
		b->bad = true;
	if (b->bad) {
		core_run_free(r);
		return NULL;
	}
	return r;
}

/* A column's limit or a board's max_claims: 1..CORE_LIMIT_MAX, else damage. */
static int32_t r_limit(struct rbuf *b)
{
	uint32_t v = r_u32(b);

	if (v < 1 || v > CORE_LIMIT_MAX) {
		b->bad = true;
		return 0;
	}
	return (int32_t)v;
}

static void r_board(struct rbuf *b, struct core_board *bd)
{
	size_t n, i;
	unsigned flags;

	r_str(b, &bd->name, false);
	n = r_count(b, 5);
	if (n && !b->bad) {
		bd->cols = calloc(n, sizeof(*bd->cols));
		b->bad = !bd->cols;
	}
	for (i = 0; i < n && !b->bad; i++, bd->n_cols++) {
		r_str(b, &bd->cols[i].name, false);
		flags = r_u8(b);
		bd->cols[i].terminal = flags & 1u;
		bd->cols[i].eligible = flags & 2u;
		if (flags & 4u)
			bd->cols[i].limit = r_limit(b);
		if (flags & ~(b->v4 ? 7u : 3u))
			b->bad = true;
	}
	r_str(b, &bd->running, true);
	r_str(b, &bd->completed, true);
	r_str(b, &bd->failed, true);
	r_str(b, &bd->waiting, true);
	if (!b->v4)
		return;
	flags = r_u8(b); /* DESIGN §17: the board's own policy */
	if (flags & 1u)
		bd->max_claims = r_limit(b);
	if (flags & 2u) {
		uint32_t at = r_u32(b);

		bd->has_retry = true;
		bd->retry.max_attempts = at > CORE_RETRY_ATTEMPTS_MAX ? 0 : (int32_t)at;
		bd->retry.backoff_ms = r_i64(b);
		bd->retry.max_backoff_ms = r_i64(b);
		if (!b->bad && core_retry_validate(&bd->retry, NULL, 0) != CORE_OK)
			b->bad = true;
	}
	if (flags & ~3u)
		b->bad = true;
}

static void r_event(struct rbuf *b, struct core_event *e)
{
	uint32_t type;
	unsigned machine;

	e->seq = r_i64(b);
	e->board_seq = b->v3 ? r_i64(b) : 0; /* 0: derived on replay */
	e->at = r_i64(b);
	r_str(b, &e->board, false);
	type = r_u32(b);
	r_str(b, &e->card_id, true);
	r_str(b, &e->actor, false);
	r_str(b, &e->reason, true);
	machine = r_u8(b);
	r_str(b, &e->payload, true);
	e->type = type < CORE_EV_COUNT_ ? (enum core_event_type)type : CORE_EV_CARD_CREATED;
	e->machine = machine == 1;
	if (type >= CORE_EV_COUNT_ || machine > 1)
		b->bad = true;
}

static void r_counters(struct rbuf *b, struct fs_counters *c)
{
	c->seq = r_i64(b);
	c->card = r_u64(b);
	c->run = r_u64(b);
	c->ord = r_u64(b);
}

/* A claim-only entry: a card holding only its id and claim fields (resolved on replay). */
static struct core_card *r_claim_patch(struct rbuf *b, const char *id)
{
	struct core_card *c = core_card_new();
	unsigned flags;

	if (!c || core_str_set(&c->id, id) != CORE_OK) {
		core_card_free(c);
		b->bad = true;
		return NULL;
	}
	flags = r_u8(b);
	c->claim.present = flags & 1u;
	c->claim.has_lease = flags & 2u;
	c->has_epoch = flags & 4u;
	r_claim(b, c, true);
	c->updated_at = r_i64(b);
	if (!b->bad && ((flags & ~7u) || (!c->claim.present && (c->claim.marker || c->claim.holder ||
								   c->claim.from))))
		b->bad = true;
	if (b->bad) {
		core_card_free(c);
		return NULL;
	}
	return c;
}

/* A CHANGE3 event names its place in its board's sequence: 0 or less is damage. */
static bool e_bad_board_seq(const struct fs_change *ch)
{
	size_t i;

	for (i = 0; i < ch->n_events; i++)
		if (ch->events[i]->board_seq < 1 && ch->events[i]->seq > 0)
			return true;
	return false;
}

/* Each array is sized from a count checked against the bytes left, so a damaged count cannot
 * ask for more memory than the record could describe. */
static enum core_rc decode_change(struct rbuf *b, struct fs_change *ch)
{
	size_t n, i;

	memset(ch, 0, sizeof(*ch));
	r_counters(b, &ch->ctr);
	n = r_count(b, 13);
	if (n && !b->bad) {
		ch->cards = calloc(n, sizeof(*ch->cards));
		ch->cap_cards = n;
		b->bad = !ch->cards;
	}
	for (i = 0; i < n && !b->bad; i++) {
		struct fs_change_card *cc = &ch->cards[ch->n_cards++];
		unsigned present;

		r_str(b, &cc->id, false);
		cc->ord = r_u64(b);
		present = r_u8(b);
		if (present > (b->v2 ? 4u : 1u))
			b->bad = true;
		if (present == 1 && !b->bad) {
			cc->pub = r_card(b);
			/* A card is filed under its own id. */
			if (cc->pub && strcmp(cc->pub->id, cc->id) != 0)
				b->bad = true;
		} else if (present == 3 && !b->bad) {
			cc->card = r_claim_patch(b, cc->id);
			cc->claim_only = true;
		} else if ((present == 2 || present == 4) && !b->bad) {
			cc->floor = r_i64(b);
			cc->floor_only = present == 4;
			if (cc->floor <= 0)
				b->bad = true;
		}
	}
	n = r_count(b, 32);
	if (n && !b->bad) {
		ch->runs = calloc(n, sizeof(*ch->runs));
		ch->cap_runs = n;
		b->bad = !ch->runs;
	}
	for (i = 0; i < n && !b->bad; i++) {
		struct core_run *r = r_run(b);

		if (r)
			ch->runs[ch->n_runs++] = r;
	}
	n = r_count(b, 24);
	if (n && !b->bad) {
		ch->boards = calloc(n, sizeof(*ch->boards));
		b->bad = !ch->boards;
	}
	for (i = 0; i < n && !b->bad; i++, ch->n_boards++)
		r_board(b, &ch->boards[i]);
	n = r_count(b, 37);
	if (n && !b->bad) {
		ch->events = calloc(n, sizeof(*ch->events));
		ch->cap_events = n;
		b->bad = !ch->events;
	}
	for (i = 0; i < n && !b->bad; i++) {
		struct core_event *e = calloc(1, sizeof(*e));

		if (!e) {
			b->bad = true;
			break;
		}
		ch->events[ch->n_events++] = e;
		r_event(b, e);
	}
	if (!b->bad && b->v3 && e_bad_board_seq(ch))
		b->bad = true;
	n = !b->bad && (b->v3 || b->off != b->n) ? r_count(b, 16) : 0;
	if (n && !b->bad) {
		ch->kvs = calloc(n, sizeof(*ch->kvs));
		ch->cap_kvs = n;
		b->bad = !ch->kvs;
	}
	for (i = 0; i < n && !b->bad; i++) {
		struct fs_kv *kv = &ch->kvs[ch->n_kvs++];

		r_str(b, &kv->key, false);
		r_str(b, &kv->val, true);
		kv->due = r_i64(b);
	}
	n = !b->bad && b->v3 ? r_count(b, 12) : 0;
	if (n && !b->bad) {
		ch->bctrs = calloc(n, sizeof(*ch->bctrs));
		b->bad = !ch->bctrs;
	}
	for (i = 0; i < n && !b->bad; i++) {
		struct fs_bctr *bc = &ch->bctrs[ch->n_bctrs++];

		r_str(b, &bc->board, false);
		bc->last = r_i64(b);
		if (bc->last < 1)
			b->bad = true;
	}
	if (!b->bad && b->off != b->n)
		b->bad = true; /* trailing bytes: not what this version writes */
	if (b->bad) {
		fs_change_release(ch);
		return CORE_ERR_BAD_REQUEST;
	}
	return CORE_OK;
}

enum fs_rec_status fs_rec_frame(const char *buf, size_t avail, unsigned *kind,
				const char **payload, size_t *plen)
{
	const unsigned char *p = (const unsigned char *)buf;
	uint32_t n;

	if (avail < FS_REC_HDR)
		return FS_REC_TORN;
	if (p[0] != FS_REC_MAGIC || p[1] != 1 || get_u32(p + 12) != fs_crc32(p, 12))
		return FS_REC_BAD;
	n = get_u32(p + 4);
	if ((size_t)n > avail - FS_REC_HDR)
		return FS_REC_TORN;
	*kind = (unsigned)p[2] | (unsigned)p[3] << 8;
	*payload = buf + FS_REC_HDR;
	*plen = n;
	return FS_REC_OK;
}

bool fs_rec_payload_ok(const char *payload, size_t plen)
{
	return get_u32((const unsigned char *)payload - FS_REC_HDR + 8) ==
	       fs_crc32(payload, plen);
}

enum fs_rec_status fs_rec_check(const char *buf, size_t avail, unsigned *kind,
				const char **payload, size_t *plen)
{
	enum fs_rec_status st = fs_rec_frame(buf, avail, kind, payload, plen);

	if (st != FS_REC_OK)
		return st;
	return fs_rec_payload_ok(*payload, *plen) ? FS_REC_OK : FS_REC_BAD_PAYLOAD;
}

enum core_rc fs_change_decode_bin(unsigned kind, const char *payload, size_t len,
				  struct fs_atoms *atoms, struct fs_change *ch)
{
	struct rbuf b = {.p = (const unsigned char *)payload, .n = len,
			 .v2 = kind >= FS_REC_CHANGE2 && kind <= FS_REC_CHANGE4,
			 .v3 = kind == FS_REC_CHANGE3 || kind == FS_REC_CHANGE4,
			 .v4 = kind == FS_REC_CHANGE4, .atoms = atoms};

	if (kind != FS_REC_CHANGE && kind != FS_REC_CHANGE2 && kind != FS_REC_CHANGE3 &&
	    kind != FS_REC_CHANGE4) {
		memset(ch, 0, sizeof(*ch));
		return CORE_ERR_BAD_REQUEST;
	}
	return decode_change(&b, ch);
}

enum core_rc fs_snap_end_decode(const char *payload, size_t len, uint64_t *gen,
				struct fs_counters *ctr, uint64_t *n_records)
{
	struct rbuf b = {.p = (const unsigned char *)payload, .n = len};

	*gen = r_u64(&b);
	r_counters(&b, ctr);
	*n_records = r_u64(&b);
	return b.bad || b.off != b.n ? CORE_ERR_BAD_REQUEST : CORE_OK;
}
