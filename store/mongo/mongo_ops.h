/* mongo_ops — the Mongo twin's store ops (the functions of its store_ops table, mongo.c) and
 * the helpers one ops file offers another, by file. */
#ifndef BOARDD_STORE_MONGO_MONGO_OPS_H
#define BOARDD_STORE_MONGO_MONGO_OPS_H

#include "store/mongo/mongo_cas.h"

/* ---- the ops, by file ---- */

/* mongo_attention.c */
enum core_rc mgo_attention_list(struct store *st, const char *board, const char *const *boards,
				size_t limit, struct store_attention **out, size_t *n,
				bool *truncated);

/* mongo_effect.c */
/* Matches q's events on `card` (a private copy about to be written, changed by the
 * consume_labels of the matches: *labels_changed) and marks each matched event's outbox entry
 * with its deliveries; queues the consumption event. */
enum core_rc mgo_effects_match(struct mgo_conn *c, struct core_card *card, struct mgo_evq *q,
			       bool *labels_changed);
/* The entries of q marked MGO_DLV_LATE and still unmatched (their writer died between its
 * write and its delivery): matched now on card card_id as it stands, their deliveries added
 * to them (a one-shot label a match would consume is left on the card). */
enum core_rc mgo_effects_match_late(struct mgo_conn *c, struct mgo_evq *q, const char *card_id);
/* Inserts the deliveries q's events carry (after the events are in `events`). */
enum core_rc mgo_effects_store(struct mgo_conn *c, const struct mgo_evq *q);
void mgo_subs_cache_release(struct mgo *m);
/* Shared by the effects files (mongo_effect.c, mongo_subs.c, mongo_deliveries.c). */
/* Collection `name` on c's client (caller destroys it). */
mongoc_collection_t *mgo_effect_coll(struct mgo_conn *c, const char *name);
/* The stored JSON form as BSON, with _id first when id is not NULL (new; NULL on failure). */
bson_t *mgo_effect_json_to_bson(json_t *j, const char *id);
/* Stored documents back (INTERNAL for a malformed one). Caller frees. */
enum core_rc mgo_sub_from_bson(const bson_t *doc, struct store_sub **out);
enum core_rc mgo_dlv_from_bson(const bson_t *doc, struct store_delivery **out);
/* A subscription's _id, "<board>/<name>". */
void mgo_sub_id(char *buf, size_t len, const char *board, const char *name);
/* The enabled subscriptions of board, through the cache (copies; caller frees with
 * store_subs_free). */
enum core_rc mgo_board_subs(struct mgo_conn *c, const char *board, struct store_sub ***out,
			    size_t *n);
/* Drops board's entry from the cache (this process changed its subscriptions). */
void mgo_subs_cache_drop(struct mgo *m, const char *board);
/* Deletes the settled deliveries older than the newest 10 000 (the maintenance thread). */
void mgo_deliveries_trim(struct mgo *m);
enum core_rc mgo_sub_put(struct store *st, const struct store_sub *s, const char *secret_if_new,
			 bool *created, struct store_sub **out);
enum core_rc mgo_sub_get(struct store *st, const char *board, const char *name,
			 struct store_sub **out);
/* Every subscription of board `board` whose on.to_states names column `from` names `to`
 * instead (the column rename carries its subscriptions along); idempotent, so a resumed
 * rename repeats it harmlessly. */
enum core_rc mgo_subs_column_rename(struct mgo_conn *c, const char *board, const char *from,
				    const char *to);
enum core_rc mgo_sub_list(struct store *st, const char *board, struct store_sub ***out,
			  size_t *n);
enum core_rc mgo_sub_delete(struct store *st, const char *board, const char *name);
enum core_rc mgo_delivery_get(struct store *st, const char *id, struct store_delivery **out);
enum core_rc mgo_delivery_list(struct store *st, const struct store_delivery_filter *f,
			       struct store_delivery ***out, size_t *n);
enum core_rc mgo_delivery_lease(struct store *st, const char *owner, int64_t lease_ms,
				const struct store_sub_ref *skip, size_t n_skip,
				struct store_delivery **out);
enum core_rc mgo_delivery_finish(struct store *st, const char *id,
				 const struct store_delivery_outcome *o,
				 struct store_delivery **out);
