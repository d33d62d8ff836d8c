/* A job's output (DESIGN §20): the command's stdout and stderr go through pipes to a pump
 * thread that writes them on to boardctl's own stdout and stderr, as if the command wrote
 * there, and keeps the bytes not yet sent (their last CLI_OUTPUT_MAX: the run keeps no more).
 * The job's loop appends them to the run now and then and before its final write, as valid
 * UTF-8 (the run's output is text): an invalid byte or a NUL becomes U+FFFD, and a character
 * cut by a pipe read waits for its end. A server without the route is skipped silently.
 * stdout and stderr are two pipes (so that each goes on to its own): in the kept text their
 * lines interleave in the order boardctl read them, which may differ from the order the job
 * wrote them when both come fast. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEND_TIMEOUT_MS 15000

struct cli_output {
	pthread_t th;
	int fd[2];          /* stdout, stderr of the command (read ends); -1 at EOF */
	bool through[2];    /* still written on to boardctl's fd 1 / 2 */
	atomic_bool closing; /* the command's tree is gone: read what is left, then stop */
	pthread_mutex_t mu;
	char *buf;          /* the unsent tail */
	size_t len;
	uint64_t base;      /* how many bytes were ever dropped or sent before buf[0] */
	bool cut;           /* buf[0] may be inside a character (its start dropped off) */
};

/* Set once a server answered 404/405 to the output route: older servers have none. */
static atomic_bool route_absent;

