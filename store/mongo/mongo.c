/* The Mongo twin (DESIGN §9, ADR-096): open (pool, indexes, server clock, first board),
 * close, ping, the ops table and the maintenance thread. mongo.h has the document shapes.
 *
 * Every fenced or rule-checked card write is ONE conditional update (findAndModify) whose
 * filter carries the whole precondition core decided on (mongo_cas.c); a concurrent change
 * makes it a clean miss, which re-reads and answers NOT_FOUND or the rule's own conflict.
 * Only update operators and filters that MongoDB >= 5.0 and FerretDB 1.24 both accept are
 * used: no pipeline updates, no $$NOW, no $expr, no transactions (README.md lists them).
 *
 * ---- Where this twin cannot be atomic, and what it does about it ----
 *
 * Without multi-document transactions only a single-document update is atomic (and on
 * FerretDB 1.24 not even that under concurrency: its updates are read-modify-write, so two
 * racing conditional updates on one document may both "match"; production runs on MongoDB).
 *
 *  1. Card (or run, or board) change + its events. ATOMIC via the outbox: the events ride in
 *     the same update as the change ($push outbox) and are moved to `events` right after; a
 *     writer that dies or fails in between leaves them in the outbox, and the maintenance
 *     thread delivers them within ~15 s (it skips events already stored — _id = event id —
 *     and only pulls those). The seq is assigned at delivery: seq order is delivery order,
 *     not commit order, and an event waiting in an outbox is not yet in the tail. Once
 *     stored, the entries are pulled from the outbox by the puller thread in bulk
 *     (mongo_pull.c; on FerretDB by the writer): an entry pulled late is only one a
 *     re-delivery finds stored and pulls.
 *  2. Card delete + card_deleted. NOT atomic: the document (and its outbox) is gone, so
 *     whatever its outbox still held and then card_deleted are inserted after the delete; a
 *     failure there is logged and the delete still answers OK (it happened). The audit tail
 *     can miss those events.
 *  3. Seq allocation + event insert. Two round trips (the allocation shared by the writers
 *     of this process asking at once: mgo_seqs_take): a writer can die holding a seq. The
 *     tail serves only the prefix without holes and skips a hole once the event after it is
 *     MGO_GAP_GRACE_MS old (mongo_tail.c). The counter is not the arbiter of a seq (on
 *     FerretDB its $inc is not atomic under concurrency and hands a seq out twice): the
 *     unique index on events.seq is. An insert that meets a taken seq re-reads what was
 *     stored and retries the rest with new seqs; its outbox is pulled only once every event
 *     is in `events`, and the seqs it did not use are filled so no reader waits on them.
 *  4. Entering the completed column + the unblocked cascade. The move commits first; each
 *     dependent is then promoted by its own conditional update on (state, blockers). A crash
 *     or failure in between leaves those dependents in the waiting column (logged); an
 *     operator moves them. A dependent changed meanwhile is not overwritten.
 *  5. Blocker checks (existence, same board, no cycle) and Reopen's dependents_outstanding
 *     guard read OTHER cards before the write; those reads are not part of the write's
 *     precondition. A concurrent blockers edit elsewhere can therefore close a cycle that
 *     neither write saw, and a dependent promoted between the guard and the reopen is not
 *     counted. The window is one round trip; the FS twin has none. (A write's own read of
 *     its card may be the one the API made for the same request a moment before on the same
 *     thread, at most MGO_JUST_READ_US old: the filter pins what the decision rests on, and
 *     a fresh claim pins the card's blockers too, so an older read only costs a miss.)
 *  6. board_put's "no card left in a dropped column" check is a read before the write: a card
 *     moved into that column in between is stranded in an unknown column (it still reads and
 *     can be moved out by an operator's SetStateFrom).
 *  7. Card create + ord/id counter. The counter is bumped first; a failed insert burns an
 *     ordinal (list order is unaffected: ordinals only need to increase).
 *  8. Run create checks the card exists, then inserts: a card deleted in between leaves a run
 *     pointing at no card (as a pruned-then-deleted pair would).
 *  9. Column rename and the label sweeps (mongo_admin.c): the board, then each card, each its
 *     own conditional update (guarded on state / on the labels read, re-derived on a miss),
 *     then the summary event. A sweep interrupted midway leaves part of the cards done (no
 *     card is half-written); a rename interrupted after the board write is finished by
 *     asking for it again. There is no cross-card snapshot.
 * 10. Retention. The maintenance thread deletes the events older than the newest
 *     MGO_EVENTS_KEEP_DEFAULT seqs (bounded deletes). An outbox entry that outlived that
 *     window (a pull that kept failing) would be delivered again with a new seq.
 * 11. Capacity slots + the claim (DESIGN §17, mongo_slots.c). NOT atomic: the slot is taken
 *     before the card's CAS and freed after the release's. Exact anyway: the slot is held
 *     whenever the claim is (over-counting only in between), and a slot leaked by a crash is
 *     repaired by the reaper's repair pass against its card, never guessed (see there).
 */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_events.h"
