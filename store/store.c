/* The store_*() wrappers: the one place that checks arguments and optional methods before a
 * twin's op runs (sqlite3OsRead's shape). A twin may therefore assume well-formed ids, names
 * and pointers; it still applies every domain rule through core.
 *
 * Each wrapper zeroes its OUT parameters first, so they are NULL/zero on every failure path,
 * including the ones where the twin forgot to. `actor` may be NULL: it is recorded as "".
 */
#include "store/store.h"

#include "metrics/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An op a twin did not provide is a build mistake, not bad input. */
#define NEED_OP(st, op)                                                                       \
	do {                                                                                  \
		if (!(st)->ops || !(st)->ops->op)                                             \
			return CORE_ERR_INTERNAL;                                             \
	} while (0)

static void err_set(char *err, size_t errlen, const char *msg)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", msg);
}

static bool labels_valid(const struct core_strv *sv)
{
	size_t i;

	if (!sv || (sv->n && !sv->v))
		return false;
	for (i = 0; i < sv->n; i++)
		if (!core_label_valid(sv->v[i]))
			return false;
	return true;
}

static bool ids_valid(const struct core_strv *sv)
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
static bool boards_valid(const char *const *boards)
{
	for (; boards && *boards; boards++)
		if (!core_name_valid(*boards))
			return false;
	return true;
}

static bool token_valid(const struct core_token *t)
{
	return t && core_marker_valid(t->marker);
}

const char *store_actor_holder(const struct store_actor *actor)
{
	return actor && actor->name && *actor->name ? actor->name : NULL;
}

enum core_mover store_actor_mover(const struct store_actor *actor)
{
	return actor && actor->operator_role ? CORE_MOVER_OPERATOR : CORE_MOVER_BOT;
}

/* The token as the actor presents it: the holder is the actor's name, whatever the caller
 * put there (the credential is the caller's, not a field it may choose). */
static struct core_token token_of(const struct core_token *t, const struct store_actor *actor)
{
	struct core_token k = *t;

	k.holder = store_actor_holder(actor);
	return k;
}

void store_limits_set(struct store *st, size_t max_comments)
{
	if (st)
		atomic_store_explicit(&st->max_comments, max_comments, memory_order_relaxed);
}

size_t store_limits_comments(const struct store *st)
{
	size_t max = st ? atomic_load_explicit(&st->max_comments, memory_order_relaxed) : 0;

	return max ? max : CORE_COMMENTS_MAX;
}

enum core_rc store_card_fits(const struct store *st, const struct core_card *c, char *detail,
			     size_t detail_len)
{
	size_t max = store_limits_comments(st);
	size_t size;

	if (c->n_comments > max) {
		if (detail && detail_len)
			snprintf(detail, detail_len, "card %s would have %zu comments; at most %zu",
				 c->id, c->n_comments, max);
		return CORE_ERR_PAYLOAD_TOO_LARGE;
	}
	size = core_card_size(c);
	if (size > CORE_CARD_BYTES_MAX) {
		if (detail && detail_len)
			snprintf(detail, detail_len,
				 "card %s would be %zu bytes stored; at most %d", c->id, size,
				 CORE_CARD_BYTES_MAX);
		return CORE_ERR_PAYLOAD_TOO_LARGE;
	}
	return CORE_OK;
}

/* The Mongo twin's hook: store/mongo will provide store_mongo_open(uri, out, err, errlen) and
 * this function will call it (behind the build's mongo option). Until then the spec is
 * understood but refused, so a deployment asking for Mongo never silently gets a local dir. */
static enum core_rc store_open_mongo(const char *uri, struct store **out, char *err,
				     size_t errlen)
{
#ifdef BOARDD_HAVE_MONGO
	struct store_mongo_options o = {.uri = uri};

	return store_mongo_open(&o, out, err, errlen);
#else
	(void)uri;
	(void)out;
	err_set(err, errlen, "mongodb store not built");
	return CORE_ERR_BAD_REQUEST;
#endif
}

