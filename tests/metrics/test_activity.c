/* metrics/activity.h: the per-minute ring of the charts (DESIGN §21) — minutes roll over and
 * wrap after an hour, the gauge is per board and starts afresh when the columns change, and
 * metrics_add feeds exactly the series the header names (a reaper "keep" is not an action). */
#include "metrics/activity.h"
#include "metrics/metrics.h"

#include <check.h>
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
	activity_add(a, ACTIVITY_CLAIMS, 2, T0 + 5);
	activity_add(a, ACTIVITY_CLAIMS, 1, T0 + MIN - 1);
	activity_add(a, ACTIVITY_CLAIMS, 4, T0 + MIN);
	activity_add(a, ACTIVITY_FAILURES, 1, T0 + 3 * MIN + 7);
	activity_read(a, NULL, T0 + 3 * MIN + 9, v);
	ck_assert_int_eq(v->minute[ACTIVITY_MINUTES - 1], T0 + 3 * MIN);
	ck_assert_int_eq(v->minute[0], T0 + 3 * MIN - (ACTIVITY_MINUTES - 1) * MIN);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 4][ACTIVITY_CLAIMS], 3); /* T0's minute */
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 3][ACTIVITY_CLAIMS], 4);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 2][ACTIVITY_CLAIMS], 0);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 1][ACTIVITY_FAILURES], 1);
	ck_assert(!v->sampled[ACTIVITY_MINUTES - 1]);
	/* An hour on, T0's minute has left the window; a new count in its slot starts at 0. */
	activity_read(a, NULL, T0 + ACTIVITY_MINUTES * MIN, v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 4);
	activity_add(a, ACTIVITY_CLAIMS, 1, T0 + ACTIVITY_MINUTES * MIN);
	activity_read(a, NULL, T0 + ACTIVITY_MINUTES * MIN, v);
	ck_assert_uint_eq(v->count[ACTIVITY_MINUTES - 1][ACTIVITY_CLAIMS], 1);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 5);
	/* Two hours of silence: nothing left. */
	activity_read(a, NULL, T0 + 3 * ACTIVITY_MINUTES * MIN, v);
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
	activity_sample(a, "b1", cols, c1, 3, T0 + 10);
	ck_assert(activity_sampled(a, "b1", T0 + 10 + ACTIVITY_FRESH_MS - 1));
	ck_assert(!activity_sampled(a, "b1", T0 + 10 + ACTIVITY_FRESH_MS)); /* stale: count again */
	ck_assert(!activity_sampled(a, "b1", T0 + MIN));                    /* another minute */
	ck_assert(!activity_sampled(a, "b2", T0 + 10));
	/* A later sample of the same minute is the minute's value. */
	activity_sample(a, "b1", cols, c2, 3, T0 + 30000);
	activity_read(a, "b1", T0 + 30000, v);
	ck_assert_uint_eq(v->gauge[ACTIVITY_MINUTES - 1][0], 4);
	activity_sample(a, "b1", cols, c2, 3, T0 + 2 * MIN);
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
	activity_sample(a, "b1", renamed, c1, 3, T0 + 3 * MIN);
	activity_read(a, "b1", T0 + 3 * MIN, v);
	ck_assert_str_eq(v->cols[1], "wip");
	ck_assert(!v->sampled[ACTIVITY_MINUTES - 2] && v->sampled[ACTIVITY_MINUTES - 1]);
	free(v);
	activity_free(a);
}
END_TEST

START_TEST(test_fed_by_metrics_add)
{
	struct metrics *m = metrics_new();
	struct activity_view *v = malloc(sizeof(*v));

	metrics_inc(m, METRICS_CLAIMS, "fresh");
	metrics_inc(m, METRICS_CLAIMS, "idempotent"); /* not a new claim */
	metrics_inc(m, METRICS_CLAIMS, "conflict");
	metrics_add(m, METRICS_CLAIMS, "recovery", NULL, 2);
	metrics_inc(m, METRICS_RUNS_FINISHED, "finished");
	metrics_inc(m, METRICS_RUNS_FINISHED, "failed");
	metrics_inc(m, METRICS_RUNS_FINISHED, "cancelled");
	metrics_add(m, METRICS_REAPER_ACTIONS, "keep", NULL, 7);
	metrics_add(m, METRICS_REAPER_ACTIONS, "release", NULL, 2);
	metrics_add(m, METRICS_REAPER_ACTIONS, "repair_release", NULL, 1);
	activity_read(metrics_activity(m), NULL, activity_now_ms(), v);
	ck_assert_uint_eq(total(v, ACTIVITY_CLAIMS), 3);
	ck_assert_uint_eq(total(v, ACTIVITY_COMPLETIONS), 1);
	ck_assert_uint_eq(total(v, ACTIVITY_FAILURES), 1);
	ck_assert_uint_eq(total(v, ACTIVITY_REAPER), 3);
	ck_assert_str_eq(activity_series_name(ACTIVITY_REAPER), "reaper_actions");
	ck_assert_ptr_null(metrics_activity(NULL));
	free(v);
	metrics_free(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("activity");
	TCase *tc = tcase_create("activity");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_minutes_roll_and_wrap);
	tcase_add_test(tc, test_gauge_per_board);
	tcase_add_test(tc, test_fed_by_metrics_add);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
