/* httpc — a tiny blocking HTTP/1.1 client for the tests and the benchmark.
 *
 * One struct httpc is one keep-alive TCP connection to 127.0.0.1 (or any IPv4/IPv6 host), or
 * to a Unix socket file;
 * when the server closes it, the next request reconnects. Request bodies are sent with
 * Content-Length; responses may use Content-Length, chunked encoding or close-delimited
 * bodies. Not thread-safe: use one connection per thread. */
#ifndef BOARDD_TESTS_HTTPC_H
#define BOARDD_TESTS_HTTPC_H

#include <stddef.h>
#include <stdint.h>

struct httpc;

/* Connects; NULL on failure. Caller frees with httpc_close. */
struct httpc *httpc_connect(const char *host, uint16_t port);
/* Same over the Unix socket file at path (Host: localhost). */
struct httpc *httpc_connect_unix(const char *path);
void httpc_close(struct httpc *c);
/* How many connections c has opened: 1 while the first one is kept alive. */
unsigned httpc_dials(const struct httpc *c);

/* Sends one request and reads the answer.
 * headers: NULL or a NULL-terminated list of "Name: value" lines (no CRLF).
 * body: NULL or a NUL-terminated body (sent with Content-Length).
 * OUT: *status, and when non-NULL *resp_headers (the raw header block, "Name: value\r\n"
 * lines) and *resp_body (NUL-terminated), both malloc'd: caller frees.
 * Returns 0, or -1 on a transport error (OUT params then NULL / 0). */
int httpc_request(struct httpc *c, const char *method, const char *path,
		  const char *const *headers, const char *body, int *status, char **resp_headers,
		  char **resp_body);
/* Same with a body of body_len bytes (may contain NULs). */
int httpc_request_len(struct httpc *c, const char *method, const char *path,
		      const char *const *headers, const char *body, size_t body_len, int *status,
		      char **resp_headers, char **resp_body);
/* Sends raw bytes as they are (hand-made requests: lying lengths, chunked bodies, garbage)
 * and reads one answer like httpc_request. */
int httpc_raw(struct httpc *c, const char *bytes, size_t len, int *status, char **resp_headers,
	      char **resp_body);

/* The value of header `name` (case-insensitive) in a header block; malloc'd, NULL if absent. */
char *httpc_header(const char *resp_headers, const char *name);

#endif
