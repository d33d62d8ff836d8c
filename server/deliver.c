/* The deliverer thread pool (DESIGN §14, §16): threads lease due deliveries into
 * per-subscription queues and attempt them (deliver_attempt.c), one per subscription at a
 * time, so one receiver cannot delay another (the scheduler, below). */
#include "server/deliver_attempt.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The scheduler's bounds (DESIGN §16 "one receiver cannot delay another"). */
#define EXTRA_MAX 64        /* threads started above --deliverers while receivers hang */
#define THREADS_MAX 128     /* slots: --deliverers (64 at most) + EXTRA_MAX */
#define SUBQ_MAX 32         /* leased deliveries waiting behind one subscription's attempt */
#define QUEUED_MAX 1024     /* ... behind all of them */
#define LEASE_TURN 64       /* leases per turn of the leaser before it looks at the queues */
#define LEASE_MARGIN_MS 1000 /* a queued delivery is attempted only while its lease outlives
			      * the timeout by this much */
#define SURPLUS_IDLE_US ((int64_t)2 * 1000000) /* a thread above --deliverers idle this long
						   * exits */

/* One leased delivery waiting for its subscription's turn. */
struct dq {
	struct store_delivery *dl;
	int64_t leased_us; /* server_deliver_mono_us() when the lease was taken */
	struct dq *next;
};

/* One subscription with deliveries leased here: its queue and whether an attempt of it is in
 * flight (at most one per subscription). Freed when both are over. */
struct subq {
	char *board, *sub;
	struct dq *head, *tail;
	size_t n;
	bool busy;
	struct subq *next;
};

struct slot {
	pthread_t t;
	bool used, exited;
	unsigned idx;
	struct server_deliver *d;
};

struct server_deliver {
	struct store *st;
	struct server_deliver_config cfg;
	char owner[160];
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC: stop, work queued, the leaser done */
	bool stop;
	/* Under mu: */
	struct slot slots[THREADS_MAX];
	unsigned n_threads;   /* alive */
	unsigned n_free;      /* alive and not in an attempt */
	unsigned next_idx;    /* the next thread's number (its rnd seed) */
	bool leasing;         /* one thread leases at a time */
	int64_t lease_after;  /* mono_us: no lease before (the last turn found nothing due) */
	struct subq *subs;    /* subscriptions with queued or in-flight deliveries */
	struct subq *rr;      /* round robin: where the next look for work starts */
	size_t queued;
	uint64_t parked;      /* leased but not queued (a queue full), for the log */
};

/* ---- the scheduler: per-subscription queues, one attempt per subscription at a time ----
 *
 * The store leases the oldest due delivery of a subscription whose queue here is not full;
 * the deliverer makes that fair. A free thread leases (one at a time) and files each delivery
 * in its subscription's queue here; any free thread takes the head of a subscription that has
 * no attempt in flight, round robin over the subscriptions. So a hung receiver holds one
 * thread per subscription for at most the timeout, up to SUBQ_MAX of its later deliveries
 * wait in its own queue, leased, and the rest wait in the store, unleased, while the leaser
 * goes past them to the other subscriptions' (DESIGN §16). Whenever every thread
 * is in an attempt another is started (up to --deliverers + EXTRA_MAX), so one is always free
 * to lease; a thread above --deliverers that has been idle SURPLUS_IDLE_US exits.
 *
 * A queued delivery is attempted only while its lease still outlives the timeout by
 * LEASE_MARGIN_MS; one that waited longer, or that finds the queues full (QUEUED_MAX in all;
 * its own only when out of memory cut the lease's skip list), is left leased and
 * unattempted: the lease expires and it is leased again (here or by another replica), its
 * attempts unchanged. Never two attempts of one delivery at a time. */

static struct subq *subq_get(struct server_deliver *d, const char *board, const char *sub)
{
	struct subq *s;

