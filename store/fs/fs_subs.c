/* The effect ops of the FS twin (DESIGN §14): subscriptions (put, get, list, delete, a column
 * rename carried along) and deliveries (get, list, lease, the fenced outcome, retry, the
 * retention of settled ones). Each is a transaction over effect records (fs_effect.c: their
 * keys, their JSON, their publication and the matching of events). */
#include "store/fs/fs.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_effect.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_txn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Settled (done or dead) deliveries kept, newest first; an older one goes when another
 * settles. Pending ones are never dropped. */
#define FS_SETTLED_KEEP 10000

/* ---- subscriptions ---- */

enum core_rc fs_sub_put(struct store *st, const struct store_sub *s, const char *secret_if_new,
			bool *created, struct store_sub **out)
{
	struct fs *fs = fs_of(st);
	struct fs_txn t;
	struct store_sub *old = NULL, *now = NULL;
	const struct core_board *b;
	char key[FS_SUB_KEY_MAX];
	const char *text;
	enum core_rc rc;

	fs_txn_begin(fs, &t, NULL);
	fs_sub_key(key, s->board, s->name);
	b = fs_board_find(fs, s->board);
	rc = b ? core_sub_filter_columns_check(b, &s->on, NULL, 0) : CORE_ERR_NOT_FOUND;
	text = rc == CORE_OK ? fs_txn_kv_peek(&t, key) : NULL;
	if (text)
		rc = fs_sub_parse(text, &old);
	if (rc == CORE_OK) {
		now = store_sub_put_merge(s, old, secret_if_new, t.now);
		rc = now ? CORE_OK : CORE_ERR_NOMEM;
	}
	if (rc == CORE_OK)
		rc = fs_sub_write(&t, now);
	rc = fs_txn_end(&t, rc);
	if (rc == CORE_OK) {
		*created = !old;
		*out = now;
		now = NULL;
	}
	store_sub_free(now);
	store_sub_free(old);
	return rc;
}

enum core_rc fs_subs_column_rename(struct fs_txn *t, const char *board, const char *from,
				   const char *to)
{
	struct fs *fs = t->fs;
	char prefix[FS_SUB_KEY_MAX];
	size_t plen, i;
	enum core_rc rc = CORE_OK;

	snprintf(prefix, sizeof prefix, "s/%s/", board);
	plen = strlen(prefix);
	/* The txn buffers its writes: walking the committed map while writing is safe. */
	for (i = 0; rc == CORE_OK && i < fs->subs.cap; i++) {
		const struct fs_kv *kv = fs->subs.slots[i].val;
		struct store_sub *sub = NULL;
		bool changed = false;

		if (!fs->subs.slots[i].key || strncmp(kv->key, prefix, plen) != 0)
			continue;
		rc = fs_sub_parse(kv->val, &sub);
		if (rc == CORE_OK)
			rc = core_sub_filter_column_rename(&sub->on, from, to, &changed);
		if (rc == CORE_OK && changed) {
			sub->updated_at = t->now;
			rc = fs_sub_write(t, sub);
		}
		store_sub_free(sub);
	}
	return rc;
}

enum core_rc fs_sub_get(struct store *st, const char *board, const char *name,
			struct store_sub **out)
{
	struct fs *fs = fs_of(st);
	char key[FS_SUB_KEY_MAX];
	const struct fs_kv *kv;
	enum core_rc rc, w;
	uint64_t need;

	fs_sub_key(key, board, name);
	pthread_rwlock_rdlock(&fs->lock);
	kv = fs_map_get(&fs->subs, key);
	rc = kv ? fs_sub_parse(kv->val, out) : CORE_ERR_NOT_FOUND;
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	w = fs_read_end(fs, need, false, rc);
	if (w != CORE_OK && rc == CORE_OK) {
		store_sub_free(*out);
		*out = NULL;
	}
	return w;
}

static int cmp_sub(const void *a, const void *b)
{
	return strcmp((*(struct store_sub *const *)a)->name, (*(struct store_sub *const *)b)->name);
}

