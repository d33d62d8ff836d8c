/* Card objects: allocation, deep copy, deep equality. */
#include "core/core.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *core_zalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p)
		memset(p, 0, n);
	return p;
}

struct core_card *core_card_new(void)
{
	return core_zalloc(sizeof(struct core_card));
}

static void gave_up_release(struct core_gave_up *g)
{
	free(g->reason);
	free(g->run_id);
	free(g->state);
	memset(g, 0, sizeof(*g));
}

void core_card_release(struct core_card *c)
{
	size_t i;

	if (!c)
		return;
	assert(!c->flat); /* its fields are not its own: never released */
	assert(!c->one_block); /* its fields are its block's: freed with it (core_card_free) */
	if (c->flat || c->one_block)
		return;
	free(c->id);
	free(c->board);
	free(c->title);
	free(c->body);
	free(c->state);
	core_strv_release(&c->labels);
	core_strv_release(&c->blockers);
	for (i = 0; i < c->n_comments; i++) {
		free(c->comments[i].id);
		free(c->comments[i].author);
		free(c->comments[i].body);
	}
	free(c->comments);
	free(c->claim.marker);
	free(c->claim.holder);
	free(c->claim.from);
	free(c->last_run_id);
	gave_up_release(&c->gave_up);
	free(c->state_reason);
	memset(c, 0, sizeof(*c));
}

void core_card_free(struct core_card *c)
{
	assert(!c || !c->flat); /* a view: neither it nor its fields are its own */
	if (c && c->flat)
		return;
	if (c && c->one_block) {
		free(c);
		return;
	}
	core_card_release(c);
	free(c);
}

/* strdup that keeps NULL as NULL; *ok turns false on OOM. */
static char *dup_opt(const char *s, bool *ok)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*ok = false;
	return d;
}

struct core_card *core_card_dup(const struct core_card *c)
{
	struct core_card *d = malloc(sizeof(*d)); /* not zeroed: *d = *c below */
	bool ok = true;
	size_t i;

	if (!d)
		return NULL;
	*d = *c;
	d->flat = false;
	d->one_block = false;
	d->id = dup_opt(c->id, &ok);
	d->board = dup_opt(c->board, &ok);
	d->title = dup_opt(c->title, &ok);
	d->body = dup_opt(c->body, &ok);
	d->state = dup_opt(c->state, &ok);
	d->labels = (struct core_strv){0};
	d->blockers = (struct core_strv){0};
	d->comments = NULL;
	d->n_comments = 0;
	d->claim.marker = dup_opt(c->claim.marker, &ok);
	d->claim.holder = dup_opt(c->claim.holder, &ok);
	d->claim.from = dup_opt(c->claim.from, &ok);
	d->last_run_id = dup_opt(c->last_run_id, &ok);
	d->gave_up.reason = dup_opt(c->gave_up.reason, &ok);
	d->gave_up.run_id = dup_opt(c->gave_up.run_id, &ok);
	d->gave_up.state = dup_opt(c->gave_up.state, &ok);
	d->state_reason = dup_opt(c->state_reason, &ok);
	if (core_strv_copy(&d->labels, &c->labels) != CORE_OK ||
	    core_strv_copy(&d->blockers, &c->blockers) != CORE_OK)
		ok = false;
	if (ok && c->n_comments) {
		d->comments = calloc(c->n_comments, sizeof(*d->comments));
		if (!d->comments)
			ok = false;
		for (i = 0; ok && i < c->n_comments; i++) {
			d->n_comments++;
			d->comments[i].id = dup_opt(c->comments[i].id, &ok);
			d->comments[i].author = dup_opt(c->comments[i].author, &ok);
			d->comments[i].body = dup_opt(c->comments[i].body, &ok);
			d->comments[i].created_at = c->comments[i].created_at;
		}
	}
	if (!ok) {
		core_card_free(d);
		return NULL;
	}
	return d;
}

static bool str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

