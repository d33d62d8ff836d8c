/* DESIGN §17 on the FS twin (issue 27): the live-claim counts that capacity is checked
 * against (per board, and per board and the column a claim was taken from, claim.from), the
 * board_claimed op that serves them, and the retry release (an attempt counted in the
 * release's own step: the card back in the pool with not_before set, or filed into the
 * failed column once its attempts are exhausted).
 *
 * The counts are derived from the published cards alone. fs_claimcount_update runs at the
 * publish points every other index follows (fs_deps_update: a commit, a replayed record, a
 * snapshot chunk, an undo), with the card before and after, so a commit rolled back after a
 * failed sync takes its counts back with it, and an open rebuilds them from the cards it
 * loads. Entries are created while a change is reserved (fs_claimcount_reserve) and never
 * removed, so neither a commit nor an undo allocates. The bound itself holds because every
 * claim is checked and granted under the state write lock, against these counts. */
#include "store/fs/fs.h"
#include "store/fs/fs_cards.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_policy.h"
#include "store/fs/fs_txn.h"

#include <stdlib.h>
#include <string.h>

/* ---- the counts ---- */

struct fs_claimcount {
	char *key; /* "<board>" or "<board>/<column>" (names never hold '/'); the map key */
	int64_t n;
};

/* The key of (board, col) in buf (col NULL: the board's total); false when a name is too
 * long to be a name (such a claim counts against no column). */
static bool cc_key(char *buf, size_t len, const char *board, const char *col)
{
	/* Two copies, not snprintf: every claim and release makes or finds two keys under the
	 * write lock (snprintf was a third of fs_claimcount_update's instructions). */
	size_t nb = strlen(board), nc = col ? strlen(col) : 0, n = nb + (col ? nc + 1 : 0);

	if (n == 0 || n >= len)
		return false;
	memcpy(buf, board, nb);
	if (col) {
		buf[nb] = '/';
		memcpy(buf + nb + 1, col, nc);
	}
	buf[n] = '\0';
	return true;
}

#define CC_KEY_LEN (2 * CORE_NAME_MAX + 2)

static struct fs_claimcount *cc_get(const struct fs *fs, const char *board, const char *col)
{
	char key[CC_KEY_LEN];

	return cc_key(key, sizeof key, board, col) ? fs_map_get(&fs->claimcounts, key) : NULL;
}

/* The entry of (board, col), created when missing; NULL on OOM (or a name too long). */
static struct fs_claimcount *cc_make(struct fs *fs, const char *board, const char *col,
				     bool *nomem)
{
	char key[CC_KEY_LEN];
	struct fs_claimcount *e;

	if (!cc_key(key, sizeof key, board, col))
		return NULL;
	e = fs_map_get(&fs->claimcounts, key);
	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (e && (e->key = strdup(key)) && fs_map_put(&fs->claimcounts, e->key, e) == CORE_OK)
		return e;
	if (e)
		free(e->key);
	free(e);
	*nomem = true;
	return NULL;
}

