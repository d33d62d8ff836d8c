/* store_stats on every twin: cards by board and state (empty columns included), claims held
 * and expired by the store's clock, and the fence refusals by reason (metrics/metrics.h). */
#include "conformance.h"
#include "metrics/metrics.h"

#include <stdlib.h>
#include <string.h>

/* The rendered scrape of st's samples; caller frees. */
static char *scrape(struct store *st)
{
	struct metrics_sink *s = metrics_sink_new();
	char *text = NULL;
	size_t len;

	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(store_stats(st, s), CORE_OK);
	ck_assert(metrics_render(NULL, s, &text, &len));
	metrics_sink_free(s);
	return text;
}

static void has_line(const char *text, const char *line)
{
	const char *p = text;
	size_t n = strlen(line);

	while ((p = strstr(p, line)) && !((p == text || p[-1] == '\n') && p[n] == '\n'))
		p += n;
	ck_assert_msg(p, "no line \"%s\" in:\n%s", line, text);
}

START_TEST(stats_cards_claims_and_fence_reasons)
{
	struct store *st = ct_open();
	struct core_board b = {0};
	struct store_card_create in = {.id = "s-b2", .board = "b2", .state = "backlog"};
	struct store_actor other = {.name = "intruder"};
	struct core_token t;
	struct core_card *c = NULL;
	char *text;
	int64_t e1;

	ck_assert_int_eq(core_board_init_default(&b, "b2"), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	core_board_release(&b);
	core_card_free(ct_create(st, "s1", "ready", NULL));
	core_card_free(ct_create(st, "s2", "ready", NULL));
	core_card_free(ct_create(st, "s3", "ready", NULL));
	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	core_card_free(c);

	e1 = ct_claim(st, "s1", "w1"); /* lease 60 s */
	ct_now += 120000;              /* s1's lease has run out */
	ct_claim(st, "s2", "w2");

	/* One refusal of each kind the fence tells apart. */
	t = (struct core_token){"w9", e1, "ci-bot"};
	ck_assert_int_eq(store_card_renew(st, "s1", &t, 0, &ct_bot, &c), CORE_ERR_CLAIM_CONFLICT);
	t = (struct core_token){"w1", e1 - 1, "ci-bot"};
	ck_assert_int_eq(store_card_release(st, "s1", &t, &ct_bot, &c), CORE_ERR_CLAIM_CONFLICT);
	t = (struct core_token){"w1", e1, "ci-bot"};
	ck_assert_int_eq(store_card_release(st, "s3", &t, &ct_bot, &c), CORE_ERR_CLAIM_CONFLICT);
	t = (struct core_token){"w1", e1, "intruder"};
	ck_assert_int_eq(store_card_release(st, "s1", &t, &other, &c), CORE_ERR_CLAIM_CONFLICT);

	/* Run writes: a run of s2's claim by another token, a run on a claim gone. */
	{
		struct store_run_create rin = {.card_id = "s2", .marker = "w9", .status = "running",
					       .lease_ms = 30000};
		struct store_run_update u = {.marker = "w2", .status = "running", .lease_ms = 30000};
		struct core_run *r = NULL;

		ck_assert_int_eq(store_run_create(st, &rin, &ct_bot, &r), CORE_ERR_CLAIM_CONFLICT);
		ct_run(st, "s-run", "s2", "w2", &ct_bot);
		ck_assert_int_eq(store_run_update(st, "s-run", &u, &other, &r),
				 CORE_ERR_CLAIM_CONFLICT);
	}

	text = scrape(st);
	has_line(text, "boardd_cards{board=\"default\",state=\"ready\"} 3");
	has_line(text, "boardd_cards{board=\"default\",state=\"done\"} 0");
	has_line(text, "boardd_cards{board=\"b2\",state=\"backlog\"} 1");
	has_line(text, "boardd_cards{board=\"b2\",state=\"ready\"} 0");
	has_line(text, "boardd_claims_held 2");
	has_line(text, "boardd_claims_expired 1");
	has_line(text, "boardd_fenced_writes_refused_total{reason=\"unclaimed\"} 1");
	has_line(text, "boardd_fenced_writes_refused_total{reason=\"marker\"} 1");
	has_line(text, "boardd_fenced_writes_refused_total{reason=\"epoch\"} 1");
	has_line(text, "boardd_fenced_writes_refused_total{reason=\"holder\"} 1");
	has_line(text, "boardd_fenced_writes_refused_total{reason=\"run\"} 2");
	ck_assert_ptr_null(strstr(text, "state=\"ready\"} 4")); /* b2's card is not default's */
	free(text);
	ct_close(st);
}
END_TEST

void conformance_add_stats(Suite *s)
{
	TCase *tc = tcase_create("stats");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, stats_cards_claims_and_fence_reasons);
	suite_add_tcase(s, tc);
}
