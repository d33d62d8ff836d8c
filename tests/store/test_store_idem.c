/* Idempotency records in the store (DESIGN §18, store_idem_*), on the FS twin and, when
 * BOARDD_TEST_MONGO_URI is set, on the Mongo twin:
 *
 * - a key begins NEW, its answer is recorded, and a repeat reads it back (DONE) byte for
 *   byte; another fingerprint is IDEMPOTENCY_KEY_REUSED; a reservation is PENDING to a second
 *   request; an aborted one is NEW again;
 * - FS: a key bound to the thread is journaled with the write it answers: after a close
 *   (or a crash) between the write and its answer, the key is LOST, never NEW (which would
 *   write twice); a refused write carries nothing; recorded answers survive a restart and a
 *   compaction;
 * - Mongo: a pending record left by a crash is taken over once STORE_IDEM_PENDING_MS passed
 *   (the store's clock, injected). */
#include "store/store_twins.h"
#include "tests/store/fs_fixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct store_actor bot = {.name = "bot"};

#ifdef BOARDD_HAVE_MONGO
static struct store *mongo_open(void)
{
	const char *uri = getenv("BOARDD_TEST_MONGO_URI");
	char spec[512], err[256];
	struct store *st = NULL;
	const char *q;
	size_t n;

	if (!uri)
		return NULL;
	/* the URI's server, a database of this test's own */
	q = strchr(uri + strlen("mongodb://"), '/');
	n = q ? (size_t)(q - uri) : strlen(uri);
	snprintf(spec, sizeof spec, "%.*s/boardd_s27idem_%d_%ld%s", (int)n, uri, (int)getpid(),
		 (long)time(NULL), q && strchr(q, '?') ? strchr(q, '?') : "");
	ck_assert_msg(store_open(spec, NULL, &st, err, sizeof err) == CORE_OK, "open %s: %s", spec,
		      err);
	return st;
}
#endif

static void key_init(struct store_idem *k, const char *key, const char *fp)
{
	memset(k, 0, sizeof *k);
	k->key = key;
	k->fp = fp;
}

/* The record's life, the same on both twins. */
static void life(struct store *st)
{
	struct store_idem a, b;

	key_init(&a, "1:bot POST /v1/cards k1", "fp-one");
	ck_assert_int_eq(store_idem_begin(st, &a), CORE_OK);
	ck_assert_int_eq(a.state, STORE_IDEM_NEW);

	/* a second request while the first holds it (after the wrapper's wait) */
	key_init(&b, "1:bot POST /v1/cards k1", "fp-one");
	ck_assert_int_eq(store_idem_begin(st, &b), CORE_OK);
	ck_assert_int_eq(b.state, STORE_IDEM_PENDING);
	key_init(&b, "1:bot POST /v1/cards k1", "fp-two");
	ck_assert_int_eq(store_idem_begin(st, &b), CORE_ERR_IDEMPOTENCY_KEY_REUSED);

	ck_assert_int_eq(store_idem_end(st, &a, 201, "{\"id\":\"c1\"}", "/v1/cards/c1"), CORE_OK);
	key_init(&b, "1:bot POST /v1/cards k1", "fp-one");
	ck_assert_int_eq(store_idem_begin(st, &b), CORE_OK);
	ck_assert_int_eq(b.state, STORE_IDEM_DONE);
	ck_assert_int_eq(b.status, 201);
	ck_assert_str_eq(b.body, "{\"id\":\"c1\"}");
	ck_assert_str_eq(b.location, "/v1/cards/c1");
	store_idem_release(&b);
	key_init(&b, "1:bot POST /v1/cards k1", "fp-two");
	ck_assert_int_eq(store_idem_begin(st, &b), CORE_ERR_IDEMPOTENCY_KEY_REUSED);

	/* an abort frees the key */
	key_init(&a, "1:bot POST /v1/cards k2", "fp");
	ck_assert_int_eq(store_idem_begin(st, &a), CORE_OK);
	ck_assert_int_eq(a.state, STORE_IDEM_NEW);
	store_idem_abort(st, &a);
	key_init(&b, "1:bot POST /v1/cards k2", "fp-other");
	ck_assert_int_eq(store_idem_begin(st, &b), CORE_OK);
	ck_assert_int_eq(b.state, STORE_IDEM_NEW);
	ck_assert_int_eq(store_idem_end(st, &b, 409, "{\"code\":\"already_exists\"}", NULL), CORE_OK);
	key_init(&a, "1:bot POST /v1/cards k2", "fp-other");
	ck_assert_int_eq(store_idem_begin(st, &a), CORE_OK);
	ck_assert_int_eq(a.state, STORE_IDEM_DONE);
	ck_assert_int_eq(a.status, 409);
	ck_assert_str_eq(a.location, "");
	store_idem_release(&a);

	/* a malformed key never reaches the twin */
	key_init(&a, "", "fp");
	ck_assert_int_eq(store_idem_begin(st, &a), CORE_ERR_BAD_REQUEST);
	key_init(&a, "bad\001key", "fp");
	ck_assert_int_eq(store_idem_begin(st, &a), CORE_ERR_BAD_REQUEST);
}

