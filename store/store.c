/* The store_*() wrappers: the one place that checks arguments and optional methods before a
 * twin's op runs (sqlite3OsRead's shape). This file: opening a store (the one place a spec
 * is parsed), the deferred acknowledgement, the common wrappers (name, ping, stats, clock,
 * limits, the fence counters), runs and secrets; store_cards.c: boards, cards, events and
 * attention; store_reaper.c: the reaper's support; store_subs.c: subscriptions and
 * deliveries. A twin may therefore assume well-formed ids, names
 * and pointers; it still applies every domain rule through core.
 *
 * Each wrapper zeroes its OUT parameters first, so they are NULL/zero on every failure path,
 * including the ones where the twin forgot to. `actor` may be NULL: it is recorded as "".
 */
#include "store/store_wrap.h"

#include "metrics/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void err_set(char *err, size_t errlen, const char *msg)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", msg);
}

const char *store_actor_holder(const struct store_actor *actor)
{
	return actor && actor->name && *actor->name ? actor->name : NULL;
}

enum core_mover store_actor_mover(const struct store_actor *actor)
{
	return actor && actor->operator_role ? CORE_MOVER_OPERATOR : CORE_MOVER_BOT;
}

void store_limits_set(struct store *st, size_t max_comments)
{
	if (st)
		atomic_store_explicit(&st->max_comments, max_comments, memory_order_relaxed);
}

void store_retry_default_set(struct store *st, int32_t max_attempts)
{
	if (st)
		atomic_store_explicit(&st->retry_max_attempts, max_attempts > 0 ? max_attempts : 0,
				      memory_order_relaxed);
}

void store_retry_of(const struct store *st, const struct core_board *b, struct core_retry *out)
{
	int32_t d = st ? atomic_load_explicit(&((struct store *)st)->retry_max_attempts,
					      memory_order_relaxed)
		       : 0;

	core_retry_effective(b, d, out);
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

static bool spec_is_mongo(const char *spec)
{
	return strncmp(spec, "mongodb://", 10) == 0 || strncmp(spec, "mongodb+srv://", 14) == 0;
}

/* A deployment asking for Mongo from a build without it is refused, never silently handed a
 * local directory. */
static enum core_rc open_mongo(const char *uri, const struct store_open_options *o,
			       struct store **out, char *err, size_t errlen)
{
#ifdef BOARDD_HAVE_MONGO
	struct store_mongo_options m = {0};

	if (o->mongo)
		m = *o->mongo;
	m.uri = uri;
	if (!m.unleased_horizon_ms)
		m.unleased_horizon_ms = o->unleased_horizon_ms;
	return store_mongo_open(&m, out, err, errlen);
#else
	(void)uri;
	(void)o;
	(void)out;
	err_set(err, errlen, "mongodb store not built");
	return CORE_ERR_BAD_REQUEST;
#endif
}

enum core_rc store_open(const char *spec, const struct store_open_options *o,
			struct store **out, char *err, size_t errlen)
{
	const struct store_open_options none = {0};
	struct store_fs_options fs = {0};

	if (err && errlen)
		err[0] = '\0';
	if (!out) {
		err_set(err, errlen, "no output store");
		return CORE_ERR_BAD_REQUEST;
	}
	*out = NULL;
	if (!o)
		o = &none;
	if (!spec || !*spec) {
		err_set(err, errlen, "empty store spec (want fs:DIR or mongodb://...)");
		return CORE_ERR_BAD_REQUEST;
	}
	if (spec_is_mongo(spec))
		return open_mongo(spec, o, out, err, errlen);
	if (o->fs)
		fs = *o->fs;
	fs.dir = strncmp(spec, "fs:", 3) == 0 ? spec + 3 : spec;
	if (!*fs.dir) {
		err_set(err, errlen, "fs: store spec without a directory");
		return CORE_ERR_BAD_REQUEST;
	}
	return store_fs_open(&fs, out, err, errlen);
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
