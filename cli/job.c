/* One job under a claim (DESIGN §12; consul lock's and etcdctl lock's contract): the command
 * runs only while the claim is held. The requests it makes are job_writes.c's.
 *
 * - The command runs under a supervisor (supervise.c) in its own process group; its whole
 *   process tree dies with boardctl (kill -9 included) and with the command itself: a
 *   process that outlives its supervisor would keep working after the lease ends. A command
 *   that cannot be started is no job failure: nothing is filed, the claim is released.
 * - As it starts, the card enters the running column (an owned state write).
 * - The claim is renewed and the run heartbeaten every renew_after_ms. A renew that fails
 *   without an answer (network, 5xx) is retried with backoff until the lease would end, the
 *   tries coming closer near the end so that one always lands in the lease's last part; a
 *   renew refused (409: the claim was taken, revoked or reclaimed; 401: the token was
 *   removed) is a loss at once. The
 *   lease end is measured locally from the moment each renew was SENT, so a boardctl stopped
 *   (SIGSTOP) past its lease knows it on waking, before it writes anything.
 * - The command's output goes through to boardctl's own, and its tail is appended to the run
 *   (output.c) every few seconds and before the run's final write.
 * - On loss: SIGTERM to the process group, SIGKILL after the grace, and nothing is written:
 *   the server would refuse it anyway; this stops the work toward refusals.
 * - On the command's exit: the run's status (and result/error), then the card's state and the
 *   release in one fenced step (PATCH state with release), or a fenced release alone. A card
 *   given back returns to the column it came from only while it is still in the running
 *   column (job_writes.c): a column somebody chose meanwhile is never overwritten.
 * - The run cancelled by an operator (a run write refused 409 run_final, the run reads
 *   cancelled): the command is stopped as on loss, and the card is neither filed nor
 *   released: an operator cancel is never auto-routed (DESIGN §6 "cancelled | keep",
 *   ADR-096 point 4); the claim stays parked for the operator, renewing stops.
 * - Told to stop (SIGTERM/SIGINT to boardctl): the signal is forwarded to the group, the
 *   command gets the grace to finish — the claim still renewed, since the command still runs
 *   (a claim lost meanwhile ends it as any loss does) — then the run is marked
 *   failed_resumable and the claim released, so the card goes back to the pool at once. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define OUTPUT_FLUSH_MS 5000  /* new output is appended to the run this often */

/* ---- the command ---- */

static char *env_pair(const char *k, const char *v)
{
	char *s = NULL;

	return asprintf(&s, "%s=%s", k, v) < 0 ? NULL : s;
}

static bool env_ours(const char *e)
{
	static const char *const keys[] = {"BOARDD_URL=", "BOARDD_CARD=", "BOARDD_MARKER=",
					   "BOARDD_EPOCH=", "BOARDD_RUN=", "BOARDD_RESULT=",
					   "BOARDD_BOARD=", "BOARDD_AGENT_TOKEN="};
	size_t i;

	for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (strncmp(e, keys[i], strlen(keys[i])) == 0)
			return true;
	return false;
}

/* environ without our keys, then ours (a new array; free each string after the fork). */
static char **env_build(const struct cli_claim *c, const char *run, const char *result_path,
			const char *agent_token, size_t *n_ours)
{
	size_t n = 0, k = 0, i;
	char epoch[32], **env;

	while (environ[n])
		n++;
	env = calloc(n + 9, sizeof *env);
	if (!env)
		return NULL;
	for (i = 0; i < n; i++)
		if (!env_ours(environ[i]))
			env[k++] = environ[i];
	*n_ours = k;
	snprintf(epoch, sizeof epoch, "%lld", (long long)c->epoch);
	env[k++] = env_pair("BOARDD_URL", cli_g.server);
	env[k++] = env_pair("BOARDD_CARD", c->card);
	env[k++] = env_pair("BOARDD_MARKER", c->marker);
	env[k++] = env_pair("BOARDD_EPOCH", epoch);
	env[k++] = env_pair("BOARDD_RUN", run);
	env[k++] = env_pair("BOARDD_RESULT", result_path);
	env[k++] = env_pair("BOARDD_BOARD", c->board);
	if (agent_token)
		env[k++] = env_pair("BOARDD_AGENT_TOKEN", agent_token);
	return env;
}

static void env_free(char **env, size_t from)
{
	size_t i;

	for (i = from; env && env[i]; i++) {
		explicit_bzero(env[i], strlen(env[i])); /* BOARDD_AGENT_TOKEN is a credential */
		free(env[i]);
	}
	free(env);
}

