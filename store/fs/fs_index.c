/* The FS twin's in-memory index: lookups over the id maps (fs_map.c), retiring replaced
 * objects (or parking them while a snapshot reads them), the reverse blockers index
 * (blocker -> dependents) and the claimed heap with the recovery set. Publishing a change
 * into all of it is fs_apply.c's. Callers hold the state write lock. */
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_policy.h"

#include <stdlib.h>
#include <string.h>

/* ---- lookups ---- */

const struct core_board *fs_board_find(const struct fs *fs, const char *name)
{
	size_t i;

	for (i = 0; name && i < fs->n_boards; i++)
		if (strcmp(fs->boards[i].name, name) == 0)
			return &fs->boards[i];
	return NULL;
}

struct fs_card_ent *fs_card_find(const struct fs *fs, const char *id)
{
	return id ? fs_ids_get(&fs->cards, id) : NULL;
}

/* ---- retiring published objects ---- */

/* A snapshot in progress may still read the object: park it (capacity was reserved). */
void fs_retire_card(struct fs *fs, struct fs_card *c)
{
	if (!c)
		return;
	if (fs->snap_active)
		fs->grave.cards[fs->grave.n_cards++] = c;
	else
		fs_card_free(c);
}

void fs_retire_run(struct fs *fs, struct core_run *r)
{
	if (!r)
		return;
	if (fs->snap_active)
		fs->grave.runs[fs->grave.n_runs++] = r;
	else
		core_run_free(r);
}

void fs_event_free(struct core_event *e)
{
	core_event_release(e);
	free(e);
}

void fs_retire_event(struct fs *fs, struct core_event *e)
{
	if (fs->snap_active)
		fs->grave.events[fs->grave.n_events++] = e;
	else
		fs_event_free(e);
}

void fs_grave_empty(struct fs *fs)
{
	size_t i;

	for (i = 0; i < fs->grave.n_cards; i++)
		fs_card_free(fs->grave.cards[i]);
	for (i = 0; i < fs->grave.n_runs; i++)
		core_run_free(fs->grave.runs[i]);
	for (i = 0; i < fs->grave.n_events; i++)
		fs_event_free(fs->grave.events[i]);
	fs->grave.n_cards = fs->grave.n_runs = fs->grave.n_events = 0;
}

/* ---- the reverse blockers index ----
 * Maintained only by fs_change_apply (commits, replay and snapshot load alike), with its
 * memory reserved beforehand by fs_change_reserve like everything else apply touches. */

/* Is s among the first `upto` entries of sv? A replayed document is not trusted to hold a
 * deduplicated blocker list. */
static bool strv_has(const struct core_strv *sv, size_t upto, const char *s)
{
	size_t i;

	for (i = 0; i < upto && i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return true;
	return false;
}

/* Blocker k of `now` (its blockers nb) is an edge `before` (bb: NULL when before is) did not
 * have, and not a repeat within now. */
static bool edge_new(const struct core_strv *bb, const struct core_strv *nb, size_t k)
{
	return !strv_has(nb, k, nb->v[k]) && !(bb && strv_has(bb, bb->n, nb->v[k]));
}

static const struct core_strv *blockers_of(const struct fs_card *c)
{
	return c ? &fs_card_more_of(c)->blockers : NULL;
}

/* Room for every list member ch adds (blockers index, state and label lists): pass 0 counts
 * them per list, pass 1 grows each list once (and always runs, so no count is left behind on
 * failure). The cards' entries were looked up by fs_change_reserve just before. */
enum core_rc fs_lists_reserve(struct fs *fs, const struct fs_change *ch)
{
	enum core_rc rc = CORE_OK;
	size_t i, k;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < ch->n_cards; i++) {
			const struct fs_card *now = ch->cards[i].pub;
			const struct fs_card_ent *ent = now ? ch->cards[i].ent : NULL;
			const struct fs_card *before = ent ? ent->card : NULL;
			const struct core_strv *bb = blockers_of(before), *nb = blockers_of(now);

			for (k = 0; now && k < nb->n; k++)
				if (edge_new(bb, nb, k))
					fs_post_reserve_one(&fs->deps, nb->v[k], pass, &rc);
			fs_post_reserve_card(fs, before, now, pass, &rc);
		}
	}
	return rc;
}

