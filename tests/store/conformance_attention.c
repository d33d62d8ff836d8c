/* Conformance: the attention lane (DESIGN §15), one case per reason, the clearing moves,
 * scope and the limit — the same body on both twins. */
#include "tests/store/conformance.h"

#include <string.h>

#define BIT(x) (1u << CORE_ATTN_##x)

/* The lane as (id, reasons) pairs; fails the test on error. */
static struct store_attention *lane(struct store *st, const char *board,
				    const char *const *boards, size_t limit, size_t *n,
				    bool *truncated)
{
	struct store_attention *v = NULL;
	bool t = false;

	ck_assert_int_eq(store_attention_list(st, board, boards, limit, &v, n, &t), CORE_OK);
	ck_assert_ptr_nonnull(v);
	if (truncated)
		*truncated = t;
	return v;
}

/* The reasons of card id in the lane (0: not in it). */
static unsigned reasons_of(struct store *st, const char *id)
{
	size_t n, i;
	unsigned r = 0;
	struct store_attention *v = lane(st, NULL, NULL, 1000, &n, NULL);

	for (i = 0; i < n; i++) {
		ck_assert_uint_ne(v[i].reasons, 0);
		if (strcmp(v[i].card->id, id) == 0)
			r = v[i].reasons;
	}
	store_attention_free(v, n);
	return r;
}

static void owned(struct store *st, const char *id, struct store_owned_write *w)
{
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_owned_write(st, id, w, &ct_bot, &c), CORE_OK);
	core_card_free(c);
}

/* Claims id as w1, records a new run `run` with `status` under that claim; returns the
 * epoch. */
static int64_t claim_with_run(struct store *st, const char *id, const char *run,
			      const char *status)
{
	int64_t epoch = ct_claim(st, id, "w1");
	struct store_run_create in = {.id = run, .card_id = id, .marker = "w1",
				      .status = "running", .lease_ms = 30000};
	struct store_run_update u = {.marker = "w1", .status = status, .lease_ms = 30000};
	struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN,
				      .token = {.marker = "w1", .epoch = epoch},
				      .run_id = run};
	struct core_run *r = NULL;

	ck_assert_int_eq(store_run_create(st, &in, &ct_bot, &r), CORE_OK);
	core_run_free(r);
	owned(st, id, &w);
	ct_now += 1;
	if (strcmp(status, "running") != 0) {
		ck_assert_int_eq(store_run_update(st, run, &u, &ct_bot, &r), CORE_OK);
		core_run_free(r);
	}
	return epoch;
}

static void file_to(struct store *st, const char *id, int64_t epoch, const char *to)
{
	struct store_owned_write w = {.kind = STORE_OWNED_STATE,
				      .token = {.marker = "w1", .epoch = epoch},
				      .state = to, .reason = "test", .release = true};

	ct_now += 1;
	owned(st, id, &w);
}

static void reopen(struct store *st, const char *id, const char *to)
{
	struct core_card *c = NULL;

	ct_now += 1;
	ck_assert_int_eq(store_card_reopen(st, id, to, NULL, &ct_op, &c), CORE_OK);
	core_card_free(c);
}

static void release(struct store *st, const char *id, const char *marker, int64_t epoch)
{
	struct core_token t = {.marker = marker, .epoch = epoch};
	struct core_card *c = NULL;

	ct_now += 1;
	ck_assert_int_eq(store_card_release(st, id, &t, &ct_bot, &c), CORE_OK);
	core_card_free(c);
}

static void revoke(struct store *st, const char *id)
{
	struct core_card *c = NULL;

	ct_now += 1;
	ck_assert_int_eq(store_card_revoke(st, id, &ct_op, &c), CORE_OK);
	core_card_free(c);
}

