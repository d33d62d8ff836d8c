/* A tiny blocking HTTP/1.1 client (see httpc.h). */
#include "tests/common/httpc.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define IO_TIMEOUT_S 60

struct httpc {
	char *host;
	uint16_t port;
	char *unix_path; /* a Unix socket file instead of host:port */
	int fd;
	unsigned dials;  /* connections opened (httpc_dials) */
	/* bytes read past the previous answer */
	char *buf;
	size_t len, cap;
};

static int dial_unix(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct timeval tv = {IO_TIMEOUT_S, 0};
	int fd;

	if (strlen(path) >= sizeof sun.sun_path)
		return -1;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	return fd;
}

static int dial(const char *host, uint16_t port)
{
	struct addrinfo hints = {0}, *res = NULL, *ai;
	struct timeval tv = {IO_TIMEOUT_S, 0};
	char ports[8];
	int fd = -1, one = 1;

	snprintf(ports, sizeof ports, "%u", (unsigned)port);
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, ports, &hints, &res) != 0)
		return -1;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	}
	return fd;
}

struct httpc *httpc_connect(const char *host, uint16_t port)
{
	struct httpc *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	c->host = strdup(host);
	c->port = port;
	c->fd = c->host ? dial(host, port) : -1;
	if (c->fd < 0) {
		httpc_close(c);
		return NULL;
	}
	c->dials = 1;
	return c;
}

struct httpc *httpc_connect_unix(const char *path)
{
	struct httpc *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	c->host = strdup("localhost"); /* the Host header's */
	c->unix_path = strdup(path);
	c->fd = c->host && c->unix_path ? dial_unix(path) : -1;
	if (c->fd < 0) {
		httpc_close(c);
		return NULL;
	}
	c->dials = 1;
	return c;
}

unsigned httpc_dials(const struct httpc *c)
{
	return c->dials;
}

void httpc_close(struct httpc *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->host);
	free(c->unix_path);
	free(c->buf);
	free(c);
}

