/* The reaper's batches on the Mongo twin (store_ops.reaper_transfer_many, reaper_act). Each
 * item is one conditional update of one document, as the single operations are: MongoDB has
 * no multi-document step cheaper than that without a transaction (which a standalone server,
 * FerretDB and mongo-java-server do not all offer), so these loop over the single operations
 * in order. The pass's workers still overlap the round trips: each works on its own share. */
#include "store/mongo/mongo_ops.h"

enum core_rc mgo_reaper_transfer_many(struct store *st, struct store_transfer *v, size_t n,
				      const char *marker, int64_t lease_ms)
{
	size_t i;

	for (i = 0; i < n; i++)
		v[i].rc = mgo_reaper_transfer(st, v[i].id, &v[i].prev, marker, lease_ms,
					      &v[i].card);
	return CORE_OK;
}

enum core_rc mgo_reaper_act(struct store *st, struct store_reaper_act *v, size_t n,
			    const struct store_actor *actor)
{
	struct core_card *out = NULL;
	size_t i, k;

	for (i = 0; i < n; i++) {
		v[i].rc = CORE_OK;
		if (!v[i].n_w && v[i].release_expect)
			v[i].rc = v[i].retry ? mgo_reaper_release_exact_retry(st, v[i].id,
									     v[i].release_expect,
									     actor)
					     : mgo_reaper_release_exact(st, v[i].id,
									v[i].release_expect, actor);
		for (k = 0; v[i].rc == CORE_OK && k < v[i].n_w; k++) {
			/* the wrapper set the holder; owned_write_release: one update each. The
			 * release carries the attempt when the item asks for one (DESIGN §17). */
			struct store_owned_write w = v[i].w[k];

			w.retry = w.release && (w.retry || v[i].retry);
			v[i].rc = mgo_card_owned_write(st, v[i].id, &w, actor, &out);
			core_card_free(out);
			out = NULL;
		}
	}
	return CORE_OK;
}
