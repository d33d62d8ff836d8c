/* Workflow rules: terminal sinks, SetStateFrom, Reopen, blockers, labels (DESIGN §4). */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum core_rc core_transition_check(const struct core_board *b, const char *from, const char *to,
				   enum core_mover by)
{
	if (!to || !core_board_column(b, to))
		return CORE_ERR_TRANSITION_REJECTED;
	if (!core_board_is_terminal(b, from) || (from && strcmp(from, to) == 0))
		return CORE_OK;
	/* Terminal columns are sinks: only Reopen leaves them. Refiling into another sink is
	 * the operator's; a run must not drag a card out of done (ADR-096 §5). */
	if (!core_board_is_terminal(b, to) || by != CORE_MOVER_OPERATOR)
		return CORE_ERR_TERMINAL_STATE_EXIT;
	return CORE_OK;
}

enum core_rc core_gave_up_check(const struct core_board *b, const struct core_gave_up *g)
{
	if (g && g->set && g->state && !core_board_column(b, g->state))
		return CORE_ERR_TRANSITION_REJECTED;
	return CORE_OK;
}

enum core_rc core_state_from_check(const struct core_card *c, const char *from)
{
	if (from && (!c->state || strcmp(c->state, from) != 0))
		return CORE_ERR_STATE_CONFLICT;
	return CORE_OK;
}

enum core_rc core_reopen_check(const struct core_board *b, const struct core_card *c, const char *to,
			       size_t dependents_outside_waiting)
{
	if (!core_board_is_terminal(b, c->state) || !core_board_is_working(b, to))
		return CORE_ERR_TRANSITION_REJECTED;
	if (b->completed && strcmp(c->state, b->completed) == 0 && dependents_outside_waiting > 0)
		return CORE_ERR_DEPENDENTS_OUTSTANDING;
	return CORE_OK;
}

enum core_rc core_card_state_write(struct core_card *c, const char *to, const char *reason,
				   int64_t now_ms)
{
	char *s = strdup(to), *r = NULL;

	if (!s)
		return CORE_ERR_NOMEM;
	if (reason && !(r = strdup(reason))) {
		free(s);
		return CORE_ERR_NOMEM;
	}
	free(c->state);
	free(c->state_reason);
	c->state = s;
	c->state_reason = r;
	c->state_at = now_ms;
	c->updated_at = now_ms;
	return CORE_OK;
}

bool core_is_machine_reason(const char *reason)
{
	/* attempts_exhausted: the filing of a card out of attempts (DESIGN §17: "under machine
	 * provenance"), whoever's retry release ran them out. */
	static const char *const machine[] = {"watchdog", "state_rename", "state_delete",
					      "migration", CORE_GAVE_UP_ATTEMPTS_EXHAUSTED};
	size_t i;

	for (i = 0; reason && i < sizeof(machine) / sizeof(machine[0]); i++)
		if (strcmp(reason, machine[i]) == 0)
			return true;
	return false;
}

/* Depth-first search: does `from` reach `target` through blocker edges? Bounded by `budget`
 * steps so a hostile graph cannot make one request run forever. */
static int reaches(const struct core_card_lookup *lk, const char *from, const char *target,
		   size_t depth, size_t *budget)
{
	const struct core_strv *bl = NULL;
	size_t i;
	int r;

	if (strcmp(from, target) == 0)
		return 1;
	if (depth > 256 || *budget == 0)
		return -1;
	(*budget)--;
	if (!lk->state_of(lk->ctx, from, &bl) || !bl)
		return 0;
	for (i = 0; i < bl->n; i++) {
		r = reaches(lk, bl->v[i], target, depth + 1, budget);
		if (r != 0)
			return r;
	}
	return 0;
}

enum core_rc core_blockers_check(const char *self_id, const struct core_strv *blockers,
				 const struct core_card_lookup *lk, char *detail, size_t detail_len)
{
	size_t i, budget = 100000;
	int r;

	if (blockers && blockers->n > CORE_BLOCKERS_MAX) {
		if (detail)
			snprintf(detail, detail_len, "at most %d blockers", CORE_BLOCKERS_MAX);
		return CORE_ERR_BAD_REQUEST;
	}
	for (i = 0; blockers && i < blockers->n; i++) {
		const char *id = blockers->v[i];
		if (!core_id_valid(id)) {
			if (detail)
				snprintf(detail, detail_len, "blocker ids must match [A-Za-z0-9._:-]{1,128}");
			return CORE_ERR_BAD_REQUEST;
		}
		if (self_id && strcmp(id, self_id) == 0) {
			if (detail)
				snprintf(detail, detail_len, "a card cannot block on itself");
			return CORE_ERR_TRANSITION_REJECTED;
		}
		if (!lk->state_of(lk->ctx, id, NULL)) {
			if (detail)
				snprintf(detail, detail_len, "unknown blocker %s", id);
			return CORE_ERR_TRANSITION_REJECTED;
		}
		if (self_id) {
			r = reaches(lk, id, self_id, 0, &budget);
			if (r != 0) {
				if (detail)
					snprintf(detail, detail_len,
						 r > 0 ? "blocker %s would close a cycle"
						       : "blocker graph too deep at %s",
						 id);
				return CORE_ERR_TRANSITION_REJECTED;
			}
		}
	}
	return CORE_OK;
}

