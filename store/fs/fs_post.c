/* Lists of cards under a key, and the posting lists built on them: for each state and each
 * label, the live cards that carry it, in no order (the blockers index, fs->deps, is made
 * of the same lists). They let a filtered list whose filter matches few cards walk those cards
 * instead of every card (fs_card_list): a list then costs O(matches), where the creation-order
 * walk costs O(cards / match ratio).
 *
 * Maintained where the blockers index is (fs_deps_update: every publish, replay and undo),
 * with room reserved beforehand (fs_post_reserve_card, from fs_change_reserve), so applying a
 * change cannot fail. A state
 * list knows each member's slot (ent->sslot: O(1) moves); a label list finds its member by a
 * scan of that list (labels change less often than columns). Callers hold the state lock. */
#include "store/fs/fs.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"

#include <stdlib.h>
#include <string.h>

static void post_free(struct fs_post *p)
{
	free(p->sched);
	free(p->top);
	free(p->v);
	free(p->key);
	free(p);
}

struct fs_post *fs_post_get_or_add(struct fs_map *m, const char *key)
{
	struct fs_post *p = fs_map_get(m, key);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (p && (p->key = strdup(key)) && fs_map_put(m, p->key, p) == CORE_OK)
		return p;
	if (p)
		free(p->key);
	free(p);
	return NULL;
}

void fs_post_add(struct fs_post *p, struct fs_card_ent *ent)
{
	if (p->n == p->cap)
		abort(); /* reserved by fs_change_reserve (or left by what an undo reverses) */
	p->v[p->n++] = ent;
	p->reserved = false;
}

/* An empty list goes, unless a change has room reserved in it or an undo may refill it
 * (one is pending, or a rollback is under way). */
static void post_maybe_free(struct fs *fs, struct fs_map *m, struct fs_post *p)
{
	if (!p->n && !p->reserved && fs->undo_n == fs->undo_head && !fs->rolling_back) {
		fs_map_del(m, p->key);
		post_free(p);
	}
}

void fs_post_remove(struct fs *fs, struct fs_map *m, const char *key, struct fs_card_ent *ent)
{
	struct fs_post *p = fs_map_get(m, key);
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->n; i++) {
		if (p->v[i] == ent) {
			p->v[i] = p->v[--p->n];
			break;
		}
	}
	post_maybe_free(fs, m, p);
}

void fs_post_map_release(struct fs_map *m)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			post_free(m->slots[i].val);
	fs_map_release(m);
}

static bool has_label(const struct fs_card *c, const char *label)
{
	return c && core_strv_contains(&c->labels, label);
}

/* Does `now` join the list of its k-th label (absent from `before`, first of its kind)? */
static bool label_joins(const struct fs_card *before, const struct fs_card *now, size_t k)
{
	size_t j;

	for (j = 0; j < k; j++)
		if (strcmp(now->labels.v[j], now->labels.v[k]) == 0)
			return false;
	return !has_label(before, now->labels.v[k]);
}

static bool state_moves(const struct fs_card *before, const struct fs_card *now)
{
	return now && (!before || strcmp(before->state, now->state) != 0);
}

void fs_post_reserve_one(struct fs_map *m, const char *key, int pass, enum core_rc *rc)
{
	struct fs_post *p;

	if (pass == 0) {
		if (*rc != CORE_OK)
			return;
		p = fs_post_get_or_add(m, key);
		if (!p)
			*rc = CORE_ERR_NOMEM;
		else
			p->pending++;
		return;
	}
	p = fs_map_get(m, key);
	if (!p || !p->pending)
		return;
	if (*rc == CORE_OK && fs_ptrs_reserve(&p->v, &p->cap, p->n + p->pending) != CORE_OK)
		*rc = CORE_ERR_NOMEM;
	p->reserved = *rc == CORE_OK;
	p->pending = 0;
}

void fs_post_reserve_card(struct fs *fs, const struct fs_card *before,
			  const struct fs_card *now, int pass, enum core_rc *rc)
{
	size_t k;

	if (state_moves(before, now))
		fs_post_reserve_one(&fs->post_states, now->state, pass, rc);
	for (k = 0; now && k < now->labels.n; k++)
		if (label_joins(before, now, k))
			fs_post_reserve_one(&fs->post_labels, now->labels.v[k], pass, rc);
}

