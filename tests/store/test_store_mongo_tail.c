/* The Mongo twin's background readers: the waiting tail (store/mongo/mongo_tail.c) — what
 * an idle long-poll asks the database, the wake-up by this process's own writes, another
 * replica's events reaching a waiting tail — and the deliverers' lease (mongo_deliveries.c), which
 * an idle replica no longer queries on every poll. Reads are counted through the store's
 * test_read hook ("tail": a query of `events`, "probe": a read of the events counter by _id,
 * "lease": a query of due deliveries). */
#include "tests/store/sub_fixture.h"
#include "tests/store/test_store_mongo.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reads {
	atomic_int tail, probe, lease;
};

static void count_read(void *ctx, const char *what)
{
	struct reads *r = ctx;

	if (strcmp(what, "tail") == 0)
		atomic_fetch_add(&r->tail, 1);
	else if (strcmp(what, "probe") == 0)
		atomic_fetch_add(&r->probe, 1);
	else if (strcmp(what, "lease") == 0)
		atomic_fetch_add(&r->lease, 1);
}

static struct store *open_counted(const char *db, struct reads *r)
{
	struct store_mongo_options o = {.test_read = count_read, .test_ctx = r};

	return open_db_opts(db, &o, NULL);
}

/* The newest seq (board NULL) or board_seq of the store's tail. */
static int64_t tail_top(struct store *st, const char *board)
{
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t next = 0, after = 0;

	for (;;) {
		if (board)
			ck_assert_int_eq(store_events_list_board(st, board, after, 1000, 0, &ev, &n,
								 &next),
					 CORE_OK);
		else
			ck_assert_int_eq(store_events_list(st, NULL, NULL, after, 1000, 0, &ev, &n,
							   &next),
					 CORE_OK);
		store_events_free(ev, n);
		ev = NULL;
		if (n == 0 || next <= after)
			return next > after ? next : after;
		after = next;
	}
}

/* An idle long-poll queries `events` once, then reads only the counter until its wait ends
 * (it used to query `events` every 100 ms: on FerretDB a scan and sort of the collection). */
