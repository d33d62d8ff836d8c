/* Published cards of the FS twin (fs_flat.c): the flat, immutable struct fs_card, its
 * optional tail, the interned strings they share, and the views and copies code takes. */
#ifndef BOARDD_STORE_FS_FS_FLAT_H
#define BOARDD_STORE_FS_FS_FLAT_H

#include "core/core.h"
#include "store/fs/fs_map.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- published cards (fs_flat.c) ----
 * A published card is a struct fs_card: the fields every card has and every scan reads
 * (id, board, state, title, body, labels, priority, the timestamps) in a 96-byte head, and
 * the fields most cards never set (the claim and its epoch, blockers, comments, last run,
 * state reason, gave_up) in an optional tail, `more`. Both, the arrays and the strings the
 * card owns are one allocation; the strings many cards repeat (board, column, labels, token
 * names) point at interned copies. A core_card is 232 bytes and one malloc per string; this
 * is ~140 bytes for a card with two labels and no claim (bench/README.md, a million cards).
 * Code that needs a core_card takes a view (fs_card_view: a shallow core_card on the
 * caller's stack, borrowing the card's strings), or a copy (fs_card_dup). */

/* Interned strings: immortal until the store closes, so a card (published, parked for a
 * snapshot, or kept by an undo entry) may point at one for as long as it lives. At most
 * FS_ATOMS_MAX of them, each shorter than FS_ATOM_LEN: past that, strings are copied. Guarded
 * by the state write lock (or used by the opening thread alone). */
#define FS_ATOMS_MAX 4096
#define FS_ATOM_LEN 64
struct fs_atoms {
	struct fs_map map; /* string -> the same string (owned) */
};

/* The interned copy of the n bytes at p, NULL when there is none; `create` interns them if
 * there is room (NULL when not: out of memory, too long, or the table is full). */
const char *fs_atom(struct fs_atoms *a, const char *p, size_t n, bool create);
void fs_atoms_release(struct fs_atoms *a);

/* A bump allocator over one block. base NULL: it only measures (take returns NULL). */
struct fs_arena {
	char *base;
	size_t off;
};

void *fs_arena_take(struct fs_arena *a, size_t n, size_t align);

/* The fields of a card that most cards leave unset: zero when the card has no tail. */
struct fs_card_more {
	struct core_claim claim;
	int64_t claim_epoch;
	struct core_strv blockers;
	struct core_comment *comments;
	size_t n_comments;
	char *last_run_id;  /* may be NULL */
	char *state_reason; /* may be NULL */
	struct core_gave_up gave_up;
	int64_t not_before; /* DESIGN §17 */
	int32_t attempts;
	uint32_t block_bytes; /* the whole card's allocation, head to last string (fs_card_fill) */
	uint32_t spare_[2]; /* keeps the size a multiple of 16 (fs_card_head) */
};

/* The names are core_card's, so code reading the common fields reads either. Immutable. */
struct fs_card {
	char *id;
	char *board;
	char *title;
	char *body;
	char *state;
	struct core_strv labels;
	const struct fs_card_more *more; /* NULL: every field of it is zero */
	int64_t created_at;
	int64_t updated_at;
	int64_t state_at;
	int32_t priority;
	bool has_epoch;
	bool awaiting_input;
};

/* The zero tail: what fs_card_more_of returns for a card without one. */
extern const struct fs_card_more fs_card_no_more;

static inline const struct fs_card_more *fs_card_more_of(const struct fs_card *p)
{
	return p->more ? p->more : &fs_card_no_more;
}

static inline bool fs_card_claimed(const struct fs_card *p)
{
	return p->more && p->more->claim.present;
}

/* The published form of c (an ordinary card; its strings are copied); caller frees with
 * fs_card_free. NULL on OOM. atoms may be NULL (nothing interned). */
struct fs_card *fs_card_pack(struct fs_atoms *atoms, const struct core_card *c);
void fs_card_free(struct fs_card *p);
/* A shallow core_card in *v that borrows p's strings and arrays (valid while p is); never
 * freed. Returns v. */
const struct core_card *fs_card_view(const struct fs_card *p, struct core_card *v);
/* A deep copy of c in one allocation (core_card.one_block): what readers and writers are
 * handed as their answer. One malloc where core_card_dup makes one per string (a list of 100
 * cards made ~1 000); read-only, freed whole by core_card_free. NULL on OOM. */
struct core_card *fs_card_block(const struct core_card *c);
/* fs_card_block of the published card p. */
struct core_card *fs_card_dup(const struct fs_card *p);
/* How the decoder lays a card out in one block (fs_decode.c): it places the arrays and
 * strings first in an arena starting at fs_card_head(c) bytes (c: the card as measured, its
 * optional strings non-NULL when present), then fs_card_fill writes the head (and tail) at
 * the block's start from c, whose pointers already point into the block or at atoms. */
size_t fs_card_head(const struct core_card *c);
struct fs_card *fs_card_fill(void *block, size_t size, const struct core_card *c);
/* p as published with c's claim numbers (lease, times, presence), updated_at and epoch,
 * where c's claim strings are p's (a renew): a copy of p's block with its own pointers moved,
 * no string measured, copied or interned again (a fifth of fs_card_pack's work). NULL when
 * it does not apply (the caller packs c) or on OOM (*nomem set). */
struct fs_card *fs_card_reclaim(const struct fs_card *p, const struct core_card *c, bool *nomem);

#endif
