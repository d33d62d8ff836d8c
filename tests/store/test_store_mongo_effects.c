/* The Mongo twin's effects cases beyond the conformance body: the outbox left behind by a
 * writer killed between its update and its enqueue (delivered by the drain, and keyed so a
 * second drain cannot enqueue twice), and the delivery lease raced by two stores (two
 * replicas) on one database — run only where single-document updates are atomic. */
#include "store/mongo/mongo.h"
#include "tests/store/sub_fixture.h"
#include "tests/store/test_store_mongo.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sub_put(struct store *st)
{
	struct store_sub in = {.board = "default", .name = "s", .url = "http://127.0.0.1:9/x",
			       .enabled = true};
	struct store_sub *out = NULL;
	bool created;

	ck_assert_int_eq(store_sub_put(st, &in, "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", &created,
				       &out),
			 CORE_OK);
	store_sub_free(out);
}

/* The deliveries whose body holds `mark` (ids are "<board>:<board_seq>.<sub>": the event's
 * own _id is not in them). */
static size_t deliveries_of(struct store *st, const char *mark)
{
	struct store_delivery_filter f = {.status = -1, .limit = 1000};
	struct store_delivery **v = NULL;
	size_t n = 0, i, k = 0;

	ck_assert_int_eq(store_delivery_list(st, &f, &v, &n), CORE_OK);
	for (i = 0; i < n; i++)
		k += v[i]->body && strstr(v[i]->body, mark) != NULL;
	store_deliveries_free(v, n);
	return k;
}

/* Waits (bounded: past three drain rounds) for `want` deliveries of the prefix. */
static size_t wait_deliveries(struct store *st, const char *prefix, size_t want)
{
	size_t i, k = 0;

	for (i = 0; i < 175 && (k = deliveries_of(st, prefix)) < want; i++)
		nap_ms(200);
	return k;
}

START_TEST(outbox_with_deliveries_is_enqueued_once)
{
	char db[64], json[2048];
	struct store *st, *st2, *st3;
	int64_t before;
	size_t n;

	db_name_new(db, sizeof db);
	st = open_db(db, 0, NULL);
	sub_put(st);
	create(st, "c1", "inbox");
	before = server_now();
	/* What a writer killed after its update and before its enqueue leaves: the matched
	 * event in the card's outbox with its deliveries. */
	snprintf(json, sizeof json,
		 "{\"$push\": {\"outbox\": {\"_id\": \"orphan-d1\", \"at\": {\"$date\": %lld}, "
		 "\"q_ts\": {\"$date\": %lld}, \"board\": \"default\", \"type\": \"card_created\", "
		 "\"card_id\": \"c1\", \"actor\": \"orphan-writer\", \"machine\": false, "
		 "\"payload\": {\"state\": \"inbox\"}, \"dlv\": [\"s\"], \"dlv_board\": \"default\", "
		 "\"dlv_card\": \"{\\\"id\\\":\\\"c1\\\",\\\"board\\\":\\\"default\\\",\\\"title\\\":"
		 "\\\"\\\",\\\"body\\\":\\\"\\\",\\\"state\\\":\\\"inbox\\\",\\\"labels\\\":[],"
		 "\\\"blockers\\\":[],\\\"comments\\\":[],\\\"claim\\\":null,\\\"claim_epoch\\\":0,"
		 "\\\"last_run_id\\\":null,\\\"awaiting_input\\\":false,\\\"gave_up\\\":null,"
		 "\\\"state_reason\\\":null,\\\"created_at\\\":\\\"2026-01-01T00:00:00.000Z\\\","
		 "\\\"updated_at\\\":\\\"2026-01-01T00:00:00.000Z\\\",\\\"state_at\\\":"
		 "\\\"2026-01-01T00:00:00.000Z\\\"}\"}}}",
		 (long long)before, (long long)(before - 60000));
	raw_update(st, "cards", "c1", json);
	st2 = open_db(db, 0, NULL); /* its maintenance thread drains at start */
	n = wait_deliveries(st2, "\"actor\":\"orphan-writer\"", 1);
	ck_assert_msg(n == 1, "the orphaned delivery was enqueued %zu times", n);
	/* The same entry drained again (a drain that died before its pull): still one. */
	raw_update(st, "cards", "c1", json);
	st3 = open_db(db, 0, NULL);
	nap_ms(500);
	for (n = 0; n < 50 && deliveries_of(st3, "\"actor\":\"orphan-writer\"") == 1; n++) {
		struct core_card *c = NULL;

		/* Until the outbox is empty again, the drain has not finished. */
		ck_assert_int_eq(store_card_get(st3, "c1", &c), CORE_OK);
		core_card_free(c);
		nap_ms(200);
	}
	ck_assert_uint_eq(deliveries_of(st3, "\"actor\":\"orphan-writer\""), 1);
	close_db(st3);
	close_db(st2);
	close_db(st);
}
END_TEST