/* Everything but the claim fields and updated_at. */
static bool equal_except_claim(const struct core_card *a, const struct core_card *b)
{
	size_t i;

	if (!str_eq(a->id, b->id) || !str_eq(a->board, b->board) || !str_eq(a->title, b->title) ||
	    !str_eq(a->body, b->body) || !str_eq(a->state, b->state) || a->priority != b->priority ||
	    !core_strv_equal(&a->labels, &b->labels) || !core_strv_equal(&a->blockers, &b->blockers) ||
	    a->n_comments != b->n_comments)
		return false;
	for (i = 0; i < a->n_comments; i++) {
		const struct core_comment *x = &a->comments[i], *y = &b->comments[i];
		if (!str_eq(x->id, y->id) || !str_eq(x->author, y->author) ||
		    !str_eq(x->body, y->body) || x->created_at != y->created_at)
			return false;
	}
	if (!str_eq(a->last_run_id, b->last_run_id) || a->awaiting_input != b->awaiting_input)
		return false;
	if (a->gave_up.set != b->gave_up.set || !str_eq(a->gave_up.reason, b->gave_up.reason) ||
	    !str_eq(a->gave_up.run_id, b->gave_up.run_id) ||
	    !str_eq(a->gave_up.state, b->gave_up.state) || a->gave_up.at != b->gave_up.at)
		return false;
	return str_eq(a->state_reason, b->state_reason) && a->created_at == b->created_at &&
	       a->state_at == b->state_at && a->not_before == b->not_before &&
	       a->attempts == b->attempts;
}

bool core_card_equal_except_claim(const struct core_card *a, const struct core_card *b)
{
	return equal_except_claim(a, b);
}

bool core_card_equal_claim(const struct core_card *a, const struct core_card *b)
{
	if (a->updated_at != b->updated_at)
		return false;
	if (a->claim.present != b->claim.present || !str_eq(a->claim.marker, b->claim.marker) ||
	    !str_eq(a->claim.holder, b->claim.holder) || !str_eq(a->claim.from, b->claim.from) ||
	    a->claim.claimed_at != b->claim.claimed_at || a->claim.has_lease != b->claim.has_lease ||
	    a->claim.lease_until != b->claim.lease_until || a->claim.lease_ms != b->claim.lease_ms)
		return false;
	return a->has_epoch == b->has_epoch && a->claim_epoch == b->claim_epoch;
}

bool core_card_equal(const struct core_card *a, const struct core_card *b)
{
	return equal_except_claim(a, b) && core_card_equal_claim(a, b);
}

static size_t len_opt(const char *s)
{
	return s ? strlen(s) : 0;
}

size_t core_card_size(const struct core_card *c)
{
	size_t n = len_opt(c->id) + len_opt(c->board) + len_opt(c->title) + len_opt(c->body) +
		   len_opt(c->state) + len_opt(c->state_reason) + len_opt(c->last_run_id) +
		   len_opt(c->claim.marker) + len_opt(c->claim.holder) + len_opt(c->claim.from) +
		   len_opt(c->gave_up.reason) +
		   len_opt(c->gave_up.run_id) + len_opt(c->gave_up.state);
	size_t i;

	for (i = 0; i < c->labels.n; i++)
		n += strlen(c->labels.v[i]);
	for (i = 0; i < c->blockers.n; i++)
		n += strlen(c->blockers.v[i]);
	for (i = 0; i < c->n_comments; i++)
		n += len_opt(c->comments[i].id) + len_opt(c->comments[i].author) +
		     len_opt(c->comments[i].body);
	return n;
}

enum core_rc core_comment_append(struct core_card *c, const char *author, const char *body,
				 int64_t now_ms)
{
	struct core_comment *nv, *cm;
	char cid[32];

	nv = realloc(c->comments, (c->n_comments + 1) * sizeof(*nv));
	if (!nv)
		return CORE_ERR_NOMEM;
	c->comments = nv;
	cm = memset(&c->comments[c->n_comments], 0, sizeof(*cm));
	snprintf(cid, sizeof(cid), "cm-%zu", c->n_comments + 1);
	cm->created_at = now_ms;
	cm->id = strdup(cid);
	cm->author = strdup(author ? author : "");
	cm->body = strdup(body ? body : "");
	if (!cm->id || !cm->author || !cm->body) {
		free(cm->id);
		free(cm->author);
		free(cm->body);
		return CORE_ERR_NOMEM;
	}
	c->n_comments++;
	c->updated_at = now_ms;
	return CORE_OK;
}

enum core_rc core_card_gave_up_set(struct core_card *c, const struct core_gave_up *g,
				   int64_t now_ms)
{
	struct core_gave_up n = {0};
	bool ok = true;

	if (g && g->set) {
		n.set = true;
		n.at = g->at ? g->at : now_ms;
		n.reason = dup_opt(g->reason, &ok);
		n.run_id = dup_opt(g->run_id, &ok);
		n.state = dup_opt(g->state, &ok);
		if (!ok) {
			gave_up_release(&n);
			return CORE_ERR_NOMEM;
		}
	}
	gave_up_release(&c->gave_up);
	c->gave_up = n;
	c->updated_at = now_ms;
	return CORE_OK;
}
