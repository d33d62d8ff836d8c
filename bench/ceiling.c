/* ceiling — the least a server must do for loadgen's claim cycle, to measure what ANY server
 * could reach on this machine with this client and durable group commit (bench/README.md, "The
 * ceiling (stop 23)"). Bench-only: never linked into boardd, never a product.
 *
 *   ceiling -l 127.0.0.1:PORT | -l unix:PATH  -D DIR  [-t THREADS] [-r RECBYTES] [-J MIB]
 *           [-g WINDOW_US] [-m [-A]] [-S]
 *
 * (-g the group window, 250 us; -A with -m: libmicrohttpd accepts itself instead of the dealt
 * MHD_add_connection; -S no fdatasync, NOT durable: what the device's wait costs. usage().)
 *
 * What it does, and no more:
 * - HTTP/1.1 keep-alive, enough for bench/http.c: a request line, headers (Content-Length,
 *   Authorization, If-Match), a body; answers with boardd's headers and bodies of boardd's shape
 *   and size (the card, the claim token, the renew answer, a problem+json for a refusal).
 * - A table of cards (id -> state, claim marker, epoch) so every fence is checked as boardd
 *   checks it: claim answers "fresh": true with a new epoch, renew / state / release need the
 *   holder's marker and epoch (If-Match on the state write), a stale one is a 409.
 * - Every write (create, claim, renew, state, release) appends a journal record (RECBYTES, 512 by
 *   default: about boardd's FS journal line for these writes) and its answer is HELD until one
 *   flusher thread has written the group's records with one pwrite and fdatasync'ed the file.
 *   The file is zero-filled ahead at start (-J MiB, as store/fs/fs_segment.c does, so a sync
 *   overwrites allocated blocks and pays no inode write) and reused from its start when full
 *   (a ring: a bench has no recovery). The group window is store/fs's: when the last group had
 *   at least 4 writes, the flusher waits up to 250 us for as many again.
 * - Native mode (default): THREADS event loops (one per core by default), each an epoll set of
 *   its connections plus an eventfd; one acceptor thread deals connections round-robin (as
 *   boardd's api/listen.c acceptor does). A socket stays registered (edge-triggered, readable only)
 *   while its answer waits: no epoll_ctl per request. After a sync the flusher writes the
 *   eventfd of each loop that had a write in the group (once per loop per group); that loop
 *   sends every answer now durable, from the thread that owns the socket.
 * - -m: the same application on libmicrohttpd with boardd's pattern: its own acceptor handing
 *   each connection to MHD_add_connection (dealt over the pool threads), an internal epoll
 *   thread pool, MHD_suspend_connection at every write and MHD_resume_connection from the
 *   flusher once the group is durable, the answer queued when MHD calls back. So -m against the
 *   native mode is libmicrohttpd's share, and boardd against -m is boardd's own.
 *
 * GET /metrics answers boardd_fs_journal_lines_total and boardd_fs_journal_syncs_total, so
 * loadgen prints the group commit's width as it does for boardd. Tokens are not checked (an
 * Authorization header must be there): boardd's token lookup is its own application cost. */
#include "bench/bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CEIL_LOOPS_MAX 64
#define CEIL_GROUP_MIN 4
#define CEIL_GROUP_WAIT_US 250
#define CEIL_RBUF 16384
#define CEIL_BODY_MAX 1536
#define CEIL_ID_MAX 96

/* ---- options and the process's state ---- */

static struct {
	const char *listen;
	const char *dir;
	unsigned threads;
	size_t rec_bytes;
	uint64_t ring_bytes;
	long group_wait_us; /* the group window; store/fs's 250 */
	bool mhd;
	bool mhd_accepts;   /* -A (with -m): libmicrohttpd accepts on the listen socket itself */
	bool no_sync;       /* -S: no fdatasync (NOT durable): what the device's wait costs */
} opt = {.rec_bytes = 512, .ring_bytes = 64ull << 20, .group_wait_us = CEIL_GROUP_WAIT_US};

static _Atomic int stopping; /* set by SIGTERM/SIGINT (lock-free: signal-safe), read by all */

/* ---- the card table (under g_mu, with the journal's buffer) ---- */

enum card_state { ST_IN_PROGRESS, ST_REVIEW };

struct card {
	char id[CEIL_ID_MAX];
	char marker[64];
	char holder_marker[64];
	int64_t epoch;
	bool claimed;
	enum card_state state, claimed_from;
	int64_t lease_ms, created_ms, updated_ms, state_ms, claimed_ms, lease_until_ms;
};

struct ack; /* -m: a suspended request waiting for its group */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv; /* the flusher waits here (CLOCK_MONOTONIC) */

static struct card **cards; /* open addressing, by id */
static size_t cards_cap, cards_len;

/* The journal's group: records appended in memory under g_mu, taken by the flusher. */
static struct {
	char *buf, *spare;
	size_t len, cap, spare_cap;
	uint64_t next_seq;       /* last record's sequence number */
	size_t queued;           /* writes (native) or acks (-m) since the last take */
	bool waiting;            /* the flusher waits for `want` of them */
	size_t want;
	bool loop_mark[CEIL_LOOPS_MAX]; /* native: loops with a write in the coming group */
	struct ack *acks, *acks_tail;   /* -m: suspended requests to resume after the group */
	int fd;
	uint64_t off;
	_Atomic uint64_t durable; /* every record up to this one is on disk */
	_Atomic uint64_t lines, syncs;
	/* The flusher's time (ns): in the group window, in pwrite, in fdatasync, waking the
	 * loops or resuming the connections, and waiting for a first write. */
	_Atomic uint64_t ns_window, ns_write, ns_sync, ns_wake, ns_idle;
} jr;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t id_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

/* The slot of id (its card, or the empty slot where it goes). g_mu held. */
static struct card **card_slot(const char *id)
{
	size_t i = (size_t)id_hash(id) & (cards_cap - 1);

	while (cards[i] && strcmp(cards[i]->id, id) != 0)
		i = (i + 1) & (cards_cap - 1);
	return &cards[i];
}

