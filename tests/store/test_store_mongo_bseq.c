/* DESIGN §16 on the Mongo twin: a board's board_seq runs 1, 2, 3 ... without gaps, in seq
 * order, and a listing on any replica shows every event acknowledged before it began.
 *
 * Two replicas (two store handles on one database), 8 threads (4 on each) cycling claim /
 * owned state write / release over 24 cards; then, on the other replica, the board's listing
 * right after the last acknowledgement holds exactly the events acknowledged (the creations
 * and one per successful write), with board_seq 1..N and seq rising with it. On
 * mongo-java-server 1.47, whose findAndModify could hand back a post-image showing a later
 * writer's $inc, the twin's counters once read two writers the same value and one value to
 * none: holes in board_seq, board_seq against seq, and a listing that stopped short. A race
 * test: it needs atomic single-document updates, so it skips on FerretDB, saying why. */
#include "tests/store/test_store_mongo.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BSEQ_CARDS 24
#define BSEQ_THREADS 8
#define BSEQ_CYCLES 25

struct cycler {
	struct store *st;
	int id;
	int acked;      /* events of the writes acknowledged OK */
	int unexpected; /* answers other than OK or a claim conflict */
	char what[96];  /* the first of them */
};

static void note(struct cycler *x, const char *op, const char *id, enum core_rc rc)
{
	if (!x->unexpected++)
		snprintf(x->what, sizeof(x->what), "%s %s: %s", op, id, core_rc_code(rc));
}

static void *cycle_main(void *arg)
{
	struct cycler *x = arg;
	struct store_claim_result r;
	struct core_card *c = NULL;
	char id[16], marker[32];
	int i;

	for (i = 0; i < BSEQ_CYCLES; i++) {
		struct store_owned_write w = {.kind = STORE_OWNED_STATE};
		enum core_rc rc;

		snprintf(id, sizeof(id), "b%d", (x->id * 7 + i * 5) % BSEQ_CARDS);
		snprintf(marker, sizeof(marker), "m%d-%d", x->id, i);
		rc = store_card_claim(x->st, id, marker, 60000, &bot, &r);
		if (rc == CORE_ERR_CLAIM_CONFLICT)
			continue;
		if (rc != CORE_OK) {
			note(x, "claim", id, rc);
			continue;
		}
		x->acked++; /* card_claimed */
		w.token = (struct core_token){marker, r.token.epoch, NULL};
		w.state = strcmp(r.card->state, "ready") == 0 ? "in_progress" : "ready";
		core_card_free(r.card);
		rc = store_card_owned_write(x->st, id, &w, &bot, &c);
		core_card_free(c);
		c = NULL;
		if (rc == CORE_OK)
			x->acked++; /* card_state_changed */
		else
			note(x, "owned write", id, rc);
		rc = store_card_release(x->st, id, &w.token, &bot, &c);
		core_card_free(c);
		c = NULL;
		if (rc == CORE_OK)
			x->acked++; /* card_released */
		else
			note(x, "release", id, rc);
	}
	return NULL;
}

START_TEST(board_seq_has_no_holes_across_replicas)
{
	struct store *a, *b;
	struct cycler x[BSEQ_THREADS];
	pthread_t t[BSEQ_THREADS];
	struct core_event *ev = NULL;
	size_t n = 0, k, total = 0;
	int64_t after = 0, next = 0, last_seq = 0, want;
	char db[64], id[16];
	int i, acked;

	if (is_ferretdb()) {
		printf("SKIP board_seq_has_no_holes_across_replicas: FerretDB 1.24's "
		       "single-document updates are not atomic under concurrency; this race needs "
		       "MongoDB or mongo-java-server\n");
		return;
	}
	db_name_new(db, sizeof(db));
	a = open_db(db, 0, NULL);
	b = open_db(db, 0, NULL);
	for (i = 0; i < BSEQ_CARDS; i++) {
		snprintf(id, sizeof(id), "b%d", i);
		create(a, id, "ready");
	}
	/* Before the cycles: the board's creation and the cards'. */
	ck_assert_int_eq(store_events_list_board(a, "default", 0, 1000, 0, &ev, &n, &next),
			 CORE_OK);
	store_events_free(ev, n);
	ev = NULL;
	ck_assert_uint_ge(n, BSEQ_CARDS);
	acked = (int)n;
	for (i = 0; i < BSEQ_THREADS; i++) {
		x[i] = (struct cycler){.st = i % 2 ? b : a, .id = i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, cycle_main, &x[i]), 0);
	}
	for (i = 0; i < BSEQ_THREADS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(x[i].unexpected == 0, "thread %d: %d unexpected answers, first %s", i,
			      x[i].unexpected, x[i].what);
		acked += x[i].acked;
	}
	/* Right after the last acknowledgement, on each replica, with no wait: everything. */
	for (i = 0; i < 2; i++) {
		struct store *st = i ? b : a;

		total = 0;
		after = 0;
		last_seq = 0;
		want = 1;
		for (;;) {
			ck_assert_int_eq(store_events_list_board(st, "default", after, 1000, 0, &ev,
								 &n, &next),
					 CORE_OK);
			for (k = 0; k < n; k++) {
				ck_assert_msg(ev[k].board_seq == want,
					      "replica %d: board_seq %lld where %lld was due (seq %lld)",
					      i, (long long)ev[k].board_seq, (long long)want,
					      (long long)ev[k].seq);
				ck_assert_msg(ev[k].seq > last_seq,
					      "replica %d: seq %lld after seq %lld (board_seq %lld)", i,
					      (long long)ev[k].seq, (long long)last_seq,
					      (long long)ev[k].board_seq);
				last_seq = ev[k].seq;
				want++;
			}
			total += n;
			store_events_free(ev, n);
			ev = NULL;
			if (n == 0)
				break;
			after = next;
		}
		ck_assert_msg(total == (size_t)acked, "replica %d listed %zu events of %d acknowledged",
			      i, total, acked);
		ck_assert_int_eq(next, acked);
	}
	close_db(b);
	close_db(a);
}
END_TEST

void mongo_add_bseq(TCase *tc)
{
	tcase_add_test(tc, board_seq_has_no_holes_across_replicas);
}
