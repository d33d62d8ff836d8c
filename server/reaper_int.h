/* reaper_int — the reaper's own state and what its three files share (server/reaper.c: the
 * thread, the pass and its worker pool; reaper_act.c: judging and acting on cards, and the
 * repair sweep; reaper_json.c: the JSON of its status). Not a public header: reaper.h is. */
#ifndef BOARDD_SERVER_REAPER_INT_H
#define BOARDD_SERVER_REAPER_INT_H

#include "server/reaper.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct server_reaper {
	struct store *st;
	struct server_reaper_config cfg;
	char marker[CORE_MARKER_MAX + 1];
	struct store_actor actor;

	pthread_mutex_t pass_lock; /* one pass at a time in this process */
	struct store_reaper_cursor cursor; /* where the next pass's listing resumes (pass_lock) */
	pthread_mutex_t lock;      /* guards everything below */
	pthread_cond_t wake;
	pthread_t thread;
	bool running;
	bool stopping;
	size_t passes;
	bool have_last;
	struct server_reaper_stats last;

	/* The pass's worker pool: started by the first pass, kept until server_reaper_free, so a
	 * pass of 100 cards does not pay for 31 thread creations. Guarded by pool_mu. */
	pthread_mutex_t pool_mu;
	pthread_cond_t pool_go;   /* a new generation of work, or stop */
	pthread_cond_t pool_idle; /* pool_busy reached 0 */
	struct pool_slot *slots;  /* pool_n of them */
	size_t pool_n;            /* threads started (the pass's own thread is slot 0) */
	uint64_t pool_gen;
	size_t pool_busy;
	struct pass_work *pool_work;
	bool pool_started, pool_stop;
	struct pass_work *work; /* the pass's, reused (under pass_lock) */
};

/* A line of the reaper's log: the configured sink, else stderr. */
void server_reaper_log(struct server_reaper *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Whether the reaper is stopping: a pass checks it between cards, never mid-write. */
bool server_reaper_stopping(struct server_reaper *r);
/* server_reaper_repair as a pass's sweep: its releases also feed the per-board charts. */
enum core_rc server_reaper_repair_pass(struct server_reaper *r, size_t *repaired);
/* Judges and acts on cards[0..n) (one worker's share of a gated pass), batch by batch,
 * counting into *s (reaper_act.c). */
void server_reaper_share(struct server_reaper *r, struct core_card **cards, size_t n,
			 struct server_reaper_stats *s);

#endif
