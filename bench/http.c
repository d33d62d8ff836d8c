/* A small keep-alive HTTP/1.1 client over one blocking socket (TCP to a numeric address, or a
 * unix-domain stream socket), with buffers reused from one request to the next. Enough of
 * HTTP for boardd (libmicrohttpd) and etcd's gateway (Go net/http, chunked for streamed
 * RPCs); no pipelining. TLS (OpenSSL's libssl) once
 * bench_http_tls named a CA file: each connection then verifies the server's certificate for
 * its numeric address. */
#include "bench/bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

static SSL_CTX *tls_ctx; /* set once by bench_http_tls, before any connection */

int bench_http_tls(const char *cafile)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx)
		return -1;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_load_verify_locations(ctx, cafile, NULL) != 1) {
		fprintf(stderr, "bench: cannot load CA file %s\n", cafile);
		SSL_CTX_free(ctx);
		return -1;
	}
	tls_ctx = ctx;
	return 0;
}

struct bench_http {
	int fd;
	SSL *ssl;     /* TLS on fd, when bench_http_tls was called */
	char host[64];
	uint16_t port;
	struct sockaddr_un sun; /* sun_path[0] != 0: a unix-domain socket, not host:port */
	char hostport[80]; /* "host:port" ("localhost" on a unix socket) for the Host header,
			    * made on the first request */
	size_t hostport_len;
	bool reused;  /* at least one answer came over this socket */
	bool sent;    /* a request just went out: in an event-loop worker, its answer cannot be
		       * there yet, so the first read waits for the socket before trying */
	char *w;      /* request being written */
	size_t wcap;
	char *r;      /* bytes read, headers then body */
	size_t rlen, rcap;
	char *body;   /* the decoded body handed out */
	size_t bcap;
};

static int grow(char **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 4096;
	char *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*buf, n);
	if (!p)
		return -1;
	*buf = p;
	*cap = n;
	return 0;
}

static void http_sock_close(struct bench_http *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* The handshake on a connected c->fd, verifying the certificate for c->host (an address). */
static int http_tls_connect(struct bench_http *c)
{
	c->ssl = SSL_new(tls_ctx);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1 ||
	    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), c->host) != 1 ||
	    SSL_connect(c->ssl) != 1) {
		unsigned long e = ERR_get_error();

		fprintf(stderr, "bench: TLS handshake with %s:%u: %s\n", c->host, (unsigned)c->port,
			e ? ERR_error_string(e, NULL) : "failed");
		ERR_clear_error();
		http_sock_close(c);
		return -1;
	}
	return 0;
}

