/* Runs as a record on the FS twin (DESIGN §20): a run's output and the card's history are
 * durable across a restart from the journal and from a snapshot, and the runs-by-card index
 * is rebuilt from them; a rolled-back run creation leaves the index as it was. */
#include "store/store.h"
#include "tests/store/fs_fixture.h"
#include "tests/store/test_store_fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct store_actor actor = {.name = "w"};

static void claim(struct store *st, const char *id)
{
	struct store_claim_result r = {0};

	ck_assert_int_eq(store_card_claim(st, id, "m", 60000, &actor, &r), CORE_OK);
	core_card_free(r.card);
}

static enum core_rc run(struct store *st, const char *card, const char *id, const char *status)
{
	struct store_run_create in = {.id = id, .card_id = card, .marker = "m", .status = status,
				      .lease_ms = 60000};
	struct core_run *r = NULL;
	enum core_rc rc = store_run_create(st, &in, &actor, &r);

	core_run_free(r);
	return rc;
}

/* The card's listed ids, comma-separated, and its run count. */
static void expect_history(struct store *st, const char *card, const char *ids, size_t count)
{
	struct store_run_filter f = {.card_id = card, .limit = 1000};
	struct core_run **v = NULL;
	char *next = NULL, buf[2048];
	size_t n = 0, i, len = 0;

	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	buf[0] = '\0';
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "," : "", v[i]->id);
	store_runs_free(v, n);
	ck_assert_str_eq(buf, ids);
	ck_assert_int_eq(store_run_count_for_card(st, card, &n), CORE_OK);
	ck_assert_uint_eq(n, count);
}

START_TEST(output_and_history_survive_restart)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_run_update u = {.marker = "m", .output = "line 1\nline \xc3\xa9\n"};
	struct core_card *c = NULL;
	struct core_run *r = NULL;
	int pass;

	ck_assert_int_eq(store_card_create(st, &(struct store_card_create){.id = "c1",
			 .state = "ready"}, &actor, &c), CORE_OK);
	core_card_free(c);
	claim(st, "c1");
	ck_assert_int_eq(run(st, "c1", "r1", "running"), CORE_OK);
	ck_assert_int_eq(run(st, "c1", "r2", "running"), CORE_OK);
	ck_assert_int_eq(store_run_update(st, "r1", &u, &actor, &r), CORE_OK);
	core_run_free(r);
	/* From the journal, then from a snapshot. */
	for (pass = 0; pass < 2; pass++) {
		store_close(st);
		st = fx_open(dir, 0, 0, NULL);
		ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
		ck_assert_str_eq(r->output, "line 1\nline \xc3\xa9\n");
		core_run_free(r);
		ck_assert_int_eq(store_run_get(st, "r2", &r), CORE_OK);
		ck_assert_ptr_null(r->output);
		core_run_free(r);
		expect_history(st, "c1", "r2,r1", 2);
		if (pass == 0)
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	}
	/* The index goes on from what was loaded. */
	ck_assert_int_eq(run(st, "c1", "r3", "running"), CORE_OK);
	expect_history(st, "c1", "r3,r2,r1", 3);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

START_TEST(rolled_back_run_leaves_no_trace)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &(struct store_card_create){.id = "c1",
			 .state = "ready"}, &actor, &c), CORE_OK);
	core_card_free(c);
	claim(st, "c1");
	ck_assert_int_eq(run(st, "c1", "r1", "running"), CORE_OK);
	/* A failed sync rolls the creation back: not listed, not counted, its id free. */
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(run(st, "c1", "r2", "running"), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	expect_history(st, "c1", "r1", 1);
	ck_assert_int_eq(run(st, "c1", "r2", "running"), CORE_OK);
	expect_history(st, "c1", "r2,r1", 2);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	expect_history(st, "c1", "r2,r1", 2);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

TCase *store_fs_runs_tcase(void)
{
	TCase *tc = tcase_create("fs-runs");

	tcase_add_test(tc, output_and_history_survive_restart);
	tcase_add_test(tc, rolled_back_run_leaves_no_trace);
	return tc;
}
