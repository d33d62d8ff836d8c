/* The FS twin's file I/O helpers: the writes, syncs and directory syncs the test-only fault
 * hook can refuse or hold (STORE_FS_FAULT_*), whole-file reads, and the rate-limited log line
 * (fs_log_quiet) a failing disk would otherwise repeat. No state of its own.
 */
#include "store/fs/fs.h"
#include "store/fs/fs_io.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

int fs_dir_sync(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* ---- I/O through the test-only fault hook ---- */

bool fs_io_fault(struct fs *fs, unsigned fault)
{
	return __atomic_load_n(&fs->faults, __ATOMIC_RELAXED) & fault;
}

ssize_t fs_io_pwritev(struct fs *fs, int fd, const struct iovec *iov, int n, uint64_t off)
{
	if (fs_io_fault(fs, STORE_FS_FAULT_WRITE)) {
		errno = EIO;
		return -1;
	}
	return pwritev(fd, iov, n, (off_t)off);
}

void fs_io_hold(struct fs *fs, unsigned fault, bool *held)
{
	struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};

	if (!fs_io_fault(fs, fault))
		return;
	pthread_mutex_lock(&fs->jmu);
	*held = true;
	pthread_mutex_unlock(&fs->jmu);
	while (fs_io_fault(fs, fault))
		nanosleep(&ms, NULL);
	pthread_mutex_lock(&fs->jmu);
	*held = false;
	pthread_mutex_unlock(&fs->jmu);
}

int fs_io_sync(struct fs *fs, int fd)
{
	fs_io_hold(fs, STORE_FS_FAULT_HOLD_SYNC, &fs->stats.sync_held);
	if (fs_io_fault(fs, STORE_FS_FAULT_SYNC)) {
		errno = EIO;
		return -1;
	}
	if (fs_io_fault(fs, STORE_FS_FAULT_SLOW_SYNC)) {
		struct timespec slow = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};

		while (nanosleep(&slow, &slow) != 0 && errno == EINTR)
			;
	}
	return fdatasync(fd);
}

int fs_io_dir_sync(struct fs *fs)
{
	if (fs_io_fault(fs, STORE_FS_FAULT_SYNC)) {
		errno = EIO;
		return -1;
	}
	return fs_dir_sync(fs->dir);
}

void fs_log_quiet(struct fs *fs, struct fs_log_quiet *q, const char *fmt, ...)
{
	struct timespec ts;
	int64_t now;
	char msg[512];
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	if (q->last_ms && now - q->last_ms < FS_LOG_QUIET_MS) {
		q->suppressed++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (q->suppressed)
		fprintf(stderr, "boardd: fs store %s: %s (%lu like it suppressed in the last %lds)\n",
			fs->dir, msg, q->suppressed, (long)((now - q->last_ms) / 1000));
	else
		fprintf(stderr, "boardd: fs store %s: %s\n", fs->dir, msg);
	q->last_ms = now ? now : 1;
	q->suppressed = 0;
}

char *fs_file_read(const char *path, size_t *len, int *err)
{
	struct stat sb;
	char *buf = NULL;
	size_t done = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*len = 0;
	*err = 0;
	if (fd < 0 || fstat(fd, &sb) != 0)
		goto fail;
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		errno = ENOMEM;
		goto fail;
	}
	while (done < (size_t)sb.st_size) {
		r = read(fd, buf + done, (size_t)sb.st_size - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		done += (size_t)r;
	}
	buf[done] = '\0';
	*len = done;
	close(fd);
	return buf;
fail:
	*err = errno;
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}
