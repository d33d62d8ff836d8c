/* Reaper scenarios through the real reaper and the FS store, with an injected clock: one per
 * row of the decision table, plus the races the transfer-first order exists for. */
#include "core/core.h"
#include "server/reaper.h"
#include "store/store_twins.h"
#include "tests/store/sub_fixture.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T0 1764670000000LL
#define LEASE 60000LL

static int64_t now_ms;
static char dir[64];
static struct store *st;
static struct server_reaper *reaper;
static const struct store_actor bot = {.name = "bot"}, worker = {.name = "worker"},
				 ops = {.name = "ops"}, worker2 = {.name = "worker2"};

static int64_t test_clock(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&now_ms, __ATOMIC_SEQ_CST);
}

static void advance(int64_t ms)
{
	__atomic_add_fetch(&now_ms, ms, __ATOMIC_SEQ_CST);
}

static void quiet_log(void *ctx, const char *line)
{
	(void)ctx;
	(void)line;
}

static struct server_reaper *make_reaper(const char *host, bool gate)
{
	struct server_reaper_config cfg = {.gate = gate, .interval_ms = 3600000, .batch = 100,
					   .lease_ms = LEASE, .hostname = host,
					   .log = quiet_log};
	struct server_reaper *r = NULL;

	ck_assert_int_eq(server_reaper_new(st, &cfg, &r), CORE_OK);
	return r;
}

static void setup(void)
{
	struct store_fs_options o = {0};
	char err[256] = "";

	snprintf(dir, sizeof(dir), "/tmp/boardd-reaper-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	o.dir = dir;
	ck_assert_msg(store_fs_open(&o, &st, err, sizeof(err)) == CORE_OK, "open: %s", err);
	now_ms = T0;
	store_clock_set(st, test_clock, NULL);
	reaper = make_reaper("testhost", true);
}

static void teardown(void)
{
	char cmd[128];

	server_reaper_free(reaper);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* ---- helpers ---- */

static struct core_card *get(const char *id)
{
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
	return c;
}

static void create(const char *id, const char *state)
{
	struct store_card_create in = {.id = id, .state = state, .title = id};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
}

/* Creates a card in `state`, claims it for `marker`; returns the epoch. */
static int64_t claimed(const char *id, const char *state, const char *marker)
{
	struct store_claim_result res = {0};
	int64_t epoch;

	create(id, state);
	ck_assert_int_eq(store_card_claim(st, id, marker, LEASE, &worker, &res), CORE_OK);
	ck_assert(res.fresh);
	epoch = res.token.epoch;
	core_card_free(res.card);
	return epoch;
}

/* Records a run for the card (owner = marker, lock lease run_lease) with `status`. */
static void with_run(const char *card_id, const char *run_id, const char *marker, int64_t epoch,
		     const char *status, int64_t run_lease)
{
	struct store_run_create rc = {.id = run_id, .card_id = card_id, .marker = marker,
				      .status = status, .lease_ms = run_lease};
	struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .token = {marker, epoch},
				      .run_id = run_id};
	struct core_run *r = NULL;
	struct core_card *c = NULL;

	ck_assert_int_eq(store_run_create(st, &rc, &worker, &r), CORE_OK);
	core_run_free(r);
	ck_assert_int_eq(store_card_owned_write(st, card_id, &w, &worker, &c), CORE_OK);
	core_card_free(c);
}

static void run_set(const char *run_id, const char *marker, const char *status,
		    const char *continuation)
{
	struct store_run_update u = {.marker = marker, .status = status,
				     .continuation = continuation, .lease_ms = LEASE};
	struct core_run *r = NULL;

	ck_assert_int_eq(store_run_update(st, run_id, &u, &worker, &r), CORE_OK);
	core_run_free(r);
}

static struct server_reaper_stats pass(struct server_reaper *r)
{
	struct server_reaper_stats s;

	ck_assert_int_eq(server_reaper_pass(r, &s), CORE_OK);
	return s;
}

/* The last event of `type` for a card, copied into *out; false if none. */
static bool last_event(const char *card_id, enum core_event_type type, struct core_event *out)
{
	struct core_event *ev = NULL;
	size_t n = 0, i;
	int64_t next = 0;
	bool found = false;

	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	for (i = 0; i < n; i++) {
		if (ev[i].type == type && ev[i].card_id && strcmp(ev[i].card_id, card_id) == 0) {
			if (found)
				core_event_release(out);
			ck_assert_int_eq(core_event_copy(out, &ev[i]), CORE_OK);
			found = true;
		}
	}
	store_events_free(ev, n);
	return found;
}

static void assert_untouched_by(const char *id, const struct core_card *before)
{
	struct core_card *after = get(id);

	ck_assert_msg(core_card_equal(before, after), "card %s changed", id);
	core_card_free(after);
}

/* The last event seq. */
static int64_t ct_seq(void)
{
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t next = 0, seq = 0;

	do {
		ck_assert_int_eq(store_events_list(st, NULL, NULL, seq, 1000, 0, &ev, &n, &next),
				 CORE_OK);
		if (n)
			seq = ev[n - 1].seq;
		store_events_free(ev, n);
	} while (n == 1000);
	return seq;
}

/* ---- one scenario per table row ---- */

START_TEST(test_finished_completes_with_run_finished)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_card *c;
	struct core_event ev;
	struct server_reaper_stats s;

	with_run("c1", "r1", "w1", e, "running", LEASE);
	run_set("r1", "w1", "finished", NULL);
	advance(LEASE + 1);
	s = pass(reaper);
	ck_assert_int_eq(s.listed, 1);
	ck_assert_int_eq(s.transferred, 1);
	ck_assert_int_eq(s.actions[CORE_STUCK_COMPLETE], 1);
	c = get("c1");
	ck_assert_str_eq(c->state, "done");
	ck_assert_str_eq(c->state_reason, "run_finished");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, e + 1); /* the transfer advanced the fence */
	core_card_free(c);
	ck_assert(last_event("c1", CORE_EV_CARD_STATE_CHANGED, &ev));
	ck_assert(!ev.machine); /* the run's own verdict: downstream fires */
	ck_assert_str_eq(ev.reason, "run_finished");
	core_event_release(&ev);
	ck_assert(last_event("c1", CORE_EV_CARD_CLAIMED, &ev));
	ck_assert(strstr(ev.payload, "reclaimed_from") != NULL);
	core_event_release(&ev);
}
END_TEST

/* n cards in progress, each claimed by its owner with a run that finished, the leases then
 * expired: what a pass files; e[] receives the epochs. */
static void dead_finished(size_t n, const char *const *ids, const char *const *runs,
			  const char *const *owners, int64_t *e)
{
	size_t i;

	for (i = 0; i < n; i++) {
		e[i] = claimed(ids[i], "in_progress", owners[i]);
		with_run(ids[i], runs[i], owners[i], e[i], "running", LEASE);
		run_set(runs[i], owners[i], "finished", NULL);
	}
	advance(LEASE + 1);
}

/* A pass's writes wait for durability once per worker (store_ack): when that sync fails,
 * every reclaim of the pass is rolled back and counted as an error, the cards are still held
 * by their dead owners at their old epoch, no reclaim event is served; the next pass, with
 * the disk back, files them. */
