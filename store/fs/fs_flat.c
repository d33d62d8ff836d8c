/* Published cards: a card of the FS twin as one narrow allocation (fs.h, "published
 * cards").
 *
 * An ordinary core_card is a 232-byte struct and one malloc per string and array: about 530
 * bytes for a small card, a dozen mallocs to build and as many frees. A published one is a
 * 96-byte head, the tail of rarely set fields only when one is set, then its arrays and the
 * strings it owns; it points at interned copies of what many cards repeat (board, column,
 * labels, token names). It is laid out twice by the same walk: once over a measuring arena
 * (the size), once over the block. The binary decoder (fs_codec.c) builds one from a record
 * the same way (fs_card_head, fs_card_fill), so a load never makes an ordinary card first. */
#include "store/fs/fs_flat.h"
#include "store/fs/fs_map.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

const char *fs_atom(struct fs_atoms *a, const char *p, size_t n, bool create)
{
	char *s = fs_map_get_n(&a->map, p, n);

	if (s || !create || n >= FS_ATOM_LEN || a->map.n >= FS_ATOMS_MAX || memchr(p, '\0', n))
		return s;
	s = malloc(n + 1);
	if (!s)
		return NULL;
	memcpy(s, p, n);
	s[n] = '\0';
	if (fs_map_put(&a->map, s, s) != CORE_OK) {
		free(s);
		return NULL;
	}
	return s;
}

void fs_atoms_release(struct fs_atoms *a)
{
	size_t i;

	for (i = 0; i < a->map.cap; i++)
		if (a->map.slots[i].key)
			free(a->map.slots[i].val);
	fs_map_release(&a->map);
}

void *fs_arena_take(struct fs_arena *a, size_t n, size_t align)
{
	void *p;

	a->off = (a->off + align - 1) & ~(align - 1);
	p = a->base ? a->base + a->off : NULL;
	a->off += n;
	return p;
}

/* The empty string every published card shares (never written: cards are immutable). */
static char empty_str[1];

const struct fs_card_more fs_card_no_more;

/* A card's layout walk: the arena, the atoms, and the atoms the measuring walk found, which
 * the filling walk takes back in the same order instead of looking each up again (every
 * packed write has its board, column, holder and claimed-from interned). */
#define FS_WALK_MEMO 16

struct card_walk {
	struct fs_arena a;
	struct fs_atoms *atoms;
	const char *memo[FS_WALK_MEMO];
	size_t n_memo, i_memo;
	/* Moving mode (fs_card_reclaim): every pointer into [lo, hi) moves by `by`, the rest
	 * (atoms, the empty string) stays; nothing is measured or copied. */
	const char *lo, *hi;
	ptrdiff_t by;
	bool outside; /* an array not in the block: it cannot be moved (never so when packed) */
};

/* In moving mode, where p lands; else NULL. */
static void *moved(const struct card_walk *w, const void *p)
{
	const char *q = p;

	if (!q || !w->hi)
		return NULL;
	return (void *)(q >= w->lo && q < w->hi ? q + w->by : q);
}

/* In moving mode, where the array p lands: NULL (and w->outside) when it is not the block's,
 * so nothing is written through it. */
static void *moved_array(struct card_walk *w, const void *p)
{
	const char *q = p;

	if (q >= w->lo && q < w->hi)
		return (void *)(q + w->by);
	w->outside = true;
	return NULL;
}

/* s in the arena (or its atom when `atom`); NULL while measuring or for NULL. The measuring
 * walk creates the atom, the filling walk finds it (memo): both take the same bytes. */
static char *put_str(struct card_walk *w, const char *s, bool atom)
{
	const char *at = NULL;
	size_t n;
	char *d;

	if (!s)
		return NULL;
	if (w->hi)
		return moved(w, s);
	if (!*s)
		return empty_str;
	n = strlen(s);
	if (atom && w->atoms) {
		if (!w->a.base) { /* measuring */
			at = fs_atom(w->atoms, s, n, true);
			if (w->n_memo < FS_WALK_MEMO)
				w->memo[w->n_memo++] = at;
		} else if (w->i_memo < w->n_memo) {
			at = w->memo[w->i_memo++];
		} else {
			at = fs_atom(w->atoms, s, n, false);
		}
		if (at)
			return (char *)at;
	}
	d = fs_arena_take(&w->a, n + 1, 1);
	if (d)
		memcpy(d, s, n + 1);
	return d;
}

