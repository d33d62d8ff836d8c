/* FS twin under storage faults (issue 5, item 7), through the test-only hook
 * store_fs_fault_set: a failed write or fdatasync is never acknowledged, nothing un-durable
 * stays visible (a failed group is rolled back, newest first), reads keep working, and writes
 * come back once the disk does. Then the same over HTTP: 503 + Retry-After, and recovery.
 *
 * Why an in-process hook rather than an LD_PRELOAD shim: it refuses exactly the twin's own
 * journal and snapshot I/O (not the test's, the harness's or libc's), and it runs unchanged
 * under ASan and TSan, whose runtimes do not mix well with an interposed write(2). */
#include "tests/common/harness.h"
#include "tests/store/fs_fixture.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct store_actor bot = {.name = "bot"};
static int64_t clock_ms;

static int64_t fixed_clock(void *ctx)
{
	(void)ctx;
	return clock_ms;
}

static enum core_rc create(struct store *st, const char *id, const char *state,
			   const char *blocker)
{
	char *bv[1] = {(char *)blocker};
	struct core_strv blk = {.v = bv, .n = 1};
	struct store_card_create in = {.id = id, .title = "old", .state = state,
				       .blockers = blocker ? &blk : NULL};
	struct core_card *c = NULL;
	enum core_rc rc = store_card_create(st, &in, &bot, &c);

	core_card_free(c);
	return rc;
}

static enum core_rc retitle(struct store *st, const char *id, const char *title)
{
	struct store_card_patch p = {.title = title};
	struct core_card *c = NULL;
	enum core_rc rc = store_card_patch(st, id, &p, &bot, &c);

	ck_assert(rc == CORE_OK || c == NULL);
	core_card_free(c);
	return rc;
}

static enum core_rc move(struct store *st, const char *id, const char *to)
{
	struct core_card *c = NULL;
	enum core_rc rc = store_card_set_state_from(st, id, NULL, to, NULL, &bot, &c);

	core_card_free(c);
	return rc;
}

/* The card as served, or NULL when it does not exist; caller frees. */
static struct core_card *get(struct store *st, const char *id)
{
	struct core_card *c = NULL;
	enum core_rc rc = store_card_get(st, id, &c);

	ck_assert(rc == CORE_OK || rc == CORE_ERR_NOT_FOUND);
	return c;
}

static void assert_card(struct store *st, const char *id, const char *title, const char *state)
{
	struct core_card *c = get(st, id);

	ck_assert_msg(c != NULL, "%s is gone", id);
	ck_assert_str_eq(c->title, title);
	ck_assert_str_eq(c->state, state);
	core_card_free(c);
}

static int64_t last_seq(struct store *st)
{
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t next, seq;

	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	seq = n ? ev[n - 1].seq : 0;
	store_events_free(ev, n);
	return seq;
}

static bool failed(struct store *st)
{
	struct store_fs_stats s;

	ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
	return s.failed;
}

/* A failed fdatasync: the write is refused, undone in memory and on disk, reads go on, every
 * later write is refused while the disk refuses, and the first write after it recovers. */
