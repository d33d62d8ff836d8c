/* Conformance: claims, the fence, owned writes, and the reaper's transfer and repair ops
 * (DESIGN §3, §6; ADR-096 §1-§3, §6). */
#include "tests/store/conformance.h"

#include <stdlib.h>
#include <string.h>

START_TEST(claim_fresh_and_idempotent)
{
	struct store *st = ct_open();
	struct store_claim_result r;
	struct core_event *ev;
	size_t n;
	int64_t seq, ep;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 30000, &ct_bot, &r), CORE_OK);
	ck_assert(r.fresh);
	ck_assert_int_gt(r.token.epoch, 0); /* advanced past "never claimed" */
	ep = r.token.epoch;
	ck_assert_str_eq(r.token.marker, "w1");
	ck_assert_int_eq(r.card->claim.claimed_at, CT_T0);
	ck_assert_int_eq(r.card->claim.lease_until, CT_T0 + 30000);
	ck_assert_int_eq(r.card->claim.lease_ms, 30000);
	ck_assert(r.card->claim.has_lease);
	core_card_free(r.card);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "card_claimed");
	ct_assert_payload(&ev[n - 1], "{\"marker\":\"w1\",\"epoch\":%lld}", (long long)ep);
	seq = ev[n - 1].seq;
	store_events_free(ev, n);

	/* Same marker: lease refreshed, epoch unchanged, no event. */
	ct_now += 10000;
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 30000, &ct_bot, &r), CORE_OK);
	ck_assert(!r.fresh);
	ck_assert_int_eq(r.token.epoch, ep);
	ck_assert_int_eq(r.card->claim.claimed_at, CT_T0);
	ck_assert_int_eq(r.card->claim.lease_until, CT_T0 + 40000);
	core_card_free(r.card);
	ck_assert_int_eq(ct_last_seq(st), seq);

	/* Another marker conflicts, even once the lease has expired: only the reaper may. */
	ck_assert_int_eq(store_card_claim(st, "c1", "w2", 30000, &ct_bot, &r),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_ptr_null(r.card);
	ct_now += 3600000;
	ck_assert_int_eq(store_card_claim(st, "c1", "w2", 30000, &ct_bot, &r),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_claim(st, "nope", "w2", 30000, &ct_bot, &r),
			 CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_card_claim(st, "c1", "bad marker", 30000, &ct_bot, &r),
			 CORE_ERR_BAD_REQUEST);
	ct_close(st);
}
END_TEST

START_TEST(release_keeps_epoch)
{
	struct store *st = ct_open();
	struct core_token t = {.marker = "w1"};
	struct core_card *c = NULL;
	struct core_event *ev;
	size_t n;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	t.epoch = ct_claim(st, "c1", "w1");
	ck_assert_int_eq(store_card_release(st, "c1", &t, &ct_bot, &c), CORE_OK);
	ck_assert(!c->claim.present);
	ck_assert_ptr_null(c->claim.marker);
	ck_assert_int_eq(c->claim_epoch, t.epoch); /* the fence generation survives release */
	core_card_free(c);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "card_released");
	ct_assert_payload(&ev[n - 1], "{\"marker\":\"w1\",\"epoch\":%lld}", (long long)t.epoch);
	store_events_free(ev, n);
	/* Releasing again: nothing to release with that token. */
	ck_assert_int_eq(store_card_release(st, "c1", &t, &ct_bot, &c), CORE_ERR_CLAIM_CONFLICT);
	/* The same marker's next hold is a new generation. */
	ck_assert_int_gt(ct_claim(st, "c1", "w1"), t.epoch);
	ct_close(st);
}
END_TEST

START_TEST(renew_is_fenced)
{
	struct store *st = ct_open();
	struct core_token t = {.marker = "w1"};
	struct core_card *c = NULL;
	int64_t seq;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	t.epoch = ct_claim(st, "c1", "w1");
	seq = ct_last_seq(st);
	ct_now += 20000;
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 45000, &ct_bot, &c), CORE_OK);
	ck_assert_int_eq(c->claim.lease_until, ct_now + 45000);
	ck_assert_int_eq(c->claim.lease_ms, 45000);
	core_card_free(c);
	ck_assert_int_eq(ct_last_seq(st), seq); /* renewal writes no event */
	t.epoch++;
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 45000, &ct_bot, &c), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_ptr_null(c);
	t.epoch--;
	t.marker = "w2";
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 45000, &ct_bot, &c), CORE_ERR_CLAIM_CONFLICT);
	ct_close(st);
}
END_TEST

