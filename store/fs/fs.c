/* The FS twin: open (lock, recover, first board, legacy sweep), close, the ops table, the host
 * clock, and the FS-only extras (stats, synchronous compaction). See fs.h for the model. */
#include "store/fs/fs.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_snapshot.h"
#include "store/fs/fs_txn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FS_COMPACT_DEFAULT ((size_t)64 * 1024 * 1024)
#define FS_EVENTS_KEEP_DEFAULT ((size_t)100000)

static void fs_close(struct store *st);

static int64_t fs_now(struct store *st)
{
	struct timespec ts;

	(void)st;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static enum core_rc fs_ping(struct store *st)
{
	struct fs *fs = fs_of(st);
	bool failed;

	pthread_mutex_lock(&fs->jmu);
	failed = fs->failed;
	pthread_mutex_unlock(&fs->jmu);
	return failed ? CORE_ERR_STORE_UNAVAILABLE : CORE_OK;
}

static const struct store_ops fs_ops = {
	.name = "fs",
	.owned_write_release = true,
	.close = fs_close,
	.ack_submit = fs_ack_submit,
	.ack_wait = fs_ack_wait,
	.ping = fs_ping,
	.now = fs_now,
	.board_list = fs_board_list,
	.board_get = fs_board_get,
	.board_put = fs_board_put,
	.board_claimed = fs_board_claimed,
	.board_column_rename = fs_board_column_rename,
	.labels_sweep = fs_labels_sweep,
	.card_create = fs_card_create,
	.card_get = fs_card_get,
	.card_list = fs_card_list,
	.card_patch = fs_card_patch,
	.card_delete = fs_card_delete,
	.card_claim = fs_card_claim,
	.card_claim_next = fs_card_claim_next,
	.card_renew = fs_card_renew,
	.card_release = fs_card_release,
	.card_owned_write = fs_card_owned_write,
	.card_set_state_from = fs_card_set_state_from,
	.card_reopen = fs_card_reopen,
	.card_revoke = fs_card_revoke,
	.card_labels_set = fs_card_labels_set,
	.card_labels_adjust = fs_card_labels_adjust,
	.card_comment_add = fs_card_comment_add,
	.labels_count = fs_labels_count,
	.events_list = fs_events_list,
	.events_list_board = fs_events_list_board,
	.attention_list = fs_attention_list,
	.run_create = fs_run_create,
	.run_get = fs_run_get,
	.run_get_any = fs_run_get_any,
	.run_update = fs_run_update,
	.run_cancel = fs_run_cancel,
	.run_prune = fs_run_prune,
	.run_promote_if_orphaned = fs_run_promote_if_orphaned,
	.run_count_for_card = fs_run_count_for_card,
	.run_list = fs_run_list,
	.stats = fs_stats,
	.reaper_list_expired = fs_reaper_list_expired,
	.reaper_list_repair = fs_reaper_list_repair,
	.reaper_transfer = fs_reaper_transfer,
	.reaper_release_exact = fs_reaper_release_exact,
	.reaper_transfer_many = fs_reaper_transfer_many,
	.reaper_act = fs_reaper_act,
	.secret_get = fs_secret_get,
	.idem = &fs_idem_ops,
	.sub_put = fs_sub_put,
	.sub_get = fs_sub_get,
	.sub_list = fs_sub_list,
	.sub_delete = fs_sub_delete,
	.delivery_get = fs_delivery_get,
	.delivery_list = fs_delivery_list,
	.delivery_lease = fs_delivery_lease,
	.delivery_finish = fs_delivery_finish,
	.delivery_retry = fs_delivery_retry,
};

/* mkdir -p; 0 or -1 with errno. */
static int mkdir_p(const char *dir)
{
	char path[PATH_MAX];
	size_t i, n = strlen(dir);

	if (n == 0 || n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(path, dir, n + 1);
	for (i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			return -1;
		path[i] = dir[i];
	}
	return 0;
}

/* The message for a directory another process holds, with the pid DIR/lock names ("unknown"
 * when it was deleted). */
static enum core_rc dir_locked(const struct fs *fs, char *err, size_t errlen)
{
	char path[PATH_MAX], pid[32] = "";
	ssize_t r = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/lock", fs->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		r = pread(fd, pid, sizeof(pid) - 1, 0);
		close(fd);
	}
	pid[r > 0 ? r : 0] = '\0';
	pid[strcspn(pid, "\n")] = '\0';
	snprintf(err, errlen, "data directory %s is locked by another boardd (pid %s)", fs->dir,
		 pid[0] ? pid : "unknown");
	return CORE_ERR_STORE_UNAVAILABLE;
}

/* One process per directory: flock on DIR itself, held through an fd for the store's life, so
 * that deleting DIR/lock cannot let a second boardd in; and flock on DIR/lock (what older
 * binaries take), which then holds our pid for the message a second boardd prints. A
 * filesystem that refuses flock on a directory (NFS) leaves the lock file alone to it. */
static enum core_rc dir_lock(struct fs *fs, char *err, size_t errlen)
{
	char path[PATH_MAX], pid[32];
	int n;

	fs->dir_fd = open(fs->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->dir_fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", fs->dir, strerror(errno));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	if (flock(fs->dir_fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno == EWOULDBLOCK)
			return dir_locked(fs, err, errlen);
		fprintf(stderr, "boardd: fs store %s: cannot lock the directory (%s); relying on "
				"its lock file alone\n",
			fs->dir, strerror(errno));
		close(fs->dir_fd);
		fs->dir_fd = -1;
	}
	snprintf(path, sizeof(path), "%s/lock", fs->dir);
	fs->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fs->lock_fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	if (flock(fs->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno == EWOULDBLOCK)
			return dir_locked(fs, err, errlen);
		snprintf(err, errlen, "cannot lock %s: %s", path, strerror(errno));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fs->lock_fd, 0) != 0 || pwrite(fs->lock_fd, pid, (size_t)n, 0) != n) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	return CORE_OK;
}

