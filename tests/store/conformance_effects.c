/* Conformance: effects (DESIGN §14, ADR-096) — subscriptions, the outbox written in the
 * event's own atomic step, the one-shot labels, machine events that fire nothing, and the
 * delivery lease with its fenced outcome. */
#include "tests/store/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct store_sub *ct_sub_put(struct store *st, const char *name, const char *const *types,
				    const char *const *to_states, const char *const *all_labels,
				    const char *const *consume)
{
	struct core_strv t = ct_strv(types), s = ct_strv(to_states), l = ct_strv(all_labels),
			 c = ct_strv(consume);
	struct store_sub in = {.board = "default", .name = (char *)name,
			       .url = "http://127.0.0.1:9/hook", .enabled = true};
	struct store_sub *out = NULL;
	bool created = false;
	size_t i;

	in.on.dim[CORE_SUB_TYPES] = t;
	in.on.dim[CORE_SUB_TO_STATES] = s;
	in.on.dim[CORE_SUB_ALL_LABELS] = l;
	in.consume = c;
	ck_assert_int_eq(store_sub_put(st, &in, NULL, &created, &out), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_sub_put(st, &in, "whsec_c2VjcmV0", &created, &out), CORE_OK);
	ck_assert(created);
	ck_assert_str_eq(out->secret, "whsec_c2VjcmV0");
	for (i = 0; i < c.n; i++)
		ck_assert_str_eq(out->consume.v[i], c.v[i]);
	free(t.v);
	free(s.v);
	free(l.v);
	free(c.v);
	return out;
}

/* The deliveries of the board, newest first (status -1: any). */
static struct store_delivery **dlvs(struct store *st, int status, size_t *n)
{
	struct store_delivery_filter f = {.board = "default", .status = status, .limit = 1000};
	struct store_delivery **v = NULL;

	ck_assert_int_eq(store_delivery_list(st, &f, &v, n), CORE_OK);
	return v;
}

static size_t dlv_count(struct store *st)
{
	size_t n = 0;
	struct store_delivery **v = dlvs(st, -1, &n);

	store_deliveries_free(v, n);
	return n;
}

