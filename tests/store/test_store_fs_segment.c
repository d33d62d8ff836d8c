/* FS twin only: the journal's pre-allocated tail (store/fs/fs_segment.c). A generation is its
 * records, then zeros; what a crash leaves in those zeros (nothing, a torn record, a record
 * whose first sector never landed, a sound record after a bad one) and how recovery ends the
 * log there. The "crash" is a child process that writes and exits without closing the store:
 * what kill -9 leaves (every write(2) is in the page cache; nothing was cut). */
#include "tests/store/test_store_fs.h"
#include "tests/store/fs_fixture.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Until the grower has zero-filled room ahead of the writer (at most 30 s: it runs in the
 * background). False when it never did. */
static bool wait_prealloc(struct store *st, uint64_t room)
{
	struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
	struct store_fs_stats s;
	int i;

	for (i = 0; i < 30000; i++) {
		s = fx_stats(st);
		if (s.journal_alloc_bytes >= s.journal_bytes + room)
			return true;
		nanosleep(&ms, NULL);
	}
	return false;
}

struct crash {
	uint64_t gen;
	uint64_t first_at; /* where the first card's record starts (the log's end at open) */
	uint64_t last_at; /* where the last card's record starts */
	uint64_t bytes;   /* the logical end of the journal */
};

/* Opens dir in a child, creates ids[0..n) (n >= 2: the last one inside the zeros the others
 * had pre-allocated) and
 * exits without closing. When j1_copy, the child also keeps a copy of journal.1 as it is then
 * in j1_copy and compacts before the last card (so that card is the first record of a new,
 * pre-allocated generation). */
static struct crash crash_after(const char *dir, const char *const *ids, size_t n,
				const char *j1_copy)
{
	struct crash c = {0};
	int p[2], status;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct store_fs_options o = {.dir = dir};
		struct store *st = NULL;
		size_t i;

		char err[512];

		close(p[0]);
		if (store_fs_open(&o, &st, err, sizeof(err)) != CORE_OK) {
			fprintf(stderr, "crash_after: open: %s\n", err);
			_exit(2);
		}
		c.first_at = fx_stats(st).journal_bytes;
		for (i = 0; i + 1 < n; i++)
			if (fx_create_rc(st, ids[i]) != CORE_OK)
				_exit(3);
		if (!wait_prealloc(st, 4096))
			_exit(4);
		if (j1_copy) {
			char src[4096], cmd[9000];

			snprintf(src, sizeof(src), "%s/journal.1", dir);
			snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, j1_copy);
			if (system(cmd) != 0 || store_fs_compact(st) != CORE_OK)
				_exit(5);
		}
		c.last_at = fx_stats(st).journal_bytes;
		if (fx_create_rc(st, ids[n - 1]) != CORE_OK)
			_exit(6);
		c.bytes = fx_stats(st).journal_bytes;
		c.gen = fx_stats(st).generation;
		if (write(p[1], &c, sizeof(c)) != (ssize_t)sizeof(c))
			_exit(7);
		_exit(0); /* no store_close: the zero tail stays, as after kill -9 */
	}
	close(p[1]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
	ck_assert_int_eq(read(p[0], &c, sizeof(c)), (ssize_t)sizeof(c));
	close(p[0]);
	return c;
}

static char *read_all(const char *path, long *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;

	ck_assert_ptr_nonnull(f);
	*len = fx_file_size(path);
	buf = malloc((size_t)*len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)*len, f), *len);
	fclose(f);
	return buf;
}

static void write_at(const char *path, long at, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, bytes, n, at), (ssize_t)n);
	close(fd);
}

static void zero_range(const char *path, long from, long to)
{
	char *z = calloc(1, (size_t)(to - from));

	write_at(path, from, z, (size_t)(to - from));
	free(z);
}

static enum core_rc try_open(const char *dir, char *err, size_t len)
{
	struct store_fs_options o = {.dir = dir};
	struct store *st = NULL;
	enum core_rc rc = store_fs_open(&o, &st, err, len);

	if (st)
		store_close(st);
	return rc;
}

static const char *const five[] = {"a", "b", "c", "d", "e"};

/* A crash leaves records then zeros: the log ends at the zeros, the writer goes on at the
 * logical end (not after the zeros), and a clean close cuts the tail. */