START_TEST(test_failed_sync_rolls_the_pass_back)
{
	const char *ids[] = {"f1", "f2", "f3"}, *runs[] = {"r1", "r2", "r3"},
		   *owners[] = {"w1", "w2", "w3"};
	int64_t e[3];
	struct core_card *c;
	struct core_event ev;
	struct server_reaper_stats s;
	size_t i;

	dead_finished(3, ids, runs, owners, e);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	s = pass(reaper);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	ck_assert_int_eq(s.listed, 3);
	ck_assert_int_eq(s.errors, 3);
	ck_assert_int_eq(s.transferred, 0);
	ck_assert_int_eq(s.actions[CORE_STUCK_COMPLETE], 0);
	for (i = 0; i < 3; i++) {
		c = get(ids[i]);
		ck_assert_str_eq(c->state, "in_progress");
		ck_assert(c->claim.present);
		ck_assert_str_eq(c->claim.marker, owners[i]);
		ck_assert_int_eq(c->claim_epoch, e[i]);
		core_card_free(c);
		ck_assert(!last_event(ids[i], CORE_EV_CARD_STATE_CHANGED, &ev));
	}
	create("after", "ready"); /* the first write after the fault re-establishes the journal */
	s = pass(reaper);
	ck_assert_int_eq(s.errors, 0);
	ck_assert_int_eq(s.transferred, 3);
	ck_assert_int_eq(s.actions[CORE_STUCK_COMPLETE], 3);
	for (i = 0; i < 3; i++) {
		c = get(ids[i]);
		ck_assert_str_eq(c->state, "done");
		ck_assert(!c->claim.present);
		core_card_free(c);
	}
}
END_TEST

/* The sync of another thread fails while one worker is halfway through its share, its
 * TRANSFER batch journaled but not yet durable: its next writes (the action batch, the
 * releases) are refused (never a recovery that would wait for its own untold lines: a
 * deadlock), its ack learns the rollback, nothing of the share stays. */
static int fail_midway_seen;

static void *other_writer(void *arg)
{
	struct store_card_create in = {.id = "other", .state = "ready", .title = "other"};
	struct core_card *c = NULL;

	(void)arg;
	/* A blocking write (no ack bound here): its own sync fails and rolls back. */
	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_ERR_STORE_UNAVAILABLE);
	return NULL;
}

static void fail_midway(void *ctx, const struct core_card *seen)
{
	pthread_t th;

	(void)ctx;
	(void)seen;
	if (++fail_midway_seen != 1)
		return;
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(pthread_create(&th, NULL, other_writer, NULL), 0);
	pthread_join(th, NULL);
	/* The disk is back before this worker's next write: a recovery could now succeed. */
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
}

START_TEST(test_sync_fails_midway_through_a_share)
{
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000, .batch = 100,
					   .lease_ms = LEASE, .hostname = "midway", .workers = 1,
					   .log = quiet_log, .after_transfer = fail_midway};
	const char *ids[] = {"m1", "m2", "m3"}, *runs[] = {"r1", "r2", "r3"},
		   *owners[] = {"w1", "w2", "w3"};
	struct server_reaper *r = NULL;
	struct server_reaper_stats s;
	struct core_card *c;
	int64_t e[3];
	size_t i;

	dead_finished(3, ids, runs, owners, e);
	fail_midway_seen = 0;
	ck_assert_int_eq(server_reaper_new(st, &cfg, &r), CORE_OK);
	s = pass(r);
	ck_assert_int_eq(fail_midway_seen, 3);
	ck_assert_int_eq(s.listed, 3);
	ck_assert_int_eq(s.errors, 3);
	for (i = 0; i < 3; i++) {
		c = get(ids[i]);
		ck_assert_str_eq(c->state, "in_progress");
		ck_assert_str_eq(c->claim.marker, owners[i]);
		ck_assert_int_eq(c->claim_epoch, e[i]);
		core_card_free(c);
	}
	create("after", "ready"); /* re-establishes the journal */
	s = pass(r);
	ck_assert_int_eq(s.errors, 0);
	ck_assert_int_eq(s.actions[CORE_STUCK_COMPLETE], 3);
	server_reaper_free(r);
}
END_TEST

START_TEST(test_failed_fails_with_run_failed)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_card *c;

	with_run("c1", "r1", "w1", e, "failed", LEASE);
	advance(LEASE + 1);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_FAIL], 1);
	c = get("c1");
	ck_assert_str_eq(c->state, "blocked");
	ck_assert_str_eq(c->state_reason, "run_failed");
	ck_assert(!c->claim.present);
	core_card_free(c);
}
END_TEST

START_TEST(test_live_run_untouched)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_card *before;
	struct core_run *r = NULL;
	struct server_reaper_stats s;

	/* The card's lease lapsed but the run lock is live: never steal from a live run. */
	with_run("c1", "r1", "w1", e, "running", 10 * LEASE);
	advance(LEASE + 1);
	before = get("c1");
	s = pass(reaper);
	ck_assert_int_eq(s.listed, 1);
	ck_assert_int_eq(s.transferred, 0);
	ck_assert_int_eq(s.actions[CORE_STUCK_KEEP], 1);
	assert_untouched_by("c1", before);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_str_eq(r->status, "running");
	core_run_free(r);
	core_card_free(before);
}
END_TEST

START_TEST(test_orphaned_run_promoted_then_reparked)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_card *c;
	struct core_run *r = NULL;

	with_run("c1", "r1", "w1", e, "running", LEASE / 2);
	advance(LEASE + 1);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_REPARK], 1);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_str_eq(r->status, CORE_RUN_FAILED_RESUMABLE);
	ck_assert_str_eq(r->failure_code, CORE_FAILURE_ORPHANED);
	core_run_free(r);
	c = get("c1");
	/* FS twin: released in place, the running column is eligible locally */
	ck_assert_str_eq(c->state, "in_progress");
	ck_assert(!c->claim.present);
	/* DESIGN §17: a return to the pool counts an attempt and sets the backoff (1 s +-10 %) */
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_int_ge(c->not_before, now_ms + 900);
	ck_assert_int_le(c->not_before, now_ms + 1100);
	core_card_free(c);
}
END_TEST

/* A board whose running column is not eligible: a repark (a resumable run) and a no-run
 * release from it put the card into the pool proper, eligible[0], as the Mongo twin does;
 * released in place they stayed in a column claim-next never takes from, claimable by
 * nobody (the reaper audit). */
