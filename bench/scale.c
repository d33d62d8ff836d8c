/* scale — how boardd's FS store grows with the number of cards.
 *
 *   scale -b build-bench/server/boardd [-s 10000,30000,100000] [-c 0.1] [-q 500]
 *         [-S 0.1] [-B 100] [-t 120] [-D DIR] [-k]
 *   scale -r DIR/data.loaded [-B 100] [-t 120] [-D DIR]   # step 5 only, on a copy
 *
 * For each size N, in a fresh temp dir:
 *   1. load (in-process, store API, 32 threads sharing the group commit): N cards spread over
 *      five working columns (column i%5) with two labels each ("team-<(i/5)%20>",
 *      "prio-<(i/100)%4>"; one card in 1000, all in review, also has "rare"), then a
 *      snapshot (store_fs_compact); with -S s, a share s of all cards (taken among the
 *      ready ones) is scheduled a day ahead (not_before, DESIGN §17) at priority 10, so the
 *      cards claim-next ranks first are all not claimable yet; then a journal tail: C = -c x N claims (default 0.1:
 *      10 000 at 100k cards, the target's figure) on in_progress cards, each with a run that
 *      finished and the card's last_run pointing at it (5 journaled writes per claim). The
 *      shape is the same at every size, so the growth factors compare like with like;
 *   2. cold start of a real boardd on that directory: exec -> first GET /readyz 200;
 *   3. its RSS (/proc/PID/status VmRSS) right after the start and VmHWM after the queries;
 *   4. list latency over HTTP, one keep-alive connection, -q requests per filter; then -q
 *      claim-nexts on the default board (a worker token, each a fresh claim of the best
 *      ready card, lease 1 h so the reaper below leaves them alone);
 *   5. SIGTERM, then the reaper in-process on the same directory (its open time is the
 *      in-process recovery figure), clock moved past the lease: gated passes of -B cards
 *      (default 100, the server's default batch) until one lists nothing or the -t budget
 *      (default 120 s) is spent; the figure is the sum of the passes' wall time, projected
 *      to all C claims when the budget ran out. (bench/reaper_pass times one pass over a
 *      store holding only the claimed cards.)
 * With -k the temp dir is kept, and holds data.loaded: the data as step 1 left it, which
 * -r replays step 5 on (a copy each time): the reaper before and after a change, on the same
 * cards, in the same minutes.
 * Prints a table per figure with the growth factor from the smallest to the largest size
 * (cards grow 10x from 10k to 100k: a factor <= 10 is linear or better). */
#include "bench/bench.h"
#include "core/core.h"
#include "server/reaper.h"
#include "store/store_twins.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LEASE_MS 60000LL
#define LOAD_THREADS 32
#define MAX_SIZES 8
#define N_QUERIES 4

static const char *const columns[] = {"backlog", "ready", "in_progress", "review", "inbox"};

static const struct {
	const char *name;
	const char *query;
} queries[N_QUERIES] = {
	{"state", "/v1/cards?state=ready&limit=100"},           /* 20 % of the cards */
	{"state+label", "/v1/cards?state=ready&label=team-3&limit=100"}, /* 1 % */
	{"state+rare", "/v1/cards?state=review&label=rare&limit=100"},   /* 0.1 % */
	{"no match", "/v1/cards?state=ready&label=rare&limit=100"},      /* none: a full scan */
};

struct scale_fig {
	size_t cards, claims;
	double load_s, tail_s;
	double snapshot_mib, journal_mib;
	double cold_ms;
	double cold_cpu_ms;       /* boardd's own CPU (user + sys) from exec to ready */
	double rss_mib, hwm_mib;
	double list_p50_ms[N_QUERIES], list_p99_ms[N_QUERIES];
	size_t list_errors;
	double next_p50_ms, next_p99_ms;
	size_t next_errors;
	double open_ms;           /* in-process store_fs_open (recovery) */
	double open_cpu_ms;       /* this process's CPU (all threads) during it */
	double reap_s;            /* sum of the passes' wall time */
	double reap_cpu_s;        /* this process's CPU (all threads) during the passes */
	double reap_projected_s;  /* reap_s scaled to all claims when the budget ran out */
	double reap_per_1k;       /* reap_projected_s per 1000 claims */
	double reap_cpu_us;       /* reap_cpu_s per claim filed, microseconds */
	size_t reap_passes, reap_done, reap_errors;
};

