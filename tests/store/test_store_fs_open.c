/* FS twin only: what the open does besides replaying -- the directory lock, the leftovers a
 * crash or a full disk leaves behind (stale snapshot.bin.tmp, earlier or empty journal
 * generations), and making durable what it replayed before serving it. */
#include "tests/store/test_store_fs.h"
#include "tests/store/fs_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How many journal.N files dir holds. */
static int journals(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		n += strncmp(de->d_name, "journal.", 8) == 0;
	closedir(d);
	return n;
}

static char *path_in(const char *dir, const char *name)
{
	char *p;

	ck_assert_int_gt(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

/* Stamps path's mtime with a time no file written now has, so that a file of that name found
 * later can be told apart from the one stamped. */
static const time_t stale_mtime = 1000000000;

static void stamp_stale(const char *path)
{
	struct timespec t[2] = {{.tv_sec = stale_mtime}, {.tv_sec = stale_mtime}};

	ck_assert_int_eq(utimensat(AT_FDCWD, path, t, 0), 0);
}

static bool is_stale(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && sb.st_mtim.tv_sec == stale_mtime;
}

static void ms_sleep(long ms)
{
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000};

	while (nanosleep(&t, &t) != 0)
		;
}

/* Deleting DIR/lock does not let a second store in: the directory itself is locked. */
START_TEST(second_open_refused_without_lock_file)
{
	char *dir = fx_tmpdir(), *lock = path_in(dir, "lock"), err[512], want[512];
	struct store_fs_options o = {.dir = dir};
	struct store *st = fx_open(dir, 0, 0, NULL), *st2 = NULL;

	ck_assert_int_eq(unlink(lock), 0);
	ck_assert_int_eq(store_fs_open(&o, &st2, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_ptr_null(st2);
	snprintf(want, sizeof(want), "data directory %s is locked by another boardd (pid unknown)",
		 dir);
	ck_assert_str_eq(err, want);
	ck_assert_int_eq(fx_file_size(lock), -1); /* the refused open created nothing */
	ck_assert_int_eq(fx_create_rc(st, "x"), CORE_OK);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert(fx_exists(st, "x"));
	store_close(st);
	free(lock);
	fx_rmdir(dir);
}
END_TEST

/* The open syncs what it replayed: records a killed process wrote but never synced may sit
 * in the page cache only, and are served from now on. */
START_TEST(open_syncs_the_replayed_journal)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);

	ck_assert_int_eq(fx_create_rc(st, "a"), CORE_OK);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert_uint_ge(fx_stats(st).syncs, 1); /* before any write */
	ck_assert_uint_eq(fx_stats(st).commits, 0);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* Killed with a compaction under way (its snapshot written, not installed, a record in the
 * new generation): the restart drops snapshot.bin.tmp and compacts the two generations soon,
 * with no write to poke it. */
static void child_killed_mid_compaction(const char *dir)
{
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct fx_held h;

	if (fx_create_rc(st, "a") != CORE_OK || fx_create_rc(st, "b") != CORE_OK)
		_exit(2);
	fx_compact_hold(st, &h);
	if (fx_create_rc(st, "c") != CORE_OK)
		_exit(3);
	raise(SIGKILL);
}

START_TEST(interrupted_compaction_is_finished_at_open)
{
	char *dir = fx_tmpdir(), *tmp = path_in(dir, "snapshot.bin.tmp");
	char *j1 = fx_journal_path(dir, 1), *j2 = fx_journal_path(dir, 2);
	struct store_fs_stats s = {0};
	struct store *st;
	int status, i;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		child_killed_mid_compaction(dir);
		_exit(1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_int_gt(fx_file_size(tmp), 0);
	ck_assert_int_gt(fx_file_size(j1), 0);
	ck_assert_int_gt(fx_file_size(j2), 0);

	stamp_stale(tmp);

	st = fx_open(dir, 0, 0, NULL);
	/* Never installed: gone at open. The compaction the open owes may already be writing a
	 * snapshot.bin.tmp of its own (a slow machine, a sanitizer build): not the stale one. */
	ck_assert(!is_stale(tmp));
	ck_assert(fx_exists(st, "a") && fx_exists(st, "b") && fx_exists(st, "c"));
	ck_assert_uint_ge(fx_stats(st).syncs, 2); /* both generations replayed, both synced */
	for (i = 0; i < 1000 && !s.compactions; i++) {
		s = fx_stats(st);
		if (!s.compactions)
			ms_sleep(10);
	}
	ck_assert_msg(s.compactions >= 1, "no compaction within 10 s of an open with two "
					  "journal generations");
	ck_assert_int_eq(fx_file_size(j1), -1);
	ck_assert_int_eq(fx_file_size(j2), -1);
	ck_assert_int_eq(journals(dir), 1);
	ck_assert_int_eq(fx_file_size(tmp), -1); /* the new snapshot installed */
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert(fx_exists(st, "a") && fx_exists(st, "b") && fx_exists(st, "c"));
	store_close(st);
	free(tmp);
	free(j1);
	free(j2);
	fx_rmdir(dir);
}
END_TEST

/* A disk that keeps refusing: each failed recovery (about one a second) reuses the empty
 * generation the first one created instead of leaving one per attempt, and a restart while
 * it still refuses drops the empty generations and a stale snapshot.bin.tmp. */
START_TEST(failed_recoveries_leave_no_empty_generations)
{
	char *dir = fx_tmpdir(), *tmp = path_in(dir, "snapshot.bin.tmp"), *j;
	struct store *st = fx_open(dir, 0, 0, NULL);
	uint64_t gen;
	int fd;

	ck_assert_int_eq(fx_create_rc(st, "a"), CORE_OK);
	gen = fx_stats(st).generation;
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_WRITE, true), CORE_OK);
	ck_assert_int_eq(fx_create_rc(st, "b"), CORE_ERR_STORE_UNAVAILABLE);
	ms_sleep(3500); /* the compactor retries about once a second; writes retry too */
	ck_assert_int_eq(fx_create_rc(st, "b"), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert(fx_stats(st).failed);
	ck_assert_msg(journals(dir) <= 2, "%d journal files after failed recoveries",
		      journals(dir));
	ck_assert_uint_le(fx_stats(st).generation, gen + 1);
	store_close(st); /* still refusing */

	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(journals(dir), 1);
	ck_assert(fx_exists(st, "a") && !fx_exists(st, "b"));
	ck_assert_int_eq(fx_create_rc(st, "c"), CORE_OK);
	gen = fx_stats(st).generation;
	store_close(st);
	/* What older binaries left: empty generations after the last one with records (one
	 * zero-filled, as pre-allocated), and a snapshot never installed. */
	j = fx_journal_path(dir, gen + 1);
	fd = open(j, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 65536), 0);
	close(fd);
	free(j);
	j = fx_journal_path(dir, gen + 2);
	ck_assert_int_ge(fd = open(j, O_WRONLY | O_CREAT, 0644), 0);
	close(fd);
	free(j);
	ck_assert_int_ge(fd = open(tmp, O_WRONLY | O_CREAT, 0644), 0);
	ck_assert_int_eq(write(fd, "junk", 4), 4);
	close(fd);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(journals(dir), 1);
	ck_assert_int_eq(fx_file_size(tmp), -1);
	ck_assert_uint_eq(fx_stats(st).generation, gen);
	ck_assert(fx_exists(st, "a") && fx_exists(st, "c"));
	ck_assert_int_eq(fx_create_rc(st, "d"), CORE_OK);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert(fx_exists(st, "a") && fx_exists(st, "c") && fx_exists(st, "d"));
	store_close(st);
	free(tmp);
	fx_rmdir(dir);
}
END_TEST

TCase *store_fs_open_tcase(void)
{
	TCase *tc = tcase_create("open");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, second_open_refused_without_lock_file);
	tcase_add_test(tc, open_syncs_the_replayed_journal);
	tcase_add_test(tc, interrupted_compaction_is_finished_at_open);
	tcase_add_test(tc, failed_recoveries_leave_no_empty_generations);
	return tc;
}
