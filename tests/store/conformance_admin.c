/* Conformance: the admin operations — column rename and the label sweeps. */
#include "tests/store/conformance.h"

#include <stdlib.h>
#include <string.h>

START_TEST(column_rename_moves_cards_as_machine)
{
	struct store *st = ct_open();
	struct core_board b = {0};
	struct core_card *c;
	struct core_event *ev;
	size_t touched = 99, n, i, state_events = 0;
	int64_t epoch, before;

	core_card_free(ct_create(st, "a", "review", NULL));
	core_card_free(ct_create(st, "b", "review", NULL));
	core_card_free(ct_create(st, "c", "ready", NULL));
	epoch = ct_claim(st, "a", "w1");
	before = ct_last_seq(st);
	ct_now += 1000;
	ck_assert_int_eq(store_board_column_rename(st, "default", "review", "qa", &ct_op, &touched),
			 CORE_OK);
	ck_assert_uint_eq(touched, 2);
	ct_assert_state(st, "a", "qa");
	ct_assert_state(st, "b", "qa");
	ct_assert_state(st, "c", "ready");
	c = ct_get(st, "a");
	ck_assert_str_eq(c->state_reason, "state_rename");
	ck_assert(c->claim.present); /* ordinary writes never touch the claim */
	ck_assert_int_eq(c->claim_epoch, epoch);
	core_card_free(c);
	ck_assert_int_eq(store_board_get(st, "default", &b), CORE_OK);
	ck_assert_ptr_nonnull(core_board_column(&b, "qa"));
	ck_assert_ptr_null(core_board_column(&b, "review"));
	ck_assert_str_eq(b.cols[6].name, "qa"); /* keeps its place */
	core_board_release(&b);

	ev = ct_events(st, before, &n);
	for (i = 0; i < n; i++) {
		if (ev[i].type == CORE_EV_CARD_STATE_CHANGED) {
			state_events++;
			ck_assert(ev[i].machine);
			ck_assert_str_eq(ev[i].actor, "");
			ct_assert_payload(&ev[i], "{\"from\":\"review\",\"to\":\"qa\"}");
		}
	}
	ck_assert_uint_eq(state_events, 2);
	ck_assert_int_eq(ev[n - 1].type, CORE_EV_BOARD_UPDATED);
	store_events_free(ev, n);
	ct_close(st);
}
END_TEST

START_TEST(column_rename_roles_and_refusals)
{
	struct store *st = ct_open();
	struct core_board b = {0};
	struct core_card *c = NULL;
	size_t touched = 9;

	core_card_free(ct_create(st, "x", "done", NULL));
	ck_assert_int_eq(store_board_column_rename(st, "default", "done", "shipped", &ct_op,
						   &touched),
			 CORE_OK);
	ck_assert_uint_eq(touched, 1);
	ck_assert_int_eq(store_board_get(st, "default", &b), CORE_OK);
	ck_assert_str_eq(b.completed, "shipped");
	ck_assert(core_board_is_terminal(&b, "shipped"));
	core_board_release(&b);
	/* the sink is still a sink under its new name */
	ck_assert_int_eq(store_card_set_state_from(st, "x", "shipped", "ready", NULL, &ct_op, &c),
			 CORE_ERR_TERMINAL_STATE_EXIT);
	ck_assert_int_eq(store_board_column_rename(st, "default", "ready", "backlog", &ct_op,
						   &touched),
			 CORE_ERR_ALREADY_EXISTS);
	ck_assert_uint_eq(touched, 0);
	ck_assert_int_eq(store_board_column_rename(st, "default", "nope", "x2", &ct_op, &touched),
			 CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_board_column_rename(st, "ghost", "ready", "x2", &ct_op, &touched),
			 CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_board_column_rename(st, "default", "ready", "bad name", &ct_op,
						   &touched),
			 CORE_ERR_BAD_REQUEST);
	ct_close(st);
}
END_TEST