START_TEST(subscription_crud)
{
	struct store *st = ct_open();
	const char *const types[] = {"card_state_changed", NULL};
	struct store_sub *s = ct_sub_put(st, "hook", types, NULL, NULL, NULL), *g = NULL, **v;
	struct store_sub in = {.board = "default", .name = "hook", .url = "http://x/y",
			       .enabled = false};
	struct store_sub bad = {.board = "nope", .name = "x", .url = "http://x/y"};
	bool created = true;
	size_t n;

	store_sub_free(s);
	/* Re-put without a secret keeps the stored one; it is not a creation. */
	ct_now += 10;
	ck_assert_int_eq(store_sub_put(st, &in, "whsec_b3RoZXI=", &created, &s), CORE_OK);
	ck_assert(!created);
	ck_assert_str_eq(s->secret, "whsec_c2VjcmV0");
	ck_assert(!s->enabled);
	ck_assert_int_eq(s->created_at, CT_T0);
	ck_assert_int_eq(s->updated_at, CT_T0 + 10);
	store_sub_free(s);
	ck_assert_int_eq(store_sub_get(st, "default", "hook", &g), CORE_OK);
	ck_assert_str_eq(g->url, "http://x/y");
	ck_assert_uint_eq(g->on.dim[CORE_SUB_TYPES].n, 0);
	store_sub_free(g);
	ck_assert_int_eq(store_sub_put(st, &bad, "whsec_eA==", &created, &s), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_sub_list(st, "default", &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 1);
	store_subs_free(v, n);
	ck_assert_int_eq(store_sub_delete(st, "default", "hook"), CORE_OK);
	ck_assert_int_eq(store_sub_delete(st, "default", "hook"), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_sub_get(st, "default", "hook", &g), CORE_ERR_NOT_FOUND);
	ct_close(st);
}
END_TEST

START_TEST(match_enqueues_and_consumes_in_one_step)
{
	struct store *st = ct_open();
	const char *const to_done[] = {"done", NULL}, *const deploy[] = {"deploy", NULL};
	const char *const labels[] = {"deploy", "x", NULL};
	struct store_delivery **v;
	struct core_event *ev;
	struct core_card *c;
	json_t *body;
	size_t n, i, consumed = 0;
	int64_t before;

	store_sub_free(ct_sub_put(st, "deployer", NULL, to_done, deploy, deploy));
	core_card_free(ct_create(st, "c1", "ready", NULL));
	ct_set_labels(st, "c1", labels);
	ck_assert_uint_eq(dlv_count(st), 0); /* created in ready, labels are not a default type */
	before = ct_last_seq(st);
	/* The write's own answer is the card as the step left it: the one-shot gone. */
	ck_assert_int_eq(store_card_set_state_from(st, "c1", NULL, "done", NULL, &ct_op, &c),
			 CORE_OK);
	ck_assert_uint_eq(c->labels.n, 1);
	ck_assert_str_eq(c->labels.v[0], "x");
	core_card_free(c);
	v = dlvs(st, STORE_DELIVERY_PENDING, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0]->sub, "deployer");
	ck_assert_str_eq(v[0]->event_type, "card_state_changed");
	ck_assert_str_eq(v[0]->card_id, "c1");
	ck_assert_int_eq(v[0]->attempts, 0);
	ck_assert_int_eq(v[0]->next_at, CT_T0);
	body = json_loads(v[0]->body, 0, NULL);
	ck_assert_ptr_nonnull(body);
	ck_assert_str_eq(json_string_value(json_object_get(body, "type")), "board.event");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(body, "event"), "type")),
			 "card_state_changed");
	ck_assert_int_eq(v[0]->event_seq,
			 json_integer_value(json_object_get(json_object_get(body, "event"), "seq")));
	ck_assert_int_gt(v[0]->event_seq, before);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(body, "card"), "id")),
			 "c1");
	json_decref(body);
	store_deliveries_free(v, n);
	/* The one-shot went in that step, recorded as its own event. */
	ct_assert_labels(st, "c1", (const char *const[]){"x", NULL});
	ev = ct_events(st, before, &n);
	for (i = 0; i < n; i++)
		if (ev[i].type == CORE_EV_CARD_LABELS_CHANGED) {
			consumed++;
			ck_assert_str_eq(ev[i].reason, "consume_labels");
			ct_assert_payload(&ev[i], "{\"removed\":[\"deploy\"],\"subscriptions\":"
						  "[\"deployer\"]}");
		}
	ck_assert_uint_eq(consumed, 1);
	store_events_free(ev, n);
	/* Consumed: back to done again does not fire. Adding the label re-arms it. */
	ct_move(st, "c1", NULL, "blocked", NULL, &ct_op);
	ct_move(st, "c1", NULL, "done", NULL, &ct_op);
	ck_assert_uint_eq(dlv_count(st), 1);
	ct_set_labels(st, "c1", labels);
	ct_move(st, "c1", NULL, "blocked", NULL, &ct_op);
	ct_move(st, "c1", NULL, "done", NULL, &ct_op);
	ck_assert_uint_eq(dlv_count(st), 2);
	ct_close(st);
}
END_TEST

START_TEST(defaults_and_unblocked_fire)
{
	struct store *st = ct_open();
	const char *const blockers[] = {"b1", NULL};
	struct store_delivery **v;
	size_t n, i, created = 0, unblocked = 0, changed = 0;

	store_sub_free(ct_sub_put(st, "all", NULL, NULL, NULL, NULL));
	core_card_free(ct_create(st, "b1", "ready", NULL));
	core_card_free(ct_create(st, "d1", NULL, blockers)); /* waiting_deps */
	ct_assert_state(st, "d1", "waiting_deps");
	ct_move(st, "b1", NULL, "done", "finished", &ct_op);
	ct_assert_state(st, "d1", "ready");
	v = dlvs(st, -1, &n);
	for (i = 0; i < n; i++) {
		created += strcmp(v[i]->event_type, "card_created") == 0;
		changed += strcmp(v[i]->event_type, "card_state_changed") == 0;
		unblocked += strcmp(v[i]->event_type, "card_unblocked") == 0;
		ck_assert_str_ne(v[i]->event_type, "card_labels_changed");
	}
	ck_assert_uint_eq(created, 2);
	ck_assert_uint_eq(changed, 1);
	ck_assert_uint_eq(unblocked, 1);
	store_deliveries_free(v, n);
	ct_close(st);
}
END_TEST

