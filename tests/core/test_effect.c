/* core effects (DESIGN §14): the matching table, the one-shot, the delivery schedule. */
#include "core/core.h"
#include "tests/core/test_core.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1764670000000LL

static void strv_of(struct core_strv *sv, const char *csv)
{
	char buf[256], *tok, *save = NULL;

	memset(sv, 0, sizeof(*sv));
	if (!csv)
		return;
	strcpy(buf, csv);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		ck_assert_int_eq(core_strv_push(sv, tok), CORE_OK);
}

/* One row per case: the subscription (types, to_states, all_labels as CSV, NULL = empty), the
 * event (type, reason, to_state, card labels), and whether it fires. */
static const struct match_case {
	const char *types, *to_states, *all_labels;
	enum core_event_type type;
	const char *reason, *to_state, *labels;
	bool fires;
} match_cases[] = {
	/* the default types */
	{NULL, NULL, NULL, CORE_EV_CARD_CREATED, NULL, "ready", NULL, true},
	{NULL, NULL, NULL, CORE_EV_CARD_STATE_CHANGED, NULL, "done", NULL, true},
	{NULL, NULL, NULL, CORE_EV_CARD_UNBLOCKED, "unblocked", "ready", NULL, true},
	{NULL, NULL, NULL, CORE_EV_CARD_LABELS_CHANGED, NULL, NULL, "a", false},
	{NULL, NULL, NULL, CORE_EV_CARD_CLAIMED, NULL, NULL, NULL, false},
	/* explicit types replace the default set */
	{"card_labels_changed", NULL, NULL, CORE_EV_CARD_LABELS_CHANGED, NULL, NULL, "a", true},
	{"card_labels_changed", NULL, NULL, CORE_EV_CARD_CREATED, NULL, "ready", NULL, false},
	{"card_created,card_claimed", NULL, NULL, CORE_EV_CARD_CLAIMED, NULL, NULL, NULL, true},
	{"card_created", NULL, NULL, CORE_EV_CARD_DELETED, NULL, NULL, NULL, false},
	/* to_states: OR within, and only an event that moved the card */
	{NULL, "done,blocked", NULL, CORE_EV_CARD_STATE_CHANGED, NULL, "blocked", NULL, true},
	{NULL, "done,blocked", NULL, CORE_EV_CARD_STATE_CHANGED, NULL, "review", NULL, false},
	{"card_labels_changed", "done", NULL, CORE_EV_CARD_LABELS_CHANGED, NULL, NULL, NULL, false},
	{NULL, "ready", NULL, CORE_EV_CARD_UNBLOCKED, "unblocked", "ready", NULL, true},
	/* all_labels: AND within */
	{NULL, NULL, "deploy,prod", CORE_EV_CARD_CREATED, NULL, "ready", "prod,x,deploy", true},
	{NULL, NULL, "deploy,prod", CORE_EV_CARD_CREATED, NULL, "ready", "deploy", false},
	{NULL, NULL, "deploy", CORE_EV_CARD_CREATED, NULL, "ready", NULL, false},
	/* AND across dimensions */
	{NULL, "done", "deploy", CORE_EV_CARD_STATE_CHANGED, NULL, "done", "deploy", true},
	{NULL, "done", "deploy", CORE_EV_CARD_STATE_CHANGED, NULL, "ready", "deploy", false},
	/* machine reasons never match, whatever the filter */
	{NULL, NULL, NULL, CORE_EV_CARD_STATE_CHANGED, "watchdog", "ready", NULL, false},
	{NULL, NULL, NULL, CORE_EV_CARD_STATE_CHANGED, "state_rename", "todo", NULL, false},
	{NULL, NULL, NULL, CORE_EV_CARD_STATE_CHANGED, "state_delete", "inbox", NULL, false},
	{NULL, NULL, NULL, CORE_EV_CARD_STATE_CHANGED, "migration", "ready", NULL, false},
	{"card_gave_up", NULL, NULL, CORE_EV_CARD_GAVE_UP, "watchdog", NULL, NULL, false},
	/* the watchdog's terminal filings carry the run's verdict: not machine, they fire */
	{NULL, "done", NULL, CORE_EV_CARD_STATE_CHANGED, "run_finished", "done", NULL, true},
	{NULL, "blocked", NULL, CORE_EV_CARD_STATE_CHANGED, "run_failed", "blocked", NULL, true},
};

