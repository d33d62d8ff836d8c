/* The cycle runner: options, worker threads, the warm-up and the measured window, and the
 * report. Every non-2xx answer is counted and printed with its status; nothing is hidden. */
#include "bench/bench.h"

#include <ctype.h>
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Shared between the main thread and the workers. */
static int run_recording; /* 1 inside the measured window */
static int run_stop;      /* workers finish their cycle and leave */
static uint64_t run_tickets; /* cycles left in the window when -n was given */
static bool run_counted;
static unsigned run_loops; /* event-loop threads carrying the workers; 0: a thread each */

double bench_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t bench_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

bool bench_json_int(const char *json, const char *key, int64_t *out)
{
	char pat[64];
	const char *p;
	char *end;
	long long v;

	snprintf(pat, sizeof pat, "\"%s\":", key);
	p = strstr(json, pat);
	if (!p)
		return false;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	if (*p == '"')
		p++;
	v = strtoll(p, &end, 10);
	if (end == p)
		return false;
	*out = v;
	return true;
}

void bench_base64(const void *src, size_t len, char *dst)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = src;
	size_t i;

	for (i = 0; i + 2 < len; i += 3) {
		*dst++ = tab[s[i] >> 2];
		*dst++ = tab[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
		*dst++ = tab[((s[i + 1] & 15) << 2) | (s[i + 2] >> 6)];
		*dst++ = tab[s[i + 2] & 63];
	}
	if (i < len) {
		*dst++ = tab[s[i] >> 2];
		if (i + 1 < len) {
			*dst++ = tab[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
			*dst++ = tab[(s[i + 1] & 15) << 2];
		} else {
			*dst++ = tab[(s[i] & 3) << 4];
			*dst++ = '=';
		}
		*dst++ = '=';
	}
	*dst = '\0';
}

static void stat_error(struct bench_stat *s, int status, const char *resp)
{
	size_t i;

	s->err++;
	if (!s->first_err[0])
		snprintf(s->first_err, sizeof s->first_err, "%d %.140s", status, resp ? resp : "");
	for (i = 0; i < BENCH_STATUS_SLOTS; i++) {
		if (s->codes[i].n && s->codes[i].status != status)
			continue;
		s->codes[i].status = status;
		s->codes[i].n++;
		return;
	}
	/* More distinct statuses than slots: the total in err still counts them. */
}

/* One operation done: ok ones inside the window go to the histogram, the others are errors. */
static void op_done(struct bench_worker *w, size_t op, uint64_t t0, bool ok, int code,
		    const char *detail)
{
	struct bench_stat *s = &w->op[op];
	uint64_t t1 = bench_now_us();

	if (!ok) {
		stat_error(s, code, detail);
		return;
	}
	if (__atomic_load_n(&run_recording, __ATOMIC_RELAXED)) {
		s->ok++;
		bench_lat_record(&s->lat, t1 - t0);
	}
}

int bench_op_request(struct bench_worker *w, size_t op, const char *method, const char *path,
		     const char *headers, const char *body, const char **resp)
{
	int status = 0;
	uint64_t t0 = bench_now_us();

	bench_http_request(w->http, method, path, headers, body, &status, resp);
	op_done(w, op, t0, status >= 200 && status <= 299, status, *resp);
	return status;
}

void bench_op_record(struct bench_worker *w, size_t op, uint64_t t0_us, bool ok, int code,
		     const char *detail)
{
	op_done(w, op, t0_us, ok, code, detail);
}

void bench_op_unexpected(struct bench_worker *w, size_t op, const char *resp)
{
	struct bench_stat *s = &w->op[op];

	/* bench_op_request counted it as ok (if recording); move it to the errors. Its
	 * latency stays in the histogram: the server did answer in that time. */
	if (__atomic_load_n(&run_recording, __ATOMIC_RELAXED) && s->ok)
		s->ok--;
	stat_error(s, -1, resp);
}

int bench_op_untimed(struct bench_worker *w, const char *method, const char *path,
		     const char *headers, const char *body, const char **resp)
{
	int status = 0;

	bench_http_request(w->http, method, path, headers, body, &status, resp);
	return status;
}

static void usage_print(const char *usage)
{
	fprintf(stderr,
		"%s"
		"common options:\n"
		"  -H HOST     server address (127.0.0.1; numeric, loopback expected)\n"
		"  -p PORT     server port\n"
		"  -U PATH     connect to the unix-domain socket PATH instead of -H/-p (plain\n"
		"              HTTP, \"Host: localhost\"; not with -C: no TLS over a unix socket)\n"
		"  -w N        concurrent workers, one card and one connection each (32)\n"
		"  -d SECONDS  measured window (20; at most 3600)\n"
		"  -W SECONDS  warm-up before the window (2)\n"
		"  -n CYCLES   stop after this many cycles in the window (still bounded by -d)\n"
		"  -l MS       lease in milliseconds (30000)\n"
		"  -r N        renewals per cycle (3)\n"
		"  -P PREFIX   card / key prefix (bench)\n"
		"  -C CAFILE   speak HTTPS (TLS 1.2+), verifying the server with this CA file\n"
		"  -e N        run the workers on N event-loop threads (0: a blocking thread per\n"
		"              worker; default: the driver's)\n",
		usage);
}

int bench_opts_parse(struct bench_opts *o, int argc, char **argv, const char *extra,
		     int (*extra_fn)(int opt, const char *arg, void *ctx), void *ctx,
		     const char *usage)
{
	char optstring[64];
	int c;

	memset(o, 0, sizeof *o);
	o->host = "127.0.0.1";
	o->workers = 32;
	o->duration_s = 20;
	o->warmup_s = 2;
	o->lease_ms = 30000;
	o->renews = 3;
	o->prefix = "bench";
	o->loops = -1;
	snprintf(optstring, sizeof optstring, "H:p:U:w:d:W:n:l:r:P:C:e:%s", extra ? extra : "");
	while ((c = getopt(argc, argv, optstring)) != -1) {
		switch (c) {
		case 'H':
			o->host = optarg;
			break;
		case 'p':
			o->port = (uint16_t)strtoul(optarg, NULL, 10);
			break;
		case 'U':
			o->unix_path = optarg;
			break;
		case 'w':
			o->workers = strtoul(optarg, NULL, 10);
			break;
		case 'd':
			o->duration_s = strtod(optarg, NULL);
			break;
		case 'W':
			o->warmup_s = strtod(optarg, NULL);
			break;
		case 'n':
			o->cycles = strtoull(optarg, NULL, 10);
			break;
		case 'l':
			o->lease_ms = strtoll(optarg, NULL, 10);
			break;
		case 'r':
			o->renews = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'P':
			o->prefix = optarg;
			break;
		case 'C':
			o->cacert = optarg;
			break;
		case 'e':
			o->loops = (int)strtol(optarg, NULL, 10);
			break;
		default:
			if (c != '?' && extra_fn && extra_fn(c, optarg, ctx) == 0)
				break;
			usage_print(usage);
			return -1;
		}
	}
	if (o->unix_path && o->cacert) {
		fprintf(stderr, "-U and -C together: TLS over a unix socket is not supported "
				"(give -U for plain HTTP on a socket, or -H/-p with -C for HTTPS)\n");
		return -1;
	}
	if (optind != argc || (!o->port && !o->unix_path) || !o->workers || o->workers > 4096 ||
	    !(o->duration_s > 0 && o->duration_s <= 3600) ||
	    !(o->warmup_s >= 0 && o->warmup_s <= 600) || o->lease_ms <= 0 || o->renews > 100 ||
	    o->loops < -1 || o->loops > 64) {
		usage_print(usage);
		return -1;
	}
	if (o->cacert && bench_http_tls(o->cacert) != 0)
		return -1;
	return 0;
}

struct run_arg {
	const struct bench_driver *d;
	struct bench_worker *w;
	int setup_rc;
	pthread_barrier_t *ready; /* one blocking thread per worker */
	int done;
};

struct bench_http *bench_opts_http_open(const struct bench_opts *o)
{
	return o->unix_path ? bench_http_open_unix(o->unix_path) : bench_http_open(o->host, o->port);
}

const char *bench_opts_transport(const struct bench_opts *o)
{
	return o->unix_path || (o->host && o->host[0] == '/') ? "unix" : "tcp";
}

/* Where the server is, for the report and the messages. */
static void opts_where(const struct bench_opts *o, char *buf, size_t len)
{
	if (o->unix_path)
		snprintf(buf, len, "unix socket %s", o->unix_path);
	else if (o->host[0] == '/')
		snprintf(buf, len, "unix socket in %s (port %u)", o->host, (unsigned)o->port);
	else
		snprintf(buf, len, "TCP %s:%u", o->host, (unsigned)o->port);
}

static int run_go;          /* event-loop workers: main checked every setup */
static size_t run_setups;   /* event-loop workers whose setup finished */

static void run_setup(struct run_arg *a)
{
	struct bench_worker *w = a->w;

	if (!a->d->own_connection)
		w->http = bench_opts_http_open(w->opts);
	a->setup_rc = w->http || a->d->own_connection ? a->d->setup(w) : -1;
}

static void run_cycles(struct run_arg *a)
{
	struct bench_worker *w = a->w;

	while (a->setup_rc == 0 && !__atomic_load_n(&run_stop, __ATOMIC_ACQUIRE)) {
		bool rec = __atomic_load_n(&run_recording, __ATOMIC_ACQUIRE);
		uint64_t t0, t1;
		int rc;

		if (rec && run_counted) {
			uint64_t left = __atomic_load_n(&run_tickets, __ATOMIC_ACQUIRE);

			do {
				if (!left)
					goto out;
			} while (!__atomic_compare_exchange_n(&run_tickets, &left, left - 1, false,
							      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
		}
		t0 = bench_now_us();
		rc = a->d->cycle(w);
		t1 = bench_now_us();
		if (rc != 0) {
			w->cycles_failed++;
			continue;
		}
		/* A cycle counts when it started and ended inside the window. */
		if (rec && __atomic_load_n(&run_recording, __ATOMIC_ACQUIRE)) {
			w->cycles_ok++;
			bench_lat_record(&w->cycle_lat, t1 - t0);
		}
	}
out:
	if (a->d->teardown && a->setup_rc == 0)
		a->d->teardown(w);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
}

static void *run_worker(void *p)
{
	struct run_arg *a = p;

	run_setup(a);
	pthread_barrier_wait(a->ready);
	pthread_barrier_wait(a->ready); /* main checked every setup */
	run_cycles(a);
	return NULL;
}

/* The same on an event loop (green.c): the barrier is a counter and a flag. */
static void run_green_worker(void *p)
{
	struct run_arg *a = p;

	run_setup(a);
	__atomic_add_fetch(&run_setups, 1, __ATOMIC_ACQ_REL);
	while (!__atomic_load_n(&run_go, __ATOMIC_ACQUIRE))
		bench_green_sleep_ms(1);
	run_cycles(a);
}

/* One counter of a /metrics answer: the line "NAME VALUE". */
bool bench_metric_value(const char *resp, const char *name, unsigned long long *v)
{
	char key[96];
	const char *p;

	snprintf(key, sizeof key, "\n%s ", name);
	return (p = strstr(resp, key)) && sscanf(p + strlen(key), "%llu", v) == 1;
}

/* The FS store's group-commit counters from GET /metrics (no token needed). */
bool bench_fs_counters(const char *host, uint16_t port, unsigned long long *lines,
		       unsigned long long *syncs)
{
	struct bench_http *h = bench_http_open(host, port);
	const char *resp = NULL;
	bool ok = false;
	int status = 0;

	if (h && bench_http_request(h, "GET", "/metrics", NULL, NULL, &status, &resp) == 0 &&
	    status == 200 && resp)
		ok = bench_metric_value(resp, "boardd_fs_journal_lines_total", lines) &&
		     bench_metric_value(resp, "boardd_fs_journal_syncs_total", syncs);
	bench_http_close(h);
	return ok;
}

/* CPU seen over the window, to tell what else ran on the machine meanwhile. */
struct run_cpu {
	double busy_s;          /* /proc/stat, all CPUs: user + nice + system (processes) */
	double irq_s;           /* irq + softirq: loopback TCP, disk completions */
	double steal_s;         /* steal: time the hypervisor gave this VM's CPUs to others */
	double self_s;          /* this driver (getrusage) */
	double server_s;        /* BENCH_SERVER_PID's CPU and its children's (proc_tree_ticks),
				 * or -1 */
	double backend_s;       /* BENCH_BACKEND_PID's (the server's database), the same way */
};

/* From /proc/PID/stat: utime + stime + cutime + cstime in clock ticks (the last two: the
 * children it has reaped), and the parent's pid. -1 when the process is gone. */
static int proc_ticks(const char *pid, unsigned long long *ticks, long *ppid)
{
	unsigned long long ut, st;
	long long cut, cst;
	char path[300]; /* d_name is up to 255 bytes */
	FILE *f;
	int n;

	snprintf(path, sizeof path, "/proc/%s/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	/* Fields 4 and 14-17; the command name (field 2) may hold spaces: skip past ')'. */
	n = fscanf(f, "%*[^)]) %*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
		   ppid, &ut, &st, &cut, &cst);
	fclose(f);
	if (n != 5)
		return -1;
	*ticks = ut + st + (unsigned long long)(cut > 0 ? cut : 0) +
		 (unsigned long long)(cst > 0 ? cst : 0);
	return 0;
}

/* The CPU of a server in clock ticks: the process, its reaped children and its live ones
 * (with what they reaped). A child that exits inside the window moves its time into the
 * parent's cutime/cstime, so the difference of two samples counts every child that ran in
 * between exactly once. -1 when the server is gone. */
static double proc_tree_ticks(const char *pid)
{
	unsigned long long total, t;
	long root = strtol(pid, NULL, 10), ppid;
	struct dirent *e;
	DIR *d;

	if (proc_ticks(pid, &total, &ppid) != 0)
		return -1;
	d = opendir("/proc");
	if (!d)
		return (double)total;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (proc_ticks(e->d_name, &t, &ppid) == 0 && ppid == root)
			total += t;
	}
	closedir(d);
	return (double)total;
}

double bench_server_cpu_s(void)
{
	const char *pid = getenv("BENCH_SERVER_PID");
	double ticks;

	if (!pid || (ticks = proc_tree_ticks(pid)) < 0)
		return -1;
	return ticks / (double)sysconf(_SC_CLK_TCK);
}

static void cpu_sample(struct run_cpu *c)
{
	double tick = (double)sysconf(_SC_CLK_TCK);
	unsigned long long v[10] = {0};
	const char *backend = getenv("BENCH_BACKEND_PID");
	struct rusage ru;
	double ticks;
	FILE *f;

	memset(c, 0, sizeof *c);
	c->server_s = c->backend_s = -1;
	f = fopen("/proc/stat", "r");
	if (f) {
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
			   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) >= 8) {
			c->busy_s = (double)(v[0] + v[1] + v[2]) / tick;
			c->irq_s = (double)(v[5] + v[6]) / tick;
			c->steal_s = (double)v[7] / tick;
		}
		fclose(f);
	}
	getrusage(RUSAGE_SELF, &ru);
	c->self_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	c->server_s = bench_server_cpu_s();
	if (backend && (ticks = proc_tree_ticks(backend)) >= 0)
		c->backend_s = ticks / tick;
}

/* Prints the CPU line. OUT: *others, the share of everything else, and *server_us, the
 * server's CPU per answered request in microseconds; both -1 when the server is unknown.
 * *irq_us: the machine's interrupt and softirq time per request (loopback TCP's receive
 * path runs there, as do the disk's completions, everyone's). */
static void cpu_print(const struct run_cpu *a, const struct run_cpu *b, double window,
		      uint64_t ops, double *others, double *server_us, double *backend_us,
		      double *steal_pct, double *client_us, double *irq_us)
{
	double busy = b->busy_s - a->busy_s, self = b->self_s - a->self_s;
	double irq = b->irq_s - a->irq_s, steal = b->steal_s - a->steal_s;
	double server = a->server_s >= 0 && b->server_s >= 0 ? b->server_s - a->server_s : -1;
	double backend = a->backend_s >= 0 && b->backend_s >= 0 ? b->backend_s - a->backend_s : -1;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	*others = *server_us = *backend_us = -1;
	*steal_pct = 100 * steal / window;
	*client_us = ops ? self * 1e6 / (double)ops : -1;
	*irq_us = ops ? irq * 1e6 / (double)ops : -1;
	printf("cpu over the window (%% of one core): machine %.0f%% of %ld cores (interrupts "
	       "%.0f%%, stolen by the hypervisor %.0f%%), this driver %.0f%% (%.0f us per request)",
	       100 * (busy + irq + steal) / window, cores, 100 * irq / window,
	       100 * steal / window, 100 * self / window, *client_us);
	if (server >= 0) {
		*server_us = ops ? server * 1e6 / (double)ops : -1;
		printf(", server %.0f%% (%.0f us per request)", 100 * server / window, *server_us);
		if (backend >= 0) {
			*backend_us = ops ? backend * 1e6 / (double)ops : -1;
			busy -= backend;
			printf(", its database %.0f%% (%.0f us per request)", 100 * backend / window,
			       *backend_us);
		}
		/* Softirq time charged to a process is also in /proc/stat's softirq field: the
		 * difference is good to about 10 % of a core; below zero means "nothing". */
		*others = 100 * (busy - self - server) / window;
		if (*others < 0)
			*others = 0;
		printf(", other processes %.0f%%", *others);
	}
	printf("\n");
}

static void sleep_s(double s)
{
	struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};

	while (nanosleep(&ts, &ts) != 0)
		;
}