START_TEST(sync_fault_is_rolled_back_then_recovers)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_fs_stats s0, s1;
	struct store_card_filter f = {.claimed = -1, .limit = 10};
	struct core_card **v = NULL;
	char *next = NULL;
	size_t n = 0;
	int64_t seq;

	ck_assert_int_eq(create(st, "a", "ready", NULL), CORE_OK);
	seq = last_seq(st);
	ck_assert_int_eq(store_fs_stats_get(st, &s0), CORE_OK);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);

	ck_assert_int_eq(retitle(st, "a", "new"), CORE_ERR_STORE_UNAVAILABLE);
	assert_card(st, "a", "old", "ready"); /* rolled back, not just refused */
	ck_assert_int_eq(last_seq(st), seq);  /* and no event of it was ever served */
	ck_assert(failed(st));
	ck_assert_int_eq(store_ping(st), CORE_ERR_STORE_UNAVAILABLE);
	/* Reads keep working; writes are refused while the disk refuses. */
	ck_assert_int_eq(store_card_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, 1);
	store_cards_free(v, n);
	ck_assert_int_eq(create(st, "b", "ready", NULL), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_ptr_null(get(st, "b"));
	ck_assert_int_eq(retitle(st, "a", "newer"), CORE_ERR_STORE_UNAVAILABLE);
	assert_card(st, "a", "old", "ready");

	/* The disk heals: the next write first re-establishes the journal, then succeeds. */
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	ck_assert_int_eq(retitle(st, "a", "healed"), CORE_OK);
	ck_assert(!failed(st));
	ck_assert_int_eq(store_ping(st), CORE_OK);
	ck_assert_int_eq(store_fs_stats_get(st, &s1), CORE_OK);
	ck_assert_uint_gt(s1.generation, s0.generation); /* a fresh snapshot + generation */
	ck_assert_int_eq(last_seq(st), seq + 1);          /* seqs continue without a hole */
	store_close(st);

	st = fx_open(dir, 0, 0, NULL);
	assert_card(st, "a", "healed", "ready");
	ck_assert_ptr_null(get(st, "b"));
	ck_assert_int_eq(last_seq(st), seq + 1);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* Closed while the disk still refuses: what was refused is not on disk either (the journal
 * was cut back to its durable prefix). */
START_TEST(refused_write_absent_after_reopen)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);

	ck_assert_int_eq(create(st, "a", "ready", NULL), CORE_OK);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(retitle(st, "a", "new"), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(create(st, "b", "ready", NULL), CORE_ERR_STORE_UNAVAILABLE);
	store_close(st);

	st = fx_open(dir, 0, 0, NULL);
	assert_card(st, "a", "old", "ready");
	ck_assert_ptr_null(get(st, "b"));
	ck_assert_int_eq(create(st, "b", "ready", NULL), CORE_OK);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A refused write(2) is refused cleanly: nothing applied, and the store keeps going. */
START_TEST(write_fault_refuses_cleanly)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);

	ck_assert_int_eq(create(st, "a", "ready", NULL), CORE_OK);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_WRITE, true), CORE_OK);
	ck_assert_int_eq(retitle(st, "a", "new"), CORE_ERR_STORE_UNAVAILABLE);
	assert_card(st, "a", "old", "ready");
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_WRITE, false), CORE_OK);
	ck_assert_int_eq(retitle(st, "a", "new"), CORE_OK);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	assert_card(st, "a", "new", "ready");
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* The journal is written behind (store/fs/fs_journal.c): a commit appends its record, and the
 * group's flusher writes it. A write that fails there fails the group like a failed sync:
 * a commit made before the disk refused, owed through an ack as the HTTP front end owes it, is
 * told STORE_UNAVAILABLE (its client gets a 503), rolled back with its events, and absent
 * after a reopen; the writes around it are unaffected. */
struct told {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
	enum core_rc rc;
};

static struct told told_of;

static void told_done(struct store_ack *ack, enum core_rc rc)
{
	(void)ack;
	pthread_mutex_lock(&told_of.mu);
	told_of.rc = rc;
	told_of.done = true;
	pthread_cond_signal(&told_of.cond);
	pthread_mutex_unlock(&told_of.mu);
}

START_TEST(write_fault_at_the_flush_fails_the_group)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_ack ack;
	int64_t seq;

	ck_assert_int_eq(create(st, "a", "ready", NULL), CORE_OK);
	seq = last_seq(st);
	told_of = (struct told){.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	store_ack_begin(&ack);
	ck_assert_int_eq(retitle(st, "a", "new"), CORE_OK); /* appended; the ack owes it */
	ck_assert_int_eq(create(st, "b", "ready", NULL), CORE_OK);
	ck_assert(store_ack_end(&ack));
	ck_assert_uint_eq(ack.lines, 2);
	/* The disk refuses before the group is written: nothing of it was. */
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_WRITE, true), CORE_OK);
	store_ack_submit(&ack, told_done); /* the acker flushes it, as for an HTTP answer */
	pthread_mutex_lock(&told_of.mu);
	while (!told_of.done)
		pthread_cond_wait(&told_of.cond, &told_of.mu);
	pthread_mutex_unlock(&told_of.mu);
	ck_assert_int_eq(told_of.rc, CORE_ERR_STORE_UNAVAILABLE);
	assert_card(st, "a", "old", "ready"); /* rolled back */
	ck_assert_ptr_null(get(st, "b"));
	ck_assert_int_eq(last_seq(st), seq); /* and no event of them was ever served */
	ck_assert(failed(st));
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_WRITE, false), CORE_OK);
	ck_assert_int_eq(retitle(st, "a", "after"), CORE_OK); /* recovers */
	ck_assert(!failed(st));
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	assert_card(st, "a", "after", "ready");
	ck_assert_ptr_null(get(st, "b"));
	ck_assert_int_eq(last_seq(st), seq + 1);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* The same across a compaction: the group's records are in two generations (the old file's
 * handed over unwritten); the refused write fails all of them, in both. */
