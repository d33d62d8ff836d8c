/* The reaper thread and its pass (DESIGN §6). Every decision comes from core's table; every
 * write goes through a fenced store operation. The order is load-bearing: list, resolve the
 * run, decide on liveness, TRANSFER, decide again on what the transfer observed, act under
 * the recovery token, release. Never clear-then-decide. */
#include "server/reaper.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct server_reaper {
	struct store *st;
	struct server_reaper_config cfg;
	char marker[CORE_MARKER_MAX + 1];
	struct store_actor actor;

	pthread_mutex_t pass_lock; /* one pass at a time in this process */
	pthread_mutex_t lock;      /* guards everything below */
	pthread_cond_t wake;
	pthread_t thread;
	bool running;
	bool stopping;
	size_t passes;
	bool have_last;
	struct server_reaper_stats last;

	/* The pass's worker pool: started by the first pass, kept until server_reaper_free, so a
	 * pass of 100 cards does not pay for 31 thread creations. Guarded by pool_mu. */
	pthread_mutex_t pool_mu;
	pthread_cond_t pool_go;   /* a new generation of work, or stop */
	pthread_cond_t pool_idle; /* pool_busy reached 0 */
	struct pool_slot *slots;  /* pool_n of them */
	size_t pool_n;            /* threads started (the pass's own thread is slot 0) */
	uint64_t pool_gen;
	size_t pool_busy;
	struct pass_work *pool_work;
	bool pool_started, pool_stop;
};

struct pool_slot {
	struct server_reaper *r;
	size_t slot;
	pthread_t th;
};

static void reaper_log(struct server_reaper *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void reaper_log(struct server_reaper *r, const char *fmt, ...)
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

static bool reaper_stopping(struct server_reaper *r)
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
	/* On the FS twin a worker waits for durability once, at the end of its share of the
	 * pass (store_ack), so a pass is CPU-bound: bench/reaper_pass 10000 on the 2-core
	 * reference machine took 0.57 s with 2 workers, 0.38 s with 8, 0.40 s with 32. On the
	 * Mongo twin every write is a round trip, which the workers overlap: the default width
	 * is for it. The threads are started once and kept (pool_start); a pass hands cards to
	 * no more of them than it has cards. */
	if (r->cfg.workers == 0)
		r->cfg.workers = 32;
	if (r->cfg.workers > 64)
		r->cfg.workers = 64;
	if (r->cfg.lease_ms <= 0)
		r->cfg.lease_ms = 900000;
	if (r->cfg.run_ceiling == 0)
		r->cfg.run_ceiling = 20;
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

/* ---- resolving the run behind a card ---- */

struct resolved {
	enum core_run_seen seen;
	struct core_run *run; /* owned */
};

/* Reads the card's recorded run, running the liveness oracle first so a dead `running` run
 * is judged as what it is. Any read error conserves (UNREADABLE). `same_claim`: a run created
 * under another claim than the card's listed one counts as no run recorded (DESIGN §11): a
 * superseded owner's run never decides the new owner's card. The repair sweep, which only
 * ever releases, reads the pointer as it is (a stripped claim has no epoch to compare). */
static void resolve_run(struct server_reaper *r, const struct core_card *c, bool same_claim,
			struct resolved *out)
{
	struct core_run *run = NULL, *promoted_run = NULL;
	bool promoted = false;
	enum core_rc rc;

	out->run = NULL;
	if (!c->last_run_id) {
		out->seen = CORE_RUN_SEEN_NONE;
		return;
	}
	/* Tombstones included: a pruned run still tells which claim it was created under. An
	 * id never used (a pointer older than the last-run check) reads as gone, as before. */
	rc = store_run_get_any(r->st, c->last_run_id, &run);
	if (rc == CORE_ERR_NOT_FOUND) {
		out->seen = CORE_RUN_SEEN_GONE;
		return;
	}
	if (rc != CORE_OK) {
		out->seen = CORE_RUN_SEEN_UNREADABLE;
		return;
	}
	if (same_claim && !core_run_of_claim(run, c)) {
		core_run_free(run);
		out->seen = CORE_RUN_SEEN_NONE;
		return;
	}
	if (run->pruned) {
		core_run_free(run);
		out->seen = CORE_RUN_SEEN_GONE;
		return;
	}
	if (run->status && (strcmp(run->status, CORE_RUN_RUNNING) == 0 ||
			    strcmp(run->status, CORE_RUN_QUEUED) == 0)) {
		rc = store_run_promote_if_orphaned(r->st, run->id, &promoted_run, &promoted);
		if (rc == CORE_OK) {
			if (promoted)
				reaper_log(r, "run %s of card %s promoted to %s (%s)", run->id,
					   c->id, CORE_RUN_FAILED_RESUMABLE, CORE_FAILURE_ORPHANED);
			core_run_free(run);
			run = promoted_run;
		} else if (rc != CORE_ERR_NOT_FOUND) {
			core_run_free(run);
			out->seen = CORE_RUN_SEEN_UNREADABLE;
			return;
		}
	}
	out->seen = CORE_RUN_SEEN_LOADED;
	out->run = run;
}

/* ---- acting under the recovery token ---- */

/* `release`: the recovery claim goes in the same fenced step (one journal line, not two). */
static enum core_rc owned_state(struct server_reaper *r, const char *id,
				const struct core_token *tok, const char *to, const char *reason,
				bool release)
{
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .token = *tok, .state = to,
				      .reason = reason, .release = release,
				      .event_reason = "watchdog"};
	struct core_card *out = NULL;
	enum core_rc rc = store_card_owned_write(r->st, id, &w, &r->actor, &out);

	core_card_free(out);
	return rc;
}

