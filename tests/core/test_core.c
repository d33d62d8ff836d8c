/* core unit tests: one case per rule; the decision table is tested by a table. */
#include "core/core.h"
#include "tests/core/test_core.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOW 1764670000000LL
#define LEASE 60000LL

static struct core_board board;

static void board_setup(void)
{
	ck_assert_int_eq(core_board_init_default(&board, "default"), CORE_OK);
}

static void board_teardown(void)
{
	core_board_release(&board);
}

static struct core_card *card_in(const char *id, const char *state)
{
	struct core_card *c = core_card_new();

	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(core_str_set(&c->id, id), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->board, "default"), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->state, state), CORE_OK);
	c->has_epoch = true;
	return c;
}

/* ---- validation ---- */

START_TEST(test_ids_and_names)
{
	char longid[CORE_ID_MAX + 2];

	ck_assert(core_id_valid("card-1.a:b_c"));
	ck_assert(!core_id_valid(""));
	ck_assert(!core_id_valid("a b"));
	ck_assert(!core_id_valid("a/b"));
	ck_assert(!core_id_valid(NULL));
	memset(longid, 'a', sizeof(longid));
	longid[CORE_ID_MAX] = '\0';
	ck_assert(core_id_valid(longid));
	longid[CORE_ID_MAX] = 'a';
	longid[CORE_ID_MAX + 1] = '\0';
	ck_assert(!core_id_valid(longid));
	ck_assert(core_name_valid("in_progress"));
	ck_assert(!core_name_valid("a:b"));
	ck_assert(core_marker_valid("host-123"));
	ck_assert(!core_marker_valid("has space"));
	ck_assert(!core_marker_valid(""));
	/* The marker rule, one byte at a time: printable ASCII but space, 1..CORE_MARKER_MAX
	 * bytes; core_marker_valid reads eight at a time. Every length up to one past the
	 * limit, a bad byte at every place (and none). */
	{
		static const unsigned char bad[] = {' ', 0x01, 0x1f, 0x7f, 0x80, 0xc3, 0xff};
		char m[CORE_MARKER_MAX + 2];
		size_t n, at, k;

		for (n = 1; n <= CORE_MARKER_MAX + 1; n++) {
			memset(m, '!', n);
			m[n - 1] = '~';
			m[n] = '\0';
			ck_assert_msg(core_marker_valid(m) == (n <= CORE_MARKER_MAX), "length %zu", n);
			for (at = 0; n <= 24 && at < n; at++)
				for (k = 0; k < sizeof bad; k++) {
					char keep = m[at];

					m[at] = (char)bad[k];
					ck_assert_msg(!core_marker_valid(m), "length %zu, 0x%02x at %zu",
						      n, bad[k], at);
					m[at] = keep;
				}
		}
	}
	ck_assert(core_marker_is_recovery("reaper:h1"));
	ck_assert(!core_marker_is_recovery("worker-1"));
	/* Reserved in any case (DESIGN §11). */
	ck_assert(core_marker_is_recovery("REAPER:x"));
	ck_assert(core_marker_is_recovery("Reaper:host"));
	ck_assert(!core_marker_is_recovery("reaper"));
	ck_assert(!core_marker_is_recovery("reapers:x"));
	ck_assert(core_status_valid("some_status"));
	ck_assert(!core_status_valid("Running"));
	ck_assert(!core_status_valid("abcdefghijklmnopqrstuvwxyzabcdefg"));
}
END_TEST

START_TEST(test_labels_valid)
{
	char l64[65], l65[66];

	ck_assert(core_label_valid("bug"));
	ck_assert(core_label_valid("prio:high"));
	ck_assert(core_label_valid("\xc3\xa9t\xc3\xa9")); /* été */
	ck_assert(!core_label_valid("a,b"));
	ck_assert(!core_label_valid("a b"));
	ck_assert(!core_label_valid("a\tb"));
	ck_assert(!core_label_valid("a\xc2\xa0" "b")); /* no-break space */
	ck_assert(!core_label_valid("\xff"));
	ck_assert(!core_label_valid(""));
	memset(l64, 'x', 64);
	l64[64] = '\0';
	ck_assert(core_label_valid(l64));
	memset(l65, 'x', 65);
	l65[65] = '\0';
	ck_assert(!core_label_valid(l65));
}
END_TEST

START_TEST(test_strv_equal)
{
	char *ab[] = {"a", "b"}, *ba[] = {"b", "a"}, *a[] = {"a"};
	struct core_strv x = {ab, 2}, y = {ba, 2}, z = {a, 1}, e = {0};

	ck_assert(core_strv_equal(&x, &x));
	ck_assert(core_strv_equal(&e, &(struct core_strv){0}));
	ck_assert(!core_strv_equal(&x, &y)); /* a list: order counts */
	ck_assert(!core_strv_equal(&x, &z));
	ck_assert(!core_strv_equal(&z, &e));
}
END_TEST

START_TEST(test_time_roundtrip)
{
	char buf[CORE_TIME_BUF];
	int64_t ms = 0;

	ck_assert_str_eq(core_time_format(0, buf), "1970-01-01T00:00:00.000Z");
	ck_assert_str_eq(core_time_format(1764670000123LL, buf), "2025-12-02T10:06:40.123Z");
	ck_assert(core_time_parse("2025-12-02T10:06:40.123Z", &ms));
	ck_assert_int_eq(ms, 1764670000123LL);
	ck_assert(core_time_parse("2025-12-02T11:06:40.123+01:00", &ms));
	ck_assert_int_eq(ms, 1764670000123LL);
	ck_assert(core_time_parse("2025-12-02T10:06:40Z", &ms));
	ck_assert_int_eq(ms, 1764670000000LL);
	ck_assert(!core_time_parse("2025-12-02 10:06:40Z", &ms));
	ck_assert(!core_time_parse("2025-13-02T10:06:40Z", &ms));
	ck_assert(!core_time_parse("garbage", &ms));
	/* Days the month has (leap years counted); the four-digit years, an offset that
	 * carries an instant past either end held at it; before 1970 as it came. */
	ms = 42;
	ck_assert(!core_time_parse("2026-02-31T00:00:00Z", &ms));
	ck_assert(!core_time_parse("2026-04-31T00:00:00Z", &ms));
	ck_assert(!core_time_parse("2025-02-29T00:00:00Z", &ms));
	ck_assert(!core_time_parse("1900-02-29T00:00:00Z", &ms));
	ck_assert_int_eq(ms, 42); /* untouched when refused */
	ck_assert(core_time_parse("2024-02-29T00:00:00Z", &ms));
	ck_assert(core_time_parse("2000-02-29T00:00:00Z", &ms));
	ck_assert(core_time_parse("1970-01-01T00:59:00+00:59", &ms));
	ck_assert_int_eq(ms, 0);
	ck_assert(core_time_parse("1969-12-31T23:59:59.999Z", &ms));
	ck_assert_int_eq(ms, -1);
	ck_assert_str_eq(core_time_format(ms, buf), "1969-12-31T23:59:59.999Z");
	ck_assert(core_time_parse("0000-01-01T00:00:00+23:59", &ms));
	ck_assert_str_eq(core_time_format(ms, buf), "0000-01-01T00:00:00.000Z");
	ck_assert(core_time_parse("0000-01-01T23:59:00+23:59", &ms));
	ck_assert_str_eq(core_time_format(ms, buf), "0000-01-01T00:00:00.000Z");
	ck_assert(core_time_parse("0000-01-01T23:59:01+23:59", &ms));
	ck_assert_str_eq(core_time_format(ms, buf), "0000-01-01T00:00:01.000Z");
	ck_assert(core_time_parse("9999-12-31T23:59:59.999Z", &ms));
	ck_assert_int_eq(ms, 253402300799999LL);
	ck_assert(core_time_parse("9999-12-31T23:59:59-23:59", &ms));
	ck_assert_str_eq(core_time_format(ms, buf), "9999-12-31T23:59:59.999Z");
	ck_assert(core_time_parse("9999-12-31T00:00:00-23:59", &ms));
	ck_assert_str_eq(core_time_format(ms, buf), "9999-12-31T23:59:00.000Z");
	ck_assert(core_time_parse("2026-12-31T00:00:00Z", &ms));
	ck_assert_str_eq(core_time_format(ms, buf), "2026-12-31T00:00:00.000Z");
}
END_TEST

