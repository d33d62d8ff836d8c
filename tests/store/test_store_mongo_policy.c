/* DESIGN §17 on the Mongo twin (store/mongo/mongo_policy.c): the policy fields as stored,
 * NOT_YET and claim-next's wake_at, the capacity slots (column limit, board max_claims,
 * board_claimed), retries with backoff and their filing, the resets, the slot a recovery
 * claim keeps, the repair of a slot leaked by a crash, and the race: threads each with its
 * own store handle (as replicas) claiming from a column with limit 3 never hold more than 3
 * (sampled in the database during the run, and replayed from the events afterwards). */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "tests/store/test_store_mongo.h"
#include "tests/store/conformance.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct store_actor op = {.name = "alice", .operator_role = true};

/* Board `name` (the default columns) with `ready` limited to ready_limit, max_claims and an
 * optional retry policy. */
static void board_with(struct store *st, const char *name, int32_t ready_limit,
		       int32_t max_claims, const struct core_retry *retry)
{
	struct core_board b;
	size_t i;

	ck_assert_int_eq(core_board_init_default(&b, name), CORE_OK);
	for (i = 0; i < b.n_cols; i++)
		if (strcmp(b.cols[i].name, "ready") == 0)
			b.cols[i].limit = ready_limit;
	b.max_claims = max_claims;
	if (retry) {
		b.has_retry = true;
		b.retry = *retry;
	}
	ck_assert_int_eq(store_board_put(st, &b, &op), CORE_OK);
	core_board_release(&b);
}

static void make(struct store *st, const char *board, const char *id, const char *state,
		 int64_t not_before)
{
	struct store_card_create in = {.id = id, .board = board, .title = id, .state = state,
				       .not_before = not_before};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
}

static struct store *open_clocked(void)
{
	struct store *st = open_fresh();

	tnow = CT_T0;
	store_clock_set(st, test_clock, &tnow);
	return st;
}

static size_t col_index(const struct core_board *b, const char *col)
{
	size_t i;

	for (i = 0; i < b->n_cols; i++)
		if (strcmp(b->cols[i].name, col) == 0)
			return i;
	ck_abort_msg("no column %s", col);
	return 0;
}

START_TEST(policy_fields_are_stored)
{
	struct store *st = open_clocked();
	struct core_retry r = {3, 500, 4000};
	struct core_board b = {0};
	struct store_card_patch p = {.has_not_before = true};
	struct core_card *c = NULL;
	struct core_token t;

	board_with(st, "pol", 2, 5, &r);
	ck_assert_int_eq(store_board_get(st, "pol", &b), CORE_OK);
	ck_assert_int_eq(b.cols[col_index(&b, "ready")].limit, 2);
	ck_assert_int_eq(b.cols[col_index(&b, "backlog")].limit, 0);
	ck_assert_int_eq(b.max_claims, 5);
	ck_assert(b.has_retry);
	ck_assert_int_eq(b.retry.max_attempts, 3);
	ck_assert_int_eq(b.retry.backoff_ms, 500);
	ck_assert_int_eq(b.retry.max_backoff_ms, 4000);
	core_board_release(&b);
	make(st, "pol", "n1", "ready", CT_T0 + 60000);
	ck_assert_int_eq(store_card_get(st, "n1", &c), CORE_OK);
	ck_assert_int_eq(c->not_before, CT_T0 + 60000);
	ck_assert_int_eq(c->attempts, 0);
	core_card_free(c);
	p.not_before = 0; /* clears */
	ck_assert_int_eq(store_card_patch(st, "n1", &p, &op, &c), CORE_OK);
	ck_assert_int_eq(c->not_before, 0);
	core_card_free(c);
	/* a claim records the column it was taken from */
	t = claim(st, "n1", "m1");
	ck_assert_int_eq(store_card_get(st, "n1", &c), CORE_OK);
	ck_assert_str_eq(c->claim.from, "ready");
	ck_assert_int_eq(c->claim_epoch, t.epoch);
	core_card_free(c);
	/* a document of an earlier version: no schedule, no attempts, a claim from nowhere */
	raw_update(st, "cards", "n1", "{\"$unset\": {\"claim.from\": 1, \"attempts\": 1}}");
	ck_assert_int_eq(store_card_get(st, "n1", &c), CORE_OK);
	ck_assert_ptr_null(c->claim.from);
	ck_assert_int_eq(c->attempts, 0);
	core_card_free(c);
	close_db(st);
}
END_TEST

