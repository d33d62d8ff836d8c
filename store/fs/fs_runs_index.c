/* The FS twin's runs by card (DESIGN §20): for each card, the ids of its runs in the order
 * they were applied, tombstones included, so a card's history, its retention and its run
 * count read the card's runs only, never the whole run table.
 *
 * Kept by apply (a run id new to the table) and by undo (a new run rolled back), under the
 * state write lock; read under the lock. An allocation that fails while applying cannot fail
 * the commit: the index is then marked lost and every reader walks the table instead (as
 * before it existed) until the next open. */
#include "store/fs/fs.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_index.h"

#include <stdlib.h>
#include <string.h>

static void index_lose(struct fs *fs)
{
	fs->runs_index_lost = true;
}

void fs_runs_index_add(struct fs *fs, const struct core_run *r)
{
	struct fs_card_runs *l;
	char *id;

	if (fs->runs_index_lost)
		return;
	l = fs_map_get(&fs->card_runs, r->card_id);
	if (!l) {
		l = calloc(1, sizeof(*l));
		if (!l || !(l->card_id = strdup(r->card_id)) ||
		    fs_map_put(&fs->card_runs, l->card_id, l) != CORE_OK) {
			if (l)
				free(l->card_id);
			free(l);
			index_lose(fs);
			return;
		}
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		char **v = realloc(l->ids, cap * sizeof(*v));

		if (!v) {
			index_lose(fs);
			return;
		}
		l->ids = v;
		l->cap = cap;
	}
	id = strdup(r->id);
	if (!id) {
		index_lose(fs);
		return;
	}
	l->ids[l->n++] = id;
}

void fs_runs_index_drop(struct fs *fs, const struct core_run *r)
{
	struct fs_card_runs *l = fs_map_get(&fs->card_runs, r->card_id);
	size_t i;

	/* A rolled-back run is the newest of its card: found from the end. */
	for (i = l ? l->n : 0; i-- > 0;) {
		if (strcmp(l->ids[i], r->id) == 0) {
			free(l->ids[i]);
			memmove(l->ids + i, l->ids + i + 1, (l->n - i - 1) * sizeof(*l->ids));
			l->n--;
			return;
		}
	}
}

const struct fs_card_runs *fs_runs_index_get(struct fs *fs, const char *card_id, bool *ok)
{
	*ok = !fs->runs_index_lost;
	return *ok ? fs_map_get(&fs->card_runs, card_id) : NULL;
}

void fs_runs_index_release(struct fs *fs)
{
	size_t i, k;

	for (i = 0; i < fs->card_runs.cap; i++) {
		struct fs_card_runs *l =
			fs->card_runs.slots[i].key ? fs->card_runs.slots[i].val : NULL;

		if (!l)
			continue;
		for (k = 0; k < l->n; k++)
			free(l->ids[k]);
		free(l->ids);
		free(l->card_id);
		free(l);
	}
	fs_map_release(&fs->card_runs);
}
