/* core attention (DESIGN §15): one case per reason and per clearing rule. */
#include "core/core.h"
#include "tests/core/test_core.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1764670000000LL
#define R(x) (1u << CORE_ATTN_##x)

/* Which claim the recorded run was created under, against the card's claim_epoch (7). */
enum run_of {
	THIS,    /* epoch 7, owner w1: the card's current claim (or, unclaimed, its last one) */
	EARLIER, /* epoch 6, owner w0: a claim before the card's current (or last) one */
	FOREIGN, /* epoch 7 but owner w9: not this claim's run either */
};

/* One row per case: the card (claim marker or NULL, lease relative to NOW, awaiting input,
 * gave_up stamp age relative to the card's state_at), its column, the recorded run's status
 * (NULL: none), age relative to state_at and claim, whether the run is the recorded one, and
 * the expected reasons. */
static const struct attn_case {
	const char *name;
	const char *marker;
	int64_t lease_rel; /* lease_until - NOW */
	bool awaiting;
	bool gave_up;
	int64_t stamp_rel; /* gave_up.at - state_at */
	bool terminal;
	const char *run_status;
	int64_t run_rel;   /* run.updated_at - state_at */
	enum run_of of;
	bool other_run;    /* the run is not last_run_id */
	unsigned want;
	bool candidate;
} cases[] = {
	{"nothing", NULL, 0, false, false, 0, false, NULL, 0, THIS, false, 0, false},
	{"live claim", "w1", 60000, false, false, 0, false, "running", 0, THIS, false, 0, false},
	{"expired claim kept", "w1", -1, false, false, 0, false, "running", 0, THIS, false,
	 R(LEASE_EXPIRED_KEPT), false},
	{"lease ends now: not yet expired", "w1", 0, false, false, 0, false, NULL, 0, THIS, false,
	 0, false},
	{"recovery hold", "reaper:h1", 60000, false, false, 0, false, NULL, 0, THIS, false,
	 R(RECOVERY_HOLD), false},
	{"recovery hold, expired", "reaper:h2", -5, false, false, 0, false, NULL, 0, THIS,
	 false, R(RECOVERY_HOLD), false},
	{"awaiting input", NULL, 0, true, false, 0, false, NULL, 0, THIS, false,
	 R(AWAITING_INPUT), true},
	{"gave up in the failed column", NULL, 0, false, true, -10, true, NULL, 0, THIS, false,
	 R(GAVE_UP), true},
	{"gave up, stamped after its last move", NULL, 0, false, true, 5, false, NULL, 0, THIS,
	 false, R(GAVE_UP), true},
	{"gave up, reopened since", NULL, 0, false, true, -10, false, NULL, 0, THIS, false, 0,
	 true},
	{"run failed, filed", NULL, 0, false, false, 0, true, "failed", -10, THIS, false,
	 R(RUN_FAILED), true},
	{"run failed in place", "w1", 60000, false, false, 0, false, "failed", 3, THIS, false,
	 R(RUN_FAILED), true},
	{"run failed in place, released", NULL, 0, false, false, 0, false, "failed", 3, THIS,
	 false, R(RUN_FAILED), true},
	{"run failed, re-queued since", NULL, 0, false, false, 0, false, "failed", -3, THIS,
	 false, 0, true},
	/* Unclaimed, the last recorded run stands, whichever claim recorded it. */
	{"an earlier claim's failed run, unclaimed, not moved", NULL, 0, false, false, 0, false,
	 "failed", 3, EARLIER, false, R(RUN_FAILED), true},
	/* Claimed again: the new claim is the answer to the old failure. */
	{"failed run of an earlier claim, claimed again", "w1", 60000, false, false, 0, false,
	 "failed", 3, EARLIER, false, 0, false},
	{"failed run of an earlier claim, new lease expired", "w1", -1, false, false, 0, true,
	 "failed", -10, EARLIER, false, R(LEASE_EXPIRED_KEPT), false},
	{"failed run of the same epoch, another owner", "w1", 60000, false, false, 0, false,
	 "failed", 3, FOREIGN, false, 0, false},
	{"failed_resumable is the reaper's", NULL, 0, false, false, 0, true, "failed_resumable",
	 0, THIS, false, 0, false},
	{"paused for a human", "w1", 60000, false, false, 0, false, "paused_waiting_human", -100,
	 THIS, false, R(RUN_PAUSED), true},
	{"paused by an operator", "w1", 60000, false, false, 0, false, "paused_operator", 0,
	 THIS, false, R(RUN_PAUSED), true},
	{"paused, its holder died (the reaper keeps it)", "w1", -1, false, false, 0, false,
	 "paused_operator", 0, THIS, false, R(LEASE_EXPIRED_KEPT) | R(RUN_PAUSED), true},
	/* The claim was the brake: released, revoked or reopened, the paused run holds nothing. */
	{"paused, its claim revoked", NULL, 0, false, false, 0, false, "paused_waiting_human", 3,
	 THIS, false, 0, false},
	{"paused run of an earlier claim, unclaimed", NULL, 0, false, false, 0, false,
	 "paused_operator", 3, EARLIER, false, 0, false},
	{"paused run of an earlier claim, claimed again", "w1", 60000, false, false, 0, false,
	 "paused_waiting_human", 3, EARLIER, false, 0, false},
	{"paused run of an earlier claim, new lease expired", "w1", -1, false, false, 0, false,
	 "paused_waiting_human", 3, EARLIER, false, R(LEASE_EXPIRED_KEPT), false},
	{"recovery hold over a paused run", "reaper:h1", 60000, false, false, 0, false,
	 "paused_waiting_human", 3, EARLIER, false, R(RECOVERY_HOLD), false},
	{"recovery hold over a failed run", "reaper:h1", 60000, false, false, 0, false, "failed",
	 3, EARLIER, false, R(RECOVERY_HOLD), false},
	{"a run that is not the recorded one", NULL, 0, false, false, 0, true, "failed", 0, THIS,
	 true, 0, false},
	{"everything at once", "w1", -1, true, true, 0, true, "failed", 0, THIS, false,
	 R(GAVE_UP) | R(RUN_FAILED) | R(LEASE_EXPIRED_KEPT) | R(AWAITING_INPUT), true},
};

