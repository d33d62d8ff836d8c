/* Boards and their columns (DESIGN §2). */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	bool terminal, eligible;
} default_cols[] = {
	{"inbox", false, false},     {"backlog", false, false},     {"ready", false, true},
	{"waiting_deps", false, false}, {"in_progress", false, true}, {"awaiting_input", false, false},
	{"review", false, false},    {"done", true, false},         {"blocked", true, false},
};

void core_board_release(struct core_board *b)
{
	size_t i;

	if (!b)
		return;
	for (i = 0; i < b->n_cols; i++)
		free(b->cols[i].name);
	free(b->cols);
	free(b->name);
	free(b->running);
	free(b->completed);
	free(b->failed);
	free(b->waiting);
	memset(b, 0, sizeof(*b));
}

enum core_rc core_board_init_default(struct core_board *b, const char *name)
{
	size_t i, n = sizeof(default_cols) / sizeof(default_cols[0]);

	memset(b, 0, sizeof(*b));
	b->cols = calloc(n, sizeof(*b->cols));
	if (!b->cols)
		goto oom;
	for (i = 0; i < n; i++) {
		b->cols[i].name = strdup(default_cols[i].name);
		if (!b->cols[i].name)
			goto oom;
		b->cols[i].terminal = default_cols[i].terminal;
		b->cols[i].eligible = default_cols[i].eligible;
		b->n_cols++;
	}
	if (core_str_set(&b->name, name) || core_str_set(&b->running, "in_progress") ||
	    core_str_set(&b->completed, "done") || core_str_set(&b->failed, "blocked") ||
	    core_str_set(&b->waiting, "waiting_deps"))
		goto oom;
	return CORE_OK;
oom:
	core_board_release(b);
	return CORE_ERR_NOMEM;
}

enum core_rc core_board_copy(struct core_board *dst, const struct core_board *src)
{
	size_t i;

	memset(dst, 0, sizeof(*dst));
	if (src->n_cols) {
		dst->cols = calloc(src->n_cols, sizeof(*dst->cols));
		if (!dst->cols)
			goto oom;
	}
	for (i = 0; i < src->n_cols; i++) {
		dst->cols[i] = src->cols[i];
		dst->cols[i].name = NULL;
		dst->n_cols++;
		if (core_str_set(&dst->cols[i].name, src->cols[i].name))
			goto oom;
	}
	if (core_str_set(&dst->name, src->name) || core_str_set(&dst->running, src->running) ||
	    core_str_set(&dst->completed, src->completed) ||
	    core_str_set(&dst->failed, src->failed) || core_str_set(&dst->waiting, src->waiting))
		goto oom;
	dst->max_claims = src->max_claims;
	dst->has_retry = src->has_retry;
	dst->retry = src->retry;
	return CORE_OK;
oom:
	core_board_release(dst);
	return CORE_ERR_NOMEM;
}

enum core_rc core_board_rename_column(const struct core_board *b, const char *from,
				      const char *to, struct core_board *out)
{
	char **roles[] = {&out->running, &out->completed, &out->failed, &out->waiting};
	size_t i;

	if (core_board_copy(out, b) != CORE_OK)
		return CORE_ERR_NOMEM;
	for (i = 0; i < out->n_cols; i++)
		if (strcmp(out->cols[i].name, from) == 0 &&
		    core_str_set(&out->cols[i].name, to) != CORE_OK)
			goto oom;
	for (i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (*roles[i] && strcmp(*roles[i], from) == 0 && core_str_set(roles[i], to) != CORE_OK)
			goto oom;
	return CORE_OK;
oom:
	core_board_release(out);
	return CORE_ERR_NOMEM;
}

const struct core_column *core_board_column(const struct core_board *b, const char *name)
{
	size_t i;

	if (!b || !name)
		return NULL;
	/* The first byte before the call: most columns differ there, and a write looks up
	 * several (~40 strcmp calls a request of the claim cycle were this loop's). */
	for (i = 0; i < b->n_cols; i++)
		if (b->cols[i].name[0] == name[0] && strcmp(b->cols[i].name, name) == 0)
			return &b->cols[i];
	return NULL;
}

bool core_board_is_terminal(const struct core_board *b, const char *col)
{
	const struct core_column *c = core_board_column(b, col);
	return c && c->terminal;
}

bool core_board_is_working(const struct core_board *b, const char *col)
{
	const struct core_column *c = core_board_column(b, col);
	return c && !c->terminal;
}

bool core_board_is_eligible(const struct core_board *b, const char *col)
{
	const struct core_column *c = core_board_column(b, col);
	return c && c->eligible;
}

const char *core_board_first_eligible(const struct core_board *b)
{
	size_t i;

	for (i = 0; b && i < b->n_cols; i++)
		if (b->cols[i].eligible)
			return b->cols[i].name;
	return NULL;
}

#define FAIL(...)                                                                             \
	do {                                                                                  \
		if (detail)                                                                   \
			snprintf(detail, detail_len, __VA_ARGS__);                            \
		return CORE_ERR_BAD_REQUEST;                                                  \
	} while (0)

enum core_rc core_board_validate(const struct core_board *b, char *detail, size_t detail_len)
{
	size_t i, j;
	bool any_eligible = false;

	if (!core_name_valid(b->name))
		FAIL("board name must match [A-Za-z0-9._-]{1,64}");
	if (b->n_cols == 0 || b->n_cols > 64)
		FAIL("a board has 1 to 64 columns");
	for (i = 0; i < b->n_cols; i++) {
		if (!core_name_valid(b->cols[i].name))
			FAIL("column name must match [A-Za-z0-9._-]{1,64}");
		if (b->cols[i].terminal && b->cols[i].eligible)
			FAIL("column %s cannot be both terminal and eligible", b->cols[i].name);
		if (b->cols[i].limit < 0 || b->cols[i].limit > CORE_LIMIT_MAX)
			FAIL("column %s: limit must be within 1..%d", b->cols[i].name,
			     CORE_LIMIT_MAX);
		if (b->cols[i].limit > 0 && b->cols[i].terminal)
			FAIL("column %s is terminal: its cards are never claimed, it takes no limit",
			     b->cols[i].name);
		any_eligible |= b->cols[i].eligible;
		for (j = 0; j < i; j++)
			if (strcmp(b->cols[i].name, b->cols[j].name) == 0)
				FAIL("duplicate column %s", b->cols[i].name);
	}
	if (!any_eligible)
		FAIL("a board needs at least one eligible column");
	if (!core_board_is_working(b, b->running))
		FAIL("running must name a working column");
	if (!core_board_is_working(b, b->waiting))
		FAIL("waiting must name a working column");
	if (!core_board_is_terminal(b, b->completed))
		FAIL("completed must name a terminal column");
	if (!core_board_is_terminal(b, b->failed))
		FAIL("failed must name a terminal column");
	if (strcmp(b->completed, b->failed) == 0)
		FAIL("completed and failed must be different columns");
	if (b->max_claims < 0 || b->max_claims > CORE_LIMIT_MAX)
		FAIL("max_claims must be within 1..%d", CORE_LIMIT_MAX);
	if (b->has_retry)
		return core_retry_validate(&b->retry, detail, detail_len);
	return CORE_OK;
}

bool core_scope_allows(const char *board, const char *one, const char *const *many)
{
	if (one && strcmp(board, one) != 0)
		return false;
	if (!many)
		return true;
	for (; *many; many++)
		if (strcmp(board, *many) == 0)
			return true;
	return false;
}
