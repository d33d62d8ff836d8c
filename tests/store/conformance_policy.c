/* Conformance: the dispatch policy (DESIGN §17) on every twin — column limits and a board's
 * max_claims (claim.from, the count, recovery claims, moves), schedules (not_before, the
 * claim-next wake time), retries with backoff (attempts, exhaustion, resets, the reaper's
 * returns), and a race of workers on a column with a limit. */
#include "tests/store/conformance.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct store_actor worker = {.name = "w-token"};
static const struct store_actor reaper = {.name = "reaper:h"};

/* The default board as board `name`, with `limit` on ready (0: none), max_claims, and a
 * retry policy when max_attempts > 0. */
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
		b.retry = (struct core_retry){.max_attempts = max_attempts,
					      .backoff_ms = 1000,
					      .max_backoff_ms = 4000};
	}
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	core_board_release(&b);
}

static void mk(struct store *st, const char *board, const char *id, const char *state,
	       int32_t pri, int64_t not_before)
{
	struct store_card_create in = {.id = id, .board = board, .title = id, .state = state,
				       .priority = pri, .not_before = not_before};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	ck_assert_int_eq(c->not_before, not_before);
	ck_assert_int_eq(c->attempts, 0);
	core_card_free(c);
}

/* A claim of id for marker by the worker: the rc; *epoch and the result's detail. */
static enum core_rc claim(struct store *st, const char *id, const char *marker, int64_t *epoch,
			  char *detail, size_t detail_len)
{
	struct store_claim_result r;
	enum core_rc rc = store_card_claim(st, id, marker, 60000, &worker, &r);

	if (rc == CORE_OK) {
		if (epoch)
			*epoch = r.token.epoch;
		core_card_free(r.card);
	} else {
		ck_assert_ptr_null(r.card);
	}
	if (detail)
		snprintf(detail, detail_len, "%s", rc == CORE_OK ? "" : r.detail);
	return rc;
}

/* claim-next on board: the id taken ("" when none; static buffer) and *wake_at. */
static const char *next(struct store *st, const char *board, const char *marker,
			int64_t *wake_at)
{
	static char id[CORE_ID_MAX + 1];
	struct store_claim_next in = {.board = board, .marker = marker, .lease_ms = 60000,
				      .holder = worker.name};
	struct store_claim_result r;

	ck_assert_int_eq(store_card_claim_next(st, &in, &worker, &r), CORE_OK);
	id[0] = '\0';
	if (wake_at)
		*wake_at = r.wake_at;
	if (r.card) {
		ck_assert(r.fresh);
		snprintf(id, sizeof id, "%s", r.card->id);
		core_card_free(r.card);
	}
	return id;
}

static void claimed_counts(struct store *st, const char *board, const char *col,
			   int64_t want_col, int64_t want_total)
{
	struct core_board b = {0};
	int64_t per[64], total = -1;
	size_t i;

	ck_assert_int_eq(store_board_get(st, board, &b), CORE_OK);
	ck_assert_int_eq(store_board_claimed(st, &b, per, &total), CORE_OK);
	ck_assert_int_eq(total, want_total);
	for (i = 0; i < b.n_cols; i++)
		if (strcmp(b.cols[i].name, col) == 0)
			ck_assert_msg(per[i] == want_col, "%s: %lld claimed, want %lld", col,
				      (long long)per[i], (long long)want_col);
	core_board_release(&b);
}

static void release(struct store *st, const char *id, const char *marker, int64_t epoch)
{
	struct core_token t = {marker, epoch, NULL};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_release(st, id, &t, &worker, &c), CORE_OK);
	core_card_free(c);
}

