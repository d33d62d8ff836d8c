/* Event-loop workers for the cycle runner: each worker runs as a coroutine (its own stack; the
 * switch below) on one of a few OS threads, each thread an epoll loop over its workers'
 * sockets. The driver's code is unchanged: the HTTP client's send and receive, when they would
 * block inside a coroutine, park it on its socket (bench_green_wait) and the loop runs another
 * one.
 *
 * Why: with one blocking OS thread per worker, every answer wakes a sleeping thread of the load
 * generator (a context switch on each side of the loopback, and the server's sendmsg paying the
 * wake-up); on this 2-core machine the client's CPU is taken from the server's. A loop thread
 * that is already running when the next answers arrive takes them without being woken. The
 * requests, their concurrency (one in flight per worker, each on its own keep-alive
 * connection) and the checks on every answer are the same as with threads. */
#include "bench/bench.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <stdint.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define GREEN_STACK (256u * 1024u)

/* The switch between a coroutine and its loop. glibc's swapcontext saves and restores the
 * signal mask: an rt_sigprocmask syscall on each side, 2 of the client's ~4.1 syscalls per
 * request (perf trace -s, stop 22: in the history of bench/README.md). On x86-64 the switch is the System V
 * ABI's callee-saved registers and the stack pointer, in user space (the mask never changes
 * here: no coroutine touches it). Elsewhere, and under ASan or TSan (which follow stacks
 * through swapcontext only), ucontext as before. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GREEN_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GREEN_SANITIZED 1
#endif
#if defined(__x86_64__) && !defined(GREEN_SANITIZED)
#define GREEN_ASM 1
/* Pushes rbp, rbx, r12-r15 on the current stack, stores the stack pointer in *from, takes
 * `to` as the stack pointer and pops them from it (what green_switch pushed there, or
 * co_init's zeros), then returns to the address above them. */
void bench_green_switch(void **from, void *to);
__asm__(".text\n"
	".globl bench_green_switch\n"
	".hidden bench_green_switch\n"
	".type bench_green_switch, @function\n"
	"bench_green_switch:\n"
	"\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
	"\tmovq %rsp, (%rdi)\n"
	"\tmovq %rsi, %rsp\n"
	"\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
	"\tret\n"
	".size bench_green_switch, .-bench_green_switch\n");
typedef void *green_ctx; /* the saved stack pointer */
#else
typedef ucontext_t green_ctx;
#endif

struct green_loop;

struct green_co {
	green_ctx ctx;
	struct green_loop *loop;
	void (*fn)(void *);
	void *arg;
	void *stack;
	int64_t deadline_ms; /* parked on a socket or asleep until then; 0: not parked */
	bool on_fd;          /* parked until its socket has an event */
	bool timed_out;      /* woken by its deadline, not by an event */
	bool finished;
	struct green_co *next_run;
};

struct green_loop {
	pthread_t th;
	int ep;
	green_ctx main_ctx;
	struct green_co **cos; /* this loop's coroutines */
	size_t n, live;
	struct green_co *run_head, *run_tail;
};

struct bench_green {
	struct green_loop *loops;
	unsigned n_loops;
	struct green_co *cos;
	size_t n;
};

static _Thread_local struct green_co *green_cur;

static int64_t green_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool bench_green_on(void)
{
	return green_cur != NULL;
}

static void run_push(struct green_loop *l, struct green_co *c)
{
	c->next_run = NULL;
	if (l->run_tail)
		l->run_tail->next_run = c;
	else
		l->run_head = c;
	l->run_tail = c;
}

/* Back to the loop; returns when the loop runs this coroutine again. */
static void green_yield(struct green_co *c)
{
#ifdef GREEN_ASM
	bench_green_switch(&c->ctx, c->loop->main_ctx);
#else
	swapcontext(&c->ctx, &c->loop->main_ctx);
#endif
}

/* Readable only: a unix-domain socket's reader signals EPOLLOUT to the writer each time it
 * takes data (the kernel's unix_write_space), so with EPOLLOUT in the set every request the
 * server read woke its worker before the answer came: a wake-up and a recv saying EAGAIN per
 * request, about a third of the client's CPU and a tenth of boardd's over a unix socket
 * (TCP signals it only after a full send buffer). A send that would block asks for EPOLLOUT
 * with bench_green_want_write. */
int bench_green_register(int fd)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET};

	if (!green_cur)
		return 0;
	ev.data.ptr = green_cur;
	return epoll_ctl(green_cur->loop->ep, EPOLL_CTL_ADD, fd, &ev);
}

int bench_green_want_write(int fd, bool write)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET};

	if (!green_cur)
		return 0;
	if (write)
		ev.events |= EPOLLOUT;
	ev.data.ptr = green_cur;
	return epoll_ctl(green_cur->loop->ep, EPOLL_CTL_MOD, fd, &ev);
}

int bench_green_wait(int timeout_ms)
{
	struct green_co *c = green_cur;

	c->on_fd = true;
	c->timed_out = false;
	c->deadline_ms = green_now_ms() + timeout_ms;
	green_yield(c);
	return c->timed_out ? -1 : 0;
}

void bench_green_sleep_ms(unsigned ms)
{
	struct green_co *c = green_cur;

	c->on_fd = false;
	c->deadline_ms = green_now_ms() + (int64_t)ms;
	green_yield(c);
}

static void green_entry(void)
{
	struct green_co *c = green_cur;

	c->fn(c->arg);
	c->finished = true;
#ifdef GREEN_ASM
	bench_green_switch(&c->ctx, c->loop->main_ctx); /* never resumed: the loop frees it */
	abort();
#endif
	/* uc_link is the loop's context: returning switches back to it. */
}

