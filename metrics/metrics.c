/* The metrics table's renderings: the registry's counters, the scrape sink, and the text
 * format. See metrics.h. */
#include "metrics/metrics.h"
#include "metrics/activity.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct family {
	const char *name;
	enum metrics_kind kind;
	const char *labels;
	const char *const *v1, *const *v2;
	enum metrics_buckets buckets;
	const char *help;
};

static const struct family families[METRICS_COUNT_] = {
#define METRICS_ROW(id, k, n, l, a, b, bk, h) [id] = {n, k, l, a, b, bk, h},
	METRICS_TABLE(METRICS_ROW)
#undef METRICS_ROW
};

struct bucket_set {
	double scale; /* observed unit -> served unit */
	size_t n;
	uint64_t le[METRICS_BUCKETS_MAX];
};

static const struct bucket_set bucket_sets[] = {
	[METRICS_B_NONE] = {1, 0, {0}},
	/* 100 µs .. 10 s */
	[METRICS_B_HTTP_NS] = {1e-9, 15,
			       {100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
				25000000, 50000000, 100000000, 250000000, 500000000, 1000000000,
				2500000000, 10000000000}},
	/* 1 ms .. 5 min */
	[METRICS_B_PASS_US] = {1e-6, 12,
			       {1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000,
				10000000, 30000000, 60000000, 300000000}},
	[METRICS_B_WIDTH] = {1, 10, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}},
	/* 100 µs .. 10 s */
	[METRICS_B_MONGO_US] = {1e-6, 12,
				{100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
				 1000000, 10000000}},
};

const char *metrics_family_name(enum metrics_id id)
{
	return families[id].name;
}

enum metrics_kind metrics_family_kind(enum metrics_id id)
{
	return families[id].kind;
}

const char *metrics_family_labels(enum metrics_id id)
{
	return families[id].labels;
}

const char *const *metrics_family_values(enum metrics_id id, size_t k)
{
	return k == 0 ? families[id].v1 : k == 1 ? families[id].v2 : NULL;
}

/* ---- histograms ---- */

