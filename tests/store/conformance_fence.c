/* Conformance: the fences of DESIGN §11 (issue 9), on every twin: the claim bound to the
 * actor that took it, runs fenced by the claim they were created under, final run statuses,
 * last-run checked, reopen and revoke releasing, epochs never repeating across delete and
 * re-create, blockers, renew keeping its lease, and the per-card limits. */
#include "tests/store/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct store_actor wk1 = {.name = "wk-one"}, wk2 = {.name = "wk-two"};

/* Claims id for marker as actor a (lease 1 s); returns the epoch. */
static int64_t claim_as(struct store *st, const char *id, const char *marker,
			const struct store_actor *a)
{
	struct store_claim_result r;

	ck_assert_int_eq(store_card_claim(st, id, marker, 1000, a, &r), CORE_OK);
	ck_assert_str_eq(r.card->claim.holder, a->name);
	core_card_free(r.card);
	return r.token.epoch;
}

static struct core_event *last_event(struct store *st, struct core_event **all, size_t *n)
{
	*all = ct_events(st, 0, n);
	ck_assert_uint_gt(*n, 0);
	return &(*all)[*n - 1];
}

START_TEST(claim_bound_to_its_actor)
{
	struct store *st = ct_open();
	struct store_owned_write w = {.kind = STORE_OWNED_AWAITING_INPUT, .awaiting_input = true};
	struct store_claim_result r;
	struct core_token t = {.marker = "w1"};
	struct core_card *c = NULL, *before, *after;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	t.epoch = claim_as(st, "c1", "w1", &wk1);
	w.token = t;
	before = ct_get(st, "c1");
	/* Knowing (marker, epoch) is not enough: another actor is refused everywhere. */
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 5000, &wk2, &c), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk2, &c), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_release(st, "c1", &t, &wk2, &c), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 1000, &wk2, &r), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 5000, NULL, &c), CORE_ERR_CLAIM_CONFLICT);
	after = ct_get(st, "c1");
	ck_assert(core_card_equal(before, after));
	core_card_free(before);
	core_card_free(after);
	/* A worker's comment is an owned write too. */
	w.kind = STORE_OWNED_COMMENT;
	w.comment = "from the holder";
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk2, &c), CORE_ERR_CLAIM_CONFLICT);
	after = ct_get(st, "c1");
	ck_assert_uint_eq(after->n_comments, 0);
	core_card_free(after);
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk1, &c), CORE_OK);
	ck_assert_uint_eq(c->n_comments, 1);
	ck_assert_str_eq(c->comments[0].author, "wk-one");
	ck_assert_str_eq(c->comments[0].body, "from the holder");
	core_card_free(c);
	/* The holder itself goes on. */
	w.kind = STORE_OWNED_AWAITING_INPUT;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk1, &c), CORE_OK);
	ck_assert_str_eq(c->claim.holder, "wk-one");
	core_card_free(c);
	ck_assert_int_eq(store_card_release(st, "c1", &t, &wk1, &c), CORE_OK);
	ck_assert_ptr_null(c->claim.holder);
	core_card_free(c);
	ct_close(st);
}
END_TEST

