/* The FS twin's per-board event sequence and index (DESIGN §11): each board's events carry
 * board_seq 1, 2, 3 ... without gaps, handed out under the state lock with the global seq,
 * journalled in the same line as the event, and kept in the snapshot as one counter per board
 * (the events themselves are trimmed, the counter never is). Each board also keeps its part
 * of the events tail, in order, so a board's read after a board_seq (or a seq) is a binary
 * search there, never a scan of other boards' events.
 *
 * The board lists hold pointers borrowed from the global tail (fs->ev): an event enters both
 * in apply_event, leaves both when trimmed (always its board's oldest: the tail is trimmed
 * in seq order) or popped by an undo (always its board's newest). */
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"

#include <stdlib.h>
#include <string.h>

struct fs_evboard *fs_evboard_get(struct fs *fs, const char *board, bool create)
{
	struct fs_evboard *b = fs_map_get(&fs->evboards, board);

	if (b || !create)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b || !(b->board = strdup(board)) || fs_map_put(&fs->evboards, b->board, b)) {
		if (b)
			free(b->board);
		free(b);
		return NULL;
	}
	return b;
}

enum core_rc fs_evboard_assign(struct fs *fs, struct core_event *const *ev, size_t n)
{
	struct fs_evboard *b;
	size_t i;

	/* Two passes: a change may carry several events of one board; only apply publishes. */
	for (i = 0; i < n; i++) {
		if (!(b = fs_evboard_get(fs, ev[i]->board, true)))
			return CORE_ERR_NOMEM;
		b->scratch = b->last;
	}
	for (i = 0; i < n; i++) {
		b = fs_map_get(&fs->evboards, ev[i]->board);
		ev[i]->board_seq = ++b->scratch;
	}
	return CORE_OK;
}

enum core_rc fs_evboard_reserve(struct fs *fs, const struct fs_change *ch)
{
	struct fs_evboard *b;
	size_t i;

	for (i = 0; i < ch->n_bctrs; i++)
		if (!fs_evboard_get(fs, ch->bctrs[i].board, true))
			return CORE_ERR_NOMEM;
	for (i = 0; i < ch->n_events; i++) {
		if (!(b = fs_evboard_get(fs, ch->events[i]->board, true)))
			return CORE_ERR_NOMEM;
		b->scratch = 0;
	}
	for (i = 0; i < ch->n_events; i++) {
		b = fs_map_get(&fs->evboards, ch->events[i]->board);
		if (b->scratch++)
			continue;
		/* Slide the list down once its dead prefix outweighs it (as the tail does). */
		if (b->head > 0 && b->head >= b->n - b->head) {
			memmove(b->v, b->v + b->head, (b->n - b->head) * sizeof(*b->v));
			b->n -= b->head;
			b->head = 0;
		}
	}
	for (i = 0; i < ch->n_events; i++) {
		b = fs_map_get(&fs->evboards, ch->events[i]->board);
		if (b->scratch && fs_ptrs_reserve(&b->v, &b->cap, b->n + (size_t)b->scratch))
			return CORE_ERR_NOMEM;
		b->scratch = 0;
	}
	return CORE_OK;
}

void fs_evboard_append(struct fs *fs, struct core_event *e)
{
	struct fs_evboard *b = fs_map_get(&fs->evboards, e->board); /* reserved */

	/* An event of an earlier version carries none: derived here, in replay order, which is
	 * the order it was written in, so every load derives the same numbers. */
	if (e->board_seq <= 0)
		e->board_seq = b->last + 1;
	if (e->board_seq > b->last)
		b->last = e->board_seq;
	b->v[b->n++] = e;
}

void fs_evboard_counters_apply(struct fs *fs, const struct fs_change *ch)
{
	struct fs_evboard *b;
	size_t i;

	for (i = 0; i < ch->n_bctrs; i++)
		if ((b = fs_map_get(&fs->evboards, ch->bctrs[i].board)) && ch->bctrs[i].last > b->last)
			b->last = ch->bctrs[i].last;
}

void fs_evboard_shift(struct fs *fs, const struct core_event *e)
{
	struct fs_evboard *b = fs_map_get(&fs->evboards, e->board);

	if (b && b->head < b->n && b->v[b->head] == e)
		b->head++;
}

void fs_evboard_pop(struct fs *fs, const struct core_event *e)
{
	struct fs_evboard *b = fs_map_get(&fs->evboards, e->board);

	if (b && b->n > b->head && b->v[b->n - 1] == e) {
		b->n--;
		b->last = e->board_seq - 1; /* undone: never acknowledged, handed out again */
	}
}

size_t fs_evboard_after(const struct fs_evboard *b, int64_t after, bool by_board_seq)
{
	size_t lo = b->head, hi = b->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if ((by_board_seq ? b->v[mid]->board_seq : b->v[mid]->seq) <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t fs_evboard_counters(const struct fs *fs, struct fs_bctr *out)
{
	size_t i, n = 0;

	for (i = 0; i < fs->evboards.cap; i++) {
		const struct fs_evboard *b = fs->evboards.slots[i].key ? fs->evboards.slots[i].val
									: NULL;

		if (b && b->last > 0)
			out[n++] = (struct fs_bctr){b->board, b->last};
	}
	return n;
}

void fs_evboard_release(struct fs *fs)
{
	size_t i;

	for (i = 0; i < fs->evboards.cap; i++) {
		struct fs_evboard *b = fs->evboards.slots[i].key ? fs->evboards.slots[i].val : NULL;

		if (b) {
			free(b->v);
			free(b->board);
			free(b);
		}
	}
	fs_map_release(&fs->evboards);
}