START_TEST(crash_zero_tail_replays)
{
	char *dir = fx_tmpdir(), *j, *buf;
	struct crash c = crash_after(dir, five, 5, NULL);
	struct store *st;
	struct store_fs_stats s;
	long len, i;
	uint64_t before;
	size_t k;

	j = fx_journal_path(dir, c.gen);
	buf = read_all(j, &len);
	ck_assert_int_gt(len, (long)c.bytes); /* pre-allocated past the last record */
	for (i = (long)c.bytes; i < len; i++)
		ck_assert_msg(!buf[i], "byte %ld of the tail is %d", i, buf[i]);
	free(buf);
	st = fx_open(dir, 0, 0, NULL);
	for (k = 0; k < 5; k++)
		ck_assert(fx_exists(st, five[k]));
	s = fx_stats(st);
	ck_assert_uint_eq(s.journal_bytes, c.bytes);
	ck_assert_uint_eq(s.journal_alloc_bytes, (uint64_t)len); /* the tail is reused as is */
	ck_assert_int_eq(fx_file_size(j), len);                 /* and nothing was cut */
	before = s.journal_bytes;
	ck_assert_int_eq(fx_create_rc(st, "f"), CORE_OK);
	s = fx_stats(st);
	ck_assert_uint_gt(s.journal_bytes, before);
	store_close(st);
	ck_assert_int_eq(fx_file_size(j), (long)s.journal_bytes); /* the close cut the zeros */
	st = fx_open(dir, 0, 0, NULL);
	for (k = 0; k < 5; k++)
		ck_assert(fx_exists(st, five[k]));
	ck_assert(fx_exists(st, "f"));
	store_close(st);
	free(j);
	fx_rmdir(dir);
}
END_TEST

/* The last record torn over the zeros, three ways a crash tears it: its end never landed,
 * its header's sector never landed (the payload did), or the data ends inside its header.
 * Each is cut at the record's start, the cards before it stay, and the next writer (another
 * crashed one) writes there: what it wrote replays, the torn one never comes back. */
START_TEST(torn_record_over_zeros_is_cut)
{
	int shape;

	for (shape = 0; shape < 3; shape++) {
		static const char *const yz[] = {"y", "z"};
		char *dir = fx_tmpdir(), *j;
		struct crash c = crash_after(dir, five, 5, NULL), c2;
		long rec = (long)(c.bytes - c.last_at);
		struct store *st;
		size_t k;

		j = fx_journal_path(dir, c.gen);
		ck_assert_int_gt(rec, 32);
		if (shape == 0)
			zero_range(j, (long)c.last_at + rec / 2, (long)c.bytes);
		else if (shape == 1)
			zero_range(j, (long)c.last_at, (long)c.last_at + 16);
		else
			zero_range(j, (long)c.last_at + 10, (long)c.bytes);
		c2 = crash_after(dir, yz, 2, NULL);
		ck_assert_uint_eq(c2.first_at, c.last_at); /* written where the torn one began */
		st = fx_open(dir, 0, 0, NULL);
		for (k = 0; k < 4; k++)
			ck_assert_msg(fx_exists(st, five[k]), "shape %d: %s lost", shape, five[k]);
		ck_assert_msg(!fx_exists(st, "e"), "shape %d: the torn record replayed", shape);
		ck_assert(fx_exists(st, "y"));
		ck_assert(fx_exists(st, "z"));
		ck_assert_uint_eq(fx_stats(st).journal_bytes, c2.bytes);
		store_close(st);
		free(j);
		fx_rmdir(dir);
	}
}
END_TEST

/* A crash between a compaction's switch to a new generation and its snapshot: the older
 * generation ends in zeros but is not the last one holding data. Both replay. */
START_TEST(zero_tail_before_a_later_generation)
{
	char *dir = fx_tmpdir(), *copy, *j1, *snap, *buf;
	struct crash c;
	struct store *st;
	long len;
	size_t k;

	ck_assert_int_gt(asprintf(&copy, "%s.j1", dir), 0);
	c = crash_after(dir, five, 5, copy);
	ck_assert_uint_eq(c.gen, 2);
	ck_assert_uint_eq(c.last_at, 0); /* e is the first record of generation 2 */
	/* Put back generation 1 as it was (with its zero tail) and drop the snapshot that
	 * replaced it: what the directory held before the snapshot's rename. */
	j1 = fx_journal_path(dir, 1);
	ck_assert_int_eq(rename(copy, j1), 0);
	buf = read_all(j1, &len);
	ck_assert(!buf[len - 1]);
	free(buf);
	ck_assert_int_gt(asprintf(&snap, "%s/snapshot.bin", dir), 0);
	ck_assert_int_eq(unlink(snap), 0);
	st = fx_open(dir, 0, 0, NULL);
	for (k = 0; k < 5; k++)
		ck_assert_msg(fx_exists(st, five[k]), "%s lost", five[k]);
	store_close(st);
	free(snap);
	free(j1);
	free(copy);
	fx_rmdir(dir);
}
END_TEST