/* The board's policy goes in and comes back out. */
START_TEST(policy_board_roundtrip)
{
	struct store *st = ct_open();
	struct core_board b = {0};
	const struct core_column *col;

	put_board(st, "pol", 3, 5, 7);
	ck_assert_int_eq(store_board_get(st, "pol", &b), CORE_OK);
	col = core_board_column(&b, "ready");
	ck_assert_int_eq(col->limit, 3);
	ck_assert_int_eq(core_board_column(&b, "in_progress")->limit, 0);
	ck_assert_int_eq(b.max_claims, 5);
	ck_assert(b.has_retry);
	ck_assert_int_eq(b.retry.max_attempts, 7);
	ck_assert_int_eq(b.retry.backoff_ms, 1000);
	ck_assert_int_eq(b.retry.max_backoff_ms, 4000);
	core_board_release(&b);
	/* A put replaces: a policy left out goes (the Mongo twin kept both), and a claim past
	 * the old max_claims is taken. */
	put_board(st, "pol", 0, 0, 0);
	ck_assert_int_eq(store_board_get(st, "pol", &b), CORE_OK);
	ck_assert_int_eq(core_board_column(&b, "ready")->limit, 0);
	ck_assert_int_eq(b.max_claims, 0);
	ck_assert(!b.has_retry);
	core_board_release(&b);
	put_board(st, "pol", 0, 1, 0);
	mk(st, "pol", "r1", "ready", 0, 0);
	mk(st, "pol", "r2", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "r1", "m1", NULL, NULL, 0), CORE_OK);
	ck_assert_int_eq(claim(st, "r2", "m2", NULL, NULL, 0), CORE_ERR_CAPACITY_REACHED);
	put_board(st, "pol", 0, 0, 0);
	ck_assert_int_eq(claim(st, "r2", "m2", NULL, NULL, 0), CORE_OK);
	ct_close(st);
}
END_TEST

/* A column's limit bounds the claims taken from it: claim.from records the column, the
 * count follows claims and releases, moves of claimed cards still count against the column
 * they were taken from, and a holder's re-claim never counts twice. */
START_TEST(policy_column_limit)
{
	struct store *st = ct_open();
	struct store_owned_write w;
	struct core_card *c = NULL;
	char detail[192];
	int64_t e1, e2, e3;

	put_board(st, "pol", 2, 0, 0);
	mk(st, "pol", "c1", "ready", 0, 0);
	mk(st, "pol", "c2", "ready", 0, 0);
	mk(st, "pol", "c3", "ready", 0, 0);
	mk(st, "pol", "c4", "ready", 0, 0);
	mk(st, "pol", "p1", "in_progress", 0, 0);
	ck_assert_int_eq(claim(st, "c1", "m1", &e1, NULL, 0), CORE_OK);
	c = ct_get(st, "c1");
	ck_assert_str_eq(c->claim.from, "ready");
	core_card_free(c);
	ck_assert_int_eq(claim(st, "c2", "m2", &e2, NULL, 0), CORE_OK);
	claimed_counts(st, "pol", "ready", 2, 2);
	ck_assert_int_eq(claim(st, "c3", "m3", NULL, detail, sizeof detail),
			 CORE_ERR_CAPACITY_REACHED);
	ck_assert_msg(strstr(detail, "ready") && strstr(detail, "2"), "detail: %s", detail);
	c = ct_get(st, "c3");
	ck_assert(!c->claim.present); /* nothing changed */
	core_card_free(c);
	/* The holder's own re-claim refreshes its lease, whatever the count. */
	ck_assert_int_eq(claim(st, "c1", "m1", NULL, NULL, 0), CORE_OK);
	/* A column without a limit still serves. */
	ck_assert_int_eq(claim(st, "p1", "m5", NULL, NULL, 0), CORE_OK);
	claimed_counts(st, "pol", "in_progress", 1, 3);
	/* c2 moves on while held: it still counts against ready. */
	w = (struct store_owned_write){.kind = STORE_OWNED_STATE, .token = {"m2", e2, NULL},
				       .state = "review"};
	ck_assert_int_eq(store_card_owned_write(st, "c2", &w, &worker, &c), CORE_OK);
	ck_assert_str_eq(c->claim.from, "ready");
	core_card_free(c);
	claimed_counts(st, "pol", "ready", 2, 3);
	ck_assert_int_eq(claim(st, "c3", "m3", NULL, NULL, 0), CORE_ERR_CAPACITY_REACHED);
	/* A release frees its slot. */
	release(st, "c1", "m1", e1);
	claimed_counts(st, "pol", "ready", 1, 2);
	ck_assert_int_eq(claim(st, "c3", "m3", &e3, NULL, 0), CORE_OK);
	ck_assert_int_eq(claim(st, "c4", "m4", NULL, NULL, 0), CORE_ERR_CAPACITY_REACHED);
	/* So does the filing-and-release of c2 from review. */
	w = (struct store_owned_write){.kind = STORE_OWNED_STATE, .token = {"m2", e2, NULL},
				       .state = "done", .release = true};
	ck_assert_int_eq(store_card_owned_write(st, "c2", &w, &worker, &c), CORE_OK);
	core_card_free(c);
	claimed_counts(st, "pol", "ready", 1, 2);
	ck_assert_int_eq(claim(st, "c4", "m4", NULL, NULL, 0), CORE_OK);
	ct_close(st);
}
END_TEST

