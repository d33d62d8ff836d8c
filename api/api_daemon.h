/* struct api: the daemon's state (api.c makes it, api_start/api_stop), with what it holds
 * per connection (struct api_conn, conns.c) and where it listens (struct api_listen,
 * listen.c). Included by the files that reach into a->... (a request's r->api). */
#ifndef BOARDD_API_API_DAEMON_H
#define BOARDD_API_API_DAEMON_H

#include "api/api.h"
#include "metrics/metrics.h"
#include "store/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct api_req;
struct api_next;   /* claimnext.c */
struct api_streams; /* stream.c */
struct MHD_Daemon;

/* Per TCP connection (MHD's socket context, conns.c): the last bearer token verified on it, so
 * a keep-alive client is not hashed again on every request (auth.c), and what the headers
 * deadline needs (conns.c's sweeper; fields below `conns` are under api->conns.mu). */
#define API_TOKEN_CACHE_MAX 128
struct api_conn {
	char plain[API_TOKEN_CACHE_MAX];
	size_t len;                  /* 0: nothing cached */
	const struct api_token *tok; /* what `plain` resolved to */
	unsigned tokens_gen;         /* api->tokens_gen when cached; another: stale */

	struct api_conn *prev, *next; /* api->conns */
	int fd;
	int64_t ready_ms;            /* monotonic: started, or answered its last request */
	int64_t line_ms;             /* monotonic: the current request's line arrived; 0: none */
	bool served;                 /* answered a request (then idle until ready_ms + idle) */
	bool in_request;             /* headers arrived; the request is being served */
	bool cut;                    /* the sweeper shut it down */
	struct api_req *spare;       /* owned: the last request's memory, for the next (api.c:
				      * keep-alive requests skip a 1.5 KiB calloc and free) */
};

#define API_ACKS_CLOSED (1u << 31)

/* Where the api listens (listen.c): a TCP address libmicrohttpd binds, or a Unix-domain socket
 * file bound here. */
struct api_listen {
	struct sockaddr_storage ss;  /* TCP: the address; len 0 for a socket file */
	socklen_t len;
	bool v6;
	int fd;                      /* bound and listening (TCP: once api_start bound it); -1 */
	char *path;                  /* unix: the socket file (owned); NULL for TCP */
	dev_t dev;                   /* unix: the file we bound, removed at stop only if it */
	ino_t ino;                   /* is still this one */
};

struct api {
	struct MHD_Daemon *daemon;
	struct store *st;
	const struct api_tokens *tokens;
	/* Tokens: replaced whole on SIGHUP (api_tokens_replace); requests load the pointer once.
	 * Every set handed over is kept in `owned` until api_stop. */
	const struct api_tokens *_Atomic tokens_now;
	atomic_uint tokens_gen;
	struct api_tokens **owned;
	size_t n_owned;
	pthread_mutex_t tokens_mu;   /* replacements */
	struct api_config cfg;
	char *listen;                /* owned copy of cfg.listen */
	struct api_listen where;     /* parsed cfg.listen; the socket file, when unix: */
	char *tls_cert, *tls_key;    /* owned copies of cfg.tls_cert / tls_key */
	uint16_t port;
	/* Stopping: every new connection is closed as it is accepted (api_on_accept, listen.c). */
	atomic_bool draining;
	/* The thread that accepts on where.fd and deals the connections out to libmicrohttpd's
	 * threads in turn (listen.c, acceptor_main). */
	struct {
		pthread_t th;
		int wake;      /* eventfd: acceptor_stop */
		unsigned next; /* the pool thread the next connection goes to (its thread only) */
		bool started;
		/* Handed to libmicrohttpd and not started yet (api_conn_notify): with the
		 * started ones (conns.n), what --max-connections is held against. */
		atomic_uint pending;
	} acceptor;

	/* metrics (metrics.c) */
	struct metrics *metrics;     /* cfg.metrics, or owned when metrics_owned */
	bool metrics_owned;
	bool tls;                    /* serving HTTPS (tls.c) */
	/* boardd_http_request_duration_seconds: one histogram per (route slot, method, code),
	 * allocated on its first request; route slots are the router table's rows, then
	 * "unmatched" */
	_Atomic(struct metrics_hist *) *http_series;
	size_t http_routes;
	atomic_ulong header_timeouts;   /* connections cut by the headers deadline */
	atomic_ulong library_answers;   /* requests libmicrohttpd answered itself */
	atomic_ulong connections_refused; /* over --max-connections or --max-connections-per-ip */
	/* Bytes of JSON answers built and not yet sent whole (a client that does not read keeps
	 * its answer here): cfg.max_answer_bytes bounds them (answer.c, answer_hold). */
	atomic_size_t answer_bytes;
	atomic_ulong answers_refused;   /* large reads refused 503 busy by that bound */
	_Atomic int64_t lib_log_last_ms; /* libmicrohttpd's other messages: one line per 5 s */

	/* open connections, for the headers deadline (conns.c's sweeper thread) */
	struct {
		pthread_mutex_t mu;
		pthread_cond_t cv;
		pthread_t th;
		struct api_conn *head;
		unsigned n;
		bool started, stop;
	} conns;

	/* the access log on stderr (access_log.c): lines queue in `buf`; a writer thread empties it
	 * with one write(2) per batch */
	struct {
		pthread_mutex_t mu;
		pthread_cond_t cv;   /* the writer's: a first line, or stop */
		pthread_cond_t idle; /* the writer finished a batch */
		pthread_t th;
		char *buf, *out; /* API_LOG_BUF bytes each: filling, being written */
		size_t len;
		bool started, busy, stop;
	} log;

	/* the agent-token signing key (agent.c), read from the store on first use */
	pthread_mutex_t agent_mu;
	bool agent_key_ok;
	unsigned char agent_key[STORE_SECRET_LEN];
	struct api_next *next;       /* claim-next's waiters and waker (claimnext.c) */

	/* long-polls in flight (helper threads) */
	pthread_mutex_t poll_mu;
	pthread_cond_t poll_cv;
	unsigned polls;
	atomic_uint acks;            /* requests bound to a store_ack, until answered or resumed,
				      * | API_ACKS_CLOSED once api_stop waits for them (answer.c) */
	bool stopping;

	struct api_streams *streams; /* GET /v1/events/stream (stream.c) */
};

#endif
