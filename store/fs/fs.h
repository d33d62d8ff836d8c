/* Internals of the FS twin (DESIGN §9). Not a public header: store/store.h is.
 *
 * Model. The whole state lives in memory behind one rwlock. Published objects (cards, runs,
 * events) are immutable: a mutation works on private copies collected in a `struct fs_txn`,
 * writes them as one checksummed journal line, then swaps the copies in. Immutability is what
 * lets the compactor serialise a snapshot from bare pointers without holding the lock: while a
 * snapshot is being written, replaced objects are parked in a graveyard instead of freed.
 *
 * Files in DIR:
 *   lock             flock()ed by the owning process, holds its pid
 *   snapshot.bin     binary records (fs_codec.c): change chunks holding the whole state, then
 *                    one FS_REC_SNAP_END {gen G, counters, chunk count}; written temp + fsync +
 *                    rename + fsync dir. Replaces snapshot.json (JSON, read when no .bin)
 *   journal.N        generations N >= G, replayed in order after the snapshot; one binary
 *                    record per commit (fs_change_encode), then zeros to the end of the file
 *                    (pre-allocated ahead of the writer, fs_segment.c; none after a clean
 *                    close). Earlier versions wrote JSON lines
 *                    "<crc32 as 8 hex> <json change>\n", still replayed (even interleaved)
 *
 * Lock order: snapmu -> state lock -> jmu -> cmu. evmu is a leaf (taken with nothing else
 * held); cmu is taken under jmu only to ask the compactor for a recovery. No lock but jmu's
 * flusher role is held across the group's write and fdatasync (jmu itself is dropped while
 * the flusher writes and syncs).
 *
 * Durability. A commit is visible in memory once its record is appended to the journal's
 * buffer, and acknowledged only once the group write and fdatasync covering it succeeded. If
 * either fails, the commits not yet durable are rolled back (fs_undo.c) before any of their
 * writers is answered, and the store refuses writes until fs_recover has made the memory
 * state durable as a fresh snapshot.
 */
#ifndef BOARDD_STORE_FS_FS_H
#define BOARDD_STORE_FS_FS_H

#include "metrics/metrics.h"
#include "store/store.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* ---- string-keyed hash map (fs_map.c): open addressing, linear probing ---- */

struct fs_map_slot {
	const char *key; /* borrowed from the value */
	void *val;
	uint32_t hash;
};

struct fs_map {
	struct fs_map_slot *slots;
	size_t cap; /* 0 or a power of two */
	size_t n;
};

void *fs_map_get(const struct fs_map *m, const char *key);
/* The same for the n bytes at key (no NUL needed). */
void *fs_map_get_n(const struct fs_map *m, const char *key, size_t n);
/* Inserts or replaces (key and value). NOMEM leaves the map unchanged. */
enum core_rc fs_map_put(struct fs_map *m, const char *key, void *val);
/* The hash the maps (and the card id table) file key under: a load hashes each id once (by
 * its decoder), not at every lookup. */
uint32_t fs_map_hash(const char *key);
/* CLOCK_MONOTONIC in ms (fs_snapshot.c): the store's timers and back-offs. */
int64_t fs_mono_ms(void);
/* Ensures `extra` more inserts cannot fail. */
enum core_rc fs_map_reserve(struct fs_map *m, size_t extra);
/* Removes key; returns its value or NULL. */
void *fs_map_del(struct fs_map *m, const char *key);
/* Frees the slots only (values belong to the caller). */
void fs_map_release(struct fs_map *m);

/* CRC-32 (IEEE 802.3, reflected) of len bytes (fs_crc.c): carry-less multiplies where the
 * CPU has them, else tables; fs_crc32_tables is always the tables (tests compare the two). */
uint32_t fs_crc32(const void *buf, size_t len);
uint32_t fs_crc32_tables(const void *buf, size_t len);
/* Grows the pointer array *arrp (any T **) to hold `want` entries, doubling. */
enum core_rc fs_ptrs_reserve(void *arrp, size_t *cap, size_t want);

/* ---- published cards (fs_flat.c) ----
 * A published card is a struct fs_card: the fields every card has and every scan reads
 * (id, board, state, title, body, labels, priority, the timestamps) in a 96-byte head, and
 * the fields most cards never set (the claim and its epoch, blockers, comments, last run,
 * state reason, gave_up) in an optional tail, `more`. Both, the arrays and the strings the
 * card owns are one allocation; the strings many cards repeat (board, column, labels, token
 * names) point at interned copies. A core_card is 232 bytes and one malloc per string; this
 * is ~140 bytes for a card with two labels and no claim (bench/README.md, a million cards).
 * Code that needs a core_card takes a view (fs_card_view: a shallow core_card on the
 * caller's stack, borrowing the card's strings), or a copy (fs_card_dup). */

/* Interned strings: immortal until the store closes, so a card (published, parked for a
 * snapshot, or kept by an undo entry) may point at one for as long as it lives. At most
 * FS_ATOMS_MAX of them, each shorter than FS_ATOM_LEN: past that, strings are copied. Guarded
 * by the state write lock (or used by the opening thread alone). */
#define FS_ATOMS_MAX 4096
#define FS_ATOM_LEN 64
struct fs_atoms {
	struct fs_map map; /* string -> the same string (owned) */
};

/* The interned copy of the n bytes at p, NULL when there is none; `create` interns them if
 * there is room (NULL when not: out of memory, too long, or the table is full). */
const char *fs_atom(struct fs_atoms *a, const char *p, size_t n, bool create);
void fs_atoms_release(struct fs_atoms *a);

/* A bump allocator over one block. base NULL: it only measures (take returns NULL). */
struct fs_arena {
	char *base;
	size_t off;
};

void *fs_arena_take(struct fs_arena *a, size_t n, size_t align);

/* The fields of a card that most cards leave unset: zero when the card has no tail. */
struct fs_card_more {
	struct core_claim claim;
	int64_t claim_epoch;
	struct core_strv blockers;
	struct core_comment *comments;
	size_t n_comments;
	char *last_run_id;  /* may be NULL */
	char *state_reason; /* may be NULL */
	struct core_gave_up gave_up;
};

/* The names are core_card's, so code reading the common fields reads either. Immutable. */
struct fs_card {
	char *id;
	char *board;
	char *title;
	char *body;
	char *state;
	struct core_strv labels;
	const struct fs_card_more *more; /* NULL: every field of it is zero */
	int64_t created_at;
	int64_t updated_at;
	int64_t state_at;
	int32_t priority;
	bool has_epoch;
	bool awaiting_input;
};

/* The zero tail: what fs_card_more_of returns for a card without one. */
extern const struct fs_card_more fs_card_no_more;

static inline const struct fs_card_more *fs_card_more_of(const struct fs_card *p)
{
	return p->more ? p->more : &fs_card_no_more;
}

static inline bool fs_card_claimed(const struct fs_card *p)
{
	return p->more && p->more->claim.present;
}

/* The published form of c (an ordinary card; its strings are copied); caller frees with
 * fs_card_free. NULL on OOM. atoms may be NULL (nothing interned). */