/* Wakes the coroutines whose deadline passed; returns the ms until the next one (at most
 * 100: the loop also wakes to see new deadlines). */
static int loop_timers(struct green_loop *l)
{
	int64_t now = green_now_ms(), next = now + 100;
	size_t i;

	for (i = 0; i < l->n; i++) {
		struct green_co *c = l->cos[i];

		if (c->finished || !c->deadline_ms)
			continue;
		if (c->deadline_ms <= now) {
			c->timed_out = c->on_fd;
			c->on_fd = false;
			c->deadline_ms = 0;
			run_push(l, c);
		} else if (c->deadline_ms < next) {
			next = c->deadline_ms;
		}
	}
	return (int)(next - now);
}

static void *loop_main(void *arg)
{
	struct green_loop *l = arg;
	struct epoll_event evs[64];
	struct green_co *c;
	size_t i;
	int n, timeout = 0;

	for (i = 0; i < l->n; i++)
		run_push(l, l->cos[i]);
	while (l->live) {
		while ((c = l->run_head)) {
			l->run_head = c->next_run;
			if (!l->run_head)
				l->run_tail = NULL;
			green_cur = c;
#ifdef GREEN_ASM
			bench_green_switch(&l->main_ctx, c->ctx);
#else
			swapcontext(&l->main_ctx, &c->ctx);
#endif
			green_cur = NULL;
			if (c->finished) {
				l->live--;
				free(c->stack);
				c->stack = NULL;
			}
		}
		if (!l->live)
			break;
		/* Only parked coroutines left: their sockets, or the next deadline. */
		n = epoll_wait(l->ep, evs, 64, timeout);
		for (i = 0; i < (size_t)(n > 0 ? n : 0); i++) {
			c = evs[i].data.ptr;
			if (!c->on_fd) /* an edge it already read past: nothing to wake */
				continue;
			c->on_fd = false;
			c->deadline_ms = 0;
			run_push(l, c);
		}
		timeout = loop_timers(l);
		if (l->run_head)
			timeout = 0;
	}
	return NULL;
}

/* Its stack and its context, starting in green_entry, returning to its loop. Apart from
 * bench_green_start: getcontext returns twice, which would have every local of the caller
 * treated as clobbered. */
static __attribute__((noinline)) int co_init(struct green_co *c)
{
#ifdef GREEN_ASM
	void **sp;

	c->stack = malloc(GREEN_STACK);
	if (!c->stack)
		return -1;
	/* From the 16-byte aligned top: a null return address for green_entry (it never
	 * returns), green_entry as bench_green_switch's return address, six zero registers.
	 * green_entry starts as if called: its stack pointer 8 past a multiple of 16. */
	sp = (void **)(((uintptr_t)c->stack + GREEN_STACK) & ~(uintptr_t)15);
	*--sp = NULL;
	*--sp = (void *)(uintptr_t)green_entry;
	for (int i = 0; i < 6; i++)
		*--sp = NULL;
	c->ctx = sp;
	return 0;
#else
	c->stack = malloc(GREEN_STACK);
	if (!c->stack || getcontext(&c->ctx) != 0)
		return -1;
	c->ctx.uc_stack.ss_sp = c->stack;
	c->ctx.uc_stack.ss_size = GREEN_STACK;
	c->ctx.uc_link = &c->loop->main_ctx;
	makecontext(&c->ctx, green_entry, 0);
	return 0;
#endif
}

struct bench_green *bench_green_start(size_t n, unsigned threads, void (*fn)(void *),
				      void *const *args)
{
	struct bench_green *g = calloc(1, sizeof *g);
	size_t i;
	unsigned t;

	if (!g)
		return NULL;
	if (threads > n)
		threads = (unsigned)n;
	g->n = n;
	g->n_loops = threads;
	g->cos = calloc(n, sizeof *g->cos);
	g->loops = calloc(threads, sizeof *g->loops);
	if (!g->cos || !g->loops)
		goto fail;
	for (t = 0; t < threads; t++) {
		struct green_loop *l = &g->loops[t];

		l->ep = epoll_create1(EPOLL_CLOEXEC);
		l->cos = calloc(n / threads + 1, sizeof *l->cos);
		if (l->ep < 0 || !l->cos)
			goto fail;
	}
	for (i = 0; i < n; i++) {
		struct green_co *c = &g->cos[i];
		struct green_loop *l = &g->loops[i % threads];

		c->loop = l;
		c->fn = fn;
		c->arg = args[i];
		if (co_init(c) != 0)
			goto fail;
		l->cos[l->n++] = c;
		l->live++;
	}
	for (t = 0; t < threads; t++)
		if (pthread_create(&g->loops[t].th, NULL, loop_main, &g->loops[t]) != 0) {
			fprintf(stderr, "bench: cannot start event-loop thread %u\n", t);
			exit(1); /* the runner counts on every worker */
		}
	return g;
fail:
	for (i = 0; g->cos && i < n; i++)
		free(g->cos[i].stack);
	for (t = 0; g->loops && t < threads; t++) {
		if (g->loops[t].ep > 0)
			close(g->loops[t].ep);
		free(g->loops[t].cos);
	}
	free(g->loops);
	free(g->cos);
	free(g);
	return NULL;
}

void bench_green_join(struct bench_green *g)
{
	unsigned t;

	if (!g)
		return;
	for (t = 0; t < g->n_loops; t++) {
		pthread_join(g->loops[t].th, NULL);
		close(g->loops[t].ep);
		free(g->loops[t].cos);
	}
	free(g->loops);
	free(g->cos);
	free(g);
}
