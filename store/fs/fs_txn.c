/* Transactions of the FS twin: private copies first, one journal line, then the swap.
 *
 * A mutation runs under the state write lock on copies of the cards and runs it touches,
 * never on the published objects. fs_txn_end appends the whole change as one record to the
 * journal's buffer, and only once that succeeded are the copies swapped in, so a refused
 * append (a failed store, no memory) leaves memory exactly as it was. The lock is then
 * dropped and the caller waits for the group write and fdatasync (fs_journal.c).
 *
 * If that write or fdatasync fails, every transaction whose line is not durable yet is rolled
 * back from its undo entry (fs_undo.c), newest first, before any of their callers is answered
 * STORE_UNAVAILABLE; the store is marked failed (writes refused, reads keep working, ping
 * reports it) until fs_recover has written the memory state as a fresh snapshot into a new
 * generation: after a failed fsync the kernel may have dropped the dirty pages, so the old
 * journal file cannot be trusted, only rewritten.
 */
#include "store/fs/fs.h"
#include "store/fs/fs_cards.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_codec.h"
#include "store/fs/fs_effect.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_journal.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_snapshot.h"
#include "store/fs/fs_txn.h"
#include "store/fs/fs_undo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fs_actor_name(const struct store_actor *actor)
{
	return actor && actor->name ? actor->name : "";
}

void fs_txn_begin(struct fs *fs, struct fs_txn *t, const struct store_actor *actor)
{
	uint64_t synced;
	bool failed;

	memset(t, 0, sizeof(*t));
	t->fs = fs;
	t->actor = fs_actor_name(actor);
	t->actor_epoch = actor ? actor->epoch : 0;
	pthread_mutex_lock(&fs->jmu);
	failed = fs->failed;
	synced = fs->synced; /* may lag by the time the lock is ours: settling less is fine */
	pthread_mutex_unlock(&fs->jmu);
	/* A failed store first tries to re-establish a known-good journal; if it cannot, this
	 * write is refused by fs_journal_append like every other. Not from a thread whose bound
	 * ack still owes lines (store_ack): recovery waits until every line of the failed epoch
	 * was told its outcome, and this thread tells its own only later (it would wait on
	 * itself); its write is refused and its ack then learns the rollback. */
	if (failed) {
		const struct store_ack *ack = store_ack_current();

		if (!ack || ack->st != &fs->base || !ack->lines)
			fs_recover(fs, false);
	}
	pthread_rwlock_wrlock(&fs->lock);
	fs_undo_settle(fs, synced);
	t->now = store_now(&fs->base);
	t->ch.ctr = fs->ctr;
}

static struct fs_change_card *txn_find(struct fs_txn *t, const char *id)
{
	size_t i;

	for (i = 0; i < t->ch.n_cards; i++)
		if (strcmp(t->ch.cards[i].id, id) == 0)
			return &t->ch.cards[i];
	return NULL;
}

const struct core_card *fs_txn_peek(struct fs_txn *t, const char *id, struct core_card *view)
{
	struct fs_change_card *cc = txn_find(t, id);
	struct fs_card_ent *ent;

	if (cc)
		return cc->card;
	ent = fs_card_find(t->fs, id);
	return ent ? fs_card_view(ent->card, view) : NULL;
}

/* Appends a change entry; takes `card` (freed on failure). */
static enum core_rc txn_push(struct fs_txn *t, const char *id, struct core_card *card,
			     uint64_t ord, bool is_new)
{
	struct fs_change *ch = &t->ch;
	struct fs_change_card *nc;
	char *idc = strdup(id);

	if (idc && ch->n_cards == ch->cap_cards) {
		nc = realloc(ch->cards, (ch->cap_cards ? ch->cap_cards * 2 : 4) * sizeof(*nc));
		if (!nc) {
			free(idc);
			idc = NULL;
		} else {
			ch->cards = nc;
			ch->cap_cards = ch->cap_cards ? ch->cap_cards * 2 : 4;
		}
	}
	if (!idc) {
		core_card_free(card);
		return CORE_ERR_NOMEM;
	}
	ch->cards[ch->n_cards++] =
		(struct fs_change_card){.id = idc, .card = card, .ord = ord, .is_new = is_new};
	return CORE_OK;
}

