/* The FS journal's write side: appending one checksummed record per committed change, group
 * commit (one write and one fdatasync per group), the rollback of a failed group, and the
 * acker thread that waits for deferred acknowledgements (store_ack). Recovery at open is
 * fs_replay.c; the fault-hooked I/O it writes through is fs_io.c.
 *
 * Group commit: under the state lock (so records are in commit order) a writer appends its
 * record to the journal's buffer (fs->jpend: copied, or taken whole when large) at the logical
 * end of the generation, takes a line number, drops the lock, then either becomes the one
 * flusher or waits on jcond until `synced` covers it. The flusher takes the buffer (swapping
 * in an empty one, so writers keep appending meanwhile), writes it with one pwritev(2) at its
 * offset, over the zeros pre-allocated ahead (fs_segment.c), then fdatasyncs: one write and
 * one sync for everybody appended so far, instead of a write(2) per record in the writers'
 * threads (each costs the page-cache write path of ext4 whatever its size). A failed write is
 * a failed group like a failed sync: every line past `synced` is rolled back (fs_undo.c), and
 * every file the group wrote is cut back to where the group began in it (a generation handed
 * over by a compaction too), so that none of its refused records is replayed after a crash.
 * A writer with a store_ack bound (the HTTP front end, the reaper's workers) leaves that wait
 * in its ack instead: fs_ack_wait does it on the caller's thread, fs_ack_submit hands it to
 * the acker thread, which waits for a whole queue of acks at once and calls each back.
 */
#include "store/fs/fs.h"
#include "store/fs/fs_io.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_snapshot.h"
#include "store/fs/fs_undo.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- appending and group commit ---- */

int fs_journal_open(const struct fs *fs, uint64_t gen)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/journal.%" PRIu64, fs->dir, gen);
	/* Not O_APPEND: records go at fs->jbytes, over the pre-allocated zeros (fs_segment.c). */
	return open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
}

/* Marks the store failed: writes are refused (reads keep working, /readyz answers 503) until
 * fs_recover has re-established a journal. Called with jmu held. */
static void fail_locked(struct fs *fs, const char *what, int err)
{
	if (!fs->failed)
		fs_log_quiet(fs, &fs->quiet_fail,
			     "%s failed: %s; writes refused until a fresh snapshot is durable", what,
			     strerror(err));
	fs->failed = true;
	fs->stats.failed = true;
	/* The compactor thread retries recovery too (cmu is a leaf: taking it here is fine). */
	pthread_mutex_lock(&fs->cmu);
	fs->recover_wanted = true;
	pthread_cond_signal(&fs->ccond);
	pthread_mutex_unlock(&fs->cmu);
}

/* ---- the journal's buffer (struct fs_jpend) ----
 * Records up to FS_JPEND_COPY_MAX bytes are copied into a FS_JPEND_BUF buffer (the claim
 * cycle's are ~0.5 KiB, ~10-50 to a group); a larger one, or one that no longer fits, is taken
 * whole from its writer: a big record is never copied, and the copies stay within two buffers
 * per store (the one writers fill, the one the flusher writes). A full buffer also ends the
 * acker's group window (group_wait): the group goes at once. */
#define FS_JPEND_COPY_MAX (4u * 1024)
#define FS_JPEND_BUF (64u * 1024)

static bool jpend_in_buf(const struct fs_jpend *p, const void *at)
{
	uintptr_t a = (uintptr_t)at, b = (uintptr_t)p->buf;

	return p->buf && a >= b && a < b + FS_JPEND_BUF;
}

/* Appends the record *rec (len > 0 bytes): copied, or taken (*rec set to NULL). NOMEM leaves
 * p as it was. */
static enum core_rc jpend_add(struct fs_jpend *p, char **rec, size_t len)
{
	struct iovec *last = p->n_iov ? &p->iov[p->n_iov - 1] : NULL, *nv;
	bool copy;
	char *at;