START_TEST(test_return_from_a_running_column_not_eligible)
{
	struct core_board b = {0};
	struct core_event ev;
	struct core_card *c;
	int64_t e;
	size_t i;

	ck_assert_int_eq(core_board_init_default(&b, "ne"), CORE_OK);
	for (i = 0; i < b.n_cols; i++)
		if (strcmp(b.cols[i].name, b.running) == 0)
			b.cols[i].eligible = false;
	ck_assert_int_eq(store_board_put(st, &b, &bot), CORE_OK);
	for (i = 0; i < 2; i++) {
		struct store_card_create in = {.id = i ? "ne-norun" : "ne-run", .board = "ne",
					       .title = "t", .state = "ready"};
		struct store_claim_result res = {0};
		struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = b.running};

		ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
		core_card_free(c);
		ck_assert_int_eq(store_card_claim(st, in.id, "w1", LEASE, &worker, &res), CORE_OK);
		e = res.token.epoch;
		core_card_free(res.card);
		if (!i)
			with_run(in.id, "ne-r1", "w1", e, "running", LEASE / 2);
		w.token = (struct core_token){.marker = "w1", .epoch = e};
		ck_assert_int_eq(store_card_owned_write(st, in.id, &w, &worker, &c), CORE_OK);
		ck_assert_str_eq(c->state, b.running);
		core_card_free(c);
	}
	advance(2 * LEASE + 1); /* past the no-run stamp window too */
	pass(reaper);
	for (i = 0; i < 2; i++) {
		c = get(i ? "ne-norun" : "ne-run");
		ck_assert_msg(!c->claim.present && strcmp(c->state, "ready") == 0,
			      "%s: released into %s (claimed: %d)", c->id, c->state,
			      c->claim.present);
		ck_assert_int_eq(c->attempts, 1);
		core_card_free(c);
		/* A move into a launch column the machine decided, both of them (the no-run
		 * release as the repark): machine provenance, no subscription fires and no
		 * one-shot label is consumed (ADR-096). */
		ck_assert(last_event(i ? "ne-norun" : "ne-run", CORE_EV_CARD_STATE_CHANGED, &ev));
		ck_assert_msg(ev.machine && strcmp(ev.actor, "") == 0 && ev.reason &&
				      strcmp(ev.reason, "watchdog") == 0,
			      "%s: the move into ready is machine %d, reason %s",
			      i ? "ne-norun" : "ne-run", ev.machine, ev.reason ? ev.reason : "null");
		core_event_release(&ev);
	}
	core_board_release(&b);
}
END_TEST

/* The clock past the backoff a return to the pool left on card id (DESIGN §17). */
static void past_backoff(const char *id)
{
	struct core_card *c = get(id);

	if (c->not_before > now_ms)
		advance(c->not_before - now_ms + 1);
	core_card_free(c);
}

/* One more claim of c1 by `marker` that dies with its run running: the lease expires, the run
 * is promoted failed_resumable, and a pass returns the card to the pool. Returns the pass. */
static struct server_reaper_stats die_once(const char *marker, const char *run_id)
{
	struct store_claim_result res = {0};

	past_backoff("c1");
	ck_assert_int_eq(store_card_claim(st, "c1", marker, LEASE, &worker, &res), CORE_OK);
	ck_assert(res.fresh);
	with_run("c1", run_id, marker, res.token.epoch, "running", LEASE / 2);
	core_card_free(res.card);
	advance(LEASE + 1);
	return pass(reaper);
}

/* DESIGN §17: every return to the pool counts; at max_attempts (the store's default, the
 * server's --run-ceiling, here 3) the card is filed into the failed column under machine
 * provenance with gave_up {attempts_exhausted, the failed column, the last run}, released;
 * a completion resets the count. This replaces the run ceiling. */
START_TEST(test_returns_count_attempts_until_exhausted)
{
	struct server_reaper_stats s;
	struct core_card *c;
	struct core_event ev;

	store_retry_default_set(st, 3);
	create("c1", "ready");
	s = die_once("w1", "r1");
	ck_assert_int_eq(s.actions[CORE_STUCK_REPARK], 1);
	c = get("c1");
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_str_eq(c->state, "ready");
	core_card_free(c);
	s = die_once("w2", "r2");
	ck_assert_int_eq(s.actions[CORE_STUCK_REPARK], 1);
	c = get("c1");
	ck_assert_int_eq(c->attempts, 2);
	ck_assert(!c->gave_up.set);
	ck_assert(c->not_before > now_ms);
	core_card_free(c);
	s = die_once("w3", "r3");
	ck_assert_int_eq(s.actions[CORE_STUCK_REPARK], 1);
	ck_assert_int_eq(s.errors, 0);
	c = get("c1");
	ck_assert_str_eq(c->state, "blocked");
	ck_assert_int_eq(c->attempts, 3);
	ck_assert(!c->claim.present);
	ck_assert(c->gave_up.set);
	ck_assert_str_eq(c->gave_up.reason, CORE_GAVE_UP_ATTEMPTS_EXHAUSTED);
	ck_assert_str_eq(c->gave_up.state, "blocked");
	ck_assert_str_eq(c->gave_up.run_id, "r3");
	core_card_free(c);
	ck_assert(last_event("c1", CORE_EV_CARD_STATE_CHANGED, &ev));
	ck_assert(ev.machine); /* the machine decided: no downstream chain */
	core_event_release(&ev);
	ck_assert(last_event("c1", CORE_EV_CARD_GAVE_UP, &ev));
	core_event_release(&ev);
	/* an operator's reopen starts the count again */
	ck_assert_int_eq(store_card_reopen(st, "c1", "ready", NULL, &ops, &c), CORE_OK);
	ck_assert_int_eq(c->attempts, 0);
	core_card_free(c);
}
END_TEST

/* A claim that dies before its run is recorded is returned to the pool with an attempt
 * counted (DESIGN §17: every reaper return; a card that kills its worker before the run
 * starts must not loop for ever); a filing by the run's own verdict counts none. */
START_TEST(test_release_counts_filing_does_not)
{
	int64_t e;
	struct core_card *c;

	claimed("c1", "ready", "w1");
	advance(LEASE + 1);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_RELEASE], 1);
	c = get("c1");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->attempts, 1);
	ck_assert(c->not_before > now_ms);
	core_card_free(c);
	e = claimed("c2", "in_progress", "w2");
	with_run("c2", "r2", "w2", e, "running", LEASE);
	run_set("r2", "w2", "failed", NULL);
	advance(LEASE + 1);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_FAIL], 1);
	c = get("c2");
	ck_assert_str_eq(c->state, "blocked");
	ck_assert_int_eq(c->attempts, 0);
	core_card_free(c);
}
END_TEST

static const struct {
	const char *status, *continuation;
} kept_runs[] = {
	{"paused_waiting_human", NULL},
	{"paused_operator", NULL},
	{"cancelled", NULL},
	{"failed_resumable", "retry_armed"},
	{"failed", "redelivery_pending"},
	{"exploded_in_a_new_way", NULL}, /* unknown status: conserved */
};

START_TEST(test_kept_runs)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_card *before, *after;
	struct server_reaper_stats s;

	with_run("c1", "r1", "w1", e, "running", LEASE);
	run_set("r1", "w1", kept_runs[_i].status, kept_runs[_i].continuation);
	advance(LEASE + 1);
	before = get("c1");
	s = pass(reaper);
	ck_assert_int_eq(s.actions[CORE_STUCK_KEEP], 1);
	ck_assert_int_eq(s.actions[CORE_STUCK_COMPLETE] + s.actions[CORE_STUCK_FAIL] +
				 s.actions[CORE_STUCK_REPARK] + s.actions[CORE_STUCK_RELEASE],
			 0);
	/* every kept row is a liveness row: refused before the transfer, nothing written */
	ck_assert_int_eq(s.transferred, 0);
	after = get("c1");
	ck_assert(core_card_equal(before, after));
	core_card_free(before);
	core_card_free(after);
}
END_TEST

/* Kept claims stay expired at the head of the listing's order; once a batch of them piled
 * up, a pass that listed from the first saw only them, and a dead claim behind them was
 * never reclaimed (nor its capacity freed). Each pass resumes where the last one's listing
 * ended: the dead claim is reached within ceil(expired / batch) passes. */
