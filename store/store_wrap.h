/* store_wrap — what the store_*() wrappers (store/store.c, store_cards.c, store_reaper.c,
 * store_subs.c) share: NEED_OP and the argument checks. Internal to store/; inline, so a
 * wrapper on the hot path (claim, release, owned writes) costs what it did in one file.
 */
#ifndef BOARDD_STORE_WRAP_H
#define BOARDD_STORE_WRAP_H

#include "store/store_twins.h"

/* An op a twin did not provide is a build mistake, not bad input. */
#define NEED_OP(st, op)                                                                       \
	do {                                                                                  \
		if (!(st)->ops || !(st)->ops->op)                                             \
			return CORE_ERR_INTERNAL;                                             \
	} while (0)

static inline bool store_wrap_labels_valid(const struct core_strv *sv)
{
	size_t i;

	if (!sv || (sv->n && !sv->v))
		return false;
	for (i = 0; i < sv->n; i++)
		if (!core_label_valid(sv->v[i]))
			return false;
	return true;
}

static inline bool store_wrap_ids_valid(const struct core_strv *sv)
{
	size_t i;

	if (!sv || (sv->n && !sv->v))
		return false;
	for (i = 0; i < sv->n; i++)
		if (!core_id_valid(sv->v[i]))
			return false;
	return true;
}

/* A NULL-terminated board list: every entry a valid name. */
static inline bool store_wrap_boards_valid(const char *const *boards)
{
	for (; boards && *boards; boards++)
		if (!core_name_valid(*boards))
			return false;
	return true;
}

static inline bool store_wrap_token_valid(const struct core_token *t)
{
	return t && core_marker_valid(t->marker);
}

/* The token as the actor presents it: the holder is the actor's name, whatever the caller
 * put there (the credential is the caller's, not a field it may choose). */
static inline struct core_token store_wrap_token_of(const struct core_token *t,
						  const struct store_actor *actor)
{
	struct core_token k = *t;

	k.holder = store_actor_holder(actor);
	return k;
}

static inline bool store_wrap_names_valid(const struct core_strv *sv)
{
	size_t i;

	for (i = 0; sv && i < sv->n; i++)
		if (!core_name_valid(sv->v[i]))
			return false;
	return true;
}

static inline bool store_wrap_owned_write_valid(const struct store_owned_write *w)
{
	if (!w || !store_wrap_token_valid(&w->token) || (w->retry && !w->release))
		return false;
	switch (w->kind) {
	case STORE_OWNED_NOTHING:
		return w->release; /* the release alone */
	case STORE_OWNED_STATE:
		/* An unknown column is the twin's TRANSITION_REJECTED, not a malformed request. */
		return w->state != NULL;
	case STORE_OWNED_LAST_RUN:
		return !w->run_id || core_id_valid(w->run_id);
	case STORE_OWNED_AWAITING_INPUT:
		return true;
	case STORE_OWNED_GAVE_UP:
		return !w->gave_up || !w->gave_up->set ||
		       (w->gave_up->reason && *w->gave_up->reason);
	case STORE_OWNED_COMMENT:
		return w->comment && *w->comment;
	}
	return false;
}

#endif
