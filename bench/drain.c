/* drain — N ready jobs drained by W workers, each job one claim and one fenced finish; the
 * same loop against boardd and against PostgreSQL (the River / Graphile Worker way).
 *
 *   drain boardd -p PORT [-n 10000] [-w 32] [-b K] [-B BOARD]   BENCH_WORKER_TOKEN, BENCH_BOT_TOKEN
 *   drain pg -c CONNINFO [-n 10000] [-w 32]
 *
 * A job, on either side, is two durable commits:
 *   boardd  POST /v1/boards/B/claim-next {marker}            (fresh claim, epoch advances)
 *           PATCH /v1/cards/ID/state If-Match: "EPOCH" {marker, to: done, release: true}
 * With -b K (DESIGN §18) a boardd worker takes K jobs with one claim-next {marker, count: K}
 * and finishes them with one POST /v1/claims/release {tokens: [{card, marker, epoch, to:
 * done}, ...]}: each job still its own fresh claim and its own fenced, durable finish, two
 * requests for K jobs. A job's latency is then its batch's (claim sent -> finish answered).
 *   pg      UPDATE jobs SET marker, epoch+1, lease WHERE id = (SELECT id ... WHERE ready AND
 *           unclaimed ORDER BY priority DESC, created_at, id FOR UPDATE SKIP LOCKED LIMIT 1)
 *           UPDATE jobs SET state done, marker NULL WHERE id AND marker AND epoch   (fenced)
 * each statement its own transaction (autocommit), durable defaults (fsync, synchronous_commit
 * on). Seeding is not measured. Printed: jobs/s over the drain, job latency (claim sent ->
 * finish answered) p50/p99/max, conflicts (a claim or finish refused), errors; with
 * BENCH_SERVER_PID, the server's CPU (utime + stime) over the drain per job and per request;
 * on boardd's FS store, journal lines per fdatasync and fdatasyncs/s (from /metrics).
 * Measured, not asserted. */
#include "bench/bench.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef BENCH_HAVE_PQ
#include "bench/bench_pg.h"
#endif

struct opts {
	const char *target;
	uint16_t port;
	const char *conninfo;
	const char *board;
	long n;
	int workers;
	int batch; /* -b K: claim-next count K and finish many; 0: one job per request pair */
	const char *worker_tok, *bot_tok;
	bool seed_only; /* -S: create the ready cards and stop (bench/drain.sh's boardctl run) */
};

