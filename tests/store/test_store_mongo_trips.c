/* The Mongo twin's round trips on the claim cycle (store/mongo/README.md, "Round trips per
 * request"): a renew that names its lease is one findAndModify decided by its filter alone,
 * refusing exactly what core refuses; a writer hands its outbox pull to the puller thread,
 * which pulls in bulk, and a store that closes pulls what is still queued; a write that needs
 * the card and its board reads both in one round trip; writers delivering at the same moment
 * share the seqs, the events' insert and (FerretDB) the pulls, each told its own outcome.
 * Round trips are
 * counted on the calling thread (mgo_round_trips_here), pulls through the test_read hook
 * ("pull", on the thread that sends it), so the other threads' traffic does not count. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_cas.h"
#include "tests/store/test_store_mongo.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static struct core_card *get(struct store *st, const char *id)
{
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
	return c;
}

/* A renew with its lease: one round trip, the lease set from the server's now. Keeping the
 * card's own lease (lease_ms 0) needs the card: the read, then the write. */
START_TEST(renew_with_lease_is_one_round_trip)
{
	struct store *st = open_fresh();
	struct core_token t;
	struct core_card *c = NULL;
	uint64_t before;
	int64_t t0;

	create(st, "c1", "ready");
	t = claim(st, "c1", "w1");
	t0 = server_now();
	before = mgo_round_trips_here();
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 30000, &bot, &c), CORE_OK);
	ck_assert_uint_eq(mgo_round_trips_here() - before, 1);
	ck_assert_int_eq(c->claim.lease_ms, 30000);
	ck_assert_int_ge(c->claim.lease_until, t0 + 30000 - 1000);
	ck_assert_str_eq(c->claim.marker, "w1");
	ck_assert_int_eq(c->claim_epoch, t.epoch);
	core_card_free(c);
	c = get(st, "c1");
	ck_assert_int_eq(c->claim.lease_ms, 30000);
	ck_assert_str_eq(c->claim.holder, "ci-bot");
	core_card_free(c);

	ck_assert_int_eq(store_card_renew(st, "c1", &t, 0, &bot, &c), CORE_OK);
	ck_assert_int_eq(c->claim.lease_ms, 30000);
	core_card_free(c);
	close_db(st);
}
END_TEST

/* Every renew core refuses is refused, and changes nothing: a stale epoch, another marker,
 * another credential, a released claim, a missing card. A claim bound to no holder is
 * renewed by any credential that knows its token, as core_holder_match says. */
