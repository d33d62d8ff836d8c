/* Ordinary card mutations of the FS twin (DESIGN §2, §4, §7): create, patch, delete,
 * SetStateFrom, Reopen, labels, comments, and the state move + unblocked cascade they share.
 * Every rule is core's; this file sequences them inside one transaction. Ordinary writes never
 * touch the claim fields. */
#include "store/fs/fs.h"
#include "store/fs/fs_cards.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_txn.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum core_rc fs_card_out(const struct core_card *c, struct core_card **out)
{
	*out = fs_card_block(c);
	return *out ? CORE_OK : CORE_ERR_NOMEM;
}

/* The board a stored card lives on; a card whose board vanished is an internal error. */
static enum core_rc card_board(struct fs_txn *t, const struct core_card *c,
			       const struct core_board **b)
{
	*b = fs_board_find(t->fs, c->board);
	return *b ? CORE_OK : CORE_ERR_INTERNAL;
}

/* Each waiting dependent of `blocker` whose blockers are now all done moves to the first
 * eligible column (reason "unblocked", which is not machine: its triggers fire). Walks the
 * reverse index, so a completion costs O(its dependents), not O(cards). */
static enum core_rc cascade_unblocked(struct fs_txn *t, const struct core_board *b,
				      const char *blocker)
{
	struct core_card_lookup lk = fs_txn_lookup(t);
	const char *to = core_board_first_eligible(b);
	const char **ids = NULL;
	struct core_card *dep;
	enum core_rc rc;
	size_t i, n = 0;

	if (!to || !b->waiting)
		return CORE_OK;
	rc = fs_txn_dependents(t, blocker, &ids, &n);
	for (i = 0; rc == CORE_OK && i < n; i++) {
		struct core_card view;
		const struct core_card *c = fs_txn_peek(t, ids[i], &view);
		char *from;

		if (!c || strcmp(c->board, b->name) != 0 || strcmp(c->state, b->waiting) != 0 ||
		    !core_blockers_all_done(b, &c->blockers, &lk))
			continue;
		rc = fs_txn_card(t, ids[i], &dep);
		if (rc != CORE_OK)
			break;
		from = strdup(dep->state);
		if (!from) {
			rc = CORE_ERR_NOMEM;
			break;
		}
		rc = core_card_state_write(dep, to, "unblocked", t->now);
		if (rc == CORE_OK)
			rc = fs_txn_event(t, CORE_EV_CARD_UNBLOCKED, dep->board, dep->id, "unblocked",
					  json_pack("{ssssss}", "from", from, "to", to, "blocker",
						    blocker));
		free(from);
	}
	free(ids);
	return rc;
}

enum core_rc fs_state_move_only(struct fs_txn *t, struct core_card *c, const char *to,
				const char *reason, json_t *extra, bool *moved)
{
	json_t *payload = NULL;
	char *from = NULL, *text = NULL;
	const struct core_board *b;
	enum core_rc rc = CORE_OK;

	*moved = false;
	if (strcmp(c->state, to) == 0)
		goto out;
	rc = CORE_ERR_NOMEM;
	from = strdup(c->state);
	if (!from)
		goto out;
	if (extra) { /* the rare moves with more to say: through the tree */
		payload = json_pack("{ssss}", "from", from, "to", to);
		if (!payload || json_object_update(payload, extra) != 0)
			goto out;
	} else { /* the same bytes, written as text */
		const struct store_json_member m[] = {
			{"from", STORE_JSON_STR, from, 0},
			{"to", STORE_JSON_STR, to, 0},
		};
		size_t len;

		if (!(text = store_json_members_text(m, 2, &len)))
			goto out;
	}
	rc = core_card_state_write(c, to, reason, t->now);
	if (rc != CORE_OK)
		goto out;
	/* DESIGN §17: a completion, by any path, starts the attempts afresh. */
	if ((b = fs_board_find(t->fs, c->board)) && b->completed && strcmp(to, b->completed) == 0)
		core_attempts_reset(c);
	if (text)
		rc = fs_txn_event_text(t, CORE_EV_CARD_STATE_CHANGED, c->board, c->id, reason,
				       text);
	else
		rc = fs_txn_event(t, CORE_EV_CARD_STATE_CHANGED, c->board, c->id, reason,
				  payload);
	payload = NULL;
	text = NULL;
	*moved = rc == CORE_OK;
out:
	json_decref(extra);
	json_decref(payload);
	free(text);
	free(from);
	return rc;
}