START_TEST(idle_tail_reads_the_counter_not_events)
{
	struct reads r = {0};
	char db[64];
	struct store *st;
	struct core_event *ev = NULL;
	size_t n = 9;
	int64_t top, next = 0;

	db_name_new(db, sizeof db);
	st = open_counted(db, &r);
	create(st, "c1", "ready");
	top = tail_top(st, NULL);
	atomic_store(&r.tail, 0);
	atomic_store(&r.probe, 0);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, top, 100, 1500, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(next, top);
	store_events_free(ev, n);
	ck_assert_int_le(atomic_load(&r.tail), 1); /* within MGO_TAIL_FULL_MS: the first only */
	ck_assert_int_ge(atomic_load(&r.probe), 1);
	/* One board's tail the same way, on that board's counter. */
	top = tail_top(st, "default");
	atomic_store(&r.tail, 0);
	ck_assert_int_eq(store_events_list_board(st, "default", top, 100, 1500, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 0);
	store_events_free(ev, n);
	ck_assert_int_le(atomic_load(&r.tail), 1);
	close_db(st);
}
END_TEST

/* Back-to-back waits from the same place (the claim-next waker's slices, the stream hub's)
 * start with the counter while the last query found nothing and no write came since. */
START_TEST(back_to_back_waits_share_the_last_query)
{
	struct reads r = {0};
	char db[64];
	struct store *st;
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t top, next = 0;
	int i;

	db_name_new(db, sizeof db);
	st = open_counted(db, &r);
	create(st, "c1", "ready");
	top = tail_top(st, NULL);
	atomic_store(&r.tail, 0);
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(store_events_list(st, NULL, NULL, top, 100, 250, &ev, &n, &next),
				 CORE_OK);
		ck_assert_uint_eq(n, 0);
		store_events_free(ev, n);
		ev = NULL;
	}
	/* 6 x 250 ms: one query, a second only past MGO_TAIL_FULL_MS (60 s);
	 * each call queried on its own before (18 queries at one per 100 ms). */
	ck_assert_int_le(atomic_load(&r.tail), 2);
	/* A write of this process ends the sharing: the next wait reads it at once. */
	create(st, "c2", "ready");
	ck_assert_int_eq(store_events_list(st, NULL, NULL, top, 100, 250, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_ge(n, 1);
	ck_assert_str_eq(ev[0].card_id, "c2");
	store_events_free(ev, n);
	close_db(st);
}
END_TEST

struct waiter {
	struct store *st;
	int64_t after, wait_ms;
	struct core_event *ev;
	size_t n;
	enum core_rc rc;
};

static void *wait_main(void *arg)
{
	struct waiter *w = arg;
	int64_t next = 0;

	w->rc = store_events_list(w->st, NULL, NULL, w->after, 100, w->wait_ms, &w->ev, &w->n,
				  &next);
	return NULL;
}

/* Blocks until the store's waiting tail made its first read: a query, or the counter when
 * the last query (tail_top's) found nothing a moment ago. */
static void await_first_read(struct reads *r)
{
	int i;

	for (i = 0; i < 2000 && atomic_load(&r->tail) + atomic_load(&r->probe) < 1; i++)
		nap_ms(5);
	ck_assert_int_ge(atomic_load(&r->tail) + atomic_load(&r->probe), 1);
}

/* With naps far longer than the wait (BOARDD_TEST_MONGO_TAIL_NAP_MS), only the wake-up by
 * this process's own write can bring its event to the waiting tail before the wait ends. */
START_TEST(own_write_wakes_a_waiting_tail)
{
	struct reads r = {0};
	char db[64];
	struct store *st;
	struct waiter w = {.wait_ms = 20000};
	pthread_t th;

	db_name_new(db, sizeof db);
	setenv("BOARDD_TEST_MONGO_TAIL_NAP_MS", "600000", 1);
	st = open_counted(db, &r);
	unsetenv("BOARDD_TEST_MONGO_TAIL_NAP_MS");
	create(st, "c1", "ready");
	w.st = st;
	w.after = tail_top(st, NULL);
	atomic_store(&r.tail, 0);
	atomic_store(&r.probe, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, wait_main, &w), 0);
	await_first_read(&r);
	create(st, "c2", "ready"); /* its insert comes round trips after the tail's read */
	pthread_join(th, NULL);
	ck_assert_int_eq(w.rc, CORE_OK);
	ck_assert_uint_ge(w.n, 1);
	ck_assert_int_eq(w.ev[0].type, CORE_EV_CARD_CREATED);
	ck_assert_str_eq(w.ev[0].card_id, "c2");
	store_events_free(w.ev, w.n);
	close_db(st);
}
END_TEST

/* Another replica's write reaches a waiting tail through the counter (within
 * MGO_TAIL_NAP_MAX_MS on a quiet machine; asserted here only as arriving before the wait
 * ends, and through a probe). */
START_TEST(other_replica_write_reaches_a_waiting_tail)
{
	struct reads r = {0};
	char db[64];
	struct store *a, *b;
	struct waiter w = {.wait_ms = 20000};
	pthread_t th;

	db_name_new(db, sizeof db);
	a = open_counted(db, &r);
	b = open_db(db, 0, NULL);
	create(a, "c1", "ready");
	w.st = a;
	w.after = tail_top(a, NULL);
	atomic_store(&r.tail, 0);
	atomic_store(&r.probe, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, wait_main, &w), 0);
	await_first_read(&r);
	create(b, "c2", "ready");
	pthread_join(th, NULL);
	ck_assert_int_eq(w.rc, CORE_OK);
	ck_assert_uint_ge(w.n, 1);
	ck_assert_str_eq(w.ev[0].card_id, "c2");
	ck_assert_int_ge(atomic_load(&r.probe), 1);
	ck_assert_int_ge(atomic_load(&r.tail), 1);
	store_events_free(w.ev, w.n);
	close_db(b);
	close_db(a);
}
END_TEST

/* Deliverers that found nothing due skip the query for a moment (they poll every 250 ms,
 * two per replica by default; on FerretDB each query scans `deliveries`); a delivery this
 * process enqueues is leased at once, another replica's within MGO_LEASE_QUIET_MS (1 s). */
START_TEST(idle_deliverers_query_once_until_a_delivery_comes)
{
	struct reads r = {0};
	char db[64];
	struct store *a, *b;
	struct store_delivery *d = NULL;
	int i;

	db_name_new(db, sizeof db);
	a = open_counted(db, &r);
	b = open_db(db, 0, NULL);
	fx_subscribe_all(a);
	for (i = 0; i < 5; i++) {
		ck_assert_int_eq(store_delivery_lease(a, "here:0", 60000, &d), CORE_OK);
		ck_assert_ptr_null(d);
	}
	/* One query; a second only if the first outlasted the quiet second (a loaded machine). */
	ck_assert_int_le(atomic_load(&r.lease), 2);
	create(a, "c1", "ready"); /* matches: this process enqueues its delivery */
	ck_assert_int_eq(store_delivery_lease(a, "here:0", 60000, &d), CORE_OK);
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(strstr(d->body, "\"c1\""));
	store_delivery_free(d);
	d = NULL;
	ck_assert_int_eq(store_delivery_lease(a, "here:0", 60000, &d), CORE_OK);
	ck_assert_ptr_null(d); /* nothing else due: the gate closes again */
	create(b, "c2", "ready"); /* another replica's delivery */
	for (i = 0; i < 200 && !d; i++) {
		ck_assert_int_eq(store_delivery_lease(a, "here:0", 60000, &d), CORE_OK);
		if (!d)
			nap_ms(50);
	}
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(strstr(d->body, "\"c2\""));
	store_delivery_free(d);
	close_db(b);
	close_db(a);
}
END_TEST

