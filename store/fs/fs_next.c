/* Claim-next on the FS twin (DESIGN §12, §17): the pick among the posting lists of the asked
 * columns that have room or the rarest asked label, the per-state cache of the best unclaimed
 * cards (struct fs_post's top) that spares a drain a walk per claim, and beside it the heap
 * of the scheduled ones (promoted into the cache when due; the wake time of an empty answer).
 * The claim itself is fs_claims.c's (fs_claim_begin .. fs_claim_end, the same transaction). */
#include "store/fs/fs.h"
#include "store/fs/fs_cards.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_policy.h"
#include "store/fs/fs_txn.h"

#include <stdlib.h>
#include <string.h>

/* ---- claim-next (DESIGN §12) ----
 * The candidates come from the posting lists, never from a walk of the board: the lists of
 * the asked columns, or the list of the rarest asked label when that one is shorter. The
 * whole pick and the claim run under the write lock, so two workers never get one card. */

/* core_pick_before over published cards. */
static bool pick_before(const struct fs_card *a, const struct fs_card *b)
{
	return core_pick_keys_before(a->priority, a->created_at, a->id, b->priority, b->created_at,
				     b->id);
}

static bool pick_fits(const struct core_pick *pk, const struct fs_card *c)
{
	struct core_card v;

	return core_pick_fits(pk, fs_card_view(c, &v));
}

static int64_t not_before_of(const struct fs_card *c)
{
	return fs_card_more_of(c)->not_before;
}

/* Would c fit but for its schedule (DESIGN §17: what claim-next's wake time is made of)? */
static bool fits_later(const struct core_pick *pk, const struct fs_card *c)
{
	struct core_pick later = *pk;

	later.now_ms = INT64_MAX;
	return pick_fits(&later, c);
}

/* Folds the members of list p that fit into *best (core_pick_before decides); while none
 * did, *wake keeps the earliest schedule of a member that would fit but for it. */
static void pick_from(const struct fs_post *p, const struct core_pick *pk,
		      const struct fs_card **best, int64_t *wake)
{
	size_t i;

	for (i = 0; p && i < p->n; i++) {
		const struct fs_card *c = p->v[i]->card;
		int64_t nb;

		/* The cheap tests first: most members are held, or lose to the best so far. */
		if (fs_card_claimed(c) || (*best && !pick_before(c, *best)))
			continue;
		if (pick_fits(pk, c)) {
			*best = c;
		} else if (!*best && (nb = not_before_of(c)) > pk->now_ms &&
			   (!*wake || nb < *wake) && fits_later(pk, c)) {
			*wake = nb;
		}
	}
}

/* ---- the per-state cache (struct fs_post's top): a drain of N ready cards walks the ready
 * list once per top_cap claims instead of once per claim ----
 *
 * The cache holds about a sixteenth of the list (TOP_MIN..TOP_MAX), so a drain walks each
 * member about sixteen times in all whatever the list's length (a fixed 128 walked a list of
 * 10 000 once per 128 claims: 5 % of the server's CPU in the drain). The walk keeps the best
 * in a heap (worst at the root), then sorts them. */

#define TOP_MIN 128
#define TOP_MAX 4096

static size_t top_cap(size_t n)
{
	size_t k = n / 16;

	return k < TOP_MIN ? TOP_MIN : k > TOP_MAX ? TOP_MAX : k;
}

/* heap order: a parent ranks after (or with) its children, so the root is the worst kept */
static bool heap_above(const struct fs_card_ent *a, const struct fs_card_ent *b)
{
	return pick_before(b->card, a->card);
}

