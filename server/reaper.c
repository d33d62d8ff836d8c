/* The reaper thread and its pass (DESIGN §6): the loop that wakes every interval, one pass
 * at a time (the repair sweep, then the gated listing shared by the worker pool, each share
 * under one durability wait), its metrics, start and stop. What a pass does to each card is
 * reaper_act.c's; the JSON of its status is reaper_json.c's. */
#include "server/reaper_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct pool_slot {
	struct server_reaper *r;
	size_t slot;
	pthread_t th;
};

void server_reaper_log(struct server_reaper *r, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (r->cfg.log)
		r->cfg.log(r->cfg.log_ctx, line);
	else
		fprintf(stderr, "reaper: %s\n", line);
}

bool server_reaper_stopping(struct server_reaper *r)
{
	bool s;

	pthread_mutex_lock(&r->lock);
	s = r->stopping;
	pthread_mutex_unlock(&r->lock);
	return s;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 8 ? 8 : (size_t)n;
}

enum core_rc server_reaper_new(struct store *st, const struct server_reaper_config *cfg,
			       struct server_reaper **out)
{
	struct server_reaper *r;
	char host[256] = "";

	*out = NULL;
	if (!st || !cfg)
		return CORE_ERR_BAD_REQUEST;
	r = calloc(1, sizeof(*r));
	if (!r)
		return CORE_ERR_NOMEM;
	r->st = st;
	r->cfg = *cfg;
	if (r->cfg.interval_ms <= 0)
		r->cfg.interval_ms = 60000;
	if (r->cfg.batch == 0)
		r->cfg.batch = 100;
	/* On the FS twin a worker's share is a few transactions (two per batch) and one
	 * durability wait, so a pass is CPU-bound and every extra worker only splits the
	 * batches and contends for the write lock: one worker per core. On the Mongo twin every
	 * write is a round trip, which the workers overlap: 32. The threads are started once
	 * and kept (pool_start); a pass hands cards to no more of them than it has cards. */
	if (r->cfg.workers == 0)
		r->cfg.workers = strcmp(store_name(st), "fs") == 0 ? cpu_count() : 32;
	if (r->cfg.workers > 64)
		r->cfg.workers = 64;
	if (r->cfg.lease_ms <= 0)
		r->cfg.lease_ms = 900000;
	if (cfg->hostname)
		snprintf(host, sizeof(host), "%s", cfg->hostname);
	else if (gethostname(host, sizeof(host) - 1) != 0)
		snprintf(host, sizeof(host), "localhost");
	/* A hostname longer than a marker allows is cut: the marker stays valid. */
	snprintf(r->marker, sizeof(r->marker), "%s%.120s", CORE_RECOVERY_PREFIX, host);
	if (!core_marker_valid(r->marker)) {
		free(r);
		return CORE_ERR_BAD_REQUEST;
	}
	r->cfg.hostname = NULL; /* borrowed from the caller; not kept */
	r->actor.name = r->marker;
	pthread_mutex_init(&r->pass_lock, NULL);
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	pthread_mutex_init(&r->pool_mu, NULL);
	pthread_cond_init(&r->pool_go, NULL);
	pthread_cond_init(&r->pool_idle, NULL);
	*out = r;
	return CORE_OK;
}

const char *server_reaper_marker(const struct server_reaper *r)
{
	return r->marker;
}

/* ---- one pass ---- */

/* The cards of one gated pass, judged by the pool's threads: each takes one contiguous
 * share and works it in batches (reap_share), so on the FS twin a share is two journal
 * lines, and on the Mongo twin the shares overlap their round trips. */
struct pass_work {
	struct server_reaper *r;
	struct core_card **cards;
	size_t n;
	size_t width; /* slots that take cards: min(threads, n) */
	struct server_reaper_stats stats[64];
	/* each share's durability wait and what it did, settled by the pass's thread */
	struct store_ack acks[64];
	bool owed[64];
	struct server_reaper_stats pend[64];
};

