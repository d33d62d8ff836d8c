/* bench — the shared pieces of the benchmark drivers: a small keep-alive HTTP/1.1 client,
 * log-bucketed latency histograms, and a cycle runner (N worker threads, a warm-up, a fixed
 * window, per-operation tables). Nothing here asserts a figure: drivers print them.
 *
 * The client is deliberately lean (no JSON library, reused buffers): the load generator shares
 * two cores with the server it measures, and every driver pays the same client cost. */
#ifndef BOARDD_BENCH_H
#define BOARDD_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- HTTP client ---------------------------------------------------------------------- */

struct bench_http;

/* Makes every connection opened from now on speak TLS (1.2+), verifying the server's
 * certificate against cafile for the numeric address connected to. Call once, before any
 * connection. 0, or -1 (message on stderr). */
int bench_http_tls(const char *cafile);

/* Connects to host:port (numeric IPv4/IPv6 address). Socket timeouts are 10 s, so a stuck
 * server turns into an error, never a hang. NULL on failure. Caller frees with
 * bench_http_close. */
struct bench_http *bench_http_open(const char *host, uint16_t port);
/* The same over the unix-domain (AF_UNIX) stream socket at path; requests carry
 * "Host: localhost". Plain HTTP only: NULL (message on stderr) once bench_http_tls was
 * called, as for a path too long for sun_path or a failed connect. */
struct bench_http *bench_http_open_unix(const char *path);
void bench_http_close(struct bench_http *c);
/* The value of header `name` (any case) in the header block [h, end), blanks around it
 * trimmed, or NULL; *vlen its length. Also the ceiling server's (bench/ceiling.c). */
const char *bench_http_header_find(const char *h, const char *end, const char *name,
				   size_t *vlen);

/* Sends one request on the keep-alive connection and reads the answer (Content-Length,
 * chunked or close-delimited). headers: NULL or extra "Name: value\r\n" lines. body: NULL or a
 * NUL-terminated JSON body (sent with Content-Type: application/json). A connection the
 * server closed while idle is reopened once.
 * OUT: *status (0 on a transport error), *resp (NUL-terminated body, borrowed until the next
 * call on c). Returns 0, or -1 on a transport error. */
int bench_http_request(struct bench_http *c, const char *method, const char *path,
		       const char *headers, const char *body, int *status, const char **resp);

/* ---- event-loop workers (green.c) --------------------------------------------------- */

/* Runs fn(args[i]) for i < n, each as a coroutine, spread over `threads` OS threads that are
 * each an epoll loop; the calls below park a coroutine instead of blocking its thread.
 * NULL on failure. bench_green_join waits until every fn returned and frees. */
struct bench_green;
struct bench_green *bench_green_start(size_t n, unsigned threads, void (*fn)(void *),
				      void *const *args);
void bench_green_join(struct bench_green *g);
/* True inside such a coroutine. */
bool bench_green_on(void);
/* Inside a coroutine: adds a connected socket to the loop (edge-triggered; readable, or hung
 * up, wakes the coroutine parked on it); outside, does nothing. 0, or -1 (errno). */
int bench_green_register(int fd);
/* Inside a coroutine: whether the socket becoming writable wakes it too (registered: no).
 * Ask for it only while a send waits for room: on a unix socket each read of the peer's
 * signals writability, a wake-up for nothing. 0, or -1 (errno); outside, does nothing. */
int bench_green_want_write(int fd, bool write);
/* Inside a coroutine: parks it until its socket has an event (0) or timeout_ms passed (-1).
 * Wake-ups may be spurious: retry the call that would have blocked. */
int bench_green_wait(int timeout_ms);
/* Inside a coroutine: lets the others run for ms milliseconds. */
void bench_green_sleep_ms(unsigned ms);

/* ---- latency histograms --------------------------------------------------------------- */

/* Microseconds, exact below 64 us, then 32 linear sub-buckets per power of two (< 3.2 %
 * error), up to 2^37 us. Max and sum are exact. */
#define BENCH_LAT_SUB 32
#define BENCH_LAT_BUCKETS (64 + 32 * BENCH_LAT_SUB)

struct bench_lat {
	uint64_t n;
	uint64_t sum_us;
	uint64_t max_us;
	uint64_t b[BENCH_LAT_BUCKETS];
};

