/* The FS twin's read barrier (DESIGN §16: a read never shows a write that is not yet durable).
 *
 * A write is applied in memory as soon as its record is appended to the journal's buffer, and
 * is durable only once its group's fdatasync returns; a crash in between takes it back. So
 * whatever a caller is shown that it did not write itself -- a card, a list, a run, an
 * attention lane, a refusal or a no-op decided on that state, claim-next's "nothing" -- is
 * held until every line it may come from is durable. Under the state lock, fs_read_mark notes
 * the last line applied so far (every line a reader could see; for the board configs, only
 * the last line that changed a board); after the lock is dropped fs_read_settle waits for it:
 *   - with a store_ack bound to the thread (the HTTP front end), in the ack: the answer is
 *     built, then held by the same deferred acknowledgement as a write's, and the thread
 *     serves other connections meanwhile;
 *   - else on the calling thread (fs_journal_wait: it may be the group's flusher itself).
 * If the group fails instead, the caller gets STORE_UNAVAILABLE (503), never the state that
 * was rolled back. The events tail needs none of this: it lists only events up to
 * fs->ev_visible, published once their lines are durable (fs_events_publish).
 *
 * Card reads need no wait at all: a card by id (GET /v1/cards/{id}, the hot read) and card
 * lists show each card as of its last durable version (fs_card_durable, fs_ent_durable): the
 * undo entries of the lines not yet durable hold every version they replaced, so the first of
 * them that touched a card holds the version a crash would leave; the card's entry keeps the
 * low bits of its last line, so a card not being written costs one compare. A list walked by
 * a posting list (the cards as they are now) also offers the entries those lines touched
 * (fs_pending_ents), as their durable versions. Showing it is linearizable: the writes not yet
 * durable are not acknowledged either, and take effect, for every reader, at their sync. A
 * request that wrote (its ack owes lines) reads its own writes instead, with the barrier.
 *
 * A mark on a line not yet durable counts in n_inflight until it is settled, as a writer's
 * line does: a recovery after a failed sync waits for it, so the line numbers of the failed
 * epoch (reused after the rollback) cannot be mistaken for durable ones by a late reader.
 */
#include "store/fs/fs.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_undo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

uint64_t fs_read_mark(struct fs *fs, uint64_t upto)
{
	uint64_t need;

	pthread_mutex_lock(&fs->jmu);
	need = upto < fs->appended ? upto : fs->appended;
	if (need <= fs->synced)
		need = 0; /* all of it durable: the common case, nothing owed */
	else
		fs->n_inflight++; /* settled by fs_read_settle (or the acker, for an ack) */
	pthread_mutex_unlock(&fs->jmu);
	return need;
}

enum core_rc fs_read_settle(struct fs *fs, uint64_t need, bool here)
{
	struct store_ack *ack;

	if (!need)
		return CORE_OK;
	ack = here ? NULL : store_ack_current();
	if (ack && (!ack->st || ack->st == &fs->base)) {
		/* The answer waits with the writes of the same request, if any: the acker tells
		 * the ack OK once `seq` is durable, STORE_UNAVAILABLE if it was rolled back, and
		 * settles `lines` (this mark among them) either way. */
		ack->st = &fs->base;
		if (need > ack->seq)
			ack->seq = need;
		ack->lines++;
		return CORE_OK;
	}
	return fs_journal_wait(fs, need);
}

enum core_rc fs_read_end(struct fs *fs, uint64_t need, bool here, enum core_rc rc)
{
	enum core_rc w = fs_read_settle(fs, need, here);

	return w != CORE_OK ? w : rc;
}

void fs_durable_begin(struct fs *fs, struct fs_durable *d)
{
	d->appended = fs->appended; /* moves only under the write lock */
	d->pending = fs->undo_head != fs->undo_n;
	d->synced = d->pending ? __atomic_load_n(&fs->synced, __ATOMIC_ACQUIRE) : d->appended;
}