START_TEST(test_kept_claims_do_not_starve_the_batch)
{
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000, .batch = 2,
					   .lease_ms = LEASE, .hostname = "small",
					   .log = quiet_log};
	struct server_reaper *small = NULL;
	struct core_card *c;
	char id[16], run[16];
	int64_t e;
	int i, passes;

	ck_assert_int_eq(server_reaper_new(st, &cfg, &small), CORE_OK);
	for (i = 0; i < 4; i++) { /* four cancelled runs' cards: kept, expired, first */
		snprintf(id, sizeof id, "k%d", i);
		snprintf(run, sizeof run, "rk%d", i);
		e = claimed(id, "in_progress", "w1");
		with_run(id, run, "w1", e, "running", LEASE);
		run_set(run, "w1", "cancelled", NULL);
	}
	advance(1000);
	claimed("dead", "in_progress", "w2"); /* no run: released once reclaimed */
	advance(2 * LEASE + 1000);              /* past the no-run stamp window too */
	for (passes = 1; passes <= 4; passes++) {
		pass(small);
		c = get("dead");
		if (!c->claim.present || strcmp(c->claim.marker, "w2") != 0) {
			core_card_free(c);
			break;
		}
		core_card_free(c);
	}
	ck_assert_msg(passes <= 3, "the dead claim behind 4 kept ones, batch 2: still held "
				   "after %d passes", passes - 1);
	for (i = 0; i < 4; i++) { /* the kept ones are still kept */
		snprintf(id, sizeof id, "k%d", i);
		c = get(id);
		ck_assert(c->claim.present);
		ck_assert_str_eq(c->claim.marker, "w1");
		core_card_free(c);
	}
	server_reaper_free(small);
}
END_TEST

START_TEST(test_no_run_stamp_window)
{
	struct core_card *before, *c;
	struct server_reaper_stats s;

	claimed("c1", "in_progress", "w1");
	advance(LEASE + LEASE / 2); /* lease lapsed, but < 2 leases since the claim */
	before = get("c1");
	s = pass(reaper);
	ck_assert_int_eq(s.transferred, 0);
	ck_assert_int_eq(s.actions[CORE_STUCK_KEEP], 1);
	assert_untouched_by("c1", before);
	core_card_free(before);

	advance(LEASE / 2); /* now exactly 2 leases: the window is closed */
	s = pass(reaper);
	ck_assert_int_eq(s.actions[CORE_STUCK_RELEASE], 1);
	c = get("c1");
	ck_assert(!c->claim.present);
	ck_assert_str_eq(c->state, "in_progress");
	core_card_free(c);
}
END_TEST

START_TEST(test_pruned_run_gives_up)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_card *c;
	struct core_event ev;

	with_run("c1", "r1", "w1", e, "running", LEASE);
	ck_assert_int_eq(store_run_prune(st, "r1", &ops), CORE_OK);
	advance(LEASE + 1);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_GIVE_UP], 1);
	c = get("c1");
	ck_assert_str_eq(c->state, "blocked");
	ck_assert_str_eq(c->state_reason, "watchdog");
	ck_assert(c->gave_up.set);
	ck_assert_str_eq(c->gave_up.reason, "run_pruned");
	ck_assert_str_eq(c->gave_up.run_id, "r1");
	ck_assert(!c->claim.present);
	core_card_free(c);
	ck_assert(last_event("c1", CORE_EV_CARD_STATE_CHANGED, &ev));
	ck_assert(ev.machine); /* machine provenance: no downstream chain */
	ck_assert_str_eq(ev.actor, "");
	core_event_release(&ev);
}
END_TEST

/* The run gone, the card moved out of the pool by somebody (review) while claimed: not filed
 * over that choice, but stamped where it is, so the Needs-attention lane shows it to an
 * operator (ADR-096: a gone run's card is never left unseen), and released. */
START_TEST(test_pruned_run_out_of_the_pool_is_stamped_in_place)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_card *c = NULL;
	struct store_attention *v = NULL;
	size_t n = 0;
	bool trunc = false;

	with_run("c1", "r1", "w1", e, "running", LEASE);
	ck_assert_int_eq(store_card_set_state_from(st, "c1", "in_progress", "review", NULL, &ops,
						   &c),
			 CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_run_prune(st, "r1", &ops), CORE_OK);
	advance(LEASE + 1);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_GIVE_UP], 1);
	c = get("c1");
	ck_assert_str_eq(c->state, "review");
	ck_assert(c->gave_up.set);
	ck_assert_str_eq(c->gave_up.reason, "run_pruned");
	ck_assert_str_eq(c->gave_up.run_id, "r1");
	ck_assert(!c->claim.present);
	core_card_free(c);
	ck_assert_int_eq(store_attention_list(st, NULL, NULL, 10, &v, &n, &trunc), CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].card->id, "c1");
	ck_assert_uint_eq(v[0].reasons, 1u << CORE_ATTN_GAVE_UP);
	store_attention_free(v, n);
}
END_TEST

/* An operator moves the card between the listing and the transfer (after_list), or between
 * the transfer and the act (after_transfer): the decision is taken on what the transfer
 * observed, and the filing is a compare on that column (store_owned_write.from), so a
 * column somebody chose is never overwritten; no error counted, the claim released. */
static void move_to_review(void *ctx, const struct core_card *card)
{
	struct core_card *c = NULL;

	(void)ctx;
	ck_assert_int_eq(store_card_set_state_from(st, card->id, "in_progress", "review", NULL,
						   &ops, &c),
			 CORE_OK);
	core_card_free(c);
}

START_TEST(test_operator_move_not_overwritten)
{
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000, .batch = 100,
					   .lease_ms = LEASE, .hostname = "hookhost",
					   .log = quiet_log};
	struct server_reaper *r = NULL;
	struct server_reaper_stats s;
	struct core_card *c;
	int64_t e;

	if (_i == 0)
		cfg.after_list = move_to_review;
	else
		cfg.after_transfer = move_to_review;
	e = claimed("c1", "in_progress", "w1");
	with_run("c1", "r1", "w1", e, "finished", LEASE);
	advance(LEASE + 1);
	ck_assert_int_eq(server_reaper_new(st, &cfg, &r), CORE_OK);
	s = pass(r);
	ck_assert_uint_eq(s.transferred, 1);
	ck_assert_uint_eq(s.errors, 0);
	c = get("c1");
	ck_assert_str_eq(c->state, "review");
	ck_assert(!c->claim.present);
	core_card_free(c);
	server_reaper_free(r);
}
END_TEST

/* The holder writes its run between the judging and the transfer (its claim still live): the
 * decision is taken on the run as the transfer left it, never on the judging's copy, which
 * had promoted a dead-looking `running` run to failed_resumable. v1's run finishes (complete),
 * v2's fails (fail), v3 records a finished run it had not recorded at the listing (complete,
 * not a bare release). After the transfer the holder's run writes are refused: v4's finish
 * comes too late, and the card goes back to the pool. */
