/* The Mongo twin's "now" is the database server's clock (ADR-096 §1, DESIGN §9): a replica
 * whose local clock runs fast must not mint itself extra lease, and every replica stamps
 * leases, claimed_at, epochs and the reaper's "now" on one time line.
 *
 * A sample runs `hello` and reads its localTime; the reply left the server somewhere within
 * the round trip, so the sample is localTime + rtt/2 at the instant the reply arrived (an
 * error of at most rtt/2). Between samples the time is extrapolated with CLOCK_MONOTONIC,
 * which no wall-clock step can move; the maintenance thread re-samples every
 * MGO_RESAMPLE_MS. If a re-sample fails the last one keeps extrapolating.
 *
 * The local wall clock is read only for the diagnostic offset (logged when it exceeds a
 * second). BOARDD_TEST_LOCAL_CLOCK_SKEW_MS (test only, never for deployments) skews that
 * local reading, so a test can show that a skewed replica still stamps the server's time.
 */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int64_t mgo_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mgo_clock_local_ms(const struct mgo *m)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + m->local_skew_ms;
}

enum core_rc mgo_clock_init(struct mgo *m, char *err, size_t errlen)
{
	const char *skew = getenv("BOARDD_TEST_LOCAL_CLOCK_SKEW_MS");
	char *end;

	if (skew && *skew) {
		errno = 0;
		m->local_skew_ms = strtoll(skew, &end, 10);
		if (errno || *end) {
			snprintf(err, errlen, "BOARDD_TEST_LOCAL_CLOCK_SKEW_MS: not an integer");
			return CORE_ERR_BAD_REQUEST;
		}
	}
	if (pthread_mutex_init(&m->clock_mu, NULL) != 0) {
		snprintf(err, errlen, "mongo store: cannot initialise the clock");
		return CORE_ERR_INTERNAL;
	}
	return CORE_OK;
}

void mgo_clock_release(struct mgo *m)
{
	pthread_mutex_destroy(&m->clock_mu);
}

enum core_rc mgo_clock_sample(struct mgo *m)
{
	struct mgo_conn c;
	bson_t cmd = BSON_INITIALIZER, reply = BSON_INITIALIZER;
	bson_iter_t it;
	bson_error_t e;
	int64_t t0, t1, server = 0, local, offset;
	enum core_rc rc = mgo_conn_open_bare(m, &c);
	mongoc_client_t *client = c.client;
	bool ok, slow = false;

	if (rc != CORE_OK)
		return rc; /* the breaker is open: the last sample keeps extrapolating */
	rc = CORE_ERR_STORE_UNAVAILABLE;
	/* A ping first, so the timed round trip pays for neither a new connection nor a wait
	 * in server selection; a server that does not answer it is not sampled. */
	BSON_APPEND_INT32(&cmd, "ping", 1);
	ok = mongoc_client_command_simple(client, "admin", &cmd, NULL, NULL, &e);
	bson_reinit(&cmd);
	BSON_APPEND_INT32(&cmd, "hello", 1);
	t0 = mgo_mono_ms();
	ok = ok && mongoc_client_command_simple(client, "admin", &cmd, NULL, &reply, &e);
	t1 = mgo_mono_ms();
	if (!ok) {
		rc = mgo_error("server clock", &e);
	} else if (m->clock_mono_ms && t1 - t0 > MGO_SAMPLE_MAX_RTT_MS) {
		slow = true; /* too slow to say much: the last sample keeps extrapolating */
		rc = CORE_OK;
	} else if (bson_iter_init_find(&it, &reply, "localTime") && BSON_ITER_HOLDS_DATE_TIME(&it)) {
		server = bson_iter_date_time(&it) + (t1 - t0) / 2;
		rc = CORE_OK;
	} else {
		fprintf(stderr, "boardd: mongo: hello has no localTime: cannot read the server clock\n");
	}
	bson_destroy(&reply);
	bson_destroy(&cmd);
	mgo_conn_close(&c);
	if (rc != CORE_OK || slow)
		return rc;
	local = mgo_clock_local_ms(m);
	offset = server - local;
	pthread_mutex_lock(&m->clock_mu);
	m->clock_server_ms = server;
	m->clock_mono_ms = t1;
	if (llabs(offset - m->clock_offset_ms) > 1000 && llabs(offset) > 1000)
		fprintf(stderr,
			"boardd: mongo: local clock is %+" PRId64 " ms off the database server's; "
			"leases follow the server\n",
			-offset);
	m->clock_offset_ms = offset;
	pthread_mutex_unlock(&m->clock_mu);
	return CORE_OK;
}

int64_t mgo_clock_now(struct store *st)
{
	struct mgo *m = mgo_of(st);
	int64_t now;

	pthread_mutex_lock(&m->clock_mu);
	now = m->clock_server_ms + (mgo_mono_ms() - m->clock_mono_ms);
	/* A re-sample may land a little behind the extrapolation (rtt noise, a server clock
	 * step): "now" never goes backwards, so no lease or age computed from it does. */
	if (now < m->clock_last_ms)
		now = m->clock_last_ms;
	m->clock_last_ms = now;
	pthread_mutex_unlock(&m->clock_mu);
	return now;
}
