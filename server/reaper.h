/* The reaper: the watchdog thread that reclaims claims whose owner stopped heartbeating
 * (DESIGN §6, ADR-096 §3, §4, §8). It decides with core's one table and acts only through
 * the store's fenced operations, under its own recovery token, after a transfer-first CAS.
 */
#ifndef BOARDD_SERVER_REAPER_H
#define BOARDD_SERVER_REAPER_H

#include "core/core.h"
#include "metrics/metrics.h"
#include "store/store.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct server_reaper;

struct server_reaper_config {
	bool gate;              /* decisions on (ITERION_BOARD_CLAIM_REAPER=on); repair always */
	int64_t interval_ms;    /* between passes; default 60 000 */
	size_t batch;           /* candidates listed per pass; default 100 */
	size_t workers;         /* threads sharing a pass's cards (their fsyncs share a group
				 * commit); default: the cores (at most 8) on the FS twin, whose
				 * pass is CPU-bound; 32 on the Mongo twin, to overlap round trips */
	int64_t lease_ms;       /* the recovery claim's lease; default 900 000 */
	const char *hostname;   /* recovery marker "reaper:<hostname>"; NULL: gethostname() */
	/* Cloud divergence (ADR-096 §7): the Mongo twin reparks to eligible[0]; the FS twin
	 * releases in place. Either way the return to the pool counts an attempt (DESIGN §17):
	 * at the board's max_attempts the twin files the card instead (the default max_attempts
	 * is the store's, store_retry_default_set: the server's --run-ceiling). */
	bool repark_to_pool;
	/* Counters of each pass (METRICS_REAPER_*), borrowed; NULL: none. */
	struct metrics *metrics;
	/* Log sink for one line per reclaim and per sweep; NULL: stderr. */
	void (*log)(void *ctx, const char *line);
	void *log_ctx;
	/* Test hook: called between the listing and the transfer of each candidate. */
	void (*after_list)(void *ctx, const struct core_card *listed);
	/* Test hook: called for each card its share TRANSFERred, before the share acts. */
	void (*after_transfer)(void *ctx, const struct core_card *seen);
	void *hook_ctx;
};

struct server_reaper_stats {
	bool gate;
	size_t listed;
	size_t transferred;
	size_t skipped;
	size_t errors;
	int64_t duration_ms;
	size_t actions[CORE_STUCK_ACTION_COUNT_];
	size_t repaired;
	int64_t finished_at_ms; /* wall clock when the pass ended (served as finished_at); 0: none */
};

/* Creates a reaper over st (borrowed; must outlive it). Caller frees with
 * server_reaper_free. cfg is copied. */
enum core_rc server_reaper_new(struct store *st, const struct server_reaper_config *cfg,
			       struct server_reaper **out);
/* Runs the startup repair sweep, then starts the thread (one pass every interval). */
enum core_rc server_reaper_start(struct server_reaper *r);
/* Stops the thread between two cards, never mid-write, and joins it. Idempotent. */
void server_reaper_stop(struct server_reaper *r);
void server_reaper_free(struct server_reaper *r);

/* One pass now (serialised with the thread's passes): the ungated repair sweep, then, when
 * the gate is on, the gated reclaim. *out receives its stats. */
enum core_rc server_reaper_pass(struct server_reaper *r, struct server_reaper_stats *out);
/* The ungated repair sweep alone; *repaired receives the number of claims released. */
enum core_rc server_reaper_repair(struct server_reaper *r, size_t *repaired);

/* The recovery marker in use ("reaper:<host>"); borrowed for the reaper's lifetime. */
const char *server_reaper_marker(const struct server_reaper *r);

/* The stats shape of DESIGN §10; new reference. */
json_t *server_reaper_stats_json(const struct server_reaper_stats *s);
/* {gate, interval_ms, batch, marker, passes, last_pass (stats | null)}; new reference. */
json_t *server_reaper_status_json(struct server_reaper *r);

/* Adapters for api's reaper hooks (ctx is the struct server_reaper). */
json_t *server_reaper_hook_status(void *ctx);
enum core_rc server_reaper_hook_pass(void *ctx, json_t **out);

#endif