static int http_sock_connect(struct bench_http *c)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	struct timeval tv = {.tv_sec = 10};
	socklen_t len;
	int one = 1;

	if (c->sun.sun_path[0]) {
		memcpy(&ss, &c->sun, sizeof c->sun);
		len = sizeof c->sun;
	} else if (inet_pton(AF_INET, c->host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(c->port);
		len = sizeof *a4;
	} else if (inet_pton(AF_INET6, c->host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(c->port);
		len = sizeof *a6;
	} else {
		return -1;
	}
	c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	if (ss.ss_family != AF_UNIX)
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(c->fd, (struct sockaddr *)&ss, len) != 0) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	if (bench_green_register(c->fd) != 0) { /* inside an event-loop worker (green.c) */
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	c->reused = false;
	c->rlen = 0;
	return tls_ctx ? http_tls_connect(c) : 0;
}

struct bench_http *bench_http_open(const char *host, uint16_t port)
{
	struct bench_http *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	snprintf(c->host, sizeof c->host, "%s", host);
	c->port = port;
	if (http_sock_connect(c) != 0) {
		free(c);
		return NULL;
	}
	return c;
}

struct bench_http *bench_http_open_unix(const char *path)
{
	struct bench_http *c;

	if (tls_ctx) {
		fprintf(stderr, "bench: no TLS over a unix socket (%s)\n", path);
		return NULL;
	}
	c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	if (!path[0] || strlen(path) >= sizeof c->sun.sun_path) {
		fprintf(stderr, "bench: unix socket path empty or longer than %zu bytes: %s\n",
			sizeof c->sun.sun_path - 1, path);
		free(c);
		return NULL;
	}
	c->sun.sun_family = AF_UNIX;
	memcpy(c->sun.sun_path, path, strlen(path) + 1);
	if (http_sock_connect(c) != 0) {
		free(c);
		return NULL;
	}
	return c;
}

void bench_http_close(struct bench_http *c)
{
	if (!c)
		return;
	http_sock_close(c);
	free(c->w);
	free(c->r);
	free(c->body);
	free(c);
}

/* Inside an event-loop worker (green.c, never over TLS) the socket calls do not block: a call
 * that would parks the worker until its socket has an event, at most the 10 s the socket
 * timeouts give a blocking thread. */
#define HTTP_GREEN_WAIT_MS 10000

static int http_send_all(struct bench_http *c, const char *p, size_t n)
{
	int flags = MSG_NOSIGNAL | (bench_green_on() ? MSG_DONTWAIT : 0);

	while (n) {
		ssize_t k = c->ssl ? SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n)
				   : send(c->fd, p, n, flags);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN && (flags & MSG_DONTWAIT)) {
			/* a full send buffer: EPOLLOUT wanted until there is room (green.c) */
			if (bench_green_want_write(c->fd, true) != 0 ||
			    bench_green_wait(HTTP_GREEN_WAIT_MS) != 0 ||
			    bench_green_want_write(c->fd, false) != 0)
				return -1;
			continue;
		}
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Reads more bytes into c->r; returns the count, 0 at EOF, -1 on error. */
static ssize_t http_fill(struct bench_http *c)
{
	int flags = bench_green_on() ? MSG_DONTWAIT : 0;
	ssize_t k;

	if (grow(&c->r, &c->rcap, c->rlen + 16384 + 1) != 0)
		return -1;
	/* A recv that could only say EAGAIN is a syscall saved: no event of this socket can
	 * have been taken by the loop between the send and this wait (the loop runs no other
	 * worker in between), so the answer's arrival wakes it. */
	if (flags && c->sent && bench_green_wait(HTTP_GREEN_WAIT_MS) != 0)
		return -1;
	c->sent = false;
	for (;;) {
		k = c->ssl ? SSL_read(c->ssl, c->r + c->rlen, (int)(c->rcap - c->rlen - 1))
			   : recv(c->fd, c->r + c->rlen, c->rcap - c->rlen - 1, flags);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN && flags && bench_green_wait(HTTP_GREEN_WAIT_MS) == 0)
			continue;
		break;
	}
	if (k > 0) {
		c->rlen += (size_t)k;
		c->r[c->rlen] = '\0';
	}
	return k;
}

const char *bench_http_header_find(const char *h, const char *end, const char *name,
				   size_t *vlen)
{
	size_t nl = strlen(name);

	while (h < end) {
		const char *eol = memchr(h, '\n', (size_t)(end - h));

		if (!eol)
			eol = end;
		if ((size_t)(eol - h) > nl && h[nl] == ':' && strncasecmp(h, name, nl) == 0) {
			const char *v = h + nl + 1, *ve = eol;

			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
				ve--;
			*vlen = (size_t)(ve - v);
			return v;
		}
		h = eol + 1;
	}
	return NULL;
}

/* Decodes a chunked body that starts at c->r + off, reading more as needed, into c->body.
 * Returns the body length, or -1. */
static ssize_t http_chunked_read(struct bench_http *c, size_t off)
{
	size_t blen = 0;

	for (;;) {
		char *eol, *end;
		unsigned long n;

		while (!(eol = strstr(c->r + off, "\r\n")))
			if (http_fill(c) <= 0)
				return -1;
		n = strtoul(c->r + off, &end, 16);
		if (end == c->r + off)
			return -1;
		off = (size_t)(eol - c->r) + 2;
		if (n == 0) {
			/* Trailers (none expected) end with an empty line. */
			while (!strstr(c->r + off, "\r\n"))
				if (http_fill(c) <= 0)
					return -1;
			off = (size_t)(strstr(c->r + off, "\r\n") - c->r) + 2;
			break;
		}
		while (c->rlen < off + n + 2)
			if (http_fill(c) <= 0)
				return -1;
		if (grow(&c->body, &c->bcap, blen + n + 1) != 0)
			return -1;
		memcpy(c->body + blen, c->r + off, n);
		blen += n;
		off += n + 2;
	}
	/* Keep any bytes past this answer (none without pipelining). */
	memmove(c->r, c->r + off, c->rlen - off);
	c->rlen -= off;
	return (ssize_t)blen;
}