START_TEST(write_fault_fails_a_group_across_generations)
{
	char *dir = fx_tmpdir(), id[16];
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct fx_held held;
	struct store_ack ack;
	int k;

	ck_assert_int_eq(create(st, "a", "ready", NULL), CORE_OK);
	store_ack_begin(&ack);
	for (k = 0; k < 4; k++) {
		snprintf(id, sizeof id, "c%d", k);
		ck_assert_int_eq(create(st, id, "ready", NULL), CORE_OK);
		if (k == 1) /* held before it installs its snapshot (it would flush c0, c1) */
			fx_compact_hold(st, &held);
	}
	ck_assert(store_ack_end(&ack));
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_WRITE, true), CORE_OK);
	ck_assert_int_eq(store_ack_wait(&ack), CORE_ERR_STORE_UNAVAILABLE);
	for (k = 0; k < 4; k++) {
		snprintf(id, sizeof id, "c%d", k);
		ck_assert_ptr_null(get(st, id));
	}
	ck_assert(failed(st));
	/* It captured c0 and c1, refused since: its snapshot is dropped. */
	ck_assert_int_eq(fx_compact_release(&held), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_WRITE, false), CORE_OK);
	ck_assert_int_eq(retitle(st, "a", "after"), CORE_OK); /* recovers */
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	assert_card(st, "a", "after", "ready");
	for (k = 0; k < 4; k++) {
		snprintf(id, sizeof id, "c%d", k);
		ck_assert_ptr_null(get(st, id));
	}
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A compaction captures every commit applied in memory, some not durable yet (here owed
 * through an ack, their group not flushed). When that group's write or sync then fails, they
 * are refused and rolled back, with the commits made on top of them in the new generation:
 * the snapshot that holds them must never be installed, nor the old generation keep them.
 * Stopped before any recovery (the disk still refuses: none can write its snapshot), the
 * directory reopens with every acknowledged write and none of the refused ones. Before the
 * fix, the held compaction renamed its snapshot (with "refused" and c) into place. */
