/* metrics/activity.h: the per-board, per-minute rings of the charts (DESIGN §21) — minutes
 * roll over and wrap after an hour, two boards' counts and gauges stay apart, the gauge starts
 * afresh when the columns change (the counts do not), past ACTIVITY_BOARDS_MAX boards the
 * least recently used board's place is taken (never by the sampler), and metrics_add_board
 * feeds exactly the series the header names (a reaper "keep" is not an action). */
#include "metrics/activity.h"
#include "metrics/metrics.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN 60000LL
#define T0 (29450000LL * MIN) /* a minute boundary */

static uint64_t total(const struct activity_view *v, enum activity_series s)
{
	uint64_t n = 0;
	size_t k;

	for (k = 0; k < ACTIVITY_MINUTES; k++)
		n += v->count[k][s];
	return n;
}

START_TEST(test_minutes_roll_and_wrap)
{
	struct activity *a = activity_new();
	struct activity_view *v = malloc(sizeof(*v));

	ck_assert_ptr_nonnull(a);
	activity_add(a, "b1", ACTIVITY_CLAIMS, 2, T0 + 5);
	activity_add(a, "b1", ACTIVITY_CLAIMS, 1, T0 + MIN - 1);
	activity_add(a, "b1", ACTIVITY_CLAIMS, 4, T0 + MIN);
	activity_add(a, "b1", ACTIVITY_FAILURES, 1, T0 + 3 * MIN + 7);
	activity_read(a, "b1", T0 + 3 * MIN + 9, v);
	ck_assert_int_eq(v->minute[ACTIVITY_MINUTES - 1], T0 + 3 * MIN);
	ck_assert_int_eq(v->minute[0], T0 + 3 * MIN - (ACTIVITY_MINUTES - 1) * MIN);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 4][ACTIVITY_CLAIMS], 3); /* T0's minute */
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 3][ACTIVITY_CLAIMS], 4);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 2][ACTIVITY_CLAIMS], 0);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 1][ACTIVITY_FAILURES], 1);
	ck_assert(!v->sampled[ACTIVITY_MINUTES - 1]);
	/* An hour on, T0's minute has left the window; a new count in its slot starts at 0. */
	activity_read(a, "b1", T0 + ACTIVITY_MINUTES * MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 4);
	activity_add(a, "b1", ACTIVITY_CLAIMS, 1, T0 + ACTIVITY_MINUTES * MIN);
	activity_read(a, "b1", T0 + ACTIVITY_MINUTES * MIN, v);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 1][ACTIVITY_CLAIMS], 1);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 5);
	/* Two hours of silence: nothing left. */
	activity_read(a, "b1", T0 + 3 * ACTIVITY_MINUTES * MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS) + total(v, ACTIVITY_FAILURES), 0);
	free(v);
	activity_free(a);
}
END_TEST

START_TEST(test_gauge_per_board)
{
	struct activity *a = activity_new();
	struct activity_view *v = malloc(sizeof(*v));
	const char *cols[] = {"todo", "doing", "done"}, *renamed[] = {"todo", "wip", "done"};
	const uint64_t c1[] = {5, 2, 9}, c2[] = {4, 3, 10};

	ck_assert(!activity_sampled(a, "b1", T0));
	activity_sample(a, "b1", cols, c1, 3, T0 + 10, true);
	ck_assert(activity_sampled(a, "b1", T0 + 10 + ACTIVITY_FRESH_MS - 1));
	ck_assert(!activity_sampled(a, "b1", T0 + 10 + ACTIVITY_FRESH_MS)); /* stale: count again */
	ck_assert(!activity_sampled(a, "b1", T0 + MIN));                    /* another minute */
	ck_assert(!activity_sampled(a, "b2", T0 + 10));
	/* A later sample of the same minute is the minute's value. */
	activity_sample(a, "b1", cols, c2, 3, T0 + 30000, true);
	activity_read(a, "b1", T0 + 30000, v);
	ck_assert_uint_eq(v->gauge[ACTIVITY_MINUTES - 1][0], 4);
	activity_sample(a, "b1", cols, c2, 3, T0 + 2 * MIN, true);
	activity_add(a, "b1", ACTIVITY_CLAIMS, 3, T0 + 2 * MIN + 1);
	activity_read(a, "b1", T0 + 2 * MIN, v);
	ck_assert_uint_eq(v->n_cols, 3);
	ck_assert_str_eq(v->cols[1], "doing");
	ck_assert(v->sampled[ACTIVITY_MINUTES - 3] && !v->sampled[ACTIVITY_MINUTES - 2] &&
		  v->sampled[ACTIVITY_MINUTES - 1]);
	ck_assert_uint_eq(v->gauge[ACTIVITY_MINUTES - 3][2], 10); /* its later sample */
	ck_assert_uint_eq(v->gauge[ACTIVITY_MINUTES - 1][0], 4);
	activity_read(a, "b2", T0 + 2 * MIN, v);
	ck_assert_uint_eq(v->n_cols, 0);
	/* Renamed columns: the old samples named others, the gauge starts afresh. */
	activity_sample(a, "b1", renamed, c1, 3, T0 + 3 * MIN, true);
	activity_read(a, "b1", T0 + 3 * MIN, v);
	ck_assert_str_eq(v->cols[1], "wip");
	ck_assert(!v->sampled[ACTIVITY_MINUTES - 2] && v->sampled[ACTIVITY_MINUTES - 1]);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 2][ACTIVITY_CLAIMS], 3); /* counts stay */
	free(v);
	activity_free(a);
}
END_TEST