	if (len <= FS_JPEND_COPY_MAX && !p->buf)
		p->buf = malloc(FS_JPEND_BUF); /* none: the record is taken whole instead */
	copy = p->buf && len <= FS_JPEND_COPY_MAX && len <= FS_JPEND_BUF - p->used;
	at = copy ? p->buf + p->used : NULL;
	if (copy && last && jpend_in_buf(p, last->iov_base) &&
	    (char *)last->iov_base + last->iov_len == at) {
		memcpy(at, *rec, len); /* continues the run of copies the last piece is */
		last->iov_len += len;
		p->used += len;
		p->bytes += len;
		return CORE_OK;
	}
	if (p->n_iov == p->cap_iov) {
		nv = realloc(p->iov, (p->cap_iov ? p->cap_iov * 2 : 16) * sizeof(*nv));
		if (!nv)
			return CORE_ERR_NOMEM;
		p->iov = nv;
		p->cap_iov = p->cap_iov ? p->cap_iov * 2 : 16;
	}
	if (copy) {
		memcpy(at, *rec, len);
		p->iov[p->n_iov++] = (struct iovec){.iov_base = at, .iov_len = len};
		p->used += len;
	} else {
		p->iov[p->n_iov++] = (struct iovec){.iov_base = *rec, .iov_len = len};
		*rec = NULL;
	}
	p->bytes += len;
	return CORE_OK;
}

/* Empties p, freeing the records it took; keeps its room for the next group. */
static void jpend_clear(struct fs_jpend *p)
{
	size_t i;

	for (i = 0; i < p->n_iov; i++)
		if (!jpend_in_buf(p, p->iov[i].iov_base))
			free(p->iov[i].iov_base);
	p->n_iov = 0;
	p->used = 0;
	p->bytes = 0;
}

void fs_jpend_release(struct fs_jpend *p)
{
	jpend_clear(p);
	free(p->buf);
	free(p->iov);
	*p = (struct fs_jpend){0};
}

enum core_rc fs_journal_append(struct fs *fs, char **line, size_t len, uint64_t *seq)
{
	enum core_rc rc;

	*seq = 0;
	pthread_mutex_lock(&fs->jmu);
	/* Never into the range the grower is zero-filling: only when the zeros ahead ran out
	 * before it finished (it runs when half a step is left). */
	while (!fs->failed && fs->growing && fs->jbytes + len > fs->grow_from)
		pthread_cond_wait(&fs->jcond, &fs->jmu);
	rc = fs->failed ? CORE_ERR_STORE_UNAVAILABLE : jpend_add(&fs->jpend, line, len);
	if (rc != CORE_OK) {
		pthread_mutex_unlock(&fs->jmu);
		return rc;
	}
	/* jbytes only moves under the state write lock, which the caller holds. */
	fs->jbytes += len;
	fs->stats.journal_bytes = fs->jbytes;
	if (fs->jbytes > fs->stats.journal_alloc_bytes)
		fs->stats.journal_alloc_bytes = fs->jbytes; /* appended past the zeros */
	fs->stats.commits++;
	fs_segment_poke_locked(fs);
	*seq = ++fs->appended;
	fs->n_inflight++; /* until its writer leaves fs_journal_wait */
	if (fs->acker_waiting && fs->jpend.bytes >= FS_JPEND_BUF)
		pthread_cond_signal(&fs->ackcond);
	pthread_mutex_unlock(&fs->jmu);
	return CORE_OK;
}

/* Undoes every transaction whose line is not durable (fs_undo.c) and forgets those lines:
 * the current generation is cut back to its durable prefix (best effort: fs_recover rewrites
 * the state anyway) and what of them was not written yet is dropped. Called by the one thread
 * holding the flusher role, with no lock held. */
static void rollback(struct fs *fs)
{
	uint64_t synced, bytes;

	pthread_rwlock_wrlock(&fs->lock);
	pthread_mutex_lock(&fs->jmu);
	synced = fs->synced;
	bytes = fs->jsynced_bytes;
	pthread_mutex_unlock(&fs->jmu);
	fs_undo_rollback(fs, synced);
	pthread_mutex_lock(&fs->jmu);
	jpend_clear(&fs->jpend);
	if (ftruncate(fs->jfd, (off_t)bytes) == 0) {
		fs->jbytes = bytes;
		fs->stats.journal_bytes = bytes;
		fs_segment_cut_locked(fs, bytes);
	}
	fs->appended = fs->synced;
	pthread_mutex_unlock(&fs->jmu);
	pthread_rwlock_unlock(&fs->lock);
}

/* Writes p at `off` of fd, in as few pwritev calls as the iovec limit allows (counted in
 * *calls). 0 or an errno. */
