/* The journal's pre-allocated tail, grown ahead of the writer (as PostgreSQL's WAL segments).
 *
 * Why: an fdatasync of a file that grew must write its inode too. On the reference VM (ext4
 * without a journal) that is data, then the inode block, then a cache flush: three device
 * requests per group commit, with their virtio kicks and completion interrupts. Overwriting
 * blocks that are already allocated AND written (zeros written, not fallocate()d: unwritten
 * extents still need a metadata update) needs only the data and the flush. So the current
 * generation's file is zero-filled ahead of the writer, and records are written at the logical
 * end over those zeros (appended to the journal's buffer up to fs->jbytes, written by the
 * group's flusher, fs_journal.c).
 *
 * Who grows: the grower thread, off the hot path. A writer whose record leaves less than half
 * a step of zeros ahead pokes it (a flag and a signal under jmu); it zero-fills the next step
 * past everything written and fdatasyncs it once (that sync pays the inode write). Steps
 * double with the file, from FS_SEG_MIN up to FS_SEG_MAX, so a test's store stays small and a
 * busy one grows every few hundred milliseconds. A compaction zero-fills the new generation
 * before writers switch to it (fs_segment_prealloc). Nothing depends on the grower for
 * correctness: a record past the zero-filled end simply extends the file, as before.
 *
 * On disk a generation is its records, then zeros up to the end of the file. Recovery ends
 * the log where the zeros begin (fs_journal.c); a clean close cuts the zero tail
 * (fs_segment_stop), so a stopped store's files end at their last record as before.
 */
#include "store/fs/fs.h"
#include "store/fs/fs_io.h"
#include "store/fs/fs_journal.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FS_SEG_MIN (64u * 1024)
#define FS_SEG_MAX (4u * 1024 * 1024)
#define FS_SEG_PAGE 4096u
/* After a failed grow (a full disk), the next attempt waits this long. */
#define FS_SEG_RETRY_MS 1000

/* The next step for a file of `alloc` bytes: doubling it, within [FS_SEG_MIN, FS_SEG_MAX]. */
static uint64_t seg_step(uint64_t alloc)
{
	if (alloc < FS_SEG_MIN)
		return FS_SEG_MIN;
	if (alloc > FS_SEG_MAX)
		return FS_SEG_MAX;
	return (alloc + FS_SEG_PAGE - 1) / FS_SEG_PAGE * FS_SEG_PAGE;
}

/* Writes zeros over [from, to) of fd and makes them (and the file's new size) durable. 0 or
 * an errno. */
static int seg_zero_fill(int fd, uint64_t from, uint64_t to)
{
	static const char zeros[64 * 1024];
	uint64_t at = from;
	size_t n;
	ssize_t w;

	while (at < to) {
		n = to - at < sizeof(zeros) ? (size_t)(to - at) : sizeof(zeros);
		w = pwrite(fd, zeros, n, (off_t)at);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		at += (uint64_t)w;
	}
	return fdatasync(fd) == 0 ? 0 : errno;
}

uint64_t fs_segment_prealloc(struct fs *fs, int fd)
{
	uint64_t step;

	pthread_mutex_lock(&fs->jmu);
	step = seg_step(fs->jalloc > fs->jbytes ? fs->jalloc : fs->jbytes);
	pthread_mutex_unlock(&fs->jmu);
	if (seg_zero_fill(fd, 0, step) == 0)
		return step;
	/* A full disk: the generation starts empty and grows by appending. */
	if (ftruncate(fd, 0) != 0)
		return 0;
	return 0;
}

void fs_segment_poke_locked(struct fs *fs)
{
	uint64_t alloc = fs->jalloc;

	if (alloc >= fs->jbytes + seg_step(alloc) / 2 || fs->grow_wanted || fs->growing ||
	    !fs->grower_started)
		return;
	fs->grow_wanted = true;
	pthread_cond_signal(&fs->gcond);
}