static void stat_merge(struct bench_stat *dst, const struct bench_stat *src)
{
	size_t i, j;

	bench_lat_merge(&dst->lat, &src->lat);
	dst->ok += src->ok;
	dst->err += src->err;
	if (!dst->first_err[0])
		memcpy(dst->first_err, src->first_err, sizeof dst->first_err);
	for (i = 0; i < BENCH_STATUS_SLOTS && src->codes[i].n; i++)
		for (j = 0; j < BENCH_STATUS_SLOTS; j++) {
			if (dst->codes[j].n && dst->codes[j].status != src->codes[i].status)
				continue;
			dst->codes[j].status = src->codes[i].status;
			dst->codes[j].n += src->codes[i].n;
			break;
		}
}

static void ms_print(uint64_t us)
{
	printf(" %9.3f", (double)us / 1000.0);
}

static void report_print(const struct bench_driver *d, const struct bench_opts *o,
			 struct bench_worker *ws, double window, const struct run_cpu *c0,
			 const struct run_cpu *c1, const char *note)
{
	struct bench_stat tot[BENCH_OPS_MAX];
	struct bench_lat all = {0}, cyc = {0};
	uint64_t cycles = 0, failed = 0, ops = 0, errs = 0;
	double others, server_us, backend_us, steal, client_us, irq_us;
	char where[160];
	size_t i, k, j;

	memset(tot, 0, sizeof tot);
	for (i = 0; i < o->workers; i++) {
		cycles += ws[i].cycles_ok;
		failed += ws[i].cycles_failed;
		bench_lat_merge(&cyc, &ws[i].cycle_lat);
		for (k = 0; k < d->n_ops; k++)
			stat_merge(&tot[k], &ws[i].op[k]);
	}
	printf("\n== %s: %zu workers, window %.2f s (after %.1f s warm-up) ==\n", d->target,
	       o->workers, window, o->warmup_s);
	printf("cycle: %s (N = %u)\n", d->cycle_desc, o->renews);
	opts_where(o, where, sizeof where);
	printf("transport: %s (%s)\n", bench_opts_transport(o), where);
	if (run_loops)
		printf("client: the %zu workers on %u event-loop thread(s)\n", o->workers,
		       run_loops);
	else
		printf("client: one blocking thread per worker\n");
	printf("%-14s %9s %10s %6s %9s %9s %9s %9s\n", "op", "count", "ops/s", "errors", "p50 ms",
	       "p99 ms", "max ms", "mean ms");
	for (k = 0; k < d->n_ops; k++) {
		const struct bench_stat *s = &tot[k];

		if (!s->ok && !s->err)
			continue;
		ops += s->ok;
		errs += s->err;
		bench_lat_merge(&all, &s->lat);
		printf("%-14s %9" PRIu64 " %10.1f %6" PRIu64, d->ops[k], s->ok,
		       (double)s->ok / window, s->err);
		ms_print(bench_lat_quantile(&s->lat, 0.50));
		ms_print(bench_lat_quantile(&s->lat, 0.99));
		ms_print(s->lat.max_us);
		ms_print(s->lat.n ? s->lat.sum_us / s->lat.n : 0);
		printf("\n");
	}
	printf("%-14s %9" PRIu64 " %10.1f %6" PRIu64, "all ops", ops, (double)ops / window, errs);
	ms_print(bench_lat_quantile(&all, 0.50));
	ms_print(bench_lat_quantile(&all, 0.99));
	ms_print(all.max_us);
	ms_print(all.n ? all.sum_us / all.n : 0);
	printf("\n%-14s %9" PRIu64 " %10.1f %6" PRIu64, "cycle", cycles, (double)cycles / window,
	       failed);
	ms_print(bench_lat_quantile(&cyc, 0.50));
	ms_print(bench_lat_quantile(&cyc, 0.99));
	ms_print(cyc.max_us);
	ms_print(cyc.n ? cyc.sum_us / cyc.n : 0);
	printf("\n");
	if (errs || failed) {
		printf("errors (warm-up included; status %s):\n",
		       d->err_legend ? d->err_legend
				     : "0 = transport error, -1 = 2xx whose body said no");
		for (k = 0; k < d->n_ops; k++) {
			if (!tot[k].err)
				continue;
			printf("  %-12s", d->ops[k]);
			for (j = 0; j < BENCH_STATUS_SLOTS && tot[k].codes[j].n; j++)
				printf(" %d x%" PRIu64, tot[k].codes[j].status, tot[k].codes[j].n);
			printf("   first: %s\n", tot[k].first_err);
		}
	} else {
		printf("errors: none\n");
	}
	cpu_print(c0, c1, window, ops + errs, &others, &server_us, &backend_us, &steal,
		  &client_us, &irq_us);
	if (note && note[0])
		printf("%s\n", note);
	printf("RESULT target=%s workers=%zu window_s=%.3f cycles=%" PRIu64 " cycles_per_s=%.1f "
	       "ops_per_s=%.1f p50_op_ms=%.3f p99_op_ms=%.3f p99_cycle_ms=%.3f errors=%" PRIu64
	       " failed_cycles=%" PRIu64 " others_cpu_pct=%.0f server_cpu_us_per_op=%.0f"
	       " steal_pct=%.0f backend_cpu_us_per_op=%.0f client_cpu_us_per_op=%.0f"
	       " client_loops=%u irq_us_per_op=%.0f transport=%s\n",
	       d->target, o->workers, window, cycles, (double)cycles / window,
	       (double)ops / window, (double)bench_lat_quantile(&all, 0.50) / 1000.0,
	       (double)bench_lat_quantile(&all, 0.99) / 1000.0,
	       (double)bench_lat_quantile(&cyc, 0.99) / 1000.0, errs, failed, others, server_us,
	       steal, backend_us, client_us, run_loops, irq_us, bench_opts_transport(o));
	fflush(stdout);
}