static const struct store_actor actor = {.name = "bench-scale"};
static struct store *load_st;
static size_t load_n, load_claims, load_next;
static double sched_share; /* -S: share of all cards scheduled a day ahead */
static int64_t sched_at;
static int load_failed;

static void fail(const char *what, enum core_rc rc)
{
	fprintf(stderr, "scale: %s: %s\n", what, core_rc_code(rc));
	__atomic_store_n(&load_failed, 1, __ATOMIC_RELAXED);
}

/* Column i%5; the claimed cards are in_progress ones (i%5 == 2), see load_claims_run. */
static void *load_cards(void *arg)
{
	char id[32], team[16], prio[16], rare[] = "rare";
	size_t i;

	(void)arg;
	while ((i = __atomic_fetch_add(&load_next, 1, __ATOMIC_RELAXED)) < load_n) {
		char *lv[3] = {team, prio, rare};
		struct core_strv labels = {lv, i % 1000 == 3 ? 3 : 2};
		struct store_card_create in = {.id = id, .title = "scale card", .labels = &labels};
		struct core_card *c = NULL;
		enum core_rc rc;

		snprintf(id, sizeof id, "card-%07zu", i);
		snprintf(team, sizeof team, "team-%zu", (i / 5) % 20);
		snprintf(prio, sizeof prio, "prio-%zu", (i / 100) % 4);
		in.state = columns[i % 5];
		/* Ready cards are a fifth of all: (i/5) % 1000 below share x 5000 of them. */
		if (sched_share > 0 && i % 5 == 1 && (double)((i / 5) % 1000) < sched_share * 5000) {
			in.not_before = sched_at;
			in.priority = 10;
		}
		if ((rc = store_card_create(load_st, &in, &actor, &c)) != CORE_OK) {
			fail("create", rc);
			return NULL;
		}
		core_card_free(c);
	}
	return NULL;
}

static void *load_claims_run(void *arg)
{
	char id[32], run[32], marker[32];
	size_t i;

	(void)arg;
	while ((i = __atomic_fetch_add(&load_next, 1, __ATOMIC_RELAXED)) < load_claims) {
		size_t card = 5 * i + 2; /* the i-th in_progress card */
		struct store_claim_result res = {0};
		struct core_card *c = NULL;
		struct core_run *r = NULL;
		struct store_run_create rc_in = {.id = run, .card_id = id, .marker = marker,
						 .status = "running", .lease_ms = LEASE_MS};
		struct store_run_update ru = {.marker = marker, .status = "finished",
					      .lease_ms = LEASE_MS};
		struct store_owned_write w = {.kind = STORE_OWNED_LAST_RUN, .run_id = run};
		enum core_rc rc;

		snprintf(id, sizeof id, "card-%07zu", card);
		snprintf(run, sizeof run, "run-%07zu", card);
		snprintf(marker, sizeof marker, "worker-%zu", i);
		if ((rc = store_card_claim(load_st, id, marker, LEASE_MS, &actor, &res)) != CORE_OK) {
			fail("claim", rc);
			return NULL;
		}
		w.token.marker = marker;
		w.token.epoch = res.token.epoch;
		core_card_free(res.card);
		if ((rc = store_run_create(load_st, &rc_in, &actor, &r)) != CORE_OK) {
			fail("run create", rc);
			return NULL;
		}
		core_run_free(r);
		if ((rc = store_run_update(load_st, run, &ru, &actor, &r)) != CORE_OK) {
			fail("run update", rc);
			return NULL;
		}
		core_run_free(r);
		if ((rc = store_card_owned_write(load_st, id, &w, &actor, &c)) != CORE_OK) {
			fail("last run", rc);
			return NULL;
		}
		core_card_free(c);
	}
	return NULL;
}

static double threads_run(void *(*fn)(void *))
{
	pthread_t th[LOAD_THREADS];
	double t0 = bench_mono_s();
	int k;

	load_next = 0;
	for (k = 0; k < LOAD_THREADS; k++)
		if (pthread_create(&th[k], NULL, fn, NULL) != 0) {
			fprintf(stderr, "scale: pthread_create failed\n");
			exit(1);
		}
	for (k = 0; k < LOAD_THREADS; k++)
		pthread_join(th[k], NULL);
	return bench_mono_s() - t0;
}

