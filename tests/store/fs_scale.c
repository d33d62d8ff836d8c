/* fs_scale — what the FS twin costs at 10k..100k cards. Built, not a test: it prints figures.
 *
 *   build-fs/tests/store/fs_scale [-n 10000,30000,100000] [-t TAIL] [-d DIR] [-k]
 *
 * For each N, in a fresh directory under DIR (default $TMPDIR or /tmp):
 *   1. create N cards with 16 threads (two labels each, a 200-byte body, one card in ten
 *      blocked by an earlier card), then a snapshot (store_fs_compact);
 *   2. a journal tail after that snapshot: TAIL cards (default min(10000, N)) each get a claim,
 *      a run created and finished, and last_run set (4 journal lines each);
 *   3. close, then reopen in a fresh child process (so its RSS is the open's alone), timing
 *      store_fs_open (wall and CPU: on a busy machine the CPU time is the stable figure) and
 *      reading VmRSS / VmHWM from /proc/self/status; then once more, after a compaction, from
 *      the snapshot alone.
 * After step 2 it times the attention lane (one run in a hundred of the tail failed).
 * -k keeps the directories. */
#include "core/core.h"
#include "store/store_twins.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS 16
#define LEASE 60000

static const struct store_actor actor = {.name = "scale"};
static struct store *st;
static size_t n_cards, n_tail, next;

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void must(enum core_rc rc, const char *what)
{
	if (rc != CORE_OK) {
		fprintf(stderr, "fs_scale: %s: %s\n", what, core_rc_code(rc));
		exit(1);
	}
}

static void *create_worker(void *arg)
{
	static const char body[] =
		"Some body text of a realistic length: what to do, where the logs are, who asked "
		"for it, and a link or two: https://example.invalid/issue/12345 and so on, about "
		"two hundred bytes in all.";
	char id[32], blk[32], team[16], prio[16];
	size_t i;

	(void)arg;
	while ((i = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED)) < n_cards) {
		char *lv[2] = {team, prio}, *bv[1] = {blk};
		struct core_strv labels = {lv, 2}, blockers = {bv, 1};
		struct store_card_create in = {.id = id, .title = "a card of the scale run",
					       .body = body, .labels = &labels,
					       .state = i % 3 ? "backlog" : "ready"};
		struct core_card *c = NULL;

		snprintf(id, sizeof(id), "card-%07zu", i);
		snprintf(team, sizeof(team), "team-%zu", i % 20);
		snprintf(prio, sizeof(prio), "prio-%zu", i % 4);
		/* An earlier card of another thread's stripe, long created by now. */
		if (i % 10 == 9 && i >= 1000) {
			snprintf(blk, sizeof(blk), "card-%07zu", i - 1000);
			in.blockers = &blockers;
		}
		must(store_card_create(st, &in, &actor, &c), "create");
		core_card_free(c);
	}
	return NULL;
}

static void *tail_worker(void *arg)
{
	char id[32], run[32], marker[32];
	size_t i;

	(void)arg;
	while ((i = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED)) < n_tail) {
		struct store_claim_result res = {0};
		struct store_run_create rc = {.id = run, .card_id = id, .marker = marker,
					      .status = "running", .lease_ms = LEASE};
		/* One run in a hundred fails: the attention lane's candidates. */
		struct store_run_update ru = {.marker = marker,
					      .status = i % 100 ? "finished" : "failed",
					      .lease_ms = LEASE};
		struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .run_id = run};
		struct core_card *c = NULL;
		struct core_run *r = NULL;

		/* Cards in "ready" (every third one) can be claimed. */
		snprintf(id, sizeof(id), "card-%07zu", (i * 3) % n_cards);
		snprintf(run, sizeof(run), "run-%07zu", i);
		snprintf(marker, sizeof(marker), "worker-%zu", i);
		/* A card whose blocker is not done refuses claims (DESIGN §11): skip it. */
		enum core_rc crc = store_card_claim(st, id, marker, LEASE, &actor, &res);

		if (crc == CORE_ERR_BLOCKERS_PENDING)
			continue;
		must(crc, "claim");
		w.token.marker = marker;
		w.token.epoch = res.token.epoch;
		core_card_free(res.card);
		must(store_run_create(st, &rc, &actor, &r), "run create");
		core_run_free(r);
		must(store_run_update(st, run, &ru, &actor, &r), "run update");
		core_run_free(r);
		must(store_card_owned_write(st, id, &w, &actor, &c), "last run");
		core_card_free(c);
	}
	return NULL;
}

static double run_threads(void *(*fn)(void *))
{
	pthread_t th[THREADS];
	double t0 = mono_s();
	int k;

	next = 0;
	for (k = 0; k < THREADS; k++)
		if (pthread_create(&th[k], NULL, fn, NULL) != 0)
			must(CORE_ERR_INTERNAL, "pthread_create");
	for (k = 0; k < THREADS; k++)
		pthread_join(th[k], NULL);
	return mono_s() - t0;
}

/* A /proc/self/status field in MiB. */
static double status_mib(const char *field)
{
	char line[256];
	size_t fl = strlen(field);
	double kib = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, field, fl) == 0 && line[fl] == ':')
			kib = strtod(line + fl + 1, NULL);
	if (f)
		fclose(f);
	return kib / 1024.0;
}