/* ---- claim-next's card_claimed, matched after the write, by someone else ---- */

struct next_call {
	struct store *st;
	enum core_rc rc;
};

static void *next_main(void *arg)
{
	static const struct store_actor worker = {.name = "w-held"};
	struct next_call *k = arg;
	struct store_claim_next in = {.board = "default", .marker = "held", .lease_ms = 60000};
	struct store_claim_result r = {0};

	k->rc = store_card_claim_next(k->st, &in, &worker, &r);
	core_card_free(r.card);
	return NULL;
}

/* A claim-next writer that dies between its write and its delivery used to leave its
 * card_claimed to be delivered unmatched: no webhook. Whoever delivers it — the card's next
 * write (on another replica), or the maintenance drain — matches it first. */
START_TEST(claimed_event_of_a_dead_writer_is_matched)
{
	static const struct store_actor op = {.name = "op"};
	struct mongo_hold h = {.what = "claimed"}; /* claim-next held right after its write */
	struct store_mongo_options o = {.test_read = mongo_hold_hook, .test_ctx = &h};
	struct core_card *c = NULL;
	char db[64];
	struct store *a, *b, *d;
	struct next_call k;
	pthread_t th;
	size_t n;

	db_name_new(db, sizeof db);
	a = open_db_opts(db, &o, NULL);
	b = open_db(db, 0, NULL);
	fx_subscribe_all(b);
	create(b, "c1", "ready");
	ck_assert_uint_eq(deliveries_of(b, "\"card_claimed\""), 0);
	/* The card's next write, on another replica, delivers the held entry with its own. */
	mongo_hold_arm(&h);
	k = (struct next_call){.st = a};
	ck_assert_int_eq(pthread_create(&th, NULL, next_main, &k), 0);
	mongo_hold_await(&h);
	ck_assert_uint_ge(raw_outbox_len(b, "cards", "c1"), 1); /* card_claimed, unmatched */
	ck_assert_int_eq(store_card_comment_add(b, "c1", "a note", &op, &c), CORE_OK);
	core_card_free(c);
	n = deliveries_of(b, "\"card_claimed\"");
	atomic_store(&h.release, 1);
	pthread_join(th, NULL);
	ck_assert_int_eq(k.rc, CORE_OK);
	ck_assert_msg(n == 1, "the held claim's card_claimed: %zu deliveries", n);
	/* The maintenance drain: the same, for a card nobody writes again. */
	create(b, "c2", "ready");
	mongo_hold_arm(&h);
	ck_assert_int_eq(pthread_create(&th, NULL, next_main, &k), 0);
	mongo_hold_await(&h);
	nap_ms(MGO_OUTBOX_GRACE_MS + 500); /* the drain leaves younger outboxes to writers */
	d = open_db(db, 0, NULL); /* its maintenance thread drains at start */
	n = wait_deliveries(d, "\"card_claimed\"", 2);
	atomic_store(&h.release, 1);
	pthread_join(th, NULL);
	ck_assert_int_eq(k.rc, CORE_OK);
	ck_assert_msg(n == 2, "the drained claim's card_claimed: %zu deliveries in all", n);
	close_db(d);
	close_db(b);
	close_db(a);
}
END_TEST

struct race {
	struct store *st;
	char owner[16];
	int *wins;
	pthread_mutex_t *mu;
};