START_TEST(label_sweeps)
{
	struct store *st = ct_open();
	struct store_label_sweep sw = {0};
	struct core_strv from;
	struct core_event *ev;
	size_t touched = 0, n;
	int64_t before;

	core_card_free(ct_create(st, "a", NULL, NULL));
	core_card_free(ct_create(st, "b", NULL, NULL));
	core_card_free(ct_create(st, "c", NULL, NULL));
	ct_set_labels(st, "a", (const char *const[]){"bug", "p1", NULL});
	ct_set_labels(st, "b", (const char *const[]){"defect", "bug", NULL});
	ct_set_labels(st, "c", (const char *const[]){"p2", NULL});

	/* rename keeps the position; a card holding both keeps one */
	from = ct_strv((const char *const[]){"bug", NULL});
	sw = (struct store_label_sweep){.kind = STORE_LABELS_RENAME, .from = &from, .to = "defect"};
	before = ct_last_seq(st);
	ck_assert_int_eq(store_labels_sweep(st, &sw, &ct_op, &touched), CORE_OK);
	ck_assert_uint_eq(touched, 2);
	free(from.v);
	ct_assert_labels(st, "a", (const char *const[]){"defect", "p1", NULL});
	ct_assert_labels(st, "b", (const char *const[]){"defect", NULL});
	ct_assert_labels(st, "c", (const char *const[]){"p2", NULL});
	ev = ct_events(st, before, &n);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(ev[0].type, CORE_EV_CARD_LABELS_CHANGED);
	ck_assert_int_eq(ev[2].type, CORE_EV_LABEL_RENAME);
	ck_assert(!ev[2].machine);
	ct_assert_payload(&ev[2], "{\"from\":[\"bug\"],\"to\":\"defect\",\"touched\":2}");
	store_events_free(ev, n);

	/* merge */
	from = ct_strv((const char *const[]){"p1", "p2", NULL});
	sw = (struct store_label_sweep){.kind = STORE_LABELS_MERGE, .from = &from, .to = "prio"};
	ck_assert_int_eq(store_labels_sweep(st, &sw, &ct_op, &touched), CORE_OK);
	ck_assert_uint_eq(touched, 2);
	free(from.v);
	ct_assert_labels(st, "a", (const char *const[]){"defect", "prio", NULL});
	ct_assert_labels(st, "c", (const char *const[]){"prio", NULL});

	/* delete, scoped to a board the cards are not on: nothing */
	from = ct_strv((const char *const[]){"prio", NULL});
	sw = (struct store_label_sweep){.kind = STORE_LABELS_DELETE, .from = &from,
					.board = "elsewhere"};
	ck_assert_int_eq(store_labels_sweep(st, &sw, &ct_op, &touched), CORE_OK);
	ck_assert_uint_eq(touched, 0);
	sw.board = NULL;
	sw.boards = (const char *const[]){"other", NULL};
	ck_assert_int_eq(store_labels_sweep(st, &sw, &ct_op, &touched), CORE_OK);
	ck_assert_uint_eq(touched, 0);
	sw.boards = NULL;
	ck_assert_int_eq(store_labels_sweep(st, &sw, &ct_op, &touched), CORE_OK);
	ck_assert_uint_eq(touched, 2);
	free(from.v);
	ct_assert_labels(st, "a", (const char *const[]){"defect", NULL});
	ct_assert_labels(st, "c", (const char *const[]){NULL});

	/* bad input changes nothing */
	from = ct_strv((const char *const[]){"defect", NULL});
	sw = (struct store_label_sweep){.kind = STORE_LABELS_RENAME, .from = &from, .to = "a,b"};
	ck_assert_int_eq(store_labels_sweep(st, &sw, &ct_op, &touched), CORE_ERR_BAD_REQUEST);
	sw = (struct store_label_sweep){.kind = STORE_LABELS_DELETE, .from = &from, .to = "x"};
	ck_assert_int_eq(store_labels_sweep(st, &sw, &ct_op, &touched), CORE_ERR_BAD_REQUEST);
	free(from.v);
	ct_assert_labels(st, "a", (const char *const[]){"defect", NULL});
	ct_close(st);
}
END_TEST

