/* Reads of the FS twin (cards, lists, labels, the reaper's listings; the events tail is
 * fs_events.c's) and the board config, whose one write (board_put) lives here beside its
 * reads. Readers share the rwlock and hand out deep copies. */
#include "store/fs/fs.h"
#include "store/fs/fs_cards.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_txn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- boards ---- */

static int board_name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct core_board *)a)->name, ((const struct core_board *)b)->name);
}

/* By name, as the Mongo twin lists them (by _id): the boards' order is the store's, not the
 * order they were made in, so GET /v1/boards reads the same on both twins. */
enum core_rc fs_board_list(struct store *st, struct core_board **boards, size_t *n)
{
	struct fs *fs = fs_of(st);
	struct core_board *v;
	enum core_rc rc = CORE_OK;
	uint64_t need;
	size_t i;

	pthread_rwlock_rdlock(&fs->lock);
	v = calloc(fs->n_boards ? fs->n_boards : 1, sizeof(*v));
	for (i = 0; v && rc == CORE_OK && i < fs->n_boards; i++)
		rc = core_board_copy(&v[i], &fs->boards[i]);
	need = fs_read_mark(fs, fs->boards_line);
	pthread_rwlock_unlock(&fs->lock);
	if (!v)
		rc = CORE_ERR_NOMEM;
	/* Only board lines count, and they are rare: a wait here is rare too, and made on this
	 * thread (a board read may come before its request parks, which an owed ack must not). */
	rc = fs_read_end(fs, need, true, rc);
	if (rc != CORE_OK) {
		store_boards_free(v, i);
		return rc;
	}
	qsort(v, i, sizeof(*v), board_name_cmp);
	*boards = v;
	*n = i;
	return CORE_OK;
}

enum core_rc fs_board_get(struct store *st, const char *name, struct core_board *out)
{
	struct fs *fs = fs_of(st);
	const struct core_board *b;
	enum core_rc rc = CORE_ERR_NOT_FOUND;
	uint64_t need;

	pthread_rwlock_rdlock(&fs->lock);
	b = fs_board_find(fs, name);
	if (b)
		rc = core_board_copy(out, b);
	need = fs_read_mark(fs, fs->boards_line);
	pthread_rwlock_unlock(&fs->lock);
	rc = fs_read_end(fs, need, true, rc); /* as fs_board_list */
	if (rc != CORE_OK && b)
		core_board_release(out);
	return rc;
}

/* A column the new config drops that still holds a card of board `old`; NULL if none. */
static const char *dropped_column_in_use(struct fs *fs, const struct core_board *old,
					 const struct core_board *b)
{
	size_t i, j;

	for (i = 0; i < old->n_cols; i++) {
		if (core_board_column(b, old->cols[i].name))
			continue;
		for (j = 0; j < fs->n_order; j++) {
			const struct fs_card *c = fs->order[j]->dead ? NULL : fs->order[j]->card;
			if (c && strcmp(c->board, old->name) == 0 &&
			    strcmp(c->state, old->cols[i].name) == 0)
				return old->cols[i].name;
		}
	}
	return NULL;
}

enum core_rc fs_board_put(struct store *st, const struct core_board *b,
			  const struct store_actor *actor)
{
	struct fs_txn t;
	const struct core_board *old;
	const char *busy;
	char detail[160];
	enum core_rc rc;

	rc = core_board_validate(b, detail, sizeof(detail));
	if (rc != CORE_OK)
		return rc;
	fs_txn_begin(fs_of(st), &t, actor);
	old = fs_board_find(t.fs, b->name);
	busy = old ? dropped_column_in_use(t.fs, old, b) : NULL;
	/* Dropping a column would strand its cards in a state the board no longer has: they
	 * must be moved first (the op has no detail channel; the API words the refusal). */
	if (busy)
		rc = CORE_ERR_TRANSITION_REJECTED;
	if (rc == CORE_OK)
		rc = fs_txn_board_put(&t, b);
	if (rc == CORE_OK)
		rc = fs_txn_event(&t, CORE_EV_BOARD_UPDATED, b->name, NULL, NULL,
				  json_pack("{sb}", "created", old == NULL));
	return fs_txn_end(&t, rc);
}

