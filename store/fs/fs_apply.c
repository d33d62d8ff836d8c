/* Publishing a change on the FS twin: fs_change_reserve makes room for everything a change
 * touches, then fs_change_apply, the one place that publishes a committed (or replayed)
 * change, swaps its objects into the state and the indexes (fs_index.c) and records what
 * they replaced for the undo; also the epoch floors, the creation order and the events tail.
 * Callers hold the state write lock. */
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_effect.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_policy.h"
#include "store/fs/fs_undo.h"

#include <stdlib.h>
#include <string.h>

/* ---- change sets ---- */

void fs_change_release(struct fs_change *ch)
{
	size_t i;

	for (i = 0; i < ch->n_cards; i++) {
		free(ch->cards[i].id);
		if (!ch->cards[i].kept)
			core_card_free(ch->cards[i].card);
		fs_card_free(ch->cards[i].pub);
	}
	free(ch->cards);
	for (i = 0; i < ch->n_runs; i++)
		core_run_free(ch->runs[i]);
	free(ch->runs);
	for (i = 0; i < ch->n_boards; i++)
		core_board_release(&ch->boards[i]);
	free(ch->boards);
	for (i = 0; i < ch->n_events; i++)
		fs_event_free(ch->events[i]);
	free(ch->events);
	for (i = 0; i < ch->n_bctrs; i++)
		free(ch->bctrs[i].board);
	free(ch->bctrs);
	for (i = 0; i < ch->n_kvs; i++) {
		free(ch->kvs[i].key);
		free(ch->kvs[i].val);
	}
	free(ch->kvs);
	memset(ch, 0, sizeof(*ch));
}

int64_t fs_floor_get(const struct fs *fs, const char *id)
{
	const struct fs_floor *fl = fs_map_get(&fs->floors, id);

	return fl ? fl->epoch : 0;
}

/* Raises the floor of id to epoch (map room reserved by fs_change_reserve). */
static void floor_raise(struct fs *fs, const char *id, int64_t epoch)
{
	struct fs_floor *fl = fs_map_get(&fs->floors, id);

	if (fl) {
		if (epoch > fl->epoch)
			fl->epoch = epoch;
		return;
	}
	fl = calloc(1, sizeof(*fl));
	if (!fl || !(fl->id = strdup(id)))
		abort(); /* two small blocks; everything else was reserved */
	fl->epoch = epoch;
	fs_map_put(&fs->floors, fl->id, fl); /* reserved: cannot fail */
}

enum core_rc fs_change_resolve(struct fs *fs, struct fs_change *ch)
{
	size_t i;

	for (i = 0; i < ch->n_cards; i++) {
		struct fs_change_card *cc = &ch->cards[i];
		const struct fs_card_ent *ent;
		struct core_card *patch = cc->card, merged;
		struct fs_card *full;

		if (!cc->claim_only || !patch)
			continue;
		ent = fs_card_find(fs, cc->id);
		if (!ent) {
			/* Deleted later (a snapshot taken after this line): nothing to patch. */
			core_card_free(patch);
			cc->card = NULL;
			cc->floor_only = true;
			continue;
		}
		/* The card as it stands with the patch's claim fields, packed at once (its strings
		 * borrowed from both until fs_card_pack copies them). */
		fs_card_view(ent->card, &merged);
		merged.claim = patch->claim;
		merged.has_epoch = patch->has_epoch;
		merged.claim_epoch = patch->claim_epoch;
		merged.updated_at = patch->updated_at;
		full = fs_card_pack(&fs->atoms, &merged);
		if (!full)
			return CORE_ERR_NOMEM;
		core_card_free(patch);
		cc->card = NULL;
		cc->pub = full;
	}
	return CORE_OK;
}

#define FS_PREFETCH_AHEAD 8

enum core_rc fs_change_reserve(struct fs *fs, struct fs_change *ch)
{
	struct core_board *nb;
	size_t n_new = 0, n_claims = 0, n_recov = 0, n_floors = 0, i;

