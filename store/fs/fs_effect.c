/* Effects on the FS twin (DESIGN §14): the effect records, their publication and undo, their
 * keys and JSON, and the matching of a transaction's events against the subscriptions. The
 * ops over them are fs_subs.c's. Subscriptions and deliveries are effect records (struct
 * fs_kv, their stored JSON) that ride in the journal line of the transaction that writes them.
 * Matching runs inside fs_txn_end, so an event, the deliveries it enqueues and the labels it
 * consumes are one line: durable together or not at all.
 *
 * Leases: the deliverer threads lease a due delivery (a journaled write: lease_owner,
 * lease_until, lease_epoch + 1) and write its outcome fenced by (owner, epoch), the claim's
 * shape again. On this twin only one process holds the directory, so the fence only has to
 * keep two threads of one process, or an operator retry and a late outcome, apart. */
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_effect.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_txn.h"
#include "store/fs/fs_undo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct fs_effect_hit {
	size_t ev;             /* index into the change's events */
	struct store_sub *sub; /* owned */
};

void fs_sub_key(char *buf, const char *board, const char *name)
{
	snprintf(buf, FS_SUB_KEY_MAX, "s/%s/%s", board, name);
}

/* "d/<id>" in a new string; NULL on OOM. */
char *fs_dlv_key(const char *id)
{
	size_t n = strlen(id) + 3;
	char *k = malloc(n);

	if (k)
		snprintf(k, n, "d/%s", id);
	return k;
}

static struct fs_map *kv_map(struct fs *fs, const char *key)
{
	return key[0] == 's' ? &fs->subs : key[0] == 'i' ? &fs->idem : &fs->kv;
}

struct fs_map *fs_kv_map(struct fs *fs, const char *key)
{
	return kv_map(fs, key);
}

static void kv_free(struct fs_kv *kv)
{
	if (!kv)
		return;
	free(kv->key);
	free(kv->val);
	free(kv->lease); /* one block */
	free(kv);
}

/* ---- publication, undo ---- */

void fs_kv_apply(struct fs *fs, struct fs_kv *kv, struct fs_undo *undo)
{
	struct fs_map *m = kv_map(fs, kv->key);
	struct fs_kv *old = fs_map_get(m, kv->key), *now = NULL;

	if (kv->val) {
		now = malloc(sizeof(*now));
		if (!now) {
			/* Reserved room is for the map only; a lost record here would be silent
			 * divergence from the journal, so keep the old one and say so. */
			fprintf(stderr, "boardd: fs store: out of memory publishing %s\n", kv->key);
			free(kv->key);
			free(kv->val);
			kv->key = kv->val = NULL;
			return;
		}
		*now = *kv;
		fs_map_put(m, now->key, now); /* reserved: cannot fail */
	} else {
		if (old)
			fs_map_del(m, kv->key);
		free(kv->key);
	}
	kv->key = kv->val = NULL;
	if (undo)
		undo->kvs[undo->n_kvs++] = (struct fs_undo_kv){.now = now, .old = old};
	else
		kv_free(old);
}

void fs_kv_undo_settle(struct fs_undo *u)
{
	size_t i;

	for (i = 0; i < u->n_kvs; i++)
		kv_free(u->kvs[i].old);
	u->n_kvs = 0;
}

void fs_kv_undo_rollback(struct fs *fs, struct fs_undo *u)
{
	size_t i;

	for (i = u->n_kvs; i-- > 0;) {
		struct fs_kv *now = u->kvs[i].now, *old = u->kvs[i].old;

		if (now)
			fs_map_del(kv_map(fs, now->key), now->key);
		if (old)
			fs_map_put(kv_map(fs, old->key), old->key, old); /* the map never shrinks */
		kv_free(now);
	}
	u->n_kvs = 0;
}

static void kv_map_free(struct fs_map *m)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			kv_free(m->slots[i].val);
	fs_map_release(m);
}