struct wstate {
	const struct opts *o;
	int idx;
	pthread_barrier_t *go;
	struct bench_lat lat;
	uint64_t jobs, conflicts, errors;
	char first_err[200];
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void err_note(struct wstate *w, const char *what, int status, const char *body)
{
	w->errors++;
	if (!w->first_err[0])
		snprintf(w->first_err, sizeof w->first_err, "%s: %d %.120s", what, status,
			 body ? body : "");
}

/* ---- boardd ---- */

static atomic_long seeded;

static void *seed_main(void *arg)
{
	struct wstate *w = arg;
	struct bench_http *c = bench_http_open("127.0.0.1", w->o->port);
	char hdr[256], body[160];
	const char *resp;
	int st;
	long i;

	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", w->o->bot_tok);
	while (c && (i = atomic_fetch_add(&seeded, 1)) < w->o->n) {
		snprintf(body, sizeof body,
			 "{\"board\":\"%s\",\"state\":\"ready\",\"title\":\"job %ld\",\"priority\":%ld}",
			 w->o->board, i, i % 4);
		if (bench_http_request(c, "POST", "/v1/cards", hdr, body, &st, &resp) || st != 201)
			err_note(w, "seed", st, resp);
	}
	bench_http_close(c);
	return NULL;
}

/* The string value after `key` in s (e.g. "\"id\":\""), copied into out. */
static bool str_after(const char *s, const char *key, char *out, size_t len)
{
	const char *p = s ? strstr(s, key) : NULL, *e;

	if (!p)
		return false;
	p += strlen(key);
	e = strchr(p, '"');
	if (!e || (size_t)(e - p) >= len)
		return false;
	memcpy(out, p, (size_t)(e - p));
	out[e - p] = '\0';
	return true;
}

static void *boardd_main(void *arg)
{
	struct wstate *w = arg;
	struct bench_http *c = bench_http_open("127.0.0.1", w->o->port);
	char hdr[256], hdr2[320], path[256], body[256], marker[48], id[160];
	const char *resp, *tok;
	long long epoch;
	uint64_t t0;
	int st;

	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", w->o->worker_tok);
	snprintf(marker, sizeof marker, "drain-%d", w->idx);
	snprintf(path, sizeof path, "/v1/boards/%s/claim-next", w->o->board);
	pthread_barrier_wait(w->go);
	while (c) {
		t0 = now_us();
		snprintf(body, sizeof body, "{\"marker\":\"%s\",\"lease_ms\":30000}", marker);
		if (bench_http_request(c, "POST", path, hdr, body, &st, &resp) || st != 200) {
			if (st == 204)
				break; /* drained */
			if (st == 409)
				w->conflicts++;
			else
				err_note(w, "claim-next", st, resp);
			if (st == 0)
				break;
			continue;
		}
		tok = strstr(resp, "\"token\":");
		if (!str_after(resp, "{\"card\":{\"id\":\"", id, sizeof id) || !tok ||
		    !strstr(tok, "\"epoch\":")) {
			err_note(w, "claim-next answer", st, resp);
			break;
		}
		epoch = strtoll(strstr(tok, "\"epoch\":") + 8, NULL, 10);
		snprintf(hdr2, sizeof hdr2, "%sIf-Match: \"%lld\"\r\n", hdr, epoch);
		snprintf(body, sizeof body, "{\"marker\":\"%s\",\"to\":\"done\",\"release\":true}",
			 marker);
		{
			char p2[400];

			snprintf(p2, sizeof p2, "/v1/cards/%s/state", id);
			if (bench_http_request(c, "PATCH", p2, hdr2, body, &st, &resp) || st != 200) {
				if (st == 409)
					w->conflicts++;
				else
					err_note(w, "finish", st, resp);
				continue;
			}
		}
		bench_lat_record(&w->lat, now_us() - t0);
		w->jobs++;
	}
	bench_http_close(c);
	return NULL;
}

/* The batched worker (-b K): claim-next count K, then one finish many for the batch. */
static void *boardd_batch_main(void *arg)
{
	struct wstate *w = arg;
	struct bench_http *c = bench_http_open("127.0.0.1", w->o->port);
	size_t cap = (size_t)w->o->batch * 320 + 64, o;
	char hdr[256], path[256], body[160], marker[48], *rel = malloc(cap);
	const char *resp, *p, *e;
	int st, k, ok;
	uint64_t t0, dt;

	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", w->o->worker_tok);
	snprintf(marker, sizeof marker, "drain-%d", w->idx);
	snprintf(path, sizeof path, "/v1/boards/%s/claim-next", w->o->board);
	pthread_barrier_wait(w->go);
	while (c && rel) {
		t0 = now_us();
		snprintf(body, sizeof body, "{\"marker\":\"%s\",\"lease_ms\":30000,\"count\":%d}",
			 marker, w->o->batch);
		if (bench_http_request(c, "POST", path, hdr, body, &st, &resp) || st != 200) {
			if (st == 204)
				break; /* drained */
			err_note(w, "claim-next count", st, resp);
			if (st == 0)
				break;
			continue;
		}
		/* {"claims":[{"card":{"id":"ID",...},"token":{"marker":..,"epoch":N,...}},...]} */
		o = (size_t)snprintf(rel, cap, "{\"tokens\":[");
		for (k = 0, p = resp; (p = strstr(p, "{\"card\":{\"id\":\"")) && k < w->o->batch;
		     k++) {
			char id[160];

			if (!str_after(p, "{\"card\":{\"id\":\"", id, sizeof id) ||
			    !(e = strstr(p, "\"token\":{")) || !(e = strstr(e, "\"epoch\":")))
				break;
			o += (size_t)snprintf(rel + o, cap - o,
					      "%s{\"card\":\"%s\",\"marker\":\"%s\",\"epoch\":%lld,"
					      "\"to\":\"done\"}",
					      k ? "," : "", id, marker, strtoll(e + 8, NULL, 10));
			p = e;
		}
		if (k == 0 || o + 3 > cap) {
			err_note(w, "claim-next count answer", st, resp);
			break;
		}
		snprintf(rel + o, cap - o, "]}");
		if (bench_http_request(c, "POST", "/v1/claims/release", hdr, rel, &st, &resp) ||
		    st != 200) {
			err_note(w, "finish many", st, resp);
			if (st == 0)
				break;
			continue;
		}
		for (ok = 0, p = resp; (p = strstr(p, "\"status\":")); p++)
			if (strncmp(p + 9, "200", 3) == 0)
				ok++;
			else
				w->conflicts++;
		dt = now_us() - t0;
		while (ok-- > 0) {
			bench_lat_record(&w->lat, dt);
			w->jobs++;
		}
	}
	free(rel);
	bench_http_close(c);
	return NULL;
}

/* ---- PostgreSQL ---- */

#ifdef BENCH_HAVE_PQ
static int pg_seed(const struct opts *o)
{
	PGconn *pg = bench_pg_open(o->conninfo, "drain");
	char sql[1024];
	int rc;

	if (!pg)
		return -1;
	snprintf(sql, sizeof sql,
		 "DROP TABLE IF EXISTS jobs;"
		 "CREATE TABLE jobs (id bigserial PRIMARY KEY, state text NOT NULL,"
		 " priority int NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now(),"
		 " marker text, epoch bigint NOT NULL DEFAULT 0, lease_until timestamptz);"
		 "CREATE INDEX jobs_next ON jobs (priority DESC, created_at, id)"
		 " WHERE state = 'ready' AND marker IS NULL;"
		 "INSERT INTO jobs (state, priority, created_at)"
		 " SELECT 'ready', g %% 4, now() + g * interval '1 microsecond'"
		 " FROM generate_series(0, %ld) g;", o->n - 1);
	rc = bench_pg_exec(pg, sql, "drain: seed");
	bench_pg_exec(pg, "VACUUM ANALYZE jobs", "drain: seed");
	PQfinish(pg);
	return rc;
}

static void *pg_main(void *arg)
{
	struct wstate *w = arg;
	PGconn *pg = bench_pg_open(w->o->conninfo, "drain");
	char marker[48], epoch_s[32], id[32];
	const char *claim_p[1], *fin_p[3];
	PGresult *r;
	uint64_t t0;

	snprintf(marker, sizeof marker, "drain-%d", w->idx);
	if (pg &&
	    (bench_pg_prepare(pg, "claim",
			      "UPDATE jobs SET marker = $1, epoch = epoch + 1,"
			      " lease_until = now() + interval '30 seconds'"
			      " WHERE id = (SELECT id FROM jobs WHERE state = 'ready' AND"
			      " marker IS NULL ORDER BY priority DESC, created_at, id"
			      " FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, epoch",
			      1, "drain") != 0 ||
	     bench_pg_prepare(pg, "finish",
			      "UPDATE jobs SET state = 'done', marker = NULL, lease_until = NULL"
			      " WHERE id = $1 AND marker = $2 AND epoch = $3",
			      3, "drain") != 0)) {
		err_note(w, "prepare", 0, PQerrorMessage(pg));
		PQfinish(pg);
		pg = NULL;
	}
	pthread_barrier_wait(w->go);
	while (pg) {
		t0 = now_us();
		claim_p[0] = marker;
		r = PQexecPrepared(pg, "claim", 1, claim_p, NULL, NULL, 0);
		if (!bench_pg_ok(r)) {
			err_note(w, "claim", 0, PQerrorMessage(pg));
			PQclear(r);
			break;
		}
		if (PQntuples(r) == 0) {
			PQclear(r);
			break; /* drained */
		}
		snprintf(id, sizeof id, "%s", PQgetvalue(r, 0, 0));
		snprintf(epoch_s, sizeof epoch_s, "%s", PQgetvalue(r, 0, 1));
		PQclear(r);
		fin_p[0] = id;
		fin_p[1] = marker;
		fin_p[2] = epoch_s;
		r = PQexecPrepared(pg, "finish", 3, fin_p, NULL, NULL, 0);
		if (!bench_pg_ok(r))
			err_note(w, "finish", 0, PQerrorMessage(pg));
		else if (strcmp(PQcmdTuples(r), "1") != 0)
			w->conflicts++;
		else {
			bench_lat_record(&w->lat, now_us() - t0);
			w->jobs++;
		}
		PQclear(r);
	}
	PQfinish(pg);
	return NULL;
}
#endif

static void usage(void)
{
	fprintf(stderr, "usage: drain boardd -p PORT [-n JOBS] [-w WORKERS] [-b BATCH] [-B BOARD] [-S]\n"
			"       drain pg -c CONNINFO [-n JOBS] [-w WORKERS]\n"
			"boardd tokens: BENCH_WORKER_TOKEN, BENCH_BOT_TOKEN\n");
}

int main(int argc, char **argv)
{
	struct opts o = {.n = 10000, .workers = 32, .board = "default"};
	struct wstate *ws;
	pthread_t *th;
	pthread_barrier_t go;
	struct bench_lat all = {0};
	uint64_t jobs = 0, conflicts = 0, errors = 0, requests, t0, t1;
	double cpu0, cpu1;
	unsigned long long lines0 = 0, syncs0 = 0, lines1 = 0, syncs1 = 0;
	bool fsc = false;
	void *(*fn)(void *) = NULL;
	const char *first_err = NULL;
	char label[32];
	int opt, i;

	if (argc < 2) {
		usage();
		return 2;
	}
	o.target = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "p:c:n:w:b:B:S")) != -1) {
		switch (opt) {
		case 'p': o.port = (uint16_t)atoi(optarg); break;
		case 'c': o.conninfo = optarg; break;
		case 'n': o.n = atol(optarg); break;
		case 'w': o.workers = atoi(optarg); break;
		case 'b': o.batch = atoi(optarg); break;
		case 'B': o.board = optarg; break;
		case 'S': o.seed_only = true; break;
		default: usage(); return 2;
		}
	}
	if (o.n < 1 || o.n > 10000000 || o.workers < 1 || o.workers > 1024 || o.batch < 0 ||
	    o.batch > 100) {
		usage();
		return 2;
	}
	ws = calloc((size_t)o.workers, sizeof *ws);
	th = calloc((size_t)o.workers, sizeof *th);
	if (!ws || !th)
		return 1;
	for (i = 0; i < o.workers; i++)
		ws[i] = (struct wstate){.o = &o, .idx = i};
	if (strcmp(o.target, "boardd") == 0) {
		o.worker_tok = getenv("BENCH_WORKER_TOKEN");
		o.bot_tok = getenv("BENCH_BOT_TOKEN");
		if (!o.port || !o.worker_tok || !o.bot_tok) {
			usage();
			return 2;
		}
		for (i = 0; i < o.workers; i++)
			pthread_create(&th[i], NULL, seed_main, &ws[i]);
		for (i = 0; i < o.workers; i++)
			pthread_join(th[i], NULL);
		for (i = 0; i < o.workers; i++)
			if (ws[i].errors) {
				fprintf(stderr, "drain: seeding: %s\n", ws[i].first_err);
				return 1;
			}
		if (o.seed_only)
			return 0;
		fn = o.batch ? boardd_batch_main : boardd_main;
#ifdef BENCH_HAVE_PQ
	} else if (strcmp(o.target, "pg") == 0 && o.conninfo) {
		if (pg_seed(&o) != 0)
			return 1;
		fn = pg_main;
#endif
	} else {
		usage();
		return 2;
	}
	pthread_barrier_init(&go, NULL, (unsigned)o.workers + 1);
	for (i = 0; i < o.workers; i++) {
		ws[i].go = &go;
		pthread_create(&th[i], NULL, fn, &ws[i]);
	}
	usleep(200 * 1000); /* connections opened, statements prepared */
	if (fn == boardd_main || fn == boardd_batch_main)
		fsc = bench_fs_counters("127.0.0.1", o.port, &lines0, &syncs0);
	cpu0 = bench_server_cpu_s();
	t0 = now_us();
	pthread_barrier_wait(&go);
	for (i = 0; i < o.workers; i++)
		pthread_join(th[i], NULL);
	t1 = now_us();
	cpu1 = bench_server_cpu_s();
	if (fsc)
		fsc = bench_fs_counters("127.0.0.1", o.port, &lines1, &syncs1) && syncs1 > syncs0;
	for (i = 0; i < o.workers; i++) {
		bench_lat_merge(&all, &ws[i].lat);
		jobs += ws[i].jobs;
		conflicts += ws[i].conflicts;
		errors += ws[i].errors;
		if (!first_err && ws[i].first_err[0])
			first_err = ws[i].first_err;
	}
	/* a job is two requests; a batch of K, two for the K */
	requests = o.batch ? 2 * ((jobs + (uint64_t)o.batch - 1) / (uint64_t)o.batch) : 2 * jobs;
	snprintf(label, sizeof label, o.batch ? "%s -b %d" : "%s", o.target, o.batch);
	printf("drain %-6s jobs %" PRIu64 "/%ld workers %d  %.0f jobs/s  p50 %.2f ms  p99 %.2f ms"
	       "  max %.2f ms  conflicts %" PRIu64 "  errors %" PRIu64 "  (%.2f s)\n",
	       label, jobs, o.n, o.workers, (double)jobs / ((double)(t1 - t0) / 1e6),
	       (double)bench_lat_quantile(&all, 0.50) / 1000.0,
	       (double)bench_lat_quantile(&all, 0.99) / 1000.0, (double)all.max_us / 1000.0,
	       conflicts, errors, (double)(t1 - t0) / 1e6);
	if (cpu0 >= 0 && cpu1 >= 0 && jobs)
		printf("  server cpu %.2f s: %.0f us per job, %.0f us per request (BENCH_SERVER_PID)\n",
		       cpu1 - cpu0, (cpu1 - cpu0) * 1e6 / (double)jobs,
		       (cpu1 - cpu0) * 1e6 / (double)requests);
	if (fsc)
		printf("  group commit (/metrics): %.1f journal lines per fdatasync, %.0f fdatasync/s\n",
		       (double)(lines1 - lines0) / (double)(syncs1 - syncs0),
		       (double)(syncs1 - syncs0) / ((double)(t1 - t0) / 1e6));
	if (first_err)
		printf("  first error: %s\n", first_err);
	pthread_barrier_destroy(&go);
	free(ws);
	free(th);
	return errors ? 1 : 0;
}