START_TEST(renew_refusals_change_nothing)
{
	struct store *st = open_fresh();
	const struct store_actor intruder = {.name = "intruder"}, unnamed = {.name = ""};
	struct store_claim_result r = {0};
	struct core_token t, bad;
	struct core_card *c = NULL, *was;

	create(st, "c1", "ready");
	t = claim(st, "c1", "w1");
	was = get(st, "c1");
	bad = t;
	bad.epoch = t.epoch + 1;
	ck_assert_int_eq(store_card_renew(st, "c1", &bad, 30000, &bot, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	bad = t;
	bad.marker = "w2";
	ck_assert_int_eq(store_card_renew(st, "c1", &bad, 30000, &bot, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 30000, &intruder, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_renew(st, "nope", &t, 30000, &bot, &c), CORE_ERR_NOT_FOUND);
	c = get(st, "c1");
	ck_assert_int_eq(c->claim.lease_until, was->claim.lease_until);
	ck_assert_int_eq(c->claim.lease_ms, was->claim.lease_ms);
	ck_assert_int_eq(c->updated_at, was->updated_at);
	core_card_free(c);
	core_card_free(was);
	ck_assert_int_eq(store_card_release(st, "c1", &t, &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 30000, &bot, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	/* no marker, the released card's own epoch: the blind renew's filter on a missing
	 * marker would match a card with no claim; store_card_renew refuses such a token first */
	bad = t;
	bad.marker = NULL;
	ck_assert_int_eq(store_card_renew(st, "c1", &bad, 30000, &bot, &c), CORE_ERR_BAD_REQUEST);
	c = get(st, "c1");
	ck_assert(!c->claim.present);
	ck_assert(!c->claim.has_lease);
	core_card_free(c);

	/* unbound: taken by a credential without a name */
	create(st, "c2", "ready");
	ck_assert_int_eq(store_card_claim(st, "c2", "w3", 60000, &unnamed, &r), CORE_OK);
	ck_assert_ptr_null(r.card->claim.holder);
	t = (struct core_token){"w3", r.token.epoch, NULL};
	core_card_free(r.card);
	ck_assert_int_eq(store_card_renew(st, "c2", &t, 20000, &intruder, &c), CORE_OK);
	ck_assert_int_eq(c->claim.lease_ms, 20000);
	core_card_free(c);
	close_db(st);
}
END_TEST

/* A write that needs the card and its board (claim, an owned state write) reads both in one
 * aggregate where the server runs $lookup (not FerretDB 1.24: two finds there). A missing
 * card is NOT_FOUND; a card whose board is gone, INTERNAL, as with two finds. */
START_TEST(card_and_board_in_one_round_trip)
{
	struct store *st = open_fresh();
	struct mgo_conn c;
	struct mgo_attempt a;
	uint64_t before;

	create(st, "c1", "ready");
	ck_assert_int_eq(mgo_conn_open(mgo_of(st), &c), CORE_OK);
	before = mgo_round_trips_here();
	ck_assert_int_eq(mgo_attempt_begin(&c, "c1", &a), CORE_OK);
	ck_assert_uint_eq(mgo_round_trips_here() - before, is_ferretdb() ? 2 : 1);
	ck_assert_str_eq(a.was->id, "c1");
	ck_assert_str_eq(a.was->state, "ready");
	ck_assert_str_eq(a.now->id, "c1");
	ck_assert_str_eq(a.b.name, a.was->board);
	ck_assert_uint_gt(a.b.n_cols, 0);
	mgo_attempt_end(&a);
	ck_assert_int_eq(mgo_attempt_begin(&c, "nope", &a), CORE_ERR_NOT_FOUND);
	mgo_attempt_end(&a);
	raw_update(st, "cards", "c1", "{\"$set\": {\"board\": \"gone\"}}");
	ck_assert_int_eq(mgo_attempt_begin(&c, "c1", &a), CORE_ERR_INTERNAL);
	mgo_attempt_end(&a);
	mgo_conn_close(&c);
	close_db(st);
}
END_TEST

struct pulls {
	pthread_t writer;
	atomic_int here, elsewhere;
};

static void count_pull(void *ctx, const char *what)
{
	struct pulls *p = ctx;

	if (strcmp(what, "pull") != 0)
		return;
	if (pthread_equal(pthread_self(), p->writer))
		atomic_fetch_add(&p->here, 1);
	else
		atomic_fetch_add(&p->elsewhere, 1);
}

/* A write's events are in the tail when it answers, and their pull is the puller's: the
 * writer sends none. Closing the store pulls what is still queued: every outbox is empty
 * after it, and the events are each in the tail once. */
START_TEST(writers_leave_the_pull_to_the_puller)
{
	struct pulls p = {.writer = pthread_self()};
	struct store_mongo_options o = {.test_read = count_pull, .test_ctx = &p};
	struct store *st, *st2;
	struct core_event *ev = NULL;
	struct core_card *c = NULL;
	struct core_token t[4];
	char db[64], id[16];
	size_t n = 0, i, k, claimed = 0;
	int64_t next = 0;

	db_name_new(db, sizeof(db));
	st = open_db_opts(db, &o, NULL);
	st2 = open_db(db, 0, NULL); /* to look with once st is closed */
	for (i = 0; i < 4; i++) {
		snprintf(id, sizeof(id), "c%zu", i);
		create(st, id, "ready");
		t[i] = claim(st, id, "w1");
	}
	for (i = 0; i < 4; i++) {
		snprintf(id, sizeof(id), "c%zu", i);
		ck_assert_int_eq(store_card_release(st, id, &t[i], &bot, &c), CORE_OK);
		core_card_free(c);
	}
	/* FerretDB: a pull beside the next write of the same card could undo it (its updates
	 * are a read then a write), so there each writer still pulls its own. */
	if (is_ferretdb())
		ck_assert_int_gt(atomic_load(&p.here), 0);
	else
		ck_assert_int_eq(atomic_load(&p.here), 0);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 100, 0, &ev, &n, &next), CORE_OK);
	for (i = 0; i < n; i++)
		claimed += ev[i].type == CORE_EV_CARD_CLAIMED;
	ck_assert_uint_eq(claimed, 4);
	store_events_free(ev, n);
	close_db(st);
	if (is_ferretdb()) {
		ck_assert_int_eq(atomic_load(&p.elsewhere), 0);
	} else {
		ck_assert_int_eq(atomic_load(&p.here), 0);
		ck_assert_int_ge(atomic_load(&p.elsewhere), 1);
	}
	for (i = 0; i < 4; i++) {
		snprintf(id, sizeof(id), "c%zu", i);
		ck_assert_uint_eq(raw_outbox_len(st2, "cards", id), 0);
	}
	/* each event once: created, claimed, released per card */
	ck_assert_int_eq(store_events_list(st2, NULL, NULL, 0, 100, 0, &ev, &n, &next), CORE_OK);
	for (k = 0; k < 4; k++) {
		size_t created = 0, claims = 0, released = 0;

		snprintf(id, sizeof(id), "c%zu", k);
		for (i = 0; i < n; i++) {
			if (!ev[i].card_id || strcmp(ev[i].card_id, id) != 0)
				continue;
			created += ev[i].type == CORE_EV_CARD_CREATED;
			claims += ev[i].type == CORE_EV_CARD_CLAIMED;
			released += ev[i].type == CORE_EV_CARD_RELEASED;
		}
		ck_assert_msg(created == 1 && claims == 1 && released == 1,
			      "%s: created %zu, claimed %zu, released %zu times", id, created, claims,
			      released);
	}
	store_events_free(ev, n);
	close_db(st2);
}
END_TEST

/* The puller held: a card written ten times keeps ten entries in its outbox (delivered, not
 * yet pulled), more than one event queue holds; deleting it then must still record every
 * event of it once and its card_deleted (the delete lost card_deleted: the queue it built
 * from the outbox had no room left, and the delete answered all the same). */
struct held_puller {
	pthread_t writer;
	atomic_bool hold;
};

static void hold_puller(void *ctx, const char *what)
{
	struct held_puller *h = ctx;

	if (strcmp(what, "pull") == 0 && !pthread_equal(pthread_self(), h->writer))
		while (atomic_load(&h->hold))
			nap_ms(1);
}

START_TEST(delete_with_a_full_outbox_records_card_deleted)
{
	struct held_puller h = {.writer = pthread_self()};
	struct store_mongo_options o = {.test_read = hold_puller, .test_ctx = &h};
	struct store_card_patch p = {0};
	struct store *st;
	struct core_card *c = NULL;
	struct core_event *ev = NULL;
	char db[64], title[16];
	size_t n = 0, i, updated = 0, deleted = 0;
	int64_t next = 0;

	atomic_store(&h.hold, true);
	db_name_new(db, sizeof(db));
	st = open_db_opts(db, &o, NULL);
	create(st, "full", "ready");
	for (i = 0; i < 10; i++) {
		snprintf(title, sizeof title, "t%zu", i);
		p.title = title;
		ck_assert_int_eq(store_card_patch(st, "full", &p, &bot, &c), CORE_OK);
		core_card_free(c);
	}
	if (!is_ferretdb()) /* there each writer pulls its own */
		ck_assert_uint_ge(raw_outbox_len(st, "cards", "full"), 10);
	ck_assert_int_eq(store_card_delete(st, "full", &bot), CORE_OK);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 100, 0, &ev, &n, &next), CORE_OK);
	for (i = 0; i < n; i++) {
		updated += ev[i].type == CORE_EV_CARD_UPDATED;
		deleted += ev[i].type == CORE_EV_CARD_DELETED;
	}
	ck_assert_uint_eq(updated, 10);
	ck_assert_uint_eq(deleted, 1);
	ck_assert_int_eq(ev[n - 1].type, CORE_EV_CARD_DELETED);
	store_events_free(ev, n);
	atomic_store(&h.hold, false);
	close_db(st);
}
END_TEST

/* The bench's cycle, one writer at a time, counted request by request on the calling thread
 * (store/mongo/README.md, "Round trips per request"): claim and an owned state write read the
 * card and its board (one aggregate, or two finds on FerretDB), then the findAndModify, the
 * seqs and the insert, and on FerretDB the pull before answering (elsewhere the puller's);
 * renew is its findAndModify; release reads the card, no board. */
START_TEST(cycle_round_trips_per_request)
{
	struct store *st = open_fresh();
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = "review"};
	struct store_claim_result r = {0};
	struct core_card *c = NULL;
	struct core_token t;
	uint64_t before;
	unsigned fdb = is_ferretdb() ? 2 : 0; /* the second find, the pull */

	create(st, "c1", "in_progress");
	before = mgo_round_trips_here();
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 60000, &bot, &r), CORE_OK);
	ck_assert_uint_eq(mgo_round_trips_here() - before, 4 + fdb);
	t = (struct core_token){"w1", r.token.epoch, NULL};
	core_card_free(r.card);
	before = mgo_round_trips_here();
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 30000, &bot, &c), CORE_OK);
	ck_assert_uint_eq(mgo_round_trips_here() - before, 1);
	core_card_free(c);
	w.token = t;
	before = mgo_round_trips_here();
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &bot, &c), CORE_OK);
	ck_assert_uint_eq(mgo_round_trips_here() - before, 4 + fdb);
	ck_assert_str_eq(c->state, "review");
	core_card_free(c);
	before = mgo_round_trips_here();
	ck_assert_int_eq(store_card_release(st, "c1", &t, &bot, &c), CORE_OK);
	ck_assert_uint_eq(mgo_round_trips_here() - before, 4 + (fdb ? 1 : 0));
	core_card_free(c);
	close_db(st);
}
END_TEST