void fs_kv_release(struct fs *fs)
{
	kv_map_free(&fs->kv);
	kv_map_free(&fs->subs);
	kv_map_free(&fs->idem);
	fs_map_release(&fs->idem_pending);
}

/* ---- decoding the records ---- */

enum core_rc fs_sub_parse(const char *text, struct store_sub **out)
{
	json_t *j = json_loads(text, 0, NULL);
	enum core_rc rc = j ? store_sub_from_json(j, out) : CORE_ERR_INTERNAL;

	json_decref(j);
	return rc == CORE_ERR_BAD_REQUEST ? CORE_ERR_INTERNAL : rc;
}

enum core_rc fs_dlv_parse(const char *text, struct store_delivery **out)
{
	json_t *j = json_loads(text, 0, NULL);
	enum core_rc rc = j ? store_delivery_from_json(j, out) : CORE_ERR_INTERNAL;

	json_decref(j);
	return rc == CORE_ERR_BAD_REQUEST ? CORE_ERR_INTERNAL : rc;
}

enum core_rc fs_sub_write(struct fs_txn *t, const struct store_sub *s)
{
	char key[FS_SUB_KEY_MAX];
	json_t *j = store_sub_to_json(s, true);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	enum core_rc rc = text ? CORE_OK : CORE_ERR_NOMEM;

	fs_sub_key(key, s->board, s->name);
	if (rc == CORE_OK)
		rc = fs_txn_kv(t, key, text, 0);
	free(text);
	json_decref(j);
	return rc;
}

enum core_rc fs_dlv_write(struct fs_txn *t, const struct store_delivery *d)
{
	json_t *j = store_delivery_to_json(d, true);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL, *key = fs_dlv_key(d->id);
	enum core_rc rc = text && key ? CORE_OK : CORE_ERR_NOMEM;
	int64_t due = d->next_at;

	/* The due index: a pending delivery's next_at, or while it is leased the end of the
	 * lease (before that no deliverer may take it: the lease scan passes it without a parse,
	 * however many wait leased behind a hung receiver); a settled one's -(updated_at), so the
	 * retention finds the oldest without a parse. */
	if (d->lease_owner && d->lease_until > due)
		due = d->lease_until;
	if (rc == CORE_OK)
		rc = fs_txn_kv(t, key, text,
			       d->status == STORE_DELIVERY_PENDING ? due
								   : -(d->updated_at > 0 ? d->updated_at : 1));
	free(key);
	free(text);
	json_decref(j);
	return rc;
}

/* ---- matching, in the transaction's atomic step ---- */

/* The enabled subscriptions of `board` (a new array; caller frees with store_subs_free). */
static enum core_rc board_subs(struct fs *fs, const char *board, struct store_sub ***out,
			       size_t *n)
{
	struct store_sub **v = NULL, *s;
	size_t i, k = 0;
	enum core_rc rc = CORE_OK;
	char prefix[FS_SUB_KEY_MAX];
	size_t plen;

	*out = NULL;
	*n = 0;
	snprintf(prefix, sizeof prefix, "s/%s/", board);
	plen = strlen(prefix);
	v = calloc(fs->subs.n + 1, sizeof(*v));
	if (!v)
		return CORE_ERR_NOMEM;
	for (i = 0; rc == CORE_OK && i < fs->subs.cap; i++) {
		const struct fs_kv *kv = fs->subs.slots[i].val;

		if (!fs->subs.slots[i].key || strncmp(kv->key, prefix, plen) != 0)
			continue;
		rc = fs_sub_parse(kv->val, &s);
		if (rc == CORE_OK && s->enabled)
			v[k++] = s;
		else if (rc == CORE_OK)
			store_sub_free(s);
	}
	if (rc != CORE_OK) {
		store_subs_free(v, k);
		return rc;
	}
	*out = v;
	*n = k;
	return CORE_OK;
}

/* The "to" of an event's payload (a new string), or NULL. */
static char *payload_to(const struct core_event *e)
{
	json_t *p = e->payload ? json_loads(e->payload, 0, NULL) : NULL;
	const char *to = json_string_value(json_object_get(p, "to"));
	char *s = to ? strdup(to) : NULL;

	json_decref(p);
	return s;
}

