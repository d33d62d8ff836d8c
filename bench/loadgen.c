/* loadgen — the claim cycle against boardd over keep-alive HTTP/1.1.
 *
 *   loadgen -p PORT [-w 32] [-d 20] [-W 2] [-n CYCLES] [-l 30000] [-r 3] [-P bench] [-T FILE]
 *           [-e 1] [-G 0] [-L 0]
 *
 * Each worker owns one card (<prefix>-<i>, created in_progress by the bot token before the
 * clock starts) and one connection, and loops:
 *   claim (must answer fresh: true) -> renew x3 -> owned state write to review (If-Match) ->
 *   owned state write back to in_progress -> release.
 * -G N adds N reads per cycle (GET of the next worker's card, which that worker is writing:
 * what a reader pays for the FS store's read barrier, DESIGN §16), after the claim; -L N adds
 * N lists by state (GET /v1/cards?state=review&limit=1: the few cards between their two state
 * writes, read off the state's posting list while they come and go).
 * The workers run as coroutines on -e event-loop threads (bench/green.c; -e 0: a blocking
 * thread each, as before stop 19); the cycle below is the same either way.
 * Tokens: BENCH_WORKER_TOKEN and BENCH_BOT_TOKEN, or -T FILE with lines "worker TOKEN" and
 * "bot TOKEN" (boardd's own first-start lines "boardd:   dev-worker TOKEN" work too).
 * BENCH_TARGET names the server in the report (default "boardd"). */
#include "bench/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LG_OP_GET = BENCH_CYCLE_OPS, LG_OP_LIST, N_OPS };

static const char *const op_names[N_OPS] = {
	BENCH_CYCLE_OP_NAMES,
	[LG_OP_GET] = "get (other's)",
	[LG_OP_LIST] = "list review",
};

static char worker_auth[256], bot_auth[256];
static unsigned reads_per_cycle, lists_per_cycle; /* -G, -L */

struct lg_worker {
	char card[160];
	char marker[64];
	char path_claim[200], path_renew[200], path_state[200], path_release[200], path_get[200];
	int64_t epoch;
};

static int lg_setup(struct bench_worker *w)
{
	struct lg_worker *lw = calloc(1, sizeof *lw);
	char body[256];
	const char *resp;
	int status;

	if (!lw)
		return -1;
	w->ctx = lw;
	snprintf(lw->card, sizeof lw->card, "%s-%zu", w->opts->prefix, w->idx);
	snprintf(lw->marker, sizeof lw->marker, "bench-w%zu", w->idx);
	snprintf(lw->path_claim, sizeof lw->path_claim, "/v1/cards/%s/claim", lw->card);
	snprintf(lw->path_renew, sizeof lw->path_renew, "/v1/cards/%s/renew", lw->card);
	snprintf(lw->path_state, sizeof lw->path_state, "/v1/cards/%s/state", lw->card);
	snprintf(lw->path_release, sizeof lw->path_release, "/v1/cards/%s/release", lw->card);
	snprintf(lw->path_get, sizeof lw->path_get, "/v1/cards/%s-%zu", w->opts->prefix,
		 (w->idx + 1) % w->opts->workers);
	snprintf(body, sizeof body, "{\"id\":\"%s\",\"state\":\"in_progress\",\"title\":\"bench\"}",
		 lw->card);
	status = bench_op_untimed(w, "POST", "/v1/cards", bot_auth, body, &resp);
	/* 409: left by an earlier run on the same store; the first claim tells if it is
	 * usable (a card held by another marker shows up as claim errors). */
	if (status != 201 && status != 409) {
		fprintf(stderr, "loadgen: create %s: %d %s\n", lw->card, status, resp);
		return -1;
	}
	return 0;
}

/* After a failed step: give the card back so the next cycle can claim it fresh. Untimed. */
static void lg_recover(struct bench_worker *w, struct lg_worker *lw)
{
	char body[160];
	const char *resp;

	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"epoch\":%lld}", lw->marker,
		 (long long)lw->epoch);
	bench_op_untimed(w, "POST", lw->path_release, worker_auth, body, &resp);
}

