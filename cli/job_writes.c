/* The requests one job makes (DESIGN §12, §20; job.c runs them): the claim's renew, the run's
 * heartbeat, the run and the card written fenced, retried on no answer so that a last try
 * lands in the lease's last part, and the claim given back, into the column the card came
 * from when the job moved it. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RETRY_MIN_MS 100 /* the closest two retries come, near the lease's end */

bool cli_claim_parse(const json_t *answer, const char *card_id, struct cli_claim *c)
{
	const json_t *tok = json_object_get(answer, "token"), *card = json_object_get(answer, "card");
	const char *id = card ? json_string_value(json_object_get(card, "id")) : card_id;
	const char *board = card ? json_string_value(json_object_get(card, "board")) : NULL;
	const char *state = card ? json_string_value(json_object_get(card, "state")) : NULL;
	const char *marker;

	if (!tok)
		tok = answer; /* POST /v1/cards/{id}/claim answers the token itself */
	marker = json_string_value(json_object_get(tok, "marker"));
	if (!id || !marker || !json_is_integer(json_object_get(tok, "epoch")) ||
	    !json_is_integer(json_object_get(tok, "lease_ms")))
		return false;
	snprintf(c->card, sizeof c->card, "%s", id);
	snprintf(c->board, sizeof c->board, "%s", board ? board : "");
	snprintf(c->state, sizeof c->state, "%s", state ? state : "");
	snprintf(c->marker, sizeof c->marker, "%s", marker);
	c->epoch = json_integer_value(json_object_get(tok, "epoch"));
	c->lease_ms = json_integer_value(json_object_get(tok, "lease_ms"));
	c->renew_after_ms = json_integer_value(json_object_get(tok, "renew_after_ms"));
	if (c->renew_after_ms <= 0)
		c->renew_after_ms = c->lease_ms / 3;
	return c->lease_ms > 0;
}

/* ---- the requests ---- */

void cli_job_card_path(char *buf, size_t len, const struct cli_claim *c, const char *tail)
{
	char id[400];

	cli_http_escape(c->card, id, sizeof id);
	snprintf(buf, len, "/v1/cards/%s%s", id, tail);
}

/* A refusal: the server answered and said no (the claim is not ours any more, or the token
 * that holds it was removed: 401). */
bool cli_job_refused(long status)
{
	return status == 409 || status == 404 || status == 403 || status == 422 || status == 401;
}

long cli_job_renew(struct cli_http *h, const struct cli_claim *c, long timeout, char *err)
{
	char path[512];
	json_t *body = json_pack("{s:s, s:I, s:I}", "marker", c->marker, "epoch",
				 (json_int_t)c->epoch, "lease_ms", (json_int_t)c->lease_ms);
	long st;

	cli_job_card_path(path, sizeof path, c, "/renew");
	st = cli_http_call(h, "POST", path, body, -1, timeout, NULL, err, CLI_ERR_MAX);
	json_decref(body);
	return st;
}

/* Whether the JSON string field `key` of `o` equals `want` (false when absent). */
static bool field_is(const json_t *o, const char *key, const char *want)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && strcmp(s, want) == 0;
}

/* Whether run `run` is final with status cancelled: what an operator's cancel writes (boardctl
 * never does; DESIGN §6 keeps such a claim whoever wrote it). Asked after a 409 run_final, by
 * reading the run: a run made final another way (finished, failed) is not this case. */
static bool run_cancelled(struct cli_http *h, const char *run)
{
	char path[400], err[CLI_ERR_MAX], id[300];
	json_t *ans = NULL;
	bool yes;

	cli_http_escape(run, id, sizeof id);
	snprintf(path, sizeof path, "/v1/runs/%s", id);
	yes = cli_http_call(h, "GET", path, NULL, -1, CLI_WRITE_TIMEOUT_MS, &ans, err, sizeof err) ==
		      200 &&
	      field_is(ans, "status", "cancelled");
	json_decref(ans);
	return yes;
}

/* A run write answered `st` with `ans`: true when it was refused because an operator
 * cancelled the run (409 run_final, and the run reads cancelled). */
static bool refused_cancelled(struct cli_http *h, const char *run, long st, const json_t *ans)
{
	return st == 409 && field_is(ans, "code", "run_final") && run_cancelled(h, run);
}