START_TEST(runs_created_by_the_holder_only)
{
	struct store *st = ct_open();
	struct store_run_create in = {.id = "r1", .card_id = "c1", .marker = "w1",
				      .status = "running", .lease_ms = 30000};
	struct core_run *r = NULL;
	struct core_event *ev, *e;
	size_t n;
	int64_t ep;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	ck_assert_int_eq(store_run_create(st, &in, &wk1, &r), CORE_ERR_CLAIM_CONFLICT);
	ep = claim_as(st, "c1", "w1", &wk1);
	in.marker = "w9";
	ck_assert_int_eq(store_run_create(st, &in, &wk1, &r), CORE_ERR_CLAIM_CONFLICT);
	in.marker = "w1";
	ck_assert_int_eq(store_run_create(st, &in, &wk2, &r), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_ptr_null(r);
	ck_assert_int_eq(store_run_create(st, &in, &wk1, &r), CORE_OK);
	ck_assert_int_eq(r->claim_epoch, ep);
	core_run_free(r);
	/* The run event names the marker (an audit tells the workers apart). */
	e = last_event(st, &ev, &n);
	ck_assert_str_eq(core_event_type_name(e->type), "run_created");
	ct_assert_payload(e, "{\"run_id\":\"r1\",\"status\":\"running\",\"marker\":\"w1\"}");
	store_events_free(ev, n);
	ct_close(st);
}
END_TEST

/* The zombie, at the store: a run write under a superseded claim changes nothing. */
START_TEST(run_fenced_by_its_claim)
{
	struct store *st = ct_open();
	struct store_run_update fin = {.marker = "w1", .status = "finished"};
	struct core_token t1 = {.marker = "w1"}, t2 = {.marker = "w2"};
	struct core_run *r = NULL, *before = NULL;
	struct core_card *c = NULL;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	t1.epoch = claim_as(st, "c1", "w1", &wk1);
	ct_run(st, "r1", "c1", "w1", &wk1);
	/* The claim passes on: w1's lease runs out and the server takes and frees it. */
	ct_now += 5000;
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &t1, "reaper:h", 60000, &c), CORE_OK);
	ck_assert_str_eq(c->claim.holder, "reaper:h"); /* recovery claims are the server's own */
	ck_assert_int_eq(store_reaper_release_exact(st, "c1", c, NULL), CORE_OK);
	core_card_free(c);
	t2.epoch = claim_as(st, "c1", "w2", &wk2);
	ck_assert_int_gt(t2.epoch, t1.epoch);

	ck_assert_int_eq(store_run_get(st, "r1", &before), CORE_OK);
	ck_assert_int_eq(store_run_update(st, "r1", &fin, &wk1, &r), CORE_ERR_CLAIM_CONFLICT);
	fin.status = NULL; /* a heartbeat */
	ck_assert_int_eq(store_run_update(st, "r1", &fin, &wk1, &r), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_str_eq(r->status, "running");
	ck_assert_int_eq(r->updated_at, before->updated_at);
	core_run_free(r);
	core_run_free(before);
	/* Nor can it be recorded on the new claim. */
	{
		struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .token = t2,
					      .run_id = "r1"};

		ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk2, &c),
				 CORE_ERR_TRANSITION_REJECTED);
		ck_assert_ptr_null(c);
	}
	ct_close(st);
}
END_TEST

START_TEST(final_runs_stay_final)
{
	struct store *st = ct_open();
	struct store_run_update u = {.marker = "w1", .status = "finished"};
	struct core_run *r = NULL;
	const char *const finals[] = {"finished", "failed", "cancelled"};
	char id[8];
	size_t i;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	claim_as(st, "c1", "w1", &wk1);
	for (i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "r%zu", i);
		ct_run(st, id, "c1", "w1", &wk1);
		if (i == 2) {
			ck_assert_int_eq(store_run_cancel(st, id, &ct_op, &r), CORE_OK);
		} else {
			u.status = finals[i];
			ck_assert_int_eq(store_run_update(st, id, &u, &wk1, &r), CORE_OK);
		}
		core_run_free(r);
		/* The owner cannot turn it back to running, an operator cannot cancel it. */
		u.status = "running";
		ck_assert_int_eq(store_run_update(st, id, &u, &wk1, &r), CORE_ERR_RUN_FINAL);
		u.status = NULL;
		ck_assert_int_eq(store_run_update(st, id, &u, &wk1, &r), CORE_ERR_RUN_FINAL);
		ck_assert_int_eq(store_run_cancel(st, id, &ct_op, &r), CORE_ERR_RUN_FINAL);
		ck_assert_int_eq(store_run_get(st, id, &r), CORE_OK);
		ck_assert_str_eq(r->status, finals[i]);
		core_run_free(r);
	}
	ct_close(st);
}
END_TEST

START_TEST(last_run_names_a_run_of_this_claim)
{
	struct store *st = ct_open();
	struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .run_id = "made-up"};
	struct core_token t = {.marker = "w1"};
	struct core_card *c = NULL;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	core_card_free(ct_create(st, "c2", "ready", NULL));
	claim_as(st, "c2", "w1", &wk1);
	ct_run(st, "r-other", "c2", "w1", &wk1);
	t.epoch = claim_as(st, "c1", "w1", &wk1);
	w.token = t;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk1, &c),
			 CORE_ERR_TRANSITION_REJECTED);
	w.run_id = "r-other"; /* another card's run */
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk1, &c),
			 CORE_ERR_TRANSITION_REJECTED);
	/* A run of an earlier claim of this card. */
	ct_run(st, "r-old", "c1", "w1", &wk1);
	ck_assert_int_eq(store_card_release(st, "c1", &t, &wk1, &c), CORE_OK);
	core_card_free(c);
	w.token.epoch = claim_as(st, "c1", "w1", &wk1);
	w.run_id = "r-old";
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk1, &c),
			 CORE_ERR_TRANSITION_REJECTED);
	c = ct_get(st, "c1");
	ck_assert_ptr_null(c->last_run_id);
	core_card_free(c);
	ct_run(st, "r-new", "c1", "w1", &wk1);
	w.run_id = "r-new";
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk1, &c), CORE_OK);
	ck_assert_str_eq(c->last_run_id, "r-new");
	core_card_free(c);
	w.run_id = NULL; /* null clears */
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk1, &c), CORE_OK);
	ck_assert_ptr_null(c->last_run_id);
	core_card_free(c);
	ct_close(st);
}
END_TEST