static void *race_lease(void *arg)
{
	struct race *r = arg;
	struct store_delivery *d = NULL;

	if (store_delivery_lease(r->st, r->owner, 60000, &d) == CORE_OK && d) {
		pthread_mutex_lock(r->mu);
		(*r->wins)++;
		pthread_mutex_unlock(r->mu);
		store_delivery_free(d);
	}
	return NULL;
}

START_TEST(delivery_lease_race_has_one_winner)
{
	char db[64], id[32];
	struct store *a, *b;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct race r[8];
	pthread_t t[8];
	int wins, round, bad = 0;
	size_t i;

	if (is_ferretdb()) {
		printf("SKIP delivery_lease_race_has_one_winner: FerretDB 1.24's single-document "
		       "updates are not atomic under concurrency (two replicas could both take one "
		       "lease; one process serialises its own deliverers there)\n");
		return;
	}
	db_name_new(db, sizeof db);
	a = open_db(db, 0, NULL);
	b = open_db(db, 0, NULL); /* a second replica on the same database */
	sub_put(a);
	for (round = 0; round < 100; round++) {
		snprintf(id, sizeof id, "c%d", round);
		create(a, id, "inbox"); /* one new due delivery; the earlier ones stay leased */
		wins = 0;
		for (i = 0; i < 8; i++) {
			r[i] = (struct race){.st = i % 2 ? b : a, .wins = &wins, .mu = &mu};
			snprintf(r[i].owner, sizeof r[i].owner, "r%zu", i);
			pthread_create(&t[i], NULL, race_lease, &r[i]);
		}
		for (i = 0; i < 8; i++)
			pthread_join(t[i], NULL);
		bad += wins != 1;
	}
	ck_assert_msg(bad == 0, "%d of 100 rounds without exactly one lease winner", bad);
	close_db(b);
	close_db(a);
}
END_TEST

/* Deliveries are leased in board_seq order within a millisecond (DESIGN §16); a document
 * written without event_seq (an older one) is still listed and leased (as seq 0). */
START_TEST(delivery_without_event_seq_is_still_leased)
{
	struct store_delivery_filter f = {.board = "default", .status = -1, .limit = 10};
	struct store_delivery **v = NULL, *d = NULL;
	char db[64], id[16], legacy[64];
	struct store *st;
	bool saw_legacy = false;
	int64_t last = 0;
	size_t n = 0, i;

	db_name_new(db, sizeof db);
	st = open_db(db, 0, NULL);
	tnow = server_now();
	store_clock_set(st, test_clock, &tnow); /* one millisecond for all: only seq tells */
	sub_put(st);
	for (i = 0; i < 4; i++) {
		snprintf(id, sizeof id, "c%zu", i);
		create(st, id, "inbox");
	}
	ck_assert_int_eq(store_delivery_list(st, &f, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 4);
	snprintf(legacy, sizeof legacy, "%s", v[0]->id);
	store_deliveries_free(v, n);
	raw_update(st, "deliveries", legacy, "{\"$unset\": {\"event_seq\": 1}}");
	ck_assert_int_eq(store_delivery_list(st, &f, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 4);
	store_deliveries_free(v, n);
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(store_delivery_lease(st, "r1", 30000, &d), CORE_OK);
		ck_assert_ptr_nonnull(d);
		if (strcmp(d->id, legacy) == 0) {
			ck_assert_int_eq(d->event_seq, 0);
			saw_legacy = true;
		} else {
			ck_assert_msg(d->event_seq > last, "leased %s after seq %lld", d->id,
				      (long long)last);
			last = d->event_seq;
		}
		store_delivery_free(d);
		d = NULL;
	}
	ck_assert(saw_legacy);
	ck_assert_int_eq(store_delivery_lease(st, "r1", 30000, &d), CORE_OK);
	ck_assert_ptr_null(d);
	close_db(st);
}
END_TEST

void mongo_add_effects(TCase *tc)
{
	tcase_add_test(tc, outbox_with_deliveries_is_enqueued_once);
	tcase_add_test(tc, claimed_event_of_a_dead_writer_is_matched);
	tcase_add_test(tc, delivery_lease_race_has_one_winner);
	tcase_add_test(tc, delivery_without_event_seq_is_still_leased);
}
