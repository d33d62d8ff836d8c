/* The hot answers written as text (api/answer_json.c) are byte for byte what json_dumps wrote
 * of the json_pack trees their handlers built before. */
#include "api/api_answer.h"
#include "tests/api/api_test.h"
#include "tests/common/card_fixture.h"

#include <stdlib.h>
#include <string.h>

/* api_renew_json_text writes what json_dumps wrote of renew's json_pack tree. */
START_TEST(renew_text_equals_the_tree)
{
	static const char *const markers[] = {"w-1", "q\"uote\\back/slash~", "a", ""};
	struct core_card *c = fixture_full_card();
	char lu[CORE_TIME_BUF];
	size_t i, len = 0;

	for (i = 0; i < sizeof markers / sizeof markers[0]; i++) {
		json_t *j = json_pack("{s:s, s:I, s:s, s:I}", "marker", markers[i], "epoch",
				      (json_int_t)c->claim_epoch, "lease_until",
				      core_time_format(c->claim.lease_until, lu), "lease_ms",
				      (json_int_t)c->claim.lease_ms);
		char *want = json_dumps(j, JSON_COMPACT);
		char *got = api_renew_json_text(c, markers[i], &len);

		ck_assert_ptr_nonnull(got);
		ck_assert_str_eq(got, want);
		ck_assert_uint_eq(len, strlen(want));
		free(got);
		free(want);
		json_decref(j);
	}
	core_card_free(c);
}
END_TEST

/* api_claim_json_text writes what the handlers' json_pack trees wrote, byte for byte:
 * the token alone (claim) and {card, token} (claim-next). */
static void same_claim_text(const struct core_card *c, const struct core_token *t, bool fresh)
{
	const struct core_claim *cl = &c->claim;
	char ca[CORE_TIME_BUF], lu[CORE_TIME_BUF], *want_tok, *want_next, *got_tok, *got_next;
	json_t *tok = json_pack("{s:s, s:I, s:s, s:s, s:I, s:I, s:b}", "marker", t->marker,
				"epoch", (json_int_t)t->epoch, "claimed_at",
				core_time_format(cl->claimed_at, ca), "lease_until",
				core_time_format(cl->lease_until, lu), "lease_ms",
				(json_int_t)cl->lease_ms, "renew_after_ms",
				(json_int_t)(cl->lease_ms / 3), "fresh", fresh);
	json_t *next = json_pack("{s:o, s:O}", "card", store_card_to_json(c), "token", tok);
	size_t len = 0;

	ck_assert_ptr_nonnull(tok);
	ck_assert_ptr_nonnull(next);
	want_tok = json_dumps(tok, JSON_COMPACT);
	want_next = json_dumps(next, JSON_COMPACT);
	got_tok = api_claim_json_text(c, t, fresh, false, &len);
	ck_assert_ptr_nonnull(got_tok);
	ck_assert_str_eq(got_tok, want_tok);
	ck_assert_uint_eq(len, strlen(want_tok));
	got_next = api_claim_json_text(c, t, fresh, true, &len);
	ck_assert_ptr_nonnull(got_next);
	ck_assert_str_eq(got_next, want_next);
	ck_assert_uint_eq(len, strlen(want_next));
	free(got_tok);
	free(got_next);
	free(want_tok);
	free(want_next);
	json_decref(tok);
	json_decref(next);
}

START_TEST(claim_text_equals_the_tree)
{
	struct core_card *c = fixture_full_card();
	struct core_token t = {.marker = c->claim.marker, .epoch = c->claim_epoch};
	struct core_token odd = {.marker = "w \"1\" \xc3\xa9", .epoch = 0};

	same_claim_text(c, &t, true);
	same_claim_text(c, &t, false);
	same_claim_text(c, &odd, true);
	/* a marker that is not UTF-8 is refused, as json_pack refused it */
	odd.marker = "bad \xc3";
	{
		size_t len = 0;
		char *got = api_claim_json_text(c, &odd, true, true, &len);

		ck_assert_ptr_null(got);
	}
	core_card_free(c);
}
END_TEST

TCase *api_tcase_answer_text(void)
{
	TCase *tc = tcase_create("answer_text");

	tcase_add_test(tc, renew_text_equals_the_tree);
	tcase_add_test(tc, claim_text_equals_the_tree);
	return tc;
}