/* max_claims bounds the board whatever the columns. */
START_TEST(policy_board_max_claims)
{
	struct store *st = ct_open();
	char detail[192];
	int64_t e;

	put_board(st, "pol", 0, 2, 0);
	mk(st, "pol", "a", "ready", 0, 0);
	mk(st, "pol", "b", "in_progress", 0, 0);
	mk(st, "pol", "c", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "a", "m1", &e, NULL, 0), CORE_OK);
	/* Same priority, same instant: the id decides. */
	ck_assert_str_eq(next(st, "pol", "m2", NULL), "b");
	ck_assert_int_eq(claim(st, "c", "m3", NULL, detail, sizeof detail),
			 CORE_ERR_CAPACITY_REACHED);
	ck_assert_msg(strstr(detail, "max_claims") && strstr(detail, "2"), "detail: %s", detail);
	ck_assert_str_eq(next(st, "pol", "m3", NULL), ""); /* full: nothing */
	release(st, "a", "m1", e);
	ck_assert_str_eq(next(st, "pol", "m3", NULL), "a"); /* a and c tie: the id decides */
	ct_close(st);
}
END_TEST

/* claim-next skips a full column and takes the best card of the next one. */
START_TEST(policy_next_skips_full_column)
{
	struct store *st = ct_open();
	int64_t wake = -1;

	put_board(st, "pol", 1, 0, 0);
	mk(st, "pol", "r1", "ready", 10, 0);
	ct_now += 1;
	mk(st, "pol", "r2", "ready", 10, 0);
	ct_now += 1;
	mk(st, "pol", "p1", "in_progress", 0, 0);
	ck_assert_str_eq(next(st, "pol", "m1", NULL), "r1");
	ck_assert_str_eq(next(st, "pol", "m2", NULL), "p1"); /* r2 ranks higher; ready is full */
	ck_assert_str_eq(next(st, "pol", "m3", &wake), "");
	ck_assert_int_eq(wake, 0); /* nothing scheduled: no wake time */
	claimed_counts(st, "pol", "ready", 1, 2);
	ct_close(st);
}
END_TEST

/* A scheduled card: not claimable before its time (not_yet, with the time), skipped by
 * claim-next, whose empty answer says when to try again; PATCH moves or clears it. */
START_TEST(policy_not_before)
{
	struct store *st = ct_open();
	struct store_card_patch p = {.has_not_before = true};
	struct core_card *c = NULL;
	char detail[192], t[CORE_TIME_BUF];
	int64_t wake = -1, at = ct_now + 5000;

	mk(st, "default", "s1", "ready", 5, at);
	mk(st, "default", "s2", "ready", 0, ct_now + 9000);
	ck_assert_int_eq(claim(st, "s1", "m1", NULL, detail, sizeof detail), CORE_ERR_NOT_YET);
	ck_assert_msg(strstr(detail, core_time_format(at, t)), "detail: %s", detail);
	c = ct_get(st, "s1");
	ck_assert(!c->claim.present);
	core_card_free(c);
	ck_assert_str_eq(next(st, "default", "m1", &wake), "");
	ck_assert_int_eq(wake, at); /* the earliest of the two */
	ct_now = at - 1;
	ck_assert_str_eq(next(st, "default", "m1", NULL), "");
	ct_now = at;
	ck_assert_str_eq(next(st, "default", "m1", &wake), "s1");
	ck_assert_str_eq(next(st, "default", "m2", &wake), "");
	ck_assert_int_eq(wake, at - 5000 + 9000);
	/* PATCH: clears s2's schedule; it is claimable at once. */
	p.not_before = 0;
	ck_assert_int_eq(store_card_patch(st, "s2", &p, &ct_bot, &c), CORE_OK);
	ck_assert_int_eq(c->not_before, 0);
	core_card_free(c);
	ck_assert_str_eq(next(st, "default", "m2", NULL), "s2");
	/* And puts one on a fresh card. */
	mk(st, "default", "s3", "ready", 0, 0);
	p.not_before = ct_now + 1000;
	ck_assert_int_eq(store_card_patch(st, "s3", &p, &ct_bot, &c), CORE_OK);
	ck_assert_int_eq(c->not_before, ct_now + 1000);
	core_card_free(c);
	ck_assert_int_eq(claim(st, "s3", "m3", NULL, NULL, 0), CORE_ERR_NOT_YET);
	ct_now += 1000;
	ck_assert_int_eq(claim(st, "s3", "m3", NULL, NULL, 0), CORE_OK);
	/* A time before 1970 (the API passes one on) is no schedule, created or patched. */
	{
		struct store_card_create in = {.id = "s4", .board = "default", .title = "s4",
					       .state = "ready", .not_before = -5};

		ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
		ck_assert_int_eq(c->not_before, 0);
		core_card_free(c);
		p.not_before = -7;
		ck_assert_int_eq(store_card_patch(st, "s1", &p, &ct_bot, &c), CORE_OK);
		ck_assert_int_eq(c->not_before, 0);
		core_card_free(c);
		c = ct_get(st, "s4");
		ck_assert_int_eq(c->not_before, 0);
		core_card_free(c);
	}
	ct_close(st);
}
END_TEST

