/* metrics — every Prometheus metric boardd serves, defined once (STYLE rule 15).
 *
 * METRICS_TABLE below is the one list: name, type, labels and help of each family. /metrics
 * renders it (metrics_render), the tests derive their checks from it (metrics_family_*), and
 * the Grafana dashboard's test checks its queries against what /metrics serves.
 *
 * Two ways a sample reaches a scrape:
 *  - registry families (a value list in the table): counters and histograms kept here, in a
 *    struct metrics the server creates and hands to the api and the reaper. Each label value
 *    is a fixed string of the table; the hot path is one relaxed atomic add (no lock).
 *    Adding a counter is one table line plus `metrics_inc(m, METRICS_X, "value")` where it
 *    happens, e.g.
 *        X(METRICS_DELIVERIES, METRICS_COUNTER, "boardd_deliveries_total", "outcome",
 *          METRICS_V("done", "retry", "dead"), NULL, METRICS_B_NONE, "Webhook deliveries.")
 *        metrics_inc(api_metrics(a), METRICS_DELIVERIES, "done");
 *    (two labels: a second value list, and metrics_add(m, id, v1, v2, n)). A counter name
 *    ends in _total; every registry series is served from the start, zeros included.
 *  - collected families (no value list): produced at scrape time into a struct metrics_sink
 *    by whoever owns the numbers — the store through store_stats() (cards, claims, journal,
 *    driver), the api (its latency histogram), the process itself (metrics_process_collect).
 *
 * Pure libc + pthreads. Thread-safe: metrics_inc / metrics_observe / metrics_hist_observe from
 * any thread; a sink belongs to one scrape (one thread).
 */
#ifndef BOARDD_METRICS_H
#define BOARDD_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metrics_kind {
	METRICS_COUNTER,
	METRICS_GAUGE,
	METRICS_HISTOGRAM,
};

/* Bucket sets of the histograms: upper bounds in the unit the observer counts in, and the
 * scale that turns that unit into the served one (seconds for durations). */
enum metrics_buckets {
	METRICS_B_NONE,
	METRICS_B_HTTP_NS,   /* request latency, observed in ns */
	METRICS_B_PASS_US,   /* reaper pass, observed in µs */
	METRICS_B_WIDTH,     /* journal lines per fdatasync */
	METRICS_B_MONGO_US,  /* driver command round trip, observed in µs */
};

#define METRICS_V(...) ((const char *const[]){__VA_ARGS__, NULL})
/* The value list of a registry family without labels: its one series. */
#define METRICS_ONE METRICS_V("")

/* id, type, name, label names (comma-separated), value list of label 1, of label 2 (registry
 * families; NULL: collected at scrape time), buckets, help. */
