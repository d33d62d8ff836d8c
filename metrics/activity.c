/* activity — the per-minute ring of the last hour (activity.h). One mutex guards it: an
 * event is a few adds, far from the request path's cost. */
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

struct gboard {
	char name[ACTIVITY_NAME_MAX + 1]; /* "": unused */
	int64_t last;                     /* ms of the last sample (eviction order, freshness) */
	size_t n_cols;
	char cols[ACTIVITY_COLS_MAX][ACTIVITY_NAME_MAX + 1];
	struct gslot s[ACTIVITY_MINUTES];
};

struct activity {
	pthread_mutex_t mu;
	struct slot s[ACTIVITY_MINUTES];
	struct gboard b[ACTIVITY_BOARDS_MAX];
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

struct activity *activity_new(void)
{
	struct activity *a = calloc(1, sizeof(*a));
	size_t i, k;

	if (!a)
		return NULL;
	pthread_mutex_init(&a->mu, NULL);
	for (i = 0; i < ACTIVITY_MINUTES; i++) {
		a->s[i].minute = -1;
		for (k = 0; k < ACTIVITY_BOARDS_MAX; k++)
			a->b[k].s[i].minute = -1;
	}
	return a;
}

void activity_free(struct activity *a)
{
	if (!a)
		return;
	pthread_mutex_destroy(&a->mu);
	free(a);
}

void activity_add(struct activity *a, enum activity_series s, uint64_t n, int64_t now_ms)
{
	int64_t m = now_ms / MINUTE_MS;
	struct slot *sl;

	if (!a || !n || (unsigned)s >= ACTIVITY_SERIES_ || now_ms < 0)
		return;
	pthread_mutex_lock(&a->mu);
	sl = &a->s[idx(m)];
	if (sl->minute != m) {
		memset(sl, 0, sizeof(*sl));
		sl->minute = m;
	}
	sl->n[s] += n;
	pthread_mutex_unlock(&a->mu);
}

void activity_note(struct activity *a, int metrics_id, const char *v1, uint64_t n)
{
	enum activity_series s;

	if (!a || !n || !v1)
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
	activity_add(a, s, n, activity_now_ms());
}

static struct gboard *board_find(struct activity *a, const char *board)
{
	size_t k;

	for (k = 0; k < ACTIVITY_BOARDS_MAX; k++)
		if (a->b[k].name[0] && strcmp(a->b[k].name, board) == 0)
			return &a->b[k];
	return NULL;
}

bool activity_sampled(struct activity *a, const char *board, int64_t now_ms)
{
	int64_t m = now_ms / MINUTE_MS;
	struct gboard *g;
	bool yes;

	if (!a || !board)
		return false;
	pthread_mutex_lock(&a->mu);
	g = board_find(a, board);
	yes = g && g->s[idx(m)].minute == m && now_ms - g->last < ACTIVITY_FRESH_MS;
	pthread_mutex_unlock(&a->mu);
	return yes;
}

static bool same_cols(const struct gboard *g, const char *const *cols, size_t n)
{
	size_t c;

	if (g->n_cols != n)
		return false;
	for (c = 0; c < n; c++)
		if (strncmp(g->cols[c], cols[c], ACTIVITY_NAME_MAX) != 0)
			return false;
	return true;
}

void activity_sample(struct activity *a, const char *board, const char *const *cols,
		     const uint64_t *counts, size_t n, int64_t now_ms)
{
	int64_t m = now_ms / MINUTE_MS;
	struct gboard *g;
	size_t k, c;

	if (!a || !board || now_ms < 0 || strlen(board) > ACTIVITY_NAME_MAX)
		return;
	if (n > ACTIVITY_COLS_MAX)
		n = ACTIVITY_COLS_MAX;
	pthread_mutex_lock(&a->mu);
	g = board_find(a, board);
	if (!g) { /* a free entry, else the least recently sampled board's */
		g = &a->b[0];
		for (k = 0; k < ACTIVITY_BOARDS_MAX; k++) {
			if (!a->b[k].name[0]) {
				g = &a->b[k];
				break;
			}
			if (a->b[k].last < g->last)
				g = &a->b[k];
		}
		g->name[0] = '\0';
	}
	if (!g->name[0] || !same_cols(g, cols, n)) {
		memset(g, 0, sizeof(*g));
		for (k = 0; k < ACTIVITY_MINUTES; k++)
			g->s[k].minute = -1;
		strcpy(g->name, board);
		g->n_cols = n;
		for (c = 0; c < n; c++)
			strncpy(g->cols[c], cols[c], ACTIVITY_NAME_MAX);
	}
	g->last = now_ms;
	g->s[idx(m)].minute = m;
	for (c = 0; c < n; c++)
		g->s[idx(m)].c[c] = counts[c];
	pthread_mutex_unlock(&a->mu);
}

void activity_read(struct activity *a, const char *board, int64_t now_ms, struct activity_view *v)
{
	int64_t m = now_ms / MINUTE_MS;
	const struct gboard *g;
	size_t k, c;

	memset(v, 0, sizeof(*v));
	for (k = 0; k < ACTIVITY_MINUTES; k++)
		v->minute[k] = (m - (ACTIVITY_MINUTES - 1) + (int64_t)k) * MINUTE_MS;
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	for (k = 0; k < ACTIVITY_MINUTES; k++) {
		int64_t mk = v->minute[k] / MINUTE_MS;
		const struct slot *sl = &a->s[idx(mk)];

		if (mk >= 0 && sl->minute == mk)
			memcpy(v->count[k], sl->n, sizeof(sl->n));
	}
	g = board ? board_find(a, board) : NULL;
	if (g) {
		v->n_cols = g->n_cols;
		memcpy(v->cols, g->cols, sizeof(v->cols));
		for (k = 0; k < ACTIVITY_MINUTES; k++) {
			int64_t mk = v->minute[k] / MINUTE_MS;
			const struct gslot *gs = &g->s[idx(mk)];

			if (mk >= 0 && gs->minute == mk) {
				v->sampled[k] = true;
				for (c = 0; c < g->n_cols; c++)
					v->gauge[k][c] = gs->c[c];
			}
		}
	}
	pthread_mutex_unlock(&a->mu);
}