static int jpend_write(struct fs *fs, int fd, struct fs_jpend *p, uint64_t off, uint64_t *calls)
{
	size_t i = 0, skip = 0; /* written so far: p->iov[0 .. i) and skip bytes of p->iov[i] */
	struct iovec first;
	ssize_t w;
	int n;

	while (i < p->n_iov) {
		n = p->n_iov - i < IOV_MAX ? (int)(p->n_iov - i) : IOV_MAX;
		first = p->iov[i];
		p->iov[i].iov_base = (char *)first.iov_base + skip;
		p->iov[i].iov_len = first.iov_len - skip;
		w = fs_io_pwritev(fs, fd, &p->iov[i], n, off);
		(*calls)++;
		p->iov[i] = first; /* jpend_clear frees the records taken by their own address */
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		off += (uint64_t)w;
		for (skip += (size_t)w; i < p->n_iov && skip >= p->iov[i].iov_len; i++)
			skip -= p->iov[i].iov_len;
	}
	return 0;
}

/* A generation's part of a group: its pending records (which end at `end`), then its sync.
 * 0 or an errno, with *what saying which step failed. */
static int gen_flush(struct fs *fs, int fd, struct fs_jpend *p, uint64_t end, const char **what,
		     uint64_t *calls)
{
	int err;

	*what = "journal write";
	if (p->bytes && (err = jpend_write(fs, fd, p, end - p->bytes, calls)) != 0)
		return err;
	*what = "journal fdatasync";
	return fs_io_sync(fs, fd) == 0 ? 0 : errno;
}

/* The flusher's write and sync of every generation handed over, then of the current one (its
 * records `cur`, ending at `end`); the old ones are closed and freed. 0 or an errno. */
static int flush_all(struct fs *fs, int fd, struct fs_jpend *cur, uint64_t end,
		     struct fs_jold *old, size_t n_old, const char **what, uint64_t *calls)
{
	int err = 0;
	size_t i;

	for (i = 0; i < n_old && !err; i++)
		err = gen_flush(fs, old[i].fd, &old[i].pend, old[i].end, what, calls);
	if (!err)
		err = gen_flush(fs, fd, cur, end, what, calls);
	for (i = 0; i < n_old; i++) {
		/* A failed group refuses all its lines, also those it wrote (or even synced) to
		 * an earlier generation: that file is cut back to where the group began in it
		 * (all before is durable), so a crash before the recovery's snapshot replays
		 * none of them. Best effort, as the rollback's cut of the current one. */
		if (err && ftruncate(old[i].fd, (off_t)(old[i].end - old[i].pend.bytes)) != 0)
			fprintf(stderr, "boardd: fs store %s: cutting a refused group: %s\n",
				fs->dir, strerror(errno));
		close(old[i].fd);
		fs_jpend_release(&old[i].pend);
	}
	free(old);
	return err;
}

/* With jmu held: returns once line `seq` is durable, or STORE_UNAVAILABLE once it was rolled
 * back after a failed write or sync. The caller becomes the flusher for every line appended so
 * far when nobody else is; jmu is dropped while it writes and syncs, or rolls back. */
static enum core_rc wait_locked(struct fs *fs, uint64_t seq)
{
	uint64_t target, bytes, start, gen, calls;
	struct fs_jpend mine;
	struct fs_jold *old;
	const char *what = NULL;
	int fd, err;
	size_t n_old;

	while (fs->synced < seq) {
		if (fs->flushing) {
			pthread_cond_wait(&fs->jcond, &fs->jmu);
			continue;
		}
		if (fs->failed) {
			/* Lines past `synced` were undone and forgotten: this one with them. */
			if (fs->appended == fs->synced)
				return CORE_ERR_STORE_UNAVAILABLE;
			fs->flushing = true;
			pthread_mutex_unlock(&fs->jmu);
			rollback(fs);
			pthread_mutex_lock(&fs->jmu);
			fs->flushing = false;
			pthread_cond_broadcast(&fs->jcond);
			continue;
		}
		/* Become the flusher for every line appended so far: take their records (writers
		 * go on in the spare buffer) and the generations handed over. */
		fs->flushing = true;
		target = fs->appended;
		bytes = fs->jbytes;
		gen = fs->gen;
		fd = fs->jfd;
		old = fs->old;
		n_old = fs->n_old;
		fs->old = NULL;
		fs->n_old = 0;
		mine = fs->jpend;
		fs->jpend = fs->jspare;
		fs->jspare = (struct fs_jpend){0};
		pthread_mutex_unlock(&fs->jmu);
		calls = 0;
		start = bytes - mine.bytes;
		err = flush_all(fs, fd, &mine, bytes, old, n_old, &what, &calls);
		jpend_clear(&mine);
		pthread_mutex_lock(&fs->jmu);
		fs->jspare = mine;
		fs->stats.syncs += 1 + n_old;
		fs->stats.writes += calls;
		fs->flushing = false;
		if (err) {
			/* The loop rolls back next, cutting the current generation; when a
			 * compaction handed this one over meanwhile (it is in fs->old, open until
			 * the next flusher or the recovery), its refused lines are cut here. */
			if (gen != fs->gen && ftruncate(fd, (off_t)start) != 0)
				fprintf(stderr, "boardd: fs store %s: cutting a refused group: %s\n",
					fs->dir, strerror(errno));
			fail_locked(fs, what, err);
		} else if (target > fs->synced) {
			metrics_hist_observe(&fs->group_width, METRICS_B_WIDTH, target - fs->synced);
			/* atomic: fs_card_durable reads it without jmu (every write is under it) */
			__atomic_store_n(&fs->synced, target, __ATOMIC_RELEASE);
			if (gen == fs->gen && bytes > fs->jsynced_bytes)
				fs->jsynced_bytes = bytes;
		}
		pthread_cond_broadcast(&fs->jcond);
	}
	return CORE_OK;
}

