/* What `work` and `run` check before anything is claimed (DESIGN §20): that the command can
 * be executed at all (a typo must not drain the queue into a terminal column), and that the
 * columns they were told to file cards into are columns of the board. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 0 when path is an executable file; else the errno that execve would meet. */
static int exec_errno(const char *path)
{
	struct stat sb;

	if (stat(path, &sb) != 0)
		return errno;
	if (S_ISDIR(sb.st_mode))
		return EISDIR;
	if (access(path, X_OK) != 0)
		return errno;
	return 0;
}

int cli_command_check(const char *argv0, char *err, size_t errlen)
{
	const char *path, *p;
	int e, seen = 0; /* an errno other than ENOENT met on the way (execvp reports it) */

	if (!*argv0) {
		snprintf(err, errlen, "the command is empty");
		return CLI_EXIT_NOT_FOUND;
	}
	if (strchr(argv0, '/')) {
		e = exec_errno(argv0);
		if (!e)
			return 0;
		snprintf(err, errlen, "cannot run %s: %s", argv0, strerror(e));
		return e == ENOENT || e == ENOTDIR ? CLI_EXIT_NOT_FOUND : CLI_EXIT_CANNOT_EXEC;
	}
	path = getenv("PATH");
	if (!path)
		path = "/bin:/usr/bin"; /* execvp's own default */
	for (p = path;; p++) {
		const char *end = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		char full[4096];

		if ((size_t)snprintf(full, sizeof full, "%.*s%s%s", (int)n, p, n ? "/" : "",
				     argv0) < sizeof full) {
			e = exec_errno(full);
			if (!e)
				return 0;
			if (e != ENOENT && e != ENOTDIR && !seen)
				seen = e;
		}
		if (!end)
			break;
		p = end;
	}
	if (seen) {
		snprintf(err, errlen, "cannot run %s: %s", argv0, strerror(seen));
		return CLI_EXIT_CANNOT_EXEC;
	}
	snprintf(err, errlen, "cannot run %s: command not found (PATH=%s)", argv0, path);
	return CLI_EXIT_NOT_FOUND;
}

/* Whether `col` names a column of board answer b; *terminal tells whether it is terminal. */
static bool column_of(const json_t *b, const char *col, bool *terminal)
{
	const json_t *c;
	size_t i;

	json_array_foreach(json_object_get(b, "columns"), i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));

		if (name && strcmp(name, col) == 0) {
			*terminal = json_is_true(json_object_get(c, "terminal"));
			return true;
		}
	}
	return false;
}

/* "a, b, c": the board's columns, for a message. */
static void columns_list(const json_t *b, char *buf, size_t len)
{
	const json_t *c;
	size_t i, n = 0;

	buf[0] = '\0';
	json_array_foreach(json_object_get(b, "columns"), i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));

		if (name && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", name);
	}
}

int cli_board_check(struct cli_http *h, const char *board, const char *card,
		    struct cli_job_opts *o, bool running_given, char *running_buf, size_t len,
		    char *err, size_t errlen)
{
	const struct {
		const char *flag;
		const struct cli_outcome *out;
	} outs[] = {{"--on-success", &o->on_success}, {"--on-failure", &o->on_failure}};
	char path[512], esc[400], cols[512], why[CLI_ERR_MAX], board_buf[129];
	json_t *ans = NULL;
	int rc = CLI_EXIT_ERROR;
	bool terminal;
	size_t i;
	long st;

	if (!board) {
		if (!cli_http_escape(card, esc, sizeof esc)) {
			snprintf(err, errlen, "--card: too long");
			return rc;
		}
		snprintf(path, sizeof path, "/v1/cards/%s", esc);
		st = cli_http_call(h, "GET", path, NULL, -1, 30000, &ans, why, sizeof why);
		board = json_string_value(json_object_get(ans, "board"));
		if (st == 403) {
			cli_warn("%s: the columns of its board are not checked", why);
			o->running_column = running_given ? o->running_column : NULL;
			json_decref(ans);
			return 0;
		}
		if (st != 200 || !board) {
			snprintf(err, errlen, "%s", why);
			json_decref(ans);
			return st == 0 || st == 429 || st >= 500 ? -1 : rc;
		}
		snprintf(board_buf, sizeof board_buf, "%s", board);
		board = board_buf;
	}
	if (!cli_http_escape(board, esc, sizeof esc)) {
		snprintf(err, errlen, "--board: too long");
		goto out;
	}
	json_decref(ans);
	snprintf(path, sizeof path, "/v1/boards/%s", esc);
	st = cli_http_call(h, "GET", path, NULL, -1, 30000, &ans, why, sizeof why);
	if (st == 403) { /* a token without board.read: the server will judge each write */
		cli_warn("%s: the columns of board %s are not checked", why, board);
		o->running_column = running_given ? o->running_column : NULL;
		rc = 0;
		goto out;
	}
	if (st != 200) {
		snprintf(err, errlen, "%s", why);
		if (st == 0 || st == 429 || st >= 500)
			rc = -1;
		goto out;
	}
	columns_list(ans, cols, sizeof cols);
	for (i = 0; i < sizeof outs / sizeof outs[0]; i++) {
		const struct cli_outcome *out = outs[i].out;

		if (out->kind == CLI_OUTCOME_COLUMN && !column_of(ans, out->column, &terminal)) {
			snprintf(err, errlen, "%s %s: board %s has no column %s (its columns: %s)",
				 outs[i].flag, out->column, board, out->column, cols);
			goto out;
		}
	}
	if (running_given && o->running_column) {
		if (!column_of(ans, o->running_column, &terminal) || terminal) {
			snprintf(err, errlen, "--running-column %s: board %s has no %scolumn %s (its "
				 "columns: %s)", o->running_column, board,
				 terminal ? "working " : "", o->running_column, cols);
			goto out;
		}
	} else if (!running_given) {
		const char *r = json_string_value(json_object_get(ans, "running"));

		o->running_column = NULL;
		if (r && column_of(ans, r, &terminal) && !terminal) {
			snprintf(running_buf, len, "%s", r);
			o->running_column = running_buf;
		}
	}
	rc = 0;
out:
	json_decref(ans);
	return rc;
}
