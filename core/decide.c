/* The stuck-card decision table (DESIGN §6.5, ADR-096 §4): a static table of rows in
 * precedence order; the first row whose predicate holds decides. */
#include "core/core.h"

#include <string.h>

static const char *const action_names[] = {
#define CORE_STUCK_NAME(name, str) [name] = str,
	CORE_STUCK_ACTIONS(CORE_STUCK_NAME)
#undef CORE_STUCK_NAME
};

const char *core_stuck_action_name(enum core_stuck_action a)
{
	if ((int)a < 0 || a >= CORE_STUCK_ACTION_COUNT_)
		return "keep";
	return action_names[a];
}

bool core_stamp_window_open(int64_t claimed_at, int64_t lease_ms, int64_t now_ms)
{
	if (claimed_at <= 0 || lease_ms <= 0)
		return false;
	return now_ms - claimed_at < 2 * lease_ms;
}

static bool status_is(const struct core_stuck_input *in, const char *status)
{
	return in->seen == CORE_RUN_SEEN_LOADED && in->run && in->run->status &&
	       strcmp(in->run->status, status) == 0;
}

static bool in_running_column(const struct core_stuck_input *in)
{
	return in->state && in->board->running && strcmp(in->state, in->board->running) == 0;
}

/* ---- predicates, one per row ---- */

static bool p_unreadable(const struct core_stuck_input *in)
{
	return in->seen == CORE_RUN_SEEN_UNREADABLE;
}

static bool p_stamp_window(const struct core_stuck_input *in)
{
	return in->seen == CORE_RUN_SEEN_NONE && in_running_column(in) && in->stamp_window_open;
}

static bool p_no_run(const struct core_stuck_input *in)
{
	return in->seen == CORE_RUN_SEEN_NONE;
}

static bool p_gone(const struct core_stuck_input *in)
{
	return in->seen == CORE_RUN_SEEN_GONE;
}

static bool p_live(const struct core_stuck_input *in)
{
	return status_is(in, CORE_RUN_RUNNING) || status_is(in, CORE_RUN_QUEUED);
}

static bool p_paused(const struct core_stuck_input *in)
{
	return status_is(in, CORE_RUN_PAUSED_HUMAN) || status_is(in, CORE_RUN_PAUSED_OPERATOR);
}

static bool p_cancelled(const struct core_stuck_input *in)
{
	return status_is(in, CORE_RUN_CANCELLED);
}

static bool p_continuation(const struct core_stuck_input *in)
{
	const char *c = in->run ? in->run->continuation : NULL;
	return in->seen == CORE_RUN_SEEN_LOADED && c &&
	       (strcmp(c, CORE_CONT_REDELIVERY) == 0 || strcmp(c, CORE_CONT_RETRY) == 0);
}

static bool p_finished(const struct core_stuck_input *in)
{
	return status_is(in, CORE_RUN_FINISHED);
}

static bool p_failed(const struct core_stuck_input *in)
{
	return status_is(in, CORE_RUN_FAILED);
}

/* Parked outside the pool: neither in the running column nor in a launch column, so
 * returning it to the pool means nothing and releasing lifts a brake somebody set. */
static bool p_parked(const struct core_stuck_input *in)
{
	return status_is(in, CORE_RUN_FAILED_RESUMABLE) && !in_running_column(in) &&
	       !core_board_is_eligible(in->board, in->state);
}

static bool p_resumable(const struct core_stuck_input *in)
{
	return status_is(in, CORE_RUN_FAILED_RESUMABLE);
}

static bool p_any(const struct core_stuck_input *in)
{
	(void)in;
	return true;
}

struct stuck_row {
	const char *name;
	bool (*when)(const struct core_stuck_input *in);
	enum core_stuck_action action;
	const char *reason;
	bool liveness; /* consulted before the transfer too */
};

/* DESIGN §6.5, in precedence order. */
static const struct stuck_row stuck_table[] = {
	{"run_unreadable", p_unreadable, CORE_STUCK_KEEP, NULL, true},
	{"stamp_window_open", p_stamp_window, CORE_STUCK_KEEP, NULL, true},
	{"no_run", p_no_run, CORE_STUCK_RELEASE, NULL, true},
	{"run_pruned", p_gone, CORE_STUCK_GIVE_UP, "watchdog", true},
	{"run_live", p_live, CORE_STUCK_KEEP, NULL, true},
	{"run_paused", p_paused, CORE_STUCK_KEEP, NULL, true},
	{"run_cancelled", p_cancelled, CORE_STUCK_KEEP, NULL, true},
	{"continuation_armed", p_continuation, CORE_STUCK_KEEP, NULL, true},
	{"run_finished", p_finished, CORE_STUCK_COMPLETE, "run_finished", true},
	{"run_failed", p_failed, CORE_STUCK_FAIL, "run_failed", true},
	{"parked_out_of_pool", p_parked, CORE_STUCK_KEEP, NULL, false},
	{"run_resumable", p_resumable, CORE_STUCK_REPARK, "watchdog", true},
	{"unknown_status", p_any, CORE_STUCK_KEEP, NULL, true},
};

static struct core_stuck_decision decide(const struct core_stuck_input *in, bool pre_transfer)
{
	size_t i;

	for (i = 0; i < sizeof(stuck_table) / sizeof(stuck_table[0]); i++) {
		const struct stuck_row *r = &stuck_table[i];
		if (pre_transfer && !r->liveness)
			continue;
		if (r->when(in))
			return (struct core_stuck_decision){r->action, r->name, r->reason};
	}
	/* Unreachable: the last row always holds. Conserve. */
	return (struct core_stuck_decision){CORE_STUCK_KEEP, "unknown_status", NULL};
}

struct core_stuck_decision core_decide_stuck_card(const struct core_stuck_input *in)
{
	return decide(in, false);
}

struct core_stuck_decision core_decide_transfer(const struct core_stuck_input *in)
{
	return decide(in, true);
}

bool core_recovery_hold_expired(const struct core_stuck_input *in, const char *prev_marker)
{
	if (!core_marker_is_recovery(prev_marker) || in->seen == CORE_RUN_SEEN_UNREADABLE)
		return false;
	if (in->seen == CORE_RUN_SEEN_NONE)
		return !p_stamp_window(in);
	return !p_live(in);
}

bool core_should_file_stuck_card(const struct core_board *b, const char *state, const char *target)
{
	if (!target || !state || strcmp(state, target) == 0)
		return false;
	if (b->running && strcmp(target, b->running) == 0)
		return false;
	if (b->running && strcmp(state, b->running) == 0)
		return true;
	return core_board_is_eligible(b, state);
}
