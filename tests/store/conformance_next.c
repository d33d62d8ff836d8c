/* Conformance: claim-next (DESIGN §12) — the order, the filters, blockers, the epoch and the
 * event, and many workers draining one board at once. */
#include "tests/store/conformance.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool (*ct_atomic)(const char **why);

static const struct store_actor worker = {.name = "w-token"};

/* A card with a priority and labels, created at the suite clock's now. */
static void mk(struct store *st, const char *id, const char *state, int32_t pri,
	       const char *const *labels)
{
	struct core_strv lv = ct_strv(labels);
	struct store_card_create in = {.id = id, .title = id, .state = state, .priority = pri,
				       .labels = labels ? &lv : NULL};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
	ck_assert_int_eq(c->priority, pri);
	core_card_free(c);
	free(lv.v);
}

/* claim-next on board `board`; returns the card's id (static buffer; "" when none). */
static const char *next_on(struct store *st, const char *board, const char *marker,
			   const char *const *cols, const char *const *labels, enum core_rc want)
{
	static char id[CORE_ID_MAX + 1];
	struct core_strv cv = ct_strv(cols), lv = ct_strv(labels);
	struct store_claim_next in = {.board = board, .marker = marker, .lease_ms = 60000,
				      .columns = cols ? &cv : NULL,
				      .labels = labels ? &lv : NULL, .holder = worker.name};
	struct store_claim_result r;
	enum core_rc rc = store_card_claim_next(st, &in, &worker, &r);

	free(cv.v);
	free(lv.v);
	ck_assert_msg(rc == want, "claim-next: %s, want %s", core_rc_code(rc), core_rc_code(want));
	id[0] = '\0';
	if (rc == CORE_OK && r.card) {
		ck_assert(r.fresh);
		ck_assert_str_eq(r.token.marker, marker);
		ck_assert_str_eq(r.card->claim.marker, marker);
		ck_assert_int_eq(r.card->claim.lease_ms, 60000);
		ck_assert_int_eq(r.token.epoch, r.card->claim_epoch);
		ck_assert_str_eq(r.card->board, board);
		snprintf(id, sizeof id, "%s", r.card->id);
		core_card_free(r.card);
	}
	return id;
}

/* The same on the default board. */
static const char *next_of(struct store *st, const char *marker, const char *const *cols,
			   const char *const *labels, enum core_rc want)
{
	return next_on(st, "default", marker, cols, labels, want);
}

START_TEST(next_order)
{
	struct store *st = ct_open();

	/* Created in this order, one millisecond apart: a1 a2 (pri 0), b (pri 5), c (pri -1),
	 * z then y at the same instant (pri 5: the id decides). */
	mk(st, "a1", "ready", 0, NULL);
	ct_now += 1;
	mk(st, "a2", "ready", 0, NULL);
	ct_now += 1;
	mk(st, "b", "in_progress", 5, NULL); /* in_progress is eligible too */
	ct_now += 1;
	mk(st, "c", "ready", -1, NULL);
	ct_now += 1;
	mk(st, "z", "ready", 5, NULL);
	mk(st, "y", "ready", 5, NULL);
	/* Never handed out: not eligible, terminal, claimed. */
	mk(st, "bk", "backlog", 100, NULL);
	mk(st, "dn", "done", 100, NULL);
	mk(st, "held", "ready", 100, NULL);
	ct_claim(st, "held", "other");

	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "b");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "y");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "z");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "a1");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "a2");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "c");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), ""); /* nothing left: OK, none */
	ct_close(st);
}
END_TEST