static int cards_grow(void)
{
	struct card **old = cards;
	size_t n = cards_cap, i;

	cards_cap = cards_cap ? cards_cap * 2 : 1024;
	cards = calloc(cards_cap, sizeof *cards);
	if (!cards) {
		cards = old;
		cards_cap = n;
		return -1;
	}
	for (i = 0; i < n; i++)
		if (old[i])
			*card_slot(old[i]->id) = old[i];
	free(old);
	return 0;
}

/* ---- the journal: append (g_mu held), and the flusher ---- */

/* Appends one record of opt.rec_bytes (a header, the text, zeros) for the coming group.
 * Returns its sequence number, 0 when out of memory. g_mu held. */
static uint64_t journal_append_locked(const char *text, size_t tlen, int loop)
{
	size_t n = opt.rec_bytes > tlen + 16 ? opt.rec_bytes : tlen + 16;
	uint64_t sum = id_hash(text);
	char *p;

	if (jr.len + n > jr.cap) {
		size_t cap = jr.cap ? jr.cap * 2 : 256 * 1024;
		char *b;

		while (cap < jr.len + n)
			cap *= 2;
		if (!(b = realloc(jr.buf, cap)))
			return 0;
		jr.buf = b;
		jr.cap = cap;
	}
	p = jr.buf + jr.len;
	memcpy(p, &n, 8);
	memcpy(p + 8, &sum, 8);
	memcpy(p + 16, text, tlen);
	memset(p + 16 + tlen, 0, n - 16 - tlen);
	jr.len += n;
	if (loop >= 0) {
		jr.loop_mark[loop] = true;
		jr.queued++;
		if (jr.waiting && jr.queued >= jr.want)
			pthread_cond_signal(&g_cv);
	}
	return ++jr.next_seq;
}

/* Zero-fills the ring and makes it durable once (fs_segment.c's reason: a sync then overwrites
 * allocated blocks and writes no inode). */
static int journal_open(void)
{
	static const char zeros[64 * 1024];
	char path[512];
	uint64_t at;

	snprintf(path, sizeof path, "%s/journal", opt.dir);
	jr.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (jr.fd < 0) {
		perror(path);
		return -1;
	}
	for (at = 0; at < opt.ring_bytes; at += sizeof zeros)
		if (pwrite(jr.fd, zeros, sizeof zeros, (off_t)at) != (ssize_t)sizeof zeros) {
			perror("ceiling: zero-fill");
			return -1;
		}
	if (fdatasync(jr.fd) != 0) {
		perror("ceiling: fdatasync");
		return -1;
	}
	return 0;
}

static void journal_write(const char *b, size_t n)
{
	ssize_t w;

	if (jr.off + n > opt.ring_bytes)
		jr.off = 0; /* the ring's start: blocks written before */
	while (n) {
		w = pwrite(jr.fd, b, n, (off_t)jr.off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			perror("ceiling: journal pwrite");
			exit(1); /* a bench: no rollback */
		}
		b += w;
		n -= (size_t)w;
		jr.off += (uint64_t)w;
	}
}

static void acks_resume(struct ack *a);
static void loop_wake(unsigned idx);

/* store/fs's group window (fs_journal.c group_wait): when the last group had at least
 * CEIL_GROUP_MIN writes, wait up to CEIL_GROUP_WAIT_US for as many again. g_mu held. */