/* fs_txn_card and fs_txn_card_fixed: `block` copies in one allocation (read-only strings). */
static enum core_rc txn_card(struct fs_txn *t, const char *id, struct core_card **out,
			     bool block)
{
	struct fs_change_card *cc = txn_find(t, id);
	struct fs_card_ent *ent;
	struct core_card *copy, view;
	enum core_rc rc;

	*out = NULL;
	if (cc) {
		if (cc->card && cc->card->one_block && !block) {
			/* Taken fixed, now to be changed (an effect of the same step): an ordinary
			 * copy replaces it. An answer that holds the block keeps it, and is made
			 * again at the end if the step changed the card (txn_answers_refresh). */
			copy = core_card_dup(cc->card);
			if (!copy)
				return CORE_ERR_NOMEM;
			if (!cc->kept)
				core_card_free(cc->card);
			t->refresh |= cc->kept;
			cc->card = copy;
			cc->kept = false;
		}
		*out = cc->card;
		return cc->card ? CORE_OK : CORE_ERR_NOT_FOUND;
	}
	ent = fs_card_find(t->fs, id);
	if (!ent)
		return CORE_ERR_NOT_FOUND;
	fs_card_view(ent->card, &view);
	copy = block ? fs_card_block(&view) : core_card_dup(&view);
	if (!copy)
		return CORE_ERR_NOMEM;
	rc = txn_push(t, id, copy, ent->ord, false);
	if (rc == CORE_OK)
		*out = copy;
	return rc;
}

enum core_rc fs_txn_card(struct fs_txn *t, const char *id, struct core_card **out)
{
	return txn_card(t, id, out, false);
}

enum core_rc fs_txn_card_fixed(struct fs_txn *t, const char *id, struct core_card **out)
{
	return txn_card(t, id, out, true);
}

void fs_txn_reserve(struct fs_txn *t, size_t cards, size_t events)
{
	struct fs_change *ch = &t->ch;
	struct fs_change_card *nc;

	if (cards > ch->cap_cards && (nc = realloc(ch->cards, cards * sizeof(*nc)))) {
		ch->cards = nc;
		ch->cap_cards = cards;
	}
	(void)fs_ptrs_reserve(&ch->events, &ch->cap_events, events);
}

enum core_rc fs_txn_card_add(struct fs_txn *t, struct core_card *c)
{
	return txn_push(t, c->id, c, ++t->ch.ctr.ord, true);
}

enum core_rc fs_txn_card_delete(struct fs_txn *t, const char *id)
{
	struct fs_change_card *cc = txn_find(t, id);
	struct fs_card_ent *ent;

	int64_t floor = fs_floor_get(t->fs, id);
	enum core_rc rc;

	/* The id keeps its highest epoch: a card re-created under it starts above (§11). */
	if (cc) {
		if (cc->card && cc->card->has_epoch && cc->card->claim_epoch > floor)
			floor = cc->card->claim_epoch;
		if (!cc->kept) /* else an answer holds it, as it stood before the delete */
			core_card_free(cc->card);
		cc->card = NULL;
		cc->kept = false;
		cc->floor = floor;
		return CORE_OK;
	}
	ent = fs_card_find(t->fs, id);
	if (!ent)
		return CORE_ERR_NOT_FOUND;
	if (ent->card->has_epoch && fs_card_more_of(ent->card)->claim_epoch > floor)
		floor = fs_card_more_of(ent->card)->claim_epoch;
	rc = txn_push(t, id, NULL, ent->ord, false);
	if (rc == CORE_OK)
		t->ch.cards[t->ch.n_cards - 1].floor = floor;
	return rc;
}

const struct core_run *fs_txn_run_peek(struct fs_txn *t, const char *id)
{
	size_t i;

	for (i = 0; i < t->ch.n_runs; i++)
		if (strcmp(t->ch.runs[i]->id, id) == 0)
			return t->ch.runs[i];
	return fs_map_get(&t->fs->runs, id);
}

enum core_rc fs_txn_run_put(struct fs_txn *t, struct core_run *r)
{
	struct fs_change *ch = &t->ch;
	size_t i;

