/* Conformance: card CRUD, lists and cursors, labels, comments, events, boards. */
#include "tests/store/conformance.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *ev_type(const struct core_event *e)
{
	return core_event_type_name(e->type);
}

START_TEST(create_defaults)
{
	struct store *st = ct_open();
	struct store_card_create in = {.title = "first"};
	struct core_card *c = NULL;
	struct core_event *ev;
	size_t n;

	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	ck_assert(core_id_valid(c->id));
	ck_assert_str_eq(c->board, "default");
	ck_assert_str_eq(c->state, "inbox"); /* the board's first column */
	ck_assert_str_eq(c->title, "first");
	ck_assert_str_eq(c->body, "");
	ck_assert(!c->claim.present);
	ck_assert(c->has_epoch);
	ck_assert_int_eq(c->claim_epoch, 0);
	ck_assert_int_eq(c->created_at, CT_T0);
	ck_assert_int_eq(c->updated_at, CT_T0);
	ck_assert_int_eq(c->state_at, CT_T0);
	ck_assert_ptr_null(c->last_run_id);
	ck_assert(!c->gave_up.set);

	ev = ct_events(st, 0, &n);
	ck_assert_uint_ge(n, 1);
	ck_assert_str_eq(ev_type(&ev[n - 1]), "card_created");
	ck_assert_str_eq(ev[n - 1].card_id, c->id);
	ck_assert_str_eq(ev[n - 1].actor, "ci-bot");
	ct_assert_payload(&ev[n - 1], "{\"state\":\"inbox\"}");
	ck_assert(!ev[n - 1].machine);
	store_events_free(ev, n);

	/* Generated ids are unique. */
	{
		struct core_card *d = NULL;
		ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &d), CORE_OK);
		ck_assert_str_ne(c->id, d->id);
		core_card_free(d);
	}
	core_card_free(c);
	ct_close(st);
}
END_TEST

START_TEST(create_rejects)
{
	struct store *st = ct_open();
	const char *const dup_labels[] = {"b", "a", "b", NULL};
	struct core_strv labels = ct_strv(dup_labels);
	struct store_card_create in = {.id = "c1", .labels = &labels, .state = "ready"};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "ready");
	ck_assert_uint_eq(c->labels.n, 2); /* set semantics, order kept */
	ck_assert_str_eq(c->labels.v[0], "b");
	ck_assert_str_eq(c->labels.v[1], "a");
	core_card_free(c);
	c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_ERR_ALREADY_EXISTS);
	ck_assert_ptr_null(c);
	in.id = "c2";
	in.state = "nope";
	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_ERR_TRANSITION_REJECTED);
	in.state = NULL;
	in.board = "elsewhere";
	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_ERR_NOT_FOUND);
	in.board = NULL;
	in.id = "bad id";
	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_ERR_BAD_REQUEST);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(store_card_get(st, "c2", &c), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_card_get(st, "bad id", &c), CORE_ERR_BAD_REQUEST);
	ck_assert_ptr_null(c);
	free(labels.v);
	ct_close(st);
}
END_TEST

/* Lists id order of a page into buf ("a,b,c"). */
static char *page(struct store *st, struct store_card_filter *f, char **next)
{
	struct core_card **v = NULL;
	size_t n = 0, i;
	static char buf[512];

	ck_assert_int_eq(store_card_list(st, f, &v, &n, next), CORE_OK);
	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		if (i)
			strcat(buf, ",");
		strcat(buf, v[i]->id);
	}
	store_cards_free(v, n);
	return buf;
}