enum core_rc fs_state_cascade(struct fs_txn *t, const struct core_board *b,
			      const struct core_card *c, const char *to, const char *reason)
{
	/* A machine write files without effects: no dependent promotion (DESIGN §7). */
	if (b->completed && strcmp(to, b->completed) == 0 && !core_is_machine_reason(reason))
		return cascade_unblocked(t, b, c->id);
	return CORE_OK;
}

enum core_rc fs_state_move(struct fs_txn *t, struct core_card *c, const struct core_board *b,
			   const char *to, const char *reason, json_t *extra)
{
	bool moved;
	enum core_rc rc = fs_state_move_only(t, c, to, reason, extra, &moved);

	if (rc == CORE_OK && moved)
		rc = fs_state_cascade(t, b, c, to, reason);
	return rc;
}

/* Dedups `in` into *out and checks it for card `self` on board: valid, known, same board, not
 * self, no cycle (core_blockers_check). */
static enum core_rc blockers_prepare(struct fs_txn *t, const char *self, const char *board,
				     const struct core_strv *in, struct core_strv *out)
{
	struct core_card_lookup lk = fs_txn_lookup(t);
	struct core_card view;
	const struct core_card *bc;
	enum core_rc rc;
	size_t i;

	rc = core_strv_copy(out, in);
	if (rc != CORE_OK)
		return rc;
	core_strv_dedup(out);
	rc = core_blockers_check(self, out, &lk, NULL, 0);
	for (i = 0; rc == CORE_OK && i < out->n; i++) {
		bc = fs_txn_peek(t, out->v[i], &view);
		if (!bc || strcmp(bc->board, board) != 0)
			rc = CORE_ERR_TRANSITION_REJECTED;
	}
	if (rc != CORE_OK)
		core_strv_release(out);
	return rc;
}

/* A fresh card id: time-ordered stamp + counter, e.g. c-0193a1b2c3d-42. */
static void card_id_new(struct fs_txn *t, char *buf, size_t len)
{
	struct core_card view;

	do {
		snprintf(buf, len, "c-%011" PRIx64 "-%" PRIu64, (uint64_t)t->now, ++t->ch.ctr.card);
	} while (fs_txn_peek(t, buf, &view));
}