/* The fix of issue 30: each board's counts are its own. */
START_TEST(test_counts_per_board)
{
	struct activity *a = activity_new();
	struct activity_view *v = malloc(sizeof(*v));

	activity_add(a, "b1", ACTIVITY_CLAIMS, 2, T0 + 5);
	activity_add(a, "b2", ACTIVITY_CLAIMS, 7, T0 + 6);
	activity_add(a, "b2", ACTIVITY_FAILURES, 1, T0 + 7);
	activity_add(a, "b1", ACTIVITY_REAPER, 4, T0 + MIN);
	activity_read(a, "b1", T0 + MIN, v);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 2][ACTIVITY_CLAIMS], 2);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 2);
	ck_assert_uint_eq(total(v, ACTIVITY_FAILURES), 0);
	ck_assert_uint_eq(total(v, ACTIVITY_REAPER), 4);
	ck_assert_int_gt(v->since, 0);
	activity_read(a, "b2", T0 + MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 7);
	ck_assert_uint_eq(total(v, ACTIVITY_FAILURES), 1);
	ck_assert_uint_eq(total(v, ACTIVITY_REAPER), 0);
	/* A board with no events: zeros, no entry; no board, a NULL ring: the minutes only. */
	activity_read(a, "b3", T0 + MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS) + total(v, ACTIVITY_REAPER), 0);
	ck_assert_int_eq(v->since, 0);
	activity_read(a, NULL, T0 + MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 0);
	activity_read(NULL, "b1", T0 + MIN, v);
	ck_assert_int_eq(v->minute[ACTIVITY_MINUTES - 1], T0 + MIN);
	/* Names the table does not keep are no-ops, not crashes. */
	activity_add(a, NULL, ACTIVITY_CLAIMS, 1, T0 + MIN);
	activity_add(a, "", ACTIVITY_CLAIMS, 1, T0 + MIN);
	activity_add(a, "x1234567890123456789012345678901234567890123456789012345678901234",
		     ACTIVITY_CLAIMS, 1, T0 + MIN);
	activity_add(NULL, "b1", ACTIVITY_CLAIMS, 1, T0 + MIN);
	activity_read(a, "b1", T0 + MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 2);
	free(v);
	activity_free(a);
}
END_TEST

/* Past ACTIVITY_BOARDS_MAX boards: a count for a new board takes the least recently used
 * board's place (its hour is dropped; since says the new one's counts start late); the
 * sampler takes no place from a board. */
START_TEST(test_table_full)
{
	struct activity *a = activity_new();
	struct activity_view *v = malloc(sizeof(*v));
	const char *cols[] = {"todo"};
	const uint64_t c1[] = {3};
	char name[16];
	int64_t born;
	int i;

	for (i = 0; i < ACTIVITY_BOARDS_MAX; i++) {
		snprintf(name, sizeof name, "b%d", i);
		activity_add(a, name, ACTIVITY_CLAIMS, 1, T0 + i);
	}
	activity_read(a, "b0", T0 + MIN, v);
	born = v->since;
	ck_assert_int_gt(born, 0);
	activity_add(a, "b0", ACTIVITY_CLAIMS, 1, T0 + 1000); /* b1 is now the least recent */
	/* The sampler: no place for a board past the table, nothing given up. */
	ck_assert(!activity_has_room(a, "late"));
	ck_assert(activity_has_room(a, "b1"));
	activity_sample(a, "late", cols, c1, 1, T0 + 2000, false);
	ck_assert(!activity_sampled(a, "late", T0 + 2000));
	activity_read(a, "b1", T0 + MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 1);
	/* The sampler keeps a board's gauge fresh without making it recent. */
	activity_sample(a, "b1", cols, c1, 1, T0 + 2500, false);
	ck_assert(activity_sampled(a, "b1", T0 + 2500));
	/* A count takes b1's place. */
	activity_add(a, "late", ACTIVITY_FAILURES, 2, T0 + 3000);
	activity_read(a, "b1", T0 + MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 0);
	ck_assert_int_eq(v->since, 0);
	ck_assert(!activity_sampled(a, "b1", T0 + 3000));
	activity_read(a, "late", T0 + MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_FAILURES), 2);
	ck_assert_int_eq(v->since, T0 + 3000);
	activity_read(a, "b0", T0 + MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 2);
	ck_assert_int_eq(v->since, born); /* it held its place from the start */
	/* A reader's sample takes a place too: b3's, b2 having been looked at. */
	activity_use(a, "b2", T0 + 3500);
	activity_sample(a, "b1", cols, c1, 1, T0 + 4000, true);
	ck_assert(activity_sampled(a, "b1", T0 + 4000));
	activity_read(a, "b3", T0 + MIN, v);
	ck_assert_int_eq(v->since, 0);
	activity_read(a, "b2", T0 + MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 1);
	free(v);
	activity_free(a);
}
END_TEST

