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
	d->lock_until = r->lock_until;
	d->lease_ms = r->lease_ms;
	d->created_at = r->created_at;
	d->updated_at = r->updated_at;
	d->pruned = r->pruned;
	if (core_str_set(&d->id, r->id) || core_str_set(&d->card_id, r->card_id) ||
	    core_str_set(&d->board, r->board) || core_str_set(&d->status, r->status) ||
	    core_str_set(&d->continuation, r->continuation) ||
	    core_str_set(&d->failure_code, r->failure_code) || core_str_set(&d->owner, r->owner) ||
	    core_str_set(&d->result, r->result) || core_str_set(&d->error, r->error)) {
		core_run_free(d);
		return NULL;
	}
	return d;
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