START_TEST(test_timespec_add_ns)
{
	struct timespec ts = {.tv_sec = 10, .tv_nsec = 999999999L};

	core_timespec_add_ns(&ts, 1); /* carries into the seconds */
	ck_assert_int_eq(ts.tv_sec, 11);
	ck_assert_int_eq(ts.tv_nsec, 0);
	core_timespec_add_ns(&ts, 250 * 1000L); /* 250 us */
	ck_assert_int_eq(ts.tv_sec, 11);
	ck_assert_int_eq(ts.tv_nsec, 250000);
	ts.tv_nsec = 900000000L;
	core_timespec_add_ns(&ts, (int64_t)2500 * 1000000); /* 2.5 s */
	ck_assert_int_eq(ts.tv_sec, 14);
	ck_assert_int_eq(ts.tv_nsec, 400000000L);
	core_timespec_add_ns(&ts, 0);
	ck_assert_int_eq(ts.tv_sec, 14);
	ck_assert_int_eq(ts.tv_nsec, 400000000L);
	ts.tv_nsec = 999999999L;
	core_timespec_add_ns(&ts, 999999999LL); /* the most a single carry can make */
	ck_assert_int_eq(ts.tv_sec, 15);
	ck_assert_int_eq(ts.tv_nsec, 999999998L);
}
END_TEST

/* The fast path of core_time_format (years 1970..9999) writes what gmtime_r and snprintf
 * write: every day boundary of leap years and centuries around the edges, and a walk of odd
 * strides across the whole range. */
static void time_gmtime(int64_t ms, char *out)
{
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;

	ck_assert_ptr_nonnull(gmtime_r(&secs, &tm));
	snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

START_TEST(test_time_format_fast_matches_gmtime)
{
	static const int64_t edges[] = {
		0, 1, 999, 1000, 86399999, 86400000, 951782399999LL, 951782400000LL,
		951868800000LL, 4107542399999LL, 4107542400000LL, 4107628800000LL,
		253402300799999LL, 1764670000123LL, 68256000000LL, 978307199999LL,
	};
	char want[64], buf[CORE_TIME_BUF];
	int64_t ms;
	size_t i;

	for (i = 0; i < sizeof edges / sizeof edges[0]; i++) {
		time_gmtime(edges[i], want);
		ck_assert_str_eq(core_time_format(edges[i], buf), want);
	}
	for (ms = 0; ms < 253402300800000LL; ms += 86399937LL * 97 + 13) {
		time_gmtime(ms, want);
		ck_assert_msg(strcmp(core_time_format(ms, buf), want) == 0, "%lld: %s, want %s",
			      (long long)ms, buf, want);
	}
	/* The same second again and again (the thread keeps its last one), the next ones, and
	 * back and forth across a day's and a leap year's last second. */
	for (ms = 1764670000000LL; ms < 1764670003000LL; ms += 7) {
		time_gmtime(ms, want);
		ck_assert_str_eq(core_time_format(ms, buf), want);
	}
	{
		static const int64_t hops[] = {86399999, 86400000, 86399000, 86400999, 86399998,
					       951868799999LL, 951868800001LL, 951868799000LL};

		for (i = 0; i < sizeof hops / sizeof hops[0]; i++) {
			time_gmtime(hops[i], want);
			ck_assert_str_eq(core_time_format(hops[i], buf), want);
		}
	}
	ck_assert_str_eq(core_time_format(253402300800000LL, buf), "10000-01-01T00:00:00.000Z");
}
END_TEST

START_TEST(test_rc_codes)
{
	int i;

	for (i = 0; i < CORE_RC_COUNT_; i++)
		ck_assert_ptr_nonnull(core_rc_code((enum core_rc)i));
	ck_assert_str_eq(core_rc_code(CORE_ERR_CLAIM_CONFLICT), "claim_conflict");
	ck_assert(core_rc_is_transition_rejected(CORE_ERR_TERMINAL_STATE_EXIT));
	ck_assert(!core_rc_is_transition_rejected(CORE_ERR_STATE_CONFLICT));
}
END_TEST

/* ---- board ---- */

START_TEST(test_default_board)
{
	char detail[128];

	ck_assert_int_eq(board.n_cols, 9);
	ck_assert(core_board_is_terminal(&board, "done"));
	ck_assert(core_board_is_terminal(&board, "blocked"));
	ck_assert(core_board_is_working(&board, "in_progress"));
	ck_assert(!core_board_is_working(&board, "nope"));
	ck_assert(core_board_is_eligible(&board, "ready"));
	ck_assert(core_board_is_eligible(&board, "in_progress"));
	ck_assert(!core_board_is_eligible(&board, "review"));
	ck_assert_str_eq(core_board_first_eligible(&board), "ready");
	ck_assert_str_eq(board.cols[0].name, "inbox");
	ck_assert_int_eq(core_board_validate(&board, detail, sizeof(detail)), CORE_OK);
}
END_TEST

START_TEST(test_board_validate_rejects)
{
	struct core_board b;
	char detail[128] = "";

	ck_assert_int_eq(core_board_copy(&b, &board), CORE_OK);
	ck_assert_int_eq(core_str_set(&b.completed, "review"), CORE_OK);
	ck_assert_int_eq(core_board_validate(&b, detail, sizeof(detail)), CORE_ERR_BAD_REQUEST);
	ck_assert(strstr(detail, "completed") != NULL);
	core_board_release(&b);

	ck_assert_int_eq(core_board_copy(&b, &board), CORE_OK);
	ck_assert_int_eq(core_str_set(&b.cols[1].name, "inbox"), CORE_OK);
	ck_assert_int_eq(core_board_validate(&b, detail, sizeof(detail)), CORE_ERR_BAD_REQUEST);
	ck_assert(strstr(detail, "duplicate") != NULL);
	core_board_release(&b);
}
END_TEST

START_TEST(test_board_rename_column)
{
	struct core_board b = {0};

	ck_assert_int_eq(core_board_rename_column(&board, "done", "shipped", &b), CORE_OK);
	ck_assert_str_eq(b.cols[7].name, "shipped");
	ck_assert(b.cols[7].terminal);
	ck_assert_str_eq(b.completed, "shipped");
	ck_assert_str_eq(b.failed, "blocked");
	ck_assert_ptr_null(core_board_column(&b, "done"));
	ck_assert_int_eq(core_board_validate(&b, NULL, 0), CORE_OK);
	ck_assert_str_eq(board.completed, "done"); /* the source is untouched */
	core_board_release(&b);
}
END_TEST

START_TEST(test_gave_up_set)
{
	struct core_card *c = card_in("c1", "in_progress");
	struct core_gave_up g = {.set = true, .reason = (char *)"run_pruned",
				 .run_id = (char *)"r1"};

	ck_assert_int_eq(core_card_gave_up_set(c, &g, NOW), CORE_OK);
	ck_assert(c->gave_up.set);
	ck_assert_str_eq(c->gave_up.reason, "run_pruned");
	ck_assert_str_eq(c->gave_up.run_id, "r1");
	ck_assert_ptr_null(c->gave_up.state);
	ck_assert_int_eq(c->gave_up.at, NOW); /* stamped now when it had no time */
	ck_assert_int_eq(c->updated_at, NOW);
	g.at = 5;
	ck_assert_int_eq(core_card_gave_up_set(c, &g, NOW + 1), CORE_OK);
	ck_assert_int_eq(c->gave_up.at, 5);
	/* Its state must be a column of the card's board (a clear or no state: nothing to
	 * check). */
	g.state = (char *)"in_progress";
	ck_assert_int_eq(core_gave_up_check(&board, &g), CORE_OK);
	g.state = (char *)"nowhere";
	ck_assert_int_eq(core_gave_up_check(&board, &g), CORE_ERR_TRANSITION_REJECTED);
	g.state = NULL;
	ck_assert_int_eq(core_gave_up_check(&board, &g), CORE_OK);
	ck_assert_int_eq(core_gave_up_check(&board, NULL), CORE_OK);
	ck_assert_int_eq(core_card_gave_up_set(c, NULL, NOW + 2), CORE_OK);
	ck_assert(!c->gave_up.set);
	ck_assert_ptr_null(c->gave_up.reason);
	core_card_free(c);
}
END_TEST

/* ---- claims ---- */

START_TEST(test_claim_fresh_advances_epoch)
{
	struct core_card *c = card_in("c1", "ready");
	bool fresh = false;

	c->claim_epoch = 4;
	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh), CORE_OK);
	ck_assert(fresh);
	ck_assert_int_eq(c->claim_epoch, 5);
	ck_assert(c->claim.present);
	ck_assert_str_eq(c->claim.marker, "w1");
	ck_assert_int_eq(c->claim.claimed_at, NOW);
	ck_assert_int_eq(c->claim.lease_until, NOW + LEASE);
	core_card_free(c);
}
END_TEST