/* Every worker's setup has finished: blocking threads meet at the barrier, event-loop
 * workers count themselves. */
static void run_setups_wait(struct bench_green *g, pthread_barrier_t *ready, size_t n)
{
	if (!g) {
		pthread_barrier_wait(ready);
		return;
	}
	while (__atomic_load_n(&run_setups, __ATOMIC_ACQUIRE) < n)
		sleep_s(0.001);
}

static void run_setups_release(struct bench_green *g, pthread_barrier_t *ready)
{
	if (!g)
		pthread_barrier_wait(ready);
	else
		__atomic_store_n(&run_go, 1, __ATOMIC_RELEASE);
}

int bench_run(const struct bench_driver *d, const struct bench_opts *o)
{
	struct bench_worker *ws = calloc(o->workers, sizeof *ws);
	struct run_arg *args = calloc(o->workers, sizeof *args);
	void **argp = calloc(o->workers, sizeof *argp);
	pthread_t *th = calloc(o->workers, sizeof *th);
	pthread_barrier_t ready;
	struct bench_green *green = NULL;
	struct run_cpu c0 = {0}, c1 = {0};
	void *wctx = d->window && d->window_ctx_size ? calloc(1, d->window_ctx_size) : NULL;
	char note[256] = "";
	size_t i, started = 0, failed = 0;
	double t0 = 0, t1 = 0, limit;
	unsigned loops = o->loops >= 0 ? (unsigned)o->loops : d->loops_default;
	int code = 1;

	if (!ws || !args || !th || !argp)
		goto out;
	/* Blocking libpq and TLS: a thread per worker. */
	if ((d->own_connection && !d->own_connection_parks) || o->cacert)
		loops = 0;
	run_counted = o->cycles != 0;
	run_tickets = o->cycles;
	run_loops = loops;
	if (!loops)
		pthread_barrier_init(&ready, NULL, (unsigned)o->workers + 1);
	for (i = 0; i < o->workers; i++) {
		ws[i].idx = i;
		ws[i].opts = o;
		args[i] = (struct run_arg){.d = d, .w = &ws[i], .ready = loops ? NULL : &ready};
		argp[i] = &args[i];
	}
	if (loops) {
		green = bench_green_start(o->workers, loops, run_green_worker, argp);
		if (!green) {
			fprintf(stderr, "%s: cannot start %u event-loop threads\n", d->target, loops);
			goto out;
		}
		started = o->workers;
	}
	for (i = 0; !loops && i < o->workers; i++) {
		if (pthread_create(&th[i], NULL, run_worker, &args[i]) != 0) {
			fprintf(stderr, "%s: cannot start worker %zu\n", d->target, i);
			exit(1); /* the barrier counts on every worker */
		}
		started++;
	}
	run_setups_wait(green, &ready, o->workers);
	for (i = 0; i < o->workers; i++)
		if (args[i].setup_rc != 0)
			failed++;
	if (failed) {
		char where[160];

		opts_where(o, where, sizeof where);
		fprintf(stderr, "%s: setup failed on %zu of %zu workers (is the server up on %s? "
				"tokens?)\n",
			d->target, failed, o->workers, where);
		__atomic_store_n(&run_stop, 1, __ATOMIC_RELEASE);
	}
	run_setups_release(green, &ready);
	if (!failed) {
		sleep_s(o->warmup_s);
		if (d->window)
			d->window(o, false, wctx, NULL, 0);
		cpu_sample(&c0);
		t0 = bench_mono_s();
		__atomic_store_n(&run_recording, 1, __ATOMIC_RELEASE);
		limit = t0 + o->duration_s;
		for (;;) {
			size_t done = 0;

			sleep_s(0.005);
			for (i = 0; i < o->workers; i++)
				done += (size_t)__atomic_load_n(&args[i].done, __ATOMIC_ACQUIRE);
			if (done == o->workers || bench_mono_s() >= limit)
				break;
		}
		__atomic_store_n(&run_recording, 0, __ATOMIC_RELEASE);
		t1 = bench_mono_s();
		cpu_sample(&c1);
		if (d->window)
			d->window(o, true, wctx, note, sizeof note);
		__atomic_store_n(&run_stop, 1, __ATOMIC_RELEASE);
	}
	if (green)
		bench_green_join(green);
	for (i = 0; !green && i < started; i++)
		pthread_join(th[i], NULL);
	if (!loops)
		pthread_barrier_destroy(&ready);
	if (!failed) {
		report_print(d, o, ws, t1 - t0, &c0, &c1, note);
		code = 0;
	}
	for (i = 0; i < o->workers; i++)
		bench_http_close(ws[i].http);
out:
	free(wctx);
	free(th);
	free(argp);
	free(args);
	free(ws);
	return code;
}
