/* Where the api listens and how connections come in: a TCP address (api_listen_tcp binds it
 * when the daemon starts) or a Unix-domain stream socket file (bound by api_listen_open);
 * either way the acceptor thread below accepts on it and deals each connection out to
 * libmicrohttpd's threads in turn (MHD_add_connection), and api_on_accept closes the new ones
 * once the server is stopping.
 *
 * A socket file follows what users expect of a daemon: a path that does not fit sun_path is
 * refused; an existing file that is not a socket is never removed; a socket some server still
 * accepts on is left alone (start refused); a stale one (connect refused) is replaced. The
 * file is made 0660 before listen(2), so nobody connects while it has the umask's mode; it is
 * removed at a clean stop only while it is still the one we bound (same device and inode). */
#include "api/api_conns.h"
#include "api/api_daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define UNIX_PREFIX "unix:"
#define UNIX_MODE 0660
#define UNIX_BACKLOG 4096 /* the kernel caps it at net.core.somaxconn */

/* "host:port", "[v6]:port", ":port" -> sockaddr. */
static bool tcp_parse(const char *spec, struct api_listen *l, char *err, size_t errlen)
{
	char host[256];
	const char *colon, *port;
	struct addrinfo hints = {0}, *res = NULL;
	char *end;
	long p;
	int e;

	if (!spec || !*spec)
		goto bad;
	if (spec[0] == '[') {
		const char *rb = strchr(spec, ']');

		if (!rb || rb[1] != ':' || (size_t)(rb - spec - 1) >= sizeof host)
			goto bad;
		memcpy(host, spec + 1, (size_t)(rb - spec - 1));
		host[rb - spec - 1] = '\0';
		port = rb + 2;
	} else {
		colon = strrchr(spec, ':');
		if (!colon || (size_t)(colon - spec) >= sizeof host)
			goto bad;
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
		port = colon + 1;
	}
	errno = 0;
	p = strtol(port, &end, 10);
	if (!*port || *end || errno || p < 0 || p > 65535)
		goto bad;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	e = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (e != 0 || !res) {
		snprintf(err, errlen, "listen address %s: %s", spec, gai_strerror(e));
		if (res)
			freeaddrinfo(res);
		return false;
	}
	memcpy(&l->ss, res->ai_addr, res->ai_addrlen);
	l->len = res->ai_addrlen;
	l->v6 = res->ai_family == AF_INET6;
	freeaddrinfo(res);
	return true;
bad:
	snprintf(err, errlen,
		 "listen address \"%s\": expected HOST:PORT, [V6]:PORT, :PORT or unix:PATH",
		 spec ? spec : "");
	return false;
}

/* An existing socket file: is a server accepting on it? A refused connect means stale. A full
 * backlog (EAGAIN on a non-blocking connect) is a live server too. OUT: *live. False when it
 * cannot be told (err says why). */
static bool unix_probe(const struct sockaddr_un *sun, bool *live, char *err, size_t errlen)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int rc, e;

	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return false;
	}
	rc = connect(fd, (const struct sockaddr *)sun, sizeof *sun);
	e = errno;
	close(fd);
	if (rc == 0 || e == EAGAIN || e == EINPROGRESS) {
		*live = true;
		return true;
	}
	if (e == ECONNREFUSED || e == ENOENT) {
		*live = false;
		return true;
	}
	snprintf(err, errlen, "cannot tell whether a server listens on unix:%s: %s", sun->sun_path,
		 strerror(e));
	return false;
}

