/* The database's reachability (the breaker; its rules are core_breaker_*, core.h).
 *
 * Without it, every op waits out the driver's server selection (serverSelectionTimeoutMS,
 * 5 s unless the URI says) while the database cannot be reached, on the HTTP worker thread
 * that called it: two card requests then hold both threads and /healthz, /metrics and the UI
 * stop answering for as long as the database is down. So:
 *
 *  - It OPENS on evidence that the database cannot be reached: an op's driver error that says
 *    so (mgo_error notes it, mgo_conn_close reports it: mgo_error_unreachable lists which),
 *    or the driver's topology losing its writable server (its monitor's heartbeat failed, or
 *    an op's network error marked the server unknown: on_topology_changed, mongo_stats.c).
 *  - While open, an op fails at mgo_conn_open with STORE_UNAVAILABLE (503) before it takes a
 *    client, and /readyz (mgo_breaker_ready) answers 503 from the state alone.
 *  - The prober thread tests reachability, one probe at a time (the first at once, then after
 *    250 ms doubling to 2 s): a ping on a client of its own, single-threaded and made for the
 *    probe, whose server selection, connect and socket timeouts are at most MGO_PROBE_MS.
 *    A probe that reaches the primary CLOSES it, and so does the driver's topology finding a
 *    writable server again.
 *
 * What an op in flight when the database went away does is unchanged: its command fails with
 * the driver's error (a write whose outcome is unknown answers 503 as before: nothing here
 * turns it into a definite failure). One line is logged when the breaker opens and one when
 * it closes; the ops it refuses log nothing. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* What this thread's last op could not reach, until mgo_conn_close reports it. Every driver
 * call runs inside an open connection, so a note never outlives the op that made it. */
static _Thread_local struct {
	bool set;
	char why[160];
} note;

bool mgo_error_unreachable(const bson_error_t *e)
{
	switch (e->domain) {
	case MONGOC_ERROR_STREAM:
		return e->code == MONGOC_ERROR_STREAM_NAME_RESOLUTION ||
		       e->code == MONGOC_ERROR_STREAM_SOCKET ||
		       e->code == MONGOC_ERROR_STREAM_CONNECT ||
		       e->code == MONGOC_ERROR_STREAM_NOT_ESTABLISHED;
	case MONGOC_ERROR_SERVER_SELECTION:
		return e->code == MONGOC_ERROR_SERVER_SELECTION_FAILURE;
	case MONGOC_ERROR_SERVER:
		/* The server answered, but it is no primary (any more) or is going away. */
		switch (e->code) {
		case 91:    /* ShutdownInProgress */
		case 189:   /* PrimarySteppedDown */
		case 10107: /* NotWritablePrimary */
		case 11600: /* InterruptedAtShutdown */
		case 11602: /* InterruptedDueToReplStateChange */
		case 13435: /* NotPrimaryNoSecondaryOk */
		case 13436: /* NotPrimaryOrSecondary */
			return true;
		default:
			return false;
		}
	default:
		return false;
	}
}

void mgo_breaker_note(const char *what, const bson_error_t *e)
{
	if (!mgo_error_unreachable(e) || note.set)
		return;
	note.set = true;
	/* cut to the buffer: the whole text went to the log with the op's own line */
	snprintf(note.why, sizeof(note.why), "%.40s: %.*s", what, (int)sizeof(note.why) - 48,
		 e->message);
}

bool mgo_breaker_noted(void)
{
	return note.set;
}

/* The word ops read without the lock: generation << 1 | open. Under brk_mu. */
static void publish(struct mgo *m)
{
	atomic_store_explicit(&m->brk_word, m->brk.gen << 1 | (m->brk.open ? 1u : 0u),
			      memory_order_release);
}

/* Opens the breaker (under brk_mu) for a call of generation gen; one line when it did. */
static void trip(struct mgo *m, uint64_t gen, const char *why)
{
	if (!core_breaker_fail(&m->brk, gen, mgo_mono_ms()))
		return;
	m->brk_opened_ms = m->brk.since_ms;
	publish(m);
	pthread_cond_signal(&m->brk_cv);
	fprintf(stderr,
		"boardd: mongo: the database is unreachable (%s): requests that need it answer "
		"503 at once until a probe reaches it\n",
		why);
}

/* Logs a close (under brk_mu) that `closed` says happened. */
static void closed_log(struct mgo *m, bool closed, const char *how)
{
	if (!closed)
		return;
	publish(m);
	fprintf(stderr,
		"boardd: mongo: the database is reachable again (%s) after %" PRId64
		" ms unreachable, %" PRIu64 " probes failed\n",
		how, m->brk.since_ms - m->brk_opened_ms, m->brk.probes_failed);
}

enum core_rc mgo_breaker_enter(struct mgo *m, uint64_t *gen)
{
	uint64_t w = atomic_load_explicit(&m->brk_word, memory_order_acquire);

	if (w & 1)
		return CORE_ERR_STORE_UNAVAILABLE;
	*gen = w >> 1;
	return CORE_OK;
}

void mgo_breaker_leave(struct mgo *m, uint64_t gen)
{
	if (!note.set)
		return;
	note.set = false;
	if (!atomic_load_explicit(&m->brk_on, memory_order_acquire))
		return; /* store_mongo_open: its own error answers */
	pthread_mutex_lock(&m->brk_mu);
	trip(m, gen, note.why);
	pthread_mutex_unlock(&m->brk_mu);
}