START_TEST(attention_empty_and_quiet_cards)
{
	struct store *st = ct_open();
	size_t n;
	struct store_attention *v;

	v = lane(st, NULL, NULL, 10, &n, NULL);
	ck_assert_uint_eq(n, 0);
	store_attention_free(v, n);
	/* Cards with nothing wrong: unclaimed, claimed and live, running, done. */
	core_card_free(ct_create(st, "q1", "ready", NULL));
	core_card_free(ct_create(st, "q2", "done", NULL));
	ct_claim(st, "q1", "w1");
	core_card_free(ct_create(st, "q3", "in_progress", NULL));
	claim_with_run(st, "q3", "rq3", "running");
	v = lane(st, NULL, NULL, 10, &n, NULL);
	ck_assert_uint_eq(n, 0);
	store_attention_free(v, n);
	ck_assert_int_eq(store_attention_list(st, NULL, NULL, 0, &v, &n, &(bool){0}),
			 CORE_ERR_BAD_REQUEST);
	ck_assert_ptr_null(v);
	ct_close(st);
}
END_TEST

START_TEST(attention_gave_up)
{
	struct store *st = ct_open();
	struct core_gave_up g = {.set = true, .reason = "run_pruned", .run_id = "r-gone",
				 .state = "in_progress"};
	struct store_owned_write w = {.kind = STORE_OWNED_GAVE_UP, .gave_up = &g};
	const char *const ids[] = {"g2", "g3"};
	struct core_card *c;
	int i;

	core_card_free(ct_create(st, "g1", "in_progress", NULL));
	w.token = (struct core_token){.marker = "w1", .epoch = ct_claim(st, "g1", "w1")};
	g.at = ct_now;
	owned(st, "g1", &w);
	/* Stamped where it stands: in the lane at once. */
	ck_assert_uint_eq(reasons_of(st, "g1"), BIT(GAVE_UP));
	file_to(st, "g1", w.token.epoch, "blocked");
	ck_assert_uint_eq(reasons_of(st, "g1"), BIT(GAVE_UP));
	c = ct_get(st, "g1");
	ck_assert(c->gave_up.set);
	core_card_free(c);
	/* The operator's reopen answers it. */
	reopen(st, "g1", "ready");
	ck_assert_uint_eq(reasons_of(st, "g1"), 0);
	/* A stamp the worker dated before 1970 (or year 1) is still a give-up once the card is
	 * filed: the Mongo twin selected gave_up.at >= the epoch, and such a card was never in
	 * its lane. (In a working column a stamp older than the card's entry there is stale.) */
	for (i = 0; i < 2; i++) {
		core_card_free(ct_create(st, ids[i], "in_progress", NULL));
		w.token = (struct core_token){.marker = "w1", .epoch = ct_claim(st, ids[i], "w1")};
		g.at = i == 0 ? -1 : -62135596800000; /* 0001-01-01T00:00:00Z */
		owned(st, ids[i], &w);
		ck_assert_uint_eq(reasons_of(st, ids[i]), 0);
		file_to(st, ids[i], w.token.epoch, "blocked");
		ck_assert_uint_eq(reasons_of(st, ids[i]), BIT(GAVE_UP));
	}
	ct_close(st);
}
END_TEST

START_TEST(attention_run_failed)
{
	struct store *st = ct_open();
	int64_t epoch;

	core_card_free(ct_create(st, "f1", "in_progress", NULL));
	epoch = claim_with_run(st, "f1", "rf1", "failed");
	/* Failed while the card stood in the running column: in the lane. */
	ck_assert_uint_eq(reasons_of(st, "f1"), BIT(RUN_FAILED));
	file_to(st, "f1", epoch, "blocked");
	ck_assert_uint_eq(reasons_of(st, "f1"), BIT(RUN_FAILED));
	reopen(st, "f1", "ready");
	ck_assert_uint_eq(reasons_of(st, "f1"), 0);
	/* Failed in place and released: the card stands where its last run failed. */
	core_card_free(ct_create(st, "f3", "in_progress", NULL));
	epoch = claim_with_run(st, "f3", "rf3", "failed");
	release(st, "f3", "w1", epoch);
	ck_assert_uint_eq(reasons_of(st, "f3"), BIT(RUN_FAILED));
	/* Claimed again (last_run_id still names the earlier claim's run): the new claim is the
	 * answer to that failure, and when its lease runs out that is all the lane says. */
	ct_claim(st, "f3", "w2");
	ck_assert_uint_eq(reasons_of(st, "f3"), 0);
	ct_now += 60001;
	ck_assert_uint_eq(reasons_of(st, "f3"), BIT(LEASE_EXPIRED_KEPT));
	/* A finished run is nothing to look at. */
	core_card_free(ct_create(st, "f2", "in_progress", NULL));
	epoch = claim_with_run(st, "f2", "rf2", "finished");
	file_to(st, "f2", epoch, "done");
	ck_assert_uint_eq(reasons_of(st, "f2"), 0);
	ct_close(st);
}
END_TEST