START_TEST(not_yet_and_wake_at)
{
	struct store *st = open_clocked();
	struct store_claim_result r = {0};
	struct store_claim_next in = {.board = "default", .marker = "w1", .lease_ms = 60000};

	make(st, NULL, "s1", "ready", CT_T0 + 30000);
	make(st, NULL, "s2", "in_progress", CT_T0 + 20000);
	ck_assert_int_eq(store_card_claim(st, "s1", "m1", 60000, &bot, &r), CORE_ERR_NOT_YET);
	ck_assert_msg(strstr(r.detail, "not before") != NULL, "detail: %s", r.detail);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(store_card_claim_next(st, &in, &bot, &r), CORE_OK);
	ck_assert_ptr_null(r.card);
	ck_assert_int_eq(r.wake_at, CT_T0 + 20000); /* the earliest of the two columns */
	/* one without a schedule is taken */
	make(st, NULL, "s3", "ready", 0);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(store_card_claim_next(st, &in, &bot, &r), CORE_OK);
	ck_assert_ptr_nonnull(r.card);
	ck_assert_str_eq(r.card->id, "s3");
	ck_assert_str_eq(r.card->claim.from, "ready");
	core_card_free(r.card);
	/* its time passed: taken */
	tnow = CT_T0 + 20000;
	memset(&r, 0, sizeof(r));
	in.marker = "w2";
	ck_assert_int_eq(store_card_claim_next(st, &in, &bot, &r), CORE_OK);
	ck_assert_ptr_nonnull(r.card);
	ck_assert_str_eq(r.card->id, "s2");
	ck_assert_str_eq(r.card->claim.from, "in_progress");
	core_card_free(r.card);
	close_db(st);
}
END_TEST

START_TEST(capacity_column_and_board)
{
	struct store *st = open_clocked();
	struct store_claim_result r = {0};
	struct store_claim_next in = {.board = "cap", .marker = "n1", .lease_ms = 60000};
	struct core_board b = {0};
	struct core_card *c = NULL;
	struct core_token t1;
	int64_t per[16], total;

	board_with(st, "cap", 2, 3, NULL);
	make(st, "cap", "r1", "ready", 0);
	make(st, "cap", "r2", "ready", 0);
	make(st, "cap", "r3", "ready", 0);
	make(st, "cap", "p1", "in_progress", 0);
	make(st, "cap", "p2", "in_progress", 0);
	t1 = claim(st, "r1", "m1");
	claim(st, "r2", "m2");
	ck_assert_int_eq(store_card_claim(st, "r3", "m3", 60000, &bot, &r),
			 CORE_ERR_CAPACITY_REACHED);
	ck_assert_msg(strstr(r.detail, "limit of 2") != NULL, "detail: %s", r.detail);
	ck_assert_int_eq(store_board_get(st, "cap", &b), CORE_OK);
	ck_assert_int_eq(store_board_claimed(st, &b, per, &total), CORE_OK);
	ck_assert_int_eq(per[col_index(&b, "ready")], 2);
	ck_assert_int_eq(total, 2);
	/* claim-next skips the full column */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(store_card_claim_next(st, &in, &bot, &r), CORE_OK);
	ck_assert_ptr_nonnull(r.card);
	ck_assert_str_eq(r.card->id, "p1");
	ck_assert_str_eq(r.card->claim.from, "in_progress");
	core_card_free(r.card);
	/* the board is full (max_claims 3): nothing, no wake-up; a claim names the board */
	memset(&r, 0, sizeof(r));
	in.marker = "n2";
	ck_assert_int_eq(store_card_claim_next(st, &in, &bot, &r), CORE_OK);
	ck_assert_ptr_null(r.card);
	ck_assert_int_eq(r.wake_at, 0);
	ck_assert_int_eq(store_card_claim(st, "p2", "m4", 60000, &bot, &r),
			 CORE_ERR_CAPACITY_REACHED);
	ck_assert_msg(strstr(r.detail, "max_claims of 3") != NULL, "detail: %s", r.detail);
	ck_assert_int_eq(store_board_claimed(st, &b, per, &total), CORE_OK);
	ck_assert_int_eq(per[col_index(&b, "in_progress")], 1);
	ck_assert_int_eq(total, 3);
	/* a release gives both slots back */
	ck_assert_int_eq(store_card_release(st, "r1", &t1, &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": \"r1\"}"), 0);
	claim(st, "r3", "m3");
	core_board_release(&b);
	close_db(st);
}
END_TEST