	for (s = d->subs; s; s = s->next)
		if (strcmp(s->board, board) == 0 && strcmp(s->sub, sub) == 0)
			return s;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->board = strdup(board)) || !(s->sub = strdup(sub))) {
		if (s)
			free(s->board);
		free(s);
		return NULL;
	}
	s->next = d->subs;
	d->subs = s;
	return s;
}

/* Frees s once it has nothing queued or in flight. */
static void subq_done(struct server_deliver *d, struct subq *s)
{
	struct subq **pp;

	if (s->busy || s->head)
		return;
	for (pp = &d->subs; *pp != s; pp = &(*pp)->next)
		;
	*pp = s->next;
	if (d->rr == s)
		d->rr = s->next;
	free(s->board);
	free(s->sub);
	free(s);
}

static void park(struct server_deliver *d, struct store_delivery *dl, const char *why)
{
	if (d->parked++ % 1024 == 0)
		fprintf(stderr, "boardd: delivery %s left leased for later (%s; %" PRIu64
			" so far)\n", dl->id, why, d->parked);
	store_delivery_free(dl);
}

/* Files dl (ours now) in its subscription's queue; true when it can be attempted at once
 * (the subscription has no attempt in flight). */
static bool enqueue(struct server_deliver *d, struct store_delivery *dl)
{
	struct subq *s = subq_get(d, dl->board, dl->sub);
	struct dq *q = NULL;

	if (s && s->n < SUBQ_MAX && d->queued < QUEUED_MAX)
		q = malloc(sizeof(*q));
	if (!q) {
		park(d, dl, s ? "its subscription's queue is full" : "out of memory");
		if (s)
			subq_done(d, s);
		return false;
	}
	*q = (struct dq){.dl = dl, .leased_us = server_deliver_mono_us()};
	if (s->tail)
		s->tail->next = q;
	else
		s->head = q;
	s->tail = q;
	s->n++;
	d->queued++;
	return !s->busy;
}

/* The next subscription with a queued delivery and no attempt in flight, round robin. */
static struct subq *pick_ready(struct server_deliver *d)
{
	struct subq *s = d->rr ? d->rr : d->subs, *start = s;

	if (!s)
		return NULL;
	do {
		if (s->head && !s->busy) {
			d->rr = s->next;
			return s;
		}
		s = s->next ? s->next : d->subs;
	} while (s != start);
	return NULL;
}

static void *worker_main(void *arg);

/* Under mu: a new thread in a free slot (joining the slots of threads that exited). */
static bool spawn(struct server_deliver *d)
{
	struct slot *sl = NULL;
	unsigned i;

	for (i = 0; i < THREADS_MAX; i++) {
		if (d->slots[i].used && d->slots[i].exited) {
			pthread_join(d->slots[i].t, NULL);
			d->slots[i].used = false;
		}
		if (!d->slots[i].used && !sl)
			sl = &d->slots[i];
	}
	if (!sl)
		return false;
	*sl = (struct slot){.used = true, .idx = d->next_idx++, .d = d};
	if (pthread_create(&sl->t, NULL, worker_main, sl) != 0) {
		sl->used = false;
		return false;
	}
	d->n_threads++;
	d->n_free++;
	return true;
}

/* The subscriptions whose queue is full (copies: a queue may drain and go while the leaser
 * runs without mu); under mu. The lease passes over their deliveries, so a hung receiver's
 * backlog is neither leased to be parked nor walked ahead of the others' (DESIGN §16). Few
 * or none: a queue is full only while its receiver is slow. On OOM the list is cut short,
 * which only leases more to be parked. */
static size_t full_subs(struct server_deliver *d, struct store_sub_ref **out)
{
	struct store_sub_ref *v = NULL, *nv;
	struct subq *s;
	size_t n = 0;

	for (s = d->subs; s; s = s->next) {
		char *b, *name;

		if (s->n < SUBQ_MAX)
			continue;
		nv = realloc(v, (n + 1) * sizeof(*v));
		if (!nv)
			break;
		v = nv;
		b = strdup(s->board);
		name = strdup(s->sub);
		if (!b || !name) {
			free(b);
			free(name);
			break;
		}
		v[n++] = (struct store_sub_ref){.board = b, .name = name};
	}
	*out = v;
	return n;
}