void metrics_hist_observe(struct metrics_hist *h, enum metrics_buckets b, uint64_t v)
{
	const struct bucket_set *bs = &bucket_sets[b];
	size_t i = 0;

	while (i < bs->n && v > bs->le[i])
		i++;
	atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

/* ---- the registry ---- */

struct metrics {
	/* Per registry family: n1 * n2 series, counters or histograms. */
	atomic_uint_least64_t *count[METRICS_COUNT_];
	struct metrics_hist *hist[METRICS_COUNT_];
	size_t n1[METRICS_COUNT_], n2[METRICS_COUNT_];
	struct activity *activity; /* the charts' per-minute ring (activity.h) */
};

static size_t values_n(const char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

struct metrics *metrics_new(void)
{
	struct metrics *m = calloc(1, sizeof(*m));
	size_t id;

	if (!m || !(m->activity = activity_new())) {
		free(m);
		return NULL;
	}
	for (id = 0; id < METRICS_COUNT_; id++) {
		const struct family *f = &families[id];
		size_t n;

		if (!f->v1)
			continue;
		m->n1[id] = values_n(f->v1);
		m->n2[id] = f->v2 ? values_n(f->v2) : 1;
		n = m->n1[id] * m->n2[id];
		if (f->kind == METRICS_HISTOGRAM)
			m->hist[id] = calloc(n, sizeof(struct metrics_hist));
		else
			m->count[id] = calloc(n, sizeof(atomic_uint_least64_t));
		if (!m->hist[id] && !m->count[id]) {
			metrics_free(m);
			return NULL;
		}
	}
	return m;
}

void metrics_free(struct metrics *m)
{
	size_t id;

	if (!m)
		return;
	for (id = 0; id < METRICS_COUNT_; id++) {
		free(m->count[id]);
		free(m->hist[id]);
	}
	activity_free(m->activity);
	free(m);
}

static ptrdiff_t value_index(const char *const *v, const char *s)
{
	ptrdiff_t i;

	for (i = 0; v[i]; i++)
		if (strcmp(v[i], s ? s : "") == 0)
			return i;
	return -1;
}

/* The series index of (v1, v2) in registry family id; -1 when a value is unknown. */
static ptrdiff_t series_index(const struct metrics *m, enum metrics_id id, const char *v1,
			      const char *v2)
{
	const struct family *f = &families[id];
	ptrdiff_t i, k = 0;

	if (!f->v1)
		return -1;
	i = value_index(f->v1, v1);
	if (f->v2)
		k = value_index(f->v2, v2);
	if (i < 0 || k < 0)
		return -1;
	return i * (ptrdiff_t)m->n2[id] + k;
}

void metrics_add(struct metrics *m, enum metrics_id id, const char *v1, const char *v2, uint64_t n)
{
	ptrdiff_t i;

	if (!m)
		return;
	i = series_index(m, id, v1, v2);
	assert(i >= 0 && m->count[id]);
	if (i >= 0 && m->count[id])
		atomic_fetch_add_explicit(&m->count[id][i], n, memory_order_relaxed);
}

void metrics_add_board(struct metrics *m, enum metrics_id id, const char *v1, const char *board,
		       uint64_t n)
{
	if (!m)
		return;
	metrics_add(m, id, v1, NULL, n);
	activity_note(m->activity, id, v1, board, n);
}

struct activity *metrics_activity(struct metrics *m)
{
	return m ? m->activity : NULL;
}

void metrics_observe(struct metrics *m, enum metrics_id id, const char *v1, const char *v2,
		     uint64_t v)
{
	ptrdiff_t i;

	if (!m)
		return;
	i = series_index(m, id, v1, v2);
	assert(i >= 0 && m->hist[id]);
	if (i >= 0 && m->hist[id])
		metrics_hist_observe(&m->hist[id][i], families[id].buckets, v);
}

uint64_t metrics_get(const struct metrics *m, enum metrics_id id, const char *v1, const char *v2)
{
	ptrdiff_t i = m ? series_index(m, id, v1, v2) : -1;

	if (i < 0 || !m->count[id])
		return 0;
	return atomic_load_explicit(&m->count[id][i], memory_order_relaxed);
}

/* ---- the sink ---- */

struct sample {
	enum metrics_id id;
	char *labels; /* rendered `a="x",b="y"` (no braces); "" when none */
	double value;
	uint64_t bucket[METRICS_BUCKETS_MAX + 1]; /* histograms: non-cumulative */
	uint64_t sum;
};

struct metrics_sink {
	struct sample *v;
	size_t n, cap;
	bool oom;
};

struct metrics_sink *metrics_sink_new(void)
{
	return calloc(1, sizeof(struct metrics_sink));
}

void metrics_sink_free(struct metrics_sink *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n; i++)
		free(s->v[i].labels);
	free(s->v);
	free(s);
}

/* A growing text buffer; `oom` sticks. */
struct text {
	char *p;
	size_t len, cap;
	bool oom;
};

static void text_put(struct text *t, const char *s, size_t n)
{
	if (t->oom)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		char *np;

		while (cap < t->len + n + 1)
			cap *= 2;
		np = realloc(t->p, cap);
		if (!np) {
			t->oom = true;
			return;
		}
		t->p = np;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

static void text_printf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_printf(struct text *t, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof buf) {
		t->oom = true; /* no line of ours is this long */
		return;
	}
	text_put(t, buf, (size_t)n);
}

/* `name="value"` pairs for the family's label names; values escaped as the format says. */
static char *labels_render(enum metrics_id id, const char *const *vals)
{
	const char *names = families[id].labels;
	struct text t = {0};
	size_t k = 0;

	text_put(&t, "", 0);
	while (*names) {
		const char *comma = strchr(names, ',');
		size_t nl = comma ? (size_t)(comma - names) : strlen(names);
		const char *v = vals && vals[k] ? vals[k] : "";

		if (k)
			text_put(&t, ",", 1);
		text_put(&t, names, nl);
		text_put(&t, "=\"", 2);
		for (; *v; v++) {
			if (*v == '\\')
				text_put(&t, "\\\\", 2);
			else if (*v == '"')
				text_put(&t, "\\\"", 2);
			else if (*v == '\n')
				text_put(&t, "\\n", 2);
			else
				text_put(&t, v, 1);
		}
		text_put(&t, "\"", 1);
		k++;
		names += nl + (comma ? 1 : 0);
	}
	if (t.oom) {
		free(t.p);
		return NULL;
	}
	return t.p;
}

static struct sample *sample_push(struct metrics_sink *s, enum metrics_id id,
				  const char *const *labels)
{
	struct sample *x;

	if (!s || s->oom)
		return NULL;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct sample *nv = realloc(s->v, cap * sizeof(*nv));

		if (!nv) {
			s->oom = true;
			return NULL;
		}
		s->v = nv;
		s->cap = cap;
	}
	x = &s->v[s->n];
	memset(x, 0, sizeof(*x));
	x->id = id;
	x->labels = labels_render(id, labels);
	if (!x->labels) {
		s->oom = true;
		return NULL;
	}
	s->n++;
	return x;
}

void metrics_sink_value(struct metrics_sink *s, enum metrics_id id, const char *const *labels,
			double v)
{
	struct sample *x = sample_push(s, id, labels);

	if (x)
		x->value = v;
}

bool metrics_sink_get(const struct metrics_sink *s, enum metrics_id id, const char *const *labels,
		      double *v)
{
	char *want;
	size_t i;
	bool found = false;

	if (!s || !(want = labels_render(id, labels)))
		return false;
	for (i = 0; i < s->n && !found; i++)
		if (s->v[i].id == id && strcmp(s->v[i].labels, want) == 0) {
			*v = s->v[i].value;
			found = true;
		}
	free(want);
	return found;
}