static void group_wait(size_t prev)
{
	struct timespec until;

	if (prev < CEIL_GROUP_MIN || jr.queued >= prev || stopping || opt.group_wait_us <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += opt.group_wait_us * 1000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	jr.want = prev;
	jr.waiting = true;
	while (jr.queued < prev && !stopping)
		if (pthread_cond_timedwait(&g_cv, &g_mu, &until) != 0)
			break;
	jr.waiting = false;
}

static void *flusher_main(void *arg)
{
	bool marks[CEIL_LOOPS_MAX];
	struct ack *acks;
	size_t prev = 0, len, lines;
	uint64_t target;
	char *b;
	unsigned i;

	(void)arg;
	uint64_t t0, t1, t2, t3;

	pthread_mutex_lock(&g_mu);
	for (;;) {
		jr.want = 1;
		jr.waiting = true;
		t0 = mono_ns();
		while (!jr.queued && !stopping)
			pthread_cond_wait(&g_cv, &g_mu);
		jr.waiting = false;
		if (stopping)
			break;
		t1 = mono_ns();
		atomic_fetch_add(&jr.ns_idle, t1 - t0);
		group_wait(prev);
		t0 = mono_ns();
		atomic_fetch_add(&jr.ns_window, t0 - t1);
		prev = jr.queued;
		jr.queued = 0;
		b = jr.buf;
		len = jr.len;
		jr.buf = jr.spare;
		jr.spare = b;
		jr.len = 0;
		lines = jr.cap; /* the capacities go with their buffers */
		jr.cap = jr.spare_cap;
		jr.spare_cap = lines;
		target = jr.next_seq;
		memcpy(marks, jr.loop_mark, sizeof marks);
		memset(jr.loop_mark, 0, sizeof jr.loop_mark);
		acks = jr.acks;
		jr.acks = jr.acks_tail = NULL;
		pthread_mutex_unlock(&g_mu);
		if (len) {
			lines = 0;
			for (size_t at = 0; at < len; lines++) {
				size_t n;

				memcpy(&n, b + at, 8);
				at += n;
			}
			journal_write(b, len);
			t2 = mono_ns();
			if (!opt.no_sync && fdatasync(jr.fd) != 0) {
				perror("ceiling: fdatasync");
				exit(1);
			}
			t3 = mono_ns();
			atomic_fetch_add(&jr.ns_write, t2 - t0);
			atomic_fetch_add(&jr.ns_sync, t3 - t2);
			atomic_fetch_add(&jr.lines, lines);
			atomic_fetch_add(&jr.syncs, 1);
		}
		t0 = mono_ns();
		atomic_store(&jr.durable, target);
		for (i = 0; !opt.mhd && i < opt.threads; i++)
			if (marks[i])
				loop_wake(i);
		if (acks)
			acks_resume(acks);
		atomic_fetch_add(&jr.ns_wake, mono_ns() - t0);
		pthread_mutex_lock(&g_mu);
	}
	pthread_mutex_unlock(&g_mu);
	return NULL;
}

/* ---- the application: one request in, one answer out ---- */

struct req_in {
	const char *method, *path, *body;
	size_t plen, blen;
	bool auth;
	int64_t if_match; /* -1: none */
};

struct answer {
	int status;
	const char *ctype;
	char location[CEIL_ID_MAX + 16];
	char body[CEIL_BODY_MAX];
	size_t blen;
	uint64_t seq; /* 0: nothing to wait for; else the journal record to be durable first */
};

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "2026-12-04T02:15:07.965Z" into out (25 bytes); the seconds' text cached per thread. */
static void time_fmt(int64_t ms, char out[32])
{
	static _Thread_local int64_t sec = -1;
	static _Thread_local char head[24];
	struct tm tm;
	time_t t = (time_t)(ms / 1000);

	if (t != sec) {
		gmtime_r(&t, &tm);
		strftime(head, sizeof head, "%Y-%m-%dT%H:%M:%S", &tm);
		sec = t;
	}
	snprintf(out, 32, "%s.%03dZ", head, (int)(ms % 1000));
}

/* The string value of "key" in a flat JSON body (the bench's: no escapes), into out. */
static bool body_str(const char *b, size_t blen, const char *key, char *out, size_t len)
{
	char pat[40];
	const char *p, *e, *end = b + blen;
	int k = snprintf(pat, sizeof pat, "\"%s\":\"", key);

	p = memmem(b, blen, pat, (size_t)k);
	if (!p)
		return false;
	p += k;
	e = memchr(p, '"', (size_t)(end - p));
	if (!e || (size_t)(e - p) >= len)
		return false;
	memcpy(out, p, (size_t)(e - p));
	out[e - p] = '\0';
	return true;
}

static bool body_int(const char *b, size_t blen, const char *key, int64_t *out)
{
	char pat[40];
	const char *p;
	int k = snprintf(pat, sizeof pat, "\"%s\":", key);

	p = memmem(b, blen, pat, (size_t)k);
	if (!p)
		return false;
	*out = strtoll(p + k, NULL, 10);
	return true;
}

static void problem(struct answer *a, int status, const char *code, const char *detail)
{
	a->status = status;
	a->ctype = "application/problem+json";
	a->blen = (size_t)snprintf(a->body, sizeof a->body,
				   "{\"type\":\"/problems/%s\",\"title\":\"%s\",\"status\":%d,"
				   "\"code\":\"%s\",\"detail\":\"%s\"}",
				   code, code, status, code, detail);
	a->seq = 0;
}

/* The card as boardd writes it (store/json_text.c jb_card: same fields, same order). */
static void card_render(const struct card *c, struct answer *a)
{
	char cr[32], up[32], st[32], ca[32], lu[32], claim[320];

	time_fmt(c->created_ms, cr);
	time_fmt(c->updated_ms, up);
	time_fmt(c->state_ms, st);
	if (c->claimed) {
		time_fmt(c->claimed_ms, ca);
		time_fmt(c->lease_until_ms, lu);
		snprintf(claim, sizeof claim,
			 "{\"marker\":\"%s\",\"holder\":\"bench-worker\",\"epoch\":%" PRId64
			 ",\"claimed_at\":\"%s\",\"lease_until\":\"%s\",\"lease_ms\":%" PRId64
			 ",\"from\":\"%s\"}",
			 c->holder_marker, c->epoch, ca, lu, c->lease_ms,
			 c->claimed_from == ST_REVIEW ? "review" : "in_progress");
	} else {
		snprintf(claim, sizeof claim, "null");
	}
	a->blen = (size_t)snprintf(
		a->body, sizeof a->body,
		"{\"id\":\"%s\",\"board\":\"default\",\"title\":\"bench\",\"body\":\"\",\"state\":"
		"\"%s\",\"priority\":0,\"labels\":[],\"blockers\":[],\"comments\":[],\"claim\":%s,"
		"\"claim_epoch\":%" PRId64 ",\"last_run_id\":null,\"awaiting_input\":false,"
		"\"gave_up\":null,\"state_reason\":null,\"created_at\":\"%s\",\"updated_at\":\"%s\","
		"\"state_at\":\"%s\",\"not_before\":null,\"attempts\":0}",
		c->id, c->state == ST_REVIEW ? "review" : "in_progress", claim, c->epoch, cr, up, st);
	if (a->blen >= sizeof a->body)
		a->blen = sizeof a->body - 1;
}

enum op { OP_CREATE, OP_CLAIM, OP_RENEW, OP_STATE, OP_RELEASE };

static const char *const op_name[] = {"create", "claim", "renew", "state", "release"};

/* Routes and applies one request. A write appends its record under g_mu (in the order of the
 * changes) and a->seq says which record must be durable before the answer goes. loop: the
 * native loop that will send the answer (it is woken after the group), -1 under -m. */
static void app_dispatch(const struct req_in *r, struct answer *a, int loop)
{
	char id[CEIL_ID_MAX], marker[64] = "", to[32] = "", rec[256];
	const char *p = r->path, *end = r->path + r->plen, *slash;
	struct card snap, **slot, *c;
	enum op op;
	int64_t epoch = -1, lease_ms = 30000, now;
	bool fresh = false;
	int n;

	a->status = 200;
	a->ctype = "application/json";
	a->location[0] = '\0';
	a->seq = 0;
	if (strcmp(r->method, "GET") == 0 && r->plen == 8 && memcmp(p, "/metrics", 8) == 0) {
		a->ctype = "text/plain; version=0.0.4";
		a->blen = (size_t)snprintf(a->body, sizeof a->body,
					   "# ceiling\nboardd_fs_journal_lines_total %" PRIu64
					   "\nboardd_fs_journal_syncs_total %" PRIu64
					   "\nceiling_flusher_ns_total{in=\"idle\"} %" PRIu64
					   "\nceiling_flusher_ns_total{in=\"window\"} %" PRIu64
					   "\nceiling_flusher_ns_total{in=\"pwrite\"} %" PRIu64
					   "\nceiling_flusher_ns_total{in=\"fdatasync\"} %" PRIu64
					   "\nceiling_flusher_ns_total{in=\"wake\"} %" PRIu64 "\n",
					   atomic_load(&jr.lines), atomic_load(&jr.syncs),
					   atomic_load(&jr.ns_idle), atomic_load(&jr.ns_window),
					   atomic_load(&jr.ns_write), atomic_load(&jr.ns_sync),
					   atomic_load(&jr.ns_wake));
		return;
	}
	if (!r->auth) {
		problem(a, 401, "unauthorized", "no bearer token");
		return;
	}
	if (r->plen < 9 || memcmp(p, "/v1/cards", 9) != 0) {
		problem(a, 404, "not_found", "no such route");
		return;
	}
	p += 9;
	if (p == end) {
		if (strcmp(r->method, "POST") != 0) {
			problem(a, 405, "method_not_allowed", "POST only");
			return;
		}
		op = OP_CREATE;
		if (!body_str(r->body, r->blen, "id", id, sizeof id)) {
			problem(a, 400, "bad_request", "id missing");
			return;
		}
	} else {
		if (*p++ != '/' || !(slash = memchr(p, '/', (size_t)(end - p))) ||
		    (size_t)(slash - p) >= sizeof id) {
			problem(a, 404, "not_found", "no such route");
			return;
		}
		memcpy(id, p, (size_t)(slash - p));
		id[slash - p] = '\0';
		slash++;
		n = (int)(end - slash);
		if (n == 5 && memcmp(slash, "claim", 5) == 0 && strcmp(r->method, "POST") == 0)
			op = OP_CLAIM;
		else if (n == 5 && memcmp(slash, "renew", 5) == 0 && strcmp(r->method, "POST") == 0)
			op = OP_RENEW;
		else if (n == 5 && memcmp(slash, "state", 5) == 0 && strcmp(r->method, "PATCH") == 0)
			op = OP_STATE;
		else if (n == 7 && memcmp(slash, "release", 7) == 0 && strcmp(r->method, "POST") == 0)
			op = OP_RELEASE;
		else {
			problem(a, 404, "not_found", "no such route");
			return;
		}
		if (!body_str(r->body, r->blen, "marker", marker, sizeof marker)) {
			problem(a, 400, "bad_request", "marker missing");
			return;
		}
		body_int(r->body, r->blen, "epoch", &epoch);
		body_int(r->body, r->blen, "lease_ms", &lease_ms);
		if (op == OP_STATE) {
			epoch = r->if_match;
			if (!body_str(r->body, r->blen, "to", to, sizeof to) ||
			    (strcmp(to, "review") != 0 && strcmp(to, "in_progress") != 0)) {
				problem(a, 400, "bad_request", "to: review or in_progress");
				return;
			}
		}
	}
	now = wall_ms();
	pthread_mutex_lock(&g_mu);
	if (cards_len * 2 >= cards_cap && cards_grow() != 0) {
		pthread_mutex_unlock(&g_mu);
		problem(a, 503, "unavailable", "out of memory");
		return;
	}
	slot = card_slot(id);
	c = *slot;
	if (op == OP_CREATE) {
		if (c) {
			pthread_mutex_unlock(&g_mu);
			problem(a, 409, "conflict", "a card with this id exists");
			return;
		}
		c = calloc(1, sizeof *c);
		if (!c) {
			pthread_mutex_unlock(&g_mu);
			problem(a, 503, "unavailable", "out of memory");
			return;
		}
		snprintf(c->id, sizeof c->id, "%s", id);
		c->created_ms = c->updated_ms = c->state_ms = now;
		*slot = c;
		cards_len++;
		a->status = 201;
		snprintf(a->location, sizeof a->location, "/v1/cards/%s", id);
	} else if (!c) {
		pthread_mutex_unlock(&g_mu);
		problem(a, 404, "not_found", "no such card");
		return;
	} else if (op == OP_CLAIM) {
		if (c->claimed && strcmp(c->holder_marker, marker) != 0) {
			pthread_mutex_unlock(&g_mu);
			problem(a, 409, "claim_conflict", "another marker holds the card");
			return;
		}
		fresh = !c->claimed;
		if (fresh) {
			c->claimed = true;
			c->epoch++;
			c->claimed_ms = now;
			c->claimed_from = c->state;
			snprintf(c->holder_marker, sizeof c->holder_marker, "%s", marker);
		}
		c->lease_ms = lease_ms;
		c->lease_until_ms = now + lease_ms;
	} else if (!c->claimed || strcmp(c->holder_marker, marker) != 0 || epoch != c->epoch) {
		pthread_mutex_unlock(&g_mu);
		problem(a, 409, "claim_conflict",
			"the card is not held by this claim token; nothing was changed");
		return;
	} else if (op == OP_RENEW) {
		c->lease_ms = lease_ms;
		c->lease_until_ms = now + lease_ms;
	} else if (op == OP_STATE) {
		c->state = strcmp(to, "review") == 0 ? ST_REVIEW : ST_IN_PROGRESS;
		c->state_ms = now;
	} else {
		c->claimed = false;
	}
	c->updated_ms = now;
	snap = *c;
	n = snprintf(rec, sizeof rec, "%s %s %s %" PRId64 " %d %d %" PRId64, op_name[op], id,
		     snap.holder_marker, snap.epoch, (int)snap.claimed, (int)snap.state, now);
	a->seq = journal_append_locked(rec, (size_t)n < sizeof rec ? (size_t)n : sizeof rec - 1,
				       loop);
	pthread_mutex_unlock(&g_mu);
	if (!a->seq) {
		problem(a, 503, "unavailable", "journal out of memory");
		return;
	}
	if (op == OP_CLAIM || op == OP_RENEW) {
		char ca[32], lu[32];

		time_fmt(snap.claimed_ms, ca);
		time_fmt(snap.lease_until_ms, lu);
		if (op == OP_CLAIM)
			a->blen = (size_t)snprintf(
				a->body, sizeof a->body,
				"{\"marker\":\"%s\",\"epoch\":%" PRId64 ",\"claimed_at\":\"%s\","
				"\"lease_until\":\"%s\",\"lease_ms\":%" PRId64
				",\"renew_after_ms\":%" PRId64 ",\"fresh\":%s}",
				snap.holder_marker, snap.epoch, ca, lu, snap.lease_ms,
				snap.lease_ms / 3, fresh ? "true" : "false");
		else
			a->blen = (size_t)snprintf(a->body, sizeof a->body,
						   "{\"marker\":\"%s\",\"epoch\":%" PRId64
						   ",\"lease_until\":\"%s\",\"lease_ms\":%" PRId64 "}",
						   snap.holder_marker, snap.epoch, lu, snap.lease_ms);
	} else {
		card_render(&snap, a);
	}
}

/* ---- native mode: event loops ---- */

struct conn {
	int fd;
	struct loop *l;
	char rbuf[CEIL_RBUF];
	size_t rlen;
	char *w;          /* the answer being sent (wbuf), from woff to wlen */
	size_t woff, wlen;
	char wbuf[CEIL_BODY_MAX + 512];
	uint64_t wait_seq; /* != 0: the answer in wbuf waits for this record */
	bool closing;      /* the peer left, or a bad request: close once nothing is owed */
	bool want_out;     /* EPOLLOUT asked for (a send that did not finish) */
	bool dead;         /* closed: freed after this batch of events */
	struct conn *next_wait, *next_dead;
};

struct loop {
	unsigned idx;
	int ep, efd;
	pthread_t th;
	struct conn *wait_head, *wait_tail; /* answers owed, in journal order */
	struct conn *dead;                  /* closed in this batch, freed after it */
	_Atomic bool efd_armed;             /* a wake is pending in the eventfd */
};

static struct loop *loops;

/* The flusher: loop idx has answers in the group just made durable. */
static void loop_wake(unsigned idx)
{
	struct loop *l = &loops[idx];
	uint64_t one = 1;

	if (atomic_exchange(&l->efd_armed, true))
		return; /* already signalled, not yet read */
	if (write(l->efd, &one, sizeof one) < 0 && errno != EAGAIN)
		perror("ceiling: eventfd write");
}

static const char *status_text(int s)
{
	switch (s) {
	case 200: return "200 OK";
	case 201: return "201 Created";
	case 400: return "400 Bad Request";
	case 401: return "401 Unauthorized";
	case 404: return "404 Not Found";
	case 405: return "405 Method Not Allowed";
	case 409: return "409 Conflict";
	default: return "503 Service Unavailable";
	}
}

/* "Fri, 04 Dec 2026 02:15:07 GMT", cached per thread and second. */
static const char *http_date(void)
{
	static _Thread_local time_t sec = -1;
	static _Thread_local char text[40];
	time_t t = time(NULL);
	struct tm tm;

	if (t != sec) {
		gmtime_r(&t, &tm);
		strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
		sec = t;
	}
	return text;
}

/* Closes now, frees after the batch of events (a later event of the batch may name c). */
static void conn_close(struct conn *c)
{
	if (c->dead)
		return;
	close(c->fd); /* leaves the epoll set with it */
	c->dead = true;
	c->next_dead = c->l->dead;
	c->l->dead = c;
}

/* Sends what is left of the answer. 0: all sent (or the peer is gone: closing), 1: the socket
 * is full (EPOLLOUT asked for). */
static int conn_send(struct conn *c)
{
	ssize_t k;

	while (c->woff < c->wlen) {
		k = send(c->fd, c->w + c->woff, c->wlen - c->woff, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};

			if (!c->want_out && epoll_ctl(c->l->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
				c->want_out = true;
			return 1;
		}
		if (k <= 0) {
			c->closing = true;
			c->woff = c->wlen = 0;
			return 0;
		}
		c->woff += (size_t)k;
	}
	c->woff = c->wlen = 0;
	if (c->want_out) {
		struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = c};

		if (epoll_ctl(c->l->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
			c->want_out = false;
	}
	return 0;
}

static void answer_format(struct conn *c, const struct answer *a)
{
	int n = snprintf(c->wbuf, sizeof c->wbuf,
			 "HTTP/1.1 %s\r\nDate: %s\r\nContent-Type: %s\r\n%s%s%sCache-Control: "
			 "no-store\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %zu\r\n\r\n",
			 status_text(a->status), http_date(), a->ctype,
			 a->location[0] ? "Location: " : "", a->location,
			 a->location[0] ? "\r\n" : "", a->blen);

	if (n < 0 || (size_t)n + a->blen > sizeof c->wbuf) {
		c->closing = true;
		return;
	}
	memcpy(c->wbuf + n, a->body, a->blen);
	c->w = c->wbuf;
	c->woff = 0;
	c->wlen = (size_t)n + a->blen;
}

/* Serves the complete requests in rbuf until an answer must wait for the journal. */
static void conn_process(struct conn *c)
{
	while (!c->wait_seq && !c->closing && c->woff == c->wlen) {
		char method[8], *hend, *sp1, *sp2;
		const char *v;
		size_t hlen, vlen, clen = 0, mlen;
		struct req_in r = {.if_match = -1};
		struct answer a;

		c->rbuf[c->rlen] = '\0';
		hend = strstr(c->rbuf, "\r\n\r\n");
		if (!hend) {
			if (c->rlen >= sizeof c->rbuf - 1)
				c->closing = true; /* headers too large for a bench */
			return;
		}
		hlen = (size_t)(hend - c->rbuf) + 4;
		if ((v = bench_http_header_find(c->rbuf, hend, "Content-Length", &vlen)))
			clen = strtoul(v, NULL, 10);
		if (hlen + clen >= sizeof c->rbuf) {
			c->closing = true;
			return;
		}
		if (c->rlen < hlen + clen)
			return; /* the body is still coming */
		sp1 = memchr(c->rbuf, ' ', hlen);
		sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(hend - sp1 - 1)) : NULL;
		mlen = sp1 ? (size_t)(sp1 - c->rbuf) : 0;
		if (!sp2 || mlen == 0 || mlen >= sizeof method) {
			c->closing = true;
			return;
		}
		memcpy(method, c->rbuf, mlen);
		method[mlen] = '\0';
		r.method = method;
		r.path = sp1 + 1;
		r.plen = (size_t)(sp2 - sp1 - 1);
		r.body = c->rbuf + hlen;
		r.blen = clen;
		r.auth = bench_http_header_find(c->rbuf, hend, "Authorization", &vlen) != NULL;
		if ((v = bench_http_header_find(c->rbuf, hend, "If-Match", &vlen)))
			r.if_match = strtoll(v + (*v == '"'), NULL, 10);
		app_dispatch(&r, &a, (int)c->l->idx);
		memmove(c->rbuf, c->rbuf + hlen + clen, c->rlen - hlen - clen);
		c->rlen -= hlen + clen;
		answer_format(c, &a);
		if (a.seq) { /* held until its group is durable */
			c->wait_seq = a.seq;
			c->next_wait = NULL;
			if (c->l->wait_tail)
				c->l->wait_tail->next_wait = c;
			else
				c->l->wait_head = c;
			c->l->wait_tail = c;
			return;
		}
		if (conn_send(c))
			return;
	}
}

/* Reads what arrived and serves it. Edge-triggered: a short read took everything there was
 * (new bytes raise a new edge), so no recv ends in EAGAIN. */
static void conn_read(struct conn *c)
{
	ssize_t k;

	for (;;) {
		size_t room = sizeof c->rbuf - 1 - c->rlen;

		if (!room) {
			c->closing = true;
			break;
		}
		k = recv(c->fd, c->rbuf + c->rlen, room, MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			break;
		if (k <= 0) {
			c->closing = true;
			break;
		}
		c->rlen += (size_t)k;
		if ((size_t)k < room)
			break;
	}
	conn_process(c);
}

/* The loop's eventfd fired: send every answer whose record is durable now, in order. */
static void loop_durable(struct loop *l)
{
	uint64_t v, durable;
	struct conn *c;

	/* Read, then disarm, then look: a wake skipped while armed was true came with a durable
	 * value stored before it, which the load below sees. */
	if (read(l->efd, &v, sizeof v) < 0 && errno != EAGAIN)
		perror("ceiling: eventfd read");
	atomic_store(&l->efd_armed, false);
	durable = atomic_load(&jr.durable);
	while ((c = l->wait_head) && c->wait_seq <= durable) {
		l->wait_head = c->next_wait;
		if (!l->wait_head)
			l->wait_tail = NULL;
		c->wait_seq = 0;
		if (c->closing) {
			conn_close(c);
			continue;
		}
		if (conn_send(c) == 0)
			conn_process(c); /* a request that came meanwhile (pipelined) */
		if (c->closing && !c->wait_seq)
			conn_close(c);
	}
}

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	struct epoll_event evs[64];
	int n, i;

	while (!stopping) {
		n = epoll_wait(l->ep, evs, 64, 500);
		for (i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			if (!c) {
				loop_durable(l);
				continue;
			}
			if (c->dead)
				continue;
			if ((evs[i].events & EPOLLOUT) && c->woff < c->wlen && !c->wait_seq) {
				if (conn_send(c) == 0)
					conn_process(c);
			}
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				conn_read(c);
			if (c->closing && !c->wait_seq)
				conn_close(c);
		}
		while (l->dead) {
			struct conn *d = l->dead;

			l->dead = d->next_dead;
			free(d);
		}
	}
	return NULL;
}

/* ---- listening and dealing connections (both modes) ---- */

static int listen_fd = -1;
static struct MHD_Daemon *daemon_mhd;

static int listen_open(void)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int fd, on = 1;

	if (strncmp(opt.listen, "unix:", 5) == 0) {
		struct sockaddr_un *su = (struct sockaddr_un *)&ss;
		const char *path = opt.listen + 5;

		if (!path[0] || strlen(path) >= sizeof su->sun_path) {
			fprintf(stderr, "ceiling: bad unix socket path %s\n", path);
			return -1;
		}
		su->sun_family = AF_UNIX;
		memcpy(su->sun_path, path, strlen(path) + 1);
		len = sizeof *su;
		unlink(path);
	} else {
		struct sockaddr_in *si = (struct sockaddr_in *)&ss;
		const char *colon = strrchr(opt.listen, ':');
		char host[64];

		if (!colon || (size_t)(colon - opt.listen) >= sizeof host) {
			fprintf(stderr, "ceiling: -l 127.0.0.1:PORT or unix:PATH\n");
			return -1;
		}
		memcpy(host, opt.listen, (size_t)(colon - opt.listen));
		host[colon - opt.listen] = '\0';
		si->sin_family = AF_INET;
		si->sin_port = htons((uint16_t)strtoul(colon + 1, NULL, 10));
		if (inet_pton(AF_INET, host, &si->sin_addr) != 1) {
			fprintf(stderr, "ceiling: not an IPv4 address: %s\n", host);
			return -1;
		}
		len = sizeof *si;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
	if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 1024) != 0) {
		perror(opt.listen);
		close(fd);
		return -1;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in got;
		socklen_t gl = sizeof got;

		getsockname(fd, (struct sockaddr *)&got, &gl);
		fprintf(stderr, "ceiling: listening on %s (port %u), %s, %u threads%s\n",
			opt.listen, (unsigned)ntohs(got.sin_port),
			opt.mhd ? "libmicrohttpd" : "own epoll loops", opt.threads,
			opt.no_sync ? ", NO fdatasync (not durable)" : "");
	} else {
		fprintf(stderr, "ceiling: listening on %s, %s, %u threads%s\n", opt.listen,
			opt.mhd ? "libmicrohttpd" : "own epoll loops", opt.threads,
			opt.no_sync ? ", NO fdatasync (not durable)" : "");
	}
	return fd;
}

