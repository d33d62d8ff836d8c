/* The store_*() wrappers of the reaper's support (DESIGN §6): listings, transfers and its
 * batches.
 * store/store.c says what a wrapper owes its caller and which file holds which wrappers. */
#include "store/store_wrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reaper support ---- */

enum core_rc store_reaper_list_expired(struct store *st, size_t batch, struct core_card ***out,
				       size_t *n)
{
	return store_reaper_list_expired_after(st, batch, NULL, out, n);
}

enum core_rc store_reaper_list_expired_after(struct store *st, size_t batch,
					     const struct store_reaper_cursor *after,
					     struct core_card ***out, size_t *n)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (!st || !out || !n || batch < 1 || (after && after->set && (after->arm < 0 ||
								       after->arm > 1)))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, reaper_list_expired);
	return st->ops->reaper_list_expired(st, batch, after && after->set ? after : NULL, out, n);
}

void store_reaper_cursor_past(struct store_reaper_cursor *c, const struct core_card *card)
{
	bool leased = card->claim.has_lease && card->has_epoch;

	c->set = true;
	c->arm = leased ? 0 : 1;
	c->at = leased ? card->claim.lease_until : card->claim.claimed_at;
	snprintf(c->id, sizeof(c->id), "%s", card->id);
}

enum core_rc store_reaper_list_repair(struct store *st, size_t batch, struct core_card ***out,
				      size_t *n)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (!st || !out || !n || batch < 1)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, reaper_list_repair);
	return st->ops->reaper_list_repair(st, batch, out, n);
}

enum core_rc store_reaper_transfer(struct store *st, const char *id, const struct core_token *prev,
				   const char *marker, int64_t lease_ms, struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id) || !store_wrap_token_valid(prev) ||
	    !core_marker_valid(marker) || lease_ms <= 0)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, reaper_transfer);
	return st->ops->reaper_transfer(st, id, prev, marker, lease_ms, out);
}

enum core_rc store_reaper_release_exact(struct store *st, const char *id,
					const struct core_card *expect,
					const struct store_actor *actor)
{
	if (!st || !expect || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, reaper_release_exact);
	return st->ops->reaper_release_exact(st, id, expect, actor);
}

enum core_rc store_reaper_transfer_many(struct store *st, struct store_transfer *v, size_t n,
					const char *marker, int64_t lease_ms)
{
	size_t i;

	for (i = 0; v && i < n; i++) {
		v[i].rc = CORE_ERR_INTERNAL;
		v[i].card = NULL;
	}
	if (!st || (!v && n) || !core_marker_valid(marker) || lease_ms <= 0)
		return CORE_ERR_BAD_REQUEST;
	for (i = 0; i < n; i++)
		if (!core_id_valid(v[i].id) || !store_wrap_token_valid(&v[i].prev))
			return CORE_ERR_BAD_REQUEST;
	if (!n)
		return CORE_OK;
	NEED_OP(st, reaper_transfer_many);
	return st->ops->reaper_transfer_many(st, v, n, marker, lease_ms);
}

enum core_rc store_reaper_act(struct store *st, struct store_reaper_act *v, size_t n,
			      const struct store_actor *actor)
{
	size_t i, k;

	for (i = 0; v && i < n; i++)
		v[i].rc = CORE_ERR_INTERNAL;
	if (!st || (!v && n))
		return CORE_ERR_BAD_REQUEST;
	for (i = 0; i < n; i++) {
		if (!core_id_valid(v[i].id) || v[i].n_w > 2)
			return CORE_ERR_BAD_REQUEST;
		for (k = 0; k < v[i].n_w; k++)
			if (!store_wrap_owned_write_valid(&v[i].w[k]) ||
			    (v[i].w[k].release && k + 1 < v[i].n_w))
				return CORE_ERR_BAD_REQUEST;
	}
	if (!n)
		return CORE_OK;
	NEED_OP(st, reaper_act);
	for (i = 0; i < n; i++)
		for (k = 0; k < v[i].n_w; k++)
			v[i].w[k].token = store_wrap_token_of(&v[i].w[k].token, actor);
	return st->ops->reaper_act(st, v, n, actor);
}
