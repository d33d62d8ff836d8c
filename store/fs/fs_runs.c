/* Runs on the FS twin (DESIGN §5): create, read, owner updates that renew the run lock,
 * operator cancel and prune (a tombstone that stays in memory and in the snapshot), and
 * promoteIfOrphaned as one step under the lock. */
#include "store/fs/fs.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_txn.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static enum core_rc run_out(const struct core_run *r, struct core_run **out)
{
	if (!out)
		return CORE_OK;
	*out = core_run_dup(r);
	return *out ? CORE_OK : CORE_ERR_NOMEM;
}

static enum core_rc end_run(struct fs_txn *t, enum core_rc rc, const struct core_run *r,
			    struct core_run **out)
{
	if (rc == CORE_OK)
		rc = run_out(r, out);
	rc = fs_txn_end(t, rc);
	if (rc != CORE_OK && out && *out) {
		core_run_free(*out);
		*out = NULL;
	}
	return rc;
}

/* Run events name the marker, so an audit tells the workers apart (DESIGN §11). */
static json_t *run_payload(const struct core_run *r)
{
	return json_pack("{ssssso}", "run_id", r->id, "status", r->status, "marker",
			 r->owner ? json_string(r->owner) : json_null());
}

/* The run's claim must still be the card's current claim, held by this actor. */
static enum core_rc run_fence(struct fs_txn *t, const struct core_run *r,
			      const struct store_actor *actor)
{
	struct core_card view;
	const struct core_card *card = fs_txn_peek(t, r->card_id, &view);

	if (!card || !core_run_of_claim(r, card) ||
	    !core_holder_match(&card->claim, store_actor_holder(actor))) {
		store_run_fence_refused(&t->fs->base);
		return CORE_ERR_CLAIM_CONFLICT;
	}
	return CORE_OK;
}

enum core_rc fs_run_create(struct store *st, const struct store_run_create *in,
			   const struct store_actor *actor, struct core_run **out)
{
	struct fs_txn t;
	struct core_card view;
	const struct core_card *card;
	struct core_run *r = NULL;
	char idbuf[CORE_ID_MAX + 1];
	const char *id = in->id;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	card = fs_txn_peek(&t, in->card_id, &view);
	rc = CORE_ERR_NOT_FOUND;
	if (!card)
		goto out;
	/* Only the card's current holder starts a run, bound to its claim (DESIGN §11). */
	rc = CORE_ERR_CLAIM_CONFLICT;
	if (!card->claim.present || !card->has_epoch || strcmp(card->claim.marker, in->marker) != 0 ||
	    !core_holder_match(&card->claim, store_actor_holder(actor))) {
		store_run_fence_refused(st);
		goto out;
	}
	rc = CORE_ERR_ALREADY_EXISTS;
	if (id && fs_txn_run_peek(&t, id)) /* a tombstone keeps its id too */
		goto out;
	while (!id) {
		snprintf(idbuf, sizeof(idbuf), "r-%011" PRIx64 "-%012" PRIu64, (uint64_t)t.now,
			 ++t.ch.ctr.run);
		if (!fs_txn_run_peek(&t, idbuf))
			id = idbuf;
	}
	rc = CORE_ERR_NOMEM;
	r = core_run_new();
	if (!r || core_str_set(&r->id, id) || core_str_set(&r->card_id, card->id) ||
	    core_str_set(&r->board, card->board) || core_str_set(&r->status, in->status) ||
	    core_str_set(&r->owner, in->marker))
		goto out;
	r->claim_epoch = card->claim_epoch;
	r->lease_ms = in->lease_ms;
	r->lock_until = t.now + in->lease_ms;
	r->created_at = r->updated_at = t.now;
	rc = fs_txn_event(&t, CORE_EV_RUN_CREATED, r->board, r->card_id, NULL, run_payload(r));
	if (rc == CORE_OK) {
		rc = fs_txn_run_put(&t, r);
		r = NULL;
	}
	if (rc == CORE_OK) /* the card's history stays bounded, in the same step (DESIGN §20) */
		rc = fs_runs_retain(&t, card);
out:
	core_run_free(r);
	return end_run(&t, rc, rc == CORE_OK ? fs_txn_run_peek(&t, id) : NULL, out);
}

/* A run read's tail: the read barrier (fs_barrier.c), and no run handed out if it fails. */
static enum core_rc read_end(struct fs *fs, uint64_t need, enum core_rc rc, struct core_run **out)
{
	enum core_rc w = fs_read_end(fs, need, false, rc);

	if (w != CORE_OK && rc == CORE_OK) {
		core_run_free(*out);
		*out = NULL;
	}
	return w;
}

enum core_rc fs_run_get(struct store *st, const char *id, struct core_run **out)
{
	struct fs *fs = fs_of(st);
	const struct core_run *r;
	enum core_rc rc = CORE_ERR_NOT_FOUND;

	uint64_t need;

	pthread_rwlock_rdlock(&fs->lock);
	r = fs_map_get(&fs->runs, id);
	if (r && !r->pruned)
		rc = run_out(r, out);
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	return read_end(fs, need, rc, out);
}

enum core_rc fs_run_get_any(struct store *st, const char *id, struct core_run **out)
{
	struct fs *fs = fs_of(st);
	const struct core_run *r;
	enum core_rc rc = CORE_ERR_NOT_FOUND;

	uint64_t need;

	pthread_rwlock_rdlock(&fs->lock);
	r = fs_map_get(&fs->runs, id);
	if (r)
		rc = run_out(r, out);
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	return read_end(fs, need, rc, out);
}

/* A private copy of live run `id` in t: NOT_FOUND for unknown or pruned runs. */
static enum core_rc txn_run(struct fs_txn *t, const char *id, struct core_run **out)
{
	const struct core_run *r = fs_txn_run_peek(t, id);
	enum core_rc rc;