#define METRICS_TABLE(X)                                                                     \
	X(METRICS_HTTP_DURATION, METRICS_HISTOGRAM, "boardd_http_request_duration_seconds",   \
	  "route,method,code", NULL, NULL, METRICS_B_HTTP_NS,                                 \
	  "Time from a request's arrival to its answer, by route template, method and status " \
	  "code (route \"unmatched\": no route).")                                             \
	X(METRICS_LONG_POLLS, METRICS_GAUGE, "boardd_events_long_polls", "", NULL, NULL,      \
	  METRICS_B_NONE, "Long-polls of GET /v1/events waiting now.")                         \
	X(METRICS_EVENT_STREAMS, METRICS_GAUGE, "boardd_event_streams_open", "", NULL, NULL,  \
	  METRICS_B_NONE, "Event streams (GET /v1/events/stream) open now.")                  \
	X(METRICS_HTTP_CONNECTIONS, METRICS_GAUGE, "boardd_http_connections_open", "", NULL,  \
	  NULL, METRICS_B_NONE, "TCP connections open now.")                                   \
	X(METRICS_HTTP_REFUSED, METRICS_COUNTER, "boardd_http_connections_refused_total", "", \
	  NULL, NULL, METRICS_B_NONE,                                                          \
	  "Connections closed at accept: over --max-connections or --max-connections-per-ip.") \
	X(METRICS_HTTP_ANSWER_BYTES, METRICS_GAUGE, "boardd_http_answer_bytes", "", NULL,     \
	  NULL, METRICS_B_NONE,                                                                \
	  "Bytes of answers built and not yet read by their clients (at most about "          \
	  "--max-answer-bytes).")                                                              \
	X(METRICS_HTTP_ANSWERS_REFUSED, METRICS_COUNTER, "boardd_http_answers_refused_total",  \
	  "", NULL, NULL, METRICS_B_NONE,                                                      \
	  "Large read answers refused 503 busy because --max-answer-bytes were held.")         \
	X(METRICS_HTTP_HEADER_TIMEOUTS, METRICS_COUNTER, "boardd_http_header_timeouts_total",  \
	  "", NULL, NULL, METRICS_B_NONE,                                                      \
	  "Connections closed because a request's headers did not arrive whole within "       \
	  "--header-timeout-ms (an idle keep-alive connection included).")                     \
	X(METRICS_HTTP_LIBRARY_ANSWERS, METRICS_COUNTER, "boardd_http_library_answers_total",  \
	  "", NULL, NULL, METRICS_B_NONE,                                                      \
	  "Requests libmicrohttpd refused itself (414, 431, 505, ...), also in the request "   \
	  "histogram under route \"unmatched\".")                                              \
	X(METRICS_CLAIMS, METRICS_COUNTER, "boardd_claims_total", "outcome",                  \
	  METRICS_V("fresh", "idempotent", "conflict", "blockers_pending", "recovery",         \
		    "empty", "capacity_reached", "not_yet"),                                   \
	  NULL, METRICS_B_NONE,                                                                \
	  "Claims answered on every path, by outcome: fresh and idempotent (POST claim; "      \
	  "claim-next's are fresh), conflict (refused: another holder; a reaper transfer "     \
	  "that lost its race), blockers_pending, recovery (a reaper's recovery claim), "      \
	  "empty (a claim-next that found nothing within its wait), capacity_reached and "     \
	  "not_yet (POST claim refused by a limit or a schedule, DESIGN §17).")                \
	X(METRICS_RUNS_FINISHED, METRICS_COUNTER, "boardd_runs_finished_total", "status",     \
	  METRICS_V("finished", "failed", "cancelled"), NULL, METRICS_B_NONE,                  \
	  "Runs that reached a final status, by that status (the owner's PATCH; cancelled "   \
	  "also by an operator's cancel).")                                                    \
	X(METRICS_ATTENTION, METRICS_GAUGE, "boardd_attention_cards", "reason", NULL, NULL,   \
	  METRICS_B_NONE,                                                                      \
	  "Cards in the Needs-attention lane, by reason (a card with several reasons counts "  \
	  "under each; over the lane's first 1000 cards, GET /v1/attention's page).")          \
	X(METRICS_FENCE_REFUSED, METRICS_COUNTER, "boardd_fenced_writes_refused_total",       \
	  "reason", NULL, NULL, METRICS_B_NONE,                                                \
	  "Fenced writes refused, by what did not match: unclaimed, marker, epoch, holder "    \
	  "(another token) for renew, release and owned writes; run: a run write whose claim " \
	  "is no longer the card's, or held by another token.")                                \
	X(METRICS_REAPER_ACTIONS, METRICS_COUNTER, "boardd_reaper_actions_total", "action",   \
	  METRICS_V("keep", "complete", "fail", "repark", "release", "give_up",               \
		    "repair_release"),                                                         \
	  NULL, METRICS_B_NONE,                                                                \
	  "Reaper decisions carried out (repair_release: an abandoned or stripped claim "      \
	  "released by the repair sweep).")                                                    \
	X(METRICS_REAPER_CANDIDATES, METRICS_COUNTER, "boardd_reaper_candidates_total",       \
	  "outcome", METRICS_V("transferred", "skipped", "error"), NULL, METRICS_B_NONE,       \
	  "Expired claims the reaper listed, by what became of them.")                         \
	X(METRICS_REAPER_PASS, METRICS_HISTOGRAM, "boardd_reaper_pass_duration_seconds", "",  \
	  METRICS_ONE, NULL, METRICS_B_PASS_US, "Duration of reaper passes.")                \
	X(METRICS_STORE_UP, METRICS_GAUGE, "boardd_store_stats_up", "", NULL, NULL,           \
	  METRICS_B_NONE,                                                                      \
	  "1 when the store answered this scrape's questions (cards, claims), else 0.")        \
	X(METRICS_CARDS, METRICS_GAUGE, "boardd_cards", "board,state", NULL, NULL,            \
	  METRICS_B_NONE, "Cards by board and state.")                                         \
	X(METRICS_CLAIMS_HELD, METRICS_GAUGE, "boardd_claims_held", "", NULL, NULL,           \
	  METRICS_B_NONE, "Cards holding a claim.")                                            \
	X(METRICS_CLAIMS_EXPIRED, METRICS_GAUGE, "boardd_claims_expired", "", NULL, NULL,     \
	  METRICS_B_NONE, "Claims whose lease has expired (the reaper's candidates).")         \
	X(METRICS_FS_LINES, METRICS_COUNTER, "boardd_fs_journal_lines_total", "", NULL, NULL, \
	  METRICS_B_NONE, "FS store: journal lines (commits) written since open.")             \
	X(METRICS_FS_SYNCS, METRICS_COUNTER, "boardd_fs_journal_syncs_total", "", NULL, NULL, \
	  METRICS_B_NONE, "FS store: journal fdatasync calls since open (group commit).")      \
	X(METRICS_FS_GROUP_WIDTH, METRICS_HISTOGRAM, "boardd_fs_journal_group_width", "",     \
	  NULL, NULL, METRICS_B_WIDTH, "FS store: journal lines made durable by one fdatasync.") \
	X(METRICS_FS_COMPACTIONS, METRICS_COUNTER, "boardd_fs_compactions_total", "", NULL,   \
	  NULL, METRICS_B_NONE, "FS store: snapshots written since open.")                     \
	X(METRICS_FS_JOURNAL_BYTES, METRICS_GAUGE, "boardd_fs_journal_bytes", "", NULL, NULL, \
	  METRICS_B_NONE, "FS store: bytes of records in the current journal generation.")    \
	X(METRICS_FS_REFUSING, METRICS_GAUGE, "boardd_fs_writes_refused", "", NULL, NULL,     \
	  METRICS_B_NONE,                                                                      \
	  "FS store: 1 while writes are refused after a failed write or sync.")                \
	X(METRICS_MONGO_ROUND_TRIPS, METRICS_COUNTER, "boardd_mongo_round_trips_total", "",   \
	  NULL, NULL, METRICS_B_NONE, "Mongo store: commands sent to the database server.")    \
	X(METRICS_MONGO_ERRORS, METRICS_COUNTER, "boardd_mongo_errors_total", "kind", NULL,   \
	  NULL, METRICS_B_NONE,                                                                \
	  "Mongo store: driver errors (command: a command failed; heartbeat: a server "        \
	  "monitor check failed).")                                                            \
	X(METRICS_MONGO_DURATION, METRICS_HISTOGRAM, "boardd_mongo_command_duration_seconds", \
	  "", NULL, NULL, METRICS_B_MONGO_US,                                                  \
	  "Mongo store: round trip of the commands that succeeded.")                           \
	X(METRICS_MONGO_UNREACHABLE, METRICS_GAUGE, "boardd_mongo_unreachable", "", NULL,     \
	  NULL, METRICS_B_NONE,                                                                \
	  "Mongo store: 1 while the database is held unreachable (requests that need it "      \
	  "answer 503 at once until a probe reaches it), else 0.")                             \
	X(METRICS_MONGO_OUTAGES, METRICS_COUNTER, "boardd_mongo_outages_total", "", NULL,     \
	  NULL, METRICS_B_NONE,                                                                \
	  "Mongo store: times the database was found unreachable since start.")               \
	X(METRICS_MONGO_BSEQ_HOLES, METRICS_COUNTER, "boardd_mongo_board_seq_holes_total", "", \
	  NULL, NULL, METRICS_B_NONE,                                                          \
	  "Mongo store: board_seq numbers a board's event tail stepped over (a writer died "   \
	  "between taking them and writing its events), each counted once per process.")     \
	X(METRICS_TLS_RELOADS, METRICS_COUNTER, "boardd_tls_reloads_total", "result",         \
	  METRICS_V("ok", "error"), NULL, METRICS_B_NONE,                                      \
	  "Certificate and key re-reads on SIGHUP (error: the old pair stays).")               \
	X(METRICS_TLS_NOT_AFTER, METRICS_GAUGE, "boardd_tls_certificate_not_after_seconds", \
	  "", NULL, NULL, METRICS_B_NONE,                                                      \
	  "Expiry of the served certificate, seconds since the Unix epoch.")                   \
	X(METRICS_WEBHOOK_ATTEMPTS, METRICS_COUNTER, "boardd_webhook_attempts_total", "",     \
	  METRICS_ONE, NULL, METRICS_B_NONE,                                                   \
	  "Webhook requests sent by this replica's deliverers (delivery attempts).")           \
	X(METRICS_WEBHOOK_OUTCOMES, METRICS_COUNTER, "boardd_webhook_outcomes_total",         \
	  "outcome",                                                                           \
	  METRICS_V("done", "retry", "dead", "disabled", "lease_lost", "store_error"), NULL,    \
	  METRICS_B_NONE,                                                                      \
	  "Delivery outcomes: done (2xx), retry (scheduled again), dead (last attempt failed, "  \
	  "or the subscription is gone), disabled (410), lease_lost (the outcome was refused: "  \
	  "the lease was taken meanwhile), store_error (not written).")                        \
	X(METRICS_WEBHOOK_DURATION, METRICS_HISTOGRAM, "boardd_webhook_attempt_duration_seconds", \
	  "", METRICS_ONE, NULL, METRICS_B_PASS_US,                                            \
	  "Time a webhook receiver took to answer (or the attempt to fail).")                  \
	X(METRICS_BUILD_INFO, METRICS_GAUGE, "boardd_build_info", "version", NULL, NULL,      \
	  METRICS_B_NONE, "1, labelled with the version of boardd.")                           \
	X(METRICS_PROC_CPU, METRICS_COUNTER, "process_cpu_seconds_total", "", NULL, NULL,     \
	  METRICS_B_NONE, "User and system CPU time spent, in seconds.")                       \
	X(METRICS_PROC_RSS, METRICS_GAUGE, "process_resident_memory_bytes", "", NULL, NULL,   \
	  METRICS_B_NONE, "Resident memory size in bytes.")                                    \
	X(METRICS_PROC_VSZ, METRICS_GAUGE, "process_virtual_memory_bytes", "", NULL, NULL,    \
	  METRICS_B_NONE, "Virtual memory size in bytes.")                                     \
	X(METRICS_PROC_FDS, METRICS_GAUGE, "process_open_fds", "", NULL, NULL,                \
	  METRICS_B_NONE, "Open file descriptors.")                                            \
	X(METRICS_PROC_MAX_FDS, METRICS_GAUGE, "process_max_fds", "", NULL, NULL,             \
	  METRICS_B_NONE, "Maximum number of open file descriptors.")                          \
	X(METRICS_PROC_START, METRICS_GAUGE, "process_start_time_seconds", "", NULL, NULL,    \
	  METRICS_B_NONE, "Start time of the process since the Unix epoch, in seconds.")