/* ---- the seq allocations shared by concurrent writers ---- */

#define SEQ_THREADS 8
#define SEQ_CALLS 40

struct seq_taker {
	struct store *st;
	int idx;
	int64_t first[SEQ_CALLS], n[SEQ_CALLS];             /* seq range of each call */
	int64_t bfirst[SEQ_CALLS][2], bn[SEQ_CALLS][2];     /* b1's and b2's */
	enum core_rc rc;
	uint64_t trips; /* commands this thread sent */
};

static void *seq_taker_main(void *arg)
{
	struct seq_taker *t = arg;
	const char *const boards[2] = {"b1", "b2"};
	struct mgo_conn c;
	int64_t counts[2], blast[2], last;
	int k;

	if ((t->rc = mgo_conn_open(mgo_of(t->st), &c)) != CORE_OK)
		return NULL;
	t->trips = mgo_round_trips_here();
	for (k = 0; k < SEQ_CALLS && t->rc == CORE_OK; k++) {
		counts[0] = (t->idx + k) % 3;         /* 0..2 of b1 */
		counts[1] = 1 + (t->idx * 7 + k) % 2; /* 1..2 of b2 */
		t->n[k] = counts[0] + counts[1];
		t->rc = mgo_seqs_take(&c, t->n[k], boards, counts, 2, &last, blast);
		t->first[k] = last - t->n[k] + 1;
		t->bn[k][0] = counts[0];
		t->bn[k][1] = counts[1];
		t->bfirst[k][0] = blast[0] - counts[0] + 1;
		t->bfirst[k][1] = blast[1] - counts[1] + 1;
	}
	t->trips = mgo_round_trips_here() - t->trips;
	mgo_conn_close(&c);
	return NULL;
}

