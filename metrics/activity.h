/* activity — the per-minute counts of the last hour that the UI's charts draw (DESIGN §21):
 * claims, completions, failures and reaper actions per minute, and cards per column (a gauge
 * per board, sampled each minute by server/sampler.c, and by the route when a board's last
 * sample is over ACTIVITY_FRESH_MS old). A ring of ACTIVITY_MINUTES slots in this
 * process's memory: per replica, reset on restart; GET /v1/boards/{b}/activity serves it.
 *
 * The counts are fed by metrics_add (metrics.c), from the same calls that count the
 * Prometheus families, so the charts and /metrics agree:
 *   claims       boardd_claims_total{outcome="fresh"|"recovery"}
 *   completions  boardd_runs_finished_total{status="finished"}
 *   failures     boardd_runs_finished_total{status="failed"}
 *   reaper       boardd_reaper_actions_total, every action but "keep"
 * Counts span every board (the counters carry no board). Pure libc + pthreads, thread-safe.
 */
#ifndef BOARDD_METRICS_ACTIVITY_H
#define BOARDD_METRICS_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACTIVITY_MINUTES 60
#define ACTIVITY_COLS_MAX 32   /* columns of a board kept in the gauge */
#define ACTIVITY_BOARDS_MAX 64 /* boards whose gauge is kept (least recently sampled goes) */
#define ACTIVITY_NAME_MAX 64
#define ACTIVITY_FRESH_MS 10000 /* a reader re-counts a board whose sample is older */

enum activity_series {
	ACTIVITY_CLAIMS,
	ACTIVITY_COMPLETIONS,
	ACTIVITY_FAILURES,
	ACTIVITY_REAPER,
	ACTIVITY_SERIES_
};

struct activity;

/* The series' names as served ("claims", "completions", "failures", "reaper_actions"). */
const char *activity_series_name(enum activity_series s);

/* NULL on OOM. */
struct activity *activity_new(void);
void activity_free(struct activity *a);

/* Wall-clock milliseconds since the epoch (the clock the ring keys its minutes by). */
int64_t activity_now_ms(void);

/* Counts n events of series s at now_ms. a NULL or n 0: nothing. */
void activity_add(struct activity *a, enum activity_series s, uint64_t n, int64_t now_ms);

/* The metrics_add hook: counts n events of the registry series (id, v1) into the series it
 * feeds, if any (the table in the header comment), at the wall clock's minute. */
void activity_note(struct activity *a, int metrics_id, const char *v1, uint64_t n);

/* Whether the board's gauge has a sample of now_ms's minute taken in the last
 * ACTIVITY_FRESH_MS (the caller then need not count again). */
bool activity_sampled(struct activity *a, const char *board, int64_t now_ms);
/* Records the board's cards per column at now_ms (cols[0..n), counts[0..n): the minute's value
 * is its last sample; columns past
 * ACTIVITY_COLS_MAX are left out). A column list unlike the last one's starts the board's
 * gauge afresh (the old samples named other columns). */
void activity_sample(struct activity *a, const char *board, const char *const *cols,
		     const uint64_t *counts, size_t n, int64_t now_ms);

/* A copy of the last hour, oldest minute first: minute[k] is the minute's start (ms since the
 * epoch); the last is now_ms's minute. gauge[k][c] is valid where sampled[k]. */
struct activity_view {
	int64_t minute[ACTIVITY_MINUTES];
	uint64_t count[ACTIVITY_MINUTES][ACTIVITY_SERIES_];
	bool sampled[ACTIVITY_MINUTES];
	uint64_t gauge[ACTIVITY_MINUTES][ACTIVITY_COLS_MAX];
	size_t n_cols;
	char cols[ACTIVITY_COLS_MAX][ACTIVITY_NAME_MAX + 1];
};

/* Fills *v (board NULL: no gauge). */
void activity_read(struct activity *a, const char *board, int64_t now_ms, struct activity_view *v);

#endif
