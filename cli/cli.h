/* boardctl — the worker side of boardd as one process, plus the operator and bot verbs
 * (DESIGN §12). It talks only to the public HTTP API.
 *
 * One file per concern, as curl's own tool: main.c (verbs, global options, help), http.c (the
 * libcurl easy handle, set up in one place), job.c (one job: a command run under a claim,
 * renewed, killed on loss, its outcome written fenced), work.c (`work` and `run`: slots,
 * signals), verbs.c (cards, reopen, events, attention), progress.c (the per-job report). */
#ifndef BOARDD_CLI_H
#define BOARDD_CLI_H

#include <jansson.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CLI_ERR_MAX 512

/* ---- global options (main.c) ---- */

struct cli_global {
	const char *server; /* BOARDD_URL or --url as given, no trailing slash (jobs get it) */
	const char *url;    /* the base of every request: server, or http://localhost on a
			     * socket file */
	const char *unix_path; /* server "unix:PATH": the socket file libcurl connects to */
	char *token;        /* BOARDD_TOKEN or --token-file's first line; owned */
	const char *cacert; /* --cacert: a CA bundle for https */
	bool json;          /* --json: machine output on stdout */
	bool verbose;       /* --verbose: each request on stderr */
};

extern struct cli_global cli_g;

/* Prints "boardctl: " + message to stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Monotonic milliseconds. */
int64_t cli_mono_ms(void);

/* ---- http.c ---- */

struct cli_http; /* one libcurl easy handle and its buffers: one per thread */

/* NULL on out of memory. Caller frees with cli_http_free. */
struct cli_http *cli_http_new(void);
void cli_http_free(struct cli_http *h);

/* One request to cli_g.url + path with the bearer token. body (may be NULL) is sent as JSON;
 * if_match >= 0 adds If-Match: "<if_match>". timeout_ms bounds the whole exchange.
 * Returns the HTTP status, or 0 on a transport failure (err says why). *out (may be NULL)
 * receives the parsed JSON answer (new reference) or NULL when there is none. */
long cli_http_call(struct cli_http *h, const char *method, const char *path, const json_t *body,
		   int64_t if_match, long timeout_ms, json_t **out, char *err, size_t errlen);
/* The problem+json detail of an error answer, or the status line; for messages. */
const char *cli_http_problem(const json_t *answer);
/* Percent-encodes s for a path segment or a query value into buf; false when it does not fit. */
bool cli_http_escape(const char *s, char *buf, size_t len);

/* ---- job.c: one job under a claim ---- */

enum cli_outcome_kind { CLI_OUTCOME_COLUMN, CLI_OUTCOME_RELEASE };

struct cli_outcome {
	enum cli_outcome_kind kind;
	const char *column; /* for CLI_OUTCOME_COLUMN */
};

struct cli_job_opts {
	char *const *argv;        /* the command */
	struct cli_outcome on_success, on_failure;
	int64_t grace_ms;         /* SIGTERM -> SIGKILL */
	int stop_fd;              /* readable once boardctl was told to stop (work.c) */
	const atomic_int *stop_sig; /* the signal to forward (0: none yet); set by work.c's main
				     * thread, read by the slots */
	const atomic_int *kill_now; /* a second signal: SIGKILL at once */
	const json_t *agent_caps; /* --agent-caps: capability names (borrowed); NULL: no agent
				   * token. Each job mints one bound to its claim (DESIGN §13) and
				   * passes it as BOARDD_AGENT_TOKEN */
};

/* What a claim handed us (from claim-next or claim). */
struct cli_claim {
	char card[129];
	char board[65];
	char marker[129];
	int64_t epoch;
	int64_t lease_ms;
	int64_t renew_after_ms;
	int64_t asked_ms; /* cli_mono_ms() before the claim was asked for: the lease's start as
			   * far as boardctl can tell (never later than the server's) */
};

/* Fills c from a claim answer: the claim-next shape {card, token} or the claim shape. */
bool cli_claim_parse(const json_t *answer, const char *card_id, struct cli_claim *c);

enum cli_job_end {
	CLI_JOB_SUCCEEDED, /* exit 0: outcome written */
	CLI_JOB_FAILED,    /* non-zero exit or a signal: outcome written */
	CLI_JOB_LOST,      /* the lease was lost: command killed, nothing written */
	CLI_JOB_STOPPED,   /* boardctl was told to stop: command signalled, claim released */
	CLI_JOB_ERROR,     /* could not start (run create, spawn) or the outcome was refused as
			    * asked: claim released if possible */
	CLI_JOB_CANCELLED, /* an operator cancelled the run (DESIGN §12, ADR-096 point 4): command
			    * stopped, card neither filed nor released (kept for the operator) */
};

struct cli_job_report {
	enum cli_job_end end;
	int exit_code;     /* of the command (-signal when killed by one) */
	char run[129];
	int64_t duration_ms;
	bool outcome_written;
	bool config_error; /* the server refused the outcome or the agent caps as asked
			    * (400/403/404/422): no other card would fare better, `work` stops */
	char detail[CLI_ERR_MAX];
};

/* Runs opts->argv for claim c: creates the run, records it on the card, spawns the command in
 * its own process group with BOARDD_URL, BOARDD_CARD, BOARDD_MARKER, BOARDD_EPOCH, BOARDD_RUN
 * (and BOARDD_RESULT: a file the command may fill with JSON) in its environment, renews the
 * claim and heartbeats the run every renew_after_ms, and ends as cli_job_end says. */
void cli_job_run(struct cli_http *h, const struct cli_claim *c, const struct cli_job_opts *opts,
		 struct cli_job_report *rep);

/* ---- progress.c ---- */

/* One line per job: on stderr for people, and with --json one JSON object on stdout. */
void cli_progress_job(const struct cli_claim *c, const struct cli_job_report *rep);
const char *cli_job_end_name(enum cli_job_end e);

/* ---- the verbs ---- */

int cli_work_main(int argc, char **argv);   /* work.c: `work` */
int cli_run_main(int argc, char **argv);    /* work.c: `run` */
int cli_cards_main(int argc, char **argv);  /* verbs.c */
int cli_reopen_main(int argc, char **argv);
int cli_events_main(int argc, char **argv);
int cli_attention_main(int argc, char **argv);

/* Parses "--on-success done" style outcomes: a column name or "release". */
bool cli_outcome_parse(const char *s, struct cli_outcome *o);

#endif
