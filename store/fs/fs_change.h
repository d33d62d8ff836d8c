/* One committed mutation of the FS twin (struct fs_change): what a transaction builds, a
 * journal record carries, a snapshot chunk holds, and a replay applies (fs_apply.c). */
#ifndef BOARDD_STORE_FS_FS_CHANGE_H
#define BOARDD_STORE_FS_FS_CHANGE_H

#include "core/core.h"
#include "store/fs/fs_flat.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

struct fs_dlv_order; /* fs_subs.c */

/* An effect record (store/fs/fs_effect.c): a subscription ("s/<board>/<name>"), a delivery
 * ("d/<id>") or an idempotency record ("i/<key>"), held as its stored JSON text. `due`: a
 * pending delivery's next_at (while leased, its lease's end), a settled one's -(updated_at);
 * an idempotency record's expiry; 0 for subscriptions. In a change, val NULL deletes the key.
 * Published entries are immutable; `lease` is a cache of what the text says, filled in by
 * the lease scan under the write lock (fs_subs.c) and freed with the entry. */
struct fs_kv {
	char *key;
	char *val;
	int64_t due;
	struct fs_dlv_order *lease; /* NULL until a lease scan read it; never in a change */
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

/* Frees what ch holds (fs_apply.c); ch is left empty. */
void fs_change_release(struct fs_change *ch);

#endif
