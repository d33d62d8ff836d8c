/* The store_*() wrappers of boards, cards, labels, events and attention.
 * store/store.c says what a wrapper owes its caller and which file holds which wrappers. */
#include "store/store_wrap.h"

#include <stdlib.h>
#include <string.h>

/* ---- boards ---- */

enum core_rc store_board_list(struct store *st, struct core_board **boards, size_t *n)
{
	if (boards)
		*boards = NULL;
	if (n)
		*n = 0;
	if (!st || !boards || !n)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, board_list);
	return st->ops->board_list(st, boards, n);
}

enum core_rc store_board_get(struct store *st, const char *name, struct core_board *out)
{
	if (out)
		memset(out, 0, sizeof(*out));
	if (!st || !out || !core_name_valid(name))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, board_get);
	return st->ops->board_get(st, name, out);
}

enum core_rc store_board_put(struct store *st, const struct core_board *b,
			     const struct store_actor *actor)
{
	if (!st || !b)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, board_put);
	return st->ops->board_put(st, b, actor);
}

enum core_rc store_board_claimed(struct store *st, const struct core_board *b, int64_t *per_col,
				 int64_t *total)
{
	if (total)
		*total = 0;
	if (per_col && b)
		memset(per_col, 0, b->n_cols * sizeof(*per_col));
	if (!st || !b || !total || (b->n_cols && !per_col) || !core_name_valid(b->name))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, board_claimed);
	return st->ops->board_claimed(st, b, per_col, total);
}

enum core_rc store_board_column_rename(struct store *st, const char *board, const char *from,
				       const char *to, const struct store_actor *actor,
				       size_t *touched)
{
	if (touched)
		*touched = 0;
	if (!st || !touched || !core_name_valid(board) || !core_name_valid(from) ||
	    !core_name_valid(to))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, board_column_rename);
	return st->ops->board_column_rename(st, board, from, to, actor, touched);
}

enum core_rc store_labels_sweep(struct store *st, const struct store_label_sweep *sw,
				const struct store_actor *actor, size_t *touched)
{
	if (touched)
		*touched = 0;
	if (!st || !sw || !touched || !sw->from || sw->from->n == 0 ||
	    !store_wrap_labels_valid(sw->from) || (sw->board && !core_name_valid(sw->board)) ||
	    !store_wrap_boards_valid(sw->boards))
		return CORE_ERR_BAD_REQUEST;
	switch (sw->kind) {
	case STORE_LABELS_RENAME:
		if (sw->from->n != 1 || !core_label_valid(sw->to))
			return CORE_ERR_BAD_REQUEST;
		break;
	case STORE_LABELS_MERGE:
		if (!core_label_valid(sw->to))
			return CORE_ERR_BAD_REQUEST;
		break;
	case STORE_LABELS_DELETE:
		if (sw->from->n != 1 || sw->to)
			return CORE_ERR_BAD_REQUEST;
		break;
	default:
		return CORE_ERR_BAD_REQUEST;
	}
	NEED_OP(st, labels_sweep);
	return st->ops->labels_sweep(st, sw, actor, touched);
}

void store_boards_free(struct core_board *boards, size_t n)
{
	size_t i;

	for (i = 0; boards && i < n; i++)
		core_board_release(&boards[i]);
	free(boards);
}

/* ---- cards ---- */

enum core_rc store_card_create(struct store *st, const struct store_card_create *in,
			       const struct store_actor *actor, struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !in || !out)
		return CORE_ERR_BAD_REQUEST;
	if ((in->id && !core_id_valid(in->id)) || (in->board && !core_name_valid(in->board)) ||
	    (in->labels && !store_wrap_labels_valid(in->labels)) ||
	    (in->blockers && !store_wrap_ids_valid(in->blockers)))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_create);
	return st->ops->card_create(st, in, actor, out);
}

enum core_rc store_card_get(struct store *st, const char *id, struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_get);
	return st->ops->card_get(st, id, out);
}

enum core_rc store_card_list(struct store *st, const struct store_card_filter *f,
			     struct core_card ***out, size_t *n, char **next)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (next)
		*next = NULL;
	if (!st || !f || !out || !n || !next)
		return CORE_ERR_BAD_REQUEST;
	if (f->limit < 1 || f->limit > 1000 || f->claimed < -1 || f->claimed > 1 ||
	    (f->board && !core_name_valid(f->board)) || !store_wrap_boards_valid(f->boards) ||
	    (f->label && !core_label_valid(f->label)) || (f->after && !*f->after))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_list);
	return st->ops->card_list(st, f, out, n, next);
}