static bool released_with_retry(struct store *st, const char *id)
{
	struct core_event *ev = NULL;
	size_t n = 0, i;
	int64_t next = 0;
	bool found = false;

	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	for (i = 0; i < n; i++)
		if (ev[i].type == CORE_EV_CARD_RELEASED && ev[i].card_id &&
		    strcmp(ev[i].card_id, id) == 0 && ev[i].payload &&
		    strstr(ev[i].payload, "\"retry\":true"))
			found = true;
	store_events_free(ev, n);
	return found;
}

START_TEST(retry_later_then_exhausted)
{
	struct store *st = open_clocked();
	struct core_retry pol = {2, 1000, 5000};
	struct store_claim_result r = {0};
	struct core_card *c = NULL;
	struct core_token t;

	board_with(st, "rt", 0, 0, &pol);
	make(st, "rt", "x1", "ready", 0);
	t = claim(st, "x1", "m1");
	ck_assert_int_eq(store_card_release_retry(st, "x1", &t, &bot, &c), CORE_OK);
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->attempts, 1);
	ck_assert_str_eq(c->state, "ready");
	ck_assert_int_ge(c->not_before, CT_T0 + 900);
	ck_assert_int_le(c->not_before, CT_T0 + 1100);
	core_card_free(c);
	ck_assert(released_with_retry(st, "x1"));
	ck_assert_int_eq(store_card_claim(st, "x1", "m2", 60000, &bot, &r), CORE_ERR_NOT_YET);
	tnow = CT_T0 + 2000;
	t = claim(st, "x1", "m2");
	ck_assert_int_eq(store_card_release_retry(st, "x1", &t, &bot, &c), CORE_OK);
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->attempts, 2);
	ck_assert_str_eq(c->state, "blocked");
	ck_assert(c->gave_up.set);
	ck_assert_str_eq(c->gave_up.reason, "attempts_exhausted");
	ck_assert_str_eq(c->gave_up.state, "blocked");
	core_card_free(c);
	/* an operator's reopen starts afresh */
	ck_assert_int_eq(store_card_reopen(st, "x1", "ready", NULL, &op, &c), CORE_OK);
	ck_assert_int_eq(c->attempts, 0);
	ck_assert_int_eq(c->not_before, 0);
	core_card_free(c);
	close_db(st);
}
END_TEST

START_TEST(completion_resets_attempts)
{
	struct store *st = open_clocked();
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = "done"};
	struct core_card *c = NULL;
	struct core_token t;

	make(st, NULL, "d1", "ready", 0);
	t = claim(st, "d1", "m1");
	ck_assert_int_eq(store_card_release_retry(st, "d1", &t, &bot, &c), CORE_OK);
	ck_assert_int_eq(c->attempts, 1);
	core_card_free(c);
	tnow = CT_T0 + 10000;
	w.token = claim(st, "d1", "m2");
	ck_assert_int_eq(store_card_owned_write(st, "d1", &w, &bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "done");
	ck_assert_int_eq(c->attempts, 0);
	ck_assert_int_eq(c->not_before, 0);
	core_card_free(c);
	close_db(st);
}
END_TEST

