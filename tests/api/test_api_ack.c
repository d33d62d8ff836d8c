/* Deferred acknowledgement through HTTP (api/answer.c, store_ack): a write's answer waits for the
 * group sync covering it with its connection suspended, so one HTTP thread lets many writes
 * share a sync; a failed sync answers 503 and leaves nothing applied; stopping the server
 * waits for the writes it already took. */
#include "tests/api/api_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WRITERS 8

struct writer {
	pthread_barrier_t *go; /* NULL: start at once */
	const char *method;
	char path[96];
	char body[160];
	char hdr[64];
	int status;
	char *resp;
	char *hdrs;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct httpc *c = harness_connect(&T);

	if (w->go)
		pthread_barrier_wait(w->go);
	w->status = c ? harness_call_h(c, w->method, w->path, W, w->hdr[0] ? w->hdr : NULL,
				       w->body, &w->hdrs, &w->resp)
		      : 0;
	httpc_close(c);
	return NULL;
}

/* Runs n writers at once (after a barrier) and joins them. */
static void writers_run(struct writer *ws, size_t n)
{
	pthread_t th[WRITERS];
	pthread_barrier_t go;
	size_t i;

	ck_assert_uint_le(n, WRITERS);
	pthread_barrier_init(&go, NULL, (unsigned)n);
	for (i = 0; i < n; i++) {
		ws[i].go = &go;
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer_main, &ws[i]), 0);
	}
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
}

static void writers_free(struct writer *ws, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(ws[i].resp);
		free(ws[i].hdrs);
	}
}

static struct store_fs_stats stats(void)
{
	struct store_fs_stats s;

	ck_assert_int_eq(store_fs_stats_get(T.st, &s), CORE_OK);
	return s;
}

/* One HTTP thread, a disk that takes 100 ms per sync, 8 claims at once: blocking the thread
 * through each sync would take 8 syncs one after the other; suspended, the claims share. */
START_TEST(one_thread_writes_share_a_sync)
{
	struct writer ws[WRITERS];
	struct store_fs_stats s0, s1;
	char id[16], body[64];
	json_t *j;
	size_t i;

	for (i = 0; i < WRITERS; i++) {
		snprintf(body, sizeof body, "{\"id\":\"g%zu\",\"state\":\"ready\"}", i);
		json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, body));
	}
	memset(ws, 0, sizeof ws);
	for (i = 0; i < WRITERS; i++) {
		ws[i].method = "POST";
		snprintf(ws[i].path, sizeof ws[i].path, "/v1/cards/g%zu/claim", i);
		snprintf(ws[i].body, sizeof ws[i].body, "{\"marker\":\"m%zu\",\"lease_ms\":60000}", i);
	}
	s0 = stats();
	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_SLOW_SYNC, true), CORE_OK);
	writers_run(ws, WRITERS);
	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_SLOW_SYNC, false), CORE_OK);
	s1 = stats();
	for (i = 0; i < WRITERS; i++) {
		ck_assert_int_eq(ws[i].status, 200);
		j = json_loads(ws[i].resp, 0, NULL);
		ck_assert(json_is_true(json_object_get(j, "fresh")));
		json_decref(j);
	}
	/* /metrics serves the same counters. */
	{
		unsigned long long syncs = 0, commits = 0;
		const char *p;

		t_must(200, "GET", "/metrics", NULL, NULL, NULL);
		p = strstr(T_BODY, "\nboardd_fs_journal_syncs_total ");
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(sscanf(p, "\nboardd_fs_journal_syncs_total %llu", &syncs), 1);
		p = strstr(T_BODY, "\nboardd_fs_journal_lines_total ");
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(sscanf(p, "\nboardd_fs_journal_lines_total %llu", &commits), 1);
		ck_assert_uint_eq(syncs, s1.syncs);
		ck_assert_uint_eq(commits, s1.commits);
	}
	ck_assert_uint_ge(s1.commits - s0.commits, WRITERS);
	ck_assert_msg(s1.syncs - s0.syncs <= WRITERS / 2,
		      "%llu syncs for %d claims on one thread: acknowledgements did not share",
		      (unsigned long long)(s1.syncs - s0.syncs), WRITERS);
	/* Every acknowledged claim is there, each with its own owner. */
	for (i = 0; i < WRITERS; i++) {
		snprintf(id, sizeof id, "/v1/cards/g%zu", i);
		j = t_must(200, "GET", id, W, NULL, NULL);
		snprintf(body, sizeof body, "m%zu", i);
		ck_assert_str_eq(t_str(json_object_get(j, "claim"), "marker"), body);
		json_decref(j);
	}
	writers_free(ws, WRITERS);
}
END_TEST

/* A sync that fails: every write waiting on it answers 503 + Retry-After, none of them is
 * applied (the card reads as before), reads keep working, and writes come back after. */