/* store_secret_get: made once, the same bytes on every read, one per name. */
START_TEST(secret_is_made_once)
{
	struct store *st = ct_open();
	unsigned char a[STORE_SECRET_LEN], b[STORE_SECRET_LEN], c[STORE_SECRET_LEN];
	static const unsigned char zero[STORE_SECRET_LEN];

	ck_assert_int_eq(store_secret_get(st, "agent-token-key", a), CORE_OK);
	ck_assert_int_eq(store_secret_get(st, "agent-token-key", b), CORE_OK);
	ck_assert(memcmp(a, b, sizeof a) == 0);
	ck_assert(memcmp(a, zero, sizeof a) != 0);
	ck_assert_int_eq(store_secret_get(st, "other-key", c), CORE_OK);
	ck_assert(memcmp(a, c, sizeof a) != 0);
	ck_assert_int_eq(store_secret_get(st, "Bad/Name", c), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_secret_get(st, "", c), CORE_ERR_BAD_REQUEST);
	ct_close(st);
}
END_TEST

/* An agent token's writes: the actor's name and payload.actor_epoch on its events. */
START_TEST(actor_epoch_on_events)
{
	struct store *st = ct_open();
	const struct store_actor agent = {.name = "w/agent", .epoch = 7};
	const char *const l1[] = {"x", NULL};
	struct core_strv labels = ct_strv(l1);
	struct core_card *c = ct_create(st, "ae", NULL, NULL), *out = NULL;
	struct core_event *ev;
	int64_t seq = ct_last_seq(st);
	size_t n;

	core_card_free(c);
	ck_assert_int_eq(store_card_labels_set(st, "ae", &labels, &agent, &out), CORE_OK);
	core_card_free(out);
	ck_assert_int_eq(store_card_comment_add(st, "ae", "hi", &ct_bot, &out), CORE_OK);
	core_card_free(out);
	ev = ct_events(st, seq, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(ev[0].actor, "w/agent");
	ct_assert_payload(&ev[0], "{\"labels\":[\"x\"],\"actor_epoch\":7}");
	ck_assert_str_eq(ev[1].actor, "ci-bot");
	ck_assert(!strstr(ev[1].payload ? ev[1].payload : "", "actor_epoch"));
	store_events_free(ev, n);
	/* the claim cycle's events (their payloads written as text on the FS twin) */
	{
		struct store_claim_result r;
		struct core_token tok = {.marker = "am"};

		seq = ct_last_seq(st);
		ck_assert_int_eq(store_card_claim(st, "ae", "am", 60000, &agent, &r), CORE_OK);
		tok.epoch = r.token.epoch;
		core_card_free(r.card);
		ct_move(st, "ae", NULL, "review", NULL, &agent);
		ck_assert_int_eq(store_card_release(st, "ae", &tok, &agent, &out), CORE_OK);
		core_card_free(out);
		ct_move(st, "ae", NULL, "backlog", NULL, &ct_bot);
		ev = ct_events(st, seq, &n);
		ck_assert_uint_eq(n, 4);
		ct_assert_payload(&ev[0], "{\"marker\":\"am\",\"epoch\":%lld,\"actor_epoch\":7}",
				  (long long)tok.epoch);
		ck_assert(strstr(ev[0].payload, "\"actor_epoch\":7}") != NULL); /* last */
		ct_assert_payload(&ev[1], "{\"from\":\"%s\",\"to\":\"review\",\"actor_epoch\":7}",
				  "inbox");
		ct_assert_payload(&ev[2], "{\"marker\":\"am\",\"epoch\":%lld,\"actor_epoch\":7}",
				  (long long)tok.epoch);
		ct_assert_payload(&ev[3], "{\"from\":\"review\",\"to\":\"backlog\"}");
		store_events_free(ev, n);
	}
	free(labels.v);
	ct_close(st);
}
END_TEST

void conformance_add_admin(Suite *s)
{
	TCase *tc = tcase_create("admin");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, column_rename_moves_cards_as_machine);
	tcase_add_test(tc, column_rename_roles_and_refusals);
	tcase_add_test(tc, label_sweeps);
	suite_add_tcase(s, tc);
	tc = tcase_create("agent");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, secret_is_made_once);
	tcase_add_test(tc, actor_epoch_on_events);
	suite_add_tcase(s, tc);
}