/* Every owned write with a stale token: refused, and the card byte-identical afterwards. */
START_TEST(stale_token_refused_everywhere)
{
	struct store *st = ct_open();
	struct core_gave_up g = {.set = true, .reason = "run_pruned", .run_id = "r1"};
	struct store_owned_write w[] = {
		{.kind = STORE_OWNED_STATE, .state = "review", .reason = "late"},
		{.kind = STORE_OWNED_LAST_RUN, .run_id = "r-late"},
		{.kind = STORE_OWNED_AWAITING_INPUT, .awaiting_input = true},
		{.kind = STORE_OWNED_GAVE_UP, .gave_up = &g},
	};
	struct core_token stale = {.marker = "w1"}, wrong_marker = {.marker = "w9"};
	struct core_card *before, *after, *c = NULL;
	size_t i;
	int64_t seq;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	stale.epoch = ct_claim(st, "c1", "w1");
	/* The claim is lost: released, then taken by w2 (a new epoch). */
	ck_assert_int_eq(store_card_release(st, "c1", &stale, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	wrong_marker.epoch = ct_claim(st, "c1", "w2");
	ck_assert_int_gt(wrong_marker.epoch, stale.epoch);
	before = ct_get(st, "c1");
	seq = ct_last_seq(st);
	ct_now += 5000;
	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		w[i].token = stale;
		ck_assert_int_eq(store_card_owned_write(st, "c1", &w[i], &ct_bot, &c),
				 CORE_ERR_CLAIM_CONFLICT);
		ck_assert_ptr_null(c);
		w[i].token = wrong_marker;
		ck_assert_int_eq(store_card_owned_write(st, "c1", &w[i], &ct_bot, &c),
				 CORE_ERR_CLAIM_CONFLICT);
	}
	ck_assert_int_eq(store_card_release(st, "c1", &stale, &ct_bot, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_card_renew(st, "c1", &stale, 1000, &ct_bot, &c), CORE_ERR_CLAIM_CONFLICT);
	after = ct_get(st, "c1");
	ck_assert(core_card_equal(before, after));
	ck_assert_int_eq(ct_last_seq(st), seq);
	core_card_free(before);
	core_card_free(after);

	/* An unclaimed card refuses every owned write too. */
	core_card_free(ct_create(st, "c2", "ready", NULL));
	w[0].token = stale;
	ck_assert_int_eq(store_card_owned_write(st, "c2", &w[0], &ct_bot, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	ct_close(st);
}
END_TEST

START_TEST(owned_writes_apply)
{
	struct store *st = ct_open();
	struct core_gave_up g = {.set = true, .reason = "run_pruned", .run_id = "r1", .state = "ready"},
			    bad = {.set = true, .reason = "x", .state = "nowhere"};
	struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .run_id = "r-1"};
	struct core_card *c = NULL;
	struct core_event *ev;
	size_t n;
	int64_t seq;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	w.token = (struct core_token){.marker = "w1", .epoch = ct_claim(st, "c1", "w1")};
	ct_run(st, "r-1", "c1", "w1", &ct_bot);
	seq = ct_last_seq(st);
	ct_now += 100;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c), CORE_OK);
	ck_assert_str_eq(c->last_run_id, "r-1");
	core_card_free(c);
	w.kind = STORE_OWNED_AWAITING_INPUT;
	w.awaiting_input = true;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c), CORE_OK);
	ck_assert(c->awaiting_input);
	core_card_free(c);
	w.kind = STORE_OWNED_GAVE_UP;
	w.gave_up = &g;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c), CORE_OK);
	ck_assert(c->gave_up.set);
	ck_assert_str_eq(c->gave_up.reason, "run_pruned");
	ck_assert_str_eq(c->gave_up.run_id, "r1");
	ck_assert_str_eq(c->gave_up.state, "ready");
	ck_assert_int_eq(c->gave_up.at, ct_now); /* stamped when not given */
	core_card_free(c);
	/* A gave_up naming no column of the card's board is refused, nothing written. */
	w.gave_up = &bad;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c),
			 CORE_ERR_TRANSITION_REJECTED);
	ck_assert_ptr_null(c);
	c = ct_get(st, "c1");
	ck_assert_str_eq(c->gave_up.reason, "run_pruned");
	core_card_free(c);
	w.kind = STORE_OWNED_STATE;
	w.state = "in_progress";
	w.reason = "launch";
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "in_progress");
	ck_assert_str_eq(c->state_reason, "launch");
	ck_assert(c->claim.present); /* an owned state write keeps the claim */
	core_card_free(c);
	w.state = "nowhere";
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c),
			 CORE_ERR_TRANSITION_REJECTED);
	/* from: only while the card is still there; else STATE_CONFLICT, nothing changed (no
	 * event: the count below), the claim kept, and the release with it not done. */
	w.state = "review";
	w.from = "ready";
	w.release = true;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c),
			 CORE_ERR_STATE_CONFLICT);
	ck_assert_ptr_null(c);
	c = ct_get(st, "c1");
	ck_assert_str_eq(c->state, "in_progress");
	ck_assert(c->claim.present);
	core_card_free(c);
	w.from = "in_progress";
	w.release = false;
	w.state = "in_progress"; /* where it is: a match changes nothing, and says so */
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "in_progress");
	core_card_free(c);
	w.from = NULL;
	w.kind = STORE_OWNED_GAVE_UP;
	w.gave_up = NULL;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c), CORE_OK);
	ck_assert(!c->gave_up.set);
	core_card_free(c);

	ev = ct_events(st, seq, &n);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(core_event_type_name(ev[0].type), "card_last_run");
	ct_assert_payload(&ev[0], "{\"run_id\":\"r-1\"}");
	ck_assert_str_eq(core_event_type_name(ev[1].type), "card_updated");
	ct_assert_payload(&ev[1], "{\"fields\":[\"awaiting_input\"]}");
	ck_assert_str_eq(core_event_type_name(ev[2].type), "card_gave_up");
	ck_assert_str_eq(core_event_type_name(ev[3].type), "card_state_changed");
	ct_assert_payload(&ev[3], "{\"from\":\"ready\",\"to\":\"in_progress\"}");
	ck_assert_str_eq(core_event_type_name(ev[4].type), "card_gave_up");
	ct_assert_payload(&ev[4], "{\"gave_up\":null}");
	store_events_free(ev, n);
	ct_close(st);
}
END_TEST