START_TEST(reopen_releases_the_claim)
{
	struct store *st = ct_open();
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = "done"};
	struct core_card *c = NULL;
	struct core_event *ev, *e;
	size_t n;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	w.token = (struct core_token){.marker = "w1", .epoch = claim_as(st, "c1", "w1", &wk1)};
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk1, &c), CORE_OK);
	ck_assert(c->claim.present); /* filed done, still held */
	core_card_free(c);
	ck_assert_int_eq(store_card_reopen(st, "c1", "ready", NULL, &ct_op, &c), CORE_OK);
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, w.token.epoch); /* the epoch stays */
	core_card_free(c);
	e = last_event(st, &ev, &n);
	ck_assert_str_eq(core_event_type_name(e->type), "card_released");
	ck_assert_str_eq(e->reason, "reopen");
	ck_assert_str_eq(e->actor, "alice");
	store_events_free(ev, n);
	/* The worker that filed it can no longer write. */
	w.kind = STORE_OWNED_AWAITING_INPUT;
	w.awaiting_input = true;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &wk1, &c), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_release(st, "c1", &w.token, &wk1, &c), CORE_ERR_CLAIM_CONFLICT);
	ct_close(st);
}
END_TEST

START_TEST(revoke_drops_any_claim)
{
	struct store *st = ct_open();
	struct core_token t = {.marker = "w1"};
	struct core_card *c = NULL;
	struct core_event *ev, *e;
	size_t n;
	int64_t seq;

	core_card_free(ct_create(st, "c1", "in_progress", NULL));
	t.epoch = claim_as(st, "c1", "w1", &wk1);
	ck_assert_int_eq(store_card_revoke(st, "c1", &ct_op, &c), CORE_OK);
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, t.epoch);
	ck_assert_str_eq(c->state, "in_progress");
	core_card_free(c);
	e = last_event(st, &ev, &n);
	ck_assert_str_eq(core_event_type_name(e->type), "card_released");
	ck_assert_str_eq(e->reason, "operator_revoke");
	ck_assert_str_eq(e->actor, "alice");
	ck_assert(!e->machine);
	ct_assert_payload(e, "{\"marker\":\"w1\",\"epoch\":%lld}", (long long)t.epoch);
	store_events_free(ev, n);
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 0, &wk1, &c), CORE_ERR_CLAIM_CONFLICT);
	/* Unclaimed: answered as it stands, nothing written. */
	seq = ct_last_seq(st);
	ck_assert_int_eq(store_card_revoke(st, "c1", &ct_op, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(ct_last_seq(st), seq);
	ck_assert_int_eq(store_card_revoke(st, "nope", &ct_op, &c), CORE_ERR_NOT_FOUND);
	/* The next hold is a new generation. */
	ck_assert_int_gt(claim_as(st, "c1", "w1", &wk1), t.epoch);
	ct_close(st);
}
END_TEST

START_TEST(epoch_never_repeats_across_delete)
{
	struct store *st = ct_open();
	struct core_token old = {.marker = "w1"};
	struct core_card *c;
	int64_t e2;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	old.epoch = claim_as(st, "c1", "w1", &wk1);
	ck_assert_int_eq(store_card_delete(st, "c1", &ct_op), CORE_OK);
	c = ct_create(st, "c1", "ready", NULL);
	core_card_free(c);
	e2 = claim_as(st, "c1", "w1", &wk1);
	ck_assert_int_gt(e2, old.epoch);
	/* The old (marker, epoch) is dead, the holder's own included. */
	ck_assert_int_eq(store_card_renew(st, "c1", &old, 0, &wk1, &c), CORE_ERR_CLAIM_CONFLICT);
	/* Twice over. */
	ck_assert_int_eq(store_card_delete(st, "c1", &ct_op), CORE_OK);
	core_card_free(ct_create(st, "c1", "ready", NULL));
	ck_assert_int_gt(claim_as(st, "c1", "w1", &wk1), e2);
	ct_close(st);
}
END_TEST

START_TEST(blockers_fence_claims_and_deletes)
{
	struct store *st = ct_open();
	const char *const dep[] = {"a", NULL};
	struct store_claim_result r;
	struct core_card *c = NULL;

	core_card_free(ct_create(st, "a", "ready", NULL));
	core_card_free(ct_create(st, "b", "ready", dep));
	ct_assert_state(st, "b", "waiting_deps");
	ck_assert_int_eq(store_card_claim(st, "b", "w1", 1000, &wk1, &r),
			 CORE_ERR_BLOCKERS_PENDING);
	ck_assert_ptr_null(r.card);
	c = ct_get(st, "b");
	ck_assert(!c->claim.present);
	core_card_free(c);
	/* Deleting the blocker would strand b in waiting_deps for ever. */
	ck_assert_int_eq(store_card_delete(st, "a", &ct_op), CORE_ERR_DEPENDENTS_OUTSTANDING);
	core_card_free(ct_get(st, "a"));
	ct_move(st, "a", NULL, "done", NULL, &ct_op);
	ct_assert_state(st, "b", "ready");
	claim_as(st, "b", "w1", &wk1);
	ct_close(st);
}
END_TEST

START_TEST(renew_keeps_its_own_lease)
{
	struct store *st = ct_open();
	struct store_claim_result r;
	struct store_run_update hb = {.marker = "w1"};
	struct core_token t = {.marker = "w1"};
	struct core_card *c = NULL;
	struct core_run *run = NULL;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 5000, &wk1, &r), CORE_OK);
	t.epoch = r.token.epoch;
	core_card_free(r.card);
	ct_now += 1000;
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 0, &wk1, &c), CORE_OK);
	ck_assert_int_eq(c->claim.lease_ms, 5000);
	ck_assert_int_eq(c->claim.lease_until, ct_now + 5000);
	core_card_free(c);
	/* A run heartbeat likewise keeps the run's own lease. */
	ct_run(st, "r1", "c1", "w1", &wk1);
	ct_now += 1000;
	ck_assert_int_eq(store_run_update(st, "r1", &hb, &wk1, &run), CORE_OK);
	ck_assert_int_eq(run->lease_ms, 30000);
	ck_assert_int_eq(run->lock_until, ct_now + 30000);
	core_run_free(run);
	ct_close(st);
}
END_TEST

