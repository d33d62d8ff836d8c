/* The breaker's rules (core_breaker_*): a script of steps, one row each, run in order on one
 * breaker; each row says what the call returns and what the breaker says afterwards. */
#include "core/core.h"
#include "tests/core/test_core.h"

#include <check.h>
#include <stddef.h>

enum step_op { FAIL, BEGIN, END_OK, END_FAIL, REACHED };

struct step {
	enum step_op op;
	uint64_t gen;     /* FAIL: the generation the call began in */
	int64_t now;      /* ms */
	bool ret;         /* what the call returns */
	bool open;        /* afterwards */
	int64_t wait;     /* core_breaker_probe_wait at `now` afterwards */
};

static const struct step script[] = {
	/* closed: nothing to probe; a failure opens it, once; the first probe is due at once */
	{BEGIN, 0, 0, false, false, -1},
	{FAIL, 0, 10, true, true, 0},
	{FAIL, 0, 11, false, true, 0},
	/* one probe at a time */
	{BEGIN, 0, 12, true, true, -1},
	{BEGIN, 0, 12, false, true, -1},
	/* failed probes back off 250, 500, 1000, 2000, 2000 ms */
	{END_FAIL, 0, 20, false, true, 250},
	{BEGIN, 0, 269, false, true, 1},
	{BEGIN, 0, 270, true, true, -1},
	{END_FAIL, 0, 270, false, true, 500},
	{BEGIN, 0, 770, true, true, -1},
	{END_FAIL, 0, 770, false, true, 1000},
	{BEGIN, 0, 1770, true, true, -1},
	{END_FAIL, 0, 1770, false, true, 2000},
	{BEGIN, 0, 3770, true, true, -1},
	{END_FAIL, 0, 3770, false, true, 2000},
	/* a probe that reaches the database closes it: generation 1 */
	{BEGIN, 0, 5770, true, true, -1},
	{END_OK, 0, 5800, true, false, -1},
	/* a call that began before the close (generation 0) failing late opens nothing */
	{FAIL, 0, 35000, false, false, -1},
	/* one of generation 1 does; the back-off starts over */
	{FAIL, 1, 36000, true, true, 0},
	{BEGIN, 0, 36000, true, true, -1},
	{END_FAIL, 0, 36001, false, true, 250},
	/* other evidence closes it (generation 2); a probe ending after that changes nothing */
	{BEGIN, 0, 36251, true, true, -1},
	{REACHED, 0, 36260, true, false, -1},
	{END_FAIL, 0, 36270, false, false, -1},
	{REACHED, 0, 36280, false, false, -1},
	/* a probe started for one opening does not close the next one (which waits for it:
	 * one probe at a time) */
	{FAIL, 2, 40000, true, true, 0},
	{BEGIN, 0, 40000, true, true, -1},
	{REACHED, 0, 40001, true, false, -1},
	{FAIL, 3, 40002, true, true, -1},
	{END_OK, 0, 40003, false, true, 0},
	{BEGIN, 0, 40003, true, true, -1},
	{END_OK, 0, 40004, true, false, -1},
};

START_TEST(test_breaker_script)
{
	struct core_breaker b;
	size_t i;

	core_breaker_init(&b, 0);
	for (i = 0; i < sizeof(script) / sizeof(script[0]); i++) {
		const struct step *s = &script[i];
		bool ret = false;

		switch (s->op) {
		case FAIL:
			ret = core_breaker_fail(&b, s->gen, s->now);
			break;
		case BEGIN:
			ret = core_breaker_probe_begin(&b, s->now);
			break;
		case END_OK:
			ret = core_breaker_probe_end(&b, true, s->now);
			break;
		case END_FAIL:
			ret = core_breaker_probe_end(&b, false, s->now);
			break;
		case REACHED:
			ret = core_breaker_reached(&b, s->now);
			break;
		}
		ck_assert_msg(ret == s->ret, "step %zu: returned %d", i, ret);
		ck_assert_msg(b.open == s->open, "step %zu: open %d", i, b.open);
		ck_assert_msg(core_breaker_probe_wait(&b, s->now) == s->wait,
			      "step %zu: wait %lld", i, (long long)core_breaker_probe_wait(&b, s->now));
	}
	ck_assert_uint_eq(b.opens, 4);
	ck_assert_uint_eq(b.gen, 4);
}
END_TEST

TCase *test_core_breaker_tcase(void)
{
	TCase *tc = tcase_create("breaker");

	tcase_add_test(tc, test_breaker_script);
	return tc;
}
