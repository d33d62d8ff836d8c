/* cold_open — the FS store's open alone, in-process, repeated: the cold start's CPU without
 * exec, HTTP or the token file (bench/scale.c times the whole server start).
 *
 *   cold_open DIR [rounds 3] [serial]
 *
 * CPU is also split: the opening thread's own (RUSAGE_THREAD) and the rest (the snapshot's
 * second, applying thread): on an idle two-core machine the open takes about the larger of
 * the two, which a busy machine's wall clock cannot show.
 *
 * DIR is a data directory (e.g. one kept by `scale -k`; the open only reads it, but it takes
 * the directory's lock: not one a server is using). Each round opens the store, closes it,
 * and prints the open's wall and CPU (user + system, every thread of this process) time; then
 * the minimum and median of each. For `perf record -g build-bench/bench/cold_open DIR 3`. */
#include "store/store_twins.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_ROUNDS 50

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double cpu_ms(int who)
{
	struct rusage ru;

	if (getrusage(who, &ru) != 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	double wall[MAX_ROUNDS], cpu[MAX_ROUNDS], own[MAX_ROUNDS], other[MAX_ROUNDS];
	char err[512] = "";
	long rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 3;
	bool serial = argc > 3 && strcmp(argv[3], "serial") == 0;
	long i;

	if (argc < 2 || argc > 4 || rounds < 1 || rounds > MAX_ROUNDS || (argc > 3 && !serial)) {
		fprintf(stderr, "usage: cold_open DIR [rounds 1..%d, default 3] [serial]\n",
			MAX_ROUNDS);
		return 2;
	}
	for (i = 0; i < rounds; i++) {
		struct store_fs_options o = {.dir = argv[1], .serial_load = serial};
		struct store *st = NULL;
		double w0 = mono_ms(), c0 = cpu_ms(RUSAGE_SELF), t0 = cpu_ms(RUSAGE_THREAD);
		enum core_rc rc = store_fs_open(&o, &st, err, sizeof err);

		wall[i] = mono_ms() - w0;
		cpu[i] = cpu_ms(RUSAGE_SELF) - c0;
		own[i] = cpu_ms(RUSAGE_THREAD) - t0;
		other[i] = cpu[i] - own[i];
		if (rc != CORE_OK) {
			fprintf(stderr, "cold_open: %s: %s\n", argv[1], err);
			return 1;
		}
		store_close(st);
		printf("round %ld: open %.1f ms wall, %.1f ms CPU (opening thread %.1f, others %.1f)\n",
		       i + 1, wall[i], cpu[i], own[i], other[i]);
		fflush(stdout);
	}
	qsort(wall, (size_t)rounds, sizeof(*wall), cmp_double);
	qsort(cpu, (size_t)rounds, sizeof(*cpu), cmp_double);
	qsort(own, (size_t)rounds, sizeof(*own), cmp_double);
	qsort(other, (size_t)rounds, sizeof(*other), cmp_double);
	printf("open of %s (%s), %ld rounds: wall min %.1f median %.1f ms; CPU min %.1f median "
	       "%.1f ms (opening thread median %.1f, others %.1f)\n",
	       argv[1], serial ? "serial" : "two threads", rounds, wall[0], wall[rounds / 2],
	       cpu[0], cpu[rounds / 2], own[rounds / 2], other[rounds / 2]);
	return 0;
}