/* Sum of the sizes of the files in dir whose name starts with prefix, in MiB. */
static double dir_mib(const char *dir, const char *prefix)
{
	char cmd[1200], line[64];
	FILE *p;
	double kib = 0;

	snprintf(cmd, sizeof cmd, "du -sk --apparent-size '%s'/%s* 2>/dev/null | "
				  "awk '{s+=$1} END {print s+0}'",
		 dir, prefix);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	if (fgets(line, sizeof line, p))
		kib = strtod(line, NULL);
	pclose(p);
	return kib / 1024.0;
}

static int load(const char *data, size_t n, size_t claims, struct scale_fig *f)
{
	struct store_fs_options o = {.dir = data};
	char err[256] = "";
	enum core_rc rc;

	if ((rc = store_fs_open(&o, &load_st, err, sizeof err)) != CORE_OK) {
		fprintf(stderr, "scale: open %s: %s\n", data, err);
		return -1;
	}
	load_n = n;
	load_claims = claims;
	sched_at = store_now(load_st) + 24LL * 3600 * 1000;
	f->load_s = threads_run(load_cards);
	if (!load_failed && (rc = store_fs_compact(load_st)) != CORE_OK)
		fail("compact", rc);
	if (!load_failed)
		f->tail_s = threads_run(load_claims_run);
	store_close(load_st);
	load_st = NULL;
	f->snapshot_mib = dir_mib(data, "snap");
	f->journal_mib = dir_mib(data, "journal");
	return load_failed ? -1 : 0;
}