static void run_in_window(void *ctx, const struct core_card *listed)
{
	(void)ctx;
	if (strcmp(listed->id, "v1") == 0)
		run_set("r1", "w1", "finished", NULL);
	else if (strcmp(listed->id, "v2") == 0)
		run_set("r2", "w2", "failed", NULL);
	else if (strcmp(listed->id, "v3") == 0)
		with_run("v3", "r3", "w3", listed->claim_epoch, "finished", LEASE);
}

static void run_after_transfer(void *ctx, const struct core_card *seen)
{
	struct store_run_update fin = {.marker = "w4", .status = "finished", .lease_ms = LEASE};
	struct core_run *r = NULL;

	(void)ctx;
	if (strcmp(seen->id, "v4") == 0)
		ck_assert_int_eq(store_run_update(st, "r4", &fin, &worker, &r),
				 CORE_ERR_CLAIM_CONFLICT);
}

START_TEST(test_run_written_before_the_transfer_decides)
{
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000, .batch = 100,
					   .lease_ms = LEASE, .hostname = "runhost",
					   .log = quiet_log, .after_list = run_in_window,
					   .after_transfer = run_after_transfer};
	const char *want_state[] = {"done", "blocked", "done", "in_progress"};
	const char *want_run[] = {CORE_RUN_FINISHED, CORE_RUN_FAILED, CORE_RUN_FINISHED,
				  CORE_RUN_FAILED_RESUMABLE};
	char id[8], run_id[8], marker[8];
	struct server_reaper *r = NULL;
	struct server_reaper_stats s;
	struct core_run *run = NULL;
	struct core_card *c;
	int i;

	for (i = 1; i <= 4; i++) {
		int64_t e;

		snprintf(id, sizeof id, "v%d", i);
		snprintf(run_id, sizeof run_id, "r%d", i);
		snprintf(marker, sizeof marker, "w%d", i);
		e = claimed(id, "in_progress", marker);
		if (i != 3)
			with_run(id, run_id, marker, e, "running", LEASE / 2);
	}
	advance(2 * LEASE); /* past v3's stamp window too (test_no_run_stamp_window) */
	ck_assert_int_eq(server_reaper_new(st, &cfg, &r), CORE_OK);
	s = pass(r);
	ck_assert_int_eq(s.transferred, 4);
	ck_assert_int_eq(s.errors, 0);
	ck_assert_int_eq(s.actions[CORE_STUCK_COMPLETE], 2);
	ck_assert_int_eq(s.actions[CORE_STUCK_FAIL], 1);
	ck_assert_int_eq(s.actions[CORE_STUCK_REPARK], 1);
	for (i = 1; i <= 4; i++) {
		snprintf(id, sizeof id, "v%d", i);
		snprintf(run_id, sizeof run_id, "r%d", i);
		c = get(id);
		ck_assert_msg(strcmp(c->state, want_state[i - 1]) == 0, "%s in %s", id, c->state);
		ck_assert(!c->claim.present);
		ck_assert_int_eq(c->attempts, i == 4);
		core_card_free(c);
		ck_assert_int_eq(store_run_get(st, run_id, &run), CORE_OK);
		ck_assert_str_eq(run->status, want_run[i - 1]);
		core_run_free(run);
	}
	c = get("v1");
	ck_assert_str_eq(c->state_reason, "run_finished");
	core_card_free(c);
	c = get("v2");
	ck_assert_str_eq(c->state_reason, "run_failed");
	core_card_free(c);
	server_reaper_free(r);
}
END_TEST

/* An operator parks the card in review between the listing and the transfer, no run behind
 * it: the release leaves it there and counts no attempt (it is not a return to the pool), so
 * even at max_attempts 1 it is not filed into blocked for attempts_exhausted. Back in the
 * pool, a release counts (p3). */
START_TEST(test_parked_by_an_operator_counts_no_attempt)
{
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000, .batch = 100,
					   .lease_ms = LEASE, .hostname = "parkhost",
					   .log = quiet_log, .after_list = move_to_review};
	struct server_reaper *r = NULL;
	struct server_reaper_stats s;
	struct core_card *c;

	store_retry_default_set(st, 1);
	claimed("p1", "in_progress", "w1");
	advance(2 * LEASE); /* past the stamp window */
	ck_assert_int_eq(server_reaper_new(st, &cfg, &r), CORE_OK);
	s = pass(r);
	ck_assert_int_eq(s.transferred, 1);
	ck_assert_int_eq(s.actions[CORE_STUCK_RELEASE], 1);
	ck_assert_int_eq(s.errors, 0);
	c = get("p1");
	ck_assert_str_eq(c->state, "review");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->attempts, 0);
	ck_assert_int_eq(c->not_before, 0);
	ck_assert(!c->gave_up.set);
	core_card_free(c);
	server_reaper_free(r);
	claimed("p3", "in_progress", "w3");
	advance(2 * LEASE);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_RELEASE], 1);
	c = get("p3");
	ck_assert_str_eq(c->state, "blocked"); /* max_attempts 1: filed */
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_str_eq(c->gave_up.reason, CORE_GAVE_UP_ATTEMPTS_EXHAUSTED);
	core_card_free(c);
}
END_TEST

/* A renewal lands between the listing and the transfer: a clean skip. */
static int64_t renew_epoch;

static void renew_in_window(void *ctx, const struct core_card *listed)
{
	struct core_token t = {"w1", renew_epoch, NULL};
	struct core_card *c = NULL;

	(void)ctx;
	ck_assert_int_eq(store_card_renew(st, listed->id, &t, LEASE, &worker, &c), CORE_OK);
	core_card_free(c);
}

START_TEST(test_renewal_between_list_and_transfer_skips)
{
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000, .batch = 100,
					   .lease_ms = LEASE, .hostname = "h2", .log = quiet_log,
					   .after_list = renew_in_window};
	struct server_reaper *r = NULL;
	struct server_reaper_stats s;
	struct core_card *c;

	renew_epoch = claimed("c1", "in_progress", "w1");
	with_run("c1", "r1", "w1", renew_epoch, "finished", LEASE);
	advance(LEASE + 1);
	ck_assert_int_eq(server_reaper_new(st, &cfg, &r), CORE_OK);
	s = pass(r);
	ck_assert_int_eq(s.listed, 1);
	ck_assert_int_eq(s.transferred, 0);
	ck_assert_int_eq(s.skipped, 1);
	ck_assert_int_eq(s.errors, 0);
	c = get("c1");
	ck_assert_str_eq(c->claim.marker, "w1");
	ck_assert_int_eq(c->claim_epoch, renew_epoch);
	ck_assert_str_eq(c->state, "in_progress");
	core_card_free(c);
	server_reaper_free(r);
}
END_TEST

/* Two reapers race on one card: B runs its whole pass inside A's list→transfer window. */
static struct server_reaper *rival;
static struct server_reaper_stats rival_stats;

static void rival_pass(void *ctx, const struct core_card *listed)
{
	(void)ctx;
	(void)listed;
	ck_assert_int_eq(server_reaper_pass(rival, &rival_stats), CORE_OK);
}