START_TEST(fs_life)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);

	life(st);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* Creates card `id` with k bound, as the HTTP front end does; returns the create's rc. */
static enum core_rc create_bound(struct store *st, struct store_idem *k, const char *id)
{
	struct store_card_create in = {.id = id, .title = "t"};
	struct core_card *c = NULL;
	enum core_rc rc;

	store_idem_bind(k);
	rc = store_card_create(st, &in, &bot, &c);
	store_idem_unbind(k);
	core_card_free(c);
	return rc;
}

START_TEST(fs_key_rides_with_its_write)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_idem k;
	struct core_card *c = NULL;

	/* written, then the process stops before the answer is recorded */
	key_init(&k, "1:bot POST /v1/cards lost", "fp");
	ck_assert_int_eq(store_idem_begin(st, &k), CORE_OK);
	ck_assert_int_eq(k.state, STORE_IDEM_NEW);
	ck_assert_int_eq(create_bound(st, &k, "c-lost"), CORE_OK);
	ck_assert(k.attached);
	{
		/* while its request is still being served, the key is in flight, not lost */
		struct store_idem other;

		key_init(&other, "1:bot POST /v1/cards lost", "fp");
		ck_assert_int_eq(store_idem_begin(st, &other), CORE_OK);
		ck_assert_int_eq(other.state, STORE_IDEM_PENDING);
	}
	/* a refused write carries no key */
	key_init(&k, "1:bot POST /v1/cards refused", "fp");
	ck_assert_int_eq(store_idem_begin(st, &k), CORE_OK);
	ck_assert_int_eq(create_bound(st, &k, "c-lost"), CORE_ERR_ALREADY_EXISTS);
	ck_assert(!k.attached);
	/* recorded, then compacted */
	key_init(&k, "1:bot POST /v1/cards kept", "fp");
	ck_assert_int_eq(store_idem_begin(st, &k), CORE_OK);
	ck_assert_int_eq(create_bound(st, &k, "c-kept"), CORE_OK);
	ck_assert_int_eq(store_idem_end(st, &k, 201, "{\"id\":\"c-kept\"}", "/v1/cards/c-kept"),
			 CORE_OK);
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	store_close(st);

	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(store_card_get(st, "c-lost", &c), CORE_OK);
	core_card_free(c);
	key_init(&k, "1:bot POST /v1/cards lost", "fp");
	ck_assert_int_eq(store_idem_begin(st, &k), CORE_OK);
	ck_assert_int_eq(k.state, STORE_IDEM_LOST); /* never NEW: that would write twice */
	key_init(&k, "1:bot POST /v1/cards refused", "fp");
	ck_assert_int_eq(store_idem_begin(st, &k), CORE_OK);
	ck_assert_int_eq(k.state, STORE_IDEM_NEW);
	store_idem_abort(st, &k);
	key_init(&k, "1:bot POST /v1/cards kept", "fp");
	ck_assert_int_eq(store_idem_begin(st, &k), CORE_OK);
	ck_assert_int_eq(k.state, STORE_IDEM_DONE);
	ck_assert_str_eq(k.body, "{\"id\":\"c-kept\"}");
	store_idem_release(&k);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

