/* The store suite: the JSON codec, the wrappers' argument checks, and the conformance body
 * run against the FS twin (a fresh data directory per test). */
#include "tests/store/conformance.h"
#include "tests/common/card_fixture.h"
#include "tests/store/fs_fixture.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static void roundtrip(const struct core_card *c)
{
	json_t *j = store_card_to_json(c);
	struct core_card *back = NULL;

	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(store_card_from_json(j, &back), CORE_OK);
	ck_assert(core_card_equal(c, back));
	core_card_free(back);
	json_decref(j);
}

START_TEST(codec_card_shape_and_roundtrip)
{
	struct core_card *c = fixture_full_card();
	json_t *j = store_card_to_json(c), *cl;
	static const char *const keys[] = {
		"id", "board", "title", "body", "state", "priority", "labels", "blockers", "comments", "claim",
		"claim_epoch", "last_run_id", "awaiting_input", "gave_up", "state_reason",
		"created_at", "updated_at", "state_at", "not_before", "attempts"};
	size_t i;

	ck_assert_uint_eq(json_object_size(j), sizeof(keys) / sizeof(keys[0]));
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		ck_assert_msg(json_object_get(j, keys[i]) != NULL, "missing %s", keys[i]);
	ck_assert_str_eq(json_string_value(json_object_get(j, "created_at")),
			 "2026-05-28T20:26:40.001Z");
	cl = json_object_get(j, "claim");
	ck_assert_int_eq(json_integer_value(json_object_get(cl, "epoch")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(cl, "lease_ms")), 60000);
	ck_assert(json_is_null(json_object_get(json_object_get(j, "gave_up"), "state")));
	json_decref(j);
	roundtrip(c);

	/* A legacy claim with no lease: lease fields are null, and survive as absent. */
	c->claim.has_lease = false;
	c->claim.lease_until = 0;
	c->claim.lease_ms = 0;
	j = store_card_to_json(c);
	cl = json_object_get(j, "claim");
	ck_assert(json_is_null(json_object_get(cl, "lease_until")));
	ck_assert(json_is_null(json_object_get(cl, "lease_ms")));
	json_decref(j);
	roundtrip(c);
	/* A stripped epoch serialises as null and reads back as missing. */
	c->has_epoch = false;
	c->claim_epoch = 0;
	j = store_card_to_json(c);
	ck_assert(json_is_null(json_object_get(j, "claim_epoch")));
	json_decref(j);
	roundtrip(c);
	/* Unclaimed, nothing optional set. */
	core_claim_clear(c);
	free(c->last_run_id);
	c->last_run_id = NULL;
	j = store_card_to_json(c);
	ck_assert(json_is_null(json_object_get(j, "claim")));
	ck_assert(json_is_null(json_object_get(j, "last_run_id")));
	json_decref(j);
	roundtrip(c);
	core_card_free(c);
}
END_TEST

/* store_card_json_text writes what json_dumps of the tree writes, byte for byte. */
static void same_text(const struct core_card *c)
{
	json_t *j = store_card_to_json(c);
	char *want = j ? json_dumps(j, JSON_COMPACT) : NULL, *got;
	size_t len = 0;

	got = store_card_json_text(c, &len);
	if (!want) {
		ck_assert_msg(got == NULL, "the tree refused the card, the text did not: %s", got);
	} else {
		ck_assert_ptr_nonnull(got);
		ck_assert_str_eq(got, want);
		ck_assert_uint_eq(len, strlen(want));
	}
	free(got);
	free(want);
	json_decref(j);
}