	for (i = 0; i < ch->n_runs; i++) {
		if (strcmp(ch->runs[i]->id, r->id) == 0) {
			core_run_free(ch->runs[i]);
			ch->runs[i] = r;
			return CORE_OK;
		}
	}
	if (fs_ptrs_reserve(&ch->runs, &ch->cap_runs, ch->n_runs + 1) != CORE_OK) {
		core_run_free(r);
		return CORE_ERR_NOMEM;
	}
	ch->runs[ch->n_runs++] = r;
	return CORE_OK;
}

enum core_rc fs_txn_board_put(struct fs_txn *t, const struct core_board *b)
{
	struct fs_change *ch = &t->ch;
	struct core_board *nb = realloc(ch->boards, (ch->n_boards + 1) * sizeof(*nb));

	if (!nb)
		return CORE_ERR_NOMEM;
	ch->boards = nb;
	if (core_board_copy(&ch->boards[ch->n_boards], b) != CORE_OK)
		return CORE_ERR_NOMEM;
	ch->n_boards++;
	return CORE_OK;
}

/* Appends the event; takes `text` (its payload), also on failure. */
static enum core_rc event_push(struct fs_txn *t, enum core_event_type type, const char *board,
			       const char *card_id, const char *reason, char *text)
{
	struct fs_change *ch = &t->ch;
	struct core_event *e = core_zalloc(sizeof(*e));
	enum core_rc rc = CORE_ERR_NOMEM;

	if (!e || !text)
		goto out;
	rc = core_event_init(e, type, board, card_id, t->actor, reason, t->now, text);
	text = NULL; /* taken over by core_event_init, also on failure */
	if (rc != CORE_OK)
		goto out;
	rc = fs_ptrs_reserve(&ch->events, &ch->cap_events, ch->n_events + 1);
	if (rc != CORE_OK)
		goto out;
	ch->events[ch->n_events++] = e;
	e = NULL;
	rc = CORE_OK;
out:
	if (e) {
		core_event_release(e);
		free(e);
	}
	free(text);
	return rc;
}

enum core_rc fs_txn_event(struct fs_txn *t, enum core_event_type type, const char *board,
			  const char *card_id, const char *reason, json_t *payload)
{
	char *text = NULL;
	size_t tlen;

	/* an agent token's events name the claim it acted under (DESIGN §13) */
	if (t->actor_epoch && !core_is_machine_reason(reason)) {
		if (!payload)
			payload = json_object();
		if (!payload || json_object_set_new(payload, "actor_epoch",
						    json_integer(t->actor_epoch)) != 0) {
			json_decref(payload);
			return CORE_ERR_NOMEM;
		}
	}
	text = payload ? store_json_text(payload, &tlen) : strdup("{}");
	json_decref(payload);
	return event_push(t, type, board, card_id, reason, text);
}

enum core_rc fs_txn_event_text(struct fs_txn *t, enum core_event_type type, const char *board,
			       const char *card_id, const char *reason, char *text)
{
	if (!text)
		text = strdup("{}");
	/* What fs_txn_event's json_object_set_new appends: the payloads written as text never
	 * hold actor_epoch themselves. */
	if (text && t->actor_epoch && !core_is_machine_reason(reason)) {
		size_t n = strlen(text);
		char *wide = malloc(n + 48);

		if (wide && n >= 2 && text[n - 1] == '}') {
			memcpy(wide, text, n - 1);
			snprintf(wide + n - 1, 48, "%s\"actor_epoch\":%lld}", n == 2 ? "" : ",",
				 (long long)t->actor_epoch);
		} else {
			free(wide);
			wide = NULL;
		}
		free(text);
		text = wide;
	}
	return event_push(t, type, board, card_id, reason, text);
}

/* The change entry whose copy is c itself, or NULL (c is a view, or not this txn's). */
static struct fs_change_card *txn_copy_of(struct fs_txn *t, const struct core_card *c)
{
	size_t i;

	for (i = 0; c && i < t->ch.n_cards; i++)
		if (t->ch.cards[i].card == c)
			return &t->ch.cards[i];
	return NULL;
}

