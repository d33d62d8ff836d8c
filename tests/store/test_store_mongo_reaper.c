/* The real reaper over the Mongo twin, with the cloud divergences on (ADR-096 §7): filing,
 * repark to the pool counting an attempt (DESIGN §17) and the attempts_exhausted filing that
 * replaced the run ceiling, the residue repair, a stripped claim past the horizon. */
#include "server/reaper.h"
#include "tests/store/conformance.h"
#include "tests/store/sub_fixture.h"
#include "tests/store/test_store_mongo.h"

#include <check.h>
#include <string.h>

/* ---- the reaper over this twin (the cloud divergences, ADR-096 §7) ---- */

static void quiet_log(void *ctx, const char *line)
{
	(void)ctx;
	(void)line;
}

/* max_attempts: the store's default for boards without a retry policy (--run-ceiling). */
static struct server_reaper *mongo_reaper(struct store *st, bool gate, int32_t max_attempts)
{
	struct server_reaper_config cfg = {.gate = gate, .interval_ms = 3600000, .batch = 100,
					   .workers = 1, .lease_ms = 60000, .hostname = "mh",
					   .repark_to_pool = true, .log = quiet_log};
	struct server_reaper *r = NULL;

	store_retry_default_set(st, max_attempts);
	ck_assert_int_eq(server_reaper_new(st, &cfg, &r), CORE_OK);
	return r;
}

static void run_create(struct store *st, const char *id, const char *card, const char *marker,
		       const char *status)
{
	struct store_run_create in = {.id = id, .card_id = card, .marker = marker,
				      .status = status, .lease_ms = 60000};
	struct core_run *r = NULL;

	ck_assert_int_eq(store_run_create(st, &in, &bot, &r), CORE_OK);
	core_run_free(r);
}

static void run_set_status(struct store *st, const char *id, const char *marker,
			   const char *status)
{
	struct store_run_update u = {.marker = marker, .status = status, .lease_ms = 60000};
	struct core_run *r = NULL;

	ck_assert_int_eq(store_run_update(st, id, &u, &bot, &r), CORE_OK);
	core_run_free(r);
}

static void assert_card(struct store *st, const char *id, const char *state, bool claimed)
{
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
	ck_assert_msg(strcmp(c->state, state) == 0, "%s in %s, want %s", id, c->state, state);
	ck_assert_msg(c->claim.present == claimed, "%s claimed=%d", id, c->claim.present);
	core_card_free(c);
}

/* The events (from the delivery bodies) of the deliveries enqueued after `before` of them. */
static json_t *delivered_events(struct store *st, size_t before)
{
	struct store_delivery_filter f = {.status = -1, .limit = 1000};
	struct store_delivery **v = NULL;
	json_t *out = json_array();
	size_t n = 0, i;

	ck_assert_int_eq(store_delivery_list(st, &f, &v, &n), CORE_OK);
	ck_assert_uint_ge(n, before);
	for (i = 0; i + before < n; i++) { /* newest first */
		json_t *b = json_loads(v[i]->body, 0, NULL);

		ck_assert_ptr_nonnull(b);
		json_array_append(out, json_object_get(b, "event"));
		json_decref(b);
	}
	store_deliveries_free(v, n);
	return out;
}

static size_t deliveries_count(struct store *st)
{
	struct store_delivery_filter f = {.status = -1, .limit = 1000};
	struct store_delivery **v = NULL;
	size_t n = 0;

	ck_assert_int_eq(store_delivery_list(st, &f, &v, &n), CORE_OK);
	store_deliveries_free(v, n);
	return n;
}

/* A gated pass: finished -> done (run verdict, not machine); failed_resumable -> back to
 * eligible[0] under watchdog with one attempt counted and a backoff; at max_attempts -> the
 * failed column with gave_up {attempts_exhausted} (DESIGN §17; it replaced the run ceiling). */
