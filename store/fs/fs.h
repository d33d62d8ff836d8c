/* Internals of the FS twin (DESIGN §9): the state (struct fs) and its card entries; the other
 * internal headers are listed below. Not a public header: store/store.h is.
 *
 * Model. The whole state lives in memory behind one rwlock. Published objects (cards, runs,
 * events) are immutable: a mutation works on private copies collected in a `struct fs_txn`,
 * writes them as one checksummed journal line, then swaps the copies in. Immutability is what
 * lets the compactor serialise a snapshot from bare pointers without holding the lock: while a
 * snapshot is being written, replaced objects are parked in a graveyard instead of freed.
 *
 * Files in DIR:
 *   lock             flock()ed by the owning process (with DIR itself), holds its pid
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
 * Durability. A commit is applied in memory once its record is appended to the journal's
 * buffer, and acknowledged -- or shown to any reader (fs_barrier.c) -- only once the group
 * write and fdatasync covering it succeeded. If
 * either fails, the commits not yet durable are rolled back (fs_undo.c) before any of their
 * writers is answered, and the store refuses writes until fs_recover has made the memory
 * state durable as a fresh snapshot.
 */
#ifndef BOARDD_STORE_FS_FS_H
#define BOARDD_STORE_FS_FS_H

#include "metrics/metrics.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_map.h"
#include "store/store.h"
#include "store/store_twins.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The rest of the FS twin's internals, by concern (each file includes what it uses):
 *   fs_map.h      hash map, CRC-32          fs_flat.h     published cards, atoms
 *   fs_change.h   one committed mutation    fs_codec.h    binary and legacy JSON records
 *   fs_index.h    the in-memory indexes     fs_undo.h     undo of lines not yet durable
 *   fs_io.h       fault-hooked file I/O     fs_journal.h  journal, acker, segment, replay
 *   fs_snapshot.h snapshots, compaction     fs_txn.h      transactions
 *   fs_effect.h   effect records, matching  fs_cards.h    helpers the op files share
 *   fs_ops.h      the store_ops entry points */

struct fs_undo; /* fs_undo.h */

/* A card's runs (fs_runs_index.c): their ids in the order applied, tombstones included. */
struct fs_card_runs {
	char *card_id; /* the map's key */
	char **ids;
	size_t n, cap;
};

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
	uint32_t line;          /* low bits of the journal line that last changed it (fs_barrier.c) */
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
	int dir_fd; /* DIR itself, flock()ed for the store's life: the lock nothing can delete */

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
	struct fs_map card_runs; /* card id -> struct fs_card_runs (fs_runs_index.c) */
	bool runs_index_lost;    /* an index allocation failed: readers walk `runs` */
	struct fs_map subs; /* "s/<board>/<name>" -> struct fs_kv: subscriptions (no matching at
			     * all while empty) */
	struct fs_map kv;   /* "d/<id>" -> struct fs_kv: deliveries */
	struct fs_map idem; /* "i/<scoped key>" -> struct fs_kv: idempotency records (§18,
			     * fs_idem.c; due: when it expires) */
	struct fs_map idem_pending; /* scoped key -> its struct store_idem: reserved, in memory */
	size_t idem_sweep;  /* records written since the last sweep of expired ones */
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
	uint64_t boards_line;      /* journal line that last changed a board (fs_read_mark) */
	struct fs_map claimcounts; /* DESIGN §17: "<board>" and "<board>/<column>" -> the live
				    * claims on it (taken from that column), fs_policy.c */
	uint32_t retry_rnd;        /* the retry jitter's state (fs_policy.c) */
	char *enc;                 /* the commit's record, kept for the next (fs_txn_end) */
	size_t enc_cap;

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
	bool compact_due;    /* a compaction owed whatever the journal's size: the open found
			      * earlier generations (an interrupted compaction) or a long journal */
	bool recover_wanted; /* the store failed: retry fs_recover about once a second */
	bool gen_blank;      /* under snapmu: the current generation is one a failed recovery
			      * created and nothing wrote (writes are refused until one succeeds):
			      * the next attempt reuses it instead of leaving it empty behind */
	bool compact_stop;
};

static inline struct fs *fs_of(struct store *st)
{
	return (struct fs *)st;
}

/* CLOCK_MONOTONIC in ms (fs_snapshot.c): the store's timers and back-offs. */
int64_t fs_mono_ms(void);

#endif
