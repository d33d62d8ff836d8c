/* DESIGN §17 on the FS twin (fs_policy.c): the live-claim counts capacity is checked
 * against, and the retry release. Callers hold the state lock (the write lock for what
 * changes anything). */
#ifndef BOARDD_STORE_FS_FS_POLICY_H
#define BOARDD_STORE_FS_FS_POLICY_H

#include "store/fs/fs_txn.h"

#include <stddef.h>
#include <stdint.h>

/* Part of fs_change_reserve: the count entries ch's claimed cards will bump. NOMEM. */
enum core_rc fs_claimcount_reserve(struct fs *fs, const struct fs_change *ch);
/* A card goes from before to now (either NULL): the counts follow (never allocates once
 * reserved). Called wherever a card is published, replayed, loaded or undone. */
void fs_claimcount_update(struct fs *fs, const struct fs_card *before, const struct fs_card *now);
/* The live claims on board taken from column col (NULL: all of the board's). */
int64_t fs_claimcount_get(const struct fs *fs, const char *board, const char *col);
void fs_claimcount_release(struct fs *fs);
/* core_capacity_check of a fresh claim from col on b against the counts. */
enum core_rc fs_capacity_check(const struct fs *fs, const struct core_board *b, const char *col,
			       char *detail, size_t detail_len);
/* Releases c (its fence passed) after a claim that ended without the work being done: an
 * attempt counted (core_retry_count under the board's policy); LATER leaves the card where
 * it is with not_before set; EXHAUSTED files it into the failed column with gave_up
 * {attempts_exhausted} first. In the completed column: a plain release. Events: as
 * fs_release_with_event's, with retry, attempts and not_before in the release's payload. */
enum core_rc fs_retry_release(struct fs_txn *t, struct core_card *c, const struct core_board *b,
			      const char *reason);

#endif