	*out = NULL;
	if (!r || r->pruned)
		return CORE_ERR_NOT_FOUND;
	*out = core_run_dup(r);
	if (!*out)
		return CORE_ERR_NOMEM;
	rc = fs_txn_run_put(t, *out);
	if (rc != CORE_OK)
		*out = NULL;
	return rc;
}

enum core_rc fs_run_update(struct store *st, const char *id, const struct store_run_update *u,
			   const struct store_actor *actor, struct core_run **out)
{
	struct fs_txn t;
	struct core_run *r = NULL;
	const struct core_run *cur;
	enum core_rc rc = CORE_ERR_NOT_FOUND;

	fs_txn_begin(fs_of(st), &t, actor);
	cur = fs_txn_run_peek(&t, id);
	if (!cur || cur->pruned)
		goto out;
	/* Only the lock holder writes its run (checked before any copy is made). */
	rc = CORE_ERR_CLAIM_CONFLICT;
	if (!cur->owner || strcmp(cur->owner, u->marker) != 0)
		goto out;
	/* A zombie's late write must not decide the new owner's card. */
	rc = run_fence(&t, cur, actor);
	if (rc == CORE_OK && core_run_status_final(cur->status))
		rc = CORE_ERR_RUN_FINAL;
	if (rc != CORE_OK)
		goto out;
	rc = txn_run(&t, id, &r);
	if (rc != CORE_OK)
		goto out;
	if ((u->status && core_str_set(&r->status, u->status)) ||
	    (u->clear_continuation && core_str_set(&r->continuation, NULL)) ||
	    (u->continuation && core_str_set(&r->continuation, u->continuation)) ||
	    (u->failure_code && core_str_set(&r->failure_code, u->failure_code)) ||
	    (u->result && core_str_set(&r->result, u->result)) ||
	    (u->error && core_str_set(&r->error, u->error))) {
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	if (u->output && (rc = fs_run_output_append(r, u->output)) != CORE_OK)
		goto out;
	if (u->lease_ms > 0)
		r->lease_ms = u->lease_ms; /* else the run keeps its own */
	r->lock_until = t.now + r->lease_ms;
	r->updated_at = t.now;
	rc = fs_txn_event(&t, CORE_EV_RUN_UPDATED, r->board, r->card_id, NULL, run_payload(r));
out:
	return end_run(&t, rc, r, out);
}

enum core_rc fs_run_cancel(struct store *st, const char *id, const struct store_actor *actor,
			   struct core_run **out)
{
	struct fs_txn t;
	struct core_run *r = NULL;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	rc = txn_run(&t, id, &r);
	if (rc == CORE_OK && core_run_status_final(r->status))
		rc = CORE_ERR_RUN_FINAL;
	if (rc == CORE_OK)
		rc = core_str_set(&r->status, CORE_RUN_CANCELLED);
	if (rc == CORE_OK) {
		r->updated_at = t.now;
		rc = fs_txn_event(&t, CORE_EV_RUN_UPDATED, r->board, r->card_id, NULL,
				  run_payload(r));
	}
	return end_run(&t, rc, r, out);
}

enum core_rc fs_run_prune(struct store *st, const char *id, const struct store_actor *actor)
{
	struct fs_txn t;
	struct core_run *r = NULL;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	rc = txn_run(&t, id, &r);
	if (rc == CORE_OK) {
		core_run_retire(r); /* a tombstone: result, error and output go with it */
		r->updated_at = t.now;
		rc = fs_txn_event(&t, CORE_EV_RUN_UPDATED, r->board, r->card_id, NULL,
				  json_pack("{sssb}", "run_id", r->id, "pruned", 1));
	}
	return end_run(&t, rc, r, NULL);
}

enum core_rc fs_run_promote_if_orphaned(struct store *st, const char *id, struct core_run **out,
					bool *promoted)
{
	struct fs_txn t;
	struct core_run *r = NULL;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, NULL);
	rc = txn_run(&t, id, &r);
	if (rc == CORE_OK)
		core_run_promote_if_orphaned(r, t.now, promoted);
	/* Journaled only when promoted; otherwise the transaction is aborted (freeing the
	 * copy) and the run is answered as it stands. */
	if (rc == CORE_OK && *promoted)
		rc = fs_txn_event(&t, CORE_EV_RUN_UPDATED, r->board, r->card_id, "watchdog",
				  json_pack("{ssssssso}", "run_id", r->id, "status", r->status,
					    "failure_code", r->failure_code, "marker",
					    r->owner ? json_string(r->owner) : json_null()));
	if (rc == CORE_OK && !*promoted) {
		rc = run_out(r, out);
		fs_txn_end(&t, CORE_ERR_INTERNAL); /* abort: nothing to write */
		return rc;
	}
	return end_run(&t, rc, r, out);
}

enum core_rc fs_run_count_for_card(struct store *st, const char *card_id, size_t *n)
{
	struct fs *fs = fs_of(st);
	const struct fs_card_runs *l;
	const struct core_run *r;
	uint64_t need;
	bool indexed;
	size_t i;

	pthread_rwlock_rdlock(&fs->lock);
	l = fs_runs_index_get(fs, card_id, &indexed); /* every run of the card, tombstones too */
	if (indexed)
		*n = l ? l->n : 0;
	for (i = 0; !indexed && i < fs->runs.cap; i++) {
		r = fs->runs.slots[i].key ? fs->runs.slots[i].val : NULL;
		if (r && strcmp(r->card_id, card_id) == 0)
			(*n)++;
	}
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	return fs_read_end(fs, need, false, CORE_OK);
}
