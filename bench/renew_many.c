/* renew_many — the server CPU of renewing K held claims one request each against one renew
 * many request (DESIGN §18: a worker heartbeats all its claims in one request per tick).
 *
 *   renew_many -p PORT [-k 32] [-w 4] [-r 500] [-m 10]   BENCH_WORKER_TOKEN, BENCH_BOT_TOKEN,
 *                                                         BENCH_SERVER_PID
 *
 * W workers, each on its own keep-alive connection, hold K claims each (seeded and claimed
 * before anything is measured). Then, alternating single and many (A/B twice), a phase runs R
 * rounds per worker (many: R x M, its phases being that much shorter): "single" renews each of its K claims with POST /v1/cards/ID/renew (K
 * requests a round), "many" renews all K with one POST /v1/claims/renew. Printed per phase:
 * the server's utime + stime (BENCH_SERVER_PID's /proc) per claim renewed and per round, the
 * rounds/s, and many's CPU as a fraction of single's. Every answer is checked (200, each
 * result 200); an error stops the run. Measured, not asserted. */
#include "bench/bench.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct opts {
	uint16_t port;
	int k, workers, rounds, mult;
	const char *worker_tok, *bot_tok;
};

struct wstate {
	const struct opts *o;
	int idx;
	struct bench_http *c;
	char (*ids)[64];
	long long *epochs;
	char *many_body;
	bool many; /* the phase */
	int errors;
	char first_err[200];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail(struct wstate *w, const char *what, int status, const char *body)
{
	if (!w->errors++)
		snprintf(w->first_err, sizeof w->first_err, "%s: %d %.150s", what, status,
			 body ? body : "");
}

/* Seeds and claims the worker's K cards (not measured). */
static void *setup_main(void *arg)
{
	struct wstate *w = arg;
	char hdr[256], body[256], path[160];
	const char *resp, *e;
	size_t o = 0;
	int st, i;

	for (i = 0; i < w->o->k && !w->errors; i++) {
		snprintf(w->ids[i], sizeof w->ids[i], "rm-%d-%d", w->idx, i);
		snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", w->o->bot_tok);
		snprintf(body, sizeof body, "{\"id\":\"%s\",\"state\":\"backlog\"}", w->ids[i]);
		if (bench_http_request(w->c, "POST", "/v1/cards", hdr, body, &st, &resp) ||
		    st != 201) {
			fail(w, "seed", st, resp);
			break;
		}
		snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", w->o->worker_tok);
		snprintf(path, sizeof path, "/v1/cards/%s/claim", w->ids[i]);
		snprintf(body, sizeof body, "{\"marker\":\"rm-%d\",\"lease_ms\":600000}", w->idx);
		if (bench_http_request(w->c, "POST", path, hdr, body, &st, &resp) || st != 200 ||
		    !(e = strstr(resp, "\"epoch\":"))) {
			fail(w, "claim", st, resp);
			break;
		}
		w->epochs[i] = strtoll(e + 8, NULL, 10);
	}
	/* the renew many body, made once */
	w->many_body = malloc((size_t)w->o->k * 128 + 32);
	if (!w->many_body)
		return NULL;
	o = (size_t)sprintf(w->many_body, "{\"tokens\":[");
	for (i = 0; i < w->o->k; i++)
		o += (size_t)sprintf(w->many_body + o,
				     "%s{\"card\":\"%s\",\"marker\":\"rm-%d\",\"epoch\":%lld}",
				     i ? "," : "", w->ids[i], w->idx, w->epochs[i]);
	sprintf(w->many_body + o, "]}");
	return NULL;
}

static void *run_main(void *arg)
{
	struct wstate *w = arg;
	char hdr[256], body[160], path[160];
	const char *resp, *p;
	int st, r, i, n, rounds = w->o->rounds * (w->many ? w->o->mult : 1);

	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", w->o->worker_tok);
	for (r = 0; r < rounds && !w->errors; r++) {
		if (w->many) {
			if (bench_http_request(w->c, "POST", "/v1/claims/renew", hdr, w->many_body,
					       &st, &resp) ||
			    st != 200) {
				fail(w, "renew many", st, resp);
				break;
			}
			for (n = 0, p = resp; (p = strstr(p, "\"status\":200")); p++)
				n++;
			if (n != w->o->k)
				fail(w, "renew many results", st, resp);
			continue;
		}
		for (i = 0; i < w->o->k; i++) {
			snprintf(path, sizeof path, "/v1/cards/%s/renew", w->ids[i]);
			snprintf(body, sizeof body, "{\"marker\":\"rm-%d\",\"epoch\":%lld}", w->idx,
				 w->epochs[i]);
			if (bench_http_request(w->c, "POST", path, hdr, body, &st, &resp) ||
			    st != 200) {
				fail(w, "renew", st, resp);
				break;
			}
		}
	}
	return NULL;
}

/* Runs one phase; prints its line; returns the server CPU per claim renewed (s), or -1. */
static double phase(struct wstate *ws, const struct opts *o, bool many)
{
	pthread_t *th = calloc((size_t)o->workers, sizeof *th);
	double cpu0, cpu1, t0, t1, per;
	int i, rounds = o->rounds * (many ? o->mult : 1);
	double claims = (double)o->workers * rounds * o->k;

	if (!th)
		return -1;
	for (i = 0; i < o->workers; i++)
		ws[i].many = many;
	cpu0 = bench_server_cpu_s();
	t0 = now_s();
	for (i = 0; i < o->workers; i++)
		pthread_create(&th[i], NULL, run_main, &ws[i]);
	for (i = 0; i < o->workers; i++)
		pthread_join(th[i], NULL);
	t1 = now_s();
	cpu1 = bench_server_cpu_s();
	free(th);
	for (i = 0; i < o->workers; i++)
		if (ws[i].errors) {
			fprintf(stderr, "renew_many: %s\n", ws[i].first_err);
			return -1;
		}
	per = cpu0 >= 0 && cpu1 >= 0 ? (cpu1 - cpu0) / claims : -1;
	printf("  %-6s %d workers x %d rounds x %d claims: %.2f s, %.0f rounds/s, %.0f claims/s,"
	       "  server cpu %.2f s: %.2f us per claim, %.0f us per round\n",
	       many ? "many" : "single", o->workers, rounds, o->k, t1 - t0,
	       (double)o->workers * rounds / (t1 - t0), claims / (t1 - t0), cpu1 - cpu0,
	       per * 1e6, per * 1e6 * o->k);
	return per;
}

int main(int argc, char **argv)
{
	struct opts o = {.k = 32, .workers = 4, .rounds = 500, .mult = 10};
	struct wstate *ws;
	pthread_t *th;
	double s1, m1, s2, m2;
	int opt, i, errors = 0;

	while ((opt = getopt(argc, argv, "p:k:w:r:m:")) != -1) {
		switch (opt) {
		case 'p': o.port = (uint16_t)atoi(optarg); break;
		case 'k': o.k = atoi(optarg); break;
		case 'w': o.workers = atoi(optarg); break;
		case 'r': o.rounds = atoi(optarg); break;
		case 'm': o.mult = atoi(optarg); break;
		default: goto usage;
		}
	}
	o.worker_tok = getenv("BENCH_WORKER_TOKEN");
	o.bot_tok = getenv("BENCH_BOT_TOKEN");
	if (!o.port || !o.worker_tok || !o.bot_tok || o.k < 1 || o.k > 1000 || o.workers < 1 ||
	    o.workers > 256 || o.rounds < 1 || o.mult < 1)
		goto usage;
	if (bench_server_cpu_s() < 0)
		fprintf(stderr, "renew_many: no BENCH_SERVER_PID: no CPU figures\n");
	ws = calloc((size_t)o.workers, sizeof *ws);
	th = calloc((size_t)o.workers, sizeof *th);
	if (!ws || !th)
		return 1;
	for (i = 0; i < o.workers; i++) {
		ws[i] = (struct wstate){.o = &o, .idx = i};
		ws[i].c = bench_http_open("127.0.0.1", o.port);
		ws[i].ids = calloc((size_t)o.k, sizeof *ws[i].ids);
		ws[i].epochs = calloc((size_t)o.k, sizeof *ws[i].epochs);
		if (!ws[i].c || !ws[i].ids || !ws[i].epochs) {
			fprintf(stderr, "renew_many: cannot connect to 127.0.0.1:%u\n", o.port);
			return 1;
		}
		pthread_create(&th[i], NULL, setup_main, &ws[i]);
	}
	for (i = 0; i < o.workers; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < o.workers; i++)
		if (ws[i].errors || !ws[i].many_body) {
			fprintf(stderr, "renew_many: setup: %s\n", ws[i].first_err);
			return 1;
		}
	printf("renew_many: %d workers holding %d claims each (A/B twice)\n", o.workers, o.k);
	s1 = phase(ws, &o, false);
	m1 = phase(ws, &o, true);
	s2 = phase(ws, &o, false);
	m2 = phase(ws, &o, true);
	if (s1 > 0 && m1 > 0 && s2 > 0 && m2 > 0)
		printf("  many / single server cpu per claim: %.3f (1/%.1f)\n",
		       (m1 + m2) / (s1 + s2), (s1 + s2) / (m1 + m2));
	for (i = 0; i < o.workers; i++) {
		errors += ws[i].errors;
		bench_http_close(ws[i].c);
		free(ws[i].ids);
		free(ws[i].epochs);
		free(ws[i].many_body);
	}
	free(ws);
	free(th);
	return errors ? 1 : 0;
usage:
	fprintf(stderr, "usage: renew_many -p PORT [-k CLAIMS] [-w WORKERS] [-r ROUNDS] [-m MANY_MULT]\n"
			"tokens: BENCH_WORKER_TOKEN, BENCH_BOT_TOKEN; BENCH_SERVER_PID: the server\n");
	return 2;
}