START_TEST(snapshot_never_makes_refused_writes_durable)
{
	unsigned faults[2] = {STORE_FS_FAULT_WRITE, STORE_FS_FAULT_SYNC};
	int k;

	for (k = 0; k < 2; k++) {
		char *dir = fx_tmpdir();
		struct store *st = fx_open(dir, 0, 0, NULL);
		struct fx_held held;
		struct store_ack ack;
		enum core_rc compacted;
		int64_t seq;

		ck_assert_int_eq(create(st, "a", "ready", NULL), CORE_OK);
		ck_assert_int_eq(create(st, "b", "ready", NULL), CORE_OK);
		seq = last_seq(st);
		told_of = (struct told){.mu = PTHREAD_MUTEX_INITIALIZER,
					.cond = PTHREAD_COND_INITIALIZER};
		store_ack_begin(&ack);
		ck_assert_int_eq(retitle(st, "a", "refused"), CORE_OK); /* appended, unflushed */
		ck_assert_int_eq(create(st, "c", "ready", NULL), CORE_OK);
		fx_compact_hold(st, &held); /* captured both; writers on the next generation */
		ck_assert_int_eq(retitle(st, "a", "on-top"), CORE_OK); /* built on them */
		ck_assert_int_eq(move(st, "c", "done"), CORE_OK);
		ck_assert(store_ack_end(&ack));
		ck_assert_uint_eq(ack.lines, 4);
		ck_assert_int_eq(store_fs_fault_set(st, faults[k], true), CORE_OK);
		store_ack_submit(&ack, told_done); /* the acker flushes both generations: fails */
		pthread_mutex_lock(&told_of.mu);
		while (!told_of.done)
			pthread_cond_wait(&told_of.cond, &told_of.mu);
		pthread_mutex_unlock(&told_of.mu);
		ck_assert_int_eq(told_of.rc, CORE_ERR_STORE_UNAVAILABLE);
		assert_card(st, "a", "old", "ready"); /* all four rolled back, newest first */
		ck_assert_ptr_null(get(st, "c"));
		ck_assert_int_eq(last_seq(st), seq);
		compacted = fx_compact_release(&held);
		/* The process stops here, the disk still refusing: no recovery ran. */
		store_close(st);

		st = fx_open(dir, 0, 0, NULL);
		assert_card(st, "a", "old", "ready");
		assert_card(st, "b", "old", "ready");
		ck_assert_ptr_null(get(st, "c"));
		ck_assert_int_eq(last_seq(st), seq);
		ck_assert_int_eq(compacted, CORE_ERR_STORE_UNAVAILABLE); /* dropped, not installed */
		ck_assert_int_eq(retitle(st, "a", "after"), CORE_OK);    /* and it goes on */
		store_close(st);
		st = fx_open(dir, 0, 0, NULL);
		assert_card(st, "a", "after", "ready");
		ck_assert_ptr_null(get(st, "c"));
		ck_assert_int_eq(last_seq(st), seq + 1);
		store_close(st);
		fx_rmdir(dir);
	}
}
END_TEST

/* The group under way when a compaction switches generations: its flusher wrote it to the
 * old generation and is syncing it (held there) while the compaction captures its line. The
 * sync fails: the compaction drops its snapshot, and the old file, no longer the current one
 * (the rollback cuts only that), is cut back all the same; so after a stop before any
 * recovery the refused write is not replayed from it. */
START_TEST(group_failing_across_a_rotation_is_cut)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
	struct store_fs_stats s;
	struct fx_held held;
	struct store_ack ack;
	int64_t seq;
	int i;

	ck_assert_int_eq(create(st, "a", "ready", NULL), CORE_OK);
	seq = last_seq(st);
	told_of = (struct told){.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	store_ack_begin(&ack);
	ck_assert_int_eq(retitle(st, "a", "refused"), CORE_OK);
	ck_assert(store_ack_end(&ack));
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_HOLD_SYNC, true), CORE_OK);
	store_ack_submit(&ack, told_done); /* the acker writes it, then holds before its sync */
	for (i = 0; i < 60000; i++) {
		ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
		if (s.sync_held)
			break;
		nanosleep(&ms, NULL);
	}
	ck_assert_msg(s.sync_held, "the journal sync never reached its hold");
	fx_compact_hold(st, &held); /* captured the line being synced; writers on G+1 */
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_HOLD_SYNC, false), CORE_OK);
	pthread_mutex_lock(&told_of.mu);
	while (!told_of.done)
		pthread_cond_wait(&told_of.cond, &told_of.mu);
	pthread_mutex_unlock(&told_of.mu);
	ck_assert_int_eq(told_of.rc, CORE_ERR_STORE_UNAVAILABLE);
	assert_card(st, "a", "old", "ready");
	ck_assert_int_eq(fx_compact_release(&held), CORE_ERR_STORE_UNAVAILABLE);
	store_close(st); /* stopped while the disk refuses: no recovery ran */

	st = fx_open(dir, 0, 0, NULL);
	assert_card(st, "a", "old", "ready");
	ck_assert_int_eq(last_seq(st), seq);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A disk that refuses every write (ENOSPC, EIO) is said once, not once per refused write;
 * the store reports itself failed until a write gets through again. */