/* on.to_states names columns of the board: an unknown one is refused (nothing stored), and
 * a column rename carries every subscription naming it along, so none is left dead. */
START_TEST(subscription_columns_follow_the_board)
{
	struct store *st = ct_open();
	const char *const review[] = {"review", "done", NULL}, *const ready[] = {"ready", NULL};
	const char *const nowhere[] = {"ready", "nowhere", NULL};
	struct core_strv bad = ct_strv(nowhere);
	struct store_sub in = {.board = "default", .name = "ghost", .url = "http://x/y"}, *g = NULL;
	bool created = false;
	size_t touched;

	in.on.dim[CORE_SUB_TO_STATES] = bad;
	ck_assert_int_eq(store_sub_put(st, &in, "whsec_c2VjcmV0", &created, &g),
			 CORE_ERR_TRANSITION_REJECTED);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(store_sub_get(st, "default", "ghost", &g), CORE_ERR_NOT_FOUND);
	free(bad.v);
	store_sub_free(ct_sub_put(st, "r", NULL, review, NULL, NULL));
	store_sub_free(ct_sub_put(st, "other", NULL, ready, NULL, NULL));
	ct_now += 10;
	ck_assert_int_eq(store_board_column_rename(st, "default", "review", "qa", &ct_op, &touched),
			 CORE_OK);
	ck_assert_int_eq(store_sub_get(st, "default", "r", &g), CORE_OK);
	ck_assert_uint_eq(g->on.dim[CORE_SUB_TO_STATES].n, 2);
	ck_assert_str_eq(g->on.dim[CORE_SUB_TO_STATES].v[0], "qa");
	ck_assert_str_eq(g->on.dim[CORE_SUB_TO_STATES].v[1], "done");
	ck_assert_int_eq(g->updated_at, CT_T0 + 10);
	ck_assert_str_eq(g->secret, "whsec_c2VjcmV0"); /* the rest as it was */
	store_sub_free(g);
	ck_assert_int_eq(store_sub_get(st, "default", "other", &g), CORE_OK);
	ck_assert_str_eq(g->on.dim[CORE_SUB_TO_STATES].v[0], "ready");
	ck_assert_int_eq(g->updated_at, CT_T0); /* untouched */
	store_sub_free(g);
	ct_close(st);
}
END_TEST

/* ADR-096: the watchdog's own decisions and a column rename fire nothing, its run_finished
 * filing fires exactly as the live owner's would, with the dependents promoted. */