START_TEST(test_claim_epoch_floor)
{
	struct core_card *c = card_in("c1", "ready");
	bool fresh = false;

	c->claim_epoch = 4;
	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, NOW, &fresh), CORE_OK);
	ck_assert_int_eq(c->claim_epoch, NOW);
	core_claim_clear(c);
	/* previous + 1 wins once it is above the floor */
	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, NOW - 5, &fresh), CORE_OK);
	ck_assert_int_eq(c->claim_epoch, NOW + 1);
	core_card_free(c);
}
END_TEST

START_TEST(test_claim_same_marker_is_idempotent)
{
	struct core_card *c = card_in("c1", "ready");
	bool fresh = true;

	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh), CORE_OK);
	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW + 500, 0, &fresh), CORE_OK);
	ck_assert(!fresh);
	ck_assert_int_eq(c->claim_epoch, 1);
	ck_assert_int_eq(c->claim.claimed_at, NOW);
	ck_assert_int_eq(c->claim.lease_until, NOW + 500 + LEASE);
	core_card_free(c);
}
END_TEST

START_TEST(test_claim_other_marker_conflicts_even_expired)
{
	struct core_card *c = card_in("c1", "ready");
	struct core_card *before;
	bool fresh;

	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh), CORE_OK);
	before = core_card_dup(c);
	ck_assert_int_eq(core_claim_acquire(c, &board, "w2", NULL, LEASE, NOW + 10 * LEASE, 0, &fresh),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert(core_card_equal(c, before));
	core_card_free(before);
	core_card_free(c);
}
END_TEST

START_TEST(test_claim_terminal_rejected)
{
	struct core_card *c = card_in("c1", "done");
	bool fresh;

	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh),
			 CORE_ERR_TRANSITION_REJECTED);
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, 0);
	core_card_free(c);
}
END_TEST

START_TEST(test_claim_missing_epoch_refuses_holder)
{
	struct core_card *c = card_in("c1", "ready");
	struct core_token t = {"w1", 1, NULL};
	bool fresh;

	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh), CORE_OK);
	c->has_epoch = false; /* a foreign writer dropped the field */
	ck_assert_int_eq(core_fence_check(c, &t), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(core_claim_renew(c, &t, LEASE, NOW), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(core_claim_release(c, &t), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh),
			 CORE_ERR_CLAIM_CONFLICT);
	core_card_free(c);
}
END_TEST

/* DESIGN §11: the holder, the lease a renew keeps, runs of a claim, last-run, final runs. */
START_TEST(test_fence_holder_and_runs)
{
	struct core_card *c = card_in("c1", "ready");
	struct core_token mine = {"w1", 1, "tok-a"}, theirs = {"w1", 1, "tok-b"},
			  none = {"w1", 1, NULL}, prev = {"w1", 1, NULL};
	struct core_run r = {.id = "r1", .card_id = "c1", .owner = "w1", .claim_epoch = 1};
	bool fresh;

	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", "tok-a", 5000, NOW, 0, &fresh),
			 CORE_OK);
	ck_assert_str_eq(c->claim.holder, "tok-a");
	ck_assert_int_eq(core_fence_check(c, &mine), CORE_OK);
	ck_assert_int_eq(core_fence_check(c, &theirs), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(core_fence_check(c, &none), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", "tok-b", 5000, NOW, 0, &fresh),
			 CORE_ERR_CLAIM_CONFLICT);
	/* lease_ms 0 keeps the claim's own */
	ck_assert_int_eq(core_claim_renew(c, &mine, 0, NOW + 100), CORE_OK);
	ck_assert_int_eq(c->claim.lease_ms, 5000);
	ck_assert_int_eq(c->claim.lease_until, NOW + 100 + 5000);
	/* runs of this claim, and last-run */
	ck_assert(core_run_of_claim(&r, c));
	ck_assert_int_eq(core_last_run_check(&r, "c1", &mine), CORE_OK);
	ck_assert_int_eq(core_last_run_check(&r, "c2", &mine), CORE_ERR_TRANSITION_REJECTED);
	ck_assert_int_eq(core_last_run_check(NULL, "c1", &mine), CORE_ERR_TRANSITION_REJECTED);
	r.claim_epoch = 0;
	ck_assert(!core_run_of_claim(&r, c));
	ck_assert_int_eq(core_last_run_check(&r, "c1", &mine), CORE_ERR_TRANSITION_REJECTED);
	r.claim_epoch = 1;
	/* the transfer asks (marker, epoch) only; the recovery claim is the server's own */
	ck_assert_int_eq(core_claim_transfer(c, &prev, "reaper:h", LEASE, NOW + 6000, 0), CORE_OK);
	ck_assert_str_eq(c->claim.holder, "reaper:h");
	ck_assert(!core_run_of_claim(&r, c)); /* w1's run is not the recovery claim's */
	ck_assert(!core_run_of_stripped_claim(&r, c)); /* an epoch to compare: not stripped */
	ck_assert(core_run_status_final("finished") && core_run_status_final("failed") &&
		  core_run_status_final("cancelled"));
	ck_assert(!core_run_status_final("failed_resumable") && !core_run_status_final("running"));
	core_card_free(c);
}
END_TEST

/* A claim stripped of its epoch by a foreign writer is judged by the run its marker made on
 * the card since it was claimed (core_run_of_stripped_claim). */
START_TEST(test_run_of_stripped_claim)
{
	struct core_card *c = card_in("c1", "ready");
	struct core_run r = {.id = "r1", .card_id = "c1", .owner = "w1", .claim_epoch = 1,
			     .created_at = NOW + 5};
	bool fresh;

	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh), CORE_OK);
	ck_assert(!core_run_of_stripped_claim(&r, c)); /* the epoch is there: not stripped */
	c->has_epoch = false;
	ck_assert(!core_run_of_claim(&r, c));
	ck_assert(core_run_of_stripped_claim(&r, c));
	r.created_at = NOW - 1; /* made before this claim: an earlier claim's */
	ck_assert(!core_run_of_stripped_claim(&r, c));
	c->claim.claimed_at = 0; /* stripped too: the marker and the card decide */
	ck_assert(core_run_of_stripped_claim(&r, c));
	r.owner = "w2";
	ck_assert(!core_run_of_stripped_claim(&r, c));
	r.owner = "w1";
	r.card_id = "c2";
	ck_assert(!core_run_of_stripped_claim(&r, c));
	core_card_free(c);
}
END_TEST