/* Runs argv, returns its first stdout line (the new token) in out. */
static int run_capture(char *const argv[], char *out, size_t len)
{
	int pfd[2], st;
	pid_t pid;
	ssize_t k;
	size_t got = 0;

	if (pipe(pfd) != 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		dup2(pfd[1], 1);
		if (devnull >= 0)
			dup2(devnull, 2);
		close(pfd[0]);
		close(pfd[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	while (got + 1 < len && (k = read(pfd[0], out + got, len - got - 1)) > 0)
		got += (size_t)k;
	out[got] = '\0';
	close(pfd[0]);
	out[strcspn(out, "\r\n")] = '\0';
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	return 0;
}

static uint16_t port_pick(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	uint16_t port = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static double status_mib(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t fl = strlen(field);
	double kib = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, field, fl) == 0 && line[fl] == ':')
			kib = strtod(line + fl + 1, NULL);
	fclose(f);
	return kib / 1024.0;
}

/* utime + stime of pid in milliseconds (fields 14 and 15 of /proc/PID/stat). */
static double cpu_ms(pid_t pid)
{
	unsigned long long ut = 0, st = 0;
	char path[64];
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%*[^)]) %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
		   &st) != 2)
		ut = st = 0;
	fclose(f);
	return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static void child_stop(pid_t pid)
{
	int st, i;

	kill(pid, SIGTERM);
	for (i = 0; i < 200; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return;
		usleep(50000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

/* Cold start, RSS and list latency against a real boardd. */
static int serve(const char *boardd, const char *dir, const char *data, size_t n_queries,
		 struct scale_fig *f)
{
	char tokens[700], store[700], listen[64], logp[700], tok[256], auth[320];
	char wtok[256], wauth[320], body[128];
	char *add[] = {(char *)boardd, "token", "add", "--tokens", tokens, "--name", "scale-bot",
		       "--role", "bot", NULL};
	char *wadd[] = {(char *)boardd, "token", "add", "--tokens", tokens, "--name",
			"scale-worker", "--role", "worker", NULL};
	struct bench_http *c = NULL;
	uint16_t port = port_pick();
	const char *resp;
	double t0, t1 = 0;
	int status = 0, code = -1;
	pid_t pid;
	size_t q, i;

	snprintf(tokens, sizeof tokens, "%s/tokens.json", dir);
	snprintf(store, sizeof store, "fs:%s", data);
	snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned)port);
	snprintf(logp, sizeof logp, "%s/boardd.log", dir);
	if (!port || run_capture(add, tok, sizeof tok) != 0 || !tok[0] ||
	    run_capture(wadd, wtok, sizeof wtok) != 0 || !wtok[0]) {
		fprintf(stderr, "scale: %s token add failed\n", boardd);
		return -1;
	}
	snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", tok);
	snprintf(wauth, sizeof wauth, "Authorization: Bearer %s\r\n", wtok);
	t0 = bench_mono_s();
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		FILE *lf = freopen(logp, "w", stderr);

		(void)lf;
		execl(boardd, boardd, "--store", store, "--tokens", tokens, "--listen", listen,
		      (char *)NULL);
		_exit(127);
	}
	/* Poll /readyz every millisecond, for at most 60 s. */
	while (bench_mono_s() - t0 < 60) {
		if (!c)
			c = bench_http_open("127.0.0.1", port);
		if (c && bench_http_request(c, "GET", "/readyz", NULL, NULL, &status, &resp) == 0 &&
		    status == 200) {
			t1 = bench_mono_s();
			break;
		}
		if (c && status == 0) {
			bench_http_close(c);
			c = NULL;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			fprintf(stderr, "scale: boardd exited; see %s\n", logp);
			pid = 0;
			goto out;
		}
		usleep(1000);
	}
	if (!t1) {
		fprintf(stderr, "scale: boardd not ready after 60 s\n");
		goto out;
	}
	f->cold_ms = (t1 - t0) * 1000.0;
	f->cold_cpu_ms = cpu_ms(pid);
	f->rss_mib = status_mib(pid, "VmRSS");
	for (q = 0; q < N_QUERIES; q++) {
		struct bench_lat lat = {0};

		for (i = 0; i < n_queries; i++) {
			double a = bench_mono_s();

			if (bench_http_request(c, "GET", queries[q].query, auth, NULL, &status,
					       &resp) != 0 ||
			    status != 200) {
				if (!f->list_errors)
					fprintf(stderr, "scale: list %s: %d %.200s\n",
						queries[q].query, status, resp);
				f->list_errors++;
				continue;
			}
			bench_lat_record(&lat, (uint64_t)((bench_mono_s() - a) * 1e6));
		}
		f->list_p50_ms[q] = (double)bench_lat_quantile(&lat, 0.50) / 1000.0;
		f->list_p99_ms[q] = (double)bench_lat_quantile(&lat, 0.99) / 1000.0;
	}
	{
		struct bench_lat lat = {0};

		for (i = 0; i < n_queries; i++) {
			double a = bench_mono_s();

			snprintf(body, sizeof body,
				 "{\"marker\":\"scale-next-%zu\",\"lease_ms\":3600000}", i);
			if (bench_http_request(c, "POST", "/v1/boards/default/claim-next", wauth,
					       body, &status, &resp) != 0 ||
			    status != 200) {
				if (!f->next_errors)
					fprintf(stderr, "scale: claim-next: %d %.200s\n", status,
						resp);
				f->next_errors++;
				continue;
			}
			bench_lat_record(&lat, (uint64_t)((bench_mono_s() - a) * 1e6));
		}
		f->next_p50_ms = (double)bench_lat_quantile(&lat, 0.50) / 1000.0;
		f->next_p99_ms = (double)bench_lat_quantile(&lat, 0.99) / 1000.0;
	}
	f->hwm_mib = status_mib(pid, "VmHWM");
	code = 0;
out:
	bench_http_close(c);
	if (pid > 0)
		child_stop(pid);
	return code;
}

/* CPU (user + system) of this process so far, all threads, in seconds: on a shared machine
 * the figure that wall time hides. */
static double self_cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int64_t reap_now;
static bool reap_verbose; /* -r: say when the passes start */

static int64_t reap_clock(void *ctx)
{
	(void)ctx;
	return reap_now;
}

static void quiet(void *ctx, const char *line)
{
	(void)ctx;
	(void)line;
}

/* Reaper passes on `data`, `batch` cards each, until a pass lists nothing or `budget_s` of
 * pass time is spent. */