void fs_effects_clear(struct fs_txn *t)
{
	size_t i;

	for (i = 0; i < t->n_hits; i++)
		store_sub_free(t->hits[i].sub);
	free(t->hits);
	t->hits = NULL;
	t->n_hits = 0;
}

/* The one-shots of every hit on the card of hit `first` (and the later hits on that card):
 * their consume_labels leave the card together, recorded as ONE card_labels_changed event
 * (reason consume_labels) that is never matched itself (it is appended after the events
 * being matched). */
static enum core_rc consume_card(struct fs_txn *t, size_t first, bool *done)
{
	const char *card_id = t->ch.events[t->hits[first].ev]->card_id;
	struct core_strv before = {0};
	struct core_card *c;
	json_t *removed = NULL, *subs = NULL;
	enum core_rc rc;
	bool changed = false, any = false;
	size_t i;

	rc = fs_txn_card(t, card_id, &c);
	if (rc == CORE_ERR_NOT_FOUND)
		rc = CORE_OK, c = NULL; /* deleted in this very step */
	if (rc == CORE_OK && c)
		rc = core_strv_copy(&before, &c->labels);
	if (rc == CORE_OK && c && !(subs = json_array()))
		rc = CORE_ERR_NOMEM;
	for (i = first; rc == CORE_OK && i < t->n_hits; i++) {
		const struct core_event *e = t->ch.events[t->hits[i].ev];
		const struct store_sub *s = t->hits[i].sub;

		if (done[i] || !e->card_id || strcmp(e->card_id, card_id) != 0)
			continue;
		done[i] = true;
		if (!c || !s->consume.n)
			continue;
		rc = core_effect_consume(c, &s->consume, &changed);
		if (rc == CORE_OK && changed && json_array_append_new(subs, json_string(s->name)))
			rc = CORE_ERR_NOMEM;
		any |= changed;
	}
	if (rc != CORE_OK || !any)
		goto out;
	c->updated_at = t->now;
	rc = CORE_ERR_NOMEM;
	removed = json_array();
	for (i = 0; removed && i < before.n; i++)
		if (!core_strv_contains(&c->labels, before.v[i]) &&
		    json_array_append_new(removed, json_string(before.v[i])) != 0)
			break;
	if (removed)
		rc = fs_txn_event(t, CORE_EV_CARD_LABELS_CHANGED, c->board, c->id, "consume_labels",
				  json_pack("{s:o, s:O}", "removed", removed, "subscriptions", subs));
out:
	json_decref(subs);
	core_strv_release(&before);
	return rc;
}

struct consume_at {
	size_t after; /* the index of its card's last event among the step's own */
	size_t k;     /* its index */
};