START_TEST(test_attention_table)
{
	const struct attn_case *k = &cases[_i];
	struct core_card c = {0};
	struct core_run run = {0};
	int64_t state_at = NOW - 1000;

	c.id = "c1";
	c.state_at = state_at;
	c.awaiting_input = k->awaiting;
	c.has_epoch = true;
	c.claim_epoch = 7;
	if (k->marker) {
		c.claim.present = true;
		c.claim.marker = (char *)k->marker;
		c.claim.has_lease = true;
		c.claim.lease_until = NOW + k->lease_rel;
	}
	if (k->gave_up) {
		c.gave_up.set = true;
		c.gave_up.reason = "run_pruned";
		c.gave_up.at = state_at + k->stamp_rel;
	}
	if (k->run_status) {
		c.last_run_id = "r1";
		run.id = k->other_run ? "r0" : "r1";
		run.card_id = "c1";
		run.status = (char *)k->run_status;
		run.updated_at = state_at + k->run_rel;
		run.claim_epoch = k->of == EARLIER ? 6 : 7;
		run.owner = k->of == EARLIER ? "w0" : k->of == FOREIGN ? "w9" : "w1";
	}
	ck_assert_msg(core_attention_reasons(&c, k->terminal, k->run_status ? &run : NULL, NOW) ==
			      k->want,
		      "%s: reasons %#x, want %#x", k->name,
		      core_attention_reasons(&c, k->terminal, k->run_status ? &run : NULL, NOW),
		      k->want);
	ck_assert_msg(core_attention_candidate(&c, k->run_status ? &run : NULL) == k->candidate,
		      "%s: candidate", k->name);
	/* Every reason a candidate can have without the clock makes it a candidate. */
	if (k->want & (R(GAVE_UP) | R(RUN_FAILED) | R(AWAITING_INPUT) | R(RUN_PAUSED)))
		ck_assert(core_attention_candidate(&c, k->run_status ? &run : NULL));
}
END_TEST

START_TEST(test_attention_names)
{
	int i;

	for (i = 0; i < CORE_ATTN_COUNT_; i++) {
		ck_assert_ptr_nonnull(core_attention_reason_name(i));
		ck_assert_str_ne(core_attention_reason_name(i), "unknown");
		ck_assert_str_ne(core_attention_reason_doc(i), "");
	}
	ck_assert_str_eq(core_attention_reason_name(CORE_ATTN_RECOVERY_HOLD), "recovery_hold");
	ck_assert_str_eq(core_attention_reason_name(CORE_ATTN_COUNT_), "unknown");
}
END_TEST

TCase *test_core_attention_tcase(void)
{
	TCase *tc = tcase_create("attention");

	tcase_add_loop_test(tc, test_attention_table, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_test(tc, test_attention_names);
	return tc;
}