START_TEST(refused_writes_are_logged_once)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	char logpath[512], id[32], *text;
	size_t len, lines = 0, i;
	int saved, fd, k;

	snprintf(logpath, sizeof logpath, "%s.stderr", dir);
	fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	close(fd);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_WRITE, true), CORE_OK);
	for (k = 0; k < 200; k++) {
		snprintf(id, sizeof id, "c%d", k);
		ck_assert_int_eq(create(st, id, "ready", NULL), CORE_ERR_STORE_UNAVAILABLE);
	}
	ck_assert(failed(st));
	ck_assert_int_eq(store_ping(st), CORE_ERR_STORE_UNAVAILABLE);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	{
		FILE *f = fopen(logpath, "r");

		ck_assert_ptr_nonnull(f);
		text = calloc(1, 65536);
		ck_assert_ptr_nonnull(text);
		len = fread(text, 1, 65535, f);
		fclose(f);
	}
	for (i = 0; i < len; i++)
		lines += text[i] == '\n';
	/* The refusal once, and at most a recovery attempt's line (rate-limited). */
	ck_assert_msg(lines >= 1 && lines <= 3, "%zu lines for 200 refused writes:\n%s", lines,
		      text);
	free(text);
	unlink(logpath);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_WRITE, false), CORE_OK);
	ck_assert_int_eq(create(st, "after", "ready", NULL), CORE_OK);
	ck_assert_int_eq(store_ping(st), CORE_OK);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* Everything a transaction touched is undone: a completion's unblocked cascade, a delete, a
 * run, a board; and the reverse blockers index is intact afterwards. */
START_TEST(rollback_undoes_every_kind_of_change)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_run_create rin = {.id = "r1", .card_id = "rz", .marker = "w1",
				       .status = "running", .lease_ms = 60000};
	struct store_claim_result rz;
	struct core_board b = {0}, seen = {0};
	struct core_run *r = NULL;

	ck_assert_int_eq(create(st, "x", "ready", NULL), CORE_OK);
	ck_assert_int_eq(create(st, "y", "ready", "x"), CORE_OK);
	/* A run is created by its card's holder only: rz is held by w1. */
	ck_assert_int_eq(create(st, "rz", "ready", NULL), CORE_OK);
	ck_assert_int_eq(store_card_claim(st, "rz", "w1", 60000, &bot, &rz), CORE_OK);
	core_card_free(rz.card);
	assert_card(st, "y", "old", "waiting_deps");
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(move(st, "x", "done"), CORE_ERR_STORE_UNAVAILABLE);
	assert_card(st, "x", "old", "ready");
	assert_card(st, "y", "old", "waiting_deps"); /* the cascade went with it */
	ck_assert_int_eq(store_card_delete(st, "y", &bot), CORE_ERR_STORE_UNAVAILABLE);
	assert_card(st, "y", "old", "waiting_deps");
	ck_assert_int_eq(store_run_create(st, &rin, &bot, &r), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_ERR_NOT_FOUND);
	{
		/* A claim: gone from the card and from the reaper's claimed set alike. */
		struct store_claim_result cr;
		struct core_card **v = NULL;
		size_t n = 0;

		struct core_card *c;

		ck_assert_int_eq(store_card_claim(st, "x", "w1", 1, &bot, &cr),
				 CORE_ERR_STORE_UNAVAILABLE);
		c = get(st, "x");
		ck_assert(!c->claim.present);
		ck_assert_int_eq(c->claim_epoch, 0);
		core_card_free(c);
		/* Past the lease it would have had: the listing still does not see it. */
		clock_ms = store_now(st) + 10000;
		store_clock_set(st, fixed_clock, NULL);
		ck_assert_int_eq(store_reaper_list_expired(st, 10, &v, &n), CORE_OK);
		store_clock_set(st, NULL, NULL);
		ck_assert_uint_eq(n, 0);
		store_cards_free(v, n);
	}
	ck_assert_int_eq(core_board_init_default(&b, "other"), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &bot), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_board_get(st, "other", &seen), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);

	/* The same writes, now durable: the index still knows y waits for x. */
	ck_assert_int_eq(move(st, "x", "done"), CORE_OK);
	assert_card(st, "y", "old", "ready");
	ck_assert_int_eq(store_run_create(st, &rin, &bot, &r), CORE_OK);
	core_run_free(r);
	ck_assert_int_eq(store_board_put(st, &b, &bot), CORE_OK);
	ck_assert_int_eq(store_card_delete(st, "y", &bot), CORE_OK);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert_ptr_null(get(st, "y"));
	assert_card(st, "x", "old", "done");
	ck_assert_int_eq(store_board_get(st, "other", &seen), CORE_OK);
	core_board_release(&seen);
	core_board_release(&b);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

