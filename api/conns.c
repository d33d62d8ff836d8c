/* The open connections (libmicrohttpd's socket contexts, struct api_conn): tracked from their
 * start to their close, marked as their requests begin and end, and cut by the sweeper
 * thread when a request's headers do not arrive in time or a keep-alive connection idles
 * past its timeout (the headers deadline). */
#include "api/api_conns.h"
#include "api/api_daemon.h"
#include "api/api_request.h"

#include <microhttpd.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

/* now_ms: monotonic, when !in_request (the connection's idle time starts then). */
void api_conn_mark(struct api *a, struct MHD_Connection *conn, bool in_request,
		      int64_t now_ms)
{
	struct api_conn *cc = api_conn_of(conn);

	if (!cc)
		return;
	pthread_mutex_lock(&a->conns.mu);
	cc->in_request = in_request;
	cc->line_ms = 0;
	if (!in_request) {
		cc->ready_ms = now_ms;
		cc->served = true;
	}
	pthread_mutex_unlock(&a->conns.mu);
}

/* The request line arrived (at now_ms, monotonic): its headers' deadline runs from then. */
void api_conn_line(struct api *a, struct MHD_Connection *conn, int64_t now_ms)
{
	struct api_conn *cc = api_conn_of(conn);

	if (!cc)
		return;
	pthread_mutex_lock(&a->conns.mu);
	cc->line_ms = now_ms;
	pthread_mutex_unlock(&a->conns.mu);
}

void api_conn_unpend(struct api *a)
{
	unsigned n = atomic_load(&a->acceptor.pending);

	/* never below 0 (a start the acceptor did not count: none today) */
	while (n > 0 && !atomic_compare_exchange_weak(&a->acceptor.pending, &n, n - 1))
		;
}

void api_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct api *a = cls;
	struct api_conn *cc = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		api_conn_unpend(a);
		cc = calloc(1, sizeof(struct api_conn)); /* NULL: no cache, no deadline */
		*socket_context = cc;
		if (!cc)
			return;
		cc->fd = ci ? ci->connect_fd : -1;
		cc->ready_ms = api_mono_ms();
		pthread_mutex_lock(&a->conns.mu);
		cc->next = a->conns.head;
		if (cc->next)
			cc->next->prev = cc;
		a->conns.head = cc;
		a->conns.n++;
		pthread_mutex_unlock(&a->conns.mu);
	} else if (cc) {
		/* Before libmicrohttpd closes the socket: the sweeper never sees a reused fd. */
		pthread_mutex_lock(&a->conns.mu);
		if (cc->prev)
			cc->prev->next = cc->next;
		else
			a->conns.head = cc->next;
		if (cc->next)
			cc->next->prev = cc->prev;
		a->conns.n--;
		pthread_mutex_unlock(&a->conns.mu);
		free(cc->spare);
		OPENSSL_cleanse(cc, sizeof(*cc)); /* the cached bearer token */
		free(cc);
		*socket_context = NULL;
	}
}

/* ---- the headers deadline ----
 *
 * libmicrohttpd's idle timeout restarts on every byte, so a client sending one header line
 * every few seconds holds a connection for ever (slowloris), and a thousand of them hold
 * every slot. Shut down here (libmicrohttpd then sees the end of the stream and closes it):
 * a request whose headers are not whole header_timeout_ms after its request line, a new
 * connection without a whole request that long after its start, and a keep-alive
 * connection idle (or sending a request line) for the idle timeout. */
static void *sweeper_main(void *arg)
{
	struct api *a = arg;
	int64_t limit = (int64_t)a->cfg.header_timeout_ms;
	int64_t idle = (int64_t)a->cfg.conn_timeout_s * 1000;
	struct timespec until;

	pthread_mutex_lock(&a->conns.mu);
	while (!a->conns.stop) {
		int64_t now = api_mono_ms();
		struct api_conn *cc;

		for (cc = a->conns.head; cc; cc = cc->next) {
			int64_t since = cc->line_ms ? cc->line_ms : cc->ready_ms;
			int64_t allowed = cc->line_ms || !cc->served ? limit : idle;

			if (cc->in_request || cc->cut || cc->fd < 0 || now - since < allowed)
				continue;
			cc->cut = true;
			shutdown(cc->fd, SHUT_RDWR);
			atomic_fetch_add(&a->header_timeouts, 1);
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		/* the deadline is kept to within a quarter second */
		core_timespec_add_ns(&until, (int64_t)250 * 1000000);
		pthread_cond_timedwait(&a->conns.cv, &a->conns.mu, &until);
	}
	pthread_mutex_unlock(&a->conns.mu);
	return NULL;
}

bool api_sweeper_start(struct api *a)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&a->conns.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->conns.cv, &ca);
	pthread_condattr_destroy(&ca);
	a->conns.started = pthread_create(&a->conns.th, NULL, sweeper_main, a) == 0;
	return a->conns.started;
}

/* After the daemon stopped (every connection closed). */
void api_sweeper_stop(struct api *a)
{
	if (a->conns.started) {
		pthread_mutex_lock(&a->conns.mu);
		a->conns.stop = true;
		pthread_cond_signal(&a->conns.cv);
		pthread_mutex_unlock(&a->conns.mu);
		pthread_join(a->conns.th, NULL);
	}
	pthread_cond_destroy(&a->conns.cv);
	pthread_mutex_destroy(&a->conns.mu);
}