enum core_rc fs_txn_answer(struct fs_txn *t, const struct core_card *c, struct core_card **out)
{
	struct fs_change_card *cc = txn_copy_of(t, c);
	enum core_rc rc = CORE_OK;

	/* The transaction's own copy is handed out as the answer (a deep copy per write was
	 * ~1.5 % of the server's CPU): it is the card as the step leaves it, which is what the
	 * answer must say (txn_answers_refresh sees it equal). A second answer of the same card
	 * gets a copy. */
	if (cc && !cc->kept) {
		cc->kept = true;
		*out = cc->card;
	} else {
		rc = fs_card_out(c, out);
	}

	if (rc == CORE_OK && t->n_answers < sizeof t->answers / sizeof t->answers[0]) {
		t->answers[t->n_answers].id = c->id;
		t->answers[t->n_answers++].out = out;
	}
	return rc;
}

/* After the effects: an answer whose card a one-shot changed gets the card as the step
 * leaves it. */
static enum core_rc txn_answers_refresh(struct fs_txn *t)
{
	size_t i;

	for (i = 0; i < t->n_answers; i++) {
		struct core_card view;
		const struct core_card *now = fs_txn_peek(t, t->answers[i].id, &view);
		struct core_card **out = t->answers[i].out;

		if (!now || !*out || core_card_equal(now, *out))
			continue;
		core_card_free(*out);
		*out = fs_card_block(now);
		if (!*out)
			return CORE_ERR_NOMEM;
	}
	return CORE_OK;
}

enum core_rc fs_txn_kv(struct fs_txn *t, const char *key, const char *val, int64_t due)
{
	struct fs_change *ch = &t->ch;
	char *k = strdup(key), *v = val ? strdup(val) : NULL;
	size_t i;

	if (!k || (val && !v))
		goto oom;
	for (i = 0; i < ch->n_kvs; i++) {
		if (strcmp(ch->kvs[i].key, key) == 0) {
			free(k);
			free(ch->kvs[i].val);
			ch->kvs[i].val = v;
			ch->kvs[i].due = due;
			return CORE_OK;
		}
	}
	if (ch->n_kvs == ch->cap_kvs) {
		size_t cap = ch->cap_kvs ? ch->cap_kvs * 2 : 4;
		struct fs_kv *nk = realloc(ch->kvs, cap * sizeof(*nk));

		if (!nk)
			goto oom;
		ch->kvs = nk;
		ch->cap_kvs = cap;
	}
	ch->kvs[ch->n_kvs++] = (struct fs_kv){.key = k, .val = v, .due = due};
	return CORE_OK;
oom:
	free(k);
	free(v);
	return CORE_ERR_NOMEM;
}

const char *fs_txn_kv_peek(struct fs_txn *t, const char *key)
{
	const struct fs_kv *kv;
	size_t i;

	for (i = 0; i < t->ch.n_kvs; i++)
		if (strcmp(t->ch.kvs[i].key, key) == 0)
			return t->ch.kvs[i].val;
	kv = fs_map_get(fs_kv_map(t->fs, key), key);
	return kv ? kv->val : NULL;
}

struct dep_hit {
	const char *id;
	uint64_t ord;
};

static int cmp_hit(const void *a, const void *b)
{
	const struct dep_hit *x = a, *y = b;

	return (x->ord > y->ord) - (x->ord < y->ord);
}

static bool hits_have(const struct dep_hit *h, size_t n, const char *id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(h[i].id, id) == 0)
			return true;
	return false;
}