void store_cards_free(struct core_card **cards, size_t n)
{
	size_t i;

	for (i = 0; cards && i < n; i++)
		core_card_free(cards[i]);
	free(cards);
}

enum core_rc store_card_patch(struct store *st, const char *id, const struct store_card_patch *p,
			      const struct store_actor *actor, struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !p || !out || !core_id_valid(id) || (p->blockers && !store_wrap_ids_valid(p->blockers)))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_patch);
	return st->ops->card_patch(st, id, p, actor, out);
}

enum core_rc store_card_delete(struct store *st, const char *id, const struct store_actor *actor)
{
	if (!st || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_delete);
	return st->ops->card_delete(st, id, actor);
}

enum core_rc store_card_claim(struct store *st, const char *id, const char *marker,
			      int64_t lease_ms, const struct store_actor *actor,
			      struct store_claim_result *out)
{
	if (out)
		memset(out, 0, sizeof(*out));
	if (!st || !out || !core_id_valid(id) || !core_marker_valid(marker) || lease_ms <= 0)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_claim);
	return st->ops->card_claim(st, id, marker, lease_ms, actor, out);
}

enum core_rc store_card_claim_next(struct store *st, const struct store_claim_next *in,
				   const struct store_actor *actor, struct store_claim_result *out)
{
	struct store_claim_next k;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!st || !in || !out || !core_name_valid(in->board) || !core_marker_valid(in->marker) ||
	    in->lease_ms <= 0 || !store_wrap_names_valid(in->columns) ||
	    (in->labels && !store_wrap_labels_valid(in->labels)))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_claim_next);
	/* The claim is bound to the credential presenting it, never to a name chosen by the
	 * caller (DESIGN §11). */
	k = *in;
	k.holder = store_actor_holder(actor);
	return st->ops->card_claim_next(st, &k, actor, out);
}

enum core_rc store_card_renew(struct store *st, const char *id, const struct core_token *t,
			      int64_t lease_ms, const struct store_actor *actor,
			      struct core_card **out)
{
	struct core_token k;

	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id) || !store_wrap_token_valid(t) || lease_ms < 0)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_renew);
	k = store_wrap_token_of(t, actor);
	return st->ops->card_renew(st, id, &k, lease_ms, actor, out);
}

enum core_rc store_card_release(struct store *st, const char *id, const struct core_token *t,
				const struct store_actor *actor, struct core_card **out)
{
	struct core_token k;

	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id) || !store_wrap_token_valid(t))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_release);
	k = store_wrap_token_of(t, actor);
	return st->ops->card_release(st, id, &k, actor, out);
}

enum core_rc store_card_release_retry(struct store *st, const char *id,
				      const struct core_token *t, const struct store_actor *actor,
				      struct core_card **out)
{
	struct store_owned_write w = {.kind = STORE_OWNED_NOTHING, .release = true, .retry = true};

	if (out)
		*out = NULL;
	if (!t)
		return CORE_ERR_BAD_REQUEST;
	w.token = *t;
	return store_card_owned_write(st, id, &w, actor, out);
}

enum core_rc store_card_revoke(struct store *st, const char *id, const struct store_actor *actor,
			       struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_revoke);
	return st->ops->card_revoke(st, id, actor, out);
}

enum core_rc store_card_owned_write(struct store *st, const char *id,
				    const struct store_owned_write *w,
				    const struct store_actor *actor, struct core_card **out)
{
	struct store_owned_write one;
	enum core_rc rc;

	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	if (!store_wrap_owned_write_valid(w))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_owned_write);
	one = *w;
	one.token = store_wrap_token_of(&w->token, actor);
	/* A retry counts its attempt in the release's own step: only a twin with the combined
	 * step can. */
	if (w->retry && !st->ops->owned_write_release)
		return CORE_ERR_NOT_IMPLEMENTED;
	if (!w->release || st->ops->owned_write_release)
		return st->ops->card_owned_write(st, id, &one, actor, out);
	/* A twin without the combined step: the write, then the release under the same token
	 * (an owned write keeps the epoch, so the release is fenced exactly like the write). */
	NEED_OP(st, card_release);
	one.release = false;
	rc = st->ops->card_owned_write(st, id, &one, actor, out);
	if (rc != CORE_OK)
		return rc;
	core_card_free(*out);
	*out = NULL;
	return st->ops->card_release(st, id, &one.token, actor, out);
}

