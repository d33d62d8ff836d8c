/* The reaper's operations on the FS twin (ADR-096 §6-§8): the expired and repair listings,
 * TRANSFER and the exact release, their batches (one transaction and one journal line for a
 * whole batch), and the legacy same-host sweep run at open. The fenced writes they reuse are
 * fs_claims.c's. */
#include "store/fs/fs.h"
#include "store/fs/fs_cards.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_policy.h"
#include "store/fs/fs_txn.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- reaper support ---- */

/* Abandoned recovery claims and claims that lost their lease or fence (ADR-096 §8). */
/* The FS twin's repair population is its own abandoned recovery claims only. It has no
 * un-leased arm (ADR-096 §7): no peer strips a lease from a file this process rewrites, and
 * a legacy claim with no lease is touched only by the boot-time same-host pid sweep. */
static bool want_repair(const struct core_card *c, int64_t now)
{
	return c->claim.present && core_marker_is_recovery(c->claim.marker) &&
	       core_claim_expired(c, now);
}

static int cmp_claimed(const void *a, const void *b)
{
	const struct core_card *x = *(const struct core_card *const *)a;
	const struct core_card *y = *(const struct core_card *const *)b;

	if (x->claim.claimed_at != y->claim.claimed_at)
		return x->claim.claimed_at > y->claim.claimed_at ? 1 : -1;
	return strcmp(x->id, y->id);
}

enum core_rc fs_reaper_list_expired(struct store *st, size_t batch,
				    const struct store_reaper_cursor *after, struct core_card ***out,
				    size_t *n)
{
	return fs_claims_expired(fs_of(st), store_now(st), batch, after, out, n);
}

enum core_rc fs_reaper_list_repair(struct store *st, size_t batch, struct core_card ***out,
				   size_t *n)
{
	return fs_cards_collect(fs_of(st), want_repair, store_now(st), cmp_claimed, batch, out,
				n);
}

/* TRANSFER of card c in transaction t; a miss changes nothing (CLAIM_CONFLICT). */
static enum core_rc transfer_in(struct fs_txn *t, struct core_card *c,
				const struct core_token *prev, const char *marker,
				int64_t lease_ms)
{
	enum core_rc rc = core_claim_transfer(c, prev, marker, lease_ms, t->now, 0);

	if (rc == CORE_OK)
		rc = fs_txn_event(t, CORE_EV_CARD_CLAIMED, c->board, c->id, "watchdog",
				  json_pack("{sssIs{sssI}}", "marker", marker, "epoch",
					    (json_int_t)c->claim_epoch, "reclaimed_from", "marker",
					    prev->marker, "epoch", (json_int_t)prev->epoch));
	return rc;
}

enum core_rc fs_reaper_transfer(struct store *st, const char *id, const struct core_token *prev,
				const char *marker, int64_t lease_ms, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = fs_claim_begin(st, &t, id, NULL, &c, &b);
	if (rc == CORE_OK)
		rc = transfer_in(&t, c, prev, marker, lease_ms);
	return fs_claim_end(&t, rc, c, out);
}

/* The exact release of c in transaction t; with retry (DESIGN §17) it counts an attempt. */
static enum core_rc release_exact_in(struct fs_txn *t, struct core_card *c,
				     const struct core_board *b, const struct core_card *expect,
				     bool retry)
{
	if (!core_claim_matches(c, expect))
		return CORE_ERR_CLAIM_CONFLICT;
	return retry ? fs_retry_release(t, c, b, "watchdog")
		     : fs_release_with_event(t, c, "watchdog");
}

static enum core_rc release_exact(struct store *st, const char *id,
				  const struct core_card *expect, const struct store_actor *actor,
				  bool retry)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	rc = fs_claim_begin(st, &t, id, actor, &c, &b);
	if (rc == CORE_OK)
		rc = release_exact_in(&t, c, b, expect, retry);
	return fs_claim_end(&t, rc, c, NULL);
}

enum core_rc fs_reaper_release_exact(struct store *st, const char *id,
				     const struct core_card *expect,
				     const struct store_actor *actor)
{
	return release_exact(st, id, expect, actor, false);
}

/* Write k of act item a, with the item's retry on the write that releases. */
static struct store_owned_write act_write(const struct store_reaper_act *a, size_t k)
{
	struct store_owned_write w = a->w[k];

	w.retry = w.release && (w.retry || a->retry);
	return w;
}

/* ---- the reaper's batches: one transaction, one journal line, for a whole batch ----
 * Each item runs the body of its single operation on the shared transaction, so it sees
 * the items before it. The outcomes a single operation may answer without having changed
 * anything (a transfer's miss, a card gone) stay the item's own; any other failure may have
 * left part of an item in the transaction, so the whole batch is dropped and run again one
 * operation per item: the outcome is then exactly the loop's, failures included. */

static bool miss_is_clean(enum core_rc rc)
{
	return rc == CORE_ERR_CLAIM_CONFLICT || rc == CORE_ERR_NOT_FOUND;
}