/* The run's heartbeat. Any failure is only warned about (the claim is what counts), except an
 * operator's cancel: true then. */
bool cli_job_heartbeat(struct cli_http *h, const struct cli_claim *c, const char *run,
		      long timeout)
{
	char path[400], err[CLI_ERR_MAX], id[300];
	json_t *body = json_pack("{s:s}", "marker", c->marker), *ans = NULL;
	bool cancelled = false;
	long st;

	cli_http_escape(run, id, sizeof id);
	snprintf(path, sizeof path, "/v1/runs/%s/heartbeat", id);
	st = cli_http_call(h, "POST", path, body, -1, timeout, &ans, err, sizeof err);
	if (st != 200) {
		cancelled = refused_cancelled(h, run, st, ans);
		if (!cancelled)
			cli_warn("card %s: run heartbeat: %s", c->card, err);
	}
	json_decref(ans);
	json_decref(body);
	return cancelled;
}

/* The wait before the next try of a write that got no answer: the backoff, but never more
 * than half the time left before `until`, so tries come closer as the end nears and the last
 * one lands in the lease's last part (DESIGN §20), not after it. */
int64_t cli_job_retry_delay(int64_t backoff, int64_t until)
{
	int64_t half = (until - cli_mono_ms()) / 2;

	if (backoff > half)
		backoff = half;
	return backoff < RETRY_MIN_MS ? RETRY_MIN_MS : backoff;
}

/* One write (`body` borrowed), retried with backoff while it gets no answer or a 5xx, until
 * another try would start at or past `until`; returns the last status (0: no answer). *out
 * (may be NULL) receives the last answer (new reference, or NULL). */
static long write_retried(struct cli_http *h, const char *method, const char *path,
			  const json_t *body, int64_t if_match, int64_t until, char *err,
			  json_t **out)
{
	int64_t backoff = CLI_BACKOFF_FIRST_MS, delay;
	long st;

	for (;;) {
		if (out)
			json_decref(*out);
		st = cli_http_call(h, method, path, body, if_match, CLI_WRITE_TIMEOUT_MS, out, err,
				   CLI_ERR_MAX);
		delay = cli_job_retry_delay(backoff, until);
		if ((st != 0 && st < 500) || cli_mono_ms() + delay >= until)
			break;
		usleep((useconds_t)delay * 1000);
		backoff = backoff * 2 > CLI_BACKOFF_MAX_MS ? CLI_BACKOFF_MAX_MS : backoff * 2;
	}
	return st;
}

/* The fenced release (nothing else), retried on transport errors until `until`. */
long cli_job_release(struct cli_http *h, const struct cli_claim *c, int64_t until, char *err)
{
	char path[512];
	json_t *body = json_pack("{s:s, s:I}", "marker", c->marker, "epoch", (json_int_t)c->epoch);
	long st;

	cli_job_card_path(path, sizeof path, c, "/release");
	st = write_retried(h, "POST", path, body, -1, until, err, NULL);
	json_decref(body);
	return st;
}

/* Whether the answer `st`/`ans` of an owned state write sent with from = back->at says the
 * card was moved out of that column since (409 state_conflict: nothing changed, the claim
 * still held). back->found then names where it is now (read for the report; "?" without an
 * answer). */
static bool moved_since(struct cli_http *h, const struct cli_claim *c, struct cli_back *back,
			long st, const json_t *ans, int64_t until)
{
	char path[512], err[CLI_ERR_MAX];
	const char *code = json_string_value(json_object_get(ans, "code"));
	json_t *card = NULL;
	const char *state;

	if (st != 409 || !code || strcmp(code, "state_conflict") != 0)
		return false;
	cli_job_card_path(path, sizeof path, c, "");
	state = write_retried(h, "GET", path, NULL, -1, until, err, &card) == 200
			? json_string_value(json_object_get(card, "state"))
			: NULL;
	snprintf(back->found, sizeof back->found, "%s", state ? state : "?");
	json_decref(card);
	return true;
}

/* Gives the claim back. `back` (NULL: none) says where the card came from when the job moved
 * it into the running column: it returns there in the same fenced step (PATCH state with
 * release), so a released card never sits in the running column with nobody running it --
 * sent with from = the running column, so that a card somebody moved since (review) is not
 * dragged back (409 state_conflict): released where it is, as when the move is refused as
 * asked (a column gone since). */
