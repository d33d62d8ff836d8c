/* Flags and their BOARDD_* environment twins (DESIGN §10). Flag wins over environment;
 * an invalid value from either is a clear message and exit 2. */
#include "server/server.h"
#include "api/api_conns.h"

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

/* One row per flag: parsing, the environment, the defaults and --help all come from here
 * (the README's configuration table is checked against --help by tests/docs). A new flag is a
 * new row, with designated initializers. */
struct opt {
	const char *flag;     /* without the leading "--" */
	const char *env;
	enum opt_kind kind;
	size_t off;           /* offset in struct server_config */
	int64_t min, max;     /* OPT_INT bounds */
	const char *arg;      /* the value's name in --help: HOST:PORT, MS, FILE, ... */
	const char *def;      /* default, applied through opt_set like any value; NULL: none */
	const char *def_text; /* default as --help shows it when def is NULL (computed/none) */
	const char *help;
};

#define OFF(f) offsetof(struct server_config, f)
#define MS_MAX (INT64_MAX / 4)

static const struct opt opts[] = {
	{.flag = "listen", .env = "BOARDD_LISTEN", .kind = OPT_STR, .off = OFF(listen),
	 .arg = "HOST:PORT", .def = "127.0.0.1:8080",
	 .help = "address to listen on; port 0 picks a free one; unix:PATH: a Unix socket file"},
	{.flag = "store", .env = "BOARDD_STORE", .kind = OPT_STR, .off = OFF(store),
	 .arg = "SPEC", .def = "fs:./data",
	 .help = "fs:DIR, or mongodb://HOST[:PORT][,HOST...]/DB[?replicaSet=NAME&...]"},
	{.flag = "tokens", .env = "BOARDD_TOKENS", .kind = OPT_STR, .off = OFF(tokens),
	 .arg = "FILE", .def_text = "DATADIR/tokens.json",
	 .help = "bearer tokens file; by default DATADIR/tokens.json, created with one dev "
		 "token per role on first start"},
	{.flag = "lease-default-ms", .env = "BOARDD_LEASE_DEFAULT_MS", .kind = OPT_INT,
	 .off = OFF(lease_default_ms), .min = 1, .max = MS_MAX, .arg = "MS", .def = "900000",
	 .help = "claim lease when a client gives none"},
	{.flag = "lease-min-ms", .env = "BOARDD_LEASE_MIN_MS", .kind = OPT_INT,
	 .off = OFF(lease_min_ms), .min = 1, .max = MS_MAX, .arg = "MS", .def = "1000",
	 .help = "smallest lease a client may ask for"},
	{.flag = "lease-max-ms", .env = "BOARDD_LEASE_MAX_MS", .kind = OPT_INT,
	 .off = OFF(lease_max_ms), .min = 1, .max = MS_MAX, .arg = "MS", .def = "86400000",
	 .help = "largest lease a client may ask for"},
	{.flag = "reaper", .env = "BOARDD_REAPER", .kind = OPT_GATE, .off = OFF(reaper_gate),
	 .arg = "on|off", .def = "off",
	 .help = "the reaper's decisions (also ITERION_BOARD_CLAIM_REAPER=on); off still "
		 "repairs abandoned claims"},
	{.flag = "reaper-interval-ms", .env = "BOARDD_REAPER_INTERVAL_MS", .kind = OPT_INT,
	 .off = OFF(reaper_interval_ms), .min = 1, .max = MS_MAX, .arg = "MS", .def = "60000",
	 .help = "time between reaper passes"},
	{.flag = "reaper-batch", .env = "BOARDD_REAPER_BATCH", .kind = OPT_INT,
	 .off = OFF(reaper_batch), .min = 1, .max = 100000, .arg = "N", .def = "100",
	 .help = "expired claims the reaper takes per pass"},
	{.flag = "unleased-horizon-ms", .env = "BOARDD_UNLEASED_HORIZON_MS", .kind = OPT_INT,
	 .off = OFF(unleased_horizon_ms), .min = 1, .max = MS_MAX, .arg = "MS",
	 .def = "86400000",
	 .help = "Mongo store: age after which a claim without a lease is listed for the reaper"},
	{.flag = "run-ceiling", .env = "BOARDD_RUN_CEILING", .kind = OPT_INT,
	 .off = OFF(run_ceiling), .min = 1, .max = 1000000, .arg = "N", .def = "20",
	 .help = "the default retry.max_attempts of a board without a retry policy: a card "
		 "whose claims ended this many times without the work done (retry releases, the "
		 "reaper's returns to the pool) is filed into the failed column instead "
		 "(gave_up attempts_exhausted)"},
	{.flag = "threads", .env = "BOARDD_THREADS", .kind = OPT_INT, .off = OFF(threads),
	 .min = 1, .max = 1024, .arg = "N", .def_text = "number of cores",
	 .help = "HTTP worker threads"},
	{.flag = "max-body", .env = "BOARDD_MAX_BODY", .kind = OPT_INT, .off = OFF(max_body),
	 .min = 1, .max = 1 << 30, .arg = "BYTES", .def = "1048576",
	 .help = "largest request body; a larger one is refused 413"},
	{.flag = "max-comments", .env = "BOARDD_MAX_COMMENTS", .kind = OPT_INT,
	 .off = OFF(max_comments), .min = 1, .max = 1000000, .arg = "N", .def = "1000",
	 .help = "comments a card may hold; one more is refused 413"},
	{.flag = "max-connections", .env = "BOARDD_MAX_CONNECTIONS", .kind = OPT_INT,
	 .off = OFF(max_connections), .min = 1, .max = 1000000, .arg = "N", .def = "4096",
	 .help = "open connections in all; more are closed at once"},
	{.flag = "max-connections-per-ip", .env = "BOARDD_MAX_CONNECTIONS_PER_IP",
	 .kind = OPT_INT, .off = OFF(max_connections_per_ip), .min = 1, .max = 1000000,
	 .arg = "N", .def = "512", .help = "open connections from one address"},
	{.flag = "header-timeout-ms", .env = "BOARDD_HEADER_TIMEOUT_MS", .kind = OPT_INT,
	 .off = OFF(header_timeout_ms), .min = 100, .max = 3600000, .arg = "MS", .def = "10000",
	 .help = "a request's headers must arrive whole within this of its first line (a new "
		 "connection's, of its start)"},
	{.flag = "events-wait-max-ms", .env = "BOARDD_EVENTS_WAIT_MAX_MS", .kind = OPT_INT,
	 .off = OFF(events_wait_max_ms), .min = 1, .max = 3600000, .arg = "MS", .def = "30000",
	 .help = "the longest a long-poll (GET /v1/events, claim-next) holds a request (larger waits are cut)"},
	{.flag = "max-streams", .env = "BOARDD_MAX_STREAMS", .kind = OPT_INT,
	 .off = OFF(max_streams), .min = 1, .max = 100000, .arg = "N", .def = "128",
	 .help = "open GET /v1/events/stream answers at once (one token: all but a quarter); one "
		 "more is refused 503"},
	{.flag = "max-answer-bytes", .env = "BOARDD_MAX_ANSWER_BYTES", .kind = OPT_INT,
	 .off = OFF(max_answer_bytes), .min = 1 << 16, .max = (int64_t)1 << 40, .arg = "BYTES",
	 .def = "268435456",
	 .help = "bytes of answers built and not yet read by their clients, all connections "
		 "together; a larger read answer past it is refused 503 busy"},
	{.flag = "stream-heartbeat-ms", .env = "BOARDD_STREAM_HEARTBEAT_MS", .kind = OPT_INT,
	 .off = OFF(stream_heartbeat_ms), .min = 100, .max = 3600000, .arg = "MS",
	 .def = "15000", .help = "a comment line on every event stream this often"},
	{.flag = "log-format", .env = "BOARDD_LOG_FORMAT", .kind = OPT_LOG, .off = OFF(log_format),
	 .arg = "text|json", .def = "text", .help = "format of the access log on stderr"},
	{.flag = "deliverers", .env = "BOARDD_DELIVERERS", .kind = OPT_INT, .off = OFF(deliverers),
	 .min = 0, .max = 64, .arg = "N", .def = "2",
	 .help = "webhook deliverer threads; 0: this replica delivers nothing"},
	{.flag = "delivery-lease-ms", .env = "BOARDD_DELIVERY_LEASE_MS", .kind = OPT_INT,
	 .off = OFF(delivery_lease_ms), .min = 1000, .max = MS_MAX, .arg = "MS", .def = "60000",
	 .help = "lease of a webhook delivery being attempted (more than --delivery-timeout-ms); "
		 "another replica retries it after"},
	{.flag = "delivery-timeout-ms", .env = "BOARDD_DELIVERY_TIMEOUT_MS", .kind = OPT_INT,
	 .off = OFF(delivery_timeout_ms), .min = 100, .max = 3600000, .arg = "MS",
	 .def = "15000", .help = "timeout of one webhook request"},
	{.flag = "tls-cert", .env = "BOARDD_TLS_CERT", .kind = OPT_STR, .off = OFF(tls_cert),
	 .arg = "FILE", .def_text = "none (HTTP)",
	 .help = "PEM certificate chain: serve HTTPS only, TLS 1.2 and 1.3 (with --tls-key); "
		 "re-read on SIGHUP"},
	{.flag = "tls-key", .env = "BOARDD_TLS_KEY", .kind = OPT_STR, .off = OFF(tls_key),
	 .arg = "FILE", .def_text = "none",
	 .help = "PEM private key of --tls-cert; re-read with it on SIGHUP"},
};

