/* Writing snapshots and compaction of the FS twin, the recovery after a failed sync (the same
 * steps), the compactor thread, and the store's monotonic clock (fs_mono_ms). Loading a
 * snapshot at open is fs_snapload.c's.
 *
 * A snapshot (snapshot.bin) is the whole state as binary change records (fs_codec.c) in
 * chunks, closed by an end record naming generation G: replay resumes at journal.G. The
 * snapshot.json of earlier versions (fs_legacy.c) is still loaded when there is no .bin, and
 * deleted after the first binary snapshot. Compaction (background thread, or store_fs_compact)
 * does, in order:
 *   1. create journal.G+1 and fsync the directory, without the state lock;
 *   2. under the write lock, briefly: capture pointers to every published object (they are
 *      immutable; replaced ones go to the graveyard while snap_active) and switch writers to
 *      journal.G+1 (the old fd is handed to the next group-commit flusher for its last sync);
 *   3. without the lock: write snapshot.bin.tmp and fsync it; wait until every journal line
 *      captured in step 2 is durable (`synced` reaches `appended` as it was then); rename,
 *      fsync the directory;
 *   4. delete journal generations below G+1 and empty the graveyard.
 * The rule of step 3: a snapshot is installed only once everything it holds is durable. What
 * step 2 captures is memory, which includes commits appended but not yet synced (their records
 * in journal G's buffer, handed over, or written and not synced). If their group's write or
 * sync fails they are rolled back, and so is every commit appended after them (in journal
 * G+1 too: rollback undoes every line past `synced`, and G+1's are never synced before G's),
 * and their writers are refused; a snapshot holding them, once renamed, would make them
 * durable across a crash before the recovery. So the wait either succeeds, or finds them
 * rolled back: then the snapshot is dropped (the temp file unlinked, the compaction fails),
 * snapshot.bin and the journals stay, the flusher has cut the refused records from every
 * generation its group wrote (fs_journal.c), and the recovery writes the rolled-back state.
 * The wait is that of a synchronous writer (fs_journal_durable): it waits for the flusher
 * under way, or flushes itself when nobody does (the lines may be owed by an ack not handed
 * over yet); it holds only snapmu, which no flusher or rollback takes. Usually the group was
 * flushed while the snapshot was written, and the wait is one check.
 * A crash or an error anywhere leaves either the old snapshot with every journal it needs, or
 * the new one: nothing acknowledged depends on the compaction succeeding, and nothing refused
 * comes back. The state lock is held for step 2 only: 3-6 ms at 100 000 cards (pointers, no
 * copies).
 *
 * The same steps re-establish a journal after a failed sync (fs_recover): from the rolled-back
 * memory, abandoning the old generation's fd, and writes resume once the snapshot is durable.
 * There memory is rolled back to `synced` and writes are refused, so the wait of step 3 finds
 * everything captured durable at once.
 */
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_codec.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_io.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct snap {
	uint64_t gen;
	struct fs_counters ctr;
	struct core_board *boards;
	size_t n_boards;
	const struct fs_card **cards;
	uint64_t *ords;
	size_t n_cards;
	const struct core_run **runs;
	size_t n_runs;
	const struct core_event **events;
	size_t n_events;
	struct fs_kv *kvs; /* copies: effect records are few and small */
	size_t n_kvs;
	struct fs_snap_floor *floors; /* ids borrowed: a floor is never freed while open */
	size_t n_floors;
	struct fs_bctr *bctrs; /* boards borrowed: an evboard is never freed while open */
	size_t n_bctrs;
};

static void snap_release(struct snap *s)
{
	store_boards_free(s->boards, s->n_boards);
	free(s->cards);
	free(s->ords);
	free(s->runs);
	free(s->events);
	while (s->n_kvs--) {
		free(s->kvs[s->n_kvs].key);
		free(s->kvs[s->n_kvs].val);
	}
	free(s->kvs);
	free(s->floors);
	free(s->bctrs);
	memset(s, 0, sizeof(*s));
}