long cli_job_give_back(struct cli_http *h, const struct cli_claim *c, struct cli_back *back,
		       const char *reason, int64_t until, char *err)
{
	char path[512];
	json_t *body, *ans = NULL;
	long st;

	if (!back || !back->to || !*back->to)
		return cli_job_release(h, c, until, err);
	back->found[0] = '\0';
	body = json_pack("{s:s, s:s, s:s, s:s, s:b}", "marker", c->marker, "from", back->at,
			 "to", back->to, "reason", reason, "release", 1);
	cli_job_card_path(path, sizeof path, c, "/state");
	st = write_retried(h, "PATCH", path, body, c->epoch, until, err, &ans);
	json_decref(body);
	if (moved_since(h, c, back, st, ans, until) || st == 400 || st == 403 || st == 422)
		st = cli_job_release(h, c, until, err);
	json_decref(ans);
	return st;
}

long cli_job_retry_back(struct cli_http *h, const struct cli_claim *c, struct cli_back *back,
			int64_t until, char *err, json_t **card)
{
	char path[512];
	json_t *body, *ans = NULL;
	bool moved = false;
	long st;

	if (back && back->to && *back->to) {
		back->found[0] = '\0';
		body = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "marker", c->marker, "from",
				 back->at, "to", back->to, "reason", "boardctl_failed", "release", 1,
				 "retry", 1);
		cli_job_card_path(path, sizeof path, c, "/state");
		st = write_retried(h, "PATCH", path, body, c->epoch, until, err, &ans);
		json_decref(body);
		moved = moved_since(h, c, back, st, ans, until);
		/* Refused as asked (the column gone since): the retry release where it is. */
		if (!moved && st != 400 && st != 403 && st != 422)
			goto out;
		json_decref(ans);
		ans = NULL;
	}
	/* Moved by somebody: released where it is with no attempt, as the reaper does (a retry
	 * that ran out of attempts would file the card into the failed column). */
	body = moved ? json_pack("{s:s, s:I}", "marker", c->marker, "epoch", (json_int_t)c->epoch)
		     : json_pack("{s:s, s:I, s:b}", "marker", c->marker, "epoch",
				 (json_int_t)c->epoch, "retry", 1);
	cli_job_card_path(path, sizeof path, c, "/release");
	st = write_retried(h, "POST", path, body, -1, until, err, &ans);
	json_decref(body);
out:
	if (card)
		*card = ans;
	else
		json_decref(ans);
	return st;
}

/* PATCH the run: status, error, result. Transport errors retried until `until`. *cancelled
 * (may be NULL) tells whether it was refused because an operator cancelled the run. */
long cli_job_run_patch(struct cli_http *h, const struct cli_claim *c, const char *run,
		      const char *status, const char *error, json_t *result, int64_t until,
		      char *err, bool *cancelled)
{
	char path[400], id[300];
	json_t *body = json_pack("{s:s, s:s}", "marker", c->marker, "status", status), *ans = NULL;
	long st;

	if (error)
		json_object_set_new(body, "error", json_string(error));
	if (result)
		json_object_set(body, "result", result);
	cli_http_escape(run, id, sizeof id);
	snprintf(path, sizeof path, "/v1/runs/%s", id);
	st = write_retried(h, "PATCH", path, body, -1, until, err, &ans);
	if (cancelled)
		*cancelled = st != 200 && refused_cancelled(h, run, st, ans);
	json_decref(ans);
	json_decref(body);
	return st;
}

/* The card's outcome and the release, in one fenced step (or the release alone). *ans (may
 * be NULL) receives the answer of the state write (new reference, or NULL). */
long cli_job_outcome_write(struct cli_http *h, const struct cli_claim *c,
			  const struct cli_outcome *o, struct cli_back *back, const char *reason,
			  int64_t until, char *err, json_t **ans)
{
	char path[512];
	json_t *body;
	long st;

	if (ans)
		*ans = NULL;
	if (o->kind == CLI_OUTCOME_RELEASE)
		return cli_job_give_back(h, c, back, reason, until, err);
	body = json_pack("{s:s, s:s, s:s, s:b}", "marker", c->marker, "to", o->column, "reason",
			 reason, "release", 1);
	cli_job_card_path(path, sizeof path, c, "/state");
	st = write_retried(h, "PATCH", path, body, c->epoch, until, err, ans);
	json_decref(body);
	return st;
}

