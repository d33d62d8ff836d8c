/* The FS twin's file I/O (fs_io.c): writes and syncs the test-only fault hook can refuse
 * or hold, whole-file reads, directory syncs, and the rate-limited log line. */
#ifndef BOARDD_STORE_FS_FS_IO_H
#define BOARDD_STORE_FS_FS_IO_H

#include "store/fs/fs.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* ---- I/O the fault hook can refuse (fs_io.c) ---- */

ssize_t fs_io_pwritev(struct fs *fs, int fd, const struct iovec *iov, int n, uint64_t off);
int fs_io_sync(struct fs *fs, int fd);     /* fdatasync */
int fs_io_dir_sync(struct fs *fs);         /* fsync of DIR */
bool fs_io_fault(struct fs *fs, unsigned fault);
/* A test hook's hold: while `fault` is on, waits (no lock held), with *held (a stats field,
 * under jmu) true meanwhile. */
void fs_io_hold(struct fs *fs, unsigned fault, bool *held);
/* Writes "boardd: fs store DIR: <fmt>" to stderr unless q wrote one within FS_LOG_QUIET_MS
 * (then it only counts it; the next line written says how many were suppressed). */
void fs_log_quiet(struct fs *fs, struct fs_log_quiet *q, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Reads a whole file into a new buffer (NUL-terminated); NULL with *err = errno. */
char *fs_file_read(const char *path, size_t *len, int *err);
/* fsync(2) of a directory; -1 with errno set. */
int fs_dir_sync(const char *dir);

#endif
