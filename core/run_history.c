/* Runs as a record (DESIGN §20): the output tail's rule, the history's order and cursor, and
 * which runs a card's bounded history may retire. Pure: both twins and the API call these. */
#include "core/core.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const known_statuses[] = {
	CORE_RUN_QUEUED,   CORE_RUN_RUNNING, CORE_RUN_PAUSED_HUMAN,     CORE_RUN_PAUSED_OPERATOR,
	CORE_RUN_FINISHED, CORE_RUN_FAILED,  CORE_RUN_FAILED_RESUMABLE, CORE_RUN_CANCELLED,
};

bool core_run_status_known(const char *s)
{
	size_t i;

	for (i = 0; s && i < sizeof(known_statuses) / sizeof(known_statuses[0]); i++)
		if (strcmp(s, known_statuses[i]) == 0)
			return true;
	return false;
}

bool core_run_output_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, k;
	uint32_t cp;

	if (!s)
		return false;
	while (i < len) {
		k = p[i] ? core_utf8_next(p + i, len - i, &cp) : 0; /* no NUL in an output */
		if (!k)
			return false;
		i += k;
	}
	return true;
}

enum core_rc core_run_output_append(const char *old, const char *text, size_t max, char **out)
{
	size_t lo = old ? strlen(old) : 0, lt = strlen(text), total, skip, cut;
	char *s;

	*out = NULL;
	if (!core_run_output_valid(text, lt))
		return CORE_ERR_BAD_REQUEST;
	total = lo + lt;
	skip = total > max ? total - max : 0;
	/* Never start inside a code point: drop its continuation bytes too. */
	while (skip < total) {
		unsigned char b = (unsigned char)(skip < lo ? old[skip] : text[skip - lo]);

		if ((b & 0xc0) != 0x80)
			break;
		skip++;
	}
	if (skip >= total)
		return CORE_OK;
	s = malloc(total - skip + 1);
	if (!s)
		return CORE_ERR_NOMEM;
	cut = 0;
	if (skip < lo) {
		cut = lo - skip;
		memcpy(s, old + skip, cut);
		memcpy(s + cut, text, lt);
	} else {
		memcpy(s, text + (skip - lo), total - skip);
	}
	s[total - skip] = '\0';
	*out = s;
	return CORE_OK;
}

static int run_cmp(const struct core_run *a, const struct core_run *b)
{
	if (a->created_at != b->created_at)
		return a->created_at > b->created_at ? -1 : 1;
	return -strcmp(a->id ? a->id : "", b->id ? b->id : "");
}

int core_run_newer_cmp(const void *a, const void *b)
{
	return run_cmp(*(const struct core_run *const *)a, *(const struct core_run *const *)b);
}

bool core_run_after(const struct core_run *r, int64_t at, const char *id)
{
	if (r->created_at != at)
		return r->created_at < at;
	return strcmp(r->id ? r->id : "", id) < 0;
}

void core_run_cursor_format(const struct core_run *r, char *buf, size_t cap)
{
	snprintf(buf, cap, "%" PRId64 ":%s", r->created_at, r->id ? r->id : "");
}

bool core_run_cursor_parse(const char *s, int64_t *at, const char **id)
{
	const char *colon;
	char *end;
	long long v;

	if (!s || s[0] < '0' || s[0] > '9')
		return false;
	colon = strchr(s, ':');
	if (!colon || !core_id_valid(colon + 1))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end != colon)
		return false;
	*at = (int64_t)v;
	*id = colon + 1;
	return true;
}

bool core_run_retirable(const struct core_run *r, const struct core_card *c)
{
	if (!r || r->pruned)
		return false;
	if (c && c->last_run_id && r->id && strcmp(c->last_run_id, r->id) == 0)
		return false;
	return core_run_status_final(r->status) || !core_run_of_claim(r, c);
}

void core_run_retire(struct core_run *r)
{
	r->pruned = true;
	free(r->result);
	free(r->error);
	free(r->output);
	r->result = r->error = r->output = NULL;
}