enum core_rc fs_sub_list(struct store *st, const char *board, struct store_sub ***out, size_t *n)
{
	struct fs *fs = fs_of(st);
	struct store_sub **v;
	char prefix[FS_SUB_KEY_MAX];
	size_t plen, i, k = 0;
	enum core_rc rc = CORE_OK;
	uint64_t need;

	snprintf(prefix, sizeof prefix, "s/%s/", board);
	plen = strlen(prefix);
	pthread_rwlock_rdlock(&fs->lock);
	v = calloc(fs->subs.n + 1, sizeof(*v));
	if (!v)
		rc = CORE_ERR_NOMEM;
	for (i = 0; rc == CORE_OK && i < fs->subs.cap; i++) {
		const struct fs_kv *kv = fs->subs.slots[i].val;

		if (fs->subs.slots[i].key && strncmp(kv->key, prefix, plen) == 0 &&
		    (rc = fs_sub_parse(kv->val, &v[k])) == CORE_OK)
			k++;
	}
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	rc = fs_read_end(fs, need, false, rc);
	if (rc != CORE_OK) {
		store_subs_free(v, k);
		return rc;
	}
	qsort(v, k, sizeof(*v), cmp_sub);
	*out = v;
	*n = k;
	return CORE_OK;
}

enum core_rc fs_sub_delete(struct store *st, const char *board, const char *name)
{
	struct fs *fs = fs_of(st);
	struct fs_txn t;
	char key[FS_SUB_KEY_MAX];
	enum core_rc rc;

	fs_txn_begin(fs, &t, NULL);
	fs_sub_key(key, board, name);
	rc = fs_txn_kv_peek(&t, key) ? fs_txn_kv(&t, key, NULL, 0) : CORE_ERR_NOT_FOUND;
	return fs_txn_end(&t, rc);
}

/* ---- deliveries ---- */

/* Ends t with rc; on success hands d (owned) over through out when out is given, else frees
 * it. */
static enum core_rc dlv_txn_end(struct fs_txn *t, enum core_rc rc, struct store_delivery *d,
				struct store_delivery **out)
{
	rc = fs_txn_end(t, rc);
	if (rc == CORE_OK && out) {
		*out = d;
		d = NULL;
	}
	store_delivery_free(d);
	return rc;
}

enum core_rc fs_delivery_get(struct store *st, const char *id, struct store_delivery **out)
{
	struct fs *fs = fs_of(st);
	char *key = fs_dlv_key(id);
	const struct fs_kv *kv;
	enum core_rc rc, w;
	uint64_t need;

	if (!key)
		return CORE_ERR_NOMEM;
	pthread_rwlock_rdlock(&fs->lock);
	kv = fs_map_get(&fs->kv, key);
	rc = kv ? fs_dlv_parse(kv->val, out) : CORE_ERR_NOT_FOUND;
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	free(key);
	w = fs_read_end(fs, need, false, rc);
	if (w != CORE_OK && rc == CORE_OK) {
		store_delivery_free(*out);
		*out = NULL;
	}
	return w;
}

static bool board_in(const char *board, const char *const *boards)
{
	for (; boards && *boards; boards++)
		if (strcmp(*boards, board) == 0 || strcmp(*boards, "*") == 0)
			return true;
	return !boards;
}

/* Newest first: created_at, then the event's board_seq, then id, all descending. */
static int cmp_dlv_newest(const void *a, const void *b)
{
	const struct store_delivery *x = *(struct store_delivery *const *)a;
	const struct store_delivery *y = *(struct store_delivery *const *)b;

	if (x->created_at != y->created_at)
		return x->created_at < y->created_at ? 1 : -1;
	if (x->event_seq != y->event_seq)
		return x->event_seq < y->event_seq ? 1 : -1;
	return -strcmp(x->id, y->id);
}

