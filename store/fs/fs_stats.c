/* store_ops.stats for the FS twin: cards by board and state and the claims from the in-memory
 * index under the read lock (one board: the state lists' lengths; several: a pass over the
 * state lists, O(cards)), expired claims off the top of the claimed heap, the journal's
 * counters. */
#include "store/fs/fs.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_ops.h"

#include <stdlib.h>
#include <string.h>

/* Expired claims in the claimed heap below i: the heap is ordered by lease expiry, so a live
 * claim has only live claims under it. Depth is log2(claims). */
static size_t expired_below(const struct fs *fs, size_t i, int64_t now)
{
	struct core_card v;

	if (i >= fs->n_claimed || !core_claim_expired(fs_card_view(fs->claimed[i]->card, &v), now))
		return 0;
	return 1 + expired_below(fs, 2 * i + 1, now) + expired_below(fs, 2 * i + 2, now);
}

static bool board_has_column(const struct core_board *b, const char *state)
{
	size_t j;

	for (j = 0; j < b->n_cols; j++)
		if (strcmp(b->cols[j].name, state) == 0)
			return true;
	return false;
}

/* Every board's columns (zeros included) and any other state a card of the board sits in. */
static enum core_rc cards_collect(const struct fs *fs, struct metrics_sink *out)
{
	size_t *tally = calloc(fs->n_boards + 1, sizeof(*tally));
	size_t s, i, k, j;

	if (!tally)
		return CORE_ERR_NOMEM;
	for (s = 0; s < fs->post_states.cap; s++) {
		const struct fs_post *p = fs->post_states.slots[s].val;

		if (!fs->post_states.slots[s].key || !p)
			continue;
		memset(tally, 0, (fs->n_boards + 1) * sizeof(*tally));
		/* One board (the usual case): the list's length is the count, O(1). */
		if (fs->n_boards == 1)
			tally[0] = p->n;
		for (i = 0; fs->n_boards != 1 && i < p->n; i++) {
			const char *board = p->v[i]->card->board;

			for (k = 0; k < fs->n_boards && strcmp(fs->boards[k].name, board); k++)
				;
			tally[k]++;
		}
		for (k = 0; k < fs->n_boards; k++) {
			const char *labels[2] = {fs->boards[k].name, p->key};

			if (tally[k] || board_has_column(&fs->boards[k], p->key))
				metrics_sink_value(out, METRICS_CARDS, labels, (double)tally[k]);
		}
	}
	for (k = 0; k < fs->n_boards; k++) {
		for (j = 0; j < fs->boards[k].n_cols; j++) {
			const char *labels[2] = {fs->boards[k].name, fs->boards[k].cols[j].name};

			if (!fs_post_state(fs, labels[1]))
				metrics_sink_value(out, METRICS_CARDS, labels, 0);
		}
	}
	free(tally);
	return CORE_OK;
}

enum core_rc fs_stats(struct store *st, struct metrics_sink *out)
{
	struct fs *fs = fs_of(st);
	int64_t now = store_now(st);
	struct store_fs_stats js;
	enum core_rc rc;
	size_t held, expired;

	pthread_rwlock_rdlock(&fs->lock);
	rc = cards_collect(fs, out);
	held = fs->n_claimed;
	expired = expired_below(fs, 0, now);
	pthread_rwlock_unlock(&fs->lock);
	if (rc != CORE_OK)
		return rc;
	metrics_sink_value(out, METRICS_CLAIMS_HELD, NULL, (double)held);
	metrics_sink_value(out, METRICS_CLAIMS_EXPIRED, NULL, (double)expired);

	pthread_mutex_lock(&fs->jmu);
	js = fs->stats;
	pthread_mutex_unlock(&fs->jmu);
	metrics_sink_value(out, METRICS_FS_LINES, NULL, (double)js.commits);
	metrics_sink_value(out, METRICS_FS_SYNCS, NULL, (double)js.syncs);
	metrics_sink_hist(out, METRICS_FS_GROUP_WIDTH, NULL, &fs->group_width);
	metrics_sink_value(out, METRICS_FS_COMPACTIONS, NULL, (double)js.compactions);
	metrics_sink_value(out, METRICS_FS_JOURNAL_BYTES, NULL, (double)js.journal_bytes);
	metrics_sink_value(out, METRICS_FS_REFUSING, NULL, js.failed ? 1 : 0);
	return CORE_OK;
}