/* Marks [first, first + n) in `seen` (indexes from 1); false when one was marked already. */
static bool mark(unsigned char *seen, size_t cap, int64_t first, int64_t n)
{
	int64_t i;

	for (i = first; i < first + n; i++) {
		if (i < 1 || (size_t)i >= cap || seen[i])
			return false;
		seen[i] = 1;
	}
	return true;
}

/* Writers asking for seqs at the same moment share findAndModifys, and each still gets its
 * own contiguous ranges: over 8 threads x 40 calls, every seq and every board_seq of b1 and
 * b2 is handed out exactly once, with no hole. One findAndModify at a time here (the default
 * lets MGO_SEQ_INFLIGHT run at once): what is checked is how a batch's ranges are split, not
 * the server's own atomicity under concurrent updates (mongo-java-server was seen to hand a
 * number to two of them; the race tests and README say where that matters). */
START_TEST(shared_seq_allocations_hand_each_seq_once)
{
	struct store *st = open_fresh();
	static struct seq_taker t[SEQ_THREADS];
	pthread_t th[SEQ_THREADS];
	static unsigned char seen[3][SEQ_THREADS * SEQ_CALLS * 4 + 8];
	int64_t top[3] = {0, 0, 0};
	size_t cap = sizeof(seen[0]), i, j;
	uint64_t trips = 0;
	int k;

	memset(seen, 0, sizeof(seen));
	mgo_of(st)->seq_inflight_max = 1;
	for (i = 0; i < SEQ_THREADS; i++) {
		t[i] = (struct seq_taker){.st = st, .idx = (int)i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, seq_taker_main, &t[i]), 0);
	}
	for (i = 0; i < SEQ_THREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < SEQ_THREADS; i++) {
		ck_assert_int_eq(t[i].rc, CORE_OK);
		trips += t[i].trips;
		for (k = 0; k < SEQ_CALLS; k++) {
			ck_assert_msg(mark(seen[0], cap, t[i].first[k], t[i].n[k]),
				      "seqs %lld+%lld handed out twice", (long long)t[i].first[k],
				      (long long)t[i].n[k]);
			for (j = 0; j < 2; j++)
				ck_assert_msg(mark(seen[1 + j], cap, t[i].bfirst[k][j], t[i].bn[k][j]),
					      "b%zu board_seqs %lld+%lld handed out twice", j + 1,
					      (long long)t[i].bfirst[k][j], (long long)t[i].bn[k][j]);
			top[0] += t[i].n[k];
			top[1] += t[i].bn[k][0];
			top[2] += t[i].bn[k][1];
		}
	}
	/* 8 writers, at most MGO_SEQ_INFLIGHT asking at once: the others' requests rode in
	 * someone else's findAndModify */
	ck_assert_msg(trips < SEQ_THREADS * SEQ_CALLS, "%llu findAndModify for %d requests",
		      (unsigned long long)trips, SEQ_THREADS * SEQ_CALLS);
	/* no hole: exactly 1..top marked (the fresh database's own events came first) */
	for (j = 0; j < 3; j++) {
		int64_t lo = 1, s;

		while ((size_t)lo < cap && !seen[j][lo])
			lo++;
		for (s = lo; s < lo + top[j]; s++)
			ck_assert_msg(seen[j][s], "sequence %zu: %lld not handed out", j, (long long)s);
		ck_assert(!seen[j][lo + top[j]]);
	}
	close_db(st);
}
END_TEST

