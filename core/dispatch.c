/* Dispatch policy (DESIGN §17): the rules the twins apply to their counts of live claims and
 * to a card's schedule and attempts. */
#include "core/core.h"

#include <stdio.h>

enum core_rc core_capacity_check(const struct core_board *b, const char *col,
				 int64_t claimed_col, int64_t claimed_board, char *detail,
				 size_t detail_len)
{
	const struct core_column *c = col ? core_board_column(b, col) : NULL;

	if (c && c->limit > 0 && claimed_col >= c->limit) {
		if (detail && detail_len)
			snprintf(detail, detail_len,
				 "column %s of board %s is at its limit of %d claims", col, b->name,
				 (int)c->limit);
		return CORE_ERR_CAPACITY_REACHED;
	}
	if (b->max_claims > 0 && claimed_board >= b->max_claims) {
		if (detail && detail_len)
			snprintf(detail, detail_len, "board %s is at its max_claims of %d", b->name,
				 (int)b->max_claims);
		return CORE_ERR_CAPACITY_REACHED;
	}
	return CORE_OK;
}

bool core_column_has_room(const struct core_board *b, const char *col, int64_t claimed_col)
{
	const struct core_column *c = col ? core_board_column(b, col) : NULL;

	return !c || c->limit <= 0 || claimed_col < c->limit;
}

enum core_rc core_not_yet_check(const struct core_card *c, int64_t now_ms, char *detail,
				size_t detail_len)
{
	char t[CORE_TIME_BUF];

	if (c->not_before <= now_ms)
		return CORE_OK;
	if (detail && detail_len)
		snprintf(detail, detail_len, "card %s is scheduled: not before %s",
			 c->id ? c->id : "", core_time_format(c->not_before, t));
	return CORE_ERR_NOT_YET;
}

void core_retry_effective(const struct core_board *b, int32_t default_max_attempts,
			  struct core_retry *out)
{
	if (b && b->has_retry) {
		*out = b->retry;
		return;
	}
	out->max_attempts =
		default_max_attempts > 0 ? default_max_attempts : CORE_RETRY_MAX_ATTEMPTS;
	out->backoff_ms = CORE_RETRY_BACKOFF_MS;
	out->max_backoff_ms = CORE_RETRY_MAX_BACKOFF_MS;
}

enum core_rc core_retry_validate(const struct core_retry *r, char *detail, size_t detail_len)
{
	const char *why = NULL;

	if (r->max_attempts < 1 || r->max_attempts > CORE_RETRY_ATTEMPTS_MAX)
		why = "retry.max_attempts must be within 1..1000000";
	else if (r->backoff_ms < 1 || r->backoff_ms > CORE_RETRY_BACKOFF_MAX_MS)
		why = "retry.backoff_ms must be within 1..604800000 (a week)";
	else if (r->max_backoff_ms < r->backoff_ms || r->max_backoff_ms > CORE_RETRY_BACKOFF_MAX_MS)
		why = "retry.max_backoff_ms must be within backoff_ms..604800000 (a week)";
	if (!why)
		return CORE_OK;
	if (detail && detail_len)
		snprintf(detail, detail_len, "%s", why);
	return CORE_ERR_BAD_REQUEST;
}

int64_t core_retry_backoff(const struct core_retry *r, int32_t attempts, uint32_t rnd)
{
	int64_t wait = r->backoff_ms > 0 ? r->backoff_ms : 1;
	int32_t i;
	double f;

	for (i = 1; i < attempts && wait < r->max_backoff_ms; i++)
		wait *= 2; /* backoff_ms <= a week: 2 * wait stays far from overflow */
	if (wait > r->max_backoff_ms)
		wait = r->max_backoff_ms;
	/* +-10 %: 0.9 .. 1.1 of the wait. */
	f = 0.9 + 0.2 * ((double)rnd / (double)UINT32_MAX);
	wait = (int64_t)((double)wait * f);
	return wait > 0 ? wait : 1;
}

enum core_retry_outcome core_retry_count(struct core_card *c, const struct core_retry *r,
					 int64_t now_ms, uint32_t rnd)
{
	if (c->attempts < INT32_MAX)
		c->attempts++;
	c->updated_at = now_ms;
	if (c->attempts >= r->max_attempts)
		return CORE_RETRY_EXHAUSTED;
	c->not_before = now_ms + core_retry_backoff(r, c->attempts, rnd);
	return CORE_RETRY_LATER;
}

void core_attempts_reset(struct core_card *c)
{
	c->attempts = 0;
	c->not_before = 0;
}