static enum core_rc owned_gave_up(struct server_reaper *r, const char *id,
				  const struct core_token *tok, const char *reason,
				  const char *run_id, const char *state)
{
	struct core_gave_up g = {.set = true, .reason = (char *)reason, .run_id = (char *)run_id,
				 .state = (char *)state, .at = store_now(r->st)};
	struct store_owned_write w = {.kind = STORE_OWNED_GAVE_UP, .token = *tok, .gave_up = &g,
				      .event_reason = "watchdog"};
	struct core_card *out = NULL;
	enum core_rc rc = store_card_owned_write(r->st, id, &w, &r->actor, &out);

	core_card_free(out);
	return rc;
}

/* The watchdog's own release of its recovery claim: exactly that claim, a machine event. */
static enum core_rc release_token(struct server_reaper *r, const struct core_card *seen,
				  const struct core_token *tok)
{
	struct core_card expect = {.id = seen->id, .has_epoch = true, .claim_epoch = tok->epoch};

	expect.claim.present = true;
	expect.claim.marker = (char *)tok->marker;
	return store_reaper_release_exact(r->st, seen->id, &expect, &r->actor);
}

/* Files a reclaimed card into `target` unless a column somebody chose would be overwritten
 * (ShouldFileStuckCard). Returns the write's rc, CORE_OK when nothing was to be written.
 * The filing carries the release of the recovery claim: on success *released is set. */
static enum core_rc file_card(struct server_reaper *r, const struct core_board *b,
			      const struct core_card *seen, const struct core_token *tok,
			      const char *target, const char *reason, bool *filed, bool *released)
{
	enum core_rc rc;

	*filed = false;
	if (!core_should_file_stuck_card(b, seen->state, target)) {
		if (target && strcmp(seen->state, target) != 0)
			reaper_log(r, "card %s left in %s: moved out of %s deliberately, not "
				      "overwritten with %s",
				   seen->id, seen->state, b->running, target);
		return CORE_OK;
	}
	*filed = true;
	rc = owned_state(r, seen->id, tok, target, reason, true);
	*released = rc == CORE_OK;
	return rc;
}

/* The action half of one reclaim: everything fenced by tok (the recovery token). *release:
 * the recovery claim is to go; *released: the filing already took it along (its last write
 * carried the release), so the caller must not release again. */