/* ---- cards ---- */

enum core_rc fs_card_get(struct store *st, const char *id, struct core_card **out)
{
	struct fs *fs = fs_of(st);
	const struct store_ack *ack = store_ack_current();
	const struct fs_card_ent *ent;
	const struct fs_card *c;
	enum core_rc rc = CORE_ERR_NOT_FOUND;
	uint64_t need = 0;

	pthread_rwlock_rdlock(&fs->lock);
	if (ack && ack->st == &fs->base) {
		/* This request wrote: it reads its own writes, and waits with them. */
		ent = fs_card_find(fs, id);
		c = ent ? ent->card : NULL;
		need = fs_read_mark(fs, FS_READ_ALL);
	} else {
		c = fs_card_durable(fs, id); /* never waits (fs_barrier.c) */
	}
	if (c)
		rc = (*out = fs_card_dup(c)) ? CORE_OK : CORE_ERR_NOMEM;
	pthread_rwlock_unlock(&fs->lock);
	rc = fs_read_end(fs, need, false, rc);
	if (rc != CORE_OK && c && *out) {
		core_card_free(*out);
		*out = NULL;
	}
	return rc;
}

static bool card_matches(const struct fs_card *c, const struct store_card_filter *f)
{
	if (!core_scope_allows(c->board, f->board, f->boards))
		return false;
	if (f->state && strcmp(c->state, f->state) != 0)
		return false;
	if (f->label && !core_strv_contains(&c->labels, f->label))
		return false;
	return f->claimed < 0 || fs_card_claimed(c) == (f->claimed == 1);
}

/* ---- card lists ----
 *
 * Two ways to find a page: walk every card in creation order from the cursor and keep the
 * matches until the page is full, or walk the posting list of the filter's state or label
 * (the smaller) and keep the `limit + 1` matches of lowest ordinal after the cursor. The walk
 * in creation order stops early when matches are dense: about limit x live / m cards for m
 * matches spread over `live` cards; the posting walk always reads m entries. Taking the
 * posting list when m^2 <= 4 x limit x live bounds both by O(sqrt(limit x live)). */

static void ord_heap_down(const struct fs_card_ent **h, size_t n, size_t i)
{
	const struct fs_card_ent *t;
	size_t c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && h[c + 1]->ord > h[c]->ord)
			c++;
		if (h[c]->ord <= h[i]->ord)
			return;
		t = h[c];
		h[c] = h[i];
		h[i] = t;
		i = c;
	}
}

static int cmp_ord(const void *a, const void *b)
{
	const struct fs_card_ent *x = *(const struct fs_card_ent *const *)a;
	const struct fs_card_ent *y = *(const struct fs_card_ent *const *)b;

	return (x->ord > y->ord) - (x->ord < y->ord);
}

/* The version of entry e a list shows: its last durable one when d is given (fs_barrier.c),
 * else as it stands (NULL: deleted). */
static const struct fs_card *list_view(struct fs *fs, const struct fs_durable *d,
				       const struct fs_card_ent *e)
{
	return d ? fs_ent_durable(fs, d, e) : e->dead ? NULL : e->card;
}

/* Offers e to the max-heap h of the `want` lowest ordinals (k of them so far). */
static void page_offer(const struct fs_card_ent **h, size_t *k, size_t want,
		       const struct fs_card_ent *e)
{
	size_t j;

	if (*k < want) {
		h[(*k)++] = e;
		if (*k == want)
			for (j = *k / 2; j-- > 0;)
				ord_heap_down(h, *k, j);
	} else if (e->ord < h[0]->ord) {
		h[0] = e;
		ord_heap_down(h, *k, 0);
	}
}

/* Up to `want` matches of lowest ordinal > after from posting list p, ascending, into h.
 * With d (durable versions): the entries the lines not yet durable touched (xv, xn) are
 * offered apart, as their durable versions, whether p holds them now or not. */
