/* Conformance: SetStateFrom, terminal sinks, Reopen, blockers and the unblocked cascade
 * (DESIGN §4, ADR-096 §5). */
#include "tests/store/conformance.h"

#include <stdlib.h>
#include <string.h>

static enum core_rc move(struct store *st, const char *id, const char *from, const char *to,
			 const char *reason)
{
	struct core_card *c = NULL;
	enum core_rc rc = store_card_set_state_from(st, id, from, to, reason, &ct_bot, &c);

	ck_assert(rc == CORE_OK ? c != NULL : c == NULL);
	core_card_free(c);
	return rc;
}

START_TEST(set_state_from_cas)
{
	struct store *st = ct_open();
	struct core_card *c = NULL;
	struct core_event *ev;
	size_t n;
	int64_t seq;

	core_card_free(ct_create(st, "s1", "ready", NULL));
	ct_now += 3;
	ck_assert_int_eq(store_card_set_state_from(st, "s1", "ready", "review", "triage", &ct_bot,
						   &c),
			 CORE_OK);
	ck_assert_str_eq(c->state, "review");
	ck_assert_str_eq(c->state_reason, "triage");
	ck_assert_int_eq(c->state_at, CT_T0 + 3);
	core_card_free(c);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "card_state_changed");
	ct_assert_payload(&ev[n - 1], "{\"from\":\"ready\",\"to\":\"review\"}");
	ck_assert_str_eq(ev[n - 1].reason, "triage");
	store_events_free(ev, n);

	/* CAS on the declared source. */
	ck_assert_int_eq(move(st, "s1", "ready", "done", NULL), CORE_ERR_STATE_CONFLICT);
	ct_assert_state(st, "s1", "review");
	ck_assert_int_eq(move(st, "s1", NULL, "nowhere", NULL), CORE_ERR_TRANSITION_REJECTED);
	ck_assert_int_eq(move(st, "nope", NULL, "ready", NULL), CORE_ERR_NOT_FOUND);
	/* Same column: a no-op without an event. */
	seq = ct_last_seq(st);
	ck_assert_int_eq(move(st, "s1", "review", "review", NULL), CORE_OK);
	ck_assert_int_eq(ct_last_seq(st), seq);
	ct_close(st);
}
END_TEST

