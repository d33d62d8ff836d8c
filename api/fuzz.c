/* Test/fuzz entry point: one HTTP request made from arbitrary bytes, run through the real
 * daemon of a started api -- libmicrohttpd's parser, the router, auth, the body limits, JSON
 * decoding and the handlers against the real store -- without a listening socket: the
 * request travels over a socketpair whose far end is handed to MHD_add_connection.
 *
 * Not linked into boardd: tests/fuzz builds it into the fuzz targets and their replay
 * programs. The access handler is tied to MHD (headers, query arguments and answers all go
 * through the connection), so the daemon itself is the entry point.
 *
 * The bytes are shaped like a request so that mutations reach the api rather than die in
 * MHD's request-line parser (see api.h for the format): the method keeps its upper-case
 * letters, the target is percent-encoded where HTTP forbids a byte, header lines keep only
 * what a header may hold, and the framing headers are ours. */
#include "api/api_daemon.h"

#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FUZZ_METHOD_MAX 16
#define FUZZ_TARGET_MAX 4096
#define FUZZ_HEADERS_MAX 32
#define FUZZ_IO_MS 10000 /* one request never takes longer: past it, a hang is reported */
#define FUZZ_RESP_MAX (8u << 20)

struct fuzz_buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void buf_add(struct fuzz_buf *b, const void *data, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *np;

		while (cap < b->len + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_str(struct fuzz_buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static bool token_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A line [s, s+n) without its '\r's. */
static const uint8_t *line_next(const uint8_t *p, const uint8_t *end, size_t *n,
				const uint8_t **next)
{
	const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));

	*n = (size_t)((nl ? nl : end) - p);
	*next = nl ? nl + 1 : end;
	while (*n && p[*n - 1] == '\r')
		(*n)--;
	return p;
}

static bool name_is(const uint8_t *s, size_t n, const char *name)
{
	return n == strlen(name) && strncasecmp((const char *)s, name, n) == 0;
}

/* Builds the request text from the fuzz bytes. */
static void request_build(const uint8_t *data, size_t len, struct fuzz_buf *req)
{
	const uint8_t *p = data, *end = data + len, *line, *next;
	char method[FUZZ_METHOD_MAX + 1];
	size_t n, i, m = 0, headers = 0;
	bool chunked = false;
	const uint8_t *sp;

	/* request line: METHOD SP TARGET */
	line = line_next(p, end, &n, &next);
	sp = memchr(line, ' ', n);
	for (i = 0; i < (size_t)((sp ? sp : line + n) - line) && m < FUZZ_METHOD_MAX; i++)
		if (line[i] >= 'A' && line[i] <= 'Z')
			method[m++] = (char)line[i];
	method[m] = '\0';
	if (!m)
		strcpy(method, "GET");
	buf_str(req, method);
	buf_str(req, " ");
	if (!sp || sp + 1 == line + n || sp[1] != '/')
		buf_str(req, "/");
	for (i = sp ? (size_t)(sp - line) + 1 : n; i < n && i < FUZZ_TARGET_MAX; i++) {
		unsigned char c = line[i];
		char esc[4];

		if (c <= 0x20 || c >= 0x7f || c == '#') {
			snprintf(esc, sizeof esc, "%%%02X", c);
			buf_str(req, esc);
		} else {
			buf_add(req, &c, 1);
		}
	}
	buf_str(req, " HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n");

	/* header lines up to an empty line */
	for (p = next; p < end;) {
		const uint8_t *colon, *v;
		size_t vn;

		line = line_next(p, end, &n, &next);
		p = next;
		if (n == 0)
			break;
		colon = memchr(line, ':', n);
		if (!colon || colon == line || headers == FUZZ_HEADERS_MAX)
			continue;
		for (i = 0; line + i < colon && token_char(line[i]); i++)
			;
		if (line + i != colon)
			continue;
		v = colon + 1;
		vn = n - (size_t)(v - line);
		while (vn && (*v == ' ' || *v == '\t')) {
			v++;
			vn--;
		}
		if (name_is(line, i, "Transfer-Encoding")) {
			chunked = true;
			continue;
		}
		if (name_is(line, i, "Content-Length") || name_is(line, i, "Connection") ||
		    name_is(line, i, "Host"))
			continue;
		buf_add(req, line, i);
		buf_str(req, ": ");
		for (size_t k = 0; k < vn; k++)
			if (v[k] >= 0x20 && v[k] != 0x7f)
				buf_add(req, &v[k], 1);
		buf_str(req, "\r\n");
		headers++;
	}

	/* the body: the rest, framed by us */
	n = (size_t)(end - p);
	if (chunked) {
		char sz[32];
		size_t half = n / 2;

		buf_str(req, "Transfer-Encoding: chunked\r\n\r\n");
		if (half) {
			snprintf(sz, sizeof sz, "%zx\r\n", half);
			buf_str(req, sz);
			buf_add(req, p, half);
			buf_str(req, "\r\n");
		}
		if (n - half) {
			snprintf(sz, sizeof sz, "%zx\r\n", n - half);
			buf_str(req, sz);
			buf_add(req, p + half, n - half);
			buf_str(req, "\r\n");
		}
		buf_str(req, "0\r\n\r\n");
	} else if (n || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
		   strcmp(method, "PATCH") == 0) {
		char cl[64];

		snprintf(cl, sizeof cl, "Content-Length: %zu\r\n\r\n", n);
		buf_str(req, cl);
		buf_add(req, p, n);
	} else {
		buf_str(req, "\r\n");
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An event stream (GET /v1/events/stream) never ends by itself: once its header block and
 * first bytes are in, the answer is whole for our purposes, and the client hangs up. */
static bool stream_begun(const struct fuzz_buf *resp)
{
	const char *hend;
	size_t i;

	if (!resp->p || resp->len < 4)
		return false;
	hend = memmem(resp->p, resp->len, "\r\n\r\n", 4);
	if (!hend || (size_t)(hend - resp->p) + 4 >= resp->len)
		return false;
	for (i = 0; resp->p + i + 17 <= hend; i++)
		if (strncasecmp(resp->p + i, "text/event-stream", 17) == 0)
			return true;
	return false;
}

/* Writes the request and reads the answer until MHD closes (or an event stream has begun);
 * false on a hang or I/O error. */
static bool exchange(int fd, const struct fuzz_buf *req, struct fuzz_buf *resp)
{
	int64_t deadline = now_ms() + FUZZ_IO_MS;
	size_t sent = 0;
	char chunk[16384];

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t left = deadline - now_ms();
		ssize_t r;

		if (sent < req->len)
			pfd.events |= POLLOUT;
		if (left <= 0) {
			errno = ETIMEDOUT;
			return false;
		}
		if (poll(&pfd, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		if (pfd.revents & POLLOUT) {
			r = send(fd, req->p + sent, req->len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (r > 0)
				sent += (size_t)r;
			else if (r < 0 && errno != EAGAIN && errno != EINTR)
				sent = req->len; /* the server stopped reading: read its answer */
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			r = recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
			if (r == 0)
				return true;
			if (r < 0 && errno != EAGAIN && errno != EINTR)
				return errno == ECONNRESET;
			if (r > 0) {
				if (resp->len + (size_t)r > FUZZ_RESP_MAX)
					return false;
				buf_add(resp, chunk, (size_t)r);
				if (stream_begun(resp))
					return true;
			}
		}
	}
}

/* Waits until MHD has cleaned every connection up (the completion callback ran). */
static bool connections_drained(struct api *a)
{
	int64_t deadline = now_ms() + FUZZ_IO_MS;

	while (now_ms() < deadline) {
		const union MHD_DaemonInfo *info =
			MHD_get_daemon_info(a->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

		if (!info || info->num_connections == 0)
			return true;
		usleep(50);
	}
	return false;
}

int api_fuzz_request(struct api *a, const uint8_t *data, size_t len, char **resp,
		     size_t *resp_len)
{
	struct fuzz_buf req = {0}, out = {0};
	struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(1),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fds[2] = {-1, -1}, status = -1;
	bool ok;

	if (resp)
		*resp = NULL;
	if (resp_len)
		*resp_len = 0;
	if (!a || (!data && len))
		return -1;
	request_build(data, len, &req);
	if (req.oom || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
		goto out;
	/* MHD owns fds[1] from here on, also when it refuses it. */
	if (MHD_add_connection(a->daemon, fds[1], (const struct sockaddr *)&peer, sizeof peer) !=
	    MHD_YES) {
		fds[1] = -1;
		goto out;
	}
	fds[1] = -1;
	ok = exchange(fds[0], &req, &out);
	close(fds[0]);
	fds[0] = -1;
	if (!ok || out.oom || !connections_drained(a))
		goto out;
	status = 0;
	if (out.len >= 12 && strncmp(out.p, "HTTP/1.", 7) == 0 && out.p[8] == ' ')
		status = atoi(out.p + 9);
	if (resp) {
		*resp = out.p;
		out.p = NULL;
	}
	if (resp_len)
		*resp_len = out.len;
out:
	if (fds[0] >= 0)
		close(fds[0]);
	free(req.p);
	free(out.p);
	return status;
}