/* sig (0: none) to the command's group, SIGKILL at kill_at (cli_mono_ms; or at once on a
 * second signal) unless *killed says it was sent; returns the wait status once the command
 * ended and its tree is gone. Nothing is renewed meanwhile: for a claim already lost or
 * cancelled. */
static int terminate(struct cli_proc *p, int sig, int64_t kill_at, bool killed,
		     const struct cli_job_opts *o)
{
	struct pollfd pf = {.fd = p->status, .events = POLLIN};
	int ws = 0;

	if (sig)
		cli_proc_signal(p, sig);
	for (;;) {
		int64_t left = kill_at - cli_mono_ms();

		if (!killed && (left <= 0 || (o->kill_now && atomic_load(o->kill_now)))) {
			cli_proc_signal(p, SIGKILL);
			killed = true;
		}
		if (poll(&pf, 1, killed ? 1000 : (int)(left < 100 ? (left > 0 ? left : 1) : 100)) >
			    0 &&
		    cli_proc_ended(p, &ws))
			return ws;
	}
}

/* Whether the command has ended already (*ws: its wait status), without waiting. */
static bool ended_now(struct cli_proc *p, int *ws)
{
	struct pollfd pf = {.fd = p->status, .events = POLLIN};

	return poll(&pf, 1, 0) > 0 && cli_proc_ended(p, ws);
}

/* The report's exit status of wait status ws, as a shell reports it. */
static void exit_code_of(int ws, struct cli_job_report *rep)
{
	rep->signal = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
	rep->exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + rep->signal;
}

/* The result file the command may have written: JSON (any value) or NULL. */
static json_t *result_read(const char *path)
{
	struct stat sb;
	json_t *j;

	if (stat(path, &sb) != 0 || sb.st_size == 0)
		return NULL;
	if (sb.st_size > 65536) {
		cli_warn("%s: larger than 64 KiB, not sent", path);
		return NULL;
	}
	j = json_load_file(path, JSON_DECODE_ANY, NULL);
	if (!j)
		cli_warn("%s: not JSON, not sent", path);
	return j;
}

/* The command could not be started: not a job failure (DESIGN §20). Nothing is filed: the
 * run says why (failed_resumable, so the card is not in anyone's way) and the claim is
 * released without an attempt. */
static void not_started(struct cli_http *h, const struct cli_claim *c,
			const struct cli_job_opts *o, int e, bool cmd_failed, int64_t lease_end,
			struct cli_job_report *rep)
{
	char err[CLI_ERR_MAX];

	rep->end = CLI_JOB_NOT_STARTED;
	rep->exit_code = !cmd_failed       ? CLI_EXIT_ERROR
			 : e == ENOENT     ? CLI_EXIT_NOT_FOUND
					   : CLI_EXIT_CANNOT_EXEC;
	if (cmd_failed && e == ENOENT && strchr(o->argv[0], '/') && access(o->argv[0], F_OK) == 0)
		snprintf(rep->detail, sizeof rep->detail,
			 "cannot start %.200s: %s (its interpreter, on its #! line, is missing)",
			 o->argv[0], strerror(e));
	else
		snprintf(rep->detail, sizeof rep->detail, "cannot start %.200s: %s",
			 cmd_failed ? o->argv[0] : "boardctl's job supervisor", strerror(e));
	cli_job_run_patch(h, c, rep->run, "failed_resumable", rep->detail, NULL, lease_end, err, NULL);
	if (cli_job_release(h, c, lease_end, err) != 200)
		snprintf(rep->detail + strlen(rep->detail), sizeof rep->detail - strlen(rep->detail),
			 "; release: %.200s", err);
	else
		snprintf(rep->detail + strlen(rep->detail), sizeof rep->detail - strlen(rep->detail),
			 "; nothing filed, the claim was released");
}

/* --retry (DESIGN §17): a failed job's claim given back with an attempt counted, into the
 * column the card was taken from. The report says what the server made of it: the attempt
 * and the backoff, or the card filed into the failed column (attempts exhausted), or the card
 * released where somebody moved it, with no attempt. *problem: the refusal's answer (new
 * reference, or NULL). */
static long retry_back(struct cli_http *h, const struct cli_claim *c, struct cli_back *back,
		       struct cli_job_report *rep, int64_t lease_end, char *err, json_t **problem)
{
	json_t *card = NULL, *gu;
	const char *nb, *why, *state;
	long st = cli_job_retry_back(h, c, back, lease_end, err, &card);