static void stats_add(struct server_reaper_stats *into, const struct server_reaper_stats *s);

/* A worker's writes are bound to one durability wait (store_ack) for its whole share of the
 * pass, and the pass's thread waits for all the shares once every worker is done: the pass's
 * reclaims are journaled back to back and made durable together, by one group sync (the
 * first wait covers every line appended; the others find them durable), instead of one sync
 * per share that ends while others still write. Nothing outside reads a reclaim as done
 * before then: the pass's stats are counted, and its events published, only once the wait
 * succeeded. If the sync fails, the store rolls every one of those writes back, and each card
 * of the share counts as an error (it is still claimed by its dead owner: the next pass
 * judges it again). */
static void pass_share(struct pass_work *w, size_t slot)
{
	struct server_reaper_stats pend = {0};
	struct store_ack ack;
	size_t lo = slot * w->n / w->width, hi = (slot + 1) * w->n / w->width;

	store_ack_begin(&ack);
	server_reaper_share(w->r, w->cards + lo, hi - lo, &pend);
	w->owed[slot] = store_ack_end(&ack);
	w->acks[slot] = ack;
	w->pend[slot] = pend;
}

/* On the pass's thread, every worker done: waits for share `slot`'s lines, then counts it. */
static void share_settle(struct pass_work *w, size_t slot)
{
	struct server_reaper_stats *s = &w->stats[slot], *pend = &w->pend[slot];
	enum core_rc rc = w->owed[slot] ? store_ack_wait(&w->acks[slot]) : CORE_OK;

	if (rc == CORE_OK) {
		stats_add(s, pend);
	} else {
		s->listed += pend->listed;
		s->errors += pend->listed;
		server_reaper_log(w->r, "%zu reclaims rolled back: the store could not make them durable (%s)",
			   pend->transferred, core_rc_code(rc));
	}
}

static void *pool_main(void *arg)
{
	struct pool_slot *ps = arg;
	struct server_reaper *r = ps->r;
	struct pass_work *w;
	uint64_t seen = 0;

	pthread_mutex_lock(&r->pool_mu);
	for (;;) {
		while (!r->pool_stop && r->pool_gen == seen)
			pthread_cond_wait(&r->pool_go, &r->pool_mu);
		if (r->pool_stop)
			break;
		seen = r->pool_gen;
		w = r->pool_work;
		pthread_mutex_unlock(&r->pool_mu);
		if (ps->slot < w->width)
			pass_share(w, ps->slot);
		pthread_mutex_lock(&r->pool_mu);
		if (--r->pool_busy == 0)
			pthread_cond_signal(&r->pool_idle);
	}
	pthread_mutex_unlock(&r->pool_mu);
	return NULL;
}

/* Starts workers - 1 pool threads once (fewer if the system refuses some). */
static void pool_start(struct server_reaper *r)
{
	size_t k, want = r->cfg.workers > 1 ? r->cfg.workers - 1 : 0;

	if (r->pool_started)
		return;
	r->pool_started = true;
	r->slots = calloc(want ? want : 1, sizeof(*r->slots));
	if (!r->slots)
		return;
	for (k = 0; k < want; k++) {
		r->slots[k] = (struct pool_slot){.r = r, .slot = k + 1};
		if (pthread_create(&r->slots[k].th, NULL, pool_main, &r->slots[k]) != 0)
			break;
		r->pool_n++;
	}
}

static void pool_stop(struct server_reaper *r)
{
	size_t k;

	pthread_mutex_lock(&r->pool_mu);
	r->pool_stop = true;
	pthread_cond_broadcast(&r->pool_go);
	pthread_mutex_unlock(&r->pool_mu);
	for (k = 0; k < r->pool_n; k++)
		pthread_join(r->slots[k].th, NULL);
	free(r->slots);
	r->slots = NULL;
	r->pool_n = 0;
}

