/* The renewer of `work --concurrency N` (DESIGN §18): one thread renews every claim the slots
 * hold with one POST /v1/claims/renew per tick, as BullMQ's extendLocks does, instead of one
 * renew per claim.
 *
 * A job registers its claim (cli_renewer_hold) as it starts and lets go of it
 * (cli_renewer_drop) before its last writes. The tick is the shortest renew_after_ms among
 * the claims held; each tick renews all of them, each keeping its own lease_ms. Per claim, as
 * the single renew's loop did (job.c): a 200 restarts its lease from the moment the tick was
 * SENT; a refusal (409, 404, 403, 401: the claim was taken, revoked or reclaimed, the token
 * removed) is a loss at once, for that claim only; a tick with no answer (network, 5xx) is
 * tried again with backoff, a last try in the lease's last part (cli_job_retry_delay). The job
 * reads its claim's state (cli_renewer_read) when it wakes, at least every
 * CLI_RENEWER_POLL_MS.
 *
 * A card is held once: a new claim of a card already held under an older epoch (the old
 * claim was revoked or reclaimed, and an idle slot took the card again) supersedes the old
 * hold, whose claim is lost at once; so a tick never names a card twice, which the server
 * refuses for the whole request (400). A whole request refused for another reason than the
 * token (anything but 401, 403) says nothing about each claim: that tick renews each claim
 * on its own (POST /v1/cards/{id}/renew), so each job's fate is its own answer. */
#include "cli/cli.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cli_hold {
	struct cli_claim c;   /* a copy: the job's own may go before the tick's answer */
	int64_t lease_end;    /* local: the last renew acknowledged was sent then + lease_ms */
	unsigned renewed;     /* renews acknowledged (the job heartbeats its run on a change) */
	bool lost;
	char detail[CLI_ERR_MAX];
	struct cli_hold *next;
};

struct cli_renewer {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	bool started, stop;
	struct cli_hold *head;
	struct cli_http *h;
};

/* The tick: the shortest renew_after_ms held (0: nothing held). Under mu. */
static int64_t tick_ms(const struct cli_renewer *r)
{
	const struct cli_hold *p;
	int64_t t = 0;

	for (p = r->head; p; p = p->next)
		if (!p->lost && (!t || p->c.renew_after_ms < t))
			t = p->c.renew_after_ms;
	return t;
}

/* The earliest lease end held (bounds the retries of a tick with no answer). Under mu. */
static int64_t first_end(const struct cli_renewer *r)
{
	const struct cli_hold *p;
	int64_t e = 0;

	for (p = r->head; p; p = p->next)
		if (!p->lost && (!e || p->lease_end < e))
			e = p->lease_end;
	return e;
}