/* The log is never replayed past a bad record: a damaged record with a sound one after it
 * (in the records, or in the zero tail after junk) is refused, and nothing is cut. */
START_TEST(sound_record_after_bad_refuses)
{
	int shape;

	for (shape = 0; shape < 2; shape++) {
		char *dir = fx_tmpdir(), *j, *buf, err[512];
		struct crash c = crash_after(dir, five, 5, NULL);
		long len, rec = (long)(c.bytes - c.last_at);
		char ch;

		j = fx_journal_path(dir, c.gen);
		buf = read_all(j, &len);
		if (shape == 0) {
			/* a flipped byte in d's record (the one before e) */
			long at = (long)c.last_at - 5;

			ch = (char)(buf[at] ^ 0x20);
			write_at(j, at, &ch, 1);
		} else {
			/* junk in the tail, then a copy of e's record further on */
			static const char junk[] = "\x01\x02 not a record";

			write_at(j, (long)c.bytes + 100, junk, sizeof(junk) - 1);
			write_at(j, (long)c.bytes + 700, buf + c.last_at, (size_t)rec);
		}
		ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
		ck_assert_msg(strstr(err, "a sound record follows") != NULL, "err: %s", err);
		ck_assert_int_eq(fx_file_size(j), len); /* nothing was cut */
		free(buf);
		free(j);
		fx_rmdir(dir);
	}
}
END_TEST

/* Junk alone in the zero tail (a torn write of the unsynced group, no sound record after
 * it) is cut, like any torn tail; so is junk followed by a sound record older than what the
 * log holds (the blocks of a deleted generation a crash can expose past the synced end: its
 * event counter is behind the replay's). */
START_TEST(junk_in_zero_tail_is_cut)
{
	static const char junk[] = "\xfb\x01 half a header";
	char *dir = fx_tmpdir(), *j, *buf;
	struct crash c = crash_after(dir, five, 5, NULL);
	struct store *st;
	long len;
	size_t k;

	j = fx_journal_path(dir, c.gen);
	buf = read_all(j, &len);
	write_at(j, (long)c.bytes + 600, junk, sizeof(junk) - 1);
	/* the records of a..d again: their event seqs are behind e's */
	write_at(j, (long)c.bytes + 1200, buf + c.first_at, (size_t)(c.last_at - c.first_at));
	free(buf);
	st = fx_open(dir, 0, 0, NULL);
	for (k = 0; k < 5; k++)
		ck_assert(fx_exists(st, five[k]));
	ck_assert_uint_eq(fx_stats(st).journal_bytes, c.bytes);
	ck_assert_int_eq(fx_file_size(j), (long)c.bytes); /* cut where the log ends */
	store_close(st);
	free(j);
	fx_rmdir(dir);
}
END_TEST

/* Writers stay inside the zeros: with room ahead (the grower runs in the background, so the
 * test waits for it between batches), every record lands inside the file as it already was,
 * and a few steps serve hundreds of records. */
START_TEST(writes_land_in_preallocated_space)
{
	char *dir = fx_tmpdir(), *j, id[16];
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_fs_stats s;
	int i, k;

	ck_assert_int_eq(fx_create_rc(st, "first"), CORE_OK);
	j = fx_journal_path(dir, fx_stats(st).generation);
	for (i = 0; i < 40; i++) {
		ck_assert(wait_prealloc(st, 16384));
		for (k = 0; k < 10; k++) {
			long size = fx_file_size(j);

			snprintf(id, sizeof(id), "w%d", i * 10 + k);
			ck_assert_int_eq(fx_create_rc(st, id), CORE_OK);
			s = fx_stats(st);
			ck_assert_msg((long)s.journal_bytes <= size,
				      "record %s ends at %llu, past the file's %ld bytes", id,
				      (unsigned long long)s.journal_bytes, size);
		}
	}
	s = fx_stats(st);
	ck_assert_uint_ge(s.journal_grows, 1);
	ck_assert_uint_le(s.journal_grows, 10);
	store_close(st);
	free(j);
	fx_rmdir(dir);
}
END_TEST

TCase *store_fs_segment_tcase(void)
{
	TCase *tc = tcase_create("segment");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, crash_zero_tail_replays);
	tcase_add_test(tc, torn_record_over_zeros_is_cut);
	tcase_add_test(tc, zero_tail_before_a_later_generation);
	tcase_add_test(tc, sound_record_after_bad_refuses);
	tcase_add_test(tc, junk_in_zero_tail_is_cut);
	tcase_add_test(tc, writes_land_in_preallocated_space);
	return tc;
}