static void state_leave(struct fs *fs, struct fs_card_ent *ent, const char *state)
{
	struct fs_post *p = fs_map_get(&fs->post_states, state);
	struct fs_card_ent *last;

	if (!p || !ent->sslot)
		return;
	last = p->v[--p->n];
	p->v[ent->sslot - 1] = last;
	last->sslot = ent->sslot;
	ent->sslot = 0;
	post_maybe_free(fs, &fs->post_states, p);
}

void fs_post_update(struct fs *fs, struct fs_card_ent *ent, const struct fs_card *before,
		    const struct fs_card *now)
{
	struct fs_post *p;
	size_t k;

	if (before && (!now || strcmp(before->state, now->state) != 0))
		state_leave(fs, ent, before->state);
	for (k = 0; before && k < before->labels.n; k++)
		if (!has_label(now, before->labels.v[k]))
			/* a duplicate label: a no-op the second time */
			fs_post_remove(fs, &fs->post_labels, before->labels.v[k], ent);
	if (state_moves(before, now)) {
		p = fs_map_get(&fs->post_states, now->state);
		if (!p)
			abort(); /* reserved: cannot happen */
		fs_post_add(p, ent);
		ent->sslot = p->n;
	}
	for (k = 0; now && k < now->labels.n; k++) {
		if (!label_joins(before, now, k))
			continue;
		p = fs_map_get(&fs->post_labels, now->labels.v[k]);
		if (!p)
			abort(); /* reserved: cannot happen */
		fs_post_add(p, ent);
	}
	/* claim-next's cache of a state holds its best unclaimed members in rank order. A card
	 * re-ranked may sit in the caches of the state it left and of the one it is in, out of
	 * order: both are dropped. One newly there unclaimed, or released, is offered to its
	 * state's cache (fs_post_top_offer keeps it exact without a walk: a worker's release or
	 * the reaper's never costs the next claim-next a walk of a million-card column). One
	 * that goes away for good (its entry may be freed) drops it. */
	if (before && now &&
	    (before->priority != now->priority || before->created_at != now->created_at)) {
		if ((p = fs_map_get(&fs->post_states, before->state)))
			p->top_valid = false;
		if ((p = fs_map_get(&fs->post_states, now->state)))
			p->top_valid = false;
	} else if (now && !fs_card_claimed(now) &&
		   (!before || fs_card_claimed(before) || state_moves(before, now)) &&
		   (p = fs_map_get(&fs->post_states, now->state))) {
		/* A scheduled one waits in the state's heap until it is due (DESIGN §17). */
		if (fs_card_more_of(now)->not_before)
			fs_post_sched_offer(p, ent, fs_card_more_of(now)->not_before);
		else
			fs_post_top_offer(p, ent, now);
	} else if (before && now && !fs_card_claimed(now) &&
		   fs_card_more_of(before)->not_before != fs_card_more_of(now)->not_before &&
		   (p = fs_map_get(&fs->post_states, now->state))) {
		/* An unclaimed card rescheduled in place (a PATCH): cleared, it is offered now;
		 * set or moved, it waits in the heap (the cache, which may hold it, passes over a
		 * member scheduled after now: fs_next.c's top_live). */
		if (!fs_card_more_of(now)->not_before)
			fs_post_top_offer(p, ent, now);
		else
			fs_post_sched_offer(p, ent, fs_card_more_of(now)->not_before);
	}
	if (before && !now && (p = fs_map_get(&fs->post_states, before->state)))
		p->top_valid = false;
}

void fs_post_tops_drop(struct fs *fs)
{
	size_t i;

	for (i = 0; i < fs->post_states.cap; i++)
		if (fs->post_states.slots[i].key)
			((struct fs_post *)fs->post_states.slots[i].val)->top_valid = false;
}

const struct fs_post *fs_post_state(const struct fs *fs, const char *state)
{
	return fs_map_get(&fs->post_states, state);
}

const struct fs_post *fs_post_label(const struct fs *fs, const char *label)
{
	return fs_map_get(&fs->post_labels, label);
}

void fs_post_release(struct fs *fs)
{
	fs_post_map_release(&fs->post_states);
	fs_post_map_release(&fs->post_labels);
}