enum core_rc fs_delivery_list(struct store *st, const struct store_delivery_filter *f,
			      struct store_delivery ***out, size_t *n)
{
	struct fs *fs = fs_of(st);
	struct store_delivery **v, *d;
	size_t i, k = 0;
	enum core_rc rc = CORE_OK;
	uint64_t need;

	pthread_rwlock_rdlock(&fs->lock);
	v = calloc(fs->kv.n + 1, sizeof(*v));
	if (!v)
		rc = CORE_ERR_NOMEM;
	for (i = 0; rc == CORE_OK && i < fs->kv.cap; i++) {
		const struct fs_kv *kv = fs->kv.slots[i].val;

		if (!fs->kv.slots[i].key)
			continue;
		/* The due index tells pending from settled without a parse. */
		if (f->status >= 0 && (kv->due >= 0) != (f->status == STORE_DELIVERY_PENDING))
			continue;
		rc = fs_dlv_parse(kv->val, &d);
		if (rc != CORE_OK)
			break;
		if ((f->status >= 0 && (int)d->status != f->status) ||
		    (f->board && strcmp(f->board, d->board) != 0) || !board_in(d->board, f->boards)) {
			store_delivery_free(d);
			continue;
		}
		v[k++] = d;
	}
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	rc = fs_read_end(fs, need, false, rc);
	if (rc != CORE_OK) {
		store_deliveries_free(v, k);
		return rc;
	}
	qsort(v, k, sizeof(*v), cmp_dlv_newest);
	for (i = f->limit; i < k; i++)
		store_delivery_free(v[i]);
	*n = k < f->limit ? k : f->limit;
	*out = v;
	return CORE_OK;
}

/* What the lease scan orders and passes over a due delivery by, read once from its text and
 * kept on its published entry (kv->lease): a burst of deliveries to one hung receiver is not
 * parsed again by every lease (DESIGN §16). One block: the strings follow the struct. */
struct fs_dlv_order {
	int64_t next_at, created_at, seq, lease_until;
	bool pending, leased;
	const char *board, *sub;
	char id[];
};

static enum core_rc dlv_order(const struct fs_kv *kv, const struct fs_dlv_order **out)
{
	struct store_delivery *d = NULL;
	struct fs_dlv_order *o;
	size_t li, lb, ls;
	enum core_rc rc;

	if (kv->lease) {
		*out = kv->lease;
		return CORE_OK;
	}
	rc = fs_dlv_parse(kv->val, &d);
	if (rc != CORE_OK)
		return rc;
	li = strlen(d->id) + 1;
	lb = strlen(d->board) + 1;
	ls = strlen(d->sub) + 1;
	o = malloc(sizeof(*o) + li + lb + ls);
	if (o) {
		o->next_at = d->next_at;
		o->created_at = d->created_at;
		o->seq = d->event_seq;
		o->lease_until = d->lease_until;
		o->pending = d->status == STORE_DELIVERY_PENDING;
		o->leased = d->lease_owner != NULL;
		memcpy(o->id, d->id, li);
		o->board = memcpy(o->id + li, d->board, lb);
		o->sub = memcpy(o->id + li + lb, d->sub, ls);
		/* A cache of the immutable text, written only under the write lock (the lease's
		 * transaction); readers under the read lock never look at it. */
		((struct fs_kv *)kv)->lease = o;
	}
	store_delivery_free(d);
	*out = o;
	return o ? CORE_OK : CORE_ERR_NOMEM;
}

/* Earliest due first, then oldest, then by the event's board_seq (the events of one step,
 * or of one millisecond, share created_at; the id "<board>:<seq>.<sub>" as a string would put
 * seq 10 before 6: DESIGN §16, a subscription's webhooks leave in seq order), then id. */
static bool dlv_before(const struct fs_dlv_order *x, const struct fs_dlv_order *y)
{
	if (x->next_at != y->next_at)
		return x->next_at < y->next_at;
	if (x->created_at != y->created_at)
		return x->created_at < y->created_at;
	if (x->seq != y->seq)
		return x->seq < y->seq;
	return strcmp(x->id, y->id) < 0;
}

