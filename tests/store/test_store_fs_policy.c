/* FS twin, DESIGN §17 (issue 27) beyond the cross-twin conformance: the live-claim counts
 * survive a restart and a compaction and follow a rolled-back commit (the fault hook); a board's
 * policy, a schedule and attempts survive a restart; a directory written before §17 loads
 * with no attempts, no schedule and claims taken from no column (which still count against
 * the board); claim-next with many scheduled cards ranked ahead of the ready ones takes the
 * ready ones, then the scheduled ones once due, in order (the scheduled heap). */
#include "tests/store/fs_fixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct store_actor bot = {.name = "bot"};
static const struct store_actor op = {.name = "op", .operator_role = true};
static const struct store_actor worker = {.name = "w-token"};
static int64_t clock_ms = 1780000000000LL;

static int64_t test_clock(void *ctx)
{
	(void)ctx;
	return clock_ms;
}

static struct store *open_at(const char *dir)
{
	struct store *st = fx_open(dir, 0, 0, NULL);

	store_clock_set(st, test_clock, NULL);
	return st;
}

/* The default board as `name` with ready's limit, max_claims and a retry policy. */
static void put_board(struct store *st, const char *name, int32_t ready_limit,
		      int32_t max_claims, int32_t max_attempts)
{
	struct core_board b = {0};
	size_t i;

	ck_assert_int_eq(core_board_init_default(&b, name), CORE_OK);
	for (i = 0; i < b.n_cols; i++)
		if (strcmp(b.cols[i].name, "ready") == 0)
			b.cols[i].limit = ready_limit;
	b.max_claims = max_claims;
	if (max_attempts > 0) {
		b.has_retry = true;
		b.retry = (struct core_retry){max_attempts, 1000, 4000};
	}
	ck_assert_int_eq(store_board_put(st, &b, &op), CORE_OK);
	core_board_release(&b);
}

static void mk(struct store *st, const char *board, const char *id, const char *state,
	       int32_t pri, int64_t not_before)
{
	struct store_card_create in = {.id = id, .board = board, .title = id, .state = state,
				       .priority = pri, .not_before = not_before};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
}

static enum core_rc claim(struct store *st, const char *id, const char *marker, int64_t *epoch)
{
	struct store_claim_result r;
	enum core_rc rc = store_card_claim(st, id, marker, 60000, &worker, &r);

	if (rc == CORE_OK && epoch)
		*epoch = r.token.epoch;
	core_card_free(r.card);
	return rc;
}

static const char *next(struct store *st, const char *board, int64_t *wake)
{
	static char id[CORE_ID_MAX + 1];
	struct store_claim_next in = {.board = board, .marker = "n", .lease_ms = 60000,
				      .holder = worker.name};
	struct store_claim_result r;

	ck_assert_int_eq(store_card_claim_next(st, &in, &worker, &r), CORE_OK);
	id[0] = '\0';
	if (wake)
		*wake = r.wake_at;
	if (r.card)
		snprintf(id, sizeof id, "%s", r.card->id);
	core_card_free(r.card);
	return id;
}

/* Board `board`'s counts: ready's, in_progress's and the total. */
static void counts(struct store *st, const char *board, int64_t ready, int64_t in_progress,
		   int64_t total)
{
	struct core_board b = {0};
	int64_t per[32], t = -1;
	size_t i;

	ck_assert_int_eq(store_board_get(st, board, &b), CORE_OK);
	ck_assert_int_eq(store_board_claimed(st, &b, per, &t), CORE_OK);
	ck_assert_int_eq(t, total);
	for (i = 0; i < b.n_cols; i++) {
		if (strcmp(b.cols[i].name, "ready") == 0)
			ck_assert_int_eq(per[i], ready);
		else if (strcmp(b.cols[i].name, "in_progress") == 0)
			ck_assert_int_eq(per[i], in_progress);
		else
			ck_assert_int_eq(per[i], 0);
	}
	core_board_release(&b);
}

static struct core_card *get(struct store *st, const char *id)
{
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
	return c;
}