START_TEST(test_fence_and_renew_release)
{
	struct core_card *c = card_in("c1", "ready");
	struct core_token good = {"w1", 1, NULL}, stale = {"w1", 0, NULL}, other = {"w2", 1, NULL};
	bool fresh;

	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh), CORE_OK);
	ck_assert_int_eq(core_fence_check(c, &good), CORE_OK);
	ck_assert_int_eq(core_fence_check(c, &stale), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(core_fence_check(c, &other), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(core_claim_renew(c, &stale, LEASE, NOW + 1), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_int_eq(c->claim.lease_until, NOW + LEASE);
	ck_assert_int_eq(core_claim_renew(c, &good, 2 * LEASE, NOW + 1), CORE_OK);
	ck_assert_int_eq(c->claim.lease_until, NOW + 1 + 2 * LEASE);
	ck_assert_int_eq(core_claim_release(c, &other), CORE_ERR_CLAIM_CONFLICT);
	ck_assert(c->claim.present);
	ck_assert_int_eq(core_claim_release(c, &good), CORE_OK);
	ck_assert(!c->claim.present);
	ck_assert_ptr_null(c->claim.marker);
	ck_assert_int_eq(c->claim_epoch, 1); /* survives release */
	ck_assert_int_eq(core_fence_check(c, &good), CORE_ERR_CLAIM_CONFLICT);
	core_card_free(c);
}
END_TEST

/* core_fence_why: one case per row of CORE_FENCE_REASONS. */
START_TEST(test_fence_reasons)
{
	/* The claim is w1's, epoch 1, taken by token "tok-a". */
	static const struct {
		const char *marker;
		int64_t epoch;
		const char *holder;
		bool claimed, has_epoch;
		enum core_fence_reason want;
		const char *name;
	} rows[] = {
		{"w1", 1, "tok-a", true, true, CORE_FENCE_OK, "ok"},
		{"w1", 1, "tok-a", false, true, CORE_FENCE_UNCLAIMED, "unclaimed"},
		{"w1", 1, "tok-a", true, false, CORE_FENCE_UNCLAIMED, "unclaimed"},
		{"w2", 1, "tok-a", true, true, CORE_FENCE_MARKER, "marker"},
		{"w1", 0, "tok-a", true, true, CORE_FENCE_EPOCH, "epoch"},
		{"w1", 1, "tok-b", true, true, CORE_FENCE_HOLDER, "holder"},
		{"w1", 1, NULL, true, true, CORE_FENCE_HOLDER, "holder"},
	};
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		struct core_card *c = card_in("c1", "ready");
		struct core_token t = {rows[i].marker, rows[i].epoch, rows[i].holder};
		bool fresh;

		if (rows[i].claimed)
			ck_assert_int_eq(core_claim_acquire(c, &board, "w1", "tok-a", LEASE, NOW, 0,
							    &fresh),
					 CORE_OK);
		c->has_epoch = rows[i].has_epoch;
		ck_assert_int_eq(core_fence_why(c, &t), rows[i].want);
		ck_assert_str_eq(core_fence_reason_name(core_fence_why(c, &t)), rows[i].name);
		ck_assert_int_eq(core_fence_check(c, &t) == CORE_OK, rows[i].want == CORE_FENCE_OK);
		core_card_free(c);
	}
	{
		struct core_card *c = card_in("c2", "ready");

		ck_assert_int_eq(core_fence_why(c, NULL), CORE_FENCE_UNCLAIMED);
		core_card_free(c);
	}
}
END_TEST

START_TEST(test_transfer_cas)
{
	struct core_card *c = card_in("c1", "in_progress");
	struct core_token prev = {"w1", 1, NULL}, wrong = {"w1", 2, NULL};
	bool fresh;

	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh), CORE_OK);
	/* live lease: refused */
	ck_assert_int_eq(core_claim_transfer(c, &prev, "reaper:h", LEASE, NOW + 10, 0),
			 CORE_ERR_CLAIM_CONFLICT);
	/* wrong previous token: refused */
	ck_assert_int_eq(core_claim_transfer(c, &wrong, "reaper:h", LEASE, NOW + 2 * LEASE, 0),
			 CORE_ERR_CLAIM_CONFLICT);
	ck_assert_str_eq(c->claim.marker, "w1");
	ck_assert_int_eq(core_claim_transfer(c, &prev, "reaper:h", LEASE, NOW + 2 * LEASE, 0),
			 CORE_OK);
	ck_assert_str_eq(c->claim.marker, "reaper:h");
	ck_assert_int_eq(c->claim_epoch, 2);
	ck_assert_int_eq(c->claim.claimed_at, NOW + 2 * LEASE);
	/* the zombie's token no longer fences anything */
	ck_assert_int_eq(core_fence_check(c, &prev), CORE_ERR_CLAIM_CONFLICT);
	core_card_free(c);
}
END_TEST

START_TEST(test_claim_expired)
{
	struct core_card *c = card_in("c1", "ready");
	bool fresh;

	ck_assert(!core_claim_expired(c, NOW));
	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh), CORE_OK);
	ck_assert(!core_claim_expired(c, NOW + LEASE));
	ck_assert(core_claim_expired(c, NOW + LEASE + 1));
	c->claim.has_lease = false; /* legacy claims are never reaped by time */
	ck_assert(!core_claim_expired(c, NOW + 100 * LEASE));
	core_card_free(c);
}
END_TEST

/* ---- workflow ---- */

static const struct {
	const char *from, *to;
	enum core_mover by;
	enum core_rc want;
} transitions[] = {
	{"inbox", "ready", CORE_MOVER_BOT, CORE_OK},
	{"in_progress", "done", CORE_MOVER_OWNER, CORE_OK},
	{"in_progress", "blocked", CORE_MOVER_BOT, CORE_OK},
	/* terminal -> terminal: the operator's refiling only (ADR-096 §5 over DESIGN §4) */
	{"done", "blocked", CORE_MOVER_OPERATOR, CORE_OK},
	{"blocked", "done", CORE_MOVER_OPERATOR, CORE_OK},
	{"done", "blocked", CORE_MOVER_BOT, CORE_ERR_TERMINAL_STATE_EXIT},
	{"blocked", "done", CORE_MOVER_OWNER, CORE_ERR_TERMINAL_STATE_EXIT},
	/* the column the card is in: no move, nothing to refuse */
	{"done", "done", CORE_MOVER_BOT, CORE_OK},
	{"blocked", "blocked", CORE_MOVER_OWNER, CORE_OK},
	{"done", "ready", CORE_MOVER_OPERATOR, CORE_ERR_TERMINAL_STATE_EXIT},
	{"blocked", "in_progress", CORE_MOVER_BOT, CORE_ERR_TERMINAL_STATE_EXIT},
	{"ready", "nowhere", CORE_MOVER_OPERATOR, CORE_ERR_TRANSITION_REJECTED},
	{"done", "nowhere", CORE_MOVER_BOT, CORE_ERR_TRANSITION_REJECTED},
};

START_TEST(test_transition_table)
{
	ck_assert_int_eq(core_transition_check(&board, transitions[_i].from, transitions[_i].to,
					       transitions[_i].by),
			 transitions[_i].want);
}
END_TEST

START_TEST(test_state_from_cas)
{
	struct core_card *c = card_in("c1", "ready");

	ck_assert_int_eq(core_state_from_check(c, "ready"), CORE_OK);
	ck_assert_int_eq(core_state_from_check(c, "backlog"), CORE_ERR_STATE_CONFLICT);
	ck_assert_int_eq(core_state_from_check(c, NULL), CORE_OK);
	core_card_free(c);
}
END_TEST

START_TEST(test_reopen_rules)
{
	struct core_card *done = card_in("c1", "done"), *blocked = card_in("c2", "blocked");
	struct core_card *open = card_in("c3", "review");

	ck_assert_int_eq(core_reopen_check(&board, done, "ready", 0), CORE_OK);
	ck_assert_int_eq(core_reopen_check(&board, done, "ready", 1),
			 CORE_ERR_DEPENDENTS_OUTSTANDING);
	/* only leaving the completed column is guarded by dependents */
	ck_assert_int_eq(core_reopen_check(&board, blocked, "ready", 3), CORE_OK);
	ck_assert_int_eq(core_reopen_check(&board, done, "blocked", 0),
			 CORE_ERR_TRANSITION_REJECTED);
	ck_assert_int_eq(core_reopen_check(&board, done, "nowhere", 0),
			 CORE_ERR_TRANSITION_REJECTED);
	ck_assert_int_eq(core_reopen_check(&board, open, "ready", 0),
			 CORE_ERR_TRANSITION_REJECTED);
	core_card_free(done);
	core_card_free(blocked);
	core_card_free(open);
}
END_TEST

START_TEST(test_state_write)
{
	struct core_card *c = card_in("c1", "ready");

	ck_assert_int_eq(core_card_state_write(c, "in_progress", "started", NOW), CORE_OK);
	ck_assert_str_eq(c->state, "in_progress");
	ck_assert_str_eq(c->state_reason, "started");
	ck_assert_int_eq(c->state_at, NOW);
	ck_assert_int_eq(core_card_state_write(c, "review", NULL, NOW + 1), CORE_OK);
	ck_assert_ptr_null(c->state_reason);
	core_card_free(c);
}
END_TEST

