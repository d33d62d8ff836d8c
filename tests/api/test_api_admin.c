/* The admin routes over HTTP: label sweeps (rename, merge, delete) and the column rename. */
#include "tests/api/api_test.h"

#include <stdlib.h>
#include <string.h>

static void labels_are(const char *id, const char *want_json)
{
	char path[64];
	json_t *c, *want = json_loads(want_json, 0, NULL);

	snprintf(path, sizeof path, "/v1/cards/%s", id);
	c = t_must(200, "GET", path, OP, NULL, NULL);
	ck_assert_msg(json_equal(json_object_get(c, "labels"), want), "%s labels differ", id);
	json_decref(c);
	json_decref(want);
}

START_TEST(label_sweeps_over_http)
{
	json_t *j;

	free(t_card_new("{\"id\":\"a\",\"labels\":[\"bug\",\"p1\"]}"));
	free(t_card_new("{\"id\":\"b\",\"labels\":[\"bug\"]}"));
	t_board_new("other");
	free(t_card_new("{\"id\":\"o\",\"board\":\"other\",\"labels\":[\"bug\"]}"));

	/* scoped to one board by the body */
	j = t_must(200, "POST", "/v1/labels/rename", OP, NULL,
		   "{\"board\":\"default\",\"from\":\"bug\",\"to\":\"defect\"}");
	ck_assert_int_eq(t_int(j, "touched"), 2);
	json_decref(j);
	labels_are("a", "[\"defect\",\"p1\"]");
	labels_are("o", "[\"bug\"]");

	j = t_must(200, "POST", "/v1/labels/merge", OP, NULL,
		   "{\"from\":[\"defect\",\"bug\"],\"to\":\"issue\"}");
	ck_assert_int_eq(t_int(j, "touched"), 3);
	json_decref(j);
	labels_are("a", "[\"issue\",\"p1\"]");
	labels_are("o", "[\"issue\"]");

	j = t_must(200, "DELETE", "/v1/labels/issue?board=other", OP, NULL, NULL);
	ck_assert_int_eq(t_int(j, "touched"), 1);
	json_decref(j);
	labels_are("o", "[]");
	labels_are("b", "[\"issue\"]");

	/* the scoped operator only sweeps its own board */
	t_board_new(HARNESS_SCOPED_BOARD);
	free(t_card_new("{\"id\":\"s\",\"board\":\"scoped\",\"labels\":[\"issue\"]}"));
	j = t_must(200, "DELETE", "/v1/labels/issue", SCOPED, NULL, NULL);
	ck_assert_int_eq(t_int(j, "touched"), 1);
	json_decref(j);
	labels_are("b", "[\"issue\"]");
	t_problem(403, "forbidden", "DELETE", "/v1/labels/issue?board=default", SCOPED, NULL, NULL);

	/* bad input changes nothing */
	t_problem(400, "bad_request", "POST", "/v1/labels/rename", OP, NULL,
		  "{\"from\":\"issue\",\"to\":\"a b\"}");
	t_problem(400, "bad_request", "POST", "/v1/labels/rename", OP, NULL, "{\"from\":\"issue\"}");
	t_problem(400, "bad_request", "POST", "/v1/labels/merge", OP, NULL,
		  "{\"from\":[],\"to\":\"x\"}");
	t_problem(400, "bad_request", "POST", "/v1/labels/merge", OP, NULL,
		  "{\"from\":\"issue\",\"to\":\"x\"}");
	t_problem(400, "bad_request", "DELETE", "/v1/labels/a%2Cb", OP, NULL, NULL);
	labels_are("b", "[\"issue\"]");
}
END_TEST

/* A sweep onto one of its own sources keeps that label: rename onto itself touches nothing,
 * a merge into one of its sources keeps it and drops the others (it once dropped them all). */
