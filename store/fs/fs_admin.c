/* The admin operations of the FS twin: column rename and the label sweeps (DESIGN §8).
 * Each is one transaction under the state write lock, so the walk cannot age: the per-card
 * CAS of ADR-096 §9 is implied by the lock, and the whole sweep is one journal line. */
#include "store/fs/fs.h"
#include "store/fs/fs_effect.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_ops.h"
#include "store/fs/fs_txn.h"

#include <stdlib.h>
#include <string.h>

enum core_rc fs_board_column_rename(struct store *st, const char *board, const char *from,
				    const char *to, const struct store_actor *actor,
				    size_t *touched)
{
	struct fs *fs = fs_of(st);
	struct core_board nb = {0};
	const struct core_board *b;
	struct fs_txn t;
	enum core_rc rc = CORE_OK;
	size_t i;

	*touched = 0;
	fs_txn_begin(fs, &t, actor);
	b = fs_board_find(fs, board);
	if (!b || !core_board_column(b, from)) {
		rc = CORE_ERR_NOT_FOUND;
		goto out;
	}
	if (strcmp(from, to) == 0)
		goto out; /* nothing to do: an empty transaction writes nothing */
	if (core_board_column(b, to)) {
		rc = CORE_ERR_ALREADY_EXISTS;
		goto out;
	}
	rc = core_board_rename_column(b, from, to, &nb);
	if (rc == CORE_OK)
		rc = fs_txn_board_put(&t, &nb);
	for (i = 0; rc == CORE_OK && i < fs->n_order; i++) {
		const struct fs_card_ent *ent = fs->order[i];
		struct core_card view;
		const struct core_card *seen = ent->dead ? NULL : fs_txn_peek(&t, fs_ent_id(ent), &view);
		struct core_card *c = NULL;

		if (!seen || strcmp(seen->board, board) != 0)
			continue;
		/* A claim taken from the column is now taken from its new name: it keeps counting
		 * against that column's limit (DESIGN §17), wherever the card sits. */
		if (strcmp(seen->state, from) != 0) {
			if (seen->claim.present && seen->claim.from &&
			    strcmp(seen->claim.from, from) == 0 &&
			    (rc = fs_txn_card(&t, fs_ent_id(ent), &c)) == CORE_OK)
				rc = core_str_set(&c->claim.from, to);
			continue;
		}
		rc = fs_txn_card(&t, fs_ent_id(ent), &c);
		if (rc == CORE_OK && c->claim.present && c->claim.from &&
		    strcmp(c->claim.from, from) == 0)
			rc = core_str_set(&c->claim.from, to);
		/* Machine provenance: the event flows, no effect fires (DESIGN §7). */
		if (rc == CORE_OK)
			rc = core_card_state_write(c, to, "state_rename", t.now);
		if (rc == CORE_OK)
			rc = fs_txn_event(&t, CORE_EV_CARD_STATE_CHANGED, board,
					  fs_ent_id(ent), "state_rename",
					  json_pack("{ssss}", "from", from, "to", to));
		(*touched)++;
	}
	/* A subscription to the old name would never fire again: it follows the column. */
	if (rc == CORE_OK)
		rc = fs_subs_column_rename(&t, board, from, to);
	if (rc == CORE_OK)
		rc = fs_txn_event(&t, CORE_EV_BOARD_UPDATED, board, NULL, "state_rename",
				  json_pack("{s{ssss}sI}", "column_renamed", "from", from, "to", to,
					    "touched", (json_int_t)*touched));
out:
	core_board_release(&nb);
	if (rc != CORE_OK)
		*touched = 0;
	return fs_txn_end(&t, rc);
}

static bool board_in_scope(const struct store_label_sweep *sw, const char *board)
{
	const char *const *b;

	if (sw->board && strcmp(sw->board, board) != 0)
		return false;
	if (!sw->boards)
		return true;
	for (b = sw->boards; *b; b++)
		if (strcmp(*b, "*") == 0 || strcmp(*b, board) == 0)
			return true;
	return false;
}