static enum core_rc act(struct server_reaper *r, const struct core_board *b,
			const struct core_card *seen, const struct core_token *tok,
			const struct core_stuck_decision *d, const struct resolved *run,
			const char *prev_marker, bool *release, bool *released)
{
	enum core_rc rc = CORE_OK;
	bool filed = false;
	size_t n_runs = 0;

	*release = true;
	*released = false;
	switch (d->action) {
	case CORE_STUCK_KEEP:
		/* Conservation is granted once: the recovery claim is its record. A card
		 * already held by a reaper: marker is released instead. */
		*release = core_marker_is_recovery(prev_marker);
		break;
	case CORE_STUCK_COMPLETE:
		rc = file_card(r, b, seen, tok, b->completed, d->reason, &filed, released);
		break;
	case CORE_STUCK_FAIL:
		rc = file_card(r, b, seen, tok, b->failed, d->reason, &filed, released);
		break;
	case CORE_STUCK_GIVE_UP:
		if (core_should_file_stuck_card(b, seen->state, b->failed)) {
			rc = owned_gave_up(r, seen->id, tok, "run_pruned", seen->last_run_id,
					   seen->state);
			if (rc == CORE_OK)
				rc = file_card(r, b, seen, tok, b->failed, d->reason, &filed,
					       released);
		}
		break;
	case CORE_STUCK_REPARK:
		if (!r->cfg.repark_to_pool)
			break; /* FS twin: the running column is eligible; release in place */
		rc = store_run_count_for_card(r->st, seen->id, &n_runs);
		if (rc != CORE_OK)
			break;
		if (n_runs >= r->cfg.run_ceiling) {
			rc = owned_gave_up(r, seen->id, tok, "run_ceiling",
					   run->run ? run->run->id : NULL, seen->state);
			if (rc == CORE_OK)
				rc = file_card(r, b, seen, tok, b->failed, "watchdog", &filed,
					       released);
		} else {
			rc = file_card(r, b, seen, tok, core_board_first_eligible(b), d->reason,
				       &filed, released);
		}
		break;
	case CORE_STUCK_RELEASE:
	case CORE_STUCK_ACTION_COUNT_:
		break;
	}
	return rc;
}

/* One candidate of a gated pass. */
static void reap_one(struct server_reaper *r, const struct core_card *listed,
		     struct server_reaper_stats *s)
{
	struct core_board board = {0};
	struct resolved run = {0};
	struct core_stuck_input in = {0};
	struct core_stuck_decision d;
	struct core_token prev = {listed->claim.marker, listed->claim_epoch, NULL};
	struct core_token tok;
	struct core_card *seen = NULL;
	bool release = false, released = false;
	enum core_rc rc;
	int64_t now = store_now(r->st);

	if (store_board_get(r->st, listed->board, &board) != CORE_OK) {
		s->errors++;
		return;
	}
	resolve_run(r, listed, true, &run);
	in.seen = run.seen;
	in.run = run.run;
	in.board = &board;
	in.state = listed->state;
	in.stamp_window_open =
		core_stamp_window_open(listed->claim.claimed_at, listed->claim.lease_ms, now);

	d = core_decide_transfer(&in);
	if (d.action == CORE_STUCK_KEEP) {
		if (core_recovery_hold_expired(&in, prev.marker) &&
		    store_reaper_release_exact(r->st, listed->id, listed, &r->actor) == CORE_OK) {
			s->actions[CORE_STUCK_RELEASE]++;
			reaper_log(r, "card %s: recovery hold by %s epoch %lld released (%s)",
				   listed->id, prev.marker, (long long)prev.epoch, d.row);
		} else {
			s->skipped++;
			s->actions[CORE_STUCK_KEEP]++;
		}
		goto out;
	}