/* Under the state write lock: pointers only, O(n) without allocation per object. */
static enum core_rc snap_capture(struct fs *fs, struct snap *s)
{
	size_t i;

	s->ctr = fs->ctr;
	s->boards = calloc(fs->n_boards ? fs->n_boards : 1, sizeof(*s->boards));
	s->cards = calloc(fs->cards.n + 1, sizeof(*s->cards));
	s->ords = calloc(fs->cards.n + 1, sizeof(*s->ords));
	s->runs = calloc(fs->runs.n + 1, sizeof(*s->runs));
	s->events = calloc(fs->ev_n - fs->ev_head + 1, sizeof(*s->events));
	s->floors = calloc(fs->floors.n + 1, sizeof(*s->floors));
	s->bctrs = calloc(fs->evboards.n + 1, sizeof(*s->bctrs));
	if (!s->boards || !s->cards || !s->ords || !s->runs || !s->events || !s->floors ||
	    !s->bctrs)
		return CORE_ERR_NOMEM;
	/* By value: a counter moves with later commits. */
	s->n_bctrs = fs_evboard_counters(fs, s->bctrs);
	/* By value: a floor's epoch is raised in place by later commits. */
	for (i = 0; i < fs->floors.cap; i++) {
		const struct fs_floor *fl = fs->floors.slots[i].key ? fs->floors.slots[i].val : NULL;

		if (fl)
			s->floors[s->n_floors++] = (struct fs_snap_floor){fl->id, fl->epoch};
	}
	for (; s->n_boards < fs->n_boards; s->n_boards++)
		if (core_board_copy(&s->boards[s->n_boards], &fs->boards[s->n_boards]))
			return CORE_ERR_NOMEM;
	for (i = 0; i < fs->n_order; i++) {
		if (fs->order[i]->dead)
			continue;
		s->cards[s->n_cards] = fs->order[i]->card;
		s->ords[s->n_cards++] = fs->order[i]->ord;
	}
	for (i = 0; i < fs->runs.cap; i++)
		if (fs->runs.slots[i].key)
			s->runs[s->n_runs++] = fs->runs.slots[i].val;
	for (i = fs->ev_head; i < fs->ev_n; i++)
		s->events[s->n_events++] = fs->ev[i];
	s->kvs = calloc(fs->kv.n + fs->subs.n + fs->idem.n + 1, sizeof(*s->kvs));
	if (!s->kvs)
		return CORE_ERR_NOMEM;
	for (i = 0; i < fs->kv.cap + fs->subs.cap + fs->idem.cap; i++) {
		const struct fs_map *m = i < fs->kv.cap				? &fs->kv
					 : i < fs->kv.cap + fs->subs.cap	? &fs->subs
									: &fs->idem;
		size_t k = m == &fs->kv ? i : m == &fs->subs ? i - fs->kv.cap
							     : i - fs->kv.cap - fs->subs.cap;
		const struct fs_kv *kv = m->slots[k].val;
		struct fs_kv *c = &s->kvs[s->n_kvs];

		if (!m->slots[k].key)
			continue;
		if (m == &fs->idem && fs_idem_expired(fs, kv))
			continue; /* an expired key goes with the journal it was in (§18) */
		c->key = strdup(kv->key);
		c->val = strdup(kv->val);
		c->due = kv->due;
		s->n_kvs++;
		if (!c->key || !c->val)
			return CORE_ERR_NOMEM;
	}
	return CORE_OK;
}

/* Objects per snapshot chunk: small enough that a chunk is a few hundred KiB, large enough
 * that the per-record overhead vanishes. */
#define SNAP_CHUNK 512

/* Writes one record (freed); false on any failure. */
static bool emit(FILE *f, char *rec, const size_t *len)
{
	bool ok = rec && fwrite(rec, 1, *len, f) == *len;

	free(rec);
	return ok;
}

/* Boards first (cards refer to them), then cards in creation order, runs, events in seq
 * order, each in chunks; then the end record that makes the file complete. */