bool core_blockers_all_done(const struct core_board *b, const struct core_strv *blockers,
			    const struct core_card_lookup *lk)
{
	size_t i;

	for (i = 0; blockers && i < blockers->n; i++) {
		const char *st = lk->state_of(lk->ctx, blockers->v[i], NULL);
		if (!st || !b->completed || strcmp(st, b->completed) != 0)
			return false;
	}
	return true;
}

static bool labels_valid(const struct core_strv *sv)
{
	size_t i;

	for (i = 0; sv && i < sv->n; i++)
		if (!core_label_valid(sv->v[i]))
			return false;
	return true;
}

/* Swaps next into c->labels when it differs; next is consumed either way. Too many labels
 * is BAD_REQUEST with the card unchanged. */
static enum core_rc labels_commit(struct core_card *c, struct core_strv *next, bool *changed)
{
	if (next->n > CORE_LABELS_MAX) {
		core_strv_release(next);
		return CORE_ERR_BAD_REQUEST;
	}
	*changed = !core_strv_equal(&c->labels, next);
	if (*changed) {
		core_strv_release(&c->labels);
		c->labels = *next;
	} else {
		core_strv_release(next);
	}
	return CORE_OK;
}

enum core_rc core_labels_set(struct core_card *c, const struct core_strv *labels, bool *changed)
{
	struct core_strv next = {0};

	*changed = false;
	if (!labels_valid(labels))
		return CORE_ERR_BAD_REQUEST;
	if (core_strv_copy(&next, labels) != CORE_OK)
		return CORE_ERR_NOMEM;
	core_strv_dedup(&next);
	return labels_commit(c, &next, changed);
}

enum core_rc core_labels_adjust(struct core_card *c, const struct core_strv *add,
				const struct core_strv *remove, bool *changed)
{
	struct core_strv next = {0};
	size_t i, out = 0;

	*changed = false;
	if (!labels_valid(add) || !labels_valid(remove))
		return CORE_ERR_BAD_REQUEST;
	if (core_strv_copy(&next, &c->labels) != CORE_OK)
		return CORE_ERR_NOMEM;
	for (i = 0; add && i < add->n; i++) {
		if (!core_strv_contains(&next, add->v[i]) &&
		    core_strv_push(&next, add->v[i]) != CORE_OK) {
			core_strv_release(&next);
			return CORE_ERR_NOMEM;
		}
	}
	for (i = 0; i < next.n; i++) {
		if (core_strv_contains(remove, next.v[i]))
			free(next.v[i]);
		else
			next.v[out++] = next.v[i];
	}
	next.n = out;
	return labels_commit(c, &next, changed);
}

enum core_rc core_labels_transform(struct core_card *c, const struct core_strv *from,
				   const char *to, bool *changed)
{
	struct core_strv next = {0};
	bool placed = to && core_strv_contains(&c->labels, to), hit = false;
	size_t i;

	*changed = false;
	if (!labels_valid(from) || (to && !core_label_valid(to)))
		return CORE_ERR_BAD_REQUEST;
	for (i = 0; i < c->labels.n; i++) {
		const char *l = c->labels.v[i];
		const char *keep = l;

		/* The target among the sources is no source of itself: it stays in place. */
		if (core_strv_contains(from, l) && !(to && strcmp(l, to) == 0)) {
			hit = true;
			keep = NULL;
			if (to && !placed) {
				keep = to;
				placed = true;
			}
		}
		if (keep && core_strv_push(&next, keep) != CORE_OK) {
			core_strv_release(&next);
			return CORE_ERR_NOMEM;
		}
	}
	if (!hit) {
		core_strv_release(&next);
		return CORE_OK;
	}
	core_strv_dedup(&next); /* `to` may also have been kept in its own place */
	return labels_commit(c, &next, changed);
}
