/* What the standalone Mongo probes share (tests/store/mongo_race.c, tests/tools/mjs_inc.c):
 * the URI from the command line or --test's BOARDD_TEST_MONGO_URI, a client pool sized for
 * the racers, a command run and checked, and whether the server is FerretDB. */
#ifndef BOARDD_TESTS_MONGO_PROBE_H
#define BOARDD_TESTS_MONGO_PROBE_H

#include <mongoc/mongoc.h>
#include <stdbool.h>

/* The URI a probe runs against: argv[1], or with `--test` the environment's
 * BOARDD_TEST_MONGO_URI. Returns -1 to go on (*uri_s set), else the exit status: 2 on bad
 * usage (prints `usage`), 77 to skip when --test finds no URI (1 in CI, where the Mongo suite
 * must run). */
int mongo_probe_uri(int argc, char **argv, const char *usage, bool *test, const char **uri_s);
/* mongoc_init and a pool of up to `size` clients on uri_s with the v2 error API; NULL (said
 * on stderr, prefixed by `prog`) when the URI does not parse. *uri is the caller's to free. */
mongoc_client_pool_t *mongo_probe_pool(const char *prog, const char *uri_s, int size,
				       mongoc_uri_t **uri);
/* Runs cmd (destroyed here) on db; false (said on stderr) when it fails. reply is always
 * initialised: bson_destroy it. */
bool mongo_probe_command(const char *prog, mongoc_client_t *c, const char *db, bson_t *cmd,
			 bson_t *reply);
/* buildInfo names FerretDB (ferretdbVersion). */
bool mongo_probe_is_ferretdb(const char *prog, mongoc_client_t *c);

#endif