START_TEST(test_sub_match_table)
{
	const struct match_case *c = &match_cases[_i];
	struct core_sub_filter f;
	struct core_strv labels;
	struct core_effect_event ev;
	char detail[128];

	strv_of(&f.dim[CORE_SUB_TYPES], c->types);
	strv_of(&f.dim[CORE_SUB_TO_STATES], c->to_states);
	strv_of(&f.dim[CORE_SUB_ALL_LABELS], c->all_labels);
	strv_of(&labels, c->labels);
	ck_assert_int_eq(core_sub_filter_validate(&f, detail, sizeof detail), CORE_OK);
	ev.type = c->type;
	ev.machine = core_is_machine_reason(c->reason);
	ev.to_state = c->to_state;
	ev.labels = &labels;
	ck_assert_msg(core_sub_matches(&f, &ev) == c->fires, "case %d: want %s", _i,
		      c->fires ? "fires" : "no match");
	core_sub_filter_release(&f);
	core_strv_release(&labels);
}
END_TEST

START_TEST(test_sub_filter_validate)
{
	struct core_sub_filter f;
	char detail[128];

	memset(&f, 0, sizeof f);
	strv_of(&f.dim[CORE_SUB_TYPES], "card_created,card_exploded");
	ck_assert_int_eq(core_sub_filter_validate(&f, detail, sizeof detail), CORE_ERR_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(detail, "on.types"));
	ck_assert_ptr_nonnull(strstr(detail, "card_exploded"));
	core_sub_filter_release(&f);

	strv_of(&f.dim[CORE_SUB_TYPES], "run_created");
	ck_assert_int_eq(core_sub_filter_validate(&f, detail, sizeof detail), CORE_ERR_BAD_REQUEST);
	core_sub_filter_release(&f);
	strv_of(&f.dim[CORE_SUB_TYPES], "card_deleted");
	ck_assert_int_eq(core_sub_filter_validate(&f, detail, sizeof detail), CORE_ERR_BAD_REQUEST);
	core_sub_filter_release(&f);
	ck_assert(core_event_type_subscribable(CORE_EV_CARD_LABELS_CHANGED));
	ck_assert(!core_event_type_subscribable(CORE_EV_BOARD_UPDATED));
	ck_assert(!core_event_type_subscribable(-1));

	strv_of(&f.dim[CORE_SUB_TO_STATES], "has space");
	ck_assert_int_eq(core_sub_filter_validate(&f, detail, sizeof detail), CORE_ERR_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(detail, "on.to_states"));
	core_sub_filter_release(&f);

	strv_of(&f.dim[CORE_SUB_ALL_LABELS], "a b");
	ck_assert_int_eq(core_sub_filter_validate(&f, detail, sizeof detail), CORE_ERR_BAD_REQUEST);
	core_sub_filter_release(&f);

	ck_assert_str_eq(core_sub_dimension_name(CORE_SUB_ALL_LABELS), "all_labels");
	ck_assert_str_eq(core_sub_dimension_name(CORE_SUB_DIM_COUNT_), "unknown");
}
END_TEST