void fs_deps_update(struct fs *fs, struct fs_card_ent *ent, const struct fs_card *before,
		    const struct fs_card *now)
{
	const struct core_strv *bb = blockers_of(before), *nb = blockers_of(now);
	struct fs_post *d;
	size_t k;

	for (k = 0; now && k < nb->n; k++) {
		if (!edge_new(bb, nb, k))
			continue;
		d = fs_map_get(&fs->deps, nb->v[k]);
		if (!d)
			abort(); /* reserved by fs_change_reserve: cannot happen */
		fs_post_add(d, ent);
	}
	for (k = 0; before && k < bb->n; k++)
		if (!strv_has(bb, k, bb->v[k]) && !(now && strv_has(nb, nb->n, bb->v[k])))
			fs_post_remove(fs, &fs->deps, bb->v[k], ent);
	fs_post_update(fs, ent, before, now); /* the same publish points: the posting lists */
	fs_claimcount_update(fs, before, now); /* and the live-claim counts (DESIGN §17) */
}

const struct fs_post *fs_deps_find(const struct fs *fs, const char *blocker)
{
	return fs_map_get(&fs->deps, blocker);
}

/* ---- the claimed set ---- */

/* The claimed heap's order: the lease's expiry (a claim with no lease never expires: last),
 * then the id, so equal leases list in a fixed order. */
static bool claim_before(const struct fs_card_ent *a, const struct fs_card_ent *b)
{
	const struct core_claim *x = &a->card->more->claim, *y = &b->card->more->claim;
	int64_t kx = x->has_lease ? x->lease_until : INT64_MAX;
	int64_t ky = y->has_lease ? y->lease_until : INT64_MAX;

	if (kx != ky)
		return kx < ky;
	return strcmp(fs_ent_id(a), fs_ent_id(b)) < 0;
}

static void heap_put(struct fs *fs, size_t i, struct fs_card_ent *e)
{
	fs->claimed[i] = e;
	e->cslot = i + 1;
}

/* Restores the heap around index i after its key changed (or it was just placed there). */
static void heap_fix(struct fs *fs, size_t i)
{
	struct fs_card_ent *e = fs->claimed[i];
	size_t c;

	while (i > 0 && claim_before(e, fs->claimed[(i - 1) / 2])) {
		heap_put(fs, i, fs->claimed[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	for (;;) {
		c = 2 * i + 1;
		if (c >= fs->n_claimed)
			break;
		if (c + 1 < fs->n_claimed && claim_before(fs->claimed[c + 1], fs->claimed[c]))
			c++;
		if (!claim_before(fs->claimed[c], e))
			break;
		heap_put(fs, i, fs->claimed[c]);
		i = c;
	}
	heap_put(fs, i, e);
}

static void recov_update(struct fs *fs, struct fs_card_ent *ent)
{
	bool on = ent->card && fs_card_claimed(ent->card) &&
		  core_marker_is_recovery(ent->card->more->claim.marker);
	struct fs_card_ent *last;

	if (on && !ent->rslot) {
		if (fs->n_recov == fs->cap_recov)
			abort(); /* reserved: cannot happen */
		fs->recov[fs->n_recov++] = ent;
		ent->rslot = fs->n_recov;
	} else if (!on && ent->rslot) {
		last = fs->recov[--fs->n_recov];
		fs->recov[ent->rslot - 1] = last;
		last->rslot = ent->rslot;
		ent->rslot = 0;
	}
}

/* Room is reserved by fs_change_reserve, or left by the transaction an undo reverses: the
 * sets never hold more than they once did. */
void fs_claimed_update(struct fs *fs, struct fs_card_ent *ent)
{
	bool on = ent->card && fs_card_claimed(ent->card);
	struct fs_card_ent *last;
	size_t i;

	if (on && !ent->cslot) {
		if (fs->n_claimed == fs->cap_claimed)
			abort(); /* reserved: cannot happen */
		fs->claimed[fs->n_claimed++] = ent;
		heap_fix(fs, fs->n_claimed - 1);
	} else if (on) {
		heap_fix(fs, ent->cslot - 1); /* a renewal or a transfer moved its lease */
	} else if (ent->cslot) {
		i = ent->cslot - 1;
		ent->cslot = 0;
		last = fs->claimed[--fs->n_claimed];
		if (i < fs->n_claimed) {
			fs->claimed[i] = last;
			heap_fix(fs, i);
		}
	}
	recov_update(fs, ent);
	fs_attn_update(fs, ent); /* the same publish points: every card write, replay, undo */
}
