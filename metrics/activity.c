/* activity — the per-board, per-minute rings of the last hour (activity.h). One mutex guards
 * the table: an event is a lookup among ACTIVITY_BOARDS_MAX hashes and an add, far from the
 * request path's cost; the name is hashed before the lock is taken. */
#include "metrics/activity.h"
#include "metrics/metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MINUTE_MS 60000

struct slot {
	int64_t minute; /* minute number (ms / 60 000) this slot holds; -1: none */
	uint64_t n[ACTIVITY_SERIES_];
};

struct gslot {
	int64_t minute;
	uint64_t c[ACTIVITY_COLS_MAX];
};

struct entry {
	char name[ACTIVITY_NAME_MAX + 1]; /* "": unused */
	uint64_t hash;
	int64_t taken;   /* ms the board took this entry (its counts start there) */
	int64_t used;    /* ms of the last count or reader's sample (the eviction order) */
	int64_t sampled; /* ms of the last sample (freshness) */
	size_t n_cols;
	char cols[ACTIVITY_COLS_MAX][ACTIVITY_NAME_MAX + 1];
	struct slot s[ACTIVITY_MINUTES];
	struct gslot g[ACTIVITY_MINUTES];
};

struct activity {
	pthread_mutex_t mu;
	int64_t born;        /* ms of activity_new */
	int64_t first_evict; /* ms the first entry was given up to another board; 0: never */
	struct entry b[ACTIVITY_BOARDS_MAX];
};

static const char *const names[ACTIVITY_SERIES_] = {"claims", "completions", "failures",
						    "reaper_actions"};

const char *activity_series_name(enum activity_series s)
{
	return (unsigned)s < ACTIVITY_SERIES_ ? names[s] : "";
}

int64_t activity_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t idx(int64_t minute)
{
	return (size_t)(minute % ACTIVITY_MINUTES);
}

/* FNV-1a; 0 when the name is not one the table keeps (NULL, empty or too long). */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 14695981039346656037ULL;
	size_t i;

	if (!s || !*s)
		return 0;
	for (i = 0; s[i]; i++) {
		if (i == ACTIVITY_NAME_MAX)
			return 0;
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	}
	return h ? h : 1;
}

/* An entry holding nothing (its slots' minutes unset: no memset of its 18 kB). */
static void entry_clear(struct entry *e)
{
	size_t k;

	e->name[0] = '\0';
	e->hash = 0;
	e->n_cols = 0;
	e->used = e->sampled = e->taken = 0;
	for (k = 0; k < ACTIVITY_MINUTES; k++)
		e->s[k].minute = e->g[k].minute = -1;
}

struct activity *activity_new(void)
{
	struct activity *a = calloc(1, sizeof(*a));
	size_t k;

	if (!a)
		return NULL;
	pthread_mutex_init(&a->mu, NULL);
	a->born = activity_now_ms();
	for (k = 0; k < ACTIVITY_BOARDS_MAX; k++)
		entry_clear(&a->b[k]);
	return a;
}

void activity_free(struct activity *a)
{
	if (!a)
		return;
	pthread_mutex_destroy(&a->mu);
	free(a);
}

/* Under mu. */
static struct entry *entry_find(struct activity *a, const char *board, uint64_t h)
{
	size_t k;

	for (k = 0; k < ACTIVITY_BOARDS_MAX; k++)
		if (a->b[k].hash == h && strcmp(a->b[k].name, board) == 0)
			return &a->b[k];
	return NULL;
}

/* Under mu: the board's entry, else a free one taken for it, else (evict) the least recently
 * used board's, given up; NULL when none may be taken. */
static struct entry *entry_take(struct activity *a, const char *board, uint64_t h,
				int64_t now_ms, bool evict)
{
	struct entry *e = entry_find(a, board, h), *old = NULL;
	size_t k;

	if (e)
		return e;
	for (k = 0; k < ACTIVITY_BOARDS_MAX && !e; k++) {
		if (!a->b[k].name[0])
			e = &a->b[k];
		else if (!old || a->b[k].used < old->used)
			old = &a->b[k];
	}
	if (!e && evict && old) {
		e = old;
		if (!a->first_evict)
			a->first_evict = now_ms > 0 ? now_ms : 1;
	}
	if (!e)
		return NULL;
	entry_clear(e);
	strcpy(e->name, board);
	e->hash = h;
	e->taken = e->used = now_ms;
	return e;
}

void activity_add(struct activity *a, const char *board, enum activity_series s, uint64_t n,
		  int64_t now_ms)
{
	int64_t m = now_ms / MINUTE_MS;
	uint64_t h = name_hash(board);
	struct entry *e;
	struct slot *sl;

	if (!a || !h || !n || (unsigned)s >= ACTIVITY_SERIES_ || now_ms < 0)
		return;
	pthread_mutex_lock(&a->mu);
	e = entry_take(a, board, h, now_ms, true);
	sl = &e->s[idx(m)];
	if (sl->minute != m) {
		memset(sl, 0, sizeof(*sl));
		sl->minute = m;
	}
	sl->n[s] += n;
	if (now_ms > e->used)
		e->used = now_ms;
	pthread_mutex_unlock(&a->mu);
}