START_TEST(test_effect_consume)
{
	struct core_card *c = core_card_new();
	struct core_strv add, consume;
	bool changed;

	ck_assert_ptr_nonnull(c);
	strv_of(&add, "deploy,keep,once");
	ck_assert_int_eq(core_labels_set(c, &add, &changed), CORE_OK);
	strv_of(&consume, "once,absent");
	ck_assert_int_eq(core_effect_consume(c, &consume, &changed), CORE_OK);
	ck_assert(changed);
	ck_assert_uint_eq(c->labels.n, 2);
	ck_assert_str_eq(c->labels.v[0], "deploy");
	ck_assert_str_eq(c->labels.v[1], "keep");
	/* consumed once: a second match finds nothing to consume */
	ck_assert_int_eq(core_effect_consume(c, &consume, &changed), CORE_OK);
	ck_assert(!changed);
	ck_assert_uint_eq(c->labels.n, 2);
	core_strv_release(&add);
	core_strv_release(&consume);
	core_card_free(c);
}
END_TEST

/* attempt, status, unit, retry_after -> verdict, delay */
static const struct judge_case {
	int attempt, status;
	double unit;
	int64_t retry_after, delay;
	enum core_delivery_verdict verdict;
} judge_cases[] = {
	{1, 200, 0.5, 0, 0, CORE_DELIVERY_DONE},
	{3, 204, 0.5, 0, 0, CORE_DELIVERY_DONE},
	{7, 299, 0.5, 0, 0, CORE_DELIVERY_DONE},
	{1, 410, 0.5, 0, 0, CORE_DELIVERY_DISABLE},
	{1, 500, 0.5, 0, 5000, CORE_DELIVERY_RETRY},          /* jitter 1.0 at unit 0.5 */
	{1, 0, 0.0, 0, 4500, CORE_DELIVERY_RETRY},            /* no answer; jitter 0.9 */
	{2, 503, 0.5, 0, 300000, CORE_DELIVERY_RETRY},
	{3, 429, 0.5, 0, 1800000, CORE_DELIVERY_RETRY},
	{4, 500, 0.5, 0, 7200000, CORE_DELIVERY_RETRY},
	{5, 500, 0.5, 0, 18000000, CORE_DELIVERY_RETRY},
	{6, 500, 0.5, 0, 36000000, CORE_DELIVERY_RETRY},
	{7, 500, 0.5, 0, 0, CORE_DELIVERY_DEAD},              /* the last attempt */
	{1, 429, 0.5, 120000, 120000, CORE_DELIVERY_RETRY},   /* Retry-After beyond the schedule */
	{2, 429, 0.5, 1000, 300000, CORE_DELIVERY_RETRY},     /* ... never earlier than it */
	{1, 301, 0.5, 0, 5000, CORE_DELIVERY_RETRY},          /* a redirect is not followed */
	{0, 500, 0.5, 0, 0, CORE_DELIVERY_DEAD},              /* out of range */
};

START_TEST(test_delivery_judge)
{
	const struct judge_case *c = &judge_cases[_i];
	int64_t next = -1;

	ck_assert_int_eq(core_delivery_judge(c->status, c->attempt, NOW, c->unit, c->retry_after,
					     &next),
			 c->verdict);
	if (c->verdict == CORE_DELIVERY_RETRY)
		ck_assert_int_eq(next, NOW + c->delay);
	else
		ck_assert_int_eq(next, 0);
}
END_TEST

START_TEST(test_delivery_jitter_bounds)
{
	int64_t next;
	double u;

	for (u = 0; u < 1; u += 0.01) {
		ck_assert_int_eq(core_delivery_judge(500, 2, NOW, u, 0, &next), CORE_DELIVERY_RETRY);
		ck_assert_int_ge(next - NOW, 270000);
		ck_assert_int_lt(next - NOW, 330000);
	}
}
END_TEST

TCase *test_core_effect_tcase(void)
{
	TCase *tc = tcase_create("effect");

	tcase_add_loop_test(tc, test_sub_match_table, 0,
			    (int)(sizeof(match_cases) / sizeof(match_cases[0])));
	tcase_add_test(tc, test_sub_filter_validate);
	tcase_add_test(tc, test_effect_consume);
	tcase_add_loop_test(tc, test_delivery_judge, 0,
			    (int)(sizeof(judge_cases) / sizeof(judge_cases[0])));
	tcase_add_test(tc, test_delivery_jitter_bounds);
	return tc;
}
