/* What the standalone Mongo probes share (mongo_probe.h). */
#include "tests/common/mongo_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mongo_probe_uri(int argc, char **argv, const char *usage, bool *test, const char **uri_s)
{
	*test = argc > 1 && strcmp(argv[1], "--test") == 0;
	*uri_s = *test ? getenv("BOARDD_TEST_MONGO_URI") : argc > 1 ? argv[1] : NULL;
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "%s\n", usage);
		return 2;
	}
	if (!*uri_s) {
		const char *ci = getenv("CI");

		printf("SKIP: BOARDD_TEST_MONGO_URI is not set (tests/run.sh sets it)\n");
		return ci && strcmp(ci, "true") == 0 ? 1 : 77;
	}
	return -1;
}

mongoc_client_pool_t *mongo_probe_pool(const char *prog, const char *uri_s, int size,
				       mongoc_uri_t **uri)
{
	mongoc_client_pool_t *pool;
	bson_error_t err;

	mongoc_init();
	*uri = mongoc_uri_new_with_error(uri_s, &err);
	if (!*uri) {
		fprintf(stderr, "%s: %s: %s\n", prog, uri_s, err.message);
		return NULL;
	}
	mongoc_uri_set_option_as_int32(*uri, MONGOC_URI_MAXPOOLSIZE, size);
	pool = mongoc_client_pool_new(*uri);
	mongoc_client_pool_set_error_api(pool, MONGOC_ERROR_API_VERSION_2);
	return pool;
}

bool mongo_probe_command(const char *prog, mongoc_client_t *c, const char *db, bson_t *cmd,
			 bson_t *reply)
{
	bson_error_t err;
	bool ok = mongoc_client_command_simple(c, db, cmd, NULL, reply, &err);

	if (!ok)
		fprintf(stderr, "%s: %s\n", prog, err.message);
	bson_destroy(cmd);
	return ok;
}

bool mongo_probe_is_ferretdb(const char *prog, mongoc_client_t *c)
{
	bson_t reply;
	bson_iter_t it;
	bool yes = false;

	if (mongo_probe_command(prog, c, "admin", BCON_NEW("buildInfo", BCON_INT32(1)), &reply))
		yes = bson_iter_init_find(&it, &reply, "ferretdbVersion");
	bson_destroy(&reply);
	return yes;
}