START_TEST(test_machine_reasons)
{
	ck_assert(core_is_machine_reason("watchdog"));
	ck_assert(core_is_machine_reason("state_rename"));
	ck_assert(core_is_machine_reason("state_delete"));
	ck_assert(core_is_machine_reason("migration"));
	ck_assert(!core_is_machine_reason("unblocked"));
	ck_assert(!core_is_machine_reason("run_finished"));
	ck_assert(!core_is_machine_reason("run_failed"));
	ck_assert(!core_is_machine_reason(NULL));
}
END_TEST

/* A tiny in-test card graph for the blocker rules. */
struct graph {
	struct core_card **cards;
	size_t n;
};

static const char *graph_state(void *ctx, const char *id, const struct core_strv **bl)
{
	struct graph *g = ctx;
	size_t i;

	for (i = 0; i < g->n; i++) {
		if (strcmp(g->cards[i]->id, id) == 0) {
			if (bl)
				*bl = &g->cards[i]->blockers;
			return g->cards[i]->state;
		}
	}
	return NULL;
}

START_TEST(test_blockers)
{
	struct core_card *a = card_in("a", "done"), *b = card_in("b", "ready"),
			 *c = card_in("c", "waiting_deps");
	struct core_card *all[] = {a, b, c};
	struct graph g = {all, 3};
	struct core_card_lookup lk = {graph_state, &g};
	struct core_strv bl = {0};
	char detail[128];

	/* c waits on b */
	ck_assert_int_eq(core_strv_push(&c->blockers, "b"), CORE_OK);
	ck_assert_int_eq(core_strv_push(&bl, "a"), CORE_OK);
	ck_assert_int_eq(core_blockers_check("new", &bl, &lk, detail, sizeof(detail)), CORE_OK);
	ck_assert(core_blockers_all_done(&board, &bl, &lk));
	ck_assert_int_eq(core_strv_push(&bl, "b"), CORE_OK);
	ck_assert(!core_blockers_all_done(&board, &bl, &lk));
	core_strv_release(&bl);

	/* self */
	ck_assert_int_eq(core_strv_push(&bl, "b"), CORE_OK);
	ck_assert_int_eq(core_blockers_check("b", &bl, &lk, detail, sizeof(detail)),
			 CORE_ERR_TRANSITION_REJECTED);
	core_strv_release(&bl);
	/* cycle: b blocks on c, but c already blocks on b */
	ck_assert_int_eq(core_strv_push(&bl, "c"), CORE_OK);
	ck_assert_int_eq(core_blockers_check("b", &bl, &lk, detail, sizeof(detail)),
			 CORE_ERR_TRANSITION_REJECTED);
	ck_assert(strstr(detail, "cycle") != NULL);
	core_strv_release(&bl);
	/* unknown */
	ck_assert_int_eq(core_strv_push(&bl, "zzz"), CORE_OK);
	ck_assert_int_eq(core_blockers_check("b", &bl, &lk, detail, sizeof(detail)),
			 CORE_ERR_TRANSITION_REJECTED);
	core_strv_release(&bl);
	/* malformed */
	ck_assert_int_eq(core_strv_push(&bl, "not an id"), CORE_OK);
	ck_assert_int_eq(core_blockers_check("b", &bl, &lk, detail, sizeof(detail)),
			 CORE_ERR_BAD_REQUEST);
	core_strv_release(&bl);
	ck_assert(core_blockers_all_done(&board, NULL, &lk));
	core_card_free(a);
	core_card_free(b);
	core_card_free(c);
}
END_TEST

/* ---- labels ---- */

static void strv_of(struct core_strv *sv, const char *const *items)
{
	for (; *items; items++)
		ck_assert_int_eq(core_strv_push(sv, *items), CORE_OK);
}

