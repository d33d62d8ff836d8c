/* The store_*() wrappers of effects (DESIGN §14): subscriptions and webhook deliveries.
 * store/store.c says what a wrapper owes its caller and which file holds which wrappers. */
#include "store/store_wrap.h"

#include <stdlib.h>
#include <string.h>

/* ---- effects (DESIGN §14) ---- */

static bool sub_valid(const struct store_sub *s)
{
	size_t i;

	if (!s || !core_name_valid(s->board) || !core_name_valid(s->name) || !s->url || !*s->url)
		return false;
	for (i = 0; i < s->consume.n; i++)
		if (!core_label_valid(s->consume.v[i]))
			return false;
	return core_sub_filter_validate(&s->on, NULL, 0) == CORE_OK;
}

enum core_rc store_sub_put(struct store *st, const struct store_sub *s, const char *secret_if_new,
			   bool *created, struct store_sub **out)
{
	if (out)
		*out = NULL;
	if (created)
		*created = false;
	if (!st || !created || !out || !sub_valid(s) || (!s->secret && !secret_if_new))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, sub_put);
	return st->ops->sub_put(st, s, secret_if_new, created, out);
}

enum core_rc store_sub_get(struct store *st, const char *board, const char *name,
			   struct store_sub **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_name_valid(board) || !core_name_valid(name))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, sub_get);
	return st->ops->sub_get(st, board, name, out);
}

enum core_rc store_sub_list(struct store *st, const char *board, struct store_sub ***out,
			    size_t *n)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (!st || !out || !n || !core_name_valid(board))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, sub_list);
	return st->ops->sub_list(st, board, out, n);
}

enum core_rc store_sub_delete(struct store *st, const char *board, const char *name)
{
	if (!st || !core_name_valid(board) || !core_name_valid(name))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, sub_delete);
	return st->ops->sub_delete(st, board, name);
}

/* Delivery ids are "<event key>.<subscription>": the id alphabet plus length. */
static bool delivery_id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	return n >= 1 && n <= 200 &&
	       strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") == n;
}

enum core_rc store_delivery_get(struct store *st, const char *id, struct store_delivery **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !delivery_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, delivery_get);
	return st->ops->delivery_get(st, id, out);
}

enum core_rc store_delivery_list(struct store *st, const struct store_delivery_filter *f,
				 struct store_delivery ***out, size_t *n)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (!st || !f || !out || !n || f->limit < 1 || f->limit > 1000 ||
	    (f->board && !core_name_valid(f->board)) || !store_wrap_boards_valid(f->boards) ||
	    f->status < -1 || f->status >= STORE_DELIVERY_STATUS_COUNT_)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, delivery_list);
	return st->ops->delivery_list(st, f, out, n);
}

enum core_rc store_delivery_lease(struct store *st, const char *owner, int64_t lease_ms,
				  struct store_delivery **out)
{
	return store_delivery_lease_except(st, owner, lease_ms, NULL, 0, out);
}

enum core_rc store_delivery_lease_except(struct store *st, const char *owner, int64_t lease_ms,
					 const struct store_sub_ref *skip, size_t n_skip,
					 struct store_delivery **out)
{
	size_t i;

	if (out)
		*out = NULL;
	if (!st || !out || !core_marker_valid(owner) || lease_ms < 1 || (n_skip && !skip))
		return CORE_ERR_BAD_REQUEST;
	for (i = 0; i < n_skip; i++)
		if (!skip[i].board || !skip[i].name)
			return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, delivery_lease);
	return st->ops->delivery_lease(st, owner, lease_ms, skip, n_skip, out);
}

enum core_rc store_delivery_finish(struct store *st, const char *id,
				   const struct store_delivery_outcome *o,
				   struct store_delivery **out)
{
	if (out)
		*out = NULL;
	if (!st || !o || !delivery_id_valid(id) || !core_marker_valid(o->owner) ||
	    o->status < 0 || o->status > 999)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, delivery_finish);
	return st->ops->delivery_finish(st, id, o, out);
}

enum core_rc store_delivery_retry(struct store *st, const char *id, struct store_delivery **out)
{
	if (out)
		*out = NULL;
	if (!st || !delivery_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, delivery_retry);
	return st->ops->delivery_retry(st, id, out);
}
