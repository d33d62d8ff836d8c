/* Tokens on the server side: the bootstrap file with one dev token per role, and the
 * `boardd token add` subcommand. Plain tokens are printed once and never stored. */
#include "server/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* DATADIR/tokens.json for an fs: store, ./tokens.json otherwise; caller frees. */
static char *default_tokens_path(const char *store_spec)
{
	char *p = NULL;

	if (strncmp(store_spec, "fs:", 3) == 0) {
		if (asprintf(&p, "%s/tokens.json", store_spec + 3) < 0)
			return NULL;
		return p;
	}
	return strdup("./tokens.json");
}

char *server_tokens_path(const struct server_config *cfg)
{
	return cfg->tokens ? strdup(cfg->tokens) : default_tokens_path(cfg->store);
}

bool server_tokens_setup(const struct server_config *cfg, struct api_tokens *out, char *err,
			 size_t errlen)
{
	static const struct {
		const char *name;
		unsigned role;
	} dev[] = {
		{"dev-worker", API_ROLE_WORKER},
		{"dev-bot", API_ROLE_BOT},
		{"dev-operator", API_ROLE_OPERATOR},
	};
	char plain[3][API_TOKEN_PLAIN_BUF];
	struct api_tokens t = {0};
	char *path = NULL;
	struct stat sb;
	bool ok = false;
	size_t i;

	if (cfg->tokens)
		return api_tokens_load(cfg->tokens, out, err, errlen) == CORE_OK;
	path = default_tokens_path(cfg->store);
	if (!path) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	if (stat(path, &sb) == 0) {
		ok = api_tokens_load(path, out, err, errlen) == CORE_OK;
		if (ok)
			fprintf(stderr,
				"boardd: tokens: %s (plain tokens were printed when it was created; "
				"add one with: boardd token add --tokens %s --name NAME --role ROLE)\n",
				path, path);
		goto out;
	}
	for (i = 0; i < 3; i++) {
		if (api_token_generate(plain[i]) != CORE_OK ||
		    api_tokens_push(&t, dev[i].name, plain[i], dev[i].role, NULL) != CORE_OK) {
			snprintf(err, errlen, "cannot generate tokens");
			goto out;
		}
	}
	if (api_tokens_save(&t, path, err, errlen) != CORE_OK)
		goto out;
	fprintf(stderr, "boardd: created %s with one token per role (shown only now):\n", path);
	for (i = 0; i < 3; i++)
		fprintf(stderr, "boardd:   %-13s %s\n", dev[i].name, plain[i]);
	*out = t;
	memset(&t, 0, sizeof t);
	ok = true;
out:
	api_tokens_release(&t);
	free(path);
	return ok;
}

static const char token_help[] =
	"usage: boardd token add --tokens FILE --name NAME --role ROLE [--role ROLE ...]\n"
	"                        [--board B ...] [--cap CAP ...]\n"
	"\n"
	"Adds a token to the tokens file FILE (created when missing, mode 0600) and prints the\n"
	"plain token once on stdout; only its SHA-256 is stored. FILE is the file the server\n"
	"reads: its --tokens, or DATADIR/tokens.json (./data/tokens.json for ./deploy/run.sh).\n"
	"A running boardd takes the new token on SIGHUP (kill -HUP <pid>), or at its next start.\n"
	"\n"
	"  --tokens FILE  the tokens file (required)\n"
	"  --name NAME    unique in the file; the actor of the token's changes (required)\n"
	"  --role ROLE    worker, bot or operator; repeatable (at least one)\n"
	"  --board B      a board the token may see; repeatable (default: every board, *)\n"
	"  --cap CAP      board.read board.create board.move board.label board.comment\n"
	"                 board.close; repeatable (default: all six)\n";

/* The usage on stderr after `what` (a message, or NULL); the exit status 2. */
static int token_usage(const char *what)
{
	if (what)
		fprintf(stderr, "boardd token add: %s\n", what);
	fputs(token_help, stderr);
	return 2;
}