#define N_OPTS (sizeof opts / sizeof opts[0])

static bool opt_set(struct server_config *cfg, const struct opt *o, const char *v,
		    const char *from, char *err, size_t errlen);

/* --help, rendered from opts[]: per flag a line "--flag=ARG  (ENV; default D)" and its
 * help text indented below. tests/docs/check_config.py parses this shape. */
void server_config_usage(FILE *out)
{
	size_t i;

	fprintf(out,
		"usage: boardd [OPTION...]\n"
		"       boardd token add --tokens FILE --name NAME --role ROLE [--role ROLE...] "
		"[--board BOARD...]\n"
		"                        [--cap CAP...]\n"
		"       boardd mcp-tools [--markdown]\n"
		"       boardd --help | --version\n\n"
		"boardd serves the board API over HTTP (docs/man/boardd.1, docs/).\n\n"
		"Options; each is also the environment variable shown, and a flag wins over it.\n"
		"A value follows the flag (--listen 0.0.0.0:8080) or an equals sign.\n");
	for (i = 0; i < N_OPTS; i++)
		fprintf(out, "  --%s=%s  (%s; default %s)\n        %s\n", opts[i].flag, opts[i].arg,
			opts[i].env, opts[i].def ? opts[i].def : opts[i].def_text, opts[i].help);
	fprintf(out, "  --help\n        print this text and exit\n"
		     "  --version\n        print the version and the stores built in, and exit\n");
}