enum core_rc fs_txn_dependents(struct fs_txn *t, const char *blocker, const char ***ids,
			       size_t *n)
{
	const struct fs_post *d = fs_deps_find(t->fs, blocker);
	const struct fs_change *ch = &t->ch;
	struct dep_hit *h;
	const char **v;
	size_t i, k = 0, cap = (d ? d->n : 0) + 1;

	*ids = NULL;
	*n = 0;
	/* Only copies naming the blocker can join (the test below): counted first, so a batch
	 * of dozens of copies does not ask for an array its size per filed card. */
	for (i = 0; i < ch->n_cards; i++)
		cap += ch->cards[i].card &&
		       core_strv_contains(&ch->cards[i].card->blockers, blocker);
	h = calloc(cap, sizeof(*h));
	v = calloc(cap, sizeof(*v));
	if (!h || !v) {
		free(h);
		free(v);
		return CORE_ERR_NOMEM;
	}
	/* The published edges, then this transaction's copies (which may have gained or lost
	 * the blocker); each candidate is judged by what the transaction sees. */
	for (i = 0; d && i < d->n; i++)
		h[k++] = (struct dep_hit){fs_ent_id(d->v[i]), d->v[i]->ord};
	for (i = 0; i < ch->n_cards; i++)
		/* A copy that does not name the blocker is dropped below anyway: the cheap test
		 * first (a reaper batch holds dozens of copies, almost none with blockers). */
		if (ch->cards[i].card &&
		    core_strv_contains(&ch->cards[i].card->blockers, blocker) &&
		    !hits_have(h, d ? d->n : 0, ch->cards[i].id))
			h[k++] = (struct dep_hit){ch->cards[i].id, ch->cards[i].ord};
	qsort(h, k, sizeof(*h), cmp_hit);
	for (i = 0; i < k; i++) {
		struct core_card view;
		const struct core_card *c = fs_txn_peek(t, h[i].id, &view);

		if (c && core_strv_contains(&c->blockers, blocker))
			v[(*n)++] = h[i].id;
	}
	free(h);
	*ids = v;
	return CORE_OK;
}

static const char *lookup_state(void *ctx, const char *id, const struct core_strv **blockers)
{
	struct fs_txn *t = ctx;
	struct fs_change_card *cc = txn_find(t, id);
	const struct fs_card_ent *ent;

	/* What it returns must outlive the call: the copy's fields, or the published card's
	 * (never a view's). */
	if (cc) {
		if (blockers)
			*blockers = cc->card ? &cc->card->blockers : NULL;
		return cc->card ? cc->card->state : NULL;
	}
	ent = fs_card_find(t->fs, id);
	if (blockers)
		*blockers = ent ? &fs_card_more_of(ent->card)->blockers : NULL;
	return ent ? ent->card->state : NULL;
}

struct core_card_lookup fs_txn_lookup(struct fs_txn *t)
{
	return (struct core_card_lookup){.state_of = lookup_state, .ctx = t};
}

/* Whether copy cc still differs from what is published, and in what: sets cc->claim_only
 * (the claim fields and updated_at alone: a renew journals those, not the card). One walk of
 * the fields decides both. */
static bool txn_judge(struct fs_txn *t, struct fs_change_card *cc)
{
	const struct fs_card_ent *ent = cc->is_new || !cc->card ? NULL : fs_card_find(t->fs, cc->id);
	const struct core_card *pub;
	struct core_card view;

	cc->claim_only = false;
	if (!ent)
		return true;
	pub = fs_card_view(ent->card, &view);
	if (!core_card_equal_except_claim(pub, cc->card))
		return true;
	cc->claim_only = true;
	return !core_card_equal_claim(pub, cc->card);
}

/* Drops copies identical to what is published (a no-op write is not journaled), and judges
 * the others (txn_judge). */
static void txn_drop_unchanged(struct fs_txn *t)
{
	struct fs_change *ch = &t->ch;
	size_t i, out = 0;

	for (i = 0; i < ch->n_cards; i++) {
		struct fs_change_card *cc = &ch->cards[i];

		if (!txn_judge(t, cc)) {
			free(cc->id);
			if (!cc->kept)
				core_card_free(cc->card);
			continue;
		}
		ch->cards[out++] = *cc;
	}
	ch->n_cards = out;
}

/* Judged again once the step is whole, if an effect ran: a matched subscription may have
 * consumed labels of a claimed card, or added copies. */
static void txn_judge_again(struct fs_txn *t)
{
	size_t i;

	for (i = 0; i < t->ch.n_cards; i++)
		(void)txn_judge(t, &t->ch.cards[i]);
}

/* fs->enc's room kept from one commit to the next, at most (the claim cycle's are ~0.5 KiB;
 * the journal takes a record over 4 KiB whole anyway). */
#define FS_ENC_KEEP (16u * 1024)