START_TEST(card_limits)
{
	struct store *st = ct_open();
	struct store_card_patch p = {0};
	struct core_card *c = NULL;
	char *big;
	int i;

	store_limits_set(st, 3);
	core_card_free(ct_create(st, "c1", "ready", NULL));
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(store_card_comment_add(st, "c1", "note", &ct_bot, &c), CORE_OK);
		core_card_free(c);
	}
	ck_assert_int_eq(store_card_comment_add(st, "c1", "one too many", &ct_bot, &c),
			 CORE_ERR_PAYLOAD_TOO_LARGE);
	ck_assert_ptr_null(c);
	c = ct_get(st, "c1");
	ck_assert_uint_eq(c->n_comments, 3);
	core_card_free(c);
	/* A card larger than 1 MiB stored is refused, whatever grew it. */
	big = malloc(CORE_CARD_BYTES_MAX + 2);
	memset(big, 'x', CORE_CARD_BYTES_MAX + 1);
	big[CORE_CARD_BYTES_MAX + 1] = '\0';
	p.body = big;
	ck_assert_int_eq(store_card_patch(st, "c1", &p, &ct_bot, &c), CORE_ERR_PAYLOAD_TOO_LARGE);
	big[CORE_CARD_BYTES_MAX / 2] = '\0';
	ck_assert_int_eq(store_card_patch(st, "c1", &p, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	p.body = NULL;
	p.title = big; /* half in the body, half in the title: over */
	big[CORE_CARD_BYTES_MAX / 2] = 'x';
	big[CORE_CARD_BYTES_MAX / 2 + 16] = '\0';
	ck_assert_int_eq(store_card_patch(st, "c1", &p, &ct_bot, &c), CORE_ERR_PAYLOAD_TOO_LARGE);
	free(big);
	ct_close(st);
}
END_TEST

void conformance_add_fence(Suite *s)
{
	TCase *tc = tcase_create("fence");

	tcase_add_test(tc, claim_bound_to_its_actor);
	tcase_add_test(tc, runs_created_by_the_holder_only);
	tcase_add_test(tc, run_fenced_by_its_claim);
	tcase_add_test(tc, final_runs_stay_final);
	tcase_add_test(tc, last_run_names_a_run_of_this_claim);
	tcase_add_test(tc, reopen_releases_the_claim);
	tcase_add_test(tc, revoke_drops_any_claim);
	tcase_add_test(tc, epoch_never_repeats_across_delete);
	tcase_add_test(tc, blockers_fence_claims_and_deletes);
	tcase_add_test(tc, renew_keeps_its_own_lease);
	tcase_add_test(tc, card_limits);
	suite_add_tcase(s, tc);
}