enum metrics_id {
#define METRICS_ENUM(id, kind, name, labels, v1, v2, b, help) id,
	METRICS_TABLE(METRICS_ENUM)
#undef METRICS_ENUM
	METRICS_COUNT_
};

/* ---- the table, read-only ---- */
const char *metrics_family_name(enum metrics_id id);
enum metrics_kind metrics_family_kind(enum metrics_id id);
/* Comma-separated label names ("" when none). */
const char *metrics_family_labels(enum metrics_id id);
/* The value list of label k (0 or 1) of a registry family; NULL for collected families. */
const char *const *metrics_family_values(enum metrics_id id, size_t k);

/* ---- histograms ---- */
#define METRICS_BUCKETS_MAX 16

/* Non-cumulative counts per bucket (the last is +Inf) and the sum, in observed units. Zero it
 * to initialise; embed it where the numbers are produced. */
struct metrics_hist {
	atomic_uint_least64_t bucket[METRICS_BUCKETS_MAX + 1];
	atomic_uint_least64_t sum;
};

void metrics_hist_observe(struct metrics_hist *h, enum metrics_buckets b, uint64_t v);

/* ---- the registry ---- */
struct metrics;

/* NULL on OOM. Caller frees with metrics_free. */
struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);
/* Adds n to the series of a registry counter whose labels are v1 (and v2; NULL when the family
 * has one label or none). m NULL: nothing. An unknown value is a programmer error (assert;
 * ignored in an NDEBUG build). */