#define GROUP 8

struct writer {
	struct store *st;
	pthread_barrier_t *go;
	int id;
	enum core_rc rc;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char id[16];

	snprintf(id, sizeof(id), "g%d", w->id);
	pthread_barrier_wait(w->go);
	w->rc = create(w->st, id, "ready", NULL);
	return NULL;
}

/* Writers that share one group commit share its fate: all refused, none visible, none on
 * disk after a reopen. */
START_TEST(failed_group_fails_together)
{
	char *dir = fx_tmpdir(), id[16];
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct writer w[GROUP];
	pthread_t th[GROUP];
	pthread_barrier_t go;
	int i;

	ck_assert_int_eq(pthread_barrier_init(&go, NULL, GROUP), 0);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	for (i = 0; i < GROUP; i++) {
		w[i] = (struct writer){.st = st, .go = &go, .id = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (i = 0; i < GROUP; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].rc, CORE_ERR_STORE_UNAVAILABLE);
	}
	for (i = 0; i < GROUP; i++) {
		snprintf(id, sizeof(id), "g%d", i);
		ck_assert_ptr_null(get(st, id));
	}
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	ck_assert_int_eq(create(st, "after", "ready", NULL), CORE_OK);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	for (i = 0; i < GROUP; i++) {
		snprintf(id, sizeof(id), "g%d", i);
		ck_assert_ptr_null(get(st, id));
	}
	assert_card(st, "after", "old", "ready");
	store_close(st);
	pthread_barrier_destroy(&go);
	fx_rmdir(dir);
}
END_TEST

/* ---- over HTTP ---- */

static int call(struct httpc *c, const char *method, const char *path, const char *body,
		char **headers, char **resp)
{
	return harness_call_h(c, method, path, HARNESS_TOK_ALL, NULL, body, headers, resp);
}

