/* FS twin only: durability across restarts, compaction, the directory lock, group commit,
 * refused writes when the disk refuses, the bounded events tail. */
#include "tests/store/test_store_fs.h"
#include "tests/store/fs_fixture.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct store_actor bot = {.name = "bot"};

char *fx_journal_path(const char *dir, uint64_t gen)
{
	char *p;

	ck_assert_int_gt(asprintf(&p, "%s/journal.%llu", dir, (unsigned long long)gen), 0);
	return p;
}

long fx_file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

enum core_rc fx_create_rc(struct store *st, const char *id)
{
	struct store_card_create in = {.id = id, .title = id, .state = "ready"};
	struct core_card *c = NULL;
	enum core_rc rc = store_card_create(st, &in, &bot, &c);

	core_card_free(c);
	return rc;
}

bool fx_exists(struct store *st, const char *id)
{
	struct core_card *c = NULL;
	enum core_rc rc = store_card_get(st, id, &c);

	core_card_free(c);
	return rc == CORE_OK;
}

struct store_fs_stats fx_stats(struct store *st)
{
	struct store_fs_stats s;

	ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
	return s;
}

static void create(struct store *st, const char *id)
{
	struct store_card_create in = {.id = id, .title = id, .state = "ready"};
	struct core_card *c = NULL;
	enum core_rc rc = store_card_create(st, &in, &bot, &c);

	ck_assert_msg(rc == CORE_OK, "create %s: %s", id, core_rc_code(rc));
	core_card_free(c);
}

/* Every card, oldest first (asserts fewer than 1000). */
static struct core_card **all_cards(struct store *st, size_t *n)
{
	struct store_card_filter f = {.claimed = -1, .limit = 1000};
	struct core_card **v = NULL;
	char *next = NULL;

	ck_assert_int_eq(store_card_list(st, &f, &v, n, &next), CORE_OK);
	ck_assert_ptr_null(next);
	return v;
}

static struct core_event *all_events(struct store *st, size_t *n)
{
	struct core_event *ev = NULL;
	int64_t next;

	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, n, &next), CORE_OK);
	return ev;
}

static void assert_same_cards(struct core_card **a, size_t na, struct core_card **b, size_t nb)
{
	size_t i;

	ck_assert_uint_eq(na, nb);
	for (i = 0; i < na; i++)
		ck_assert_msg(core_card_equal(a[i], b[i]), "card %s differs", a[i]->id);
}

static void assert_same_events(struct core_event *a, size_t na, struct core_event *b, size_t nb)
{
	size_t i;

	ck_assert_uint_eq(na, nb);
	for (i = 0; i < na; i++) {
		ck_assert_int_eq(a[i].seq, b[i].seq);
		ck_assert_int_eq(a[i].type, b[i].type);
		ck_assert_int_eq(a[i].at, b[i].at);
		ck_assert_str_eq(a[i].actor, b[i].actor);
		ck_assert_str_eq(a[i].payload, b[i].payload);
		ck_assert(a[i].machine == b[i].machine);
	}
}