	if (r->cfg.after_list)
		r->cfg.after_list(r->cfg.hook_ctx, listed);
	rc = store_reaper_transfer(r->st, listed->id, &prev, r->marker, r->cfg.lease_ms, &seen);
	if (rc != CORE_OK) {
		/* A renewal, an operator, or another replica's reaper got there first. */
		if (rc == CORE_ERR_CLAIM_CONFLICT || rc == CORE_ERR_NOT_FOUND)
			s->skipped++;
		else
			s->errors++;
		goto out;
	}
	s->transferred++;
	/* Judge the card as the transfer observed it, never the listing's copy. */
	in.state = seen->state;
	d = core_decide_stuck_card(&in);
	tok.marker = r->marker;
	tok.epoch = seen->claim_epoch;
	rc = act(r, &board, seen, &tok, &d, &run, prev.marker, &release, &released);
	if (rc != CORE_OK)
		s->errors++;
	/* The claim is released whatever the filing did: a card is never left owned by a
	 * ghost — except a first keep, whose recovery claim is the record of the grant. A
	 * filing that carried the release (atomically, on success only) already did it. */
	if (release && !released && release_token(r, seen, &tok) != CORE_OK)
		s->errors++;
	s->actions[d.action]++;
	reaper_log(r, "reclaimed card %s from %s epoch %lld: %s (%s) in %s%s", seen->id,
		   prev.marker, (long long)prev.epoch, core_stuck_action_name(d.action), d.row,
		   seen->state, rc != CORE_OK ? " [action failed]" : "");
out:
	core_card_free(seen);
	core_run_free(run.run);
	core_board_release(&board);
}

/* ---- the repair sweep (ungated, release-only) ---- */

/* May an ordinary claim stripped of its lease or fence be released? Only when the run behind
 * it has a disposition that the gated table then files (ADR-096 §9): finished, failed, or a
 * settled failed_resumable (no continuation armed), with the card in the running column. */
static bool stripped_releasable(const struct core_board *b, const struct core_card *c,
				const struct resolved *run)
{
	const char *st, *cont;

	if (run->seen != CORE_RUN_SEEN_LOADED || !b->running || strcmp(c->state, b->running) != 0)
		return false;
	st = run->run->status;
	cont = run->run->continuation;
	/* An armed continuation owns the run's future: that claim stays conserved. */
	if (cont && (strcmp(cont, CORE_CONT_REDELIVERY) == 0 || strcmp(cont, CORE_CONT_RETRY) == 0))
		return false;
	return strcmp(st, CORE_RUN_FINISHED) == 0 || strcmp(st, CORE_RUN_FAILED) == 0 ||
	       strcmp(st, CORE_RUN_FAILED_RESUMABLE) == 0;
}

enum core_rc server_reaper_repair(struct server_reaper *r, size_t *repaired)
{
	struct core_card **cards = NULL;
	size_t n = 0, i;
	enum core_rc rc;
	int64_t now = store_now(r->st);

	*repaired = 0;
	rc = store_reaper_list_repair(r->st, r->cfg.batch, &cards, &n);
	if (rc != CORE_OK)
		return rc;
	for (i = 0; i < n && !reaper_stopping(r); i++) {
		struct core_card *c = cards[i];
		struct core_board board = {0};
		struct resolved run = {0};
		struct core_stuck_input in = {0};
		bool release = false;

		if (store_board_get(r->st, c->board, &board) != CORE_OK)
			continue;
		resolve_run(r, c, false, &run);
		in.seen = run.seen;
		in.run = run.run;
		in.board = &board;
		in.state = c->state;
		in.stamp_window_open =
			core_stamp_window_open(c->claim.claimed_at, c->claim.lease_ms, now);
		if (core_marker_is_recovery(c->claim.marker))
			/* An abandoned recovery claim: releasing it restores the card to what it
			 * was before a watchdog touched it — unless something may be alive. */
			release = core_claim_expired(c, now) &&
				  core_recovery_hold_expired(&in, c->claim.marker);
		else if (!c->claim.has_lease || !c->has_epoch)
			release = stripped_releasable(&board, c, &run);
		if (release && store_reaper_release_exact(r->st, c->id, c, &r->actor) == CORE_OK) {
			(*repaired)++;
			reaper_log(r, "repair: released %s claim of card %s held by %s",
				   core_marker_is_recovery(c->claim.marker) ? "abandoned recovery"
									    : "stripped",
				   c->id, c->claim.marker);
		}
		core_run_free(run.run);
		core_board_release(&board);
	}
	store_cards_free(cards, n);
	return CORE_OK;
}

/* ---- one pass ---- */

/* The cards of one gated pass, judged by the pool's threads so that their durable writes
 * share the store's group commit (and round trips overlap on the Mongo twin). */
struct pass_work {
	struct server_reaper *r;
	struct core_card **cards;
	size_t n;
	size_t width; /* slots that take cards: min(threads, n) */
	size_t next;  /* atomic */
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
	size_t i;