struct writer {
	struct store *st;
	const char *id;
};

static void *create_main(void *arg)
{
	struct writer *w = arg;

	create(w->st, w->id, "ready");
	return NULL;
}

/* Every event of the tail from after on, in order (after is moved to the end). */
static size_t tail_from(struct store *st, const char *board, int64_t *after,
			struct core_event **ev)
{
	size_t n = 0;
	int64_t next = 0;

	if (board)
		ck_assert_int_eq(store_events_list_board(st, board, *after, 1000, 0, ev, &n, &next),
				 CORE_OK);
	else
		ck_assert_int_eq(store_events_list(st, NULL, NULL, *after, 1000, 0, ev, &n, &next),
				 CORE_OK);
	*after = next;
	return n;
}

/* A writer that stalls past the gap grace between taking its seq and inserting its event (a
 * paused process, a slow network) must not land behind a reader that stepped over the hole:
 * the reader seals the hole, and the writer's late insert moves past it (it used to be
 * stored under its old numbers, so a stream or long-poll already past them never delivered
 * it). board: the reader follows that board's tail (board_seq) instead of the seq tail. */
static void stalled_writer(const char *board)
{
	struct mongo_hold s = {.what = "insert"};
	struct store_mongo_options o = {.test_read = mongo_hold_hook, .test_ctx = &s};
	char db[64];
	struct store *a, *b;
	struct writer w;
	struct core_event *ev = NULL;
	pthread_t th;
	size_t n, i;
	int64_t after, other, at_s2 = 0, at_s1 = 0;
	int k;

	db_name_new(db, sizeof db);
	a = open_db_opts(db, &o, NULL);
	b = open_db(db, 0, NULL);
	create(b, "c0", "ready");
	after = tail_top(b, board);
	other = tail_top(b, board ? NULL : "default"); /* the other tail, from the same point */
	w = (struct writer){.st = a, .id = "s1"};
	mongo_hold_arm(&s);
	ck_assert_int_eq(pthread_create(&th, NULL, create_main, &w), 0);
	mongo_hold_await(&s); /* s1 holds its numbers, not inserted */
	create(b, "s2", "ready");
	/* The reader waits out the hole (up to the grace) and then steps over it. */
	n = tail_from(b, board, &after, &ev);
	for (i = 0; i < n; i++) {
		ck_assert_str_ne(ev[i].card_id, "s1");
		if (strcmp(ev[i].card_id, "s2") == 0)
			at_s2 = board ? ev[i].board_seq : ev[i].seq;
	}
	ck_assert_int_gt(at_s2, 0);
	ck_assert_int_eq(after, at_s2);
	store_events_free(ev, n);
	ev = NULL;
	atomic_store(&s.release, 1);
	pthread_join(th, NULL); /* create asserts its write was acknowledged */
	n = tail_from(b, board, &after, &ev);
	for (i = 0; i < n; i++)
		if (strcmp(ev[i].card_id, "s1") == 0)
			at_s1 = board ? ev[i].board_seq : ev[i].seq;
	ck_assert_msg(at_s1 > at_s2, "s1's event is after the reader's cursor %lld: %lld",
		      (long long)at_s2, (long long)at_s1);
	store_events_free(ev, n);
	ev = NULL;
	/* The other tail, from before both, has each once. */
	n = tail_from(b, board ? NULL : "default", &other, &ev);
	for (i = 0, k = 0; i < n; i++)
		k += strcmp(ev[i].card_id, "s1") == 0;
	ck_assert_int_eq(k, 1);
	store_events_free(ev, n);
	close_db(b);
	close_db(a);
}

START_TEST(stalled_writer_lands_after_the_reader)
{
	stalled_writer(NULL);
}
END_TEST

START_TEST(stalled_writer_lands_after_a_board_reader)
{
	stalled_writer("default");
}
END_TEST

void mongo_add_tail(TCase *tc)
{
	tcase_add_test(tc, stalled_writer_lands_after_the_reader);
	tcase_add_test(tc, stalled_writer_lands_after_a_board_reader);
	tcase_add_test(tc, idle_deliverers_query_once_until_a_delivery_comes);
	tcase_add_test(tc, idle_tail_reads_the_counter_not_events);
	tcase_add_test(tc, back_to_back_waits_share_the_last_query);
	tcase_add_test(tc, own_write_wakes_a_waiting_tail);
	tcase_add_test(tc, other_replica_write_reaches_a_waiting_tail);
}