	*problem = NULL;
	if (st != 200) {
		*problem = card;
		return st;
	}
	if (back && back->found[0]) {
		snprintf(rep->detail, sizeof rep->detail,
			 "retry: the card was moved to %s meanwhile: released there, no attempt "
			 "counted", back->found);
		json_decref(card);
		return st;
	}
	rep->retried = true;
	rep->attempts = json_integer_value(json_object_get(card, "attempts"));
	nb = json_string_value(json_object_get(card, "not_before"));
	snprintf(rep->not_before, sizeof rep->not_before, "%s", nb ? nb : "");
	gu = json_object_get(card, "gave_up");
	why = json_string_value(json_object_get(gu, "reason"));
	state = json_string_value(json_object_get(card, "state"));
	rep->exhausted = why && strcmp(why, "attempts_exhausted") == 0;
	if (rep->exhausted)
		snprintf(rep->detail, sizeof rep->detail,
			 "retry: attempts exhausted after %lld: filed into %s", (long long)rep->attempts,
			 state ? state : "the failed column");
	else
		snprintf(rep->detail, sizeof rep->detail, "retry: attempt %lld, not before %s",
			 (long long)rep->attempts, nb ? nb : "now");
	json_decref(card);
	return st;
}

void cli_job_run(struct cli_http *h, const struct cli_claim *c, const struct cli_job_opts *o,
		 struct cli_job_report *rep)
{
	/* The lease counts from before the claim was asked for; each renew restarts it from the
	 * moment the renew was sent. */
	int64_t t0 = cli_mono_ms(), lease_end = (c->asked_ms ? c->asked_ms : t0) + c->lease_ms;
	int64_t next_renew, next_flush = 0;
	int64_t backoff = CLI_BACKOFF_FIRST_MS, now;
	char result_path[] = "/tmp/boardctl-result-XXXXXX", err[CLI_ERR_MAX], from[65];
	char **env = NULL, *agent = NULL;
	size_t n_ours = 0;
	int fd, ws = 0, sig = 0, e;
	struct cli_proc proc = {.sup = -1, .ctl = -1, .status = -1, .out = -1, .err = -1};
	struct cli_output *output = NULL;
	bool exited = false, lost = false, cancelled = false, cmd_failed = false, moved = false;
	bool killed = false;  /* told to stop: SIGKILL sent (the grace is over, or a 2nd signal) */
	int64_t kill_at = 0;  /* told to stop: the grace's end */
	/* where a released card returns: where it came from, once moved (and while it is still
	 * in the running column) */
	struct cli_back back_at = {0}, *back = NULL;
	json_t *result = NULL, *problem = NULL;
	struct cli_hold *hold = NULL; /* with o->renewer: the claim as the renewer keeps it */
	unsigned renewed = 0;
	long st;