/* Reads one answer. Returns 0, or -1 (and *got_any tells whether any byte arrived). */
static int http_answer_read(struct bench_http *c, int *status, bool *got_any, bool *close_after)
{
	char *hend, *v;
	const char *cl, *te, *conn;
	size_t hlen, vlen, blen;
	ssize_t k;

	*got_any = c->rlen > 0;
	if (grow(&c->r, &c->rcap, c->rlen + 1) != 0)
		return -1;
	c->r[c->rlen] = '\0';
	while (!(hend = strstr(c->r, "\r\n\r\n"))) {
		k = http_fill(c);
		if (k <= 0)
			return -1;
		*got_any = true;
	}
	hlen = (size_t)(hend - c->r) + 4;
	if (strncmp(c->r, "HTTP/1.", 7) != 0 || !(v = strchr(c->r, ' ')))
		return -1;
	*status = atoi(v + 1);
	conn = bench_http_header_find(c->r, hend, "Connection", &vlen);
	*close_after = conn && vlen == 5 && strncasecmp(conn, "close", 5) == 0;
	te = bench_http_header_find(c->r, hend, "Transfer-Encoding", &vlen);
	cl = bench_http_header_find(c->r, hend, "Content-Length", &vlen);
	if (te && vlen >= 7 && strncasecmp(te, "chunked", 7) == 0) {
		k = http_chunked_read(c, hlen);
		if (k < 0)
			return -1;
		c->body[k] = '\0';
		return 0;
	}
	if (*status == 204 || *status == 304 || (*status >= 100 && *status < 200)) {
		blen = 0; /* no body, whatever the headers say (RFC 9112 6.3) */
	} else if (cl) {
		blen = strtoul(cl, NULL, 10);
		while (c->rlen < hlen + blen)
			if (http_fill(c) <= 0)
				return -1;
	} else {
		/* Close-delimited body. */
		while ((k = http_fill(c)) > 0)
			;
		if (k < 0)
			return -1;
		blen = c->rlen - hlen;
		*close_after = true;
	}
	if (grow(&c->body, &c->bcap, blen + 1) != 0)
		return -1;
	memcpy(c->body, c->r + hlen, blen);
	c->body[blen] = '\0';
	memmove(c->r, c->r + hlen + blen, c->rlen - hlen - blen);
	c->rlen -= hlen + blen;
	return 0;
}

static char *put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define PUT_LIT(p, lit) put(p, lit, sizeof(lit) - 1)

int bench_http_request(struct bench_http *c, const char *method, const char *path,
		       const char *headers, const char *body, int *status, const char **resp)
{
	size_t blen = body ? strlen(body) : 0, mlen = strlen(method), plen = strlen(path), bl;
	size_t hlen = headers ? strlen(headers) : 0, need;
	bool got_any, close_after = false;
	char num[48], *p;
	int attempt, k;
	size_t n;

	*status = 0;
	*resp = "";
	need = mlen + plen + hlen + blen + 256;
	if (grow(&c->w, &c->wcap, need) != 0)
		return -1;
	/* The request as "%s %s HTTP/1.1\r\nHost: %s\r\n%s" (host:port, or localhost) then,
	 * with a body, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", else "\r\n";
	 * assembled without snprintf (it was a tenth of the client's user-space CPU). */
	p = put(c->w, method, mlen);
	*p++ = ' ';
	p = put(p, path, plen);
	p = PUT_LIT(p, " HTTP/1.1\r\nHost: ");
	if (!c->hostport_len) { /* once: the host never changes */
		k = c->sun.sun_path[0]
			    ? snprintf(c->hostport, sizeof c->hostport, "localhost")
			    : snprintf(c->hostport, sizeof c->hostport, "%s:%u", c->host,
				       (unsigned)c->port);
		if (k < 0 || (size_t)k >= sizeof c->hostport)
			return -1;
		c->hostport_len = (size_t)k;
	}
	p = put(p, c->hostport, c->hostport_len);
	p = PUT_LIT(p, "\r\n");
	p = put(p, headers ? headers : "", hlen);
	if (body) {
		p = PUT_LIT(p, "Content-Type: application/json\r\nContent-Length: ");
		k = sizeof num;
		bl = blen;
		do
			num[--k] = (char)('0' + bl % 10);
		while ((bl /= 10) && k > 0);
		p = put(p, num + k, sizeof num - (size_t)k);
		p = PUT_LIT(p, "\r\n\r\n");
		p = put(p, body, blen);
	} else {
		p = PUT_LIT(p, "\r\n");
	}
	n = (size_t)(p - c->w);
	for (attempt = 0; attempt < 2; attempt++) {
		bool reused = c->reused;

		if (c->fd < 0 && http_sock_connect(c) != 0)
			return -1;
		if (http_send_all(c, c->w, n) == 0 && (c->sent = true) &&
		    http_answer_read(c, status, &got_any, &close_after) == 0) {
			c->reused = true;
			*resp = c->body;
			if (close_after)
				http_sock_close(c);
			return 0;
		}
		http_sock_close(c);
		*status = 0;
		/* Only a kept-alive socket the server closed before answering is retried. */
		if (!reused || got_any)
			return -1;
	}
	return -1;
}