static void stats_add(struct server_reaper_stats *into, const struct server_reaper_stats *s)
{
	int a;

	into->listed += s->listed;
	into->transferred += s->transferred;
	into->skipped += s->skipped;
	into->errors += s->errors;
	into->repaired += s->repaired;
	for (a = 0; a < CORE_STUCK_ACTION_COUNT_; a++)
		into->actions[a] += s->actions[a];
}

/* Called with pass_lock held: one pass at a time uses the pool. */
static void reap_all(struct server_reaper *r, struct core_card **cards, size_t n,
		     struct server_reaper_stats *s)
{
	struct pass_work *w;
	size_t k;

	if (n == 0)
		return;
	/* Kept with the reaper (pass_lock held): a calloc of it per pass had glibc consolidate
	 * its free lists each time. */
	if (!r->work && !(r->work = malloc(sizeof(*r->work)))) {
		s->errors++;
		return;
	}
	w = r->work;
	memset(w, 0, sizeof(*w));
	pool_start(r);
	w->r = r;
	w->cards = cards;
	w->n = n;
	w->width = r->pool_n + 1 < n ? r->pool_n + 1 : n;
	pthread_mutex_lock(&r->pool_mu);
	r->pool_work = w;
	r->pool_busy = r->pool_n;
	r->pool_gen++;
	pthread_cond_broadcast(&r->pool_go);
	pthread_mutex_unlock(&r->pool_mu);
	pass_share(w, 0); /* the pass's own thread works too */
	pthread_mutex_lock(&r->pool_mu);
	while (r->pool_busy > 0)
		pthread_cond_wait(&r->pool_idle, &r->pool_mu);
	r->pool_work = NULL;
	pthread_mutex_unlock(&r->pool_mu);
	for (k = 0; k < w->width; k++)
		share_settle(w, k);
	for (k = 0; k < w->width; k++)
		stats_add(s, &w->stats[k]);
}

static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A finished pass into the metrics: its actions, its candidates, its duration. */
static void stats_count(struct server_reaper *r, const struct server_reaper_stats *s,
			int64_t us)
{
	struct metrics *m = r->cfg.metrics;
	size_t a;

	if (!m)
		return;
	for (a = 0; a < CORE_STUCK_ACTION_COUNT_; a++)
		metrics_add(m, METRICS_REAPER_ACTIONS,
			    core_stuck_action_name((enum core_stuck_action)a), NULL, s->actions[a]);
	metrics_add(m, METRICS_REAPER_ACTIONS, "repair_release", NULL, s->repaired);
	metrics_add(m, METRICS_REAPER_CANDIDATES, "transferred", NULL, s->transferred);
	metrics_add(m, METRICS_CLAIMS, "recovery", NULL, s->transferred); /* recovery claims */
	metrics_add(m, METRICS_REAPER_CANDIDATES, "skipped", NULL, s->skipped);
	metrics_add(m, METRICS_REAPER_CANDIDATES, "error", NULL, s->errors);
	metrics_observe(m, METRICS_REAPER_PASS, NULL, NULL, us > 0 ? (uint64_t)us : 0);
}

enum core_rc server_reaper_pass(struct server_reaper *r, struct server_reaper_stats *out)
{
	struct server_reaper_stats s = {0};
	struct core_card **cards = NULL;
	size_t n = 0;
	enum core_rc rc;
	int64_t t0 = mono_ms(), t0_us = mono_us();
	/* A pass started by an HTTP request (POST /v1/reaper/pass) must not write under the
	 * request's ack: the repair sweep's writes wait here, and each worker share binds and
	 * waits for its own (a thread owing lines to two acks could wait on itself). */
	struct store_ack *outer = store_ack_unbind();

