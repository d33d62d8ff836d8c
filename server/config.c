/* Flags and their BOARDD_* environment twins (DESIGN §10). Flag wins over environment;
 * an invalid value from either is a clear message and exit 2. */
#include "server/server.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum opt_kind {
	OPT_STR,
	OPT_INT,
	OPT_LOG,
	OPT_GATE,
};

struct opt {
	const char *flag; /* without the leading "--" */
	const char *env;
	enum opt_kind kind;
	size_t off;       /* offset in struct server_config */
	int64_t min, max;
	const char *help;
};

#define OFF(f) offsetof(struct server_config, f)

static const struct opt opts[] = {
	{"listen", "BOARDD_LISTEN", OPT_STR, OFF(listen), 0, 0,
	 "HOST:PORT to listen on (default 127.0.0.1:8080; port 0 picks one)"},
	{"store", "BOARDD_STORE", OPT_STR, OFF(store), 0, 0,
	 "store spec: fs:DIR or mongodb://... (default fs:./data)"},
	{"tokens", "BOARDD_TOKENS", OPT_STR, OFF(tokens), 0, 0,
	 "tokens file (default: DATADIR/tokens.json, created with dev tokens)"},
	{"lease-default-ms", "BOARDD_LEASE_DEFAULT_MS", OPT_INT, OFF(lease_default_ms), 1,
	 INT64_MAX / 4, "claim lease when a client gives none (900000)"},
	{"lease-min-ms", "BOARDD_LEASE_MIN_MS", OPT_INT, OFF(lease_min_ms), 1, INT64_MAX / 4,
	 "smallest lease a client may ask (1000)"},
	{"lease-max-ms", "BOARDD_LEASE_MAX_MS", OPT_INT, OFF(lease_max_ms), 1, INT64_MAX / 4,
	 "largest lease a client may ask (86400000)"},
	{"reaper-interval-ms", "BOARDD_REAPER_INTERVAL_MS", OPT_INT, OFF(reaper_interval_ms), 1,
	 INT64_MAX / 4, "time between reaper passes (60000)"},
	{"reaper-batch", "BOARDD_REAPER_BATCH", OPT_INT, OFF(reaper_batch), 1, 100000,
	 "candidates per reaper pass (100)"},
	{"unleased-horizon-ms", "BOARDD_UNLEASED_HORIZON_MS", OPT_INT, OFF(unleased_horizon_ms),
	 1, INT64_MAX / 4, "age of an un-leased claim the Mongo reaper lists (86400000)"},
	{"run-ceiling", "BOARDD_RUN_CEILING", OPT_INT, OFF(run_ceiling), 1, 1000000,
	 "runs per card before the cloud repark files it (20)"},
	{"threads", "BOARDD_THREADS", OPT_INT, OFF(threads), 1, 1024,
	 "HTTP worker threads (number of cores)"},
	{"max-body", "BOARDD_MAX_BODY", OPT_INT, OFF(max_body), 1, 1 << 30,
	 "largest request body in bytes (1048576)"},
	{"max-comments", "BOARDD_MAX_COMMENTS", OPT_INT, OFF(max_comments), 1, 1000000,
	 "comments per card (1000)"},
	{"log-format", "BOARDD_LOG_FORMAT", OPT_LOG, OFF(log_format), 0, 0,
	 "request log lines: text or json (text)"},
	{"reaper", "BOARDD_REAPER", OPT_GATE, OFF(reaper_gate), 0, 0,
	 "on|off: reaper decisions (also ITERION_BOARD_CLAIM_REAPER=on; default off)"},
};

#define N_OPTS (sizeof opts / sizeof opts[0])

void server_config_usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: boardd [OPTIONS]\n"
		     "       boardd token add --tokens FILE --name NAME --role ROLE [--role ...] "
		     "[--board B ...]\n\noptions (each also an environment variable):\n");
	for (i = 0; i < N_OPTS; i++)
		fprintf(out, "  --%-22s %-28s %s\n", opts[i].flag, opts[i].env, opts[i].help);
	fprintf(out, "  --%-22s %-28s %s\n  --%-22s %-28s %s\n", "help", "", "this text", "version",
		"", "print the version");
}

static void defaults(struct server_config *cfg)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	memset(cfg, 0, sizeof *cfg);
	cfg->listen = "127.0.0.1:8080";
	cfg->store = "fs:./data";
	cfg->lease_default_ms = 900000;
	cfg->lease_min_ms = 1000;
	cfg->lease_max_ms = 86400000;
	cfg->reaper_interval_ms = 60000;
	cfg->reaper_batch = 100;
	cfg->unleased_horizon_ms = 86400000;
	cfg->run_ceiling = 20;
	cfg->max_comments = CORE_COMMENTS_MAX;
	cfg->threads = cores > 0 ? cores : 2;
	cfg->max_body = 1048576;
	cfg->log_format = API_LOG_TEXT;
}