static bool is_help(const char *a)
{
	return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

int server_token_main(int argc, char **argv)
{
	const char *file = NULL, *name = NULL;
	const char **boards = NULL;
	struct api_tokens t = {0};
	char plain[API_TOKEN_PLAIN_BUF], err[512];
	unsigned roles = 0, caps = 0;
	size_t nb = 0, i;
	int k, code = 1;
	enum core_rc rc;

	if (argc >= 2 && is_help(argv[1])) {
		fputs(token_help, stdout);
		return 0;
	}
	if (argc < 2)
		return token_usage(NULL);
	if (strcmp(argv[1], "add") != 0) {
		fprintf(stderr, "boardd token: unknown subcommand %s (there is: add)\n", argv[1]);
		fputs(token_help, stderr);
		return 2;
	}
	for (k = 2; k < argc; k++)
		if (is_help(argv[k])) {
			fputs(token_help, stdout);
			return 0;
		}
	boards = calloc((size_t)argc + 1, sizeof *boards);
	if (!boards)
		return 1;
	for (k = 2; k < argc; k++) {
		const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;

		if (strcmp(a, "--tokens") != 0 && strcmp(a, "--name") != 0 &&
		    strcmp(a, "--role") != 0 && strcmp(a, "--cap") != 0 && strcmp(a, "--board") != 0) {
			snprintf(err, sizeof err, "unknown option %s", a);
			code = token_usage(err);
			goto out;
		}
		if (!v) {
			fprintf(stderr, "boardd token add: %s needs a value\n", a);
			code = 2;
			goto out;
		}
		k++;
		if (strcmp(a, "--tokens") == 0) {
			file = v;
		} else if (strcmp(a, "--name") == 0) {
			name = v;
		} else if (strcmp(a, "--role") == 0) {
			unsigned bit = api_role_parse(v);

			if (!bit) {
				fprintf(stderr, "boardd token add: unknown role %s (worker, bot, "
						"operator)\n",
					v);
				code = 2;
				goto out;
			}
			roles |= bit;
		} else if (strcmp(a, "--cap") == 0) {
			unsigned bit = api_cap_parse(v);

			if (!bit) {
				fprintf(stderr, "boardd token add: unknown capability %s (board.read, "
						"board.create, board.move, board.label, board.comment, "
						"board.close)\n",
					v);
				code = 2;
				goto out;
			}
			caps |= bit;
		} else {
			if (strcmp(v, "*") != 0 && !core_name_valid(v)) {
				fprintf(stderr, "boardd token add: invalid board name %s\n", v);
				code = 2;
				goto out;
			}
			boards[nb++] = v;
		}
	}
	/* Say what is missing, all of it. */
	err[0] = '\0';
	if (!file)
		snprintf(err + strlen(err), sizeof err - strlen(err), "%s--tokens FILE (the tokens "
			 "file the server reads: its --tokens, or DATADIR/tokens.json)",
			 err[0] ? ", " : "");
	if (!name || !*name)
		snprintf(err + strlen(err), sizeof err - strlen(err), "%s--name NAME",
			 err[0] ? ", " : "");
	if (!roles)
		snprintf(err + strlen(err), sizeof err - strlen(err), "%s--role ROLE (worker, bot or "
			 "operator)", err[0] ? ", " : "");
	if (err[0]) {
		char what[600];

		snprintf(what, sizeof what, "missing %s", err);
		code = token_usage(what);
		goto out;
	}
	if (!api_token_name_valid(name)) {
		fprintf(stderr, "boardd token add: invalid --name %s: at most %d bytes, no ':', "
				"'/' or control character (the reaper and agent tokens use those)\n",
			name, API_TOKEN_NAME_MAX);
		code = 2;
		goto out;
	}
	rc = api_tokens_load(file, &t, err, sizeof err);
	if (rc != CORE_OK && !(rc == CORE_ERR_NOT_FOUND && access(file, F_OK) != 0)) {
		fprintf(stderr, "boardd token add: %s\n", err);
		goto out;
	}
	for (i = 0; i < t.n; i++)
		if (strcmp(t.v[i].name, name) == 0) {
			fprintf(stderr, "boardd token add: %s already has a token named %s\n", file,
				name);
			goto out;
		}
	if (api_token_generate(plain) != CORE_OK ||
	    api_tokens_push_caps(&t, name, plain, roles, caps ? caps : API_CAP_ALL,
				 nb ? boards : NULL) != CORE_OK) {
		fprintf(stderr, "boardd token add: cannot generate a token\n");
		goto out;
	}
	if (api_tokens_save(&t, file, err, sizeof err) != CORE_OK) {
		fprintf(stderr, "boardd token add: %s\n", err);
		goto out;
	}
	printf("%s\n", plain);
	fprintf(stderr, "boardd: token %s added to %s (shown only now); a running boardd takes it "
			"on SIGHUP (kill -HUP <pid>)\n",
		name, file);
	code = 0;
out:
	api_tokens_release(&t);
	free(boards);
	return code;
}

int server_mcp_tools_main(int argc, char **argv)
{
	bool md = argc > 1 && strcmp(argv[1], "--markdown") == 0;
	char *text;

	if (argc > 2 || (argc == 2 && !md)) {
		fprintf(stderr, "usage: boardd mcp-tools [--markdown]\n"
				"  the MCP tools /mcp serves: their tools/list JSON, or the README's "
				"table\n");
		return 2;
	}
	text = api_mcp_tools_render(md);
	if (!text)
		return 1;
	fputs(text, stdout);
	if (!md)
		putchar('\n');
	free(text);
	return 0;
}
