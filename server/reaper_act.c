/* The reaper's actions on cards (DESIGN §6). Every decision comes from core's table; every
 * write goes through a fenced store operation. The order is load-bearing: list, resolve the
 * run, decide on liveness, TRANSFER, decide again on what the transfer observed, act under
 * the recovery token, release. Never clear-then-decide. Also the repair sweep (ungated,
 * release-only). The loop that runs them is reaper.c's. */
#include "server/reaper_int.h"
#include "metrics/activity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One event of a registry series (id, v1) on board into the per-board charts (DESIGN §21).
 * The Prometheus families are counted once a pass (reaper.c's stats_count); the charts need
 * each card's board, so they are fed here, card by card, with the same events. */
static void chart(struct server_reaper *r, int id, const char *v1, const char *board)
{
	activity_note(metrics_activity(r->cfg.metrics), id, v1, board, 1);
}

/* ---- resolving the run behind a card ---- */

struct resolved {
	enum core_run_seen seen;
	struct core_run *run; /* owned */
};

/* Reads the card's recorded run, running the liveness oracle first so a dead `running` run
 * is judged as what it is. Any read error conserves (UNREADABLE). `same_claim`: a run created
 * under another claim than the card's listed one counts as no run recorded (DESIGN §11): a
 * superseded owner's run never decides the new owner's card. The repair sweep, which only
 * ever releases, reads the pointer as it is (a stripped claim has no epoch to compare). */
static void resolve_run(struct server_reaper *r, const struct core_card *c, bool same_claim,
			struct resolved *out)
{
	struct core_run *run = NULL, *promoted_run = NULL;
	bool promoted = false;
	enum core_rc rc;

	out->run = NULL;
	if (!c->last_run_id) {
		out->seen = CORE_RUN_SEEN_NONE;
		return;
	}
	/* Tombstones included: a pruned run still tells which claim it was created under. An
	 * id never used (a pointer older than the last-run check) reads as gone, as before. */
	rc = store_run_get_any(r->st, c->last_run_id, &run);
	if (rc == CORE_ERR_NOT_FOUND) {
		out->seen = CORE_RUN_SEEN_GONE;
		return;
	}
	if (rc != CORE_OK) {
		out->seen = CORE_RUN_SEEN_UNREADABLE;
		return;
	}
	if (same_claim && !core_run_of_claim(run, c) && !core_run_of_stripped_claim(run, c)) {
		core_run_free(run);
		out->seen = CORE_RUN_SEEN_NONE;
		return;
	}
	if (run->pruned) {
		core_run_free(run);
		out->seen = CORE_RUN_SEEN_GONE;
		return;
	}
	if (run->status && (strcmp(run->status, CORE_RUN_RUNNING) == 0 ||
			    strcmp(run->status, CORE_RUN_QUEUED) == 0)) {
		rc = store_run_promote_if_orphaned(r->st, run->id, &promoted_run, &promoted);
		if (rc == CORE_OK) {
			if (promoted)
				server_reaper_log(r, "run %s of card %s promoted to %s (%s)", run->id,
					   c->id, CORE_RUN_FAILED_RESUMABLE, CORE_FAILURE_ORPHANED);
			core_run_free(run);
			run = promoted_run;
		} else if (rc != CORE_ERR_NOT_FOUND) {
			core_run_free(run);
			out->seen = CORE_RUN_SEEN_UNREADABLE;
			return;
		}
	}
	out->seen = CORE_RUN_SEEN_LOADED;
	out->run = run;
}

/* ---- acting under the recovery token ---- */

/* The watchdog's own release of its recovery claim: exactly that claim, a machine event. */
static void expect_of(struct core_card *expect, const char *id, const struct core_token *tok)
{
	*expect = (struct core_card){.id = (char *)id, .has_epoch = true,
				     .claim_epoch = tok->epoch};
	expect->claim.present = true;
	expect->claim.marker = (char *)tok->marker;
}

static enum core_rc release_token(struct server_reaper *r, const struct core_card *seen,
				  const struct core_token *tok)
{
	struct core_card expect;

	expect_of(&expect, seen->id, tok);
	return store_reaper_release_exact(r->st, seen->id, &expect, &r->actor);
}

/* One candidate of a gated pass, through the phases of its share (reap_share). */
struct cand {
	const struct core_card *listed; /* borrowed from the pass's listing */
	const struct core_board *board; /* borrowed from the share's boards */
	struct resolved run;
	struct core_stuck_input in;
	struct core_stuck_decision d;
	bool transfer;           /* judged actionable: goes to the transfer batch */
	struct core_card *seen;  /* the card as the transfer left it (owned) */
	struct core_token tok;   /* the recovery token */
	enum core_rc act_rc;     /* the action's outcome before the batch (a failed count) */
	bool release;            /* the recovery claim is to go */
	bool release_in_write;   /* ... and the action's last write carries it */
	struct core_gave_up gave_up;  /* borrowed by act.w[0] */
	struct core_card expect;      /* borrowed by act.release_expect */
};

/* The owned write filing the reclaimed card into `target`, carrying the release. */
static void act_file(struct store_reaper_act *a, struct cand *c, const char *target,
		     const char *reason)
{
	/* from: only while the card is where the transfer saw it, the column
	 * ShouldFileStuckCard judged (a move landing between the transfer and this write is
	 * somebody's choice: STATE_CONFLICT, and the card stays there). */
	a->w[a->n_w++] = (struct store_owned_write){.kind = STORE_OWNED_STATE, .token = c->tok,
						    .state = target, .from = c->seen->state,
						    .reason = reason, .release = true,
						    .event_reason = "watchdog"};
	c->release_in_write = true;
}

static void act_gave_up(struct server_reaper *r, struct store_reaper_act *a, struct cand *c,
			const char *reason, const char *run_id)
{
	c->gave_up = (struct core_gave_up){.set = true, .reason = (char *)reason,
					   .run_id = (char *)run_id, .state = c->seen->state,
					   .at = store_now(r->st)};
	a->w[a->n_w++] = (struct store_owned_write){.kind = STORE_OWNED_GAVE_UP,
						    .token = c->tok, .gave_up = &c->gave_up,
						    .event_reason = "watchdog"};
}

/* Files a reclaimed card into `target` unless a column somebody chose would be overwritten
 * (ShouldFileStuckCard). The filing carries the release of the recovery claim. */
static void file_card(struct server_reaper *r, struct store_reaper_act *a, struct cand *c,
		      const char *target, const char *reason)
{
	const struct core_card *seen = c->seen;

	if (!core_should_file_stuck_card(c->board, seen->state, target)) {
		if (target && strcmp(seen->state, target) != 0)
			server_reaper_log(r, "card %s left in %s: moved out of %s deliberately, not "
				      "overwritten with %s",
				   seen->id, seen->state, c->board->running, target);
		return;
	}
	act_file(a, c, target, reason);
}

/* Whether the attempt a repark counts is the card's last (DESIGN §17): the release then
 * files it into the failed column. */
static bool repark_exhausts(struct server_reaper *r, const struct core_board *b,
			    const struct core_card *seen)
{
	struct core_retry pol;

	store_retry_of(r->st, b, &pol);
	return b->failed && seen->attempts < INT32_MAX && seen->attempts + 1 >= pol.max_attempts;
}

/* A release with no run returns the card to the pool (and counts an attempt, DESIGN §17)
 * only from the running column or a launch column: a card somebody moved elsewhere (review)
 * stays where it was put, with no attempt counted and never filed for attempts_exhausted
 * (core_should_file_stuck_card's rule: a column somebody chose is never overwritten; the
 * table's parked_out_of_pool keeps such a card with a resumable run likewise). */
static bool in_pool(const struct core_board *b, const char *state)
{
	return (b->running && strcmp(state, b->running) == 0) || core_board_is_eligible(b, state);
}

/* The action half of one reclaim, as the writes of its act item (all fenced by the recovery
 * token). c->release: the recovery claim is to go; c->release_in_write: the filing carries
 * it (on success), so it is not released again. With no write, the item is the release. */
static void plan_act(struct server_reaper *r, struct cand *c, const char *prev_marker,
		     struct store_reaper_act *a)
{
	const struct core_board *b = c->board;
	const struct core_card *seen = c->seen;

	*a = (struct store_reaper_act){.id = seen->id};
	c->release = true;
	c->release_in_write = false;
	c->act_rc = CORE_OK;
	switch (c->d.action) {
	case CORE_STUCK_KEEP:
		/* Conservation is granted once: the recovery claim is its record. A card
		 * already held by a reaper: marker is released instead. */
		c->release = core_marker_is_recovery(prev_marker);
		break;
	case CORE_STUCK_COMPLETE:
		file_card(r, a, c, b->completed, c->d.reason);
		break;
	case CORE_STUCK_FAIL:
		file_card(r, a, c, b->failed, c->d.reason);
		break;
	case CORE_STUCK_GIVE_UP:
		/* The stamp always: it overwrites no column, and it puts the card in the
		 * Needs-attention lane wherever it is, for an operator to decide (ADR-096: a
		 * gone run is never left unseen). The filing only where ShouldFileStuckCard
		 * allows: a card somebody moved out of the pool (review) stays where it is. */
		act_gave_up(r, a, c, "run_pruned", seen->last_run_id);
		file_card(r, a, c, b->failed, c->d.reason);
		break;
	case CORE_STUCK_REPARK:
		/* A return to the pool counts an attempt (DESIGN §17): the release carries the
		 * retry, and the twin, in the same step, either sets not_before (the backoff) or,
		 * at the board's max_attempts (--run-ceiling by default), files the card into the
		 * failed column with gave_up {reason attempts_exhausted} under machine provenance.
		 * This replaces the Mongo-only run ceiling, which counted runs. */
		a->retry = true; /* in the pool: parked_out_of_pool keeps the others */
		/* Mongo twin: back to eligible[0] (ADR-096 §7), unless this attempt is its last:
		 * then the release files it into the failed column from where it is, one move
		 * (as on FS), not a move into the pool and out of it again. */
		if ((r->cfg.repark_to_pool || !core_board_is_eligible(b, seen->state)) &&
		    !repark_exhausts(r, b, seen))
			file_card(r, a, c, core_board_first_eligible(b), c->d.reason);
		/* FS twin: released in place, the running column being eligible; on a board
		 * whose running column is not, to eligible[0] as on Mongo (released in place
		 * there, it would never be claimed again) */
		break;
	case CORE_STUCK_RELEASE:
		/* No run was recorded under the expired claim: the card goes back to the pool,
		 * and that return counts an attempt too (DESIGN §17: "every reaper return"). A
		 * card that kills its worker before the run is recorded is the poison the
		 * attempts must bound. */
		a->retry = in_pool(b, seen->state);
		/* From a running column that is not eligible: into the pool proper. */
		if (a->retry && !core_board_is_eligible(b, seen->state) &&
		    !repark_exhausts(r, b, seen))
			/* A move into a launch column the machine decided: under the machine
			 * reason, so that no subscription fires and no one-shot label is
			 * consumed (ADR-096: firing there would re-arm a spend). */
			file_card(r, a, c, core_board_first_eligible(b), "watchdog");
		break;
	case CORE_STUCK_ACTION_COUNT_:
		break;
	}
	/* Nothing to write: the item is the release alone (or nothing at all). */
	if (!a->n_w && c->release) {
		expect_of(&c->expect, seen->id, &c->tok);
		a->release_expect = &c->expect;
	}
}

/* The boards a share's cards sit on, each read once per share (usually one board). */
struct share_boards {
	struct core_board *v;
	size_t n, cap;
};

static const struct core_board *share_board(struct server_reaper *r, struct share_boards *sb,
					    const char *name)
{
	struct core_board *nv;
	size_t i;

	for (i = 0; i < sb->n; i++)
		if (strcmp(sb->v[i].name, name) == 0)
			return &sb->v[i];
	if (sb->n == sb->cap) {
		nv = realloc(sb->v, (sb->cap ? 2 * sb->cap : 2) * sizeof(*nv));
		if (!nv)
			return NULL;
		sb->v = nv;
		sb->cap = sb->cap ? 2 * sb->cap : 2;
	}
	memset(&sb->v[sb->n], 0, sizeof(sb->v[sb->n]));
	if (store_board_get(r->st, name, &sb->v[sb->n]) != CORE_OK) {
		core_board_release(&sb->v[sb->n]);
		return NULL;
	}
	return &sb->v[sb->n++];
}

static void share_boards_release(struct share_boards *sb)
{
	size_t i;

	for (i = 0; i < sb->n; i++)
		core_board_release(&sb->v[i]);
	free(sb->v);
}

/* Phase 1 for one candidate: resolve its run and decide on liveness (DecideTransfer). A keep
 * is settled here (a recovery hold with nothing alive behind it is released); an actionable
 * card is marked for the transfer batch. */
static void judge(struct server_reaper *r, struct share_boards *sb, struct cand *c,
		  struct server_reaper_stats *s)
{
	const struct core_card *listed = c->listed;
	int64_t now = store_now(r->st);

	c->board = share_board(r, sb, listed->board);
	if (!c->board) {
		s->errors++;
		return;
	}
	resolve_run(r, listed, true, &c->run);
	c->in.seen = c->run.seen;
	c->in.run = c->run.run;
	c->in.board = c->board;
	c->in.state = listed->state;
	c->in.stamp_window_open =
		core_stamp_window_open(listed->claim.claimed_at, listed->claim.lease_ms, now);

	c->d = core_decide_transfer(&c->in);
	if (c->d.action == CORE_STUCK_KEEP) {
		if (core_recovery_hold_expired(&c->in, listed->claim.marker) &&
		    store_reaper_release_exact(r->st, listed->id, listed, &r->actor) == CORE_OK) {
			s->actions[CORE_STUCK_RELEASE]++;
			chart(r, METRICS_REAPER_ACTIONS, core_stuck_action_name(CORE_STUCK_RELEASE),
			      listed->board);
			server_reaper_log(r, "card %s: recovery hold by %s epoch %lld released (%s)",
				   listed->id, listed->claim.marker,
				   (long long)listed->claim_epoch, c->d.row);
		} else {
			s->skipped++;
			s->actions[CORE_STUCK_KEEP]++;
		}
		return;
	}
	if (r->cfg.after_list)
		r->cfg.after_list(r->cfg.hook_ctx, listed);
	c->transfer = true;
}

/* The run behind a transferred card, read again: until the transfer the holder's claim was
 * live, so since the judging it may have finished or failed the run (even one the judging
 * promoted: failed_resumable is not final) or recorded another; from the transfer on, that
 * claim's run writes are refused, so this read is the one the decision must take. The run
 * still counts only if it was created under the claim the transfer took (the listed one). */
static void reread_run(struct server_reaper *r, struct cand *c)
{
	struct core_card prev = *c->listed;

	prev.last_run_id = c->seen->last_run_id;
	core_run_free(c->run.run);
	resolve_run(r, &prev, true, &c->run);
	c->in.seen = c->run.seen;
	c->in.run = c->run.run;
}

/* A share goes in batches of at most REAP_BATCH_MAX cards: a batch is one transaction on the
 * FS twin, holding the state write lock while it runs (claim-next and every other write
 * wait), and its transaction's lookups grow with it. */
#define REAP_BATCH_MAX 64

/* One batch of a share of a gated pass (cards[0..n)), in phases: judge every card, TRANSFER the
 * actionable ones in one batch, decide again on what each transfer observed, act under the
 * recovery tokens in one batch, then release what is left to release. On the FS twin each
 * batch is one journal line; on the Mongo twin it loops, and the shares overlap the round
 * trips. Per card the order is still list, resolve, decide, TRANSFER, decide, act, release. */
static void reap_batch(struct server_reaper *r, struct core_card **cards, size_t n,
		       struct server_reaper_stats *s)
{
	/* On the stack (n <= REAP_BATCH_MAX): a large malloc per batch had glibc consolidate
	 * its free lists each time (7 % of a pass's CPU at a million cards). */
	struct cand cv[REAP_BATCH_MAX];
	struct store_transfer tv[REAP_BATCH_MAX];
	struct store_reaper_act av[REAP_BATCH_MAX];
	struct cand *tc[REAP_BATCH_MAX];
	struct share_boards sb = {0};
	size_t i, k, n_judged = 0, n_t = 0, n_a = 0;
	enum core_rc rc;

	memset(cv, 0, n * sizeof(*cv));
	for (i = 0; i < n && !server_reaper_stopping(r); i++) { /* between cards, never mid-write */
		cv[i].listed = cards[i];
		s->listed++;
		n_judged++;
		judge(r, &sb, &cv[i], s);
		if (!cv[i].transfer)
			continue;
		tv[n_t] = (struct store_transfer){
			.id = cards[i]->id,
			.prev = {cards[i]->claim.marker, cards[i]->claim_epoch, NULL}};
		tc[n_t++] = &cv[i];
	}
	rc = store_reaper_transfer_many(r->st, tv, n_t, r->marker, r->cfg.lease_ms);
	for (k = 0; k < n_t; k++) {
		struct cand *c = tc[k];

		if (rc != CORE_OK)
			tv[k].rc = rc;
		if (tv[k].rc != CORE_OK) {
			/* A renewal, an operator, or another replica's reaper got there first. */
			if (tv[k].rc == CORE_ERR_CLAIM_CONFLICT)
				metrics_inc(r->cfg.metrics, METRICS_CLAIMS, "conflict");
			if (tv[k].rc == CORE_ERR_CLAIM_CONFLICT || tv[k].rc == CORE_ERR_NOT_FOUND)
				s->skipped++;
			else
				s->errors++;
			c->transfer = false;
			continue;
		}
		s->transferred++;
		chart(r, METRICS_CLAIMS, "recovery", c->listed->board);
		c->seen = tv[k].card;
		tv[k].card = NULL;
		if (r->cfg.after_transfer)
			r->cfg.after_transfer(r->cfg.hook_ctx, c->seen);
		/* Judge the card as the transfer observed it, never the listing's copy. */
		c->in.state = c->seen->state;
		reread_run(r, c);
		c->d = core_decide_stuck_card(&c->in);
		c->tok.marker = r->marker;
		c->tok.epoch = c->seen->claim_epoch;
		plan_act(r, c, c->listed->claim.marker, &av[n_a]);
		tc[n_a++] = c;
	}
	rc = store_reaper_act(r->st, av, n_a, &r->actor);
	for (k = 0; k < n_a; k++) {
		struct cand *c = tc[k];
		const struct core_card *seen = c->seen;
		enum core_rc act_rc = c->act_rc;

		if (rc != CORE_OK)
			av[k].rc = rc;
		/* An item with writes is the action; one without is the bare release. */
		if (act_rc == CORE_OK && av[k].n_w)
			act_rc = av[k].rc;
		/* A filing refused because somebody moved the card since the transfer: their
		 * choice stands, as ShouldFileStuckCard's would (the claim is released below). */
		if (act_rc == CORE_ERR_STATE_CONFLICT && c->release_in_write) {
			server_reaper_log(r, "card %s left where it was moved after the transfer: not "
					  "filed", seen->id);
			act_rc = CORE_OK;
		}
		if (act_rc != CORE_OK)
			s->errors++;
		/* The claim is released whatever the filing did: a card is never left owned
		 * by a ghost — except a first keep, whose recovery claim is the record of the
		 * grant. A filing that carried the release (atomically, on success only)
		 * already did it. */
		if (c->release && !av[k].n_w && av[k].rc != CORE_OK)
			s->errors++;
		else if (c->release && av[k].n_w && !(c->release_in_write && av[k].rc == CORE_OK) &&
			 release_token(r, seen, &c->tok) != CORE_OK)
			s->errors++;
		s->actions[c->d.action]++;
		chart(r, METRICS_REAPER_ACTIONS, core_stuck_action_name(c->d.action), seen->board);
		server_reaper_log(r, "reclaimed card %s from %s epoch %lld: %s (%s) in %s%s", seen->id,
			   c->listed->claim.marker, (long long)c->listed->claim_epoch,
			   core_stuck_action_name(c->d.action), c->d.row, seen->state,
			   act_rc != CORE_OK ? " [action failed]" : "");
	}
	for (i = 0; i < n_judged; i++) {
		core_card_free(cv[i].seen);
		core_run_free(cv[i].run.run);
	}
	for (k = 0; k < n_t; k++)
		core_card_free(tv[k].card);
	share_boards_release(&sb);
}


/* A share, batch by batch. */
void server_reaper_share(struct server_reaper *r, struct core_card **cards, size_t n,
		       struct server_reaper_stats *s)
{
	size_t i, k;

	for (i = 0; i < n && !server_reaper_stopping(r); i += k) {
		k = n - i < REAP_BATCH_MAX ? n - i : REAP_BATCH_MAX;
		reap_batch(r, cards + i, k, s);
	}
}

/* ---- the repair sweep (ungated, release-only) ---- */

/* May an ordinary claim stripped of its lease or fence be released? Only when the run behind
 * it has a disposition that the gated table then files (ADR-096 §9): finished, failed, or a
 * settled failed_resumable (no continuation armed), with the card in the running column. */
static bool stripped_releasable(const struct core_board *b, const struct core_card *c,
				const struct resolved *run)
{
	const char *st, *cont;

	if (run->seen != CORE_RUN_SEEN_LOADED || !b->running || strcmp(c->state, b->running) != 0)
		return false;
	st = run->run->status;
	cont = run->run->continuation;
	/* An armed continuation owns the run's future: that claim stays conserved. */
	if (cont && (strcmp(cont, CORE_CONT_REDELIVERY) == 0 || strcmp(cont, CORE_CONT_RETRY) == 0))
		return false;
	return strcmp(st, CORE_RUN_FINISHED) == 0 || strcmp(st, CORE_RUN_FAILED) == 0 ||
	       strcmp(st, CORE_RUN_FAILED_RESUMABLE) == 0;
}

/* The sweep; charted: count its releases into the per-board charts (a pass's sweep, which
 * stats_count also counts; the startup sweep is in neither). */
static enum core_rc repair_sweep(struct server_reaper *r, size_t *repaired, bool charted)
{
	struct core_card **cards = NULL;
	size_t n = 0, i;
	enum core_rc rc;
	int64_t now = store_now(r->st);

	*repaired = 0;
	rc = store_reaper_list_repair(r->st, r->cfg.batch, &cards, &n);
	if (rc != CORE_OK)
		return rc;
	for (i = 0; i < n && !server_reaper_stopping(r); i++) {
		struct core_card *c = cards[i];
		struct core_board board = {0};
		struct resolved run = {0};
		struct core_stuck_input in = {0};
		bool release = false;

		if (store_board_get(r->st, c->board, &board) != CORE_OK)
			continue;
		resolve_run(r, c, false, &run);
		in.seen = run.seen;
		in.run = run.run;
		in.board = &board;
		in.state = c->state;
		in.stamp_window_open =
			core_stamp_window_open(c->claim.claimed_at, c->claim.lease_ms, now);
		if (core_marker_is_recovery(c->claim.marker))
			/* An abandoned recovery claim: releasing it restores the card to what it
			 * was before a watchdog touched it — unless something may be alive. */
			release = core_claim_expired(c, now) &&
				  core_recovery_hold_expired(&in, c->claim.marker);
		else if (!c->claim.has_lease || !c->has_epoch)
			release = stripped_releasable(&board, c, &run);
		if (release && store_reaper_release_exact(r->st, c->id, c, &r->actor) == CORE_OK) {
			(*repaired)++;
			if (charted)
				chart(r, METRICS_REAPER_ACTIONS, "repair_release", c->board);
			server_reaper_log(r, "repair: released %s claim of card %s held by %s",
				   core_marker_is_recovery(c->claim.marker) ? "abandoned recovery"
									    : "stripped",
				   c->id, c->claim.marker);
		}
		core_run_free(run.run);
		core_board_release(&board);
	}
	store_cards_free(cards, n);
	return CORE_OK;
}

enum core_rc server_reaper_repair(struct server_reaper *r, size_t *repaired)
{
	return repair_sweep(r, repaired, false);
}

enum core_rc server_reaper_repair_pass(struct server_reaper *r, size_t *repaired)
{
	return repair_sweep(r, repaired, true);
}
