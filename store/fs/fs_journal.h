/* The FS twin's journal: appending and group commit, the acker thread (fs_journal.c),
 * the pre-allocated tail (fs_segment.c), and the replay at open (fs_replay.c). */
#ifndef BOARDD_STORE_FS_FS_JOURNAL_H
#define BOARDD_STORE_FS_FS_JOURNAL_H

#include "store/fs/fs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* ---- journal (fs_journal.c) ---- */

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
/* Opens (creating) journal.gen for writing (records go at fs->jbytes); -1 on error with errno
 * set. */
int fs_journal_open(const struct fs *fs, uint64_t gen);
/* Replays journal generations from fs->gen on (fs_replay.c); leaves fs->jfd open on the last
 * one. */
enum core_rc fs_journal_recover(struct fs *fs, char *err, size_t errlen);
/* ---- the read barrier (fs_barrier.c) ---- */

/* Under the state lock (read or write), after reading: the journal line a reader must wait
 * for before it shows what it read -- the last line applied, or `upto` if lower (the last
 * line that changed what it read: fs->boards_line) -- or 0 when that is durable already. A
 * nonzero mark must be followed by exactly one fs_read_settle. */
uint64_t fs_read_mark(struct fs *fs, uint64_t upto);
#define FS_READ_ALL UINT64_MAX
/* Without the state lock: OK once line `need` is durable (at once for 0), STORE_UNAVAILABLE
 * when it was rolled back (then show nothing of what was read). With a store_ack bound to
 * the thread (unless `here`), the wait is left in the ack and OK is returned: the caller's
 * answer is held until the ack is told. `here`: wait on this thread even with an ack bound
 * (a caller that may park its request after this read: claim-next, the board reads). */
enum core_rc fs_read_settle(struct fs *fs, uint64_t need, bool here);
/* fs_read_settle, then the read's own rc unless the settle failed (a rollback wins: what was
 * read, found or not found, never happened). The readers' usual tail. */
enum core_rc fs_read_end(struct fs *fs, uint64_t need, bool here, enum core_rc rc);

/* Under the state lock: card `id` as of its last durable version (NULL: none is durable), the
 * one a crash now would leave; published, valid while the lock is held. */
const struct fs_card *fs_card_durable(struct fs *fs, const char *id);
/* The same for many entries in one read (a list): the horizon taken once, then each entry's
 * last durable version (NULL: none; also for a dead entry deleted durably). */
struct fs_durable {
	uint64_t appended, synced;
	bool pending; /* lines applied that are not durable (else every entry is as it stands) */
};
void fs_durable_begin(struct fs *fs, struct fs_durable *d);
const struct fs_card *fs_ent_durable(struct fs *fs, const struct fs_durable *d,
				     const struct fs_card_ent *e);
/* The distinct entries that lines not yet durable touched, sorted by address for
 * fs_pending_has: a new array (caller frees; NULL and 0 when none). NOMEM. A list walked by a
 * posting list (the cards as they are now) also offers these, as their durable versions. */
enum core_rc fs_pending_ents(struct fs *fs, const struct fs_durable *d,
			     const struct fs_card_ent ***out, size_t *n);
bool fs_pending_has(const struct fs_card_ent *const *v, size_t n, const struct fs_card_ent *e);

/* Makes events up to seq visible to events_list and wakes long-polls. */
void fs_events_publish(struct fs *fs, int64_t seq);

#endif