static void defaults(struct server_config *cfg)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	char err[128];
	size_t i;

	memset(cfg, 0, sizeof *cfg);
	for (i = 0; i < N_OPTS; i++)
		if (opts[i].def && !opt_set(cfg, &opts[i], opts[i].def, "default", err, sizeof err))
			abort(); /* a bad default in opts[] is a programming error */
	cfg->threads = cores > 0 ? cores : 2;
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
	/* The ADR's own switch first, so BOARDD_REAPER and --reaper can override it; a value
	 * other than on or off is refused as theirs are, not read as off. */
	if (gate_env && strcasecmp(gate_env, "on") != 0 && strcasecmp(gate_env, "off") != 0) {
		snprintf(err, errlen, "ITERION_BOARD_CLAIM_REAPER=%s: expected on or off", gate_env);
		return SERVER_PARSE_ERROR;
	}
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
			printf("boardd %s (stores: fs%s)\n", BOARDD_VERSION,
#ifdef BOARDD_HAVE_MONGO
			       ", mongodb"
#else
			       ""
#endif
			);
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
	/* An attempt's outcome is written under its lease: a lease that can end before the
	 * receiver's answer (timeout) has the delivery sent again and again, never settled. */
	if (cfg->delivery_lease_ms <= cfg->delivery_timeout_ms) {
		snprintf(err, errlen,
			 "--delivery-lease-ms (%" PRId64 ") must exceed --delivery-timeout-ms (%" PRId64
			 "): an attempt outliving its lease would be sent again and again",
			 (int64_t)cfg->delivery_lease_ms, (int64_t)cfg->delivery_timeout_ms);
		return SERVER_PARSE_ERROR;
	}
	/* Refused before anything is opened (exit 2): a typo in a scheme is not a directory. */
	if (strncmp(cfg->store, "fs:", 3) != 0 && strncmp(cfg->store, "mongodb://", 10) != 0 &&
	    strncmp(cfg->store, "mongodb+srv://", 14) != 0) {
		snprintf(err, errlen, "--store %s: expected fs:DIR or mongodb://...", cfg->store);
		return SERVER_PARSE_ERROR;
	}
	if (!cfg->store[3] && cfg->store[0] == 'f') {
		snprintf(err, errlen, "--store fs: needs a directory (fs:DIR)");
		return SERVER_PARSE_ERROR;
	}
	if (!api_listen_valid(cfg->listen, err, errlen))
		return SERVER_PARSE_ERROR;
	if (!cfg->tls_cert != !cfg->tls_key) {
		snprintf(err, errlen, "--tls-cert and --tls-key go together (BOARDD_TLS_CERT, "
				      "BOARDD_TLS_KEY)");
		return SERVER_PARSE_ERROR;
	}
	return SERVER_PARSE_RUN;
}
