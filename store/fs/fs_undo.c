/* Undo of the FS twin's transactions whose journal line is not durable yet.
 *
 * A commit is applied to memory right after its record is appended to the journal's buffer,
 * before the group's write and fdatasync, so that the next writer builds on it. Until that
 * sync succeeds the transaction keeps an undo entry: the objects it replaced (published objects
 * are immutable, so "the old card" is just a pointer) and what it added. When the sync
 * succeeds the entry is settled: the replaced objects are retired. When the write or the sync
 * fails every transaction whose line is not durable is undone, newest first, under the write
 * lock, before any of their writers is answered: nothing that was refused stays visible, and
 * later transactions never survive one they built on.
 *
 * Neither path may fail: everything an undo puts back had its room when it was taken away
 * (the reverse index keeps emptied entries while undo entries exist; `order` keeps deleted
 * entries that are held; the id map never shrinks). Retiring into the graveyard of a running
 * snapshot is the one allocation; if it fails the object is leaked, never freed under a
 * reader. All functions here run under the state write lock. */
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_effect.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_undo.h"

#include <stdlib.h>
#include <string.h>

/* Rounds n up for the next array in the one block fs_undo_new allocates. */
static size_t undo_align(size_t n)
{
	size_t a = _Alignof(max_align_t);

	return (n + a - 1) / a * a;
}

/* One allocation per transaction (it was five): the entry, then its four arrays. */
struct fs_undo *fs_undo_new(const struct fs_change *ch, const struct fs_counters *before)
{
	size_t o_cards = undo_align(sizeof(struct fs_undo));
	size_t o_runs = o_cards + undo_align((ch->n_cards + 1) * sizeof(struct fs_undo_card));
	size_t o_boards = o_runs + undo_align((ch->n_runs + 1) * sizeof(struct fs_undo_run));
	size_t o_kvs = o_boards + undo_align((ch->n_boards + 1) * sizeof(struct fs_undo_board));
	size_t size = o_kvs + (ch->n_kvs + 1) * sizeof(struct fs_undo_kv);
	char *block = core_zalloc(size);
	struct fs_undo *u = (struct fs_undo *)(void *)block;

	if (!u)
		return NULL;
	u->ctr = *before;
	u->cards = (struct fs_undo_card *)(void *)(block + o_cards);
	u->runs = (struct fs_undo_run *)(void *)(block + o_runs);
	u->boards = (struct fs_undo_board *)(void *)(block + o_boards);
	u->kvs = (struct fs_undo_kv *)(void *)(block + o_kvs);
	return u;
}

/* Retires an object that may still be read by a running snapshot. */
static void retire_card(struct fs *fs, struct fs_card *c)
{
	if (fs->snap_active &&
	    fs_ptrs_reserve(&fs->grave.cards, &fs->grave.cap_cards, fs->grave.n_cards + 1))
		return; /* leaked: freeing it under the snapshot writer would be worse */
	fs_retire_card(fs, c);
}

static void retire_run(struct fs *fs, struct core_run *r)
{
	if (fs->snap_active &&
	    fs_ptrs_reserve(&fs->grave.runs, &fs->grave.cap_runs, fs->grave.n_runs + 1))
		return;
	fs_retire_run(fs, r);
}

static void retire_event(struct fs *fs, struct core_event *e)
{
	if (fs->snap_active &&
	    fs_ptrs_reserve(&fs->grave.events, &fs->grave.cap_events, fs->grave.n_events + 1))
		return;
	fs_retire_event(fs, e);
}

void fs_undo_free(struct fs *fs, struct fs_undo *u)
{
	size_t i;

	if (!u)
		return;
	(void)fs;
	for (i = 0; i < u->n_boards; i++)
		if (!u->boards[i].is_new)
			core_board_release(&u->boards[i].old);
	free(u); /* its arrays live in the same block */
}

/* The line is durable: what the transaction replaced is garbage now. */
static void settle_one(struct fs *fs, struct fs_undo *u)
{
	size_t i;

	for (i = 0; i < u->n_cards; i++) {
		retire_card(fs, u->cards[i].old);
		/* Its deletion is durable: `order` may drop the entry now. */
		if (u->cards[i].deleted)
			u->cards[i].ent->held = false;
	}
	for (i = 0; i < u->n_runs; i++)
		retire_run(fs, u->runs[i].old);
	fs_kv_undo_settle(u);
	if (u->n_events)
		fs->ev_durable = u->ctr.seq + (int64_t)u->n_events;
	fs_undo_free(fs, u);
}