static enum core_rc unix_open(const char *path, struct api_listen *l, char *err, size_t errlen)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	size_t n = strlen(path);
	struct stat sb;
	bool live = false;
	int fd = -1;

	if (n == 0) {
		snprintf(err, errlen, "listen address \"unix:\": the socket file's path is missing");
		return CORE_ERR_BAD_REQUEST;
	}
	if (n >= sizeof sun.sun_path) {
		snprintf(err, errlen,
			 "listen address unix:%s: the path is %zu bytes, a Unix socket's is at most "
			 "%zu (sun_path); choose a shorter path",
			 path, n, sizeof sun.sun_path - 1);
		return CORE_ERR_BAD_REQUEST;
	}
	memcpy(sun.sun_path, path, n + 1);
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode)) {
			snprintf(err, errlen,
				 "cannot listen on unix:%s: the path exists and is not a socket "
				 "(left as it is)",
				 path);
			return CORE_ERR_ALREADY_EXISTS;
		}
		if (!unix_probe(&sun, &live, err, errlen))
			return CORE_ERR_STORE_UNAVAILABLE;
		if (live) {
			snprintf(err, errlen,
				 "cannot listen on unix:%s: another server listens on it", path);
			return CORE_ERR_ALREADY_EXISTS;
		}
		/* stale: no one accepts on it any more */
		if (unlink(path) != 0 && errno != ENOENT) {
			snprintf(err, errlen, "cannot replace the stale socket unix:%s: %s", path,
				 strerror(errno));
			return CORE_ERR_STORE_UNAVAILABLE;
		}
	} else if (errno != ENOENT) {
		snprintf(err, errlen, "cannot listen on unix:%s: %s", path, strerror(errno));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot listen on unix:%s: socket: %s", path, strerror(errno));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	if (bind(fd, (const struct sockaddr *)&sun, sizeof sun) != 0) {
		int e = errno;

		snprintf(err, errlen, "cannot listen on unix:%s: %s", path, strerror(e));
		close(fd);
		return e == EADDRINUSE ? CORE_ERR_ALREADY_EXISTS : CORE_ERR_STORE_UNAVAILABLE;
	}
	/* Ours from here on: a failure below removes it. Not connectable before listen(). */
	l->path = strdup(path);
	if (!l->path || stat(path, &sb) != 0 || chmod(path, UNIX_MODE) != 0 ||
	    listen(fd, UNIX_BACKLOG) != 0) {
		snprintf(err, errlen, "cannot listen on unix:%s: %s", path,
			 l->path ? strerror(errno) : "out of memory");
		free(l->path);
		l->path = NULL;
		unlink(path);
		close(fd);
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	l->dev = sb.st_dev;
	l->ino = sb.st_ino;
	l->fd = fd;
	return CORE_OK;
}

bool api_listen_valid(const char *spec, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct api_listen l = {0};

	if (spec && strncmp(spec, UNIX_PREFIX, strlen(UNIX_PREFIX)) == 0) {
		size_t n = strlen(spec + strlen(UNIX_PREFIX));

		if (n == 0)
			snprintf(err, errlen, "listen address \"unix:\": the socket file's path is "
					      "missing");
		else if (n >= sizeof sun.sun_path)
			snprintf(err, errlen,
				 "listen address %s: the path is %zu bytes, a Unix socket's is at "
				 "most %zu (sun_path); choose a shorter path",
				 spec, n, sizeof sun.sun_path - 1);
		return n > 0 && n < sizeof sun.sun_path;
	}
	return tcp_parse(spec, &l, err, errlen);
}

enum core_rc api_listen_open(const char *spec, struct api_listen *l, char *err, size_t errlen)
{
	memset(l, 0, sizeof *l);
	l->fd = -1;
	if (spec && strncmp(spec, UNIX_PREFIX, strlen(UNIX_PREFIX)) == 0)
		return unix_open(spec + strlen(UNIX_PREFIX), l, err, errlen);
	return tcp_parse(spec, l, err, errlen) ? CORE_OK : CORE_ERR_BAD_REQUEST;
}

void api_listen_release(struct api_listen *l)
{
	struct stat sb;

	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	if (l->path && stat(l->path, &sb) == 0 && S_ISSOCK(sb.st_mode) && sb.st_dev == l->dev &&
	    sb.st_ino == l->ino)
		unlink(l->path); /* still ours: another server's socket at that path stays */
	free(l->path);
	l->path = NULL;
}

/* libmicrohttpd's accept policy, on the thread that hands it the connection: once stopping, a
 * new connection is closed at once (the client sees it closed before a byte was read, and
 * retries elsewhere).
 *
 * This is how boardd stops taking connections, not MHD_quiesce_daemon: in libmicrohttpd
 * 0.9.75 (and its later releases), quiescing an epoll daemon removes the listen socket from
 * each thread's epoll set from the caller's thread while those threads may be removing it
 * themselves (they read was_quiesced unlocked); the loser's epoll_ctl fails with ENOENT and
 * the library aborts ("Failed to remove listen FD from epoll set", daemon.c:4976 or :5531;
 * tests/api/test_api_quiesce.c hits it within a few rounds under TSan). The acceptor below
 * checks the same flag before it hands a connection over. */
enum MHD_Result api_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	const struct api *a = cls;

	(void)addr;
	(void)addrlen;
	return atomic_load_explicit(&a->draining, memory_order_relaxed) ? MHD_NO : MHD_YES;
}

/* ---- accepting: one thread deals the connections out to libmicrohttpd's threads ----
 *
 * With the listen socket its own, every thread of libmicrohttpd's pool polls it, and the one
 * that wakes first accepts up to ten connections in a row, then goes back for more: a client
 * that opens its connections in a burst (any pooled client) gets all of them on one thread.
 * Measured with the claim cycle (bench/loadgen, 32 keep-alive connections, 2 threads): in 3
 * of 5 runs one thread served all 32 and the other none (bench/README.md, stop 20: side by
 * side with another server, dealt evenly gets 12 % more cycles). So the socket is boardd's:
 * this thread accepts and gives each connection to MHD_add_connection, which puts it on pool
 * thread (descriptor mod pool size) (daemon.c, internal_add_connection, since 0.9.x); the
 * descriptor is moved to the number that selects the next thread in turn. Were a release to
 * choose differently, the connections would still be served, only not dealt evenly. */