START_TEST(test_two_reapers_exactly_one_acts)
{
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000, .batch = 100,
					   .lease_ms = LEASE, .hostname = "replica-a",
					   .log = quiet_log, .after_list = rival_pass};
	struct server_reaper *a = NULL;
	struct server_reaper_stats s;
	struct core_card *c;
	int64_t e = claimed("c1", "in_progress", "w1");

	with_run("c1", "r1", "w1", e, "finished", LEASE);
	advance(LEASE + 1);
	rival = make_reaper("replica-b", true);
	ck_assert_int_eq(server_reaper_new(st, &cfg, &a), CORE_OK);
	s = pass(a);
	ck_assert_int_eq(rival_stats.transferred, 1);
	ck_assert_int_eq(rival_stats.actions[CORE_STUCK_COMPLETE], 1);
	ck_assert_int_eq(s.transferred, 0);
	ck_assert_int_eq(s.skipped, 1);
	c = get("c1");
	ck_assert_str_eq(c->state, "done");
	ck_assert_int_eq(c->claim_epoch, e + 1); /* one transfer, not two */
	core_card_free(c);
	server_reaper_free(a);
	server_reaper_free(rival);
}
END_TEST

/* Many cards, two reapers in two threads: every card filed exactly once. */
static void *pass_thread(void *arg)
{
	struct server_reaper_stats *s = calloc(1, sizeof(*s));

	server_reaper_pass(arg, s);
	return s;
}

START_TEST(test_two_reapers_threads)
{
	struct server_reaper *a = make_reaper("ra", true), *b = make_reaper("rb", true);
	struct server_reaper_stats *sa, *sb;
	pthread_t ta, tb;
	char id[16], run[16];
	int i;

	for (i = 0; i < 40; i++) {
		int64_t e;
		snprintf(id, sizeof(id), "c%d", i);
		snprintf(run, sizeof(run), "r%d", i);
		e = claimed(id, "in_progress", "w1");
		with_run(id, run, "w1", e, "finished", LEASE);
	}
	advance(LEASE + 1);
	pthread_create(&ta, NULL, pass_thread, a);
	pthread_create(&tb, NULL, pass_thread, b);
	pthread_join(ta, (void **)&sa);
	pthread_join(tb, (void **)&sb);
	ck_assert_int_eq(sa->transferred + sb->transferred, 40);
	ck_assert_int_eq(sa->actions[CORE_STUCK_COMPLETE] + sb->actions[CORE_STUCK_COMPLETE], 40);
	for (i = 0; i < 40; i++) {
		struct core_card *c;
		snprintf(id, sizeof(id), "c%d", i);
		c = get(id);
		ck_assert_str_eq(c->state, "done");
		ck_assert_int_eq(c->claim_epoch, 2);
		core_card_free(c);
	}
	free(sa);
	free(sb);
	server_reaper_free(a);
	server_reaper_free(b);
}
END_TEST

START_TEST(test_gate_off_decides_nothing_but_repairs)
{
	struct server_reaper *off = make_reaper("offhost", false);
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_card *before, *c;
	struct server_reaper_stats s;

	with_run("c1", "r1", "w1", e, "finished", LEASE);
	claimed("c2", "review", "reaper:crashed-host"); /* an abandoned recovery claim */
	advance(LEASE + 1);
	before = get("c1");
	s = pass(off);
	ck_assert_str_eq(s.gate ? "on" : "off", "off");
	ck_assert_int_eq(s.listed, 0);
	ck_assert_int_eq(s.transferred, 0);
	ck_assert_int_eq(s.repaired, 1);
	assert_untouched_by("c1", before);
	c = get("c2");
	ck_assert(!c->claim.present);
	ck_assert_str_eq(c->state, "review");
	core_card_free(c);
	core_card_free(before);
	server_reaper_free(off);
}
END_TEST

START_TEST(test_repair_conserves_live_recovery_hold)
{
	struct server_reaper *off = make_reaper("offhost", false);
	int64_t e = claimed("c1", "in_progress", "reaper:crashed-host");
	struct core_card *c;

	/* a run is live behind the recovery claim: releasing it could double-launch */
	with_run("c1", "r1", "reaper:crashed-host", e, "running", 10 * LEASE);
	advance(3 * LEASE);
	ck_assert_int_eq(pass(off).repaired, 0);
	c = get("c1");
	ck_assert(c->claim.present);
	core_card_free(c);
	server_reaper_free(off);
}
END_TEST

START_TEST(test_startup_repair)
{
	struct server_reaper *r2 = make_reaper("boot", false);
	struct core_card *c;

	claimed("c1", "backlog", "reaper:old");
	advance(LEASE + 1);
	ck_assert_int_eq(server_reaper_start(r2), CORE_OK);
	c = get("c1");
	ck_assert(!c->claim.present);
	core_card_free(c);
	server_reaper_stop(r2);
	server_reaper_free(r2);
}
END_TEST

/* Parked outside the pool: conserved once under the recovery claim, released a lease later. */
START_TEST(test_parked_kept_once_then_released)
{
	int64_t e = claimed("c1", "review", "w1");
	struct core_card *c;
	struct server_reaper_stats s;

	with_run("c1", "r1", "w1", e, "failed_resumable", LEASE);
	advance(LEASE + 1);
	s = pass(reaper);
	ck_assert_int_eq(s.transferred, 1);
	ck_assert_int_eq(s.actions[CORE_STUCK_KEEP], 1);
	c = get("c1");
	ck_assert_str_eq(c->claim.marker, "reaper:testhost");
	ck_assert_str_eq(c->state, "review");
	core_card_free(c);
	advance(LEASE + 1);
	s = pass(reaper);
	c = get("c1");
	ck_assert(!c->claim.present);
	ck_assert_str_eq(c->state, "review");
	core_card_free(c);
}
END_TEST

/* The zombie: after a reclaim every write with the old token is refused and changes nothing. */
START_TEST(test_zombie_writes_refused)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_token old = {"w1", e, NULL};
	struct store_owned_write ws = {.kind = STORE_OWNED_STATE, .token = old, .state = "review"};
	struct store_owned_write wr = {.kind = STORE_OWNED_LAST_RUN, .token = old,
				       .run_id = "zombie"};
	struct core_card *before, *out = NULL;

	with_run("c1", "r1", "w1", e, "running", LEASE);
	run_set("r1", "w1", "failed_resumable", NULL);
	advance(LEASE + 1);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_REPARK], 1);
	/* the card is free again (after its backoff); a new worker takes it */
	past_backoff("c1");
	{
		struct store_claim_result res = {0};
		ck_assert_int_eq(store_card_claim(st, "c1", "w2", LEASE, &worker, &res), CORE_OK);
		ck_assert_int_eq(res.token.epoch, e + 2);
		core_card_free(res.card);
	}
	before = get("c1");
	ck_assert_int_eq(store_card_renew(st, "c1", &old, LEASE, &worker, &out), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_owned_write(st, "c1", &ws, &worker, &out),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_owned_write(st, "c1", &wr, &worker, &out),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_release(st, "c1", &old, &worker, &out), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_ptr_null(out);
	assert_untouched_by("c1", before);
	core_card_free(before);
}
END_TEST

/* A watchdog filing into done carries run_finished, so the blocker cascade fires. */
/* Issue 9's zombie, end to end at the store: w1 claims and records run r1; the reaper
 * promotes r1 and frees the card; w2 claims; w1 wakes and writes r1 finished (refused: r1's
 * claim is gone); w2 dies before recording a run; the next pass must not file the card done
 * on r1's word — r1 is a run of an earlier claim, so for w2's claim no run is recorded. */