static void subs_refs_free(struct store_sub_ref *v, size_t n)
{
	while (n-- > 0) {
		free((char *)v[n].board);
		free((char *)v[n].name);
	}
	free(v);
}

/* Leases up to LEASE_TURN deliveries into the queues, until one can be attempted at once;
 * how many it leased. Called without mu, by the one thread that has `leasing`. */
static int lease_turn(struct server_deliver *d)
{
	struct store_sub_ref *skip;
	size_t n_skip;
	int n;

	pthread_mutex_lock(&d->mu);
	n_skip = full_subs(d, &skip);
	pthread_mutex_unlock(&d->mu);
	for (n = 0; n < LEASE_TURN;) {
		struct store_delivery *dl = NULL;
		bool ready, stop;

		if (store_delivery_lease_except(d->st, d->owner, d->cfg.lease_ms, skip, n_skip,
						&dl) != CORE_OK ||
		    !dl)
			break;
		n++;
		pthread_mutex_lock(&d->mu);
		ready = enqueue(d, dl);
		stop = d->stop;
		if (!ready && !stop) { /* this one may have filled its queue */
			subs_refs_free(skip, n_skip);
			n_skip = full_subs(d, &skip);
		}
		pthread_mutex_unlock(&d->mu);
		if (ready || stop)
			break;
	}
	subs_refs_free(skip, n_skip);
	return n;
}

/* Attempts q's delivery unless it waited so long its lease may end mid-attempt; frees q. */
static void run_queued(struct server_deliver *d, struct dq *q, unsigned short rnd[3])
{
	int64_t max_wait_ms = d->cfg.lease_ms - d->cfg.timeout_ms - LEASE_MARGIN_MS;

	if (max_wait_ms < 250)
		max_wait_ms = 250; /* a lease barely longer than the timeout: attempt fresh ones */
	if (server_deliver_mono_us() - q->leased_us <= max_wait_ms * 1000) {
		server_deliver_attempt(d->st, &d->cfg, d->owner, q->dl, rnd);
	} else {
		pthread_mutex_lock(&d->mu);
		park(d, q->dl, "it waited behind its subscription past its lease's margin");
		pthread_mutex_unlock(&d->mu);
		q->dl = NULL;
	}
	store_delivery_free(q->dl);
	free(q);
}

static void wait_until(struct server_deliver *d, int64_t until_us)
{
	struct timespec ts = {.tv_sec = until_us / 1000000,
			      .tv_nsec = (long)(until_us % 1000000) * 1000};

	pthread_cond_timedwait(&d->cv, &d->mu, &ts);
}