struct fs_card *fs_card_pack(struct fs_atoms *atoms, const struct core_card *c);
void fs_card_free(struct fs_card *p);
/* A shallow core_card in *v that borrows p's strings and arrays (valid while p is); never
 * freed. Returns v. */
const struct core_card *fs_card_view(const struct fs_card *p, struct core_card *v);
/* A deep copy as an ordinary card (what readers are handed); NULL on OOM. */
struct core_card *fs_card_dup(const struct fs_card *p);
/* How the decoder lays a card out in one block (fs_codec.c): it places the arrays and
 * strings first in an arena starting at fs_card_head(c) bytes (c: the card as measured, its
 * optional strings non-NULL when present), then fs_card_fill writes the head (and tail) at
 * the block's start from c, whose pointers already point into the block or at atoms. */
size_t fs_card_head(const struct core_card *c);
struct fs_card *fs_card_fill(void *block, const struct core_card *c);

/* ---- state ---- */

struct fs_card_ent {
	struct fs_card *card;   /* owned; immutable once published */
	uint64_t ord;           /* creation order, persisted: the list cursor */
	/* 32-bit slots keep the entry in 40 bytes, a 48-byte chunk (fs_change_reserve refuses
	 * the 2^32-1st entry, so an index always fits) */
	uint32_t cslot;         /* 1 + its index in fs->claimed; 0 when it holds no claim */
	uint32_t rslot;         /* 1 + its index in fs->recov; 0: not a recovery claim */
	uint32_t sslot;         /* 1 + its index in its state's posting list; 0: in none */
	uint32_t aslot;         /* 1 + its index in fs->attn; 0: not an attention candidate */
	bool dead;              /* deleted; left in `order` until that array is compacted */
	bool held;              /* dead, but an undo entry may bring it back: not compacted */
};

/* A live entry's id (its card's: the entry keeps no copy). Never called on a dead one. */
static inline const char *fs_ent_id(const struct fs_card_ent *e)
{
	return e->card->id;
}

/* ---- the card id table (fs_map.c): open addressing, linear probing, load <= 1/2 ----
 * fs_map for the million-entry case: a slot is the entry and its id's hash (16 bytes, not
 * fs_map's 24), the key read through the entry (fs_ent_id) only when the hashes match, which
 * a lookup's caller reads next anyway. */
struct fs_ids_slot {
	struct fs_card_ent *ent; /* NULL: empty */
	uint32_t hash;
};

struct fs_ids {
	struct fs_ids_slot *slots;
	size_t cap; /* 0 or a power of two */
	size_t n;
};

struct fs_card_ent *fs_ids_get(const struct fs_ids *t, const char *id);
/* The same with h = fs_map_hash(id) computed once by the caller. */
struct fs_card_ent *fs_ids_get_h(const struct fs_ids *t, const char *id, uint32_t h);
/* Asks the CPU for the slot a key of hash h starts its probe at (a hint, no effect on the
 * table): a lookup a few keys ahead in a batch then finds it in cache. */
void fs_ids_prefetch(const struct fs_ids *t, uint32_t h);
/* Ensures `extra` more puts cannot fail. */
enum core_rc fs_ids_reserve(struct fs_ids *t, size_t extra);
/* Files ent under fs_ent_id(ent), which is not in the table; room was reserved. */
void fs_ids_put(struct fs_ids *t, struct fs_card_ent *ent);
void fs_ids_put_h(struct fs_ids *t, struct fs_card_ent *ent, uint32_t h);
/* Removes id; returns its entry or NULL. */
struct fs_card_ent *fs_ids_del(struct fs_ids *t, const char *id);
void fs_ids_release(struct fs_ids *t);

/* A list of cards under one key, in no order (fs_post.c): the dependents of a blocker id
 * (fs->deps), the cards of a state or a label (fs->post_states, fs->post_labels). */
struct fs_post {
	char *key;                 /* the map key; owned */
	struct fs_card_ent **v;
	size_t n, cap;
	size_t pending;            /* fs_change_reserve's scratch: members about to be added */
	bool reserved;             /* room reserved for a change not applied yet: keep */
	/* claim-next's cache (fs_claims.c; state lists only): the best unclaimed members in
	 * core_pick_before order as of one walk, top[top_pos..top_n) still to look at. Valid
	 * until a member may have become available ahead of them (fs_post_update drops it:
	 * a card joins unclaimed, is released, changes priority, or is deleted). Members
	 * claimed or moved away since are skipped when met. top_all: the walk saw fewer
	 * unclaimed members than the cache holds, so it holds them all. */
	struct fs_card_ent **top;
	size_t top_n, top_pos, top_capn; /* top_capn: top's room */
	bool top_valid, top_all;
};

/* The highest epoch a deleted id had: a card re-created under it starts above. */
struct fs_floor {
	char *id; /* the map key; owned */
	int64_t epoch;
};

struct fs_counters {
	int64_t seq;   /* last event seq */
	uint64_t card; /* card id generator */
	uint64_t run;  /* run id generator */
	uint64_t ord;  /* last creation ordinal */
};

/* One committed mutation: what a journal line carries, and what a replay rebuilds. */
struct fs_change_card {
	char *id;               /* owned */
	/* owned; NULL (and pub NULL): the card is deleted (or floor_only). A transaction's
	 * copy, or a decoded claim-only patch; fs_change_reserve packs it into pub. */
	struct core_card *card;
	struct fs_card *pub;    /* owned; the published form (the decoder makes it directly) */
	uint64_t ord;
	bool is_new;            /* not in the index when the change was built */
	/* The highest epoch the id ever had, kept past a delete so a re-created card never
	 * repeats one (DESIGN §11). 0: none. floor_only: only that (a snapshot's floors). */
	int64_t floor;
	bool floor_only;
	/* Only the claim fields (claim, epoch, updated_at) changed: the journal carries those,
	 * never the card whole (DESIGN §11). A decoded one holds only those fields until
	 * fs_change_resolve merges them into the card as it stands. */
	bool claim_only;
	/* fs_change_reserve's lookup of id, for lists_reserve and apply to reuse (a map probe is
	 * a cache miss at a million cards); NULL: not in the index then. */
	struct fs_card_ent *ent;
	uint32_t hash; /* fs_map_hash(id), when `hashed` (set by fs_change_reserve) */
	bool hashed;
	/* `card` is also the caller's answer (fs_txn_answer handed it out instead of a copy):
	 * the answer owns it, and nothing here frees it (the change only reads it, and drops
	 * the pointer once packed or deleted). */
	bool kept;
};

/* An effect record (store/fs/fs_effect.c): a subscription ("s/<board>/<name>") or a delivery
 * ("d/<id>"), held as its stored JSON text. `due`: a pending delivery's next_at, else -1 (0 for
 * subscriptions). In a change, val NULL deletes the key. Published entries are immutable. */
struct fs_kv {
	char *key;
	char *val;
	int64_t due;
};

