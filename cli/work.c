/* `boardctl work` and `boardctl run` (DESIGN §12): slots that each take a claim and run one
 * command under it (job.c), and the signal handling around them.
 *
 * Threads: the main thread only waits for signals (they are blocked everywhere else, and the
 * commands get an empty mask); --concurrency N slots each loop claim-next (long-poll) -> job.
 * The first SIGTERM/SIGINT/SIGHUP sets the stop signal and makes the stop pipe readable: each
 * slot forwards that signal to its command's process group, waits up to --grace, and releases
 * its claim; a second signal SIGKILLs the commands at once. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_WAIT_MS 5000 /* claim-next's long-poll: also the longest a stop waits for it */

struct work {
	/* options */
	const char *board;
	const char *card; /* `run`: this card only, once */
	json_t *columns, *labels; /* arrays or NULL */
	json_t *agent_caps;       /* --agent-caps: an array or NULL (job.agent_caps borrows it) */
	int64_t lease_ms;   /* 0: the server's default */
	int64_t wait_ms;
	unsigned concurrency;
	long max_jobs;      /* 0: no limit */
	struct cli_job_opts job;
	char marker_prefix[96];
	bool shared;        /* --concurrency > 1: claims taken together (take_shared), renewed
			     * together (job.renewer) */

	/* shared state */
	atomic_long started;  /* jobs begun (for --max-jobs) */
	atomic_int fatal;     /* an error no retry fixes: exit code */
	atomic_int last_exit; /* `run`: the command's exit code */
	atomic_uint running;  /* slots still looping */
	int stop_pipe[2];

	/* take_shared's pool, under pool_mu */
	pthread_mutex_t pool_mu;
	pthread_cond_t pool_cv;
	struct cli_claim *pool; /* claims taken for slots that have not picked them up yet */
	size_t pooled;
	bool fetching;          /* a slot is asking for claims */
	unsigned busy;          /* slots holding a claim */
	long taken;             /* claims taken in all (--max-jobs) */
};

static atomic_int stop_sig, kill_now; /* written by the main thread only */

struct slot {
	struct work *w;
	unsigned idx;
	pthread_t th;
	json_t *columns, *labels; /* this slot's own copies: jansson's counts are not shared safely */
};

static bool stopping(void)
{
	return atomic_load(&stop_sig) != 0;
}

/* Sleeps ms, or less when a stop comes. */
static void nap(const struct work *w, int64_t ms)
{
	struct pollfd p = {.fd = w->stop_pipe[0], .events = POLLIN};

	poll(&p, 1, (int)ms);
}

/* A claim of a named card answers the token only: the card's board (BOARDD_BOARD) and column
 * (where a card given back returns) are read from the card. Best effort: left empty when the
 * read fails. */
static void claim_card_fill(struct cli_http *h, struct cli_claim *c)
{
	char path[512], esc[400], err[CLI_ERR_MAX];
	json_t *ans = NULL;
	const char *board, *state;

	cli_http_escape(c->card, esc, sizeof esc);
	snprintf(path, sizeof path, "/v1/cards/%s", esc);
	if (cli_http_call(h, "GET", path, NULL, -1, 15000, &ans, err, sizeof err) == 200) {
		board = json_string_value(json_object_get(ans, "board"));
		state = json_string_value(json_object_get(ans, "state"));
		snprintf(c->board, sizeof c->board, "%s", board ? board : "");
		snprintf(c->state, sizeof c->state, "%s", state ? state : "");
	}
	json_decref(ans);
}

/* Gives a claim straight back (fenced release): taken as we were told to stop. */
static void give_back(struct cli_http *h, const struct cli_claim *c)
{
	char rel[600], esc[400], err[CLI_ERR_MAX];
	json_t *rb = json_pack("{s:s, s:I}", "marker", c->marker, "epoch", (json_int_t)c->epoch);

	cli_http_escape(c->card, esc, sizeof esc);
	snprintf(rel, sizeof rel, "/v1/cards/%s/release", esc);
	cli_http_call(h, "POST", rel, rb, -1, 10000, NULL, err, sizeof err);
	json_decref(rb);
}

/* Asks for claims: with count 0 one (claim-next's single answer, or the named card's claim),
 * else up to count with one claim-next {count} (DESIGN §18). 1 with v[0..*n) filled, 0 when
 * none (or stopping), -1 on a fatal error. */