START_TEST(machine_events_never_match)
{
	struct store *st = ct_open();
	const char *const label[] = {"go", NULL}, *const blockers[] = {"w3", NULL};
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .release = true};
	const struct store_actor reaper = {.name = "reaper:h"}; /* the reaper acts as its marker */
	struct core_card *c = NULL;
	struct store_delivery **v;
	size_t touched, n, i, unblocked = 0;
	const char *ids[] = {"w1", "w2", "w3", "w4"};
	const char *reasons[] = {"watchdog", "watchdog", "run_finished", "watchdog"};
	const char *targets[] = {"ready", "blocked", "done", "blocked"};

	for (i = 0; i < 4; i++) {
		core_card_free(ct_create(st, ids[i], "in_progress", NULL));
		ct_set_labels(st, ids[i], label);
	}
	core_card_free(ct_create(st, "dep", NULL, blockers));
	core_card_free(ct_create(st, "r1", "review", NULL));
	ct_set_labels(st, "r1", label);
	store_sub_free(ct_sub_put(st, "s", NULL, NULL, label, label));
	/* Column rename: machine reason state_rename. */
	ck_assert_int_eq(store_board_column_rename(st, "default", "review", "qa", &ct_op, &touched),
			 CORE_OK);
	ck_assert_uint_eq(dlv_count(st), 0);
	/* The watchdog's path: transfer an expired claim, act under the recovery token. */
	for (i = 0; i < 4; i++)
		ct_claim(st, ids[i], "worker");
	ct_now += 61000;
	for (i = 0; i < 4; i++) {
		struct core_card *cur = ct_get(st, ids[i]);
		struct core_token prev = {.marker = "worker", .epoch = cur->claim_epoch};

		ck_assert_int_eq(store_reaper_transfer(st, ids[i], &prev, "reaper:h", 60000, &c),
				 CORE_OK);
		w.token = (struct core_token){.marker = "reaper:h", .epoch = c->claim_epoch};
		w.state = targets[i];
		w.reason = reasons[i];
		core_card_free(c);
		ck_assert_int_eq(store_card_owned_write(st, ids[i], &w, &reaper, &c), CORE_OK);
		core_card_free(c);
		core_card_free(cur);
		ct_assert_state(st, ids[i], targets[i]);
	}
	v = dlvs(st, -1, &n);
	/* Only w3's run_finished filing fired (its label consumed once), plus nothing for dep:
	 * its unblocked event matches the label dimension only if it carries the label. */
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0]->card_id, "w3");
	ck_assert_str_eq(v[0]->event_type, "card_state_changed");
	store_deliveries_free(v, n);
	ct_assert_state(st, "dep", "ready");
	for (i = 0; i < 4; i++) {
		c = ct_get(st, ids[i]);
		ck_assert_uint_eq(c->labels.n, i == 2 ? 0 : 1); /* consumed only by a match */
		core_card_free(c);
	}
	/* A subscription without the label dimension sees dep's promotion. */
	store_sub_free(ct_sub_put(st, "u", NULL, NULL, NULL, NULL));
	core_card_free(ct_create(st, "w5", "in_progress", NULL));
	core_card_free(ct_create(st, "dep2", "waiting_deps", NULL));
	{
		struct core_strv bl = ct_strv((const char *const[]){"w5", NULL});
		struct store_card_patch p = {.blockers = &bl};

		ck_assert_int_eq(store_card_patch(st, "dep2", &p, &ct_bot, &c), CORE_OK);
		core_card_free(c);
		free(bl.v);
	}
	ct_move(st, "w5", NULL, "done", "run_finished", &ct_op);
	v = dlvs(st, -1, &n);
	for (i = 0; i < n; i++)
		unblocked += strcmp(v[i]->event_type, "card_unblocked") == 0 &&
			     strcmp(v[i]->card_id, "dep2") == 0;
	ck_assert_uint_eq(unblocked, 1);
	store_deliveries_free(v, n);
	ct_close(st);
}
END_TEST