static bool snap_emit(FILE *f, const struct snap *s)
{
	uint64_t n_rec = 1;
	size_t len = 0, i, k;
	bool ok;
	char *rec;

	rec = fs_snap_chunk_encode(&s->ctr, s->boards, s->n_boards, NULL, NULL, 0, NULL, 0, NULL, 0,
				   NULL, 0, s->bctrs, s->n_bctrs, NULL, 0, &len);
	ok = emit(f, rec, &len);
	for (i = 0; ok && i < s->n_cards; i += k, n_rec++) {
		k = s->n_cards - i < SNAP_CHUNK ? s->n_cards - i : SNAP_CHUNK;
		rec = fs_snap_chunk_encode(&s->ctr, NULL, 0, s->cards + i, s->ords + i, k, NULL, 0,
					   NULL, 0, NULL, 0, NULL, 0, NULL, 0, &len);
		ok = emit(f, rec, &len);
	}
	for (i = 0; ok && i < s->n_runs; i += k, n_rec++) {
		k = s->n_runs - i < SNAP_CHUNK ? s->n_runs - i : SNAP_CHUNK;
		rec = fs_snap_chunk_encode(&s->ctr, NULL, 0, NULL, NULL, 0, s->runs + i, k, NULL, 0,
					   NULL, 0, NULL, 0, NULL, 0, &len);
		ok = emit(f, rec, &len);
	}
	for (i = 0; ok && i < s->n_events; i += k, n_rec++) {
		k = s->n_events - i < SNAP_CHUNK ? s->n_events - i : SNAP_CHUNK;
		rec = fs_snap_chunk_encode(&s->ctr, NULL, 0, NULL, NULL, 0, NULL, 0, s->events + i,
					   k, NULL, 0, NULL, 0, NULL, 0, &len);
		ok = emit(f, rec, &len);
	}
	for (i = 0; ok && i < s->n_floors; i += k, n_rec++) {
		k = s->n_floors - i < SNAP_CHUNK ? s->n_floors - i : SNAP_CHUNK;
		rec = fs_snap_chunk_encode(&s->ctr, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, 0,
					   s->floors + i, k, NULL, 0, NULL, 0, &len);
		ok = emit(f, rec, &len);
	}
	for (i = 0; ok && i < s->n_kvs; i += k, n_rec++) {
		k = s->n_kvs - i < SNAP_CHUNK ? s->n_kvs - i : SNAP_CHUNK;
		rec = fs_snap_chunk_encode(&s->ctr, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, 0, NULL,
					   0, NULL, 0, s->kvs + i, k, &len);
		ok = emit(f, rec, &len);
	}
	if (!ok)
		return false;
	rec = fs_snap_end_encode(s->gen, &s->ctr, n_rec, &len);
	return emit(f, rec, &len);
}

static int snap_fsync(struct fs *fs, int fd)
{
	if (fs_io_fault(fs, STORE_FS_FAULT_SLOW_SNAPSHOT)) {
		struct timespec slow = {.tv_sec = 0, .tv_nsec = 300 * 1000 * 1000};

		while (nanosleep(&slow, &slow) != 0 && errno == EINTR)
			;
	}
	return fsync(fd);
}

/* temp + fsync; then, once every journal line up to `upto` (what s captured) is durable,
 * rename + fsync dir. 0 or an errno; *undurable (and 0) when those lines were rolled back
 * instead (a failed write or sync of their group): the temp file is dropped, and snapshot.bin
 * and every journal stay as they were. The JSON snapshot of an earlier version goes once the
 * binary one is durable (the .bin wins whenever both exist). */
