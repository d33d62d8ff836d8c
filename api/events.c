/* GET /v1/events: the audit tail, with long-poll.
 *
 * A long-poll never holds an MHD pool thread: in thread-pool mode a blocked worker would also
 * stall every other connection it serves. The request is suspended (MHD_suspend_connection)
 * and a short-lived helper thread waits on the store in slices of POLL_SLICE_MS (so shutdown
 * can wake it), then stores the result in the request and resumes the connection; the access
 * handler runs again and answers. At most cfg.max_long_polls wait at once; past that a poll
 * answers at once with what there is (an empty page), which a client simply repeats. A plain
 * listing whose read meets a hole in the tail (the Mongo twin: another replica's writer is
 * filling it; waited out up to 2 s) is handed to a helper the same way, for one read. */
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

#define POLL_SLICE_MS 250

void api_poll_release(struct api_req *r)
{
	store_events_free(r->poll_ev, r->poll_n);
	r->poll_ev = NULL;
	r->poll_n = 0;
	free(r->poll_board);
	r->poll_board = NULL;
	if (r->poll_cred) {
		api_cred_release(r->poll_cred);
		free(r->poll_cred);
		r->poll_cred = NULL;
	}
}

enum core_rc api_poll_cred_keep(struct api_req *r)
{
	if (r->poll_cred)
		return CORE_OK;
	if (!(r->poll_cred = calloc(1, sizeof(*r->poll_cred))))
		return CORE_ERR_NOMEM;
	return api_cred_keep(r, r->poll_cred);
}

enum core_rc api_poll_cred_check(struct api_req *r)
{
	if (r->poll_cred && !api_cred_valid(r->api, r->poll_cred))
		return api_fail(r, CORE_ERR_UNAUTHORIZED,
				"the token was revoked while the request waited");
	return CORE_OK;
}

enum core_rc api_events_scope(struct api_req *r, const char **board, bool *by_board)
{
	const char *const *boards = api_auth_boards(r);

	*by_board = boards != NULL;
	if (*board && !core_name_valid(*board))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	if (*board)
		return api_auth_board(r, *board);
	if (!boards)
		return CORE_OK;
	if (!boards[0])
		return api_fail(r, CORE_ERR_FORBIDDEN, "token %s may not access any board",
				r->tok ? r->tok->name : "?");
	if (boards[1])
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"board is required: token %s is scoped to several boards, whose "
				"events are read one board at a time, in that board's own seq",
				r->tok->name);
	*board = boards[0];
	return CORE_OK;
}

static enum core_rc reply_events(struct api_req *r, struct core_event *ev, size_t n,
				 int64_t next, bool by_board)
{
	json_t *list = json_array();
	size_t i;

	for (i = 0; list && i < n; i++)
		if (json_array_append_new(list, store_event_to_json_as(&ev[i], by_board)) != 0) {
			json_decref(list);
			list = NULL;
		}
	if (!list)
		return CORE_ERR_NOMEM;
	return api_reply(r, 200, json_pack("{s:o, s:I}", "events", list, "next", (json_int_t)next));
}

/* One read of the tail as the request's scope reads it. */
static enum core_rc events_read(struct api *a, const char *board, const char *const *boards,
				bool by_board, int64_t after, size_t limit, int64_t wait_ms,
				struct core_event **ev, size_t *n, int64_t *next)
{
	if (by_board)
		return store_events_list_board(a->st, board, after, limit, wait_ms, ev, n, next);
	return store_events_list(a->st, board, boards, after, limit, wait_ms, ev, n, next);
}

static void *poll_main(void *arg)
{
	struct api_req *r = arg;
	struct api *a = r->api;
	int64_t deadline = api_mono_ms() + r->poll_wait_ms;
	const char *const *boards = api_auth_boards(r);
	enum core_rc rc = CORE_OK;
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t next = r->poll_after;

	for (bool first = true;; first = false) {
		int64_t left = deadline - api_mono_ms();
		bool stopping;

		pthread_mutex_lock(&a->poll_mu);
		stopping = a->stopping;
		pthread_mutex_unlock(&a->poll_mu);
		/* The first read always: a listing handed here to wait out a hole (wait 0). */
		if (stopping || (left <= 0 && !first))
			break;
		if (left < 0)
			left = 0;
		rc = events_read(a, r->poll_board, boards, r->poll_by_board, r->poll_after,
				 r->poll_limit, left < POLL_SLICE_MS ? left : POLL_SLICE_MS, &ev, &n,
				 &next);
		if (rc != CORE_OK || n > 0 || r->poll_wait_ms == 0)
			break;
		store_events_free(ev, n);
		ev = NULL;
		next = r->poll_after;
	}
	r->poll_rc = rc;
	r->poll_ev = ev;
	r->poll_n = n;
	r->poll_next = rc == CORE_OK ? next : r->poll_after;
	r->poll = API_POLL_DONE;
	MHD_resume_connection(r->conn); /* r belongs to MHD's thread from here on */

	pthread_mutex_lock(&a->poll_mu);
	a->polls--;
	pthread_cond_broadcast(&a->poll_cv);
	pthread_mutex_unlock(&a->poll_mu);
	return NULL;
}

