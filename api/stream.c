/* GET /v1/events/stream: the audit tail as Server-Sent Events (DESIGN §15).
 *
 * Per event: "id: <seq>", "event: <type>", "data: <event JSON>" and a blank line (for a token
 * scoped to boards, one board's stream: the seq, the id and Last-Event-ID are that board's
 * board_seq, DESIGN §11); a comment
 * line every stream_heartbeat_ms (15 s), busy or idle; resumable from `after` or
 * the Last-Event-ID header (which wins: a reconnecting EventSource sends it); scoped as
 * GET /v1/events (the `board` asked for, within the token's boards).
 *
 * No thread is held per stream. The answer is an MHD callback response: MHD calls
 * stream_read on the connection's own pool thread whenever the socket can take more; with
 * nothing to send, stream_read suspends the connection (allowed from a content reader) and
 * returns 0. One hub thread for all streams waits on the store for any new event and resumes
 * the suspended streams when one arrives on a board they read, or a heartbeat is due; each
 * then reads its own events from the store (scoped, from its own cursor) on its pool thread,
 * without waiting.
 * At most cfg.max_streams are open, and one token holds at most three quarters of them (one
 * at least stays for the others): past that the answer is 503 busy with Retry-After.
 *
 * Lifetime: a stream lives from the handler until MHD destroys the response (stream_free),
 * on its list under hub->mu. The hub touches a stream's connection only while the stream is
 * suspended, which MHD's side cannot end but through the hub (or api_streams_stop). */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_daemon.h"
#include "api/api_events.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_BATCH 100        /* events read per store call */
#define STREAM_HUB_WAIT_MS 500  /* the hub's store wait: its heartbeat resolution */
#define STREAM_BLOCK (16 * 1024)

struct api_stream {
	struct api *a;
	struct MHD_Connection *conn;
	char *board;     /* owned; NULL: every board in scope */
	char *who;       /* owned: the token's name (a token's share of the slots) */
	char **boards;   /* owned NULL-terminated copy of the token's boards; NULL: all */
	bool by_board;   /* a token scoped to boards: one board, in its own seq (board_seq) */
	int64_t after;   /* the cursor: the seq (board_seq) after which the next read starts */
	struct api_cred cred; /* checked again before each read: a revoked token's stream ends */
	char *buf;       /* bytes owed to the client: buf[off, len) */
	size_t off, len, cap;
	/* under hub->mu */
	int64_t last_beat_ms;  /* monotonic: the last comment line (or the opening) */
	int64_t seen;          /* hub->seq when it last read the store */
	bool suspended;
	struct api_stream *prev, *next;
};

struct api_streams {
	pthread_mutex_t mu;
	pthread_cond_t cv;  /* the hub: a first stream, or stop */
	pthread_t th;
	bool started, stop;
	struct api_stream *head;
	unsigned n;
	int64_t seq;        /* the newest event seq the hub has seen (every board) */
};

/* ---- the per-stream buffer ---- */

static bool buf_reserve(struct api_stream *s, size_t more)
{
	size_t cap = s->cap ? s->cap : 4096;
	char *nb;

	if (s->len + more <= s->cap)
		return true;
	while (cap < s->len + more)
		cap *= 2;
	nb = realloc(s->buf, cap);
	if (!nb)
		return false;
	s->buf = nb;
	s->cap = cap;
	return true;
}

static bool buf_add(struct api_stream *s, const char *text, size_t n)
{
	if (!buf_reserve(s, n))
		return false;
	memcpy(s->buf + s->len, text, n);
	s->len += n;
	return true;
}

/* One event as an SSE frame. The JSON is compact: one line, newlines escaped. */
static bool frame_add(struct api_stream *s, const struct core_event *e)
{
	json_t *j = store_event_to_json_as(e, s->by_board);
	char *data = j ? json_dumps(j, JSON_COMPACT) : NULL;
	char head[96];
	int hl;
	bool ok;

	json_decref(j);
	if (!data)
		return false;
	hl = snprintf(head, sizeof head, "id: %" PRId64 "\nevent: %s\ndata: ",
		      s->by_board ? e->board_seq : e->seq,
		      core_event_type_name(e->type));
	ok = hl > 0 && (size_t)hl < sizeof head && buf_add(s, head, (size_t)hl) &&
	     buf_add(s, data, strlen(data)) && buf_add(s, "\n\n", 2);
	free(data);
	return ok;
}