START_TEST(failed_sync_answers_503_and_applies_nothing)
{
	struct writer ws[4];
	char *before[4], *after, path[64], *ra;
	long long epoch[4];
	json_t *j;
	size_t i;

	for (i = 0; i < 4; i++) {
		char body[64], marker[16];

		snprintf(body, sizeof body, "{\"id\":\"f%zu\",\"state\":\"in_progress\"}", i);
		json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, body));
		snprintf(path, sizeof path, "f%zu", i);
		snprintf(marker, sizeof marker, "w%zu", i);
		epoch[i] = t_claim(path, marker);
		before[i] = t_card_raw(path);
	}
	memset(ws, 0, sizeof ws);
	for (i = 0; i < 4; i++) {
		if (i % 2 == 0) { /* a renew */
			ws[i].method = "POST";
			snprintf(ws[i].path, sizeof ws[i].path, "/v1/cards/f%zu/renew", i);
			snprintf(ws[i].body, sizeof ws[i].body,
				 "{\"marker\":\"w%zu\",\"epoch\":%lld,\"lease_ms\":120000}", i,
				 epoch[i]);
		} else { /* an owned state write */
			ws[i].method = "PATCH";
			snprintf(ws[i].path, sizeof ws[i].path, "/v1/cards/f%zu/state", i);
			snprintf(ws[i].body, sizeof ws[i].body, "{\"marker\":\"w%zu\",\"to\":\"review\"}",
				 i);
			snprintf(ws[i].hdr, sizeof ws[i].hdr, "If-Match: \"%lld\"", epoch[i]);
		}
	}
	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	writers_run(ws, 4);
	for (i = 0; i < 4; i++) {
		ck_assert_msg(ws[i].status == 503, "writer %zu: %d %s", i, ws[i].status,
			      ws[i].resp ? ws[i].resp : "");
		j = json_loads(ws[i].resp, 0, NULL);
		ck_assert_str_eq(t_str(j, "code"), "store_unavailable");
		json_decref(j);
		ra = httpc_header(ws[i].hdrs, "Retry-After");
		ck_assert_ptr_nonnull(ra);
		free(ra);
		/* Reads work during the fault and show nothing of the refused write. */
		snprintf(path, sizeof path, "f%zu", i);
		after = t_card_raw(path);
		ck_assert_str_eq(after, before[i]);
		free(after);
	}
	writers_free(ws, 4);
	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	/* The disk is back: the same writes are taken now. */
	memset(ws, 0, sizeof ws);
	for (i = 0; i < 4; i++) {
		ws[i].method = "POST";
		snprintf(ws[i].path, sizeof ws[i].path, "/v1/cards/f%zu/renew", i);
		snprintf(ws[i].body, sizeof ws[i].body,
			 "{\"marker\":\"w%zu\",\"epoch\":%lld,\"lease_ms\":120000}", i, epoch[i]);
	}
	writers_run(ws, 4);
	for (i = 0; i < 4; i++) {
		ck_assert_msg(ws[i].status == 200, "writer %zu after the fault: %d %s", i,
			      ws[i].status, ws[i].resp ? ws[i].resp : "");
		j = json_loads(ws[i].resp, 0, NULL);
		ck_assert_int_eq(t_int(j, "epoch"), epoch[i]);
		json_decref(j);
		free(before[i]);
	}
	writers_free(ws, 4);
}
END_TEST

/* Stopping the server while a write waits on a slow sync: the stop waits for that write,
 * whose answer still goes out; then the write is durable in the store. */
START_TEST(stop_waits_for_a_pending_write)
{
	struct writer w;
	pthread_t th;
	struct store_fs_stats s0, s1;
	json_t *j;

	json_decref(t_must(201, "POST", "/v1/cards", BOT, NULL, "{\"id\":\"s0\",\"state\":\"ready\"}"));
	httpc_close(TC); /* only the writer's connection stays open through the stop */
	TC = NULL;
	memset(&w, 0, sizeof w);
	w.method = "POST";
	snprintf(w.path, sizeof w.path, "/v1/cards/s0/claim");
	snprintf(w.body, sizeof w.body, "{\"marker\":\"late\",\"lease_ms\":60000}");
	s0 = stats();
	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_SLOW_SYNC, true), CORE_OK);
	ck_assert_int_eq(pthread_create(&th, NULL, writer_main, &w), 0);
	/* Until the claim is journaled (it then waits ~100 ms on the sync). */
	for (int i = 0; i < 500 && stats().commits == s0.commits; i++)
		usleep(2000);
	ck_assert_uint_gt(stats().commits, s0.commits);
	api_stop(T.api);
	T.api = NULL;
	pthread_join(th, NULL);
	ck_assert_int_eq(store_fs_fault_set(T.st, STORE_FS_FAULT_SLOW_SYNC, false), CORE_OK);
	ck_assert_msg(w.status == 200, "pending write answered %d", w.status);
	j = json_loads(w.resp, 0, NULL);
	ck_assert(json_is_true(json_object_get(j, "fresh")));
	json_decref(j);
	s1 = stats();
	ck_assert_uint_ge(s1.syncs, s0.syncs + 1);
	writers_free(&w, 1);
}
END_TEST

TCase *api_tcase_ack(void)
{
	TCase *tc = tcase_create("ack");

	tcase_add_checked_fixture(tc, t_setup_one_thread, t_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, one_thread_writes_share_a_sync);
	tcase_add_test(tc, failed_sync_answers_503_and_applies_nothing);
	tcase_add_test(tc, stop_waits_for_a_pending_write);
	return tc;
}