void fs_segment_cut_locked(struct fs *fs, uint64_t bytes)
{
	fs->jepoch++; /* a grow under way fills a range of the file as it was */
	if (fs->jalloc > bytes)
		fs->jalloc = bytes;
	fs->stats.journal_alloc_bytes = fs->jalloc > bytes ? fs->jalloc : bytes;
}

void fs_segment_switch_locked(struct fs *fs, uint64_t alloc)
{
	fs->jepoch++;
	fs->jalloc = alloc;
	fs->stats.journal_alloc_bytes = alloc;
}

/* One grow of the current generation, with jmu held (dropped while it writes). */
static void seg_grow_locked(struct fs *fs)
{
	uint64_t from, to, epoch;
	int fd, err;

	from = fs->jalloc;
	if (fs->jbytes > from)
		from = fs->jbytes; /* records still in the journal's buffer go below it */
	to = (from + seg_step(fs->jalloc) + FS_SEG_PAGE - 1) / FS_SEG_PAGE * FS_SEG_PAGE;
	/* A dup: rotate() hands the fd over to be closed after its last sync. */
	fd = dup(fs->jfd);
	if (fd < 0)
		return;
	epoch = fs->jepoch;
	fs->growing = true;
	fs->grow_from = from;
	pthread_mutex_unlock(&fs->jmu);
	err = seg_zero_fill(fd, from, to);
	close(fd);
	pthread_mutex_lock(&fs->jmu);
	fs->growing = false;
	if (!err && epoch == fs->jepoch) {
		fs->jalloc = to;
		fs->stats.journal_alloc_bytes = to;
		fs->stats.journal_grows++;
	} else if (err) {
		fs->grow_after_ms = fs_mono_ms() + FS_SEG_RETRY_MS;
		fs_log_quiet(fs, &fs->quiet_grow,
			     "pre-allocating the journal failed: %s (records extend the file)",
			     strerror(err));
	}
	pthread_cond_broadcast(&fs->jcond); /* a writer may wait for the range (fs_journal_append) */
}

static void *grower_main(void *arg)
{
	struct fs *fs = arg;

	pthread_mutex_lock(&fs->jmu);
	for (;;) {
		while (!fs->grow_wanted && !fs->grow_stop)
			pthread_cond_wait(&fs->gcond, &fs->jmu);
		if (fs->grow_stop)
			break;
		fs->grow_wanted = false;
		if (fs->failed || fs->jfd < 0 || fs_mono_ms() < fs->grow_after_ms)
			continue;
		seg_grow_locked(fs);
	}
	pthread_mutex_unlock(&fs->jmu);
	return NULL;
}

enum core_rc fs_segment_start(struct fs *fs)
{
	if (pthread_create(&fs->grower, NULL, grower_main, fs) != 0)
		return CORE_ERR_INTERNAL;
	pthread_mutex_lock(&fs->jmu);
	/* Not poked here: the first record written asks for the first step. */
	fs->grower_started = true;
	pthread_mutex_unlock(&fs->jmu);
	return CORE_OK;
}

void fs_segment_stop(struct fs *fs)
{
	struct stat sb;
	bool started;

	pthread_mutex_lock(&fs->jmu);
	started = fs->grower_started;
	fs->grow_stop = true;
	pthread_cond_signal(&fs->gcond);
	pthread_mutex_unlock(&fs->jmu);
	if (started)
		pthread_join(fs->grower, NULL);
	pthread_mutex_lock(&fs->jmu);
	fs->grower_started = false;
	/* A clean close leaves no zero tail: the file ends at its last record, as files of
	 * earlier versions did (best effort: recovery ends the log at the zeros anyway). */
	if (fs->jfd >= 0 && fstat(fs->jfd, &sb) == 0 && (uint64_t)sb.st_size > fs->jbytes &&
	    ftruncate(fs->jfd, (off_t)fs->jbytes) == 0) {
		(void)fdatasync(fs->jfd);
		fs_segment_cut_locked(fs, fs->jbytes);
	}
	pthread_mutex_unlock(&fs->jmu);
}
