/* FS twin only, DESIGN §11: a claim-only write journals the claim fields, never the card
 * whole, and what §11 adds to the state (holders, run epochs, epoch floors) survives a
 * restart through the journal and through a snapshot. */
#include "tests/store/test_store_fs.h"
#include "tests/store/fs_fixture.h"
#include "store/fs/fs.h"
#include "store/fs/fs_txn.h"

#include <stdlib.h>
#include <string.h>

static const struct store_actor wk = {.name = "wk-one"};

static uint64_t journal_bytes(struct store *st)
{
	struct store_fs_stats s;

	ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
	return s.journal_bytes;
}

/* The amplification: renews of a big card wrote the card each time (10 renews of a
 * 26 MB card: 341 MB). Now a renew costs a line of its own size, whatever the card's. */
START_TEST(renew_journals_claim_fields_only)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_card_create in = {.id = "big", .state = "ready"};
	struct store_claim_result r;
	struct core_token t = {.marker = "w1"};
	struct core_card *c = NULL;
	char *body = malloc(900 * 1024 + 1);
	uint64_t before, grew;
	int i;

	memset(body, 'b', 900 * 1024);
	body[900 * 1024] = '\0';
	in.body = body;
	ck_assert_int_eq(store_card_create(st, &in, &wk, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_claim(st, "big", "w1", 60000, &wk, &r), CORE_OK);
	t.epoch = r.token.epoch;
	core_card_free(r.card);
	before = journal_bytes(st);
	for (i = 0; i < 10; i++) {
		ck_assert_int_eq(store_card_renew(st, "big", &t, 0, &wk, &c), CORE_OK);
		core_card_free(c);
	}
	grew = journal_bytes(st) - before;
	ck_assert_msg(grew < 10 * 512, "10 renews of a 900 KiB card journaled %llu bytes",
		      (unsigned long long)grew);
	/* A release is claim-only too; then a restart replays the claim lines onto the card. */
	ck_assert_int_eq(store_card_renew(st, "big", &t, 45000, &wk, &c), CORE_OK);
	core_card_free(c);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(store_card_get(st, "big", &c), CORE_OK);
	ck_assert_uint_eq(strlen(c->body), 900 * 1024);
	ck_assert(c->claim.present);
	ck_assert_int_eq(c->claim.lease_ms, 45000);
	ck_assert_str_eq(c->claim.holder, "wk-one");
	ck_assert_int_eq(c->claim_epoch, t.epoch);
	core_card_free(c);
	ck_assert_int_eq(store_card_release(st, "big", &t, &wk, &c), CORE_OK);
	core_card_free(c);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(store_card_get(st, "big", &c), CORE_OK);
	ck_assert(!c->claim.present);
	ck_assert_uint_eq(strlen(c->body), 900 * 1024);
	core_card_free(c);
	store_close(st);
	free(body);
	fx_rmdir(dir);
}
END_TEST