/* ---- the events insert shared by concurrent writers ---- */

#define INS_THREADS 8
#define INS_CARDS 6

struct ins_writer {
	struct store *st;
	const char *pfx;
	int idx;
	enum core_rc rc;
};

static void *ins_writer_main(void *arg)
{
	struct ins_writer *w = arg;
	struct store_card_create in = {.state = "ready"};
	struct store_claim_result r;
	struct core_card *c = NULL;
	struct core_token t;
	char id[32];
	int k;

	for (k = 0; k < INS_CARDS && w->rc == CORE_OK; k++) {
		snprintf(id, sizeof(id), "%s%d-c%d", w->pfx, w->idx, k);
		in.id = in.title = id;
		if ((w->rc = store_card_create(w->st, &in, &bot, &c)) != CORE_OK)
			break;
		core_card_free(c);
		if ((w->rc = store_card_claim(w->st, id, "m", 60000, &bot, &r)) != CORE_OK)
			break;
		t = (struct core_token){"m", r.token.epoch, NULL};
		core_card_free(r.card);
		w->rc = store_card_release(w->st, id, &t, &bot, &c);
		core_card_free(c);
	}
	return NULL;
}

static void count_insert(void *ctx, const char *what)
{
	if (strcmp(what, "insert") == 0)
		atomic_fetch_add((atomic_int *)ctx, 1);
}