static bool str_same(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

enum core_rc fs_claimcount_reserve(struct fs *fs, const struct fs_change *ch)
{
	bool nomem = false;
	size_t i;

	for (i = 0; i < ch->n_cards && !nomem; i++) {
		const struct fs_card *c = ch->cards[i].pub;
		const struct fs_card_ent *ent = ch->cards[i].ent;
		const struct fs_card *was = ent && !ent->dead ? ent->card : NULL;

		if (!c || !fs_card_claimed(c))
			continue;
		/* Held before by the same board and from (a renewal, a move of a held card): its
		 * entries were made when it was claimed, and fs_claimcount_update leaves them. */
		if (was && fs_card_claimed(was) && strcmp(was->board, c->board) == 0 &&
		    str_same(was->more->claim.from, c->more->claim.from))
			continue;
		cc_make(fs, c->board, NULL, &nomem);
		if (c->more->claim.from)
			cc_make(fs, c->board, c->more->claim.from, &nomem);
	}
	return nomem ? CORE_ERR_NOMEM : CORE_OK;
}

static void cc_bump(struct fs *fs, const struct fs_card *c, const char *col, int64_t d)
{
	bool nomem = false;
	struct fs_claimcount *e = d > 0 ? cc_make(fs, c->board, col, &nomem)
					: cc_get(fs, c->board, col);

	if (nomem)
		abort(); /* reserved by fs_change_reserve (an undo only puts back what was) */
	if (e)
		e->n += d;
}

void fs_claimcount_update(struct fs *fs, const struct fs_card *before, const struct fs_card *now)
{
	bool was = before && fs_card_claimed(before), is = now && fs_card_claimed(now);

	if (!was && !is)
		return; /* the usual case: nothing held before or after */
	if (was && is && strcmp(before->board, now->board) == 0 &&
	    str_same(before->more->claim.from, now->more->claim.from))
		return; /* a renewal, a move or any other write of a held card */
	if (was) {
		cc_bump(fs, before, NULL, -1);
		if (before->more->claim.from)
			cc_bump(fs, before, before->more->claim.from, -1);
	}
	if (is) {
		cc_bump(fs, now, NULL, 1);
		if (now->more->claim.from)
			cc_bump(fs, now, now->more->claim.from, 1);
	}
}

int64_t fs_claimcount_get(const struct fs *fs, const char *board, const char *col)
{
	const struct fs_claimcount *e = cc_get(fs, board, col);

	return e ? e->n : 0;
}

void fs_claimcount_release(struct fs *fs)
{
	size_t i;

	for (i = 0; i < fs->claimcounts.cap; i++) {
		struct fs_claimcount *e =
			fs->claimcounts.slots[i].key ? fs->claimcounts.slots[i].val : NULL;

		if (e) {
			free(e->key);
			free(e);
		}
	}
	fs_map_release(&fs->claimcounts);
}

enum core_rc fs_board_claimed(struct store *st, const struct core_board *b, int64_t *per_col,
			      int64_t *total)
{
	struct fs *fs = fs_of(st);
	uint64_t need;
	size_t i;

	pthread_rwlock_rdlock(&fs->lock);
	*total = fs_claimcount_get(fs, b->name, NULL);
	for (i = 0; i < b->n_cols; i++)
		per_col[i] = fs_claimcount_get(fs, b->name, b->cols[i].name);
	/* The counts may include lines not durable yet: answer once they are. */
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	return fs_read_end(fs, need, true, CORE_OK);
}

enum core_rc fs_capacity_check(const struct fs *fs, const struct core_board *b, const char *col,
			       char *detail, size_t detail_len)
{
	return core_capacity_check(b, col, col ? fs_claimcount_get(fs, b->name, col) : 0,
				   fs_claimcount_get(fs, b->name, NULL), detail, detail_len);
}

/* ---- the retry release ---- */

/* The jitter's randomness: xorshift32 under the state write lock (every caller holds it); the
 * outcome is journaled, never recomputed. */
static uint32_t retry_rnd(struct fs *fs)
{
	uint32_t x = fs->retry_rnd;

	if (!x)
		x = (uint32_t)fs_mono_ms() ^ 0x9E3779B9u ^ (uint32_t)(uintptr_t)fs;
	if (!x)
		x = 1;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	fs->retry_rnd = x;
	return x;
}

/* The release event of a retry: {marker, epoch, retry: true, attempts: n[, not_before]}. */
static char *retry_payload(const struct core_card *c, bool later)
{
	char t[CORE_TIME_BUF];
	const struct store_json_member m[] = {
		{"marker", STORE_JSON_STR, c->claim.marker, 0},
		{"epoch", c->has_epoch ? STORE_JSON_INT : STORE_JSON_NULL, NULL, c->claim_epoch},
		{"retry", STORE_JSON_BOOL, NULL, 1},
		{"attempts", STORE_JSON_INT, NULL, c->attempts},
		{"not_before", STORE_JSON_STR, later ? core_time_format(c->not_before, t) : NULL,
		 0},
	};
	size_t len;

	return store_json_members_text(m, later ? 5 : 4, &len);
}

enum core_rc fs_retry_release(struct fs_txn *t, struct core_card *c, const struct core_board *b,
			      const char *reason)
{
	struct core_gave_up g = {.set = true, .reason = CORE_GAVE_UP_ATTEMPTS_EXHAUSTED};
	enum core_retry_outcome out;
	struct core_retry policy;
	json_t *gp;
	char *payload;
	bool moved = false;
	enum core_rc rc;

	/* The work was done: a plain release, no attempt. */
	if (b->completed && strcmp(c->state, b->completed) == 0)
		return fs_release_with_event(t, c, reason);
	store_retry_of(&t->fs->base, b, &policy);
	out = core_retry_count(c, &policy, t->now, retry_rnd(t->fs));
	if (out == CORE_RETRY_EXHAUSTED && b->failed) {
		/* Filed under machine provenance when the reaper files it (reason "watchdog"),
		 * else as attempts_exhausted (the filing and its gave_up event alike, as on the
		 * Mongo twin); gave_up names the run that failed last. */
		const char *why = core_is_machine_reason(reason) ? reason
								 : CORE_GAVE_UP_ATTEMPTS_EXHAUSTED;

		rc = fs_state_move_only(t, c, b->failed, why,
					json_pack("{ss}", "cause", CORE_GAVE_UP_ATTEMPTS_EXHAUSTED),
					&moved);
		g.run_id = c->last_run_id;
		g.state = b->failed;
		if (rc == CORE_OK)
			rc = core_card_gave_up_set(c, &g, t->now);
		if (rc == CORE_OK) {
			gp = json_pack("{s:o}", "gave_up", store_gave_up_to_json(&c->gave_up));
			rc = fs_txn_event(t, CORE_EV_CARD_GAVE_UP, c->board, c->id, why, gp);
		}
		if (rc != CORE_OK)
			return rc;
	}
	payload = retry_payload(c, out == CORE_RETRY_LATER);
	if (!payload)
		return CORE_ERR_NOMEM;
	core_claim_clear(c);
	c->updated_at = t->now;
	rc = fs_txn_event_text(t, CORE_EV_CARD_RELEASED, c->board, c->id, reason, payload);
	/* Filed into the failed column: no cascade (that is the completed column's). */
	if (rc == CORE_OK && moved)
		rc = fs_state_cascade(t, b, c, b->failed, CORE_GAVE_UP_ATTEMPTS_EXHAUSTED);
	return rc;
}
