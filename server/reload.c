/* SIGHUP: re-read what can change under a running server. One row per step; a step that
 * cannot load its new state keeps the old one and says why, so a typo in a file never takes
 * a running server's credentials away. Add a step as one row. */
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>

/* Re-reads the tokens file; the api checks every new request against the new set. */
static bool reload_tokens(const struct server_reload_ctx *ctx, char *err, size_t errlen)
{
	struct api_tokens fresh = {0};
	char *path = server_tokens_path(ctx->cfg);
	enum core_rc rc;
	size_t n;

	if (!path) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	if (api_tokens_load(path, &fresh, err, errlen) != CORE_OK) {
		free(path);
		return false;
	}
	n = fresh.n;
	rc = api_tokens_replace(ctx->api, &fresh);
	api_tokens_release(&fresh); /* empty unless the replacement failed */
	if (rc != CORE_OK) {
		snprintf(err, errlen, "out of memory");
		free(path);
		return false;
	}
	fprintf(stderr, "boardd: SIGHUP: tokens: %zu from %s\n", n, path);
	free(path);
	return true;
}

/* Re-reads the TLS certificate and key; new handshakes get them, the listener stays. */
static bool reload_tls(const struct server_reload_ctx *ctx, char *err, size_t errlen)
{
	if (!ctx->cfg->tls_cert)
		return true; /* plain HTTP: nothing to re-read */
	if (api_tls_reload(ctx->api, err, errlen) != CORE_OK)
		return false;
	fprintf(stderr, "boardd: SIGHUP: tls: certificate and key re-read from %s and %s\n",
		ctx->cfg->tls_cert, ctx->cfg->tls_key);
	return true;
}

static const struct {
	const char *what;
	bool (*run)(const struct server_reload_ctx *ctx, char *err, size_t errlen);
} steps[] = {
	{"tokens", reload_tokens},
	{"tls", reload_tls},
};

int server_reload(const struct server_reload_ctx *ctx)
{
	char err[512];
	int failed = 0;
	size_t i;

	for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		err[0] = '\0';
		if (steps[i].run(ctx, err, sizeof err))
			continue;
		failed++;
		fprintf(stderr, "boardd: SIGHUP: %s: %s; keeping the ones loaded before\n",
			steps[i].what, err[0] ? err : "failed");
	}
	return failed;
}