START_TEST(lease_and_fenced_outcome)
{
	struct store *st = ct_open();
	struct store_delivery *d = NULL, *e = NULL, *f = NULL;
	struct store_sub *s = NULL;
	struct store_delivery_outcome o = {.owner = "r1", .status = 500};
	int64_t epoch;

	store_sub_free(ct_sub_put(st, "s", NULL, NULL, NULL, NULL));
	core_card_free(ct_create(st, "c1", "ready", NULL));
	ck_assert_int_eq(store_delivery_lease(st, "r1", 30000, &d), CORE_OK);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d->lease_owner, "r1");
	ck_assert_int_eq(d->lease_until, CT_T0 + 30000);
	/* Leased: nobody else gets it. */
	ck_assert_int_eq(store_delivery_lease(st, "r2", 30000, &e), CORE_OK);
	ck_assert_ptr_null(e);
	/* A wrong fence is refused and changes nothing. */
	o.epoch = d->lease_epoch + 1;
	o.verdict = CORE_DELIVERY_RETRY;
	o.next_at = CT_T0 + 5000;
	ck_assert_int_eq(store_delivery_finish(st, d->id, &o, NULL), CORE_ERR_CLAIM_CONFLICT);
	o.epoch = d->lease_epoch;
	ck_assert_int_eq(store_delivery_finish(st, d->id, &o, &e), CORE_OK);
	ck_assert_int_eq(e->attempts, 1);
	ck_assert_int_eq(e->status, STORE_DELIVERY_PENDING);
	ck_assert_int_eq(e->last_status, 500);
	ck_assert_ptr_null(e->lease_owner);
	store_delivery_free(e);
	/* Not due yet. */
	ck_assert_int_eq(store_delivery_lease(st, "r2", 30000, &e), CORE_OK);
	ck_assert_ptr_null(e);
	/* Due: r2 takes it; r2 then dies; after its lease r3 takes it, and r2's late outcome
	 * is refused. */
	ct_now += 5000;
	ck_assert_int_eq(store_delivery_lease(st, "r2", 30000, &e), CORE_OK);
	ck_assert_ptr_nonnull(e);
	ck_assert_int_gt(e->lease_epoch, d->lease_epoch);
	ct_now += 30001;
	ck_assert_int_eq(store_delivery_lease(st, "r3", 30000, &f), CORE_OK);
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq(f->id, e->id);
	ck_assert_int_gt(f->lease_epoch, e->lease_epoch);
	o.owner = "r2";
	o.epoch = e->lease_epoch;
	o.verdict = CORE_DELIVERY_DONE;
	ck_assert_int_eq(store_delivery_finish(st, e->id, &o, NULL), CORE_ERR_CLAIM_CONFLICT);
	/* 410: dead, and the subscription (as the attempt read it) disabled in that step. */
	o.owner = "r3";
	o.epoch = f->lease_epoch;
	o.verdict = CORE_DELIVERY_DISABLE;
	o.status = 410;
	ck_assert_int_eq(store_sub_get(st, "default", "s", &s), CORE_OK);
	o.sub = s;
	store_delivery_free(e);
	ck_assert_int_eq(store_delivery_finish(st, f->id, &o, &e), CORE_OK);
	o.sub = NULL;
	store_sub_free(s);
	ck_assert_int_eq(e->status, STORE_DELIVERY_DEAD);
	ck_assert_int_eq(e->attempts, 2);
	ck_assert_int_eq(store_sub_get(st, "default", "s", &s), CORE_OK);
	ck_assert(!s->enabled);
	ck_assert_str_eq(s->disabled_reason, "gone");
	store_sub_free(s);
	/* Disabled: a new event enqueues nothing. */
	core_card_free(ct_create(st, "c2", "ready", NULL));
	ck_assert_uint_eq(dlv_count(st), 1);
	/* The operator retry: pending again, a fresh schedule; a second retry is a conflict. */
	store_delivery_free(e);
	ck_assert_int_eq(store_delivery_retry(st, f->id, &e), CORE_OK);
	ck_assert_int_eq(e->status, STORE_DELIVERY_PENDING);
	ck_assert_int_eq(e->attempts, 0);
	ck_assert_int_eq(e->next_at, ct_now);
	ck_assert_int_eq(store_delivery_retry(st, f->id, NULL), CORE_ERR_STATE_CONFLICT);
	ck_assert_int_eq(store_delivery_retry(st, "nope.x", NULL), CORE_ERR_NOT_FOUND);
	epoch = e->lease_epoch;
	store_delivery_free(e);
	ck_assert_int_eq(store_delivery_lease(st, "r4", 30000, &e), CORE_OK);
	ck_assert_ptr_nonnull(e);
	ck_assert_int_gt(e->lease_epoch, epoch);
	o.owner = "r4";
	o.epoch = e->lease_epoch;
	o.verdict = CORE_DELIVERY_DEAD;
	o.status = 0;
	o.error = "timeout";
	store_delivery_free(f);
	ck_assert_int_eq(store_delivery_finish(st, e->id, &o, &f), CORE_OK);
	ck_assert_int_eq(f->status, STORE_DELIVERY_DEAD);
	ck_assert_str_eq(f->last_error, "timeout");
	store_delivery_free(f);
	store_delivery_free(e);
	store_delivery_free(d);
	ct_close(st);
}
END_TEST

