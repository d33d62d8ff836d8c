/* The FS twin's in-memory indexes (callers hold fs->lock): lookups and the blockers and
 * claimed indexes (fs_index.c), publishing a change into them (fs_apply.c), the card lists
 * under a state, a label or a blocker (fs_post.c), the per-board event sequence
 * (fs_evboard.c), and the attention candidates (fs_attention.c). */
#ifndef BOARDD_STORE_FS_FS_INDEX_H
#define BOARDD_STORE_FS_FS_INDEX_H

#include "store/fs/fs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A scheduled member of a state list (DESIGN §17): its not_before when it was filed. */
struct fs_sched {
	struct fs_card_ent *ent;
	int64_t at;
};

/* A list of cards under one key, in no order (fs_post.c): the dependents of a blocker id
 * (fs->deps), the cards of a state or a label (fs->post_states, fs->post_labels). */
struct fs_post {
	char *key;                 /* the map key; owned */
	struct fs_card_ent **v;
	size_t n, cap;
	size_t pending;            /* fs_change_reserve's scratch: members about to be added */
	bool reserved;             /* room reserved for a change not applied yet: keep */
	/* claim-next's cache (fs_next.c; state lists only): the best unclaimed members in
	 * core_pick_before order as of one walk, top[top_pos..top_n) still to look at. Valid
	 * until a member may have become available ahead of them (fs_post_update drops it:
	 * a card joins unclaimed, is released, changes priority, or is deleted). Members
	 * claimed or moved away since are skipped when met. top_all: the walk saw fewer
	 * unclaimed members than the cache holds, so it holds them all. */
	struct fs_card_ent **top;
	size_t top_n, top_pos, top_capn; /* top_capn: top's room */
	bool top_valid, top_all;
	/* With the cache (valid with it, DESIGN §17): the unclaimed members scheduled after the
	 * walk's time, a min-heap by not_before, which the cache holds none of. claim-next
	 * promotes the due ones into the cache (fs_next.c), so scheduled cards are never walked
	 * per claim. Entries are checked when met: one whose card left, was claimed or was
	 * rescheduled since is dropped. */
	struct fs_sched *sched;
	size_t sched_n, sched_cap;
};

/* The highest epoch a deleted id had: a card re-created under it starts above. */
struct fs_floor {
	char *id; /* the map key; owned */
	int64_t epoch;
};

/* ---- per-board event sequence and index (fs_evboard.c): callers hold `lock` ---- */

struct fs_evboard {
	char *board;            /* the map key; owned */
	int64_t last;           /* the last board_seq published (never lowered but by an undo) */
	int64_t scratch;        /* fs_evboard_assign's and fs_evboard_reserve's */
	struct core_event **v;  /* the board's events in the tail, in order: v[head .. n) */
	size_t head, n, cap;
};

/* The board's entry; created (NULL on NOMEM) when `create`, else NULL when unknown. */
struct fs_evboard *fs_evboard_get(struct fs *fs, const char *board, bool create);
/* Before the journal line is written: gives each event its board_seq. NOMEM. */
enum core_rc fs_evboard_assign(struct fs *fs, struct core_event *const *ev, size_t n);
/* Part of fs_change_reserve: room for ch's events in their boards' lists. NOMEM. */
enum core_rc fs_evboard_reserve(struct fs *fs, const struct fs_change *ch);
/* apply_event's part (reserved: cannot fail); derives a missing board_seq (older data). */
void fs_evboard_append(struct fs *fs, struct core_event *e);
/* Raises the boards' counters to a snapshot's. */
void fs_evboard_counters_apply(struct fs *fs, const struct fs_change *ch);
/* e, the oldest of the tail, is trimmed / e, the newest, is undone. */
void fs_evboard_shift(struct fs *fs, const struct core_event *e);
void fs_evboard_pop(struct fs *fs, const struct core_event *e);
/* First index of b->v whose board_seq (by_board_seq) or seq is > after. */
size_t fs_evboard_after(const struct fs_evboard *b, int64_t after, bool by_board_seq);
/* Fills out (room for fs->evboards.n) with each board's counter, names borrowed; returns
 * how many. */
size_t fs_evboard_counters(const struct fs *fs, struct fs_bctr *out);
void fs_evboard_release(struct fs *fs);

/* ---- index (fs_index.c, fs_apply.c): callers hold `lock` ---- */

const struct core_board *fs_board_find(const struct fs *fs, const char *name);
struct fs_card_ent *fs_card_find(const struct fs *fs, const char *id);
/* The published dependents of `blocker`; NULL when no card names it. */
const struct fs_post *fs_deps_find(const struct fs *fs, const char *blocker);
/* Replay: turns each decoded claim-only entry into the whole card it patches (dropped when
 * the card is gone). NOMEM. */
enum core_rc fs_change_resolve(struct fs *fs, struct fs_change *ch);
/* The epoch floor of id (0: none). */
int64_t fs_floor_get(const struct fs *fs, const char *id);
/* Makes fs_change_apply(ch) unable to fail for lack of memory; its cards are packed into
 * their published form (pub). */
enum core_rc fs_change_reserve(struct fs *fs, struct fs_change *ch);
/* Publishes ch into the state (taking its objects; ch is left empty). Infallible after a
 * successful fs_change_reserve. `undo` NULL: a replay (idempotent merge of a journal record
 * or snapshot); else a commit, whose replaced objects go to undo (fs_undo_new) instead of
 * being freed. */