static int snap_write(struct fs *fs, const struct snap *s, uint64_t upto, bool *undurable)
{
	char tmp[4096], path[4096], old[4096];
	FILE *f;
	int err = 0;

	*undurable = false;
	snprintf(tmp, sizeof(tmp), "%s/snapshot.bin.tmp", fs->dir);
	snprintf(path, sizeof(path), "%s/snapshot.bin", fs->dir);
	snprintf(old, sizeof(old), "%s/snapshot.json", fs->dir);
	f = fopen(tmp, "we");
	if (!f)
		return errno;
	errno = 0;
	if (fs_io_fault(fs, STORE_FS_FAULT_WRITE))
		err = EIO;
	else if (!snap_emit(f, s) || fflush(f) != 0)
		err = errno ? errno : EIO;
	else if (fs_io_fault(fs, STORE_FS_FAULT_SYNC) || snap_fsync(fs, fileno(f)) != 0)
		err = errno ? errno : EIO;
	if (fclose(f) != 0 && !err)
		err = errno;
	if (!err) {
		fs_io_hold(fs, STORE_FS_FAULT_HOLD_SNAPSHOT, &fs->stats.snapshot_held);
		/* Installed only once nothing it holds can still be rolled back. Usually the
		 * group of those lines was flushed meanwhile; else this thread flushes it. */
		*undurable = fs_journal_durable(fs, upto) != CORE_OK;
	}
	if (!err && !*undurable && rename(tmp, path) != 0)
		err = errno;
	if (!err && !*undurable && fs_io_dir_sync(fs) != 0)
		err = errno;
	if (err || *undurable)
		unlink(tmp);
	else
		unlink(old);
	return err;
}

/* Under the state write lock: switches writers to the new generation's fd. Normally the old
 * fd, with its records not written yet, goes to the next flusher for its last write and sync;
 * a recovery abandons it (and any other still owed one): what it holds past the durable prefix
 * was rolled back, and the snapshot being written replaces all of it. A recovery's fd < 0:
 * the current generation is kept (gen_blank: a failed attempt's, never written). */
static enum core_rc rotate(struct fs *fs, int fd, uint64_t gen, uint64_t alloc, bool recover,
			   uint64_t *upto)
{
	struct fs_jold *nv;
	size_t i;

	pthread_mutex_lock(&fs->jmu);
	if (fs->failed != recover) { /* a recovery runs only while failed (under snapmu) */
		pthread_mutex_unlock(&fs->jmu);
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	/* The last line the captured state holds (appended moves only under the state lock,
	 * which the caller holds); a recovery's is durable already (recover_ready). */
	*upto = fs->appended;
	if (recover) {
		for (i = 0; i < fs->n_old; i++) {
			close(fs->old[i].fd);
			fs_jpend_release(&fs->old[i].pend);
		}
		fs->n_old = 0;
		if (fd < 0) { /* the generation a failed attempt left, reused as it is */
			fd = fs->jfd;
			alloc = fs->jalloc;
		} else {
			close(fs->jfd);
		}
		fs_jpend_release(&fs->jpend);
	} else {
		nv = realloc(fs->old, (fs->n_old + 1) * sizeof(*nv));
		if (!nv) {
			pthread_mutex_unlock(&fs->jmu);
			return CORE_ERR_NOMEM;
		}
		fs->old = nv;
		fs->old[fs->n_old++] = (struct fs_jold){.fd = fs->jfd, .end = fs->jbytes,
							 .pend = fs->jpend};
		fs->jpend = (struct fs_jpend){0};
	}
	fs->jfd = fd;
	fs->gen = gen;
	fs->jbytes = 0;
	fs->jsynced_bytes = 0;
	fs_segment_switch_locked(fs, alloc);
	fs->stats.generation = gen;
	fs->stats.journal_bytes = 0;
	pthread_mutex_unlock(&fs->jmu);
	return CORE_OK;
}

static void journal_unlink(const struct fs *fs, uint64_t gen)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/journal.%" PRIu64, fs->dir, gen);
	unlink(path);
}

/* Ready to recover: failed, and the rollback of the failed group is done. With jmu held. */
static bool recover_ready(const struct fs *fs)
{
	return fs->failed && !fs->flushing && fs->appended == fs->synced;
}

/* A compaction, or with `recover` the re-establishment of a journal after a failed sync: the
 * same steps, from the rolled-back memory state, and writes are taken again only once the
 * snapshot is durable. */