START_TEST(restart_loses_nothing)
{
	char *dir = fx_tmpdir(), *cursor = NULL;
	struct store *st = fx_open(dir, 0, 0, NULL);
	const char *const lab[] = {"p1", "p2"};
	struct core_strv labels = {.v = (char **)lab, .n = 2}, blk = {.v = (char *[]){"a"}, .n = 1};
	struct store_card_create in = {.id = "b", .blockers = &blk};
	struct store_run_create rin = {.id = "r1", .card_id = "a", .marker = "w1",
				       .status = "running", .lease_ms = 5000};
	struct store_card_filter f = {.claimed = -1, .limit = 2};
	struct store_claim_result cr;
	struct core_card **before, **after, *c = NULL;
	struct core_event *eb, *ea;
	struct core_run *r = NULL, *r2 = NULL;
	size_t nb, na, neb, nea, cnt;

	create(st, "a");
	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
	create(st, "c");
	create(st, "d");
	ck_assert_int_eq(store_card_labels_set(st, "a", &labels, &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_comment_add(st, "c", "note", &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_claim(st, "a", "w1", 60000, &bot, &cr), CORE_OK);
	core_card_free(cr.card);
	ck_assert_int_eq(store_run_create(st, &rin, &bot, &r), CORE_OK);
	rin.id = "r2";
	ck_assert_int_eq(store_run_create(st, &rin, &bot, &r2), CORE_OK);
	core_run_free(r2);
	ck_assert_int_eq(store_run_prune(st, "r2", &bot), CORE_OK);
	ck_assert_int_eq(store_card_delete(st, "d", &bot), CORE_OK);
	{
		struct core_card **v = NULL;
		size_t n;
		ck_assert_int_eq(store_card_list(st, &f, &v, &n, &cursor), CORE_OK);
		store_cards_free(v, n);
	}
	before = all_cards(st, &nb);
	eb = all_events(st, &neb);
	store_close(st);

	st = fx_open(dir, 0, 0, NULL);
	after = all_cards(st, &na);
	ea = all_events(st, &nea);
	assert_same_cards(before, nb, after, na);
	assert_same_events(eb, neb, ea, nea);
	ck_assert_int_eq(store_run_get(st, "r1", &r2), CORE_OK);
	ck_assert_str_eq(r2->owner, r->owner);
	ck_assert_int_eq(r2->lock_until, r->lock_until);
	core_run_free(r2);
	ck_assert_int_eq(store_run_get(st, "r2", &r2), CORE_ERR_NOT_FOUND); /* still a tombstone */
	ck_assert_int_eq(store_run_count_for_card(st, "a", &cnt), CORE_OK);
	ck_assert_uint_eq(cnt, 2);
	/* The page cursor taken before the restart still resumes after "b". */
	f.after = cursor;
	{
		struct core_card **v = NULL;
		char *next = NULL;
		size_t n;
		ck_assert_int_eq(store_card_list(st, &f, &v, &n, &next), CORE_OK);
		ck_assert_uint_eq(n, 1);
		ck_assert_str_eq(v[0]->id, "c");
		store_cards_free(v, n);
		free(next);
	}
	/* Counters continue: seqs grow, generated ids stay unique, the epoch keeps counting. */
	{
		struct store_card_create gen = {.title = "g"};
		struct core_token t = {.marker = "w1", .epoch = 1};
		size_t n2;
		struct core_event *e2;

		ck_assert_int_eq(store_card_create(st, &gen, &bot, &c), CORE_OK);
		for (cnt = 0; cnt < na; cnt++)
			ck_assert_str_ne(c->id, after[cnt]->id);
		core_card_free(c);
		e2 = all_events(st, &n2);
		ck_assert_int_eq(e2[n2 - 1].seq, ea[nea - 1].seq + 1);
		store_events_free(e2, n2);
		ck_assert_int_eq(store_card_release(st, "a", &t, &bot, &c), CORE_OK);
		core_card_free(c);
		ck_assert_int_eq(store_card_claim(st, "a", "w1", 1000, &bot, &cr), CORE_OK);
		ck_assert_int_eq(cr.token.epoch, 2);
		core_card_free(cr.card);
	}
	store_cards_free(before, nb);
	store_cards_free(after, na);
	store_events_free(eb, neb);
	store_events_free(ea, nea);
	core_run_free(r);
	free(cursor);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

START_TEST(compaction_keeps_everything)
{
	char *dir = fx_tmpdir(), id[32], *j;
	struct store *st = fx_open(dir, 4096, 0, NULL);
	struct store_fs_stats s;
	struct core_card **before, **after;
	struct core_event *eb, *ea;
	size_t nb, na, neb, nea, i;

	for (i = 0; i < 150; i++) {
		snprintf(id, sizeof(id), "k%03zu", i);
		create(st, id);
	}
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	for (i = 150; i < 200; i++) {
		snprintf(id, sizeof(id), "k%03zu", i);
		create(st, id);
	}
	ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
	ck_assert_uint_ge(s.compactions, 1);
	ck_assert_uint_gt(s.generation, 1);
	before = all_cards(st, &nb);
	eb = all_events(st, &neb);
	ck_assert_uint_eq(nb, 200);
	store_close(st);

	/* The snapshot plus the journals it still needs; older generations are gone. */
	{
		char *snap;
		ck_assert_int_gt(asprintf(&snap, "%s/snapshot.bin", dir), 0);
		ck_assert_int_gt(fx_file_size(snap), 0);
		free(snap);
		j = fx_journal_path(dir, 1);
		ck_assert_int_eq(fx_file_size(j), -1);
		free(j);
	}
	st = fx_open(dir, 4096, 0, NULL);
	after = all_cards(st, &na);
	ea = all_events(st, &nea);
	assert_same_cards(before, nb, after, na);
	assert_same_events(eb, neb, ea, nea);
	store_cards_free(before, nb);
	store_cards_free(after, na);
	store_events_free(eb, neb);
	store_events_free(ea, nea);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* Effects (DESIGN §14) ride in the journal record of their event: subscriptions and
 * deliveries survive a restart (journal replay) and a compaction (snapshot), and a write
 * whose sync failed leaves neither its card nor its delivery behind. */
static size_t deliveries_n(struct store *st, struct store_delivery ***v)
{
	struct store_delivery_filter f = {.status = -1, .limit = 1000};
	size_t n = 0;

	ck_assert_int_eq(store_delivery_list(st, &f, v, &n), CORE_OK);
	return n;
}

START_TEST(effects_survive_restart_and_compaction)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_sub in = {.board = "default", .name = "s", .url = "http://127.0.0.1:9/x",
			       .enabled = true};
	struct store_sub *sub = NULL;
	struct store_delivery **v = NULL, *d = NULL;
	struct store_card_create cc = {.id = "c2"};
	struct core_card *c = NULL;
	bool created;
	int64_t epoch;
	int round;

	ck_assert_int_eq(store_sub_put(st, &in, "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", &created,
				       &sub),
			 CORE_OK);
	store_sub_free(sub);
	create(st, "c1");
	ck_assert_int_eq(store_delivery_lease(st, "r1", 60000, &d), CORE_OK);
	ck_assert_ptr_nonnull(d);
	epoch = d->lease_epoch;
	store_delivery_free(d);
	for (round = 0; round < 2; round++) {
		/* round 0: the journal replays; round 1: the snapshot holds them */
		if (round == 1)
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
		store_close(st);
		st = fx_open(dir, 0, 0, NULL);
		ck_assert_int_eq(store_sub_get(st, "default", "s", &sub), CORE_OK);
		ck_assert_str_eq(sub->secret, "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0");
		store_sub_free(sub);
		ck_assert_uint_eq(deliveries_n(st, &v), 1);
		ck_assert_str_eq(v[0]->lease_owner, "r1");
		ck_assert_int_eq(v[0]->lease_epoch, epoch);
		ck_assert_str_eq(v[0]->card_id, "c1");
		store_deliveries_free(v, 1);
	}
	/* A claim (a claim-only journal record) that fires a one-shot journals the card whole:
	 * the consumed label stays consumed across a restart. */
	{
		struct store_sub cl = {.board = "default", .name = "on-claim", .url = "http://x/y",
				       .enabled = true};
		struct core_strv one = {0}, lab = {0};
		struct store_claim_result res = {0};

		ck_assert_int_eq(core_strv_push(&cl.on.dim[CORE_SUB_TYPES], "card_claimed"),
				 CORE_OK);
		ck_assert_int_eq(core_strv_push(&one, "once"), CORE_OK);
		cl.consume = one;
		ck_assert_int_eq(store_sub_put(st, &cl, "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0",
					       &created, &sub),
				 CORE_OK);
		store_sub_free(sub);
		ck_assert_int_eq(core_strv_push(&lab, "once"), CORE_OK);
		ck_assert_int_eq(store_card_labels_set(st, "c1", &lab, &bot, &c), CORE_OK);
		core_card_free(c);
		ck_assert_int_eq(store_card_claim(st, "c1", "w1", 60000, &bot, &res), CORE_OK);
		ck_assert_uint_eq(res.card->labels.n, 0);
		core_card_free(res.card);
		store_close(st);
		st = fx_open(dir, 0, 0, NULL);
		c = NULL;
		ck_assert_int_eq(store_card_get(st, "c1", &c), CORE_OK);
		ck_assert_msg(c->labels.n == 0, "the consumed label came back after a restart");
		ck_assert(c->claim.present);
		core_card_free(c);
		ck_assert_int_eq(store_sub_delete(st, "default", "on-claim"), CORE_OK);
		core_sub_filter_release(&cl.on);
		core_strv_release(&one);
		core_strv_release(&lab);
		ck_assert_uint_eq(deliveries_n(st, &v), 2);
		store_deliveries_free(v, 2);
	}
	/* A refused sync rolls the card and its delivery back together. */
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(store_card_create(st, &cc, &bot, &c), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	ck_assert_int_eq(store_card_get(st, "c2", &c), CORE_ERR_NOT_FOUND);
	ck_assert_uint_eq(deliveries_n(st, &v), 2);
	store_deliveries_free(v, 2);
	ck_assert_int_eq(store_card_create(st, &cc, &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_uint_eq(deliveries_n(st, &v), 3);
	store_deliveries_free(v, 3);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert_uint_eq(deliveries_n(st, &v), 3);
	store_deliveries_free(v, 3);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* The background compactor runs on its own once the journal passes compact_bytes. */
START_TEST(background_compaction)
{
	char *dir = fx_tmpdir(), id[16];
	struct store *st = fx_open(dir, 2048, 0, NULL);
	struct store_fs_stats s = {0};
	int i;

	for (i = 0; i < 20; i++) {
		snprintf(id, sizeof(id), "b%d", i);
		create(st, id);
	}
	/* Asynchronous by design: poll its counter, bounded. */
	for (i = 0; i < 1000 && s.compactions == 0; i++) {
		ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
		if (!s.compactions)
			usleep(10000);
	}
	ck_assert_uint_ge(s.compactions, 1);
	ck_assert_uint_gt(s.generation, 1);
	store_close(st);
	st = fx_open(dir, 2048, 0, NULL);
	for (i = 0; i < 20; i++) {
		struct core_card *c = NULL;
		snprintf(id, sizeof(id), "b%d", i);
		ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
		core_card_free(c);
	}
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

struct writer {
	struct store *st;
	int id, n, ok;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char id[32];
	int i;

	for (i = 0; i < w->n; i++) {
		struct store_card_create in = {.id = id};
		struct core_card *c = NULL;

		snprintf(id, sizeof(id), "w%d-%d", w->id, i);
		if (store_card_create(w->st, &in, &bot, &c) == CORE_OK)
			w->ok++;
		core_card_free(c);
	}
	return NULL;
}

/* N writers at once: all acknowledged, all durable, and fewer fdatasyncs than commits. */
static void run_writers(struct store *st, struct writer *w, pthread_t *th, int nthreads, int per,
			bool compact)
{
	int i;

	for (i = 0; i < nthreads; i++) {
		w[i] = (struct writer){.st = st, .id = i, .n = per};
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (i = 0; compact && i < 5; i++)
		ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	for (i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].ok, per);
	}
}

START_TEST(group_commit_shares_syncs)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_fs_stats s0, s1;
	struct writer w[8];
	pthread_t th[8];
	struct core_card **v;
	size_t n;

	ck_assert_int_eq(store_fs_stats_get(st, &s0), CORE_OK);
	run_writers(st, w, th, 8, 40, false);
	ck_assert_int_eq(store_fs_stats_get(st, &s1), CORE_OK);
	ck_assert_uint_eq(s1.commits - s0.commits, 320);
	/* Concurrent writers share fdatasyncs instead of queueing one each. */
	ck_assert_msg(s1.syncs - s0.syncs < s1.commits - s0.commits,
		      "syncs %llu for %llu commits", (unsigned long long)(s1.syncs - s0.syncs),
		      (unsigned long long)(s1.commits - s0.commits));
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	v = all_cards(st, &n);
	ck_assert_uint_eq(n, 320);
	store_cards_free(v, n);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* Write-behind (store/fs/fs_journal.c): records appended under one ack are written by its one
 * flush, with one write call for the whole group, and read back after a reopen. */
START_TEST(one_write_per_group)
{
	char *dir = fx_tmpdir(), id[16];
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_fs_stats s0, s1;
	struct store_ack ack;
	struct core_card **v;
	size_t n;
	int k;

	ck_assert_int_eq(store_fs_stats_get(st, &s0), CORE_OK);
	store_ack_begin(&ack);
	for (k = 0; k < 10; k++) {
		snprintf(id, sizeof id, "g%d", k);
		create(st, id);
	}
	ck_assert(store_ack_end(&ack));
	ck_assert_uint_eq(ack.lines, 10);
	ck_assert_int_eq(store_ack_wait(&ack), CORE_OK);
	ck_assert_int_eq(store_fs_stats_get(st, &s1), CORE_OK);
	ck_assert_uint_eq(s1.commits - s0.commits, 10);
	ck_assert_uint_eq(s1.syncs - s0.syncs, 1);
	ck_assert_uint_eq(s1.writes - s0.writes, 1); /* one write(2) for the ten records */
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	v = all_cards(st, &n);
	ck_assert_uint_eq(n, 10);
	for (k = 0; k < 10; k++) {
		snprintf(id, sizeof id, "g%d", k);
		ck_assert_str_eq(v[k]->id, id); /* in commit order */
	}
	store_cards_free(v, n);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A compaction between a group's commits and its flush hands the old generation's records,
 * not written yet, to the flusher with its file: it writes and syncs each generation's part
 * (two writes for the one group), the commits on both sides are acknowledged, and everything
 * reads back after a reopen. The compaction, held before it installs its snapshot (it would
 * flush c0..c2 itself), finds them durable then and installs it. */
START_TEST(compaction_hands_unwritten_records_over)
{
	char *dir = fx_tmpdir(), id[16];
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_fs_stats s0, s1;
	struct fx_held held;
	struct store_ack ack;
	struct core_card **v;
	size_t n;
	int k;

	create(st, "before");
	ck_assert_int_eq(store_fs_stats_get(st, &s0), CORE_OK);
	store_ack_begin(&ack);
	for (k = 0; k < 6; k++) {
		snprintf(id, sizeof id, "c%d", k);
		create(st, id);
		if (k == 2)
			fx_compact_hold(st, &held);
	}
	ck_assert(store_ack_end(&ack));
	ck_assert_int_eq(store_ack_wait(&ack), CORE_OK);
	ck_assert_int_eq(fx_compact_release(&held), CORE_OK);
	ck_assert_int_eq(store_fs_stats_get(st, &s1), CORE_OK);
	ck_assert_uint_eq(s1.compactions, s0.compactions + 1);
	ck_assert_uint_eq(s1.generation, s0.generation + 1);
	ck_assert_uint_eq(s1.writes - s0.writes, 2); /* c0..c2 in the old file, c3..c5 in the new */
	ck_assert_uint_eq(s1.syncs - s0.syncs, 2);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	v = all_cards(st, &n);
	ck_assert_uint_eq(n, 7);
	ck_assert_str_eq(v[0]->id, "before");
	for (k = 0; k < 6; k++) {
		snprintf(id, sizeof id, "c%d", k);
		ck_assert_str_eq(v[k + 1]->id, id);
	}
	store_cards_free(v, n);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A snapshot is installed only once every commit it captured is durable. With nobody
 * flushing (the ack that owes them not handed over yet), the compaction flushes them itself,
 * as a synchronous writer would: when it returns they are durable, and the ack's wait needs
 * no sync of its own. */
START_TEST(compaction_flushes_what_it_captured)
{
	char *dir = fx_tmpdir(), id[16];
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_fs_stats s0, s1, s2;
	struct store_ack ack;
	int k;

	create(st, "before");
	store_ack_begin(&ack);
	for (k = 0; k < 3; k++) {
		snprintf(id, sizeof id, "c%d", k);
		create(st, id);
	}
	ck_assert(store_ack_end(&ack));
	ck_assert_int_eq(store_fs_stats_get(st, &s0), CORE_OK);
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	ck_assert_int_eq(store_fs_stats_get(st, &s1), CORE_OK);
	ck_assert_uint_eq(s1.compactions, s0.compactions + 1);
	ck_assert_uint_eq(s1.writes, s0.writes + 1); /* c0..c2, one write, by the compaction */
	ck_assert_uint_gt(s1.syncs, s0.syncs);
	ck_assert_int_eq(store_ack_wait(&ack), CORE_OK);
	ck_assert_int_eq(store_fs_stats_get(st, &s2), CORE_OK);
	ck_assert_uint_eq(s2.syncs, s1.syncs);
	ck_assert_uint_eq(s2.writes, s1.writes);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	for (k = 0; k < 3; k++) {
		struct core_card *c = NULL;

		snprintf(id, sizeof id, "c%d", k);
		ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
		core_card_free(c);
	}
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A group of more pieces than one write call takes (IOV_MAX): small records copied into the
 * journal's buffer until it is full, large ones (a 5000-byte body, and one of 300 KiB) taken
 * whole, interleaved; all of it lands, in order, and reads back after a reopen. */
START_TEST(large_group_is_written_whole)
{
	char *dir = fx_tmpdir(), id[16], *body = malloc(300 * 1024 + 1);
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_fs_stats s0, s1;
	struct store_ack ack;
	struct core_card *c;
	const int total = 1100;
	int k;

	ck_assert_ptr_nonnull(body);
	memset(body, 'b', 300 * 1024);
	body[300 * 1024] = '\0';
	ck_assert_int_eq(store_fs_stats_get(st, &s0), CORE_OK);
	store_ack_begin(&ack);
	for (k = 0; k < total; k++) {
		struct store_card_create in = {.id = id, .title = id, .state = "ready"};

		snprintf(id, sizeof id, "L%d", k);
		body[k == total / 2 + 1 ? 300 * 1024 : 5000] = '\0';
		in.body = k % 2 ? body : NULL;
		c = NULL;
		ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
		core_card_free(c);
		body[k == total / 2 + 1 ? 300 * 1024 : 5000] = 'b';
	}
	ck_assert(store_ack_end(&ack));
	ck_assert_int_eq(store_ack_wait(&ack), CORE_OK);
	ck_assert_int_eq(store_fs_stats_get(st, &s1), CORE_OK);
	ck_assert_uint_eq(s1.commits - s0.commits, (uint64_t)total);
	ck_assert_uint_eq(s1.writes - s0.writes, (uint64_t)((total + IOV_MAX - 1) / IOV_MAX));
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	for (k = 0; k < total; k++) {
		snprintf(id, sizeof id, "L%d", k);
		c = NULL;
		ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
		ck_assert_str_eq(c->title, id);
		ck_assert_uint_eq(c->body ? strlen(c->body) : 0,
				  k % 2 ? (k == total / 2 + 1 ? 300 * 1024 : 5000) : 0);
		core_card_free(c);
	}
	store_close(st);
	free(body);
	fx_rmdir(dir);
}
END_TEST

START_TEST(compaction_under_concurrent_writes)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 2048, 0, NULL);
	struct writer w[4];
	pthread_t th[4];
	struct core_card **v;
	size_t n;

	run_writers(st, w, th, 4, 60, true);
	v = all_cards(st, &n);
	ck_assert_uint_eq(n, 240);
	store_cards_free(v, n);
	store_close(st);
	st = fx_open(dir, 2048, 0, NULL);
	v = all_cards(st, &n);
	ck_assert_uint_eq(n, 240);
	store_cards_free(v, n);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

START_TEST(second_open_refused)
{
	char *dir = fx_tmpdir(), err[512], want[512];
	struct store_fs_options o = {.dir = dir};
	struct store *st = fx_open(dir, 0, 0, NULL), *st2 = NULL;

	ck_assert_int_eq(store_fs_open(&o, &st2, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_ptr_null(st2);
	snprintf(want, sizeof(want), "data directory %s is locked by another boardd (pid %ld)",
		 dir, (long)getpid());
	ck_assert_str_eq(err, want);
	/* The refused open changed nothing: the first store still works. */
	create(st, "x");
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

START_TEST(refused_write_is_not_applied)
{
	char *dir = fx_tmpdir(), *j;
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_fs_stats s;
	struct store_card_create in = {.id = "lost", .title = "a title long enough to cross"};
	struct core_card *c = NULL;
	struct core_event *ev;
	struct rlimit old, lim;
	size_t n0, n1;
	long size0;

	create(st, "kept");
	/* Reopened, the journal ends at its last record (a clean close cuts the pre-allocated
	 * zeros, and an open adds none): the next record has to extend the file. */
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ev = all_events(st, &n0);
	store_events_free(ev, n0);
	ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
	j = fx_journal_path(dir, s.generation);
	size0 = fx_file_size(j);
	/* The disk refuses mid-line: RLIMIT_FSIZE turns the append into a short write + EFBIG. */
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)size0 + 16;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	ck_assert_ptr_null(c);
	/* Not in memory, no event, and the half line was cut from the file. */
	ck_assert_int_eq(store_card_get(st, "lost", &c), CORE_ERR_NOT_FOUND);
	ev = all_events(st, &n1);
	store_events_free(ev, n1);
	ck_assert_uint_eq(n1, n0);
	ck_assert_int_eq(fx_file_size(j), size0);
	/* The store says it refuses writes (/readyz answers 503) until the disk takes them
	 * again; reads carry on, and the next write re-establishes the journal. */
	ck_assert_int_eq(store_ping(st), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	ck_assert_int_eq(store_ping(st), CORE_OK);
	core_card_free(c);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	c = NULL;
	ck_assert_int_eq(store_card_get(st, "lost", &c), CORE_OK);
	core_card_free(c);
	store_close(st);
	free(j);
	fx_rmdir(dir);
}
END_TEST

START_TEST(events_tail_bounded)
{
	char *dir = fx_tmpdir(), id[16];
	struct store *st = fx_open(dir, 0, 10, NULL);
	struct core_event *ev;
	size_t n, i;
	int64_t last;

	for (i = 0; i < 30; i++) {
		snprintf(id, sizeof(id), "e%zu", i);
		create(st, id);
	}
	ev = all_events(st, &n);
	ck_assert_uint_eq(n, 10);
	last = ev[9].seq;
	ck_assert_int_eq(ev[0].seq, last - 9); /* the oldest were dropped */
	store_events_free(ev, n);
	store_close(st);
	st = fx_open(dir, 0, 10, NULL);
	ev = all_events(st, &n);
	ck_assert_uint_eq(n, 10);
	ck_assert_int_eq(ev[9].seq, last);
	store_events_free(ev, n);
	create(st, "after");
	ev = all_events(st, &n);
	ck_assert_int_eq(ev[n - 1].seq, last + 1);
	store_events_free(ev, n);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* Each board's board_seq (DESIGN §11) outlives the events it numbered: the tail is trimmed,
 * the store restarts (journal replay) and compacts (the snapshot keeps each board's counter),
 * and the next event of a board still takes the next number, whatever the other board did. */
static int64_t board_last(struct store *st, const char *board, size_t *n_out)
{
	struct core_event *ev = NULL;
	size_t n = 0, i;
	int64_t next = 0;

	ck_assert_int_eq(store_events_list_board(st, board, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	for (i = 1; i < n; i++)
		ck_assert_int_eq(ev[i].board_seq, ev[i - 1].board_seq + 1);
	if (n)
		ck_assert_int_eq(next, ev[n - 1].board_seq);
	store_events_free(ev, n);
	if (n_out)
		*n_out = n;
	return next;
}

static void create_on(struct store *st, const char *board, const char *id)
{
	struct store_card_create in = {.id = id, .board = board};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
}

START_TEST(board_seq_survives_trim_restart_snapshot)
{
	char *dir = fx_tmpdir(), id[16];
	struct store *st = fx_open(dir, 0, 10, NULL);
	struct core_board b = {0};
	int64_t la, lb;
	size_t n, i;
	int round;

	ck_assert_int_eq(core_board_init_default(&b, "b2"), CORE_OK);
	ck_assert_int_eq(store_board_put(st, &b, &bot), CORE_OK);
	core_board_release(&b);
	la = board_last(st, "default", NULL); /* what opening the store wrote, if anything */
	lb = board_last(st, "b2", NULL);
	for (i = 0; i < 30; i++) {
		snprintf(id, sizeof(id), "a%zu", i);
		create_on(st, "default", id);
		if (i % 3 == 0) {
			snprintf(id, sizeof(id), "b%zu", i);
			create_on(st, "b2", id);
		}
	}
	ck_assert_int_eq(board_last(st, "default", &n), la += 30);
	ck_assert_int_eq(board_last(st, "b2", NULL), lb += 10);
	ck_assert_uint_lt(n, 30); /* the tail kept 10 events: most numbers outlived theirs */
	for (round = 0; round < 3; round++) {
		store_close(st);
		st = fx_open(dir, 0, 10, NULL);
		ck_assert_int_eq(board_last(st, "default", NULL), la);
		ck_assert_int_eq(board_last(st, "b2", NULL), lb);
		if (round == 0)
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
		snprintf(id, sizeof(id), "r%d", round);
		create_on(st, round == 1 ? "b2" : "default", id);
		if (round == 1)
			ck_assert_int_eq(board_last(st, "b2", NULL), ++lb);
		else
			ck_assert_int_eq(board_last(st, "default", NULL), ++la);
		if (round == 1) {
			ck_assert_int_eq(store_card_delete(st, "a29", &bot), CORE_OK);
			la++;
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
		}
	}
	/* b2 wrote nothing since round 1: none of its events remain in the tail of 10, and its
	 * counter alone (the snapshot's) carries it. */
	create_on(st, "b2", "last");
	ck_assert_int_eq(board_last(st, "b2", NULL), lb + 1);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

static void create_blocked(struct store *st, const char *id, const char *b1, const char *b2)
{
	char *bv[2] = {(char *)b1, (char *)b2};
	struct core_strv blk = {.v = bv, .n = b2 ? 2 : 1};
	struct store_card_create in = {.id = id, .state = "ready", .blockers = &blk};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	ck_assert_str_eq(c->state, "waiting_deps");
	core_card_free(c);
}

static void assert_state(struct store *st, const char *id, const char *state)
{
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_get(st, id, &c), CORE_OK);
	ck_assert_msg(strcmp(c->state, state) == 0, "%s is in %s, not %s", id, c->state, state);
	core_card_free(c);
}

static void set_blockers(struct store *st, const char *id, const char *b)
{
	char *bv[1] = {(char *)b};
	struct core_strv blk = {.v = bv, .n = b ? 1 : 0};
	struct store_card_patch p = {.blockers = &blk};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_patch(st, id, &p, &bot, &c), CORE_OK);
	core_card_free(c);
}

static enum core_rc move(struct store *st, const char *id, const char *to)
{
	struct core_card *c = NULL;
	enum core_rc rc = store_card_set_state_from(st, id, NULL, to, NULL, &bot, &c);

	core_card_free(c);
	return rc;
}

/* The reverse blockers index (blocker -> dependents) behind the unblocked cascade and
 * Reopen's guard is rebuilt from the snapshot and the journal, and follows patches and
 * deletes: each answer here is what a scan of every card would give. */
START_TEST(dependents_index_follows_every_path)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct core_card *c = NULL;

	create(st, "a");
	create(st, "b");
	create_blocked(st, "d1", "a", NULL);
	create_blocked(st, "d2", "a", "b");
	create_blocked(st, "gone", "a", NULL);
	ck_assert_int_eq(store_fs_compact(st), CORE_OK); /* these edges come from the snapshot */
	create_blocked(st, "d3", "a", NULL);             /* this one from the journal */
	set_blockers(st, "d3", "b");                     /* moved from a to b */
	ck_assert_int_eq(store_card_delete(st, "gone", &bot), CORE_OK);
	store_close(st);

	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(move(st, "a", "done"), CORE_OK);
	assert_state(st, "d1", "ready");        /* unblocked */
	assert_state(st, "d2", "waiting_deps"); /* b is still open */
	assert_state(st, "d3", "waiting_deps"); /* no longer waits for a */
	/* d1 left waiting_deps: reopening a is refused until d1 stops naming it. */
	ck_assert_int_eq(store_card_reopen(st, "a", "ready", NULL, &bot, &c),
			 CORE_ERR_DEPENDENTS_OUTSTANDING);
	set_blockers(st, "d1", NULL);
	ck_assert_int_eq(store_card_reopen(st, "a", "ready", NULL, &bot, &c), CORE_OK);
	core_card_free(c);
	/* b's dependents are d2 (a open again: stays) and d3 (moves). */
	ck_assert_int_eq(move(st, "b", "done"), CORE_OK);
	assert_state(st, "d2", "waiting_deps");
	assert_state(st, "d3", "ready");
	ck_assert_int_eq(move(st, "a", "done"), CORE_OK);
	assert_state(st, "d2", "ready");
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

static struct core_token claim(struct store *st, const char *id, const char *marker)
{
	struct store_claim_result cr;
	struct core_token t;

	ck_assert_int_eq(store_card_claim(st, id, marker, 60000, &bot, &cr), CORE_OK);
	t = (struct core_token){.marker = marker, .epoch = cr.token.epoch};
	core_card_free(cr.card);
	return t;
}

static uint64_t commits(struct store *st)
{
	struct store_fs_stats s;

	ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
	return s.commits;
}

/* An owned write with .release: the write and the release are one fenced step and one
 * journal line, with the events of both; a refused write releases nothing. */
START_TEST(owned_write_with_release_is_one_line)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_owned_write w = {.kind = STORE_OWNED_STATE, .state = "done",
				      .reason = "run_finished", .release = true};
	struct core_card *c = NULL;
	struct core_event *ev;
	uint64_t n0;
	size_t n;

	create(st, "x");
	w.token = claim(st, "x", "w1");
	n0 = commits(st);
	ck_assert_int_eq(store_card_owned_write(st, "x", &w, &bot, &c), CORE_OK);
	ck_assert_uint_eq(commits(st), n0 + 1);
	ck_assert_str_eq(c->state, "done");
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, w.token.epoch); /* the fence generation survives */
	core_card_free(c);
	ev = all_events(st, &n);
	ck_assert_str_eq(core_event_type_name(ev[n - 2].type), "card_state_changed");
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "card_released");
	ck_assert_str_eq(ev[n - 1].actor, "bot");
	store_events_free(ev, n);
	/* The token is spent: the same write again is refused and changes nothing. */
	n0 = commits(st);
	ck_assert_int_eq(store_card_owned_write(st, "x", &w, &bot, &c), CORE_ERR_CLAIM_CONFLICT);
	ck_assert_ptr_null(c);
	ck_assert_uint_eq(commits(st), n0);

	/* A write the workflow refuses takes the release down with it: the claim stays. */
	create(st, "y");
	w.token = claim(st, "y", "w2");
	w.state = "no_such_column";
	n0 = commits(st);
	ck_assert_int_eq(store_card_owned_write(st, "y", &w, &bot, &c),
			 CORE_ERR_TRANSITION_REJECTED);
	ck_assert_uint_eq(commits(st), n0);
	ck_assert_int_eq(store_card_get(st, "y", &c), CORE_OK);
	ck_assert(c->claim.present);
	core_card_free(c);
	store_close(st);

	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(store_card_get(st, "x", &c), CORE_OK);
	ck_assert_str_eq(c->state, "done");
	ck_assert(!c->claim.present);
	core_card_free(c);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A twin without the combined step (owned_write_release false) gets the write, then a fenced
 * release, from the wrapper: the same end state in two lines. */
START_TEST(owned_write_release_fallback)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	const struct store_ops *fs_ops = st->ops;
	struct store_ops plain = *fs_ops;
	struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .run_id = "r9",
				      .release = true};
	struct core_card *c = NULL;
	uint64_t n0;

	struct core_run *run = NULL;

	create(st, "z");
	w.token = claim(st, "z", "w1");
	ck_assert_int_eq(store_run_create(st, &(struct store_run_create){.id = "r9",
			 .card_id = "z", .marker = "w1", .status = "running", .lease_ms = 1000},
			 &bot, &run), CORE_OK);
	core_run_free(run);
	n0 = commits(st);
	plain.owned_write_release = false;
	st->ops = &plain;
	ck_assert_int_eq(store_card_owned_write(st, "z", &w, &bot, &c), CORE_OK);
	st->ops = fs_ops; /* the FS extras recognise their own table only */
	ck_assert_uint_eq(commits(st), n0 + 2);
	ck_assert_str_eq(c->last_run_id, "r9");
	ck_assert(!c->claim.present);
	core_card_free(c);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

static int64_t fixed_now;

static int64_t fixed_clock(void *ctx)
{
	(void)ctx;
	return fixed_now;
}

static void assert_expired(struct store *st, const char *const *want, size_t n_want)
{
	struct core_card **v = NULL;
	size_t n = 0, i;

	ck_assert_int_eq(store_reaper_list_expired(st, 100, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, n_want);
	for (i = 0; i < n; i++)
		ck_assert_str_eq(v[i]->id, want[i]);
	store_cards_free(v, n);
}

/* The reaper's listings walk the set of claimed cards, not the board: the set follows
 * claims, releases and deletes, through the snapshot and the journal. */
START_TEST(claimed_set_follows_every_path)
{
	static const char *const both[] = {"c1", "c4"};
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_claim_result cr;
	struct core_token t2;
	struct core_card *c = NULL;

	fixed_now = 1764670000000LL;
	store_clock_set(st, fixed_clock, NULL);
	create(st, "c1");
	create(st, "c2");
	create(st, "c3");
	create(st, "c4");
	ck_assert_int_eq(store_card_claim(st, "c1", "w1", 1000, &bot, &cr), CORE_OK);
	core_card_free(cr.card);
	fixed_now += 10;
	ck_assert_int_eq(store_card_claim(st, "c2", "w2", 1000, &bot, &cr), CORE_OK);
	t2 = (struct core_token){"w2", cr.token.epoch, NULL};
	core_card_free(cr.card);
	ck_assert_int_eq(store_card_claim(st, "c3", "w3", 1000, &bot, &cr), CORE_OK);
	core_card_free(cr.card);
	ck_assert_int_eq(store_card_release(st, "c2", &t2, &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_delete(st, "c3", &bot), CORE_OK);
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	fixed_now += 10;
	ck_assert_int_eq(store_card_claim(st, "c4", "w4", 1000, &bot, &cr), CORE_OK);
	core_card_free(cr.card);
	assert_expired(st, NULL, 0); /* nothing expired yet */
	store_close(st);

	st = fx_open(dir, 0, 0, NULL);
	store_clock_set(st, fixed_clock, NULL);
	fixed_now += 5000;
	assert_expired(st, both, 2); /* oldest lease first */
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* ---- posting lists: filtered lists agree with a scan, through every path ---- */

static const char *const post_states[] = {"backlog", "ready", "in_progress", "review"};

static void post_create(struct store *st, int i)
{
	char id[16], l1[8];
	const char *lv[3];
	struct core_strv labels = {.v = (char **)lv};
	struct store_card_create in = {.id = id, .title = id, .labels = &labels};
	struct core_card *c = NULL;

	snprintf(id, sizeof id, "p%03d", i);
	snprintf(l1, sizeof l1, "l%d", i % 5);
	in.state = post_states[i % 4];
	lv[labels.n++] = l1;
	if (i % 50 == 0)
		lv[labels.n++] = "rare";
	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
}

static bool post_match(const struct core_card *c, const char *state, const char *label)
{
	return (!state || strcmp(c->state, state) == 0) &&
	       (!label || core_strv_contains(&c->labels, label));
}

/* Every filter and page size, cursor followed to the end, against a scan of all cards:
 * limit 1 on a dense filter takes the creation-order walk, the rest the posting lists. */
static void post_check(struct store *st)
{
	static const char *const filters[][2] = {
		{"ready", NULL},  {NULL, "l1"},	   {"review", "rare"}, {"in_progress", "l3"},
		{NULL, "rare"},	  {"ready", "nope"}, {"nope", NULL},     {"backlog", "l0"},
	};
	static const size_t limits[] = {1, 3, 100};
	size_t n_all, fi, li, i, k, n;
	struct core_card **all = all_cards(st, &n_all), **v;

	for (fi = 0; fi < sizeof filters / sizeof filters[0]; fi++) {
		for (li = 0; li < sizeof limits / sizeof limits[0]; li++) {
			struct store_card_filter f = {.state = filters[fi][0],
						      .label = filters[fi][1],
						      .claimed = -1, .limit = limits[li]};
			char *next = NULL, *after = NULL;

			k = 0; /* index into the expected matches of `all` */
			i = 0;
			do {
				f.after = after;
				v = NULL;
				ck_assert_int_eq(store_card_list(st, &f, &v, &n, &next), CORE_OK);
				ck_assert_uint_le(n, f.limit);
				for (size_t j = 0; j < n; j++) {
					while (i < n_all && !post_match(all[i], f.state, f.label))
						i++;
					ck_assert_msg(i < n_all, "filter %zu limit %zu: extra card %s",
						      fi, f.limit, v[j]->id);
					ck_assert_str_eq(v[j]->id, all[i]->id);
					i++;
					k++;
				}
				store_cards_free(v, n);
				free(after);
				after = next;
				next = NULL;
			} while (after);
			while (i < n_all && !post_match(all[i], f.state, f.label))
				i++;
			ck_assert_msg(i == n_all, "filter %zu limit %zu: missed card %s after %zu", fi,
				      f.limit, i < n_all ? all[i]->id : "", k);
		}
	}
	store_cards_free(all, n_all);
}

START_TEST(posting_lists_follow_every_path)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct core_card *c = NULL;
	char id[16];
	int i;

	for (i = 0; i < 400; i++)
		post_create(st, i);
	post_check(st);
	/* moves, label changes, deletes, new cards */
	for (i = 0; i < 400; i += 7) {
		snprintf(id, sizeof id, "p%03d", i);
		ck_assert_int_eq(store_card_set_state_from(st, id, NULL, post_states[(i / 7) % 4],
							   NULL, &bot, &c),
				 CORE_OK);
		core_card_free(c);
	}
	for (i = 3; i < 400; i += 11) {
		const char *lv[] = {"rare", "l1", "l1"};
		struct core_strv labels = {.v = (char **)lv, .n = (size_t)(i % 3) + 1};

		snprintf(id, sizeof id, "p%03d", i);
		ck_assert_int_eq(store_card_labels_set(st, id, &labels, &bot, &c), CORE_OK);
		core_card_free(c);
	}
	for (i = 5; i < 400; i += 13) {
		snprintf(id, sizeof id, "p%03d", i);
		ck_assert_int_eq(store_card_delete(st, id, &bot), CORE_OK);
	}
	for (i = 400; i < 450; i++)
		post_create(st, i);
	post_check(st);
	/* a rollback: refused writes leave the lists as they were */
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(store_card_set_state_from(st, "p001", NULL, "review", NULL, &bot, &c),
			 CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_card_delete(st, "p002", &bot), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	post_check(st);
	/* rebuilt from the snapshot and the journal (the first write re-establishes it) */
	post_create(st, 450);
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	post_create(st, 451);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	post_check(st);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* ---- the attention candidates: the lane agrees with a scan, through every path ---- */

static int64_t attn_now = 1780000000000LL;

static int64_t attn_clock(void *ctx)
{
	(void)ctx;
	return attn_now;
}

static void attn_check(struct store *st)
{
	struct store_card_filter f = {.claimed = -1, .limit = 1000};
	struct core_card **v = NULL;
	struct store_attention *lane = NULL;
	struct core_board b = {0};
	char *next = NULL;
	size_t n, nl, i, k = 0;
	bool truncated;
	int64_t now = store_now(st);

	ck_assert_int_eq(store_board_get(st, "default", &b), CORE_OK);
	ck_assert_int_eq(store_card_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_int_eq(store_attention_list(st, NULL, NULL, 1000, &lane, &nl, &truncated), CORE_OK);
	for (i = 0; i < n; i++) {
		struct core_run *r = NULL;
		unsigned want, got = 0;
		size_t j;

		if (v[i]->last_run_id)
			store_run_get(st, v[i]->last_run_id, &r);
		want = core_attention_reasons(v[i], core_board_is_terminal(&b, v[i]->state), r, now);
		core_run_free(r);
		for (j = 0; j < nl; j++)
			if (strcmp(lane[j].card->id, v[i]->id) == 0)
				got = lane[j].reasons;
		ck_assert_msg(got == want, "card %s: lane %#x, scan %#x", v[i]->id, got, want);
		k += want != 0;
	}
	ck_assert_uint_eq(k, nl);
	ck_assert_uint_gt(nl, 0);
	store_attention_free(lane, nl);
	store_cards_free(v, n);
	free(next);
	core_board_release(&b);
}

START_TEST(attention_index_agrees)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct core_card *c = NULL;
	struct core_run *r = NULL;
	char id[16], rid[16];
	int i;

	store_clock_set(st, attn_clock, NULL);

	for (i = 0; i < 60; i++) {
		struct store_claim_result cr;
		struct store_owned_write w = {.kind = STORE_OWNED_AWAITING_INPUT,
					      .awaiting_input = true};
		struct core_gave_up g = {.set = true, .reason = "run_pruned", .at = 1};

		snprintf(id, sizeof id, "t%03d", i);
		snprintf(rid, sizeof rid, "r%03d", i);
		create(st, id);
		ck_assert_int_eq(store_card_claim(st, id, "w1", i % 2 ? 1000 : 600000, &bot, &cr),
				 CORE_OK);
		w.token = (struct core_token){.marker = "w1", .epoch = cr.token.epoch};
		core_card_free(cr.card);
		if (i % 3 == 0) {
			ck_assert_int_eq(store_card_owned_write(st, id, &w, &bot, &c), CORE_OK);
			core_card_free(c);
		}
		if (i % 5 == 0) {
			struct store_run_create in = {.id = rid, .card_id = id, .marker = "w1",
						      .status = "running", .lease_ms = 5000};
			struct store_run_update u = {.marker = "w1",
						     .status = i % 10 ? "failed" : "paused_operator",
						     .lease_ms = 5000};

			ck_assert_int_eq(store_run_create(st, &in, &bot, &r), CORE_OK);
			core_run_free(r);
			w.kind = STORE_OWNED_LAST_RUN;
			w.run_id = rid;
			ck_assert_int_eq(store_card_owned_write(st, id, &w, &bot, &c), CORE_OK);
			core_card_free(c);
			ck_assert_int_eq(store_run_update(st, rid, &u, &bot, &r), CORE_OK);
			core_run_free(r);
		}
		if (i % 7 == 0) {
			w.kind = STORE_OWNED_GAVE_UP;
			w.gave_up = &g;
			ck_assert_int_eq(store_card_owned_write(st, id, &w, &bot, &c), CORE_OK);
			core_card_free(c);
		}
	}
	attn_check(st);
	attn_now += 2000; /* the odd cards' leases expire: the heap's part of the lane */
	attn_check(st);
	/* a rollback: refused writes leave the candidates as they were */
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(store_card_delete(st, "t000", &bot), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_run_update(st, "r010", &(struct store_run_update){.marker = "w1",
			 .status = "running", .lease_ms = 5000}, &bot, &r), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	attn_check(st);
	/* a run write alone takes its card out; a delete too */
	ck_assert_int_eq(store_run_update(st, "r010", &(struct store_run_update){.marker = "w1",
			 .status = "running", .lease_ms = 5000}, &bot, &r), CORE_OK);
	core_run_free(r);
	ck_assert_int_eq(store_card_delete(st, "t003", &bot), CORE_OK);
	attn_check(st);
	/* rebuilt from the snapshot and the journal */
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	ck_assert_int_eq(store_run_update(st, "r020", &(struct store_run_update){.marker = "w1",
			 .status = "running", .lease_ms = 5000}, &bot, &r), CORE_OK);
	core_run_free(r);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	store_clock_set(st, attn_clock, NULL);
	attn_check(st);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* ---- the claimed heap: the expired listing agrees with a scan, through every path ---- */

/* ---- the snapshot's load: decoded on a second thread while the opening one applies ---- */

static struct store *open_load(const char *dir, bool serial)
{
	struct store_fs_options o = {.dir = dir, .serial_load = serial};
	struct store *st = NULL;
	char err[256];
	enum core_rc rc = store_fs_open(&o, &st, err, sizeof(err));

	ck_assert_msg(rc == CORE_OK, "open %s: %s: %s", dir, core_rc_code(rc), err);
	return st;
}

/* Everything a reader can see, as text: the cards in creation order (every field), the state
 * and label lists, claim-next's order, the claimed heap, attention, runs, events, counts. */
static char *load_view(struct store *st)
{
	static const char *const states[] = {"backlog", "ready", "in_progress", "review"};
	char *buf = NULL, id[32];
	size_t len = 0, n, i, k;
	FILE *f = open_memstream(&buf, &len);
	struct core_card **v = all_cards(st, &n);
	struct core_event *ev;
	struct store_attention *at;
	json_t *counts = NULL;
	int64_t after = 0, next = 0;
	bool trunc;
	char *js;

	ck_assert_ptr_nonnull(f);
	for (i = 0; i < n; i++) {
		json_t *j = store_card_to_json(v[i]);

		js = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
		fprintf(f, "card %s\n", js);
		free(js);
		json_decref(j);
	}
	store_cards_free(v, n);
	for (i = 0; i < 4; i++) {
		for (k = 0; k < 8; k++) {
			struct store_card_filter fl = {.state = states[i], .claimed = k % 2,
						       .limit = 1000};
			char label[16];

			snprintf(label, sizeof(label), "team-%zu", k);
			fl.label = k < 7 ? label : NULL;
			char *more = NULL;

			ck_assert_int_eq(store_card_list(st, &fl, &v, &n, &more), CORE_OK);
			ck_assert_ptr_null(more);
			fprintf(f, "list %s %s %d:", fl.state, fl.label ? fl.label : "-", fl.claimed);
			for (size_t j = 0; j < n; j++)
				fprintf(f, " %s", v[j]->id);
			fputc('\n', f);
			store_cards_free(v, n);
		}
	}
	fixed_now = store_now(st) + 3600 * 1000;
	store_clock_set(st, fixed_clock, NULL);
	ck_assert_int_eq(store_reaper_list_expired(st, 1000, &v, &n), CORE_OK);
	fprintf(f, "expired:");
	for (i = 0; i < n; i++)
		fprintf(f, " %s", v[i]->id);
	fputc('\n', f);
	store_cards_free(v, n);
	store_clock_set(st, NULL, NULL);
	ck_assert_int_eq(store_attention_list(st, NULL, NULL, 1000, &at, &n, &trunc), CORE_OK);
	fprintf(f, "attention %d:", trunc);
	for (i = 0; i < n; i++)
		fprintf(f, " %s/%u", at[i].card->id, at[i].reasons);
	fputc('\n', f);
	store_attention_free(at, n);
	for (i = 0; i < 700; i += 7) {
		struct core_run *r = NULL;
		size_t cnt = 0;

		snprintf(id, sizeof(id), "run-%03zu", i);
		if (store_run_get_any(st, id, &r) == CORE_OK) {
			json_t *j = store_run_to_json(r);

			js = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
			fprintf(f, "run %s\n", js);
			free(js);
			json_decref(j);
			core_run_free(r);
		}
		snprintf(id, sizeof(id), "c%03zu", i);
		ck_assert_int_eq(store_run_count_for_card(st, id, &cnt), CORE_OK);
		fprintf(f, "runs of %s: %zu\n", id, cnt);
	}
	do {
		ck_assert_int_eq(store_events_list(st, NULL, NULL, after, 1000, 0, &ev, &n, &next),
				 CORE_OK);
		for (i = 0; i < n; i++)
			fprintf(f, "event %lld %d %lld %s %s\n", (long long)ev[i].seq, ev[i].type,
				(long long)ev[i].at, ev[i].actor, ev[i].payload);
		store_events_free(ev, n);
		after = next;
	} while (n);
	ck_assert_int_eq(store_labels_count(st, "default", NULL, &counts), CORE_OK);
	js = json_dumps(counts, JSON_SORT_KEYS | JSON_COMPACT);
	fprintf(f, "labels %s\n", js);
	free(js);
	json_decref(counts);
	fclose(f);
	return buf;
}

/* A store whose snapshot has a dozen records (cards in chunks of 512, runs, events, floors),
 * with claims, runs, attention, deletes, and a journal tail after it. */
static char *load_fixture(void)
{
	static const char *const states[] = {"backlog", "ready", "in_progress", "review"};
	char *dir = fx_tmpdir(), id[32], lab[2][16], rid[32];
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_claim_result cr;
	struct core_card *c = NULL;
	struct core_run *r = NULL;
	size_t i;

	for (i = 0; i < 700; i++) {
		const char *lv[2] = {lab[0], lab[1]};
		struct core_strv labels = {.v = (char **)lv, .n = 2};
		struct store_card_create in = {.id = id, .title = id, .state = states[i % 4],
					       .labels = &labels, .priority = (int32_t)(i % 5)};

		snprintf(id, sizeof(id), "c%03zu", i);
		snprintf(lab[0], sizeof(lab[0]), "team-%zu", i % 7);
		snprintf(lab[1], sizeof(lab[1]), "prio-%zu", i % 3);
		ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
		core_card_free(c);
		if (i % 7 == 0) {
			struct store_run_create rin = {.id = rid, .card_id = id, .marker = "w1",
						       .status = i % 2 ? "failed" : "running",
						       .lease_ms = 5000};

			ck_assert_int_eq(store_card_claim(st, id, "w1", 60000 + (int64_t)i, &bot, &cr),
					 CORE_OK);
			if (i % 14 == 0) { /* released and deleted: its epoch floor stays */
				ck_assert_int_eq(store_card_release(st, id, &cr.token, &bot, &c),
						 CORE_OK);
				core_card_free(c);
				core_card_free(cr.card);
				ck_assert_int_eq(store_card_delete(st, id, &bot), CORE_OK);
				continue;
			}
			core_card_free(cr.card);
			snprintf(rid, sizeof(rid), "run-%03zu", i);
			ck_assert_int_eq(store_run_create(st, &rin, &bot, &r), CORE_OK);
			core_run_free(r);
		}
	}
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	for (i = 1; i < 60; i += 3) { /* the journal tail after the snapshot */
		if (i % 7 == 0)
			continue; /* claimed already */
		snprintf(id, sizeof(id), "c%03zu", i);
		ck_assert_int_eq(store_card_claim(st, id, "w2", 30000, &bot, &cr), CORE_OK);
		core_card_free(cr.card);
	}
	store_close(st);
	return dir;
}

START_TEST(threaded_load_equals_serial)
{
	char *dir = load_fixture(), *snap, *serial, *threaded;
	struct store *st;
	long size;

	ck_assert_int_gt(asprintf(&snap, "%s/snapshot.bin", dir), 0);
	size = fx_file_size(snap);
	ck_assert_int_gt(size, 100000); /* a dozen chunks at least */
	free(snap);
	st = open_load(dir, true);
	serial = load_view(st);
	store_close(st);
	st = open_load(dir, false);
	threaded = load_view(st);
	store_close(st);
	ck_assert(strstr(serial, "card ") && strstr(serial, "run ") && strstr(serial, "event "));
	ck_assert_str_eq(threaded, serial);
	free(serial);
	free(threaded);
	fx_rmdir(dir);
}
END_TEST

/* A damaged chunk in the middle of the snapshot, found by the decoding thread (its payload's
 * CRC) or by the framing (its header): the open is refused either way, as the serial load
 * refuses it, and nothing is left behind (the sanitizer builds run this). */
START_TEST(threaded_load_refuses_damage)
{
	char *dir = load_fixture(), *snap, err[256];
	long size, at[3];
	int serial, k;

	ck_assert_int_gt(asprintf(&snap, "%s/snapshot.bin", dir), 0);
	size = fx_file_size(snap);
	at[0] = size / 2;     /* inside a chunk's payload, most likely */
	at[1] = size - 200;   /* near the end: the last chunks */
	at[2] = 16 + 40;      /* the first record's payload */
	for (k = 0; k < 3; k++) {
		for (serial = 0; serial < 2; serial++) {
			struct store_fs_options o = {.dir = dir, .serial_load = serial};
			struct store *st = NULL;
			unsigned char byte;
			FILE *f = fopen(snap, "r+b");

			ck_assert_ptr_nonnull(f);
			ck_assert_int_eq(fseek(f, at[k], SEEK_SET), 0);
			ck_assert_int_eq(fread(&byte, 1, 1, f), 1);
			byte ^= 0x5a;
			ck_assert_int_eq(fseek(f, at[k], SEEK_SET), 0);
			ck_assert_int_eq(fwrite(&byte, 1, 1, f), 1);
			fclose(f);
			ck_assert_int_eq(store_fs_open(&o, &st, err, sizeof(err)),
					 CORE_ERR_STORE_UNAVAILABLE);
			ck_assert_ptr_null(st);
			ck_assert_msg(strstr(err, "damaged") != NULL, "%s", err);
			f = fopen(snap, "r+b"); /* mended for the next round */
			ck_assert_ptr_nonnull(f);
			ck_assert_int_eq(fseek(f, at[k], SEEK_SET), 0);
			byte ^= 0x5a;
			ck_assert_int_eq(fwrite(&byte, 1, 1, f), 1);
			fclose(f);
		}
	}
	store_close(open_load(dir, false)); /* mended: it opens */
	free(snap);
	fx_rmdir(dir);
}
END_TEST

static int cmp_lease_id(const void *a, const void *b)
{
	const struct core_card *x = *(const struct core_card *const *)a;
	const struct core_card *y = *(const struct core_card *const *)b;

	if (x->claim.lease_until != y->claim.lease_until)
		return x->claim.lease_until > y->claim.lease_until ? 1 : -1;
	return strcmp(x->id, y->id);
}

/* For several batch sizes: exactly the expired claims, lease then id, as a scan finds them. */
static void heap_check(struct store *st)
{
	static const size_t batches[] = {1, 2, 17, 100, 1000};
	size_t n_all, n_exp = 0, b, i, n;
	struct core_card **all = all_cards(st, &n_all), **exp, **v;

	exp = calloc(n_all ? n_all : 1, sizeof(*exp));
	ck_assert_ptr_nonnull(exp);
	for (i = 0; i < n_all; i++)
		if (core_claim_expired(all[i], fixed_now))
			exp[n_exp++] = all[i];
	qsort(exp, n_exp, sizeof(*exp), cmp_lease_id);
	for (b = 0; b < sizeof batches / sizeof batches[0]; b++) {
		v = NULL;
		ck_assert_int_eq(store_reaper_list_expired(st, batches[b], &v, &n), CORE_OK);
		ck_assert_uint_eq(n, n_exp < batches[b] ? n_exp : batches[b]);
		for (i = 0; i < n; i++)
			ck_assert_str_eq(v[i]->id, exp[i]->id);
		store_cards_free(v, n);
	}
	free(exp);
	store_cards_free(all, n_all);
}

START_TEST(claimed_heap_follows_every_path)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct core_token tok[300];
	struct core_card *c = NULL;
	char id[16], marker[16];
	unsigned seed = 7;
	int i;

	fixed_now = 1764670000000LL;
	store_clock_set(st, fixed_clock, NULL);
	for (i = 0; i < 300; i++) {
		snprintf(id, sizeof id, "h%03d", i);
		create(st, id);
	}
	/* claims with scrambled leases (some equal: the id breaks the tie) */
	for (i = 0; i < 300; i++) {
		struct store_claim_result cr;

		seed = seed * 1103515245u + 12345u;
		snprintf(id, sizeof id, "h%03d", i);
		snprintf(marker, sizeof marker, "w%03d", i);
		ck_assert_int_eq(store_card_claim(st, id, marker, 1000 + (seed >> 16) % 50 * 100, &bot,
						  &cr),
				 CORE_OK);
		tok[i] = (struct core_token){.marker = strdup(marker), .epoch = cr.token.epoch};
		core_card_free(cr.card);
	}
	fixed_now += 3000;
	heap_check(st);
	/* renewals move leases up, releases and deletes take claims out */
	for (i = 0; i < 300; i += 3) {
		snprintf(id, sizeof id, "h%03d", i);
		ck_assert_int_eq(store_card_renew(st, id, &tok[i], 500 + i * 20, &bot, &c), CORE_OK);
		core_card_free(c);
	}
	for (i = 1; i < 300; i += 7) {
		snprintf(id, sizeof id, "h%03d", i);
		ck_assert_int_eq(store_card_release(st, id, &tok[i], &bot, &c), CORE_OK);
		core_card_free(c);
	}
	for (i = 2; i < 300; i += 11) {
		snprintf(id, sizeof id, "h%03d", i);
		ck_assert_int_eq(store_card_delete(st, id, &bot), CORE_OK);
	}
	heap_check(st);
	fixed_now += 2000;
	heap_check(st);
	/* transfers to a recovery marker, then a rolled-back renewal */
	for (i = 4; i < 300; i += 13) {
		snprintf(id, sizeof id, "h%03d", i);
		if (store_reaper_transfer(st, id, &tok[i], "reaper:h", 100, &c) == CORE_OK)
			core_card_free(c);
	}
	heap_check(st);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(store_card_renew(st, "h000", &tok[0], 900000, &bot, &c),
			 CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	heap_check(st);
	/* rebuilt from the snapshot and the journal */
	create(st, "after"); /* re-establishes the journal */
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	store_clock_set(st, fixed_clock, NULL);
	heap_check(st);
	fixed_now += 100000;
	heap_check(st);
	store_close(st);
	for (i = 0; i < 300; i++)
		free((char *)tok[i].marker);
	fx_rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store-fs");
	TCase *tc = tcase_create("durability");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, restart_loses_nothing);
	tcase_add_test(tc, attention_index_agrees);
	tcase_add_test(tc, compaction_keeps_everything);
	tcase_add_test(tc, background_compaction);
	tcase_add_test(tc, group_commit_shares_syncs);
	tcase_add_test(tc, one_write_per_group);
	tcase_add_test(tc, compaction_hands_unwritten_records_over);
	tcase_add_test(tc, compaction_flushes_what_it_captured);
	tcase_add_test(tc, large_group_is_written_whole);
	tcase_add_test(tc, compaction_under_concurrent_writes);
	tcase_add_test(tc, second_open_refused);
	tcase_add_test(tc, refused_write_is_not_applied);
	tcase_add_test(tc, events_tail_bounded);
	tcase_add_test(tc, board_seq_survives_trim_restart_snapshot);
	tcase_add_test(tc, dependents_index_follows_every_path);
	tcase_add_test(tc, owned_write_with_release_is_one_line);
	tcase_add_test(tc, owned_write_release_fallback);
	tcase_add_test(tc, claimed_set_follows_every_path);
	tcase_add_test(tc, posting_lists_follow_every_path);
	tcase_add_test(tc, claimed_heap_follows_every_path);
	tcase_add_test(tc, effects_survive_restart_and_compaction);
	tcase_add_test(tc, threaded_load_equals_serial);
	tcase_add_test(tc, threaded_load_refuses_damage);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, store_fs_crash_tcase());
	suite_add_tcase(s, store_fs_segment_tcase());
	suite_add_tcase(s, store_fs_fence_tcase());
	suite_add_tcase(s, store_fs_runs_tcase());
	suite_add_tcase(s, store_fs_open_tcase());
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
