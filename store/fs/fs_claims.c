/* Claims on the FS twin (DESIGN §3, §6; ADR-096 §1-§3, §6-§8): claim, renew, release, the
 * fenced owned writes, the reaper's listings, TRANSFER and exact release, and the legacy
 * same-host sweep. The epoch is a counter here (epoch_floor 0). Every fenced write checks the
 * fence before touching anything, and a refused write leaves no copy behind to journal. */
#include "store/fs/fs.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Card `id` in an open transaction (its private copy) with its board. */
static enum core_rc card_in(struct fs_txn *t, const char *id, struct core_card **c,
			    const struct core_board **b)
{
	enum core_rc rc;

	*b = NULL;
	rc = fs_txn_card(t, id, c);
	if (rc == CORE_OK) {
		*b = fs_board_find(t->fs, (*c)->board);
		if (!*b)
			rc = CORE_ERR_INTERNAL;
	}
	return rc;
}

/* A transaction over card `id` with its board; the usual head of every op below. */
static enum core_rc begin_card(struct store *st, struct fs_txn *t, const char *id,
			       const struct store_actor *actor, struct core_card **c,
			       const struct core_board **b)
{
	fs_txn_begin(fs_of(st), t, actor);
	return card_in(t, id, c, b);
}

static enum core_rc end_card(struct fs_txn *t, enum core_rc rc, const struct core_card *c,
			     struct core_card **out)
{
	if (rc == CORE_OK && out)
		rc = fs_txn_answer(t, c, out);
	rc = fs_txn_end(t, rc);
	if (rc != CORE_OK && out && *out) {
		core_card_free(*out);
		*out = NULL;
	}
	return rc;
}

/* The claim's token as an event payload, {"marker": .., "epoch": n or null}, written as text
 * (json_dumps of the json_pack tree it was; NULL on OOM). */
static char *token_text(const char *marker, const struct core_card *c)
{
	const struct store_json_member m[] = {
		{"marker", STORE_JSON_STR, marker, 0},
		{"epoch", c->has_epoch ? STORE_JSON_INT : STORE_JSON_NULL, NULL, c->claim_epoch},
	};
	size_t len;

	return store_json_members_text(m, 2, &len);
}

enum core_rc fs_card_claim(struct store *st, const char *id, const char *marker, int64_t lease_ms,
			   const struct store_actor *actor, struct store_claim_result *out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	bool fresh = false;
	enum core_rc rc;

	struct core_card_lookup lk;

	rc = begin_card(st, &t, id, actor, &c, &b);
	/* A fresh hold of a card still waiting on its blockers would let it be worked and
	 * filed done before them (DESIGN §11). */
	if (rc == CORE_OK && !c->claim.present && !core_board_is_terminal(b, c->state)) {
		lk = fs_txn_lookup(&t);
		if (!core_blockers_all_done(b, &c->blockers, &lk))
			rc = CORE_ERR_BLOCKERS_PENDING;
	}
	if (rc == CORE_OK)
		rc = core_claim_acquire(c, b, marker, store_actor_holder(actor), lease_ms, t.now,
					0, &fresh);
	/* An idempotent re-claim is renewal-like: no event. */
	if (rc == CORE_OK && fresh)
		rc = fs_txn_event_text(&t, CORE_EV_CARD_CLAIMED, c->board, c->id, NULL,
				       token_text(marker, c));
	rc = end_card(&t, rc, c, &out->card);
	if (rc == CORE_OK) {
		out->fresh = fresh;
		out->token.marker = out->card->claim.marker;
		out->token.epoch = out->card->claim_epoch;
	}
	return rc;
}

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