START_TEST(attention_run_paused)
{
	struct store *st = ct_open();
	struct store_run_update u = {.marker = "w1", .status = "running", .lease_ms = 30000};
	struct core_run *r = NULL;

	core_card_free(ct_create(st, "p1", "in_progress", NULL));
	claim_with_run(st, "p1", "rp1", "paused_waiting_human");
	ck_assert_uint_eq(reasons_of(st, "p1"), BIT(RUN_PAUSED));
	/* Resumed: out of the lane (a run write alone moves it, on both twins). */
	ck_assert_int_eq(store_run_update(st, "rp1", &u, &ct_bot, &r), CORE_OK);
	core_run_free(r);
	ck_assert_uint_eq(reasons_of(st, "p1"), 0);
	u.status = "paused_operator";
	ck_assert_int_eq(store_run_update(st, "rp1", &u, &ct_bot, &r), CORE_OK);
	core_run_free(r);
	ck_assert_uint_eq(reasons_of(st, "p1"), BIT(RUN_PAUSED));
	/* The holder dies: the reaper keeps a paused run's claim, the lane says both. */
	ct_now += 60001;
	ck_assert_uint_eq(reasons_of(st, "p1"), BIT(LEASE_EXPIRED_KEPT) | BIT(RUN_PAUSED));
	/* Revoked, the claim that was the brake is gone: the run holds nothing now (and its
	 * owner can no longer write it); the lane shows nothing about it. */
	revoke(st, "p1");
	ck_assert_uint_eq(reasons_of(st, "p1"), 0);
	/* Claimed again, last_run_id still naming the paused run of the earlier claim: that run
	 * says nothing about the new claim, live or expired. */
	ct_claim(st, "p1", "w2");
	ck_assert_uint_eq(reasons_of(st, "p1"), 0);
	ct_now += 60001;
	ck_assert_uint_eq(reasons_of(st, "p1"), BIT(LEASE_EXPIRED_KEPT));
	/* Released by its own holder while paused: the same. */
	core_card_free(ct_create(st, "p2", "in_progress", NULL));
	release(st, "p2", "w1", claim_with_run(st, "p2", "rp2", "paused_operator"));
	ck_assert_uint_eq(reasons_of(st, "p2"), 0);
	ct_close(st);
}
END_TEST

START_TEST(attention_awaiting_input)
{
	struct store *st = ct_open();
	struct store_owned_write w = {.kind = STORE_OWNED_AWAITING_INPUT, .awaiting_input = true};

	core_card_free(ct_create(st, "a1", "in_progress", NULL));
	w.token = (struct core_token){.marker = "w1", .epoch = ct_claim(st, "a1", "w1")};
	owned(st, "a1", &w);
	ck_assert_uint_eq(reasons_of(st, "a1"), BIT(AWAITING_INPUT));
	w.awaiting_input = false;
	owned(st, "a1", &w);
	ck_assert_uint_eq(reasons_of(st, "a1"), 0);
	ct_close(st);
}
END_TEST