START_TEST(terminal_sinks)
{
	struct store *st = ct_open();
	struct store_owned_write w = {.kind = STORE_OWNED_STATE};
	struct core_card *c = NULL;
	int64_t ep, seq;

	core_card_free(ct_create(st, "t1", "ready", NULL));
	ck_assert_int_eq(move(st, "t1", NULL, "done", NULL), CORE_OK);
	/* Leaving a terminal column by an ordinary write is refused... */
	ck_assert_int_eq(move(st, "t1", "done", "ready", NULL), CORE_ERR_TERMINAL_STATE_EXIT);
	ck_assert(core_rc_is_transition_rejected(CORE_ERR_TERMINAL_STATE_EXIT));
	ct_assert_state(st, "t1", "done");
	/* ...terminal to terminal is a refiling, the operator's only (ADR-096 §5): a bot's
	 * is refused and changes nothing, not even the audit tail. */
	seq = ct_last_seq(st);
	ck_assert_int_eq(move(st, "t1", "done", "blocked", NULL), CORE_ERR_TERMINAL_STATE_EXIT);
	ct_assert_state(st, "t1", "done");
	ck_assert_int_eq(ct_last_seq(st), seq);
	ck_assert_int_eq(store_card_set_state_from(st, "t1", "done", "blocked", NULL, &ct_op, &c),
			 CORE_OK);
	core_card_free(c);
	c = NULL;
	ct_assert_state(st, "t1", "blocked");
	/* A terminal card cannot be claimed. */
	{
		struct store_claim_result r;
		ck_assert_int_eq(store_card_claim(st, "t1", "w1", 1000, &ct_bot, &r),
				 CORE_ERR_TRANSITION_REJECTED);
		ck_assert_ptr_null(r.card);
	}
	/* Nor left by an owned write. */
	core_card_free(ct_create(st, "t2", "ready", NULL));
	ep = ct_claim(st, "t2", "w1");
	w.token = (struct core_token){.marker = "w1", .epoch = ep};
	w.state = "done";
	w.reason = "run_finished";
	ck_assert_int_eq(store_card_owned_write(st, "t2", &w, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	w.state = "ready";
	ck_assert_int_eq(store_card_owned_write(st, "t2", &w, &ct_bot, &c),
			 CORE_ERR_TERMINAL_STATE_EXIT);
	ck_assert_ptr_null(c);
	ct_assert_state(st, "t2", "done");
	/* Nor refiled by one: a run must not drag a card out of done (ADR-096 §5). */
	seq = ct_last_seq(st);
	w.state = "blocked";
	ck_assert_int_eq(store_card_owned_write(st, "t2", &w, &ct_bot, &c),
			 CORE_ERR_TERMINAL_STATE_EXIT);
	ck_assert_ptr_null(c);
	ct_assert_state(st, "t2", "done");
	ck_assert_int_eq(ct_last_seq(st), seq);
	/* Writing the column it is in is no move: a worker's retried outcome stays fine. */
	w.state = "done";
	ck_assert_int_eq(store_card_owned_write(st, "t2", &w, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ct_close(st);
}
END_TEST

START_TEST(reopen_rules)
{
	struct store *st = ct_open();
	const char *const dep_on[] = {"r1", NULL};
	struct core_card *c = NULL;
	struct core_event *ev;
	size_t n;

	core_card_free(ct_create(st, "r1", "ready", NULL));
	ck_assert_int_eq(store_card_reopen(st, "r1", "ready", NULL, &ct_op, &c),
			 CORE_ERR_TRANSITION_REJECTED); /* not terminal */
	core_card_free(ct_create(st, "r2", "ready", dep_on));
	ct_assert_state(st, "r2", "waiting_deps");
	ck_assert_int_eq(move(st, "r1", NULL, "done", NULL), CORE_OK);
	ct_assert_state(st, "r2", "ready"); /* promoted by the cascade */
	ck_assert_int_eq(store_card_reopen(st, "r1", "done", NULL, &ct_op, &c),
			 CORE_ERR_TRANSITION_REJECTED); /* target must be working */
	ck_assert_int_eq(store_card_reopen(st, "r1", "ready", NULL, &ct_op, &c),
			 CORE_ERR_DEPENDENTS_OUTSTANDING);
	ck_assert_ptr_null(c);
	ct_assert_state(st, "r1", "done");
	/* Once the dependent is back in waiting_deps, the reopen goes through. */
	ck_assert_int_eq(move(st, "r2", "ready", "waiting_deps", NULL), CORE_OK);
	ck_assert_int_eq(store_card_reopen(st, "r1", "ready", "operator", &ct_op, &c), CORE_OK);
	ck_assert_str_eq(c->state, "ready");
	core_card_free(c);
	ev = ct_events(st, 0, &n);
	ct_assert_payload(&ev[n - 1], "{\"from\":\"done\",\"to\":\"ready\",\"reopened\":true}");
	ck_assert_str_eq(ev[n - 1].actor, "alice");
	store_events_free(ev, n);
	/* The failed sink has no dependents guard. */
	ck_assert_int_eq(move(st, "r1", NULL, "blocked", NULL), CORE_OK);
	ck_assert_int_eq(store_card_reopen(st, "r1", "backlog", NULL, &ct_op, &c), CORE_OK);
	core_card_free(c);
	ct_close(st);
}
END_TEST

START_TEST(blockers_checks)
{
	struct store *st = ct_open();
	const char *const unknown[] = {"ghost", NULL}, *const on_a[] = {"a", NULL},
			  *const on_b[] = {"b", NULL}, *const on_self[] = {"a", NULL},
			  *const dup[] = {"a", "a", NULL};
	struct core_strv vb = ct_strv(on_b), vs = ct_strv(on_self);
	struct store_card_patch p = {0};
	struct core_card *c = NULL;
	struct store_card_create in = {.id = "x", .blockers = NULL};
	struct core_strv vu = ct_strv(unknown);

	in.blockers = &vu;
	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_ERR_TRANSITION_REJECTED);
	core_card_free(ct_create(st, "a", "ready", NULL));
	c = ct_create(st, "b", "ready", dup);
	ck_assert_uint_eq(c->blockers.n, 1); /* deduplicated */
	ck_assert_str_eq(c->state, "waiting_deps"); /* whatever state was asked */
	core_card_free(c);
	c = NULL;
	/* a -> b -> a would be a cycle; a -> a is self. */
	p.blockers = &vb;
	ck_assert_int_eq(store_card_patch(st, "a", &p, &ct_bot, &c), CORE_ERR_TRANSITION_REJECTED);
	p.blockers = &vs;
	ck_assert_int_eq(store_card_patch(st, "a", &p, &ct_bot, &c), CORE_ERR_TRANSITION_REJECTED);
	ck_assert_ptr_null(c);
	ct_assert_state(st, "a", "ready");
	/* Blockers already done: the asked state stands. */
	ck_assert_int_eq(move(st, "a", NULL, "done", NULL), CORE_OK);
	c = ct_create(st, "c", "backlog", on_a);
	ck_assert_str_eq(c->state, "backlog");
	core_card_free(c);
	free(vb.v);
	free(vs.v);
	free(vu.v);
	ct_close(st);
}
END_TEST

START_TEST(patch_blockers_moves)
{
	struct store *st = ct_open();
	const char *const on_a[] = {"a", NULL};
	struct core_strv va = ct_strv(on_a), none = {0};
	struct store_card_patch p = {.blockers = &va};
	struct core_card *c = NULL;
	struct core_event *ev;
	size_t n;

	core_card_free(ct_create(st, "a", "ready", NULL));
	core_card_free(ct_create(st, "b", "backlog", NULL));
	ck_assert_int_eq(store_card_patch(st, "b", &p, &ct_bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "waiting_deps");
	ck_assert_str_eq(c->state_reason, "blocked");
	core_card_free(c);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(core_event_type_name(ev[n - 2].type), "card_updated");
	ct_assert_payload(&ev[n - 2], "{\"fields\":[\"blockers\"]}");
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "card_state_changed");
	ck_assert_str_eq(ev[n - 1].reason, "blocked");
	store_events_free(ev, n);
	/* Blockers dropped: waiting is over, to the first eligible column. */
	p.blockers = &none;
	ck_assert_int_eq(store_card_patch(st, "b", &p, &ct_bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "ready");
	ck_assert_str_eq(c->state_reason, "unblocked");
	core_card_free(c);
	/* A claimed card is not moved by a blockers update. */
	ct_claim(st, "b", "w1");
	p.blockers = &va;
	ck_assert_int_eq(store_card_patch(st, "b", &p, &ct_bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "ready");
	core_card_free(c);
	free(va.v);
	ct_close(st);
}
END_TEST

START_TEST(unblocked_cascade)
{
	struct store *st = ct_open();
	const char *const on_a[] = {"a", NULL}, *const on_ad[] = {"a", "d", NULL};
	struct core_event *ev;
	size_t n, i, unblocked = 0;
	int64_t seq;

	core_card_free(ct_create(st, "a", "ready", NULL));
	core_card_free(ct_create(st, "d", "ready", NULL));
	core_card_free(ct_create(st, "b", NULL, on_a));
	core_card_free(ct_create(st, "c", NULL, on_ad));
	ct_assert_state(st, "b", "waiting_deps");
	ct_assert_state(st, "c", "waiting_deps");
	seq = ct_last_seq(st);
	ck_assert_int_eq(move(st, "a", NULL, "done", "shipped"), CORE_OK);
	ct_assert_state(st, "b", "ready");
	ct_assert_state(st, "c", "waiting_deps"); /* d is not done */
	ev = ct_events(st, seq, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(core_event_type_name(ev[0].type), "card_state_changed");
	ck_assert_str_eq(core_event_type_name(ev[1].type), "card_unblocked");
	ck_assert_str_eq(ev[1].card_id, "b");
	ck_assert_str_eq(ev[1].reason, "unblocked");
	ck_assert(!ev[1].machine);
	ct_assert_payload(&ev[1], "{\"from\":\"waiting_deps\",\"to\":\"ready\",\"blocker\":\"a\"}");
	store_events_free(ev, n);

	/* A machine filing fires no effect: c stays waiting although d is done. */
	seq = ct_last_seq(st);
	ck_assert_int_eq(move(st, "d", NULL, "done", "watchdog"), CORE_OK);
	ct_assert_state(st, "c", "waiting_deps");
	ev = ct_events(st, seq, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert(ev[0].machine);
	ck_assert_str_eq(ev[0].actor, "");
	for (i = 0; i < n; i++)
		unblocked += ev[i].type == CORE_EV_CARD_UNBLOCKED;
	ck_assert_uint_eq(unblocked, 0);
	store_events_free(ev, n);
	ct_close(st);
}
END_TEST

START_TEST(cascade_from_owned_write)
{
	struct store *st = ct_open();
	const char *const on_a[] = {"a", NULL};
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = "done",
				      .reason = "run_finished"};
	struct core_card *c = NULL;

	core_card_free(ct_create(st, "a", "ready", NULL));
	core_card_free(ct_create(st, "b", NULL, on_a));
	w.token = (struct core_token){.marker = "w1", .epoch = ct_claim(st, "a", "w1")};
	ck_assert_int_eq(store_card_owned_write(st, "a", &w, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ct_assert_state(st, "b", "ready");
	ct_close(st);
}
END_TEST

void conformance_add_workflow(Suite *s)
{
	TCase *tc = tcase_create("workflow");

	tcase_add_test(tc, set_state_from_cas);
	tcase_add_test(tc, terminal_sinks);
	tcase_add_test(tc, reopen_rules);
	tcase_add_test(tc, blockers_checks);
	tcase_add_test(tc, patch_blockers_moves);
	tcase_add_test(tc, unblocked_cascade);
	tcase_add_test(tc, cascade_from_owned_write);
	suite_add_tcase(s, tc);
}