/* Folds the members of list p that fit into *best (core_pick_before decides). */
static void pick_from(const struct fs_post *p, const struct core_pick *pk,
		      const struct fs_card **best)
{
	size_t i;

	for (i = 0; p && i < p->n; i++) {
		const struct fs_card *c = p->v[i]->card;

		/* The cheap tests first: most members are held, or lose to the best so far. */
		if (fs_card_claimed(c) || (*best && !pick_before(c, *best)))
			continue;
		if (pick_fits(pk, c))
			*best = c;
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

/* Rebuilds p's cache from one walk of the list; false when out of memory. */
static bool top_build(struct fs_post *p)
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
	for (i = 0; i < p->n; i++) {
		struct fs_card_ent *ent = p->v[i];

		if (fs_card_claimed(ent->card))
			continue;
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

/* A member still in the list's state and unclaimed (what the cache was built from). */
static const struct fs_card *top_live(const struct fs_post *p, size_t i)
{
	const struct fs_card *c = p->top[i]->card;

	return c && !fs_card_claimed(c) && strcmp(c->state, p->key) == 0 ? c : NULL;
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
	if ((!p->top_valid || (p->top_pos == p->top_n && !p->top_all)) && !top_build(p)) {
		*known = false;
		return NULL;
	}
	while (p->top_pos < p->top_n && !top_live(p, p->top_pos))
		p->top_pos++; /* claimed or gone since: for good, until the cache is dropped */
	for (i = p->top_pos; i < p->top_n; i++)
		if ((c = top_live(p, i)) && pick_fits(pk, c))
			return c; /* a fit can fail and pass later (blockers): not consumed */
	*known = p->top_all;
	return NULL;
}

enum core_rc fs_card_claim_next(struct store *st, const struct store_claim_next *in,
				const struct store_actor *actor, struct store_claim_result *out)
{
	struct fs_txn t;
	struct core_strv eligible = {0};
	const struct core_strv *cols = in->columns;
	const struct fs_post *by_label = NULL, *p;
	const struct fs_card *best = NULL;
	const struct core_board *b;
	struct core_card_lookup lk;
	struct core_pick pk;
	struct core_card *c = NULL;
	size_t i, n_states = 0;
	bool fresh = false;
	enum core_rc rc = CORE_OK;

	fs_txn_begin(fs_of(st), &t, actor);
	lk = fs_txn_lookup(&t);
	b = fs_board_find(t.fs, in->board);
	if (!b) {
		rc = CORE_ERR_NOT_FOUND;
		goto out;
	}
	if ((rc = core_pick_check(b, cols, NULL, 0)) != CORE_OK)
		goto out;
	if (!cols || !cols->n) {
		for (i = 0; rc == CORE_OK && i < b->n_cols; i++)
			if (b->cols[i].eligible)
				rc = core_strv_push(&eligible, b->cols[i].name);
		cols = &eligible;
	}
	pk = (struct core_pick){.board = b, .columns = cols, .labels = in->labels, .lk = &lk};
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
		pick_from(by_label, &pk, &best);
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
				pick_from(sp, &pk, &best);
				continue;
			}
			if (head && (!best || pick_before(head, best)))
				best = head;
		}
	}
	if (rc != CORE_OK || !best)
		goto out; /* nothing available: OK with no card */
	rc = fs_txn_card(&t, best->id, &c);
	if (rc == CORE_OK)
		rc = core_claim_acquire(c, b, in->marker, in->holder, in->lease_ms, t.now, 0,
					&fresh);
	if (rc == CORE_OK)
		rc = fs_txn_event_text(&t, CORE_EV_CARD_CLAIMED, c->board, c->id, NULL,
				       token_text(in->marker, c));
	rc = end_card(&t, rc, c, &out->card);
	if (rc == CORE_OK) {
		out->fresh = fresh;
		out->token.marker = out->card->claim.marker;
		out->token.epoch = out->card->claim_epoch;
	}
	core_strv_release(&eligible);
	return rc;
out:
	core_strv_release(&eligible);
	return fs_txn_end(&t, rc);
}

enum core_rc fs_card_renew(struct store *st, const char *id, const struct core_token *tok,
			   int64_t lease_ms, const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = begin_card(st, &t, id, actor, &c, &b);
	if (rc == CORE_OK)
		rc = core_claim_renew(c, tok, lease_ms, t.now);
	if (rc == CORE_ERR_CLAIM_CONFLICT)
		store_fence_refused(st, c, tok);
	return end_card(&t, rc, c, out);
}

enum core_rc fs_release_with_event(struct fs_txn *t, struct core_card *c, const char *reason)
{
	char *payload = token_text(c->claim.marker, c);

	if (!payload)
		return CORE_ERR_NOMEM;
	core_claim_clear(c);
	c->updated_at = t->now;
	return fs_txn_event_text(t, CORE_EV_CARD_RELEASED, c->board, c->id, reason, payload);
}

enum core_rc fs_card_release(struct store *st, const char *id, const struct core_token *tok,
			     const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = begin_card(st, &t, id, actor, &c, &b);
	if (rc == CORE_OK && (rc = core_fence_check(c, tok)) != CORE_OK)
		store_fence_refused(st, c, tok);
	if (rc == CORE_OK)
		rc = fs_release_with_event(&t, c, NULL);
	return end_card(&t, rc, c, out);
}

static json_t *gave_up_payload(const struct core_gave_up *g)
{
	return json_pack("{s:o}", "gave_up", store_gave_up_to_json(g));
}