enum core_rc store_open(const char *spec, struct store **out, char *err, size_t errlen)
{
	struct store_fs_options o = {0};

	if (err && errlen)
		err[0] = '\0';
	if (!out) {
		err_set(err, errlen, "no output store");
		return CORE_ERR_BAD_REQUEST;
	}
	*out = NULL;
	if (!spec || !*spec) {
		err_set(err, errlen, "empty store spec (want fs:DIR or mongodb://...)");
		return CORE_ERR_BAD_REQUEST;
	}
	if (strncmp(spec, "mongodb://", 10) == 0 || strncmp(spec, "mongodb+srv://", 14) == 0)
		return store_open_mongo(spec, out, err, errlen);
	o.dir = strncmp(spec, "fs:", 3) == 0 ? spec + 3 : spec;
	if (!*o.dir) {
		err_set(err, errlen, "fs: store spec without a directory");
		return CORE_ERR_BAD_REQUEST;
	}
	return store_fs_open(&o, out, err, errlen);
}

void store_close(struct store *st)
{
	if (st && st->ops && st->ops->close)
		st->ops->close(st);
}

static _Thread_local struct store_ack *ack_bound;

void store_ack_begin(struct store_ack *ack)
{
	memset(ack, 0, sizeof *ack);
	ack_bound = ack;
}

bool store_ack_end(struct store_ack *ack)
{
	if (ack_bound == ack)
		ack_bound = NULL;
	return ack->st != NULL;
}

struct store_ack *store_ack_current(void)
{
	return ack_bound;
}

struct store_ack *store_ack_unbind(void)
{
	struct store_ack *ack = ack_bound;

	ack_bound = NULL;
	return ack;
}

void store_ack_rebind(struct store_ack *ack)
{
	ack_bound = ack;
}

void store_ack_submit(struct store_ack *ack, void (*done)(struct store_ack *, enum core_rc))
{
	ack->done = done;
	ack->next = NULL;
	if (!ack->st) {
		done(ack, CORE_OK); /* nothing was owed */
		return;
	}
	if (!ack->st->ops->ack_submit) {
		done(ack, CORE_ERR_INTERNAL); /* a twin filled an ack it cannot wait for */
		return;
	}
	ack->st->ops->ack_submit(ack->st, ack);
}

enum core_rc store_ack_wait(struct store_ack *ack)
{
	if (!ack->st)
		return CORE_OK;
	if (!ack->st->ops->ack_wait)
		return CORE_ERR_INTERNAL;
	return ack->st->ops->ack_wait(ack->st, ack);
}

const char *store_name(const struct store *st)
{
	return st && st->ops && st->ops->name ? st->ops->name : "none";
}

enum core_rc store_ping(struct store *st)
{
	if (!st)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, ping);
	return st->ops->ping(st);
}

void store_fence_refused(struct store *st, const struct core_card *c, const struct core_token *t)
{
	enum core_fence_reason why;

	if (!st || !c)
		return;
	why = core_fence_why(c, t);
	if (why != CORE_FENCE_OK)
		atomic_fetch_add_explicit(&st->counters.fence_refused[why], 1, memory_order_relaxed);
}

void store_run_fence_refused(struct store *st)
{
	if (st)
		atomic_fetch_add_explicit(&st->counters.run_refused, 1, memory_order_relaxed);
}

enum core_rc store_stats(struct store *st, struct metrics_sink *out)
{
	const char *run = "run";
	size_t i;

	if (!st || !out)
		return CORE_ERR_BAD_REQUEST;
	for (i = 0; i < CORE_FENCE_REASON_COUNT_; i++) {
		const char *why = core_fence_reason_name((enum core_fence_reason)i);

		if (i != CORE_FENCE_OK)
			metrics_sink_value(out, METRICS_FENCE_REFUSED, &why,
					   (double)atomic_load_explicit(&st->counters.fence_refused[i],
									memory_order_relaxed));
	}
	metrics_sink_value(out, METRICS_FENCE_REFUSED, &run,
			   (double)atomic_load_explicit(&st->counters.run_refused,
							memory_order_relaxed));
	NEED_OP(st, stats);
	return st->ops->stats(st, out);
}