/* A recovery claim keeps the slot of the claim it replaces; its release frees it. */
START_TEST(recovery_claim_keeps_its_slot)
{
	struct store *st = open_clocked();
	struct store_claim_result r = {0};
	struct core_card *c = NULL;
	struct core_token t, rt;
	char f[160];

	board_with(st, "rc", 1, 0, NULL);
	make(st, "rc", "k1", "ready", 0);
	make(st, "rc", "k2", "ready", 0);
	ck_assert_int_eq(store_card_claim(st, "k1", "m1", 1000, &bot, &r), CORE_OK);
	t = (struct core_token){"m1", r.token.epoch, NULL};
	core_card_free(r.card);
	tnow = CT_T0 + 5000;
	ck_assert_int_eq(store_reaper_transfer(st, "k1", &t, "reaper:x", 60000, &c), CORE_OK);
	rt = (struct core_token){"reaper:x", c->claim_epoch, NULL};
	ck_assert_str_eq(c->claim.from, "ready");
	core_card_free(c);
	snprintf(f, sizeof(f), "{\"owner\": \"k1\", \"epoch\": %lld}", (long long)rt.epoch);
	ck_assert_int_eq(raw_count(st, "slots", f), 1);
	ck_assert_int_eq(store_card_claim(st, "k2", "m2", 60000, &bot, &r),
			 CORE_ERR_CAPACITY_REACHED);
	ck_assert_int_eq(store_reaper_release_exact(st, "k1",
						    &(struct core_card){.id = "k1",
									.claim = {.present = true,
										  .marker = "reaper:x"},
									.has_epoch = true,
									.claim_epoch = rt.epoch},
						    &bot),
			 CORE_OK);
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": \"k1\"}"), 0);
	claim(st, "k2", "m2");
	close_db(st);
}
END_TEST

/* A slot taken by a claim whose process died before its card write: the repair pass first
 * takes the expected epoch away from the card (so that write can never land), then frees
 * it; a slot left behind by a release that died after its card write is freed. */
START_TEST(leaked_slot_is_repaired)
{
	struct store *st = open_clocked();
	struct store_claim_result r = {0};
	struct core_card *c = NULL, **v = NULL;
	size_t n = 0;
	int64_t e0, ghost;
	char doc[512];

	board_with(st, "lk", 1, 0, NULL);
	make(st, "lk", "g1", "ready", 0);
	make(st, "lk", "g2", "ready", 0);
	ck_assert_int_eq(store_card_get(st, "g1", &c), CORE_OK);
	e0 = c->claim_epoch;
	core_card_free(c);
	ghost = e0 + 1000;
	snprintf(doc, sizeof(doc),
		 "{\"_id\": \"lk/ready/0\", \"board\": \"lk\", \"col\": \"ready\", \"i\": 0, "
		 "\"owner\": \"g1\", \"epoch\": %lld, \"at\": {\"$date\": %lld}}",
		 (long long)ghost, (long long)CT_T0);
	raw_insert(st, "slots", doc);
	ck_assert_int_eq(store_card_claim(st, "g2", "m2", 60000, &bot, &r),
			 CORE_ERR_CAPACITY_REACHED);
	/* within the grace: left alone (the CAS may be under way) */
	tnow = CT_T0 + 1000;
	ck_assert_int_eq(store_reaper_list_repair(st, 10, &v, &n), CORE_OK);
	store_cards_free(v, n);
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": \"g1\"}"), 1);
	tnow = CT_T0 + 61000;
	ck_assert_int_eq(store_reaper_list_repair(st, 10, &v, &n), CORE_OK);
	store_cards_free(v, n);
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": \"g1\"}"), 0);
	ck_assert_int_eq(store_card_get(st, "g1", &c), CORE_OK);
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, ghost); /* the in-flight write expected e0 */
	core_card_free(c);
	claim(st, "g2", "m2");
	/* a release whose free never ran: the card unclaimed at the slot's epoch */
	raw_update(st, "cards", "g2", "{\"$unset\": {\"claim\": 1}}");
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": \"g2\"}"), 1);
	tnow = CT_T0 + 130000;
	ck_assert_int_eq(store_reaper_list_repair(st, 10, &v, &n), CORE_OK);
	store_cards_free(v, n);
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": \"g2\"}"), 0);
	claim(st, "g1", "m1");
	close_db(st);
}
END_TEST