/* Sets or clears gave_up (core_card_gave_up_set) and appends its event. */
static enum core_rc gave_up_write(struct fs_txn *t, struct core_card *c,
				  const struct core_gave_up *g, const char *reason)
{
	enum core_rc rc = core_card_gave_up_set(c, g, t->now);

	if (rc != CORE_OK)
		return rc;
	return fs_txn_event(t, CORE_EV_CARD_GAVE_UP, c->board, c->id, reason,
			    gave_up_payload(&c->gave_up));
}

/* The owned write w on card c (its fence already passed) in transaction t. */
static enum core_rc owned_write_in(struct fs_txn *t, struct core_card *c,
				   const struct core_board *b, const struct store_owned_write *w)
{
	bool moved = false;
	enum core_rc rc;

	switch (w->kind) {
	case STORE_OWNED_STATE:
		rc = core_transition_check(b, c->state, w->state, CORE_MOVER_OWNER);
		if (rc == CORE_OK)
			rc = fs_state_move_only(t, c, w->state, w->reason, NULL, &moved);
		break;
	case STORE_OWNED_LAST_RUN:
		rc = w->run_id ? core_last_run_check(fs_txn_run_peek(t, w->run_id), c->id,
						     &w->token)
			       : CORE_OK;
		if (rc == CORE_OK)
			rc = core_str_set(&c->last_run_id, w->run_id);
		c->updated_at = t->now;
		if (rc == CORE_OK)
			rc = fs_txn_event(t, CORE_EV_CARD_LAST_RUN, c->board, c->id, NULL,
					  json_pack("{so}", "run_id",
						    w->run_id ? json_string(w->run_id)
							      : json_null()));
		break;
	case STORE_OWNED_AWAITING_INPUT:
		c->awaiting_input = w->awaiting_input;
		c->updated_at = t->now;
		rc = fs_txn_event(t, CORE_EV_CARD_UPDATED, c->board, c->id, NULL,
				  json_pack("{s[s]}", "fields", "awaiting_input"));
		break;
	case STORE_OWNED_GAVE_UP:
		rc = core_gave_up_check(b, w->gave_up);
		if (rc == CORE_OK)
			rc = gave_up_write(t, c, w->gave_up, w->event_reason);
		break;
	case STORE_OWNED_COMMENT:
		rc = fs_comment_write(t, c, w->comment);
		break;
	default:
		rc = CORE_ERR_BAD_REQUEST;
	}
	/* The token passed the fence and the write kept the epoch: the release is as fenced as
	 * the write, and shares its line (the reaper's file-and-release). */
	if (rc == CORE_OK && w->release)
		rc = fs_release_with_event(t, c, w->event_reason);
	/* The dependents' promotions after the card's own events (its move, its release). */
	if (rc == CORE_OK && moved)
		rc = fs_state_cascade(t, b, c, w->state, w->reason);
	return rc;
}

enum core_rc fs_card_owned_write(struct store *st, const char *id,
				 const struct store_owned_write *w, const struct store_actor *actor,
				 struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = begin_card(st, &t, id, actor, &c, &b);
	/* The fence first, for every kind: a stale token changes nothing at all. */
	if (rc == CORE_OK && (rc = core_fence_check(c, &w->token)) != CORE_OK)
		store_fence_refused(st, c, &w->token);
	if (rc == CORE_OK)
		rc = owned_write_in(&t, c, b, w);
	return end_card(&t, rc, c, out);
}

enum core_rc fs_card_revoke(struct store *st, const char *id, const struct store_actor *actor,
			    struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = begin_card(st, &t, id, actor, &c, &b);
	if (rc == CORE_OK && c->claim.present)
		rc = fs_release_with_event(&t, c, "operator_revoke");
	return end_card(&t, rc, c, out);
}

/* ---- reaper support ---- */

/* Abandoned recovery claims and claims that lost their lease or fence (ADR-096 §8). */
/* The FS twin's repair population is its own abandoned recovery claims only. It has no
 * un-leased arm (ADR-096 §7): no peer strips a lease from a file this process rewrites, and
 * a legacy claim with no lease is touched only by the boot-time same-host pid sweep. */
static bool want_repair(const struct core_card *c, int64_t now)
{
	return c->claim.present && core_marker_is_recovery(c->claim.marker) &&
	       core_claim_expired(c, now);
}

static int cmp_claimed(const void *a, const void *b)
{
	const struct core_card *x = *(const struct core_card *const *)a;
	const struct core_card *y = *(const struct core_card *const *)b;

	if (x->claim.claimed_at != y->claim.claimed_at)
		return x->claim.claimed_at > y->claim.claimed_at ? 1 : -1;
	return strcmp(x->id, y->id);
}