enum core_rc mgo_delivery_retry(struct store *st, const char *id, struct store_delivery **out);

/* mongo_boards.c */
enum core_rc mgo_board_list(struct store *st, struct core_board **boards, size_t *n);
enum core_rc mgo_board_get(struct store *st, const char *name, struct core_board *out);
enum core_rc mgo_board_put(struct store *st, const struct core_board *b,
			   const struct store_actor *actor);
/* Creates the default board when there is no board at all (open). */
enum core_rc mgo_board_default(struct mgo *m);

/* mongo_admin.c */
enum core_rc mgo_board_column_rename(struct store *st, const char *board, const char *from,
				     const char *to, const struct store_actor *actor,
				     size_t *touched);
enum core_rc mgo_labels_sweep(struct store *st, const struct store_label_sweep *sw,
			      const struct store_actor *actor, size_t *touched);
/* Pushes one board-level event into board `name`'s outbox and delivers it (mongo_boards.c). */
enum core_rc mgo_board_event(struct mgo_conn *c, const char *name, enum core_event_type type,
			     const char *reason, json_t *payload);
/* Writes b over its document (upsert), optionally requiring column `must_have` in the stored
 * one (*hit false when it is gone), with a board_updated event unless payload is NULL. */
enum core_rc mgo_board_write(struct mgo_conn *c, const struct core_board *b,
			     const char *must_have, json_t *payload, bool *hit);