static int take_many(struct work *w, const struct slot *s, struct cli_http *h, const char *marker,
		     long count, struct cli_claim *v, size_t *n)
{
	char path[512], esc[400], err[CLI_ERR_MAX], key[40] = "";
	json_t *body = json_pack("{s:s}", "marker", marker), *ans = NULL, *list, *it;
	int64_t backoff = 200, asked = 0;
	size_t i;
	long st;
	int rc = 0;
	bool in_flight;

	*n = 0;
	if (w->lease_ms)
		json_object_set_new(body, "lease_ms", json_integer(w->lease_ms));
	if (w->card) {
		cli_http_escape(w->card, esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/cards/%s/claim", esc);
	} else {
		cli_http_escape(w->board, esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/boards/%s/claim-next", esc);
		json_object_set_new(body, "wait_ms", json_integer(w->wait_ms));
		if (s->columns)
			json_object_set(body, "columns", s->columns);
		if (s->labels)
			json_object_set(body, "labels", s->labels);
		if (count > 0)
			json_object_set_new(body, "count", json_integer(count));
	}
	/* One key for this ask and every retry of it (claim-next's only: a claim of a named
	 * card is the holder's own and idempotent already): an answer lost after the server
	 * took cards is answered again, not with other cards while those stay held. */
	if (!w->card && !cli_http_new_key(key, sizeof key))
		key[0] = '\0';
	while (!stopping()) {
		asked = cli_mono_ms();
		st = key[0] ? cli_http_call_keyed(h, "POST", path, body, key,
						  (long)w->wait_ms + 15000, &ans, err, sizeof err)
			    : cli_http_call(h, "POST", path, body, -1, (long)w->wait_ms + 15000,
					    &ans, err, sizeof err);
		if (st == 200) {
			list = json_object_get(ans, "claims");
			rc = 1;
			if (!json_is_array(list)) {
				memset(&v[0], 0, sizeof v[0]);
				if (cli_claim_parse(ans, w->card, &v[0]))
					*n = 1;
				else
					rc = -1;
			}
			json_array_foreach(list, i, it) {
				if (*n == (size_t)(count > 0 ? count : 1))
					break;
				memset(&v[*n], 0, sizeof v[*n]);
				if (!cli_claim_parse(it, w->card, &v[*n])) {
					rc = -1;
					break;
				}
				++*n;
			}
			if (rc == 1 && !*n)
				rc = -1;
			if (rc < 0)
				cli_warn("unexpected claim answer from %s", path);
			for (i = 0; i < *n; i++) {
				v[i].asked_ms = asked;
				if (!v[i].board[0])
					claim_card_fill(h, &v[i]);
			}
			break;
		}
		/* The first ask with this key still being served (its answer was lost on the
		 * way): ask again shortly, with the same key, for its answer. */
		in_flight = st == 409 &&
			    json_is_string(json_object_get(ans, "code")) &&
			    strcmp(json_string_value(json_object_get(ans, "code")),
				   "idempotency_key_in_flight") == 0;
		json_decref(ans);
		ans = NULL;
		if (st == 204) {
			/* Nothing within the wait: the caller asks again. An answer much sooner
			 * than the wait (the server's long-poll cap is reached, or --wait-ms 0) is
			 * not a reason to ask in a tight loop. */
			if (cli_mono_ms() - asked < (w->wait_ms < 1000 ? w->wait_ms : 1000))
				nap(w, 250);
			else if (!w->wait_ms)
				nap(w, 250);
			break;
		}
		if (st != 0 && st < 500 && st != 429 && !in_flight) {
			cli_warn("%s", err);
			rc = -1;
			break;
		}
		cli_warn("%s; retrying", err);
		nap(w, backoff);
		backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
	}
	if (rc == 1 && stopping()) {
		/* Taken as we were told to stop: give them straight back. */
		for (i = 0; i < *n; i++)
			give_back(h, &v[i]);
		*n = 0;
		rc = 0;
	}
	json_decref(ans);
	json_decref(body);
	return rc;
}

/* Asks for a claim; 1 with *c filled, 0 when none (or stopping), -1 on a fatal error. */
static int take(struct work *w, const struct slot *s, struct cli_http *h, const char *marker,
		struct cli_claim *c)
{
	size_t n = 0;

	return take_many(w, s, h, marker, 0, c, &n);
}

/* --concurrency N > 1 (DESIGN §18): the slots share their claims. A slot that finds none
 * waiting and nobody asking asks for every idle slot at once (one claim-next {count}, at most
 * 100, within --max-jobs) and leaves the others in the pool for them. 1 with *c filled (the
 * slot counts busy until take_shared_done), 0 when none (or stopping), 2 when --max-jobs
 * claims were taken, -1 on a fatal error. */
static int take_shared(struct work *w, const struct slot *s, struct cli_http *h,
		       const char *marker, struct cli_claim *c)
{
	struct cli_claim *v;
	size_t n = 0, i;
	long want;
	int rc;

	pthread_mutex_lock(&w->pool_mu);
	for (;;) {
		if (stopping() || atomic_load(&w->fatal)) {
			pthread_mutex_unlock(&w->pool_mu);
			return 0; /* what the pool holds is given back at the end */
		}
		if (w->pooled) {
			*c = w->pool[--w->pooled];
			w->busy++;
			pthread_mutex_unlock(&w->pool_mu);
			return 1;
		}
		if (w->max_jobs > 0 && w->taken >= w->max_jobs) {
			pthread_mutex_unlock(&w->pool_mu);
			return 2;
		}
		if (!w->fetching)
			break;
		{
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 250 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&w->pool_cv, &w->pool_mu, &ts);
		}
	}
	want = (long)w->concurrency - (long)w->busy; /* the idle slots, this one included */
	if (w->max_jobs > 0 && want > w->max_jobs - w->taken)
		want = w->max_jobs - w->taken;
	want = want < 1 ? 1 : want > 100 ? 100 : want;
	w->fetching = true;
	pthread_mutex_unlock(&w->pool_mu);
	v = calloc((size_t)want, sizeof *v);
	rc = v ? take_many(w, s, h, marker, want, v, &n) : -1;
	pthread_mutex_lock(&w->pool_mu);
	w->fetching = false;
	if (rc == 1) {
		/* A card held under an older epoch is taken again: that hold is lost now, before
		 * the next tick would name the card twice. */
		for (i = 0; i < n; i++)
			cli_renewer_claimed(w->job.renewer, &v[i]);
		w->taken += (long)n;
		*c = v[0];
		w->busy++;
		for (i = n; i-- > 1;) /* handed out in claim-next's order */
			w->pool[w->pooled++] = v[i];
	}
	pthread_cond_broadcast(&w->pool_cv);
	pthread_mutex_unlock(&w->pool_mu);
	free(v);
	return rc;
}

static void take_shared_done(struct work *w)
{
	pthread_mutex_lock(&w->pool_mu);
	w->busy--;
	pthread_cond_broadcast(&w->pool_cv);
	pthread_mutex_unlock(&w->pool_mu);
}

/* `run`'s exit status for its one job (the man page's EXIT STATUS, enum cli_exit): the
 * command's own (128+N when signal N ended it), 128+N when boardctl was told to stop by
 * signal N (as a shell reports a process N ended), 123 lost, 124 the run cancelled by an
 * operator, 125 an error, 126/127 the command could not be started. */
static int job_exit_status(const struct cli_job_report *rep)
{
	switch (rep->end) {
	case CLI_JOB_SUCCEEDED:
	case CLI_JOB_FAILED:
	case CLI_JOB_NOT_STARTED:
		return rep->exit_code;
	case CLI_JOB_STOPPED:
		return 128 + atomic_load(&stop_sig);
	case CLI_JOB_LOST:
		return CLI_EXIT_LOST;
	case CLI_JOB_CANCELLED:
		return CLI_EXIT_CANCELLED;
	case CLI_JOB_ERROR:
		break;
	}
	return CLI_EXIT_ERROR;
}

static void *slot_main(void *arg)
{
	struct slot *s = arg;
	struct work *w = s->w;
	struct cli_http *h = cli_http_new();
	struct cli_claim c;
	struct cli_job_report rep;
	char marker[160];
	int got;

	snprintf(marker, sizeof marker, "%s-%u", w->marker_prefix, s->idx);
	if (!h) {
		cli_warn("out of memory");
		atomic_store(&w->fatal, CLI_EXIT_ERROR);
	}
	while (h && !stopping() && !atomic_load(&w->fatal)) {
		if (w->shared) {
			memset(&c, 0, sizeof c);
			got = take_shared(w, s, h, marker, &c);
			if (got == 2)
				break; /* --max-jobs claims taken */
			if (got == 0)
				continue;
			if (got < 0) {
				atomic_store(&w->fatal, CLI_EXIT_ERROR);
				break;
			}
			cli_job_run(h, &c, &w->job, &rep);
			take_shared_done(w);
			cli_progress_job(&c, &rep);
			if (rep.config_error)
				atomic_store(&w->fatal, CLI_EXIT_ERROR);
			if (rep.end == CLI_JOB_NOT_STARTED)
				atomic_store(&w->fatal, rep.exit_code);
			continue;
		}
		if (w->max_jobs > 0 && atomic_fetch_add(&w->started, 1) >= w->max_jobs)
			break;
		do {
			memset(&c, 0, sizeof c);
			got = take(w, s, h, marker, &c);
		} while (got == 0 && !w->card && !stopping());
		if (got < 0) {
			atomic_store(&w->fatal, CLI_EXIT_ERROR);
			break;
		}
		if (got == 0) {
			if (w->card && stopping()) /* `run` stopped before it held the card */
				atomic_store(&w->last_exit, 128 + atomic_load(&stop_sig));
			break;
		}
		cli_job_run(h, &c, &w->job, &rep);
		cli_progress_job(&c, &rep);
		if (rep.config_error)
			atomic_store(&w->fatal, CLI_EXIT_ERROR); /* every next card: the same */
		if (rep.end == CLI_JOB_NOT_STARTED) /* so would every next command be */
			atomic_store(&w->fatal, rep.exit_code);
		if (w->card) {
			atomic_store(&w->last_exit, job_exit_status(&rep));
			break;
		}
	}
	cli_http_free(h);
	atomic_fetch_sub(&w->running, 1);
	if (write(w->stop_pipe[1], "", 0) < 0) {
		/* nothing: the main thread also polls `running` */
	}
	return NULL;
}

static json_t *csv_array(const char *s)
{
	json_t *a = json_array();
	char *dup = strdup(s), *save = NULL, *tok;

	for (tok = strtok_r(dup, ",", &save); a && tok; tok = strtok_r(NULL, ",", &save))
		if (*tok)
			json_array_append_new(a, json_string(tok));
	free(dup);
	return a;
}

/* "10", "10s", "500ms", "2m" -> ms; -1 when malformed (or past a day). */
static int64_t duration_ms(const char *s, int64_t unit_ms)
{
	char *end;
	double v;

	/* a plain decimal: strtod would also take " 1", "+1", "0x10", "1e3", "inf", "nan" */
	if (!((*s >= '0' && *s <= '9') || *s == '.') || strpbrk(s, "xXeEnN"))
		return -1;
	v = strtod(s, &end);
	if (end == s || !(v >= 0) || v > 86400.0 * 1000)
		return -1;
	if (!*end)
		return (int64_t)(v * (double)unit_ms);
	if (strcmp(end, "ms") == 0)
		return (int64_t)v;
	if (strcmp(end, "s") == 0)
		return (int64_t)(v * 1000);
	if (strcmp(end, "m") == 0)
		return (int64_t)(v * 60000);
	return -1;
}

bool cli_outcome_parse(const char *s, struct cli_outcome *o)
{
	size_t i, n = strlen(s);

	if (strcmp(s, "release") == 0) {
		*o = (struct cli_outcome){CLI_OUTCOME_RELEASE, NULL};
		return true;
	}
	if (n == 0 || n > 64)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return false;
	*o = (struct cli_outcome){CLI_OUTCOME_COLUMN, s};
	return true;
}

static const char work_help[] =
	"usage: boardctl work --board B [options] -- COMMAND [ARG...]\n"
	"       boardctl run --card ID [options] -- COMMAND [ARG...]\n"
	"\n"
	"work: loop on claim-next (long-poll) and run COMMAND for each card it hands out.\n"
	"run:  claim card ID and run COMMAND once for it; exits with COMMAND's status.\n"
	"\n"
	"Before anything is claimed, boardctl checks that COMMAND can be executed and that the\n"
	"--on-success, --on-failure and --running-column columns are columns of the board.\n"
	"COMMAND runs under a supervisor in its own process group, only while the claim is\n"
	"held, with BOARDD_URL, BOARDD_CARD, BOARDD_BOARD, BOARDD_MARKER, BOARDD_EPOCH,\n"
	"BOARDD_RUN and BOARDD_RESULT (a file it may fill with a JSON result) in its\n"
	"environment, and with --agent-caps BOARDD_AGENT_TOKEN: a bot token for the card's\n"
	"board holding those capabilities, valid only while this claim is held. As it starts,\n"
	"the card enters the running column. Its stdout and stderr go through to boardctl's,\n"
	"and their last 64 KiB become the run's output. When it ends, or when boardctl dies\n"
	"(kill -9 included), whatever it left running is killed, its whole process tree.\n"
	"A COMMAND that cannot be started files nothing: the claim is released, boardctl exits\n"
	"126 (not executable) or 127 (not found).\n"
	"The claim is renewed and the run heartbeaten every renew_after_ms; a renew that gets\n"
	"no answer is retried until the lease would end, a last try in its last part. When\n"
	"the claim is lost, COMMAND's group gets SIGTERM, then SIGKILL after the grace, and\n"
	"nothing is written (run: exit 123).\n"
	"When an operator cancels the run, COMMAND is stopped the same way and the card is\n"
	"left claimed in its column for the operator: not filed, not released (run: exit 124);\n"
	"so too when COMMAND ended by itself just before boardctl learned of the cancel.\n"
	"Exit status: run, COMMAND's own (128+N when signal N ended it); 123 lost, 124\n"
	"cancelled, 125 boardctl's own error, 126/127 COMMAND could not be started.\n"
	"\n";

/* Two strings: one would pass the 4095 bytes ISO C compilers must accept. */
static const char work_help_opts[] =
	"options:\n"
	"  --board B            board to take cards from (work)\n"
	"  --card ID            the card to run (run)\n"
	"  --columns A,B        columns to take from (default: the board's eligible ones)\n"
	"  --label L            only cards carrying L (repeatable: all of them)\n"
	"  --lease-ms N         lease to ask for (default: the server's)\n"
	"  --concurrency N      N commands at once, one claim each (default 1); with N > 1\n"
	"                       the free slots' cards come with one claim-next (count) and\n"
	"                       the claims held are renewed with one renew many per tick\n"
	"  --max-jobs N         stop after N jobs (default: no limit)\n"
	"  --grace D            SIGTERM -> SIGKILL delay: 10, 10s, 500ms (default 10s)\n"
	"  --on-success COL     column on exit 0, or \"release\" (default done)\n"
	"  --on-failure COL     column on failure, or \"release\" (default blocked)\n"
	"  --retry              on failure (non-zero exit, or killed by a signal), instead of\n"
	"                       --on-failure: the card goes back to the column it was taken\n"
	"                       from, released with retry: one more attempt and a backoff\n"
	"                       (not_before); at the board's retry.max_attempts the server\n"
	"                       files it into the failed column (gave_up attempts_exhausted).\n"
	"                       --retry wins over --on-failure for a failing exit. A COMMAND\n"
	"                       that cannot start, or boardctl told to stop, counts no attempt\n"
	"  --running-column COL column the card enters as its job starts, or \"none\"\n"
	"                       (default: the board's running column)\n"
	"  --wait-ms N          claim-next long-poll per request, 0..30000 (default 5000)\n"
	"  --marker PREFIX      claim marker prefix (default boardctl-<host>-<pid>)\n"
	"  --agent-caps A,B     mint BOARDD_AGENT_TOKEN with these capabilities (board.read,\n"
	"                       board.create, board.move, board.label, board.comment,\n"
	"                       board.close); a refused mint fails the job, claim released\n"
	"  -h, --help           this help\n"
	"\n"
	"SIGTERM/SIGINT/SIGHUP are forwarded to COMMAND, its claim still renewed through the\n"
	"grace; after it ends (or the grace: SIGKILL) the claim is released. A card given back\n"
	"returns to the column it came from unless somebody moved it meanwhile (released\n"
	"there). A second signal SIGKILLs at once. One progress line per job goes to\n"
	"stderr; with --json, one JSON object per job to stdout. work stops (125) on a refused\n"
	"outcome only when the refusal is about its configuration (bad_request, forbidden,\n"
	"transition_rejected, ...); one about the card ends that job only.\n";

static int work_common(int argc, char **argv, bool is_run)
{
	static const struct option longopts[] = {
		{"board", required_argument, NULL, 'b'},
		{"card", required_argument, NULL, 'c'},
		{"columns", required_argument, NULL, 'C'},
		{"label", required_argument, NULL, 'l'},
		{"lease-ms", required_argument, NULL, 'L'},
		{"concurrency", required_argument, NULL, 'n'},
		{"max-jobs", required_argument, NULL, 'm'},
		{"grace", required_argument, NULL, 'g'},
		{"on-success", required_argument, NULL, 's'},
		{"on-failure", required_argument, NULL, 'f'},
		{"running-column", required_argument, NULL, 'R'},
		{"wait-ms", required_argument, NULL, 'w'},
		{"marker", required_argument, NULL, 'M'},
		{"agent-caps", required_argument, NULL, 'A'},
		{"retry", no_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct work w = {.concurrency = 1,
			 .wait_ms = POLL_WAIT_MS,
			 .pool_mu = PTHREAD_MUTEX_INITIALIZER,
			 .pool_cv = PTHREAD_COND_INITIALIZER};
	struct slot *slots = NULL;
	struct cli_http *h = NULL;
	char running[129], err[CLI_ERR_MAX];
	bool running_given = false;
	long backoff;
	sigset_t set;
	char host[64] = "host";
	unsigned i;
	int opt, sig, rc = 0, li = 0;
	long long num;

	w.job.grace_ms = 10000;
	w.job.on_success = (struct cli_outcome){CLI_OUTCOME_COLUMN, "done"};
	w.job.on_failure = (struct cli_outcome){CLI_OUTCOME_COLUMN, "blocked"};
	gethostname(host, sizeof host - 1);
	snprintf(w.marker_prefix, sizeof w.marker_prefix, "boardctl-%.40s-%ld", host,
		 (long)getpid());
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+h", longopts, &li)) != -1) {
		switch (opt) {
		case 'b': w.board = optarg; break;
		case 'c': w.card = optarg; break;
		case 'C':
			json_decref(w.columns);
			w.columns = csv_array(optarg);
			break;
		case 'l':
			if (!w.labels)
				w.labels = json_array();
			json_array_append_new(w.labels, json_string(optarg));
			break;
		case 'L':
			if (!cli_int_arg(optarg, 1, INT64_MAX, &num))
				goto bad_value;
			w.lease_ms = num;
			break;
		case 'n':
			if (!cli_int_arg(optarg, 1, 1024, &num))
				goto bad_value;
			w.concurrency = (unsigned)num;
			break;
		case 'm':
			if (!cli_int_arg(optarg, 0, LONG_MAX, &num))
				goto bad_value;
			w.max_jobs = (long)num;
			break;
		case 'g':
			if ((w.job.grace_ms = duration_ms(optarg, 1000)) < 0)
				goto bad_value;
			break;
		case 's':
			if (!cli_outcome_parse(optarg, &w.job.on_success))
				goto bad_value;
			break;
		case 'f':
			if (!cli_outcome_parse(optarg, &w.job.on_failure))
				goto bad_value;
			break;
		case 'R':
			if (strcmp(optarg, "none") == 0) {
				w.job.running_column = NULL;
			} else {
				struct cli_outcome col;

				if (!cli_outcome_parse(optarg, &col) || !col.column)
					goto bad_value;
				w.job.running_column = optarg;
			}
			running_given = true;
			break;
		case 'w':
			if (!cli_int_arg(optarg, 0, 30000, &num))
				goto bad_value;
			w.wait_ms = num;
			break;
		case 'A':
			json_decref(w.agent_caps);
			w.agent_caps = csv_array(optarg);
			if (!w.agent_caps || json_array_size(w.agent_caps) == 0)
				goto bad_value;
			w.job.agent_caps = w.agent_caps;
			break;
		case 'M':
			snprintf(w.marker_prefix, sizeof w.marker_prefix, "%s", optarg);
			break;
		case 'r':
			w.job.retry = true;
			break;
		case 'h':
			fputs(work_help, stdout);
			fputs(work_help_opts, stdout);
			rc = 0;
			goto out;
		default:
			goto bad;
		}
	}
	if (optind >= argc || (is_run ? !w.card : !w.board) || (is_run && w.board)) {
		cli_warn(is_run ? "run needs --card ID and a command after --"
				: "work needs --board B and a command after --");
		goto bad;
	}
	if (is_run)
		w.concurrency = 1;
	w.job.argv = argv + optind;
	/* Signals are taken by the main thread only (sigtimedwait): blocked from here on, in
	 * every thread the slots start. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Before anything is claimed (DESIGN §20): a command that cannot start, or a column the
	 * board lacks, would be the same for every card. A server that does not answer yet is
	 * waited for, as claim-next would be. */
	rc = cli_command_check(w.job.argv[0], err, sizeof err);
	if (rc) {
		cli_warn("%s: nothing claimed", err);
		goto out;
	}
	h = cli_http_new();
	if (!h) {
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	for (backoff = 200;; backoff = backoff * 2 > 5000 ? 5000 : backoff * 2) {
		struct timespec nap = {backoff / 1000, (backoff % 1000) * 1000000L};

		rc = cli_board_check(h, w.board, w.card, &w.job, running_given, running,
				     sizeof running, err, sizeof err);
		if (rc > 0)
			cli_warn("%s: nothing claimed", err);
		if (rc >= 0)
			break;
		cli_warn("%s; retrying", err);
		sig = sigtimedwait(&set, NULL, &nap);
		if (sig > 0) { /* told to stop before holding anything */
			rc = is_run ? 128 + sig : 0;
			break;
		}
	}
	if (rc)
		goto out;
	cli_http_free(h);
	h = NULL;
	if (pipe2(w.stop_pipe, O_CLOEXEC) != 0) {
		cli_warn("pipe: %s", strerror(errno));
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	w.job.stop_fd = w.stop_pipe[0];
	w.job.stop_sig = &stop_sig;
	w.job.kill_now = &kill_now;
	slots = calloc(w.concurrency, sizeof *slots);
	if (!slots) {
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	/* --concurrency N (DESIGN §18): the slots' cards come from one claim-next {count} and
	 * their claims are renewed with one renew many per tick. */
	w.shared = w.concurrency > 1;
	if (w.shared) {
		w.pool = calloc(w.concurrency, sizeof *w.pool);
		w.job.renewer = cli_renewer_start();
		if (!w.pool || !w.job.renewer) {
			rc = CLI_EXIT_ERROR;
			goto out;
		}
	}
	atomic_store(&w.running, w.concurrency);
	for (i = 0; i < w.concurrency; i++) {
		slots[i] = (struct slot){.w = &w, .idx = i,
					 .columns = w.columns ? json_deep_copy(w.columns) : NULL,
					 .labels = w.labels ? json_deep_copy(w.labels) : NULL};
		if (pthread_create(&slots[i].th, NULL, slot_main, &slots[i]) != 0) {
			cli_warn("cannot start slot %u", i);
			atomic_fetch_sub(&w.running, 1);
			slots[i].w = NULL;
		}
	}
	while (atomic_load(&w.running) > 0) {
		struct timespec tick = {0, 100 * 1000000L};

		sig = sigtimedwait(&set, NULL, &tick);
		if (sig <= 0)
			continue;
		if (!atomic_load(&stop_sig)) {
			atomic_store(&stop_sig, sig);
			cli_warn("got signal %d: forwarding it to the commands, then releasing",
				 sig);
			if (write(w.stop_pipe[1], "x", 1) < 0)
				cli_warn("stop pipe: %s", strerror(errno));
		} else {
			atomic_store(&kill_now, 1);
			cli_warn("second signal: SIGKILL to the commands");
		}
	}
	for (i = 0; i < w.concurrency; i++) {
		if (slots[i].w)
			pthread_join(slots[i].th, NULL);
		json_decref(slots[i].columns);
		json_decref(slots[i].labels);
	}
	rc = atomic_load(&w.fatal);
	if (!rc && is_run)
		rc = atomic_load(&w.last_exit);
	if (w.pooled) {
		/* Taken for slots that stopped first: given straight back. */
		h = cli_http_new();
		while (h && w.pooled)
			give_back(h, &w.pool[--w.pooled]);
	}
	close(w.stop_pipe[0]);
	close(w.stop_pipe[1]);
	goto out;
bad_value:
	cli_warn("--%s: invalid value \"%s\"", longopts[li].name, optarg);
bad:
	fputs(work_help, stderr);
	fputs(work_help_opts, stderr);
	rc = CLI_EXIT_ERROR;
out:
	cli_renewer_stop(w.job.renewer);
	free(w.pool);
	cli_http_free(h);
	free(slots);
	json_decref(w.columns);
	json_decref(w.labels);
	json_decref(w.agent_caps);
	return rc;
}

int cli_work_main(int argc, char **argv)
{
	return work_common(argc, argv, false);
}

int cli_run_main(int argc, char **argv)
{
	return work_common(argc, argv, true);
}