START_TEST(codec_card_text_equals_the_tree)
{
	static const char *const strings[] = {
		"",
		"plain",
		"quote \" backslash \\ slash / ",
		"\b\f\n\r\t\x01\x1f\x7f end",
		"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe2\x80\xa8",
		"bad \xc3",         /* truncated sequence: refused by both */
		"bad \xed\xa0\x80", /* a surrogate: refused by both */
		"bad \xc0\xaf",     /* overlong: refused by both */
		"bad \xf4\x90\x80\x80", /* past U+10FFFF */
	};
	struct core_card *c = fixture_full_card();
	size_t i;

	same_text(c);
	for (i = 0; i < sizeof strings / sizeof strings[0]; i++) {
		core_str_set(&c->title, strings[i]);
		same_text(c);
		core_str_set(&c->title, "t");
		core_str_set(&c->comments[0].body, strings[i]);
		same_text(c);
		core_str_set(&c->comments[0].body, "b");
		core_strv_push(&c->labels, strings[i]);
		same_text(c);
		core_strv_release(&c->labels);
	}
	/* every byte value, alone and between plain bytes: escaped, kept or refused as jansson
	 * does (the text judges a byte by a table) */
	for (i = 1; i < 256; i++) {
		char one[2] = {(char)i, 0}, mid[4] = {'a', (char)i, 'b', 0};

		core_str_set(&c->title, one);
		same_text(c);
		core_str_set(&c->title, mid);
		same_text(c);
	}
	/* and at every place of a longer string (read eight bytes at a time) */
	for (i = 1; i < 256; i++) {
		char longer[21];
		size_t at;

		for (at = 0; at < 20; at++) {
			memset(longer, 'x', 20);
			longer[20] = '\0';
			longer[at] = (char)i;
			core_str_set(&c->title, longer);
			same_text(c);
		}
	}
	core_str_set(&c->title, "t");
	/* integers at their bounds (the text writes its own digits) */
	{
		static const int32_t prios[] = {0, -1, 9, 10, -10, INT32_MIN, INT32_MAX};
		size_t k;

		for (k = 0; k < sizeof prios / sizeof prios[0]; k++) {
			c->priority = prios[k];
			same_text(c);
		}
		c->claim_epoch = INT64_MAX;
		c->claim.lease_ms = INT64_MAX;
		same_text(c);
		c->claim_epoch = 0;
		c->claim.lease_ms = 1;
		same_text(c);
	}
	/* every optional part absent or null */
	c->has_epoch = false;
	same_text(c);
	c->claim.has_lease = false;
	same_text(c);
	free(c->gave_up.run_id);
	c->gave_up.run_id = NULL;
	core_str_set(&c->gave_up.state, "review");
	same_text(c);
	c->gave_up.set = false;
	c->claim.present = false;
	free(c->last_run_id);
	c->last_run_id = NULL;
	free(c->state_reason);
	c->state_reason = NULL;
	core_strv_release(&c->blockers);
	c->awaiting_input = false;
	same_text(c);
	core_card_free(c);
	c = core_card_new();
	ck_assert_ptr_nonnull(c);
	same_text(c); /* a card with nothing set */
	core_card_free(c);
}
END_TEST

/* store_json_text writes what json_dumps(JSON_COMPACT) writes, for random trees of every kind
 * (reals, NULs inside strings and keys, and deep nesting take json_dumps's own path). */
static uint64_t tree_rng = 88172645463325252ull;

static unsigned tree_pick(unsigned n)
{
	tree_rng ^= tree_rng << 13;
	tree_rng ^= tree_rng >> 7;
	tree_rng ^= tree_rng << 17;
	return (unsigned)(tree_rng % n);
}

static json_t *tree_random(unsigned depth)
{
	static const char *const strs[] = {
		"", "a", "plain text", "quote \" and \\ backslash", "\b\f\n\r\t\x01\x1f\x7f",
		"/slash", "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe2\x80\xa8", "k\xc3\xa9y",
		/* a byte to escape in the last one to seven, after a whole word or alone */
		"abcdefgh\"", "abcdefghij\n", "ab\\", "abcdefghi\xc3\xa9", "0123456789abcd\x01",
		"seven77", "a\"cdefghijklm",
	};
	static const json_int_t ints[] = {0, 1, -1, 42, -42, 1000000007, INT64_MAX, INT64_MIN};
	unsigned kind = tree_pick(depth > 4 ? 7 : 9);
	json_t *j, *v;
	unsigned i, n;

	switch (kind) {
	case 0: return json_string(strs[tree_pick(sizeof strs / sizeof strs[0])]);
	case 1: return json_integer(ints[tree_pick(sizeof ints / sizeof ints[0])]);
	case 2: return json_true();
	case 3: return json_false();
	case 4: return json_null();
	case 5: return tree_pick(8) ? json_string("x") : json_real(0.5 * tree_pick(100));
	case 6: return tree_pick(16) ? json_string("y") : json_stringn("nul\0inside", 10);
	case 7:
		j = json_array();
		n = tree_pick(4);
		for (i = 0; i < n; i++)
			json_array_append_new(j, tree_random(depth + 1));
		return j;
	default:
		j = json_object();
		n = tree_pick(5);
		for (i = 0; i < n; i++) {
			v = tree_random(depth + 1);
			if (tree_pick(32) == 0)
				json_object_setn_new(j, "k\0nul", 5, v);
			else
				json_object_set_new(j, strs[tree_pick(sizeof strs / sizeof strs[0])], v);
		}
		return j;
	}
}