/* Runs INS_THREADS writers (create, claim, release of INS_CARDS cards each) on one store
 * with one seq allocation at a time, then checks the tail: each write's event exactly once,
 * seqs strictly increasing. */
static void ins_run(struct store *st, const char *pfx)
{
	static struct ins_writer w[INS_THREADS];
	pthread_t th[INS_THREADS];
	struct core_event *ev = NULL;
	size_t n = 0, i, got[INS_THREADS][INS_CARDS][3];
	int64_t next = 0, last = 0;
	int k, j;

	memset(got, 0, sizeof(got));
	mgo_of(st)->seq_inflight_max = 1; /* the others queue behind the one under way */
	for (i = 0; i < INS_THREADS; i++) {
		w[i] = (struct ins_writer){.st = st, .pfx = pfx, .idx = (int)i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, ins_writer_main, &w[i]), 0);
	}
	for (i = 0; i < INS_THREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < INS_THREADS; i++)
		ck_assert_int_eq(w[i].rc, CORE_OK);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	for (i = 0; i < n; i++) {
		int type = ev[i].type == CORE_EV_CARD_CREATED ? 0
			   : ev[i].type == CORE_EV_CARD_CLAIMED ? 1
			   : ev[i].type == CORE_EV_CARD_RELEASED ? 2 : -1;

		ck_assert_int_gt(ev[i].seq, last);
		last = ev[i].seq;
		if (type < 0 || !ev[i].card_id || strncmp(ev[i].card_id, pfx, strlen(pfx)) != 0 ||
		    sscanf(ev[i].card_id + strlen(pfx), "%d-c%d", &k, &j) != 2)
			continue;
		ck_assert(k >= 0 && k < INS_THREADS && j >= 0 && j < INS_CARDS);
		got[k][j][type]++;
	}
	store_events_free(ev, n);
	for (k = 0; k < INS_THREADS; k++)
		for (j = 0; j < INS_CARDS; j++)
			ck_assert_msg(got[k][j][0] == 1 && got[k][j][1] == 1 && got[k][j][2] == 1,
				      "%s%d-c%d: created %zu, claimed %zu, released %zu times", pfx, k, j,
				      got[k][j][0], got[k][j][1], got[k][j][2]);
}

/* Writers delivering at the same moment share the insert of their events as they share the
 * seqs: fewer inserts than writes, and the tail holds every write's event once, in seq
 * order. */
START_TEST(writers_share_the_events_insert)
{
	atomic_int inserts = 0;
	struct store_mongo_options o = {.test_read = count_insert, .test_ctx = &inserts};
	struct store *st;
	char db[64];

	db_name_new(db, sizeof(db));
	st = open_db_opts(db, &o, NULL);
	ins_run(st, "a");
	fprintf(stderr, "shared inserts: %d for %d writes\n", atomic_load(&inserts),
		INS_THREADS * INS_CARDS * 3);
	ck_assert_int_gt(atomic_load(&inserts), 0);
	ck_assert_msg(atomic_load(&inserts) < INS_THREADS * INS_CARDS * 3,
		      "%d inserts for %d writes", atomic_load(&inserts),
		      INS_THREADS * INS_CARDS * 3);
	close_db(st);
}
END_TEST

/* A duplicate key in a shared insert is each writer's own collision: the counter moved back
 * below the stored seqs (a backup restored; FerretDB's non-atomic $inc between processes)
 * makes shared inserts collide, and every writer whose documents the insert did not reach
 * re-reads what `events` holds and tries again with new seqs: no event lost, none twice, no
 * seq twice. */
START_TEST(a_duplicate_in_a_shared_insert_is_each_writers_retry)
{
	struct store *st = open_fresh();
	char id[16];
	int i;

	for (i = 0; i < 12; i++) { /* seqs 1.. taken */
		snprintf(id, sizeof(id), "pre%d", i);
		create(st, id, "ready");
	}
	raw_update(st, "counters", "events", "{\"$set\": {\"seq\": 2}}");
	ins_run(st, "a");
	close_db(st);
}
END_TEST