enum core_rc fs_reaper_transfer_many(struct store *st, struct store_transfer *v, size_t n,
				     const char *marker, int64_t lease_ms)
{
	struct fs_txn t;
	struct core_card *c;
	const struct core_board *b;
	enum core_rc rc = CORE_OK;
	size_t i;

	fs_txn_begin(fs_of(st), &t, NULL);
	fs_txn_reserve(&t, n, n);
	for (i = 0; i < n && rc == CORE_OK; i++) {
		v[i].card = NULL;
		v[i].rc = fs_claim_card_in(&t, v[i].id, &c, &b);
		if (v[i].rc == CORE_OK)
			v[i].rc = transfer_in(&t, c, &v[i].prev, marker, lease_ms);
		/* The copy as transferred is final: the transfer's event is a machine one
		 * (no effect changes the card), and a later item naming the same card misses. */
		if (v[i].rc == CORE_OK)
			v[i].rc = fs_card_out(c, &v[i].card);
		if (v[i].rc != CORE_OK && !miss_is_clean(v[i].rc))
			rc = v[i].rc;
	}
	if (rc != CORE_OK) {
		fs_txn_end(&t, rc);
		for (i = 0; i < n; i++) {
			core_card_free(v[i].card);
			v[i].rc = fs_reaper_transfer(st, v[i].id, &v[i].prev, marker, lease_ms,
						     &v[i].card);
		}
		return CORE_OK;
	}
	rc = fs_txn_end(&t, CORE_OK);
	for (i = 0; i < n && rc != CORE_OK; i++) {
		if (v[i].rc != CORE_OK)
			continue;
		core_card_free(v[i].card);
		v[i].card = NULL;
		v[i].rc = rc; /* not committed: as each single transfer would have answered */
	}
	return CORE_OK;
}

/* One act item on the shared transaction; OK or the first failing step's rc. */
static enum core_rc act_in(struct fs_txn *t, const struct store_reaper_act *a)
{
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc = CORE_OK;
	size_t k;

	if (!a->n_w && !a->release_expect)
		return CORE_OK;
	rc = fs_claim_card_in(t, a->id, &c, &b);
	if (rc == CORE_OK && !a->n_w)
		return release_exact_in(t, c, b, a->release_expect, a->retry);
	for (k = 0; rc == CORE_OK && k < a->n_w; k++) {
		struct store_owned_write w = act_write(a, k);

		rc = core_fence_check(c, &w.token);
		if (rc == CORE_OK)
			rc = fs_owned_write_in(t, c, b, &w);
	}
	return rc;
}

/* The single operations of one act item, in order (the fallback). */
static enum core_rc act_single(struct store *st, const struct store_reaper_act *a,
			       const struct store_actor *actor)
{
	struct core_card *out = NULL;
	enum core_rc rc = CORE_OK;
	size_t k;

	if (!a->n_w)
		return a->release_expect
			       ? release_exact(st, a->id, a->release_expect, actor, a->retry)
			       : CORE_OK;
	for (k = 0; rc == CORE_OK && k < a->n_w; k++) {
		struct store_owned_write w = act_write(a, k);

		rc = fs_card_owned_write(st, a->id, &w, actor, &out);
		core_card_free(out);
		out = NULL;
	}
	return rc;
}

enum core_rc fs_reaper_act(struct store *st, struct store_reaper_act *v, size_t n,
			   const struct store_actor *actor)
{
	struct fs_txn t;
	enum core_rc rc = CORE_OK;
	size_t i;

	fs_txn_begin(fs_of(st), &t, actor);
	fs_txn_reserve(&t, n, 2 * n); /* a filing and its release */
	for (i = 0; i < n && rc == CORE_OK; i++)
		rc = v[i].rc = act_in(&t, &v[i]);
	if (rc != CORE_OK) {
		/* Even a fence refusal runs again singly: the single write counts it. */
		fs_txn_end(&t, rc);
		for (i = 0; i < n; i++)
			v[i].rc = act_single(st, &v[i], actor);
		return CORE_OK;
	}
	rc = fs_txn_end(&t, CORE_OK);
	for (i = 0; i < n; i++)
		v[i].rc = rc;
	return CORE_OK;
}

/* "<host>-<pid>" with host == ours and a pid that no longer exists. */
static bool legacy_dead_marker(const char *marker, const char *host)
{
	size_t hl = strlen(host);
	const char *p;
	char *end;
	long pid;

	if (strncmp(marker, host, hl) != 0 || marker[hl] != '-')
		return false;
	p = marker + hl + 1;
	if (*p < '0' || *p > '9')
		return false;
	errno = 0;
	pid = strtol(p, &end, 10);
	if (*end || errno || pid <= 0 || pid == (long)getpid())
		return false;
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static int ent_ord_cmp(const void *a, const void *b)
{
	uint64_t x = (*(struct fs_card_ent *const *)a)->ord;
	uint64_t y = (*(struct fs_card_ent *const *)b)->ord;

	return (x > y) - (x < y);
}

enum core_rc fs_legacy_sweep(struct fs *fs)
{
	struct fs_card_ent **v = NULL;
	struct fs_txn t;
	struct core_card *c;
	enum core_rc rc = CORE_OK;
	size_t i, n = 0, cap = 0;

	/* The candidates come from the claimed set, not from every card (this runs at every
	 * open: a walk of a million cards was ~5 % of it); released in creation order. */
	for (i = 0; rc == CORE_OK && i < fs->n_claimed; i++) {
		const struct fs_card *pc = fs->claimed[i]->card;

		/* Only un-leased (legacy) claims: a leased one is the reaper's to judge. */
		if (!pc || !fs_card_claimed(pc) || pc->more->claim.has_lease ||
		    !legacy_dead_marker(pc->more->claim.marker, fs->hostname))
			continue;
		if (n == cap)
			rc = fs_ptrs_reserve(&v, &cap, n + 1);
		if (rc == CORE_OK)
			v[n++] = fs->claimed[i];
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), ent_ord_cmp);
	fs_txn_begin(fs, &t, NULL);
	for (i = 0; rc == CORE_OK && i < n; i++) {
		rc = fs_txn_card(&t, fs_ent_id(v[i]), &c);
		if (rc == CORE_OK)
			rc = fs_release_with_event(&t, c, "legacy_sweep");
	}
	free(v);
	return fs_txn_end(&t, rc);
}
