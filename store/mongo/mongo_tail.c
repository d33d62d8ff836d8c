/* The audit tail of the Mongo twin (DESIGN §7, §11): listing `events` by seq or by one
 * board's board_seq, serving only the prefix without holes (a hole is waited for, then
 * sealed (mongo_seal.c) and stepped over after MGO_GAP_GRACE_MS), the long-poll with its naps, wake-ups and the shared
 * probe of the events counter; and the retention that trims `events` to the newest seqs. */
#include "store/mongo/mongo.h"
#include "store/mongo/mongo_db.h"
#include "store/mongo/mongo_codec.h"
#include "store/mongo/mongo_events.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- retention ---- */

void mgo_events_trim(struct mgo *m)
{
	struct mgo_conn c;
	bson_t filter, lte;
	bson_error_t e;
	int64_t top, low, cut, upto;
	int rounds;

	if (mgo_conn_open_bare(m, &c) != CORE_OK)
		return;
	/* By seq, not by count: no count of a large collection, and holes and fillers only
	 * make the tail keep fewer than events_keep, never more. */
	/* The newest seq from the counter (one document by _id): no read of `events` at all
	 * while it holds fewer than events_keep seqs (FerretDB scans and sorts the whole
	 * collection for an edge). A counter ahead of `events` trims a few more of the oldest,
	 * one behind it trims less: neither loses a kept seq that matters. */
	if (!mgo_tail_probe(m, NULL, &top) || (cut = top - m->events_keep) < 1 ||
	    !mgo_events_edge(&c, 1, &low))
		goto out;
	/* A bounded delete at a time: a first trim of a long-grown collection does not hold one
	 * operation for minutes; what is left goes on the next round. */
	for (rounds = 0; low <= cut && rounds < MGO_TRIM_ROUNDS; rounds++, low = upto + 1) {
		upto = cut - low >= MGO_TRIM_BATCH ? low + MGO_TRIM_BATCH - 1 : cut;
		/* The mark first: a reader that meets the deleted seqs as a hole finds them
		 * trimmed, and steps over them without sealing them (mongo_seal.c). */
		if (!mgo_trim_mark(&c, upto))
			break;
		bson_init(&filter);
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "seq", &lte);
		BSON_APPEND_INT64(&lte, "$lte", upto);
		bson_append_document_end(&filter, &lte);
		if (!mongoc_collection_delete_many(c.events, &filter, NULL, NULL, &e)) {
			mgo_error("trim events", &e);
			bson_destroy(&filter);
			break;
		}
		bson_destroy(&filter);
	}
out:
	mgo_conn_close(&c);
}

/* ---- the tail ---- */

struct tail_ctx {
	struct mgo *m;
	const char *key;   /* the cursor's field: "seq", or "board_seq" (one board's tail) */
	bool by_board;     /* key is "board_seq" */
	const char *board;
	const char *const *boards;
	size_t limit;
	struct core_event *v;
	size_t *n;
	int64_t expect;    /* the next seq without a hole */
	int64_t safe;      /* the last seq scanned (served or not) */
	int64_t served;    /* the last seq served */
	int64_t real_now;  /* the server clock, for the hole grace */
	int64_t trimmed;   /* seqs at or below were trimmed (-1: the mark is not read yet) */
	/* An old hole to seal before stepping over it (mongo_seal.c): seqs seal_lo..seal_hi of
	 * the seq tail; or, on a board's tail, the one before board_seq bseal (sealed up to
	 * `sealed` already), between the seqs seal_lo (-1: unknown) and seal_hi. */
	int64_t seal_lo, seal_hi, bseal, sealed;
	int64_t last_seq;  /* a board's tail: the seq of the last document passed (-1: none) */
	size_t scanned;
	bool stop;
	bool hole; /* stopped at a hole not old enough to step over */
};

