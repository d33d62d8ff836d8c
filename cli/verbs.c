/* The operator and bot verbs (DESIGN §12): cards ls|show|create|move, reopen, events
 * [--follow], attention, runs (DESIGN §20). Each is a thin translation to one public route; the server decides. */
#include "cli/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints an answer: JSON as is with --json (or when `raw`), else through `human`. */
static void show(const json_t *j, void (*human)(const json_t *))
{
	if (cli_g.json || !human) {
		json_dumpf(j, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else {
		human(j);
	}
}

/* One call; prints the problem and returns 1 unless the status is `want`. */
static int call(const char *method, const char *path, const json_t *body, long want,
		json_t **out)
{
	struct cli_http *h = cli_http_new();
	char err[CLI_ERR_MAX];
	long st;

	if (!h) {
		cli_warn("out of memory");
		return 1;
	}
	st = cli_http_call(h, method, path, body, -1, 60000, out, err, sizeof err);
	cli_http_free(h);
	if (st != want) {
		cli_warn("%s", err[0] ? err : "unexpected answer");
		if (out) {
			json_decref(*out);
			*out = NULL;
		}
		return 1;
	}
	return 0;
}

/* One call expecting 200; prints the answer through show(). 0, or 1 after a problem. */
static int call_show(const char *method, const char *path, const json_t *body,
		     void (*human)(const json_t *))
{
	json_t *j = NULL;

	if (call(method, path, body, 200, &j))
		return 1;
	show(j, human);
	json_decref(j);
	return 0;
}

static bool query_add(char *q, size_t len, const char *key, const char *val)
{
	char esc[512];
	size_t n = strlen(q);

	if (!val)
		return true;
	if (!cli_http_escape(val, esc, sizeof esc))
		return false;
	return (size_t)snprintf(q + n, len - n, "%c%s=%s", strchr(q, '?') ? '&' : '?', key, esc) <
	       len - n;
}

/* --limit N of a listing: a positive integer (the server bounds it: 1..1000). */
static bool limit_ok(const char *s)
{
	long long v;

	if (cli_int_arg(s, 1, INT64_MAX, &v))
		return true;
	cli_warn("--limit must be a positive integer: \"%s\"", s);
	return false;
}

/* A verb given an argument it does not take: refused, nothing sent. */
static int extra_args(const char *verb, const char *arg)
{
	cli_warn("%s: unexpected argument \"%s\"", verb, arg);
	return CLI_EXIT_ERROR;
}

static void card_line(const json_t *c)
{
	const json_t *cl = json_object_get(c, "claim");

	printf("%-24s %-14s %6lld  %-24s %s\n", json_string_value(json_object_get(c, "id")),
	       json_string_value(json_object_get(c, "state")),
	       (long long)json_integer_value(json_object_get(c, "priority")),
	       json_is_object(cl) ? json_string_value(json_object_get(cl, "marker")) : "-",
	       json_string_value(json_object_get(c, "title")));
}

static void cards_table(const json_t *j)
{
	const json_t *c;
	size_t i;

	printf("%-24s %-14s %6s  %-24s %s\n", "ID", "STATE", "PRI", "CLAIM", "TITLE");
	json_array_foreach(json_object_get(j, "cards"), i, c)
		card_line(c);
	if (json_string_value(json_object_get(j, "next")))
		printf("(more: --after %s)\n", json_string_value(json_object_get(j, "next")));
}

static const char cards_help[] =
	"usage: boardctl cards ls [--board B] [--state S] [--label L] [--claimed true|false]\n"
	"                         [--limit N] [--after CURSOR]\n"
	"       boardctl cards show ID\n"
	"       boardctl cards create [--board B] [--id ID] [--title T] [--body B] [--state S]\n"
	"                         [--label L]... [--blocker ID]... [--priority N]\n"
	"                         [--not-before TIME]\n"
	"       boardctl cards move ID --to S [--from F] [--reason R]\n"
	"\n"
	"ls lists (a table, or the answer as JSON with --json); show prints one card as JSON;\n"
	"create needs a bot or operator token; move is SetStateFrom: bots must give --from.\n"
	"--not-before TIME (DESIGN §17): the card is not claimed before TIME, an RFC 3339 time\n"
	"(2026-12-07T08:00:00Z) or one relative to now: +30s, +5m, +2h, +1d.\n";

static int cards_ls(int argc, char **argv)
{
	static const struct option lo[] = {{"board", required_argument, NULL, 'b'},
					   {"state", required_argument, NULL, 's'},
					   {"label", required_argument, NULL, 'l'},
					   {"claimed", required_argument, NULL, 'c'},
					   {"limit", required_argument, NULL, 'n'},
					   {"after", required_argument, NULL, 'a'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	char q[2048] = "/v1/cards";
	int opt;
	bool ok = true;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (opt == 'h') {
			fputs(cards_help, stdout);
			return 0;
		}
		if (opt == '?')
			return CLI_EXIT_ERROR;
		if (opt == 'n' && !limit_ok(optarg))
			return CLI_EXIT_ERROR;
		for (size_t k = 0; lo[k].name; k++)
			if (lo[k].val == opt)
				ok = ok && query_add(q, sizeof q, lo[k].name, optarg);
	}
	if (optind < argc)
		return extra_args("cards ls", argv[optind]);
	if (!ok) {
		cli_warn("query too long");
		return CLI_EXIT_ERROR;
	}
	return call_show("GET", q, NULL, cards_table);
}

static int card_path(const char *id, const char *tail, char *buf, size_t len)
{
	char esc[400];

	if (!cli_http_escape(id, esc, sizeof esc))
		return CLI_EXIT_ERROR;
	snprintf(buf, len, "/v1/cards/%s%s", esc, tail);
	return 0;
}

/* Sends `body` (borrowed) to the card's `tail` route; prints the card it answers (200). */
static int card_write(const char *method, const char *id, const char *tail, const json_t *body)
{
	char path[512];

	if (card_path(id, tail, path, sizeof path))
		return 1;
	return call_show(method, path, body, card_line);
}

static int cards_show(int argc, char **argv)
{
	char path[512];

	if (argc != 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(cards_help, argc == 2 ? stdout : stderr);
		return argc == 2 ? 0 : CLI_EXIT_ERROR;
	}
	if (card_path(argv[1], "", path, sizeof path))
		return 1;
	return call_show("GET", path, NULL, NULL);
}

static int cards_create(int argc, char **argv)
{
	static const struct option lo[] = {{"board", required_argument, NULL, 'b'},
					   {"id", required_argument, NULL, 'i'},
					   {"title", required_argument, NULL, 't'},
					   {"body", required_argument, NULL, 'B'},
					   {"state", required_argument, NULL, 's'},
					   {"label", required_argument, NULL, 'l'},
					   {"blocker", required_argument, NULL, 'k'},
					   {"priority", required_argument, NULL, 'p'},
					   {"not-before", required_argument, NULL, 'N'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	json_t *body = json_object(), *j = NULL;
	char when[64], err[CLI_ERR_MAX];
	int opt, rc;
	long long pri;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		const char *key = NULL;

		switch (opt) {
		case 'b': key = "board"; break;
		case 'i': key = "id"; break;
		case 't': key = "title"; break;
		case 'B': key = "body"; break;
		case 's': key = "state"; break;
		case 'l':
		case 'k': {
			const char *arr = opt == 'l' ? "labels" : "blockers";

			if (!json_object_get(body, arr))
				json_object_set_new(body, arr, json_array());
			json_array_append_new(json_object_get(body, arr), json_string(optarg));
			continue;
		}
		case 'p':
			if (!cli_int_arg(optarg, INT32_MIN, INT32_MAX, &pri)) {
				cli_warn("--priority must be an integer (32-bit): \"%s\"", optarg);
				json_decref(body);
				return CLI_EXIT_ERROR;
			}
			json_object_set_new(body, "priority", json_integer(pri));
			continue;
		case 'N':
			if (!cli_time_arg(optarg, when, sizeof when, err, sizeof err)) {
				cli_warn("--not-before: %s", err);
				json_decref(body);
				return CLI_EXIT_ERROR;
			}
			json_object_set_new(body, "not_before", json_string(when));
			continue;
		case 'h':
			fputs(cards_help, stdout);
			json_decref(body);
			return 0;
		default:
			json_decref(body);
			return CLI_EXIT_ERROR;
		}
		json_object_set_new(body, key, json_string(optarg));
	}
	if (optind < argc) { /* a title given without --title would be silently dropped */
		json_decref(body);
		return extra_args("cards create", argv[optind]);
	}
	rc = call("POST", "/v1/cards", body, 201, &j);
	json_decref(body);
	if (rc)
		return 1;
	if (cli_g.json)
		show(j, NULL);
	else
		printf("%s\n", json_string_value(json_object_get(j, "id")));
	json_decref(j);
	return 0;
}

static int cards_move(int argc, char **argv)
{
	static const struct option lo[] = {{"to", required_argument, NULL, 't'},
					   {"from", required_argument, NULL, 'f'},
					   {"reason", required_argument, NULL, 'r'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	json_t *body = json_object();
	int opt, rc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (opt == 'h') {
			fputs(cards_help, stdout);
			json_decref(body);
			return 0;
		}
		if (opt == '?') {
			json_decref(body);
			return CLI_EXIT_ERROR;
		}
		json_object_set_new(body, opt == 't' ? "to" : opt == 'f' ? "from" : "reason",
				    json_string(optarg));
	}
	if (optind != argc - 1 || !json_object_get(body, "to")) {
		cli_warn("cards move needs ID and --to S");
		json_decref(body);
		return CLI_EXIT_ERROR;
	}
	rc = card_write("PATCH", argv[optind], "/state", body);
	json_decref(body);
	return rc;
}

int cli_cards_main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(cards_help, argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_ERROR : 0;
	}
	if (strcmp(argv[1], "ls") == 0)
		return cards_ls(argc - 1, argv + 1);
	if (strcmp(argv[1], "show") == 0)
		return cards_show(argc - 1, argv + 1);
	if (strcmp(argv[1], "create") == 0)
		return cards_create(argc - 1, argv + 1);
	if (strcmp(argv[1], "move") == 0)
		return cards_move(argc - 1, argv + 1);
	cli_warn("cards: unknown subcommand %s", argv[1]);
	fputs(cards_help, stderr);
	return CLI_EXIT_ERROR;
}

static const char reopen_help[] =
	"usage: boardctl reopen ID --to COLUMN [--reason R]\n"
	"\n"
	"Operator only: takes a card out of a terminal column into a working one (any claim on\n"
	"it is released). Refused while dependents promoted on its completion are outstanding.\n";

int cli_reopen_main(int argc, char **argv)
{
	static const struct option lo[] = {{"to", required_argument, NULL, 't'},
					   {"reason", required_argument, NULL, 'r'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	json_t *body = json_object();
	int opt, rc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (opt == 'h' || opt == '?') {
			fputs(reopen_help, opt == 'h' ? stdout : stderr);
			json_decref(body);
			return opt == 'h' ? 0 : CLI_EXIT_ERROR;
		}
		json_object_set_new(body, opt == 't' ? "to" : "reason", json_string(optarg));
	}
	if (optind != argc - 1 || !json_object_get(body, "to")) {
		fputs(reopen_help, stderr);
		json_decref(body);
		return CLI_EXIT_ERROR;
	}
	rc = card_write("POST", argv[optind], "/reopen", body);
	json_decref(body);
	return rc;
}

static const char events_help[] =
	"usage: boardctl events [--board B] [--after SEQ] [--limit N] [--follow]\n"
	"\n"
	"Prints the audit tail, one event per line (JSON lines with --json); --limit N: at most\n"
	"N events, then it exits. With --follow it keeps long-polling for new events until\n"
	"interrupted. With a token scoped to some boards SEQ is the board's own board_seq; a\n"
	"token scoped to several boards needs --board.\n";

static void event_line(const json_t *e)
{
	const json_t *p = json_object_get(e, "payload");
	char *ptext = p ? json_dumps(p, JSON_COMPACT) : NULL;

	printf("%lld %s %s %s %s %s\n", (long long)json_integer_value(json_object_get(e, "seq")),
	       json_string_value(json_object_get(e, "at")),
	       json_string_value(json_object_get(e, "type")),
	       json_string_value(json_object_get(e, "card_id"))
		       ? json_string_value(json_object_get(e, "card_id"))
		       : "-",
	       json_string_value(json_object_get(e, "actor")), ptext ? ptext : "{}");
	free(ptext);
}

int cli_events_main(int argc, char **argv)
{
	static const struct option lo[] = {{"board", required_argument, NULL, 'b'},
					   {"after", required_argument, NULL, 'a'},
					   {"limit", required_argument, NULL, 'n'},
					   {"follow", no_argument, NULL, 'f'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	const char *board = NULL;
	long long after = 0, left = -1; /* --limit: events still to print (-1: no bound) */
	bool follow = false;
	struct cli_http *h;
	int opt, rc = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'b': board = optarg; break;
		case 'a':
			if (!cli_int_arg(optarg, 0, INT64_MAX, &after)) {
				cli_warn("--after must be an event seq, an integer >= 0: \"%s\"",
					 optarg);
				return CLI_EXIT_ERROR;
			}
			break;
		case 'n':
			if (!limit_ok(optarg))
				return CLI_EXIT_ERROR;
			left = strtoll(optarg, NULL, 10);
			break;
		case 'f': follow = true; break;
		case 'h':
			fputs(events_help, stdout);
			return 0;
		default:
			fputs(events_help, stderr);
			return CLI_EXIT_ERROR;
		}
	}
	if (optind < argc)
		return extra_args("events", argv[optind]);
	h = cli_http_new();
	if (!h)
		return 1;
	for (;;) {
		char q[2048], a[32], n[32], err[CLI_ERR_MAX];
		json_t *j = NULL, *e;
		size_t i;
		long st;

		snprintf(q, sizeof q, "/v1/events");
		snprintf(a, sizeof a, "%lld", after);
		snprintf(n, sizeof n, "%lld", left < 0 || left > 1000 ? 1000 : left);
		query_add(q, sizeof q, "board", board);
		query_add(q, sizeof q, "after", a);
		query_add(q, sizeof q, "limit", n);
		if (follow)
			query_add(q, sizeof q, "wait_ms", "30000");
		st = cli_http_call(h, "GET", q, NULL, -1, 45000, &j, err, sizeof err);
		if (st != 200) {
			cli_warn("%s", err);
			json_decref(j);
			if (!follow || (st >= 400 && st < 500)) {
				rc = 1;
				break;
			}
			sleep(1);
			continue;
		}
		json_array_foreach(json_object_get(j, "events"), i, e) {
			if (left == 0)
				break;
			if (left > 0)
				left--;
			if (cli_g.json) {
				json_dumpf(e, stdout, JSON_COMPACT);
				fputc('\n', stdout);
			} else {
				event_line(e);
			}
		}
		fflush(stdout);
		if (json_is_integer(json_object_get(j, "next")))
			after = json_integer_value(json_object_get(j, "next"));
		i = json_array_size(json_object_get(j, "events"));
		json_decref(j);
		if ((!follow && i == 0) || left == 0)
			break;
	}
	cli_http_free(h);
	return rc;
}

static const char attention_help[] =
	"usage: boardctl attention [--board B] [--limit N]\n"
	"\n"
	"The cards that need an operator (GET /v1/attention), newest first, each with why:\n"
	"gave_up, run_failed, recovery_hold, lease_expired_kept, awaiting_input, run_paused.\n";

static void attention_human(const json_t *j)
{
	const json_t *cards = json_object_get(j, "cards"), *c, *why;
	size_t i, k;

	if (!json_is_array(cards)) {
		json_dumpf(j, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
		return;
	}
	printf("%-24s %-14s %6s  %-24s %s\n", "ID", "STATE", "PRI", "CLAIM", "TITLE");
	json_array_foreach(cards, i, c) {
		card_line(json_object_get(c, "card") ? json_object_get(c, "card") : c);
		printf("%26s", "why:");
		json_array_foreach(json_object_get(c, "reasons"), k, why)
			printf(" %s", json_string_value(why));
		fputc('\n', stdout);
	}
	if (json_is_true(json_object_get(j, "truncated")))
		printf("(more: raise --limit)\n");
}

int cli_attention_main(int argc, char **argv)
{
	static const struct option lo[] = {{"board", required_argument, NULL, 'b'},
					   {"limit", required_argument, NULL, 'n'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	char q[2048] = "/v1/attention";
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (opt == 'h') {
			fputs(attention_help, stdout);
			return 0;
		}
		if (opt != 'b' && opt != 'n') {
			fputs(attention_help, stderr);
			return CLI_EXIT_ERROR;
		}
		if (opt == 'n' && !limit_ok(optarg))
			return CLI_EXIT_ERROR;
		query_add(q, sizeof q, opt == 'b' ? "board" : "limit", optarg);
	}
	if (optind < argc)
		return extra_args("attention", argv[optind]);
	return call_show("GET", q, NULL, attention_human);
}

static const char runs_help[] =
	"usage: boardctl runs CARD [--limit N] [--output]\n"
	"\n"
	"The card's runs, newest first (GET /v1/cards/{id}/runs): each run's id, status, the\n"
	"epoch of the claim it ran under, when it was created and last written, and its error;\n"
	"--output also prints each run's output (the tail of its job's stdout and stderr).\n"
	"With --json, the answer as is.\n";

/* The run's output: from the listing when it carries it, else from GET /v1/runs/{id}. */
static void run_output(struct cli_http *h, const json_t *run)
{
	const char *id = json_string_value(json_object_get(run, "id"));
	const char *text = json_string_value(json_object_get(run, "output"));
	char path[512], esc[400], err[CLI_ERR_MAX];
	json_t *full = NULL;

	if (!text && id && cli_http_escape(id, esc, sizeof esc)) {
		snprintf(path, sizeof path, "/v1/runs/%s", esc);
		if (cli_http_call(h, "GET", path, NULL, -1, 60000, &full, err, sizeof err) == 200)
			text = json_string_value(json_object_get(full, "output"));
	}
	printf("--- run %s output%s\n", id ? id : "?", text && *text ? ":" : ": none");
	if (text && *text) {
		fputs(text, stdout);
		if (text[strlen(text) - 1] != '\n')
			fputc('\n', stdout);
	}
	json_decref(full);
}

int cli_runs_main(int argc, char **argv)
{
	static const struct option lo[] = {{"limit", required_argument, NULL, 'n'},
					   {"output", no_argument, NULL, 'o'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	char q[1024], err[CLI_ERR_MAX];
	const char *limit = NULL;
	const json_t *runs, *run;
	struct cli_http *h;
	json_t *j = NULL;
	bool output = false;
	int opt, rc = 0;
	size_t i;
	long st;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (opt == 'h') {
			fputs(runs_help, stdout);
			return 0;
		}
		if (opt == 'n' && !limit_ok(optarg))
			return CLI_EXIT_ERROR;
		if (opt == 'n')
			limit = optarg;
		else if (opt == 'o')
			output = true;
		else {
			fputs(runs_help, stderr);
			return CLI_EXIT_ERROR;
		}
	}
	if (optind != argc - 1) {
		fputs(runs_help, stderr);
		return CLI_EXIT_ERROR;
	}
	if (card_path(argv[optind], "/runs", q, sizeof q) || !query_add(q, sizeof q, "limit", limit))
		return CLI_EXIT_ERROR;
	h = cli_http_new();
	if (!h)
		return CLI_EXIT_FAILED;
	st = cli_http_call(h, "GET", q, NULL, -1, 60000, &j, err, sizeof err);
	if (st == 405 || (st == 404 && strcmp(cli_http_problem(j), "no such route") == 0)) {
		cli_warn("this server keeps no run history (GET /v1/cards/{id}/runs answered %ld): "
			 "`boardctl cards show %s` shows the card's last_run_id", st, argv[optind]);
		rc = CLI_EXIT_FAILED;
		goto out;
	}
	if (st != 200) {
		cli_warn("%s", err[0] ? err : "unexpected answer");
		rc = CLI_EXIT_FAILED;
		goto out;
	}
	if (cli_g.json) {
		show(j, NULL);
		goto out;
	}
	runs = json_is_array(j) ? j : json_object_get(j, "runs");
	printf("%-24s %-18s %5s  %-24s %-24s %s\n", "RUN", "STATUS", "EPOCH", "CREATED", "UPDATED",
	       "ERROR");
	json_array_foreach(runs, i, run) {
		const char *e = json_string_value(json_object_get(run, "error"));

		printf("%-24s %-18s %5lld  %-24s %-24s %s\n",
		       json_string_value(json_object_get(run, "id")),
		       json_string_value(json_object_get(run, "status")),
		       (long long)json_integer_value(json_object_get(run, "claim_epoch")),
		       json_string_value(json_object_get(run, "created_at")),
		       json_string_value(json_object_get(run, "updated_at")), e ? e : "-");
	}
	if (output)
		json_array_foreach(runs, i, run)
			run_output(h, run);
	if (json_string_value(json_object_get(j, "next")))
		printf("(more: raise --limit)\n");
out:
	json_decref(j);
	cli_http_free(h);
	return rc;
}
