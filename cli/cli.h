/* boardctl — the worker side of boardd as one process, plus the operator and bot verbs
 * (DESIGN §12). It talks only to the public HTTP API.
 *
 * One file per concern, as curl's own tool: main.c (verbs, global options, help), http.c (the
 * libcurl easy handle, set up in one place), job.c (one job: a command run under a claim,
 * renewed, killed on loss, its outcome written fenced), job_writes.c (the requests a job
 * makes: renew, heartbeat, the fenced run and card writes, their retries), supervise.c (the process that holds a
 * job's whole process tree), output.c (the job's output: passed through, its tail sent as the
 * run's output), preflight.c (what is checked before anything is claimed), work.c (`work`
 * and `run`: slots, signals), verbs.c (cards, reopen, events, attention, runs), boards.c
 * (boards ls|show and --not-before's times: DESIGN §17), progress.c (the per-job report). */
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

/* boardctl's own exit statuses (the man page's EXIT STATUS table; README "Exit statuses").
 * Below them, `run` exits with the job's own status; a job a signal N ended, and boardctl
 * stopped by signal N, exit 128+N, as a shell reports. Verbs other than work and run exit 1
 * when the request failed. */
enum cli_exit {
	CLI_EXIT_FAILED = 1,       /* cards, reopen, events, attention, runs: the request failed */
	CLI_EXIT_LOST = 123,       /* run: the claim was lost (nothing written) */
	CLI_EXIT_CANCELLED = 124,  /* run: an operator cancelled the run */
	CLI_EXIT_ERROR = 125,      /* boardctl's own error: usage, configuration, the server
				    * refused what boardctl was told to do */
	CLI_EXIT_CANNOT_EXEC = 126, /* the command was found but could not be executed */
	CLI_EXIT_NOT_FOUND = 127,  /* the command was not found */
};

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
/* A flag's integer: base 10, the whole string, within min..max (an empty string, trailing
 * text, a sign where min >= 0... are refused). true with *out set; false leaves it alone. */
bool cli_int_arg(const char *s, long long min, long long max, long long *out);

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
/* The same with an Idempotency-Key header (DESIGN §18): a retry with the same key answers
 * what the first answered, so a lost answer never takes a second card. */
long cli_http_call_keyed(struct cli_http *h, const char *method, const char *path,
			 const json_t *body, const char *key, long timeout_ms, json_t **out,
			 char *err, size_t errlen);
/* A fresh random key (32 hex digits) into buf (at least 33 bytes); false if none. */
bool cli_http_new_key(char *buf, size_t len);
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
	const char *running_column; /* where the card goes when its job starts; NULL: stays */
	int64_t grace_ms;         /* SIGTERM -> SIGKILL */
	int stop_fd;              /* readable once boardctl was told to stop (work.c) */
	const atomic_int *stop_sig; /* the signal to forward (0: none yet); set by work.c's main
				     * thread, read by the slots */
	const atomic_int *kill_now; /* a second signal: SIGKILL at once */
	const json_t *agent_caps; /* --agent-caps: capability names (borrowed); NULL: no agent
				   * token. Each job mints one bound to its claim (DESIGN §13) and
				   * passes it as BOARDD_AGENT_TOKEN */
	bool retry; /* --retry (DESIGN §17): a failed job's card goes back where it was taken
		     * from, released with retry (one more attempt, a backoff; at the board's
		     * max_attempts the server files it into the failed column), instead of
		     * being filed into on_failure */
	struct cli_renewer *renewer; /* `work --concurrency N` (DESIGN §18, batch.c): renews the
				      * job's claim with the others held; NULL: the job renews its
				      * own */
};

struct cli_renewer;

/* What a claim handed us (from claim-next or claim). */
struct cli_claim {
	char card[129];
	char board[65];
	char marker[129];
	char state[65];   /* the card's column when it was claimed ("" when not told) */
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
	CLI_JOB_NOT_STARTED, /* the command could not be started (DESIGN §20): not a job failure,
			      * nothing filed, the claim released; exit_code 126/127 (125 when
			      * boardctl's own supervisor could not start) */
};