static int reap(const char *data, size_t batch, double budget_s, struct scale_fig *f)
{
	struct store_fs_options o = {.dir = data};
	struct server_reaper_config cfg = {.gate = true, .interval_ms = 3600000,
					   .lease_ms = LEASE_MS, .hostname = "scale",
					   .log = quiet, .batch = batch,
					   .workers = 0 /* the server's default */};
	struct server_reaper *r = NULL;
	struct server_reaper_stats s;
	struct store *st = NULL;
	char err[256] = "";
	enum core_rc rc;
	double t0, c0;

	t0 = bench_mono_s();
	c0 = self_cpu_s();
	if ((rc = store_fs_open(&o, &st, err, sizeof err)) != CORE_OK) {
		fprintf(stderr, "scale: reopen %s: %s\n", data, err);
		return -1;
	}
	f->open_ms = (bench_mono_s() - t0) * 1000.0;
	f->open_cpu_ms = (self_cpu_s() - c0) * 1000.0;
	if (reap_verbose) { /* a profiler may attach to the passes alone from here */
		printf("   store reopen %.0f ms (CPU %.0f ms); passes start, pid %d\n", f->open_ms,
		       f->open_cpu_ms, (int)getpid());
		fflush(stdout);
	}
	reap_now = store_now(st) + 2 * LEASE_MS;
	store_clock_set(st, reap_clock, NULL);
	if ((rc = server_reaper_new(st, &cfg, &r)) != CORE_OK) {
		store_close(st);
		fail("reaper", rc);
		return -1;
	}
	while (f->reap_s < budget_s) {
		t0 = bench_mono_s();
		c0 = self_cpu_s();
		if ((rc = server_reaper_pass(r, &s)) != CORE_OK) {
			fail("reaper pass", rc);
			break;
		}
		f->reap_s += bench_mono_s() - t0;
		f->reap_cpu_s += self_cpu_s() - c0;
		f->reap_passes++;
		f->reap_done += s.actions[CORE_STUCK_COMPLETE];
		f->reap_errors += s.errors;
		if (!s.listed)
			break;
	}
	f->reap_projected_s = f->reap_done >= f->claims || !f->reap_done
				      ? f->reap_s
				      : f->reap_s * (double)f->claims / (double)f->reap_done;
	server_reaper_free(r);
	store_close(st);
	return 0;
}

/* "/proc/loadavg" as it reads (static buffer). */
static const char *loadavg(void)
{
	static char buf[128];
	FILE *f = fopen("/proc/loadavg", "r");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = '\0';
		fclose(f);
	}
	return buf[0] ? buf : "?\n";
}

static void reap_print(const struct scale_fig *f, size_t batch)
{
	printf("   reaper: %zu of %zu claims filed in %.3f s of pass time, %.3f s of CPU, %.1f us "
	       "of CPU per claim (%zu passes of %zu, errors %zu)%s\n",
	       f->reap_done, f->claims, f->reap_s, f->reap_cpu_s,
	       f->reap_done ? f->reap_cpu_s * 1e6 / (double)f->reap_done : 0.0, f->reap_passes,
	       batch, f->reap_errors,
	       f->reap_done < f->claims ? " -- budget spent, figure projected" : "");
}

/* -r: step 5 alone on a copy of `loaded` (a data.loaded that -k left). */
static int reap_only(const char *loaded, const char *parent, size_t batch, double budget_s)
{
	char dir[512], data[600], cmd[1400];
	struct scale_fig f = {0};
	int code;

	snprintf(dir, sizeof dir, "%s/boardd-scale-reap-XXXXXX", parent);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(data, sizeof data, "%s/data", dir);
	snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", loaded, data);
	if (system(cmd) != 0) {
		fprintf(stderr, "scale: could not copy %s\n", loaded);
		return 1;
	}
	printf("-- reaper only, on a copy of %s, load %s", loaded, loadavg());
	f.claims = (size_t)-1; /* unknown: until a pass lists nothing */
	reap_verbose = true;
	code = reap(data, batch, budget_s, &f);
	f.claims = f.reap_done;
	if (code == 0)
		reap_print(&f, batch);
	printf("   load at end: %s", loadavg());
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "scale: could not remove %s\n", dir);
	return code == 0 && !f.reap_errors ? 0 : 1;
}