static void heap_down(struct fs_card_ent **h, size_t n, size_t i)
{
	struct fs_card_ent *x = h[i];
	size_t c;

	while ((c = 2 * i + 1) < n) {
		if (c + 1 < n && heap_above(h[c + 1], h[c]))
			c++;
		if (!heap_above(h[c], x))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

static void heap_up(struct fs_card_ent **h, size_t i)
{
	struct fs_card_ent *x = h[i];

	while (i && heap_above(x, h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = x;
}

/* ---- the scheduled heap (struct fs_post's sched, DESIGN §17): a min-heap by not_before of
 * the unclaimed members scheduled after the cache was built ---- */

static void sched_up(struct fs_sched *h, size_t i)
{
	struct fs_sched x = h[i];

	while (i && x.at < h[(i - 1) / 2].at) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = x;
}

static void sched_down(struct fs_sched *h, size_t n, size_t i)
{
	struct fs_sched x = h[i];
	size_t c;

	while ((c = 2 * i + 1) < n) {
		if (c + 1 < n && h[c + 1].at < h[c].at)
			c++;
		if (h[c].at >= x.at)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

static bool sched_push(struct fs_post *p, struct fs_card_ent *ent, int64_t at)
{
	if (p->sched_n == p->sched_cap) {
		size_t cap = p->sched_cap ? 2 * p->sched_cap : 64;
		struct fs_sched *ns = realloc(p->sched, cap * sizeof(*ns));

		if (!ns)
			return false;
		p->sched = ns;
		p->sched_cap = cap;
	}
	p->sched[p->sched_n] = (struct fs_sched){ent, at};
	sched_up(p->sched, p->sched_n++);
	return true;
}

static void sched_pop(struct fs_post *p)
{
	p->sched[0] = p->sched[--p->sched_n];
	if (p->sched_n)
		sched_down(p->sched, p->sched_n, 0);
}

/* Entry s still stands for an unclaimed member scheduled at s.at (cache valid: its entry is
 * alive, the card NULL when deleted). */
static const struct fs_card *sched_live(const struct fs_post *p, const struct fs_sched *s)
{
	const struct fs_card *c = s->ent->card;

	return c && !fs_card_claimed(c) && not_before_of(c) == s->at &&
			       strcmp(c->state, p->key) == 0
		       ? c
		       : NULL;
}

void fs_post_sched_offer(struct fs_post *p, struct fs_card_ent *ent, int64_t not_before)
{
	if (!p->top_valid)
		return; /* the next pick walks the list anyway */
	/* Entries left by cards claimed, moved or rescheduled since are dropped only when they
	 * reach the top: past twice the list, the next pick rebuilds instead. */
	if (p->sched_n > 2 * p->n + 1024 || !sched_push(p, ent, not_before))
		p->top_valid = false;
}

/* The due members of p's heap go to its cache (fs_post_top_offer: in rank order, or left
 * for the next walk); entries that no longer stand are dropped. Afterwards the top, if any,
 * is a live member scheduled after now. Many due at once (a batch scheduled for the same
 * time): past SCHED_PROMOTE of them the cache is dropped instead, and the next pick's one walk
 * sorts them all (each offer may shift the whole cache). */
#define SCHED_PROMOTE 256
static void sched_promote(struct fs_post *p, int64_t now)
{
	const struct fs_card *c;
	size_t offered = 0;

	while (p->top_valid && p->sched_n) {
		struct fs_sched s = p->sched[0];

		c = sched_live(p, &s);
		if (c && s.at > now)
			break;
		if (c && offered == SCHED_PROMOTE) {
			p->top_valid = false;
			break;
		}
		sched_pop(p);
		if (c) {
			fs_post_top_offer(p, s.ent, c);
			offered++;
		}
	}
}

/* The earliest schedule in p's heap of a member that would fit but for it (0: none): a
 * best-first walk of the heap from its top, at most SCHED_LOOK entries (then the earliest
 * time left unlooked-at, which only wakes a waiter early). */
#define SCHED_LOOK 64
static int64_t sched_wake(const struct fs_post *p, const struct core_pick *pk)
{
	size_t q[2 * SCHED_LOOK + 2], nq = 0, looked, i, j, best;
	const struct fs_card *c;

	if (!p->top_valid || !p->sched_n)
		return 0;
	q[nq++] = 0;
	for (looked = 0; nq; looked++) {
		for (best = 0, j = 1; j < nq; j++)
			if (p->sched[q[j]].at < p->sched[q[best]].at)
				best = j;
		i = q[best];
		if (looked == SCHED_LOOK)
			return p->sched[i].at;
		q[best] = q[--nq];
		c = sched_live(p, &p->sched[i]);
		if (c && c->more->not_before > pk->now_ms && fits_later(pk, c))
			return p->sched[i].at;
		if (2 * i + 1 < p->sched_n)
			q[nq++] = 2 * i + 1;
		if (2 * i + 2 < p->sched_n)
			q[nq++] = 2 * i + 2;
	}
	return 0;
}

/* Rebuilds p's cache from one walk of the list, the members scheduled after now into its
 * heap; false when out of memory. */
static bool top_build(struct fs_post *p, int64_t now)
{
	size_t i, unclaimed = 0, k = top_cap(p->n), n = 0;
	struct fs_card_ent *tmp;

	if (k > p->top_capn) {
		struct fs_card_ent **nt = realloc(p->top, k * sizeof(*p->top));

		if (!nt)
			return false;
		p->top = nt;
		p->top_capn = k;
	}
	k = p->top_capn;
	p->top_n = p->top_pos = 0;
	p->sched_n = 0;
	for (i = 0; i < p->n; i++) {
		struct fs_card_ent *ent = p->v[i];

		if (fs_card_claimed(ent->card))
			continue;
		if (not_before_of(ent->card) > now) {
			if (!sched_push(p, ent, not_before_of(ent->card)))
				return false;
			continue;
		}
		unclaimed++;
		if (n < k) {
			p->top[n++] = ent;
			heap_up(p->top, n - 1);
		} else if (pick_before(ent->card, p->top[0]->card)) {
			p->top[0] = ent;
			heap_down(p->top, n, 0);
		}
	}
	/* heap sort: the worst goes to the end each time, leaving them best first */
	for (i = n; i > 1; i--) {
		tmp = p->top[0];
		p->top[0] = p->top[i - 1];
		p->top[i - 1] = tmp;
		heap_down(p->top, i - 1, 0);
	}
	p->top_n = n;
	p->top_all = unclaimed <= k;
	p->top_valid = true;
	return true;
}

/* The cache's invariant: every unclaimed member not in top[top_pos..top_n) ranks after
 * top[top_n - 1], or top_all and there is none. Members claimed, moved away or re-ranked
 * since the walk keep their place (re-ranking drops the cache): the order of the entries is
 * the order of their ranks, so a newcomer's place is found by bisection. */
/* Whether cached member i was deleted since (it moved away first: deleting a card drops only
 * the cache of the state it was deleted from). It has no card, hence no rank to place a
 * newcomer against: the cache is dropped, and the next pick walks the list. */
static bool top_dead(struct fs_post *p, size_t i)
{
	if (p->top[i]->card)
		return false;
	p->top_valid = false;
	return true;
}

void fs_post_top_offer(struct fs_post *p, struct fs_card_ent *ent, const struct fs_card *c)
{
	size_t lo = p->top_pos, hi = p->top_n, mid;

	if (!p->top_valid || (lo == hi && !p->top_all))
		return; /* none, or spent: the next pick walks the list anyway */
	if (!p->top_all && top_dead(p, hi - 1))
		return;
	if (!p->top_all && !pick_before(c, p->top[hi - 1]->card))
		return; /* ranks after the last cached: the next walk finds it */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (top_dead(p, mid))
			return;
		if (pick_before(p->top[mid]->card, c))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == p->top_pos && p->top_pos > 0) {
		p->top[--p->top_pos] = ent; /* ahead of every one left: a spent slot takes it */
		return;
	}
	if (p->top_n == p->top_capn) {
		p->top_all = false; /* one unclaimed member now lies beyond the cache */
		if (lo == p->top_n)
			return;
		p->top_n--; /* the worst goes; it ranks after the new last */
	}
	memmove(&p->top[lo + 1], &p->top[lo], (p->top_n - lo) * sizeof(*p->top));
	p->top[lo] = ent;
	p->top_n++;
}

/* A member still in the list's state, unclaimed and not scheduled after now (what the cache
 * was built from; a member rescheduled since waits in the heap, which brings it back). */
static const struct fs_card *top_live(const struct fs_post *p, size_t i, int64_t now)
{
	const struct fs_card *c = p->top[i]->card;

	return c && !fs_card_claimed(c) && not_before_of(c) <= now &&
			       strcmp(c->state, p->key) == 0
		       ? c
		       : NULL;
}

/* The best fitting card of state list p through its cache. *known false: the cache cannot
 * tell (out of memory, or every cached member failed the fit and more lie beyond it): walk
 * the list instead. */
static const struct fs_card *top_pick(struct fs_post *p, const struct core_pick *pk,
				      bool *known)
{
	const struct fs_card *c;
	size_t i;

	*known = true;
	if (p->top_valid)
		sched_promote(p, pk->now_ms);
	if ((!p->top_valid || (p->top_pos == p->top_n && !p->top_all)) &&
	    !top_build(p, pk->now_ms)) {
		p->top_valid = false;
		*known = false;
		return NULL;
	}
	while (p->top_pos < p->top_n && !top_live(p, p->top_pos, pk->now_ms))
		p->top_pos++; /* claimed or gone since: for good, until the cache is dropped */
	for (i = p->top_pos; i < p->top_n; i++)
		if ((c = top_live(p, i, pk->now_ms)) && pick_fits(pk, c))
			return c; /* a fit can fail and pass later (blockers): not consumed */
	*known = p->top_all;
	return NULL;
}

/* DESIGN §17: the asked columns (cols) that have room for one more claim, into *room; none
 * when the board is at its max_claims. A full column is skipped without a look at its cards. */
static enum core_rc columns_with_room(const struct fs *fs, const struct core_board *b,
				      const struct core_strv *cols, struct core_strv *room)
{
	enum core_rc rc = CORE_OK;
	size_t i;

	if (b->max_claims > 0 && fs_claimcount_get(fs, b->name, NULL) >= b->max_claims)
		return CORE_OK;
	for (i = 0; rc == CORE_OK && i < cols->n; i++)
		if (core_column_has_room(b, cols->v[i],
					 fs_claimcount_get(fs, b->name, cols->v[i])))
			rc = core_strv_push(room, cols->v[i]);
	return rc;
}

enum core_rc fs_card_claim_next(struct store *st, const struct store_claim_next *in,
				const struct store_actor *actor, struct store_claim_result *out)
{
	struct fs_txn t;
	struct core_strv eligible = {0}, room = {0};
	const struct core_strv *cols = in->columns;
	const struct fs_post *by_label = NULL, *p;
	const struct fs_card *best = NULL;
	const struct core_board *b;
	struct core_card_lookup lk;
	struct core_pick pk;
	struct core_card *c = NULL;
	int64_t wake = 0, w;
	size_t i, n_states = 0;
	bool fresh = false;
	enum core_rc rc = CORE_OK;

	fs_txn_begin(fs_of(st), &t, actor);
	t.settle_here = true; /* "nothing" may park the request next: not in its ack */
	lk = fs_txn_lookup(&t);
	b = fs_board_find(t.fs, in->board);
	if (!b) {
		rc = CORE_ERR_NOT_FOUND;
		goto out;
	}
	/* Not api/'s check again: that one reads a copy of the board before this transaction (a
	 * board PUT may land in between) and a woken long-poll skips it; this one holds the lock,
	 * and store.h's contract (TRANSITION_REJECTED) is the store's own. */
	if ((rc = core_pick_check(b, cols, NULL, 0)) != CORE_OK)
		goto out;
	if (!cols || !cols->n) {
		for (i = 0; rc == CORE_OK && i < b->n_cols; i++)
			if (b->cols[i].eligible)
				rc = core_strv_push(&eligible, b->cols[i].name);
		cols = &eligible;
	}
	/* Only the columns with room, under the write lock: the counts cannot move before the
	 * claim below lands (DESIGN §17). None: nothing, and no wake time. */
	if (rc == CORE_OK)
		rc = columns_with_room(t.fs, b, cols, &room);
	if (rc != CORE_OK || !room.n)
		goto out;
	cols = &room;
	pk = (struct core_pick){.board = b, .now_ms = t.now, .columns = cols, .labels = in->labels,
				.lk = &lk};
	for (i = 0; i < cols->n; i++)
		if ((p = fs_post_state(t.fs, cols->v[i])))
			n_states += p->n;
	/* A label list holds every state's cards, the column lists only theirs: the shorter. */
	for (i = 0; in->labels && i < in->labels->n; i++) {
		p = fs_post_label(t.fs, in->labels->v[i]);
		if (!p) {
			n_states = 0; /* nobody carries it: nothing fits */
			by_label = NULL;
			cols = NULL;
			break;
		}
		if ((!by_label || p->n < by_label->n) && p->n < n_states)
			by_label = p;
	}
	if (by_label) {
		pick_from(by_label, &pk, &best, &wake);
	} else {
		for (i = 0; cols && i < cols->n; i++) {
			struct fs_post *sp = fs_map_get(&t.fs->post_states, cols->v[i]);
			const struct fs_card *head = NULL;
			bool known = false;

			if (!sp)
				continue;
			if (!in->labels || !in->labels->n)
				head = top_pick(sp, &pk, &known);
			if (!known) {
				pick_from(sp, &pk, &best, &wake);
				continue;
			}
			if (head && (!best || pick_before(head, best)))
				best = head;
		}
	}
	if (!best) {
		/* Nothing to take: when the first scheduled card that would fit is due. The
		 * columns walked above told theirs; the cached ones tell it from their heap. */
		for (i = 0; cols && i < cols->n; i++) {
			const struct fs_post *sp = fs_post_state(t.fs, cols->v[i]);

			if (sp && (w = sched_wake(sp, &pk)) && (!wake || w < wake))
				wake = w;
		}
		out->wake_at = wake;
		goto out; /* nothing available: OK with no card */
	}
	rc = fs_txn_card(&t, best->id, &c);
	if (rc == CORE_OK)
		rc = core_claim_acquire(c, b, in->marker, in->holder, in->lease_ms, t.now, 0,
					&fresh);
	if (rc == CORE_OK)
		rc = fs_txn_event_text(&t, CORE_EV_CARD_CLAIMED, c->board, c->id, NULL,
				       fs_claim_token_text(in->marker, c));
	rc = fs_claim_end(&t, rc, c, &out->card);
	if (rc == CORE_OK) {
		out->fresh = fresh;
		out->token.marker = out->card->claim.marker;
		out->token.epoch = out->card->claim_epoch;
	}
	core_strv_release(&eligible);
	core_strv_release(&room);
	return rc;
out:
	core_strv_release(&eligible);
	core_strv_release(&room);
	return fs_txn_end(&t, rc);
}
