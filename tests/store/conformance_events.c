/* Conformance: each board's own event sequence (DESIGN §11) — board_seq 1, 2, 3 ... without
 * gaps per board whatever the other boards write, read off store_events_list_board with its
 * own cursor, and the board's view in what a webhook subscriber gets. */
#include "tests/store/conformance.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void board_add(struct store *st, const char *name)
{
	struct core_board b = {0};

	ck_assert_int_eq(core_board_init_default(&b, name), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	core_board_release(&b);
}

static void card_on(struct store *st, const char *board, const char *id)
{
	struct store_card_create in = {.id = id, .board = board, .title = id};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	core_card_free(c);
}

static void card_retitle(struct store *st, const char *id, const char *title)
{
	struct store_card_patch p = {.title = title};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_patch(st, id, &p, &ct_bot, &c), CORE_OK);
	core_card_free(c);
}

/* Asserts board's events are exactly board_seq 1..n, each of that board, and returns n. */
static int64_t assert_gap_free(struct store *st, const char *board)
{
	struct core_event *ev = NULL;
	size_t n = 0, i;
	int64_t next = 0, want = 1, prev_seq = 0;

	ck_assert_int_eq(store_events_list_board(st, board, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	for (i = 0; i < n; i++, want++) {
		ck_assert_str_eq(ev[i].board, board);
		ck_assert_msg(ev[i].board_seq == want, "board %s: event %zu has board_seq %lld, "
			      "want %lld", board, i, (long long)ev[i].board_seq, (long long)want);
		ck_assert_int_gt(ev[i].seq, prev_seq); /* the global order agrees */
		prev_seq = ev[i].seq;
	}
	ck_assert_int_eq(next, (int64_t)n);
	store_events_free(ev, n);
	return (int64_t)n;
}

START_TEST(test_board_seq_interleaved)
{
	struct store *st = ct_open();
	struct core_event *ev = NULL, *again = NULL;
	size_t n = 0, n2 = 0, i, k;
	int64_t next = 0, next2 = 0, na, nb;
	char id[32];

	board_add(st, "b.2"); /* a dot: the Mongo counter field escapes it */
	for (i = 0; i < 10; i++) {
		snprintf(id, sizeof id, "a%zu", i);
		card_on(st, "default", id);
		snprintf(id, sizeof id, "b%zu", i);
		card_on(st, "b.2", id);
		snprintf(id, sizeof id, "a%zu", i);
		card_retitle(st, id, "renamed");
	}
	/* Deleting cards takes nothing back: the sequence is the board's. */
	ck_assert_int_eq(store_card_delete(st, "a3", &ct_op), CORE_OK);
	ck_assert_int_eq(store_card_delete(st, "b3", &ct_op), CORE_OK);
	card_on(st, "default", "a3");
	na = assert_gap_free(st, "default");
	nb = assert_gap_free(st, "b.2");
	ck_assert_int_ge(na, 22); /* 10 creates, 10 retitles, a delete, a create */
	ck_assert_int_ge(nb, 12);

	/* The global tail carries the same board_seq on every event. */
	ev = ct_events(st, 0, &n);
	for (i = 0, k = 0; i < n; i++)
		if (strcmp(ev[i].board, "b.2") == 0)
			ck_assert_int_eq(ev[i].board_seq, (int64_t)++k);
	ck_assert_int_eq((int64_t)k, nb);
	store_events_free(ev, n);

	/* A page after a board_seq, and its cursor. */
	ck_assert_int_eq(store_events_list_board(st, "default", 5, 3, 0, &ev, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(ev[0].board_seq, 6);
	ck_assert_int_eq(ev[2].board_seq, 8);
	ck_assert_int_eq(next, 8);
	store_events_free(ev, n);
	ck_assert_int_eq(store_events_list_board(st, "default", na, 10, 0, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(next, na);
	store_events_free(ev, n);
	ck_assert_int_eq(store_events_list_board(st, "nosuch", 0, 10, 0, &ev, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(next, 0);
	store_events_free(ev, n);

	/* What board default's reader sees does not move when b2 is busy. */
	ck_assert_int_eq(store_events_list_board(st, "default", 10, 1000, 0, &ev, &n, &next),
			 CORE_OK);
	for (i = 0; i < 7; i++) {
		snprintf(id, sizeof id, "busy%zu", i);
		card_on(st, "b.2", id);
	}
	ck_assert_int_eq(store_events_list_board(st, "default", 10, 1000, 0, &again, &n2, &next2),
			 CORE_OK);
	ck_assert_uint_eq(n2, n);
	ck_assert_int_eq(next2, next);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(again[i].board_seq, ev[i].board_seq);
		ck_assert_int_eq(again[i].seq, ev[i].seq);
	}
	store_events_free(again, n2);
	store_events_free(ev, n);
	card_on(st, "default", "after-busy");
	ck_assert_int_eq(store_events_list_board(st, "default", na, 10, 0, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(ev[0].board_seq, na + 1); /* b2's seven changed nothing here */
	store_events_free(ev, n);
	ck_assert_int_eq(assert_gap_free(st, "b.2"), nb + 7);

	/* Bad arguments change nothing. */
	ck_assert_int_eq(store_events_list_board(st, NULL, 0, 10, 0, &ev, &n, &next),
			 CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_events_list_board(st, "a b", 0, 10, 0, &ev, &n, &next),
			 CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_events_list_board(st, "default", -1, 10, 0, &ev, &n, &next),
			 CORE_ERR_BAD_REQUEST);
	ct_close(st);
}
END_TEST

#define BSEQ_THREADS 4
#define BSEQ_CARDS 20

struct bseq_worker {
	struct store *st;
	const char *board;
	int no;
	pthread_barrier_t *go;
	enum core_rc rc;
};

static void *bseq_main(void *arg)
{
	struct bseq_worker *w = arg;
	struct store_card_create in = {.board = w->board, .title = "t"};
	char id[32];
	int i;

	pthread_barrier_wait(w->go);
	for (i = 0; i < BSEQ_CARDS && w->rc == CORE_OK; i++) {
		struct core_card *c = NULL;

		snprintf(id, sizeof id, "w%d-%d", w->no, i);
		in.id = id;
		w->rc = store_card_create(w->st, &in, &ct_bot, &c);
		core_card_free(c);
	}
	return NULL;
}

/* Under concurrency on a Mongo server: every event of the board once, board_seqs strictly
 * increasing; returns how many. (Read with a wait: a hole is stepped over after the gap
 * grace. mongo-java-server on a loaded machine has been seen to leave one: its findAndModify
 * then hands one number to two writers and none to a third, and the global seq shows the
 * same hole; MongoDB's is atomic.) */
static int64_t assert_unique(struct store *st, const char *board, int64_t want)
{
	struct core_event *ev = NULL;
	size_t n = 0, i;
	int64_t next = 0, after = 0, prev = 0, got = 0;
	int rounds;

	for (rounds = 0; rounds < 20 && got < want; rounds++, after = next) {
		ck_assert_int_eq(store_events_list_board(st, board, after, 1000, 500, &ev, &n,
							 &next), CORE_OK);
		for (i = 0; i < n; i++, got++) {
			ck_assert_str_eq(ev[i].board, board);
			ck_assert_int_gt(ev[i].board_seq, prev);
			prev = ev[i].board_seq;
		}
		store_events_free(ev, n);
	}
	return got;
}

START_TEST(test_board_seq_concurrent)
{
	struct store *st;
	struct bseq_worker w[BSEQ_THREADS];
	pthread_t th[BSEQ_THREADS];
	pthread_barrier_t go;
	const char *why = NULL;
	int64_t a0, b0;
	int i;

	if (ct_atomic && !ct_atomic(&why)) {
		fprintf(stderr, "board_seq_concurrent: skipped: %s\n", why);
		return;
	}
	st = ct_open();
	board_add(st, "b2");
	a0 = assert_gap_free(st, "default");
	b0 = assert_gap_free(st, "b2");
	pthread_barrier_init(&go, NULL, BSEQ_THREADS);
	for (i = 0; i < BSEQ_THREADS; i++) {
		w[i] = (struct bseq_worker){st, i % 2 ? "b2" : "default", i, &go, CORE_OK};
		ck_assert_int_eq(pthread_create(&th[i], NULL, bseq_main, &w[i]), 0);
	}
	for (i = 0; i < BSEQ_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (i = 0; i < BSEQ_THREADS; i++)
		ck_assert_msg(w[i].rc == CORE_OK, "worker %d: %s", i, core_rc_code(w[i].rc));
	/* Gap-free where the store serialises the writes (FS). On a Mongo server that also takes
	 * the server's findAndModify to be atomic (MongoDB's is; mongo-java-server's, on a loaded
	 * machine, was seen not to be): there, every event once, in increasing board_seq. */
	if (!ct_atomic) {
		ck_assert_int_eq(assert_gap_free(st, "default"), a0 + BSEQ_CARDS * BSEQ_THREADS / 2);
		ck_assert_int_eq(assert_gap_free(st, "b2"), b0 + BSEQ_CARDS * BSEQ_THREADS / 2);
	} else {
		ck_assert_int_eq(assert_unique(st, "default", a0 + BSEQ_CARDS * BSEQ_THREADS / 2),
				 a0 + BSEQ_CARDS * BSEQ_THREADS / 2);
		ck_assert_int_eq(assert_unique(st, "b2", b0 + BSEQ_CARDS * BSEQ_THREADS / 2),
				 b0 + BSEQ_CARDS * BSEQ_THREADS / 2);
	}
	ct_close(st);
}
END_TEST

/* A subscriber is one board's: its webhook-id and body carry that board's board_seq. */
START_TEST(test_board_seq_webhook)
{
	struct store *st = ct_open();
	struct store_sub in = {.board = "b2", .name = "hook", .url = "http://127.0.0.1:9/hook",
			       .enabled = true};
	struct store_delivery_filter f = {.board = "b2", .status = -1, .limit = 1000};
	struct store_delivery **v = NULL;
	struct store_sub *out = NULL;
	struct core_event *ev = NULL;
	size_t n = 0, ne = 0, i;
	int64_t next = 0;
	bool created = false;
	char want[64], seq[64];

	board_add(st, "b2");
	ck_assert_int_eq(store_sub_put(st, &in, "whsec_c2VjcmV0", &created, &out), CORE_OK);
	store_sub_free(out);
	for (i = 0; i < 5; i++) { /* traffic elsewhere first */
		snprintf(want, sizeof want, "x%zu", i);
		card_on(st, "default", want);
	}
	card_on(st, "b2", "hooked");
	ck_assert_int_eq(store_events_list_board(st, "b2", 0, 1000, 0, &ev, &ne, &next), CORE_OK);
	ck_assert_uint_ge(ne, 1);
	ck_assert_str_eq(ev[ne - 1].card_id, "hooked");
	ck_assert_int_eq(store_delivery_list(st, &f, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(v[0]->event_seq, ev[ne - 1].board_seq);
	snprintf(want, sizeof want, "b2:%lld.hook", (long long)ev[ne - 1].board_seq);
	ck_assert_str_eq(v[0]->id, want);
	snprintf(seq, sizeof seq, "\"seq\":%lld,", (long long)ev[ne - 1].board_seq);
	ck_assert_msg(strstr(v[0]->body, seq), "body %s lacks %s", v[0]->body, seq);
	ck_assert_int_ne(ev[ne - 1].seq, ev[ne - 1].board_seq); /* the test means something */
	store_deliveries_free(v, n);
	store_events_free(ev, ne);
	ct_close(st);
}
END_TEST

void conformance_add_events(Suite *s)
{
	TCase *tc = tcase_create("board_seq");

	tcase_add_test(tc, test_board_seq_interleaved);
	tcase_add_test(tc, test_board_seq_concurrent);
	tcase_add_test(tc, test_board_seq_webhook);
	suite_add_tcase(s, tc);
}