static enum core_rc compact(struct fs *fs, bool recover)
{
	struct snap s = {0};
	uint64_t gen, g, alloc = 0, upto = 0;
	enum core_rc rc = CORE_ERR_STORE_UNAVAILABLE;
	int fd = -1, err = 0;
	bool ready, reuse, undurable = false;

	pthread_mutex_lock(&fs->snapmu);
	if (recover) {
		pthread_mutex_lock(&fs->jmu);
		ready = recover_ready(fs);
		rc = fs->failed ? CORE_ERR_STORE_UNAVAILABLE : CORE_OK;
		pthread_mutex_unlock(&fs->jmu);
		if (!ready) {
			pthread_mutex_unlock(&fs->snapmu);
			return rc; /* recovered meanwhile, or the rollback is still running */
		}
		rc = CORE_ERR_STORE_UNAVAILABLE;
	}
	/* fs->gen only moves here, under snapmu. A recovery after a failed one reuses the
	 * generation that one created: nothing wrote to it since, and a full disk would
	 * otherwise leave an empty journal.N per attempt. */
	reuse = recover && fs->gen_blank;
	gen = reuse ? fs->gen : fs->gen + 1;
	if (!reuse) {
		fd = fs_journal_open(fs, gen);
		if (fd >= 0) /* zeros ahead of the writers, off their path */
			alloc = fs_segment_prealloc(fs, fd);
		if (fd < 0 || fs_io_dir_sync(fs) != 0) {
			err = errno;
			goto out;
		}
	}
	pthread_rwlock_wrlock(&fs->lock);
	s.gen = gen;
	rc = snap_capture(fs, &s);
	if (rc == CORE_OK)
		rc = rotate(fs, fd, gen, alloc, recover, &upto);
	if (rc == CORE_OK) {
		fd = -1;
		fs->snap_active = true;
		fs->gen_blank = recover; /* until its snapshot is installed */
	}
	pthread_rwlock_unlock(&fs->lock);
	if (rc != CORE_OK)
		goto out;
	err = snap_write(fs, &s, upto, &undurable);
	pthread_rwlock_wrlock(&fs->lock);
	fs->snap_active = false;
	fs_grave_empty(fs);
	pthread_rwlock_unlock(&fs->lock);
	if (err || undurable) {
		/* The old snapshot and every journal since remain: nothing acknowledged is
		 * lost, nothing refused is kept. A recovery stays failed (its new, empty
		 * generation is harmless, and the next attempt reuses it: gen_blank); so does
		 * a store whose captured lines were rolled back: its recovery writes the
		 * snapshot of the rolled-back state. */
		rc = CORE_ERR_STORE_UNAVAILABLE;
		goto out;
	}
	for (g = gen - 1; g > 0; g--) {
		char path[4096];
		struct stat sb;

		snprintf(path, sizeof(path), "%s/journal.%" PRIu64, fs->dir, g);
		if (stat(path, &sb) != 0)
			break;
		journal_unlink(fs, g);
	}
	fs->gen_blank = false;
	pthread_mutex_lock(&fs->jmu);
	fs->stats.compactions++;
	if (recover) {
		/* A writer of the failed group still on its way out must see it failed. */
		while (fs->n_inflight)
			pthread_cond_wait(&fs->jcond, &fs->jmu);
		fs->failed = false;
		fs->stats.failed = false;
		fprintf(stderr, "boardd: fs store %s: journal re-established at generation %" PRIu64
				"; taking writes again\n",
			fs->dir, gen);
	}
	pthread_mutex_unlock(&fs->jmu);
out:
	if (fd >= 0) {
		close(fd);
		journal_unlink(fs, gen);
	}
	if (rc != CORE_OK)
		fs_log_quiet(fs, &fs->quiet_recover, "%s failed: %s",
			     recover ? "recovery" : "compaction",
			     err ? strerror(err)
				 : undurable ? "the journal lines it captured were rolled back"
					     : core_rc_code(rc));
	snap_release(&s);
	pthread_mutex_unlock(&fs->snapmu);
	return rc;
}

enum core_rc fs_compact_run(struct fs *fs)
{
	return compact(fs, false);
}

