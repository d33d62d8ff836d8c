/* POST /v1/boards/{b}/claim-next (DESIGN §12): the next card for a worker, with a long-poll.
 *
 * The claim itself is one store op (store_card_claim_next). When nothing is available and the
 * worker asked to wait, the request is suspended (MHD_suspend_connection) and parked on a list;
 * no thread is held per waiter. One waker thread follows the audit tail (the same events
 * GET /v1/events serves) and, when an event can have made a card available on a board
 * (created, moved, released, unblocked, updated, relabelled, board changed), resumes every
 * waiter of that board; their handler runs again on MHD's thread and tries again, through the
 * ordinary write path (deferred acknowledgement included). It also resumes waiters whose wait
 * is over: they answer 204. A card that would fit but for its schedule (not_before, DESIGN
 * §17) is no event when its time comes: the store tells the earliest such time (wake_at),
 * and the waker resumes the waiter then, as it does at a deadline (its timed sleep ends at
 * the nearest of both): one more try, no polling.
 *
 * No wake-up is lost: a waiter notes the waker's cursor before its attempt, and parks only if
 * no availability event was seen since; otherwise it tries again at once.
 *
 * With nobody parked the waker reads nothing: it sleeps on its condition until the first
 * waiter parks (a drain without waits made it copy every event of the audit tail, ~5 % of the
 * server's CPU). It then reads on from where it stopped, batch after batch without waiting,
 * and wakes once at the end of that catch-up: events older than the waiter's attempt can wake
 * it once for nothing (it tries again and parks again), none is missed. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_daemon.h"
#include "api/api_events.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NEXT_WAIT_MAX_MS 30000
#define NEXT_SLICE_MS 250     /* the waker's longest sleep (shutdown, deadlines) */
#define NEXT_RETRIES 16       /* immediate re-tries before parking regardless */
#define NEXT_EVENTS_BATCH 1000
#define NEXT_COUNT_MAX 100    /* claim-next's `count` (DESIGN §18) */

struct api_next {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_cond_t primed_cv; /* broadcast once the waker has found the tail */
	pthread_t th;
	bool started, stop;
	bool primed; /* cursor is the tail as of the waker's start (see tail_find) */
	struct api_req *head; /* parked requests */
	unsigned n;
	int64_t cursor;    /* the last event seq the waker has looked at */
	int64_t avail_seq; /* the last availability event it saw (any board) */
};

/* Events after which a card may fit a waiter that found none. */
static bool event_makes_available(enum core_event_type t)
{
	switch (t) {
	case CORE_EV_CARD_CREATED:
	case CORE_EV_CARD_STATE_CHANGED:
	case CORE_EV_CARD_RELEASED:
	case CORE_EV_CARD_DELETED: /* a claimed card's capacity is free again */
	case CORE_EV_CARD_UNBLOCKED:
	case CORE_EV_CARD_UPDATED:
	case CORE_EV_CARD_LABELS_CHANGED:
	case CORE_EV_BOARD_UPDATED:
	case CORE_EV_LABEL_RENAME:
	case CORE_EV_LABEL_MERGE:
		return true;
	default:
		return false;
	}
}

/* Under mu: unlinks r and hands it back to MHD's thread. */
static void wake(struct api_next *nx, struct api_req **link)
{
	struct api_req *r = *link;

	*link = r->next_link;
	r->next_link = NULL;
	nx->n--;
	r->next_parked = false;
	r->next_woken = true;
	MHD_resume_connection(r->conn); /* r belongs to MHD's thread from here on */
}

static bool board_in(const char (*boards)[CORE_NAME_MAX + 1], size_t n, const char *b)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(boards[i], b) == 0)
			return true;
	return false;
}

#define NEXT_BOARDS_MAX 16

/* The seq of the last event in the audit tail: what happened before the waker started wakes
 * nobody. It copies the whole tail (100 000 events by default: 30-40 ms at a million cards),
 * so the waker does it on its own thread, after the server is ready, rather than api_start.
 * Nothing observable changes: every claim-next first waits for it (avail_seq), so each
 * waiter's first attempt comes after the last event skipped here and saw its effect (the
 * same argument as a waiter's noted cursor); the waker reads every later event. */
static int64_t tail_find(struct store *st)
{
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t next = 0, after = 0;

	while (store_events_list(st, NULL, NULL, after, NEXT_EVENTS_BATCH, 0, &ev, &n, &next) ==
		       CORE_OK &&
	       n > 0) {
		store_events_free(ev, n);
		ev = NULL;
		if (next <= after)
			break;
		after = next;
		n = 0;
	}
	store_events_free(ev, n);
	return after;
}

