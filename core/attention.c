/* Attention (DESIGN §15): which cards need an operator, and why. Pure: the clock and the
 * board's column flags are arguments. */
#include "core/core.h"

#include <string.h>

static const char *const reason_names[] = {
#define CORE_ATTN_NAME(id, name, doc) [id] = name,
	CORE_ATTENTION_REASONS(CORE_ATTN_NAME)
#undef CORE_ATTN_NAME
};

static const char *const reason_docs[] = {
#define CORE_ATTN_DOC(id, name, doc) [id] = doc,
	CORE_ATTENTION_REASONS(CORE_ATTN_DOC)
#undef CORE_ATTN_DOC
};

const char *core_attention_reason_name(enum core_attention_reason r)
{
	return (int)r >= 0 && r < CORE_ATTN_COUNT_ ? reason_names[r] : "unknown";
}

const char *core_attention_reason_doc(enum core_attention_reason r)
{
	return (int)r >= 0 && r < CORE_ATTN_COUNT_ ? reason_docs[r] : "";
}

/* The card's current run (DESIGN §11, ADR-096 §4), or NULL. It is the recorded run
 * (c->last_run_id, not pruned) and, while the card is claimed, only a run created under that
 * very claim: a run of an earlier claim says nothing about the claim the card has now (the
 * reaper reads it as "no run recorded"), and a recovery claim has no run of its own. While
 * the card is unclaimed its last recorded run stands. */
static const struct core_run *current(const struct core_card *c, const struct core_run *run)
{
	if (!run || !run->id || !c->last_run_id || strcmp(run->id, c->last_run_id) != 0 ||
	    run->pruned || !run->status)
		return NULL;
	if (c->claim.present && !core_run_of_claim(run, c))
		return NULL;
	return run;
}

static bool run_failed(const struct core_run *r)
{
	return r && strcmp(r->status, CORE_RUN_FAILED) == 0;
}

/* A paused run parks its card through the claim it was created under (ADR-096 §4: the
 * retained claim is the parking brake). Once that claim is gone (released, revoked,
 * reopened, reclaimed) the run holds nothing — the card is back in the pool and the run's
 * owner can no longer write it — so only the current claim's paused run counts. */
static bool run_paused(const struct core_card *c, const struct core_run *r)
{
	return r && c->claim.present &&
	       (strcmp(r->status, CORE_RUN_PAUSED_HUMAN) == 0 ||
		strcmp(r->status, CORE_RUN_PAUSED_OPERATOR) == 0);
}

bool core_attention_candidate(const struct core_card *c, const struct core_run *run)
{
	const struct core_run *r;

	if (!c)
		return false;
	r = current(c, run);
	return c->gave_up.set || c->awaiting_input || run_failed(r) || run_paused(c, r);
}

unsigned core_attention_reasons(const struct core_card *c, bool terminal,
				const struct core_run *run, int64_t now_ms)
{
	const struct core_run *r;
	unsigned out = 0;

	if (!c)
		return 0;
	r = current(c, run);
	/* A stamp or a failure the card was filed on, or was left standing in: a move since
	 * (an operator's reopen, a re-queue) is the answer to it. */
	if (c->gave_up.set && (terminal || c->gave_up.at >= c->state_at))
		out |= 1u << CORE_ATTN_GAVE_UP;
	if (run_failed(r) && (terminal || r->updated_at >= c->state_at))
		out |= 1u << CORE_ATTN_RUN_FAILED;
	if (c->claim.present && core_marker_is_recovery(c->claim.marker))
		out |= 1u << CORE_ATTN_RECOVERY_HOLD;
	else if (c->claim.present && c->claim.has_lease && c->claim.lease_until < now_ms)
		out |= 1u << CORE_ATTN_LEASE_EXPIRED_KEPT;
	if (c->awaiting_input)
		out |= 1u << CORE_ATTN_AWAITING_INPUT;
	if (run_paused(c, r))
		out |= 1u << CORE_ATTN_RUN_PAUSED;
	return out;
}