/* A scheduled card in a full column gives no wake time (it could not be taken then either). */
START_TEST(policy_wake_ignores_full_columns)
{
	struct store *st = ct_open();
	int64_t wake = -1;

	put_board(st, "pol", 1, 0, 0);
	mk(st, "pol", "r1", "ready", 0, 0);
	mk(st, "pol", "r2", "ready", 0, ct_now + 3000);
	ck_assert_str_eq(next(st, "pol", "m1", NULL), "r1");
	ck_assert_str_eq(next(st, "pol", "m2", &wake), "");
	ck_assert_int_eq(wake, 0);
	ct_close(st);
}
END_TEST

/* The reaper's recovery claim takes the place of the one it replaces: same column, same
 * count; its release frees the slot. */
START_TEST(policy_recovery_claim_keeps_the_slot)
{
	struct store *st = ct_open();
	struct core_token prev;
	struct core_card *c = NULL;
	int64_t e;

	put_board(st, "pol", 1, 0, 0);
	mk(st, "pol", "c1", "ready", 0, 0);
	mk(st, "pol", "c2", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "c1", "m1", &e, NULL, 0), CORE_OK);
	ct_now += 61000; /* expired: still live until the reaper acts */
	ck_assert_int_eq(claim(st, "c2", "m2", NULL, NULL, 0), CORE_ERR_CAPACITY_REACHED);
	prev = (struct core_token){"m1", e, NULL};
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &prev, "reaper:h", 60000, &c), CORE_OK);
	ck_assert_str_eq(c->claim.from, "ready");
	core_card_free(c);
	claimed_counts(st, "pol", "ready", 1, 1);
	ck_assert_int_eq(claim(st, "c2", "m2", NULL, NULL, 0), CORE_ERR_CAPACITY_REACHED);
	c = ct_get(st, "c1");
	ck_assert_int_eq(store_reaper_release_exact(st, "c1", c, &reaper), CORE_OK);
	core_card_free(c);
	claimed_counts(st, "pol", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "c2", "m2", NULL, NULL, 0), CORE_OK);
	ct_close(st);
}
END_TEST

static struct core_card *retry_release(struct store *st, const char *id, const char *marker,
				       int64_t epoch)
{
	struct core_token t = {marker, epoch, NULL};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_release_retry(st, id, &t, &worker, &c), CORE_OK);
	ck_assert_ptr_nonnull(c);
	ck_assert(!c->claim.present);
	return c;
}

/* A retry release counts an attempt and schedules the card after the backoff (+-10 %),
 * doubling up to max_backoff_ms; at max_attempts the card is filed into the failed column
 * with gave_up attempts_exhausted instead. */
