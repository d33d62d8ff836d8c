/* The dispatch policy from the command line (DESIGN §17): `boardctl boards ls|show` (each
 * column's limit beside its claimed count, the board's max_claims and claimed total, the
 * retry policy in force) and the times --not-before takes (RFC 3339, or "+30s" from now).
 * A thin translation of GET /v1/boards[/{b}]: the server counts, boardctl prints. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool cli_time_arg(const char *s, char *out, size_t len, char *err, size_t errlen)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
	struct timespec now;
	struct tm tm;
	char *end, day[32];
	double v;
	int64_t at;
	size_t i;

	if (s[0] != '+') {
		/* An absolute time goes as given: the server parses RFC 3339 and says what is
		 * wrong with it (400). A date alone is a common slip: name it here. */
		if (strlen(s) < 20 || s[10] != 'T') {
			snprintf(err, errlen,
				 "\"%s\" is not an RFC 3339 time (2026-12-07T08:00:00Z) nor a "
				 "relative one (+30s, +5m, +2h, +1d)", s);
			return false;
		}
		snprintf(out, len, "%s", s);
		return true;
	}
	v = strtod(s + 1, &end);
	for (i = 0; end != s + 1 && v >= 0 && i < sizeof units / sizeof units[0]; i++)
		if (strcmp(end, units[i].unit) == 0)
			break;
	if (end == s + 1 || v < 0 || i == sizeof units / sizeof units[0] || v > 3650.0 * 86400000) {
		snprintf(err, errlen, "\"%s\": a relative time is +N with a unit ms, s, m, h or d", s);
		return false;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	at = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + (int64_t)(v * (double)units[i].ms);
	{
		time_t secs = (time_t)(at / 1000);

		gmtime_r(&secs, &tm);
	}
	strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, len, "%s.%03dZ", day, (int)(at % 1000));
	return true;
}

static const char boards_help[] =
	"usage: boardctl boards ls\n"
	"       boardctl boards show B\n"
	"\n"
	"ls prints each board's name and claimed total; show prints board B's columns with their\n"
	"roles, each column's limit beside its claimed count (the live claims taken from it,\n"
	"recovery claims included), the board's max_claims and claimed total, and the retry\n"
	"policy in force (max_attempts, backoff_ms, max_backoff_ms: the board's own, or the\n"
	"server's defaults, --run-ceiling being the default max_attempts). --json prints the\n"
	"answer as is.\n";

/* "-" for an absent or null number. */
static const char *num(const json_t *v, char *buf, size_t len)
{
	if (!json_is_integer(v))
		return "-";
	snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	return buf;
}

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "-";
}

/* The role a column plays on the board, for the ROLE cell. */
static const char *role_of(const json_t *b, const char *col)
{
	static const char *const roles[] = {"running", "completed", "failed", "waiting"};
	size_t i;

	for (i = 0; i < sizeof roles / sizeof roles[0]; i++)
		if (strcmp(str(b, roles[i]), col) == 0)
			return roles[i];
	return "";
}

static void board_human(const json_t *b)
{
	/* retry: the board's own policy (absent: none); retry_effective: the one in force */
	const json_t *col, *own = json_object_get(b, "retry");
	const json_t *retry = json_object_get(b, "retry_effective");
	char n1[32], n2[32], n3[32];
	size_t i;

	if (!json_is_object(retry))
		retry = own;
	printf("board %s\n", str(b, "name"));
	printf("max_claims %s, claimed %s\n", num(json_object_get(b, "max_claims"), n1, sizeof n1),
	       num(json_object_get(b, "claimed"), n2, sizeof n2));
	if (json_is_object(retry))
		printf("retry: max_attempts %s, backoff_ms %s, max_backoff_ms %s (%s)\n",
		       num(json_object_get(retry, "max_attempts"), n1, sizeof n1),
		       num(json_object_get(retry, "backoff_ms"), n2, sizeof n2),
		       num(json_object_get(retry, "max_backoff_ms"), n3, sizeof n3),
		       json_is_object(own) ? "the board's" : "the server's defaults");
	else
		printf("retry: (not served)\n");
	printf("%-24s %-10s %-8s %-8s %7s %7s\n", "COLUMN", "ROLE", "ELIGIBLE", "TERMINAL",
	       "CLAIMED", "LIMIT");
	json_array_foreach(json_object_get(b, "columns"), i, col) {
		const char *name = str(col, "name");

		printf("%-24s %-10s %-8s %-8s %7s %7s\n", name, role_of(b, name),
		       json_is_true(json_object_get(col, "eligible")) ? "yes" : "no",
		       json_is_true(json_object_get(col, "terminal")) ? "yes" : "no",
		       num(json_object_get(col, "claimed"), n1, sizeof n1),
		       num(json_object_get(col, "limit"), n2, sizeof n2));
	}
}

static void boards_human(const json_t *j)
{
	const json_t *v = json_is_array(j) ? j : json_object_get(j, "boards"), *b;
	char n1[32], n2[32];
	size_t i;

	printf("%-24s %7s %10s\n", "BOARD", "CLAIMED", "MAX_CLAIMS");
	json_array_foreach(v, i, b)
		printf("%-24s %7s %10s\n", str(b, "name"),
		       num(json_object_get(b, "claimed"), n1, sizeof n1),
		       num(json_object_get(b, "max_claims"), n2, sizeof n2));
}

/* One GET; prints the answer (JSON with --json, else through human). */
static int get_show(const char *path, void (*human)(const json_t *))
{
	struct cli_http *h = cli_http_new();
	char err[CLI_ERR_MAX];
	json_t *j = NULL;
	long st;

	if (!h) {
		cli_warn("out of memory");
		return CLI_EXIT_FAILED;
	}
	st = cli_http_call(h, "GET", path, NULL, -1, 60000, &j, err, sizeof err);
	cli_http_free(h);
	if (st != 200) {
		cli_warn("%s", err[0] ? err : "unexpected answer");
		json_decref(j);
		return CLI_EXIT_FAILED;
	}
	if (cli_g.json) {
		json_dumpf(j, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else {
		human(j);
	}
	json_decref(j);
	return 0;
}

int cli_boards_main(int argc, char **argv)
{
	char path[512], esc[400];

	if (argc >= 2 && (strcmp(argv[argc - 1], "--help") == 0 || strcmp(argv[argc - 1], "-h") == 0)) {
		fputs(boards_help, stdout);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "ls") == 0)
		return get_show("/v1/boards", boards_human);
	if (argc == 3 && strcmp(argv[1], "show") == 0) {
		if (!cli_http_escape(argv[2], esc, sizeof esc))
			return CLI_EXIT_ERROR;
		snprintf(path, sizeof path, "/v1/boards/%s", esc);
		return get_show(path, board_human);
	}
	fputs(boards_help, stderr);
	return CLI_EXIT_ERROR;
}
