/* Reads of the FS twin's events tail (DESIGN §10): a board's events by board_seq, or the
 * events of several boards by seq, with the long-poll that waits for the next durable one. */
#include "store/fs/fs.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_ops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- events ---- */

/* First tail index whose seq is > after (the tail is in seq order). */
static size_t tail_after(const struct fs *fs, int64_t after)
{
	size_t lo = fs->ev_head, hi = fs->ev_n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (fs->ev[mid]->seq <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* One board's durable events after `after` (a board_seq when by_board_seq, else a seq),
 * read off the board's own list. *next: the last one served, else where the board stands
 * among the durable events (its last durable board_seq, or `visible`). */
static enum core_rc events_collect_board(struct fs *fs, const char *board, bool by_board_seq,
					 int64_t after, int64_t visible, size_t limit,
					 struct core_event *v, size_t *n, int64_t *next)
{
	const struct fs_evboard *b;
	enum core_rc rc = CORE_OK;
	size_t i;

	pthread_rwlock_rdlock(&fs->lock);
	*next = by_board_seq ? after : (after > visible ? after : visible);
	b = fs_evboard_get(fs, board, false);
	for (i = b ? fs_evboard_after(b, after, by_board_seq) : 0;
	     b && i < b->n && b->v[i]->seq <= visible; i++) {
		if (*n == limit) {
			if (!by_board_seq)
				*next = v[*n - 1].seq;
			break;
		}
		rc = core_event_copy(&v[*n], b->v[i]);
		if (rc != CORE_OK)
			break;
		(*n)++;
		if (by_board_seq)
			*next = b->v[i]->board_seq;
	}
	pthread_rwlock_unlock(&fs->lock);
	return rc;
}

/* Copies matching durable events in (after, visible] into v (capacity limit). *next becomes
 * the seq to resume from: the last one served, or `visible` when everything was scanned. */
static enum core_rc events_collect(struct fs *fs, const char *board, const char *const *boards,
				   int64_t after, int64_t visible, size_t limit,
				   struct core_event *v, size_t *n, int64_t *next)
{
	enum core_rc rc = CORE_OK;
	size_t i;

	/* One board: its own list, not a scan of everybody's events. */
	if (board && core_scope_allows(board, NULL, boards))
		return events_collect_board(fs, board, false, after, visible, limit, v, n, next);
	*next = after > visible ? after : visible;
	pthread_rwlock_rdlock(&fs->lock);
	for (i = tail_after(fs, after); i < fs->ev_n && fs->ev[i]->seq <= visible; i++) {
		const struct core_event *e = fs->ev[i];

		if (!core_scope_allows(e->board, board, boards))
			continue;
		if (*n == limit) {
			*next = v[*n - 1].seq;
			break;
		}
		rc = core_event_copy(&v[*n], e);
		if (rc != CORE_OK)
			break;
		(*n)++;
	}
	pthread_rwlock_unlock(&fs->lock);
	return rc;
}

static enum core_rc events_list(struct fs *fs, const char *board, const char *const *boards,
			       bool by_board_seq, int64_t after, size_t limit, int64_t wait_ms,
			       struct core_event **out, size_t *n, int64_t *next);

enum core_rc fs_events_list(struct store *st, const char *board, const char *const *boards,
			    int64_t after, size_t limit, int64_t wait_ms, struct core_event **out,
			    size_t *n, int64_t *next)
{
	return events_list(fs_of(st), board, boards, false, after, limit, wait_ms, out, n, next);
}

enum core_rc fs_events_list_board(struct store *st, const char *board, int64_t after,
				  size_t limit, int64_t wait_ms, struct core_event **out,
				  size_t *n, int64_t *next)
{
	return events_list(fs_of(st), board, NULL, true, after, limit, wait_ms, out, n, next);
}

static enum core_rc events_list(struct fs *fs, const char *board, const char *const *boards,
			       bool by_board_seq, int64_t after, size_t limit, int64_t wait_ms,
			       struct core_event **out, size_t *n, int64_t *next)
{
	struct core_event *v = calloc(limit, sizeof(*v));
	struct timespec deadline;
	int64_t visible;
	enum core_rc rc;
	bool waited_out = false;
	int w = 0;

	if (!v)
		return CORE_ERR_NOMEM;
	if (wait_ms < 0) /* STORE_EVENTS_NO_WAIT: this tail has no holes to wait for */
		wait_ms = 0;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	core_timespec_add_ns(&deadline, (int64_t)wait_ms * 1000000);
	for (;;) {
		pthread_mutex_lock(&fs->evmu);
		visible = fs->ev_visible;
		pthread_mutex_unlock(&fs->evmu);
		rc = by_board_seq ? events_collect_board(fs, board, true, after, visible, limit,
							  v, n, next)
				  : events_collect(fs, board, boards, after, visible, limit, v, n,
						   next);
		if (rc != CORE_OK || *n > 0 || wait_ms == 0 || waited_out)
			break;
		/* Nothing for this caller yet: sleep until a newer event is durable. */
		after = *next;
		pthread_mutex_lock(&fs->evmu);
		while (fs->ev_visible == visible && !fs->closing && w != ETIMEDOUT)
			w = pthread_cond_timedwait(&fs->evcond, &fs->evmu, &deadline);
		waited_out = w == ETIMEDOUT || fs->closing;
		pthread_mutex_unlock(&fs->evmu);
	}
	if (rc != CORE_OK) {
		store_events_free(v, *n);
		*n = 0;
		*next = 0;
		return rc;
	}
	*out = v;
	return CORE_OK;
}
