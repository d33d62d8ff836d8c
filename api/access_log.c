/* The access log: one line per answer (text or JSON, --log-format), queued and written to
 * stderr by a writer thread in batches; libmicrohttpd's own messages go through the same
 * queue. api_req_account counts an answer in the metrics and logs it, once. */
#include "api/api_conns.h"
#include "api/api_daemon.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the access log on stderr ----
 *
 * One write(2) per request line cost about 5 % of the server's CPU under load. Lines are
 * queued instead, and a writer thread empties the queue with one write per batch: a line
 * alone is written within API_LOG_GATHER_MS (the first line after an idle spell wakes the
 * writer, which lets the batch gather that long, and keeps gathering while lines come), the
 * lines of a burst share one write. A full queue makes
 * the caller wait for the writer; a line is never dropped, and lines keep their order. */
#define API_LOG_BUF (64u * 1024u)
#define API_LOG_GATHER_MS 2

static void write_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* stderr is gone: nothing better to do with a log line */
		p += w;
		n -= (size_t)w;
	}
}

static void *log_main(void *arg)
{
	struct api *a = arg;
	char *out;
	size_t n;

	pthread_mutex_lock(&a->log.mu);
	for (;;) {
		while (!a->log.len && !a->log.stop)
			pthread_cond_wait(&a->log.cv, &a->log.mu);
		if (!a->log.len)
			break; /* stopping, and everything was written */
		/* A busy spell: gather, write, and gather again while lines keep coming. The writer
		 * stays `busy` until a gather brings nothing, so under load no caller has to wake
		 * it (that futex wake was 1 % of the server's CPU in the claim-cycle profile); a
		 * line still waits at most API_LOG_GATHER_MS (plus the write before it). */
		a->log.busy = true;
		for (;;) {
			/* (not when half the queue is full already: callers may soon wait for room) */
			if (!a->log.stop && a->log.len < API_LOG_BUF / 2) {
				struct timespec gather = {0, API_LOG_GATHER_MS * 1000000L};

				pthread_mutex_unlock(&a->log.mu);
				nanosleep(&gather, NULL);
				pthread_mutex_lock(&a->log.mu);
			}
			if (!a->log.len)
				break;
			out = a->log.buf; /* swap: callers fill the other buffer meanwhile */
			a->log.buf = a->log.out;
			a->log.out = out;
			n = a->log.len;
			a->log.len = 0;
			pthread_cond_broadcast(&a->log.idle); /* a caller waiting for room has it */
			pthread_mutex_unlock(&a->log.mu);
			write_all(STDERR_FILENO, out, n);
			pthread_mutex_lock(&a->log.mu);
		}
		a->log.busy = false;
		pthread_cond_broadcast(&a->log.idle);
	}
	pthread_mutex_unlock(&a->log.mu);
	return NULL;
}

void api_log_start(struct api *a)
{
	pthread_mutex_init(&a->log.mu, NULL);
	pthread_cond_init(&a->log.cv, NULL);
	pthread_cond_init(&a->log.idle, NULL);
	if (a->cfg.log || a->cfg.log_format == API_LOG_NONE)
		return;
	a->log.buf = malloc(API_LOG_BUF);
	a->log.out = malloc(API_LOG_BUF);
	if (a->log.buf && a->log.out && pthread_create(&a->log.th, NULL, log_main, a) == 0)
		a->log.started = true;
}

/* After the daemon stopped (no more lines): writes what is queued and stops the writer. */
void api_log_stop(struct api *a)
{
	if (a->log.started) {
		pthread_mutex_lock(&a->log.mu);
		a->log.stop = true;
		pthread_cond_signal(&a->log.cv);
		pthread_mutex_unlock(&a->log.mu);
		pthread_join(a->log.th, NULL);
	}
	free(a->log.buf);
	free(a->log.out);
	pthread_cond_destroy(&a->log.idle);
	pthread_cond_destroy(&a->log.cv);
	pthread_mutex_destroy(&a->log.mu);
}