void metrics_add(struct metrics *m, enum metrics_id id, const char *v1, const char *v2, uint64_t n);
static inline void metrics_inc(struct metrics *m, enum metrics_id id, const char *v1)
{
	metrics_add(m, id, v1, NULL, 1);
}
/* metrics_add of a one-label counter that also feeds board's per-minute charts (the series
 * metrics/activity.h names: claims, runs finished and failed, reaper actions). Those families
 * are counted through this with the card's board; metrics_add alone feeds no chart. */
void metrics_add_board(struct metrics *m, enum metrics_id id, const char *v1, const char *board,
		       uint64_t n);
static inline void metrics_inc_board(struct metrics *m, enum metrics_id id, const char *v1,
				     const char *board)
{
	metrics_add_board(m, id, v1, board, 1);
}
/* Observes v (in the family's bucket unit) in a registry histogram. */
void metrics_observe(struct metrics *m, enum metrics_id id, const char *v1, const char *v2,
		     uint64_t v);
/* The per-board, per-minute ring metrics_add_board feeds (metrics/activity.h); NULL when m
 * is. */
struct activity *metrics_activity(struct metrics *m);
/* The current value of a registry counter series (tests). */
uint64_t metrics_get(const struct metrics *m, enum metrics_id id, const char *v1, const char *v2);