static int lg_cycle(struct bench_worker *w)
{
	struct lg_worker *lw = w->ctx;
	char body[256], hdr[400];
	const char *resp;
	int64_t fresh_epoch = 0;
	int k;

	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"lease_ms\":%lld}", lw->marker,
		 (long long)w->opts->lease_ms);
	if (bench_op_request(w, BENCH_OP_CLAIM, "POST", lw->path_claim, worker_auth, body, &resp) !=
	    200)
		return -1;
	if (!strstr(resp, "\"fresh\":true") || !bench_json_int(resp, "epoch", &fresh_epoch)) {
		/* Not a fresh acquisition: a release was lost. Count it, give it back. */
		bench_op_unexpected(w, BENCH_OP_CLAIM, resp);
		bench_json_int(resp, "epoch", &lw->epoch);
		lg_recover(w, lw);
		return -1;
	}
	lw->epoch = fresh_epoch;
	for (k = 0; k < (int)reads_per_cycle; k++)
		if (bench_op_request(w, LG_OP_GET, "GET", lw->path_get, worker_auth, NULL, &resp) !=
		    200)
			goto fail;
	for (k = 0; k < (int)lists_per_cycle; k++)
		if (bench_op_request(w, LG_OP_LIST, "GET", "/v1/cards?state=review&limit=1", worker_auth, NULL,
				     &resp) != 200)
			goto fail;
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"epoch\":%lld,\"lease_ms\":%lld}",
		 lw->marker, (long long)lw->epoch, (long long)w->opts->lease_ms);
	for (k = 0; k < (int)w->opts->renews; k++)
		if (bench_op_request(w, BENCH_OP_RENEW, "POST", lw->path_renew, worker_auth, body,
				     &resp) != 200)
			goto fail;
	snprintf(hdr, sizeof hdr, "%sIf-Match: \"%lld\"\r\n", worker_auth, (long long)lw->epoch);
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"to\":\"review\"}", lw->marker);
	if (bench_op_request(w, BENCH_OP_TO_REVIEW, "PATCH", lw->path_state, hdr, body, &resp) != 200)
		goto fail;
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"to\":\"in_progress\"}", lw->marker);
	if (bench_op_request(w, BENCH_OP_TO_PROGRESS, "PATCH", lw->path_state, hdr, body, &resp) !=
	    200)
		goto fail;
	snprintf(body, sizeof body, "{\"marker\":\"%s\",\"epoch\":%lld}", lw->marker,
		 (long long)lw->epoch);
	if (bench_op_request(w, BENCH_OP_RELEASE, "POST", lw->path_release, worker_auth, body, &resp) !=
	    200)
		goto fail;
	return 0;
fail:
	lg_recover(w, lw);
	return -1;
}

static void lg_teardown(struct bench_worker *w)
{
	free(w->ctx);
	w->ctx = NULL;
}

/* Reads "worker TOKEN" / "bot TOKEN" lines (or boardd's "dev-worker TOKEN" lines). */
static int tokens_file_read(const char *path, char *worker, char *bot, size_t len)
{
	char line[512], a[128], b[256];
	FILE *f = fopen(path, "r");
	const char *p;

	if (!f) {
		perror(path);
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		p = strncmp(line, "boardd:", 7) == 0 ? line + 7 : line;
		if (sscanf(p, "%127s %255s", a, b) != 2)
			continue;
		if (strcmp(a, "worker") == 0 || strcmp(a, "dev-worker") == 0)
			snprintf(worker, len, "%s", b);
		else if (strcmp(a, "bot") == 0 || strcmp(a, "dev-bot") == 0)
			snprintf(bot, len, "%s", b);
	}
	fclose(f);
	return 0;
}

static int lg_opt(int opt, const char *arg, void *ctx)
{
	char *end;
	unsigned long n;

	if (opt == 'G' || opt == 'L') {
		n = strtoul(arg, &end, 10);
		if (*end || end == arg || n > 100)
			return -1;
		*(opt == 'G' ? &reads_per_cycle : &lists_per_cycle) = (unsigned)n;
		return 0;
	}
	if (opt != 'T')
		return -1;
	*(const char **)ctx = arg;
	return 0;
}

/* The store's own counters over the window, from /metrics (no token needed): the FS store's
 * group commit, or the Mongo store's round trips to its database. */
struct lg_counters {
	bool fs, mongo;
	unsigned long long commits, syncs, round_trips;
	double t;
};