static void tree_same(json_t *j)
{
	char *want = json_dumps(j, JSON_COMPACT), *got;
	size_t len = 0;

	got = store_json_text(j, &len);
	ck_assert_ptr_nonnull(want);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	ck_assert_uint_eq(len, strlen(want));
	free(got);
	free(want);
}

START_TEST(codec_json_text_equals_json_dumps)
{
	json_t *j, *deep;
	size_t len = 99;
	unsigned i;

	for (i = 0; i < 3000; i++) {
		j = json_object();
		json_object_set_new(j, "v", tree_random(0));
		if (i % 2)
			json_object_set_new(j, "w", tree_random(0));
		tree_same(j);
		json_decref(j);
		j = json_array();
		json_array_append_new(j, tree_random(1));
		tree_same(j);
		json_decref(j);
	}
	/* empty containers, and what json_dumps itself refuses (a bare scalar) */
	j = json_object();
	tree_same(j);
	json_decref(j);
	j = json_array();
	tree_same(j);
	json_decref(j);
	j = json_integer(1);
	ck_assert_ptr_null(store_json_text(j, &len));
	json_decref(j);
	ck_assert_ptr_null(store_json_text(NULL, &len));
	/* deeper than the walker goes: json_dumps writes it */
	deep = json_array();
	j = deep;
	for (i = 0; i < 100; i++) {
		json_t *in = json_array();

		json_array_append_new(j, in);
		j = in;
	}
	json_array_append_new(j, json_string("bottom"));
	tree_same(deep);
	json_decref(deep);
	/* past the walker's first buffer (it moves to the heap while writing) */
	{
		char big[3000];

		memset(big, 'z', sizeof big - 1);
		big[sizeof big - 1] = '\0';
		j = json_pack("{sss[ss]}", "a", "b", "big", big, "\n");
		tree_same(j);
		json_decref(j);
	}
	/* the members builder (the hot events' payloads) against json_pack of the same */
	{
		static const char *const strs[] = {"", "w-1", "quote \" \\ \n", "\xc3\xa9\xe2\x82\xac"};
		size_t a, k;

		for (a = 0; a < sizeof strs / sizeof strs[0]; a++) {
			for (k = 0; k < 3; k++) {
				const struct store_json_member m[] = {
					{"marker", STORE_JSON_STR, strs[a], 0},
					{"epoch", k == 2 ? STORE_JSON_NULL : STORE_JSON_INT, NULL,
					 k ? INT64_MIN : 42},
					{"to", STORE_JSON_STR, strs[(a + 1) % 4], 0},
				};
				json_t *want_j = json_pack(
					"{sssoss}", "marker", strs[a], "epoch",
					k == 2 ? json_null() : json_integer(k ? INT64_MIN : 42), "to",
					strs[(a + 1) % 4]);
				char *want = json_dumps(want_j, JSON_COMPACT);
				char *got = store_json_members_text(m, 3, &len);

				ck_assert_str_eq(got, want);
				ck_assert_uint_eq(len, strlen(want));
				free(got);
				free(want);
				json_decref(want_j);
			}
		}
		{
			const struct store_json_member bad[] = {{"s", STORE_JSON_STR, "bad \xc3", 0}};

			char *empty = store_json_members_text(NULL, 0, &len);

			ck_assert_ptr_null(store_json_members_text(bad, 1, &len));
			ck_assert_str_eq(empty, "{}");
			free(empty);
		}
	}
	/* an event payload as fs_txn_event writes it */
	j = json_pack("{ssso}", "marker", "w-1", "epoch", json_integer(7));
	json_object_set_new(j, "actor_epoch", json_integer(3));
	tree_same(j);
	json_decref(j);
}
END_TEST

