/* Log-bucketed latency histograms (the HdrHistogram idea, fixed precision): exact below
 * 64 us, then BENCH_LAT_SUB linear sub-buckets per power of two. */
#include "bench/bench.h"

static unsigned lat_log2(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

static size_t lat_index(uint64_t us)
{
	unsigned e;
	size_t i;

	if (us < 64)
		return (size_t)us;
	e = lat_log2(us); /* >= 6 */
	i = 64 + (size_t)(e - 6) * BENCH_LAT_SUB + (size_t)((us >> (e - 5)) & (BENCH_LAT_SUB - 1));
	return i < BENCH_LAT_BUCKETS ? i : BENCH_LAT_BUCKETS - 1;
}

/* The largest value that falls in bucket i. */
static uint64_t lat_upper(size_t i)
{
	size_t e, sub;

	if (i < 64)
		return i;
	e = 6 + (i - 64) / BENCH_LAT_SUB;
	sub = (i - 64) % BENCH_LAT_SUB;
	return ((uint64_t)(BENCH_LAT_SUB + sub + 1) << (e - 5)) - 1;
}

void bench_lat_record(struct bench_lat *l, uint64_t us)
{
	l->n++;
	l->sum_us += us;
	if (us > l->max_us)
		l->max_us = us;
	l->b[lat_index(us)]++;
}

void bench_lat_merge(struct bench_lat *dst, const struct bench_lat *src)
{
	size_t i;

	dst->n += src->n;
	dst->sum_us += src->sum_us;
	if (src->max_us > dst->max_us)
		dst->max_us = src->max_us;
	for (i = 0; i < BENCH_LAT_BUCKETS; i++)
		dst->b[i] += src->b[i];
}

uint64_t bench_lat_quantile(const struct bench_lat *l, double q)
{
	uint64_t rank, seen = 0, up;
	size_t i;

	if (!l->n)
		return 0;
	rank = (uint64_t)(q * (double)l->n + 0.5);
	if (rank < 1)
		rank = 1;
	if (rank > l->n)
		rank = l->n;
	for (i = 0; i < BENCH_LAT_BUCKETS; i++) {
		seen += l->b[i];
		if (seen >= rank) {
			up = lat_upper(i);
			return up < l->max_us ? up : l->max_us;
		}
	}
	return l->max_us;
}
