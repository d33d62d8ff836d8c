/* The metrics module: the registry, the sink, the text rendering, and the table's agreement
 * with the vocabularies it counts (core's reaper actions and fence reasons). */
#include "core/core.h"
#include "metrics/metrics.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static char *render(const struct metrics *m, const struct metrics_sink *s)
{
	char *text = NULL;
	size_t len = 0;

	ck_assert(metrics_render(m, s, &text, &len));
	ck_assert_uint_eq(strlen(text), len);
	return text;
}

START_TEST(test_registry_counts_by_label)
{
	struct metrics *m = metrics_new();
	char *t;

	ck_assert_ptr_nonnull(m);
	metrics_inc(m, METRICS_CLAIMS, "fresh");
	metrics_inc(m, METRICS_CLAIMS, "fresh");
	metrics_add(m, METRICS_CLAIMS, "conflict", NULL, 5);
	ck_assert_uint_eq(metrics_get(m, METRICS_CLAIMS, "fresh", NULL), 2);
	ck_assert_uint_eq(metrics_get(m, METRICS_CLAIMS, "conflict", NULL), 5);
	ck_assert_uint_eq(metrics_get(m, METRICS_CLAIMS, "idempotent", NULL), 0);
	t = render(m, NULL);
	ck_assert_ptr_nonnull(strstr(t, "# HELP boardd_claims_total "));
	ck_assert_ptr_nonnull(strstr(t, "# TYPE boardd_claims_total counter\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nboardd_claims_total{outcome=\"fresh\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nboardd_claims_total{outcome=\"conflict\"} 5\n"));
	/* every value of the table is served, zeros included */
	ck_assert_ptr_nonnull(strstr(t, "\nboardd_claims_total{outcome=\"blockers_pending\"} 0\n"));
	/* collected families with no sample are not rendered */
	ck_assert_ptr_null(strstr(t, "boardd_cards"));
	free(t);
	metrics_inc(NULL, METRICS_CLAIMS, "fresh"); /* no registry: nothing, no crash */
	metrics_free(m);
}
END_TEST