START_TEST(label_sweep_onto_itself_keeps_the_label)
{
	json_t *j;

	free(t_card_new("{\"id\":\"s1\",\"labels\":[\"x\",\"keep\"]}"));
	free(t_card_new("{\"id\":\"s2\",\"labels\":[\"old\",\"keep\"]}"));
	j = t_must(200, "POST", "/v1/labels/rename", OP, NULL, "{\"from\":\"keep\",\"to\":\"keep\"}");
	ck_assert_int_eq(t_int(j, "touched"), 0);
	json_decref(j);
	labels_are("s1", "[\"x\",\"keep\"]");
	j = t_must(200, "POST", "/v1/labels/merge", OP, NULL,
		   "{\"from\":[\"keep\",\"old\"],\"to\":\"keep\"}");
	ck_assert_int_eq(t_int(j, "touched"), 1);
	json_decref(j);
	labels_are("s1", "[\"x\",\"keep\"]");
	labels_are("s2", "[\"keep\"]");
}
END_TEST

START_TEST(column_rename_over_http)
{
	json_t *j, *ev, *list;
	long long epoch, next;
	size_t i, machine = 0;
	char *raw;

	free(t_card_new("{\"id\":\"r1\",\"state\":\"review\"}"));
	free(t_card_new("{\"id\":\"r2\",\"state\":\"ready\"}"));
	epoch = t_claim("r2", "w-1");
	j = t_must(200, "GET", "/v1/events?limit=1000", OP, NULL, NULL);
	next = t_int(j, "next");
	json_decref(j);

	j = t_must(200, "POST", "/v1/boards/default/columns/review/rename", OP, NULL,
		   "{\"to\":\"qa\"}");
	ck_assert_int_eq(t_int(j, "touched"), 1);
	ck_assert_ptr_nonnull(json_object_get(j, "board"));
	json_decref(j);
	j = t_must(200, "GET", "/v1/cards/r1", OP, NULL, NULL);
	ck_assert_str_eq(t_str(j, "state"), "qa");
	ck_assert_str_eq(t_str(j, "state_reason"), "state_rename");
	json_decref(j);

	/* the launch column: the claimed card moves, its claim untouched */
	raw = t_card_raw("r2");
	j = t_must(200, "POST", "/v1/boards/default/columns/ready/rename", OP, NULL,
		   "{\"to\":\"todo\"}");
	json_decref(j);
	j = t_must(200, "GET", "/v1/cards/r2", OP, NULL, NULL);
	ck_assert_str_eq(t_str(j, "state"), "todo");
	ck_assert_int_eq(t_int(j, "claim_epoch"), epoch);
	ck_assert_str_eq(t_str(json_object_get(j, "claim"), "marker"), "w-1");
	json_decref(j);
	free(raw);

	/* machine events: actor blank */
	{
		char path[64];
		snprintf(path, sizeof path, "/v1/events?after=%lld&limit=1000", next);
		ev = t_must(200, "GET", path, OP, NULL, NULL);
	}
	list = json_object_get(ev, "events");
	for (i = 0; i < json_array_size(list); i++) {
		json_t *e = json_array_get(list, i);
		if (strcmp(t_str(e, "type"), "card_state_changed") != 0)
			continue;
		ck_assert(json_is_true(json_object_get(e, "machine")));
		ck_assert_str_eq(t_str(e, "actor"), "");
		machine++;
	}
	ck_assert_uint_eq(machine, 2);
	json_decref(ev);

	t_problem(409, "already_exists", "POST", "/v1/boards/default/columns/qa/rename", OP, NULL,
		  "{\"to\":\"backlog\"}");
	t_problem(404, "not_found", "POST", "/v1/boards/ghost/columns/qa/rename", OP, NULL,
		  "{\"to\":\"x\"}");
	t_problem(400, "bad_request", "POST", "/v1/boards/default/columns/qa/rename", OP, NULL,
		  "{\"to\":\"no spaces\"}");
	t_problem(403, "forbidden", "POST", "/v1/boards/default/columns/qa/rename", SCOPED, NULL,
		  "{\"to\":\"x\"}");
}
END_TEST

TCase *api_tcase_admin(void)
{
	TCase *tc = tcase_create("admin");

	tcase_add_checked_fixture(tc, t_setup, t_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, label_sweeps_over_http);
	tcase_add_test(tc, label_sweep_onto_itself_keeps_the_label);
	tcase_add_test(tc, column_rename_over_http);
	return tc;
}