enum core_rc fs_card_create(struct store *st, const struct store_card_create *in,
			    const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL, view;
	const struct core_board *b;
	struct core_card_lookup lk;
	char idbuf[CORE_ID_MAX + 1];
	const char *state;
	bool changed;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	lk = fs_txn_lookup(&t);
	b = fs_board_find(t.fs, in->board ? in->board : "default");
	rc = CORE_ERR_NOT_FOUND;
	if (!b)
		goto out;
	state = in->state ? in->state : b->cols[0].name;
	rc = CORE_ERR_TRANSITION_REJECTED;
	if (!core_board_column(b, state))
		goto out;
	rc = CORE_ERR_ALREADY_EXISTS;
	if (in->id && fs_txn_peek(&t, in->id, &view))
		goto out;
	if (!in->id)
		card_id_new(&t, idbuf, sizeof(idbuf));
	rc = CORE_ERR_NOMEM;
	c = core_card_new();
	if (!c || core_str_set(&c->id, in->id ? in->id : idbuf) ||
	    core_str_set(&c->board, b->name) || core_str_set(&c->title, in->title ? in->title : "") ||
	    core_str_set(&c->body, in->body ? in->body : ""))
		goto out;
	if (in->labels && (rc = core_labels_set(c, in->labels, &changed)) != CORE_OK)
		goto out;
	if (in->blockers &&
	    (rc = blockers_prepare(&t, c->id, b->name, in->blockers, &c->blockers)) != CORE_OK)
		goto out;
	/* Blocked from birth: the card waits whatever column was asked for. */
	if (!core_blockers_all_done(b, &c->blockers, &lk))
		state = b->waiting;
	rc = store_card_fits(st, c, NULL, 0);
	if (rc != CORE_OK)
		goto out;
	c->has_epoch = true;
	c->priority = in->priority;
	/* DESIGN §17: 0, no schedule; a time before 1970 is none either (as mongo_cards.c) */
	c->not_before = in->not_before > 0 ? in->not_before : 0;
	/* An id deleted before starts above every epoch it had: no old token works again. */
	c->claim_epoch = fs_floor_get(t.fs, c->id);
	c->created_at = t.now;
	rc = core_card_state_write(c, state, NULL, t.now);
	if (rc != CORE_OK)
		goto out;
	rc = fs_txn_card_add(&t, c);
	c = NULL;
	if (rc == CORE_OK)
		rc = fs_txn_event(&t, CORE_EV_CARD_CREATED, b->name, in->id ? in->id : idbuf, NULL,
				  json_pack("{ss}", "state", state));
	if (rc == CORE_OK)
		rc = fs_txn_answer(&t, fs_txn_peek(&t, in->id ? in->id : idbuf, &view), out);
out:
	core_card_free(c);
	rc = fs_txn_end(&t, rc);
	if (rc != CORE_OK && *out) {
		core_card_free(*out);
		*out = NULL;
	}
	return rc;
}

/* After a blockers change: an unclaimed working card with open blockers waits; a waiting card
 * whose blockers are all done is released to the first eligible column. */
static enum core_rc blockers_reposition(struct fs_txn *t, struct core_card *c,
					const struct core_board *b)
{
	struct core_card_lookup lk = fs_txn_lookup(t);
	bool done = core_blockers_all_done(b, &c->blockers, &lk);
	bool waiting = b->waiting && strcmp(c->state, b->waiting) == 0;
	const char *eligible = core_board_first_eligible(b);

	if (!done && !waiting && !c->claim.present && core_board_is_working(b, c->state))
		return fs_state_move(t, c, b, b->waiting, "blocked", NULL);
	if (done && waiting && eligible)
		return fs_state_move(t, c, b, eligible, "unblocked", NULL);
	return CORE_OK;
}

