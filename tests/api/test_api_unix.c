/* --listen unix:PATH: the api over a Unix-domain socket file (api/listen.c), and the socket
 * file's rules: too long, not a socket (left alone), a live server's (refused), a stale one
 * (replaced), mode 0660, removed at a clean stop only while it is still ours. */
#include "tests/api/api_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void quiet_log(void *ctx, const char *line)
{
	(void)ctx;
	(void)line;
}

/* A second api on the harness's store and tokens, listening on spec; per_ip: its
 * --max-connections-per-ip (0: the default). */
static enum core_rc second_start_ip(const char *spec, unsigned per_ip, struct api **out,
				    char *err, size_t errlen)
{
	struct api_config cfg;

	api_config_init(&cfg);
	cfg.max_connections_per_ip = per_ip;
	cfg.listen = spec;
	cfg.threads = 1;
	cfg.tokens = &T.tokens;
	cfg.log = quiet_log;
	cfg.shutdown_grace_ms = 200;
	return api_start(&cfg, T.st, out, err, errlen);
}

static enum core_rc second_start(const char *spec, struct api **out, char *err, size_t errlen)
{
	return second_start_ip(spec, 0, out, err, errlen);
}

static void file_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static bool file_has(const char *path, const char *text)
{
	char buf[256] = {0};
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	return n == strlen(text) && memcmp(buf, text, n) == 0;
}

/* GET /healthz on a new connection to the socket file; the status, 0 when none. */
static int healthz_over(const char *path)
{
	struct httpc *c = httpc_connect_unix(path);
	int st = 0;

	if (!c)
		return 0;
	if (httpc_request(c, "GET", "/healthz", NULL, NULL, &st, NULL, NULL) != 0)
		st = 0;
	httpc_close(c);
	return st;
}

static void t_setup_unix(void)
{
	struct harness_options o = {.unix_socket = true};

	t_setup_with(&o);
}

/* A write, a read, problem+json answers: all on one kept-alive connection to the socket. */
START_TEST(unix_requests)
{
	struct stat sb;
	json_t *j;
	char *id;

	ck_assert_uint_eq(api_port(T.api), 0);
	ck_assert_int_eq(lstat(T.sock, &sb), 0);
	ck_assert(S_ISSOCK(sb.st_mode));
	ck_assert_uint_eq(sb.st_mode & 07777, 0660);

	id = t_card_new("{\"title\":\"over a socket\",\"state\":\"ready\"}");
	{
		char path[128];

		snprintf(path, sizeof path, "/v1/cards/%s", id);
		j = t_must(200, "GET", path, W, NULL, NULL);
		ck_assert_str_eq(t_str(j, "title"), "over a socket");
		json_decref(j);
		snprintf(path, sizeof path, "/v1/cards/%s/claim", id);
		j = t_must(200, "POST", path, W, NULL, "{\"marker\":\"w-unix\"}");
		ck_assert_int_eq(t_int(j, "epoch"), 1);
		json_decref(j);
	}
	t_problem(404, "not_found", "GET", "/v1/cards/nope", W, NULL, NULL);
	t_problem(400, "bad_request", "POST", "/v1/cards", BOT, NULL, "{\"title\":");
	ck_assert_ptr_nonnull(strstr(T_HDRS, "application/problem+json"));
	t_problem(401, "unauthorized", "GET", "/v1/cards", NULL, NULL, NULL);
	json_decref(t_must(200, "GET", "/readyz", NULL, NULL, NULL));
	/* every request above, the 4xx answers included, on one connection */
	ck_assert_uint_eq(httpc_dials(TC), 1);
	free(id);
}
END_TEST

/* A socket file no server accepts on (a crashed server's) is replaced. */
START_TEST(unix_stale_replaced)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char path[300], spec[320], err[512];
	struct api *a = NULL;
	int fd;

	snprintf(path, sizeof path, "%s/stale.sock", T.dir);
	snprintf(spec, sizeof spec, "unix:%s", path);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0);
	close(fd); /* the file stays; connecting to it is refused */
	ck_assert_int_eq(healthz_over(path), 0);

	ck_assert_msg(second_start(spec, &a, err, sizeof err) == CORE_OK, "%s", err);
	ck_assert_int_eq(healthz_over(path), 200);
	api_stop(a);
}
END_TEST

/* A socket peer has no address: --max-connections-per-ip (1 here) does not count it, as
 * docs/operations.md says; --max-connections still does. */