void bench_lat_record(struct bench_lat *l, uint64_t us);
void bench_lat_merge(struct bench_lat *dst, const struct bench_lat *src);
/* The q-quantile (0..1) in microseconds: the upper edge of its bucket; 0 when empty. */
uint64_t bench_lat_quantile(const struct bench_lat *l, double q);

/* ---- per-operation statistics --------------------------------------------------------- */

#define BENCH_STATUS_SLOTS 8

struct bench_stat {
	struct bench_lat lat; /* 2xx answers inside the measured window */
	uint64_t ok;          /* 2xx answers inside the window */
	uint64_t err;         /* every non-2xx answer or transport error, warm-up included */
	struct {
		int status; /* 0: transport error; -1: 2xx with an unexpected body */
		uint64_t n;
	} codes[BENCH_STATUS_SLOTS];
	char first_err[160]; /* the first error's status and body, for the report */
};

/* ---- the claim cycle's steps --------------------------------------------------------- */

/* The steps every claim-cycle driver times (boardd, etcd, PostgreSQL), so their tables line
 * up row for row. A driver with more steps numbers them from BENCH_CYCLE_OPS. */
enum bench_cycle_op {
	BENCH_OP_CLAIM,
	BENCH_OP_RENEW,
	BENCH_OP_TO_REVIEW,
	BENCH_OP_TO_PROGRESS,
	BENCH_OP_RELEASE,
	BENCH_CYCLE_OPS,
};

/* Their names, as the start of a driver's designated initializer of its op names. */
#define BENCH_CYCLE_OP_NAMES                      \
	[BENCH_OP_CLAIM] = "claim",               \
	[BENCH_OP_RENEW] = "renew",               \
	[BENCH_OP_TO_REVIEW] = "state->review",   \
	[BENCH_OP_TO_PROGRESS] = "state->back",   \
	[BENCH_OP_RELEASE] = "release"

/* ---- the cycle runner ----------------------------------------------------------------- */

#define BENCH_OPS_MAX 8

struct bench_opts {
	const char *host;   /* default 127.0.0.1 */
	uint16_t port;
	const char *unix_path; /* -U: connect to this unix socket instead of host:port (the
				* HTTP drivers; plain HTTP only, so never with -C) */
	size_t workers;     /* default 32 */
	double duration_s;  /* measured window; default 20, at most 3600 */
	double warmup_s;    /* before the window; default 2 */
	uint64_t cycles;    /* 0: run for duration_s; else stop after this many cycles in the
			     * window (duration_s still bounds it) */
	int64_t lease_ms;   /* default 30 000 */
	unsigned renews;    /* renewals per cycle; default 3 */
	const char *prefix; /* card / key prefix; default "bench" */
	const char *cacert; /* -C: speak HTTPS, verifying with this CA file; NULL: HTTP */
	int loops;          /* -e: event-loop threads carrying the workers (green.c); 0: one
			     * blocking thread per worker; -1 (default): the driver's choice */
};

struct bench_worker {
	size_t idx;
	const struct bench_opts *opts;
	struct bench_http *http;
	struct bench_stat op[BENCH_OPS_MAX];
	struct bench_lat cycle_lat; /* whole cycles that succeeded inside the window */
	uint64_t cycles_ok;         /* inside the window */
	uint64_t cycles_failed;     /* warm-up included */
	void *ctx;                  /* the driver's per-worker state */
};

struct bench_driver {
	const char *target;             /* "boardd", "etcd", "pg" */
	const char *const *ops;         /* names of the operations, index = op number */
	size_t n_ops;
	const char *cycle_desc;         /* one line printed above the table */
	/* Per worker, before the clock starts (create the card, grant a lease...). 0 or -1. */
	int (*setup)(struct bench_worker *w);
	/* One claim cycle; 0 when every step answered as expected. A failed cycle should
	 * leave the card claimable again (best effort) so the next cycle starts fresh. */
	int (*cycle)(struct bench_worker *w);
	void (*teardown)(struct bench_worker *w); /* may be NULL */
	/* May be NULL. Called as the measured window opens (end = false) and closes (end =
	 * true, ctx as the opening call left it); the closing call may write one line for the
	 * report into note (the server's own counters over the window). */
	void (*window)(const struct bench_opts *o, bool end, void *ctx, char *note, size_t len);
	size_t window_ctx_size; /* bytes of zeroed ctx the runner hands to both calls */
	/* true: the driver opens its own connection in setup (libpq); the runner opens no
	 * HTTP connection and w->http stays NULL. */
	bool own_connection;
	/* Event-loop threads carrying the workers when -e is not given; 0: one blocking thread
	 * per worker. Only for drivers whose every wait parks the coroutine (bench_http's, or
	 * an own connection with own_connection_parks); HTTPS (-C) always runs one thread per
	 * worker. */
	unsigned loops_default;
	/* With own_connection: true when the driver's waits on its connection park the
	 * coroutine through bench_green_wait inside an event-loop worker (pg_cycle's
	 * nonblocking libpq), so -e may put it on a loop; false: always a thread per worker. */
	bool own_connection_parks;
	/* How to read the status column of the error table; NULL: the HTTP one (0 = transport
	 * error, -1 = a 2xx whose body said no). */
	const char *err_legend;
};

