/* Conformance: runs, the run lock, tombstones and promoteIfOrphaned (DESIGN §5). */
#include "tests/store/conformance.h"

#include <string.h>

static struct core_run *mkrun(struct store *st, const char *id, const char *card,
			      const char *status)
{
	struct store_run_create in = {.id = id, .card_id = card, .marker = "w1",
				      .status = status, .lease_ms = 30000};
	struct core_run *r = NULL;
	struct core_card *c = ct_get(st, card);

	/* Only the card's holder starts a run (DESIGN §11): w1 holds it first. */
	if (!c->claim.present)
		ct_claim(st, card, "w1");
	core_card_free(c);
	ck_assert_int_eq(store_run_create(st, &in, &ct_bot, &r), CORE_OK);
	return r;
}

START_TEST(run_create_and_get)
{
	struct store *st = ct_open();
	struct store_run_create in = {.card_id = "nope", .marker = "w1", .status = "running",
				      .lease_ms = 30000};
	struct core_run *r = NULL, *g = NULL;
	struct core_event *ev;
	size_t n;

	ck_assert_int_eq(store_run_create(st, &in, &ct_bot, &r), CORE_ERR_NOT_FOUND);
	ck_assert_ptr_null(r);
	core_card_free(ct_create(st, "c1", "ready", NULL));
	in.card_id = "c1";
	ct_claim(st, "c1", "w1");
	ck_assert_int_eq(store_run_create(st, &in, &ct_bot, &r), CORE_OK);
	ck_assert(core_id_valid(r->id));
	ck_assert_str_eq(r->card_id, "c1");
	ck_assert_str_eq(r->board, "default");
	ck_assert_str_eq(r->owner, "w1");
	ck_assert_str_eq(r->status, "running");
	ck_assert_int_eq(r->lock_until, CT_T0 + 30000);
	ck_assert_int_eq(r->created_at, CT_T0);
	ck_assert(!r->pruned);
	ck_assert_int_eq(store_run_get(st, r->id, &g), CORE_OK);
	ck_assert_str_eq(g->id, r->id);
	ck_assert_int_eq(g->lock_until, r->lock_until);
	core_run_free(g);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "run_created");
	ck_assert_str_eq(ev[n - 1].card_id, "c1");
	store_events_free(ev, n);
	in.id = r->id;
	ck_assert_int_eq(store_run_create(st, &in, &ct_bot, &g), CORE_ERR_ALREADY_EXISTS);
	ck_assert_int_eq(store_run_get(st, "r-none", &g), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_run_create(st, &(struct store_run_create){.card_id = "c1",
			 .marker = "w1", .status = "BAD", .lease_ms = 1}, &ct_bot, &g),
			 CORE_ERR_BAD_REQUEST);
	core_run_free(r);
	ct_close(st);
}
END_TEST