static void *worker_main(void *arg)
{
	struct slot *me = arg;
	struct server_deliver *d = me->d;
	unsigned short rnd[3];
	int64_t seed = server_deliver_mono_us() ^ ((int64_t)me->idx << 20) ^ (int64_t)getpid();
	int64_t idle_since = server_deliver_mono_us(), now;

	rnd[0] = (unsigned short)seed;
	rnd[1] = (unsigned short)(seed >> 16);
	rnd[2] = (unsigned short)(seed >> 32);
	pthread_mutex_lock(&d->mu);
	while (!d->stop) {
		struct subq *s = pick_ready(d);
		int n;

		if (s) {
			struct dq *q = s->head;

			s->head = q->next;
			if (!s->head)
				s->tail = NULL;
			s->n--;
			d->queued--;
			s->busy = true;
			d->n_free--;
			/* Keep one thread free to lease while this one may wait on a receiver. */
			if (d->n_free == 0 && d->n_threads < d->cfg.threads + EXTRA_MAX)
				spawn(d);
			pthread_mutex_unlock(&d->mu);
			run_queued(d, q, rnd);
			pthread_mutex_lock(&d->mu);
			s->busy = false;
			d->n_free++;
			if (s->head)
				pthread_cond_broadcast(&d->cv); /* its next is ready */
			subq_done(d, s);
			idle_since = server_deliver_mono_us();
			continue;
		}
		now = server_deliver_mono_us();
		if (d->n_threads > d->cfg.threads && d->n_free > 1 &&
		    now - idle_since >= SURPLUS_IDLE_US)
			break; /* a thread started while receivers hung, idle now */
		if (d->leasing || now < d->lease_after) {
			wait_until(d, d->leasing ? now + d->cfg.idle_ms * 1000 : d->lease_after);
			continue;
		}
		d->leasing = true;
		pthread_mutex_unlock(&d->mu);
		n = lease_turn(d);
		pthread_mutex_lock(&d->mu);
		d->leasing = false;
		if (n == 0)
			d->lease_after = server_deliver_mono_us() + d->cfg.idle_ms * 1000; /* nothing due: nap */
		else
			idle_since = server_deliver_mono_us();
		pthread_cond_broadcast(&d->cv);
	}
	me->exited = true;
	d->n_threads--;
	d->n_free--;
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

enum core_rc server_deliver_start(struct store *st, const struct server_deliver_config *cfg,
				  struct server_deliver **out)
{
	struct server_deliver *d = calloc(1, sizeof(*d));
	pthread_condattr_t ca;
	char host[64] = "localhost";
	unsigned i;
	bool ok = true;

	*out = NULL;
	if (!d || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		free(d);
		return CORE_ERR_NOMEM;
	}
	d->st = st;
	d->cfg = *cfg;
	if (d->cfg.lease_ms <= 0)
		d->cfg.lease_ms = 60000;
	if (d->cfg.timeout_ms <= 0)
		d->cfg.timeout_ms = 15000;
	if (d->cfg.idle_ms <= 0)
		d->cfg.idle_ms = 250;
	if (!(d->cfg.time_scale >= 1))
		d->cfg.time_scale = 1;
	if (d->cfg.threads > THREADS_MAX - EXTRA_MAX)
		d->cfg.threads = THREADS_MAX - EXTRA_MAX;
	gethostname(host, sizeof host - 1);
	if (cfg->owner)
		snprintf(d->owner, sizeof d->owner, "%s", cfg->owner);
	else
		snprintf(d->owner, sizeof d->owner, "deliver:%s:%ld", host, (long)getpid());
	d->owner[strcspn(d->owner, " \t")] = '\0';
	d->cfg.owner = NULL;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&d->mu);
	for (i = 0; ok && i < d->cfg.threads; i++)
		ok = spawn(d);
	pthread_mutex_unlock(&d->mu);
	if (!ok) {
		server_deliver_stop(d);
		return CORE_ERR_INTERNAL;
	}
	*out = d;
	return CORE_OK;
}

void server_deliver_stop(struct server_deliver *d)
{
	pthread_t t[THREADS_MAX];
	unsigned i, n = 0;

	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->stop = true; /* no thread starts from now on */
	pthread_cond_broadcast(&d->cv);
	for (i = 0; i < THREADS_MAX; i++)
		if (d->slots[i].used)
			t[n++] = d->slots[i].t;
	pthread_mutex_unlock(&d->mu);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL); /* an attempt in flight finishes or times out */
	/* What is still queued stays leased until its lease expires, then goes out again. */
	while (d->subs) {
		struct subq *s = d->subs;

		while (s->head) {
			struct dq *q = s->head;

			s->head = q->next;
			store_delivery_free(q->dl);
			free(q);
		}
		d->subs = s->next;
		free(s->board);
		free(s->sub);
		free(s);
	}
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}