static bool has_any(const struct core_card *c, const struct core_strv *labels)
{
	size_t i;

	for (i = 0; i < labels->n; i++)
		if (core_strv_contains(&c->labels, labels->v[i]))
			return true;
	return false;
}

static const enum core_event_type sweep_event[] = {
	[STORE_LABELS_RENAME] = CORE_EV_LABEL_RENAME,
	[STORE_LABELS_MERGE] = CORE_EV_LABEL_MERGE,
	[STORE_LABELS_DELETE] = CORE_EV_LABEL_DELETE,
};

/* The sweep's summary event on one board: {from, to, touched}. */
static enum core_rc sweep_summary(struct fs_txn *t, const struct store_label_sweep *sw,
				  const char *board, size_t touched)
{
	json_t *from = json_array();
	size_t i;

	/* json_pack steals both arrays, also when one is NULL (then it fails: NOMEM). */
	for (i = 0; from && i < sw->from->n; i++)
		json_array_append_new(from, json_string(sw->from->v[i]));
	json_t *to = sw->to ? json_string(sw->to) : json_null();

	return fs_txn_event(t, sweep_event[sw->kind], board, NULL,
			    core_event_type_name(sweep_event[sw->kind]),
			    json_pack("{s:o, s:o, s:I}", "from", from, "to", to, "touched",
				      (json_int_t)touched));
}

enum core_rc fs_labels_sweep(struct store *st, const struct store_label_sweep *sw,
			     const struct store_actor *actor, size_t *touched)
{
	struct fs *fs = fs_of(st);
	struct fs_txn t;
	size_t *per_board = NULL, *first = NULL, n_first = 0, i, k;
	enum core_rc rc = CORE_OK;

	*touched = 0;
	fs_txn_begin(fs, &t, actor);
	per_board = calloc(fs->n_boards ? fs->n_boards : 1, sizeof(*per_board));
	first = calloc(fs->n_boards ? fs->n_boards : 1, sizeof(*first));
	if (!per_board || !first)
		rc = CORE_ERR_NOMEM;
	for (i = 0; rc == CORE_OK && i < fs->n_order; i++) {
		const struct fs_card_ent *ent = fs->order[i];
		struct core_card view;
		const struct core_card *seen = ent->dead ? NULL : fs_txn_peek(&t, fs_ent_id(ent), &view);
		struct core_card *c = NULL;
		json_t *labels;
		bool changed = false;

		if (!seen || !board_in_scope(sw, seen->board) || !has_any(seen, sw->from))
			continue;
		rc = fs_txn_card(&t, fs_ent_id(ent), &c);
		if (rc == CORE_OK)
			rc = core_labels_transform(c, sw->from, sw->to, &changed);
		if (rc != CORE_OK || !changed)
			continue;
		c->updated_at = t.now;
		labels = json_array();
		for (k = 0; labels && k < c->labels.n; k++)
			json_array_append_new(labels, json_string(c->labels.v[k]));
		rc = fs_txn_event(&t, CORE_EV_CARD_LABELS_CHANGED, c->board, c->id,
				  core_event_type_name(sweep_event[sw->kind]),
				  json_pack("{so}", "labels", labels));
		for (k = 0; k < fs->n_boards; k++)
			if (strcmp(fs->boards[k].name, c->board) == 0 && !per_board[k]++)
				first[n_first++] = k;
		(*touched)++;
	}
	/* One summary per board, in the order the sweep first touched each (the cards' order),
	 * as the Mongo twin appends them. */
	for (i = 0; rc == CORE_OK && i < n_first; i++)
		rc = sweep_summary(&t, sw, fs->boards[first[i]].name, per_board[first[i]]);
	free(first);
	free(per_board);
	if (rc != CORE_OK)
		*touched = 0;
	return fs_txn_end(&t, rc);
}