struct cli_job_report {
	enum cli_job_end end;
	int exit_code;     /* as a shell reports it: the command's status, 128+N when signal N
			    * ended it; for CLI_JOB_NOT_STARTED, 126 or 127 (or 125) */
	int signal;        /* the signal that ended the command, or 0 */
	char run[129];
	int64_t duration_ms;
	bool outcome_written;
	bool config_error; /* the server refused the outcome or the agent caps for a reason
			    * of boardctl's configuration (cli_refusal_is_config): no other card
			    * would fare better, `work` stops */
	/* --retry: the card as the retry release left it (DESIGN §17) */
	bool retried;
	bool exhausted;    /* filed into the failed column: attempts_exhausted */
	int64_t attempts;
	char not_before[40]; /* "" when none */
	char detail[CLI_ERR_MAX];
};

/* Runs opts->argv for claim c: creates the run, records it on the card, spawns the command in
 * its own process group with BOARDD_URL, BOARDD_CARD, BOARDD_MARKER, BOARDD_EPOCH, BOARDD_RUN
 * (and BOARDD_RESULT: a file the command may fill with JSON) in its environment, renews the
 * claim and heartbeats the run every renew_after_ms, and ends as cli_job_end says. */
void cli_job_run(struct cli_http *h, const struct cli_claim *c, const struct cli_job_opts *opts,
		 struct cli_job_report *rep);

/* ---- job_writes.c: the requests of one job (job.c's own) ---- */

#define CLI_RENEW_TIMEOUT_MAX_MS 10000
#define CLI_BACKOFF_FIRST_MS 200
#define CLI_BACKOFF_MAX_MS 5000
#define CLI_WRITE_TIMEOUT_MS 15000

/* "/v1/cards/<card, escaped><tail>" into buf. */
void cli_job_card_path(char *buf, size_t len, const struct cli_claim *c, const char *tail);
/* Whether a status is the server saying no for good (409, 404, 403, 422, 401). */
bool cli_job_refused(long status);
/* The wait before the next try of a write that got no answer: the backoff, never more than
 * half the time left before `until` (a last try lands in the lease's last part). */
int64_t cli_job_retry_delay(int64_t backoff, int64_t until);

/* ---- batch.c: one renew many per tick for every claim the slots hold (DESIGN §18) ---- */
#define CLI_RENEWER_POLL_MS 200 /* a job reads its claim's state at least this often */
struct cli_hold;
/* Starts the renewer's thread; NULL on out of memory. */
struct cli_renewer *cli_renewer_start(void);
/* Stops it (the holds left are freed). r may be NULL. */
void cli_renewer_stop(struct cli_renewer *r);
/* Registers claim c (copied), whose lease ends at lease_end (cli_mono_ms); NULL on out of
 * memory. Let go of it with cli_renewer_drop. A hold of the same card under an older epoch
 * is superseded: its claim is lost (as cli_renewer_claimed). */
struct cli_hold *cli_renewer_hold(struct cli_renewer *r, const struct cli_claim *c,
				  int64_t lease_end);
/* Claim c was just taken: a hold of its card under an older epoch (revoked or reclaimed
 * since) is lost at once, and its job stops its command as for any lost claim. */
void cli_renewer_claimed(struct cli_renewer *r, const struct cli_claim *c);
/* The hold's state: *lease_end moved to the last renew's (never back), *renewed the renews
 * acknowledged so far; true when the claim is lost (detail says why). */
bool cli_renewer_read(struct cli_renewer *r, struct cli_hold *p, int64_t *lease_end,
		      unsigned *renewed, char *detail, size_t len);
