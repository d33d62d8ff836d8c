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

/* The recorded run, or NULL when `run` is another one. */
static const struct core_run *recorded(const struct core_card *c, const struct core_run *run)
{
	if (!run || !run->id || !c->last_run_id || strcmp(run->id, c->last_run_id) != 0 ||
	    run->pruned || !run->status)
		return NULL;
	return run;
}

static bool run_failed(const struct core_run *r)
{
	return r && strcmp(r->status, CORE_RUN_FAILED) == 0;
}

static bool run_paused(const struct core_run *r)
{
	return r && (strcmp(r->status, CORE_RUN_PAUSED_HUMAN) == 0 ||
		     strcmp(r->status, CORE_RUN_PAUSED_OPERATOR) == 0);
}

bool core_attention_candidate(const struct core_card *c, const struct core_run *run)
{
	const struct core_run *r;

	if (!c)
		return false;
	r = recorded(c, run);
	return c->gave_up.set || c->awaiting_input || run_failed(r) || run_paused(r);
}

unsigned core_attention_reasons(const struct core_card *c, bool terminal,
				const struct core_run *run, int64_t now_ms)
{
	const struct core_run *r;
	unsigned out = 0;

	if (!c)
		return 0;
	r = recorded(c, run);
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
	if (run_paused(r))
		out |= 1u << CORE_ATTN_RUN_PAUSED;
	return out;
}