enum core_rc store_card_set_state_from(struct store *st, const char *id, const char *from,
				       const char *to, const char *reason,
				       const struct store_actor *actor, struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id) || !to)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_set_state_from);
	return st->ops->card_set_state_from(st, id, from, to, reason, actor, out);
}

enum core_rc store_card_reopen(struct store *st, const char *id, const char *to,
			       const char *reason, const struct store_actor *actor,
			       struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id) || !to)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_reopen);
	return st->ops->card_reopen(st, id, to, reason, actor, out);
}

enum core_rc store_card_labels_set(struct store *st, const char *id, const struct core_strv *labels,
				   const struct store_actor *actor, struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id) || !store_wrap_labels_valid(labels))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_labels_set);
	return st->ops->card_labels_set(st, id, labels, actor, out);
}

enum core_rc store_card_labels_adjust(struct store *st, const char *id, const struct core_strv *add,
				      const struct core_strv *remove,
				      const struct store_actor *actor, struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id) || (add && !store_wrap_labels_valid(add)) ||
	    (remove && !store_wrap_labels_valid(remove)))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_labels_adjust);
	return st->ops->card_labels_adjust(st, id, add, remove, actor, out);
}

enum core_rc store_card_comment_add(struct store *st, const char *id, const char *body,
				    const struct store_actor *actor, struct core_card **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id) || !body)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_comment_add);
	return st->ops->card_comment_add(st, id, body, actor, out);
}

enum core_rc store_labels_count(struct store *st, const char *board, const char *const *boards,
				json_t **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || (board && !core_name_valid(board)) || !store_wrap_boards_valid(boards))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, labels_count);
	return st->ops->labels_count(st, board, boards, out);
}

/* ---- events ---- */

enum core_rc store_events_list(struct store *st, const char *board, const char *const *boards,
			       int64_t after, size_t limit, int64_t wait_ms,
			       struct core_event **out, size_t *n, int64_t *next)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (next)
		*next = 0;
	if (!st || !out || !n || !next || after < 0 || limit < 1 || limit > 1000 ||
	    (wait_ms < 0 && wait_ms != STORE_EVENTS_NO_WAIT) || (board && !core_name_valid(board)) || !store_wrap_boards_valid(boards))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, events_list);
	return st->ops->events_list(st, board, boards, after, limit, wait_ms, out, n, next);
}

enum core_rc store_events_list_board(struct store *st, const char *board, int64_t after,
				     size_t limit, int64_t wait_ms, struct core_event **out,
				     size_t *n, int64_t *next)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (next)
		*next = 0;
	if (!st || !out || !n || !next || after < 0 || limit < 1 || limit > 1000 ||
	    (wait_ms < 0 && wait_ms != STORE_EVENTS_NO_WAIT) || !board || !core_name_valid(board))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, events_list_board);
	return st->ops->events_list_board(st, board, after, limit, wait_ms, out, n, next);
}

/* ---- attention ---- */

enum core_rc store_attention_list(struct store *st, const char *board, const char *const *boards,
				  size_t limit, struct store_attention **out, size_t *n,
				  bool *truncated)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (truncated)
		*truncated = false;
	if (!st || !out || !n || !truncated || limit < 1 || limit > 1000 ||
	    (board && !core_name_valid(board)) || !store_wrap_boards_valid(boards))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, attention_list);
	return st->ops->attention_list(st, board, boards, limit, out, n, truncated);
}

void store_attention_free(struct store_attention *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		core_card_free(v[i].card);
	free(v);
}

static int attention_cmp(const void *a, const void *b)
{
	const struct core_card *x = ((const struct store_attention *)a)->card;
	const struct core_card *y = ((const struct store_attention *)b)->card;

	if (x->updated_at != y->updated_at)
		return x->updated_at > y->updated_at ? -1 : 1;
	return strcmp(x->id, y->id);
}

void store_attention_finish(struct store_attention *v, size_t *n, size_t limit,
			    bool *truncated)
{
	size_t i;

	if (*n > 1)
		qsort(v, *n, sizeof(*v), attention_cmp);
	*truncated = *n > limit;
	for (i = limit; i < *n; i++)
		core_card_free(v[i].card);
	if (*n > limit)
		*n = limit;
}

void store_events_free(struct core_event *ev, size_t n)
{
	size_t i;

	for (i = 0; ev && i < n; i++)
		core_event_release(&ev[i]);
	free(ev);
}