START_TEST(next_filters)
{
	struct store *st = ct_open();
	const char *ab[] = {"a", "b", NULL}, *a[] = {"a", NULL}, *b[] = {"b", NULL};
	const char *bk[] = {"backlog", NULL}, *rd[] = {"ready", NULL};
	const char *done[] = {"done", NULL}, *nope[] = {"nope", NULL};
	struct store_claim_next in = {.board = "nope", .marker = "w", .lease_ms = 1000};
	struct store_claim_result r;

	mk(st, "only-a", "ready", 9, a);
	mk(st, "both", "ready", 0, ab);
	mk(st, "only-b", "ready", 5, b);
	mk(st, "parked", "backlog", 0, ab);

	/* Every label must be carried. */
	ck_assert_str_eq(next_of(st, "w", NULL, ab, CORE_OK), "both");
	ck_assert_str_eq(next_of(st, "w", NULL, ab, CORE_OK), "");
	/* Columns: only those asked for, and they may be outside the eligible ones. */
	ck_assert_str_eq(next_of(st, "w", bk, NULL, CORE_OK), "parked");
	ck_assert_str_eq(next_of(st, "w", bk, NULL, CORE_OK), "");
	ck_assert_str_eq(next_of(st, "w", rd, b, CORE_OK), "only-b");
	/* A label nobody carries: nothing, not an error. */
	ck_assert_str_eq(next_of(st, "w", NULL, (const char *[]){"ghost", NULL}, CORE_OK), "");
	/* Refusals change nothing. */
	next_of(st, "w", done, NULL, CORE_ERR_TRANSITION_REJECTED);
	next_of(st, "w", nope, NULL, CORE_ERR_TRANSITION_REJECTED);
	ck_assert_int_eq(store_card_claim_next(st, &in, &worker, &r), CORE_ERR_NOT_FOUND);
	ck_assert_ptr_null(r.card);
	in.board = "default";
	in.marker = "reaper: x";
	ck_assert_int_eq(store_card_claim_next(st, &in, &worker, &r), CORE_ERR_BAD_REQUEST);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "only-a");
	ct_close(st);
}
END_TEST

START_TEST(next_blockers_epoch_event)
{
	struct store *st = ct_open();
	const char *dep[] = {"blk", NULL};
	struct core_card *c;
	struct core_token t;
	struct core_event *ev;
	size_t n;
	int64_t e1;

	mk(st, "blk", "backlog", 0, NULL);
	core_card_free(ct_create(st, "dep", "ready", dep)); /* waits: blk is not done */
	ct_assert_state(st, "dep", "waiting_deps");
	/* An operator drags it into ready anyway: its blocker is still pending. */
	ct_move(st, "dep", NULL, "ready", NULL, &ct_op);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "");
	ct_move(st, "blk", NULL, "done", NULL, &ct_op);
	ck_assert_str_eq(next_of(st, "w1", NULL, NULL, CORE_OK), "dep");

	/* The event names the card and the token. */
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "card_claimed");
	ck_assert_str_eq(ev[n - 1].card_id, "dep");
	c = ct_get(st, "dep");
	e1 = c->claim_epoch;
	ct_assert_payload(&ev[n - 1], "{\"marker\":\"w1\",\"epoch\":%lld}", (long long)e1);
	store_events_free(ev, n);
	core_card_free(c);

	/* Released at the same instant and taken again: the epoch still advances. */
	t.marker = "w1";
	t.epoch = e1;
	ck_assert_int_eq(store_card_release(st, "dep", &t, &worker, &c), CORE_OK);
	core_card_free(c);
	ck_assert_str_eq(next_of(st, "w2", NULL, NULL, CORE_OK), "dep");
	c = ct_get(st, "dep");
	ck_assert_int_gt(c->claim_epoch, e1);
	ck_assert_str_eq(c->claim.marker, "w2");
	core_card_free(c);
	/* The old token is refused everywhere. */
	ck_assert_int_eq(store_card_release(st, "dep", &t, &worker, &c), CORE_ERR_CLAIM_CONFLICT);
	ct_close(st);
}
END_TEST

START_TEST(next_priority_patch)
{
	struct store *st = ct_open();
	struct store_card_patch p = {.has_priority = true, .priority = 42};
	struct core_card *c;

	mk(st, "p1", "ready", 0, NULL);
	ct_now += 1;
	mk(st, "p2", "ready", 0, NULL);
	ck_assert_int_eq(store_card_patch(st, "p2", &p, &ct_bot, &c), CORE_OK);
	ck_assert_int_eq(c->priority, 42);
	core_card_free(c);
	c = ct_get(st, "p2");
	ck_assert_int_eq(c->priority, 42);
	core_card_free(c);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "p2");
	ct_close(st);
}
END_TEST