static void drop(struct httpc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->len = 0;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads more bytes into c->buf; 0 on EOF, -1 on error. */
static ssize_t fill(struct httpc *c)
{
	ssize_t r;

	if (c->cap - c->len < 4096) {
		size_t ncap = c->cap ? c->cap * 2 : 16384;
		char *nb = realloc(c->buf, ncap);

		if (!nb)
			return -1;
		c->buf = nb;
		c->cap = ncap;
	}
	do
		r = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
	while (r < 0 && errno == EINTR);
	if (r > 0)
		c->len += (size_t)r;
	return r;
}

/* Removes the first n bytes of c->buf. */
static void consume(struct httpc *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

char *httpc_header(const char *h, const char *name)
{
	size_t nl = strlen(name);

	while (h && *h) {
		const char *eol = strstr(h, "\r\n");
		size_t ll = eol ? (size_t)(eol - h) : strlen(h);

		if (ll > nl && strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
			const char *v = h + nl + 1;
			size_t vl;

			while (*v == ' ')
				v++;
			vl = (size_t)(h + ll - v);
			while (vl && v[vl - 1] == ' ')
				vl--;
			return strndup(v, vl);
		}
		h = eol ? eol + 2 : NULL;
	}
	return NULL;
}

/* Reads one answer; the request was a HEAD when head is true. */
static int read_answer(struct httpc *c, bool head, int *status, char **resp_headers,
		       char **resp_body)
{
	char *hdr = NULL, *body = NULL, *te = NULL, *cl = NULL, *conn = NULL, *end;
	size_t hlen, blen = 0, bcap = 0;
	bool close_after = false;
	int rc = -1;

	for (;;) {
		if (c->len && (end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
			break;
		if (fill(c) <= 0)
			goto out;
	}
	hlen = (size_t)(end - c->buf) + 4;
	c->buf[hlen - 2] = '\0';
	if (sscanf(c->buf, "HTTP/1.%*d %d", status) != 1)
		goto out;
	{
		const char *first = strstr(c->buf, "\r\n");

		hdr = strdup(first ? first + 2 : "");
	}
	consume(c, hlen);
	if (!hdr)
		goto out;
	te = httpc_header(hdr, "Transfer-Encoding");
	cl = httpc_header(hdr, "Content-Length");
	conn = httpc_header(hdr, "Connection");
	close_after = conn && strcasecmp(conn, "close") == 0;
	if (*status == 100) { /* 100 Continue: the real answer follows */
		free(hdr);
		free(te);
		free(cl);
		free(conn);
		return read_answer(c, head, status, resp_headers, resp_body);
	}
	body = malloc(1);
	if (!body)
		goto out;
	bcap = 1;
	if (head || *status == 204 || *status == 304) {
		/* no body */
	} else if (te && strcasecmp(te, "chunked") == 0) {
		for (;;) {
			char *eol;
			unsigned long n;

			while (!(c->len && (eol = memmem(c->buf, c->len, "\r\n", 2))))
				if (fill(c) <= 0)
					goto out;
			*eol = '\0';
			n = strtoul(c->buf, NULL, 16);
			consume(c, (size_t)(eol - c->buf) + 2);
			while (c->len < n + 2)
				if (fill(c) <= 0)
					goto out;
			if (n) {
				char *nb = realloc(body, blen + n + 1);

				if (!nb)
					goto out;
				body = nb;
				memcpy(body + blen, c->buf, n);
				blen += n;
			}
			consume(c, n + 2);
			if (n == 0)
				break; /* trailers are not used by the server */
		}
	} else if (cl) {
		size_t n = strtoul(cl, NULL, 10);

		while (c->len < n)
			if (fill(c) <= 0)
				goto out;
		free(body);
		body = malloc(n + 1);
		if (!body)
			goto out;
		memcpy(body, c->buf, n);
		blen = n;
		consume(c, n);
	} else {
		ssize_t r;

		while ((r = fill(c)) > 0)
			;
		if (r < 0)
			goto out;
		free(body);
		body = malloc(c->len + 1);
		if (!body)
			goto out;
		memcpy(body, c->buf, c->len);
		blen = c->len;
		c->len = 0;
		close_after = true;
	}
	(void)bcap;
	body[blen] = '\0';
	rc = 0;
out:
	if (rc != 0 || close_after)
		drop(c);
	if (rc == 0) {
		if (resp_headers)
			*resp_headers = hdr;
		else
			free(hdr);
		if (resp_body)
			*resp_body = body;
		else
			free(body);
	} else {
		free(hdr);
		free(body);
		*status = 0;
	}
	free(te);
	free(cl);
	free(conn);
	return rc;
}

static int ensure_open(struct httpc *c)
{
	if (c->fd >= 0)
		return 0;
	c->len = 0;
	c->fd = c->unix_path ? dial_unix(c->unix_path) : dial(c->host, c->port);
	if (c->fd < 0)
		return -1;
	c->dials++;
	return 0;
}

int httpc_raw(struct httpc *c, const char *bytes, size_t len, int *status, char **resp_headers,
	      char **resp_body)
{
	*status = 0;
	if (resp_headers)
		*resp_headers = NULL;
	if (resp_body)
		*resp_body = NULL;
	if (ensure_open(c) != 0)
		return -1;
	if (send_all(c->fd, bytes, len) != 0) {
		/* The server may have answered before reading everything: read what it said. */
		int rc = read_answer(c, false, status, resp_headers, resp_body);

		drop(c);
		return rc;
	}
	return read_answer(c, strncmp(bytes, "HEAD ", 5) == 0, status, resp_headers, resp_body);
}

int httpc_request_len(struct httpc *c, const char *method, const char *path,
		      const char *const *headers, const char *body, size_t body_len, int *status,
		      char **resp_headers, char **resp_body)
{
	char *req = NULL;
	size_t rlen = 0;
	FILE *f;
	int rc, attempt;
	size_t i;

	f = open_memstream(&req, &rlen);
	if (!f)
		return -1;
	if (c->unix_path)
		fprintf(f, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, c->host);
	else
		fprintf(f, "%s %s HTTP/1.1\r\nHost: %s:%u\r\n", method, path, c->host,
			(unsigned)c->port);
	for (i = 0; headers && headers[i]; i++)
		fprintf(f, "%s\r\n", headers[i]);
	if (body)
		fprintf(f, "Content-Length: %zu\r\n", body_len);
	fputs("\r\n", f);
	if (body)
		fwrite(body, 1, body_len, f);
	if (fclose(f) != 0) {
		free(req);
		return -1;
	}
	/* A kept-alive connection the server closed meanwhile fails at once: retry once fresh. */
	for (attempt = 0; attempt < 2; attempt++) {
		bool was_open = c->fd >= 0;

		rc = httpc_raw(c, req, rlen, status, resp_headers, resp_body);
		if (rc == 0 || !was_open)
			break;
		drop(c);
	}
	free(req);
	return rc;
}

int httpc_request(struct httpc *c, const char *method, const char *path,
		  const char *const *headers, const char *body, int *status, char **resp_headers,
		  char **resp_body)
{
	return httpc_request_len(c, method, path, headers, body, body ? strlen(body) : 0, status,
				 resp_headers, resp_body);
}