/* ---- a scrape ---- */
struct metrics_sink;

/* NULL on OOM. Caller frees with metrics_sink_free. */
struct metrics_sink *metrics_sink_new(void);
void metrics_sink_free(struct metrics_sink *s);
/* One sample of a collected family; `labels` holds one value per label name of the family
 * (NULL when it has none); values are escaped here. Ignored after an OOM (see render). */
void metrics_sink_value(struct metrics_sink *s, enum metrics_id id, const char *const *labels,
			double v);
/* The value of the sample of family id with these labels (as metrics_sink_value took them);
 * false when the sink holds none. */
bool metrics_sink_get(const struct metrics_sink *s, enum metrics_id id, const char *const *labels,
		      double *v);
/* A histogram series (a snapshot of h is taken). */
void metrics_sink_hist(struct metrics_sink *s, enum metrics_id id, const char *const *labels,
		       const struct metrics_hist *h);

/* The process: CPU, memory, fds, start time (from /proc; what cannot be read is left out). */
void metrics_process_collect(struct metrics_sink *s);

/* Renders the registry (m may be NULL) and the sink's samples in the Prometheus text format
 * 0.0.4, family by family in table order. *out: new NUL-terminated text (caller frees), *len
 * its length. false on OOM (nothing allocated). */
bool metrics_render(const struct metrics *m, const struct metrics_sink *s, char **out,
		    size_t *len);

#endif