/* With jmu held: `lines` appended lines have had their outcome told to their writers. */
static void inflight_done_locked(struct fs *fs, size_t lines)
{
	fs->n_inflight -= lines;
	/* fs_recover takes writes again only once every writer of the failed epoch is out. */
	if (fs->failed && !fs->n_inflight)
		pthread_cond_broadcast(&fs->jcond);
}

void fs_journal_flush(struct fs *fs)
{
	pthread_mutex_lock(&fs->jmu);
	(void)wait_locked(fs, fs->appended);
	pthread_mutex_unlock(&fs->jmu);
}

enum core_rc fs_journal_durable(struct fs *fs, uint64_t seq)
{
	enum core_rc rc;

	pthread_mutex_lock(&fs->jmu);
	rc = wait_locked(fs, seq);
	pthread_mutex_unlock(&fs->jmu);
	return rc;
}

enum core_rc fs_journal_wait(struct fs *fs, uint64_t seq)
{
	enum core_rc rc;

	pthread_mutex_lock(&fs->jmu);
	rc = wait_locked(fs, seq);
	inflight_done_locked(fs, 1);
	pthread_mutex_unlock(&fs->jmu);
	return rc;
}

/* ---- deferred acknowledgements (store_ack): the acker thread ----
 *
 * Front-end threads hand their owed waits here instead of blocking in fs_journal_wait. The
 * acker takes the whole queue at once, waits (as the flusher, or behind another one) for its
 * highest line, tells each ack its outcome and calls it back; acks queued meanwhile form the
 * next group. Each ack's outcome is decided under jmu before its lines leave n_inflight, so a
 * recovery after a failed sync never starts while an ack of the failed epoch is untold. */

void fs_ack_submit(struct store *st, struct store_ack *ack)
{
	struct fs *fs = fs_of(st);
	bool queued;

	pthread_mutex_lock(&fs->jmu);
	queued = fs->acker_started && !fs->acker_stop;
	if (queued) {
		if (fs->ack_tail)
			fs->ack_tail->next = ack;
		else
			fs->ack_head = ack;
		fs->ack_tail = ack;
		fs->ack_len++;
		/* Wake the acker only when it waits and this ack completes what it waits for. */
		if (fs->acker_waiting && fs->ack_len >= fs->ack_want)
			pthread_cond_signal(&fs->ackcond);
	}
	pthread_mutex_unlock(&fs->jmu);
	if (!queued) /* no acker (it failed to start, or the store closes): wait here */
		ack->done(ack, fs_ack_wait(st, ack));
}

enum core_rc fs_ack_wait(struct store *st, struct store_ack *ack)
{
	struct fs *fs = fs_of(st);
	enum core_rc rc;

	pthread_mutex_lock(&fs->jmu);
	rc = wait_locked(fs, ack->seq);
	inflight_done_locked(fs, ack->lines);
	pthread_mutex_unlock(&fs->jmu);
	if (rc == CORE_OK && ack->last_event)
		fs_events_publish(fs, ack->last_event);
	if (rc == CORE_OK && ack->compact)
		fs_compactor_poke(fs);
	return rc;
}

/* The group-commit window. Every sync costs the same whatever it covers (on the reference VM
 * about 0.7 ms of device time and a fixed CPU cost in the block layer), so under concurrency
 * it pays to let a group fill a little before syncing it: when the last group had at least
 * FS_GROUP_MIN writers, the acker waits, at most FS_GROUP_WAIT_US, until as many are queued
 * again. A lone writer never waits (its groups are of one). Measured with the claim cycle at
 * 32 workers (bench/loadgen, three 8 s windows each): ~7 journal lines per sync became ~10,
 * and 1190-1330 cycles/s became 1600-1690 (with the wake-only-when-needed change of
 * fs_ack_submit); a fixed 300 us wait gave ~14 lines per sync but only 1310-1450. */