#include "store/mongo/mongo_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void mgo_close(struct store *st);

/* Readiness from the breaker's state alone (mongo_breaker.c): answered at once either way,
 * never after a server selection. The breaker opens on the ops' errors and on the driver's
 * monitor losing the writable server, and closes when a probe or the monitor reaches it. */
static enum core_rc mgo_ping(struct store *st)
{
	return mgo_breaker_ready(mgo_of(st));
}

static const struct store_ops mgo_ops = {
	.name = "mongo",
	.owned_write_release = true, /* one conditional update: the write and the release */
	.close = mgo_close,
	.ping = mgo_ping,
	.now = mgo_clock_now,
	.board_list = mgo_board_list,
	.board_get = mgo_board_get,
	.board_put = mgo_board_put,
	.board_claimed = mgo_board_claimed,
	.board_column_rename = mgo_board_column_rename,
	.labels_sweep = mgo_labels_sweep,
	.card_create = mgo_card_create,
	.card_get = mgo_card_get,
	.card_list = mgo_card_list,
	.card_patch = mgo_card_patch,
	.card_delete = mgo_card_delete,
	.card_claim = mgo_card_claim,
	.card_claim_next = mgo_card_claim_next,
	.card_renew = mgo_card_renew,
	.card_release = mgo_card_release,
	.card_owned_write = mgo_card_owned_write,
	.card_set_state_from = mgo_card_set_state_from,
	.card_reopen = mgo_card_reopen,
	.card_revoke = mgo_card_revoke,
	.card_labels_set = mgo_card_labels_set,
	.card_labels_adjust = mgo_card_labels_adjust,
	.card_comment_add = mgo_card_comment_add,
	.labels_count = mgo_labels_count,
	.events_list = mgo_events_list,
	.events_list_board = mgo_events_list_board,
	.attention_list = mgo_attention_list,
	.run_create = mgo_run_create,
	.run_get = mgo_run_get,
	.run_get_any = mgo_run_get_any,
	.run_update = mgo_run_update,
	.run_cancel = mgo_run_cancel,
	.run_prune = mgo_run_prune,
	.run_promote_if_orphaned = mgo_run_promote_if_orphaned,
	.run_count_for_card = mgo_run_count_for_card,
	.run_list = mgo_run_list,
	.stats = mgo_stats,
	.reaper_list_expired = mgo_reaper_list_expired,
	.reaper_list_repair = mgo_reaper_list_repair,
	.reaper_transfer = mgo_reaper_transfer,
	.reaper_release_exact = mgo_reaper_release_exact,
	.reaper_transfer_many = mgo_reaper_transfer_many,
	.reaper_act = mgo_reaper_act,
	.secret_get = mgo_secret_get,
	.sub_put = mgo_sub_put,
	.sub_get = mgo_sub_get,
	.sub_list = mgo_sub_list,
	.sub_delete = mgo_sub_delete,
	.delivery_get = mgo_delivery_get,
	.delivery_list = mgo_delivery_list,
	.delivery_lease = mgo_delivery_lease,
	.delivery_finish = mgo_delivery_finish,
	.delivery_retry = mgo_delivery_retry,
	.idem = &mgo_idem_ops,
};

/* ---- the driver's global state: mongoc_init() once, mongoc_cleanup() at exit ---- */

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void driver_init(void)
{
	mgo_log_install(); /* before mongoc_init: its own lines go through it too */
	mongoc_init();
	atexit(mongoc_cleanup);
}