/* The refusals that say boardctl's configuration is wrong, by problem code (DESIGN §8; the
 * man page's EXIT STATUS 125 lists them): the same request would be refused for every card,
 * so `work` stops. Every other refusal is about the card, whose state changed under the job
 * (terminal_state_exit: an operator filed it into a terminal column; claim_conflict,
 * state_conflict, ...): it ends that job only. */
static const char *const config_codes[] = {
	"bad_request",            /* boardctl's request, as its flags made it, is malformed */
	"unauthorized",           /* the token is gone */
	"forbidden",              /* the token lacks the role, the board or the caps */
	"method_not_allowed",     /* a server without the route */
	"transition_rejected",    /* a column of boardctl's flags is no column of the board */
	"unsupported_media_type", /* a server that speaks another contract */
	"precondition_required",
};

bool cli_refusal_is_config(long st, const json_t *problem)
{
	const char *code = json_string_value(json_object_get(problem, "code"));
	size_t i;

	if (!code) /* no problem+json (a proxy's answer): by the status alone */
		return st == 400 || st == 401 || st == 403 || st == 405 || st == 415 || st == 428;
	/* not_found: a server without the route is; a card deleted meanwhile is not */
	if (strcmp(code, "not_found") == 0)
		return strcmp(cli_http_problem(problem), "no such route") == 0;
	for (i = 0; i < sizeof config_codes / sizeof config_codes[0]; i++)
		if (strcmp(code, config_codes[i]) == 0)
			return true;
	return false;
}

/* The outcome write was refused (4xx). A claim taken from us (409 claim_conflict) refuses the
 * release too: the job was lost. Otherwise the outcome itself was refused: the claim is still
 * ours and is given back at once, never left held with nobody renewing it; the job is an
 * error, and a configuration error (`work` stops) only when the refusal's code says the
 * configuration is wrong (cli_refusal_is_config). */
void cli_job_outcome_refused(struct cli_http *h, const struct cli_claim *c,
			    const struct cli_job_opts *o, struct cli_back *back,
			    struct cli_job_report *rep, long st, const json_t *problem,
			    int64_t lease_end)
{
	const struct cli_outcome *out = rep->end == CLI_JOB_SUCCEEDED ? &o->on_success
								     : &o->on_failure;
	/* A retry release refused as asked (a server before DESIGN §17) gives the claim back
	 * plainly, as a refused column would. */
	bool give = out->kind != CLI_OUTCOME_RELEASE || (rep->end == CLI_JOB_FAILED && o->retry);
	char err[CLI_ERR_MAX];
	long rs = !give ? st
			: cli_job_give_back(h, c, back, "boardctl_outcome_refused", lease_end, err);
	size_t n = strlen(rep->detail);

	if (rs == 200) {
		rep->end = CLI_JOB_ERROR;
		rep->config_error = cli_refusal_is_config(st, problem);
		if (back && back->found[0])
			snprintf(rep->detail + n, sizeof rep->detail - n,
				 "; the claim was released where the card is (%s)", back->found);
		else
			snprintf(rep->detail + n, sizeof rep->detail - n, "; the claim was released");
	} else if (cli_job_refused(rs)) {
		rep->end = CLI_JOB_LOST;
	}
}