START_TEST(attention_leases_and_recovery)
{
	struct store *st = ct_open();
	struct core_token prev = {.marker = "w1"};
	struct core_card *c = NULL;
	int64_t epoch;

	core_card_free(ct_create(st, "l1", "in_progress", NULL));
	core_card_free(ct_create(st, "l2", "in_progress", NULL));
	core_card_free(ct_create(st, "l3", "in_progress", NULL));
	epoch = ct_claim(st, "l1", "w1");
	ct_claim(st, "l2", "w2");
	ck_assert_uint_eq(reasons_of(st, "l1"), 0);
	ct_now += 60000; /* exactly at lease_until: not expired yet */
	ck_assert_uint_eq(reasons_of(st, "l1"), 0);
	ct_now += 1;
	ck_assert_uint_eq(reasons_of(st, "l1"), BIT(LEASE_EXPIRED_KEPT));
	ck_assert_uint_eq(reasons_of(st, "l2"), BIT(LEASE_EXPIRED_KEPT));
	/* A fresh claim on l3 late: its lease is live. */
	ct_claim(st, "l3", "w3");
	ck_assert_uint_eq(reasons_of(st, "l3"), 0);
	/* The reaper takes l1 over and keeps it: a recovery hold, live lease or not. */
	prev.epoch = epoch;
	ck_assert_int_eq(store_reaper_transfer(st, "l1", &prev, "reaper:h1", 60000, &c), CORE_OK);
	core_card_free(c);
	ck_assert_uint_eq(reasons_of(st, "l1"), BIT(RECOVERY_HOLD));
	ct_now += 120000;
	ck_assert_uint_eq(reasons_of(st, "l1"), BIT(RECOVERY_HOLD));
	ck_assert_uint_eq(reasons_of(st, "l3"), BIT(LEASE_EXPIRED_KEPT));
	ct_close(st);
}
END_TEST

START_TEST(attention_scope_order_limit)
{
	struct store *st = ct_open();
	struct core_board b = {0};
	struct store_card_create in = {.id = "o1", .board = "other", .state = "in_progress"};
	struct store_attention *v;
	struct core_card *c = NULL;
	const char *const only_other[] = {"other", NULL};
	const char *const only_default[] = {"default", NULL};
	size_t n;
	bool truncated;

	ck_assert_int_eq(core_board_init_default(&b, "other"), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	core_board_release(&b);
	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ct_claim(st, "o1", "w1");
	core_card_free(ct_create(st, "d1", "in_progress", NULL));
	ct_claim(st, "d1", "w1");
	ct_now += 1000;
	core_card_free(ct_create(st, "d2", "in_progress", NULL));
	ct_claim(st, "d2", "w1");
	ct_now += 70000; /* all three expired; d2 was written last */
	v = lane(st, NULL, NULL, 1000, &n, &truncated);
	ck_assert_uint_eq(n, 3);
	ck_assert(!truncated);
	store_attention_free(v, n);
	v = lane(st, "other", NULL, 1000, &n, NULL);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].card->id, "o1");
	store_attention_free(v, n);
	v = lane(st, NULL, only_default, 1000, &n, NULL);
	ck_assert_uint_eq(n, 2);
	store_attention_free(v, n);
	v = lane(st, "default", only_other, 1000, &n, NULL);
	ck_assert_uint_eq(n, 0);
	store_attention_free(v, n);
	/* Newest update first; the limit cuts and says so. */
	v = lane(st, "default", NULL, 1, &n, &truncated);
	ck_assert_uint_eq(n, 1);
	ck_assert(truncated);
	ck_assert_str_eq(v[0].card->id, "d2");
	ck_assert_uint_eq(v[0].reasons, BIT(LEASE_EXPIRED_KEPT));
	store_attention_free(v, n);
	/* A deleted card leaves the lane. */
	ck_assert_int_eq(store_card_delete(st, "d2", &ct_op), CORE_OK);
	ck_assert_uint_eq(reasons_of(st, "d2"), 0);
	ct_close(st);
}
END_TEST

void conformance_add_attention(Suite *s)
{
	TCase *tc = tcase_create("attention");

	tcase_add_test(tc, attention_empty_and_quiet_cards);
	tcase_add_test(tc, attention_gave_up);
	tcase_add_test(tc, attention_run_failed);
	tcase_add_test(tc, attention_run_paused);
	tcase_add_test(tc, attention_awaiting_input);
	tcase_add_test(tc, attention_leases_and_recovery);
	tcase_add_test(tc, attention_scope_order_limit);
	suite_add_tcase(s, tc);
}
