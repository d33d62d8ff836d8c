/* Claim rules: lease and fence (DESIGN §3, ADR-096 §1, §2, §3, §6). */
#include "core/core.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static int64_t next_epoch(int64_t prev, int64_t floor)
{
	return prev + 1 > floor ? prev + 1 : floor;
}

/* Stamps a fresh hold on c: claimed_at, lease, marker already validated by the caller. */
static enum core_rc claim_stamp(struct core_card *c, const char *marker, const char *holder,
				const char *from, int64_t epoch, int64_t lease_ms, int64_t now_ms)
{
	char *m = strdup(marker), *h = holder ? strdup(holder) : NULL;
	char *f = from ? strdup(from) : NULL;

	if (!m || (holder && !h) || (from && !f)) {
		free(m);
		free(h);
		free(f);
		return CORE_ERR_NOMEM;
	}
	free(c->claim.marker);
	free(c->claim.holder);
	free(c->claim.from);
	c->claim.marker = m;
	c->claim.holder = h;
	c->claim.from = f;
	c->claim.present = true;
	c->claim.claimed_at = now_ms;
	c->claim.has_lease = true;
	c->claim.lease_ms = lease_ms;
	c->claim.lease_until = now_ms + lease_ms;
	c->claim_epoch = epoch;
	c->has_epoch = true;
	c->updated_at = now_ms;
	return CORE_OK;
}

bool core_holder_match(const struct core_claim *cl, const char *holder)
{
	return !cl->holder || (holder && strcmp(cl->holder, holder) == 0);
}

enum core_rc core_claim_acquire(struct core_card *c, const struct core_board *b, const char *marker,
				const char *holder, int64_t lease_ms, int64_t now_ms,
				int64_t epoch_floor, bool *fresh)
{
	*fresh = false;
	if (!core_marker_valid(marker) || lease_ms <= 0)
		return CORE_ERR_BAD_REQUEST;
	if (core_board_is_terminal(b, c->state))
		return CORE_ERR_TRANSITION_REJECTED;
	if (c->claim.present) {
		/* Only the reaper may take an expired claim: it alone asks whether the run
		 * behind it is alive. A missing epoch admits no holder (ADR-096 §6). */
		if (strcmp(c->claim.marker, marker) != 0 || !c->has_epoch ||
		    !core_holder_match(&c->claim, holder))
			return CORE_ERR_CLAIM_CONFLICT;
		c->claim.has_lease = true;
		c->claim.lease_ms = lease_ms;
		c->claim.lease_until = now_ms + lease_ms;
		c->updated_at = now_ms;
		return CORE_OK;
	}
	if (c->not_before > now_ms)
		return CORE_ERR_NOT_YET;
	if (claim_stamp(c, marker, holder, c->state,
			next_epoch(c->has_epoch ? c->claim_epoch : 0, epoch_floor), lease_ms,
			now_ms) != CORE_OK)
		return CORE_ERR_NOMEM;
	*fresh = true;
	return CORE_OK;
}

/* (marker, epoch) alone: the transfer's precondition. */
static enum core_rc token_check(const struct core_card *c, const struct core_token *t)
{
	if (!t || !t->marker || !c->claim.present || !c->has_epoch)
		return CORE_ERR_CLAIM_CONFLICT;
	if (strcmp(c->claim.marker, t->marker) != 0 || c->claim_epoch != t->epoch)
		return CORE_ERR_CLAIM_CONFLICT;
	return CORE_OK;
}

enum core_fence_reason core_fence_why(const struct core_card *c, const struct core_token *t)
{
	if (!t || !t->marker || !c->claim.present || !c->has_epoch)
		return CORE_FENCE_UNCLAIMED;
	if (strcmp(c->claim.marker, t->marker) != 0)
		return CORE_FENCE_MARKER;
	if (c->claim_epoch != t->epoch)
		return CORE_FENCE_EPOCH;
	/* Knowing (marker, epoch) from a card read is not enough: the credential must be the
	 * one that took the claim (DESIGN §11). */
	if (!core_holder_match(&c->claim, t->holder))
		return CORE_FENCE_HOLDER;
	return CORE_FENCE_OK;
}

const char *core_fence_reason_name(enum core_fence_reason r)
{
	static const char *const names[] = {
#define CORE_FENCE_NAME(name, str) [name] = str,
		CORE_FENCE_REASONS(CORE_FENCE_NAME)
#undef CORE_FENCE_NAME
	};

	return (unsigned)r < CORE_FENCE_REASON_COUNT_ ? names[r] : "unknown";
}

