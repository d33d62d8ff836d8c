/* Helpers the FS twin's op files share: a card's move and its cascade, comments and answers
 * (fs_cards.c), the reads the reaper lists from (fs_read.c), and the transaction head and tail
 * of the claim ops (fs_claims.c). */
#ifndef BOARDD_STORE_FS_FS_CARDS_H
#define BOARDD_STORE_FS_FS_CARDS_H

#include "store/fs/fs_txn.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
			       const struct store_reaper_cursor *after, struct core_card ***out,
			       size_t *n);
const char *fs_actor_name(const struct store_actor *actor);

/* ---- the claim ops' transaction (fs_claims.c) ---- */

/* Card `id` in an open transaction (its private copy) with its board. */
enum core_rc fs_claim_card_in(struct fs_txn *t, const char *id, struct core_card **c,
			      const struct core_board **b);
/* A transaction over card `id` with its board; the usual head of every claim op. */
enum core_rc fs_claim_begin(struct store *st, struct fs_txn *t, const char *id,
			    const struct store_actor *actor, struct core_card **c,
			    const struct core_board **b);
/* Ends t with rc, answering c into *out (out may be NULL) on success; *out NULL on failure. */
enum core_rc fs_claim_end(struct fs_txn *t, enum core_rc rc, const struct core_card *c,
			  struct core_card **out);
/* The claim's token as an event payload, {"marker": .., "epoch": n or null}, as text (caller
 * frees; NULL on OOM). */
char *fs_claim_token_text(const char *marker, const struct core_card *c);
/* Clears c's claim (fenced or not, as the caller decided) with its card_released event
 * ({marker, epoch}; reason may be NULL). */
enum core_rc fs_release_with_event(struct fs_txn *t, struct core_card *c, const char *reason);
/* The owned write w on card c (its fence already passed) in transaction t. */
enum core_rc fs_owned_write_in(struct fs_txn *t, struct core_card *c, const struct core_board *b,
			       const struct store_owned_write *w);

#endif
