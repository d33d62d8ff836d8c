/* The conditional updates, proven by interleaving: the twin's test hook runs between a
 * write's read and its findAndModify, and makes there the change a concurrent writer would.
 * Each write must then miss cleanly, re-read, and answer what core says of the new state —
 * never overwrite it. Deterministic, so it runs on FerretDB too (no racing threads). */
#include "tests/store/conformance.h"
#include "tests/store/test_store_mongo.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One change to make at the next write: a JSON update of the card (of the document of
 * `coll` the write is about, when set), or "DELETE". */
struct interleave {
	struct store *st;
	const char *change; /* NULL: disarmed */
	const char *coll;   /* NULL: "cards" */
	int fired;
};

static struct interleave il;

static void before_write(void *ctx, const char *card_id)
{
	struct interleave *x = ctx;
	const char *change = x->change;

	if (!change)
		return;
	x->change = NULL; /* once: the retry that follows must see the new state, unhooked */
	x->fired++;
	if (strcmp(change, "DELETE") == 0)
		raw_delete(x->st, "cards", card_id);
	else
		raw_update(x->st, x->coll ? x->coll : "cards", card_id, change);
}

static struct store *open_hooked(void)
{
	struct store_mongo_options o = {.test_before_write = before_write, .test_ctx = &il};
	char db[64];

	db_name_new(db, sizeof(db));
	memset(&il, 0, sizeof(il));
	il.st = open_db_opts(db, &o, NULL);
	tnow = CT_T0;
	store_clock_set(il.st, test_clock, &tnow);
	return il.st;
}

static struct core_card *get(struct store *st, const char *id)
{
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
	return c;
}

START_TEST(claim_taken_between_read_and_write)
{
	struct store *st = open_hooked();
	struct store_claim_result r;
	struct core_card *c;
	char change[256];

	create(st, "c1", "ready");
	snprintf(change, sizeof(change),
		 "{\"$set\": {\"claim\": {\"marker\": \"w2\", \"claimed_at\": {\"$date\": %lld}, "
		 "\"lease_until\": {\"$date\": %lld}, \"lease_ms\": 60000}, \"claim_epoch\": 999}}",
		 (long long)tnow, (long long)tnow + 60000);
	il.change = change;
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 60000, &bot, &r), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(il.fired, 1);
	c = get(st, "c1");
	ck_assert_str_eq(c->claim.marker, "w2");
	ck_assert_int_eq(c->claim_epoch, 999);
	core_card_free(c);
	close_db(st);
}
END_TEST

START_TEST(renew_after_a_transfer_is_refused)
{
	struct store *st = open_hooked();
	struct core_token t;
	struct core_card *c = NULL;
	char change[256];

	create(st, "c1", "in_progress");
	t = claim(st, "c1", "w1");
	snprintf(change, sizeof(change),
		 "{\"$set\": {\"claim.marker\": \"reaper:h\", \"claim_epoch\": %lld}}",
		 (long long)t.epoch + 1);
	il.change = change;
	tnow += 10000;
	ck_assert_int_eq(store_card_renew(st, "c1", &t, 60000, &bot, &c), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_ptr_null(c);
	c = get(st, "c1");
	ck_assert_str_eq(c->claim.marker, "reaper:h");
	ck_assert_int_eq(c->claim.lease_until, CT_T0 + 60000); /* not renewed */
	core_card_free(c);
	close_db(st);
}
END_TEST

/* ADR-096 §6: a dropped epoch never matches the filter, not even the holder's own token. */
START_TEST(epoch_dropped_before_an_owned_write)
{
	struct store *st = open_hooked();
	struct store_owned_write w = {.kind = STORE_OWNED_AWAITING_INPUT, .awaiting_input = true};
	struct core_card *c = NULL;

	create(st, "c1", "in_progress");
	w.token = claim(st, "c1", "w1");
	il.change = "{\"$unset\": {\"claim_epoch\": 1}}";
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &bot, &c), CORE_ERR_CLAIM_CONFLICT);
	c = get(st, "c1");
	ck_assert(!c->awaiting_input);
	ck_assert(!c->has_epoch);
	core_card_free(c);
	close_db(st);
}
END_TEST

