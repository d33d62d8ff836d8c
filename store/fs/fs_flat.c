/* Flat cards: a published card of the FS twin as one allocation (fs.h, "flat cards").
 *
 * An ordinary core_card is a 256-byte struct and one malloc per string and array: about 530
 * bytes for a small card, a dozen mallocs to build and as many frees. A flat one is the struct
 * followed by its arrays and the strings it owns, and points at interned copies of what many
 * cards repeat (board, column, labels, token names). It is laid out twice by the same walk:
 * once over a measuring arena (the size), once over the block. The binary decoder
 * (fs_codec.c) builds one from a record the same way, so a load never makes an ordinary card
 * first. */
#include "store/fs/fs.h"

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

/* s in the arena (or its atom when `atom`); NULL while measuring or for NULL. The measuring
 * walk creates the atom, the filling walk finds it: both take the same bytes. */
static char *put_str(struct fs_arena *a, struct fs_atoms *atoms, const char *s, bool atom)
{
	const char *at;
	size_t n;
	char *d;

	if (!s)
		return NULL;
	n = strlen(s);
	if (atom && atoms && (at = fs_atom(atoms, s, n, !a->base)))
		return (char *)at;
	d = fs_arena_take(a, n + 1, 1);
	if (d)
		memcpy(d, s, n + 1);
	return d;
}

static void put_strv(struct fs_arena *a, struct fs_atoms *atoms, struct core_strv *d,
		     const struct core_strv *s, bool atom)
{
	char **v = s->n ? fs_arena_take(a, s->n * sizeof(*v), _Alignof(char *)) : NULL;
	size_t i;

	d->v = v;
	for (i = 0; i < s->n; i++) {
		char *x = put_str(a, atoms, s->v[i], atom);

		if (v)
			v[i] = x;
	}
}

/* One walk: the card laid out in a (returned), or only measured (NULL). */
static struct core_card *card_lay(struct fs_arena *a, struct fs_atoms *atoms,
				  const struct core_card *c)
{
	struct core_card *out = fs_arena_take(a, sizeof(*out), _Alignof(struct core_card));
	struct core_card scratch, *d = out ? out : &scratch;
	struct core_comment *cm;
	size_t i;

	*d = *c;
	d->flat = true;
	d->id = put_str(a, atoms, c->id, false);
	d->board = put_str(a, atoms, c->board, true);
	d->title = put_str(a, atoms, c->title, false);
	d->body = put_str(a, atoms, c->body, false);
	d->state = put_str(a, atoms, c->state, true);
	put_strv(a, atoms, &d->labels, &c->labels, true);
	put_strv(a, atoms, &d->blockers, &c->blockers, false);
	cm = c->n_comments ? fs_arena_take(a, c->n_comments * sizeof(*cm),
					    _Alignof(struct core_comment))
			   : NULL;
	d->comments = cm;
	for (i = 0; i < c->n_comments; i++) {
		struct core_comment x = {
			.id = put_str(a, atoms, c->comments[i].id, false),
			.author = put_str(a, atoms, c->comments[i].author, true),
			.body = put_str(a, atoms, c->comments[i].body, false),
			.created_at = c->comments[i].created_at,
		};

		if (cm)
			cm[i] = x;
	}
	d->claim.marker = put_str(a, atoms, c->claim.marker, false);
	d->claim.holder = put_str(a, atoms, c->claim.holder, true);
	d->last_run_id = put_str(a, atoms, c->last_run_id, false);
	d->gave_up.reason = put_str(a, atoms, c->gave_up.reason, false);
	d->gave_up.run_id = put_str(a, atoms, c->gave_up.run_id, false);
	d->gave_up.state = put_str(a, atoms, c->gave_up.state, true);
	d->state_reason = put_str(a, atoms, c->state_reason, false);
	return out;
}

struct core_card *fs_card_flat(struct fs_atoms *atoms, const struct core_card *c)
{
	struct fs_arena m = {0}, f = {0};
	struct core_card *d;

	card_lay(&m, atoms, c);
	f.base = malloc(m.off);
	if (!f.base)
		return NULL;
	d = card_lay(&f, atoms, c);
	assert(f.off == m.off && (void *)d == (void *)f.base);
	return d;
}