START_TEST(test_histogram_cumulative)
{
	struct metrics *m = metrics_new();
	char *t;

	metrics_observe(m, METRICS_REAPER_PASS, NULL, NULL, 500);     /* 0.5 ms */
	metrics_observe(m, METRICS_REAPER_PASS, NULL, NULL, 7000);    /* 7 ms */
	metrics_observe(m, METRICS_REAPER_PASS, NULL, NULL, 1000000000); /* past the last */
	t = render(m, NULL);
	ck_assert_ptr_nonnull(strstr(t, "# TYPE boardd_reaper_pass_duration_seconds histogram\n"));
	ck_assert_ptr_nonnull(strstr(t, "boardd_reaper_pass_duration_seconds_bucket{le=\"0.001\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t, "boardd_reaper_pass_duration_seconds_bucket{le=\"0.005\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t, "boardd_reaper_pass_duration_seconds_bucket{le=\"0.01\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(t, "boardd_reaper_pass_duration_seconds_bucket{le=\"300\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(t, "boardd_reaper_pass_duration_seconds_bucket{le=\"+Inf\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(t, "boardd_reaper_pass_duration_seconds_count 3\n"));
	ck_assert_ptr_nonnull(strstr(t, "boardd_reaper_pass_duration_seconds_sum 1000.0075\n"));
	free(t);
	metrics_free(m);
}
END_TEST

START_TEST(test_sink_labels_escaped_and_grouped)
{
	struct metrics_sink *s = metrics_sink_new();
	const char *a[2] = {"b\"oard\\x\ny", "ready"}, *b[2] = {"other", "done"};
	struct metrics_hist h = {0};
	const char *route[3] = {"/v1/cards", "GET", "200"};
	char *t, *first, *second;

	metrics_sink_value(s, METRICS_CARDS, a, 3);
	metrics_sink_value(s, METRICS_CLAIMS_HELD, NULL, 1);
	metrics_sink_value(s, METRICS_CARDS, b, 0);
	{
		/* Read back by family and labels (the activity sampler's cards per column). */
		const char *none[2] = {"other", "ready"};
		double v = -1;

		ck_assert(metrics_sink_get(s, METRICS_CARDS, a, &v));
		ck_assert(v == 3);
		ck_assert(metrics_sink_get(s, METRICS_CARDS, b, &v));
		ck_assert(v == 0);
		ck_assert(!metrics_sink_get(s, METRICS_CARDS, none, &v));
		ck_assert(metrics_sink_get(s, METRICS_CLAIMS_HELD, NULL, &v));
		ck_assert(v == 1);
		ck_assert(!metrics_sink_get(s, METRICS_CLAIMS_EXPIRED, NULL, &v));
	}
	metrics_hist_observe(&h, METRICS_B_HTTP_NS, 2000000); /* 2 ms */
	metrics_sink_hist(s, METRICS_HTTP_DURATION, route, &h);
	t = render(NULL, s);
	ck_assert_ptr_nonnull(
		strstr(t, "boardd_cards{board=\"b\\\"oard\\\\x\\ny\",state=\"ready\"} 3\n"));
	/* one HELP/TYPE per family, its samples together, families in table order */
	first = strstr(t, "# TYPE boardd_cards gauge\n");
	second = strstr(t, "boardd_cards{board=\"other\",state=\"done\"} 0\n");
	ck_assert_ptr_nonnull(first);
	ck_assert_ptr_nonnull(second);
	ck_assert_ptr_null(strstr(first + 1, "# TYPE boardd_cards gauge"));
	ck_assert(second < strstr(t, "# TYPE boardd_claims_held gauge"));
	ck_assert(strstr(t, "# TYPE boardd_http_request_duration_seconds") < first);
	ck_assert_ptr_nonnull(strstr(t, "boardd_http_request_duration_seconds_bucket{route=\"/v1/"
					"cards\",method=\"GET\",code=\"200\",le=\"0.001\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "boardd_http_request_duration_seconds_bucket{route=\"/v1/"
					"cards\",method=\"GET\",code=\"200\",le=\"0.0025\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t, "boardd_http_request_duration_seconds_sum{route=\"/v1/"
					"cards\",method=\"GET\",code=\"200\"} 0.002\n"));
	free(t);
	metrics_sink_free(s);
}
END_TEST

/* The table's value lists name exactly what the code counts. */
START_TEST(test_table_matches_core)
{
	const char *const *v = metrics_family_values(METRICS_REAPER_ACTIONS, 0);
	size_t a, n = 0;

	for (a = 0; a < CORE_STUCK_ACTION_COUNT_; a++) {
		const char *name = core_stuck_action_name((enum core_stuck_action)a);
		size_t i;

		for (i = 0; v[i] && strcmp(v[i], name); i++)
			;
		ck_assert_msg(v[i], "reaper action %s missing from the metrics table", name);
	}
	while (v[n])
		n++;
	ck_assert_uint_eq(n, CORE_STUCK_ACTION_COUNT_ + 1); /* + repair_release */
	ck_assert_ptr_null(metrics_family_values(METRICS_CARDS, 0)); /* collected */
	for (a = 0; a < METRICS_COUNT_; a++) {
		const char *name = metrics_family_name((enum metrics_id)a);

		ck_assert(strncmp(name, "boardd_", 7) == 0 || strncmp(name, "process_", 8) == 0);
		if (metrics_family_kind((enum metrics_id)a) == METRICS_COUNTER)
			ck_assert_msg(strlen(name) > 6 && !strcmp(name + strlen(name) - 6, "_total"),
				      "counter %s must end in _total", name);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_registry_counts_by_label);
	tcase_add_test(tc, test_histogram_cumulative);
	tcase_add_test(tc, test_sink_labels_escaped_and_grouped);
	tcase_add_test(tc, test_table_matches_core);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