#ifndef FS_GROUP_MIN
#define FS_GROUP_MIN 4
#endif
#ifndef FS_GROUP_WAIT_US /* -D for a bench build that tries another window */
#define FS_GROUP_WAIT_US 250
#endif

static void group_wait(struct fs *fs, size_t prev)
{
	struct timespec until;

	if (prev < FS_GROUP_MIN || fs->ack_len >= prev || fs->acker_stop)
		return;
	clock_gettime(CLOCK_MONOTONIC, &until);
	core_timespec_add_ns(&until, (int64_t)FS_GROUP_WAIT_US * 1000);
	fs->ack_want = prev;
	fs->acker_waiting = true;
	while (fs->ack_len < prev && fs->jpend.bytes < FS_JPEND_BUF && !fs->acker_stop)
		if (pthread_cond_timedwait(&fs->ackcond, &fs->jmu, &until) != 0)
			break; /* the window closed */
	fs->acker_waiting = false;
}

static void *acker_main(void *arg)
{
	struct fs *fs = arg;
	struct store_ack *batch, *a, *next;
	enum core_rc rc;
	uint64_t target;
	int64_t last_event;
	size_t prev = 0;
	bool compact;

	pthread_mutex_lock(&fs->jmu);
	for (;;) {
		fs->ack_want = 1;
		fs->acker_waiting = true;
		while (!fs->ack_head && !fs->acker_stop)
			pthread_cond_wait(&fs->ackcond, &fs->jmu);
		fs->acker_waiting = false;
		if (!fs->ack_head)
			break; /* stopping, and every ack was told */
		group_wait(fs, prev);
		batch = fs->ack_head;
		prev = fs->ack_len;
		fs->ack_head = fs->ack_tail = NULL;
		fs->ack_len = 0;
		target = 0;
		for (a = batch; a; a = a->next)
			if (a->seq > target)
				target = a->seq;
		(void)wait_locked(fs, target);
		/* Lines up to `synced` are durable; the rest were rolled back with their writes. */
		last_event = 0;
		compact = false;
		for (a = batch; a; a = a->next) {
			a->st = a->seq <= fs->synced ? &fs->base : NULL; /* NULL: failed */
			inflight_done_locked(fs, a->lines);
			if (a->st && a->last_event > last_event)
				last_event = a->last_event;
			compact |= a->st && a->compact;
		}
		pthread_mutex_unlock(&fs->jmu);
		if (last_event)
			fs_events_publish(fs, last_event);
		if (compact)
			fs_compactor_poke(fs);
		for (a = batch; a; a = next) {
			next = a->next; /* a belongs to its owner once called back */
			rc = a->st ? CORE_OK : CORE_ERR_STORE_UNAVAILABLE;
			a->done(a, rc);
		}
		pthread_mutex_lock(&fs->jmu);
	}
	pthread_mutex_unlock(&fs->jmu);
	return NULL;
}

enum core_rc fs_acker_start(struct fs *fs)
{
	if (pthread_create(&fs->acker, NULL, acker_main, fs) != 0)
		return CORE_ERR_INTERNAL;
	pthread_mutex_lock(&fs->jmu);
	fs->acker_started = true;
	pthread_mutex_unlock(&fs->jmu);
	return CORE_OK;
}

/* Tells every queued ack, then joins the thread; later submits wait in their own thread. */
void fs_acker_stop(struct fs *fs)
{
	bool started;

	pthread_mutex_lock(&fs->jmu);
	started = fs->acker_started;
	fs->acker_stop = true;
	pthread_cond_signal(&fs->ackcond);
	pthread_mutex_unlock(&fs->jmu);
	if (started)
		pthread_join(fs->acker, NULL);
	pthread_mutex_lock(&fs->jmu);
	fs->acker_started = false;
	pthread_mutex_unlock(&fs->jmu);
}

void fs_events_publish(struct fs *fs, int64_t seq)
{
	pthread_mutex_lock(&fs->evmu);
	if (seq > fs->ev_visible) {
		fs->ev_visible = seq;
		pthread_cond_broadcast(&fs->evcond);
	}
	pthread_mutex_unlock(&fs->evmu);
}
