/* FS twin fixtures. */
#include "tests/store/fs_fixture.h"

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

char *fx_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *dir;

	if (!base || !*base)
		base = "/tmp";
	ck_assert_int_gt(asprintf(&dir, "%s/boardd-store-XXXXXX", base), 0);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	return dir;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void fx_rmdir(char *dir)
{
	if (dir)
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

struct store *fx_open(const char *dir, size_t compact_bytes, size_t events_keep,
		      const char *hostname)
{
	struct store_fs_options o = {.dir = dir, .compact_bytes = compact_bytes,
				     .events_keep = events_keep, .hostname = hostname};
	struct store *st = NULL;
	char err[256];
	enum core_rc rc = store_fs_open(&o, &st, err, sizeof(err));

	ck_assert_msg(rc == CORE_OK, "open %s: %s: %s", dir, core_rc_code(rc), err);
	return st;
}

/* One conformance store at a time (each Check test opens its own). */
static char *fresh_dir;

struct store *fx_open_fresh(void)
{
	fresh_dir = fx_tmpdir();
	return fx_open(fresh_dir, 0, 0, NULL);
}

void fx_close_fresh(struct store *st)
{
	store_close(st);
	fx_rmdir(fresh_dir);
	fresh_dir = NULL;
}

static void *held_main(void *arg)
{
	struct fx_held *h = arg;

	h->rc = store_fs_compact(h->st);
	return NULL;
}

void fx_compact_hold(struct store *st, struct fx_held *h)
{
	struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
	struct store_fs_stats s;
	int i;

	*h = (struct fx_held){.st = st, .rc = CORE_ERR_INTERNAL};
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_HOLD_SNAPSHOT, true), CORE_OK);
	ck_assert_int_eq(pthread_create(&h->thread, NULL, held_main, h), 0);
	for (i = 0; i < 60000; i++) { /* at most a minute, on a very busy machine */
		ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
		if (s.snapshot_held)
			return;
		nanosleep(&ms, NULL);
	}
	ck_abort_msg("the compaction never reached its hold");
}

enum core_rc fx_compact_release(struct fx_held *h)
{
	ck_assert_int_eq(store_fs_fault_set(h->st, STORE_FS_FAULT_HOLD_SNAPSHOT, false), CORE_OK);
	ck_assert_int_eq(pthread_join(h->thread, NULL), 0);
	return h->rc;
}