	/* What gets published is packed (fs_flat.c); decoded cards already are. A renew's card
	 * is the published one with new lease numbers: its block is copied, not packed again. */
	for (i = 0; i < ch->n_cards; i++) {
		struct core_card *c = ch->cards[i].card;
		const struct fs_card_ent *was;
		bool nomem = false;

		if (!c)
			continue;
		was = ch->cards[i].claim_only ? fs_card_find(fs, ch->cards[i].id) : NULL;
		ch->cards[i].pub = was ? fs_card_reclaim(was->card, c, &nomem) : NULL;
		if (!ch->cards[i].pub && (nomem || !(ch->cards[i].pub = fs_card_pack(&fs->atoms, c))))
			return CORE_ERR_NOMEM;
		if (!ch->cards[i].kept)
			core_card_free(c);
		ch->cards[i].card = NULL;
	}
	for (i = 0; i < ch->n_cards; i++) {
		n_floors += ch->cards[i].floor > 0;
		struct fs_change_card *cc = &ch->cards[i];
		const struct fs_card *now = cc->pub;
		const struct fs_card_ent *ent = NULL;

		/* At a million cards the id map is 48 MB: each lookup a cache miss, unless the
		 * slot of a card a few ahead is fetched meanwhile (a loaded snapshot's ids come
		 * hashed by its decoder). */
		if (i + FS_PREFETCH_AHEAD < ch->n_cards && ch->cards[i + FS_PREFETCH_AHEAD].hashed) {
			fs_ids_prefetch(&fs->cards, ch->cards[i + FS_PREFETCH_AHEAD].hash);
			__builtin_prefetch(ch->cards[i + FS_PREFETCH_AHEAD].pub);
		}

		if (now) {
			if (!cc->hashed) /* the snapshot's decoder hashes ids on its thread */
				cc->hash = fs_map_hash(cc->id);
			cc->hashed = true;
			ent = fs_ids_get_h(&fs->cards, cc->id, cc->hash);
		}
		cc->ent = (struct fs_card_ent *)ent;

		n_new += now && !ent;
		n_claims += now && fs_card_claimed(now) && !(ent && ent->cslot);
		n_recov += now && fs_card_claimed(now) &&
			   core_marker_is_recovery(now->more->claim.marker) && !(ent && ent->rslot);
	}
	if (fs->n_order + n_new >= UINT32_MAX)
		return CORE_ERR_NOMEM; /* the entries' 32-bit slots */
	if (fs_ids_reserve(&fs->cards, n_new) || fs_map_reserve(&fs->runs, ch->n_runs) ||
	    fs_map_reserve(&fs->kv, ch->n_kvs) || fs_map_reserve(&fs->subs, ch->n_kvs) ||
	    fs_map_reserve(&fs->idem, ch->n_kvs) ||
	    fs_map_reserve(&fs->floors, n_floors) ||
	    fs_ptrs_reserve(&fs->claimed, &fs->cap_claimed, fs->n_claimed + n_claims) ||
	    fs_ptrs_reserve(&fs->recov, &fs->cap_recov, fs->n_recov + n_recov) ||
	    fs_ptrs_reserve(&fs->attn, &fs->cap_attn, fs->n_attn + ch->n_cards + ch->n_runs) ||
	    fs_ptrs_reserve(&fs->order, &fs->cap_order, fs->n_order + n_new) ||
	    fs_lists_reserve(fs, ch) || fs_claimcount_reserve(fs, ch))
		return CORE_ERR_NOMEM;
	if (ch->n_boards) {
		nb = realloc(fs->boards, (fs->n_boards + ch->n_boards) * sizeof(*nb));
		if (!nb)
			return CORE_ERR_NOMEM;
		fs->boards = nb;
	}
	/* Slide the events tail down once its dead prefix outweighs it. */
	if (fs->ev_head > 0 && fs->ev_head >= fs->ev_n - fs->ev_head) {
		memmove(fs->ev, fs->ev + fs->ev_head, (fs->ev_n - fs->ev_head) * sizeof(*fs->ev));
		fs->ev_n -= fs->ev_head;
		fs->ev_head = 0;
	}
	if (fs_ptrs_reserve(&fs->ev, &fs->ev_cap, fs->ev_n + ch->n_events) ||
	    fs_evboard_reserve(fs, ch))
		return CORE_ERR_NOMEM;
	if (fs->snap_active &&
	    (fs_ptrs_reserve(&fs->grave.cards, &fs->grave.cap_cards,
			  fs->grave.n_cards + ch->n_cards) ||
	     fs_ptrs_reserve(&fs->grave.runs, &fs->grave.cap_runs, fs->grave.n_runs + ch->n_runs) ||
	     fs_ptrs_reserve(&fs->grave.events, &fs->grave.cap_events,
			  fs->grave.n_events + ch->n_events)))
		return CORE_ERR_NOMEM;
	return CORE_OK;
}

static void apply_board(struct fs *fs, struct core_board *b, struct fs_undo_board *u)
{
	size_t i;

	/* Boards are deep-copied by every reader (snapshots included), so they are replaced
	 * in place rather than retired. */
	for (i = 0; i < fs->n_boards; i++) {
		if (strcmp(fs->boards[i].name, b->name) == 0) {
			if (u)
				u->old = fs->boards[i];
			else
				core_board_release(&fs->boards[i]);
			fs->boards[i] = *b;
			return;
		}
	}
	if (u)
		u->is_new = true;
	fs->boards[fs->n_boards++] = *b;
}