START_TEST(policy_retry_backoff_and_exhaustion)
{
	struct store *st = ct_open();
	struct core_card *c;
	int64_t e, stale;

	put_board(st, "pol", 0, 0, 3);
	mk(st, "pol", "j", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "j", "m1", &e, NULL, 0), CORE_OK);
	c = retry_release(st, "j", "m1", e);
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_str_eq(c->state, "ready");
	ck_assert_int_ge(c->not_before, ct_now + 900);
	ck_assert_int_le(c->not_before, ct_now + 1100);
	core_card_free(c);
	/* The old token cannot retry twice. */
	{
		struct core_token t = {"m1", e, NULL};

		ck_assert_int_eq(store_card_release_retry(st, "j", &t, &worker, &c),
				 CORE_ERR_CLAIM_CONFLICT);
	}
	ck_assert_int_eq(claim(st, "j", "m2", NULL, NULL, 0), CORE_ERR_NOT_YET);
	ct_now += 1200;
	ck_assert_int_eq(claim(st, "j", "m2", &e, NULL, 0), CORE_OK);
	c = retry_release(st, "j", "m2", e);
	ck_assert_int_eq(c->attempts, 2);
	ck_assert_int_ge(c->not_before, ct_now + 1800);
	ck_assert_int_le(c->not_before, ct_now + 2200);
	core_card_free(c);
	ct_now += 2300;
	stale = e;
	ck_assert_int_eq(claim(st, "j", "m3", &e, NULL, 0), CORE_OK);
	ck_assert_int_gt(e, stale);
	c = retry_release(st, "j", "m3", e);
	ck_assert_int_eq(c->attempts, 3);
	ck_assert_str_eq(c->state, "blocked"); /* the failed column */
	ck_assert(c->gave_up.set);
	ck_assert_str_eq(c->gave_up.reason, CORE_GAVE_UP_ATTEMPTS_EXHAUSTED);
	core_card_free(c);
	c = ct_get(st, "j");
	ck_assert_str_eq(c->state, "blocked");
	ck_assert(!c->claim.present);
	core_card_free(c);
	/* An operator's reopen starts it afresh. */
	ck_assert_int_eq(store_card_reopen(st, "j", "ready", NULL, &ct_op, &c), CORE_OK);
	ck_assert_int_eq(c->attempts, 0);
	ck_assert_int_eq(c->not_before, 0);
	core_card_free(c);
	ck_assert_int_eq(claim(st, "j", "m4", NULL, NULL, 0), CORE_OK);
	ct_close(st);
}
END_TEST

/* The backoff stops growing at max_backoff_ms. */
START_TEST(policy_retry_backoff_capped)
{
	struct store *st = ct_open();
	struct core_card *c;
	int64_t e;
	int i;

	put_board(st, "pol", 0, 0, 10);
	mk(st, "pol", "j", "ready", 0, 0);
	for (i = 1; i <= 5; i++) {
		ck_assert_int_eq(claim(st, "j", "m", &e, NULL, 0), CORE_OK);
		c = retry_release(st, "j", "m", e);
		ck_assert_int_eq(c->attempts, i);
		ck_assert_int_le(c->not_before - ct_now, 4400); /* 4000 + 10 % */
		if (i >= 3)
			ck_assert_int_ge(c->not_before - ct_now, 3600);
		ct_now = c->not_before;
		core_card_free(c);
	}
	ct_close(st);
}
END_TEST

/* A completion resets the attempts; a finish into the completed column with retry counts
 * none. */
START_TEST(policy_completion_resets_attempts)
{
	struct store *st = ct_open();
	struct store_owned_write w;
	struct core_card *c;
	int64_t e;

	put_board(st, "pol", 0, 0, 5);
	mk(st, "pol", "j", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "j", "m", &e, NULL, 0), CORE_OK);
	core_card_free(retry_release(st, "j", "m", e));
	ct_now += 1200;
	ck_assert_int_eq(claim(st, "j", "m", &e, NULL, 0), CORE_OK);
	w = (struct store_owned_write){.kind = STORE_OWNED_STATE, .token = {"m", e, NULL},
				       .state = "done", .release = true, .retry = true};
	ck_assert_int_eq(store_card_owned_write(st, "j", &w, &worker, &c), CORE_OK);
	ck_assert_str_eq(c->state, "done");
	ck_assert_int_eq(c->attempts, 0);
	ck_assert(!c->claim.present);
	core_card_free(c);
	ct_close(st);
}
END_TEST

/* A retry with a state write: the write lands, then the attempt is counted where it put the
 * card. */
