/* Measures one reaper pass over N expired claims whose runs finished, on a fresh FS store.
 *   build/bench/reaper_pass [N] [workers] [dir]
 * Setup (cards, claims, runs) uses 16 threads so its writes share the group commit; the
 * clock is injected and moved past the lease, then one gated pass with batch = N is timed.
 * Prints the pass stats, the wall time of the pass and its CPU (all threads). workers 0: the
 * server's default. */
#include "core/core.h"
#include "server/reaper.h"
#include "store/store_twins.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define LEASE 60000LL

static int64_t now_ms = 1764670000000LL;
static struct store *st;
static size_t n_cards;
static size_t next_card;
static const struct store_actor actor = {.name = "bench"};

static int64_t bench_clock(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&now_ms, __ATOMIC_SEQ_CST);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU (user + system) of this process so far, all threads, in seconds. */
static double cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void must(enum core_rc rc, const char *what)
{
	if (rc != CORE_OK) {
		fprintf(stderr, "reaper_pass: %s: %s\n", what, core_rc_code(rc));
		exit(1);
	}
}

static void *setup_worker(void *arg)
{
	char id[32], run[32], marker[32];
	size_t i;

	(void)arg;
	while ((i = __atomic_fetch_add(&next_card, 1, __ATOMIC_RELAXED)) < n_cards) {
		struct store_card_create in = {.id = id, .state = "in_progress", .title = "bench"};
		struct store_claim_result res = {0};
		struct core_card *c = NULL;
		struct core_run *r = NULL;
		struct store_run_create rc = {.id = run, .card_id = id, .marker = marker,
					      .status = "running", .lease_ms = LEASE};
		struct store_run_update ru = {.marker = marker, .status = "finished",
					      .lease_ms = LEASE};
		struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .run_id = run};

		snprintf(id, sizeof(id), "card-%zu", i);
		snprintf(run, sizeof(run), "run-%zu", i);
		snprintf(marker, sizeof(marker), "worker-%zu", i);
		must(store_card_create(st, &in, &actor, &c), "create");
		core_card_free(c);
		must(store_card_claim(st, id, marker, LEASE, &actor, &res), "claim");
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

static void quiet(void *ctx, const char *line)
{
	(void)ctx;
	(void)line;
}

int main(int argc, char **argv)
{
	size_t workers = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 4;
	char dir[256], err[256] = "", cmd[300];
	struct store_fs_options o = {0};
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000, .lease_ms = LEASE,
					   .hostname = "bench", .log = quiet};
	struct server_reaper *r = NULL;
	struct server_reaper_stats s;
	pthread_t th[16];
	double t0, t1, c0, c1;
	int k;

	n_cards = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 10000;
	snprintf(dir, sizeof(dir), "%s/boardd-reaper-bench-XXXXXX", argc > 3 ? argv[3] : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	o.dir = dir;
	must(store_fs_open(&o, &st, err, sizeof(err)), err);
	store_clock_set(st, bench_clock, NULL);
	t0 = mono_s();
	for (k = 0; k < 16; k++)
		pthread_create(&th[k], NULL, setup_worker, NULL);
	for (k = 0; k < 16; k++)
		pthread_join(th[k], NULL);
	t1 = mono_s();
	printf("setup: %zu cards claimed with finished runs in %.2f s (%.0f writes/s)\n", n_cards,
	       t1 - t0, 5.0 * (double)n_cards / (t1 - t0));
	__atomic_add_fetch(&now_ms, LEASE + 1, __ATOMIC_SEQ_CST);
	cfg.batch = n_cards;
	cfg.workers = workers;
	must(server_reaper_new(st, &cfg, &r), "reaper");
	t0 = mono_s();
	c0 = cpu_s();
	must(server_reaper_pass(r, &s), "pass");
	t1 = mono_s();
	c1 = cpu_s();
	printf("reaper pass: %zu expired claims, workers %zu: listed %zu transferred %zu complete "
	       "%zu errors %zu in %.3f s (%.0f cards/s), CPU %.3f s (%.1f us per claim)\n",
	       n_cards, workers, s.listed, s.transferred, s.actions[CORE_STUCK_COMPLETE], s.errors,
	       t1 - t0, (double)s.listed / (t1 - t0), c1 - c0,
	       s.listed ? (c1 - c0) * 1e6 / (double)s.listed : 0.0);
	server_reaper_free(r);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 && s.errors == 0 ? 0 : 1;
}