void fs_change_apply(struct fs *fs, struct fs_change *ch, struct fs_undo *undo);
/* The same, leaving what remains of ch (its arrays and ids) for the caller to release: the
 * snapshot load has the thread that decoded ch free it, in that thread's malloc arena. */
void fs_change_apply_keep(struct fs *fs, struct fs_change *ch, struct fs_undo *undo);
/* Frees an object no longer published (or parks it while a snapshot reads it). */
void fs_retire_card(struct fs *fs, struct fs_card *c);
void fs_retire_run(struct fs *fs, struct core_run *r);
void fs_retire_event(struct fs *fs, struct core_event *e);
/* Frees an event and what it holds. */
void fs_event_free(struct core_event *e);
/* Room in the blockers index and the state and label lists for every member ch adds (pass 0
 * counts, pass 1 grows each list once); part of fs_change_reserve. NOMEM. */
enum core_rc fs_lists_reserve(struct fs *fs, const struct fs_change *ch);
/* First index of fs->order whose ord is >= ord (n_order when none). */
size_t fs_order_lower(const struct fs *fs, uint64_t ord);
/* Puts ent in, out of, or back in place in the claimed heap and the recovery set, to match
 * ent->card (never allocates). */
void fs_claimed_update(struct fs *fs, struct fs_card_ent *ent);
/* ---- attention (fs_attention.c): callers hold `lock` ---- */

/* Puts ent in or out of the attention candidates to match ent->card and its recorded run
 * (never allocates: room is reserved by fs_change_reserve). */
void fs_attn_update(struct fs *fs, struct fs_card_ent *ent);
/* The same for the card a run belongs to, after the run changed. */
void fs_attn_update_run(struct fs *fs, const struct core_run *r);

/* Moves ent's reverse-index edges from `before` (NULL: none) to `now` (NULL: none). */
void fs_deps_update(struct fs *fs, struct fs_card_ent *ent, const struct fs_card *before,
		    const struct fs_card *now);
/* Retires events from the head while the tail is longer than events_keep and they are
 * durable. */
void fs_events_trim(struct fs *fs);
void fs_grave_empty(struct fs *fs);
void fs_state_release(struct fs *fs);

/* ---- card lists under a key (fs_post.c): callers hold `lock` ---- */

/* The list of key in m, created empty if missing (NULL: out of memory). */
struct fs_post *fs_post_get_or_add(struct fs_map *m, const char *key);
/* One member a change is about to add to the list of key in m: pass 0 counts it (creating
 * the list), pass 1 grows the list once for everything counted and marks it reserved. Pass 1
 * must run whatever pass 0 did; *rc keeps the first failure. */
void fs_post_reserve_one(struct fs_map *m, const char *key, int pass, enum core_rc *rc);
/* Adds ent (room reserved: aborts otherwise). */
void fs_post_add(struct fs_post *p, struct fs_card_ent *ent);
/* Takes ent out of the list of key in m (a scan); an emptied list goes, unless room is
 * reserved in it or an undo may refill it. */
void fs_post_remove(struct fs *fs, struct fs_map *m, const char *key, struct fs_card_ent *ent);
/* Frees every list of m and m itself. */
void fs_post_map_release(struct fs_map *m);

/* One pass of fs_post_reserve_one for every state and label list a card going from before
 * to now joins (fs_change_reserve runs pass 0 then pass 1 over a change's cards). */
void fs_post_reserve_card(struct fs *fs, const struct fs_card *before,
			  const struct fs_card *now, int pass, enum core_rc *rc);
/* ent's card goes from before to now (either NULL): its state and label lists follow. */
void fs_post_update(struct fs *fs, struct fs_card_ent *ent, const struct fs_card *before,
		    const struct fs_card *now);
/* Drops every state's claim-next cache: before card entries are freed (a cache may still
 * point at a card that left its state and was deleted since). */
void fs_post_tops_drop(struct fs *fs);
/* A card that became an unclaimed member of state list p (ent, now its published card `c`):
 * inserted in rank order into p's claim-next cache when it ranks among the cached ones (the
 * worst is pushed out of a full cache), so the cache stays exact without a walk (fs_next.c). */
void fs_post_top_offer(struct fs_post *p, struct fs_card_ent *ent, const struct fs_card *c);
/* The same for a card that became an unclaimed member with a schedule (not_before set): filed
 * in p's scheduled heap (the cache is dropped when that needs memory it cannot get). */
void fs_post_sched_offer(struct fs_post *p, struct fs_card_ent *ent, int64_t not_before);
/* The list of a state / a label; NULL when no card carries it. */
const struct fs_post *fs_post_state(const struct fs *fs, const char *state);
const struct fs_post *fs_post_label(const struct fs *fs, const char *label);
void fs_post_release(struct fs *fs);

/* ---- runs by card (fs_runs_index.c) ----
 * Under the state write lock: a run id new to the table, its undo, and freeing.
 * fs_runs_index_get (under the lock, read or write) answers NULL with *ok false when the
 * index was lost (walk the table), else the card's list (NULL: the card has no run). */
void fs_runs_index_add(struct fs *fs, const struct core_run *r);
void fs_runs_index_drop(struct fs *fs, const struct core_run *r);
const struct fs_card_runs *fs_runs_index_get(struct fs *fs, const char *card_id, bool *ok);
void fs_runs_index_release(struct fs *fs);

#endif
