/* Run history on the FS twin (DESIGN §20): the runs listing (a card's, or a board's by
 * status) and the retention that keeps CORE_RUN_HISTORY_MAX runs per card whole.
 *
 * A card's runs come from the runs-by-card index (fs_runs_index.c); a listing without a card
 * walks the run table (only pointers and ids are read; copies are made of the page alone). */
#include "store/fs/fs.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_txn.h"

#include <stdlib.h>
#include <string.h>

static bool run_matches(const struct core_run *r, const struct store_run_filter *f,
			bool has_after, int64_t at, const char *aid)
{
	const char *const *b;

	if (r->pruned || (f->card_id && strcmp(r->card_id, f->card_id) != 0) ||
	    (f->card_id && r->created_at < f->card_since) ||
	    (f->board && strcmp(r->board, f->board) != 0) ||
	    (f->status && strcmp(r->status, f->status) != 0) ||
	    (has_after && !core_run_after(r, at, aid)))
		return false;
	if (!f->boards)
		return true;
	for (b = f->boards; *b; b++)
		if (strcmp(*b, r->board) == 0)
			return true;
	return false;
}

/* A copy of r as a listing serves it: everything but the output. */
static struct core_run *run_dup_listed(const struct core_run *r)
{
	struct core_run tmp = *r;

	tmp.output = NULL;
	return core_run_dup(&tmp);
}

enum core_rc fs_run_list(struct store *st, const struct store_run_filter *f,
			 struct core_run ***out, size_t *n, char **next)
{
	struct fs *fs = fs_of(st);
	const struct core_run **hits = NULL, *r;
	struct core_run **page = NULL;
	size_t n_hits = 0, cap = 0, i, keep = 0;
	const char *aid = NULL;
	int64_t at = 0;
	bool has_after = f->after && core_run_cursor_parse(f->after, &at, &aid);
	enum core_rc rc = CORE_OK;

	const struct fs_card_runs *l = NULL;
	bool indexed = false;
	uint64_t need;
	size_t walk;

	pthread_rwlock_rdlock(&fs->lock);
	if (f->card_id)
		l = fs_runs_index_get(fs, f->card_id, &indexed);
	walk = indexed ? (l ? l->n : 0) : fs->runs.cap;
	for (i = 0; i < walk; i++) {
		if (indexed)
			r = fs_map_get(&fs->runs, l->ids[i]);
		else
			r = fs->runs.slots[i].key ? fs->runs.slots[i].val : NULL;
		if (!r || !run_matches(r, f, has_after, at, aid))
			continue;
		if (n_hits == cap) {
			const struct core_run **g;

			cap = cap ? cap * 2 : 64;
			g = realloc(hits, cap * sizeof(*hits));
			if (!g) {
				rc = CORE_ERR_NOMEM;
				goto out;
			}
			hits = g;
		}
		hits[n_hits++] = r;
	}
	if (n_hits > 1)
		qsort(hits, n_hits, sizeof(*hits), core_run_newer_cmp);
	/* One more than the page, so store_runs_finish knows whether a next page exists. */
	keep = n_hits < f->limit + 1 ? n_hits : f->limit + 1;
	page = calloc(keep ? keep : 1, sizeof(*page));
	if (!page) {
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	for (i = 0; i < keep; i++) {
		page[i] = run_dup_listed(hits[i]);
		if (!page[i]) {
			store_runs_free(page, i);
			page = NULL;
			rc = CORE_ERR_NOMEM;
			goto out;
		}
	}
out:
	/* The read barrier (fs_barrier.c): what was listed is shown once it is durable. */
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	free(hits);
	rc = fs_read_end(fs, need, false, rc);
	if (rc != CORE_OK) {
		if (page)
			store_runs_free(page, keep);
		return rc;
	}
	*n = keep;
	rc = store_runs_finish(page, n, f->limit, next);
	if (rc != CORE_OK) {
		store_runs_free(page, *n);
		*n = 0;
		return rc;
	}
	*out = page;
	return CORE_OK;
}

enum core_rc fs_runs_retain(struct fs_txn *t, const struct core_card *card)
{
	struct fs *fs = t->fs;
	const struct core_run **live = NULL, *r;
	const struct fs_card_runs *l;
	size_t n = 0, cap = 0, i, walk;
	bool indexed;
	enum core_rc rc = CORE_OK;

	/* The card's live runs as the transaction sees them: the published ones (from the
	 * index, or the table when it was lost), then the transaction's own new ones (a run it
	 * replaced is read through its copy). */
	l = fs_runs_index_get(fs, card->id, &indexed);
	walk = indexed ? (l ? l->n : 0) : fs->runs.cap;
	for (i = 0; i < walk + t->ch.n_runs; i++) {
		if (i < walk) {
			if (indexed)
				r = fs_map_get(&fs->runs, l->ids[i]);
			else
				r = fs->runs.slots[i].key ? fs->runs.slots[i].val : NULL;
			if (r)
				r = fs_txn_run_peek(t, r->id);
		} else {
			r = t->ch.runs[i - walk];
			if (fs_map_get(&fs->runs, r->id))
				continue; /* counted as published */
		}
		/* This card's: not those of an earlier card of its id (deleted, created again,
		 * maybe on another board), which are not its history to trim. */
		if (!r || r->pruned || strcmp(r->card_id, card->id) != 0 ||
		    strcmp(r->board, card->board) != 0 || r->created_at < card->created_at)
			continue;
		if (n == cap) {
			const struct core_run **g;

			cap = cap ? cap * 2 : 64;
			g = realloc(live, cap * sizeof(*live));
			if (!g) {
				free(live);
				return CORE_ERR_NOMEM;
			}
			live = g;
		}
		live[n++] = r;
	}
	if (n > CORE_RUN_HISTORY_MAX)
		qsort(live, n, sizeof(*live), core_run_newer_cmp);
	for (i = CORE_RUN_HISTORY_MAX; rc == CORE_OK && i < n; i++) {
		struct core_run *d;

		if (!core_run_retirable(live[i], card))
			continue;
		d = core_run_dup(live[i]);
		if (!d) {
			rc = CORE_ERR_NOMEM;
			break;
		}
		core_run_retire(d);
		d->updated_at = t->now;
		/* Replaces live[i] when it is the transaction's own copy: read no further. */
		rc = fs_txn_run_put(t, d);
	}
	free(live);
	return rc;
}

enum core_rc fs_run_output_append(struct core_run *r, const char *text)
{
	char *now = NULL;
	enum core_rc rc = core_run_output_append(r->output, text, CORE_RUN_OUTPUT_MAX, &now);

	if (rc != CORE_OK)
		return rc;
	free(r->output);
	r->output = now;
	return CORE_OK;
}
