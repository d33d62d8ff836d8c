/* The FS twin's effect records (fs_effect.c): subscriptions and deliveries as keyed JSON
 * records, their publication and undo, and the matching of a transaction's events. */
#ifndef BOARDD_STORE_FS_FS_EFFECT_H
#define BOARDD_STORE_FS_FS_EFFECT_H

#include "store/fs/fs_txn.h"
#include "store/fs/fs_undo.h"

#include <stddef.h>
#include <stdint.h>

/* ---- effects (fs_effect.c) ---- */

/* Publishes (undo NULL: a replay) one effect record of a change, taking kv's strings. */
void fs_kv_apply(struct fs *fs, struct fs_kv *kv, struct fs_undo *undo);
void fs_kv_release(struct fs *fs);
/* The map a record's key files it in: "s/..." subscriptions, "i/..." idempotency records
 * (fs_idem.c), else deliveries. */
struct fs_map *fs_kv_map(struct fs *fs, const char *key);
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

/* A subscription's key, "s/<board>/<name>", fits FS_SUB_KEY_MAX bytes. */
#define FS_SUB_KEY_MAX (2 + CORE_NAME_MAX + 1 + CORE_NAME_MAX + 1)
void fs_sub_key(char *buf, const char *board, const char *name);
/* A delivery's key, "d/<id>", in a new string; NULL on OOM. */
char *fs_dlv_key(const char *id);
/* A stored record's JSON as a new object (caller frees); INTERNAL when it does not parse. */
enum core_rc fs_sub_parse(const char *text, struct store_sub **out);
enum core_rc fs_dlv_parse(const char *text, struct store_delivery **out);
/* Upserts the record in transaction t (a delivery keyed by its due time). */
enum core_rc fs_sub_write(struct fs_txn *t, const struct store_sub *s);
enum core_rc fs_dlv_write(struct fs_txn *t, const struct store_delivery *d);
/* In txn t (fs_subs.c): every subscription of board `board` whose on.to_states names column `from`
 * names `to` instead (a column rename carries its subscriptions along). */
enum core_rc fs_subs_column_rename(struct fs_txn *t, const char *board, const char *from,
				   const char *to);

#endif
