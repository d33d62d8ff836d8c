/* The Mongo twin's failure and race cases: an unreachable server, a connection cut under
 * an open store (nothing acknowledged), event seqs handed out twice (a counter behind the
 * events; parallel writers, which on FerretDB race on the counter) with no event lost, and
 * the races that need single-document atomicity (skipped, with the reason printed, on
 * FerretDB). */
#include "tests/store/test_store_mongo.h"

#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- a database failure ---- */

START_TEST(closed_port_is_store_unavailable)
{
	const char *uri = "mongodb://127.0.0.1:1/boardd_test_closed?serverSelectionTimeoutMS=300";
	struct store *st = (struct store *)1;
	char err[256];

	ck_assert_int_eq(store_open(uri, NULL, &st, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_ptr_null(st);
	ck_assert_ptr_null(strstr(err, "127.0.0.1:1")); /* the driver's words stay in the log */
}
END_TEST

/* A TCP relay to the test server that the test can cut: every connection through it dies. */
struct relay {
	int lfd;
	int port;
	pthread_t thread;
	pthread_mutex_t mu;
	int fds[64];
	size_t n;
	pthread_t pumps[32];
	size_t n_pumps;
	bool cut;
};

struct pump {
	struct relay *r;
	int a, b;
};

static void *pump_main(void *arg)
{
	struct pump *p = arg;
	struct pollfd pf[2] = {{p->a, POLLIN, 0}, {p->b, POLLIN, 0}};
	char buf[16384];
	ssize_t k;
	int i;

	while (poll(pf, 2, 200) >= 0) {
		pthread_mutex_lock(&p->r->mu);
		if (p->r->cut) {
			pthread_mutex_unlock(&p->r->mu);
			break;
		}
		pthread_mutex_unlock(&p->r->mu);
		for (i = 0; i < 2; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			k = read(pf[i].fd, buf, sizeof(buf));
			/* MSG_NOSIGNAL: a peer that hung up (mongo-java-server closes at once) is
			 * the end of this pump, not a SIGPIPE that kills the test. */
			if (k <= 0 || send(pf[1 - i].fd, buf, (size_t)k, MSG_NOSIGNAL) != k)
				goto out;
		}
	}
out:
	shutdown(p->a, SHUT_RDWR);
	shutdown(p->b, SHUT_RDWR);
	free(p);
	return NULL;
}

static int server_port(void)
{
	const char *p = strrchr(base_uri, ':');

	ck_assert_ptr_nonnull(p);
	return atoi(p + 1);
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)server_port())};
	struct pump *p;
	pthread_t t;
	int a, b;

	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	while ((a = accept(r->lfd, NULL, NULL)) >= 0) {
		b = socket(AF_INET, SOCK_STREAM, 0);
		if (b < 0 || connect(b, (struct sockaddr *)&to, sizeof(to)) != 0) {
			close(a);
			if (b >= 0)
				close(b);
			continue;
		}
		pthread_mutex_lock(&r->mu);
		if (r->n_pumps == sizeof(r->pumps) / sizeof(r->pumps[0])) {
			pthread_mutex_unlock(&r->mu);
			close(a);
			close(b);
			continue;
		}
		r->fds[r->n++] = a;
		r->fds[r->n++] = b;
		p = calloc(1, sizeof(*p));
		p->r = r;
		p->a = a;
		p->b = b;
		pthread_create(&t, NULL, pump_main, p);
		r->pumps[r->n_pumps++] = t;
		pthread_mutex_unlock(&r->mu);
	}
	return NULL;
}

