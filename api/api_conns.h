/* The daemon's connections and what it keeps about them: the access log and per-answer
 * accounting (access_log.c), the open connections and the headers deadline (conns.c),
 * listening (listen.c), HTTPS (tls.c) and the api's samples for /metrics (metrics.c,
 * attention.c's lane gauge). */
#ifndef BOARDD_API_API_CONNS_H
#define BOARDD_API_API_CONNS_H

#include "api/api_daemon.h"
#include "api/api_req.h"
#include "metrics/metrics.h"

#include <gnutls/abstract.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* ---- access_log.c: the access log and the per-answer accounting ---- */
/* The text access-log line into line (API_LOG_LINE_MAX bytes), exactly as
 * snprintf("%s %s %.200s %u %.1fms%s%s%s%s", ts, method, path, status, ns / 1e6,
 * tok ? " " : "", tok ? tok : "", by[0] ? " answered-by=" : "", by) would write it
 * (access_log.c);
 * returns its length. method is at most 39 bytes (escaped). */
#define API_LOG_LINE_MAX 1024
size_t api_log_text(char *line, const char *ts, const char *method, const char *path,
		    unsigned status, int64_t ns, const char *tok, const char *by);
/* s copied into out (cap bytes, cap > 5) for a log line: valid UTF-8 stays; a control byte,
 * DEL, a backslash, a double quote and a byte that is not valid UTF-8 become \xHH. Cut at
 * cap, never inside an escape or a character. */
void api_log_escape(const char *s, char *out, size_t cap);
/* The writer thread (unless cfg.log takes the lines); stop writes what is queued. */
void api_log_start(struct api *a);
void api_log_stop(struct api *a);
/* One line (without its newline) into the log. */
void api_log_emit(struct api *a, const char *line);
/* Counts r's answer in the metrics and writes its log line, once (now_ns: monotonic). */
void api_req_account_at(struct api *a, struct api_req *r, int64_t now_ns);
void api_req_account(struct api *a, struct api_req *r);

/* ---- conns.c: the open connections and the headers deadline ---- */
/* The connection's state (NULL when its socket context is gone). */
static inline struct api_conn *api_conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}
/* A request's headers arrived (in_request) or its answer ended (now_ms, monotonic: the
 * connection's idle time starts then). */
void api_conn_mark(struct api *a, struct MHD_Connection *conn, bool in_request,
		   int64_t now_ms);
/* The request line arrived (at now_ms, monotonic): its headers' deadline runs from then. */
void api_conn_line(struct api *a, struct MHD_Connection *conn, int64_t now_ms);
/* One connection the acceptor handed over is no longer pending (started, or refused by
 * libmicrohttpd as handed). */
void api_conn_unpend(struct api *a);
/* MHD_OPTION_NOTIFY_CONNECTION: tracks a connection from its start to its close. */
void api_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		     enum MHD_ConnectionNotificationCode toe);
/* The sweeper thread (inits conns.mu and conns.cv); stop after the daemon stopped. */
bool api_sweeper_start(struct api *a);
void api_sweeper_stop(struct api *a);

/* ---- listen.c ---- */
/* Parses spec ("HOST:PORT", "[V6]:PORT", ":PORT" or "unix:PATH"). For unix:PATH also binds
 * and listens on the socket file (see listen.c for its rules: too long, not a socket, live,
 * stale), so l->fd is a listening socket the caller hands over or releases. On failure l
 * holds nothing and err says why (BAD_REQUEST: the spec; ALREADY_EXISTS: a file or a live
 * server is in the way; STORE_UNAVAILABLE: a system call failed). */
enum core_rc api_listen_open(const char *spec, struct api_listen *l, char *err, size_t errlen);
/* Whether spec is a listen address api_listen_open can take (its syntax, the host resolved, a
 * Unix path's length), without opening anything; err says why not. */
bool api_listen_valid(const char *spec, char *err, size_t errlen);
/* Closes l->fd unless it is -1 (set it to -1 once libmicrohttpd owns it), removes the socket
 * file if it is still the one bound, frees l's contents. */
void api_listen_release(struct api_listen *l);
/* The TCP listen socket for ss (libmicrohttpd's own settings: SO_REUSEADDR, IPv6 only on a v6
 * address, the system's backlog), non-blocking as a socket file's; -1 with errno set. */
int api_listen_tcp(const struct sockaddr_storage *ss, socklen_t len, bool v6);
/* MHD's accept policy: refuses every connection once a->draining. */
enum MHD_Result api_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* The acceptor thread on a->where.fd (0 or an errno); stop joins it (the socket itself is
 * closed by api_listen_release). */
int api_acceptor_start(struct api *a);
void api_acceptor_stop(struct api *a);

/* ---- tls.c: HTTPS with a certificate re-read on SIGHUP ---- */
/* Loads cfg.tls_cert/tls_key when set (a->tls on success); err says what is wrong. */
enum core_rc api_tls_setup(struct api *a, char *err, size_t errlen);
void api_tls_release(struct api *a);
/* MHD_OPTION_HTTPS_PRIORITIES: TLS 1.2 and 1.3 only. */
const char *api_tls_priorities(void);
/* MHD_OPTION_HTTPS_CERT_CALLBACK2: the current pair, copied for each handshake. */
int api_tls_cert_callback(gnutls_session_t session, const struct gnutls_cert_retr_st *info,
			  gnutls_pcert_st **certs, unsigned int *certs_length,
			  gnutls_ocsp_data_st **ocsp, unsigned int *ocsp_length,
			  gnutls_privkey_t *privkey, unsigned int *flags);
/* The served certificate's expiry (METRICS_TLS_NOT_AFTER) when TLS is on. */
void api_tls_collect(const struct api *a, struct metrics_sink *s);

/* ---- metrics.c: the api's samples for /metrics ---- */
enum core_rc api_metrics_init(struct api *a);
void api_metrics_release(struct api *a);
/* A finished request: its latency by route template, method and status (lock-free). */
void api_metrics_request(struct api *a, const struct api_req *r, uint64_t ns);
/* attention.c: the lane's size by reason into a scrape (METRICS_ATTENTION). */
void api_attention_collect(struct api *a, struct metrics_sink *s);

#endif