size_t fs_order_lower(const struct fs *fs, uint64_t ord)
{
	size_t lo = 0, hi = fs->n_order, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (fs->order[mid]->ord < ord)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Inserts ent keeping `order` sorted by ord (new cards normally land at the end). */
static void order_insert(struct fs *fs, struct fs_card_ent *ent)
{
	size_t lo;

	if (!fs->n_order || fs->order[fs->n_order - 1]->ord < ent->ord) {
		fs->order[fs->n_order++] = ent;
		return;
	}
	lo = fs_order_lower(fs, ent->ord);
	memmove(fs->order + lo + 1, fs->order + lo, (fs->n_order - lo) * sizeof(*fs->order));
	fs->order[lo] = ent;
	fs->n_order++;
}

/* Drops deleted entries from `order` once they are half of it (amortised O(1) per delete). */
static void order_compact(struct fs *fs)
{
	size_t i, out = 0;

	if (fs->n_dead < 64 || fs->n_dead * 2 < fs->n_order)
		return;
	fs_post_tops_drop(fs); /* entries are freed below */
	/* A held entry (an undo may revive it) stays, counted, for a later pass. */
	for (i = 0; i < fs->n_order; i++) {
		struct fs_card_ent *e = fs->order[i];
		if (e->dead && !e->held) {
			free(e);
			fs->n_dead--;
		} else {
			fs->order[out++] = e;
		}
	}
	fs->n_order = out;
}

/* The replaced card goes to the undo entry (a commit) or is retired (a replay). */
static void replaced_card(struct fs *fs, struct fs_undo *u, struct fs_card_ent *ent,
			  struct fs_card *old, bool deleted)
{
	if (u)
		u->cards[u->n_cards++] =
			(struct fs_undo_card){.ent = ent, .old = old, .deleted = deleted};
	else
		fs_retire_card(fs, old);
}

static void apply_card(struct fs *fs, struct fs_change_card *cc, struct fs_undo *u)
{
	struct fs_card_ent *ent;

	if (cc->floor > 0)
		floor_raise(fs, cc->id, cc->floor);
	if (cc->floor_only)
		return;
	if (!cc->pub) {
		ent = fs_ids_del(&fs->cards, cc->id);
		if (ent) {
			fs_deps_update(fs, ent, ent->card, NULL);
			replaced_card(fs, u, ent, ent->card, true);
			ent->card = NULL;
			fs_claimed_update(fs, ent);
			ent->dead = true;
			ent->held = u != NULL;
			fs->n_dead++;
		}
		return;
	}
	/* reserve's lookup, unless an earlier entry of the same change deleted it (or, for a
	 * new id, added it: looked up again, with reserve's hash) */
	if (cc->ent && !cc->ent->dead)
		ent = cc->ent;
	else
		ent = cc->hashed ? fs_ids_get_h(&fs->cards, cc->id, cc->hash)
				 : fs_card_find(fs, cc->id);
	if (ent) {
		fs_deps_update(fs, ent, ent->card, cc->pub);
		replaced_card(fs, u, ent, ent->card, false);
		ent->card = cc->pub;
		cc->pub = NULL;
		fs_claimed_update(fs, ent);
		return;
	}
	ent = calloc(1, sizeof(*ent));
	if (!ent)
		abort(); /* one small block; everything else was reserved */
	ent->card = cc->pub;
	ent->ord = cc->ord;
	if (ent->ord > fs->ctr.ord)
		fs->ctr.ord = ent->ord; /* likewise: an ordinal is a list cursor, never reused */
	cc->pub = NULL;
	/* reserved: cannot fail */
	if (cc->hashed)
		fs_ids_put_h(&fs->cards, ent, cc->hash);
	else
		fs_ids_put(&fs->cards, ent);
	order_insert(fs, ent);
	fs_deps_update(fs, ent, NULL, ent->card);
	fs_claimed_update(fs, ent);
	if (u)
		u->cards[u->n_cards++] = (struct fs_undo_card){.ent = ent, .old = NULL};
}

static void apply_run(struct fs *fs, struct core_run *r, struct fs_undo *u)
{
	struct core_run *old = fs_map_get(&fs->runs, r->id);

	/* Put first: the slot's key still points into the old run until it is replaced. */
	fs_map_put(&fs->runs, r->id, r); /* reserved: cannot fail */
	if (!old)
		fs_runs_index_add(fs, r); /* the card's history (fs_runs_index.c) */
	if (u)
		u->runs[u->n_runs++] = (struct fs_undo_run){.now = r, .old = old};
	else
		fs_retire_run(fs, old);
	fs_attn_update_run(fs, r);
}

static void apply_event(struct fs *fs, struct core_event *e, struct fs_undo *u)
{
	/* A replayed line may carry events the snapshot already holds. */
	if (!u && fs->ev_n > fs->ev_head && e->seq <= fs->ev[fs->ev_n - 1]->seq) {
		fs_event_free(e);
		return;
	}
	fs->ev[fs->ev_n++] = e;
	fs_evboard_append(fs, e);
	/* A commit's events are trimmable only once durable: an undo pops them back. */
	if (u)
		u->n_events++;
	else
		fs->ev_durable = e->seq;
	/* Recovery trusts no stated counter below what it loaded: a seq handed out twice
	 * would lose an acknowledged event after the next restart. */
	if (e->seq > fs->ctr.seq)
		fs->ctr.seq = e->seq;
	fs_events_trim(fs);
}

void fs_events_trim(struct fs *fs)
{
	while (fs->ev_n - fs->ev_head > fs->events_keep &&
	       fs->ev[fs->ev_head]->seq <= fs->ev_durable) {
		fs_evboard_shift(fs, fs->ev[fs->ev_head]);
		fs_retire_event(fs, fs->ev[fs->ev_head++]);
	}
}

void fs_change_apply(struct fs *fs, struct fs_change *ch, struct fs_undo *undo)
{
	fs_change_apply_keep(fs, ch, undo);
	fs_change_release(ch);
}

void fs_change_apply_keep(struct fs *fs, struct fs_change *ch, struct fs_undo *undo)
{
	size_t i;

	for (i = 0; i < ch->n_boards; i++)
		apply_board(fs, &ch->boards[i], undo ? &undo->boards[undo->n_boards++] : NULL);
	ch->n_boards = 0;
	for (i = 0; i < ch->n_cards; i++)
		apply_card(fs, &ch->cards[i], undo);
	for (i = 0; i < ch->n_runs; i++)
		apply_run(fs, ch->runs[i], undo);
	ch->n_runs = 0;
	for (i = 0; i < ch->n_events; i++)
		apply_event(fs, ch->events[i], undo);
	ch->n_events = 0;
	fs_evboard_counters_apply(fs, ch);
	for (i = 0; i < ch->n_kvs; i++)
		fs_kv_apply(fs, &ch->kvs[i], undo);
	ch->n_kvs = 0;
	if (ch->ctr.seq > fs->ctr.seq)
		fs->ctr.seq = ch->ctr.seq;
	if (ch->ctr.card > fs->ctr.card)
		fs->ctr.card = ch->ctr.card;
	if (ch->ctr.run > fs->ctr.run)
		fs->ctr.run = ch->ctr.run;
	if (ch->ctr.ord > fs->ctr.ord)
		fs->ctr.ord = ch->ctr.ord;
	order_compact(fs);
}

void fs_state_release(struct fs *fs)
{
	size_t i;

	fs_undo_settle(fs, UINT64_MAX); /* nobody waits any more: what they replaced goes */
	free(fs->undo);
	free(fs->enc);
	fs->enc = NULL;
	fs->enc_cap = 0;
	fs_grave_empty(fs);
	free(fs->grave.cards);
	free(fs->grave.runs);
	free(fs->grave.events);
	for (i = 0; i < fs->n_order; i++) {
		fs_card_free(fs->order[i]->card);
		free(fs->order[i]);
	}
	free(fs->order);
	free(fs->claimed);
	free(fs->recov);
	free(fs->attn);
	fs_ids_release(&fs->cards);
	fs_post_map_release(&fs->deps);
	fs_post_release(fs);
	for (i = 0; i < fs->runs.cap; i++)
		if (fs->runs.slots[i].key)
			core_run_free(fs->runs.slots[i].val);
	fs_map_release(&fs->runs);
	fs_runs_index_release(fs);
	fs_kv_release(fs);
	for (i = 0; i < fs->floors.cap; i++) {
		struct fs_floor *fl = fs->floors.slots[i].key ? fs->floors.slots[i].val : NULL;

		if (fl) {
			free(fl->id);
			free(fl);
		}
	}
	fs_map_release(&fs->floors);
	fs_claimcount_release(fs);
	for (i = fs->ev_head; i < fs->ev_n; i++)
		fs_event_free(fs->ev[i]);
	free(fs->ev);
	fs_evboard_release(fs);
	for (i = 0; i < fs->n_boards; i++)
		core_board_release(&fs->boards[i]);
	free(fs->boards);
	fs_atoms_release(&fs->atoms); /* last: every card is gone */
}
