/* Idempotency keys on the FS twin (DESIGN §18): records "i/<scoped key>" held as effect-style
 * keyed records (struct fs_kv in fs->idem, fs_effect.c publishes and undoes them), so they
 * ride in journal lines, replay and snapshot like subscriptions do.
 *
 * One process owns the directory, so a reservation is in memory (fs->idem_pending, under the
 * state lock). The write a reserved key answers carries the record "written, answer not
 * recorded" in its own journal line (fs_idem_attach, from fs_txn_end): a crash then never
 * keeps the write without its key. The answer's line (fs_idem_end) follows in the same ack.
 * Expired records are swept by the writes of new ones and left out of every snapshot. */
#include "store/fs/fs.h"
#include "store/fs/fs_effect.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_txn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "i/<key>": new string, NULL on OOM. */
static char *rec_key(const char *key)
{
	size_t n = strlen(key) + 3;
	char *k = malloc(n);

	if (k)
		snprintf(k, n, "i/%s", key);
	return k;
}

bool fs_idem_expired(const struct fs *fs, const struct fs_kv *kv)
{
	struct timespec ts;

	(void)fs;
	clock_gettime(CLOCK_REALTIME, &ts);
	return kv->due <= (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static enum core_rc fs_idem_begin(struct store *st, struct store_idem *k)
{
	struct fs *fs = fs_of(st);
	char *key = rec_key(k->key);
	const struct fs_kv *kv;
	const struct store_idem *held;
	enum core_rc rc = CORE_OK;
	uint64_t need = 0;

	if (!key)
		return CORE_ERR_NOMEM;
	pthread_rwlock_wrlock(&fs->lock);
	kv = fs_map_get(&fs->idem, key);
	/* A reservation first: its write may already carry the key ("written"), which is no
	 * lost answer while the request is still being served. */
	if ((held = fs_map_get(&fs->idem_pending, k->key))) {
		rc = strcmp(held->fp, k->fp) == 0 ? CORE_OK : CORE_ERR_IDEMPOTENCY_KEY_REUSED;
		k->state = STORE_IDEM_PENDING;
	} else if (kv && kv->due > store_now(st)) {
		rc = store_idem_parse(kv->val, k);
		if (rc == CORE_ERR_BAD_REQUEST)
			rc = CORE_ERR_STORE_UNAVAILABLE; /* a torn record: never guess an answer */
		/* what was read is shown once durable (DESIGN §16) */
		need = fs_read_mark(fs, FS_READ_ALL);
	} else {
		rc = fs_map_put(&fs->idem_pending, k->key, k);
		k->state = STORE_IDEM_NEW;
	}
	pthread_rwlock_unlock(&fs->lock);
	free(key);
	rc = fs_read_end(fs, need, false, rc);
	if (rc != CORE_OK)
		store_idem_release(k);
	return rc;
}

/* Drops k's reservation (under the write lock). */
static void pending_drop(struct fs *fs, struct store_idem *k)
{
	if (fs_map_get(&fs->idem_pending, k->key) == k)
		fs_map_del(&fs->idem_pending, k->key);
}

/* Past a few writes per record held, one step deletes every expired record. */
static enum core_rc sweep(struct fs_txn *t)
{
	struct fs *fs = t->fs;
	enum core_rc rc = CORE_OK;
	size_t i;

	if (++fs->idem_sweep < 64 + fs->idem.n / 2)
		return CORE_OK;
	fs->idem_sweep = 0;
	for (i = 0; rc == CORE_OK && i < fs->idem.cap; i++) {
		const struct fs_kv *kv = fs->idem.slots[i].val;

		if (fs->idem.slots[i].key && kv->due <= t->now)
			rc = fs_txn_kv(t, kv->key, NULL, 0);
	}
	return rc;
}

static enum core_rc fs_idem_end(struct store *st, struct store_idem *k, int status,
				const char *body, const char *location)
{
	struct fs *fs = fs_of(st);
	char *key = rec_key(k->key), *text = NULL;
	struct fs_txn t;
	enum core_rc rc = CORE_ERR_NOMEM;

	fs_txn_begin(fs, &t, NULL);
	pending_drop(fs, k);
	if (!key)
		goto out;
	text = store_idem_text(k->fp, status, body, location, t.now);
	if (!text)
		goto out;
	rc = fs_txn_kv(&t, key, text, t.now + STORE_IDEM_TTL_MS);
	if (rc == CORE_OK)
		rc = sweep(&t);
out:
	rc = fs_txn_end(&t, rc);
	free(key);
	free(text);
	return rc;
}

static void fs_idem_abort(struct store *st, struct store_idem *k)
{
	struct fs *fs = fs_of(st);

	pthread_rwlock_wrlock(&fs->lock);
	pending_drop(fs, k);
	pthread_rwlock_unlock(&fs->lock);
}

enum core_rc fs_idem_attach(struct fs_txn *t)
{
	struct store_idem *k;
	enum core_rc rc = CORE_OK;

	/* Every key bound (a batch's, and its item's) that no line carries yet. */
	for (k = store_idem_bound(); k && rc == CORE_OK; k = k->up) {
		char *key, *text;

		if (k->attached || k->st != &t->fs->base || k->state != STORE_IDEM_NEW)
			continue;
		key = rec_key(k->key);
		text = store_idem_text(k->fp, 0, "", "", t->now);
		rc = key && text ? fs_txn_kv(t, key, text, t->now + STORE_IDEM_TTL_MS)
				 : CORE_ERR_NOMEM;
		if (rc == CORE_OK)
			k->attached = true;
		free(key);
		free(text);
	}
	return rc;
}

const struct store_idem_ops fs_idem_ops = {
	.begin = fs_idem_begin,
	.end = fs_idem_end,
	.abort = fs_idem_abort,
};
