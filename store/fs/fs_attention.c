/* The attention lane on the FS twin (DESIGN §15), from indexes only.
 *
 * A card is in the lane for reasons of two kinds. Those that need neither the clock nor the
 * board (a give-up stamp, awaiting input, a failed or paused recorded run) keep the card in
 * fs->attn, maintained at every publish point (fs_claimed_update and apply_run, in commits,
 * replays and undos alike). Those that follow the clock come from the claim indexes the
 * reaper already reads: the claimed heap (expired leases sit at its top) and the recovery
 * set. A listing reads those three and nothing else: O(candidates), never the board. */
#include "store/fs/fs.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_ops.h"

#include <stdlib.h>
#include <string.h>

static const struct core_run *recorded_run(const struct fs *fs, const struct core_card *c)
{
	return c && c->last_run_id ? fs_map_get(&fs->runs, c->last_run_id) : NULL;
}

void fs_attn_update(struct fs *fs, struct fs_card_ent *ent)
{
	const struct fs_card *p = ent->card;
	struct core_card v;
	bool on = false;

	/* Without the tail a card has no gave_up and no recorded run: the view (and the run
	 * lookup) is only taken when one of the candidate's conditions may hold. */
	if (p && (p->more || p->awaiting_input)) {
		fs_card_view(p, &v);
		on = core_attention_candidate(&v, recorded_run(fs, &v));
	}
	struct fs_card_ent *last;

	if (on && !ent->aslot) {
		if (fs->n_attn == fs->cap_attn)
			abort(); /* reserved: cannot happen */
		fs->attn[fs->n_attn++] = ent;
		ent->aslot = fs->n_attn;
	} else if (!on && ent->aslot) {
		last = fs->attn[--fs->n_attn];
		fs->attn[ent->aslot - 1] = last;
		last->aslot = ent->aslot;
		ent->aslot = 0;
	}
}

void fs_attn_update_run(struct fs *fs, const struct core_run *r)
{
	struct fs_card_ent *ent = r ? fs_card_find(fs, r->card_id) : NULL;

	if (ent)
		fs_attn_update(fs, ent);
}

/* ---- the listing ---- */

struct pick {
	const struct fs_card_ent **v;
	size_t n, cap;
};

static enum core_rc pick_add(struct pick *p, const struct fs_card_ent *e)
{
	if (p->n == p->cap && fs_ptrs_reserve(&p->v, &p->cap, p->n + 1) != CORE_OK)
		return CORE_ERR_NOMEM;
	p->v[p->n++] = e;
	return CORE_OK;
}

static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;

	return x < y ? -1 : x > y;
}

/* The claims whose lease expired before now: the heap's nodes above that key, walked from
 * the root (a node past now has no expired descendant). */
static enum core_rc pick_expired(const struct fs *fs, int64_t now, struct pick *p)
{
	size_t *stack, sp = 0, i;
	enum core_rc rc = CORE_OK;

	if (!fs->n_claimed)
		return CORE_OK;
	stack = malloc(fs->n_claimed * sizeof(*stack));
	if (!stack)
		return CORE_ERR_NOMEM;
	stack[sp++] = 0;
	while (rc == CORE_OK && sp > 0) {
		const struct core_claim *cl;

		i = stack[--sp];
		cl = &fs->claimed[i]->card->more->claim; /* claimed: it has the tail */
		if (!cl->has_lease || cl->lease_until >= now)
			continue;
		rc = pick_add(p, fs->claimed[i]);
		if (2 * i + 1 < fs->n_claimed)
			stack[sp++] = 2 * i + 1;
		if (2 * i + 2 < fs->n_claimed)
			stack[sp++] = 2 * i + 2;
	}
	free(stack);
	return rc;
}

static bool in_scope(const char *board, const char *one, const char *const *many)
{
	size_t i;

	if (one && strcmp(board, one) != 0)
		return false;
	if (!many)
		return true;
	for (i = 0; many[i]; i++)
		if (strcmp(many[i], board) == 0)
			return true;
	return false;
}

enum core_rc fs_attention_list(struct store *st, const char *board, const char *const *boards,
			       size_t limit, struct store_attention **out, size_t *n,
			       bool *truncated)
{
	struct fs *fs = fs_of(st);
	int64_t now = store_now(st);
	struct pick p = {0};
	struct store_attention *v = NULL;
	size_t i, k = 0;
	enum core_rc rc = CORE_OK;
	uint64_t need;

	pthread_rwlock_rdlock(&fs->lock);
	for (i = 0; rc == CORE_OK && i < fs->n_attn; i++)
		rc = pick_add(&p, fs->attn[i]);
	for (i = 0; rc == CORE_OK && i < fs->n_recov; i++)
		rc = pick_add(&p, fs->recov[i]);
	if (rc == CORE_OK)
		rc = pick_expired(fs, now, &p);
	if (rc == CORE_OK && p.n > 1)
		qsort(p.v, p.n, sizeof(*p.v), ptr_cmp); /* a card in two sets is listed once */
	if (rc == CORE_OK && !(v = calloc(p.n + 1, sizeof(*v))))
		rc = CORE_ERR_NOMEM;
	for (i = 0; rc == CORE_OK && i < p.n; i++) {
		struct core_card view;
		const struct core_card *c = p.v[i]->card ? fs_card_view(p.v[i]->card, &view) : NULL;
		const struct core_board *b;
		unsigned reasons;

		if ((i > 0 && p.v[i] == p.v[i - 1]) || !c || !in_scope(c->board, board, boards))
			continue;
		b = fs_board_find(fs, c->board);
		reasons = core_attention_reasons(c, b && core_board_is_terminal(b, c->state),
						 recorded_run(fs, c), now);
		if (!reasons)
			continue;
		v[k].card = fs_card_block(c);
		if (!v[k].card) {
			rc = CORE_ERR_NOMEM;
			break;
		}
		v[k++].reasons = reasons;
	}
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	free(p.v);
	rc = fs_read_end(fs, need, false, rc);
	if (rc != CORE_OK) {
		store_attention_free(v, k);
		return rc;
	}
	store_attention_finish(v, &k, limit, truncated);
	*out = v;
	*n = k;
	return CORE_OK;
}