/* More blocked cards ahead than the Mongo twin's first look covers (4): the order holds. */
/* "open" (backlog) and "closed" (done), then n cards b0, b1 ... at priority 90 waiting on
 * "open", dragged into ready by an operator. */
static void blocked_ahead(struct store *st, int n)
{
	const char *pend[] = {"open", NULL};
	struct store_card_patch p = {.has_priority = true, .priority = 90};
	struct core_card *c;
	char id[16];
	int i;

	mk(st, "open", "backlog", 0, NULL);
	mk(st, "closed", "done", 0, NULL);
	for (i = 0; i < n; i++) {
		snprintf(id, sizeof id, "b%d", i);
		core_card_free(ct_create(st, id, "ready", pend));
		ct_move(st, id, NULL, "ready", NULL, &ct_op);
		ck_assert_int_eq(store_card_patch(st, id, &p, &ct_bot, &c), CORE_OK);
		core_card_free(c);
		ct_now += 1;
	}
}

START_TEST(next_past_blocked_cards)
{
	struct store *st = ct_open();
	const char *fin[] = {"closed", NULL};
	struct store_card_patch p = {.has_priority = true};
	struct core_card *c;

	blocked_ahead(st, 6);
	core_card_free(ct_create(st, "ok-dep", "ready", fin)); /* blockers all done */
	p.priority = 50;
	ck_assert_int_eq(store_card_patch(st, "ok-dep", &p, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	mk(st, "plain", "ready", 10, NULL);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "ok-dep");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "plain");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "");
	ct_move(st, "open", NULL, "done", NULL, &ct_op);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "b0");
	ct_close(st);
}
END_TEST

/* More blocked cards ahead than any one look of the Mongo twin (20 unlimited, 64 on a board
 * with limits): the card behind them is still found (it was 204). */
START_TEST(next_past_many_blocked_cards)
{
	struct store *st = ct_open();
	const char *fin[] = {"closed", NULL};
	struct core_board b = {0};
	int i;

	blocked_ahead(st, 70);
	core_card_free(ct_create(st, "ok-dep", "ready", fin)); /* blockers all done */
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "ok-dep");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "");
	/* The same on a board with limits (its claims go through the capacity slots). */
	ck_assert_int_eq(store_board_get(st, "default", &b), CORE_OK);
	for (i = 0; i < (int)b.n_cols; i++)
		if (strcmp(b.cols[i].name, "ready") == 0)
			b.cols[i].limit = 1000;
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	core_board_release(&b);
	mk(st, "plain", "ready", 0, NULL);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "plain");
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "");
	ct_close(st);
}
END_TEST

#define MANY 132 /* > the FS twin's per-state cache (at least 128); a multiple of 3 */

/* The order holds over more cards than any cache of them, and whatever becomes available
 * mid-way (created, moved in, released, re-ranked, unblocked) is seen at once. */