static void lg_metrics(const struct bench_opts *o, struct lg_counters *c)
{
	struct bench_http *h = bench_opts_http_open(o);
	const char *resp = NULL;
	int status = 0;

	c->fs = c->mongo = false;
	if (h && bench_http_request(h, "GET", "/metrics", NULL, NULL, &status, &resp) == 0 &&
	    status == 200 && resp) {
		c->fs = bench_metric_value(resp, "boardd_fs_journal_lines_total", &c->commits) &&
			bench_metric_value(resp, "boardd_fs_journal_syncs_total", &c->syncs);
		c->mongo = bench_metric_value(resp, "boardd_mongo_round_trips_total", &c->round_trips);
	}
	c->t = bench_mono_s();
	bench_http_close(h);
}

static void lg_window(const struct bench_opts *o, bool end, void *ctx, char *note, size_t len)
{
	struct lg_counters *c0 = ctx, c1;

	if (!end) {
		lg_metrics(o, c0);
		return;
	}
	lg_metrics(o, &c1);
	if (c1.t <= c0->t) {
		snprintf(note, len, "store counters: none in /metrics");
	} else if (c0->mongo && c1.mongo) {
		/* The scrape itself is in it: a few counts per column, once at each end. */
		snprintf(note, len,
			 "mongo round trips (server's /metrics over the window): %llu, %.1f/s",
			 c1.round_trips - c0->round_trips,
			 (double)(c1.round_trips - c0->round_trips) / (c1.t - c0->t));
	} else if (c0->fs && c1.fs && c1.syncs > c0->syncs) {
		snprintf(note, len,
			 "group commit (server's /metrics over the window): %.1f journal lines per "
			 "fdatasync, %.0f fdatasync/s",
			 (double)(c1.commits - c0->commits) / (double)(c1.syncs - c0->syncs),
			 (double)(c1.syncs - c0->syncs) / (c1.t - c0->t));
	} else {
		snprintf(note, len, "store counters: none in /metrics");
	}
}

int main(int argc, char **argv)
{
	static struct bench_driver d = {
		.window = lg_window,
		.window_ctx_size = sizeof(struct lg_counters),
		.target = "boardd",
		.ops = op_names,
		.n_ops = N_OPS,
		.cycle_desc = "claim -> renew xN -> PATCH state review (If-Match) -> PATCH "
			      "state in_progress -> release",
		.setup = lg_setup,
		.cycle = lg_cycle,
		.teardown = lg_teardown,
		/* One loop thread: the workers' requests wait on the server's group sync, so
		 * the client is rarely busy; a second thread only adds wake-ups (bench/README). */
		.loops_default = 1,
	};
	char worker[256] = "", bot[256] = "";
	const char *tokens_file = NULL, *e;
	struct bench_opts o;

	if (bench_opts_parse(&o, argc, argv, "T:G:L:", lg_opt, &tokens_file,
			     "usage: loadgen -p PORT | -U SOCKET [options]\n"
			     "  -T FILE     tokens: lines \"worker TOKEN\" and \"bot TOKEN\"\n"
			     "              (else BENCH_WORKER_TOKEN, BENCH_BOT_TOKEN)\n"
			     "  -G N        N reads per cycle (GET of the next worker's card; 0)\n"
			     "  -L N        N lists by state per cycle (GET /v1/cards?state=review&limit=1; 0)\n") != 0)
		return 2;
	/* The name in the table and in RESULT's target= (bench/run.sh runs the same client
	 * against bench/ceiling as "ceiling" and "ceiling-mhd"). */
	if ((e = getenv("BENCH_TARGET")) && e[0])
		d.target = e;
	if ((e = getenv("BENCH_WORKER_TOKEN")))
		snprintf(worker, sizeof worker, "%s", e);
	if ((e = getenv("BENCH_BOT_TOKEN")))
		snprintf(bot, sizeof bot, "%s", e);
	if (tokens_file && tokens_file_read(tokens_file, worker, bot, sizeof worker) != 0)
		return 2;
	if (!worker[0] || !bot[0]) {
		fprintf(stderr, "loadgen: need a worker and a bot token (-T FILE or "
				"BENCH_WORKER_TOKEN / BENCH_BOT_TOKEN)\n");
		return 2;
	}
	/* %.200s: tokens are 64 hex characters; the bound keeps -Wformat-truncation quiet. */
	snprintf(worker_auth, sizeof worker_auth, "Authorization: Bearer %.200s\r\n", worker);
	snprintf(bot_auth, sizeof bot_auth, "Authorization: Bearer %.200s\r\n", bot);
	return bench_run(&d, &o);
}