/* A write committed, its events still in the card's outbox (its writer not yet at its seqs),
 * when a second write on the card commits: the second must not be logged before the first,
 * or the log contradicts the card's history (tests/history found two moves of one card logged
 * in the opposite order). The first write is played by the hook: its event pushed into the
 * outbox, as its findAndModify would have left it. */
START_TEST(earlier_write_still_in_outbox_is_logged_first)
{
	struct store *st = open_hooked();
	struct core_event *ev = NULL;
	struct core_card *c = NULL;
	int64_t next = 0, real = (int64_t)time(NULL) * 1000, early = -1, late = -1;
	char change[512];
	size_t n = 0, i;

	create(st, "c1", "ready");
	/* The earlier write: a title change, its event pushed into the outbox (it pins nothing
	 * the state move's filter holds, so the move commits after it). */
	snprintf(change, sizeof(change),
		 "{\"$set\": {\"title\": \"t2\"}, \"$push\": {\"outbox\": {\"_id\": "
		 "\"0123456789abcdef01234567\", \"at\": {\"$date\": %lld}, \"q_ts\": "
		 "{\"$date\": %lld}, \"board\": \"default\", \"type\": \"card_updated\", "
		 "\"card_id\": \"c1\", \"actor\": \"early\", \"machine\": false, \"payload\": "
		 "{\"fields\": [\"title\"]}}}}",
		 (long long)tnow, (long long)real);
	il.change = change;
	ck_assert_int_eq(store_card_set_state_from(st, "c1", "ready", "in_progress", NULL, &bot,
						   &c),
			 CORE_OK);
	ck_assert_int_eq(il.fired, 1);
	core_card_free(c);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	for (i = 0; i < n; i++) {
		if (ev[i].type == CORE_EV_CARD_UPDATED && strcmp(ev[i].actor, "early") == 0)
			early = ev[i].seq;
		else if (ev[i].type == CORE_EV_CARD_STATE_CHANGED)
			late = ev[i].seq;
	}
	store_events_free(ev, n);
	/* Both logged at once (the earlier one needs no drain), the earlier one first. */
	ck_assert_int_gt(early, 0);
	ck_assert_int_gt(late, early);
	close_db(st);
}
END_TEST

START_TEST(state_moved_before_set_state_from)
{
	struct store *st = open_hooked();
	struct core_card *c = NULL;

	create(st, "c1", "ready");
	il.change = "{\"$set\": {\"state\": \"review\"}}";
	ck_assert_int_eq(store_card_set_state_from(st, "c1", "ready", "in_progress", NULL, &bot, &c),
			 CORE_ERR_STATE_CONFLICT);
	c = get(st, "c1");
	ck_assert_str_eq(c->state, "review");
	core_card_free(c);
	close_db(st);
}
END_TEST

/* DESIGN §17: a completion resets the attempts. A retry release (the holder's or the
 * reaper's) between the move's read and its write counts an attempt and drops the claim,
 * but leaves the state: the move must not write its stale reset-less copy over it (the
 * attempt would outlive the completion that came after it, tests/history's j). */
START_TEST(retry_release_before_a_completion)
{
	struct store *st = open_hooked();
	struct store_claim_result r;
	struct core_card *c = NULL;
	char change[256];

	create(st, "c1", "ready");
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 60000, &bot, &r), CORE_OK);
	core_card_free(r.card);
	snprintf(change, sizeof(change),
		 "{\"$unset\": {\"claim\": 1}, \"$set\": {\"attempts\": 1, "
		 "\"not_before\": {\"$date\": %lld}}}",
		 (long long)tnow + 1000);
	il.change = change;
	ck_assert_int_eq(store_card_set_state_from(st, "c1", "ready", "done", NULL, &bot, &c),
			 CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(il.fired, 1);
	c = get(st, "c1");
	ck_assert_str_eq(c->state, "done");
	ck_assert_int_eq(c->attempts, 0);
	ck_assert_int_eq(c->not_before, 0);
	core_card_free(c);
	close_db(st);
}
END_TEST