/* Holders, run epochs and the floor of a deleted id, through the journal and a snapshot. */
static void assert_state(struct store *st, int64_t epoch)
{
	struct store_claim_result r;
	struct core_card *c = NULL;
	struct core_run *run = NULL;

	ck_assert_int_eq(store_card_get(st, "kept", &c), CORE_OK);
	ck_assert_str_eq(c->claim.holder, "wk-one");
	core_card_free(c);
	ck_assert_int_eq(store_run_get(st, "r1", &run), CORE_OK);
	ck_assert_int_gt(run->claim_epoch, 0);
	core_run_free(run);
	/* "gone" was deleted at `epoch`: re-created, it starts above. */
	ck_assert_int_eq(store_card_create(st, &(struct store_card_create){.id = "gone",
			 .state = "ready"}, &wk, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_claim(st, "gone", "w1", 1000, &wk, &r), CORE_OK);
	ck_assert_int_gt(r.token.epoch, epoch);
	core_card_free(r.card);
}

START_TEST(fence_state_survives_restart_and_snapshot)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_claim_result r;
	struct core_run *run = NULL;
	struct core_card *c = NULL;
	int64_t epoch;
	int round;

	for (round = 0; round < 2; round++) {
		ck_assert_int_eq(store_card_create(st, &(struct store_card_create){.id = "kept",
				 .state = "ready"}, &wk, &c), CORE_OK);
		core_card_free(c);
		ck_assert_int_eq(store_card_claim(st, "kept", "w1", 60000, &wk, &r), CORE_OK);
		core_card_free(r.card);
		ck_assert_int_eq(store_run_create(st, &(struct store_run_create){.id = "r1",
				 .card_id = "kept", .marker = "w1", .status = "running",
				 .lease_ms = 1000}, &wk, &run), CORE_OK);
		core_run_free(run);
		ck_assert_int_eq(store_card_create(st, &(struct store_card_create){.id = "gone",
				 .state = "ready"}, &wk, &c), CORE_OK);
		core_card_free(c);
		ck_assert_int_eq(store_card_claim(st, "gone", "w1", 1000, &wk, &r), CORE_OK);
		epoch = r.token.epoch;
		core_card_free(r.card);
		ck_assert_int_eq(store_card_delete(st, "gone", &wk), CORE_OK);
		/* Round 0: replayed from the journal. Round 1: loaded from a snapshot. */
		if (round == 1)
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
		store_close(st);
		st = fx_open(dir, 0, 0, NULL);
		assert_state(st, epoch);
		store_close(st);
		fx_rmdir(dir);
		dir = fx_tmpdir();
		st = fx_open(dir, 0, 0, NULL);
	}
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A renew's copy of the card is one block (fs_txn_card_fixed): the answer it becomes is read
 * and freed whole. If the same step then asks for the card to change it (an effect could),
 * the copy turns ordinary, the change lands, and the answer already handed out is made again
 * so it says what the step left. */
START_TEST(fixed_copy_turns_mutable_in_the_step)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_card_create in = {.id = "a", .title = "before", .state = "ready"};
	struct core_card *c = NULL, *fixed = NULL, *mut = NULL, *ans = NULL;
	struct fs_txn t;
	int round;

	ck_assert_int_eq(store_card_create(st, &in, &wk, &c), CORE_OK);
	core_card_free(c);
	for (round = 0; round < 2; round++) {
		fs_txn_begin(fs_of(st), &t, &wk);
		ck_assert_int_eq(fs_txn_card_fixed(&t, "a", &fixed), CORE_OK);
		ck_assert(fixed->one_block);
		ck_assert_int_eq(fs_txn_card_fixed(&t, "a", &c), CORE_OK);
		ck_assert_ptr_eq(c, fixed); /* one copy a step */
		if (round == 1) /* round 0: nobody holds the block, it is freed when replaced */
			ck_assert_int_eq(fs_txn_answer(&t, fixed, &ans), CORE_OK);
		ck_assert_int_eq(fs_txn_card(&t, "a", &mut), CORE_OK);
		ck_assert(!mut->one_block);
		ck_assert_int_eq(core_str_set(&mut->title, round ? "after-1" : "after-0"), CORE_OK);
		ck_assert_int_eq(fs_txn_end(&t, CORE_OK), CORE_OK);
		if (round == 1) {
			ck_assert_str_eq(ans->title, "after-1");
			core_card_free(ans);
		}
		ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
		ck_assert_str_eq(c->title, round ? "after-1" : "after-0");
		core_card_free(c);
	}
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
	ck_assert_str_eq(c->title, "after-1");
	core_card_free(c);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

TCase *store_fs_fence_tcase(void)
{
	TCase *tc = tcase_create("fence");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, renew_journals_claim_fields_only);
	tcase_add_test(tc, fence_state_survives_restart_and_snapshot);
	tcase_add_test(tc, fixed_copy_turns_mutable_in_the_step);
	return tc;
}