START_TEST(test_fed_by_metrics_add)
{
	struct metrics *m = metrics_new();
	struct activity_view *v = malloc(sizeof(*v));

	metrics_inc_board(m, METRICS_CLAIMS, "fresh", "b1");
	metrics_inc_board(m, METRICS_CLAIMS, "idempotent", "b1"); /* not a new claim */
	metrics_inc(m, METRICS_CLAIMS, "conflict");
	metrics_add_board(m, METRICS_CLAIMS, "recovery", "b1", 2);
	metrics_inc_board(m, METRICS_CLAIMS, "fresh", "b2");
	metrics_inc(m, METRICS_CLAIMS, "fresh"); /* no board: /metrics only */
	metrics_inc_board(m, METRICS_RUNS_FINISHED, "finished", "b1");
	metrics_inc_board(m, METRICS_RUNS_FINISHED, "failed", "b1");
	metrics_inc_board(m, METRICS_RUNS_FINISHED, "cancelled", "b1");
	metrics_add_board(m, METRICS_REAPER_ACTIONS, "keep", "b1", 7);
	metrics_add_board(m, METRICS_REAPER_ACTIONS, "release", "b1", 2);
	metrics_add_board(m, METRICS_REAPER_ACTIONS, "repair_release", "b2", 1);
	activity_read(metrics_activity(m), "b1", activity_now_ms(), v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 3);
	ck_assert_uint_eq(total(v, ACTIVITY_COMPLETIONS), 1);
	ck_assert_uint_eq(total(v, ACTIVITY_FAILURES), 1);
	ck_assert_uint_eq(total(v, ACTIVITY_REAPER), 2);
	activity_read(metrics_activity(m), "b2", activity_now_ms(), v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 1);
	ck_assert_uint_eq(total(v, ACTIVITY_COMPLETIONS), 0);
	ck_assert_uint_eq(total(v, ACTIVITY_REAPER), 1);
	/* The Prometheus counters count every call, board or not. */
	ck_assert_uint_eq(metrics_get(m, METRICS_CLAIMS, "fresh", NULL), 3);
	ck_assert_uint_eq(metrics_get(m, METRICS_CLAIMS, "recovery", NULL), 2);
	ck_assert_uint_eq(metrics_get(m, METRICS_REAPER_ACTIONS, "keep", NULL), 7);
	ck_assert_str_eq(activity_series_name(ACTIVITY_REAPER), "reaper_actions");
	ck_assert_ptr_null(metrics_activity(NULL));
	metrics_inc_board(NULL, METRICS_CLAIMS, "fresh", "b1"); /* no registry: nothing */
	free(v);
	metrics_free(m);
}
END_TEST

/* Threads counting on their own boards while another reads and samples: no count lost. */
#define THREADS 4
#define ADDS 20000

static void *adder(void *arg)
{
	struct activity *a = arg;
	int i;

	for (i = 0; i < ADDS; i++)
		activity_add(a, i % 2 ? "odd" : "even", ACTIVITY_CLAIMS, 1, T0 + 5);
	return NULL;
}

START_TEST(test_threads)
{
	struct activity *a = activity_new();
	struct activity_view *v = malloc(sizeof(*v));
	const char *cols[] = {"todo"};
	const uint64_t c1[] = {1};
	pthread_t th[THREADS];
	int i;

	for (i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, adder, a), 0);
	for (i = 0; i < 200; i++) {
		activity_sample(a, "even", cols, c1, 1, T0 + 6, i % 2 == 0);
		activity_read(a, "odd", T0 + 7, v);
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	activity_read(a, "odd", T0 + 7, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), THREADS * ADDS / 2);
	activity_read(a, "even", T0 + 7, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), THREADS * ADDS / 2);
	ck_assert(v->sampled[ACTIVITY_MINUTES - 1]);
	free(v);
	activity_free(a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("activity");
	TCase *tc = tcase_create("activity");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_minutes_roll_and_wrap);
	tcase_add_test(tc, test_counts_per_board);
	tcase_add_test(tc, test_gauge_per_board);
	tcase_add_test(tc, test_table_full);
	tcase_add_test(tc, test_fed_by_metrics_add);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