enum core_rc core_fence_check(const struct core_card *c, const struct core_token *t)
{
	return core_fence_why(c, t) == CORE_FENCE_OK ? CORE_OK : CORE_ERR_CLAIM_CONFLICT;
}

enum core_rc core_claim_renew(struct core_card *c, const struct core_token *t, int64_t lease_ms,
			      int64_t now_ms)
{
	enum core_rc rc = core_fence_check(c, t);

	if (rc != CORE_OK)
		return rc;
	if (lease_ms <= 0)
		lease_ms = c->claim.has_lease ? c->claim.lease_ms : 0; /* keep its own lease */
	if (lease_ms <= 0)
		return CORE_ERR_BAD_REQUEST;
	c->claim.has_lease = true;
	c->claim.lease_ms = lease_ms;
	c->claim.lease_until = now_ms + lease_ms;
	c->updated_at = now_ms;
	return CORE_OK;
}

void core_claim_clear(struct core_card *c)
{
	free(c->claim.marker);
	free(c->claim.holder);
	free(c->claim.from);
	memset(&c->claim, 0, sizeof(c->claim));
}

enum core_rc core_claim_release(struct core_card *c, const struct core_token *t)
{
	enum core_rc rc = core_fence_check(c, t);

	if (rc != CORE_OK)
		return rc;
	core_claim_clear(c);
	return CORE_OK;
}

bool core_claim_expired(const struct core_card *c, int64_t now_ms)
{
	return c->claim.present && c->claim.has_lease && c->claim.lease_until < now_ms;
}

enum core_rc core_claim_transfer(struct core_card *c, const struct core_token *prev,
				 const char *marker, int64_t lease_ms, int64_t now_ms,
				 int64_t epoch_floor)
{
	if (!core_marker_valid(marker) || lease_ms <= 0)
		return CORE_ERR_BAD_REQUEST;
	/* The whole precondition: still exactly the listed token AND still expired. */
	if (token_check(c, prev) != CORE_OK || !core_claim_expired(c, now_ms))
		return CORE_ERR_CLAIM_CONFLICT;
	/* The recovery claim takes the place of the one it replaces: the same column's slot. */
	return claim_stamp(c, marker, marker, c->claim.from, next_epoch(c->claim_epoch, epoch_floor),
			   lease_ms, now_ms);
}

/* ---- claim-next ---- */

enum core_rc core_pick_check(const struct core_board *b, const struct core_strv *columns,
			     char *detail, size_t detail_len)
{
	const struct core_column *col;
	size_t i;

	for (i = 0; columns && i < columns->n; i++) {
		col = core_board_column(b, columns->v[i]);
		if (!col || col->terminal) {
			if (detail && detail_len && col)
				snprintf(detail, detail_len,
					 "column %s of board %s is terminal: its cards cannot be "
					 "claimed", columns->v[i], b->name);
			else if (detail && detail_len)
				snprintf(detail, detail_len, "board %s has no column %s", b->name,
					 columns->v[i]);
			return CORE_ERR_TRANSITION_REJECTED;
		}
	}
	return CORE_OK;
}

bool core_pick_fits(const struct core_pick *p, const struct core_card *c)
{
	size_t i;

	if (c->claim.present || !c->board || strcmp(c->board, p->board->name) != 0 ||
	    core_board_is_terminal(p->board, c->state) || c->not_before > p->now_ms)
		return false;
	if (p->columns && p->columns->n) {
		if (!core_strv_contains(p->columns, c->state))
			return false;
	} else if (!core_board_is_eligible(p->board, c->state)) {
		return false;
	}
	for (i = 0; p->labels && i < p->labels->n; i++)
		if (!core_strv_contains(&c->labels, p->labels->v[i]))
			return false;
	return !p->lk || !c->blockers.n || core_blockers_all_done(p->board, &c->blockers, p->lk);
}

bool core_pick_keys_before(int32_t priority_a, int64_t created_a, const char *id_a,
			   int32_t priority_b, int64_t created_b, const char *id_b)
{
	if (priority_a != priority_b)
		return priority_a > priority_b;
	if (created_a != created_b)
		return created_a < created_b;
	return strcmp(id_a, id_b) < 0;
}

bool core_pick_before(const struct core_card *a, const struct core_card *b)
{
	return core_pick_keys_before(a->priority, a->created_at, a->id, b->priority, b->created_at,
				     b->id);
}

bool core_claim_matches(const struct core_card *c, const struct core_card *expect)
{
	if (!c->claim.present || !expect->claim.present || !expect->claim.marker ||
	    strcmp(c->claim.marker, expect->claim.marker) != 0)
		return false;
	if (c->has_epoch != expect->has_epoch)
		return false;
	return !c->has_epoch || c->claim_epoch == expect->claim_epoch;
}
