/* The event vocabulary (DESIGN §7). */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

static const char *const ev_names[] = {
#define CORE_EV_NAME(name, str) [name] = str,
	CORE_EVENT_TYPES(CORE_EV_NAME)
#undef CORE_EV_NAME
};

const char *core_event_type_name(enum core_event_type t)
{
	if ((int)t < 0 || t >= CORE_EV_COUNT_)
		return "unknown";
	return ev_names[t];
}

int core_event_type_parse(const char *s)
{
	int i;

	for (i = 0; s && i < CORE_EV_COUNT_; i++)
		if (strcmp(ev_names[i], s) == 0)
			return i;
	return -1;
}

void core_event_release(struct core_event *e)
{
	if (!e)
		return;
	free(e->board);
	free(e->card_id);
	free(e->actor);
	free(e->reason);
	free(e->payload);
	memset(e, 0, sizeof(*e));
}

enum core_rc core_event_init(struct core_event *e, enum core_event_type t, const char *board,
			     const char *card_id, const char *actor, const char *reason,
			     int64_t now_ms, char *payload)
{
	bool machine = core_is_machine_reason(reason);

	memset(e, 0, sizeof(*e));
	e->type = t;
	e->at = now_ms;
	e->machine = machine;
	/* A machine event still flows to the audit tail, but with the actor blanked. */
	if (core_str_set(&e->board, board) || core_str_set(&e->card_id, card_id) ||
	    core_str_set(&e->actor, machine || !actor ? "" : actor) ||
	    core_str_set(&e->reason, reason)) {
		core_event_release(e);
		free(payload);
		return CORE_ERR_NOMEM;
	}
	e->payload = payload;
	return CORE_OK;
}

enum core_rc core_event_copy(struct core_event *dst, const struct core_event *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->seq = src->seq;
	dst->board_seq = src->board_seq;
	dst->at = src->at;
	dst->type = src->type;
	dst->machine = src->machine;
	if (core_str_set(&dst->board, src->board) || core_str_set(&dst->card_id, src->card_id) ||
	    core_str_set(&dst->actor, src->actor) || core_str_set(&dst->reason, src->reason) ||
	    core_str_set(&dst->payload, src->payload)) {
		core_event_release(dst);
		return CORE_ERR_NOMEM;
	}
	return CORE_OK;
}

void core_touched_of(struct core_touched *t, const struct core_event *ev, size_t n)
{
	size_t i, k;

	t->n = 0;
	t->all = false;
	for (i = 0; i < n && !t->all; i++) {
		if (!ev[i].board) {
			t->all = true;
			break;
		}
		for (k = 0; k < t->n && strcmp(t->board[k], ev[i].board) != 0; k++)
			;
		if (k < t->n)
			continue;
		if (t->n == CORE_TOUCHED_MAX)
			t->all = true;
		else
			t->board[t->n++] = ev[i].board;
	}
}

static bool touched_has(const struct core_touched *t, const char *board)
{
	size_t k;

	for (k = 0; k < t->n; k++)
		if (strcmp(t->board[k], board) == 0)
			return true;
	return false;
}

bool core_touched_any(const struct core_touched *t, const char *board,
		      const char *const *boards)
{
	size_t i;

	if (t->all)
		return true;
	if (board)
		return touched_has(t, board);
	if (!boards)
		return t->n > 0;
	for (i = 0; boards[i]; i++)
		if (touched_has(t, boards[i]))
			return true;
	return false;
}