int64_t store_now(struct store *st)
{
	if (!st)
		return 0;
	if (st->clock)
		return st->clock(st->clock_ctx);
	return st->ops && st->ops->now ? st->ops->now(st) : 0;
}

void store_clock_set(struct store *st, store_clock_fn fn, void *ctx)
{
	if (!st)
		return;
	st->clock = fn;
	st->clock_ctx = fn ? ctx : NULL;
}

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
	    !labels_valid(sw->from) || (sw->board && !core_name_valid(sw->board)) ||
	    !boards_valid(sw->boards))
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
	    (in->labels && !labels_valid(in->labels)) ||
	    (in->blockers && !ids_valid(in->blockers)))
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
	    (f->board && !core_name_valid(f->board)) || !boards_valid(f->boards) ||
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
	if (!st || !p || !out || !core_id_valid(id) || (p->blockers && !ids_valid(p->blockers)))
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

static bool names_valid(const struct core_strv *sv)
{
	size_t i;

	for (i = 0; sv && i < sv->n; i++)
		if (!core_name_valid(sv->v[i]))
			return false;
	return true;
}

enum core_rc store_card_claim_next(struct store *st, const struct store_claim_next *in,
				   const struct store_actor *actor, struct store_claim_result *out)
{
	struct store_claim_next k;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!st || !in || !out || !core_name_valid(in->board) || !core_marker_valid(in->marker) ||
	    in->lease_ms <= 0 || !names_valid(in->columns) || (in->labels && !labels_valid(in->labels)))
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
	if (!st || !out || !core_id_valid(id) || !token_valid(t) || lease_ms < 0)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_renew);
	k = token_of(t, actor);
	return st->ops->card_renew(st, id, &k, lease_ms, actor, out);
}

enum core_rc store_card_release(struct store *st, const char *id, const struct core_token *t,
				const struct store_actor *actor, struct core_card **out)
{
	struct core_token k;

	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id) || !token_valid(t))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_release);
	k = token_of(t, actor);
	return st->ops->card_release(st, id, &k, actor, out);
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

static bool owned_write_valid(const struct store_owned_write *w)
{
	if (!w || !token_valid(&w->token))
		return false;
	switch (w->kind) {
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
	if (!owned_write_valid(w))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, card_owned_write);
	one = *w;
	one.token = token_of(&w->token, actor);
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
	if (!st || !out || !core_id_valid(id) || !labels_valid(labels))
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
	if (!st || !out || !core_id_valid(id) || (add && !labels_valid(add)) ||
	    (remove && !labels_valid(remove)))
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
	if (!st || !out || (board && !core_name_valid(board)) || !boards_valid(boards))
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
	    wait_ms < 0 || (board && !core_name_valid(board)) || !boards_valid(boards))
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
	    wait_ms < 0 || !board || !core_name_valid(board))
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
	    (board && !core_name_valid(board)) || !boards_valid(boards))
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

/* ---- runs ---- */

enum core_rc store_run_create(struct store *st, const struct store_run_create *in,
			      const struct store_actor *actor, struct core_run **out)
{
	if (out)
		*out = NULL;
	if (!st || !in || !out || (in->id && !core_id_valid(in->id)) ||
	    !core_id_valid(in->card_id) || !core_marker_valid(in->marker) ||
	    !core_status_valid(in->status) || in->lease_ms <= 0)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, run_create);
	return st->ops->run_create(st, in, actor, out);
}

enum core_rc store_run_get(struct store *st, const char *id, struct core_run **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, run_get);
	return st->ops->run_get(st, id, out);
}

enum core_rc store_run_get_any(struct store *st, const char *id, struct core_run **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, run_get_any);
	return st->ops->run_get_any(st, id, out);
}