static int64_t fake_now;

static int64_t fake_clock(void *ctx)
{
	(void)ctx;
	return fake_now;
}

START_TEST(fs_keys_expire)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_idem k;

	fake_now = (int64_t)time(NULL) * 1000;
	store_clock_set(st, fake_clock, NULL);
	key_init(&k, "1:bot POST /v1/cards old", "fp");
	ck_assert_int_eq(store_idem_begin(st, &k), CORE_OK);
	ck_assert_int_eq(store_idem_end(st, &k, 201, "{}", NULL), CORE_OK);
	fake_now += STORE_IDEM_TTL_MS + 1;
	key_init(&k, "1:bot POST /v1/cards old", "fp-new");
	ck_assert_int_eq(store_idem_begin(st, &k), CORE_OK);
	ck_assert_int_eq(k.state, STORE_IDEM_NEW); /* past 24 h the key is free again */
	store_idem_abort(st, &k);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

#ifdef BOARDD_HAVE_MONGO
START_TEST(mongo_life)
{
	struct store *st = mongo_open();

	if (!st)
		return;
	life(st);
	store_close(st);
}
END_TEST

START_TEST(mongo_crash_left_pending)
{
	struct store *st = mongo_open();
	struct store_idem a, b;

	if (!st)
		return;
	fake_now = store_now(st);
	store_clock_set(st, fake_clock, NULL);
	/* a replica reserved the key and died: no end, no abort */
	key_init(&a, "1:bot POST /v1/cards crashed", "fp");
	ck_assert_int_eq(store_idem_begin(st, &a), CORE_OK);
	ck_assert_int_eq(a.state, STORE_IDEM_NEW);
	key_init(&b, "1:bot POST /v1/cards crashed", "fp");
	ck_assert_int_eq(store_idem_begin(st, &b), CORE_OK);
	ck_assert_int_eq(b.state, STORE_IDEM_PENDING);
	fake_now += STORE_IDEM_PENDING_MS + 1;
	ck_assert_int_eq(store_idem_begin(st, &b), CORE_OK);
	ck_assert_int_eq(b.state, STORE_IDEM_NEW); /* taken over */
	/* the dead one's late answer does not overwrite the taker's */
	ck_assert_int_eq(store_idem_end(st, &a, 201, "{\"late\":true}", NULL), CORE_OK);
	ck_assert_int_eq(store_idem_end(st, &b, 201, "{\"taker\":true}", NULL), CORE_OK);
	key_init(&a, "1:bot POST /v1/cards crashed", "fp");
	ck_assert_int_eq(store_idem_begin(st, &a), CORE_OK);
	ck_assert_int_eq(a.state, STORE_IDEM_DONE);
	ck_assert_str_eq(a.body, "{\"taker\":true}");
	store_idem_release(&a);
	store_close(st);
}
END_TEST
#endif

int main(void)
{
	Suite *s = suite_create("store-idem");
	TCase *tc = tcase_create("fs");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, fs_life);
	tcase_add_test(tc, fs_key_rides_with_its_write);
	tcase_add_test(tc, fs_keys_expire);
	suite_add_tcase(s, tc);
#ifdef BOARDD_HAVE_MONGO
	tc = tcase_create("mongo");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, mongo_life);
	tcase_add_test(tc, mongo_crash_left_pending);
	suite_add_tcase(s, tc);
#endif
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