/* The counts are the published cards': rebuilt by a replay and by a snapshot load. */
START_TEST(counts_survive_restart_and_compaction)
{
	char *dir = fx_tmpdir();
	struct store *st = open_at(dir);
	int round;

	put_board(st, "pol", 2, 3, 0);
	mk(st, "pol", "r1", "ready", 0, 0);
	mk(st, "pol", "r2", "ready", 0, 0);
	mk(st, "pol", "p1", "in_progress", 0, 0);
	ck_assert_int_eq(claim(st, "r1", "m1", NULL), CORE_OK);
	ck_assert_int_eq(claim(st, "p1", "m2", NULL), CORE_OK);
	counts(st, "pol", 1, 1, 2);
	for (round = 0; round < 3; round++) {
		store_close(st);
		st = open_at(dir); /* round 0: the journal; then the snapshot */
		counts(st, "pol", 1, 1, 2);
		if (round == 0)
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	}
	/* And the bound still holds on them: board 3, ready 2. */
	ck_assert_int_eq(claim(st, "r2", "m3", NULL), CORE_OK);
	mk(st, "pol", "r3", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "r3", "m4", NULL), CORE_ERR_CAPACITY_REACHED);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A claim whose sync fails is rolled back: its count goes with it, in memory and on disk;
 * so does a release, and a retry release's attempt. */