enum core_rc fs_reaper_list_expired(struct store *st, size_t batch, struct core_card ***out,
				    size_t *n)
{
	return fs_claims_expired(fs_of(st), store_now(st), batch, out, n);
}

enum core_rc fs_reaper_list_repair(struct store *st, size_t batch, struct core_card ***out,
				   size_t *n)
{
	return fs_cards_collect(fs_of(st), want_repair, store_now(st), cmp_claimed, batch, out,
				n);
}

/* TRANSFER of card c in transaction t; a miss changes nothing (CLAIM_CONFLICT). */
static enum core_rc transfer_in(struct fs_txn *t, struct core_card *c,
				const struct core_token *prev, const char *marker,
				int64_t lease_ms)
{
	enum core_rc rc = core_claim_transfer(c, prev, marker, lease_ms, t->now, 0);

	if (rc == CORE_OK)
		rc = fs_txn_event(t, CORE_EV_CARD_CLAIMED, c->board, c->id, "watchdog",
				  json_pack("{sssIs{sssI}}", "marker", marker, "epoch",
					    (json_int_t)c->claim_epoch, "reclaimed_from", "marker",
					    prev->marker, "epoch", (json_int_t)prev->epoch));
	return rc;
}

enum core_rc fs_reaper_transfer(struct store *st, const char *id, const struct core_token *prev,
				const char *marker, int64_t lease_ms, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = begin_card(st, &t, id, NULL, &c, &b);
	if (rc == CORE_OK)
		rc = transfer_in(&t, c, prev, marker, lease_ms);
	return end_card(&t, rc, c, out);
}

enum core_rc fs_reaper_release_exact(struct store *st, const char *id,
				     const struct core_card *expect,
				     const struct store_actor *actor)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = begin_card(st, &t, id, actor, &c, &b);
	if (rc == CORE_OK && !core_claim_matches(c, expect))
		rc = CORE_ERR_CLAIM_CONFLICT;
	if (rc == CORE_OK)
		rc = fs_release_with_event(&t, c, "watchdog");
	return end_card(&t, rc, c, NULL);
}

/* ---- the reaper's batches: one transaction, one journal line, for a whole batch ----
 * Each item runs the body of its single operation on the shared transaction, so it sees
 * the items before it. The outcomes a single operation may answer without having changed
 * anything (a transfer's miss, a card gone) stay the item's own; any other failure may have
 * left part of an item in the transaction, so the whole batch is dropped and run again one
 * operation per item: the outcome is then exactly the loop's, failures included. */

static bool miss_is_clean(enum core_rc rc)
{
	return rc == CORE_ERR_CLAIM_CONFLICT || rc == CORE_ERR_NOT_FOUND;
}

enum core_rc fs_reaper_transfer_many(struct store *st, struct store_transfer *v, size_t n,
				     const char *marker, int64_t lease_ms)
{
	struct fs_txn t;
	struct core_card *c;
	const struct core_board *b;
	enum core_rc rc = CORE_OK;
	size_t i;

	fs_txn_begin(fs_of(st), &t, NULL);
	fs_txn_reserve(&t, n, n);
	for (i = 0; i < n && rc == CORE_OK; i++) {
		v[i].card = NULL;
		v[i].rc = card_in(&t, v[i].id, &c, &b);
		if (v[i].rc == CORE_OK)
			v[i].rc = transfer_in(&t, c, &v[i].prev, marker, lease_ms);
		/* The copy as transferred is final: the transfer's event is a machine one
		 * (no effect changes the card), and a later item naming the same card misses. */
		if (v[i].rc == CORE_OK)
			v[i].rc = fs_card_out(c, &v[i].card);
		if (v[i].rc != CORE_OK && !miss_is_clean(v[i].rc))
			rc = v[i].rc;
	}
	if (rc != CORE_OK) {
		fs_txn_end(&t, rc);
		for (i = 0; i < n; i++) {
			core_card_free(v[i].card);
			v[i].rc = fs_reaper_transfer(st, v[i].id, &v[i].prev, marker, lease_ms,
						     &v[i].card);
		}
		return CORE_OK;
	}
	rc = fs_txn_end(&t, CORE_OK);
	for (i = 0; i < n && rc != CORE_OK; i++) {
		if (v[i].rc != CORE_OK)
			continue;
		core_card_free(v[i].card);
		v[i].card = NULL;
		v[i].rc = rc; /* not committed: as each single transfer would have answered */
	}
	return CORE_OK;
}