/* Three writers queued behind each other share one batch (one findAndModify, one ordered
 * insert); a seq of the second one's is taken already (another process's filler). The
 * first one's documents are in and it is told so; the insert stopped at the second one's,
 * so it and the third one behind it are told ALREADY_EXISTS (their collision path) and
 * none of their documents is in: exactly what each would have met inserting alone, in
 * that order. The batch cost two round trips, on one thread. */
struct ins_req {
	struct store *st;
	int idx;
	struct mgo_seq_req r;
	enum core_rc rc;
	uint64_t trips;
};

static void ins_req_docs(struct mgo_seq_req *r, mongoc_bulk_operation_t *bulk, int64_t ts)
{
	struct ins_req *x = r->ctx;
	int64_t first = r->last - r->n + 1, j;
	char id[32];
	bson_t *d;

	for (j = 0; j < r->n; j++) {
		d = bson_new();
		snprintf(id, sizeof(id), "t%d-%lld", x->idx, (long long)j);
		BSON_APPEND_UTF8(d, "_id", id);
		BSON_APPEND_INT64(d, "seq", first + j);
		BSON_APPEND_DATE_TIME(d, "ts", ts);
		BSON_APPEND_BOOL(d, MGO_FILLER, true);
		mongoc_bulk_operation_insert(bulk, d);
		bson_destroy(d);
	}
}

static void *ins_req_main(void *arg)
{
	struct ins_req *x = arg;
	struct mgo_conn c;

	if ((x->rc = mgo_conn_open(mgo_of(x->st), &c)) != CORE_OK)
		return NULL;
	x->trips = mgo_round_trips_here();
	x->rc = mgo_seqs_take_insert(&c, &x->r);
	x->trips = mgo_round_trips_here() - x->trips;
	mgo_conn_close(&c);
	return NULL;
}

static size_t queued(struct mgo *m)
{
	struct mgo_seq_req *p;
	size_t n = 0;

	pthread_mutex_lock(&m->seq_mu);
	for (p = m->seq_head; p; p = p->next)
		n++;
	pthread_mutex_unlock(&m->seq_mu);
	return n;
}

START_TEST(a_shared_insert_tells_each_writer_its_own_outcome)
{
	struct store *st = open_fresh();
	struct mgo *m = mgo_of(st);
	static struct ins_req x[3];
	pthread_t th[3];
	struct mgo_conn c;
	char doc[200];
	int64_t last = 0;
	int i, k;

	ck_assert_int_eq(mgo_conn_open(m, &c), CORE_OK);
	ck_assert_int_eq(mgo_seqs_take(&c, 1, NULL, NULL, 0, &last, NULL), CORE_OK);
	/* the batch will hand out last+1 .. last+6: x[1]'s first one is taken */
	snprintf(doc, sizeof(doc),
		 "{\"_id\": \"mine\", \"seq\": {\"$numberLong\": \"%lld\"}, "
		 "\"ts\": {\"$date\": {\"$numberLong\": \"%lld\"}}, \"filler\": true}",
		 (long long)(last + 3), (long long)server_now());
	raw_insert(st, "events", doc);
	pthread_mutex_lock(&m->seq_mu);
	m->seq_inflight_max = 0; /* every request queues */
	pthread_mutex_unlock(&m->seq_mu);
	for (i = 0; i < 3; i++) {
		x[i] = (struct ins_req){.st = st, .idx = i};
		x[i].r = (struct mgo_seq_req){.n = 2, .docs = ins_req_docs, .ctx = &x[i], .ndocs = 2};
		ck_assert_int_eq(pthread_create(&th[i], NULL, ins_req_main, &x[i]), 0);
		for (k = 0; queued(m) < (size_t)i + 1 && k < 5000; k++)
			nap_ms(1);
		ck_assert_uint_eq(queued(m), (size_t)i + 1);
	}
	pthread_mutex_lock(&m->seq_mu);
	m->seq_inflight_max = 1;
	pthread_cond_signal(&m->seq_head->cv); /* the first one queued goes */
	pthread_mutex_unlock(&m->seq_mu);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(x[i].rc, CORE_OK);
		ck_assert_int_eq(x[i].r.last, last + 2 * (i + 1)); /* queue order */
	}
	ck_assert_int_eq(x[0].r.ins_rc, CORE_OK);
	ck_assert_int_eq(x[1].r.ins_rc, CORE_ERR_ALREADY_EXISTS);
	ck_assert_int_eq(x[2].r.ins_rc, CORE_ERR_ALREADY_EXISTS);
	ck_assert_uint_eq(x[0].trips + x[1].trips + x[2].trips, 2);
	{
		static const char *const in[] = {"t0-0", "t0-1"}, *const out[] = {"t1-0", "t1-1",
										    "t2-0", "t2-1"};
		bson_t *d = NULL;
		size_t j;

		for (j = 0; j < 2; j++) {
			ck_assert_int_eq(mgo_find_by_id(c.events, in[j], &d), CORE_OK);
			ck_assert_msg(d != NULL, "%s not inserted", in[j]);
			bson_destroy(d);
			d = NULL;
		}
		for (j = 0; j < 4; j++) {
			ck_assert_int_eq(mgo_find_by_id(c.events, out[j], &d), CORE_OK);
			ck_assert_msg(d == NULL, "%s inserted after the duplicate", out[j]);
		}
	}
	mgo_conn_close(&c);
	close_db(st);
}
END_TEST