/* claim-next's card_claimed matches like any other card_claimed (DESIGN §14): on the Mongo
 * twin the card is picked inside the write, and the event went out matching nothing. A
 * one-shot label of a matching subscription is consumed too. */
START_TEST(claim_next_claimed_event_matches)
{
	struct store *st = ct_open();
	const char *const claimed[] = {"card_claimed", NULL}, *const go[] = {"go", NULL};
	struct store_claim_next in = {.board = "default", .marker = "w1", .lease_ms = 60000,
				      .holder = ct_bot.name};
	struct store_claim_result r = {0};
	struct store_delivery **v;
	struct core_card *c;
	size_t n = 0, i, hits = 0;

	store_sub_free(ct_sub_put(st, "claims", claimed, NULL, NULL, NULL));
	store_sub_free(ct_sub_put(st, "once", claimed, NULL, go, go));
	core_card_free(ct_create(st, "c1", "ready", NULL));
	ct_set_labels(st, "c1", go);
	ck_assert_uint_eq(dlv_count(st), 0);
	ck_assert_int_eq(store_card_claim_next(st, &in, &ct_bot, &r), CORE_OK);
	ck_assert_ptr_nonnull(r.card);
	ck_assert_str_eq(r.card->id, "c1");
	core_card_free(r.card);
	v = dlvs(st, -1, &n);
	for (i = 0; i < n; i++)
		hits += strcmp(v[i]->event_type, "card_claimed") == 0 &&
			strcmp(v[i]->card_id, "c1") == 0;
	store_deliveries_free(v, n);
	ck_assert_uint_eq(hits, 2);
	c = ct_get(st, "c1");
	ck_assert_uint_eq(c->labels.n, 0); /* consumed by "once" */
	ck_assert(c->claim.present);
	core_card_free(c);
	ct_close(st);
}
END_TEST

/* The deliverer passes over subscriptions whose queue is full (DESIGN §16): the lease skips
 * their deliveries, however early, and only theirs (a name is scoped by its board). */
START_TEST(lease_passes_over_skipped_subscriptions)
{
	struct store *st = ct_open();
	struct store_delivery *d = NULL;
	const struct store_sub_ref a_here = {"default", "a"}, a_elsewhere = {"other", "a"};

	store_sub_free(ct_sub_put(st, "a", NULL, NULL, NULL, NULL));
	store_sub_free(ct_sub_put(st, "b", NULL, NULL, NULL, NULL));
	core_card_free(ct_create(st, "c1", "ready", NULL));
	ck_assert_uint_eq(dlv_count(st), 2);
	ck_assert_int_eq(store_delivery_lease_except(st, "r1", 30000, &a_here, 1, &d), CORE_OK);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d->sub, "b");
	store_delivery_free(d);
	ck_assert_int_eq(store_delivery_lease_except(st, "r1", 30000, &a_here, 1, &d), CORE_OK);
	ck_assert_ptr_null(d);
	ck_assert_int_eq(store_delivery_lease_except(st, "r1", 30000, &a_elsewhere, 1, &d),
			 CORE_OK);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d->sub, "a");
	store_delivery_free(d);
	ck_assert_int_eq(store_delivery_lease_except(st, "r1", 30000, NULL, 1, &d),
			 CORE_ERR_BAD_REQUEST);
	ct_close(st);
}
END_TEST

