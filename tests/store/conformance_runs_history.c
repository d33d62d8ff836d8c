/* Conformance: runs as a record (DESIGN §20): the runs listings, the output tail appended by
 * the run's owner (fenced), and the per-card history bound (CORE_RUN_HISTORY_MAX). */
#include "tests/store/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run_as(struct store *st, const char *id, const char *card, const char *marker,
		   const char *status)
{
	struct store_run_create in = {.id = id, .card_id = card, .marker = marker,
				      .status = status, .lease_ms = 30000};
	struct core_run *r = NULL;

	ck_assert_int_eq(store_run_create(st, &in, &ct_bot, &r), CORE_OK);
	core_run_free(r);
}

static enum core_rc append(struct store *st, const char *id, const char *marker,
			   const char *text, struct core_run **out)
{
	struct store_run_update u = {.marker = marker, .output = text};

	return store_run_update(st, id, &u, &ct_bot, out);
}

static void finish(struct store *st, const char *id, const char *marker)
{
	struct store_run_update u = {.marker = marker, .status = "finished"};
	struct core_run *r = NULL;

	ck_assert_int_eq(store_run_update(st, id, &u, &ct_bot, &r), CORE_OK);
	core_run_free(r);
}

/* The ids of a page, comma-separated, into buf. */
static const char *page_ids(struct core_run **v, size_t n, char *buf, size_t cap)
{
	size_t i, len = 0;

	buf[0] = '\0';
	for (i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? "," : "", v[i]->id);
	return buf;
}

START_TEST(runs_list_newest_first_paged)
{
	struct store *st = ct_open();
	struct store_run_filter f = {.card_id = "c1", .limit = 2};
	struct core_run **v = NULL, *one = NULL;
	size_t n = 0;
	char *next = NULL, ids[256];

	core_card_free(ct_create(st, "c1", "ready", NULL));
	core_card_free(ct_create(st, "c2", "ready", NULL));
	ct_claim(st, "c1", "w1");
	ct_claim(st, "c2", "w1");
	run_as(st, "r1", "c1", "w1", "running");
	ct_now += 10;
	run_as(st, "r2", "c1", "w1", "running");
	run_as(st, "r3", "c1", "w1", "running"); /* same ms as r2: the id breaks the tie */
	ct_now += 10;
	run_as(st, "x1", "c2", "w1", "running");
	ck_assert_int_eq(append(st, "r3", "w1", "some output", &one), CORE_OK);
	core_run_free(one);
	finish(st, "r2", "w1");

	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_str_eq(page_ids(v, n, ids, sizeof ids), "r3,r2");
	ck_assert_ptr_null(v[0]->output); /* a listing leaves the output out */
	ck_assert_int_eq(v[0]->claim_epoch, v[1]->claim_epoch);
	ck_assert_str_eq(v[1]->status, "finished");
	ck_assert_ptr_nonnull(next);
	store_runs_free(v, n);
	f.after = next;
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	free((char *)f.after);
	ck_assert_str_eq(page_ids(v, n, ids, sizeof ids), "r1");
	ck_assert_ptr_null(next);
	store_runs_free(v, n);

	/* A board's runs, by status; a scope without the board sees none. */
	f = (struct store_run_filter){.board = "default", .limit = 10};
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_str_eq(page_ids(v, n, ids, sizeof ids), "x1,r3,r2,r1");
	store_runs_free(v, n);
	f.status = "running";
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_str_eq(page_ids(v, n, ids, sizeof ids), "x1,r3,r1");
	store_runs_free(v, n);
	f = (struct store_run_filter){.boards = (const char *const[]){"other", NULL}, .limit = 10};
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, 0);
	store_runs_free(v, n);

	/* A pruned run is no longer listed. */
	ck_assert_int_eq(store_run_prune(st, "r1", &ct_op), CORE_OK);
	f = (struct store_run_filter){.card_id = "c1", .limit = 10};
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_str_eq(page_ids(v, n, ids, sizeof ids), "r3,r2");
	store_runs_free(v, n);

	/* Bad filters change nothing and say so. */
	f.after = "not-a-cursor";
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_ERR_BAD_REQUEST);
	f.after = NULL;
	f.limit = 0;
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_ERR_BAD_REQUEST);
	f.limit = 1;
	f.status = "NOT A STATUS";
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_ERR_BAD_REQUEST);
	ct_close(st);
}
END_TEST

