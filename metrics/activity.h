/* activity — the per-minute counts of the last hour that the UI's charts draw (DESIGN §21),
 * per board: claims, completions, failures and reaper actions per minute, and cards per
 * column (a gauge sampled each minute by server/sampler.c, and by the route when a board's
 * last sample is over ACTIVITY_FRESH_MS old). A fixed table of ACTIVITY_BOARDS_MAX boards,
 * each a ring of ACTIVITY_MINUTES slots, in this process's memory: per replica, reset on
 * restart; GET /v1/boards/{b}/activity serves a board's.
 *
 * The counts are fed by metrics_add_board (metrics.c) from the same calls that count the
 * Prometheus families, with the card's board, so the charts and /metrics agree (summed over
 * the boards):
 *   claims       boardd_claims_total{outcome="fresh"|"recovery"}
 *   completions  boardd_runs_finished_total{status="finished"}
 *   failures     boardd_runs_finished_total{status="failed"}
 *   reaper       boardd_reaper_actions_total, every action but "keep"
 * (the reaper counts its Prometheus families once a pass, and its boards here card by card).
 *
 * Past ACTIVITY_BOARDS_MAX boards: a count, or a read of the route, for a board without an
 * entry takes the least recently used board's (counted or read longest ago); that board's hour
 * is dropped, and when it comes back its counts start afresh (activity_view.since says from
 * when). The sampler never takes an entry from another board. Nothing is allocated after
 * activity_new; an event is a hash, one mutex and a scan of ACTIVITY_BOARDS_MAX hashes.
 * Pure libc + pthreads, thread-safe. */
#ifndef BOARDD_METRICS_ACTIVITY_H
#define BOARDD_METRICS_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACTIVITY_MINUTES 60
#define ACTIVITY_COLS_MAX 32   /* columns of a board kept in the gauge */
#define ACTIVITY_BOARDS_MAX 64 /* boards kept (the least recently used goes) */
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

/* NULL on OOM. The process's counts start at now (activity_now_ms). */
struct activity *activity_new(void);
void activity_free(struct activity *a);

/* Wall-clock milliseconds since the epoch (the clock the ring keys its minutes by). */
int64_t activity_now_ms(void);

/* Counts n events of series s on board at now_ms, taking the board an entry if it has none
 * (evicting the least recently used). a or board NULL, a name over ACTIVITY_NAME_MAX, or n 0:
 * nothing. */
void activity_add(struct activity *a, const char *board, enum activity_series s, uint64_t n,
		  int64_t now_ms);

/* The metrics_add_board hook: counts n events of the registry series (id, v1) on board into
 * the series it feeds, if any (the table in the header comment), at the wall clock's minute. */
void activity_note(struct activity *a, int metrics_id, const char *v1, const char *board,
		   uint64_t n);

/* Whether the board's gauge has a sample of now_ms's minute taken in the last
 * ACTIVITY_FRESH_MS (the caller then need not count again). */
bool activity_sampled(struct activity *a, const char *board, int64_t now_ms);
/* A reader looked at board at now_ms: it counts as a use (the eviction order) if the board has
 * an entry. */
void activity_use(struct activity *a, const char *board, int64_t now_ms);
/* Whether a sample of board by the sampler (use false) would be kept: the board has an entry
 * or a free one is left. */
bool activity_has_room(struct activity *a, const char *board);
/* Records the board's cards per column at now_ms (cols[0..n), counts[0..n): the minute's value
 * is its last sample; columns past ACTIVITY_COLS_MAX are left out). A column list unlike the
 * last one's starts the board's gauge afresh (the old samples named other columns), never its
 * counts. use: a reader's sample, which takes the board an entry if need be and counts as a
 * use; false (the sampler's): only into an entry the board has or a free one. */
void activity_sample(struct activity *a, const char *board, const char *const *cols,
		     const uint64_t *counts, size_t n, int64_t now_ms, bool use);

/* A copy of a board's last hour, oldest minute first: minute[k] is the minute's start (ms
 * since the epoch); the last is now_ms's minute. count[k] is the board's counts of minute k
 * (0 where none were kept); gauge[k][c] is valid where sampled[k]. since: the instant the
 * board's counts are complete from (the ring's start, or when the board took its entry after
 * some board's had been given up); 0 when the board has no entry. */
struct activity_view {
	int64_t minute[ACTIVITY_MINUTES];
	uint64_t count[ACTIVITY_MINUTES][ACTIVITY_SERIES_];
	bool sampled[ACTIVITY_MINUTES];
	uint64_t gauge[ACTIVITY_MINUTES][ACTIVITY_COLS_MAX];
	size_t n_cols;
	char cols[ACTIVITY_COLS_MAX][ACTIVITY_NAME_MAX + 1];
	int64_t since;
};

/* Fills *v (board NULL or without an entry: minutes only). */
void activity_read(struct activity *a, const char *board, int64_t now_ms, struct activity_view *v);

#endif