/* Listens on `port` (0: any free one) and relays to the test server. */
static void relay_start(struct relay *r, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	socklen_t len = sizeof(sa);
	int one = 1;

	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	r->lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(r->lfd, 0);
	/* a restart on the port of a relay cut a moment ago */
	ck_assert_int_eq(setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	ck_assert_int_eq(bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(r->lfd, 16), 0);
	ck_assert_int_eq(getsockname(r->lfd, (struct sockaddr *)&sa, &len), 0);
	r->port = ntohs(sa.sin_port);
	pthread_create(&r->thread, NULL, relay_main, r);
}

/* Stops accepting and kills every relayed connection. */
static void relay_cut(struct relay *r)
{
	size_t i;

	pthread_mutex_lock(&r->mu);
	r->cut = true;
	for (i = 0; i < r->n; i++)
		shutdown(r->fds[i], SHUT_RDWR);
	pthread_mutex_unlock(&r->mu);
	shutdown(r->lfd, SHUT_RDWR);
	close(r->lfd);
	pthread_join(r->thread, NULL);
	for (i = 0; i < r->n_pumps; i++)
		pthread_join(r->pumps[i], NULL);
	for (i = 0; i < r->n; i++)
		close(r->fds[i]);
	pthread_mutex_destroy(&r->mu);
}

START_TEST(database_failure_acknowledges_nothing)
{
	struct relay r;
	char db[64], *uri, *host;
	struct store_mongo_options o = {0};
	struct store *st = NULL, *direct;
	struct store_claim_result cr;
	struct store_card_create in = {.id = "c2", .title = "c2"};
	struct core_card *c = NULL, **v = NULL;
	struct core_event *ev = NULL;
	size_t n = 0, i;
	int64_t next;
	char err[256];

	relay_start(&r, 0);
	db_name_new(db, sizeof(db));
	direct = open_db(db, 0, NULL);
	create(direct, "c1", "ready");
	ck_assert_int_gt(asprintf(&host, "mongodb://127.0.0.1:%d", r.port), 0);
	ck_assert_int_gt(asprintf(&uri, "%s/%s?serverSelectionTimeoutMS=500&connectTimeoutMS=500",
				  host, db),
			 0);
	ck_assert_int_eq(store_open(uri, &(struct store_open_options){.mongo = &o}, &st, err,
				    sizeof(err)),
			 CORE_OK);
	ck_assert_int_eq(store_ping(st), CORE_OK);

	relay_cut(&r);
	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_ptr_null(c);
	/* readiness is the breaker's state, which that failure set */
	ck_assert_int_eq(store_ping(st), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 60000, &bot, &cr),
			 CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_ptr_null(cr.card);
	ck_assert_int_eq(store_card_get(st, "c1", &c), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 10, 0, &ev, &n, &next),
			 CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_reaper_list_expired(st, 10, &v, &n), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_ptr_null(v);
	store_close(st);

	/* Nothing was acknowledged, and nothing happened. */
	ck_assert_int_eq(store_card_get(direct, "c2", &c), CORE_ERR_NOT_FOUND);
	c = NULL;
	ck_assert_int_eq(store_card_get(direct, "c1", &c), CORE_OK);
	ck_assert(!c->claim.present);
	core_card_free(c);
	ck_assert_int_eq(store_events_list(direct, NULL, NULL, 0, 1000, 0, &ev, &n, &next),
			 CORE_OK);
	for (i = 0; i < n; i++)
		ck_assert(ev[i].type != CORE_EV_CARD_CLAIMED &&
			  !(ev[i].card_id && strcmp(ev[i].card_id, "c2") == 0));
	store_events_free(ev, n);
	free(uri);
	free(host);
	close_db(direct);
}
END_TEST

/* ---- the breaker (mongo_breaker.c) ---- */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polls store_ping until it answers want; its last answer (10 s at most). */
static enum core_rc ping_until(struct store *st, enum core_rc want)
{
	enum core_rc rc = store_ping(st);
	int i;

	for (i = 0; i < 200 && rc != want; i++) {
		nap_ms(50);
		rc = store_ping(st);
	}
	return rc;
}

/* With the database gone, ops answer at once (an op that waits for a server waits 30 s
 * here), readiness says so without a round trip, and the prober brings it back. */
START_TEST(unreachable_database_answers_at_once_then_recovers)
{
	struct relay r;
	char db[64], *uri, err[256];
	struct store_mongo_options o = {0};
	struct store *st = NULL, *direct;
	struct core_card *c = NULL;
	struct store_card_create in = {.id = "c2", .title = "c2"};
	int64_t t0, took;
	int i, port;

	relay_start(&r, 0);
	port = r.port;
	db_name_new(db, sizeof(db));
	direct = open_db(db, 0, NULL);
	create(direct, "c1", "ready");
	ck_assert_int_gt(asprintf(&uri, "mongodb://127.0.0.1:%d/%s?serverSelectionTimeoutMS=30000",
				  port, db),
			 0);
	ck_assert_int_eq(store_open(uri, &(struct store_open_options){.mongo = &o}, &st, err,
				    sizeof(err)),
			 CORE_OK);
	ck_assert_int_eq(store_card_get(st, "c1", &c), CORE_OK);
	core_card_free(c);
	c = NULL;
	ck_assert_int_eq(store_ping(st), CORE_OK);

	relay_cut(&r);
	t0 = mono_ms();
	/* the first meets the dropped connection; the others the open breaker */
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(store_card_get(st, "c1", &c), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(store_ping(st), CORE_ERR_STORE_UNAVAILABLE);
	took = mono_ms() - t0;
	ck_assert_msg(took < 10000, "23 answers took %lld ms (one server selection: 30 s)",
		      (long long)took);

	relay_start(&r, port); /* the database is back */
	ck_assert_int_eq(ping_until(st, CORE_OK), CORE_OK);
	ck_assert_int_eq(store_card_get(st, "c1", &c), CORE_OK);
	core_card_free(c);
	c = NULL;
	ck_assert_int_eq(store_card_get(direct, "c2", &c), CORE_ERR_NOT_FOUND);
	store_close(st);
	relay_cut(&r);
	free(uri);
	close_db(direct);
}
END_TEST

/* The relay back after a second, from another thread. */
struct relay_back {
	struct relay *r;
	int port;
};

static void *relay_back_main(void *arg)
{
	struct relay_back *b = arg;
	struct timespec ts = {1, 0};

	nanosleep(&ts, NULL);
	relay_start(b->r, b->port);
	return NULL;
}

/* A keyed write's answer that meets an unreachable database is recorded once it is back
 * (store_idem_end waits the blip out): else the reservation stayed pending, a repeat was
 * told "in flight" for 30 s and then wrote everything again (a batch of 1000 cut mid-way:
 * 1485 cards). */
START_TEST(idem_answer_recorded_after_a_blip)
{
	struct relay r;
	struct relay_back back;
	pthread_t th;
	char db[64], *uri, err[256];
	struct store_mongo_options o = {0};
	struct store *st = NULL, *direct;
	struct store_idem k = {.key = "1:t POST /v1/cards k1", .fp = "f1"};
	struct store_idem again = {.key = "1:t POST /v1/cards k1", .fp = "f1"};

	relay_start(&r, 0);
	back = (struct relay_back){.r = &r, .port = r.port};
	db_name_new(db, sizeof(db));
	direct = open_db(db, 0, NULL);
	ck_assert_int_gt(asprintf(&uri, "mongodb://127.0.0.1:%d/%s?serverSelectionTimeoutMS=2000",
				  r.port, db),
			 0);
	ck_assert_int_eq(store_open(uri, &(struct store_open_options){.mongo = &o}, &st, err,
				    sizeof(err)),
			 CORE_OK);
	ck_assert_int_eq(store_idem_begin(st, &k), CORE_OK);
	ck_assert_int_eq(k.state, STORE_IDEM_NEW);
	relay_cut(&r);
	ck_assert_int_eq(pthread_create(&th, NULL, relay_back_main, &back), 0);
	ck_assert_int_eq(store_idem_end(st, &k, 201, "{\"id\":\"c1\"}", "/v1/cards/c1"), CORE_OK);
	pthread_join(th, NULL);
	ck_assert_int_eq(store_idem_begin(direct, &again), CORE_OK);
	ck_assert_int_eq(again.state, STORE_IDEM_DONE);
	ck_assert_int_eq(again.status, 201);
	ck_assert_str_eq(again.body, "{\"id\":\"c1\"}");
	store_idem_release(&again);
	store_close(st);
	relay_cut(&r);
	free(uri);
	close_db(direct);
}
END_TEST

static uint64_t breaker_opens(struct mgo *m)
{
	uint64_t n;

	pthread_mutex_lock(&m->brk_mu);
	n = m->brk.opens;
	pthread_mutex_unlock(&m->brk_mu);
	return n;
}

/* Which op failures open it: one that says the database could not be reached, from an op
 * that began after the last close; not one of an op that began before it (it waited out a
 * timeout meanwhile), nor any other error. */
START_TEST(breaker_opens_on_fresh_unreachable_errors_only)
{
	struct store *st = open_fresh();
	struct mgo *m = mgo_of(st);
	struct mgo_conn old, c;
	bson_error_t sel, other;
	bson_t *doc = NULL;
	int64_t last;
	uint64_t n0;

	bson_set_error(&sel, MONGOC_ERROR_SERVER_SELECTION, MONGOC_ERROR_SERVER_SELECTION_FAILURE,
		       "No suitable servers found (test)");
	bson_set_error(&other, MONGOC_ERROR_SERVER, 2, "BadValue (test)");
	ck_assert_int_eq(mgo_conn_open(m, &old), CORE_OK);
	n0 = breaker_opens(m);
	/* the driver's monitor loses the server, then finds it: a close */
	mgo_breaker_topology(m, true, false);
	ck_assert_uint_eq(breaker_opens(m), n0 + 1);
	mgo_breaker_topology(m, false, true);
	ck_assert_int_eq(store_ping(st), CORE_OK);
	/* an op older than that close */
	mgo_breaker_note("find", &sel);
	mgo_conn_close(&old);
	ck_assert_uint_eq(breaker_opens(m), n0 + 1);
	ck_assert_int_eq(store_ping(st), CORE_OK);
	/* an error that is not about reachability: the op goes on */
	ck_assert_int_eq(mgo_conn_open(m, &c), CORE_OK);
	mgo_breaker_note("find", &other);
	ck_assert_int_eq(mgo_find_by_id(c.cards, "nope", &doc), CORE_OK);
	ck_assert_ptr_null(doc);
	mgo_conn_close(&c);
	ck_assert_uint_eq(breaker_opens(m), n0 + 1);
	/* a fresh one: the op's further reads fail at once (a live server would answer "none"),
	 * its end opens the breaker; the prober then finds the (live) server and closes it */
	ck_assert_int_eq(mgo_conn_open(m, &c), CORE_OK);
	mgo_breaker_note("find", &sel);
	ck_assert_int_eq(mgo_find_by_id(c.cards, "nope", &doc), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(mgo_counter_add(&c, "nope", 1, &last), CORE_ERR_STORE_UNAVAILABLE);
	mgo_conn_close(&c);
	ck_assert_uint_eq(breaker_opens(m), n0 + 2);
	ck_assert_int_eq(ping_until(st, CORE_OK), CORE_OK);
	close_db(st);
}
END_TEST

START_TEST(unreachable_errors_are_told_apart)
{
	static const struct {
		uint32_t domain, code;
		bool unreachable;
	} rows[] = {
		{MONGOC_ERROR_SERVER_SELECTION, MONGOC_ERROR_SERVER_SELECTION_FAILURE, true},
		{MONGOC_ERROR_SERVER_SELECTION, MONGOC_ERROR_SERVER_SELECTION_BAD_WIRE_VERSION, false},
		{MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_SOCKET, true},
		{MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_CONNECT, true},
		{MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_NAME_RESOLUTION, true},
		{MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_NOT_ESTABLISHED, true},
		{MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_INVALID_TYPE, false},
		{MONGOC_ERROR_SERVER, 10107, true}, /* NotWritablePrimary */
		{MONGOC_ERROR_SERVER, 91, true},    /* ShutdownInProgress */
		{MONGOC_ERROR_SERVER, 11000, false}, /* duplicate key */
		{MONGOC_ERROR_SERVER, 2, false},     /* BadValue */
		{MONGOC_ERROR_SERVER, 50, false},    /* MaxTimeMSExpired: the server answered */
		{MONGOC_ERROR_WRITE_CONCERN, 10107, false}, /* the write happened on the primary */
		{MONGOC_ERROR_CLIENT, MONGOC_ERROR_CLIENT_AUTHENTICATE, false},
		{MONGOC_ERROR_COMMAND, MONGOC_ERROR_COMMAND_INVALID_ARG, false},
	};
	bson_error_t e;
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		bson_set_error(&e, rows[i].domain, rows[i].code, "row %zu", i);
		ck_assert_msg(mgo_error_unreachable(&e) == rows[i].unreachable,
			      "row %zu (domain %u, code %u)", i, rows[i].domain, rows[i].code);
	}
}
END_TEST

/* ---- event seqs handed out twice: nothing lost ---- */

/* The tail after `after`, following next until `want` events are read or 10 s passed (a
 * fresh hole holds it back for up to the gap grace). Caller frees with store_events_free. */
static struct core_event *tail_collect(struct store *st, int64_t after, size_t want, size_t *n)
{
	struct core_event *all = NULL, *page = NULL, *grown;
	size_t k = 0;
	int64_t next = after;
	int round;

	*n = 0;
	for (round = 0; round < 50 && *n < want; round++) {
		ck_assert_int_eq(
			store_events_list(st, NULL, NULL, next, 1000, 200, &page, &k, &next), CORE_OK);
		grown = realloc(all, (*n + k + 1) * sizeof(*all));
		ck_assert_ptr_nonnull(grown);
		all = grown;
		memcpy(all + *n, page, k * sizeof(*page));
		*n += k;
		free(page); /* its events moved into all */
		page = NULL;
	}
	return all;
}

static int64_t tail_end(struct store *st)
{
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t next;

	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	ck_assert_uint_lt(n, 1000);
	store_events_free(ev, n);
	return next;
}

/* Asserts the default board's events are board_seq 1..n, each once (DESIGN §11); returns n.
 * Waits (bounded) for a hole to fill: a write's events may still be on their way. */
static size_t board_gap_free(struct store *st, bool strict)
{
	struct core_event *ev = NULL;
	size_t n = 0, i, got = 0;
	int64_t next = 0, after = 0, prev = 0;
	int rounds;

	/* Not strict (two stores writing at once): each once, in increasing board_seq; a
	 * server whose findAndModify is not atomic under load may leave a hole, stepped over
	 * after the gap grace (see conformance_events.c). Read until a wait brings nothing. */
	for (rounds = 0; rounds < 20; rounds++, after = next) {
		ck_assert_int_eq(store_events_list_board(st, "default", after, 1000,
							 strict ? 0 : 3000, &ev, &n, &next),
				 CORE_OK);
		for (i = 0; i < n; i++, got++) {
			ck_assert_msg(strict ? ev[i].board_seq == (int64_t)got + 1
					     : ev[i].board_seq > prev,
				      "event %zu (seq %lld) has board_seq %lld", got,
				      (long long)ev[i].seq, (long long)ev[i].board_seq);
			prev = ev[i].board_seq;
		}
		store_events_free(ev, n);
		if (!n)
			break;
	}
	return got;
}

/* The seq of the one event of `type` about card `id` in ev (-1: none; two fail). */
static int64_t seq_of(const struct core_event *ev, size_t n, const char *id,
		      enum core_event_type type)
{
	int64_t seq = -1;
	size_t i;

	for (i = 0; i < n; i++) {
		if (ev[i].type != type || !ev[i].card_id || strcmp(ev[i].card_id, id) != 0)
			continue;
		ck_assert_msg(seq < 0, "%s: %s twice in the tail", id, core_event_type_name(type));
		seq = ev[i].seq;
	}
	return seq;
}

/* A claim, then the filing and its release in one owned write: the three events, in order. */
static void assert_filed_events(const struct core_event *ev, size_t n, const char *id)
{
	int64_t claimed = seq_of(ev, n, id, CORE_EV_CARD_CLAIMED);
	int64_t filed = seq_of(ev, n, id, CORE_EV_CARD_STATE_CHANGED);
	int64_t released = seq_of(ev, n, id, CORE_EV_CARD_RELEASED);

	ck_assert_msg(claimed > 0 && filed > 0 && released > 0,
		      "%s: events missing from the tail: claimed %lld, state_changed %lld, "
		      "released %lld (of %zu read)",
		      id, (long long)claimed, (long long)filed, (long long)released, n);
	ck_assert_msg(claimed < filed && filed < released, "%s: events out of order", id);
}

static struct store_owned_write filing(struct core_token t)
{
	return (struct store_owned_write){.kind = STORE_OWNED_STATE, .token = t, .state = "done",
					  .reason = "run_finished", .release = true};
}

static enum core_rc file_and_release(struct store *st, const char *id, const char *marker)
{
	struct store_claim_result r;
	struct store_owned_write w;
	struct core_card *c = NULL;
	enum core_rc rc = store_card_claim(st, id, marker, 60000, &bot, &r);

	if (rc != CORE_OK)
		return rc;
	w = filing((struct core_token){.marker = marker, .epoch = r.token.epoch});
	core_card_free(r.card);
	rc = store_card_owned_write(st, id, &w, &bot, &c);
	core_card_free(c);
	return rc;
}

/* The events counter behind the events already stored (restored from an older backup, or
 * moved back by a non-atomic $inc on FerretDB): the seqs it hands out are taken. The
 * insert's duplicate-key error is a seq collision, not a redelivery: the events get new
 * seqs, and the tail serves every one of them, in the write's order, at once (a seq handed
 * out and left unused is filled, so no hole holds the tail back). Behind by 1, the filing's
 * two seqs are one taken and one free; by 2, both taken; reset to 0, far behind. */
START_TEST(counter_behind_loses_no_event)
{
	/* The last two: the whole counters document restored from an older backup, the
	 * board's counter with it (a board_seq handed out twice is taken anew, no twin). */
	static const char *const back[] = {"{\"$inc\": {\"seq\": -1}}",
					   "{\"$inc\": {\"seq\": -2}}", "{\"$set\": {\"seq\": 0}}",
					   "{\"$inc\": {\"seq\": -2, \"b.default\": -2}}",
					   "{\"$set\": {\"seq\": 0, \"b.default\": 0}}"};
	struct store *st = open_fresh();
	struct store_owned_write w;
	struct core_event *ev = NULL;
	struct core_card *c = NULL;
	size_t n = 0, i;
	int64_t after, next;
	char id[16];

	for (i = 0; i < sizeof(back) / sizeof(back[0]); i++) {
		snprintf(id, sizeof(id), "c%zu", i);
		create(st, id, "in_progress");
		after = tail_end(st);
		w = filing(claim(st, id, "w1"));
		raw_update(st, "counters", "events", back[i]);
		ck_assert_int_eq(store_card_owned_write(st, id, &w, &bot, &c), CORE_OK);
		core_card_free(c);
		c = NULL;
		ck_assert_int_eq(store_events_list(st, NULL, NULL, after, 1000, 0, &ev, &n, &next),
				 CORE_OK);
		assert_filed_events(ev, n, id);
		ck_assert_uint_eq(n, 3);
		store_events_free(ev, n);
		ck_assert_uint_ge(board_gap_free(st, true), 3 * (i + 1));
	}
	close_db(st);
}
END_TEST

#define PAR_WRITERS 8
#define PAR_CARDS 3

struct par_writer {
	struct store *st;
	pthread_barrier_t *go;
	int w;
	enum core_rc rc;
};

static void *par_main(void *arg)
{
	struct par_writer *x = arg;
	char id[16], marker[16];
	int i;

	pthread_barrier_wait(x->go);
	for (i = 0; i < PAR_CARDS && x->rc == CORE_OK; i++) {
		snprintf(id, sizeof(id), "p%d-%d", x->w, i);
		snprintf(marker, sizeof(marker), "w%d", x->w);
		x->rc = file_and_release(x->st, id, marker);
	}
	return NULL;
}

/* The reaper's shape, in two replicas: several writers at once, each on its own cards, each
 * filing and releasing in one owned write, half of them through a second store on the same
 * database. Every event of every write reaches the tail exactly once, in its write's order.
 * On FerretDB the two stores would race on the events counter, whose findAndModify is not
 * atomic there: a collision sends a write's events through the outbox and the maintenance
 * drain, which can deliver them after the card's next write — a race that passes or fails
 * by luck. So on FerretDB every writer goes through one store (whose own writers take turns
 * on the counter), and the two-store race runs on MongoDB only. */
START_TEST(parallel_writers_lose_no_event)
{
	char db[64];
	struct store *st, *st2;
	struct par_writer x[PAR_WRITERS];
	pthread_t t[PAR_WRITERS];
	pthread_barrier_t go;
	struct core_event *ev;
	char id[16];
	size_t n = 0;
	int64_t after;
	int w, i;

	db_name_new(db, sizeof(db));
	st = open_db(db, 0, NULL);
	if (is_ferretdb()) {
		printf("parallel_writers_lose_no_event: one store on FerretDB (its counter's "
		       "findAndModify is not atomic across processes); two stores need MongoDB\n");
		st2 = st;
	} else {
		st2 = open_db(db, 0, NULL);
	}
	for (w = 0; w < PAR_WRITERS; w++)
		for (i = 0; i < PAR_CARDS; i++) {
			snprintf(id, sizeof(id), "p%d-%d", w, i);
			create(st, id, "in_progress");
		}
	after = tail_end(st);
	pthread_barrier_init(&go, NULL, PAR_WRITERS);
	for (w = 0; w < PAR_WRITERS; w++) {
		x[w] = (struct par_writer){.st = w % 2 ? st2 : st, .go = &go, .w = w};
		pthread_create(&t[w], NULL, par_main, &x[w]);
	}
	for (w = 0; w < PAR_WRITERS; w++)
		pthread_join(t[w], NULL);
	pthread_barrier_destroy(&go);
	for (w = 0; w < PAR_WRITERS; w++)
		ck_assert_msg(x[w].rc == CORE_OK, "writer %d: %s", w, core_rc_code(x[w].rc));
	ev = tail_collect(st, after, PAR_WRITERS * PAR_CARDS * 3, &n);
	for (w = 0; w < PAR_WRITERS; w++)
		for (i = 0; i < PAR_CARDS; i++) {
			snprintf(id, sizeof(id), "p%d-%d", w, i);
			assert_filed_events(ev, n, id);
		}
	ck_assert_uint_eq(n, PAR_WRITERS * PAR_CARDS * 3);
	store_events_free(ev, n);
	ck_assert_uint_ge(board_gap_free(st, false), PAR_WRITERS * PAR_CARDS * 4);
	if (st2 != st)
		close_db(st2);
	close_db(st);
}
END_TEST

/* ---- races (need single-document atomicity: MongoDB only) ---- */

struct racer {
	struct store *st;
	char marker[16];
	enum core_rc rc;
};

static void *race_claim(void *arg)
{
	struct racer *x = arg;
	struct store_claim_result r;

	x->rc = store_card_claim(x->st, "c1", x->marker, 60000, &bot, &r);
	core_card_free(r.card);
	return NULL;
}

START_TEST(claim_race_has_one_winner)
{
	struct store *st;
	struct racer x[8];
	pthread_t t[8];
	int i, wins = 0, round;

	if (is_ferretdb()) {
		printf("SKIP claim_race_has_one_winner: FerretDB 1.24's single-document updates "
		       "are not atomic under concurrency; this race needs MongoDB\n");
		return;
	}
	st = open_fresh();
	for (round = 0; round < 5; round++) {
		create(st, "c1", "ready");
		for (i = 0; i < 8; i++) {
			x[i] = (struct racer){.st = st};
			snprintf(x[i].marker, sizeof(x[i].marker), "w%d", i);
			pthread_create(&t[i], NULL, race_claim, &x[i]);
		}
		for (i = 0, wins = 0; i < 8; i++) {
			pthread_join(t[i], NULL);
			ck_assert(x[i].rc == CORE_OK || x[i].rc == CORE_ERR_CLAIM_CONFLICT);
			wins += x[i].rc == CORE_OK;
		}
		ck_assert_int_eq(wins, 1);
		ck_assert_int_eq(store_card_delete(st, "c1", &bot), CORE_OK);
	}
	close_db(st);
}
END_TEST

static void *race_label(void *arg)
{
	struct racer *x = arg;
	const char *one[] = {x->marker};
	struct core_strv add = {(char **)one, 1};
	struct core_card *c = NULL;

	x->rc = store_card_labels_adjust(x->st, "c1", &add, NULL, &bot, &c);
	core_card_free(c);
	return NULL;
}

/* ADR-096 §9: adjust is guarded on the labels read and re-derived on a miss, so concurrent
 * relative adds all survive (no lost update). */
START_TEST(labels_adjust_race_loses_nothing)
{
	struct store *st;
	struct racer x[8];
	pthread_t t[8];
	struct core_card *c = NULL;
	int i;

	if (is_ferretdb()) {
		printf("SKIP labels_adjust_race_loses_nothing: FerretDB 1.24's single-document "
		       "updates are not atomic under concurrency; this race needs MongoDB\n");
		return;
	}
	st = open_fresh();
	create(st, "c1", "ready");
	for (i = 0; i < 8; i++) {
		x[i] = (struct racer){.st = st};
		snprintf(x[i].marker, sizeof(x[i].marker), "l%d", i);
		pthread_create(&t[i], NULL, race_label, &x[i]);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(x[i].rc, CORE_OK);
	}
	ck_assert_int_eq(store_card_get(st, "c1", &c), CORE_OK);
	ck_assert_uint_eq(c->labels.n, 8);
	core_card_free(c);
	close_db(st);
}
END_TEST

void mongo_add_faults(TCase *tc)
{
	tcase_add_test(tc, closed_port_is_store_unavailable);
	tcase_add_test(tc, database_failure_acknowledges_nothing);
	tcase_add_test(tc, unreachable_database_answers_at_once_then_recovers);
	tcase_add_test(tc, idem_answer_recorded_after_a_blip);
	tcase_add_test(tc, breaker_opens_on_fresh_unreachable_errors_only);
	tcase_add_test(tc, unreachable_errors_are_told_apart);
	tcase_add_test(tc, counter_behind_loses_no_event);
	tcase_add_test(tc, parallel_writers_lose_no_event);
	tcase_add_test(tc, claim_race_has_one_winner);
	tcase_add_test(tc, labels_adjust_race_loses_nothing);
}