int64_t fs_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A store whose disk keeps refusing is retried at most once a second (each attempt writes a
 * whole snapshot), by the next write or the compactor thread, whichever comes first. A caller
 * that finds another thread's attempt under way waits for its outcome instead of being
 * refused meanwhile; if that attempt failed, it may make its own when the pacing allows (the
 * disk came back during it: the test hook's fault lift resets the pacing, as an operator's
 * repair would make the next attempt succeed). */
#define RECOVER_EVERY_MS 1000

enum core_rc fs_recover(struct fs *fs, bool force)
{
	enum core_rc rc;

	pthread_mutex_lock(&fs->jmu);
	for (;;) {
		if (!fs->failed) {
			pthread_mutex_unlock(&fs->jmu);
			return CORE_OK;
		}
		if (!fs->recovering)
			break;
		pthread_cond_wait(&fs->jcond, &fs->jmu);
	}
	if (!force && fs_mono_ms() < fs->recover_after_ms) {
		pthread_mutex_unlock(&fs->jmu);
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	fs->recover_after_ms = fs_mono_ms() + RECOVER_EVERY_MS;
	fs->recovering = true;
	pthread_mutex_unlock(&fs->jmu);
	rc = compact(fs, true);
	pthread_mutex_lock(&fs->jmu);
	fs->recovering = false;
	pthread_cond_broadcast(&fs->jcond);
	pthread_mutex_unlock(&fs->jmu);
	return rc;
}

static void *compactor_main(void *arg)
{
	struct fs *fs = arg;
	struct timespec until;
	bool due, owed, recover;

	pthread_mutex_lock(&fs->cmu);
	while (!fs->compact_stop) {
		if (!fs->compact_wanted && !fs->recover_wanted) {
			pthread_cond_wait(&fs->ccond, &fs->cmu);
			continue;
		}
		if (!fs->compact_wanted) {
			/* Failed: retry on our own, paced, so that a store no write reaches (its
			 * readiness probe failing) still comes back. */
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += RECOVER_EVERY_MS / 1000;
			pthread_cond_timedwait(&fs->ccond, &fs->cmu, &until);
			if (fs->compact_stop)
				break;
		}
		fs->compact_wanted = false;
		owed = fs->compact_due;
		fs->compact_due = false;
		recover = fs->recover_wanted;
		fs->recover_wanted = false;
		pthread_mutex_unlock(&fs->cmu);
		/* Pokes that raced with the last pass find a fresh, short journal. */
		pthread_mutex_lock(&fs->jmu);
		due = (owed || fs->jbytes > fs->compact_bytes) && !fs->failed;
		pthread_mutex_unlock(&fs->jmu);
		if (recover && fs_recover(fs, false) != CORE_OK) {
			pthread_mutex_lock(&fs->cmu);
			fs->recover_wanted = true;
			pthread_mutex_unlock(&fs->cmu);
		} else if (due) {
			fs_compact_run(fs);
		}
		pthread_mutex_lock(&fs->cmu);
	}
	pthread_mutex_unlock(&fs->cmu);
	return NULL;
}

enum core_rc fs_compactor_start(struct fs *fs)
{
	fs->compact_wanted = fs->compact_due; /* owed by the open (fs_journal_recover) */
	if (pthread_create(&fs->cthread, NULL, compactor_main, fs) != 0)
		return CORE_ERR_INTERNAL;
	fs->cthread_started = true;
	return CORE_OK;
}

void fs_compactor_stop(struct fs *fs)
{
	if (!fs->cthread_started)
		return;
	pthread_mutex_lock(&fs->cmu);
	fs->compact_stop = true;
	pthread_cond_signal(&fs->ccond);
	pthread_mutex_unlock(&fs->cmu);
	pthread_join(fs->cthread, NULL);
	fs->cthread_started = false;
}

void fs_compactor_poke(struct fs *fs)
{
	pthread_mutex_lock(&fs->cmu);
	fs->compact_wanted = true;
	pthread_cond_signal(&fs->ccond);
	pthread_mutex_unlock(&fs->cmu);
}