START_TEST(codec_rejects_wrong_types)
{
	struct core_card *c = fixture_full_card(), *out = (struct core_card *)1;
	static const char *const breakers[] = {
		"{\"title\": 3}", "{\"labels\": \"x\"}", "{\"labels\": [1]}",
		"{\"claim\": {\"marker\": 1}}", "{\"claim_epoch\": \"7\"}",
		"{\"created_at\": \"yesterday\"}", "{\"awaiting_input\": 1}",
		"{\"comments\": [{\"id\": \"cm-1\"}]}", "{\"gave_up\": {\"reason\": null}}",
		"{\"id\": \"bad id\"}"};
	size_t i;

	for (i = 0; i < sizeof(breakers) / sizeof(breakers[0]); i++) {
		json_t *j = store_card_to_json(c), *patch = json_loads(breakers[i], 0, NULL);
		ck_assert_ptr_nonnull(patch);
		json_object_update(j, patch);
		out = (struct core_card *)1;
		ck_assert_msg(store_card_from_json(j, &out) == CORE_ERR_BAD_REQUEST, "%s",
			      breakers[i]);
		ck_assert_ptr_null(out);
		json_decref(patch);
		json_decref(j);
	}
	{
		json_t *j = store_card_to_json(c);
		json_object_del(j, "state_reason"); /* a missing field, even a nullable one */
		ck_assert_int_eq(store_card_from_json(j, &out), CORE_ERR_BAD_REQUEST);
		json_decref(j);
	}
	{
		json_t *a = json_array();
		ck_assert_int_eq(store_card_from_json(a, &out), CORE_ERR_BAD_REQUEST);
		json_decref(a);
	}
	core_card_free(c);
}
END_TEST

START_TEST(codec_run_event_board)
{
	struct core_run r = {.id = "r-1", .card_id = "c-1", .board = "default",
			     .status = "running", .owner = "w1", .lock_until = 1780000060000,
			     .lease_ms = 60000, .created_at = 1780000000000,
			     .updated_at = 1780000000500, .pruned = true};
	struct core_event e = {.seq = 12, .at = 1780000000000, .board = "default",
			       .type = CORE_EV_CARD_CLAIMED, .card_id = "c-1", .actor = "w",
			       .payload = "{\"marker\":\"w1\",\"epoch\":3}"};
	struct core_board b = {0}, bb = {0};
	struct core_run *rr = NULL;
	struct core_event ee;
	json_t *j;

	j = store_run_to_json(&r);
	ck_assert(json_is_true(json_object_get(j, "pruned")));
	ck_assert(json_is_null(json_object_get(j, "continuation")));
	ck_assert_int_eq(store_run_from_json(j, &rr), CORE_OK);
	ck_assert_str_eq(rr->id, "r-1");
	ck_assert_str_eq(rr->owner, "w1");
	ck_assert_ptr_null(rr->continuation);
	ck_assert_int_eq(rr->lock_until, r.lock_until);
	ck_assert(rr->pruned);
	core_run_free(rr);
	json_object_set_new(j, "lease_ms", json_string("x"));
	ck_assert_int_eq(store_run_from_json(j, &rr), CORE_ERR_BAD_REQUEST);
	ck_assert_ptr_null(rr);
	json_decref(j);

	j = store_event_to_json(&e);
	ck_assert(json_is_object(json_object_get(j, "payload")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "type")), "card_claimed");
	ck_assert(json_is_null(json_object_get(j, "reason")));
	ck_assert_int_eq(store_event_from_json(j, &ee), CORE_OK);
	ck_assert_int_eq(ee.seq, 12);
	ck_assert_int_eq(ee.type, CORE_EV_CARD_CLAIMED);
	ck_assert_str_eq(ee.payload, e.payload);
	core_event_release(&ee);
	json_object_set_new(j, "type", json_string("no_such_type"));
	ck_assert_int_eq(store_event_from_json(j, &ee), CORE_ERR_BAD_REQUEST);
	ck_assert_ptr_null(ee.board);
	json_decref(j);
	e.payload = NULL; /* served as {} */
	j = store_event_to_json(&e);
	ck_assert_uint_eq(json_object_size(json_object_get(j, "payload")), 0);
	json_decref(j);

	ck_assert_int_eq(core_board_init_default(&b, "team"), CORE_OK);
	j = store_board_to_json(&b);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "columns")), 9);
	ck_assert_int_eq(store_board_from_json(j, &bb), CORE_OK);
	ck_assert_str_eq(bb.name, "team");
	ck_assert_uint_eq(bb.n_cols, 9);
	ck_assert(bb.cols[7].terminal);
	ck_assert(bb.cols[2].eligible);
	ck_assert_str_eq(bb.waiting, "waiting_deps");
	core_board_release(&bb);
	json_object_set_new(j, "columns", json_string("nope"));
	ck_assert_int_eq(store_board_from_json(j, &bb), CORE_ERR_BAD_REQUEST);
	json_decref(j);
	core_board_release(&b);
}
END_TEST

static const struct store_ops empty_ops = {.name = "empty"};

