/* Names, labels, markers and times as they arrive from outside. */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool charset_ok(const char *s, size_t max, const char *extra)
{
	size_t n;

	if (!s)
		return false;
	for (n = 0; s[n]; n++) {
		unsigned char ch = (unsigned char)s[n];
		if (n >= max)
			return false;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
			continue;
		if (!strchr(extra, ch))
			return false;
	}
	return n > 0;
}

bool core_id_valid(const char *s)
{
	return charset_ok(s, CORE_ID_MAX, "._:-");
}

bool core_name_valid(const char *s)
{
	return charset_ok(s, CORE_NAME_MAX, "._-");
}

/* Does the word v hold a byte that is not a marker's (0x20 and below, 0x7f and above)? Exact:
 * a byte below 0x21, a high bit, a byte equal to 0x7f. */
static bool marker_word_bad(uint64_t v)
{
	const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
	uint64_t del = v ^ (ones * 0x7f);

	return ((v | ((v - ones * 0x21) & ~v) | ((del - ones) & ~del)) & highs) != 0;
}

/* Every owned write checks its marker: eight bytes a step (a byte loop was ~180 instructions
 * a request of the claim cycle), the last one to seven as the word ending at the end (or
 * the bytes after good filler). */
bool core_marker_valid(const char *s)
{
	size_t n, i;
	uint64_t v;

	if (!s)
		return false;
	n = strnlen(s, CORE_MARKER_MAX + 1);
	if (n == 0 || n > CORE_MARKER_MAX)
		return false;
	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&v, s + i, 8);
		if (marker_word_bad(v))
			return false;
	}
	if (i == n)
		return true;
	v = 0x6161616161616161u; /* "aaaaaaaa" */
	if (n >= 8)
		memcpy(&v, s + n - 8, 8);
	else
		memcpy(&v, s, n);
	return !marker_word_bad(v);
}

bool core_marker_is_recovery(const char *marker)
{
	const char *p = CORE_RECOVERY_PREFIX;
	size_t i;

	if (!marker)
		return false;
	/* ASCII case-insensitive (no locale): "REAPER:x" is not a client's marker either. */
	for (i = 0; p[i]; i++) {
		unsigned char m = (unsigned char)marker[i];

		if (m >= 'A' && m <= 'Z')
			m = (unsigned char)(m - 'A' + 'a');
		if (m != (unsigned char)p[i])
			return false;
	}
	return true;
}

bool core_status_valid(const char *s)
{
	size_t n;

	if (!s)
		return false;
	for (n = 0; s[n]; n++)
		if (n >= CORE_STATUS_MAX || !((s[n] >= 'a' && s[n] <= 'z') || s[n] == '_'))
			return false;
	return n > 0;
}

size_t core_utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len, i;
	uint32_t c;

	if (n == 0)
		return 0;
	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		c = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* Unicode White_Space outside ASCII (the \s of the label rule). */
static bool unicode_space(uint32_t c)
{
	return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
	       c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool core_label_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t points = 0, len;
	uint32_t c;

	if (!s)
		return false;
	while (*p) {
		len = core_utf8_next(p, SIZE_MAX, &c); /* NUL-terminated: stops at it */
		if (!len)
			return false;
		if (c < 0x20 || c == 0x7f || c == ' ' || c == ',' || unicode_space(c))
			return false;
		if (++points > CORE_LABEL_MAX)
			return false;
		p += len;
	}
	return points > 0;
}

/* Days from civil date (Howard Hinnant's algorithm): no timegm() portability questions. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

/* 9999-12-31T23:59:59.999Z: the last instant with a four-digit year. */
#define TIME_FAST_END INT64_C(253402300800000)
/* 0000-01-01T00:00:00.000Z: the first. */
#define TIME_FIRST INT64_C(-62167219200000)

/* "00" .. "99": two digits per lookup (a time has seven two-digit fields). */
static const char two_digits[201] = "00010203040506070809101112131415161718192021222324"
				     "25262728293031323334353637383940414243444546474849"
				     "50515253545556575859606162636465666768697071727374"
				     "75767778798081828384858687888990919293949596979899";

static void put2(char *p, uint32_t v)
{
	memcpy(p, two_digits + 2 * v, 2);
}

/* Years 1970..9999 without gmtime_r and snprintf (every answer and log line writes times):
 * days to the civil date as in Howard Hinnant's days_from_civil inverse, for days >= 0, in
 * 32 bits (days < 2 932 897 here). */
static void time_format_fast(int64_t ms, char *buf)
{
	uint32_t days = (uint32_t)(ms / 86400000), rem = (uint32_t)(ms % 86400000);
	uint32_t z = days + 719468, era = z / 146097, doe = z - era * 146097;
	uint32_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	uint32_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
	uint32_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
	uint32_t y = yoe + era * 400 + (m <= 2), secs = rem / 1000, frac = rem % 1000;

	put2(buf, y / 100);
	put2(buf + 2, y % 100);
	buf[4] = '-';
	put2(buf + 5, m);
	buf[7] = '-';
	put2(buf + 8, d);
	buf[10] = 'T';
	put2(buf + 11, secs / 3600);
	buf[13] = ':';
	put2(buf + 14, secs / 60 % 60);
	buf[16] = ':';
	put2(buf + 17, secs % 60);
	buf[19] = '.';
	buf[20] = (char)('0' + frac / 100);
	put2(buf + 21, frac % 100);
	buf[23] = 'Z';
	buf[24] = '\0';
}