/* line: n bytes, NUL-terminated. */
static void log_emit_n(struct api *a, const char *line, size_t n)
{
	if (a->cfg.log) {
		a->cfg.log(a->cfg.log_ctx, line);
		return;
	}
	if (!a->log.started) {
		fprintf(stderr, "%s\n", line);
		return;
	}
	pthread_mutex_lock(&a->log.mu);
	/* Full: wait for the writer to take the queue (backpressure, in order). */
	while (a->log.len + n + 1 > API_LOG_BUF && a->log.busy)
		pthread_cond_wait(&a->log.idle, &a->log.mu);
	if (a->log.len + n + 1 > API_LOG_BUF) {
		/* The writer is idle and it still does not fit: a line longer than the buffer, or
		 * a queue the writer was not woken for yet. Written here, under the lock. */
		write_all(STDERR_FILENO, a->log.buf, a->log.len);
		a->log.len = 0;
	}
	if (n + 1 > API_LOG_BUF) {
		write_all(STDERR_FILENO, line, n);
		write_all(STDERR_FILENO, "\n", 1);
	} else {
		memcpy(a->log.buf + a->log.len, line, n);
		a->log.buf[a->log.len + n] = '\n';
		/* Only the first line of a batch wakes the writer (which then gathers a moment). */
		if (!a->log.busy && !a->log.len)
			pthread_cond_signal(&a->log.cv);
		a->log.len += n + 1;
	}
	pthread_mutex_unlock(&a->log.mu);
}

void api_log_emit(struct api *a, const char *line)
{
	log_emit_n(a, line, strlen(line));
}

/* Does the word v hold only bytes api_log_escape copies as they are (printable ASCII but a
 * backslash and a double quote)? Each test is exact: a byte below 0x20, a high bit, a byte
 * equal to 0x7f, '"' or '\\'. */
static bool log_word_plain(uint64_t v)
{
	const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
	uint64_t del = v ^ (ones * 0x7f), quote = v ^ (ones * '"'), bs = v ^ (ones * '\\');

	return !((v & highs) | ((v - ones * 0x20) & ~v & highs) | ((del - ones) & ~del & highs) |
		 ((quote - ones) & ~quote & highs) | ((bs - ones) & ~bs & highs));
}

/* Copies s into out (cap bytes) for a log line: valid UTF-8 stays, a control byte, DEL, a
 * backslash, a double quote and every byte that is not valid UTF-8 become \xHH, so a line
 * never carries a raw control byte and a JSON line never loses the path. Cut at cap. */
void api_log_escape(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
	size_t o = 0, r;
	uint64_t v;

	while (*p && o + 5 < cap) {
		unsigned char c = *p;
		size_t k = 0, i;

		/* Eight plain bytes at a time (a path is mostly such): what the byte loop below
		 * would copy one by one, with room left as it would have. The last one to seven
		 * bytes as one word too: the word ending at the end (its bytes before p were
		 * copied already), or the bytes themselves after plain filler. */
		r = (size_t)(end - p);
		if (o + (r < 8 ? r : 8) + 5 < cap) {
			v = 0x6161616161616161u; /* "aaaaaaaa" */
			if (r >= 8)
				memcpy(&v, p, 8);
			else if (end - (const unsigned char *)s >= 8)
				memcpy(&v, end - 8, 8);
			else
				memcpy(&v, p, r);
			if (log_word_plain(v)) {
				r = r < 8 ? r : 8;
				memcpy(out + o, p, r);
				o += r;
				p += r;
				continue;
			}
		}
		/* The common byte first: printable ASCII that is neither escaped one. */
		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
			out[o++] = (char)c;
			p++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3;
		for (i = 1; i <= k; i++)
			if ((p[i] & 0xc0) != 0x80)
				break;
		if (k && i > k && o + k + 1 < cap &&
		    !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0) &&
		    !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90)) {
			memcpy(out + o, p, k + 1);
			o += k + 1;
			p += k + 1;
			continue;
		}
		if (c < 0x20 || c >= 0x7f || c == '\\' || c == '"') {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			out[o++] = (char)c;
		}
		p++;
	}
	out[o] = '\0';
}

/* Appends at most max bytes of s at *o, and never past the line's last byte (as snprintf
 * cuts). */
static void lt_put(char *line, size_t *o, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (n > API_LOG_LINE_MAX - 1 - *o)
		n = API_LOG_LINE_MAX - 1 - *o;

	memcpy(line + *o, s, n);
	*o += n;
}