static void wait_until(struct cli_renewer *r, int64_t at)
{
	struct timespec ts;
	int64_t left = at - cli_mono_ms();

	if (left <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += left / 1000;
	ts.tv_nsec += (left % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

/* The most tokens one POST /v1/claims/renew takes (DESIGN §18: 1 000): more claims held go in
 * several requests of one tick. */
#define RENEW_MANY_MAX 1000

/* The hold of a claim as a tick sent it (a copy): its answer is matched to the hold of this
 * card AT this epoch (results come in the order sent), never to a newer claim of the same
 * card that another slot took while the request was out. Under mu. */
static struct cli_hold *hold_of(struct cli_renewer *r, const struct cli_claim *t)
{
	struct cli_hold *p;

	for (p = r->head; p; p = p->next)
		if (!p->lost && p->c.epoch == t->epoch && strcmp(p->c.card, t->card) == 0)
			return p;
	return NULL; /* dropped while the tick was out */
}

/* Marks every hold of c's card under an older epoch lost: c superseded it (the older claim
 * was revoked or reclaimed before boardctl took the card again). Under mu. */
static void supersede(struct cli_renewer *r, const struct cli_claim *c)
{
	struct cli_hold *p;

	for (p = r->head; p; p = p->next)
		if (!p->lost && p->c.epoch < c->epoch && strcmp(p->c.card, c->card) == 0) {
			p->lost = true;
			snprintf(p->detail, sizeof p->detail,
				 "claim lost: card %.128s was claimed again at epoch %lld (this "
				 "claim, epoch %lld, was revoked or reclaimed)", c->card,
				 (long long)c->epoch, (long long)p->c.epoch);
			pthread_cond_broadcast(&r->cv);
		}
}

/* The single renew of each claim of v[0..n), for a tick whose renew many was refused as a
 * whole for a reason that is not about every claim. False when one got no answer. */
static bool tick_each(struct cli_renewer *r, const struct cli_claim *v, size_t n)
{
	char err[CLI_ERR_MAX], missed[CLI_ERR_MAX] = "";
	struct cli_hold *p;
	bool answered = true;
	int64_t sent;
	size_t i;
	long st;

	for (i = 0; i < n; i++) {
		sent = cli_mono_ms();
		st = cli_job_renew(r->h, &v[i], CLI_RENEW_TIMEOUT_MAX_MS, err);
		pthread_mutex_lock(&r->mu);
		if ((p = hold_of(r, &v[i]))) {
			if (st == 200) {
				p->lease_end = sent + p->c.lease_ms;
				p->renewed++;
			} else if (cli_job_refused(st)) {
				p->lost = true;
				snprintf(p->detail, sizeof p->detail, "renew refused: %.400s", err);
			} else {
				answered = false; /* its lease runs on; tried again shortly */
				snprintf(missed, sizeof missed, "%s", err);
			}
		}
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
	}
	if (!answered)
		cli_warn("renew of a claim held failed, retrying: %s", missed);
	return answered;
}

/* One request of a tick, for v[0..n). False when it got no answer (network, 5xx). */
static bool tick_part(struct cli_renewer *r, const struct cli_claim *v, size_t n)
{
	json_t *tokens = json_array(), *body, *ans = NULL, *res, *it;
	char err[CLI_ERR_MAX];
	struct cli_hold *p;
	int64_t sent;
	size_t i;
	long st;

	for (i = 0; i < n && tokens; i++)
		if (json_array_append_new(tokens, json_pack("{s:s, s:s, s:I}", "card", v[i].card,
							    "marker", v[i].marker, "epoch",
							    (json_int_t)v[i].epoch)) != 0) {
			json_decref(tokens);
			tokens = NULL;
		}
	body = tokens ? json_pack("{s:o}", "tokens", tokens) : NULL;
	sent = cli_mono_ms();
	st = body ? cli_http_call(r->h, "POST", "/v1/claims/renew", body, -1,
				  CLI_RENEW_TIMEOUT_MAX_MS, &ans, err, sizeof err)
		  : 0;
	if (!body)
		snprintf(err, sizeof err, "out of memory");
	json_decref(body);
	if (st != 200) {
		json_decref(ans);
		if (st == 0 || st >= 500 || st == 429) {
			cli_warn("renew of the claims held failed, retrying: %s", err);
			return false;
		}
		/* Refused as a whole for another reason than the token (a 400 naming one item, a
		 * server without this route): no answer about each claim. Each is asked alone. */
		if (st != 401 && st != 403) {
			cli_warn("renew of the claims held refused as a whole (%ld: %s): renewing "
				 "each on its own", st, err);
			return tick_each(r, v, n);
		}
		/* The whole request refused for the token (401: it is gone; 403): every claim in
		 * it is lost. */
		pthread_mutex_lock(&r->mu);
		for (i = 0; i < n; i++)
			if ((p = hold_of(r, &v[i]))) {
				p->lost = true;
				snprintf(p->detail, sizeof p->detail, "renew refused: %.400s", err);
			}
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		return true;
	}
	res = json_object_get(ans, "results");
	pthread_mutex_lock(&r->mu);
	json_array_foreach(res, i, it) {
		const char *card = json_string_value(json_object_get(it, "card"));
		long s = (long)json_integer_value(json_object_get(it, "status"));

		if (i >= n || !card || strcmp(card, v[i].card) != 0 || !(p = hold_of(r, &v[i])))
			continue;
		if (s == 200) {
			p->lease_end = sent + p->c.lease_ms;
			p->renewed++;
		} else if (cli_job_refused(s)) {
			p->lost = true;
			snprintf(p->detail, sizeof p->detail, "renew refused: %ld %.300s", s,
				 cli_http_problem(it));
		}
		/* else (a 5xx for this card alone): its lease runs on; the next tick tries */
	}
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	json_decref(ans);
	return true;
}

/* One tick: renews every claim held, RENEW_MANY_MAX a request, each card once (the newest
 * epoch held: supersede() has made the others lost). Returns false when a request got no
 * answer (network, 5xx): the caller tries again. Called without mu. */
static bool tick(struct cli_renewer *r)
{
	struct cli_claim *v = NULL;
	struct cli_hold *p;
	size_t n = 0, cap = 0, i, k;
	bool ok = true;

	pthread_mutex_lock(&r->mu);
	for (p = r->head; p; p = p->next)
		cap += !p->lost;
	if (cap)
		v = calloc(cap, sizeof *v);
	for (p = r->head; v && p; p = p->next) {
		if (p->lost)
			continue;
		for (i = 0; i < n && strcmp(v[i].card, p->c.card) != 0; i++)
			;
		if (i < n) { /* held twice: the older is lost (a hold made before supersede) */
			supersede(r, v[i].epoch > p->c.epoch ? &v[i] : &p->c);
			if (v[i].epoch < p->c.epoch)
				v[i] = p->c;
			continue;
		}
		v[n++] = p->c;
	}
	pthread_mutex_unlock(&r->mu);
	if (cap && !v) {
		cli_warn("renew of the claims held: out of memory, retrying");
		ok = false;
	}
	for (i = 0; ok && i < n; i += k) {
		k = n - i < RENEW_MANY_MAX ? n - i : RENEW_MANY_MAX;
		ok = tick_part(r, v + i, k);
	}
	free(v);
	return ok;
}

static void *renewer_main(void *arg)
{
	struct cli_renewer *r = arg;
	int64_t next = 0, backoff = CLI_BACKOFF_FIRST_MS, t;

	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		t = tick_ms(r);
		if (!t) {
			next = 0; /* nothing held: the next hold starts the clock */
			pthread_cond_wait(&r->cv, &r->mu);
			continue;
		}
		if (!next)
			next = cli_mono_ms() + t;
		if (cli_mono_ms() < next) {
			wait_until(r, next);
			continue;
		}
		pthread_mutex_unlock(&r->mu);
		if (tick(r)) {
			backoff = CLI_BACKOFF_FIRST_MS;
			pthread_mutex_lock(&r->mu);
			next = cli_mono_ms() + tick_ms(r);
		} else {
			pthread_mutex_lock(&r->mu);
			next = cli_mono_ms() + cli_job_retry_delay(backoff, first_end(r));
			backoff = backoff * 2 > CLI_BACKOFF_MAX_MS ? CLI_BACKOFF_MAX_MS : backoff * 2;
		}
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

struct cli_renewer *cli_renewer_start(void)
{
	struct cli_renewer *r = calloc(1, sizeof *r);
	pthread_condattr_t ca;

	if (!r || !(r->h = cli_http_new())) {
		free(r);
		return NULL;
	}
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&r->th, NULL, renewer_main, r) != 0) {
		cli_renewer_stop(r);
		return NULL;
	}
	r->started = true;
	return r;
}

void cli_renewer_stop(struct cli_renewer *r)
{
	struct cli_hold *p;

	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->started)
		pthread_join(r->th, NULL);
	while ((p = r->head)) {
		r->head = p->next;
		free(p);
	}
	cli_http_free(r->h);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

struct cli_hold *cli_renewer_hold(struct cli_renewer *r, const struct cli_claim *c,
				  int64_t lease_end)
{
	struct cli_hold *p = calloc(1, sizeof *p), *q;

	if (!p)
		return NULL;
	p->c = *c;
	p->lease_end = lease_end;
	pthread_mutex_lock(&r->mu);
	supersede(r, c);
	for (q = r->head; q; q = q->next) /* held already under a newer epoch: lost itself */
		if (!q->lost && q->c.epoch > c->epoch && strcmp(q->c.card, c->card) == 0) {
			p->lost = true;
			snprintf(p->detail, sizeof p->detail,
				 "claim lost: card %.128s is held again at epoch %lld", c->card,
				 (long long)q->c.epoch);
		}
	p->next = r->head;
	r->head = p;
	pthread_cond_broadcast(&r->cv); /* the first hold starts the clock */
	pthread_mutex_unlock(&r->mu);
	return p;
}

void cli_renewer_claimed(struct cli_renewer *r, const struct cli_claim *c)
{
	pthread_mutex_lock(&r->mu);
	supersede(r, c);
	pthread_mutex_unlock(&r->mu);
}

bool cli_renewer_read(struct cli_renewer *r, struct cli_hold *p, int64_t *lease_end,
		      unsigned *renewed, char *detail, size_t len)
{
	bool lost;

	pthread_mutex_lock(&r->mu);
	if (p->lease_end > *lease_end)
		*lease_end = p->lease_end;
	*renewed = p->renewed;
	lost = p->lost;
	if (lost)
		snprintf(detail, len, "%s", p->detail);
	pthread_mutex_unlock(&r->mu);
	return lost;
}

void cli_renewer_drop(struct cli_renewer *r, struct cli_hold *p)
{
	struct cli_hold **link;

	if (!p)
		return;
	pthread_mutex_lock(&r->mu);
	for (link = &r->head; *link; link = &(*link)->next)
		if (*link == p) {
			*link = p->next;
			break;
		}
	pthread_mutex_unlock(&r->mu);
	free(p);
}