static int one_size(const char *boardd, const char *parent, size_t n, size_t claims,
		    size_t n_queries, size_t batch, double budget_s, bool keep, struct scale_fig *f)
{
	char dir[512], data[600], cmd[1400];
	int code = -1;

	memset(f, 0, sizeof *f);
	f->cards = n;
	f->claims = claims;
	snprintf(dir, sizeof dir, "%s/boardd-scale-XXXXXX", parent);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return -1;
	}
	snprintf(data, sizeof data, "%s/data", dir);
	printf("-- %zu cards (%zu claimed with finished runs) in %s, load %s", n, claims, dir,
	       loadavg());
	fflush(stdout);
	if (load(data, n, claims, f) != 0)
		goto out;
	if (keep) {
		snprintf(cmd, sizeof cmd, "cp -a '%s' '%s.loaded'", data, data);
		if (system(cmd) != 0)
			fprintf(stderr, "scale: could not copy %s\n", data);
	}
	printf("   loaded in %.1f s + %.1f s of claims/runs; snapshot %.1f MiB, journal %.1f MiB\n",
	       f->load_s, f->tail_s, f->snapshot_mib, f->journal_mib);
	if (serve(boardd, dir, data, n_queries, f) != 0)
		goto out;
	printf("   cold start %.0f ms (boardd CPU %.0f ms), RSS %.1f MiB (peak %.1f MiB)\n",
	       f->cold_ms, f->cold_cpu_ms, f->rss_mib, f->hwm_mib);
	fflush(stdout);
	if (reap(data, batch, budget_s, f) != 0)
		goto out;
	reap_print(f, batch);
	fflush(stdout);
	code = 0;
out:
	if (!keep) {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "scale: could not remove %s\n", dir);
	}
	return code;
}

static void row(const char *name, const struct scale_fig *f, size_t n, size_t off, int prec)
{
	double first = *(const double *)(const void *)((const char *)&f[0] + off);
	double last = *(const double *)(const void *)((const char *)&f[n - 1] + off);
	size_t i;

	printf("%-34s", name);
	for (i = 0; i < n; i++)
		printf(" %10.*f", prec, *(const double *)(const void *)((const char *)&f[i] + off));
	if (first > 0)
		printf("  %7.2fx\n", last / first);
	else
		printf("  %8s\n", "-");
}

#define ROW(name, field, prec) row(name, figs, n_sizes, offsetof(struct scale_fig, field), prec)