/* Applies one value; false with err filled when it is invalid. `from` names the source. */
static bool opt_set(struct server_config *cfg, const struct opt *o, const char *v,
		    const char *from, char *err, size_t errlen)
{
	char *base = (char *)cfg + o->off;

	switch (o->kind) {
	case OPT_STR:
		if (!*v) {
			snprintf(err, errlen, "%s: an empty value is not allowed", from);
			return false;
		}
		*(const char **)(void *)base = v;
		return true;
	case OPT_INT: {
		char *end;
		long long n;

		errno = 0;
		n = strtoll(v, &end, 10);
		if (!*v || *end || errno || !isdigit((unsigned char)v[0]) || n < o->min ||
		    n > o->max) {
			snprintf(err, errlen, "%s: \"%s\" is not an integer in [%" PRId64 ", %" PRId64
					      "]",
				 from, v, o->min, o->max);
			return false;
		}
		*(int64_t *)(void *)base = n;
		return true;
	}
	case OPT_LOG:
		if (strcmp(v, "text") == 0)
			cfg->log_format = API_LOG_TEXT;
		else if (strcmp(v, "json") == 0)
			cfg->log_format = API_LOG_JSON;
		else {
			snprintf(err, errlen, "%s: \"%s\" is not text or json", from, v);
			return false;
		}
		return true;
	case OPT_GATE:
		if (strcasecmp(v, "on") == 0)
			cfg->reaper_gate = true;
		else if (strcasecmp(v, "off") == 0)
			cfg->reaper_gate = false;
		else {
			snprintf(err, errlen, "%s: \"%s\" is not on or off", from, v);
			return false;
		}
		return true;
	}
	return false;
}

enum server_parse_result server_config_parse(struct server_config *cfg, int argc, char **argv,
					     char *err, size_t errlen)
{
	const char *gate_env = getenv("ITERION_BOARD_CLAIM_REAPER");
	char from[96];
	size_t i;
	int k;

	defaults(cfg);
	/* The ADR's own switch first, so BOARDD_REAPER and --reaper can override it. */
	if (gate_env)
		cfg->reaper_gate = strcasecmp(gate_env, "on") == 0;
	for (i = 0; i < N_OPTS; i++) {
		const char *v = getenv(opts[i].env);

		if (!v)
			continue;
		snprintf(from, sizeof from, "%s", opts[i].env);
		if (!opt_set(cfg, &opts[i], v, from, err, errlen))
			return SERVER_PARSE_ERROR;
	}
	for (k = 1; k < argc; k++) {
		const char *a = argv[k], *eq, *v;
		size_t nlen;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			server_config_usage(stdout);
			return SERVER_PARSE_EXIT;
		}
		if (strcmp(a, "--version") == 0) {
			printf("boardd %s\n", BOARDD_VERSION);
			return SERVER_PARSE_EXIT;
		}
		if (strncmp(a, "--", 2) != 0) {
			snprintf(err, errlen, "unexpected argument \"%s\" (see --help)", a);
			return SERVER_PARSE_ERROR;
		}
		a += 2;
		eq = strchr(a, '=');
		nlen = eq ? (size_t)(eq - a) : strlen(a);
		for (i = 0; i < N_OPTS; i++)
			if (strlen(opts[i].flag) == nlen && strncmp(opts[i].flag, a, nlen) == 0)
				break;
		if (i == N_OPTS) {
			snprintf(err, errlen, "unknown option --%.*s (see --help)", (int)nlen, a);
			return SERVER_PARSE_ERROR;
		}
		if (eq) {
			v = eq + 1;
		} else if (k + 1 < argc) {
			v = argv[++k];
		} else {
			snprintf(err, errlen, "--%s needs a value", opts[i].flag);
			return SERVER_PARSE_ERROR;
		}
		snprintf(from, sizeof from, "--%s", opts[i].flag);
		if (!opt_set(cfg, &opts[i], v, from, err, errlen))
			return SERVER_PARSE_ERROR;
	}
	if (cfg->lease_min_ms > cfg->lease_max_ms || cfg->lease_default_ms < cfg->lease_min_ms ||
	    cfg->lease_default_ms > cfg->lease_max_ms) {
		snprintf(err, errlen,
			 "leases must satisfy lease-min-ms <= lease-default-ms <= lease-max-ms "
			 "(got %" PRId64 " <= %" PRId64 " <= %" PRId64 ")",
			 cfg->lease_min_ms, cfg->lease_default_ms, cfg->lease_max_ms);
		return SERVER_PARSE_ERROR;
	}
	return SERVER_PARSE_RUN;
}
