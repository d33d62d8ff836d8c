/* Conformance cases found by the HTTP differential test (tests/parity/parity.py), which
 * replays one seeded sequence of requests against a boardd on each twin and compares the
 * answers: each case pins, on both twins, the behaviour the twin that was wrong now has. */
#include "tests/store/conformance.h"

#include <string.h>

/* GET /v1/boards listed the FS twin's boards in the order they were made, the Mongo twin's
 * by name (_id). Both list by name now. */
START_TEST(boards_listed_by_name)
{
	struct store *st = ct_open();
	const char *const names[] = {"team", "alpha", "Zed"};
	const char *const want[] = {"Zed", "alpha", "default", "team"};
	struct core_board b = {0}, *all = NULL;
	size_t n = 0, i;

	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(core_board_init_default(&b, names[i]), CORE_OK);
		ck_assert_int_eq(store_board_put(st, &b, &ct_op), CORE_OK);
		core_board_release(&b);
	}
	ck_assert_int_eq(store_board_list(st, &all, &n), CORE_OK);
	ck_assert_uint_eq(n, 4);
	for (i = 0; i < n; i++)
		ck_assert_str_eq(all[i].name, want[i]);
	store_boards_free(all, n);
	ct_close(st);
}
END_TEST

void conformance_add_parity(Suite *s)
{
	TCase *tc = tcase_create("parity");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, boards_listed_by_name);
	suite_add_tcase(s, tc);
}