static bool dlv_skipped(const struct fs_dlv_order *o, const struct store_sub_ref *skip,
			size_t n_skip)
{
	size_t i;

	for (i = 0; i < n_skip; i++)
		if (strcmp(skip[i].name, o->sub) == 0 && strcmp(skip[i].board, o->board) == 0)
			return true;
	return false;
}

enum core_rc fs_delivery_lease(struct store *st, const char *owner, int64_t lease_ms,
			       const struct store_sub_ref *skip, size_t n_skip,
			       struct store_delivery **out)
{
	struct fs *fs = fs_of(st);
	struct store_delivery *best = NULL;
	const struct fs_kv *best_kv = NULL;
	const struct fs_dlv_order *bo = NULL;
	struct fs_txn t;
	enum core_rc rc = CORE_OK;
	int64_t now = store_now(st);
	bool any = false;
	size_t i;

	/* Idle deliverers poll: look for a due one under the read lock first, so an idle poll
	 * never takes the write lock writers need. */
	pthread_rwlock_rdlock(&fs->lock);
	for (i = 0; !any && i < fs->kv.cap; i++) {
		const struct fs_kv *kv = fs->kv.slots[i].val;

		any = fs->kv.slots[i].key && kv->due >= 0 && kv->due <= now;
	}
	pthread_rwlock_unlock(&fs->lock);
	if (!any)
		return CORE_OK;
	fs_txn_begin(fs, &t, NULL);
	for (i = 0; rc == CORE_OK && i < fs->kv.cap; i++) {
		const struct fs_kv *kv = fs->kv.slots[i].val;
		const struct fs_dlv_order *o;

		if (!fs->kv.slots[i].key || kv->due < 0 || kv->due > t.now)
			continue;
		rc = dlv_order(kv, &o);
		if (rc != CORE_OK || !o->pending || (o->leased && o->lease_until >= t.now) ||
		    (bo && !dlv_before(o, bo)) || dlv_skipped(o, skip, n_skip))
			continue;
		bo = o;
		best_kv = kv;
	}
	if (rc == CORE_OK && best_kv)
		rc = fs_dlv_parse(best_kv->val, &best);
	if (rc == CORE_OK && best) {
		free(best->lease_owner);
		best->lease_owner = strdup(owner);
		best->lease_until = t.now + lease_ms;
		best->lease_epoch++;
		best->updated_at = t.now;
		rc = best->lease_owner ? fs_dlv_write(&t, best) : CORE_ERR_NOMEM;
	}
	return dlv_txn_end(&t, rc, best, out);
}

/* Opens *t (the caller closes it with dlv_txn_end, whatever this answers) and reads delivery
 * id into *out (the caller's until it hands it to dlv_txn_end). */
static enum core_rc dlv_txn_begin(struct store *st, struct fs_txn *t, const char *id,
				  struct store_delivery **out)
{
	char *key = fs_dlv_key(id);
	const char *text;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), t, NULL);
	*out = NULL;
	if (!key)
		return CORE_ERR_NOMEM;
	text = fs_txn_kv_peek(t, key);
	rc = text ? fs_dlv_parse(text, out) : CORE_ERR_NOT_FOUND;
	free(key);
	return rc;
}

/* The 410 verdict: the subscription is disabled in the same step, if it is still the version
 * the attempt was made for (`seen`): a 410 from an old receiver says nothing of one created
 * again under the name, pointed elsewhere or re-enabled since. Any other change since (a
 * column rename) spares it too: the next delivery meets the 410 again. */