int main(int argc, char **argv)
{
	const char *boardd = NULL, *parent = "/tmp", *sizes_arg = "10000,30000,100000";
	const char *reap_from = NULL;
	size_t sizes[MAX_SIZES], n_sizes = 0, n_queries = 500, batch = 100, i, q;
	double budget_s = 120, claim_share = 0.1;
	struct scale_fig figs[MAX_SIZES];
	bool keep = false;
	char *s, *tok, *save = NULL, name[64];
	int c;

	while ((c = getopt(argc, argv, "b:s:c:q:S:B:t:D:kr:")) != -1) {
		switch (c) {
		case 'r':
			reap_from = optarg;
			break;
		case 'b':
			boardd = optarg;
			break;
		case 's':
			sizes_arg = optarg;
			break;
		case 'c':
			claim_share = strtod(optarg, NULL);
			break;
		case 'q':
			n_queries = strtoul(optarg, NULL, 10);
			break;
		case 'S':
			sched_share = strtod(optarg, NULL);
			break;
		case 'B':
			batch = strtoul(optarg, NULL, 10);
			break;
		case 't':
			budget_s = strtod(optarg, NULL);
			break;
		case 'D':
			parent = optarg;
			break;
		case 'k':
			keep = true;
			break;
		default:
			goto usage;
		}
	}
	if (reap_from && optind == argc && batch && budget_s > 0 && budget_s <= 3600)
		return reap_only(reap_from, parent, batch, budget_s);
	if (!boardd || optind != argc || !n_queries || n_queries > 100000 || !batch ||
	    !(claim_share >= 0 && claim_share <= 0.2) || !(sched_share >= 0 && sched_share <= 0.2) ||
	    !(budget_s > 0 && budget_s <= 3600))
		goto usage;
	s = strdup(sizes_arg);
	for (tok = strtok_r(s, ",", &save); tok && n_sizes < MAX_SIZES;
	     tok = strtok_r(NULL, ",", &save)) {
		sizes[n_sizes] = strtoul(tok, NULL, 10);
		if (sizes[n_sizes] < 1 || sizes[n_sizes] > 10000000)
			goto usage;
		n_sizes++;
	}
	free(s);
	if (!n_sizes)
		goto usage;
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < n_sizes; i++) {
		size_t claims = (size_t)((double)sizes[i] * claim_share + 0.5);

		if (one_size(boardd, parent, sizes[i], claims, n_queries, batch, budget_s, keep,
			     &figs[i]) != 0) {
			fprintf(stderr, "scale: size %zu failed\n", sizes[i]);
			return 1;
		}
	}
	printf("\n== scale: FS store, figures by number of cards ==\n%-34s", "cards");
	for (i = 0; i < n_sizes; i++)
		printf(" %10zu", sizes[i]);
	printf("  %8s\n", "growth");
	ROW("load: create cards (s)", load_s, 2);
	ROW("load: claims + finished runs (s)", tail_s, 2);
	ROW("snapshot (MiB)", snapshot_mib, 1);
	ROW("journal tail (MiB)", journal_mib, 1);
	ROW("cold start exec->readyz (ms)", cold_ms, 1);
	ROW("cold start: boardd CPU (ms)", cold_cpu_ms, 1);
	ROW("store reopen in-process (ms)", open_ms, 1);
	ROW("store reopen: CPU (ms)", open_cpu_ms, 1);
	ROW("RSS after start (MiB)", rss_mib, 1);
	ROW("peak RSS after lists (MiB)", hwm_mib, 1);
	for (q = 0; q < N_QUERIES; q++) {
		snprintf(name, sizeof name, "list %s p50 (ms)", queries[q].name);
		row(name, figs, n_sizes,
		    offsetof(struct scale_fig, list_p50_ms) + q * sizeof(double), 3);
		snprintf(name, sizeof name, "list %s p99 (ms)", queries[q].name);
		row(name, figs, n_sizes,
		    offsetof(struct scale_fig, list_p99_ms) + q * sizeof(double), 3);
	}
	ROW("claim-next p50 (ms)", next_p50_ms, 3);
	ROW("claim-next p99 (ms)", next_p99_ms, 3);
	snprintf(name, sizeof name, "reaper, all claims (s of passes)");
	ROW(name, reap_projected_s, 3);
	for (i = 0; i < n_sizes; i++)
		figs[i].reap_per_1k = figs[i].claims ? figs[i].reap_projected_s * 1000.0 /
							       (double)figs[i].claims
						     : 0;
	ROW("reaper per 1000 claims (s)", reap_per_1k, 3);
	ROW("reaper: CPU during the passes (s)", reap_cpu_s, 3);
	for (i = 0; i < n_sizes; i++)
		figs[i].reap_cpu_us = figs[i].reap_done ? figs[i].reap_cpu_s * 1e6 /
								  (double)figs[i].reap_done
							: 0;
	ROW("reaper: CPU per claim (us)", reap_cpu_us, 1);
	printf("reaper: passes of %zu; claims filed / claimed per size:", batch);
	for (i = 0; i < n_sizes; i++)
		printf(" %zu/%zu in %.1f s%s (errors %zu);", figs[i].reap_done, figs[i].claims,
		       figs[i].reap_s, figs[i].reap_done < figs[i].claims ? " (projected)" : "",
		       figs[i].reap_errors);
	printf("\nlist queries:");
	for (q = 0; q < N_QUERIES; q++)
		printf(" %s = %s;", queries[q].name, queries[q].query);
	for (i = 0, q = 0; i < n_sizes; i++)
		q += figs[i].list_errors;
	printf(" %zu requests each, non-200 answers %zu\n", n_queries, q);
	for (i = 0, q = 0; i < n_sizes; i++)
		q += figs[i].next_errors;
	printf("claim-next: POST /v1/boards/default/claim-next, %zu fresh claims per size over one "
	       "connection, non-200 answers %zu\n", n_queries, q);
	printf("growth = figure at %zu cards / figure at %zu cards (cards x%.0f)\n",
	       sizes[n_sizes - 1], sizes[0], (double)sizes[n_sizes - 1] / (double)sizes[0]);
	return 0;
usage:
	fprintf(stderr, "usage: scale -b PATH/TO/boardd [-s 10000,30000,100000] [-c claimed share 0.1]"
			" [-q list requests 500]\n             [-S scheduled share 0]"
			" [-B reaper batch 100] [-t reaper "
			"budget s 120] [-D parent dir /tmp] [-k keep dirs]\n"
			"       scale -r DIR/data.loaded [-B 100] [-t 120] [-D parent dir /tmp]\n");
	return 2;
}