/* A board's last board_seq, as a snapshot keeps it (the events themselves are trimmed). */
struct fs_bctr {
	char *board; /* owned in a decoded change; borrowed in a snapshot being written */
	int64_t last;
};

struct fs_change {
	struct fs_kv *kvs; /* owned; upserted (val NULL: deleted) */
	size_t n_kvs, cap_kvs;
	struct fs_change_card *cards;
	size_t n_cards, cap_cards;
	struct core_run **runs; /* owned; upserted */
	size_t n_runs, cap_runs;
	struct core_board *boards; /* owned; upserted */
	size_t n_boards;
	struct core_event **events; /* owned; appended */
	size_t n_events, cap_events;
	struct fs_bctr *bctrs; /* a snapshot's board counters (raised to, never lowered) */
	size_t n_bctrs;
	struct fs_counters ctr;
};

void fs_change_release(struct fs_change *ch);

/* What one committed transaction replaced, kept until its journal line is durable: if the
 * group fdatasync fails, the transactions not yet durable are undone newest first, so no
 * change that was never acknowledged stays visible (fs_undo.c). */
struct fs_undo_card {
	struct fs_card_ent *ent;
	struct fs_card *old;   /* the card before (NULL: the change created it) */
	bool deleted;          /* the change deleted it (ent is dead and held) */
};

struct fs_undo_run {
	struct core_run *now; /* what the change published */
	struct core_run *old; /* what it replaced; NULL: a new run */
};

struct fs_undo_board {
	struct core_board old; /* the config before (zeroed when is_new) */
	bool is_new;
};

struct fs_undo_kv {
	struct fs_kv *now; /* what the change published (NULL: it deleted the key) */
	struct fs_kv *old; /* what it replaced (NULL: the key was new) */
};

struct fs_undo {
	uint64_t seq;            /* the journal line */
	struct fs_undo_kv *kvs;
	size_t n_kvs;
	struct fs_counters ctr;  /* the counters before */
	struct fs_undo_card *cards;
	size_t n_cards;
	struct fs_undo_run *runs;
	size_t n_runs;
	struct fs_undo_board *boards;
	size_t n_boards;
	size_t n_events;         /* appended at the tail of the events array */
};

/* Objects a writer replaced while a snapshot still reads them. */
struct fs_grave {
	struct fs_card **cards;
	size_t n_cards, cap_cards;
	struct core_run **runs;
	size_t n_runs, cap_runs;
	struct core_event **events;
	size_t n_events, cap_events;
};

/* A log line that may repeat (a full disk refuses every write): the first is written, then at
 * most one per FS_LOG_QUIET_MS saying how many were suppressed meanwhile. Guarded by the lock
 * its user names. */
#define FS_LOG_QUIET_MS 30000
struct fs_log_quiet {
	int64_t last_ms; /* CLOCK_MONOTONIC of the last line written; 0: none yet */
	unsigned long suppressed;
};

/* Journal records appended but not written yet (fs_journal.c): the last `bytes` bytes of one
 * generation, in order, which the flusher writes with one pwritev(2) before its sync. Small
 * records are copied back to back into buf; one that does not fit, or is larger than
 * FS_JPEND_COPY_MAX, is taken whole from its writer (never copied). Guarded by jmu (or owned by
 * the flusher once taken). */
struct fs_jpend {
	char *buf;         /* FS_JPEND_BUF bytes, allocated on first use */
	size_t used;       /* bytes of buf holding records */
	struct iovec *iov; /* the pieces in file order: runs of buf, or records taken whole */
	size_t n_iov, cap_iov;
	uint64_t bytes;    /* their total */
};

/* An earlier generation still owed its last write and sync (handed over by a compaction). */
struct fs_jold {
	int fd;
	uint64_t end;          /* its logical size: pend ends there */
	struct fs_jpend pend;
};

struct fs {
	struct store base; /* first: what the wrappers see */
	char *dir;
	char *hostname;
	size_t compact_bytes;
	size_t events_keep;
	bool serial_load; /* store_fs_options.serial_load */
	int lock_fd;

	/* ---- guarded by `lock` ---- */
	pthread_rwlock_t lock;
	struct core_board *boards;
	size_t n_boards;
	struct fs_atoms atoms; /* the strings published cards share (fs_flat.c) */
	struct fs_ids cards; /* id -> struct fs_card_ent */
	struct fs_card_ent **order;
	size_t n_order, cap_order, n_dead;
	struct fs_map deps; /* blocker id -> struct fs_post: the cards whose blockers name it
			     * (published cards only), so the unblocked cascade and Reopen's
			     * guard touch the few cards concerned, never the whole board */
	struct fs_card_ent **claimed; /* published cards holding a claim: a binary min-heap by
				       * lease expiry (no lease: last), then id, so the reaper's
				       * expired listing reads its batch off the top */
	size_t n_claimed, cap_claimed;
	struct fs_card_ent **recov; /* the claims held under a recovery marker ("reaper:"), in
				     * no order: the repair sweep's population, usually tiny */
	size_t n_recov, cap_recov;
	struct fs_card_ent **attn; /* attention candidates (core_attention_candidate: gave_up,
				    * awaiting input, a failed or paused recorded run), in no
				    * order; with the claimed heap and `recov` they are all that
				    * GET /v1/attention reads (fs_attention.c) */
	size_t n_attn, cap_attn;
	struct fs_map runs; /* id -> struct core_run */
	struct fs_map subs; /* "s/<board>/<name>" -> struct fs_kv: subscriptions (no matching at
			     * all while empty) */
	struct fs_map kv;   /* "d/<id>" -> struct fs_kv: deliveries */
	struct fs_map floors; /* card id -> struct fs_floor: the epoch floor of ids deleted once
			       * (never removed; only raised) */
	struct fs_map post_states; /* state -> struct fs_post (published cards only) */
	struct fs_map post_labels; /* label -> struct fs_post */
	struct core_event **ev; /* the tail is ev[ev_head .. ev_n) */
	size_t ev_head, ev_n, ev_cap;
	struct fs_map evboards; /* board -> struct fs_evboard: board_seq and the board's tail */
	struct fs_counters ctr;
	bool snap_active;
	struct fs_grave grave;
	struct fs_undo **undo;     /* transactions not yet durable, oldest first from undo_head */
	size_t undo_head, undo_n, undo_cap;
	int64_t ev_durable;        /* events up to this seq belong to durable lines: trimmable */
	bool rolling_back;         /* fs_undo_rollback runs: emptied index lists stay */

