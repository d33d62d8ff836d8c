/* The runs listing's wrapper and the helpers both twins share (DESIGN §20): the filter's
 * checks, the page's order and cursor, and freeing a page. */
#include "store/store.h"
#include "store/store_wrap.h"

#include <stdlib.h>
#include <string.h>

enum core_rc store_run_list(struct store *st, const struct store_run_filter *f,
			    struct core_run ***out, size_t *n, char **next)
{
	int64_t at;
	const char *id;

	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (next)
		*next = NULL;
	if (!st || !f || !out || !n || !next || f->limit < 1 || f->limit > 1000 ||
	    (f->card_id && !core_id_valid(f->card_id)) ||
	    (f->board && !core_name_valid(f->board)) || !store_wrap_boards_valid(f->boards) ||
	    (f->status && !core_status_valid(f->status)) ||
	    (f->after && !core_run_cursor_parse(f->after, &at, &id)))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, run_list);
	return st->ops->run_list(st, f, out, n, next);
}

void store_runs_free(struct core_run **v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		core_run_free(v[i]);
	free(v);
}

enum core_rc store_runs_finish(struct core_run **v, size_t *n, size_t limit, char **next)
{
	char cur[CORE_RUN_CURSOR_MAX];
	size_t i;

	*next = NULL;
	if (*n > 1)
		qsort(v, *n, sizeof(*v), core_run_newer_cmp);
	if (*n <= limit)
		return CORE_OK;
	core_run_cursor_format(v[limit - 1], cur, sizeof(cur));
	*next = strdup(cur);
	if (!*next)
		return CORE_ERR_NOMEM;
	for (i = limit; i < *n; i++)
		core_run_free(v[i]);
	*n = limit;
	return CORE_OK;
}
