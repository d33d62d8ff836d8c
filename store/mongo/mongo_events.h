/* mongo_events — the Mongo twin's events: the queue a write pushes into its document's outbox
 * and its delivery (mongo_outbox.c) to `events` with seqs (mongo_insert.c), the pulls
 * (mongo_pull.c), the maintenance drain (mongo_drain.c), the tail and retention
 * (mongo_tail.c), board_seq (mongo_bseq.c). */
#ifndef BOARDD_STORE_MONGO_MONGO_EVENTS_H
#define BOARDD_STORE_MONGO_MONGO_EVENTS_H

#include "store/mongo/mongo_db.h"

/* One deferred pull: $pullAll of `arr` (an array document of the exact entries pushed) from
 * the outbox of document doc_id of collection `coll` (enum mgo_pull_coll). */
enum mgo_pull_coll { MGO_PULL_CARDS, MGO_PULL_RUNS, MGO_PULL_BOARDS, MGO_PULL_COLLS_ };
struct mgo_pull {
	enum mgo_pull_coll coll;
	char *doc_id; /* owned */
	bson_t *arr;  /* owned */
};

/* A writer's own pull, shared with the writers pulling at the same moment (racy servers:
 * mgo_evq_deliver), queued on its writer's stack under seq_mu. */
struct mgo_pull_req {
	enum mgo_pull_coll coll;
	const char *doc_id;
	const bson_t *arr;
	bool taken, done;
	pthread_cond_t cv; /* as mgo_seq_req's */
	struct mgo_pull_req *next;
};


/* ---- events: the outbox and delivery (mongo_outbox.c), the tail (mongo_tail.c) ---- */

/* Events a mutation produces, pushed into the changed document's outbox. */
struct mgo_evq {
	bson_t *ev[16];
	char eid[16][25];
	size_t n;
	int64_t q_ts; /* the server clock when queued: the drain's grace is measured on it */
	bool failed;  /* NOMEM or overflow while building */
};

/* Zeroes q and stamps it with the server clock (never an injected one). */
void mgo_evq_init(struct mgo_evq *q, struct mgo *m);
void mgo_evq_release(struct mgo_evq *q);
/* Queues one event (payload stolen, NULL: {}); the actor is blanked for machine reasons. */
void mgo_evq_add(struct mgo_evq *q, enum core_event_type type, const char *board,
		 const char *card_id, struct mgo_actor actor, const char *reason, int64_t now,
		 json_t *payload);
/* Appends "outbox": {$each: [...]} to an open $push document. */
bool mgo_evq_push_append(const struct mgo_evq *q, bson_t *push);
/* Moves q's events (already in doc_id's outbox in coll) to `events`, then has them pulled
 * from the outbox: by the puller (deferred, batched), or here when it cannot take them.
 * `after`: the document as this write left it (borrowed; NULL: not at hand); the entries of
 * earlier writes still in its outbox are delivered first, so a document's events are logged
 * in the order its writes committed. OK once they are in `events`; else STORE_UNAVAILABLE
 * (or NOMEM): the change is committed but its events stay in the outbox for the maintenance
 * drain, and the write must not be acknowledged as done (a listing would not show them). */
enum core_rc mgo_evq_deliver(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
			     const struct mgo_evq *q, const bson_t *after);
/* Queues the events left in a document's outbox (for a delete, or the drain), from its
 * entry *pos on, as many as q holds, and moves *pos past them; returns whether entries are
 * left beyond. An outbox can hold more than a queue: its pulls are deferred (entries already
 * delivered stay until the puller comes; evq_store skips those). */
bool mgo_evq_from_outbox(struct mgo_evq *q, const bson_t *doc, size_t *pos);
/* Inserts q's events straight into `events` (for a deleted document: no outbox left). */
enum core_rc mgo_evq_insert_direct(struct mgo_conn *c, const struct mgo_evq *q);
/* Delivers outbox entries older than the grace period in all three collections. */
void mgo_outbox_drain(struct mgo *m);
/* The puller thread of the deferred outbox pulls: start (open), and stop (close: it pulls
 * everything queued first). Without it every writer pulls its own. */
bool mgo_puller_start(struct mgo *m);
void mgo_puller_stop(struct mgo *m);
/* Opens the deliverers' gate: this process enqueued or re-armed a delivery due at `due`
 * (server ms; 0: now) (mongo_deliveries.c). */
void mgo_lease_open(struct mgo *m, int64_t due);
/* Wakes this process's waiting tails: events were just stored (mongo_tail.c). */
void mgo_tail_wake(struct mgo *m);
bool mgo_tail_init(struct mgo *m);
void mgo_tail_fini(struct mgo *m);
/* Deletes the events older than the newest m->events_keep seqs (the maintenance thread). */
void mgo_events_trim(struct mgo *m);
/* Shared by the events files (mongo_outbox.c, mongo_insert.c, mongo_pull.c, mongo_drain.c,
 * mongo_tail.c). */
/* Copies into *fresh (zeroed here) the events of q that `events` does not hold yet (by _id). */
enum core_rc mgo_evq_undelivered(struct mgo_conn *c, const struct mgo_evq *q,
				 struct mgo_evq *fresh);
/* Makes every event of q present in `events`: OK only then (the caller may pull them from the
 * outbox). `just_pushed`: none of q can be delivered yet. `fill`: see mongo_outbox.c. */
enum core_rc mgo_evq_store(struct mgo_conn *c, const struct mgo_evq *q, bool just_pushed,
			   const char *fill);
/* The seq of the newest (dir -1) or oldest (dir 1) document of `events`; false when there is
 * none or the read failed (logged). */