	store_ack_begin(&ack);
	for (;;) {
		if (reaper_stopping(w->r))
			break; /* between cards, never mid-write */
		i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
		if (i >= w->n)
			break;
		pend.listed++;
		reap_one(w->r, w->cards[i], &pend);
	}
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
		reaper_log(w->r, "%zu reclaims rolled back: the store could not make them durable (%s)",
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
	w = calloc(1, sizeof(*w));
	if (!w) {
		s->errors++;
		return;
	}
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
	free(w);
}

static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
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
	rc = server_reaper_repair(r, &s.repaired);
	if (rc != CORE_OK) {
		s.errors++;
		reaper_log(r, "repair sweep failed: %s", core_rc_code(rc));
	}
	if (r->cfg.gate) {
		rc = store_reaper_list_expired(r->st, r->cfg.batch, &cards, &n);
		if (rc != CORE_OK) {
			s.errors++;
			reaper_log(r, "listing expired claims failed: %s", core_rc_code(rc));
		}
		reap_all(r, cards, n, &s);
		store_cards_free(cards, n);
	}
	s.duration_ms = mono_ms() - t0;
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
		until.tv_sec += r->cfg.interval_ms / 1000;
		until.tv_nsec += (r->cfg.interval_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
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

	reaper_log(r, "gate %s (ITERION_BOARD_CLAIM_REAPER): %s; interval %lld ms, batch %zu, "
		      "marker %s",
		   r->cfg.gate ? "on" : "off",
		   r->cfg.gate ? "expired claims are reclaimed and routed by the decision table"
			       : "no decisions; release-only repair sweeps still run",
		   (long long)r->cfg.interval_ms, r->cfg.batch, r->marker);
	pthread_mutex_lock(&r->pass_lock);
	rc = server_reaper_repair(r, &repaired);
	pthread_mutex_unlock(&r->pass_lock);
	if (rc != CORE_OK)
		reaper_log(r, "startup repair sweep failed: %s", core_rc_code(rc));
	else if (repaired)
		reaper_log(r, "startup repair sweep released %zu claims", repaired);
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
	free(r);
}

/* ---- JSON ---- */

json_t *server_reaper_stats_json(const struct server_reaper_stats *s)
{
	json_t *actions = json_object();
	int i;

	if (!actions)
		return NULL;
	for (i = 0; i < CORE_STUCK_ACTION_COUNT_; i++)
		json_object_set_new(actions, core_stuck_action_name((enum core_stuck_action)i),
				    json_integer((json_int_t)s->actions[i]));
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:I}", "gate", s->gate ? "on" : "off",
			 "listed", (json_int_t)s->listed, "transferred",
			 (json_int_t)s->transferred, "skipped", (json_int_t)s->skipped, "errors",
			 (json_int_t)s->errors, "duration_ms", (json_int_t)s->duration_ms,
			 "actions", actions, "repaired", (json_int_t)s->repaired);
}

json_t *server_reaper_status_json(struct server_reaper *r)
{
	struct server_reaper_stats last;
	bool have;
	size_t passes;

	pthread_mutex_lock(&r->lock);
	last = r->last;
	have = r->have_last;
	passes = r->passes;
	pthread_mutex_unlock(&r->lock);
	return json_pack("{s:s, s:I, s:I, s:s, s:I, s:o}", "gate", r->cfg.gate ? "on" : "off",
			 "interval_ms", (json_int_t)r->cfg.interval_ms, "batch",
			 (json_int_t)r->cfg.batch, "marker", r->marker, "passes",
			 (json_int_t)passes, "last_pass",
			 have ? server_reaper_stats_json(&last) : json_null());
}

json_t *server_reaper_hook_status(void *ctx)
{
	return server_reaper_status_json(ctx);
}

enum core_rc server_reaper_hook_pass(void *ctx, json_t **out)
{
	struct server_reaper_stats s;
	enum core_rc rc = server_reaper_pass(ctx, &s);

	*out = NULL;
	if (rc != CORE_OK)
		return rc;
	*out = server_reaper_stats_json(&s);
	return *out ? CORE_OK : CORE_ERR_NOMEM;
}