void metrics_sink_hist(struct metrics_sink *s, enum metrics_id id, const char *const *labels,
		       const struct metrics_hist *h)
{
	struct sample *x = sample_push(s, id, labels);
	size_t i;

	if (!x)
		return;
	for (i = 0; i <= METRICS_BUCKETS_MAX; i++)
		x->bucket[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
	x->sum = atomic_load_explicit(&h->sum, memory_order_relaxed);
}

/* ---- rendering ---- */

static void value_put(struct text *t, enum metrics_kind kind, double v)
{
	if (kind == METRICS_COUNTER && v >= 0 && v < 1e15 && v == (double)(uint64_t)v)
		text_printf(t, "%" PRIu64 "\n", (uint64_t)v);
	else
		text_printf(t, "%.10g\n", v);
}

static void hist_put(struct text *t, enum metrics_id id, const char *labels,
		     const uint64_t *bucket, uint64_t sum)
{
	const struct family *f = &families[id];
	const struct bucket_set *bs = &bucket_sets[f->buckets];
	const char *sep = *labels ? "," : "";
	uint64_t cum = 0;
	size_t i;

	for (i = 0; i < bs->n; i++) {
		cum += bucket[i];
		text_printf(t, "%s_bucket{%s%sle=\"%.10g\"} %" PRIu64 "\n", f->name, labels, sep,
			    (double)bs->le[i] * bs->scale, cum);
	}
	cum += bucket[bs->n];
	text_printf(t, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", f->name, labels, sep, cum);
	if (*labels) {
		text_printf(t, "%s_sum{%s} %.10g\n", f->name, labels, (double)sum * bs->scale);
		text_printf(t, "%s_count{%s} %" PRIu64 "\n", f->name, labels, cum);
	} else {
		text_printf(t, "%s_sum %.10g\n", f->name, (double)sum * bs->scale);
		text_printf(t, "%s_count %" PRIu64 "\n", f->name, cum);
	}
}

static void series_put(struct text *t, enum metrics_id id, const char *labels, double v)
{
	if (*labels)
		text_printf(t, "%s{%s} ", families[id].name, labels);
	else
		text_printf(t, "%s ", families[id].name);
	value_put(t, families[id].kind, v);
}

/* The registry's series of family id, every label value (zeros included). */
static void registry_put(struct text *t, const struct metrics *m, enum metrics_id id)
{
	const struct family *f = &families[id];
	size_t i, k;

	for (i = 0; i < m->n1[id]; i++) {
		for (k = 0; k < m->n2[id]; k++) {
			const char *vals[2] = {f->v1[i], f->v2 ? f->v2[k] : NULL};
			size_t idx = i * m->n2[id] + k;
			char *labels = labels_render(id, vals);

			if (!labels) {
				t->oom = true;
				return;
			}
			if (f->kind == METRICS_HISTOGRAM) {
				uint64_t b[METRICS_BUCKETS_MAX + 1];
				size_t j;

				for (j = 0; j <= METRICS_BUCKETS_MAX; j++)
					b[j] = atomic_load_explicit(&m->hist[id][idx].bucket[j],
								    memory_order_relaxed);
				hist_put(t, id, labels,
					 b, atomic_load_explicit(&m->hist[id][idx].sum,
								 memory_order_relaxed));
			} else {
				series_put(t, id, labels,
					   (double)atomic_load_explicit(&m->count[id][idx],
									memory_order_relaxed));
			}
			free(labels);
		}
	}
}

static const char *kind_name(enum metrics_kind k)
{
	return k == METRICS_COUNTER ? "counter" : k == METRICS_GAUGE ? "gauge" : "histogram";
}

bool metrics_render(const struct metrics *m, const struct metrics_sink *s, char **out,
		    size_t *len)
{
	struct text t = {0};
	size_t id, i;

	*out = NULL;
	*len = 0;
	if (s && s->oom)
		return false;
	for (id = 0; id < METRICS_COUNT_; id++) {
		const struct family *f = &families[id];
		bool reg = m && f->v1, any = reg;

		for (i = 0; !any && s && i < s->n; i++)
			any = s->v[i].id == id;
		if (!any)
			continue;
		text_printf(&t, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name,
			    kind_name(f->kind));
		if (reg)
			registry_put(&t, m, (enum metrics_id)id);
		for (i = 0; s && i < s->n; i++) {
			const struct sample *x = &s->v[i];

			if (x->id != id)
				continue;
			if (f->kind == METRICS_HISTOGRAM)
				hist_put(&t, x->id, x->labels, x->bucket, x->sum);
			else
				series_put(&t, x->id, x->labels, x->value);
		}
	}
	if (t.oom || !t.p) {
		free(t.p);
		return false;
	}
	*out = t.p;
	*len = t.len;
	return true;
}