static void lt_uint(char *line, size_t *o, uint64_t v)
{
	char d[24];
	size_t n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		line[(*o)++] = d[--n];
}

/* The text access line, as "%s %s %.200s %u %.1fms%s%s%s%s" (ts, method, path, status, ms,
 * " " token, " answered-by=" by) would print it, without snprintf: it was a tenth of the
 * request's user-space CPU. ms from ns: the tenths rounded to nearest; a tie (ns ending in
 * 50000) goes through %.1f, which rounds the double's exact value. line holds API_LOG_LINE_MAX
 * bytes: up to "ms" the parts are bounded (ts 24, method 39, path 200, the numbers); the
 * token's name and the rest are cut where the line ends, as snprintf would. Returns the
 * length. */
size_t api_log_text(char *line, const char *ts, const char *method, const char *path,
		    unsigned status, int64_t ns, const char *tok, const char *by)
{
	uint64_t u = ns > 0 ? (uint64_t)ns : 0, tenths = u / 100000, rem = u % 100000;
	size_t o = 0;

	lt_put(line, &o, ts, 40);
	line[o++] = ' ';
	lt_put(line, &o, method, 40);
	line[o++] = ' ';
	lt_put(line, &o, path, 200);
	line[o++] = ' ';
	lt_uint(line, &o, status);
	line[o++] = ' ';
	if (rem == 50000) {
		char num[48];

		snprintf(num, sizeof num, "%.1f", (double)u / 1e6);
		lt_put(line, &o, num, sizeof num);
	} else {
		tenths += rem > 50000;
		lt_uint(line, &o, tenths / 10);
		line[o++] = '.';
		line[o++] = (char)('0' + tenths % 10);
	}
	line[o++] = 'm';
	line[o++] = 's';
	if (tok) {
		line[o++] = ' ';
		lt_put(line, &o, tok, API_LOG_LINE_MAX);
	}
	if (by[0]) {
		lt_put(line, &o, " answered-by=", 16);
		lt_put(line, &o, by, 40);
	}
	line[o] = '\0';
	return o;
}

static void log_line(struct api *a, const struct api_req *r, int64_t ns)
{
	double ms = (double)ns / 1e6;
	char line[API_LOG_LINE_MAX], ts[CORE_TIME_BUF], path[512], method[40];
	const char *status_by = "";

	if (a->cfg.log_format == API_LOG_NONE)
		return;
	core_time_format(wall_ms(), ts);
	api_log_escape(r->path ? r->path : "", path, sizeof path);
	api_log_escape(r->method ? r->method : "-", method, sizeof method);
	if (!r->started && !r->raw_answered)
		status_by = "libmicrohttpd"; /* refused the request itself (lib_log) */
	if (a->cfg.log_format == API_LOG_JSON) {
		json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:f, s:s?, s:s?}", "ts", ts, "method",
				      method, "path", path, "status", (int)r->final_status, "ms",
				      ms, "token", r->tok ? r->tok->name : NULL, "answered_by",
				      status_by[0] ? status_by : NULL);
		char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(4)) : NULL;

		/* Everything packed is escaped ASCII/UTF-8, so this holds; never a bare {}. */
		if (text)
			snprintf(line, sizeof line, "%s", text);
		else
			snprintf(line, sizeof line, "{\"ts\":\"%s\",\"path\":\"%s\",\"status\":%u}",
				 ts, path, r->final_status);
		free(text);
		json_decref(j);
	} else {
		log_emit_n(a, line, api_log_text(line, ts, method, path, r->final_status, ns,
						 r->tok ? r->tok->name : NULL, status_by));
		return;
	}
	api_log_emit(a, line);
}

/* Counts the request's answer in the metrics and writes its log line, once. */
void api_req_account_at(struct api *a, struct api_req *r, int64_t now_ns)
{
	int64_t ns = now_ns - r->t0_ns;

	if (r->accounted)
		return;
	r->accounted = true;
	api_metrics_request(a, r, ns > 0 ? (uint64_t)ns : 0);
	log_line(a, r, ns);
}

void api_req_account(struct api *a, struct api_req *r)
{
	api_req_account_at(a, r, api_mono_ns());
}