bool mgo_events_edge(struct mgo_conn *c, int dir, int64_t *seq);
/* Pulls q's events out of doc_id's outbox, now. */
void mgo_evq_pull(struct mgo *m, mongoc_collection_t *coll, const char *doc_id,
		  const struct mgo_evq *q);
/* Hands q's pull to the puller; false: not taken (the caller pulls). */
bool mgo_pull_defer(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
		    const struct mgo_evq *q);
/* The writer's own pull, in a bulk shared with the writers pulling at the same moment
 * (racy_updates). */
void mgo_evq_pull_shared(struct mgo_conn *c, mongoc_collection_t *coll, const char *doc_id,
			 const struct mgo_evq *q);
/* The newest seq handed out (board NULL) or board's newest board_seq, from the events
 * counter, shared for MGO_TAIL_PROBE_SHARE_MS; false when the read failed. */
bool mgo_tail_probe(struct mgo *m, const char *board, int64_t *top);
/* A filler of seq (MGO_FILLER, stamped ts) for the caller to add to and insert; caller
 * destroys it (mongo_insert.c). */
bson_t *mgo_filler_new(int64_t seq, int64_t ts);
/* Sealing a hole before a reader steps over it (mongo_seal.c). The trim mark: raised to upto
 * before the retention deletes seqs up to it; false when the write failed. */
bool mgo_trim_mark(struct mgo_conn *c, int64_t upto);
/* The seq tail's old hole lo..hi (at most MGO_SEAL_MAX of it). *trimmed < 0: reads the trim
 * mark into it and seals nothing (the caller queries again, knowing it). */
enum core_rc mgo_seal_seqs(struct mgo *m, int64_t *trimmed, int64_t lo, int64_t hi);
/* A board's tail's old hole ending at board_seq bseq: the free seqs between lo (the seq of the
 * board's event before the hole; -1: looked up) and hi (the seq of the one after it). */
enum core_rc mgo_seal_board(struct mgo *m, const char *board, int64_t *trimmed, int64_t bseq,
			    int64_t lo, int64_t hi);
/* Whether a reader sealed one of the seqs [first, first + n) (a failed read: true). */
bool mgo_seqs_sealed(struct mgo_conn *c, int64_t first, size_t n);
/* boardd_mongo_board_seq_holes_total into out (mongo_tail.c). */
void mgo_holes_collect(struct mgo *m, struct metrics_sink *out);

/* ---- board_seq (mongo_bseq.c) ---- */

/* n seqs (*last: the highest) and counts[i] board_seqs of boards[i] (blast[i]: the highest),
 * together, each a contiguous range: one findAndModify on the events counter, shared with the
 * writers of this process that ask at the same moment (at most MGO_SEQ_INFLIGHT at once; the
 * others queue and the next one to go takes the whole queue in one). */
enum core_rc mgo_seqs_take(struct mgo_conn *c, int64_t n, const char *const *boards,
			   const int64_t *counts, size_t nb, int64_t *last, int64_t *blast);
/* A queued request of mgo_seqs_take (on its caller's stack). */
struct mgo_seq_req {
	int64_t n;
	const char *const *boards;
	const int64_t *counts;
	size_t nb;
	int64_t last;    /* OUT */
	int64_t *blast;  /* OUT: nb */
	enum core_rc rc; /* OUT */
	/* The shared insert (mgo_seqs_take_insert; NULL: seqs only): once the batch has its
	 * seqs, whoever sends it calls docs(r, bulk, ts) for each request whose seqs came, in
	 * queue order, so that every request's `ndocs` documents go in ONE ordered insert. */
	void (*docs)(struct mgo_seq_req *r, mongoc_bulk_operation_t *bulk, int64_t ts);
	void *ctx;             /* docs' own */
	size_t ndocs;
	size_t at;             /* index of its first document in the bulk */
	enum core_rc ins_rc;   /* OUT: OK (all its documents inserted), ALREADY_EXISTS (a
				* duplicate key stopped the ordered insert at or before one of
				* them), or the insert's error */
	bool taken;      /* in a batch under way */
	bool done;       /* OUT filled */
	/* Its writer waits on its own: woken when its batch is done, or, first in the queue,
	 * when a batch under way ends (it may go next), never by every other batch's end. */
	pthread_cond_t cv;
	struct mgo_seq_req *next;
};
/* mgo_seqs_take for r, and (r->docs) its documents inserted into `events` in the same batch:
 * writers that ask at the same moment share the findAndModify AND the insert. Returns the
 * seqs' outcome; the insert's is r->ins_rc (not set when the seqs failed). */
enum core_rc mgo_seqs_take_insert(struct mgo_conn *c, struct mgo_seq_req *r);
/* Does an event other than eid hold board's bseq? (A failed read answers yes.) */
bool mgo_bseq_taken(struct mgo_conn *c, const char *board, int64_t bseq, const char *eid);
/* The events counter's field of a board ("b.<board>", '.' written ':'). */
void mgo_bseq_field(char *out, size_t cap, const char *board);
/* Raises board's counter to the highest board_seq stored (never lowers it). */
void mgo_bseq_catch_up(struct mgo_conn *c, const char *board);
/* At open: numbers the events stored before board_seq existed, per board in seq order. */
enum core_rc mgo_bseq_migrate(struct mgo *m);
enum core_rc mgo_events_list_board(struct store *st, const char *board, int64_t after,
				   size_t limit, int64_t wait_ms, struct core_event **out,
				   size_t *n, int64_t *next);

enum core_rc mgo_events_list(struct store *st, const char *board, const char *const *boards,
			     int64_t after, size_t limit, int64_t wait_ms, struct core_event **out,
			     size_t *n, int64_t *next);

#endif