/* Counts board's board_seqs lo..hi as holes stepped over, the ones not counted before. */
static void holes_count(struct mgo *m, const char *board, int64_t lo, int64_t hi)
{
	uint32_t h = 2166136261u;
	const char *p;
	size_t slot;

	for (p = board; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	slot = h % (sizeof(m->holes_hw) / sizeof(m->holes_hw[0]));
	pthread_mutex_lock(&m->tail_mu);
	if (strcmp(m->holes_hw[slot].board, board) != 0) {
		snprintf(m->holes_hw[slot].board, sizeof(m->holes_hw[slot].board), "%s", board);
		m->holes_hw[slot].hw = 0;
	}
	if (lo <= m->holes_hw[slot].hw)
		lo = m->holes_hw[slot].hw + 1;
	if (hi >= lo) {
		m->holes_board += (uint64_t)(hi - lo + 1);
		m->holes_hw[slot].hw = hi;
	}
	pthread_mutex_unlock(&m->tail_mu);
}

void mgo_holes_collect(struct mgo *m, struct metrics_sink *out)
{
	uint64_t n;

	pthread_mutex_lock(&m->tail_mu);
	n = m->holes_board;
	pthread_mutex_unlock(&m->tail_mu);
	metrics_sink_value(out, METRICS_MONGO_BSEQ_HOLES, NULL, (double)n);
}

/* An old hole (the event after it is past the grace), t->expect .. seq - 1, just before doc:
 * true when it is to be sealed first (mongo_seal.c; the caller stops there), false to step
 * over it: its seqs were trimmed (or, with no trim mark, it is too wide for a writer's: an
 * older version's trim), or this call sealed it already. */
static bool old_hole_to_seal(struct tail_ctx *t, const bson_t *doc, int64_t seq)
{
	bson_iter_t it;

	if (t->by_board) {
		if (seq - 1 <= t->sealed || !bson_iter_init_find(&it, doc, "seq") ||
		    !mgo_iter_i64(&it, &t->seal_hi))
			return false;
		t->bseal = seq - 1;
		t->seal_lo = t->last_seq;
		return true;
	}
	if (t->trimmed >= 0 &&
	    (seq - 1 <= t->trimmed || (t->trimmed == 0 && seq - t->expect > MGO_SEAL_MAX)))
		return false;
	t->seal_lo = t->expect > t->trimmed ? t->expect : t->trimmed + 1;
	t->seal_hi = seq - 1;
	return true;
}

static enum core_rc tail_doc(void *ctx, const bson_t *doc)
{
	struct tail_ctx *t = ctx;
	bson_iter_t it;
	int64_t seq = 0, ts = 0;
	struct core_event e;
	enum core_rc rc;

	t->scanned++;
	if (t->stop)
		return CORE_OK;
	if (!bson_iter_init_find(&it, doc, t->key) || !mgo_iter_i64(&it, &seq))
		return CORE_OK;
	if (seq < t->expect) /* a board_seq handed out twice (mongo_bseq.c): served once */
		return CORE_OK;
	if (seq != t->expect) {
		/* A hole: wait for it unless the event after it is old enough to prove it a
		 * seq that will never be filled. */
		if (!bson_iter_init_find(&it, doc, "ts") || !mgo_iter_i64(&it, &ts) ||
		    ts > t->real_now - MGO_GAP_GRACE_MS) {
			t->stop = true;
			t->hole = ts > 0; /* one that will age: waited out (events_list) */
			return CORE_OK;
		}
		if (old_hole_to_seal(t, doc, seq)) {
			t->stop = true;
			return CORE_OK;
		}
		if (t->by_board)
			holes_count(t->m, t->board, t->expect, seq - 1);
	}
	if (bson_iter_init_find(&it, doc, MGO_FILLER)) {
		/* A filler of a board's tail holds a board_seq no event has: a hole too. */
		if (t->by_board)
			holes_count(t->m, t->board, seq, seq);
		/* A seq handed out and left unused: nothing to serve, nothing to wait for. */
	} else if (!bson_iter_init_find(&it, doc, "board") || !BSON_ITER_HOLDS_UTF8(&it) ||
		   mgo_board_allowed(bson_iter_utf8(&it, NULL), t->board, t->boards)) {
		if (*t->n == t->limit) {
			t->stop = true;
			return CORE_OK;
		}
		rc = mgo_event_from_bson(doc, &e);
		if (rc == CORE_ERR_NOMEM)
			return rc;
		if (rc == CORE_OK) {
			t->v[(*t->n)++] = e;
			t->served = seq;
		}
	}
	if (t->by_board && bson_iter_init_find(&it, doc, "seq"))
		mgo_iter_i64(&it, &t->last_seq);
	t->safe = seq;
	t->expect = seq + 1;
	return CORE_OK;
}

/* ---- the tail's wake-ups ---- */

bool mgo_tail_init(struct mgo *m)
{
	pthread_condattr_t ca;
	bool ok;

	if (pthread_condattr_init(&ca) != 0)
		return false;
	ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
	     pthread_mutex_init(&m->tail_mu, NULL) == 0;
	if (ok && pthread_cond_init(&m->tail_cv, &ca) != 0) {
		pthread_mutex_destroy(&m->tail_mu);
		ok = false;
	}
	pthread_condattr_destroy(&ca);
	m->tail_memo_after = -1;
	return ok;
}

void mgo_tail_fini(struct mgo *m)
{
	bson_destroy(m->probe_doc);
	m->probe_doc = NULL;
	pthread_cond_destroy(&m->tail_cv);
	pthread_mutex_destroy(&m->tail_mu);
}

void mgo_tail_wake(struct mgo *m)
{
	pthread_mutex_lock(&m->tail_mu);
	m->tail_gen++;
	m->probe_ms = 0; /* the shared counter is stale now */
	pthread_cond_broadcast(&m->tail_cv);
	pthread_mutex_unlock(&m->tail_mu);
}

static uint64_t tail_gen(struct mgo *m)
{
	uint64_t g;

	pthread_mutex_lock(&m->tail_mu);
	g = m->tail_gen;
	pthread_mutex_unlock(&m->tail_mu);
	return g;
}

/* Naps up to ms unless this process stores events meanwhile (its gen moves past gen): true
 * then. */
static bool tail_nap(struct mgo *m, uint64_t gen, int64_t ms)
{
	struct timespec until;
	bool woke;

	clock_gettime(CLOCK_MONOTONIC, &until);
	core_timespec_add_ns(&until, ms * 1000000);
	pthread_mutex_lock(&m->tail_mu);
	while (m->tail_gen == gen && pthread_cond_timedwait(&m->tail_cv, &m->tail_mu, &until) == 0)
		;
	woke = m->tail_gen != gen;
	pthread_mutex_unlock(&m->tail_mu);
	return woke;
}

/* The newest seq handed out (board NULL) or board's newest board_seq, from the events counter:
 * one document by _id, which FerretDB reads without scanning (its SQLite backend pushes down
 * only an {_id} filter; the tail's query reads and sorts every event there). The document is
 * shared by this process's readers for MGO_TAIL_PROBE_SHARE_MS (dropped by its own inserts):
 * a round trip costs FerretDB milliseconds of CPU even by _id, and the readers (the stream
 * hub, the waker, every long-poll) would each ask several times a second. False when the read
 * failed: the caller queries instead. A missing counter reads 0. */
bool mgo_tail_probe(struct mgo *m, const char *board, int64_t *top)
{
	struct mgo_conn c;
	bson_t *doc = NULL;
	bson_iter_t it;
	char f[CORE_NAME_MAX + 8];
	int64_t now = mgo_mono_ms();
	bool ok = true;

	pthread_mutex_lock(&m->tail_mu);
	if (m->probe_doc && now - m->probe_ms < MGO_TAIL_PROBE_SHARE_MS)
		doc = bson_copy(m->probe_doc);
	pthread_mutex_unlock(&m->tail_mu);
	if (!doc) {
		if (m->test_read)
			m->test_read(m->test_ctx, "probe");
		if (mgo_conn_open_bare(m, &c) != CORE_OK)
			return false;
		ok = mgo_find_by_id(c.counters, "events", &doc) == CORE_OK;
		mgo_conn_close(&c);
		if (ok && doc) {
			pthread_mutex_lock(&m->tail_mu);
			bson_destroy(m->probe_doc);
			m->probe_doc = bson_copy(doc);
			m->probe_ms = now;
			pthread_mutex_unlock(&m->tail_mu);
		}
	}
	*top = 0;
	if (ok && doc) {
		if (board)
			mgo_bseq_field(f, sizeof f, board);
		if (bson_iter_init(&it, doc) &&
		    bson_iter_find_descendant(&it, board ? f : "seq", &it))
			ok = mgo_iter_i64(&it, top);
	}
	bson_destroy(doc);
	return ok;
}

/* The tail: by seq over the boards asked for, or (by_board) one board's by board_seq off the
 * (board, board_seq) index, never a scan of other boards' events.
 *
 * Waiting (wait_ms), it queries `events` again only when there can be something new: this
 * process stored events (mgo_tail_wake wakes its nap at once), the counter moved past where
 * it stopped (read after each nap: another replica's events, within MGO_TAIL_NAP_MAX_MS), or
 * MGO_TAIL_FULL_MS passed since its last query (a counter behind what `events` holds: one
 * restored from an older backup, or moved back by FerretDB's non-atomic $inc). The naps grow
 * from MGO_TAIL_NAP_MIN_MS to MGO_TAIL_NAP_MAX_MS while nothing comes. An unfiltered call
 * from where the last one found nothing, within MGO_TAIL_FULL_MS and with no write of this
 * process since, starts with the counter too (the claim-next waker's back-to-back calls). */
static enum core_rc events_list(struct mgo *m, const char *board, const char *const *boards,
				bool by_board, int64_t after, size_t limit, int64_t wait_ms,
				struct core_event **out, size_t *n, int64_t *next)
{
	struct store *st = &m->base;
	const char *key = by_board ? "board_seq" : "seq";
	struct core_event *v = calloc(limit, sizeof(*v));
	bool plain = !by_board && !board && !boards; /* the memo's kind of call */
	struct tail_ctx t;
	struct mgo_conn c;
	bson_t filter, opts, gt, sort;
	int64_t deadline = mgo_mono_ms() + (wait_ms > 0 ? wait_ms : 0), left, last_query, top;
	int64_t nap_ms = m->tail_nap_ms ? m->tail_nap_ms : MGO_TAIL_NAP_MIN_MS;
	uint64_t gen = tail_gen(m);
	int64_t trimmed = -1; /* the trim mark, read at the first old hole */
	int64_t sealed = 0;   /* a board's tail: its old holes up to this board_seq are sealed */
	int seal_rounds = 0;
	bool query = true;
	long hole_nap_ms = 2;
	enum core_rc rc = CORE_OK;

	if (!v)
		return CORE_ERR_NOMEM;
	*next = after;
	if (after == INT64_MAX) { /* nothing can come after the largest seq there is */
		struct timespec ts = {wait_ms > 0 ? wait_ms / 1000 : 0,
				      wait_ms > 0 ? (wait_ms % 1000) * 1000000 : 0};

		nanosleep(&ts, NULL); /* the wait asked for, as for any tail with nothing new */
		*out = v;
		return CORE_OK;
	}
	last_query = mgo_mono_ms();
	if (plain && wait_ms > 0) {
		pthread_mutex_lock(&m->tail_mu);
		query = !(m->tail_memo_after == after && m->tail_memo_gen == gen &&
			  last_query - m->tail_memo_ms < MGO_TAIL_FULL_MS);
		if (!query)
			last_query = m->tail_memo_ms;
		pthread_mutex_unlock(&m->tail_mu);
		if (!query)
			query = !mgo_tail_probe(m, NULL, &top) || top > after;
	}
	for (;;) {
		if (!query)
			goto nap;
		gen = tail_gen(m); /* a write from here on wakes the nap below */
		last_query = mgo_mono_ms();
		if (m->test_read)
			m->test_read(m->test_ctx, "tail");
		/* A pooled client per poll, never across a nap: long-polls must not hold the
		 * pool that every other request draws from. */
		rc = mgo_conn_open_bare(m, &c);
		if (rc != CORE_OK)
			break;
		t = (struct tail_ctx){.m = m, .key = key, .board = board, .boards = boards,
				      .limit = limit, .v = v, .n = n, .expect = *next + 1,
				      .safe = *next, .real_now = mgo_clock_now(st),
				      .by_board = by_board, .trimmed = trimmed, .sealed = sealed,
				      .last_seq = -1};
		bson_init(&filter);
		bson_init(&opts);
		if (by_board)
			BSON_APPEND_UTF8(&filter, "board", board);
		BSON_APPEND_DOCUMENT_BEGIN(&filter, key, &gt);
		BSON_APPEND_INT64(&gt, "$gt", *next);
		bson_append_document_end(&filter, &gt);
		BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
		if (by_board)
			BSON_APPEND_INT32(&sort, "board", 1);
		BSON_APPEND_INT32(&sort, key, 1);
		bson_append_document_end(&opts, &sort);
		BSON_APPEND_INT64(&opts, "limit", 1000);
		rc = mgo_find_each(c.events, &filter, &opts, tail_doc, &t);
		mgo_conn_close(&c);
		bson_destroy(&opts);
		bson_destroy(&filter);
		if (rc != CORE_OK)
			break;
		/* A full page resumes after its last event only when another one is waiting
		 * (t.stop); a page that read the tail to its end resumes from there, past other
		 * boards' events, as the FS twin's does. */
		*next = *n == limit && t.stop ? t.served : t.safe;
		/* An old hole: sealed (or the trim mark read first), then queried again (a few
		 * rounds at most: a seal that never shows in the next query is not looped on; the
		 * answer then stops before the hole, and the caller asks again). */
		if (t.seal_hi && *n < limit && seal_rounds++ < MGO_SEAL_ROUNDS) {
			rc = by_board ? mgo_seal_board(m, board, &trimmed, t.bseal, t.seal_lo,
						      t.seal_hi)
				      : mgo_seal_seqs(m, &trimmed, t.seal_lo, t.seal_hi);
			if (rc != CORE_OK)
				break;
			if (by_board)
				sealed = t.bseal;
			query = true;
			continue;
		}
		/* A full batch of other boards' events: read on without waiting. */
		if (*n == 0 && !t.stop && t.scanned == 1000)
			continue;
		/* A hole still young: a writer took its seq and is writing its event. Events past
		 * it may be acknowledged already, and a listing shows every event acknowledged
		 * before it began (DESIGN §16), whatever its wait: wait the hole out, until it
		 * fills or is old enough to be stepped over (MGO_GAP_GRACE_MS). */
		if (t.hole && *n < limit) {
			struct timespec ts = {0, hole_nap_ms * 1000 * 1000};

			if (wait_ms < 0) { /* STORE_EVENTS_NO_WAIT: the caller waits elsewhere */
				if (*n == 0)
					rc = CORE_ERR_BUSY;
				break;
			}

			nanosleep(&ts, NULL);
			hole_nap_ms = hole_nap_ms * 2 < 100 ? hole_nap_ms * 2 : 100;
			query = true;
			continue;
		}
		if (plain && *n == 0 && *next == after) {
			pthread_mutex_lock(&m->tail_mu);
			m->tail_memo_after = after;
			m->tail_memo_ms = last_query;
			m->tail_memo_gen = gen;
			pthread_mutex_unlock(&m->tail_mu);
		}
	nap:
		left = deadline - mgo_mono_ms();
		if (*n > 0 || left <= 0)
			break;
		if (tail_nap(m, gen, left < nap_ms ? left : nap_ms)) {
			query = true; /* this process stored events */
			nap_ms = m->tail_nap_ms ? m->tail_nap_ms : MGO_TAIL_NAP_MIN_MS;
			continue;
		}
		if (!m->tail_nap_ms && nap_ms < MGO_TAIL_NAP_MAX_MS)
			nap_ms = nap_ms * 2 < MGO_TAIL_NAP_MAX_MS ? nap_ms * 2 : MGO_TAIL_NAP_MAX_MS;
		if (plain) { /* another reader's empty query from here counts as this one's */
			pthread_mutex_lock(&m->tail_mu);
			if (m->tail_memo_after == *next && m->tail_memo_gen == gen &&
			    m->tail_memo_ms > last_query)
				last_query = m->tail_memo_ms;
			pthread_mutex_unlock(&m->tail_mu);
		}
		query = mgo_mono_ms() - last_query >= MGO_TAIL_FULL_MS ||
			!mgo_tail_probe(m, by_board ? board : NULL, &top) || top > *next;
	}
	if (rc != CORE_OK) {
		store_events_free(v, *n);
		*n = 0;
		*next = 0;
		return rc;
	}
	*out = v;
	return CORE_OK;
}

enum core_rc mgo_events_list(struct store *st, const char *board, const char *const *boards,
			     int64_t after, size_t limit, int64_t wait_ms, struct core_event **out,
			     size_t *n, int64_t *next)
{
	return events_list(mgo_of(st), board, boards, false, after, limit, wait_ms, out, n, next);
}

enum core_rc mgo_events_list_board(struct store *st, const char *board, int64_t after,
				   size_t limit, int64_t wait_ms, struct core_event **out,
				   size_t *n, int64_t *next)
{
	return events_list(mgo_of(st), board, NULL, true, after, limit, wait_ms, out, n, next);
}