START_TEST(reaper_pass_files_reparks_and_caps)
{
	struct store *st = open_fresh();
	struct server_reaper *r;
	struct server_reaper_stats s;
	struct core_token t;
	struct core_card *c = NULL;
	json_t *evs, *e;
	struct core_event *ev;
	size_t before, i, n = 0;
	int64_t seq0;
	int fin_done = 0, moves = 0;

	tnow = CT_T0;
	store_clock_set(st, test_clock, &tnow);
	r = mongo_reaper(st, true, 2);
	create(st, "fin", "in_progress");
	create(st, "res", "in_progress");
	create(st, "cap", "in_progress");
	t = claim(st, "fin", "w1");
	run_create(st, "r-fin", "fin", "w1", "finished");
	set_last_run(st, "fin", t, "r-fin");
	t = claim(st, "res", "w2");
	run_create(st, "r-res", "res", "w2", "failed_resumable");
	set_last_run(st, "res", t, "r-res");
	/* cap's first claim ended with a retry release: one attempt of two already */
	t = claim(st, "cap", "w0");
	ck_assert_int_eq(store_card_release_retry(st, "cap", &t, &bot, &c), CORE_OK);
	ck_assert_int_eq(c->attempts, 1);
	core_card_free(c);
	c = NULL;
	tnow += 2000; /* past its backoff */
	t = claim(st, "cap", "w3");
	run_create(st, "r-cap", "cap", "w3", "failed_resumable");
	set_last_run(st, "cap", t, "r-cap");
	fx_subscribe_all(st);
	before = deliveries_count(st);
	seq0 = ct_last_seq(st);
	tnow += 120000; /* every lease expired */
	ck_assert_int_eq(server_reaper_pass(r, &s), CORE_OK);
	ck_assert_uint_eq(s.transferred, 3);
	/* cap's last attempt files it from where it is, one move as on FS: not into the pool
	 * and out again (in_progress -> ready -> blocked, two events). */
	ev = ct_events(st, seq0, &n);
	for (i = 0; i < n; i++) {
		json_t *pl;

		if (ev[i].type != CORE_EV_CARD_STATE_CHANGED || strcmp(ev[i].card_id, "cap") != 0)
			continue;
		moves++;
		pl = json_loads(ev[i].payload, 0, NULL);
		ck_assert_str_eq(json_string_value(json_object_get(pl, "from")), "in_progress");
		ck_assert_str_eq(json_string_value(json_object_get(pl, "to")), "blocked");
		json_decref(pl);
	}
	ck_assert_int_eq(moves, 1);
	store_events_free(ev, n);
	/* Effects: the repark and the attempts_exhausted filing (watchdog) fire nothing; the run's
	 * own verdict (run_finished) fires as the live owner's would. */
	evs = delivered_events(st, before);
	ck_assert_uint_ge(json_array_size(evs), 1);
	json_array_foreach(evs, i, e) {
		const char *reason = json_string_value(json_object_get(e, "reason"));

		ck_assert_msg(!json_is_true(json_object_get(e, "machine")) &&
				      !core_is_machine_reason(reason),
			      "a machine event was enqueued: %s", reason ? reason : "(none)");
		ck_assert_str_eq(json_string_value(json_object_get(e, "card_id")), "fin");
		fin_done += strcmp(json_string_value(json_object_get(e, "type")),
				   "card_state_changed") == 0 &&
			    reason && strcmp(reason, "run_finished") == 0;
	}
	ck_assert_int_eq(fin_done, 1);
	json_decref(evs);
	assert_card(st, "fin", "done", false);
	assert_card(st, "res", "ready", false);
	assert_card(st, "cap", "blocked", false);
	ck_assert_int_eq(store_card_get(st, "fin", &c), CORE_OK);
	ck_assert_str_eq(c->state_reason, "run_finished");
	core_card_free(c);
	ck_assert_int_eq(store_card_get(st, "res", &c), CORE_OK);
	ck_assert_str_eq(c->state_reason, "watchdog");
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_int_gt(c->not_before, tnow);
	core_card_free(c);
	ck_assert_int_eq(store_card_get(st, "cap", &c), CORE_OK);
	ck_assert(c->gave_up.set);
	ck_assert_str_eq(c->gave_up.reason, CORE_GAVE_UP_ATTEMPTS_EXHAUSTED);
	ck_assert_str_eq(c->gave_up.state, "blocked");
	ck_assert_str_eq(c->gave_up.run_id, "r-cap");
	ck_assert_int_eq(c->attempts, 2);
	core_card_free(c);
	server_reaper_free(r);
	close_db(st);
}
END_TEST

/* The ungated repair sweep releases the un-leased residue whose run the table would file,
 * and conserves the rest (ADR-096 §9). */