/* mongo_cards.c */
enum core_rc mgo_card_create(struct store *st, const struct store_card_create *in,
			     const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_get(struct store *st, const char *id, struct core_card **out);
enum core_rc mgo_card_list(struct store *st, const struct store_card_filter *f,
			   struct core_card ***out, size_t *n, char **next);
enum core_rc mgo_card_patch(struct store *st, const char *id, const struct store_card_patch *p,
			    const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_delete(struct store *st, const char *id, const struct store_actor *actor);
enum core_rc mgo_labels_count(struct store *st, const char *board, const char *const *boards,
			      json_t **out);
/* Appends {board: ..} / {board: {$in: ..}} for a board filter (either may be NULL). */
bool mgo_board_filter_append(bson_t *filter, const char *board, const char *const *boards);
/* Runs a card query into a new array (at most `limit`; 0: no limit). */
enum core_rc mgo_cards_query(struct mgo_conn *c, const bson_t *filter, const bson_t *opts,
			     struct core_card ***out, size_t *n);

/* mongo_workflow.c */
enum core_rc mgo_card_set_state_from(struct store *st, const char *id, const char *from,
				     const char *to, const char *reason,
				     const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_reopen(struct store *st, const char *id, const char *to,
			     const char *reason, const struct store_actor *actor,
			     struct core_card **out);
enum core_rc mgo_card_labels_set(struct store *st, const char *id, const struct core_strv *labels,
				 const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_labels_adjust(struct store *st, const char *id, const struct core_strv *add,
				    const struct core_strv *remove,
				    const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_comment_add(struct store *st, const char *id, const char *body,
				  const struct store_actor *actor, struct core_card **out);

/* Appends a comment by c->actor to `now` with its event queued into q, within the card
 * limits; the caller's update must pin the comment count (MGO_PRE_COMMENTS). */
enum core_rc mgo_comment_apply(struct mgo_conn *c, struct core_card *now, const char *body,
			       struct mgo_evq *q);

/* mongo_claims.c */
/* Clears the claim of a->now (a->was as read) with its card_released event ({marker, epoch},
 * reason may be NULL) and writes it guarded on the claim as read. */
enum core_rc mgo_release_write(struct mgo_conn *c, struct mgo_attempt *a, const char *reason,
			       bool *hit, struct core_card **out);
/* The same with an attempt counted (DESIGN §17, mgo_retry_apply); a->b must be read. */
enum core_rc mgo_retry_release_write(struct mgo_conn *c, struct mgo_attempt *a,
				     const char *reason, bool *hit, struct core_card **out);
enum core_rc mgo_card_claim(struct store *st, const char *id, const char *marker,
			    int64_t lease_ms, const struct store_actor *actor,
			    struct store_claim_result *out);
/* claim-next's claim of one card it picked (capacity path): a fresh claim only, with the
 * slots of DESIGN §17; CLAIM_CONFLICT when it is claimed already. */
enum core_rc mgo_claim_fresh(struct mgo_conn *c, const char *id, const char *marker,
			     const char *holder, int64_t lease_ms, struct store_claim_result *out);
enum core_rc mgo_card_claim_next(struct store *st, const struct store_claim_next *in,
				 const struct store_actor *actor, struct store_claim_result *out);
enum core_rc mgo_card_renew(struct store *st, const char *id, const struct core_token *t,
			    int64_t lease_ms, const struct store_actor *actor,
			    struct core_card **out);
enum core_rc mgo_card_revoke(struct store *st, const char *id, const struct store_actor *actor,
			     struct core_card **out);
/* Clears a->now's claim and queues its card_released event ({marker, epoch}, reason may be
 * NULL) into q; the caller writes it guarded on the claim as read. */
void mgo_release_apply(struct mgo_conn *c, struct mgo_attempt *a, const char *reason,
		       struct mgo_evq *q);
enum core_rc mgo_card_release(struct store *st, const char *id, const struct core_token *t,
			      const struct store_actor *actor, struct core_card **out);
enum core_rc mgo_card_owned_write(struct store *st, const char *id,
				  const struct store_owned_write *w,
				  const struct store_actor *actor, struct core_card **out);

/* mongo_reaper.c */

enum core_rc mgo_reaper_list_expired(struct store *st, size_t batch,
				     const struct store_reaper_cursor *after,
				     struct core_card ***out, size_t *n);
enum core_rc mgo_reaper_list_repair(struct store *st, size_t batch, struct core_card ***out,
				    size_t *n);
enum core_rc mgo_reaper_transfer(struct store *st, const char *id, const struct core_token *prev,
				 const char *marker, int64_t lease_ms, struct core_card **out);
enum core_rc mgo_reaper_release_exact(struct store *st, const char *id,
				      const struct core_card *expect,
				      const struct store_actor *actor);
/* The exact release with an attempt counted (store_reaper_act.retry). */
enum core_rc mgo_reaper_release_exact_retry(struct store *st, const char *id,
					    const struct core_card *expect,
					    const struct store_actor *actor);
/* mongo_reaper_batch.c: the reaper's batches, looping the single operations */
enum core_rc mgo_reaper_transfer_many(struct store *st, struct store_transfer *v, size_t n,
				      const char *marker, int64_t lease_ms);
enum core_rc mgo_reaper_act(struct store *st, struct store_reaper_act *v, size_t n,
			    const struct store_actor *actor);
/* mongo_policy.c, mongo_slots.c, mongo_slots_repair.c (DESIGN §17) */
uint32_t mgo_rand32(void);
/* An owned release with retry (store_owned_write.retry) on a->now, before the release is
 * applied: attempts + 1 and not_before (LATER), or the filing into the failed column with
 * gave_up {attempts_exhausted} and its events (EXHAUSTED); nothing in the completed column.
 * *release_extra: fields for the card_released payload (new reference or NULL). */
enum core_rc mgo_retry_apply(struct mgo_conn *c, struct mgo_attempt *a, const char *event_reason,
			     struct mgo_evq *q, json_t **release_extra);
/* The capacity slots a fresh claim took before its card write. */
struct mgo_slot_hold {
	char col_sid[160], board_sid[160];
	char owner[CORE_ID_MAX + 1];
	int64_t epoch;
	bool has_col, has_board;
};
/* Does a fresh claim from col on b need slots (a column limit or max_claims)? */
bool mgo_slots_needed(const struct core_board *b, const char *col);
/* Takes col's slot and the board's for (id, epoch): OK, CAPACITY_REACHED (detail filled as
 * core_capacity_check's), STORE_UNAVAILABLE; nothing held unless OK. */
enum core_rc mgo_slots_take(struct mgo_conn *c, const struct core_board *b, const char *col,
			    const char *id, int64_t epoch, struct mgo_slot_hold *h, char *detail,
			    size_t detail_len);
/* Gives back what h holds (its card write did not land). */
void mgo_slots_give_back(struct mgo_conn *c, struct mgo_slot_hold *h);
/* After a card CAS that ended or replaced the claim `was` held (post: the stored
 * post-image): frees its slots or moves them to the new claim's epoch. */
void mgo_slots_after_cas(struct mgo_conn *c, const struct core_card *was,
			 const struct core_card *now, const bson_t *post);
/* Shared by mongo_slots.c and mongo_slots_repair.c: slot i of (board, col) made for (id,
 * epoch), its _id "<board>/<col>/<i>/<rand>" into sid (CLAIM_CONFLICT: another inserter made
 * i first); the count of (board, col)'s slots (owned: held ones only); the free of slot sid
 * if still (owner, epoch); every slot held by (id, epoch) freed (to < 0) or moved to `to`. */
enum core_rc mgo_slot_insert(struct mgo_conn *c, mongoc_collection_t *sl, const char *board,
			     const char *col, int64_t i, const char *id, int64_t epoch, char *sid,
			     size_t sid_len);
enum core_rc mgo_slots_count(mongoc_collection_t *sl, const char *board, const char *col,
			     bool owned, int64_t *n);
enum core_rc mgo_slot_free_id(mongoc_collection_t *sl, const char *sid, const char *owner,
			      int64_t epoch);
enum core_rc mgo_slots_update(struct mgo_conn *c, const char *id, int64_t epoch, int64_t to);
/* The repair pass over held slots older than MGO_SLOT_GRACE_MS (at most batch). */
enum core_rc mgo_slots_repair(struct mgo_conn *c, size_t batch, size_t *freed);
/* Slots for b's live claims that hold none (taken before a limit was set, or racing the board
 * write that set it); *adopted: claims given slots. */
enum core_rc mgo_slots_adopt(struct mgo_conn *c, const struct core_board *b, size_t *adopted);
/* Held slots of b: per column (b->cols order) and the board's own. */
enum core_rc mgo_slots_owned(struct mgo_conn *c, const struct core_board *b, int64_t *per_col,
			     int64_t *board);
enum core_rc mgo_board_claimed(struct store *st, const struct core_board *b, int64_t *per_col,
			       int64_t *total);
/* The same on an open connection. */
enum core_rc mgo_board_claimed_on(struct mgo_conn *c, const struct core_board *b,
				  int64_t *per_col, int64_t *total);
/* Whether the live claims (the cards, mgo_board_claimed_on) leave room in one of cols (none:
 * the column bound does not apply) and on the board: a refusal the slots made without it
 * was caused by holds of claims still in flight, each about to land or be given back. */
enum core_rc mgo_live_room(struct mgo_conn *c, const struct core_board *b,
			   const struct core_strv *cols, bool *room);

/* mongo_secret.c */
enum core_rc mgo_secret_get(struct store *st, const char *name, unsigned char *out);

/* mongo_idem.c (DESIGN §18) */
extern const struct store_idem_ops mgo_idem_ops;

/* mongo_runs.c */
/* Run `id` as stored, tombstones included: NOT_FOUND, STORE_UNAVAILABLE. Caller frees. */
enum core_rc mgo_run_read_any(struct mgo_conn *c, const char *id, struct core_run **out);
enum core_rc mgo_run_create(struct store *st, const struct store_run_create *in,
			    const struct store_actor *actor, struct core_run **out);
enum core_rc mgo_run_get(struct store *st, const char *id, struct core_run **out);
enum core_rc mgo_run_get_any(struct store *st, const char *id, struct core_run **out);
enum core_rc mgo_run_update(struct store *st, const char *id, const struct store_run_update *u,
			    const struct store_actor *actor, struct core_run **out);
enum core_rc mgo_run_cancel(struct store *st, const char *id, const struct store_actor *actor,
			    struct core_run **out);
enum core_rc mgo_run_prune(struct store *st, const char *id, const struct store_actor *actor);
enum core_rc mgo_run_promote_if_orphaned(struct store *st, const char *id,
					 struct core_run **out, bool *promoted);
enum core_rc mgo_run_count_for_card(struct store *st, const char *card_id, size_t *n);
/* mongo_runs_list.c */
enum core_rc mgo_run_list(struct store *st, const struct store_run_filter *f,
			  struct core_run ***out, size_t *n, char **next);
/* After run_create's insert: retires card's runs past CORE_RUN_HISTORY_MAX that it may
 * (core_run_retirable), each by one conditional update. */
enum core_rc mgo_runs_retain(struct mgo_conn *c, const struct core_card *card);

#endif
