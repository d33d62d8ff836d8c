/* bench/green.c's coroutines: every worker runs to its end on its loop, and what it keeps
 * across a switch (locals in callee-saved registers, doubles, its stack) is what it left
 * there, whichever other workers ran meanwhile. On x86-64 the switch is green.c's own (no
 * swapcontext, which cost 2 syscalls per request: see green.c); elsewhere and under ASan/TSan,
 * ucontext. */
#include "bench/bench.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WORKERS 48
#define ROUNDS 300

struct worker {
	unsigned id;
	uint64_t sum;     /* the integer fold, recomputed by the test */
	double fsum;      /* the same over doubles */
	bool ran_on_loop; /* bench_green_on() inside */
	unsigned rounds;  /* completed */
};

/* A frame with a buffer on the coroutine's stack, filled before the switch and checked after
 * it: a switch that restored another stack (or none) fails here. */
static __attribute__((noinline)) bool deep(unsigned id, unsigned depth)
{
	volatile unsigned char buf[512];
	size_t i;
	bool ok;

	for (i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)(id * 31u + depth + i);
	if (depth)
		ok = deep(id, depth - 1);
	else {
		bench_green_sleep_ms(0); /* back to the loop: the other workers run */
		ok = true;
	}
	for (i = 0; i < sizeof buf; i++)
		ok &= buf[i] == (unsigned char)(id * 31u + depth + i);
	return ok;
}

static void worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t a = w->id, b = (uint64_t)w->id * 7919u + 1;
	double f = w->id + 0.5;
	unsigned r;

	w->ran_on_loop = bench_green_on();
	for (r = 0; r < ROUNDS; r++) {
		a = a * 6364136223846793005u + b; /* kept in registers across the switch */
		f = f * 1.0000001 + (double)(r & 7);
		if (!deep(w->id, r % 4))
			return; /* w->rounds tells the test it stopped short */
		w->sum += a ^ (a >> 29);
		w->fsum += f;
		w->rounds++;
	}
}

START_TEST(workers_keep_their_state_across_switches)
{
	static struct worker ws[WORKERS];
	void *args[WORKERS];
	struct bench_green *g;
	unsigned threads = (unsigned)_i + 1, i, r;

	memset(ws, 0, sizeof ws);
	for (i = 0; i < WORKERS; i++) {
		ws[i].id = i;
		args[i] = &ws[i];
	}
	g = bench_green_start(WORKERS, threads, worker_main, args);
	ck_assert_ptr_nonnull(g);
	bench_green_join(g);
	for (i = 0; i < WORKERS; i++) {
		uint64_t a = i, b = (uint64_t)i * 7919u + 1, sum = 0;
		double f = i + 0.5, fsum = 0;

		for (r = 0; r < ROUNDS; r++) {
			a = a * 6364136223846793005u + b;
			f = f * 1.0000001 + (double)(r & 7);
			sum += a ^ (a >> 29);
			fsum += f;
		}
		ck_assert_msg(ws[i].ran_on_loop, "worker %u did not run on a loop", i);
		ck_assert_uint_eq(ws[i].rounds, ROUNDS);
		ck_assert_msg(ws[i].sum == sum, "worker %u: integer state lost across a switch", i);
		ck_assert_msg(ws[i].fsum == fsum, "worker %u: double state lost across a switch", i);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("green");
	TCase *tc = tcase_create("switch");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, workers_keep_their_state_across_switches, 0, 3); /* 1-3 loops */
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