/* A slot held by a claim in flight (here a hold whose card is not claimed, given back when
 * the take is first refused) does not refuse a claim while the cards leave room: the take
 * waits it out (DESIGN §16: a refusal is decided on the live claims). It was 409
 * capacity_reached at once; with 8 threads racing for another card of the column, 10-39 of
 * ~280 claims of a free card. */
static struct store *inflight_st;
static int inflight_freed;

static const char *inflight_change; /* NULL: give the slot back; else a card x update */

static void free_inflight(void *ctx, const char *what)
{
	(void)ctx;
	if (strcmp(what, "slots-refused") != 0 || inflight_freed++)
		return;
	if (inflight_change)
		raw_update(inflight_st, "cards", "x", inflight_change);
	else
		raw_update(inflight_st, "slots", "if/ready/0", "{\"$set\": {\"owner\": null}}");
}

START_TEST(slot_held_in_flight_waits)
{
	struct store_mongo_options o = {.test_read = free_inflight};
	struct store_claim_result r = {0};
	char db[64], doc[512];

	db_name_new(db, sizeof(db));
	inflight_st = open_db_opts(db, &o, NULL);
	inflight_freed = 0;
	inflight_change = NULL;
	board_with(inflight_st, "if", 1, 0, NULL);
	make(inflight_st, "if", "x", "ready", 0);
	make(inflight_st, "if", "y", "ready", 0);
	snprintf(doc, sizeof(doc),
		 "{\"_id\": \"if/ready/0\", \"board\": \"if\", \"col\": \"ready\", \"i\": 0, "
		 "\"owner\": \"x\", \"epoch\": 999, \"at\": {\"$date\": %lld}}",
		 (long long)CT_T0);
	raw_insert(inflight_st, "slots", doc);
	ck_assert_int_eq(store_card_claim(inflight_st, "y", "m", 60000, &bot, &r), CORE_OK);
	ck_assert_int_eq(inflight_freed, 1);
	ck_assert(r.fresh);
	core_card_free(r.card);
	/* The card itself taken meanwhile by one of the claimers that held the slots: that is
	 * the answer (claim_conflict), decided on the card as it stands, not capacity_reached. */
	ck_assert_int_eq(store_card_delete(inflight_st, "y", &op), CORE_OK); /* its slot free */
	ck_assert_int_eq(raw_count(inflight_st, "slots", "{\"owner\": null}"), 1);
	raw_update(inflight_st, "slots", "if/ready/0",
		   "{\"$set\": {\"owner\": \"ghost\", \"epoch\": 5}}");
	inflight_freed = 0;
	inflight_change = "{\"$set\": {\"claim\": {\"marker\": \"other\", \"from\": \"ready\", "
			  "\"lease_ms\": 60000}, "
			  "\"claim_epoch\": 7}}";
	r = (struct store_claim_result){0};
	ck_assert_int_eq(store_card_claim(inflight_st, "x", "m2", 60000, &bot, &r),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(inflight_freed, 1);
	close_db(inflight_st);
}
END_TEST

/* Claims live before a limit was set hold no slot: the board write that sets it adopts them
 * (and so does every repair pass), so no new claim is let in until they are below it. */
START_TEST(claims_before_the_limit_are_adopted)
{
	struct store *st = open_clocked();
	struct store_claim_result r = {0};
	struct core_card *c = NULL, **v = NULL;
	struct core_token t1;
	size_t n = 0;

	board_with(st, "ad", 0, 0, NULL);
	make(st, "ad", "a1", "ready", 0);
	make(st, "ad", "a2", "ready", 0);
	make(st, "ad", "a3", "ready", 0);
	t1 = claim(st, "a1", "m1");
	claim(st, "a2", "m2");
	ck_assert_int_eq(raw_count(st, "slots", "{}"), 0);
	board_with(st, "ad", 1, 0, NULL);
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": {\"$ne\": null}}"), 2);
	ck_assert_int_eq(store_card_claim(st, "a3", "m3", 60000, &bot, &r),
			 CORE_ERR_CAPACITY_REACHED);
	ck_assert_int_eq(store_card_release(st, "a1", &t1, &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_claim(st, "a3", "m3", 60000, &bot, &r),
			 CORE_ERR_CAPACITY_REACHED); /* a2 still holds the one */
	/* a claim that raced the board write (no slot): the repair pass adopts it */
	raw_delete_where(st, "slots", "{\"board\": \"ad\"}");
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": \"a2\"}"), 0);
	ck_assert_int_eq(store_reaper_list_repair(st, 10, &v, &n), CORE_OK);
	store_cards_free(v, n);
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": \"a2\"}"), 1);
	ck_assert_int_eq(store_card_claim(st, "a3", "m3", 60000, &bot, &r),
			 CORE_ERR_CAPACITY_REACHED);
	close_db(st);
}
END_TEST

