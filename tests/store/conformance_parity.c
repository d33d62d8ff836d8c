/* Conformance cases found by the HTTP differential test (tests/parity/parity.py), which
 * replays one seeded sequence of requests against a boardd on each twin and compares the
 * answers: each case pins, on both twins, the behaviour the twin that was wrong now has. */
#include "tests/store/conformance.h"

#include <stdio.h>
#include <string.h>

/* GET /v1/boards listed the FS twin's boards in the order they were made, the Mongo twin's
 * by name (_id). Both list by name now. */
START_TEST(boards_listed_by_name)
{
	struct store *st = ct_open();
	const char *const names[] = {"team", "alpha", "Zed"};
	const char *const want[] = {"Zed", "alpha", "default", "team"};
	struct core_board b = {0}, *all = NULL;
	size_t n = 0, i;

	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(core_board_init_default(&b, names[i]), CORE_OK);
		ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
		core_board_release(&b);
	}
	ck_assert_int_eq(store_board_list(st, &all, &n), CORE_OK);
	ck_assert_uint_eq(n, 4);
	for (i = 0; i < n; i++)
		ck_assert_str_eq(all[i].name, want[i]);
	store_boards_free(all, n);
	ct_close(st);
}
END_TEST

/* A page of one board's events that is full (limit) and ends the board's tail: `next` is
 * where the tail stands (past the other board's later events), as when the page is not full.
 * The Mongo twin answered the page's last event, the FS twin the tail. A full page with more
 * of the board's events after it resumes after its last one on both. */