START_TEST(run_update_owner_only)
{
	struct store *st = ct_open();
	struct store_run_update u = {.marker = "w2", .status = "paused_operator",
				     .continuation = "retry_armed", .lease_ms = 50000};
	struct core_run *r, *g = NULL;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	r = mkrun(st, "r1", "c1", "running");
	core_run_free(r);
	ck_assert_int_eq(store_run_update(st, "r1", &u, &ct_bot, &g), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_ptr_null(g);
	ct_now += 1000;
	u.marker = "w1";
	ck_assert_int_eq(store_run_update(st, "r1", &u, &ct_bot, &g), CORE_OK);
	ck_assert_str_eq(g->status, "paused_operator");
	ck_assert_str_eq(g->continuation, "retry_armed");
	ck_assert_int_eq(g->lock_until, ct_now + 50000); /* the lock is renewed */
	ck_assert_int_eq(g->updated_at, ct_now);
	core_run_free(g);
	/* A heartbeat-shaped update changes only the lock; clear_continuation clears. */
	u.status = NULL;
	u.continuation = NULL;
	u.clear_continuation = true;
	u.failure_code = "E_X";
	ck_assert_int_eq(store_run_update(st, "r1", &u, &ct_bot, &g), CORE_OK);
	ck_assert_str_eq(g->status, "paused_operator");
	ck_assert_ptr_null(g->continuation);
	ck_assert_str_eq(g->failure_code, "E_X");
	core_run_free(g);
	ck_assert_int_eq(store_run_update(st, "nope", &u, &ct_bot, &g), CORE_ERR_NOT_FOUND);
	u.continuation = "not_a_continuation";
	ck_assert_int_eq(store_run_update(st, "r1", &u, &ct_bot, &g), CORE_ERR_BAD_REQUEST);
	ct_close(st);
}
END_TEST

START_TEST(run_cancel_prune_tombstone)
{
	struct store *st = ct_open();
	struct store_run_update u = {.marker = "w1", .lease_ms = 1000};
	struct core_run *r = NULL;
	size_t n = 0;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	core_run_free(mkrun(st, "r1", "c1", "running"));
	core_run_free(mkrun(st, "r2", "c1", "queued"));
	ck_assert_int_eq(store_run_update(st, "r1", &(struct store_run_update){.marker = "w1",
			 .result = "{\"k\":1}", .error = "boom", .output = "some output"},
			 &ct_bot, &r), CORE_OK);
	ck_assert_ptr_nonnull(r->output);
	core_run_free(r);
	ck_assert_int_eq(store_run_cancel(st, "r1", &ct_op, &r), CORE_OK);
	ck_assert_str_eq(r->status, "cancelled");
	core_run_free(r);
	ck_assert_int_eq(store_run_prune(st, "r1", &ct_op), CORE_OK);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_ERR_NOT_FOUND);
	ck_assert_ptr_null(r);
	/* The tombstone still says which claim the run was created under (the reaper asks). */
	ck_assert_int_eq(store_run_get_any(st, "r1", &r), CORE_OK);
	ck_assert(r->pruned);
	ck_assert_int_gt(r->claim_epoch, 0);
	/* A tombstone, as the retention leaves one: what the run produced goes with it. */
	ck_assert_ptr_null(r->result);
	ck_assert_ptr_null(r->error);
	ck_assert_ptr_null(r->output);
	core_run_free(r);
	ck_assert_int_eq(store_run_get_any(st, "r-never", &r), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_run_prune(st, "r1", &ct_op), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_run_update(st, "r1", &u, &ct_bot, &r), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_run_cancel(st, "r1", &ct_op, &r), CORE_ERR_NOT_FOUND);
	/* The tombstone still counts and keeps its id. */
	ck_assert_int_eq(store_run_count_for_card(st, "c1", &n), CORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(store_run_create(st, &(struct store_run_create){.id = "r1",
			 .card_id = "c1", .marker = "w1", .status = "running", .lease_ms = 1},
			 &ct_bot, &r), CORE_ERR_ALREADY_EXISTS);
	ck_assert_int_eq(store_run_count_for_card(st, "c9", &n), CORE_OK);
	ck_assert_uint_eq(n, 0);
	ct_close(st);
}
END_TEST

START_TEST(run_promote_if_orphaned)
{
	struct store *st = ct_open();
	struct core_run *r = NULL;
	bool promoted = true;
	int64_t seq;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	core_run_free(mkrun(st, "r1", "c1", "running"));
	core_run_free(mkrun(st, "r2", "c1", "finished"));
	seq = ct_last_seq(st);
	/* Live lock: never promoted, nothing written. */
	ck_assert_int_eq(store_run_promote_if_orphaned(st, "r1", &r, &promoted), CORE_OK);
	ck_assert(!promoted);
	ck_assert_str_eq(r->status, "running");
	core_run_free(r);
	ck_assert_int_eq(ct_last_seq(st), seq);
	ct_now += 30001;
	ck_assert_int_eq(store_run_promote_if_orphaned(st, "r2", &r, &promoted), CORE_OK);
	ck_assert(!promoted); /* not running/queued */
	core_run_free(r);
	ck_assert_int_eq(store_run_promote_if_orphaned(st, "r1", &r, &promoted), CORE_OK);
	ck_assert(promoted);
	ck_assert_str_eq(r->status, "failed_resumable");
	ck_assert_str_eq(r->failure_code, "PROCESS_ORPHANED");
	core_run_free(r);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_str_eq(r->status, "failed_resumable");
	core_run_free(r);
	ck_assert_int_gt(ct_last_seq(st), seq);
	ck_assert_int_eq(store_run_promote_if_orphaned(st, "nope", &r, &promoted),
			 CORE_ERR_NOT_FOUND);
	ct_close(st);
}
END_TEST

void conformance_add_runs(Suite *s)
{
	TCase *tc = tcase_create("runs");

	tcase_add_test(tc, run_create_and_get);
	tcase_add_test(tc, run_update_owner_only);
	tcase_add_test(tc, run_cancel_prune_tombstone);
	tcase_add_test(tc, run_promote_if_orphaned);
	suite_add_tcase(s, tc);
}
