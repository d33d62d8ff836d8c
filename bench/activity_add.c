/* The cost of one per-board activity count (metrics/activity.h, issue 30) on the claim path:
 * ns per activity_add with the table full (ACTIVITY_BOARDS_MAX boards; the counted board the
 * last one scanned), from 1 and 2 threads on boards of their own, and with every count on a
 * new board (each one giving up the least recently used board's place). Prints figures only.
 *
 * usage: activity_add [n]   (n counts per thread; default 2 000 000) */
#include "metrics/activity.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long n_adds = 2000000;
static struct activity *ring;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *adder(void *arg)
{
	const char *board = arg;
	int64_t t = activity_now_ms();
	long i;

	for (i = 0; i < n_adds; i++)
		activity_add(ring, board, ACTIVITY_CLAIMS, 1, t);
	return NULL;
}

static double threads(int k)
{
	static const char *boards[] = {"bench-62", "bench-63"};
	pthread_t th[2];
	double t0 = now_s();
	int i;

	for (i = 0; i < k; i++)
		pthread_create(&th[i], NULL, adder, (void *)boards[i]);
	for (i = 0; i < k; i++)
		pthread_join(th[i], NULL);
	return (now_s() - t0) * 1e9 / (double)n_adds;
}

int main(int argc, char **argv)
{
	char name[32];
	int64_t t;
	double t0;
	long i;

	if (argc > 1)
		n_adds = atol(argv[1]);
	if (n_adds < 1 || !(ring = activity_new()))
		return 1;
	t = activity_now_ms();
	for (i = 0; i < ACTIVITY_BOARDS_MAX; i++) {
		snprintf(name, sizeof name, "bench-%ld", i);
		activity_add(ring, name, ACTIVITY_CLAIMS, 1, t);
	}
	printf("activity_add, %d boards kept, %ld counts per thread\n", ACTIVITY_BOARDS_MAX, n_adds);
	printf("  1 thread:  %.1f ns per count\n", threads(1));
	printf("  2 threads: %.1f ns per count per thread (wall / counts of one thread)\n",
	       threads(2));
	t0 = now_s();
	for (i = 0; i < n_adds / 10; i++) {
		snprintf(name, sizeof name, "new-%ld", i);
		activity_add(ring, name, ACTIVITY_CLAIMS, 1, t + i);
	}
	printf("  a new board each count (a place given up each time): %.1f ns per count\n",
	       (now_s() - t0) * 1e9 / (double)(n_adds / 10));
	activity_free(ring);
	return 0;
}