enum core_rc store_run_update(struct store *st, const char *id, const struct store_run_update *u,
			      const struct store_actor *actor, struct core_run **out)
{
	if (out)
		*out = NULL;
	if (!st || !u || !out || !core_id_valid(id) || !core_marker_valid(u->marker) ||
	    (u->status && !core_status_valid(u->status)) ||
	    (u->continuation && !core_continuation_valid(u->continuation)) ||
	    (u->failure_code && !*u->failure_code) || u->lease_ms < 0 ||
	    (u->result && strlen(u->result) > CORE_RUN_RESULT_MAX) ||
	    (u->error && strlen(u->error) > CORE_RUN_ERROR_MAX) ||
	    (u->output && !core_run_output_valid(u->output, strlen(u->output))))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, run_update);
	return st->ops->run_update(st, id, u, actor, out);
}

enum core_rc store_run_cancel(struct store *st, const char *id, const struct store_actor *actor,
			      struct core_run **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, run_cancel);
	return st->ops->run_cancel(st, id, actor, out);
}

enum core_rc store_run_prune(struct store *st, const char *id, const struct store_actor *actor)
{
	if (!st || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, run_prune);
	return st->ops->run_prune(st, id, actor);
}

enum core_rc store_run_promote_if_orphaned(struct store *st, const char *id,
					   struct core_run **out, bool *promoted)
{
	if (out)
		*out = NULL;
	if (promoted)
		*promoted = false;
	if (!st || !out || !promoted || !core_id_valid(id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, run_promote_if_orphaned);
	return st->ops->run_promote_if_orphaned(st, id, out, promoted);
}

enum core_rc store_run_count_for_card(struct store *st, const char *card_id, size_t *n)
{
	if (n)
		*n = 0;
	if (!st || !n || !core_id_valid(card_id))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, run_count_for_card);
	return st->ops->run_count_for_card(st, card_id, n);
}

/* ---- reaper support ---- */

enum core_rc store_reaper_list_expired(struct store *st, size_t batch, struct core_card ***out,
				       size_t *n)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (!st || !out || !n || batch < 1)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, reaper_list_expired);
	return st->ops->reaper_list_expired(st, batch, out, n);
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
	if (!st || !out || !core_id_valid(id) || !token_valid(prev) ||
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
		if (!core_id_valid(v[i].id) || !token_valid(&v[i].prev))
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
			if (!owned_write_valid(&v[i].w[k]) ||
			    (v[i].w[k].release && k + 1 < v[i].n_w))
				return CORE_ERR_BAD_REQUEST;
	}
	if (!n)
		return CORE_OK;
	NEED_OP(st, reaper_act);
	for (i = 0; i < n; i++)
		for (k = 0; k < v[i].n_w; k++)
			v[i].w[k].token = token_of(&v[i].w[k].token, actor);
	return st->ops->reaper_act(st, v, n, actor);
}

static bool secret_name_valid(const char *name)
{
	size_t i, n = name ? strlen(name) : 0;

	if (n == 0 || n > 32)
		return false;
	for (i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-'))
			return false;
	return true;
}

enum core_rc store_secret_get(struct store *st, const char *name, unsigned char *out)
{
	if (!st || !out || !secret_name_valid(name))
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, secret_get);
	return st->ops->secret_get(st, name, out);
}

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
	    (f->board && !core_name_valid(f->board)) || !boards_valid(f->boards) ||
	    f->status < -1 || f->status >= STORE_DELIVERY_STATUS_COUNT_)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, delivery_list);
	return st->ops->delivery_list(st, f, out, n);
}

enum core_rc store_delivery_lease(struct store *st, const char *owner, int64_t lease_ms,
				  struct store_delivery **out)
{
	if (out)
		*out = NULL;
	if (!st || !out || !core_marker_valid(owner) || lease_ms < 1)
		return CORE_ERR_BAD_REQUEST;
	NEED_OP(st, delivery_lease);
	return st->ops->delivery_lease(st, owner, lease_ms, out);
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