static void *waker_main(void *arg)
{
	struct api *a = arg;
	struct api_next *nx = a->next;
	int64_t tail = tail_find(a->st);
	char boards[NEXT_BOARDS_MAX][CORE_NAME_MAX + 1];
	/* The boards to wake, gathered over the batches of one catch-up (see below). */
	size_t nb = 0;
	bool all = false, more = false;
	int full_batches = 0;

	pthread_mutex_lock(&nx->mu);
	nx->cursor = tail;
	nx->primed = true;
	pthread_cond_broadcast(&nx->primed_cv);
	while (!nx->stop) {
		int64_t now = api_mono_ms(), slice = NEXT_SLICE_MS, after = nx->cursor;
		struct core_event *ev = NULL;
		struct api_req **link;
		size_t n = 0, i;
		int64_t next = after, avail = 0;
		enum core_rc rc;

		if (!nx->head) {
			/* Nobody to wake: wait for the first waiter (park signals) or a stop. */
			struct timespec until;

			nb = 0;
			all = more = false;
			full_batches = 0;
			clock_gettime(CLOCK_MONOTONIC, &until);
			core_timespec_add_ns(&until, (int64_t)NEXT_SLICE_MS * 1000000);
			while (!nx->head && !nx->stop)
				if (pthread_cond_timedwait(&nx->cv, &nx->mu, &until) != 0)
					break;
			continue;
		}
		for (link = &nx->head; *link;) {
			int64_t due = (*link)->next_deadline;

			if ((*link)->next_wake > 0 && (*link)->next_wake < due)
				due = (*link)->next_wake; /* a schedule passes first */
			if (due <= now) {
				wake(nx, link);
				continue;
			}
			if (due - now < slice)
				slice = due - now;
			link = &(*link)->next_link;
		}
		pthread_mutex_unlock(&nx->mu);
		/* After a full batch more is there: read it at once, without waiting. */
		rc = store_events_list(a->st, NULL, NULL, after, NEXT_EVENTS_BATCH,
				       more ? 0 : slice > 0 ? slice : 1, &ev, &n, &next);
		if (rc != CORE_OK) {
			/* The store is away: waiters keep waiting until their deadline. */
			struct timespec ts = {0, 50 * 1000000L};

			nanosleep(&ts, NULL);
			next = after;
		}
		for (i = 0; i < n; i++) {
			if (!event_makes_available(ev[i].type) || !ev[i].board)
				continue;
			avail = ev[i].seq;
			if (nb < NEXT_BOARDS_MAX) {
				if (!board_in((const char (*)[CORE_NAME_MAX + 1])boards, nb, ev[i].board))
					snprintf(boards[nb++], sizeof boards[0], "%s", ev[i].board);
			} else {
				all = true; /* many boards at once: wake everyone, they sort it out */
			}
		}
		store_events_free(ev, n);
		pthread_mutex_lock(&nx->mu);
		nx->cursor = next > after ? next : after;
		/* At once: a waiter that parks from now on tries again instead (nothing lost). */
		if (avail > nx->avail_seq)
			nx->avail_seq = avail;
		/* A catch-up (the waker idle while events came, or a burst) wakes once at its end,
		 * not once per batch: each wake of a waiter is a claim attempt under the store's
		 * write lock. Bounded, so a tail that never stops growing still wakes them. */
		more = rc == CORE_OK && n == NEXT_EVENTS_BATCH && ++full_batches < 64;
		if (!more)
			full_batches = 0;
		if (more || (!nb && !all))
			continue;
		for (link = &nx->head; *link;) {
			if (all || board_in((const char (*)[CORE_NAME_MAX + 1])boards, nb,
					    (*link)->next_board))
				wake(nx, link);
			else
				link = &(*link)->next_link;
		}
		nb = 0;
		all = false;
		full_batches = 0;
	}
	/* Stopping: every parked request answers now (204). */
	while (nx->head)
		wake(nx, &nx->head);
	pthread_mutex_unlock(&nx->mu);
	return NULL;
}

enum core_rc api_next_start(struct api *a)
{
	struct api_next *nx = calloc(1, sizeof *nx);
	pthread_condattr_t ca;

	if (!nx)
		return CORE_ERR_NOMEM;
	pthread_mutex_init(&nx->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&nx->cv, &ca); /* the waker's idle wait (park signals it) */
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&nx->primed_cv, NULL);
	/* The waker starts at the tail (tail_find, on its thread). */
	a->next = nx;
	if (pthread_create(&nx->th, NULL, waker_main, a) != 0) {
		a->next = NULL;
		pthread_cond_destroy(&nx->primed_cv);
		pthread_cond_destroy(&nx->cv);
		pthread_mutex_destroy(&nx->mu);
		free(nx);
		return CORE_ERR_NOMEM;
	}
	nx->started = true;
	return CORE_OK;
}