static enum core_rc sync_init(struct fs *fs)
{
	pthread_condattr_t ca;
	int rc;

	if (pthread_condattr_init(&ca) != 0)
		return CORE_ERR_INTERNAL;
	/* Long-poll deadlines must not move with the wall clock. */
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
	     pthread_rwlock_init(&fs->lock, NULL) || pthread_mutex_init(&fs->jmu, NULL) ||
	     pthread_cond_init(&fs->jcond, NULL) || pthread_cond_init(&fs->ackcond, &ca) ||
	     pthread_cond_init(&fs->gcond, NULL) ||
	     pthread_mutex_init(&fs->evmu, NULL) ||
	     pthread_cond_init(&fs->evcond, &ca) || pthread_mutex_init(&fs->snapmu, NULL) ||
	     pthread_mutex_init(&fs->cmu, NULL) || pthread_cond_init(&fs->ccond, NULL);
	pthread_condattr_destroy(&ca);
	return rc ? CORE_ERR_INTERNAL : CORE_OK;
}

/* First open of a directory: the default board of DESIGN §2. */
static enum core_rc default_board(struct fs *fs)
{
	struct core_board b;
	struct fs_txn t;
	enum core_rc rc;

	if (fs->n_boards)
		return CORE_OK;
	rc = core_board_init_default(&b, "default");
	if (rc != CORE_OK)
		return rc;
	fs_txn_begin(fs, &t, NULL);
	rc = fs_txn_board_put(&t, &b);
	if (rc == CORE_OK)
		rc = fs_txn_event(&t, CORE_EV_BOARD_UPDATED, b.name, NULL, NULL,
				  json_pack("{sb}", "created", 1));
	core_board_release(&b);
	return fs_txn_end(&t, rc);
}