START_TEST(transfer_cas)
{
	struct store *st = ct_open();
	struct core_token prev = {.marker = "w1"}, wrong;
	struct core_card **v = NULL, *c = NULL;
	struct core_event *ev;
	size_t n;
	int64_t ep;

	core_card_free(ct_create(st, "c1", "in_progress", NULL));
	prev.epoch = ct_claim(st, "c1", "w1"); /* lease 60 s */
	/* A live lease is neither listed nor transferable. */
	ck_assert_int_eq(store_reaper_list_expired(st, 100, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 0);
	store_cards_free(v, n);
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &prev, "reaper:h", 60000, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_ptr_null(c);

	ct_now += 61000;
	ck_assert_int_eq(store_reaper_list_expired(st, 100, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0]->id, "c1");
	store_cards_free(v, n);
	/* Wrong previous token: a clean miss. */
	wrong = prev;
	wrong.epoch++;
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &wrong, "reaper:h", 60000, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	wrong = (struct core_token){.marker = "w2", .epoch = prev.epoch};
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &wrong, "reaper:h", 60000, &c),
			 CORE_ERR_CLAIM_CONFLICT);

	/* An operator moves the card between listing and transfer: the transfer returns the
	 * card as it now stands. */
	ct_move(st, "c1", NULL, "review", NULL, &ct_op);
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &prev, "reaper:h", 60000, &c), CORE_OK);
	ck_assert_str_eq(c->claim.marker, "reaper:h");
	ck_assert_int_gt(c->claim_epoch, prev.epoch);
	ep = c->claim_epoch;
	ck_assert_int_eq(c->claim.claimed_at, ct_now);
	ck_assert_int_eq(c->claim.lease_until, ct_now + 60000);
	ck_assert_str_eq(c->state, "review");
	core_card_free(c);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "card_claimed");
	ck_assert_str_eq(ev[n - 1].reason, "watchdog");
	ck_assert(ev[n - 1].machine);
	ck_assert_str_eq(ev[n - 1].actor, "");
	ct_assert_payload(&ev[n - 1],
			  "{\"marker\":\"reaper:h\",\"epoch\":%lld,"
			  "\"reclaimed_from\":{\"marker\":\"w1\",\"epoch\":%lld}}",
			  (long long)ep, (long long)prev.epoch);
	store_events_free(ev, n);
	/* The old holder's token is dead now. */
	{
		struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .token = prev};
		ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c),
				 CORE_ERR_CLAIM_CONFLICT);
	}
	/* A second transfer from the same listing misses. */
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &prev, "reaper:h", 60000, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	ct_close(st);
}
END_TEST