char *core_time_format(int64_t ms, char *buf)
{
	time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
	int millis = (int)(ms - (int64_t)secs * 1000);
	struct tm tm;
	char wide[96];

	if (ms >= 0 && ms < TIME_FAST_END) {
		/* The times of one answer mostly share their second: the thread's last one is
		 * kept, and only the milliseconds written again. */
		static _Thread_local int64_t last_sec = -1;
		static _Thread_local char last[20];
		uint32_t frac = (uint32_t)(ms % 1000);

		if (ms / 1000 != last_sec) {
			time_format_fast(ms, buf);
			memcpy(last, buf, sizeof last);
			last_sec = ms / 1000;
			return buf;
		}
		memcpy(buf, last, sizeof last); /* "YYYY-MM-DDTHH:MM:SS." */
		buf[20] = (char)('0' + frac / 100);
		put2(buf + 21, frac % 100);
		buf[23] = 'Z';
		buf[24] = '\0';
		return buf;
	}
	if (!gmtime_r(&secs, &tm)) {
		snprintf(buf, CORE_TIME_BUF, "1970-01-01T00:00:00.000Z");
		return buf;
	}
	/* Through a wide buffer: the compiler cannot know tm's fields are in range. */
	snprintf(wide, sizeof(wide), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
	snprintf(buf, CORE_TIME_BUF, "%.*s", CORE_TIME_BUF - 1, wide);
	return buf;
}

/* The days of month mo (1..12) of year y, leap years counted. */
static int month_days(int y, int mo)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return days[mo - 1] + (mo == 2 && leap);
}

static bool digits(const char *s, int n, int *out)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

bool core_time_parse(const char *s, int64_t *ms)
{
	int y, mo, d, h, mi, sec, frac = 0, oh, om, scale = 100;
	int64_t v;
	const char *p;

	if (!s || strlen(s) < 20)
		return false;
	if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
	    !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
	    s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
		return false;
	if (mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo) || h > 23 || mi > 59 || sec > 60)
		return false;
	p = s + 19;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9') {
			frac += (*p - '0') * scale;
			scale /= 10;
			p++;
		}
	}
	v = (days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec) *
		    1000 +
	    frac;
	if ((*p == '+' || *p == '-') && strlen(p) == 6 && digits(p + 1, 2, &oh) && p[3] == ':' &&
	    digits(p + 4, 2, &om) && oh <= 23 && om <= 59) {
		int64_t off = ((int64_t)oh * 60 + om) * 60000;

		v = *p == '+' ? v - off : v + off;
	} else if (!((*p == 'Z' || *p == 'z') && p[1] == '\0')) {
		return false;
	}
	/* An offset can carry an instant past either end of the four-digit years, which
	 * core_time_format could not write back in RFC 3339: it is held at that end. */
	*ms = v < TIME_FIRST ? TIME_FIRST : v >= TIME_FAST_END ? TIME_FAST_END - 1 : v;
	return true;
}

void core_strv_release(struct core_strv *sv)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = 0;
}

enum core_rc core_strv_push(struct core_strv *sv, const char *s)
{
	char **nv;
	char *copy = strdup(s);

	if (!copy)
		return CORE_ERR_NOMEM;
	nv = realloc(sv->v, (sv->n + 1) * sizeof(*nv));
	if (!nv) {
		free(copy);
		return CORE_ERR_NOMEM;
	}
	nv[sv->n++] = copy;
	sv->v = nv;
	return CORE_OK;
}

enum core_rc core_strv_copy(struct core_strv *dst, const struct core_strv *src)
{
	struct core_strv tmp = {0};
	size_t i;

	for (i = 0; src && i < src->n; i++) {
		if (core_strv_push(&tmp, src->v[i]) != CORE_OK) {
			core_strv_release(&tmp);
			return CORE_ERR_NOMEM;
		}
	}
	*dst = tmp;
	return CORE_OK;
}

bool core_strv_contains(const struct core_strv *sv, const char *s)
{
	size_t i;

	for (i = 0; sv && i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return true;
	return false;
}

bool core_strv_equal(const struct core_strv *a, const struct core_strv *b)
{
	size_t i;

	if (a->n != b->n)
		return false;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]) != 0)
			return false;
	return true;
}

void core_strv_dedup(struct core_strv *sv)
{
	size_t i, j, out = 0;

	for (i = 0; i < sv->n; i++) {
		bool seen = false;
		for (j = 0; j < out; j++)
			if (strcmp(sv->v[j], sv->v[i]) == 0)
				seen = true;
		if (seen)
			free(sv->v[i]);
		else
			sv->v[out++] = sv->v[i];
	}
	sv->n = out;
}

enum core_rc core_str_set(char **dst, const char *src)
{
	char *copy = NULL;

	if (src) {
		copy = strdup(src);
		if (!copy)
			return CORE_ERR_NOMEM;
	}
	free(*dst);
	*dst = copy;
	return CORE_OK;
}

void core_timespec_add_ns(struct timespec *ts, int64_t ns)
{
	int64_t n = (int64_t)ts->tv_nsec + ns % 1000000000LL;

	ts->tv_sec += (time_t)(ns / 1000000000LL + n / 1000000000LL);
	ts->tv_nsec = (long)(n % 1000000000LL);
}