START_TEST(test_zombie_run_cannot_file_the_new_owners_card)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct store_run_update fin = {.marker = "w1", .status = "finished"};
	struct store_claim_result res = {0};
	struct core_event ev;
	struct core_run *r = NULL;
	struct core_card *c;

	with_run("c1", "r1", "w1", e, "running", LEASE / 2);
	advance(LEASE + 1);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_REPARK], 1);
	past_backoff("c1");
	ck_assert_int_eq(store_card_claim(st, "c1", "w2", LEASE, &worker2, &res), CORE_OK);
	core_card_free(res.card);
	/* w1's late write: refused, the run unchanged. */
	ck_assert_int_eq(store_run_update(st, "r1", &fin, &worker, &r), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_str_eq(r->status, CORE_RUN_FAILED_RESUMABLE);
	core_run_free(r);
	/* Even a run of an earlier claim that did finish decides nothing for w2's claim. */
	ck_assert_int_eq(store_run_create(st, &(struct store_run_create){.id = "r-w2",
			 .card_id = "c1", .marker = "w2", .status = "finished", .lease_ms = 1},
			 &worker2, &r), CORE_OK);
	core_run_free(r);
	/* w2 dies without recording it: last_run_id still names r1, of w1's claim. */
	advance(3 * LEASE); /* past w2's lease and its stamp window */
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_RELEASE], 1);
	c = get("c1");
	ck_assert_str_eq(c->state, "in_progress"); /* not done: nobody finished the work */
	ck_assert(!c->claim.present);
	ck_assert_str_eq(c->last_run_id, "r1");
	core_card_free(c);
	/* The watchdog's own release is a machine event: actor blank. */
	ck_assert(last_event("c1", CORE_EV_CARD_RELEASED, &ev));
	ck_assert(ev.machine);
	ck_assert_str_eq(ev.actor, "");
	ck_assert_str_eq(ev.reason, "watchdog");
	core_event_release(&ev);
}
END_TEST

/* w1 claims c1 (in_progress), records run r1 with `status` and lets go (the run then pruned
 * when `prune`); w2 claims and dies before recording a run. Past w2's lease the pass releases
 * the card, left in_progress; returns it (the caller frees it). */
static struct core_card *earlier_run_then_w2_dies(const char *status, bool prune)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct store_claim_result res = {0};
	struct core_token t = {"w1", e, NULL};
	struct core_card *c = NULL;

	with_run("c1", "r1", "w1", e, status, LEASE);
	ck_assert_int_eq(store_card_release(st, "c1", &t, &worker, &c), CORE_OK);
	core_card_free(c);
	if (prune)
		ck_assert_int_eq(store_run_prune(st, "r1", &ops), CORE_OK);
	ck_assert_int_eq(store_card_claim(st, "c1", "w2", LEASE, &worker2, &res), CORE_OK);
	core_card_free(res.card);
	advance(3 * LEASE);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_RELEASE], 1);
	c = get("c1");
	ck_assert_str_eq(c->state, "in_progress");
	return c;
}

/* A finished run of an earlier claim is not a verdict on a later one: w1's run finished and
 * w1 let go without filing; w2 claims and dies before recording a run. Judged by w1's run,
 * the card would be filed done for work w2 never did. */
START_TEST(test_earlier_claims_run_counts_as_none)
{
	struct core_card *c = earlier_run_then_w2_dies("finished", false);

	ck_assert(!c->claim.present);
	core_card_free(c);
}
END_TEST

/* A pruned run of an earlier claim is no give-up for a later one: w1's run was pruned after
 * w1 let go; w2 claims and dies before recording a run: released, not filed blocked. */
START_TEST(test_earlier_claims_pruned_run_counts_as_none)
{
	struct core_card *c = earlier_run_then_w2_dies("running", true);

	ck_assert(!c->gave_up.set);
	core_card_free(c);
}
END_TEST

/* Every write the watchdog makes on its own is a machine event (actor blank); its terminal
 * filing carries the run's verdict and is not. */
START_TEST(test_reaper_events_consistent)
{
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_event *ev = NULL;
	size_t n = 0, i;
	int64_t next = 0, seq;
	int filings = 0;

	with_run("c1", "r1", "w1", e, "finished", LEASE);
	seq = ct_seq();
	advance(LEASE + 1);
	ck_assert_int_eq(pass(reaper).actions[CORE_STUCK_COMPLETE], 1);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, seq, 1000, 0, &ev, &n, &next), CORE_OK);
	ck_assert_uint_gt(n, 0);
	for (i = 0; i < n; i++) {
		if (ev[i].type == CORE_EV_CARD_STATE_CHANGED) {
			ck_assert_str_eq(ev[i].reason, "run_finished");
			ck_assert(!ev[i].machine);
			filings++;
			continue;
		}
		ck_assert_msg(ev[i].machine && strcmp(ev[i].actor, "") == 0,
			      "%s by the watchdog: machine %d actor '%s'",
			      core_event_type_name(ev[i].type), ev[i].machine, ev[i].actor);
	}
	ck_assert_int_eq(filings, 1);
	store_events_free(ev, n);
}
END_TEST