	/* ---- journal: guarded by jmu (the fd is also only written under `lock`) ---- */
	pthread_mutex_t jmu;
	pthread_cond_t jcond;
	int jfd;
	uint64_t gen;
	uint64_t jbytes;   /* logical end of the generation: every record appended (some in jpend) */
	uint64_t appended; /* journal lines written (seq of the last one) */
	uint64_t synced;   /* journal lines known durable */
	bool flushing;             /* a flusher syncs, or rolls back after a failed sync */
	bool failed;               /* a sync failed: writes refused until fs_recover */
	uint64_t jsynced_bytes;    /* durable prefix of the current generation */
	size_t n_inflight;         /* lines appended whose writer was not yet told the outcome */
	struct store_ack *ack_head, *ack_tail; /* owed waits for the acker (store_ack) */
	size_t ack_len;            /* acks queued */
	size_t ack_want;           /* the acker waits until ack_len reaches it */
	pthread_cond_t ackcond;    /* the acker's (CLOCK_MONOTONIC): enough acks, or stop */
	pthread_t acker;
	bool acker_started, acker_stop, acker_waiting;
	int64_t recover_after_ms;  /* CLOCK_MONOTONIC: no recovery attempt before */
	bool recovering;           /* a thread is in fs_recover's attempt (jcond at its end) */
	struct fs_jold *old; /* earlier generations still owed a write and sync */
	size_t n_old;
	/* The records of the current generation not written yet: [jbytes - jpend.bytes, jbytes).
	 * The flusher swaps it with jspare (empty, its room kept) and writes what it took. */
	struct fs_jpend jpend, jspare;
	/* The pre-allocated tail (fs_segment.c): the file is zero-filled up to jalloc, records
	 * are written over it up to jbytes. A record past jalloc extends the file. */
	uint64_t jalloc;           /* zero-filled (and synced) end of the current generation */
	uint64_t jepoch;           /* bumped when the file is cut or replaced: voids a grow */
	bool growing;              /* the grower zero-fills from grow_from on (jmu dropped) */
	uint64_t grow_from;
	bool grow_wanted, grow_stop, grower_started;
	int64_t grow_after_ms;     /* CLOCK_MONOTONIC: no grow before (after a failed one) */
	pthread_cond_t gcond;      /* the grower's: grow_wanted or grow_stop */
	pthread_t grower;
	struct fs_log_quiet quiet_grow; /* failed pre-allocations (under jmu) */
	struct store_fs_stats stats;
	struct fs_log_quiet quiet_fail; /* "writes refused" lines (under jmu) */
	struct fs_log_quiet quiet_recover; /* "recovery failed" lines (under snapmu) */
	struct metrics_hist group_width; /* lines made durable per successful sync (atomic) */
	unsigned faults;           /* STORE_FS_FAULT_* (test hook; atomic) */

	/* ---- event visibility and long-poll: guarded by evmu ---- */
	pthread_mutex_t evmu;
	pthread_cond_t evcond; /* CLOCK_MONOTONIC */
	int64_t ev_visible;    /* highest event seq whose line is durable */
	bool closing;

	/* ---- compaction: snapmu serialises whole compactions; cmu guards the flags ---- */
	pthread_mutex_t snapmu;
	pthread_mutex_t cmu;
	pthread_cond_t ccond;
	pthread_t cthread;
	bool cthread_started;
	bool compact_wanted;
	bool recover_wanted; /* the store failed: retry fs_recover about once a second */
	bool compact_stop;
};

static inline struct fs *fs_of(struct store *st)
{
	return (struct fs *)st;
}

/* ---- per-board event sequence and index (fs_evboard.c): callers hold `lock` ---- */

struct fs_evboard {
	char *board;            /* the map key; owned */
	int64_t last;           /* the last board_seq published (never lowered but by an undo) */
	int64_t scratch;        /* fs_evboard_assign's and fs_evboard_reserve's */
	struct core_event **v;  /* the board's events in the tail, in order: v[head .. n) */
	size_t head, n, cap;
};

/* The board's entry; created (NULL on NOMEM) when `create`, else NULL when unknown. */
struct fs_evboard *fs_evboard_get(struct fs *fs, const char *board, bool create);
/* Before the journal line is written: gives each event its board_seq. NOMEM. */
enum core_rc fs_evboard_assign(struct fs *fs, struct core_event *const *ev, size_t n);
/* Part of fs_change_reserve: room for ch's events in their boards' lists. NOMEM. */
enum core_rc fs_evboard_reserve(struct fs *fs, const struct fs_change *ch);
/* apply_event's part (reserved: cannot fail); derives a missing board_seq (older data). */
void fs_evboard_append(struct fs *fs, struct core_event *e);
/* Raises the boards' counters to a snapshot's. */
void fs_evboard_counters_apply(struct fs *fs, const struct fs_change *ch);
/* e, the oldest of the tail, is trimmed / e, the newest, is undone. */
void fs_evboard_shift(struct fs *fs, const struct core_event *e);
void fs_evboard_pop(struct fs *fs, const struct core_event *e);
/* First index of b->v whose board_seq (by_board_seq) or seq is > after. */
size_t fs_evboard_after(const struct fs_evboard *b, int64_t after, bool by_board_seq);
/* Fills out (room for fs->evboards.n) with each board's counter, names borrowed; returns
 * how many. */
size_t fs_evboard_counters(const struct fs *fs, struct fs_bctr *out);
void fs_evboard_release(struct fs *fs);

/* ---- index (fs_index.c): callers hold `lock` ---- */

const struct core_board *fs_board_find(const struct fs *fs, const char *name);
struct fs_card_ent *fs_card_find(const struct fs *fs, const char *id);
/* The published dependents of `blocker`; NULL when no card names it. */
const struct fs_post *fs_deps_find(const struct fs *fs, const char *blocker);
/* Replay: turns each decoded claim-only entry into the whole card it patches (dropped when
 * the card is gone). NOMEM. */
enum core_rc fs_change_resolve(struct fs *fs, struct fs_change *ch);
/* The epoch floor of id (0: none). */
int64_t fs_floor_get(const struct fs *fs, const char *id);
/* Makes fs_change_apply(ch) unable to fail for lack of memory; its cards are packed into
 * their published form (pub). */
enum core_rc fs_change_reserve(struct fs *fs, struct fs_change *ch);
/* Publishes ch into the state (taking its objects; ch is left empty). Infallible after a
 * successful fs_change_reserve. `undo` NULL: a replay (idempotent merge of a journal record
 * or snapshot); else a commit, whose replaced objects go to undo (fs_undo_new) instead of
 * being freed. */
void fs_change_apply(struct fs *fs, struct fs_change *ch, struct fs_undo *undo);
/* The same, leaving what remains of ch (its arrays and ids) for the caller to release: the
 * snapshot load has the thread that decoded ch free it, in that thread's malloc arena. */
void fs_change_apply_keep(struct fs *fs, struct fs_change *ch, struct fs_undo *undo);
/* Frees an object no longer published (or parks it while a snapshot reads it). */
void fs_retire_card(struct fs *fs, struct fs_card *c);
void fs_retire_run(struct fs *fs, struct core_run *r);
void fs_retire_event(struct fs *fs, struct core_event *e);
/* Replaces the value (and key) of a key that is present; never allocates. */
void fs_map_replace(struct fs_map *m, const char *key, void *val);
/* First index of fs->order whose ord is >= ord (n_order when none). */
size_t fs_order_lower(const struct fs *fs, uint64_t ord);
/* Puts ent in, out of, or back in place in the claimed heap and the recovery set, to match
 * ent->card (never allocates). */
