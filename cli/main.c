/* boardctl's entry: the global options, the verb table, help. */
#include "cli/cli.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cli_global cli_g;

void cli_warn(const char *fmt, ...)
{
	va_list ap;

	fputs("boardctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int64_t cli_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool cli_int_arg(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	/* strtoll skips leading space and takes a sign: neither is a number here unless min
	 * lets it be negative */
	if (!s || !((*s >= '0' && *s <= '9') || (*s == '-' && min < 0)))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || *end || errno == ERANGE || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* The verbs, defined once: dispatch and the help's list both walk it. */
static const struct verb {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *summary;
} verbs[] = {
	{"work", cli_work_main, "loop: claim-next, run a command under the claim, write the outcome"},
	{"run", cli_run_main, "run a command under the claim of one named card"},
	{"cards", cli_cards_main, "cards ls | show | create | move"},
	{"reopen", cli_reopen_main, "take a card out of a terminal column (operator)"},
	{"events", cli_events_main, "print the audit tail; --follow keeps waiting"},
	{"attention", cli_attention_main, "the cards that need an operator"},
	{"runs", cli_runs_main, "a card's runs, newest first, with their output"},
	{"boards", cli_boards_main, "boards ls | show: column limits and claims, the retry policy"},
};

static void usage(FILE *f)
{
	size_t i;

	fputs("usage: boardctl [--url URL] [--token-file FILE] [--cacert FILE] [--json] [--verbose]\n"
	      "                VERB [ARGS...]\n"
	      "       boardctl --version\n\n"
	      "The worker side of boardd as one command, and the operator and bot verbs.\n"
	      "BOARDD_URL (default http://127.0.0.1:8080) and BOARDD_TOKEN configure it; --url and\n"
	      "--token-file (the token on its first line) override them. A URL of the form\n"
	      "unix:PATH reaches a boardd started with --listen unix:PATH over that Unix socket\n"
	      "file (plain HTTP).\n\nverbs:\n",
	      f);
	for (i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
		fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
	fputs("\n`boardctl VERB --help` describes each verb. Exit status: 0; 1 when a request of\n"
	      "another verb than run or work failed; for run, the job's own status\n"
	      "(128+N when signal N ended it); 123 the claim was lost, 124 an operator cancelled\n"
	      "the run, 125 boardctl's own error (usage, configuration, a refusal), 126 the\n"
	      "command could not be executed, 127 the command was not found.\n", f);
}

/* The token from a file: its first line, trimmed. */
static char *token_read(const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[1024], *t;
	size_t n;

	if (!f) {
		cli_warn("%s: %s", path, strerror(errno));
		return NULL;
	}
	if (!fgets(buf, sizeof buf, f))
		buf[0] = '\0';
	fclose(f);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	t = buf;
	while (*t == ' ')
		t++;
	if (!*t) {
		cli_warn("%s: no token on its first line", path);
		return NULL;
	}
	return strdup(t);
}

/* 0, 1 and 2 open (on /dev/null when closed): a pipe boardctl makes must never land there. */
static void std_fds(void)
{
	int fd;

	while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= 2)
		fcntl(fd, F_SETFD, 0);
	if (fd > 2)
		close(fd);
}

int main(int argc, char **argv)
{
	static char url[2048];
	const char *token_file = NULL, *env_url = getenv("BOARDD_URL"), *env_tok;
	size_t i, n;
	int a, rc = CLI_EXIT_ERROR;

	if (argc > 1 && strcmp(argv[1], "__supervise") == 0)
		return cli_supervise_main(argc, argv);
	std_fds();
	signal(SIGCHLD, SIG_DFL); /* an inherited SIG_IGN would reap the supervisors away */

	snprintf(url, sizeof url, "%s", env_url && *env_url ? env_url : "http://127.0.0.1:8080");
	for (a = 1; a < argc && argv[a][0] == '-'; a++) {
		const char *o = argv[a];

		if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(o, "--version") == 0) {
			printf("boardctl %s\n", BOARDD_VERSION);
			return 0;
		} else if (strcmp(o, "--json") == 0) {
			cli_g.json = true;
		} else if (strcmp(o, "--verbose") == 0) {
			cli_g.verbose = true;
		} else if (strcmp(o, "--url") == 0 || strcmp(o, "--token-file") == 0 ||
			   strcmp(o, "--cacert") == 0) {
			if (a + 1 >= argc) {
				cli_warn("%s: its value is missing (%s %s)", o, o,
					 strcmp(o, "--url") == 0 ? "URL" : "FILE");
				usage(stderr);
				return CLI_EXIT_ERROR;
			}
			if (strcmp(o, "--url") == 0)
				snprintf(url, sizeof url, "%s", argv[++a]);
			else if (strcmp(o, "--token-file") == 0)
				token_file = argv[++a];
			else
				cli_g.cacert = argv[++a];
		} else {
			cli_warn("unknown option %s", o);
			usage(stderr);
			return CLI_EXIT_ERROR;
		}
	}
	if (a >= argc) {
		usage(stderr);
		return CLI_EXIT_ERROR;
	}
	n = strlen(url);
	while (n && url[n - 1] == '/')
		url[--n] = '\0';
	cli_g.server = url;
	cli_g.url = url;
	if (strncmp(url, "unix:", 5) == 0) { /* boardd's own --listen form */
		if (!url[5]) {
			cli_warn("--url unix:PATH: the socket file's path is missing");
			return CLI_EXIT_ERROR;
		}
		cli_g.unix_path = url + 5;
		cli_g.url = "http://localhost";
	}
	if (token_file) {
		cli_g.token = token_read(token_file);
		if (!cli_g.token)
			return CLI_EXIT_ERROR;
	} else if ((env_tok = getenv("BOARDD_TOKEN")) && *env_tok) {
		cli_g.token = strdup(env_tok);
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		cli_warn("cannot initialise libcurl");
		return CLI_EXIT_ERROR;
	}
	for (i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
		if (strcmp(argv[a], verbs[i].name) == 0)
			break;
	if (i == sizeof verbs / sizeof verbs[0]) {
		cli_warn("unknown verb %s", argv[a]);
		usage(stderr);
	} else {
		rc = verbs[i].main(argc - a, argv + a);
	}
	curl_global_cleanup();
	free(cli_g.token);
	return rc;
}