static size_t post_page(struct fs *fs, const struct fs_post *p, const struct store_card_filter *f,
			uint64_t after, const struct fs_card_ent **h, size_t want,
			const struct fs_durable *d, const struct fs_card_ent *const *xv, size_t xn)
{
	const struct fs_card *c;
	size_t i, k = 0;

	for (i = 0; p && i < p->n; i++) {
		const struct fs_card_ent *e = p->v[i];

		if (e->ord <= after || (k == want && e->ord >= h[0]->ord) ||
		    fs_pending_has(xv, xn, e) || !card_matches(e->card, f))
			continue;
		page_offer(h, &k, want, e); /* not touched: durable as it stands */
	}
	for (i = 0; d && i < xn; i++)
		if (xv[i]->ord > after && (c = list_view(fs, d, xv[i])) && card_matches(c, f))
			page_offer(h, &k, want, xv[i]);
	qsort(h, k, sizeof(*h), cmp_ord);
	return k;
}

enum core_rc fs_card_list(struct store *st, const struct store_card_filter *f,
			  struct core_card ***out, size_t *n, char **next)
{
	struct fs *fs = fs_of(st);
	const struct store_ack *ack = store_ack_current();
	struct core_card **v = NULL;
	uint64_t after = 0, last = 0, need = 0;
	char *end, buf[32];
	size_t i, k = 0;
	bool more = false;
	/* Lists show the cards' last durable versions (fs_barrier.c) and wait for nothing; a
	 * request that wrote reads its own writes instead, with the barrier. */
	bool durable = !(ack && ack->st == &fs->base);
	const struct fs_card_ent **xv = NULL;
	struct fs_durable d;
	size_t xn = 0;
	enum core_rc rc = CORE_OK;

	/* The cursor is the creation ordinal of the last card served: ordinals are never
	 * reused, so a page boundary survives deletes (and restarts: they are journaled). */
	if (f->after) {
		errno = 0;
		after = strtoull(f->after, &end, 10);
		if (*end || errno || f->after[0] < '0' || f->after[0] > '9')
			return CORE_ERR_BAD_REQUEST;
	}
	v = calloc(f->limit, sizeof(*v));
	if (!v)
		return CORE_ERR_NOMEM;
	pthread_rwlock_rdlock(&fs->lock);
	fs_durable_begin(fs, &d);
	if (f->state || f->label) {
		const struct fs_post *src = NULL, *p;
		bool none = false;
		size_t live = fs->n_order - fs->n_dead;

		if (f->state) {
			src = fs_post_state(fs, f->state);
			none = !src;
		}
		if (f->label) {
			p = fs_post_label(fs, f->label);
			none = none || !p;
			if (p && (!src || p->n < src->n))
				src = p;
		}
		if (none || (double)src->n * (double)src->n <= 4.0 * (double)f->limit * (double)live) {
			/* A posting list holds the cards as they are now: one that left its state
			 * (or lost its label) in a line not durable yet is offered apart. */
			bool apart = durable && d.pending;
			const struct fs_card_ent **h =
				none && !apart ? NULL : malloc((f->limit + 1) * sizeof(*h));
			size_t m = 0;

			if ((!none || apart) && !h) {
				rc = CORE_ERR_NOMEM;
				goto unlock;
			}
			if (apart && (rc = fs_pending_ents(fs, &d, &xv, &xn)) != CORE_OK) {
				free(h);
				goto unlock;
			}
			if (!none || apart)
				m = post_page(fs, none ? NULL : src, f, after, h, f->limit + 1,
					      apart ? &d : NULL, xv, xn);
			more = m > f->limit;
			for (i = 0; i < m && k < f->limit; i++) {
				v[k] = fs_card_dup(list_view(fs, durable ? &d : NULL, h[i]));
				if (!v[k]) {
					rc = CORE_ERR_NOMEM;
					break;
				}
				last = h[i]->ord;
				k++;
			}
			free(h);
			goto unlock;
		}
	}
	/* from the first card created after the cursor (none after the largest ordinal) */
	for (i = after == UINT64_MAX ? fs->n_order : fs_order_lower(fs, after + 1); i < fs->n_order;
	     i++) {
		const struct fs_card_ent *ent = fs->order[i];
		const struct fs_card *c = list_view(fs, durable ? &d : NULL, ent);

		if (!c || !card_matches(c, f))
			continue;
		if (k == f->limit) {
			more = true;
			break;
		}
		v[k] = fs_card_dup(c);
		if (!v[k]) {
			rc = CORE_ERR_NOMEM;
			break;
		}
		k++;
		last = ent->ord;
	}
unlock:
	if (!durable)
		need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	free(xv);
	rc = fs_read_end(fs, need, false, rc);
	if (rc == CORE_OK && more) {
		snprintf(buf, sizeof(buf), "%" PRIu64, last);
		*next = strdup(buf);
		if (!*next)
			rc = CORE_ERR_NOMEM;
	}
	if (rc != CORE_OK) {
		store_cards_free(v, k);
		return rc;
	}
	*out = v;
	*n = k;
	return CORE_OK;
}