void mgo_breaker_topology(struct mgo *m, bool writable_before, bool writable_now)
{
	if (writable_before == writable_now ||
	    !atomic_load_explicit(&m->brk_on, memory_order_acquire))
		return;
	pthread_mutex_lock(&m->brk_mu);
	if (!writable_now) {
		trip(m, m->brk.gen, "the driver's monitor lost the writable server");
	} else {
		closed_log(m, core_breaker_reached(&m->brk, mgo_mono_ms()),
			   "the driver's monitor found the server");
	}
	pthread_mutex_unlock(&m->brk_mu);
}

enum core_rc mgo_breaker_ready(struct mgo *m)
{
	return atomic_load_explicit(&m->brk_word, memory_order_acquire) & 1
		       ? CORE_ERR_STORE_UNAVAILABLE
		       : CORE_OK;
}

void mgo_breaker_collect(struct mgo *m, struct metrics_sink *out)
{
	uint64_t opens;
	bool open;

	pthread_mutex_lock(&m->brk_mu);
	open = m->brk.open;
	opens = m->brk.opens;
	pthread_mutex_unlock(&m->brk_mu);
	metrics_sink_value(out, METRICS_MONGO_UNREACHABLE, NULL, open ? 1 : 0);
	metrics_sink_value(out, METRICS_MONGO_OUTAGES, NULL, (double)opens);
}

/* One ping of the primary on a client made for it (no cooldown left over from a failed
 * one, no pooled socket that may be dead). */
static bool probe(struct mgo *m)
{
	mongoc_client_t *client = mongoc_client_new_from_uri(m->probe_uri);
	bson_t cmd = BSON_INITIALIZER;
	bool ok;

	if (!client)
		return false;
	mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
	BSON_APPEND_INT32(&cmd, "ping", 1);
	ok = mongoc_client_command_simple(client, "admin", &cmd, NULL, NULL, NULL);
	bson_destroy(&cmd);
	mongoc_client_destroy(client);
	return ok;
}

static void *prober_main(void *arg)
{
	struct mgo *m = arg;
	struct timespec until;
	int64_t wait;
	bool reached;

	pthread_mutex_lock(&m->brk_mu);
	while (!m->brk_stopping) {
		wait = core_breaker_probe_wait(&m->brk, mgo_mono_ms());
		if (wait < 0) {
			pthread_cond_wait(&m->brk_cv, &m->brk_mu);
			continue;
		}
		if (wait > 0) {
			clock_gettime(CLOCK_MONOTONIC, &until);
			core_timespec_add_ns(&until, wait * 1000000);
			pthread_cond_timedwait(&m->brk_cv, &m->brk_mu, &until);
			continue;
		}
		if (!core_breaker_probe_begin(&m->brk, mgo_mono_ms()))
			continue;
		pthread_mutex_unlock(&m->brk_mu);
		reached = probe(m);
		pthread_mutex_lock(&m->brk_mu);
		closed_log(m, core_breaker_probe_end(&m->brk, reached, mgo_mono_ms()),
			   "a probe reached it");
	}
	pthread_mutex_unlock(&m->brk_mu);
	return NULL;
}

/* The pool's URI with the probe's short timeouts (never longer than the URI's own). */
static mongoc_uri_t *probe_uri(const mongoc_uri_t *uri)
{
	static const char *const opts[] = {MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
					   MONGOC_URI_CONNECTTIMEOUTMS, MONGOC_URI_SOCKETTIMEOUTMS};
	mongoc_uri_t *p = mongoc_uri_copy(uri);
	size_t i;

	if (!p)
		return NULL;
	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		int32_t v = mongoc_uri_get_option_as_int32(p, opts[i], MGO_PROBE_MS);

		if (v <= 0 || v > MGO_PROBE_MS)
			v = MGO_PROBE_MS;
		mongoc_uri_set_option_as_int32(p, opts[i], v);
	}
	mongoc_uri_set_option_as_bool(p, MONGOC_URI_SERVERSELECTIONTRYONCE, true);
	return p;
}

bool mgo_breaker_init(struct mgo *m, const mongoc_uri_t *uri)
{
	pthread_condattr_t ca;
	bool ok;

	core_breaker_init(&m->brk, mgo_mono_ms());
	publish(m);
	if (!(m->probe_uri = probe_uri(uri)))
		return false;
	if (pthread_condattr_init(&ca) != 0)
		goto fail_uri;
	ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
	     pthread_cond_init(&m->brk_cv, &ca) == 0;
	pthread_condattr_destroy(&ca);
	if (!ok)
		goto fail_uri;
	if (pthread_mutex_init(&m->brk_mu, NULL) != 0)
		goto fail_cv;
	m->brk_init = true;
	return true;
fail_cv:
	pthread_cond_destroy(&m->brk_cv);
fail_uri:
	mongoc_uri_destroy(m->probe_uri);
	m->probe_uri = NULL;
	return false;
}

bool mgo_breaker_start(struct mgo *m)
{
	if (pthread_create(&m->brk_thread, NULL, prober_main, m) != 0)
		return false;
	m->brk_started = true;
	atomic_store_explicit(&m->brk_on, true, memory_order_release);
	return true;
}

void mgo_breaker_stop(struct mgo *m)
{
	atomic_store_explicit(&m->brk_on, false, memory_order_release);
	if (m->brk_started) {
		pthread_mutex_lock(&m->brk_mu);
		m->brk_stopping = true;
		pthread_cond_signal(&m->brk_cv);
		pthread_mutex_unlock(&m->brk_mu);
		pthread_join(m->brk_thread, NULL);
		m->brk_started = false;
	}
}

void mgo_breaker_fini(struct mgo *m)
{
	mgo_breaker_stop(m);
	if (m->brk_init) {
		pthread_mutex_destroy(&m->brk_mu);
		pthread_cond_destroy(&m->brk_cv);
		m->brk_init = false;
	}
	if (m->probe_uri)
		mongoc_uri_destroy(m->probe_uri);
	m->probe_uri = NULL;
}