static void keep(struct cli_output *o, const char *p, size_t n)
{
	pthread_mutex_lock(&o->mu);
	if (n >= CLI_OUTPUT_MAX) {
		o->base += o->len + (n - CLI_OUTPUT_MAX);
		p += n - CLI_OUTPUT_MAX;
		n = CLI_OUTPUT_MAX;
		o->len = 0;
		o->cut = true;
	} else if (o->len + n > CLI_OUTPUT_MAX) {
		size_t drop = o->len + n - CLI_OUTPUT_MAX;

		memmove(o->buf, o->buf + drop, o->len - drop);
		o->len -= drop;
		o->base += drop;
		o->cut = true;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	pthread_mutex_unlock(&o->mu);
}

static void write_all(struct cli_output *o, int i, const char *p, size_t n)
{
	while (o->through[i] && n) {
		ssize_t w = write(i == 0 ? STDOUT_FILENO : STDERR_FILENO, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pf = {.fd = i == 0 ? STDOUT_FILENO : STDERR_FILENO,
					    .events = POLLOUT};

			poll(&pf, 1, 100);
			continue;
		}
		if (w <= 0) {
			o->through[i] = false; /* boardctl's own output is gone: keep capturing */
			break;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Reads what fd i has; false at EOF or on an error (the fd is closed then). */
static bool pump_one(struct cli_output *o, int i)
{
	char chunk[65536]; /* a pipe's whole buffer: the two streams interleave less */
	ssize_t n = read(o->fd[i], chunk, sizeof chunk);

	if (n > 0) {
		write_all(o, i, chunk, (size_t)n);
		keep(o, chunk, (size_t)n);
		return true;
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	close(o->fd[i]);
	o->fd[i] = -1;
	return false;
}

static void *pump(void *arg)
{
	struct cli_output *o = arg;
	int after = 0; /* reads after closing: bounded, should a writer outlive the sweep */

	while ((o->fd[0] >= 0 || o->fd[1] >= 0) && after < 256) {
		struct pollfd p[2] = {{.fd = o->fd[0], .events = POLLIN},
				      {.fd = o->fd[1], .events = POLLIN}};
		bool closing = atomic_load(&o->closing);
		int i, r = poll(p, 2, closing ? 0 : 100);

		if (r < 0 && errno != EINTR)
			break;
		/* Both are read whenever either is ready, stdout first: poll looks at the fds
		 * one after the other, so a job's last stdout line and the stderr line it wrote
		 * next could show as stderr alone. Two pipes keep no order between them; this
		 * only narrows the window. */
		for (i = 0; i < 2 && r > 0; i++)
			if (o->fd[i] >= 0)
				pump_one(o, i);
		if (closing && r == 0)
			break; /* nothing more to read now: what is left would never end */
		after += closing;
	}
	return NULL;
}

struct cli_output *cli_output_start(int out, int err)
{
	struct cli_output *o = calloc(1, sizeof *o);

	if (o)
		o->buf = malloc(CLI_OUTPUT_MAX);
	if (!o || !o->buf)
		goto fail;
	o->fd[0] = out;
	o->fd[1] = err;
	o->through[0] = o->through[1] = true;
	fcntl(out, F_SETFL, O_NONBLOCK);
	fcntl(err, F_SETFL, O_NONBLOCK);
	pthread_mutex_init(&o->mu, NULL);
	if (pthread_create(&o->th, NULL, pump, o) != 0) {
		pthread_mutex_destroy(&o->mu);
		goto fail;
	}
	return o;
fail:
	if (o)
		free(o->buf);
	free(o);
	close(out);
	close(err);
	return NULL;
}

void cli_output_finish(struct cli_output *o)
{
	if (!o || atomic_exchange(&o->closing, true))
		return;
	pthread_join(o->th, NULL);
}

void cli_output_free(struct cli_output *o)
{
	int i;

	if (!o)
		return;
	cli_output_finish(o);
	for (i = 0; i < 2; i++)
		if (o->fd[i] >= 0)
			close(o->fd[i]);
	pthread_mutex_destroy(&o->mu);
	free(o->buf);
	free(o);
}

bool cli_output_pending(struct cli_output *o)
{
	bool yes;

	if (!o || atomic_load(&route_absent))
		return false;
	pthread_mutex_lock(&o->mu);
	yes = o->len > 0;
	pthread_mutex_unlock(&o->mu);
	return yes;
}

/* The length of the UTF-8 sequence starting at s (n bytes available): > 0 when valid,
 * 0 when it is cut short by the end, -1 when invalid. */
static int utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xBF;
	int len, i;

	if (c >= 0x01 && c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF)
		len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
	else if (c >= 0xF0 && c <= 0xF4)
		len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
	else
		return -1; /* NUL, a continuation byte, C0, C1, F5..FF */
	for (i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return 0;
		if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF))
			return -1;
	}
	return len;
}

/* s[0, n) as valid UTF-8 without NUL (new string, caller frees): invalid bytes become
 * U+FFFD; leading continuation bytes are dropped when `cut`; an incomplete last character is
 * left out unless `final` (*used: the input bytes consumed). The text kept is at most
 * CLI_OUTPUT_MAX bytes: its front drops off first. NULL on out of memory. */
static char *utf8_clean(const char *s, size_t n, bool cut, bool final, size_t *used)
{
	const unsigned char *u = (const unsigned char *)s;
	char *t = malloc(n * 3 + 1);
	size_t i = 0, k = 0, start;

	if (!t)
		return NULL;
	while (cut && i < n && (u[i] & 0xC0) == 0x80)
		i++;
	while (i < n) {
		int len = utf8_seq(u + i, n - i);

		if (len == 0 && !final)
			break;
		if (len > 0) {
			memcpy(t + k, u + i, (size_t)len);
			k += (size_t)len;
			i += (size_t)len;
		} else {
			memcpy(t + k, "\xEF\xBF\xBD", 3);
			k += 3;
			i++;
		}
	}
	*used = i;
	start = k > CLI_OUTPUT_MAX ? k - CLI_OUTPUT_MAX : 0;
	while (start < k && ((unsigned char)t[start] & 0xC0) == 0x80)
		start++;
	memmove(t, t + start, k - start);
	t[k - start] = '\0';
	return t;
}

void cli_output_send(struct cli_output *o, struct cli_http *h, const struct cli_claim *c,
		     const char *run, bool final)
{
	char path[400], id[300], err[CLI_ERR_MAX];
	char *snap = NULL, *text = NULL;
	size_t len, used = 0;
	uint64_t base;
	bool cut;
	json_t *body = NULL;
	long st;

	if (!o || atomic_load(&route_absent))
		return;
	pthread_mutex_lock(&o->mu);
	len = o->len;
	base = o->base;
	cut = o->cut;
	if (len)
		snap = malloc(len);
	if (snap)
		memcpy(snap, o->buf, len);
	pthread_mutex_unlock(&o->mu);
	if (!snap)
		return;
	text = utf8_clean(snap, len, cut, final, &used);
	if (!text || !*text)
		goto out;
	body = json_pack("{s:s, s:s}", "marker", c->marker, "text", text);
	if (!body)
		goto out;
	cli_http_escape(run, id, sizeof id);
	snprintf(path, sizeof path, "/v1/runs/%s/output", id);
	st = cli_http_call(h, "POST", path, body, -1, SEND_TIMEOUT_MS, NULL, err, sizeof err);
	if (st == 404 || st == 405) {
		atomic_store(&route_absent, true); /* a server without run output (DESIGN §20) */
		goto out;
	}
	if (st == 0 || st >= 500)
		goto out; /* kept for the next time */
	/* Sent, or refused for good (409: the claim or the run is over; the job's own writes
	 * find that out): either way these bytes are done with. */
	if (st >= 400 && st != 409)
		cli_warn("card %s: run %s: output not kept: %s", c->card, run, err);
	pthread_mutex_lock(&o->mu);
	if (o->base < base + used) {
		size_t drop = (size_t)(base + used - o->base);

		if (drop > o->len)
			drop = o->len;
		memmove(o->buf, o->buf + drop, o->len - drop);
		o->len -= drop;
		o->base += drop;
		o->cut = false;
	}
	pthread_mutex_unlock(&o->mu);
out:
	json_decref(body);
	free(text);
	free(snap);
}