/* Parses the common options (-H host -p port -U socket -w workers -d seconds -W warmup
 * -n cycles -l lease_ms -P prefix) and hands any other option in `extra` to extra_fn
 * (returns 0 when it took it). Prints usage and returns -1 on a bad command line. */
int bench_opts_parse(struct bench_opts *o, int argc, char **argv, const char *extra,
		     int (*extra_fn)(int opt, const char *arg, void *ctx), void *ctx,
		     const char *usage);

/* One connection to the server the options name: -U's unix socket, else host:port. */
struct bench_http *bench_opts_http_open(const struct bench_opts *o);
/* "unix" when the driver reaches its server over a unix-domain socket (-U, or a host that
 * is a directory: libpq's socket directory), else "tcp". */
const char *bench_opts_transport(const struct bench_opts *o);

/* Runs the driver with o->workers threads, prints the table and one machine-readable
 * "RESULT ..." line. The server's CPU per request is measured when BENCH_SERVER_PID names
 * the server's process: its own CPU, its live children's and its reaped children's
 * (PostgreSQL's postmaster: every backend, the WAL writer, the checkpointer...). Returns 0 when the run happened (errors are reported, not fatal), 1
 * when setup failed. */
int bench_run(const struct bench_driver *d, const struct bench_opts *o);

/* Times one request of operation `op` and records it. Returns the HTTP status, 0 on a
 * transport error. A non-2xx answer is counted as an error of `op`; *resp as in
 * bench_http_request. */
int bench_op_request(struct bench_worker *w, size_t op, const char *method, const char *path,
		     const char *headers, const char *body, const char **resp);
/* Turns the last 2xx of `op` into an error (an answer whose body said no: etcd's
 * "succeeded" missing, a claim that was not fresh). */
void bench_op_unexpected(struct bench_worker *w, size_t op, const char *resp);
/* Records one timed operation of a driver that does not speak HTTP (pg_cycle): started at
 * t0_us (bench_now_us()), ok when it did what it must; otherwise it is counted as an error
 * of `op` with `code` in the status column (as err_legend explains) and detail as its text. */
void bench_op_record(struct bench_worker *w, size_t op, uint64_t t0_us, bool ok, int code,
		     const char *detail);
/* Counts one request outside the measured cycle (recovery after a failure). */
int bench_op_untimed(struct bench_worker *w, const char *method, const char *path,
		     const char *headers, const char *body, const char **resp);

/* Small helpers for the drivers. */
double bench_mono_s(void);
uint64_t bench_now_us(void); /* CLOCK_MONOTONIC in microseconds */
/* BENCH_SERVER_PID's CPU time and its children's (utime + stime, what it reaped included) in
 * seconds, or -1 when unset or gone. */
double bench_server_cpu_s(void);
/* The FS store's boardd_fs_journal_lines_total and _syncs_total from GET /metrics. */
bool bench_metric_value(const char *resp, const char *name, unsigned long long *v);
bool bench_fs_counters(const char *host, uint16_t port, unsigned long long *lines,
		       unsigned long long *syncs);
/* The integer after "key": (plain or "quoted") in a JSON text; false when absent. */
bool bench_json_int(const char *json, const char *key, int64_t *out);
/* Base64 of len bytes of src into dst (NUL-terminated); dst holds 4*((len+2)/3)+1 bytes. */
void bench_base64(const void *src, size_t len, char *dst);

#endif