START_TEST(wrappers_check_arguments)
{
	struct store empty = {.ops = &empty_ops};
	struct core_card *c = (struct core_card *)1;
	struct store_claim_result r;
	struct core_token bad = {.marker = "has space", .epoch = 1};
	struct store_card_create in = {0};
	char err[128];
	struct store *st = NULL;
	char *dir = fx_tmpdir(), *spec;

	/* Missing ops are INTERNAL, not a crash. */
	ck_assert_int_eq(store_card_get(&empty, "c1", &c), CORE_ERR_INTERNAL);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(store_ping(&empty), CORE_ERR_INTERNAL);
	ck_assert_str_eq(store_name(&empty), "empty");
	/* Bad input is BAD_REQUEST before any op runs. */
	ck_assert_int_eq(store_card_get(&empty, NULL, &c), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_card_get(&empty, "x y", &c), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_card_get(NULL, "c1", &c), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_card_claim(&empty, "c1", "w", 0, NULL, &r), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_card_renew(&empty, "c1", &bad, 10, NULL, &c), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_card_create(&empty, NULL, NULL, &c), CORE_ERR_BAD_REQUEST);
	in.board = "bad board";
	ck_assert_int_eq(store_card_create(&empty, &in, NULL, &c), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_reaper_release_exact(&empty, "c1", NULL, NULL),
			 CORE_ERR_BAD_REQUEST);
	/* The FS extras refuse another twin. */
	{
		struct store_fs_stats fst;
		ck_assert_int_eq(store_fs_stats_get(&empty, &fst), CORE_ERR_BAD_REQUEST);
		ck_assert_int_eq(store_fs_compact(&empty), CORE_ERR_BAD_REQUEST);
	}

	/* Specs. */
#ifdef BOARDD_HAVE_MONGO
	/* Built with the Mongo twin: a server nobody listens for is unavailable, said plainly. */
	ck_assert_int_eq(store_open("mongodb://127.0.0.1:1/boardd?serverSelectionTimeoutMS=500",
				    NULL, &st, err, sizeof(err)),
			 CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_str_ne(err, "");
#else
	ck_assert_int_eq(store_open("mongodb://localhost/boardd", NULL, &st, err, sizeof(err)),
			 CORE_ERR_BAD_REQUEST);
	ck_assert_str_eq(err, "mongodb store not built");
#endif
	ck_assert_ptr_null(st);
	ck_assert_int_eq(store_open("", NULL, &st, err, sizeof(err)), CORE_ERR_BAD_REQUEST);
	ck_assert_int_eq(store_open("fs:", NULL, &st, err, sizeof(err)), CORE_ERR_BAD_REQUEST);
	ck_assert_int_gt(asprintf(&spec, "fs:%s/sub/data", dir), 0);
	ck_assert_int_eq(store_open(spec, NULL, &st, err, sizeof(err)), CORE_OK);
	ck_assert_str_eq(store_name(st), "fs");
	ck_assert_int_eq(store_ping(st), CORE_OK);
	store_close(st);
	/* A bare path is an fs spec too (and the directory was created). */
	ck_assert_int_eq(store_open(spec + 3, NULL, &st, err, sizeof(err)), CORE_OK);
	store_close(st);
	/* A twin's own options ride along; the directory is the spec's, whatever they say. */
	{
		struct store_fs_options fo = {.dir = "/nonexistent/elsewhere", .events_keep = 7};
		struct store_open_options oo = {.fs = &fo, .mongo = NULL};

		ck_assert_int_eq(store_open(spec, &oo, &st, err, sizeof(err)), CORE_OK);
		ck_assert_str_eq(store_name(st), "fs");
		store_close(st);
	}
	free(spec);
	fx_rmdir(dir);
}
END_TEST

static int64_t fixed_clock(void *ctx)
{
	return *(const int64_t *)ctx;
}

START_TEST(clock_injection)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	int64_t t = 1234567;
	int64_t host = store_now(st);

	ck_assert_int_gt(host, 1700000000000LL); /* the host clock, in ms */
	store_clock_set(st, fixed_clock, &t);
	ck_assert_int_eq(store_now(st), 1234567);
	store_clock_set(st, NULL, NULL);
	ck_assert_int_ge(store_now(st), host);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("codec+wrappers");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, codec_card_shape_and_roundtrip);
	tcase_add_test(tc, codec_card_text_equals_the_tree);
	tcase_add_test(tc, codec_json_text_equals_json_dumps);
	tcase_add_test(tc, codec_rejects_wrong_types);
	tcase_add_test(tc, codec_run_event_board);
	tcase_add_test(tc, wrappers_check_arguments);
	tcase_add_test(tc, clock_injection);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_add_suite(sr, conformance_suite("conformance-fs", fx_open_fresh, fx_close_fresh));
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
