/* fs_next_bench — claim-next on the FS twin with many scheduled cards (DESIGN §17, issue 27:
 * 1M cards, 100k of them scheduled, claim-next p99 < 1 ms). Built, not a test: it prints
 * figures.
 *
 *   build/tests/store/fs_next_bench [-n 1000000] [-s 100000] [-k 10000] [-d DIR] [-r]
 *
 * In a fresh directory under DIR (default $TMPDIR or /tmp): N cards in ready (16 threads),
 * S of them (spread evenly) at priority 10 scheduled a day ahead, so every card claim-next
 * ranks first is not claimable yet; then K claim-nexts on one thread, each timed (the
 * store's whole step: the pick, the claim, its journal line and its fdatasync), with p50,
 * p99, p99.9 and max, in wall time and in the calling thread's CPU time (the stable figure on
 * a shared machine). -r: first close and reopen, so the indexes are the load's. */
#include "core/core.h"
#include "store/store_twins.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS 16

static const struct store_actor actor = {.name = "bench"};
static struct store *st;
static size_t n_cards, every;
static size_t next_i;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t t0;

static double clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double mono_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

static void must(enum core_rc rc, const char *what)
{
	if (rc != CORE_OK) {
		fprintf(stderr, "fs_next_bench: %s: %s\n", what, core_rc_code(rc));
		exit(1);
	}
}

static void *loader(void *arg)
{
	(void)arg;
	for (;;) {
		struct store_card_create in = {.title = "t", .state = "ready"};
		struct core_card *c = NULL;
		size_t i;

		pthread_mutex_lock(&mu);
		i = next_i++;
		pthread_mutex_unlock(&mu);
		if (i >= n_cards)
			return NULL;
		if (every && i % every == 0) {
			in.priority = 10;
			in.not_before = t0 + 24LL * 3600 * 1000;
		}
		must(store_card_create(st, &in, &actor, &c), "create");
		core_card_free(c);
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static struct store *open_dir(const char *dir)
{
	struct store_fs_options o = {.dir = dir};
	struct store *s = NULL;
	char err[256];

	if (store_fs_open(&o, &s, err, sizeof err) != CORE_OK) {
		fprintf(stderr, "fs_next_bench: open %s: %s\n", dir, err);
		exit(1);
	}
	return s;
}

int main(int argc, char **argv)
{
	size_t n_sched = 100000, k = 10000, i;
	const char *base = getenv("TMPDIR");
	pthread_t th[THREADS];
	bool reopen = false;
	double *lat, *cpu, t, c, load_ms;
	char *dir;
	int opt;

	n_cards = 1000000;
	while ((opt = getopt(argc, argv, "n:s:k:d:r")) != -1) {
		switch (opt) {
		case 'n': n_cards = strtoull(optarg, NULL, 10); break;
		case 's': n_sched = strtoull(optarg, NULL, 10); break;
		case 'k': k = strtoull(optarg, NULL, 10); break;
		case 'd': base = optarg; break;
		case 'r': reopen = true; break;
		default:
			fprintf(stderr, "usage: %s [-n N] [-s S] [-k K] [-d DIR] [-r]\n", argv[0]);
			return 2;
		}
	}
	if (!base || !*base)
		base = "/tmp";
	if (asprintf(&dir, "%s/fs-next-bench-XXXXXX", base) < 0 || !mkdtemp(dir))
		return 1;
	every = n_sched ? n_cards / n_sched : 0;
	st = open_dir(dir);
	t0 = store_now(st);
	t = mono_ms();
	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, loader, NULL);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	load_ms = mono_ms() - t;
	must(store_fs_compact(st), "compact");
	if (reopen) {
		store_close(st);
		t = mono_ms();
		st = open_dir(dir);
		printf("reopen: %.0f ms\n", mono_ms() - t);
	}
	lat = calloc(k, sizeof(*lat));
	cpu = calloc(k, sizeof(*cpu));
	for (i = 0; i < k; i++) {
		struct store_claim_next in = {.board = "default", .marker = "w", .lease_ms = 3600000,
					      .holder = actor.name};
		struct store_claim_result r;

		t = mono_ms();
		c = clock_ms(CLOCK_THREAD_CPUTIME_ID);
		must(store_card_claim_next(st, &in, &actor, &r), "claim-next");
		cpu[i] = clock_ms(CLOCK_THREAD_CPUTIME_ID) - c;
		lat[i] = mono_ms() - t;
		if (!r.card || r.card->priority != 0) {
			fprintf(stderr, "fs_next_bench: claim-next took %s\n",
				r.card ? "a scheduled card" : "nothing");
			return 1;
		}
		core_card_free(r.card);
	}
	qsort(lat, k, sizeof(*lat), cmp_d);
	qsort(cpu, k, sizeof(*cpu), cmp_d);
	printf("cards %zu, scheduled %zu (every %zu-th), load %.1f s\n", n_cards,
	       every ? n_cards / every : 0, every, load_ms / 1e3);
	printf("claim-next x %zu: p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms\n", k,
	       lat[k / 2], lat[k * 99 / 100], lat[k * 999 / 1000], lat[k - 1]);
	/* The calling thread's CPU: the pick and the commit without the waits (the stable figure
	 * on a shared machine; the group's write and fdatasync run on this thread too). */
	printf("  its thread's CPU: p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms\n",
	       cpu[k / 2], cpu[k * 99 / 100], cpu[k * 999 / 1000], cpu[k - 1]);
	store_close(st);
	free(lat);
	free(cpu);
	{
		char *cmd;

		if (asprintf(&cmd, "rm -rf '%s'", dir) > 0 && system(cmd) != 0)
			fprintf(stderr, "fs_next_bench: could not remove %s\n", dir);
	}
	return 0;
}