static double file_mib(const char *dir, const char *name)
{
	char path[1100];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &sb) == 0 ? (double)sb.st_size / (1024.0 * 1024.0) : 0;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Child mode: open DIR, print "open_s cpu_s rss_mib hwm_mib" on one line. The CPU time is the
 * figure that survives a busy machine; the wall time is what a restart costs. */
static int open_only(const char *dir)
{
	struct store_fs_options o = {.dir = dir};
	struct store_card_filter f = {.claimed = 1, .limit = 1};
	struct core_card **v = NULL;
	char err[256] = "", *nx = NULL;
	double t0, t1, c0, c1;
	size_t n = 0;

	c0 = cpu_s();
	t0 = mono_s();
	must(store_fs_open(&o, &st, err, sizeof(err)), err);
	t1 = mono_s();
	c1 = cpu_s();
	must(store_card_list(st, &f, &v, &n, &nx), "list");
	printf("%.3f %.3f %.1f %.1f\n", t1 - t0, c1 - c0, status_mib("VmRSS"), status_mib("VmHWM"));
	store_cards_free(v, n);
	free(nx);
	store_close(st);
	return 0;
}

static void reopen(const char *self, const char *dir, const char *what)
{
	char cmd[2200], line[256];
	double open_s = 0, cpu = 0, rss = 0, hwm = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "'%s' --open '%s'", self, dir);
	p = popen(cmd, "r");
	if (!p || !fgets(line, sizeof(line), p) ||
	    sscanf(line, "%lf %lf %lf %lf", &open_s, &cpu, &rss, &hwm) != 4) {
		fprintf(stderr, "fs_scale: reopen of %s failed\n", dir);
		exit(1);
	}
	pclose(p);
	printf("  reopen (%s): %.3f s (cpu %.3f s), VmRSS %.1f MiB, VmHWM %.1f MiB\n", what,
	       open_s, cpu, rss, hwm);
}

static void one_size(const char *self, const char *base, size_t n, size_t tail, bool keep)
{
	struct store_fs_options o = {0};
	struct store_fs_stats s;
	char dir[512], err[256] = "", cmd[600];
	double t_create, t_snap, t_tail, t_attn, t0;
	size_t n_attn = 0;
	int k;

	snprintf(dir, sizeof(dir), "%s/boardd-fs-scale-XXXXXX", base);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	o.dir = dir;
	must(store_fs_open(&o, &st, err, sizeof(err)), err);
	n_cards = n;
	n_tail = tail < n / 3 ? tail : n / 3;
	t_create = run_threads(create_worker);
	t0 = mono_s();
	must(store_fs_compact(st), "compact");
	t_snap = mono_s() - t0;
	t_tail = run_threads(tail_worker);
	t0 = mono_s();
	for (k = 0; k < 100; k++) {
		struct store_attention *av = NULL;
		bool truncated;

		must(store_attention_list(st, NULL, NULL, 1000, &av, &n_attn, &truncated),
		     "attention");
		store_attention_free(av, n_attn);
	}
	t_attn = (mono_s() - t0) / 100;
	must(store_fs_stats_get(st, &s), "stats");
	printf("%zu cards: created in %.2f s (%.0f cards/s), VmRSS %.1f MiB (writer process)\n",
	       n, t_create, (double)n / t_create, status_mib("VmRSS"));
	printf("  snapshot %.1f MiB written in %.3f s; tail of %zu claims (%zu lines) in %.2f s, "
	       "journal %.1f MiB\n",
	       file_mib(dir, "snapshot.bin"), t_snap, n_tail, 4 * n_tail, t_tail,
	       (double)s.journal_bytes / (1024.0 * 1024.0));
	printf("  attention lane (GET /v1/attention's store call): %zu cards in %.1f us per "
	       "listing, read from its indexes\n", n_attn, t_attn * 1e6);
	store_close(st);
	reopen(self, dir, "snapshot + journal");
	must(store_fs_open(&o, &st, err, sizeof(err)), err);
	must(store_fs_compact(st), "compact");
	store_close(st);
	reopen(self, dir, "snapshot only");
	if (keep) {
		printf("  kept %s\n", dir);
	} else {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "fs_scale: could not remove %s\n", dir);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *sizes = "10000,30000,100000", *base = getenv("TMPDIR");
	size_t tail = 10000;
	bool keep = false;
	char *list, *tok, *save = NULL;
	int opt;

	if (argc == 3 && strcmp(argv[1], "--open") == 0)
		return open_only(argv[2]);
	if (!base || !*base)
		base = "/tmp";
	while ((opt = getopt(argc, argv, "n:t:d:k")) != -1) {
		switch (opt) {
		case 'n':
			sizes = optarg;
			break;
		case 't':
			tail = (size_t)strtoul(optarg, NULL, 10);
			break;
		case 'd':
			base = optarg;
			break;
		case 'k':
			keep = true;
			break;
		default:
			fprintf(stderr, "usage: %s [-n N,N..] [-t TAIL] [-d DIR] [-k]\n", argv[0]);
			return 2;
		}
	}
	list = strdup(sizes);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		one_size(argv[0], base, (size_t)strtoul(tok, NULL, 10), tail, keep);
	free(list);
	return 0;
}
