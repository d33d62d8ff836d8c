/* Stopping under load: api_stop while clients keep connecting, round after round, with 1, 2
 * and 4 HTTP threads, some rounds right after the start (before libmicrohttpd's threads ran
 * their first loop). Every round must stop cleanly: no libmicrohttpd panic (its quiesce
 * races its own threads' epoll bookkeeping), no descriptor closed under a thread still
 * polling it (TSan). BOARDD_TEST_QUIESCE_ROUNDS=N runs N rounds (the stress reproducer). */
#include "tests/api/api_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define QUIESCE_LOADERS 3

struct quiesce_load {
	uint16_t port;
	atomic_bool stop;
	atomic_ulong answered;
};

/* New connections, one request each (the accept path is what a stop races). */
static void *quiesce_load_main(void *arg)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	struct quiesce_load *l = arg;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct timeval tv = {2, 0};
	char buf[512];

	sa.sin_port = htons(l->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	while (!atomic_load(&l->stop)) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		ssize_t n;

		if (fd < 0)
			break;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
		    send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1)) {
			n = recv(fd, buf, sizeof buf, 0);
			if (n > 12 && memcmp(buf, "HTTP/1.1 200", 12) == 0)
				atomic_fetch_add(&l->answered, 1);
		}
		close(fd);
	}
	return NULL;
}

START_TEST(stop_under_load)
{
	static const unsigned threads[] = {1, 2, 4};
	const char *env = getenv("BOARDD_TEST_QUIESCE_ROUNDS");
	unsigned rounds = env ? (unsigned)strtoul(env, NULL, 10) : 24, i, k;
	unsigned long answered = 0;

	for (i = 0; i < rounds; i++) {
		struct harness_options o = {.threads = threads[i % 3]};
		struct quiesce_load l = {0};
		pthread_t th[QUIESCE_LOADERS];
		struct harness h;
		struct timespec nap = {0, (long)(i % 4) * 15 * 1000000L};

		ck_assert(harness_start(&h, &o));
		l.port = h.port;
		for (k = 0; k < QUIESCE_LOADERS; k++)
			ck_assert_int_eq(pthread_create(&th[k], NULL, quiesce_load_main, &l), 0);
		nanosleep(&nap, NULL); /* 0 ms: stopped before the threads' first loop */
		harness_stop(&h);      /* quiesce, grace, stop: while the loaders keep connecting */
		atomic_store(&l.stop, true);
		for (k = 0; k < QUIESCE_LOADERS; k++)
			pthread_join(th[k], NULL);
		answered += atomic_load(&l.answered);
	}
	ck_assert_msg(rounds < 4 || answered > 0, "the load was answered at all (%lu)", answered);
}
END_TEST

TCase *api_tcase_quiesce(void)
{
	TCase *tc = tcase_create("quiesce");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, stop_under_load);
	return tc;
}