/* Stops renewing p and frees it; p may be NULL (then r may be too). */
void cli_renewer_drop(struct cli_renewer *r, struct cli_hold *p);
/* POST renew; the HTTP status (0: no answer), err the reason. */
long cli_job_renew(struct cli_http *h, const struct cli_claim *c, long timeout, char *err);
/* The run's heartbeat; true only when an operator cancelled the run. */
bool cli_job_heartbeat(struct cli_http *h, const struct cli_claim *c, const char *run,
		       long timeout);
/* The fenced release, retried on no answer until `until`. */
long cli_job_release(struct cli_http *h, const struct cli_claim *c, int64_t until, char *err);

/* Where a card given back returns (DESIGN §20): `to`, the column it was taken from, but only
 * while it is still in `at`, the running column the job moved it into. A card somebody
 * moved elsewhere meanwhile (an operator, a bot: their moves do not touch the claim) is
 * released where it is: a column somebody chose is never overwritten. */
struct cli_back {
	const char *to;
	const char *at;
	char found[65]; /* OUT: where the card was found instead of `at` ("": it was in `at`,
			 * or not asked) */
};

/* The claim given back; into back->to (back NULL: where it is) in the same fenced step. */
long cli_job_give_back(struct cli_http *h, const struct cli_claim *c, struct cli_back *back,
		       const char *reason, int64_t until, char *err);
/* PATCH the run (status, error, result); *cancelled (may be NULL): refused as cancelled. */
long cli_job_run_patch(struct cli_http *h, const struct cli_claim *c, const char *run,
		       const char *status, const char *error, json_t *result, int64_t until,
		       char *err, bool *cancelled);
/* --retry (DESIGN §17): the claim given back with an attempt counted, into back->to (back
 * NULL: where it is) in the same fenced step; retried on no answer until `until`. A card
 * somebody moved out of back->at meanwhile is released where it is with no attempt (the
 * retry could file it into the failed column): back->found says so. *card (may be NULL)
 * receives the last answer (new reference, or NULL): the card on 200, else the problem. */
long cli_job_retry_back(struct cli_http *h, const struct cli_claim *c, struct cli_back *back,
			int64_t until, char *err, json_t **card);
/* The card's outcome and the release in one fenced step (or the claim given back). *ans
 * (may be NULL) receives the state write's answer (new reference, or NULL). */
long cli_job_outcome_write(struct cli_http *h, const struct cli_claim *c,
			   const struct cli_outcome *o, struct cli_back *back, const char *reason,
			   int64_t until, char *err, json_t **ans);
/* Whether a refusal says boardctl's configuration is wrong (its flags, its token: no other
 * card would fare better, `work` stops) rather than something about this one card; decided
 * by the problem's code (status `st`, answer `problem`, may be NULL). */
bool cli_refusal_is_config(long st, const json_t *problem);
/* An outcome write refused with `st` (answer `problem`, may be NULL): the claim given back,
 * rep says how the job ended. */
void cli_job_outcome_refused(struct cli_http *h, const struct cli_claim *c,
			     const struct cli_job_opts *o, struct cli_back *back,
			     struct cli_job_report *rep, long st, const json_t *problem,
			     int64_t lease_end);
/* Creates the run and records it on the card; false with rep->end set when it could not. */
bool cli_job_run_start(struct cli_http *h, const struct cli_claim *c, struct cli_job_report *rep);
/* Mints the agent token bound to the claim: *out a new string (caller wipes and frees). */
bool cli_job_agent_token_mint(struct cli_http *h, const struct cli_claim *c, const json_t *caps,
			      char **out, struct cli_job_report *rep);
/* Moves the card into the running column `col` (NULL: not); from: the column it was in;
 * *moved whether it moved; false when the claim was found lost. */
bool cli_job_running_enter(struct cli_http *h, const struct cli_claim *c, const char *col,
			   char *from, size_t fromlen, bool *moved, struct cli_job_report *rep);