START_TEST(list_order_cursor_filters)
{
	struct store *st = ct_open();
	struct store_card_filter f = {.claimed = -1, .limit = 2};
	const char *const l1[] = {"x", NULL};
	struct core_strv lx = ct_strv(l1);
	struct core_card *c = NULL;
	char *next = NULL, *n2 = NULL;
	const char *ids[] = {"k5", "k1", "k4", "k2", "k3"};
	size_t i;

	/* Creation order, not id order. */
	for (i = 0; i < 5; i++) {
		ct_now += 10;
		core_card_free(ct_create(st, ids[i], i % 2 ? "ready" : NULL, NULL));
	}
	ck_assert_str_eq(page(st, &f, &next), "k5,k1");
	ck_assert_ptr_nonnull(next);
	/* The cursor survives deleting the card it points at. */
	ck_assert_int_eq(store_card_delete(st, "k1", &ct_op), CORE_OK);
	f.after = next;
	ck_assert_str_eq(page(st, &f, &n2), "k4,k2");
	ck_assert_ptr_nonnull(n2);
	free(next);
	f.after = n2;
	ck_assert_str_eq(page(st, &f, &next), "k3");
	ck_assert_ptr_null(next); /* the end */
	free(n2);

	f.after = NULL;
	f.limit = 100;
	f.state = "ready";
	ck_assert_str_eq(page(st, &f, &next), "k2");
	f.state = NULL;
	ck_assert_int_eq(store_card_labels_set(st, "k4", &lx, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	f.label = "x";
	ck_assert_str_eq(page(st, &f, &next), "k4");
	f.label = NULL;
	ct_claim(st, "k3", "w1");
	f.claimed = 1;
	ck_assert_str_eq(page(st, &f, &next), "k3");
	f.claimed = 0;
	ck_assert_str_eq(page(st, &f, &next), "k5,k4,k2");
	f.claimed = -1;
	f.board = "other";
	ck_assert_str_eq(page(st, &f, &next), "");
	f.board = NULL;
	{
		const char *const only[] = {"other", NULL};
		f.boards = only;
		ck_assert_str_eq(page(st, &f, &next), "");
		f.boards = NULL;
	}

	/* Limits are 1..1000 and a cursor must be one of ours. */
	{
		struct core_card **v = NULL;
		size_t n = 0;
		f.limit = 0;
		ck_assert_int_eq(store_card_list(st, &f, &v, &n, &next), CORE_ERR_BAD_REQUEST);
		f.limit = 1001;
		ck_assert_int_eq(store_card_list(st, &f, &v, &n, &next), CORE_ERR_BAD_REQUEST);
		f.limit = 10;
		f.after = "not-a-cursor";
		ck_assert_int_eq(store_card_list(st, &f, &v, &n, &next), CORE_ERR_BAD_REQUEST);
		ck_assert_ptr_null(v);
	}
	free(lx.v);
	ct_close(st);
}
END_TEST

START_TEST(patch_fields_and_event)
{
	struct store *st = ct_open();
	struct store_card_patch p = {.title = "T2", .body = "B2"};
	struct core_card *c = ct_create(st, "p1", "ready", NULL), *after = NULL;
	struct core_event *ev;
	size_t n;

	core_card_free(c);
	ct_now += 5;
	ck_assert_int_eq(store_card_patch(st, "p1", &p, &ct_bot, &after), CORE_OK);
	ck_assert_str_eq(after->title, "T2");
	ck_assert_str_eq(after->body, "B2");
	ck_assert_int_eq(after->updated_at, CT_T0 + 5);
	ck_assert_int_eq(after->state_at, CT_T0); /* not a state write */
	core_card_free(after);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(ev_type(&ev[n - 1]), "card_updated");
	ct_assert_payload(&ev[n - 1], "{\"fields\":[\"title\",\"body\"]}");
	store_events_free(ev, n);
	ck_assert_int_eq(store_card_patch(st, "nope", &p, &ct_bot, &after), CORE_ERR_NOT_FOUND);
	ck_assert_ptr_null(after);
	ct_close(st);
}
END_TEST

START_TEST(ordinary_writes_keep_claim)
{
	struct store *st = ct_open();
	const char *const l[] = {"lbl", NULL};
	struct core_strv labels = ct_strv(l);
	struct store_card_patch p = {.title = "new"};
	struct core_card *before, *c = NULL;

	core_card_free(ct_create(st, "o1", "ready", NULL));
	ct_claim(st, "o1", "w1");
	before = ct_get(st, "o1");
	ct_now += 1000;
	ck_assert_int_eq(store_card_patch(st, "o1", &p, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_labels_set(st, "o1", &labels, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_comment_add(st, "o1", "hi", &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_set_state_from(st, "o1", "ready", "review", NULL, &ct_bot, &c),
			 CORE_OK);
	ck_assert(c->claim.present);
	ck_assert_str_eq(c->claim.marker, before->claim.marker);
	ck_assert_int_eq(c->claim.claimed_at, before->claim.claimed_at);
	ck_assert_int_eq(c->claim.lease_until, before->claim.lease_until);
	ck_assert_int_eq(c->claim.lease_ms, before->claim.lease_ms);
	ck_assert_int_eq(c->claim_epoch, before->claim_epoch);
	ck_assert(c->has_epoch);
	core_card_free(c);
	core_card_free(before);
	free(labels.v);
	ct_close(st);
}
END_TEST

START_TEST(delete_card)
{
	struct store *st = ct_open();
	struct core_card *c = NULL;
	struct core_event *ev;
	size_t n;

	core_card_free(ct_create(st, "d1", NULL, NULL));
	ck_assert_int_eq(store_card_delete(st, "d1", &ct_op), CORE_OK);
	ck_assert_int_eq(store_card_get(st, "d1", &c), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_card_delete(st, "d1", &ct_op), CORE_ERR_NOT_FOUND);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(ev_type(&ev[n - 1]), "card_deleted");
	ck_assert_str_eq(ev[n - 1].card_id, "d1");
	ck_assert_str_eq(ev[n - 1].actor, "alice");
	store_events_free(ev, n);
	/* The id is free again. */
	core_card_free(ct_create(st, "d1", NULL, NULL));
	ct_close(st);
}
END_TEST

START_TEST(labels_set_adjust_count)
{
	struct store *st = ct_open();
	const char *const s1[] = {"a", "b", "a", NULL}, *const add[] = {"c", "a", NULL},
			  *const rm[] = {"b", NULL}, *const bad[] = {"has space", NULL};
	struct core_strv v1 = ct_strv(s1), va = ct_strv(add), vr = ct_strv(rm), vb = ct_strv(bad);
	struct core_card *c = NULL;
	json_t *counts = NULL;
	int64_t seq;

	core_card_free(ct_create(st, "l1", NULL, NULL));
	core_card_free(ct_create(st, "l2", NULL, NULL));
	ck_assert_int_eq(store_card_labels_set(st, "l1", &v1, &ct_bot, &c), CORE_OK);
	ck_assert_uint_eq(c->labels.n, 2);
	core_card_free(c);
	seq = ct_last_seq(st);
	/* Same set again: no change, no event. */
	ck_assert_int_eq(store_card_labels_set(st, "l1", &v1, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(ct_last_seq(st), seq);
	ck_assert_int_eq(store_card_labels_adjust(st, "l1", &va, &vr, &ct_bot, &c), CORE_OK);
	ck_assert_uint_eq(c->labels.n, 2);
	ck_assert_str_eq(c->labels.v[0], "a");
	ck_assert_str_eq(c->labels.v[1], "c");
	core_card_free(c);
	{
		size_t n;
		struct core_event *ev = ct_events(st, seq, &n);
		ck_assert_uint_eq(n, 1);
		ck_assert_str_eq(ev_type(&ev[0]), "card_labels_changed");
		ct_assert_payload(&ev[0], "{\"labels\":[\"a\",\"c\"]}");
		store_events_free(ev, n);
	}
	ck_assert_int_eq(store_card_labels_set(st, "l1", &vb, &ct_bot, &c), CORE_ERR_BAD_REQUEST);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(store_card_labels_set(st, "l2", &va, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_labels_count(st, NULL, NULL, &counts), CORE_OK);
	ck_assert_int_eq(json_integer_value(json_object_get(counts, "a")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(counts, "c")), 2);
	ck_assert_ptr_null(json_object_get(counts, "b"));
	json_decref(counts);
	ck_assert_int_eq(store_labels_count(st, "other", NULL, &counts), CORE_OK);
	ck_assert_uint_eq(json_object_size(counts), 0);
	json_decref(counts);
	free(v1.v);
	free(va.v);
	free(vr.v);
	free(vb.v);
	ct_close(st);
}
END_TEST

START_TEST(comments)
{
	struct store *st = ct_open();
	struct core_card *c = NULL;
	struct core_event *ev;
	size_t n;

	core_card_free(ct_create(st, "m1", NULL, NULL));
	ct_now += 7;
	ck_assert_int_eq(store_card_comment_add(st, "m1", "one", &ct_op, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_comment_add(st, "m1", "two", &ct_bot, &c), CORE_OK);
	ck_assert_uint_eq(c->n_comments, 2);
	ck_assert_str_eq(c->comments[0].id, "cm-1");
	ck_assert_str_eq(c->comments[0].author, "alice");
	ck_assert_str_eq(c->comments[0].body, "one");
	ck_assert_int_eq(c->comments[0].created_at, CT_T0 + 7);
	ck_assert_str_eq(c->comments[1].id, "cm-2");
	ck_assert_str_eq(c->comments[1].author, "ci-bot");
	core_card_free(c);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(ev_type(&ev[n - 1]), "card_comment_added");
	ct_assert_payload(&ev[n - 1], "{\"comment_id\":\"cm-2\"}");
	store_events_free(ev, n);
	ck_assert_int_eq(store_card_comment_add(st, "zz", "x", &ct_op, &c), CORE_ERR_NOT_FOUND);
	ct_close(st);
}
END_TEST

START_TEST(events_order_and_filters)
{
	struct store *st = ct_open();
	struct core_board b = {0};
	struct store_card_create in = {.id = "e2", .board = "b2"};
	struct core_card *c = NULL;
	struct core_event *ev = NULL;
	size_t n, i;
	int64_t next, first, ep;

	ck_assert_int_eq(core_board_init_default(&b, "b2"), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	core_board_release(&b);
	first = ct_last_seq(st);
	core_card_free(ct_create(st, "e1", NULL, NULL));
	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ep = ct_claim(st, "e1", "w1");

	ev = ct_events(st, 0, &n);
	for (i = 1; i < n; i++)
		ck_assert_int_gt(ev[i].seq, ev[i - 1].seq); /* strictly monotone, oldest first */
	store_events_free(ev, n);

	ck_assert_int_eq(store_events_list(st, "b2", NULL, first, 100, 0, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ev[0].card_id, "e2");
	store_events_free(ev, n);
	{
		const char *const only[] = {"default", NULL};
		ck_assert_int_eq(store_events_list(st, NULL, only, first, 100, 0, &ev, &n, &next),
				 CORE_OK);
		ck_assert_uint_eq(n, 2);
		ck_assert_str_eq(ev_type(&ev[0]), "card_created");
		ck_assert_str_eq(ev_type(&ev[1]), "card_claimed");
		ct_assert_payload(&ev[1], "{\"marker\":\"w1\",\"epoch\":%lld}", (long long)ep);
		store_events_free(ev, n);
	}
	/* Paging: limit 1 then resume from next. */
	ck_assert_int_eq(store_events_list(st, NULL, NULL, first, 1, 0, &ev, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(next, ev[0].seq);
	store_events_free(ev, n);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, next, 1000, 0, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 2);
	store_events_free(ev, n);
	/* Nothing newer: empty, next stays put. */
	ck_assert_int_eq(store_events_list(st, NULL, NULL, next, 10, 0, &ev, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(next, ct_last_seq(st));
	store_events_free(ev, n);
	ct_close(st);
}
END_TEST

struct poke {
	struct store *st;
	int done;
};

static void *late_writer(void *arg)
{
	struct poke *p = arg;
	struct store_card_create in = {.id = "late"};
	struct core_card *c = NULL;

	p->done = store_card_create(p->st, &in, &ct_bot, &c) == CORE_OK;
	core_card_free(c);
	return NULL;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(events_long_poll)
{
	struct store *st = ct_open();
	struct poke p = {.st = st};
	struct core_event *ev = NULL;
	pthread_t th;
	size_t n;
	int64_t next, t0, after = ct_last_seq(st);

	/* Nothing arrives: returns empty after about wait_ms, not at once. */
	t0 = mono_ms();
	ck_assert_int_eq(store_events_list(st, NULL, NULL, after, 10, 150, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_ge(mono_ms() - t0, 140);
	store_events_free(ev, n);

	/* A write from another thread wakes the poller well before its deadline. */
	ck_assert_int_eq(pthread_create(&th, NULL, late_writer, &p), 0);
	t0 = mono_ms();
	ck_assert_int_eq(store_events_list(st, NULL, NULL, after, 10, 20000, &ev, &n, &next),
			 CORE_OK);
	ck_assert_int_lt(mono_ms() - t0, 10000);
	pthread_join(th, NULL);
	ck_assert(p.done);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ev[0].card_id, "late");
	store_events_free(ev, n);
	ct_close(st);
}
END_TEST

START_TEST(boards_put_get_list)
{
	struct store *st = ct_open();
	struct core_board b = {0}, got = {0}, *all = NULL;
	struct core_card *c = NULL;
	size_t n;

	ck_assert_int_eq(store_board_get(st, "default", &got), CORE_OK);
	ck_assert_uint_eq(got.n_cols, 9);
	ck_assert_str_eq(got.completed, "done");
	core_board_release(&got);
	ck_assert_int_eq(store_board_get(st, "nope", &got), CORE_ERR_NOT_FOUND);

	ck_assert_int_eq(core_board_init_default(&b, "team"), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	ck_assert_int_eq(store_board_list(st, &all, &n), CORE_OK);
	ck_assert_uint_eq(n, 2);
	store_boards_free(all, n);

	/* A column still holding a card cannot be dropped. */
	{
		struct store_card_create in = {.id = "t1", .board = "team", .state = "review"};
		ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
		core_card_free(c);
	}
	free(b.cols[6].name); /* review */
	memmove(&b.cols[6], &b.cols[7], 2 * sizeof(b.cols[0]));
	b.n_cols--;
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_ERR_TRANSITION_REJECTED);
	ck_assert_int_eq(store_card_delete(st, "t1", &ct_op), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	ck_assert_int_eq(store_board_get(st, "team", &got), CORE_OK);
	ck_assert_uint_eq(got.n_cols, 8);
	ck_assert_ptr_null(core_board_column(&got, "review"));
	core_board_release(&got);

	/* An invalid config is refused. */
	free(b.completed);
	b.completed = strdup("ready");
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_ERR_BAD_REQUEST);
	core_board_release(&b);
	ct_close(st);
}
END_TEST

void conformance_add_cards(Suite *s)
{
	TCase *tc = tcase_create("cards");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, create_defaults);
	tcase_add_test(tc, create_rejects);
	tcase_add_test(tc, list_order_cursor_filters);
	tcase_add_test(tc, patch_fields_and_event);
	tcase_add_test(tc, ordinary_writes_keep_claim);
	tcase_add_test(tc, delete_card);
	tcase_add_test(tc, labels_set_adjust_count);
	tcase_add_test(tc, comments);
	tcase_add_test(tc, events_order_and_filters);
	tcase_add_test(tc, events_long_poll);
	tcase_add_test(tc, boards_put_get_list);
	suite_add_tcase(s, tc);
}