/* A column rename carries its claims' claim.from and its slots: the limit still holds under
 * the new name, and the claims still count there (as on the FS twin). */
START_TEST(rename_carries_claims_and_slots)
{
	struct store *st = open_clocked();
	struct store_claim_result r = {0};
	struct core_board b = {0};
	struct core_card *c = NULL;
	int64_t per[16], total;
	size_t touched = 0;

	board_with(st, "rn", 1, 0, NULL);
	make(st, "rn", "e1", "ready", 0);
	make(st, "rn", "e2", "ready", 0);
	claim(st, "e1", "m1");
	ck_assert_int_eq(store_board_column_rename(st, "rn", "ready", "go", &op, &touched), CORE_OK);
	ck_assert_int_eq(store_card_get(st, "e1", &c), CORE_OK);
	ck_assert_str_eq(c->claim.from, "go");
	core_card_free(c);
	ck_assert_int_eq(store_board_get(st, "rn", &b), CORE_OK);
	ck_assert_int_eq(store_board_claimed(st, &b, per, &total), CORE_OK);
	ck_assert_int_eq(per[col_index(&b, "go")], 1);
	core_board_release(&b);
	ck_assert_int_eq(raw_count(st, "slots", "{\"col\": \"go\", \"owner\": \"e1\"}"), 1);
	ck_assert_int_eq(store_card_claim(st, "e2", "m2", 60000, &bot, &r),
			 CORE_ERR_CAPACITY_REACHED);
	close_db(st);
}
END_TEST

/* What the slots cost (store/mongo/README.md, "Capacity"): a fresh claim from a limited
 * column takes its slot and counts the held ones (2 round trips more than on a board without
 * limits, once the slot exists); its release frees it (1 more). Counted on this thread. */
