/* runs_history — what a card's run history costs the FS twin (DESIGN §20): CPU per run
 * created (a card created and claimed every P runs, included) as the run table grows, with
 * the history bound at work once P passes 50, the process's peak RSS, and a card's listing.
 * Prints figures; asserts nothing.
 *
 *   build/bench/runs_history DIR [RUNS [P]]     (defaults 200000 runs, 4 per card)
 *
 * DIR must be empty (a tmpfs such as /dev/shm keeps fdatasync out of the figure). */
#include "core/core.h"
#include "store/store.h"
#include "store/store_twins.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static double cpu_s(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
	       (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	const struct store_actor actor = {.name = "bench"};
	struct store_fs_options o = {0};
	struct store *st = NULL;
	struct store_run_filter f = {.card_id = "c0", .limit = 100};
	struct core_run **v = NULL;
	char err[256], id[32], *next = NULL;
	size_t total = argc > 2 ? (size_t)atol(argv[2]) : 200000;
	size_t per = argc > 3 ? (size_t)atol(argv[3]) : 4, made = 0, card, k, n = 0;
	double c0, step_c;
	struct rusage u;
	int j;

	if (argc < 2 || per == 0 || total < 5) {
		fprintf(stderr, "usage: runs_history DIR [RUNS [PER_CARD]]\n");
		return 2;
	}
	o.dir = argv[1];
	if (store_fs_open(&o, &st, err, sizeof err) != CORE_OK) {
		fprintf(stderr, "runs_history: %s\n", err);
		return 1;
	}
	c0 = step_c = cpu_s();
	for (card = 0; made < total; card++) {
		struct store_card_create in = {.id = id, .state = "ready"};
		struct store_claim_result cr = {0};
		struct core_card *c = NULL;

		snprintf(id, sizeof id, "c%zu", card);
		if (store_card_create(st, &in, &actor, &c) != CORE_OK ||
		    store_card_claim(st, id, "m", 60000, &actor, &cr) != CORE_OK)
			return 1;
		core_card_free(c);
		core_card_free(cr.card);
		for (k = 0; k < per && made < total; k++) {
			struct store_run_create rc = {.card_id = id, .marker = "m",
						      .status = "finished", .lease_ms = 60000};
			struct core_run *r = NULL;

			if (store_run_create(st, &rc, &actor, &r) != CORE_OK)
				return 1;
			core_run_free(r);
			if (++made % (total / 5) == 0) {
				printf("runs %zu: %.1f us CPU per run over the last %zu\n", made,
				       (cpu_s() - step_c) / (double)(total / 5) * 1e6, total / 5);
				step_c = cpu_s();
			}
		}
	}
	printf("all: %.1f us CPU per run (%zu per card)\n", (cpu_s() - c0) / (double)total * 1e6,
	       per);
	c0 = cpu_s();
	for (j = 0; j < 1000; j++) {
		if (store_run_list(st, &f, &v, &n, &next) != CORE_OK)
			return 1;
		store_runs_free(v, n);
		free(next);
	}
	printf("a card's listing (%zu runs): %.1f us CPU\n", n, (cpu_s() - c0) / 1000 * 1e6);
	getrusage(RUSAGE_SELF, &u);
	printf("peak RSS: %ld KiB\n", u.ru_maxrss);
	store_close(st);
	return 0;
}