/* fd, or a duplicate of it whose number is `want` modulo n (fd is then closed); fd itself
 * when no such duplicate can be had. */
static int fd_for_thread(int fd, unsigned n, unsigned want)
{
	int from, dup;

	if (n < 2 || (unsigned)fd % n == want)
		return fd;
	from = fd + (int)((want + n - (unsigned)fd % n) % n); /* the next number of the class */
	for (;;) {
		dup = fcntl(fd, F_DUPFD_CLOEXEC, from);
		if (dup < 0)
			return fd; /* out of descriptors: served where it lands */
		if ((unsigned)dup % n == want) {
			close(fd);
			return dup;
		}
		close(dup); /* `from` was taken: the class's next number after the free one */
		from = dup + (int)((want + n - (unsigned)dup % n) % n);
	}
}

/* Whether the connections started and those handed over but not started yet reach
 * --max-connections. */
static bool over_limit(struct api *a)
{
	unsigned n;

	pthread_mutex_lock(&a->conns.mu);
	n = a->conns.n;
	pthread_mutex_unlock(&a->conns.mu);
	return n + atomic_load(&a->acceptor.pending) >= a->cfg.max_connections;
}

static void *acceptor_main(void *arg)
{
	struct api *a = arg;
	struct pollfd pf[2] = {{.fd = a->where.fd, .events = POLLIN},
			       {.fd = a->acceptor.wake, .events = POLLIN}};
	struct sockaddr_storage peer;
	socklen_t len;
	int fd;

	for (;;) {
		len = sizeof peer;
		fd = accept4(a->where.fd, (struct sockaddr *)&peer, &len,
			     SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (poll(pf, 2, -1) < 0 && errno != EINTR)
					usleep(10000);
				if (pf[1].revents)
					break; /* api_acceptor_stop */
			} else if (errno != EINTR && errno != ECONNABORTED) {
				usleep(10000); /* EMFILE, ENOBUFS, ...: the backlog waits meanwhile */
			}
			continue;
		}
		if (atomic_load_explicit(&a->draining, memory_order_relaxed)) {
			close(fd);
			continue;
		}
		/* --max-connections is held here, not by libmicrohttpd: in 0.9.75 a connection
		 * its worker finds over the limit leaves that worker's cleanup mutex locked (it
		 * hangs for good, and so does the stop; a burst of connections past the limit
		 * does it within a few tries). Its limit is set where it cannot be reached
		 * (api.c, daemon_start) and the ones over ours are closed as accepted. */
		if (over_limit(a)) {
			close(fd);
			atomic_fetch_add(&a->connections_refused, 1);
			continue;
		}
		fd = fd_for_thread(fd, a->cfg.threads, a->acceptor.next);
		a->acceptor.next = (a->acceptor.next + 1) % a->cfg.threads;
		atomic_fetch_add(&a->acceptor.pending, 1);
		/* MHD owns fd from here on, also when it refuses it (the per-address limit: it
		 * closes it, and no start is notified). */
		if (MHD_add_connection(a->daemon, fd, (const struct sockaddr *)&peer, len) != MHD_YES)
			api_conn_unpend(a);
	}
	return NULL;
}

/* The TCP listen socket for ss (libmicrohttpd's own settings: SO_REUSEADDR, IPv6 only on a v6
 * address, the system's backlog), non-blocking as a socket file's; -1 with errno set. */
int api_listen_tcp(const struct sockaddr_storage *ss, socklen_t len, bool v6)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), on = 1;
	int err;

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
	    (v6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0) ||
	    bind(fd, (const struct sockaddr *)ss, len) != 0 || listen(fd, SOMAXCONN) != 0) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/* Starts the thread on a->where.fd (non-blocking); 0 or an errno. */
int api_acceptor_start(struct api *a)
{
	int e;

	a->acceptor.wake = eventfd(0, EFD_CLOEXEC);
	if (a->acceptor.wake < 0)
		return errno;
	if ((e = pthread_create(&a->acceptor.th, NULL, acceptor_main, a)) != 0) {
		close(a->acceptor.wake);
		a->acceptor.wake = -1;
		return e;
	}
	a->acceptor.started = true;
	return 0;
}

/* Stops accepting (the socket itself is closed by api_listen_release). */
void api_acceptor_stop(struct api *a)
{
	uint64_t one = 1;

	if (!a->acceptor.started)
		return;
	while (write(a->acceptor.wake, &one, sizeof one) < 0 && errno == EINTR)
		;
	pthread_join(a->acceptor.th, NULL);
	close(a->acceptor.wake);
	a->acceptor.wake = -1;
	a->acceptor.started = false;
}