void api_next_stop(struct api *a)
{
	struct api_next *nx = a->next;

	if (!nx)
		return;
	pthread_mutex_lock(&nx->mu);
	nx->stop = true;
	pthread_cond_signal(&nx->cv);
	pthread_mutex_unlock(&nx->mu);
	if (nx->started)
		pthread_join(nx->th, NULL);
	nx->started = false;
}

void api_next_free(struct api *a)
{
	struct api_next *nx = a->next;

	if (!nx)
		return;
	pthread_cond_destroy(&nx->primed_cv);
	pthread_cond_destroy(&nx->cv);
	pthread_mutex_destroy(&nx->mu);
	a->next = NULL;
	free(nx);
}

/* The waker's cursor (what "nothing since" is measured against). The first claim-nexts after
 * a start wait here until the waker has found the tail (tail_find). */
static int64_t avail_seq(struct api_next *nx)
{
	int64_t s;

	pthread_mutex_lock(&nx->mu);
	while (!nx->primed)
		pthread_cond_wait(&nx->primed_cv, &nx->mu);
	s = nx->avail_seq;
	pthread_mutex_unlock(&nx->mu);
	return s;
}

/* Parks r unless an availability event came after `seen` (then false: try again now) or
 * the waiters are at the cap or stopping (false with *give_up: answer 204). */
static bool park(struct api_req *r, int64_t seen, bool *give_up)
{
	struct api *a = r->api;
	struct api_next *nx = a->next;
	bool ok;

	*give_up = false;
	pthread_mutex_lock(&nx->mu);
	if (nx->stop || nx->n >= a->cfg.max_long_polls) {
		*give_up = true;
		ok = false;
	} else if (nx->avail_seq > seen) {
		ok = false;
	} else {
		r->next_parked = true;
		r->next_woken = false;
		r->suspended = true;
		MHD_suspend_connection(r->conn);
		if (!nx->head)
			pthread_cond_signal(&nx->cv); /* the waker may be idle */
		r->next_link = nx->head;
		nx->head = r;
		nx->n++;
		ok = true;
	}
	pthread_mutex_unlock(&nx->mu);
	return ok;
}

static enum core_rc reply_claimed(struct api_req *r, struct store_claim_result *res)
{
	size_t len = 0;
	char *text = api_claim_json_text(res->card, &res->token, res->fresh, true, &len);

	return api_reply_json_text(r, 200, text, len);
}

/* claim-next with `count` (DESIGN §18): `first` was taken; up to count - 1 more, each a fresh
 * claim with its own token (what one claim-next would answer), under the request's one
 * deferred acknowledgement. A refusal after the first ends the batch: the claims already taken
 * are answered, never dropped. Answers {"claims": [{card, token}, ...]}. */
static enum core_rc reply_many(struct api_req *r, const struct store_claim_next *in,
			       const struct store_actor *actor, struct store_claim_result *first,
			       int64_t count)
{
	struct api_text t = {0};
	size_t len = 0;
	char *one;
	int64_t i;

	api_text_str(&t, "{\"claims\":[");
	for (i = 0; i < count && !t.oom; i++) {
		struct store_claim_result more = {0}, *res = first;

		if (i > 0) {
			if (store_card_claim_next(r->api->st, in, actor, &more) != CORE_OK ||
			    !more.card)
				break;
			metrics_inc_board(r->api->metrics, METRICS_CLAIMS, "fresh", more.card->board);
			res = &more;
		}
		one = api_claim_json_text(res->card, &res->token, res->fresh, true, &len);
		core_card_free(more.card);
		if (!one) {
			t.oom = true;
			break;
		}
		if (i > 0)
			api_text_add(&t, ",", 1);
		api_text_add(&t, one, len);
		free(one);
	}
	api_text_add(&t, "]}", 2);
	return api_reply_text(r, 200, &t);
}

/* The store refused the asked columns (TRANSITION_REJECTED: one is unknown or terminal, its
 * core_pick_check): the detail names the first such column, read from the board now. */
static enum core_rc columns_detail(struct api_req *r, const char *board,
				   const struct core_strv *columns)
{
	struct core_board b = {0};

	if (store_board_get(r->api->st, board, &b) == CORE_OK) {
		(void)core_pick_check(&b, columns, r->detail, sizeof r->detail);
		core_board_release(&b);
	}
	return CORE_ERR_TRANSITION_REJECTED;
}