void fs_claimed_update(struct fs *fs, struct fs_card_ent *ent);
/* ---- attention (fs_attention.c): callers hold `lock` ---- */

/* Puts ent in or out of the attention candidates to match ent->card and its recorded run
 * (never allocates: room is reserved by fs_change_reserve). */
void fs_attn_update(struct fs *fs, struct fs_card_ent *ent);
/* The same for the card a run belongs to, after the run changed. */
void fs_attn_update_run(struct fs *fs, const struct core_run *r);
enum core_rc fs_attention_list(struct store *st, const char *board, const char *const *boards,
			       size_t limit, struct store_attention **out, size_t *n,
			       bool *truncated);

/* Moves ent's reverse-index edges from `before` (NULL: none) to `now` (NULL: none). */
void fs_deps_update(struct fs *fs, struct fs_card_ent *ent, const struct fs_card *before,
		    const struct fs_card *now);
/* Retires events from the head while the tail is longer than events_keep and they are
 * durable. */
void fs_events_trim(struct fs *fs);

/* ---- undo of transactions not yet durable (fs_undo.c): callers hold the write lock ---- */

/* An undo entry sized for ch, with the counters as they are now; NULL on OOM. */
struct fs_undo *fs_undo_new(const struct fs_change *ch, const struct fs_counters *before);
void fs_undo_free(struct fs *fs, struct fs_undo *u);
/* Drops the entries whose line is durable (seq <= synced), freeing what they replaced. */
void fs_undo_settle(struct fs *fs, uint64_t synced);
/* Undoes the entries whose line is not durable (seq > synced), newest first. */
void fs_undo_rollback(struct fs *fs, uint64_t synced);

/* ---- the journal's pre-allocated tail (fs_segment.c) ---- */

/* Zero-fills the start of a new generation's file (fd, empty) before writers switch to it,
 * as long as the current one's last step; returns the bytes filled (0 on failure: the file is
 * left empty and grows by appending). Called by the compaction, no lock held. */
uint64_t fs_segment_prealloc(struct fs *fs, int fd);
/* With jmu held, after a record was written: asks the grower for the next step when less than
 * half a step of zeros is left ahead of jbytes. */
void fs_segment_poke_locked(struct fs *fs);
/* With jmu held: the current file was cut to `bytes` (a failed write, a rollback). */
void fs_segment_cut_locked(struct fs *fs, uint64_t bytes);
/* With jmu held: writers switch to a new generation whose first `alloc` bytes are zeros. */
void fs_segment_switch_locked(struct fs *fs, uint64_t alloc);
enum core_rc fs_segment_start(struct fs *fs);
/* Stops the grower and cuts the current generation's zero tail (a clean close). */
void fs_segment_stop(struct fs *fs);

/* ---- I/O the fault hook can refuse (fs_journal.c) ---- */

ssize_t fs_io_pwritev(struct fs *fs, int fd, const struct iovec *iov, int n, uint64_t off);
int fs_io_sync(struct fs *fs, int fd);     /* fdatasync */
int fs_io_dir_sync(struct fs *fs);         /* fsync of DIR */
bool fs_io_fault(struct fs *fs, unsigned fault);
/* A test hook's hold: while `fault` is on, waits (no lock held), with *held (a stats field,
 * under jmu) true meanwhile. */
void fs_io_hold(struct fs *fs, unsigned fault, bool *held);
/* Writes "boardd: fs store DIR: <fmt>" to stderr unless q wrote one within FS_LOG_QUIET_MS
 * (then it only counts it; the next line written says how many were suppressed). */