static void count_pulls(void *ctx, const char *what)
{
	if (strcmp(what, "pull") == 0)
		atomic_fetch_add((atomic_int *)ctx, 1);
}

/* Where updates are a read then a write (FerretDB: racy_updates, forced here on any server),
 * each writer's pull is done before it answers, but writers pulling at the same moment share
 * one bulk: fewer pulls than writes, and every outbox is empty as soon as its writes have
 * answered, with no puller left to do it. */
START_TEST(racy_writers_share_their_pulls_and_answer_pulled)
{
	atomic_int pulls = 0;
	struct store_mongo_options o = {.test_read = count_pulls, .test_ctx = &pulls};
	struct store *st;
	char db[64], id[32];
	int k, j;

	db_name_new(db, sizeof(db));
	st = open_db_opts(db, &o, NULL);
	mgo_of(st)->racy_updates = true;
	ins_run(st, "p");
	for (k = 0; k < INS_THREADS; k++)
		for (j = 0; j < INS_CARDS; j++) {
			snprintf(id, sizeof(id), "p%d-c%d", k, j);
			ck_assert_msg(raw_outbox_len(st, "cards", id) == 0, "%s: outbox left", id);
		}
	fprintf(stderr, "shared pulls: %d for %d writes\n", atomic_load(&pulls),
		INS_THREADS * INS_CARDS * 3);
	ck_assert_int_gt(atomic_load(&pulls), 0);
	ck_assert_msg(atomic_load(&pulls) < INS_THREADS * INS_CARDS * 3, "%d pulls for %d writes",
		      atomic_load(&pulls), INS_THREADS * INS_CARDS * 3);
	close_db(st);
}
END_TEST

void mongo_add_trips(TCase *tc)
{
	tcase_add_test(tc, renew_with_lease_is_one_round_trip);
	tcase_add_test(tc, renew_refusals_change_nothing);
	tcase_add_test(tc, card_and_board_in_one_round_trip);
	tcase_add_test(tc, writers_leave_the_pull_to_the_puller);
	tcase_add_test(tc, delete_with_a_full_outbox_records_card_deleted);
	tcase_add_test(tc, cycle_round_trips_per_request);
	tcase_add_test(tc, shared_seq_allocations_hand_each_seq_once);
	tcase_add_test(tc, writers_share_the_events_insert);
	tcase_add_test(tc, a_duplicate_in_a_shared_insert_is_each_writers_retry);
	tcase_add_test(tc, a_shared_insert_tells_each_writer_its_own_outcome);
	tcase_add_test(tc, racy_writers_share_their_pulls_and_answer_pulled);
}
