/* The FS twin's store_ops entry points, by the file that defines each: what fs.c's ops table
 * names. */
#ifndef BOARDD_STORE_FS_FS_OPS_H
#define BOARDD_STORE_FS_FS_OPS_H

#include "store/fs/fs.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
enum core_rc fs_card_renew(struct store *st, const char *id, const struct core_token *t,
			   int64_t lease_ms, const struct store_actor *actor, struct core_card **out);
enum core_rc fs_card_revoke(struct store *st, const char *id, const struct store_actor *actor,
			    struct core_card **out);
enum core_rc fs_card_release(struct store *st, const char *id, const struct core_token *t,
			     const struct store_actor *actor, struct core_card **out);
enum core_rc fs_card_owned_write(struct store *st, const char *id,
				 const struct store_owned_write *w, const struct store_actor *actor,
				 struct core_card **out);

/* fs_next.c */
enum core_rc fs_card_claim_next(struct store *st, const struct store_claim_next *in,
				const struct store_actor *actor, struct store_claim_result *out);

/* fs_reaper.c */
enum core_rc fs_reaper_list_expired(struct store *st, size_t batch,
				    const struct store_reaper_cursor *after, struct core_card ***out,
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
/* The legacy same-host sweep run at open (one journal line for all releases). */
enum core_rc fs_legacy_sweep(struct fs *fs);

/* fs_stats.c */
enum core_rc fs_stats(struct store *st, struct metrics_sink *out);

/* fs_secret.c */
enum core_rc fs_secret_get(struct store *st, const char *name, unsigned char *out);

/* fs_idem.c (DESIGN §18) */
struct fs_txn;
extern const struct store_idem_ops fs_idem_ops;
/* fs_txn_end, before the record is encoded: the key bound to the thread (store_idem_bind),
 * reserved here and not yet in a line, joins this one. */
enum core_rc fs_idem_attach(struct fs_txn *t);
/* A record past its 24 h (by the wall clock): a snapshot leaves it out. */
bool fs_idem_expired(const struct fs *fs, const struct fs_kv *kv);

/* fs_attention.c */
enum core_rc fs_attention_list(struct store *st, const char *board, const char *const *boards,
			       size_t limit, struct store_attention **out, size_t *n,
			       bool *truncated);

/* fs_subs.c */
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
			       const struct store_sub_ref *skip, size_t n_skip,
			       struct store_delivery **out);
enum core_rc fs_delivery_finish(struct store *st, const char *id,
				const struct store_delivery_outcome *o,
				struct store_delivery **out);
enum core_rc fs_delivery_retry(struct store *st, const char *id, struct store_delivery **out);

/* fs_admin.c */
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
/* fs_runs_list.c */
enum core_rc fs_run_list(struct store *st, const struct store_run_filter *f,
			 struct core_run ***out, size_t *n, char **next);
struct fs_txn;
/* In run_create's transaction: retires the card's runs past CORE_RUN_HISTORY_MAX that it may
 * (core_run_retirable; card: the card as the transaction sees it). */
enum core_rc fs_runs_retain(struct fs_txn *t, const struct core_card *card);
/* Appends text to r's output (core_run_output_append, CORE_RUN_OUTPUT_MAX). */
enum core_rc fs_run_output_append(struct core_run *r, const char *text);

/* fs_read.c: reads and boards */
enum core_rc fs_board_list(struct store *st, struct core_board **boards, size_t *n);
enum core_rc fs_board_get(struct store *st, const char *name, struct core_board *out);
enum core_rc fs_board_put(struct store *st, const struct core_board *b,
			  const struct store_actor *actor);
enum core_rc fs_card_get(struct store *st, const char *id, struct core_card **out);
enum core_rc fs_card_list(struct store *st, const struct store_card_filter *f,
			  struct core_card ***out, size_t *n, char **next);
enum core_rc fs_labels_count(struct store *st, const char *board, const char *const *boards,
			     json_t **out);

/* fs_events.c */
enum core_rc fs_events_list_board(struct store *st, const char *board, int64_t after,
				  size_t limit, int64_t wait_ms, struct core_event **out,
				  size_t *n, int64_t *next);
enum core_rc fs_events_list(struct store *st, const char *board, const char *const *boards,
			    int64_t after, size_t limit, int64_t wait_ms, struct core_event **out,
			    size_t *n, int64_t *next);

/* fs_policy.c (DESIGN §17) */
enum core_rc fs_board_claimed(struct store *st, const struct core_board *b, int64_t *per_col,
			      int64_t *total);

#endif