void fs_log_quiet(struct fs *fs, struct fs_log_quiet *q, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void fs_grave_empty(struct fs *fs);
void fs_state_release(struct fs *fs);

/* ---- binary records (fs_codec.c): the journal's and the snapshot's unit ---- */

#define FS_REC_MAGIC 0xFB
#define FS_REC_HDR 16
enum fs_rec_kind {
	FS_REC_CHANGE = 1,   /* a change: a journal commit, or a chunk of a snapshot */
	FS_REC_SNAP_END = 2, /* a snapshot's last record: gen, counters, chunk count */
	/* A change with claim holders, run claim epochs, epoch floors and claim-only entries
	 * (DESIGN §11). FS_REC_CHANGE is still read. */
	FS_REC_CHANGE2 = 3,
	/* FS_REC_CHANGE2 with each event's board_seq and the boards' counters (DESIGN §11);
	 * what this version writes. The earlier two are still read (board_seq derived). */
	FS_REC_CHANGE3 = 4,
};
enum fs_rec_status {
	FS_REC_OK,
	FS_REC_TORN,        /* a prefix of a record: the file ends inside it */
	FS_REC_BAD,         /* the header is damaged: its length cannot be trusted */
	FS_REC_BAD_PAYLOAD, /* a sound header over a payload whose CRC fails */
};

/* One framed record for ch (events carry their seq already); caller frees. NULL on OOM. */
char *fs_change_encode(const struct fs_change *ch, size_t *len);
/* A snapshot chunk (the same payload as a change, from bare published pointers); floors go
 * as floor-only entries. */
struct fs_snap_floor {
	const char *id; /* borrowed */
	int64_t epoch;
};
char *fs_snap_chunk_encode(const struct fs_counters *ctr, const struct core_board *boards,
			   size_t n_boards, const struct fs_card *const *cards,
			   const uint64_t *ords, size_t n_cards, const struct core_run *const *runs,
			   size_t n_runs, const struct core_event *const *events, size_t n_events,
			   const struct fs_snap_floor *floors, size_t n_floors,
			   const struct fs_bctr *bctrs, size_t n_bctrs,
			   const struct fs_kv *kvs, size_t n_kvs, size_t *len);
char *fs_snap_end_encode(uint64_t gen, const struct fs_counters *ctr, uint64_t n_records,
			 size_t *len);
/* Frames the record at buf (avail bytes from there on): on FS_REC_OK and FS_REC_BAD_PAYLOAD
 * *kind, *payload and *plen describe it (the record is FS_REC_HDR + *plen bytes). */
enum fs_rec_status fs_rec_check(const char *buf, size_t avail, unsigned *kind,
				const char **payload, size_t *plen);
/* fs_rec_check in two steps: the header alone (FS_REC_OK: framed, the payload unchecked), then
 * the payload's CRC (payload as framed, FS_REC_HDR bytes after its header): the snapshot
 * load frames every record first and checks the payloads on its decoding thread. */
enum fs_rec_status fs_rec_frame(const char *buf, size_t avail, unsigned *kind,
				const char **payload, size_t *plen);
bool fs_rec_payload_ok(const char *payload, size_t plen);
/* Decodes a FS_REC_CHANGE, FS_REC_CHANGE2 or FS_REC_CHANGE3 payload (`kind`). BAD_REQUEST
 * when malformed or of another kind (ch left empty). Its whole cards are in their published
 * form (pub, fs_flat.c), sharing atoms (NULL: none); claim-only entries are ordinary cards. */
enum core_rc fs_change_decode_bin(unsigned kind, const char *payload, size_t len,
				  struct fs_atoms *atoms, struct fs_change *ch);
enum core_rc fs_snap_end_decode(const char *payload, size_t len, uint64_t *gen,
				struct fs_counters *ctr, uint64_t *n_records);

/* ---- card lists under a key (fs_post.c): callers hold `lock` ---- */

/* The list of key in m, created empty if missing (NULL: out of memory). */
struct fs_post *fs_post_get_or_add(struct fs_map *m, const char *key);
/* One member a change is about to add to the list of key in m: pass 0 counts it (creating
 * the list), pass 1 grows the list once for everything counted and marks it reserved. Pass 1
 * must run whatever pass 0 did; *rc keeps the first failure. */
void fs_post_reserve_one(struct fs_map *m, const char *key, int pass, enum core_rc *rc);
/* Adds ent (room reserved: aborts otherwise). */
void fs_post_add(struct fs_post *p, struct fs_card_ent *ent);
/* Takes ent out of the list of key in m (a scan); an emptied list goes, unless room is
 * reserved in it or an undo may refill it. */
void fs_post_remove(struct fs *fs, struct fs_map *m, const char *key, struct fs_card_ent *ent);
/* Frees every list of m and m itself. */
void fs_post_map_release(struct fs_map *m);

/* One pass of fs_post_reserve_one for every state and label list a card going from before
 * to now joins (fs_change_reserve runs pass 0 then pass 1 over a change's cards). */
void fs_post_reserve_card(struct fs *fs, const struct fs_card *before,
			  const struct fs_card *now, int pass, enum core_rc *rc);
/* ent's card goes from before to now (either NULL): its state and label lists follow. */
void fs_post_update(struct fs *fs, struct fs_card_ent *ent, const struct fs_card *before,
		    const struct fs_card *now);
/* Drops every state's claim-next cache: before card entries are freed (a cache may still
 * point at a card that left its state and was deleted since). */
void fs_post_tops_drop(struct fs *fs);
/* A card that became an unclaimed member of state list p (ent, now its published card `c`):
 * inserted in rank order into p's claim-next cache when it ranks among the cached ones (the
 * worst is pushed out of a full cache), so the cache stays exact without a walk (fs_claims.c). */
void fs_post_top_offer(struct fs_post *p, struct fs_card_ent *ent, const struct fs_card *c);
/* The list of a state / a label; NULL when no card carries it. */
const struct fs_post *fs_post_state(const struct fs *fs, const char *state);
const struct fs_post *fs_post_label(const struct fs *fs, const char *label);
void fs_post_release(struct fs *fs);

/* ---- journal (fs_journal.c) ---- */

/* Reads a whole file into a new buffer (NUL-terminated); NULL with *err = errno. */
char *fs_file_read(const char *path, size_t *len, int *err);
/* Under the state write lock: appends one record at the logical end (jbytes) to the journal's
 * buffer (fs->jpend), in commit order; the flusher writes it (one pwritev per group) before
 * its sync. *line is copied, or taken whole (then *line is set to NULL: the journal frees it
 * once written). *seq is what to pass to fs_journal_wait. STORE_UNAVAILABLE while the store
 * is failed, NOMEM; on failure nothing was appended. */
enum core_rc fs_journal_append(struct fs *fs, char **line, size_t len, uint64_t *seq);
/* Without the state lock: returns once line `seq` is written and durable (group commit), or
 * STORE_UNAVAILABLE once it was rolled back after a failed write or sync. Every successful
 * fs_journal_append must be followed by exactly one call. */
enum core_rc fs_journal_wait(struct fs *fs, uint64_t seq);
/* The same wait without a line of one's own (no n_inflight to settle): a compaction's, for
 * the lines its snapshot captured, before it installs it. No lock held; it may be the flusher
 * (or roll back after a failed one), as a synchronous writer is. */
enum core_rc fs_journal_durable(struct fs *fs, uint64_t seq);
/* At close, no lock held: writes and syncs whatever is still appended (lines nobody waited
 * for), so the file ends at its last record. */
void fs_journal_flush(struct fs *fs);
/* Frees what p holds (its records taken whole too). */
void fs_jpend_release(struct fs_jpend *p);
/* store_ops.ack_submit: queues an owed wait for the acker thread (store_ack). */
void fs_ack_submit(struct store *st, struct store_ack *ack);
/* store_ops.ack_wait: the same wait on the calling thread. */
enum core_rc fs_ack_wait(struct store *st, struct store_ack *ack);
enum core_rc fs_acker_start(struct fs *fs);
/* Tells every queued ack, then stops the thread; later submits wait on their own thread. */
void fs_acker_stop(struct fs *fs);
/* Opens (creating) journal.gen for writing (records go at fs->jbytes); -1 on error with errno set. */
int fs_journal_open(const struct fs *fs, uint64_t gen);
/* Replays journal generations from fs->gen on; leaves fs->jfd open on the last one. */
enum core_rc fs_journal_recover(struct fs *fs, char *err, size_t errlen);
/* Makes events up to seq visible to events_list and wakes long-polls. */
void fs_events_publish(struct fs *fs, int64_t seq);
int fs_dir_sync(const char *dir);

/* ---- the JSON formats of earlier versions, read only (fs_legacy.c) ---- */

/* Parses the JSON part of a journal line into ch. BAD_REQUEST when malformed (ch empty). */
enum core_rc fs_change_decode(const char *json, size_t len, struct fs_change *ch);
/* The same from a parsed object (an old journal line, or a whole snapshot.json). */
enum core_rc fs_change_from_json(const json_t *o, struct fs_change *ch);
/* Checks "<8 hex> <json>" (no newline) and decodes it; false when the line is corrupt. */
bool fs_legacy_line_decode(const char *line, size_t len, struct fs_change *ch);
/* Loads snapshot.json at path into the (empty) state and sets fs->gen. */
enum core_rc fs_legacy_snapshot_load(struct fs *fs, const char *path, char *err,
				     size_t errlen);

/* ---- snapshot and compaction (fs_snapshot.c) ---- */

enum core_rc fs_snapshot_load(struct fs *fs, char *err, size_t errlen);
enum core_rc fs_compact_run(struct fs *fs);
/* After a failed sync (and its rollback): snapshots the memory state into a new generation
 * and, once that is durable, takes writes again. Rate-limited unless `force`; a caller that
 * finds another thread's attempt under way waits for it first. Returns OK when the store
 * takes writes. Callers hold no lock, and owe no journal line (the attempt waits for them). */
enum core_rc fs_recover(struct fs *fs, bool force);
enum core_rc fs_compactor_start(struct fs *fs);
void fs_compactor_stop(struct fs *fs);
/* Asks the background compactor for a pass (cheap; called after commits). */
void fs_compactor_poke(struct fs *fs);

/* ---- transactions (fs_txn.c) ---- */

struct fs_effect_hit; /* fs_effect.c */

struct fs_txn {
	struct fs *fs;
	int64_t now;
	const char *actor; /* borrowed */
	int64_t actor_epoch; /* an agent token's claim epoch; 0: none */
	struct fs_change ch;
	struct fs_effect_hit *hits; /* matched (event, subscription) pairs (fs_effect.c) */
	size_t n_hits;
	/* The caller's answers (fs_txn_answer): refreshed if a one-shot changes their card */
	struct {
		const char *id;          /* borrowed from the txn's copy */
		struct core_card **out;
	} answers[2];
	size_t n_answers;
};

/* *out = c for the caller when c is the transaction's own copy of the card (it becomes the
 * caller's, freed with core_card_free; the change only reads it until fs_txn_end), else a
 * copy of c; refreshed by fs_txn_end when the step's effects (consume_labels) change that
 * card after this call. NOMEM. */
enum core_rc fs_txn_answer(struct fs_txn *t, const struct core_card *c, struct core_card **out);

/* Takes the state write lock and reads "now" once for the whole mutation. */
void fs_txn_begin(struct fs *fs, struct fs_txn *t, const struct store_actor *actor);
/* The card as this transaction sees it (its own copy first, else a view of the published one
 * in *view, which must outlive the use); NULL if unknown or deleted. */
const struct core_card *fs_txn_peek(struct fs_txn *t, const char *id, struct core_card *view);
/* A private, mutable copy of card `id`: NOT_FOUND, NOMEM. */
enum core_rc fs_txn_card(struct fs_txn *t, const char *id, struct core_card **out);
/* Room for that many card copies and events, asked at once (a batch: no growth by doubling,
 * each a large realloc); best effort, the transaction grows as usual past it. */
void fs_txn_reserve(struct fs_txn *t, size_t cards, size_t events);
/* Adds a new card (takes ownership, also on failure). */
enum core_rc fs_txn_card_add(struct fs_txn *t, struct core_card *c);
enum core_rc fs_txn_card_delete(struct fs_txn *t, const char *id);
/* The run as this transaction sees it (tombstones included); NULL if unknown. */
const struct core_run *fs_txn_run_peek(struct fs_txn *t, const char *id);
/* Upserts a run (takes ownership, also on failure). */
enum core_rc fs_txn_run_put(struct fs_txn *t, struct core_run *r);
/* Upserts a board (copied). */
enum core_rc fs_txn_board_put(struct fs_txn *t, const struct core_board *b);
/* Appends an event; payload is stolen (NULL: {}). */
enum core_rc fs_txn_event(struct fs_txn *t, enum core_event_type type, const char *board,
			  const char *card_id, const char *reason, json_t *payload);
/* The same with the payload already written as an object's compact text (takes `text`, also
 * on failure; NULL: "{}"), without a tree: the hot events (store_json_members_text). */
enum core_rc fs_txn_event_text(struct fs_txn *t, enum core_event_type type, const char *board,
			       const char *card_id, const char *reason, char *text);
/* The cards that name `blocker` in their blockers as this transaction sees them (its own
 * copies first), in creation order: *ids is a new array (caller frees) of ids borrowed until
 * the transaction ends. O(dependents), never a walk of the board. */
enum core_rc fs_txn_dependents(struct fs_txn *t, const char *blocker, const char ***ids,
			       size_t *n);
/* Upserts (val non-NULL) or deletes an effect record; key and val are copied. */
enum core_rc fs_txn_kv(struct fs_txn *t, const char *key, const char *val, int64_t due);
/* The effect record as this transaction sees it (borrowed; NULL: none). */
const char *fs_txn_kv_peek(struct fs_txn *t, const char *key);
/* A lookup over cards as this transaction sees them (for core_blockers_*). */
struct core_card_lookup fs_txn_lookup(struct fs_txn *t);
/* rc == OK: commits (journal, swap, unlock, wait for durability); else aborts and unlocks.
 * Returns the final rc. */
enum core_rc fs_txn_end(struct fs_txn *t, enum core_rc rc);

/* ---- effects (fs_effect.c) ---- */

/* Publishes (undo NULL: a replay) one effect record of a change, taking kv's strings. */
void fs_kv_apply(struct fs *fs, struct fs_kv *kv, struct fs_undo *undo);
void fs_kv_release(struct fs *fs);
/* Frees what settled undo entries replaced / puts back what rolled-back ones replaced. */
void fs_kv_undo_settle(struct fs_undo *u);
void fs_kv_undo_rollback(struct fs *fs, struct fs_undo *u);
/* Run by fs_txn_end before the seqs are handed out: matches the transaction's events against
 * the subscriptions of their boards, applies consume_labels, queues the consumption events. */
enum core_rc fs_effects_match(struct fs_txn *t);
/* After the seqs: writes one delivery per match (its body carries the event's seq). */
enum core_rc fs_effects_enqueue(struct fs_txn *t);
/* Frees the matches (idempotent). */
void fs_effects_clear(struct fs_txn *t);

/* ---- domain helpers shared by the op files (fs_cards.c) ---- */

/* Moves c to `to` with reason and a card_state_changed event ({from,to} + `extra` keys,
 * stolen), then runs the unblocked cascade when c entered the completed column by a
 * non-machine write. A move to the current column is a no-op. */
enum core_rc fs_state_move(struct fs_txn *t, struct core_card *c, const struct core_board *b,
			   const char *to, const char *reason, json_t *extra);
/* fs_state_move without the cascade, for a write that has more of the card's own events to
 * append (an owned move that also releases): the card's events first, then
 * fs_state_cascade's, in the order the Mongo twin (which commits the card before it promotes
 * a dependent) appends them. *moved: whether the card changed column. */
enum core_rc fs_state_move_only(struct fs_txn *t, struct core_card *c, const char *to,
				const char *reason, json_t *extra, bool *moved);
/* The unblocked cascade of c's move into `to` (only into the completed column, by a
 * non-machine write). */
enum core_rc fs_state_cascade(struct fs_txn *t, const struct core_board *b,
			      const struct core_card *c, const char *to, const char *reason);
/* Appends a comment by the transaction's actor with its card_comment_added event, within the
 * card limits (PAYLOAD_TOO_LARGE). */
enum core_rc fs_comment_write(struct fs_txn *t, struct core_card *c, const char *body);
/* Duplicates into *out for the caller (NOMEM). */
enum core_rc fs_card_out(const struct core_card *c, struct core_card **out);
/* A new array of copies of matching recovery claims (want sees only those); cmp orders
 * them; at most batch. O(recovery claims), not O(cards). */
enum core_rc fs_cards_collect(struct fs *fs, bool (*want)(const struct core_card *, int64_t),
			      int64_t now, int (*cmp)(const void *, const void *), size_t batch,
			      struct core_card ***out, size_t *n);
/* Copies of the claims whose lease expired before now, oldest lease first (then id), at most
 * batch: read off the claimed heap in O(batch x log batch). */
enum core_rc fs_claims_expired(struct fs *fs, int64_t now, size_t batch,
			       struct core_card ***out, size_t *n);
const char *fs_actor_name(const struct store_actor *actor);

/* ---- the ops, by file ---- */

/* fs_cards.c */
enum core_rc fs_card_create(struct store *st, const struct store_card_create *in,
			    const struct store_actor *actor, struct core_card **out);
enum core_rc fs_card_patch(struct store *st, const char *id, const struct store_card_patch *p,
			   const struct store_actor *actor, struct core_card **out);
enum core_rc fs_card_delete(struct store *st, const char *id, const struct store_actor *actor);
enum core_rc fs_card_set_state_from(struct store *st, const char *id, const char *from,
				    const char *to, const char *reason,
				    const struct store_actor *actor, struct core_card **out);
enum core_rc fs_card_reopen(struct store *st, const char *id, const char *to, const char *reason,
			    const struct store_actor *actor, struct core_card **out);
enum core_rc fs_card_labels_set(struct store *st, const char *id, const struct core_strv *labels,
				const struct store_actor *actor, struct core_card **out);
enum core_rc fs_card_labels_adjust(struct store *st, const char *id, const struct core_strv *add,
				   const struct core_strv *remove, const struct store_actor *actor,
				   struct core_card **out);
enum core_rc fs_card_comment_add(struct store *st, const char *id, const char *body,
				 const struct store_actor *actor, struct core_card **out);

/* fs_claims.c */
enum core_rc fs_card_claim(struct store *st, const char *id, const char *marker, int64_t lease_ms,
			   const struct store_actor *actor, struct store_claim_result *out);
enum core_rc fs_card_claim_next(struct store *st, const struct store_claim_next *in,
				const struct store_actor *actor, struct store_claim_result *out);
enum core_rc fs_card_renew(struct store *st, const char *id, const struct core_token *t,
			   int64_t lease_ms, const struct store_actor *actor, struct core_card **out);
enum core_rc fs_card_revoke(struct store *st, const char *id, const struct store_actor *actor,
			    struct core_card **out);
/* Clears c's claim (fenced or not, as the caller decided) with its card_released event
 * ({marker, epoch}; reason may be NULL). */
enum core_rc fs_release_with_event(struct fs_txn *t, struct core_card *c, const char *reason);
enum core_rc fs_card_release(struct store *st, const char *id, const struct core_token *t,
			     const struct store_actor *actor, struct core_card **out);
enum core_rc fs_card_owned_write(struct store *st, const char *id,
				 const struct store_owned_write *w, const struct store_actor *actor,
				 struct core_card **out);
/* store_ops.stats (fs_stats.c). */
enum core_rc fs_stats(struct store *st, struct metrics_sink *out);
enum core_rc fs_reaper_list_expired(struct store *st, size_t batch, struct core_card ***out,
				    size_t *n);
enum core_rc fs_reaper_list_repair(struct store *st, size_t batch, struct core_card ***out,
				   size_t *n);
enum core_rc fs_reaper_transfer(struct store *st, const char *id, const struct core_token *prev,
				const char *marker, int64_t lease_ms, struct core_card **out);
enum core_rc fs_reaper_release_exact(struct store *st, const char *id,
				     const struct core_card *expect,
				     const struct store_actor *actor);
enum core_rc fs_reaper_transfer_many(struct store *st, struct store_transfer *v, size_t n,
				     const char *marker, int64_t lease_ms);
enum core_rc fs_reaper_act(struct store *st, struct store_reaper_act *v, size_t n,
			   const struct store_actor *actor);
/* fs_secret.c */
enum core_rc fs_secret_get(struct store *st, const char *name, unsigned char *out);
/* The legacy same-host sweep run at open (one journal line for all releases). */
enum core_rc fs_legacy_sweep(struct fs *fs);

/* fs_effect.c */
enum core_rc fs_sub_put(struct store *st, const struct store_sub *s, const char *secret_if_new,
			bool *created, struct store_sub **out);
enum core_rc fs_sub_get(struct store *st, const char *board, const char *name,
			struct store_sub **out);
enum core_rc fs_sub_list(struct store *st, const char *board, struct store_sub ***out, size_t *n);
enum core_rc fs_sub_delete(struct store *st, const char *board, const char *name);
enum core_rc fs_delivery_get(struct store *st, const char *id, struct store_delivery **out);
enum core_rc fs_delivery_list(struct store *st, const struct store_delivery_filter *f,
			      struct store_delivery ***out, size_t *n);
enum core_rc fs_delivery_lease(struct store *st, const char *owner, int64_t lease_ms,
			       struct store_delivery **out);
enum core_rc fs_delivery_finish(struct store *st, const char *id,
				const struct store_delivery_outcome *o,
				struct store_delivery **out);
enum core_rc fs_delivery_retry(struct store *st, const char *id, struct store_delivery **out);

/* fs_admin.c */
/* In txn t: every subscription of board `board` whose on.to_states names column `from`
 * names `to` instead (a column rename carries its subscriptions along). */
enum core_rc fs_subs_column_rename(struct fs_txn *t, const char *board, const char *from,
				   const char *to);
enum core_rc fs_board_column_rename(struct store *st, const char *board, const char *from,
				    const char *to, const struct store_actor *actor,
				    size_t *touched);
enum core_rc fs_labels_sweep(struct store *st, const struct store_label_sweep *sw,
			     const struct store_actor *actor, size_t *touched);

/* fs_runs.c */
enum core_rc fs_run_create(struct store *st, const struct store_run_create *in,
			   const struct store_actor *actor, struct core_run **out);
enum core_rc fs_run_get(struct store *st, const char *id, struct core_run **out);
enum core_rc fs_run_get_any(struct store *st, const char *id, struct core_run **out);
enum core_rc fs_run_update(struct store *st, const char *id, const struct store_run_update *u,
			   const struct store_actor *actor, struct core_run **out);
enum core_rc fs_run_cancel(struct store *st, const char *id, const struct store_actor *actor,
			   struct core_run **out);
enum core_rc fs_run_prune(struct store *st, const char *id, const struct store_actor *actor);
enum core_rc fs_run_promote_if_orphaned(struct store *st, const char *id, struct core_run **out,
					bool *promoted);
enum core_rc fs_run_count_for_card(struct store *st, const char *card_id, size_t *n);

/* fs_read.c: reads, boards and events */
enum core_rc fs_board_list(struct store *st, struct core_board **boards, size_t *n);
enum core_rc fs_board_get(struct store *st, const char *name, struct core_board *out);
enum core_rc fs_board_put(struct store *st, const struct core_board *b,
			  const struct store_actor *actor);
enum core_rc fs_card_get(struct store *st, const char *id, struct core_card **out);
enum core_rc fs_card_list(struct store *st, const struct store_card_filter *f,
			  struct core_card ***out, size_t *n, char **next);
enum core_rc fs_labels_count(struct store *st, const char *board, const char *const *boards,
			     json_t **out);
enum core_rc fs_events_list_board(struct store *st, const char *board, int64_t after,
				  size_t limit, int64_t wait_ms, struct core_event **out,
				  size_t *n, int64_t *next);
enum core_rc fs_events_list(struct store *st, const char *board, const char *const *boards,
			    int64_t after, size_t limit, int64_t wait_ms, struct core_event **out,
			    size_t *n, int64_t *next);

#endif