static enum core_rc sub_disable(struct fs_txn *t, const char *board, const char *name,
				const struct store_sub *seen)
{
	struct store_sub *s = NULL;
	char key[FS_SUB_KEY_MAX];
	const char *text;
	enum core_rc rc;

	fs_sub_key(key, board, name);
	text = seen ? fs_txn_kv_peek(t, key) : NULL;
	if (!text)
		return CORE_OK; /* no version to match, or deleted meanwhile */
	rc = fs_sub_parse(text, &s);
	if (rc == CORE_OK && s->created_at == seen->created_at &&
	    s->updated_at == seen->updated_at && strcmp(s->url, seen->url) == 0) {
		s->enabled = false;
		free(s->disabled_reason);
		s->disabled_reason = strdup("gone");
		s->updated_at = t->now;
		rc = s->disabled_reason ? fs_sub_write(t, s) : CORE_ERR_NOMEM;
	}
	store_sub_free(s);
	return rc;
}

/* Past FS_SETTLED_KEEP settled deliveries, the oldest settled one goes in this step (one per
 * settling, so the count stays at the bound). */
static enum core_rc settled_trim(struct fs_txn *t)
{
	const struct fs_kv *oldest = NULL;
	size_t i, settled = 0;

	for (i = 0; i < t->fs->kv.cap; i++) {
		const struct fs_kv *kv = t->fs->kv.slots[i].val;

		if (!t->fs->kv.slots[i].key || kv->due >= 0)
			continue;
		settled++;
		if (!oldest || kv->due > oldest->due)
			oldest = kv;
	}
	if (settled < FS_SETTLED_KEEP || !oldest)
		return CORE_OK;
	return fs_txn_kv(t, oldest->key, NULL, 0);
}

enum core_rc fs_delivery_finish(struct store *st, const char *id,
				const struct store_delivery_outcome *o,
				struct store_delivery **out)
{
	struct store_delivery *d = NULL;
	struct fs_txn t;
	enum core_rc rc = dlv_txn_begin(st, &t, id, &d);

	if (rc == CORE_OK && (d->status != STORE_DELIVERY_PENDING || !d->lease_owner ||
			      strcmp(d->lease_owner, o->owner) != 0 || d->lease_epoch != o->epoch))
		rc = CORE_ERR_CLAIM_CONFLICT;
	if (rc == CORE_OK) {
		d->attempts++;
		d->last_status = o->status;
		free(d->last_error);
		d->last_error = o->error ? strdup(o->error) : NULL;
		free(d->lease_owner);
		d->lease_owner = NULL;
		d->lease_until = 0;
		d->updated_at = t.now;
		switch (o->verdict) {
		case CORE_DELIVERY_DONE:
			d->status = STORE_DELIVERY_DONE;
			break;
		case CORE_DELIVERY_RETRY:
			d->next_at = o->next_at;
			break;
		case CORE_DELIVERY_DISABLE:
			rc = sub_disable(&t, d->board, d->sub, o->sub);
			d->status = STORE_DELIVERY_DEAD;
			break;
		case CORE_DELIVERY_DEAD:
			d->status = STORE_DELIVERY_DEAD;
			break;
		}
		if (rc == CORE_OK && o->error && !d->last_error)
			rc = CORE_ERR_NOMEM;
		if (rc == CORE_OK && d->status != STORE_DELIVERY_PENDING)
			rc = settled_trim(&t);
		if (rc == CORE_OK)
			rc = fs_dlv_write(&t, d);
	}
	return dlv_txn_end(&t, rc, d, out);
}

enum core_rc fs_delivery_retry(struct store *st, const char *id, struct store_delivery **out)
{
	struct store_delivery *d = NULL;
	struct fs_txn t;
	enum core_rc rc = dlv_txn_begin(st, &t, id, &d);

	if (rc == CORE_OK && d->status == STORE_DELIVERY_PENDING)
		rc = CORE_ERR_STATE_CONFLICT;
	if (rc == CORE_OK) {
		d->status = STORE_DELIVERY_PENDING;
		d->attempts = 0;
		d->next_at = t.now;
		free(d->lease_owner);
		d->lease_owner = NULL;
		d->lease_until = 0;
		d->lease_epoch++; /* whatever lease an outcome still carries is void */
		d->updated_at = t.now;
		rc = fs_dlv_write(&t, d);
	}
	return dlv_txn_end(&t, rc, d, out);
}