	pthread_mutex_lock(&r->pass_lock);
	s.gate = r->cfg.gate;
	rc = server_reaper_repair_pass(r, &s.repaired);
	if (rc != CORE_OK) {
		s.errors++;
		server_reaper_log(r, "repair sweep failed: %s", core_rc_code(rc));
	}
	if (r->cfg.gate) {
		/* After where the last pass's listing ended: kept claims stay expired at the
		 * head of the order, and would fill every batch (DESIGN §6). A short listing
		 * reached the end: the next starts from the first again. */
		rc = store_reaper_list_expired_after(r->st, r->cfg.batch, &r->cursor, &cards, &n);
		if (rc != CORE_OK) {
			s.errors++;
			server_reaper_log(r, "listing expired claims failed: %s", core_rc_code(rc));
		}
		if (n == r->cfg.batch && n > 0)
			store_reaper_cursor_past(&r->cursor, cards[n - 1]);
		else
			r->cursor.set = false;
		reap_all(r, cards, n, &s);
		store_cards_free(cards, n);
	}
	s.duration_ms = mono_ms() - t0;
	s.finished_at_ms = wall_ms();
	stats_count(r, &s, mono_us() - t0_us);
	pthread_mutex_lock(&r->lock);
	r->passes++;
	r->last = s;
	r->have_last = true;
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_unlock(&r->pass_lock);
	store_ack_rebind(outer);
	if (out)
		*out = s;
	return rc == CORE_OK || s.listed || s.repaired ? CORE_OK : rc;
}

/* ---- the thread ---- */

static void *reaper_main(void *arg)
{
	struct server_reaper *r = arg;
	struct timespec until;

	for (;;) {
		pthread_mutex_lock(&r->lock);
		clock_gettime(CLOCK_REALTIME, &until);
		core_timespec_add_ns(&until, (int64_t)r->cfg.interval_ms * 1000000);
		while (!r->stopping) {
			int e = pthread_cond_timedwait(&r->wake, &r->lock, &until);
			if (e == ETIMEDOUT)
				break;
		}
		if (r->stopping) {
			pthread_mutex_unlock(&r->lock);
			return NULL;
		}
		pthread_mutex_unlock(&r->lock);
		server_reaper_pass(r, NULL);
	}
}

enum core_rc server_reaper_start(struct server_reaper *r)
{
	size_t repaired = 0;
	enum core_rc rc;

	server_reaper_log(r, "gate %s (ITERION_BOARD_CLAIM_REAPER): %s; interval %lld ms, batch %zu, "
		      "marker %s",
		   r->cfg.gate ? "on" : "off",
		   r->cfg.gate ? "expired claims are reclaimed and routed by the decision table"
			       : "no decisions; release-only repair sweeps still run",
		   (long long)r->cfg.interval_ms, r->cfg.batch, r->marker);
	pthread_mutex_lock(&r->pass_lock);
	rc = server_reaper_repair(r, &repaired);
	pthread_mutex_unlock(&r->pass_lock);
	if (rc != CORE_OK)
		server_reaper_log(r, "startup repair sweep failed: %s", core_rc_code(rc));
	else if (repaired)
		server_reaper_log(r, "startup repair sweep released %zu claims", repaired);
	pthread_mutex_lock(&r->lock);
	if (r->running) {
		pthread_mutex_unlock(&r->lock);
		return CORE_OK;
	}
	r->stopping = false;
	if (pthread_create(&r->thread, NULL, reaper_main, r) != 0) {
		pthread_mutex_unlock(&r->lock);
		return CORE_ERR_INTERNAL;
	}
	r->running = true;
	pthread_mutex_unlock(&r->lock);
	return CORE_OK;
}

void server_reaper_stop(struct server_reaper *r)
{
	bool join;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = true;
	join = r->running;
	r->running = false;
	pthread_cond_broadcast(&r->wake);
	pthread_mutex_unlock(&r->lock);
	if (join)
		pthread_join(r->thread, NULL);
}

void server_reaper_free(struct server_reaper *r)
{
	if (!r)
		return;
	server_reaper_stop(r);
	pool_stop(r);
	pthread_cond_destroy(&r->pool_idle);
	pthread_cond_destroy(&r->pool_go);
	pthread_mutex_destroy(&r->pool_mu);
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->pass_lock);
	free(r->work);
	free(r);
}
