/* The reaper's batches (store_reaper_transfer_many, store_reaper_act), on every twin: each
 * is exactly the loop of its single operations, in order, whatever a twin commits at once. */
#include "conformance.h"

#include <string.h>

static const struct store_actor ct_reaper = {.name = "reaper:h"};

/* Cards c1..c3 in in_progress, claimed by w1..w3 with leases now expired; their epochs. */
static void three_expired(struct store *st, int64_t *e)
{
	char id[8], marker[8];
	int i;

	for (i = 0; i < 3; i++) {
		snprintf(id, sizeof id, "c%d", i + 1);
		snprintf(marker, sizeof marker, "w%d", i + 1);
		core_card_free(ct_create(st, id, "in_progress", NULL));
		e[i] = ct_claim(st, id, marker);
	}
	ct_now += 61000;
}

START_TEST(transfer_many_is_the_loop)
{
	struct store *st = ct_open();
	struct store_transfer v[5];
	struct core_event *ev;
	struct core_card *c;
	int64_t e[3], seq0;
	size_t n, k, claimed = 0;

	three_expired(st, e);
	ct_now -= 30000;
	core_card_free(ct_create(st, "live", "in_progress", NULL));
	ct_claim(st, "live", "w9"); /* still leased after the clock moves back */
	ct_now += 30000;
	seq0 = ct_last_seq(st);
	v[0] = (struct store_transfer){.id = "c1", .prev = {"w1", e[0], NULL}};
	v[1] = (struct store_transfer){.id = "c2", .prev = {"w2", e[1] + 1, NULL}}; /* stale */
	v[2] = (struct store_transfer){.id = "nope", .prev = {"w1", 1, NULL}};
	v[3] = (struct store_transfer){.id = "c1", .prev = {"w1", e[0], NULL}}; /* again */
	v[4] = (struct store_transfer){.id = "c3", .prev = {"w3", e[2], NULL}};
	ck_assert_int_eq(store_reaper_transfer_many(st, v, 5, "reaper:h", 60000), CORE_OK);
	ck_assert_int_eq(v[0].rc, CORE_OK);
	ck_assert_int_eq(v[1].rc, CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(v[2].rc, CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(v[3].rc, CORE_ERR_CLAIM_CONFLICT); /* it saw the first item's */
	ck_assert_int_eq(v[4].rc, CORE_OK);
	ck_assert_ptr_null(v[1].card);
	ck_assert_ptr_null(v[2].card);
	ck_assert_ptr_null(v[3].card);
	ck_assert_str_eq(v[0].card->claim.marker, "reaper:h");
	ck_assert_int_gt(v[0].card->claim_epoch, e[0]);
	ck_assert_int_eq(v[0].card->claim.lease_until, ct_now + 60000);
	ck_assert_str_eq(v[4].card->claim.marker, "reaper:h");
	/* What the batch answered is what is stored. */
	c = ct_get(st, "c1");
	ck_assert_int_eq(c->claim_epoch, v[0].card->claim_epoch);
	core_card_free(c);
	c = ct_get(st, "c2");
	ck_assert_str_eq(c->claim.marker, "w2");
	ck_assert_int_eq(c->claim_epoch, e[1]);
	core_card_free(c);
	/* One card_claimed per transfer, as the single operation writes it. */
	ev = ct_events(st, seq0, &n);
	for (k = 0; k < n; k++) {
		if (strcmp(core_event_type_name(ev[k].type), "card_claimed") != 0)
			continue;
		claimed++;
		ck_assert_str_eq(ev[k].reason, "watchdog");
		ck_assert(ev[k].machine);
		if (strcmp(ev[k].card_id, "c1") == 0)
			ct_assert_payload(&ev[k],
					  "{\"marker\":\"reaper:h\",\"epoch\":%lld,"
					  "\"reclaimed_from\":{\"marker\":\"w1\",\"epoch\":%lld}}",
					  (long long)v[0].card->claim_epoch, (long long)e[0]);
	}
	ck_assert_uint_eq(claimed, 2);
	store_events_free(ev, n);
	core_card_free(v[0].card);
	core_card_free(v[4].card);
	/* A bad item refuses the whole call before anything is done. */
	v[0] = (struct store_transfer){.id = "c2", .prev = {"w2", e[1], NULL}};
	v[1] = (struct store_transfer){.id = "c3", .prev = {NULL, 1, NULL}};
	ck_assert_int_eq(store_reaper_transfer_many(st, v, 2, "reaper:h", 60000),
			 CORE_ERR_BAD_REQUEST);
	c = ct_get(st, "c2");
	ck_assert_str_eq(c->claim.marker, "w2");
	core_card_free(c);
	ct_close(st);
}
END_TEST

START_TEST(act_is_the_loop)
{
	struct store *st = ct_open();
	struct store_transfer t[3];
	struct store_reaper_act a[5];
	struct core_gave_up g = {.set = true, .reason = "run_pruned", .state = "in_progress"};
	struct core_card expect = {.has_epoch = true}, wrong;
	struct core_token tok[3];
	struct core_event *ev;
	struct core_card *c;
	int64_t e[3], seq0;
	size_t n, k, i;
	const char *types[8];

	three_expired(st, e);
	t[0] = (struct store_transfer){.id = "c1", .prev = {"w1", e[0], NULL}};
	t[1] = (struct store_transfer){.id = "c2", .prev = {"w2", e[1], NULL}};
	t[2] = (struct store_transfer){.id = "c3", .prev = {"w3", e[2], NULL}};
	ck_assert_int_eq(store_reaper_transfer_many(st, t, 3, "reaper:h", 60000), CORE_OK);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(t[i].rc, CORE_OK);
		tok[i] = (struct core_token){"reaper:h", t[i].card->claim_epoch, NULL};
	}
	seq0 = ct_last_seq(st);
	memset(a, 0, sizeof a);
	/* c1: filed done with the run's verdict, the release in the same step. */
	a[0].id = "c1";
	a[0].n_w = 1;
	a[0].w[0] = (struct store_owned_write){.kind = STORE_OWNED_STATE, .token = tok[0],
					       .state = "done", .reason = "run_finished",
					       .release = true, .event_reason = "watchdog"};
	/* c2: the give-up stamp lands, the filing into an unknown column does not (the steps
	 * before a failing one stay done; the claim stays held). */
	a[1].id = "c2";
	a[1].n_w = 2;
	a[1].w[0] = (struct store_owned_write){.kind = STORE_OWNED_GAVE_UP, .token = tok[1],
					       .gave_up = &g, .event_reason = "watchdog"};
	a[1].w[1] = (struct store_owned_write){.kind = STORE_OWNED_STATE, .token = tok[1],
					       .state = "no-such-column", .release = true,
					       .event_reason = "watchdog"};
	/* c3: an exact release of a claim that moved on misses; the next item, exact, lands. */
	expect.id = "c3";
	expect.claim.present = true;
	expect.claim.marker = "reaper:h";
	expect.claim_epoch = tok[2].epoch;
	wrong = expect;
	wrong.claim_epoch++;
	a[2].id = "c3";
	a[2].release_expect = &wrong;
	a[3].id = "c3";
	a[3].release_expect = &expect;
	/* the old owner's token on c1: refused, as any stale owned write */
	a[4].id = "c1";
	a[4].n_w = 1;
	a[4].w[0] = (struct store_owned_write){.kind = STORE_OWNED_STATE,
					       .token = {"w1", e[0], NULL}, .state = "review"};
	ck_assert_int_eq(store_reaper_act(st, a, 5, &ct_reaper), CORE_OK);
	ck_assert_int_eq(a[0].rc, CORE_OK);
	ck_assert_int_eq(a[1].rc, CORE_ERR_TRANSITION_REJECTED);
	ck_assert_int_eq(a[2].rc, CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(a[3].rc, CORE_OK);
	ck_assert_int_eq(a[4].rc, CORE_ERR_CLAIM_CONFLICT);

	c = ct_get(st, "c1");
	ck_assert_str_eq(c->state, "done");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, tok[0].epoch);
	core_card_free(c);
	c = ct_get(st, "c2");
	ck_assert_str_eq(c->state, "in_progress");
	ck_assert(c->gave_up.set);
	ck_assert_str_eq(c->gave_up.reason, "run_pruned");
	ck_assert_str_eq(c->claim.marker, "reaper:h");
	core_card_free(c);
	c = ct_get(st, "c3");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, tok[2].epoch);
	core_card_free(c);

	/* The events the single operations write, card by card in item order. */
	ev = ct_events(st, seq0, &n);
	ck_assert_uint_le(n, 8);
	for (k = 0; k < n; k++)
		types[k] = core_event_type_name(ev[k].type);
	ck_assert_uint_eq(n, 4);
	ck_assert_str_eq(types[0], "card_state_changed");
	ck_assert_str_eq(ev[0].card_id, "c1");
	ck_assert_str_eq(ev[0].reason, "run_finished");
	ck_assert(!ev[0].machine);
	ck_assert_str_eq(types[1], "card_released");
	ck_assert_str_eq(ev[1].card_id, "c1");
	ck_assert_str_eq(ev[1].reason, "watchdog");
	ck_assert_str_eq(types[2], "card_gave_up");
	ck_assert_str_eq(ev[2].card_id, "c2");
	ck_assert(ev[2].machine);
	ck_assert_str_eq(types[3], "card_released");
	ck_assert_str_eq(ev[3].card_id, "c3");
	ck_assert_str_eq(ev[3].reason, "watchdog");
	store_events_free(ev, n);
	ct_close(st);
	for (i = 0; i < 3; i++)
		core_card_free(t[i].card);
}
END_TEST

void conformance_add_reaper_batch(Suite *s)
{
	TCase *tc = tcase_create("reaper_batch");

	tcase_add_test(tc, transfer_many_is_the_loop);
	tcase_add_test(tc, act_is_the_loop);
	suite_add_tcase(s, tc);
}