/* ---- indexes ---- */

struct index_spec {
	const char *coll;
	const char *name;
	const char *k1, *k2; /* ascending keys; k2 may be NULL */
	bool unique;
	const char *more[3]; /* further keys ("-name": descending), NULL-ended */
};

static const struct index_spec indexes[] = {
	{"cards", "board_state", "board", "state", false, {NULL}},
	/* claim-next's filter and sort (mongo_next.c): equality on board, $in on state, then
	 * the sort keys, so each state's run is read in order and merged */
	{"cards", "claim_next", "board", "state", false, {"-priority", "created_at", "_id"}},
	{"cards", "claim_lease", "claim.lease_until", NULL, false, {NULL}},
	{"cards", "claim_claimed_at", "claim.claimed_at", NULL, false, {NULL}},
	{"cards", "labels", "labels", NULL, false, {NULL}},
	{"cards", "blockers", "blockers", NULL, false, {NULL}},
	{"cards", "ord", "ord", NULL, false, {NULL}},
	{"cards", "claim_marker", "claim.marker", NULL, false, {NULL}}, /* attention: recovery holds */
	{"cards", "gave_up", "gave_up.at", NULL, false, {NULL}},       /* attention */
	{"cards", "awaiting_input", "awaiting_input", NULL, false, {NULL}}, /* attention */
	{"cards", "outbox", "outbox.q_ts", NULL, false, {NULL}},
	/* DESIGN §17: claim-next's wake_at (the earliest not_before of a board's columns,
	 * mongo_next.c), the claimed counts by claim.from, the capacity slots (mongo_slots*.c) */
	{"cards", "not_before", "board", "state", false, {"not_before", NULL}},
	{"cards", "claim_from", "board", "claim.from", false, {NULL}},
	{"slots", "board_col", "board", "col", false, {"owner", "i", NULL}},
	{"slots", "board_col_i", "board", "col", true, {"i", NULL}}, /* one inserter of an i wins */
	{"slots", "owner", "owner", "epoch", false, {NULL}},
	{"slots", "repair", "at", NULL, false, {NULL}},
	{"events", "seq", "seq", NULL, true, {NULL}},
	/* a board's tail by board_seq (DESIGN §11); not unique: fillers and events of an
	 * earlier version hold none, and the counter hands board_seqs out (mongo_bseq.c) */
	{"events", "board_seq", "board", "board_seq", false, {NULL}},
	{"runs", "card_id", "card_id", NULL, false, {NULL}},
	/* the runs listings, newest first (mongo_runs_list.c): a card's, a board's */
	{"runs", "card_created", "card_id", "created_at", false, {"_id"}},
	{"runs", "board_created", "board", "created_at", false, {"_id"}},
	{"runs", "status", "status", NULL, false, {NULL}}, /* attention: failed and paused runs */
	{"runs", "outbox", "outbox.q_ts", NULL, false, {NULL}},
	{"subscriptions", "board", "board", NULL, false, {NULL}},
	{"deliveries", "status_next", "status", "next_at", false, {NULL}},
	{"deliveries", "board_created", "board", "created_at", false, {NULL}},
};

static enum core_rc indexes_create(struct mgo *m)
{
	struct mgo_conn c;
	mongoc_database_t *db;
	bson_t cmd, arr, ix, key;
	bson_error_t e;
	char ibuf[16];
	const char *ikey;
	enum core_rc rc = mgo_conn_open_bare(m, &c);
	size_t i;

