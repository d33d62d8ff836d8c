/* FS twin fixtures. */
#include "tests/store/fs_fixture.h"

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