START_TEST(one_shots_of_one_step_leave_together)
{
	struct store *st = ct_open();
	const char *const a[] = {"a", NULL}, *const b[] = {"b", NULL};
	const char *const labels[] = {"a", "b", "keep", NULL};
	struct core_event *ev;
	size_t n, i, consumed = 0;
	int64_t before;

	store_sub_free(ct_sub_put(st, "sa", NULL, NULL, a, a));
	store_sub_free(ct_sub_put(st, "sb", NULL, NULL, b, b));
	core_card_free(ct_create(st, "c1", "ready", NULL));
	ct_set_labels(st, "c1", labels);
	before = ct_last_seq(st);
	ct_move(st, "c1", NULL, "review", NULL, &ct_op);
	ck_assert_uint_eq(dlv_count(st), 2);
	ct_assert_labels(st, "c1", (const char *const[]){"keep", NULL});
	ev = ct_events(st, before, &n);
	for (i = 0; i < n; i++)
		if (ev[i].type == CORE_EV_CARD_LABELS_CHANGED) {
			json_t *p = json_loads(ev[i].payload, 0, NULL);

			consumed++;
			ck_assert_uint_eq(json_array_size(json_object_get(p, "removed")), 2);
			ck_assert_uint_eq(json_array_size(json_object_get(p, "subscriptions")), 2);
			json_decref(p);
		}
	ck_assert_uint_eq(consumed, 1);
	store_events_free(ev, n);
	ct_close(st);
}
END_TEST

/* Leases the one due delivery and reads its subscription as an attempt does (*seen). */
static struct store_delivery *attempt_begin(struct store *st, const char *sub,
					    struct store_sub **seen)
{
	struct store_delivery *d = NULL;

	ck_assert_int_eq(store_delivery_lease(st, "r1", 30000, &d), CORE_OK);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d->sub, sub);
	ck_assert_int_eq(store_sub_get(st, "default", sub, seen), CORE_OK);
	return d;
}

/* The attempt's 410 lands: the delivery is dead, whatever becomes of the subscription. */
static void attempt_gone(struct store *st, struct store_delivery *d, struct store_sub *seen)
{
	struct store_delivery_outcome o = {.owner = "r1", .epoch = d->lease_epoch,
					   .verdict = CORE_DELIVERY_DISABLE, .status = 410,
					   .sub = seen};
	struct store_delivery *e = NULL;

	ck_assert_int_eq(store_delivery_finish(st, d->id, &o, &e), CORE_OK);
	ck_assert_int_eq(e->status, STORE_DELIVERY_DEAD);
	ck_assert_int_eq(e->last_status, 410);
	store_delivery_free(e);
	store_delivery_free(d);
	store_sub_free(seen);
}

static void assert_sub_enabled(struct store *st, const char *name, bool enabled)
{
	struct store_sub *s = NULL;

	ck_assert_int_eq(store_sub_get(st, "default", name, &s), CORE_OK);
	ck_assert_msg(s->enabled == enabled, "%s: enabled %d, disabled_reason %s", name,
		      s->enabled, s->disabled_reason ? s->disabled_reason : "(none)");
	if (enabled)
		ck_assert_ptr_null(s->disabled_reason);
	else
		ck_assert_str_eq(s->disabled_reason, "gone");
	store_sub_free(s);
}

/* The operator's PUT of an existing subscription (in), with another secret. */
static void sub_put_again(struct store *st, const struct store_sub *in)
{
	struct store_sub *s = NULL;
	bool created = true;

	ck_assert_int_eq(store_sub_put(st, in, "whsec_b3RoZXI=", &created, &s), CORE_OK);
	ck_assert(!created);
	store_sub_free(s);
}

/* A 410 disables the subscription the attempt was made for, not whatever holds its name when
 * the answer lands: one deleted and created again, pointed at another receiver or re-enabled
 * by the operator meanwhile stays enabled (the delivery still goes dead). */