START_TEST(test_filing_fires_unblocked_cascade)
{
	struct store_card_create dep = {.id = "dep", .title = "dep"};
	struct core_strv bl = {0};
	struct core_card *c = NULL;
	int64_t e = claimed("c1", "in_progress", "w1");

	ck_assert_int_eq(core_strv_push(&bl, "c1"), CORE_OK);
	dep.blockers = &bl;
	ck_assert_int_eq(store_card_create(st, &dep, &bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "waiting_deps");
	core_card_free(c);
	core_strv_release(&bl);
	with_run("c1", "r1", "w1", e, "finished", LEASE);
	advance(LEASE + 1);
	pass(reaper);
	c = get("dep");
	ck_assert_str_eq(c->state, "ready");
	ck_assert_str_eq(c->state_reason, "unblocked");
	core_card_free(c);
}
END_TEST

/* Effects (DESIGN §14, ADR-096): with a subscription to every card event, a pass that files a
 * finished run, releases an orphaned one in place and gives up on a pruned one enqueues only
 * the run's own verdict and the dependent's promotion; nothing the watchdog decided alone. */
START_TEST(test_pass_fires_only_the_runs_verdict)
{
	struct store_delivery_filter f = {.status = -1, .limit = 1000};
	struct store_card_create dep = {.id = "dep", .title = "dep"};
	struct store_delivery **v = NULL;
	struct core_strv bl = {0};
	struct core_card *c = NULL;
	int64_t e1 = claimed("fin", "in_progress", "w1"), e2 = claimed("orph", "in_progress", "w2"),
		e3 = claimed("gone", "in_progress", "w3");
	size_t n = 0, before, i, verdicts = 0, promotions = 0;

	ck_assert_int_eq(core_strv_push(&bl, "fin"), CORE_OK);
	dep.blockers = &bl;
	ck_assert_int_eq(store_card_create(st, &dep, &bot, &c), CORE_OK);
	core_card_free(c);
	core_strv_release(&bl);
	with_run("fin", "r1", "w1", e1, "finished", LEASE);
	with_run("orph", "r2", "w2", e2, "running", LEASE / 2);
	with_run("gone", "r3", "w3", e3, "running", LEASE);
	ck_assert_int_eq(store_run_prune(st, "r3", &ops), CORE_OK);
	fx_subscribe_all(st);
	ck_assert_int_eq(store_delivery_list(st, &f, &v, &before), CORE_OK);
	store_deliveries_free(v, before);
	advance(LEASE + 1);
	{
		struct server_reaper_stats s = pass(reaper);

		ck_assert_int_eq(s.actions[CORE_STUCK_COMPLETE], 1);
		ck_assert_int_eq(s.actions[CORE_STUCK_REPARK], 1);
		ck_assert_int_eq(s.actions[CORE_STUCK_GIVE_UP], 1);
	}
	ck_assert_int_eq(store_delivery_list(st, &f, &v, &n), CORE_OK);
	for (i = 0; i + before < n; i++) { /* newest first: the pass's */
		json_t *b = json_loads(v[i]->body, 0, NULL), *ev = json_object_get(b, "event");
		const char *reason = json_string_value(json_object_get(ev, "reason"));
		const char *type = json_string_value(json_object_get(ev, "type"));

		ck_assert_msg(!json_is_true(json_object_get(ev, "machine")) &&
				      !core_is_machine_reason(reason),
			      "machine event enqueued: %s %s", type, reason ? reason : "");
		verdicts += strcmp(type, "card_state_changed") == 0 && reason &&
			    strcmp(reason, "run_finished") == 0 && strcmp(v[i]->card_id, "fin") == 0;
		promotions += strcmp(type, "card_unblocked") == 0 &&
			      strcmp(v[i]->card_id, "dep") == 0;
		json_decref(b);
	}
	store_deliveries_free(v, n);
	ck_assert_uint_eq(verdicts, 1);
	ck_assert_uint_eq(promotions, 1);
}
END_TEST

START_TEST(test_stats_json_shape)
{
	struct server_reaper_stats s = {.gate = true, .listed = 3};
	json_t *j = server_reaper_stats_json(&s), *status;
	const char *at;
	int64_t first, second;

	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "gate")), "on");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "listed")), 3);
	ck_assert_ptr_nonnull(json_object_get(json_object_get(j, "actions"), "give_up"));
	ck_assert_ptr_nonnull(json_object_get(j, "repaired"));
	ck_assert_ptr_null(json_object_get(j, "finished_at")); /* no pass ended: no time */
	json_decref(j);
	status = server_reaper_status_json(reaper);
	ck_assert(json_is_null(json_object_get(status, "last_pass")));
	json_decref(status);
	pass(reaper);
	status = server_reaper_status_json(reaper);
	ck_assert(json_is_object(json_object_get(status, "last_pass")));
	ck_assert_int_eq(json_integer_value(json_object_get(status, "passes")), 1);
	/* When the pass ended (DESIGN §21: the panel shows when the last pass ran), and it
	 * moves with the next pass. */
	at = json_string_value(json_object_get(json_object_get(status, "last_pass"), "finished_at"));
	ck_assert_ptr_nonnull(at);
	ck_assert(core_time_parse(at, &first));
	json_decref(status);
	usleep(2000); /* the next pass ends at least 2 ms later on the wall clock */
	pass(reaper);
	status = server_reaper_status_json(reaper);
	at = json_string_value(json_object_get(json_object_get(status, "last_pass"), "finished_at"));
	ck_assert_ptr_nonnull(at);
	ck_assert(core_time_parse(at, &second));
	ck_assert_int_gt(second, first);
	json_decref(status);
}
END_TEST

START_TEST(test_thread_stops_cleanly)
{
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 5, .batch = 100,
					   .lease_ms = LEASE, .hostname = "fast", .log = quiet_log};
	struct server_reaper *r = NULL;
	int64_t e = claimed("c1", "in_progress", "w1");
	struct core_card *c;
	json_t *status;
	int i;

	with_run("c1", "r1", "w1", e, "finished", LEASE);
	advance(LEASE + 1);
	ck_assert_int_eq(server_reaper_new(st, &cfg, &r), CORE_OK);
	ck_assert_int_eq(server_reaper_start(r), CORE_OK);
	/* wait (bounded) for the thread's own pass to file the card */
	for (i = 0; i < 400; i++) {
		c = get("c1");
		if (strcmp(c->state, "done") == 0) {
			core_card_free(c);
			break;
		}
		core_card_free(c);
		usleep(5000);
	}
	ck_assert_int_lt(i, 400);
	server_reaper_stop(r);
	server_reaper_stop(r); /* idempotent */
	status = server_reaper_status_json(r);
	ck_assert_int_ge(json_integer_value(json_object_get(status, "passes")), 1);
	json_decref(status);
	server_reaper_free(r);
}
END_TEST

static Suite *reaper_suite(void)
{
	Suite *s = suite_create("reaper");
	TCase *tc = tcase_create("scenarios");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_finished_completes_with_run_finished);
	tcase_add_test(tc, test_failed_fails_with_run_failed);
	tcase_add_test(tc, test_failed_sync_rolls_the_pass_back);
	tcase_add_test(tc, test_sync_fails_midway_through_a_share);
	tcase_add_test(tc, test_live_run_untouched);
	tcase_add_test(tc, test_orphaned_run_promoted_then_reparked);
	tcase_add_test(tc, test_returns_count_attempts_until_exhausted);
	tcase_add_test(tc, test_release_counts_filing_does_not);
	tcase_add_loop_test(tc, test_kept_runs, 0, (int)(sizeof(kept_runs) / sizeof(kept_runs[0])));
	tcase_add_test(tc, test_kept_claims_do_not_starve_the_batch);
	tcase_add_test(tc, test_return_from_a_running_column_not_eligible);
	tcase_add_test(tc, test_no_run_stamp_window);
	tcase_add_test(tc, test_pruned_run_gives_up);
	tcase_add_test(tc, test_pruned_run_out_of_the_pool_is_stamped_in_place);
	tcase_add_loop_test(tc, test_operator_move_not_overwritten, 0, 2);
	tcase_add_test(tc, test_run_written_before_the_transfer_decides);
	tcase_add_test(tc, test_parked_by_an_operator_counts_no_attempt);
	tcase_add_test(tc, test_renewal_between_list_and_transfer_skips);
	tcase_add_test(tc, test_two_reapers_exactly_one_acts);
	tcase_add_test(tc, test_two_reapers_threads);
	tcase_add_test(tc, test_gate_off_decides_nothing_but_repairs);
	tcase_add_test(tc, test_repair_conserves_live_recovery_hold);
	tcase_add_test(tc, test_startup_repair);
	tcase_add_test(tc, test_parked_kept_once_then_released);
	tcase_add_test(tc, test_zombie_writes_refused);
	tcase_add_test(tc, test_filing_fires_unblocked_cascade);
	tcase_add_test(tc, test_pass_fires_only_the_runs_verdict);
	tcase_add_test(tc, test_zombie_run_cannot_file_the_new_owners_card);
	tcase_add_test(tc, test_reaper_events_consistent);
	tcase_add_test(tc, test_earlier_claims_run_counts_as_none);
	tcase_add_test(tc, test_earlier_claims_pruned_run_counts_as_none);
	tcase_add_test(tc, test_stats_json_shape);
	tcase_add_test(tc, test_thread_stops_cleanly);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(reaper_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