/* fd, or a duplicate of it numbered `want` modulo n (api/listen.c fd_for_thread: MHD puts a
 * connection on pool thread fd mod pool size). */
static int fd_for_thread(int fd, unsigned n, unsigned want)
{
	int from, dup;

	if (n < 2 || (unsigned)fd % n == want)
		return fd;
	from = fd + (int)((want + n - (unsigned)fd % n) % n);
	for (;;) {
		dup = fcntl(fd, F_DUPFD_CLOEXEC, from);
		if (dup < 0)
			return fd;
		if ((unsigned)dup % n == want) {
			close(fd);
			return dup;
		}
		close(dup);
		from = dup + (int)((want + n - (unsigned)dup % n) % n);
	}
}

static void *acceptor_main(void *arg)
{
	struct sockaddr_storage peer;
	unsigned next = 0;
	socklen_t len;
	int fd, one = 1;

	(void)arg;
	while (!stopping) {
		len = sizeof peer;
		fd = accept4(listen_fd, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				usleep(10000);
			continue;
		}
		if (peer.ss_family == AF_INET)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (opt.mhd) {
			fd = fd_for_thread(fd, opt.threads, next);
			next = (next + 1) % opt.threads;
			(void)MHD_add_connection(daemon_mhd, fd, (struct sockaddr *)&peer, len);
		} else {
			struct conn *c = calloc(1, sizeof *c);
			struct epoll_event ev = {.events = EPOLLIN | EPOLLET};

			if (!c) {
				close(fd);
				continue;
			}
			c->fd = fd;
			c->l = &loops[next];
			c->w = c->wbuf;
			ev.data.ptr = c;
			next = (next + 1) % opt.threads;
			/* The loop owns c from here on. */
			if (epoll_ctl(c->l->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
				close(fd);
				free(c);
			}
		}
	}
	return NULL;
}

/* ---- -m: the same application on libmicrohttpd, boardd's suspend/resume ---- */

struct ack {
	struct MHD_Connection *conn;
	struct ack *next;
	bool waiting, done;
	struct answer a;
	char body[CEIL_BODY_MAX];
	size_t blen;
	bool too_long;
};

/* The flusher: the group is durable; hand every suspended request back to MHD's thread. */
static void acks_resume(struct ack *a)
{
	struct ack *next;

	for (; a; a = next) {
		next = a->next;
		a->done = true;
		MHD_resume_connection(a->conn); /* a belongs to MHD's thread from here on */
	}
}

static enum MHD_Result mhd_answer(struct MHD_Connection *conn, const struct answer *a)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(a->blen, (void *)a->body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ok;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->ctype);
	if (a->location[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, a->location);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	ok = MHD_queue_response(conn, (unsigned)a->status, resp);
	MHD_destroy_response(resp);
	return ok;
}

static enum MHD_Result mhd_request(void *cls, struct MHD_Connection *conn, const char *url,
				   const char *method, const char *version,
				   const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct ack *k = *con_cls;
	struct req_in r = {.if_match = -1};
	const char *v;

	(void)cls;
	(void)version;
	if (!k) {
		k = calloc(1, sizeof *k);
		if (!k)
			return MHD_NO;
		k->conn = conn;
		*con_cls = k;
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (k->blen + *upload_data_size < sizeof k->body) {
			memcpy(k->body + k->blen, upload_data, *upload_data_size);
			k->blen += *upload_data_size;
		} else {
			k->too_long = true;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (k->done) /* resumed: the group holding its record is durable */
		return mhd_answer(conn, &k->a);
	if (k->too_long) {
		problem(&k->a, 400, "bad_request", "body too long");
		return mhd_answer(conn, &k->a);
	}
	r.method = method;
	r.path = url;
	r.plen = strlen(url);
	r.body = k->body;
	r.blen = k->blen;
	r.auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization") != NULL;
	if ((v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-Match")))
		r.if_match = strtoll(v + (*v == '"'), NULL, 10);
	app_dispatch(&r, &k->a, -1);
	if (!k->a.seq)
		return mhd_answer(conn, &k->a);
	/* boardd's ack_finish: suspend, then hand the wait to the flusher. */
	MHD_suspend_connection(conn);
	pthread_mutex_lock(&g_mu);
	k->next = NULL;
	if (jr.acks_tail)
		jr.acks_tail->next = k;
	else
		jr.acks = k;
	jr.acks_tail = k;
	jr.queued++;
	if (jr.waiting && jr.queued >= jr.want)
		pthread_cond_signal(&g_cv);
	pthread_mutex_unlock(&g_mu);
	return MHD_YES;
}

/* libmicrohttpd's messages, as boardd's lib_log treats them: the "Setting ... failed" ones
 * dropped first thing (over a unix socket handed in by MHD_add_connection, 0.9.75 says three
 * per answer: its TCP_NODELAY and TCP_CORK setsockopt fail with EOPNOTSUPP, which it does not
 * take as "not TCP", so it tries again at every send; bench/README.md, "The ceiling"), the
 * others counted, the first one shown. */
static _Atomic uint64_t mhd_messages;

__attribute__((format(printf, 2, 0)))
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	if (fmt[0] == 'S' && strncmp(fmt, "Setting ", 8) == 0)
		return;
	if (atomic_fetch_add(&mhd_messages, 1) == 0) {
		fprintf(stderr, "ceiling: libmicrohttpd (first message; the others counted): ");
		vfprintf(stderr, fmt, ap);
	}
}

static void mhd_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			  enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	free(*con_cls);
	*con_cls = NULL;
}

/* ---- main ---- */

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stopping, 1);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: ceiling -l 127.0.0.1:PORT|unix:PATH -D DIR [-t THREADS] [-r RECBYTES]\n"
		"               [-J MIB] [-g US] [-m [-A]] [-S]\n"
		"  -l ADDR   where to listen (TCP on a numeric IPv4 address, or a unix socket)\n"
		"  -D DIR    where the journal file goes (a real disk: it is fdatasync'ed)\n"
		"  -t N      event-loop threads (-m: libmicrohttpd's pool threads); default one\n"
		"            per core\n"
		"  -r BYTES  bytes per journal record (512: about boardd's for these writes)\n"
		"  -J MIB    the journal ring, zero-filled at start (64)\n"
		"  -g US     the group window (250, store/fs's; 0: none)\n"
		"  -m        libmicrohttpd with boardd's suspend/resume instead of own loops\n"
		"  -A        with -m: libmicrohttpd accepts itself (boardd's acceptor deals them)\n"
		"  -S        no fdatasync: NOT durable, only to show what the device's wait costs\n");
	return 2;
}