START_TEST(unix_no_per_ip_limit)
{
	char path[300], spec[320], err[512];
	struct httpc *c1, *c2;
	struct api *a = NULL;
	int st1 = 0, st2 = 0;

	snprintf(path, sizeof path, "%s/peers.sock", T.dir);
	snprintf(spec, sizeof spec, "unix:%s", path);
	ck_assert_msg(second_start_ip(spec, 1, &a, err, sizeof err) == CORE_OK, "%s", err);
	c1 = httpc_connect_unix(path);
	c2 = httpc_connect_unix(path);
	ck_assert(c1 && c2);
	ck_assert_int_eq(httpc_request(c1, "GET", "/healthz", NULL, NULL, &st1, NULL, NULL), 0);
	ck_assert_int_eq(httpc_request(c2, "GET", "/healthz", NULL, NULL, &st2, NULL, NULL), 0);
	ck_assert_int_eq(st1, 200);
	ck_assert_int_eq(st2, 200);
	ck_assert_uint_eq(httpc_dials(c1) + httpc_dials(c2), 2);
	httpc_close(c1);
	httpc_close(c2);
	api_stop(a);
}
END_TEST

/* Another server's live socket is refused and stays its own; so does a file that is not a
 * socket (untouched); a path longer than sun_path or none at all is a clear error. */
START_TEST(unix_refusals)
{
	char path[300], spec[320], err[512], lng[400];
	struct api *a = NULL;
	struct stat before, after;

	snprintf(spec, sizeof spec, "unix:%s", T.sock);
	ck_assert_int_eq(lstat(T.sock, &before), 0);
	ck_assert_int_eq(second_start(spec, &a, err, sizeof err), CORE_ERR_ALREADY_EXISTS);
	ck_assert_ptr_null(a);
	ck_assert_msg(strstr(err, "another server listens on it"), "%s", err);
	ck_assert_int_eq(lstat(T.sock, &after), 0);
	ck_assert(before.st_ino == after.st_ino);
	ck_assert_int_eq(healthz_over(T.sock), 200); /* new connections still reach T */
	json_decref(t_must(200, "GET", "/healthz", NULL, NULL, NULL)); /* and the kept-alive one */

	snprintf(path, sizeof path, "%s/notes.txt", T.dir);
	snprintf(spec, sizeof spec, "unix:%s", path);
	file_write(path, "keep me\n");
	ck_assert_int_eq(second_start(spec, &a, err, sizeof err), CORE_ERR_ALREADY_EXISTS);
	ck_assert_msg(strstr(err, "not a socket"), "%s", err);
	ck_assert(file_has(path, "keep me\n"));

	memset(lng, 'x', sizeof lng - 1);
	lng[sizeof lng - 1] = '\0';
	memcpy(lng, "unix:/tmp/", 10);
	ck_assert_int_eq(second_start(lng, &a, err, sizeof err), CORE_ERR_BAD_REQUEST);
	ck_assert_msg(strstr(err, "sun_path"), "%s", err);
	ck_assert_int_eq(second_start("unix:", &a, err, sizeof err), CORE_ERR_BAD_REQUEST);
	ck_assert_msg(strstr(err, "path is missing"), "%s", err);

	snprintf(spec, sizeof spec, "unix:%s/no-such-dir/b.sock", T.dir);
	ck_assert_int_ne(second_start(spec, &a, err, sizeof err), CORE_OK);
	ck_assert_msg(strstr(err, "No such file or directory"), "%s", err);
	ck_assert_ptr_null(a);
}
END_TEST

/* A clean stop removes the socket file, but not a file that replaced it meanwhile. */
START_TEST(unix_stop_removes)
{
	char path[300], spec[320], err[512];
	struct api *a = NULL;

	ck_assert_int_eq(access(T.sock, F_OK), 0);
	api_stop(T.api);
	T.api = NULL;
	ck_assert_int_eq(access(T.sock, F_OK), -1);
	ck_assert_int_eq(errno, ENOENT);

	snprintf(path, sizeof path, "%s/theirs.sock", T.dir);
	snprintf(spec, sizeof spec, "unix:%s", path);
	ck_assert_msg(second_start(spec, &a, err, sizeof err) == CORE_OK, "%s", err);
	ck_assert_int_eq(unlink(path), 0); /* someone replaced it with a file of theirs */
	file_write(path, "theirs\n");
	api_stop(a);
	ck_assert(file_has(path, "theirs\n"));
}
END_TEST

TCase *api_tcase_unix(void)
{
	TCase *tc = tcase_create("unix");

	tcase_add_checked_fixture(tc, t_setup_unix, t_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, unix_requests);
	tcase_add_test(tc, unix_stale_replaced);
	tcase_add_test(tc, unix_no_per_ip_limit);
	tcase_add_test(tc, unix_refusals);
	tcase_add_test(tc, unix_stop_removes);
	return tc;
}
