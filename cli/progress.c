/* The per-job report: one line on stderr for people ("card, epoch, duration, outcome", the
 * exit status as a shell reports it, "killed by signal N (exit 128+N)"), and with --json one
 * JSON object per job on stdout for machines. */
#include "cli/cli.h"

#include <stdio.h>

const char *cli_job_end_name(enum cli_job_end e)
{
	switch (e) {
	case CLI_JOB_SUCCEEDED:
		return "succeeded";
	case CLI_JOB_FAILED:
		return "failed";
	case CLI_JOB_LOST:
		return "lost";
	case CLI_JOB_STOPPED:
		return "stopped";
	case CLI_JOB_ERROR:
		return "error";
	case CLI_JOB_CANCELLED:
		return "cancelled";
	case CLI_JOB_NOT_STARTED:
		return "not_started";
	}
	return "?";
}

void cli_progress_job(const struct cli_claim *c, const struct cli_job_report *rep)
{
	char how[64];

	if (rep->signal)
		snprintf(how, sizeof how, "killed by signal %d (exit %d)", rep->signal,
			 rep->exit_code);
	else
		snprintf(how, sizeof how, "(exit %d)", rep->exit_code);
	fprintf(stderr, "boardctl: card %s epoch %lld run %s: %s in %.3fs%s%s%s%s\n", c->card,
		(long long)c->epoch, rep->run[0] ? rep->run : "-", cli_job_end_name(rep->end),
		(double)rep->duration_ms / 1000.0, rep->signal ? ", " : " ", how,
		rep->detail[0] ? ": " : "", rep->detail);
	if (cli_g.json) {
		json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s?, s:I, s:i, s:i, s:b, s:s?}", "card",
				      c->card, "board", c->board, "epoch", (json_int_t)c->epoch,
				      "outcome", cli_job_end_name(rep->end), "run",
				      rep->run[0] ? rep->run : NULL, "duration_ms",
				      (json_int_t)rep->duration_ms, "exit_code", rep->exit_code,
				      "signal", rep->signal, "written", rep->outcome_written,
				      "detail", rep->detail[0] ? rep->detail : NULL);

		if (o && rep->retried)
			json_object_set_new(o, "retry",
					    json_pack("{s:I, s:s?, s:b}", "attempts",
						      (json_int_t)rep->attempts, "not_before",
						      rep->not_before[0] ? rep->not_before : NULL,
						      "exhausted", rep->exhausted));
		if (o) {
			/* One line per job even with --concurrency: json_dumpf writes in pieces,
			 * so the jobs' threads take stdout's lock for the whole line. */
			flockfile(stdout);
			json_dumpf(o, stdout, JSON_COMPACT);
			fputc('\n', stdout);
			fflush(stdout);
			funlockfile(stdout);
			json_decref(o);
		}
	}
}