	if (rc != CORE_OK)
		return rc;
	db = mongoc_client_get_database(c.client, m->db);
	for (i = 0; rc == CORE_OK && i < sizeof(indexes) / sizeof(indexes[0]); i++) {
		const struct index_spec *s = &indexes[i];

		bson_init(&cmd);
		BSON_APPEND_UTF8(&cmd, "createIndexes", s->coll);
		BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &arr);
		bson_uint32_to_string(0, &ikey, ibuf, sizeof(ibuf));
		BSON_APPEND_DOCUMENT_BEGIN(&arr, ikey, &ix);
		BSON_APPEND_DOCUMENT_BEGIN(&ix, "key", &key);
		BSON_APPEND_INT32(&key, s->k1, 1);
		if (s->k2)
			BSON_APPEND_INT32(&key, s->k2, 1);
		for (size_t k = 0; k < 3 && s->more[k]; k++)
			BSON_APPEND_INT32(&key, s->more[k] + (s->more[k][0] == '-'),
					  s->more[k][0] == '-' ? -1 : 1);
		bson_append_document_end(&ix, &key);
		BSON_APPEND_UTF8(&ix, "name", s->name);
		if (s->unique)
			BSON_APPEND_BOOL(&ix, "unique", true);
		bson_append_document_end(&arr, &ix);
		bson_append_array_end(&cmd, &arr);
		if (!mongoc_database_write_command_with_opts(db, &cmd, NULL, NULL, &e))
			rc = mgo_error("createIndexes", &e);
		bson_destroy(&cmd);
	}
	mongoc_database_destroy(db);
	mgo_conn_close(&c);
	return rc;
}

/* ---- the maintenance thread: clock re-sample, outbox drain, events retention ---- */

static void *maintenance_main(void *arg)
{
	struct mgo *m = arg;
	struct timespec until;
	bool stop;

	for (;;) {
		mgo_outbox_drain(m);
		mgo_events_trim(m);
		mgo_deliveries_trim(m);
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += MGO_RESAMPLE_MS / 1000;
		pthread_mutex_lock(&m->mu);
		while (!m->stopping &&
		       pthread_cond_timedwait(&m->cond, &m->mu, &until) == 0)
			;
		stop = m->stopping;
		pthread_mutex_unlock(&m->mu);
		if (stop)
			break;
		mgo_clock_sample(m);
	}
	return NULL;
}

static enum core_rc maintenance_start(struct mgo *m)
{
	pthread_condattr_t ca;
	int rc;

	if (pthread_condattr_init(&ca) != 0)
		return CORE_ERR_INTERNAL;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
	     pthread_mutex_init(&m->mu, NULL) || pthread_cond_init(&m->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (rc)
		return CORE_ERR_INTERNAL;
	if (pthread_create(&m->thread, NULL, maintenance_main, m) != 0)
		return CORE_ERR_INTERNAL;
	m->thread_started = true;
	return CORE_OK;
}

/* ---- open / close ---- */

/* Whether the server is FerretDB (buildInfo names it); false when it cannot tell. */
static bool server_is_ferretdb(struct mgo *m)
{
	struct mgo_conn c;
	mongoc_client_t *client = mgo_conn_open_bare(m, &c) == CORE_OK ? c.client : NULL;
	bson_t cmd = BSON_INITIALIZER, reply;
	bson_iter_t it;
	bool yes = false;

	if (!client)
		return false;
	BSON_APPEND_INT32(&cmd, "buildInfo", 1);
	if (mongoc_client_command_simple(client, "admin", &cmd, NULL, &reply, NULL))
		yes = bson_iter_init_find(&it, &reply, "ferretdbVersion") ||
		      bson_iter_init_find(&it, &reply, "ferretdb");
	bson_destroy(&reply);
	bson_destroy(&cmd);
	mgo_conn_close(&c);
	return yes;
}

/* The retention of `events`: MGO_EVENTS_KEEP_DEFAULT, like the FS twin's default.
 * BOARDD_TEST_MONGO_EVENTS_KEEP (test only, never for deployments) lowers it so a test can
 * watch a trim without writing 100 000 events. */
static int64_t events_keep(void)
{
	const char *v = getenv("BOARDD_TEST_MONGO_EVENTS_KEEP");
	char *end;
	long long n;

	if (!v || !*v)
		return MGO_EVENTS_KEEP_DEFAULT;
	n = strtoll(v, &end, 10);
	return *end || n < 1 ? MGO_EVENTS_KEEP_DEFAULT : (int64_t)n;
}

/* BOARDD_TEST_MONGO_TAIL_NAP_MS (test only, never for deployments): a waiting tail's nap
 * between polls, fixed instead of adaptive (MGO_TAIL_NAP_MIN_MS..MAX_MS), so a test can make
 * it longer than its wait and see that this process's own write wakes it. 0: adaptive. */
static int64_t tail_nap(void)
{
	const char *v = getenv("BOARDD_TEST_MONGO_TAIL_NAP_MS");
	char *end;
	long long n;

	if (!v || !*v)
		return 0;
	n = strtoll(v, &end, 10);
	return *end || n < 1 ? 0 : (int64_t)n;
}

/* Defaults for a URI that does not say: fail over to 503 in seconds, not the driver's 30 s
 * server selection and 5 min socket wait, and acknowledge only majority-committed writes.
 * No retried reads: the driver retries a read that met a network error after a new server
 * selection, which waits out serverSelectionTimeoutMS when the database went away, on the
 * HTTP thread that asked; boardd answers 503 instead and its client retries (Retry-After).
 * Retryable writes stay as the driver has them: their retry is what settles a write whose
 * outcome a failover left unknown. */
static void uri_defaults(mongoc_uri_t *uri)
{
	const mongoc_write_concern_t *wc = mongoc_uri_get_write_concern(uri);
	mongoc_write_concern_t *maj;

	if (!mongoc_uri_has_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 5000);
	if (!mongoc_uri_has_option(uri, MONGOC_URI_CONNECTTIMEOUTMS))
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_CONNECTTIMEOUTMS, 3000);
	if (!mongoc_uri_has_option(uri, MONGOC_URI_SOCKETTIMEOUTMS))
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SOCKETTIMEOUTMS, 15000);
	if (!mongoc_uri_has_option(uri, MONGOC_URI_RETRYREADS))
		mongoc_uri_set_option_as_bool(uri, MONGOC_URI_RETRYREADS, false);
	if (!mongoc_uri_has_option(uri, MONGOC_URI_APPNAME))
		mongoc_uri_set_appname(uri, "boardd");
	if (mongoc_write_concern_get_w(wc) == MONGOC_WRITE_CONCERN_W_DEFAULT &&
	    !mongoc_write_concern_get_wmajority(wc)) {
		maj = mongoc_write_concern_new();
		mongoc_write_concern_set_wmajority(maj, 10000);
		mongoc_uri_set_write_concern(uri, maj);
		mongoc_write_concern_destroy(maj);
	}
}