int main(int argc, char **argv)
{
	pthread_condattr_t ca;
	pthread_t flusher, acceptor;
	struct sigaction sa = {.sa_handler = on_signal};
	unsigned i;
	int c;

	while ((c = getopt(argc, argv, "l:D:t:r:J:g:mAS")) != -1) {
		switch (c) {
		case 'l': opt.listen = optarg; break;
		case 'D': opt.dir = optarg; break;
		case 't': opt.threads = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'r': opt.rec_bytes = strtoul(optarg, NULL, 10); break;
		case 'J': opt.ring_bytes = strtoull(optarg, NULL, 10) << 20; break;
		case 'g': opt.group_wait_us = strtol(optarg, NULL, 10); break;
		case 'm': opt.mhd = true; break;
		case 'A': opt.mhd_accepts = true; break;
		case 'S': opt.no_sync = true; break;
		default: return usage();
		}
	}
	if (optind != argc || !opt.listen || !opt.dir || opt.threads > CEIL_LOOPS_MAX ||
	    (opt.mhd_accepts && !opt.mhd) ||
	    opt.rec_bytes < 64 || opt.rec_bytes > 65536 || opt.ring_bytes < (1u << 20))
		return usage();
	if (!opt.threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		opt.threads = n < 1 ? 1 : n > CEIL_LOOPS_MAX ? CEIL_LOOPS_MAX : (unsigned)n;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g_cv, &ca);
	if (cards_grow() != 0 || journal_open() != 0 || (listen_fd = listen_open()) < 0)
		return 1;
	if (opt.mhd) {
		/* boardd's way (api/listen.c): no listen socket of the library's, every connection
		 * handed in by the acceptor; -A: the library accepts on ours (then it knows a unix
		 * socket is not TCP, and it deals the connections as its threads wake). */
		daemon_mhd = MHD_start_daemon(
			MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
				(opt.mhd_accepts ? 0 : MHD_USE_NO_LISTEN_SOCKET) | MHD_USE_ERROR_LOG,
			0, NULL, NULL, mhd_request, NULL, MHD_OPTION_THREAD_POOL_SIZE,
			(unsigned)opt.threads, MHD_OPTION_CONNECTION_TIMEOUT, 60u,
			MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16u * 1024u),
			MHD_OPTION_NOTIFY_COMPLETED, mhd_completed, NULL,
			MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
			opt.mhd_accepts ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_END, listen_fd,
			MHD_OPTION_END);
		if (!daemon_mhd) {
			fprintf(stderr, "ceiling: MHD_start_daemon failed\n");
			return 1;
		}
	} else {
		loops = calloc(opt.threads, sizeof *loops);
		if (!loops)
			return 1;
		for (i = 0; i < opt.threads; i++) {
			struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

			loops[i].idx = i;
			loops[i].ep = epoll_create1(EPOLL_CLOEXEC);
			loops[i].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
			if (loops[i].ep < 0 || loops[i].efd < 0 ||
			    epoll_ctl(loops[i].ep, EPOLL_CTL_ADD, loops[i].efd, &ev) != 0 ||
			    pthread_create(&loops[i].th, NULL, loop_main, &loops[i]) != 0 ||
			    pthread_detach(loops[i].th) != 0) {
				perror("ceiling: loop");
				return 1;
			}
		}
	}
	/* Detached: the process ends with them (a bench drops the answers still owed). */
	if (pthread_create(&flusher, NULL, flusher_main, NULL) != 0 ||
	    pthread_detach(flusher) != 0 ||
	    (!opt.mhd_accepts && (pthread_create(&acceptor, NULL, acceptor_main, NULL) != 0 ||
				  pthread_detach(acceptor) != 0))) {
		perror("ceiling: thread");
		return 1;
	}
	while (!stopping)
		pause();
	/* A bench: the answers owed are dropped with the process. */
	if (strncmp(opt.listen, "unix:", 5) == 0)
		unlink(opt.listen + 5);
	{
		uint64_t n = atomic_load(&jr.syncs) ? atomic_load(&jr.syncs) : 1;

		fprintf(stderr,
			"ceiling: %" PRIu64 " journal records in %" PRIu64 " syncs; per group: "
			"window %.0f us, pwrite %.0f us, fdatasync %.0f us, wake %.0f us, idle %.0f us\n",
			atomic_load(&jr.lines), atomic_load(&jr.syncs),
			(double)atomic_load(&jr.ns_window) / 1e3 / (double)n,
			(double)atomic_load(&jr.ns_write) / 1e3 / (double)n,
			(double)atomic_load(&jr.ns_sync) / 1e3 / (double)n,
			(double)atomic_load(&jr.ns_wake) / 1e3 / (double)n,
			(double)atomic_load(&jr.ns_idle) / 1e3 / (double)n);
		if (opt.mhd)
			fprintf(stderr, "ceiling: libmicrohttpd messages: %" PRIu64 "\n",
				atomic_load(&mhd_messages));
	}
	return 0;
}