enum core_rc fs_card_patch(struct store *st, const char *id, const struct store_card_patch *p,
			   const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b = NULL;
	struct core_strv bl = {0};
	json_t *fields = json_array();
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	rc = fields ? fs_txn_card(&t, id, &c) : CORE_ERR_NOMEM;
	if (rc == CORE_OK)
		rc = card_board(&t, c, &b);
	if (rc == CORE_OK && p->blockers)
		rc = blockers_prepare(&t, c->id, c->board, p->blockers, &bl);
	if (rc != CORE_OK)
		goto out;
	rc = CORE_ERR_NOMEM;
	if (p->title && (core_str_set(&c->title, p->title) ||
			 json_array_append_new(fields, json_string("title"))))
		goto out;
	if (p->body && (core_str_set(&c->body, p->body) ||
			json_array_append_new(fields, json_string("body"))))
		goto out;
	if (p->has_priority) {
		c->priority = p->priority;
		if (json_array_append_new(fields, json_string("priority")))
			goto out;
	}
	/* DESIGN §17: a schedule set, moved or cleared (0); a card_updated event says so, which
	 * wakes a claim-next waiting on the board. */
	if (p->has_not_before) {
		c->not_before = p->not_before > 0 ? p->not_before : 0;
		if (json_array_append_new(fields, json_string("not_before")))
			goto out;
	}
	if (p->blockers) {
		core_strv_release(&c->blockers);
		c->blockers = bl;
		bl = (struct core_strv){0};
		if (json_array_append_new(fields, json_string("blockers")))
			goto out;
	}
	rc = CORE_OK;
	if (json_array_size(fields) == 0)
		goto done;
	rc = store_card_fits(st, c, NULL, 0);
	if (rc != CORE_OK)
		goto out;
	c->updated_at = t.now;
	rc = fs_txn_event(&t, CORE_EV_CARD_UPDATED, c->board, c->id, NULL,
			  json_pack("{sO}", "fields", fields));
	if (rc == CORE_OK && p->blockers)
		rc = blockers_reposition(&t, c, b);
done:
	if (rc == CORE_OK)
		rc = fs_txn_answer(&t, c, out);
out:
	core_strv_release(&bl);
	json_decref(fields);
	rc = fs_txn_end(&t, rc);
	if (rc != CORE_OK && *out) {
		core_card_free(*out);
		*out = NULL;
	}
	return rc;
}

enum core_rc fs_card_delete(struct store *st, const char *id, const struct store_actor *actor)
{
	struct fs_txn t;
	struct core_card view;
	const struct core_card *c;
	char *board = NULL;
	enum core_rc rc = CORE_ERR_NOT_FOUND;

	const char **deps = NULL;
	size_t n_deps = 0;

	fs_txn_begin(fs_of(st), &t, actor);
	c = fs_txn_peek(&t, id, &view);
	if (!c)
		goto out;
	/* A blocker that vanished would strand its dependents in waiting_deps (§11). */
	rc = fs_txn_dependents(&t, id, &deps, &n_deps);
	free(deps);
	if (rc == CORE_OK && n_deps)
		rc = CORE_ERR_DEPENDENTS_OUTSTANDING;
	if (rc == CORE_OK)
		rc = core_str_set(&board, c->board);
	if (rc == CORE_OK)
		rc = fs_txn_card_delete(&t, id);
	if (rc == CORE_OK)
		rc = fs_txn_event(&t, CORE_EV_CARD_DELETED, board, id, NULL, NULL);
out:
	free(board);
	return fs_txn_end(&t, rc);
}

enum core_rc fs_comment_write(struct fs_txn *t, struct core_card *c, const char *body)
{
	enum core_rc rc = core_comment_append(c, t->actor, body, t->now);

	if (rc == CORE_OK)
		rc = store_card_fits(&t->fs->base, c, NULL, 0);
	if (rc == CORE_OK)
		rc = fs_txn_event(t, CORE_EV_CARD_COMMENT_ADDED, c->board, c->id, NULL,
				  json_pack("{ss}", "comment_id", c->comments[c->n_comments - 1].id));
	return rc;
}

/* Ends a card transaction that produced `c` (the txn's copy): *out gets a copy on success. */
static enum core_rc end_with_card(struct fs_txn *t, enum core_rc rc, struct core_card *c,
				  struct core_card **out)
{
	if (rc == CORE_OK)
		rc = fs_txn_answer(t, c, out);
	rc = fs_txn_end(t, rc);
	if (rc != CORE_OK && *out) {
		core_card_free(*out);
		*out = NULL;
	}
	return rc;
}

enum core_rc fs_card_set_state_from(struct store *st, const char *id, const char *from,
				    const char *to, const char *reason,
				    const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	rc = fs_txn_card(&t, id, &c);
	if (rc == CORE_OK)
		rc = card_board(&t, c, &b);
	if (rc == CORE_OK)
		rc = core_state_from_check(c, from);
	if (rc == CORE_OK)
		rc = core_transition_check(b, c->state, to, store_actor_mover(actor));
	if (rc == CORE_OK)
		rc = fs_state_move(&t, c, b, to, reason, NULL);
	return end_with_card(&t, rc, c, out);
}

