/* Where the api listens: a TCP address (libmicrohttpd binds it) or a Unix-domain stream socket
 * file (bound here and handed to libmicrohttpd with MHD_OPTION_LISTEN_SOCKET).
 *
 * A socket file follows what users expect of a daemon: a path that does not fit sun_path is
 * refused; an existing file that is not a socket is never removed; a socket some server still
 * accepts on is left alone (start refused); a stale one (connect refused) is replaced. The
 * file is made 0660 before listen(2), so nobody connects while it has the umask's mode; it is
 * removed at a clean stop only while it is still the one we bound (same device and inode). */
#include "api/api_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
