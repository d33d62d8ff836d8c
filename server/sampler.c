/* The activity sampler (DESIGN §21): a thread that, at the start of each minute, counts the
 * boards' cards per column into the activity ring (metrics/activity.h, through
 * api_activity_sample), so GET /v1/boards/{b}/activity's cards-per-column gauge has a sample
 * for each minute whether or not anyone was looking. Every board the ring's table of
 * ACTIVITY_BOARDS_MAX holds, and, while it has free places, the others by name; it never takes
 * a busier board's place (a board past the table is sampled when its route is read, or gets a
 * place with its next count). The counts come from one store_stats per minute (the store's
 * indexes, what /metrics serves); a store error skips the minute. */
#include "server/server.h"
#include "metrics/activity.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct server_sampler {
	struct store *st;
	struct metrics *m;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t wake;
	bool stop;
};

static void sample_all(struct server_sampler *s)
{
	struct core_board *boards = NULL;
	struct metrics_sink *stats;
	size_t n = 0, i;
	int64_t now = activity_now_ms();

	/* One store_stats for every board of the minute: the store counts from its indexes. */
	if (!(stats = metrics_sink_new()))
		return;
	if (store_stats(s->st, stats) == CORE_OK && store_board_list(s->st, &boards, &n) == CORE_OK) {
		for (i = 0; i < n; i++)
			if (activity_has_room(metrics_activity(s->m), boards[i].name))
				(void)api_activity_sample(s->st, s->m, &boards[i], now, stats,
							  false);
		store_boards_free(boards, n);
	}
	metrics_sink_free(stats);
}

static void *sampler_main(void *arg)
{
	struct server_sampler *s = arg;

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		int64_t next;
		struct timespec until;

		pthread_mutex_unlock(&s->mu);
		sample_all(s);
		/* The next minute's start, plus a second: one sample per minute. */
		next = (activity_now_ms() / 60000 + 1) * 60000 + 1000;
		until.tv_sec = (time_t)(next / 1000);
		until.tv_nsec = (long)(next % 1000) * 1000000;
		pthread_mutex_lock(&s->mu);
		while (!s->stop && pthread_cond_timedwait(&s->wake, &s->mu, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

enum core_rc server_sampler_start(struct store *st, struct metrics *m, struct server_sampler **out)
{
	struct server_sampler *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return CORE_ERR_NOMEM;
	s->st = st;
	s->m = m;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->wake, NULL); /* CLOCK_REALTIME: the ring's minutes are wall-clock */
	if (pthread_create(&s->thread, NULL, sampler_main, s) != 0) {
		pthread_cond_destroy(&s->wake);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return CORE_ERR_NOMEM;
	}
	*out = s;
	return CORE_OK;
}

void server_sampler_stop(struct server_sampler *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