START_TEST(next_order_many_and_arrivals)
{
	struct store *st = ct_open();
	const char *dep[] = {"blk", NULL};
	struct store_card_patch p = {.has_priority = true, .priority = 1000};
	struct core_card *c;
	struct core_token t;
	char id[32], want[32];
	int i, k = 0;

	/* MANY cards (more than the FS twin caches per state): priority 0..2 cycling, each 1 ms
	 * after the last. */
	for (i = 0; i < MANY; i++) {
		snprintf(id, sizeof id, "m%03d", i);
		mk(st, id, "ready", i % 3, NULL);
		ct_now += 1;
	}
	mk(st, "blk", "backlog", 0, NULL);
	mk(st, "low", "backlog", -5, NULL);
	core_card_free(ct_create(st, "dep", "ready", dep));
	ct_move(st, "dep", NULL, "ready", NULL, &ct_op);
	ck_assert_int_eq(store_card_patch(st, "dep", &p, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	/* The first 10: priority 2, oldest first ("dep" outranks them but is blocked). */
	for (i = 0; i < 10; i++) {
		snprintf(want, sizeof want, "m%03d", 2 + 3 * i);
		ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), want);
	}
	/* created: a new top card */
	mk(st, "fresh", "ready", 50, NULL);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "fresh");
	/* released: the first card claimed comes back, ahead of the rest */
	c = ct_get(st, "m002");
	t.marker = "w";
	t.epoch = c->claim_epoch;
	core_card_free(c);
	ck_assert_int_eq(store_card_release(st, "m002", &t, &worker, &c), CORE_OK);
	core_card_free(c);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "m002");
	/* re-ranked: a priority-0 card raised */
	p.priority = 60;
	ck_assert_int_eq(store_card_patch(st, "m000", &p, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "m000");
	/* moved in: a backlog card dragged into ready with a high priority */
	p.priority = 70;
	ck_assert_int_eq(store_card_patch(st, "low", &p, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ct_move(st, "low", "backlog", "ready", NULL, &ct_bot);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "low");
	/* unblocked: its blocker reaches done; nothing about "dep" itself changed */
	ct_move(st, "blk", NULL, "done", NULL, &ct_op);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "dep");
	/* The rest, in order: priority 2 (from m032), then 1, then 0 (m000 was taken). */
	for (i = 10; i < MANY / 3; i++) {
		snprintf(want, sizeof want, "m%03d", 2 + 3 * i);
		ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), want);
	}
	for (i = 0; i < MANY / 3; i++) {
		snprintf(want, sizeof want, "m%03d", 1 + 3 * i);
		ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), want);
	}
	for (i = 1; i < MANY / 3; i++, k++) {
		snprintf(want, sizeof want, "m%03d", 3 * i);
		ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), want);
	}
	ck_assert_int_eq(k, MANY / 3 - 1);
	ck_assert_str_eq(next_of(st, "w", NULL, NULL, CORE_OK), "");
	ct_close(st);
}
END_TEST

/* ---- many workers, one board ---- */

#define RACE_THREADS 32
#define RACE_CARDS 256

struct racer {
	struct store *st;
	pthread_barrier_t *go;
	char marker[16];
	char (*got)[CORE_ID_MAX + 1]; /* RACE_CARDS slots */
	size_t n;
	enum core_rc err; /* the first failure */
};

static void *race_main(void *arg)
{
	struct racer *w = arg;
	struct store_claim_next in = {.board = "default", .marker = w->marker, .lease_ms = 60000};
	struct store_claim_result r;
	enum core_rc rc;

	pthread_barrier_wait(w->go);
	for (;;) {
		rc = store_card_claim_next(w->st, &in, &worker, &r);
		if (rc != CORE_OK) {
			w->err = rc;
			break;
		}
		if (!r.card)
			break;
		if (w->n < RACE_CARDS)
			snprintf(w->got[w->n++], sizeof w->got[0], "%s", r.card->id);
		core_card_free(r.card);
	}
	return NULL;
}

static int cmp_id(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

START_TEST(next_race_drain)
{
	struct store *st;
	static struct racer w[RACE_THREADS];
	static char all[RACE_THREADS * RACE_CARDS][CORE_ID_MAX + 1];
	static char got[RACE_THREADS][RACE_CARDS][CORE_ID_MAX + 1];
	pthread_t th[RACE_THREADS];
	pthread_barrier_t go;
	size_t i, k, total = 0;
	const char *why = "";
	char id[32];

	if (ct_atomic && !ct_atomic(&why)) {
		fprintf(stderr, "next_race_drain: SKIPPED: %s\n", why);
		return;
	}
	st = ct_open();
	for (i = 0; i < RACE_CARDS; i++) {
		snprintf(id, sizeof id, "r%03zu", i);
		mk(st, id, i % 2 ? "ready" : "in_progress", (int32_t)(i % 7), NULL);
	}
	pthread_barrier_init(&go, NULL, RACE_THREADS);
	for (i = 0; i < RACE_THREADS; i++) {
		w[i] = (struct racer){.st = st, .go = &go, .got = got[i]};
		snprintf(w[i].marker, sizeof w[i].marker, "w%zu", i);
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_main, &w[i]), 0);
	}
	for (i = 0; i < RACE_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (i = 0; i < RACE_THREADS; i++) {
		ck_assert_msg(w[i].err == CORE_OK, "worker %zu: %s", i, core_rc_code(w[i].err));
		for (k = 0; k < w[i].n; k++)
			memcpy(all[total++], w[i].got[k], sizeof all[0]);
	}
	/* Every card exactly once: sorted, the ids are r000..r255 with no repeat. */
	ck_assert_uint_eq(total, RACE_CARDS);
	qsort(all, total, sizeof all[0], cmp_id);
	for (i = 0; i < total; i++) {
		snprintf(id, sizeof id, "r%03zu", i);
		ck_assert_str_eq(all[i], id);
	}
	/* And each is held by the worker that got it. */
	for (i = 0; i < RACE_THREADS; i++)
		for (k = 0; k < w[i].n; k++) {
			struct core_card *c = ct_get(st, w[i].got[k]);

			ck_assert_str_eq(c->claim.marker, w[i].marker);
			core_card_free(c);
		}
	ct_close(st);
}
END_TEST