enum core_rc fs_txn_end(struct fs_txn *t, enum core_rc rc)
{
	struct fs *fs = t->fs;
	struct fs_change *ch = &t->ch;
	struct fs_undo *undo = NULL;
	uint64_t seq = 0, need = 0;
	int64_t last_event = 0;
	bool compact = false;
	enum core_rc rc2;
	char *line = NULL;
	size_t len = 0, i;

	if (rc == CORE_OK)
		txn_drop_unchanged(t);
	if (rc != CORE_OK ||
	    (!ch->n_cards && !ch->n_runs && !ch->n_boards && !ch->n_events && !ch->n_kvs))
		goto unlock;
	/* A bound idempotency key rides in the first line its request writes (§18). */
	rc = fs_idem_attach(t);
	/* The effects ride in the same line as the events that fired them (DESIGN §14). */
	if (rc == CORE_OK)
		rc = fs_effects_match(t);
	if (rc == CORE_OK && (t->n_hits || t->refresh))
		rc = txn_answers_refresh(t);
	if (rc == CORE_OK && t->n_hits)
		txn_judge_again(t);
	if (rc != CORE_OK)
		goto unlock;
	/* Seqs are handed out here, under the lock, so they follow journal order. */
	for (i = 0; i < ch->n_events; i++)
		ch->events[i]->seq = ++ch->ctr.seq;
	last_event = ch->n_events ? ch->ctr.seq : 0;
	rc = fs_evboard_assign(fs, ch->events, ch->n_events);
	if (rc == CORE_OK)
		rc = fs_effects_enqueue(t);
	if (rc != CORE_OK)
		goto unlock;
	line = fs_change_encode_in(ch, &fs->enc, &fs->enc_cap, &len);
	rc = line ? fs_change_reserve(fs, ch) : CORE_ERR_NOMEM;
	if (rc == CORE_OK) {
		undo = fs_undo_new(ch, &fs->ctr);
		if (!undo || fs_ptrs_reserve(&fs->undo, &fs->undo_cap, fs->undo_n + 1) != CORE_OK)
			rc = CORE_ERR_NOMEM;
	}
	if (rc == CORE_OK) {
		rc = fs_journal_append(fs, &line, len, &seq);
		if (!line) { /* taken whole (a big record, or a full buffer): no longer ours */
			fs->enc = NULL;
			fs->enc_cap = 0;
		}
	}
	if (rc == CORE_OK) {
		/* Undoable until the line is durable: a failed sync rolls it back. */
		undo->seq = seq;
		fs->undo[fs->undo_n++] = undo;
		fs_change_apply(fs, ch, undo);
		for (i = 0; i < undo->n_cards; i++)
			undo->cards[i].ent->line = (uint32_t)seq; /* fs_card_durable's hint */
		undo = NULL;
		compact = fs->jbytes > fs->compact_bytes;
		if (ch->n_boards)
			fs->boards_line = seq;
	}
unlock:
	fs_effects_clear(t); /* what a failed step left matched */
	fs_undo_free(fs, undo);
	/* No line of its own (refused, or nothing changed): its answer came from the state as
	 * read, which may hold lines not durable yet. A line of its own comes after them all. */
	if (!seq)
		need = fs_read_mark(fs, FS_READ_ALL);
	if (fs->enc_cap > FS_ENC_KEEP) { /* a big record's room is not kept */
		free(fs->enc);
		fs->enc = NULL;
		fs->enc_cap = 0;
	}
	pthread_rwlock_unlock(&fs->lock);
	fs_change_release(ch);
	if (need && (rc2 = fs_read_settle(fs, need, t->settle_here)) != CORE_OK)
		rc = rc2;
	if (seq) {
		struct store_ack *ack = store_ack_current();

		if (ack && (!ack->st || ack->st == &fs->base)) {
			/* The caller waits later, through fs_ack_submit. */
			ack->st = &fs->base;
			ack->seq = seq;
			ack->lines++;
			if (last_event)
				ack->last_event = last_event;
			ack->compact |= compact;
			return CORE_OK;
		}
		rc = fs_journal_wait(fs, seq);
		if (rc == CORE_OK && last_event)
			fs_events_publish(fs, last_event);
		if (compact)
			fs_compactor_poke(fs);
	}
	return rc;
}