void activity_note(struct activity *a, int metrics_id, const char *v1, const char *board,
		   uint64_t n)
{
	enum activity_series s;

	if (!a || !n || !v1 || !board)
		return;
	if (metrics_id == METRICS_CLAIMS && (!strcmp(v1, "fresh") || !strcmp(v1, "recovery")))
		s = ACTIVITY_CLAIMS;
	else if (metrics_id == METRICS_RUNS_FINISHED && !strcmp(v1, "finished"))
		s = ACTIVITY_COMPLETIONS;
	else if (metrics_id == METRICS_RUNS_FINISHED && !strcmp(v1, "failed"))
		s = ACTIVITY_FAILURES;
	else if (metrics_id == METRICS_REAPER_ACTIONS && strcmp(v1, "keep") != 0)
		s = ACTIVITY_REAPER;
	else
		return;
	activity_add(a, board, s, n, activity_now_ms());
}

bool activity_sampled(struct activity *a, const char *board, int64_t now_ms)
{
	int64_t m = now_ms / MINUTE_MS;
	uint64_t h = name_hash(board);
	struct entry *e;
	bool yes;

	if (!a || !h)
		return false;
	pthread_mutex_lock(&a->mu);
	e = entry_find(a, board, h);
	yes = e && e->g[idx(m)].minute == m && now_ms - e->sampled < ACTIVITY_FRESH_MS;
	pthread_mutex_unlock(&a->mu);
	return yes;
}

void activity_use(struct activity *a, const char *board, int64_t now_ms)
{
	uint64_t h = name_hash(board);
	struct entry *e;

	if (!a || !h)
		return;
	pthread_mutex_lock(&a->mu);
	if ((e = entry_find(a, board, h)) && now_ms > e->used)
		e->used = now_ms;
	pthread_mutex_unlock(&a->mu);
}

bool activity_has_room(struct activity *a, const char *board)
{
	uint64_t h = name_hash(board);
	bool yes;
	size_t k;

	if (!a || !h)
		return false;
	pthread_mutex_lock(&a->mu);
	yes = entry_find(a, board, h) != NULL;
	for (k = 0; k < ACTIVITY_BOARDS_MAX && !yes; k++)
		yes = !a->b[k].name[0];
	pthread_mutex_unlock(&a->mu);
	return yes;
}

static bool same_cols(const struct entry *e, const char *const *cols, size_t n)
{
	size_t c;

	if (e->n_cols != n)
		return false;
	for (c = 0; c < n; c++)
		if (strncmp(e->cols[c], cols[c], ACTIVITY_NAME_MAX) != 0)
			return false;
	return true;
}

void activity_sample(struct activity *a, const char *board, const char *const *cols,
		     const uint64_t *counts, size_t n, int64_t now_ms, bool use)
{
	int64_t m = now_ms / MINUTE_MS;
	uint64_t h = name_hash(board);
	struct entry *e;
	size_t k, c;

	if (!a || !h || now_ms < 0)
		return;
	if (n > ACTIVITY_COLS_MAX)
		n = ACTIVITY_COLS_MAX;
	pthread_mutex_lock(&a->mu);
	if (!(e = entry_take(a, board, h, now_ms, use))) {
		pthread_mutex_unlock(&a->mu);
		return;
	}
	if (!same_cols(e, cols, n)) { /* the gauge afresh; the counts stay */
		for (k = 0; k < ACTIVITY_MINUTES; k++)
			e->g[k].minute = -1;
		memset(e->cols, 0, sizeof(e->cols));
		e->n_cols = n;
		for (c = 0; c < n; c++)
			strncpy(e->cols[c], cols[c], ACTIVITY_NAME_MAX);
	}
	e->sampled = now_ms;
	if (use && now_ms > e->used)
		e->used = now_ms;
	e->g[idx(m)].minute = m;
	for (c = 0; c < n; c++)
		e->g[idx(m)].c[c] = counts[c];
	pthread_mutex_unlock(&a->mu);
}

void activity_read(struct activity *a, const char *board, int64_t now_ms, struct activity_view *v)
{
	int64_t m = now_ms / MINUTE_MS;
	uint64_t h = name_hash(board);
	const struct entry *e;
	size_t k, c;

	memset(v, 0, sizeof(*v));
	for (k = 0; k < ACTIVITY_MINUTES; k++)
		v->minute[k] = (m - (ACTIVITY_MINUTES - 1) + (int64_t)k) * MINUTE_MS;
	if (!a || !h)
		return;
	pthread_mutex_lock(&a->mu);
	if (!(e = entry_find(a, board, h))) {
		pthread_mutex_unlock(&a->mu);
		return;
	}
	/* Complete from the ring's start unless some board's entry was given up before this
	 * board took its own: it may have been this board's. */
	v->since = a->first_evict && a->first_evict <= e->taken ? e->taken : a->born;
	v->n_cols = e->n_cols;
	memcpy(v->cols, e->cols, sizeof(v->cols));
	for (k = 0; k < ACTIVITY_MINUTES; k++) {
		int64_t mk = v->minute[k] / MINUTE_MS;
		const struct slot *sl = &e->s[idx(mk)];
		const struct gslot *gs = &e->g[idx(mk)];

		if (mk < 0)
			continue;
		if (sl->minute == mk)
			memcpy(v->count[k], sl->n, sizeof(sl->n));
		if (gs->minute == mk) {
			v->sampled[k] = true;
			for (c = 0; c < e->n_cols; c++)
				v->gauge[k][c] = gs->c[c];
		}
	}
	pthread_mutex_unlock(&a->mu);
}