/* claim-next takes only cards of the board it names (DESIGN §12: "the best unclaimed card of
 * board b"), whatever another board holds in a column or a label of the same name, and however
 * well that card ranks: by the columns, by explicit columns and by a label alike. */
START_TEST(next_stays_on_its_board)
{
	struct store *st = ct_open();
	const char *gpu[] = {"gpu", NULL}, *rd[] = {"ready", NULL};
	struct core_strv lv = ct_strv(gpu);
	struct core_board b = {0};
	struct core_card *c = NULL;
	const char *theirs[] = {"theirs-1", "theirs-2", "theirs-3"};
	size_t i;

	ck_assert_int_eq(core_board_init_default(&b, "other"), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
	core_board_release(&b);
	/* The default board's cards: older and ahead in priority. */
	for (i = 0; i < 3; i++)
		mk(st, theirs[i], "ready", 100, gpu);
	ct_now += 1;
	for (i = 0; i < 3; i++) {
		char id[16];
		struct store_card_create in = {.id = id, .board = "other", .title = "mine",
					       .state = "ready", .labels = &lv};

		snprintf(id, sizeof id, "mine-%zu", i);
		ck_assert_int_eq(store_card_create(st, &in, &ct_bot, &c), CORE_OK);
		core_card_free(c);
	}
	free(lv.v);
	ck_assert_str_eq(next_on(st, "other", "w", NULL, NULL, CORE_OK), "mine-0");
	ck_assert_str_eq(next_on(st, "other", "w", rd, NULL, CORE_OK), "mine-1");
	ck_assert_str_eq(next_on(st, "other", "w", NULL, gpu, CORE_OK), "mine-2");
	ck_assert_str_eq(next_on(st, "other", "w", NULL, NULL, CORE_OK), "");
	ck_assert_str_eq(next_on(st, "other", "w", NULL, gpu, CORE_OK), "");
	/* The default board's cards were never touched: still free, still handed out there. */
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(store_card_get(st, theirs[i], &c), CORE_OK);
		ck_assert(!c->claim.present);
		ck_assert_int_eq(c->claim_epoch, 0);
		core_card_free(c);
	}
	ck_assert_str_eq(next_of(st, "w", NULL, gpu, CORE_OK), "theirs-1");
	ct_close(st);
}
END_TEST

void conformance_add_next(Suite *s)
{
	TCase *tc = tcase_create("claim-next");

	tcase_set_timeout(tc, 240); /* FerretDB takes its time over MANY cards */
	tcase_add_test(tc, next_order);
	tcase_add_test(tc, next_filters);
	tcase_add_test(tc, next_stays_on_its_board);
	tcase_add_test(tc, next_blockers_epoch_event);
	tcase_add_test(tc, next_past_many_blocked_cards);
	tcase_add_test(tc, next_priority_patch);
	tcase_add_test(tc, next_order_many_and_arrivals);
	tcase_add_test(tc, next_past_blocked_cards);
	tcase_add_test(tc, next_race_drain);
	suite_add_tcase(s, tc);
}