/* Creates the run and records it on the card. */
bool cli_job_run_start(struct cli_http *h, const struct cli_claim *c, struct cli_job_report *rep)
{
	char path[512];
	json_t *body, *ans = NULL;
	long st;

	body = json_pack("{s:s, s:s, s:s, s:I}", "card_id", c->card, "marker", c->marker,
			 "status", "running", "lease_ms", (json_int_t)c->lease_ms);
	st = cli_http_call(h, "POST", "/v1/runs", body, -1, CLI_WRITE_TIMEOUT_MS, &ans, rep->detail,
			   sizeof rep->detail);
	json_decref(body);
	if (st != 201 || !json_string_value(json_object_get(ans, "id"))) {
		json_decref(ans);
		rep->end = cli_job_refused(st) ? CLI_JOB_LOST : CLI_JOB_ERROR;
		return false;
	}
	snprintf(rep->run, sizeof rep->run, "%s", json_string_value(json_object_get(ans, "id")));
	json_decref(ans);
	/* The reaper judges the claim by the run the card records. */
	body = json_pack("{s:s, s:s}", "marker", c->marker, "run_id", rep->run);
	cli_job_card_path(path, sizeof path, c, "/last-run");
	st = cli_http_call(h, "PUT", path, body, c->epoch, CLI_WRITE_TIMEOUT_MS, NULL, rep->detail,
			   sizeof rep->detail);
	json_decref(body);
	if (st != 200) {
		rep->end = cli_job_refused(st) ? CLI_JOB_LOST : CLI_JOB_ERROR;
		return false;
	}
	return true;
}

/* An agent token bound to this claim (POST /v1/cards/{id}/agent-tokens, fenced by the epoch):
 * the command's agent acts on the board only while the claim is held. New string in *out
 * (caller wipes and frees); false with rep->detail on a refusal. */
bool cli_job_agent_token_mint(struct cli_http *h, const struct cli_claim *c, const json_t *caps,
			     char **out, struct cli_job_report *rep)
{
	char path[512];
	json_t *body = json_pack("{s:s, s:O}", "marker", c->marker, "caps", caps), *ans = NULL;
	long st;

	*out = NULL;
	cli_job_card_path(path, sizeof path, c, "/agent-tokens");
	st = cli_http_call(h, "POST", path, body, c->epoch, CLI_WRITE_TIMEOUT_MS, &ans, rep->detail,
			   sizeof rep->detail);
	json_decref(body);
	if (st == 201 && json_string_value(json_object_get(ans, "token")))
		*out = strdup(json_string_value(json_object_get(ans, "token")));
	else if (st != 0)
		snprintf(rep->detail, sizeof rep->detail, "agent token refused (%ld): %s", st,
			 cli_http_problem(ans));
	/* Caps the server refuses as asked (an unknown cap, one the worker lacks): every next
	 * card would be refused the same. */
	rep->config_error = !*out && st != 0 && cli_refusal_is_config(st, ans);
	json_decref(ans);
	return *out != NULL;
}

/* The card enters the running column as its job starts (DESIGN §20): an owned state write,
 * fenced; *moved says whether it did. false when the claim was found lost (a refused write
 * with claim_conflict, or 401); any other refusal is warned about and the job goes on where
 * the card is. */
bool cli_job_running_enter(struct cli_http *h, const struct cli_claim *c, const char *col,
			  char *from, size_t fromlen, bool *moved, struct cli_job_report *rep)
{
	char path[512], err[CLI_ERR_MAX];
	json_t *body, *ans = NULL;
	long st;

	*moved = false;
	snprintf(from, fromlen, "%s", c->state);
	if (col && !*from) { /* a claim of a named card answers the token only */
		cli_job_card_path(path, sizeof path, c, "");
		if (cli_http_call(h, "GET", path, NULL, -1, CLI_WRITE_TIMEOUT_MS, &ans, err,
				  sizeof err) == 200)
			snprintf(from, fromlen, "%s",
				 json_string_value(json_object_get(ans, "state"))
					 ? json_string_value(json_object_get(ans, "state"))
					 : "");
		json_decref(ans);
		ans = NULL;
	}
	if (!col || strcmp(from, col) == 0)
		return true;
	body = json_pack("{s:s, s:s, s:s}", "marker", c->marker, "to", col, "reason",
			 "boardctl_started");
	cli_job_card_path(path, sizeof path, c, "/state");
	st = cli_http_call(h, "PATCH", path, body, c->epoch, CLI_WRITE_TIMEOUT_MS, &ans, err,
			   sizeof err);
	json_decref(body);
	if (st == 401 || (st == 409 && field_is(ans, "code", "claim_conflict"))) {
		snprintf(rep->detail, sizeof rep->detail, "entering %s: %.400s", col, err);
		json_decref(ans);
		return false;
	}
	if (st != 200)
		cli_warn("card %s: not moved into %s: %s", c->card, col, err);
	*moved = st == 200;
	json_decref(ans);
	return true;
}