/* One act item on the shared transaction; OK or the first failing step's rc. */
static enum core_rc act_in(struct fs_txn *t, const struct store_reaper_act *a)
{
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc = CORE_OK;
	size_t k;

	if (!a->n_w && !a->release_expect)
		return CORE_OK;
	rc = card_in(t, a->id, &c, &b);
	if (rc == CORE_OK && !a->n_w)
		return core_claim_matches(c, a->release_expect)
			       ? fs_release_with_event(t, c, "watchdog")
			       : CORE_ERR_CLAIM_CONFLICT;
	for (k = 0; rc == CORE_OK && k < a->n_w; k++) {
		rc = core_fence_check(c, &a->w[k].token);
		if (rc == CORE_OK)
			rc = owned_write_in(t, c, b, &a->w[k]);
	}
	return rc;
}

/* The single operations of one act item, in order (the fallback). */
static enum core_rc act_single(struct store *st, const struct store_reaper_act *a,
			       const struct store_actor *actor)
{
	struct core_card *out = NULL;
	enum core_rc rc = CORE_OK;
	size_t k;

	if (!a->n_w)
		return a->release_expect
			       ? fs_reaper_release_exact(st, a->id, a->release_expect, actor)
			       : CORE_OK;
	for (k = 0; rc == CORE_OK && k < a->n_w; k++) {
		rc = fs_card_owned_write(st, a->id, &a->w[k], actor, &out);
		core_card_free(out);
		out = NULL;
	}
	return rc;
}

enum core_rc fs_reaper_act(struct store *st, struct store_reaper_act *v, size_t n,
			   const struct store_actor *actor)
{
	struct fs_txn t;
	enum core_rc rc = CORE_OK;
	size_t i;

	fs_txn_begin(fs_of(st), &t, actor);
	fs_txn_reserve(&t, n, 2 * n); /* a filing and its release */
	for (i = 0; i < n && rc == CORE_OK; i++)
		rc = v[i].rc = act_in(&t, &v[i]);
	if (rc != CORE_OK) {
		/* Even a fence refusal runs again singly: the single write counts it. */
		fs_txn_end(&t, rc);
		for (i = 0; i < n; i++)
			v[i].rc = act_single(st, &v[i], actor);
		return CORE_OK;
	}
	rc = fs_txn_end(&t, CORE_OK);
	for (i = 0; i < n; i++)
		v[i].rc = rc;
	return CORE_OK;
}

/* "<host>-<pid>" with host == ours and a pid that no longer exists. */
static bool legacy_dead_marker(const char *marker, const char *host)
{
	size_t hl = strlen(host);
	const char *p;
	char *end;
	long pid;

	if (strncmp(marker, host, hl) != 0 || marker[hl] != '-')
		return false;
	p = marker + hl + 1;
	if (*p < '0' || *p > '9')
		return false;
	errno = 0;
	pid = strtol(p, &end, 10);
	if (*end || errno || pid <= 0 || pid == (long)getpid())
		return false;
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static int ent_ord_cmp(const void *a, const void *b)
{
	uint64_t x = (*(struct fs_card_ent *const *)a)->ord;
	uint64_t y = (*(struct fs_card_ent *const *)b)->ord;

	return (x > y) - (x < y);
}

enum core_rc fs_legacy_sweep(struct fs *fs)
{
	struct fs_card_ent **v = NULL;
	struct fs_txn t;
	struct core_card *c;
	enum core_rc rc = CORE_OK;
	size_t i, n = 0, cap = 0;

	/* The candidates come from the claimed set, not from every card (this runs at every
	 * open: a walk of a million cards was ~5 % of it); released in creation order. */
	for (i = 0; rc == CORE_OK && i < fs->n_claimed; i++) {
		const struct fs_card *pc = fs->claimed[i]->card;

		/* Only un-leased (legacy) claims: a leased one is the reaper's to judge. */
		if (!pc || !fs_card_claimed(pc) || pc->more->claim.has_lease ||
		    !legacy_dead_marker(pc->more->claim.marker, fs->hostname))
			continue;
		if (n == cap)
			rc = fs_ptrs_reserve(&v, &cap, n + 1);
		if (rc == CORE_OK)
			v[n++] = fs->claimed[i];
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), ent_ord_cmp);
	fs_txn_begin(fs, &t, NULL);
	for (i = 0; rc == CORE_OK && i < n; i++) {
		rc = fs_txn_card(&t, fs_ent_id(v[i]), &c);
		if (rc == CORE_OK)
			rc = fs_release_with_event(&t, c, "legacy_sweep");
	}
	free(v);
	return fs_txn_end(&t, rc);
}