static int consume_at_cmp(const void *a, const void *b)
{
	const struct consume_at *x = a, *y = b;

	if (x->after != y->after)
		return x->after < y->after ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

/* The consume events (appended from index n_ev on, one per card) each move to right after
 * the last event of their card: a card's one-shots leave in its own step, before the steps it
 * caused (its dependents' card_unblocked), the order the Mongo twin appends them in (it
 * commits each card's write, consume included, before it promotes a dependent). The hits'
 * event indices follow. */
static enum core_rc consumes_place(struct fs_txn *t, size_t n_ev)
{
	struct fs_change *ch = &t->ch;
	size_t n = ch->n_events, c = n - n_ev, i, j, o = 0;
	struct core_event **v;
	struct consume_at *ca;
	size_t *at;

	if (!c)
		return CORE_OK;
	v = calloc(n, sizeof(*v));
	at = calloc(n_ev, sizeof(*at));
	ca = calloc(c, sizeof(*ca));
	if (!v || !at || !ca) {
		free(v);
		free(at);
		free(ca);
		return CORE_ERR_NOMEM;
	}
	for (j = 0; j < c; j++) {
		const char *id = ch->events[n_ev + j]->card_id;

		ca[j] = (struct consume_at){.after = n_ev - 1, .k = n_ev + j};
		for (i = n_ev; i-- > 0;)
			if (ch->events[i]->card_id && strcmp(ch->events[i]->card_id, id) == 0) {
				ca[j].after = i;
				break;
			}
	}
	qsort(ca, c, sizeof(*ca), consume_at_cmp);
	for (i = 0, j = 0; i < n_ev; i++) {
		at[i] = o;
		v[o++] = ch->events[i];
		for (; j < c && ca[j].after == i; j++)
			v[o++] = ch->events[ca[j].k];
	}
	memcpy(ch->events, v, n * sizeof(*v));
	for (i = 0; i < t->n_hits; i++)
		t->hits[i].ev = at[t->hits[i].ev];
	free(v);
	free(at);
	free(ca);
	return CORE_OK;
}

enum core_rc fs_effects_match(struct fs_txn *t)
{
	struct fs_change *ch = &t->ch;
	struct store_sub **subs = NULL;
	size_t n_subs = 0, n_ev = ch->n_events, i, k;
	const char *subs_board = NULL;
	enum core_rc rc = CORE_OK;

	if (!t->fs->subs.n)
		return CORE_OK;
	for (i = 0; rc == CORE_OK && i < n_ev; i++) {
		const struct core_event *e = ch->events[i];
		struct core_card view;
		const struct core_card *card;
		char *to;

		if (!subs_board || strcmp(subs_board, e->board) != 0) {
			store_subs_free(subs, n_subs);
			subs_board = e->board;
			rc = board_subs(t->fs, e->board, &subs, &n_subs);
			if (rc != CORE_OK)
				break;
		}
		if (!n_subs)
			continue;
		card = e->card_id ? fs_txn_peek(t, e->card_id, &view) : NULL;
		to = payload_to(e);
		for (k = 0; rc == CORE_OK && k < n_subs; k++) {
			struct fs_effect_hit *nh;

			if (!store_effect_match(subs[k], e->type, e->reason, to, card))
				continue;
			nh = realloc(t->hits, (t->n_hits + 1) * sizeof(*nh));
			if (!nh || !(nh[t->n_hits].sub = store_sub_dup(subs[k]))) {
				if (nh)
					t->hits = nh;
				rc = CORE_ERR_NOMEM;
				break;
			}
			t->hits = nh;
			t->hits[t->n_hits++].ev = i;
		}
		free(to);
	}
	store_subs_free(subs, n_subs);
	/* Every match judged the labels as the step left them; now the one-shots go, card by
	 * card. */
	if (rc == CORE_OK && t->n_hits) {
		bool *done = calloc(t->n_hits, sizeof(*done));

		if (!done)
			rc = CORE_ERR_NOMEM;
		for (i = 0; rc == CORE_OK && i < t->n_hits; i++)
			if (!done[i] && ch->events[t->hits[i].ev]->card_id)
				rc = consume_card(t, i, done);
		free(done);
		if (rc == CORE_OK)
			rc = consumes_place(t, n_ev);
	}
	return rc;
}

enum core_rc fs_effects_enqueue(struct fs_txn *t)
{
	enum core_rc rc = CORE_OK;
	size_t i;

	for (i = 0; rc == CORE_OK && i < t->n_hits; i++) {
		const struct core_event *e = t->ch.events[t->hits[i].ev];
		struct core_card view;
		const struct core_card *card = e->card_id ? fs_txn_peek(t, e->card_id, &view) : NULL;
		struct store_delivery *d;
		char ekey[STORE_DELIVERY_EKEY_MAX];

		store_delivery_ekey(ekey, sizeof ekey, e);
		d = store_delivery_new(t->hits[i].sub, ekey, e->board_seq, e->type, e->card_id,
				       store_delivery_body(e, card), t->now);
		rc = d ? fs_dlv_write(t, d) : CORE_ERR_NOMEM;
		store_delivery_free(d);
	}
	fs_effects_clear(t);
	return rc;
}
