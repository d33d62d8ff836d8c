/* Snapshots of the FS twin: loading one at open (fs_snapload.c, or snapshot.json through
 * fs_legacy.c), writing one, compaction and the recovery after a failed sync (fs_snapshot.c). */
#ifndef BOARDD_STORE_FS_FS_SNAPSHOT_H
#define BOARDD_STORE_FS_FS_SNAPSHOT_H

#include "store/fs/fs.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- snapshot and compaction (fs_snapload.c, fs_snapshot.c) ---- */

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
/* Loads (fs_legacy.c) snapshot.json at path into the (empty) state and sets fs->gen. */
enum core_rc fs_legacy_snapshot_load(struct fs *fs, const char *path, char *err,
				     size_t errlen);

#endif