/* Suspends r and starts its helper; false (nothing done) when the cap is reached. */
static bool poll_start(struct api_req *r)
{
	struct api *a = r->api;
	pthread_attr_t attr;
	pthread_t th;
	bool ok;

	pthread_mutex_lock(&a->poll_mu);
	ok = !a->stopping && a->polls < a->cfg.max_long_polls;
	if (ok)
		a->polls++;
	pthread_mutex_unlock(&a->poll_mu);
	if (!ok)
		return false;
	r->poll = API_POLL_WAITING;
	r->suspended = true;
	MHD_suspend_connection(r->conn);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	ok = pthread_create(&th, &attr, poll_main, r) == 0;
	pthread_attr_destroy(&attr);
	if (!ok) {
		/* No helper: answer an empty page through the same resume path. */
		r->poll_rc = CORE_OK;
		r->poll_next = r->poll_after;
		r->poll = API_POLL_DONE;
		MHD_resume_connection(r->conn);
		pthread_mutex_lock(&a->poll_mu);
		a->polls--;
		pthread_cond_broadcast(&a->poll_cv);
		pthread_mutex_unlock(&a->poll_mu);
	}
	return true;
}

void api_polls_stop(struct api *a)
{
	pthread_mutex_lock(&a->poll_mu);
	a->stopping = true;
	while (a->polls > 0)
		pthread_cond_wait(&a->poll_cv, &a->poll_mu);
	pthread_mutex_unlock(&a->poll_mu);
}

enum core_rc api_h_events(struct api_req *r)
{
	const char *board;
	int64_t after, limit, wait_ms;
	struct core_event *ev = NULL;
	size_t n = 0;
	int64_t next = 0;
	bool by_board;
	enum core_rc rc;

	if (r->poll == API_POLL_DONE) {
		/* The token is checked again: 401, not the events written since (the stream
		 * does the same). */
		if ((rc = api_poll_cred_check(r)) != CORE_OK)
			return rc;
		if (r->poll_rc != CORE_OK)
			return r->poll_rc;
		return reply_events(r, r->poll_ev, r->poll_n, r->poll_next, r->poll_by_board);
	}
	if ((rc = api_query(r, "board", &board)) != CORE_OK ||
	    (rc = api_query_int(r, "after", 0, 0, INT64_MAX, &after)) != CORE_OK ||
	    (rc = api_query_int(r, "limit", 100, 1, 1000, &limit)) != CORE_OK ||
	    (rc = api_query_int(r, "wait_ms", 0, 0, INT64_MAX, &wait_ms)) != CORE_OK ||
	    (rc = api_events_scope(r, &board, &by_board)) != CORE_OK)
		return rc;
	if (wait_ms > r->api->cfg.events_wait_max_ms)
		wait_ms = r->api->cfg.events_wait_max_ms;
	/* Never waiting here, on an HTTP thread: a read that has to wait out a hole in the tail
	 * (another replica's writer filling it; up to 2 s) goes to a helper as a long-poll. */
	rc = events_read(r->api, board, api_auth_boards(r), by_board, after, (size_t)limit,
			 STORE_EVENTS_NO_WAIT, &ev, &n, &next);
	if (rc != CORE_OK && rc != CORE_ERR_BUSY)
		return rc;
	if (rc == CORE_OK && (n > 0 || wait_ms == 0)) {
		rc = reply_events(r, ev, n, next, by_board);
		store_events_free(ev, n);
		return rc;
	}
	store_events_free(ev, n);
	ev = NULL;
	n = 0;
	if (board) {
		r->poll_board = strdup(board);
		if (!r->poll_board)
			return CORE_ERR_NOMEM;
	}
	if ((rc = api_poll_cred_keep(r)) != CORE_OK)
		return rc;
	r->poll_after = after;
	r->poll_by_board = by_board;
	r->poll_limit = (size_t)limit;
	r->poll_wait_ms = wait_ms;
	if (poll_start(r))
		return CORE_OK; /* answered on resume */
	if (wait_ms > 0)
		return reply_events(r, NULL, 0, after, by_board);
	/* No helper for the hole's wait: it is waited out here, as a listing must. */
	rc = events_read(r->api, board, api_auth_boards(r), by_board, after, (size_t)limit, 0,
			 &ev, &n, &next);
	if (rc == CORE_OK)
		rc = reply_events(r, ev, n, next, by_board);
	store_events_free(ev, n);
	return rc;
}
