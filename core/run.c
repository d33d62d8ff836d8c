/* Runs and the liveness oracle (DESIGN §5). */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

struct core_run *core_run_new(void)
{
	return calloc(1, sizeof(struct core_run));
}

void core_run_release(struct core_run *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->card_id);
	free(r->board);
	free(r->status);
	free(r->continuation);
	free(r->failure_code);
	free(r->owner);
	free(r->result);
	free(r->error);
	free(r->output);
	memset(r, 0, sizeof(*r));
}

void core_run_free(struct core_run *r)
{
	core_run_release(r);
	free(r);
}

struct core_run *core_run_dup(const struct core_run *r)
{
	struct core_run *d = core_run_new();

	if (!d)
		return NULL;
	d->claim_epoch = r->claim_epoch;
	d->lock_until = r->lock_until;
	d->lease_ms = r->lease_ms;
	d->created_at = r->created_at;
	d->updated_at = r->updated_at;
	d->pruned = r->pruned;
	if (core_str_set(&d->id, r->id) || core_str_set(&d->card_id, r->card_id) ||
	    core_str_set(&d->board, r->board) || core_str_set(&d->status, r->status) ||
	    core_str_set(&d->continuation, r->continuation) ||
	    core_str_set(&d->failure_code, r->failure_code) || core_str_set(&d->owner, r->owner) ||
	    core_str_set(&d->result, r->result) || core_str_set(&d->error, r->error) ||
	    core_str_set(&d->output, r->output)) {
		core_run_free(d);
		return NULL;
	}
	return d;
}

bool core_run_status_final(const char *status)
{
	return status && (strcmp(status, CORE_RUN_FINISHED) == 0 ||
			  strcmp(status, CORE_RUN_FAILED) == 0 ||
			  strcmp(status, CORE_RUN_CANCELLED) == 0);
}

bool core_run_of_claim(const struct core_run *r, const struct core_card *c)
{
	return r && c && c->claim.present && c->has_epoch && r->claim_epoch > 0 &&
	       r->claim_epoch == c->claim_epoch && r->owner && c->claim.marker &&
	       strcmp(r->owner, c->claim.marker) == 0 && r->card_id && c->id &&
	       strcmp(r->card_id, c->id) == 0;
}

bool core_run_of_stripped_claim(const struct core_run *r, const struct core_card *c)
{
	return r && c && c->claim.present && !c->has_epoch && r->owner && c->claim.marker &&
	       strcmp(r->owner, c->claim.marker) == 0 && r->card_id && c->id &&
	       strcmp(r->card_id, c->id) == 0 &&
	       (c->claim.claimed_at <= 0 || r->created_at >= c->claim.claimed_at);
}

enum core_rc core_last_run_check(const struct core_run *r, const char *card_id,
				 const struct core_token *t)
{
	if (!r || r->pruned || !r->card_id || strcmp(r->card_id, card_id) != 0 || !t ||
	    !t->marker || r->claim_epoch != t->epoch || !r->owner ||
	    strcmp(r->owner, t->marker) != 0)
		return CORE_ERR_TRANSITION_REJECTED;
	return CORE_OK;
}

bool core_continuation_valid(const char *s)
{
	return s && (strcmp(s, CORE_CONT_REDELIVERY) == 0 || strcmp(s, CORE_CONT_RETRY) == 0 ||
		     strcmp(s, CORE_CONT_FINAL) == 0);
}

void core_run_promote_if_orphaned(struct core_run *r, int64_t now_ms, bool *promoted)
{
	char *status, *code;

	*promoted = false;
	if (!r->status || (strcmp(r->status, CORE_RUN_RUNNING) != 0 &&
			   strcmp(r->status, CORE_RUN_QUEUED) != 0))
		return;
	/* Only provable absence of a live owner promotes: a live lock is never touched. */
	if (r->lock_until >= now_ms)
		return;
	status = strdup(CORE_RUN_FAILED_RESUMABLE);
	code = strdup(CORE_FAILURE_ORPHANED);
	if (!status || !code) {
		free(status);
		free(code);
		return;
	}
	free(r->status);
	free(r->failure_code);
	r->status = status;
	r->failure_code = code;
	r->updated_at = now_ms;
	*promoted = true;
}