START_TEST(slots_cost_round_trips)
{
	struct store *st = open_clocked();
	struct core_card *c = NULL;
	struct core_token t;
	uint64_t before, claim_u, claim_l, rel_u, rel_l;

	board_with(st, "u", 0, 0, NULL);
	board_with(st, "l", 2, 0, NULL);
	make(st, "u", "u1", "ready", 0);
	make(st, "l", "l0", "ready", 0);
	make(st, "l", "l1", "ready", 0);
	t = claim(st, "l0", "m0"); /* makes slot 0, then frees it */
	ck_assert_int_eq(store_card_release(st, "l0", &t, &bot, &c), CORE_OK);
	core_card_free(c);
	before = mgo_round_trips_here();
	t = claim(st, "u1", "m1");
	claim_u = mgo_round_trips_here() - before;
	before = mgo_round_trips_here();
	ck_assert_int_eq(store_card_release(st, "u1", &t, &bot, &c), CORE_OK);
	rel_u = mgo_round_trips_here() - before;
	core_card_free(c);
	before = mgo_round_trips_here();
	t = claim(st, "l1", "m2");
	claim_l = mgo_round_trips_here() - before;
	before = mgo_round_trips_here();
	ck_assert_int_eq(store_card_release(st, "l1", &t, &bot, &c), CORE_OK);
	rel_l = mgo_round_trips_here() - before;
	core_card_free(c);
	printf("slots_cost_round_trips: claim %llu (no limit) / %llu (limit), release %llu / %llu\n",
	       (unsigned long long)claim_u, (unsigned long long)claim_l,
	       (unsigned long long)rel_u, (unsigned long long)rel_l);
	ck_assert_uint_eq(claim_l, claim_u + 2);
	ck_assert_uint_eq(rel_l, rel_u + 1);
	close_db(st);
}
END_TEST

/* ---- the race ---- */

#define RACE_CARDS 24
#define RACE_THREADS 6
#define RACE_ROUNDS 30
#define RACE_LIMIT 3

struct racer {
	struct store *st; /* its own handle (a replica), opened and closed by the test thread */
	int id;
	int claims, refused;
	int unexpected;
	char what[96];
};

static atomic_bool race_done;

static void *race_main(void *arg)
{
	struct racer *x = arg;
	struct store *st = x->st;
	struct store_claim_next in = {.board = "race", .lease_ms = 60000};
	struct store_claim_result r;
	struct core_card *c = NULL;
	char marker[32], id[16];
	int i;

	for (i = 0; i < RACE_ROUNDS; i++) {
		enum core_rc rc;

		memset(&r, 0, sizeof(r));
		snprintf(marker, sizeof(marker), "t%d-%d", x->id, i);
		if (i % 2) {
			in.marker = marker;
			rc = store_card_claim_next(st, &in, &bot, &r);
		} else {
			snprintf(id, sizeof(id), "q%d", (x->id * 5 + i * 7) % RACE_CARDS);
			rc = store_card_claim(st, id, marker, 60000, &bot, &r);
		}
		if (rc == CORE_ERR_CAPACITY_REACHED || rc == CORE_ERR_CLAIM_CONFLICT ||
		    (rc == CORE_OK && !r.card)) {
			x->refused++;
			continue;
		}
		if (rc != CORE_OK) {
			if (!x->unexpected++)
				snprintf(x->what, sizeof(x->what), "claim: %s", core_rc_code(rc));
			continue;
		}
		x->claims++;
		snprintf(id, sizeof(id), "%s", r.card->id);
		core_card_free(r.card);
		nap_ms(1 + i % 3);
		rc = store_card_release(st, id, &(struct core_token){marker, r.token.epoch, NULL},
					&bot, &c);
		core_card_free(c);
		c = NULL;
		if (rc != CORE_OK && !x->unexpected++)
			snprintf(x->what, sizeof(x->what), "release %s: %s", id, core_rc_code(rc));
	}
	return NULL;
}

struct sampler {
	struct store *st;
	int64_t max, samples;
};

static void *sample_main(void *arg)
{
	struct sampler *s = arg;

	while (!atomic_load(&race_done)) {
		int64_t k = raw_count(s->st, "cards",
				      "{\"board\": \"race\", \"claim.from\": \"ready\", "
				      "\"claim.marker\": {\"$exists\": true}}");

		if (k > s->max)
			s->max = k;
		s->samples++;
	}
	return NULL;
}