enum core_rc store_fs_open(const struct store_fs_options *o, struct store **out, char *err,
			   size_t errlen)
{
	char host[256] = "localhost", dummy[8];
	struct fs *fs;
	enum core_rc rc;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (out)
		*out = NULL;
	if (!o || !o->dir || !*o->dir || !out) {
		snprintf(err, errlen, "fs store: no directory");
		return CORE_ERR_BAD_REQUEST;
	}
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return CORE_ERR_NOMEM;
	fs->base.ops = &fs_ops;
	fs->lock_fd = fs->dir_fd = fs->jfd = -1;
	fs->compact_bytes = o->compact_bytes ? o->compact_bytes : FS_COMPACT_DEFAULT;
	fs->events_keep = o->events_keep ? o->events_keep : FS_EVENTS_KEEP_DEFAULT;
	fs->serial_load = o->serial_load;
	if (!o->hostname)
		gethostname(host, sizeof(host) - 1);
	fs->dir = strdup(o->dir);
	fs->hostname = strdup(o->hostname ? o->hostname : host);
	rc = fs->dir && fs->hostname ? sync_init(fs) : CORE_ERR_NOMEM;
	if (rc != CORE_OK) {
		snprintf(err, errlen, "fs store: cannot initialise");
		free(fs->dir);
		free(fs->hostname);
		free(fs);
		return rc;
	}
	if (mkdir_p(fs->dir) != 0) {
		snprintf(err, errlen, "cannot create data directory %s: %s", fs->dir,
			 strerror(errno));
		rc = CORE_ERR_STORE_UNAVAILABLE;
		goto out;
	}
	rc = dir_lock(fs, err, errlen);
	if (rc == CORE_OK)
		rc = fs_snapshot_load(fs, err, errlen);
	if (rc == CORE_OK)
		rc = fs_journal_recover(fs, err, errlen);
	if (rc == CORE_OK && (rc = default_board(fs)) != CORE_OK)
		snprintf(err, errlen, "cannot create the default board in %s", fs->dir);
	if (rc == CORE_OK && (rc = fs_legacy_sweep(fs)) != CORE_OK)
		snprintf(err, errlen, "legacy claim sweep failed in %s", fs->dir);
	if (rc == CORE_OK && (rc = fs_compactor_start(fs)) != CORE_OK)
		snprintf(err, errlen, "cannot start the compactor thread");
	if (rc == CORE_OK && (rc = fs_acker_start(fs)) != CORE_OK)
		snprintf(err, errlen, "cannot start the acknowledgement thread");
	if (rc == CORE_OK && (rc = fs_segment_start(fs)) != CORE_OK)
		snprintf(err, errlen, "cannot start the journal pre-allocation thread");
out:
	if (rc != CORE_OK) {
		fs_close(&fs->base);
		return rc;
	}
	*out = &fs->base;
	return CORE_OK;
}

static void fs_close(struct store *st)
{
	struct fs *fs = fs_of(st);
	size_t i;

	fs_acker_stop(fs);
	fs_compactor_stop(fs);
	fs_journal_flush(fs);
	fs_segment_stop(fs); /* after the last writer: cuts the zero tail */
	pthread_mutex_lock(&fs->evmu);
	fs->closing = true;
	pthread_cond_broadcast(&fs->evcond);
	pthread_mutex_unlock(&fs->evmu);
	for (i = 0; i < fs->n_old; i++) {
		close(fs->old[i].fd);
		fs_jpend_release(&fs->old[i].pend);
	}
	free(fs->old);
	fs_jpend_release(&fs->jpend);
	fs_jpend_release(&fs->jspare);
	if (fs->jfd >= 0)
		close(fs->jfd);
	if (fs->lock_fd >= 0)
		close(fs->lock_fd); /* drops the flock */
	if (fs->dir_fd >= 0)
		close(fs->dir_fd); /* and the directory's */
	fs_state_release(fs);
	pthread_rwlock_destroy(&fs->lock);
	pthread_mutex_destroy(&fs->jmu);
	pthread_cond_destroy(&fs->jcond);
	pthread_cond_destroy(&fs->ackcond);
	pthread_cond_destroy(&fs->gcond);
	pthread_mutex_destroy(&fs->evmu);
	pthread_cond_destroy(&fs->evcond);
	pthread_mutex_destroy(&fs->snapmu);
	pthread_mutex_destroy(&fs->cmu);
	pthread_cond_destroy(&fs->ccond);
	free(fs->dir);
	free(fs->hostname);
	free(fs);
}

enum core_rc store_fs_stats_get(struct store *st, struct store_fs_stats *out)
{
	struct fs *fs;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!st || !out || st->ops != &fs_ops)
		return CORE_ERR_BAD_REQUEST;
	fs = fs_of(st);
	pthread_mutex_lock(&fs->jmu);
	*out = fs->stats;
	pthread_mutex_unlock(&fs->jmu);
	return CORE_OK;
}

enum core_rc store_fs_fault_set(struct store *st, unsigned faults, bool on)
{
	struct fs *fs;

	if (!st || st->ops != &fs_ops)
		return CORE_ERR_BAD_REQUEST;
	fs = fs_of(st);
	if (on) {
		__atomic_or_fetch(&fs->faults, faults, __ATOMIC_SEQ_CST);
		return CORE_OK;
	}
	__atomic_and_fetch(&fs->faults, ~faults, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&fs->jmu);
	fs->recover_after_ms = 0;
	pthread_mutex_unlock(&fs->jmu);
	return CORE_OK;
}

enum core_rc store_fs_compact(struct store *st)
{
	if (!st || st->ops != &fs_ops)
		return CORE_ERR_BAD_REQUEST;
	return fs_compact_run(fs_of(st));
}
