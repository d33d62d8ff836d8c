/* Transactions of the FS twin (fs_txn.c): a mutation works on private copies under the write
 * lock, commits them as one journal line, then swaps them in. */
#ifndef BOARDD_STORE_FS_FS_TXN_H
#define BOARDD_STORE_FS_FS_TXN_H

#include "store/fs/fs.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
	bool refresh; /* an answer's copy was replaced after it was handed out (fs_txn_card) */
	/* A transaction that writes nothing (a refusal, a no-op, claim-next's "nothing") still
	 * answers from what it read: fs_txn_end holds it until that is durable (fs_barrier.c),
	 * on this thread when set, else in the thread's store_ack if one is bound. */
	bool settle_here;
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
/* The same for a step that changes none of the card's strings and arrays, only its numbers
 * and flags (a renew): the copy is one allocation (fs_card_block), ten fewer mallocs and
 * frees a write. A later fs_txn_card of the card in the same step turns it mutable. */
enum core_rc fs_txn_card_fixed(struct fs_txn *t, const char *id, struct core_card **out);
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
 * Either way without a line of its own, it first waits for every line it may have read
 * (the read barrier: STORE_UNAVAILABLE if those were rolled back). Returns the final rc. */
enum core_rc fs_txn_end(struct fs_txn *t, enum core_rc rc);

#endif