/* ADR-096 §9: a one-shot label consumed between the read and the write stays consumed. */
START_TEST(label_consumed_before_adjust_stays_consumed)
{
	struct store *st = open_hooked();
	const char *set[] = {"a", "once"}, *add[] = {"b"};
	struct core_strv sv = {(char **)set, 2}, av = {(char **)add, 1};
	struct core_card *c = NULL;

	create(st, "c1", "ready");
	ck_assert_int_eq(store_card_labels_set(st, "c1", &sv, &bot, &c), CORE_OK);
	core_card_free(c);
	il.change = "{\"$set\": {\"labels\": [\"a\"]}}";
	ck_assert_int_eq(store_card_labels_adjust(st, "c1", &av, NULL, &bot, &c), CORE_OK);
	ck_assert_int_eq(il.fired, 1);
	ck_assert_uint_eq(c->labels.n, 2);
	ck_assert_str_eq(c->labels.v[0], "a");
	ck_assert_str_eq(c->labels.v[1], "b");
	core_card_free(c);
	close_db(st);
}
END_TEST

START_TEST(lease_renewed_before_transfer)
{
	struct store *st = open_hooked();
	struct core_token t;
	struct core_card *c = NULL;
	char change[128];

	create(st, "c1", "in_progress");
	t = claim(st, "c1", "w1");
	tnow += 120000; /* expired as listed */
	snprintf(change, sizeof(change),
		 "{\"$set\": {\"claim.lease_until\": {\"$date\": %lld}}}", (long long)tnow + 60000);
	il.change = change;
	ck_assert_int_eq(store_reaper_transfer(st, "c1", &t, "reaper:h", 60000, &c),
			 CORE_ERR_CLAIM_CONFLICT);
	c = get(st, "c1");
	ck_assert_str_eq(c->claim.marker, "w1");
	ck_assert_int_eq(c->claim_epoch, t.epoch);
	core_card_free(c);
	close_db(st);
}
END_TEST

START_TEST(card_deleted_before_write_is_not_found)
{
	struct store *st = open_hooked();
	struct store_claim_result r;
	struct core_card *c = NULL;

	create(st, "c1", "ready");
	il.change = "DELETE";
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 60000, &bot, &r), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_card_get(st, "c1", &c), CORE_ERR_NOT_FOUND);
	close_db(st);
}
END_TEST

/* An owned write with release is ONE conditional update: the filing and the release land
 * together (state_changed then card_released, epoch kept), or — when the fence moved in
 * between — neither does. */
START_TEST(owned_write_and_release_are_one_step)
{
	struct store *st = open_hooked();
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = "done",
				      .reason = "run_finished", .release = true};
	struct core_card *c = NULL;
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t next, before;

	create(st, "c1", "in_progress");
	create(st, "c2", "in_progress");
	w.token = claim(st, "c1", "reaper:h");
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	store_events_free(ev, n);
	before = next;
	ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "done");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, w.token.epoch);
	core_card_free(c);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, before, 1000, 0, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(ev[0].type, CORE_EV_CARD_STATE_CHANGED);
	ck_assert_int_eq(ev[1].type, CORE_EV_CARD_RELEASED);
	store_events_free(ev, n);

	w.token = claim(st, "c2", "reaper:h");
	il.change = "{\"$unset\": {\"claim_epoch\": 1}}";
	c = NULL;
	ck_assert_int_eq(store_card_owned_write(st, "c2", &w, &bot, &c), CORE_ERR_CLAIM_CONFLICT);
	c = get(st, "c2");
	ck_assert_str_eq(c->state, "in_progress");
	ck_assert(c->claim.present);
	core_card_free(c);
	close_db(st);
}
END_TEST

/* DESIGN §16: a refusal is decided on the document as it stands when the request is served,
 * never on a card an earlier request read on the same thread (the API reads a card for its
 * scope check, then writes it). Here the earlier read sees the card held by another, the
 * card is freed behind the twin's back a moment later (one round trip, well within the 5 ms
 * the twin once reused such a read for), and the claim that follows must succeed; the same
 * for a holder's release after a read that saw someone else's marker. */