START_TEST(gone_disables_only_the_version_attempted)
{
	struct store *st = ct_open();
	struct store_sub in = {.board = "default", .name = "g", .url = "http://127.0.0.1:9/new",
			       .enabled = true};
	struct store_sub *seen = NULL;
	struct store_delivery *d;

	/* Deleted and created again, even at the same url: another incarnation. */
	store_sub_free(ct_sub_put(st, "g", NULL, NULL, NULL, NULL));
	core_card_free(ct_create(st, "c1", "ready", NULL));
	d = attempt_begin(st, "g", &seen);
	ct_now += 10;
	ck_assert_int_eq(store_sub_delete(st, "default", "g"), CORE_OK);
	store_sub_free(ct_sub_put(st, "g", NULL, NULL, NULL, NULL));
	attempt_gone(st, d, seen);
	assert_sub_enabled(st, "g", true);
	/* Pointed at another receiver, within the same millisecond even. */
	core_card_free(ct_create(st, "c2", "ready", NULL));
	d = attempt_begin(st, "g", &seen);
	sub_put_again(st, &in);
	attempt_gone(st, d, seen);
	assert_sub_enabled(st, "g", true);
	/* Paused and re-enabled by the operator: the newer decision stands. */
	core_card_free(ct_create(st, "c3", "ready", NULL));
	d = attempt_begin(st, "g", &seen);
	ct_now += 10;
	in.enabled = false;
	sub_put_again(st, &in);
	ct_now += 10;
	in.enabled = true;
	sub_put_again(st, &in);
	attempt_gone(st, d, seen);
	assert_sub_enabled(st, "g", true);
	/* No version to match: left as it is. */
	core_card_free(ct_create(st, "c4", "ready", NULL));
	d = attempt_begin(st, "g", &seen);
	store_sub_free(seen);
	attempt_gone(st, d, NULL);
	assert_sub_enabled(st, "g", true);
	/* Unchanged since the attempt read it: disabled. */
	core_card_free(ct_create(st, "c5", "ready", NULL));
	d = attempt_begin(st, "g", &seen);
	ct_now += 10;
	attempt_gone(st, d, seen);
	assert_sub_enabled(st, "g", false);
	ct_close(st);
}
END_TEST

/* DESIGN §16: one subscription's webhooks leave in seq order. Deliveries of one millisecond
 * tie on next_at and created_at; the event's board_seq breaks the tie, not the id as a
 * string ("default:10.all" sorts before "default:6.all"). The listing, newest first, too. */
START_TEST(lease_follows_board_seq)
{
	struct store *st = ct_open();
	struct store_delivery **v, *d = NULL;
	int64_t last = 0;
	char id[16];
	size_t n, i;

	store_sub_free(ct_sub_put(st, "all", NULL, NULL, NULL, NULL));
	for (i = 0; i < 12; i++) {
		snprintf(id, sizeof id, "c%zu", i);
		core_card_free(ct_create(st, id, "ready", NULL));
	}
	v = dlvs(st, STORE_DELIVERY_PENDING, &n);
	ck_assert_uint_eq(n, 12);
	for (i = 1; i < n; i++)
		ck_assert_msg(v[i]->event_seq < v[i - 1]->event_seq, "listed %s after %s",
			      v[i]->id, v[i - 1]->id);
	store_deliveries_free(v, n);
	for (i = 0; i < 12; i++) {
		ck_assert_int_eq(store_delivery_lease(st, "r1", 30000, &d), CORE_OK);
		ck_assert_ptr_nonnull(d);
		ck_assert_msg(d->event_seq > last, "leased %s after seq %lld", d->id,
			      (long long)last);
		last = d->event_seq;
		store_delivery_free(d);
		d = NULL;
	}
	ct_close(st);
}
END_TEST

void conformance_add_effects(Suite *s)
{
	TCase *tc = tcase_create("effects");

	tcase_add_test(tc, subscription_crud);
	tcase_add_test(tc, subscription_columns_follow_the_board);
	tcase_add_test(tc, match_enqueues_and_consumes_in_one_step);
	tcase_add_test(tc, one_shots_of_one_step_leave_together);
	tcase_add_test(tc, defaults_and_unblocked_fire);
	tcase_add_test(tc, machine_events_never_match);
	tcase_add_test(tc, lease_and_fenced_outcome);
	tcase_add_test(tc, lease_passes_over_skipped_subscriptions);
	tcase_add_test(tc, gone_disables_only_the_version_attempted);
	tcase_add_test(tc, lease_follows_board_seq);
	tcase_add_test(tc, claim_next_claimed_event_matches);
	suite_add_tcase(s, tc);
}