static void put_strv(struct card_walk *w, struct core_strv *d, const struct core_strv *s,
		     bool atom)
{
	char **v = !s->n ? NULL
		   : w->hi ? moved_array(w, s->v)
			   : fs_arena_take(&w->a, s->n * sizeof(*v), _Alignof(char *));
	size_t i;

	d->v = v;
	for (i = 0; i < s->n; i++) {
		char *x = put_str(w, s->v[i], atom);

		if (v)
			v[i] = x;
	}
}

/* One walk: c's arrays and strings laid out in w's arena (or only measured: base NULL), d = c
 * with its pointers moved there (NULL while measuring). */
static void card_lay(struct card_walk *w, const struct core_card *c, struct core_card *d)
{
	struct core_comment *cm;
	size_t i;

	*d = *c;
	d->id = put_str(w, c->id, false);
	d->board = put_str(w, c->board, true);
	d->title = put_str(w, c->title, false);
	d->body = put_str(w, c->body, false);
	d->state = put_str(w, c->state, true);
	put_strv(w, &d->labels, &c->labels, true);
	put_strv(w, &d->blockers, &c->blockers, false);
	cm = !c->n_comments ? NULL
	     : w->hi	    ? moved_array(w, c->comments)
			    : fs_arena_take(&w->a, c->n_comments * sizeof(*cm),
					    _Alignof(struct core_comment));
	d->comments = cm;
	for (i = 0; i < c->n_comments; i++) {
		struct core_comment x = {
			.id = put_str(w, c->comments[i].id, false),
			.author = put_str(w, c->comments[i].author, true),
			.body = put_str(w, c->comments[i].body, false),
			.created_at = c->comments[i].created_at,
		};

		if (cm)
			cm[i] = x;
	}
	d->claim.marker = put_str(w, c->claim.marker, false);
	d->claim.holder = put_str(w, c->claim.holder, true);
	d->claim.from = put_str(w, c->claim.from, true);
	d->last_run_id = put_str(w, c->last_run_id, false);
	d->gave_up.reason = put_str(w, c->gave_up.reason, false);
	d->gave_up.run_id = put_str(w, c->gave_up.run_id, false);
	d->gave_up.state = put_str(w, c->gave_up.state, true);
	d->state_reason = put_str(w, c->state_reason, false);
}

/* Does c set any field of the tail? */
static bool more_needed(const struct core_card *c)
{
	const struct core_claim *cl = &c->claim;
	const struct core_gave_up *g = &c->gave_up;

	return cl->marker || cl->holder || cl->from || cl->claimed_at || cl->lease_until || cl->lease_ms ||
	       cl->present || cl->has_lease || c->claim_epoch || c->blockers.n || c->n_comments ||
	       c->last_run_id || c->state_reason || g->set || g->reason || g->run_id || g->state ||
	       g->at || c->not_before || c->attempts;
}

size_t fs_card_head(const struct core_card *c)
{
	_Static_assert(sizeof(struct fs_card) % 16 == 0 && sizeof(struct fs_card_more) % 16 == 0,
		       "the arrays after the head stay aligned");
	return sizeof(struct fs_card) + (more_needed(c) ? sizeof(struct fs_card_more) : 0);
}

struct fs_card *fs_card_fill(void *block, size_t size, const struct core_card *c)
{
	struct fs_card *p = block;
	struct fs_card_more *m;

	*p = (struct fs_card){
		.id = c->id,
		.board = c->board,
		.title = c->title,
		.body = c->body,
		.state = c->state,
		.labels = c->labels,
		.created_at = c->created_at,
		.updated_at = c->updated_at,
		.state_at = c->state_at,
		.priority = c->priority,
		.has_epoch = c->has_epoch,
		.awaiting_input = c->awaiting_input,
	};
	if (more_needed(c)) {
		m = (struct fs_card_more *)(p + 1);
		*m = (struct fs_card_more){
			.claim = c->claim,
			.claim_epoch = c->claim_epoch,
			.blockers = c->blockers,
			.comments = c->comments,
			.n_comments = c->n_comments,
			.last_run_id = c->last_run_id,
			.state_reason = c->state_reason,
			.gave_up = c->gave_up,
			.not_before = c->not_before,
			.attempts = c->attempts,
			.block_bytes = size <= UINT32_MAX ? (uint32_t)size : 0, /* 0: unknown */
		};
		p->more = m;
	}
	return p;
}