enum core_rc store_mongo_open(const struct store_mongo_options *o, struct store **out, char *err,
			      size_t errlen)
{
	char dummy[8];
	mongoc_uri_t *uri = NULL;
	const char *dbname;
	bson_error_t e;
	struct mgo *m;
	enum core_rc rc;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (out)
		*out = NULL;
	if (!o || !o->uri || !out || o->unleased_horizon_ms < 0) {
		snprintf(err, errlen, "mongo store: no URI");
		return CORE_ERR_BAD_REQUEST;
	}
	pthread_once(&driver_once, driver_init);
	uri = mongoc_uri_new_with_error(o->uri, &e);
	if (!uri) {
		/* The driver's text may quote the URI, credentials included: not repeated. */
		snprintf(err, errlen, "invalid mongodb URI");
		return CORE_ERR_BAD_REQUEST;
	}
	uri_defaults(uri);
	m = calloc(1, sizeof(*m));
	if (!m) {
		mongoc_uri_destroy(uri);
		return CORE_ERR_NOMEM;
	}
	m->base.ops = &mgo_ops;
	m->unleased_horizon_ms =
		o->unleased_horizon_ms ? o->unleased_horizon_ms : MGO_HORIZON_DEFAULT_MS;
	m->events_keep = events_keep();
	m->test_before_write = o->test_before_write;
	m->test_read = o->test_read;
	m->test_ctx = o->test_ctx;
	m->tail_nap_ms = tail_nap();
	dbname = mongoc_uri_get_database(uri);
	m->db = strdup(dbname && *dbname ? dbname : "boardd");
	m->pool = mongoc_client_pool_new_with_error(uri, &e);
	if (!m->db || !m->pool || !mgo_breaker_init(m, uri)) {
		snprintf(err, errlen, "mongo store: cannot create the client pool");
		mongoc_uri_destroy(uri);
		free(m->db);
		if (m->pool)
			mongoc_client_pool_destroy(m->pool);
		mgo_breaker_fini(m);
		free(m);
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	mongoc_uri_destroy(uri);
	mongoc_client_pool_set_error_api(m->pool, MONGOC_ERROR_API_VERSION_2);
	if (pthread_mutex_init(&m->conn_mu, NULL) != 0) {
		snprintf(err, errlen, "mongo store: cannot initialise the connections lock");
		mongoc_client_pool_destroy(m->pool);
		mgo_breaker_fini(m);
		free(m->db);
		free(m);
		return CORE_ERR_INTERNAL;
	}
	if (!mgo_stats_attach(m))
		fprintf(stderr, "boardd: mongo: driver monitoring unavailable: no round-trip "
				"or error counts\n");
	rc = mgo_clock_init(m, err, errlen);
	m->seq_tail = &m->seq_head;
	m->pullg_tail = &m->pullg_head;
	m->seq_inflight_max = MGO_SEQ_INFLIGHT;
	if (rc == CORE_OK && (pthread_mutex_init(&m->counter_mu, NULL) != 0 ||
			      pthread_mutex_init(&m->seq_mu, NULL) != 0 ||
			      pthread_mutex_init(&m->dlv_mu, NULL) != 0 ||
			      pthread_mutex_init(&m->subs_mu, NULL) != 0 ||
			      pthread_mutex_init(&m->lease_mu, NULL) != 0 || !mgo_tail_init(m))) {
		mgo_clock_release(m);
		snprintf(err, errlen, "mongo store: cannot initialise the counters lock");
		rc = CORE_ERR_INTERNAL;
	}
	if (rc != CORE_OK) {
		mgo_clients_release(m);
		pthread_mutex_destroy(&m->conn_mu);
		mongoc_client_pool_destroy(m->pool);
		mgo_breaker_fini(m);
		free(m->db);
		free(m);
		return rc;
	}
	rc = mgo_clock_sample(m);
	if (rc != CORE_OK)
		snprintf(err, errlen, "cannot reach the database server (details logged)");
	if (rc == CORE_OK) {
		m->counter_serial = m->racy_updates = server_is_ferretdb(m);
		m->board_lookup = !m->racy_updates;
	}
	if (rc == CORE_OK && (rc = indexes_create(m)) != CORE_OK)
		snprintf(err, errlen, "cannot create the indexes (details logged)");
	if (rc == CORE_OK && (rc = mgo_bseq_migrate(m)) != CORE_OK)
		snprintf(err, errlen, "cannot number the earlier events by board (details logged)");
	if (rc == CORE_OK && !mgo_puller_start(m))
		fprintf(stderr, "boardd: mongo: no puller thread: each writer pulls its own "
				"outbox entries\n");
	if (rc == CORE_OK && (rc = mgo_board_default(m)) != CORE_OK)
		snprintf(err, errlen, "cannot create the default board (details logged)");
	if (rc == CORE_OK && (rc = maintenance_start(m)) != CORE_OK)
		snprintf(err, errlen, "cannot start the maintenance thread");
	if (rc == CORE_OK && !mgo_breaker_start(m)) {
		snprintf(err, errlen, "cannot start the reachability prober");
		rc = CORE_ERR_INTERNAL;
	}
	if (rc != CORE_OK) {
		mgo_close(&m->base);
		return rc;
	}
	*out = &m->base;
	return CORE_OK;
}

static void mgo_close(struct store *st)
{
	struct mgo *m = mgo_of(st);

	mgo_puller_stop(m); /* pulls what is queued: while the pool is still here */
	if (m->thread_started) {
		pthread_mutex_lock(&m->mu);
		m->stopping = true;
		pthread_cond_broadcast(&m->cond);
		pthread_mutex_unlock(&m->mu);
		pthread_join(m->thread, NULL);
		pthread_cond_destroy(&m->cond);
		pthread_mutex_destroy(&m->mu);
	}
	mgo_breaker_stop(m); /* the pool's end is no outage */
	mgo_clients_release(m);
	pthread_mutex_destroy(&m->conn_mu);
	mongoc_client_pool_destroy(m->pool);
	mgo_breaker_fini(m); /* after the pool: its monitors report to the breaker */
	pthread_mutex_destroy(&m->counter_mu);
	pthread_mutex_destroy(&m->seq_mu);
	pthread_mutex_destroy(&m->dlv_mu);
	mgo_subs_cache_release(m);
	pthread_mutex_destroy(&m->subs_mu);
	pthread_mutex_destroy(&m->lease_mu);
	mgo_tail_fini(m);
	mgo_clock_release(m);
	free(m->db);
	free(m);
}