/* Cards listing `id` as a blocker that already left the waiting column (Reopen's guard), from
 * the reverse index. */
static enum core_rc dependents_outside_waiting(struct fs_txn *t, const struct core_board *b,
					       const char *id, size_t *out)
{
	const char **ids = NULL;
	size_t i, n = 0;
	enum core_rc rc = fs_txn_dependents(t, id, &ids, &n);

	*out = 0;
	for (i = 0; rc == CORE_OK && i < n; i++) {
		struct core_card view;
		const struct core_card *c = fs_txn_peek(t, ids[i], &view);

		if (!b->waiting || strcmp(c->state, b->waiting) != 0)
			(*out)++;
	}
	free(ids);
	return rc;
}

enum core_rc fs_card_reopen(struct store *st, const char *id, const char *to, const char *reason,
			    const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	const struct core_board *b;
	size_t outside = 0;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	rc = fs_txn_card(&t, id, &c);
	if (rc == CORE_OK)
		rc = card_board(&t, c, &b);
	if (rc == CORE_OK)
		rc = dependents_outside_waiting(&t, b, id, &outside);
	if (rc == CORE_OK)
		rc = core_reopen_check(b, c, to, outside);
	if (rc == CORE_OK)
		rc = fs_state_move(&t, c, b, to, reason, json_pack("{sb}", "reopened", 1));
	/* An operator's reopen starts the card afresh: no attempts, no backoff left (§17). */
	if (rc == CORE_OK)
		core_attempts_reset(c);
	/* Whoever filed it holds nothing any more; the epoch stays, so its token is dead. */
	if (rc == CORE_OK && c->claim.present)
		rc = fs_release_with_event(&t, c, "reopen");
	return end_with_card(&t, rc, c, out);
}

static enum core_rc labels_event(struct fs_txn *t, struct core_card *c)
{
	json_t *labels = json_array();
	size_t i;

	for (i = 0; labels && i < c->labels.n; i++)
		if (json_array_append_new(labels, json_string(c->labels.v[i])))
			break;
	if (!labels || i < c->labels.n) {
		json_decref(labels);
		return CORE_ERR_NOMEM;
	}
	c->updated_at = t->now;
	return fs_txn_event(t, CORE_EV_CARD_LABELS_CHANGED, c->board, c->id, NULL,
			    json_pack("{so}", "labels", labels));
}

enum core_rc fs_card_labels_set(struct store *st, const char *id, const struct core_strv *labels,
				const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	bool changed = false;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	rc = fs_txn_card(&t, id, &c);
	if (rc == CORE_OK)
		rc = core_labels_set(c, labels, &changed);
	if (rc == CORE_OK && changed)
		rc = labels_event(&t, c);
	return end_with_card(&t, rc, c, out);
}

enum core_rc fs_card_labels_adjust(struct store *st, const char *id, const struct core_strv *add,
				   const struct core_strv *remove, const struct store_actor *actor,
				   struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	bool changed = false;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	rc = fs_txn_card(&t, id, &c);
	if (rc == CORE_OK)
		rc = core_labels_adjust(c, add, remove, &changed);
	if (rc == CORE_OK && changed)
		rc = labels_event(&t, c);
	return end_with_card(&t, rc, c, out);
}

enum core_rc fs_card_comment_add(struct store *st, const char *id, const char *body,
				 const struct store_actor *actor, struct core_card **out)
{
	struct fs_txn t;
	struct core_card *c = NULL;
	enum core_rc rc;

	fs_txn_begin(fs_of(st), &t, actor);
	rc = fs_txn_card(&t, id, &c);
	if (rc == CORE_OK)
		rc = fs_comment_write(&t, c, body);
	return end_with_card(&t, rc, c, out);
}