void fs_undo_settle(struct fs *fs, uint64_t synced)
{
	bool any = false;

	while (fs->undo_head < fs->undo_n && fs->undo[fs->undo_head]->seq <= synced) {
		settle_one(fs, fs->undo[fs->undo_head++]);
		any = true;
	}
	if (fs->undo_head == fs->undo_n) {
		fs->undo_head = fs->undo_n = 0;
	} else if (fs->undo_head >= fs->undo_n - fs->undo_head) {
		/* Under steady load the log never empties: slide it down once its settled
		 * prefix outweighs it, so it stays as long as the longest group. */
		memmove(fs->undo, fs->undo + fs->undo_head,
			(fs->undo_n - fs->undo_head) * sizeof(*fs->undo));
		fs->undo_n -= fs->undo_head;
		fs->undo_head = 0;
	}
	if (any)
		fs_events_trim(fs);
}

/* Removes a card the undone transaction created: from the index, `order` and the map. */
static void unlink_new(struct fs *fs, struct fs_card_ent *ent)
{
	size_t lo;

	fs_ids_del(&fs->cards, fs_ent_id(ent)); /* first: the key may be read through the card */
	fs_deps_update(fs, ent, ent->card, NULL);
	retire_card(fs, ent->card);
	ent->card = NULL;
	fs_claimed_update(fs, ent);
	lo = fs_order_lower(fs, ent->ord);
	if (lo < fs->n_order && fs->order[lo] == ent) {
		memmove(fs->order + lo, fs->order + lo + 1,
			(fs->n_order - lo - 1) * sizeof(*fs->order));
		fs->n_order--;
	}
	fs_post_tops_drop(fs); /* a claim-next cache may point at it */
	free(ent);
}

static void undo_card(struct fs *fs, const struct fs_undo_card *uc)
{
	struct fs_card_ent *ent = uc->ent;

	if (!uc->old) {
		unlink_new(fs, ent);
		return;
	}
	if (uc->deleted) {
		/* The transaction deleted it: bring it back (the map had room for it). */
		ent->dead = false;
		ent->held = false;
		fs->n_dead--;
		ent->card = uc->old;
		fs_ids_put(&fs->cards, ent);
		fs_deps_update(fs, ent, NULL, ent->card);
		fs_claimed_update(fs, ent);
		return;
	}
	fs_deps_update(fs, ent, ent->card, uc->old);
	retire_card(fs, ent->card);
	ent->card = uc->old;
	fs_claimed_update(fs, ent);
}

static void undo_one(struct fs *fs, struct fs_undo *u)
{
	size_t i;

	/* The events it appended are the newest ones: pop them. */
	for (i = 0; i < u->n_events && fs->ev_n > fs->ev_head; i++) {
		fs_evboard_pop(fs, fs->ev[fs->ev_n - 1]);
		retire_event(fs, fs->ev[--fs->ev_n]);
	}
	fs_kv_undo_rollback(fs, u);
	for (i = u->n_runs; i-- > 0;) {
		struct core_run *now = u->runs[i].now, *old = u->runs[i].old;

		if (old)
			fs_map_replace(&fs->runs, old->id, old);
		else if (fs_map_del(&fs->runs, now->id))
			fs_runs_index_drop(fs, now);
		fs_attn_update_run(fs, now); /* before it is retired: it names the card */
		retire_run(fs, now);
	}
	for (i = u->n_cards; i-- > 0;)
		undo_card(fs, &u->cards[i]);
	for (i = u->n_boards; i-- > 0;) {
		struct fs_undo_board *ub = &u->boards[i];
		size_t k;

		if (ub->is_new) {
			/* Boards are only ever appended, so the newest is the last one. */
			core_board_release(&fs->boards[--fs->n_boards]);
			continue;
		}
		for (k = 0; k < fs->n_boards; k++) {
			if (strcmp(fs->boards[k].name, ub->old.name) == 0) {
				core_board_release(&fs->boards[k]);
				fs->boards[k] = ub->old;
				ub->is_new = true; /* moved back: fs_undo_free must not release it */
				break;
			}
		}
	}
	fs->ctr = u->ctr;
	/* Nothing of it is referenced any more: the olds are published again. */
	u->n_cards = u->n_runs = 0;
	fs_undo_free(fs, u);
}

void fs_undo_rollback(struct fs *fs, uint64_t synced)
{
	/* While it runs, an index list that empties stays: the transaction undone next may
	 * put a card back into it (fs_post_remove). */
	fs->rolling_back = true;
	while (fs->undo_n > fs->undo_head && fs->undo[fs->undo_n - 1]->seq > synced)
		undo_one(fs, fs->undo[--fs->undo_n]);
	fs->rolling_back = false;
	if (fs->undo_head == fs->undo_n)
		fs->undo_head = fs->undo_n = 0;
}