/* The entry's stamp, the low 32 bits of the last line that changed it, names a line not
 * durable iff it is within appended - synced of appended. A stamp left by a rolled-back line
 * (or 2^32 lines old) may look pending: then the walk of the undo entries decides. */
static bool stamp_pending(const struct fs_durable *d, const struct fs_card_ent *e)
{
	return (uint32_t)((uint32_t)d->appended - e->line) < d->appended - d->synced;
}

/* The first line not durable that touched entry e (oldest first) replaced its last durable
 * version: that undo card, or NULL when none did. */
static const struct fs_undo_card *first_pending(const struct fs *fs, const struct fs_durable *d,
						const struct fs_card_ent *e, const char *id)
{
	size_t i, j;

	for (i = fs->undo_head; i < fs->undo_n; i++) {
		const struct fs_undo *u = fs->undo[i];

		if (u->seq <= d->synced)
			continue; /* durable, not settled yet */
		for (j = 0; j < u->n_cards; j++) {
			const struct fs_undo_card *uc = &u->cards[j];

			/* by id too (when asked): a card deleted (its entry dead) and made again
			 * since has a new entry; live entries never share an id */
			if ((e && uc->ent == e) ||
			    (id && uc->ent->dead && uc->old && strcmp(uc->old->id, id) == 0))
				return uc;
		}
	}
	return NULL;
}

const struct fs_card *fs_ent_durable(struct fs *fs, const struct fs_durable *d,
				     const struct fs_card_ent *e)
{
	const struct fs_undo_card *uc;

	if (!d->pending || (!e->dead && !stamp_pending(d, e)))
		return e->dead ? NULL : e->card;
	if (e->dead && !e->held)
		return NULL; /* deleted, and no undo entry holds it: durably */
	uc = first_pending(fs, d, e, NULL);
	return uc ? uc->old : e->dead ? NULL : e->card;
}

const struct fs_card *fs_card_durable(struct fs *fs, const char *id)
{
	const struct fs_card_ent *cur = fs_card_find(fs, id);
	const struct fs_undo_card *uc;
	struct fs_durable d;

	fs_durable_begin(fs, &d);
	/* A card found whose last change is durable is durable as it stands: a delete of an
	 * earlier card of that id came before its creation, durable too. */
	if (!d.pending || (cur && !stamp_pending(&d, cur)))
		return cur ? cur->card : NULL;
	uc = first_pending(fs, &d, cur, id);
	return uc ? uc->old : cur ? cur->card : NULL;
}

static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(const void *const *)a, y = (uintptr_t)*(const void *const *)b;

	return (x > y) - (x < y);
}

enum core_rc fs_pending_ents(struct fs *fs, const struct fs_durable *d,
			     const struct fs_card_ent ***out, size_t *n)
{
	const struct fs_card_ent **v;
	size_t i, j, cap = 0, k = 0;

	*out = NULL;
	*n = 0;
	if (!d->pending)
		return CORE_OK;
	for (i = fs->undo_head; i < fs->undo_n; i++)
		if (fs->undo[i]->seq > d->synced)
			cap += fs->undo[i]->n_cards;
	if (!cap)
		return CORE_OK;
	v = malloc(cap * sizeof(*v));
	if (!v)
		return CORE_ERR_NOMEM;
	for (i = fs->undo_head; i < fs->undo_n; i++)
		for (j = 0; fs->undo[i]->seq > d->synced && j < fs->undo[i]->n_cards; j++)
			v[k++] = fs->undo[i]->cards[j].ent;
	qsort(v, k, sizeof(*v), ptr_cmp);
	for (i = j = 0; i < k; i++) /* distinct */
		if (!j || v[j - 1] != v[i])
			v[j++] = v[i];
	*out = v;
	*n = j;
	return CORE_OK;
}

bool fs_pending_has(const struct fs_card_ent *const *v, size_t n, const struct fs_card_ent *e)
{
	return n && bsearch(&e, v, n, sizeof(*v), ptr_cmp) != NULL;
}