/* ---- supervise.c: the process holding a job's tree ---- */

struct cli_proc {
	pid_t sup;    /* the supervisor: boardctl's child */
	int ctl;      /* write end: each byte a signal for the command's group; closing it (or
		       * boardctl dying) kills the job's whole tree */
	int status;   /* read end (non-blocking): the command's wait status once it ended and its
		       * tree is gone */
	int out, err; /* read ends of the command's stdout and stderr (output.c reads them) */
};

/* Starts argv (env: its environment) under a supervisor. 0 once the command was executed;
 * else an errno, nothing runs, and *cmd_failed says whether it was the command's own exec
 * that failed (ENOENT: not found) rather than the supervisor's. */
int cli_proc_start(char *const *argv, char **env, struct cli_proc *p, bool *cmd_failed);
/* Sends sig to the command's process group (through the supervisor). */
void cli_proc_signal(struct cli_proc *p, int sig);
/* Whether the command ended (*ws: its wait status); false while it runs. Call when
 * p->status is readable. */
bool cli_proc_ended(struct cli_proc *p, int *ws);
/* Closes boardctl's ends (the supervisor kills what is left) and reaps the supervisor. */
void cli_proc_close(struct cli_proc *p);
/* `boardctl __supervise ...`: the supervisor's own main (never run by hand). */
int cli_supervise_main(int argc, char **argv);

/* ---- output.c: the job's output ---- */

#define CLI_OUTPUT_MAX 65536 /* the tail kept and sent: the run's output keeps as much */

struct cli_output;

/* Reads the command's stdout and stderr (fds taken over: closed by cli_output_free), writes
 * them through to boardctl's own, and keeps the unsent tail (at most CLI_OUTPUT_MAX bytes).
 * NULL on out of memory (the fds are closed then). */
struct cli_output *cli_output_start(int out, int err);
/* Once the command's tree is gone: reads what is left, and stops. */
void cli_output_finish(struct cli_output *o);
/* Whether bytes wait to be sent. */
bool cli_output_pending(struct cli_output *o);
/* Appends the unsent tail to run `run` (POST /v1/runs/{id}/output {marker, text}, DESIGN
 * §20) as valid UTF-8; `final` also sends an incomplete last character. A server without that
 * route (404, 405) is skipped silently, for this and every later job. */
void cli_output_send(struct cli_output *o, struct cli_http *h, const struct cli_claim *c,
		     const char *run, bool final);
void cli_output_free(struct cli_output *o);

/* ---- preflight.c: checked before anything is claimed ---- */

/* Whether argv0 can be executed as execvp would find it: 0, or CLI_EXIT_NOT_FOUND /
 * CLI_EXIT_CANNOT_EXEC with err saying why. */
int cli_command_check(const char *argv0, char *err, size_t errlen);
/* Reads the board (of `card` when board is NULL) and checks that the outcome columns and the
 * running column are columns of it; fills the running column from the board's `running`
 * role when `running` is NULL (running_buf holds it). 0; CLI_EXIT_ERROR with err; -1 with
 * err when the server could not answer (no connection, 5xx, 429): worth another try. */
int cli_board_check(struct cli_http *h, const char *board, const char *card,
		    struct cli_job_opts *o, bool running_given, char *running_buf, size_t len,
		    char *err, size_t errlen);

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
int cli_runs_main(int argc, char **argv);
int cli_boards_main(int argc, char **argv); /* boards.c: `boards ls|show` (DESIGN §17) */

/* --not-before's TIME (boards.c): an RFC 3339 time as given, or "+N<unit>" (ms, s, m, h, d)
 * from now, into out as RFC 3339 UTC. false with err saying why. */
bool cli_time_arg(const char *s, char *out, size_t len, char *err, size_t errlen);

/* Parses "--on-success done" style outcomes: a column name or "release". */
bool cli_outcome_parse(const char *s, struct cli_outcome *o);

#endif