START_TEST(no_refusal_from_an_earlier_read)
{
	struct store *st = open_fresh();
	struct raw_fast *raw = raw_fast_open(st, "cards");
	struct store_claim_result r;
	struct core_card *c = NULL;
	struct core_token t;
	char id[16];
	int round;

	for (round = 0; round < 5; round++) {
		snprintf(id, sizeof(id), "c%d", round);
		create(st, id, "ready");
		/* claim: the earlier read saw it held by w2 */
		raw_update(st, "cards", id,
			   "{\"$set\": {\"claim\": {\"marker\": \"w2\", \"claimed_at\": 1, "
			   "\"lease_until\": 99999999999999, \"lease_ms\": 60000}}}");
		ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
		ck_assert_str_eq(c->claim.marker, "w2");
		core_card_free(c);
		raw_fast_update(raw, id, "{\"$unset\": {\"claim\": \"\"}}");
		ck_assert_int_eq(store_card_claim(st, id, "w1", 60000, &bot, &r), CORE_OK);
		ck_assert(r.fresh);
		t = (struct core_token){"w1", r.token.epoch, NULL};
		core_card_free(r.card);
		/* release: the earlier read saw another marker; the card is the holder's again */
		raw_update(st, "cards", id, "{\"$set\": {\"claim.marker\": \"w3\"}}");
		ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
		ck_assert_str_eq(c->claim.marker, "w3");
		core_card_free(c);
		raw_fast_update(raw, id, "{\"$set\": {\"claim.marker\": \"w1\"}}");
		ck_assert_int_eq(store_card_release(st, id, &t, &bot, &c), CORE_OK);
		ck_assert_ptr_null(c->claim.marker);
		core_card_free(c);
	}
	raw_fast_close(raw);
	close_db(st);
}
END_TEST

/* A run write carries back every field it read: a write that landed between its read and its
 * findAndModify (here the owner's PATCH of continuation and failure_code, moving the run's
 * updated_at as every run write does) must make it read again, not be undone by it. A
 * heartbeat used to write the old fields back: an armed continuation, acknowledged, was
 * lost, and the reaper then decided without it. */
START_TEST(run_written_before_a_heartbeat)
{
	struct store *st = open_hooked();
	struct store_claim_result cr;
	struct store_run_create in = {.id = "r1", .card_id = "c1", .marker = "w1",
				      .status = "running", .lease_ms = 30000};
	struct store_run_update hb = {.marker = "w1"};
	struct core_run *r = NULL;
	char change[256];

	create(st, "c1", "ready");
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 60000, &bot, &cr), CORE_OK);
	core_card_free(cr.card);
	ck_assert_int_eq(store_run_create(st, &in, &bot, &r), CORE_OK);
	snprintf(change, sizeof(change),
		 "{\"$set\": {\"continuation\": \"retry_armed\", \"failure_code\": \"X\", "
		 "\"updated_at\": {\"$date\": %lld}}}",
		 (long long)r->updated_at + 1);
	core_run_free(r);
	r = NULL;
	tnow += 5;
	il.coll = "runs";
	il.change = change;
	ck_assert_int_eq(store_run_update(st, "r1", &hb, &bot, &r), CORE_OK);
	ck_assert_int_eq(il.fired, 1);
	ck_assert_ptr_nonnull(r->continuation);
	ck_assert_str_eq(r->continuation, "retry_armed");
	ck_assert_str_eq(r->failure_code, "X");
	ck_assert_int_eq(r->lock_until, tnow + 30000); /* and the heartbeat landed */
	core_run_free(r);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_str_eq(r->continuation, "retry_armed");
	core_run_free(r);
	close_db(st);
}
END_TEST

void mongo_add_interleave(TCase *tc)
{
	tcase_add_test(tc, no_refusal_from_an_earlier_read);
	tcase_add_test(tc, claim_taken_between_read_and_write);
	tcase_add_test(tc, renew_after_a_transfer_is_refused);
	tcase_add_test(tc, epoch_dropped_before_an_owned_write);
	tcase_add_test(tc, state_moved_before_set_state_from);
	tcase_add_test(tc, earlier_write_still_in_outbox_is_logged_first);
	tcase_add_test(tc, label_consumed_before_adjust_stays_consumed);
	tcase_add_test(tc, lease_renewed_before_transfer);
	tcase_add_test(tc, card_deleted_before_write_is_not_found);
	tcase_add_test(tc, owned_write_and_release_are_one_step);
	tcase_add_test(tc, retry_release_before_a_completion);
	tcase_add_test(tc, run_written_before_a_heartbeat);
}
