/* server — boardd's process: configuration (flags + BOARDD_* environment), tokens bootstrap,
 * the `boardd token add` subcommand, signals, and the wiring of store, api and reaper. */
#ifndef BOARDD_SERVER_H
#define BOARDD_SERVER_H

#include "api/api.h"

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

/* The parsed settings of DESIGN §10. Strings are borrowed from argv/environ (process
 * lifetime) or static defaults. The reaper reads interval, batch, horizon, gate and the lease
 * default from here; the store takes run_ceiling as its default max_attempts (DESIGN §17). */
struct server_config {
	const char *listen;           /* --listen 127.0.0.1:8080 */
	const char *store;            /* --store fs:./data */
	const char *tokens;           /* --tokens FILE; NULL: DATADIR/tokens.json bootstrap */
	int64_t lease_default_ms;     /* 900000 */
	int64_t lease_min_ms;         /* 1000 */
	int64_t lease_max_ms;         /* 86400000 */
	int64_t reaper_interval_ms;   /* 60000 */
	int64_t reaper_batch;         /* 100 */
	int64_t unleased_horizon_ms;  /* 86400000 */
	int64_t run_ceiling;          /* 20 */
	int64_t threads;              /* number of cores */
	int64_t max_body;             /* 1048576 */
	int64_t max_connections;      /* 4096 */
	int64_t max_connections_per_ip; /* 512 */
	int64_t header_timeout_ms;    /* 10000 */
	int64_t events_wait_max_ms;   /* 30000 */
	int64_t max_streams;          /* 128: open event streams (DESIGN §15) */
	int64_t max_answer_bytes;     /* 268435456: answers built, not yet read by their clients */
	int64_t stream_heartbeat_ms;  /* 15000: the idle stream's comment line */
	int64_t max_comments;         /* 1000 (DESIGN §11) */
	enum api_log_format log_format;
	bool reaper_gate;             /* --reaper=on / ITERION_BOARD_CLAIM_REAPER=on; default off */
	int64_t deliverers;           /* webhook deliverer threads (2; 0: none) */
	int64_t delivery_lease_ms;    /* 60000 */
	int64_t delivery_timeout_ms;  /* 15000 */
	const char *tls_cert;         /* --tls-cert FILE (PEM chain); NULL: plain HTTP */
	const char *tls_key;          /* --tls-key FILE (PEM key); with tls_cert */
};



/* The activity sampler (server/sampler.c): each minute, every board's cards per column into
 * m's activity ring. st and m are borrowed and must outlive it. */
struct server_sampler;
enum core_rc server_sampler_start(struct store *st, struct metrics *m, struct server_sampler **out);
/* Stops and joins the thread, frees s. NULL: nothing. */
void server_sampler_stop(struct server_sampler *s);

enum server_parse_result {
	SERVER_PARSE_RUN,   /* start the server */
	SERVER_PARSE_EXIT,  /* --help / --version printed: exit 0 */
	SERVER_PARSE_ERROR, /* message in err: exit 2 */
};

/* Fills cfg from defaults, then the environment, then argv (flags win). */
enum server_parse_result server_config_parse(struct server_config *cfg, int argc, char **argv,
					     char *err, size_t errlen);
void server_config_usage(FILE *out);

/* `boardd token add ...` (argv[0] == "token"); returns the process exit code. */
int server_token_main(int argc, char **argv);
/* `boardd mcp-tools [--markdown]`: prints the MCP tools (api_mcp_tools_render). */
int server_mcp_tools_main(int argc, char **argv);

/* Loads cfg->tokens, or bootstraps DATADIR/tokens.json (printing new plain tokens once to
 * stderr). *out is zeroed by the caller; returns false with err filled on failure. */
bool server_tokens_setup(const struct server_config *cfg, struct api_tokens *out, char *err,
			 size_t errlen);

/* SIGHUP: what a running server re-reads (server/reload.c). Each step is one row of a table;
 * a step that fails keeps what it had and says why on stderr. */
struct server_reload_ctx {
	const struct server_config *cfg;
	struct api *api;
};
/* Runs every reload step; returns how many failed. */
int server_reload(const struct server_reload_ctx *ctx);
/* The tokens file the server reads: cfg->tokens, or DATADIR/tokens.json (new string, caller
 * frees; NULL on OOM or a store spec without a directory). */
char *server_tokens_path(const struct server_config *cfg);

#endif