START_TEST(run_output_appended_by_owner)
{
	struct store *st = ct_open();
	struct core_run *r = NULL;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	ct_claim(st, "c1", "w1");
	run_as(st, "r1", "c1", "w1", "running");
	ck_assert_int_eq(append(st, "r1", "w1", "hello ", &r), CORE_OK);
	ck_assert_str_eq(r->output, "hello ");
	core_run_free(r);
	ct_now += 5;
	ck_assert_int_eq(append(st, "r1", "w1", "wörld\n", &r), CORE_OK);
	ck_assert_str_eq(r->output, "hello wörld\n");
	ck_assert_int_eq(r->updated_at, ct_now);
	core_run_free(r);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_str_eq(r->output, "hello wörld\n");
	core_run_free(r);

	/* Another marker, bad UTF-8: refused, nothing changes. */
	ck_assert_int_eq(append(st, "r1", "w2", "x", &r), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(append(st, "r1", "w1", "\xc3(", &r), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(append(st, "nope", "w1", "x", &r), CORE_ERR_NOT_FOUND);
	/* A PATCH leaves the output as it is. */
	finish(st, "r1", "w1");
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_str_eq(r->output, "hello wörld\n");
	core_run_free(r);
	/* A final run takes no more output. */
	ck_assert_int_eq(append(st, "r1", "w1", "late", &r), CORE_ERR_RUN_FINAL);
	ck_assert_ptr_null(r);
	ct_close(st);
}
END_TEST

START_TEST(run_output_stale_claim_refused)
{
	struct store *st = ct_open();
	struct core_run *r = NULL;
	struct core_card *c = NULL;
	struct core_token t = {.marker = "w1"};

	core_card_free(ct_create(st, "c1", "ready", NULL));
	t.epoch = ct_claim(st, "c1", "w1");
	run_as(st, "r1", "c1", "w1", "running");
	ck_assert_int_eq(store_card_release(st, "c1", &t, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	ct_claim(st, "c1", "w1"); /* the same marker, a new claim */
	ck_assert_int_eq(append(st, "r1", "w1", "zombie", &r), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_ptr_null(r->output);
	core_run_free(r);
	ct_close(st);
}
END_TEST

START_TEST(run_output_keeps_the_tail)
{
	struct store *st = ct_open();
	struct core_run *r = NULL;
	size_t pairs = (CORE_RUN_OUTPUT_MAX + 1000) / 2, i;
	char *text = malloc(2 * pairs + 2);

	ck_assert_ptr_nonnull(text);
	/* "é" (2 bytes) over and over, then "Z": 64 KiB back from the end lands on the second
	 * byte of an "é", which must go too. */
	for (i = 0; i < pairs; i++) {
		text[2 * i] = (char)0xc3;
		text[2 * i + 1] = (char)0xa9;
	}
	text[2 * pairs] = 'Z';
	text[2 * pairs + 1] = '\0';
	core_card_free(ct_create(st, "c1", "ready", NULL));
	ct_claim(st, "c1", "w1");
	run_as(st, "r1", "c1", "w1", "running");
	ck_assert_int_eq(append(st, "r1", "w1", "old bytes drop off the front", &r), CORE_OK);
	core_run_free(r);
	ck_assert_int_eq(append(st, "r1", "w1", text, &r), CORE_OK);
	ck_assert_uint_eq(strlen(r->output), CORE_RUN_OUTPUT_MAX - 1);
	ck_assert_uint_eq((unsigned char)r->output[0], 0xc3);
	ck_assert(core_run_output_valid(r->output, strlen(r->output)));
	ck_assert_str_eq(r->output + strlen(r->output) - 3, "\xc3\xa9Z");
	core_run_free(r);
	ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
	ck_assert_uint_eq(strlen(r->output), CORE_RUN_OUTPUT_MAX - 1);
	core_run_free(r);
	ck_assert_int_eq(append(st, "r1", "w1", "END", &r), CORE_OK);
	ck_assert_uint_le(strlen(r->output), CORE_RUN_OUTPUT_MAX);
	ck_assert_str_eq(r->output + strlen(r->output) - 3, "END");
	core_run_free(r);
	free(text);
	ct_close(st);
}
END_TEST

START_TEST(runs_history_bounded)
{
	struct store *st = ct_open();
	struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .run_id = "h00"};
	struct store_run_filter f = {.card_id = "c1", .limit = 1000};
	struct core_run **v = NULL, *r = NULL;
	struct core_card *c = NULL;
	size_t n = 0, i, total = CORE_RUN_HISTORY_MAX + 3;
	char *next = NULL, id[16];

	core_card_free(ct_create(st, "c1", "ready", NULL));
	w.token = (struct core_token){.marker = "w1", .epoch = ct_claim(st, "c1", "w1")};
	/* h00: finished, the card's last run; h01: still running under the claim; then the
	 * rest, each finished. Only h02 may go: the reaper judges by the last run, and a live
	 * run's owner is still writing it. */
	for (i = 0; i < total; i++) {
		snprintf(id, sizeof id, "h%02zu", i);
		run_as(st, id, "c1", "w1", "running");
		if (i != 1)
			finish(st, id, "w1");
		if (i == 0) {
			ck_assert_int_eq(store_card_owned_write(st, "c1", &w, &ct_bot, &c), CORE_OK);
			core_card_free(c);
		}
		ct_now += 1;
	}
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, total - 1);
	ck_assert_str_eq(v[0]->id, "h52");
	ck_assert_str_eq(v[n - 2]->id, "h01");
	ck_assert_str_eq(v[n - 1]->id, "h00");
	store_runs_free(v, n);
	ck_assert_int_eq(store_run_get(st, "h02", &r), CORE_ERR_NOT_FOUND);
	ck_assert_int_eq(store_run_get_any(st, "h02", &r), CORE_OK);
	ck_assert(r->pruned);
	ck_assert_ptr_null(r->output);
	core_run_free(r);
	/* A retired run's id is not reused, and it still counts toward the run ceiling. */
	ck_assert_int_eq(store_run_create(st, &(struct store_run_create){.id = "h02",
			 .card_id = "c1", .marker = "w1", .status = "running", .lease_ms = 1},
			 &ct_bot, &r), CORE_ERR_ALREADY_EXISTS);
	ck_assert_int_eq(store_run_count_for_card(st, "c1", &n), CORE_OK);
	ck_assert_uint_eq(n, total);
	ct_close(st);
}
END_TEST

/* A card deleted and created again does not inherit the runs of the earlier card of its id:
 * its listing leaves them out, and its history bound neither counts nor retires them (they
 * stay whole, in the board's listing). */
START_TEST(runs_of_an_earlier_card_of_the_id)
{
	struct store *st = ct_open();
	struct store_run_filter f = {.card_id = "c1", .board = "default", .limit = 1000};
	struct core_run **v = NULL, *r = NULL;
	struct core_card *c;
	size_t n = 0, i;
	char *next = NULL, id[16];

	core_card_free(ct_create(st, "c1", "ready", NULL));
	ct_claim(st, "c1", "w1");
	run_as(st, "old", "c1", "w1", "running");
	finish(st, "old", "w1");
	ck_assert_int_eq(store_card_delete(st, "c1", &ct_op), CORE_OK);
	ct_now += 1000;
	c = ct_create(st, "c1", "ready", NULL);
	f.card_since = c->created_at;
	core_card_free(c);
	ct_claim(st, "c1", "w1");
	for (i = 0; i < CORE_RUN_HISTORY_MAX; i++) {
		snprintf(id, sizeof id, "n%02zu", i);
		run_as(st, id, "c1", "w1", "running");
		finish(st, id, "w1");
		ct_now += 1;
	}
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, CORE_RUN_HISTORY_MAX);
	for (i = 0; i < n; i++)
		ck_assert_str_ne(v[i]->id, "old");
	store_runs_free(v, n);
	free(next);
	/* The earlier card's run is still whole: not retired as one past this card's bound. */
	ck_assert_int_eq(store_run_get(st, "old", &r), CORE_OK);
	ck_assert(!r->pruned);
	ck_assert_str_eq(r->status, "finished");
	core_run_free(r);
	ct_close(st);
}
END_TEST

/* Runs created in one millisecond are listed newest first too: the generated ids order as
 * they were made (their counter is zero-padded; "...-10" sorted before "...-9"). */
START_TEST(runs_of_one_ms_listed_newest_first)
{
	struct store *st = ct_open();
	struct store_run_filter f = {.card_id = "c1", .limit = 1000};
	struct core_run **v = NULL, *r = NULL;
	char made[12][CORE_ID_MAX + 1];
	char *next = NULL;
	size_t n = 0, i;

	core_card_free(ct_create(st, "c1", "ready", NULL));
	ct_claim(st, "c1", "w1");
	for (i = 0; i < 12; i++) {
		ck_assert_int_eq(store_run_create(st, &(struct store_run_create){.card_id = "c1",
				 .marker = "w1", .status = "running", .lease_ms = 30000},
				 &ct_bot, &r), CORE_OK);
		snprintf(made[i], sizeof made[i], "%s", r->id);
		core_run_free(r);
	}
	ck_assert_int_eq(store_run_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, 12);
	for (i = 0; i < n; i++)
		ck_assert_str_eq(v[i]->id, made[11 - i]);
	store_runs_free(v, n);
	free(next);
	ct_close(st);
}
END_TEST

void conformance_add_runs_history(Suite *s)
{
	TCase *tc = tcase_create("runs_history");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, runs_list_newest_first_paged);
	tcase_add_test(tc, run_output_appended_by_owner);
	tcase_add_test(tc, run_output_stale_claim_refused);
	tcase_add_test(tc, run_output_keeps_the_tail);
	tcase_add_test(tc, runs_history_bounded);
	tcase_add_test(tc, runs_of_an_earlier_card_of_the_id);
	tcase_add_test(tc, runs_of_one_ms_listed_newest_first);
	suite_add_tcase(s, tc);
}