enum core_rc fs_labels_count(struct store *st, const char *board, const char *const *boards,
			     json_t **out)
{
	struct fs *fs = fs_of(st);
	json_t *o = json_object();
	uint64_t need;
	size_t i, j;
	bool ok = o != NULL;
	enum core_rc rc;

	pthread_rwlock_rdlock(&fs->lock);
	for (i = 0; ok && i < fs->n_order; i++) {
		const struct fs_card *c = fs->order[i]->dead ? NULL : fs->order[i]->card;

		if (!c || !core_scope_allows(c->board, board, boards))
			continue;
		for (j = 0; ok && j < c->labels.n; j++) {
			json_t *cnt = json_object_get(o, c->labels.v[j]);
			ok = json_object_set_new(o, c->labels.v[j],
						 json_integer(cnt ? json_integer_value(cnt) + 1 : 1)) ==
			     0;
		}
	}
	need = fs_read_mark(fs, FS_READ_ALL);
	pthread_rwlock_unlock(&fs->lock);
	rc = fs_read_end(fs, need, false, ok ? CORE_OK : CORE_ERR_NOMEM);
	if (rc != CORE_OK) {
		json_decref(o);
		return rc;
	}
	*out = o;
	return CORE_OK;
}

/* Sifts hits[i] down the max-heap hits[0..n) (ordered by cmp: the root sorts last). */
static void heap_down(const struct core_card **h, size_t n, size_t i,
		      int (*cmp)(const void *, const void *))
{
	const struct core_card *t;
	size_t c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && cmp(&h[c + 1], &h[c]) > 0)
			c++;
		if (cmp(&h[c], &h[i]) <= 0)
			return;
		t = h[c];
		h[c] = h[i];
		h[i] = t;
		i = c;
	}
}

enum core_rc fs_cards_collect(struct fs *fs, bool (*want)(const struct core_card *, int64_t),
			      int64_t now, int (*cmp)(const void *, const void *), size_t batch,
			      struct core_card ***out, size_t *n)
{
	const struct core_card **hits = NULL, *c;
	struct core_card **v = NULL, *views = NULL;
	size_t i, k = 0;
	enum core_rc rc = CORE_OK;

	pthread_rwlock_rdlock(&fs->lock);
	/* The first `batch` in cmp order, without sorting every match: a max-heap of the best
	 * batch so far (O(recovery claims x log batch)) over views of the cards. */
	if (batch && fs->n_recov) {
		hits = malloc((fs->n_recov < batch ? fs->n_recov : batch) * sizeof(*hits));
		views = malloc(fs->n_recov * sizeof(*views));
		if (!hits || !views) {
			free(hits);
			hits = NULL;
			rc = CORE_ERR_NOMEM;
		}
	}
	for (i = 0; hits && i < fs->n_recov; i++) {
		c = fs_card_view(fs->recov[i]->card, &views[i]);
		if (!want(c, now))
			continue;
		if (k < batch) {
			hits[k++] = c;
			if (k == batch) {
				size_t j;

				for (j = k / 2; j-- > 0;)
					heap_down(hits, k, j, cmp);
			}
		} else if (cmp(&c, &hits[0]) < 0) {
			hits[0] = c;
			heap_down(hits, k, 0, cmp);
		}
	}
	if (k)
		qsort(hits, k, sizeof(*hits), cmp);
	v = rc == CORE_OK ? calloc(k ? k : 1, sizeof(*v)) : NULL;
	for (i = 0; v && i < k; i++)
		if (!(v[i] = fs_card_block(hits[i]))) {
			rc = CORE_ERR_NOMEM;
			break;
		}
	pthread_rwlock_unlock(&fs->lock);
	free(hits);
	free(views);
	if (!v || rc != CORE_OK) {
		store_cards_free(v, i);
		return CORE_ERR_NOMEM;
	}
	*out = v;
	*n = k;
	return CORE_OK;
}