START_TEST(test_labels_set_and_adjust)
{
	struct core_card *c = card_in("c1", "ready");
	struct core_strv set = {0}, add = {0}, rm = {0}, bad = {0};
	bool changed = false;
	size_t i;

	strv_of(&set, (const char *const[]){"b", "a", "b", "c", NULL});
	ck_assert_int_eq(core_labels_set(c, &set, &changed), CORE_OK);
	ck_assert(changed);
	ck_assert_int_eq(c->labels.n, 3);
	ck_assert_str_eq(c->labels.v[0], "b");
	ck_assert_str_eq(c->labels.v[1], "a");
	ck_assert_str_eq(c->labels.v[2], "c");
	ck_assert_int_eq(core_labels_set(c, &set, &changed), CORE_OK);
	ck_assert(!changed);

	strv_of(&add, (const char *const[]){"a", "d", NULL});
	strv_of(&rm, (const char *const[]){"b", "zz", NULL});
	ck_assert_int_eq(core_labels_adjust(c, &add, &rm, &changed), CORE_OK);
	ck_assert(changed);
	ck_assert_int_eq(c->labels.n, 3);
	ck_assert_str_eq(c->labels.v[0], "a");
	ck_assert_str_eq(c->labels.v[1], "c");
	ck_assert_str_eq(c->labels.v[2], "d");

	strv_of(&bad, (const char *const[]){"ok", "not ok", NULL});
	ck_assert_int_eq(core_labels_set(c, &bad, &changed), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(core_labels_adjust(c, &bad, NULL, &changed), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(c->labels.n, 3);
	core_strv_release(&set);
	for (i = 0; i <= CORE_LABELS_MAX; i++) {
		char l[16];
		snprintf(l, sizeof(l), "l%zu", i);
		ck_assert_int_eq(core_strv_push(&set, l), CORE_OK);
	}
	ck_assert_int_eq(core_labels_set(c, &set, &changed), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(c->labels.n, 3);
	core_strv_release(&set);
	core_strv_release(&add);
	core_strv_release(&rm);
	core_strv_release(&bad);
	core_card_free(c);
}
END_TEST

static const struct {
	const char *const *labels, *const *from;
	const char *to;
	const char *const *want;
	bool changed;
} transform_cases[] = {
	/* rename keeps the position */
	{(const char *const[]){"a", "b", "c", NULL}, (const char *const[]){"b", NULL}, "x",
	 (const char *const[]){"a", "x", "c", NULL}, true},
	/* merge: the first hit takes the place, the others go */
	{(const char *const[]){"a", "b", "c", NULL}, (const char *const[]){"c", "a", NULL}, "m",
	 (const char *const[]){"m", "b", NULL}, true},
	/* target already present: it keeps its own place, sources go */
	{(const char *const[]){"x", "b", NULL}, (const char *const[]){"b", NULL}, "x",
	 (const char *const[]){"x", NULL}, true},
	{(const char *const[]){"b", "x", NULL}, (const char *const[]){"b", NULL}, "x",
	 (const char *const[]){"x", NULL}, true},
	/* delete */
	{(const char *const[]){"a", "b", NULL}, (const char *const[]){"a", NULL}, NULL,
	 (const char *const[]){"b", NULL}, true},
	/* no hit: unchanged */
	{(const char *const[]){"a", NULL}, (const char *const[]){"z", NULL}, "y",
	 (const char *const[]){"a", NULL}, false},
	/* the target among the sources stays: a rename onto itself changes nothing */
	{(const char *const[]){"x", "a", NULL}, (const char *const[]){"a", NULL}, "a",
	 (const char *const[]){"x", "a", NULL}, false},
	/* a merge into one of its sources keeps it in its place, the others go */
	{(const char *const[]){"b", "c", "a", NULL}, (const char *const[]){"a", "b", NULL}, "a",
	 (const char *const[]){"c", "a", NULL}, true},
	{(const char *const[]){"b", "c", NULL}, (const char *const[]){"a", "b", NULL}, "a",
	 (const char *const[]){"a", "c", NULL}, true},
};

START_TEST(test_labels_transform)
{
	struct core_card *c = card_in("c1", "ready");
	struct core_strv from = {0};
	bool changed = !transform_cases[_i].changed;
	size_t k;

	strv_of(&c->labels, transform_cases[_i].labels);
	strv_of(&from, transform_cases[_i].from);
	ck_assert_int_eq(core_labels_transform(c, &from, transform_cases[_i].to, &changed),
			 CORE_OK);
	ck_assert(changed == transform_cases[_i].changed);
	for (k = 0; transform_cases[_i].want[k]; k++) {
		ck_assert_uint_lt(k, c->labels.n);
		ck_assert_str_eq(c->labels.v[k], transform_cases[_i].want[k]);
	}
	ck_assert_uint_eq(k, c->labels.n);
	core_strv_release(&from);
	ck_assert_int_eq(core_strv_push(&from, "bad label"), CORE_OK);
	ck_assert_int_eq(core_labels_transform(c, &from, "x", &changed), CORE_ERR_BAD_REQUEST);
	core_strv_release(&from);
	core_card_free(c);
}
END_TEST

/* ---- events ---- */

START_TEST(test_events)
{
	struct core_event e, copy;
	int i;

	for (i = 0; i < CORE_EV_COUNT_; i++)
		ck_assert_int_eq(core_event_type_parse(core_event_type_name((enum core_event_type)i)),
				 i);
	ck_assert_int_eq(core_event_type_parse("nope"), -1);
	ck_assert_int_eq(core_event_init(&e, CORE_EV_CARD_STATE_CHANGED, "default", "c1", "ops",
					 "watchdog", NOW, strdup("{}")),
			 CORE_OK);
	ck_assert(e.machine);
	ck_assert_str_eq(e.actor, ""); /* machine events blank the actor */
	ck_assert_int_eq(core_event_copy(&copy, &e), CORE_OK);
	ck_assert_str_eq(copy.payload, "{}");
	core_event_release(&copy);
	core_event_release(&e);
	ck_assert_int_eq(core_event_init(&e, CORE_EV_CARD_UNBLOCKED, "default", "c1", "ops",
					 "unblocked", NOW, NULL),
			 CORE_OK);
	ck_assert(!e.machine);
	ck_assert_str_eq(e.actor, "ops");
	core_event_release(&e);
}
END_TEST

/* Which listeners a batch of events may have news for. */
START_TEST(test_events_touched)
{
	struct core_event ev[CORE_TOUCHED_MAX + 2];
	const char *const ab[] = {"a", "b", NULL}, *const cd[] = {"c", "d", NULL};
	struct core_touched t;
	char name[CORE_TOUCHED_MAX + 2][8];
	size_t i;

	memset(ev, 0, sizeof ev);
	core_touched_of(&t, ev, 0);
	ck_assert(!t.all && t.n == 0);
	ck_assert(!core_touched_any(&t, NULL, NULL)); /* nothing new: nobody */
	ck_assert(!core_touched_any(&t, "a", NULL));
	for (i = 0; i < 3; i++)
		ev[i].board = i == 1 ? "b" : "c"; /* c, b, c */
	core_touched_of(&t, ev, 3);
	ck_assert(!t.all);
	ck_assert_uint_eq(t.n, 2);
	ck_assert(core_touched_any(&t, "b", NULL) && core_touched_any(&t, "c", NULL));
	ck_assert(!core_touched_any(&t, "a", NULL));
	ck_assert(!core_touched_any(&t, "bb", NULL));
	ck_assert(core_touched_any(&t, NULL, ab)); /* b */
	ck_assert(core_touched_any(&t, NULL, cd));
	ck_assert(core_touched_any(&t, NULL, NULL)); /* every board */
	ck_assert(!core_touched_any(&t, "a", cd)); /* the one board asked for wins */
	ev[1].board = NULL; /* an event with no board: everyone may have news */
	core_touched_of(&t, ev, 3);
	ck_assert(t.all && core_touched_any(&t, "a", NULL));
	for (i = 0; i < CORE_TOUCHED_MAX + 2; i++) {
		snprintf(name[i], sizeof name[i], "b%zu", i);
		ev[i].board = name[i];
	}
	core_touched_of(&t, ev, CORE_TOUCHED_MAX);
	ck_assert(!t.all && t.n == CORE_TOUCHED_MAX);
	ck_assert(!core_touched_any(&t, "a", NULL));
	core_touched_of(&t, ev, CORE_TOUCHED_MAX + 1); /* one more than fits: everyone */
	ck_assert(t.all && core_touched_any(&t, "a", NULL));
}
END_TEST

/* ---- card copy/equality ---- */

START_TEST(test_card_dup_equal)
{
	struct core_card *c = card_in("c1", "ready"), *d;
	bool fresh;

	ck_assert_int_eq(core_strv_push(&c->labels, "x"), CORE_OK);
	c->comments = calloc(1, sizeof(*c->comments));
	c->n_comments = 1;
	c->comments[0].id = strdup("cm-1");
	c->comments[0].author = strdup("bot");
	c->comments[0].body = strdup("hi");
	ck_assert_int_eq(core_claim_acquire(c, &board, "w1", NULL, LEASE, NOW, 0, &fresh), CORE_OK);
	d = core_card_dup(c);
	ck_assert_ptr_nonnull(d);
	ck_assert(core_card_equal(c, d));
	d->claim.lease_until++;
	ck_assert(!core_card_equal(c, d));
	core_card_free(d);
	core_card_free(c);
}
END_TEST

/* ---- runs ---- */

START_TEST(test_promote_if_orphaned)
{
	struct core_run r = {0};
	bool promoted = true;

	r.status = strdup("running");
	r.lock_until = NOW;
	core_run_promote_if_orphaned(&r, NOW, &promoted); /* lock still live at its edge */
	ck_assert(!promoted);
	ck_assert_str_eq(r.status, "running");
	core_run_promote_if_orphaned(&r, NOW + 1, &promoted);
	ck_assert(promoted);
	ck_assert_str_eq(r.status, CORE_RUN_FAILED_RESUMABLE);
	ck_assert_str_eq(r.failure_code, CORE_FAILURE_ORPHANED);
	core_run_release(&r);

	r.status = strdup("paused_operator");
	r.lock_until = 0;
	core_run_promote_if_orphaned(&r, NOW, &promoted);
	ck_assert(!promoted);
	core_run_release(&r);
	r.status = strdup("queued");
	r.lock_until = NOW - 1;
	core_run_promote_if_orphaned(&r, NOW, &promoted);
	ck_assert(promoted);
	core_run_release(&r);
	ck_assert(core_continuation_valid("retry_armed"));
	ck_assert(!core_continuation_valid("retry"));
}
END_TEST

/* ---- the decision table: one case per row and per precedence conflict ---- */

static const struct {
	const char *name;
	enum core_run_seen seen;
	const char *status, *continuation, *state;
	bool window;
	enum core_stuck_action want;
	const char *row;
	const char *reason;
	enum core_stuck_action want_transfer;
} stuck_cases[] = {
	/* one per row */
	{"unreadable", CORE_RUN_SEEN_UNREADABLE, NULL, NULL, "in_progress", false, CORE_STUCK_KEEP, "run_unreadable", NULL, CORE_STUCK_KEEP},
	{"stamp window", CORE_RUN_SEEN_NONE, NULL, NULL, "in_progress", true, CORE_STUCK_KEEP, "stamp_window_open", NULL, CORE_STUCK_KEEP},
	{"no run, window closed", CORE_RUN_SEEN_NONE, NULL, NULL, "in_progress", false, CORE_STUCK_RELEASE, "no_run", NULL, CORE_STUCK_RELEASE},
	{"no run, not running column", CORE_RUN_SEEN_NONE, NULL, NULL, "ready", true, CORE_STUCK_RELEASE, "no_run", NULL, CORE_STUCK_RELEASE},
	{"pruned", CORE_RUN_SEEN_GONE, NULL, NULL, "in_progress", true, CORE_STUCK_GIVE_UP, "run_pruned", "watchdog", CORE_STUCK_GIVE_UP},
	{"running", CORE_RUN_SEEN_LOADED, "running", NULL, "in_progress", false, CORE_STUCK_KEEP, "run_live", NULL, CORE_STUCK_KEEP},
	{"queued", CORE_RUN_SEEN_LOADED, "queued", NULL, "in_progress", false, CORE_STUCK_KEEP, "run_live", NULL, CORE_STUCK_KEEP},
	{"paused human", CORE_RUN_SEEN_LOADED, "paused_waiting_human", NULL, "in_progress", false, CORE_STUCK_KEEP, "run_paused", NULL, CORE_STUCK_KEEP},
	{"paused operator", CORE_RUN_SEEN_LOADED, "paused_operator", NULL, "in_progress", false, CORE_STUCK_KEEP, "run_paused", NULL, CORE_STUCK_KEEP},
	{"cancelled", CORE_RUN_SEEN_LOADED, "cancelled", NULL, "in_progress", false, CORE_STUCK_KEEP, "run_cancelled", NULL, CORE_STUCK_KEEP},
	{"redelivery", CORE_RUN_SEEN_LOADED, "failed_resumable", "redelivery_pending", "in_progress", false, CORE_STUCK_KEEP, "continuation_armed", NULL, CORE_STUCK_KEEP},
	{"retry armed", CORE_RUN_SEEN_LOADED, "failed", "retry_armed", "in_progress", false, CORE_STUCK_KEEP, "continuation_armed", NULL, CORE_STUCK_KEEP},
	{"finished", CORE_RUN_SEEN_LOADED, "finished", NULL, "in_progress", false, CORE_STUCK_COMPLETE, "run_finished", "run_finished", CORE_STUCK_COMPLETE},
	{"failed", CORE_RUN_SEEN_LOADED, "failed", NULL, "in_progress", false, CORE_STUCK_FAIL, "run_failed", "run_failed", CORE_STUCK_FAIL},
	{"resumable parked", CORE_RUN_SEEN_LOADED, "failed_resumable", NULL, "review", false, CORE_STUCK_KEEP, "parked_out_of_pool", NULL, CORE_STUCK_REPARK},
	{"resumable", CORE_RUN_SEEN_LOADED, "failed_resumable", NULL, "in_progress", false, CORE_STUCK_REPARK, "run_resumable", "watchdog", CORE_STUCK_REPARK},
	{"resumable in launch column", CORE_RUN_SEEN_LOADED, "failed_resumable", NULL, "ready", false, CORE_STUCK_REPARK, "run_resumable", "watchdog", CORE_STUCK_REPARK},
	{"unknown status", CORE_RUN_SEEN_LOADED, "exploded", NULL, "in_progress", false, CORE_STUCK_KEEP, "unknown_status", NULL, CORE_STUCK_KEEP},
	/* precedence conflicts */
	{"unreadable beats window", CORE_RUN_SEEN_UNREADABLE, NULL, NULL, "ready", false, CORE_STUCK_KEEP, "run_unreadable", NULL, CORE_STUCK_KEEP},
	{"pruned ignores window", CORE_RUN_SEEN_GONE, NULL, NULL, "in_progress", true, CORE_STUCK_GIVE_UP, "run_pruned", "watchdog", CORE_STUCK_GIVE_UP},
	{"running beats continuation", CORE_RUN_SEEN_LOADED, "running", "retry_armed", "in_progress", false, CORE_STUCK_KEEP, "run_live", NULL, CORE_STUCK_KEEP},
	{"cancelled beats continuation", CORE_RUN_SEEN_LOADED, "cancelled", "redelivery_pending", "in_progress", false, CORE_STUCK_KEEP, "run_cancelled", NULL, CORE_STUCK_KEEP},
	{"continuation beats finished", CORE_RUN_SEEN_LOADED, "finished", "retry_armed", "in_progress", false, CORE_STUCK_KEEP, "continuation_armed", NULL, CORE_STUCK_KEEP},
	{"final continuation does not keep", CORE_RUN_SEEN_LOADED, "finished", "final", "in_progress", false, CORE_STUCK_COMPLETE, "run_finished", "run_finished", CORE_STUCK_COMPLETE},
	{"finished parked still completes", CORE_RUN_SEEN_LOADED, "finished", NULL, "review", false, CORE_STUCK_COMPLETE, "run_finished", "run_finished", CORE_STUCK_COMPLETE},
	{"paused beats parked", CORE_RUN_SEEN_LOADED, "paused_operator", NULL, "review", false, CORE_STUCK_KEEP, "run_paused", NULL, CORE_STUCK_KEEP},
	{"window needs running column", CORE_RUN_SEEN_NONE, NULL, NULL, "review", true, CORE_STUCK_RELEASE, "no_run", NULL, CORE_STUCK_RELEASE},
};

START_TEST(test_stuck_table)
{
	struct core_run run = {0};
	struct core_stuck_input in = {0};
	struct core_stuck_decision d;

	run.id = (char *)"r1";
	run.status = (char *)stuck_cases[_i].status;
	run.continuation = (char *)stuck_cases[_i].continuation;
	in.seen = stuck_cases[_i].seen;
	in.run = in.seen == CORE_RUN_SEEN_LOADED ? &run : NULL;
	in.board = &board;
	in.state = stuck_cases[_i].state;
	in.stamp_window_open = stuck_cases[_i].window;
	d = core_decide_stuck_card(&in);
	ck_assert_msg(d.action == stuck_cases[_i].want, "%s: action %s", stuck_cases[_i].name,
		      core_stuck_action_name(d.action));
	ck_assert_str_eq(d.row, stuck_cases[_i].row);
	if (stuck_cases[_i].reason)
		ck_assert_str_eq(d.reason, stuck_cases[_i].reason);
	else
		ck_assert_ptr_null(d.reason);
	d = core_decide_transfer(&in);
	ck_assert_msg(d.action == stuck_cases[_i].want_transfer, "%s: transfer %s",
		      stuck_cases[_i].name, core_stuck_action_name(d.action));
}
END_TEST

START_TEST(test_stamp_window)
{
	ck_assert(core_stamp_window_open(NOW, LEASE, NOW + 2 * LEASE - 1));
	ck_assert(!core_stamp_window_open(NOW, LEASE, NOW + 2 * LEASE));
	ck_assert(!core_stamp_window_open(0, LEASE, NOW));
	ck_assert(!core_stamp_window_open(NOW, 0, NOW));
}
END_TEST

START_TEST(test_recovery_hold_expired)
{
	struct core_run run = {0};
	struct core_stuck_input in = {0};

	in.board = &board;
	in.state = "in_progress";
	in.seen = CORE_RUN_SEEN_NONE;
	ck_assert(core_recovery_hold_expired(&in, "reaper:h"));
	ck_assert(!core_recovery_hold_expired(&in, "worker-1"));
	in.stamp_window_open = true;
	ck_assert(!core_recovery_hold_expired(&in, "reaper:h"));
	in.seen = CORE_RUN_SEEN_UNREADABLE;
	ck_assert(!core_recovery_hold_expired(&in, "reaper:h"));
	in.seen = CORE_RUN_SEEN_LOADED;
	in.run = &run;
	run.status = (char *)"running";
	ck_assert(!core_recovery_hold_expired(&in, "reaper:h"));
	run.status = (char *)"cancelled";
	ck_assert(core_recovery_hold_expired(&in, "reaper:h"));
	in.seen = CORE_RUN_SEEN_GONE;
	in.run = NULL;
	ck_assert(core_recovery_hold_expired(&in, "reaper:h"));
}
END_TEST

static const struct {
	const char *state, *target;
	bool want;
} file_cases[] = {
	{"in_progress", "done", true},     /* still in the running column */
	{"ready", "done", true},           /* never moved off its launch column */
	{"review", "done", false},         /* somebody chose review */
	{"done", "done", false},           /* already there */
	{"blocked", "done", false},        /* an operator filed it */
	{"in_progress", "in_progress", false}, /* target = running: disabled */
	{"in_progress", "blocked", true},
};

START_TEST(test_should_file)
{
	ck_assert_int_eq(core_should_file_stuck_card(&board, file_cases[_i].state,
						     file_cases[_i].target),
			 file_cases[_i].want);
}
END_TEST

/* ---- core_claim_matches: one row per way the observed claim can differ ---- */

static const struct {
	const char *name;
	bool c_claimed, x_claimed;
	const char *c_marker, *x_marker;
	bool c_has_epoch, x_has_epoch;
	int64_t c_epoch, x_epoch;
	bool want;
} claim_match_cases[] = {
	{"same marker and epoch", true, true, "w1", "w1", true, true, 3, 3, true},
	{"same marker, both without epoch", true, true, "w1", "w1", false, false, 0, 7, true},
	{"epoch moved on", true, true, "w1", "w1", true, true, 4, 3, false},
	{"other marker", true, true, "w2", "w1", true, true, 3, 3, false},
	{"card lost its epoch", true, true, "w1", "w1", false, true, 3, 3, false},
	{"card gained an epoch", true, true, "w1", "w1", true, false, 3, 3, false},
	{"card released", false, true, NULL, "w1", true, true, 3, 3, false},
	{"nothing observed", true, false, "w1", NULL, true, true, 3, 3, false},
	{"observed claim without marker", true, true, "w1", NULL, true, true, 3, 3, false},
};

START_TEST(test_claim_matches)
{
	struct core_card *c = card_in("c1", "doing");
	struct core_card *x = card_in("c1", "doing");

	c->claim.present = claim_match_cases[_i].c_claimed;
	ck_assert_int_eq(core_str_set(&c->claim.marker, claim_match_cases[_i].c_marker), CORE_OK);
	c->has_epoch = claim_match_cases[_i].c_has_epoch;
	c->claim_epoch = claim_match_cases[_i].c_epoch;
	x->claim.present = claim_match_cases[_i].x_claimed;
	ck_assert_int_eq(core_str_set(&x->claim.marker, claim_match_cases[_i].x_marker), CORE_OK);
	x->has_epoch = claim_match_cases[_i].x_has_epoch;
	x->claim_epoch = claim_match_cases[_i].x_epoch;
	ck_assert_msg(core_claim_matches(c, x) == claim_match_cases[_i].want, "%s",
		      claim_match_cases[_i].name);
	core_card_free(c);
	core_card_free(x);
}
END_TEST

/* ---- core_scope_allows: one row per scope shape ---- */

static const char *const scope_ab[] = {"a", "b", NULL};
static const char *const scope_none[] = {NULL};

static const struct {
	const char *board, *one;
	const char *const *many;
	bool want;
} scope_cases[] = {
	{"a", NULL, NULL, true},        /* no scope: every board */
	{"a", "a", NULL, true},         /* the one board */
	{"b", "a", NULL, false},        /* another board */
	{"b", NULL, scope_ab, true},    /* listed */
	{"c", NULL, scope_ab, false},   /* not listed */
	{"a", NULL, scope_none, false}, /* an empty list allows none */
	{"a", "a", scope_ab, true},     /* both: the one board, and listed */
	{"a", "b", scope_ab, false},    /* listed, but not the one board */
	{"c", "c", scope_ab, false},    /* the one board, but not listed */
};

START_TEST(test_scope_allows)
{
	ck_assert_msg(core_scope_allows(scope_cases[_i].board, scope_cases[_i].one,
					scope_cases[_i].many) == scope_cases[_i].want,
		      "row %d", _i);
}
END_TEST


/* The one UTF-8 decoder (core_utf8_next): labels and run output both go through it. */
START_TEST(test_utf8_next)
{
	const unsigned char e_acute[] = "\xc3\xa9", euro[] = "\xe2\x82\xac",
			    clef[] = "\xf0\x9d\x84\x9e";
	uint32_t cp = 0;

	ck_assert_uint_eq(core_utf8_next((const unsigned char *)"a", 1, &cp), 1);
	ck_assert_uint_eq(cp, 'a');
	ck_assert_uint_eq(core_utf8_next(e_acute, 2, &cp), 2);
	ck_assert_uint_eq(cp, 0xe9);
	ck_assert_uint_eq(core_utf8_next(euro, SIZE_MAX, &cp), 3);
	ck_assert_uint_eq(cp, 0x20ac);
	ck_assert_uint_eq(core_utf8_next(clef, 4, &cp), 4);
	ck_assert_uint_eq(cp, 0x1d11e);
	/* Cut short by n (a tail trimmed mid-sequence), or by the string's NUL. */
	ck_assert_uint_eq(core_utf8_next(euro, 2, &cp), 0);
	ck_assert_uint_eq(core_utf8_next(e_acute, 0, &cp), 0);
	ck_assert_uint_eq(core_utf8_next((const unsigned char *)"\xe2\x82", SIZE_MAX, &cp), 0);
	/* Overlong, surrogate, past U+10FFFF, a lone continuation byte. */
	ck_assert_uint_eq(core_utf8_next((const unsigned char *)"\xc0\xaf", 2, &cp), 0);
	ck_assert_uint_eq(core_utf8_next((const unsigned char *)"\xe0\x80\xaf", 3, &cp), 0);
	ck_assert_uint_eq(core_utf8_next((const unsigned char *)"\xed\xa0\x80", 3, &cp), 0);
	ck_assert_uint_eq(core_utf8_next((const unsigned char *)"\xf4\x90\x80\x80", 4, &cp), 0);
	ck_assert_uint_eq(core_utf8_next((const unsigned char *)"\x80", 1, &cp), 0);
	/* A run's output refuses what a label refuses, and NUL too. */
	ck_assert(core_run_output_valid("h\xc3\xa9", 3));
	ck_assert(!core_run_output_valid("h\xc3", 2));
	ck_assert(!core_run_output_valid("a\0b", 3));
}
END_TEST

static Suite *core_suite(void)
{
	Suite *s = suite_create("core");
	TCase *tc = tcase_create("rules");

	tcase_add_checked_fixture(tc, board_setup, board_teardown);
	tcase_add_test(tc, test_ids_and_names);
	tcase_add_test(tc, test_labels_valid);
	tcase_add_test(tc, test_strv_equal);
	tcase_add_test(tc, test_time_roundtrip);
	tcase_add_test(tc, test_time_format_fast_matches_gmtime);
	tcase_add_test(tc, test_timespec_add_ns);
	tcase_add_test(tc, test_rc_codes);
	tcase_add_test(tc, test_default_board);
	tcase_add_test(tc, test_board_validate_rejects);
	tcase_add_test(tc, test_board_rename_column);
	tcase_add_test(tc, test_gave_up_set);
	tcase_add_test(tc, test_claim_fresh_advances_epoch);
	tcase_add_test(tc, test_claim_epoch_floor);
	tcase_add_test(tc, test_claim_same_marker_is_idempotent);
	tcase_add_test(tc, test_claim_other_marker_conflicts_even_expired);
	tcase_add_test(tc, test_claim_terminal_rejected);
	tcase_add_test(tc, test_claim_missing_epoch_refuses_holder);
	tcase_add_test(tc, test_fence_and_renew_release);
	tcase_add_test(tc, test_run_of_stripped_claim);
	tcase_add_test(tc, test_fence_holder_and_runs);
	tcase_add_test(tc, test_fence_reasons);
	tcase_add_test(tc, test_transfer_cas);
	tcase_add_test(tc, test_claim_expired);
	tcase_add_loop_test(tc, test_transition_table, 0,
			    (int)(sizeof(transitions) / sizeof(transitions[0])));
	tcase_add_test(tc, test_state_from_cas);
	tcase_add_test(tc, test_reopen_rules);
	tcase_add_test(tc, test_state_write);
	tcase_add_test(tc, test_machine_reasons);
	tcase_add_test(tc, test_blockers);
	tcase_add_test(tc, test_labels_set_and_adjust);
	tcase_add_loop_test(tc, test_labels_transform, 0,
			    (int)(sizeof(transform_cases) / sizeof(transform_cases[0])));
	tcase_add_test(tc, test_events);
	tcase_add_test(tc, test_events_touched);
	tcase_add_test(tc, test_utf8_next);
	tcase_add_test(tc, test_card_dup_equal);
	tcase_add_test(tc, test_promote_if_orphaned);
	tcase_add_loop_test(tc, test_stuck_table, 0,
			    (int)(sizeof(stuck_cases) / sizeof(stuck_cases[0])));
	tcase_add_test(tc, test_stamp_window);
	tcase_add_test(tc, test_recovery_hold_expired);
	tcase_add_loop_test(tc, test_should_file, 0,
			    (int)(sizeof(file_cases) / sizeof(file_cases[0])));
	tcase_add_loop_test(tc, test_claim_matches, 0,
			    (int)(sizeof(claim_match_cases) / sizeof(claim_match_cases[0])));
	tcase_add_loop_test(tc, test_scope_allows, 0,
			    (int)(sizeof(scope_cases) / sizeof(scope_cases[0])));
	suite_add_tcase(s, tc);
	suite_add_tcase(s, test_core_effect_tcase());
	suite_add_tcase(s, test_core_attention_tcase());
	suite_add_tcase(s, test_core_breaker_tcase());
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(core_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