START_TEST(column_limit_holds_across_replicas)
{
	struct store *st;
	struct racer x[RACE_THREADS];
	pthread_t t[RACE_THREADS], ts;
	struct sampler smp = {0};
	struct core_event *ev = NULL;
	size_t n = 0, k;
	int64_t next = 0, after = 0, live = 0, most = 0;
	char db[64], id[16];
	int i, claims = 0;

	if (is_ferretdb()) {
		printf("SKIP column_limit_holds_across_replicas: FerretDB 1.24's single-document "
		       "updates are not atomic under concurrency; the slots' bound needs MongoDB "
		       "or mongo-java-server\n");
		return;
	}
	db_name_new(db, sizeof(db));
	st = open_db(db, 0, NULL);
	board_with(st, "race", RACE_LIMIT, 0, NULL);
	for (i = 0; i < RACE_CARDS; i++) {
		snprintf(id, sizeof(id), "q%d", i);
		make(st, "race", id, "ready", 0);
	}
	atomic_store(&race_done, false);
	smp.st = st;
	/* The handles are opened (and closed) here: the fixture's table of open stores is the
	 * test thread's. */
	for (i = 0; i < RACE_THREADS; i++)
		x[i] = (struct racer){.st = open_db(db, 0, NULL), .id = i};
	ck_assert_int_eq(pthread_create(&ts, NULL, sample_main, &smp), 0);
	for (i = 0; i < RACE_THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, race_main, &x[i]), 0);
	for (i = 0; i < RACE_THREADS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(x[i].unexpected == 0, "thread %d: %d unexpected answers, first %s", i,
			      x[i].unexpected, x[i].what);
		claims += x[i].claims;
	}
	atomic_store(&race_done, true);
	pthread_join(ts, NULL);
	for (i = 0; i < RACE_THREADS; i++)
		close_db(x[i].st);
	ck_assert_int_gt(claims, RACE_LIMIT);
	ck_assert_msg(smp.max <= RACE_LIMIT, "sampled %lld live claims from ready (limit %d)",
		      (long long)smp.max, RACE_LIMIT);
	/* The events in seq order: a claim is logged after its slot is taken, a release before
	 * its slot is freed, so the replay never holds more than the limit either. */
	for (;;) {
		ck_assert_int_eq(store_events_list(st, "race", NULL, after, 1000, 0, &ev, &n, &next),
				 CORE_OK);
		for (k = 0; k < n; k++) {
			if (ev[k].type == CORE_EV_CARD_CLAIMED)
				live++;
			else if (ev[k].type == CORE_EV_CARD_RELEASED)
				live--;
			if (live > most)
				most = live;
		}
		store_events_free(ev, n);
		ev = NULL;
		if (!n)
			break;
		after = next;
	}
	ck_assert_int_eq(live, 0);
	ck_assert_msg(most <= RACE_LIMIT, "the events show %lld live claims (limit %d)",
		      (long long)most, RACE_LIMIT);
	ck_assert_int_eq(raw_count(st, "slots", "{\"owner\": {\"$ne\": null}}"), 0);
	printf("column_limit_holds_across_replicas: %d claims, %lld samples, at most %lld live\n",
	       claims, (long long)smp.samples, (long long)smp.max);
	close_db(st);
}
END_TEST

void mongo_add_policy(TCase *tc)
{
	tcase_add_test(tc, policy_fields_are_stored);
	tcase_add_test(tc, not_yet_and_wake_at);
	tcase_add_test(tc, capacity_column_and_board);
	tcase_add_test(tc, slot_held_in_flight_waits);
	tcase_add_test(tc, retry_later_then_exhausted);
	tcase_add_test(tc, completion_resets_attempts);
	tcase_add_test(tc, recovery_claim_keeps_its_slot);
	tcase_add_test(tc, leaked_slot_is_repaired);
	tcase_add_test(tc, claims_before_the_limit_are_adopted);
	tcase_add_test(tc, slots_cost_round_trips);
	tcase_add_test(tc, rename_carries_claims_and_slots);
	tcase_add_test(tc, column_limit_holds_across_replicas);
}