START_TEST(counts_follow_a_rollback)
{
	char *dir = fx_tmpdir();
	struct store *st = open_at(dir);
	struct core_token tok;
	struct core_card *c = NULL;
	int64_t e;

	put_board(st, "pol", 1, 0, 5);
	mk(st, "pol", "r1", "ready", 0, 0);
	mk(st, "pol", "r2", "ready", 0, 0);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(claim(st, "r1", "m1", NULL), CORE_ERR_STORE_UNAVAILABLE);
	counts(st, "pol", 0, 0, 0);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	/* The slot the refused claim took is free: r2 gets it. */
	ck_assert_int_eq(claim(st, "r2", "m2", &e), CORE_OK);
	counts(st, "pol", 1, 0, 1);
	ck_assert_int_eq(claim(st, "r1", "m1", NULL), CORE_ERR_CAPACITY_REACHED);
	/* A refused release keeps the claim counted. */
	tok = (struct core_token){"m2", e, NULL};
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(store_card_release(st, "r2", &tok, &worker, &c),
			 CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_ptr_null(c);
	counts(st, "pol", 1, 0, 1);
	/* So does a refused retry release, and no attempt is left behind. */
	ck_assert_int_eq(store_card_release_retry(st, "r2", &tok, &worker, &c),
			 CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	counts(st, "pol", 1, 0, 1);
	c = get(st, "r2");
	ck_assert(c->claim.present);
	ck_assert_int_eq(c->attempts, 0);
	ck_assert_int_eq(c->not_before, 0);
	core_card_free(c);
	store_close(st);
	st = open_at(dir);
	counts(st, "pol", 1, 0, 1);
	ck_assert_int_eq(claim(st, "r1", "m1", NULL), CORE_ERR_CAPACITY_REACHED);
	ck_assert_int_eq(store_card_release_retry(st, "r2", &tok, &worker, &c), CORE_OK);
	ck_assert_int_eq(c->attempts, 1);
	core_card_free(c);
	counts(st, "pol", 0, 0, 0);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A board's policy, a card's schedule and attempts and a claim's column survive a restart
 * and a compaction. */
START_TEST(policy_fields_survive_restart)
{
	char *dir = fx_tmpdir();
	struct store *st = open_at(dir);
	struct core_card *c = NULL;
	struct core_board b = {0};
	struct core_token tok;
	int64_t e, nb, wake = 0;
	int round;

	put_board(st, "pol", 4, 9, 6);
	mk(st, "pol", "j", "ready", 0, 0);
	mk(st, "pol", "s", "ready", 0, clock_ms + 7000);
	ck_assert_int_eq(claim(st, "j", "m", &e), CORE_OK);
	tok = (struct core_token){"m", e, NULL};
	ck_assert_int_eq(store_card_release_retry(st, "j", &tok, &worker, &c), CORE_OK);
	nb = c->not_before;
	core_card_free(c);
	clock_ms = nb;
	ck_assert_int_eq(claim(st, "j", "m2", &e), CORE_OK);
	for (round = 0; round < 3; round++) {
		store_close(st);
		st = open_at(dir);
		ck_assert_int_eq(store_board_get(st, "pol", &b), CORE_OK);
		ck_assert_int_eq(core_board_column(&b, "ready")->limit, 4);
		ck_assert_int_eq(b.max_claims, 9);
		ck_assert(b.has_retry);
		ck_assert_int_eq(b.retry.max_attempts, 6);
		ck_assert_int_eq(b.retry.max_backoff_ms, 4000);
		core_board_release(&b);
		c = get(st, "j");
		ck_assert_int_eq(c->attempts, 1);
		ck_assert_int_eq(c->not_before, nb);
		ck_assert_str_eq(c->claim.from, "ready");
		core_card_free(c);
		c = get(st, "s");
		ck_assert_int_eq(c->not_before, 1780000000000LL + 7000);
		core_card_free(c);
		/* The schedule is served by a reloaded claim-next too. */
		ck_assert_str_eq(next(st, "pol", &wake), "");
		ck_assert_int_eq(wake, 1780000000000LL + 7000);
		if (round == 0)
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	}
	store_close(st);
	fx_rmdir(dir);
	clock_ms = 1780000000000LL;
}
END_TEST

static void copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out;
	char buf[4096];
	size_t n;

	ck_assert_msg(in != NULL, "%s", from);
	out = fopen(to, "wb");
	ck_assert_ptr_nonnull(out);
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
}

/* tests/store/fixtures/fs-v3 (fixtures/fs-v3.c, before §17): a in snapshot.bin and b in a
 * claim-only journal record are claimed, c is not; all in ready. They load with no
 * attempts, no schedule and no claim.from: the claims count against the board, against no
 * column. */
START_TEST(old_directory_loads)
{
	char *dir = fx_tmpdir(), *p;
	struct store *st;
	struct core_card *c;
	struct core_board b = {0};
	const char *ids[] = {"a", "b", "c"};
	size_t i;
	int round;

	ck_assert_int_gt(asprintf(&p, "%s/snapshot.bin", dir), 0);
	copy_file(BOARDD_FIXTURES "/fs-v3/snapshot.bin", p);
	free(p);
	ck_assert_int_gt(asprintf(&p, "%s/journal.2", dir), 0);
	copy_file(BOARDD_FIXTURES "/fs-v3/journal.2", p);
	free(p);
	for (round = 0; round < 2; round++) {
		st = fx_open(dir, 0, 0, NULL);
		for (i = 0; i < 3; i++) {
			c = get(st, ids[i]);
			ck_assert_int_eq(c->attempts, 0);
			ck_assert_int_eq(c->not_before, 0);
			ck_assert_ptr_null(c->claim.from);
			ck_assert(c->claim.present == (i < 2));
			core_card_free(c);
		}
		counts(st, "default", 0, 0, 2);
		ck_assert_int_eq(store_board_get(st, "default", &b), CORE_OK);
		ck_assert_int_eq(b.max_claims, 0);
		ck_assert(!b.has_retry);
		core_board_release(&b);
		if (round == 1) {
			/* They count against a max_claims put on the board now, not a limit. */
			put_board(st, "default", 1, 3, 0);
			ck_assert_int_eq(claim(st, "c", "m", NULL), CORE_OK);
			counts(st, "default", 1, 0, 3);
			c = get(st, "c");
			ck_assert_str_eq(c->claim.from, "ready");
			core_card_free(c);
		}
		store_close(st);
	}
	fx_rmdir(dir);
}
END_TEST

/* tests/store/fixtures/fs-early (fixtures/fs-early.c): the store of a version that took a
 * not_before before 1970 as it came (e in snapshot.bin, p patched in the journal) opens; both
 * cards are claimable at once, and a claim and a compaction carry them on. New writes keep no
 * such time: the store takes it as no schedule, as the Mongo twin does. */
START_TEST(early_schedule_loads)
{
	char *dir = fx_tmpdir(), *p;
	struct store_card_create in = {.id = "n", .title = "n", .state = "ready",
				       .not_before = -5};
	struct store *st;
	struct core_card *c;
	int round;

	ck_assert_int_gt(asprintf(&p, "%s/snapshot.bin", dir), 0);
	copy_file(BOARDD_FIXTURES "/fs-early/snapshot.bin", p);
	free(p);
	ck_assert_int_gt(asprintf(&p, "%s/journal.2", dir), 0);
	copy_file(BOARDD_FIXTURES "/fs-early/journal.2", p);
	free(p);
	for (round = 0; round < 3; round++) {
		st = fx_open(dir, 0, 0, NULL);
		c = get(st, "e");
		ck_assert_int_eq(c->not_before, -1000);
		core_card_free(c);
		c = get(st, "p");
		ck_assert_int_eq(c->not_before, round ? 0 : -1); /* round 0 clears it, below */
		core_card_free(c);
		if (round == 0) {
			struct store_card_patch pat = {.has_not_before = true, .not_before = -7};

			ck_assert_int_eq(claim(st, "e", "m", NULL), CORE_OK);
			ck_assert_int_eq(store_card_patch(st, "p", &pat, &bot, &c), CORE_OK);
			ck_assert_int_eq(c->not_before, 0);
			core_card_free(c);
			ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
			ck_assert_int_eq(c->not_before, 0);
			core_card_free(c);
		}
		if (round == 1)
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
		c = get(st, "e");
		ck_assert(c->claim.present);
		ck_assert_str_eq(c->claim.marker, "m");
		core_card_free(c);
		c = get(st, "n");
		ck_assert_int_eq(c->not_before, 0);
		core_card_free(c);
		store_close(st);
	}
	fx_rmdir(dir);
}
END_TEST

/* Many scheduled cards ranked ahead of the ready ones: claim-next takes the ready ones (the
 * scheduled wait in their heap, never in the cache), then, as time passes, the scheduled
 * ones once due, in rank order, with the wake time of the next between them. A retry
 * release and a PATCH reschedule cards the cache already held. */
START_TEST(claim_next_with_many_scheduled)
{
	struct store *st = fx_open_fresh();
	struct store_card_patch pat = {.has_not_before = true};
	struct core_card *c = NULL;
	const int64_t t0 = clock_ms;
	char id[32];
	int64_t wake = -1;
	int i;

	store_clock_set(st, test_clock, NULL);
	for (i = 0; i < 600; i++) {
		snprintf(id, sizeof id, "s%03d", i);
		/* s000..s599, due one second apart from t0 + 10 s, s599 first */
		mk(st, "default", id, "ready", 10, t0 + 10000 + 1000 * (599 - i));
	}
	for (i = 0; i < 5; i++) {
		snprintf(id, sizeof id, "r%d", i);
		mk(st, "default", id, "ready", 0, 0);
	}
	for (i = 0; i < 5; i++) {
		snprintf(id, sizeof id, "r%d", i);
		ck_assert_str_eq(next(st, "default", NULL), id);
	}
	ck_assert_str_eq(next(st, "default", &wake), "");
	ck_assert_int_eq(wake, t0 + 10000);
	/* Due one by one: s599, then s598 and s597 together (rank: the id). */
	clock_ms = t0 + 10000;
	ck_assert_str_eq(next(st, "default", NULL), "s599");
	ck_assert_str_eq(next(st, "default", &wake), "");
	ck_assert_int_eq(wake, t0 + 11000);
	clock_ms = t0 + 12000;
	ck_assert_str_eq(next(st, "default", NULL), "s597");
	ck_assert_str_eq(next(st, "default", NULL), "s598");
	ck_assert_str_eq(next(st, "default", &wake), "");
	ck_assert_int_eq(wake, t0 + 13000);
	/* A PATCH moves s000 (due last) to now; another clears s001's schedule. */
	pat.not_before = clock_ms;
	ck_assert_int_eq(store_card_patch(st, "s000", &pat, &bot, &c), CORE_OK);
	core_card_free(c);
	pat.not_before = 0;
	ck_assert_int_eq(store_card_patch(st, "s001", &pat, &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_str_eq(next(st, "default", NULL), "s000");
	ck_assert_str_eq(next(st, "default", NULL), "s001");
	ck_assert_str_eq(next(st, "default", &wake), "");
	ck_assert_int_eq(wake, t0 + 13000);
	/* A retry release of r0: back in the heap, due after its backoff. */
	{
		struct store_claim_result r;
		struct core_token tok;

		ck_assert_int_eq(store_card_claim(st, "r0", "n", 60000, &worker, &r), CORE_OK);
		tok = r.token;
		tok.marker = "n";
		core_card_free(r.card);
		ck_assert_int_eq(store_card_release_retry(st, "r0", &tok, &worker, &c), CORE_OK);
		ck_assert_int_eq(c->attempts, 1);
		clock_ms = c->not_before;
		core_card_free(c);
	}
	/* r0 (priority 0) and the scheduled due by then (priority 10) race: rank decides. */
	for (i = 0; i < 600; i++) {
		const char *got = next(st, "default", NULL);

		if (strcmp(got, "r0") == 0)
			break;
		ck_assert_msg(got[0] == 's', "got '%s'", got);
	}
	ck_assert_int_lt(i, 600);
	fx_close_fresh(st);
	clock_ms = t0;
}
END_TEST

/* Many scheduled cards due at the same time (more than claim-next promotes one by one):
 * taken in rank order once due, interleaved with the ready ones by rank. */
START_TEST(claim_next_mass_due)
{
	struct store *st = fx_open_fresh();
	const int64_t t0 = clock_ms;
	char id[32], want[32];
	int64_t wake = -1;
	int i;

	store_clock_set(st, test_clock, NULL);
	for (i = 0; i < 1000; i++) {
		snprintf(id, sizeof id, "s%04d", i);
		mk(st, "default", id, "ready", i < 500 ? 10 : 0, t0 + 5000);
	}
	mk(st, "default", "r0", "ready", 5, 0);
	mk(st, "default", "r1", "ready", 5, 0);
	ck_assert_str_eq(next(st, "default", NULL), "r0");
	ck_assert_str_eq(next(st, "default", &wake), "r1");
	ck_assert_str_eq(next(st, "default", &wake), "");
	ck_assert_int_eq(wake, t0 + 5000);
	mk(st, "default", "r2", "ready", 5, 0);
	clock_ms = t0 + 5000;
	/* priority 10 (s0000..s0499), then r2 (5), then priority 0 (s0500..) */
	for (i = 0; i < 500; i++) {
		snprintf(want, sizeof want, "s%04d", i);
		ck_assert_str_eq(next(st, "default", NULL), want);
	}
	ck_assert_str_eq(next(st, "default", NULL), "r2");
	for (i = 500; i < 1000; i++) {
		snprintf(want, sizeof want, "s%04d", i);
		ck_assert_str_eq(next(st, "default", NULL), want);
	}
	ck_assert_str_eq(next(st, "default", &wake), "");
	ck_assert_int_eq(wake, 0);
	fx_close_fresh(st);
	clock_ms = t0;
}
END_TEST

/* A column renamed: the claims taken from it are taken from its new name, and keep
 * counting against its limit (which the column keeps), wherever the cards sit now. */
START_TEST(column_rename_carries_claims)
{
	char *dir = fx_tmpdir();
	struct store *st = open_at(dir);
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = "in_progress"};
	struct core_card *c = NULL;
	struct core_board b = {0};
	int64_t per[32], total, e;
	size_t touched = 0, i;
	int round;

	put_board(st, "pol", 1, 0, 0);
	mk(st, "pol", "r1", "ready", 0, 0);
	mk(st, "pol", "r2", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "r1", "m1", &e), CORE_OK);
	w.token = (struct core_token){"m1", e, NULL};
	ck_assert_int_eq(store_card_owned_write(st, "r1", &w, &worker, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_board_column_rename(st, "pol", "ready", "queued", &op, &touched),
			 CORE_OK);
	ck_assert_uint_eq(touched, 1); /* r2 moved; r1's claim re-labelled */
	for (round = 0; round < 2; round++) {
		c = get(st, "r1");
		ck_assert_str_eq(c->claim.from, "queued");
		ck_assert_str_eq(c->state, "in_progress");
		core_card_free(c);
		ck_assert_int_eq(store_board_get(st, "pol", &b), CORE_OK);
		ck_assert_int_eq(store_board_claimed(st, &b, per, &total), CORE_OK);
		ck_assert_int_eq(total, 1);
		for (i = 0; i < b.n_cols; i++)
			ck_assert_int_eq(per[i], strcmp(b.cols[i].name, "queued") == 0 ? 1 : 0);
		ck_assert_int_eq(core_board_column(&b, "queued")->limit, 1);
		core_board_release(&b);
		ck_assert_int_eq(claim(st, "r2", "m2", NULL), CORE_ERR_CAPACITY_REACHED);
		store_close(st);
		st = open_at(dir);
	}
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* The counts' keys ("<board>/<column>") at the longest names there are: a 64-byte board and a
 * 64-byte column still count, and the column's limit still holds. */
START_TEST(counts_at_the_longest_names)
{
	char *dir = fx_tmpdir();
	struct store *st = open_at(dir);
	char board[CORE_NAME_MAX + 1], col[CORE_NAME_MAX + 1];
	struct core_board b = {0};
	int64_t per[32], total;
	size_t touched = 0, i;

	memset(board, 'b', CORE_NAME_MAX);
	board[CORE_NAME_MAX] = '\0';
	memset(col, 'c', CORE_NAME_MAX);
	col[CORE_NAME_MAX] = '\0';
	put_board(st, board, 1, 0, 0);
	ck_assert_int_eq(store_board_column_rename(st, board, "ready", col, &op, &touched), CORE_OK);
	mk(st, board, "r1", col, 0, 0);
	mk(st, board, "r2", col, 0, 0);
	ck_assert_int_eq(claim(st, "r1", "m1", NULL), CORE_OK);
	ck_assert_int_eq(claim(st, "r2", "m2", NULL), CORE_ERR_CAPACITY_REACHED);
	ck_assert_int_eq(store_board_get(st, board, &b), CORE_OK);
	ck_assert_int_eq(store_board_claimed(st, &b, per, &total), CORE_OK);
	ck_assert_int_eq(total, 1);
	for (i = 0; i < b.n_cols; i++)
		ck_assert_int_eq(per[i], strcmp(b.cols[i].name, col) == 0 ? 1 : 0);
	core_board_release(&b);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* The events of a retry (DESIGN §17): LATER, card_released with retry, attempts and the
 * time; EXHAUSTED, card_state_changed (attempts_exhausted) + card_gave_up + card_released.
 * The reaper's return in a batch that falls back to single steps counts its attempt once. */
START_TEST(retry_events_and_reaper_fallback)
{
	struct store *st = fx_open_fresh();
	const struct store_actor reaper = {.name = "reaper:h"};
	struct store_reaper_act a[2];
	struct core_event *ev = NULL;
	struct core_card *c = NULL, *seen;
	struct core_token tok, prev;
	int64_t e, next_seq = 0, from_seq;
	size_t n = 0;

	store_clock_set(st, test_clock, NULL);
	put_board(st, "pol", 0, 0, 2);
	mk(st, "pol", "j", "ready", 0, 0);
	mk(st, "pol", "k", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "j", "m", &e), CORE_OK);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &from_seq),
			 CORE_OK);
	store_events_free(ev, n);
	tok = (struct core_token){"m", e, NULL};
	ck_assert_int_eq(store_card_release_retry(st, "j", &tok, &worker, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, from_seq, 1000, 0, &ev, &n, &next_seq),
			 CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(ev[0].type, CORE_EV_CARD_RELEASED);
	ck_assert_msg(strstr(ev[0].payload, "\"retry\":true") &&
			      strstr(ev[0].payload, "\"attempts\":1") &&
			      strstr(ev[0].payload, "\"not_before\":\""),
		      "payload %s", ev[0].payload);
	store_events_free(ev, n);
	clock_ms += 2000;
	ck_assert_int_eq(claim(st, "j", "m2", &e), CORE_OK);
	from_seq = next_seq + 1; /* past j's card_claimed */
	tok = (struct core_token){"m2", e, NULL};
	ck_assert_int_eq(store_card_release_retry(st, "j", &tok, &worker, &c), CORE_OK);
	ck_assert_str_eq(c->state, "blocked");
	ck_assert_str_eq(c->state_reason, CORE_GAVE_UP_ATTEMPTS_EXHAUSTED);
	core_card_free(c);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, from_seq, 1000, 0, &ev, &n, &next_seq),
			 CORE_OK);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(ev[0].type, CORE_EV_CARD_STATE_CHANGED);
	ck_assert_str_eq(ev[0].reason, CORE_GAVE_UP_ATTEMPTS_EXHAUSTED);
	ck_assert_int_eq(ev[1].type, CORE_EV_CARD_GAVE_UP);
	ck_assert_str_eq(ev[1].reason, CORE_GAVE_UP_ATTEMPTS_EXHAUSTED);
	ck_assert_msg(strstr(ev[0].payload, "\"cause\":\"attempts_exhausted\""), "payload %s",
		      ev[0].payload);
	ck_assert_int_eq(ev[2].type, CORE_EV_CARD_RELEASED);
	ck_assert_msg(strstr(ev[2].payload, "\"attempts\":2") &&
			      !strstr(ev[2].payload, "not_before"),
		      "payload %s", ev[2].payload);
	store_events_free(ev, n);

	/* The reaper: k's exact release with retry, beside an item whose token is stale (the
	 * batch falls back to one step per item): k counts one attempt, not two. */
	ck_assert_int_eq(claim(st, "k", "mk", &e), CORE_OK);
	clock_ms += 61000;
	prev = (struct core_token){"mk", e, NULL};
	ck_assert_int_eq(store_reaper_transfer(st, "k", &prev, "reaper:h", 60000, &c), CORE_OK);
	core_card_free(c);
	seen = get(st, "k");
	memset(a, 0, sizeof a);
	a[0].id = "j";
	a[0].n_w = 1;
	a[0].w[0] = (struct store_owned_write){.kind = STORE_OWNED_STATE, .state = "ready",
					       .token = {"reaper:h", 99, NULL}, .release = true,
					       .event_reason = "watchdog"};
	a[1] = (struct store_reaper_act){.id = "k", .release_expect = seen, .retry = true};
	ck_assert_int_eq(store_reaper_act(st, a, 2, &reaper), CORE_OK);
	ck_assert_int_eq(a[0].rc, CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(a[1].rc, CORE_OK);
	core_card_free(seen);
	c = get(st, "k");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_int_gt(c->not_before, clock_ms);
	core_card_free(c);
	fx_close_fresh(st);
	clock_ms = 1780000000000LL;
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store-fs-policy");
	TCase *tc = tcase_create("policy");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, counts_survive_restart_and_compaction);
	tcase_add_test(tc, counts_follow_a_rollback);
	tcase_add_test(tc, policy_fields_survive_restart);
	tcase_add_test(tc, old_directory_loads);
	tcase_add_test(tc, early_schedule_loads);
	tcase_add_test(tc, claim_next_with_many_scheduled);
	tcase_add_test(tc, claim_next_mass_due);
	tcase_add_test(tc, column_rename_carries_claims);
	tcase_add_test(tc, counts_at_the_longest_names);
	tcase_add_test(tc, retry_events_and_reaper_fallback);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