START_TEST(list_expired_order_and_batch)
{
	struct store *st = ct_open();
	struct core_card **v = NULL;
	size_t n;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	core_card_free(ct_create(st, "c2", "ready", NULL));
	core_card_free(ct_create(st, "c3", "ready", NULL));
	ct_now += 1000;
	ct_claim(st, "c2", "w"); /* lease until T0+61000 */
	ct_now += 1000;
	ct_claim(st, "c1", "w"); /* T0+62000 */
	ct_now -= 1500;
	ct_claim(st, "c3", "w"); /* T0+60500 */
	ct_now = CT_T0 + 100000;
	ck_assert_int_eq(store_reaper_list_expired(st, 2, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(v[0]->id, "c3");
	ck_assert_str_eq(v[1]->id, "c2");
	store_cards_free(v, n);
	ck_assert_int_eq(store_reaper_list_expired(st, 0, &v, &n), CORE_ERR_BAD_REQUEST);
	ct_close(st);
}
END_TEST

/* The listing resumes after a cursor (the last candidate a pass saw), in the same order, and
 * a short page is the end: the claims at the head (kept ones stay there, expired) never hide
 * the rest from a reaper that lists a batch per pass. Ties in lease_until go by id. */
START_TEST(list_expired_resumes_after_a_cursor)
{
	struct store *st = ct_open();
	struct store_reaper_cursor cur = {0};
	struct core_card **v = NULL;
	const char *const want[] = {"k0", "k1", "k2", "t1", "t2", "z9"};
	char seen[8][16];
	size_t n, i, k = 0, pages = 0;

	for (i = 0; i < 6; i++)
		core_card_free(ct_create(st, want[i], "ready", NULL));
	ct_now = CT_T0 + 1000;
	ct_claim(st, "k0", "w");
	ct_claim(st, "k1", "w");
	ct_claim(st, "k2", "w");
	ct_now = CT_T0 + 2000;
	ct_claim(st, "t2", "w"); /* one lease_until, two cards: by id */
	ct_claim(st, "t1", "w");
	ct_now = CT_T0 + 3000;
	ct_claim(st, "z9", "w");
	ct_now = CT_T0 + 200000;
	do {
		ck_assert_int_eq(store_reaper_list_expired_after(st, 2, &cur, &v, &n), CORE_OK);
		for (i = 0; i < n && k < 8; i++)
			snprintf(seen[k++], sizeof seen[0], "%s", v[i]->id);
		if (n)
			store_reaper_cursor_past(&cur, v[n - 1]);
		store_cards_free(v, n);
		pages++;
	} while (n == 2 && pages < 10);
	ck_assert_uint_eq(k, 6);
	for (i = 0; i < 6; i++)
		ck_assert_str_eq(seen[i], want[i]);
	ck_assert_uint_eq(pages, 4); /* 2 + 2 + 2, then an empty page: the end */
	/* From an unset cursor: the first page again. */
	cur.set = false;
	ck_assert_int_eq(store_reaper_list_expired_after(st, 2, &cur, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(v[0]->id, "k0");
	store_cards_free(v, n);
	ct_close(st);
}
END_TEST

/* Many matches, leases claimed in a scrambled order: any batch is the earliest leases,
 * oldest first, whatever the order the claims were made in. */
START_TEST(list_expired_many_selects_earliest)
{
	struct store *st = ct_open();
	struct core_card **v = NULL;
	size_t n, i, b;
	const size_t batches[] = {1, 7, 39, 40, 100};
	char id[16];

	for (i = 0; i < 40; i++) {
		snprintf(id, sizeof id, "m%02zu", i);
		core_card_free(ct_create(st, id, "ready", NULL));
	}
	for (i = 0; i < 40; i++) {
		/* card m<i> gets the lease of rank (i * 17) % 40 */
		ct_now = CT_T0 + 1000 + (int64_t)((i * 17) % 40) * 10;
		snprintf(id, sizeof id, "m%02zu", i);
		ct_claim(st, id, "w");
	}
	ct_now = CT_T0 + 200000;
	for (b = 0; b < sizeof batches / sizeof batches[0]; b++) {
		ck_assert_int_eq(store_reaper_list_expired(st, batches[b], &v, &n), CORE_OK);
		ck_assert_uint_eq(n, batches[b] < 40 ? batches[b] : 40);
		for (i = 0; i < n; i++) {
			/* rank r belongs to the card i with (i * 17) % 40 == r: i = r * 33 % 40 */
			snprintf(id, sizeof id, "m%02zu", (i * 33) % 40);
			ck_assert_str_eq(v[i]->id, id);
		}
		store_cards_free(v, n);
	}
	ct_close(st);
}
END_TEST

START_TEST(repair_listing_and_release_exact)
{
	struct store *st = ct_open();
	struct core_token prev = {.marker = "w1"};
	struct core_card **v = NULL, *c = NULL, *seen;
	struct core_event *ev;
	size_t n;

	core_card_free(ct_create(st, "c1", "in_progress", NULL));
	core_card_free(ct_create(st, "c2", "in_progress", NULL));
	prev.epoch = ct_claim(st, "c1", "w1");
	ct_claim(st, "c2", "w2");
	ct_now += 61000;
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &prev, "reaper:h", 10000, &c), CORE_OK);
	core_card_free(c);
	/* A live recovery claim and an expired ordinary claim are not repair candidates. */
	ck_assert_int_eq(store_reaper_list_repair(st, 100, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 0);
	store_cards_free(v, n);
	ct_now += 11000;
	ck_assert_int_eq(store_reaper_list_repair(st, 100, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0]->id, "c1");
	seen = core_card_dup(v[0]);
	store_cards_free(v, n);

	/* Exact release: refused once the claim moved on, done while it is as observed. */
	{
		struct core_card *moved = core_card_dup(seen);
		moved->claim_epoch++;
		ck_assert_int_eq(store_reaper_release_exact(st, "c1", moved, &ct_op),
				 CORE_ERR_CLAIM_CONFLICT);
		core_card_free(moved);
	}
	ck_assert_int_eq(store_reaper_release_exact(st, "c1", seen, &ct_op), CORE_OK);
	c = ct_get(st, "c1");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, seen->claim_epoch);
	core_card_free(c);
	ev = ct_events(st, 0, &n);
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "card_released");
	ck_assert_str_eq(ev[n - 1].reason, "watchdog");
	ck_assert(ev[n - 1].machine);
	store_events_free(ev, n);
	ck_assert_int_eq(store_reaper_release_exact(st, "c1", seen, &ct_op),
			 CORE_ERR_CLAIM_CONFLICT);
	core_card_free(seen);
	ct_close(st);
}
END_TEST

void conformance_add_claims(Suite *s)
{
	TCase *tc = tcase_create("claims");

	tcase_add_test(tc, claim_fresh_and_idempotent);
	tcase_add_test(tc, release_keeps_epoch);
	tcase_add_test(tc, renew_is_fenced);
	tcase_add_test(tc, stale_token_refused_everywhere);
	tcase_add_test(tc, owned_writes_apply);
	tcase_add_test(tc, transfer_cas);
	tcase_add_test(tc, list_expired_order_and_batch);
	tcase_add_test(tc, list_expired_many_selects_earliest);
	tcase_add_test(tc, list_expired_resumes_after_a_cursor);
	tcase_add_test(tc, repair_listing_and_release_exact);
	suite_add_tcase(s, tc);
}