START_TEST(http_503_with_retry_after_then_recovery)
{
	struct harness h;
	struct httpc *c;
	char *hdr = NULL, *body = NULL;

	ck_assert(harness_start(&h, NULL));
	c = harness_connect(&h);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(call(c, "POST", "/v1/cards", "{\"id\":\"h1\",\"title\":\"old\"}", NULL,
			      NULL),
			 201);
	ck_assert_int_eq(store_fs_fault_set(h.st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(call(c, "PATCH", "/v1/cards/h1", "{\"title\":\"new\"}", &hdr, &body), 503);
	ck_assert_msg(strcasestr(hdr, "\r\nRetry-After:") != NULL, "headers: %s", hdr);
	ck_assert_msg(strstr(body, "\"store_unavailable\"") != NULL, "body: %s", body);
	free(hdr);
	free(body);
	/* Reads are served, with the card as it was. */
	ck_assert_int_eq(call(c, "GET", "/v1/cards/h1", NULL, NULL, &body), 200);
	ck_assert_msg(strstr(body, "\"title\":\"old\"") != NULL, "body: %s", body);
	free(body);
	ck_assert_int_eq(call(c, "POST", "/v1/cards", "{\"id\":\"h2\"}", NULL, NULL), 503);
	ck_assert_int_eq(call(c, "GET", "/v1/cards/h2", NULL, NULL, NULL), 404);

	ck_assert_int_eq(store_fs_fault_set(h.st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	ck_assert_int_eq(call(c, "PATCH", "/v1/cards/h1", "{\"title\":\"new\"}", NULL, NULL), 200);
	ck_assert_int_eq(call(c, "GET", "/v1/cards/h1", NULL, NULL, &body), 200);
	ck_assert_msg(strstr(body, "\"title\":\"new\"") != NULL, "body: %s", body);
	free(body);
	httpc_close(c);
	harness_stop(&h);
}
END_TEST

/* Until the journal has zero-filled room ahead of its writer (the grower runs in the
 * background; at most 30 s). */
static void wait_prealloc(struct store *st)
{
	struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
	struct store_fs_stats s;
	int i;

	for (i = 0; i < 30000; i++) {
		ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
		if (s.journal_alloc_bytes >= s.journal_bytes + 8192)
			return;
		nanosleep(&ms, NULL);
	}
	ck_abort_msg("the journal was never pre-allocated");
}

/* Faults inside the pre-allocated tail (records overwrite zeros, the file does not grow): a
 * refused write and a refused sync are undone there too, and what was refused never comes
 * back after a close (which cuts the tail) and a reopen. */
START_TEST(faults_inside_preallocated_tail)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	unsigned faults[2] = {STORE_FS_FAULT_WRITE, STORE_FS_FAULT_SYNC};
	struct store_fs_stats s0, s1;
	int k;

	ck_assert_int_eq(create(st, "a", "ready", NULL), CORE_OK);
	for (k = 0; k < 2; k++) {
		wait_prealloc(st);
		ck_assert_int_eq(store_fs_stats_get(st, &s0), CORE_OK);
		ck_assert_int_eq(store_fs_fault_set(st, faults[k], true), CORE_OK);
		ck_assert_int_eq(retitle(st, "a", k ? "sync-refused" : "write-refused"),
				 CORE_ERR_STORE_UNAVAILABLE);
		assert_card(st, "a", k ? "kept" : "old", "ready");
		ck_assert(failed(st));
		ck_assert_int_eq(store_fs_fault_set(st, faults[k], false), CORE_OK);
		ck_assert_int_eq(retitle(st, "a", "kept"), CORE_OK); /* recovers */
		ck_assert_int_eq(store_fs_stats_get(st, &s1), CORE_OK);
		ck_assert_uint_gt(s1.generation, s0.generation);
	}
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(create(st, "b", "ready", NULL), CORE_ERR_STORE_UNAVAILABLE);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	assert_card(st, "a", "kept", "ready");
	ck_assert_ptr_null(get(st, "b"));
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A write that meets another thread's recovery under way waits for its outcome instead of
 * being refused meanwhile (the store-fs-faults flake of stop 19: the compactor's paced
 * attempt and the test's write after lifting a fault met about once in 12 loaded runs). */
struct racer {
	struct store *st;
	enum core_rc rc;
};

static void *retitle_first(void *arg)
{
	struct racer *r = arg;

	r->rc = retitle(r->st, "a", "first");
	return NULL;
}

START_TEST(write_during_a_recovery_waits_for_it)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct timespec lag = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
	struct racer r = {.st = st, .rc = CORE_ERR_INTERNAL};
	pthread_t t;

	ck_assert_int_eq(create(st, "a", "ready", NULL), CORE_OK);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(retitle(st, "a", "refused"), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert(failed(st));
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	/* The recovery's snapshot takes 300 ms: the write below comes while it is under way
	 * (if the thread is slower to start, the write below recovers and the thread's waits). */
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SLOW_SNAPSHOT, true), CORE_OK);
	ck_assert_int_eq(pthread_create(&t, NULL, retitle_first, &r), 0);
	nanosleep(&lag, NULL);
	ck_assert_int_eq(retitle(st, "a", "second"), CORE_OK);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(r.rc, CORE_OK);
	ck_assert(!failed(st));
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SLOW_SNAPSHOT, false), CORE_OK);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store-fs-faults");
	TCase *tc = tcase_create("faults");
	SRunner *sr;
	int nfailed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sync_fault_is_rolled_back_then_recovers);
	tcase_add_test(tc, refused_write_absent_after_reopen);
	tcase_add_test(tc, write_fault_refuses_cleanly);
	tcase_add_test(tc, write_fault_at_the_flush_fails_the_group);
	tcase_add_test(tc, write_fault_fails_a_group_across_generations);
	tcase_add_test(tc, snapshot_never_makes_refused_writes_durable);
	tcase_add_test(tc, group_failing_across_a_rotation_is_cut);
	tcase_add_test(tc, refused_writes_are_logged_once);
	tcase_add_test(tc, rollback_undoes_every_kind_of_change);
	tcase_add_test(tc, failed_group_fails_together);
	tcase_add_test(tc, http_503_with_retry_after_then_recovery);
	tcase_add_test(tc, faults_inside_preallocated_tail);
	tcase_add_test(tc, write_during_a_recovery_waits_for_it);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfailed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfailed ? EXIT_FAILURE : EXIT_SUCCESS;
}