START_TEST(policy_retry_with_state_write)
{
	struct store *st = ct_open();
	struct store_owned_write w;
	struct core_card *c;
	int64_t e;

	put_board(st, "pol", 0, 0, 5);
	mk(st, "pol", "j", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "j", "m", &e, NULL, 0), CORE_OK);
	w = (struct store_owned_write){.kind = STORE_OWNED_STATE, .token = {"m", e, NULL},
				       .state = "in_progress", .release = true, .retry = true};
	ck_assert_int_eq(store_card_owned_write(st, "j", &w, &worker, &c), CORE_OK);
	ck_assert_str_eq(c->state, "in_progress");
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_int_gt(c->not_before, ct_now);
	core_card_free(c);
	ct_close(st);
}
END_TEST

/* A board without a policy uses the store's default max_attempts (--run-ceiling). */
START_TEST(policy_retry_default_max_attempts)
{
	struct store *st = ct_open();
	struct core_card *c;
	struct core_retry r;
	int64_t e;

	store_retry_default_set(st, 2);
	store_retry_of(st, NULL, &r);
	ck_assert_int_eq(r.max_attempts, 2);
	ck_assert_int_eq(r.backoff_ms, CORE_RETRY_BACKOFF_MS);
	mk(st, "default", "j", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "j", "m", &e, NULL, 0), CORE_OK);
	c = retry_release(st, "j", "m", e);
	ck_assert_int_eq(c->attempts, 1);
	ct_now = c->not_before;
	core_card_free(c);
	ck_assert_int_eq(claim(st, "j", "m", &e, NULL, 0), CORE_OK);
	c = retry_release(st, "j", "m", e);
	ck_assert_str_eq(c->state, "blocked");
	ck_assert_str_eq(c->gave_up.reason, CORE_GAVE_UP_ATTEMPTS_EXHAUSTED);
	core_card_free(c);
	store_retry_default_set(st, 0);
	ct_close(st);
}
END_TEST

/* The reaper's return of a card to the pool counts an attempt (both forms: the exact
 * release, and the filing back into a launch column with the release). */
START_TEST(policy_reaper_return_counts)
{
	struct store *st = ct_open();
	struct store_reaper_act a[2];
	struct core_token prev, rec[2] = {{0}};
	struct core_card *c = NULL, *seen;
	int64_t e1, e2;

	put_board(st, "pol", 0, 0, 5);
	mk(st, "pol", "c1", "ready", 0, 0);
	mk(st, "pol", "c2", "ready", 0, 0);
	ck_assert_int_eq(claim(st, "c1", "m1", &e1, NULL, 0), CORE_OK);
	ck_assert_int_eq(claim(st, "c2", "m2", &e2, NULL, 0), CORE_OK);
	ct_now += 61000;
	prev = (struct core_token){"m1", e1, NULL};
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &prev, "reaper:h", 60000, &c), CORE_OK);
	core_card_free(c);
	prev = (struct core_token){"m2", e2, NULL};
	ck_assert_int_eq(store_reaper_transfer(st, "c2", &prev, "reaper:h", 60000, &c), CORE_OK);
	rec[1] = (struct core_token){"reaper:h", c->claim_epoch, NULL};
	core_card_free(c);
	seen = ct_get(st, "c1");
	memset(a, 0, sizeof a);
	a[0] = (struct store_reaper_act){.id = "c1", .release_expect = seen, .retry = true};
	a[1].id = "c2";
	a[1].n_w = 1;
	a[1].retry = true;
	a[1].w[0] = (struct store_owned_write){.kind = STORE_OWNED_STATE, .token = rec[1],
					       .state = "ready", .release = true,
					       .event_reason = "watchdog"};
	ck_assert_int_eq(store_reaper_act(st, a, 2, &reaper), CORE_OK);
	ck_assert_int_eq(a[0].rc, CORE_OK);
	ck_assert_int_eq(a[1].rc, CORE_OK);
	core_card_free(seen);
	c = ct_get(st, "c1");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_int_gt(c->not_before, ct_now);
	core_card_free(c);
	c = ct_get(st, "c2");
	ck_assert(!c->claim.present);
	ck_assert_str_eq(c->state, "ready");
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_int_gt(c->not_before, ct_now);
	core_card_free(c);
	ct_close(st);
}
END_TEST

/* Many workers at once on a column with limit 3: at no moment more than 3 claims from it.
 * Each worker counts a claim after the store granted it and uncounts it before asking the
 * store to release it, so the shared count never exceeds the live claims: a count above the
 * limit is a bound the store broke. Runs where the twin is atomic. */