START_TEST(events_full_page_next_is_the_tail)
{
	struct store *st = ct_open();
	struct core_board b = {0};
	struct store_card_create in = {.id = "a1", .board = "team", .title = "a1"};
	struct core_card *c = NULL;
	struct core_event *ev = NULL;
	int64_t start, next = 0, tail;
	size_t n = 0;

	ck_assert_int_eq(core_board_init_default(&b, "team"), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	core_board_release(&b);
	start = ct_last_seq(st);
	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	in.id = "a2";
	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	core_card_free(ct_create(st, "d1", NULL, NULL)); /* the default board's, after team's */
	tail = ct_last_seq(st);

	ck_assert_int_eq(store_events_list(st, "team", NULL, start, 2, 0, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(next, tail);
	store_events_free(ev, n);

	ck_assert_int_eq(store_events_list(st, "team", NULL, start, 1, 0, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(next, ev[0].seq);
	store_events_free(ev, n);
	ct_close(st);
}
END_TEST

/* A card that left a column after claim-next had ranked it there, then was deleted: a card
 * entering that column afterwards crashed the FS twin (its claim-next cache still held the
 * deleted card and compared the newcomer with it). The newcomer is created and claimed next. */
START_TEST(claim_next_after_a_ranked_card_moved_and_deleted)
{
	struct store *st = ct_open();
	const struct store_actor worker = {.name = "w-token"};
	const char *const ready[] = {"ready", NULL};
	struct core_strv cv = ct_strv(ready);
	struct store_claim_next in = {.board = "default", .marker = "w1", .lease_ms = 60000,
				      .columns = &cv, .holder = worker.name};
	struct store_claim_result r = {0};
	struct core_card *c;

	core_card_free(ct_create(st, "x1", "ready", NULL));
	ct_now += 10;
	core_card_free(ct_create(st, "x2", "ready", NULL));
	ct_now += 10;
	ck_assert_int_eq(store_card_claim_next(st, &in, &worker, &r), CORE_OK);
	ck_assert_ptr_nonnull(r.card);
	ck_assert_str_eq(r.card->id, "x1");
	core_card_free(r.card);
	ct_move(st, "x2", "ready", "review", NULL, &ct_bot);
	ck_assert_int_eq(store_card_delete(st, "x2", &ct_op), CORE_OK);
	c = ct_create(st, "x3", "ready", NULL);
	core_card_free(c);
	ck_assert_int_eq(store_card_claim_next(st, &in, &worker, &r), CORE_OK);
	ck_assert_ptr_nonnull(r.card);
	ck_assert_str_eq(r.card->id, "x3");
	core_card_free(r.card);
	free(cv.v);
	ct_close(st);
}
END_TEST

/* An owned move into the completed column that also releases: the card's own events (its
 * move, its release) come first, then its dependents' card_unblocked. The FS twin appended
 * the cascade between the move and the release; the Mongo twin commits the card before it
 * promotes a dependent. */
START_TEST(owned_done_and_release_then_unblocked)
{
	struct store *st = ct_open();
	const char *const blk[] = {"b1", NULL};
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = "done",
				      .reason = "run_finished", .release = true};
	const enum core_event_type want[] = {CORE_EV_CARD_STATE_CHANGED, CORE_EV_CARD_RELEASED,
					     CORE_EV_CARD_UNBLOCKED};
	const char *const ids[] = {"b1", "b1", "d1"};
	struct core_card *c = NULL;
	struct core_event *ev;
	int64_t after;
	size_t n, i;

	core_card_free(ct_create(st, "b1", "in_progress", NULL));
	core_card_free(ct_create(st, "d1", NULL, blk));
	ct_assert_state(st, "d1", "waiting_deps");
	w.token = (struct core_token){.marker = "w1", .epoch = ct_claim(st, "b1", "w1")};
	after = ct_last_seq(st);
	ck_assert_int_eq(store_card_owned_write(st, "b1", &w, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ev = ct_events(st, after, &n);
	ck_assert_uint_eq(n, 3);
	for (i = 0; i < n; i++) {
		ck_assert_str_eq(core_event_type_name(ev[i].type), core_event_type_name(want[i]));
		ck_assert_str_eq(ev[i].card_id, ids[i]);
	}
	store_events_free(ev, n);
	ct_assert_state(st, "d1", "ready");
	ct_close(st);
}
END_TEST

/* A card written many times in a row, then deleted: its card_deleted is in the tail, after
 * every event of those writes, each once. The Mongo twin lost card_deleted when the card's
 * outbox still held a queue's worth of entries (their pulls are deferred to the puller, so a
 * burst of writes leaves them there): the delete answered, its event was never recorded. */
START_TEST(delete_after_a_burst_of_writes_is_in_the_tail)
{
	struct store *st = ct_open();
	struct store_card_patch p = {0};
	struct core_card *c = NULL;
	struct core_event *ev;
	char title[16];
	int64_t after;
	size_t n, i, updated = 0;

	core_card_free(ct_create(st, "burst", NULL, NULL));
	after = ct_last_seq(st);
	for (i = 0; i < 40; i++) {
		snprintf(title, sizeof title, "t%zu", i);
		p.title = title;
		ck_assert_int_eq(store_card_patch(st, "burst", &p, &ct_bot, &c), CORE_OK);
		core_card_free(c);
	}
	ck_assert_int_eq(store_card_delete(st, "burst", &ct_op), CORE_OK);
	ev = ct_events(st, after, &n);
	ck_assert_uint_eq(n, 41);
	for (i = 0; i < 40; i++)
		updated += ev[i].type == CORE_EV_CARD_UPDATED;
	ck_assert_uint_eq(updated, 40);
	ck_assert_str_eq(core_event_type_name(ev[40].type), "card_deleted");
	ck_assert_str_eq(ev[40].card_id, "burst");
	store_events_free(ev, n);
	ct_close(st);
}
END_TEST

/* A card filed into the completed column whose subscription consumes a one-shot label, with
 * a dependent waiting on it: the card's own events (its move, then the consume) come before
 * its dependent's card_unblocked. The FS twin appended the consume at the end of the step,
 * after the cascade; the Mongo twin commits the card's write, consume included, first. */
START_TEST(consume_before_the_cascade)
{
	struct store *st = ct_open();
	const char *const blk[] = {"x1", NULL}, *const once[] = {"once", NULL};
	const char *const to_done[] = {"done", NULL};
	const enum core_event_type want[] = {CORE_EV_CARD_STATE_CHANGED,
					     CORE_EV_CARD_LABELS_CHANGED, CORE_EV_CARD_UNBLOCKED};
	const char *const ids[] = {"x1", "x1", "d1"};
	struct core_event *ev;
	int64_t after;
	size_t n, i;

	core_card_free(ct_create(st, "x1", "review", NULL));
	ct_set_labels(st, "x1", once);
	core_card_free(ct_create(st, "d1", NULL, blk));
	store_sub_free(ct_sub_put(st, "oneshot", NULL, to_done, NULL, once));
	after = ct_last_seq(st);
	ct_move(st, "x1", "review", "done", NULL, &ct_bot);
	ev = ct_events(st, after, &n);
	ck_assert_uint_eq(n, 3);
	for (i = 0; i < n; i++) {
		ck_assert_str_eq(core_event_type_name(ev[i].type), core_event_type_name(want[i]));
		ck_assert_str_eq(ev[i].card_id, ids[i]);
	}
	store_events_free(ev, n);
	ct_assert_labels(st, "x1", (const char *const[]){NULL});
	ct_assert_state(st, "d1", "ready");
	ct_close(st);
}
END_TEST

/* A label sweep over every board appends one summary per board touched, in the order the
 * sweep first touched each (its cards' order). The FS twin appended them in the order the
 * boards were made. */
START_TEST(sweep_summaries_in_the_order_touched)
{
	struct store *st = ct_open();
	const char *const boards[] = {"zeta", "alpha"}, *const on[] = {"zeta", "default", "alpha"};
	const char *const old[] = {"old", NULL};
	struct core_strv from = ct_strv(old);
	struct store_label_sweep sw = {.kind = STORE_LABELS_RENAME, .from = &from, .to = "new"};
	struct core_board b = {0};
	struct core_card *c = NULL;
	struct core_event *ev;
	struct core_strv lv = ct_strv(old);
	char id[8];
	int64_t after;
	size_t n, i, k = 0, touched = 0;

	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(core_board_init_default(&b, boards[i]), CORE_OK);
		ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
		core_board_release(&b);
	}
	for (i = 0; i < 3; i++) {
		struct store_card_create in = {.id = id, .board = on[i], .title = "t", .labels = &lv};

		snprintf(id, sizeof id, "s%zu", i);
		ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
		core_card_free(c);
	}
	after = ct_last_seq(st);
	ck_assert_int_eq(store_labels_sweep(st, &sw, &ct_op, &touched), CORE_OK);
	ck_assert_uint_eq(touched, 3);
	ev = ct_events(st, after, &n);
	for (i = 0; i < n; i++) {
		if (ev[i].type != CORE_EV_LABEL_RENAME)
			continue;
		ck_assert_uint_lt(k, 3);
		ck_assert_str_eq(ev[i].board, on[k++]);
	}
	ck_assert_uint_eq(k, 3);
	store_events_free(ev, n);
	free(from.v);
	free(lv.v);
	ct_close(st);
}
END_TEST

void conformance_add_parity(Suite *s)
{
	TCase *tc = tcase_create("parity");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, boards_listed_by_name);
	tcase_add_test(tc, events_full_page_next_is_the_tail);
	tcase_add_test(tc, claim_next_after_a_ranked_card_moved_and_deleted);
	tcase_add_test(tc, owned_done_and_release_then_unblocked);
	tcase_add_test(tc, delete_after_a_burst_of_writes_is_in_the_tail);
	tcase_add_test(tc, consume_before_the_cascade);
	tcase_add_test(tc, sweep_summaries_in_the_order_touched);
	suite_add_tcase(s, tc);
}