static ssize_t buf_out(struct api_stream *s, char *out, size_t max)
{
	size_t n = s->len - s->off;

	if (n > max)
		n = max;
	memcpy(out, s->buf + s->off, n);
	s->off += n;
	if (s->off == s->len)
		s->off = s->len = 0;
	return (ssize_t)n;
}

/* ---- MHD's side ---- */

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct api_stream *s = cls;
	struct api_streams *h = s->a->streams;
	struct core_event *ev = NULL;
	size_t n = 0, i;
	int64_t next = 0, seen, now;
	enum core_rc rc;
	bool stop, beat, hole;

	(void)pos;
	if (s->off < s->len)
		return buf_out(s, out, max);
	pthread_mutex_lock(&h->mu);
	stop = h->stop;
	seen = h->seq;
	pthread_mutex_unlock(&h->mu);
	if (stop)
		return MHD_CONTENT_READER_END_OF_STREAM;
	/* Revoked, expired, removed or changed since the stream opened: nothing more for it
	 * (DESIGN §13: every request with it is 401; this one goes on no longer). */
	if (!api_cred_valid(s->a, &s->cred))
		return MHD_CONTENT_READER_END_OF_STREAM;
	/* Never waiting on this HTTP thread for a hole in the tail: the hub waits it out, and
	 * its next wake-up (seen is set back below) reads again. */
	rc = s->by_board ? store_events_list_board(s->a->st, s->board, s->after, STREAM_BATCH,
						   STORE_EVENTS_NO_WAIT, &ev, &n, &next)
			 : store_events_list(s->a->st, s->board, (const char *const *)s->boards,
					     s->after, STREAM_BATCH, STORE_EVENTS_NO_WAIT, &ev, &n,
					     &next);
	hole = rc == CORE_ERR_BUSY;
	if (rc != CORE_OK && !hole)
		return MHD_CONTENT_READER_END_WITH_ERROR; /* the client resumes from its last id */
	for (i = 0; i < n; i++)
		if (!frame_add(s, &ev[i])) {
			store_events_free(ev, n);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
	store_events_free(ev, n);
	if (next > s->after)
		s->after = next;
	now = api_mono_ms();
	pthread_mutex_lock(&h->mu);
	beat = now - s->last_beat_ms >= s->a->cfg.stream_heartbeat_ms;
	if (beat && !buf_add(s, ": keep-alive\n\n", 14)) {
		pthread_mutex_unlock(&h->mu);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (beat)
		s->last_beat_ms = now;
	if (s->len > 0) {
		pthread_mutex_unlock(&h->mu);
		return buf_out(s, out, max);
	}
	/* Nothing to say. Unless the hub saw an event since we read, wait for it to wake us;
	 * deciding under hub->mu is what keeps the hub from missing a suspended stream. */
	if ((h->seq == seen || hole) && !h->stop) {
		s->seen = hole ? seen - 1 : seen; /* a hole: the hub's next wake-up resumes it */
		s->suspended = true;
		MHD_suspend_connection(s->conn);
	}
	pthread_mutex_unlock(&h->mu);
	return 0;
}

/* Frees a stream that is on no list (never handed to MHD, or taken off its list). */
static void stream_discard(struct api_stream *s)
{
	size_t i;

	for (i = 0; s->boards && s->boards[i]; i++)
		free(s->boards[i]);
	free(s->boards);
	api_cred_release(&s->cred);
	free(s->who);
	free(s->board);
	free(s->buf);
	free(s);
}

static void stream_free(void *cls)
{
	struct api_stream *s = cls;
	struct api_streams *h = s->a->streams;

	pthread_mutex_lock(&h->mu);
	if (s->prev)
		s->prev->next = s->next;
	else
		h->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	h->n--;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	stream_discard(s);
}

/* ---- the hub ---- */

/* Resumes the suspended streams that have news or owe a heartbeat (all of them when
 * stopping). The hub's last read took the events after seq `from` up to h->seq, touching the
 * boards in t (NULL: stopping): a stream that had read up to `from` and reads none of them
 * has no news, and counts as having seen up to h->seq. Caller holds h->mu. */
static void hub_wake(struct api *a, bool all, int64_t from, const struct core_touched *t)
{
	struct api_streams *h = a->streams;
	int64_t now = api_mono_ms();
	struct api_stream *s;
	bool news;

	for (s = h->head; s; s = s->next) {
		if (!s->suspended)
			continue;
		news = h->seq > s->seen &&
		       (s->seen < from || !t ||
			core_touched_any(t, s->board, (const char *const *)s->boards));
		if (!news && h->seq > s->seen)
			s->seen = h->seq;
		if (all || news || now - s->last_beat_ms >= a->cfg.stream_heartbeat_ms) {
			s->suspended = false;
			MHD_resume_connection(s->conn);
		}
	}
}

static void *hub_main(void *arg)
{
	struct api *a = arg;
	struct api_streams *h = a->streams;
	int64_t after = 0; /* catches up to the tail in batches at its first streams */

	pthread_mutex_lock(&h->mu);
	while (!h->stop) {
		struct core_event *ev = NULL;
		struct core_touched touched;
		size_t n = 0;
		int64_t next = 0, from;
		enum core_rc rc;

		if (!h->head) { /* no stream: no reason to read the store */
			pthread_cond_wait(&h->cv, &h->mu);
			continue;
		}
		pthread_mutex_unlock(&h->mu);
		rc = store_events_list(a->st, NULL, NULL, after, 1000, STREAM_HUB_WAIT_MS, &ev, &n,
				       &next);
		if (rc != CORE_OK) {
			struct timespec nap = {0, STREAM_HUB_WAIT_MS * 1000000L};

			nanosleep(&nap, NULL); /* the store is down: heartbeats go on */
			next = after;
			n = 0;
		}
		core_touched_of(&touched, ev, n); /* borrows ev's boards until freed below */
		pthread_mutex_lock(&h->mu);
		from = h->seq;
		if (next > after)
			after = h->seq = next;
		hub_wake(a, false, from, &touched);
		pthread_mutex_unlock(&h->mu);
		store_events_free(ev, n);
		pthread_mutex_lock(&h->mu);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

enum core_rc api_streams_init(struct api *a)
{
	struct api_streams *h = calloc(1, sizeof(*h));

	if (!h)
		return CORE_ERR_NOMEM;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	a->streams = h;
	return CORE_OK;
}

void api_streams_stop(struct api *a)
{
	struct api_streams *h = a->streams;
	int64_t deadline = api_mono_ms() + 2000;
	bool started;

	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->stop = true;
	started = h->started;
	pthread_cond_broadcast(&h->cv);
	hub_wake(a, true, 0, NULL);
	pthread_mutex_unlock(&h->mu);
	if (started)
		pthread_join(h->th, NULL);
	/* The streams answer their end at once; give their connections a moment to finish
	 * (MHD_stop_daemon frees what is left: nothing stays suspended). */
	pthread_mutex_lock(&h->mu);
	while (h->n > 0 && api_mono_ms() < deadline) {
		struct api_stream *s;

		for (s = h->head; s; s = s->next)
			if (s->suspended) { /* suspended after the wake above: a last look */
				s->suspended = false;
				MHD_resume_connection(s->conn);
			}
		pthread_mutex_unlock(&h->mu);
		{
			struct timespec nap = {0, 10 * 1000000L};

			nanosleep(&nap, NULL);
		}
		pthread_mutex_lock(&h->mu);
	}
	pthread_mutex_unlock(&h->mu);
}

unsigned api_streams_open(struct api *a)
{
	struct api_streams *h = a->streams;
	unsigned n;

	pthread_mutex_lock(&h->mu);
	n = h->n;
	pthread_mutex_unlock(&h->mu);
	return n;
}

void api_streams_free(struct api *a)
{
	struct api_streams *h = a->streams;

	if (!h)
		return;
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
	a->streams = NULL;
}

/* ---- the handler ---- */

static char **boards_copy(const char *const *v, bool *ok)
{
	size_t n = 0, i;
	char **out;

	*ok = true;
	if (!v)
		return NULL;
	while (v[n])
		n++;
	out = calloc(n + 1, sizeof(*out));
	for (i = 0; out && i < n; i++)
		if (!(out[i] = strdup(v[i]))) {
			while (i-- > 0)
				free(out[i]);
			free(out);
			out = NULL;
		}
	*ok = out != NULL;
	return out;
}

/* Last-Event-ID: a seq (digits only); NULL when absent. */
static enum core_rc last_event_id(struct api_req *r, int64_t *after)
{
	enum core_rc rc;
	const char *v = api_hdr_once(r, API_HDR_LAST_EVENT_ID, &rc);
	char *end;
	long long x;

	if (!v)
		return rc;
	if (*v < '0' || *v > '9')
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"Last-Event-ID must be an event seq (an integer >= 0)");
	errno = 0;
	x = strtoll(v, &end, 10);
	if (*end || x < 0 || errno == ERANGE) /* up to INT64_MAX, as `after` */
		return api_fail(r, CORE_ERR_BAD_REQUEST,
				"Last-Event-ID must be an event seq (an integer >= 0)");
	*after = x;
	return CORE_OK;
}

/* The streams one token may hold: all but a quarter of max (at least one kept for the
 * others), so that a client holding streams open, or leaving them to its next heartbeat,
 * never keeps every other client out (DESIGN §11). 1 when max is 1. */
static unsigned stream_share(unsigned max)
{
	unsigned keep = max / 4 ? max / 4 : 1;

	return max > keep ? max - keep : 1;
}

enum core_rc api_h_events_stream(struct api_req *r)
{
	struct api *a = r->api;
	struct api_streams *h = a->streams;
	struct api_stream *s = NULL, *o;
	struct MHD_Response *resp;
	const char *board, *who = r->tok && r->tok->name ? r->tok->name : "";
	int64_t after;
	bool ok, busy, mine_full = false, by_board;
	unsigned mine = 0, share = stream_share(a->cfg.max_streams);
	enum core_rc rc;

	if ((rc = api_query(r, "board", &board)) != CORE_OK ||
	    (rc = api_query_int(r, "after", 0, 0, INT64_MAX, &after)) != CORE_OK ||
	    (rc = last_event_id(r, &after)) != CORE_OK ||
	    (rc = api_events_scope(r, &board, &by_board)) != CORE_OK)
		return rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return CORE_ERR_NOMEM;
	s->a = a;
	s->conn = r->conn;
	s->after = after;
	s->by_board = by_board;
	s->boards = boards_copy(api_auth_boards(r), &ok);
	if (!ok || (board && !(s->board = strdup(board))) ||
	    !(s->who = strdup(who)) ||
	    api_cred_keep(r, &s->cred) != CORE_OK ||
	    !buf_add(s, "retry: 2000\n: stream open\n\n", 27)) {
		stream_discard(s);
		return CORE_ERR_NOMEM;
	}
	pthread_mutex_lock(&h->mu);
	busy = h->stop || h->n >= a->cfg.max_streams;
	for (o = h->head; !busy && o; o = o->next)
		mine += strcmp(o->who, s->who) == 0;
	mine_full = !busy && mine >= share;
	busy |= mine_full;
	if (!busy) {
		/* Listed from here on: stream_free unlists it, whatever happens to resp. */
		s->next = h->head;
		if (h->head)
			h->head->prev = s;
		h->head = s;
		h->n++;
		s->last_beat_ms = api_mono_ms();
		s->seen = h->seq;
		if (!h->started)
			h->started = pthread_create(&h->th, NULL, hub_main, a) == 0;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	if (busy) {
		stream_discard(s);
		if (mine_full)
			return api_fail(r, CORE_ERR_BUSY,
					"token %s holds %u event streams, its share of the %u "
					"(the rest stay for other tokens); retry",
					who, mine, a->cfg.max_streams);
		return api_fail(r, CORE_ERR_BUSY, "at most %u event streams are open at once; retry",
				a->cfg.max_streams);
	}
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, s,
						 stream_free);
	if (!resp) {
		stream_free(s);
		return CORE_ERR_NOMEM;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	r->resp = resp;
	r->status = 200;
	return CORE_OK;
}
