/* Secrets of the FS twin (store_secret_get): one file per secret in the data directory,
 * DIR/secret-<name>, mode 0600, made once with link(2) so two threads racing to make it agree
 * on the bytes the first one wrote. The directory is flock()ed by this process: no other
 * process reads or writes it. */
#include "store/fs/fs.h"
#include "store/fs/fs_io.h"
#include "store/fs/fs_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static enum core_rc secret_read(const char *path, unsigned char *out, bool *absent)
{
	unsigned char buf[STORE_SECRET_LEN + 1];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*absent = fd < 0 && errno == ENOENT;
	if (fd < 0)
		return *absent ? CORE_ERR_NOT_FOUND : CORE_ERR_STORE_UNAVAILABLE;
	n = read(fd, buf, sizeof buf);
	close(fd);
	if (n != STORE_SECRET_LEN)
		return CORE_ERR_STORE_UNAVAILABLE; /* torn or foreign: never guess a key */
	memcpy(out, buf, STORE_SECRET_LEN);
	return CORE_OK;
}

/* Writes fresh random bytes to a temp file, durable, then links it in as `path` (EEXIST:
 * someone else made it first, theirs stands). */
static enum core_rc secret_make(struct fs *fs, const char *path)
{
	unsigned char key[STORE_SECRET_LEN];
	char tmp[PATH_MAX];
	enum core_rc rc = CORE_ERR_STORE_UNAVAILABLE;
	int fd;

	if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
		return CORE_ERR_INTERNAL;
	if (snprintf(tmp, sizeof tmp, "%s/secret.tmp.XXXXXX", fs->dir) >= (int)sizeof tmp)
		return CORE_ERR_STORE_UNAVAILABLE;
	fd = mkstemp(tmp);
	if (fd < 0)
		return CORE_ERR_STORE_UNAVAILABLE;
	if (fchmod(fd, 0600) == 0 && write(fd, key, sizeof key) == (ssize_t)sizeof key &&
	    fsync(fd) == 0 && (link(tmp, path) == 0 || errno == EEXIST) &&
	    fs_dir_sync(fs->dir) == 0)
		rc = CORE_OK;
	close(fd);
	unlink(tmp);
	memset(key, 0, sizeof key);
	return rc;
}

enum core_rc fs_secret_get(struct store *st, const char *name, unsigned char *out)
{
	struct fs *fs = fs_of(st);
	char path[PATH_MAX];
	bool absent;
	enum core_rc rc;

	if (snprintf(path, sizeof path, "%s/secret-%s", fs->dir, name) >= (int)sizeof path)
		return CORE_ERR_STORE_UNAVAILABLE;
	rc = secret_read(path, out, &absent);
	if (rc != CORE_ERR_NOT_FOUND)
		return rc;
	rc = secret_make(fs, path);
	return rc == CORE_OK ? secret_read(path, out, &absent) : rc;
}