	memset(rep, 0, sizeof *rep);
	if (!cli_job_run_start(h, c, rep)) {
		if (rep->end == CLI_JOB_ERROR)
			cli_job_release(h, c, lease_end, err);
		goto done;
	}
	fd = mkstemp(result_path);
	if (fd >= 0)
		close(fd);
	else
		result_path[0] = '\0';
	if (o->agent_caps && !cli_job_agent_token_mint(h, c, o->agent_caps, &agent, rep)) {
		rep->end = CLI_JOB_ERROR;
		cli_job_run_patch(h, c, rep->run, "failed", rep->detail, NULL, lease_end, err, NULL);
		cli_job_release(h, c, lease_end, err);
		goto done;
	}
	env = env_build(c, rep->run, result_path, agent, &n_ours);
	if (agent) {
		explicit_bzero(agent, strlen(agent));
		free(agent);
		agent = NULL;
	}
	e = env ? cli_proc_start(o->argv, env, &proc, &cmd_failed) : ENOMEM;
	if (e) {
		not_started(h, c, o, e, cmd_failed, lease_end, rep);
		goto done;
	}
	output = cli_output_start(proc.out, proc.err);
	proc.out = proc.err = -1; /* the pump's now (closed with it, also on failure) */
	if (!cli_job_running_enter(h, c, o->running_column, from, sizeof from, &moved, rep))
		lost = true;
	if (moved && *from) {
		back_at.to = from;
		back_at.at = o->running_column;
		back = &back_at;
	}
	next_renew = (c->asked_ms ? c->asked_ms : t0) + c->renew_after_ms;
	next_flush = cli_mono_ms() + OUTPUT_FLUSH_MS;
	/* --concurrency N: the renewer renews every held claim in one request per tick (batch.c);
	 * without it (out of memory too), this loop renews its own. */
	if (o->renewer && !lost)
		hold = cli_renewer_hold(o->renewer, c, lease_end);
	/* Told to stop, the loop goes on through the grace: the command still runs, so its claim
	 * is still renewed until it has exited (DESIGN §12: it runs only while the claim is
	 * held). */
	while (!exited && !lost && !cancelled) {
		struct pollfd p[2] = {{.fd = proc.status, .events = POLLIN},
				      {.fd = o->stop_fd, .events = POLLIN}};
		int64_t wake;

		now = cli_mono_ms();
		if (now >= lease_end) {
			/* No renew made it in time (or we slept through it). If the command ended
			 * meanwhile, the exit branch says so. */
			exited = ended_now(&proc, &ws);
			lost = !exited;
			snprintf(rep->detail, sizeof rep->detail, "lease ended with no renew");
			break;
		}
		wake = hold ? now + CLI_RENEWER_POLL_MS : next_renew;
		if (lease_end < wake)
			wake = lease_end;
		if (next_flush < wake)
			wake = next_flush;
		if (sig && !killed && wake > now + 100)
			wake = now + 100; /* the grace's end, or a second signal */
		/* The stop pipe stays readable once written: watched only until the stop. */
		if (poll(p, o->stop_fd >= 0 && !sig ? 2 : 1, wake > now ? (int)(wake - now) : 0) > 0) {
			if (p[0].revents && cli_proc_ended(&proc, &ws)) {
				exited = true;
				break;
			}
			if (!sig && p[1].revents && o->stop_sig && atomic_load(o->stop_sig)) {
				sig = atomic_load(o->stop_sig);
				cli_proc_signal(&proc, sig);
				kill_at = cli_mono_ms() + o->grace_ms;
			}
		}
		if (sig && !killed &&
		    (cli_mono_ms() >= kill_at || (o->kill_now && atomic_load(o->kill_now)))) {
			cli_proc_signal(&proc, SIGKILL);
			killed = true;
		}
		now = cli_mono_ms();
		if (now >= lease_end) {
			exited = ended_now(&proc, &ws);
			lost = !exited;
			snprintf(rep->detail, sizeof rep->detail, "lease ended with no renew");
			break;
		}
		if (now >= next_flush) {
			if (cli_output_pending(output))
				cli_output_send(output, h, c, rep->run, false);
			next_flush = cli_mono_ms() + OUTPUT_FLUSH_MS;
		}
		if (hold) {
			unsigned seen = renewed;

			if (cli_renewer_read(o->renewer, hold, &lease_end, &renewed, rep->detail,
					     sizeof rep->detail)) {
				lost = true;
				break;
			}
			if (renewed != seen) /* the claim renewed: the run's heartbeat follows */
				cancelled = cli_job_heartbeat(h, c, rep->run, CLI_RENEW_TIMEOUT_MAX_MS);
			continue;
		}
		if (now < next_renew)
			continue;
		{
			int64_t sent = now;
			long tmo = (long)(lease_end - now);

			st = cli_job_renew(h, c, tmo < CLI_RENEW_TIMEOUT_MAX_MS ? tmo : CLI_RENEW_TIMEOUT_MAX_MS,
				   err);
			if (st == 200) {
				lease_end = sent + c->lease_ms;
				next_renew = sent + c->renew_after_ms;
				backoff = CLI_BACKOFF_FIRST_MS;
				cancelled = cli_job_heartbeat(h, c, rep->run, CLI_RENEW_TIMEOUT_MAX_MS);
			} else if (cli_job_refused(st)) {
				lost = true;
				snprintf(rep->detail, sizeof rep->detail, "renew refused: %.400s", err);
			} else {
				cli_warn("card %s: renew failed, retrying: %s", c->card, err);
				next_renew = cli_mono_ms() + cli_job_retry_delay(backoff, lease_end);
				backoff = backoff * 2 > CLI_BACKOFF_MAX_MS ? CLI_BACKOFF_MAX_MS : backoff * 2;
			}
		}
	}
	cli_renewer_drop(o->renewer, hold); /* renewing ends here, as it does below without it */
	hold = NULL;
	if (exited) {
		/* Exited while we were away (stopped): a lease that ended meanwhile is lost. */
		if (cli_mono_ms() >= lease_end) {
			lost = true;
			snprintf(rep->detail, sizeof rep->detail,
				 "the command ended after the lease did: nothing written");
		}
	} else {
		if (cancelled)
			cli_warn("card %s: run %s was cancelled by an operator: stopping the command "
				 "(SIGTERM, SIGKILL after the grace)", c->card, rep->run);
		/* Lost or cancelled: SIGTERM, SIGKILL after the grace; during a stop's grace,
		 * that grace's end stands (the command has had its SIGTERM). */
		ws = terminate(&proc, killed ? 0 : SIGTERM,
			       sig ? kill_at : cli_mono_ms() + o->grace_ms, killed, o);
	}
	exit_code_of(ws, rep);
	cli_output_finish(output); /* the tree is gone: the pipes are at their end */
	if (lost) {
		rep->end = CLI_JOB_LOST;
		goto done;
	}
	if (cancelled)
		goto cancelled;
	cli_output_send(output, h, c, rep->run, true); /* before the run is final */
	if (sig) {
		char why[64];

		snprintf(why, sizeof why, "boardctl stopped by signal %d", sig);
		rep->end = CLI_JOB_STOPPED;
		cli_job_run_patch(h, c, rep->run, "failed_resumable", why, NULL, lease_end, err,
			  &cancelled);
		if (cancelled)
			goto cancelled; /* the operator's cancel came first: theirs to decide */
		st = cli_job_give_back(h, c, back, "boardctl_stopped", lease_end, err);
		if (st != 200)
			snprintf(rep->detail, sizeof rep->detail, "release: %.400s", err);
		else if (back && back->found[0])
			snprintf(rep->detail, sizeof rep->detail,
				 "the card was moved to %s meanwhile: released there", back->found);
		goto done;
	}
	rep->end = rep->exit_code == 0 ? CLI_JOB_SUCCEEDED : CLI_JOB_FAILED;
	if (result_path[0])
		result = result_read(result_path);
	{
		char why[64];

		if (!rep->signal)
			snprintf(why, sizeof why, "exit status %d", rep->exit_code);
		else
			snprintf(why, sizeof why, "killed by signal %d", rep->signal);
		st = cli_job_run_patch(h, c, rep->run, rep->end == CLI_JOB_SUCCEEDED ? "finished" : "failed",
			       rep->end == CLI_JOB_SUCCEEDED ? NULL : why, result, lease_end, err,
			       &cancelled);
		if (cancelled)
			goto cancelled; /* the command ended as the operator cancelled: not filed */
		if (st != 200)
			cli_warn("card %s: run %s: %s", c->card, rep->run, err);
		if (rep->end == CLI_JOB_FAILED && o->retry)
			st = retry_back(h, c, back, rep, lease_end, err, &problem);
		else
			st = cli_job_outcome_write(h, c, rep->end == CLI_JOB_SUCCEEDED ? &o->on_success : &o->on_failure,
					   back,
					   rep->end == CLI_JOB_SUCCEEDED ? "boardctl_succeeded" : "boardctl_failed",
					   lease_end, err, &problem);
	}
	if (st == 200) {
		rep->outcome_written = true;
		if (!rep->detail[0] && back && back->found[0])
			snprintf(rep->detail, sizeof rep->detail,
				 "the card was moved to %s meanwhile: released there", back->found);
	} else {
		snprintf(rep->detail, sizeof rep->detail, "outcome not written: %.400s", err);
		if (cli_job_refused(st))
			cli_job_outcome_refused(h, c, o, back, rep, st, problem, lease_end);
	}
	goto done;
cancelled:
	/* An operator cancel is never auto-routed (DESIGN §6 "cancelled | keep", ADR-096 point 4):
	 * the card is neither filed nor released; the claim stays under the cancelled run, as the
	 * reaper keeps it, parked for the operator (a release would put it back in the pool for a
	 * fresh spend). Renewing stops here. So too when the command ended by itself but the
	 * cancel reached the server before our run write: the operator was answered 200 first,
	 * and the card is theirs to decide; the report carries the command's own exit status. */
	rep->end = CLI_JOB_CANCELLED;
	snprintf(rep->detail, sizeof rep->detail,
		 "run %s cancelled by an operator%s: card left claimed in its column for the "
		 "operator (not filed, not released)", rep->run,
		 exited ? " as the command ended by itself (its outcome and result not written)"
			: "");
done:
	json_decref(problem);
	json_decref(result);
	cli_output_free(output);
	cli_proc_close(&proc);
	if (result_path[0])
		unlink(result_path);
	env_free(env, n_ours);
	rep->duration_ms = cli_mono_ms() - t0;
}