#define POL_THREADS 16
#define POL_LIMIT 3
#define POL_ROUNDS 40

struct pol_racer {
	struct store *st;
	pthread_barrier_t *go;
	atomic_int *held;
	atomic_int *max_held;
	char marker[16];
	int claims;
	enum core_rc err;
};

static void *pol_race(void *arg)
{
	struct pol_racer *w = arg;
	int round;

	pthread_barrier_wait(w->go);
	for (round = 0; round < POL_ROUNDS && w->err == CORE_OK; round++) {
		struct store_claim_next in = {.board = "pol", .marker = w->marker,
					      .lease_ms = 60000, .holder = worker.name};
		struct store_claim_result r;
		struct core_card *c = NULL;
		enum core_rc rc = store_card_claim_next(w->st, &in, &worker, &r);
		int now_held, m;

		if (rc != CORE_OK) {
			w->err = rc;
			break;
		}
		if (!r.card)
			continue;
		now_held = atomic_fetch_add(w->held, 1) + 1;
		m = atomic_load(w->max_held);
		while (now_held > m && !atomic_compare_exchange_weak(w->max_held, &m, now_held))
			;
		w->claims++;
		/* Hold it for a while: a read of the card, as a worker would. */
		if (store_card_get(w->st, r.card->id, &c) == CORE_OK)
			core_card_free(c);
		c = NULL;
		atomic_fetch_sub(w->held, 1);
		{
			struct core_token t = {w->marker, r.token.epoch, NULL};

			rc = store_card_release(w->st, r.card->id, &t, &worker, &c);
		}
		core_card_free(r.card);
		core_card_free(c);
		if (rc != CORE_OK)
			w->err = rc;
	}
	return NULL;
}

START_TEST(policy_race_column_limit)
{
	struct store *st;
	static struct pol_racer w[POL_THREADS];
	pthread_t th[POL_THREADS];
	pthread_barrier_t go;
	atomic_int held = 0, max_held = 0;
	const char *why = "";
	char id[16];
	int i, total = 0;

	if (ct_atomic && !ct_atomic(&why)) {
		fprintf(stderr, "policy_race_column_limit: SKIPPED: %s\n", why);
		return;
	}
	st = ct_open();
	put_board(st, "pol", POL_LIMIT, 0, 0);
	for (i = 0; i < 12; i++) {
		snprintf(id, sizeof id, "q%02d", i);
		mk(st, "pol", id, "ready", 0, 0);
	}
	pthread_barrier_init(&go, NULL, POL_THREADS);
	for (i = 0; i < POL_THREADS; i++) {
		w[i] = (struct pol_racer){.st = st, .go = &go, .held = &held, .max_held = &max_held};
		snprintf(w[i].marker, sizeof w[i].marker, "w%d", i);
		ck_assert_int_eq(pthread_create(&th[i], NULL, pol_race, &w[i]), 0);
	}
	for (i = 0; i < POL_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (i = 0; i < POL_THREADS; i++) {
		ck_assert_msg(w[i].err == CORE_OK, "worker %d: %s", i, core_rc_code(w[i].err));
		total += w[i].claims;
	}
	ck_assert_int_le(atomic_load(&max_held), POL_LIMIT);
	ck_assert_int_gt(total, POL_THREADS); /* the race did happen */
	claimed_counts(st, "pol", "ready", 0, 0);
	ct_close(st);
}
END_TEST

void conformance_add_policy(Suite *s)
{
	TCase *tc = tcase_create("policy");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, policy_board_roundtrip);
	tcase_add_test(tc, policy_column_limit);
	tcase_add_test(tc, policy_board_max_claims);
	tcase_add_test(tc, policy_next_skips_full_column);
	tcase_add_test(tc, policy_not_before);
	tcase_add_test(tc, policy_wake_ignores_full_columns);
	tcase_add_test(tc, policy_recovery_claim_keeps_the_slot);
	tcase_add_test(tc, policy_retry_backoff_and_exhaustion);
	tcase_add_test(tc, policy_retry_backoff_capped);
	tcase_add_test(tc, policy_completion_resets_attempts);
	tcase_add_test(tc, policy_retry_with_state_write);
	tcase_add_test(tc, policy_retry_default_max_attempts);
	tcase_add_test(tc, policy_reaper_return_counts);
	tcase_add_test(tc, policy_race_column_limit);
	suite_add_tcase(s, tc);
}