START_TEST(reaper_repair_releases_only_settled_residue)
{
	struct store *st = open_fresh();
	struct server_reaper *r;
	size_t repaired = 0;
	struct core_token t;

	tnow = CT_T0;
	store_clock_set(st, test_clock, &tnow);
	r = mongo_reaper(st, false, 20);
	create(st, "done-run", "in_progress");
	create(st, "live-run", "in_progress");
	t = claim(st, "done-run", "w1");
	run_create(st, "r1", "done-run", "w1", "finished");
	set_last_run(st, "done-run", t, "r1");
	t = claim(st, "live-run", "w2");
	run_create(st, "r2", "live-run", "w2", "running");
	set_last_run(st, "live-run", t, "r2");
	raw_update(st, "cards", "done-run", "{\"$unset\": {\"claim_epoch\": 1}}");
	raw_update(st, "cards", "live-run", "{\"$unset\": {\"claim.lease_until\": 1}}");
	ck_assert_int_eq(server_reaper_repair(r, &repaired), CORE_OK);
	ck_assert_uint_eq(repaired, 1);
	assert_card(st, "done-run", "in_progress", false);
	assert_card(st, "live-run", "in_progress", true);
	server_reaper_free(r);
	close_db(st);
}
END_TEST

/* A stripped claim outside the running column waits for the horizon, then the gated pass
 * takes it through the un-leased arm (transfer) and decides: no run recorded -> release. */
START_TEST(reaper_recovers_stripped_claim_past_horizon)
{
	char db[64];
	struct store *st;
	struct server_reaper *r;
	struct server_reaper_stats s;

	db_name_new(db, sizeof(db));
	st = open_db(db, 3600000, NULL);
	tnow = CT_T0;
	store_clock_set(st, test_clock, &tnow);
	r = mongo_reaper(st, true, 20);
	create(st, "c1", "review");
	claim(st, "c1", "w1");
	raw_update(st, "cards", "c1", "{\"$unset\": {\"claim_epoch\": 1}}");
	tnow += 120000;
	ck_assert_int_eq(server_reaper_pass(r, &s), CORE_OK);
	ck_assert_uint_eq(s.listed, 0);
	assert_card(st, "c1", "review", true);
	tnow += 3600000;
	ck_assert_int_eq(server_reaper_pass(r, &s), CORE_OK);
	ck_assert_uint_eq(s.listed, 1);
	ck_assert_uint_eq(s.transferred, 1);
	assert_card(st, "c1", "review", false);
	server_reaper_free(r);
	close_db(st);
}
END_TEST

/* A claim stripped of its epoch is judged by its marker's run on the card: finished files it
 * to done, cancelled and paused keep it (they read as "no run" and were released into the
 * pool, attempts counted, an operator's cancel and a pause overridden). */
START_TEST(reaper_judges_stripped_claim_by_its_run)
{
	static const struct {
		const char *id, *status, *state;
		bool claimed;
	} cases[] = {
		{"s-fin", "finished", "done", false},
		{"s-can", "cancelled", "ready", true},
		{"s-pau", "paused_waiting_human", "ready", true},
	};
	char db[64], run[16];
	struct store *st;
	struct server_reaper *r;
	struct server_reaper_stats s;
	struct core_token t;
	size_t i;

	db_name_new(db, sizeof(db));
	st = open_db(db, 2000, NULL);
	tnow = CT_T0;
	store_clock_set(st, test_clock, &tnow);
	r = mongo_reaper(st, true, 20);
	for (i = 0; i < 3; i++) {
		create(st, cases[i].id, "ready");
		t = claim(st, cases[i].id, "w1");
		snprintf(run, sizeof run, "r-%s", cases[i].id);
		run_create(st, run, cases[i].id, "w1", "running");
		set_last_run(st, cases[i].id, t, run);
		run_set_status(st, run, "w1", cases[i].status);
		raw_update(st, "cards", cases[i].id, "{\"$unset\": {\"claim_epoch\": 1}}");
	}
	tnow += 2200; /* past the un-leased horizon (2 s here) */
	ck_assert_int_eq(server_reaper_pass(r, &s), CORE_OK);
	ck_assert_uint_eq(s.listed, 3);
	for (i = 0; i < 3; i++)
		assert_card(st, cases[i].id, cases[i].state, cases[i].claimed);
	server_reaper_free(r);
	close_db(st);
}
END_TEST

void mongo_add_reaper(TCase *tc)
{
	tcase_add_test(tc, reaper_judges_stripped_claim_by_its_run);
	tcase_add_test(tc, reaper_pass_files_reparks_and_caps);
	tcase_add_test(tc, reaper_repair_releases_only_settled_residue);
	tcase_add_test(tc, reaper_recovers_stripped_claim_past_horizon);
}