/* Best-first walk of the claimed heap: `open` is a small min-heap of heap indices whose
 * parents were taken; the smallest is the next claim in lease order. */
static bool open_before(const struct fs *fs, size_t a, size_t b)
{
	/* claimed cards have the tail */
	const struct core_claim *x = &fs->claimed[a]->card->more->claim;
	const struct core_claim *y = &fs->claimed[b]->card->more->claim;
	int64_t kx = x->has_lease ? x->lease_until : INT64_MAX;
	int64_t ky = y->has_lease ? y->lease_until : INT64_MAX;

	if (kx != ky)
		return kx < ky;
	return strcmp(fs_ent_id(fs->claimed[a]), fs_ent_id(fs->claimed[b])) < 0;
}

static void open_push(const struct fs *fs, size_t *h, size_t *n, size_t v)
{
	size_t i = (*n)++, p;

	while (i > 0 && open_before(fs, v, h[p = (i - 1) / 2])) {
		h[i] = h[p];
		i = p;
	}
	h[i] = v;
}

static size_t open_pop(const struct fs *fs, size_t *h, size_t *n)
{
	size_t top = h[0], v = h[--*n], i = 0, c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && open_before(fs, h[c + 1], h[c]))
			c++;
		if (!open_before(fs, h[c], v))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = v;
	return top;
}

/* Whether the claim at heap index i comes at or before cursor `after` (lease_until, id). */
static bool at_or_before(const struct fs *fs, size_t i, const struct store_reaper_cursor *after)
{
	const struct core_claim *x = &fs->claimed[i]->card->more->claim;
	int64_t k = x->has_lease ? x->lease_until : INT64_MAX;

	return k < after->at || (k == after->at && strcmp(fs_ent_id(fs->claimed[i]), after->id) <= 0);
}

enum core_rc fs_claims_expired(struct fs *fs, int64_t now, size_t batch,
			       const struct store_reaper_cursor *after, struct core_card ***out,
			       size_t *n)
{
	struct core_card **v = calloc(batch ? batch : 1, sizeof(*v));
	size_t cap = batch + 2, *open = malloc(cap * sizeof(*open)), n_open = 0, k = 0, i;
	enum core_rc rc = CORE_OK;

	if (after && after->arm != 0)
		after = NULL; /* no stripped claims here: a cursor past them starts over */
	if (!v || !open) {
		free(v);
		free(open);
		return CORE_ERR_NOMEM;
	}
	pthread_rwlock_rdlock(&fs->lock);
	if (fs->n_claimed)
		open_push(fs, open, &n_open, 0);
	/* Each step takes one claim and opens at most two. Claims at or before the cursor are
	 * walked through, not taken: their children may come after it. */
	while (n_open && k < batch) {
		struct core_card view;

		i = open_pop(fs, open, &n_open);
		if (!core_claim_expired(fs_card_view(fs->claimed[i]->card, &view), now))
			break; /* the smallest left is live: so is everything under it */
		if (!after || !at_or_before(fs, i, after)) {
			v[k] = fs_card_block(&view);
			if (!v[k]) {
				rc = CORE_ERR_NOMEM;
				break;
			}
			k++;
		}
		if (n_open + 2 > cap) {
			size_t *more = realloc(open, 2 * cap * sizeof(*open));

			if (!more) {
				rc = CORE_ERR_NOMEM;
				break;
			}
			open = more;
			cap *= 2;
		}
		if (2 * i + 1 < fs->n_claimed)
			open_push(fs, open, &n_open, 2 * i + 1);
		if (2 * i + 2 < fs->n_claimed)
			open_push(fs, open, &n_open, 2 * i + 2);
	}
	pthread_rwlock_unlock(&fs->lock);
	free(open);
	if (rc != CORE_OK) {
		store_cards_free(v, k);
		return rc;
	}
	*out = v;
	*n = k;
	return CORE_OK;
}
