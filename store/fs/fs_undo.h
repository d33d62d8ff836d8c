/* Undo of the FS twin's transactions not yet durable (fs_undo.c): what each replaced, kept
 * until its journal line is durable, and put back newest first if the group sync fails. */
#ifndef BOARDD_STORE_FS_FS_UNDO_H
#define BOARDD_STORE_FS_FS_UNDO_H

#include "store/fs/fs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* ---- undo of transactions not yet durable (fs_undo.c): callers hold the write lock ---- */

/* An undo entry sized for ch, with the counters as they are now; NULL on OOM. */
struct fs_undo *fs_undo_new(const struct fs_change *ch, const struct fs_counters *before);
void fs_undo_free(struct fs *fs, struct fs_undo *u);
/* Drops the entries whose line is durable (seq <= synced), freeing what they replaced. */
void fs_undo_settle(struct fs *fs, uint64_t synced);
/* Undoes the entries whose line is not durable (seq > synced), newest first. */
void fs_undo_rollback(struct fs *fs, uint64_t synced);

#endif