enum core_rc api_h_claim_next(struct api_req *r)
{
	struct store_claim_next in = {.board = api_param(r)};
	struct store_actor actor = api_auth_actor(r);
	struct core_strv columns = {0}, labels = {0};
	bool has_cols = false, has_labels = false, give_up = false;
	int64_t wait_ms = 0, count = 0;
	bool has_count = false;
	enum core_rc rc;
	int tries;

	/* Woken from a wait: the token is checked again, as a new request's would be (revoked,
	 * removed or changed by a reload meanwhile: 401, no card handed to it). */
	if (r->next_woken && (rc = api_poll_cred_check(r)) != CORE_OK)
		return rc;
	if ((rc = api_json_marker(r, true, &in.marker)) != CORE_OK ||
	    (rc = api_json_lease(r, &in.lease_ms)) != CORE_OK ||
	    (rc = api_json_strv(r, NULL, "columns", core_name_valid, &columns, &has_cols)) !=
		    CORE_OK ||
	    (rc = api_json_strv(r, NULL, "labels", core_label_valid, &labels, &has_labels)) !=
		    CORE_OK ||
	    (rc = api_json_int(r, "wait_ms", false, &wait_ms, NULL)) != CORE_OK ||
	    (rc = api_json_int(r, "count", false, &count, &has_count)) != CORE_OK)
		goto out;
	if (has_count && (count < 1 || count > NEXT_COUNT_MAX)) {
		rc = api_fail(r, CORE_ERR_BAD_REQUEST, "count must be within 1..%d", NEXT_COUNT_MAX);
		goto out;
	}
	if (wait_ms < 0 || wait_ms > NEXT_WAIT_MAX_MS) {
		rc = api_fail(r, CORE_ERR_BAD_REQUEST, "wait_ms must be within 0..%d",
			      NEXT_WAIT_MAX_MS);
		goto out;
	}
	if (!core_name_valid(in.board)) {
		rc = api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
		goto out;
	}
	if ((rc = api_auth_board(r, in.board)) != CORE_OK)
		goto out;
	/* The asked columns are the store's to check (under its lock: a board PUT cannot land
	 * between the check and the pick), as is the board (NOT_FOUND below); a refusal gets
	 * its detail from columns_detail. No copy of the board per claim. */
	if (!r->next_woken) {
		/* The server's bound on every long-poll (--events-wait-max-ms) holds here too. */
		if (wait_ms > r->api->cfg.events_wait_max_ms)
			wait_ms = r->api->cfg.events_wait_max_ms;
		r->next_deadline = api_mono_ms() + wait_ms;
		snprintf(r->next_board, sizeof r->next_board, "%s", in.board);
	}
	r->next_woken = false;
	r->next_wake = 0;
	in.columns = has_cols ? &columns : NULL;
	in.labels = has_labels ? &labels : NULL;
	in.holder = actor.name;
	for (tries = 0;; tries++) {
		struct store_claim_result res = {0};
		int64_t seen = r->api->next ? avail_seq(r->api->next) : 0;

		rc = store_card_claim_next(r->api->st, &in, &actor, &res);
		if (rc == CORE_ERR_NOT_FOUND) {
			rc = api_fail(r, rc, "no board %s", in.board);
			break;
		}
		if (rc == CORE_ERR_TRANSITION_REJECTED) {
			rc = columns_detail(r, in.board, in.columns);
			break;
		}
		if (rc == CORE_OK && res.card) {
			metrics_inc_board(r->api->metrics, METRICS_CLAIMS, "fresh", res.card->board);
			rc = has_count ? reply_many(r, &in, &actor, &res, count) : reply_claimed(r, &res);
			core_card_free(res.card);
			break;
		}
		if (rc != CORE_OK)
			break;
		/* Nothing now; a scheduled card fits from wake_at on (store clock): wake then. */
		r->next_wake = 0;
		if (res.wake_at > 0) {
			int64_t in_ms = res.wake_at - store_now(r->api->st);

			r->next_wake = api_mono_ms() + (in_ms > 0 ? in_ms : 1);
		}
		if (api_mono_ms() >= r->next_deadline || !r->api->next) {
			r->status = 204; /* nothing available within the wait */
			metrics_inc(r->api->metrics, METRICS_CLAIMS, "empty");
			break;
		}
		if ((rc = api_poll_cred_keep(r)) != CORE_OK) /* for the check when it wakes */
			break;
		if (park(r, tries < NEXT_RETRIES ? seen : INT64_MAX, &give_up))
			break; /* answered when the waker resumes us */
		if (give_up) {
			r->status = 204;
			metrics_inc(r->api->metrics, METRICS_CLAIMS, "empty");
			break;
		}
	}
out:
	core_strv_release(&columns);
	core_strv_release(&labels);
	return rc;
}
