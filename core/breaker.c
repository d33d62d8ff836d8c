/* The breaker's rules (core.h): pure, the caller's clock and lock. */
#include "core/core.h"

#include <string.h>

void core_breaker_init(struct core_breaker *b, int64_t now_ms)
{
	memset(b, 0, sizeof(*b));
	b->since_ms = now_ms;
}

static void breaker_close(struct core_breaker *b, int64_t now_ms)
{
	b->open = false;
	b->gen++;
	b->since_ms = now_ms;
}

bool core_breaker_fail(struct core_breaker *b, uint64_t gen, int64_t now_ms)
{
	if (b->open || gen != b->gen)
		return false;
	b->open = true;
	b->opens++;
	b->since_ms = now_ms;
	b->probe_at_ms = now_ms; /* the first probe at once: the failure may have been a blip */
	b->backoff_ms = CORE_BREAKER_BACKOFF_MIN_MS;
	b->probes_failed = 0;
	return true;
}

int64_t core_breaker_probe_wait(const struct core_breaker *b, int64_t now_ms)
{
	if (!b->open || b->probing)
		return -1;
	return b->probe_at_ms > now_ms ? b->probe_at_ms - now_ms : 0;
}

bool core_breaker_probe_begin(struct core_breaker *b, int64_t now_ms)
{
	if (core_breaker_probe_wait(b, now_ms) != 0)
		return false;
	b->probing = true;
	b->probe_of = b->opens;
	return true;
}

bool core_breaker_probe_end(struct core_breaker *b, bool reached, int64_t now_ms)
{
	b->probing = false;
	if (!b->open || b->probe_of != b->opens)
		return false; /* closed meanwhile by other evidence (and maybe opened again since) */
	if (reached) {
		breaker_close(b, now_ms);
		return true;
	}
	b->probes_failed++;
	b->probe_at_ms = now_ms + b->backoff_ms;
	b->backoff_ms = b->backoff_ms * 2 > CORE_BREAKER_BACKOFF_MAX_MS
				? CORE_BREAKER_BACKOFF_MAX_MS
				: b->backoff_ms * 2;
	return false;
}

bool core_breaker_reached(struct core_breaker *b, int64_t now_ms)
{
	if (!b->open)
		return false;
	breaker_close(b, now_ms);
	return true;
}
