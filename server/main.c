/* boardd: parse the configuration, open the store, set up tokens, start the reaper and the
 * HTTP api, wait for SIGTERM/SIGINT (SIGHUP: server_reload), then shut down in order: stop accepting, finish
 * in-flight requests, stop the reaper, close the store. */
#include "server/deliver.h"
#include "server/reaper.h"
#include "server/server.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* Every connection is a descriptor: the soft limit (often 1024) is raised toward the hard
 * one so --max-connections can be reached; a warning when even that is too low. */
static void fd_limit_raise(const struct server_config *cfg)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)cfg->max_connections + 256; /* store, journal, threads, listen */

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < want)
		fprintf(stderr,
			"boardd: warning: at most %llu open files (ulimit -n): fewer than "
			"--max-connections %lld can be served\n",
			(unsigned long long)rl.rlim_cur, (long long)cfg->max_connections);
}

int main(int argc, char **argv)
{
	struct server_config cfg;
	struct api_config acfg;
	struct api_tokens tokens = {0};
	struct store *st = NULL;
	struct api *api = NULL;
	struct server_reaper_config rcfg = {0};
	struct server_reaper *reaper = NULL;
	struct server_sampler *sampler = NULL;
	struct server_deliver_config dcfg = {0};
	struct server_deliver *deliver = NULL;
	const char *scale = getenv("BOARDD_TEST_DELIVERY_TIME_SCALE");
	struct metrics *metrics = NULL;
	char err[512];
	sigset_t sigs;
	int sig = 0, code = 1;

	if (argc > 1 && strcmp(argv[1], "token") == 0)
		return server_token_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "mcp-tools") == 0)
		return server_mcp_tools_main(argc - 1, argv + 1);
	switch (server_config_parse(&cfg, argc, argv, err, sizeof err)) {
	case SERVER_PARSE_EXIT:
		return 0;
	case SERVER_PARSE_ERROR:
		fprintf(stderr, "boardd: %s\n", err);
		return 2;
	case SERVER_PARSE_RUN:
		break;
	}

	/* Every thread started from here on inherits the blocked set; main waits in sigwait. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	fd_limit_raise(&cfg);
	/* Requests allocate on one thread's arena and are often freed on another's (the store's
	 * acker, the access log): with glibc's default, sliding trim threshold a thread's heap
	 * shrank (madvise, mprotect) and grew again (page faults) under load, ~1 % of the
	 * server's CPU in the claim-cycle profile. A fixed threshold keeps freed memory up to
	 * 64 MiB per arena for the next requests (bench/README.md). */
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	metrics = metrics_new();
	if (!metrics) {
		fprintf(stderr, "boardd: out of memory\n");
		goto out;
	}
	if (store_open(cfg.store,
		       &(struct store_open_options){.unleased_horizon_ms = cfg.unleased_horizon_ms},
		       &st, err, sizeof err) != CORE_OK) {
		fprintf(stderr, "boardd: store %s: %s\n", cfg.store, err);
		goto out;
	}
	store_limits_set(st, (size_t)cfg.max_comments);
	/* DESIGN §17: --run-ceiling is the max_attempts of every board without a retry policy
	 * (the retry releases and the reaper's returns to the pool both count against it). */
	store_retry_default_set(st, (int32_t)cfg.run_ceiling);
	if (!server_tokens_setup(&cfg, &tokens, err, sizeof err)) {
		fprintf(stderr, "boardd: tokens: %s\n", err);
		goto out;
	}

	api_config_init(&acfg);
	acfg.listen = cfg.listen;
	acfg.threads = (unsigned)cfg.threads;
	acfg.max_body = (size_t)cfg.max_body;
	acfg.max_connections = (unsigned)cfg.max_connections;
	acfg.max_connections_per_ip = (unsigned)cfg.max_connections_per_ip;
	acfg.header_timeout_ms = (unsigned)cfg.header_timeout_ms;
	acfg.events_wait_max_ms = cfg.events_wait_max_ms;
	acfg.max_streams = (unsigned)cfg.max_streams;
	acfg.max_answer_bytes = (size_t)cfg.max_answer_bytes;
	acfg.stream_heartbeat_ms = cfg.stream_heartbeat_ms;
	acfg.lease_default_ms = cfg.lease_default_ms;
	acfg.lease_min_ms = cfg.lease_min_ms;
	acfg.lease_max_ms = cfg.lease_max_ms;
	acfg.tokens = &tokens;
	acfg.log_format = cfg.log_format;
	acfg.metrics = metrics;
	acfg.version = BOARDD_VERSION;
	acfg.tls_cert = cfg.tls_cert;
	acfg.tls_key = cfg.tls_key;

	/* The reaper starts before the api: its startup repair sweep runs before any client. */
	rcfg.gate = cfg.reaper_gate;
	rcfg.interval_ms = cfg.reaper_interval_ms;
	rcfg.batch = (size_t)cfg.reaper_batch;
	rcfg.lease_ms = cfg.lease_default_ms;
	rcfg.metrics = metrics;
	/* ADR-096 §7: only the shared (Mongo) twin reparks to eligible[0]; the FS twin releases
	 * in place (its running column is eligible). Both count the return as an attempt. */
	rcfg.repark_to_pool = strcmp(store_name(st), "fs") != 0;
	if (server_reaper_new(st, &rcfg, &reaper) != CORE_OK ||
	    server_reaper_start(reaper) != CORE_OK) {
		fprintf(stderr, "boardd: cannot start the reaper\n");
		goto out;
	}
	acfg.reaper = (struct api_reaper_hooks){server_reaper_hook_status, server_reaper_hook_pass,
						reaper};

	dcfg.threads = (unsigned)cfg.deliverers;
	dcfg.lease_ms = cfg.delivery_lease_ms;
	dcfg.timeout_ms = cfg.delivery_timeout_ms;
	dcfg.metrics = metrics;
	/* Test only: the retry schedule divided by this (README: test-only variables). */
	dcfg.time_scale = scale ? strtod(scale, NULL) : 1;
	if (server_deliver_start(st, &dcfg, &deliver) != CORE_OK) {
		fprintf(stderr, "boardd: cannot start the webhook deliverers\n");
		goto out;
	}

	if (server_sampler_start(st, metrics, &sampler) != CORE_OK)
		fprintf(stderr, "boardd: no activity sampler: cards per column sampled when read\n");
	if (api_start(&acfg, st, &api, err, sizeof err) != CORE_OK) {
		fprintf(stderr, "boardd: %s\n", err);
		goto out;
	}
	if (api_port(api)) /* a TCP port (0: a socket file, named by cfg.listen) */
		snprintf(err, sizeof err, " (port %u)", (unsigned)api_port(api));
	else
		err[0] = '\0';
	fprintf(stderr, "boardd %s: listening on %s%s over %s, store %s (%s), reaper gate %s\n",
		BOARDD_VERSION, cfg.listen, err, cfg.tls_cert ? "https, TLS 1.2+" : "http",
		cfg.store, store_name(st), cfg.reaper_gate ? "on" : "off");

	for (;;) {
		if (sigwait(&sigs, &sig) != 0)
			continue;
		if (sig != SIGHUP)
			break;
		server_reload(&(struct server_reload_ctx){.cfg = &cfg, .api = api});
	}
	fprintf(stderr, "boardd: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	api_quiesce(api);
	api_stop(api); /* finishes in-flight requests */
	api = NULL;
	/* After the api, so no /v1/reaper/pass runs against a stopped reaper; the reaper stops
	 * between two cards, never mid-write. */
	server_reaper_stop(reaper);
	code = 0;
out:
	api_stop(api);
	server_deliver_stop(deliver); /* an attempt in flight finishes or times out first */
	server_sampler_stop(sampler);
	server_reaper_free(reaper);
	store_close(st);
	api_tokens_release(&tokens);
	metrics_free(metrics);
	return code;
}