/* Lays c out twice in one block of head + the bytes it needs: once measuring, once filling
 * (w->atoms, when set, share the strings an atom table holds). d: the laid-out card's fields. */
static char *card_lay_block(struct card_walk *w, const struct core_card *c, size_t head,
			    struct core_card *d, size_t *size)
{
	w->a.off = head;
	card_lay(w, c, d); /* measuring */
	*size = w->a.off;
	w->a = (struct fs_arena){.base = malloc(*size), .off = head};
	if (!w->a.base)
		return NULL;
	card_lay(w, c, d); /* filling */
	assert(w->a.off == *size);
	return w->a.base;
}

struct fs_card *fs_card_pack(struct fs_atoms *atoms, const struct core_card *c)
{
	struct card_walk w = {.atoms = atoms};
	struct core_card d;
	size_t size;
	char *block = card_lay_block(&w, c, fs_card_head(c), &d, &size);

	if (!block)
		return NULL;
	assert(w.i_memo == w.n_memo);
	return fs_card_fill(block, size, &d);
}

struct core_card *fs_card_block(const struct core_card *c)
{
	const size_t head = (sizeof(struct core_card) + 15) & ~(size_t)15;
	struct card_walk w = {0};
	struct core_card d, *out;
	size_t size;

	out = (struct core_card *)card_lay_block(&w, c, head, &d, &size);
	if (!out)
		return NULL;
	*out = d;
	out->flat = false;
	out->one_block = true;
	return out;
}

static bool str_same(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

struct fs_card *fs_card_reclaim(const struct fs_card *p, const struct core_card *c, bool *nomem)
{
	const struct fs_card_more *m = p->more;
	struct card_walk w = {0};
	struct core_card v, d;
	char *block;

	*nomem = false;
	if (!m || !m->block_bytes || !c->claim.present || !m->claim.present ||
	    !str_same(m->claim.marker, c->claim.marker) ||
	    !str_same(m->claim.holder, c->claim.holder) || !str_same(m->claim.from, c->claim.from))
		return NULL;
	block = malloc(m->block_bytes);
	if (!block) {
		*nomem = true;
		return NULL;
	}
	memcpy(block, p, m->block_bytes);
	w.lo = (const char *)p;
	w.hi = w.lo + m->block_bytes;
	w.by = block - w.lo;
	card_lay(&w, fs_card_view(p, &v), &d);
	if (w.outside) {
		free(block);
		return NULL;
	}
	_Static_assert(sizeof(struct core_claim) == 56,
		       "a claim's numbers come from c, its three strings stay p's: a new field?");
	d.flat = false;
	v.claim = d.claim; /* p's strings, moved */
	d.claim = c->claim;
	d.claim.marker = v.claim.marker;
	d.claim.holder = v.claim.holder;
	d.claim.from = v.claim.from;
	d.has_epoch = c->has_epoch;
	d.claim_epoch = c->claim_epoch;
	d.updated_at = c->updated_at;
	return fs_card_fill(block, m->block_bytes, &d);
}

void fs_card_free(struct fs_card *p)
{
	free(p);
}

const struct core_card *fs_card_view(const struct fs_card *p, struct core_card *v)
{
	const struct fs_card_more *m = fs_card_more_of(p);

	*v = (struct core_card){
		.id = p->id,
		.board = p->board,
		.title = p->title,
		.body = p->body,
		.state = p->state,
		.priority = p->priority,
		.has_epoch = p->has_epoch,
		.awaiting_input = p->awaiting_input,
		.flat = true, /* its fields are p's: never freed */
		.labels = p->labels,
		.blockers = m->blockers,
		.comments = m->comments,
		.n_comments = m->n_comments,
		.claim = m->claim,
		.claim_epoch = m->claim_epoch,
		.last_run_id = m->last_run_id,
		.gave_up = m->gave_up,
		.state_reason = m->state_reason,
		.created_at = p->created_at,
		.updated_at = p->updated_at,
		.state_at = p->state_at,
		.not_before = m->not_before,
		.attempts = m->attempts,
	};
	return v;
}

struct core_card *fs_card_dup(const struct fs_card *p)
{
	struct core_card v;

	return fs_card_block(fs_card_view(p, &v));
}
